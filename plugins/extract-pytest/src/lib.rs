//! pytest: the summary counts, the FAILED/ERROR node ids of the short summary, and where
//! each failure was raised with its error (long and `--tb=short` tracebacks alike).

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    export_extractor, fact, Category, Extractor, Fact, Input, Rule, RuleSet,
};
use regex::Regex;

/// At most this many location facts.
const MAX_LOCATIONS: usize = 5;

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
    names: RuleSet,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        summary: re(r"(?m)^=*\s*((?:\d+ [a-z]+, )*\d+ [a-z]+) in [\d.]+s\b"),
        no_tests: re(r"(?m)^=*\s*no tests ran in [\d.]+s\b"),
        count: re(r"(\d+) ([a-z]+)"),
        header: re(r"^(_{3,} .* _{3,}|={3,} .* ={3,})$"),
        raised_at: re(r"^([^\s:]+\.py):(\d+): ([A-Za-z_][\w.]*)$"),
        frame: re(r"^([^\s:]+\.py):(\d+): in \S+$"),
        file_line: re(r#"^E\s+File "([^"]+)", line (\d+)"#),
        typed: re(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failed|Exited)\b"),
        names: RuleSet::new(vec![
            Rule::each(r"(?m)^FAILED (\S+)", Category::Error, "test {1} fails").limit(5),
            Rule::each(r"(?m)^ERROR (\S+::\S+)", Category::Error, "test {1} errors").limit(5),
            Rule::each(
                r"(?m)^ERROR ([^\s:]+)(?: - .*)?$",
                Category::Error,
                "{1} fails to collect",
            )
            .limit(5),
        ]),
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
        let text = &input.output;
        let mut facts = Vec::new();
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
        facts.extend(p.names.extract(&input));
        facts.extend(locations(p, &input));
        facts
    }
}

/// `error at FILE:LINE: Error: message`, one per traceback section.
fn locations(p: &Patterns, input: &Input) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut section: Vec<&str> = Vec::new();
    for line in input.output.lines().chain(std::iter::once("=== end ===")) {
        if p.header.is_match(line) {
            if let Some(s) = section_fact(p, &section) {
                if out.len() < MAX_LOCATIONS {
                    out.push(fact(Category::Error, s, &input.tool));
                }
            }
            section.clear();
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
    Some(format!("error at {file}:{line}: {message}"))
}

/// A frame of the project, not of pytest, the standard library or a frozen module.
fn own(file: &str) -> bool {
    !(file.starts_with('<') || file.contains("site-packages") || file.contains("/lib/python"))
}

export_extractor!(Pytest);
