//! Task type `fixer`: the value loop's fixer, a role that changes the workspace. The loop
//! runs each role as a task whose `task_type` is the role's name; this one's job: make the
//! failing verifications pass with a minimal change, and report the fix.
//!
//! `current_state` is the task's brief as every role shows it
//! ([`agentforge_plugin_sdk::role`]): its fields of [`SHOWN`] first, then the other known
//! ones, then the ones no role knows. Nothing is dropped.
//!
//! The files of `task.files_expected` are inserted, numbered, by the host
//! ([`agentforge_plugin_sdk::role::insert_files`]).

use agentforge_plugin_sdk::role::Role;
use agentforge_plugin_sdk::serde_json::Value;
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The brief's fields this role reads, in the order shown.
pub const SHOWN: [&str; 5] = ["instructions", "failing", "triage", "research", "task"];

/// The role. Its phase graph: analyze -> implement, `complete` requiring the `ready`
/// condition (verification passing). No verify phase: a service fix starts with every
/// check passing, and `ready` would move it past the phase that edits.
const ROLE: Role = Role {
    name: "fixer",
    description: "make the failing verifications pass with a minimal change, and report the fix",
    shown: &SHOWN,
    graph: include_str!("../graph.json"),
    intro: "You are the fixer of a value loop: you make the failing verifications in the `failing` section pass with the smallest change, guided by the triage and any research, without breaking what passes or weakening a test. You act only by calling tools, one per step. The `instructions` section of the current state says what to do now and names the report tool you must call with your result; call it, then call `complete`.",
    phases: &[
        ("analyze", "Understand before changing anything: read the task, the files shown and the code involved, or run the checks to see where things stand. The next phase lets you edit."),
        ("implement", "Make the smallest change that does it with edit_file (exact old text -> new text), replace_lines or write_file. The checks run after every change and a change that breaks a passing check is reverted; if an edit fails, read the file again. When the checks pass, call the report tool the instructions name (if any), then complete. Escalate if stuck after 3 different approaches."),
    ],
    // The task's files and the plan: room for them in `current_state` (the
    // other sections keep the project's budgets; the total grows by as much as
    // `current_state`, from the defaults 2,000/8,000).
    budgets: &[("current_state", 10_000), ("total", 16_000)],
    success_criteria: &[
        "The failing verifications pass and the others still pass",
        "The fix is reported with the report tool the instructions name",
    ],
    inserts_files: true,
};

/// The task type.
pub struct Fixer;

impl Schema for Fixer {
    fn describe() -> SchemaInfo {
        ROLE.describe()
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(ROLE.build(&task))
    }
}

export_schema!(Fixer);

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
    fn analyze_then_implement_without_a_plan_phase() {
        let info = Fixer::describe();
        assert_eq!(info.name, "fixer");
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
    fn the_roles_prompts_and_its_fields_first() {
        let prompts = Fixer::describe().prompts;
        let names: Vec<&str> = prompts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fixer.analyze.j2", "fixer.implement.j2"]);
        for (_, t) in &prompts {
            assert!(t.starts_with("You are the fixer of a value loop"), "{t}");
            for part in ["`instructions`", "report tool", "`complete`"] {
                assert!(t.contains(part), "{part}: {t}");
            }
        }
        // Every known field in reverse order, each an object naming a file: the role's
        // come first, and only the task's file is inserted.
        let mut brief = json!({});
        for k in KNOWN.iter().rev() {
            brief[*k] = json!({"files_expected": ["src/a.rs"]});
        }
        let out = Fixer::build(json!({"inputs": {"brief": brief}}), json!({})).unwrap();
        let keys: Vec<&str> = out.json.keys().map(String::as_str).collect();
        assert_eq!(keys[..SHOWN.len()], SHOWN);
        assert_eq!(
            out.files,
            [("/task/files/0/content".into(), "src/a.rs".into())]
        );
    }
}
