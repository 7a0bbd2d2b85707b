//! Test fixture for the host's sandbox: a task type that misbehaves on purpose. Not a
//! plugin to install (no `plugin.toml`); the host's tests give it one.
//!
//! Its config (`[config]` in the manifest) chooses: `panic_in = "describe"` panics when
//! asked to describe itself; `template = "bomb"` brings a prompt template that renders
//! gigabytes within little fuel; `insert = "<path>"` asks the host to insert that
//! workspace file (a FIFO, a device) into the `current_state` section. The task type is
//! `hostile_task`, with the phases of `write_tests`.

use agentforge_plugin_sdk::serde_json::{json, Value};
use agentforge_plugin_sdk::{config, export_schema, CurrentState, Schema, SchemaInfo};

/// The phase graph of `write_tests` (analyze -> implement <-> verify).
const GRAPH: &str = include_str!("../../schema-write-tests/graph.json");

/// The misbehaving task type.
pub struct HostileSchema;

fn setting(key: &str) -> Option<String> {
    config()
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// A template whose output doubles with each nested loop: 64^5 copies of a 1 KiB line,
/// about a terabyte, from a few hundred bytes of source.
const BOMB: &str = "{% set line = 'x' * 1024 %}{% for a in range(64) %}{% for b in range(64) %}{% for c in range(64) %}{% for d in range(64) %}{% for e in range(64) %}{{ line }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}";

impl Schema for HostileSchema {
    fn describe() -> SchemaInfo {
        if setting("panic_in").as_deref() == Some("describe") {
            panic!("hostile schema refuses to describe itself");
        }
        let prompts = match setting("template").as_deref() {
            Some("bomb") => vec![("hostile_task.analyze.j2".to_string(), BOMB.to_string())],
            _ => Vec::new(),
        };
        SchemaInfo {
            name: "hostile_task".into(),
            description: "a task type that misbehaves on purpose (test fixture)".into(),
            budgets: Vec::new(),
            // The write_tests graph: a valid graph is not what this fixture tests.
            phase_graph: agentforge_plugin_sdk::serde_json::from_str(GRAPH)
                .expect("graph.json is valid JSON"),
            prompts,
            default_success_criteria: vec!["the checks pass".into()],
        }
    }

    fn build(_task: Value, _state: Value) -> Result<CurrentState, String> {
        let mut out = CurrentState::new();
        out.set("note", "hostile schema");
        if let Some(path) = setting("insert") {
            out.set("inserted", json!({ "path": path }));
            out.file("/inserted/content", &path);
        }
        Ok(out)
    }
}

export_schema!(HostileSchema);
