//! The host's record of a file edit (`edit_file`, `replace_lines`, `write_file`): the
//! `details` of an [`crate::Input`] whose `kind` is `"edit"`, typed. `wit/plugin.wit`
//! documents every field; unknown fields are ignored, so a host that adds some does not
//! break a plugin built against this version.

use serde::Deserialize;

/// One edit action's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Edit {
    /// `edit_file`, `replace_lines` or `write_file`.
    pub action: String,
    /// The file, as the action named it (workspace-relative).
    pub path: String,
    /// `write_file` made a new file.
    #[serde(default)]
    pub created: bool,
    /// `write_file` found the content already there; nothing was written.
    #[serde(default)]
    pub unchanged: bool,
    /// First line of the change in the file after it (1-based); set when it changed.
    #[serde(default)]
    pub first_line: Option<u64>,
    /// Lines of the old text that made way (unset for a `write_file` over a file too
    /// large to read first).
    #[serde(default)]
    pub lines_removed: Option<u64>,
    /// Lines of the new text.
    #[serde(default)]
    pub lines_added: Option<u64>,
    /// Why the action failed.
    #[serde(default)]
    pub error: Option<EditError>,
    /// The change broke a check that passed before it, and the host undid it.
    #[serde(default)]
    pub reverted: Option<Reverted>,
}

/// Why an edit failed, by `code`. A code this SDK does not know is [`EditError::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum EditError {
    /// The path is not allowed.
    Refused {
        /// The host's explanation (which rule; what to use instead after a `;`).
        reason: String,
    },
    /// An edit could not read the file as text.
    Unreadable(FileProblem),
    /// `write_file`: what is at the path is not a regular file.
    NotReplaceable(FileProblem),
    /// `edit_file`: the old text does not occur in the file.
    OldTextNotFound {
        /// Where it matches if indentation is ignored.
        #[serde(default)]
        indentation_match: Option<LineSpan>,
        /// It carries read_file's `  12| ` line-number prefixes.
        #[serde(default)]
        line_number_prefixes: bool,
        /// Lines most like its first line, best first.
        #[serde(default)]
        closest_lines: Vec<u64>,
    },
    /// `edit_file`: the old text occurs more than once.
    Ambiguous {
        /// How many times.
        occurrences: u64,
        /// Lines of the first 10.
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
    /// The snapshot or the write failed; the file is unchanged.
    WriteFailed {
        /// `snapshot` or `write`.
        stage: String,
        /// The OS error.
        message: String,
    },
    /// A code added after this SDK.
    #[serde(other)]
    Other,
}

/// Why a file could not be read or replaced.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FileProblem {
    /// `missing`, `folder`, `not_regular`, `too_large`, `binary`, `not_utf8` or `io`.
    pub reason: String,
    /// Files of the same name elsewhere (for `missing`).
    #[serde(default)]
    pub similar: Vec<String>,
    /// The OS error (for `io`).
    #[serde(default)]
    pub message: Option<String>,
}

/// Lines `first_line` to `last_line`, 1-based, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct LineSpan {
    /// First line.
    pub first_line: u64,
    /// Last line.
    pub last_line: u64,
}

/// The host's undoing of a change.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Reverted {
    /// The checks that passed before the change and failed after it.
    pub checks: Vec<String>,
}
