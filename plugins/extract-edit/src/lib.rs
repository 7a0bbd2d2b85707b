//! Facts from the host's file edits: `edit_file`, `replace_lines` and `write_file`.
//!
//! The output read is the action's result as the host words it (host/store/src/tools/files.rs):
//! the one-line summary, then the error explaining a failure (its hints name lines). The
//! facts say what changed and where (`edited src/lib.rs (lines 10-12; following lines
//! moved by -2)`), or why the edit failed (`edit failed: old text not found in
//! src/lib.rs`), with the lines the host pointed at:
//!
//! | host summary (files.rs) | fact |
//! | --- | --- |
//! | `edited P: replaced O line(s) at line F with N line(s)` | code structure: `edited P (lines F-F+N-1)` |
//! | `replaced lines S-E of P with N line(s)` | code structure: `edited P (lines S-S+N-1)` |
//! | `created P (L lines, B bytes)` / `overwrote P (...)` | code structure: `created P (L lines)` / `rewrote P (L lines)` |
//! | `write_file: `P` already has this content; nothing changed` | code structure: `P unchanged: ...` |
//! | `edit_file failed: old_text not found in `P`` | error: `edit failed: old text not found in P`, and an inference from the hint (the lines it matches ignoring indentation, the closest line, read_file prefixes) |
//! | `edit_file failed: old_text occurs N times in `P`` | error: `edit failed: old text occurs N times in P (lines a, b)` |
//! | `replace_lines failed: lines S-E are outside `P` (C lines)` | error |
//! | `A failed: cannot read `P`` (missing, folder, binary, not UTF-8), `A refused: path `P` not allowed`, `A failed: could not write/snapshot `P`` | error, with the reason |
//! | the executor's `reverted: C passed before this change and failed after it` | error: `change reverted: ...` |
//!
//! When none of these matches, seed 000's edit rules apply (`Edited|Modified|Updated
//! <path>` -> `File modified: <path>`; `old_text not found` -> `Edit failed: target
//! text not found in file`), for other tools worded that way.

use std::sync::OnceLock;

use agentforge_plugin_sdk::{export_extractor, fact, Category, Extractor, Fact, Input};
use regex::{Captures, Regex};

/// Confidence of a guess the host offered (the line most similar to the old text).
const GUESS_CONFIDENCE: f32 = 0.7;

/// One host format: a pattern and the facts a match gives.
struct Form {
    pattern: Regex,
    facts: fn(&Captures, &Input) -> Vec<Fact>,
}

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
        "read_file" => "read",
        _ => "edit",
    }
}

fn num(c: &Captures, name: &str) -> u64 {
    c.name(name)
        .and_then(|m| m.as_str().parse().ok())
        .unwrap_or(0)
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("valid regex")
}

fn forms() -> &'static [Form] {
    static FORMS: OnceLock<Vec<Form>> = OnceLock::new();
    FORMS.get_or_init(|| {
        vec![
            // files.rs edit_file: "edited {rel}: replaced {old_lines} line(s) at line {first} with {new_lines} line(s)"
            Form {
                pattern: re(
                    r"(?m)^edited (?P<path>.+?): replaced (?P<old>\d+) line\(s\) at line (?P<first>\d+) with (?P<new>\d+) line\(s\)",
                ),
                facts: |c, i| {
                    let s = edited(&c["path"], num(c, "first"), num(c, "old"), num(c, "new"));
                    vec![fact(Category::CodeStructure, s, &i.tool)]
                },
            },
            // files.rs replace_lines: "replaced lines {start}-{end} of {rel} with {new_count} line(s)"
            Form {
                pattern: re(
                    r"(?m)^replaced lines (?P<start>\d+)-(?P<end>\d+) of (?P<path>.+?) with (?P<new>\d+) line\(s\)",
                ),
                facts: |c, i| {
                    let (start, end) = (num(c, "start"), num(c, "end"));
                    let old = (end + 1).saturating_sub(start);
                    let s = edited(&c["path"], start, old, num(c, "new"));
                    vec![fact(Category::CodeStructure, s, &i.tool)]
                },
            },
            // files.rs write_file: "{created|overwrote} {rel} ({lines} lines, {bytes} bytes)"
            Form {
                pattern: re(
                    r"(?m)^(?P<how>created|overwrote) (?P<path>.+?) \((?P<lines>\d+) lines, \d+ bytes\)",
                ),
                facts: |c, i| {
                    let how = if &c["how"] == "created" {
                        "created"
                    } else {
                        "rewrote"
                    };
                    let s = format!("{how} {} ({} lines)", &c["path"], &c["lines"]);
                    vec![fact(Category::CodeStructure, s, &i.tool)]
                },
            },
            // files.rs write_file: "write_file: `{rel}` already has this content; nothing changed"
            Form {
                pattern: re(r"(?m)^write_file: `(?P<path>[^`]+)` already has this content"),
                facts: |c, i| {
                    let s = format!(
                        "{} unchanged: it already had the content written",
                        &c["path"]
                    );
                    vec![fact(Category::CodeStructure, s, &i.tool)]
                },
            },
            // files.rs edit_file: "edit_file failed: old_text not found in `{rel}`", then
            // not_found_hint's error.
            Form {
                pattern: re(r"(?m)^(?P<action>\w+) failed: old_text not found in `(?P<path>[^`]+)`"),
                facts: |c, i| {
                    let path = &c["path"];
                    let mut facts = vec![fact(
                        Category::Error,
                        format!("{} failed: old text not found in {path}", verb(&c["action"])),
                        &i.tool,
                    )];
                    facts.extend(not_found_hint(&i.output, path, &i.tool));
                    facts
                },
            },
            // files.rs edit_file: "edit_file failed: old_text occurs {n} times in `{rel}`",
            // error "... (at lines 3, 9); ..."
            Form {
                pattern: re(
                    r"(?m)^(?P<action>\w+) failed: old_text occurs (?P<n>\d+) times in `(?P<path>[^`]+)`",
                ),
                facts: |c, i| {
                    let mut s = format!(
                        "{} failed: old text occurs {} times in {}",
                        verb(&c["action"]),
                        &c["n"],
                        &c["path"]
                    );
                    static AT: OnceLock<Regex> = OnceLock::new();
                    let at = AT.get_or_init(|| re(r"\(at lines ([\d, ]+)\)"));
                    if let Some(lines) = at.captures(&i.output) {
                        s.push_str(&format!(" (lines {})", lines[1].trim()));
                    }
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // files.rs replace_lines: "replace_lines failed: lines {s}-{e} are outside `{rel}` ({count} lines)"
            Form {
                pattern: re(
                    r"(?m)^(?P<action>\w+) failed: lines (?P<start>\d+)-(?P<end>\d+) are outside `(?P<path>[^`]+)` \((?P<count>\d+) lines\)",
                ),
                facts: |c, i| {
                    let s = format!(
                        "{} failed: lines {}-{} are outside {}, which has {} lines",
                        verb(&c["action"]),
                        &c["start"],
                        &c["end"],
                        &c["path"],
                        &c["count"]
                    );
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // files.rs read_text: "{action} failed: cannot read `{rel}`", the error says why.
            Form {
                pattern: re(r"(?m)^(?P<action>\w+) failed: cannot read `(?P<path>[^`]+)`"),
                facts: |c, i| {
                    let why = cannot_read_reason(&i.output, &c["path"]);
                    let s = format!("{} failed: {} {why}", verb(&c["action"]), &c["path"]);
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // files.rs write_file: "write_file failed: `{rel}` is a folder"
            Form {
                pattern: re(r"(?m)^(?P<action>\w+) failed: `(?P<path>[^`]+)` is a folder"),
                facts: |c, i| {
                    let s = format!(
                        "{} failed: {} is a folder",
                        verb(&c["action"]),
                        &c["path"]
                    );
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // files.rs resolve: "{action} refused: path `{rel}` not allowed", error
            // "path `{rel}` refused: {reason}" (workspace.rs).
            Form {
                pattern: re(r"(?m)^(?P<action>\w+) refused: path `(?P<path>[^`]*)` not allowed"),
                facts: |c, i| {
                    static WHY: OnceLock<Regex> = OnceLock::new();
                    let why = WHY.get_or_init(|| re(r"path `[^`]*` refused: ([^;\n]+)"));
                    let mut s = format!("{} refused: path {}", verb(&c["action"]), &c["path"]);
                    match why.captures(&i.output) {
                        Some(r) => s.push_str(&format!(": {}", r[1].trim())),
                        None => s.push_str(" is not allowed"),
                    }
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // files.rs commit: "{action} failed: could not {snapshot|write} `{rel}`"
            Form {
                pattern: re(
                    r"(?m)^(?P<action>\w+) failed: could not (?P<what>snapshot|write) `(?P<path>[^`]+)`",
                ),
                facts: |c, i| {
                    let s = format!(
                        "{} failed: could not {} {}; the file is unchanged",
                        verb(&c["action"]),
                        &c["what"],
                        &c["path"]
                    );
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
            // executor.rs auto-revert: "reverted: {checks} passed before this change and
            // failed after it; the change was undone"
            Form {
                pattern: re(
                    r"(?m)^reverted: (?P<checks>.+?) passed before this change and failed after it",
                ),
                facts: |c, i| {
                    let s = format!(
                        "change reverted: {} passed before it and failed after it",
                        &c["checks"]
                    );
                    vec![fact(Category::Error, s, &i.tool)]
                },
            },
        ]
    })
}

/// What not_found_hint (files.rs) pointed at: lines matching without indentation, the
/// read_file line-number prefixes, or the lines closest to the old text's first line.
fn not_found_hint(output: &str, path: &str, tool: &str) -> Vec<Fact> {
    static HINTS: OnceLock<[Regex; 3]> = OnceLock::new();
    let [indent, prefixes, closest] = HINTS.get_or_init(|| {
        [
            re(r"It matches lines (\d+)-(\d+) if indentation is ignored"),
            re(r"old_text contains the `\s*12\| ` line-number prefixes"),
            re(r"Closest lines to the first line of old_text:\n\s*(\d+)\| "),
        ]
    });
    if let Some(c) = indent.captures(output) {
        let s = format!(
            "the old text matches {path}:{}-{} except for indentation",
            &c[1], &c[2]
        );
        return vec![fact(Category::Inference, s, tool)];
    }
    if prefixes.is_match(output) {
        let s = "the old text includes read_file's line-number prefixes (`  12| `)";
        return vec![fact(Category::Inference, s, tool)];
    }
    if let Some(c) = closest.captures(output) {
        let mut f = fact(
            Category::Inference,
            format!("the intended text is probably near {path}:{}", &c[1]),
            tool,
        );
        f.confidence = GUESS_CONFIDENCE;
        return vec![f];
    }
    Vec::new()
}

/// Why read_text (files.rs) could not read `path`, from its error.
fn cannot_read_reason(output: &str, path: &str) -> String {
    static MEAN: OnceLock<Regex> = OnceLock::new();
    let mean = MEAN.get_or_init(|| re(r"Did you mean: ([^?\n]+)\?"));
    if output.contains("does not exist") {
        return match mean.captures(output) {
            Some(c) => format!("does not exist (did you mean {}?)", c[1].replace('`', "")),
            None => "does not exist".to_string(),
        };
    }
    for (marker, why) in [
        ("is a folder, not a file", "is a folder"),
        ("is a binary file", "is a binary file"),
        ("is not UTF-8 text", "is not UTF-8 text"),
    ] {
        if output.contains(&format!("`{path}` {marker}")) {
            return why.to_string();
        }
    }
    "cannot be read".to_string()
}

/// Seed 000's edit rules, for outputs in none of the host's formats.
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
        let mut facts = Vec::new();
        for form in forms() {
            if let Some(c) = form.pattern.captures(&input.output) {
                facts.extend((form.facts)(&c, &input));
            }
        }
        if facts.is_empty() {
            facts = seed_rules(&input);
        }
        facts
    }
}

export_extractor!(Edits);
