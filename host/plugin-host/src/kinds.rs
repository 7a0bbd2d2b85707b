//! Gate and guard plugins behind the host's [`Gate`] and [`Guard`] traits, with the
//! failure effect of each kind: a failed gate call is a failed check, a failed guard
//! call denies (unless the plugin is configured `on_error = "allow"`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::bindings::{v0_1, v0_3};
use super::wit::Decision;
use super::{
    clean_line, fact_to_wit, output, wrong_instance, Inner, Instance, OnError, PluginError,
    MAX_RETURN_BYTES,
};
use agentforge_core::actions::Action;
use agentforge_core::command::CommandOutput;
use agentforge_core::gates::{Gate, GateVerdict};
use agentforge_core::guards::{Guard, GuardDecision, GuardInput};
use agentforge_core::state::{Fact, TaskState};
use agentforge_core::task::{CheckSpec, TaskSpec};

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

    /// The checks the gate judges (its `checks()`, asked at load; `*`: any).
    pub fn checks(&self) -> &[String] {
        &self.inner.handles
    }

    /// The plugin's verdict on one check run, or why the call failed. A command killed
    /// by its timeout has no exit code (`timed_out` says why).
    pub fn try_evaluate(
        &self,
        check: &str,
        exit_code: Option<i32>,
        timed_out: bool,
        output: &str,
        facts: &[Fact],
    ) -> Result<GateVerdict, PluginError> {
        let facts: Vec<_> = facts.iter().map(fact_to_wit).collect();
        let exit_code = if timed_out { None } else { exit_code };
        let v = self.inner.call(|x, s| {
            let (passing, summary) = match x {
                // 0.2.0 gates take the same run and types.
                Instance::Gate(_) | Instance::GateV0_2(_) => {
                    let run = v0_3::types::CheckRun {
                        check: check.to_string(),
                        exit_code,
                        timed_out,
                        output: output.to_string(),
                    };
                    let v = match x {
                        Instance::Gate(g) => g.call_evaluate(&mut *s, &run, &facts)?,
                        Instance::GateV0_2(g) => g.call_evaluate(&mut *s, &run, &facts)?,
                        _ => return Err(wrong_instance()),
                    };
                    (v.passing, v.summary)
                }
                // 0.1.0 gates saw no timeout flag: a killed command had no exit code.
                Instance::GateV0_1(g) => {
                    let facts: Vec<_> = facts.iter().cloned().map(fact_to_v0_1).collect();
                    let v = g.call_evaluate(&mut *s, check, exit_code, output, &facts)?;
                    (v.passing, v.summary)
                }
                _ => return Err(wrong_instance()),
            };
            output::check_returned("returned summary", summary.len(), MAX_RETURN_BYTES)?;
            Ok(GateVerdict { passing, summary })
        })?;
        Ok(GateVerdict {
            passing: v.passing,
            summary: clean_line(&v.summary, MAX_REASON_CHARS),
        })
    }
}

impl Gate for WasmGate {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn checks(&self) -> Vec<String> {
        self.inner.handles.clone()
    }

    fn evaluate(&self, check: &CheckSpec, out: &CommandOutput, facts: &[Fact]) -> GateVerdict {
        match self.try_evaluate(
            &check.name,
            out.exit_code,
            out.timed_out,
            &out.output,
            facts,
        ) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("warning: {e}; the check counts as failed");
                GateVerdict {
                    passing: false,
                    summary: clean_line(&format!("gate plugin failed: {e}"), MAX_REASON_CHARS),
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

    /// Whether the guard is asked about `action`: its manifest's `actions` name it, or
    /// name none.
    pub fn judges(&self, action: &str) -> bool {
        self.inner
            .judges
            .as_ref()
            .is_none_or(|a| a.iter().any(|x| x == action))
    }

    /// What a failed call decides for this plugin.
    pub fn on_error(&self) -> OnError {
        self.inner.on_error
    }

    /// The decision when the guard's input cannot even be made (`on_error` applies).
    fn input_error(&self, e: &str) -> GuardDecision {
        match self.inner.on_error {
            OnError::Deny => GuardDecision::Deny(format!("guard input: {e}")),
            OnError::Allow => GuardDecision::Warn(format!("guard input: {e}")),
        }
    }

    /// The plugin's decision on an action given as the WIT `check` takes it (tool name,
    /// target, arguments, task and state as JSON), or why the call failed. Used for
    /// actions the host has no [`Action`] for (e.g. a `set_field` write of a state field).
    pub fn try_check(
        &self,
        action: &str,
        target: Option<&str>,
        arguments_json: &str,
        task_json: &str,
        state_json: &str,
    ) -> Result<GuardDecision, PluginError> {
        let d = self.inner.call(|x, s| {
            let d = match x {
                Instance::Guard(g) => g.call_check(
                    &mut *s,
                    action,
                    target,
                    arguments_json,
                    task_json,
                    state_json,
                )?,
                Instance::GuardV0_2(g) => g.call_check(
                    &mut *s,
                    action,
                    target,
                    arguments_json,
                    task_json,
                    state_json,
                )?,
                // 0.1.0 guards saw no task.
                Instance::GuardV0_1(g) => {
                    match g.call_check(&mut *s, action, target, arguments_json, state_json)? {
                        v0_1::types::Decision::Allow => Decision::Allow,
                        v0_1::types::Decision::Warn(r) => Decision::Warn(r),
                        v0_1::types::Decision::Deny(r) => Decision::Deny(r),
                    }
                }
                _ => return Err(wrong_instance()),
            };
            let size = match &d {
                Decision::Allow => 0,
                Decision::Warn(r) | Decision::Deny(r) => r.len(),
            };
            output::check_returned("returned reason", size, MAX_RETURN_BYTES)?;
            Ok(d)
        })?;
        Ok(match d {
            Decision::Allow => GuardDecision::Allow,
            Decision::Warn(r) => GuardDecision::Warn(clean_line(&r, MAX_REASON_CHARS)),
            Decision::Deny(r) => GuardDecision::Deny(clean_line(&r, MAX_REASON_CHARS)),
        })
    }

    /// [`Guard::check`] on raw inputs, for an action the guard judges (its caller
    /// checked): the decision, or the `on_error` effect of a failure.
    fn decide(
        &self,
        action: &str,
        target: Option<&str>,
        arguments_json: &str,
        task_json: &str,
        state_json: &str,
    ) -> GuardDecision {
        match self.try_check(action, target, arguments_json, task_json, state_json) {
            Ok(d) => d,
            Err(e) => {
                let why = clean_line(&format!("guard plugin failed: {e}"), MAX_REASON_CHARS);
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

    fn check(&self, action: &Action, task: &TaskSpec, state: &TaskState) -> GuardDecision {
        self.check_with(action, &GuardInput::new(task, state))
    }

    fn check_with(&self, action: &Action, input: &GuardInput<'_>) -> GuardDecision {
        // Before the input's JSON is made: an action the guard does not judge costs nothing.
        if !self.judges(action.name()) {
            return GuardDecision::Allow;
        }
        let (task_json, state_json) = match input.json() {
            Ok(j) => j,
            // Cannot happen for a state that is written to disk every step; treated as
            // a failed call rather than a panic.
            Err(e) => return self.input_error(e),
        };
        let args = action_arguments(action).to_string();
        self.decide(
            action.name(),
            action.target().as_deref(),
            &args,
            task_json,
            state_json,
        )
    }

    fn check_write(&self, field: &str, arguments: &Value, input: &GuardInput<'_>) -> GuardDecision {
        if !self.judges("set_field") {
            return GuardDecision::Allow;
        }
        match input.json() {
            // The WIT `check` sees a state write as the action `set_field`.
            Ok((task_json, state_json)) => self.decide(
                "set_field",
                Some(field),
                &arguments.to_string(),
                task_json,
                state_json,
            ),
            Err(e) => self.input_error(e),
        }
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
        Action::LoadContext { item } => json!({"item": item.to_string()}),
        Action::Complete { summary } => json!({"summary": summary}),
        Action::Escalate { reason } | Action::CannotFix { reason } => json!({"reason": reason}),
        Action::Extra { arguments, .. } => arguments.clone(),
    }
}

/// An action result as a 0.1.0 plugin sees it.
pub(super) fn result_to_v0_1(r: v0_3::types::ActionResult) -> v0_1::types::ActionResult {
    use v0_1::types::ActionResult as Old;
    use v0_3::types::ActionResult as New;
    match r {
        New::Success => Old::Success,
        New::Failure => Old::Failure,
        New::Partial => Old::Partial,
        New::Skipped => Old::Skipped,
    }
}

/// A fact as a 0.1.0 plugin sees it.
fn fact_to_v0_1(f: v0_3::types::Fact) -> v0_1::types::Fact {
    use v0_1::types::FactCategory as Old;
    use v0_3::types::FactCategory as New;
    v0_1::types::Fact {
        category: match f.category {
            New::CodeStructure => Old::CodeStructure,
            New::Inference => Old::Inference,
            New::Pattern => Old::Pattern,
            New::Verification => Old::Verification,
            New::Error => Old::Error,
        },
        statement: f.statement,
        confidence: f.confidence,
        source: f.source,
    }
}

/// A 0.1.0 plugin's fact in the current types.
pub(super) fn fact_from_v0_1(f: v0_1::types::Fact) -> v0_3::types::Fact {
    use v0_1::types::FactCategory as Old;
    use v0_3::types::FactCategory as New;
    v0_3::types::Fact {
        category: match f.category {
            Old::CodeStructure => New::CodeStructure,
            Old::Inference => New::Inference,
            Old::Pattern => New::Pattern,
            Old::Verification => New::Verification,
            Old::Error => New::Error,
        },
        statement: f.statement,
        confidence: f.confidence,
        source: f.source,
    }
}
