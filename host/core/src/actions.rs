//! The built-in actions: their tool definitions for the model and the parsing of the
//! model's tool calls into typed [`Action`]s.
//!
//! One table (`TOOLS`) is the single source of truth: the JSON Schemas offered to
//! the model, the field checks of [`parse_action`] and the "expected arguments" line
//! of its errors are all derived from it, so they cannot drift apart.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use std::sync::LazyLock;

use crate::args::{json_type, ArgumentSchema};
use crate::model::ToolSpec;

/// A parsed, typed action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Show a file (or a 1-based inclusive line range of it) with line numbers.
    ReadFile {
        /// Workspace-relative path.
        path: String,
        /// First line to show (1-based).
        start_line: Option<usize>,
        /// Last line to show (1-based, inclusive).
        end_line: Option<usize>,
    },
    /// Create or overwrite a whole file.
    WriteFile {
        /// Workspace-relative path.
        path: String,
        /// The new content.
        content: String,
    },
    /// Replace the single occurrence of `old_text` with `new_text`.
    EditFile {
        /// Workspace-relative path.
        path: String,
        /// Exact text to find; must occur exactly once.
        old_text: String,
        /// Replacement.
        new_text: String,
    },
    /// Replace a 1-based inclusive line range.
    ReplaceLines {
        /// Workspace-relative path.
        path: String,
        /// First replaced line (1-based).
        start_line: usize,
        /// Last replaced line (1-based, inclusive).
        end_line: usize,
        /// Replacement lines; empty deletes the range.
        new_content: String,
    },
    /// Regex search over workspace files.
    Search {
        /// Regular expression (Rust `regex` syntax), matched per line.
        pattern: String,
        /// Only files whose path matches this glob.
        glob: Option<String>,
        /// Only under this workspace-relative file or folder.
        path: Option<String>,
    },
    /// Run the task's checks, or only the named one.
    RunCheck {
        /// Check name.
        name: Option<String>,
    },
    /// Run the task's test suites, or only the named one.
    RunTests {
        /// Suite name.
        name: Option<String>,
    },
    /// Load more context into working memory.
    LoadContext {
        /// What to load.
        item: ContextItem,
    },
    /// Declare the task done (the host verifies before accepting).
    Complete {
        /// What was done.
        summary: Option<String>,
    },
    /// Hand the task to a human.
    Escalate {
        /// Why.
        reason: String,
    },
    /// Declare the task impossible.
    CannotFix {
        /// Why.
        reason: String,
    },
    /// An action added by a tool plugin, with the model's arguments (checked against
    /// the tool's schema).
    Extra {
        /// Tool name.
        name: String,
        /// The arguments, a JSON object.
        arguments: Value,
    },
}

impl Action {
    /// The tool name of this action (`read_file`, ...).
    pub fn name(&self) -> &str {
        match self {
            Action::Extra { name, .. } => name,
            Action::ReadFile { .. } => "read_file",
            Action::WriteFile { .. } => "write_file",
            Action::EditFile { .. } => "edit_file",
            Action::ReplaceLines { .. } => "replace_lines",
            Action::Search { .. } => "search",
            Action::RunCheck { .. } => "run_check",
            Action::RunTests { .. } => "run_tests",
            Action::LoadContext { .. } => "load_context",
            Action::Complete { .. } => "complete",
            Action::Escalate { .. } => "escalate",
            Action::CannotFix { .. } => "cannot_fix",
        }
    }

    /// The main target, for the audit log and repetition guards: the file path of a
    /// file action, the pattern of a search, the check name, the context item.
    pub fn target(&self) -> Option<String> {
        match self {
            Action::ReadFile { path, .. }
            | Action::WriteFile { path, .. }
            | Action::EditFile { path, .. }
            | Action::ReplaceLines { path, .. } => Some(path.clone()),
            Action::Search { pattern, .. } => Some(pattern.clone()),
            Action::RunCheck { name } | Action::RunTests { name } => name.clone(),
            Action::LoadContext { item } => Some(item.to_string()),
            Action::Complete { .. } | Action::Escalate { .. } | Action::CannotFix { .. } => None,
            // The first string argument (a path, a check name) identifies the target.
            Action::Extra { arguments, .. } => arguments
                .as_object()
                .and_then(|o| o.values().find_map(|v| v.as_str().map(str::to_string))),
        }
    }

    /// Whether the action changes workspace files (and so needs a snapshot).
    pub fn mutates_files(&self) -> bool {
        matches!(
            self,
            Action::WriteFile { .. } | Action::EditFile { .. } | Action::ReplaceLines { .. }
        )
    }
}

/// What `load_context` loads into working memory. Written (and logged) as its wire
/// form: `full_file:<path>`, `related_files`, `test_output`, `spec_section:<id>`,
/// `error_details`; parsed once, here, so no other code reads the prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextItem {
    /// A whole workspace file, with line numbers.
    FullFile(String),
    /// The files related to the task's targets.
    RelatedFiles,
    /// The last recorded check or test output.
    TestOutput,
    /// The input section of the task spec with this id.
    SpecSection(String),
    /// The last failing check or test output.
    ErrorDetails,
}

impl ContextItem {
    /// The file a `full_file:` item loads (for loop signatures and guards).
    pub fn file(&self) -> Option<&str> {
        match self {
            ContextItem::FullFile(path) => Some(path),
            _ => None,
        }
    }
}

impl std::fmt::Display for ContextItem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContextItem::FullFile(path) => write!(f, "full_file:{path}"),
            ContextItem::RelatedFiles => f.write_str("related_files"),
            ContextItem::TestOutput => f.write_str("test_output"),
            ContextItem::SpecSection(id) => write!(f, "spec_section:{id}"),
            ContextItem::ErrorDetails => f.write_str("error_details"),
        }
    }
}

impl std::str::FromStr for ContextItem {
    type Err = String;

    /// Parses the wire form (surrounding spaces ignored); the error is phrased for the model.
    fn from_str(item: &str) -> Result<Self, String> {
        let item = item.trim();
        let parsed = match item.split_once(':') {
            Some(("full_file", rest)) if !rest.trim().is_empty() => {
                Some(ContextItem::FullFile(rest.trim().to_string()))
            }
            Some(("spec_section", rest)) if !rest.trim().is_empty() => {
                Some(ContextItem::SpecSection(rest.trim().to_string()))
            }
            Some(_) => None,
            None => match item {
                "related_files" => Some(ContextItem::RelatedFiles),
                "test_output" => Some(ContextItem::TestOutput),
                "error_details" => Some(ContextItem::ErrorDetails),
                _ => None,
            },
        };
        parsed.ok_or_else(|| {
            format!(
                "`item` \"{item}\" is not a context item; use one of {LOAD_CONTEXT_ITEMS}, e.g. full_file:src/lib.rs"
            )
        })
    }
}

/// Why a model's tool call is not a valid action. The display text is shown to the
/// model on its next step, so it says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionParseError {
    /// No built-in tool has that name.
    #[error("unknown tool `{name}`; call one of: {}", known.join(", "))]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The valid tool names.
        known: Vec<String>,
    },
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// Which field is wrong and what is expected.
        message: String,
    },
}

/// JSON type of a tool parameter.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A string.
    Str,
    /// A 1-based line number.
    Line,
}

/// One parameter of a tool.
struct Param {
    name: &'static str,
    kind: Kind,
    required: bool,
    /// Shown to the model; `""` when the name says it all (saves prompt tokens).
    description: &'static str,
}

/// One built-in tool.
struct Tool {
    name: &'static str,
    description: &'static str,
    params: &'static [Param],
}

const fn req(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param {
        name,
        kind,
        required: true,
        description,
    }
}

const fn opt(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param {
        name,
        kind,
        required: false,
        description,
    }
}

/// The items `load_context` accepts, as described to the model.
const LOAD_CONTEXT_ITEMS: &str =
    "full_file:<path> | related_files | test_output | spec_section:<id> | error_details";

/// Every built-in tool. Descriptions are terse on purpose: all of them are sent with
/// every step and count against the prompt budget.
const TOOLS: &[Tool] = &[
    Tool {
        name: "read_file",
        description: "Show a file with numbered lines (`12| code`), optionally only a line range.",
        params: &[
            req("path", Kind::Str, "Workspace-relative path"),
            opt("start_line", Kind::Line, "1-based"),
            opt("end_line", Kind::Line, "Inclusive"),
        ],
    },
    Tool {
        name: "write_file",
        description: "Create or overwrite a whole file. Prefer edit_file for small changes.",
        params: &[req("path", Kind::Str, ""), req("content", Kind::Str, "")],
    },
    Tool {
        name: "edit_file",
        description: "Replace old_text with new_text. old_text must occur exactly once, whitespace exact, without line-number prefixes.",
        params: &[
            req("path", Kind::Str, ""),
            req("old_text", Kind::Str, ""),
            req("new_text", Kind::Str, ""),
        ],
    },
    Tool {
        name: "replace_lines",
        description: "Replace lines start_line..end_line (1-based, inclusive) with new_content; empty new_content deletes them.",
        params: &[
            req("path", Kind::Str, ""),
            req("start_line", Kind::Line, ""),
            req("end_line", Kind::Line, ""),
            req("new_content", Kind::Str, ""),
        ],
    },
    Tool {
        name: "search",
        description: "Regex search of workspace files (respects .gitignore); up to 50 `path:line: text` hits.",
        params: &[
            req("pattern", Kind::Str, "Rust regex"),
            opt("glob", Kind::Str, "File filter, e.g. *.rs"),
            opt("path", Kind::Str, "Folder or file to search"),
        ],
    },
    Tool {
        name: "run_check",
        description: "Run the task's checks (build, lint), or only the named one.",
        params: &[opt("name", Kind::Str, "")],
    },
    Tool {
        name: "run_tests",
        description: "Run the task's tests, or only the named suite.",
        params: &[opt("name", Kind::Str, "")],
    },
    Tool {
        name: "load_context",
        description: "Load more context for the next steps.",
        params: &[req("item", Kind::Str, LOAD_CONTEXT_ITEMS)],
    },
    Tool {
        name: "complete",
        description: "Finish: the goal is met. Checks are re-run before it is accepted.",
        params: &[opt("summary", Kind::Str, "")],
    },
    Tool {
        name: "escalate",
        description: "Ask a human: blocked by ambiguity, missing access or a decision outside the task.",
        params: &[req("reason", Kind::Str, "")],
    },
    Tool {
        name: "cannot_fix",
        description: "Give up: the task cannot be done as specified.",
        params: &[req("reason", Kind::Str, "Why")],
    },
];

/// The names of the built-in actions (the names phase graphs may use), in `TOOLS`
/// order: derived from the table, so a new action cannot be missing from a list.
pub static BUILTIN_ACTIONS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| TOOLS.iter().map(|t| t.name).collect());

/// The `'static` name of the built-in action `name`, if it is one.
pub fn builtin_action(name: &str) -> Option<&'static str> {
    TOOLS.iter().map(|t| t.name).find(|a| *a == name)
}

/// All built-in actions, as tools for the model, in a stable order (`TOOLS` order).
///
/// Each schema is a closed object (`additionalProperties: false`) listing its
/// required fields; line numbers are integers with `minimum: 1`. Built once per process
/// (every step's prompt offers some of them; building their JSON schemas each time was
/// ~4% of a step's overhead).
pub fn builtin_tools() -> &'static [ToolSpec] {
    static SPECS: std::sync::LazyLock<Vec<ToolSpec>> = std::sync::LazyLock::new(|| {
        TOOLS
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name.to_string(),
                description: tool.description.to_string(),
                input_schema: schema(tool),
            })
            .collect()
    });
    &SPECS
}

fn schema(tool: &Tool) -> Value {
    let mut properties = Map::new();
    for p in tool.params {
        let mut prop = match p.kind {
            Kind::Str => json!({"type": "string"}),
            Kind::Line => json!({"type": "integer", "minimum": 1}),
        };
        if !p.description.is_empty() {
            prop["description"] = json!(p.description);
        }
        properties.insert(p.name.to_string(), prop);
    }
    let required: Vec<&str> = tool
        .params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name)
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// `{"path": string, "start_line"?: integer >= 1}`: the shape reminder appended to
/// every argument error.
fn signature(tool: &Tool) -> String {
    let fields: Vec<String> = tool
        .params
        .iter()
        .map(|p| {
            let ty = match p.kind {
                Kind::Str => "string",
                Kind::Line => "integer >= 1",
            };
            let q = if p.required { "" } else { "?" };
            format!("\"{}\"{q}: {ty}", p.name)
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// Parses a model tool call into an [`Action`].
///
/// `arguments` may be an object, `null` (no arguments) or a string holding a JSON
/// object (some providers pass arguments as text). Field presence and types are
/// checked against the tool's schema first so that every error names its field;
/// then typed serde structs (`deny_unknown_fields`) do the conversion, and the
/// checks a schema cannot express (line order, `load_context` items, empty text)
/// follow.
pub fn parse_action(name: &str, arguments: &Value) -> Result<Action, ActionParseError> {
    let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
        return Err(ActionParseError::UnknownTool {
            name: name.to_string(),
            known: TOOLS.iter().map(|t| t.name.to_string()).collect(),
        });
    };
    let invalid = |problem: String| ActionParseError::InvalidArguments {
        tool: tool.name.to_string(),
        message: format!("{problem}. Expected arguments: {}", signature(tool)),
    };

    let args = match arguments {
        Value::Null => Value::Object(Map::new()),
        Value::Object(_) => arguments.clone(),
        Value::String(text) if text.trim().is_empty() => Value::Object(Map::new()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err(invalid("arguments must be a JSON object".to_string())),
        },
        other => {
            return Err(invalid(format!(
                "arguments must be a JSON object, got {}",
                json_type(other)
            )))
        }
    };
    check_fields(tool, args.as_object().expect("normalized to an object")).map_err(invalid)?;

    let action = match tool.name {
        "read_file" => {
            let a: ReadFileArgs = typed(args).map_err(invalid)?;
            non_empty("path", &a.path).map_err(invalid)?;
            if let (Some(start), Some(end)) = (a.start_line, a.end_line) {
                if start > end {
                    return Err(invalid(format!(
                        "`start_line` ({start}) is after `end_line` ({end}); give start_line <= end_line"
                    )));
                }
            }
            Action::ReadFile {
                path: a.path,
                start_line: a.start_line,
                end_line: a.end_line,
            }
        }
        "write_file" => {
            let a: WriteFileArgs = typed(args).map_err(invalid)?;
            non_empty("path", &a.path).map_err(invalid)?;
            Action::WriteFile {
                path: a.path,
                content: a.content,
            }
        }
        "edit_file" => {
            let a: EditFileArgs = typed(args).map_err(invalid)?;
            non_empty("path", &a.path).map_err(invalid)?;
            if a.old_text.is_empty() {
                return Err(invalid(
                    "`old_text` is empty; copy the exact text to replace from the file (use write_file to create a file)"
                        .to_string(),
                ));
            }
            if a.old_text == a.new_text {
                return Err(invalid(
                    "`new_text` is identical to `old_text`, so nothing would change".to_string(),
                ));
            }
            Action::EditFile {
                path: a.path,
                old_text: a.old_text,
                new_text: a.new_text,
            }
        }
        "replace_lines" => {
            let a: ReplaceLinesArgs = typed(args).map_err(invalid)?;
            non_empty("path", &a.path).map_err(invalid)?;
            if a.start_line > a.end_line {
                return Err(invalid(format!(
                    "`start_line` ({}) is after `end_line` ({}); give start_line <= end_line",
                    a.start_line, a.end_line
                )));
            }
            Action::ReplaceLines {
                path: a.path,
                start_line: a.start_line,
                end_line: a.end_line,
                new_content: a.new_content,
            }
        }
        "search" => {
            let a: SearchArgs = typed(args).map_err(invalid)?;
            non_empty("pattern", &a.pattern).map_err(invalid)?;
            Action::Search {
                pattern: a.pattern,
                glob: a.glob.filter(|g| !g.trim().is_empty()),
                path: a.path.filter(|p| !p.trim().is_empty()),
            }
        }
        "run_check" => Action::RunCheck {
            name: typed::<NameArgs>(args).map_err(invalid)?.name,
        },
        "run_tests" => Action::RunTests {
            name: typed::<NameArgs>(args).map_err(invalid)?.name,
        },
        "load_context" => {
            let a: LoadContextArgs = typed(args).map_err(invalid)?;
            Action::LoadContext {
                item: a.item.parse().map_err(invalid)?,
            }
        }
        "complete" => Action::Complete {
            summary: typed::<CompleteArgs>(args).map_err(invalid)?.summary,
        },
        "escalate" | "cannot_fix" => {
            let a: ReasonArgs = typed(args).map_err(invalid)?;
            non_empty("reason", &a.reason).map_err(invalid)?;
            if tool.name == "escalate" {
                Action::Escalate { reason: a.reason }
            } else {
                Action::CannotFix { reason: a.reason }
            }
        }
        other => unreachable!("tool `{other}` is in TOOLS but has no parser"),
    };
    Ok(action)
}

/// Checks the fields against the tool's schema (derived from the table) with the one
/// argument validator, reporting every problem at once (one round trip to the model
/// instead of several).
fn check_fields(tool: &Tool, args: &Map<String, Value>) -> Result<(), String> {
    static SCHEMAS: LazyLock<Vec<ArgumentSchema>> = LazyLock::new(|| {
        TOOLS
            .iter()
            .map(|t| ArgumentSchema::new(schema(t)).expect("built-in tool schemas are valid"))
            .collect()
    });
    let index = TOOLS
        .iter()
        .position(|t| t.name == tool.name)
        .expect("the tool comes from the table");
    SCHEMAS[index].check(args).map_err(|p| p.join("; "))
}

fn non_empty(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err(format!("`{field}` must not be empty"))
    } else {
        Ok(())
    }
}

/// Converts checked arguments to a typed struct; after [`check_fields`] this only
/// fails on values JSON types cannot express (a line number beyond `usize`).
fn typed<T: DeserializeOwned>(args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFileArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFileArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditFileArgs {
    path: String,
    old_text: String,
    new_text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceLinesArgs {
    path: String,
    start_line: usize,
    end_line: usize,
    new_content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadContextArgs {
    item: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteArgs {
    #[serde(default)]
    summary: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonArgs {
    reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(name: &str, args: Value) -> String {
        match parse_action(name, &args) {
            Err(ActionParseError::InvalidArguments { tool, message }) => {
                assert_eq!(tool, name);
                message
            }
            other => panic!("expected InvalidArguments for {name} {args}, got {other:?}"),
        }
    }

    #[test]
    fn parses_every_tool() {
        let cases = [
            (
                "read_file",
                json!({"path": "a.rs", "start_line": 2, "end_line": 3}),
                Action::ReadFile {
                    path: "a.rs".into(),
                    start_line: Some(2),
                    end_line: Some(3),
                },
            ),
            (
                "write_file",
                json!({"path": "a.rs", "content": ""}),
                Action::WriteFile {
                    path: "a.rs".into(),
                    content: String::new(),
                },
            ),
            (
                "edit_file",
                json!({"path": "a.rs", "old_text": "a", "new_text": "b"}),
                Action::EditFile {
                    path: "a.rs".into(),
                    old_text: "a".into(),
                    new_text: "b".into(),
                },
            ),
            (
                "replace_lines",
                json!({"path": "a.rs", "start_line": 1, "end_line": 1, "new_content": "x"}),
                Action::ReplaceLines {
                    path: "a.rs".into(),
                    start_line: 1,
                    end_line: 1,
                    new_content: "x".into(),
                },
            ),
            (
                "search",
                json!({"pattern": "fn main", "glob": "*.rs"}),
                Action::Search {
                    pattern: "fn main".into(),
                    glob: Some("*.rs".into()),
                    path: None,
                },
            ),
            ("run_check", json!({}), Action::RunCheck { name: None }),
            (
                "run_tests",
                json!({"name": "unit"}),
                Action::RunTests {
                    name: Some("unit".into()),
                },
            ),
            (
                "load_context",
                json!({"item": "full_file:src/lib.rs"}),
                Action::LoadContext {
                    item: ContextItem::FullFile("src/lib.rs".into()),
                },
            ),
            ("complete", Value::Null, Action::Complete { summary: None }),
            (
                "escalate",
                json!({"reason": "ambiguous"}),
                Action::Escalate {
                    reason: "ambiguous".into(),
                },
            ),
            (
                "cannot_fix",
                json!("{\"reason\": \"impossible\"}"),
                Action::CannotFix {
                    reason: "impossible".into(),
                },
            ),
        ];
        for (name, args, expected) in cases {
            let action = parse_action(name, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(action, expected);
            assert_eq!(action.name(), name);
        }
    }

    #[test]
    fn unknown_tool_lists_known_ones() {
        let err = parse_action("readfile", &json!({})).unwrap_err();
        match &err {
            ActionParseError::UnknownTool { name, known } => {
                assert_eq!(name, "readfile");
                assert_eq!(known.len(), 11);
                assert!(known.contains(&"read_file".to_string()));
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("read_file, write_file"), "{err}");
    }

    #[test]
    fn missing_field_is_named() {
        let msg = invalid("write_file", json!({"path": "a"}));
        assert!(msg.contains("missing required field `content`"), "{msg}");
        assert!(msg.contains("\"content\": string"), "{msg}");
    }

    #[test]
    fn wrong_type_is_named_with_expectation() {
        let msg = invalid("read_file", json!({"path": "a", "start_line": "5"}));
        assert!(msg.contains("`start_line` must be an integer"), "{msg}");
        assert!(msg.contains("got a string (\"5\")"), "{msg}");
        assert!(msg.contains("\"start_line\"?: integer >= 1"), "{msg}");
        let msg = invalid(
            "edit_file",
            json!({"path": 3, "old_text": "a", "new_text": "b"}),
        );
        assert!(msg.contains("`path` must be a string"), "{msg}");
    }

    #[test]
    fn unknown_field_lists_allowed() {
        let msg = invalid("read_file", json!({"path": "a", "lines": "1-3"}));
        assert!(msg.contains("unknown field `lines`"), "{msg}");
        assert!(msg.contains("`start_line`"), "{msg}");
        let msg = invalid("complete", json!({"reason": "done"}));
        assert!(msg.contains("unknown field `reason`"), "{msg}");
    }

    #[test]
    fn line_numbers_must_be_positive_and_ordered() {
        let msg = invalid("read_file", json!({"path": "a", "start_line": 0}));
        assert!(msg.contains("`start_line`"), "{msg}");
        let msg = invalid(
            "replace_lines",
            json!({"path": "a", "start_line": 5, "end_line": 2, "new_content": ""}),
        );
        assert!(msg.contains("start_line <= end_line"), "{msg}");
        let msg = invalid(
            "read_file",
            json!({"path": "a", "start_line": 4, "end_line": 3}),
        );
        assert!(msg.contains("after `end_line`"), "{msg}");
        let msg = invalid(
            "replace_lines",
            json!({"path": "a", "start_line": -1, "end_line": 2, "new_content": ""}),
        );
        assert!(msg.contains("`start_line`"), "{msg}");
    }

    #[test]
    fn context_items_round_trip_through_their_wire_form() {
        for (text, item) in [
            (
                "full_file:src/lib.rs",
                ContextItem::FullFile("src/lib.rs".into()),
            ),
            ("related_files", ContextItem::RelatedFiles),
            ("test_output", ContextItem::TestOutput),
            (
                "spec_section:req-2",
                ContextItem::SpecSection("req-2".into()),
            ),
            ("error_details", ContextItem::ErrorDetails),
        ] {
            assert_eq!(text.parse::<ContextItem>(), Ok(item.clone()));
            assert_eq!(item.to_string(), text);
        }
        assert_eq!(
            " full_file: a.rs ".parse::<ContextItem>(),
            Ok(ContextItem::FullFile("a.rs".into()))
        );
        assert_eq!(ContextItem::FullFile("a.rs".into()).file(), Some("a.rs"));
        assert_eq!(ContextItem::TestOutput.file(), None);
    }

    #[test]
    fn bad_load_context_item() {
        for item in ["everything", "full_file:", "spec_section: ", "other:x"] {
            let msg = invalid("load_context", json!({ "item": item }));
            assert!(msg.contains("not a context item"), "{msg}");
            assert!(msg.contains("related_files"), "{msg}");
        }
        for item in [
            "related_files",
            "test_output",
            "error_details",
            "spec_section:3.2",
        ] {
            assert!(
                parse_action("load_context", &json!({ "item": item })).is_ok(),
                "{item}"
            );
        }
    }

    #[test]
    fn semantic_checks() {
        assert!(invalid(
            "edit_file",
            json!({"path": "a", "old_text": "", "new_text": "b"})
        )
        .contains("`old_text` is empty"));
        assert!(invalid(
            "edit_file",
            json!({"path": "a", "old_text": "x", "new_text": "x"})
        )
        .contains("identical"));
        assert!(invalid("escalate", json!({"reason": " "})).contains("`reason` must not be empty"));
        assert!(invalid("search", json!({"pattern": ""})).contains("`pattern`"));
        assert!(invalid("read_file", json!({"path": ""})).contains("`path`"));
        assert!(invalid("run_check", json!(["x"])).contains("must be a JSON object"));
        assert!(invalid("run_check", json!("not json")).contains("must be a JSON object"));
    }

    #[test]
    fn reports_all_problems_at_once() {
        let msg = invalid("edit_file", json!({"file": "a", "old_text": 1}));
        assert!(msg.contains("unknown field `file`"), "{msg}");
        assert!(msg.contains("`old_text` must be a string"), "{msg}");
        assert!(msg.contains("missing required field `path`"), "{msg}");
        assert!(msg.contains("missing required field `new_text`"), "{msg}");
    }

    #[test]
    fn action_metadata() {
        let edit = parse_action(
            "edit_file",
            &json!({"path": "a.rs", "old_text": "a", "new_text": "b"}),
        )
        .unwrap();
        assert!(edit.mutates_files());
        assert_eq!(edit.target().as_deref(), Some("a.rs"));
        let read = parse_action("read_file", &json!({"path": "a.rs"})).unwrap();
        assert!(!read.mutates_files());
        let tests = parse_action("run_tests", &json!({"name": "unit"})).unwrap();
        assert_eq!(tests.target().as_deref(), Some("unit"));
        assert_eq!(Action::Complete { summary: None }.target(), None);
    }

    #[test]
    fn specs_are_closed_schemas_matching_the_parser() {
        let specs = builtin_tools();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "write_file",
                "edit_file",
                "replace_lines",
                "search",
                "run_check",
                "run_tests",
                "load_context",
                "complete",
                "escalate",
                "cannot_fix"
            ]
        );
        for spec in specs {
            let s = &spec.input_schema;
            assert_eq!(s["type"], "object", "{}", spec.name);
            assert_eq!(s["additionalProperties"], false, "{}", spec.name);
            assert!(s["properties"].is_object(), "{}", spec.name);
            assert!(s["required"].is_array(), "{}", spec.name);
            // Every required field is a property.
            for r in s["required"].as_array().unwrap() {
                assert!(
                    s["properties"].get(r.as_str().unwrap()).is_some(),
                    "{}",
                    spec.name
                );
            }
            assert!(!spec.description.is_empty());
        }
        assert_eq!(
            specs[3].input_schema["required"],
            json!(["path", "start_line", "end_line", "new_content"])
        );
    }

    #[test]
    fn specs_fit_the_token_budget() {
        let text = serde_json::to_string(
            &builtin_tools()
                .iter()
                .map(|s| json!({"name": s.name, "description": s.description, "input_schema": s.input_schema}))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let tokens = tiktoken_rs::cl100k_base_singleton()
            .encode_with_special_tokens(&text)
            .len();
        assert!(tokens < 900, "tool specs take {tokens} tokens");
    }
}
