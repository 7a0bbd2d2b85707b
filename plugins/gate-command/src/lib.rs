//! Gate: a check passes when its command exited 0. The summary is the first extracted
//! verification fact that is not the host's generic one (e.g. `tests: 3 passed, 1
//! failed`), else the last non-empty output line: the same verdict as the host's native
//! `CommandGate`. It judges every check (`*`); a killed command's status says `timed out`
//! when its timeout killed it, else `killed`.

use agentforge_plugin_sdk::{export_gate, Category, CheckRun, Gate, Verdict};

/// Statements of the host's generic fact start with a backtick (`` `cmd` exited 1: ... ``).
const GENERIC_PREFIX: char = '`';

/// The command gate.
pub struct CommandGate;

impl Gate for CommandGate {
    fn checks() -> Vec<String> {
        // Every check: a gate naming a check exactly takes precedence for that check.
        vec!["*".into()]
    }

    fn evaluate(run: CheckRun) -> Verdict {
        let passing = run.exit_code == Some(0);
        let status = match run.exit_code {
            Some(c) => format!("exit {c}"),
            None if run.timed_out => "timed out".to_string(),
            None => "killed".to_string(),
        };
        let detail = run.facts.iter().find(|f| {
            f.category == Category::Verification && !f.statement.starts_with(GENERIC_PREFIX)
        });
        let verdict = if passing { "passed" } else { "failed" };
        let summary = match detail {
            Some(f) => format!("{} ({status})", f.statement),
            None => match run.output.lines().rev().find(|l| !l.trim().is_empty()) {
                Some(last) => format!(
                    "{verdict} ({status}): {}",
                    last.trim().chars().take(160).collect::<String>()
                ),
                None => format!("{verdict} ({status}), no output"),
            },
        };
        Verdict { passing, summary }
    }
}

export_gate!(CommandGate);
