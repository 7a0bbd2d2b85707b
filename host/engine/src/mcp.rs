//! MCP servers' tools offered to the model beside the plugin tools (`[mcp.servers.<name>]`
//! in `agentforge.toml`), through the official Rust SDK (rmcp) as its client.
//!
//! A server is either a command the run starts (`command`: the stdio transport) or a
//! server already running at a URL (`url`: the streamable HTTP transport, rmcp's own
//! client on the workspace's reqwest, with `headers` sent on every request). Its tools
//! become actions named `mcp__<server>__<tool>`, offered in the phases the config names
//! (every phase when it names none). A call goes through the executor like any tool
//! action (guards first, the result recorded and shown in `recent` and working memory),
//! with its arguments checked against the tool's input schema, a time limit and an output
//! cap. A started server lives as long as the run; it is killed with it.
//!
//! Values in `env` and `headers` may hold `${NAME}`, read from the run's environment so
//! no key is written into the config. What they bring in is a secret: it is masked in
//! everything the run stores or shows ([`agentforge_store::secrets::add_values`]), and the
//! variables named are kept from checks (`Config::env_policy`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentforge_core::args::ArgumentSchema;
use agentforge_core::model::ToolSpec;
use agentforge_core::state::ActionResult;
use agentforge_store::tools::{ExtraTool, ToolOutcome};
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[mcp]`: the MCP servers whose tools a run offers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// The servers, by name (the name is part of each tool's action name).
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `[mcp.servers.<name>]`: one server, either started as a command speaking MCP on stdio
/// (`command`) or reached at a URL over streamable HTTP (`url`): exactly one of the two.
/// `Debug` shows the names of `env` and `headers`, never their values.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program (the stdio transport).
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it. A value may hold `${NAME}`, taken from the run's
    /// own environment, so a key never has to be written into the config.
    pub env: BTreeMap<String, String>,
    /// The server's MCP endpoint, `http://` or `https://` (the streamable HTTP
    /// transport).
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url` (`Authorization = "Bearer
    /// ${TOKEN}"`); values may hold `${NAME}` like `env`.
    pub headers: BTreeMap<String, String>,
    /// The phases its tools are offered in (every phase when empty).
    pub phases: Vec<String>,
    /// The tools offered (all the server lists when empty).
    pub tools: Vec<String>,
    /// The most characters of a call's output shown to the model (the rest is cut,
    /// saying so).
    pub max_output_chars: usize,
    /// Seconds a call may take.
    pub timeout_secs: u64,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be credentials written into the config.
        let masked = |m: &BTreeMap<String, String>| {
            m.keys()
                .map(|k| (k.clone(), "***"))
                .collect::<BTreeMap<_, _>>()
        };
        f.debug_struct("McpServerConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &masked(&self.env))
            .field("url", &self.url)
            .field("headers", &masked(&self.headers))
            .field("phases", &self.phases)
            .field("tools", &self.tools)
            .field("max_output_chars", &self.max_output_chars)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            phases: Vec::new(),
            tools: Vec::new(),
            max_output_chars: 16_384,
            timeout_secs: 60,
        }
    }
}

/// Headers the streamable HTTP transport sets itself (rmcp refuses a custom one).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

impl McpConfig {
    /// Checks every server's config without starting any (part of `Config::validate`):
    /// the error is the field (`mcp.servers.<name>.<field>`) and what to do.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (name, cfg) in &self.servers {
            cfg.validate(name)?;
        }
        Ok(())
    }

    /// The environment variables `env` and `headers` values read (`${NAME}`): they hold
    /// an MCP server's credentials, so checks never get them.
    pub fn env_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .servers
            .values()
            .flat_map(|c| c.env.values().chain(c.headers.values()))
            .filter_map(|v| references(v).ok())
            .flatten()
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

impl McpServerConfig {
    /// Checks the server's config (see [`McpConfig::validate`]).
    fn validate(&self, name: &str) -> Result<(), (String, String)> {
        let field = |f: &str| format!("mcp.servers.{name}.{f}");
        let bad = |f: &str, m: String| Err((field(f), m));
        if !valid_name(name) {
            return Err((
                format!("mcp.servers.{name}"),
                "a server name may hold only letters, digits, `_` and `-` (it is part of the tools' action names)".into(),
            ));
        }
        let command = self.command.as_deref().map(str::trim);
        let url = self.url.as_deref().map(str::trim);
        match (command, url) {
            (None, None) | (Some(""), None) | (None, Some("")) => {
                return bad(
                    "command",
                    "give `command` (a program serving MCP on stdio) or `url` (an MCP server over streamable HTTP, `http://host:port/mcp`)".into(),
                )
            }
            (Some(_), Some(_)) => {
                return bad(
                    "url",
                    "`command` and `url` are both set; give one: `command` starts a server on stdio, `url` reaches a running one over HTTP".into(),
                )
            }
            (Some(_), None) => {
                if !self.headers.is_empty() {
                    return bad(
                        "headers",
                        "headers are sent to a `url` server; a `command` server takes `env`".into(),
                    );
                }
            }
            (None, Some(url)) => {
                if !self.args.is_empty() {
                    return bad("args", "`args` are a `command`'s; a `url` server has none".into());
                }
                if !self.env.is_empty() {
                    return bad(
                        "env",
                        "`env` is set for a `command`'s process; send a `url` server what it needs in `headers`".into(),
                    );
                }
                let parsed = reqwest::Url::parse(url).map_err(|e| {
                    (
                        field("url"),
                        format!("`{url}` is not a URL ({e}); give the server's MCP endpoint, e.g. `http://127.0.0.1:8000/mcp`"),
                    )
                })?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return bad(
                        "url",
                        format!("`{url}` is not http:// or https://; the streamable HTTP transport needs one of them"),
                    );
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return bad(
                        "url",
                        "the URL holds a user name or password, which would be shown wherever the URL is; send credentials in `headers` (`Authorization = \"Bearer ${TOKEN}\"`)".into(),
                    );
                }
            }
        }
        for (key, value) in &self.headers {
            if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err() {
                return bad(
                    &format!("headers.{key}"),
                    "not a valid HTTP header name (letters, digits and `-`)".into(),
                );
            }
            if RESERVED_HEADERS.contains(&key.to_ascii_lowercase().as_str()) {
                return bad(
                    &format!("headers.{key}"),
                    format!(
                        "the MCP transport sets `{key}` itself; leave it out (reserved: {})",
                        RESERVED_HEADERS.join(", ")
                    ),
                );
            }
            references(value).map_err(|m| (field(&format!("headers.{key}")), m))?;
        }
        for (key, value) in &self.env {
            references(value).map_err(|m| (field(&format!("env.{key}")), m))?;
        }
        if self.max_output_chars == 0 {
            return bad("max_output_chars", "must be above 0".into());
        }
        if self.timeout_secs == 0 {
            return bad("timeout_secs", "must be above 0".into());
        }
        Ok(())
    }

    /// Where the server is, for people: its URL, or its command.
    pub fn endpoint(&self) -> String {
        match (&self.url, &self.command) {
            (Some(url), _) => url.trim().to_string(),
            (None, Some(command)) => command.clone(),
            (None, None) => String::new(),
        }
    }
}

/// Why the MCP servers could not be brought into a run (each names the server and
/// what to fix).
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The config is unusable.
    #[error("[mcp.servers.{server}]: {message}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// The server did not start, could not be reached, or did not answer.
    #[error("MCP server `{server}` ({endpoint}): {message}")]
    Start {
        /// The server's name.
        server: String,
        /// Its command, or its URL.
        endpoint: String,
        /// What failed.
        message: String,
    },
}

/// Seconds a server has to start and list its tools.
const START_TIMEOUT_SECS: u64 = 30;

/// The longest action name providers accept.
const MAX_TOOL_NAME: usize = 64;

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The variables `${NAME}` in `value` names, or why it is malformed. A `$` not followed
/// by `{` is itself.
fn references(value: &str) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`{value}` opens `${{` without closing it; write `${{NAME}}` to read the variable NAME"
            ));
        };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`${{{name}}}` in `{value}` is not a variable name (letters, digits and `_`, not starting with a digit)"
            ));
        }
        names.push(name.to_string());
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// `value` with each `${NAME}` replaced by the variable's value from `lookup`, and the
/// values read (secrets to mask); `field` (`env.TOKEN`, `headers.Authorization`) names it
/// in the error when a variable is not set.
fn expand(
    server: &str,
    field: &str,
    value: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(String, Vec<String>), McpError> {
    let bad = |message: String| McpError::Config {
        server: server.to_string(),
        message,
    };
    let mut out = String::with_capacity(value.len());
    let mut read = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| {
            bad(format!(
                "{field} = \"{value}\" opens `${{` without closing it"
            ))
        })?;
        let name = &after[..end];
        let got = lookup(name).ok_or_else(|| {
            bad(format!(
                "{field} = \"{value}\", but `{name}` is not set in the environment; export it before the run"
            ))
        })?;
        out.push_str(&got);
        read.push(got);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, read))
}

/// Whether a header's value is a credential by its name (`Authorization`, `X-Api-Key`,
/// `Cookie`...): masked even when written into the config as it is.
fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "auth", "key", "token", "secret", "password", "cookie", "session",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// What an error of the SDK comes down to: its innermost cause ("Connection refused (os
/// error 111)", "Auth required"), not the layers of transport types above it.
fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = e;
    while let Some(s) = next_cause(innermost) {
        innermost = s;
    }
    innermost.to_string()
}

/// The error under `e`: its `source`, or, for the HTTP transport's client error (which
/// does not name it as its source), the reqwest error inside.
fn next_cause<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(inner)) => Some(inner),
        _ => e.source(),
    }
}

/// Whether the HTTP client could not connect at all (nothing listens, no route, a TLS
/// handshake that failed): the server is down or the URL wrong.
fn could_not_connect(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(|r| r.is_connect() || r.is_timeout())
        {
            return true;
        }
        next = next_cause(err);
    }
    false
}

/// Why the streamable HTTP handshake (`initialize`) failed, for people.
fn handshake_failure(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError;
    if let Some(challenge) = e.auth_challenge() {
        return format!(
            "the server refused the credentials ({challenge}); check the `headers` it is sent"
        );
    }
    match e {
        ClientInitializeError::TransportError { error, .. } if could_not_connect(error) => {
            format!(
                "cannot connect ({}); is the server running at that URL?",
                cause(error)
            )
        }
        ClientInitializeError::TransportError { error, .. } => {
            format!("the MCP handshake failed: {}", cause(error))
        }
        other => format!("the MCP handshake failed: {other}"),
    }
}

/// A running server: kept alive by the tools that use it, killed (or, over HTTP, let go)
/// when the last goes.
struct Server {
    name: String,
    /// Its command or URL, for the messages.
    endpoint: String,
    running: RunningService<RoleClient, ()>,
}

/// Seconds to open a TCP (and TLS) connection to a `url` server.
const CONNECT_TIMEOUT_SECS: u64 = 10;

/// One MCP tool as `agentforge context` lists it.
#[derive(Debug, Clone)]
pub struct McpToolInfo {
    /// The action name (`mcp__<server>__<tool>`).
    pub action: String,
    /// The server's name.
    pub server: String,
    /// The phases it is offered in (every phase when empty).
    pub phases: Vec<String>,
    /// Its definition as the model is offered it.
    pub spec: ToolSpec,
}

/// The tools of the configured servers, as [`connect`] or [`connect_each`] brings them.
#[derive(Default)]
pub struct Connected {
    /// The tools, in server then tool order.
    pub tools: Vec<Box<dyn ExtraTool>>,
    /// What each tool is, for listings.
    pub info: Vec<McpToolInfo>,
    /// One line per server for the person (`name: N tool(s)`), and per tool left out.
    pub notes: Vec<String>,
}

/// Starts every configured server and returns their tools (in server, then tool order),
/// and one line per server for the person (`name: N tools`). Runs inside the run's
/// multi-thread Tokio runtime, where the tools are later called. The first server that
/// cannot be brought up is the error: a run does not start without its tools.
pub async fn connect(
    config: &McpConfig,
) -> Result<(Vec<Box<dyn ExtraTool>>, Vec<String>), McpError> {
    let mut all = Connected::default();
    for (name, cfg) in &config.servers {
        let one = connect_server(name, cfg).await?;
        all.tools.extend(one.tools);
        all.notes.extend(one.notes);
    }
    Ok((all.tools, all.notes))
}

/// Like [`connect`], but a server that cannot be brought up is reported beside the
/// others' tools instead of ending it all: `agentforge context` shows what it can.
pub async fn connect_each(config: &McpConfig) -> (Connected, Vec<McpError>) {
    let mut all = Connected::default();
    let mut errors = Vec::new();
    for (name, cfg) in &config.servers {
        match connect_server(name, cfg).await {
            Ok(one) => {
                all.tools.extend(one.tools);
                all.info.extend(one.info);
                all.notes.extend(one.notes);
            }
            Err(e) => errors.push(e),
        }
    }
    (all, errors)
}

/// Starts (stdio) or reaches (HTTP) the server `name`, and lists its tools.
async fn connect_server(name: &str, cfg: &McpServerConfig) -> Result<Connected, McpError> {
    let bad = |message: String| McpError::Config {
        server: name.to_string(),
        message,
    };
    // Checked with the config already when it was loaded; again for a config made here.
    cfg.validate(name)
        .map_err(|(field, message)| bad(format!("`{field}`: {message}")))?;
    let endpoint = cfg.endpoint();
    let start = |message: String| McpError::Start {
        server: name.to_string(),
        endpoint: endpoint.clone(),
        message,
    };
    let lookup = |k: &str| std::env::var(k).ok();
    // Values read through `${NAME}`, and credential headers: masked from here on, before
    // anything of the server (an echoed header, an error) can reach a record.
    let mut secrets = Vec::new();
    let handshake = match (&cfg.command, &cfg.url) {
        (Some(command), _) => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(&cfg.args);
            for (k, v) in &cfg.env {
                let (value, read) = expand(name, &format!("env.{k}"), v, &lookup)?;
                secrets.extend(read);
                cmd.env(k, value);
            }
            agentforge_store::secrets::add_values(secrets);
            let (transport, _stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| start(format!("cannot start it: {e}")))?;
            tokio::time::timeout(Duration::from_secs(START_TIMEOUT_SECS), async {
                let running = ().serve(transport).await.map_err(|e| e.to_string())?;
                let listed = running.list_all_tools().await.map_err(|e| e.to_string())?;
                Ok::<_, String>((running, listed))
            })
            .await
        }
        (None, Some(url)) => {
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &cfg.headers {
                let field = format!("headers.{k}");
                let (value, read) = expand(name, &field, v, &lookup)?;
                secrets.extend(read);
                if is_credential_header(k) {
                    secrets.push(value.clone());
                }
                // Names were checked with the config; a value may still hold what a
                // header cannot (a newline in the variable read).
                let header = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|e| bad(format!("{field}: {e}")))?;
                let mut value = reqwest::header::HeaderValue::from_str(&value).map_err(|_| {
                    bad(format!(
                        "{field}: the value holds characters an HTTP header cannot (a newline, a control character)"
                    ))
                })?;
                value.set_sensitive(true);
                headers.insert(header, value);
            }
            agentforge_store::secrets::add_values(secrets);
            // No redirects: a redirect would carry the headers (credentials) elsewhere;
            // no idle pool: rmcp's own client keeps none either (Nagle/delayed-ACK stalls
            // on a reused connection whose last body was not read to its end).
            let client = agentforge_providers::client_builder()
                .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| start(format!("cannot build the HTTP client: {e}")))?;
            let transport = StreamableHttpClientTransport::with_client(
                client,
                StreamableHttpClientTransportConfig::with_uri(url.trim().to_string())
                    .custom_headers(headers),
            );
            tokio::time::timeout(Duration::from_secs(START_TIMEOUT_SECS), async {
                let running = ().serve(transport).await.map_err(|e| handshake_failure(&e))?;
                let listed = running.list_all_tools().await.map_err(|e| e.to_string())?;
                Ok::<_, String>((running, listed))
            })
            .await
        }
        (None, None) => {
            return Err(bad(
                "give `command` (a program serving MCP on stdio) or `url` (an MCP server over streamable HTTP)".into(),
            ))
        }
    };
    let (running, listed) = handshake
        .map_err(|_| start(format!("no answer within {START_TIMEOUT_SECS} s")))?
        .map_err(|m| start(agentforge_store::secrets::mask(&m)))?;
    let server = Arc::new(Server {
        name: name.to_string(),
        endpoint: endpoint.clone(),
        running,
    });
    for wanted in &cfg.tools {
        if !listed.iter().any(|t| t.name == wanted.as_str()) {
            return Err(bad(format!(
                "tools names `{wanted}`, which the server does not list (it lists: {})",
                listed
                    .iter()
                    .map(|t| t.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let mut out = Connected::default();
    for t in listed {
        if !cfg.tools.is_empty() && !cfg.tools.iter().any(|w| w == t.name.as_ref()) {
            continue;
        }
        let action = format!("mcp__{name}__{}", t.name);
        if !valid_name(&t.name) || action.len() > MAX_TOOL_NAME {
            out.notes.push(format!(
                "{name}: tool `{}` left out (its action name `{action}` is not 1-{MAX_TOOL_NAME} letters, digits, `_` or `-`)",
                t.name
            ));
            continue;
        }
        let schema = Value::Object((*t.input_schema).clone());
        let arguments = ArgumentSchema::new(schema.clone()).map_err(|e| {
            bad(format!(
                "tool `{}` has an input schema that does not compile: {e}",
                t.name
            ))
        })?;
        let spec = ToolSpec {
            name: action.clone(),
            description: t
                .description
                .as_deref()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{} (MCP server `{name}`)", t.name)),
            input_schema: schema,
        };
        out.info.push(McpToolInfo {
            action,
            server: name.to_string(),
            phases: cfg.phases.clone(),
            spec: spec.clone(),
        });
        out.tools.push(Box::new(McpTool {
            spec,
            tool: t.name.to_string(),
            arguments,
            phases: cfg.phases.clone(),
            max_output_chars: cfg.max_output_chars,
            timeout: Duration::from_secs(cfg.timeout_secs),
            peer: server.running.peer().clone(),
            server: server.clone(),
        }));
    }
    let over = if cfg.url.is_some() {
        format!(" at {endpoint}")
    } else {
        String::new()
    };
    out.notes
        .push(format!("{name}: {} tool(s){over}", out.tools.len()));
    Ok(out)
}

/// The `=== MCP tools ===` section of `agentforge context`: each tool of the configured
/// servers with its server, the tokens of its definition (name, description and input
/// schema, as JSON) and whether the next request offers it (`offered`: the names of the
/// tools it carries; `phase` is the task's phase, for the reader); then each server that
/// could not be reached.
pub fn render_listing(
    info: &[McpToolInfo],
    errors: &[McpError],
    offered: &[&str],
    phase: &str,
) -> String {
    use std::fmt::Write as _;
    let is_offered = |t: &McpToolInfo| offered.contains(&t.action.as_str());
    let n = info.iter().filter(|t| is_offered(t)).count();
    let mut out = format!(
        "=== MCP tools ({n} offered in phase `{phase}`, {} not) ===\n",
        info.len() - n
    );
    let _ = writeln!(
        out,
        "{:<40} {:<16} {:>7}  offered",
        "tool", "server", "tokens"
    );
    let mut sum = 0;
    for t in info {
        let tokens =
            agentforge_context::count_tokens(&serde_json::to_string(&t.spec).unwrap_or_default());
        let shown = if is_offered(t) {
            sum += tokens;
            "yes".to_string()
        } else if t.phases.is_empty() {
            "no".to_string()
        } else {
            format!("no (phases: {})", t.phases.join(", "))
        };
        let _ = writeln!(
            out,
            "{:<40} {:<16} {tokens:>7}  {shown}",
            t.action, t.server
        );
    }
    let _ = writeln!(out, "{:<40} {:<16} {sum:>7}", "offered, in all", "");
    for e in errors {
        let _ = writeln!(out, "not reached: {e}");
    }
    out
}

/// One tool of an MCP server, as the executor offers it.
struct McpTool {
    spec: ToolSpec,
    /// The tool's name on its server.
    tool: String,
    arguments: ArgumentSchema,
    phases: Vec<String>,
    max_output_chars: usize,
    timeout: Duration,
    peer: Peer<RoleClient>,
    server: Arc<Server>,
}

impl McpTool {
    async fn call(&self, args: &Value) -> Result<(bool, String), String> {
        let mut params = CallToolRequestParams::new(self.tool.clone());
        if let Value::Object(m) = args {
            params = params.with_arguments(m.clone());
        }
        let result = tokio::time::timeout(self.timeout, self.peer.call_tool(params))
            .await
            .map_err(|_| {
                format!(
                    "MCP server `{}` ({}) did not answer within {} s",
                    self.server.name,
                    self.server.endpoint,
                    self.timeout.as_secs()
                )
            })?
            .map_err(|e| {
                format!(
                    "MCP server `{}` ({}): {}",
                    self.server.name,
                    self.server.endpoint,
                    cause(&e)
                )
            })?;
        let mut parts: Vec<String> = result
            .content
            .iter()
            .map(|c| match c {
                ContentBlock::Text(t) => t.text.clone(),
                ContentBlock::Image(i) => format!("[image, {}]", i.mime_type),
                ContentBlock::Audio(a) => format!("[audio, {}]", a.mime_type),
                ContentBlock::Resource(_) => "[embedded resource]".to_string(),
                ContentBlock::ResourceLink(r) => format!("[resource {}]", r.uri),
                // A kind a later protocol version adds.
                _ => "[content of another kind]".to_string(),
            })
            .collect();
        if parts.is_empty() {
            if let Some(s) = &result.structured_content {
                parts.push(s.to_string());
            }
        }
        Ok((result.is_error == Some(true), parts.join("\n")))
    }
}

impl ExtraTool for McpTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn offered_in(&self, phase: &str) -> bool {
        self.phases.is_empty() || self.phases.iter().any(|p| p == phase)
    }

    fn check_arguments(&self, args: &Value) -> Result<(), String> {
        agentforge_plugin_host::check_arguments(&self.arguments, args)
    }

    fn invoke(&self, args: &Value) -> Result<ToolOutcome, String> {
        let handle = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
            .ok_or("MCP tools run only inside the run's multi-thread runtime")?;
        let (is_error, output) = tokio::task::block_in_place(|| handle.block_on(self.call(args)))?;
        let total = output.chars().count();
        let output = if total > self.max_output_chars {
            let cut = agentforge_core::text::cut(&output, self.max_output_chars);
            format!(
                "{cut}\n[output cut: {} of {total} characters shown ([mcp.servers.{}] max_output_chars)]",
                self.max_output_chars, self.server.name
            )
        } else {
            output
        };
        Ok(ToolOutcome {
            result: if is_error {
                ActionResult::Failure
            } else {
                ActionResult::Success
            },
            output,
            completes_task: None,
        })
    }

    fn source(&self) -> String {
        format!("MCP server `{}`", self.server.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(toml_text: &str) -> McpServerConfig {
        toml::from_str(toml_text).unwrap()
    }

    fn field_of(cfg: &McpServerConfig) -> String {
        cfg.validate("web").unwrap_err().0
    }

    #[test]
    fn exactly_one_of_command_and_url_each_field_where_it_belongs() {
        assert!(server("command = \"srv\"").validate("web").is_ok());
        assert!(server(
            "url = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer ${T}\" }"
        )
        .validate("web")
        .is_ok());
        assert_eq!(field_of(&server("phases = []")), "mcp.servers.web.command");
        assert_eq!(
            field_of(&server("command = \"  \"")),
            "mcp.servers.web.command"
        );
        assert_eq!(
            field_of(&server("command = \"srv\"\nurl = \"http://h/mcp\"")),
            "mcp.servers.web.url"
        );
        assert_eq!(
            field_of(&server("command = \"srv\"\nheaders = { X = \"y\" }")),
            "mcp.servers.web.headers"
        );
        assert_eq!(
            field_of(&server("url = \"http://h/mcp\"\nenv = { X = \"y\" }")),
            "mcp.servers.web.env"
        );
        assert_eq!(
            field_of(&server("url = \"http://h/mcp\"\nargs = [\"-v\"]")),
            "mcp.servers.web.args"
        );
        for bad in ["not a url", "ftp://h/mcp", "http://user:pw@h/mcp"] {
            assert_eq!(
                field_of(&server(&format!("url = \"{bad}\""))),
                "mcp.servers.web.url",
                "{bad}"
            );
        }
        assert_eq!(
            field_of(&server(
                "url = \"http://h/mcp\"\nheaders = { \"Mcp-Session-Id\" = \"x\" }"
            )),
            "mcp.servers.web.headers.Mcp-Session-Id"
        );
        assert_eq!(
            field_of(&server(
                "url = \"http://h/mcp\"\nheaders = { \"bad header\" = \"x\" }"
            )),
            "mcp.servers.web.headers.bad header"
        );
        assert_eq!(
            field_of(&server("url = \"http://h/mcp\"\ntimeout_secs = 0")),
            "mcp.servers.web.timeout_secs"
        );
    }

    #[test]
    fn variables_are_read_anywhere_in_a_value_and_named_when_missing() {
        assert_eq!(references("Bearer ${TOKEN}").unwrap(), ["TOKEN"]);
        assert_eq!(references("${A}:${B_2}").unwrap(), ["A", "B_2"]);
        assert_eq!(references("costs $5").unwrap(), Vec::<String>::new());
        assert!(references("Bearer ${TOKEN")
            .unwrap_err()
            .contains("without closing"));
        assert!(references("${1X}")
            .unwrap_err()
            .contains("not a variable name"));
        let lookup = |k: &str| (k == "TOKEN").then(|| "s3cret-value".to_string());
        let (v, read) = expand("web", "headers.Authorization", "Bearer ${TOKEN}", &lookup).unwrap();
        assert_eq!(v, "Bearer s3cret-value");
        assert_eq!(read, ["s3cret-value"]);
        let e = expand("web", "headers.X", "${NOPE}", &lookup)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[mcp.servers.web]")
                && e.contains("headers.X")
                && e.contains("`NOPE` is not set"),
            "{e}"
        );
    }

    #[test]
    fn credentials_are_named_for_checks_and_never_shown_by_debug() {
        let mut config = McpConfig::default();
        config.servers.insert(
            "web".into(),
            server("url = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer ${WEB_BEARER}\", X-Org = \"${ORG}\" }"),
        );
        config.servers.insert(
            "cli".into(),
            server("command = \"srv\"\nenv = { K = \"${CLI_KEY}\" }"),
        );
        assert_eq!(config.env_vars(), ["CLI_KEY", "ORG", "WEB_BEARER"]);
        let shown = format!(
            "{:?}",
            server(
                "url = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer literal-secret\" }"
            )
        );
        assert!(!shown.contains("literal-secret"), "{shown}");
        assert!(shown.contains("Authorization"), "{shown}");
        assert!(is_credential_header("Authorization"));
        assert!(is_credential_header("X-Api-Key"));
        assert!(!is_credential_header("X-Org"));
    }

    #[test]
    fn the_listing_says_what_is_offered_and_what_was_not_reached() {
        let info = |action: &str, phases: &[&str]| McpToolInfo {
            action: action.into(),
            server: "web".into(),
            phases: phases.iter().map(|p| p.to_string()).collect(),
            spec: ToolSpec {
                name: action.into(),
                description: "Look a key up".into(),
                input_schema: serde_json::json!({"type": "object"}),
            },
        };
        let errors = [McpError::Start {
            server: "gone".into(),
            endpoint: "http://127.0.0.1:9/mcp".into(),
            message: "cannot connect".into(),
        }];
        let shown = render_listing(
            &[info("mcp__web__a", &[]), info("mcp__web__b", &["verify"])],
            &errors,
            &["mcp__web__a"],
            "review",
        );
        assert!(
            shown.starts_with("=== MCP tools (1 offered in phase `review`, 1 not) ==="),
            "{shown}"
        );
        assert!(shown.contains("no (phases: verify)"), "{shown}");
        assert!(
            shown.contains(
                "not reached: MCP server `gone` (http://127.0.0.1:9/mcp): cannot connect"
            ),
            "{shown}"
        );
    }
}
