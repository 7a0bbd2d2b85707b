//! JavaScript and TypeScript tools: jest, vitest and node's built-in test runner (`node
//! --test`, TAP and spec), eslint's stylish format, and tsc (plain and `--pretty`).
//!
//! Facts: the totals in the tool's own terms first, then every failing test (with where it
//! failed and its error) or diagnostic (errors before warnings, with rule or code and
//! file:line) up to the SDK's cap, then how many more.

use std::sync::OnceLock;

#[path = "../../extract-cargo/src/report.rs"]
mod report;

use agentforge_plugin_sdk::{
    export_extractor, fact, Category, Extractor, Fact, Input, Rule, RuleSet,
};
use regex::Regex;
use report::{count, findings, Finding, Severity};

/// At most this many `suite X fails` facts.
const LIMIT: usize = 5;

/// jest's `● Suite › test` and vitest's ` FAIL  file > suite > test` failure headers.
const JEST_FAILURE: &str = r"(?m)^\s+● (.+)$";
const VITEST_FAILURE: &str = r"(?m)^ FAIL  (\S+ > .+)$";
/// `src/a.ts(12,5): error TS2322: ...` and, with `--pretty`, `src/a.ts:12:5 - error TS2322: ...`.
const TSC: &str =
    r"(?m)^([^\s(:]+\.[cm]?[jt]sx?)(?:\((\d+),\d+\):|:(\d+):\d+ -) error (TS\d+): (.+)$";

struct Js {
    ansi: Regex,
    rules: RuleSet,
    failure_start: Regex,
    failure_end: Regex,
    frame: Regex,
    eslint_file: Regex,
    eslint_problem: Regex,
    tsc: Regex,
    node_count: Regex,
    node_not_ok: Regex,
    node_spec_failure: Regex,
    js_frame: Regex,
    tap_location: Regex,
}

fn js() -> &'static Js {
    static J: OnceLock<Js> = OnceLock::new();
    J.get_or_init(|| Js {
        ansi: re(r"\x1b\[[0-9;]*m"),
        rules: RuleSet::new(vec![
            // jest
            Rule::each(
                r"(?m)^Tests:\s+(.+), (\d+) total$",
                Category::Verification,
                "jest: {1}, {2} total",
            )
            .limit(1),
            Rule::each(
                r"(?m)^Test Suites:\s+(.+), (\d+) total$",
                Category::Verification,
                "jest: suites {1}, {2} total",
            )
            .limit(1),
            // vitest (` | ` becomes `, ` below)
            Rule::each(
                r"(?m)^\s+Tests  (\d.*) \((\d+)\)$",
                Category::Verification,
                "vitest: {1}, {2} total",
            )
            .limit(1),
            Rule::each(
                r"(?m)^\s+Test Files  (\d.*) \((\d+)\)$",
                Category::Verification,
                "vitest: test files {1}, {2} total",
            )
            .limit(1),
            Rule::each(
                r"(?m)^FAIL (\S+)(?: \(.*\))?$",
                Category::Error,
                "suite {1} fails",
            )
            .limit(LIMIT),
            // Verbose lists; the failure headers above name the same tests more fully.
            Rule::each(
                r"(?m)^\s+[✕×] (.+?)(?: \(?\d+ ?ms\)?)?$",
                Category::Error,
                "test {1} fails",
            )
            .limit(LIMIT)
            .unless(&format!("{JEST_FAILURE}|{VITEST_FAILURE}")),
            // eslint
            Rule::each(
                r"(?m)^✖ (\d+ problems? \(.+\))$",
                Category::Verification,
                "eslint: {1}",
            )
            .limit(1),
        ]),
        failure_start: re(&format!("{JEST_FAILURE}|{VITEST_FAILURE}")),
        failure_end: re(r"^(Test Suites:|PASS |FAIL |⎯|\s+Test Files  )"),
        // jest `at fn (src/a.js:5:23)` / `at src/a.js:5:23`; vitest `❯ [fn ]src/a.ts:6:23`.
        frame: re(r"^\s+(?:at|❯) (?:.*[ (])?([^\s():]+\.[cm]?[jt]sx?):(\d+):\d+\)?$"),
        eslint_file: re(r"^(/\S+|[A-Za-z]:\\\S+|\S+\.[cm]?[jt]sx?)$"),
        eslint_problem: re(r"^\s+(\d+):\d+\s+(error|warning)\s+(.+?)\s{2,}(\S+)$"),
        tsc: re(TSC),
        // TAP `# pass 3`, spec `ℹ pass 3`.
        node_count: re(r"(?m)^(?:#|ℹ) (tests|pass|fail|cancelled|skipped|todo) (\d+)$"),
        node_not_ok: re(r"^\s*not ok \d+ - (.+?)(?: # .*)?$"),
        node_spec_failure: re(r"^\s*✖ (.+?) \([\d.]+m?s\)$"),
        js_frame: re(
            r"(?:\(|at |^\s*)(?:file://)?((?:/|\.{0,2}/?)[^\s():'\\]+\.[cm]?[jt]sx?):(\d+):\d+",
        ),
        tap_location: re(r"^\s*location: '(?:file://)?(.+):(\d+):\d+'$"),
    })
}

fn re(p: &str) -> Regex {
    Regex::new(p).unwrap()
}

struct JsTools;

impl Extractor for JsTools {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(mut input: Input) -> Vec<Fact> {
        let j = js();
        input.output = j.ansi.replace_all(&input.output, "").into_owned();
        let mut facts = j.rules.extract(&input);
        for f in &mut facts {
            if f.statement.starts_with("vitest:") {
                f.statement = f.statement.replace(" | ", ", ");
            }
        }
        let tool = input.tool.clone();
        // Totals first, then the failures (tests and diagnostics, errors first, capped).
        let mut found = failures(j, &input);
        let eslint = eslint(j, &input, &mut found);
        let tsc = tsc(j, &input, &mut facts, &mut found);
        node_test(j, &input, &mut facts, &mut found);
        let (totals, rest): (Vec<Fact>, Vec<Fact>) = facts
            .into_iter()
            .partition(|f| f.category == Category::Verification);
        let mut facts = totals;
        let what = if eslint || tsc {
            "diagnostics"
        } else {
            "failing tests"
        };
        facts.extend(findings(&tool, found, what));
        facts.extend(rest);
        facts
    }
}

/// Each jest/vitest failure: its name, its first frame outside `node_modules`, and the
/// first line of its message.
fn failures(j: &Js, input: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    // (name, message, location) of the failure being read.
    let mut current: Option<(String, Option<String>, Option<String>)> = None;
    let flush = |current: &mut Option<(String, Option<String>, Option<String>)>,
                 out: &mut Vec<Finding>| {
        if let Some((name, message, at)) = current.take() {
            if name == "Test suite failed to run" && at.is_none() {
                return;
            }
            let mut s = format!("test {name} fails");
            if let Some(at) = at {
                s.push_str(&format!(" at {at}"));
            }
            if let Some(m) = message {
                s.push_str(&format!(": {m}"));
            }
            out.push(Finding::new(Severity::Error, s));
        }
    };
    for line in input.output.lines() {
        if let Some(c) = j.failure_start.captures(line) {
            flush(&mut current, &mut out);
            let name = c.get(1).or(c.get(2)).map_or("", |m| m.as_str()).trim();
            current = Some((name.to_string(), None, None));
            continue;
        }
        if j.failure_end.is_match(line) {
            flush(&mut current, &mut out);
            continue;
        }
        let Some((_, message, at)) = current.as_mut() else {
            continue;
        };
        if let Some(c) = j.frame.captures(line) {
            if at.is_none() && !line.contains("node_modules") {
                *at = Some(format!("{}:{}", &c[1], &c[2]));
            }
        } else if message.is_none() && at.is_none() && !line.trim().is_empty() {
            *message = Some(line.trim().to_string());
        }
    }
    flush(&mut current, &mut out);
    out
}

/// eslint's stylish format: a file name, then `line:col  severity  message  rule` lines.
fn eslint(j: &Js, input: &Input, found: &mut Vec<Finding>) -> bool {
    let mut any = false;
    let mut file: Option<&str> = None;
    for line in input.output.lines() {
        if j.eslint_file.is_match(line) {
            file = Some(line);
        } else if let (Some(f), Some(c)) = (file, j.eslint_problem.captures(line)) {
            any = true;
            let s = format!("{} {} at {f}:{}: {}", &c[2], &c[4], &c[1], &c[3]);
            let severity = if &c[2] == "error" {
                Severity::Error
            } else {
                Severity::Warning
            };
            found.push(Finding::new(severity, s).code(&c[4]));
        } else if line.trim().is_empty() {
            file = None;
        }
    }
    any
}

/// tsc errors, counted (its plain format prints no summary).
fn tsc(j: &Js, input: &Input, facts: &mut Vec<Fact>, found: &mut Vec<Finding>) -> bool {
    let errors: Vec<_> = j.tsc.captures_iter(&input.output).collect();
    if errors.is_empty() {
        return false;
    }
    facts.push(fact(
        Category::Verification,
        format!("tsc: {}", count(errors.len(), "error")),
        &input.tool,
    ));
    for c in &errors {
        let line = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        let s = format!("error {} at {}:{line}: {}", &c[4], &c[1], &c[5]);
        found.push(Finding::new(Severity::Error, s).code(&c[4]));
    }
    true
}

/// node --test, TAP (its default without a terminal) or spec: the totals, and each failing
/// test with where it failed (its stack's first frame of the project, else the test's
/// location) and its error.
fn node_test(j: &Js, input: &Input, facts: &mut Vec<Fact>, found: &mut Vec<Finding>) {
    let text = &input.output;
    let mut n = std::collections::HashMap::new();
    for c in j.node_count.captures_iter(text) {
        n.insert(c[1].to_string(), c[2].parse::<usize>().unwrap_or(0));
    }
    let (Some(pass), Some(fail)) = (n.get("pass"), n.get("fail")) else {
        return;
    };
    let mut s = format!("node --test: {pass} passed, {fail} failed");
    for k in ["skipped", "todo", "cancelled"] {
        if let Some(v) = n.get(k).filter(|v| **v > 0) {
            s.push_str(&format!(", {v} {k}"));
        }
    }
    facts.push(fact(Category::Verification, s, &input.tool));
    let lines: Vec<&str> = text.lines().collect();
    let frame = |l: &str| -> Option<String> {
        if l.contains("node:") || l.contains("node_modules") {
            return None;
        }
        let c = j.js_frame.captures(l)?;
        Some(format!("{}:{}", &c[1], &c[2]))
    };
    let spec = lines.iter().position(|l| l.trim() == "✖ failing tests:");
    for (i, line) in lines.iter().enumerate() {
        let name = match spec {
            Some(start) if i > start => j.node_spec_failure.captures(line),
            Some(_) => None,
            None => j.node_not_ok.captures(line),
        };
        let Some(name) = name else { continue };
        let indent = line.len() - line.trim_start().len();
        // Its block: the lines indented deeper, up to the next test.
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| {
                l.trim().is_empty()
                    || (l.len() - l.trim_start().len() > indent
                        && j.node_not_ok.captures(l).is_none()
                        && !l.trim_start().starts_with("ok "))
            })
            .copied()
            .collect();
        if block
            .iter()
            .any(|l| l.contains("failureType: 'subtestsFailed'"))
        {
            continue;
        }
        let stack = block
            .iter()
            .position(|l| l.trim_start().starts_with("stack:"))
            .unwrap_or(0);
        let at = block[stack..]
            .iter()
            .find_map(|l| frame(l))
            .or_else(|| block.iter().find_map(|l| frame(l)))
            .or_else(|| {
                block.iter().find_map(|l| {
                    let c = j.tap_location.captures(l)?;
                    Some(format!("{}:{}", &c[1], &c[2]))
                })
            });
        let message = if spec.is_some() {
            block
                .iter()
                .map(|l| l.trim())
                .find(|t| !t.is_empty())
                .map(str::to_string)
        } else {
            // `error: 'text'`, or `error: |-` with the text on the lines below.
            block.iter().enumerate().find_map(|(k, l)| {
                let e = l.trim().strip_prefix("error: ")?;
                if e == "|-" {
                    block[k + 1..]
                        .iter()
                        .map(|l| l.trim())
                        .find(|t| !t.is_empty())
                        .map(str::to_string)
                } else {
                    Some(e.trim_matches('\'').to_string())
                }
            })
        };
        let mut s = format!("test {} fails", &name[1]);
        if let Some(at) = at {
            s.push_str(&format!(" at {at}"));
        }
        if let Some(m) = message {
            s.push_str(&format!(": {m}"));
        }
        found.push(Finding::new(Severity::Error, s));
    }
}

export_extractor!(JsTools);
