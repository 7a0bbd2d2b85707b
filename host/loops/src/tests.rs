//! Unit tests: one or more per detector, the legitimate patterns that must not trip it,
//! signatures and normalization, and property tests.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use agentforge_core::state::ActionResult::{self, Failure, Partial, Skipped, Success};

/// Builds trajectories step by step.
#[derive(Default)]
struct Traj {
    steps: Vec<StepView>,
    checks: Option<(usize, usize)>,
    /// Tests passed and failed at the last run, reported again by edits (which re-run them).
    counts: (usize, usize),
}

impl Traj {
    fn new() -> Self {
        Traj::default()
    }

    fn with_checks(passing: usize, failing: usize) -> Self {
        Traj {
            checks: Some((passing, failing)),
            ..Traj::default()
        }
    }

    fn push(
        &mut self,
        action: &str,
        target: Option<&str>,
        parameters: Value,
        result: ActionResult,
        summary: &str,
        error: Option<&str>,
    ) -> &mut StepView {
        self.steps.push(StepView {
            step: self.steps.len() as u64 + 1,
            action: action.to_string(),
            target: target.map(str::to_string),
            parameters,
            result,
            error: error.map(str::to_string),
            summary: summary.to_string(),
            file_hashes: BTreeMap::new(),
            checks_passing: self.checks.map(|c| c.0),
            checks_failing: self.checks.map(|c| c.1),
            output_len: None,
            output_hash: None,
            output: None,
            thought: None,
        });
        self.steps.last_mut().unwrap()
    }

    fn read(&mut self, path: &str) -> &mut Self {
        self.push(
            "read_file",
            Some(path),
            json!({ "path": path }),
            Success,
            &format!("read {path} (100 lines)"),
            None,
        );
        self
    }

    fn search(&mut self, pattern: &str) -> &mut Self {
        self.push(
            "search",
            Some(pattern),
            json!({ "pattern": pattern }),
            Success,
            &format!("search /{pattern}/: 2 matches in 1 files"),
            None,
        );
        self
    }

    /// A successful edit leaving the checks at `checks`.
    fn edit(
        &mut self,
        path: &str,
        old: &str,
        new: &str,
        hash: &str,
        checks: (usize, usize),
    ) -> &mut Self {
        self.checks = Some(checks);
        if checks.1 == 0 {
            self.counts = (self.counts.0 + self.counts.1, 0);
        }
        let (passed, failed) = self.counts;
        let summary = format!(
            "edited {path}: replaced 1 line(s) at line 3 with 1 line(s); checks: tests: tests: {passed} passed, {failed} failed (exit {})",
            if failed == 0 { 0 } else { 101 }
        );
        let s = self.push(
            "edit_file",
            Some(path),
            json!({ "path": path, "old_text": old, "new_text": new }),
            Success,
            &summary,
            None,
        );
        s.file_hashes.insert(path.to_string(), hash.to_string());
        self
    }

    fn edit_not_found(&mut self, path: &str, old: &str) -> &mut Self {
        self.push(
            "edit_file",
            Some(path),
            json!({ "path": path, "old_text": old, "new_text": "x" }),
            Failure,
            &format!("edit_file failed: old_text not found in `{path}`"),
            Some(&format!(
                "old_text was not found in `{path}`; it must match the file exactly, including whitespace."
            )),
        );
        self
    }

    /// `run_tests` with `failed` failures; `failing_test` names the failing test.
    fn tests(&mut self, passed: usize, failed: usize, failing_test: &str) -> &mut Self {
        self.counts = (passed, failed);
        let summary = format!(
            "tests: tests: {passed} passed, {failed} failed (exit {})",
            if failed == 0 { 0 } else { 101 }
        );
        let error = (failed > 0).then(|| {
            format!(
                "tests: ---- {failing_test} stdout ----\nthread '{failing_test}' panicked at src/lib.rs:40:9:\nassertion `left == right` failed\n\nfailures:\n    {failing_test}\n\ntest result: FAILED. {passed} passed; {failed} failed; finished in 0.0{}s",
                passed % 10
            )
        });
        self.push(
            "run_tests",
            None,
            json!({}),
            if failed == 0 { Success } else { Failure },
            &summary,
            error.as_deref(),
        );
        self
    }

    fn detector() -> LoopDetector {
        LoopDetector::default()
    }

    fn check(&self) -> Option<Detection> {
        Self::detector().check(&self.steps)
    }

    fn replay(&self) -> Vec<Detection> {
        Self::detector().replay(&self.steps)
    }
}

fn types(d: &[Detection]) -> Vec<(LoopType, u64)> {
    d.iter().map(|d| (d.loop_type, d.step)).collect()
}

// ---------------------------------------------------------------- identical

#[test]
fn identical_failing_edit_three_times_in_a_row() {
    let mut t = Traj::with_checks(1, 1);
    t.read("src/a.rs");
    for _ in 0..3 {
        t.edit_not_found("src/a.rs", "fn parse(x: u8) {");
    }
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::IdenticalAction);
    assert_eq!(d.step, 4);
    assert_eq!(d.confidence, 1.0);
    assert_eq!(d.block.as_deref(), Some("edit_file:src/a.rs"));
    assert_eq!(d.evidence.len(), 3);
    assert!(
        d.suggestions[0].contains("re-read `src/a.rs`"),
        "{:?}",
        d.suggestions
    );
    assert!(d.suggestions.iter().any(|s| s.contains("replace_lines")));
}

#[test]
fn identical_needs_the_threshold() {
    let mut t = Traj::new();
    t.edit_not_found("src/a.rs", "x")
        .edit_not_found("src/a.rs", "x");
    assert_eq!(t.check(), None);
}

#[test]
fn identical_same_error_with_other_arguments_counts() {
    // Seed 000: same parameters *or* same error.
    let mut t = Traj::new();
    t.edit_not_found("src/a.rs", "one")
        .edit_not_found("src/a.rs", "two")
        .edit_not_found("src/a.rs", "three");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::IdenticalAction);
    assert!(d.description.contains("same error"));
}

#[test]
fn identical_test_reruns_suggest_changing_code() {
    let mut t = Traj::with_checks(0, 1);
    t.tests(3, 1, "tests::a")
        .tests(3, 1, "tests::a")
        .tests(3, 1, "tests::a");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::IdenticalAction);
    assert_eq!(d.block.as_deref(), Some("run_tests:"));
    assert!(d.suggestions[0].contains("without modification"));
}

#[test]
fn identical_invalid_replies_are_not_blocked() {
    let mut t = Traj::new();
    for said in ["I will fix it", "Here is my plan", "Let me think"] {
        t.push(
            "invalid_reply",
            None,
            Value::Null,
            Failure,
            "invalid model reply",
            Some(&format!(
                "your reply had no tool call (it said: \"{said}\"); call exactly one of: read_file"
            )),
        );
    }
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::IdenticalAction);
    assert_eq!(d.block, None, "invalid replies have no action to block");
    assert!(d.suggestions[0].contains("exactly one tool call"));
}

#[test]
fn identical_ignores_a_polled_command_whose_output_grows() {
    let mut t = Traj::with_checks(1, 1);
    for len in [100, 900, 2400] {
        t.push(
            "run_check",
            Some("deploy"),
            json!({ "name": "deploy" }),
            Failure,
            "deploy: failed (exit 1): waiting for rollout",
            Some("deploy: waiting for rollout to finish"),
        )
        .output_len = Some(len);
    }
    assert_eq!(t.check(), None);
}

// ---------------------------------------------------------------- repetition

#[test]
fn repetition_of_the_same_read_without_change() {
    let mut t = Traj::with_checks(1, 1);
    t.read("src/a.rs")
        .search("parse")
        .read("src/a.rs")
        .read("src/b.rs")
        .read("src/a.rs");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::Repetition);
    assert_eq!(d.block.as_deref(), Some("read_file:src/a.rs"));
    assert!(d.suggestions[0].contains("read `src/a.rs` 3 times"));
}

#[test]
fn rereading_after_each_change_is_not_repetition() {
    let mut t = Traj::with_checks(1, 1);
    t.read("src/a.rs")
        .edit("src/a.rs", "a", "b", "h1", (1, 1))
        .read("src/a.rs")
        .edit("src/a.rs", "c", "d", "h2", (1, 1))
        .read("src/a.rs");
    assert_eq!(t.replay(), vec![]);
}

#[test]
fn paging_through_one_file_is_not_repetition() {
    let mut t = Traj::new();
    for (s, e) in [(1, 100), (100, 200), (200, 300), (300, 400)] {
        t.push(
            "read_file",
            Some("src/big.rs"),
            json!({ "path": "src/big.rs", "start_line": s, "end_line": e }),
            Success,
            "read src/big.rs lines",
            None,
        );
    }
    assert_eq!(t.replay(), vec![]);
}

#[test]
fn repetition_of_test_runs_between_reads() {
    let mut t = Traj::with_checks(0, 1);
    t.tests(5, 1, "t::a")
        .read("src/a.rs")
        .tests(5, 1, "t::a")
        .read("src/b.rs")
        .tests(5, 1, "t::a");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::Repetition);
    assert_eq!(d.step, 5);
}

// ---------------------------------------------------------------- alternation

#[test]
fn alternation_of_an_unchanged_write_and_a_failing_test() {
    // Seed 004 example 2.
    let mut t = Traj::with_checks(0, 1);
    let write = |t: &mut Traj, first: bool| {
        let s = t.push(
            "write_file",
            Some("test.py"),
            json!({ "path": "test.py", "content": "def test(): assert f() == 3\n" }),
            Success,
            if first {
                "overwrote test.py (1 lines, 29 bytes); checks: tests: tests: 3 passed, 1 failed (exit 1)"
            } else {
                "write_file: `test.py` already has this content; nothing changed"
            },
            None,
        );
        if first {
            s.file_hashes.insert("test.py".into(), "h1".into());
        }
    };
    write(&mut t, true);
    t.tests(3, 1, "test_f");
    write(&mut t, false);
    t.tests(3, 1, "test_f");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::Alternation);
    assert_eq!(d.step, 4);
    // The next step of the cycle is the write; blocking the tests would hide a real fix.
    assert_eq!(d.block.as_deref(), Some("write_file:test.py"));
    assert!(d.suggestions.iter().any(|s| s.contains("changes nothing")));
}

#[test]
fn edit_test_cycles_with_new_edits_and_shrinking_failures_are_legit() {
    let mut t = Traj::with_checks(1, 1);
    t.tests(10, 4, "t::a")
        .edit("src/a.rs", "a", "b", "h1", (1, 1))
        .tests(11, 3, "t::b")
        .edit("src/a.rs", "c", "d", "h2", (1, 1))
        .tests(12, 2, "t::c")
        .edit("src/a.rs", "e", "f", "h3", (1, 1))
        .tests(13, 1, "t::d")
        .edit("src/a.rs", "g", "h", "h4", (2, 0))
        .tests(14, 0, "");
    assert_eq!(t.replay(), vec![]);
}

// ---------------------------------------------------------------- error cycle

#[test]
fn error_cycle_between_two_failing_approaches() {
    let mut t = Traj::with_checks(1, 1);
    let replace_fail = |t: &mut Traj| {
        t.push(
            "replace_lines",
            Some("src/a.rs"),
            json!({ "path": "src/a.rs", "start_line": 150, "end_line": 151, "new_content": "x" }),
            Failure,
            "replace_lines failed: lines 150-151 are outside `src/a.rs` (143 lines)",
            Some("`src/a.rs` has 143 lines; start_line and end_line must be between 1 and 143"),
        );
    };
    t.edit_not_found("src/a.rs", "fn a() {");
    replace_fail(&mut t);
    t.edit_not_found("src/a.rs", "pub fn a() {");
    assert_eq!(t.check(), None, "A-B-A is one cycle; the threshold is two");
    replace_fail(&mut t);
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::ErrorCycle);
    assert_eq!(d.block.as_deref(), Some("edit_file:src/a.rs"));
    assert!(d.suggestions[0].contains("Both approaches"));
}

// ---------------------------------------------------------------- semantic

#[test]
fn semantic_loop_different_actions_same_error_kind() {
    let mut t = Traj::new();
    t.push(
        "read_file",
        Some("config/app.toml"),
        json!({ "path": "config/app.toml" }),
        Failure,
        "read_file failed: cannot read `config/app.toml`",
        Some("`config/app.toml` does not exist. Use search to find the right path."),
    );
    t.push(
        "load_context",
        Some("full_file:settings.toml"),
        json!({ "item": "full_file:settings.toml" }),
        Failure,
        "could not load full_file:settings.toml",
        Some("cannot read `settings.toml`: No such file or directory (os error 2)"),
    );
    t.push(
        "search",
        Some("db_url"),
        json!({ "pattern": "db_url", "path": "config" }),
        Failure,
        "search failed: `config` does not exist",
        Some("search path `config` does not exist; omit `path` to search the whole workspace"),
    );
    t.push(
        "read_file",
        Some("app.toml"),
        json!({ "path": "app.toml" }),
        Failure,
        "read_file failed: cannot read `app.toml`",
        Some("`app.toml` does not exist. Did you mean: `Cargo.toml`?"),
    );
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::SemanticLoop);
    assert_eq!(d.block, None);
    assert!(d.description.contains("not_found"));
    assert!(d.suggestions[0].contains("does not exist"));
}

#[test]
fn failures_of_different_kinds_are_not_a_semantic_loop() {
    let mut t = Traj::new();
    t.edit_not_found("src/a.rs", "x");
    t.tests(3, 1, "t::a");
    t.push(
        "run_check",
        Some("build"),
        json!({ "name": "build" }),
        Failure,
        "build: timed out",
        Some("`cargo build` timed out after 120s"),
    );
    t.read("src/b.rs");
    assert_eq!(t.check(), None);
}

// ---------------------------------------------------------------- no progress

#[test]
fn no_progress_read_only_streak_with_rereads() {
    let mut t = Traj::with_checks(1, 1);
    t.edit("src/a.rs", "a", "b", "h1", (1, 1))
        .tests(5, 1, "t::a")
        .read("src/a.rs")
        .search("quote")
        .read("src/c.rs")
        .read("src/a.rs");
    assert_eq!(t.check(), None, "5 steps: below the threshold");
    t.search("quote");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::NoProgress);
    assert!(d
        .suggestions
        .iter()
        .any(|s| s.contains("read_file src/a.rs")));
}

#[test]
fn exploring_distinct_files_at_the_start_is_legit() {
    let mut t = Traj::new();
    for f in [
        "README.md",
        "Cargo.toml",
        "src/lib.rs",
        "src/a.rs",
        "src/b.rs",
        "src/c.rs",
    ] {
        t.read(f);
    }
    t.search("fn main");
    for f in ["src/d.rs", "src/e.rs", "tests/t.rs", "src/f.rs"] {
        t.read(f);
    }
    t.edit("src/a.rs", "a", "b", "h1", (1, 0));
    assert_eq!(t.replay(), vec![]);
}

#[test]
fn no_progress_when_all_checks_pass_suggests_complete() {
    let mut t = Traj::with_checks(1, 0);
    t.edit("src/a.rs", "a", "b", "h1", (1, 0))
        .tests(10, 0, "")
        .read("src/a.rs")
        .tests(10, 0, "")
        .read("src/a.rs")
        .tests(10, 0, "");
    let d = t.replay().into_iter().next().expect("detected");
    assert!(
        matches!(
            d.loop_type,
            LoopType::NoProgress | LoopType::Alternation | LoopType::Repetition
        ),
        "{d:?}"
    );
    let all = Traj::detector().check(&t.steps).unwrap();
    if all.loop_type == LoopType::NoProgress {
        assert!(all.suggestions[0].contains("call complete"));
    }
}

#[test]
fn no_progress_reworking_the_same_code_with_the_same_failure() {
    let mut t = Traj::with_checks(1, 1);
    t.tests(30, 1, "test_discount")
        .edit("src/d.py", "return a * b", "return a + b", "v1", (1, 1))
        .tests(30, 1, "test_discount")
        .edit(
            "src/d.py",
            "return a + b",
            "return round(a + b, 2)",
            "v2",
            (1, 1),
        )
        .tests(30, 1, "test_discount");
    assert_eq!(t.check(), None);
    t.edit(
        "src/d.py",
        "return round(a + b, 2)",
        "return min(a + b, 1)",
        "v3",
        (1, 1),
    );
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::NoProgress);
    assert_eq!(d.confidence, 0.7);
    assert!(d.suggestions[0].contains("src/d.py"));
}

#[test]
fn many_files_changed_while_the_build_stays_red_is_legit() {
    // A rename across files: each change is new and elsewhere.
    let mut t = Traj::with_checks(0, 2);
    for i in 0..8 {
        t.edit(
            &format!("src/m{i}.rs"),
            "Old",
            "New",
            &format!("h{i}"),
            (0, 2),
        );
    }
    assert_eq!(t.replay(), vec![]);
}

// ---------------------------------------------------------------- oscillation

#[test]
fn oscillation_of_file_content() {
    let mut t = Traj::with_checks(1, 1);
    t.edit("src/r.rs", "a < b", "a <= b", "B", (1, 1))
        .tests(5, 1, "t::x")
        .edit("src/r.rs", "a <= b", "a < b", "A", (1, 1))
        .tests(5, 1, "t::y");
    assert_eq!(t.check(), None, "one revert is fine");
    t.edit("src/r.rs", "a < b", "a <= b", "B", (1, 1));
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::Oscillation);
    assert_eq!(d.block.as_deref(), Some("edit_file:src/r.rs"));
    assert!(d
        .evidence
        .iter()
        .any(|e| e.contains("back to an earlier version")));
    assert!(d.suggestions[0].contains("undoing your own changes"));
}

#[test]
fn oscillation_of_verification() {
    let mut t = Traj::with_checks(1, 1);
    t.tests(40, 1, "test_dmy")
        .edit("p.py", "d, m", "m, d", "v1", (1, 1))
        .tests(40, 1, "test_mdy")
        .edit("p.py", "m, d", "d, m if x else m, d", "v2", (1, 1))
        .tests(40, 1, "test_dmy")
        .edit(
            "p.py",
            "d, m if x else m, d",
            "m, d if y else d, m",
            "v3",
            (1, 1),
        )
        .tests(40, 1, "test_mdy");
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::Oscillation);
    assert_eq!(d.block, None);
    assert!(d.evidence.iter().any(|e| e.contains("failure A")));
}

#[test]
fn red_green_tdd_is_not_oscillation() {
    let mut t = Traj::with_checks(1, 0);
    for i in 0..4 {
        let n = 10 + i;
        t.edit(
            "src/lib.rs",
            &format!("// test {i}"),
            &format!("#[test] fn t{i}() {{}}"),
            &format!("t{i}"),
            (0, 1),
        )
        .tests(n, 1, &format!("tests::t{i}"))
        .edit(
            "src/lib.rs",
            &format!("// impl {i}"),
            &format!("impl {i}"),
            &format!("i{i}"),
            (1, 0),
        )
        .tests(n + 1, 0, "");
    }
    assert_eq!(t.replay(), vec![]);
}

// ---------------------------------------------------------------- polling

#[test]
fn polling_a_growing_check_is_legit() {
    let mut t = Traj::with_checks(2, 0);
    t.edit("a.rs", "1", "2", "h", (2, 0));
    for (i, len) in [500, 1400, 2900, 4100, 6000, 7700, 9900]
        .into_iter()
        .enumerate()
    {
        t.push(
            "run_check",
            Some("e2e"),
            json!({ "name": "e2e" }),
            Partial,
            &format!("e2e: still running after {}s", 30 * (i + 1)),
            None,
        )
        .output_len = Some(len);
    }
    assert_eq!(t.replay(), vec![]);
}

#[test]
fn polling_without_output_length_counts_a_changing_summary() {
    let mut t = Traj::with_checks(2, 0);
    t.edit("a.rs", "1", "2", "h", (2, 0));
    for done in [5, 11, 19, 24, 30, 37] {
        t.push(
            "run_check",
            Some("bench"),
            json!({ "name": "bench" }),
            Partial,
            &format!("bench: still running after 45s ({done}/50 iterations)"),
            None,
        );
    }
    assert_eq!(t.replay(), vec![]);
}

// ---------------------------------------------------------------- replay and priority

#[test]
fn replay_reports_a_loop_once_until_it_is_broken() {
    let mut t = Traj::with_checks(1, 1);
    for _ in 0..6 {
        t.edit_not_found("src/a.rs", "x");
    }
    assert_eq!(types(&t.replay()), vec![(LoopType::IdenticalAction, 3)]);
    // Progress breaks it; the same loop again is reported again.
    t.edit("src/a.rs", "y", "z", "h1", (2, 0));
    for _ in 0..3 {
        t.edit_not_found("src/a.rs", "x");
    }
    assert_eq!(
        types(&t.replay()),
        vec![
            (LoopType::IdenticalAction, 3),
            (LoopType::IdenticalAction, 10)
        ]
    );
}

#[test]
fn short_histories_are_never_loops() {
    let d = LoopDetector::default();
    assert_eq!(d.check(&[]), None);
    let mut t = Traj::new();
    t.edit_not_found("a", "b");
    assert_eq!(d.check(&t.steps), None);
    assert_eq!(d.replay(&[]), vec![]);
}

#[test]
fn skipped_steps_count_as_failures() {
    let mut t = Traj::with_checks(0, 1);
    for summary in ["done", "finished", "all good"] {
        t.push(
            "complete",
            None,
            json!({ "summary": summary }),
            Skipped,
            "refused: complete refused: verification is not passing",
            Some("complete refused: verification is not passing (failing checks: tests: 3 passed, 1 failed)"),
        );
    }
    let d = t.check().expect("detected");
    assert_eq!(d.loop_type, LoopType::IdenticalAction);
    assert_eq!(d.block, None, "complete is never blocked");
    assert!(d.suggestions[0].contains("complete is refused until verification passes"));
}

#[test]
fn thresholds_are_honoured() {
    let mut t = Traj::new();
    for _ in 0..3 {
        t.edit_not_found("src/a.rs", "x");
    }
    let strict = LoopDetector::new(LoopThresholds {
        identical: 4,
        ..LoopThresholds::default()
    });
    assert_ne!(
        strict.check(&t.steps).map(|d| d.loop_type),
        Some(LoopType::IdenticalAction)
    );
    t.edit_not_found("src/a.rs", "x");
    assert_eq!(
        strict.check(&t.steps).map(|d| d.loop_type),
        Some(LoopType::IdenticalAction)
    );
}

// ---------------------------------------------------------------- signatures

#[test]
fn signature_fields() {
    let mut t = Traj::new();
    t.push(
        "edit_file",
        Some("./src//lexer.rs"),
        json!({ "path": "./src//lexer.rs", "old_text": "    pub fn next_token(&mut self) {", "new_text": "" }),
        Failure,
        "edit_file failed: old_text not found in `src/lexer.rs`",
        Some("old_text was not found in `src/lexer.rs`"),
    );
    let sig = ActionSignature::of(&t.steps[0]);
    assert_eq!(sig.category, ActionCategory::Edit);
    assert_eq!(sig.target.as_deref(), Some("src/lexer.rs"));
    assert_eq!(sig.entity.as_deref(), Some("next_token"));
    assert_eq!(sig.error, Some(ErrorCategory::NotFound));
    assert_eq!(sig.key(), "edit|src/lexer.rs|next_token|failure|not_found");
}

#[test]
fn reading_a_file_two_ways_is_the_same_signature() {
    let mut t = Traj::new();
    t.read("src/a.rs");
    t.push(
        "load_context",
        Some("full_file:./src/a.rs"),
        json!({ "item": "full_file:./src/a.rs" }),
        Success,
        "loaded",
        None,
    );
    assert_eq!(
        ActionSignature::of(&t.steps[0]).key(),
        ActionSignature::of(&t.steps[1]).key()
    );
}

#[test]
fn entities_from_python_and_classes_and_arguments() {
    let view = |params: Value| StepView {
        step: 1,
        action: "edit_file".into(),
        target: Some("a.py".into()),
        parameters: params,
        result: Success,
        error: None,
        summary: String::new(),
        file_hashes: BTreeMap::new(),
        checks_passing: None,
        checks_failing: None,
        output_len: None,
        output_hash: None,
        output: None,
        thought: None,
    };
    let e = |p| ActionSignature::of(&view(p)).entity;
    assert_eq!(
        e(json!({ "old_text": "def parse_date(s):\n    pass" })).as_deref(),
        Some("parse_date")
    );
    assert_eq!(
        e(json!({ "old_text": "class Invoice(Base):" })).as_deref(),
        Some("Invoice")
    );
    assert_eq!(
        e(json!({ "function_name": "total" })).as_deref(),
        Some("total")
    );
    assert_eq!(e(json!({ "old_text": "x = 1" })), None);
}

#[test]
fn search_variants_are_the_same_search() {
    assert_eq!(signature::search_term("parse_date"), "parse_date");
    assert_eq!(signature::search_term("fn parse_date"), "parse_date");
    assert_eq!(signature::search_term(r"parse_date\("), "parse_date");
    assert_eq!(signature::search_term("def parse_date"), "parse_date");
}

#[test]
fn error_categories_of_real_messages() {
    let cat = |action: &str, result: ActionResult, error: &str, summary: &str| {
        ErrorCategory::of(action, result, Some(error), summary)
    };
    use ErrorCategory::*;
    let cases = [
        (cat("edit_file", Failure, "old_text was not found in `src/a.rs`; it must match", "edit_file failed"), NotFound),
        (cat("read_file", Failure, "`src/x.rs` does not exist. Did you mean: `src/y.rs`?", ""), NotFound),
        (cat("load_context", Failure, "cannot read `a.toml`: No such file or directory (os error 2)", ""), NotFound),
        (cat("run_tests", Failure, "E   SyntaxError: '{' was never closed", ""), SyntaxError),
        (cat("run_check", Failure, "error: expected one of `.`, `;`, `?`, or an operator, found `}`", ""), SyntaxError),
        (cat("run_check", Failure, "error[E0308]: mismatched types\n --> src/a.rs:4:5", ""), CompileError),
        (cat("run_check", Failure, "error: could not compile `x` (lib) due to 2 previous errors", ""), CompileError),
        (cat("run_tests", Failure, "thread 'a' panicked at src/a.rs:3:5:\nassertion failed", ""), TestFailure),
        (cat("run_tests", Failure, "FAILED tests/test_a.py::test_x - AssertionError: assert 1 == 2", ""), TestFailure),
        (cat("run_tests", Failure, "test a has been running for over 60 seconds", ""), Timeout),
        (cat("run_check", Failure, "`cargo test` timed out after 120s", ""), Timeout),
        (cat("edit_file", Failure, "tests: 3 passed, 2 failed", "reverted: tests passed before this change and failed after it; the change was undone"), TestRegression),
        (cat("complete", Skipped, "complete refused: verification is not passing", "refused: complete refused"), Refused),
        (cat("write_file", Failure, "path escapes the workspace", "write_file refused: path `../x` not allowed"), Refused),
        (cat("invalid_reply", Failure, "your reply had no tool call", "invalid model reply"), InvalidReply),
        (cat("replace_lines", Failure, "`a.py` has 98 lines; start_line and end_line must be between 1 and 98", ""), Other),
    ];
    for (i, (got, want)) in cases.into_iter().enumerate() {
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn normalized_errors_ignore_lines_paths_quotes_and_numbers() {
    let a = "thread 'tests::a' panicked at src/ring.rs:111:9:\nassertion `left == right` failed\n  left: 4\nfinished in 0.02s";
    let b = "thread 'tests::b' panicked at src/other/ring.rs:119:13:\nassertion `left == right` failed\n  left: 17\nfinished in 1.20s";
    assert_eq!(normalize_error(a), normalize_error(b));
    assert_ne!(
        normalize_error(a),
        normalize_error("error[E0308]: mismatched types")
    );
}

#[test]
fn paths_are_normalized() {
    assert_eq!(normalize_path("./src//a.rs"), "src/a.rs");
    assert_eq!(normalize_path("src/./a.rs"), "src/a.rs");
    assert_eq!(normalize_path("src\\a.rs"), "src/a.rs");
    assert_eq!(normalize_path("src/"), "src");
}

// ---------------------------------------------------------------- conversions and output

#[test]
fn step_view_from_action_record() {
    let record: ActionRecord = serde_json::from_value(json!({
        "step": 7, "phase": "implement", "action": "edit_file", "target": "src/a.rs",
        "parameters": { "path": "src/a.rs", "old_text": "a", "new_text": "b" },
        "result": "success", "summary": "edited src/a.rs", "error": null,
        "duration_ms": 12, "timestamp": "2025-01-01T00:00:00Z", "context_tokens": 900,
        "file_hashes": { "src/a.rs": "abc123" },
        "state_after": {
            "task_id": "t1", "task_type": "bugfix", "phase": "implement", "step": 7, "max_steps": 50,
            "status": "running", "working_memory": "working_memory.yaml",
            "verification": { "checks": {
                "tests": { "passing": false, "summary": "3 passed, 1 failed", "is_test": true, "step": 7 },
                "clippy": { "passing": true, "summary": "ok", "step": 7 }
            } }
        }
    }))
    .expect("valid record");
    let v = StepView::from(&record);
    assert_eq!(v.step, 7);
    assert_eq!(v.action, "edit_file");
    assert_eq!(
        v.file_hashes.get("src/a.rs").map(String::as_str),
        Some("abc123")
    );
    assert_eq!((v.checks_passing, v.checks_failing), (Some(1), Some(1)));
    assert_eq!(v.output_len, None);

    let mut fresh = record.clone();
    fresh.state_after.verification.checks.clear();
    let v = StepView::from(&fresh);
    assert_eq!((v.checks_passing, v.checks_failing), (None, None));
}

#[test]
fn step_view_slim_lines_deserialize_with_defaults() {
    let v: StepView = serde_json::from_str(
        r#"{"step":1,"action":"read_file","target":"a","parameters":{"path":"a"},"result":"success","summary":"read a"}"#,
    )
    .unwrap();
    assert!(v.file_hashes.is_empty());
    assert_eq!(v.checks_passing, None);
}

#[test]
fn render_text_lists_everything() {
    let mut t = Traj::new();
    for _ in 0..3 {
        t.edit_not_found("src/a.rs", "x");
    }
    let d = t.replay();
    let text = render_text(&d);
    assert!(
        text.starts_with("step 3: identical_action (confidence 1.00)"),
        "{text}"
    );
    assert!(text.contains("evidence:\n    - step 1: edit_file src/a.rs -> failure (not_found)"));
    assert!(text.contains("suggestions:\n    - The text to replace"));
    assert!(text.contains("block: edit_file:src/a.rs"));
    assert_eq!(render_text(&[]), "no loops detected\n");
}

#[test]
fn detections_serialize_with_snake_case_types() {
    let mut t = Traj::new();
    for _ in 0..3 {
        t.edit_not_found("src/a.rs", "x");
    }
    let d = t.check().unwrap();
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["loop_type"], "identical_action");
    let back: Detection = serde_json::from_value(v).unwrap();
    assert_eq!(back, d);
}

#[test]
fn thresholds_from_toml() {
    let t: LoopThresholds = toml::from_str("identical = 4\nwindow = 20").unwrap();
    assert_eq!(t.identical, 4);
    assert_eq!(t.window, 20);
    assert_eq!(t.semantic, 4, "missing fields take their default");
    assert_eq!(LoopThresholds::default().no_progress_reads, 6);
    assert!(
        toml::from_str::<LoopThresholds>("identcal = 4").is_err(),
        "typos are rejected"
    );
}

// ---------------------------------------------------------------- properties

/// A step from a small vocabulary, so that random sequences repeat themselves often.
fn arb_step() -> impl Strategy<Value = StepView> {
    let actions = prop_oneof![
        Just("read_file"),
        Just("edit_file"),
        Just("write_file"),
        Just("run_tests"),
        Just("run_check"),
        Just("search"),
        Just("load_context"),
        Just("complete"),
        Just("invalid_reply"),
    ];
    let results = prop_oneof![Just(Success), Just(Failure), Just(Partial), Just(Skipped)];
    (
        actions,
        0..3usize,
        results,
        0..4usize,
        0..3usize,
        proptest::option::of(0..3usize),
        proptest::option::of(0..2000usize),
    )
        .prop_map(
            |(action, target, result, error, hash, failing, output_len)| {
                let target = format!("src/f{target}.rs");
                let errors = [
                    "old_text was not found in `x`",
                    "tests: FAILED. 3 passed; 1 failed",
                    "error[E0425]: cannot find value `x`",
                    "timed out after 30s",
                ];
                let mut file_hashes = BTreeMap::new();
                if result == Success && ["edit_file", "write_file"].contains(&action) {
                    file_hashes.insert(target.clone(), format!("h{hash}"));
                }
                StepView {
                    step: 0,
                    action: action.to_string(),
                    target: Some(target.clone()),
                    parameters: json!({ "path": target, "old_text": format!("fn f{hash}()") }),
                    result,
                    error: (result != Success).then(|| errors[error].to_string()),
                    summary: format!("tests: {} passed, {} failed", 3, failing.unwrap_or(0)),
                    file_hashes,
                    checks_passing: failing.map(|f| 2 - f.min(2)),
                    checks_failing: failing,
                    output_len,
                    output_hash: None,
                    output: None,
                    thought: None,
                }
            },
        )
}

fn numbered(mut steps: Vec<StepView>) -> Vec<StepView> {
    for (i, s) in steps.iter_mut().enumerate() {
        s.step = i as u64 + 1;
    }
    steps
}

/// Distinct successful changes (new files, new content) with verification never getting
/// worse, optionally each followed by a run of the tests.
fn arb_progress() -> impl Strategy<Value = Vec<StepView>> {
    proptest::collection::vec((0..3usize, any::<bool>(), any::<bool>(), "[a-z ]{0,12}"), 2..30).prop_map(
        |moves| {
            let mut t = Traj::with_checks(0, 3);
            let mut failing = 3usize;
            for (i, (tool, improve, run_tests, reason)) in moves.into_iter().enumerate() {
                if improve && failing > 0 {
                    failing -= 1;
                }
                let checks = (3 - failing, failing);
                let path = format!("src/m{i}.rs");
                let params = match tool {
                    0 => json!({ "path": path, "old_text": format!("old {i}"), "new_text": format!("new {i}"), "reason": reason }),
                    1 => json!({ "path": path, "content": format!("content {i}") }),
                    _ => json!({ "path": path, "start_line": 1, "end_line": 2, "new_content": format!("line {i}") }),
                };
                let action = ["edit_file", "write_file", "replace_lines"][tool];
                t.checks = Some(checks);
                let summary = format!("changed {path}; checks: tests: tests: {} passed, {failing} failed (exit 1)", 10 + i);
                let s = t.push(action, Some(&path), params, Success, &summary, None);
                s.file_hashes.insert(path.clone(), format!("hash-{i}"));
                if run_tests {
                    t.tests(10 + i, failing, &format!("tests::t{failing}"));
                }
            }
            t.steps
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn distinct_successful_changes_never_trip_the_detector(steps in arb_progress()) {
        let found = LoopDetector::default().replay(&steps);
        prop_assert!(found.is_empty(), "{}", render_text(&found));
    }

    #[test]
    fn replay_is_deterministic_and_consistent_with_check(steps in proptest::collection::vec(arb_step(), 0..40)) {
        let steps = numbered(steps);
        let d = LoopDetector::default();
        let first = d.replay(&steps);
        prop_assert_eq!(&first, &d.replay(&steps.clone()));
        for det in &first {
            let end = det.step as usize;
            let again = d.check(&steps[..end]);
            prop_assert_eq!(again.as_ref(), Some(det));
            prop_assert!((0.0..=1.0).contains(&det.confidence));
            prop_assert!(!det.suggestions.is_empty());
            prop_assert!(!det.evidence.is_empty());
        }
        // Reported steps increase: one report per loop until it is broken.
        prop_assert!(first.windows(2).all(|w| w[0].step < w[1].step));
    }

    #[test]
    fn signature_ignores_commentary_and_whitespace(
        step in arb_step(),
        reason in ".{0,40}",
        pad in "[ \t\n]{1,4}",
    ) {
        let mut noisy = step.clone();
        if let Value::Object(map) = &mut noisy.parameters {
            map.insert("reason".into(), Value::String(reason));
            let old = map["old_text"].as_str().unwrap().replace(' ', &pad);
            map.insert("old_text".into(), Value::String(format!("{pad}{old}{pad}")));
        }
        prop_assert_eq!(ActionSignature::of(&step), ActionSignature::of(&noisy));
        prop_assert_eq!(normalize_params(&step.parameters), normalize_params(&noisy.parameters));
    }

    #[test]
    fn error_category_ignores_lines_paths_and_values(
        line in 1..5000u32,
        col in 1..200u32,
        dir in "[a-z]{1,8}",
        file in "[a-z_]{1,10}",
        value in "[a-zA-Z0-9]{1,10}",
    ) {
        let a = format!("old_text was not found in `src/{dir}/{file}.rs` at line {line}:{col} ('{value}')");
        let b = "old_text was not found in `src/lib.rs` at line 1:1 ('x')";
        prop_assert_eq!(normalize_error(&a), normalize_error(b));
        prop_assert_eq!(
            ErrorCategory::of("edit_file", Failure, Some(&a), ""),
            ErrorCategory::of("edit_file", Failure, Some(b), "")
        );
    }
}

// ---------------------------------------------------------------- a run's memo

/// A log record of `v` as the store reads the log's tail back (with the verification
/// only): `StepView::from` gives `v` back, check counts aside when both are zero.
fn tail_record(v: &StepView) -> Arc<agentforge_core::state::TailRecord> {
    let mut checks = serde_json::Map::new();
    for (passing, n) in [(true, v.checks_passing), (false, v.checks_failing)] {
        for k in 0..n.unwrap_or(0) {
            let status = json!({ "passing": passing, "summary": "s", "step": v.step });
            checks.insert(format!("{passing}{k}"), status);
        }
    }
    let record = serde_json::from_value(json!({
        "step": v.step, "phase": "implement", "action": v.action, "target": v.target,
        "parameters": v.parameters, "result": v.result, "summary": v.summary,
        "error": v.error, "duration_ms": 1, "timestamp": "2025-01-01T00:00:00Z",
        "context_tokens": 1, "file_hashes": v.file_hashes, "output_hash": v.output_hash,
        "output_len": v.output_len, "state_after": { "verification": { "checks": checks } }
    }))
    .expect("a valid record");
    Arc::new(record)
}

/// The same step recorded otherwise (as a recovery might): same number, other content.
fn recorded_otherwise(v: &StepView) -> StepView {
    let mut v = v.clone();
    v.result = if v.result == Success {
        Failure
    } else {
        Success
    };
    v.error = Some("recorded again after a recovery".to_string());
    v.summary.push_str(" (again)");
    v
}

/// [`arb_step`], with environment events, messages and output hashes among them.
fn arb_run_step() -> impl Strategy<Value = StepView> {
    (arb_step(), 0..6usize, 0..4usize).prop_map(|(mut s, kind, n)| {
        match kind {
            0 => {
                s.action = "file_watcher".to_string();
                s.summary = format!("src/f{n}.rs changed at 12:0{n}:00");
            }
            1 => {
                s.action = "think".to_string();
                s.parameters = json!({ "text": format!("fix the parser in f{n} then run tests") });
            }
            2 => s.output_hash = Some(format!("o{n}")),
            _ => {}
        }
        s
    })
}

/// `steps` with stretches that repeat themselves: where `picks` says so, a step is a
/// copy of the one before it or the one before that (a repetition, an alternation).
fn looping(mut steps: Vec<StepView>, picks: &[u8]) -> Vec<StepView> {
    for i in 2..steps.len() {
        match picks.get(i).copied().unwrap_or(0) % 4 {
            0 => steps[i] = steps[i - 1].clone(),
            1 => steps[i] = steps[i - 2].clone(),
            _ => {}
        }
    }
    numbered(steps)
}

/// Runs `steps` as the executor does: at each step, the views of the log's last records
/// (each made once by one memo, by record) and the step just taken, checked with
/// [`LoopDetector::check_shared`]; every answer must be `check`'s on views made afresh
/// from the same records. `churn` says, step by step, whether the store hands out a new
/// `Arc` for an unchanged record (parsed again), whether the step is recorded otherwise
/// than it was checked, and whether a recorded step is replaced by another with its
/// number. The log keeps only its tail, so old records are freed (and their addresses
/// free for new ones). Returns the checks made and the detections among them.
fn run_like_the_executor(steps: &[StepView], churn: &[u8]) -> Result<(usize, usize), String> {
    let d = LoopDetector::default();
    let memo = StepMemo::default();
    let keep = d.history_len() - 1;
    let mut log: Vec<Arc<agentforge_core::state::TailRecord>> = Vec::new();
    let (mut checked, mut found) = (0, 0);
    for (i, current) in steps.iter().enumerate() {
        let tail = &log[log.len().saturating_sub(keep)..];
        let mut fresh: Vec<StepView> = tail.iter().map(|r| StepView::from(&**r)).collect();
        fresh.push(current.clone());
        let mut shared: Vec<Arc<StepView>> = tail.iter().map(|r| memo.view(r)).collect();
        shared.push(Arc::new(current.clone()));
        let want = d.check(&fresh);
        let got = d.check_shared(&shared, &memo);
        if got != want {
            return Err(format!(
                "step {}: check_shared {got:?}, check {want:?}",
                current.step
            ));
        }
        // The slice API with the same memo answers the same.
        if d.check_with(&fresh, &memo) != want {
            return Err(format!("step {}: check_with differs", current.step));
        }
        checked += 1;
        found += usize::from(want.is_some());
        let c = churn.get(i).copied().unwrap_or(0);
        log.push(tail_record(&if c % 7 == 1 {
            recorded_otherwise(current)
        } else {
            current.clone()
        }));
        let back = log.len() - 1 - usize::from(c / 7) % log.len().min(keep);
        match c % 5 {
            2 => log[back] = Arc::new((*log[back]).clone()),
            3 => log[back] = tail_record(&recorded_otherwise(&StepView::from(&*log[back]))),
            _ => {}
        }
        if log.len() > 2 * keep {
            log.drain(..log.len() - keep);
        }
    }
    let (kept_steps, kept_views) = memo.kept();
    if kept_steps > analysis::MEMO_STEPS || kept_views > analysis::MEMO_STEPS {
        return Err(format!("memo holds {kept_steps} steps, {kept_views} views"));
    }
    Ok((checked, found))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Memoized views and analyses decide exactly as a fresh check does.
    #[test]
    fn a_run_with_a_memo_decides_as_check(
        steps in proptest::collection::vec(arb_run_step(), 1..100),
        churn in proptest::collection::vec(any::<u8>(), 120),
        picks in proptest::collection::vec(any::<u8>(), 120),
    ) {
        let steps = looping(steps, &picks);
        if let Err(e) = run_like_the_executor(&steps, &churn) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn a_long_run_with_a_memo_decides_as_check() {
    // Long enough for the memo to fill and evict, with loops found along the way.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let steps = proptest::collection::vec(arb_run_step(), 600)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let churn = proptest::collection::vec(any::<u8>(), 600)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let picks = proptest::collection::vec(any::<u8>(), 600)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let (checked, found) = run_like_the_executor(&looping(steps, &picks), &churn).unwrap();
    assert!(found > 60, "{checked} checks, {found} detections");
}

#[test]
fn a_record_view_is_made_once_per_record() {
    let memo = StepMemo::default();
    let v = step(
        json!({ "step": 3, "action": "read_file", "target": "a", "result": "success", "summary": "read a" }),
    );
    let record = tail_record(&v);
    let first = memo.view(&record);
    assert_eq!(*first, StepView::from(&*record));
    assert!(Arc::ptr_eq(&first, &memo.view(&record)));
    // The same content in another record is viewed again; other content, of course.
    let again = tail_record(&v);
    let second = memo.view(&again);
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(first, second);
    let other = tail_record(&recorded_otherwise(&v));
    assert_eq!(*memo.view(&other), StepView::from(&*other));
    // Bounded, even with every record still held.
    let records: Vec<_> = (0..2 * analysis::MEMO_STEPS as u64)
        .map(|n| {
            tail_record(&StepView {
                step: n,
                ..v.clone()
            })
        })
        .collect();
    for r in &records {
        memo.view(r);
    }
    assert!(memo.kept().1 <= analysis::MEMO_STEPS);
    // Records no one holds any more are let go.
    drop(records);
    let last = tail_record(&v);
    memo.view(&last);
    assert!(memo.kept().1 <= 5, "{:?}", memo.kept());
}

// ---------------------------------------------------------------- progress from what a step shows

/// A step in the imported-trajectory style: output text, no counts, no hashes.
fn shown(step: u64, action: &str, params: Value, result: ActionResult, output: &str) -> StepView {
    StepView {
        step,
        action: action.to_string(),
        target: params
            .get("path")
            .and_then(Value::as_str)
            .map(str::to_string),
        parameters: params,
        result,
        error: (result == Failure).then(|| "command timed out after 300s".to_string()),
        summary: String::new(),
        file_hashes: BTreeMap::new(),
        checks_passing: None,
        checks_failing: None,
        output_len: Some(output.len()),
        output_hash: None,
        output: Some(output.to_string()),
        thought: None,
    }
}

#[test]
fn the_same_command_timing_out_with_advancing_output_is_polling() {
    let build = json!({ "command": "cargo build --release" });
    let advancing: Vec<StepView> = [40, 90, 150, 210]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            shown(
                i as u64 + 1,
                "run_command",
                build.clone(),
                Failure,
                &format!("Compiling {n}/247\n"),
            )
        })
        .collect();
    assert!(LoopDetector::default().replay(&advancing).is_empty());
    // The same output each time: it hangs at the same place.
    let stuck: Vec<StepView> = (1..=4)
        .map(|i| {
            shown(
                i,
                "run_command",
                build.clone(),
                Failure,
                "Compiling 40/247\n",
            )
        })
        .collect();
    let found = LoopDetector::default().replay(&stuck);
    assert_eq!(types(&found), vec![(LoopType::IdenticalAction, 3)]);
}

#[test]
fn paging_with_an_offset_is_new_content_and_rereading_overlaps_is_not() {
    let page = |i: u64, off: u64| {
        shown(
            i,
            "read_file",
            json!({ "path": "big.log", "offset": off, "limit": 200 }),
            Success,
            &format!("lines from {off}"),
        )
    };
    let paging: Vec<StepView> = (0..10).map(|i| page(i + 1, i * 200)).collect();
    assert!(LoopDetector::default().replay(&paging).is_empty());
    let range = |i: u64, a: u64, b: u64| {
        shown(
            i,
            "read_file",
            json!({ "path": "src/a.py", "start_line": a, "end_line": b }),
            Success,
            &format!("{a}-{b}"),
        )
    };
    let rereading: Vec<StepView> = [
        (1, 80),
        (40, 120),
        (60, 130),
        (30, 100),
        (50, 110),
        (20, 90),
        (45, 125),
        (35, 95),
    ]
    .iter()
    .enumerate()
    .map(|(i, (a, b))| range(i as u64 + 1, *a, *b))
    .collect();
    let found = LoopDetector::default().replay(&rereading);
    assert_eq!(
        found.first().map(|d| d.loop_type),
        Some(LoopType::NoProgress),
        "{found:?}"
    );
}

#[test]
fn edits_that_only_respace_or_recomment_are_no_progress() {
    let mut t = Traj::with_checks(9, 1);
    t.tests(9, 1, "tests::fee_rounds");
    for (k, (old, new)) in [
        ("return a * 0.029 + 0.3", "return a*0.029 + 0.3  # fee"),
        (
            "return a*0.029 + 0.3  # fee",
            "return a * 0.029 + 0.3  // stripe",
        ),
        (
            "return a * 0.029 + 0.3  // stripe",
            "return  a * 0.029 + 0.3",
        ),
    ]
    .iter()
    .enumerate()
    {
        t.edit("src/fee.rs", old, new, &format!("h{k}"), (9, 1));
        t.tests(9, 1, "tests::fee_rounds");
    }
    let found = t.replay();
    assert_eq!(
        found.first().map(|d| d.loop_type),
        Some(LoopType::NoProgress),
        "{found:?}"
    );
    assert!(
        found[0].description.contains("whitespace or comments"),
        "{}",
        found[0].description
    );
}

#[test]
fn removing_and_re_adding_code_however_spaced_is_oscillation() {
    let mut t = Traj::with_checks(9, 1);
    let steps = [
        (
            "    s = s.strip()\n    s = normalize(s)",
            "    s = s.strip()",
        ),
        (
            "    s = s.strip()\n    return s",
            "    s = s.strip()\n    s = normalize(s)  # fullwidth\n    return s",
        ),
        (
            "    s = normalize(s)  # fullwidth\n    return s",
            "    return s",
        ),
        (
            "    s = s.strip()\n    return s",
            "    s = s.strip()\n    s = normalize( s )\n    return s",
        ),
    ];
    for (k, (old, new)) in steps.iter().enumerate() {
        // No file hashes: only the arguments show the undo.
        t.edit("clean.py", old, new, "", (9, 1));
        t.steps.last_mut().unwrap().file_hashes.clear();
        t.tests(
            9,
            1,
            if k % 2 == 0 {
                "test_normalized"
            } else {
                "test_raw"
            },
        );
    }
    let found = t.replay();
    assert_eq!(
        found.first().map(|d| d.loop_type),
        Some(LoopType::Oscillation),
        "{found:?}"
    );
}

#[test]
fn a_restated_plan_loops_but_a_status_after_new_output_does_not() {
    let msg = |i: u64, text: &str| {
        let mut s = shown(i, "message", json!({ "text": text }), Success, "");
        s.output = None;
        s.output_len = None;
        s
    };
    let plans = [
        "Plan: update parse_date to accept a timezone offset using fromisoformat, then re-run the tests.",
        "I will change parse_date so it handles the timezone offset with fromisoformat and run the tests again.",
        "Next: make parse_date handle timezone offsets by switching to fromisoformat; afterwards re-run tests.",
    ];
    let restated: Vec<StepView> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| msg(i as u64 + 1, p))
        .collect();
    assert_eq!(
        LoopDetector::default()
            .replay(&restated)
            .first()
            .map(|d| d.step),
        Some(3)
    );
    let mut polled = Vec::new();
    for (k, done) in [40, 95, 151].iter().enumerate() {
        let i = 2 * k as u64;
        let mut poll = shown(
            i + 1,
            "run_check",
            json!({ "name": "e2e" }),
            Partial,
            &format!("{done}/200 passed"),
        );
        poll.target = Some("e2e".into());
        poll.error = None;
        polled.push(poll);
        polled.push(msg(
            i + 2,
            "The suite is still running; I will report back when it finishes.",
        ));
    }
    assert!(LoopDetector::default().replay(&polled).is_empty());
}

#[test]
fn environment_events_between_distinct_edits_are_not_the_agents_moves() {
    let mut t = Traj::with_checks(5, 1);
    for (k, path) in ["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"]
        .iter()
        .enumerate()
    {
        t.push(
            "system_event",
            Some("cargo-watch"),
            json!({ "text": "[cargo-watch] change detected, running cargo check" }),
            Success,
            "[cargo-watch] change detected, running cargo check",
            None,
        );
        t.edit(path, "a", "b", &format!("h{k}"), (5 + k, 1));
    }
    assert!(t.replay().is_empty());
}

#[test]
fn a_long_cycle_of_reads_and_checks_is_caught_from_a_bounded_tail() {
    // A live run: 100 steps going round 12 distinct reads, searches and a failing check.
    let mut t = Traj::new();
    t.edit("src/lib.rs", "a", "b", "h0", (10, 1));
    for k in 0..100 {
        match k % 12 {
            3 => t.tests(10, 1, "tests::dst_forward"),
            5 | 9 => t.search(&format!("pattern_{}", k % 12)),
            _ => t.read(&format!("src/m{}.rs", k % 12)),
        };
    }
    let detector = LoopDetector::default();
    // Replayed on the whole log: caught within 3 steps of the second round's start.
    let first = detector.replay(&t.steps).first().map(|d| d.step);
    assert!(first.is_some_and(|s| s <= 1 + 12 + 3), "{first:?}");
    // Checked as the executor does, on the last `history_len` steps only: still caught.
    let n = detector.history_len();
    let tail = &t.steps[t.steps.len() - n..];
    assert_eq!(
        detector.check(tail).map(|d| d.loop_type),
        Some(LoopType::NoProgress)
    );
}

#[test]
fn missing_modules_and_packages_are_one_kind_of_error() {
    for text in [
        "ModuleNotFoundError: No module named 'ledger'",
        "go: go.mod file not found in current directory or any parent directory",
        "directory . outside main module or its selected dependencies",
        "Error: Cannot find module 'left-pad'",
        "ERROR: Could not find a version that satisfies the requirement torch==9.9",
        "bash: pytest: command not found",
    ] {
        assert_eq!(
            ErrorCategory::of("run_command", Failure, Some(text), ""),
            ErrorCategory::Dependency,
            "{text}"
        );
    }
}

#[test]
fn thinking_about_the_same_code_while_reading_new_files_is_not_a_restated_plan() {
    let mut t = Traj::new();
    let think = |t: &mut Traj, text: &str| {
        t.push("message", None, json!({}), Success, "think", None)
            .thought = Some(text.to_string());
    };
    think(
        &mut t,
        "Let me look at parse_date in utils/dates.py to see how the timezone offset is handled.",
    );
    t.read("utils/dates.py");
    think(&mut t, "parse_date uses strptime, which rejects the timezone offset; let me check which tests cover parse_date.");
    t.read("tests/test_dates.py");
    think(&mut t, "The tests expect parse_date to return an aware datetime keeping the timezone offset from the string.");
    t.read("utils/tz.py");
    think(&mut t, "utils/tz.py already has to_aware(); parse_date can call it after fromisoformat to keep the timezone offset.");
    assert!(t.replay().is_empty(), "{:?}", t.replay());
}

#[test]
fn cosmetic_edits_whose_own_checks_still_fail_are_no_progress() {
    // AgentForge's edits re-run the checks themselves: no separate test step.
    let mut t = Traj::with_checks(9, 1);
    t.tests(9, 1, "tests::fee_rounds");
    for (k, (old, new)) in [
        ("a * 0.029 + 0.3", "a * 0.029 + 0.3 // fee"),
        ("a * 0.029 + 0.3 // fee", "a*0.029 + 0.3"),
        ("a*0.029 + 0.3", "a * 0.029  + 0.3 /* stripe */"),
    ]
    .iter()
    .enumerate()
    {
        t.edit("src/fee.rs", old, new, &format!("h{k}"), (9, 1));
    }
    let found = t.replay();
    assert_eq!(
        types(&found).first(),
        Some(&(LoopType::NoProgress, 3)),
        "{found:?}"
    );
}

#[test]
fn two_reworded_commands_failing_in_turn_are_an_error_cycle() {
    let fail = |i: u64, command: &str, error: &str| {
        let mut s = shown(
            i,
            "run_command",
            json!({ "command": command }),
            Failure,
            error,
        );
        s.error = Some(error.to_string());
        s
    };
    let steps = vec![
        fail(
            1,
            "pip install 'pydantic<2'",
            "error: Failed building wheel for pydantic-core",
        ),
        fail(
            2,
            "make run",
            "Traceback: AttributeError: 'Config' object has no attribute 'allow_mutation'",
        ),
        fail(
            3,
            "pip install pydantic==1.10.13 --no-cache-dir",
            "ERROR: failed-wheel-build-for-install: could not build pydantic-core",
        ),
        fail(
            4,
            "make run-dev",
            "AttributeError: type object 'Model' has no attribute '__fields__'",
        ),
    ];
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::ErrorCycle, 4)], "{found:?}");
    // A cycle seen only in what the failures mean is a warning, not a block.
    assert_eq!(found[0].block, None);
}

#[test]
fn going_round_the_same_actions_in_varying_order_is_caught_too() {
    // 11 to 13 distinct reads, searches and a failing check per round, never in the same
    // order, no edit at all: the live run of issue 11.
    let mut t = Traj::new();
    let actions: Vec<usize> = (0..13).collect();
    let mut k = 0usize;
    while t.steps.len() < 100 {
        let round = 11 + k % 3;
        for j in 0..round {
            // A different order each round (a rotation by the round number, reversed on
            // odd rounds).
            let pick = if k.is_multiple_of(2) {
                (j + k) % round
            } else {
                round - 1 - (j + k) % round
            };
            match actions[pick] {
                0 => t.tests(10, 1, "tests::dst_forward"),
                4 | 8 => t.search(&format!("pattern_{pick}")),
                n => t.read(&format!("src/m{n}.rs")),
            };
        }
        k += 1;
    }
    let detector = LoopDetector::default();
    let first = detector
        .replay(&t.steps)
        .first()
        .map(|d| (d.loop_type, d.step));
    assert!(
        first.is_some_and(|(ty, s)| ty == LoopType::NoProgress && s <= 13 + 6),
        "{first:?}"
    );
    let tail = &t.steps[t.steps.len() - detector.history_len()..];
    assert_eq!(
        detector.check(tail).map(|d| d.loop_type),
        Some(LoopType::NoProgress)
    );
}

#[test]
fn a_timed_out_check_whose_summary_shows_it_getting_further_is_polling() {
    let mut t = Traj::with_checks(3, 0);
    for n in [61, 139, 202] {
        t.push(
            "run_check",
            Some("build"),
            json!({ "name": "build" }),
            Failure,
            &format!("build: timed out after 300s ({n}/247 crates compiled)"),
            Some("timed out after 300s"),
        );
    }
    assert!(t.replay().is_empty(), "{:?}", t.replay());
    // The same summary each time: it hangs at the same place.
    let mut stuck = Traj::with_checks(3, 0);
    for _ in 0..3 {
        stuck.push(
            "run_check",
            Some("build"),
            json!({ "name": "build" }),
            Failure,
            "build: timed out after 300s (61/247 crates compiled)",
            Some("timed out after 300s"),
        );
    }
    assert_eq!(types(&stuck.replay()), vec![(LoopType::IdenticalAction, 3)]);
}

// ---------------------------------------------------------------- general grounds (2026-11-25)

/// A step from the minimal step format's fields (what other agents' logs give).
fn step(v: Value) -> StepView {
    serde_json::from_value(v).expect("a valid step")
}

/// Numbers the steps 1, 2, ... in order.
fn renumber(mut steps: Vec<StepView>) -> Vec<StepView> {
    for (i, s) in steps.iter_mut().enumerate() {
        s.step = i as u64 + 1;
    }
    steps
}

#[test]
fn searches_in_one_folder_are_told_apart_by_their_pattern() {
    // The log records the folder as the target; the pattern is what is searched for.
    let search = |pattern: &str| {
        step(json!({
            "step": 0, "action": "search", "target": ".", "result": "success",
            "parameters": { "pattern": pattern, "path": "." },
            "summary": format!("search '{pattern}' in ."),
            "output": format!("src/{pattern}.py:1: {pattern}"),
        }))
    };
    let distinct = renumber(vec![
        search("absolute_url"),
        search("SITE_URL"),
        search("PUBLIC_URL"),
    ]);
    assert!(LoopDetector::default().replay(&distinct).is_empty());
    let same = renumber(vec![
        search("SITE_URL"),
        search("SITE_URL"),
        search("SITE_URL"),
    ]);
    assert_eq!(
        types(&LoopDetector::default().replay(&same)),
        vec![(LoopType::Repetition, 3)]
    );
}

#[test]
fn a_diagnostic_without_a_code_means_its_headline_not_the_excerpt() {
    let lint = |import: &str| {
        format!(
            "    Checking report v0.2.0\nerror: unused import: `{import}`\n --> src/lib.rs:1:5\n  |\n1 | use {import};\n  |     ^^^^^^^^\n"
        )
    };
    let a = meaning::failure_meaning(ErrorCategory::Other, &lint("std::fmt::Write"));
    let b = meaning::failure_meaning(ErrorCategory::Other, &lint("core::fmt::Write as _"));
    assert_eq!(a, b);
    let other = meaning::failure_meaning(
        ErrorCategory::Other,
        "error: this `if` has identical blocks\n --> src/lib.rs:9:5\n",
    );
    assert_ne!(a, other);
}

#[test]
fn fewer_failures_because_fewer_ran_is_no_improvement() {
    // 2 passed, 2 failed, then a collection error (nothing ran): the error is not
    // better, so what comes after it is not judged as after an improvement.
    let mut t = Traj::new();
    t.push(
        "run_check",
        Some("tests"),
        json!({"name": "tests"}),
        Failure,
        "tests: 2 passed, 2 failed",
        None,
    );
    let before = t.steps.last().cloned().unwrap();
    t.push(
        "run_check",
        Some("tests"),
        json!({"name": "tests"}),
        Failure,
        "tests: 1 error",
        None,
    );
    let steps = renumber(t.steps.clone());
    let prepared = analysis::Prepared::new(&steps);
    let a = analysis::Analysis::new(&steps, &prepared, 12);
    assert!(!a.ctx[1].improved, "a collection error counted as better");
    // Counts recorded by the host: the same.
    let mut counted = vec![before.clone(), before];
    counted[0].checks_passing = Some(2);
    counted[0].checks_failing = Some(2);
    counted[1].checks_passing = Some(0);
    counted[1].checks_failing = Some(1);
    let counted = renumber(counted);
    let prepared = analysis::Prepared::new(&counted);
    let a = analysis::Analysis::new(&counted, &prepared, 12);
    assert!(!a.ctx[1].improved);
    // Fewer failures with as many passing is better.
    let mut better = counted.clone();
    better[1].checks_passing = Some(2);
    let prepared = analysis::Prepared::new(&better);
    let a = analysis::Analysis::new(&better, &prepared, 12);
    assert!(a.ctx[1].improved);
}

/// A reproduction script failing with `error` after each edit: output text, no counts.
fn repro(error: &str) -> StepView {
    let output = format!("Traceback (most recent call last):\n  File \"m.py\", line 3\n{error}\n");
    step(json!({
        "step": 0, "action": "run_command", "result": "failure",
        "parameters": { "command": "python reproduce.py" },
        "error": error, "summary": "python reproduce.py",
        "output_len": output.len(), "output": output,
    }))
}

fn edit_step(path: &str, old: &str, new: &str) -> StepView {
    step(json!({
        "step": 0, "action": "edit_file", "target": path, "result": "success",
        "parameters": { "path": path, "old_text": old, "new_text": new },
        "summary": "edit",
    }))
}

#[test]
fn a_finished_failure_reworded_at_more_length_is_unchanged_verification() {
    // Each rewrite of the same line leaves the same TypeError; only the type it names
    // (and so the output's length) changes.
    let steps = renumber(vec![
        repro("TypeError: unsupported operand for *: 'NoneType' and 'One'"),
        edit_step("m.py", "c = a[0]", "c = a[0] if a else ONE"),
        repro("TypeError: unsupported operand for *: 'NoneType' and 'Integer'"),
        edit_step("m.py", "c = a[0] if a else ONE", "c = next(iter(a), ONE)"),
        repro("TypeError: unsupported operand for *: 'NoneType' and 'One'"),
        edit_step(
            "m.py",
            "c = next(iter(a), ONE)",
            "c = ONE if not a else a[0]",
        ),
        repro("TypeError: unsupported operand for *: 'NoneType' and 'Rational'"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::NoProgress, 7)], "{found:?}");
}

#[test]
fn edits_starting_with_a_comment_are_compared_by_their_code() {
    // Two different changes under a comment line, another change between them: the third
    // does not put the file back to the first's version, whatever the comment.
    let steps = renumber(vec![
        edit_step(
            "src/lib.rs",
            "    // rank\n    let idx = p * n;\n",
            "    // rank\n    let rank = p * n;\n",
        ),
        edit_step(
            "src/lib.rs",
            "    let rank = p * n;\n",
            "    let rank = (p * n).floor();\n",
        ),
        edit_step(
            "src/lib.rs",
            "    // rank\n    let rank = (p * n).floor();\n",
            "    // rank\n    let rank = (n * p).floor();\n",
        ),
    ]);
    let prepared = analysis::Prepared::new(&steps);
    let a = analysis::Analysis::new(&steps, &prepared, 12);
    assert!(a.ctx[2].returns.is_empty(), "{:?}", a.ctx[2].returns);
    assert_ne!(a.ctx[0].content, a.ctx[2].content);
}

#[test]
fn unchanged_verification_needs_a_check_after_the_attempts() {
    // The tests fail after a dependency bump; two more changes to the same line follow,
    // checked only by an install that fails another way: nothing says the changes left
    // verification as it was.
    let mut pip = repro("ResolutionImpossible: lib<2 conflicts with plugin 2.2");
    pip.parameters = json!({ "command": "pip install -r deps.txt" });
    let mut tests = repro("PydanticUserError: root_validator needs skip_on_failure");
    tests.action = "run_check".into();
    tests.parameters = json!({ "name": "tests", "command": "python -m pytest -q" });
    let steps = renumber(vec![
        edit_step("deps.txt", "lib==1.10", "lib>=2.6"),
        tests,
        edit_step("deps.txt", "lib>=2.6", "lib<2"),
        pip,
        edit_step("deps.txt", "lib<2", "lib>=2.6"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_no_op_edit_then_a_rework_of_its_lines_with_the_same_failure_is_no_progress() {
    let steps = renumber(vec![
        repro("AssertionError: assert 6 == 5"),
        // A first real try.
        edit_step(
            "stats.py",
            "    return s[i]\n",
            "    return s[min(i, n - 1)]\n",
        ),
        repro("AssertionError: assert 6 == 5"),
        // A comment only: changes nothing.
        edit_step(
            "stats.py",
            "    i = int(p * n)\n",
            "    # rank of the percentile\n    i = int(p * n)\n",
        ),
        repro("AssertionError: assert 6 == 5"),
        // The same lines again.
        edit_step(
            "stats.py",
            "    # rank of the percentile\n    i = int(p * n)\n",
            "    # rank of the percentile\n    i = int(n * p)\n",
        ),
        repro("AssertionError: assert 6 == 5"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(
        found.first().map(|d| (d.loop_type, d.step)),
        Some((LoopType::NoProgress, 7)),
        "{found:?}"
    );
}

fn write_step(path: &str, content: &str) -> StepView {
    step(json!({
        "step": 0, "action": "write_file", "target": path, "result": "success",
        "parameters": { "path": path, "content": content }, "summary": "write",
    }))
}

fn build_fails(code: &str) -> StepView {
    step(json!({
        "step": 0, "action": "run_check", "target": "build", "result": "failure",
        "parameters": { "name": "build", "command": "cargo build" },
        "error": format!("error[{code}]: something about the borrow"), "summary": code,
    }))
}

#[test]
fn reworks_that_bring_back_an_earlier_failure_are_an_error_cycle() {
    // Approach A fails with E0502, approach B with E0106, A again (reworded) with E0502.
    let steps = renumber(vec![
        write_step("src/lib.rs", "fn a() { collect_first(); }"),
        build_fails("E0502"),
        write_step("src/lib.rs", "fn a() { borrow_slice(); }"),
        build_fails("E0106"),
        write_step("src/lib.rs", "fn a() { let v = collect(); apply(v); }"),
        build_fails("E0502"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::ErrorCycle, 6)], "{found:?}");
    // A warning: no one action is at fault.
    assert_eq!(found[0].block, None);
    assert!(
        found[0].suggestions[0].contains("E0502"),
        "{:?}",
        found[0].suggestions
    );
}

#[test]
fn a_check_after_a_reverted_change_is_not_a_repeat() {
    // The host applied the change, ran the checks and undid it; the agent's next check
    // answers that attempt. Only the re-runs after it, with nothing tried, repeat.
    let mut t = Traj::new();
    let clippy = |t: &mut Traj| {
        t.push(
            "run_check",
            Some("clippy"),
            json!({ "name": "clippy" }),
            Failure,
            "clippy: 1 error (exit 101)",
            Some("error: this `if` has identical blocks"),
        );
    };
    clippy(&mut t);
    t.read("src/layout.rs");
    t.push(
        "edit_file",
        Some("src/layout.rs"),
        json!({ "path": "src/layout.rs", "old_text": "x += w;", "new_text": "x += w + gap;" }),
        Failure,
        "reverted: edited src/layout.rs; checks: tests: 61 passed, 2 failed (exit 101)",
        Some("change broke passing check `tests`; file restored"),
    );
    clippy(&mut t);
    t.read("src/layout.rs");
    clippy(&mut t);
    assert!(
        !t.replay()
            .iter()
            .any(|d| d.loop_type == LoopType::Repetition),
        "{:?}",
        t.replay()
    );
    // Without the attempt, three identical runs are a repetition.
    let mut plain = Traj::new();
    clippy(&mut plain);
    plain.read("src/layout.rs");
    plain.search("identical");
    clippy(&mut plain);
    plain.read("src/other.rs");
    clippy(&mut plain);
    assert_eq!(
        plain.replay().first().map(|d| d.loop_type),
        Some(LoopType::Repetition)
    );
}

#[test]
fn a_revert_back_to_the_first_failure_is_not_an_error_cycle() {
    // The failure before any change comes back after one attempt is undone: trying one
    // thing and taking it back, then trying another, is work.
    let steps = renumber(vec![
        build_fails("E0502"),
        write_step("src/lib.rs", "fn a() { borrow_slice(); }"),
        build_fails("E0106"),
        write_step("src/lib.rs", "fn a() { original(); }"),
        build_fails("E0502"),
        write_step("src/lib.rs", "fn a() { clone_first(); }"),
        build_fails("E0277"),
    ]);
    assert!(LoopDetector::default().replay(&steps).is_empty());
    // Nor is a failure coming back after the checks got better in between.
    let mut t = Traj::with_checks(8, 2);
    t.tests(8, 2, "tests::a");
    t.edit("src/a.rs", "x = 1", "x = 2", "h1", (8, 2));
    t.tests(8, 2, "tests::b");
    t.edit("src/a.rs", "x = 2", "x = 3", "h2", (9, 1));
    t.tests(9, 1, "tests::c");
    t.edit("src/a.rs", "x = 3", "x = 4", "h3", (9, 1));
    t.tests(9, 1, "tests::b");
    assert!(
        !t.replay()
            .iter()
            .any(|d| d.loop_type == LoopType::ErrorCycle),
        "{:?}",
        t.replay()
    );
}

#[test]
fn debugging_one_test_through_an_exception_is_not_an_error_cycle() {
    // The test fails on its assertion, the first implementation raises, the fixed one
    // fails the assertion with another value: the same test, worked on.
    let pytest = |error: &str| {
        let mut s = repro(error);
        s.action = "run_check".into();
        s.parameters = json!({ "name": "tests", "command": "python -m pytest -q" });
        s
    };
    let steps = renumber(vec![
        edit_step(
            "tests/test_sum.py",
            "",
            "def test_total():\n    assert total([2, 3]) == 5\n",
        ),
        pytest("AssertionError: assert 0 == 5"),
        edit_step("sum.py", "    return 0\n", "    return sum(totl)\n"),
        pytest("NameError: name 'totl' is not defined"),
        edit_step(
            "sum.py",
            "    return sum(totl)\n",
            "    return sum(xs[1:])\n",
        ),
        pytest("AssertionError: assert 3 == 5"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert!(found.is_empty(), "{found:?}");
    // The very same assertion back after the rework is the cycle.
    let mut same = steps.clone();
    same[5] = pytest("AssertionError: assert 0 == 5");
    let same = renumber(same);
    assert_eq!(
        types(&LoopDetector::default().replay(&same)),
        vec![(LoopType::ErrorCycle, 6)]
    );
}

#[test]
fn a_long_read_only_streak_is_judged_by_its_latest_steps() {
    // Twelve new things read (exploring), then going back over two of them: the early
    // new ground does not excuse the re-reading now.
    let mut t = Traj::new();
    for i in 0..12 {
        t.read(&format!("src/m{i}.rs"));
    }
    t.read("src/m3.rs");
    t.read("src/new.rs");
    assert!(t.replay().is_empty(), "{:?}", t.replay());
    t.read("src/m5.rs");
    assert_eq!(types(&t.replay()), vec![(LoopType::NoProgress, 15)]);
    // A short streak with as many re-reads is still exploring.
    let mut short = Traj::new();
    for i in 0..5 {
        short.read(&format!("src/m{i}.rs"));
    }
    short.read("src/m1.rs").read("src/x.rs").read("src/m2.rs");
    assert!(short.replay().is_empty(), "{:?}", short.replay());
}

/// A shell command that fails; `output` is all the log keeps of what went wrong.
fn command_fails(command: &str, output: &str) -> StepView {
    step(json!({
        "step": 0, "action": "run_command", "result": "failure",
        "parameters": { "command": command }, "output": output,
    }))
}

fn command_succeeds(command: &str, output: &str) -> StepView {
    step(json!({
        "step": 0, "action": "run_command", "result": "success",
        "parameters": { "command": command }, "output": output,
    }))
}

#[test]
fn a_failing_poll_whose_output_says_other_things_is_not_a_repeat() {
    // The same status command after waits of different lengths; it fails while jobs are
    // pending, and each poll shows more of them done.
    let poll = |output: &str| {
        let mut s = command_fails("sleep 60; ci status 42", output);
        s.error = Some("exit status 8 (checks pending)".into());
        s
    };
    let mut steps = vec![
        poll("lint pending 0\nunit pending 0\nbuild pending 0"),
        poll("lint pass 41s\nunit pending 0\nbuild pending 0"),
        poll("lint pass 41s\nunit pass 2m3s\nbuild pending 0"),
    ];
    steps[1].parameters = json!({ "command": "sleep 90; ci status 42" });
    steps[2].parameters = json!({ "command": "sleep 120 && ci status 42" });
    let moving = renumber(steps.clone());
    let found = LoopDetector::default().replay(&moving);
    assert!(found.is_empty(), "{found:?}");
    // The same output each time (other timings aside): the waits do not make it new.
    let mut stuck = steps;
    stuck[1].output = Some("lint pending 0\nunit pending 0\nbuild pending 0".into());
    stuck[2].output = Some("lint pending 0\nunit pending 0\nbuild pending 0".into());
    let found = LoopDetector::default().replay(&renumber(stuck));
    assert_eq!(types(&found), vec![(LoopType::IdenticalAction, 3)]);
}

#[test]
fn a_failure_kept_only_in_the_output_has_its_kind() {
    // No error text, no summary: the error is the output's last line.
    let s = command_fails(
        "python -m app",
        "Traceback ...\n.venv/bin/python: No module named app\n",
    );
    assert_eq!(
        ActionSignature::of(&s).error,
        Some(ErrorCategory::Dependency)
    );
}

#[test]
fn one_failure_through_varied_commands_with_steps_between_is_a_semantic_loop() {
    // Four differently varied commands, one missing module; an install and a look at
    // the path in between change nothing.
    let missing = "ModuleNotFoundError: No module named 'structlog'";
    let steps = renumber(vec![
        command_fails("python -m pytest -q", missing),
        command_fails("PYTHONPATH=src python -m app", missing),
        command_succeeds("pip install -e .", "Successfully installed app-0.9.0"),
        command_fails("python -m pytest -q --import-mode=importlib", missing),
        command_succeeds(
            "python -c 'import sys; print(sys.path)'",
            "['', '/usr/lib/python3.11']",
        ),
        command_fails("cd src && python -m pytest -q ../tests", missing),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(
        types(&found),
        vec![(LoopType::SemanticLoop, 6)],
        "{found:?}"
    );
    assert_eq!(found[0].block, None);
    // The same command succeeding in between with other arguments: halving a range to
    // find the bad record, the variations matter.
    let bad = "decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]";
    let bisect = renumber(vec![
        command_fails("python load.py data.csv", bad),
        command_fails("python load.py data.csv --start 0 --end 500", bad),
        command_succeeds("python load.py data.csv --start 0 --end 250", "250 rows"),
        command_fails("python load.py data.csv --start 250 --end 500", bad),
        command_succeeds("python load.py data.csv --start 250 --end 375", "125 rows"),
        command_fails("python load.py data.csv --start 375 --end 500", bad),
        command_fails("python load.py data.csv --start 375 --end 440", bad),
    ]);
    let found = LoopDetector::default().replay(&bisect);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_file_put_back_by_other_edits_than_the_exact_undo_returns() {
    // No file hashes: a line added, removed; another added, reworded, removed. The file
    // is back where it was twice, though no edit undoes the one before it exactly.
    let build = |error: &str| {
        step(json!({
            "step": 0, "action": "run_check", "target": "build", "result": "failure",
            "parameters": { "name": "build", "command": "go build ./..." }, "error": error,
        }))
    };
    let steps = renumber(vec![
        edit_step("go.mod", "", "replace a => ../fork"),
        build("reading ../fork/go.mod: no such file or directory"),
        edit_step("go.mod", "replace a => ../fork", ""),
        edit_step("vendor/a/c.go", "ack(m)", "ack(m)\nreturn"),
        edit_step("go.mod", "", "replace a => ../queue"),
        build("unexpected module path of ../queue"),
        edit_step("go.mod", "replace a => ../queue", "replace a => b v1.4.1"),
        build("invalid version: unknown revision v1.4.1"),
        edit_step("go.mod", "replace a => b v1.4.1", ""),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::Oscillation, 9)], "{found:?}");
    // Edits that move on (each adds a line never had) do not.
    let mut onward = steps.clone();
    onward[8] = edit_step("go.mod", "replace a => b v1.4.1", "replace a => b v1.4.2");
    let found = LoopDetector::default().replay(&renumber(onward));
    assert!(
        !found.iter().any(|d| d.loop_type == LoopType::Oscillation),
        "{found:?}"
    );
}

#[test]
fn changes_that_go_round_known_failures_are_an_error_cycle() {
    let pytest = |error: &str| {
        let mut s = repro(error);
        s.action = "run_check".into();
        s.parameters = json!({ "name": "tests", "command": "python -m pytest -q" });
        s
    };
    let (a, b, c) = (
        "RuntimeError: asyncio.run() cannot be called from a running event loop",
        "RuntimeError: This event loop is already running",
        "RuntimeError: Cannot run the event loop while another loop is running",
    );
    let attempt = |old: &str, new: &str| edit_step("client.py", old, new);
    let steps = renumber(vec![
        pytest(a),
        attempt(
            "asyncio.run(f())",
            "get_event_loop().run_until_complete(f())",
        ),
        pytest(b),
        attempt(
            "get_event_loop().run_until_complete(f())",
            "Runner().run(f())",
        ),
        pytest(c),
        attempt(
            "Runner().run(f())",
            "new_event_loop().run_until_complete(f())",
        ),
        pytest(c),
        attempt(
            "new_event_loop().run_until_complete(f())",
            "asyncio.run(wait_for(f()))",
        ),
        pytest(a),
    ]);
    let found = LoopDetector::default().replay(&steps);
    // (C twice in a row is verification left as it was: reported as such at step 7.)
    let cycle: Vec<&Detection> = found
        .iter()
        .filter(|d| d.loop_type == LoopType::ErrorCycle)
        .collect();
    assert_eq!(cycle.first().map(|d| d.step), Some(9), "{found:?}");
    assert_eq!(cycle[0].block, None);
    assert!(cycle[0].suggestions[0].contains("cannot be called"));
    assert!(cycle[0].suggestions[0].contains("another loop is running"));
    // The same failure after every change is verification left as it was, not a cycle.
    let mut same = steps.clone();
    for i in [2, 4, 6, 8] {
        same[i] = pytest(a);
    }
    let found = LoopDetector::default().replay(&renumber(same));
    assert!(
        !found.iter().any(|d| d.loop_type == LoopType::ErrorCycle),
        "{found:?}"
    );
    // New failures each time (a cascade being worked through) are no cycle either.
    let mut cascade = steps;
    cascade[6] = pytest("TypeError: f() takes 0 positional arguments but 1 was given");
    cascade[8] = pytest("KeyError: 'id'");
    let found = LoopDetector::default().replay(&renumber(cascade));
    assert!(found.is_empty(), "{found:?}");
}

/// A query command failing with `error`.
fn query_fails(sql: &str, error: &str) -> StepView {
    step(json!({
        "step": 0, "action": "run_check", "target": "query", "result": "failure",
        "parameters": { "name": "query", "command": format!("db-cli app.db \"{sql}\"") },
        "error": error, "summary": "exit 1", "output": error,
    }))
}

#[test]
fn different_attempts_with_the_very_same_error_are_a_semantic_loop() {
    let err = "Error: in prepare, no such table: users";
    let steps = renumber(vec![
        query_fails("SELECT count(*) FROM users", err),
        query_fails("SELECT * FROM users LIMIT 5", err),
        query_fails("SELECT email FROM users JOIN invoices", err),
    ]);
    assert_eq!(
        types(&LoopDetector::default().replay(&steps)),
        vec![(LoopType::SemanticLoop, 3)]
    );
    // Each attempt failing in its own words is a search, not a loop (yet).
    let steps = renumber(vec![
        query_fails("SELECT count(*) FROM users", err),
        query_fails(
            "SELECT * FROM user",
            "Error: in prepare, no such table: user",
        ),
        query_fails(
            "SELECT * FROM accounts",
            "Error: in prepare, no such column: plan",
        ),
    ]);
    assert!(LoopDetector::default().replay(&steps).is_empty());
}

#[test]
fn writing_the_same_content_again_after_a_failing_check_is_a_repetition() {
    let write = || {
        let mut s = write_step("src/util.rs", "pub fn clamp(v: i64) -> u8 { 0 }\n");
        s.file_hashes
            .insert("src/util.rs".into(), "sha256:aaa".into());
        s
    };
    let ls = step(json!({
        "step": 0, "action": "run_command", "result": "success",
        "parameters": { "command": "ls src" }, "output": "lib.rs\nutil.rs",
    }));
    let steps = renumber(vec![
        build_fails("E0432"),
        write(),
        build_fails("E0432"),
        ls,
        write(),
        build_fails("E0432"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(
        found.first().map(|d| (d.loop_type, d.step)),
        Some((LoopType::Repetition, 6))
    );
    // A warning: blocking writes to the file would block the real fix too.
    assert_eq!(found[0].block, None);
}

#[test]
fn a_new_variant_that_brings_back_the_first_failure_is_flagged() {
    // The failure before any change comes back after a rework that is neither the
    // original nor the first attempt: the variants go round two failures.
    let steps = renumber(vec![
        build_fails("E0502"),
        edit_step(
            "src/lib.rs",
            "for x in &self.items {",
            "let v = self.items.clone();\nfor x in &v {",
        ),
        build_fails("E0599"),
        edit_step(
            "src/lib.rs",
            "let v = self.items.clone();\nfor x in &v {",
            "for i in 0..self.items.len() {\nlet x = &self.items[i];",
        ),
        build_fails("E0502"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(found.first().map(|d| d.step), Some(5), "{found:?}");
    assert_eq!(found[0].block, None);
    // Undoing the first attempt instead is trying one thing and taking it back.
    let steps = renumber(vec![
        build_fails("E0502"),
        edit_step(
            "src/lib.rs",
            "for x in &self.items {",
            "let v = self.items.clone();\nfor x in &v {",
        ),
        build_fails("E0599"),
        edit_step(
            "src/lib.rs",
            "let v = self.items.clone();\nfor x in &v {",
            "for x in &self.items {",
        ),
        build_fails("E0502"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn removing_debug_prints_one_by_one_is_not_oscillation() {
    let steps = renumber(vec![
        repro("AssertionError: assert [2] == [2, 3]"),
        edit_step(
            "d.py",
            "key = r.email\n",
            "key = r.email\nprint('key', key)\n",
        ),
        repro("AssertionError: assert [2] == [2, 3]"),
        edit_step(
            "d.py",
            "seen[key] = r\n",
            "seen[key] = r\nprint('stored', key)\n",
        ),
        repro("AssertionError: assert [2] == [2, 3]"),
        edit_step("d.py", "print('key', key)\n", ""),
        edit_step("d.py", "print('stored', key)\n", ""),
        edit_step("d.py", "key = r.email\n", "key = (r.email, r.tenant)\n"),
    ]);
    assert!(
        !LoopDetector::default()
            .replay(&steps)
            .iter()
            .any(|d| d.loop_type == LoopType::Oscillation),
        "{:?}",
        LoopDetector::default().replay(&steps)
    );
}

#[test]
fn files_a_command_puts_back_count_as_returns() {
    // `git stash` / `git stash pop` flip a file between two versions the log hashes.
    let mut t = Traj::new();
    let cmd = |t: &mut Traj, c: &str, h: &str| {
        t.push(
            "run_command",
            None,
            json!({ "command": c }),
            Success,
            c,
            None,
        )
        .file_hashes
        .insert("src/f.js".into(), h.into());
    };
    t.tests(1, 1, "display");
    t.edit("src/f.js", "a.toFixed(2)", "fmt.format(a)", "h1", (1, 1));
    t.tests(1, 1, "csv");
    cmd(&mut t, "git stash", "h0");
    t.tests(1, 1, "display");
    cmd(&mut t, "git stash pop", "h1");
    t.tests(1, 1, "csv");
    cmd(&mut t, "git checkout -- src/f.js", "h0");
    let found = t.replay();
    assert!(
        found.iter().any(|d| d.loop_type == LoopType::Oscillation),
        "{found:?}"
    );
}

#[test]
fn tap_failures_are_told_apart_by_test_name() {
    use crate::meaning::failure_meaning;
    let a = failure_meaning(
        ErrorCategory::TestFailure,
        "TAP version 13\nok 1 - csv row\nnot ok 2 - display price has separators\n  ---\n  name: 'AssertionError'\n",
    );
    let b = failure_meaning(
        ErrorCategory::TestFailure,
        "TAP version 13\nnot ok 1 - csv row\n  ---\n  name: 'AssertionError'\nok 2 - display price has separators\n",
    );
    assert_ne!(a, b);
}

#[test]
fn a_narrower_run_with_the_same_failure_leaves_verification_as_it_was() {
    // Renames and comments, checked by the whole suite or by the one failing test: the
    // same assertion fails every time.
    let run = |t: &mut Traj, cmd: &str, passed: usize| {
        t.checks = Some((passed, 1));
        let err = "thread 'tests::sums' panicked at src/lib.rs:9:5:\nassertion `left == right` failed\n  left: 250000\n right: 2500";
        t.push(
            "run_check",
            Some("tests"),
            json!({ "name": "tests", "command": cmd }),
            Failure,
            "exit 101",
            Some(err),
        );
    };
    let mut t = Traj::new();
    let edit = |t: &mut Traj, old: &str, new: &str| {
        // Edits that do not re-run the checks.
        t.checks = None;
        t.push(
            "edit_file",
            Some("src/lib.rs"),
            json!({ "path": "src/lib.rs", "old_text": old, "new_text": new }),
            Success,
            "edited",
            None,
        );
    };
    run(&mut t, "cargo test", 1);
    edit(
        &mut t,
        "let amount = a * 100;\nsum += amount;",
        "let total = a * 100;\nsum += total;",
    );
    run(&mut t, "cargo test", 1);
    edit(
        &mut t,
        "let mut sum = 0;\n",
        "// running total\nlet mut sum = 0;\n",
    );
    run(&mut t, "cargo test sums", 0);
    edit(&mut t, "let mut sum = 0;\n", "let mut sum: u64 = 0;\n");
    run(&mut t, "cargo test", 1);
    let found = t.replay();
    assert_eq!(
        found.first().map(|d| (d.loop_type, d.step)),
        Some((LoopType::NoProgress, 7)),
        "{found:?}"
    );
}

// ------------------------------------------- rules from the blind4 development set

/// A step with only the fields the rules below look at.
fn plain(i: u64, action: &str, params: Value, result: ActionResult) -> StepView {
    let mut s = shown(i, action, params, result, "");
    s.error = None;
    s.output = None;
    s.output_len = None;
    s
}

/// A check command failing with `error`.
fn failing_run(i: u64, command: &str, error: &str) -> StepView {
    let mut s = plain(i, "run_command", json!({ "command": command }), Failure);
    s.error = Some(error.to_string());
    s.output = Some(error.to_string());
    s
}

#[test]
fn a_plan_recorded_as_the_messages_output_is_judged_by_its_words() {
    let said = |i: u64, text: &str| {
        let mut s = plain(i, "message", json!({}), Success);
        s.summary = "restates plan".into();
        s.output = Some(text.to_string());
        s
    };
    let plans = [
        "Plan: bump typescript in the root package.json, then migrate the eslint config, then run the build.",
        "To restate: typescript bump in package.json first, eslint config migration second, build last.",
        "So: package.json typescript bump, then the eslint config migration, then the build run.",
    ];
    let restated: Vec<StepView> = plans.iter().zip(1..).map(|(p, i)| said(i, p)).collect();
    assert_eq!(
        types(&LoopDetector::default().replay(&restated)),
        vec![(LoopType::Repetition, 3)]
    );
    // The same summary over messages that each say something else is no repetition.
    let news = [
        "The build fails in packages/ui: a missing peer dependency on react-dom.",
        "Added react-dom as a peer dependency; the ui package now compiles.",
        "Lint reports two unused imports in apps/admin; removing them.",
    ];
    let distinct: Vec<StepView> = news.iter().zip(1..).map(|(p, i)| said(i, p)).collect();
    assert!(LoopDetector::default().replay(&distinct).is_empty());
}

/// Steps of two approaches tried in turn on one function, each failing with its own
/// compiler error code, reworded every time.
fn two_approaches(errors: &[&str]) -> Vec<StepView> {
    let mut steps = Vec::new();
    let mut i = 0;
    let mut next = |steps: &mut Vec<StepView>, s: StepView| {
        i += 1;
        steps.push(StepView { step: i, ..s });
    };
    for (k, error) in errors.iter().enumerate() {
        let mut edit = plain(
            0,
            "edit_file",
            json!({ "path": "src/lib.rs", "old_text": format!("fn label_{k}() {{}}"), "new_text": format!("fn label_{}() {{}}", k + 1) }),
            Success,
        );
        edit.target = Some("src/lib.rs".into());
        next(&mut steps, edit);
        next(&mut steps, failing_run(0, "cargo test -q", error));
    }
    steps
}

#[test]
fn going_back_to_an_error_code_however_reworded_is_an_error_cycle() {
    let steps = two_approaches(&[
        "error[E0515]: cannot return reference to local variable `s`",
        "error[E0053]: method `label` has an incompatible type for trait",
        "error[E0515]: cannot return value referencing temporary value",
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::ErrorCycle, 6)], "{found:?}");
    // A cascade of new error codes is the code getting further.
    let cascade = two_approaches(&[
        "error[E0515]: cannot return reference to local variable `s`",
        "error[E0053]: method `label` has an incompatible type for trait",
        "error[E0308]: mismatched types",
    ]);
    assert!(LoopDetector::default().replay(&cascade).is_empty());
}

#[test]
fn a_rename_back_and_forth_after_a_passing_run_is_still_an_error_cycle() {
    let mut ok = plain(
        1,
        "run_command",
        json!({ "command": "node bin/report.js" }),
        Success,
    );
    ok.output = Some("{\"count\":3}".into());
    let await_error =
        "SyntaxError: await is only valid in async functions and the top level bodies of modules";
    let scope_error = "ReferenceError: require is not defined in ES module scope";
    let edit = |i: u64, old: &str, new: &str| {
        let mut s = plain(
            i,
            "edit_file",
            json!({ "path": "bin/report.js", "old_text": old, "new_text": new }),
            Success,
        );
        s.target = Some("bin/report.js".into());
        s
    };
    let mv = |i: u64, from: &str, to: &str| {
        plain(
            i,
            "run_command",
            json!({ "command": format!("git mv {from} {to}") }),
            Success,
        )
    };
    let steps = vec![
        ok,
        edit(2, "load().then(run);", "const r = await load();\nrun(r);"),
        failing_run(3, "node bin/report.js", await_error),
        mv(4, "bin/report.js", "bin/report.mjs"),
        failing_run(5, "node bin/report.mjs", scope_error),
        mv(6, "bin/report.mjs", "bin/report.js"),
        edit(7, "const r = await load();\nrun(r);", "run(await load());"),
        failing_run(8, "node bin/report.js", await_error),
    ];
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::ErrorCycle, 8)], "{found:?}");
    // Renaming, then a new failure further on: the attempts moved.
    let mut moved = steps[..7].to_vec();
    moved.push(failing_run(
        8,
        "node bin/report.js",
        "TypeError: run is not a function",
    ));
    assert!(LoopDetector::default().replay(&moved).is_empty());
}

#[test]
fn the_same_edit_leaving_the_same_content_with_the_same_failure_is_a_repetition() {
    let build = |t: &mut Traj, error: &str| {
        t.push(
            "run_check",
            Some("build"),
            json!({ "name": "build" }),
            Failure,
            "build: make exited 2",
            Some(error),
        );
    };
    let assert_fails =
        "src/server.c:4:1: error: static assertion failed: \"MAX_CLIENTS too small\"";
    let mut t = Traj::new();
    build(&mut t, assert_fails);
    for _ in 0..2 {
        t.push(
            "edit_file",
            Some("src/config.h"),
            json!({ "path": "src/config.h", "old_text": "#define MAX_CLIENTS 16", "new_text": "#define MAX_CLIENTS 64" }),
            Success,
            "edit src/config.h",
            None,
        )
        .file_hashes
        .insert("src/config.h".into(), "sha256:64".into());
        build(&mut t, assert_fails);
    }
    assert_eq!(types(&t.replay()), vec![(LoopType::Repetition, 5)]);
    // The same edit again followed by another failure: doing it again told something.
    let mut other = Traj::new();
    other.steps = t.steps[..4].to_vec();
    build(&mut other, "src/server.c:9:1: error: 'conf' undeclared");
    assert!(other.replay().is_empty(), "{:?}", other.replay());
}

#[test]
fn rereading_a_place_with_shifted_ranges_is_no_progress_but_paging_on_is_not() {
    let read = |i: u64, from: u64, to: u64| {
        let mut s = plain(
            i,
            "read_file",
            json!({ "path": "src/rules.ts", "start_line": from, "end_line": to }),
            Success,
        );
        s.target = Some("src/rules.ts".into());
        s
    };
    let mut failing = failing_run(
        1,
        "npx vitest run",
        "AssertionError: expected 'bronze' to be 'silver'",
    );
    failing.parameters = json!({ "command": "npx vitest run" });
    // Around one comparison at line 69, the window shifting each time.
    let ranges = [(60, 75), (66, 72), (55, 79), (62, 86), (64, 70), (58, 74)];
    let mut steps = vec![failing.clone()];
    steps.extend(ranges.iter().zip(2..).map(|(&(a, b), i)| read(i, a, b)));
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(
        found.first().map(|d| (d.loop_type, d.step)),
        Some((LoopType::NoProgress, 6)),
        "{found:?}"
    );
    // Paging through the file, each page overlapping the last by a line or two.
    let mut paging = vec![failing];
    paging.extend((0..6).map(|k| read(k + 2, 1 + 40 * k, 42 + 40 * k)));
    assert!(LoopDetector::default().replay(&paging).is_empty());
}

#[test]
fn an_error_that_only_gives_the_exit_status_is_read_from_the_output() {
    use signature::{failure_text, only_exit_status};
    for generic in [
        "command exited with status 1",
        "exit 1",
        "Process exited with code 2",
        "returned non-zero exit status 101",
    ] {
        assert!(only_exit_status(generic), "{generic}");
    }
    assert!(!only_exit_status("error: could not find `Cargo.toml`"));
    assert!(!only_exit_status("exit 1: KeyError: 'DATABASE_URL'"));

    let run = |output: &str| {
        step(json!({
            "step": 1, "action": "run_command", "result": "failure",
            "parameters": { "command": "python -m app" },
            "error": "command exited with status 1", "summary": "exit 1", "output": output,
        }))
    };
    // A traceback: the exception line, not the frames.
    let s = run("Traceback (most recent call last):\n  File \"app/settings.py\", line 3\n    X = os.environ[\"DATABASE_URL\"]\nKeyError: 'DATABASE_URL'\n");
    assert_eq!(failure_text(&s), "KeyError: 'DATABASE_URL'");
    // pytest: its `E` marker left out, so the same error reads the same from either.
    let s = run("___ test_x ___\n>   assert f()\nE   KeyError: 'DATABASE_URL'\n=== 1 failed ===\n");
    assert_eq!(failure_text(&s), "KeyError: 'DATABASE_URL'");
    // A failed test's header with what failed indented under it: both.
    let s = run("--- FAIL: TestList (0.41s)\n    list_test.go:23: got 25 items, want 10\nFAIL\n");
    assert_eq!(
        failure_text(&s),
        "--- FAIL: TestList (0.41s)\n    list_test.go:23: got 25 items, want 10"
    );
    assert_eq!(
        meaning::failure_headline(&s),
        "--- FAIL: TestList (D) L: got 25 items, want 10"
    );
    // The cause below a generic error line gives the kind.
    let s = run("ImportError while importing test module 'tests/test_core.py'.\nE   ModuleNotFoundError: No module named 'rapidfuzz'\n");
    assert_eq!(
        ActionSignature::of(&s).error,
        Some(ErrorCategory::Dependency)
    );
}

#[test]
fn editing_back_to_a_version_already_run_and_failing_as_then_is_oscillation() {
    // v1 fails one way, v2 another, and an edit puts v1's code back (with a comment, so
    // another hash): running it fails exactly as v1 did.
    let mut back = edit_step(
        "app/__init__.py",
        "from app import client",
        "from .client import Client  # re-export",
    );
    back.file_hashes
        .insert("app/__init__.py".into(), "sha256:c3".into());
    let mut v1 = edit_step(
        "app/__init__.py",
        "import app.client",
        "from .client import Client",
    );
    v1.file_hashes
        .insert("app/__init__.py".into(), "sha256:a1".into());
    let mut v2 = edit_step(
        "app/__init__.py",
        "from .client import Client",
        "from app import client",
    );
    v2.file_hashes
        .insert("app/__init__.py".into(), "sha256:b2".into());
    let steps = renumber(vec![
        v1,
        repro("ImportError: cannot import name 'Client' from 'app' (app/__init__.py)"),
        v2,
        repro("AttributeError: module 'app' has no attribute 'Client'"),
        back,
        repro("ImportError: cannot import name 'Client' from 'app' (app/__init__.py)"),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert_eq!(types(&found), vec![(LoopType::Oscillation, 6)], "{found:?}");
    assert_eq!(found[0].block, None);
    // The same code back but a new failure: the version runs differently now, no loop.
    let mut other = steps.clone();
    other[5] = repro("ValueError: Client needs a base URL");
    other[5].step = 6;
    assert!(LoopDetector::default().replay(&other).is_empty());
}

#[test]
fn a_check_flipping_with_nothing_changed_by_the_agent_is_not_oscillation() {
    // A bisection: the check's result flips as git checks out other commits; the agent
    // edits nothing.
    let check = |ok: bool| {
        step(json!({
            "step": 0, "action": "run_command", "result": if ok { "success" } else { "failure" },
            "parameters": { "command": "./check.sh" },
            "error": if ok { Value::Null } else { json!("command exited with status 1") },
            "summary": if ok { "exit 0" } else { "exit 1" },
            "output": if ok { "median=2.5" } else { "median=3.5" },
        }))
    };
    let mark = |ok: bool, left: usize| {
        step(json!({
            "step": 0, "action": "run_command", "result": "success",
            "parameters": { "command": if ok { "git bisect good" } else { "git bisect bad" } },
            "summary": "exit 0",
            "output": format!("Bisecting: {left} revisions left to test after this\n[{left:040}] commit {left}"),
        }))
    };
    let steps = renumber(vec![
        check(false),
        mark(false, 19),
        check(true),
        mark(true, 9),
        check(false),
        mark(false, 4),
        check(false),
        mark(false, 2),
        check(true),
        mark(true, 1),
        check(false),
        mark(false, 0),
    ]);
    let found = LoopDetector::default().replay(&steps);
    assert!(found.is_empty(), "{found:?}");
}

/// The rules of `normalize_path`, one copy each, as it was first written.
fn normalize_path_reference(p: &str) -> String {
    let mut s = p.trim().replace('\\', "/");
    while s.contains("//") {
        s = s.replace("//", "/");
    }
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.to_string();
    }
    s = s.replace("/./", "/");
    if s.len() > 1 {
        s = s.trim_end_matches('/').to_string();
    }
    s
}

proptest! {
    /// Its fast path for paths that are already normal changes no result.
    #[test]
    fn normalize_path_matches_its_rules(p in "( |\\t|/|\\\\|\\.|\\./|//|a|src|é){0,12}") {
        prop_assert_eq!(signature::normalize_path(&p), normalize_path_reference(&p));
    }
}
