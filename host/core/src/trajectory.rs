//! A step's trajectory: the exact request the step sent to the model and the raw reply
//! it got, kept beside the log (`trajectories/steps.jsonl.gz` in the task folder) so
//! `agentforge show` and `agentforge report` can say what the model saw and answered, and
//! `run --record` can turn a run into a replayable session.
//!
//! The types only; the store writes and reads the files.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{ModelReply, Usage, WireExchange};

/// Version of the trajectory file format.
pub const TRAJECTORY_VERSION: u32 = 1;

/// What one step sent to the model and got back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Trajectory {
    /// [`TRAJECTORY_VERSION`].
    pub version: u32,
    /// The step (1-based).
    pub step: u64,
    /// The provider that answered (`anthropic`, `openai`, `replay`).
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// The request and reply on the wire; `None` when the provider gave none.
    pub exchange: Option<WireExchange>,
    /// The reply as the executor classified it.
    pub answer: Answer,
    /// Usage reported by the provider.
    #[serde(default)]
    pub usage: Usage,
}

/// A classified reply, in a form that is stored ([`ModelReply`] is not serialized).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// One tool call.
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments (a JSON object).
        arguments: Value,
    },
    /// No tool call: the model's text.
    NoToolCall {
        /// The text.
        text: String,
    },
    /// A call whose arguments did not parse.
    Malformed {
        /// Tool name (may be empty).
        name: String,
        /// The raw argument text.
        raw: String,
        /// Why it is malformed.
        error: String,
    },
}

impl From<&ModelReply> for Answer {
    fn from(r: &ModelReply) -> Answer {
        match r {
            ModelReply::ToolCall { name, arguments } => Answer::ToolCall {
                name: name.clone(),
                arguments: arguments.clone(),
            },
            ModelReply::NoToolCall { text } => Answer::NoToolCall { text: text.clone() },
            ModelReply::MalformedArguments { name, raw, error } => Answer::Malformed {
                name: name.clone(),
                raw: raw.clone(),
                error: error.clone(),
            },
        }
    }
}

impl From<&Answer> for ModelReply {
    fn from(a: &Answer) -> ModelReply {
        match a {
            Answer::ToolCall { name, arguments } => ModelReply::ToolCall {
                name: name.clone(),
                arguments: arguments.clone(),
            },
            Answer::NoToolCall { text } => ModelReply::NoToolCall { text: text.clone() },
            Answer::Malformed { name, raw, error } => ModelReply::MalformedArguments {
                name: name.clone(),
                raw: raw.clone(),
                error: error.clone(),
            },
        }
    }
}

/// Where a log record's trajectory is, and how to tell it is the one written with it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrajectoryRef {
    /// Path relative to the task folder: the task's pack (`trajectories/steps.jsonl.gz`),
    /// or for steps recorded before packs, the step's own file
    /// (`trajectories/step-0003.json.gz`).
    pub file: String,
    /// Where the step's gzip member starts in the pack; `None` for a file of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// `sha256:<hex>` of the compressed bytes (the member, or the whole file).
    pub sha256: String,
    /// Size of the compressed bytes.
    pub bytes: u64,
    /// Size of the JSON before compression (with its line break, in a pack).
    pub raw_bytes: u64,
}

/// What the model saw, read back from a request body of any provider's wire format.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PromptSeen {
    /// The system message.
    pub system: String,
    /// The user message (in text mode, with the tool instructions appended).
    pub user: String,
    /// Names of the tools offered (none in text mode).
    pub tools: Vec<String>,
}

impl PromptSeen {
    /// Reads the prompt out of a request body: Anthropic's (`system`, `messages`,
    /// `tools[].name`), OpenAI's (`messages` with roles, `tools[].function.name`) or the
    /// replay provider's neutral one (`system`, `user`, `tools[].name`). `None` when the
    /// body is not JSON or has no user message.
    pub fn from_body(body: &str) -> Option<PromptSeen> {
        let v: Value = serde_json::from_str(body).ok()?;
        let text = |c: &Value| match c {
            Value::String(s) => Some(s.clone()),
            // Content as parts (`[{type: text, text}]`).
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        };
        let messages = v.get("messages").and_then(Value::as_array);
        let by_role = |role: &str| {
            messages.and_then(|m| {
                m.iter()
                    .find(|m| m.get("role").and_then(Value::as_str) == Some(role))
                    .and_then(|m| m.get("content"))
                    .and_then(text)
            })
        };
        let system = v
            .get("system")
            .and_then(text)
            .or_else(|| by_role("system"))
            .unwrap_or_default();
        let user = v.get("user").and_then(text).or_else(|| by_role("user"))?;
        let tools = v
            .get("tools")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .filter_map(|t| {
                        t.get("name")
                            .or_else(|| t.pointer("/function/name"))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(PromptSeen {
            system,
            user,
            tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_wire_format_gives_the_prompt() {
        let anthropic = json!({"model": "m", "system": "S", "messages": [{"role": "user", "content": "U"}],
            "tools": [{"name": "read_file", "input_schema": {}}]});
        let openai = json!({"model": "m", "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
            "tools": [{"type": "function", "function": {"name": "read_file"}}]});
        let replay =
            json!({"model": "m", "system": "S", "user": "U", "tools": [{"name": "read_file"}]});
        for body in [anthropic, openai, replay] {
            let seen = PromptSeen::from_body(&body.to_string()).unwrap();
            assert_eq!(seen.system, "S");
            assert_eq!(seen.user, "U");
            assert_eq!(seen.tools, ["read_file"]);
        }
        assert_eq!(PromptSeen::from_body("not json"), None);
        assert_eq!(PromptSeen::from_body("{}"), None);
    }

    #[test]
    fn answers_round_trip() {
        let replies = [
            ModelReply::ToolCall {
                name: "a".into(),
                arguments: json!({"x": 1}),
            },
            ModelReply::NoToolCall { text: "t".into() },
            ModelReply::MalformedArguments {
                name: "b".into(),
                raw: "{".into(),
                error: "e".into(),
            },
        ];
        for r in &replies {
            let a = Answer::from(r);
            let back: Answer = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
            assert_eq!(&ModelReply::from(&back), r);
        }
    }
}
