//! Context schemas: one per task type (seed 001, "Context Schemas by Task Type").
//!
//! A schema names its phases, the actions offered in each, the automatic transitions,
//! and builds the task-specific `current_state` section from the spec and the files on
//! disk. The native schemas here sit behind [`ContextSchema`] so the plugin system can
//! add task types as WASM components.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::state_store::TaskState;
use crate::task::TaskSpec;
use crate::tools::Workspace;

/// One phase of a task type.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseDef {
    /// Phase name (`analyze`, `implement`, `verify`).
    pub name: &'static str,
    /// Actions offered in this phase, most useful first.
    pub actions: &'static [&'static str],
    /// Steps after which the phase moves on by itself (if it has a next phase).
    pub max_steps: u64,
    /// Action recommended in this phase, if any.
    pub recommended: Option<&'static str>,
}

/// What happened in a step, as far as phase transitions care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepFacts {
    /// The step read or searched code successfully.
    pub gathered_context: bool,
    /// The step changed files (and they were kept).
    pub changed_files: bool,
    /// Verification is ready for completion after the step.
    pub ready: bool,
    /// Verification ran and something failed.
    pub verification_failed: bool,
}

/// A task type.
pub trait ContextSchema: Send + Sync {
    /// Task type name, as in `task.yaml` `task_type`.
    fn name(&self) -> &str;
    /// The phases, in order.
    fn phases(&self) -> &[PhaseDef];
    /// Success criteria used when the task lists none.
    fn default_success_criteria(&self) -> Vec<String>;
    /// The task-type specific `current_state` section.
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value;

    /// The phase a new task starts in.
    fn initial_phase(&self) -> &str {
        self.phases()[0].name
    }

    /// The definition of `phase`, or the first phase for an unknown name.
    fn phase(&self, phase: &str) -> &PhaseDef {
        self.phases()
            .iter()
            .find(|p| p.name == phase)
            .unwrap_or(&self.phases()[0])
    }

    /// The phase after a step (seed 000 §4.4, simplified: analyze -> implement once
    /// context is gathered or the phase's steps run out; implement -> verify once
    /// verification is ready; verify -> implement when a check fails).
    fn next_phase(&self, current: &str, phase_steps: u64, step: StepFacts) -> String {
        let def = self.phase(current);
        let next = match current {
            "analyze" if step.changed_files => "implement",
            "analyze" if step.gathered_context || phase_steps >= def.max_steps => "implement",
            "implement" if step.ready => "verify",
            "verify" if step.verification_failed || !step.ready => "implement",
            other => other,
        };
        if step.ready && next != "verify" && self.phases().iter().any(|p| p.name == "verify") {
            return "verify".to_string();
        }
        next.to_string()
    }
}

const ANALYZE_ACTIONS: &[&str] = &[
    "read_file",
    "search",
    "load_context",
    "run_check",
    "run_tests",
    "escalate",
    "cannot_fix",
];
const IMPLEMENT_ACTIONS: &[&str] = &[
    "edit_file",
    "replace_lines",
    "write_file",
    "read_file",
    "search",
    "load_context",
    "run_check",
    "run_tests",
    "complete",
    "escalate",
    "cannot_fix",
];
const VERIFY_ACTIONS: &[&str] = &[
    "complete",
    "run_check",
    "run_tests",
    "read_file",
    "escalate",
];

const STANDARD_PHASES: &[PhaseDef] = &[
    PhaseDef {
        name: "analyze",
        actions: ANALYZE_ACTIONS,
        max_steps: 3,
        recommended: Some("read_file"),
    },
    PhaseDef {
        name: "implement",
        actions: IMPLEMENT_ACTIONS,
        max_steps: u64::MAX,
        recommended: Some("edit_file"),
    },
    PhaseDef {
        name: "verify",
        actions: VERIFY_ACTIONS,
        max_steps: u64::MAX,
        recommended: Some("complete"),
    },
];

/// Lines of a file shown with numbers, as `  12| code`; `None` if unreadable.
pub fn numbered_file(ws: &Workspace, rel: &str) -> Option<String> {
    let path = ws.resolve(rel).ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    let width = text.lines().count().max(1).to_string().len();
    Some(
        text.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>width$}| {l}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn input<'a>(spec: &'a TaskSpec, key: &str) -> Option<&'a Value> {
    spec.inputs.get(key)
}

fn remaining_issues(state: &TaskState) -> Vec<String> {
    let mut issues: Vec<String> = state
        .verification
        .checks
        .iter()
        .filter(|(_, c)| !c.passing)
        .map(|(n, c)| format!("{n}: {}", c.summary))
        .collect();
    issues.extend(
        state
            .facts
            .iter()
            .filter(|f| f.category == crate::state_store::FactCategory::Error)
            .map(|f| f.statement.clone()),
    );
    issues
}

/// `fix_violation`: make a failing check or test pass with a minimal change.
pub struct FixViolation;

impl ContextSchema for FixViolation {
    fn name(&self) -> &str {
        "fix_violation"
    }
    fn phases(&self) -> &[PhaseDef] {
        STANDARD_PHASES
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "The violated check passes".into(),
            "All other checks and tests still pass".into(),
            "Minimal changes, only to code related to the violation".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value {
        let violation = input(spec, "violation").cloned().unwrap_or(Value::Null);
        let file = violation
            .get("file_path")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut out = serde_json::Map::new();
        out.insert("violation".into(), violation);
        if let Some(def) = input(spec, "check_definition") {
            out.insert("check_definition".into(), def.clone());
        }
        if let Some(path) = file {
            let content = numbered_file(ws, &path).unwrap_or_else(|| "(file not found)".into());
            out.insert(
                "file_content".into(),
                json!({ "path": path, "content": content }),
            );
        }
        let issues = remaining_issues(state);
        if !issues.is_empty() {
            out.insert("remaining_issues".into(), json!(issues));
        }
        Value::Object(out)
    }
}

/// `implement_feature`: implement a verified spec in target files until tests pass.
pub struct ImplementFeature;

impl ContextSchema for ImplementFeature {
    fn name(&self) -> &str {
        "implement_feature"
    }
    fn phases(&self) -> &[PhaseDef] {
        STANDARD_PHASES
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "Every requirement's acceptance criteria are met".into(),
            "All tests pass".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value {
        let mut out = serde_json::Map::new();
        out.insert(
            "spec".into(),
            input(spec, "spec").cloned().unwrap_or(Value::Null),
        );
        let targets: Vec<Value> = input(spec, "target_files")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|p| match numbered_file(ws, p) {
                        Some(c) => json!({"path": p, "status": "to_modify", "content": c}),
                        None => json!({"path": p, "status": "to_create"}),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.insert("target_files".into(), Value::Array(targets));
        if let Some(t) = input(spec, "test_requirements") {
            out.insert("test_requirements".into(), t.clone());
        }
        let issues = remaining_issues(state);
        if !issues.is_empty() {
            out.insert("remaining_issues".into(), json!(issues));
        }
        Value::Object(out)
    }
}

/// `write_tests`: the RED phase, tests that define the behaviour and currently fail.
pub struct WriteTests;

impl ContextSchema for WriteTests {
    fn name(&self) -> &str {
        "write_tests"
    }
    fn phases(&self) -> &[PhaseDef] {
        STANDARD_PHASES
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "One test per acceptance criterion".into(),
            "Tests run and currently fail for the missing behaviour".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, _state: &TaskState, ws: &Workspace) -> Value {
        let mut out = serde_json::Map::new();
        out.insert(
            "spec".into(),
            input(spec, "spec").cloned().unwrap_or(Value::Null),
        );
        if let Some(p) = input(spec, "example_test_file").and_then(Value::as_str) {
            if let Some(c) = numbered_file(ws, p) {
                out.insert(
                    "test_patterns".into(),
                    json!({"path": p, "example_test": c}),
                );
            }
        }
        if let Some(p) = input(spec, "target_test_file").and_then(Value::as_str) {
            out.insert(
                "target_test_file".into(),
                json!({"path": p, "existing_content": numbered_file(ws, p)}),
            );
        }
        Value::Object(out)
    }
}

/// The task types known to a run.
pub struct SchemaRegistry {
    schemas: BTreeMap<String, Box<dyn ContextSchema>>,
}

impl Default for SchemaRegistry {
    fn default() -> Self {
        let mut r = SchemaRegistry {
            schemas: BTreeMap::new(),
        };
        r.register(Box::new(FixViolation));
        r.register(Box::new(ImplementFeature));
        r.register(Box::new(WriteTests));
        r
    }
}

impl SchemaRegistry {
    /// Adds or replaces a task type.
    pub fn register(&mut self, s: Box<dyn ContextSchema>) {
        self.schemas.insert(s.name().to_string(), s);
    }

    /// The schema of `task_type`, or an error listing the known ones.
    pub fn get(&self, task_type: &str) -> Result<&dyn ContextSchema, String> {
        self.schemas
            .get(task_type)
            .map(|b| b.as_ref())
            .ok_or_else(|| {
                format!(
                    "unknown task type `{task_type}`; known task types: {}",
                    self.schemas.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })
    }

    /// Names of all task types.
    pub fn names(&self) -> Vec<String> {
        self.schemas.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(gathered: bool, changed: bool, ready: bool, failed: bool) -> StepFacts {
        StepFacts {
            gathered_context: gathered,
            changed_files: changed,
            ready,
            verification_failed: failed,
        }
    }

    #[test]
    fn transitions() {
        let s = FixViolation;
        assert_eq!(s.initial_phase(), "analyze");
        assert_eq!(
            s.next_phase("analyze", 1, facts(false, false, false, false)),
            "analyze"
        );
        assert_eq!(
            s.next_phase("analyze", 1, facts(true, false, false, false)),
            "implement"
        );
        assert_eq!(
            s.next_phase("analyze", 3, facts(false, false, false, false)),
            "implement"
        );
        assert_eq!(
            s.next_phase("implement", 2, facts(false, true, false, true)),
            "implement"
        );
        assert_eq!(
            s.next_phase("implement", 2, facts(false, true, true, false)),
            "verify"
        );
        assert_eq!(
            s.next_phase("verify", 1, facts(false, false, false, true)),
            "implement"
        );
        assert_eq!(
            s.next_phase("analyze", 1, facts(false, false, true, false)),
            "verify"
        );
    }

    #[test]
    fn unknown_task_type_lists_known_ones() {
        let err = SchemaRegistry::default().get("refactor").err().unwrap();
        assert!(err.contains("fix_violation"), "{err}");
    }
}
