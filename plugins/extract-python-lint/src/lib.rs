//! Python linters and type checkers: mypy errors and its summary, ruff (full and concise
//! formats) and flake8 diagnostics, with their counts.

use std::sync::OnceLock;

use agentforge_plugin_sdk::{
    export_extractor, fact, Category, Extractor, Fact, Input, Rule, RuleSet,
};
use regex::Regex;

/// `path:line:col: CODE message`, ruff's concise format and flake8's (and pycodestyle's).
const CONCISE: &str = r"(?m)^([^\s:]+\.pyi?):(\d+):\d+: ([A-Z]+\d+) (?:\[\*\] )?(.+)$";
/// ruff's summary; without it, concise lines are flake8's and counted here.
const RUFF_FOUND: &str = r"(?m)^Found (\d+ errors?)\.";

struct Lint {
    rules: RuleSet,
    concise: Regex,
    ruff_found: Regex,
}

fn lint() -> &'static Lint {
    static L: OnceLock<Lint> = OnceLock::new();
    L.get_or_init(|| Lint {
        rules: RuleSet::new(vec![
            // mypy
            Rule::each(
                r"(?m)^Found (\d+ errors?) in (\d+ files?) \(checked \d+ source files?\)",
                Category::Verification,
                "mypy: {1} in {2}",
            ),
            Rule::each(
                r"(?m)^Success: (no issues found in \d+ source files?)",
                Category::Verification,
                "mypy: {1}",
            ),
            Rule::each(
                r"(?m)^([^\s:]+\.pyi?):(\d+):(?:\d+:)? error: (.+?)(  \[[\w-]+\])?$",
                Category::Error,
                "error at {1}:{2}: {3} {4}",
            )
            .limit(5),
            // ruff
            Rule::each(RUFF_FOUND, Category::Verification, "ruff: {1}").limit(1),
            Rule::each(
                r"(?m)^All checks passed!$",
                Category::Verification,
                "ruff: no errors",
            ),
            Rule::each(
                r"(?m)^([A-Z]+\d+) (?:\[\*\] )?(.+)\n\s*--> ([^:\s]+):(\d+):\d+",
                Category::Error,
                "{1} at {3}:{4}: {2}",
            )
            .limit(5),
            // ruff --output-format concise, flake8
            Rule::each(CONCISE, Category::Error, "{3} at {1}:{2}: {4}").limit(5),
        ]),
        concise: Regex::new(CONCISE).unwrap(),
        ruff_found: Regex::new(RUFF_FOUND).unwrap(),
    })
}

struct PythonLint;

impl Extractor for PythonLint {
    fn handles() -> Vec<String> {
        vec!["*".into()]
    }

    fn extract(input: Input) -> Vec<Fact> {
        let l = lint();
        let mut facts = l.rules.extract(&input);
        for f in &mut facts {
            // An absent mypy error code leaves a trailing space.
            f.statement.truncate(f.statement.trim_end().len());
        }
        // flake8 prints no summary: count its lines.
        if !l.ruff_found.is_match(&input.output) {
            let n = l.concise.find_iter(&input.output).count();
            if n > 0 {
                let s = format!("flake8: {n} {}", if n == 1 { "error" } else { "errors" });
                facts.insert(0, fact(Category::Verification, s, &input.tool));
            }
        }
        facts
    }
}

export_extractor!(PythonLint);
