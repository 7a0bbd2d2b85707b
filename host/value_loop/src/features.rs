//! The feature-list policy (seed 003, layer 1; issue 14, item 6): a second decision
//! function on the value loop's state and bounds, not a second engine. A sprint records
//! which policy it runs ([`SprintState::policy`]); this one works through a feature list
//! the way seed 003's session state machine does:
//!
//! | # | state | condition | action |
//! |---|-------|-----------|--------|
//! | - | any | escalated, iterations or tokens spent (shared with the value policy) | stop |
//! | 1 | session start | no feature list | `Initialize` (the planner writes it; stop when its attempts are spent) |
//! | 2 | coding complete | a feature is `completed` | `Test` (the host runs its `verify` commands) |
//! | 3 | test failed | `tested: false`, `retry < max_feature_retries` (2), dependencies passed | `Code` again, the failure shown |
//! | 4 | test failed 2x | `retry >= max_feature_retries` | `Block` it; the next feature follows |
//! | 5 | test passed / session start | a `pending` feature whose dependencies passed | `Code` (the first in list order) |
//! | 6 | - | a pending (or failed) feature with a blocked dependency | `Block` it (it can never run) |
//! | 7 | all complete | no pending feature | `Done`: delivered when every feature passed, partial otherwise |
//!
//! Rows 2-4 come before row 5 so the feature in flight is finished before another
//! starts. A test is the host's run of the feature's commands: a feature passes on
//! their real exit codes only, never on what a model reports. The retry bound is a hard
//! ceiling in [`Limits`] (a configuration may lower it, never raise it), and the counting
//! methods of [`FeatureList`] refuse to pass it.
//!
//! `features.json`, the input, is checked at the boundary ([`parse_file`]): every error
//! names the file, the feature and the field. Progress (status, tested, retry) lives in
//! the sprint state; [`progress_view`] renders it back in the file's shape.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::decide::{shared_stop, StopReason};
use crate::limits::Limits;
use crate::state::SprintState;

/// Which decision function a sprint runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// The value loop (seed 002): [`crate::decide::decide`].
    #[default]
    Value,
    /// The feature list (seed 003): [`decide`].
    FeatureList,
}

impl Policy {
    /// Whether this is the value policy (the default, left out of the state file).
    pub fn is_value(&self) -> bool {
        *self == Policy::Value
    }
}

/// Where a feature is (seed 003's `status` with its `tested` flag folded in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureStatus {
    /// Not coded yet.
    #[default]
    Pending,
    /// A coding session ended: the tester is next.
    Completed,
    /// Its last test passed (`tested: true`).
    Passed,
    /// Its last test failed (`tested: false`): coded again or blocked by the retry rule.
    Failed,
    /// Set aside: see its [`FeatureBlock`].
    Blocked,
}

impl FeatureStatus {
    /// Its name in files and views.
    pub fn name(self) -> &'static str {
        match self {
            FeatureStatus::Pending => "pending",
            FeatureStatus::Completed => "completed",
            FeatureStatus::Passed => "passed",
            FeatureStatus::Failed => "failed",
            FeatureStatus::Blocked => "blocked",
        }
    }
}

/// Why a feature is blocked (typed: no decision reads a reason's text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeatureBlock {
    /// Its tests failed as often as the retry bound allows.
    RetriesExhausted {
        /// Failed tests.
        failed_tests: u32,
    },
    /// A feature it depends on is blocked, so it can never run.
    Dependency {
        /// That feature.
        feature: String,
    },
    /// `features.json` gave it as `blocked`: the person set it aside.
    Input,
}

/// The last failed test of a feature: what the next coding session is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestFailure {
    /// The first command that failed.
    pub command: String,
    /// Its exit code (none: killed by the time box).
    pub exit_code: Option<i32>,
    /// The end of its output, capped by the host.
    pub output: String,
}

/// One feature: the input's fields and its progress, kept in the sprint state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feature {
    /// Unique id (`F-1`).
    pub id: String,
    /// What to build.
    pub description: String,
    /// Shell commands run in the workspace; the feature passes when all exit 0.
    pub verify: Vec<String>,
    /// Ids of features that must pass first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Where it is.
    #[serde(default)]
    pub status: FeatureStatus,
    /// The last test's result (none: not tested yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested: Option<bool>,
    /// Failed tests so far (seed 003's `retry`).
    #[serde(default)]
    pub retry: u32,
    /// Coding sessions run.
    #[serde(default)]
    pub coding_sessions: u32,
    /// Tests run.
    #[serde(default)]
    pub tests: u32,
    /// Set while blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<FeatureBlock>,
    /// The last failed test (shown to the next coding session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<TestFailure>,
}

impl Feature {
    /// A pending feature.
    pub fn new(id: impl Into<String>, description: impl Into<String>, verify: Vec<String>) -> Self {
        Feature {
            id: id.into(),
            description: description.into(),
            verify,
            depends_on: Vec::new(),
            status: FeatureStatus::Pending,
            tested: None,
            retry: 0,
            coding_sessions: 0,
            tests: 0,
            block: None,
            last_failure: None,
        }
    }
}

/// The feature list of a sprint and its progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureList {
    /// What the whole list delivers (the initializer's input when there are no features).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub goal: String,
    /// The features, in the order they run (dependencies permitting).
    #[serde(default)]
    pub features: Vec<Feature>,
    /// Initializer sessions run.
    #[serde(default)]
    pub initializer_attempts: u32,
}

/// A change the feature list refused (a caller out of step with [`decide`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// No such feature.
    #[error("no feature `{0}` in the feature list")]
    Unknown(String),
    /// The feature is not where the change needs it.
    #[error("feature `{id}` is {status}, not {wanted}")]
    OutOfStep {
        /// The feature.
        id: String,
        /// Its status.
        status: &'static str,
        /// What the change needs.
        wanted: &'static str,
    },
    /// Coding again would pass the retry bound.
    #[error("feature `{id}` has failed {max} tests: the retry bound is spent")]
    RetriesSpent {
        /// The feature.
        id: String,
        /// The bound.
        max: u32,
    },
}

impl FeatureList {
    /// The feature with this id.
    pub fn feature(&self, id: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.id == id)
    }

    fn feature_mut(&mut self, id: &str) -> Result<&mut Feature, FeatureError> {
        self.features
            .iter_mut()
            .find(|f| f.id == id)
            .ok_or_else(|| FeatureError::Unknown(id.to_string()))
    }

    /// Features with `status`.
    pub fn count(&self, status: FeatureStatus) -> u32 {
        self.features.iter().filter(|f| f.status == status).count() as u32
    }

    /// A coding session for `id` ended (however it ended: the tester judges the code,
    /// not the session's report): the feature is `completed`. Refused unless the feature
    /// is pending, or failed with retries left.
    pub fn coding_done(&mut self, id: &str, limits: &Limits) -> Result<(), FeatureError> {
        let max = limits.max_feature_retries();
        let f = self.feature_mut(id)?;
        match f.status {
            FeatureStatus::Pending => {}
            FeatureStatus::Failed if f.retry < max => {}
            FeatureStatus::Failed => {
                return Err(FeatureError::RetriesSpent {
                    id: id.to_string(),
                    max,
                })
            }
            other => {
                return Err(FeatureError::OutOfStep {
                    id: id.to_string(),
                    status: other.name(),
                    wanted: "pending or failed",
                })
            }
        }
        f.coding_sessions += 1;
        f.status = FeatureStatus::Completed;
        Ok(())
    }

    /// Records a test as the host measured it: `failure` is `None` when every command
    /// exited 0. A failure counts one retry (never past the bound). Refused unless the
    /// feature is `completed`.
    pub fn record_test(
        &mut self,
        id: &str,
        failure: Option<TestFailure>,
        limits: &Limits,
    ) -> Result<FeatureStatus, FeatureError> {
        let max = limits.max_feature_retries();
        let f = self.feature_mut(id)?;
        if f.status != FeatureStatus::Completed {
            return Err(FeatureError::OutOfStep {
                id: id.to_string(),
                status: f.status.name(),
                wanted: "completed",
            });
        }
        f.tests += 1;
        match failure {
            None => {
                f.status = FeatureStatus::Passed;
                f.tested = Some(true);
            }
            Some(failure) => {
                f.status = FeatureStatus::Failed;
                f.tested = Some(false);
                f.retry = (f.retry + 1).min(max);
                f.last_failure = Some(failure);
            }
        }
        Ok(f.status)
    }

    /// Blocks a feature (a decision's `Block`).
    pub fn block(&mut self, id: &str, why: FeatureBlock) -> Result<(), FeatureError> {
        let f = self.feature_mut(id)?;
        if matches!(f.status, FeatureStatus::Passed | FeatureStatus::Blocked) {
            return Err(FeatureError::OutOfStep {
                id: id.to_string(),
                status: f.status.name(),
                wanted: "pending or failed",
            });
        }
        f.status = FeatureStatus::Blocked;
        f.block = Some(why);
        Ok(())
    }
}

// ------------------------------------------------------------------------ decisions

/// What the feature-list policy does in an iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeatureAction {
    /// The initializer (planner role) writes the feature list from the goal.
    Initialize,
    /// A coding session (builder role) for one feature; after a failed test it is shown
    /// the failure.
    Code {
        /// The feature.
        feature: String,
    },
    /// The tester: the host runs the feature's `verify` commands.
    Test {
        /// The feature.
        feature: String,
    },
    /// Mark the feature blocked (no session); the next feature follows.
    Block {
        /// The feature.
        feature: String,
        /// Why.
        why: FeatureBlock,
    },
}

/// The feature-list policy's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum FeatureDecision {
    /// Run this action next.
    Act {
        /// The action.
        action: FeatureAction,
    },
    /// No pending feature is left: delivered when none is blocked, partial otherwise.
    Done {
        /// Features that passed.
        passed: u32,
        /// Features blocked.
        blocked: u32,
    },
    /// A bound stopped the sprint first.
    Stop(StopReason),
}

fn act(action: FeatureAction) -> FeatureDecision {
    FeatureDecision::Act { action }
}

/// The next action of a feature-list sprint: a pure function of its state and bounds
/// (the table in the module docs), so a resumed sprint decides as the interrupted one.
pub fn decide(limits: &Limits, s: &SprintState) -> FeatureDecision {
    if let Some(stop) = shared_stop(limits, s) {
        return FeatureDecision::Stop(stop);
    }
    let list = s.feature_list.as_ref();
    let features = list.map_or(&[][..], |l| l.features.as_slice());
    // 1. No feature list: the initializer, within its attempts.
    if features.is_empty() {
        let attempts = list.map_or(0, |l| l.initializer_attempts);
        if attempts < limits.max_initializer_attempts() {
            return act(FeatureAction::Initialize);
        }
        return FeatureDecision::Stop(StopReason::InitializerSpent {
            max: limits.max_initializer_attempts(),
        });
    }
    let max = limits.max_feature_retries();
    let status_of = |id: &str| features.iter().find(|f| f.id == id).map(|f| f.status);
    let deps_passed = |f: &Feature| {
        f.depends_on
            .iter()
            .all(|d| status_of(d) == Some(FeatureStatus::Passed))
    };
    // 2-4. The feature in flight first. A test is a measurement, so a feature the list
    // gave as completed is tested whatever its dependencies; coding waits for them.
    for f in features {
        let feature = f.id.clone();
        match f.status {
            FeatureStatus::Completed => return act(FeatureAction::Test { feature }),
            FeatureStatus::Failed if f.retry >= max => {
                return act(FeatureAction::Block {
                    feature,
                    why: FeatureBlock::RetriesExhausted {
                        failed_tests: f.retry,
                    },
                });
            }
            FeatureStatus::Failed if deps_passed(f) => {
                return act(FeatureAction::Code { feature });
            }
            _ => {}
        }
    }
    // Features still to code: pending, or failed with retries left.
    let open = || {
        features
            .iter()
            .filter(|f| matches!(f.status, FeatureStatus::Pending | FeatureStatus::Failed))
    };
    // 5. The next pending feature whose dependencies passed.
    if let Some(f) = open().find(|f| f.status == FeatureStatus::Pending && deps_passed(f)) {
        return act(FeatureAction::Code {
            feature: f.id.clone(),
        });
    }
    // 6. An open feature that can never run: a dependency is blocked (or, were the
    // list's dependencies to form a cycle the boundary let through, not passed): it is
    // blocked rather than waited for, so every list ends.
    let blocked_dep = |f: &Feature| {
        f.depends_on
            .iter()
            .find(|d| status_of(d) == Some(FeatureStatus::Blocked))
            .cloned()
    };
    let stuck = open()
        .find_map(|f| blocked_dep(f).map(|d| (f, d)))
        .or_else(|| {
            open().next().map(|f| {
                let d = f
                    .depends_on
                    .iter()
                    .find(|d| status_of(d) != Some(FeatureStatus::Passed))
                    .cloned()
                    .unwrap_or_default();
                (f, d)
            })
        });
    if let Some((f, dep)) = stuck {
        return act(FeatureAction::Block {
            feature: f.id.clone(),
            why: FeatureBlock::Dependency { feature: dep },
        });
    }
    // 7. Nothing pending.
    let count = |st| features.iter().filter(|f| f.status == st).count() as u32;
    FeatureDecision::Done {
        passed: count(FeatureStatus::Passed),
        blocked: count(FeatureStatus::Blocked),
    }
}

// ------------------------------------------------------------------ the input file

/// Most features a list may hold.
pub const MAX_FEATURES: usize = 100;
/// Most `verify` commands per feature.
pub const MAX_VERIFY: usize = 20;
/// Longest description or command, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;

/// A `features.json` that cannot run: names the file, the feature and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureFileError {
    /// The file (or the report tool) the list came from.
    pub origin: String,
    /// The feature: `` `F-2` (features[1]) ``, or `features[1]` before its id is known.
    pub feature: Option<String>,
    /// The field (none: the whole file).
    pub field: Option<String>,
    /// What is wrong and what is expected.
    pub problem: String,
}

impl std::fmt::Display for FeatureFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match (&self.feature, &self.field) {
            (Some(feature), Some(field)) => format!("feature {feature}, field `{field}`"),
            (Some(feature), None) => format!("feature {feature}"),
            (None, Some(field)) => format!("field `{field}`"),
            (None, None) => "the file".to_string(),
        };
        write!(f, "{}: {place}: {}", self.origin, self.problem)
    }
}

impl std::error::Error for FeatureFileError {}

/// A checked `features.json`: the goal and the features with their input status
/// (`completed` and `passed` become `completed`: the host tests them first and trusts no
/// claim; `failed` becomes `pending`; `blocked` stays set aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureFile {
    /// The goal.
    pub goal: String,
    /// The features, in order.
    pub features: Vec<Feature>,
}

impl FeatureFile {
    /// The sprint state's list.
    pub fn into_list(self) -> FeatureList {
        FeatureList {
            goal: self.goal,
            features: self.features,
            initializer_attempts: 0,
        }
    }
}

/// Whether `text` looks like a feature list (a JSON object with `features` or `goal`):
/// how the command line tells it from a task file, whatever the file's name.
pub fn looks_like_feature_list(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.contains_key("features") || o.contains_key("goal"))
        })
        .unwrap_or(false)
}

const FILE_KEYS: [&str; 3] = ["goal", "features", "$schema"];
const FEATURE_KEYS: [&str; 5] = ["id", "description", "verify", "depends_on", "status"];
/// Fields of a progress view ([`progress_view`]) accepted and ignored, so a progress
/// view can be run again as input (progress itself lives in the sprint state).
const PROGRESS_KEYS: [&str; 4] = ["tested", "retry", "block", "last_failure"];
const STATUSES: [&str; 5] = ["pending", "completed", "passed", "failed", "blocked"];

/// Checks a `features.json` (`origin` names it in errors).
pub fn parse_file(text: &str, origin: &str) -> Result<FeatureFile, FeatureFileError> {
    let err = |field: Option<&str>, problem: String| FeatureFileError {
        origin: origin.to_string(),
        feature: None,
        field: field.map(str::to_string),
        problem,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| err(None, format!("not JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(err(
            None,
            "must be a JSON object with `goal` and/or `features`".into(),
        ));
    };
    for k in obj.keys() {
        if !FILE_KEYS.contains(&k.as_str()) {
            return Err(err(
                Some(k),
                format!("unknown field; expected one of {}", FILE_KEYS.join(", ")),
            ));
        }
    }
    let goal = match obj.get("goal") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(g)) => g.trim().to_string(),
        Some(other) => {
            return Err(err(
                Some("goal"),
                format!("must be a string, not {}", kind(other)),
            ))
        }
    };
    let features = match obj.get("features") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => parse_features(v, origin, "features", true)?,
    };
    if features.is_empty() && goal.is_empty() {
        return Err(err(
            Some("features"),
            "give at least one feature, or a `goal` for the initializer to break into features"
                .into(),
        ));
    }
    Ok(FeatureFile { goal, features })
}

/// Checks a list of features: `field` is where it sits (`features`); `statuses` allows
/// the `status` field (a file may give one, the initializer may not).
fn parse_features(
    v: &Value,
    origin: &str,
    field: &str,
    statuses: bool,
) -> Result<Vec<Feature>, FeatureFileError> {
    let top = |problem: String| FeatureFileError {
        origin: origin.to_string(),
        feature: None,
        field: Some(field.to_string()),
        problem,
    };
    let Some(items) = v.as_array() else {
        return Err(top(format!("must be a list of features, not {}", kind(v))));
    };
    if items.len() > MAX_FEATURES {
        return Err(top(format!(
            "{} features; at most {MAX_FEATURES} (split the goal into several lists)",
            items.len()
        )));
    }
    let mut out: Vec<Feature> = Vec::new();
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let mut label = format!("{field}[{i}]");
        let ferr = |label: &str, f: &str, problem: String| FeatureFileError {
            origin: origin.to_string(),
            feature: Some(label.to_string()),
            field: Some(f.to_string()),
            problem,
        };
        let Some(o) = item.as_object() else {
            return Err(FeatureFileError {
                origin: origin.to_string(),
                feature: Some(label),
                field: None,
                problem: format!("must be an object, not {}", kind(item)),
            });
        };
        let id = match o.get("id") {
            Some(Value::String(id)) if valid_id(id) => id.clone(),
            Some(Value::String(id)) => {
                return Err(ferr(
                    &label,
                    "id",
                    format!("`{id}` is not an id: use 1 to 64 letters, digits, `-`, `_` or `.`"),
                ))
            }
            None => {
                return Err(ferr(
                    &label,
                    "id",
                    "missing; every feature needs an id (`F-1`)".into(),
                ))
            }
            Some(other) => {
                return Err(ferr(
                    &label,
                    "id",
                    format!("must be a string, not {}", kind(other)),
                ))
            }
        };
        label = format!("`{id}` ({field}[{i}])");
        if let Some(first) = ids.insert(id.clone(), i) {
            return Err(ferr(
                &label,
                "id",
                format!("`{id}` is already the id of {field}[{first}]"),
            ));
        }
        for k in o.keys() {
            let known = FEATURE_KEYS.contains(&k.as_str())
                || (statuses && PROGRESS_KEYS.contains(&k.as_str()));
            if !known || (!statuses && k == "status") {
                let allowed: Vec<&str> = FEATURE_KEYS
                    .iter()
                    .copied()
                    .filter(|f| statuses || *f != "status")
                    .collect();
                return Err(ferr(
                    &label,
                    k,
                    format!("unknown field; expected one of {}", allowed.join(", ")),
                ));
            }
        }
        let description = match o.get("description") {
            Some(Value::String(d)) if !d.trim().is_empty() => {
                if d.chars().count() > MAX_TEXT_CHARS {
                    return Err(ferr(
                        &label,
                        "description",
                        format!("longer than {MAX_TEXT_CHARS} characters"),
                    ));
                }
                d.trim().to_string()
            }
            Some(Value::String(_)) | None => {
                return Err(ferr(
                    &label,
                    "description",
                    "missing or empty; say what the feature does for its user".into(),
                ))
            }
            Some(other) => {
                return Err(ferr(
                    &label,
                    "description",
                    format!("must be a string, not {}", kind(other)),
                ))
            }
        };
        let verify = match o.get("verify") {
            Some(Value::Array(cmds)) if !cmds.is_empty() => {
                if cmds.len() > MAX_VERIFY {
                    return Err(ferr(
                        &label,
                        "verify",
                        format!("{} commands; at most {MAX_VERIFY}", cmds.len()),
                    ));
                }
                let mut out = Vec::new();
                for (j, c) in cmds.iter().enumerate() {
                    let at = format!("verify[{j}]");
                    match c {
                        Value::String(c) if c.trim().is_empty() => {
                            return Err(ferr(&label, &at, "an empty command".into()))
                        }
                        Value::String(c) if c.contains('\n') || c.contains('\r') => {
                            return Err(ferr(
                                &label,
                                &at,
                                "one command line each (join steps with &&)".into(),
                            ))
                        }
                        Value::String(c) if c.chars().count() > MAX_TEXT_CHARS => {
                            return Err(ferr(
                                &label,
                                &at,
                                format!("longer than {MAX_TEXT_CHARS} characters"),
                            ))
                        }
                        Value::String(c) => out.push(c.trim().to_string()),
                        other => {
                            return Err(ferr(
                                &label,
                                &at,
                                format!("must be a command string, not {}", kind(other)),
                            ))
                        }
                    }
                }
                out
            }
            Some(Value::Array(_)) | None => {
                return Err(ferr(
                    &label,
                    "verify",
                    "needs at least one command whose exit code 0 proves the feature (`pytest -q tests/test_x.py`)".into(),
                ))
            }
            Some(other) => {
                return Err(ferr(
                    &label,
                    "verify",
                    format!("must be a list of command strings, not {}", kind(other)),
                ))
            }
        };
        let depends_on = match o.get("depends_on") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ds)) => {
                let mut out = Vec::new();
                for d in ds {
                    match d {
                        Value::String(d) => out.push(d.clone()),
                        other => {
                            return Err(ferr(
                                &label,
                                "depends_on",
                                format!("must list feature ids, found {}", kind(other)),
                            ))
                        }
                    }
                }
                out
            }
            Some(other) => {
                return Err(ferr(
                    &label,
                    "depends_on",
                    format!("must be a list of feature ids, not {}", kind(other)),
                ))
            }
        };
        let (status, block) = match o.get("status") {
            None | Some(Value::Null) => (FeatureStatus::Pending, None),
            Some(Value::String(st)) => match st.as_str() {
                "pending" | "failed" => (FeatureStatus::Pending, None),
                // A claim the host checks before it counts: tested first, never trusted.
                "completed" | "passed" => (FeatureStatus::Completed, None),
                "blocked" => (FeatureStatus::Blocked, Some(FeatureBlock::Input)),
                other => {
                    return Err(ferr(
                        &label,
                        "status",
                        format!(
                            "`{other}` is not a status; use one of {}",
                            STATUSES.join(", ")
                        ),
                    ))
                }
            },
            Some(other) => {
                return Err(ferr(
                    &label,
                    "status",
                    format!("must be a string, not {}", kind(other)),
                ))
            }
        };
        let mut f = Feature::new(id, description, verify);
        f.depends_on = depends_on;
        f.status = status;
        f.block = block;
        out.push(f);
    }
    // Dependencies: existing, not itself, no cycle (a cycle could never run).
    for (i, f) in out.iter().enumerate() {
        let label = format!("`{}` ({field}[{i}])", f.id);
        for d in &f.depends_on {
            let problem = if d == &f.id {
                Some("a feature cannot depend on itself".to_string())
            } else if !ids.contains_key(d) {
                Some(format!("`{d}` is not a feature of this list"))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(FeatureFileError {
                    origin: origin.to_string(),
                    feature: Some(label),
                    field: Some("depends_on".into()),
                    problem,
                });
            }
        }
    }
    if let Some(cycle) = find_cycle(&out) {
        let i = ids[&cycle[0]];
        return Err(FeatureFileError {
            origin: origin.to_string(),
            feature: Some(format!("`{}` ({field}[{i}])", cycle[0])),
            field: Some("depends_on".into()),
            problem: format!(
                "the dependencies form a cycle ({}); none of them could ever run",
                cycle.join(" -> ")
            ),
        });
    }
    Ok(out)
}

/// A dependency cycle, as the ids along it (the first repeated at the end).
fn find_cycle(features: &[Feature]) -> Option<Vec<String>> {
    let deps: BTreeMap<&str, &[String]> = features
        .iter()
        .map(|f| (f.id.as_str(), f.depends_on.as_slice()))
        .collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for start in deps.keys() {
        let mut path: Vec<&str> = Vec::new();
        if visit(start, &deps, &mut path, &mut done) {
            return Some(path.iter().map(|s| s.to_string()).collect());
        }
    }
    None
}

fn visit<'a>(
    id: &'a str,
    deps: &BTreeMap<&'a str, &'a [String]>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> bool {
    if let Some(at) = path.iter().position(|p| *p == id) {
        path.drain(..at);
        path.push(id);
        return true;
    }
    if done.contains(id) {
        return false;
    }
    path.push(id);
    for d in deps.get(id).copied().unwrap_or(&[]) {
        if visit(d.as_str(), deps, path, done) {
            return true;
        }
    }
    path.pop();
    done.insert(id);
    false
}

fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

// ---------------------------------------------------------- the initializer's report

/// The report tool the initializer writes the feature list with.
pub const REPORT_FEATURE_LIST: &str = "report_feature_list";

/// `report_feature_list`'s JSON Schema (the shape of `features.json`'s `features`,
/// without status: every feature the initializer writes is pending).
pub fn tool_spec() -> crate::tool_specs::ToolSpecJson {
    let strings = |d: &str| json!({"type": "array", "items": {"type": "string"}, "description": d});
    crate::tool_specs::ToolSpecJson {
        name: REPORT_FEATURE_LIST,
        description: "Write the feature list: small features in the order to build them, each with shell commands whose exit code 0 proves it. One call; it ends your task.",
        parameters: json!({
            "type": "object",
            "properties": {
                "features": {
                    "type": "array",
                    "description": "The features, in build order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Unique id: F-1, F-2, ..."},
                            "description": {"type": "string", "description": "What the feature does for its user."},
                            "verify": strings("Shell commands run in the workspace; the feature passes when every one exits 0 (e.g. `python3 -m pytest -q tests/test_x.py`)."),
                            "depends_on": strings("Ids of features that must pass first.")
                        },
                        "required": ["id", "description", "verify"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["features"],
            "additionalProperties": false
        }),
    }
}

/// Applies a `report_feature_list` call to the sprint state: checked as a
/// `features.json` is, refused (`VALIDATION_ERROR: ...`, the state unchanged) when it
/// does not pass or a list is already set.
pub fn apply_report(args: &Value, s: &mut SprintState) -> Result<String, String> {
    let list = s.feature_list.get_or_insert_with(FeatureList::default);
    if !list.features.is_empty() {
        return Err(format!(
            "VALIDATION_ERROR: {REPORT_FEATURE_LIST}: the feature list is already set ({} features)",
            list.features.len()
        ));
    }
    let Some(obj) = args.as_object() else {
        return Err(format!(
            "VALIDATION_ERROR: {REPORT_FEATURE_LIST}: the arguments must be an object"
        ));
    };
    if let Some(k) = obj.keys().find(|k| *k != "features") {
        return Err(format!(
            "VALIDATION_ERROR: {REPORT_FEATURE_LIST}: unknown field `{k}`; expected features"
        ));
    }
    let features = parse_features(
        obj.get("features").unwrap_or(&Value::Null),
        REPORT_FEATURE_LIST,
        "features",
        false,
    )
    .map_err(|e| format!("VALIDATION_ERROR: {e}"))?;
    if features.is_empty() {
        return Err(format!(
            "VALIDATION_ERROR: {REPORT_FEATURE_LIST}: field `features`: give at least one feature"
        ));
    }
    let ids: Vec<String> = features.iter().map(|f| f.id.clone()).collect();
    list.features = features;
    Ok(format!(
        "feature list recorded: {} feature(s): {}",
        ids.len(),
        ids.join(", ")
    ))
}

// ----------------------------------------------------------------------- views

/// The progress in `features.json`'s shape (status, tested, retry per feature), valid
/// as input again: what the host writes beside the sprint's log.
pub fn progress_view(s: &SprintState) -> Value {
    let Some(list) = &s.feature_list else {
        return json!({"features": []});
    };
    let features: Vec<Value> = list
        .features
        .iter()
        .map(|f| {
            let mut v = json!({
                "id": f.id,
                "description": f.description,
                "verify": f.verify,
                "depends_on": f.depends_on,
                "status": f.status.name(),
                "tested": f.tested,
                "retry": f.retry,
            });
            if let Some(b) = &f.block {
                v["block"] = serde_json::to_value(b).unwrap_or(Value::Null);
            }
            v
        })
        .collect();
    let mut v = json!({"features": features});
    if !list.goal.is_empty() {
        v["goal"] = Value::String(list.goal.clone());
    }
    v
}

/// FEATURE_REPORT.md: each feature's result as the host measured it. `outcome` is how
/// the sprint ended (none: still running); `cost` the host's cost line, if known.
pub fn report(
    s: &SprintState,
    outcome: Option<&crate::render::Outcome>,
    cost: Option<&str>,
) -> String {
    use crate::render::{stop_text, Outcome};
    let mut out = format!("# Feature report: {}\n\n", s.sprint);
    let empty = FeatureList::default();
    let list = s.feature_list.as_ref().unwrap_or(&empty);
    let verdict = match outcome {
        None => "running".to_string(),
        Some(Outcome::Delivered) => "delivered: every feature's verification passes".to_string(),
        Some(Outcome::Stopped(r)) => format!("stopped: {}", stop_text(r)),
    };
    let _ = writeln!(out, "- Outcome: {verdict}");
    if !list.goal.is_empty() {
        let _ = writeln!(out, "- Goal: {}", list.goal);
    }
    let n = |st| list.count(st);
    let _ = writeln!(
        out,
        "- Features: {} passed, {} blocked, {} open, of {}",
        n(FeatureStatus::Passed),
        n(FeatureStatus::Blocked),
        n(FeatureStatus::Pending) + n(FeatureStatus::Completed) + n(FeatureStatus::Failed),
        list.features.len()
    );
    let coding: u32 = list.features.iter().map(|f| f.coding_sessions).sum();
    let tests: u32 = list.features.iter().map(|f| f.tests).sum();
    let _ = writeln!(
        out,
        "- Sessions: {} initializer, {coding} coding, {tests} tests; iterations: {}; tokens: {}",
        list.initializer_attempts, s.iteration, s.tokens_used
    );
    if let Some(c) = cost {
        let _ = writeln!(out, "- Cost: {c}");
    }
    let _ = writeln!(out, "\n## Features\n");
    for f in &list.features {
        let label = match f.status {
            FeatureStatus::Passed => "PASSED",
            FeatureStatus::Blocked => "BLOCKED",
            FeatureStatus::Pending => "PENDING",
            FeatureStatus::Completed => "CODED, NOT TESTED",
            FeatureStatus::Failed => "FAILED",
        };
        let _ = writeln!(
            out,
            "- [{label}] {}: {} ({} coding session(s), {} test(s), {} failed)",
            f.id, f.description, f.coding_sessions, f.tests, f.retry
        );
        match &f.block {
            Some(FeatureBlock::RetriesExhausted { failed_tests }) => {
                let _ = writeln!(
                    out,
                    "  - blocked: {failed_tests} failed tests (the retry bound)"
                );
            }
            Some(FeatureBlock::Dependency { feature }) => {
                let _ = writeln!(
                    out,
                    "  - blocked: it depends on {feature}, which cannot pass"
                );
            }
            Some(FeatureBlock::Input) => {
                let _ = writeln!(out, "  - blocked: set aside in the feature list");
            }
            None => {}
        }
        if f.status != FeatureStatus::Passed {
            if let Some(fail) = &f.last_failure {
                let first = fail
                    .output
                    .lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty())
                    .unwrap_or("(no output)");
                let code = fail
                    .exit_code
                    .map_or("timed out".to_string(), |c| format!("exit {c}"));
                let _ = writeln!(out, "  - last failure: `{}` {code}: {first}", fail.command);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::LimitsConfig;

    fn state(features: &[(&str, FeatureStatus, u32, &[&str])]) -> SprintState {
        let mut s = SprintState::new("s");
        s.policy = Policy::FeatureList;
        s.feature_list = Some(FeatureList {
            goal: "g".into(),
            features: features
                .iter()
                .map(|(id, st, retry, deps)| {
                    let mut f = Feature::new(*id, format!("feature {id}"), vec!["true".into()]);
                    f.status = *st;
                    f.retry = *retry;
                    f.depends_on = deps.iter().map(|d| d.to_string()).collect();
                    if *st == FeatureStatus::Blocked {
                        f.block = Some(FeatureBlock::Input);
                    }
                    f
                })
                .collect(),
            initializer_attempts: 0,
        });
        s
    }

    fn code(f: &str) -> FeatureDecision {
        act(FeatureAction::Code { feature: f.into() })
    }

    /// One row per rule of seed 003's table (and the bounds), in the module docs' order.
    #[test]
    fn each_rule_of_the_table() {
        use FeatureStatus::*;
        let l = Limits::default();
        let mut no_list = SprintState::new("s");
        no_list.policy = Policy::FeatureList;
        let rows: Vec<(&str, SprintState, FeatureDecision)> = vec![
            (
                "session start, no feature list: initializer",
                no_list.clone(),
                act(FeatureAction::Initialize),
            ),
            (
                "a goal but an empty list: initializer",
                state(&[]),
                act(FeatureAction::Initialize),
            ),
            (
                "initializer attempts spent: stop",
                {
                    let mut s = state(&[]);
                    s.feature_list.as_mut().unwrap().initializer_attempts = 2;
                    s
                },
                FeatureDecision::Stop(StopReason::InitializerSpent { max: 2 }),
            ),
            (
                "session start, pending features: coding for the first",
                state(&[("F-1", Pending, 0, &[]), ("F-2", Pending, 0, &[])]),
                code("F-1"),
            ),
            (
                "coding complete: tester",
                state(&[("F-1", Completed, 0, &[]), ("F-2", Pending, 0, &[])]),
                act(FeatureAction::Test {
                    feature: "F-1".into(),
                }),
            ),
            (
                "test passed: the next feature",
                state(&[("F-1", Passed, 0, &[]), ("F-2", Pending, 0, &[])]),
                code("F-2"),
            ),
            (
                "test failed, retry 1 < 2: coding again",
                state(&[("F-1", Failed, 1, &[]), ("F-2", Pending, 0, &[])]),
                code("F-1"),
            ),
            (
                "test failed twice, retry 2 >= 2: blocked, then the next",
                state(&[("F-1", Failed, 2, &[]), ("F-2", Pending, 0, &[])]),
                act(FeatureAction::Block {
                    feature: "F-1".into(),
                    why: FeatureBlock::RetriesExhausted { failed_tests: 2 },
                }),
            ),
            (
                "after a block: the next feature",
                state(&[("F-1", Blocked, 2, &[]), ("F-2", Pending, 0, &[])]),
                code("F-2"),
            ),
            (
                "the feature in flight before a new one",
                state(&[("F-1", Pending, 0, &[]), ("F-2", Failed, 1, &[])]),
                code("F-2"),
            ),
            (
                "a dependency not passed yet: a later ready feature first",
                state(&[("F-1", Pending, 0, &["F-2"]), ("F-2", Pending, 0, &[])]),
                code("F-2"),
            ),
            (
                "a failed feature waits for a dependency not passed yet",
                state(&[("F-1", Failed, 1, &["F-2"]), ("F-2", Pending, 0, &[])]),
                code("F-2"),
            ),
            (
                "a failed feature with a blocked dependency is blocked",
                state(&[("F-1", Blocked, 2, &[]), ("F-2", Failed, 1, &["F-1"])]),
                act(FeatureAction::Block {
                    feature: "F-2".into(),
                    why: FeatureBlock::Dependency {
                        feature: "F-1".into(),
                    },
                }),
            ),
            (
                "a blocked dependency: the dependent is blocked",
                state(&[("F-1", Blocked, 2, &[]), ("F-2", Pending, 0, &["F-1"])]),
                act(FeatureAction::Block {
                    feature: "F-2".into(),
                    why: FeatureBlock::Dependency {
                        feature: "F-1".into(),
                    },
                }),
            ),
            (
                "no pending feature, all passed: delivered",
                state(&[("F-1", Passed, 0, &[]), ("F-2", Passed, 1, &[])]),
                FeatureDecision::Done {
                    passed: 2,
                    blocked: 0,
                },
            ),
            (
                "no pending feature, one blocked: partial",
                state(&[("F-1", Passed, 0, &[]), ("F-2", Blocked, 2, &[])]),
                FeatureDecision::Done {
                    passed: 1,
                    blocked: 1,
                },
            ),
            (
                "iterations spent (shared bound)",
                {
                    let mut s = state(&[("F-1", Pending, 0, &[])]);
                    s.iteration = 200;
                    s
                },
                FeatureDecision::Stop(StopReason::IterationLimit { max: 200 }),
            ),
            (
                "tokens spent (shared bound)",
                {
                    let mut s = state(&[("F-1", Completed, 0, &[])]);
                    s.tokens_used = 5_000_000;
                    s
                },
                FeatureDecision::Stop(StopReason::TokenBudget {
                    used: 5_000_000,
                    budget: 5_000_000,
                }),
            ),
            (
                "escalated (shared)",
                {
                    let mut s = state(&[("F-1", Pending, 0, &[])]);
                    s.escalated = Some("a person must decide".into());
                    s
                },
                FeatureDecision::Stop(StopReason::Escalated {
                    reason: "a person must decide".into(),
                }),
            ),
        ];
        for (name, s, want) in rows {
            assert_eq!(decide(&l, &s), want, "{name}");
        }
    }

    #[test]
    fn a_lowered_retry_bound_blocks_after_one_failed_test_and_cannot_be_raised() {
        let one = Limits::new(&LimitsConfig {
            max_feature_retries: Some(1),
            ..Default::default()
        })
        .unwrap();
        let s = state(&[("F-1", FeatureStatus::Failed, 1, &[])]);
        assert!(matches!(
            decide(&one, &s),
            FeatureDecision::Act {
                action: FeatureAction::Block { .. }
            }
        ));
        assert_eq!(decide(&Limits::default(), &s), code("F-1"));
        assert!(Limits::new(&LimitsConfig {
            max_feature_retries: Some(3),
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn the_counting_methods_refuse_to_pass_the_bound_or_skip_a_step() {
        let l = Limits::default();
        let mut s = state(&[("F-1", FeatureStatus::Pending, 0, &[])]);
        let list = s.feature_list.as_mut().unwrap();
        // A test before coding is out of step.
        assert!(list.record_test("F-1", None, &l).is_err());
        let fail = || TestFailure {
            command: "false".into(),
            exit_code: Some(1),
            output: "boom".into(),
        };
        for _ in 0..2 {
            list.coding_done("F-1", &l).unwrap();
            assert_eq!(
                list.record_test("F-1", Some(fail()), &l).unwrap(),
                FeatureStatus::Failed
            );
        }
        assert_eq!(
            list.coding_done("F-1", &l),
            Err(FeatureError::RetriesSpent {
                id: "F-1".into(),
                max: 2
            })
        );
        let f = list.feature("F-1").unwrap();
        assert_eq!((f.retry, f.coding_sessions, f.tests), (2, 2, 2));
        assert_eq!(f.tested, Some(false));
        list.block("F-1", FeatureBlock::RetriesExhausted { failed_tests: 2 })
            .unwrap();
        assert!(list.block("F-1", FeatureBlock::Input).is_err());
        assert!(list.coding_done("nope", &l).is_err());
    }

    #[test]
    fn the_decision_depends_on_state_only() {
        let s = state(&[
            ("F-1", FeatureStatus::Passed, 0, &[]),
            ("F-2", FeatureStatus::Failed, 1, &["F-1"]),
        ]);
        let back: SprintState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            decide(&Limits::default(), &back),
            decide(&Limits::default(), &s)
        );
    }

    const GOOD: &str = r#"{
        "goal": "a word counter",
        "features": [
            {"id": "F-1", "description": "count words", "verify": ["python3 -m pytest -q tests/test_count.py"], "depends_on": [], "status": "pending"},
            {"id": "F-2", "description": "count lines", "verify": ["true", "test -f x"], "depends_on": ["F-1"]},
            {"id": "F-3", "description": "set aside", "verify": ["true"], "status": "blocked"},
            {"id": "F-4", "description": "already built", "verify": ["true"], "status": "passed"}
        ]
    }"#;

    #[test]
    fn a_good_file_parses_with_its_statuses() {
        let f = parse_file(GOOD, "features.json").unwrap();
        assert_eq!(f.goal, "a word counter");
        let st: Vec<_> = f.features.iter().map(|f| f.status).collect();
        assert_eq!(
            st,
            [
                FeatureStatus::Pending,
                FeatureStatus::Pending,
                FeatureStatus::Blocked,
                // Claimed passed: tested by the host first, never trusted.
                FeatureStatus::Completed
            ]
        );
        assert_eq!(f.features[1].depends_on, ["F-1"]);
        assert!(looks_like_feature_list(GOOD));
        assert!(looks_like_feature_list(r#"{"goal": "x"}"#));
        assert!(!looks_like_feature_list("id: t\ngoal: x\n"));
        assert!(!looks_like_feature_list(r#"{"id": "t"}"#));
        // A goal alone is a list for the initializer to write.
        let g = parse_file(r#"{"goal": "a word counter"}"#, "f.json").unwrap();
        assert!(g.features.is_empty());
    }

    #[test]
    fn a_progress_view_is_valid_input_again() {
        let mut s = state(&[
            ("F-1", FeatureStatus::Passed, 0, &[]),
            ("F-2", FeatureStatus::Blocked, 2, &["F-1"]),
        ]);
        s.feature_list.as_mut().unwrap().features[1].block =
            Some(FeatureBlock::RetriesExhausted { failed_tests: 2 });
        let view = progress_view(&s);
        assert_eq!(view["features"][1]["status"], "blocked");
        assert_eq!(view["features"][1]["retry"], 2);
        let again = parse_file(&view.to_string(), "progress.json").unwrap();
        assert_eq!(again.features.len(), 2);
    }

    /// Each bad input gives an error naming the file, the feature and the field.
    #[test]
    fn bad_files_name_the_file_the_feature_and_the_field() {
        let one = |f: &str| format!(r#"{{"features": [{f}]}}"#);
        let cases: Vec<(String, &str)> = vec![
            ("[1]".into(), "x.json: the file: must be a JSON object"),
            ("not json".into(), "x.json: the file: not JSON"),
            (r#"{"goal": "g", "feature": []}"#.into(), "x.json: field `feature`: unknown field"),
            (r#"{"goal": 3}"#.into(), "field `goal`: must be a string, not a number"),
            (r#"{"features": []}"#.into(), "field `features`: give at least one feature"),
            (r#"{"features": {}}"#.into(), "field `features`: must be a list"),
            (one("3"), "feature features[0]: must be an object"),
            (one(r#"{"description": "d", "verify": ["true"]}"#), "feature features[0], field `id`: missing"),
            (one(r#"{"id": "F 1", "description": "d", "verify": ["true"]}"#), "field `id`: `F 1` is not an id"),
            (one(r#"{"id": "F-1", "verify": ["true"]}"#), "feature `F-1` (features[0]), field `description`: missing"),
            (one(r#"{"id": "F-1", "description": "d", "verify": "pytest"}"#), "feature `F-1` (features[0]), field `verify`: must be a list of command strings, not a string"),
            (one(r#"{"id": "F-1", "description": "d", "verify": []}"#), "field `verify`: needs at least one command"),
            (one(r#"{"id": "F-1", "description": "d", "verify": [""]}"#), "field `verify[0]`: an empty command"),
            (one(r#"{"id": "F-1", "description": "d", "verify": ["a\nb"]}"#), "field `verify[0]`: one command line"),
            (one(r#"{"id": "F-1", "description": "d", "verify": ["true"], "status": "done"}"#), "field `status`: `done` is not a status"),
            (one(r#"{"id": "F-1", "description": "d", "verify": ["true"], "verfy": []}"#), "field `verfy`: unknown field"),
            (one(r#"{"id": "F-1", "description": "d", "verify": ["true"], "depends_on": ["F-9"]}"#), "field `depends_on`: `F-9` is not a feature"),
            (one(r#"{"id": "F-1", "description": "d", "verify": ["true"], "depends_on": ["F-1"]}"#), "field `depends_on`: a feature cannot depend on itself"),
            (
                r#"{"features": [{"id": "F-1", "description": "d", "verify": ["true"]}, {"id": "F-1", "description": "e", "verify": ["true"]}]}"#.into(),
                "feature `F-1` (features[1]), field `id`: `F-1` is already the id of features[0]",
            ),
            (
                r#"{"features": [{"id": "A", "description": "d", "verify": ["true"], "depends_on": ["B"]}, {"id": "B", "description": "e", "verify": ["true"], "depends_on": ["A"]}]}"#.into(),
                "field `depends_on`: the dependencies form a cycle (A -> B -> A)",
            ),
        ];
        for (text, want) in cases {
            let err = parse_file(&text, "x.json").unwrap_err().to_string();
            assert!(err.starts_with("x.json: "), "{err}");
            assert!(err.contains(want), "{text}\n  gave: {err}\n  want: {want}");
        }
    }

    #[test]
    fn the_initializer_report_is_checked_like_the_file() {
        let mut s = SprintState::new("s");
        s.policy = Policy::FeatureList;
        let bad = apply_report(
            &json!({"features": [{"id": "F-1", "description": "d", "verify": "x"}]}),
            &mut s,
        )
        .unwrap_err();
        assert!(
            bad.starts_with("VALIDATION_ERROR: report_feature_list: feature `F-1`"),
            "{bad}"
        );
        let status = apply_report(
            &json!({"features": [{"id": "F-1", "description": "d", "verify": ["true"], "status": "passed"}]}),
            &mut s,
        )
        .unwrap_err();
        assert!(status.contains("field `status`: unknown field"), "{status}");
        let ok = apply_report(
            &json!({"features": [{"id": "F-1", "description": "d", "verify": ["true"]}]}),
            &mut s,
        )
        .unwrap();
        assert!(ok.contains("1 feature(s): F-1"), "{ok}");
        let again = apply_report(
            &json!({"features": [{"id": "F-2", "description": "d", "verify": ["true"]}]}),
            &mut s,
        )
        .unwrap_err();
        assert!(again.contains("already set"), "{again}");
    }

    #[test]
    fn the_report_tool_schema_accepts_what_the_checker_accepts() {
        let spec = tool_spec();
        let item = &spec.parameters["properties"]["features"]["items"];
        let props: BTreeSet<&str> = item["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let allowed: BTreeSet<&str> = FEATURE_KEYS
            .iter()
            .copied()
            .filter(|k| *k != "status")
            .collect();
        assert_eq!(props, allowed);
        assert_eq!(item["additionalProperties"], false);
    }

    #[test]
    fn the_report_view() {
        let mut s = state(&[
            ("F-1", FeatureStatus::Passed, 0, &[]),
            ("F-2", FeatureStatus::Blocked, 2, &[]),
            ("F-3", FeatureStatus::Passed, 1, &[]),
            ("F-4", FeatureStatus::Blocked, 0, &["F-2"]),
        ]);
        s.iteration = 11;
        s.tokens_used = 4321;
        let list = s.feature_list.as_mut().unwrap();
        list.initializer_attempts = 1;
        let fs = &mut list.features;
        fs[0].coding_sessions = 1;
        fs[0].tests = 1;
        fs[1].coding_sessions = 2;
        fs[1].tests = 2;
        fs[1].block = Some(FeatureBlock::RetriesExhausted { failed_tests: 2 });
        fs[1].last_failure = Some(TestFailure {
            command: "python3 -m pytest -q tests/test_b.py".into(),
            exit_code: Some(1),
            output: "F\n1 failed in 0.01s\n".into(),
        });
        fs[2].coding_sessions = 2;
        fs[2].tests = 2;
        fs[3].block = Some(FeatureBlock::Dependency {
            feature: "F-2".into(),
        });
        let outcome = crate::render::Outcome::Stopped(StopReason::FeaturesBlocked {
            passed: 2,
            blocked: 2,
        });
        insta::assert_snapshot!(report(&s, Some(&outcome), Some("$0.01 (builder $0.01)")));
    }
}
