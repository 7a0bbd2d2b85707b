//! The report tools (seed 002 section 15): how each role tells the loop what it found,
//! as typed calls checked at the boundary (unknown fields, out-of-range values and ids
//! that do not exist are refused with a message for the model), then applied to the
//! sprint state. Provenance (which role, which task, which iteration) comes from the
//! host's [`Caller`], never from the model's arguments.
//!
//! What a report may change is limited on purpose: a VRC's gaps do not become tasks
//! (the seed's authors saw VRC gap tasks compete with the plan; only the exit gate turns
//! gaps into tasks), and no report counts as progress (that is measured,
//! [`crate::ValueMeasure`]).

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::manage_task::{apply as manage, ManageTask};
use crate::state::{
    Block, Gap, Recommendation, SprintState, TaskSource, TaskStatus, VerificationStatus,
    VrcSnapshot,
};

/// Who is reporting, set by the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The loop iteration.
    pub iteration: u32,
    /// The task a builder was given (builders may complete only that one).
    pub task: Option<String>,
    /// The source tasks created by this role get.
    pub source: TaskSource,
}

/// `report_task_complete`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskComplete {
    /// The task.
    pub task_id: String,
    /// New files.
    pub files_created: Vec<String>,
    /// Changed files.
    pub files_modified: Vec<String>,
    /// How the builder checked the value (kept for the report; not a measure).
    #[serde(default)]
    pub value_verified: String,
    /// Notes.
    #[serde(default)]
    pub notes: String,
}

/// Severity of a finding or gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Breaks the value.
    Critical,
    /// Blocks a user.
    Blocking,
    /// Works, worse.
    Degraded,
    /// Cosmetic.
    Polish,
}

impl Severity {
    fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Blocking => "blocking",
            Severity::Degraded => "degraded",
            Severity::Polish => "polish",
        }
    }
}

/// `report_eval_finding`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalFinding {
    /// How bad.
    pub severity: Severity,
    /// What is wrong.
    pub description: String,
    /// How it affects the user.
    pub user_impact: String,
    /// What should be done.
    #[serde(default)]
    pub suggested_fix: String,
    /// Error text or what was seen.
    #[serde(default)]
    pub evidence: String,
}

/// A gap in `report_vrc`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VrcGap {
    /// Its id.
    pub id: String,
    /// What is missing.
    pub description: String,
    /// How bad.
    pub severity: Severity,
    /// A task that would close it.
    #[serde(default)]
    pub suggested_task: Option<String>,
}

/// `report_vrc`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VrcReport {
    /// 0.0 to 1.0.
    pub value_score: f64,
    /// Deliverables verified.
    pub deliverables_verified: u32,
    /// Deliverables in the vision.
    pub deliverables_total: u32,
    /// Deliverables blocked.
    #[serde(default)]
    pub deliverables_blocked: u32,
    /// What is missing.
    #[serde(default)]
    pub gaps: Vec<VrcGap>,
    /// The recommendation.
    pub recommendation: Recommendation,
    /// One paragraph.
    pub summary: String,
}

/// One root cause in `report_triage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootCause {
    /// The cause.
    pub cause: String,
    /// Failing verification ids it explains.
    pub affected_tests: Vec<String>,
    /// Lower first.
    #[serde(default = "default_priority")]
    pub priority: u32,
    /// What to try.
    #[serde(default)]
    pub fix_suggestion: String,
}

fn default_priority() -> u32 {
    99
}

/// `report_triage`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Triage {
    /// The causes.
    pub root_causes: Vec<RootCause>,
}

/// The kinds of course correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionKind {
    /// Reorder or split tasks (done with manage_task in the same session).
    Restructure,
    /// Scope cut (tasks descoped with manage_task).
    Descope,
    /// Tasks added.
    NewTasks,
    /// The verifications are wrong: generate them again.
    RegenerateTests,
    /// A person is needed: the loop stops.
    Escalate,
}

/// `report_course_correction`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CourseCorrection {
    /// The kind.
    pub action: CorrectionKind,
    /// Why.
    pub reason: String,
}

/// `request_human_action`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HumanAction {
    /// What the person needs to do.
    pub action: String,
    /// Step by step.
    pub instructions: String,
    /// A command that succeeds once it is done.
    #[serde(default)]
    pub verification_command: Option<String>,
    /// The task it blocks.
    pub blocked_task_id: String,
}

/// `report_research`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Research {
    /// What was researched.
    pub topic: String,
    /// What to do differently.
    pub findings: String,
    /// Where from.
    pub sources: Vec<String>,
    /// Verification ids it applies to.
    #[serde(default)]
    pub affected_verifications: Vec<String>,
}

/// A report tool call, by tool name.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// `report_task_complete`.
    TaskComplete(TaskComplete),
    /// `report_eval_finding`.
    EvalFinding(EvalFinding),
    /// `report_vrc`.
    Vrc(VrcReport),
    /// `report_triage`.
    Triage(Triage),
    /// `report_course_correction`.
    CourseCorrection(CourseCorrection),
    /// `request_human_action`.
    HumanAction(HumanAction),
    /// `report_research`.
    Research(Research),
}

/// The report tools' names.
pub const REPORT_TOOLS: &[&str] = &[
    "report_task_complete",
    "report_eval_finding",
    "report_vrc",
    "report_triage",
    "report_course_correction",
    "request_human_action",
    "report_research",
];

impl Report {
    /// Parses a call; the error names the tool and the field, for the model.
    pub fn parse(tool: &str, args: serde_json::Value) -> Result<Report, String> {
        fn typed<T: for<'de> Deserialize<'de>>(
            tool: &str,
            args: serde_json::Value,
        ) -> Result<T, String> {
            serde_json::from_value(args).map_err(|e| format!("{tool}: {e}"))
        }
        Ok(match tool {
            "report_task_complete" => Report::TaskComplete(typed(tool, args)?),
            "report_eval_finding" => Report::EvalFinding(typed(tool, args)?),
            "report_vrc" => Report::Vrc(typed(tool, args)?),
            "report_triage" => Report::Triage(typed(tool, args)?),
            "report_course_correction" => Report::CourseCorrection(typed(tool, args)?),
            "request_human_action" => Report::HumanAction(typed(tool, args)?),
            "report_research" => Report::Research(typed(tool, args)?),
            other => {
                return Err(format!(
                    "unknown report tool `{other}`; the report tools are {}",
                    REPORT_TOOLS.join(", ")
                ))
            }
        })
    }
}

/// What applying a report gave, besides the state change.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// A message for the model.
    Done(String),
    /// The triage, for the fixer's context.
    Triage(Vec<RootCause>),
    /// The research brief, for the fixer's context.
    Research(Research),
}

/// Applies a parsed report. `Err` is `VALIDATION_ERROR: ...` for the model; the state is
/// unchanged then.
pub fn apply(
    report: Report,
    caller: &Caller,
    state: &mut SprintState,
    limits: &Limits,
) -> Result<Applied, String> {
    let invalid = |m: String| format!("VALIDATION_ERROR: {m}");
    match report {
        Report::TaskComplete(r) => {
            if caller.task.as_deref() != Some(r.task_id.as_str()) {
                return Err(invalid(format!(
                    "you were given task {}, so you can complete only that one (not {})",
                    caller.task.as_deref().unwrap_or("none"),
                    r.task_id
                )));
            }
            let t = state
                .task_mut(&r.task_id)
                .ok_or_else(|| invalid(format!("task {} does not exist", r.task_id)))?;
            t.status = TaskStatus::Done;
            t.block = None;
            t.files_changed = r
                .files_created
                .into_iter()
                .chain(r.files_modified)
                .collect();
            t.completion_notes = r.notes;
            state.tasks_since_last_critical_eval += 1;
            Ok(Applied::Done(format!(
                "task {} recorded as complete",
                r.task_id
            )))
        }
        Report::EvalFinding(f) => {
            if matches!(f.severity, Severity::Critical | Severity::Blocking) {
                let id = format!("CE-{}-{}", caller.iteration, state.tasks.len() + 1);
                let call = ManageTask::Add {
                    task_id: id.clone(),
                    description: if f.suggested_fix.is_empty() {
                        f.description.clone()
                    } else {
                        f.suggested_fix.clone()
                    },
                    value: f.user_impact,
                    acceptance: format!("the evaluator no longer finds: {}", f.description),
                    dependencies: vec![],
                    phase: String::new(),
                    files_expected: vec![],
                    prd_section: String::new(),
                };
                let msg = manage(call, caller.source, state, limits)?;
                Ok(Applied::Done(format!(
                    "{} finding: {msg}",
                    f.severity.name()
                )))
            } else {
                Ok(Applied::Done(format!(
                    "{} finding noted (no task for this severity)",
                    f.severity.name()
                )))
            }
        }
        Report::Vrc(r) => {
            if !(0.0..=1.0).contains(&r.value_score) || r.value_score.is_nan() {
                return Err(invalid(format!(
                    "value_score {} is outside 0.0 to 1.0",
                    r.value_score
                )));
            }
            if r.deliverables_verified + r.deliverables_blocked > r.deliverables_total {
                return Err(invalid(format!(
                    "deliverables_verified ({}) + deliverables_blocked ({}) exceed deliverables_total ({})",
                    r.deliverables_verified, r.deliverables_blocked, r.deliverables_total
                )));
            }
            state.vrc_history.push(VrcSnapshot {
                iteration: caller.iteration,
                deliverables_total: r.deliverables_total,
                deliverables_verified: r.deliverables_verified,
                deliverables_blocked: r.deliverables_blocked,
                value_score: r.value_score,
                gaps: r
                    .gaps
                    .into_iter()
                    .map(|g| Gap {
                        id: g.id,
                        description: g.description,
                        severity: g.severity.name().to_string(),
                        suggested_task: g.suggested_task,
                    })
                    .collect(),
                recommendation: r.recommendation,
                summary: r.summary,
                full: false,
                fallback: false,
            });
            Ok(Applied::Done("VRC recorded".into()))
        }
        Report::Triage(t) => {
            if t.root_causes.is_empty() {
                return Err(invalid(
                    "root_causes is empty; group the failing verifications by cause".into(),
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            for rc in &t.root_causes {
                for id in &rc.affected_tests {
                    match state.verification(id) {
                        Some(v) if v.status == VerificationStatus::Failed => {}
                        Some(_) => {
                            return Err(invalid(format!("verification {id} is not failing")))
                        }
                        None => return Err(invalid(format!("no verification {id}"))),
                    }
                    if !seen.insert(id.clone()) {
                        return Err(invalid(format!(
                            "verification {id} is named by two root causes; give each failure one cause"
                        )));
                    }
                }
            }
            let mut causes = t.root_causes;
            causes.sort_by_key(|c| c.priority);
            Ok(Applied::Triage(causes))
        }
        Report::CourseCorrection(c) => {
            match c.action {
                CorrectionKind::Escalate => state.escalated = Some(c.reason.clone()),
                CorrectionKind::RegenerateTests => state.invalidate_verifications(),
                CorrectionKind::Restructure
                | CorrectionKind::Descope
                | CorrectionKind::NewTasks => {}
            }
            // A new plan gets `max_no_progress` iterations to show measured value; the
            // course-correction bound keeps this from repeating without end.
            if c.action != CorrectionKind::Escalate {
                state.iterations_without_progress = 0;
            }
            Ok(Applied::Done(format!(
                "course correction recorded: {:?}",
                c.action
            )))
        }
        Report::HumanAction(h) => {
            let t = state
                .task_mut(&h.blocked_task_id)
                .ok_or_else(|| invalid(format!("task {} does not exist", h.blocked_task_id)))?;
            t.status = TaskStatus::Blocked;
            t.block = Some(Block::HumanAction {
                instructions: format!("{}: {}", h.action, h.instructions),
                verification: h.verification_command,
            });
            Ok(Applied::Done(format!(
                "task {} waits for a person",
                h.blocked_task_id
            )))
        }
        Report::Research(r) => {
            for id in &r.affected_verifications {
                if state.verification(id).is_none() {
                    return Err(invalid(format!("no verification {id}")));
                }
            }
            Ok(Applied::Research(r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{SprintTask, Verification};
    use serde_json::json;

    fn state() -> SprintState {
        let mut s = SprintState::new("s");
        s.tasks.push(SprintTask::new(
            "T1",
            TaskSource::Plan,
            "build the parser",
            "v",
            "a",
        ));
        s.tasks.push(SprintTask::new(
            "T2",
            TaskSource::Plan,
            "render the table",
            "v",
            "a",
        ));
        let mut v = Verification::new("v1", "unit", "false");
        v.status = VerificationStatus::Failed;
        s.verifications.push(v);
        s.verifications
            .push(Verification::new("v2", "unit", "true"));
        s
    }

    fn caller(task: Option<&str>, source: TaskSource) -> Caller {
        Caller {
            iteration: 4,
            task: task.map(str::to_string),
            source,
        }
    }

    fn run(
        s: &mut SprintState,
        tool: &str,
        args: serde_json::Value,
        c: &Caller,
    ) -> Result<Applied, String> {
        apply(Report::parse(tool, args)?, c, s, &Limits::default())
    }

    #[test]
    fn a_builder_completes_only_its_own_task() {
        let mut s = state();
        let c = caller(Some("T1"), TaskSource::Plan);
        let err = run(
            &mut s,
            "report_task_complete",
            json!({"task_id": "T2", "files_created": [], "files_modified": []}),
            &c,
        )
        .unwrap_err();
        assert!(err.contains("given task T1"), "{err}");
        run(
            &mut s,
            "report_task_complete",
            json!({"task_id": "T1", "files_created": ["a.py"], "files_modified": []}),
            &c,
        )
        .unwrap();
        assert_eq!(s.task("T1").unwrap().status, TaskStatus::Done);
        assert_eq!(s.tasks_since_last_critical_eval, 1);
    }

    #[test]
    fn blocking_findings_become_tasks_through_the_guardrails() {
        let mut s = state();
        let c = caller(None, TaskSource::CriticalEval);
        let args = json!({"severity": "blocking", "description": "export crashes on empty files", "user_impact": "no report", "suggested_fix": "handle empty input in export"});
        run(&mut s, "report_eval_finding", args.clone(), &c).unwrap();
        assert_eq!(s.tasks.len(), 3);
        assert_eq!(s.tasks[2].source, TaskSource::CriticalEval);
        // The same finding again is a duplicate.
        let err = run(&mut s, "report_eval_finding", args, &c).unwrap_err();
        assert!(err.contains("duplicate"), "{err}");
        run(
            &mut s,
            "report_eval_finding",
            json!({"severity": "polish", "description": "x", "user_impact": "y"}),
            &c,
        )
        .unwrap();
        assert_eq!(s.tasks.len(), 3);
    }

    #[test]
    fn a_vrc_is_checked_and_its_gaps_are_not_tasks() {
        let mut s = state();
        let c = caller(None, TaskSource::Vrc);
        let err = run(&mut s, "report_vrc", json!({"value_score": 1.4, "deliverables_verified": 1, "deliverables_total": 2, "recommendation": "CONTINUE", "summary": "s"}), &c).unwrap_err();
        assert!(err.contains("1.4"), "{err}");
        let err = run(&mut s, "report_vrc", json!({"value_score": 0.4, "deliverables_verified": 3, "deliverables_total": 2, "recommendation": "CONTINUE", "summary": "s"}), &c).unwrap_err();
        assert!(err.contains("exceed"), "{err}");
        run(&mut s, "report_vrc", json!({"value_score": 0.4, "deliverables_verified": 1, "deliverables_total": 2, "recommendation": "CONTINUE", "summary": "s", "gaps": [{"id": "g1", "description": "no export", "severity": "critical", "suggested_task": "add export"}]}), &c).unwrap();
        assert_eq!(s.vrc_history.len(), 1);
        assert_eq!(s.tasks.len(), 2);
    }

    #[test]
    fn triage_names_failing_verifications_once() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let err = run(
            &mut s,
            "report_triage",
            json!({"root_causes": [{"cause": "c", "affected_tests": ["v2"]}]}),
            &c,
        )
        .unwrap_err();
        assert!(err.contains("v2 is not failing"), "{err}");
        let err = run(&mut s, "report_triage", json!({"root_causes": [{"cause": "c", "affected_tests": ["v1"]}, {"cause": "d", "affected_tests": ["v1"]}]}), &c).unwrap_err();
        assert!(err.contains("two root causes"), "{err}");
        let got = run(
            &mut s,
            "report_triage",
            json!({"root_causes": [{"cause": "c", "affected_tests": ["v1"], "priority": 1}]}),
            &c,
        )
        .unwrap();
        assert!(matches!(got, Applied::Triage(c) if c.len() == 1));
    }

    #[test]
    fn unknown_tools_fields_and_values_are_named() {
        let err = Report::parse("report_vcr", json!({})).unwrap_err();
        assert!(err.contains("report_vrc"), "{err}");
        let err = Report::parse(
            "report_course_correction",
            json!({"action": "pray", "reason": "r"}),
        )
        .unwrap_err();
        assert!(err.contains("pray"), "{err}");
        let err = Report::parse(
            "report_task_complete",
            json!({"task_id": "T1", "files_created": [], "files_modified": [], "source": "plan"}),
        )
        .unwrap_err();
        assert!(err.contains("source"), "{err}");
    }

    #[test]
    fn escalation_stops_and_human_action_blocks() {
        let mut s = state();
        let c = caller(None, TaskSource::CourseCorrection);
        run(&mut s, "request_human_action", json!({"action": "create a token", "instructions": "open settings", "blocked_task_id": "T2"}), &c).unwrap();
        assert!(s.task("T2").unwrap().needs_human());
        run(
            &mut s,
            "report_course_correction",
            json!({"action": "escalate", "reason": "the API is gone"}),
            &c,
        )
        .unwrap();
        assert!(matches!(
            crate::decide(&Limits::default(), &s),
            crate::Decision::Stop(crate::StopReason::Escalated { .. })
        ));
    }
}
