//! Guard: tasks of a read-only role may not change files (seed 002 §3 and §7: "the
//! builder never grades its own work"; the QC agent and the critics check the work, they
//! do not do it; seed 003: hooks that block, not instructions that suggest).
//!
//! The task's role is the top-level `role` of `task.yaml` (`task-json`); a task without
//! one may write. Roles in config `read_only_roles` (default `qc`, `critic`, `reviewer`;
//! compared without case) are denied the writing actions: `write_file`, `edit_file`,
//! `replace_lines` and the actions in config `write_actions`. Everything else is
//! allowed. A task that cannot be read is denied writes (fail closed).

use agentforge_plugin_sdk::{config, config_list, export_guard, ActionCheck, Decision, Guard};
use serde_json::{Map, Value};

/// Roles that may not write when the configuration names none.
const DEFAULT_READ_ONLY: [&str; 3] = ["qc", "critic", "reviewer"];

/// The host's actions that change files.
const WRITE_ACTIONS: [&str; 3] = ["write_file", "edit_file", "replace_lines"];

/// The guard.
pub struct ReadOnlyRoles;

impl Guard for ReadOnlyRoles {
    fn check(input: ActionCheck) -> Decision {
        let config = config();
        let writes = WRITE_ACTIONS.contains(&input.action.as_str())
            || config_list(&config, "write_actions")
                .unwrap_or_default()
                .iter()
                .any(|a| a == &input.action);
        if !writes {
            return Decision::Allow;
        }
        let task: Value = if input.task_json.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            match serde_json::from_str(&input.task_json) {
                Ok(v) => v,
                Err(e) => {
                    return Decision::Deny(format!(
                        "`{}` refused: the task's role cannot be read ({e})",
                        input.action
                    ))
                }
            }
        };
        let role = match &task["role"] {
            Value::String(r) if !r.trim().is_empty() => r.trim(),
            // No role: a builder's task, which may write.
            _ => return Decision::Allow,
        };
        let read_only = config_list(&config, "read_only_roles")
            .unwrap_or_else(|| DEFAULT_READ_ONLY.iter().map(|s| s.to_string()).collect());
        if !read_only
            .iter()
            .any(|r| r.trim().eq_ignore_ascii_case(role))
        {
            return Decision::Allow;
        }
        let what = match &input.target {
            Some(t) if !t.is_empty() => format!("`{}` on `{t}`", input.action),
            _ => format!("`{}`", input.action),
        };
        Decision::Deny(format!(
            "role `{role}` is read-only: {what} would change the work it checks; report what should change instead"
        ))
    }
}

export_guard!(ReadOnlyRoles);
