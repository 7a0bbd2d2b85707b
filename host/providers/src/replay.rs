//! The replay provider: answers from a JSONL recording, deterministically.
//!
//! Line N (1-based, blank lines ignored) answers the request with
//! `step == N`. Each line is one JSON object of one of these shapes
//! (`usage` is optional everywhere, missing counts are 0):
//!
//! ```text
//! {"tool":"read_file","arguments":{"path":"src/lib.rs"},"usage":{"input_tokens":120,"output_tokens":14}}
//! {"text":"I am done."}
//! {"malformed":{"name":"edit_file","raw":"{bad"}}
//! ```
//!
//! `text` is parsed with [`parse_action_block`](super::parse_action_block),
//! so a recorded text-mode answer replays as the same tool call and a
//! recorded answer without a tool call replays as
//! [`ModelReply::NoToolCall`]. `malformed` may carry an `error` (as written
//! by [`record_line`]); without one it is recomputed from `raw`.

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    classify_raw_arguments, parse_action_block, ModelReply, ModelRequest, ModelResponse,
    ProviderError, Usage, WireExchange, WireReply, WireRequest,
};

/// Answers from a JSONL recording; see the module docs for the format.
///
/// The file is read once, when opened; each line is parsed when its step is
/// requested, so a recording whose last line was cut by a crash still
/// replays the steps before it.
#[derive(Clone)]
pub struct ReplayProvider {
    source: String,
    /// `(1-based line number in the file, line text)` of non-blank lines.
    lines: Vec<(usize, String)>,
}

impl fmt::Debug for ReplayProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayProvider")
            .field("source", &self.source)
            .field("responses", &self.lines.len())
            .finish()
    }
}

/// One recorded line.
#[derive(Deserialize)]
struct Line {
    tool: Option<String>,
    arguments: Option<Value>,
    text: Option<String>,
    malformed: Option<MalformedLine>,
    usage: Option<LineUsage>,
    model: Option<String>,
}

/// A recorded malformed call.
#[derive(Deserialize)]
struct MalformedLine {
    #[serde(default)]
    name: String,
    raw: String,
    error: Option<String>,
}

/// Usage with both counts optional.
#[derive(Deserialize)]
struct LineUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
}

impl ReplayProvider {
    /// Read the recording at `path`.
    pub fn open(path: &Path) -> Result<Self, ProviderError> {
        let contents = std::fs::read_to_string(path).map_err(|e| {
            ProviderError::Replay(format!("cannot read recording {}: {e}", path.display()))
        })?;
        Ok(Self::from_jsonl(path.display().to_string(), &contents))
    }

    /// A recording from JSONL text; `source` names it in errors (a path).
    pub fn from_jsonl(source: impl Into<String>, contents: &str) -> Self {
        let lines = contents
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l.to_string()))
            .collect();
        ReplayProvider {
            source: source.into(),
            lines,
        }
    }

    /// Number of recorded responses.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether the recording has no responses.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The recorded answer for 1-based `step`: reply, usage and the
    /// recorded model (if any).
    pub fn answer(&self, step: u64) -> Result<(ModelReply, Usage, Option<String>), ProviderError> {
        let k = self.lines.len();
        let index = usize::try_from(step).ok().and_then(|s| s.checked_sub(1));
        let Some((line_no, text)) = index.and_then(|i| self.lines.get(i)) else {
            return Err(ProviderError::Replay(format!(
                "recording {} has {k} response{} and step {step} was requested (steps are 1-based)",
                self.source,
                if k == 1 { "" } else { "s" }
            )));
        };
        let bad = |what: String| {
            ProviderError::Replay(format!("{}: line {line_no}: {what}", self.source))
        };
        let line: Line =
            serde_json::from_str(text).map_err(|e| bad(format!("invalid JSON: {e}")))?;
        let usage = line
            .usage
            .map(|u| Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_input_tokens: u.cached_input_tokens,
            })
            .unwrap_or_default();
        let kinds =
            line.tool.is_some() as u8 + line.text.is_some() as u8 + line.malformed.is_some() as u8;
        if kinds != 1 {
            return Err(bad(
                "expected exactly one of \"tool\", \"text\" or \"malformed\"".to_string(),
            ));
        }
        let reply = if let Some(name) = line.tool {
            let arguments = line.arguments.unwrap_or_else(|| json!({}));
            if !arguments.is_object() {
                return Err(bad("\"arguments\" must be a JSON object".to_string()));
            }
            ModelReply::ToolCall { name, arguments }
        } else if let Some(text) = line.text {
            parse_action_block(&text)
        } else if let Some(m) = line.malformed {
            let error = match m.error {
                Some(e) => e,
                None => match classify_raw_arguments(m.name.clone(), &m.raw) {
                    ModelReply::MalformedArguments { error, .. } => error,
                    _ => "the recorded arguments were malformed".to_string(),
                },
            };
            ModelReply::MalformedArguments {
                name: m.name,
                raw: m.raw,
                error,
            }
        } else {
            unreachable!("exactly one kind is set")
        };
        Ok((reply, usage, line.model))
    }

    /// Answer `req` from line `req.step`. Nothing goes over a wire: the exchange kept
    /// for the step's trajectory is the provider-neutral request ([`neutral_body`]) and
    /// the recorded line, at `replay:<file>#<line>`.
    pub async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        let (reply, usage, model) = self.answer(req.step)?;
        let (line_no, line) = usize::try_from(req.step)
            .ok()
            .and_then(|s| s.checked_sub(1))
            .and_then(|i| self.lines.get(i))
            .cloned()
            .unwrap_or_default();
        Ok(ModelResponse {
            reply,
            usage,
            model: model.unwrap_or_else(|| req.model.clone()),
            exchange: Some(WireExchange {
                request: WireRequest {
                    method: "REPLAY".to_string(),
                    url: format!("replay:{}#{line_no}", self.source),
                    headers: Default::default(),
                    body: neutral_body(req).to_string(),
                },
                reply: WireReply {
                    status: 200,
                    body: line,
                },
                attempts: 1,
            }),
        })
    }
}

/// The request as a provider-neutral JSON body (what a recording is asked): model,
/// system, the user message as a model would get it (text mode's instructions
/// appended), tools, output limit, tool mode and effort.
pub fn neutral_body(req: &ModelRequest) -> Value {
    json!({
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "system": req.system,
        "user": super::effective_user_message(req),
        "tools": req.tools,
        "tool_mode": req.tool_mode,
        "effort": req.effort,
    })
}

/// One JSONL line (without the trailing newline) recording `reply` and
/// `usage`, in the format [`ReplayProvider`] reads, so real sessions can be
/// recorded and replayed.
pub fn record_line(reply: &ModelReply, usage: &Usage) -> String {
    // Usage's own serialization: the cached count only where there is one.
    let usage = serde_json::to_value(usage).unwrap_or_default();
    let line = match reply {
        ModelReply::ToolCall { name, arguments } => {
            json!({"tool": name, "arguments": arguments, "usage": usage})
        }
        ModelReply::NoToolCall { text } => json!({"text": text, "usage": usage}),
        ModelReply::MalformedArguments { name, raw, error } => json!({
            "malformed": {"name": name, "raw": raw, "error": error},
            "usage": usage,
        }),
    };
    line.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_through_record_line() {
        let replies = [
            (
                ModelReply::ToolCall {
                    name: "read_file".into(),
                    arguments: json!({"path": "src/lib.rs", "n": [1, 2]}),
                },
                Usage {
                    input_tokens: 10,
                    output_tokens: 2,
                    cached_input_tokens: 0,
                },
            ),
            (
                ModelReply::NoToolCall {
                    text: "line one\nline two".into(),
                },
                Usage::default(),
            ),
            (
                ModelReply::MalformedArguments {
                    name: "edit_file".into(),
                    raw: "{bad".into(),
                    error: "custom".into(),
                },
                Usage {
                    input_tokens: 1,
                    output_tokens: 1,
                    cached_input_tokens: 0,
                },
            ),
        ];
        let text: String = replies
            .iter()
            .map(|(r, u)| {
                let line = record_line(r, u);
                assert!(!line.contains('\n'));
                format!("{line}\n\n")
            })
            .collect();
        let p = ReplayProvider::from_jsonl("mem", &text);
        assert_eq!(p.len(), 3);
        for (i, (r, u)) in replies.iter().enumerate() {
            let (got, usage, _) = p.answer(i as u64 + 1).unwrap();
            assert_eq!(&got, r);
            assert_eq!(&usage, u);
        }
    }

    #[test]
    fn malformed_without_error_is_recomputed() {
        let p =
            ReplayProvider::from_jsonl("mem", r#"{"malformed":{"name":"edit_file","raw":"{bad"}}"#);
        let (r, u, _) = p.answer(1).unwrap();
        let ModelReply::MalformedArguments { name, raw, error } = r else {
            panic!("{r:?}")
        };
        assert_eq!((name.as_str(), raw.as_str()), ("edit_file", "{bad"));
        assert!(error.contains("not valid JSON"), "{error}");
        assert_eq!(u, Usage::default());
    }

    #[test]
    fn errors_name_source_and_line() {
        let p = ReplayProvider::from_jsonl(
            "rec.jsonl",
            "{\"text\":\"x\"}\n\n{\"tool\":\"a\",\"text\":\"b\"}\n[1]\n",
        );
        let e = p.answer(2).unwrap_err().to_string();
        assert!(
            e.contains("rec.jsonl: line 3") && e.contains("exactly one"),
            "{e}"
        );
        let e = p.answer(3).unwrap_err().to_string();
        assert!(e.contains("rec.jsonl: line 4"), "{e}");
        let e = p.answer(0).unwrap_err().to_string();
        assert!(e.contains("3 responses") && e.contains("step 0"), "{e}");
    }
}
