//! The OpenAI-compatible Chat Completions provider.

use std::fmt;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

use super::http::{normalize_base_url, HttpClient, MissingField};
use super::{
    check_native_tools, classify_arguments, effective_user_message, parse_action_block,
    parse_openai_usage, ModelReply, ModelRequest, ModelResponse, ProviderError, ProviderSettings,
    ToolMode, OPENAI_API_KEY_ENV,
};

/// Talks to `POST {base}/chat/completions`, where `base` already includes the
/// API version (e.g. `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`).
///
/// Native mode sends the tools as `function` tools with
/// `tool_choice: "required"` and takes `choices[0].message.tool_calls[0]`
/// (further calls are ignored). Its `function.arguments` is a JSON string:
/// invalid JSON or a non-object is [`ModelReply::MalformedArguments`] (an
/// empty string counts as `{}`, an object instead of a string is accepted).
/// Text mode sends no tools and parses `message.content` with
/// [`parse_action_block`].
pub struct OpenAiProvider {
    http: HttpClient,
    base_url: String,
    auth_header: Option<HeaderValue>,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("base_url", &self.base_url)
            .field("api_key", &self.auth_header.as_ref().map(|_| "***"))
            .field("http", &self.http)
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider for `base_url` with an explicit key; `None` (or empty) sends
    /// no `Authorization` header (local servers). Timeout and retries come
    /// from `settings`, as does the env variable named in auth errors
    /// (`api_key_env`, else `OPENAI_API_KEY`); `settings.kind` and
    /// `settings.base_url` are ignored.
    pub fn new(
        base_url: &str,
        api_key: Option<String>,
        settings: &ProviderSettings,
    ) -> Result<Self, ProviderError> {
        let env_var = settings
            .api_key_env
            .clone()
            .unwrap_or_else(|| OPENAI_API_KEY_ENV.to_string());
        let api_key = api_key.filter(|k| !k.trim().is_empty());
        let http = HttpClient::new(
            "openai",
            env_var,
            api_key,
            settings.timeout,
            settings.retry_policy(),
        )?;
        let auth_header = http.secret_header("Bearer ")?;
        Ok(OpenAiProvider {
            base_url: normalize_base_url("openai", base_url)?,
            http,
            auth_header,
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

    /// Whether an `Authorization` header is sent.
    pub fn has_api_key(&self) -> bool {
        self.auth_header.is_some()
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
            "messages": [
                {"role": "system", "content": req.system},
                {"role": "user", "content": effective_user_message(req)},
            ],
        });
        if req.tool_mode == ToolMode::Native {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.input_schema,
                        },
                    })
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!("required");
        }
        if let Some(effort) = req.effort {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        body
    }

    /// Classify a 2xx response body; `Err` says why it is not a valid Chat
    /// Completions response.
    pub fn parse_response(req: &ModelRequest, body: &Value) -> Result<ModelResponse, MissingField> {
        let message = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .and_then(|c| c.get("message"))
            .filter(|m| m.is_object())
            .ok_or(MissingField("response has no `choices[0].message` object"))?;
        let text = message_text(message.get("content"));
        let reply = match req.tool_mode {
            ToolMode::Text => parse_action_block(&text),
            ToolMode::Native => {
                let call = message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .and_then(|calls| calls.first());
                match call {
                    Some(call) => {
                        let function = call
                            .get("function")
                            .ok_or(MissingField("tool call has no `function`"))?;
                        let name = function
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or(MissingField("tool call has no `function.name`"))?
                            .to_string();
                        classify_arguments(name, function.get("arguments").unwrap_or(&Value::Null))
                    }
                    None => ModelReply::NoToolCall { text },
                }
            }
        };
        Ok(ModelResponse {
            reply,
            usage: parse_openai_usage(body),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or(&req.model)
                .to_string(),
            exchange: None,
        })
    }

    /// Send one request (with retries) and classify the answer.
    pub async fn complete(&self, req: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        check_native_tools(req)?;
        let mut headers = HeaderMap::new();
        if let Some(auth) = &self.auth_header {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let url = format!("{}/chat/completions", self.base_url);
        let body = Self::request_body(req);
        let (mut response, exchange) = self
            .http
            .post_json(&url, headers, &body, |b| Self::parse_response(req, b))
            .await?;
        response.exchange = Some(exchange);
        Ok(response)
    }
}

/// `message.content` as text: a string, or an array of `{type:"text", text}`
/// parts joined; anything else is empty.
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
