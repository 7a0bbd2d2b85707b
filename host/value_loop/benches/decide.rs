//! `cargo bench -p agentforge-value-loop --bench decide`: the decision engine's overhead
//! per iteration (decide + measure + finish_iteration) on a large sprint (60 tasks, 200
//! verifications with failure history, 200 VRCs), as min / median / max over 7 runs of
//! 1,000 iterations each.

use std::time::Instant;

use agentforge_value_loop::state::{
    Recommendation, SprintTask, TaskSource, TaskStatus, Verification, VrcSnapshot,
};
use agentforge_value_loop::{decide, Limits, SprintState};

fn sprint() -> SprintState {
    let mut s = SprintState::new("bench");
    s.gates_passed.insert("plan_generated".into());
    for i in 0..60 {
        let mut t = SprintTask::new(
            format!("T{i}"),
            TaskSource::Plan,
            format!("task {i}"),
            "v",
            "a",
        );
        if i > 0 {
            t.dependencies = vec![format!("T{}", i - 1)];
        }
        if i < 40 {
            t.status = TaskStatus::Done;
        }
        s.tasks.push(t);
    }
    for i in 0..200 {
        let mut v = Verification::new(format!("v{i}"), "unit", "true");
        v.proves = vec![format!("T{}", i % 60)];
        s.verifications.push(v);
        let ok = i % 7 != 0;
        s.record_run(
            &format!("v{i}"),
            Some(if ok { 0 } else { 1 }),
            "error: assertion failed",
        )
        .unwrap();
    }
    for i in 0..200 {
        s.vrc_history.push(VrcSnapshot {
            iteration: i,
            deliverables_total: 10,
            deliverables_verified: 5,
            deliverables_blocked: 0,
            value_score: 0.5,
            gaps: vec![],
            recommendation: Recommendation::Continue,
            summary: "s".into(),
            full: false,
            fallback: false,
        });
    }
    s
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("decide bench: run with `cargo bench -p agentforge-value-loop --bench decide`");
        return;
    }
    let limits = Limits::default();
    let mut s = sprint();
    let mut per_iter = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..1000 {
            let d = decide(&limits, &s);
            std::hint::black_box(&d);
            s.iteration = 1;
            s.finish_iteration();
            s.iterations_without_progress = 0;
        }
        per_iter.push(t.elapsed().as_secs_f64() / 1000.0);
    }
    per_iter.sort_by(f64::total_cmp);
    println!(
        "decision engine per iteration (decide + measure), 60 tasks / 200 verifications: median {:.1} us (min {:.1}, max {:.1}, 7 runs of 1,000)",
        per_iter[3] * 1e6,
        per_iter[0] * 1e6,
        per_iter[6] * 1e6
    );
}
