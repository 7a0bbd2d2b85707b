//! The value loop's runner: the pre-loop gates, then one iteration after another, each
//! the decision engine's choice ([`agentforge_value_loop::decide`]) carried out by role
//! tasks on the stateless executor and by the host's own measurements.
//!
//! Crash safety: an iteration is recorded by one fsynced line of the sprint's log, after
//! everything it did. Its role tasks have ids fixed by the iteration's sequence number,
//! so after a kill the same decision (a pure function of the recorded state) resumes the
//! same role tasks where their own logs end; their reports reach the sprint state only
//! from those logs ([`crate::report_tools::apply_recorded`]); the host's measurements
//! run again. Nothing recorded is lost or repeated.
//!
//! Every path is bounded by [`Limits`] (which nothing here can raise) and by
//! [`MAX_GATE_ATTEMPTS`] per pre-loop gate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentforge_core::cost::CostTotals;
use agentforge_engine::executor::{ExecError, Executor, Runtime, StopRequest};
use agentforge_value_loop::features::Policy;
use agentforge_value_loop::monitor::{IterationObservation, MonitorConfig, ProcessMonitor};
use agentforge_value_loop::reports::Caller;
use agentforge_value_loop::state::{
    Block, Pause, Recommendation, SprintPhase, SprintState, TaskSource, TaskStatus,
    VerificationStatus, VrcSnapshot,
};
use agentforge_value_loop::{decide, Decision, Limits, LoopAction, StopReason, ValueMeasure};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::probes;
use crate::report_tools::{apply_recorded, Produced, MANAGE_TASK};
use crate::roles::{self, Role, RoleJob};
use crate::{Event, EventKind, SprintDir, SprintStoreError};
use agentforge_engine::git::Git;

mod features;

/// Attempts of one pre-loop gate before the sprint fails (a gate whose role never
/// reports, or a vision still with HARD issues after the person's revision).
pub const MAX_GATE_ATTEMPTS: usize = 2;

/// The pre-loop gates, in order (seed 002 section 4, with one plan review instead of
/// seven sequential gates).
pub const PRE_LOOP_GATES: [&str; 6] = [
    "input",
    "vision",
    "discovery",
    "prd_critique",
    "plan",
    "plan_review",
];

/// How a sprint ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SprintOutcome {
    /// The exit gate passed: every verification passes and the evaluator's full VRC
    /// says ship-ready.
    Delivered,
    /// The loop stopped at a bound.
    Stopped {
        /// Which.
        reason: StopReason,
        /// Whether any value was measured (partial value).
        partial_value: bool,
    },
    /// The pre-loop could not produce a plan worth running.
    Failed {
        /// Why.
        reason: String,
    },
    /// Waiting for a person (not recorded as an end: `resume` continues).
    Paused {
        /// What the person is asked to do.
        instructions: String,
    },
}

impl SprintOutcome {
    /// The process exit code: 0 delivered, 2 partial value, 1 failed (or stopped with
    /// no value), 75 paused for a person (resume later).
    pub fn exit_code(&self) -> u8 {
        match self {
            SprintOutcome::Delivered => 0,
            SprintOutcome::Stopped {
                partial_value: true,
                ..
            } => 2,
            SprintOutcome::Stopped { .. } | SprintOutcome::Failed { .. } => 1,
            SprintOutcome::Paused { .. } => 75,
        }
    }

    /// For the delivery report.
    fn for_report(&self) -> agentforge_value_loop::render::Outcome {
        use agentforge_value_loop::render::Outcome;
        match self {
            SprintOutcome::Delivered => Outcome::Delivered,
            SprintOutcome::Stopped { reason, .. } => Outcome::Stopped(reason.clone()),
            SprintOutcome::Failed { reason }
            | SprintOutcome::Paused {
                instructions: reason,
            } => Outcome::Stopped(StopReason::Escalated {
                reason: reason.clone(),
            }),
        }
    }
}

/// Errors that stop a run (the sprint stays resumable: nothing recorded is lost).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The sprint folder.
    #[error(transparent)]
    Store(#[from] SprintStoreError),
    /// A role task could not be set up or run.
    #[error("role task `{task}`: {source}")]
    Role {
        /// The role task's id.
        task: String,
        /// What failed.
        #[source]
        source: ExecError,
    },
    /// The runtime of a role (its provider, configuration or plugins).
    #[error("role {role}: {message}")]
    Setup {
        /// The role.
        role: Role,
        /// What is wrong and what to do.
        message: String,
    },
    /// The git safety net (a repository the sprint cannot branch or commit in).
    #[error(transparent)]
    Git(#[from] agentforge_engine::git::GitError),
    /// Another process runs the sprint (or one of its role tasks).
    #[error(transparent)]
    Busy(agentforge_store::state_store::StoreError),
    /// The decision engine and the state disagree (a bug): stopping beats looping.
    #[error("inconsistent sprint state: {0}; please report it with the sprint folder")]
    Inconsistent(String),
    /// A stop was requested (SIGINT / SIGTERM); `resume` continues.
    #[error("interrupted")]
    Interrupted,
}

/// Makes the runtime a role task runs in: its configuration (`[value_loop.roles.<role>]`
/// over `[provider]`), its provider (or the recorded session `<job>.jsonl`), and the
/// plugins loaded. The runner adds the report tools.
pub trait RuntimeFactory {
    /// A runtime for the role task `job` (`<seq>-<role>`) of `role`.
    fn runtime(&self, role: Role, job: &str) -> Result<Runtime, String>;

    /// Run after each step a role task records (its log line is on the disk), before
    /// the next: a worker of the fleet checkpoints the workspace there. An `Err` stops
    /// the role task, and the sprint, as an error. None by default.
    fn after_step(&self) -> Option<RoleAfterStep> {
        None
    }
}

/// What [`RuntimeFactory::after_step`] gives: shared, so each role task's executor gets
/// its own handle.
pub type RoleAfterStep = std::sync::Arc<
    dyn Fn(&agentforge_core::state::ActionRecord) -> Result<(), String> + Send + Sync,
>;

/// Options of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Progress lines on stderr.
    pub progress: bool,
    /// The person says the paused-for action is done (for a pause without a command
    /// that can check it).
    pub confirm_pause: bool,
    /// Plan gates after the plan review (`[value_loop] plan_gates`).
    pub plan_gates: Vec<String>,
    /// A VRC after every iteration (`[value_loop] vrc_every_iteration`).
    pub vrc_every_iteration: bool,
}

/// What each of the seed's plan gates asks of the critic (section 4.6).
const PLAN_GATE_CHECKS: &[(&str, &str)] = &[
    ("craap", "CRAAP: critique the plan, its risks, the flow between tasks, its alignment with the vision and the perspectives it misses."),
    ("clarity", "CLARITY: two developers given a task must build the same thing; sharpen every ambiguous description or acceptance criterion (manage_task modify)."),
    ("validate", "VALIDATE: every PRD requirement has a task that delivers it; add the missing ones (manage_task add)."),
    ("connect", "CONNECT: no island features; add the integration tasks that connect the pieces for the user."),
    ("break", "BREAK: pre-mortem; the sprint failed: find the boundaries, runtime conditions, edge cases and assumptions that would break it, and change the plan so they cannot."),
    ("prune", "PRUNE: simplify without losing value; descope or merge what the vision does not need."),
    ("tidy", "TIDY: prepare the codebase first (Kent Beck's tidy first); add the preparation tasks the plan needs before building."),
    ("blockers", "BLOCKERS: a task marked as needing a person often is not; reclassify the ones the agent can do itself, and name the pre-conditions a person must really meet."),
];

/// The gate name a plan gate has in the state and the log.
fn plan_gate_key(name: &str) -> String {
    format!("plan_gate:{name}")
}

/// What one role task gave.
struct JobResult {
    state: SprintState,
    produced: Produced,
    task_id: String,
    steps: u64,
    tokens: u64,
    /// The role task's recorded cost.
    cost: CostTotals,
    files_modified: Vec<String>,
    /// The role task ended with `complete` accepted (not out of steps, failed, escalated).
    completed: bool,
}

/// Runs one sprint.
pub struct SprintRunner<'a> {
    workspace: PathBuf,
    dir: SprintDir,
    limits: Limits,
    factory: &'a dyn RuntimeFactory,
    opts: RunOptions,
    stop: StopRequest,
    git: Option<Git>,
    monitor_config: MonitorConfig,
    /// The pause recorded when this run started (the one `--confirm-pause` answers).
    paused_at_start: Option<Pause>,
}

impl<'a> SprintRunner<'a> {
    /// A runner for the sprint in `dir`, whose work happens in `workspace`.
    pub fn new(
        workspace: &Path,
        dir: SprintDir,
        limits: Limits,
        factory: &'a dyn RuntimeFactory,
        opts: RunOptions,
        stop: StopRequest,
    ) -> SprintRunner<'a> {
        SprintRunner {
            workspace: workspace.to_path_buf(),
            git: Git::detect(workspace),
            paused_at_start: dir.load_state().ok().and_then(|s| s.pause),
            dir,
            limits,
            factory,
            opts,
            stop,
            monitor_config: MonitorConfig::default(),
        }
    }

    fn say(&self, line: impl AsRef<str>) {
        if self.opts.progress {
            eprintln!("{}", line.as_ref());
        }
    }

    /// Runs (or resumes) the sprint to its end or to a pause.
    pub async fn run(&self) -> Result<SprintOutcome, RunnerError> {
        let _lock = self.dir.lock().map_err(RunnerError::Busy)?;
        let (mut state, recovery) = self.dir.recover()?;
        if let Some(p) = &recovery.torn_line_saved_to {
            self.say(format!(
                "recovered: a torn last log line was saved to {}",
                p.display()
            ));
        }
        if let Some(outcome) = self.finished()? {
            write_views(&self.dir, &state, Some(&outcome))?;
            return Ok(outcome);
        }
        if let Some(git) = &self.git {
            git.ensure_branch(&format!("agentforge/{}", state.sprint))?;
            // The person's uncommitted work becomes the base, once: on a resume the
            // uncommitted changes are the interrupted iteration's, not verified yet.
            if self.dir.last_event()?.is_none() {
                git.commit(&format!("agentforge: sprint {} starts", state.sprint))?;
            }
        }
        loop {
            if self.stop.is_requested() {
                return Err(RunnerError::Interrupted);
            }
            // The feature-list policy: the same state, log, roles and bounds, another
            // decision function (seed 003's table), and no pre-loop gates.
            if state.policy == Policy::FeatureList {
                if let Some(outcome) = self.feature_step(&mut state).await? {
                    return self.end(state, outcome);
                }
                continue;
            }
            if state.phase == SprintPhase::PreLoop {
                if let Some(outcome) = self.pre_loop_gate(&mut state).await? {
                    return self.end(state, outcome);
                }
                continue;
            }
            // The decision is taken from the recorded state only (services as the last
            // iteration measured them), so a resumed sprint decides as the interrupted
            // one did and continues the same role tasks.
            match decide(&self.limits, &state) {
                Decision::Stop(reason) => {
                    let partial_value = ValueMeasure::of(&state) != ValueMeasure::default();
                    return self.end(
                        state,
                        SprintOutcome::Stopped {
                            reason,
                            partial_value,
                        },
                    );
                }
                Decision::Act { action } => {
                    if let Some(outcome) = self.iteration(action, &mut state).await? {
                        return self.end(state, outcome);
                    }
                }
            }
        }
    }

    /// The recorded end, if the sprint has one.
    fn finished(&self) -> Result<Option<SprintOutcome>, RunnerError> {
        Ok(self.dir.recorded_end()?)
    }

    /// Records the end (a pause is not an end) and writes the delivery report.
    fn end(
        &self,
        mut state: SprintState,
        outcome: SprintOutcome,
    ) -> Result<SprintOutcome, RunnerError> {
        let recorded = self
            .dir
            .last_event()?
            .is_some_and(|e| e.ended.as_ref() == Some(&outcome));
        if !recorded && !matches!(outcome, SprintOutcome::Paused { .. }) {
            state.phase = SprintPhase::Finished;
            let seq = self.dir.next_seq()?;
            self.dir.append(&Event {
                seq,
                kind: EventKind::Finished {
                    end: outcome.clone(),
                },
                outcome: describe(&outcome),
                role_tasks: vec![],
                tokens: BTreeMap::new(),
                cost: BTreeMap::new(),
                ended: None,
                monitor: None,
                state_after: state.clone(),
            })?;
        }
        // A pause is not an end: the plan and the checklist, no delivery report.
        let ended = !matches!(outcome, SprintOutcome::Paused { .. });
        write_views(&self.dir, &state, ended.then_some(&outcome))?;
        Ok(outcome)
    }

    /// Appends an event and refreshes the rendered views.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        seq: u64,
        kind: EventKind,
        outcome: String,
        jobs: &[&JobResult],
        monitor: Option<ProcessMonitor>,
        state: &SprintState,
        end: Option<&SprintOutcome>,
    ) -> Result<(), RunnerError> {
        let mut tokens: BTreeMap<String, u64> = BTreeMap::new();
        let mut cost: BTreeMap<String, CostTotals> = BTreeMap::new();
        for j in jobs {
            let role = j.task_id.rsplit('-').next().unwrap_or_default().to_string();
            *tokens.entry(role.clone()).or_default() += j.tokens;
            cost.entry(role).or_default().merge(&j.cost);
        }
        self.dir.append(&Event {
            seq,
            kind,
            outcome,
            role_tasks: jobs.iter().map(|j| j.task_id.clone()).collect(),
            tokens,
            cost,
            ended: end.cloned(),
            monitor,
            state_after: state.clone(),
        })?;
        write_views(&self.dir, state, None)?;
        Ok(())
    }

    /// Runs one role task to its end (resuming it when it exists) and applies its
    /// recorded reports to a copy of `before`.
    async fn run_job(&self, job: &RoleJob, before: &SprintState) -> Result<JobResult, RunnerError> {
        let mut rt = self
            .factory
            .runtime(job.role, &job.name)
            .map_err(|message| RunnerError::Setup {
                role: job.role,
                message,
            })?;
        let max_steps = rt
            .config
            .value_loop
            .roles
            .get(job.role.name())
            .and_then(|r| r.max_steps)
            .unwrap_or(job.role.default_max_steps());
        let spec = job.spec(&before.sprint, max_steps);
        let role_err = |source: ExecError| RunnerError::Role {
            task: spec.id.clone(),
            source,
        };
        let dir = match rt.store.open(&spec.id) {
            Ok(d) => {
                // The same decision on the same recorded state gives the same task; any
                // other means the inputs changed (the configuration's plan gates...).
                let stored = d.spec().map_err(|e| role_err(ExecError::Store(e)))?;
                if stored != spec {
                    return Err(RunnerError::Setup {
                        role: job.role,
                        message: format!(
                            "role task `{}` exists for another job than this iteration's ({}); was the configuration ([value_loop]) changed since the sprint ran? Restore it, or start a new sprint with --sprint",
                            spec.id, stored.goal
                        ),
                    });
                }
                d
            }
            Err(_) => rt.create_task(&spec).map_err(role_err)?,
        };
        let _lock = dir.lock().map_err(|e| role_err(ExecError::Store(e)))?;
        let record = crate::report_tools::RoleTools {
            tools: job.tools.iter().map(|t| t.to_string()).collect(),
            finish_with: job.finish_with.map(str::to_string),
            caller: job.caller.clone(),
        };
        let record_path = dir.path().join(crate::report_tools::ROLE_TOOLS_FILE);
        agentforge_store::state_store::atomic_write(
            &record_path,
            &serde_json::to_vec_pretty(&record).unwrap_or_default(),
        )
        .map_err(|source| SprintStoreError::Io {
            op: "cannot write",
            path: record_path.display().to_string(),
            source,
        })?;
        // The working copy the report tools answer from: the state before the task plus
        // the calls it already recorded (a resumed task's model sees the same answers).
        let recorded = dir
            .read_actions()
            .map_err(|e| role_err(ExecError::Store(e)))?;
        let mut working = before.clone();
        apply_recorded(
            &recorded,
            &job.tools,
            &job.caller,
            &mut working,
            &self.limits,
        );
        rt.tools.extend(crate::report_tools::ReportTool::set(
            &job.tools,
            job.finish_with,
            &job.caller,
            &self.limits,
            working,
        ));
        let mut exec = Executor::new(&rt, dir);
        if let Some(hook) = self.factory.after_step() {
            exec = exec.with_after_step(Box::new(move |record| hook(record)));
        }
        let (state, _, rolled_back) = exec.recover().map_err(role_err)?;
        if let Some(step) = rolled_back {
            self.say(format!(
                "recovered: step {step} of {} was interrupted before it was recorded; it runs again",
                spec.id
            ));
        }
        if !state.status.is_terminal() {
            self.say(format!(
                "  {} `{}` ({} model `{}`), step {} of {}",
                job.role,
                spec.id,
                rt.config.provider.kind,
                rt.config.provider.model,
                state.step + 1,
                state.max_steps
            ));
            match exec.run_until(&self.stop).await {
                Ok(_) => {}
                Err(ExecError::Interrupted { .. }) => return Err(RunnerError::Interrupted),
                Err(e) => return Err(role_err(e)),
            }
        }
        let final_state = exec
            .dir()
            .load_state()
            .map_err(|e| role_err(ExecError::Store(e)))?;
        let records = exec
            .dir()
            .read_actions()
            .map_err(|e| role_err(ExecError::Store(e)))?;
        let mut after = before.clone();
        let produced = apply_recorded(&records, &job.tools, &job.caller, &mut after, &self.limits);
        let t = &final_state.tokens;
        // Provider-reported tokens; the host's own count where the provider gives none.
        let tokens = if t.input_tokens + t.output_tokens > 0 {
            t.input_tokens + t.output_tokens
        } else {
            t.context_tokens
        };
        self.say(format!(
            "  {} `{}`: {} after {} steps; accepted: {}",
            job.role,
            spec.id,
            serde_json::to_value(final_state.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            final_state.step,
            if produced.calls.is_empty() {
                "no report".to_string()
            } else {
                produced.calls.join(", ")
            }
        ));
        Ok(JobResult {
            state: after,
            produced,
            task_id: spec.id,
            steps: final_state.step,
            tokens,
            cost: final_state.cost.unwrap_or_default(),
            files_modified: final_state.files_modified,
            completed: final_state.status == agentforge_core::state::TaskStatus::Complete,
        })
    }

    // ---------------------------------------------------------------- pre-loop

    /// Runs the next pre-loop gate; `Some` ends (or pauses) the sprint.
    async fn pre_loop_gate(
        &self,
        state: &mut SprintState,
    ) -> Result<Option<SprintOutcome>, RunnerError> {
        let gates: Vec<String> = PRE_LOOP_GATES
            .iter()
            .map(|g| g.to_string())
            .chain(self.opts.plan_gates.iter().map(|g| plan_gate_key(g)))
            .collect();
        let Some(gate) = gates.iter().find(|g| !state.gate_passed(g)) else {
            state.phase = SprintPhase::ValueLoop;
            return Ok(None);
        };
        let gate = gate.as_str();
        let events = self.dir.read_events()?;
        let attempts = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::Gate { name, .. } if name == gate))
            .count();
        if attempts >= MAX_GATE_ATTEMPTS {
            return Ok(Some(SprintOutcome::Failed {
                reason: format!(
                    "the pre-loop gate `{gate}` did not pass in {MAX_GATE_ATTEMPTS} attempts"
                ),
            }));
        }
        let seq = self.dir.next_seq()?;
        self.say(format!(
            "[pre-loop] gate `{gate}` (attempt {} of {MAX_GATE_ATTEMPTS})",
            attempts + 1
        ));
        let vision = self.read_input("VISION.md")?;
        let prd = self.read_input("PRD.md")?;
        if gate == "input" {
            let mut problems = Vec::new();
            for (name, text) in [("VISION.md", &vision), ("PRD.md", &prd)] {
                if text.trim().is_empty() {
                    problems.push(format!("{name} is empty"));
                }
            }
            let mut after = state.clone();
            let verdict = if problems.is_empty() {
                after.gates_passed.insert(gate.to_string());
                "PASS".to_string()
            } else {
                format!("FAIL: {}", problems.join("; "))
            };
            self.record(
                seq,
                gate_event(gate, &verdict),
                verdict.clone(),
                &[],
                None,
                &after,
                None,
            )?;
            *state = after;
            if !problems.is_empty() {
                return Ok(Some(SprintOutcome::Paused {
                    instructions: format!(
                        "{}: write them in {} and resume",
                        problems.join("; "),
                        self.dir.path().display()
                    ),
                }));
            }
            return Ok(None);
        }
        if gate == plan_gate_key("preflight") {
            let problems = preflight(state, &self.workspace).await;
            let mut after = state.clone();
            let verdict = if problems.is_empty() {
                after.gates_passed.insert(gate.to_string());
                "PASS".to_string()
            } else {
                format!("FAIL: {}", problems.join("; "))
            };
            self.say(format!("[pre-loop] gate `{gate}`: {verdict}"));
            self.record(
                seq,
                gate_event(gate, &verdict),
                verdict,
                &[],
                None,
                &after,
                None,
            )?;
            *state = after;
            return Ok((!problems.is_empty()).then(|| SprintOutcome::Paused {
                instructions: format!(
                    "preflight: {}; make them available and resume",
                    problems.join("; ")
                ),
            }));
        }
        let caller = Caller {
            iteration: 0,
            task: None,
            source: TaskSource::Plan,
            gate: Some(gate.to_string()),
        };
        let job = match gate.strip_prefix("plan_gate:") {
            Some(name) => plan_gate_job(name, seq, state, &vision, &prd, caller),
            None => gate_job(gate, seq, state, &vision, &prd, &self.workspace, caller),
        };
        let result = self.run_job(&job, state).await?;
        let mut after = result.state.clone();
        after.tokens_used += result.tokens;
        let (verdict, outcome) = judge_gate(gate, state, &mut after, &self.dir);
        if gate == "discovery" {
            // The services discovery found, measured before the first decision needs them.
            self.refresh_services(&mut after).await;
        }
        self.say(format!("[pre-loop] gate `{gate}`: {verdict}"));
        let end = outcome
            .as_ref()
            .filter(|o| !matches!(o, SprintOutcome::Paused { .. }));
        if end.is_some() {
            after.phase = SprintPhase::Finished;
        }
        self.record(
            seq,
            gate_event(gate, &verdict),
            verdict,
            &[&result],
            None,
            &after,
            end,
        )?;
        *state = after;
        Ok(outcome)
    }

    fn read_input(&self, name: &str) -> Result<String, RunnerError> {
        let p = self.dir.path().join(name);
        std::fs::read_to_string(&p).map_err(|source| {
            RunnerError::Store(SprintStoreError::Io {
                op: "cannot read",
                path: p.display().to_string(),
                source,
            })
        })
    }

    // ---------------------------------------------------------------- the loop

    async fn refresh_services(&self, state: &mut SprintState) {
        for i in 0..state.services.len() {
            let ok = probes::healthy(&state.services[i]).await;
            state.services[i].healthy = ok;
        }
    }

    /// Runs `ids`' commands and records each result.
    async fn measure(&self, state: &mut SprintState, ids: &[String]) -> Vec<String> {
        let commands: Vec<(String, String)> = ids
            .iter()
            .filter_map(|id| {
                state
                    .verification(id)
                    .map(|v| (v.id.clone(), v.command.clone()))
            })
            .collect();
        let ran = probes::run_verifications(&self.workspace, &commands).await;
        let mut errors = Vec::new();
        for r in ran {
            if r.exit_code != Some(0) {
                errors.push(last_error_line(&r.output));
            }
            let _ = state.record_run(&r.id, r.exit_code, &r.output);
        }
        errors
    }

    /// One iteration of `action`; `Some` ends or pauses the sprint.
    async fn iteration(
        &self,
        action: LoopAction,
        state: &mut SprintState,
    ) -> Result<Option<SprintOutcome>, RunnerError> {
        let seq = self.dir.next_seq()?;
        let mut s = state.clone();
        s.iteration += 1;
        let before = ValueMeasure::of(state);
        let vision = self.read_input("VISION.md")?;
        let prd = self.read_input("PRD.md")?;
        let mut jobs: Vec<JobResult> = Vec::new();
        let mut errors: Vec<String> = Vec::new();
        let mut end = None;
        let iteration = s.iteration;
        let caller = |source: TaskSource, task: Option<String>| Caller {
            iteration,
            task,
            source,
            gate: None,
        };
        self.say(format!(
            "[iter {:>3}] {}",
            s.iteration,
            serde_json::to_value(action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ));
        let outcome: String = match action {
            LoopAction::InteractivePause => {
                if s.pause.is_none() {
                    if let Some(t) = s.tasks.iter().find(|t| t.needs_human()) {
                        if let Some(Block::HumanAction {
                            instructions,
                            verification,
                        }) = t.block.clone()
                        {
                            s.pause = Some(Pause {
                                task_id: t.id.clone(),
                                instructions,
                                verification,
                            });
                        }
                    }
                }
                let Some(pause) = s.pause.clone() else {
                    return Err(RunnerError::Inconsistent(
                        "INTERACTIVE_PAUSE was decided with no pause and no task waiting for a person".into(),
                    ));
                };
                let done = match &pause.verification {
                    Some(cmd) => {
                        let ran = probes::run_verifications(
                            &self.workspace,
                            &[("pause".to_string(), cmd.clone())],
                        )
                        .await;
                        ran.first().is_some_and(|r| r.exit_code == Some(0))
                    }
                    // `--confirm-pause` answers the pause the person saw, the one
                    // recorded when this run started, not a later one.
                    None => {
                        self.opts.confirm_pause && self.paused_at_start.as_ref() == Some(&pause)
                    }
                };
                if done {
                    s.pause = None;
                    if let Some(t) = s.task_mut(&pause.task_id) {
                        t.status = TaskStatus::Pending;
                        t.block = None;
                    }
                    format!("the person did it: task {} is pending again", pause.task_id)
                } else {
                    // Nobody has done it yet: exit resumably without spending an iteration.
                    // The pause is recorded once (`status` shows it; a resume checks it).
                    let how = match &pause.verification {
                        Some(cmd) => format!("`{cmd}` must pass"),
                        None => "resume with --confirm-pause once done".to_string(),
                    };
                    let instructions =
                        format!("task {}: {} ({how})", pause.task_id, pause.instructions);
                    if state.pause.as_ref() != Some(&pause) {
                        let mut paused = state.clone();
                        paused.pause = Some(pause.clone());
                        self.record(
                            seq,
                            EventKind::Paused {
                                instructions: instructions.clone(),
                            },
                            format!("paused: {instructions}"),
                            &[],
                            Some(self.last_monitor()?),
                            &paused,
                            None,
                        )?;
                        *state = paused;
                    }
                    return Ok(Some(SprintOutcome::Paused { instructions }));
                }
            }
            LoopAction::ServiceFix => {
                s.service_fixes_without_progress += 1;
                let down: Vec<Value> = s
                    .services
                    .iter()
                    .filter(|x| !x.healthy)
                    .map(|x| json!({"name": x.name, "check": x.check}))
                    .collect();
                let job = RoleJob::new(
                    Role::Fixer,
                    seq,
                    "bring the services that are down back up",
                    &[],
                    "These services do not answer their health check. Find why (their start command, configuration, the last changes) and fix it; a restart alone is not a fix. Call complete when done.",
                    caller(TaskSource::CourseCorrection, None),
                )
                .with("services_down", Value::Array(down))
                .with("verifications", roles::verifications_brief(&s))
                .with_checks(&checks_for(&s, &[], None));
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                jobs.push(r);
                self.refresh_services(&mut s).await;
                let up = s.services.iter().filter(|x| x.healthy).count();
                format!("services healthy: {up} of {}", s.services.len())
            }
            LoopAction::CourseCorrect => {
                let _ = s.record_course_correction(&self.limits);
                let monitor = self.last_monitor()?;
                let (health, triggers) = monitor.evaluate(&s, &self.limits, &self.monitor_config);
                let all: Vec<String> = s.verifications.iter().map(|v| v.id.clone()).collect();
                let failing = having(&s, &all, VerificationStatus::Failed);
                let job = RoleJob::new(
                    Role::Planner,
                    seq,
                    "correct the sprint's course so measured value rises again",
                    &["report_course_correction", MANAGE_TASK],
                    "Measured value has not risen (or a failure could not be fixed). Decide one course correction and call report_course_correction: restructure (change tasks with manage_task), descope (manage_task modify status descoped), new_tasks (manage_task add), regenerate_tests (the verifications are wrong), or escalate (a person must decide). Then call complete.",
                    caller(TaskSource::CourseCorrection, None),
                )
                .with("vision", Value::String(vision.clone()))
                .with("prd", Value::String(prd.clone()))
                .with("plan", roles::plan_brief(&s))
                .with("failing", roles::failing_brief(&s, &failing))
                .with(
                    "health",
                    json!({
                        "status": health,
                        "triggers": triggers.iter().map(|t| json!({"name": t.name, "level": t.level, "detail": t.detail})).collect::<Vec<_>>(),
                        "iterations_without_progress": s.iterations_without_progress,
                        "course_corrections_used": s.course_corrections,
                    }),
                );
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                let reported = r
                    .produced
                    .calls
                    .iter()
                    .any(|c| c == "report_course_correction");
                jobs.push(r);
                if reported {
                    "course corrected".to_string()
                } else {
                    "no course correction was reported".to_string()
                }
            }
            LoopAction::GenerateQc => {
                s.qc_generations += 1;
                let job = RoleJob::new(
                    Role::QcAuthor,
                    seq,
                    "write the verifications that prove the delivered value",
                    &["register_verification"],
                    "Write verifications that prove the PRD's acceptance criteria for the tasks that are done (and the ones planned): test files in the project, run by a command. Register each with register_verification (id, category, the shell command, the task ids it proves). A verification must fail when the value is missing. Then call complete.",
                    caller(TaskSource::Plan, None),
                )
                .with("prd", Value::String(prd.clone()))
                .with("plan", roles::plan_brief(&s))
                .with("verifications", roles::verifications_brief(&s));
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                jobs.push(r);
                format!("{} verification(s) registered", s.verifications.len())
            }
            LoopAction::Fix => {
                let failing: Vec<String> = s.fixable(&self.limits).map(|v| v.id.clone()).collect();
                let mut targets = failing.clone();
                let mut triage = Vec::new();
                if failing.len() > 1 {
                    let job = RoleJob::new(
                        Role::Classifier,
                        seq,
                        "group the failing verifications by root cause",
                        &["report_triage"],
                        "Several verifications fail. Group them by root cause with report_triage (each failing verification in exactly one root cause, priority 1 first). The accepted report ends your task.",
                        caller(TaskSource::Plan, None),
                    )
                    .with("failing", roles::failing_brief(&s, &failing))
                    .finishing_with("report_triage");
                    let r = self.run_job(&job, &s).await?;
                    s = r.state.clone();
                    triage = r.produced.triage.clone();
                    jobs.push(r);
                    if let Some(first) = triage.first() {
                        let named: Vec<String> = first
                            .affected_tests
                            .iter()
                            .filter(|id| failing.contains(id))
                            .cloned()
                            .collect();
                        if !named.is_empty() {
                            targets = named;
                        }
                    }
                }
                for id in &targets {
                    let _ = s.record_fix_attempt(id, &self.limits);
                }
                let research = self.research_so_far()?;
                let job = RoleJob::new(
                    Role::Fixer,
                    seq,
                    "make the failing verifications pass without breaking the others",
                    &[],
                    "These verifications fail. Find the root cause in the code (not in the verification, unless it is plainly wrong) and fix it; the checks run after every change, and a change that breaks a passing one is undone. Call complete when they pass.",
                    caller(TaskSource::Plan, None),
                )
                .with("failing", roles::failing_brief(&s, &targets))
                .with(
                    "triage",
                    serde_json::to_value(&triage).unwrap_or(Value::Null),
                )
                .with("research", research)
                .with_checks(&checks_for(&s, &targets, None));
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                jobs.push(r);
                // Measured: the targets, and every verification that passed before.
                let mut ids = targets.clone();
                for id in &s.regression_baseline {
                    if !ids.contains(id) {
                        ids.push(id.clone());
                    }
                }
                errors = self.measure(&mut s, &ids).await;
                let now_passing = having(&s, &targets, VerificationStatus::Passed).len();
                format!("fixed {now_passing} of {} targeted", targets.len())
            }
            LoopAction::Research => {
                let ids: Vec<String> = s.researchable(&self.limits).map(|v| v.id.clone()).collect();
                for id in &ids {
                    let _ = s.record_research(id);
                }
                let job = RoleJob::new(
                    Role::Researcher,
                    seq,
                    "find what the fixes missed",
                    &["report_research"],
                    "Every fix attempt for these verifications failed. Research why: read the code, the errors, the documentation the project ships. Call report_research with what to do differently (topic, findings, sources, the verification ids). The accepted report ends your task.",
                    caller(TaskSource::Plan, None),
                )
                .with("failing", roles::failing_brief(&s, &ids))
                .with("research", self.research_so_far()?)
                .finishing_with("report_research");
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                jobs.push(r);
                format!("researched {}", ids.join(", "))
            }
            LoopAction::Execute => {
                let Some(task) = s.next_task().cloned() else {
                    return Err(RunnerError::Inconsistent(
                        "EXECUTE was decided with no task ready".into(),
                    ));
                };
                if let Some(t) = s.task_mut(&task.id) {
                    t.status = TaskStatus::InProgress;
                }
                let job = RoleJob::new(
                    Role::Builder,
                    seq,
                    format!("deliver task {}: {}", task.id, task.description),
                    &["report_task_complete", "request_human_action"],
                    format!(
                        "Build task {} so its acceptance criteria hold. When it is built and checked, call report_task_complete (task_id {}, the files created and modified, how you checked the value), then complete. If only a person can do a step (a credential, an account), call request_human_action instead.",
                        task.id, task.id
                    ),
                    caller(task.source, Some(task.id.clone())),
                )
                .with("task", roles::task_brief(&task))
                .with("plan", roles::plan_around(&s, &task))
                .with("verifications", roles::verifications_for(&s, &task))
                .with("research", self.research_so_far()?)
                .with_checks(&checks_for(&s, &[], Some(&task.id)));
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                let done = s
                    .task(&task.id)
                    .is_some_and(|t| t.status == TaskStatus::Done);
                let blocked = s.task(&task.id).is_some_and(|t| t.needs_human());
                jobs.push(r);
                if done {
                    // Regression: the baseline, measured. A rollback already made for
                    // this iteration (a kill between it and the record) is not measured
                    // again: the rolled-back tree would pass and hide the break.
                    let marker = self.dir.path().join(format!("rolled-back-{seq}.json"));
                    let rolled_back: Option<Vec<String>> = std::fs::read_to_string(&marker)
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok());
                    let baseline: Vec<String> = s.regression_baseline.iter().cloned().collect();
                    let broke: Vec<String> = match &rolled_back {
                        Some(broke) => broke.clone(),
                        None => {
                            errors = self.measure(&mut s, &baseline).await;
                            having(&s, &baseline, VerificationStatus::Failed)
                        }
                    };
                    if broke.is_empty() {
                        // The verifications written for this task, not run yet: measured
                        // now, so value can rise while the plan is being built (they
                        // would otherwise wait until no task is ready).
                        let proving: Vec<String> = s
                            .verifications
                            .iter()
                            .filter(|v| {
                                v.status == VerificationStatus::Pending
                                    && v.proves.contains(&task.id)
                            })
                            .map(|v| v.id.clone())
                            .collect();
                        if proving.is_empty() {
                            format!("task {} done", task.id)
                        } else {
                            errors.extend(self.measure(&mut s, &proving).await);
                            let passing = having(&s, &proving, VerificationStatus::Passed);
                            format!(
                                "task {} done; {} of its {} verification(s) pass",
                                task.id,
                                passing.len(),
                                proving.len()
                            )
                        }
                    } else if let Some(git) = &self.git {
                        // The task broke what passed: back to the last verified commit.
                        if rolled_back.is_none() {
                            let text = serde_json::to_vec(&broke).unwrap_or_default();
                            agentforge_store::state_store::atomic_write(&marker, &text).map_err(
                                |source| SprintStoreError::Io {
                                    op: "cannot write",
                                    path: marker.display().to_string(),
                                    source,
                                },
                            )?;
                        }
                        // Every time, resumed or not: a kill may have come between the
                        // marker and the end of the rollback (it is idempotent).
                        git.rollback()?;
                        let _ = self.measure(&mut s, &broke).await;
                        let _ = s.task_not_completed(&task.id, &self.limits);
                        format!(
                            "task {} broke {} and was rolled back",
                            task.id,
                            broke.join(", ")
                        )
                    } else {
                        format!("task {} done; it broke {}", task.id, broke.join(", "))
                    }
                } else if blocked {
                    format!("task {} needs a person", task.id)
                } else {
                    let _ = s.task_not_completed(&task.id, &self.limits);
                    format!("task {} not completed", task.id)
                }
            }
            LoopAction::RunQc => {
                let all: Vec<String> = s.verifications.iter().map(|v| v.id.clone()).collect();
                let ids = having(&s, &all, VerificationStatus::Pending);
                errors = self.measure(&mut s, &ids).await;
                let passed = having(&s, &ids, VerificationStatus::Passed).len();
                format!("ran {} verification(s): {passed} pass", ids.len())
            }
            LoopAction::CriticalEval => {
                s.tasks_since_last_critical_eval = 0;
                s.last_critical_eval_iteration = s.iteration;
                let r = self
                    .evaluate(seq, &s, &vision, &prd, TaskSource::CriticalEval, false)
                    .await?;
                s = r.state.clone();
                jobs.push(r);
                vrc_line(&s)
            }
            LoopAction::ExitGate => {
                let _ = s.record_exit_gate(&self.limits);
                let all: Vec<String> = s.verifications.iter().map(|v| v.id.clone()).collect();
                errors = self.measure(&mut s, &all).await;
                let r = self
                    .evaluate(seq, &s, &vision, &prd, TaskSource::ExitGate, true)
                    .await?;
                s = r.state.clone();
                jobs.push(r);
                let ship = s.vrc_history.last().is_some_and(|v| {
                    v.iteration == s.iteration
                        && v.full
                        && !v.fallback
                        && v.recommendation == Recommendation::ShipReady
                });
                if ship && s.all_verifications_pass() {
                    end = Some(SprintOutcome::Delivered);
                    format!("exit gate passed: {}", vrc_line(&s))
                } else {
                    // A gap the guardrails refuse (a duplicate, the ceiling) is named, not
                    // dropped silently.
                    let (added, refused) = self.gap_tasks(&mut s);
                    format!(
                        "exit gate not passed ({}); {added} gap task(s) added{}",
                        vrc_line(&s),
                        if refused.is_empty() {
                            String::new()
                        } else {
                            format!("; refused: {}", refused.join("; "))
                        }
                    )
                }
            }
        };
        // The git safety net: what the iteration changed is one commit, unless it broke
        // a verification that passed before (a rolled-back task left nothing to commit).
        let broke_baseline = state.regression_baseline.iter().any(|id| {
            state
                .verification(id)
                .is_some_and(|v| v.status == VerificationStatus::Passed)
                && s.verification(id)
                    .is_some_and(|v| v.status == VerificationStatus::Failed)
        });
        // What a person did for a pause (a credential, an account) is never committed.
        let outcome = if broke_baseline
            || matches!(action, LoopAction::RunQc | LoopAction::InteractivePause)
        {
            outcome
        } else {
            let commit = self.commit(&format!(
                "{} iteration {}: {}",
                s.sprint, s.iteration, outcome
            ))?;
            format!("{outcome}{commit}")
        };
        // The heartbeat: a VRC of where the sprint stands after this iteration.
        if self.opts.vrc_every_iteration
            && !matches!(action, LoopAction::CriticalEval | LoopAction::ExitGate)
            && end.is_none()
        {
            let r = self.heartbeat(seq, &s, action, &vision, &prd).await?;
            s = r.state.clone();
            jobs.push(r);
        }
        // The services as the iteration leaves them (a fix may have broken one).
        self.refresh_services(&mut s).await;
        // Accounting, measured.
        let tokens: u64 = jobs.iter().map(|j| j.tokens).sum();
        s.tokens_used += tokens;
        let mut monitor = self.last_monitor()?;
        let mut files: Vec<String> = jobs.iter().flat_map(|j| j.files_modified.clone()).collect();
        files.sort();
        files.dedup();
        monitor.observe(
            &s,
            &IterationObservation {
                tokens,
                files_changed: files,
                errors,
            },
            &self.monitor_config,
        );
        let progressed = s.finish_iteration();
        let after = ValueMeasure::of(&s);
        self.say(format!(
            "[iter {:>3}] -> {outcome}; value {} (verifications passing {}, criteria proven {}){}",
            s.iteration,
            if progressed { "rose" } else { "did not rise" },
            after.verifications_passing,
            after.acceptance_proven,
            if jobs.is_empty() {
                String::new()
            } else {
                format!(
                    "; role steps {}",
                    jobs.iter()
                        .map(|j| j.steps.to_string())
                        .collect::<Vec<_>>()
                        .join("+")
                )
            }
        ));
        if end.is_some() {
            s.phase = SprintPhase::Finished;
        }
        let refs: Vec<&JobResult> = jobs.iter().collect();
        self.record(
            seq,
            EventKind::Iteration {
                decision: Decision::Act { action },
                measure_before: before,
                measure_after: after,
                progressed,
            },
            outcome,
            &refs,
            Some(monitor),
            &s,
            end.as_ref(),
        )?;
        *state = s;
        Ok(end)
    }

    /// The VRC heartbeat after an iteration (seed 002 section 10): full (the evaluator)
    /// in the first three iterations, every fifth and after a course correction (did it
    /// help?), quick otherwise (the classifier, on the metrics only); the fallback
    /// snapshot when no VRC comes.
    async fn heartbeat(
        &self,
        seq: u64,
        s: &SprintState,
        after: LoopAction,
        vision: &str,
        prd: &str,
    ) -> Result<JobResult, RunnerError> {
        let full =
            s.iteration <= 3 || s.iteration.is_multiple_of(5) || after == LoopAction::CourseCorrect;
        let caller = Caller {
            iteration: s.iteration,
            task: None,
            source: TaskSource::Vrc,
            gate: None,
        };
        let job = if full {
            RoleJob::new(
                Role::Evaluator,
                seq,
                "assess how much of the vision's value is delivered",
                &["report_vrc"],
                "FULL VRC: judge how much of the vision's value is delivered now, from the deliverable itself, the plan and the verifications. Call report_vrc once (deliverables, value score 0..1, gaps, recommendation); the accepted VRC ends your task. Gaps are recorded, they do not become tasks.",
                caller,
            )
            .with("vision", Value::String(vision.to_string()))
            .with("prd", Value::String(prd.to_string()))
            .with("plan", roles::plan_outline(s))
            .with("verifications", roles::verifications_brief(s))
        } else {
            let count = |st: TaskStatus| s.tasks.iter().filter(|t| t.status == st).count();
            let passing = s
                .verifications
                .iter()
                .filter(|v| v.status == VerificationStatus::Passed)
                .count();
            RoleJob::new(
                Role::Classifier,
                seq,
                "classify the sprint's progress from its metrics",
                &["report_vrc"],
                "QUICK VRC: from the metrics below only, classify progress toward the vision: call report_vrc once with the value score, the deliverables verified and a recommendation (CONTINUE unless the metrics say otherwise); the accepted VRC ends your task.",
                caller,
            )
            .with(
                "vrc",
                json!({
                    "tasks": format!("{} of {} done, {} blocked", count(TaskStatus::Done), s.tasks.len(), count(TaskStatus::Blocked)),
                    "verifications": format!("{passing} of {} passing", s.verifications.len()),
                    "previous": s.vrc_history.last().map(|v| json!({"iteration": v.iteration, "value_score": v.value_score, "recommendation": v.recommendation})),
                }),
            )
        }
        .named("vrc")
        .finishing_with("report_vrc");
        let mut r = self.run_job(&job, s).await?;
        settle_vrc(&mut r, s.iteration, full);
        Ok(r)
    }

    /// The evaluator: findings and a VRC (full at the exit gate). Without a VRC from it,
    /// the host's fallback snapshot (the share of passing verifications) stands in.
    async fn evaluate(
        &self,
        seq: u64,
        s: &SprintState,
        vision: &str,
        prd: &str,
        source: TaskSource,
        full: bool,
    ) -> Result<JobResult, RunnerError> {
        let job = RoleJob::new(
            Role::Evaluator,
            seq,
            "use the deliverable as its user would and score the value delivered",
            &["report_eval_finding", "report_vrc"],
            if full {
                "Exit gate: every verification was just re-run (see verifications). Use the deliverable as its user would: run it, read it, try the PRD's scenarios. Report each problem with report_eval_finding, then one full report_vrc (deliverables, value score 0..1, gaps, recommendation SHIP_READY only if the vision's value is delivered). The accepted VRC ends your task."
            } else {
                "Use the deliverable as its user would: run it, read it, try the PRD's scenarios. Report each problem with report_eval_finding (critical and blocking ones become tasks), then report_vrc with your value score and recommendation; the accepted VRC ends your task."
            },
            Caller {
                iteration: s.iteration,
                task: None,
                source,
                gate: None,
            },
        )
        .with("vision", Value::String(vision.to_string()))
        .with("prd", Value::String(prd.to_string()))
        .with("plan", roles::plan_brief(s))
        .with("verifications", roles::verifications_brief(s))
        .with_checks(&s.verifications)
        .finishing_with("report_vrc");
        let mut r = self.run_job(&job, s).await?;
        settle_vrc(&mut r, s.iteration, full);
        Ok(r)
    }

    /// The exit gate's gaps (of its VRC) become tasks, through the same guardrails as
    /// every plan change; the count added.
    fn gap_tasks(&self, s: &mut SprintState) -> (usize, Vec<String>) {
        let Some(vrc) = s.vrc_history.last().cloned() else {
            return (0, Vec::new());
        };
        let mut added = 0;
        let mut refused = Vec::new();
        for g in vrc.gaps {
            let call = agentforge_value_loop::manage_task::ManageTask::Add {
                task_id: format!("EG-{}-{}", s.iteration, g.id),
                description: g.suggested_task.clone().unwrap_or(g.description.clone()),
                value: format!("closes the gap: {}", g.description),
                acceptance: format!("the exit gate no longer finds: {}", g.description),
                dependencies: vec![],
                phase: String::new(),
                files_expected: vec![],
                prd_section: String::new(),
            };
            match agentforge_value_loop::manage_task::apply(
                call,
                TaskSource::ExitGate,
                s,
                &self.limits,
            ) {
                Ok(_) => added += 1,
                Err(why) => refused.push(format!("gap {}: {why}", g.id)),
            }
        }
        (added, refused)
    }

    /// The research briefs of earlier iterations (from their researchers' logs).
    fn research_so_far(&self) -> Result<Value, RunnerError> {
        let mut out = Vec::new();
        // Only the research iterations' lines are parsed (the log holds a state per line).
        let text = std::fs::read_to_string(self.dir.log_path()).unwrap_or_default();
        let events = text
            .lines()
            .filter(|l| l.contains("\"RESEARCH\""))
            .filter_map(|l| serde_json::from_str::<Event>(l).ok());
        for e in events {
            let EventKind::Iteration {
                decision:
                    Decision::Act {
                        action: LoopAction::Research,
                    },
                ..
            } = e.kind
            else {
                continue;
            };
            for task in &e.role_tasks {
                let dir = agentforge_store::state_store::TaskStore::new(&self.workspace).open(task);
                let Ok(dir) = dir else { continue };
                let Ok(records) = dir.read_actions() else {
                    continue;
                };
                for r in records {
                    if r.action == "report_research"
                        && r.result == agentforge_core::state::ActionResult::Success
                    {
                        out.push(r.parameters.clone());
                    }
                }
            }
        }
        Ok(if out.is_empty() {
            Value::Null
        } else {
            Value::Array(out)
        })
    }

    /// The process monitor as the last recorded iteration left it.
    fn last_monitor(&self) -> Result<ProcessMonitor, RunnerError> {
        // Every iteration event carries the monitor; a gate event (the pre-loop) none.
        Ok(self
            .dir
            .last_event()?
            .and_then(|e| e.monitor)
            .unwrap_or_default())
    }

    /// Commits what an iteration changed (where the workspace is a repository):
    /// ` (commit X)`. A failed commit stops the run (resumable): a later rollback would
    /// otherwise lose verified work that never reached a commit.
    fn commit(&self, message: &str) -> Result<String, RunnerError> {
        Ok(match &self.git {
            Some(git) => match git.commit(message)? {
                Some(hash) => format!(" (commit {hash})"),
                None => String::new(),
            },
            None => String::new(),
        })
    }
}

/// The checks of a role that changes code: what passed before (the executor reverts an
/// edit that breaks one), the verifications it must make pass (`targets`), and those
/// proving its task; never another task's verification that cannot pass yet, which
/// would keep `complete` refused.
fn checks_for(
    s: &SprintState,
    targets: &[String],
    task: Option<&str>,
) -> Vec<agentforge_value_loop::state::Verification> {
    s.verifications
        .iter()
        .filter(|v| {
            (s.regression_baseline.contains(&v.id) && v.status == VerificationStatus::Passed)
                || targets.contains(&v.id)
                || task.is_some_and(|t| v.proves.iter().any(|p| p == t))
        })
        .cloned()
        .collect()
}

/// A role task that owed a VRC: its own, marked full or quick, or else the fallback
/// snapshot, so the iteration always has one.
fn settle_vrc(r: &mut JobResult, iteration: u32, full: bool) {
    match r.state.vrc_history.last_mut() {
        Some(v)
            if v.iteration == iteration && r.produced.calls.iter().any(|c| c == "report_vrc") =>
        {
            v.full = full;
        }
        _ => push_fallback_vrc(&mut r.state, iteration, full),
    }
}

/// The fallback snapshot when a role gave no VRC (the heartbeat never skips): the share
/// of passing verifications, measured.
fn push_fallback_vrc(s: &mut SprintState, iteration: u32, full: bool) {
    let total = s.verifications.len() as u32;
    let passing = s
        .verifications
        .iter()
        .filter(|v| v.status == VerificationStatus::Passed)
        .count() as u32;
    s.vrc_history.push(VrcSnapshot {
        iteration,
        deliverables_total: total,
        deliverables_verified: passing,
        deliverables_blocked: 0,
        value_score: if total == 0 {
            0.0
        } else {
            f64::from(passing) / f64::from(total)
        },
        gaps: vec![],
        recommendation: Recommendation::Continue,
        summary: "fallback: no VRC was reported; this is the share of passing verifications".into(),
        full,
        fallback: true,
    });
}

/// Those of `ids` whose verification has `status` now.
fn having(s: &SprintState, ids: &[String], status: VerificationStatus) -> Vec<String> {
    ids.iter()
        .filter(|id| s.verification(id).is_some_and(|v| v.status == status))
        .cloned()
        .collect()
}

fn gate_event(gate: &str, verdict: &str) -> EventKind {
    EventKind::Gate {
        name: gate.to_string(),
        verdict: verdict.to_string(),
    }
}

/// One line about the latest VRC.
fn vrc_line(s: &SprintState) -> String {
    match s.vrc_history.last() {
        Some(v) => format!(
            "VRC {:.2} {:?}{}{}",
            v.value_score,
            v.recommendation,
            if v.full { ", full" } else { ", quick" },
            if v.fallback { ", fallback" } else { "" }
        ),
        None => "no VRC".to_string(),
    }
}

/// The last line of an output that looks like an error (for the monitor's recurring
/// errors), else its last non-empty line.
fn last_error_line(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("error") || lower.contains("failed") || lower.contains("panicked")
        })
        .or(lines.last())
        .map(|l| l.to_string())
        .unwrap_or_default()
}

fn describe(outcome: &SprintOutcome) -> String {
    match outcome {
        SprintOutcome::Delivered => "delivered".to_string(),
        SprintOutcome::Stopped {
            reason,
            partial_value,
        } => format!(
            "stopped ({}){}",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.get("stop").and_then(|x| x.as_str()).map(str::to_string))
                .unwrap_or_default(),
            if *partial_value {
                " with partial value"
            } else {
                " with no measured value"
            }
        ),
        SprintOutcome::Failed { reason } => format!("failed: {reason}"),
        SprintOutcome::Paused { instructions } => format!("paused: {instructions}"),
    }
}

/// Writes IMPLEMENTATION_PLAN.md and VALUE_CHECKLIST.md (and DELIVERY_REPORT.md when the
/// sprint ended) into the sprint folder, rendered from the state only.
pub fn write_views(
    dir: &SprintDir,
    state: &SprintState,
    outcome: Option<&SprintOutcome>,
) -> Result<(), SprintStoreError> {
    use agentforge_value_loop::render;
    if state.policy == Policy::FeatureList {
        return features::write_views(dir, state, outcome);
    }
    let mut files = vec![
        ("IMPLEMENTATION_PLAN.md", render::implementation_plan(state)),
        ("VALUE_CHECKLIST.md", render::value_checklist(state)),
    ];
    if let Some(o) = outcome {
        // The cost beside the tokens, from the role tasks' costs the events recorded.
        let cost = crate::cost_summary(&crate::cost_per_role(&dir.read_events()?));
        files.push((
            "DELIVERY_REPORT.md",
            render::delivery_report_with_cost(state, &o.for_report(), cost.as_deref()),
        ));
    }
    for (name, text) in files {
        let p = dir.path().join(name);
        agentforge_store::state_store::atomic_write(&p, text.as_bytes()).map_err(|source| {
            SprintStoreError::Io {
                op: "cannot write",
                path: p.display().to_string(),
                source,
            }
        })?;
    }
    Ok(())
}

/// What the host found in the workspace for discovery (files, project kind, tools).
fn workspace_survey(root: &Path) -> Value {
    let mut files: Vec<String> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    if e.path().is_dir() {
                        format!("{name}/")
                    } else {
                        name
                    }
                })
                .filter(|n| !n.starts_with(".agentforge") && n != ".git/")
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files.truncate(200);
    let kinds: Vec<&str> = [
        ("Cargo.toml", "rust"),
        ("package.json", "node"),
        ("pyproject.toml", "python"),
        ("setup.py", "python"),
        ("go.mod", "go"),
        ("Makefile", "make"),
    ]
    .iter()
    .filter(|(f, _)| root.join(f).exists())
    .map(|(_, k)| *k)
    .collect();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let tools: Vec<&str> = [
        "cargo", "rustc", "python3", "pytest", "node", "npm", "go", "make", "git", "curl",
    ]
    .iter()
    .copied()
    .filter(|t| std::env::split_paths(&path).any(|d| d.join(t).is_file()))
    .collect();
    json!({"files": files, "project_kinds": kinds, "tools_on_path": tools})
}

/// The role task of a pre-loop gate.
fn gate_job(
    gate: &str,
    seq: u64,
    s: &SprintState,
    vision: &str,
    prd: &str,
    workspace: &Path,
    caller: Caller,
) -> RoleJob {
    let discovery = serde_json::to_value(&s.discovery).unwrap_or(Value::Null);
    let critiques = serde_json::to_value(&s.critiques).unwrap_or(Value::Null);
    match gate {
        "vision" => RoleJob::new(
            Role::Critic,
            seq,
            "judge whether the vision can be delivered as written",
            &["report_vision_validation"],
            "Judge VISION.md: is the outcome clear, valuable to its user, achievable in this workspace and provable? Call report_vision_validation once: PASS, or NEEDS_REVISION with each issue HARD (value cannot be delivered as written) or SOFT (worth fixing, not blocking). The accepted report ends your task.",
            caller,
        )
        .with("vision", Value::String(vision.to_string()))
        .finishing_with("report_vision_validation"),
        "discovery" => RoleJob::new(
            Role::Classifier,
            seq,
            "discover the context the sprint works in",
            &["report_discovery"],
            "Discover the context: what the deliverable is, the project type, whether the codebase is greenfield or existing, the tools available (see workspace), the services it needs, and how value will be proven (the commands). Read files if needed. Call report_discovery once; the accepted report ends your task.",
            caller,
        )
        .with("vision", Value::String(vision.to_string()))
        .with("prd", Value::String(prd.to_string()))
        .with("workspace", workspace_survey(workspace))
        .finishing_with("report_discovery"),
        "prd_critique" => RoleJob::new(
            Role::Critic,
            seq,
            "critique the PRD before any plan is made",
            &["report_critique"],
            "Critique PRD.md against the vision and the discovered context: APPROVE, AMEND (with amendments), DESCOPE (what to drop) or REJECT (it cannot deliver the vision; say why). Call report_critique once; the accepted report ends your task.",
            caller,
        )
        .with("vision", Value::String(vision.to_string()))
        .with("prd", Value::String(prd.to_string()))
        .with("discovery", discovery)
        .finishing_with("report_critique"),
        "plan" => RoleJob::new(
            Role::Planner,
            seq,
            "write the plan as tasks",
            &[MANAGE_TASK],
            "Write the plan: call manage_task with action add once per task (task_id T1, T2, ...; description, value, acceptance, dependencies, files_expected, prd_section). Each task delivers a piece of value a verification can prove; few, small tasks. Mark the last one `last: true`: once it is accepted the plan is done.",
            caller,
        )
        .with("vision", Value::String(vision.to_string()))
        .with("prd", Value::String(prd.to_string()))
        .with("discovery", discovery)
        .with("findings", critiques)
        .with("plan", roles::plan_outline(s)),
        _ => RoleJob::new(
            Role::Critic,
            seq,
            "review the plan once before the work starts",
            &["report_critique"],
            "Review the plan once, for everything the seed's seven gates check: sources sound (CRAAP), tasks clear (CLARITY), each acceptance provable (VALIDATE), tasks connected to the PRD and each other (CONNECT), what would break (BREAK), what to cut (PRUNE), tidy (TIDY). Call report_critique once: APPROVE, AMEND (reasons), DESCOPE (descoped_tasks) or REJECT (the plan must be redone). The accepted report ends your task.",
            caller,
        )
        .with("vision", Value::String(vision.to_string()))
        .with("prd", Value::String(prd.to_string()))
        .with("plan", roles::plan_brief(s))
        .finishing_with("report_critique"),
    }
}

/// A gate's verdict from the state its role left (`after`, changed here when the gate
/// passes), and the end it causes, if any.
fn judge_gate(
    gate: &str,
    before: &SprintState,
    after: &mut SprintState,
    dir: &SprintDir,
) -> (String, Option<SprintOutcome>) {
    use agentforge_value_loop::state::{CritiqueVerdict, IssueSeverity, VisionVerdict};
    let pass = |after: &mut SprintState, verdict: String| {
        after.gates_passed.insert(gate.to_string());
        (verdict, None)
    };
    let new_critique = || {
        (after.critiques.len() > before.critiques.len())
            .then(|| after.critiques.last().cloned())
            .flatten()
    };
    match gate {
        "vision" => match after.vision_validation.clone() {
            Some(v) if v.verdict == VisionVerdict::Pass => pass(after, "PASS".into()),
            Some(v) => {
                let hard: Vec<String> = v
                    .issues
                    .iter()
                    .filter(|i| i.severity == IssueSeverity::Hard)
                    .map(|i| i.description.clone())
                    .collect();
                if hard.is_empty() {
                    pass(after, "NEEDS_REVISION (SOFT issues only): passed".into())
                } else {
                    (
                        "NEEDS_REVISION (HARD)".into(),
                        Some(SprintOutcome::Paused {
                            instructions: format!(
                                "the vision has HARD issues: {}; revise {} and resume",
                                hard.join("; "),
                                dir.path().join("VISION.md").display()
                            ),
                        }),
                    )
                }
            }
            None => ("no report".into(), None),
        },
        "discovery" => {
            if after.discovery.is_some() {
                pass(after, "reported".into())
            } else {
                ("no report".into(), None)
            }
        }
        "prd_critique" => match new_critique() {
            Some(c) if c.verdict == CritiqueVerdict::Reject => (
                "REJECT".into(),
                Some(SprintOutcome::Failed {
                    reason: format!("the PRD was rejected: {}", c.reasons.join("; ")),
                }),
            ),
            Some(c) => pass(after, format!("{:?}", c.verdict).to_uppercase()),
            None => ("no report".into(), None),
        },
        "plan" => {
            let planned = after
                .tasks
                .iter()
                .filter(|t| t.source == TaskSource::Plan)
                .count();
            if planned > 0 {
                after.gates_passed.insert("plan_generated".into());
                pass(after, format!("{planned} task(s)"))
            } else {
                ("no task".into(), None)
            }
        }
        _ => match new_critique() {
            Some(c) if gate == "plan_review" && c.verdict == CritiqueVerdict::Reject => {
                // Redo the plan (its own attempts bound this).
                after.tasks.retain(|t| t.source != TaskSource::Plan);
                after.gates_passed.remove("plan");
                after.gates_passed.remove("plan_generated");
                ("REJECT: the plan is redone".into(), None)
            }
            Some(c) if gate == "plan_review" => {
                pass(after, format!("{:?}", c.verdict).to_uppercase())
            }
            // A plan gate that rejects the plan runs again (its attempts bound it).
            Some(c) if c.verdict == CritiqueVerdict::Reject => {
                (format!("REJECT: {}", c.reasons.join("; ")), None)
            }
            Some(c) => pass(after, format!("{:?}", c.verdict).to_uppercase()),
            None => ("no report".into(), None),
        },
    }
}

/// The role task of an opt-in plan gate: the critic with the seed's check for a
/// built-in gate, or the project's own task type for another name.
fn plan_gate_job(
    name: &str,
    seq: u64,
    s: &SprintState,
    vision: &str,
    prd: &str,
    caller: Caller,
) -> RoleJob {
    let check = PLAN_GATE_CHECKS
        .iter()
        .find(|(g, _)| *g == name)
        .map(|(_, c)| c.to_string());
    let instructions = format!(
        "{} Amend the plan where needed with manage_task (add, modify, or modify status descoped), then call report_critique once with your verdict (APPROVE, AMEND with reasons, DESCOPE, or REJECT when the plan cannot deliver the vision as it stands); the accepted report ends your task.",
        check.clone().unwrap_or_else(|| format!("Plan gate `{name}`: check the plan as your task type defines."))
    );
    let mut job = RoleJob::new(
        Role::Critic,
        seq,
        format!("plan gate {name}"),
        &[MANAGE_TASK, "report_critique"],
        instructions,
        caller,
    )
    .with("vision", Value::String(vision.to_string()))
    .with("prd", Value::String(prd.to_string()))
    .with(
        "discovery",
        serde_json::to_value(&s.discovery).unwrap_or(Value::Null),
    )
    .with("plan", roles::plan_brief(s))
    .finishing_with("report_critique");
    if check.is_none() {
        job.task_type = Some(name.to_string());
    }
    job
}

/// The host's preflight: every tool discovery named is on PATH, and so is the program
/// of every verification command it proposed. The problems found.
async fn preflight(s: &SprintState, workspace: &Path) -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = |name: &str| {
        name.contains('/') && workspace.join(name).exists()
            || std::env::split_paths(&path).any(|d| d.join(name).is_file())
    };
    let mut problems = Vec::new();
    let Some(d) = &s.discovery else {
        return vec!["no discovery was recorded".to_string()];
    };
    for tool in &d.tools {
        let program = tool.split_whitespace().next().unwrap_or_default();
        if !program.is_empty() && !on_path(program) {
            problems.push(format!("tool `{program}` is not on PATH"));
        }
    }
    for cmd in &d.verification_commands {
        let program = cmd
            .split_whitespace()
            .find(|w| !w.contains('='))
            .unwrap_or_default();
        let shell_word = matches!(program, "cd" | "test" | "[" | "true" | "false" | "echo");
        if !program.is_empty() && !shell_word && !on_path(program) {
            problems.push(format!("`{program}` (of `{cmd}`) is not on PATH"));
        }
    }
    problems
}
