//! Guards: policies consulted before an action runs (seed 003, "Hooks that BLOCK").
//!
//! A guard can allow, warn or deny; a denial is recorded as a skipped step and shown to
//! the model in the next context. The plugin system adds WASM guards behind [`Guard`].

use crate::state_store::TaskState;
use crate::tools::Action;

/// A guard's decision.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardDecision {
    /// Run the action.
    Allow,
    /// Run it, but tell the model.
    Warn(String),
    /// Refuse it, with the reason shown to the model.
    Deny(String),
}

/// A policy checked before every action.
pub trait Guard: Send + Sync {
    /// Name, for logs.
    fn name(&self) -> &str;
    /// Decides on `action` given the current state.
    fn check(&self, action: &Action, state: &TaskState) -> GuardDecision;
}

/// `complete` is refused unless verification is ready for completion.
pub struct CompleteRequiresVerification;

impl Guard for CompleteRequiresVerification {
    fn name(&self) -> &str {
        "complete-requires-verification"
    }

    fn check(&self, action: &Action, state: &TaskState) -> GuardDecision {
        if !matches!(action, Action::Complete { .. }) || state.verification.ready_for_completion {
            return GuardDecision::Allow;
        }
        let failing: Vec<String> = state
            .verification
            .checks
            .iter()
            .filter(|(_, c)| !c.passing)
            .map(|(n, c)| format!("{n}: {}", c.summary))
            .collect();
        let why = if state.verification.checks.is_empty() {
            "no check has run yet; run run_check/run_tests first".to_string()
        } else if failing.is_empty() {
            "the checks have not all run since the last change; run them again".to_string()
        } else {
            format!("failing checks: {}", failing.join("; "))
        };
        GuardDecision::Deny(format!(
            "complete refused: verification is not passing ({why})"
        ))
    }
}

/// Refuses actions the host has blocked (e.g. by the loop detector); blocks persist in
/// the task state across restarts.
pub struct BlockedActions;

impl Guard for BlockedActions {
    fn name(&self) -> &str {
        "blocked-actions"
    }

    fn check(&self, action: &Action, state: &TaskState) -> GuardDecision {
        let sig = signature(action);
        match state.blocked_actions.iter().find(|b| b.signature == sig) {
            Some(b) => GuardDecision::Deny(format!(
                "{sig} is blocked since step {}: {}",
                b.since_step, b.reason
            )),
            None => GuardDecision::Allow,
        }
    }
}

/// The signature an action is blocked by: `name:target`.
pub fn signature(action: &Action) -> String {
    format!("{}:{}", action.name(), action.target().unwrap_or_default())
}

/// The guards of a run, checked in order; the first denial wins.
pub struct Guards {
    list: Vec<Box<dyn Guard>>,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            list: vec![
                Box::new(BlockedActions),
                Box::new(CompleteRequiresVerification),
            ],
        }
    }
}

impl Guards {
    /// Adds a guard (used by the plugin loader).
    pub fn push(&mut self, g: Box<dyn Guard>) {
        self.list.push(g);
    }

    /// The first denial, else all warnings joined, else allow.
    pub fn check(&self, action: &Action, state: &TaskState) -> GuardDecision {
        let mut warnings = Vec::new();
        for g in &self.list {
            match g.check(action, state) {
                GuardDecision::Allow => {}
                GuardDecision::Warn(w) => warnings.push(format!("{}: {w}", g.name())),
                deny @ GuardDecision::Deny(_) => return deny,
            }
        }
        if warnings.is_empty() {
            GuardDecision::Allow
        } else {
            GuardDecision::Warn(warnings.join("; "))
        }
    }
}
