//! Task type `qc_author`: the value loop's QC author, a role that changes the workspace.
//! The loop runs each role as a task whose `task_type` is the role's name; this one's job:
//! write the tests that verify the plan's acceptance criteria (they may fail until the work
//! is built).
//!
//! `current_state` is the task's brief (`inputs.brief`, every field optional): each
//! field present is a top-level key of the same name, the role's own fields first
//! ([`SHOWN`]), then the other known fields in [`KNOWN`] order, then the fields no role
//! knows, in the brief's order. Nothing is dropped.

use agentforge_plugin_sdk::serde_json::{self, Value};
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The phase graph: analyze -> implement (no verify phase: with no verification yet, `ready` holds from the start and would skip the work), like `write_tests`, but `complete` has no
/// precondition: a new test of work not built yet fails.
const GRAPH: &str = include_str!("../graph.json");

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 4] = ["instructions", "prd", "plan", "verifications"];

/// Every field a role's brief may have, in the order shown after the role's own.
pub const KNOWN: [&str; 13] = [
    "instructions",
    "vision",
    "prd",
    "discovery",
    "task",
    "plan",
    "verifications",
    "failing",
    "triage",
    "research",
    "vrc",
    "health",
    "findings",
];

/// After the role: the task and where it stands.
const HEAD: &str = "\n\nYour task: {{ goal }}\nTask type: {{ task_type }}. Phase: {{ phase }} (step {{ step }} of {{ max_steps }}).";

/// The role, in one paragraph: the system prompt's first.
const ROLE: &str = "You are the QC author of a value loop: you write the tests that verify the acceptance criteria of the plan's tasks, as their user would check them; a test of work not built yet fails, as expected, and you do not change the product code to make it pass. You act only by calling tools, one per step. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.";

/// The system prompt's last lines.
const FOOT: &str = "\n\nYou have no memory between steps: everything you know is in the context below.\n\nActions available: {{ actions | join(\", \") }}";

/// What to do in each phase.
const PHASES: [(&str, &str); 2] = [
    ("analyze", "Understand before writing: read the plan, the PRD, the existing tests and the code they exercise. The next phase lets you write."),
    ("implement", "Write the tests with write_file, edit_file or replace_lines, following the existing test patterns. The checks run after every change; a test of work not built yet may fail. When the tests are written, call the report tool the instructions name, then complete."),
];

/// The task type.
pub struct QcAuthor;

impl Schema for QcAuthor {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "qc_author".into(),
            description: "write the tests that verify the plan's acceptance criteria (they may fail until the work is built)".into(),
            // The vision, the PRD and the reports are documents: room for them in
            // `current_state` (the other sections keep the project's budgets; the
            // total grows by as much as `current_state`, from the defaults 2,600/8,000).
            budgets: vec![("current_state".into(), 10_600), ("total".into(), 16_000)],
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: prompts(),
            default_success_criteria: vec![
                "One runnable test per acceptance criterion of the plan".into(),
                "The tests are reported with the report tool the instructions name".into(),
            ],
        }
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(build(&task))
    }
}

/// The role's system prompt for each phase (`qc_author.<phase>.j2`).
fn prompts() -> Vec<(String, String)> {
    PHASES
        .iter()
        .map(|(phase, what)| {
            (
                format!("qc_author.{phase}.j2"),
                [ROLE, HEAD, "\n\n", what, FOOT].concat(),
            )
        })
        .collect()
}

/// The `current_state` section: the brief's fields, [`SHOWN`] first, then the other
/// [`KNOWN`] ones, then the unknown ones in the brief's order; a brief that is not an
/// object is shown as `brief`.
fn build(task: &Value) -> CurrentState {
    let mut out = CurrentState::new();
    let brief = match task.get("inputs").and_then(|i| i.get("brief")) {
        Some(Value::Object(b)) => b,
        None | Some(Value::Null) => return out,
        Some(other) => {
            out.set("brief", other.clone());
            return out;
        }
    };
    let known = SHOWN.iter().chain(KNOWN.iter()).copied();
    let unknown = brief.keys().map(String::as_str);
    for key in known.chain(unknown) {
        if let Some(v) = brief.get(key).filter(|_| !out.json.contains_key(key)) {
            out.set(key, v.clone());
        }
    }
    out
}

export_schema!(QcAuthor);

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_plugin_sdk::serde_json::json;

    /// The `name`s of a JSON array of objects.
    fn names(v: &Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn analyze_implement_verify_without_a_plan_phase() {
        let info = QcAuthor::describe();
        assert_eq!(info.name, "qc_author");
        assert_eq!(info.phase_graph["initial"], "analyze");
        let phases = &info.phase_graph["phases"];
        assert_eq!(
            names(phases),
            ["analyze", "implement", "complete", "failed", "escalated"]
        );
        // `complete` is offered in implement, with no precondition.
        let completes: Vec<&Value> = phases
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["actions"].as_array().unwrap())
            .filter(|a| a["name"] == "complete")
            .collect();
        assert_eq!(completes.len(), 1);
        for a in completes {
            assert!(a.get("requires").is_none(), "{a}");
        }
    }

    #[test]
    fn each_phase_has_the_roles_prompt() {
        let prompts = QcAuthor::describe().prompts;
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["qc_author.analyze.j2", "qc_author.implement.j2"]);
        for (_, t) in &prompts {
            assert!(t.contains("You are the QC author of a value loop"), "{t}");
            for part in [
                "`instructions`",
                "report tool",
                "`complete`",
                "{{ goal }}",
                "{{ actions",
            ] {
                assert!(t.contains(part), "{part}: {t}");
            }
        }
    }

    #[test]
    fn the_roles_fields_first_then_the_other_known_then_the_unknown() {
        // The brief lists an unknown field, every known one in reverse, another unknown.
        let mut brief = json!({"zz_unknown": {"kept": true}});
        for k in KNOWN.iter().rev() {
            brief[*k] = json!(format!("the {k}"));
        }
        brief["also_unknown"] = json!([1, 2]);
        let out = build(&json!({"inputs": {"brief": brief}}));
        let keys: Vec<&str> = out.json.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "instructions",
                "prd",
                "plan",
                "verifications",
                "vision",
                "discovery",
                "task",
                "failing",
                "triage",
                "research",
                "vrc",
                "health",
                "findings",
                "zz_unknown",
                "also_unknown"
            ]
        );
        for k in KNOWN {
            assert_eq!(out.json[k], json!(format!("the {k}")));
        }
        assert_eq!(out.json["zz_unknown"], json!({"kept": true}));
        assert_eq!(out.json["also_unknown"], json!([1, 2]));
        assert!(out.files.is_empty());
    }

    #[test]
    fn only_the_fields_present_are_shown() {
        let brief = json!({"extra": {"a": 1}, "plan": [], "instructions": "call report_x"});
        let out = build(&json!({"inputs": {"brief": brief}}));
        let keys: Vec<&str> = out.json.keys().map(String::as_str).collect();
        assert_eq!(keys, ["instructions", "plan", "extra"]);
        assert_eq!(out.json["instructions"], "call report_x");
        assert!(build(&json!({})).json.is_empty());
        assert!(build(&json!({"inputs": {"brief": null}})).json.is_empty());
        let odd = build(&json!({"inputs": {"brief": "text"}}));
        assert_eq!(odd.json["brief"], "text");
    }

    #[test]
    fn the_files_of_a_task_are_not_inserted() {
        let task = json!({"id": "T1", "files_expected": ["src/a.rs"]});
        let out = build(&json!({"inputs": {"brief": {"task": task}}}));
        assert_eq!(out.json["task"], task);
        assert!(out.files.is_empty());
    }
}
