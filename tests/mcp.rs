//! MCP tools through the binary (issue 13, item 6): a real MCP server, built here with
//! the official Rust SDK (rmcp), whose tools the model is offered beside the built-in
//! actions, in the phases the config names; each call checked against the tool's schema,
//! guarded, capped, and recorded like any action. The server runs on stdio (started by
//! the run from `command`) or over streamable HTTP on 127.0.0.1 (reached at `url`, with
//! `headers`). The model's side is a scripted Anthropic server on 127.0.0.1.
//! `agentforge context` lists the servers' tools.
//!
//! This file has its own `main` (`harness = false`): started with
//! `AGENTFORGE_TEST_MCP_SERVER=<calls file>`, the test binary is the MCP server (stdio),
//! so the server needs no separate build; otherwise it runs the tests below (and serves
//! the HTTP one from a thread of its own).

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const SERVER_ENV: &str = "AGENTFORGE_TEST_MCP_SERVER";
const KEY: &str = "sk-test-mcp-0123456789";
/// The HTTP server's bearer token, read by the run from a variable whose name says
/// nothing of a key (so only the MCP config marks it as one).
const TOKEN: &str = "mcp-bearer-7f3a9c2e51";
const TOKEN_VAR: &str = "NOTES_BEARER";

/// The `Authorization` header the HTTP server last accepted (`whoami` answers it).
static SEEN_AUTH: Mutex<Option<String>> = Mutex::new(None);

// ------------------------------------------------------------------ the MCP server

/// A small notes service: every call is appended to the calls file, so a test can see
/// which calls reached the server.
#[derive(Clone)]
struct Notes {
    calls: PathBuf,
    // Read by the code `tool_handler` generates.
    #[allow(dead_code)]
    tool_router: ToolRouter<Self>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Lookup {
    /// The key to look up.
    key: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WriteNote {
    /// Where.
    path: String,
    /// What.
    text: String,
}

impl Notes {
    fn log(&self, call: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.calls)
            .unwrap();
        writeln!(f, "{call}").unwrap();
    }
}

#[tool_router]
impl Notes {
    #[tool(description = "Look up the value stored under a key")]
    fn lookup(&self, Parameters(Lookup { key }): Parameters<Lookup>) -> String {
        self.log(&format!("lookup {key}"));
        format!("value of {key}: 42")
    }

    #[tool(description = "The full report (long)")]
    fn report(&self) -> String {
        self.log("report");
        "report line\n".repeat(5_000)
    }

    #[tool(description = "Ask the upstream service (it is down)")]
    fn upstream(&self) -> Result<CallToolResult, ErrorData> {
        self.log("upstream");
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "the upstream service is down",
        )]))
    }

    #[tool(description = "Who the service thinks the caller is (its credentials, echoed)")]
    fn whoami(&self) -> String {
        self.log("whoami");
        match SEEN_AUTH.lock().unwrap().as_deref() {
            Some(auth) => format!("you called with authorization: {auth}"),
            None => "you called without credentials".to_string(),
        }
    }

    #[tool(description = "Write a note into the project")]
    fn write_note(&self, Parameters(WriteNote { path, text }): Parameters<WriteNote>) -> String {
        self.log(&format!("write_note {path}"));
        format!("wrote {} bytes to {path}", text.len())
    }
}

#[tool_handler]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

fn serve(calls: PathBuf) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let notes = Notes {
            calls,
            tool_router: Notes::tool_router(),
        };
        let running = notes
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await
            .unwrap();
        let _ = running.waiting().await;
    });
}

/// The notes service over streamable HTTP at `url` (127.0.0.1, a free port), served by
/// this process on a thread of its own: every request must carry `Authorization: Bearer
/// TOKEN` (else 401). [`HttpNotes::stop`] takes it down: its runtime is dropped with
/// every connection, so the port refuses from then on.
struct HttpNotes {
    url: String,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

async fn require_token(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if auth.as_deref() != Some(format!("Bearer {TOKEN}").as_str()) {
        return axum::response::IntoResponse::into_response(axum::http::StatusCode::UNAUTHORIZED);
    }
    *SEEN_AUTH.lock().unwrap() = auth;
    next.run(req).await
}

impl HttpNotes {
    fn start(calls: PathBuf) -> Arc<HttpNotes> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let service = StreamableHttpService::new(
                    move || {
                        Ok(Notes {
                            calls: calls.clone(),
                            tool_router: Notes::tool_router(),
                        })
                    },
                    LocalSessionManager::default().into(),
                    StreamableHttpServerConfig::default(),
                );
                let app = axum::Router::new()
                    .nest_service("/mcp", service)
                    .layer(axum::middleware::from_fn(require_token));
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    served = axum::serve(listener, app) => served.unwrap(),
                    _ = stopped => {}
                }
            });
            // Every task (each open connection) goes with the runtime.
            rt.shutdown_timeout(std::time::Duration::from_secs(2));
        });
        Arc::new(HttpNotes {
            url,
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Takes the server down and waits until it is.
    fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap().take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.lock().unwrap().take() {
            thread.join().unwrap();
        }
    }
}

// ------------------------------------------------------------------ the tests

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A workspace whose task is the critic's (a read-only role, so a writing MCP tool is
/// a guard's to refuse; it may complete at any step), and whose config starts
/// `servers`.
fn workspace(servers: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "status: fine\n").unwrap();
    std::fs::write(
        tmp.path().join("task.yaml"),
        "id: ask-notes\ntask_type: critic\nrole: critic\ngoal: Find the stored answer\n\
         inputs:\n  brief:\n    instructions: Look the answer up with the notes service\n\
         max_steps: 10\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("agentforge.toml"),
        format!(
            "[provider]\nmax_retries = 0\n\n\
             [plugins.config.guard-read-only-roles]\nwrite_actions = [\"mcp__notes__write_note\", \"mcp__web__write_note\"]\n\n{servers}"
        ),
    )
    .unwrap();
    tmp
}

/// `[mcp.servers.<name>]` running this binary as the notes server.
fn server_config(name: &str, calls: &Path, extra: &str) -> String {
    let me = std::env::current_exe().unwrap();
    format!(
        "[mcp.servers.{name}]\ncommand = {:?}\nenv = {{ {SERVER_ENV} = {:?} }}\n{extra}\n",
        me.display().to_string(),
        calls.display().to_string()
    )
}

fn run(ws: &Path, server: &ScriptedServer) -> Output {
    run_with(ws, server, &[])
}

fn run_with(ws: &Path, server: &ScriptedServer, env: &[(&str, &str)]) -> Output {
    let mut c = support::notes::agentforge(ws);
    c.args([
        "run",
        "task.yaml",
        "--provider",
        "anthropic",
        "--model",
        "test-model",
    ]);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn records(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(ws.join(".agentforge/tasks/ask-notes/actions.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn mcp_tools_are_offered_checked_guarded_capped_and_recorded() {
    let calls_dir = tempfile::tempdir().unwrap();
    let calls = calls_dir.path().join("calls.log");
    let other_calls = calls_dir.path().join("other.log");
    let config = format!(
        "{}{}",
        server_config("notes", &calls, "max_output_chars = 2000"),
        // A second server whose tools are offered only in a phase the task never reaches,
        // and only
        // `lookup` of them.
        server_config(
            "other",
            &other_calls,
            "phases = [\"verify\"]\ntools = [\"lookup\"]"
        ),
    );
    let ws = workspace(&config);
    let ws = ws.path();
    let server = ScriptedServer::start_background(
        Protocol::Anthropic,
        vec![
            Scripted::tool_call("mcp__notes__lookup", json!({"key": "answer"})),
            // Missing the required key: refused before the server sees it.
            Scripted::tool_call("mcp__notes__lookup", json!({"name": "answer"})),
            Scripted::tool_call("mcp__notes__report", json!({})),
            Scripted::tool_call("mcp__notes__upstream", json!({})),
            // A write by a read-only role: the guard refuses it.
            Scripted::tool_call(
                "mcp__notes__write_note",
                json!({"path": "n.txt", "text": "hi"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "the answer is 42"})),
        ],
    );
    let out = run(ws, &server);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("mcp: notes: 5 tool(s)"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("mcp: other: 1 tool(s)"));

    // Offered with the server's own schema; the other server's tool not in analyze.
    let requests = server.requests();
    let first = requests[0].tool_names();
    for t in [
        "mcp__notes__lookup",
        "mcp__notes__report",
        "mcp__notes__upstream",
        "mcp__notes__whoami",
        "mcp__notes__write_note",
    ] {
        assert!(first.iter().any(|n| n == t), "{t} not offered: {first:?}");
    }
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__other__")),
        "{first:?}"
    );
    let lookup = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__notes__lookup")
        .unwrap();
    assert_eq!(
        lookup["input_schema"]["required"],
        json!(["key"]),
        "{lookup}"
    );
    assert_eq!(
        lookup["description"],
        "Look up the value stored under a key"
    );

    let r = records(ws);
    assert_eq!(r[0]["action"], "mcp__notes__lookup");
    assert_eq!(r[0]["result"], "success", "{}", r[0]);
    assert!(r[0]["summary"]
        .as_str()
        .unwrap()
        .contains("value of answer: 42"));
    // The answer is in the next step's context.
    assert!(requests[1].user_text().contains("value of answer: 42"));
    assert_ne!(r[1]["result"], "success", "{}", r[1]);
    let refused = format!("{} {}", r[1]["error"], r[1]["summary"]);
    assert!(refused.contains("key"), "{refused}");
    assert_eq!(r[2]["result"], "success");
    let shown = requests[3].user_text();
    assert!(
        shown.contains("output cut: 2000 of 60000 characters"),
        "{shown}"
    );
    assert_eq!(r[3]["result"], "failure", "{}", r[3]);
    assert!(
        requests[4]
            .user_text()
            .contains("the upstream service is down"),
        "{}",
        requests[4].user_text()
    );
    assert_ne!(r[4]["result"], "success", "{}", r[4]);
    let denied = format!("{} {}", r[4]["error"], r[4]["summary"]);
    assert!(denied.contains("read-only"), "{denied}");
    assert_eq!(r[5]["action"], "complete");

    // What reached the server: the valid calls only, in order.
    let seen = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["lookup answer", "report", "upstream"]
    );
    assert!(!other_calls.exists());
    // No key in anything the run wrote.
    for e in walk(&ws.join(".agentforge")) {
        let bytes = std::fs::read(&e).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{}",
            e.display()
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn a_server_that_cannot_start_or_is_misconfigured_is_a_clear_error() {
    let server = ScriptedServer::start_background(Protocol::Anthropic, vec![]);
    let cases = [
        (
            "[mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n".to_string(),
            vec!["MCP server `broken`", "/nonexistent/mcp-server", "cannot start it"],
        ),
        (
            format!(
                "[mcp.servers.keyed]\ncommand = {:?}\nenv = {{ TOKEN = \"${{AGENTFORGE_TEST_UNSET_TOKEN}}\" }}\n",
                std::env::current_exe().unwrap().display().to_string()
            ),
            vec!["[mcp.servers.keyed]", "env.TOKEN", "AGENTFORGE_TEST_UNSET_TOKEN"],
        ),
        (
            format!(
                "[mcp.servers.picky]\ncommand = {:?}\ntools = [\"nope\"]\nenv = {{ {SERVER_ENV} = \"/dev/null\" }}\n",
                std::env::current_exe().unwrap().display().to_string()
            ),
            vec!["[mcp.servers.picky]", "`nope`", "lookup"],
        ),
        // Exactly one of `command` and `url`; each field where it belongs.
        (
            "[mcp.servers.both]\ncommand = \"x\"\nurl = \"http://127.0.0.1:9/mcp\"\n".to_string(),
            vec!["mcp.servers.both.url", "both set"],
        ),
        (
            "[mcp.servers.neither]\nphases = [\"analyze\"]\n".to_string(),
            vec!["mcp.servers.neither.command", "`url`"],
        ),
        (
            "[mcp.servers.stdio]\ncommand = \"x\"\nheaders = { Authorization = \"Bearer x\" }\n".to_string(),
            vec!["mcp.servers.stdio.headers", "`env`"],
        ),
        (
            "[mcp.servers.web]\nurl = \"ftp://127.0.0.1/mcp\"\n".to_string(),
            vec!["mcp.servers.web.url", "ftp://127.0.0.1/mcp", "http://"],
        ),
        (
            "[mcp.servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Accept = \"text/plain\" }\n".to_string(),
            vec!["mcp.servers.web.headers.Accept", "reserved"],
        ),
        (
            "[mcp.servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${NOTES_BEARER\" }\n".to_string(),
            vec!["mcp.servers.web.headers.Authorization", "without closing"],
        ),
        (
            "[mcp.servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${AGENTFORGE_TEST_UNSET_TOKEN}\" }\n".to_string(),
            vec!["[mcp.servers.web]", "headers.Authorization", "AGENTFORGE_TEST_UNSET_TOKEN", "not set"],
        ),
    ];
    for (config, words) in cases {
        let ws = workspace(&config);
        let out = run(ws.path(), &server);
        assert_eq!(
            out.status.code(),
            Some(64),
            "{config}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        for w in words {
            assert!(err.contains(w), "{w}: {err}");
        }
    }
    assert!(
        server.requests().is_empty(),
        "no model call before the tools are ready"
    );
}

/// `[mcp.servers.web]` reaching `url`, the token read from [`TOKEN_VAR`].
fn http_config(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[mcp.servers.{name}]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{{TOKEN_VAR}}}\" }}\n{extra}\n"
    )
}

fn mcp_tools_over_streamable_http_are_offered_called_capped_guarded_and_masked() {
    let calls_dir = tempfile::tempdir().unwrap();
    let calls = calls_dir.path().join("calls.log");
    let web = HttpNotes::start(calls.clone());
    let ws = workspace(&http_config(
        "web",
        &web.url,
        "max_output_chars = 1500\ntimeout_secs = 20",
    ));
    let ws = ws.path();
    let down = web.clone();
    let server = ScriptedServer::start_background(
        Protocol::Anthropic,
        vec![
            Scripted::tool_call("mcp__web__lookup", json!({"key": "answer"})),
            Scripted::tool_call("mcp__web__report", json!({})),
            // A write by a read-only role: the guard refuses it before the server.
            Scripted::tool_call(
                "mcp__web__write_note",
                json!({"path": "n.txt", "text": "hi"}),
            ),
            // The server echoes the credentials it got: they must not be recorded.
            Scripted::tool_call("mcp__web__whoami", json!({})),
            // The server goes down before this step's call.
            Scripted::dynamic(move |_| {
                down.stop();
                Scripted::tool_call("mcp__web__lookup", json!({"key": "again"}))
            }),
            Scripted::tool_call("complete", json!({"summary": "the answer is 42"})),
        ],
    );
    let out = run_with(ws, &server, &[(TOKEN_VAR, TOKEN)]);
    web.stop();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&format!("mcp: web: 5 tool(s) at {}", web.url)),
        "{err}"
    );

    let requests = server.requests();
    let first = requests[0].tool_names();
    for t in [
        "mcp__web__lookup",
        "mcp__web__report",
        "mcp__web__write_note",
    ] {
        assert!(first.iter().any(|n| n == t), "{t} not offered: {first:?}");
    }
    let lookup = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__web__lookup")
        .unwrap();
    assert_eq!(
        lookup["input_schema"]["required"],
        json!(["key"]),
        "{lookup}"
    );

    let r = records(ws);
    assert_eq!(r.len(), 6, "{r:?}");
    assert_eq!(r[0]["action"], "mcp__web__lookup");
    assert_eq!(r[0]["result"], "success", "{}", r[0]);
    assert!(requests[1].user_text().contains("value of answer: 42"));
    // 60,000 characters cut to 1,500, saying so.
    assert_eq!(r[1]["result"], "success", "{}", r[1]);
    let shown = requests[2].user_text();
    assert!(
        shown.contains("output cut: 1500 of 60000 characters"),
        "{shown}"
    );
    let denied = format!("{} {}", r[2]["error"], r[2]["summary"]);
    assert_ne!(r[2]["result"], "success", "{}", r[2]);
    assert!(denied.contains("read-only"), "{denied}");
    // The echo is recorded masked.
    assert_eq!(r[3]["result"], "success", "{}", r[3]);
    // The header's whole value is a credential (masked whole), and so is the token.
    assert!(
        r[3]["summary"]
            .as_str()
            .unwrap()
            .contains("authorization: ***"),
        "{}",
        r[3]
    );
    // The server down: the call fails naming the server and its URL; the run goes on.
    assert_eq!(r[4]["result"], "failure", "{}", r[4]);
    let failed = format!("{} {}", r[4]["error"], r[4]["summary"]);
    assert!(
        failed.contains("MCP server `web`") && failed.contains(&web.url),
        "{failed}"
    );
    assert!(requests[5].user_text().contains("MCP server `web`"));
    assert_eq!(r[5]["action"], "complete");

    // What reached the server: the valid, allowed calls, while it was up.
    let seen = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["lookup answer", "report", "whoami"]
    );
    // Neither the provider's key nor the server's token in anything the run wrote.
    for e in walk(&ws.join(".agentforge")) {
        let bytes = std::fs::read(&e).unwrap();
        let content = String::from_utf8_lossy(&bytes);
        assert!(!content.contains(KEY), "{}", e.display());
        assert!(!content.contains(TOKEN), "{}", e.display());
    }
    // Trajectories are gzip: read them whole, too.
    for e in walk(&ws.join(".agentforge")) {
        if e.extension().is_some_and(|x| x == "gz") {
            use std::io::Read;
            let mut s = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&e).unwrap())
                .read_to_string(&mut s)
                .unwrap();
            assert!(!s.contains(TOKEN), "{}", e.display());
        }
    }
}

fn an_http_server_that_is_down_is_a_clear_error_naming_it_and_its_url() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let ws = workspace(&http_config("down", &url, ""));
    let server = ScriptedServer::start_background(Protocol::Anthropic, vec![]);
    let out = run_with(ws.path(), &server, &[(TOKEN_VAR, TOKEN)]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("MCP server `down`"), "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(err.contains("is the server running at that URL"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");
    assert!(
        server.requests().is_empty(),
        "no model call before the tools are ready"
    );

    // Up, but the credentials are wrong: refused, saying so.
    let calls_dir = tempfile::tempdir().unwrap();
    let web = HttpNotes::start(calls_dir.path().join("calls.log"));
    let ws = workspace(&http_config("web", &web.url, ""));
    let out = run_with(ws.path(), &server, &[(TOKEN_VAR, "not-the-token-123")]);
    web.stop();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains(&format!("MCP server `web` ({})", web.url)),
        "{err}"
    );
    assert!(err.contains("401") || err.contains("Auth"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(server.requests().is_empty());
}

fn context_lists_the_mcp_tools_with_their_server_and_tokens() {
    let calls_dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gone = format!("http://127.0.0.1:{port}/mcp");
    let config = format!(
        "{}{}{}",
        server_config("notes", &calls_dir.path().join("calls.log"), ""),
        server_config(
            "other",
            &calls_dir.path().join("other.log"),
            "phases = [\"verify\"]\ntools = [\"lookup\"]"
        ),
        http_config("gone", &gone, ""),
    );
    let ws = workspace(&config);
    let ws = ws.path();
    let out = support::notes::agentforge(ws)
        .args(["task", "new", "task.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = support::notes::agentforge(ws)
        .args(["context", "ask-notes"])
        .env(TOKEN_VAR, TOKEN)
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{shown}", text(&out.stderr));
    let section = &shown[shown
        .find("=== MCP tools")
        .unwrap_or_else(|| panic!("no MCP section: {shown}"))..];
    assert!(
        section.starts_with("=== MCP tools (5 offered in phase `review`, 1 not) ==="),
        "{section}"
    );
    let row = |tool: &str| {
        section
            .lines()
            .find(|l| l.starts_with(tool))
            .unwrap_or_else(|| panic!("no row for {tool}: {section}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    for tool in ["lookup", "report", "upstream", "whoami", "write_note"] {
        let r = row(&format!("mcp__notes__{tool} "));
        assert_eq!(r[1], "notes", "{r:?}");
        let tokens: usize = r[2].parse().unwrap();
        assert!((20..400).contains(&tokens), "{r:?}");
        assert_eq!(r[3], "yes", "{r:?}");
    }
    let other = row("mcp__other__lookup ");
    assert_eq!((other[1], other[3]), ("other", "no"), "{other:?}");
    assert!(section.contains("no (phases: verify)"), "{section}");
    // The offered ones are in the prompt's tools; the other is not.
    let tools_line = shown
        .lines()
        .find(|l| l.starts_with("=== tools ("))
        .unwrap();
    assert!(tools_line.contains("mcp__notes__lookup"), "{tools_line}");
    assert!(!tools_line.contains("mcp__other__"), "{tools_line}");
    // The server that is down is named, with its URL; the rest is still shown.
    assert!(
        section.contains(&format!("not reached: MCP server `gone` ({gone})")),
        "{section}"
    );

    let out = support::notes::agentforge(ws)
        .args(["--json", "context", "ask-notes"])
        .env(TOKEN_VAR, TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = v["mcp_tools"].as_array().unwrap();
    assert_eq!(listed.len(), 6, "{listed:?}");
    let lookup = listed
        .iter()
        .find(|t| t["name"] == "mcp__notes__lookup")
        .unwrap();
    assert_eq!(lookup["server"], "notes");
    assert_eq!(lookup["offered"], true);
    assert!(lookup["tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["mcp_errors"].as_array().unwrap().len(), 1, "{v:#}");
}

fn main() {
    if let Some(calls) = std::env::var_os(SERVER_ENV) {
        serve(PathBuf::from(calls));
        return;
    }
    let tests: [(&str, fn()); 5] = [
        (
            "mcp_tools_are_offered_checked_guarded_capped_and_recorded",
            mcp_tools_are_offered_checked_guarded_capped_and_recorded,
        ),
        (
            "a_server_that_cannot_start_or_is_misconfigured_is_a_clear_error",
            a_server_that_cannot_start_or_is_misconfigured_is_a_clear_error,
        ),
        (
            "mcp_tools_over_streamable_http_are_offered_called_capped_guarded_and_masked",
            mcp_tools_over_streamable_http_are_offered_called_capped_guarded_and_masked,
        ),
        (
            "an_http_server_that_is_down_is_a_clear_error_naming_it_and_its_url",
            an_http_server_that_is_down_is_a_clear_error_naming_it_and_its_url,
        ),
        (
            "context_lists_the_mcp_tools_with_their_server_and_tokens",
            context_lists_the_mcp_tools_with_their_server_and_tokens,
        ),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!("\nrunning {} tests", tests.len());
    let (mut passed, mut failed) = (0, 0);
    for (name, f) in tests {
        if !filter.is_empty() && !filter.iter().any(|p| name.contains(p.as_str())) {
            continue;
        }
        let ok = std::panic::catch_unwind(f).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out\n",
        if failed == 0 { "ok" } else { "FAILED" }
    );
    if failed > 0 {
        std::process::exit(101);
    }
}
