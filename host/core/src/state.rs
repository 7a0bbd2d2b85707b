//! The state of a task and the record of a step: the data the store persists and every
//! other part reads (context, loops, gates, guards). Plain serde types; no I/O here
//! (the store, `agentforge-store`, reads and writes them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::Usage;
use crate::task::TaskSpec;

/// The working-memory file in a task folder (named in the state, so it can move).
pub const WORKING_MEMORY_FILE: &str = "working_memory.yaml";

/// Overall status of a task.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Steps remain to be run.
    #[default]
    Running,
    /// The agent completed with verification passing.
    Complete,
    /// The agent (or the host) asked for a human.
    Escalated,
    /// The task cannot be done (`cannot_fix`) or the host failed it.
    Failed,
    /// The step budget ran out.
    BudgetExhausted,
}

impl TaskStatus {
    /// Whether no more steps will run.
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Running
    }
}

/// Outcome of one executed action.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ActionResult {
    /// Did what was asked.
    Success,
    /// Did not do what was asked.
    Failure,
    /// Did part of it (e.g. some checks pass).
    Partial,
    /// Not run (refused by a guard, blocked).
    Skipped,
}

impl std::fmt::Display for ActionResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ActionResult::Success => "success",
            ActionResult::Failure => "failure",
            ActionResult::Partial => "partial",
            ActionResult::Skipped => "skipped",
        })
    }
}

/// Latest result of one verification command.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckStatus {
    /// Whether the command passed.
    pub passing: bool,
    /// One-line summary (e.g. `3 passed, 1 failed`).
    pub summary: String,
    /// Whether this is a test suite (`run_tests`) rather than a check.
    #[serde(default)]
    pub is_test: bool,
    /// Step at which it ran.
    pub step: u64,
}

/// Verification status of a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    /// Per check name, its latest result.
    #[serde(default)]
    pub checks: BTreeMap<String, CheckStatus>,
    /// All checks have run since the last change and pass.
    #[serde(default)]
    pub ready_for_completion: bool,
    /// Step of the last verification run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_step: Option<u64>,
}

impl Verification {
    /// Number of passing checks.
    pub fn passing(&self) -> usize {
        self.checks.values().filter(|c| c.passing).count()
    }
    /// Number of failing checks.
    pub fn failing(&self) -> usize {
        self.checks.values().filter(|c| !c.passing).count()
    }
    /// Whether all test suites pass; `None` when none has run.
    pub fn tests_passing(&self) -> Option<bool> {
        let mut tests = self.checks.values().filter(|c| c.is_test).peekable();
        tests.peek()?;
        Some(tests.all(|c| c.passing))
    }
}

/// Category of a fact (seed 000 §4.1).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FactCategory {
    /// Code structure: files, functions, modifications.
    CodeStructure,
    /// Something inferred rather than observed.
    Inference,
    /// A recurring pattern.
    Pattern,
    /// Verification outcomes (test counts, check results).
    Verification,
    /// Errors seen.
    Error,
}

/// A conclusion drawn from tool output, shown instead of the raw output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact {
    /// Stable id (`f<step>-<n>`).
    pub id: String,
    /// Category used to group facts in the context.
    pub category: FactCategory,
    /// One sentence.
    pub statement: String,
    /// 0.0 to 1.0.
    pub confidence: f32,
    /// Where it came from (tool or extractor name).
    pub source: String,
    /// Step that produced it.
    pub step: u64,
    /// Id of the fact this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// An action the host refuses to run again, with why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BlockedAction {
    /// Action signature (`name:target`).
    pub signature: String,
    /// Explanation shown to the model.
    pub reason: String,
    /// Step at which it was blocked.
    pub since_step: u64,
}

/// Token accounting for a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TokenTotals {
    /// Sum of prompt tokens counted by the host.
    pub context_tokens: u64,
    /// Largest prompt counted by the host.
    pub max_context_tokens: u64,
    /// Sum of input tokens reported by the provider.
    pub input_tokens: u64,
    /// Sum of output tokens reported by the provider.
    pub output_tokens: u64,
    /// Of `input_tokens`, those the provider read from its prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The mutable state of a task (`state.yaml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskState {
    /// The task's id.
    pub task_id: String,
    /// The task type (context schema).
    pub task_type: String,
    /// Current phase.
    pub phase: String,
    /// Steps taken in the current phase.
    #[serde(default)]
    pub phase_steps: u64,
    /// Number of steps recorded as done.
    pub step: u64,
    /// Step budget (the base, plus any extension the adaptive budget granted).
    pub max_steps: u64,
    /// The base budget and where it came from (`--max-steps`, the task file, the
    /// config); absent in states written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_limit: Option<crate::budget::StepLimit>,
    /// Overall status.
    pub status: TaskStatus,
    /// Why the status is what it is (escalation reason, failure...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Verification status.
    #[serde(default)]
    pub verification: Verification,
    /// Facts extracted from tool output.
    #[serde(default)]
    pub facts: Vec<Fact>,
    /// Pointer to the working memory file, relative to the task folder.
    pub working_memory: String,
    /// Actions refused until further notice.
    #[serde(default)]
    pub blocked_actions: Vec<BlockedAction>,
    /// Workspace-relative files the agent changed.
    #[serde(default)]
    pub files_modified: Vec<String>,
    /// Token totals.
    #[serde(default)]
    pub tokens: TokenTotals,
    /// What the steps cost (the sum of the records' `cost_usd_micros`); absent until the
    /// first step is recorded. Steps recorded before costs were count as unpriced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::CostTotals>,
    /// The cost cap (`max_cost_usd`) that stopped the task (`budget_exhausted`): a run
    /// given a higher cap continues it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at_cost_cap: Option<crate::cost::MicroUsd>,
    /// Invalid model replies in a row (no tool call, unknown tool, bad arguments).
    #[serde(default)]
    pub consecutive_invalid: u32,
    /// Last step that changed workspace files (checks older than this are stale).
    #[serde(default)]
    pub last_change_step: u64,
    /// Phase changes so far (the phase machine's history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_history: Vec<crate::phases::PhaseChange>,
    /// The plan: goal -> task -> subtask, with the current branch.
    #[serde(default)]
    pub focus: crate::focus::FocusTree,
    /// Loops detected so far (repeated detections escalate).
    #[serde(default)]
    pub loop_detections: u32,
    /// The latest loop warning, shown in the context for a few steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_warning: Option<LoopWarning>,
    /// What the next context must tell the model about the previous step
    /// (a refused `complete`, an invalid reply, an auto-revert).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

impl TaskState {
    /// The state of a task that has not run yet.
    pub fn initial(spec: &TaskSpec, phase: &str, max_steps: u64) -> TaskState {
        TaskState {
            task_id: spec.id.clone(),
            task_type: spec.task_type.clone(),
            phase: phase.to_string(),
            phase_steps: 0,
            step: 0,
            max_steps,
            step_limit: None,
            status: TaskStatus::Running,
            status_reason: None,
            verification: Verification::default(),
            facts: Vec::new(),
            working_memory: WORKING_MEMORY_FILE.to_string(),
            blocked_actions: Vec::new(),
            files_modified: Vec::new(),
            tokens: TokenTotals::default(),
            cost: None,
            stopped_at_cost_cap: None,
            consecutive_invalid: 0,
            last_change_step: 0,
            phase_history: Vec::new(),
            focus: crate::focus::FocusTree::new(&spec.goal),
            loop_detections: 0,
            loop_warning: None,
            feedback: None,
        }
    }
}

/// A loop warning carried in the state so the next contexts show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoopWarning {
    /// Step at which the loop was detected.
    pub step: u64,
    /// Loop type (`identical_action`, `alternation`...).
    pub loop_type: String,
    /// What was seen.
    pub description: String,
    /// How to break it.
    pub suggestions: Vec<String>,
    /// The steps that make the loop.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Detector confidence, 0.0 to 1.0.
    #[serde(default)]
    pub confidence: f32,
    /// Signature of the action blocked because of it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// One line of `actions.jsonl`: an executed step.
///
/// `S` is how much of the state after the step is read: the whole [`TaskState`] (what is
/// written, and what recovery rebuilds `state.yaml` from), or [`AfterVerification`] for
/// the log's tail that every step reads (the loop detector and the step budget need only
/// the verification, and parsing 36 whole states was a quarter of a step's overhead).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ActionRecord<S = TaskState> {
    /// Step number (1-based).
    pub step: u64,
    /// Phase the step ran in.
    pub phase: String,
    /// Action name as the model gave it (or `invalid_reply`).
    pub action: String,
    /// Main target (file path, check name...).
    #[serde(default)]
    pub target: Option<String>,
    /// Arguments as the model gave them.
    #[serde(default)]
    pub parameters: serde_json::Value,
    /// Outcome.
    pub result: ActionResult,
    /// One-line summary.
    pub summary: String,
    /// Error text, cut to a bounded length.
    #[serde(default)]
    pub error: Option<String>,
    /// Wall time of the action (model call excluded).
    pub duration_ms: u64,
    /// RFC 3339 time the step finished.
    pub timestamp: String,
    /// Prompt tokens counted by the host (system + user + tools).
    pub context_tokens: u64,
    /// Usage reported by the provider.
    #[serde(default)]
    pub usage: Usage,
    /// What the step's model call cost (`usage` at the model's price), in micro-dollars;
    /// `null` when unknown: the model has no price (never recorded as zero).
    #[serde(default)]
    pub cost_usd_micros: Option<crate::cost::MicroUsd>,
    /// Workspace-relative path of the full tool output, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_artifact: Option<String>,
    /// Content hash of what the step showed (check output, file content, search hits,
    /// tool output): the same call showing a different output made progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hash: Option<String>,
    /// Length in bytes of what the step showed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<usize>,
    /// A loop detected at this step, with its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_detection: Option<LoopWarning>,
    /// Content hash of each file this step changed, after the change (for oscillation
    /// detection): `sha256:<hex>` ([`crate::hash::tagged`]). Logs written before the
    /// switch to SHA-256 hold untagged SipHash values; those never equal a current hash,
    /// so only an oscillation spanning the upgrade goes unseen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub file_hashes: BTreeMap<String, String>,
    /// The step's trajectory (the request sent and the reply received), written before
    /// this line; absent in logs written before trajectories were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<crate::trajectory::TrajectoryRef>,
    /// Enforcement events of this step (a guard's denial, an auto-revert, a loop, a
    /// refused `complete`): copied into the trace database once the line is on disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<crate::trace::TraceEvent>,
    /// The state after this step: what `state.yaml` is rebuilt from after a crash.
    pub state_after: S,
}

/// The part of a record's `state_after` that the step pipeline reads back from the log's
/// tail: the verification after that step (the rest of the state is skipped unparsed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AfterVerification {
    /// Verification status after the step.
    #[serde(default)]
    pub verification: Verification,
}

/// A record of the log's tail, read with only the verification of its state.
pub type TailRecord = ActionRecord<AfterVerification>;

/// A record's state, whole or in part, that holds the verification after the step.
pub trait RecordedVerification {
    /// Verification status after the step.
    fn verification(&self) -> &Verification;
}

impl RecordedVerification for TaskState {
    fn verification(&self) -> &Verification {
        &self.verification
    }
}

impl RecordedVerification for AfterVerification {
    fn verification(&self) -> &Verification {
        &self.verification
    }
}

/// The provider a task last ran with, kept in `provider.yaml` so `resume` talks to
/// the same model without repeating the flags. Holds where to find the key (the
/// variable's name), never the key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecordedProvider {
    /// `anthropic`, `openai` or `replay`.
    pub kind: crate::model::ProviderKind,
    /// The model name sent.
    pub model: String,
    /// The base URL given explicitly (config or `*_BASE_URL`); absent: the public one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the variable holding the key, when not the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The recorded session of the replay provider (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
}

/// Longest string kept whole in a log record (arguments, targets, reasons); longer
/// ones keep their head and tail around a marker with their size and SHA-256.
pub const MAX_LOGGED_STRING_CHARS: usize = 2_000;
/// Largest `parameters` value kept in a record (its JSON); a larger one, even after
/// its strings are bounded, is replaced by its size, SHA-256 and JSON head.
pub const MAX_LOGGED_PARAMETERS_BYTES: usize = 16 * 1024;

/// `text` if it has at most `max` characters; else its first `max / 2` and last
/// `max / 4` characters around `…[N bytes, sha256:HEX; middle not logged]…`. The same
/// text always gives the same result, and different texts (almost surely) different
/// ones, so comparisons of logged arguments (loop detection) still hold.
pub fn bound_text(text: &str, max: usize) -> String {
    let chars = text.chars().count();
    if chars <= max {
        return text.to_string();
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text.chars().skip(chars - max / 4).collect();
    format!(
        "{head}…[{} bytes, sha256:{hex}; middle not logged]…{tail}",
        text.len()
    )
}

/// The model's arguments as a log record keeps them: every string bounded by
/// [`bound_text`] with [`MAX_LOGGED_STRING_CHARS`]; if the JSON is still larger than
/// [`MAX_LOGGED_PARAMETERS_BYTES`] (many strings, huge keys), an object
/// `{"not_logged": {"bytes", "sha256", "head"}}` stands for it. The action itself runs
/// with the whole arguments; only the record is bounded.
pub fn bound_parameters(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    fn walk(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(bound_text(s, MAX_LOGGED_STRING_CHARS)),
            Value::Array(a) => Value::Array(a.iter().map(walk).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), walk(x))).collect())
            }
            other => other.clone(),
        }
    }
    let bounded = walk(v);
    let json = bounded.to_string();
    if json.len() <= MAX_LOGGED_PARAMETERS_BYTES {
        return bounded;
    }
    use sha2::Digest as _;
    let full = v.to_string();
    let digest = sha2::Sha256::digest(full.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({"not_logged": {
        "bytes": full.len(),
        "sha256": hex,
        "head": json.chars().take(MAX_LOGGED_STRING_CHARS).collect::<String>(),
    }})
}
