//! Task type `builder`: the value loop's builder, a role that changes the workspace. The
//! loop runs each role as a task whose `task_type` is the role's name; this one's job:
//! build one sprint task in the workspace until the checks pass, and report it done.
//!
//! `current_state` is the task's brief (`inputs.brief`, every field optional): each
//! field present is a top-level key of the same name, the role's own fields first
//! ([`SHOWN`]), then the other known fields in [`KNOWN`] order, then the fields no role
//! knows, in the brief's order. Nothing is dropped.
//!
//! The files of `task.files_expected` are inserted, numbered, by the host: the task gets
//! `files: [{path}, ...]` (`files_expected` stays as it was) and the host sets each
//! one's `content` at `/task/files/<i>/content` (`null` when the file does not exist
//! yet), at most [`MAX_FILES`]. A task that already has a `files` field keeps it; the
//! list is then `files_expected_content`.

use agentforge_plugin_sdk::serde_json::{self, json, Value};
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The phase graph: analyze -> implement (no verify phase: with no verification yet, `ready` holds from the start and would skip the work), `complete` requiring the `ready`
/// condition (verification passing).
const GRAPH: &str = include_str!("../graph.json");

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 5] = ["instructions", "task", "plan", "verifications", "research"];

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

/// Most files inserted: the host shows at most 16 per section.
pub const MAX_FILES: usize = 16;

/// After the role: the task and where it stands.
const HEAD: &str = "\n\nYour task: {{ goal }}\nTask type: {{ task_type }}. Phase: {{ phase }} (step {{ step }} of {{ max_steps }}).";

/// The role, in one paragraph: the system prompt's first.
const ROLE: &str = "You are the builder of a value loop: you build the one sprint task in the `task` section (its description, value and acceptance criterion), following the plan and any research, until the checks pass, changing only what the task needs. You act only by calling tools, one per step. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.";

/// The system prompt's last lines.
const FOOT: &str = "\n\nYou have no memory between steps: everything you know is in the context below.\n\nActions available: {{ actions | join(\", \") }}";

/// What to do in each phase.
const PHASES: [(&str, &str); 2] = [
    ("analyze", "Understand before changing anything: read the task, the files shown and the code involved, or run the checks to see where things stand. The next phase lets you edit."),
    ("implement", "Make the smallest change that does it with edit_file (exact old text -> new text), replace_lines or write_file. The checks run after every change and a change that breaks a passing check is reverted; if an edit fails, read the file again. When the task is built and the checks pass, call the report tool the instructions name, then complete. Escalate if stuck after 3 different approaches."),
];

/// The task type.
pub struct Builder;

impl Schema for Builder {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "builder".into(),
            description:
                "build one sprint task in the workspace until the checks pass, and report it done"
                    .into(),
            // The task's files and the plan: room for them in `current_state` (the
            // other sections keep the project's budgets; the total grows by as much as
            // `current_state`, from the defaults 2,600/8,000).
            budgets: vec![("current_state".into(), 10_600), ("total".into(), 16_000)],
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: prompts(),
            default_success_criteria: vec![
                "The task's acceptance criterion is met and the checks pass".into(),
                "The work is reported with the report tool the instructions name".into(),
            ],
        }
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(build(&task))
    }
}

/// The role's system prompt for each phase (`builder.<phase>.j2`).
fn prompts() -> Vec<(String, String)> {
    PHASES
        .iter()
        .map(|(phase, what)| {
            (
                format!("builder.{phase}.j2"),
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
    insert_files(&mut out);
    out
}

/// Asks the host to insert the files of `task.files_expected` (the strings among them):
/// `task.files` (or `task.files_expected_content` when the task has a `files` field)
/// lists them as `{path}`, the host sets each `content`; past [`MAX_FILES`], `content`
/// says to read the file.
fn insert_files(out: &mut CurrentState) {
    let Some(Value::Object(task)) = out.json.get_mut("task") else {
        return;
    };
    let paths: Vec<String> = task
        .get("files_expected")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if paths.is_empty() {
        return;
    }
    let key = if task.contains_key("files") {
        "files_expected_content"
    } else {
        "files"
    };
    let not_shown = format!("(not shown: at most {MAX_FILES} files are inserted; read_file it)");
    let entries = paths.iter().enumerate().map(|(i, p)| {
        if i < MAX_FILES {
            json!({ "path": p })
        } else {
            json!({ "path": p, "content": not_shown })
        }
    });
    task.insert(key.to_string(), Value::Array(entries.collect()));
    for (i, p) in paths.iter().take(MAX_FILES).enumerate() {
        out.file(&format!("/task/{key}/{i}/content"), p);
    }
}

export_schema!(Builder);

#[cfg(test)]
mod tests {
    use super::*;

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
        let info = Builder::describe();
        assert_eq!(info.name, "builder");
        assert_eq!(info.phase_graph["initial"], "analyze");
        let phases = &info.phase_graph["phases"];
        assert_eq!(
            names(phases),
            ["analyze", "implement", "complete", "failed", "escalated"]
        );
        // `complete` is offered in implement, requiring `ready`.
        let completes: Vec<&Value> = phases
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["actions"].as_array().unwrap())
            .filter(|a| a["name"] == "complete")
            .collect();
        assert_eq!(completes.len(), 1);
        for a in completes {
            assert_eq!(a["requires"]["condition"], "ready", "{a}");
        }
    }

    #[test]
    fn each_phase_has_the_roles_prompt() {
        let prompts = Builder::describe().prompts;
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["builder.analyze.j2", "builder.implement.j2"]);
        for (_, t) in &prompts {
            assert!(t.contains("You are the builder of a value loop"), "{t}");
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
                "task",
                "plan",
                "verifications",
                "research",
                "vision",
                "prd",
                "discovery",
                "failing",
                "triage",
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
    fn the_expected_files_are_inserted_by_the_host() {
        let task = json!({"id": "T1", "files_expected": ["src/a.rs", 3, "src/new.rs"]});
        let out = build(&json!({"inputs": {"brief": {"task": task}}}));
        let t = &out.json["task"];
        assert_eq!(t["id"], "T1");
        assert_eq!(t["files_expected"], json!(["src/a.rs", 3, "src/new.rs"]));
        assert_eq!(
            t["files"],
            json!([{"path": "src/a.rs"}, {"path": "src/new.rs"}])
        );
        assert_eq!(
            out.files,
            vec![
                ("/task/files/0/content".to_string(), "src/a.rs".to_string()),
                (
                    "/task/files/1/content".to_string(),
                    "src/new.rs".to_string()
                ),
            ]
        );
    }

    #[test]
    fn at_most_16_files_and_a_files_field_of_the_task_is_kept() {
        let paths: Vec<String> = (0..17).map(|i| format!("src/f{i}.rs")).collect();
        let task = json!({"files": "mine", "files_expected": paths});
        let out = build(&json!({"inputs": {"brief": {"task": task}}}));
        let t = &out.json["task"];
        assert_eq!(t["files"], "mine");
        let listed = t["files_expected_content"].as_array().unwrap();
        assert_eq!(listed.len(), 17);
        assert!(listed[15].get("content").is_none());
        assert!(listed[16]["content"]
            .as_str()
            .unwrap()
            .contains("read_file"));
        assert_eq!(out.files.len(), MAX_FILES);
        assert_eq!(
            out.files[15],
            (
                "/task/files_expected_content/15/content".to_string(),
                "src/f15.rs".to_string()
            )
        );
        // No task, or a task that is not an object: nothing to insert.
        assert!(build(&json!({"inputs": {"brief": {"task": "T1"}}}))
            .files
            .is_empty());
    }
}
