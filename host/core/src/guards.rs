//! Guards: policies consulted before an action runs (seed 003, "Hooks that BLOCK").
//!
//! A guard can allow, warn or deny; a denial is recorded as a skipped step and shown to
//! the model in the next context. The host's own guard refuses actions the loop detector
//! blocked; the policies (complete needs passing verification, `tested` needs evidence,
//! read-only roles) are the built-in guard plugins (`plugins/guard-*`) behind [`Guard`].

use crate::actions::Action;
use crate::state::TaskState;
use crate::task::TaskSpec;

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

/// A decision of a run's guards and who made it: the enforcer a trace names.
#[derive(Debug, Clone, PartialEq)]
pub struct Ruling {
    /// Allow, the warnings joined, or the first denial.
    pub decision: GuardDecision,
    /// The guard that denied, or the guards that warned (none for allow).
    pub by: Vec<String>,
}

/// A policy checked before every action.
pub trait Guard: Send + Sync {
    /// Name, for logs.
    fn name(&self) -> &str;
    /// Decides on `action` of `task` (who acts: its type, its `role`) given the current
    /// state.
    fn check(&self, action: &Action, task: &TaskSpec, state: &TaskState) -> GuardDecision;

    /// [`Guard::check`] with the task and state also as JSON, serialized once for all
    /// the guards of a step (plugins take JSON).
    fn check_with(&self, action: &Action, input: &GuardInput<'_>) -> GuardDecision {
        self.check(action, input.task, input.state)
    }

    /// Decides on a write of the task's state the model asked for (`field`, e.g.
    /// `subtask.tested`, with `arguments` `{"field", "value", "evidence"}`): seed 003's
    /// hooks on state fields. Allowed unless the guard says otherwise.
    fn check_write(
        &self,
        _field: &str,
        _arguments: &serde_json::Value,
        _input: &GuardInput<'_>,
    ) -> GuardDecision {
        GuardDecision::Allow
    }
}

/// The task and state a step's guards are asked about, with their JSON forms made on
/// first use and shared by every guard.
pub struct GuardInput<'a> {
    /// The task.
    pub task: &'a TaskSpec,
    /// Its current state.
    pub state: &'a TaskState,
    json: std::sync::OnceLock<Result<(String, String), String>>,
}

impl<'a> GuardInput<'a> {
    /// The input for `task` in `state`.
    pub fn new(task: &'a TaskSpec, state: &'a TaskState) -> GuardInput<'a> {
        GuardInput {
            task,
            state,
            json: std::sync::OnceLock::new(),
        }
    }

    /// `(task JSON, state JSON)`, or why they could not be serialized.
    pub fn json(&self) -> Result<(&str, &str), &str> {
        let json = self.json.get_or_init(|| {
            let task = serde_json::to_string(self.task).map_err(|e| e.to_string())?;
            let state = serde_json::to_string(self.state).map_err(|e| e.to_string())?;
            Ok((task, state))
        });
        match json {
            Ok((t, s)) => Ok((t, s)),
            Err(e) => Err(e),
        }
    }
}

/// Refuses actions the host has blocked (e.g. by the loop detector); blocks persist in
/// the task state across restarts.
pub struct BlockedActions;

impl Guard for BlockedActions {
    fn name(&self) -> &str {
        "blocked-actions"
    }

    fn check(&self, action: &Action, _task: &TaskSpec, state: &TaskState) -> GuardDecision {
        let coarse = signature(action);
        let exact = exact_signature(action);
        match state.blocked_actions.iter().find(|b| {
            b.signature == coarse
                || b.signature == exact
                || legacy_coarse(&b.signature) == Some(coarse.as_str())
        }) {
            Some(b) => GuardDecision::Deny(format!(
                "{} is blocked since step {}: {}",
                b.signature, b.since_step, b.reason
            )),
            None => GuardDecision::Allow,
        }
    }
}

/// The coarse signature an action is blocked by: `name:target` (any arguments).
pub fn signature(action: &Action) -> String {
    format!("{}:{}", action.name(), action.target().unwrap_or_default())
}

/// The exact signature: `name:target#sha256:<hash of all arguments>`, to block one
/// precise call (the same failing edit again) while leaving other calls on the target open.
pub fn exact_signature(action: &Action) -> String {
    format!(
        "{}#{}",
        signature(action),
        crate::hash::tagged(format!("{action:?}").as_bytes())
    )
}

/// The coarse signature a stored exact signature from an older version stands for
/// (`name:target#<8 hex>`, hashed with an algorithm no longer used): it can never match a
/// current exact signature, so it blocks the whole target instead of lapsing silently.
fn legacy_coarse(stored: &str) -> Option<&str> {
    let (coarse, hash) = stored.rsplit_once('#')?;
    (hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(coarse)
}

/// The guards of a run, checked in order; the first denial wins.
pub struct Guards {
    list: Vec<Box<dyn Guard>>,
}

impl Default for Guards {
    fn default() -> Self {
        Guards {
            list: vec![Box::new(BlockedActions)],
        }
    }
}

impl Guards {
    /// Adds a guard (used by the plugin loader).
    pub fn push(&mut self, g: Box<dyn Guard>) {
        self.list.push(g);
    }

    /// The first denial, else all warnings joined, else allow.
    pub fn check(&self, action: &Action, task: &TaskSpec, state: &TaskState) -> Ruling {
        let input = GuardInput::new(task, state);
        self.decide(|g| g.check_with(action, &input))
    }

    /// [`Guard::check_write`] over every guard: the first denial, else all warnings.
    pub fn check_write(
        &self,
        field: &str,
        arguments: &serde_json::Value,
        task: &TaskSpec,
        state: &TaskState,
    ) -> Ruling {
        let input = GuardInput::new(task, state);
        self.decide(|g| g.check_write(field, arguments, &input))
    }

    fn decide(&self, ask: impl Fn(&dyn Guard) -> GuardDecision) -> Ruling {
        let mut warnings = Vec::new();
        let mut by = Vec::new();
        for g in &self.list {
            match ask(g.as_ref()) {
                GuardDecision::Allow => {}
                GuardDecision::Warn(w) => {
                    warnings.push(format!("{}: {w}", g.name()));
                    by.push(g.name().to_string());
                }
                deny @ GuardDecision::Deny(_) => {
                    return Ruling {
                        decision: deny,
                        by: vec![g.name().to_string()],
                    }
                }
            }
        }
        let decision = if warnings.is_empty() {
            GuardDecision::Allow
        } else {
            GuardDecision::Warn(warnings.join("; "))
        };
        Ruling { decision, by }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::BlockedAction;

    fn spec() -> TaskSpec {
        TaskSpec::parse("id: t\ntask_type: fix_violation\ngoal: g\n", "t").unwrap()
    }

    fn state_with(blocked: &str) -> TaskState {
        let spec = spec();
        let mut st = TaskState::initial(&spec, "implement", 10);
        st.blocked_actions.push(BlockedAction {
            signature: blocked.to_string(),
            reason: "failed 3 times".into(),
            since_step: 4,
        });
        st
    }

    fn edit(old: &str) -> Action {
        Action::EditFile {
            path: "a.txt".into(),
            old_text: old.into(),
            new_text: "new".into(),
        }
    }

    #[test]
    fn exact_block_refuses_only_the_same_call() {
        let st = state_with(&exact_signature(&edit("old")));
        let g = Guards::default();
        assert!(
            matches!(g.check(&edit("old"), &spec(), &st).decision, GuardDecision::Deny(r) if r.contains("since step 4"))
        );
        assert_eq!(
            g.check(&edit("other"), &spec(), &st).decision,
            GuardDecision::Allow
        );
    }

    #[test]
    fn exact_signatures_are_tagged_sha256() {
        let sig = exact_signature(&edit("old"));
        let (coarse, hash) = sig.rsplit_once('#').unwrap();
        assert_eq!(coarse, "edit_file:a.txt");
        assert!(crate::hash::is_tagged(hash), "{sig}");
        assert_eq!(sig, exact_signature(&edit("old")));
    }

    #[test]
    fn a_legacy_exact_block_blocks_its_target() {
        // Written by a version that hashed with SipHash: it cannot match any current
        // exact signature, so it holds for the whole target rather than lapsing.
        let st = state_with("edit_file:a.txt#0badc0de");
        let g = Guards::default();
        assert!(matches!(
            g.check(&edit("anything"), &spec(), &st).decision,
            GuardDecision::Deny(_)
        ));
        // A target that itself holds `#` is not mistaken for a legacy hash.
        let st = state_with("edit_file:a#b.txt");
        let other = Action::EditFile {
            path: "a".into(),
            old_text: "x".into(),
            new_text: "y".into(),
        };
        assert_eq!(g.check(&other, &spec(), &st).decision, GuardDecision::Allow);
    }

    #[test]
    fn coarse_block_refuses_every_call_on_the_target() {
        let st = state_with("edit_file:a.txt");
        let g = Guards::default();
        assert!(matches!(
            g.check(&edit("x"), &spec(), &st).decision,
            GuardDecision::Deny(_)
        ));
        let read = Action::ReadFile {
            path: "a.txt".into(),
            start_line: None,
            end_line: None,
        };
        assert_eq!(g.check(&read, &spec(), &st).decision, GuardDecision::Allow);
    }
}
