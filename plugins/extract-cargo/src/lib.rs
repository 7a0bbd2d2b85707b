//! cargo test results, test panics with their location, and rustc/clippy diagnostics.
//!
//! The same rules as the host's native `CargoRules` (host/src/extract.rs), so the facts
//! are identical whichever of the two reads an output.

use agentforge_plugin_sdk::{rule_extractor, Category, Rule, RuleSet};

const PANIC: &str = r"thread '([^']+)'(?: \(\d+\))? panicked at ([^:\s]+):(\d+):\d+:\n(.*)";

rule_extractor!(
    // Check names are the project's own (`tests`, `check`...): read every output.
    handles: ["*"],
    rules: RuleSet::new(vec![
        // One `test result:` line per test binary: the counts are summed.
        Rule::total(
            r"test result: (ok|FAILED)\. (?P<passed>\d+) passed; (?P<failed>\d+) failed; (\d+) ignored",
            Category::Verification,
            "{tool}: {passed} passed, {failed} failed",
        ),
        Rule::each(PANIC, Category::Error, "test {1} panicked at {2}:{3}: {4}").limit(5),
        // Panics already name the failing tests, with a location.
        Rule::each(r"(?m)^test (\S+) \.\.\. FAILED", Category::Error, "test {1} fails")
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
    ]),
);
