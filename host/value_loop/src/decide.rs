//! The decision engine (seed 002 section 5.1): a pure function from the sprint's state
//! to what the loop does next. No model call, no clock, no I/O: the same state always
//! gives the same decision, so every rule is table-tested and a resumed sprint decides
//! exactly as the interrupted one would have.
//!
//! The seed's priorities, with the bounds that make every path end:
//!
//! | # | rule | action |
//! |---|------|--------|
//! | - | escalated, iterations or tokens spent | stop |
//! | 0 | paused for a person | `InteractivePause` |
//! | 1 | a service is down (and service fixes are left) | `ServiceFix` |
//! | 2 | no measured progress for `max_no_progress` iterations | `CourseCorrect` (stop when spent) |
//! | 3 | no verifications yet, enough tasks done, plan generated | `GenerateQc` |
//! | 4 | a verification fails: fixes left / research not yet run for it / else | `Fix` / `Research` / `CourseCorrect` |
//! | 5 | a task needs a person | `InteractivePause` |
//! | 6 | a task is ready | `Execute` |
//! | 7 | a verification has not run | `RunQc` |
//! | 8 | critical evaluation is due | `CriticalEval` |
//! | 9 | every task done or closed and every verification passes | `ExitGate` (stop when spent) |
//! | - | otherwise | `CourseCorrect` (stop when spent) |

use serde::{Deserialize, Serialize};

use crate::limits::Limits;
use crate::state::{SprintState, TaskStatus, VerificationStatus};

/// What the loop does in an iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LoopAction {
    /// Wait for a person, or check that what they were asked to do is done.
    InteractivePause,
    /// Bring a service back (software deliverables only); never progress by itself.
    ServiceFix,
    /// Re-plan, descope, regenerate verifications or escalate.
    CourseCorrect,
    /// Write the verifications (QC author).
    GenerateQc,
    /// Fix failing verifications, triaged by root cause when several fail.
    Fix,
    /// Research a failure the fixes could not solve (once per verification).
    Research,
    /// Run the next task (builder).
    Execute,
    /// Run verifications that have not run.
    RunQc,
    /// Use the deliverable as its user would (evaluator, read-only).
    CriticalEval,
    /// Fresh verification sweep and a fresh full VRC: the only way out with value.
    ExitGate,
}

/// Why the loop stops without passing the exit gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum StopReason {
    /// The iteration bound.
    IterationLimit {
        /// The bound.
        max: u32,
    },
    /// The token budget.
    TokenBudget {
        /// Tokens used.
        used: u64,
        /// The budget.
        budget: u64,
    },
    /// A course correction was needed and all were spent.
    CourseCorrectionsSpent {
        /// The bound.
        max: u32,
    },
    /// The exit gate was due and all its attempts were spent.
    ExitGateAttemptsSpent {
        /// The bound.
        max: u32,
    },
    /// A course correction escalated to a person.
    Escalated {
        /// What it said.
        reason: String,
    },
    /// Feature-list policy: the initializer gave no valid feature list in its attempts.
    InitializerSpent {
        /// The bound.
        max: u32,
    },
    /// Feature-list policy: no feature is left to run and some are blocked.
    FeaturesBlocked {
        /// Features whose tests passed.
        passed: u32,
        /// Features blocked (failed tests spent, a blocked dependency, set aside).
        blocked: u32,
    },
}

/// The engine's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run this action in the next iteration.
    Act {
        /// The action.
        action: LoopAction,
    },
    /// End the loop (partial value or failure; the report says which).
    Stop(StopReason),
}

fn act(action: LoopAction) -> Decision {
    Decision::Act { action }
}

/// Course correction if one is left, else stop.
fn course_correct(limits: &Limits, s: &SprintState) -> Decision {
    if s.course_corrections < limits.max_course_corrections {
        act(LoopAction::CourseCorrect)
    } else {
        Decision::Stop(StopReason::CourseCorrectionsSpent {
            max: limits.max_course_corrections,
        })
    }
}

/// Whether critical evaluation is due: every `critical_eval_interval` tasks, or when
/// every verification passes and no VRC has scored 0.9 yet (the seed's rule), at most
/// once per rise of measured value (an evaluator that never says ship-ready cannot make
/// this fire forever).
fn critical_eval_due(limits: &Limits, s: &SprintState) -> bool {
    if s.tasks_since_last_critical_eval >= limits.critical_eval_interval {
        return true;
    }
    let high_score = s.vrc_history.iter().any(|v| v.value_score >= 0.9);
    let new_since_last = s.last_critical_eval_iteration == 0
        || s.last_progress_iteration > s.last_critical_eval_iteration;
    s.all_verifications_pass() && !high_score && new_since_last
}

/// The stops every policy shares, checked first: escalated, the iteration bound, the
/// token budget (the value policy here, the feature-list policy in
/// [`crate::features::decide`]).
pub fn shared_stop(limits: &Limits, s: &SprintState) -> Option<StopReason> {
    if let Some(reason) = &s.escalated {
        return Some(StopReason::Escalated {
            reason: reason.clone(),
        });
    }
    if s.iteration >= limits.max_iterations {
        return Some(StopReason::IterationLimit {
            max: limits.max_iterations,
        });
    }
    if s.tokens_used >= limits.token_budget {
        return Some(StopReason::TokenBudget {
            used: s.tokens_used,
            budget: limits.token_budget,
        });
    }
    None
}

/// The next action for a sprint in its value loop.
pub fn decide(limits: &Limits, s: &SprintState) -> Decision {
    if let Some(stop) = shared_stop(limits, s) {
        return Decision::Stop(stop);
    }
    // 0. Paused: check whether the person did it (no model call).
    if s.pause.is_some() {
        return act(LoopAction::InteractivePause);
    }
    // 1. Services down.
    if s.services.iter().any(|svc| !svc.healthy)
        && s.service_fixes_without_progress < limits.max_service_fixes
    {
        return act(LoopAction::ServiceFix);
    }
    // 2. Stuck.
    if s.iterations_without_progress >= limits.max_no_progress {
        return course_correct(limits, s);
    }
    // 3. Verifications are written early, once there is work to verify.
    let done = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Done)
        .count() as u32;
    if s.verifications.is_empty()
        && done >= limits.generate_verifications_after
        && s.gate_passed("plan_generated")
        && s.qc_generations < limits.max_qc_generations
    {
        return act(LoopAction::GenerateQc);
    }
    // 4. Failures before new work.
    if s.verifications
        .iter()
        .any(|v| v.status == VerificationStatus::Failed)
    {
        if s.fixable(limits).next().is_some() {
            return act(LoopAction::Fix);
        }
        if s.researchable(limits).next().is_some() {
            return act(LoopAction::Research);
        }
        return course_correct(limits, s);
    }
    // 5. A person is needed.
    if s.tasks.iter().any(|t| t.needs_human()) {
        return act(LoopAction::InteractivePause);
    }
    // 6. Work that is ready.
    if s.next_task().is_some() {
        return act(LoopAction::Execute);
    }
    // 7. Verifications not yet run.
    if s.verifications
        .iter()
        .any(|v| v.status == VerificationStatus::Pending)
    {
        return act(LoopAction::RunQc);
    }
    // 8. Critical evaluation.
    if critical_eval_due(limits, s) {
        return act(LoopAction::CriticalEval);
    }
    // 9. Everything done and passing: the exit gate.
    let pending = s.tasks.iter().any(|t| t.status == TaskStatus::Pending);
    if s.all_verifications_pass() && !pending {
        if s.exit_gate_attempts < limits.max_exit_gate_attempts {
            return act(LoopAction::ExitGate);
        }
        return Decision::Stop(StopReason::ExitGateAttemptsSpent {
            max: limits.max_exit_gate_attempts,
        });
    }
    course_correct(limits, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::LimitsConfig;
    use crate::state::{
        Block, Pause, Recommendation, Service, SprintTask, TaskSource, Verification, VrcSnapshot,
    };

    fn base() -> SprintState {
        let mut s = SprintState::new("s");
        s.gates_passed.insert("plan_generated".into());
        s.tasks
            .push(SprintTask::new("T1", TaskSource::Plan, "d1", "v", "a"));
        s.tasks
            .push(SprintTask::new("T2", TaskSource::Plan, "d2", "v", "a"));
        s
    }

    fn done(s: &mut SprintState, id: &str) {
        s.task_mut(id).unwrap().status = TaskStatus::Done;
    }

    fn verification(s: &mut SprintState, id: &str, status: VerificationStatus, attempts: u32) {
        let mut v = Verification::new(id, "unit", "true");
        v.status = status;
        v.attempts = attempts;
        s.verifications.push(v);
    }

    fn vrc(score: f64) -> VrcSnapshot {
        VrcSnapshot {
            iteration: 1,
            deliverables_total: 1,
            deliverables_verified: 1,
            deliverables_blocked: 0,
            value_score: score,
            gaps: vec![],
            recommendation: Recommendation::Continue,
            summary: String::new(),
            full: false,
            fallback: false,
        }
    }

    fn act_of(d: Decision) -> LoopAction {
        match d {
            Decision::Act { action } => action,
            Decision::Stop(r) => panic!("stopped: {r:?}"),
        }
    }

    /// One row per rule: a state built for it and the decision the table says.
    #[test]
    fn each_rule_in_priority_order() {
        let l = Limits::default();
        type Build = fn(&mut SprintState);
        let rows: Vec<(&str, Build, Decision)> = vec![
            ("fresh plan: execute", |_| {}, act(LoopAction::Execute)),
            (
                "paused beats everything but the stops",
                |s| {
                    s.pause = Some(Pause {
                        task_id: "T1".into(),
                        instructions: "x".into(),
                        verification: None,
                    });
                    s.services.push(Service {
                        name: "api".into(),
                        check: "tcp://127.0.0.1:1".into(),
                        healthy: false,
                    });
                    s.iterations_without_progress = 10;
                },
                act(LoopAction::InteractivePause),
            ),
            (
                "service down: service fix before stuck",
                |s| {
                    s.services.push(Service {
                        name: "api".into(),
                        check: "tcp://127.0.0.1:1".into(),
                        healthy: false,
                    });
                    s.iterations_without_progress = 10;
                },
                act(LoopAction::ServiceFix),
            ),
            (
                "service fixes spent: the service no longer wins",
                |s| {
                    s.services.push(Service {
                        name: "api".into(),
                        check: "tcp://127.0.0.1:1".into(),
                        healthy: false,
                    });
                    s.service_fixes_without_progress = 3;
                },
                act(LoopAction::Execute),
            ),
            (
                "stuck: course correct",
                |s| s.iterations_without_progress = 10,
                act(LoopAction::CourseCorrect),
            ),
            (
                "stuck with corrections spent: stop",
                |s| {
                    s.iterations_without_progress = 10;
                    s.course_corrections = 5;
                },
                Decision::Stop(StopReason::CourseCorrectionsSpent { max: 5 }),
            ),
            (
                "a task done, no verifications: generate QC",
                |s| done(s, "T1"),
                act(LoopAction::GenerateQc),
            ),
            (
                "QC generations spent: no more generating",
                |s| {
                    done(s, "T1");
                    s.qc_generations = 3;
                },
                act(LoopAction::Execute),
            ),
            (
                "plan not generated: no QC yet",
                |s| {
                    done(s, "T1");
                    s.gates_passed.clear();
                },
                act(LoopAction::Execute),
            ),
            (
                "a failure with attempts left: fix before executing",
                |s| {
                    done(s, "T1");
                    verification(s, "v1", VerificationStatus::Failed, 4);
                },
                act(LoopAction::Fix),
            ),
            (
                "fixes spent: research",
                |s| {
                    done(s, "T1");
                    verification(s, "v1", VerificationStatus::Failed, 5);
                },
                act(LoopAction::Research),
            ),
            (
                "fixes spent and researched: course correct",
                |s| {
                    done(s, "T1");
                    verification(s, "v1", VerificationStatus::Failed, 5);
                    s.researched.insert("v1".into());
                },
                act(LoopAction::CourseCorrect),
            ),
            (
                "fixes spent, researched, corrections spent: stop",
                |s| {
                    done(s, "T1");
                    verification(s, "v1", VerificationStatus::Failed, 5);
                    s.researched.insert("v1".into());
                    s.course_corrections = 5;
                },
                Decision::Stop(StopReason::CourseCorrectionsSpent { max: 5 }),
            ),
            (
                "a task needs a person: pause",
                |s| {
                    let t = s.task_mut("T2").unwrap();
                    t.status = TaskStatus::Blocked;
                    t.block = Some(Block::HumanAction {
                        instructions: "log in".into(),
                        verification: None,
                    });
                },
                act(LoopAction::InteractivePause),
            ),
            (
                "a blocked task that needs no person does not pause",
                |s| {
                    let t = s.task_mut("T2").unwrap();
                    t.status = TaskStatus::Blocked;
                    t.block = Some(Block::RetriesExhausted { attempts: 3 });
                },
                act(LoopAction::Execute),
            ),
            (
                "tasks done, a verification pending: run QC",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Pending, 0);
                },
                act(LoopAction::RunQc),
            ),
            (
                "all passing for the first time: critical evaluation",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Passed, 0);
                },
                act(LoopAction::CriticalEval),
            ),
            (
                "interval reached: critical evaluation",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Passed, 0);
                    s.vrc_history.push(vrc(0.95));
                    s.tasks_since_last_critical_eval = 3;
                },
                act(LoopAction::CriticalEval),
            ),
            (
                "evaluated, no progress since: exit gate",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Passed, 0);
                    s.vrc_history.push(vrc(0.5));
                    s.last_critical_eval_iteration = 7;
                    s.last_progress_iteration = 6;
                },
                act(LoopAction::ExitGate),
            ),
            (
                "a high VRC: exit gate",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Passed, 0);
                    s.vrc_history.push(vrc(0.92));
                },
                act(LoopAction::ExitGate),
            ),
            (
                "exit gate spent: stop",
                |s| {
                    done(s, "T1");
                    done(s, "T2");
                    verification(s, "v1", VerificationStatus::Passed, 0);
                    s.vrc_history.push(vrc(0.92));
                    s.exit_gate_attempts = 3;
                },
                Decision::Stop(StopReason::ExitGateAttemptsSpent { max: 3 }),
            ),
            (
                "pending tasks whose dependencies can never finish: course correct",
                |s| {
                    let t1 = s.task_mut("T1").unwrap();
                    t1.status = TaskStatus::Blocked;
                    t1.block = Some(Block::Other { reason: "x".into() });
                    s.task_mut("T2").unwrap().dependencies = vec!["T1".into()];
                },
                act(LoopAction::CourseCorrect),
            ),
            (
                "iterations spent",
                |s| s.iteration = 200,
                Decision::Stop(StopReason::IterationLimit { max: 200 }),
            ),
            (
                "tokens spent",
                |s| s.tokens_used = 5_000_000,
                Decision::Stop(StopReason::TokenBudget {
                    used: 5_000_000,
                    budget: 5_000_000,
                }),
            ),
            (
                "escalated",
                |s| s.escalated = Some("needs a person".into()),
                Decision::Stop(StopReason::Escalated {
                    reason: "needs a person".into(),
                }),
            ),
        ];
        for (name, build, want) in rows {
            let mut s = base();
            build(&mut s);
            assert_eq!(decide(&l, &s), want, "{name}");
        }
    }

    #[test]
    fn a_lower_configured_bound_applies() {
        let l = Limits::new(&LimitsConfig {
            max_fix_attempts: Some(2),
            ..Default::default()
        })
        .unwrap();
        let mut s = base();
        done(&mut s, "T1");
        verification(&mut s, "v1", VerificationStatus::Failed, 2);
        assert_eq!(act_of(decide(&l, &s)), LoopAction::Research);
    }

    #[test]
    fn the_decision_depends_on_state_only() {
        let l = Limits::default();
        let mut s = base();
        done(&mut s, "T1");
        verification(&mut s, "v1", VerificationStatus::Failed, 1);
        let json = serde_json::to_string(&s).unwrap();
        let resumed: SprintState = serde_json::from_str(&json).unwrap();
        assert_eq!(decide(&l, &s), decide(&l, &resumed));
    }
}
