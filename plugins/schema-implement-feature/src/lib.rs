//! Task type `implement_feature`: implement a verified spec in target files until tests
//! pass.
//!
//! A port of the host's native `ImplementFeature` (host/context/src/schemas.rs): same name,
//! default success criteria and phase graph (`graph.json` is `standard_graph(true)` as the
//! host serializes it), same `current_state` shape but for the target files: each is
//! `{path, content}`, its content inserted, numbered, by the host (`null` when the file
//! does not exist yet). The native `status` (`to_modify`/`to_create`) is dropped: the
//! plugin cannot see the workspace; a `null` content says the file is to be created.

use agentforge_plugin_sdk::serde_json::{self, json, Value};
use agentforge_plugin_sdk::{export_schema, remaining_issues, CurrentState, Schema, SchemaInfo};

/// The phase graph: analyze -> plan -> implement <-> verify, in the host's serde shape.
const GRAPH: &str = include_str!("../graph.json");

/// The task type.
pub struct ImplementFeature;

impl Schema for ImplementFeature {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "implement_feature".into(),
            description: "implement a verified spec in target files until tests pass".into(),
            budgets: Vec::new(),
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: Vec::new(),
            default_success_criteria: vec![
                "Every requirement's acceptance criteria are met".into(),
                "All tests pass".into(),
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

/// The `current_state` section: the spec, the target files (inserted by the host), the
/// test requirements and the remaining issues.
fn build(task: &Value, state: &Value) -> CurrentState {
    let mut out = CurrentState::new();
    out.set("spec", input(task, "spec").cloned().unwrap_or(Value::Null));
    let paths: Vec<&str> = input(task, "target_files")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    out.set(
        "target_files",
        Value::Array(paths.iter().map(|p| json!({ "path": p })).collect()),
    );
    for (i, p) in paths.iter().enumerate() {
        out.file(&format!("/target_files/{i}/content"), p);
    }
    if let Some(t) = input(task, "test_requirements") {
        out.set("test_requirements", t.clone());
    }
    let issues = remaining_issues(state);
    if !issues.is_empty() {
        out.set("remaining_issues", json!(issues));
    }
    out
}

export_schema!(ImplementFeature);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_parses_and_has_a_plan_phase() {
        let info = ImplementFeature::describe();
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
                "plan",
                "implement",
                "verify",
                "complete",
                "failed",
                "escalated"
            ]
        );
    }

    #[test]
    fn each_target_file_is_inserted_by_the_host() {
        let task = json!({"inputs": {
            "spec": {"requirements": ["R1"]},
            "target_files": ["src/a.rs", 7, "src/new.rs"],
            "test_requirements": "one test per requirement",
        }});
        let out = build(&task, &json!({}));
        assert_eq!(out.json["spec"], json!({"requirements": ["R1"]}));
        assert_eq!(
            out.json["target_files"],
            json!([{"path": "src/a.rs"}, {"path": "src/new.rs"}])
        );
        assert_eq!(
            out.files,
            vec![
                (
                    "/target_files/0/content".to_string(),
                    "src/a.rs".to_string()
                ),
                (
                    "/target_files/1/content".to_string(),
                    "src/new.rs".to_string()
                ),
            ]
        );
        assert_eq!(out.json["test_requirements"], "one test per requirement");
    }

    #[test]
    fn without_inputs_spec_is_null_and_targets_empty() {
        let out = build(&json!({}), &json!({}));
        assert_eq!(out.json["spec"], Value::Null);
        assert_eq!(out.json["target_files"], json!([]));
        assert_eq!(out.json.len(), 2);
        assert!(out.files.is_empty());
    }

    #[test]
    fn remaining_issues_are_failing_checks_then_error_facts() {
        let state = json!({
            "verification": {"checks": {
                "tests": {"passing": false, "summary": "2 failed"},
                "build": {"passing": true, "summary": "ok"},
            }},
            "facts": [{"category": "error", "statement": "panic at src/a.rs:9"}],
        });
        let out = build(&json!({}), &state);
        assert_eq!(
            out.json["remaining_issues"],
            json!(["tests: 2 failed", "panic at src/a.rs:9"])
        );
    }
}
