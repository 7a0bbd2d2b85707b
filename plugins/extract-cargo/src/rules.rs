//! The cargo extractor's rules, in plain Rust: libtest results (text and `--format
//! json`), cargo nextest runs, test panics with their location, and rustc/clippy
//! diagnostics (cargo build, cargo clippy, rustc).
//!
//! Facts: one totals fact per kind of run in the tool's own terms (`tests: 3 passed, 2
//! failed, 1 ignored`, named after the check, `cargo nextest: 1 passed, 1 failed, 2
//! skipped`, `cargo: 2 errors, 12 warnings`), then every failing test and diagnostic with
//! its file:line, errors first, up to the report's cap, then how many more and their codes.
//!
//! No plugin types here (only `regex` and `serde_json`): the component's `extract`
//! (`lib.rs`) calls [`extract`], and the plugin benchmark compiles this very file natively
//! (`host/cli/benches/native_rules.rs`), so the two run the same rules.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

// Relative to this file's folder, whichever crate includes it.
#[path = "parse.rs"]
mod parse;
#[path = "shape.rs"]
mod shape;

use parse::has;

use shape::{count, ordered, Finding, Severity};
pub use shape::{Kind, Stated};

/// The facts about `output`, the output of the check or tool `tool`: the totals first,
/// then the failing tests and diagnostics. Empty when the output is no cargo run.
pub fn extract(tool: &str, output: &str) -> Vec<Stated> {
    let p = patterns();
    let mut totals = Vec::new();
    let mut found = Vec::new();
    // `--format json` prints no `test result:` lines and escapes the panics' line
    // breaks, so the two never describe the same run twice; compile diagnostics
    // (stderr, text) come with either.
    let lines = parse::lines(output);
    let marks = parse::marks(&lines);
    if !(marks.json && json_runs(tool, &lines, &mut totals, &mut found)) {
        test_runs(p, tool, &lines, marks, output, &mut totals, &mut found);
    }
    let tests = found.len();
    diagnostics(p, &lines, output, &mut totals, &mut found);
    if totals.is_empty() {
        return totals;
    }
    let what = if tests > 0 {
        "failing tests"
    } else {
        "diagnostics"
    };
    totals.extend(ordered(found, what));
    totals
}

/// Longest message put into a statement.
const MAX_MESSAGE: usize = 160;

/// A regex compiled on first use: a fresh instance (how a folder plugin runs unless the
/// project grants it a kept one) compiles only the patterns its output needs, and an
/// output with nothing cargo-like in it compiles none.
struct Lazy {
    pattern: &'static str,
    compiled: OnceLock<Regex>,
}

impl Lazy {
    const fn new(pattern: &'static str) -> Lazy {
        Lazy {
            pattern,
            compiled: OnceLock::new(),
        }
    }

    fn get(&self) -> &Regex {
        self.compiled.get_or_init(|| re(self.pattern))
    }
}

/// The rarer shapes (the common ones are parsed by hand, `parse.rs`).
struct Patterns {
    /// A test returning `Err`: its captured stdout.
    err_return: Lazy,
    /// nextest: `FAIL [   0.227s] (2/2) demo tests::bad`.
    nextest_fail: Lazy,
    /// nextest: `Summary [   0.231s] 2 tests run: 1 passed, 1 failed, 2 skipped`.
    nextest_summary: Lazy,
    /// The lint a diagnostic comes from, as rustc and clippy name it in its notes.
    lint: Lazy,
    /// `` `x` `` spans of a message (a lint's messages differ only there).
    quoted: Lazy,
}

fn patterns() -> &'static Patterns {
    static P: Patterns = Patterns {
        err_return: Lazy::new(r"(?m)^---- (\S+) stdout ----\n(Error: .*)"),
        nextest_fail: Lazy::new(
            r"^\s+(FAIL|SIGSEGV|SIGABRT|SIGBUS|TIMEOUT|LEAK-FAIL|ABORT) \[[^\]]*\] (?:\(\s*\d+/\d+\) )?(\S+) (\S+)$",
        ),
        nextest_summary: Lazy::new(r"(?m)^\s*Summary \[[^\]]*\] \d+ tests? run: (.+)$"),
        lint: Lazy::new(
            r"index\.html#(\w+)|#\[(?:warn|deny|forbid)\(([\w:]+)\)\]|`-[DW] ([\w:-]+)` implied",
        ),
        quoted: Lazy::new(r"`[^`]*`"),
    };
    &P
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

fn cut(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_MESSAGE {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX_MESSAGE).collect::<String>())
    }
}

/// One failing test: its name and, when it panicked, where and why.
struct Failure {
    name: String,
    binary: Option<String>,
    panic: Option<(String, String, String)>,
    error: Option<String>,
}

impl Failure {
    fn finding(&self) -> Finding {
        let name = match &self.binary {
            Some(b) => format!("{} ({b})", self.name),
            None => self.name.clone(),
        };
        let s = match (&self.panic, &self.error) {
            (Some((file, line, msg)), _) => format!("test {name} panicked at {file}:{line}: {msg}"),
            (None, Some(e)) => format!("test {name} fails: {e}"),
            (None, None) => format!("test {name} fails"),
        };
        Finding::new(Severity::Error, s)
    }
}

/// The panics of an output by test name (the first of each).
fn panics(text: &str) -> HashMap<String, (String, String, String)> {
    let mut map = HashMap::new();
    for p in parse::panics(text) {
        map.entry(p.thread.unwrap_or_default().to_string())
            .or_insert_with(|| (p.file.to_string(), p.line.to_string(), cut(p.message)));
    }
    map
}

/// libtest's and nextest's text: totals facts and the failing tests.
fn test_runs(
    p: &Patterns,
    tool: &str,
    lines: &[&str],
    marks: parse::Marks,
    text: &str,
    out: &mut Vec<Stated>,
    found: &mut Vec<Finding>,
) {
    // Only an output with a failing test needs its panics: most outputs (every tool's,
    // since the extractor reads them all) have none, and the search reads the whole text.
    let panics = OnceCell::new();
    let errors: HashMap<String, String> = if marks.err_return {
        p.err_return
            .get()
            .captures_iter(text)
            .map(|c| (c[1].to_string(), cut(&c[2])))
            .collect()
    } else {
        HashMap::new()
    };
    let mut failures: Vec<Failure> = Vec::new();
    let add = |failures: &mut Vec<Failure>, name: &str, binary: Option<&str>| {
        if !failures.iter().any(|f| f.name == name) {
            failures.push(Failure {
                name: name.to_string(),
                binary: binary.map(str::to_string),
                panic: panics.get_or_init(|| self::panics(text)).get(name).cloned(),
                error: errors.get(name).cloned(),
            });
        }
    };

    let nextest = marks
        .summary
        .then(|| p.nextest_summary.get().captures_iter(text).last())
        .flatten();
    if let Some(c) = nextest {
        out.push(Stated::new(
            Kind::Verification,
            format!("cargo nextest: {}", c[1].trim()),
        ));
        for line in lines {
            if let Some(c) = p.nextest_fail.get().captures(line) {
                add(&mut failures, &c[3], Some(&c[2]));
            }
        }
    } else {
        let (mut passed, mut failed, mut ignored, mut runs) = (0u64, 0u64, 0u64, 0);
        for line in lines {
            // The first byte rules out most lines before any comparison.
            if !matches!(line.as_bytes().first(), Some(b't' | b'-')) {
                continue;
            }
            if let Some([p, f, i]) = parse::result_line(line) {
                runs += 1;
                passed += p.parse::<u64>().unwrap_or(0);
                failed += f.parse::<u64>().unwrap_or(0);
                ignored += i.parse::<u64>().unwrap_or(0);
            } else if let Some((name, status)) = parse::test_line(line) {
                if status == "FAILED" {
                    add(&mut failures, name, None);
                }
            } else if let Some(name) = parse::stdout_header(line) {
                // `--quiet` prints dots, not `test x ... FAILED`: the failures' headers
                // name them.
                add(&mut failures, name, None);
            }
        }
        if runs > 0 {
            let mut s = format!("{tool}: {passed} passed, {failed} failed");
            if ignored > 0 {
                s.push_str(&format!(", {ignored} ignored"));
            }
            out.push(Stated::new(Kind::Verification, s));
        }
    }
    found.extend(failures.iter().map(Failure::finding));
}

/// rustc's and clippy's diagnostics (with a location; summaries have none).
fn diagnostics(
    p: &Patterns,
    lines: &[&str],
    text: &str,
    out: &mut Vec<Stated>,
    found: &mut Vec<Finding>,
) {
    // A lint names itself in a note of its first diagnostic only: later ones with the same
    // message shape get the code from there.
    let mut code_of_shape: HashMap<String, String> = HashMap::new();
    let (mut errors, mut warnings, mut clippy) = (0, 0, false);
    let mut i = 0;
    while i < lines.len() {
        let Some((level, e_code, message)) = parse::diag(lines[i]) else {
            i += 1;
            continue;
        };
        // rustc puts the location right under the header; a summary line (`generated 12
        // warnings`) has none, and must not borrow the next diagnostic's.
        let Some((file, line_no)) = lines.get(i + 1).and_then(|l| parse::arrow(l)) else {
            i += 1;
            continue;
        };
        let end = lines[i + 1..]
            .iter()
            .position(|l| {
                parse::diag(l).is_some() || l.starts_with("test ") || l.starts_with("   Compiling")
            })
            .map_or(lines.len(), |n| i + 1 + n);
        let shape = p.quoted.get().replace_all(message, "`_`").into_owned();
        let mut code = e_code.map(str::to_string);
        if code.is_none() {
            code = lines[i + 1..end].iter().find_map(|l| {
                let c = p.lint.get().captures(l)?;
                Some(match (c.get(1), c.get(2), c.get(3)) {
                    (Some(m), _, _) => format!("clippy::{}", m.as_str()),
                    (_, Some(m), _) => m.as_str().to_string(),
                    (_, _, Some(m)) => m.as_str().replace('-', "_"),
                    _ => return None,
                })
            });
            match &code {
                Some(c) => {
                    code_of_shape.insert(shape.clone(), c.clone());
                }
                None => code = code_of_shape.get(&shape).cloned(),
            }
        }
        clippy |= code.as_deref().is_some_and(|c| c.starts_with("clippy::"));
        let severity = if level == "error" {
            errors += 1;
            Severity::Error
        } else {
            warnings += 1;
            Severity::Warning
        };
        let msg = cut(message);
        let s = match (e_code, &code) {
            (Some(e), _) => format!("{level}[{e}] at {file}:{line_no}: {msg}"),
            (None, Some(c)) => format!("{level} at {file}:{line_no}: {msg} [{c}]"),
            (None, None) => format!("{level} at {file}:{line_no}: {msg}"),
        };
        let mut f = Finding::new(severity, s);
        if let Some(c) = code {
            f = f.code(c);
        }
        found.push(f);
        i = end;
    }
    if errors + warnings > 0 {
        let who = if clippy {
            "cargo clippy"
        } else if has(text, "   Compiling ") || has(text, "    Checking ") {
            "cargo"
        } else {
            "rustc"
        };
        out.push(Stated::new(
            Kind::Verification,
            format!(
                "{who}: {}, {}",
                count(errors, "error"),
                count(warnings, "warning")
            ),
        ));
    }
}

/// The first panic in a failed test's captured stdout: file, line and the message's
/// first line.
fn panic_location(stdout: &str) -> Option<(String, String, String)> {
    let p = parse::first_panic(stdout)?;
    Some((p.file.to_string(), p.line.to_string(), cut(p.message)))
}

/// Facts from libtest's JSON events; false when the output has none.
/// Only called when [`parse::Marks::json`] says a line can be one.
fn json_runs(tool: &str, lines: &[&str], out: &mut Vec<Stated>, found: &mut Vec<Finding>) -> bool {
    let (mut passed, mut failed, mut ignored, mut suites) = (0u64, 0u64, 0u64, 0usize);
    for line in lines {
        let line = line.trim();
        if !line.starts_with('{') || !line.contains("\"type\"") {
            continue;
        }
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match (event["type"].as_str(), event["event"].as_str()) {
            (Some("suite"), Some("ok" | "failed")) => {
                suites += 1;
                passed += event["passed"].as_u64().unwrap_or(0);
                failed += event["failed"].as_u64().unwrap_or(0);
                ignored += event["ignored"].as_u64().unwrap_or(0);
            }
            (Some("test"), Some("failed")) => {
                let name = event["name"].as_str().unwrap_or("?").to_string();
                let stdout = event["stdout"].as_str().unwrap_or("");
                let error = stdout.lines().find(|l| l.starts_with("Error: ")).map(cut);
                found.push(
                    Failure {
                        name,
                        binary: None,
                        panic: panic_location(stdout),
                        error,
                    }
                    .finding(),
                );
            }
            _ => {}
        }
    }
    if suites == 0 {
        return false;
    }
    let mut s = format!("{tool}: {passed} passed, {failed} failed");
    if ignored > 0 {
        s.push_str(&format!(", {ignored} ignored"));
    }
    out.push(Stated::new(Kind::Verification, s));
    true
}
