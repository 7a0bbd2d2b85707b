//! Task type `researcher`: the value loop's researcher, a read-only role. The loop runs
//! each role as a task whose `task_type` is the role's name; this one's job: find out why a
//! verification keeps failing, read-only, and report the cause and a way to fix it.
//!
//! The role never writes: its graph offers no action that changes files, and the
//! `guard-read-only-roles` guard refuses writes to tasks whose `role` is `researcher`.
//!
//! `current_state` is the task's brief (`inputs.brief`, every field optional): each
//! field present is a top-level key of the same name, the role's own fields first
//! ([`SHOWN`]), then the other known fields in [`KNOWN`] order, then the fields no role
//! knows, in the brief's order. Nothing is dropped.

use agentforge_plugin_sdk::serde_json::{self, Value};
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The phase graph: one working phase, `review` (read_file, search, load_context, then `complete`
/// with no precondition, or escalate); nothing that writes.
const GRAPH: &str = include_str!("../graph.json");

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 3] = ["instructions", "failing", "research"];

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
const ROLE: &str = "You are the researcher of a value loop: a verification keeps failing despite fixes: you find out why from the code, its failure output and the earlier research, and propose a concrete way to fix it. You act only by calling tools, one per step, and you never change files. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.";

/// The system prompt's last lines.
const FOOT: &str = "\n\nYou have no memory between steps: everything you know is in the context below.\n\nActions available: {{ actions | join(\", \") }}";

/// The task type.
pub struct Researcher;

impl Schema for Researcher {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "researcher".into(),
            description: "find out why a verification keeps failing, read-only, and report the cause and a way to fix it".into(),
            // The vision, the PRD and the reports are documents: room for them in
            // `current_state` (the other sections keep the project's budgets; the
            // total grows by as much as `current_state`, from the defaults 2,600/8,000).
            budgets: vec![("current_state".into(), 10_600), ("total".into(), 16_000)],
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: prompts(),
            default_success_criteria: vec![
                "The likely root cause is named with the evidence for it".into(),
                "The research is reported with the report tool the instructions name".into(),
            ],
        }
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(build(&task))
    }
}

/// The role's system prompt (`researcher.review.j2`: no built-in template serves `review`).
fn prompts() -> Vec<(String, String)> {
    vec![("researcher.review.j2".into(), [ROLE, HEAD, FOOT].concat())]
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

export_schema!(Researcher);

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
    fn one_review_phase_that_cannot_write_and_completes_freely() {
        let info = Researcher::describe();
        assert_eq!(info.name, "researcher");
        assert_eq!(info.phase_graph["initial"], "review");
        let phases = &info.phase_graph["phases"];
        assert_eq!(names(phases), ["review", "complete", "escalated"]);
        let review = &phases[0]["actions"];
        assert_eq!(
            names(review),
            [
                "read_file",
                "search",
                "load_context",
                "complete",
                "escalate"
            ]
        );
        for a in review.as_array().unwrap() {
            assert!(a.get("requires").is_none(), "{a}");
        }
        assert_eq!(phases[0]["plan_actions"], json!([]));
    }

    #[test]
    fn the_review_prompt_names_the_role_and_the_report_tool() {
        let prompts = Researcher::describe().prompts;
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].0, "researcher.review.j2");
        let t = &prompts[0].1;
        assert!(t.contains("You are the researcher of a value loop"), "{t}");
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
                "failing",
                "research",
                "vision",
                "prd",
                "discovery",
                "task",
                "plan",
                "verifications",
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
    fn the_files_of_a_task_are_not_inserted() {
        let task = json!({"id": "T1", "files_expected": ["src/a.rs"]});
        let out = build(&json!({"inputs": {"brief": {"task": task}}}));
        assert_eq!(out.json["task"], task);
        assert!(out.files.is_empty());
    }
}
