//! MCP tools through the binary (issue 13, item 6): a real MCP server, built here with
//! the official Rust SDK (rmcp) and started by the run from `[mcp.servers.<name>]`,
//! whose tools the model is offered beside the built-in actions, in the phases the
//! config names; each call checked against the tool's schema, guarded, capped, and
//! recorded like any action. The model's side is a scripted Anthropic server on
//! 127.0.0.1.
//!
//! This file has its own `main` (`harness = false`): started with
//! `AGENTFORGE_TEST_MCP_SERVER=<calls file>`, the test binary is the MCP server (stdio),
//! so the server needs no separate build; otherwise it runs the tests below.

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const SERVER_ENV: &str = "AGENTFORGE_TEST_MCP_SERVER";
const KEY: &str = "sk-test-mcp-0123456789";

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
             [plugins.config.guard-read-only-roles]\nwrite_actions = [\"mcp__notes__write_note\"]\n\n{servers}"
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
        text(&out.stderr).contains("mcp: notes: 4 tool(s)"),
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

fn main() {
    if let Some(calls) = std::env::var_os(SERVER_ENV) {
        serve(PathBuf::from(calls));
        return;
    }
    let tests: [(&str, fn()); 2] = [
        (
            "mcp_tools_are_offered_checked_guarded_capped_and_recorded",
            mcp_tools_are_offered_checked_guarded_capped_and_recorded,
        ),
        (
            "a_server_that_cannot_start_or_is_misconfigured_is_a_clear_error",
            a_server_that_cannot_start_or_is_misconfigured_is_a_clear_error,
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
