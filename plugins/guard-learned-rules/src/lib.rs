//! Guard (issue 14 item 4; seed 003 layer 3, "create new guards from repeated
//! violations"): enforces the rules a person approved.
//!
//! The host derives patterns from past enforcement (a guard that keeps denying the same
//! thing), proposes a rule per pattern, and a person approves it. The approved rules reach
//! this guard as `rules` in its `config()`, only through the granted `learned_rules`
//! capability; it reads no file. Each rule is a JSON object of exactly this shape:
//!
//! ```json
//! {"id": 3, "action": "complete", "target_glob": null, "condition": "no_files_changed",
//!  "effect": "deny", "reason": "...",
//!  "pattern": "guard-verify-implementation denied `complete` 4 times in 2 tasks"}
//! ```
//!
//! - `action`: the action's name, or `*` for any. A state write the model asks for is the
//!   action `set_field`, its target the field (`subtask.tested`).
//! - `target_glob`: `null` (any target, or none), or a glob the action's target must
//!   match (`*` does not cross `/`, `**` does; the host's capability globs).
//! - `condition`, on the task state: `always`; `no_files_changed` (`files_modified` is
//!   empty); `no_passing_test_since_last_change` (no passing test run at or after the
//!   last change, as `guard-tested-evidence` judges it); `checks_not_ready`
//!   (`verification.ready_for_completion` is not true); `loop_warning_active` (a loop
//!   warning is shown).
//! - `effect`: `deny` or `warn`.
//!
//! A matching rule denies (the first matching `deny` rule, in the order given) or warns
//! (every matching `warn` rule, when none denies), citing itself:
//! `learned rule #<id>: <reason> (pattern: <pattern>)`. A rule that does not parse is
//! skipped and logged (one bad rule must not block everything, nor hide the others);
//! no rules: every action is allowed.

use std::sync::OnceLock;

use agentforge_plugin_sdk::state::missing_test_evidence;
use agentforge_plugin_sdk::{config, export_guard, log, ActionCheck, Decision, Guard, LogLevel};
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The guard.
pub struct LearnedRules;

impl Guard for LearnedRules {
    fn check(input: ActionCheck) -> Decision {
        // Parsed once per instance: the host computes the config when it loads the plugin,
        // so it cannot change between calls, and a kept instance (built-ins) logs a bad
        // rule once rather than before every action.
        static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
        let rules = RULES.get_or_init(|| {
            let (rules, problems) = parse_rules(&config());
            for p in problems {
                log(LogLevel::Warn, &p);
            }
            rules
        });
        decide(rules, &input)
    }
}

/// What a rule's match on the state needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Condition {
    Always,
    NoFilesChanged,
    NoPassingTestSinceLastChange,
    ChecksNotReady,
    LoopWarningActive,
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Effect {
    Deny,
    Warn,
}

/// A rule as the host passes it (checked field by field by serde: unknown keys and
/// wrong types are errors).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    /// The trace database's rule id (an SQLite integer, as `agentforge-graph`'s
    /// `LearnedRule::id` types it).
    id: i64,
    action: String,
    target_glob: Option<String>,
    condition: Condition,
    effect: Effect,
    reason: String,
    pattern: String,
}

/// A rule ready to match.
#[derive(Debug)]
struct Rule {
    id: i64,
    action: String,
    target: Option<GlobMatcher>,
    condition: Condition,
    effect: Effect,
    reason: String,
    pattern: String,
}

impl Rule {
    /// The rule from its JSON, or why it cannot be used.
    fn parse(value: &Value) -> Result<Rule, String> {
        let raw: RawRule = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        let action = raw.action.trim();
        if action.is_empty() {
            return Err("`action` is empty (an action name, or `*` for any)".into());
        }
        for (key, text) in [("reason", &raw.reason), ("pattern", &raw.pattern)] {
            if text.trim().is_empty() {
                return Err(format!("`{key}` is empty (the denial must cite it)"));
            }
        }
        let target = match raw.target_glob.as_deref() {
            None => None,
            Some(g) => Some(
                GlobBuilder::new(g)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| format!("`target_glob` {g:?} is not a glob: {e}"))?
                    .compile_matcher(),
            ),
        };
        Ok(Rule {
            id: raw.id,
            action: action.to_string(),
            target,
            condition: raw.condition,
            effect: raw.effect,
            reason: raw.reason.trim().to_string(),
            pattern: raw.pattern.trim().to_string(),
        })
    }

    /// Whether the rule applies to `input` in `state`.
    fn matches(&self, input: &ActionCheck, state: &Value) -> bool {
        if self.action != "*" && self.action != input.action {
            return false;
        }
        if let Some(glob) = &self.target {
            match input.target.as_deref() {
                Some(t) if glob.is_match(t) => {}
                // A rule about some targets does not apply to an action without one.
                _ => return false,
            }
        }
        match self.condition {
            Condition::Always => true,
            Condition::NoFilesChanged => state["files_modified"]
                .as_array()
                .is_none_or(|files| files.is_empty()),
            Condition::NoPassingTestSinceLastChange => missing_test_evidence(state).is_some(),
            Condition::ChecksNotReady => {
                state["verification"]["ready_for_completion"] != Value::Bool(true)
            }
            Condition::LoopWarningActive => !state["loop_warning"].is_null(),
        }
    }

    /// How a decision cites the rule.
    fn citation(&self) -> String {
        format!(
            "learned rule #{}: {} (pattern: {})",
            self.id, self.reason, self.pattern
        )
    }
}

/// The usable rules of the config's `rules`, and a log line per rule skipped. No `rules`
/// key (no capability, or nothing approved) is no rules.
fn parse_rules(config: &Map<String, Value>) -> (Vec<Rule>, Vec<String>) {
    let list = match config.get("rules") {
        None | Some(Value::Null) => return (Vec::new(), Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return (
                Vec::new(),
                vec![format!(
                "config `rules` must be a list of rule objects, not {}; no learned rule applies",
                kind_of(other)
            )],
            )
        }
    };
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    for (i, value) in list.iter().enumerate() {
        match Rule::parse(value) {
            Ok(rule) => rules.push(rule),
            Err(e) => {
                let which = match value.get("id").and_then(Value::as_i64) {
                    Some(id) => format!("#{id}"),
                    None => format!("at position {}", i + 1),
                };
                problems.push(format!(
                    "learned rule {which} skipped: {e}; the other rules still apply (fix or reject it with `agentforge guards`)"
                ));
            }
        }
    }
    (rules, problems)
}

/// A JSON value's type, for messages.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The decision of `rules` on one action (no host call, so it runs natively in the tests).
fn decide(rules: &[Rule], input: &ActionCheck) -> Decision {
    if rules.is_empty() {
        return Decision::Allow;
    }
    // A state the guard cannot read is judged as an empty one: the conditions about what
    // is missing (no change, no test, not ready) hold, so their rules apply (fail closed),
    // and the decision says why.
    let (state, note) = match serde_json::from_str::<Value>(&input.state_json) {
        Ok(v) => (v, ""),
        Err(_) => (Value::Null, " [task state unreadable]"),
    };
    let matching: Vec<&Rule> = rules.iter().filter(|r| r.matches(input, &state)).collect();
    if let Some(r) = matching.iter().find(|r| r.effect == Effect::Deny) {
        return Decision::Deny(format!("{}{note}", r.citation()));
    }
    let warnings: Vec<String> = matching
        .iter()
        .map(|r| format!("{}{note}", r.citation()))
        .collect();
    if warnings.is_empty() {
        Decision::Allow
    } else {
        Decision::Warn(warnings.join("; "))
    }
}

export_guard!(LearnedRules);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(id: i64, action: &str, glob: Option<&str>, condition: &str, effect: &str) -> Value {
        json!({"id": id, "action": action, "target_glob": glob, "condition": condition,
               "effect": effect, "reason": format!("reason {id}"),
               "pattern": format!("pattern {id}")})
    }

    fn rules(list: Vec<Value>) -> Vec<Rule> {
        let mut config = Map::new();
        config.insert("rules".into(), Value::Array(list));
        let (rules, problems) = parse_rules(&config);
        assert!(problems.is_empty(), "{problems:?}");
        rules
    }

    fn ask(rules: &[Rule], action: &str, target: Option<&str>, state: Value) -> Decision {
        decide(
            rules,
            &ActionCheck {
                action: action.into(),
                target: target.map(str::to_string),
                arguments_json: "{}".into(),
                task_json: "{}".into(),
                state_json: state.to_string(),
            },
        )
    }

    /// A state where no condition holds: files changed, a fresh passing test, checks
    /// ready, no loop warning.
    fn good_state() -> Value {
        json!({"files_modified": ["src/lib.rs"], "last_change_step": 4,
               "verification": {"ready_for_completion": true, "checks": {
                   "tests": {"passing": true, "summary": "ok", "is_test": true, "step": 5}}}})
    }

    fn denied(d: &Decision) -> Option<&str> {
        match d {
            Decision::Deny(r) => Some(r),
            _ => None,
        }
    }

    fn allowed(d: &Decision) -> bool {
        matches!(d, Decision::Allow)
    }

    #[test]
    fn a_matching_deny_rule_cites_its_id_reason_and_pattern() {
        let r = rules(vec![
            json!({"id": 3, "action": "complete", "target_glob": null,
            "condition": "no_files_changed", "effect": "deny",
            "reason": "complete without a change was refused before",
            "pattern": "guard-verify-implementation denied `complete` 4 times in 2 tasks"}),
        ]);
        let d = ask(&r, "complete", None, json!({"files_modified": []}));
        assert_eq!(
            denied(&d),
            Some("learned rule #3: complete without a change was refused before (pattern: guard-verify-implementation denied `complete` 4 times in 2 tasks)")
        );
        // The condition does not hold: allowed.
        assert!(allowed(&ask(&r, "complete", None, good_state())));
        // Another action: allowed.
        assert!(allowed(&ask(
            &r,
            "edit_file",
            Some("src/lib.rs"),
            json!({})
        )));
    }

    #[test]
    fn every_condition_is_judged_on_the_state() {
        let cases = [
            ("always", json!({}), true),
            ("always", good_state(), true),
            ("no_files_changed", json!({"files_modified": []}), true),
            ("no_files_changed", json!({}), true),
            ("no_files_changed", good_state(), false),
            ("no_passing_test_since_last_change", json!({}), true),
            (
                "no_passing_test_since_last_change",
                json!({"last_change_step": 6, "verification": {"checks": {
                    "tests": {"passing": true, "summary": "ok", "is_test": true, "step": 5}}}}),
                true,
            ),
            (
                "no_passing_test_since_last_change",
                json!({"last_change_step": 4, "verification": {"checks": {
                    "tests": {"passing": false, "summary": "1 failed", "is_test": true, "step": 5}}}}),
                true,
            ),
            ("no_passing_test_since_last_change", good_state(), false),
            (
                "checks_not_ready",
                json!({"verification": {"ready_for_completion": false}}),
                true,
            ),
            ("checks_not_ready", json!({}), true),
            ("checks_not_ready", good_state(), false),
            (
                "loop_warning_active",
                json!({"loop_warning": {"kind": "identical", "message": "same edit 3 times"}}),
                true,
            ),
            ("loop_warning_active", good_state(), false),
        ];
        for (condition, state, applies) in cases {
            let r = rules(vec![rule(1, "*", None, condition, "deny")]);
            let d = ask(&r, "complete", None, state.clone());
            assert_eq!(
                denied(&d).is_some(),
                applies,
                "{condition} on {state}: {d:?}"
            );
        }
    }

    #[test]
    fn warn_rules_warn_and_a_deny_rule_wins_over_them() {
        let r = rules(vec![
            rule(1, "complete", None, "always", "warn"),
            rule(2, "*", None, "checks_not_ready", "warn"),
        ]);
        let d = ask(&r, "complete", None, json!({}));
        let Decision::Warn(w) = &d else {
            panic!("expected a warning, got {d:?}")
        };
        assert_eq!(
            w,
            "learned rule #1: reason 1 (pattern: pattern 1); learned rule #2: reason 2 (pattern: pattern 2)"
        );
        let r = rules(vec![
            rule(1, "complete", None, "always", "warn"),
            rule(5, "complete", None, "always", "deny"),
            rule(6, "complete", None, "always", "deny"),
        ]);
        // The first matching deny rule, in the order given.
        assert_eq!(
            denied(&ask(&r, "complete", None, json!({}))),
            Some("learned rule #5: reason 5 (pattern: pattern 5)")
        );
    }

    #[test]
    fn target_globs_match_the_target_and_null_matches_any() {
        let r = rules(vec![rule(
            7,
            "edit_file",
            Some("src/*.rs"),
            "always",
            "deny",
        )]);
        assert!(denied(&ask(&r, "edit_file", Some("src/lib.rs"), json!({}))).is_some());
        // `*` does not cross `/`.
        assert!(allowed(&ask(
            &r,
            "edit_file",
            Some("src/a/lib.rs"),
            json!({})
        )));
        assert!(allowed(&ask(
            &r,
            "edit_file",
            Some("tests/x.rs"),
            json!({})
        )));
        // A rule about some targets does not apply to an action without a target.
        assert!(allowed(&ask(&r, "edit_file", None, json!({}))));
        let deep = rules(vec![rule(8, "*", Some("src/**"), "always", "deny")]);
        assert!(denied(&ask(&deep, "write_file", Some("src/a/b.rs"), json!({}))).is_some());
        // A state write: the action `set_field`, the target the field.
        let tested = rules(vec![rule(
            9,
            "set_field",
            Some("*.tested"),
            "no_passing_test_since_last_change",
            "deny",
        )]);
        assert!(denied(&ask(
            &tested,
            "set_field",
            Some("subtask.tested"),
            json!({})
        ))
        .is_some());
        assert!(allowed(&ask(
            &tested,
            "set_field",
            Some("subtask.tested"),
            good_state()
        )));
        assert!(allowed(&ask(
            &tested,
            "set_field",
            Some("notes"),
            json!({})
        )));
        let any = rules(vec![rule(10, "run_check", None, "always", "deny")]);
        assert!(denied(&ask(&any, "run_check", Some("tests"), json!({}))).is_some());
        assert!(denied(&ask(&any, "run_check", None, json!({}))).is_some());
    }

    #[test]
    fn a_bad_rule_is_skipped_and_logged_and_the_others_still_apply() {
        let mut config = Map::new();
        config.insert(
            "rules".into(),
            json!([
                {"id": 1, "action": "complete", "target_glob": null, "condition": "sometimes",
                 "effect": "deny", "reason": "r", "pattern": "p"},
                {"id": 2, "action": "complete", "target_glob": null, "condition": "always",
                 "effect": "block", "reason": "r", "pattern": "p"},
                {"id": 3, "action": "complete", "target_glob": "src/[", "condition": "always",
                 "effect": "deny", "reason": "r", "pattern": "p"},
                {"id": 4, "action": "complete", "target_glob": null, "condition": "always",
                 "effect": "deny", "reason": "r", "pattern": "p", "extra": true},
                {"id": 5, "action": "", "target_glob": null, "condition": "always",
                 "effect": "deny", "reason": "r", "pattern": "p"},
                {"id": 6, "action": "complete", "target_glob": null, "condition": "always",
                 "effect": "deny", "reason": " ", "pattern": "p"},
                {"id": "seven", "action": "complete", "condition": "always"},
                "not an object",
                rule(8, "edit_file", None, "always", "deny"),
            ]),
        );
        let (rules, problems) = parse_rules(&config);
        assert_eq!(rules.len(), 1, "{problems:?}");
        assert_eq!(problems.len(), 8, "{problems:?}");
        assert!(problems[0].starts_with("learned rule #1 skipped: unknown variant `sometimes`"));
        assert!(problems[1].contains("unknown variant `block`"));
        assert!(problems[2].contains("`target_glob` \"src/[\" is not a glob"));
        assert!(problems[3].contains("unknown field `extra`"));
        assert!(problems[4].contains("`action` is empty"));
        assert!(problems[5].contains("`reason` is empty"));
        assert!(problems[6].starts_with("learned rule at position 7 skipped"));
        assert!(problems[7].starts_with("learned rule at position 8 skipped"));
        assert!(problems
            .iter()
            .all(|p| p.contains("the other rules still apply")));
        // The bad rules deny nothing; the good one still applies.
        assert!(allowed(&ask(&rules, "complete", None, json!({}))));
        assert!(denied(&ask(&rules, "edit_file", Some("a"), json!({}))).is_some());
    }

    #[test]
    fn rules_that_are_not_a_list_are_none_and_logged() {
        let mut config = Map::new();
        config.insert("rules".into(), json!({"id": 1}));
        let (rules, problems) = parse_rules(&config);
        assert!(rules.is_empty());
        assert_eq!(
            problems,
            ["config `rules` must be a list of rule objects, not an object; no learned rule applies"]
        );
    }

    #[test]
    fn no_rules_allow_everything() {
        let (none, problems) = parse_rules(&Map::new());
        assert!(none.is_empty() && problems.is_empty());
        assert!(allowed(&ask(&none, "complete", None, json!({}))));
        assert!(allowed(&ask(&rules(vec![]), "complete", None, json!({}))));
    }

    #[test]
    fn an_unreadable_state_is_judged_as_an_empty_one() {
        let r = rules(vec![
            rule(1, "complete", None, "no_files_changed", "deny"),
            rule(2, "edit_file", None, "loop_warning_active", "deny"),
        ]);
        let unreadable = |action: &str| {
            decide(
                &r,
                &ActionCheck {
                    action: action.into(),
                    target: None,
                    arguments_json: "{}".into(),
                    task_json: "{}".into(),
                    state_json: "not json".into(),
                },
            )
        };
        assert!(denied(&unreadable("complete")).is_some_and(
            |d| d.starts_with("learned rule #1") && d.ends_with("[task state unreadable]")
        ));
        // A missing loop warning on a null state: the rule does not apply.
        assert!(allowed(&unreadable("edit_file")));
        assert!(allowed(&unreadable("read_file")));
    }
}
