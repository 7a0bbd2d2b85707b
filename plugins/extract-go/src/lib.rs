//! go test, text or `-json`: test and package counts, failing tests, `t.Error` locations
//! and build errors.
//!
//! A `-json` stream carries the text output in its `Output` events: it is turned back into
//! that text, so both forms give the same facts.

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    export_extractor, fact, Category, Extractor, Fact, Input, Rule, RuleSet,
};
use regex::Regex;

struct Go {
    output_field: Regex,
    top_level: Regex,
    package: Regex,
    rules: RuleSet,
}

fn go() -> &'static Go {
    static G: OnceLock<Go> = OnceLock::new();
    G.get_or_init(|| Go {
        output_field: re(r#""Output":"((?:[^"\\]|\\.)*)""#),
        // Subtests are indented: counts are of top-level tests.
        top_level: re(r"(?m)^--- (PASS|FAIL|SKIP): \S+"),
        package: re(r"(?m)^(ok  |FAIL)\t\S+"),
        rules: RuleSet::new(vec![
            Rule::each(
                r"(?m)^FAIL\t(\S+) \[build failed\]",
                Category::Error,
                "package {1} fails to build",
            )
            .limit(5),
            Rule::each(r"(?m)^FAIL\t(\S+)\t", Category::Error, "package {1} fails").limit(5),
            Rule::each(
                r"(?m)^\s*--- FAIL: (\S+)",
                Category::Error,
                "test {1} fails",
            )
            .limit(5),
            // t.Errorf / t.Fatalf, indented under the test.
            Rule::each(
                r"(?m)^\s+([\w./-]+\.go):(\d+): (.+)$",
                Category::Error,
                "error at {1}:{2}: {3}",
            )
            .limit(5),
            // Compiler errors.
            Rule::each(
                r"(?m)^([\w./-]+\.go):(\d+):\d+: (.+)$",
                Category::Error,
                "error at {1}:{2}: {3}",
            )
            .limit(5),
        ]),
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

    fn extract(mut input: Input) -> Vec<Fact> {
        let g = go();
        input.output = text_of(g, &input.output);
        let mut facts = Vec::new();
        let (mut failed, mut passed, mut skipped) = (0, 0, 0);
        for c in g.top_level.captures_iter(&input.output) {
            match &c[1] {
                "FAIL" => failed += 1,
                "PASS" => passed += 1,
                _ => skipped += 1,
            }
        }
        let mut counts = Vec::new();
        // Without -v only failures are printed: no "0 passed" then.
        for (n, what) in [(failed, "failed"), (passed, "passed"), (skipped, "skipped")] {
            if n > 0 {
                counts.push(format!("{n} {what}"));
            }
        }
        if !counts.is_empty() {
            let s = format!("go test: {}", counts.join(", "));
            facts.push(fact(Category::Verification, s, &input.tool));
        }
        let (mut bad, mut all) = (0, 0);
        for m in g.package.find_iter(&input.output) {
            all += 1;
            if m.as_str().starts_with("FAIL") {
                bad += 1;
            }
        }
        if all > 0 {
            let s = match (bad, all) {
                (0, 1) => "go test: 1 package ok".to_string(),
                (0, n) => format!("go test: {n} packages ok"),
                (b, n) => format!("go test: {b} of {n} packages failed"),
            };
            facts.push(fact(Category::Verification, s, &input.tool));
        }
        if facts.is_empty() {
            // Not go test's output.
            return facts;
        }
        facts.extend(g.rules.extract(&input));
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
