//! The structured record of a file edit (`edit_file`, `replace_lines`, `write_file`):
//! what the host knows of the action, made where it is known (the store's file actions,
//! then the executor's auto-revert) and handed to extractors as the `details` of the WIT
//! `tool-call` (API 0.3.0). The model is shown the English summary; stages and plugins
//! read these fields instead of parsing it.
//!
//! As JSON (`wit/plugin.wit` and `docs/plugins.md` document every field):
//!
//! ```json
//! {"kind": "edit", "action": "edit_file", "path": "src/lib.rs", "created": false,
//!  "unchanged": false, "first_line": 3, "lines_removed": 1, "lines_added": 2}
//! {"kind": "edit", "action": "edit_file", "path": "src/lib.rs", "created": false,
//!  "unchanged": false, "error": {"code": "ambiguous", "occurrences": 2, "lines": [2, 7]}}
//! ```

use serde::{Deserialize, Serialize};

/// The file action an [`EditRecord`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditAction {
    /// `edit_file`: replace one exact occurrence of a text.
    EditFile,
    /// `replace_lines`: replace a range of lines.
    ReplaceLines,
    /// `write_file`: create or overwrite a whole file.
    WriteFile,
}

impl EditAction {
    /// The action of a tool name, if it is one of the three edit actions.
    pub fn from_name(name: &str) -> Option<EditAction> {
        match name {
            "edit_file" => Some(EditAction::EditFile),
            "replace_lines" => Some(EditAction::ReplaceLines),
            "write_file" => Some(EditAction::WriteFile),
            _ => None,
        }
    }

    /// The tool name (`edit_file`, ...).
    pub fn name(self) -> &'static str {
        match self {
            EditAction::EditFile => "edit_file",
            EditAction::ReplaceLines => "replace_lines",
            EditAction::WriteFile => "write_file",
        }
    }
}

/// One edit action's outcome, as facts. Serialized with `"kind": "edit"`, the tag of the
/// `details` object extractors receive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "edit")]
pub struct EditRecord {
    /// Which action.
    pub action: EditAction,
    /// The file, as the action named it (workspace-relative).
    pub path: String,
    /// `write_file` made a new file.
    #[serde(default)]
    pub created: bool,
    /// `write_file` found the content already there; nothing was written.
    #[serde(default)]
    pub unchanged: bool,
    /// First line of the change in the file after it (1-based); set when the file changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_line: Option<u64>,
    /// Lines of the old text that made way (a line touched in part counts as one); unset
    /// for a `write_file` over a file too large to read first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_removed: Option<u64>,
    /// Lines of the new text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_added: Option<u64>,
    /// Why the action failed; `None` when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<EditError>,
    /// Set by the executor when the change broke a passing check and was undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<Reverted>,
}

/// Why an edit action failed, by `code`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum EditError {
    /// The path is not allowed (outside the workspace, protected, a symlink out).
    Refused {
        /// The workspace's explanation (which rule, what to use instead).
        reason: String,
    },
    /// `edit_file` / `replace_lines`: the file could not be read as text.
    Unreadable(FileProblem),
    /// `write_file`: what is at the path is not a regular file it may replace.
    NotReplaceable(FileProblem),
    /// `edit_file`: the old text does not occur in the file.
    OldTextNotFound {
        /// Where the old text matches if indentation is ignored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        indentation_match: Option<LineSpan>,
        /// The old text carries read_file's `  12| ` line-number prefixes.
        #[serde(default)]
        line_number_prefixes: bool,
        /// Lines most like the old text's first line, best first (at most 3).
        #[serde(default)]
        closest_lines: Vec<u64>,
    },
    /// `edit_file`: the old text occurs more than once.
    Ambiguous {
        /// How many times.
        occurrences: u64,
        /// The lines of the first 10 occurrences.
        lines: Vec<u64>,
    },
    /// `replace_lines`: the range is not within the file.
    OutOfRange {
        /// First line asked for.
        start_line: u64,
        /// Last line asked for.
        end_line: u64,
        /// Lines the file has.
        line_count: u64,
    },
    /// The snapshot before the write, or the write itself, failed; the file is unchanged.
    WriteFailed {
        /// Which one.
        stage: WriteStage,
        /// The OS error.
        message: String,
    },
}

/// Why a file could not be read or replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileProblem {
    /// What is wrong with it.
    pub reason: FileProblemKind,
    /// Files of the same name elsewhere in the workspace (for [`FileProblemKind::Missing`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub similar: Vec<String>,
    /// The OS error (for [`FileProblemKind::Io`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl FileProblem {
    /// A problem with no similar paths and no OS error.
    pub fn new(reason: FileProblemKind) -> FileProblem {
        FileProblem {
            reason,
            similar: Vec::new(),
            message: None,
        }
    }
}

/// What is wrong with a file an action needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileProblemKind {
    /// Nothing is at the path.
    Missing,
    /// It is a folder.
    Folder,
    /// A FIFO, a device, a socket: not a regular file.
    NotRegular,
    /// Larger than file actions work on.
    TooLarge,
    /// It holds NUL bytes.
    Binary,
    /// It is not UTF-8 text.
    NotUtf8,
    /// Another I/O error (see `message`).
    Io,
}

/// Which write of an edit failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteStage {
    /// Saving the file before the change (the step's snapshot).
    Snapshot,
    /// Writing the new content.
    Write,
}

/// Lines `first_line` to `last_line`, 1-based, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineSpan {
    /// First line.
    pub first_line: u64,
    /// Last line.
    pub last_line: u64,
}

/// The executor's auto-revert of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverted {
    /// The checks that passed before the change and failed after it.
    pub checks: Vec<String>,
}

impl EditRecord {
    /// The record of `action` on `path`, before its outcome is known.
    fn new(action: EditAction, path: &str) -> EditRecord {
        EditRecord {
            action,
            path: path.to_string(),
            created: false,
            unchanged: false,
            first_line: None,
            lines_removed: None,
            lines_added: None,
            error: None,
            reverted: None,
        }
    }

    /// A change at `first_line`: `lines_removed` lines made way for `lines_added`.
    pub fn changed(
        action: EditAction,
        path: &str,
        first_line: u64,
        lines_removed: Option<u64>,
        lines_added: u64,
    ) -> EditRecord {
        EditRecord {
            first_line: Some(first_line),
            lines_removed,
            lines_added: Some(lines_added),
            ..EditRecord::new(action, path)
        }
    }

    /// A `write_file` that found the content already there.
    pub fn unchanged(path: &str) -> EditRecord {
        EditRecord {
            unchanged: true,
            ..EditRecord::new(EditAction::WriteFile, path)
        }
    }

    /// A failed action.
    pub fn failed(action: EditAction, path: &str, error: EditError) -> EditRecord {
        EditRecord {
            error: Some(error),
            ..EditRecord::new(action, path)
        }
    }

    /// The record as the JSON object extractors receive (`details`).
    pub fn to_json(&self) -> String {
        // Strings, numbers, booleans and lists only: serializing cannot fail.
        serde_json::to_string(self).expect("an edit record serializes to JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_shape_is_the_documented_one() {
        let mut r = EditRecord::changed(EditAction::EditFile, "src/lib.rs", 3, Some(1), 2);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.to_json()).unwrap(),
            json!({"kind": "edit", "action": "edit_file", "path": "src/lib.rs",
                   "created": false, "unchanged": false,
                   "first_line": 3, "lines_removed": 1, "lines_added": 2})
        );
        r.reverted = Some(Reverted {
            checks: vec!["tests".into()],
        });
        assert_eq!(
            serde_json::to_value(&r).unwrap()["reverted"],
            json!({"checks": ["tests"]})
        );
        let failed = EditRecord::failed(
            EditAction::EditFile,
            "a.rs",
            EditError::Unreadable(FileProblem {
                reason: FileProblemKind::Missing,
                similar: vec!["src/a.rs".into()],
                message: None,
            }),
        );
        assert_eq!(
            serde_json::to_value(&failed).unwrap()["error"],
            json!({"code": "unreadable", "reason": "missing", "similar": ["src/a.rs"]})
        );
        let ambiguous = EditError::Ambiguous {
            occurrences: 2,
            lines: vec![2, 7],
        };
        assert_eq!(
            serde_json::to_value(&ambiguous).unwrap(),
            json!({"code": "ambiguous", "occurrences": 2, "lines": [2, 7]})
        );
    }

    #[test]
    fn json_round_trips() {
        let r = EditRecord::failed(
            EditAction::ReplaceLines,
            "a.rs",
            EditError::OutOfRange {
                start_line: 40,
                end_line: 42,
                line_count: 9,
            },
        );
        assert_eq!(serde_json::from_str::<EditRecord>(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn action_names_round_trip() {
        for a in [
            EditAction::EditFile,
            EditAction::ReplaceLines,
            EditAction::WriteFile,
        ] {
            assert_eq!(EditAction::from_name(a.name()), Some(a));
        }
        assert_eq!(EditAction::from_name("read_file"), None);
    }
}
