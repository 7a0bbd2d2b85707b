//! The feature-list policy's iterations (seed 003's session state machine; issue 14,
//! item 6) on the value loop's runner: the same sprint folder and log (one fsynced line
//! per iteration), the same role tasks on the executor (ids fixed by the iteration's
//! sequence number, so a resume continues them), the same bounds. Only the decision
//! function differs ([`agentforge_value_loop::features::decide`]):
//!
//! - `Initialize`: the planner role writes the feature list from the goal
//!   (`report_feature_list`, checked as `features.json` is);
//! - `Code`: one builder task for the feature (the failure of its last test shown after
//!   a failed test), with the verify commands of the features that passed as its checks
//!   (the executor undoes an edit that breaks one);
//! - `Test`: the host runs the feature's verify commands itself: the feature passes on
//!   their exit codes, never on what a model says;
//! - `Block`: no session; the feature is set aside and the next one follows.

use serde_json::{json, Value};

use agentforge_value_loop::features::{
    self as policy, Feature, FeatureAction, FeatureBlock, FeatureDecision, FeatureStatus,
    TestFailure, REPORT_FEATURE_LIST,
};
use agentforge_value_loop::state::{SprintState, TaskSource, Verification};
use agentforge_value_loop::StopReason;

use super::{workspace_survey, JobResult, RunnerError, SprintOutcome, SprintRunner};
use crate::probes;
use crate::roles::{Role, RoleJob};
use crate::{EventKind, SprintDir, SprintStoreError};
use agentforge_value_loop::reports::Caller;

/// Output of a failed verify command kept in the state (the end, where the verdict
/// is): every log line carries the state, so it stays small.
const KEPT_FAILURE_BYTES: usize = 2000;

/// The feature report's file name in the sprint folder.
pub const REPORT_FILE: &str = "FEATURE_REPORT.md";
/// The progress view's file name in the sprint folder (`features.json`'s shape).
pub const PROGRESS_FILE: &str = "features.json";

fn passed(s: &SprintState) -> u32 {
    s.feature_list
        .as_ref()
        .map_or(0, |l| l.count(FeatureStatus::Passed))
}

/// One line for an action (`CODE F-2`, `TEST F-2`...).
fn action_line(a: &FeatureAction) -> String {
    match a {
        FeatureAction::Initialize => "INITIALIZE".to_string(),
        FeatureAction::Code { feature } => format!("CODE {feature}"),
        FeatureAction::Test { feature } => format!("TEST {feature}"),
        FeatureAction::Block { feature, .. } => format!("BLOCK {feature}"),
    }
}

/// The verify commands of `f` as the sprint's verification type (ids `F-1#1`...): the
/// shape the executor's checks and the host's probes take.
fn verifications_of(f: &Feature) -> Vec<Verification> {
    f.verify
        .iter()
        .enumerate()
        .map(|(i, c)| Verification::new(format!("{}#{}", f.id, i + 1), "feature", c.clone()))
        .collect()
}

impl SprintRunner<'_> {
    /// Decides and runs one iteration of the feature-list policy; `Some` ends the sprint.
    pub(super) async fn feature_step(
        &self,
        state: &mut SprintState,
    ) -> Result<Option<SprintOutcome>, RunnerError> {
        let action = match policy::decide(&self.limits, state) {
            FeatureDecision::Done { blocked: 0, .. } => return Ok(Some(SprintOutcome::Delivered)),
            FeatureDecision::Done { passed, blocked } => {
                return Ok(Some(SprintOutcome::Stopped {
                    reason: StopReason::FeaturesBlocked { passed, blocked },
                    partial_value: passed > 0,
                }))
            }
            FeatureDecision::Stop(reason) => {
                return Ok(Some(SprintOutcome::Stopped {
                    reason,
                    partial_value: passed(state) > 0,
                }))
            }
            FeatureDecision::Act { action } => action,
        };
        let seq = self.dir.next_seq()?;
        let mut s = state.clone();
        s.iteration += 1;
        let passed_before = passed(state);
        let iteration = s.iteration;
        let caller = |task: Option<String>| Caller {
            iteration,
            task,
            source: TaskSource::Plan,
            gate: None,
        };
        let inconsistent = |e: String| RunnerError::Inconsistent(e);
        self.say(format!(
            "[iter {:>3}] {}",
            s.iteration,
            action_line(&action)
        ));
        let mut jobs: Vec<JobResult> = Vec::new();
        let outcome = match &action {
            FeatureAction::Initialize => {
                let list = s.feature_list.get_or_insert_with(Default::default);
                list.initializer_attempts += 1;
                let goal = list.goal.clone();
                let job = RoleJob::new(
                    Role::Planner,
                    seq,
                    "break the goal into a feature list",
                    &[REPORT_FEATURE_LIST],
                    "Break the goal into a feature list: small features in the order to build them, each with `verify`, shell commands run in the workspace whose exit code 0 proves the feature works (tests the coding sessions will make pass). Read files if you need to. Call report_feature_list once; the accepted list ends your task.",
                    caller(None),
                )
                .with("goal", Value::String(goal))
                .with("workspace", workspace_survey(&self.workspace))
                .finishing_with(REPORT_FEATURE_LIST);
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                jobs.push(r);
                let n = s.feature_list.as_ref().map_or(0, |l| l.features.len());
                if n > 0 {
                    format!("feature list written: {n} feature(s)")
                } else {
                    "no valid feature list was reported".to_string()
                }
            }
            FeatureAction::Code { feature } => {
                let list = s
                    .feature_list
                    .as_ref()
                    .ok_or_else(|| inconsistent("CODE was decided with no feature list".into()))?;
                let f = list
                    .feature(feature)
                    .cloned()
                    .ok_or_else(|| inconsistent(format!("CODE for unknown feature {feature}")))?;
                // The features that passed are the regression baseline: their commands
                // are the session's checks, so an edit that breaks one is undone.
                let baseline: Vec<Verification> = list
                    .features
                    .iter()
                    .filter(|x| x.status == FeatureStatus::Passed)
                    .flat_map(verifications_of)
                    .collect();
                let outline: Vec<Value> = list
                    .features
                    .iter()
                    .map(|x| {
                        Value::String(format!("{} [{}] {}", x.id, x.status.name(), x.description))
                    })
                    .collect();
                let retrying = f.status == FeatureStatus::Failed;
                let failure = f.last_failure.as_ref().filter(|_| retrying).map(|fail| {
                    json!({
                        "command": fail.command,
                        "exit_code": fail.exit_code,
                        "output": fail.output,
                        "failed_tests": f.retry,
                        "max_failed_tests": self.limits.max_feature_retries(),
                    })
                });
                let job = RoleJob::new(
                    Role::Builder,
                    seq,
                    format!("implement feature {}: {}", f.id, f.description),
                    &[],
                    format!(
                        "Implement feature {} in the workspace. The host tests it after your session by running its verify commands itself: every one must exit 0. {}Do not weaken the verify commands or their tests. Call complete when the feature is built.",
                        f.id,
                        if retrying {
                            "Its last test failed (see last_failure): fix what the failure shows. "
                        } else {
                            ""
                        }
                    ),
                    caller(Some(f.id.clone())),
                )
                .with(
                    "feature",
                    json!({"id": f.id, "description": f.description, "verify": f.verify, "depends_on": f.depends_on}),
                )
                .with("goal", Value::String(list.goal.clone()))
                .with("features", Value::Array(outline))
                .with("last_failure", failure.unwrap_or(Value::Null))
                .with_checks(&baseline);
                let r = self.run_job(&job, &s).await?;
                s = r.state.clone();
                // However the session ended, the tester judges the code (seed 003's
                // "coding complete" is the session's end here, not its claim).
                s.feature_list
                    .as_mut()
                    .ok_or_else(|| inconsistent("the feature list vanished".into()))?
                    .coding_done(feature, &self.limits)
                    .map_err(|e| inconsistent(e.to_string()))?;
                let line = format!(
                    "{feature} coded (the session {} after {} step(s)); the tester is next",
                    if r.completed {
                        "completed"
                    } else {
                        "ended without completing"
                    },
                    r.steps
                );
                jobs.push(r);
                let commit = self.commit(&format!(
                    "{} iteration {}: feature {feature} coded",
                    s.sprint, s.iteration
                ))?;
                format!("{line}{commit}")
            }
            FeatureAction::Test { feature } => {
                let f = s
                    .feature_list
                    .as_ref()
                    .and_then(|l| l.feature(feature))
                    .cloned()
                    .ok_or_else(|| inconsistent(format!("TEST for unknown feature {feature}")))?;
                let commands: Vec<(String, String)> = verifications_of(&f)
                    .into_iter()
                    .map(|v| (v.id, v.command))
                    .collect();
                let ran = probes::run_verifications(&self.workspace, &commands).await;
                // The first command (in the list's order) that did not exit 0; one that
                // did not run at all fails too.
                let failure = commands.iter().find_map(|(id, cmd)| {
                    let r = ran.iter().find(|r| &r.id == id);
                    match r {
                        Some(r) if r.exit_code == Some(0) => None,
                        Some(r) => Some(TestFailure {
                            command: cmd.clone(),
                            exit_code: r.exit_code,
                            output: crate::roles::tail(&r.output, KEPT_FAILURE_BYTES),
                        }),
                        None => Some(TestFailure {
                            command: cmd.clone(),
                            exit_code: None,
                            output: "the host could not run it".into(),
                        }),
                    }
                });
                let ok = ran.iter().filter(|r| r.exit_code == Some(0)).count();
                let line = match &failure {
                    None => format!(
                        "{feature} passed: {ok} of {} verify command(s) exit 0",
                        commands.len()
                    ),
                    Some(fail) => format!(
                        "{feature} failed ({} of {} failed tests): `{}` {}",
                        (f.retry + 1).min(self.limits.max_feature_retries()),
                        self.limits.max_feature_retries(),
                        fail.command,
                        fail.exit_code
                            .map_or("timed out".to_string(), |c| format!("exit {c}"))
                    ),
                };
                s.feature_list
                    .as_mut()
                    .ok_or_else(|| inconsistent("the feature list vanished".into()))?
                    .record_test(feature, failure, &self.limits)
                    .map_err(|e| inconsistent(e.to_string()))?;
                line
            }
            FeatureAction::Block { feature, why } => {
                s.feature_list
                    .as_mut()
                    .ok_or_else(|| inconsistent("the feature list vanished".into()))?
                    .block(feature, why.clone())
                    .map_err(|e| inconsistent(e.to_string()))?;
                match why {
                    FeatureBlock::RetriesExhausted { failed_tests } => {
                        format!("{feature} blocked after {failed_tests} failed tests; the next feature follows")
                    }
                    FeatureBlock::Dependency { feature: dep } => {
                        format!("{feature} blocked: it depends on {dep}, which is blocked")
                    }
                    FeatureBlock::Input => format!("{feature} blocked"),
                }
            }
        };
        s.tokens_used += jobs.iter().map(|j| j.tokens).sum::<u64>();
        let passed_after = passed(&s);
        self.say(format!(
            "[iter {:>3}] -> {outcome}; features passed: {passed_after}",
            s.iteration
        ));
        let refs: Vec<&JobResult> = jobs.iter().collect();
        self.record(
            seq,
            EventKind::Feature {
                decision: FeatureDecision::Act { action },
                passed_before,
                passed_after,
            },
            outcome,
            &refs,
            None,
            &s,
            None,
        )?;
        *state = s;
        Ok(None)
    }
}

/// FEATURE_REPORT.md and the progress view `features.json` in the sprint folder,
/// rendered from the state only (written atomically after every event).
pub(super) fn write_views(
    dir: &SprintDir,
    state: &SprintState,
    outcome: Option<&SprintOutcome>,
) -> Result<(), SprintStoreError> {
    let cost = match outcome {
        Some(_) => crate::cost_summary(&crate::cost_per_role(&dir.read_events()?)),
        None => None,
    };
    let report = policy::report(
        state,
        outcome.map(|o| o.for_report()).as_ref(),
        cost.as_deref(),
    );
    let progress = serde_json::to_vec_pretty(&policy::progress_view(state)).unwrap_or_default();
    for (name, bytes) in [
        (REPORT_FILE, report.into_bytes()),
        (PROGRESS_FILE, progress),
    ] {
        let p = dir.path().join(name);
        agentforge_store::state_store::atomic_write(&p, &bytes).map_err(|source| {
            SprintStoreError::Io {
                op: "cannot write",
                path: p.display().to_string(),
                source,
            }
        })?;
    }
    Ok(())
}
