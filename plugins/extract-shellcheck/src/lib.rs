//! shellcheck: its default (tty) format and `-f gcc`.
//!
//! Facts: the totals per level in shellcheck's own terms (`shellcheck: 1 error, 6
//! warnings, 2 info, 2 style`), then every finding with its SC code, level and file:line,
//! errors first, up to the SDK's cap, then how many more and their codes. Info and style
//! findings are notes, not errors.

use std::sync::OnceLock;

#[path = "../../extract-cargo/src/report.rs"]
mod report;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;
use report::{count, findings, Finding, Severity};

struct Patterns {
    /// tty: `In run.sh line 4:`.
    place: Regex,
    /// tty: `      ^-- SC2086 (info): Double quote to prevent globbing ...`.
    marker: Regex,
    /// gcc: `run.sh:4:7: note: Double quote to prevent globbing ... [SC2086]`.
    gcc: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        place: re(r"^In (.+) line (\d+):$"),
        marker: re(r"^\s*\^[-^]*\s*(SC\d+) \((error|warning|info|style)\): (.+)$"),
        gcc: re(r"^(.+?):(\d+):\d+: (error|warning|note): (.+) \[(SC\d+)\]$"),
    })
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

struct Shellcheck;

impl Extractor for Shellcheck {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        let p = patterns();
        // (level, code, file, line, message) in output order.
        let mut all: Vec<(String, String, String, String, String)> = Vec::new();
        let mut place: Option<(String, String)> = None;
        for line in input.output.lines() {
            if let Some(c) = p.place.captures(line) {
                place = Some((c[1].to_string(), c[2].to_string()));
            } else if let (Some((file, n)), Some(c)) = (&place, p.marker.captures(line)) {
                all.push((
                    c[2].to_string(),
                    c[1].to_string(),
                    file.clone(),
                    n.clone(),
                    c[3].trim().to_string(),
                ));
            } else if let Some(c) = p.gcc.captures(line) {
                all.push((
                    c[3].to_string(),
                    c[5].to_string(),
                    c[1].to_string(),
                    c[2].to_string(),
                    c[4].trim().to_string(),
                ));
            }
        }
        if all.is_empty() {
            return Vec::new();
        }
        let levels = ["error", "warning", "info", "style", "note"];
        let parts: Vec<String> = levels
            .iter()
            .filter_map(|l| {
                let n = all.iter().filter(|f| f.0 == *l).count();
                (n > 0).then(|| match *l {
                    "error" | "warning" | "note" => count(n, l),
                    _ => format!("{n} {l}"),
                })
            })
            .collect();
        let mut facts = vec![fact(
            Category::Verification,
            format!("shellcheck: {}", parts.join(", ")),
            &input.tool,
        )];
        let found = all
            .into_iter()
            .map(|(level, code, file, line, msg)| {
                let severity = match level.as_str() {
                    "error" => Severity::Error,
                    "warning" => Severity::Warning,
                    _ => Severity::Note,
                };
                let s = format!("{code} ({level}) at {file}:{line}: {msg}");
                Finding::new(severity, s).code(code)
            })
            .collect();
        facts.extend(findings(&input.tool, found, "findings"));
        facts
    }
}

export_extractor!(Shellcheck);
