//! MCP servers' tools offered to the model beside the plugin tools (`[mcp.servers.<name>]`
//! in `agentforge.toml`), through the official Rust SDK (rmcp) as its client.
//!
//! A server is a command the run starts (stdio transport); its tools become actions named
//! `mcp__<server>__<tool>`, offered in the phases the config names (every phase when it
//! names none). A call goes through the executor like any tool action (guards first, the
//! result recorded and shown in `recent` and working memory), with its arguments checked
//! against the tool's input schema, a time limit and an output cap. The server lives as
//! long as the run; it is killed with it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentforge_core::args::ArgumentSchema;
use agentforge_core::model::ToolSpec;
use agentforge_core::state::ActionResult;
use agentforge_store::tools::{ExtraTool, ToolOutcome};
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
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

/// `[mcp.servers.<name>]`: one server, started as a command speaking MCP on stdio.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it. A value `${NAME}` is taken from the run's own
    /// environment, so a key never has to be written into the config.
    pub env: BTreeMap<String, String>,
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

impl Default for McpServerConfig {
    fn default() -> Self {
        McpServerConfig {
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            phases: Vec::new(),
            tools: Vec::new(),
            max_output_chars: 16_384,
            timeout_secs: 60,
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
    /// The server did not start or did not answer.
    #[error("MCP server `{server}` ({command}): {message}")]
    Start {
        /// The server's name.
        server: String,
        /// Its command.
        command: String,
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

/// The value of an `env` entry: `${NAME}` from the run's environment.
fn env_value(server: &str, key: &str, value: &str) -> Result<String, McpError> {
    match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        Some(name) => std::env::var(name).map_err(|_| McpError::Config {
            server: server.to_string(),
            message: format!("env.{key} = \"{value}\", but `{name}` is not set in the environment"),
        }),
        None => Ok(value.to_string()),
    }
}

/// A running server: kept alive by the tools that use it, killed when the last goes.
struct Server {
    name: String,
    running: RunningService<RoleClient, ()>,
}

/// Starts every configured server and returns their tools (in server, then tool order),
/// and one line per server for the person (`name: N tools`). Runs inside the run's
/// multi-thread Tokio runtime, where the tools are later called.
pub async fn connect(
    config: &McpConfig,
) -> Result<(Vec<Box<dyn ExtraTool>>, Vec<String>), McpError> {
    let mut tools: Vec<Box<dyn ExtraTool>> = Vec::new();
    let mut notes = Vec::new();
    for (name, cfg) in &config.servers {
        let bad = |message: String| McpError::Config {
            server: name.clone(),
            message,
        };
        if !valid_name(name) {
            return Err(bad(
                "a server name may hold only letters, digits, `_` and `-` (it is part of the tools' action names)".into(),
            ));
        }
        if cfg.command.trim().is_empty() {
            return Err(bad(
                "`command` is missing: the program that serves MCP on stdio".into(),
            ));
        }
        if cfg.max_output_chars == 0 || cfg.timeout_secs == 0 {
            return Err(bad(
                "`max_output_chars` and `timeout_secs` must be above 0".into()
            ));
        }
        let mut cmd = tokio::process::Command::new(&cfg.command);
        cmd.args(&cfg.args);
        for (k, v) in &cfg.env {
            cmd.env(k, env_value(name, k, v)?);
        }
        let start = |message: String| McpError::Start {
            server: name.clone(),
            command: cfg.command.clone(),
            message,
        };
        let (transport, _stderr) = TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| start(format!("cannot start it: {e}")))?;
        let started = tokio::time::timeout(Duration::from_secs(START_TIMEOUT_SECS), async {
            let running = ().serve(transport).await.map_err(|e| e.to_string())?;
            let listed = running.list_all_tools().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((running, listed))
        })
        .await
        .map_err(|_| start(format!("no answer within {START_TIMEOUT_SECS} s")))?
        .map_err(start)?;
        let (running, listed) = started;
        let server = Arc::new(Server {
            name: name.clone(),
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
        let mut offered = 0;
        for t in listed {
            if !cfg.tools.is_empty() && !cfg.tools.iter().any(|w| w == t.name.as_ref()) {
                continue;
            }
            let action = format!("mcp__{name}__{}", t.name);
            if !valid_name(&t.name) || action.len() > MAX_TOOL_NAME {
                notes.push(format!(
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
            tools.push(Box::new(McpTool {
                spec: ToolSpec {
                    name: action,
                    description: t
                        .description
                        .as_deref()
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{} (MCP server `{name}`)", t.name)),
                    input_schema: schema,
                },
                tool: t.name.to_string(),
                arguments,
                phases: cfg.phases.clone(),
                max_output_chars: cfg.max_output_chars,
                timeout: Duration::from_secs(cfg.timeout_secs),
                peer: server.running.peer().clone(),
                server: server.clone(),
            }));
            offered += 1;
        }
        notes.push(format!("{name}: {offered} tool(s)"));
    }
    Ok((tools, notes))
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
                    "MCP server `{}` did not answer within {} s",
                    self.server.name,
                    self.timeout.as_secs()
                )
            })?
            .map_err(|e| format!("MCP server `{}`: {e}", self.server.name))?;
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
