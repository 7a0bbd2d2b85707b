//! A scripted LLM HTTP server for tests, speaking the Anthropic Messages API
//! or the OpenAI-compatible Chat Completions API on `127.0.0.1:<random port>`.
//!
//! * It validates every request for real (method, path, auth and version
//!   headers, required body fields, exactly one system + one user message,
//!   tools and `tool_choice`) and answers an API-style 400 (401 for a wrong
//!   key, 404 for an unknown path) naming the problem. Invalid requests do
//!   not consume the script.
//! * Valid requests are answered from a queue of [`Scripted`] responses: tool
//!   calls, text, malformed arguments, HTTP statuses (with `retry-after`),
//!   garbage bodies, delays, dropped connections, raw responses, or a closure
//!   deciding from the request. An empty queue answers 500 "script exhausted".
//! * Every request is recorded ([`RecordedRequest`]: headers, JSON body,
//!   arrival time, what was answered) for assertions.
//!
//! Every connection is answered with `connection: close`, so each attempt of
//! a client is one connection and one recorded request.
//!
//! Use [`ScriptedServer::start`] (async, on the caller's tokio runtime, e.g.
//! in `#[tokio::test]`) or [`ScriptedServer::start_background`] (sync, on its
//! own thread and runtime: for driving a separate `agentforge` process, or
//! from non-async tests). Dropping the server stops it.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Which API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST /v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01`.
    Anthropic,
    /// `POST /v1/chat/completions`, `Authorization: Bearer`.
    OpenAi,
}

/// Usage reported when a scripted answer does not set one.
pub const DEFAULT_USAGE: (u64, u64) = (100, 20);

/// One scripted answer.
#[derive(Clone)]
pub enum Scripted {
    /// One tool call (Anthropic `tool_use` block / OpenAI `tool_calls[0]`).
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments (sent as an object / as a JSON string for OpenAI).
        arguments: Value,
        /// `(input, output)` tokens.
        usage: (u64, u64),
    },
    /// Several tool calls in one answer.
    ToolCalls {
        /// `(name, arguments)` in order.
        calls: Vec<(String, Value)>,
        /// `(input, output)` tokens.
        usage: (u64, u64),
    },
    /// A text-only answer (also how text-mode ```action blocks are sent).
    Text {
        /// The text.
        text: String,
        /// `(input, output)` tokens.
        usage: (u64, u64),
    },
    /// A tool call whose arguments are the raw (invalid) text `raw`
    /// (OpenAI: `function.arguments`; Anthropic: `input` as a JSON string).
    Malformed {
        /// Tool name.
        name: String,
        /// Raw argument text.
        raw: String,
        /// `(input, output)` tokens.
        usage: (u64, u64),
    },
    /// An HTTP error status with an API-style error body (or `body`).
    Status {
        /// HTTP status.
        status: u16,
        /// `retry-after` header value, if any.
        retry_after: Option<String>,
        /// Body to send instead of the API-style error body.
        body: Option<String>,
    },
    /// HTTP 200 with a body that is not a valid response.
    Garbage(String),
    /// Wait, then answer `then` (to trigger client timeouts).
    Delay {
        /// How long to wait before answering.
        delay: Duration,
        /// The answer after the wait.
        then: Box<Scripted>,
    },
    /// Read the request, then close the connection without any answer.
    Drop,
    /// Any status, headers and body, sent as is.
    Raw {
        /// HTTP status.
        status: u16,
        /// Extra headers (`content-length`/`connection` are added).
        headers: Vec<(String, String)>,
        /// Body.
        body: String,
    },
    /// Decide from the (valid) request.
    Dynamic(Arc<dyn Fn(&RecordedRequest) -> Scripted + Send + Sync>),
}

impl fmt::Debug for Scripted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Scripted {
    /// A tool call with [`DEFAULT_USAGE`].
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Scripted::ToolCall {
            name: name.into(),
            arguments,
            usage: DEFAULT_USAGE,
        }
    }

    /// Several tool calls in one answer.
    pub fn tool_calls(calls: Vec<(&str, Value)>) -> Self {
        Scripted::ToolCalls {
            calls: calls.into_iter().map(|(n, a)| (n.to_string(), a)).collect(),
            usage: DEFAULT_USAGE,
        }
    }

    /// A text-only answer.
    pub fn text(text: impl Into<String>) -> Self {
        Scripted::Text {
            text: text.into(),
            usage: DEFAULT_USAGE,
        }
    }

    /// A text answer holding one ```action block calling `name` with
    /// `parameters` (written as YAML), for text-mode runs.
    pub fn action_block(name: &str, parameters: Value) -> Self {
        let mut text = format!("```action\nname: {name}\nparameters:");
        match parameters.as_object() {
            Some(map) if !map.is_empty() => {
                for (k, v) in map {
                    text.push_str(&format!("\n  {k}: {v}"));
                }
            }
            _ => text.push_str(" {}"),
        }
        text.push_str("\n```");
        Scripted::text(text)
    }

    /// A tool call with invalid argument text.
    pub fn malformed(name: impl Into<String>, raw: impl Into<String>) -> Self {
        Scripted::Malformed {
            name: name.into(),
            raw: raw.into(),
            usage: DEFAULT_USAGE,
        }
    }

    /// An HTTP error status with an API-style body.
    pub fn status(status: u16) -> Self {
        Scripted::Status {
            status,
            retry_after: None,
            body: None,
        }
    }

    /// An HTTP error status with `retry-after: <secs>`.
    pub fn status_retry_after(status: u16, secs: u64) -> Self {
        Scripted::Status {
            status,
            retry_after: Some(secs.to_string()),
            body: None,
        }
    }

    /// HTTP 200 with a non-JSON body.
    pub fn garbage() -> Self {
        Scripted::Garbage("<html>this is {not json".to_string())
    }

    /// Wait `delay`, then answer `then`.
    pub fn delay(delay: Duration, then: Scripted) -> Self {
        Scripted::Delay {
            delay,
            then: Box::new(then),
        }
    }

    /// Close the connection without answering.
    pub fn drop_connection() -> Self {
        Scripted::Drop
    }

    /// Raw status and body (JSON content type).
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Scripted::Raw {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
        }
    }

    /// Decide the answer from the request.
    pub fn dynamic(f: impl Fn(&RecordedRequest) -> Scripted + Send + Sync + 'static) -> Self {
        Scripted::Dynamic(Arc::new(f))
    }

    /// Set the reported usage (tool call, tool calls, text, malformed).
    pub fn with_usage(mut self, input: u64, output: u64) -> Self {
        match &mut self {
            Scripted::ToolCall { usage, .. }
            | Scripted::ToolCalls { usage, .. }
            | Scripted::Text { usage, .. }
            | Scripted::Malformed { usage, .. } => *usage = (input, output),
            Scripted::Delay { then, .. } => {
                let inner = std::mem::replace(then.as_mut(), Scripted::Drop);
                **then = inner.with_usage(input, output);
            }
            _ => {}
        }
        self
    }

    /// A short description (recorded as [`RecordedRequest::answered`]).
    pub fn describe(&self) -> String {
        match self {
            Scripted::ToolCall { name, .. } => format!("tool_call {name}"),
            Scripted::ToolCalls { calls, .. } => format!(
                "tool_calls {}",
                calls
                    .iter()
                    .map(|c| c.0.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Scripted::Text { .. } => "text".to_string(),
            Scripted::Malformed { name, .. } => format!("malformed {name}"),
            Scripted::Status { status, .. } => format!("status {status}"),
            Scripted::Garbage(_) => "garbage".to_string(),
            Scripted::Delay { delay, then } => format!("delay {delay:?} then {}", then.describe()),
            Scripted::Drop => "drop".to_string(),
            Scripted::Raw { status, .. } => format!("raw {status}"),
            Scripted::Dynamic(_) => "dynamic".to_string(),
        }
    }
}

/// What the server expects as credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyExpectation {
    /// A non-empty key must be sent (default).
    AnyNonEmpty,
    /// Exactly this key must be sent; anything else gets 401.
    Exact(String),
    /// No key may be sent (OpenAI-compatible local server): an
    /// `Authorization` header gets 400.
    Absent,
    /// Do not check.
    Ignore,
}

/// What the server expects about offered tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsExpectation {
    /// Native tool mode: non-empty valid `tools` and the forcing `tool_choice`
    /// (default).
    Required,
    /// Text mode: neither `tools` nor `tool_choice`.
    Absent,
    /// Either, but what is sent must be valid.
    Any,
}

/// One received request.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The protocol of the server that received it.
    pub protocol: Protocol,
    /// HTTP method.
    pub method: String,
    /// Request target (path and query).
    pub path: String,
    /// Headers with lower-case names, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` if it is not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
    /// When the request was fully read.
    pub received_at: Instant,
    /// Why the request was rejected by validation, if it was.
    pub validation_error: Option<String>,
    /// What was answered (a [`Scripted::describe`], or the validation status).
    pub answered: String,
}

impl RecordedRequest {
    /// First header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The model asked for.
    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    /// `body.messages` (empty if absent).
    pub fn messages(&self) -> Vec<Value> {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// The system prompt (Anthropic `system`; OpenAI first `system` message).
    pub fn system_text(&self) -> String {
        match self.protocol {
            Protocol::Anthropic => content_text(self.body.get("system")),
            Protocol::OpenAi => self
                .messages()
                .iter()
                .find(|m| m["role"] == "system")
                .map(|m| content_text(m.get("content")))
                .unwrap_or_default(),
        }
    }

    /// The (last) user message text.
    pub fn user_text(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| content_text(m.get("content")))
            .unwrap_or_default()
    }

    /// Names of the offered tools, in order.
    pub fn tool_names(&self) -> Vec<String> {
        let tools = self
            .body
            .get("tools")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        tools
            .iter()
            .filter_map(|t| match self.protocol {
                Protocol::Anthropic => t["name"].as_str(),
                Protocol::OpenAi => t["function"]["name"].as_str(),
            })
            .map(str::to_string)
            .collect()
    }

    /// Whether the server answered from the script (valid request).
    pub fn is_valid(&self) -> bool {
        self.validation_error.is_none()
    }
}

/// Text of a string content or of an array of `{text}` blocks.
fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Configures and starts a [`ScriptedServer`].
pub struct ServerBuilder {
    protocol: Protocol,
    script: Vec<Scripted>,
    key: KeyExpectation,
    tools: ToolsExpectation,
}

impl ServerBuilder {
    /// Append scripted answers.
    pub fn script(mut self, script: impl IntoIterator<Item = Scripted>) -> Self {
        self.script.extend(script);
        self
    }

    /// Require exactly this key.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.key = KeyExpectation::Exact(key.into());
        self
    }

    /// Set the key expectation.
    pub fn key_expectation(mut self, key: KeyExpectation) -> Self {
        self.key = key;
        self
    }

    /// Set the tools expectation (use [`ToolsExpectation::Absent`] for text
    /// mode).
    pub fn tools(mut self, tools: ToolsExpectation) -> Self {
        self.tools = tools;
        self
    }

    fn shared(self) -> Arc<Shared> {
        Arc::new(Shared {
            protocol: self.protocol,
            key: self.key,
            tools: self.tools,
            queue: Mutex::new(self.script.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// Start on the current tokio runtime (panics outside one).
    pub async fn start(self) -> ScriptedServer {
        let shared = self.shared();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("scripted server: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("scripted server: local addr");
        let (tx, rx) = watch::channel(false);
        tokio::spawn(accept_loop(listener, shared.clone(), rx));
        ScriptedServer {
            addr,
            shared,
            shutdown: tx,
            thread: None,
        }
    }

    /// Start on a new thread with its own tokio runtime; usable from sync
    /// code and while a separate process talks to the server.
    pub fn start_background(self) -> ScriptedServer {
        let shared = self.shared();
        let (tx, rx) = watch::channel(false);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("scripted-llm-server".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("scripted server: build runtime");
                rt.block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("scripted server: bind 127.0.0.1:0");
                    let addr = listener.local_addr().expect("scripted server: local addr");
                    addr_tx.send(addr).expect("scripted server: report address");
                    accept_loop(listener, thread_shared, rx).await;
                });
            })
            .expect("scripted server: spawn thread");
        let addr = addr_rx
            .recv()
            .expect("scripted server: background thread failed to start");
        ScriptedServer {
            addr,
            shared,
            shutdown: tx,
            thread: Some(thread),
        }
    }
}

/// State shared by the server tasks and the handle.
struct Shared {
    protocol: Protocol,
    key: KeyExpectation,
    tools: ToolsExpectation,
    queue: Mutex<VecDeque<Scripted>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A running scripted server; stops when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedServer {
    /// A builder with the default expectations (any non-empty key, tools
    /// required) and an empty script.
    pub fn builder(protocol: Protocol) -> ServerBuilder {
        ServerBuilder {
            protocol,
            script: Vec::new(),
            key: KeyExpectation::AnyNonEmpty,
            tools: ToolsExpectation::Required,
        }
    }

    /// Start with default expectations on the current tokio runtime.
    pub async fn start(protocol: Protocol, script: Vec<Scripted>) -> ScriptedServer {
        Self::builder(protocol).script(script).start().await
    }

    /// Start with default expectations on a background thread.
    pub fn start_background(protocol: Protocol, script: Vec<Scripted>) -> ScriptedServer {
        Self::builder(protocol).script(script).start_background()
    }

    /// The protocol spoken.
    pub fn protocol(&self) -> Protocol {
        self.shared.protocol
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure: `http://127.0.0.1:PORT` for Anthropic,
    /// `http://127.0.0.1:PORT/v1` for OpenAI.
    pub fn base_url(&self) -> String {
        match self.shared.protocol {
            Protocol::Anthropic => format!("http://{}", self.addr),
            Protocol::OpenAi => format!("http://{}/v1", self.addr),
        }
    }

    /// Environment for a child `agentforge` process pointing at this server:
    /// base URL and key variables of the protocol.
    pub fn env_vars(&self, api_key: &str) -> Vec<(String, String)> {
        let (base, key) = match self.shared.protocol {
            Protocol::Anthropic => ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
            Protocol::OpenAi => ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
        };
        vec![
            (base.to_string(), self.base_url()),
            (key.to_string(), api_key.to_string()),
        ]
    }

    /// All requests received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// The last request received.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.shared.requests.lock().unwrap().last().cloned()
    }

    /// Append an answer to the script.
    pub fn push(&self, answer: Scripted) {
        self.shared.queue.lock().unwrap().push_back(answer);
    }

    /// Scripted answers not yet served.
    pub fn remaining(&self) -> usize {
        self.shared.queue.lock().unwrap().len()
    }

    /// Block (sleeping, not async) until `n` requests arrived or `timeout`
    /// passed; returns whether they did. For background servers.
    pub fn wait_for_requests_blocking(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.request_count() < n {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accept connections until shutdown.
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(handle_connection(stream, shared.clone()));
                }
            }
            _ = shutdown.changed() => break,
        }
    }
}

/// A parsed HTTP/1.1 request.
struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// What to do with a connection.
enum Outcome {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    Drop,
}

/// Serve one request on one connection.
async fn handle_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let Ok(Some(req)) = read_request(&mut stream).await else {
        return;
    };
    let body_text = String::from_utf8_lossy(&req.body).into_owned();
    let mut record = RecordedRequest {
        protocol: shared.protocol,
        method: req.method.clone(),
        path: req.path.clone(),
        headers: req.headers.clone(),
        body: serde_json::from_slice(&req.body).unwrap_or(Value::Null),
        raw_body: body_text,
        received_at: Instant::now(),
        validation_error: None,
        answered: String::new(),
    };
    let mut delay = Duration::ZERO;
    let outcome = match validate(&shared, &record) {
        Err((status, message)) => {
            record.validation_error = Some(message.clone());
            record.answered = format!("invalid request: status {status}");
            Outcome::Respond {
                status,
                headers: json_headers(),
                body: error_body(shared.protocol, status, &message),
            }
        }
        Ok(()) => {
            let next = shared.queue.lock().unwrap().pop_front();
            match next {
                None => {
                    record.answered = "script exhausted".to_string();
                    Outcome::Respond {
                        status: 500,
                        headers: json_headers(),
                        body: error_body(shared.protocol, 500, "script exhausted"),
                    }
                }
                Some(mut answer) => {
                    // Resolve closures and delays into a final answer.
                    loop {
                        match answer {
                            Scripted::Dynamic(f) => answer = f(&record),
                            Scripted::Delay { delay: d, then } => {
                                delay += d;
                                answer = *then;
                            }
                            _ => break,
                        }
                    }
                    record.answered = if delay.is_zero() {
                        answer.describe()
                    } else {
                        format!("delay {delay:?} then {}", answer.describe())
                    };
                    render(shared.protocol, &answer, &record)
                }
            }
        }
    };
    shared.requests.lock().unwrap().push(record);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    match outcome {
        Outcome::Drop => drop(stream),
        Outcome::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ));
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.flush().await;
            let _ = stream.shutdown().await;
        }
    }
}

/// Read one request (head + content-length or chunked body).
async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<HttpRequest>> {
    const MAX: usize = 64 * 1024 * 1024;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_string();
    let path = request_line.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut rest = buf[head_end + 4..].to_vec();
    let chunked =
        get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        loop {
            if let Some(body) = decode_chunked(&rest) {
                break body;
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 || rest.len() > MAX {
                return Ok(None);
            }
            rest.extend_from_slice(&chunk[..n]);
        }
    } else {
        let len: usize = get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if len > MAX {
            return Ok(None);
        }
        while rest.len() < len {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(None);
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(len);
        rest
    };
    Ok(Some(HttpRequest {
        method,
        path,
        headers,
        body,
    }))
}

/// Position of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The decoded body if `data` holds a complete chunked body.
fn decode_chunked(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(data, b"\r\n")?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if data.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".to_string(), "application/json".to_string())]
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// An API-style error body.
fn error_body(protocol: Protocol, status: u16, message: &str) -> String {
    let kind = match status {
        400 | 404 | 405 | 413 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    match protocol {
        Protocol::Anthropic => json!({
            "type": "error",
            "error": {"type": kind, "message": message},
        }),
        Protocol::OpenAi => json!({
            "error": {"message": message, "type": kind, "param": null, "code": null},
        }),
    }
    .to_string()
}

/// Turn a final (non-dynamic, non-delay) answer into a response.
fn render(protocol: Protocol, answer: &Scripted, req: &RecordedRequest) -> Outcome {
    let model = req.model().unwrap_or("scripted-model").to_string();
    let ok = |body: Value| Outcome::Respond {
        status: 200,
        headers: json_headers(),
        body: body.to_string(),
    };
    match answer {
        Scripted::ToolCall {
            name,
            arguments,
            usage,
        } => ok(success_body(
            protocol,
            &model,
            &[(name.clone(), CallArgs::Json(arguments.clone()))],
            None,
            *usage,
        )),
        Scripted::ToolCalls { calls, usage } => {
            let calls: Vec<(String, CallArgs)> = calls
                .iter()
                .map(|(n, a)| (n.clone(), CallArgs::Json(a.clone())))
                .collect();
            ok(success_body(protocol, &model, &calls, None, *usage))
        }
        Scripted::Text { text, usage } => {
            ok(success_body(protocol, &model, &[], Some(text), *usage))
        }
        Scripted::Malformed { name, raw, usage } => ok(success_body(
            protocol,
            &model,
            &[(name.clone(), CallArgs::Raw(raw.clone()))],
            None,
            *usage,
        )),
        Scripted::Status {
            status,
            retry_after,
            body,
        } => {
            let mut headers = json_headers();
            if let Some(ra) = retry_after {
                headers.push(("retry-after".to_string(), ra.clone()));
            }
            Outcome::Respond {
                status: *status,
                headers,
                body: body.clone().unwrap_or_else(|| {
                    error_body(protocol, *status, &format!("scripted status {status}"))
                }),
            }
        }
        Scripted::Garbage(body) => Outcome::Respond {
            status: 200,
            headers: json_headers(),
            body: body.clone(),
        },
        Scripted::Drop => Outcome::Drop,
        Scripted::Raw {
            status,
            headers,
            body,
        } => Outcome::Respond {
            status: *status,
            headers: headers.clone(),
            body: body.clone(),
        },
        Scripted::Delay { .. } | Scripted::Dynamic(_) => {
            unreachable!("resolved before rendering")
        }
    }
}

/// Tool call arguments: a JSON value or raw (invalid) text.
enum CallArgs {
    Json(Value),
    Raw(String),
}

/// A successful completion body.
fn success_body(
    protocol: Protocol,
    model: &str,
    calls: &[(String, CallArgs)],
    text: Option<&str>,
    usage: (u64, u64),
) -> Value {
    match protocol {
        Protocol::Anthropic => {
            let mut content = Vec::new();
            if let Some(t) = text {
                content.push(json!({"type": "text", "text": t}));
            }
            for (i, (name, args)) in calls.iter().enumerate() {
                let input = match args {
                    CallArgs::Json(v) => v.clone(),
                    CallArgs::Raw(r) => Value::String(r.clone()),
                };
                content.push(json!({
                    "type": "tool_use",
                    "id": format!("toolu_scripted_{i}"),
                    "name": name,
                    "input": input,
                }));
            }
            json!({
                "id": "msg_scripted",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
                "stop_sequence": null,
                "usage": {"input_tokens": usage.0, "output_tokens": usage.1},
            })
        }
        Protocol::OpenAi => {
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        let arguments = match args {
                            CallArgs::Json(v) => v.to_string(),
                            CallArgs::Raw(r) => r.clone(),
                        };
                        json!({
                            "id": format!("call_scripted_{i}"),
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        })
                    })
                    .collect();
                message["tool_calls"] = Value::Array(tool_calls);
            }
            json!({
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": message,
                    "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
                }],
                "usage": {
                    "prompt_tokens": usage.0,
                    "completion_tokens": usage.1,
                    "total_tokens": usage.0 + usage.1,
                },
            })
        }
    }
}

/// Validate a request: `Err((status, message))` to reject it.
fn validate(shared: &Shared, req: &RecordedRequest) -> Result<(), (u16, String)> {
    let bad = |m: String| Err((400, m));
    let expected_path = match shared.protocol {
        Protocol::Anthropic => "/v1/messages",
        Protocol::OpenAi => "/v1/chat/completions",
    };
    let path = req.path.split('?').next().unwrap_or_default();
    if path != expected_path {
        return Err((
            404,
            format!(
                "no route for {} {}: expected POST {expected_path}",
                req.method, req.path
            ),
        ));
    }
    if req.method != "POST" {
        return Err((
            405,
            format!("method {} not allowed: expected POST", req.method),
        ));
    }
    check_key(shared, req)?;
    if shared.protocol == Protocol::Anthropic {
        match req.header("anthropic-version") {
            Some("2023-06-01") => {}
            other => {
                return bad(format!(
                    "anthropic-version header must be \"2023-06-01\", got {other:?}"
                ))
            }
        }
    }
    let ct = req.header("content-type").unwrap_or_default();
    if !ct.starts_with("application/json") {
        return bad(format!("content-type must be application/json, got {ct:?}"));
    }
    if !req.body.is_object() {
        return bad("body must be a JSON object".to_string());
    }
    let body = &req.body;
    match body.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => {}
        _ => return bad("`model` must be a non-empty string".to_string()),
    }
    if body.get("stream").is_some_and(|s| s != &Value::Bool(false)) {
        return bad("streaming is not supported by this server".to_string());
    }
    match shared.protocol {
        Protocol::Anthropic => validate_anthropic(shared.tools, body).map_err(|m| (400, m)),
        Protocol::OpenAi => validate_openai(shared.tools, body).map_err(|m| (400, m)),
    }
}

/// Check the credentials header of the protocol.
fn check_key(shared: &Shared, req: &RecordedRequest) -> Result<(), (u16, String)> {
    let sent = match shared.protocol {
        Protocol::Anthropic => req.header("x-api-key").map(str::to_string),
        Protocol::OpenAi => match req.header("authorization") {
            None => None,
            Some(v) => match v.strip_prefix("Bearer ") {
                Some(k) => Some(k.to_string()),
                None => {
                    return Err((
                        401,
                        "Authorization header must be `Bearer <key>`".to_string(),
                    ))
                }
            },
        },
    };
    let what = match shared.protocol {
        Protocol::Anthropic => "x-api-key header",
        Protocol::OpenAi => "Authorization: Bearer header",
    };
    match (&shared.key, sent) {
        (KeyExpectation::Ignore, _) => Ok(()),
        (KeyExpectation::Absent, None) => Ok(()),
        (KeyExpectation::Absent, Some(_)) => Err((400, format!("no {what} was expected"))),
        (KeyExpectation::AnyNonEmpty, Some(k)) if !k.trim().is_empty() => Ok(()),
        (KeyExpectation::Exact(want), Some(k)) if *want == k => Ok(()),
        (_, None) => Err((401, format!("missing {what}"))),
        (_, Some(_)) => Err((401, format!("invalid API key in {what}"))),
    }
}

fn validate_anthropic(tools: ToolsExpectation, body: &Value) -> Result<(), String> {
    positive_int(body, "max_tokens")?;
    match body.get("system") {
        Some(Value::String(s)) if !s.trim().is_empty() => {}
        Some(Value::Array(a)) if !a.is_empty() => {}
        _ => return Err("`system` must be a non-empty string".to_string()),
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    if messages.len() != 1 {
        return Err(format!(
            "`messages` must hold exactly 1 user message (stateless executor), got {}",
            messages.len()
        ));
    }
    if messages[0]["role"] != "user" {
        return Err("`messages[0].role` must be \"user\"".to_string());
    }
    non_empty_content(&messages[0], "messages[0]")?;
    let present = body.get("tools").is_some();
    if tools == ToolsExpectation::Absent || (tools == ToolsExpectation::Any && !present) {
        if present {
            return Err("`tools` must not be sent in text mode".to_string());
        }
        if body.get("tool_choice").is_some() {
            return Err("`tool_choice` must not be sent without tools".to_string());
        }
        return Ok(());
    }
    let list = tool_list(body)?;
    let mut names = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let name = tool_name(t.get("name"), i)?;
        if names.contains(&name) {
            return Err(format!("duplicate tool name {name:?}"));
        }
        names.push(name);
        if !t.get("description").is_some_and(Value::is_string) {
            return Err(format!("`tools[{i}].description` must be a string"));
        }
        object_schema(t.get("input_schema"), &format!("tools[{i}].input_schema"))?;
    }
    match body.get("tool_choice") {
        Some(tc) if tc["type"] == "any" => Ok(()),
        other => Err(format!(
            "`tool_choice` must be {{\"type\":\"any\"}}, got {}",
            other
                .map(Value::to_string)
                .unwrap_or_else(|| "nothing".into())
        )),
    }
}

fn validate_openai(tools: ToolsExpectation, body: &Value) -> Result<(), String> {
    if body.get("max_tokens").is_some() || body.get("max_completion_tokens").is_none() {
        positive_int(body, "max_tokens")?;
    } else {
        positive_int(body, "max_completion_tokens")?;
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    if messages.len() != 2 {
        return Err(format!(
            "`messages` must hold exactly 2 entries (system + user, stateless executor), got {}",
            messages.len()
        ));
    }
    if messages[0]["role"] != "system" {
        return Err("`messages[0].role` must be \"system\"".to_string());
    }
    if messages[1]["role"] != "user" {
        return Err("`messages[1].role` must be \"user\"".to_string());
    }
    non_empty_content(&messages[0], "messages[0]")?;
    non_empty_content(&messages[1], "messages[1]")?;
    let present = body.get("tools").is_some();
    if tools == ToolsExpectation::Absent || (tools == ToolsExpectation::Any && !present) {
        if present {
            return Err("`tools` must not be sent in text mode".to_string());
        }
        if body.get("tool_choice").is_some() {
            return Err("`tool_choice` must not be sent without tools".to_string());
        }
        return Ok(());
    }
    let list = tool_list(body)?;
    let mut names = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if t["type"] != "function" {
            return Err(format!("`tools[{i}].type` must be \"function\""));
        }
        let f = t
            .get("function")
            .filter(|f| f.is_object())
            .ok_or_else(|| format!("`tools[{i}].function` must be an object"))?;
        let name = tool_name(f.get("name"), i)?;
        if names.contains(&name) {
            return Err(format!("duplicate tool name {name:?}"));
        }
        names.push(name);
        if !f.get("description").is_some_and(Value::is_string) {
            return Err(format!(
                "`tools[{i}].function.description` must be a string"
            ));
        }
        object_schema(
            f.get("parameters"),
            &format!("tools[{i}].function.parameters"),
        )?;
    }
    match body.get("tool_choice") {
        Some(Value::String(s)) if s == "required" => Ok(()),
        other => Err(format!(
            "`tool_choice` must be \"required\", got {}",
            other
                .map(Value::to_string)
                .unwrap_or_else(|| "nothing".into())
        )),
    }
}

fn positive_int(body: &Value, field: &str) -> Result<(), String> {
    match body.get(field).and_then(Value::as_u64) {
        Some(n) if n > 0 => Ok(()),
        _ => Err(format!("`{field}` must be a positive integer")),
    }
}

fn non_empty_content(message: &Value, at: &str) -> Result<(), String> {
    match message.get("content") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(()),
        Some(Value::Array(a)) if !a.is_empty() => Ok(()),
        _ => Err(format!("`{at}.content` must be non-empty")),
    }
}

fn tool_list(body: &Value) -> Result<&Vec<Value>, String> {
    match body.get("tools").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => Ok(list),
        _ => Err("`tools` must be a non-empty array (native tool mode)".to_string()),
    }
}

fn tool_name(name: Option<&Value>, i: usize) -> Result<String, String> {
    let name = name
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`tools[{i}]` name must be a string"))?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!(
            "tool name {name:?} must match ^[a-zA-Z0-9_-]{{1,64}}$"
        ))
    }
}

fn object_schema(schema: Option<&Value>, at: &str) -> Result<(), String> {
    match schema {
        Some(s) if s.is_object() && s["type"] == "object" => Ok(()),
        _ => Err(format!(
            "`{at}` must be a JSON schema object with \"type\": \"object\""
        )),
    }
}
