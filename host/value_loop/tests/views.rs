//! The rendered views, snapshot-tested so a change in what a person reads is reviewed.

use agentforge_value_loop::decide::StopReason;
use agentforge_value_loop::render::{
    delivery_report, delivery_report_with_cost, implementation_plan, value_checklist, Outcome,
};
use agentforge_value_loop::state::{
    Block, Gap, Recommendation, SprintState, SprintTask, TaskSource, TaskStatus, Verification,
    VrcSnapshot,
};

fn sprint() -> SprintState {
    let mut s = SprintState::new("csv-report");
    let mut t1 = SprintTask::new(
        "T1",
        TaskSource::Plan,
        "Parse the sales CSV into records",
        "The report reads real exports",
        "tests/test_parse.py passes",
    );
    t1.phase = "foundation".into();
    t1.status = TaskStatus::Done;
    t1.files_expected = vec!["report/parse.py".into()];
    let mut t2 = SprintTask::new(
        "T2",
        TaskSource::Plan,
        "Render totals per region",
        "Managers see totals at a glance",
        "python -m report totals prints one line per region",
    );
    t2.phase = "core".into();
    t2.dependencies = vec!["T1".into()];
    t2.status = TaskStatus::Done;
    let mut t3 = SprintTask::new(
        "VRC-1",
        TaskSource::Vrc,
        "Upload the report to the shared drive",
        "Nobody has to copy it by hand",
        "the file appears in the drive",
    );
    t3.phase = "core".into();
    t3.status = TaskStatus::Blocked;
    t3.block = Some(Block::HumanAction {
        instructions: "create a drive API token and export DRIVE_TOKEN".into(),
        verification: Some("test -n \"$DRIVE_TOKEN\"".into()),
    });
    let mut t4 = SprintTask::new(
        "T3",
        TaskSource::Plan,
        "PDF export",
        "Printable",
        "a PDF is written",
    );
    t4.status = TaskStatus::Descoped;
    s.tasks = vec![t1, t2, t3, t4];
    let mut v1 = Verification::new("parse", "unit", "pytest -q tests/test_parse.py");
    v1.proves = vec!["T1".into()];
    let mut v2 = Verification::new("totals", "value", "python -m report totals");
    v2.proves = vec!["T2".into()];
    s.verifications = vec![v1, v2];
    s.record_run("parse", Some(0), "").unwrap();
    s.record_fix_attempt("totals", &Default::default()).unwrap();
    s.record_run("totals", Some(1), "KeyError: 'region'\nTraceback ...")
        .unwrap();
    s.vrc_history.push(VrcSnapshot {
        iteration: 6,
        deliverables_total: 3,
        deliverables_verified: 1,
        deliverables_blocked: 1,
        value_score: 0.7,
        gaps: vec![Gap {
            id: "g1".into(),
            description: "totals crash on files without a region column".into(),
            severity: "high".into(),
            suggested_task: None,
        }],
        recommendation: Recommendation::Continue,
        summary: "Parsing works; totals fail on real exports.".into(),
        full: true,
        fallback: false,
    });
    s.iteration = 7;
    s.course_corrections = 1;
    s.tokens_used = 182_000;
    s
}

#[test]
fn implementation_plan_view() {
    insta::assert_snapshot!(implementation_plan(&sprint()));
}

#[test]
fn value_checklist_view() {
    insta::assert_snapshot!(value_checklist(&sprint()));
}

#[test]
fn delivery_report_view() {
    insta::assert_snapshot!(delivery_report(
        &sprint(),
        &Outcome::Stopped(StopReason::CourseCorrectionsSpent { max: 5 })
    ));
}

#[test]
fn delivery_report_names_the_services_and_their_health_at_the_end() {
    let mut s = sprint();
    s.services.push(agentforge_value_loop::state::Service {
        name: "api".into(),
        check: "tcp://127.0.0.1:8080".into(),
        healthy: false,
    });
    insta::assert_snapshot!(delivery_report(
        &s,
        &Outcome::Stopped(StopReason::CourseCorrectionsSpent { max: 5 })
    ));
}

#[test]
fn delivery_report_shows_the_cost_beside_the_tokens() {
    insta::assert_snapshot!(delivery_report_with_cost(
        &sprint(),
        &Outcome::Delivered,
        Some("$0.4212 (builder $0.30, planner $0.1212)")
    ));
}

#[test]
fn delivery_report_says_an_unknown_cost_is_unknown() {
    // A sprint whose role tasks reported no usage (a replayed session) or ran an
    // unpriced model: the host's summary says unknown, and the report shows it as given.
    insta::assert_snapshot!(delivery_report_with_cost(
        &sprint(),
        &Outcome::Delivered,
        Some("unknown (12 unpriced steps); per role: builder unknown, critic unknown")
    ));
}
