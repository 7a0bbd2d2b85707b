//! `agentforge.toml`: provider, budgets, limits, commands, prompts and plugin folders.
//!
//! Precedence, lowest first: built-in defaults, `agentforge.toml`, environment
//! (`AGENTFORGE_PROVIDER`, `AGENTFORGE_MODEL`, `AGENTFORGE_REPLAY`), command-line flags.
//! API keys are never part of the config: they are read from the environment by the
//! provider and never written anywhere.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use agentforge_context::Budgets;
use agentforge_core::cost::{MicroUsd, ModelPrice, PriceTable};
use agentforge_core::model::{ProviderKind, ToolMode};
pub use agentforge_plugin_host::PluginsConfig;
use agentforge_providers::ProviderSettings;
use agentforge_store::commands::CommandLimits;

/// Name of the config file looked up in the workspace root.
pub const CONFIG_FILE: &str = "agentforge.toml";

/// The whole configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Model provider.
    pub provider: ProviderConfig,
    /// Token budgets of the prompt.
    pub budget: Budgets,
    /// Step, command and retry limits.
    pub limits: Limits,
    /// Extension and early stop of the step budget.
    pub adaptive_budget: agentforge_core::budget::BudgetPolicy,
    /// Fact extraction.
    pub understanding: Understanding,
    /// Loop detection.
    pub loops: LoopsConfig,
    /// Default verification commands for tasks that name none.
    pub commands: Commands,
    /// Prompt template overrides.
    pub prompts: PromptsConfig,
    /// Plugin folders (used by the plugin system).
    pub plugins: PluginsConfig,
    /// The model's file actions.
    pub tools: ToolsConfig,
    /// How checks and tests run.
    pub checks: ChecksConfig,
    /// The value loop (`agentforge run DIR`): its bounds and each role's model.
    pub value_loop: ValueLoopConfig,
    /// A task's git branch and per-step commits.
    pub git: crate::task_git::GitConfig,
    /// MCP servers whose tools a run offers.
    pub mcp: crate::mcp::McpConfig,
    /// Learning from enforcement: traces, precedents, patterns, proposed guards.
    pub learning: crate::learning::LearningConfig,
    /// `[pricing."<model>"]`: prices replacing or adding to the shipped defaults.
    pub pricing: std::collections::BTreeMap<String, PriceConfig>,
}

/// `[pricing."<model>"]`: a model's price in US dollars per million tokens.
///
/// ```toml
/// [pricing."claude-sonnet-4-5"]
/// input_per_mtok = 3.0
/// output_per_mtok = 15.0
/// cached_input_per_mtok = 0.30   # optional: cached prompt tokens, else billed as input
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Prompt tokens not read from the provider's cache.
    pub input_per_mtok: f64,
    /// Completion tokens.
    pub output_per_mtok: f64,
    /// Prompt tokens read from the provider's cache (default: `input_per_mtok`).
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
}

/// The value loop's roles, as `[value_loop.roles.<role>]` names them.
pub const VALUE_LOOP_ROLES: &[&str] = &[
    "planner",
    "critic",
    "classifier",
    "builder",
    "qc_author",
    "fixer",
    "evaluator",
    "researcher",
];

/// `[value_loop]`: the bounds a project may lower (`[value_loop.limits]`, never above
/// their ceilings) and the model each role uses (`[value_loop.roles.<role>]`).
///
/// ```toml
/// [value_loop.limits]
/// max_iterations = 60
/// [value_loop.roles.evaluator]
/// provider = "anthropic"
/// model = "claude-opus-4-1"
/// max_output_tokens = 8000
/// max_steps = 12
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ValueLoopConfig {
    /// Bounds (each optional; see `agentforge_value_loop::limits`).
    pub limits: agentforge_value_loop::limits::LimitsConfig,
    /// Model routing per role; a role not named uses `[provider]`.
    pub roles: std::collections::BTreeMap<String, RoleConfig>,
    /// Plan gates run after the one plan review, in order (none by default): the seed's
    /// `craap`, `clarity`, `validate`, `connect`, `break`, `prune`, `tidy`, `blockers`
    /// (a critic task each, able to amend the plan through `manage_task`), `preflight`
    /// (the host checks the discovered tools and commands), or the task type of a
    /// context-schema plugin the project brings (its own gate).
    pub plan_gates: Vec<String>,
    /// The VRC heartbeat (seed 002 section 10): a VRC after every iteration that ran no
    /// evaluator, full (the evaluator) in the first 3 iterations, every 5th and after a
    /// course correction, quick (the classifier, on the metrics) otherwise. On by
    /// default; `false` saves a model call per iteration (route `classifier` to a cheap
    /// model instead), and then the evaluator scores only at critical evaluation and at
    /// the exit gate.
    pub vrc_every_iteration: bool,
}

impl Default for ValueLoopConfig {
    fn default() -> Self {
        ValueLoopConfig {
            limits: Default::default(),
            roles: Default::default(),
            plan_gates: Vec::new(),
            vrc_every_iteration: true,
        }
    }
}

/// The plan gates the host knows (see [`ValueLoopConfig::plan_gates`]).
pub const BUILTIN_PLAN_GATES: &[&str] = &[
    "craap",
    "clarity",
    "validate",
    "connect",
    "break",
    "prune",
    "tidy",
    "blockers",
    "preflight",
];

/// `[value_loop.roles.<role>]`: what differs from `[provider]` for one role.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoleConfig {
    /// `anthropic`, `openai` or `replay`.
    pub provider: Option<ProviderKind>,
    /// Model name.
    pub model: Option<String>,
    /// Base URL.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the key.
    pub api_key_env: Option<String>,
    /// `max_tokens` of the role's answers.
    pub max_output_tokens: Option<u32>,
    /// Step budget of one role task.
    pub max_steps: Option<u64>,
    /// Thinking effort of the role's model (`low`, `medium`, `high`).
    pub effort: Option<agentforge_core::model::Effort>,
}

impl Config {
    /// The configuration a role's tasks run with: `[provider]` and `[limits]` with the
    /// role's `[value_loop.roles.<role>]` settings over them.
    pub fn for_role(&self, role: &str) -> Config {
        let mut c = self.clone();
        if let Some(r) = self.value_loop.roles.get(role) {
            if let Some(k) = r.provider {
                if k != c.provider.kind {
                    // Another provider: the base URL and key variable of `[provider]`
                    // belong to the old one.
                    c.provider.base_url = None;
                    c.provider.api_key_env = None;
                }
                c.provider.kind = k;
            }
            if let Some(m) = &r.model {
                c.provider.model = m.clone();
            }
            if r.base_url.is_some() {
                c.provider.base_url = r.base_url.clone();
            }
            if r.api_key_env.is_some() {
                c.provider.api_key_env = r.api_key_env.clone();
            }
            if let Some(n) = r.max_output_tokens {
                c.provider.max_output_tokens = n;
            }
            if let Some(n) = r.max_steps {
                c.limits.max_steps = n;
            }
            if r.effort.is_some() {
                c.provider.effort = r.effort;
            }
        }
        c
    }
}

/// `[tools]`: what the model's file actions may not write.
///
/// ```toml
/// [tools]
/// protected = ["secrets/**", "*.lock", "deploy"]   # a folder's glob covers its content
/// ```
///
/// Always protected besides: `agentforge.toml` (and the `--config` file), the prompts
/// folder, the plugin folders in use, the task file of the run, `.agentforge/`, `.git/`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Workspace-relative globs (matched without case) the model may not write.
    pub protected: Vec<String>,
}

/// `[checks]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ChecksConfig {
    /// The environment checks run with.
    pub env: CheckEnvConfig,
}

/// `[checks.env]`: which environment variables checks get (globs on names, matched
/// without case). See [`agentforge_store::secrets`] for the built-in lists.
///
/// ```toml
/// [checks.env]
/// deny = ["DATABASE_URL", "STRIPE_*"]   # added to the built-in deny list
/// allow = ["MY_APP_*"]                  # allow-list mode: only these and the basics
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CheckEnvConfig {
    /// Left out, in addition to the built-in deny list; their values are masked too.
    pub deny: Vec<String>,
    /// When not empty, checks get only these (and `PATH`, `HOME`, `CARGO_*`... see
    /// [`agentforge_store::secrets::ALLOW_BASE`]); the deny lists still apply.
    pub allow: Vec<String>,
}

/// `[provider]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// `anthropic`, `openai` or `replay`.
    pub kind: ProviderKind,
    /// Model name sent to the provider.
    pub model: String,
    /// Base URL; defaults to `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, then the public endpoint.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the key, to override the default.
    pub api_key_env: Option<String>,
    /// Recorded session for the `replay` provider (relative to the config file's folder).
    pub replay: Option<PathBuf>,
    /// `native` tool calling or the `text` fallback.
    pub tool_mode: ToolMode,
    /// Per-request timeout.
    pub timeout_secs: u64,
    /// Retries on 429, 5xx, timeouts and dropped connections.
    pub max_retries: u32,
    /// First backoff; doubles with jitter up to `max_backoff_ms`.
    pub initial_backoff_ms: u64,
    /// Backoff ceiling.
    pub max_backoff_ms: u64,
    /// `max_tokens` for the model's answer.
    pub max_output_tokens: u32,
    /// Thinking effort (`low`, `medium`, `high`) where the provider has it; unset, none
    /// is asked for.
    pub effort: Option<agentforge_core::model::Effort>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            kind: ProviderKind::Anthropic,
            model: "claude-sonnet-4-5".to_string(),
            base_url: None,
            api_key_env: None,
            replay: None,
            tool_mode: ToolMode::Native,
            timeout_secs: 120,
            max_retries: 5,
            initial_backoff_ms: 1000,
            max_backoff_ms: 60_000,
            max_output_tokens: 4096,
            effort: None,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Default step budget of a task.
    pub max_steps: u64,
    /// Timeout of one check or test command.
    pub command_timeout_secs: u64,
    /// Bytes of command output kept (head and tail).
    pub output_cap_bytes: usize,
    /// Invalid model replies in a row before the task escalates.
    pub max_invalid_replies: u32,
    /// Working memory capacity.
    pub working_memory_items: usize,
    /// Spending cap of a task run, in US dollars: before each model call the recorded
    /// cost is compared with it and the run stops resumably when it is reached
    /// (`--max-cost-usd` wins). Needs a price for the model (`[pricing]`).
    pub max_cost_usd: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 30,
            command_timeout_secs: 300,
            output_cap_bytes: 1024 * 1024,
            max_invalid_replies: 3,
            working_memory_items: agentforge_core::working_memory::DEFAULT_MAX_ITEMS,
            max_cost_usd: None,
        }
    }
}

/// `[loops]`: detector thresholds and what repeated detections do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LoopsConfig {
    /// Detector thresholds.
    #[serde(flatten)]
    pub thresholds: agentforge_loops::LoopThresholds,
    /// Loops detected in one task before it escalates.
    pub max_detections: u32,
}

impl Default for LoopsConfig {
    fn default() -> Self {
        LoopsConfig {
            thresholds: agentforge_loops::LoopThresholds::default(),
            max_detections: 3,
        }
    }
}

/// `[understanding]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Understanding {
    /// Ask the model for facts when no extraction rule matched an output (an extra
    /// model call; confidence capped at 0.8). Not available with the replay provider.
    pub model_fallback: bool,
}

/// `[commands]`: used when a task has no `checks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Commands {
    /// Run by `run_check`.
    pub check: Option<String>,
    /// Run by `run_tests`.
    pub test: Option<String>,
}

/// `[prompts]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PromptsConfig {
    /// Folder of templates overriding the built-in ones (relative to the workspace).
    pub dir: Option<PathBuf>,
}

/// A spending cap in dollars (`max_cost_usd`, `--max-cost-usd`) as micro-dollars; the
/// error says what a cap must be.
pub fn parse_cap(dollars: f64) -> Result<MicroUsd, String> {
    match MicroUsd::from_dollars(dollars) {
        Some(c) if c > MicroUsd::ZERO => Ok(c),
        _ => Err(format!(
            "{dollars} is not a spending cap: give US dollars above 0 (e.g. 2.5)"
        )),
    }
}

/// Errors loading the configuration; each names the file or variable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read config {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax or shape error (the message carries line and column).
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Parser message.
        message: String,
    },
    /// A value that cannot be used.
    #[error("invalid config {origin}: `{field}`: {message}")]
    Value {
        /// File or environment variable.
        origin: String,
        /// The field.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
}

impl Config {
    /// Loads `path` if given, else `<workspace>/agentforge.toml` if present, else defaults;
    /// then applies environment overrides and validates.
    pub fn load(
        explicit: Option<&Path>,
        workspace: &Path,
    ) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => {
                let p = workspace.join(CONFIG_FILE);
                p.is_file().then_some(p)
            }
        };
        let mut config = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                    path: p.display().to_string(),
                    source,
                })?;
                Self::parse(&text, &p.display().to_string())?
            }
            None => Config::default(),
        };
        // Relative replay paths are relative to the config file's folder.
        if let (Some(p), Some(replay)) = (&path, &config.provider.replay) {
            if replay.is_relative() {
                let base = p.parent().unwrap_or(Path::new("."));
                config.provider.replay = Some(base.join(replay));
            }
        }
        config.apply_env(|k| std::env::var(k).ok())?;
        config.validate(
            &path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "defaults".into()),
        )?;
        Ok((config, path))
    }

    /// Parses TOML text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })
    }

    /// Applies `AGENTFORGE_*` overrides using `get` to read variables.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(kind) = get("AGENTFORGE_PROVIDER") {
            self.provider.kind = parse_kind(&kind).map_err(|e| ConfigError::Value {
                origin: "environment".into(),
                field: "AGENTFORGE_PROVIDER".into(),
                message: e.to_string(),
            })?;
        }
        if let Some(model) = get("AGENTFORGE_MODEL") {
            self.provider.model = model;
        }
        if let Some(replay) = get("AGENTFORGE_REPLAY") {
            self.provider.replay = Some(PathBuf::from(replay));
            self.provider.kind = ProviderKind::Replay;
        }
        Ok(())
    }

    /// Checks cross-field invariants.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let err = |field: &str, message: String| ConfigError::Value {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        self.budget
            .validate()
            .map_err(|m| err("budget", m.to_string()))?;
        if self.limits.max_steps == 0 {
            return Err(err("limits.max_steps", "must be at least 1".into()));
        }
        if self.limits.command_timeout_secs == 0 {
            return Err(err(
                "limits.command_timeout_secs",
                "must be at least 1".into(),
            ));
        }
        if self.learning.propose_threshold == 0 {
            return Err(err(
                "learning.propose_threshold",
                "must be at least 1 (a pattern seen once is not yet a pattern)".into(),
            ));
        }
        if self.learning.min_tasks == 0 {
            return Err(err("learning.min_tasks", "must be at least 1".into()));
        }
        if let Some(e) = &self.learning.embeddings {
            e.validate().map_err(|(field, m)| err(field, m))?;
        }
        if self.loops.max_detections == 0 {
            return Err(err("loops.max_detections", "must be at least 1".into()));
        }
        if self.limits.max_invalid_replies == 0 {
            return Err(err(
                "limits.max_invalid_replies",
                "must be at least 1".into(),
            ));
        }
        if self.limits.working_memory_items == 0 {
            return Err(err(
                "limits.working_memory_items",
                "must be at least 1".into(),
            ));
        }
        if self.provider.kind == ProviderKind::Replay && self.understanding.model_fallback {
            return Err(err(
                "understanding.model_fallback",
                "the replay provider answers one recorded call per step and cannot serve the extra fact-extraction call; turn it off for replayed runs".into(),
            ));
        }
        self.env_policy().map_err(|e| err(e.field, e.to_string()))?;
        agentforge_store::tools::compile_protected(&self.tools.protected)
            .map_err(|e| err("tools.protected", e.to_string()))?;
        agentforge_value_loop::Limits::new(&self.value_loop.limits)
            .map_err(|e| err("value_loop.limits", e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for gate in &self.value_loop.plan_gates {
            let valid = !gate.is_empty()
                && gate
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !valid || !seen.insert(gate.clone()) {
                return Err(err(
                    "value_loop.plan_gates",
                    format!(
                        "`{gate}` is {}; name a gate once: {} or the task type of a context-schema plugin",
                        if valid { "listed twice" } else { "not a gate name" },
                        BUILTIN_PLAN_GATES.join(", ")
                    ),
                ));
            }
        }
        for (name, role) in &self.value_loop.roles {
            if !VALUE_LOOP_ROLES.contains(&name.as_str()) {
                return Err(err(
                    &format!("value_loop.roles.{name}"),
                    format!(
                        "no role `{name}`; the roles are {}",
                        VALUE_LOOP_ROLES.join(", ")
                    ),
                ));
            }
            if role.max_steps == Some(0) {
                return Err(err(
                    &format!("value_loop.roles.{name}.max_steps"),
                    "must be at least 1".into(),
                ));
            }
            if role.max_output_tokens == Some(0) {
                return Err(err(
                    &format!("value_loop.roles.{name}.max_output_tokens"),
                    "must be at least 1".into(),
                ));
            }
        }
        self.price_table().map_err(|(field, m)| err(&field, m))?;
        self.mcp.validate().map_err(|(field, m)| err(&field, m))?;
        if let Some(cap) = self.limits.max_cost_usd {
            parse_cap(cap).map_err(|m| err("limits.max_cost_usd", m))?;
        }
        if self.provider.kind == ProviderKind::Replay && self.provider.replay.is_none() {
            return Err(err(
                "provider.replay",
                "the replay provider needs a recorded session: set provider.replay or pass --replay FILE".into(),
            ));
        }
        Ok(())
    }

    /// The price table: the shipped defaults with `[pricing]` over them. An error names
    /// the field (`pricing."<model>".<key>`) and what is wrong with its value.
    pub fn price_table(&self) -> Result<PriceTable, (String, String)> {
        let mut prices = std::collections::BTreeMap::new();
        for (model, p) in &self.pricing {
            let field = |k: &str| format!("pricing.\"{model}\".{k}");
            let dollars = |k: &str, v: f64| {
                MicroUsd::from_dollars(v).ok_or_else(|| {
                    (
                        field(k),
                        format!("{v} is not a price: give US dollars per million tokens, 0 or more (e.g. 3.0)"),
                    )
                })
            };
            let cached = match p.cached_input_per_mtok {
                Some(v) => Some(dollars("cached_input_per_mtok", v)?),
                None => None,
            };
            prices.insert(
                model.clone(),
                ModelPrice::new(
                    dollars("input_per_mtok", p.input_per_mtok)?,
                    dollars("output_per_mtok", p.output_per_mtok)?,
                    cached,
                ),
            );
        }
        Ok(PriceTable::with_overrides(prices))
    }

    /// The price of `model` from [`Config::price_table`] (`None`: unpriced; an invalid
    /// table was refused by [`Config::validate`]).
    pub fn price_of(&self, model: &str) -> Option<ModelPrice> {
        let table = self.price_table().ok()?;
        table.price(model).map(|(_, p)| *p)
    }

    /// Provider settings for [`agentforge_providers::Provider::from_settings`].
    pub fn provider_settings(&self) -> ProviderSettings {
        let p = &self.provider;
        ProviderSettings {
            kind: p.kind,
            base_url: p.base_url.clone(),
            api_key_env: p.api_key_env.clone(),
            replay_path: p.replay.clone(),
            timeout: Duration::from_secs(p.timeout_secs),
            max_retries: p.max_retries,
            initial_backoff: Duration::from_millis(p.initial_backoff_ms),
            max_backoff: Duration::from_millis(p.max_backoff_ms),
        }
    }

    /// The environment policy checks run with: `[checks.env]`, and the provider's key
    /// variable (whatever `api_key_env` names) and the variables `[mcp.servers]` read never
    /// passed.
    pub fn env_policy(
        &self,
    ) -> Result<agentforge_store::secrets::EnvPolicy, agentforge_store::secrets::EnvPolicyError>
    {
        let mut policy = agentforge_store::secrets::EnvPolicy::new(
            &self.checks.env.deny,
            &self.checks.env.allow,
        )?;
        if let Some(var) = self.provider_settings().key_env_var() {
            policy.force_deny(&var);
        }
        if let Some(var) = &self.provider.api_key_env {
            policy.force_deny(var);
        }
        // The embeddings endpoint's key: never a check's, always masked.
        if let Some(var) = self
            .learning
            .embeddings
            .as_ref()
            .and_then(|e| e.api_key_env.as_ref())
        {
            policy.force_deny(var);
        }
        // An MCP server's credentials (`${NAME}` in its env or headers): never a check's,
        // always masked, whatever the variable is called.
        for var in self.mcp.env_vars() {
            policy.force_deny(&var);
        }
        Ok(policy)
    }

    /// Limits for check and test commands.
    pub fn command_limits(&self) -> CommandLimits {
        CommandLimits {
            timeout: Duration::from_secs(self.limits.command_timeout_secs),
            output_cap_bytes: self.limits.output_cap_bytes,
        }
    }
}

/// A provider name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider `{0}`; use anthropic, openai or replay")]
pub struct UnknownProvider(pub String);

/// Parses a provider name as given on the command line or in the environment.
pub fn parse_kind(s: &str) -> Result<ProviderKind, UnknownProvider> {
    match s {
        "anthropic" => Ok(ProviderKind::Anthropic),
        "openai" => Ok(ProviderKind::Openai),
        "replay" => Ok(ProviderKind::Replay),
        other => Err(UnknownProvider(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_gets_its_own_model_and_step_budget_over_the_provider() {
        let c = Config::parse(
            "[provider]\nkind = \"anthropic\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:1\"\n\
             [value_loop.limits]\nmax_iterations = 60\n\
             [value_loop.roles.evaluator]\nprovider = \"openai\"\nmodel = \"judge\"\nmax_steps = 7\nmax_output_tokens = 900\neffort = \"high\"\n",
            "agentforge.toml",
        )
        .unwrap();
        let e = c.for_role("evaluator");
        assert_eq!(e.provider.kind, ProviderKind::Openai);
        assert_eq!(e.provider.model, "judge");
        // The base URL belonged to the other provider.
        assert_eq!(e.provider.base_url, None);
        assert_eq!(e.limits.max_steps, 7);
        assert_eq!(e.provider.max_output_tokens, 900);
        assert_eq!(
            e.provider.effort,
            Some(agentforge_core::model::Effort::High)
        );
        let b = c.for_role("builder");
        assert_eq!(b.provider, c.provider);
        assert_eq!(c.value_loop.limits.max_iterations, Some(60));
    }

    #[test]
    fn an_unknown_role_and_a_bound_above_its_ceiling_are_refused_by_name() {
        let refused = |text: &str| {
            Config::parse(text, "agentforge.toml")
                .unwrap()
                .validate("agentforge.toml")
                .unwrap_err()
                .to_string()
        };
        let e = refused("[value_loop.roles.tester]\nmodel = \"m\"\n");
        assert!(
            e.contains("value_loop.roles.tester") && e.contains("evaluator"),
            "{e}"
        );
        let e = refused("[value_loop.limits]\nmax_fix_attempts = 50\n");
        assert!(e.contains("value_loop.limits"), "{e}");
    }

    #[test]
    fn pricing_entries_override_the_defaults_and_bad_values_name_their_field() {
        let c = Config::parse(
            "[limits]\nmax_cost_usd = 2.5\n[pricing.\"gpt-4o\"]\ninput_per_mtok = 1\noutput_per_mtok = 4.5\n\
             [pricing.\"local\"]\ninput_per_mtok = 0\noutput_per_mtok = 0\ncached_input_per_mtok = 0\n",
            "agentforge.toml",
        )
        .unwrap();
        c.validate("agentforge.toml").unwrap();
        assert_eq!(
            c.price_of("gpt-4o-2024-08-06"),
            Some(ModelPrice::new(
                MicroUsd(1_000_000),
                MicroUsd(4_500_000),
                None
            ))
        );
        assert!(c.price_of("local").is_some());
        // The defaults stay for what the file does not name.
        assert_eq!(
            c.price_of("claude-haiku-4-5").map(|p| p.input_per_mtok),
            Some(MicroUsd(1_000_000))
        );
        assert_eq!(c.price_of("unknown-model"), None);
        assert_eq!(parse_cap(2.5), Ok(MicroUsd(2_500_000)));

        let refused = |text: &str| {
            Config::parse(text, "agentforge.toml")
                .and_then(|c| c.validate("agentforge.toml"))
                .unwrap_err()
                .to_string()
        };
        let e = refused("[pricing.m]\ninput_per_mtok = nan\noutput_per_mtok = 1\n");
        assert!(
            e.contains("pricing.\"m\".input_per_mtok") && e.contains("NaN is not a price"),
            "{e}"
        );
        let e = refused(
            "[pricing.m]\ninput_per_mtok = 1\noutput_per_mtok = 1\ncached_input_per_mtok = -0.5\n",
        );
        assert!(e.contains("pricing.\"m\".cached_input_per_mtok"), "{e}");
        let e = refused("[limits]\nmax_cost_usd = -1\n");
        assert!(e.contains("limits.max_cost_usd") && e.contains("-1"), "{e}");
        let e = refused("[pricing.m]\ninput = 1\n");
        assert!(e.contains("input") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::parse("", "agentforge.toml").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.budget.total, 8000);
    }

    #[test]
    fn unknown_field_names_file_line_and_key() {
        let err = Config::parse("[limits]\nmax_step = 3\n", "cfg/agentforge.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("cfg/agentforge.toml"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        assert!(msg.contains("max_step"), "{msg}");
    }

    #[test]
    fn env_overrides_provider() {
        let mut c = Config::default();
        c.apply_env(|k| match k {
            "AGENTFORGE_PROVIDER" => Some("openai".into()),
            "AGENTFORGE_MODEL" => Some("qwen".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.provider.kind, ProviderKind::Openai);
        assert_eq!(c.provider.model, "qwen");
        let err = c
            .apply_env(|k| (k == "AGENTFORGE_PROVIDER").then(|| "gpt".into()))
            .unwrap_err();
        assert!(err.to_string().contains("AGENTFORGE_PROVIDER"));
    }

    #[test]
    fn loops_section_takes_thresholds_and_max_detections() {
        let c = Config::parse("[loops]\nmax_detections = 2\nidentical = 4\n", "a.toml").unwrap();
        assert_eq!(c.loops.max_detections, 2);
        assert_eq!(c.loops.thresholds.identical, 4);
        assert!(Config::parse("[loops]\nidentcal = 4\n", "a.toml").is_err());
    }

    #[test]
    fn tools_and_checks_sections_parse_and_bad_globs_name_the_field() {
        let c = Config::parse(
            "[tools]\nprotected = [\"secrets/**\"]\n[checks.env]\ndeny = [\"DB_*\"]\nallow = [\"MY_*\"]\n[provider]\napi_key_env = \"LLM_SECRET\"\n",
            "a.toml",
        )
        .unwrap();
        assert_eq!(c.tools.protected, ["secrets/**"]);
        c.validate("a.toml").unwrap();
        let p = c.env_policy().unwrap();
        assert!(!p.passes("DB_HOST") && !p.passes("LLM_SECRET") && !p.passes("OTHER"));
        assert!(p.passes("MY_FLAG") && p.passes("PATH"));

        let bad = Config::parse("[tools]\nprotected = [\"a[\"]\n", "a.toml").unwrap();
        let msg = bad.validate("a.toml").unwrap_err().to_string();
        assert!(
            msg.contains("tools.protected") && msg.contains("a["),
            "{msg}"
        );
        let bad = Config::parse("[checks.env]\nallow = [\"{x\"]\n", "a.toml").unwrap();
        let msg = bad.validate("a.toml").unwrap_err().to_string();
        assert!(msg.contains("checks.env.allow"), "{msg}");
        assert!(Config::parse("[checks.env]\nallw = []\n", "a.toml").is_err());
    }

    #[test]
    fn learning_embeddings_parse_check_by_field_and_keep_the_key_from_checks() {
        let c = Config::parse("[learning]\nprecedents = 2\n", "a.toml").unwrap();
        assert_eq!(c.learning.embeddings, None);
        let text = "[learning.embeddings]\nurl = \"http://127.0.0.1:9/v1/embeddings\"\n\
                    model = \"m\"\napi_key_env = \"EMBED_SECRET\"\ndimensions = 384\n";
        let c = Config::parse(text, "a.toml").unwrap();
        c.validate("a.toml").unwrap();
        let e = c.learning.embeddings.as_ref().unwrap();
        assert_eq!((e.dimensions, e.timeout_secs, e.batch), (Some(384), 10, 64));
        assert!(!c.env_policy().unwrap().passes("EMBED_SECRET"));
        // A dump of the config names the variable, never a value.
        let dump = toml::to_string(&c).unwrap();
        assert!(dump.contains("api_key_env = \"EMBED_SECRET\""), "{dump}");

        let refused = |text: &str| {
            Config::parse(text, "a.toml")
                .and_then(|c| c.validate("a.toml"))
                .unwrap_err()
                .to_string()
        };
        let e = refused("[learning.embeddings]\nurl = \"localhost\"\nmodel = \"m\"\n");
        assert!(e.contains("learning.embeddings.url"), "{e}");
        let e = refused("[learning.embeddings]\nurl = \"http://h/e\"\nmodel = \"m\"\nbatch = 0\n");
        assert!(e.contains("learning.embeddings.batch"), "{e}");
        let e = refused("[learning.embeddings]\nurl = \"http://h/e\"\n");
        assert!(e.contains("model"), "{e}");
        let e =
            refused("[learning.embeddings]\nurl = \"http://h/e\"\nmodel = \"m\"\nretries = 9\n");
        assert!(e.contains("retries"), "{e}");
    }

    #[test]
    fn replay_without_file_is_a_config_error() {
        let c = Config::parse("[provider]\nkind = \"replay\"\n", "a.toml").unwrap();
        let err = c.validate("a.toml").unwrap_err();
        assert!(err.to_string().contains("provider.replay"), "{err}");
    }
}
