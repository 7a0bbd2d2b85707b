//! The report tools as the executor offers them ([`ExtraTool`]s): each call is checked
//! and applied to a working copy of the sprint state, so the model gets its
//! `VALIDATION_ERROR: ...` (or confirmation) at once, and the accepted calls are taken
//! into the sprint state only from the role task's recorded log ([`apply_recorded`]).
//!
//! The log is the single source: a call whose step was not recorded (a kill between the
//! call and the record) runs again when the step does, and is never applied twice. So
//! that the log holds exactly what was applied, a call whose arguments the log would
//! shorten (a string over [`MAX_LOGGED_STRING_CHARS`] characters, or more than
//! [`MAX_LOGGED_PARAMETERS_BYTES`] of JSON) is refused with a message to split it.

use std::sync::{Arc, Mutex};

use agentforge_core::model::ToolSpec;
use agentforge_core::state::{
    ActionRecord, ActionResult, MAX_LOGGED_PARAMETERS_BYTES, MAX_LOGGED_STRING_CHARS,
};
use agentforge_store::tools::{ExtraTool, ToolOutcome};
use agentforge_value_loop::manage_task::{self, ManageTask};
use agentforge_value_loop::reports::{self, Applied, Caller, Report, RootCause};
use agentforge_value_loop::{Limits, SprintState};
use serde_json::Value;

/// `manage_task`, the plan-changing tool (not a report, same handling).
pub const MANAGE_TASK: &str = "manage_task";

/// What accepted calls produced besides the state change (for the next role's brief).
#[derive(Debug, Clone, Default)]
pub struct Produced {
    /// Root causes from `report_triage`, in priority order.
    pub triage: Vec<RootCause>,
    /// Research briefs from `report_research`.
    pub research: Vec<reports::Research>,
    /// Accepted calls, by tool name.
    pub calls: Vec<String>,
}

/// Checks and applies one call to `state`; `Err` is the message for the model (the state
/// is unchanged then).
pub fn apply_call(
    tool: &str,
    args: &Value,
    caller: &Caller,
    state: &mut SprintState,
    limits: &Limits,
    produced: &mut Produced,
) -> Result<String, String> {
    check_loggable(args)?;
    let message = if tool == agentforge_value_loop::features::REPORT_FEATURE_LIST {
        // The feature-list policy's initializer: checked as `features.json` is.
        agentforge_value_loop::features::apply_report(args, state)?
    } else if tool == MANAGE_TASK {
        let mut args = args.clone();
        // `last` is for the host (it ends the role task), not a change to the plan.
        last_plan_change(&args)?;
        if let Some(m) = args.as_object_mut() {
            m.remove(LAST);
        }
        let call: ManageTask = serde_json::from_value(args)
            .map_err(|e| format!("VALIDATION_ERROR: manage_task: {e}"))?;
        let done = manage_task::apply(call, caller.source, state, limits)?;
        // The role's brief is the plan as it was when the task started: the answer says
        // what the plan is now, so a planner adding many tasks keeps track of them.
        let open: Vec<&str> = state
            .tasks
            .iter()
            .filter(|t| t.is_open())
            .map(|t| t.id.as_str())
            .collect();
        format!(
            "{done}\nopen tasks now ({}): {}",
            open.len(),
            open.join(", ")
        )
    } else {
        let report =
            Report::parse(tool, args.clone()).map_err(|e| format!("VALIDATION_ERROR: {e}"))?;
        match reports::apply(report, caller, state, limits)? {
            Applied::Done(m) => m,
            Applied::Triage(causes) => {
                let n = causes.len();
                produced.triage = causes;
                format!("triage recorded: {n} root cause(s); the first is fixed first")
            }
            Applied::Research(r) => {
                produced.research.push(r);
                "research recorded; the fixer will see it".to_string()
            }
        }
    };
    produced.calls.push(tool.to_string());
    Ok(message)
}

/// `manage_task`'s `last` argument: `true` says this is the role's last plan change, so
/// an accepted call ends a role task that has no other report to make (the planner's
/// plan gate), sparing a step whose only act is `complete`.
const LAST: &str = "last";

/// Whether a `manage_task` call says it is the last plan change (`last: true`).
fn last_plan_change(args: &Value) -> Result<bool, String> {
    match args.get(LAST) {
        None | Some(Value::Bool(false)) | Some(Value::Null) => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(other) => Err(format!(
            "VALIDATION_ERROR: manage_task: `last` must be true or false, not {other}"
        )),
    }
}

/// Refuses arguments the action log would shorten (see the module docs).
fn check_loggable(args: &Value) -> Result<(), String> {
    fn longest(v: &Value) -> usize {
        match v {
            Value::String(s) => s.chars().count(),
            Value::Array(a) => a.iter().map(longest).max().unwrap_or(0),
            Value::Object(m) => m
                .iter()
                .map(|(k, x)| longest(x).max(k.chars().count()))
                .max()
                .unwrap_or(0),
            _ => 0,
        }
    }
    let n = longest(args);
    if n > MAX_LOGGED_STRING_CHARS {
        return Err(format!(
            "VALIDATION_ERROR: a text of {n} characters is longer than {MAX_LOGGED_STRING_CHARS}; keep each field shorter (put long material in a file and name it)"
        ));
    }
    let bytes = args.to_string().len();
    if bytes > MAX_LOGGED_PARAMETERS_BYTES {
        return Err(format!(
            "VALIDATION_ERROR: the arguments are {bytes} bytes of JSON, more than {MAX_LOGGED_PARAMETERS_BYTES}; split the report into several calls"
        ));
    }
    Ok(())
}

/// Applies the accepted report calls of a role task's recorded steps, in step order, to
/// `state`: the one way a role's reports reach the sprint.
pub fn apply_recorded(
    records: &[ActionRecord],
    tools: &[&str],
    caller: &Caller,
    state: &mut SprintState,
    limits: &Limits,
) -> Produced {
    let mut produced = Produced::default();
    for r in records {
        if r.result != ActionResult::Success || !tools.contains(&r.action.as_str()) {
            continue;
        }
        // Deterministic: the same call on the same state is accepted again. A call the
        // state now refuses (it cannot happen, the working copy saw the same calls) is
        // left out rather than half-applied.
        let _ = apply_call(
            &r.action,
            &r.parameters,
            caller,
            state,
            limits,
            &mut produced,
        );
    }
    produced
}

/// What a role task is offered besides its task type's actions, kept in its folder
/// ([`ROLE_TOOLS_FILE`]) so that `agentforge context <task>` shows the prompt the
/// runner sends, report tools included.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RoleTools {
    /// The report tools.
    pub tools: Vec<String>,
    /// The one whose accepted call ends the task.
    pub finish_with: Option<String>,
    /// The provenance the host gives its reports.
    pub caller: Caller,
}

/// The file in a role task's folder that holds its [`RoleTools`].
pub const ROLE_TOOLS_FILE: &str = "role-tools.json";

impl RoleTools {
    /// Reads a task folder's record; `None` for a task that is not a role task.
    pub fn load(task_dir: &std::path::Path) -> Option<RoleTools> {
        let text = std::fs::read_to_string(task_dir.join(ROLE_TOOLS_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The tools, answering from `working` (for `context`, any state: nothing is
    /// called).
    pub fn build(&self, limits: &Limits, working: SprintState) -> Vec<Box<dyn ExtraTool>> {
        let names: Vec<&'static str> = self
            .tools
            .iter()
            .filter_map(|t| agentforge_value_loop::tool_specs::tool_spec(t).map(|s| s.name))
            .collect();
        let finish = self.finish_with.as_deref();
        ReportTool::set(&names, finish, &self.caller, limits, working)
    }
}

/// One report tool offered to a role task.
pub struct ReportTool {
    spec: ToolSpec,
    /// An accepted call ends the role task (its one job is this report).
    completes: bool,
    /// `manage_task` in a role task whose one tool it is: an accepted call marked
    /// `last` ends it.
    completes_on_last: bool,
    caller: Caller,
    limits: Limits,
    working: Arc<Mutex<SprintState>>,
}

impl ReportTool {
    /// The tools `names` (an accepted call of `finish_with` ends the task), sharing one
    /// working copy of the sprint state (the state
    /// before the role task plus the calls it already recorded).
    pub fn set(
        names: &[&'static str],
        finish_with: Option<&str>,
        caller: &Caller,
        limits: &Limits,
        working: SprintState,
    ) -> Vec<Box<dyn ExtraTool>> {
        let working = Arc::new(Mutex::new(working));
        names
            .iter()
            .filter_map(|n| {
                let spec = agentforge_value_loop::tool_specs::tool_spec(n)?;
                Some(Box::new(ReportTool {
                    spec: ToolSpec {
                        name: spec.name.to_string(),
                        description: spec.description.to_string(),
                        input_schema: spec.parameters,
                    },
                    completes: finish_with == Some(*n),
                    // Only where the plan change is the task's one job (a plan gate);
                    // a course correction still owes its report.
                    completes_on_last: names == [MANAGE_TASK] && finish_with.is_none(),
                    caller: caller.clone(),
                    limits: limits.clone(),
                    working: working.clone(),
                }) as Box<dyn ExtraTool>)
            })
            .collect()
    }
}

impl ExtraTool for ReportTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn offered_in(&self, _phase: &str) -> bool {
        true
    }

    fn check_arguments(&self, args: &Value) -> Result<(), String> {
        if !args.is_object() {
            return Err(format!(
                "{}: the arguments must be an object",
                self.spec.name
            ));
        }
        check_loggable(args)
    }

    fn invoke(&self, args: &Value) -> Result<ToolOutcome, String> {
        let mut state = self
            .working
            .lock()
            .map_err(|_| "the sprint state is unavailable (an earlier call panicked)")?;
        let mut produced = Produced::default();
        let output = apply_call(
            &self.spec.name,
            args,
            &self.caller,
            &mut state,
            &self.limits,
            &mut produced,
        )?;
        let ends =
            self.completes || (self.completes_on_last && last_plan_change(args).unwrap_or(false));
        Ok(ToolOutcome {
            result: ActionResult::Success,
            completes_task: ends.then(|| output.clone()),
            output,
        })
    }

    fn source(&self) -> String {
        "the value loop (report tool)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_core::state::TaskState;
    use agentforge_core::task::TaskSpec;
    use agentforge_value_loop::state::TaskSource;
    use serde_json::json;

    fn caller() -> Caller {
        Caller {
            iteration: 0,
            task: None,
            source: TaskSource::Plan,
            gate: Some("plan".into()),
        }
    }

    fn record(step: u64, action: &str, parameters: Value, result: ActionResult) -> ActionRecord {
        let spec = TaskSpec::parse("id: t\ntask_type: planner\ngoal: g\n", "test").unwrap();
        ActionRecord {
            step,
            phase: "review".into(),
            action: action.into(),
            target: None,
            parameters,
            result,
            summary: String::new(),
            error: None,
            duration_ms: 0,
            timestamp: String::new(),
            context_tokens: 0,
            usage: Default::default(),
            cost_usd_micros: None,
            output_artifact: None,
            output_hash: None,
            output_len: None,
            loop_detection: None,
            file_hashes: Default::default(),
            trajectory: None,
            traces: Vec::new(),
            state_after: TaskState::initial(&spec, "review", 10),
        }
    }

    fn add(id: &str, description: &str) -> Value {
        json!({"action": "add", "task_id": id, "description": description,
               "value": "v", "acceptance": "a"})
    }

    #[test]
    fn only_accepted_calls_of_the_jobs_tools_reach_the_state_in_step_order() {
        let records = vec![
            record(
                1,
                MANAGE_TASK,
                add("T1", "parse the input file"),
                ActionResult::Success,
            ),
            // Refused when it ran (recorded as a failure): never applied.
            record(
                2,
                MANAGE_TASK,
                add("T9", "render the report"),
                ActionResult::Failure,
            ),
            // Not one of this job's tools.
            record(3, "report_vrc", json!({}), ActionResult::Success),
            record(
                4,
                MANAGE_TASK,
                add("T2", "write the export command"),
                ActionResult::Success,
            ),
        ];
        let mut s = SprintState::new("s");
        let produced = apply_recorded(
            &records,
            &[MANAGE_TASK],
            &caller(),
            &mut s,
            &Limits::default(),
        );
        let ids: Vec<&str> = s.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["T1", "T2"]);
        assert_eq!(produced.calls, [MANAGE_TASK, MANAGE_TASK]);
        // Applying the same log again to the same state gives the same state: a resumed
        // runner computes exactly what the interrupted one would have.
        let mut again = SprintState::new("s");
        apply_recorded(
            &records,
            &[MANAGE_TASK],
            &caller(),
            &mut again,
            &Limits::default(),
        );
        assert_eq!(again, s);
    }

    #[test]
    fn a_call_the_log_would_shorten_is_refused() {
        let mut s = SprintState::new("s");
        let long = "x".repeat(MAX_LOGGED_STRING_CHARS + 1);
        let err = apply_call(
            MANAGE_TASK,
            &add("T1", &long),
            &caller(),
            &mut s,
            &Limits::default(),
            &mut Produced::default(),
        )
        .unwrap_err();
        assert!(err.starts_with("VALIDATION_ERROR:"), "{err}");
        assert!(err.contains("longer than"), "{err}");
        assert!(s.tasks.is_empty());
    }

    #[test]
    fn the_tool_answers_from_its_working_copy_and_only_its_report_ends_the_task() {
        let tools = ReportTool::set(
            &[MANAGE_TASK, "report_critique"],
            Some("report_critique"),
            &caller(),
            &Limits::default(),
            SprintState::new("s"),
        );
        assert_eq!(tools.len(), 2);
        let manage = &tools[0];
        let ok = manage.invoke(&add("T1", "parse the input file")).unwrap();
        assert_eq!(ok.result, ActionResult::Success);
        assert_eq!(ok.completes_task, None);
        // The working copy saw T1: a near-duplicate is refused with the reason.
        let dup = manage
            .invoke(&add("T2", "parse the input file"))
            .unwrap_err();
        assert!(dup.starts_with("VALIDATION_ERROR:"), "{dup}");
        let bad = tools[1].invoke(&json!({"verdict": "MAYBE"})).unwrap_err();
        assert!(bad.contains("VALIDATION_ERROR"), "{bad}");
        let done = tools[1]
            .invoke(&json!({"verdict": "APPROVE", "reasons": ["sound"], "summary": "ok"}))
            .unwrap();
        assert!(done.completes_task.is_some());
    }

    #[test]
    fn the_last_plan_change_ends_a_plan_task_only_when_accepted() {
        let last = |id: &str, d: &str| {
            let mut a = add(id, d);
            a["last"] = json!(true);
            a
        };
        let plan = ReportTool::set(
            &[MANAGE_TASK],
            None,
            &caller(),
            &Limits::default(),
            SprintState::new("s"),
        );
        let first = plan[0].invoke(&add("T1", "parse the input file")).unwrap();
        assert_eq!(first.completes_task, None);
        // Refused (a near-duplicate): the task goes on, the model reads why.
        let dup = plan[0]
            .invoke(&last("T2", "parse the input file"))
            .unwrap_err();
        assert!(dup.starts_with("VALIDATION_ERROR:"), "{dup}");
        let bad = plan[0]
            .invoke(&json!({"action": "remove", "task_id": "T1", "last": "yes"}))
            .unwrap_err();
        assert!(bad.contains("`last` must be true or false"), "{bad}");
        let done = plan[0].invoke(&last("T2", "render the report")).unwrap();
        assert!(done.completes_task.is_some(), "{done:?}");
        // The recorded call (with `last`) applies like any other.
        let mut s = SprintState::new("s");
        apply_call(
            MANAGE_TASK,
            &last("T1", "render the report"),
            &caller(),
            &mut s,
            &Limits::default(),
            &mut Produced::default(),
        )
        .unwrap();
        assert_eq!(s.tasks.len(), 1);
        // A course correction owes its report: `last` does not end it.
        let cc = ReportTool::set(
            &["report_course_correction", MANAGE_TASK],
            None,
            &caller(),
            &Limits::default(),
            SprintState::new("s"),
        );
        let kept = cc[1].invoke(&last("T1", "render the report")).unwrap();
        assert_eq!(kept.completes_task, None);
    }
}
