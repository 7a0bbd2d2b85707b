//! `cargo bench -p agentforge-graph --bench precedents`: `Graph::precedents` on a database
//! of 100,000 realistic traces (tests/support: nine kinds of enforcement, thousands of
//! targets, 2,000 tasks), built once in a temporary file with one `record`.
//!
//! Before criterion's runs it prints each query's median and 95th percentile over 1,000
//! calls (the goal: a median of at most 5 ms). Criterion then measures each query repeated
//! on one open database (`precedents_100k`, as a run's steps do) and as the first query of
//! a freshly opened one (`precedents_100k_first`).
//!
//! The embeddings path (`precedents_100k_embeddings`): every trace gets a stored vector of
//! 384 dimensions (a deterministic stand-in for a small sentence-embedding model: the sum
//! of one pseudo-random vector per word, so texts sharing words are near), and each query
//! is ranked with its own vector given (no HTTP). Its figures: the median of 5 runs'
//! medians (200 calls each) with the smallest and largest run median (goal: <= 5 ms).

#[path = "queries.rs"]
mod queries;
#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentforge_graph::{Graph, QueryVector};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use queries::queries;

const TRACES: usize = 100_000;
/// The stored vectors' dimension (a small sentence-embedding model's).
const DIMS: usize = 384;
const MODEL: &str = "bench-384";

/// A deterministic stand-in for an embedding: the sum of one pseudo-random vector per
/// word (lowercased runs of letters and digits).
fn pseudo_embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0.0_f32; DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // FNV-1a of the word seeds a xorshift.
        let mut x = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            })
            | 1;
        for slot in v.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *slot += (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        }
    }
    v
}

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

    // The embeddings path: every trace embedded, each query with its vector.
    let started = Instant::now();
    let mut after = 0;
    loop {
        let batch = graph
            .unembedded(MODEL, DIMS, after, 10_000)
            .expect("unembedded");
        let Some(last) = batch.last() else { break };
        after = last.id;
        let vectors: Vec<(i64, Vec<f32>)> = batch
            .iter()
            .map(|t| (t.id, pseudo_embedding(&t.text)))
            .collect();
        graph.store_vectors(MODEL, &vectors).expect("store");
    }
    let stored = graph.vector_count(MODEL, DIMS).expect("count");
    eprintln!(
        "embedded {stored} traces ({DIMS} dimensions) in {:.2?} ({:.1} MB on disk)",
        started.elapsed(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );
    let with_vectors: Vec<(&str, _, QueryVector)> = queries()
        .into_iter()
        .map(|(name, q)| {
            let vector = QueryVector {
                model: MODEL.into(),
                vector: pseudo_embedding(&q.embedding_text()),
            };
            (name, q, vector)
        })
        .collect();
    for (name, q, v) in &with_vectors {
        let found = graph.precedents_with(q, Some(v)).expect("precedents");
        assert!(!found.is_empty(), "{name} found nothing");
        let mut medians: Vec<Duration> = (0..5)
            .map(|_| {
                let mut times: Vec<Duration> = (0..200)
                    .map(|_| {
                        let t = Instant::now();
                        black_box(graph.precedents_with(black_box(q), Some(v)).expect("p"));
                        t.elapsed()
                    })
                    .collect();
                times.sort();
                times[times.len() / 2]
            })
            .collect();
        medians.sort();
        eprintln!(
            "{name} (embeddings, {DIMS} dims): {} precedents, median {:.3?} (5 runs' medians: \
             min {:.3?}, max {:.3?}); top: {} ({:.2})",
            found.len(),
            medians[2],
            medians[0],
            medians[4],
            found[0].trace.event.what_happened,
            found[0].score,
        );
    }
    let mut group = c.benchmark_group("precedents_100k_embeddings");
    for (name, q, v) in &with_vectors {
        group.bench_function(*name, |b| {
            b.iter(|| {
                graph
                    .precedents_with(black_box(q), Some(v))
                    .expect("precedents")
            })
        });
    }
    group.finish();

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
