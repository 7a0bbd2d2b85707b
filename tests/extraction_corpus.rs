//! The built-in extractors scored on the extraction corpus (`tests/data/extraction/`):
//! real outputs of real tool runs, each with its truth taken from the tool's
//! machine-readable mode by `tests/data/extraction/regen.py`.
//!
//! The extractors run as in a run: the embedded built-ins loaded by the plugin host, every
//! extractor asked about every output (`Extractors::extract`, generic fact included) from
//! inside a Tokio runtime, and the facts kept as the task state keeps them
//! (`merge_facts`, at most `MAX_FACTS`). Per output it scores:
//!
//! - specific fact: at least one fact other than the generic "result; last line" one;
//! - exact counts: one fact carries every total of the truth (`3 passed`, `1 error`...)
//!   and no other count of those kinds that disagrees;
//! - failing ids: every failing test id or diagnostic code of the truth appears, or, past
//!   the cap, at least `CAP` of them and a fact saying how many more;
//! - locations: the first `CAP` file:line locations of the truth (errors before warnings)
//!   appear (for test runs, any `CAP` of them: parallel runners finish in no fixed order),
//!   and past the cap a fact says how many more;
//! - clean: a run with no failure, error or warning gets no error fact (a skip reason or a
//!   passing test's log is not an error).
//!
//! It prints a table per tool and asserts the targets.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use agentforge::extract::{is_generic, merge_facts, Extractors};
use agentforge::plugins::{load_builtin, LoadOptions};
use agentforge::state_store::{ActionResult, Fact, FactCategory};
use regex::Regex;
use serde::Deserialize;
use support::built_plugins::root;

/// How many failing tests or diagnostics the extractors name one by one before saying how
/// many more there are.
const CAP: usize = 10;

/// One `<case>.truth.json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Truth {
    tool: String,
    #[allow(dead_code)]
    command: String,
    /// Non-zero totals, keyed by the singular kind (`passed`, `error`, `warning`...).
    totals: BTreeMap<String, u64>,
    failing: Vec<String>,
    locations: Vec<String>,
}

/// The four scores (and the clean-run check) of one output.
#[derive(Debug, Default, Clone, Copy)]
struct Score {
    specific: bool,
    counts: bool,
    failing: bool,
    locations: bool,
    /// `None` when the run was not clean.
    clean: Option<bool>,
}

/// The kinds of counts a totals fact may carry, as the canonical singular of the truth.
fn kind(word: &str) -> Option<&'static str> {
    Some(match word {
        "passed" | "pass" => "passed",
        "failed" | "fail" => "failed",
        "skipped" => "skipped",
        "ignored" => "ignored",
        "todo" => "todo",
        "cancelled" => "cancelled",
        "error" | "errors" => "error",
        "warning" | "warnings" => "warning",
        "info" | "infos" => "info",
        "style" => "style",
        _ => return None,
    })
}

fn counts_match(facts: &[Fact], totals: &BTreeMap<String, u64>) -> bool {
    let re = Regex::new(r"(\d+) ([a-z]+)").unwrap();
    facts
        .iter()
        .filter(|f| f.category == FactCategory::Verification && !is_generic(f))
        .any(|f| {
            let mut said: BTreeMap<&str, u64> = BTreeMap::new();
            for c in re.captures_iter(&f.statement) {
                if let (Some(k), Ok(n)) = (kind(&c[2]), c[1].parse::<u64>()) {
                    said.entry(k).or_insert(n);
                }
            }
            let carries_all = totals.iter().all(|(k, v)| said.get(k.as_str()) == Some(v));
            let none_wrong = said
                .iter()
                .all(|(k, v)| *v == 0 || totals.get(*k) == Some(v));
            !totals.is_empty() && carries_all && none_wrong
        })
}

/// Whether `needle` occurs in `hay` not followed by a digit (`a.py:3` is not in `a.py:30`).
fn mentions(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(i, _)| {
        !hay[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// The `N more` counts the facts state.
fn more_counts(facts: &[Fact]) -> Vec<usize> {
    let re = Regex::new(r"(\d+) more").unwrap();
    facts
        .iter()
        .flat_map(|f| {
            re.captures_iter(&f.statement)
                .filter_map(|c| c[1].parse().ok())
                .collect::<Vec<usize>>()
        })
        .collect()
}

fn score(truth: &Truth, facts: &[Fact]) -> Score {
    let text: Vec<&str> = facts.iter().map(|f| f.statement.as_str()).collect();
    let said = |needle: &str| text.iter().any(|s| mentions(s, needle));
    let more = more_counts(facts);
    let specific = facts.iter().any(|f| !is_generic(f));
    let counts = truth.totals.is_empty() || counts_match(facts, &truth.totals);

    let named = truth.failing.iter().filter(|id| said(id)).count();
    let n = truth.failing.len();
    let failing = named == n || (named >= CAP && more.contains(&(n - CAP)));

    // Diagnostics: the first `CAP` of the truth, which lists errors first (what a cap must
    // keep). Tests: any `CAP` of them (parallel runners finish in no fixed order).
    let tests = ["passed", "failed", "skipped", "ignored", "todo"]
        .iter()
        .any(|k| truth.totals.contains_key(*k));
    let located = if tests {
        let distinct: std::collections::BTreeSet<&String> = truth.locations.iter().collect();
        distinct.iter().filter(|l| said(l)).count() >= distinct.len().min(CAP)
    } else {
        truth.locations.iter().take(CAP).all(|l| said(l))
    };
    let past = truth.locations.len().saturating_sub(CAP);
    let locations =
        located && (past == 0 || more.contains(&past) || (n > CAP && more.contains(&(n - CAP))));

    let bad = ["failed", "error", "warning", "info", "style"];
    let clean = (truth.failing.is_empty()
        && truth.locations.is_empty()
        && !truth.totals.keys().any(|k| bad.contains(&k.as_str())))
    .then(|| facts.iter().all(|f| f.category != FactCategory::Error));
    Score {
        specific,
        counts,
        failing,
        locations,
        clean,
    }
}

/// Every case of the corpus: (tool folder, case name, output, truth).
fn corpus() -> Vec<(String, String, String, Truth)> {
    let dir = root().join("tests/data/extraction");
    let mut out = Vec::new();
    let mut tools: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    tools.sort();
    for tool in tools {
        let mut cases: Vec<_> = std::fs::read_dir(&tool)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
            .collect();
        cases.sort();
        for truth_path in cases {
            let name = truth_path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".truth.json")
                .to_string();
            let output = std::fs::read_to_string(tool.join(format!("{name}.txt")))
                .unwrap_or_else(|e| panic!("{}: {e}", tool.join(&name).display()));
            let truth: Truth = serde_json::from_str(&std::fs::read_to_string(&truth_path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", truth_path.display()));
            let folder = tool.file_name().unwrap().to_string_lossy().to_string();
            assert_eq!(truth.tool, folder, "{}", truth_path.display());
            out.push((folder, name, output, truth));
        }
    }
    out
}

/// The built-in extractors, loaded as a run loads them.
fn builtin_extractors(cache: &Path) -> Extractors {
    let (loaded, errors) = load_builtin(
        agentforge_builtins::BUILTIN_PLUGINS,
        cache,
        &LoadOptions::default(),
    );
    assert!(errors.is_empty(), "{errors:?}");
    let mut x = Extractors::default();
    for p in &loaded {
        if let Some(e) = p.as_extractor() {
            x.push(e);
        }
    }
    x
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        100.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

#[test]
fn built_in_extractors_meet_the_corpus_targets() {
    let cases = corpus();
    let cache = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let scored: Vec<(String, String, Score, Vec<Fact>)> = rt.block_on(async {
        let x = builtin_extractors(cache.path());
        cases
            .iter()
            .map(|(tool, name, output, truth)| {
                // The check names users give these runs (`tests`, `lint`...) are their
                // own; the extractors read every output whatever its name.
                let new = x.extract("check", output, ActionResult::Failure, 1);
                let mut state = Vec::new();
                merge_facts(&mut state, new);
                (tool.clone(), name.clone(), score(truth, &state), state)
            })
            .collect()
    });

    let mut by_tool: BTreeMap<&str, Vec<&Score>> = BTreeMap::new();
    for (tool, _, s, _) in &scored {
        by_tool.entry(tool).or_default().push(s);
    }
    let row = |label: &str, scores: &[&Score]| {
        let n = scores.len();
        let c = |f: fn(&Score) -> bool| scores.iter().filter(|s| f(s)).count();
        let clean: Vec<bool> = scores.iter().filter_map(|s| s.clean).collect();
        eprintln!(
            "{label:<12} {n:>3} {:>8.0}% {:>7.0}% {:>8.0}% {:>9.0}% {:>6}",
            pct(c(|s| s.specific), n),
            pct(c(|s| s.counts), n),
            pct(c(|s| s.failing), n),
            pct(c(|s| s.locations), n),
            format!("{}/{}", clean.iter().filter(|b| **b).count(), clean.len()),
        );
    };
    eprintln!(
        "{:<12} {:>3} {:>9} {:>8} {:>9} {:>10} {:>6}",
        "tool", "n", "specific", "counts", "failing", "locations", "clean"
    );
    for (tool, scores) in &by_tool {
        row(tool, scores);
    }
    let all: Vec<&Score> = scored.iter().map(|(_, _, s, _)| s).collect();
    row("all", &all);
    // `AF_CORPUS_SHOW=1` prints every output's facts, not only those of the misses.
    let show_all = std::env::var_os("AF_CORPUS_SHOW").is_some();
    for (tool, name, s, facts) in &scored {
        let missed =
            !(s.specific && s.counts && s.failing && s.locations && s.clean != Some(false));
        if missed || show_all {
            eprintln!("\n{tool}/{name}: {s:?}");
            for f in facts {
                eprintln!("  [{:?}] {}", f.category, f.statement);
            }
        }
    }

    let n = all.len();
    assert!(n >= 60, "only {n} outputs in the corpus");
    let tools: Vec<&str> = by_tool.keys().copied().collect();
    for t in [
        "pytest",
        "unittest",
        "cargo-test",
        "cargo-build",
        "clippy",
        "rustc",
        "nextest",
        "ruff",
        "flake8",
        "mypy",
        "go-test",
        "go-build",
        "go-vet",
        "jest",
        "vitest",
        "eslint",
        "tsc",
        "node-test",
        "shellcheck",
    ] {
        assert!(tools.contains(&t), "no {t} outputs in the corpus");
    }
    let rate = |f: fn(&Score) -> bool| pct(all.iter().filter(|s| f(s)).count(), n);
    let (specific, counts, failing, locations) = (
        rate(|s| s.specific),
        rate(|s| s.counts),
        rate(|s| s.failing),
        rate(|s| s.locations),
    );
    assert!(
        specific >= 95.0,
        "specific fact for {specific:.1}% of outputs"
    );
    assert!(counts >= 95.0, "exact counts for {counts:.1}% of outputs");
    assert!(failing >= 90.0, "failing ids for {failing:.1}% of outputs");
    assert!(
        locations >= 90.0,
        "locations for {locations:.1}% of outputs"
    );
    let unclean: Vec<String> = scored
        .iter()
        .filter(|(_, _, s, _)| s.clean == Some(false))
        .map(|(t, c, _, _)| format!("{t}/{c}"))
        .collect();
    assert!(
        unclean.is_empty(),
        "clean runs with an error fact: {unclean:?}"
    );
}

#[test]
fn the_scorer_tells_right_from_wrong() {
    let truth = Truth {
        tool: "t".into(),
        command: "t".into(),
        totals: BTreeMap::from([("passed".into(), 3), ("failed".into(), 12)]),
        failing: (0..12).map(|i| format!("case_{i:02}")).collect(),
        locations: vec!["a.py:3".into()],
    };
    let fact = |category, s: &str| Fact {
        id: String::new(),
        category,
        statement: s.to_string(),
        confidence: 1.0,
        source: "t".into(),
        step: 1,
        supersedes: None,
    };
    let mut facts = vec![fact(FactCategory::Verification, "t: 12 failed, 3 passed")];
    facts.extend((0..10).map(|i| {
        let at = if i == 0 {
            "a.py:3".to_string()
        } else {
            format!("b.py:{i}")
        };
        fact(
            FactCategory::Error,
            &format!("test case_{i:02} fails at {at}"),
        )
    }));
    facts.push(fact(FactCategory::Error, "and 2 more failing tests"));
    let s = score(&truth, &facts);
    assert!(s.specific && s.counts && s.failing && s.locations, "{s:?}");
    assert_eq!(s.clean, None);
    // A wrong count, a missing "more", a location one digit longer: each is caught.
    facts[0] = fact(
        FactCategory::Verification,
        "t: 12 failed, 3 passed, 1 skipped",
    );
    facts.pop();
    facts[1].statement = "test case_00 fails at a.py:30".into();
    let s = score(&truth, &facts);
    assert!(!s.counts && !s.failing && !s.locations, "{s:?}");
}
