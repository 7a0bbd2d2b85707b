//! Reading the task state a guard receives (`state-json`: the task's `state.yaml` as
//! JSON; the host's `TaskState`). Shared by the guards that judge the same facts
//! (`guard-tested-evidence`, `guard-learned-rules`), so they cannot drift apart.
//!
//! The fields read here: `verification.checks` (per check name: `passing`, `summary`,
//! `is_test`, `step`), `last_change_step` (the last step that changed workspace files; 0
//! before any change). Missing fields read as their defaults, as the host writes them.

use serde_json::Value;

/// One test check's latest result in the state.
struct TestRun<'a> {
    name: &'a str,
    passing: bool,
    summary: &'a str,
    step: u64,
}

/// What is missing for the state to show a passing test run after the last change, worded
/// for the model with what to do; `None` when nothing is.
///
/// Evidence is a test check (`is_test`) that passed at or after `last_change_step`, with
/// no test check whose latest result is failing. The change's own step counts: the host
/// runs every check right after a file change, in that step (its
/// `verification.ready_for_completion` uses the same rule). With no change yet
/// (`last_change_step` 0) any passing test run counts.
pub fn missing_test_evidence(state: &Value) -> Option<String> {
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
    let again = "run the tests (run_tests) after your last change";
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(last_change: u64, checks: Value) -> Value {
        json!({"last_change_step": last_change, "verification": {"checks": checks}})
    }

    #[test]
    fn names_what_is_missing() {
        let none = missing_test_evidence(&json!({})).unwrap();
        assert!(none.starts_with("no test has run"), "{none}");
        let lint = json!({"lint": {"passing": true, "summary": "ok", "is_test": false, "step": 3}});
        assert!(missing_test_evidence(&state(1, lint))
            .unwrap()
            .starts_with("no test has run"));
        let old = json!({"tests": {"passing": true, "summary": "ok", "is_test": true, "step": 2}});
        assert_eq!(
            missing_test_evidence(&state(4, old)).unwrap(),
            "the last test run (`tests`, step 2) is older than the change at step 4; run the tests (run_tests) after your last change"
        );
        let failing =
            json!({"tests": {"passing": false, "summary": "1 failed", "is_test": true, "step": 5}});
        assert_eq!(
            missing_test_evidence(&state(4, failing)).unwrap(),
            "the test check `tests` is failing (step 5: 1 failed); fix it, then run the tests (run_tests) after your last change"
        );
    }

    #[test]
    fn a_passing_run_at_or_after_the_change_is_evidence() {
        for step in [4, 5] {
            let ok =
                json!({"tests": {"passing": true, "summary": "ok", "is_test": true, "step": step}});
            assert_eq!(missing_test_evidence(&state(4, ok)), None);
        }
        let first =
            json!({"tests": {"passing": true, "summary": "ok", "is_test": true, "step": 1}});
        assert_eq!(missing_test_evidence(&state(0, first)), None);
    }
}
