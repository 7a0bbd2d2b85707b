//! Task type `write_tests`: the RED phase, tests that define the behaviour and currently
//! fail.
//!
//! A port of the host's native `WriteTests` (host/context/src/schemas.rs): same name, default
//! success criteria and phase graph (`graph.json` is `standard_graph(false)` as the host
//! serializes it), same `current_state` shape. The files are inserted, numbered, by the
//! host: the example test at `/test_patterns/example_test`, the target test file at
//! `/target_test_file/existing_content` (`null` when it does not exist). Unlike the native
//! schema, `test_patterns` is present (with a `null` example) when the example file is
//! missing: the plugin cannot see the workspace.

use agentforge_plugin_sdk::serde_json::{self, json, Value};
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The phase graph: analyze -> implement <-> verify, in the host's serde shape.
const GRAPH: &str = include_str!("../graph.json");

/// The task type.
pub struct WriteTests;

impl Schema for WriteTests {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "write_tests".into(),
            description: "write tests that define the behaviour and currently fail (the RED phase)"
                .into(),
            budgets: Vec::new(),
            phase_graph: serde_json::from_str(GRAPH).expect("graph.json is valid JSON"),
            prompts: Vec::new(),
            default_success_criteria: vec![
                "One test per acceptance criterion".into(),
                "Tests run and currently fail for the missing behaviour".into(),
            ],
        }
    }

    fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
        Ok(build(&task))
    }
}

/// Task input `key` (`task.yaml` `inputs.<key>`).
fn input<'a>(task: &'a Value, key: &str) -> Option<&'a Value> {
    task.get("inputs").and_then(|i| i.get(key))
}

/// The `current_state` section: the spec, an example test and the target test file (both
/// inserted by the host).
fn build(task: &Value) -> CurrentState {
    let mut out = CurrentState::new();
    out.set("spec", input(task, "spec").cloned().unwrap_or(Value::Null));
    if let Some(p) = input(task, "example_test_file").and_then(Value::as_str) {
        out.set("test_patterns", json!({ "path": p }));
        out.file("/test_patterns/example_test", p);
    }
    if let Some(p) = input(task, "target_test_file").and_then(Value::as_str) {
        out.set("target_test_file", json!({ "path": p }));
        out.file("/target_test_file/existing_content", p);
    }
    out
}

export_schema!(WriteTests);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_parses_and_has_no_plan_phase() {
        let info = WriteTests::describe();
        assert_eq!(info.phase_graph["initial"], "analyze");
        let phases = info.phase_graph["phases"].as_array().unwrap();
        assert!(phases.iter().all(|p| p["name"] != "plan"));
        assert_eq!(phases.len(), 6);
    }

    #[test]
    fn the_example_and_target_files_are_inserted_by_the_host() {
        let task = json!({"inputs": {
            "spec": "S",
            "example_test_file": "tests/a.rs",
            "target_test_file": "tests/b.rs",
        }});
        let out = build(&task);
        assert_eq!(out.json["spec"], "S");
        assert_eq!(out.json["test_patterns"], json!({"path": "tests/a.rs"}));
        assert_eq!(out.json["target_test_file"], json!({"path": "tests/b.rs"}));
        assert_eq!(
            out.files,
            vec![
                (
                    "/test_patterns/example_test".to_string(),
                    "tests/a.rs".to_string()
                ),
                (
                    "/target_test_file/existing_content".to_string(),
                    "tests/b.rs".to_string()
                ),
            ]
        );
    }

    #[test]
    fn without_inputs_only_the_spec() {
        let out = build(&json!({"inputs": {"example_test_file": 3}}));
        assert_eq!(out.json.len(), 1);
        assert_eq!(out.json["spec"], Value::Null);
        assert!(out.files.is_empty());
    }
}
