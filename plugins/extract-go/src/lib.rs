//! go test (text, `-v` or `-json`), go build and go vet: the totals (tests and subtests
//! counted as `go test -json` counts them; packages), every failing test with where it
//! failed, and compiler or vet errors with their file:line, up to the SDK's cap, then how
//! many more. A skip reason or a passing test's log is never reported as an error.
//!
//! A `-json` stream carries the text output in its `Output` events: it is turned back into
//! that text, so both forms give the same facts.

use std::collections::HashMap;
use std::sync::OnceLock;

#[path = "../../extract-cargo/src/report.rs"]
mod report;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;
use report::{count, findings, Finding, Severity};

struct Go {
    output_field: Regex,
    /// `=== RUN   TestX/sub` (also CONT): the test whose output follows, with -v.
    run: Regex,
    /// `--- FAIL: TestX/sub (0.00s)`, indented for subtests.
    result: Regex,
    /// `    calc_test.go:7: message` (t.Error, t.Log, t.Skip), indented under its test.
    logged: Regex,
    /// `ok  \tpkg\t0.01s`, `FAIL\tpkg\t0.01s`, `FAIL\tpkg [build failed]`.
    package: Regex,
    /// A compiler or vet line: `./main.go:7:5: message`.
    compiler: Regex,
}

fn go() -> &'static Go {
    static G: OnceLock<Go> = OnceLock::new();
    G.get_or_init(|| Go {
        output_field: re(r#""Output":"((?:[^"\\]|\\.)*)""#),
        run: re(r"^=== (?:RUN|CONT) +(\S+)"),
        result: re(r"^\s*--- (PASS|FAIL|SKIP): (\S+)"),
        logged: re(r"^\s+([\w./-]+\.go):(\d+): (.+)$"),
        package: re(r"^(ok  |FAIL|\?   )\t(\S+)(.*)$"),
        compiler: re(r"^([\w./-]+\.go):(\d+):\d+: (.+)$"),
    })
}

fn re(p: &str) -> Regex {
    Regex::new(p).unwrap()
}

struct GoTest;

impl Extractor for GoTest {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        let g = go();
        let text = text_of(g, &input.output);
        let tool = &input.tool;
        // Every test and subtest counts, as `go test -json` counts them.
        let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
        let mut failing: Vec<String> = Vec::new();
        let mut logs: HashMap<String, (String, String, String)> = HashMap::new();
        let (mut packages, mut bad_packages, mut unbuilt) = (0, 0, 0);
        let mut build_errors: Vec<Finding> = Vec::new();
        let mut current: Option<String> = None;
        let mut verbose = false;
        for line in text.lines() {
            if let Some(c) = g.run.captures(line) {
                verbose = true;
                current = Some(c[1].to_string());
            } else if let Some(c) = g.result.captures(line) {
                match &c[1] {
                    "PASS" => passed += 1,
                    "FAIL" => {
                        failed += 1;
                        failing.push(c[2].to_string());
                    }
                    _ => skipped += 1,
                }
                current = Some(c[2].to_string());
            } else if let Some(c) = g.logged.captures(line) {
                // The first message of a test: where it failed (if it fails; a skip
                // reason or a log of a passing test is not an error).
                if let Some(t) = &current {
                    logs.entry(t.clone())
                        .or_insert_with(|| (c[1].to_string(), c[2].to_string(), c[3].to_string()));
                }
            } else if let Some(c) = g.package.captures(line) {
                if c[1].starts_with('?') {
                    continue;
                }
                packages += 1;
                if c[1].starts_with("FAIL") {
                    bad_packages += 1;
                    unbuilt += usize::from(
                        c[3].contains("[build failed]") || c[3].contains("[setup failed]"),
                    );
                }
                current = None;
            } else if let Some(c) = g.compiler.captures(line) {
                let s = format!("error at {}:{}: {}", &c[1], &c[2], c[3].trim());
                build_errors.push(Finding::new(Severity::Error, s));
            }
        }
        let mut facts = Vec::new();
        let mut parts = Vec::new();
        if passed + failed + skipped > 0 {
            if verbose {
                parts.push(format!(
                    "{failed} failed, {passed} passed, {skipped} skipped"
                ));
            } else {
                // Without -v go test prints only the failures: no pass count to give.
                parts.push(format!("{failed} failed"));
            }
        }
        if packages > 0 {
            parts.push(match (bad_packages, packages) {
                (0, n) => format!("{} ok", count(n, "package")),
                (b, n) if unbuilt > 0 => format!(
                    "{b} of {} failed ({unbuilt} did not build)",
                    count(n, "package")
                ),
                (b, n) => format!("{b} of {} failed", count(n, "package")),
            });
        }
        if !parts.is_empty() {
            let s = format!("go test: {}", parts.join("; "));
            facts.push(fact(Category::Verification, s, tool));
        }
        if !build_errors.is_empty() {
            let s = format!("go: {}", count(build_errors.len(), "error"));
            facts.push(fact(Category::Verification, s, tool));
        }
        if facts.is_empty() {
            // Not go's output.
            return facts;
        }
        let mut found = build_errors;
        for t in &failing {
            let s = match logs.get(t) {
                Some((file, line, msg)) => format!("test {t} fails at {file}:{line}: {msg}"),
                None => format!("test {t} fails"),
            };
            found.push(Finding::new(Severity::Error, s));
        }
        let what = if failing.is_empty() {
            "errors"
        } else {
            "failing tests"
        };
        facts.extend(findings(tool, found, what));
        facts
    }
}

/// The text output: the `Output` events of a `-json` stream, other lines as they are
/// (build errors are not JSON).
fn text_of(g: &Go, output: &str) -> String {
    if !output.contains("\"Action\":") {
        return output.to_string();
    }
    let mut text = String::with_capacity(output.len() / 2);
    for line in output.lines() {
        if line.starts_with('{') && line.contains("\"Action\":") {
            if let Some(c) = g.output_field.captures(line) {
                unescape(&c[1], &mut text);
            }
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// A JSON string's body, unescaped into `out`.
fn unescape(s: &str, out: &mut String) {
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let ch = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                out.push(ch.unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
}

export_extractor!(GoTest);
