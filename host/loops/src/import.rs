//! Steps from other sources: the minimal step format and other agents' trajectories,
//! converted to [`crate::StepView`]s for the detector (`agentforge inspect loops`).
//!
//! Four formats are read ([`Format`]): AgentForge's own `actions.jsonl`, the minimal step
//! format of the labelled data (`docs/loop-steps.md`, `docs/loop-steps.schema.json`),
//! SWE-agent `.traj` files and OpenHands event streams. [`detect_format`] tells them apart
//! from a file's first bytes; [`read_steps`] / [`import`] convert a file by the rules of
//! `docs/loop-steps.md`. Bad input is an [`ImportError`] naming the file, the position
//! (line, list element) and, where one is to blame, the field.

mod native;
mod openhands;
mod swe_agent;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use agentforge_core::state::ActionResult;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::StepView;

/// A source format of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// AgentForge's own `actions.jsonl` (one `ActionRecord` a line).
    AgentForge,
    /// The minimal step format: an optional label line, then one step a line.
    Steps,
    /// A SWE-agent trajectory (`.traj`: JSON with `trajectory` and/or `history`).
    SweAgent,
    /// An OpenHands event stream: a JSON array of events, events one a line, an evaluation
    /// output line whose `history` holds them, or a folder of `<id>.json` event files.
    OpenHands,
}

impl Format {
    /// Every format, in the order `--format` lists them.
    pub const ALL: [Format; 4] = [
        Format::AgentForge,
        Format::Steps,
        Format::SweAgent,
        Format::OpenHands,
    ];

    /// The name `--format` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::AgentForge => "agentforge",
            Format::Steps => "steps",
            Format::SweAgent => "swe-agent",
            Format::OpenHands => "openhands",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = ImportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| ImportError::UnknownFormatName(s.to_string()))
    }
}

/// Where in a file something is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// The file as a whole (or, for a folder of event files, that one file).
    Document,
    /// A 1-based line of a JSON Lines file.
    Line(usize),
    /// A 1-based line and column inside one JSON document.
    LineColumn(usize, usize),
    /// Element `index` (0-based) of the document's list `list`, e.g. `trajectory[3]`.
    Item {
        /// The list's name.
        list: &'static str,
        /// 0-based index.
        index: usize,
    },
    /// Element `index` (0-based) of the list `list` inside line `line` (1-based).
    LineItem {
        /// 1-based line.
        line: usize,
        /// The list's name.
        list: &'static str,
        /// 0-based index.
        index: usize,
    },
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Document => f.write_str("document"),
            Position::Line(l) => write!(f, "line {l}"),
            Position::LineColumn(l, c) => write!(f, "line {l} column {c}"),
            Position::Item { list, index } => write!(f, "{list}[{index}]"),
            Position::LineItem { line, list, index } => write!(f, "line {line}, {list}[{index}]"),
        }
    }
}

/// Why a file could not be read as steps.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file or folder could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Automatic detection did not recognize the content.
    #[error(
        "{}: not a format `inspect loops` recognizes ({why}); name one with --format agentforge|steps|swe-agent|openhands",
        path.display()
    )]
    Unrecognized {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        why: String,
    },
    /// Not valid JSON (truncated, a syntax error, not UTF-8).
    #[error("{}: {at}: not valid JSON: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where.
        at: Position,
        /// The parser's complaint.
        message: String,
    },
    /// Valid JSON, but a field is missing or of the wrong kind.
    #[error("{}: {at}: field `{field}`: {problem}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// Where.
        at: Position,
        /// The field, as a path (`result`, `args.command`, `state_after.phase`).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `--format` named no known format.
    #[error("unknown format `{0}` (expected auto, agentforge, steps, swe-agent or openhands)")]
    UnknownFormatName(String),
}

/// A converted file.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The format it was read as.
    pub format: Format,
    /// Its steps, oldest first.
    pub steps: Vec<StepView>,
    /// Things the reader skipped and the user should know (a torn last line).
    pub notes: Vec<String>,
}

/// How many bytes [`detect_format`] needs at most to decide.
pub const DETECT_BYTES: usize = 64 * 1024;

/// The format of `path`, judged from its first bytes `head` (up to [`DETECT_BYTES`]; the
/// whole file is best for a pretty-printed JSON document). A folder is judged by its files.
pub fn detect_format(path: &Path, head: &[u8]) -> Result<Format, ImportError> {
    let unrecognized = |why: String| ImportError::Unrecognized {
        path: path.to_path_buf(),
        why,
    };
    if path.is_dir() {
        return if openhands::event_files(path)?.is_empty() {
            Err(unrecognized(
                "a folder without OpenHands event files (<id>.json, or events/<id>.json)".into(),
            ))
        } else {
            Ok(Format::OpenHands)
        };
    }
    if path.extension().is_some_and(|e| e == "traj") {
        return Ok(Format::SweAgent);
    }
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    match text.chars().next() {
        // No line: no steps, in any line-based format.
        None => Ok(Format::Steps),
        Some('[') => Ok(Format::OpenHands),
        Some('{') => {
            let first = text.lines().next().unwrap_or_default();
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(first) {
                return classify(&o).ok_or_else(|| unrecognized(describe(&o)));
            }
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(text) {
                return classify(&o).ok_or_else(|| unrecognized(describe(&o)));
            }
            // A document cut by `head`: the first of the keys that mark a format tells
            // (both formats nest the other's words deeper down).
            const MARKS: &[(&str, Format)] = &[
                ("\"environment\"", Format::SweAgent),
                ("\"trajectory\"", Format::SweAgent),
                ("\"role\"", Format::SweAgent),
                ("\"instance_id\"", Format::OpenHands),
                ("\"instruction\"", Format::OpenHands),
                ("\"observation\"", Format::OpenHands),
                ("\"source\"", Format::OpenHands),
            ];
            MARKS
                .iter()
                .filter_map(|(mark, f)| text.find(mark).map(|at| (at, *f)))
                .min_by_key(|(at, _)| *at)
                .map(|(_, f)| f)
                .ok_or_else(|| {
                    unrecognized(
                        "JSON that is neither JSON Lines of steps nor a known trajectory".into(),
                    )
                })
        }
        Some(c) => Err(unrecognized(format!(
            "the content starts with {c:?}, not with JSON"
        ))),
    }
}

/// The format of one JSON object (a line, or a whole document).
fn classify(o: &serde_json::Map<String, Value>) -> Option<Format> {
    let has = |k: &str| o.contains_key(k);
    if has("state_after") {
        Some(Format::AgentForge)
    } else if (has("step") && has("action")) || (has("label") && !has("step")) {
        Some(Format::Steps)
    } else if has("trajectory") {
        Some(Format::SweAgent)
    } else if let Some(Value::Array(h)) = o.get("history") {
        // SWE-agent's history is chat messages; OpenHands' is events.
        let chat = h.iter().any(|m| m.get("role").is_some());
        let events = h
            .iter()
            .any(|e| e.get("action").is_some() || e.get("observation").is_some());
        match (chat, events) {
            (true, false) => Some(Format::SweAgent),
            (false, true) => Some(Format::OpenHands),
            _ if has("instance_id") || has("instruction") => Some(Format::OpenHands),
            _ => None,
        }
    } else if (has("action") || has("observation"))
        && (has("source") || has("args") || has("extras") || has("id"))
    {
        Some(Format::OpenHands)
    } else {
        None
    }
}

/// A short description of an unrecognized object, for the error.
fn describe(o: &serde_json::Map<String, Value>) -> String {
    let keys: Vec<&str> = o.keys().map(String::as_str).take(8).collect();
    format!("a JSON object with keys {}", keys.join(", "))
}

/// Reads `path` as steps, detecting its format.
pub fn read_steps(path: &Path) -> Result<Vec<StepView>, ImportError> {
    import(path, None).map(|i| i.steps)
}

/// Reads `path` as steps in `format`, or in the detected one when `None`.
pub fn import(path: &Path, format: Option<Format>) -> Result<Imported, ImportError> {
    let io = |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.is_dir() {
        let format = match format {
            Some(f) => f,
            None => detect_format(path, &[])?,
        };
        return match format {
            Format::OpenHands => openhands::read_dir(path),
            other => Err(ImportError::Unrecognized {
                path: path.to_path_buf(),
                why: format!("a folder; only OpenHands event folders are read, not {other}"),
            }),
        };
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let format = match format {
        Some(f) => f,
        None => detect_format(path, &bytes)?,
    };
    let text = String::from_utf8(bytes).map_err(|e| ImportError::Json {
        path: path.to_path_buf(),
        at: Position::Document,
        message: format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })?;
    let text = text.trim_start_matches('\u{feff}');
    match format {
        Format::AgentForge => native::agentforge(path, text),
        Format::Steps => native::steps(path, text),
        Format::SweAgent => swe_agent::read(path, text),
        Format::OpenHands => openhands::read(path, text),
    }
}

/// The non-empty lines of a JSON Lines text, with their 1-based numbers.
fn json_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l))
}

/// serde_json's message without its own " at line L column C" (the caller says where).
fn json_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rsplit_once(" at line ") {
        Some((msg, _)) => msg.to_string(),
        None => s,
    }
}

/// A JSON syntax error at `at` (a line of a JSON Lines file: the column is added).
fn syntax_error(path: &Path, at: Position, e: &serde_json::Error) -> ImportError {
    let at = match at {
        Position::Document if e.line() > 0 => Position::LineColumn(e.line(), e.column()),
        other => other,
    };
    let message = match at {
        Position::Line(_) if e.column() > 0 => {
            format!("{} (column {})", json_message(e), e.column())
        }
        _ => json_message(e),
    };
    ImportError::Json {
        path: path.to_path_buf(),
        at,
        message,
    }
}

/// Parses one JSON text into `T`, naming the field at fault.
fn parse_text<T: DeserializeOwned>(
    path: &Path,
    at: Position,
    text: &str,
) -> Result<T, ImportError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(v) => Ok(v),
        Err(e) if e.inner().is_syntax() || e.inner().is_eof() => {
            Err(syntax_error(path, at, e.inner()))
        }
        Err(e) => Err(field_error(path, at, e.path().to_string(), e.inner())),
    }
}

/// Converts one JSON value into `T`, naming the field at fault.
fn parse_value<T: DeserializeOwned>(
    path: &Path,
    at: Position,
    v: &Value,
) -> Result<T, ImportError> {
    serde_path_to_error::deserialize::<_, T>(v)
        .map_err(|e| field_error(path, at, e.path().to_string(), e.inner()))
}

/// A [`ImportError::Field`] from a serde error at `field` (`.` for the object itself,
/// where the message names the missing field).
fn field_error(path: &Path, at: Position, field: String, e: &serde_json::Error) -> ImportError {
    let message = json_message(e);
    let (field, problem) = match message.strip_prefix("missing field `") {
        Some(rest) if field == "." => (
            rest.trim_end_matches('`').to_string(),
            "missing (required)".to_string(),
        ),
        _ => (field, message),
    };
    ImportError::Field {
        path: path.to_path_buf(),
        at,
        field,
        problem,
    }
}

/// A step with only its number and action; the importers fill in the rest.
fn blank_step(step: u64, action: &str) -> StepView {
    StepView {
        step,
        action: action.to_string(),
        target: None,
        parameters: Value::Object(Default::default()),
        result: ActionResult::Success,
        error: None,
        summary: String::new(),
        file_hashes: BTreeMap::new(),
        checks_passing: None,
        checks_failing: None,
        output_len: None,
        output_hash: None,
        output: None,
        thought: None,
    }
}

/// Sets a step's output, its length in bytes and its hash (`sha256:` as AgentForge logs it).
fn set_output(step: &mut StepView, output: &str) {
    step.output_len = Some(output.len());
    step.output_hash = Some(agentforge_core::hash::tagged(output.as_bytes()));
    step.output = Some(output.to_string());
}

/// The first non-empty line of `text`, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    cut(line, max)
}

/// `text` cut to `max` characters (with `...` when cut).
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// The program a shell command runs, for `run_command`'s target: the first word of the
/// first `&&`/`;`/`|` segment that is not `cd`/`export`/`source`, without leading
/// `VAR=value` assignments and without its directory (`./build/ponyc` -> `ponyc`).
fn program_of(command: &str) -> Option<String> {
    command
        .split(['\n', ';', '|', '&'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|segment| {
            let word = segment
                .split_whitespace()
                .find(|w| !w.contains('=') || w.starts_with(['=', '-']))?;
            let word = word.trim_matches(['"', '\'', '(', ')']);
            let name = word.rsplit('/').next().unwrap_or(word);
            (!name.is_empty()).then(|| name.to_string())
        })
        .find(|name| {
            !matches!(
                name.as_str(),
                "cd" | "export" | "source" | "set" | "pushd" | "."
            )
        })
}

/// A non-empty string field of a JSON object.
fn str_field<'a>(o: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_of_skips_cd_and_assignments() {
        assert_eq!(
            program_of("cd /testbed && python -m pytest -x").as_deref(),
            Some("python")
        );
        assert_eq!(
            program_of("FOO=1 RUST_LOG=debug cargo test").as_deref(),
            Some("cargo")
        );
        assert_eq!(
            program_of("cd /workspace && ./ponyc__0.1/build/ponyc test.pony").as_deref(),
            Some("ponyc")
        );
        assert_eq!(program_of("   ").as_deref(), None);
    }

    #[test]
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
        }
        let e = "sweagent".parse::<Format>().unwrap_err();
        assert!(e.to_string().contains("`sweagent`"), "{e}");
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "hé...");
        assert_eq!(cut("hé", 2), "hé");
    }
}
