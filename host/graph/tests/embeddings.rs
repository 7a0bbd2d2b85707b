//! The traces' vectors through the public API: what is left to embed, a model or
//! dimension change (old vectors ignored, never mixed), and the fused ranking (a trace
//! sharing no word with the question but with a near vector ranks in; without vectors it
//! does not).

mod support;

use agentforge_graph::{Graph, PrecedentQuery, QueryVector, Trace, TraceSource};
use support::trace;

fn query(limit: usize) -> PrecedentQuery {
    PrecedentQuery {
        task_id: "t-new".into(),
        task_type: "code".into(),
        phase: "implement".into(),
        role: None,
        targets: vec![],
        text: "Speed up the slow database queries".into(),
        limit,
    }
}

/// Three traces sharing words with the question (three patterns) and one, `near`, that
/// shares none; all of another task, task type and phase, so only the full-text index
/// (or a vector) finds them.
fn traces() -> Vec<Trace> {
    let lexical = |step: u64, action: &str, happened: &str| {
        trace(
            "t-old",
            "docs",
            "review",
            step,
            TraceSource::GuardDenial,
            "guard-docs",
            action,
            None,
            happened,
            "Leave it",
            "protected",
        )
    };
    vec![
        lexical(
            2,
            "write_file",
            "Agent rewrote the slow database queries page",
        ),
        lexical(3, "edit_file", "Agent edited the database chapter"),
        lexical(4, "delete_file", "Agent deleted notes about queries"),
        trace(
            "t-old",
            "docs",
            "review",
            5,
            TraceSource::AutoRevert,
            "auto-revert",
            "run_check",
            None,
            "Index scans were rewritten without measuring; reverted",
            "Profile first, then change one index",
            "benchmark regressed",
        ),
    ]
}

const NEAR: &str = "t-old#5#0";

/// Vectors: the question [1, 0, 0]; `near` close to it; the lexical ones orthogonal.
fn embed_all(g: &mut Graph, model: &str, dims: usize) {
    let todo = g.unembedded(model, dims, 0, 100).unwrap();
    assert_eq!(todo.len(), 4);
    let vectors: Vec<(i64, Vec<f32>)> = todo
        .iter()
        .map(|t| {
            let mut v = if t.text.contains("Index scans") {
                vec![0.9, 0.1, 0.0]
            } else if t.text.contains("chapter") {
                vec![0.0, 0.0, 1.0]
            } else {
                vec![0.0, 1.0, 0.0]
            };
            v.resize(dims, 0.0);
            (t.id, v)
        })
        .collect();
    assert_eq!(g.store_vectors(model, &vectors).unwrap(), 4);
}

fn question(model: &str, dims: usize) -> QueryVector {
    let mut vector = vec![1.0, 0.0, 0.0];
    vector.resize(dims, 0.0);
    QueryVector {
        model: model.into(),
        vector,
    }
}

fn keys(found: &[agentforge_graph::Precedent]) -> Vec<&str> {
    found.iter().map(|p| p.trace.key.as_str()).collect()
}

#[test]
fn a_trace_with_no_shared_word_but_a_near_vector_ranks_in() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&traces()).unwrap();

    // Full text only: the three lexical patterns, never `near`.
    let found = g.precedents(&query(5)).unwrap();
    assert_eq!(found.len(), 3, "{:?}", keys(&found));
    assert!(!keys(&found).contains(&NEAR), "{:?}", keys(&found));
    // A query vector but no stored vectors: the same.
    let found = g
        .precedents_with(&query(5), Some(&question("m", 3)))
        .unwrap();
    assert!(!keys(&found).contains(&NEAR), "{:?}", keys(&found));

    embed_all(&mut g, "m", 3);
    let found = g
        .precedents_with(&query(2), Some(&question("m", 3)))
        .unwrap();
    assert_eq!(found.len(), 2);
    assert!(keys(&found).contains(&NEAR), "{:?}", keys(&found));
    // The best lexical match keeps its place beside it.
    assert!(keys(&found).contains(&"t-old#2#0"), "{:?}", keys(&found));
    // Without the vector, the ranking is the full-text one.
    let found = g.precedents(&query(2)).unwrap();
    assert!(!keys(&found).contains(&NEAR), "{:?}", keys(&found));
}

#[test]
fn vectors_of_another_model_or_dimension_are_ignored_and_replaced_when_embedded_again() {
    let mut g = Graph::open_in_memory().unwrap();
    g.record(&traces()).unwrap();
    embed_all(&mut g, "old-model", 3);
    assert_eq!(g.vector_count("old-model", 3).unwrap(), 4);

    // Asked with another model (or dimension), the old vectors are never compared.
    for q in [question("new-model", 3), question("old-model", 4)] {
        let found = g.precedents_with(&query(5), Some(&q)).unwrap();
        assert!(!keys(&found).contains(&NEAR), "{:?}", keys(&found));
        // ... and every trace is one to embed again.
        assert_eq!(
            g.unembedded(&q.model, q.vector.len(), 0, 100)
                .unwrap()
                .len(),
            4
        );
    }
    assert!(g.unembedded("old-model", 3, 0, 100).unwrap().is_empty());

    // Embedded again with the new model: the old vectors are replaced, not mixed.
    embed_all(&mut g, "new-model", 3);
    assert_eq!(g.vector_count("old-model", 3).unwrap(), 0);
    assert_eq!(g.vector_count("new-model", 3).unwrap(), 4);
    let found = g
        .precedents_with(&query(2), Some(&question("new-model", 3)))
        .unwrap();
    assert!(keys(&found).contains(&NEAR), "{:?}", keys(&found));
}

#[test]
fn a_backfill_walks_the_traces_in_batches_and_approvals_are_never_embedded() {
    let mut g = Graph::open_in_memory().unwrap();
    let mut all = traces();
    let mut approval = all[0].clone();
    approval.key = "approval#1#0".into();
    approval.event.kind = agentforge_graph::TraceKind::Approval;
    all.push(approval);
    g.record(&all).unwrap();
    let mut after = 0;
    let mut batches = 0;
    loop {
        let batch = g.unembedded("m", 3, after, 3).unwrap();
        if batch.is_empty() {
            break;
        }
        batches += 1;
        after = batch.last().unwrap().id;
        let v: Vec<(i64, Vec<f32>)> = batch.iter().map(|t| (t.id, vec![1.0, 0.0, 0.0])).collect();
        g.store_vectors("m", &v).unwrap();
    }
    assert_eq!(batches, 2);
    assert_eq!(g.vector_count("m", 3).unwrap(), 4);
    // The keys of a step's traces, as a run embeds them after recording: no approval.
    let keys: Vec<String> = all.iter().map(|t| t.key.clone()).collect();
    assert_eq!(g.to_embed_by_keys(&keys).unwrap().len(), 4);
}
