//! Task type `qc_author`: the value loop's QC author, a role that changes the workspace.
//! The loop runs each role as a task whose `task_type` is the role's name; this one's job:
//! write the tests that verify the plan's acceptance criteria (they may fail until the work
//! is built).
//!
//! `current_state` is the task's brief as every role shows it
//! ([`agentforge_plugin_sdk::role`]): its fields of [`SHOWN`] first, then the other known
//! ones, then the ones no role knows. Nothing is dropped.

use agentforge_plugin_sdk::role::Role;
use agentforge_plugin_sdk::serde_json::Value;
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 4] = ["instructions", "prd", "plan", "verifications"];

/// The role. Its phase graph: analyze -> implement (no verify phase: with no verification
/// yet, `ready` holds from the start and would skip the work), like `write_tests`, but
/// `complete` has no precondition: a new test of work not built yet fails.
const ROLE: Role = Role {
    name: "qc_author",
    description: "write the tests that verify the plan's acceptance criteria (they may fail until the work is built)",
    shown: &SHOWN,
    graph: include_str!("../graph.json"),
    intro: "You are the QC author of a value loop: you write the tests that verify the acceptance criteria of the plan's tasks, as their user would check them; a test of work not built yet fails, as expected, and you do not change the product code to make it pass. You act only by calling tools, one per step. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.",
    phases: &[
        ("analyze", "Understand before writing: read the plan, the PRD, the existing tests and the code they exercise. The next phase lets you write."),
        ("implement", "Write the tests with write_file, edit_file or replace_lines, following the existing test patterns. The checks run after every change; a test of work not built yet may fail. When the tests are written, call the report tool the instructions name, then complete."),
    ],
    // The vision, the PRD and the reports are documents: room for them in
    // `current_state` (the other sections keep the project's budgets; the
    // total grows by as much as `current_state`, from the defaults 2,000/8,000).
    budgets: &[("current_state", 10_000), ("total", 16_000)],
    success_criteria: &[
        "One runnable test per acceptance criterion of the plan",
        "The tests are reported with the report tool the instructions name",
    ],
    inserts_files: false,
};

/// The task type.
pub struct QcAuthor;

impl Schema for QcAuthor {
    fn describe() -> SchemaInfo {
        ROLE.describe()
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(ROLE.build(&task))
    }
}

export_schema!(QcAuthor);

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
    fn the_roles_prompts_and_its_fields_first() {
        let prompts = QcAuthor::describe().prompts;
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["qc_author.analyze.j2", "qc_author.implement.j2"]);
        for (_, t) in &prompts {
            assert!(
                t.starts_with("You are the QC author of a value loop"),
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
        let out = QcAuthor::build(json!({"inputs": {"brief": brief}}), json!({})).unwrap();
        let keys: Vec<&str> = out.json.keys().map(String::as_str).collect();
        assert_eq!(keys[..SHOWN.len()], SHOWN);
        assert!(out.files.is_empty());
    }
}
