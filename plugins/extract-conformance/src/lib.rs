//! Conformance check output (seed 000 §4.2, `_build_conformance_rules`): the check
//! passed, functions over the complexity or length threshold, the violation count.
//!
//! The statements and confidences (1.0, deterministic) are the seed's:
//!
//! | seed rule | matches | fact |
//! | --- | --- | --- |
//! | `check_passed` | `Check PASSED`, `All checks passed`, `✓` | verification: `Conformance check passed` |
//! | `complexity_violation` | `Function 'f' has complexity N` | verification: `Function 'f' has cyclomatic complexity N (threshold exceeded)` |
//! | `length_violation` | `Function 'f' has N lines` | verification: `Function 'f' has N lines (threshold exceeded)` |
//! | `violation_count` | `Violations (N)` | verification: `Total violations: N` |
//!
//! Refinements over the seed (which kept only the first match of each rule):
//! - every violation line gives a fact (up to [`MAX_PER_RULE`] per rule, duplicates
//!   dropped), with ` at file:line` when the line names a location
//!   (`src/app.py:145: ... Function 'execute' has complexity 15 (max 10)`);
//! - a line's `(max M)` goes into the statement (`(threshold 10 exceeded)`), and a line
//!   at or under its own maximum is not a violation;
//! - `Conformance check passed` is not said when the output reports a violation or a
//!   failure (`✓` marks the passed contracts of a failing report too).

use std::collections::HashSet;
use std::sync::OnceLock;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;

/// Most facts of one violation rule per output.
const MAX_PER_RULE: usize = 5;

struct Patterns {
    passed: Regex,
    failed: Regex,
    complexity: Regex,
    length: Regex,
    count: Regex,
    location: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let re = |p: &str| Regex::new(p).expect("valid regex");
        Patterns {
            passed: re("Check PASSED|All checks passed|\u{2713}"),
            // Any sign of a failure: `✓` also marks the passed contracts (or tests) of a
            // failing report.
            failed: re(r"(?i)\bfail(?:ed|ure|ures|s)?\b|\bviolations?\s*\(\s*[1-9]|[\u{2715}\u{2717}\u{2718}]"),
            complexity: re(
                r"(?m)^(?P<pre>.*?)Function '(?P<func>[^']+)' has complexity (?P<n>\d+)(?:\s*\(max (?P<max>\d+)\))?",
            ),
            length: re(
                r"(?m)^(?P<pre>.*?)Function '(?P<func>[^']+)' has (?P<n>\d+) lines(?:\s*\(max (?P<max>\d+)\))?",
            ),
            count: re(r"Violations?\s*\(\s*(\d+)\s*\)"),
            location: re(r"(?P<file>[^\s:\[\]()]+\.[A-Za-z0-9]+):(?P<line>\d+)"),
        }
    })
}

/// One violation fact per matching line: `Function 'f' has <what> (threshold ...)`.
fn violations(
    re: &Regex,
    output: &str,
    what: impl Fn(&str) -> String,
    seen: &mut HashSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for c in re.captures_iter(output) {
        if out.len() == MAX_PER_RULE {
            break;
        }
        let n: u64 = c["n"].parse().unwrap_or(0);
        let max = c.name("max").and_then(|m| m.as_str().parse::<u64>().ok());
        if max.is_some_and(|max| n <= max) {
            // The tool reports a measure within its limit: not a violation.
            continue;
        }
        let threshold = match max {
            Some(max) => format!("threshold {max} exceeded"),
            None => "threshold exceeded".to_string(),
        };
        let mut statement = format!(
            "Function '{}' has {} ({threshold})",
            &c["func"],
            what(&c["n"])
        );
        if let Some(loc) = patterns().location.captures(&c["pre"]) {
            statement.push_str(&format!(" at {}:{}", &loc["file"], &loc["line"]));
        }
        if seen.insert(statement.clone()) {
            out.push(statement);
        }
    }
    out
}

/// The conformance extractor.
pub struct Conformance;

impl Extractor for Conformance {
    fn handles() -> Vec<String> {
        // The seed's action names, and the usual check name.
        ["run_check", "run_conformance_check", "conformance"]
            .map(String::from)
            .to_vec()
    }

    fn extract(input: Input) -> Vec<Fact> {
        let p = patterns();
        let out = &input.output;
        let mut seen = HashSet::new();
        let complexity = violations(
            &p.complexity,
            out,
            |n| format!("cyclomatic complexity {n}"),
            &mut seen,
        );
        let length = violations(&p.length, out, |n| format!("{n} lines"), &mut seen);
        let mut facts = Vec::new();
        let verification = |s: String| fact(Category::Verification, s, &input.tool);
        if p.passed.is_match(out)
            && !p.failed.is_match(out)
            && complexity.is_empty()
            && length.is_empty()
        {
            facts.push(verification("Conformance check passed".to_string()));
        }
        facts.extend(complexity.into_iter().map(&verification));
        facts.extend(length.into_iter().map(&verification));
        if let Some(c) = p.count.captures(out) {
            facts.push(verification(format!("Total violations: {}", &c[1])));
        }
        facts
    }
}

export_extractor!(Conformance);
