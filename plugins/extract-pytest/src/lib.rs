//! pytest and unittest: the run's totals in the tool's own terms, and every failing test
//! (pytest's FAILED/ERROR node ids, unittest's FAIL/ERROR ids) with where it was raised and
//! its error (long and `--tb=short` tracebacks alike), up to the SDK's cap, then how many
//! more.

use std::sync::OnceLock;

#[path = "../../extract-cargo/src/report.rs"]
mod report;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;
use report::{count, findings, Finding, Severity};

struct Patterns {
    /// `==== 2 failed, 4 passed, 1 error in 0.02s ====` (or bare with `-q`).
    summary: Regex,
    /// `no tests ran in 0.01s`.
    no_tests: Regex,
    /// One `N word` of the summary.
    count: Regex,
    /// A section header: `____ test_add ____` or `==== FAILURES ====`.
    header: Regex,
    /// Long traceback's last line: `src/calc/ops.py:10: ZeroDivisionError`.
    raised_at: Regex,
    /// A `--tb=short` frame: `tests/test_ops.py:5: in test_add`.
    frame: Regex,
    /// `E   File "/abs/tests/test_x.py", line 1` (a SyntaxError while collecting).
    file_line: Regex,
    /// An `E` line naming an exception: `ZeroDivisionError: division by zero`.
    typed: Regex,
    /// The short summary's `FAILED tests/x.py::test_a - ...` / `ERROR tests/x.py`.
    short: Regex,
    /// unittest: `Ran 5 tests in 0.004s`, then `OK` / `FAILED (failures=2, errors=1)`.
    ran: Regex,
    /// unittest: `FAIL: test_add (test_calc.TestCalc.test_add)`.
    unittest_header: Regex,
    /// A traceback frame: `File "/abs/test_calc.py", line 6, in test_add`.
    py_frame: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        summary: re(r"(?m)^=*\s*((?:\d+ [a-z]+, )*\d+ [a-z]+) in [\d.]+s\b"),
        no_tests: re(r"(?m)^=*\s*no tests ran in [\d.]+s\b"),
        count: re(r"(\d+) ([a-z]+)"),
        header: re(r"^(?:_{3,} (.*) _{3,}|={3,} .* ={3,})$"),
        raised_at: re(r"^([^\s:]+\.py):(\d+): ([A-Za-z_][\w.]*)$"),
        frame: re(r"^([^\s:]+\.py):(\d+): in \S+$"),
        file_line: re(r#"^E\s+File "([^"]+)", line (\d+)"#),
        typed: re(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failed|Exited)\b"),
        short: re(r"(?m)^(FAILED|ERROR) (\S+?)(?: - .*)?$"),
        ran: re(r"(?m)^Ran (\d+) tests? in [\d.]+s\n\n(OK|FAILED)(?: \((.+)\))?$"),
        unittest_header: re(r"^(FAIL|ERROR): (\S+) \(([^)]+)\)"),
        py_frame: re(r#"^\s*File "([^"]+)", line (\d+)"#),
    })
}

fn re(p: &str) -> Regex {
    Regex::new(p).unwrap()
}

struct Pytest;

impl Extractor for Pytest {
    fn handles() -> Vec<String> {
        // Check names are the project's own (`tests`...): read every output.
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        let p = patterns();
        let mut facts = unittest(p, &input);
        if !facts.is_empty() {
            return facts;
        }
        let text = &input.output;
        if let Some(m) = p.summary.captures_iter(text).last() {
            let counts: Vec<String> = p
                .count
                .captures_iter(&m[1])
                .filter(|c| !c[2].starts_with("warning"))
                .map(|c| format!("{} {}", &c[1], &c[2]))
                .collect();
            if !counts.is_empty() {
                let s = format!("pytest: {}", counts.join(", "));
                facts.push(fact(Category::Verification, s, &input.tool));
            }
        } else if p.no_tests.is_match(text) {
            facts.push(fact(
                Category::Verification,
                "pytest: no tests ran",
                &input.tool,
            ));
        }
        if facts.is_empty() {
            // Not a pytest run: its node ids and tracebacks are not to be looked for.
            return facts;
        }
        facts.extend(findings(&input.tool, failures(p, &input), "failing tests"));
        facts
    }
}

/// The failing tests of the short summary (`FAILED id`, `ERROR id`), each with where it
/// was raised and its error from its traceback section.
fn failures(p: &Patterns, input: &Input) -> Vec<Finding> {
    let sections = sections(p, input);
    let mut ids: Vec<(bool, String)> = Vec::new();
    for c in p.short.captures_iter(&input.output) {
        let entry = (&c[1] == "ERROR", c[2].to_string());
        if !ids.contains(&entry) {
            ids.push(entry);
        }
    }
    if ids.is_empty() {
        // `-rN` (no short summary): the sections still name the tests.
        ids = sections.iter().map(|(k, _)| (false, k.clone())).collect();
    }
    ids.into_iter()
        .map(|(error, id)| {
            let key = match id.split_once("::") {
                Some((_, rest)) => rest.replace("::", "."),
                None => id.clone(),
            };
            let at = sections
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, s)| format!(" at {s}"))
                .unwrap_or_default();
            let s = match (error, id.contains("::")) {
                (false, _) => format!("test {id} fails{at}"),
                (true, true) => format!("test {id} errors{at}"),
                (true, false) => format!("{id} fails to collect{at}"),
            };
            Finding::new(Severity::Error, s)
        })
        .collect()
}

/// `(test key, "FILE:LINE: Error: message")` for each traceback section.
fn sections(p: &Patterns, input: &Input) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut key: Option<String> = None;
    let mut section: Vec<&str> = Vec::new();
    for line in input.output.lines().chain(std::iter::once("=== end ===")) {
        if let Some(h) = p.header.captures(line) {
            if let (Some(k), Some(s)) = (key.take(), section_fact(p, &section)) {
                out.push((k, s));
            }
            section.clear();
            key = h.get(1).map(|m| {
                let name = m.as_str();
                name.strip_prefix("ERROR at setup of ")
                    .or_else(|| name.strip_prefix("ERROR at teardown of "))
                    .or_else(|| name.strip_prefix("ERROR collecting "))
                    .unwrap_or(name)
                    .to_string()
            });
        } else {
            section.push(line);
        }
    }
    out
}

fn section_fact(p: &Patterns, lines: &[&str]) -> Option<String> {
    let raised = lines.iter().rev().find_map(|l| p.raised_at.captures(l));
    let e_lines: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix('E'))
        .filter(|l| l.starts_with(char::is_whitespace))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // The frame that raised: the long format names it with the error type; the short one
    // lists frames (the last of the project's own is where it was raised).
    let (file, line) = if let Some(c) = &raised {
        (c[1].to_string(), c[2].to_string())
    } else if let Some(c) = lines
        .iter()
        .rev()
        .filter_map(|l| p.frame.captures(l))
        .find(|c| own(&c[1]))
    {
        (c[1].to_string(), c[2].to_string())
    } else {
        let c = lines.iter().find_map(|l| p.file_line.captures(l))?;
        (c[1].to_string(), c[2].to_string())
    };
    let message = match e_lines.iter().find(|l| p.typed.is_match(l)) {
        Some(typed) => typed.to_string(),
        None => {
            let first = e_lines.first()?;
            match &raised {
                Some(c) => format!("{}: {first}", &c[3]),
                None if first.starts_with("assert ") => format!("AssertionError: {first}"),
                None => first.to_string(),
            }
        }
    };
    Some(format!("{file}:{line}: {message}"))
}

/// unittest's report: `Ran N tests`, then `OK` or `FAILED (failures=2, errors=1)`, and a
/// `FAIL: name (id)` / `ERROR: name (id)` section with a traceback per failing test.
fn unittest(p: &Patterns, input: &Input) -> Vec<Fact> {
    let Some(c) = p.ran.captures_iter(&input.output).last() else {
        return Vec::new();
    };
    let ran: usize = c[1].parse().unwrap_or(0);
    let n = |key: &str| -> usize {
        c.get(3)
            .map(|m| m.as_str())
            .unwrap_or("")
            .split(", ")
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(0)
    };
    let (failures, errors, skipped) = (n("failures"), n("errors"), n("skipped"));
    let (xfail, xpass) = (n("expected failures"), n("unexpected successes"));
    let passed = ran.saturating_sub(failures + errors + skipped + xfail + xpass);
    let mut s = format!("unittest: ran {ran}: {passed} passed, {failures} failed");
    for (k, word) in [
        (errors, "error"),
        (skipped, "skipped"),
        (xfail, "expected failure"),
        (xpass, "unexpected success"),
    ] {
        if k > 0 {
            s.push_str(", ");
            s.push_str(&if word == "skipped" {
                format!("{k} skipped")
            } else {
                count(k, word)
            });
        }
    }
    let mut facts = vec![fact(Category::Verification, s, &input.tool)];
    let mut found = Vec::new();
    let lines: Vec<&str> = input.output.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(h) = p.unittest_header.captures(line) else {
            continue;
        };
        let (kind, name, paren) = (&h[1], &h[2], &h[3]);
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .skip_while(|l| l.starts_with("---"))
            .take_while(|l| !l.starts_with("======") && !l.starts_with("------"))
            .copied()
            .collect();
        let at = body
            .iter()
            .rev()
            .filter_map(|l| p.py_frame.captures(l))
            .find(|c| own(&c[1]))
            .map(|c| format!(" at {}:{}", &c[1], &c[2]))
            .unwrap_or_default();
        let message = body
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with(' '))
            .map(|l| format!(": {}", l.trim()))
            .unwrap_or_default();
        let s = if let Some(module) = paren.strip_prefix("unittest.loader._FailedTest") {
            let module = module.trim_start_matches('.');
            let module = if module.is_empty() { name } else { module };
            format!("module {module} fails to load{at}{message}")
        } else {
            // Python 3.11 prints the whole id in the parentheses; older ones the class.
            let id = if paren.ends_with(&format!(".{name}")) {
                paren.to_string()
            } else {
                format!("{paren}.{name}")
            };
            let verb = if kind == "ERROR" { "errors" } else { "fails" };
            format!("test {id} {verb}{at}{message}")
        };
        found.push(Finding::new(Severity::Error, s));
    }
    facts.extend(findings(&input.tool, found, "failing tests"));
    facts
}

/// A frame of the project, not of pytest, the standard library or a frozen module.
fn own(file: &str) -> bool {
    !(file.starts_with('<') || file.contains("site-packages") || file.contains("/lib/python"))
}

export_extractor!(Pytest);
