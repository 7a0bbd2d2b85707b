//! The Anthropic Messages API provider.

use std::fmt;

use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use serde_json::{json, Value};

use super::http::{normalize_base_url, HttpClient, MissingField};
use super::{
    check_native_tools, classify_arguments, effective_user_message, parse_action_block,
    parse_anthropic_usage, ModelReply, ModelRequest, ModelResponse, ProviderError,
    ProviderSettings, ToolMode, ANTHROPIC_API_KEY_ENV,
};

/// The `anthropic-version` header value sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Talks to `POST {base}/v1/messages`.
///
/// Native mode sends the tools with `tool_choice: {"type": "any"}` and takes
/// the first `tool_use` block of the answer (further ones are ignored); an
/// answer without one is [`ModelReply::NoToolCall`] with the text blocks
/// joined. Text mode sends no tools and parses the text with
/// [`parse_action_block`].
pub struct AnthropicProvider {
    http: HttpClient,
    base_url: String,
    key_header: HeaderValue,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("base_url", &self.base_url)
            .field("api_key", &"***")
            .field("http", &self.http)
            .finish()
    }
}

impl AnthropicProvider {
    /// A provider for `base_url` (e.g. `https://api.anthropic.com`, without
    /// `/v1`) with an explicit key. Timeout and retries come from `settings`,
    /// as does the env variable named in auth errors (`api_key_env`, else
    /// `ANTHROPIC_API_KEY`); `settings.kind` and `settings.base_url` are
    /// ignored.
    pub fn new(
        base_url: &str,
        api_key: String,
        settings: &ProviderSettings,
    ) -> Result<Self, ProviderError> {
        let env_var = settings
            .api_key_env
            .clone()
            .unwrap_or_else(|| ANTHROPIC_API_KEY_ENV.to_string());
        if api_key.trim().is_empty() {
            return Err(ProviderError::Config(format!(
                "the anthropic provider needs an API key: set the {env_var} environment variable"
            )));
        }
        let http = HttpClient::new(
            "anthropic",
            env_var,
            Some(api_key),
            settings.timeout,
            settings.retry_policy(),
        )?;
        let key_header = http
            .secret_header("")?
            .ok_or_else(|| ProviderError::Config("missing API key".to_string()))?;
        Ok(AnthropicProvider {
            base_url: normalize_base_url("anthropic", base_url)?,
            http,
            key_header,
        })
    }

    /// Reports every retry to `observer`.
    pub(crate) fn set_retry_observer(&mut self, observer: super::http::RetryObserver) {
        self.http.set_observer(observer);
    }

    /// The base URL in use (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The env variable named in auth errors.
    pub fn api_key_env(&self) -> &str {
        self.http.env_var()
    }

    /// The retry policy in use.
    pub fn retry_policy(&self) -> super::RetryPolicy {
        self.http.retry()
    }

    /// The JSON body sent for `req`.
    pub fn request_body(req: &ModelRequest) -> Value {
        let mut body = json!({
            "model": req.model,
            "max_tokens": req.max_output_tokens,
            "system": req.system,
            "messages": [{"role": "user", "content": effective_user_message(req)}],
        });
        if req.tool_mode == ToolMode::Native {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.input_schema,
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!({"type": "any"});
        }
        if let Some(effort) = req.effort {
            // Extended thinking: the budget comes on top of the answer's tokens, and a
            // forced tool choice is not allowed with it (an answer without a tool call
            // is fed back like any other).
            let budget = effort.thinking_budget();
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
            body["max_tokens"] = json!(req.max_output_tokens.saturating_add(budget));
            if req.tool_mode == ToolMode::Native {
                body["tool_choice"] = json!({"type": "auto"});
            }
        }
        body
    }

    /// Classify a 2xx response body; `Err` says why it is not a valid
    /// Messages response.
    pub fn parse_response(req: &ModelRequest, body: &Value) -> Result<ModelResponse, MissingField> {
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or(MissingField("response has no `content` array"))?;
        let text = content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        let reply = match req.tool_mode {
            ToolMode::Text => parse_action_block(&text),
            ToolMode::Native => {
                let tool_use = content
                    .iter()
                    .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
                match tool_use {
                    Some(block) => {
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or(MissingField("tool_use block has no `name`"))?
                            .to_string();
                        classify_arguments(name, block.get("input").unwrap_or(&Value::Null))
                    }
                    None => ModelReply::NoToolCall { text },
                }
            }
        };
        Ok(ModelResponse {
            reply,
            usage: parse_anthropic_usage(body),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&req.model)
                .to_string(),
            exchange: None,
        })
    }

    /// Send one request (with retries) and classify the answer.
    pub async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        check_native_tools(req)?;
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", self.key_header.clone());
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let url = format!("{}/v1/messages", self.base_url);
        let body = Self::request_body(req);
        let (mut response, exchange) = self
            .http
            .post_json(&url, headers, &body, |b| Self::parse_response(req, b))
            .await?;
        response.exchange = Some(exchange);
        Ok(response)
    }
}
