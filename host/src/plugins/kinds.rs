//! Gate and guard plugins behind the host's [`Gate`] and [`Guard`] traits, with the
//! failure effect of each kind: a failed gate call is a failed check, a failed guard
//! call denies (unless the plugin is configured `on_error = "allow"`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::guard_bindings::agentforge::plugin::types::Decision;
use super::{
    cut, fact_to_wit, output, wrong_instance, Inner, Instance, OnError, PluginError,
    MAX_RETURN_BYTES,
};
use crate::commands::CommandOutput;
use crate::gates::{Gate, GateVerdict};
use crate::guards::{Guard, GuardDecision};
use crate::state_store::{Fact, TaskState};
use crate::task::CheckSpec;
use crate::tools::Action;

/// Longest summary or reason shown to the model (the context is budgeted).
const MAX_REASON_CHARS: usize = 300;

/// A gate plugin behind [`Gate`]: a failed call counts as a failed check whose summary
/// is the plugin error, so a broken gate can never pass a check.
#[derive(Clone)]
pub struct WasmGate {
    inner: Arc<Inner>,
}

impl WasmGate {
    pub(super) fn new(inner: Arc<Inner>) -> WasmGate {
        WasmGate { inner }
    }

    /// The plugin's verdict on one check run, or why the call failed.
    pub fn try_evaluate(
        &self,
        check: &str,
        exit_code: Option<i32>,
        output: &str,
        facts: &[Fact],
    ) -> Result<GateVerdict, PluginError> {
        let facts: Vec<_> = facts.iter().map(fact_to_wit).collect();
        let v = self.inner.call(|x, s| match x {
            Instance::Gate(g) => {
                let v = g.call_evaluate(&mut *s, check, exit_code, output, &facts)?;
                output::check_returned("returned summary", v.summary.len(), MAX_RETURN_BYTES)?;
                Ok(v)
            }
            _ => Err(wrong_instance()),
        })?;
        Ok(GateVerdict {
            passing: v.passing,
            summary: cut(&v.summary, MAX_REASON_CHARS),
        })
    }
}

impl Gate for WasmGate {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn evaluate(&self, check: &CheckSpec, out: &CommandOutput, facts: &[Fact]) -> GateVerdict {
        // A command killed by its timeout has no exit status: the gate sees `none`, as
        // for any killed command, and the output says the rest.
        let exit = if out.timed_out { None } else { out.exit_code };
        match self.try_evaluate(&check.name, exit, &out.output, facts) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("warning: {e}; the check counts as failed");
                GateVerdict {
                    passing: false,
                    summary: cut(&format!("gate plugin failed: {e}"), MAX_REASON_CHARS),
                }
            }
        }
    }
}

/// A guard plugin behind [`Guard`]: a failed call denies the action with the error as
/// the reason (fail closed), or allows it with a warning when the manifest or the
/// project's `[plugins.on_error]` says `allow`.
#[derive(Clone)]
pub struct WasmGuard {
    inner: Arc<Inner>,
}

impl WasmGuard {
    pub(super) fn new(inner: Arc<Inner>) -> WasmGuard {
        WasmGuard { inner }
    }

    /// What a failed call decides for this plugin.
    pub fn on_error(&self) -> OnError {
        self.inner.on_error
    }

    /// The plugin's decision on an action given as the WIT `check` takes it (tool name,
    /// target, arguments and state as JSON), or why the call failed. Used for actions the
    /// host has no [`Action`] for (e.g. a `set_field` write of a state field).
    pub fn try_check(
        &self,
        action: &str,
        target: Option<&str>,
        arguments_json: &str,
        state_json: &str,
    ) -> Result<GuardDecision, PluginError> {
        let d = self.inner.call(|x, s| match x {
            Instance::Guard(g) => {
                let d = g.call_check(&mut *s, action, target, arguments_json, state_json)?;
                let size = match &d {
                    Decision::Allow => 0,
                    Decision::Warn(r) | Decision::Deny(r) => r.len(),
                };
                output::check_returned("returned reason", size, MAX_RETURN_BYTES)?;
                Ok(d)
            }
            _ => Err(wrong_instance()),
        })?;
        Ok(match d {
            Decision::Allow => GuardDecision::Allow,
            Decision::Warn(r) => GuardDecision::Warn(cut(&r, MAX_REASON_CHARS)),
            Decision::Deny(r) => GuardDecision::Deny(cut(&r, MAX_REASON_CHARS)),
        })
    }

    /// [`Guard::check`] on raw inputs: the decision, or the `on_error` effect of a failure.
    pub fn check_raw(
        &self,
        action: &str,
        target: Option<&str>,
        arguments_json: &str,
        state_json: &str,
    ) -> GuardDecision {
        match self.try_check(action, target, arguments_json, state_json) {
            Ok(d) => d,
            Err(e) => {
                let why = cut(&format!("guard plugin failed: {e}"), MAX_REASON_CHARS);
                match self.inner.on_error {
                    OnError::Deny => {
                        eprintln!("warning: {e}; the action is denied (fail closed)");
                        GuardDecision::Deny(why)
                    }
                    OnError::Allow => {
                        eprintln!("warning: {e}; the action is allowed (on_error = \"allow\")");
                        GuardDecision::Warn(why)
                    }
                }
            }
        }
    }
}

impl Guard for WasmGuard {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn check(&self, action: &Action, state: &TaskState) -> GuardDecision {
        let state_json = match serde_json::to_string(state) {
            Ok(s) => s,
            // Cannot happen for a state that is written to disk every step; treated as
            // a failed call rather than a panic.
            Err(e) => {
                return match self.inner.on_error {
                    OnError::Deny => GuardDecision::Deny(format!("guard input: {e}")),
                    OnError::Allow => GuardDecision::Warn(format!("guard input: {e}")),
                }
            }
        };
        let args = action_arguments(action).to_string();
        self.check_raw(
            action.name(),
            action.target().as_deref(),
            &args,
            &state_json,
        )
    }
}

/// An action's arguments as the model gave them (the tool's JSON object), for guards.
pub fn action_arguments(action: &Action) -> Value {
    match action {
        Action::ReadFile {
            path,
            start_line,
            end_line,
        } => json!({"path": path, "start_line": start_line, "end_line": end_line}),
        Action::WriteFile { path, content } => json!({"path": path, "content": content}),
        Action::EditFile {
            path,
            old_text,
            new_text,
        } => json!({"path": path, "old_text": old_text, "new_text": new_text}),
        Action::ReplaceLines {
            path,
            start_line,
            end_line,
            new_content,
        } => {
            json!({"path": path, "start_line": start_line, "end_line": end_line, "new_content": new_content})
        }
        Action::Search {
            pattern,
            glob,
            path,
        } => json!({"pattern": pattern, "glob": glob, "path": path}),
        Action::RunCheck { name } | Action::RunTests { name } => json!({"name": name}),
        Action::LoadContext { item } => json!({"item": item}),
        Action::Complete { summary } => json!({"summary": summary}),
        Action::Escalate { reason } | Action::CannotFix { reason } => json!({"reason": reason}),
    }
}
