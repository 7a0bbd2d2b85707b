//! The immutable task specification (`task.yaml`) and its validation.
//!
//! A task spec is written once when a task is created and never changed: it is the
//! "verified input" every step's context is rebuilt from.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What kind of command a [`CheckSpec`] is: a conformance check or a test run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A check run by `run_check` (lint, conformance, build).
    #[default]
    Check,
    /// A test suite run by `run_tests`.
    Test,
}

/// A named verification command for a task.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Short name used in the verification section (`tests`, `clippy`, ...).
    pub name: String,
    /// Shell command, run with `sh -c` in the workspace root.
    pub command: String,
    /// Whether `run_check` or `run_tests` runs it.
    #[serde(default)]
    pub kind: CheckKind,
    /// Per-command timeout in seconds; the config's default applies when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// The immutable spec of one task, as stored in `task.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Stable identifier; also the folder name under `.agentforge/tasks/`.
    pub id: String,
    /// Task type, naming the context schema (`fix_violation`, `implement_feature`, `write_tests`).
    pub task_type: String,
    /// One sentence: what done looks like.
    pub goal: String,
    /// Measurable criteria; shown in every context.
    #[serde(default)]
    pub success_criteria: Vec<String>,
    /// Rules the agent must respect.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Task-type specific inputs (the violation, the spec, target files...).
    #[serde(default)]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Verification commands. Falls back to `agentforge.toml` `[commands]` when empty.
    #[serde(default)]
    pub checks: Vec<CheckSpec>,
    /// Step budget; the config's default applies when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Who works on the task (`builder`, `qc`, `critic`...; seed 002's roles). Guards
    /// see it: a read-only role may be refused writes. Absent: the builder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// Errors reading or validating a task spec. Each names the file and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The file could not be read.
    #[error("cannot read task file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not parse or does not match the task shape.
    #[error("invalid task file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Parser message, with line and column where known.
        message: String,
    },
    /// A field has a value that cannot be used.
    #[error("invalid task file {path}: field `{field}`: {message}")]
    Field {
        /// The file.
        path: String,
        /// The offending field.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
}

impl TaskSpec {
    /// Reads and validates a task spec from a YAML file.
    pub fn load(path: &Path) -> Result<TaskSpec, TaskError> {
        let text = std::fs::read_to_string(path).map_err(|source| TaskError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates YAML text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<TaskSpec, TaskError> {
        let spec: TaskSpec = serde_yaml_ng::from_str(text).map_err(|e| TaskError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        spec.validate(origin)?;
        Ok(spec)
    }

    /// Checks the invariants serde cannot express.
    pub fn validate(&self, origin: &str) -> Result<(), TaskError> {
        let field = |field: &str, message: &str| TaskError::Field {
            path: origin.to_string(),
            field: field.to_string(),
            message: message.to_string(),
        };
        if self.id.is_empty()
            || !self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            || self.id.starts_with('.')
        {
            return Err(field(
                "id",
                "must be non-empty and use only letters, digits, '-', '_' and '.' (it names a folder)",
            ));
        }
        if self.goal.trim().is_empty() {
            return Err(field("goal", "must be a non-empty sentence"));
        }
        if self.task_type.trim().is_empty() {
            return Err(field(
                "task_type",
                "must name a task type such as fix_violation",
            ));
        }
        for (i, c) in self.checks.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(field(&format!("checks[{i}].name"), "must be non-empty"));
            }
            if c.command.trim().is_empty() {
                return Err(field(
                    &format!("checks[{i}].command"),
                    "must be a shell command",
                ));
            }
            if c.timeout_secs == Some(0) {
                return Err(field(
                    &format!("checks[{i}].timeout_secs"),
                    "must be at least 1",
                ));
            }
        }
        if self.max_steps == Some(0) {
            return Err(field("max_steps", "must be at least 1"));
        }
        Ok(())
    }

    /// Renders the spec as YAML for `task.yaml`.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("task spec serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "id: fix-1\ntask_type: fix_violation\ngoal: Make the test pass\nchecks:\n  - name: tests\n    command: cargo test\n    kind: test\n";

    #[test]
    fn parses_a_valid_spec() {
        let spec = TaskSpec::parse(GOOD, "task.yaml").unwrap();
        assert_eq!(spec.id, "fix-1");
        assert_eq!(spec.checks[0].kind, CheckKind::Test);
    }

    #[test]
    fn unknown_field_names_file_and_line() {
        let err = TaskSpec::parse(&format!("{GOOD}colour: red\n"), "t.yaml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("t.yaml"), "{msg}");
        assert!(msg.contains("colour"), "{msg}");
        assert!(msg.contains("line"), "{msg}");
    }

    #[test]
    fn bad_id_is_rejected_with_field_name() {
        let err = TaskSpec::parse(&GOOD.replace("fix-1", "../evil"), "t.yaml").unwrap_err();
        assert!(err.to_string().contains("`id`"), "{err}");
    }

    #[test]
    fn missing_goal_is_reported() {
        let err = TaskSpec::parse("id: a\ntask_type: x\n", "t.yaml").unwrap_err();
        assert!(err.to_string().contains("goal"), "{err}");
    }
}
