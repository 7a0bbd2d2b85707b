//! Facts from the host's file edits: `edit_file`, `replace_lines` and `write_file`.
//!
//! The host hands each edit's record over as `details` (API 0.3.0, `kind` `"edit"`:
//! `wit/plugin.wit` documents the fields); the facts come from its fields, never from
//! the English summary the model is shown. They say what changed and where (`edited
//! src/lib.rs (lines 10-12; following lines moved by -2)`), or why the edit failed (`edit
//! failed: old text not found in src/lib.rs`), with the lines the host pointed at:
//!
//! | record | fact |
//! | --- | --- |
//! | `first_line` F, `lines_removed` O, `lines_added` N (`edit_file`, `replace_lines`) | code structure: `edited P (lines F-F+N-1; following lines moved by N-O)`, or `deleted lines ...` when N is 0 |
//! | `write_file` with `created` / without / `unchanged` | code structure: `created P (N lines)` / `rewrote P (N lines)` / `P unchanged: ...` |
//! | `error.code` `old_text_not_found` | error: `edit failed: old text not found in P`, and an inference: the lines it matches ignoring indentation, read_file's prefixes in it, or the closest line (confidence 0.7) |
//! | `ambiguous` | error: `edit failed: old text occurs N times in P (lines a, b)` |
//! | `out_of_range` | error: `edit failed: lines S-E are outside P, which has C lines` |
//! | `unreadable`, `not_replaceable` | error: `edit failed: P does not exist (did you mean Q?)`, `... is a folder`, `... is a binary file`, ... |
//! | `refused` | error: `edit refused: path P: <the rule>` |
//! | `write_failed` | error: `edit failed: could not write P; the file is unchanged` |
//! | `reverted` | error: `change to P reverted: C passed before it and failed after it` |
//!
//! An output without details (a host or a tool that words its results, `agentforge
//! extract --tool edit_file`) gets seed 000's edit rules (`Edited|Modified|Updated
//! <path>` -> `File modified: <path>`; `old_text not found` -> `Edit failed: target
//! text not found in file`).

use std::sync::OnceLock;

use agentforge_plugin_sdk::edit::{Edit, EditError, FileProblem};
use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::Regex;

/// Confidence of a guess the host offered (the line most similar to the old text).
const GUESS_CONFIDENCE: f32 = 0.7;

/// `line 5` or `lines 5-9`.
fn span(first: u64, count: u64) -> String {
    match count {
        0 | 1 => format!("line {first}"),
        n => format!("lines {first}-{}", first + n - 1),
    }
}

/// The statement of a successful edit of `count_old` lines at `first` by `count_new`.
fn edited(path: &str, first: u64, count_old: u64, count_new: u64) -> String {
    let what = if count_new == 0 {
        format!("deleted {}", span(first, count_old))
    } else {
        span(first, count_new)
    };
    let shift = count_new as i64 - count_old as i64;
    if shift == 0 {
        format!("edited {path} ({what})")
    } else {
        format!("edited {path} ({what}; following lines moved by {shift:+})")
    }
}

/// `edit` for edit_file and replace_lines, `write` for write_file.
fn verb(action: &str) -> &'static str {
    match action {
        "write_file" => "write",
        _ => "edit",
    }
}

/// What is wrong with the file, as the end of a sentence about it.
fn problem(p: &FileProblem) -> String {
    match p.reason.as_str() {
        "missing" if p.similar.is_empty() => "does not exist".to_string(),
        "missing" => format!("does not exist (did you mean {}?)", p.similar.join(", ")),
        "folder" => "is a folder".to_string(),
        "not_regular" => "is not a regular file".to_string(),
        "too_large" => "is too large for file actions".to_string(),
        "binary" => "is a binary file".to_string(),
        "not_utf8" => "is not UTF-8 text".to_string(),
        _ => match &p.message {
            Some(m) => format!("cannot be read ({m})"),
            None => "cannot be read".to_string(),
        },
    }
}

/// The facts of a failed edit.
fn failed(e: &Edit, error: &EditError, tool: &str) -> Vec<Fact> {
    let (path, verb) = (&e.path, verb(&e.action));
    let err = |s: String| vec![fact(Category::Error, s, tool)];
    match error {
        EditError::OldTextNotFound {
            indentation_match,
            line_number_prefixes,
            closest_lines,
        } => {
            let mut facts = err(format!("{verb} failed: old text not found in {path}"));
            if let Some(m) = indentation_match {
                let s = format!(
                    "the old text matches {path}:{}-{} except for indentation",
                    m.first_line, m.last_line
                );
                facts.push(fact(Category::Inference, s, tool));
            } else if *line_number_prefixes {
                let s = "the old text includes read_file's line-number prefixes (`  12| `)";
                facts.push(fact(Category::Inference, s, tool));
            } else if let Some(line) = closest_lines.first() {
                let s = format!("the intended text is probably near {path}:{line}");
                let mut f = fact(Category::Inference, s, tool);
                f.confidence = GUESS_CONFIDENCE;
                facts.push(f);
            }
            facts
        }
        EditError::Ambiguous { occurrences, lines } => {
            let mut s = format!("{verb} failed: old text occurs {occurrences} times in {path}");
            if !lines.is_empty() {
                let lines: Vec<String> = lines.iter().map(u64::to_string).collect();
                s.push_str(&format!(" (lines {})", lines.join(", ")));
            }
            err(s)
        }
        EditError::OutOfRange {
            start_line,
            end_line,
            line_count,
        } => err(format!(
            "{verb} failed: lines {start_line}-{end_line} are outside {path}, which has {line_count} lines"
        )),
        EditError::Unreadable(p) | EditError::NotReplaceable(p) => {
            err(format!("{verb} failed: {path} {}", problem(p)))
        }
        EditError::Refused { reason } => {
            // The rule, without what to do instead (after `;`): the model is shown that.
            let why = reason.split(';').next().unwrap_or("").trim();
            if why.is_empty() {
                err(format!("{verb} refused: path {path} is not allowed"))
            } else {
                err(format!("{verb} refused: path {path}: {why}"))
            }
        }
        EditError::WriteFailed { stage, .. } => err(format!(
            "{verb} failed: could not {stage} {path}; the file is unchanged"
        )),
        EditError::Other => err(format!("{verb} failed on {path}")),
    }
}

/// The facts of the host's record of an edit.
fn from_record(e: &Edit, tool: &str) -> Vec<Fact> {
    let structure = |s: String| vec![fact(Category::CodeStructure, s, tool)];
    if let Some(r) = &e.reverted {
        let s = format!(
            "change to {} reverted: {} passed before it and failed after it",
            e.path,
            r.checks.join(", ")
        );
        return vec![fact(Category::Error, s, tool)];
    }
    if let Some(error) = &e.error {
        return failed(e, error, tool);
    }
    if e.unchanged {
        return structure(format!(
            "{} unchanged: it already had the content written",
            e.path
        ));
    }
    let (Some(first), Some(added)) = (e.first_line, e.lines_added) else {
        return Vec::new();
    };
    if e.action == "write_file" {
        let how = if e.created { "created" } else { "rewrote" };
        return structure(format!("{how} {} ({added} lines)", e.path));
    }
    structure(edited(&e.path, first, e.lines_removed.unwrap_or(0), added))
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

/// Seed 000's edit rules, for outputs that come without the host's record.
fn seed_rules(input: &Input) -> Vec<Fact> {
    static SEED: OnceLock<[Regex; 2]> = OnceLock::new();
    let [modified, not_found] = SEED.get_or_init(|| {
        [
            re(r"(Edited|Modified|Updated)\s+([^\s:]+)"),
            re(r"(old_text not found|text to replace not found)"),
        ]
    });
    let mut facts = Vec::new();
    if let Some(c) = modified.captures(&input.output) {
        let s = format!("File modified: {}", &c[2]);
        facts.push(fact(Category::CodeStructure, s, &input.tool));
    }
    if not_found.is_match(&input.output) {
        let s = "Edit failed: target text not found in file";
        facts.push(fact(Category::Error, s, &input.tool));
    }
    facts
}

/// The edit extractor.
pub struct Edits;

impl Extractor for Edits {
    fn handles() -> Vec<String> {
        ["edit_file", "replace_lines", "write_file"]
            .map(String::from)
            .to_vec()
    }

    fn extract(input: Input) -> Vec<Fact> {
        match input.edit() {
            Some(edit) => from_record(&edit, &input.tool),
            None => seed_rules(&input),
        }
    }
}

export_extractor!(Edits);
