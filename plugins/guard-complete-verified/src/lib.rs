//! Guard: `complete` is denied unless the task state says
//! `verification.ready_for_completion` (every check has run since the last change and
//! passes). The reason lists the failing checks so the model knows what to fix.

use agentforge_plugin_sdk::{export_guard, ActionCheck, Decision, Guard};
use serde_json::Value;

/// The guard.
pub struct CompleteVerified;

impl Guard for CompleteVerified {
    fn check(input: ActionCheck) -> Decision {
        if input.action != "complete" {
            return Decision::Allow;
        }
        // A state the guard cannot read must not let `complete` through.
        let state: Value = match serde_json::from_str(&input.state_json) {
            Ok(v) => v,
            Err(e) => return Decision::Deny(format!("complete refused: unreadable state ({e})")),
        };
        let verification = &state["verification"];
        if verification["ready_for_completion"] == Value::Bool(true) {
            return Decision::Allow;
        }
        let checks = verification["checks"].as_object();
        let failing: Vec<String> = checks
            .into_iter()
            .flatten()
            .filter(|(_, c)| c["passing"] != Value::Bool(true))
            .map(|(name, c)| format!("{name}: {}", c["summary"].as_str().unwrap_or("failing")))
            .collect();
        let why = if checks.is_none_or(|c| c.is_empty()) {
            "no check has run yet; run run_check/run_tests first".to_string()
        } else if failing.is_empty() {
            "the checks have not all run since the last change; run them again".to_string()
        } else {
            format!("failing checks: {}", failing.join("; "))
        };
        Decision::Deny(format!(
            "complete refused: verification is not passing ({why})"
        ))
    }
}

export_guard!(CompleteVerified);
