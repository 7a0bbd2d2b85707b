//! Loop detection (seed 000 §4.3 "Enhanced Loop Detector", seed 004 §3).
//!
//! An agent is in a loop when its recent steps repeat without moving the task forward.
//! The detector looks at the recent steps ([`StepView`]s, oldest first) and reports the most
//! specific of seven patterns ([`LoopType`]), with evidence, concrete suggestions and the
//! action to block. What counts as *moving forward* is what keeps legitimate work from
//! tripping it, judged from everything a step shows, since logs from other agents carry
//! no check counts and no file hashes:
//!
//! - outputs: the same call showing a new output is progress (a polled command, a build
//!   getting further, the next page of a file); timings, timestamps and relative times do
//!   not count as new;
//! - check counts when present, else the counts in the runner's output;
//! - edit arguments: an edit that changes only whitespace or comments changes nothing, and
//!   one that removes what an earlier edit added (or adds back what it removed) undoes it,
//!   however it is spaced, commented or quoted;
//! - the failure's meaning: the same failing tests, exception types and error codes mean
//!   the same failure however the text is worded (line numbers, values, phrasing);
//! - reads: lines not read since the file last changed are new, lines already read are not;
//! - messages: restating a plan in other words is not new until something new came in.
//!
//! Notifications the environment posts (file watchers, system messages) are not the
//! agent's moves and are skipped. Warnings can be suggestive; a block names one action on
//! one target and is left out where it could stop real work (a shell command, an edit
//! during a reading streak, a cycle seen only in what the failures mean): a false block
//! costs more than a late warning.
//!
//! The detector is pure: [`LoopDetector::check`] decides from the history alone, so the
//! executor can call it every step and `agentforge inspect loops` can [`LoopDetector::replay`]
//! a recorded log offline with the same results.

mod analysis;
pub use analysis::StepMemo;
mod detectors;
pub mod import;
mod meaning;
mod signature;
mod suggest;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use signature::{
    normalize_error, normalize_params, normalize_path, ActionCategory, ActionSignature,
    ErrorCategory,
};

use agentforge_core::state::{ActionRecord, ActionResult, RecordedVerification};

/// What the detector needs of one step; built from an [`ActionRecord`] or from the slim
/// lines of a labelled dataset.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepView {
    /// Step number.
    pub step: u64,
    /// Action name (`edit_file`, `run_tests`, `invalid_reply`, ...).
    pub action: String,
    /// Main target as recorded (file path, check name, search pattern, context item).
    #[serde(default)]
    pub target: Option<String>,
    /// Arguments as the model gave them.
    #[serde(default)]
    pub parameters: serde_json::Value,
    /// Outcome.
    pub result: ActionResult,
    /// Error text, if any.
    #[serde(default)]
    pub error: Option<String>,
    /// One-line summary.
    #[serde(default)]
    pub summary: String,
    /// Content hash of each file the step changed, after the change.
    #[serde(default)]
    pub file_hashes: BTreeMap<String, String>,
    /// Passing checks after the step, when any check has run.
    #[serde(default)]
    pub checks_passing: Option<usize>,
    /// Failing checks after the step, when any check has run.
    #[serde(default)]
    pub checks_failing: Option<usize>,
    /// Length in bytes of the step's output (tool output, command output), if known.
    #[serde(default)]
    pub output_len: Option<usize>,
    /// Content hash of the step's full output, if known: the same call with a different
    /// output hash showed something new (polling, paging, a build getting further).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hash: Option<String>,
    /// The output text itself, when the source has it (imported trajectories, the minimal
    /// step format); AgentForge's own records keep it in an artifact instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// What the agent said at this step besides the call (its plan, reasoning or message),
    /// when the source records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
}

impl<S: RecordedVerification> From<&ActionRecord<S>> for StepView {
    fn from(r: &ActionRecord<S>) -> Self {
        let v = r.state_after.verification();
        // No check has run yet: "0 passing, 0 failing" would read as a change later.
        let ran = !v.checks.is_empty();
        StepView {
            step: r.step,
            action: r.action.clone(),
            target: r.target.clone(),
            parameters: r.parameters.clone(),
            result: r.result,
            error: r.error.clone(),
            summary: r.summary.clone(),
            file_hashes: r.file_hashes.clone(),
            checks_passing: ran.then(|| v.passing()),
            checks_failing: ran.then(|| v.failing()),
            output_len: r.output_len,
            output_hash: r.output_hash.clone(),
            output: None,
            thought: None,
        }
    }
}

/// The kinds of loop the detector reports.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[serde(rename_all = "snake_case")]
pub enum LoopType {
    /// The same action with the same arguments (or the same error) failing in a row.
    IdenticalAction,
    /// The same signature again and again in the window without progress.
    Repetition,
    /// Two signatures alternating (A-B-A-B) without progress.
    Alternation,
    /// Failures alternating between approaches (A fails, B fails, A again).
    ErrorCycle,
    /// Different actions all failing with the same kind of error.
    SemanticLoop,
    /// Only reading and checking, or changes that leave verification exactly as it was.
    NoProgress,
    /// Files or verification flipping back to states they already had.
    Oscillation,
}

impl LoopType {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            LoopType::IdenticalAction => "identical_action",
            LoopType::Repetition => "repetition",
            LoopType::Alternation => "alternation",
            LoopType::ErrorCycle => "error_cycle",
            LoopType::SemanticLoop => "semantic_loop",
            LoopType::NoProgress => "no_progress",
            LoopType::Oscillation => "oscillation",
        }
    }
}

impl fmt::Display for LoopType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A detected loop.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Detection {
    /// Which pattern.
    pub loop_type: LoopType,
    /// Step at which it was detected (the last step of the checked history).
    pub step: u64,
    /// 0.0 to 1.0.
    pub confidence: f32,
    /// One sentence for the model and the operator.
    pub description: String,
    /// The steps that make the pattern, one line each.
    pub evidence: Vec<String>,
    /// Concrete ways out, most specific first.
    pub suggestions: Vec<String>,
    /// Signature of the action to block, as `name:target` (the format of
    /// [`agentforge_core::guards::signature`]); `None` when blocking one action would not help.
    pub block: Option<String>,
}

/// Detection thresholds (`[loops]` in `agentforge.toml`). Defaults follow seed 000 §4.3
/// and seed 004 §3.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LoopThresholds {
    /// Same action failing in a row with the same arguments or error.
    pub identical: usize,
    /// Occurrences of one signature within the window, without progress.
    pub repetition: usize,
    /// A-B cycles in a row; A-B-A-B is 2.
    pub alternation_cycles: usize,
    /// A-B-A failure triples among the recent failures (A-B-A-B has 2).
    pub error_cycle: usize,
    /// Consecutive failures of different actions with one kind of error.
    pub semantic: usize,
    /// Consecutive read/search/check steps before a no-progress loop, when at least two
    /// of them (and one in three) re-read or re-ran something unchanged; twice as many
    /// when they all looked at something new. Doubled before the first change of the task,
    /// when reading around is exploration.
    pub no_progress_reads: usize,
    /// Steps, from the first change, during which repeated changes to the same code
    /// leave verification exactly as it was.
    pub no_progress_unchanged: usize,
    /// Times a file (or a check's failure) returns to an earlier state within the window.
    pub oscillation: usize,
    /// Steps looked at.
    pub window: usize,
}

impl Default for LoopThresholds {
    fn default() -> Self {
        LoopThresholds {
            identical: 3,
            repetition: 3,
            alternation_cycles: 2,
            error_cycle: 2,
            semantic: 4,
            no_progress_reads: 6,
            no_progress_unchanged: 5,
            oscillation: 2,
            window: 12,
        }
    }
}

/// The loop detector.
#[derive(Debug, Clone, Default)]
pub struct LoopDetector {
    /// Its thresholds.
    pub thresholds: LoopThresholds,
}

impl LoopDetector {
    /// A detector with these thresholds.
    pub fn new(thresholds: LoopThresholds) -> Self {
        LoopDetector { thresholds }
    }

    /// How many of the latest steps [`check`](Self::check) looks at (three windows: a
    /// cycle through a whole window's worth of distinct actions shows up twice). A caller
    /// holding a longer log passes at least this many; earlier steps only add whether the
    /// task changed anything yet and which file versions it already had.
    pub fn history_len(&self) -> usize {
        analysis::LOOKBACK * self.thresholds.window.max(1)
    }

    /// Checks the history (oldest first) as of its last step; returns the most specific
    /// detection, if any.
    pub fn check(&self, history: &[StepView]) -> Option<Detection> {
        let prepared = analysis::Prepared::new(history);
        self.check_prepared(history, &prepared)
    }

    /// [`check`](Self::check), reusing what `memo` kept of the steps an earlier check saw
    /// (a live run checks at every step a history that moved by one step). The result is
    /// the same as `check`'s.
    pub fn check_with(&self, history: &[StepView], memo: &StepMemo) -> Option<Detection> {
        let prepared = analysis::Prepared::with_memo(history, Some(memo));
        self.check_prepared(history, &prepared)
    }

    /// [`check_with`](Self::check_with) over steps the caller shares (such as the views
    /// [`StepMemo::view`] keeps of log records): `memo` finds a step it kept by its
    /// allocation instead of comparing it whole. The result is the same as `check`'s.
    pub fn check_shared(&self, history: &[Arc<StepView>], memo: &StepMemo) -> Option<Detection> {
        let prepared = analysis::Prepared::with_memo(history, Some(memo));
        self.check_prepared(history, &prepared)
    }

    /// Replays a whole log offline: runs [`check`](Self::check) on every prefix and returns
    /// every detection, each loop reported once until its pattern is broken (a step where
    /// the check finds nothing, or finds another loop).
    pub fn replay(&self, history: &[StepView]) -> Vec<Detection> {
        let prepared = analysis::Prepared::new(history);
        let mut out = Vec::new();
        let mut active: Option<(LoopType, Option<String>)> = None;
        for end in 1..=history.len() {
            let found = self.check_prepared(&history[..end], &prepared);
            let key = found.as_ref().map(|d| (d.loop_type, d.block.clone()));
            if let Some(d) = found {
                if active != key {
                    out.push(d);
                }
            }
            active = key;
        }
        out
    }

    fn check_prepared<V: std::borrow::Borrow<StepView>>(
        &self,
        history: &[V],
        prepared: &analysis::Prepared,
    ) -> Option<Detection> {
        if history.len() < 2 {
            return None;
        }
        let a = analysis::Analysis::new(history, prepared, self.thresholds.window);
        detectors::detect(&a, &self.thresholds)
    }
}

/// Human-readable report of detections, for `agentforge inspect loops`.
pub fn render_text(d: &[Detection]) -> String {
    if d.is_empty() {
        return "no loops detected\n".to_string();
    }
    let mut out = String::new();
    for det in d {
        out.push_str(&format!(
            "step {}: {} (confidence {:.2})\n  {}\n",
            det.step, det.loop_type, det.confidence, det.description
        ));
        if !det.evidence.is_empty() {
            out.push_str("  evidence:\n");
            for e in &det.evidence {
                out.push_str(&format!("    - {e}\n"));
            }
        }
        if !det.suggestions.is_empty() {
            out.push_str("  suggestions:\n");
            for s in &det.suggestions {
                out.push_str(&format!("    - {s}\n"));
            }
        }
        if let Some(b) = &det.block {
            out.push_str(&format!("  block: {b}\n"));
        }
    }
    out
}
