//! The benchmark's native baseline: the cargo rule set of `plugins/extract-cargo`,
//! written in plain Rust against the host's fact types, to measure what running the same
//! rules as a sandboxed component costs. Not used by runs (the component is).

use std::sync::LazyLock;

use agentforge::extract::FactExtractor;
use agentforge::state_store::{ActionResult, Fact, FactCategory};
use agentforge::text::cut;
use regex::Regex;

fn fact(
    step: u64,
    category: FactCategory,
    statement: String,
    confidence: f32,
    source: &str,
) -> Fact {
    Fact {
        id: String::new(),
        category,
        statement,
        confidence,
        source: source.to_string(),
        step,
        supersedes: None,
    }
}

static CARGO_RESULT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored").unwrap()
});
static CARGO_FAILED_TEST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^test (\S+) \.\.\. FAILED").unwrap());
static CARGO_PANIC: LazyLock<Regex> = LazyLock::new(|| {
    // Newer rustc prints the thread id: `thread 'name' (12345) panicked at ...`.
    Regex::new(r"thread '([^']+)'(?: \(\d+\))? panicked at ([^:\s]+):(\d+):\d+:\n(.*)").unwrap()
});
static RUSTC_DIAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(error|warning)(\[[A-Z]\d+\])?: (.+)\n\s*--> ([^:\s]+):(\d+):\d+").unwrap()
});

/// cargo test summaries and failures, rustc and clippy diagnostics.
pub struct CargoRules;

impl FactExtractor for CargoRules {
    fn name(&self) -> &str {
        "cargo"
    }

    fn extract(&self, tool: &str, output: &str, _result: ActionResult, step: u64) -> Vec<Fact> {
        // The plugin's libtest JSON pass: on text output, the same one substring search.
        if output.contains("\"type\"") {
            return json_facts(tool, output, step);
        }
        let mut facts = Vec::new();
        let (mut passed, mut failed, mut ignored, mut seen) = (0u64, 0u64, 0u64, false);
        for c in CARGO_RESULT.captures_iter(output) {
            seen = true;
            passed += c[2].parse::<u64>().unwrap_or(0);
            failed += c[3].parse::<u64>().unwrap_or(0);
            ignored += c[4].parse::<u64>().unwrap_or(0);
        }
        if seen {
            let mut s = format!("{tool}: {passed} passed, {failed} failed");
            if ignored > 0 {
                s.push_str(&format!(", {ignored} ignored"));
            }
            facts.push(fact(step, FactCategory::Verification, s, 1.0, tool));
        }
        for c in CARGO_PANIC.captures_iter(output).take(5) {
            facts.push(fact(
                step,
                FactCategory::Error,
                format!(
                    "test {} panicked at {}:{}: {}",
                    &c[1],
                    &c[2],
                    &c[3],
                    cut(c[4].trim(), 160)
                ),
                1.0,
                tool,
            ));
        }
        if !CARGO_PANIC.is_match(output) {
            for c in CARGO_FAILED_TEST.captures_iter(output).take(5) {
                facts.push(fact(
                    step,
                    FactCategory::Error,
                    format!("test {} fails", &c[1]),
                    1.0,
                    tool,
                ));
            }
        }
        let mut diags = 0;
        for c in RUSTC_DIAG.captures_iter(output) {
            if &c[3] == "aborting due to 1 previous error" || c[3].starts_with("could not compile")
            {
                continue;
            }
            diags += 1;
            if diags > 5 {
                continue;
            }
            let code = c.get(2).map(|m| m.as_str()).unwrap_or("");
            facts.push(fact(
                step,
                FactCategory::Error,
                format!(
                    "{}{} at {}:{}: {}",
                    &c[1],
                    code,
                    &c[4],
                    &c[5],
                    cut(c[3].trim(), 160)
                ),
                1.0,
                tool,
            ));
        }
        facts
    }
}

/// libtest JSON events (the plugin's second pass), for outputs that have them.
fn json_facts(tool: &str, output: &str, step: u64) -> Vec<Fact> {
    let (mut passed, mut failed, mut suites) = (0u64, 0u64, 0usize);
    let mut out = Vec::new();
    for line in output.lines().map(str::trim) {
        if !line.starts_with('{') {
            continue;
        }
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        match (event["type"].as_str(), event["event"].as_str()) {
            (Some("suite"), Some("ok" | "failed")) => {
                suites += 1;
                passed += event["passed"].as_u64().unwrap_or(0);
                failed += event["failed"].as_u64().unwrap_or(0);
            }
            (Some("test"), Some("failed")) => {
                let name = event["name"].as_str().unwrap_or("?");
                out.push(fact(
                    step,
                    FactCategory::Error,
                    format!("test {name} fails"),
                    1.0,
                    tool,
                ));
            }
            _ => {}
        }
    }
    if suites > 0 {
        let summary = format!("{tool}: {passed} passed, {failed} failed");
        out.insert(
            0,
            fact(step, FactCategory::Verification, summary, 1.0, tool),
        );
    }
    out
}
