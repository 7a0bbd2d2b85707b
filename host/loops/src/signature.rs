//! Semantic signatures of steps and the text normalization behind them.
//!
//! Two steps with the same [`ActionSignature`] are "the same move" even when their exact
//! arguments or error texts differ: `read_file src/a.rs` and `load_context full_file:./src/a.rs`
//! read the same thing, and `old_text not found in `a.rs`` at line 12 or at line 14 is the
//! same failure.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::StepView;
use agentforge_core::actions::ContextItem;
use agentforge_core::state::ActionResult;

/// What kind of move an action is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionCategory {
    /// Changes workspace files (`edit_file`, `write_file`, `replace_lines`, ...).
    Edit,
    /// Looks at a file or loads context (`read_file`, `load_context`).
    Read,
    /// Runs verification (`run_check`, `run_tests`).
    Check,
    /// Searches the workspace.
    Search,
    /// Ends or hands over the task (`complete`, `escalate`, `cannot_fix`).
    Control,
    /// Says something without acting: a message to the user, a stated plan.
    Message,
    /// Not the agent's move: a notification the environment posted (a file watcher, a
    /// system message). The detectors skip these.
    Event,
    /// Anything else, including `invalid_reply`.
    Other,
}

impl ActionCategory {
    /// The category of a tool name.
    pub fn of(action: &str) -> ActionCategory {
        match action {
            "edit_file"
            | "write_file"
            | "replace_lines"
            | "insert_lines"
            | "create_file"
            | "delete_file"
            | "apply_patch"
            | "extract_function"
            | "simplify_conditional" => ActionCategory::Edit,
            "read_file" | "load_context" | "list_files" | "list_dir" => ActionCategory::Read,
            "run_check" | "run_tests" | "run_conformance_check" => ActionCategory::Check,
            "search" | "grep" | "find_files" => ActionCategory::Search,
            "complete" | "escalate" | "cannot_fix" => ActionCategory::Control,
            // Common names in other agents' logs.
            "view" | "open" | "open_file" | "cat" | "view_file" | "read" | "scroll_down"
            | "scroll_up" | "goto" => ActionCategory::Read,
            "search_dir" | "search_file" | "find_file" | "rg" | "ripgrep" | "grep_search"
            | "glob" => ActionCategory::Search,
            "edit" | "str_replace" | "str_replace_editor" | "insert" | "create" | "write"
            | "multi_edit" => ActionCategory::Edit,
            // The value loop's plan and verification changes: a planner adding its
            // fortieth task, or a QC author registering its fortieth verification, is
            // changing state, not reading.
            "manage_task" | "register_verification" => ActionCategory::Edit,
            "message" | "say" | "send_message" | "respond" | "reply" | "assistant_message"
            | "think" | "thought" | "plan" | "ask_user" | "chat" | "assistant"
            | "agent_message" | "talk" | "speak" => ActionCategory::Message,
            "system" | "system_event" | "event" | "notification" | "notify" | "observation"
            | "environment" | "watcher" | "file_watcher" | "system_message" | "user"
            | "user_message" | "human" => ActionCategory::Event,
            other
                if ["event", "notif", "watcher"]
                    .iter()
                    .any(|w| other.contains(w)) =>
            {
                ActionCategory::Event
            }
            _ => ActionCategory::Other,
        }
    }

    /// The category of a step: [`of`](Self::of) its action, except that a shell command
    /// that runs tests, a build, a linter or a reproduction script is a check (other
    /// agents' logs run their checks as plain commands).
    pub fn of_step(s: &StepView) -> ActionCategory {
        let category = ActionCategory::of(&s.action);
        if category == ActionCategory::Other
            && command_of(s).is_some_and(|c| CHECK_COMMAND.is_match(c))
        {
            ActionCategory::Check
        } else {
            category
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionCategory::Edit => "edit",
            ActionCategory::Read => "read",
            ActionCategory::Check => "check",
            ActionCategory::Search => "search",
            ActionCategory::Control => "control",
            ActionCategory::Message => "message",
            ActionCategory::Event => "event",
            ActionCategory::Other => "other",
        }
    }
}

/// Normalized kind of an error, so that differently worded errors with the same meaning
/// compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// A file, path or text to replace does not exist.
    NotFound,
    /// The code does not parse.
    SyntaxError,
    /// The change broke passing checks and was reverted.
    TestRegression,
    /// A command ran out of time.
    Timeout,
    /// The host refused the action (guard, blocked action, path not allowed).
    Refused,
    /// The model's reply was not a valid tool call.
    InvalidReply,
    /// The code does not compile / type-check.
    CompileError,
    /// Tests or checks ran and failed.
    TestFailure,
    /// The environment lacks something the code needs: a module, a package, a module
    /// root, a wheel that would not build.
    Dependency,
    /// None of the above.
    Other,
}

impl ErrorCategory {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::NotFound => "not_found",
            ErrorCategory::SyntaxError => "syntax_error",
            ErrorCategory::TestRegression => "test_regression",
            ErrorCategory::Timeout => "timeout",
            ErrorCategory::Refused => "refused",
            ErrorCategory::InvalidReply => "invalid_reply",
            ErrorCategory::CompileError => "compile_error",
            ErrorCategory::TestFailure => "test_failure",
            ErrorCategory::Dependency => "dependency",
            ErrorCategory::Other => "other",
        }
    }

    /// Categorizes a failed step from its error text (and, for reverts and refusals,
    /// its summary, which is where the executor says so).
    pub fn of(action: &str, result: ActionResult, error: Option<&str>, summary: &str) -> Self {
        if action == "invalid_reply" {
            return ErrorCategory::InvalidReply;
        }
        let summary_l = summary.to_lowercase();
        if summary_l.starts_with("reverted") {
            return ErrorCategory::TestRegression;
        }
        if result == ActionResult::Skipped
            || summary_l.starts_with("refused")
            || summary_l.contains(" refused:")
        {
            return ErrorCategory::Refused;
        }
        let text = error.unwrap_or(summary).to_lowercase();
        let has = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
        if has(&["broke tests", "was undone"]) {
            ErrorCategory::TestRegression
        } else if has(&[
            "refused",
            "is blocked",
            "blocked since",
            "permission denied",
            "not allowed",
            "operation not permitted",
        ]) {
            ErrorCategory::Refused
        } else if has(&[
            "timed out",
            "timeout",
            "time limit",
            "has been running for over",
            "took more than",
            "no exit code",
        ]) {
            ErrorCategory::Timeout
        } else if has(&[
            "no tool call",
            "not valid json",
            "unknown tool",
            "invalid arguments",
        ]) {
            ErrorCategory::InvalidReply
        } else if has(&[
            "no module named",
            "modulenotfounderror",
            "cannot find module",
            "go.mod",
            "main module",
            "no required module provides",
            "cannot find package",
            "could not find a version",
            "no matching distribution",
            "failed building wheel",
            "failed-wheel-build",
            "could not resolve dependencies",
            "unable to resolve dependency",
            "eresolve",
            "package not found",
            "no such package",
            "command not found",
        ]) {
            ErrorCategory::Dependency
        } else if has(&[
            "syntaxerror",
            "syntax error",
            "invalid syntax",
            "indentationerror",
            "unexpected token",
            "unclosed delimiter",
            "unterminated",
            "unexpected eof",
            "expected one of",
            "was never closed",
            "parse error",
        ]) {
            ErrorCategory::SyntaxError
        } else if has(&[
            "error[e",
            "could not compile",
            "cannot find",
            "mismatched types",
            "unresolved import",
            "compilation failed",
            "build failed",
            "undefined reference",
            "error ts",
        ]) {
            ErrorCategory::CompileError
        } else if has(&[
            "test result: failed",
            "failed",
            "failures:",
            "panicked",
            "assertion",
            "assert ",
            "expect(",
        ]) {
            ErrorCategory::TestFailure
        } else if has(&[
            "not found",
            "does not exist",
            "no such file",
            "cannot read",
            "no matches",
        ]) {
            ErrorCategory::NotFound
        } else {
            ErrorCategory::Other
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Semantic signature of a step (seed 000 §4.3): what kind of move on what, and how it
/// ended. Arguments that do not change the move (a `reason`, whitespace, the exact
/// wording of an error) do not change the signature.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ActionSignature {
    /// Kind of move.
    pub category: ActionCategory,
    /// Normalized target: the file of a file action (also of `load_context full_file:`),
    /// the check name, the folder a search is limited to.
    pub target: Option<String>,
    /// The function/class/item the move is about: from `function_name`-like arguments,
    /// the definition named in `old_text`, or the identifier a search looks for.
    pub entity: Option<String>,
    /// How the step ended.
    pub outcome: ActionResult,
    /// Kind of error, for failed and skipped steps.
    pub error: Option<ErrorCategory>,
}

impl ActionSignature {
    /// The signature of a step.
    pub fn of(s: &StepView) -> Self {
        let category = ActionCategory::of_step(s);
        let target = match category {
            // A command is told apart by its command line, not its program.
            ActionCategory::Check | ActionCategory::Other if command_of(s).is_some() => {
                command_of(s).map(normalize_command)
            }
            ActionCategory::Search => param_str(&s.parameters, "path").map(normalize_path),
            ActionCategory::Read if s.action == "load_context" => {
                s.target.as_deref().map(|t| match t.parse::<ContextItem>() {
                    Ok(ContextItem::FullFile(path)) => normalize_path(&path),
                    _ => t.trim().to_string(),
                })
            }
            _ => target_of(s).map(normalize_path),
        }
        .filter(|t| !t.is_empty());
        let entity = match category {
            ActionCategory::Search => search_pattern(s).map(search_term),
            ActionCategory::Edit => edit_entity(&s.parameters),
            _ => None,
        };
        let error = matches!(s.result, ActionResult::Failure | ActionResult::Skipped)
            .then(|| failure_category(s));
        ActionSignature {
            category,
            target,
            entity,
            outcome: s.result,
            error,
        }
    }

    /// A compact string form, equal for equal signatures (`edit|src/a.rs|parse|failure|not_found`).
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.category.as_str(),
            self.target.as_deref().unwrap_or(""),
            self.entity.as_deref().unwrap_or(""),
            self.outcome,
            self.error.map_or("", ErrorCategory::as_str)
        )
    }
}

static CHECK_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)\b(?:pytest|py\.test|tox|nox|unittest|jest|vitest|mocha|tsc|eslint|mypy|pyright|ruff|flake8|pylint|rspec|phpunit|ctest|mvn|gradlew?
        |cargo\s+(?:\+\S+\s+)?(?:test|build|check|clippy|nextest|run)
        |go\s+(?:test|build|vet)
        |(?:npm|yarn|pnpm)\s+(?:run\s+)?(?:test|build|lint|check|typecheck)
        |make(?:\s+[\w-]+)?
        |dotnet\s+(?:test|build)
        |manage\.py\s+test)\b
        |\b\S*(?:test|repro|reproduce|check|verify)\S*\.(?:py|js|ts|sh|rb)\b",
    )
    .expect("valid regex")
});

/// A step's target as recorded, or, when the log left it out, the argument that names it
/// (the path of a file action, the pattern of a search).
pub(crate) fn target_of(s: &StepView) -> Option<&str> {
    s.target
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| {
            ["path", "file_path", "file", "filename", "pattern", "query"]
                .iter()
                .find_map(|k| param_str(&s.parameters, k))
        })
}

/// What a search looks for: its pattern argument, else its recorded target. Logs that
/// record a search's folder as its target (`.`) would otherwise make every search in
/// that folder the same search.
pub(crate) fn search_pattern(s: &StepView) -> Option<&str> {
    ["pattern", "query", "regex", "search_term", "term"]
        .iter()
        .find_map(|k| param_str(&s.parameters, k))
        .filter(|p| !p.trim().is_empty())
        .or_else(|| target_of(s))
}

/// What a failed step says went wrong: its error text, else its summary, else the line
/// of its output that reports the error (logs from other agents often keep a failing
/// command's error only in its output). An error or summary that only gives the exit
/// status (`command exited with status 1`) says nothing of the failure: the output's
/// error line does, when there is one.
pub(crate) fn failure_text(s: &StepView) -> &str {
    let said = [s.error.as_deref(), Some(s.summary.as_str())]
        .into_iter()
        .flatten()
        .find(|t| !t.trim().is_empty());
    match said {
        Some(t) if !only_exit_status(t) => t,
        _ => s
            .output
            .as_deref()
            .and_then(error_line)
            .or(said)
            .unwrap_or(""),
    }
}

/// The kind of error of a failed step, from its [`failure_text`]; when that is an error
/// line of its output that says nothing of the kind (`ImportError while importing test
/// module`), from all the error lines of the output (the cause is reported below it).
fn failure_category(s: &StepView) -> ErrorCategory {
    let text = failure_text(s);
    let category = ErrorCategory::of(&s.action, s.result, Some(text), &s.summary);
    let Some(output) = s.output.as_deref() else {
        return category;
    };
    if category != ErrorCategory::Other || !output_has(output, text) {
        return category;
    }
    let lines: Vec<&str> = output
        .lines()
        .take(ERROR_LINES)
        .filter(|l| ERROR_LINE.is_match(l))
        .collect();
    ErrorCategory::of(&s.action, s.result, Some(&lines.join("\n")), &s.summary)
}

/// Whether `part` is a slice of `text`.
pub(crate) fn output_has(text: &str, part: &str) -> bool {
    let (t, p) = (text.as_ptr() as usize, part.as_ptr() as usize);
    t <= p && p + part.len() <= t + text.len()
}

/// Lines of an output looked at for its error lines: an error is reported near the top
/// (or, after a traceback, at the very end, which [`error_line`] falls back to).
const ERROR_LINES: usize = 200;

static EXIT_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:the|a|command|process|program|script|exited|exit|exits|with|status|code|returned|return|non-?zero|failed|failure|error|errors|abnormally|\d+)\b|[():;,.=-]",
    )
    .expect("valid regex")
});

/// Whether a failure text says no more than that a command ended with a non-zero exit
/// status (`command exited with status 1`, `exit 1`, `Process exited with code 2`).
pub(crate) fn only_exit_status(text: &str) -> bool {
    let lower = text.to_lowercase();
    (lower.contains("exit") || lower.contains("status"))
        && text.len() < 120
        && EXIT_WORDS.replace_all(text, " ").trim().is_empty()
}

static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)\b[A-Z]\w*(?:Error|Exception)\b
        |(?i:\berror)(?:\[\w+\]|\s+TS\d+)?:
        |\bpanicked\b|^\s*FAILED\b|---\s+FAIL\b|(?i:\bfatal):|^\s*[A-Z]{1,3}\d{3,4}\b|\bERR!",
    )
    .expect("valid regex")
});

/// The lines of a command's output that report its error: the first line that names an
/// exception, an `error:` or an error code, a panic or a failed test, with the line after
/// it when that is indented under it (a failed test's header, then what failed); else its last non-empty line
/// (where a crash's message comes). A test runner's marker at the start of the line
/// (pytest's `E`) is left out.
pub(crate) fn error_line(output: &str) -> Option<&str> {
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines
        .clone()
        .take(ERROR_LINES)
        .position(|l| ERROR_LINE.is_match(l))
    else {
        return lines.next_back().map(str::trim);
    };
    let mut found = lines.skip(first);
    let line = found.next()?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let end = found
        .next()
        .filter(|next| indent(next) > indent(line))
        .unwrap_or(line);
    let offset = |l: &str| l.as_ptr() as usize - output.as_ptr() as usize;
    let text = output[offset(line)..offset(end) + end.len()].trim();
    Some(
        RUNNER_MARK
            .find(text)
            .map_or(text, |m| text[m.end()..].trim_start()),
    )
}

static RUNNER_MARK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:E|>)\s+").expect("valid regex"));

/// The command line a shell-like step runs.
pub(crate) fn command_of(s: &StepView) -> Option<&str> {
    ["command", "cmd", "code", "script"]
        .iter()
        .find_map(|k| param_str(&s.parameters, k))
}

static FILE_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\w+=\S*\s+)*(?:
            (?:mv|cp|rm|ln|patch|truncate)\s
            |sed\s+(?:-\w+\s+)*-i
            |git\s+(?:mv|rm|checkout|restore|stash|apply|revert|reset|cherry-pick)\b)",
    )
    .expect("valid regex")
});

/// Whether a successful shell command changed workspace files (moved, copied, removed,
/// patched or restored them): an attempt as much as an edit is, though the log records
/// no content for it.
pub(crate) fn command_changes_files(s: &StepView) -> bool {
    s.result == ActionResult::Success
        && command_of(s).is_some_and(|c| FILE_COMMAND.is_match(&normalize_command(c)))
}

static LEADING_WAIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^sleep\s+\d+(?:\.\d+)?[smh]?\s*(?:;|&&)\s*").expect("valid regex")
});

/// A command line in one spelling: whitespace collapsed, a leading `cd <dir> &&` dropped,
/// and a leading wait (`sleep 90; `) dropped: how long to wait before a command is not
/// what it runs, like a timeout argument (its output says whether anything moved on).
fn normalize_command(c: &str) -> String {
    let c = c.split_whitespace().collect::<Vec<_>>().join(" ");
    let c = match c.strip_prefix("cd ").and_then(|r| r.split_once(" && ")) {
        Some((_, rest)) => rest.to_string(),
        None => c,
    };
    LEADING_WAIT.replace(&c, "").into_owned()
}

/// What a command runs, its arguments aside: its first two words after any leading
/// environment assignments (`python load.py`, `cargo build`, `npm start`).
pub(crate) fn command_head(s: &StepView) -> Option<String> {
    let c = normalize_command(command_of(s)?);
    let words: Vec<&str> = c
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .take(2)
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The string argument `key`, if present.
pub(crate) fn param_str<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

/// A workspace path in one spelling: no `./`, no `//`, forward slashes, no trailing `/`.
pub fn normalize_path(p: &str) -> String {
    let t = p.trim();
    // Most paths are already normal: one copy instead of a copy per rule (this runs for
    // every step of the window at every check).
    let needs_work = t.contains('\\')
        || t.contains("//")
        || t.starts_with("./")
        || t.contains("/./")
        || (t.len() > 1 && t.ends_with('/'));
    if !needs_work {
        return t.to_string();
    }
    let mut s = t.replace('\\', "/");
    while s.contains("//") {
        s = s.replace("//", "/");
    }
    while let Some(rest) = s.strip_prefix("./") {
        s = rest.to_string();
    }
    s = s.replace("/./", "/");
    if s.len() > 1 {
        s = s.trim_end_matches('/').to_string();
    }
    s
}

static DEFINITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:fn|def|class|struct|enum|trait|impl|function|interface|type|mod)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
    .expect("valid regex")
});
static IDENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").expect("valid regex"));

/// Keywords that say what kind of item a search looks for, not which one.
const SEARCH_NOISE: &[&str] = &[
    "fn", "def", "class", "pub", "struct", "enum", "impl", "let", "async", "function", "const",
    "static", "self", "mut", "trait", "type", "for", "return", "import", "from", "use",
];

/// The item a search looks for: its longest identifier that is not a keyword, so that
/// `parse_date`, `fn parse_date` and `parse_date\(` are the same search.
pub fn search_term(pattern: &str) -> String {
    IDENT
        .find_iter(pattern)
        .map(|m| m.as_str())
        .filter(|w| !SEARCH_NOISE.contains(w))
        .fold(None::<&str>, |best, w| match best {
            Some(b) if b.len() >= w.len() => Some(b),
            _ => Some(w),
        })
        .unwrap_or(pattern.trim())
        .to_string()
}

/// The function/class an edit is about.
fn edit_entity(params: &Value) -> Option<String> {
    for key in [
        "function_name",
        "source_function",
        "entity",
        "symbol",
        "function",
    ] {
        if let Some(v) = param_str(params, key) {
            return Some(v.trim().to_string());
        }
    }
    // The text being replaced names the location; new text may rename it.
    let text = param_str(params, "old_text").or_else(|| param_str(params, "new_content"))?;
    DEFINITION.captures(text).map(|c| c[1].to_string())
}

/// Arguments that explain a call (or bound its time) rather than change it.
const COMMENTARY_KEYS: &[&str] = &[
    "reason",
    "reasoning",
    "thought",
    "thoughts",
    "explanation",
    "rationale",
    "why",
    "note",
    "notes",
    "comment",
    "intent",
    "plan",
    // How long to wait is not what to run: re-running a slow command with a longer limit
    // is the same call (its output says whether it got further).
    "timeout",
    "timeout_ms",
    "timeout_secs",
    "timeout_seconds",
    "time_limit",
    "wait",
    "wait_secs",
    "wait_for",
];

/// Arguments with commentary keys dropped, strings whitespace-collapsed and object keys
/// sorted: two calls that do the same thing normalize to equal values.
pub fn normalize_params(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| !COMMENTARY_KEYS.contains(&k.to_lowercase().as_str()))
                .collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), normalize_params(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalize_params).collect()),
        Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        other => other.clone(),
    }
}

static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"`[^`\n]{0,200}`|"[^"\n]{0,200}"|'[^'\n]{0,200}'"#).expect("valid regex")
});
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:[A-Za-z]:)?[\w.~-]*(?:[/\\][\w.~-]+)+|\b[\w-]+\.(?:rs|py|ts|js|tsx|jsx|go|java|c|h|cpp|hpp|rb|toml|yaml|yml|json|md|txt|csv|cfg|ini|lock)\b")
        .expect("valid regex")
});
static HEX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{7,}\b").expect("valid regex"));
// Standalone numbers (with decimals and a short unit: `0.02s`, `120ms`) only: digits
// inside identifiers (`test_case_2`, `E0308`) name things.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d+(?:\.\d+)*(?:[a-zµ]{1,3})?\b").expect("valid regex"));
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|sec|secs|seconds)\b").expect("valid regex")
});
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
        .expect("valid regex")
});
static TMP_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/tmp/[\w.-]+").expect("valid regex"));
static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("valid regex"));

/// Longest normalized text kept: enough to tell errors apart, bounded cost to compare.
const MAX_NORMALIZED: usize = 400;

/// An error text with quotes, paths, hex and numbers replaced by placeholders and
/// whitespace collapsed: the same failure reported at another line, for another file or
/// with another value normalizes to the same string.
pub fn normalize_error(text: &str) -> String {
    // Only the head matters for the category; bounding it keeps the regexes cheap on
    // long compiler output.
    let head: String = text.chars().take(MAX_NORMALIZED * 4).collect();
    let t = head.to_lowercase();
    let t = QUOTED.replace_all(&t, "Q");
    let t = PATH.replace_all(&t, "P");
    let t = HEX.replace_all(&t, "H");
    let t = NUMBER.replace_all(&t, "N");
    let t = SPACES.replace_all(t.trim(), " ");
    t.chars().take(MAX_NORMALIZED).collect()
}

/// A tool output with only what changes between identical runs removed (durations,
/// timestamps, temporary paths, addresses), keeping counts and names: two runs of an
/// unchanged test suite give the same string, a run with one failure less does not.
pub fn strip_volatile(text: &str) -> String {
    let t = TIMESTAMP.replace_all(text, "T");
    let t = DURATION.replace_all(&t, "D");
    let t = TMP_PATH.replace_all(&t, "/tmp/X");
    let t = HEX.replace_all(&t, "H");
    let t = SPACES.replace_all(t.trim(), " ");
    t.chars().take(MAX_NORMALIZED * 2).collect()
}
