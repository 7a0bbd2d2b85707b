//! cargo test results, test panics with their location, and rustc/clippy diagnostics,
//! from the default text output and from libtest's JSON lines (`cargo test -- -Z
//! unstable-options --format json`).
//!
//! The text rules are the host's native `CargoRules` (host/core/src/extract.rs), so the facts
//! are identical whichever of the two reads an output. The JSON lines give the same
//! statements: counts summed over the test binaries' `suite` events, one fact per failed
//! `test` event (its panic location from the captured stdout when there is one).

use std::sync::OnceLock;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use agentforge_plugin_sdk::{Rule, RuleSet};
use serde_json::Value;

const PANIC: &str = r"thread '([^']+)'(?: \(\d+\))? panicked at ([^:\s]+):(\d+):\d+:\n(.*)";

/// At most this many failing-test facts per output (as the text rules' `.limit(5)`).
const MAX_FAILURES: usize = 5;

/// Longest panic message put into a statement (as the SDK cuts a rule's captures).
const MAX_MESSAGE: usize = 160;

fn text_rules() -> RuleSet {
    RuleSet::new(vec![
        // One `test result:` line per test binary: the counts are summed.
        Rule::total(
            r"test result: (ok|FAILED)\. (?P<passed>\d+) passed; (?P<failed>\d+) failed; (\d+) ignored",
            Category::Verification,
            "{tool}: {passed} passed, {failed} failed",
        ),
        Rule::each(PANIC, Category::Error, "test {1} panicked at {2}:{3}: {4}").limit(5),
        // Panics already name the failing tests, with a location.
        Rule::each(
            r"(?m)^test (\S+) \.\.\. FAILED",
            Category::Error,
            "test {1} fails",
        )
        .limit(5)
        .unless(PANIC),
        Rule::each(
            r"(?m)^(error|warning)(\[[A-Z]\d+\])?: (.+)\n\s*--> ([^:\s]+):(\d+):\d+",
            Category::Error,
            "{1}{2} at {4}:{5}: {3}",
        )
        .limit(5)
        // Summary lines, not diagnostics.
        .skip_if(3, r"^(aborting due to 1 previous error$|could not compile)"),
    ])
}

/// The first panic in a failed test's captured stdout: file, line and the message's
/// first line.
fn panic_location(stdout: &str) -> Option<(String, String, String)> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"panicked at ([^:\s]+):(\d+):\d+:\n(.*)").expect("valid regex")
    });
    let c = re.captures(stdout)?;
    Some((c[1].to_string(), c[2].to_string(), cut(&c[3])))
}

fn cut(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_MESSAGE {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX_MESSAGE).collect::<String>())
    }
}

/// Facts from libtest's JSON events; empty when the output has none.
fn json_facts(input: &Input) -> Vec<Fact> {
    // One substring search skips the line walk on text output (the common case).
    if !input.output.contains("\"type\"") {
        return Vec::new();
    }
    let (mut passed, mut failed, mut suites) = (0u64, 0u64, 0usize);
    let mut failures = Vec::new();
    for line in input.output.lines() {
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
            }
            (Some("test"), Some("failed")) if failures.len() < MAX_FAILURES => {
                let name = event["name"].as_str().unwrap_or("?");
                let stdout = event["stdout"].as_str().unwrap_or("");
                let statement = match panic_location(stdout) {
                    Some((file, line, msg)) => {
                        format!("test {name} panicked at {file}:{line}: {msg}")
                    }
                    None => format!("test {name} fails"),
                };
                failures.push(fact(Category::Error, statement, &input.tool));
            }
            _ => {}
        }
    }
    let mut out = Vec::with_capacity(failures.len() + 1);
    if suites > 0 {
        out.push(fact(
            Category::Verification,
            format!("{}: {passed} passed, {failed} failed", input.tool),
            &input.tool,
        ));
    }
    out.extend(failures);
    out
}

/// The cargo extractor.
pub struct Cargo;

impl Extractor for Cargo {
    fn handles() -> Vec<String> {
        // Check names are the project's own (`tests`, `check`...): read every output.
        vec!["*".to_string()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        // Compiled once per instance (the manifest keeps the instance between calls).
        static RULES: OnceLock<RuleSet> = OnceLock::new();
        // `--format json` prints no `test result:` lines and escapes the panics' line
        // breaks, so the two never describe the same run twice; compile diagnostics
        // (stderr, text) come with either.
        let mut facts = json_facts(&input);
        facts.extend(RULES.get_or_init(text_rules).extract(&input));
        facts
    }
}

export_extractor!(Cargo);
