//! Task type `evaluator`: the value loop's evaluator, a read-only role. The loop runs each
//! role as a task whose `task_type` is the role's name; this one's job: use the deliverable
//! as its user would, read-only, and report findings and a value score.
//!
//! The role never writes: its graph offers no action that changes files, and the
//! `guard-read-only-roles` guard refuses writes to tasks whose `role` is `evaluator`.
//!
//! `current_state` is the task's brief as every role shows it
//! ([`agentforge_plugin_sdk::role`]): its fields of [`SHOWN`] first, then the other known
//! ones, then the ones no role knows. Nothing is dropped.

use agentforge_plugin_sdk::role::Role;
use agentforge_plugin_sdk::serde_json::Value;
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 7] = [
    "instructions",
    "vision",
    "prd",
    "plan",
    "verifications",
    "vrc",
    "health",
];

/// The role. Its phase graph: one working phase, `review` (run_check, run_tests, read_file,
/// search, load_context, then `complete` with no precondition, or escalate); nothing that
/// writes.
const ROLE: Role = Role {
    name: "evaluator",
    description: "use the deliverable as its user would, read-only, and report findings and a value score",
    shown: &SHOWN,
    graph: include_str!("../graph.json"),
    intro: "You are the evaluator of a value loop: you use the deliverable as its user would (run its checks and tests, read what it produces) and judge it against the vision and the PRD: each finding with its severity, and a value score. You act only by calling tools, one per step, and you never change files. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.",
    // `evaluator.review.j2`: no built-in template serves `review`.
    phases: &[("review", "")],
    // The vision, the PRD and the reports are documents: room for them in
    // `current_state` (the other sections keep the project's budgets; the
    // total grows by as much as `current_state`, from the defaults 2,000/8,000).
    budgets: &[("current_state", 10_000), ("total", 16_000)],
    success_criteria: &[
        "Each finding says what the user would experience and how severe it is",
        "The findings and the value score are reported with the report tools the instructions name",
    ],
    inserts_files: false,
};

/// The task type.
pub struct Evaluator;

impl Schema for Evaluator {
    fn describe() -> SchemaInfo {
        ROLE.describe()
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(ROLE.build(&task))
    }
}

export_schema!(Evaluator);

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_plugin_sdk::role::KNOWN;
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
        let info = Evaluator::describe();
        assert_eq!(info.name, "evaluator");
        assert_eq!(info.phase_graph["initial"], "review");
        let phases = &info.phase_graph["phases"];
        assert_eq!(names(phases), ["review", "complete", "escalated"]);
        let review = &phases[0]["actions"];
        assert_eq!(
            names(review),
            [
                "run_check",
                "run_tests",
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
    fn the_roles_prompts_and_its_fields_first() {
        let prompts = Evaluator::describe().prompts;
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["evaluator.review.j2"]);
        for (_, t) in &prompts {
            assert!(
                t.starts_with("You are the evaluator of a value loop"),
                "{t}"
            );
            for part in ["`instructions`", "report tool", "`complete`"] {
                assert!(t.contains(part), "{part}: {t}");
            }
        }
        // Every known field in reverse order, each an object naming a file: the role's
        // come first, and no file is inserted.
        let mut brief = json!({});
        for k in KNOWN.iter().rev() {
            brief[*k] = json!({"files_expected": ["src/a.rs"]});
        }
        let out = Evaluator::build(json!({"inputs": {"brief": brief}}), json!({})).unwrap();
        let keys: Vec<&str> = out.json.keys().map(String::as_str).collect();
        assert_eq!(keys[..SHOWN.len()], SHOWN);
        assert!(out.files.is_empty());
    }
}
