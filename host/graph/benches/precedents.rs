//! `cargo bench -p agentforge-graph --bench precedents`: `Graph::precedents` on a database
//! of 100,000 realistic traces (tests/support: nine kinds of enforcement, thousands of
//! targets, 2,000 tasks), built once in a temporary file with one `record`.
//!
//! Before criterion's runs it prints each query's median and 95th percentile over 1,000
//! calls (the goal: a median of at most 5 ms). Criterion then measures each query repeated
//! on one open database (`precedents_100k`, as a run's steps do) and as the first query of
//! a freshly opened one (`precedents_100k_first`).

#[path = "queries.rs"]
mod queries;
#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentforge_graph::Graph;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use queries::queries;

const TRACES: usize = 100_000;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("graph.db");
    let traces = support::generated(TRACES, 2025);
    let started = Instant::now();
    let mut graph = Graph::open(&path).expect("open");
    let added = graph.record(&traces).expect("record");
    assert_eq!(added, TRACES);
    eprintln!(
        "built {TRACES} traces in {:.2?} ({:.1} MB on disk)",
        started.elapsed(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );

    for (name, q) in queries() {
        let found = graph.precedents(&q).expect("precedents");
        assert!(!found.is_empty(), "{name} found nothing");
        let mut times: Vec<Duration> = (0..1_000)
            .map(|_| {
                let t = Instant::now();
                black_box(graph.precedents(black_box(&q)).expect("precedents"));
                t.elapsed()
            })
            .collect();
        times.sort();
        eprintln!(
            "{name}: {} precedents, median {:.3?}, p95 {:.3?}, max {:.3?}; top: {} ({:.2})",
            found.len(),
            times[times.len() / 2],
            times[times.len() * 95 / 100],
            times[times.len() - 1],
            found[0].trace.event.what_happened,
            found[0].score,
        );
    }

    // The same query again and again on one open database: a run's steps (the graph
    // remembers the common words it probed).
    let mut group = c.benchmark_group("precedents_100k");
    for (name, q) in queries() {
        group.bench_function(name, |b| {
            b.iter(|| graph.precedents(black_box(&q)).expect("precedents"))
        });
    }
    group.finish();

    // The first query of a freshly opened database (opening not measured): statements
    // prepared and every word probed.
    let mut group = c.benchmark_group("precedents_100k_first");
    for (name, q) in queries() {
        group.bench_function(name, |b| {
            b.iter_batched(
                || Graph::open(&path).expect("open"),
                |g| {
                    let found = g.precedents(black_box(&q)).expect("precedents");
                    (g, found)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();

    let empty = Graph::open(&dir.path().join("empty.db")).expect("open");
    let q = &queries()[0].1;
    c.bench_function("precedents_empty_db", |b| {
        b.iter(|| empty.precedents(black_box(q)).expect("precedents"))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
