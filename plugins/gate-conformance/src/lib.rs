//! Gate: a conformance check passes only when it exited 0 and reports no violation
//! (seed 000's conformance facts, seed 002 §4.6 quality gates).
//!
//! A violation is any of:
//! - a violation count over 0 (`Total violations: 3` from `extract-conformance`, or the
//!   output's own `Violations (3)`);
//! - a function over its complexity or length threshold (`Function 'f' has cyclomatic
//!   complexity 15 (threshold 10 exceeded)`, or the output's `Function 'f' has
//!   complexity 15 (max 10)`). Config `max_complexity` / `max_function_lines` set the
//!   thresholds over the tool's own `(max N)`; without either, a fact saying the
//!   threshold was exceeded is a violation.
//!
//! The facts are read first; the output only when no fact describes the run (no
//! extractor read it). The summary names the first violation (the host shows it after
//! the check's name, so it does not repeat it). The checks judged are
//! `conformance`; config `checks` replaces them.

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    config, config_list, export_gate, log, Category, CheckRun, Fact, Gate, LogLevel, Verdict,
};
use regex::Regex;
use serde_json::{Map, Value};

/// Checks judged when the configuration names none.
const DEFAULT_CHECKS: [&str; 1] = ["conformance"];

/// Longest violation put into the summary.
const MAX_DETAIL: usize = 200;

struct Patterns {
    /// `Total violations: N` (fact) or `Violations (N)` (output).
    count: Regex,
    /// A measured function: `Function 'f' has cyclomatic complexity N (threshold M
    /// exceeded)` / `... has complexity N (max M)` / `... has N lines (...)`.
    measure: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("valid regex");
        Patterns {
            count: re(r"Total violations: (\d+)|Violations?\s*\(\s*(\d+)\s*\)"),
            measure: re(
                r"(?m)Function '[^']+' has (?:(?:cyclomatic )?complexity (?P<complexity>\d+)|(?P<lines>\d+) lines)(?:\s*\((?:max (?P<max>\d+)|threshold (?P<threshold>\d+) exceeded|(?P<exceeded>threshold exceeded))\))?[^\n]*",
            ),
        }
    })
}

fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() <= MAX_DETAIL {
        s
    } else {
        format!("{}…", s.chars().take(MAX_DETAIL).collect::<String>())
    }
}

/// A non-negative integer from the configuration, when set and valid.
fn config_limit(config: &Map<String, Value>, key: &str) -> Option<u64> {
    let v = config.get(key)?;
    let n = v.as_u64();
    if n.is_none() {
        log(
            LogLevel::Warn,
            &format!("config `{key}` must be a non-negative integer, not {v}; ignored"),
        );
    }
    n
}

/// The thresholds configured over the tool's own.
struct Limits {
    complexity: Option<u64>,
    lines: Option<u64>,
}

/// Whether one measured-function text is a violation.
fn is_violation(c: &regex::Captures, limits: &Limits) -> bool {
    let (value, configured) = match (c.name("complexity"), c.name("lines")) {
        (Some(n), _) => (n, limits.complexity),
        (_, Some(n)) => (n, limits.lines),
        _ => return false,
    };
    let value: u64 = value.as_str().parse().unwrap_or(0);
    let own = c
        .name("max")
        .or(c.name("threshold"))
        .and_then(|m| m.as_str().parse::<u64>().ok());
    match (configured, own) {
        (Some(max), _) | (None, Some(max)) => value > max,
        // No threshold known: the seed's statements only name functions over it.
        (None, None) => true,
    }
}

/// The violations in `texts` (fact statements or output lines) and the largest count.
fn scan<'a>(texts: impl Iterator<Item = &'a str>, limits: &Limits) -> (Vec<String>, Option<u64>) {
    let p = patterns();
    let mut violations = Vec::new();
    let mut total: Option<u64> = None;
    for text in texts {
        for c in p.count.captures_iter(text) {
            let n = c
                .get(1)
                .or(c.get(2))
                .and_then(|m| m.as_str().parse::<u64>().ok());
            if let Some(n) = n {
                total = Some(total.map_or(n, |t| t.max(n)));
            }
        }
        for c in p.measure.captures_iter(text) {
            if is_violation(&c, limits) {
                violations.push(one_line(text));
                break;
            }
        }
    }
    (violations, total)
}

fn conformance_facts(facts: &[Fact]) -> impl Iterator<Item = &str> {
    facts
        .iter()
        .filter(|f| f.category == Category::Verification || f.category == Category::Error)
        .map(|f| f.statement.as_str())
}

/// The gate.
pub struct ConformanceGate;

impl Gate for ConformanceGate {
    fn checks() -> Vec<String> {
        config_list(&config(), "checks")
            .unwrap_or_else(|| DEFAULT_CHECKS.iter().map(|s| s.to_string()).collect())
    }

    fn evaluate(run: CheckRun) -> Verdict {
        let fail = |summary: String| Verdict {
            passing: false,
            summary,
        };
        if run.timed_out {
            return fail("timed out".to_string());
        }
        let Some(code) = run.exit_code else {
            return fail("killed before it finished".to_string());
        };
        let config = config();
        let limits = Limits {
            complexity: config_limit(&config, "max_complexity"),
            lines: config_limit(&config, "max_function_lines"),
        };
        let (mut violations, mut total) = scan(conformance_facts(&run.facts), &limits);
        let described = !violations.is_empty()
            || total.is_some()
            || run
                .facts
                .iter()
                .any(|f| f.statement == "Conformance check passed");
        if !described {
            (violations, total) = scan(run.output.lines(), &limits);
        }
        let count = total.unwrap_or(0).max(violations.len() as u64);
        if count > 0 {
            let first = match violations.first() {
                Some(v) => format!("; first: {v}"),
                None => String::new(),
            };
            let exit = if code == 0 {
                String::new()
            } else {
                format!(" (exit {code})")
            };
            let s = if count == 1 { "" } else { "s" };
            return fail(format!("{count} violation{s}{exit}{first}"));
        }
        if code != 0 {
            let last = run
                .output
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| format!(": {}", one_line(l)))
                .unwrap_or_default();
            return fail(format!("failed (exit {code}){last}"));
        }
        Verdict {
            passing: true,
            summary: "no violations (exit 0)".to_string(),
        }
    }
}

export_gate!(ConformanceGate);
