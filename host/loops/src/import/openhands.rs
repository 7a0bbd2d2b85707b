//! OpenHands event streams. Each agent action becomes a step; the observation whose `cause`
//! is the action's `id` gives its result and output. User and environment events (messages
//! from the user, state changes, recalls) are context, not steps. An `error` observation
//! that answers no action (a tool call OpenHands could not turn into one) is a step of its
//! own, `invalid_reply`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use agentforge_core::state::ActionResult;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{
    blank_step, cut, json_lines, one_line, parse_text, parse_value, program_of, set_output,
    str_field, syntax_error, Format, ImportError, Imported, Position,
};
use crate::StepView;

/// One serialized OpenHands event (`event_to_dict`), as much of it as the rules use.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    observation: Option<String>,
    #[serde(default)]
    cause: Option<i64>,
    #[serde(default)]
    args: Map<String, Value>,
    #[serde(default)]
    extras: Map<String, Value>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    tool_call_metadata: Option<Value>,
}

/// The events of a stream, with where each came from (for errors).
type Located = Vec<(PathBuf, Position, Value)>;

pub(super) fn read(path: &Path, text: &str) -> Result<Imported, ImportError> {
    let first = text.trim_start().chars().next();
    let events: Located = if first == Some('[') {
        let v: Value =
            serde_json::from_str(text).map_err(|e| syntax_error(path, Position::Document, &e))?;
        items(path, v, |index| Position::Item {
            list: "events",
            index,
        })?
    } else if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        // One document: an evaluation output with `history`, or a single event.
        if v.get("history").is_some() {
            history(path, v, None)?
        } else {
            vec![(path.to_path_buf(), Position::Document, v)]
        }
    } else {
        // JSON Lines: events one a line, or evaluation output lines (one run allowed).
        let mut out = Vec::new();
        let mut run_line = None;
        for (n, line) in json_lines(text) {
            let v: Value = parse_text(path, Position::Line(n), line)?;
            if v.get("history").is_some() {
                if let Some(first) = run_line {
                    return Err(ImportError::Field {
                        path: path.to_path_buf(),
                        at: Position::Line(n),
                        field: "history".into(),
                        problem: format!(
                            "a second run (the first is on line {first}{}); give one run per file",
                            v.get("instance_id")
                                .and_then(Value::as_str)
                                .map(|i| format!("; this one is {i}"))
                                .unwrap_or_default()
                        ),
                    });
                }
                run_line = Some(n);
                out.extend(history(path, v, Some(n))?);
            } else {
                out.push((path.to_path_buf(), Position::Line(n), v));
            }
        }
        out
    };
    convert(events)
}

/// A folder of event files, as OpenHands' file store keeps a conversation
/// (`sessions/<id>/events/<n>.json`): `path` itself or its `events/` folder.
pub(super) fn read_dir(path: &Path) -> Result<Imported, ImportError> {
    let mut events = Vec::new();
    for (_, file) in event_files(path)? {
        let text = std::fs::read_to_string(&file).map_err(|source| ImportError::Io {
            path: file.clone(),
            source,
        })?;
        let v: Value = parse_text(&file, Position::Document, &text)?;
        events.push((file, Position::Document, v));
    }
    convert(events)
}

/// The `<n>.json` files of an event folder (`path` or `path/events`), by number.
pub(super) fn event_files(path: &Path) -> Result<Vec<(u64, PathBuf)>, ImportError> {
    let events = path.join("events");
    let dir = if events.is_dir() {
        events
    } else {
        path.to_path_buf()
    };
    let entries = std::fs::read_dir(&dir).map_err(|source| ImportError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ImportError::Io {
            path: dir.clone(),
            source,
        })?;
        let p = entry.path();
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = n {
            out.push((n, p));
        }
    }
    out.sort();
    Ok(out)
}

/// The elements of a JSON array of events.
fn items(path: &Path, v: Value, at: impl Fn(usize) -> Position) -> Result<Located, ImportError> {
    match v {
        Value::Array(a) => Ok(a
            .into_iter()
            .enumerate()
            .map(|(i, e)| (path.to_path_buf(), at(i), e))
            .collect()),
        _ => Err(ImportError::Field {
            path: path.to_path_buf(),
            at: at(0),
            field: "events".into(),
            problem: "not a list".into(),
        }),
    }
}

/// The events in an evaluation output's `history`.
fn history(path: &Path, mut v: Value, line: Option<usize>) -> Result<Located, ImportError> {
    let h = v["history"].take();
    if !h.is_array() {
        return Err(ImportError::Field {
            path: path.to_path_buf(),
            at: line.map_or(Position::Document, Position::Line),
            field: "history".into(),
            problem: "not a list of events".into(),
        });
    }
    items(path, h, |index| match line {
        Some(line) => Position::LineItem {
            line,
            list: "history",
            index,
        },
        None => Position::Item {
            list: "history",
            index,
        },
    })
}

/// Actions that are the harness's, not the agent's: never steps.
const NOT_STEPS: &[&str] = &[
    "system",
    "recall",
    "change_agent_state",
    "null",
    "pause",
    "resume",
    "stop",
    "start",
    "condensation",
    "condensation_request",
];

fn convert(events: Located) -> Result<Imported, ImportError> {
    let mut steps: Vec<StepView> = Vec::new();
    // Step index of each action still waiting for its observation, by event id.
    let mut waiting: HashMap<i64, usize> = HashMap::new();
    // Steps that expect an observation and have none yet.
    let mut unobserved: Vec<usize> = Vec::new();
    for (path, at, v) in events {
        let ev: Event = parse_value(&path, at.clone(), &v)?;
        match (&ev.action, &ev.observation) {
            (Some(action), _) => {
                let by_agent = !matches!(ev.source.as_deref(), Some("user" | "environment"));
                if !by_agent || NOT_STEPS.contains(&action.as_str()) {
                    continue;
                }
                let n = steps.len() as u64 + 1;
                let (step, expects) = action_step(n, action, &ev, &path, &at)?;
                if expects {
                    if let Some(id) = ev.id {
                        waiting.insert(id, steps.len());
                    }
                    unobserved.push(steps.len());
                }
                steps.push(step);
            }
            (None, Some(obs)) => {
                let paired = match (ev.cause, ev.id) {
                    (Some(cause), _) => waiting.remove(&cause),
                    // Streams without ids: the observation follows its action.
                    (None, None) => unobserved.last().copied(),
                    (None, Some(_)) => None,
                };
                if let Some(i) = paired {
                    unobserved.retain(|&u| u != i);
                    observe(&mut steps[i], obs, &ev);
                } else if obs == "error" {
                    let mut step = blank_step(steps.len() as u64 + 1, "invalid_reply");
                    let text = ev
                        .content
                        .clone()
                        .or(ev.message.clone())
                        .unwrap_or_default();
                    step.result = ActionResult::Failure;
                    step.error = Some(cut(text.trim(), 500));
                    step.summary = format!("tool call rejected: {}", one_line(&text, 100));
                    set_output(&mut step, &text);
                    steps.push(step);
                }
            }
            (None, None) => {
                return Err(ImportError::Field {
                    path,
                    at,
                    field: "action".into(),
                    problem: "missing: an OpenHands event has `action` or `observation`".into(),
                })
            }
        }
    }
    for i in unobserved {
        let s = &mut steps[i];
        s.result = ActionResult::Skipped;
        s.error = Some("no observation recorded for this action".into());
    }
    Ok(Imported {
        format: Format::OpenHands,
        steps,
        notes: Vec::new(),
    })
}

/// The arguments of the tool call behind an action (`tool_call_metadata`), for actions
/// whose `args` leave out what the model asked (older file edits keep it only there).
fn tool_call_args(ev: &Event) -> Map<String, Value> {
    let Some(meta) = &ev.tool_call_metadata else {
        return Map::new();
    };
    let id = meta.get("tool_call_id").and_then(Value::as_str);
    meta.pointer("/model_response/choices/0/message/tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|tc| id.is_none() || tc.get("id").and_then(Value::as_str) == id)
        .and_then(|tc| tc.pointer("/function/arguments"))
        .and_then(|a| match a {
            Value::String(s) => serde_json::from_str::<Map<String, Value>>(s).ok(),
            Value::Object(o) => Some(o.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The step of an agent action, and whether it expects an observation.
fn action_step(
    n: u64,
    action: &str,
    ev: &Event,
    path: &Path,
    at: &Position,
) -> Result<(StepView, bool), ImportError> {
    let args = &ev.args;
    let call = tool_call_args(ev);
    // A field of the action, or of its tool call when the action left it out.
    let get = |k: &str| {
        args.get(k)
            .filter(|v| !v.is_null())
            .or_else(|| call.get(k).filter(|v| !v.is_null()))
            .cloned()
    };
    let get_str = |k: &str| get(k).and_then(|v| v.as_str().map(str::to_string));
    let required = |k: &str| {
        get_str(k).ok_or_else(|| ImportError::Field {
            path: path.to_path_buf(),
            at: at.clone(),
            field: format!("args.{k}"),
            problem: format!("missing (a `{action}` action names it)"),
        })
    };
    let mut file_hashes = BTreeMap::new();
    let (name, target, parameters, expects) = match action {
        "run" => {
            let cmd = required("command")?;
            let mut p = json!({ "command": cmd });
            if get("is_input").and_then(|v| v.as_bool()) == Some(true) {
                p["is_input"] = json!(true);
            }
            ("run_command", program_of(&cmd), p, true)
        }
        "run_ipython" => {
            let code = required("code")?;
            (
                "run_command",
                Some("ipython".into()),
                json!({ "code": code }),
                true,
            )
        }
        "read" => {
            let p = required("path")?;
            let mut params = json!({ "path": p });
            if let Some(r) = get("view_range") {
                params["view_range"] = r;
            }
            let (start, end) = (get("start"), get("end"));
            if start.as_ref().is_some_and(|s| s != &json!(0)) {
                params["start"] = start.unwrap_or_default();
            }
            if end.as_ref().is_some_and(|e| e != &json!(-1)) {
                params["end"] = end.unwrap_or_default();
            }
            ("read_file", Some(p), params, true)
        }
        "write" => {
            let p = required("path")?;
            let content = get_str("content").unwrap_or_default();
            file_hashes.insert(p.clone(), agentforge_core::hash::tagged(content.as_bytes()));
            (
                "write_file",
                Some(p.clone()),
                json!({ "path": p, "content": content }),
                true,
            )
        }
        "edit" => {
            let p = required("path")?;
            match get_str("command").as_deref() {
                Some("create") => {
                    let content = get_str("file_text").unwrap_or_default();
                    file_hashes
                        .insert(p.clone(), agentforge_core::hash::tagged(content.as_bytes()));
                    (
                        "write_file",
                        Some(p.clone()),
                        json!({ "path": p, "content": content }),
                        true,
                    )
                }
                Some("str_replace") => (
                    "edit_file",
                    Some(p.clone()),
                    json!({ "path": p, "old_text": get("old_str"), "new_text": get("new_str") }),
                    true,
                ),
                Some("insert") => (
                    "insert_lines",
                    Some(p.clone()),
                    json!({ "path": p, "line": get("insert_line"), "text": get("new_str") }),
                    true,
                ),
                Some("undo_edit") => (
                    "edit_file",
                    Some(p.clone()),
                    json!({ "path": p, "undo": true }),
                    true,
                ),
                Some("view") => ("read_file", Some(p.clone()), json!({ "path": p }), true),
                // The LLM-based editor: new content for a line range.
                _ => (
                    "replace_lines",
                    Some(p.clone()),
                    json!({ "path": p, "start_line": get("start"), "end_line": get("end"), "new_text": get("content") }),
                    true,
                ),
            }
        }
        "browse" => {
            let url = get_str("url");
            ("browse", url.clone(), json!({ "url": url }), true)
        }
        "browse_interactive" => (
            "browse",
            None,
            json!({ "browser_actions": get("browser_actions") }),
            true,
        ),
        "call_tool_mcp" => (
            "call_tool_mcp",
            get_str("name"),
            json!({ "name": get("name"), "arguments": get("arguments") }),
            true,
        ),
        "delegate" => (
            "delegate",
            get_str("agent"),
            json!({ "agent": get("agent"), "inputs": get("inputs") }),
            true,
        ),
        "message" | "think" => ("message", None, json!({}), false),
        "finish" => ("complete", None, json!({}), false),
        "reject" => ("escalate", None, json!({}), false),
        other => {
            let mut p = args.clone();
            p.remove("thought");
            (other, None, Value::Object(p), true)
        }
    };
    let mut step = blank_step(n, name);
    step.target = target;
    step.parameters = match parameters {
        Value::Object(o) => Value::Object(o.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    };
    step.file_hashes = file_hashes;
    // What the model said with the call: the action's thought, else its message text.
    step.thought = str_field(args, "thought")
        .or_else(|| str_field(args, "final_thought"))
        .or_else(|| {
            matches!(action, "message")
                .then(|| str_field(args, "content"))
                .flatten()
        })
        .map(str::to_string)
        .or_else(|| {
            ev.tool_call_metadata
                .as_ref()
                .and_then(|m| m.pointer("/model_response/choices/0/message/content"))
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_string)
        });
    step.summary = ev
        .message
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .map(|m| one_line(m, 120))
        .unwrap_or_else(|| {
            format!("{action} {}", step.target.as_deref().unwrap_or_default())
                .trim()
                .to_string()
        });
    Ok((step, expects))
}

/// Applies an observation to the step of its action: result, error, output, file hash.
fn observe(step: &mut StepView, obs: &str, ev: &Event) {
    let content = ev.content.clone().unwrap_or_default();
    if !matches!(obs, "null" | "agent_state_changed" | "recall") {
        set_output(step, &content);
    }
    if let Some(m) = ev.message.as_deref().filter(|m| !m.trim().is_empty()) {
        step.summary = one_line(m, 120);
    }
    // A failure's summary is its error: OpenHands' message for a failed edit still says
    // "I edited the file".
    let fail = |step: &mut StepView, error: String| {
        step.result = ActionResult::Failure;
        step.summary = one_line(&error, 120);
        step.error = Some(cut(error.trim(), 500));
    };
    let tool_error = content
        .trim_start()
        .strip_prefix("ERROR:")
        .map(str::to_string);
    match obs {
        "error" => fail(step, content.clone()),
        "user_rejected" => {
            step.result = ActionResult::Skipped;
            step.error = Some(format!("rejected by the user: {}", one_line(&content, 200)));
        }
        "run" => {
            let code = ev
                .extras
                .get("metadata")
                .and_then(|m| m.get("exit_code"))
                .or_else(|| ev.extras.get("exit_code"))
                .and_then(Value::as_i64);
            let last = content
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or_default();
            match code {
                Some(0) => {}
                Some(-1) => fail(
                    step,
                    format!("no exit code: the command timed out or is still running; {last}"),
                ),
                Some(c) => fail(step, format!("exit code {c}: {last}")),
                None if ev.success == Some(false) => fail(step, format!("failed: {last}")),
                None => {}
            }
        }
        "run_ipython" => {
            if content.contains("Traceback (most recent call last)") || tool_error.is_some() {
                let line = content
                    .lines()
                    .rev()
                    .map(str::trim)
                    .find(|l| l.contains("Error") || l.contains("Exception"))
                    .unwrap_or_else(|| content.trim());
                fail(step, line.to_string());
            }
        }
        "browse" => {
            if ev.extras.get("error").and_then(Value::as_bool) == Some(true) {
                let why = ev
                    .extras
                    .get("last_browser_action_error")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| one_line(&content, 300));
                fail(step, why);
            }
        }
        _ => {
            if let Some(e) = tool_error {
                fail(step, e);
            } else if ev.success == Some(false) {
                fail(step, one_line(&content, 300));
            } else if obs == "edit" {
                // The file's content after the edit, when the observation carries it.
                if let Some(new) = ev.extras.get("new_content").and_then(Value::as_str) {
                    let file = str_field(&ev.extras, "path")
                        .map(str::to_string)
                        .or(step.target.clone());
                    if let Some(file) = file {
                        step.file_hashes
                            .insert(file, agentforge_core::hash::tagged(new.as_bytes()));
                    }
                }
            }
        }
    }
}
