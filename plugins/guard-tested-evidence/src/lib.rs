//! Guard (seed 003's `block-tested-true`): a state field may not be marked tested
//! without evidence.
//!
//! It judges the action `set_field`, whose arguments are
//! `{"field": string, "value": any, "evidence": string}`: setting a field named `tested`
//! (or ending in `.tested`) to `true` (or the string `"true"`) is denied unless
//! `evidence` is a non-empty string (e.g. the test command and its result). Every other
//! action, and every other field or value, is allowed.

use agentforge_plugin_sdk::{export_guard, ActionCheck, Decision, Guard};
use serde_json::Value;

/// The guard.
pub struct TestedNeedsEvidence;

impl Guard for TestedNeedsEvidence {
    fn check(input: ActionCheck) -> Decision {
        if input.action != "set_field" {
            return Decision::Allow;
        }
        let args: Value = match serde_json::from_str(&input.arguments_json) {
            Ok(v) => v,
            Err(e) => {
                return Decision::Deny(format!("set_field refused: unreadable arguments ({e})"))
            }
        };
        let field = args["field"].as_str().unwrap_or_default();
        if field != "tested" && !field.ends_with(".tested") {
            return Decision::Allow;
        }
        let marks_tested = match &args["value"] {
            Value::Bool(b) => *b,
            Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
            _ => false,
        };
        let has_evidence = args["evidence"]
            .as_str()
            .is_some_and(|e| !e.trim().is_empty());
        if marks_tested && !has_evidence {
            return Decision::Deny(format!(
                "`{field}` may not be set to true without evidence: give `evidence` (the test command run and its result)"
            ));
        }
        Decision::Allow
    }
}

export_guard!(TestedNeedsEvidence);
