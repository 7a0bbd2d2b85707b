//! Python linters and type checkers: mypy, ruff (full and concise formats) and flake8.
//!
//! Facts: one totals fact in the tool's own terms (`mypy: 13 errors in 1 file`, `ruff: 4
//! errors (3 fixable)`, `flake8: 5 errors`: flake8 prints no total, its lines are
//! counted), then every diagnostic with its code and file:line up to the SDK's cap, then
//! how many more and their codes. mypy's notes (`Revealed type is ...`) are not errors.

use std::sync::OnceLock;

#[path = "../../extract-cargo/src/report.rs"]
mod report;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;
use report::{count, findings, Finding, Severity};

struct Lint {
    mypy_found: Regex,
    mypy_success: Regex,
    mypy_line: Regex,
    ruff_found: Regex,
    ruff_fixable: Regex,
    ruff_clean: Regex,
    ruff_full: Regex,
    /// `path:line:col: CODE message`: ruff's concise format and flake8's.
    concise: Regex,
}

fn lint() -> &'static Lint {
    static L: OnceLock<Lint> = OnceLock::new();
    L.get_or_init(|| Lint {
        mypy_found: re(r"(?m)^Found (\d+) errors? in (\d+ files?) \(checked \d+ source files?\)"),
        mypy_success: re(r"(?m)^Success: (no issues found in \d+ source files?)"),
        mypy_line: re(
            r"(?m)^([^\s:]+\.pyi?):(\d+):(?:\d+:)? (error|warning): (.+?)(?:  \[([\w-]+)\])?$",
        ),
        ruff_found: re(r"(?m)^Found (\d+) errors?\."),
        ruff_fixable: re(r"(?m)^\[\*\] (\d+) fixable"),
        ruff_clean: re(r"(?m)^All checks passed!$"),
        ruff_full: re(r"(?m)^([A-Z]+\d+) (?:\[\*\] )?(.+)\n\s*--> ([^:\s]+):(\d+):\d+"),
        concise: re(r"(?m)^([^\s:]+\.pyi?):(\d+):\d+: ([A-Z]+\d+) (?:\[\*\] )?(.+)$"),
    })
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

struct PythonLint;

impl Extractor for PythonLint {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        let l = lint();
        let text = &input.output;
        let tool = &input.tool;
        let mut facts = Vec::new();
        let mut found = Vec::new();

        // mypy
        if let Some(c) = l.mypy_found.captures(text) {
            let s = format!(
                "mypy: {} in {}",
                count(c[1].parse().unwrap_or(0), "error"),
                &c[2]
            );
            facts.push(fact(Category::Verification, s, tool));
        } else if let Some(c) = l.mypy_success.captures(text) {
            facts.push(fact(
                Category::Verification,
                format!("mypy: {}", &c[1]),
                tool,
            ));
        }
        for c in l.mypy_line.captures_iter(text) {
            let code = c.get(5).map_or("", |m| m.as_str());
            let mut s = format!("{} at {}:{}: {}", &c[3], &c[1], &c[2], c[4].trim());
            if !code.is_empty() {
                s.push_str(&format!(" [{code}]"));
            }
            let severity = if &c[3] == "error" {
                Severity::Error
            } else {
                Severity::Warning
            };
            found.push(Finding::new(severity, s).code(code));
        }

        // ruff (full format)
        let ruff_found = l.ruff_found.captures(text);
        if let Some(c) = &ruff_found {
            let mut s = format!("ruff: {}", count(c[1].parse().unwrap_or(0), "error"));
            if let Some(f) = l.ruff_fixable.captures(text) {
                s.push_str(&format!(" ({} fixable with --fix)", &f[1]));
            }
            facts.push(fact(Category::Verification, s, tool));
        } else if l.ruff_clean.is_match(text) {
            facts.push(fact(Category::Verification, "ruff: 0 errors", tool));
        }
        for c in l.ruff_full.captures_iter(text) {
            let s = format!("{} at {}:{}: {}", &c[1], &c[3], &c[4], c[2].trim());
            found.push(Finding::new(Severity::Error, s).code(&c[1]));
        }

        // ruff --output-format concise, flake8
        let mut concise = 0;
        for c in l.concise.captures_iter(text) {
            concise += 1;
            let s = format!("{} at {}:{}: {}", &c[3], &c[1], &c[2], c[4].trim());
            found.push(Finding::new(Severity::Error, s).code(&c[3]));
        }
        if concise > 0 && ruff_found.is_none() {
            // flake8 prints no total: its lines are counted.
            let s = format!("flake8: {}", count(concise, "error"));
            facts.push(fact(Category::Verification, s, tool));
        }
        if facts.is_empty() {
            return facts;
        }
        facts.extend(findings(tool, found, "diagnostics"));
        facts
    }
}

export_extractor!(PythonLint);
