//! Model providers for the stateless executor.
//!
//! Every model call is exactly two messages (one system message, one user
//! message) plus the offered tools, and the model must answer with exactly one
//! tool call. Providers turn a [`ModelRequest`] into one HTTP call (with
//! retries) and classify the answer into a [`ModelReply`]:
//!
//! * bad *answers* (no tool call, unparseable arguments) are values
//!   ([`ModelReply::NoToolCall`], [`ModelReply::MalformedArguments`]) that the
//!   executor can feed back to the model;
//! * only transport, protocol and configuration problems are errors
//!   ([`ProviderError`]).
//!
//! Three providers exist:
//!
//! * [`AnthropicProvider`]: the Anthropic Messages API (`POST {base}/v1/messages`).
//! * [`OpenAiProvider`]: any OpenAI-compatible Chat Completions API
//!   (`POST {base}/chat/completions`, where `base` already ends in `/v1`).
//! * [`ReplayProvider`]: answers from a JSONL recording (see [`record_line`]),
//!   for deterministic offline runs.
//!
//! Tools are offered natively ([`ToolMode::Native`]) or, for models without
//! tool calling, in the text fallback ([`ToolMode::Text`]): the tool list and
//! the format of a fenced ` ```action ` block are appended to the user message
//! ([`text_mode_instructions`]) and the reply text is parsed with
//! [`parse_action_block`].
//!
//! Besides the providers, [`EmbeddingsClient`] asks an OpenAI-compatible embeddings
//! endpoint for vectors (the trace database's semantic precedents).
//!
//! API keys never appear in errors or `Debug` output.

mod anthropic;
pub mod embeddings;
mod http;
mod openai;
mod replay;

use std::path::PathBuf;
use std::time::Duration;

pub use agentforge_core::model::*;
pub use agentforge_core::text_mode::{parse_action_block, text_mode_instructions};
pub use anthropic::AnthropicProvider;
pub use embeddings::{EmbeddingsClient, EmbeddingsError, EmbeddingsSettings, EMBEDDINGS_RETRY};
pub use http::{client_builder, MissingField, RetryNotice, RetryObserver, RetryPolicy};
pub use openai::OpenAiProvider;
pub use replay::{neutral_body, record_line, ReplayProvider};

/// Provider errors: only transport, protocol and configuration problems.
///
/// Messages never contain API keys.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The API rejected the credentials (HTTP 401/403). Not retried.
    #[error("{provider} rejected the credentials (HTTP {status}): {message}; check the {env_var} environment variable")]
    Auth {
        /// Provider name (`anthropic`, `openai`).
        provider: &'static str,
        /// The environment variable holding the key, to fix.
        env_var: String,
        /// HTTP status (401 or 403).
        status: u16,
        /// The API's error message (with the key redacted).
        message: String,
    },
    /// The API rejected the request with another 4xx status. Not retried.
    #[error("request rejected (HTTP {status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The API's error message.
        message: String,
    },
    /// All attempts failed with retryable errors (429, 5xx, timeouts,
    /// connection errors).
    #[error("giving up after {attempts} attempts; last error: {last}")]
    RetriesExhausted {
        /// Number of attempts made (1 + retries).
        attempts: u32,
        /// Description of the last failure.
        last: String,
    },
    /// The last attempt answered 2xx with a body that is not a valid response
    /// (garbage, wrong shape), after all retries.
    #[error("invalid response from provider: {0}")]
    InvalidResponse(String),
    /// Bad configuration (missing key, bad URL, unusable request...).
    #[error("provider configuration error: {0}")]
    Config(String),
    /// The replay recording cannot answer (missing file, bad line, step past
    /// the end).
    #[error("replay error: {0}")]
    Replay(String),
}

/// Provider configuration (read from config by the caller).
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// Which provider.
    pub kind: ProviderKind,
    /// Base URL; else `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the
    /// public default. For OpenAI it includes `/v1`.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the key, overriding
    /// `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`.
    pub api_key_env: Option<String>,
    /// JSONL recording for [`ProviderKind::Replay`].
    pub replay_path: Option<PathBuf>,
    /// Timeout of one HTTP attempt (connect + request + response body).
    pub timeout: Duration,
    /// Retries after the first attempt (so `max_retries + 1` attempts).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles each retry.
    pub initial_backoff: Duration,
    /// Upper bound of the exponential backoff.
    pub max_backoff: Duration,
}

impl ProviderSettings {
    /// Settings with sensible defaults for `kind`: 300 s timeout, 5 retries,
    /// 1 s initial backoff, 60 s max backoff, no overrides.
    pub fn new(kind: ProviderKind) -> Self {
        ProviderSettings {
            kind,
            base_url: None,
            api_key_env: None,
            replay_path: None,
            timeout: Duration::from_secs(300),
            max_retries: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }

    /// The retry policy part of these settings.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.max_retries,
            initial_backoff: self.initial_backoff,
            max_backoff: self.max_backoff,
        }
    }

    /// The base URL given explicitly (the settings', else the provider's
    /// `*_BASE_URL` variable read through `env`); `None` when the public
    /// default applies or for replay.
    pub fn explicit_base_url(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let var = match self.kind {
            ProviderKind::Anthropic => ANTHROPIC_BASE_URL_ENV,
            ProviderKind::Openai => OPENAI_BASE_URL_ENV,
            ProviderKind::Replay => return None,
        };
        self.base_url
            .clone()
            .or_else(|| env(var))
            .filter(|v| !v.trim().is_empty())
    }

    /// The environment variable holding the key for this provider (the
    /// override, else the provider's default; `None` for replay).
    pub fn key_env_var(&self) -> Option<String> {
        if let Some(v) = &self.api_key_env {
            return Some(v.clone());
        }
        match self.kind {
            ProviderKind::Anthropic => Some(ANTHROPIC_API_KEY_ENV.to_string()),
            ProviderKind::Openai => Some(OPENAI_API_KEY_ENV.to_string()),
            ProviderKind::Replay => None,
        }
    }
}

/// A ready provider.
#[derive(Debug)]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic(AnthropicProvider),
    /// OpenAI-compatible Chat Completions API.
    OpenAi(OpenAiProvider),
    /// JSONL recording.
    Replay(ReplayProvider),
}

impl Provider {
    /// Build from settings, reading the process environment: the key from
    /// `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` (unless `api_key_env` overrides
    /// the name) and the base URL from settings, else `ANTHROPIC_BASE_URL` /
    /// `OPENAI_BASE_URL`, else the public defaults
    /// (`https://api.anthropic.com`, `https://api.openai.com/v1`).
    ///
    /// A missing key is a [`ProviderError::Config`] naming the variable,
    /// except for OpenAI-compatible servers with a base URL set (local servers
    /// often need no key): then no `Authorization` header is sent.
    pub fn from_settings(s: &ProviderSettings) -> Result<Provider, ProviderError> {
        Self::from_settings_with_env(s, &|name| std::env::var(name).ok())
    }

    /// Like [`Provider::from_settings`], with the environment given as a
    /// lookup function (for tests). Empty values count as unset.
    pub fn from_settings_with_env(
        s: &ProviderSettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Provider, ProviderError> {
        let lookup = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        match s.kind {
            ProviderKind::Anthropic => {
                let env_var = s.key_env_var().unwrap_or_default();
                let base = s
                    .base_url
                    .clone()
                    .or_else(|| lookup(ANTHROPIC_BASE_URL_ENV))
                    .unwrap_or_else(|| DEFAULT_ANTHROPIC_BASE_URL.to_string());
                let key = lookup(&env_var).ok_or_else(|| {
                    ProviderError::Config(format!(
                        "the anthropic provider needs an API key: set the {env_var} environment variable"
                    ))
                })?;
                Ok(Provider::Anthropic(AnthropicProvider::new(&base, key, s)?))
            }
            ProviderKind::Openai => {
                let env_var = s.key_env_var().unwrap_or_default();
                let explicit_base = s.base_url.clone().or_else(|| lookup(OPENAI_BASE_URL_ENV));
                let key = lookup(&env_var);
                if key.is_none() && explicit_base.is_none() {
                    return Err(ProviderError::Config(format!(
                        "the openai provider needs an API key: set the {env_var} environment variable \
                         (or set a base URL, e.g. {OPENAI_BASE_URL_ENV}, for a local server without a key)"
                    )));
                }
                let base = explicit_base.unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_string());
                Ok(Provider::OpenAi(OpenAiProvider::new(&base, key, s)?))
            }
            ProviderKind::Replay => {
                let path = s.replay_path.as_ref().ok_or_else(|| {
                    ProviderError::Config(
                        "the replay provider needs a recording: set replay_path".to_string(),
                    )
                })?;
                Ok(Provider::Replay(ReplayProvider::open(path)?))
            }
        }
    }

    /// Reports every retry of an HTTP provider to `observer` before its wait (one
    /// call per retry: the failed attempt, its cause, the wait). The replay
    /// provider never retries.
    pub fn on_retry(&mut self, observer: RetryObserver) {
        match self {
            Provider::Anthropic(p) => p.set_retry_observer(observer),
            Provider::OpenAi(p) => p.set_retry_observer(observer),
            Provider::Replay(_) => {}
        }
    }

    /// Provider name: `anthropic`, `openai` or `replay`.
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Anthropic(_) => ProviderKind::Anthropic.as_str(),
            Provider::OpenAi(_) => ProviderKind::Openai.as_str(),
            Provider::Replay(_) => ProviderKind::Replay.as_str(),
        }
    }

    /// Send one request (with retries for HTTP providers) and classify the
    /// answer.
    pub async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        match self {
            Provider::Anthropic(p) => p.complete(req).await,
            Provider::OpenAi(p) => p.complete(req).await,
            Provider::Replay(p) => p.complete(req).await,
        }
    }
}

/// The user message actually sent: in text mode the instructions are appended.
fn effective_user_message(req: &ModelRequest) -> String {
    match req.tool_mode {
        ToolMode::Native => req.user.clone(),
        ToolMode::Text => format!("{}\n\n{}", req.user, text_mode_instructions(&req.tools)),
    }
}

/// Native mode needs tools to call; an empty list is a caller bug.
fn check_native_tools(req: &ModelRequest) -> Result<(), ProviderError> {
    if req.tool_mode == ToolMode::Native && req.tools.is_empty() {
        return Err(ProviderError::Config(
            "native tool mode needs at least one tool to offer".to_string(),
        ));
    }
    Ok(())
}

/// Classify a tool call whose arguments came as a JSON value that may be an
/// object (good), a string holding JSON (OpenAI style), or anything else.
fn classify_arguments(name: String, arguments: &serde_json::Value) -> ModelReply {
    match arguments {
        serde_json::Value::Object(_) => ModelReply::ToolCall {
            name,
            arguments: arguments.clone(),
        },
        serde_json::Value::String(raw) => classify_raw_arguments(name, raw),
        serde_json::Value::Null => ModelReply::ToolCall {
            name,
            arguments: serde_json::Value::Object(Default::default()),
        },
        other => ModelReply::MalformedArguments {
            name,
            raw: other.to_string(),
            error: format!(
                "tool arguments must be a JSON object, got {}",
                agentforge_core::model::json_type_name(other)
            ),
        },
    }
}

/// Parse raw argument text (a JSON document). Empty text counts as `{}`
/// (some servers send that for tools without parameters).
fn classify_raw_arguments(name: String, raw: &str) -> ModelReply {
    if raw.trim().is_empty() {
        return ModelReply::ToolCall {
            name,
            arguments: serde_json::Value::Object(Default::default()),
        };
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(v @ serde_json::Value::Object(_)) => ModelReply::ToolCall { name, arguments: v },
        Ok(other) => ModelReply::MalformedArguments {
            name,
            raw: raw.to_string(),
            error: format!(
                "tool arguments must be a JSON object, got {}",
                agentforge_core::model::json_type_name(&other)
            ),
        },
        Err(e) => ModelReply::MalformedArguments {
            name,
            raw: raw.to_string(),
            error: format!("tool arguments are not valid JSON: {e}"),
        },
    }
}

/// Read the usage of an Anthropic Messages response. Its `input_tokens` leaves out the
/// prompt tokens read from or written to the prompt cache; they are added back, so
/// `input_tokens` is the whole prompt in both wire formats.
fn parse_anthropic_usage(body: &serde_json::Value) -> Usage {
    let usage = &body["usage"];
    let n = |k: &str| usage[k].as_u64().unwrap_or(0);
    let cached = n("cache_read_input_tokens");
    Usage {
        input_tokens: n("input_tokens") + n("cache_creation_input_tokens") + cached,
        output_tokens: n("output_tokens"),
        cached_input_tokens: cached,
    }
}

/// Read the usage of an OpenAI-compatible chat completion (`prompt_tokens` includes the
/// cached ones, `prompt_tokens_details.cached_tokens`).
fn parse_openai_usage(body: &serde_json::Value) -> Usage {
    let usage = &body["usage"];
    Usage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        cached_input_tokens: usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn anthropic_missing_key_names_variable() {
        let s = ProviderSettings::new(ProviderKind::Anthropic);
        let err = Provider::from_settings_with_env(&s, &env_of(&[])).unwrap_err();
        assert!(matches!(err, ProviderError::Config(_)));
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
    }

    #[test]
    fn key_env_override_is_used_and_named() {
        let mut s = ProviderSettings::new(ProviderKind::Anthropic);
        s.api_key_env = Some("MY_KEY".into());
        let err = Provider::from_settings_with_env(&s, &env_of(&[("ANTHROPIC_API_KEY", "x")]))
            .unwrap_err();
        assert!(err.to_string().contains("MY_KEY"), "{err}");
        let p = Provider::from_settings_with_env(&s, &env_of(&[("MY_KEY", "sekrit-123")])).unwrap();
        assert_eq!(p.name(), "anthropic");
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("sekrit-123"), "{dbg}");
        assert!(dbg.contains("***"), "{dbg}");
    }

    #[test]
    fn base_url_resolution() {
        let s = ProviderSettings::new(ProviderKind::Anthropic);
        let p =
            Provider::from_settings_with_env(&s, &env_of(&[("ANTHROPIC_API_KEY", "k")])).unwrap();
        let Provider::Anthropic(a) = &p else { panic!() };
        assert_eq!(a.base_url(), "https://api.anthropic.com");

        let p = Provider::from_settings_with_env(
            &s,
            &env_of(&[
                ("ANTHROPIC_API_KEY", "k"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
            ]),
        )
        .unwrap();
        let Provider::Anthropic(a) = &p else { panic!() };
        assert_eq!(a.base_url(), "http://127.0.0.1:9");

        let mut s2 = s.clone();
        s2.base_url = Some("http://127.0.0.1:7".into());
        let p = Provider::from_settings_with_env(
            &s2,
            &env_of(&[
                ("ANTHROPIC_API_KEY", "k"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
            ]),
        )
        .unwrap();
        let Provider::Anthropic(a) = &p else { panic!() };
        assert_eq!(a.base_url(), "http://127.0.0.1:7");
    }

    #[test]
    fn openai_key_optional_only_with_base_url() {
        let s = ProviderSettings::new(ProviderKind::Openai);
        let err = Provider::from_settings_with_env(&s, &env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");

        let p = Provider::from_settings_with_env(
            &s,
            &env_of(&[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")]),
        )
        .unwrap();
        let Provider::OpenAi(o) = &p else { panic!() };
        assert_eq!(o.base_url(), "http://127.0.0.1:8080/v1");
        assert!(!o.has_api_key());

        let p = Provider::from_settings_with_env(&s, &env_of(&[("OPENAI_API_KEY", "k")])).unwrap();
        let Provider::OpenAi(o) = &p else { panic!() };
        assert_eq!(o.base_url(), "https://api.openai.com/v1");
        assert!(o.has_api_key());
        assert_eq!(p.name(), "openai");
    }

    #[test]
    fn replay_needs_path() {
        let s = ProviderSettings::new(ProviderKind::Replay);
        let err = Provider::from_settings_with_env(&s, &env_of(&[])).unwrap_err();
        assert!(matches!(err, ProviderError::Config(_)), "{err}");
    }

    #[test]
    fn argument_classification() {
        assert_eq!(
            classify_raw_arguments("t".into(), r#"{"a":1}"#),
            ModelReply::ToolCall {
                name: "t".into(),
                arguments: json!({"a":1})
            }
        );
        assert_eq!(
            classify_raw_arguments("t".into(), "  "),
            ModelReply::ToolCall {
                name: "t".into(),
                arguments: json!({})
            }
        );
        let ModelReply::MalformedArguments { name, raw, error } =
            classify_raw_arguments("t".into(), "{bad")
        else {
            panic!()
        };
        assert_eq!((name.as_str(), raw.as_str()), ("t", "{bad"));
        assert!(error.contains("not valid JSON"), "{error}");
        let ModelReply::MalformedArguments { error, .. } =
            classify_raw_arguments("t".into(), "[1]")
        else {
            panic!()
        };
        assert!(error.contains("an array"), "{error}");
        assert_eq!(
            classify_arguments("t".into(), &json!("{\"p\":\"x\"}")),
            ModelReply::ToolCall {
                name: "t".into(),
                arguments: json!({"p":"x"})
            }
        );
        assert!(matches!(
            classify_arguments("t".into(), &json!(3)),
            ModelReply::MalformedArguments { .. }
        ));
    }

    #[test]
    fn kinds_serialize_snake_case() {
        assert_eq!(
            serde_json::to_value(ProviderKind::Openai).unwrap(),
            json!("openai")
        );
        assert_eq!(serde_json::to_value(ToolMode::Text).unwrap(), json!("text"));
        assert_eq!(ToolMode::default(), ToolMode::Native);
    }
}
