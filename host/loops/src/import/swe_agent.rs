//! SWE-agent trajectories (`.traj`): `trajectory` (thought, action, observation, state per
//! step) or, when that is absent or empty, `history` (chat messages; an assistant message
//! with an action and the observation messages after it make one step).
//!
//! SWE-agent records no exit codes: a step's result is read from its observation text by
//! the rules of `docs/loop-steps.md` ([`judge`]).

use std::collections::BTreeMap;
use std::path::Path;

use agentforge_core::state::ActionResult;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    blank_step, cut, one_line, parse_value, program_of, set_output, str_field, syntax_error,
    Format, ImportError, Imported, Position,
};
use crate::StepView;

/// One entry of `trajectory`.
#[derive(Deserialize)]
struct TrajStep {
    action: String,
    #[serde(default)]
    observation: Option<String>,
    #[serde(default)]
    thought: Option<String>,
    #[serde(default)]
    response: Option<String>,
    /// An object, or the same as a JSON string (older versions).
    #[serde(default)]
    state: Option<Value>,
}

/// One message of `history`.
#[derive(Deserialize)]
struct Message {
    role: String,
    /// A string, or a list of `{"type": "text", "text": ...}` parts.
    #[serde(default)]
    content: Value,
    #[serde(default)]
    thought: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    message_type: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Deserialize)]
struct ToolCall {
    function: Function,
}

#[derive(Deserialize)]
struct Function {
    name: String,
    /// A JSON object, usually encoded as a string.
    #[serde(default)]
    arguments: Value,
}

/// A tool call in one shape, whether parsed from the action text or taken from `tool_calls`:
/// the tool's name and its arguments under the names of SWE-agent's tool configs.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    name: String,
    args: Map<String, Value>,
}

/// What the importer knows of the environment at a step.
#[derive(Default)]
struct Env {
    open_file: Option<String>,
    working_dir: Option<String>,
}

/// One step before conversion.
struct Raw {
    action: String,
    call: Option<Call>,
    observation: String,
    thought: Option<String>,
    state: Option<Value>,
}

pub(super) fn read(path: &Path, text: &str) -> Result<Imported, ImportError> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| syntax_error(path, Position::Document, &e))?;
    let Value::Object(doc) = doc else {
        return Err(ImportError::Field {
            path: path.to_path_buf(),
            at: Position::Document,
            field: "trajectory".into(),
            problem:
                "the document is not a JSON object (a .traj is one with `trajectory` or `history`)"
                    .into(),
        });
    };
    let list = |key: &'static str| -> Result<Option<&Vec<Value>>, ImportError> {
        match doc.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(ImportError::Field {
                path: path.to_path_buf(),
                at: Position::Document,
                field: key.into(),
                problem: "not a list".into(),
            }),
        }
    };
    let raws = match (list("trajectory")?, list("history")?) {
        (Some(t), _) if !t.is_empty() => from_trajectory(path, t)?,
        (_, Some(h)) => from_history(path, h)?,
        (Some(_), None) => Vec::new(),
        (None, None) => {
            return Err(ImportError::Field {
                path: path.to_path_buf(),
                at: Position::Document,
                field: "trajectory".into(),
                problem: "missing: a .traj has `trajectory` or `history`".into(),
            })
        }
    };
    let mut env = Env::default();
    let steps = raws
        .into_iter()
        .enumerate()
        .map(|(i, raw)| convert(i as u64 + 1, raw, &mut env))
        .collect();
    Ok(Imported {
        format: Format::SweAgent,
        steps,
        notes: Vec::new(),
    })
}

fn from_trajectory(path: &Path, list: &[Value]) -> Result<Vec<Raw>, ImportError> {
    list.iter()
        .enumerate()
        .map(|(index, v)| {
            let at = Position::Item {
                list: "trajectory",
                index,
            };
            let s: TrajStep = parse_value(path, at, v)?;
            Ok(Raw {
                call: Some(parse_action(&s.action)),
                action: s.action,
                observation: s.observation.unwrap_or_default(),
                thought: s.thought.or(s.response).filter(|t| !t.trim().is_empty()),
                state: s.state,
            })
        })
        .collect()
}

fn from_history(path: &Path, list: &[Value]) -> Result<Vec<Raw>, ImportError> {
    let mut out: Vec<Raw> = Vec::new();
    // Whether the last step still takes observation messages.
    let mut open = false;
    for (index, v) in list.iter().enumerate() {
        let at = Position::Item {
            list: "history",
            index,
        };
        let m: Message = parse_value(path, at.clone(), v)?;
        let is_action = m.role == "assistant"
            && (m.message_type.as_deref() == Some("action") || m.action.is_some());
        if is_action {
            let text = content_text(&m.content);
            let call = match m.tool_calls.as_deref().and_then(<[ToolCall]>::first) {
                Some(tc) => Some(from_tool_call(path, at, tc)?),
                None => m.action.as_deref().map(parse_action),
            };
            out.push(Raw {
                action: m.action.clone().unwrap_or_default(),
                call,
                observation: String::new(),
                thought: m.thought.or(Some(text)).filter(|t| !t.trim().is_empty()),
                state: None,
            });
            open = true;
        } else if open && m.role != "assistant" && m.message_type.as_deref() == Some("observation")
        {
            let last = out.last_mut().expect("open implies a step");
            if !last.observation.is_empty() {
                last.observation.push('\n');
            }
            last.observation.push_str(&content_text(&m.content));
        } else if m.role == "assistant" {
            open = false;
        }
    }
    Ok(out)
}

/// A message's text: the string, or its text parts joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn from_tool_call(path: &Path, at: Position, tc: &ToolCall) -> Result<Call, ImportError> {
    let args = match &tc.function.arguments {
        Value::String(s) if s.trim().is_empty() => Map::new(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(ImportError::Field {
                    path: path.to_path_buf(),
                    at,
                    field: "tool_calls[0].function.arguments".into(),
                    problem: format!("not a JSON object: {}", cut(s, 80)),
                })
            }
        },
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    Ok(Call {
        name: tc.function.name.clone(),
        args,
    })
}

/// Positional argument names of SWE-agent's tools (from their `config.yaml` signatures).
fn signature(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "open" => &["path", "line_number"],
        "goto" => &["line_number"],
        "create" => &["filename"],
        "scroll_up" | "scroll_down" | "submit" => &[],
        "find_file" => &["file_name", "dir"],
        "search_dir" => &["search_term", "dir"],
        "search_file" => &["search_term", "file"],
        "edit" => &["search", "replace", "replace-all"],
        "insert" => &["text", "line"],
        "filemap" => &["file_path"],
        "view_image" => &["image_file"],
        "str_replace_editor" => &["command", "path"],
        n if n.starts_with("exit_") => &[],
        _ => return None,
    })
}

/// A number when the word is one (line numbers), else the string.
fn word_value(w: &str) -> Value {
    w.parse::<i64>().map_or_else(|_| json!(w), |n| json!(n))
}

/// Parses an action string as SWE-agent prints it: `open "a.py" 12`,
/// `edit 12:14\n...\nend_of_edit`, `edit 'old' 'new'`, `str_replace_editor view a.py
/// --view_range 1 20`. Anything that is not one of its tools is a shell command (`bash`).
fn parse_action(action: &str) -> Call {
    let text = action.trim();
    let first = text.lines().next().unwrap_or_default().trim();
    let name = first.split_whitespace().next().unwrap_or_default();
    let mut args = Map::new();
    let Some(names) = signature(name) else {
        if !text.is_empty() {
            args.insert("command".into(), json!(text));
        }
        let name = if text.is_empty() { "" } else { "bash" };
        return Call {
            name: name.into(),
            args,
        };
    };
    // `edit S:E` followed by the new text and `end_of_edit` (line-range editing).
    if name == "edit" {
        if let Some((s, e)) = first
            .strip_prefix("edit")
            .map(str::trim)
            .and_then(|r| r.split_once(':'))
            .and_then(|(s, e)| Some((s.trim().parse::<i64>().ok()?, e.trim().parse::<i64>().ok()?)))
        {
            let body: Vec<&str> = text.lines().skip(1).collect();
            let end = body
                .iter()
                .rposition(|l| l.trim() == "end_of_edit")
                .unwrap_or(body.len());
            args.insert("start_line".into(), json!(s));
            args.insert("end_line".into(), json!(e));
            args.insert("replacement_text".into(), json!(body[..end].join("\n")));
            return Call {
                name: name.into(),
                args,
            };
        }
    }
    let words = shlex::split(text)
        .unwrap_or_else(|| first.split_whitespace().map(str::to_string).collect());
    let mut positional = Vec::new();
    let mut rest = words.into_iter().skip(1).peekable();
    while let Some(w) = rest.next() {
        match w.strip_prefix("--") {
            Some("view_range") => {
                let mut range = Vec::new();
                while let Some(n) = rest.peek().and_then(|n| n.parse::<i64>().ok()) {
                    range.push(json!(n));
                    rest.next();
                }
                args.insert("view_range".into(), Value::Array(range));
            }
            Some(flag) if name == "str_replace_editor" && !flag.is_empty() => {
                let value = rest.next().map_or(Value::Null, |v| word_value(&v));
                args.insert(flag.to_string(), value);
            }
            _ => positional.push(w),
        }
    }
    for (key, w) in names.iter().zip(&positional) {
        args.insert((*key).to_string(), word_value(w));
    }
    Call {
        name: name.into(),
        args,
    }
}

/// `path` relative to the working directory when it lies inside it, so `open a.py` and an
/// edit of the open file `/repo/a.py` name the same file.
fn rel(path: &str, env: &Env) -> String {
    match &env.working_dir {
        Some(wd) => path
            .strip_prefix(wd.trim_end_matches('/'))
            .and_then(|p| p.strip_prefix('/'))
            .filter(|p| !p.is_empty())
            .unwrap_or(path)
            .to_string(),
        None => path.to_string(),
    }
}

/// The state recorded with a step: an object or a JSON string of one.
fn state_object(state: &Option<Value>) -> Option<Map<String, Value>> {
    match state {
        Some(Value::Object(o)) => Some(o.clone()),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        },
        _ => None,
    }
}

fn convert(n: u64, raw: Raw, env: &mut Env) -> StepView {
    // The state is recorded after the step; the open file of a step that does not open one
    // is the same before and after.
    if let Some(state) = state_object(&raw.state) {
        if let Some(wd) = str_field(&state, "working_dir") {
            env.working_dir = Some(wd.to_string());
        }
        match str_field(&state, "open_file") {
            Some("n/a") | None => {}
            Some(f) => env.open_file = Some(f.to_string()),
        }
    }
    let call = raw.call.unwrap_or_else(|| parse_action(&raw.action));
    let arg = |k: &str| call.args.get(k).filter(|v| !v.is_null()).cloned();
    let arg_str = |k: &str| call.args.get(k).and_then(Value::as_str).map(str::to_string);
    let open_file = env.open_file.clone();
    let file_of = |k: &str, env: &Env| arg_str(k).or(open_file.clone()).map(|p| rel(&p, env));
    let mut file_hashes = BTreeMap::new();
    let (action, target, parameters) = match call.name.as_str() {
        "" => ("message", None, json!({})),
        "open" | "filemap" | "view_image" => {
            let key = match call.name.as_str() {
                "open" => "path",
                "filemap" => "file_path",
                _ => "image_file",
            };
            let p = arg_str(key).map(|p| rel(&p, env));
            if call.name == "open" {
                env.open_file = arg_str(key);
            }
            let mut params = json!({ "path": p });
            if let Some(l) = arg("line_number") {
                params["line"] = l;
            }
            ("read_file", p, params)
        }
        "goto" | "scroll_up" | "scroll_down" => {
            let p = file_of("", env);
            let params = match call.name.as_str() {
                "goto" => json!({ "path": p, "line": arg("line_number") }),
                dir => json!({ "path": p, "scroll": dir.trim_start_matches("scroll_") }),
            };
            ("read_file", p, params)
        }
        "create" => {
            env.open_file = arg_str("filename");
            let p = arg_str("filename").map(|p| rel(&p, env));
            ("write_file", p.clone(), json!({ "path": p }))
        }
        "edit" if call.args.contains_key("start_line") => {
            let p = file_of("", env);
            let params = json!({
                "path": p,
                "start_line": arg("start_line"),
                "end_line": arg("end_line"),
                "new_text": arg("replacement_text"),
            });
            ("replace_lines", p, params)
        }
        "edit" if call.args.contains_key("search") => {
            let p = file_of("", env);
            let mut params =
                json!({ "path": p, "old_text": arg("search"), "new_text": arg("replace") });
            if let Some(all) = arg("replace-all") {
                params["replace_all"] = all;
            }
            ("edit_file", p, params)
        }
        "edit" => {
            // The rewrite variant: new text for the lines on screen.
            let p = file_of("", env);
            let text = arg("text").or(arg("command"));
            (
                "replace_lines",
                p.clone(),
                json!({ "path": p, "new_text": text }),
            )
        }
        "insert" => {
            let p = file_of("", env);
            let mut params = json!({ "path": p, "text": arg("text") });
            if let Some(l) = arg("line") {
                params["line"] = l;
            }
            ("insert_lines", p, params)
        }
        "find_file" => {
            let name = arg_str("file_name");
            let params = json!({ "pattern": name, "path": arg_str("dir").map(|d| rel(&d, env)) });
            ("find_files", name, params)
        }
        "search_dir" | "search_file" => {
            let term = arg_str("search_term");
            let within = if call.name == "search_dir" {
                arg_str("dir").map(|d| rel(&d, env))
            } else {
                file_of("file", env)
            };
            (
                "search",
                term.clone(),
                json!({ "pattern": term, "path": within }),
            )
        }
        "str_replace_editor" => {
            let p = arg_str("path").map(|p| rel(&p, env));
            match arg_str("command").as_deref() {
                Some("view") => {
                    let mut params = json!({ "path": p });
                    if let Some(r) = arg("view_range") {
                        params["view_range"] = r;
                    }
                    ("read_file", p, params)
                }
                Some("create") => {
                    let content = arg_str("file_text").unwrap_or_default();
                    if let Some(p) = &p {
                        file_hashes
                            .insert(p.clone(), agentforge_core::hash::tagged(content.as_bytes()));
                    }
                    (
                        "write_file",
                        p.clone(),
                        json!({ "path": p, "content": content }),
                    )
                }
                Some("str_replace") => (
                    "edit_file",
                    p.clone(),
                    json!({ "path": p, "old_text": arg("old_str"), "new_text": arg("new_str") }),
                ),
                Some("insert") => (
                    "insert_lines",
                    p.clone(),
                    json!({ "path": p, "line": arg("insert_line"), "text": arg("new_str") }),
                ),
                Some("undo_edit") => ("edit_file", p.clone(), json!({ "path": p, "undo": true })),
                other => (
                    "str_replace_editor",
                    p.clone(),
                    json!({ "command": other, "path": p }),
                ),
            }
        }
        "submit" => ("complete", None, json!({})),
        n if n.starts_with("exit_") => ("escalate", Some(n.to_string()), json!({})),
        "bash" => {
            let cmd = arg_str("command").unwrap_or_default();
            ("run_command", program_of(&cmd), json!({ "command": cmd }))
        }
        // Another tool bundle's command (web browser, ...): kept by name.
        other => (other, None, Value::Object(call.args.clone())),
    };
    let mut step = blank_step(n, action);
    step.target = target;
    step.parameters = strip_nulls(parameters);
    step.file_hashes = file_hashes;
    step.thought = raw.thought;
    step.summary = if raw.action.trim().is_empty() {
        format!(
            "{} {}",
            call.name,
            step.target.as_deref().unwrap_or_default()
        )
        .trim()
        .to_string()
    } else {
        one_line(&raw.action, 120)
    };
    let (result, error) = judge(action, &raw.observation);
    step.result = result;
    step.error = error;
    if action != "message" || !raw.observation.is_empty() {
        set_output(&mut step, &raw.observation);
    }
    step
}

/// Drops `null` members of a parameters object (arguments the call did not give).
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    }
}

/// The result of a step from its observation text, since `.traj` files keep no exit codes.
/// A failure's error is the line that shows it.
fn judge(action: &str, observation: &str) -> (ActionResult, Option<String>) {
    let text = observation.trim_start();
    let failed_line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .map(|l| cut(l.trim(), 300))
    };
    // Messages of SWE-agent's own tools, at the start of the observation.
    const TOOL_ERRORS: &[&str] = &[
        "Your proposed edit has introduced new syntax error",
        "Your edit was not applied",
        "No replacement was performed",
        "Error:",
        "ERROR:",
        "Usage:",
        "usage:",
        "Invalid `view_range`",
        "The path ",
        "File not found",
    ];
    if TOOL_ERRORS.iter().any(|p| text.starts_with(p)) {
        let detail = text
            .lines()
            .find(|l| l.contains("E999") || l.contains("did not appear"))
            .map(|l| cut(l.trim(), 300));
        return (
            ActionResult::Failure,
            Some(detail.unwrap_or_else(|| one_line(text, 300))),
        );
    }
    if text.starts_with("File ")
        && text
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("not found"))
    {
        return (ActionResult::Failure, Some(one_line(text, 300)));
    }
    // A command's own failure, seen in what it printed.
    let command_failures = [
        "Traceback (most recent call last)",
        "command not found",
        "No such file or directory",
        "was cancelled because it took more than",
    ];
    if action == "run_command" {
        if let Some(needle) = command_failures.iter().find(|n| text.contains(**n)) {
            let line = if needle.starts_with("Traceback") {
                // The exception line closes the traceback.
                text.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty() && !l.starts_with(' '))
                    .map(|l| cut(l.trim(), 300))
            } else {
                failed_line(needle)
            };
            return (ActionResult::Failure, line);
        }
        if let Some(line) = text.lines().find(|l| is_test_failure_summary(l)) {
            return (ActionResult::Failure, Some(cut(line.trim(), 300)));
        }
    }
    (ActionResult::Success, None)
}

/// A pytest-style summary line with failures: `==== 2 failed, 5 passed in 0.3s ====`.
fn is_test_failure_summary(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("==")
        && l.ends_with("==")
        && l.split([' ', ',']).collect::<Vec<_>>().windows(2).any(|w| {
            w[0].parse::<u32>().is_ok_and(|n| n > 0)
                && matches!(w[1], "failed" | "error" | "errors")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_of(action: &str, observation: &str) -> StepView {
        let raw = Raw {
            action: action.into(),
            call: None,
            observation: observation.into(),
            thought: None,
            state: None,
        };
        convert(1, raw, &mut Env::default())
    }

    #[test]
    fn str_replace_editor_commands_map_to_file_actions() {
        let view = step_of(
            "str_replace_editor view /repo/a.py  --view_range 10 40",
            "Here's the result of running `cat -n` on /repo/a.py:\n    10\tx = 1",
        );
        assert_eq!(view.action, "read_file");
        assert_eq!(view.target.as_deref(), Some("/repo/a.py"));
        assert_eq!(view.parameters["view_range"], json!([10, 40]));

        let edit = step_of(
            "str_replace_editor str_replace /repo/a.py   --old_str 'x = 1\ny = 2' --new_str 'x = 2'",
            "No replacement was performed, old_str `x = 1\ny = 2` did not appear verbatim in /repo/a.py.",
        );
        assert_eq!(edit.action, "edit_file");
        assert_eq!(edit.parameters["old_text"], "x = 1\ny = 2");
        assert_eq!(edit.parameters["new_text"], "x = 2");
        assert_eq!(edit.result, ActionResult::Failure);
        assert!(
            edit.error.as_deref().unwrap().contains("did not appear"),
            "{edit:?}"
        );

        let create = step_of(
            "str_replace_editor create /repo/b.py --file_text 'print(1)\n'",
            "File created successfully at: /repo/b.py",
        );
        assert_eq!(create.action, "write_file");
        assert_eq!(
            create.file_hashes["/repo/b.py"],
            agentforge_core::hash::tagged(b"print(1)\n")
        );
        assert_eq!(create.result, ActionResult::Success);

        let undo = step_of(
            "str_replace_editor undo_edit /repo/b.py",
            "Last edit undone",
        );
        assert_eq!(
            (undo.action.as_str(), undo.parameters["undo"].clone()),
            ("edit_file", json!(true))
        );
    }

    #[test]
    fn commands_that_are_not_tools_are_shell_commands() {
        let s = step_of(
            "cd /testbed && python -m pytest tests/test_a.py -q",
            "F.\n=================== 1 failed, 1 passed in 0.05s ===================\n",
        );
        assert_eq!(s.action, "run_command");
        assert_eq!(s.target.as_deref(), Some("python"));
        assert_eq!(s.result, ActionResult::Failure);
        assert!(s.error.as_deref().unwrap().contains("1 failed"));
        let ok = step_of("python -m pytest -q", "== 3 passed in 0.01s ==");
        assert_eq!(ok.result, ActionResult::Success);
    }

    #[test]
    fn empty_action_is_a_message() {
        let s = step_of("", "");
        assert_eq!(s.action, "message");
        assert_eq!(s.output, None);
    }
}
