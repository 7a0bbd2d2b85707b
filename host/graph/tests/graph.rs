//! The trace database through its public API: opening and migrating, recording,
//! precedents, learning, and the rules' life.

mod support;

use agentforge_graph::{
    db, Graph, GraphError, LearnSettings, PrecedentQuery, RuleCondition, RuleEffect, RuleStatus,
    TraceKind, TraceSource,
};
use support::{generated, trace};

const NOW: &str = "2025-02-01T12:00:00Z";

/// A denial of `complete` by guard-verify-implementation in `task` at `step`.
fn no_change_denial(task: &str, step: u64) -> agentforge_graph::Trace {
    trace(
        task,
        "code",
        "implement",
        step,
        TraceSource::GuardDenial,
        "guard-verify-implementation",
        "complete",
        None,
        "Agent called complete with no file changed",
        "Edit the files the subtask names, then call complete",
        "guard-verify-implementation: no file changed since the task started",
    )
}

fn user_version(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

// --- open and migrations ---------------------------------------------------------------

#[test]
fn open_creates_the_folder_and_migrates_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/folder/graph.db");
    let g = Graph::open(&path).unwrap();
    assert!(path.is_file());
    assert_eq!(g.trace_count().unwrap(), 0);
    drop(g);
    assert_eq!(user_version(&path), db::SCHEMA_VERSION as i64);

    // An empty file (zero bytes) is a valid empty database: migrated too.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    Graph::open(&empty).unwrap();
    assert_eq!(user_version(&empty), db::SCHEMA_VERSION as i64);
    let conn = rusqlite::Connection::open(&empty).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn reopening_keeps_traces_and_does_not_migrate_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.db");
    let mut g = Graph::open(&path).unwrap();
    g.record(&[no_change_denial("t-1", 1), no_change_denial("t-1", 2)])
        .unwrap();
    drop(g);
    let mut g = Graph::open(&path).unwrap();
    assert_eq!(g.trace_count().unwrap(), 2);
    assert_eq!(g.record(&[no_change_denial("t-1", 2)]).unwrap(), 0);
    assert_eq!(user_version(&path), db::SCHEMA_VERSION as i64);
}

#[test]
fn a_database_from_a_newer_schema_is_refused_naming_the_file_and_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.db");
    drop(Graph::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 7)
        .unwrap();
    let err = Graph::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::NewerSchema {
                found: 7,
                supported: db::SCHEMA_VERSION,
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains("version 7") && msg.contains(&format!("up to {}", db::SCHEMA_VERSION)),
        "{msg}"
    );
    // Refused, not touched.
    assert_eq!(user_version(&path), 7);
}

#[test]
fn a_corrupt_file_is_refused_naming_the_file_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.db");
    std::fs::write(&path, vec![0x5a_u8; 8192]).unwrap();
    let err = Graph::open(&path).unwrap_err();
    assert!(matches!(err, GraphError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("move it aside"), "{msg}");
}

// --- record --------------------------------------------------------------------------

#[test]
fn recording_the_same_traces_twice_counts_them_once() {
    let mut g = Graph::open_in_memory().unwrap();
    let traces = vec![
        no_change_denial("t-1", 1),
        no_change_denial("t-1", 2),
        no_change_denial("t-2", 1),
    ];
    assert_eq!(g.record(&traces).unwrap(), 3);
    assert_eq!(g.record(&traces).unwrap(), 0);
    // A batch repeating a key within itself.
    assert_eq!(
        g.record(&[no_change_denial("t-3", 1), no_change_denial("t-3", 1)])
            .unwrap(),
        1
    );
    assert_eq!(g.trace_count().unwrap(), 4);
    // The pattern's count is not inflated by the repeats.
    g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!(g.patterns().unwrap()[0].count, 4);
}

#[test]
fn a_batch_is_recorded_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.db");
    drop(Graph::open(&path).unwrap());
    // Make the third insert fail.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON traces WHEN new.key = 'boom#1#0' \
             BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        )
        .unwrap();
    let mut g = Graph::open(&path).unwrap();
    let batch = [
        no_change_denial("t-1", 1),
        no_change_denial("t-1", 2),
        no_change_denial("boom", 1),
    ];
    assert!(g.record(&batch).is_err());
    assert_eq!(
        g.trace_count().unwrap(),
        0,
        "the first two were rolled back"
    );
    assert!(g.precedents(&query("anything", &[])).unwrap().is_empty());
}

#[test]
fn traces_come_back_newest_first_and_filtered_by_task() {
    let mut g = Graph::open_in_memory().unwrap();
    let mut late = no_change_denial("t-1", 1);
    late.timestamp = support::timestamp(10_000);
    let mut t = no_change_denial("t-1", 2);
    t.context.role = Some("builder".into());
    t.event.target = Some("src/lib.rs".into());
    g.record(&[late.clone(), t.clone(), no_change_denial("t-2", 3)])
        .unwrap();
    let all = g.traces(None, 10).unwrap();
    let keys: Vec<&str> = all.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["t-1#1#0", "t-2#3#0", "t-1#2#0"]);
    // Stored and read back whole.
    assert_eq!(all[0], late);
    assert_eq!(all[2], t);
    let one: Vec<String> = g
        .traces(Some("t-1"), 1)
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(one, ["t-1#1#0"]);
}

#[test]
fn two_processes_creating_one_file_at_once_both_open_it() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let path = dir.path().join(format!("graph-{round}.db"));
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let openers: Vec<_> = (0..2)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    Graph::open(&path).map(|_| ())
                })
            })
            .collect();
        for o in openers {
            o.join().unwrap().unwrap();
        }
        assert_eq!(user_version(&path), db::SCHEMA_VERSION as i64);
    }
}

#[test]
fn two_writers_on_one_file_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.db");
    drop(Graph::open(&path).unwrap());
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut g = Graph::open(&path).unwrap();
                for batch in 0..100 {
                    let traces: Vec<_> = (0..5)
                        .map(|i| no_change_denial(&format!("{who}-{batch}"), i))
                        .collect();
                    assert_eq!(g.record(&traces).unwrap(), 5);
                    if batch % 25 == 0 {
                        g.learn(&LearnSettings::default(), NOW).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut g = Graph::open(&path).unwrap();
    assert_eq!(g.trace_count().unwrap(), 1_000);
    g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!(g.patterns().unwrap()[0].count, 1_000);
    assert_eq!(g.rules(None).unwrap().len(), 1, "proposed once");
}

// --- precedents ----------------------------------------------------------------------

fn query(text: &str, targets: &[&str]) -> PrecedentQuery {
    PrecedentQuery {
        task_id: "t-new".into(),
        task_type: "code".into(),
        phase: "implement".into(),
        role: None,
        targets: targets.iter().map(|t| t.to_string()).collect(),
        text: text.into(),
        limit: 5,
    }
}

#[test]
fn precedents_over_an_empty_database_are_none() {
    let g = Graph::open_in_memory().unwrap();
    assert!(g
        .precedents(&query("add retry to the client", &["src/net/client.rs"]))
        .unwrap()
        .is_empty());
}

#[test]
fn a_same_type_same_target_trace_ranks_above_an_unrelated_one() {
    let mut g = Graph::open_in_memory().unwrap();
    let related = trace(
        "t-1",
        "code",
        "implement",
        4,
        TraceSource::AutoRevert,
        "auto-revert",
        "edit_file",
        Some("src/net/client.rs"),
        "The edit of src/net/client.rs broke cargo test, which passed before; reverted",
        "Run cargo test after editing the client and fix the failure",
        "check cargo test went from passing to failing",
    );
    // Unrelated, but sharing words with the query ("retry", "client").
    let unrelated = trace(
        "t-2",
        "docs",
        "review",
        9,
        TraceSource::GuardDenial,
        "guard-protected-paths",
        "write_file",
        Some("config/retry.toml"),
        "Agent tried to write the retry client settings in config/retry.toml",
        "Leave configuration alone",
        "guard-protected-paths: config/retry.toml is protected",
    );
    g.record(&[unrelated, related]).unwrap();
    let found = g
        .precedents(&query(
            "Add retry with backoff to the HTTP client",
            &["src/net/client.rs"],
        ))
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].trace.key, "t-1#4#0");
    assert_eq!(found[1].trace.key, "t-2#9#0");
    assert!(found[0].score > found[1].score);
    assert!(!found[0].same_task);
    assert_eq!(found[0].pattern_count, 1);
}

#[test]
fn precedents_show_one_trace_per_pattern_with_its_count() {
    let mut g = Graph::open_in_memory().unwrap();
    let mut traces: Vec<_> = (1..=4).map(|s| no_change_denial("t-1", s)).collect();
    traces.push(trace(
        "t-1",
        "code",
        "implement",
        9,
        TraceSource::LoopDetection,
        "loop-detector",
        "read_file",
        Some("src/lib.rs"),
        "Agent repeated read_file on src/lib.rs 4 times",
        "Read it once, then change the code",
        "identical actions",
    ));
    g.record(&traces).unwrap();
    let mut q = query("call complete after changing src/lib.rs", &["src/lib.rs"]);
    q.task_id = "t-1".into();
    let found = g.precedents(&q).unwrap();
    assert_eq!(found.len(), 2, "{found:#?}");
    let denial = found
        .iter()
        .find(|p| p.trace.event.enforcer == "guard-verify-implementation")
        .unwrap();
    assert_eq!(denial.pattern_count, 4);
    assert!(denial.same_task);
    // The most recent of equals is the one shown.
    assert_eq!(denial.trace.key, "t-1#4#0");
    q.limit = 1;
    assert_eq!(g.precedents(&q).unwrap().len(), 1);
}

#[test]
fn fts_syntax_in_the_query_never_errors() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&generated(300, 7)).unwrap();
    let nasty = [
        "\"",
        "\"\"\"",
        "*",
        "NEAR(",
        "NEAR(a b, 2)",
        "-",
        "-x",
        ":",
        "what_happened: complete",
        "a AND OR NOT b",
        "(unbalanced",
        "^start",
        "{col1 col2}: x",
        "x + y",
        "'single'",
        "emoji 🦀 and ünïcödé",
        "\0nul",
        "",
    ];
    for text in nasty {
        let q = PrecedentQuery {
            targets: vec![text.to_string(), format!("src/{text}.rs")],
            ..query(text, &[])
        };
        g.precedents(&q).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
    // And still finds things.
    let found = g
        .precedents(&query("complete \"NEAR( src/net/client.rs -x: *", &[]))
        .unwrap();
    assert!(!found.is_empty());
}

#[test]
fn precedents_on_a_generated_set_are_one_per_pattern_and_ordered() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&generated(5_000, 42)).unwrap();
    let q = PrecedentQuery {
        task_id: "task-00003".into(),
        task_type: "code".into(),
        phase: "implement".into(),
        role: None,
        targets: vec!["src/net/client.rs".into()],
        text: "Add retry with backoff to the HTTP client; make cargo test pass".into(),
        limit: 8,
    };
    let found = g.precedents(&q).unwrap();
    assert_eq!(found.len(), 8);
    let mut patterns = std::collections::HashSet::new();
    for p in &found {
        let e = &p.trace.event;
        assert!(patterns.insert((e.source, e.enforcer.clone(), e.action.clone())));
        assert!(p.pattern_count >= 1);
    }
    assert!(found.windows(2).all(|w| w[0].score >= w[1].score));
}

// --- learn and rules -----------------------------------------------------------------

#[test]
fn three_denials_in_two_tasks_make_one_pattern_and_one_proposal() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&[
        no_change_denial("t-1", 1),
        no_change_denial("t-1", 5),
        no_change_denial("t-2", 3),
    ])
    .unwrap();
    let report = g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!(report.traces, 3);
    assert_eq!(report.patterns, 1);
    assert_eq!(report.new_patterns, 1);
    assert_eq!(report.proposed.len(), 1);

    let patterns = g.patterns().unwrap();
    assert_eq!(patterns.len(), 1);
    let p = &patterns[0];
    assert_eq!(p.key, "guard_denial:guard-verify-implementation:complete");
    assert_eq!(p.count, 3);
    assert_eq!(p.task_count, 2);
    assert_eq!(p.tasks, ["t-1", "t-2"], "most recently seen first");
    assert_eq!(p.target_glob, None);
    assert_eq!(p.first_seen, support::timestamp(60));
    assert_eq!(p.last_seen, support::timestamp(300));
    assert_eq!(
        p.description,
        "guard-verify-implementation denied `complete` 3 times in 2 tasks"
    );

    let rule = &report.proposed[0];
    assert_eq!(rule.status, RuleStatus::Proposed);
    assert_eq!(rule.pattern_id, p.id);
    assert_eq!(rule.rule.condition, RuleCondition::NoFilesChanged);
    assert_eq!(rule.rule.effect, RuleEffect::Deny);
    assert_eq!(rule.rule.action, "complete");
    assert!(rule
        .rule
        .reason
        .contains("Edit the files the subtask names"));
    // The pattern is cited beside the reason (`rule.pattern`), not inside it.
    assert!(!rule.rule.reason.contains(&p.description));
    assert_eq!(rule.rule.pattern, p.description);
    assert_eq!(rule.proposed_at, NOW);

    // Learning again proposes nothing new, and the pattern keeps its id.
    let again = g.learn(&LearnSettings::default(), NOW).unwrap();
    assert!(again.proposed.is_empty());
    assert_eq!(again.new_patterns, 0);
    assert_eq!(g.patterns().unwrap()[0].id, p.id);
    assert_eq!(g.rules(None).unwrap().len(), 1);
}

#[test]
fn thresholds_hold_back_proposals() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&[no_change_denial("t-1", 1), no_change_denial("t-1", 2)])
        .unwrap();
    assert!(g
        .learn(&LearnSettings::default(), NOW)
        .unwrap()
        .proposed
        .is_empty());
    g.record(&[no_change_denial("t-1", 3)]).unwrap();
    let two_tasks = LearnSettings {
        propose_threshold: 3,
        min_tasks: 2,
    };
    assert!(g.learn(&two_tasks, NOW).unwrap().proposed.is_empty());
    g.record(&[no_change_denial("t-2", 1)]).unwrap();
    assert_eq!(g.learn(&two_tasks, NOW).unwrap().proposed.len(), 1);
}

#[test]
fn a_rejected_rule_is_proposed_again_only_when_its_count_doubles() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(
        &(1..=3)
            .map(|s| no_change_denial("t-1", s))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let id = g.learn(&LearnSettings::default(), NOW).unwrap().proposed[0].id;
    let rejected = g
        .reject_rule(id, "alice", "too strict for docs tasks", NOW)
        .unwrap();
    assert_eq!(rejected.status, RuleStatus::Rejected);
    assert_eq!(rejected.decided_by.as_deref(), Some("alice"));
    assert_eq!(rejected.note.as_deref(), Some("too strict for docs tasks"));
    assert!(matches!(
        g.reject_rule(id, "alice", "again", NOW),
        Err(GraphError::RuleAlreadyDecided { .. })
    ));

    // 5 < 2 * 3: not yet.
    g.record(&[no_change_denial("t-2", 1), no_change_denial("t-2", 2)])
        .unwrap();
    assert!(g
        .learn(&LearnSettings::default(), NOW)
        .unwrap()
        .proposed
        .is_empty());
    // 6 = 2 * 3: proposed again, as a new rule.
    g.record(&[no_change_denial("t-2", 3)]).unwrap();
    let report = g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!(report.proposed.len(), 1);
    assert_ne!(report.proposed[0].id, id);
    assert!(report.proposed[0]
        .rule
        .pattern
        .contains("6 times in 2 tasks"));
    assert!(g
        .learn(&LearnSettings::default(), NOW)
        .unwrap()
        .proposed
        .is_empty());
    assert_eq!(g.rules(Some(RuleStatus::Proposed)).unwrap().len(), 1);
    assert_eq!(g.rules(Some(RuleStatus::Rejected)).unwrap().len(), 1);
}

#[test]
fn an_approved_rule_is_read_by_the_guard_in_the_agreed_json_shape() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&[
        no_change_denial("t-1", 1),
        no_change_denial("t-1", 2),
        no_change_denial("t-2", 1),
    ])
    .unwrap();
    let id = g.learn(&LearnSettings::default(), NOW).unwrap().proposed[0].id;
    assert!(g.approved_rules().unwrap().is_empty());
    let approved = g.approve_rule(id, "alice", NOW).unwrap();
    assert_eq!(approved.status, RuleStatus::Approved);
    assert_eq!(approved.decided_at.as_deref(), Some(NOW));

    let rules = g.approved_rules().unwrap();
    assert_eq!(rules.len(), 1);
    let json = serde_json::to_value(&rules[0]).unwrap();
    let desc = "guard-verify-implementation denied `complete` 3 times in 2 tasks";
    assert_eq!(
        json,
        serde_json::json!({
            "id": id,
            "action": "complete",
            "target_glob": null,
            "condition": "no_files_changed",
            "effect": "deny",
            "reason": "Do not call `complete` before changing a file. Instead: Edit the files \
                       the subtask names, then call complete.",
            "pattern": desc,
        })
    );
    // Field order as agreed, and it reads back.
    let text = serde_json::to_string(&rules[0]).unwrap();
    assert!(text.starts_with(&format!(
        "{{\"id\":{id},\"action\":\"complete\",\"target_glob\":null,\"condition\":\"no_files_changed\",\"effect\":\"deny\",\"reason\":"
    )));
    let back: agentforge_graph::LearnedRule = serde_json::from_str(&text).unwrap();
    assert_eq!(back, rules[0]);

    // The approval is a trace of its own: kind approval, enforcer the person...
    let latest = &g.traces(None, 1).unwrap()[0];
    assert_eq!(latest.event.kind, TraceKind::Approval);
    assert_eq!(latest.event.enforcer, "alice");
    assert_eq!(latest.event.action, "complete");
    assert_eq!(g.trace_count().unwrap(), 4);
    // ... which forms no pattern and is never a precedent.
    let report = g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!((report.traces, report.patterns), (3, 1));
    let found = g
        .precedents(&query("alice approved complete", &[]))
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].trace.event.enforcer, "guard-verify-implementation");
    // Precedents of the pattern carry the approved rule.
    assert_eq!(found[0].rule.as_ref(), Some(&rules[0]));

    assert!(matches!(
        g.approve_rule(id, "bob", NOW),
        Err(GraphError::RuleAlreadyDecided { .. })
    ));
    assert!(matches!(
        g.approve_rule(999, "bob", NOW),
        Err(GraphError::RuleNotFound { id: 999 })
    ));
}

#[test]
fn proposals_take_their_condition_from_the_pattern() {
    let mut g = Graph::open_in_memory().unwrap();
    let mut traces = Vec::new();
    for (i, file) in ["config/a.toml", "config/b.toml", "config/sub/c.toml"]
        .iter()
        .enumerate()
    {
        traces.push(trace(
            &format!("p-{i}"),
            "code",
            "implement",
            1,
            TraceSource::GuardDenial,
            "guard-protected-paths",
            "edit_file",
            Some(file),
            "Agent tried to edit a protected file",
            "Change the code that reads the configuration instead",
            "protected",
        ));
        traces.push(trace(
            &format!("l-{i}"),
            "code",
            "implement",
            1,
            TraceSource::LoopDetection,
            "loop-detector",
            "run_check",
            Some("cargo test"),
            "Agent ran cargo test 5 times without a change",
            "Read the failure, then change the code",
            "identical actions",
        ));
        traces.push(trace(
            &format!("r-{i}"),
            "code",
            "verify",
            1,
            TraceSource::RefusedComplete,
            "executor",
            "complete",
            None,
            "complete refused: verification not ready",
            "Make the checks pass, then call complete",
            "cargo test failing",
        ));
        traces.push(trace(
            &format!("a-{i}"),
            "code",
            "implement",
            1,
            TraceSource::AutoRevert,
            "auto-revert",
            "edit_file",
            Some("src/lib.rs"),
            "The edit broke cargo test; reverted",
            "Run cargo test after each edit",
            "check went from passing to failing",
        ));
    }
    g.record(&traces).unwrap();
    let report = g.learn(&LearnSettings::default(), NOW).unwrap();
    assert_eq!(report.proposed.len(), 4);
    let by_action = |action: &str, effect: RuleEffect| {
        report
            .proposed
            .iter()
            .find(|r| r.rule.action == action && r.rule.effect == effect)
            .unwrap()
            .rule
            .clone()
    };
    let protected = by_action("edit_file", RuleEffect::Deny);
    assert_eq!(protected.condition, RuleCondition::Always);
    assert_eq!(protected.target_glob.as_deref(), Some("config/**"));
    assert!(protected.pattern.contains("on `config/**`"));
    let looped = by_action("run_check", RuleEffect::Deny);
    assert_eq!(looped.condition, RuleCondition::LoopWarningActive);
    assert_eq!(looped.target_glob, None);
    let refused = by_action("complete", RuleEffect::Deny);
    assert_eq!(refused.condition, RuleCondition::ChecksNotReady);
    let reverted = by_action("edit_file", RuleEffect::Warn);
    assert_eq!(reverted.condition, RuleCondition::Always);
    assert_eq!(reverted.target_glob.as_deref(), Some("src/lib.rs"));
}

#[test]
fn learning_a_generated_set_groups_every_trace_once() {
    let mut g = Graph::open_in_memory().unwrap();
    let traces = generated(3_000, 9);
    g.record(&traces).unwrap();
    let report = g.learn(&LearnSettings::default(), NOW).unwrap();
    let patterns = g.patterns().unwrap();
    assert_eq!(report.traces, 3_000);
    assert_eq!(patterns.iter().map(|p| p.count).sum::<u64>(), 3_000);
    assert!(patterns.windows(2).all(|w| w[0].count >= w[1].count));
    let mut expected = std::collections::HashMap::new();
    for t in &traces {
        *expected
            .entry(format!(
                "{}:{}:{}",
                t.event.source.as_str(),
                t.event.enforcer,
                t.event.action
            ))
            .or_insert(0u64) += 1;
    }
    assert_eq!(patterns.len(), expected.len());
    for p in &patterns {
        assert_eq!(p.count, expected[&p.key], "{}", p.key);
        assert!(p.tasks.len() <= 20 && p.tasks.len() as u64 <= p.task_count);
    }
    // Every pattern over the threshold got exactly one proposal.
    assert_eq!(
        report.proposed.len(),
        patterns.iter().filter(|p| p.count >= 3).count()
    );
}
