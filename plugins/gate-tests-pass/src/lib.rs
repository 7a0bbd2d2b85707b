//! Gate: a test check passes only when the tests really passed (seed 002 §4.6 quality
//! gates, seed 003 "verification gates"): exit 0 is not enough.
//!
//! Passing requires all of:
//! - the command finished (a timeout fails: `timed out`; a kill fails: `killed`);
//! - it exited 0;
//! - no test failed: no verification fact counts a failure (`3 passed, 1 failed`,
//!   `1 error`) and no error fact names one (`test x fails`, `error at f:12: ...`), even
//!   with exit 0; warnings do not count;
//! - at least one test ran: counts of 0 (`0 passed, 0 failed`) or a runner saying none
//!   ran (`running 0 tests`, `no tests ran`, `[no test files]`, `No tests found`) fail
//!   with `no tests ran` (config `allow_no_tests = true` lifts this). An output with no
//!   test count at all (a check that is not a known test runner, e.g. a `grep`) passes
//!   on exit 0, its summary saying that no count was found, unless config
//!   `require_test_counts = true`.
//!
//! The checks judged are `tests`, `test` and `run_tests`; config `checks` replaces them.
//! The summary is one line: the extracted counts, the exit status and the first failure
//! (the host shows it after the check's name, so it does not repeat it).

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    config, config_list, export_gate, Category, CheckRun, Fact, Gate, Verdict,
};
use regex::Regex;
use serde_json::Value;

/// Checks judged when the configuration names none.
const DEFAULT_CHECKS: [&str; 3] = ["tests", "test", "run_tests"];

/// Statements of the host's generic fact start with a backtick (`` `cmd` exited 1 ``).
const GENERIC_PREFIX: char = '`';

/// Longest failure detail put into the summary.
const MAX_DETAIL: usize = 160;

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

/// Test counts, from the facts or the output.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    passed: u64,
    failed: u64,
    errors: u64,
}

impl Counts {
    fn ran(&self) -> u64 {
        self.passed + self.failed + self.errors
    }

    fn failing(&self) -> bool {
        self.failed + self.errors > 0
    }
}

struct Patterns {
    passed: Regex,
    failed: Regex,
    errors: Regex,
    ran: Regex,
    none_ran: Regex,
    failed_line: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        passed: re(r"\b(\d+) passed\b"),
        failed: re(r"\b(\d+) failed\b"),
        errors: re(r"\b(\d+) errors?\b"),
        // Signs in a raw output that tests ran, for checks no extractor read: cargo's
        // `running N tests`, go's `ok  pkg  0.01s` and `--- PASS`, `PASS`.
        ran: re(r"(?m)^running [1-9]\d* tests?\b|^ok\s+\S+\s+[\d.]+s\s*$|^--- PASS|^PASS\b"),
        // And that none did (when no sign above says some did).
        none_ran: re(
            r"(?mi)^running 0 tests$|\bno tests ran\b|\[no test files\]|\[no tests to run\]|\bno tests found\b|\bcollected 0 items\b",
        ),
        // And that one failed.
        failed_line: re(r"(?m)^(FAILED|FAIL)\b|^--- FAIL|test result: FAILED|\b[1-9]\d* failed\b"),
    })
}

fn is_generic(f: &Fact) -> bool {
    f.statement.starts_with(GENERIC_PREFIX)
}

/// The largest count each pattern finds in `text`, when one matches.
fn count(re: &Regex, text: &str) -> Option<u64> {
    re.captures_iter(text)
        .filter_map(|c| c[1].parse().ok())
        .max()
}

/// Counts from the verification facts (the largest of each: a jest run has a tests and
/// a suites line), with the first statement that had any.
fn counts_from_facts(facts: &[Fact]) -> Option<(Counts, &str)> {
    let p = patterns();
    let mut found: Option<(Counts, &str)> = None;
    for f in facts
        .iter()
        .filter(|f| f.category == Category::Verification && !is_generic(f))
    {
        let s = &f.statement;
        let (passed, failed, errors) = (
            count(&p.passed, s),
            count(&p.failed, s),
            count(&p.errors, s),
        );
        if passed.is_none() && failed.is_none() && errors.is_none() {
            continue;
        }
        let (c, _) = found.get_or_insert((Counts::default(), s));
        c.passed = c.passed.max(passed.unwrap_or(0));
        c.failed = c.failed.max(failed.unwrap_or(0));
        c.errors = c.errors.max(errors.unwrap_or(0));
    }
    found
}

/// The first error fact reporting a failure (warnings and the generic fact aside).
fn first_failure(facts: &[Fact]) -> Option<&str> {
    facts
        .iter()
        .filter(|f| f.category == Category::Error && !is_generic(f))
        .map(|f| f.statement.as_str())
        .find(|s| !s.trim_start().to_ascii_lowercase().starts_with("warning"))
}

fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() <= MAX_DETAIL {
        s
    } else {
        format!("{}…", s.chars().take(MAX_DETAIL).collect::<String>())
    }
}

fn verdict(passing: bool, summary: String) -> Verdict {
    Verdict { passing, summary }
}

/// The gate.
pub struct TestsPass;

impl Gate for TestsPass {
    fn checks() -> Vec<String> {
        config_list(&config(), "checks")
            .unwrap_or_else(|| DEFAULT_CHECKS.iter().map(|s| s.to_string()).collect())
    }

    fn evaluate(run: CheckRun) -> Verdict {
        if run.timed_out {
            return verdict(false, "timed out".to_string());
        }
        let Some(code) = run.exit_code else {
            return verdict(false, "killed before it finished".to_string());
        };
        let p = patterns();
        let from_facts = counts_from_facts(&run.facts);
        let counted = from_facts.map(|(c, s)| (c, s.to_string()));
        let failure = first_failure(&run.facts).map(one_line);
        // The output speaks only when no extractor counted the tests.
        let output_failed = counted.is_none() && p.failed_line.is_match(&run.output);
        let output_ran = counted.is_none()
            && (p.ran.is_match(&run.output) || count(&p.passed, &run.output).unwrap_or(0) > 0);
        let label = |status: &str| match &counted {
            Some((_, statement)) => one_line(statement),
            None => status.to_string(),
        };
        let with_failure = |head: String| match &failure {
            Some(f) => format!("{head}; {f}"),
            None => head,
        };
        if code != 0 {
            let mut summary = with_failure(format!("{} (exit {code})", label("failed")));
            if counted.is_none() && failure.is_none() {
                // Nothing extracted: the output's last line says most.
                match run.output.lines().rev().find(|l| !l.trim().is_empty()) {
                    Some(last) => summary.push_str(&format!(": {}", one_line(last))),
                    None => summary.push_str(", no output"),
                }
            }
            return verdict(false, summary);
        }
        let failing = counted.as_ref().is_some_and(|(c, _)| c.failing());
        if failing || failure.is_some() || output_failed {
            return verdict(
                false,
                with_failure(format!("{}: a test failed despite exit 0", label("failed"))),
            );
        }
        let flag = |key: &str| config().get(key).and_then(Value::as_bool).unwrap_or(false);
        let none_ran = match &counted {
            Some((c, statement)) => (c.ran() == 0).then(|| one_line(statement)),
            None if output_ran => None,
            None => p.none_ran.find(&run.output).map(|m| one_line(m.as_str())),
        };
        if let Some(why) = none_ran {
            if !flag("allow_no_tests") {
                return verdict(false, format!("no tests ran ({why})"));
            }
        } else if counted.is_none() && !output_ran {
            if flag("require_test_counts") {
                return verdict(
                    false,
                    "no tests ran (no test count in the output)".to_string(),
                );
            }
            return verdict(true, "passed (exit 0; no test count found)".to_string());
        }
        verdict(true, format!("{} (exit 0)", label("passed")))
    }
}

export_gate!(TestsPass);
