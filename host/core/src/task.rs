//! The immutable task specification (`task.yaml`) and its validation.
//!
//! A task spec is written once when a task is created and never changed: it is the
//! "verified input" every step's context is rebuilt from.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// `inputs:` does not match the input schema of the task type.
    #[error("invalid task file {path}: {}", problems.join("; "))]
    Inputs {
        /// The file.
        path: String,
        /// Each problem, naming the key (`inputs.violation.file_pth`), what is wrong,
        /// a did-you-mean where a declared key is close, and the accepted keys.
        problems: Vec<String>,
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

    /// Checks `inputs:` against the input schema of the task type (see
    /// [`check_value`]); `origin` names the file in errors. The host's own input
    /// `plan` (the initial plan, any task type) is always accepted.
    pub fn check_inputs(&self, origin: &str, schema: &Value) -> Result<(), TaskError> {
        let mut schema = schema.clone();
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props
                .entry(HOST_INPUT_PLAN)
                .or_insert_with(|| serde_json::json!({"type": "object"}));
        }
        let inputs = Value::Object(self.inputs.clone().into_iter().collect());
        let mut problems = Vec::new();
        check_value(&inputs, &schema, "inputs", &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(TaskError::Inputs {
                path: origin.to_string(),
                problems,
            })
        }
    }

    /// Renders the spec as YAML for `task.yaml`.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("task spec serializes")
    }

    /// The workspace paths the task's inputs name: every string (or list of strings)
    /// under one of the [`PATH_INPUT_KEYS`], at any depth of `inputs` (the violation's
    /// `file_path`, `target_files`, a role brief's `task.files_expected`...), in order
    /// and without repeats. The instruction files are looked up from their folders.
    pub fn named_paths(&self) -> Vec<String> {
        fn walk(v: &Value, under_path_key: bool, out: &mut Vec<String>) {
            match v {
                Value::String(s) if under_path_key => {
                    let s = s.trim();
                    if !s.is_empty() && !out.iter().any(|o| o == s) {
                        out.push(s.to_string());
                    }
                }
                Value::Array(items) => {
                    for item in items {
                        walk(item, under_path_key, out);
                    }
                }
                Value::Object(map) => {
                    for (k, item) in map {
                        walk(item, PATH_INPUT_KEYS.contains(&k.as_str()), out);
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        for (k, v) in &self.inputs {
            walk(v, PATH_INPUT_KEYS.contains(&k.as_str()), &mut out);
        }
        out
    }
}

/// The input keys whose values are workspace paths, in the built-in task types
/// (`fix_violation`'s `violation.file_path`, `implement_feature`'s `target_files`,
/// `write_tests`' `example_test_file` and `target_test_file`) and the value loop's role
/// briefs (`task.files_expected`).
pub const PATH_INPUT_KEYS: [&str; 5] = [
    "file_path",
    "target_files",
    "example_test_file",
    "target_test_file",
    "files_expected",
];

/// The input every task type accepts: the initial plan, read by the host.
const HOST_INPUT_PLAN: &str = "plan";

/// Checks `value` against `schema`, a subset of JSON Schema that task types use to
/// declare their inputs, and adds one message per problem to `problems` (`at` is the
/// dotted path of `value`, e.g. `inputs.violation`):
///
/// - `type`: `object`, `array`, `string`, `number`, `integer`, `boolean`, `null`, or a
///   list of them;
/// - `properties` (per key, a schema) and `required` (keys that must be present);
/// - `additionalProperties: false`: a key not in `properties` is an error. Otherwise
///   other keys are accepted, except one that is a near miss of a declared key the
///   object lacks (`file_pth` for `file_path`): that is a typo, and an error;
/// - `items`: the schema of every element of an array.
///
/// Other keywords are ignored. Unknown keys get a did-you-mean when a declared key is
/// close, and the message lists the accepted keys.
pub fn check_value(value: &Value, schema: &Value, at: &str, problems: &mut Vec<String>) {
    if let Some(expected) = schema.get("type") {
        let allowed: Vec<&str> = match expected {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| has_type(value, t)) {
            problems.push(format!(
                "{at}: expected {}, found {}",
                allowed
                    .iter()
                    .map(|t| type_phrase(t))
                    .collect::<Vec<_>>()
                    .join(" or "),
                type_phrase(value_type(value))
            ));
            return;
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            let mut declared: Vec<&str> = props
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            declared.sort_unstable();
            let accepted = if declared.is_empty() {
                "none".to_string()
            } else {
                declared.join(", ")
            };
            for key in map.keys() {
                if declared.contains(&key.as_str()) {
                    continue;
                }
                let near = suggestion(key, &declared);
                // An open object takes any key, but not a misspelling of one it lacks.
                let typo = near.filter(|n| !map.contains_key(*n) && is_near_miss(key, n));
                if closed {
                    let hint = near
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    problems.push(format!(
                        "{at}: unknown key `{key}`{hint}; accepted keys: {accepted}"
                    ));
                } else if let Some(n) = typo {
                    problems.push(format!(
                        "{at}: unknown key `{key}` (did you mean `{n}`?); declared keys: {accepted}"
                    ));
                }
            }
            if let Some(required) = schema.get("required").and_then(Value::as_array) {
                for key in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(key) {
                        problems.push(format!("{at}: missing required key `{key}`"));
                    }
                }
            }
            if let Some(props) = props {
                for (key, v) in map {
                    if let Some(sub) = props.get(key) {
                        check_value(v, sub, &format!("{at}.{key}"), problems);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for (i, v) in items.iter().enumerate() {
                    check_value(v, item_schema, &format!("{at}[{i}]"), problems);
                }
            }
        }
        _ => {}
    }
}

/// The declared key closest to `key`, when close enough to suggest.
fn suggestion<'a>(key: &str, declared: &[&'a str]) -> Option<&'a str> {
    declared
        .iter()
        .map(|d| (strsim::jaro_winkler(key, d), *d))
        .filter(|(score, d)| *score >= 0.8 || is_near_miss(key, d))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, d)| d)
}

/// Whether `key` looks like a misspelling of `declared`: at most two edits apart (one
/// for short keys) and not the same key.
fn is_near_miss(key: &str, declared: &str) -> bool {
    let max = if declared.chars().count() <= 4 { 1 } else { 2 };
    key != declared && strsim::damerau_levenshtein(key, declared) <= max
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "number" => v.is_number(),
        other => value_type(v) == other,
    }
}

fn type_phrase(t: &str) -> String {
    match t {
        "object" => "a mapping".to_string(),
        "array" => "a list".to_string(),
        "string" => "a string".to_string(),
        "number" => "a number".to_string(),
        "integer" => "an integer".to_string(),
        "boolean" => "true or false".to_string(),
        "null" => "nothing (null)".to_string(),
        other => format!("`{other}`"),
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
    fn named_paths_are_the_path_inputs_at_any_depth_once_each() {
        let text = "id: a\ntask_type: x\ngoal: g\ninputs:\n  violation: {file_path: src/a.rs, message: src/not_a_path.rs}\n  target_files: [src/a.rs, src/b.rs]\n  brief: {task: {files_expected: [web/app.js]}}\n  spec: docs/x.md\n";
        let spec = TaskSpec::parse(text, "t.yaml").unwrap();
        assert_eq!(
            spec.named_paths(),
            ["web/app.js", "src/a.rs", "src/b.rs"],
            "inputs are a sorted map: brief, target_files, violation"
        );
        assert!(TaskSpec::parse(GOOD, "t.yaml")
            .unwrap()
            .named_paths()
            .is_empty());
    }

    #[test]
    fn missing_goal_is_reported() {
        let err = TaskSpec::parse("id: a\ntask_type: x\n", "t.yaml").unwrap_err();
        assert!(err.to_string().contains("goal"), "{err}");
    }

    /// The input schema `fix_violation` declares: a closed top level, an open violation.
    fn fix_violation_inputs() -> Value {
        serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "violation": {"type": "object", "properties": {
                    "file_path": {"type": "string"},
                    "message": {"type": "string"},
                    "line": {"type": "integer"}
                }},
                "check_definition": {},
                "target_files": {"type": "array", "items": {"type": "string"}}
            }
        })
    }

    fn inputs_error(yaml_inputs: &str) -> Option<String> {
        let text = format!("id: a\ntask_type: fix_violation\ngoal: g\ninputs:\n{yaml_inputs}");
        let spec = TaskSpec::parse(&text, "t.yaml").unwrap();
        spec.check_inputs("t.yaml", &fix_violation_inputs())
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn good_inputs_pass_and_plan_is_always_accepted() {
        assert_eq!(
            inputs_error(
                "  violation:\n    file_path: a.rs\n    rule: R1\n  plan:\n    subtasks: [a]\n"
            ),
            None
        );
    }

    #[test]
    fn a_misspelt_nested_key_is_an_error_with_a_suggestion() {
        let msg = inputs_error("  violation:\n    file_pth: src/lib.rs\n").unwrap();
        assert!(msg.contains("t.yaml"), "{msg}");
        assert!(msg.contains("inputs.violation"), "{msg}");
        assert!(msg.contains("`file_pth`"), "{msg}");
        assert!(msg.contains("did you mean `file_path`?"), "{msg}");
        assert!(msg.contains("file_path, line, message"), "{msg}");
        // An extra key that is no misspelling stays accepted in the open violation.
        assert_eq!(
            inputs_error("  violation:\n    file_path: a\n    file_paths: b\n"),
            None
        );
    }

    #[test]
    fn an_unknown_top_level_key_lists_the_accepted_ones() {
        let msg = inputs_error("  violaton:\n    file_path: a\n").unwrap();
        assert!(
            msg.contains("unknown key `violaton` (did you mean `violation`?)"),
            "{msg}"
        );
        assert!(
            msg.contains("accepted keys: check_definition, plan, target_files, violation"),
            "{msg}"
        );
        let msg = inputs_error("  colour: red\n").unwrap();
        assert!(msg.contains("unknown key `colour`; accepted keys"), "{msg}");
    }

    #[test]
    fn wrong_types_and_missing_required_keys_are_named() {
        let msg = inputs_error("  target_files: src/lib.rs\n").unwrap();
        assert!(
            msg.contains("inputs.target_files: expected a list, found a string"),
            "{msg}"
        );
        let msg = inputs_error("  target_files: [a, 3]\n").unwrap();
        assert!(
            msg.contains("inputs.target_files[1]: expected a string"),
            "{msg}"
        );
        let mut schema = fix_violation_inputs();
        schema["required"] = serde_json::json!(["violation"]);
        let spec = TaskSpec::parse("id: a\ntask_type: x\ngoal: g\n", "t.yaml").unwrap();
        let msg = spec
            .check_inputs("t.yaml", &schema)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("inputs: missing required key `violation`"),
            "{msg}"
        );
    }
}
