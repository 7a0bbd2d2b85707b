//! JavaScript and TypeScript tools: jest and vitest (counts, failing tests, where each
//! failure was raised), eslint's stylish format, and tsc (plain and `--pretty`).

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    export_extractor, fact, Category, Extractor, Fact, Input, Rule, RuleSet,
};
use regex::Regex;

/// At most this many facts of one kind (locations, eslint problems).
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
            Rule::each(JEST_FAILURE, Category::Error, "test {1} fails")
                .limit(LIMIT)
                .skip_if(1, "^Test suite failed to run$"),
            Rule::each(
                r"(?m)^FAIL (\S+)(?: \(.*\))?$",
                Category::Error,
                "suite {1} fails",
            )
            .limit(LIMIT),
            Rule::each(VITEST_FAILURE, Category::Error, "test {1} fails").limit(LIMIT),
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
        facts.extend(failure_locations(j, &input));
        facts.extend(eslint(j, &input));
        facts.extend(tsc(j, &input));
        facts
    }
}

/// `error at FILE:LINE: message` for each jest/vitest failure: its first frame outside
/// `node_modules`, and the first line of its message.
fn failure_locations(j: &Js, input: &Input) -> Vec<Fact> {
    let mut out = Vec::new();
    // (message, location) of the failure being read.
    let mut current: Option<(Option<String>, Option<String>)> = None;
    let mut flush = |current: &mut Option<(Option<String>, Option<String>)>| {
        if let Some((message, Some(at))) = current.take() {
            if out.len() < LIMIT {
                let s = match message {
                    Some(m) => format!("error at {at}: {m}"),
                    None => format!("error at {at}"),
                };
                out.push(fact(Category::Error, s, &input.tool));
            }
        }
    };
    for line in input.output.lines() {
        if j.failure_start.is_match(line) {
            flush(&mut current);
            current = Some((None, None));
            continue;
        }
        if j.failure_end.is_match(line) {
            flush(&mut current);
            continue;
        }
        let Some((message, at)) = current.as_mut() else {
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
    flush(&mut current);
    out
}

/// eslint's stylish format: a file name, then `line:col  severity  message  rule` lines.
fn eslint(j: &Js, input: &Input) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut file: Option<&str> = None;
    for line in input.output.lines() {
        if j.eslint_file.is_match(line) {
            file = Some(line);
        } else if let (Some(f), Some(c)) = (file, j.eslint_problem.captures(line)) {
            if out.len() < LIMIT {
                let s = format!("{} {} at {f}:{}: {}", &c[2], &c[4], &c[1], &c[3]);
                out.push(fact(Category::Error, s, &input.tool));
            }
        } else if line.trim().is_empty() {
            file = None;
        }
    }
    out
}

/// tsc errors, counted (its plain format prints no summary).
fn tsc(j: &Js, input: &Input) -> Vec<Fact> {
    let errors: Vec<_> = j.tsc.captures_iter(&input.output).collect();
    if errors.is_empty() {
        return Vec::new();
    }
    let n = errors.len();
    let plural = if n == 1 { "error" } else { "errors" };
    let mut out = vec![fact(
        Category::Verification,
        format!("tsc: {n} {plural}"),
        &input.tool,
    )];
    for c in errors.iter().take(LIMIT) {
        let line = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        let s = format!("error {} at {}:{line}: {}", &c[4], &c[1], &c[5]);
        out.push(fact(Category::Error, s, &input.tool));
    }
    out
}

export_extractor!(JsTools);
