//! Tool `rerun_check`: runs a check the task declares several times in a row, to tell a
//! flaky check (some runs pass) from one that fails consistently.
//!
//! The check runs through the host's `run-check` (capability-gated: the manifest requests
//! any name, the project grants the ones it allows). A run passes when its command exited
//! 0, as with the host's command gate. The result is `success` when every run passed,
//! `partial` when some did (flaky), `failure` when none did.

use agentforge_plugin_sdk::serde_json::{json, Value};
use agentforge_plugin_sdk::{export_tool, run_check, ActionResult, Tool, ToolInfo, ToolOutput};

/// Runs when `times` is not given.
const DEFAULT_TIMES: u32 = 3;
/// The allowed range of `times`.
const MIN_TIMES: u32 = 2;
const MAX_TIMES: u32 = 5;
/// At most this much of the last failing run's output is shown (its end: where test
/// runners put the failures and the summary).
const TAIL_LINES: usize = 15;
const TAIL_CHARS: usize = 1500;

/// The tool.
pub struct RerunCheck;

impl Tool for RerunCheck {
    fn describe() -> ToolInfo {
        ToolInfo {
            name: "rerun_check".into(),
            description: "run a declared check several times to tell a flaky check from a \
                          failing one (e.g. when a test fails that your change cannot have \
                          affected)"
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "check": {
                        "type": "string",
                        "description": "the check's name, as the task declares it (e.g. tests)"
                    },
                    "times": {
                        "type": "integer",
                        "minimum": MIN_TIMES,
                        "maximum": MAX_TIMES,
                        "default": DEFAULT_TIMES,
                        "description": "how many runs (2 to 5, default 3)"
                    }
                },
                "required": ["check"]
            }),
            phases: vec!["analyze".into(), "implement".into(), "verify".into()],
        }
    }

    fn invoke(args: Value) -> Result<ToolOutput, String> {
        let (check, times) = arguments(&args)?;
        let mut runs = Vec::new();
        for i in 0..times {
            let run = run_check(&check).map_err(|e| match i {
                0 => e,
                _ => format!("{e} (after {i} of {times} runs)"),
            })?;
            runs.push(Run {
                exit_code: run.exit_code,
                timed_out: run.timed_out,
                output: run.output,
            });
        }
        let (result, output) = summarize(&check, &runs);
        Ok(ToolOutput { result, output })
    }
}

/// The check name and the number of runs, validated.
fn arguments(args: &Value) -> Result<(String, u32), String> {
    let check = match args.get("check") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.trim().to_string(),
        Some(Value::String(_)) => return Err("rerun_check: `check` is empty".into()),
        Some(_) => return Err("rerun_check: `check` must be a string (a check name)".into()),
        None => return Err("rerun_check: missing `check` (the check to run)".into()),
    };
    let times = match args.get("times") {
        None | Some(Value::Null) => DEFAULT_TIMES,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (MIN_TIMES..=MAX_TIMES).contains(n))
            .ok_or_else(|| {
                format!("rerun_check: `times` must be an integer from {MIN_TIMES} to {MAX_TIMES}, not {v}")
            })?,
    };
    Ok((check, times))
}

/// One run of the check.
#[derive(Debug, Clone)]
struct Run {
    exit_code: Option<i32>,
    timed_out: bool,
    output: String,
}

impl Run {
    fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// Its exit status in the list: the code, `timeout` or `killed`.
    fn status(&self) -> String {
        match self.exit_code {
            Some(c) => c.to_string(),
            None if self.timed_out => "timeout".into(),
            None => "killed".into(),
        }
    }
}

/// The result and the output: `<check>: <n>/<total> runs passed (exit codes ...) — <verdict>`,
/// then the end of the last failing run's output.
fn summarize(check: &str, runs: &[Run]) -> (ActionResult, String) {
    let passed = runs.iter().filter(|r| r.passed()).count();
    let total = runs.len();
    let (result, verdict) = match passed {
        p if p == total => (ActionResult::Success, "passing"),
        0 => (ActionResult::Failure, "failing consistently"),
        _ => (ActionResult::Partial, "flaky"),
    };
    let codes: Vec<String> = runs.iter().map(Run::status).collect();
    let mut out = format!(
        "{check}: {passed}/{total} runs passed (exit codes {}) — {verdict}",
        codes.join(", ")
    );
    if let Some((i, run)) = runs.iter().enumerate().rev().find(|(_, r)| !r.passed()) {
        let tail = tail(&run.output);
        if tail.is_empty() {
            out.push_str(&format!("\nrun {} of {total} printed nothing", i + 1));
        } else {
            out.push_str(&format!(
                "\nend of the output of run {} of {total} (failed):\n{tail}",
                i + 1
            ));
        }
    }
    (result, out)
}

/// The last [`TAIL_LINES`] lines of `output` (trailing blank lines dropped), at most [`TAIL_CHARS`]
/// characters (cut at the start, on a char boundary).
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.trim_end().lines().collect();
    let text = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    let chars = text.chars().count();
    if chars <= TAIL_CHARS {
        return text;
    }
    let start = text
        .char_indices()
        .nth(chars - TAIL_CHARS)
        .map_or(0, |(at, _)| at);
    format!("…{}", &text[start..])
}

export_tool!(RerunCheck);

#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: Option<i32>, timed_out: bool, output: &str) -> Run {
        Run {
            exit_code: code,
            timed_out,
            output: output.into(),
        }
    }

    #[test]
    fn arguments_are_validated() {
        assert_eq!(
            arguments(&json!({"check": "tests"})),
            Ok(("tests".into(), 3))
        );
        assert_eq!(
            arguments(&json!({"check": " tests ", "times": 5})),
            Ok(("tests".into(), 5))
        );
        assert_eq!(
            arguments(&json!({"check": "t", "times": null})),
            Ok(("t".into(), 3))
        );
        for bad in [json!(1), json!(6), json!(-2), json!(2.5), json!("3")] {
            let err = arguments(&json!({"check": "t", "times": bad})).unwrap_err();
            assert!(err.contains("from 2 to 5"), "{err}");
        }
        assert!(arguments(&json!({}))
            .unwrap_err()
            .contains("missing `check`"));
        assert!(arguments(&json!({"check": ""}))
            .unwrap_err()
            .contains("empty"));
        assert!(arguments(&json!({"check": 1}))
            .unwrap_err()
            .contains("string"));
    }

    #[test]
    fn all_passing_is_a_success() {
        let runs = vec![run(Some(0), false, "ok"); 3];
        let (result, out) = summarize("tests", &runs);
        assert_eq!(result, ActionResult::Success);
        assert_eq!(out, "tests: 3/3 runs passed (exit codes 0, 0, 0) — passing");
    }

    #[test]
    fn some_passing_is_flaky() {
        let runs = [
            run(Some(0), false, "ok"),
            run(Some(1), false, "test a ... FAILED\n1 failed\n\n"),
            run(Some(0), false, "ok"),
        ];
        let (result, out) = summarize("tests", &runs);
        assert_eq!(result, ActionResult::Partial);
        assert_eq!(
            out,
            "tests: 2/3 runs passed (exit codes 0, 1, 0) — flaky\n\
             end of the output of run 2 of 3 (failed):\ntest a ... FAILED\n1 failed"
        );
    }

    #[test]
    fn none_passing_is_a_failure() {
        let runs = [
            run(Some(2), false, "x"),
            run(None, true, ""),
            run(None, false, ""),
        ];
        let (result, out) = summarize("clippy", &runs);
        assert_eq!(result, ActionResult::Failure);
        assert_eq!(
            out,
            "clippy: 0/3 runs passed (exit codes 2, timeout, killed) — failing consistently\n\
             run 3 of 3 printed nothing"
        );
    }

    #[test]
    fn the_tail_is_capped() {
        let many: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let t = tail(&many);
        assert_eq!(t.lines().count(), TAIL_LINES);
        assert!(t.starts_with("line 26\n") && t.ends_with("line 40"), "{t}");
        let wide = "é".repeat(TAIL_CHARS * 2);
        let t = tail(&wide);
        assert_eq!(t.chars().count(), TAIL_CHARS + 1);
        assert!(t.starts_with('…'));
    }
}
