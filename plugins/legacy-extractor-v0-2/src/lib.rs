//! Test fixture: a plugin built against the frozen `agentforge:plugin@0.2.0` contract
//! (`wit/snapshots/0.2.0`) with wit-bindgen directly, as a plugin written before 0.3.0
//! was. The host must still load it (its manifest says `api = "0.2.0"`) and call it
//! through its 0.2.0 binding: `extract(tool, output, result, step)`, no `details`.
//!
//! One component exports the 0.2.0 `extractor`, `gate` and `tool` worlds (their exports
//! do not overlap), so the test loads it once as each kind:
//!
//! - extractor (handles `*`): one fact, `legacy extractor: <tool> <result> at step <n>:
//!   <first line of output>`, so the test sees exactly what the host passed;
//! - gate (judges `*`): passes iff the check exited 0; summary `legacy 0.2 gate: exit
//!   <code>` or `legacy 0.2 gate: timed out` / `killed`;
//! - tool `legacy_echo` (every phase): returns its arguments as its output.

// The generated export shims take the WIT functions' flattened parameters.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "../../wit/snapshots/0.2.0",
    // The three worlds' exports side by side (`include` would import `fact` twice): the
    // same functions, records and the frozen 0.2.0 types and host.
    inline: "package agentforge:legacy-fixture;
        world both {
            use agentforge:plugin/types@0.2.0.{fact, action-result, check-run, verdict};
            import agentforge:plugin/host@0.2.0;
            export handles: func() -> list<string>;
            export extract: func(tool: string, output: string, %result: action-result, step: u64) -> list<fact>;
            export checks: func() -> list<string>;
            export evaluate: func(run: check-run, facts: list<fact>) -> verdict;
            record tool-info {
                name: string,
                description: string,
                parameters-json: string,
                phases: list<string>,
            }
            record tool-output {
                %result: action-result,
                output: string,
            }
            export describe: func() -> tool-info;
            export invoke: func(arguments-json: string) -> result<tool-output, string>;
        }",
    world: "agentforge:legacy-fixture/both",
    generate_all,
});

use agentforge::plugin::host::{config, log, LogLevel};
use agentforge::plugin::types::FactCategory;

struct Legacy;

impl Guest for Legacy {
    fn handles() -> Vec<String> {
        vec!["*".to_string()]
    }

    fn extract(tool: String, output: String, result: ActionResult, step: u64) -> Vec<Fact> {
        // Uses the 0.2.0 host, so its import stays in the component.
        log(LogLevel::Debug, &format!("legacy extractor reads `{tool}`"));
        let result = match result {
            ActionResult::Success => "success",
            ActionResult::Failure => "failure",
            ActionResult::Partial => "partial",
            ActionResult::Skipped => "skipped",
        };
        let first = output.lines().next().unwrap_or("");
        vec![Fact {
            category: FactCategory::Verification,
            statement: format!("legacy extractor: {tool} {result} at step {step}: {first}"),
            confidence: 1.0,
            source: String::new(),
        }]
    }

    fn checks() -> Vec<String> {
        vec!["*".to_string()]
    }

    fn evaluate(run: CheckRun, _facts: Vec<Fact>) -> Verdict {
        log(
            LogLevel::Debug,
            &format!("legacy gate judges `{}` (config {})", run.check, config()),
        );
        let summary = match (run.exit_code, run.timed_out) {
            (_, true) => "legacy 0.2 gate: timed out".to_string(),
            (Some(code), false) => format!("legacy 0.2 gate: exit {code}"),
            (None, false) => "legacy 0.2 gate: killed".to_string(),
        };
        Verdict {
            passing: run.exit_code == Some(0) && !run.timed_out,
            summary,
        }
    }

    fn describe() -> ToolInfo {
        ToolInfo {
            name: "legacy_echo".to_string(),
            description: "Echoes its arguments (a test fixture).".to_string(),
            parameters_json: r#"{"type": "object", "properties": {"text": {"type": "string"}}}"#
                .to_string(),
            phases: vec!["*".to_string()],
        }
    }

    fn invoke(arguments_json: String) -> Result<ToolOutput, String> {
        Ok(ToolOutput {
            result: ActionResult::Success,
            output: arguments_json,
        })
    }
}

export!(Legacy);
