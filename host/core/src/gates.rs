//! Quality gates: turn a check's output and facts into a verdict.
//!
//! The native [`CommandGate`] judges by exit status; the plugin system adds WASM gates
//! behind the same [`Gate`] trait. A gate names the checks it judges; [`Gates`] picks,
//! per check, the gate naming it exactly, else one judging any check (`*`), else the
//! command gate.

use crate::command::CommandOutput;
use crate::state::{Fact, FactCategory};
use crate::task::CheckSpec;

/// Two gates judging the same check (or both judging any check, `*`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "gates `{first}` and `{second}` {}; keep one, or narrow one's checks (config `checks`)",
    if check == "*" { "both judge every check (`*`)".to_string() } else { format!("both judge check `{check}`") }
)]
pub struct GateConflict {
    /// The gate added first.
    pub first: String,
    /// The gate that conflicts with it.
    pub second: String,
    /// The check both claim (`*`: any).
    pub check: String,
}

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
    /// The checks this gate judges, by name; `*` means any.
    fn checks(&self) -> Vec<String> {
        vec!["*".to_string()]
    }
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

/// The gates of a run, chosen per check.
pub struct Gates {
    /// Gates with the checks they name (asked once), and at most one judging any check.
    list: Vec<(Vec<String>, Box<dyn Gate>)>,
    fallback: CommandGate,
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            list: Vec::new(),
            fallback: CommandGate,
        }
    }
}

impl Gates {
    /// Adds a gate. Two gates naming the same check (or both judging any check) is an
    /// error naming both: which one decides would be an accident of load order.
    pub fn push(&mut self, gate: Box<dyn Gate>) -> Result<(), GateConflict> {
        let claims = gate.checks();
        for (other_claims, other) in &self.list {
            if let Some(c) = other_claims.iter().find(|c| claims.contains(c)) {
                return Err(GateConflict {
                    first: other.name().to_string(),
                    second: gate.name().to_string(),
                    check: c.clone(),
                });
            }
        }
        self.list.push((claims, gate));
        Ok(())
    }

    /// The gate judging `check`.
    pub fn for_check(&self, check: &str) -> &dyn Gate {
        let naming = |n: &str| {
            self.list
                .iter()
                .find(|(claims, _)| claims.iter().any(|c| c == n))
                .map(|(_, g)| g.as_ref())
        };
        naming(check)
            .or_else(|| naming("*"))
            .unwrap_or(&self.fallback)
    }

    /// Judges one check run with the gate chosen for it.
    pub fn evaluate(
        &self,
        check: &CheckSpec,
        output: &CommandOutput,
        facts: &[Fact],
    ) -> GateVerdict {
        self.for_check(&check.name).evaluate(check, output, facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, &'static [&'static str]);

    impl Gate for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn checks(&self) -> Vec<String> {
            self.1.iter().map(|c| c.to_string()).collect()
        }
        fn evaluate(&self, _: &CheckSpec, _: &CommandOutput, _: &[Fact]) -> GateVerdict {
            GateVerdict {
                passing: true,
                summary: self.0.to_string(),
            }
        }
    }

    #[test]
    fn exact_name_beats_any_and_the_command_gate_is_last() {
        let mut g = Gates::default();
        assert_eq!(g.for_check("tests").name(), "command");
        g.push(Box::new(Named("any", &["*"]))).unwrap();
        g.push(Box::new(Named("tests-pass", &["tests", "test"])))
            .unwrap();
        assert_eq!(g.for_check("tests").name(), "tests-pass");
        assert_eq!(g.for_check("clippy").name(), "any");
    }

    #[test]
    fn two_gates_on_one_check_is_an_error_naming_both() {
        let mut g = Gates::default();
        g.push(Box::new(Named("a", &["tests"]))).unwrap();
        let e = g
            .push(Box::new(Named("b", &["lint", "tests"])))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("`a` and `b` both judge check `tests`"),
            "{e}"
        );
        g.push(Box::new(Named("c", &["*"]))).unwrap();
        let e = g.push(Box::new(Named("d", &["*"]))).unwrap_err();
        assert!(e.to_string().contains("every check"), "{e}");
    }
}
