//! What a model is asked and what it answers, independent of any provider: tools,
//! requests, classified replies, token usage, and which provider a task runs with.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Environment variable holding the Anthropic API key (unless overridden by
/// `ProviderSettings::api_key_env`).
pub const ANTHROPIC_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Environment variable holding the OpenAI API key (unless overridden by
/// `ProviderSettings::api_key_env`).
pub const OPENAI_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// Environment variable overriding the Anthropic base URL.
pub const ANTHROPIC_BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// Environment variable overriding the OpenAI-compatible base URL.
pub const OPENAI_BASE_URL_ENV: &str = "OPENAI_BASE_URL";
/// Public Anthropic API base URL (without `/v1`).
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// Public OpenAI API base URL (including `/v1`).
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// One tool the model may call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolSpec {
    /// Tool name, as the model must spell it in its call.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema (an `object` schema) of the tool's arguments.
    pub input_schema: serde_json::Value,
}

/// How actions are offered: native tool calling, or the text fallback (fenced
/// ` ```action ` block).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// Tools are sent with the request and the model must call one
    /// (`tool_choice` any / required).
    #[default]
    Native,
    /// No tools are sent; the user message gets `text_mode_instructions`
    /// appended and the reply text is parsed with `parse_action_block`.
    Text,
}

/// How hard the model should think before answering, where the provider has such a
/// setting: OpenAI's `reasoning_effort`, Anthropic's extended thinking (a budget of
/// 1,024 / 4,096 / 16,000 tokens).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// Little.
    Low,
    /// Some.
    Medium,
    /// Much.
    High,
}

impl Effort {
    /// The name the OpenAI API takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }

    /// Anthropic's thinking budget for it.
    pub fn thinking_budget(self) -> u32 {
        match self {
            Effort::Low => 1024,
            Effort::Medium => 4096,
            Effort::High => 16_000,
        }
    }
}

/// Exactly what is sent: one system message, one user message, the tools.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// 1-based step number of the executor (used by `ReplayProvider`).
    pub step: u64,
    /// Model identifier sent to the API.
    pub model: String,
    /// The system message.
    pub system: String,
    /// The user message (the whole, freshly built context of this step).
    pub user: String,
    /// The tools the model may call (shared: a phase offers the same list step after
    /// step, and the prompt, the request and the budget's count all hold it).
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Output token limit (`max_tokens`).
    pub max_output_tokens: u32,
    /// How the tools are offered.
    pub tool_mode: ToolMode,
    /// Thinking effort (`None`: the provider's default, nothing sent).
    pub effort: Option<Effort>,
}

/// Token usage reported by the provider for one call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    /// Prompt tokens (`input_tokens` / `prompt_tokens`).
    pub input_tokens: u64,
    /// Completion tokens (`output_tokens` / `completion_tokens`).
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache (billed at the
    /// cached-input price): OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's
    /// `cache_read_input_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the model answered, already classified. Bad answers are values, not
/// errors.
///
/// If the model returns several tool calls, the first one is taken and the
/// rest are ignored (the executor runs exactly one action per step). The same
/// holds for several ` ```action ` blocks in text mode.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelReply {
    /// One tool call with a JSON object as arguments.
    ToolCall {
        /// Name of the called tool (not checked against the offered tools).
        name: String,
        /// The arguments; always a JSON object.
        arguments: serde_json::Value,
    },
    /// No tool call at all: plain text, or an empty answer. The text is
    /// whatever the model wrote (possibly empty).
    NoToolCall {
        /// The model's text.
        text: String,
    },
    /// A tool call whose arguments are not valid JSON (or not a JSON object),
    /// or a text-mode action block that could not be parsed.
    MalformedArguments {
        /// Name of the called tool (may be empty when it could not be found).
        name: String,
        /// The raw arguments text as the model wrote it.
        raw: String,
        /// A human/model readable explanation of what is wrong.
        error: String,
    },
}

/// A classified answer plus accounting.
#[derive(Debug, Clone)]
pub struct ModelResponse {
    /// The classified answer.
    pub reply: ModelReply,
    /// Token usage (zeros when the provider reports none).
    pub usage: Usage,
    /// The model that answered (as reported by the API, else the requested one).
    pub model: String,
    /// The exchange on the wire that gave this answer (the request as sent, the reply as
    /// received), for the step's trajectory; `None` where a caller made the response up.
    pub exchange: Option<WireExchange>,
}

/// One model call as it went over the wire: what a step's trajectory keeps.
///
/// Only the attempt whose reply was used is kept; failed attempts are counted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireExchange {
    /// The request as sent.
    pub request: WireRequest,
    /// The reply as received.
    pub reply: WireReply,
    /// Attempts made (1 when the first one answered).
    pub attempts: u32,
}

/// A request as sent: method, URL, headers (key headers always `***`) and the body's
/// exact bytes (JSON text).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireRequest {
    /// `POST` for the HTTP providers, `REPLAY` for a recording.
    pub method: String,
    /// The endpoint, or `replay:<file>#<line>` for a recording.
    pub url: String,
    /// Headers sent, lowercase names; the key's header is `***`.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The body, byte for byte (for a recording: the provider-neutral request as JSON).
    pub body: String,
}

/// A reply as received.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WireReply {
    /// HTTP status (200 for a recording's line).
    pub status: u16,
    /// The body as received (for a recording: its line).
    pub body: String,
}

/// Header names whose value is a credential: recorded as `***` whatever they hold.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
];

/// Which provider to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// An OpenAI-compatible Chat Completions API.
    Openai,
    /// A JSONL recording.
    Replay,
}

impl ProviderKind {
    /// The provider's name as used in config and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::Replay => "replay",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Name of a JSON value's type, for messages.
pub fn json_type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
