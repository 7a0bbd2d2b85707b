//! Enforcement traces (seed 003, layer 3): what a guard, the loop detector, the
//! auto-revert or a person corrected, kept so later steps see precedents and repeated
//! mistakes become proposed guards.
//!
//! A step's traces travel in its log line ([`crate::state::ActionRecord::traces`]), so
//! they are as durable as the step itself; the host copies them into the trace database
//! after the line is on the disk, under a key made of the task, the step and the trace's
//! index ([`trace_key`]), so a copy repeated after a crash never adds a second trace.

use serde::{Deserialize, Serialize};

/// The trace's `type` in seed 003.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// Something the agent did was undone or redirected after the fact (auto-revert,
    /// loop warning, a person's correction).
    Correction,
    /// Something the agent tried was refused (a guard's denial, a refused `complete`).
    Violation,
    /// A decision taken on the agent's behalf (a learned rule applied, a loop block).
    Decision,
    /// A person approved something (a proposed guard).
    Approval,
}

/// Where a trace came from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TraceSource {
    /// A guard refused the action.
    GuardDenial,
    /// A guard let the action run with a warning.
    GuardWarning,
    /// The host undid a change that broke a check which passed before it.
    AutoRevert,
    /// The loop detector saw the agent repeat itself.
    LoopDetection,
    /// `complete` was refused because the task's verification was not ready.
    RefusedComplete,
    /// A person corrected the agent (`agentforge trace add`, a rejected proposal).
    PersonCorrection,
}

impl TraceSource {
    /// The kind a trace of this source has.
    pub fn kind(self) -> TraceKind {
        match self {
            TraceSource::GuardDenial | TraceSource::RefusedComplete => TraceKind::Violation,
            TraceSource::GuardWarning
            | TraceSource::AutoRevert
            | TraceSource::LoopDetection
            | TraceSource::PersonCorrection => TraceKind::Correction,
        }
    }

    /// The snake_case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceSource::GuardDenial => "guard_denial",
            TraceSource::GuardWarning => "guard_warning",
            TraceSource::AutoRevert => "auto_revert",
            TraceSource::LoopDetection => "loop_detection",
            TraceSource::RefusedComplete => "refused_complete",
            TraceSource::PersonCorrection => "person_correction",
        }
    }
}

impl TraceKind {
    /// The snake_case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceKind::Correction => "correction",
            TraceKind::Violation => "violation",
            TraceKind::Decision => "decision",
            TraceKind::Approval => "approval",
        }
    }
}

/// What happened, as the step that saw it records it (seed 003's `event` plus what the
/// patterns group by).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TraceEvent {
    /// Violation, correction...
    pub kind: TraceKind,
    /// Guard denial, auto-revert...
    pub source: TraceSource,
    /// Who enforced it: a guard's name (`guard-tested-evidence`), `loop-detector`,
    /// `auto-revert`, `executor`, or a person.
    pub enforcer: String,
    /// The action it concerned (`complete`, `edit_file`, `set_field`...).
    pub action: String,
    /// The action's main target (a path, a check, a field), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// What the agent did (one sentence).
    pub what_happened: String,
    /// What would have been right (one sentence).
    pub what_was_correct: String,
    /// Why: the enforcer's reason.
    pub why: String,
}

/// Where a trace was recorded (seed 003's `context`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TraceContext {
    /// The task's id.
    pub task_id: String,
    /// Its task type.
    pub task_type: String,
    /// The phase the step ran in.
    pub phase: String,
    /// The role a value-loop task plays (`builder`, `critic`...), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The step that recorded it.
    pub step: u64,
}

/// A trace as the database keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Trace {
    /// Unique and stable across retries: see [`trace_key`].
    pub key: String,
    /// The project (the workspace folder's name).
    pub project: String,
    /// RFC 3339 time of the step that recorded it.
    pub timestamp: String,
    /// Where it was recorded.
    pub context: TraceContext,
    /// What happened.
    pub event: TraceEvent,
}

/// The key of the `index`-th trace of `step` of `task_id`: writing the same trace twice
/// (a copy repeated after a kill) finds the key taken and adds nothing.
pub fn trace_key(task_id: &str, step: u64, index: usize) -> String {
    format!("{task_id}#{step}#{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_sources_and_names_are_snake_case() {
        assert_eq!(TraceSource::GuardDenial.kind(), TraceKind::Violation);
        assert_eq!(TraceSource::LoopDetection.kind(), TraceKind::Correction);
        let json = serde_json::to_string(&TraceSource::RefusedComplete).unwrap();
        assert_eq!(
            json,
            format!("\"{}\"", TraceSource::RefusedComplete.as_str())
        );
        assert_eq!(trace_key("t-1", 7, 0), "t-1#7#0");
    }
}
