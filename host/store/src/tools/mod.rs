//! The execution of the built-in file actions inside a confined workspace (their tool
//! definitions and the parsing of model tool calls are `agentforge_core::actions`:
//! `builtin_tools` and `parse_action`).
//!
//! - [`Workspace`] confines every model-given path to the workspace root and refuses
//!   writes to protected paths (the harness's own config, prompts, plugins, task file).
//! - [`read_regular_file`] is the one bounded read of a workspace file: regular files
//!   only (no FIFO, device or socket), at most a cap of bytes.
//! - [`execute_file_action`] runs read_file, write_file, edit_file, replace_lines and
//!   search, snapshotting files before changing them; [`restore_snapshot`] undoes a
//!   step (auto-revert, or rollback of a step interrupted by a crash).
//!
//! The other actions (checks, tests, context loading, terminal actions) are run by
//! the executor.

mod files;
mod read;
mod snapshot;
mod workspace;

use std::path::Path;

use agentforge_core::actions::Action;
pub use read::{read_regular_file, BoundedRead, ReadError};
pub use snapshot::{restore_snapshot, snapshot_contents, BeforeChange};
pub use workspace::{compile_protected, ProtectedGlobError, Workspace};

use agentforge_core::model::ToolSpec;
use agentforge_core::state::ActionResult;

/// An action beyond the built-in ones (a tool plugin): what the model is offered, and
/// how a call runs. The executor offers it in the phases it names (or the phase graph
/// lists), passes the call through the guards as [`Action::Extra`], and shows its output.
pub trait ExtraTool: Send + Sync {
    /// Action name.
    fn name(&self) -> &str;
    /// The tool definition sent to the model.
    fn spec(&self) -> ToolSpec;
    /// Whether it is offered in `phase`.
    fn offered_in(&self, phase: &str) -> bool;
    /// Checks the model's arguments before the call; the error is shown to the model.
    fn check_arguments(&self, args: &serde_json::Value) -> Result<(), String>;
    /// Runs it; `Err` is an error message for the model.
    fn invoke(&self, args: &serde_json::Value) -> Result<ToolOutcome, String>;
    /// Where it comes from (`plugin <name>`).
    fn source(&self) -> String;
}

/// What an [`ExtraTool`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// How it went.
    pub result: ActionResult,
    /// Its output, shown to the model.
    pub output: String,
    /// The call finishes the task (complete, with this summary): a value-loop role
    /// whose one job is a report ends with it instead of spending a model call on
    /// `complete`.
    pub completes_task: Option<String>,
}

/// Errors of the workspace and snapshot machinery (file actions themselves report
/// problems as a failed [`FileOutcome`] instead).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The workspace root is missing or not a folder.
    #[error("workspace root {path} is not usable: {reason}")]
    Root {
        /// The root as given.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A model-given path was refused by the confinement rules.
    #[error("path `{path}` refused: {reason}")]
    Refused {
        /// The path as given.
        path: String,
        /// Which rule refused it and what to use instead.
        reason: String,
    },
    /// A workspace file could not be read (not a regular file, too large, missing...).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// An I/O error on a named path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A snapshot manifest does not parse or is inconsistent.
    #[error("corrupt snapshot {path}: {message}")]
    Snapshot {
        /// The manifest.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// Outcome of a file action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    /// Success or Failure (file actions are never Partial or Skipped).
    pub result: ActionResult,
    /// One-line summary for the audit log and the next context.
    pub summary: String,
    /// What went wrong and what to do instead; shown to the model.
    pub error: Option<String>,
    /// Workspace-relative paths of files the action changed.
    pub files_changed: Vec<String>,
    /// What the model should see next step: file text with line numbers
    /// (`  12| code`), the edited region, or search hits.
    pub content: Option<String>,
    /// The edit actions' record of what happened (what changed where, why it failed),
    /// for extractors; `None` for read_file and search. Boxed: outcomes travel in
    /// `Result`s and most carry none.
    pub edit: Option<Box<agentforge_core::edit::EditRecord>>,
}

/// Executes read_file, write_file, edit_file, replace_lines or search.
///
/// Files are snapshotted into `snapshot_dir` (created when needed) before they are
/// changed; see [`restore_snapshot`]. Refused paths, missing files, ambiguous edits
/// and the like are `Failure` outcomes, never panics or errors; so are the actions
/// this function does not run (checks, tests, context loading, terminal actions).
pub fn execute_file_action(ws: &Workspace, action: &Action, snapshot_dir: &Path) -> FileOutcome {
    match action {
        Action::ReadFile {
            path,
            start_line,
            end_line,
        } => files::read_file(ws, path, *start_line, *end_line),
        Action::WriteFile { path, content } => files::write_file(ws, path, content, snapshot_dir),
        Action::EditFile {
            path,
            old_text,
            new_text,
        } => files::edit_file(ws, path, old_text, new_text, snapshot_dir),
        Action::ReplaceLines {
            path,
            start_line,
            end_line,
            new_content,
        } => files::replace_lines(ws, path, *start_line, *end_line, new_content, snapshot_dir),
        Action::Search {
            pattern,
            glob,
            path,
        } => files::search(ws, pattern, glob.as_deref(), path.as_deref()),
        other => FileOutcome {
            result: ActionResult::Failure,
            summary: format!("`{}` is not a file action", other.name()),
            error: Some(format!(
                "`{}` is not a file action: execute_file_action runs only read_file, write_file, edit_file, replace_lines and search",
                other.name()
            )),
            files_changed: Vec::new(),
            content: None,
            edit: None,
        },
    }
}

#[cfg(test)]
mod tests;
