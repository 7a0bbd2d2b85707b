//! Guard (seed 003's `block-tested-true`): a state field may not be marked tested
//! unless the host's own record shows a passing test run after the last change.
//!
//! It judges the action `set_field`, whose arguments are
//! `{"field": string, "value": any, "evidence": string}`: setting a field named `tested`
//! (or ending in `.tested`) to `true` (or the string `"true"`) is allowed only when the
//! task's state (`state-json`) shows a test check (`verification.checks.<name>.is_test`)
//! that passed at or after the step of the last change (`last_change_step`), and no test
//! check whose latest result is failing. The model's `evidence` text is not enough: it
//! is what the model says, while the verification is what the host ran and recorded.
//!
//! A check whose `step` equals `last_change_step` counts: the host runs every check
//! right after a file change, in the change's own step (the same rule as its
//! `verification.ready_for_completion`). With no change yet (`last_change_step` 0),
//! any passing test run counts. Every other action, field and value is allowed.

use agentforge_plugin_sdk::{export_guard, ActionCheck, Decision, Guard};
use serde_json::Value;

/// The guard.
pub struct TestedNeedsEvidence;

impl Guard for TestedNeedsEvidence {
    fn check(input: ActionCheck) -> Decision {
        decide(&input)
    }
}

/// The decision on one action (no host call, so it runs natively in the tests).
fn decide(input: &ActionCheck) -> Decision {
    if input.action != "set_field" {
        return Decision::Allow;
    }
    let args: Value = match serde_json::from_str(&input.arguments_json) {
        Ok(v) => v,
        Err(e) => return Decision::Deny(format!("set_field refused: unreadable arguments ({e})")),
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
    if !marks_tested {
        return Decision::Allow;
    }
    // A state the guard cannot read must not let the claim through.
    let state: Value = match serde_json::from_str(&input.state_json) {
        Ok(v) => v,
        Err(e) => {
            return Decision::Deny(format!(
                "`{field}` may not be set to true: the task state cannot be read ({e})"
            ))
        }
    };
    match missing_test_evidence(&state) {
        None => Decision::Allow,
        Some(why) => Decision::Deny(format!("`{field}` may not be set to true: {why}")),
    }
}

/// One test check's latest result in the state.
struct TestRun<'a> {
    name: &'a str,
    passing: bool,
    summary: &'a str,
    step: u64,
}

/// What is missing for the state to show a passing test run after the last change
/// (`None`: nothing), worded for the model with what to do. Shared in spirit with
/// `guard-learned-rules`' `no_passing_test_since_last_change` condition.
fn missing_test_evidence(state: &Value) -> Option<String> {
    let last_change = state["last_change_step"].as_u64().unwrap_or(0);
    let tests: Vec<TestRun> = state["verification"]["checks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, c)| c["is_test"] == Value::Bool(true))
        .map(|(name, c)| TestRun {
            name,
            passing: c["passing"] == Value::Bool(true),
            summary: c["summary"].as_str().unwrap_or(""),
            step: c["step"].as_u64().unwrap_or(0),
        })
        .collect();
    let again = "run the tests (run_tests) after your last change, then claim it tested";
    if tests.is_empty() {
        return Some(format!(
            "no test has run in this task (the verification records no test check); {again}"
        ));
    }
    if let Some(t) = tests.iter().find(|t| !t.passing) {
        let summary = match t.summary.trim() {
            "" => String::new(),
            s => format!(": {s}"),
        };
        return Some(format!(
            "the test check `{}` is failing (step {}{summary}); fix it, then {again}",
            t.name, t.step
        ));
    }
    if tests.iter().any(|t| t.step >= last_change) {
        return None;
    }
    // Every test result predates the change: name the latest run.
    let latest = tests.iter().max_by_key(|t| t.step)?;
    Some(format!(
        "the last test run (`{}`, step {}) is older than the change at step {last_change}; {again}",
        latest.name, latest.step
    ))
}

export_guard!(TestedNeedsEvidence);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set_tested(value: Value, state: Value) -> Decision {
        decide(&ActionCheck {
            action: "set_field".into(),
            target: Some("subtask.tested".into()),
            arguments_json: json!({"field": "subtask.tested", "value": value, "evidence": "it works"})
                .to_string(),
            task_json: "{}".into(),
            state_json: state.to_string(),
        })
    }

    fn state(last_change: u64, checks: Value) -> Value {
        json!({"last_change_step": last_change, "files_modified": ["src/lib.rs"],
               "verification": {"checks": checks, "ready_for_completion": false}})
    }

    /// The SDK's `Decision` (generated by wit-bindgen) has no `PartialEq`.
    fn assert_allowed(d: Decision) {
        assert!(matches!(d, Decision::Allow), "expected allow, got {d:?}");
    }

    fn deny_reason(d: Decision) -> String {
        match d {
            Decision::Deny(r) => r,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn no_test_run_at_all_is_denied_whatever_the_evidence_says() {
        let r = deny_reason(set_tested(json!(true), json!({})));
        assert!(r.contains("no test has run"), "{r}");
        assert!(r.contains("run the tests (run_tests) after your last change"), "{r}");
        // A check that is not a test is no test run.
        let checks = json!({"clippy": {"passing": true, "summary": "ok", "is_test": false, "step": 4}});
        let r = deny_reason(set_tested(json!(true), state(2, checks)));
        assert!(r.starts_with("`subtask.tested` may not be set to true: no test has run"), "{r}");
    }

    #[test]
    fn a_test_run_older_than_the_change_is_denied_naming_both_steps() {
        let checks = json!({"tests": {"passing": true, "summary": "3 passed", "is_test": true, "step": 3}});
        let r = deny_reason(set_tested(json!(true), state(5, checks)));
        assert!(
            r.contains("the last test run (`tests`, step 3) is older than the change at step 5"),
            "{r}"
        );
        assert!(r.contains("run the tests (run_tests) after your last change"), "{r}");
    }

    #[test]
    fn a_failing_test_check_is_denied_by_name() {
        let checks = json!({
            "tests": {"passing": false, "summary": "3 passed, 1 failed", "is_test": true, "step": 6},
            "unit": {"passing": true, "summary": "ok", "is_test": true, "step": 6}
        });
        let r = deny_reason(set_tested(json!("true"), state(5, checks)));
        assert!(
            r.contains("the test check `tests` is failing (step 6: 3 passed, 1 failed)"),
            "{r}"
        );
    }

    #[test]
    fn a_passing_test_run_after_the_change_is_allowed() {
        let after = json!({"tests": {"passing": true, "summary": "4 passed", "is_test": true, "step": 7}});
        assert_allowed(set_tested(json!(true), state(5, after)));
        // The host runs every check right after a change, in the change's own step.
        let same = json!({"tests": {"passing": true, "summary": "4 passed", "is_test": true, "step": 5}});
        assert_allowed(set_tested(json!(true), state(5, same)));
        // One stale passing suite beside a fresh passing one: the fresh run counts.
        let mixed = json!({
            "old": {"passing": true, "summary": "ok", "is_test": true, "step": 2},
            "tests": {"passing": true, "summary": "ok", "is_test": true, "step": 6}
        });
        assert_allowed(set_tested(json!(true), state(5, mixed)));
    }

    #[test]
    fn with_no_change_yet_any_passing_test_run_counts() {
        let checks = json!({"tests": {"passing": true, "summary": "ok", "is_test": true, "step": 1}});
        let mut s = state(0, checks);
        s["files_modified"] = json!([]);
        assert_allowed(set_tested(json!(true), s));
    }

    #[test]
    fn other_actions_fields_and_values_are_allowed() {
        assert_allowed(set_tested(json!(false), json!({})));
        let other = |action: &str, args: &str| {
            decide(&ActionCheck {
                action: action.into(),
                target: None,
                arguments_json: args.into(),
                task_json: "{}".into(),
                state_json: "{}".into(),
            })
        };
        assert_allowed(other("complete", "{}"));
        assert_allowed(other("set_field", r#"{"field":"notes","value":true}"#));
        assert!(matches!(other("set_field", "not json"), Decision::Deny(_)));
    }

    #[test]
    fn an_unreadable_state_is_denied() {
        let d = decide(&ActionCheck {
            action: "set_field".into(),
            target: Some("tested".into()),
            arguments_json: r#"{"field":"tested","value":true}"#.into(),
            task_json: "{}".into(),
            state_json: "not json".into(),
        });
        assert!(deny_reason(d).contains("the task state cannot be read"));
    }
}
