//! Quality gates: turn a check's output and facts into a verdict.
//!
//! The native [`CommandGate`] judges by exit status; the plugin system adds WASM gates
//! behind the same [`Gate`] trait.

use crate::commands::CommandOutput;
use crate::state_store::{Fact, FactCategory};
use crate::task::CheckSpec;

/// A gate's verdict on one check.
#[derive(Debug, Clone, PartialEq)]
pub struct GateVerdict {
    /// Whether the check passes.
    pub passing: bool,
    /// One-line reason.
    pub summary: String,
}

/// A quality gate.
pub trait Gate: Send + Sync {
    /// Name, for reports.
    fn name(&self) -> &str;
    /// Judges one check run; `facts` are those extracted from its output.
    fn evaluate(&self, check: &CheckSpec, output: &CommandOutput, facts: &[Fact]) -> GateVerdict;
}

/// Passes when the command exited 0 within its timeout; the summary comes from the
/// extracted verification fact when there is one.
pub struct CommandGate;

impl Gate for CommandGate {
    fn name(&self) -> &str {
        "command"
    }

    fn evaluate(&self, check: &CheckSpec, output: &CommandOutput, facts: &[Fact]) -> GateVerdict {
        let passing = output.success();
        let detail = facts
            .iter()
            .find(|f| f.category == FactCategory::Verification && !crate::extract::is_generic(f))
            .map(|f| f.statement.clone());
        let summary = if output.timed_out {
            format!(
                "`{}` timed out after {:.0?}",
                check.command, output.duration
            )
        } else {
            let status = match output.exit_code {
                Some(c) => format!("exit {c}"),
                None => "killed".to_string(),
            };
            let verdict = if passing { "passed" } else { "failed" };
            match detail {
                Some(d) => format!("{d} ({status})"),
                None => match output.output.lines().rev().find(|l| !l.trim().is_empty()) {
                    Some(last) => format!(
                        "{verdict} ({status}): {}",
                        last.trim().chars().take(160).collect::<String>()
                    ),
                    None => format!("{verdict} ({status}), no output"),
                },
            }
        };
        GateVerdict { passing, summary }
    }
}
