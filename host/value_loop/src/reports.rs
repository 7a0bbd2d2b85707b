//! The report tools (seed 002 section 15): how each role tells the loop what it found,
//! as typed calls checked at the boundary (unknown fields, out-of-range values and ids
//! that do not exist are refused with a message for the model), then applied to the
//! sprint state. Provenance (which role, which task, which iteration, which gate) comes
//! from the host's [`Caller`], never from the model's arguments.
//!
//! The pre-loop reports record what the vision validation, context discovery and the
//! critiques found ([`SprintState::vision_validation`], [`SprintState::discovery`],
//! [`SprintState::critiques`]); whether a gate passes is the host's decision from them.
//! `register_verification` adds one verification at a time, at most
//! [`MAX_VERIFICATIONS`] per sprint; how many generations ran is counted by the host.
//!
//! What a report may change is limited on purpose: a VRC's gaps do not become tasks
//! (the seed's authors saw VRC gap tasks compete with the plan; only the exit gate turns
//! gaps into tasks), and no report counts as progress (that is measured,
//! [`crate::ValueMeasure`]).

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::manage_task::{apply as manage, ManageTask};
use crate::state::{
    Block, CodebaseState, CritiqueRecord, CritiqueVerdict, Discovery, Gap, IssueSeverity,
    Recommendation, Service, SprintState, TaskSource, TaskStatus, Verification, VerificationStatus,
    VisionIssue, VisionValidation, VisionVerdict, VrcSnapshot,
};

/// The most verifications a sprint may have (`register_verification` refuses past it).
pub const MAX_VERIFICATIONS: usize = 50;

/// The longest verification command `register_verification` accepts, in characters.
pub const MAX_VERIFICATION_COMMAND_CHARS: usize = 2000;

/// The longest verification id `register_verification` accepts, in characters (ids are
/// ASCII letters, digits, `_`, `.` and `-`).
pub const MAX_VERIFICATION_ID_CHARS: usize = 64;

/// Who is reporting, set by the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The loop iteration.
    pub iteration: u32,
    /// The task a builder was given (builders may complete only that one).
    pub task: Option<String>,
    /// The source tasks created by this role get.
    pub source: TaskSource,
    /// The gate or review this role runs for (`prd_critique`, `plan_review`...); a
    /// critique is recorded under it. None outside gates.
    pub gate: Option<String>,
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

/// An issue in `report_vision_validation`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportedVisionIssue {
    /// `HARD` or `SOFT`.
    pub severity: IssueSeverity,
    /// What is wrong with the vision.
    pub description: String,
    /// How the vision could be revised.
    #[serde(default)]
    pub suggestion: Option<String>,
}

/// `report_vision_validation`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisionValidationReport {
    /// `PASS` or `NEEDS_REVISION`.
    pub verdict: VisionVerdict,
    /// The issues found (at least one for `NEEDS_REVISION`; none `HARD` for `PASS`).
    pub issues: Vec<ReportedVisionIssue>,
    /// One paragraph.
    pub summary: String,
}

/// A service in `report_discovery`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveredService {
    /// Its name (unique in the sprint).
    pub name: String,
    /// How the host checks it: `http://host[:port]/path` (a GET that must answer 200)
    /// or `tcp://host:port` (the port must accept a connection).
    pub check: String,
}

/// `report_discovery`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryReport {
    /// What the vision asks to deliver.
    pub deliverable: String,
    /// `cli`, `web_app`, `library`, `report`...
    pub project_type: String,
    /// `greenfield` or `existing`.
    pub codebase_state: CodebaseState,
    /// Tools the sprint needs or found.
    pub tools: Vec<String>,
    /// Services the deliverable needs running.
    pub services: Vec<DiscoveredService>,
    /// How the value will be proven.
    pub value_proof: String,
    /// Commands that would prove the value.
    #[serde(default)]
    pub verification_commands: Vec<String>,
}

/// `report_critique`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CritiqueReport {
    /// `APPROVE`, `AMEND`, `DESCOPE` or `REJECT`.
    pub verdict: CritiqueVerdict,
    /// Why (at least one unless `APPROVE`).
    pub reasons: Vec<String>,
    /// Specific changes asked for.
    #[serde(default)]
    pub amendments: Vec<String>,
    /// Task ids to descope (verdict `DESCOPE` only, in a plan review).
    #[serde(default)]
    pub descoped_tasks: Vec<String>,
    /// One paragraph.
    pub summary: String,
}

/// `register_verification`, the QC author's way to add one verification.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterVerification {
    /// A new id: ASCII letters, digits, `_`, `.`, `-`, at most 64.
    pub id: String,
    /// `unit`, `integration`, `value`...
    pub category: String,
    /// One shell line run in the workspace; exit code 0 means it passes.
    pub command: String,
    /// Task ids whose acceptance criteria it proves when it passes.
    pub proves: Vec<String>,
    /// Services or tools it needs.
    #[serde(default)]
    pub requires: Vec<String>,
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
    /// `report_vision_validation`.
    VisionValidation(VisionValidationReport),
    /// `report_discovery`.
    Discovery(DiscoveryReport),
    /// `report_critique`.
    Critique(CritiqueReport),
    /// `register_verification`.
    RegisterVerification(RegisterVerification),
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
    "report_vision_validation",
    "report_discovery",
    "report_critique",
    "register_verification",
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
            "report_vision_validation" => Report::VisionValidation(typed(tool, args)?),
            "report_discovery" => Report::Discovery(typed(tool, args)?),
            "report_critique" => Report::Critique(typed(tool, args)?),
            "register_verification" => Report::RegisterVerification(typed(tool, args)?),
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
        Report::VisionValidation(r) => vision_validation(r, state).map_err(invalid),
        Report::Discovery(r) => discovery(r, state).map_err(invalid),
        Report::Critique(r) => critique(r, caller, state).map_err(invalid),
        Report::RegisterVerification(r) => register_verification(r, state).map_err(invalid),
    }
}

/// Refuses an empty (or blank) text field.
fn required(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("{field} is empty"));
    }
    Ok(())
}

/// Refuses a list with an empty (or blank) entry.
fn no_blank_entries(field: &str, values: &[String]) -> Result<(), String> {
    match values.iter().position(|v| v.trim().is_empty()) {
        Some(i) => Err(format!("{field}[{i}] is empty")),
        None => Ok(()),
    }
}

fn vision_validation(
    r: VisionValidationReport,
    state: &mut SprintState,
) -> Result<Applied, String> {
    required("summary", &r.summary)?;
    for (i, issue) in r.issues.iter().enumerate() {
        required(&format!("issues[{i}].description"), &issue.description)?;
    }
    let hard = r
        .issues
        .iter()
        .filter(|i| i.severity == IssueSeverity::Hard)
        .count();
    match r.verdict {
        VisionVerdict::NeedsRevision if r.issues.is_empty() => {
            return Err(
                "issues is empty but verdict is NEEDS_REVISION; name at least one issue that needs revising"
                    .into(),
            )
        }
        VisionVerdict::Pass if hard > 0 => {
            return Err(format!(
                "verdict is PASS but issues has {hard} HARD issue(s); a HARD issue means verdict NEEDS_REVISION (or make the issue SOFT)"
            ))
        }
        _ => {}
    }
    let soft = r.issues.len() - hard;
    let validation = VisionValidation {
        verdict: r.verdict,
        issues: r
            .issues
            .into_iter()
            .map(|i| VisionIssue {
                severity: i.severity,
                description: i.description,
                suggestion: i.suggestion.filter(|s| !s.trim().is_empty()),
            })
            .collect(),
        summary: r.summary,
    };
    let verdict = match validation.verdict {
        VisionVerdict::Pass => "PASS",
        VisionVerdict::NeedsRevision => "NEEDS_REVISION",
    };
    state.vision_validation = Some(validation);
    Ok(Applied::Done(if hard > 0 {
        format!("vision validation recorded: {verdict}, with {hard} HARD issue(s) and {soft} SOFT; the vision must be revised before the sprint goes on")
    } else {
        format!("vision validation recorded: {verdict}, no HARD issues ({soft} SOFT)")
    }))
}

/// Checks a service's `check`: `http://host[:port][/path]` or `tcp://host:port`.
fn check_service_check(check: &str) -> Result<(), String> {
    fn port(p: &str) -> Result<(), String> {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(()),
            _ => Err(format!("port `{p}` is not a number from 1 to 65535")),
        }
    }
    fn host(h: &str) -> Result<(), String> {
        if h.is_empty() {
            return Err("the host is missing".into());
        }
        let ok = match h.strip_prefix('[').and_then(|v6| v6.strip_suffix(']')) {
            // A bracketed IPv6 address.
            Some(v6) => {
                !v6.is_empty()
                    && v6
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
            }
            None => h
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')),
        };
        if !ok {
            return Err(format!("host `{h}` is not a host name or address"));
        }
        Ok(())
    }
    /// Splits `host:port` (a bracketed IPv6 host keeps its colons).
    fn host_port(authority: &str) -> (&str, Option<&str>) {
        match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => {
                (&authority[..i], Some(&authority[i + 1..]))
            }
            _ => (authority, None),
        }
    }
    if check.chars().any(char::is_whitespace) {
        return Err("it contains whitespace".into());
    }
    if let Some(rest) = check.strip_prefix("http://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let (h, p) = host_port(authority);
        host(h)?;
        if let Some(p) = p {
            port(p)?;
        }
        Ok(())
    } else if let Some(rest) = check.strip_prefix("tcp://") {
        let (h, p) = host_port(rest);
        host(h)?;
        match p {
            Some(p) => port(p),
            None => Err("a tcp check needs a port: tcp://host:port".into()),
        }
    } else {
        Err("it must start with http:// (an HTTP GET that answers 200) or tcp:// (a port that accepts a connection, tcp://host:port)".into())
    }
}

fn discovery(r: DiscoveryReport, state: &mut SprintState) -> Result<Applied, String> {
    required("deliverable", &r.deliverable)?;
    required("project_type", &r.project_type)?;
    required("value_proof", &r.value_proof)?;
    no_blank_entries("tools", &r.tools)?;
    no_blank_entries("verification_commands", &r.verification_commands)?;
    let mut names = std::collections::BTreeSet::new();
    for (i, svc) in r.services.iter().enumerate() {
        required(&format!("services[{i}].name"), &svc.name)?;
        if !names.insert(svc.name.as_str()) {
            return Err(format!(
                "services[{i}].name `{}` is listed twice; give each service one entry",
                svc.name
            ));
        }
        check_service_check(&svc.check).map_err(|e| {
            format!(
                "services[{i}].check `{}` is not a health check: {e}",
                svc.check
            )
        })?;
    }
    let mut added = Vec::new();
    let mut known = Vec::new();
    for svc in &r.services {
        if state.services.iter().any(|s| s.name == svc.name) {
            known.push(svc.name.clone());
        } else {
            state.services.push(Service {
                name: svc.name.clone(),
                check: svc.check.clone(),
                healthy: false,
            });
            added.push(svc.name.clone());
        }
    }
    state.discovery = Some(Discovery {
        deliverable: r.deliverable,
        project_type: r.project_type,
        codebase_state: r.codebase_state,
        tools: r.tools,
        services: r.services.into_iter().map(|s| s.name).collect(),
        value_proof: r.value_proof,
        verification_commands: r.verification_commands,
    });
    let mut msg = String::from("discovery recorded");
    if !added.is_empty() {
        msg.push_str(&format!("; services added: {}", added.join(", ")));
    }
    if !known.is_empty() {
        msg.push_str(&format!(
            "; services already known (kept as they were): {}",
            known.join(", ")
        ));
    }
    Ok(Applied::Done(msg))
}

fn critique(
    r: CritiqueReport,
    caller: &Caller,
    state: &mut SprintState,
) -> Result<Applied, String> {
    let verdict = match r.verdict {
        CritiqueVerdict::Approve => "APPROVE",
        CritiqueVerdict::Amend => "AMEND",
        CritiqueVerdict::Descope => "DESCOPE",
        CritiqueVerdict::Reject => "REJECT",
    };
    required("summary", &r.summary)?;
    no_blank_entries("reasons", &r.reasons)?;
    no_blank_entries("amendments", &r.amendments)?;
    if r.verdict != CritiqueVerdict::Approve && r.reasons.is_empty() {
        return Err(format!(
            "reasons is empty but verdict is {verdict}; give at least one reason"
        ));
    }
    if !r.descoped_tasks.is_empty() && r.verdict != CritiqueVerdict::Descope {
        return Err(format!(
            "descoped_tasks is for verdict DESCOPE only (the verdict is {verdict})"
        ));
    }
    let mut descoped: Vec<String> = Vec::new();
    for id in &r.descoped_tasks {
        match state.task(id) {
            None => {
                return Err(format!(
                    "descoped_tasks names task `{id}`, which does not exist"
                ))
            }
            Some(t) if t.status == TaskStatus::Done => {
                return Err(format!(
                "descoped_tasks names task `{id}`, which is done; only open tasks can be descoped"
            ))
            }
            Some(_) => {
                if !descoped.contains(id) {
                    descoped.push(id.clone());
                }
            }
        }
    }
    // An open task that depends on a descoped one could never start.
    for id in &descoped {
        let stranded: Vec<&str> = state
            .tasks
            .iter()
            .filter(|t| t.is_open() && t.dependencies.contains(id) && !descoped.contains(&t.id))
            .map(|t| t.id.as_str())
            .collect();
        if !stranded.is_empty() {
            return Err(format!(
                "descoped_tasks names task `{id}`, but open tasks {} depend on it; descope them too or keep {id}",
                stranded.join(", ")
            ));
        }
    }
    for id in &descoped {
        let t = state.task_mut(id).expect("checked above");
        t.status = TaskStatus::Descoped;
        t.block = None;
    }
    state.critiques.push(CritiqueRecord {
        gate: caller.gate.clone(),
        iteration: caller.iteration,
        verdict: r.verdict,
        reasons: r.reasons,
        amendments: r.amendments,
        descoped_tasks: descoped.clone(),
        summary: r.summary,
    });
    let mut msg = format!("critique recorded: {verdict}");
    if let Some(gate) = &caller.gate {
        msg.push_str(&format!(" (gate {gate})"));
    }
    if !descoped.is_empty() {
        msg.push_str(&format!("; tasks descoped: {}", descoped.join(", ")));
    }
    Ok(Applied::Done(msg))
}

fn register_verification(
    r: RegisterVerification,
    state: &mut SprintState,
) -> Result<Applied, String> {
    if state.verifications.len() >= MAX_VERIFICATIONS {
        return Err(format!(
            "the sprint already has {} verifications, the most it may have; not registering id `{}`",
            state.verifications.len(),
            r.id
        ));
    }
    let id_ok = !r.id.is_empty()
        && r.id.chars().count() <= MAX_VERIFICATION_ID_CHARS
        && r.id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !id_ok {
        return Err(format!(
            "id `{}` must be 1 to {MAX_VERIFICATION_ID_CHARS} characters of A-Z, a-z, 0-9, _, . and -",
            r.id
        ));
    }
    if state.verification(&r.id).is_some() {
        return Err(format!(
            "id `{}` is already registered; give the new verification another id",
            r.id
        ));
    }
    required("category", &r.category)?;
    required("command", &r.command)?;
    if r.command.contains(['\n', '\r']) {
        return Err(
            "command spans several lines; give one shell line (put a longer check in a script and run it)"
                .into(),
        );
    }
    let chars = r.command.chars().count();
    if chars > MAX_VERIFICATION_COMMAND_CHARS {
        return Err(format!(
            "command is {chars} characters; at most {MAX_VERIFICATION_COMMAND_CHARS} (put a longer check in a script and run it)"
        ));
    }
    let mut proves: Vec<String> = Vec::new();
    for id in &r.proves {
        if state.task(id).is_none() {
            let mut ids: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
            ids.sort();
            ids.truncate(20);
            return Err(format!(
                "proves names task `{id}`, which does not exist. Existing task ids: {}",
                ids.join(", ")
            ));
        }
        if !proves.contains(id) {
            proves.push(id.clone());
        }
    }
    no_blank_entries("requires", &r.requires)?;
    let mut v = Verification::new(&r.id, r.category.trim(), r.command.trim());
    v.proves = proves;
    v.requires = r.requires;
    state.verifications.push(v);
    state
        .gates_passed
        .insert("verifications_generated".to_string());
    Ok(Applied::Done(format!(
        "verification {} registered ({} of at most {MAX_VERIFICATIONS})",
        r.id,
        state.verifications.len()
    )))
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
            gate: None,
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

    /// A refused call: `VALIDATION_ERROR` naming `field`, and the state untouched.
    fn refused(s: &mut SprintState, tool: &str, args: serde_json::Value, c: &Caller, field: &str) {
        let before = s.clone();
        let err = run(s, tool, args.clone(), c).unwrap_err();
        assert!(err.starts_with("VALIDATION_ERROR: "), "{args}: {err}");
        assert!(err.contains(field), "{args}: `{field}` not named in {err}");
        assert_eq!(*s, before, "{args}: a refused call changed the state");
    }

    fn done_message(a: Applied) -> String {
        match a {
            Applied::Done(m) => m,
            other => panic!("not a message: {other:?}"),
        }
    }

    #[test]
    fn vision_validation_is_recorded_and_says_whether_hard_issues_exist() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let msg = done_message(
            run(&mut s, "report_vision_validation", json!({"verdict": "PASS", "issues": [{"severity": "SOFT", "description": "the metric is vague", "suggestion": "name a number"}], "summary": "sound"}), &c).unwrap(),
        );
        assert!(msg.contains("no HARD issues"), "{msg}");
        let v = s.vision_validation.clone().unwrap();
        assert_eq!(v.verdict, VisionVerdict::Pass);
        assert_eq!(v.issues[0].suggestion.as_deref(), Some("name a number"));
        assert!(!v.has_hard_issues());
        // The latest replaces the previous one.
        let msg = done_message(
            run(&mut s, "report_vision_validation", json!({"verdict": "NEEDS_REVISION", "issues": [{"severity": "HARD", "description": "the goal is an activity, not an outcome"}, {"severity": "SOFT", "description": "no user named"}], "summary": "revise"}), &c).unwrap(),
        );
        assert!(msg.contains("1 HARD issue"), "{msg}");
        let v = s.vision_validation.clone().unwrap();
        assert_eq!(v.verdict, VisionVerdict::NeedsRevision);
        assert_eq!(v.issues.len(), 2);
        assert!(v.has_hard_issues());
    }

    #[test]
    fn vision_validation_refusals_name_the_field() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let tool = "report_vision_validation";
        refused(
            &mut s,
            tool,
            json!({"verdict": "NEEDS_REVISION", "issues": [], "summary": "s"}),
            &c,
            "issues",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "PASS", "issues": [{"severity": "HARD", "description": "d"}], "summary": "s"}),
            &c,
            "issues",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "PASS", "issues": [], "summary": " "}),
            &c,
            "summary",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "NEEDS_REVISION", "issues": [{"severity": "SOFT", "description": ""}], "summary": "s"}),
            &c,
            "issues[0].description",
        );
        let err = Report::parse(
            tool,
            json!({"verdict": "FAIL", "issues": [], "summary": "s"}),
        )
        .unwrap_err();
        assert!(
            err.contains("FAIL") && err.contains("NEEDS_REVISION"),
            "{err}"
        );
        let err = Report::parse(tool, json!({"verdict": "PASS", "summary": "s"})).unwrap_err();
        assert!(err.contains("issues"), "{err}");
        let err = Report::parse(tool, json!({"verdict": "PASS", "issues": [{"severity": "MEDIUM", "description": "d"}], "summary": "s"})).unwrap_err();
        assert!(err.contains("MEDIUM"), "{err}");
    }

    fn discovery_args(services: serde_json::Value) -> serde_json::Value {
        json!({
            "deliverable": "a CLI that totals sales per region",
            "project_type": "cli",
            "codebase_state": "greenfield",
            "tools": ["python3"],
            "services": services,
            "value_proof": "the totals match a hand-checked export",
            "verification_commands": ["python -m report totals tests/sales.csv"]
        })
    }

    #[test]
    fn discovery_is_recorded_and_its_services_are_added_once() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let msg = done_message(
            run(
                &mut s,
                "report_discovery",
                discovery_args(json!([
                    {"name": "api", "check": "http://127.0.0.1:8080/health"},
                    {"name": "db", "check": "tcp://localhost:5432"}
                ])),
                &c,
            )
            .unwrap(),
        );
        assert!(msg.contains("api, db"), "{msg}");
        let d = s.discovery.clone().unwrap();
        assert_eq!(d.codebase_state, CodebaseState::Greenfield);
        assert_eq!(d.services, vec!["api", "db"]);
        assert_eq!(d.verification_commands.len(), 1);
        assert_eq!(
            s.services[0],
            Service {
                name: "api".into(),
                check: "http://127.0.0.1:8080/health".into(),
                healthy: false
            }
        );
        // Again, with one known and one new service: no duplicate by name.
        s.services[0].healthy = true;
        let msg = done_message(
            run(
                &mut s,
                "report_discovery",
                discovery_args(json!([
                    {"name": "api", "check": "http://127.0.0.1:9999/"},
                    {"name": "cache", "check": "tcp://[::1]:6379"}
                ])),
                &c,
            )
            .unwrap(),
        );
        assert!(
            msg.contains("already known") && msg.contains("cache"),
            "{msg}"
        );
        let names: Vec<&str> = s.services.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["api", "db", "cache"]);
        assert!(s.services[0].healthy, "a known service is kept as it was");
        assert_eq!(s.services[0].check, "http://127.0.0.1:8080/health");
        assert_eq!(s.discovery.as_ref().unwrap().services, vec!["api", "cache"]);
        // verification_commands may be left out; no services is fine.
        let mut args = discovery_args(json!([]));
        args.as_object_mut()
            .unwrap()
            .remove("verification_commands");
        run(&mut s, "report_discovery", args, &c).unwrap();
        assert!(s
            .discovery
            .as_ref()
            .unwrap()
            .verification_commands
            .is_empty());
        assert_eq!(s.services.len(), 3);
    }

    #[test]
    fn discovery_refusals_name_the_field() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let tool = "report_discovery";
        for check in [
            "https://example.com/health",
            "ftp://host:21",
            "localhost:8080",
            "http://",
            "http://:8080/x",
            "http://host:0/",
            "http://host:http/",
            "http://ho st/",
            "tcp://localhost",
            "tcp://localhost:70000",
            "tcp://:5432",
            "tcp://a:b:5432",
            "",
        ] {
            refused(
                &mut s,
                tool,
                discovery_args(json!([{"name": "api", "check": check}])),
                &c,
                "services[0].check",
            );
        }
        refused(
            &mut s,
            tool,
            discovery_args(
                json!([{"name": "api", "check": "tcp://h:1"}, {"name": "api", "check": "tcp://h:2"}]),
            ),
            &c,
            "services[1].name",
        );
        refused(
            &mut s,
            tool,
            discovery_args(json!([{"name": " ", "check": "tcp://h:1"}])),
            &c,
            "services[0].name",
        );
        for field in ["deliverable", "project_type", "value_proof"] {
            let mut args = discovery_args(json!([]));
            args[field] = json!("");
            refused(&mut s, tool, args, &c, field);
        }
        let mut args = discovery_args(json!([]));
        args["tools"] = json!(["cargo", ""]);
        refused(&mut s, tool, args, &c, "tools[1]");
        let mut args = discovery_args(json!([]));
        args["codebase_state"] = json!("brownfield");
        let err = Report::parse(tool, args).unwrap_err();
        assert!(
            err.contains("brownfield") && err.contains("existing"),
            "{err}"
        );
        let err = Report::parse(
            tool,
            discovery_args(json!([{"name": "api", "check": "tcp://h:1", "port": 1}])),
        )
        .unwrap_err();
        assert!(err.contains("port"), "{err}");
        assert!(s.discovery.is_none() && s.services.is_empty());
    }

    #[test]
    fn critiques_are_recorded_under_the_callers_gate() {
        let mut s = state();
        let mut c = caller(None, TaskSource::Plan);
        c.iteration = 0;
        c.gate = Some("prd_critique".into());
        let msg = done_message(
            run(
                &mut s,
                "report_critique",
                json!({"verdict": "APPROVE", "reasons": [], "summary": "feasible"}),
                &c,
            )
            .unwrap(),
        );
        assert!(
            msg.contains("APPROVE") && msg.contains("prd_critique"),
            "{msg}"
        );
        c.gate = Some("plan_review".into());
        run(&mut s, "report_critique", json!({"verdict": "AMEND", "reasons": ["T1 has no acceptance test"], "amendments": ["say which command proves T1"], "summary": "close"}), &c).unwrap();
        assert_eq!(s.critiques.len(), 2);
        let r = s.latest_critique("plan_review").unwrap();
        assert_eq!(r.verdict, CritiqueVerdict::Amend);
        assert_eq!(r.amendments, vec!["say which command proves T1"]);
        assert_eq!(r.gate.as_deref(), Some("plan_review"));
        assert_eq!(
            s.latest_critique("prd_critique").unwrap().verdict,
            CritiqueVerdict::Approve
        );
        assert!(s.tasks.iter().all(|t| t.status == TaskStatus::Pending));
    }

    #[test]
    fn a_descope_critique_descopes_the_tasks_it_names() {
        let mut s = state();
        let mut c = caller(None, TaskSource::Plan);
        c.gate = Some("plan_review".into());
        let msg = done_message(
            run(&mut s, "report_critique", json!({"verdict": "DESCOPE", "reasons": ["the table is not in the vision"], "descoped_tasks": ["T2", "T2"], "summary": "cut T2"}), &c).unwrap(),
        );
        assert!(msg.contains("descoped: T2"), "{msg}");
        assert_eq!(s.task("T2").unwrap().status, TaskStatus::Descoped);
        assert_eq!(s.task("T1").unwrap().status, TaskStatus::Pending);
        assert_eq!(s.critiques[0].descoped_tasks, vec!["T2"]);
        // DESCOPE of a PRD (no tasks named) is recorded too.
        run(
            &mut s,
            "report_critique",
            json!({"verdict": "DESCOPE", "reasons": ["too large"], "summary": "cut the export"}),
            &c,
        )
        .unwrap();
        assert_eq!(s.critiques.len(), 2);
    }

    #[test]
    fn critique_refusals_name_the_field() {
        let mut s = state();
        s.tasks
            .push(SprintTask::new("T3", TaskSource::Plan, "export", "v", "a"));
        s.task_mut("T3").unwrap().dependencies = vec!["T1".into()];
        s.tasks.push(SprintTask::new(
            "T4",
            TaskSource::Plan,
            "done already",
            "v",
            "a",
        ));
        s.task_mut("T4").unwrap().status = TaskStatus::Done;
        let mut c = caller(None, TaskSource::Plan);
        c.gate = Some("plan_review".into());
        let tool = "report_critique";
        for verdict in ["AMEND", "DESCOPE", "REJECT"] {
            refused(
                &mut s,
                tool,
                json!({"verdict": verdict, "reasons": [], "summary": "s"}),
                &c,
                "reasons",
            );
        }
        refused(
            &mut s,
            tool,
            json!({"verdict": "REJECT", "reasons": [""], "summary": "s"}),
            &c,
            "reasons[0]",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "APPROVE", "reasons": [], "summary": ""}),
            &c,
            "summary",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "AMEND", "reasons": ["r"], "amendments": [" "], "summary": "s"}),
            &c,
            "amendments[0]",
        );
        // The ids must exist: T2 is not descoped when T9 does not exist.
        refused(
            &mut s,
            tool,
            json!({"verdict": "DESCOPE", "reasons": ["r"], "descoped_tasks": ["T2", "T9"], "summary": "s"}),
            &c,
            "descoped_tasks",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "AMEND", "reasons": ["r"], "descoped_tasks": ["T2"], "summary": "s"}),
            &c,
            "descoped_tasks",
        );
        refused(
            &mut s,
            tool,
            json!({"verdict": "DESCOPE", "reasons": ["r"], "descoped_tasks": ["T4"], "summary": "s"}),
            &c,
            "descoped_tasks",
        );
        // T3 depends on T1: descoping T1 alone would strand it.
        refused(
            &mut s,
            tool,
            json!({"verdict": "DESCOPE", "reasons": ["r"], "descoped_tasks": ["T1"], "summary": "s"}),
            &c,
            "descoped_tasks",
        );
        run(&mut s, tool, json!({"verdict": "DESCOPE", "reasons": ["r"], "descoped_tasks": ["T1", "T3"], "summary": "s"}), &c).unwrap();
        assert_eq!(s.task("T3").unwrap().status, TaskStatus::Descoped);
        let err = Report::parse(
            tool,
            json!({"verdict": "MAYBE", "reasons": [], "summary": "s"}),
        )
        .unwrap_err();
        assert!(err.contains("MAYBE"), "{err}");
    }

    fn verification_args(id: &str) -> serde_json::Value {
        json!({"id": id, "category": "value", "command": "python -m report totals tests/sales.csv", "proves": ["T1"]})
    }

    #[test]
    fn a_registered_verification_is_pending_and_passes_the_gate() {
        let mut s = SprintState::new("s");
        s.tasks
            .push(SprintTask::new("T1", TaskSource::Plan, "d", "v", "a"));
        s.tasks
            .push(SprintTask::new("T2", TaskSource::Plan, "e", "v", "a"));
        s.gates_passed.insert("plan_generated".into());
        s.task_mut("T1").unwrap().status = TaskStatus::Done;
        assert_eq!(
            crate::decide(&Limits::default(), &s),
            crate::Decision::Act {
                action: crate::LoopAction::GenerateQc
            }
        );
        let c = caller(None, TaskSource::Plan);
        let mut args = verification_args("value.totals-1");
        args["proves"] = json!(["T1", "T2", "T1"]);
        args["requires"] = json!(["python3"]);
        let msg = done_message(run(&mut s, "register_verification", args, &c).unwrap());
        assert!(msg.contains("value.totals-1"), "{msg}");
        let v = s.verification("value.totals-1").unwrap();
        assert_eq!(v.status, VerificationStatus::Pending);
        assert_eq!(v.category, "value");
        assert_eq!(v.proves, vec!["T1", "T2"]);
        assert_eq!(v.requires, vec!["python3"]);
        assert!(s.gate_passed("verifications_generated"));
        // The generation is counted by the host when it runs GenerateQc, not per call.
        assert_eq!(s.qc_generations, 0);
        assert_ne!(
            crate::decide(&Limits::default(), &s),
            crate::Decision::Act {
                action: crate::LoopAction::GenerateQc
            }
        );
        // requires may be left out, proves may be empty.
        run(
            &mut s,
            "register_verification",
            json!({"id": "lint", "category": "lint", "command": "ruff check .", "proves": []}),
            &c,
        )
        .unwrap();
        assert_eq!(s.verifications.len(), 2);
    }

    #[test]
    fn register_verification_refusals_name_the_field() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        let tool = "register_verification";
        for bad in ["", "has space", "semi;colon", "a/b", "é", &"x".repeat(65)] {
            refused(&mut s, tool, verification_args(bad), &c, "id");
        }
        run(&mut s, tool, verification_args(&"x".repeat(64)), &c).unwrap();
        let mut s = state();
        refused(
            &mut s,
            tool,
            verification_args("v1"),
            &c,
            "id `v1` is already registered",
        );
        let mut args = verification_args("v3");
        args["category"] = json!(" ");
        refused(&mut s, tool, args, &c, "category");
        for (command, why) in [
            ("", "command is empty"),
            ("  ", "command is empty"),
            ("pytest -q\nrm -rf /", "command spans several lines"),
            ("pytest -q\r", "command spans several lines"),
        ] {
            let mut args = verification_args("v3");
            args["command"] = json!(command);
            refused(&mut s, tool, args, &c, why);
        }
        let mut args = verification_args("v3");
        args["command"] = json!(format!("echo {}", "a".repeat(1996)));
        refused(&mut s, tool, args, &c, "command is 2001 characters");
        let mut args = verification_args("v3");
        args["command"] = json!(format!("echo {}", "a".repeat(1995)));
        run(&mut s, tool, args, &c).unwrap();
        let mut args = verification_args("v4");
        args["proves"] = json!(["T1", "T9"]);
        refused(&mut s, tool, args, &c, "proves names task `T9`");
        let mut args = verification_args("v4");
        args["requires"] = json!([""]);
        refused(&mut s, tool, args, &c, "requires[0]");
        let err = Report::parse(
            tool,
            json!({"id": "v4", "category": "unit", "command": "true"}),
        )
        .unwrap_err();
        assert!(err.contains("proves"), "{err}");
        let err = Report::parse(tool, json!({"id": "v4", "category": "unit", "command": "true", "proves": [], "status": "passed"})).unwrap_err();
        assert!(err.contains("status"), "{err}");
    }

    #[test]
    fn a_sprint_has_at_most_fifty_verifications() {
        let mut s = state();
        let c = caller(None, TaskSource::Plan);
        for i in s.verifications.len()..MAX_VERIFICATIONS {
            run(
                &mut s,
                "register_verification",
                verification_args(&format!("g{i}")),
                &c,
            )
            .unwrap();
        }
        assert_eq!(s.verifications.len(), 50);
        refused(
            &mut s,
            "register_verification",
            verification_args("one-more"),
            &c,
            "50 verifications",
        );
    }
}
