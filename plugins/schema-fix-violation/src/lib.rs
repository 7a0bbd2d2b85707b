//! Task type `fix_violation`: make a failing check or test pass with a minimal change.
//!
//! A port of the host's native `FixViolation` (host/context/src/schemas.rs): same name, default
//! success criteria and phase graph (`graph.json` is `standard_graph(false)` as the host
//! serializes it), same `current_state` shape. The violated file is not read here: the
//! host inserts it, numbered, at `/file_content/content` (`null` when it does not exist).

use agentforge_plugin_sdk::serde_json::{self, json, Value};
use agentforge_plugin_sdk::{export_schema, remaining_issues, CurrentState, Schema, SchemaInfo};

/// The phase graph: analyze -> implement <-> verify, in the host's serde shape.
const GRAPH: &str = include_str!("../graph.json");

/// The task type.
pub struct FixViolation;

impl Schema for FixViolation {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "fix_violation".into(),
            description: "make a failing check or test pass with a minimal change".into(),
            budgets: Vec::new(),
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: Vec::new(),
            default_success_criteria: vec![
                "The violated check passes".into(),
                "All other checks and tests still pass".into(),
                "Minimal changes, only to code related to the violation".into(),
            ],
        }
    }

    fn build(task: Value, state: Value) -> Result<CurrentState, String> {
        Ok(build(&task, &state))
    }
}

/// Task input `key` (`task.yaml` `inputs.<key>`).
fn input<'a>(task: &'a Value, key: &str) -> Option<&'a Value> {
    task.get("inputs").and_then(|i| i.get(key))
}

/// The `current_state` section: the violation, the check's definition, the violated
/// file (inserted by the host) and the remaining issues.
fn build(task: &Value, state: &Value) -> CurrentState {
    let violation = input(task, "violation").cloned().unwrap_or(Value::Null);
    let file = violation
        .get("file_path")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut out = CurrentState::new();
    out.set("violation", violation);
    if let Some(def) = input(task, "check_definition") {
        out.set("check_definition", def.clone());
    }
    if let Some(path) = file {
        out.set("file_content", json!({ "path": path }));
        out.file("/file_content/content", &path);
    }
    let issues = remaining_issues(state);
    if !issues.is_empty() {
        out.set("remaining_issues", json!(issues));
    }
    out
}

export_schema!(FixViolation);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_parses_and_starts_in_analyze() {
        let info = FixViolation::describe();
        assert_eq!(info.phase_graph["initial"], "analyze");
        let phases: Vec<&str> = info.phase_graph["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            phases,
            [
                "analyze",
                "implement",
                "verify",
                "complete",
                "failed",
                "escalated"
            ]
        );
    }

    #[test]
    fn the_violated_file_is_inserted_by_the_host() {
        let task = json!({"inputs": {
            "violation": {"file_path": "src/a.rs", "line": 3},
            "check_definition": null,
        }});
        let out = build(&task, &json!({}));
        assert_eq!(out.json["violation"]["file_path"], "src/a.rs");
        assert_eq!(out.json["check_definition"], Value::Null);
        assert_eq!(out.json["file_content"], json!({"path": "src/a.rs"}));
        assert_eq!(
            out.files,
            vec![("/file_content/content".to_string(), "src/a.rs".to_string())]
        );
        assert!(!out.json.contains_key("remaining_issues"));
    }

    #[test]
    fn without_inputs_the_violation_is_null() {
        let out = build(&json!({"inputs": {}}), &json!({}));
        assert_eq!(out.json.len(), 1);
        assert_eq!(out.json["violation"], Value::Null);
        assert!(out.files.is_empty());
    }

    #[test]
    fn remaining_issues_are_failing_checks_then_error_facts() {
        let state = json!({
            "verification": {"checks": {
                "tests": {"passing": false, "summary": "1 failed"},
                "clippy": {"passing": true, "summary": "ok"},
                "fmt": {"passing": false, "summary": "diff"},
            }},
            "facts": [
                {"category": "error", "statement": "E0308 in src/a.rs:3"},
                {"category": "verification", "statement": "tests: 1 failed"},
            ],
        });
        assert_eq!(
            remaining_issues(&state),
            ["fmt: diff", "tests: 1 failed", "E0308 in src/a.rs:3"]
        );
        let out = build(&json!({}), &state);
        assert_eq!(out.json["remaining_issues"].as_array().unwrap().len(), 3);
    }
}
