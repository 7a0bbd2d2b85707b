//! The decision engine driven through whole sprints with random outcomes (issue 12,
//! item 6): whatever the roles do (fixes that never work, a service that keeps falling
//! over, a builder that never reports, an evaluator that never says ship-ready, near-
//! duplicate task proposals), every sprint ends within its bounds, and no counter ever
//! passes its bound on the way.

use std::collections::BTreeMap;

use agentforge_value_loop::limits::{ceiling, Limits, LimitsConfig};
use agentforge_value_loop::manage_task::{apply, ManageTask};
use agentforge_value_loop::state::{
    Block, Gap, Pause, Recommendation, Service, SprintPhase, SprintState, SprintTask, TaskSource,
    TaskStatus, Verification, VerificationStatus, VrcSnapshot,
};
use agentforge_value_loop::{decide, Decision, LoopAction};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the simulated roles behave: each a probability that an attempt works.
#[derive(Debug, Clone)]
struct World {
    seed: u64,
    builder_reports: f64,
    fix_works: f64,
    qc_passes: f64,
    service_falls: f64,
    service_fix_works: f64,
    evaluator_ship_ready: f64,
    proposes_tasks: f64,
    person_present: bool,
}

fn worlds() -> impl Strategy<Value = World> {
    (
        any::<u64>(),
        0.0..1.0f64,
        prop_oneof![Just(0.0), 0.0..1.0f64],
        prop_oneof![Just(0.0), 0.0..0.5f64, Just(1.0)],
        0.0..1.0f64,
        prop_oneof![Just(0.0), 0.0..1.0f64],
        0.0..1.0f64,
        any::<bool>(),
        0.0..1.0f64,
    )
        .prop_map(|(seed, b, f, sf, sfw, e, p, person, q)| World {
            seed,
            builder_reports: b,
            fix_works: f,
            qc_passes: q,
            service_falls: sf,
            service_fix_works: sfw,
            evaluator_ship_ready: e,
            proposes_tasks: p,
            person_present: person,
        })
}

/// How a sprint ended.
#[derive(Debug, PartialEq)]
enum End {
    Delivered,
    Stopped,
    PausedNobodyThere,
}

struct Sim {
    w: World,
    rng: StdRng,
    next_id: u32,
    research_runs: BTreeMap<String, u32>,
}

impl Sim {
    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p.clamp(0.0, 1.0))
    }

    fn word(&mut self) -> String {
        const W: &[&str] = &[
            "export", "import", "report", "chart", "login", "search", "filter", "cache", "retry",
            "backup", "upload", "audit",
        ];
        W[self.rng.random_range(0..W.len())].to_string()
    }

    /// A model proposing a task: often a near-duplicate of what exists.
    fn propose(&mut self, s: &mut SprintState, limits: &Limits, source: TaskSource) {
        let id = self.id("X");
        let description = format!("add the {} {} page", self.word(), self.word());
        let call = ManageTask::Add {
            task_id: id,
            description,
            value: "users get it".into(),
            acceptance: "its verification passes".into(),
            dependencies: vec![],
            phase: String::new(),
            files_expected: vec![],
            prd_section: String::new(),
        };
        let _ = apply(call, source, s, limits);
    }

    fn run_verifications(&mut self, s: &mut SprintState, ids: &[String], pass: f64) {
        for id in ids {
            let ok = self.chance(pass);
            s.record_run(id, Some(if ok { 0 } else { 1 }), "out")
                .unwrap();
        }
    }

    fn step(&mut self, a: LoopAction, s: &mut SprintState, limits: &Limits) -> Option<End> {
        match a {
            LoopAction::InteractivePause => {
                if s.pause.is_none() {
                    let t = s.tasks.iter().find(|t| t.needs_human()).unwrap();
                    let Some(Block::HumanAction {
                        instructions,
                        verification,
                    }) = t.block.clone()
                    else {
                        unreachable!()
                    };
                    s.pause = Some(Pause {
                        task_id: t.id.clone(),
                        instructions,
                        verification,
                    });
                }
                if !self.w.person_present {
                    // The run exits resumably; a person resumes it later.
                    return Some(End::PausedNobodyThere);
                }
                let id = s.pause.take().unwrap().task_id;
                let t = s.task_mut(&id).unwrap();
                t.status = TaskStatus::Pending;
                t.block = None;
            }
            LoopAction::ServiceFix => {
                s.service_fixes_without_progress += 1;
                if self.chance(self.w.service_fix_works) {
                    for svc in &mut s.services {
                        svc.healthy = true;
                    }
                }
            }
            LoopAction::CourseCorrect => {
                s.record_course_correction(limits).unwrap();
                match self.rng.random_range(0..5) {
                    0 => s.escalated = Some("needs a person".into()),
                    1 => s.invalidate_verifications(),
                    2 => {
                        if let Some(t) = s.tasks.iter_mut().find(|t| t.is_open()) {
                            t.status = TaskStatus::Descoped;
                            t.block = None;
                        }
                    }
                    _ => self.propose(s, limits, TaskSource::CourseCorrection),
                }
                s.iterations_without_progress = 0;
            }
            LoopAction::GenerateQc => {
                s.qc_generations += 1;
                s.gates_passed.insert("verifications_generated".into());
                let done: Vec<String> = s
                    .tasks
                    .iter()
                    .filter(|t| t.status == TaskStatus::Done)
                    .map(|t| t.id.clone())
                    .collect();
                for _ in 0..self.rng.random_range(1..4) {
                    let id = self.id("v");
                    let mut v = Verification::new(&id, "unit", "true");
                    if !done.is_empty() {
                        v.proves = vec![done[self.rng.random_range(0..done.len())].clone()];
                    }
                    s.verifications.push(v);
                }
            }
            LoopAction::Fix => {
                let ids: Vec<String> = s.fixable(limits).map(|v| v.id.clone()).collect();
                assert!(!ids.is_empty());
                for id in &ids {
                    s.record_fix_attempt(id, limits).unwrap();
                }
                let p = self.w.fix_works;
                self.run_verifications(s, &ids, p);
            }
            LoopAction::Research => {
                let ids: Vec<String> = s.researchable(limits).map(|v| v.id.clone()).collect();
                assert!(!ids.is_empty());
                for id in ids {
                    s.record_research(&id).unwrap();
                    *self.research_runs.entry(id).or_default() += 1;
                }
            }
            LoopAction::Execute => {
                let id = s.next_task().unwrap().id.clone();
                s.task_mut(&id).unwrap().status = TaskStatus::InProgress;
                if self.chance(0.05) {
                    let t = s.task_mut(&id).unwrap();
                    t.status = TaskStatus::Blocked;
                    t.block = Some(Block::HumanAction {
                        instructions: "create an API token".into(),
                        verification: None,
                    });
                } else if self.chance(self.w.builder_reports) {
                    s.task_mut(&id).unwrap().status = TaskStatus::Done;
                    s.tasks_since_last_critical_eval += 1;
                    // Regression: a passing verification may break.
                    let passing: Vec<String> = s
                        .verifications
                        .iter()
                        .filter(|v| v.status == VerificationStatus::Passed)
                        .map(|v| v.id.clone())
                        .collect();
                    if let Some(v) = passing.first() {
                        if self.chance(0.2) {
                            s.record_run(v, Some(1), "regressed").unwrap();
                        }
                    }
                } else {
                    s.task_not_completed(&id, limits).unwrap();
                }
            }
            LoopAction::RunQc => {
                let ids: Vec<String> = s
                    .verifications
                    .iter()
                    .filter(|v| v.status == VerificationStatus::Pending)
                    .map(|v| v.id.clone())
                    .collect();
                let p = self.w.qc_passes;
                self.run_verifications(s, &ids, p);
            }
            LoopAction::CriticalEval => {
                s.tasks_since_last_critical_eval = 0;
                s.last_critical_eval_iteration = s.iteration;
                if self.chance(self.w.proposes_tasks) {
                    self.propose(s, limits, TaskSource::CriticalEval);
                }
                self.vrc(s, false);
            }
            LoopAction::ExitGate => {
                s.record_exit_gate(limits).unwrap();
                if self.vrc(s, true) {
                    return Some(End::Delivered);
                }
                if self.chance(self.w.proposes_tasks) {
                    self.propose(s, limits, TaskSource::ExitGate);
                }
            }
        }
        None
    }

    /// A VRC; true when it says ship-ready.
    fn vrc(&mut self, s: &mut SprintState, full: bool) -> bool {
        let ship = self.chance(self.w.evaluator_ship_ready);
        s.vrc_history.push(VrcSnapshot {
            iteration: s.iteration,
            deliverables_total: 3,
            deliverables_verified: 1,
            deliverables_blocked: 0,
            value_score: if ship {
                0.95
            } else {
                self.rng.random_range(0.0..0.9)
            },
            gaps: vec![Gap {
                id: "g".into(),
                description: "missing".into(),
                severity: "high".into(),
                suggested_task: None,
            }],
            recommendation: if ship {
                Recommendation::ShipReady
            } else {
                Recommendation::Continue
            },
            summary: String::new(),
            full,
            fallback: false,
        });
        ship
    }
}

fn sprint() -> SprintState {
    let mut s = SprintState::new("prop");
    s.phase = SprintPhase::ValueLoop;
    s.gates_passed.insert("plan_generated".into());
    for (i, d) in [
        "parse the input file",
        "render the summary table",
        "write the export command",
    ]
    .iter()
    .enumerate()
    {
        let mut t = SprintTask::new(format!("T{i}"), TaskSource::Plan, *d, "v", "a");
        if i > 0 {
            t.dependencies = vec![format!("T{}", i - 1)];
        }
        s.tasks.push(t);
    }
    s.services.push(Service {
        name: "api".into(),
        check: "http://127.0.0.1:1/health".into(),
        healthy: true,
    });
    s
}

fn check_bounds(s: &SprintState, l: &Limits, sim: &Sim) {
    assert!(s.iteration <= l.max_iterations());
    assert!(s.course_corrections <= l.max_course_corrections());
    assert!(s.exit_gate_attempts <= l.max_exit_gate_attempts());
    assert!(s.qc_generations <= l.max_qc_generations());
    assert!(s.service_fixes_without_progress <= l.max_service_fixes());
    assert!(s.open_mid_loop_tasks() as u32 <= l.max_mid_loop_tasks());
    for v in &s.verifications {
        assert!(
            v.attempts <= l.max_fix_attempts(),
            "{}: {}",
            v.id,
            v.attempts
        );
    }
    for t in &s.tasks {
        assert!(t.retry_count <= l.max_task_retries(), "{}", t.id);
    }
    for (id, n) in &sim.research_runs {
        assert_eq!(*n, 1, "research ran {n} times for {id}");
    }
}

fn run(w: World, limits: &Limits) -> (End, SprintState) {
    let mut s = sprint();
    let mut sim = Sim {
        rng: StdRng::seed_from_u64(w.seed),
        w,
        next_id: 0,
        research_runs: BTreeMap::new(),
    };
    // More decisions than the iteration bound allows would be a bug: the loop must
    // stop by itself, so this outer cap is never what ends it.
    for _ in 0..=limits.max_iterations() + 1 {
        check_bounds(&s, limits, &sim);
        match decide(limits, &s) {
            Decision::Stop(_) => return (End::Stopped, s),
            Decision::Act { action } => {
                s.iteration += 1;
                s.tokens_used += sim.rng.random_range(1_000..40_000);
                if sim.chance(sim.w.service_falls * 0.3) {
                    s.services[0].healthy = false;
                }
                let end = sim.step(action, &mut s, limits);
                s.finish_iteration();
                check_bounds(&s, limits, &sim);
                if let Some(end) = end {
                    return (end, s);
                }
            }
        }
    }
    panic!(
        "the loop did not stop within {} iterations",
        limits.max_iterations()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_sprint_ends_within_its_bounds(w in worlds()) {
        let (_, s) = run(w, &Limits::default());
        prop_assert!(s.iteration <= ceiling::ITERATIONS);
    }

    #[test]
    fn lowered_bounds_hold_too(w in worlds(), fixes in 1u32..=5, cc in 1u32..=5, iters in 5u32..=60) {
        let limits = Limits::new(&LimitsConfig {
            max_fix_attempts: Some(fixes),
            max_course_corrections: Some(cc),
            max_iterations: Some(iters),
            ..Default::default()
        }).unwrap();
        let (_, s) = run(w, &limits);
        prop_assert!(s.iteration <= iters);
    }
}

/// The failure modes of issue 12's tests, each deterministic: they end, and how.
#[test]
fn named_failure_modes_end_honestly() {
    let l = Limits::default();
    let base = World {
        seed: 7,
        builder_reports: 1.0,
        fix_works: 1.0,
        qc_passes: 1.0,
        service_falls: 0.0,
        service_fix_works: 1.0,
        evaluator_ship_ready: 1.0,
        proposes_tasks: 0.0,
        person_present: true,
    };
    // Everything works: delivered.
    assert_eq!(run(base.clone(), &l).0, End::Delivered);
    // An evaluator that never says ship-ready: the exit gate's attempts end it.
    let (end, s) = run(
        World {
            evaluator_ship_ready: 0.0,
            ..base.clone()
        },
        &l,
    );
    assert_eq!(end, End::Stopped);
    assert_eq!(s.exit_gate_attempts, 3);
    // Fixes that never work: bounded attempts, research once, then course corrections.
    let (end, s) = run(
        World {
            fix_works: 0.0,
            qc_passes: 0.0,
            ..base.clone()
        },
        &l,
    );
    assert_eq!(end, End::Stopped);
    assert!(s.verifications.iter().all(|v| v.attempts <= 5));
    // A service that falls over after every fix: service fixes are not progress.
    let (end, s) = run(
        World {
            service_falls: 1.0 / 0.3,
            fix_works: 0.0,
            qc_passes: 0.0,
            ..base.clone()
        },
        &l,
    );
    assert_eq!(end, End::Stopped);
    assert!(s.iteration < l.max_iterations());
    // A builder that never reports: every task blocked after its retries.
    let (end, s) = run(
        World {
            builder_reports: 0.0,
            ..base
        },
        &l,
    );
    assert_eq!(end, End::Stopped);
    assert!(s
        .tasks
        .iter()
        .filter(|t| t.source == TaskSource::Plan && t.status == TaskStatus::Blocked)
        .all(|t| t.retry_count == 3));
}
