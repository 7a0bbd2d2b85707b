//! Provider tests against the scripted LLM server (offline, 127.0.0.1 only).

use crate::support;

use std::time::{Duration, Instant};

use agentforge::providers::{
    record_line, AnthropicProvider, ModelReply, ModelRequest, OpenAiProvider, Provider,
    ProviderError, ProviderKind, ProviderSettings, ReplayProvider, ToolMode, ToolSpec, Usage,
};
use serde_json::{json, Value};
use support::scripted_server::{
    KeyExpectation, Protocol, Scripted, ScriptedServer, ToolsExpectation,
};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

fn settings(kind: ProviderKind) -> ProviderSettings {
    let mut s = ProviderSettings::new(kind);
    s.timeout = Duration::from_secs(10);
    s.max_retries = 3;
    s.initial_backoff = Duration::from_millis(10);
    s.max_backoff = Duration::from_millis(40);
    s
}

fn kind_of(p: Protocol) -> ProviderKind {
    match p {
        Protocol::Anthropic => ProviderKind::Anthropic,
        Protocol::OpenAi => ProviderKind::Openai,
    }
}

fn env_var_of(p: Protocol) -> &'static str {
    match p {
        Protocol::Anthropic => "ANTHROPIC_API_KEY",
        Protocol::OpenAi => "OPENAI_API_KEY",
    }
}

fn provider_with(server: &ScriptedServer, s: &ProviderSettings) -> Provider {
    match server.protocol() {
        Protocol::Anthropic => {
            Provider::Anthropic(AnthropicProvider::new(&server.base_url(), KEY.into(), s).unwrap())
        }
        Protocol::OpenAi => {
            Provider::OpenAi(OpenAiProvider::new(&server.base_url(), Some(KEY.into()), s).unwrap())
        }
    }
}

fn provider(server: &ScriptedServer) -> Provider {
    provider_with(server, &settings(kind_of(server.protocol())))
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the workspace.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Relative path."}},
                "required": ["path"]
            }),
        },
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace text in a file.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old": {"type": "string"},
                    "new": {"type": "string"}
                },
                "required": ["path", "old", "new"]
            }),
        },
    ]
}

fn request(step: u64, mode: ToolMode) -> ModelRequest {
    ModelRequest {
        step,
        model: "test-model-1".into(),
        system: "You are a careful coding agent.".into(),
        user: format!("Step {step}: the task is to fix the bug in src/lib.rs."),
        tools: tools().into(),
        max_output_tokens: 1024,
        tool_mode: mode,
        effort: None,
    }
}

fn read_call() -> Scripted {
    Scripted::tool_call("read_file", json!({"path": "src/lib.rs"}))
}

fn assert_read_call(reply: &ModelReply) {
    assert_eq!(
        reply,
        &ModelReply::ToolCall {
            name: "read_file".into(),
            arguments: json!({"path": "src/lib.rs"}),
        }
    );
}

/// Runs a check once per protocol, each on its own server.
macro_rules! both_protocols {
    ($name:ident, $check:ident) => {
        mod $name {
            use super::*;
            #[tokio::test]
            async fn anthropic() {
                $check(Protocol::Anthropic).await;
            }
            #[tokio::test]
            async fn openai() {
                $check(Protocol::OpenAi).await;
            }
        }
    };
}

// ---------------------------------------------------------------- happy path

async fn check_happy_path(p: Protocol) {
    let server = ScriptedServer::builder(p)
        .api_key(KEY)
        .script([
            read_call().with_usage(123, 45),
            Scripted::tool_call("edit_file", json!({"path": "a", "old": "x", "new": "y"})),
        ])
        .start()
        .await;
    let provider = provider(&server);
    let req = request(1, ToolMode::Native);
    let resp = provider.complete(&req).await.unwrap();
    assert_read_call(&resp.reply);
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 123,
            output_tokens: 45,
            cached_input_tokens: 0,
        }
    );
    assert_eq!(resp.model, "test-model-1");

    // A second call carries no history: again exactly system + user.
    let req2 = request(2, ToolMode::Native);
    let resp2 = provider.complete(&req2).await.unwrap();
    assert!(matches!(resp2.reply, ModelReply::ToolCall { ref name, .. } if name == "edit_file"));

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for (r, sent) in reqs.iter().zip([&req, &req2]) {
        assert!(r.is_valid(), "{:?}", r.validation_error);
        assert_eq!(r.method, "POST");
        assert_eq!(r.model(), Some("test-model-1"));
        assert_eq!(r.body["max_tokens"], json!(1024));
        assert_eq!(r.system_text(), sent.system);
        assert_eq!(r.user_text(), sent.user);
        assert_eq!(r.tool_names(), vec!["read_file", "edit_file"]);
        assert_eq!(r.header("content-type"), Some("application/json"));
        match p {
            Protocol::Anthropic => {
                assert_eq!(r.path, "/v1/messages");
                assert_eq!(r.header("x-api-key"), Some(KEY));
                assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(r.messages().len(), 1);
                assert_eq!(r.body["system"], json!(sent.system));
                assert_eq!(r.body["tool_choice"], json!({"type": "any"}));
                assert_eq!(r.body["tools"][0]["input_schema"], tools()[0].input_schema);
                assert_eq!(
                    r.body["tools"][1]["description"],
                    json!("Replace text in a file.")
                );
                assert!(r.header("authorization").is_none());
            }
            Protocol::OpenAi => {
                assert_eq!(r.path, "/v1/chat/completions");
                assert_eq!(
                    r.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                );
                let msgs = r.messages();
                assert_eq!(msgs.len(), 2);
                assert_eq!(msgs[0]["role"], "system");
                assert_eq!(msgs[1]["role"], "user");
                assert_eq!(r.body["tool_choice"], json!("required"));
                assert_eq!(r.body["tools"][0]["type"], json!("function"));
                assert_eq!(
                    r.body["tools"][0]["function"]["parameters"],
                    tools()[0].input_schema
                );
                assert!(r.header("x-api-key").is_none());
            }
        }
    }
    assert_eq!(server.remaining(), 0);
}
both_protocols!(happy_path, check_happy_path);

// ------------------------------------------------------------------ retries

async fn check_429_retry_after(p: Protocol) {
    let server =
        ScriptedServer::start(p, vec![Scripted::status_retry_after(429, 1), read_call()]).await;
    let start = Instant::now();
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "retried exactly once");
    // Backoff is configured at 10-40 ms: only retry-after explains >= 1 s.
    assert!(start.elapsed() >= Duration::from_secs(1));
    let gap = reqs[1].received_at.duration_since(reqs[0].received_at);
    assert!(
        gap >= Duration::from_millis(990),
        "retry came after {gap:?}"
    );
}
both_protocols!(retry_after_429_is_honoured, check_429_retry_after);

async fn check_status_then_success(p: Protocol, status: u16) {
    let server = ScriptedServer::start(p, vec![Scripted::status(status), read_call()]).await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].answered, format!("status {status}"));
}

async fn check_500_then_success(p: Protocol) {
    check_status_then_success(p, 500).await;
}
both_protocols!(server_error_500_is_retried, check_500_then_success);

async fn check_529_then_success(p: Protocol) {
    check_status_then_success(p, 529).await;
}
both_protocols!(overloaded_529_is_retried, check_529_then_success);

async fn check_timeout_then_success(p: Protocol) {
    let server = ScriptedServer::start(
        p,
        vec![
            Scripted::delay(Duration::from_secs(6), read_call()),
            read_call(),
        ],
    )
    .await;
    let mut s = settings(kind_of(p));
    s.timeout = Duration::from_millis(800);
    let start = Instant::now();
    let resp = provider_with(&server, &s)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
    assert_eq!(server.request_count(), 2);
    assert!(start.elapsed() >= Duration::from_millis(800));
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "did not wait for the slow answer"
    );
}
both_protocols!(timeout_is_retried, check_timeout_then_success);

async fn check_garbage_then_success(p: Protocol) {
    let server = ScriptedServer::start(
        p,
        vec![
            Scripted::garbage(),
            Scripted::raw(200, r#"{"unexpected": true}"#),
            read_call(),
        ],
    )
    .await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
    assert_eq!(
        server.request_count(),
        3,
        "non-JSON and wrong-shape bodies are both retried"
    );
}
both_protocols!(garbage_body_is_retried, check_garbage_then_success);

async fn check_dropped_connection_then_success(p: Protocol) {
    let server = ScriptedServer::start(p, vec![Scripted::drop_connection(), read_call()]).await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].answered, "drop");
}
both_protocols!(
    dropped_connection_is_retried,
    check_dropped_connection_then_success
);

async fn check_retries_exhausted(p: Protocol) {
    let server = ScriptedServer::start(
        p,
        vec![
            Scripted::status(500),
            Scripted::status(503),
            Scripted::status(500),
            read_call(),
        ],
    )
    .await;
    let mut s = settings(kind_of(p));
    s.max_retries = 2;
    let err = provider_with(&server, &s)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    match &err {
        ProviderError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 3);
            assert!(last.contains("500"), "{last}");
        }
        other => panic!("expected RetriesExhausted, got {other:?}"),
    }
    assert_eq!(server.request_count(), 3);
    assert_eq!(server.remaining(), 1);
}
both_protocols!(retries_exhausted, check_retries_exhausted);

async fn check_garbage_exhausted(p: Protocol) {
    let server = ScriptedServer::start(p, vec![Scripted::garbage(), Scripted::garbage()]).await;
    let mut s = settings(kind_of(p));
    s.max_retries = 1;
    let err = provider_with(&server, &s)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidResponse(_)), "{err:?}");
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(server.request_count(), 2);
}
both_protocols!(
    garbage_after_all_retries_is_invalid_response,
    check_garbage_exhausted
);

async fn check_script_exhausted(p: Protocol) {
    let server = ScriptedServer::start(p, vec![]).await;
    let mut s = settings(kind_of(p));
    s.max_retries = 1;
    let err = provider_with(&server, &s)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("script exhausted"), "{err}");
    assert_eq!(server.request_count(), 2);
}
both_protocols!(empty_script_answers_500, check_script_exhausted);

// ------------------------------------------------------ non-retryable errors

async fn check_401_auth(p: Protocol) {
    let server = ScriptedServer::start(p, vec![Scripted::status(401), read_call()]).await;
    let err = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    match &err {
        ProviderError::Auth {
            provider,
            env_var,
            status,
            ..
        } => {
            assert_eq!(*provider, kind_of(p).as_str());
            assert_eq!(env_var, env_var_of(p));
            assert_eq!(*status, 401);
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(env_var_of(p)), "{msg}");
    assert!(
        !msg.contains(KEY) && !format!("{err:?}").contains(KEY),
        "{msg}"
    );
    assert_eq!(server.request_count(), 1, "auth errors are not retried");
}
both_protocols!(unauthorized_names_env_var, check_401_auth);

async fn check_wrong_key_is_auth(p: Protocol) {
    // The server validates the key itself and answers 401 for a wrong one.
    let server = ScriptedServer::builder(p)
        .api_key("the-right-key")
        .script([read_call()])
        .start()
        .await;
    let mut s = settings(kind_of(p));
    s.api_key_env = Some("MY_CUSTOM_KEY".into());
    let err = provider_with(&server, &s)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Auth { status: 401, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("MY_CUSTOM_KEY"), "{err}");
    assert!(!err.to_string().contains(KEY));
    assert_eq!(server.remaining(), 1);
}
both_protocols!(wrong_key_is_auth_error, check_wrong_key_is_auth);

async fn check_400_rejected(p: Protocol) {
    let server = ScriptedServer::start(p, vec![Scripted::status(400), read_call()]).await;
    let err = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    match &err {
        ProviderError::Rejected { status, message } => {
            assert_eq!(*status, 400);
            assert!(message.contains("scripted status 400"), "{message}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1, "4xx is not retried");
}
both_protocols!(bad_request_is_rejected_immediately, check_400_rejected);

async fn check_key_redacted_from_echo(p: Protocol) {
    let body = json!({"error": {"message": format!("key {KEY} is not allowed here")}}).to_string();
    let server = ScriptedServer::start(p, vec![Scripted::raw(422, body)]).await;
    let err = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, ProviderError::Rejected { status: 422, .. }),
        "{err:?}"
    );
    assert!(
        !msg.contains(KEY) && msg.contains("key *** is not allowed"),
        "{msg}"
    );
}
both_protocols!(echoed_key_is_redacted, check_key_redacted_from_echo);

// ------------------------------------------------------------ classification

async fn check_text_only(p: Protocol) {
    let server = ScriptedServer::start(p, vec![Scripted::text("I think I am done.")]).await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_eq!(
        resp.reply,
        ModelReply::NoToolCall {
            text: "I think I am done.".into()
        }
    );
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 0,
        }
    );
}
both_protocols!(text_only_is_no_tool_call, check_text_only);

async fn check_malformed(p: Protocol) {
    let server = ScriptedServer::start(
        p,
        vec![Scripted::malformed("edit_file", "{\"path\": \"a\",")],
    )
    .await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    match resp.reply {
        ModelReply::MalformedArguments { name, raw, error } => {
            assert_eq!(name, "edit_file");
            assert_eq!(raw, "{\"path\": \"a\",");
            assert!(error.contains("not valid JSON"), "{error}");
        }
        other => panic!("expected MalformedArguments, got {other:?}"),
    }
    assert_eq!(
        server.request_count(),
        1,
        "a bad answer is a value, not retried"
    );
}
both_protocols!(malformed_arguments, check_malformed);

async fn check_first_of_several_calls(p: Protocol) {
    let server = ScriptedServer::start(
        p,
        vec![Scripted::tool_calls(vec![
            ("read_file", json!({"path": "src/lib.rs"})),
            ("edit_file", json!({"path": "x", "old": "a", "new": "b"})),
        ])],
    )
    .await;
    let resp = provider(&server)
        .complete(&request(1, ToolMode::Native))
        .await
        .unwrap();
    assert_read_call(&resp.reply);
}
both_protocols!(
    first_of_several_tool_calls_is_taken,
    check_first_of_several_calls
);

async fn check_text_mode(p: Protocol) {
    let answer = "Let me look.\n\n```action\nname: edit_file\nparameters:\n  path: src/lib.rs\n  old: |\n    fn a() {}\n  new: |\n    fn b() {}\n```\n";
    let server = ScriptedServer::builder(p)
        .tools(ToolsExpectation::Absent)
        .script([Scripted::text(answer), Scripted::text("no block here")])
        .start()
        .await;
    let provider = provider(&server);
    let req = request(1, ToolMode::Text);
    let resp = provider.complete(&req).await.unwrap();
    assert_eq!(
        resp.reply,
        ModelReply::ToolCall {
            name: "edit_file".into(),
            arguments: json!({"path": "src/lib.rs", "old": "fn a() {}\n", "new": "fn b() {}\n"}),
        }
    );
    let resp = provider.complete(&req).await.unwrap();
    assert_eq!(
        resp.reply,
        ModelReply::NoToolCall {
            text: "no block here".into()
        }
    );

    let r = &server.requests()[0];
    assert!(r.is_valid(), "{:?}", r.validation_error);
    assert!(r.body.get("tools").is_none() && r.body.get("tool_choice").is_none());
    let user = r.user_text();
    assert!(user.starts_with(&req.user), "{user}");
    assert!(user.contains("```action"), "{user}");
    assert!(
        user.contains("- read_file: Read a file of the workspace."),
        "{user}"
    );
    assert!(
        user.contains("- edit_file: Replace text in a file."),
        "{user}"
    );
    assert_eq!(r.system_text(), req.system);
}
both_protocols!(text_mode_parses_action_block, check_text_mode);

async fn check_native_without_tools(p: Protocol) {
    let server = ScriptedServer::start(p, vec![read_call()]).await;
    let mut req = request(1, ToolMode::Native);
    req.tools = Vec::new().into();
    let err = provider(&server).complete(&req).await.unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)), "{err:?}");
    assert_eq!(server.request_count(), 0);
}
both_protocols!(
    native_mode_without_tools_is_config_error,
    check_native_without_tools
);

#[tokio::test]
async fn openai_without_key_sends_no_authorization() {
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .key_expectation(KeyExpectation::Absent)
        .script([read_call()])
        .start()
        .await;
    let p = OpenAiProvider::new(&server.base_url(), None, &settings(ProviderKind::Openai)).unwrap();
    assert!(!p.has_api_key());
    let resp = p.complete(&request(1, ToolMode::Native)).await.unwrap();
    assert_read_call(&resp.reply);
    assert!(server.requests()[0].header("authorization").is_none());
}

#[tokio::test]
async fn openai_from_settings_with_base_url_and_no_key() {
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .key_expectation(KeyExpectation::Absent)
        .script([read_call()])
        .start()
        .await;
    let mut s = settings(ProviderKind::Openai);
    s.base_url = Some(server.base_url());
    let p = Provider::from_settings_with_env(&s, &|_| None).unwrap();
    assert_eq!(p.name(), "openai");
    assert_read_call(
        &p.complete(&request(1, ToolMode::Native))
            .await
            .unwrap()
            .reply,
    );
}

#[tokio::test]
async fn anthropic_from_settings_reads_key_and_base_url_from_env() {
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script([read_call()])
        .start()
        .await;
    let base = server.base_url();
    let env = move |name: &str| match name {
        "ANTHROPIC_API_KEY" => Some(KEY.to_string()),
        "ANTHROPIC_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let p = Provider::from_settings_with_env(&settings(ProviderKind::Anthropic), &env).unwrap();
    assert_eq!(p.name(), "anthropic");
    assert!(!format!("{p:?}").contains(KEY));
    assert_read_call(
        &p.complete(&request(1, ToolMode::Native))
            .await
            .unwrap()
            .reply,
    );
}

// ------------------------------------------------- the scripted server itself

#[tokio::test]
async fn scripted_server_rejects_invalid_requests() {
    let openai = ScriptedServer::start(Protocol::OpenAi, vec![read_call()]).await;
    // The host's TLS set-up: the workspace's reqwest has no crypto provider of its own.
    let client = agentforge::providers::client_builder().build().unwrap();
    let url = format!("{}/chat/completions", openai.base_url());
    let mut body = json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "history!"}
        ],
        "tools": [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}],
        "tool_choice": "required"
    });
    let send = |body: Value, auth: Option<&'static str>| {
        let mut rb = client.post(&url).json(&body);
        if let Some(a) = auth {
            rb = rb.header("authorization", a);
        }
        rb.send()
    };
    let resp = send(body.clone(), Some("Bearer k")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let err: Value = resp.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exactly 2"),
        "{err}"
    );

    body["messages"].as_array_mut().unwrap().pop();
    let resp = send(body.clone(), None).await.unwrap();
    assert_eq!(resp.status().as_u16(), 401, "missing key");

    body["tool_choice"] = json!("auto");
    let resp = send(body.clone(), Some("Bearer k")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 400, "tool_choice must be required");

    body["tool_choice"] = json!("required");
    let resp = send(body.clone(), Some("Bearer k")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let reqs = openai.requests();
    assert_eq!(reqs.len(), 4);
    assert!(reqs[..3].iter().all(|r| r.validation_error.is_some()));
    assert!(reqs[3].is_valid());

    let anthropic = ScriptedServer::start(Protocol::Anthropic, vec![read_call()]).await;
    let resp = client
        .post(format!("{}/v1/messages", anthropic.base_url()))
        .header("x-api-key", "k")
        .json(&json!({
            "model": "m", "max_tokens": 10, "system": "s",
            "messages": [{"role": "user", "content": "u"}],
            "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400, "anthropic-version is required");
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(
        anthropic.remaining(),
        1,
        "invalid requests do not consume the script"
    );
    let resp = client
        .get(format!("{}/v1/models", anthropic.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
}

#[test]
fn background_server_serves_a_client_on_another_runtime() {
    let server = ScriptedServer::start_background(
        Protocol::Anthropic,
        vec![Scripted::status(503), read_call().with_usage(7, 3)],
    );
    let addr = server.addr();
    let env = server.env_vars(KEY);
    assert_eq!(
        env[0],
        ("ANTHROPIC_BASE_URL".to_string(), server.base_url())
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resp = rt.block_on(async {
        provider(&server)
            .complete(&request(1, ToolMode::Native))
            .await
            .unwrap()
    });
    assert_read_call(&resp.reply);
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 7,
            output_tokens: 3,
            cached_input_tokens: 0,
        }
    );
    assert!(server.wait_for_requests_blocking(2, Duration::from_secs(1)));
    drop(server);
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "a dropped server stops listening"
    );
}

#[test]
fn background_server_answers_raw_http_without_any_client_runtime() {
    use std::io::{Read, Write};
    let server = ScriptedServer::start_background(Protocol::OpenAi, vec![read_call()]);
    let body = json!({
        "model": "m", "max_tokens": 5,
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        "tools": [{"type": "function", "function": {"name": "read_file", "description": "d", "parameters": {"type": "object"}}}],
        "tool_choice": "required"
    })
    .to_string();
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let json: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        json["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "read_file"
    );
    assert_eq!(
        json["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        json!("{\"path\":\"src/lib.rs\"}")
    );
}

// ------------------------------------------------------------------- replay

fn write_recording(contents: &str) -> tempfile::NamedTempFile {
    use std::io::Write;
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(contents.as_bytes()).unwrap();
    f
}

#[tokio::test]
async fn replay_maps_lines_to_steps() {
    let rec = write_recording(concat!(
        r#"{"tool":"read_file","arguments":{"path":"src/lib.rs"},"usage":{"input_tokens":11,"output_tokens":2}}"#,
        "\n\n   \n",
        r#"{"text":"thinking...\n```action\nname: edit_file\nparameters:\n  path: a\n  old: x\n  new: y\n```"}"#,
        "\n",
        r#"{"malformed":{"name":"edit_file","raw":"{bad"}}"#,
        "\n",
        r#"{"text":"just words"}"#,
        "\n",
    ));
    let mut s = settings(ProviderKind::Replay);
    s.replay_path = Some(rec.path().to_path_buf());
    let p = Provider::from_settings(&s).unwrap();
    assert_eq!(p.name(), "replay");

    let r1 = p.complete(&request(1, ToolMode::Native)).await.unwrap();
    assert_read_call(&r1.reply);
    assert_eq!(
        r1.usage,
        Usage {
            input_tokens: 11,
            output_tokens: 2,
            cached_input_tokens: 0,
        }
    );
    assert_eq!(r1.model, "test-model-1");

    let r2 = p.complete(&request(2, ToolMode::Native)).await.unwrap();
    assert_eq!(
        r2.reply,
        ModelReply::ToolCall {
            name: "edit_file".into(),
            arguments: json!({"path": "a", "old": "x", "new": "y"}),
        }
    );
    assert_eq!(r2.usage, Usage::default());

    let r3 = p.complete(&request(3, ToolMode::Native)).await.unwrap();
    assert!(
        matches!(&r3.reply, ModelReply::MalformedArguments { name, raw, .. } if name == "edit_file" && raw == "{bad"),
        "{:?}",
        r3.reply
    );
    let r4 = p.complete(&request(4, ToolMode::Native)).await.unwrap();
    assert_eq!(
        r4.reply,
        ModelReply::NoToolCall {
            text: "just words".into()
        }
    );

    // Deterministic: asking again gives the same answer.
    let again = p.complete(&request(1, ToolMode::Native)).await.unwrap();
    assert_eq!(again.reply, r1.reply);

    let err = p.complete(&request(5, ToolMode::Native)).await.unwrap_err();
    assert!(matches!(err, ProviderError::Replay(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("4 responses") && msg.contains("step 5"),
        "{msg}"
    );
}

#[tokio::test]
async fn replay_bad_line_names_file_and_line() {
    let rec = write_recording("{\"text\":\"ok\"}\n{\"tool\": \"read_file\", \"arguments\": {\n");
    let p = ReplayProvider::open(rec.path()).unwrap();
    assert_eq!(p.len(), 2);
    assert!(p.complete(&request(1, ToolMode::Native)).await.is_ok());
    let err = p.complete(&request(2, ToolMode::Native)).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ProviderError::Replay(_)));
    assert!(msg.contains(&rec.path().display().to_string()), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");

    let missing = ReplayProvider::open(std::path::Path::new("/nonexistent/rec.jsonl")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/rec.jsonl"),
        "{missing}"
    );
}

#[tokio::test]
async fn recorded_http_session_replays_identically() {
    let server = ScriptedServer::start(
        Protocol::OpenAi,
        vec![
            read_call().with_usage(50, 5),
            Scripted::malformed("edit_file", "{oops"),
            Scripted::text("no action, sorry"),
        ],
    )
    .await;
    let live = provider(&server);
    let mut recording = String::new();
    let mut answers = Vec::new();
    for step in 1..=3 {
        let resp = live
            .complete(&request(step, ToolMode::Native))
            .await
            .unwrap();
        recording.push_str(&record_line(&resp.reply, &resp.usage));
        recording.push('\n');
        answers.push(resp);
    }
    let replay = ReplayProvider::from_jsonl("recording", &recording);
    for (i, live_resp) in answers.iter().enumerate() {
        let r = replay
            .complete(&request(i as u64 + 1, ToolMode::Native))
            .await
            .unwrap();
        assert_eq!(r.reply, live_resp.reply);
        assert_eq!(r.usage, live_resp.usage);
    }
}

/// A role's thinking effort reaches each wire format as that API spells it, and nothing is
/// sent without one.
#[test]
fn thinking_effort_is_sent_as_each_api_spells_it() {
    use agentforge::model::Effort;
    use agentforge::providers::{AnthropicProvider, OpenAiProvider};
    let plain = request(1, ToolMode::Native);
    let a = AnthropicProvider::request_body(&plain);
    assert!(a.get("thinking").is_none());
    assert_eq!(a["tool_choice"]["type"], "any");
    assert!(OpenAiProvider::request_body(&plain)
        .get("reasoning_effort")
        .is_none());

    let mut req = request(1, ToolMode::Native);
    req.effort = Some(Effort::Medium);
    let a = AnthropicProvider::request_body(&req);
    assert_eq!(a["thinking"]["type"], "enabled");
    assert_eq!(a["thinking"]["budget_tokens"], 4096);
    // The thinking budget comes on top of the answer's; a forced tool choice is not
    // accepted with thinking.
    assert_eq!(a["max_tokens"], 1024 + 4096);
    assert_eq!(a["tool_choice"]["type"], "auto");
    let o = OpenAiProvider::request_body(&req);
    assert_eq!(o["reasoning_effort"], "medium");
    assert_eq!(o["tool_choice"], "required");
}
