//! The file actions: read_file, write_file, edit_file, replace_lines and search.
//!
//! Every failure is a [`FileOutcome`] whose `error` tells the model what to do next;
//! none of these functions panics or returns `Err`, because a bad action is an
//! ordinary step result, not a harness failure.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use regex::RegexBuilder;

use super::read::{read_regular_file, ReadError};
use super::snapshot::{atomic_write, snapshot_files, MAX_SNAPSHOT_BYTES};
use super::{FileOutcome, ToolError, Workspace};
use agentforge_core::edit::{
    EditAction, EditError, EditRecord, FileProblem, FileProblemKind, LineSpan, WriteStage,
};
use agentforge_core::state::ActionResult;
use agentforge_core::text::cut;

/// Most search hits listed; the rest are only counted.
const MAX_SEARCH_HITS: usize = 50;
/// Longest search hit line shown, in characters.
const MAX_HIT_CHARS: usize = 200;
/// Files larger than this are skipped by search (generated or data files).
const MAX_SEARCH_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Largest file read_file, edit_file and replace_lines work on: bigger files are data
/// or generated, and their text would not fit a prompt anyway.
pub(crate) const MAX_TEXT_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// How much of a file is inspected for NUL bytes to call it binary.
const BINARY_SNIFF_BYTES: usize = 8000;
/// Lines of context shown around an edit, so the model sees the result.
const EDIT_CONTEXT_LINES: usize = 3;
/// Most lines of the edited region echoed back.
const MAX_ECHO_LINES: usize = 60;

impl FileOutcome {
    fn failure(summary: impl Into<String>, error: impl Into<String>) -> FileOutcome {
        FileOutcome {
            result: ActionResult::Failure,
            summary: summary.into(),
            error: Some(error.into()),
            files_changed: Vec::new(),
            content: None,
            edit: None,
        }
    }

    fn success(
        summary: String,
        files_changed: Vec<String>,
        content: Option<String>,
    ) -> FileOutcome {
        FileOutcome {
            result: ActionResult::Success,
            summary,
            error: None,
            files_changed,
            content,
            edit: None,
        }
    }

    /// The outcome with its edit record (none for read_file and search).
    fn with_edit(mut self, edit: Option<EditRecord>) -> FileOutcome {
        self.edit = edit.map(Box::new);
        self
    }

    /// A failed edit action: its summary and error for the model, and its record.
    fn edit_failure(
        action: EditAction,
        rel: &str,
        summary: String,
        error: String,
        why: EditError,
    ) -> FileOutcome {
        FileOutcome::failure(summary, error).with_edit(Some(EditRecord::failed(action, rel, why)))
    }
}

/// The record of a failed `action` on `rel`, when it is an edit action (read_file and
/// search share some failures, and have no record).
fn failed_edit(action: &str, rel: &str, why: impl FnOnce() -> EditError) -> Option<EditRecord> {
    EditAction::from_name(action).map(|a| EditRecord::failed(a, rel, why()))
}

/// A bounded read's failure as an edit record's [`FileProblem`].
fn problem_of(e: &ReadError) -> FileProblem {
    match e {
        ReadError::NotFound { .. } => FileProblem::new(FileProblemKind::Missing),
        ReadError::NotRegular {
            kind: "a folder", ..
        } => FileProblem::new(FileProblemKind::Folder),
        ReadError::NotRegular { .. } => FileProblem::new(FileProblemKind::NotRegular),
        ReadError::TooLarge { .. } => FileProblem::new(FileProblemKind::TooLarge),
        ReadError::Io { source, .. } => FileProblem {
            message: Some(source.to_string()),
            ..FileProblem::new(FileProblemKind::Io)
        },
    }
}

/// Resolves `rel` for reading or turns the refusal into a failed outcome.
fn resolve(ws: &Workspace, action: &str, rel: &str) -> Result<PathBuf, FileOutcome> {
    ws.resolve(rel).map_err(|e| {
        FileOutcome::failure(
            format!("{action} refused: path `{rel}` not allowed"),
            e.to_string(),
        )
    })
}

/// Resolves `rel` for writing (protected paths refused too) or turns the refusal into
/// a failed outcome.
fn resolve_for_write(ws: &Workspace, action: &str, rel: &str) -> Result<PathBuf, FileOutcome> {
    ws.resolve_for_write(rel).map_err(|e| {
        let reason = match &e {
            ToolError::Refused { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        FileOutcome::failure(
            format!("{action} refused: path `{rel}` not allowed"),
            e.to_string(),
        )
        .with_edit(failed_edit(action, rel, || EditError::Refused { reason }))
    })
}

/// Reads a workspace file as text, or explains (to the model) why not: regular files
/// of at most [`MAX_TEXT_FILE_BYTES`], not binary. Invalid UTF-8 is replaced when
/// `lossy` (showing), refused otherwise (an edit would write the replacement back).
fn read_text(
    ws: &Workspace,
    action: &str,
    rel: &str,
    abs: &Path,
    lossy: bool,
) -> Result<String, FileOutcome> {
    let fail = |error: String, problem: FileProblem| {
        FileOutcome::failure(format!("{action} failed: cannot read `{rel}`"), error)
            .with_edit(failed_edit(action, rel, || EditError::Unreadable(problem)))
    };
    match fs::metadata(abs) {
        Ok(meta) if meta.is_dir() => {
            return Err(fail(
                directory_listing(ws, rel, abs),
                FileProblem::new(FileProblemKind::Folder),
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut error = format!("`{rel}` does not exist.");
            let similar = similar_paths(ws, abs);
            if similar.is_empty() {
                error.push_str(" Use search to find the right path");
                if action != "read_file" {
                    error.push_str(", or write_file to create a new file");
                }
                error.push('.');
            } else {
                let shown: Vec<String> = similar.iter().map(|p| format!("`{p}`")).collect();
                error.push_str(&format!(" Did you mean: {}?", shown.join(", ")));
            }
            let problem = FileProblem {
                similar,
                ..FileProblem::new(FileProblemKind::Missing)
            };
            return Err(fail(error, problem));
        }
        Err(e) => {
            let problem = FileProblem {
                message: Some(e.to_string()),
                ..FileProblem::new(FileProblemKind::Io)
            };
            return Err(fail(e.to_string(), problem));
        }
    }
    let bytes = match read_regular_file(abs, MAX_TEXT_FILE_BYTES).and_then(|r| r.complete()) {
        Ok(bytes) => bytes,
        Err(e @ ReadError::TooLarge { .. }) => {
            return Err(fail(
                format!(
                    "{}; file actions work on text files of up to {} MiB",
                    e.shown_as(rel),
                    MAX_TEXT_FILE_BYTES >> 20
                ),
                FileProblem::new(FileProblemKind::TooLarge),
            ))
        }
        Err(e) => {
            let problem = problem_of(&e);
            return Err(fail(e.shown_as(rel).to_string(), problem));
        }
    };
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err(fail(
            format!(
                "`{rel}` is a binary file ({} bytes); only text files can be read or edited",
                bytes.len()
            ),
            FileProblem::new(FileProblemKind::Binary),
        ));
    }
    if lossy {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    String::from_utf8(bytes).map_err(|_| {
        fail(
            format!("`{rel}` is not UTF-8 text; only UTF-8 text files can be edited"),
            FileProblem::new(FileProblemKind::NotUtf8),
        )
    })
}

/// Up to 5 workspace files (relative paths) with the same file name as `abs`: models
/// often get the folder of a file wrong.
fn similar_paths(ws: &Workspace, abs: &Path) -> Vec<String> {
    let Some(name) = abs.file_name() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in walker(ws.root()).build().flatten().take(50_000) {
        if entry.file_type().is_some_and(|t| t.is_file()) && entry.file_name() == name {
            found.push(ws.relative(entry.path()));
            if found.len() == 5 {
                break;
            }
        }
    }
    found
}

/// The error for reading a folder: what is in it, so the next step can pick a file.
fn directory_listing(ws: &Workspace, rel: &str, abs: &Path) -> String {
    let mut names: Vec<String> = fs::read_dir(abs)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let mut n = e.file_name().to_string_lossy().into_owned();
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        n.push('/');
                    }
                    n
                })
                .filter(|n| ws.resolve(&format!("{rel}/{n}")).is_ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let more = names.len().saturating_sub(50);
    names.truncate(50);
    let mut text = format!(
        "`{rel}` is a folder, not a file; it contains: {}",
        names.join(", ")
    );
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// Lines with their terminators, so that joining them gives the file back exactly.
fn split_lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// `  12| code` lines for `lines[from..to]` (0-based, exclusive end), numbered from
/// `from + 1`. The number column is as wide as the file's largest line number, at
/// least 4, so columns line up.
fn numbered(lines: &[&str], from: usize, to: usize) -> String {
    let width = lines.len().to_string().len().max(4);
    let shown = &lines[from..to];
    let mut out = String::with_capacity(
        shown.iter().map(|l| l.len()).sum::<usize>() + shown.len() * (width + 3),
    );
    for (i, line) in shown.iter().enumerate() {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        // Every line of every file read, every step: no formatting machinery.
        agentforge_core::text::push_right_aligned(&mut out, from + i + 1, width);
        out.push_str("| ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The edited region (0-based `from..to` in the new file) with a few lines around it.
fn echo_region(text: &str, from: usize, to: usize) -> String {
    let lines = split_lines(text);
    let start = from.saturating_sub(EDIT_CONTEXT_LINES);
    let end = (to + EDIT_CONTEXT_LINES).min(lines.len());
    if end <= start {
        return "(file is now empty)\n".to_string();
    }
    if end - start > MAX_ECHO_LINES {
        let mut out = numbered(&lines, start, start + MAX_ECHO_LINES);
        out.push_str(&format!(
            "... ({} more lines; use read_file to see them)\n",
            end - start - MAX_ECHO_LINES
        ));
        return out;
    }
    numbered(&lines, start, end)
}

/// `\r\n` when the file uses Windows line endings, so inserted text matches them.
fn line_ending(text: &str) -> &'static str {
    if text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

fn to_line_ending(text: &str, eol: &str) -> String {
    if eol == "\r\n" {
        text.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        text.to_string()
    }
}

/// Folders between the workspace and `abs` that do not exist yet (outermost first).
fn missing_parents(ws: &Workspace, abs: &Path) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    let mut dir = abs.parent();
    while let Some(d) = dir {
        if d == ws.root() || !d.starts_with(ws.root()) || d.exists() {
            break;
        }
        missing.push(d.to_path_buf());
        dir = d.parent();
    }
    missing.reverse();
    missing
}

/// Snapshots `abs`, creates its folder and writes `content` atomically.
fn commit(
    ws: &Workspace,
    action: &str,
    rel: &str,
    abs: &Path,
    content: &str,
    snapshot_dir: &Path,
) -> Result<(), FileOutcome> {
    let created = missing_parents(ws, abs);
    let failed = |stage: WriteStage, message: String| {
        failed_edit(action, rel, || EditError::WriteFailed { stage, message })
    };
    snapshot_files(ws, snapshot_dir, &[abs], &created).map_err(|e| {
        FileOutcome::failure(
            format!("{action} failed: could not snapshot `{rel}`; nothing was changed"),
            e.to_string(),
        )
        .with_edit(failed(WriteStage::Snapshot, e.to_string()))
    })?;
    let fail = |e: io::Error| {
        FileOutcome::failure(
            format!("{action} failed: could not write `{rel}`"),
            e.to_string(),
        )
        .with_edit(failed(WriteStage::Write, e.to_string()))
    };
    if let Some(parent) = abs.parent() {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    atomic_write(abs, content.as_bytes(), None).map_err(fail)
}

/// read_file.
pub(crate) fn read_file(
    ws: &Workspace,
    rel: &str,
    start_line: Option<usize>,
    end_line: Option<usize>,
) -> FileOutcome {
    let abs = match resolve(ws, "read_file", rel) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let text = match read_text(ws, "read_file", rel, &abs, true) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let lines = split_lines(&text);
    let count = lines.len();
    if count == 0 {
        return FileOutcome::success(
            format!("read {rel}: empty file"),
            Vec::new(),
            Some("(empty file)\n".to_string()),
        );
    }
    let start = start_line.unwrap_or(1).max(1);
    if start > count {
        return FileOutcome::failure(
            format!("read_file failed: `{rel}` has only {count} lines"),
            format!("start_line {start} is past the end of `{rel}`, which has {count} lines; use a start_line between 1 and {count}"),
        );
    }
    let end = end_line.unwrap_or(count).min(count);
    let summary = if start == 1 && end == count {
        format!("read {rel} ({count} lines)")
    } else {
        format!("read {rel} lines {start}-{end} of {count}")
    };
    FileOutcome::success(summary, Vec::new(), Some(numbered(&lines, start - 1, end)))
}

/// write_file.
pub(crate) fn write_file(
    ws: &Workspace,
    rel: &str,
    content: &str,
    snapshot_dir: &Path,
) -> FileOutcome {
    let abs = match resolve_for_write(ws, "write_file", rel) {
        Ok(p) => p,
        Err(o) => return o,
    };
    // What is there now: nothing, a regular file (its content, when small enough to
    // compare), or something that must not be replaced (a folder, a FIFO, a device).
    let previous: Option<Option<Vec<u8>>> = match read_regular_file(&abs, MAX_SNAPSHOT_BYTES) {
        Ok(r) if r.truncated => Some(None),
        Ok(r) => Some(Some(r.bytes)),
        Err(ReadError::NotFound { .. }) => None,
        Err(
            e @ ReadError::NotRegular {
                kind: "a folder", ..
            },
        ) => {
            return FileOutcome::edit_failure(
                EditAction::WriteFile,
                rel,
                format!("write_file failed: `{rel}` is a folder"),
                format!("`{rel}` is a folder; give the path of a file inside it"),
                EditError::NotReplaceable(problem_of(&e)),
            )
        }
        Err(e) => {
            let problem = problem_of(&e);
            return FileOutcome::edit_failure(
                EditAction::WriteFile,
                rel,
                format!("write_file failed: cannot replace `{rel}`"),
                format!(
                    "{}; write_file replaces regular files only",
                    e.shown_as(rel)
                ),
                EditError::NotReplaceable(problem),
            );
        }
    };
    if previous.as_ref().and_then(Option::as_deref) == Some(content.as_bytes()) {
        return FileOutcome::success(
            format!("write_file: `{rel}` already has this content; nothing changed"),
            Vec::new(),
            None,
        )
        .with_edit(Some(EditRecord::unchanged(rel)));
    }
    if let Err(o) = commit(ws, "write_file", rel, &abs, content, snapshot_dir) {
        return o;
    }
    let lines = split_lines(content).len();
    let (how, old_lines) = match &previous {
        Some(Some(old)) => (
            "overwrote",
            Some(split_lines(&String::from_utf8_lossy(old)).len()),
        ),
        // Too large to read first: how many lines it had is not known.
        Some(None) => ("overwrote", None),
        None => ("created", Some(0)),
    };
    let mut record = EditRecord::changed(
        EditAction::WriteFile,
        rel,
        1,
        old_lines.map(|n| n as u64),
        lines as u64,
    );
    record.created = previous.is_none();
    FileOutcome::success(
        format!("{how} {rel} ({lines} lines, {} bytes)", content.len()),
        vec![ws.relative(&abs)],
        None,
    )
    .with_edit(Some(record))
}

/// Byte offsets of every (possibly overlapping) occurrence of `needle`.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = haystack[from..].find(needle) {
        let at = from + pos;
        found.push(at);
        // Advance by one character (not byte) to stay on a char boundary.
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
        if from >= haystack.len() {
            break;
        }
    }
    found
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// edit_file.
pub(crate) fn edit_file(
    ws: &Workspace,
    rel: &str,
    old_text: &str,
    new_text: &str,
    snapshot_dir: &Path,
) -> FileOutcome {
    let abs = match resolve_for_write(ws, "edit_file", rel) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let text = match read_text(ws, "edit_file", rel, &abs, false) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let mut old = old_text.to_string();
    let mut new = new_text.to_string();
    let mut hits = occurrences(&text, &old);
    // Models write `\n`; a CRLF file would never match. Converting both sides keeps
    // the file's line endings consistent.
    if hits.is_empty() && line_ending(&text) == "\r\n" && !old.contains('\r') {
        old = to_line_ending(&old, "\r\n");
        new = to_line_ending(&new, "\r\n");
        hits = occurrences(&text, &old);
    }
    match hits.len() {
        0 => {
            let (hint, why) = not_found_hint(&text, old_text, rel);
            FileOutcome::edit_failure(
                EditAction::EditFile,
                rel,
                format!("edit_file failed: old_text not found in `{rel}`"),
                hint,
                why,
            )
        }
        1 => {
            let at = hits[0];
            let updated = format!("{}{}{}", &text[..at], new, &text[at + old.len()..]);
            if let Err(o) = commit(ws, "edit_file", rel, &abs, &updated, snapshot_dir) {
                return o;
            }
            let first = line_of(&text, at);
            let old_lines = split_lines(&old).len().max(1);
            let new_lines = split_lines(&new).len();
            let new_end = if new.is_empty() {
                first - 1
            } else {
                line_of(&updated, at + new.len().saturating_sub(1))
            };
            FileOutcome::success(
                format!(
                    "edited {rel}: replaced {old_lines} line(s) at line {first} with {new_lines} line(s)"
                ),
                vec![ws.relative(&abs)],
                Some(echo_region(&updated, first - 1, new_end)),
            )
            .with_edit(Some(EditRecord::changed(
                EditAction::EditFile,
                rel,
                first as u64,
                Some(old_lines as u64),
                new_lines as u64,
            )))
        }
        n => {
            let lines: Vec<u64> = hits
                .iter()
                .take(10)
                .map(|&h| line_of(&text, h) as u64)
                .collect();
            let shown: Vec<String> = lines.iter().map(u64::to_string).collect();
            FileOutcome::edit_failure(
                EditAction::EditFile,
                rel,
                format!("edit_file failed: old_text occurs {n} times in `{rel}`"),
                format!(
                    "old_text occurs {n} times in `{rel}` (at lines {}); include more surrounding lines in old_text so it matches exactly once, or use replace_lines",
                    shown.join(", ")
                ),
                EditError::Ambiguous {
                    occurrences: n as u64,
                    lines,
                },
            )
        }
    }
}

/// Why `old_text` did not match and where the intended text probably is: the hint for
/// the model, and the same as the record's error.
fn not_found_hint(text: &str, old_text: &str, rel: &str) -> (String, EditError) {
    let prefix = regex::Regex::new(r"^\s*\d+\| ").expect("valid regex");
    let mut hint = format!(
        "old_text was not found in `{rel}`; it must match the file exactly, including whitespace."
    );
    let why = |indentation_match: Option<LineSpan>, prefixes: bool, closest: &[(f64, usize)]| {
        EditError::OldTextNotFound {
            indentation_match,
            line_number_prefixes: prefixes,
            closest_lines: closest.iter().map(|(_, i)| *i as u64 + 1).collect(),
        }
    };
    if old_text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .all(|l| prefix.is_match(l))
    {
        hint.push_str(
            " old_text contains the `  12| ` line-number prefixes of read_file output; remove them.",
        );
        return (hint, why(None, true, &[]));
    }
    let file_lines: Vec<&str> = text.lines().collect();
    let wanted: Vec<&str> = old_text.lines().map(str::trim).collect();
    let wanted: Vec<&str> = {
        // Blank lines at the edges carry no information about the location.
        let start = wanted.iter().position(|l| !l.is_empty()).unwrap_or(0);
        let end = wanted
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |e| e + 1);
        wanted[start..end.max(start)].to_vec()
    };
    if !wanted.is_empty() && wanted.len() <= file_lines.len() {
        for start in 0..=(file_lines.len() - wanted.len()) {
            let window = &file_lines[start..start + wanted.len()];
            if window.iter().zip(&wanted).all(|(a, b)| a.trim() == *b) {
                let lines = split_lines(text);
                let end = (start + wanted.len()).min(start + 10);
                hint.push_str(&format!(
                    " It matches lines {}-{} if indentation is ignored; copy the exact whitespace from these lines:\n{}",
                    start + 1,
                    start + wanted.len(),
                    numbered(&lines, start, end)
                ));
                let span = LineSpan {
                    first_line: start as u64 + 1,
                    last_line: (start + wanted.len()) as u64,
                };
                return (hint, why(Some(span), false, &[]));
            }
        }
    }
    let Some(first) = wanted.first().filter(|l| !l.is_empty()) else {
        hint.push_str(" Read the file first.");
        return (hint, why(None, false, &[]));
    };
    let target = bigrams(first);
    let mut scored: Vec<(f64, usize)> = file_lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (dice(&target, &bigrams(l.trim())), i))
        .filter(|(s, _)| *s >= 0.5)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(3);
    if scored.is_empty() {
        hint.push_str(" No similar line exists; read the file first to see its current content.");
    } else {
        hint.push_str(" Closest lines to the first line of old_text:\n");
        for (_, i) in &scored {
            let line = file_lines[*i];
            let shown: String = line.chars().take(MAX_HIT_CHARS).collect();
            hint.push_str(&format!("{:>4}| {shown}\n", i + 1));
        }
        hint.push_str("Read the file around them and copy old_text exactly.");
    }
    (hint, why(None, false, &scored))
}

/// Character bigrams with counts, for a cheap similarity score.
fn bigrams(s: &str) -> HashMap<(char, char), usize> {
    let chars: Vec<char> = s.chars().collect();
    let mut map = HashMap::new();
    for pair in chars.windows(2) {
        *map.entry((pair[0], pair[1])).or_insert(0) += 1;
    }
    map
}

/// Sørensen–Dice coefficient of two bigram multisets (1.0 = same bigrams).
fn dice(a: &HashMap<(char, char), usize>, b: &HashMap<(char, char), usize>) -> f64 {
    let total: usize = a.values().sum::<usize>() + b.values().sum::<usize>();
    if total == 0 {
        return 0.0;
    }
    let common: usize = a
        .iter()
        .map(|(k, n)| (*n).min(b.get(k).copied().unwrap_or(0)))
        .sum();
    2.0 * common as f64 / total as f64
}

/// replace_lines.
pub(crate) fn replace_lines(
    ws: &Workspace,
    rel: &str,
    start_line: usize,
    end_line: usize,
    new_content: &str,
    snapshot_dir: &Path,
) -> FileOutcome {
    let abs = match resolve_for_write(ws, "replace_lines", rel) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let text = match read_text(ws, "replace_lines", rel, &abs, false) {
        Ok(t) => t,
        Err(o) => return o,
    };
    let lines = split_lines(&text);
    let count = lines.len();
    if start_line == 0 || start_line > end_line || end_line > count {
        let hint = if count == 0 {
            "it is empty; use write_file to give it content".to_string()
        } else {
            format!("start_line and end_line must be between 1 and {count}, with start_line <= end_line")
        };
        return FileOutcome::edit_failure(
            EditAction::ReplaceLines,
            rel,
            format!("replace_lines failed: lines {start_line}-{end_line} are outside `{rel}` ({count} lines)"),
            format!("`{rel}` has {count} lines; {hint}"),
            EditError::OutOfRange {
                start_line: start_line as u64,
                end_line: end_line as u64,
                line_count: count as u64,
            },
        );
    }
    let eol = line_ending(&text);
    let mut replacement = to_line_ending(new_content, eol);
    // Keep the line structure: the replaced block ended with a line break, so must
    // its replacement, or it would merge with the next line.
    if !replacement.is_empty()
        && !replacement.ends_with('\n')
        && lines[end_line - 1].ends_with('\n')
    {
        replacement.push_str(eol);
    }
    let updated = format!(
        "{}{}{}",
        lines[..start_line - 1].concat(),
        replacement,
        lines[end_line..].concat()
    );
    if let Err(o) = commit(ws, "replace_lines", rel, &abs, &updated, snapshot_dir) {
        return o;
    }
    let new_count = split_lines(&replacement).len();
    FileOutcome::success(
        format!("replaced lines {start_line}-{end_line} of {rel} with {new_count} line(s)",),
        vec![ws.relative(&abs)],
        Some(echo_region(
            &updated,
            start_line - 1,
            start_line - 1 + new_count,
        )),
    )
    .with_edit(Some(EditRecord::changed(
        EditAction::ReplaceLines,
        rel,
        start_line as u64,
        Some((end_line + 1 - start_line) as u64),
        new_count as u64,
    )))
}

/// A gitignore-aware walker over the workspace that never enters `.git` or
/// `.agentforge` and does not follow symlinks (they could lead outside).
fn walker(root: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| {
            let name = entry.file_name().to_string_lossy();
            !(name.eq_ignore_ascii_case(".git") || name.eq_ignore_ascii_case(".agentforge"))
        });
    builder
}

/// search.
pub(crate) fn search(
    ws: &Workspace,
    pattern: &str,
    glob: Option<&str>,
    path: Option<&str>,
) -> FileOutcome {
    let regex = match RegexBuilder::new(pattern).size_limit(10 * 1024 * 1024).build() {
        Ok(r) => r,
        Err(e) => {
            return FileOutcome::failure(
                "search failed: invalid regex",
                format!(
                    "invalid regex `{pattern}`: {e}\nEscape special characters such as ( ) [ ] {{ }} . * + ? | with a backslash to match them literally."
                ),
            )
        }
    };
    let glob = match glob {
        None => None,
        Some(g) => match GlobBuilder::new(g).literal_separator(false).build() {
            Ok(glob) => Some(glob.compile_matcher()),
            Err(e) => {
                return FileOutcome::failure(
                    "search failed: invalid glob",
                    format!("invalid glob `{g}`: {e}; use e.g. `*.rs` or `src/**/*.py`"),
                )
            }
        },
    };
    let scope = match path {
        None => ws.root().to_path_buf(),
        Some(rel) => {
            let abs = match resolve(ws, "search", rel) {
                Ok(p) => p,
                Err(o) => return o,
            };
            if !abs.exists() {
                return FileOutcome::failure(
                    format!("search failed: `{rel}` does not exist"),
                    format!("search path `{rel}` does not exist; omit `path` to search the whole workspace"),
                );
            }
            abs
        }
    };

    let mut hits = Vec::new();
    let mut total = 0usize;
    let mut files_with_hits = 0usize;
    // Walk from the root even for a narrower scope, so the root's ignore files
    // apply; prune everything that is neither inside nor above the scope.
    let mut builder = walker(ws.root());
    let scope_filter = scope.clone();
    let root = ws.root().to_path_buf();
    builder.filter_entry(move |entry| {
        let p = entry.path();
        let name = entry.file_name().to_string_lossy();
        let protected = p != root
            && (name.eq_ignore_ascii_case(".git") || name.eq_ignore_ascii_case(".agentforge"));
        !protected && (p.starts_with(&scope_filter) || scope_filter.starts_with(p))
    });
    for entry in builder.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) || !entry.path().starts_with(&scope) {
            continue;
        }
        let rel = ws.relative(entry.path());
        if let Some(glob) = &glob {
            let file_name = entry.file_name();
            if !glob.is_match(&rel) && !glob.is_match(file_name) {
                continue;
            }
        }
        if entry
            .metadata()
            .is_ok_and(|m| m.len() > MAX_SEARCH_FILE_BYTES)
        {
            continue;
        }
        let bytes = match read_regular_file(entry.path(), MAX_SEARCH_FILE_BYTES) {
            Ok(r) if !r.truncated => r.bytes,
            // Grown past the cap since the size check, or not a regular file after all.
            _ => continue,
        };
        if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut file_hit = false;
        for (i, line) in text.lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            file_hit = true;
            total += 1;
            if hits.len() < MAX_SEARCH_HITS {
                hits.push(format!(
                    "{rel}:{}: {}",
                    i + 1,
                    cut(line.trim(), MAX_HIT_CHARS - 1)
                ));
            }
        }
        files_with_hits += usize::from(file_hit);
    }

    let scope_text = match path {
        Some(p) => format!(" in {p}"),
        None => String::new(),
    };
    if total == 0 {
        return FileOutcome::success(
            format!("search /{pattern}/{scope_text}: no matches"),
            Vec::new(),
            Some("no matches\n".to_string()),
        );
    }
    let mut content = hits.join("\n");
    content.push('\n');
    if total > hits.len() {
        content.push_str(&format!(
            "... and {} more matches (narrow the search with `path` or `glob`)\n",
            total - hits.len()
        ));
    }
    FileOutcome::success(
        format!("search /{pattern}/{scope_text}: {total} matches in {files_with_hits} files"),
        Vec::new(),
        Some(content),
    )
}

#[cfg(test)]
mod edit_records {
    //! The edit record each file action leaves beside its summary.

    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        fs::write(
            dir.path().join("src/lib.rs"),
            "fn alpha() {\n    let x = 1;\n    x + 1\n}\n\nfn beta() {\n    let x = 1;\n    x * 2\n}\n",
        )
        .unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    fn error_of(o: &FileOutcome) -> EditError {
        let r = o.edit.as_ref().expect("an edit record");
        assert_eq!(r.first_line, None, "{r:?}");
        r.error.clone().expect("an error")
    }

    #[test]
    fn successful_edits_record_where_and_how_many_lines() {
        let (dir, ws) = workspace();
        let snap = dir.path().join(".snap");
        let o = edit_file(
            &ws,
            "src/lib.rs",
            "    x + 1\n",
            "    let y = x + 1;\n    y\n",
            &snap,
        );
        let expected = EditRecord::changed(EditAction::EditFile, "src/lib.rs", 3, Some(1), 2);
        assert_eq!(o.edit.as_deref(), Some(&expected));
        let o = replace_lines(
            &ws,
            "src/lib.rs",
            7,
            10,
            "fn beta() -> i32 {\n    2\n}\n",
            &snap,
        );
        let expected = EditRecord::changed(EditAction::ReplaceLines, "src/lib.rs", 7, Some(4), 3);
        assert_eq!(o.edit.as_deref(), Some(&expected));
        let o = write_file(&ws, "src/new.rs", "a\nb\n", &snap);
        let mut created = EditRecord::changed(EditAction::WriteFile, "src/new.rs", 1, Some(0), 2);
        created.created = true;
        assert_eq!(o.edit.as_deref(), Some(&created));
        let o = write_file(&ws, "src/new.rs", "a\n", &snap);
        let expected = EditRecord::changed(EditAction::WriteFile, "src/new.rs", 1, Some(2), 1);
        assert_eq!(o.edit.as_deref(), Some(&expected));
        let o = write_file(&ws, "src/new.rs", "a\n", &snap);
        assert_eq!(
            o.edit.as_deref(),
            Some(&EditRecord::unchanged("src/new.rs"))
        );
    }

    #[test]
    fn failed_edits_record_why_with_the_lines_the_hint_names() {
        let (dir, ws) = workspace();
        let snap = dir.path().join(".snap");
        let o = edit_file(
            &ws,
            "src/lib.rs",
            "    let x = 1;\n",
            "    let x = 2;\n",
            &snap,
        );
        assert_eq!(
            error_of(&o),
            EditError::Ambiguous {
                occurrences: 2,
                lines: vec![2, 7]
            }
        );
        let o = edit_file(&ws, "src/lib.rs", "fn beta() {\nlet x = 1;\n", "x", &snap);
        assert_eq!(
            error_of(&o),
            EditError::OldTextNotFound {
                indentation_match: Some(LineSpan {
                    first_line: 6,
                    last_line: 7
                }),
                line_number_prefixes: false,
                closest_lines: vec![],
            }
        );
        let o = edit_file(&ws, "src/lib.rs", "    x * 3\n", "x", &snap);
        let EditError::OldTextNotFound { closest_lines, .. } = error_of(&o) else {
            panic!("{o:?}")
        };
        assert_eq!(closest_lines.first(), Some(&8));
        assert!(o.error.unwrap().contains(&format!("{:>4}| ", 8)));
        let o = edit_file(&ws, "src/lib.rs", "   3|     x + 1\n", "x", &snap);
        assert!(matches!(
            error_of(&o),
            EditError::OldTextNotFound {
                line_number_prefixes: true,
                ..
            }
        ));
        let o = replace_lines(&ws, "src/lib.rs", 40, 42, "x", &snap);
        assert_eq!(
            error_of(&o),
            EditError::OutOfRange {
                start_line: 40,
                end_line: 42,
                line_count: 9
            }
        );
        let o = edit_file(&ws, "lib.rs", "a", "b", &snap);
        assert_eq!(
            error_of(&o),
            EditError::Unreadable(FileProblem {
                reason: FileProblemKind::Missing,
                similar: vec!["src/lib.rs".into()],
                message: None,
            })
        );
        assert!(o.error.unwrap().contains("Did you mean: `src/lib.rs`?"));
        let o = edit_file(&ws, "src", "a", "b", &snap);
        assert_eq!(
            error_of(&o),
            EditError::Unreadable(FileProblem::new(FileProblemKind::Folder))
        );
        let o = write_file(&ws, "src", "b", &snap);
        assert_eq!(
            error_of(&o),
            EditError::NotReplaceable(FileProblem::new(FileProblemKind::Folder))
        );
        let o = edit_file(&ws, "../outside.rs", "a", "b", &snap);
        let EditError::Refused { reason } = error_of(&o) else {
            panic!("{o:?}")
        };
        assert!(
            reason.starts_with("`..` leads outside the workspace root"),
            "{reason}"
        );
        fs::write(dir.path().join("src/data.bin"), b"a\0b").unwrap();
        let o = replace_lines(&ws, "src/data.bin", 1, 1, "x", &snap);
        assert_eq!(
            error_of(&o),
            EditError::Unreadable(FileProblem::new(FileProblemKind::Binary))
        );
    }

    #[test]
    fn reads_and_searches_have_no_edit_record() {
        let (_dir, ws) = workspace();
        assert!(read_file(&ws, "src/lib.rs", None, None).edit.is_none());
        assert!(read_file(&ws, "missing.rs", None, None).edit.is_none());
        assert!(search(&ws, "alpha", None, None).edit.is_none());
    }
}
