//! AgentForge's `actions.jsonl` and the minimal step format (both JSON Lines).

use std::path::Path;

use agentforge_core::state::ActionRecord;
use serde_json::Value;

use super::{json_lines, parse_text, Format, ImportError, Imported, Position};
use crate::StepView;

/// AgentForge's own log: one `ActionRecord` a line. A torn last line (a crash mid-write)
/// is skipped with a note, as the executor's own recovery does.
pub(super) fn agentforge(path: &Path, text: &str) -> Result<Imported, ImportError> {
    let lines: Vec<(usize, &str)> = json_lines(text).collect();
    let mut steps = Vec::with_capacity(lines.len());
    let mut notes = Vec::new();
    for (i, (n, line)) in lines.iter().enumerate() {
        match parse_text::<ActionRecord>(path, Position::Line(*n), line) {
            Ok(r) => steps.push(StepView::from(&r)),
            Err(e @ ImportError::Json { .. }) if i + 1 == lines.len() => {
                notes.push(format!("{e}: the last line is torn; ignored"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Imported {
        format: Format::AgentForge,
        steps,
        notes,
    })
}

/// The minimal step format: an optional label line (`{"label": ...}`, first line only),
/// then one step a line, read as written (nothing is derived from `output`).
pub(super) fn steps(path: &Path, text: &str) -> Result<Imported, ImportError> {
    let mut steps = Vec::new();
    for (i, (n, line)) in json_lines(text).enumerate() {
        if i == 0 && is_label(line) {
            continue;
        }
        steps.push(parse_text::<StepView>(path, Position::Line(n), line)?);
    }
    Ok(Imported {
        format: Format::Steps,
        steps,
        notes: Vec::new(),
    })
}

/// Whether a line is a label line: an object with `label` and without `step`.
fn is_label(line: &str) -> bool {
    matches!(serde_json::from_str::<Value>(line),
        Ok(Value::Object(o)) if o.contains_key("label") && !o.contains_key("step"))
}
