//! The sprint's state (seed 002 section 2): the plan as structured tasks, the
//! verifications with their failure history, the VRC history, the pause and the counters
//! every bound is checked against. One versioned value, written atomically by the host;
//! the rendered views (IMPLEMENTATION_PLAN.md, ...) are made from it, never the other way.
//!
//! Changes that a bound governs go through the methods here, which refuse to pass the
//! bound, so no caller can count past one by accident.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::measure::ValueMeasure;

/// The state file's format version, written by this build. Version 2 added the policy
/// and the feature list ([`SprintState::policy`], [`SprintState::feature_list`]); a
/// version-1 state has neither and loads as a value-policy sprint. A file of a version
/// outside [`MIN_STATE_VERSION`]..=[`STATE_VERSION`] is refused, not guessed (an older
/// build refuses a version-2 state rather than run a feature list as a value sprint).
pub const STATE_VERSION: u32 = 2;

/// The oldest state format version this build reads.
pub const MIN_STATE_VERSION: u32 = 1;

/// Where a sprint is: qualifying its inputs, delivering, or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SprintPhase {
    /// Input check, vision refinement, discovery, PRD critique, plan, plan review.
    #[default]
    PreLoop,
    /// The decision engine runs.
    ValueLoop,
    /// Stopped: delivered, partial or failed (see the iteration log's last record).
    Finished,
}

/// A task's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started (or returned after an incomplete attempt).
    #[default]
    Pending,
    /// A builder is on it.
    InProgress,
    /// Reported complete and committed.
    Done,
    /// Cannot proceed: see its [`Block`].
    Blocked,
    /// Removed from scope by a course correction.
    Descoped,
}

/// Who created a task. Set by the host from the role that called `manage_task`, never
/// by the model. Gap tasks outrank plan tasks ([`TaskSource::priority`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSource {
    /// The reviewed plan.
    Plan,
    /// A gap the exit gate found.
    ExitGate,
    /// A finding of critical evaluation.
    CriticalEval,
    /// A gap a VRC named.
    Vrc,
    /// Added by a course correction.
    CourseCorrection,
}

impl TaskSource {
    /// Execution priority (lower first): exit gate > critical eval > VRC > course
    /// correction > plan, as seed 002's `pick_next_task`.
    pub fn priority(self) -> u8 {
        match self {
            TaskSource::ExitGate => 0,
            TaskSource::CriticalEval => 1,
            TaskSource::Vrc => 2,
            TaskSource::CourseCorrection => 3,
            TaskSource::Plan => 4,
        }
    }

    /// Its name in files and views (`plan`, `exit_gate`...).
    pub fn name(self) -> &'static str {
        match self {
            TaskSource::Plan => "plan",
            TaskSource::ExitGate => "exit_gate",
            TaskSource::CriticalEval => "critical_eval",
            TaskSource::Vrc => "vrc",
            TaskSource::CourseCorrection => "course_correction",
        }
    }

    /// Whether the task was created while the loop ran (counts toward the mid-loop ceiling).
    pub fn is_mid_loop(self) -> bool {
        self != TaskSource::Plan
    }
}

/// Why a task is blocked. A typed kind, so no decision reads the reason's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Block {
    /// Only a person can do this (a token, an account, hardware). The loop pauses.
    HumanAction {
        /// What the person should do, step by step.
        instructions: String,
        /// A shell command that succeeds once it is done (none: trust the person).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verification: Option<String>,
    },
    /// The builder did not report completion within the task-retry bound.
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
    },
    /// Any other reason the builder or a course correction gave.
    Other {
        /// Why.
        reason: String,
    },
}

/// One task of the plan (seed 002 `TaskState`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SprintTask {
    /// Unique id (`T1`, `EG-1-gap2`...).
    pub id: String,
    /// Lifecycle.
    #[serde(default)]
    pub status: TaskStatus,
    /// Who created it.
    pub source: TaskSource,
    /// What to build.
    pub description: String,
    /// Why it matters to the user.
    pub value: String,
    /// How to verify it is done.
    pub acceptance: String,
    /// Traceability, e.g. `§2.1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prd_section: String,
    /// Ids of tasks that must be done first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Grouping: `foundation`, `core`...
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// Files the task is expected to create or change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_expected: Vec<String>,
    /// Attempts that ended without a completion report.
    #[serde(default)]
    pub retry_count: u32,
    /// Set while `status` is `Blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Block>,
    /// Filled from the completion report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
    /// The builder's completion notes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completion_notes: String,
}

impl SprintTask {
    /// A pending task with the required fields.
    pub fn new(
        id: impl Into<String>,
        source: TaskSource,
        description: impl Into<String>,
        value: impl Into<String>,
        acceptance: impl Into<String>,
    ) -> Self {
        SprintTask {
            id: id.into(),
            status: TaskStatus::Pending,
            source,
            description: description.into(),
            value: value.into(),
            acceptance: acceptance.into(),
            prd_section: String::new(),
            dependencies: Vec::new(),
            phase: String::new(),
            files_expected: Vec::new(),
            retry_count: 0,
            block: None,
            files_changed: Vec::new(),
            completion_notes: String::new(),
        }
    }

    /// Still to be done (neither done nor descoped).
    pub fn is_open(&self) -> bool {
        !matches!(self.status, TaskStatus::Done | TaskStatus::Descoped)
    }

    /// Blocked on something only a person can do.
    pub fn needs_human(&self) -> bool {
        self.status == TaskStatus::Blocked && matches!(self.block, Some(Block::HumanAction { .. }))
    }
}

/// A verification's last known result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    /// Not run since it was written or invalidated.
    #[default]
    Pending,
    /// Its last run passed.
    Passed,
    /// Its last run failed.
    Failed,
    /// Cannot run (a missing service or tool); not counted either way.
    Blocked,
}

/// One failed run of a verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// The fix attempt it followed (0: before any fix).
    pub attempt: u32,
    /// The command's exit code (none: killed by the time box).
    pub exit_code: Option<i32>,
    /// Output, capped by the host.
    pub output: String,
    /// What the fixer said it changed (for the next fixer; never used as a measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix_applied: Option<String>,
    /// Files the fix changed, as the host observed them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
}

/// One verification (seed 002 `VerificationState`): a command whose exit code says
/// whether part of the value holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// Unique id.
    pub id: String,
    /// Category found by discovery (`unit`, `integration`, `value`...).
    pub category: String,
    /// Last result.
    #[serde(default)]
    pub status: VerificationStatus,
    /// The command that runs it (in the workspace).
    pub command: String,
    /// Fix attempts spent on it.
    #[serde(default)]
    pub attempts: u32,
    /// Failed runs, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureRecord>,
    /// Services or tools it needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Task ids whose acceptance criteria it proves when it passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proves: Vec<String>,
}

impl Verification {
    /// A pending verification.
    pub fn new(
        id: impl Into<String>,
        category: impl Into<String>,
        command: impl Into<String>,
    ) -> Self {
        Verification {
            id: id.into(),
            category: category.into(),
            status: VerificationStatus::Pending,
            command: command.into(),
            attempts: 0,
            failures: Vec::new(),
            requires: Vec::new(),
            proves: Vec::new(),
        }
    }
}

/// What a VRC recommends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Recommendation {
    /// Keep going.
    Continue,
    /// The approach needs changing.
    CourseCorrect,
    /// Cut scope.
    Descope,
    /// The vision is delivered.
    ShipReady,
}

/// A gap a VRC names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// Its id within the VRC.
    pub id: String,
    /// What is missing.
    pub description: String,
    /// `high`, `medium`, `low`.
    #[serde(default)]
    pub severity: String,
    /// A task that would close it, if the evaluator proposes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_task: Option<String>,
}

/// One Vision Reality Check (the heartbeat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VrcSnapshot {
    /// The iteration it ran in.
    pub iteration: u32,
    /// Deliverables the vision names.
    pub deliverables_total: u32,
    /// Of those, verified.
    pub deliverables_verified: u32,
    /// Of those, blocked.
    pub deliverables_blocked: u32,
    /// The evaluator's score, 0.0 to 1.0 (a claim; [`ValueMeasure`] backs it with
    /// passing verifications before it counts).
    pub value_score: f64,
    /// What is still missing.
    #[serde(default)]
    pub gaps: Vec<Gap>,
    /// The evaluator's recommendation.
    pub recommendation: Recommendation,
    /// One paragraph.
    pub summary: String,
    /// A full VRC (reasoning model) rather than a quick one.
    #[serde(default)]
    pub full: bool,
    /// Synthesised from state because the evaluator did not report.
    #[serde(default)]
    pub fallback: bool,
}

/// The loop is paused for a person (seed 002 section 8.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// The task that needs the person.
    pub task_id: String,
    /// What to do.
    pub instructions: String,
    /// A command that succeeds once it is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<String>,
}

/// A service discovery found, and its health as last measured by the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Its name.
    pub name: String,
    /// `http://127.0.0.1:8080/health` or `tcp://127.0.0.1:5432`.
    pub check: String,
    /// Healthy at the last check.
    #[serde(default)]
    pub healthy: bool,
}

/// The verdict of a vision validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum VisionVerdict {
    /// The vision is sound enough to build on.
    Pass,
    /// The vision must be revised first (at least one issue says why).
    NeedsRevision,
}

/// How much an issue with the vision weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IssueSeverity {
    /// Building on the vision as it is would waste the sprint.
    Hard,
    /// Worth fixing; the sprint can go on without it.
    Soft,
}

/// One issue a vision validation found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisionIssue {
    /// How much it weighs.
    pub severity: IssueSeverity,
    /// What is wrong with the vision.
    pub description: String,
    /// How the vision could be revised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
}

/// The latest vision validation (seed 002 section 4.2), as `report_vision_validation`
/// reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisionValidation {
    /// Pass or needs revision.
    pub verdict: VisionVerdict,
    /// The issues found (at least one when the verdict is `NeedsRevision`).
    #[serde(default)]
    pub issues: Vec<VisionIssue>,
    /// One paragraph.
    pub summary: String,
}

impl VisionValidation {
    /// Whether any issue is `Hard`.
    pub fn has_hard_issues(&self) -> bool {
        self.issues
            .iter()
            .any(|i| i.severity == IssueSeverity::Hard)
    }
}

/// Whether a codebase exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodebaseState {
    /// Nothing exists yet.
    Greenfield,
    /// The sprint changes an existing codebase.
    Existing,
}

/// What context discovery found (seed 002 section 4.3), as `report_discovery` reported
/// it. Its services are also in [`SprintState::services`], where their health is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// What the vision asks to deliver.
    pub deliverable: String,
    /// `cli`, `web_app`, `library`, `report`...
    pub project_type: String,
    /// Greenfield or existing.
    pub codebase_state: CodebaseState,
    /// Tools the sprint needs or found (`cargo`, `python3`, `psql`...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The names of the services discovery listed (their checks are in
    /// [`SprintState::services`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    /// How the value will be proven.
    pub value_proof: String,
    /// Commands discovery thinks prove the value (a hint for the QC author).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verification_commands: Vec<String>,
}

/// The verdict of a critique (of the PRD, or of the plan in a plan review).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CritiqueVerdict {
    /// Achievable as it is.
    Approve,
    /// Needs the amendments listed.
    Amend,
    /// Too large: cut scope (the descoped tasks, in a plan review).
    Descope,
    /// Infeasible: the sprint should not start.
    Reject,
}

/// One critique, as `report_critique` reported it, with the gate it ran for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CritiqueRecord {
    /// The gate it ran for (`prd_critique`, `plan_review`...), from the host's caller
    /// (none: the host named no gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// The iteration it ran in (0 in the pre-loop).
    #[serde(default)]
    pub iteration: u32,
    /// The verdict.
    pub verdict: CritiqueVerdict,
    /// Why (at least one reason unless the verdict is `Approve`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Specific changes asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amendments: Vec<String>,
    /// Task ids it descoped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descoped_tasks: Vec<String>,
    /// One paragraph.
    pub summary: String,
}

/// The whole sprint state (seed 002 `LoopState`), one versioned value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SprintState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The sprint's id (its folder under `.agentforge/sprints/`).
    pub sprint: String,
    /// Pre-loop, loop or finished.
    #[serde(default)]
    pub phase: SprintPhase,
    /// Iterations of the value loop started.
    #[serde(default)]
    pub iteration: u32,
    /// Pre-loop gates passed (`vision_validated`, `plan_generated`, `plan_reviewed`...).
    #[serde(default)]
    pub gates_passed: BTreeSet<String>,
    /// The plan, in creation order.
    #[serde(default)]
    pub tasks: Vec<SprintTask>,
    /// Tasks done since the last critical evaluation.
    #[serde(default)]
    pub tasks_since_last_critical_eval: u32,
    /// The iteration of the last critical evaluation (0: never).
    #[serde(default)]
    pub last_critical_eval_iteration: u32,
    /// Verifications, in creation order.
    #[serde(default)]
    pub verifications: Vec<Verification>,
    /// Times verifications were generated.
    #[serde(default)]
    pub qc_generations: u32,
    /// Verification ids that have passed (the regression baseline).
    #[serde(default)]
    pub regression_baseline: BTreeSet<String>,
    /// Every VRC, oldest first.
    #[serde(default)]
    pub vrc_history: Vec<VrcSnapshot>,
    /// Services to keep healthy (software deliverables).
    #[serde(default)]
    pub services: Vec<Service>,
    /// Service fixes since value last rose (a service fix is never progress).
    #[serde(default)]
    pub service_fixes_without_progress: u32,
    /// Iterations since measured value last rose.
    #[serde(default)]
    pub iterations_without_progress: u32,
    /// The iteration in which measured value last rose (0: never).
    #[serde(default)]
    pub last_progress_iteration: u32,
    /// The highest value measured so far (progress must exceed it).
    #[serde(default)]
    pub best: ValueMeasure,
    /// Set while paused for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Pause>,
    /// Verification ids research has run for: once per id, never reset.
    #[serde(default)]
    pub researched: BTreeSet<String>,
    /// Course corrections run.
    #[serde(default)]
    pub course_corrections: u32,
    /// A course correction escalated to a person: the loop stops.
    #[serde(default)]
    pub escalated: Option<String>,
    /// Exit gates run.
    #[serde(default)]
    pub exit_gate_attempts: u32,
    /// Tokens spent by every role so far.
    #[serde(default)]
    pub tokens_used: u64,
    /// The latest vision validation (none: not run yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision_validation: Option<VisionValidation>,
    /// What context discovery found (none: not run yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
    /// Every critique (PRD critique, plan review...), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub critiques: Vec<CritiqueRecord>,
    /// Which decision function runs this sprint (version 2; absent: the value policy).
    #[serde(default, skip_serializing_if = "crate::features::Policy::is_value")]
    pub policy: crate::features::Policy,
    /// The feature list and each feature's progress (feature-list policy only; none
    /// until the list is given or the initializer reports one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_list: Option<crate::features::FeatureList>,
}

/// A bound refused a change ([`SprintState`]'s counting methods).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundReached {
    /// Fix attempts for this verification are spent.
    #[error("verification `{id}` has used its {max} fix attempts")]
    FixAttempts {
        /// The verification.
        id: String,
        /// The bound.
        max: u32,
    },
    /// Research already ran for this verification.
    #[error("research already ran for verification `{id}` (once per verification)")]
    Research {
        /// The verification.
        id: String,
    },
    /// Course corrections are spent.
    #[error("the sprint has used its {max} course corrections")]
    CourseCorrections {
        /// The bound.
        max: u32,
    },
    /// Exit gates are spent.
    #[error("the sprint has used its {max} exit-gate attempts")]
    ExitGate {
        /// The bound.
        max: u32,
    },
    /// No such task or verification.
    #[error("no {what} `{id}` in the sprint state")]
    Unknown {
        /// `task` or `verification`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
}

impl SprintState {
    /// A new sprint in its pre-loop phase.
    pub fn new(sprint: impl Into<String>) -> Self {
        SprintState {
            version: STATE_VERSION,
            sprint: sprint.into(),
            phase: SprintPhase::PreLoop,
            iteration: 0,
            gates_passed: BTreeSet::new(),
            tasks: Vec::new(),
            tasks_since_last_critical_eval: 0,
            last_critical_eval_iteration: 0,
            verifications: Vec::new(),
            qc_generations: 0,
            regression_baseline: BTreeSet::new(),
            vrc_history: Vec::new(),
            services: Vec::new(),
            service_fixes_without_progress: 0,
            iterations_without_progress: 0,
            last_progress_iteration: 0,
            best: ValueMeasure::default(),
            pause: None,
            researched: BTreeSet::new(),
            course_corrections: 0,
            escalated: None,
            exit_gate_attempts: 0,
            tokens_used: 0,
            vision_validation: None,
            discovery: None,
            critiques: Vec::new(),
            policy: crate::features::Policy::Value,
            feature_list: None,
        }
    }

    /// The task with this id.
    pub fn task(&self, id: &str) -> Option<&SprintTask> {
        self.tasks.iter().find(|t| t.id == id)
    }

    /// The task with this id, to change.
    pub fn task_mut(&mut self, id: &str) -> Option<&mut SprintTask> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// The verification with this id.
    pub fn verification(&self, id: &str) -> Option<&Verification> {
        self.verifications.iter().find(|v| v.id == id)
    }

    /// The verification with this id, to change.
    pub fn verification_mut(&mut self, id: &str) -> Option<&mut Verification> {
        self.verifications.iter_mut().find(|v| v.id == id)
    }

    /// The latest critique recorded for a gate.
    pub fn latest_critique(&self, gate: &str) -> Option<&CritiqueRecord> {
        self.critiques
            .iter()
            .rev()
            .find(|c| c.gate.as_deref() == Some(gate))
    }

    /// Whether a pre-loop gate has passed.
    pub fn gate_passed(&self, gate: &str) -> bool {
        self.gates_passed.contains(gate)
    }

    /// The highest-priority pending task whose dependencies are all done (seed 002
    /// `pick_next_task`): gap tasks before plan tasks, creation order within a source.
    pub fn next_task(&self) -> Option<&SprintTask> {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Pending)
            .filter(|t| {
                t.dependencies.iter().all(|d| {
                    self.task(d)
                        .is_some_and(|dep| dep.status == TaskStatus::Done)
                })
            })
            .min_by_key(|t| t.source.priority())
    }

    /// Open tasks created while the loop ran (the mid-loop ceiling counts these).
    pub fn open_mid_loop_tasks(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.source.is_mid_loop() && t.is_open())
            .count()
    }

    /// Verifications that failed and still have fix attempts left.
    pub fn fixable(&self, limits: &Limits) -> impl Iterator<Item = &Verification> {
        let max = limits.max_fix_attempts;
        self.verifications
            .iter()
            .filter(move |v| v.status == VerificationStatus::Failed && v.attempts < max)
    }

    /// Failing verifications whose fixes are spent and that research has not run for.
    pub fn researchable(&self, limits: &Limits) -> impl Iterator<Item = &Verification> {
        let max = limits.max_fix_attempts;
        self.verifications.iter().filter(move |v| {
            v.status == VerificationStatus::Failed
                && v.attempts >= max
                && !self.researched.contains(&v.id)
        })
    }

    /// Counts one fix attempt on a verification; refused once its bound is spent.
    pub fn record_fix_attempt(&mut self, id: &str, limits: &Limits) -> Result<u32, BoundReached> {
        let max = limits.max_fix_attempts;
        let v = self
            .verification_mut(id)
            .ok_or_else(|| BoundReached::Unknown {
                what: "verification",
                id: id.to_string(),
            })?;
        if v.attempts >= max {
            return Err(BoundReached::FixAttempts {
                id: id.to_string(),
                max,
            });
        }
        v.attempts += 1;
        Ok(v.attempts)
    }

    /// Marks research as run for a verification; refused the second time.
    pub fn record_research(&mut self, id: &str) -> Result<(), BoundReached> {
        if self.verification(id).is_none() {
            return Err(BoundReached::Unknown {
                what: "verification",
                id: id.to_string(),
            });
        }
        if !self.researched.insert(id.to_string()) {
            return Err(BoundReached::Research { id: id.to_string() });
        }
        Ok(())
    }

    /// Counts a course correction; refused once the bound is spent.
    pub fn record_course_correction(&mut self, limits: &Limits) -> Result<u32, BoundReached> {
        if self.course_corrections >= limits.max_course_corrections {
            return Err(BoundReached::CourseCorrections {
                max: limits.max_course_corrections,
            });
        }
        self.course_corrections += 1;
        Ok(self.course_corrections)
    }

    /// Counts an exit-gate attempt; refused once the bound is spent.
    pub fn record_exit_gate(&mut self, limits: &Limits) -> Result<u32, BoundReached> {
        if self.exit_gate_attempts >= limits.max_exit_gate_attempts {
            return Err(BoundReached::ExitGate {
                max: limits.max_exit_gate_attempts,
            });
        }
        self.exit_gate_attempts += 1;
        Ok(self.exit_gate_attempts)
    }

    /// A builder's attempt ended without a completion report: the task goes back to
    /// pending, or is blocked once the task-retry bound is spent. Returns its status.
    pub fn task_not_completed(
        &mut self,
        id: &str,
        limits: &Limits,
    ) -> Result<TaskStatus, BoundReached> {
        let max = limits.max_task_retries;
        let t = self.task_mut(id).ok_or_else(|| BoundReached::Unknown {
            what: "task",
            id: id.to_string(),
        })?;
        t.retry_count = (t.retry_count + 1).min(max);
        if t.retry_count >= max {
            t.status = TaskStatus::Blocked;
            t.block = Some(Block::RetriesExhausted {
                attempts: t.retry_count,
            });
        } else {
            t.status = TaskStatus::Pending;
        }
        Ok(t.status)
    }

    /// Records a verification run's result as the host measured it (its exit code).
    /// A pass joins the regression baseline. A new failure of a verification that
    /// research already ran for keeps that mark: research runs once per id.
    pub fn record_run(
        &mut self,
        id: &str,
        exit_code: Option<i32>,
        output: &str,
    ) -> Result<(), BoundReached> {
        let v = self
            .verification_mut(id)
            .ok_or_else(|| BoundReached::Unknown {
                what: "verification",
                id: id.to_string(),
            })?;
        if exit_code == Some(0) {
            v.status = VerificationStatus::Passed;
            self.regression_baseline.insert(id.to_string());
        } else {
            v.status = VerificationStatus::Failed;
            let attempt = v.attempts;
            v.failures.push(FailureRecord {
                attempt,
                exit_code,
                output: output.to_string(),
                fix_applied: None,
                files_changed: Vec::new(),
            });
        }
        Ok(())
    }

    /// Ends an iteration: measures the value from state, compares it with the best
    /// measured so far and updates the progress counters. Returns whether the iteration
    /// made progress. This is the only place progress is decided, and it reads no
    /// action's report.
    pub fn finish_iteration(&mut self) -> bool {
        let now = ValueMeasure::of(self);
        let progressed = now.exceeds(&self.best);
        self.best = self.best.max(&now);
        if progressed {
            self.iterations_without_progress = 0;
            self.service_fixes_without_progress = 0;
            self.last_progress_iteration = self.iteration;
        } else {
            self.iterations_without_progress += 1;
        }
        progressed
    }

    /// All non-blocked verifications pass (and there is at least one).
    pub fn all_verifications_pass(&self) -> bool {
        let counted: Vec<_> = self
            .verifications
            .iter()
            .filter(|v| v.status != VerificationStatus::Blocked)
            .collect();
        !counted.is_empty()
            && counted
                .iter()
                .all(|v| v.status == VerificationStatus::Passed)
    }

    /// Clears the verifications so they are generated again (a course correction's
    /// `regenerate_tests`). The generation count and the research marks stay, so
    /// neither can be renewed this way.
    pub fn invalidate_verifications(&mut self) {
        self.verifications.clear();
        self.regression_baseline.clear();
        self.gates_passed.remove("verifications_generated");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn fix_attempts_stop_at_the_bound() {
        let mut s = SprintState::new("s");
        s.verifications
            .push(Verification::new("v1", "unit", "true"));
        for i in 1..=5 {
            assert_eq!(s.record_fix_attempt("v1", &limits()), Ok(i));
        }
        assert_eq!(
            s.record_fix_attempt("v1", &limits()),
            Err(BoundReached::FixAttempts {
                id: "v1".into(),
                max: 5
            })
        );
        assert!(s.record_fix_attempt("nope", &limits()).is_err());
    }

    #[test]
    fn research_runs_once_per_verification_even_when_failures_change() {
        let mut s = SprintState::new("s");
        s.verifications
            .push(Verification::new("v1", "unit", "true"));
        s.record_research("v1").unwrap();
        s.record_run("v1", Some(1), "a different failure").unwrap();
        assert_eq!(
            s.record_research("v1"),
            Err(BoundReached::Research { id: "v1".into() })
        );
    }

    #[test]
    fn a_task_is_blocked_after_its_retries() {
        let mut s = SprintState::new("s");
        s.tasks
            .push(SprintTask::new("T1", TaskSource::Plan, "d", "v", "a"));
        assert_eq!(
            s.task_not_completed("T1", &limits()),
            Ok(TaskStatus::Pending)
        );
        assert_eq!(
            s.task_not_completed("T1", &limits()),
            Ok(TaskStatus::Pending)
        );
        assert_eq!(
            s.task_not_completed("T1", &limits()),
            Ok(TaskStatus::Blocked)
        );
        assert_eq!(
            s.task("T1").unwrap().block,
            Some(Block::RetriesExhausted { attempts: 3 })
        );
    }

    #[test]
    fn next_task_prefers_gap_tasks_and_waits_for_dependencies() {
        let mut s = SprintState::new("s");
        s.tasks
            .push(SprintTask::new("T1", TaskSource::Plan, "d1", "v", "a"));
        let mut t2 = SprintTask::new("T2", TaskSource::Plan, "d2", "v", "a");
        t2.dependencies = vec!["T1".into()];
        s.tasks.push(t2);
        let mut gap = SprintTask::new("EG-1", TaskSource::ExitGate, "gap", "v", "a");
        gap.dependencies = vec!["T2".into()];
        s.tasks.push(gap);
        assert_eq!(s.next_task().unwrap().id, "T1");
        s.task_mut("T1").unwrap().status = TaskStatus::Done;
        assert_eq!(s.next_task().unwrap().id, "T2");
        s.task_mut("T2").unwrap().status = TaskStatus::Done;
        assert_eq!(s.next_task().unwrap().id, "EG-1");
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let mut s = SprintState::new("s");
        s.tasks
            .push(SprintTask::new("T1", TaskSource::Vrc, "d", "v", "a"));
        s.task_mut("T1").unwrap().status = TaskStatus::Blocked;
        s.task_mut("T1").unwrap().block = Some(Block::HumanAction {
            instructions: "create an API token".into(),
            verification: Some("test -n \"$TOKEN\"".into()),
        });
        s.verifications
            .push(Verification::new("v1", "unit", "pytest -q"));
        s.record_run("v1", Some(1), "1 failed").unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: SprintState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        assert!(back.task("T1").unwrap().needs_human());
    }

    #[test]
    fn a_state_written_before_the_pre_loop_records_still_loads() {
        let s = SprintState::new("s");
        let json = serde_json::to_value(&s).unwrap();
        for key in ["vision_validation", "discovery", "critiques"] {
            assert!(json.get(key).is_none(), "{key} is written only once set");
        }
        let old = r#"{"version": 1, "sprint": "s", "phase": "value_loop", "iteration": 3}"#;
        let back: SprintState = serde_json::from_str(old).unwrap();
        assert_eq!(back.vision_validation, None);
        assert_eq!(back.discovery, None);
        assert!(back.critiques.is_empty());
    }

    #[test]
    fn the_pre_loop_records_round_trip() {
        let mut s = SprintState::new("s");
        s.vision_validation = Some(VisionValidation {
            verdict: VisionVerdict::NeedsRevision,
            issues: vec![VisionIssue {
                severity: IssueSeverity::Hard,
                description: "no outcome".into(),
                suggestion: Some("name one".into()),
            }],
            summary: "revise".into(),
        });
        s.discovery = Some(Discovery {
            deliverable: "a CLI".into(),
            project_type: "cli".into(),
            codebase_state: CodebaseState::Existing,
            tools: vec!["cargo".into()],
            services: vec!["api".into()],
            value_proof: "it runs".into(),
            verification_commands: vec!["cargo test".into()],
        });
        s.critiques.push(CritiqueRecord {
            gate: Some("prd_critique".into()),
            iteration: 0,
            verdict: CritiqueVerdict::Descope,
            reasons: vec!["too big".into()],
            amendments: vec![],
            descoped_tasks: vec!["T2".into()],
            summary: "cut".into(),
        });
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["vision_validation"]["verdict"], "NEEDS_REVISION");
        assert_eq!(json["vision_validation"]["issues"][0]["severity"], "HARD");
        assert_eq!(json["discovery"]["codebase_state"], "existing");
        assert_eq!(json["critiques"][0]["verdict"], "DESCOPE");
        let back: SprintState = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        assert!(back.vision_validation.unwrap().has_hard_issues());
        assert_eq!(
            s.latest_critique("prd_critique").unwrap().descoped_tasks,
            ["T2"]
        );
        assert!(s.latest_critique("plan_review").is_none());
    }
}
