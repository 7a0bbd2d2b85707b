//! The JSON Schemas of the report tools and of `manage_task`, as a provider's tool list
//! declares them to the model. Each schema is a flat draft-07 style object schema
//! (`required` listed, `additionalProperties: false`, enums for the fixed values, no
//! `oneOf`, which not every provider accepts), written to match the serde type that
//! parses the call ([`Report::parse`](crate::reports::Report::parse), [`ManageTask`](crate::manage_task::ManageTask)); a test keeps the
//! two from drifting.

use serde::Serialize;
use serde_json::{json, Value};

/// One tool as the model sees it: a name, what it is for, and its parameters' schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpecJson {
    /// The tool's name (one of [`REPORT_TOOLS`](crate::reports::REPORT_TOOLS), or `manage_task`).
    pub name: &'static str,
    /// One or two sentences for the model.
    pub description: &'static str,
    /// The arguments' JSON Schema (an object schema).
    pub parameters: Value,
}

fn spec(name: &'static str, description: &'static str, parameters: Value) -> ToolSpecJson {
    ToolSpecJson {
        name,
        description,
        parameters,
    }
}

fn strings(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "description": description})
}

fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

const FINDING_SEVERITIES: [&str; 4] = ["critical", "blocking", "degraded", "polish"];

/// The spec of a report tool ([`REPORT_TOOLS`](crate::reports::REPORT_TOOLS)) or of
/// `manage_task`; `None` for any other name.
pub fn tool_spec(name: &str) -> Option<ToolSpecJson> {
    Some(match name {
        "manage_task" => spec(
            "manage_task",
            "Add, modify or remove one task of the implementation plan. \
             `add` needs task_id, description, value and acceptance (optionally dependencies, phase, files_expected, prd_section); \
             `modify` needs task_id, field and new_value; `remove` needs task_id only.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["add", "modify", "remove"], "description": "What to do with the task."},
                    "task_id": text("The task's id, e.g. `T3`, `INT-2`, `PREP-1` (new for add, existing for modify and remove)."),
                    "description": text("add: what to build."),
                    "value": text("add: why it matters to the user."),
                    "acceptance": text("add: how to verify it is done."),
                    "dependencies": strings("add: ids of existing tasks that must be done first."),
                    "phase": text("add: grouping, e.g. `foundation`, `core`."),
                    "files_expected": strings("add: files the task will create or change."),
                    "prd_section": text("add: the PRD section it traces to, e.g. `§2.1`."),
                    "field": {
                        "type": "string",
                        "enum": ["description", "value", "acceptance", "dependencies", "status"],
                        "description": "modify: the field to change."
                    },
                    "new_value": {
                        "type": ["string", "array"],
                        "items": {"type": "string"},
                        "description": "modify: the new value; a list of task ids for `dependencies`, `descoped` or `pending` for `status`, text otherwise."
                    },
                    "last": {"type": "boolean", "description": "true on your last plan change: when it is accepted your task ends (no `complete` needed) unless the instructions name a report still to make."}
                },
                "required": ["action", "task_id"],
                "additionalProperties": false
            }),
        ),
        "report_task_complete" => spec(
            "report_task_complete",
            "Report that the task you were given is complete, with the files you created and changed. \
             Call it only for your own task, once its acceptance criteria hold.",
            json!({
                "type": "object",
                "properties": {
                    "task_id": text("The id of the task you were given."),
                    "files_created": strings("New files."),
                    "files_modified": strings("Existing files changed."),
                    "value_verified": text("How you checked that the task delivers its stated value."),
                    "notes": text("Anything the next person should know.")
                },
                "required": ["task_id", "files_created", "files_modified"],
                "additionalProperties": false
            }),
        ),
        "report_eval_finding" => spec(
            "report_eval_finding",
            "Report one problem found while using the deliverable as its user would. \
             Critical and blocking findings become tasks.",
            json!({
                "type": "object",
                "properties": {
                    "severity": {"type": "string", "enum": FINDING_SEVERITIES, "description": "critical: breaks the value; blocking: stops a user; degraded: works, worse; polish: cosmetic."},
                    "description": text("What is wrong."),
                    "user_impact": text("How it affects the user."),
                    "suggested_fix": text("What should be done."),
                    "evidence": text("The error text or what was seen.")
                },
                "required": ["severity", "description", "user_impact"],
                "additionalProperties": false
            }),
        ),
        "report_vrc" => spec(
            "report_vrc",
            "Submit a Vision Reality Check: how much of the vision's value is delivered now, what is missing and what to do next.",
            json!({
                "type": "object",
                "properties": {
                    "value_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "0.0 to 1.0: the share of the vision's value delivered."},
                    "deliverables_verified": {"type": "integer", "minimum": 0, "description": "Deliverables of the vision verified to work."},
                    "deliverables_total": {"type": "integer", "minimum": 0, "description": "Deliverables the vision names."},
                    "deliverables_blocked": {"type": "integer", "minimum": 0, "description": "Deliverables that cannot be finished now."},
                    "gaps": {
                        "type": "array",
                        "description": "Value still missing.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": text("A short id for the gap."),
                                "description": text("What is missing."),
                                "severity": {"type": "string", "enum": FINDING_SEVERITIES, "description": "How bad the gap is."},
                                "suggested_task": text("A task that would close it.")
                            },
                            "required": ["id", "description", "severity"],
                            "additionalProperties": false
                        }
                    },
                    "recommendation": {"type": "string", "enum": ["CONTINUE", "COURSE_CORRECT", "DESCOPE", "SHIP_READY"], "description": "What the loop should do next."},
                    "summary": text("One paragraph.")
                },
                "required": ["value_score", "deliverables_verified", "deliverables_total", "recommendation", "summary"],
                "additionalProperties": false
            }),
        ),
        "report_triage" => spec(
            "report_triage",
            "Group the failing verifications by root cause, most important first. \
             Name each failing verification in exactly one root cause.",
            json!({
                "type": "object",
                "properties": {
                    "root_causes": {
                        "type": "array",
                        "description": "The causes, each with the failing verification ids it explains.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "cause": text("The cause."),
                                "affected_tests": strings("Ids of the failing verifications it explains."),
                                "priority": {"type": "integer", "minimum": 0, "description": "Lower is fixed first."},
                                "fix_suggestion": text("What to try.")
                            },
                            "required": ["cause", "affected_tests"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["root_causes"],
                "additionalProperties": false
            }),
        ),
        "report_course_correction" => spec(
            "report_course_correction",
            "Declare the course correction you made (change the tasks themselves with manage_task in the same session). \
             `escalate` stops the sprint for a person; `regenerate_tests` discards the verifications so they are written again.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["restructure", "descope", "new_tasks", "regenerate_tests", "escalate"], "description": "The kind of correction."},
                    "reason": text("Why this correction.")
                },
                "required": ["action", "reason"],
                "additionalProperties": false
            }),
        ),
        "request_human_action" => spec(
            "request_human_action",
            "Ask a person for something only a person can do (an account, a token, hardware); the task waits until it is done.",
            json!({
                "type": "object",
                "properties": {
                    "action": text("What the person needs to do."),
                    "instructions": text("Step by step, for a non-specialist."),
                    "verification_command": text("A shell command that succeeds once it is done."),
                    "blocked_task_id": text("The id of the task that waits for it.")
                },
                "required": ["action", "instructions", "blocked_task_id"],
                "additionalProperties": false
            }),
        ),
        "report_research" => spec(
            "report_research",
            "Submit what external research found about failures the fixes could not solve: what to do differently, and where it comes from.",
            json!({
                "type": "object",
                "properties": {
                    "topic": text("What was researched."),
                    "findings": text("Actionable findings: what changed, the current approach, workarounds."),
                    "sources": strings("URLs or source descriptions."),
                    "affected_verifications": strings("Ids of the verifications this applies to.")
                },
                "required": ["topic", "findings", "sources"],
                "additionalProperties": false
            }),
        ),
        "report_vision_validation" => spec(
            "report_vision_validation",
            "Report whether the vision is sound enough to build on. \
             Any HARD issue means NEEDS_REVISION; NEEDS_REVISION needs at least one issue.",
            json!({
                "type": "object",
                "properties": {
                    "verdict": {"type": "string", "enum": ["PASS", "NEEDS_REVISION"], "description": "PASS: build on it; NEEDS_REVISION: the vision must be revised first."},
                    "issues": {
                        "type": "array",
                        "description": "The issues found (may be empty for PASS).",
                        "items": {
                            "type": "object",
                            "properties": {
                                "severity": {"type": "string", "enum": ["HARD", "SOFT"], "description": "HARD: building on it would waste the sprint; SOFT: worth fixing, not blocking."},
                                "description": text("What is wrong with the vision."),
                                "suggestion": text("How to revise it.")
                            },
                            "required": ["severity", "description"],
                            "additionalProperties": false
                        }
                    },
                    "summary": text("One paragraph.")
                },
                "required": ["verdict", "issues", "summary"],
                "additionalProperties": false
            }),
        ),
        "report_discovery" => spec(
            "report_discovery",
            "Submit what you found about the project: what it delivers, what exists, the tools and services it needs and how its value will be proven.",
            json!({
                "type": "object",
                "properties": {
                    "deliverable": text("What the vision asks to deliver, in one sentence."),
                    "project_type": text("e.g. `cli`, `web_app`, `library`, `report`."),
                    "codebase_state": {"type": "string", "enum": ["greenfield", "existing"], "description": "greenfield: nothing exists yet; existing: the sprint changes an existing codebase."},
                    "tools": strings("Tools the work needs (e.g. `cargo`, `python3`, `psql`)."),
                    "services": {
                        "type": "array",
                        "description": "Services the deliverable needs running (empty if none).",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": text("A unique name, e.g. `api`, `postgres`."),
                                "check": {"type": "string", "pattern": "^(http|tcp)://", "description": "`http://host:port/path` (a GET that answers 200) or `tcp://host:port` (a port that accepts connections)."}
                            },
                            "required": ["name", "check"],
                            "additionalProperties": false
                        }
                    },
                    "value_proof": text("How it will be proven that the user gets the value."),
                    "verification_commands": strings("Shell commands that would prove the value.")
                },
                "required": ["deliverable", "project_type", "codebase_state", "tools", "services", "value_proof"],
                "additionalProperties": false
            }),
        ),
        "report_critique" => spec(
            "report_critique",
            "Submit your critique of the PRD or the plan: approve it, ask for amendments, cut scope or reject it as infeasible. \
             Every verdict but APPROVE needs at least one reason.",
            json!({
                "type": "object",
                "properties": {
                    "verdict": {"type": "string", "enum": ["APPROVE", "AMEND", "DESCOPE", "REJECT"], "description": "APPROVE: achievable as it is; AMEND: needs changes; DESCOPE: too large; REJECT: infeasible."},
                    "reasons": strings("Why (at least one unless APPROVE)."),
                    "amendments": strings("Specific changes asked for."),
                    "descoped_tasks": strings("Plan review with DESCOPE only: ids of existing open tasks to cut (with the tasks that depend on them)."),
                    "summary": text("One paragraph.")
                },
                "required": ["verdict", "reasons", "summary"],
                "additionalProperties": false
            }),
        ),
        "register_verification" => spec(
            "register_verification",
            "Register one verification: a single shell command, run in the workspace, whose exit code 0 proves part of the value. \
             A sprint has at most 50.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$", "description": "A new unique id, e.g. `value.export_csv`."},
                    "category": text("e.g. `unit`, `integration`, `value`."),
                    "command": {"type": "string", "maxLength": 2000, "description": "One shell line; exit code 0 means it passes."},
                    "proves": strings("Ids of existing tasks whose acceptance criteria it proves when it passes."),
                    "requires": strings("Services or tools it needs.")
                },
                "required": ["id", "category", "command", "proves"],
                "additionalProperties": false
            }),
        ),
        // The feature-list policy's initializer (its schema and checks live with the policy).
        crate::features::REPORT_FEATURE_LIST => crate::features::tool_spec(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manage_task::ManageTask;
    use crate::reports::{Report, REPORT_TOOLS};
    use std::collections::BTreeSet;

    fn all_tools() -> Vec<&'static str> {
        REPORT_TOOLS
            .iter()
            .copied()
            .chain(["manage_task"])
            .collect()
    }

    /// An instance of `schema`: every property (`full`) or the required ones only.
    fn example(schema: &Value, full: bool) -> Value {
        if let Some(values) = schema.get("enum") {
            return values[0].clone();
        }
        let ty = match &schema["type"] {
            Value::String(t) => t.as_str(),
            Value::Array(ts) => ts[0].as_str().unwrap(),
            other => panic!("no type in {other}"),
        };
        match ty {
            "object" => {
                let required: BTreeSet<&str> = schema["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap())
                    .collect();
                let props = schema["properties"].as_object().unwrap();
                Value::Object(
                    props
                        .iter()
                        .filter(|(k, _)| full || required.contains(k.as_str()))
                        .map(|(k, p)| (k.clone(), example(p, full)))
                        .collect(),
                )
            }
            "array" if full => json!([example(&schema["items"], full)]),
            "array" => json!([]),
            "string" => json!("x"),
            "integer" => json!(1),
            "number" => json!(0.5),
            "boolean" => json!(true),
            other => panic!("unexpected type {other}"),
        }
    }

    /// Every object schema and every enum in `schema`, by the JSON pointer of the value
    /// it describes in a full example.
    fn walk<'a>(
        schema: &'a Value,
        at: String,
        objects: &mut Vec<(String, &'a Value)>,
        enums: &mut Vec<(String, &'a Value)>,
    ) {
        if let Some(values) = schema.get("enum") {
            enums.push((at.clone(), values));
        }
        match schema["type"].as_str() {
            Some("object") => {
                for (k, p) in schema["properties"].as_object().unwrap() {
                    walk(p, format!("{at}/{k}"), objects, enums);
                }
                objects.push((at, schema));
            }
            Some("array") => walk(&schema["items"], format!("{at}/0"), objects, enums),
            _ => {}
        }
    }

    /// The names serde lists after "expected" in an unknown field or variant error.
    fn expected(err: &str) -> BTreeSet<String> {
        let tail = err
            .split_once("expected")
            .unwrap_or_else(|| panic!("no list in {err}"))
            .1;
        tail.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn property_names(schema: &Value) -> BTreeSet<String> {
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    fn enum_values(values: &Value) -> BTreeSet<String> {
        values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_tool_has_a_spec_and_no_other_name_does() {
        for name in all_tools() {
            let s = tool_spec(name).unwrap_or_else(|| panic!("no spec for {name}"));
            assert_eq!(s.name, name);
            assert!(!s.description.is_empty(), "{name}");
            assert!(s.description.len() < 400, "{name}: keep it short");
        }
        assert_eq!(tool_spec("report_vcr"), None);
        assert_eq!(tool_spec("bash"), None);
    }

    #[test]
    fn every_object_schema_is_closed_and_lists_its_required_fields() {
        for name in all_tools() {
            let s = tool_spec(name).unwrap();
            let (mut objects, mut enums) = (vec![], vec![]);
            walk(&s.parameters, String::new(), &mut objects, &mut enums);
            assert_eq!(
                objects.last().unwrap().0,
                "",
                "{name}: the top is an object"
            );
            for (at, o) in objects {
                assert_eq!(o["type"], "object", "{name}{at}");
                assert_eq!(o["additionalProperties"], false, "{name}{at}");
                let props = property_names(o);
                for r in o["required"].as_array().expect("required listed") {
                    assert!(
                        props.contains(r.as_str().unwrap()),
                        "{name}{at}: required {r} is no property"
                    );
                }
                for (k, p) in o["properties"].as_object().unwrap() {
                    assert!(
                        p["description"].as_str().is_some_and(|d| !d.is_empty()),
                        "{name}{at}/{k} has no description"
                    );
                }
            }
            for (at, values) in enums {
                assert!(!enum_values(values).is_empty(), "{name}{at}");
            }
        }
    }

    #[test]
    fn report_schemas_match_their_types() {
        for &name in REPORT_TOOLS {
            let schema = tool_spec(name).unwrap().parameters;
            // The required fields alone parse; so does every property listed.
            let minimal = example(&schema, false);
            Report::parse(name, minimal.clone())
                .unwrap_or_else(|e| panic!("{name} minimal {minimal}: {e}"));
            let full = example(&schema, true);
            Report::parse(name, full.clone()).unwrap_or_else(|e| panic!("{name} full {full}: {e}"));
            let (mut objects, mut enums) = (vec![], vec![]);
            walk(&schema, String::new(), &mut objects, &mut enums);
            // Every field the type accepts is a property: serde lists them when it
            // refuses an unknown one.
            for (at, o) in objects {
                let mut probe = full.clone();
                probe
                    .pointer_mut(&at)
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .insert("__probe__".into(), json!(1));
                let err = Report::parse(name, probe).unwrap_err();
                assert!(
                    err.contains("unknown field `__probe__`"),
                    "{name}{at}: {err}"
                );
                assert_eq!(expected(&err), property_names(o), "{name}{at}: {err}");
            }
            // Every enum lists exactly the values the type accepts.
            for (at, values) in enums {
                let mut probe = full.clone();
                *probe.pointer_mut(&at).unwrap() = json!("__probe__");
                let err = Report::parse(name, probe).unwrap_err();
                assert!(err.contains("unknown variant"), "{name}{at}: {err}");
                assert_eq!(expected(&err), enum_values(values), "{name}{at}: {err}");
            }
        }
    }

    #[test]
    fn the_manage_task_schema_matches_its_type() {
        let schema = tool_spec("manage_task").unwrap().parameters;
        let parse = |v: Value| serde_json::from_value::<ManageTask>(v).map_err(|e| e.to_string());
        let props = property_names(&schema);
        let field = |k: &str| -> Value { example(&schema["properties"][k], true) };
        let mut accepted: BTreeSet<String> = ["action".to_string()].into();
        // The actions.
        let err = parse(json!({"action": "__probe__", "task_id": "T1"})).unwrap_err();
        assert_eq!(
            expected(&err),
            enum_values(&schema["properties"]["action"]["enum"]),
            "{err}"
        );
        // add and remove: the required fields parse; serde's list of the fields each
        // accepts are all properties, and a call with every one of them parses.
        for action in ["add", "remove"] {
            parse(json!({"action": action, "task_id": "T1"})).unwrap();
            let err =
                parse(json!({"action": action, "task_id": "T1", "__probe__": 1})).unwrap_err();
            assert!(err.contains("unknown field `__probe__`"), "{action}: {err}");
            let names = expected(&err);
            let missing: Vec<&String> = names.iter().filter(|n| !props.contains(*n)).collect();
            assert!(
                missing.is_empty(),
                "{action}: {missing:?} are not in the schema"
            );
            let mut call = json!({"action": action});
            for f in &names {
                call[f.as_str()] = field(f);
            }
            parse(call.clone()).unwrap_or_else(|e| panic!("{call}: {e}"));
            accepted.extend(names);
        }
        // modify: every field the schema lists parses with a new value of its kind, and
        // the type accepts no other field.
        for f in enum_values(&schema["properties"]["field"]["enum"]) {
            let new_value = match f.as_str() {
                "dependencies" => json!(["T0"]),
                "status" => json!("descoped"),
                _ => json!("new text"),
            };
            let call =
                json!({"action": "modify", "task_id": "T1", "field": f, "new_value": new_value});
            parse(call.clone()).unwrap_or_else(|e| panic!("{call}: {e}"));
        }
        let err = parse(
            json!({"action": "modify", "task_id": "T1", "field": "__probe__", "new_value": "x"}),
        )
        .unwrap_err();
        assert_eq!(
            expected(&err),
            enum_values(&schema["properties"]["field"]["enum"]),
            "{err}"
        );
        let err = parse(json!({"action": "modify", "task_id": "T1", "field": "value", "new_value": "x", "__probe__": 1})).unwrap_err();
        assert!(err.contains("unknown field `__probe__`"), "{err}");
        accepted.extend(["field".to_string(), "new_value".to_string()]);
        // `last` is read and removed by the host before the call is parsed (it ends the
        // role task, it changes no task): the one property the type does not know.
        let err = parse(json!({"action": "remove", "task_id": "T1", "last": true})).unwrap_err();
        assert!(err.contains("unknown field `last`"), "{err}");
        assert_eq!(schema["properties"]["last"]["type"], "boolean");
        accepted.insert("last".to_string());
        assert_eq!(accepted, props);
        // The required fields alone parse.
        let minimal = example(&schema, false);
        assert_eq!(minimal, json!({"action": "add", "task_id": "x"}));
        parse(minimal).unwrap();
    }
}
