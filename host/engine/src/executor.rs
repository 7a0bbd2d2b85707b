//! The stateless step executor (seed 001, "Step Execution Flow").
//!
//! Each step: load the state from disk, build the context, make exactly one model call
//! with exactly two messages, parse one action, run the guards, execute, verify, record,
//! update working memory, then check completion, escalation and budget. Nothing but the
//! files on disk carries over from one step to the next, so a run can stop anywhere and
//! resume in another process.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::config::Config;
use crate::deferred::Deferred;
use agentforge_context::prompts::{PromptVars, Prompts};
use agentforge_context::schemas::{numbered_file, ContextSchema, SchemaRegistry};
use agentforge_context::{
    self as context, ActionEntry, BuiltPrompt, ContextInput, RecentAction, TaskFrame,
};
use agentforge_core::actions::{builtin_tools, parse_action, Action, ContextItem};
use agentforge_core::budget::{self, BudgetDecision, ProgressPoint, StepLimit};
use agentforge_core::command::CommandOutput;
use agentforge_core::cost::{CostTotals, MicroUsd, ModelPrice};
use agentforge_core::extract::{merge_facts, Extractors};
use agentforge_core::focus::{self, FailOutcome};
use agentforge_core::gates::Gates;
use agentforge_core::guards::{GuardDecision, Guards};
use agentforge_core::model::{ModelReply, ModelRequest, ModelResponse, ToolSpec};
use agentforge_core::phases::{PhaseMachineState, PlanAction, Signals};
use agentforge_core::state::{
    bound_parameters, bound_text, ActionRecord, ActionResult, BlockedAction, CheckStatus,
    LoopWarning, TailRecord, TaskState, TaskStatus,
};
use agentforge_core::task::{CheckKind, CheckSpec, TaskSpec};
use agentforge_core::text::cut;
use agentforge_core::trace::TraceEvent;
use agentforge_core::trajectory::{Answer, Trajectory, TRAJECTORY_VERSION};
use agentforge_core::working_memory::{ItemKind, MemoryItem, WorkingMemory};
use agentforge_loops::{LoopDetector, LoopType, StepView};
use agentforge_providers::{Provider, ProviderError};
use agentforge_store::commands::run_command;
use agentforge_store::state_store::{Recovery, StoreError, TaskDir, TaskStore};
use agentforge_store::tools::{self, ExtraTool, Workspace};

use crate::learning::{self, Learning};

/// A step a guard refused: skipped, with the reason as its error and as the feedback the
/// next step shows.
fn refused(reason: String, feedback: &mut Option<String>) -> Executed {
    *feedback = Some(reason.clone());
    let mut e = Executed::new(
        ActionResult::Skipped,
        format!("refused: {}", cut(&reason, 160)),
    );
    e.error = Some(reason);
    e
}

/// The first line of `text`, cut for a one-line summary.
fn first_line(text: &str) -> String {
    cut(
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        160,
    )
    .into_owned()
}

/// The first sentence of a tool description, for the `actions` list's `when`.
fn first_sentence(text: &str) -> String {
    let s = text.split(['.', '\n']).next().unwrap_or("").trim();
    cut(s, 120).into_owned()
}

/// Name of the planning tool (decomposition into tasks and subtasks).
const PLAN_TOOL: &str = "plan";
/// Name of the tool that ticks off the active subtask.
const FINISH_SUBTASK_TOOL: &str = "finish_subtask";
/// Phase changes kept in the state (the latest).
const MAX_PHASE_HISTORY: usize = 50;
/// Steps a loop warning stays in the context.
const WARNING_TTL: u64 = 3;

/// Longest error text kept in a record.
const MAX_ERROR_CHARS: usize = 500;
/// Longest summary kept in a record.
const MAX_SUMMARY_CHARS: usize = 1_000;
/// Longest action name kept in a record or echoed to the model.
const MAX_ACTION_NAME_CHARS: usize = 100;
/// Longest target (path, check name) kept in a record.
const MAX_LOGGED_TARGET_CHARS: usize = 500;
/// Longest reason (complete, escalate, cannot_fix) kept in the state.
const MAX_REASON_CHARS: usize = 2_000;
/// Steps a file read stays in working memory.
const READ_TTL: u64 = 3;
/// Steps a `load_context` item stays in working memory.
const LOADED_TTL: u64 = 5;
/// Bytes of a changed file hashed for the loop detector (the rest counts by its size).
const MAX_HASHED_BYTES: u64 = 64 * 1024 * 1024;
/// Bytes of a stored check output `load_context` reads back.
const MAX_OUTPUT_READ_BYTES: u64 = 64 * 1024 * 1024;

/// Errors that stop a run. Everything recorded before them stays on disk.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// State store failure.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The prompt cannot fit the budget.
    #[error(transparent)]
    Context(#[from] context::ContextError),
    /// Prompt template problem.
    #[error(transparent)]
    Prompt(#[from] agentforge_context::prompts::PromptError),
    /// The model provider failed after its retries.
    #[error("model provider: {0}")]
    Provider(#[from] ProviderError),
    /// The task cannot run as configured (task inputs, budgets, task type).
    #[error("{0}")]
    Config(String),
    /// The file changes of an interrupted step could not be rolled back from its
    /// snapshot: a disk failure, not a configuration problem.
    #[error("cannot roll back interrupted step {step}: {source}")]
    Rollback {
        /// The step whose changes stay in the workspace.
        step: u64,
        /// What failed.
        #[source]
        source: tools::ToolError,
    },
    /// A change that broke a passing check could not be undone from its snapshot.
    #[error("auto-revert of step {step} failed: {source}")]
    Revert {
        /// The step whose change could not be undone.
        step: u64,
        /// What failed.
        #[source]
        source: tools::ToolError,
    },
    /// Built-in plugins loaded on first use failed to load (the binary is broken).
    #[error(transparent)]
    Plugins(PluginSetupError),
    /// The task's type is not registered, or its plugin failed to load.
    #[error(transparent)]
    TaskType(#[from] agentforge_context::schemas::TaskTypeError),
    /// What runs after a recorded step failed (the step stays recorded; `resume`
    /// continues after it).
    #[error("after step {step}: {message}")]
    AfterStep {
        /// The recorded step.
        step: u64,
        /// What failed.
        message: String,
    },
    /// A stop was requested ([`StopRequest`]): the run stopped at a safe point, with
    /// every recorded step kept and the unrecorded one rolled back; `resume` continues.
    #[error("interrupted before step {step} was recorded")]
    Interrupted {
        /// The step that was not recorded (it runs again on resume).
        step: u64,
    },
}

/// The exit codes of a run, by what ended it (the `agentforge` command's contract,
/// README "Exit codes"; sysexits where one fits).
pub mod exit {
    /// The task completed.
    pub const COMPLETE: u8 = 0;
    /// The task failed, or an error stopped the run (provider unreachable...).
    pub const FAILED: u8 = 1;
    /// Escalated, or the step budget ran out.
    pub const STOPPED: u8 = 2;
    /// Usage or configuration error (`EX_USAGE`).
    pub const USAGE: u8 = 64;
    /// A disk or I/O failure (`EX_IOERR`): nothing the configuration can fix.
    pub const IO: u8 = 74;
    /// The task is being run by another process (`EX_TEMPFAIL`).
    pub const BUSY: u8 = 75;
    /// Interrupted by SIGINT (128 + 2; SIGTERM gives 143).
    pub const INTERRUPTED: u8 = 130;
}

impl ExecError {
    /// The exit code this error ends a run with ([`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            ExecError::Config(_)
            | ExecError::TaskType(_)
            | ExecError::Prompt(_)
            | ExecError::Context(_) => exit::USAGE,
            ExecError::Store(StoreError::Busy { .. }) => exit::BUSY,
            ExecError::Store(StoreError::Io { .. })
            | ExecError::Rollback { .. }
            | ExecError::Revert { .. } => exit::IO,
            ExecError::Store(StoreError::NotFound { .. } | StoreError::Exists { .. }) => {
                exit::USAGE
            }
            ExecError::Store(StoreError::Corrupt { .. })
            | ExecError::Provider(_)
            | ExecError::Plugins(_)
            | ExecError::AfterStep { .. } => exit::FAILED,
            ExecError::Interrupted { .. } => exit::INTERRUPTED,
        }
    }
}

/// Why a run's plugins could not be wired in (each names what to fix).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginSetupError {
    /// A built-in plugin failed to load: the binary is broken.
    #[error("built-in plugins: {}", .0.join("; "))]
    Builtin(Vec<String>),
    /// Loading the built-ins of a kind on first use panicked earlier in this run.
    #[error("built-in plugins: {0}")]
    FillPanicked(#[from] crate::deferred::FillPanicked),
    /// A `--plugins` or `[plugins] dirs` folder does not exist.
    #[error("plugin folder {} does not exist", .0.display())]
    MissingFolder(std::path::PathBuf),
    /// Two gates claim one check.
    #[error(transparent)]
    Gates(#[from] agentforge_core::gates::GateConflict),
    /// Two folder plugins define one task type.
    #[error("plugins `{first}` and `{second}` both define task type `{task_type}`; keep one")]
    TaskTypeTwice {
        /// The plugin loaded first.
        first: String,
        /// The other one.
        second: String,
        /// The task type both define.
        task_type: String,
    },
    /// Two tools of one name.
    #[error("tool `{tool}` is defined twice ({first} and plugin {second}); keep one")]
    ToolTwice {
        /// The tool's name.
        tool: String,
        /// Where the first comes from.
        first: String,
        /// The plugin defining it again.
        second: String,
    },
}

/// Asks a run to stop at its next safe point: between two steps, or by abandoning the
/// step in flight (its model request is cancelled, its running check's process group
/// killed, its file changes rolled back). Cheap to clone; set it from a signal handler.
#[derive(Clone, Debug)]
pub struct StopRequest {
    tx: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for StopRequest {
    fn default() -> Self {
        StopRequest {
            tx: std::sync::Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }
}

impl StopRequest {
    /// A request not made yet.
    pub fn new() -> StopRequest {
        StopRequest::default()
    }

    /// Makes the request (idempotent).
    pub fn request(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the request was made.
    pub fn is_requested(&self) -> bool {
        *self.tx.borrow()
    }

    /// Completes once the request is made.
    pub async fn requested(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Everything a run needs besides the task itself.
pub struct Runtime {
    /// Workspace root; file actions are confined to it.
    pub workspace: Workspace,
    /// Task folders.
    pub store: TaskStore,
    /// Effective configuration.
    pub config: Config,
    /// The model.
    pub provider: Provider,
    /// System prompt templates.
    pub prompts: Prompts,
    /// Task types.
    pub schemas: SchemaRegistry,
    /// Fact extractors (built-ins loaded on first use, see [`Runtime::load_plugins`]).
    pub extractors: Deferred<Extractors, PluginSetupError>,
    /// Quality gates, chosen per check (built-ins loaded on first use).
    pub gates: Deferred<Gates, PluginSetupError>,
    /// Actions added by tool plugins.
    pub tools: Vec<Box<dyn ExtraTool>>,
    /// The checks of the task being run, for plugins' `run-check`.
    pub declared_checks: agentforge_plugin_host::DeclaredChecks,
    /// Guards consulted before each action (built-ins loaded on first use).
    pub guards: Deferred<Guards, PluginSetupError>,
    /// Print a progress line per step on stderr.
    pub progress: bool,
    /// The command line's `--max-steps`: wins over the task file and the config, and is
    /// recorded in the task's state (see [`agentforge_core::budget::StepLimit`]).
    pub max_steps: Option<u64>,
    /// The spending cap this run applies (`--max-cost-usd`, else `[limits]
    /// max_cost_usd`; the command line sets it): before each model call, the task's
    /// recorded cost is compared with it. Needs a price for the model.
    pub max_cost: Option<MicroUsd>,
    /// The price of the configured model, looked up once (`None` inside: unpriced).
    step_price: std::sync::OnceLock<Option<ModelPrice>>,
    /// `run --record FILE`: each recorded step's answer is appended to a session the
    /// replay provider plays back.
    pub record_session: Option<crate::session::SessionRecorder>,
    /// The load errors of plugins loaded on first use, for [`Runtime::load_deferred_plugins`].
    late_warnings: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The trace database: traces of enforcement, precedents, patterns, learned rules.
    pub learning: Learning,
}

/// The embedded built-ins `builtins`, loaded, with the folder plugins `from_folders`: a
/// folder plugin replaces the built-in of its name where the project allows it
/// (`replace`; the refusals are returned), and what the host changed of the folder
/// plugins' requests is printed. A broken built-in is the error.
fn with_builtins(
    builtins: &[agentforge_plugin_host::Embedded],
    from_folders: Vec<agentforge_plugin_host::LoadedPlugin>,
    cache: &Path,
    opts: &agentforge_plugin_host::LoadOptions,
    replace: &[String],
) -> Result<(Vec<agentforge_plugin_host::LoadedPlugin>, Vec<String>), PluginSetupError> {
    let (builtin, errors) = agentforge_plugin_host::load_builtin(builtins, cache, opts);
    if !errors.is_empty() {
        let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        return Err(PluginSetupError::Builtin(all));
    }
    let (from_folders, refused) =
        agentforge_plugin_host::replacements(&builtin, from_folders, replace);
    print_notes(&from_folders);
    let mut all: Vec<_> = builtin
        .into_iter()
        .filter(|b| !from_folders.iter().any(|p| p.name() == b.name()))
        .collect();
    all.extend(from_folders);
    Ok((all, refused))
}

/// Prints what the host changed of each plugin's requests (see `LoadedPlugin::notes`).
fn print_notes(plugins: &[agentforge_plugin_host::LoadedPlugin]) {
    for p in plugins {
        for note in &p.notes {
            eprintln!("plugin {}: {note}", p.name());
        }
    }
}

/// The embedded built-in plugins `keep` accepts.
fn builtins_where(
    keep: impl Fn(&agentforge_plugin_host::Embedded) -> bool,
) -> Vec<agentforge_plugin_host::Embedded> {
    agentforge_builtins::BUILTIN_PLUGINS
        .iter()
        .filter(|b| keep(b))
        .copied()
        .collect()
}

/// A loaded plugin as a task type for the registry.
fn task_type_of(p: agentforge_plugin_host::LoadedPlugin) -> Result<Box<dyn ContextSchema>, String> {
    print_notes(std::slice::from_ref(&p));
    match p.as_schema() {
        Some(s) => Ok(Box::new(s)),
        None => Err(format!("plugin `{}` is not a context schema", p.name())),
    }
}

fn install_extractors(into: &mut Extractors, plugins: Vec<agentforge_plugin_host::LoadedPlugin>) {
    for p in plugins {
        if let Some(x) = p.as_extractor() {
            into.push(x);
        }
    }
}

/// A folder's gate takes over the checks it names from the built-in gates (a folder `*`
/// gate replaces the built-in `*` one); two folder gates on one check stay an error.
fn install_gates(
    into: &mut Gates,
    plugins: Vec<agentforge_plugin_host::LoadedPlugin>,
) -> Result<(), agentforge_core::gates::GateConflict> {
    let folder_claims: Vec<String> = plugins
        .iter()
        .filter(|p| !p.is_builtin())
        .flat_map(|p| p.claims())
        .collect();
    for p in plugins {
        if p.is_builtin() && p.claims().iter().any(|c| folder_claims.contains(c)) {
            continue;
        }
        if let Some(g) = p.as_gate() {
            into.push(g)?;
        }
    }
    Ok(())
}

/// After the host's own guard (blocked actions); the first denial wins.
fn install_guards(into: &mut Guards, plugins: Vec<agentforge_plugin_host::LoadedPlugin>) {
    for p in plugins {
        if let Some(g) = p.as_guard() {
            into.push(g);
        }
    }
}

impl Runtime {
    /// A runtime without plugins: no task types yet, the generic fact for every output,
    /// the command gate as the fallback, and the host's own guard (blocked actions).
    /// [`Runtime::load_plugins`] adds the built-in plugins and the project's.
    ///
    /// It also makes the workspace refuse the model's writes to what the harness reads
    /// (`agentforge.toml`, the prompts folder, `[tools] protected`; plugin folders are
    /// added by [`Runtime::load_plugins`]) and installs the configuration's environment
    /// policy for checks and the masking of the keys the host holds ([`agentforge_store::secrets`]).
    pub fn new(mut workspace: Workspace, config: Config, provider: Provider) -> Runtime {
        let store = TaskStore::new(workspace.root());
        let prompt_dir = config
            .prompts
            .dir
            .clone()
            .map(|d| workspace.root().join(d))
            .unwrap_or_else(|| workspace.root().join("prompts"));
        workspace.protect(
            Path::new(crate::config::CONFIG_FILE),
            "the project's AgentForge configuration, read again on later steps",
        );
        workspace.protect(
            &prompt_dir,
            "the prompts folder the harness renders its system prompt from",
        );
        // Validated with the config; a failure here cannot leave a pattern unapplied silently.
        if let Err(e) = workspace.protect_globs(&config.tools.protected) {
            eprintln!("warning: [tools] protected: {e}");
        }
        match config.env_policy() {
            Ok(policy) => agentforge_store::secrets::install(policy),
            Err(e) => {
                eprintln!("warning: {e}; checks run with the built-in environment deny list");
                agentforge_store::secrets::install(agentforge_store::secrets::EnvPolicy::default());
            }
        }
        let learning = Learning::new(workspace.root(), config.learning.clone());
        Runtime {
            learning,
            store,
            prompts: Prompts::new(Some(&prompt_dir)),
            schemas: SchemaRegistry::default(),
            extractors: Deferred::default(),
            gates: Deferred::default(),
            tools: Vec::new(),
            declared_checks: Default::default(),
            guards: Deferred::default(),
            workspace,
            config,
            provider,
            progress: false,
            max_steps: None,
            max_cost: None,
            step_price: Default::default(),
            record_session: None,
            late_warnings: Default::default(),
        }
    }

    /// The price of the configured model's calls (`[pricing]` over the shipped
    /// defaults); `None`: unpriced, its calls' cost is unknown.
    pub fn model_price(&self) -> Option<ModelPrice> {
        *self
            .step_price
            .get_or_init(|| self.config.price_of(&self.config.provider.model))
    }

    /// The spending cap to apply, refused when the model has no price: a cap on an
    /// unknown cost could never stop the run.
    pub fn cost_cap(&self) -> Result<Option<MicroUsd>, ExecError> {
        let Some(cap) = self.max_cost else {
            return Ok(None);
        };
        if self.model_price().is_none() {
            let model = &self.config.provider.model;
            return Err(ExecError::Config(format!(
                "max_cost_usd is {cap} but model `{model}` has no price, so what its calls cost is unknown; \
                 add its price to agentforge.toml (US dollars per million tokens, the values here are examples; 0 for a free local model):\n\
                 [pricing.\"{model}\"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n\
                 or run without --max-cost-usd and [limits] max_cost_usd"
            )));
        }
        Ok(Some(cap))
    }

    /// Loads the built-in plugins (embedded in the host: task types, extractors, gates,
    /// guards) and the plugins of `dirs` (relative to the workspace), and wires them into
    /// the run. A plugin of a folder replaces the built-in one of the same name; a schema
    /// plugin replaces a task type of the same name. Returns the load errors of broken
    /// plugins, which are skipped; two folder plugins claiming one task type, tool or
    /// check is an error naming both, and so is a broken built-in.
    ///
    /// Tools (built-in and of folders) load now: the first prompt offers them. A task type
    /// whose manifest names it (`task_type`, as every built-in one does) is registered by
    /// that name and loads when a task of that type is first opened; other task types load
    /// now. Extractors, gates and guards, built-in and of folders, load when a step first
    /// uses their kind ([`Deferred`]); only their folders' manifests are read now. The
    /// errors of plugins loaded later are printed then (`plugin error: ...`) and kept for
    /// [`Runtime::load_deferred_plugins`], which loads everything at once (`--strict`).
    pub fn load_plugins(
        &mut self,
        dirs: &[std::path::PathBuf],
    ) -> Result<Vec<String>, PluginSetupError> {
        use agentforge_plugin_host::{load_folders, scan_dir, LoadOptions, PluginKind};
        let cache = agentforge_plugin_host::default_cache_dir();
        // The rules a person approved reach `guard-learned-rules` (its `learned_rules`
        // capability); a database that cannot be read enforces none and says so.
        self.config.plugins.learned_rules = match self.learning.approved_rules_json() {
            Ok(rules) => rules,
            Err(e) => {
                eprintln!("warning: no learned rules are enforced: {e}");
                Vec::new()
            }
        };
        let mut opts = LoadOptions::new(&self.workspace, &self.config.plugins);
        opts.checks = self.declared_checks.clone();
        let mut warnings = Vec::new();
        let mut folders = Vec::new();
        for dir in dirs {
            let dir = if dir.is_absolute() {
                dir.clone()
            } else {
                self.workspace.root().join(dir)
            };
            if !dir.is_dir() {
                return Err(PluginSetupError::MissingFolder(dir));
            }
            self.workspace
                .protect(&dir, "a plugin folder this run loads plugins from");
            let (found, errors) = scan_dir(&dir);
            warnings.extend(errors.iter().map(|e| e.to_string()));
            folders.extend(found);
        }
        self.workspace.protect(
            &cache,
            "the compiled-plugin cache this run loads plugins from",
        );
        const DEFERRED: [PluginKind; 3] =
            [PluginKind::Extractor, PluginKind::Gate, PluginKind::Guard];
        let (mut later, now): (Vec<_>, Vec<_>) = folders
            .into_iter()
            .partition(|f| f.kind().is_some_and(|k| DEFERRED.contains(&k)));
        let named_task_type = |kind: Option<PluginKind>, task_type: Option<&str>| {
            kind == Some(PluginKind::ContextSchema) && task_type.is_some()
        };
        let (by_name, now): (Vec<_>, Vec<_>) = now
            .into_iter()
            .partition(|f| named_task_type(f.kind(), f.manifest.task_type.as_deref()));
        let (from_folders, errors) = load_folders(now, &cache, &opts);
        warnings.extend(errors.iter().map(|e| e.to_string()));
        // The task types of folders, and their plugins: a built-in task type of the same
        // name, or from a plugin of the same name, is replaced by the folder's.
        let mut folder_task_types: Vec<(String, String)> = from_folders
            .iter()
            .filter(|p| p.kind() == PluginKind::ContextSchema)
            .flat_map(|p| p.claims().into_iter().map(|t| (t, p.name().to_string())))
            .collect();
        let folder_schema_plugins: Vec<String> = folder_task_types
            .iter()
            .map(|(_, p)| p.clone())
            .chain(by_name.iter().map(|f| f.manifest.name.clone()))
            .collect();
        let (all, refused) = with_builtins(
            &builtins_where(|b| {
                b.kind().is_none_or(|k| !DEFERRED.contains(&k))
                    && !named_task_type(b.kind(), b.task_type)
            }),
            from_folders,
            &cache,
            &opts,
            &self.config.plugins.replace,
        )?;
        warnings.extend(refused);
        warnings.extend(self.install(all)?);
        // Task types registered by name, folders' first: their phase graphs may offer the
        // tools loaded above.
        let actions: Vec<String> = agentforge_context::schemas::BUILTIN_ACTIONS
            .iter()
            .map(|a| a.to_string())
            .chain(self.tools.iter().map(|t| t.name().to_string()))
            .collect();
        let shared = std::sync::Arc::new((cache.clone(), opts.clone()));
        for folder in by_name {
            let Some(task_type) = folder.manifest.task_type.clone() else {
                continue;
            };
            let plugin = folder.manifest.name.clone();
            if let Some((_, first)) = folder_task_types.iter().find(|(t, _)| *t == task_type) {
                return Err(PluginSetupError::TaskTypeTwice {
                    first: first.clone(),
                    second: plugin,
                    task_type,
                });
            }
            folder_task_types.push((task_type.clone(), plugin.clone()));
            let shared = shared.clone();
            self.schemas.register_on_first_use(
                &task_type,
                &plugin,
                actions.clone(),
                Box::new(move || {
                    let (cache, opts) = &*shared;
                    task_type_of(folder.load(cache, opts).map_err(|e| e.to_string())?)
                }),
            );
        }
        for builtin in builtins_where(|b| named_task_type(b.kind(), b.task_type)) {
            let Some(task_type) = builtin.task_type else {
                continue;
            };
            if folder_task_types.iter().any(|(t, _)| t == task_type)
                || folder_schema_plugins.iter().any(|p| p == builtin.folder)
            {
                continue;
            }
            let shared = shared.clone();
            self.schemas.register_on_first_use(
                task_type,
                builtin.folder,
                actions.clone(),
                Box::new(move || {
                    let (cache, opts) = &*shared;
                    let (mut loaded, errors) = agentforge_plugin_host::load_builtin(
                        std::slice::from_ref(&builtin),
                        cache,
                        opts,
                    );
                    if let Some(e) = errors.first() {
                        return Err(format!("built-in plugin: {e} (the binary is broken)"));
                    }
                    task_type_of(loaded.pop().ok_or("the built-in did not load")?)
                }),
            );
        }
        for kind in DEFERRED {
            let folders: Vec<_>;
            (folders, later) = later.into_iter().partition(|f| f.kind() == Some(kind));
            let (cache, opts) = (cache.clone(), opts.clone());
            let replace = self.config.plugins.replace.clone();
            let late = self.late_warnings.clone();
            let load = move || {
                let (from_folders, errors) = load_folders(folders, &cache, &opts);
                let (all, refused) = with_builtins(
                    &builtins_where(|b| b.kind() == Some(kind)),
                    from_folders,
                    &cache,
                    &opts,
                    &replace,
                )?;
                let errors: Vec<String> = errors
                    .iter()
                    .map(|e| e.to_string())
                    .chain(refused)
                    .collect();
                for e in &errors {
                    eprintln!("plugin error: {e}");
                }
                late.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(errors);
                Ok::<_, PluginSetupError>(all)
            };
            match kind {
                PluginKind::Extractor => {
                    self.extractors = Deferred::later(Extractors::default(), move |x| {
                        install_extractors(x, load()?);
                        Ok(())
                    })
                }
                PluginKind::Gate => {
                    self.gates =
                        Deferred::later(Gates::default(), move |g| Ok(install_gates(g, load()?)?))
                }
                PluginKind::Guard => {
                    self.guards = Deferred::later(Guards::default(), move |g| {
                        install_guards(g, load()?);
                        Ok(())
                    })
                }
                _ => unreachable!("only extractors, gates and guards are deferred"),
            }
        }
        Ok(warnings)
    }

    /// Loads the plugins [`Runtime::load_plugins`] left for first use (extractors, gates,
    /// guards, task types registered by name), now, and returns the errors of the plugins
    /// that failed to load (each was also printed). A broken built-in extractor, gate or
    /// guard, or two gates on one check, is the error.
    pub fn load_deferred_plugins(&self) -> Result<Vec<String>, PluginSetupError> {
        self.extractors.get()?;
        self.gates.get()?;
        self.guards.get()?;
        let mut errors = self
            .late_warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for e in self.schemas.load_all() {
            eprintln!("plugin error: {e}");
            errors.push(e.to_string());
        }
        Ok(errors)
    }

    /// Wires loaded plugins into the run (see [`Runtime::load_plugins`]). Returns the
    /// errors of task types skipped for an invalid phase graph.
    fn install(
        &mut self,
        plugins: Vec<agentforge_plugin_host::LoadedPlugin>,
    ) -> Result<Vec<String>, PluginSetupError> {
        use agentforge_plugin_host::PluginKind;
        let (mut extractors, mut gates, mut guards) = (Vec::new(), Vec::new(), Vec::new());
        let mut schemas: Vec<agentforge_plugin_host::WasmSchema> = Vec::new();
        // A folder's task type replaces the built-in one of that name: built-ins come
        // first, so a later plugin of the same task type wins over a built-in only.
        for p in plugins {
            let builtin = p.is_builtin();
            match p.kind() {
                PluginKind::Extractor => extractors.push(p),
                PluginKind::Gate => gates.push(p),
                PluginKind::Guard => guards.push(p),
                PluginKind::ContextSchema => {
                    let Some(s) = p.as_schema() else { continue };
                    match schemas.iter().position(|o| o.name() == s.name()) {
                        Some(i) if schemas[i].is_builtin() && !builtin => schemas[i] = s,
                        Some(i) => {
                            return Err(PluginSetupError::TaskTypeTwice {
                                first: schemas[i].plugin().to_string(),
                                second: p.name().to_string(),
                                task_type: s.name().to_string(),
                            })
                        }
                        None => schemas.push(s),
                    }
                }
                PluginKind::Tool => {
                    let Some(t) = p.as_tool() else { continue };
                    if let Some(other) = self.tools.iter().find(|o| o.name() == t.name()) {
                        return Err(PluginSetupError::ToolTwice {
                            tool: t.name().to_string(),
                            first: other.source(),
                            second: p.name().to_string(),
                        });
                    }
                    self.tools.push(Box::new(t));
                }
            }
        }
        install_extractors(self.extractors.get_mut()?, extractors);
        install_gates(self.gates.get_mut()?, gates)?;
        install_guards(self.guards.get_mut()?, guards);
        // Task types last: their phase graphs may offer the tools plugins add.
        let tool_names: Vec<String> = self.tools.iter().map(|t| t.name().to_string()).collect();
        let mut actions: Vec<&str> = agentforge_context::schemas::BUILTIN_ACTIONS.to_vec();
        actions.extend(tool_names.iter().map(String::as_str));
        let mut skipped = Vec::new();
        for s in schemas {
            let plugin = s.plugin().to_string();
            if let Err(e) = self.schemas.register_with(Box::new(s), &actions) {
                skipped.push(format!("plugin `{plugin}`: {e}"));
            }
        }
        Ok(skipped)
    }

    /// Creates a task's folder from its spec, validating the task type and checks first.
    pub fn create_task(&self, spec: &TaskSpec) -> Result<TaskDir, ExecError> {
        let schema = self.schemas.get(&spec.task_type)?;
        let checks = self.checks_for(spec)?;
        let limit =
            StepLimit::resolve(self.max_steps, spec.max_steps, self.config.limits.max_steps);
        let mut state = TaskState::initial(spec, schema.initial_phase(), limit.base);
        state.step_limit = Some(limit);
        // Nothing to verify (a value-loop role with no checks yet): verification holds
        // as it would after running every check, so `complete` is not refused for a
        // check that does not exist.
        state.verification.ready_for_completion = checks.is_empty();
        if let Some(plan) = spec.inputs.get("plan") {
            let bad =
                |e: String| ExecError::Config(format!("task `{}`: inputs.plan: {e}", spec.id));
            let plan = focus::parse_plan(plan).map_err(bad)?;
            state.focus = focus::FocusTree::from_plan(&spec.goal, &plan).map_err(bad)?;
        }
        Ok(self.store.create(spec, &state)?)
    }

    /// The verification commands of a task: its own, else the config's `[commands]`.
    pub fn checks_for(&self, spec: &TaskSpec) -> Result<Vec<CheckSpec>, ExecError> {
        if !spec.checks.is_empty() {
            return Ok(spec.checks.clone());
        }
        let mut checks = Vec::new();
        if let Some(c) = &self.config.commands.check {
            checks.push(CheckSpec {
                name: "check".into(),
                command: c.clone(),
                kind: CheckKind::Check,
                timeout_secs: None,
            });
        }
        if let Some(t) = &self.config.commands.test {
            checks.push(CheckSpec {
                name: "tests".into(),
                command: t.clone(),
                kind: CheckKind::Test,
                timeout_secs: None,
            });
        }
        // A value-loop role task (planner, critic, evaluator...) may have nothing to
        // verify yet: the sprint's verifications are written later, by a role.
        if checks.is_empty() && spec.role.is_none() {
            return Err(ExecError::Config(format!(
                "task `{}` has no checks: add `checks:` to its task.yaml or `[commands] check`/`test` to agentforge.toml",
                spec.id
            )));
        }
        Ok(checks)
    }
}

/// A step up to the model call: the exact prompt and the state it was built from.
pub struct PreparedStep {
    /// Step about to run.
    pub step: u64,
    /// The prompt (system, user, tools) and its token breakdown.
    pub prompt: BuiltPrompt,
    /// The request for the provider.
    pub request: ModelRequest,
    /// Instruction files found but not shown, with why (`agentforge context` lists them).
    pub instructions_skipped: Vec<agentforge_store::instructions::SkippedFile>,
    state: TaskState,
    spec: TaskSpec,
    memory: WorkingMemory,
    offered: Vec<String>,
    log_tail: Vec<Arc<TailRecord>>,
}

/// What one step did, for progress output and tests.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// The record appended to the log.
    pub record: ActionRecord,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Final status.
    pub status: TaskStatus,
    /// Steps recorded.
    pub steps: u64,
    /// Why it ended that way.
    pub reason: Option<String>,
    /// Whether any file was changed (partial progress).
    pub progress_made: bool,
}

/// Runs the steps of one task.
pub struct Executor<'r> {
    rt: &'r Runtime,
    dir: TaskDir,
    /// What the loop detector worked out about each recent step, for the next checks.
    loop_memo: agentforge_loops::StepMemo,
    /// Run after each recorded step of [`Executor::run_until`] (a task's git commit).
    after_step: Option<AfterStep<'r>>,
    /// The last step's tool list by the names offered: a phase offers the same tools step
    /// after step, so the list (schemas and all) is shared, not built and cloned again.
    /// The specs a name gives cannot change while the executor lives (it borrows the
    /// runtime that holds the tool plugins).
    offered_tools: std::sync::Mutex<Option<OfferedTools>>,
}

/// Tool names offered at a step and their specs, in that order.
type OfferedTools = (Vec<String>, Arc<[ToolSpec]>);

/// What [`Executor::with_after_step`] runs after each recorded step; an `Err` stops the
/// run (the step stays recorded) with [`ExecError::AfterStep`].
pub type AfterStep<'r> = Box<dyn Fn(&ActionRecord) -> Result<(), String> + Send + Sync + 'r>;

/// A parsed model call: a built-in action or a planning call.
enum Call {
    Builtin(Action),
    Plan(focus::PlanInput),
    FinishSubtask(focus::FinishSubtask),
}

/// The action name recorded for a reply without a usable tool call.
const INVALID_REPLY: &str = "invalid_reply";

/// Stage *classify*'s output: the recorded name and bounded arguments, and the call (or
/// the problem fed back to the next step).
struct Classified {
    action_name: String,
    parameters: Value,
    call: Result<Call, String>,
}

/// Stage *act*'s output: the verified outcome and what the guards and the record need.
struct Acted {
    executed: Executed,
    target: Option<String>,
    exact_signature: Option<String>,
    feedback: Option<String>,
    /// The guards' denials and warnings of this step.
    traces: Vec<TraceEvent>,
}

/// What stage *decide* looks at: the step as classified and acted.
struct Observed<'a> {
    action_name: &'a str,
    parameters: &'a Value,
    acted: &'a Acted,
}

/// Stage *decide*'s output.
struct Decided {
    detection: Option<LoopWarning>,
    feedback: Option<String>,
    /// The auto-revert and the loop seen at this step.
    traces: Vec<TraceEvent>,
}

/// Outcome of executing one action, before it is recorded.
struct Executed {
    result: ActionResult,
    summary: String,
    error: Option<String>,
    output_artifact: Option<String>,
    gathered_context: bool,
    changed_files: bool,
    verification_ran: bool,
    /// The change broke a passing check and was undone (auto-revert).
    reverted: bool,
    /// An edit action's record (what changed where, why it failed, the revert), for
    /// the extractors.
    edit: Option<agentforge_core::edit::EditRecord>,
    file_hashes: std::collections::BTreeMap<String, String>,
    /// Hash and length of what the action showed (check output, file content, search
    /// hits, tool output): the loop detector reads a changed output as progress.
    output: Option<(String, usize)>,
}

impl Executed {
    fn new(result: ActionResult, summary: impl Into<String>) -> Executed {
        Executed {
            result,
            summary: summary.into(),
            error: None,
            output_artifact: None,
            gathered_context: false,
            changed_files: false,
            verification_ran: false,
            reverted: false,
            edit: None,
            file_hashes: Default::default(),
            output: None,
        }
    }
    /// Records the hash and length of what the action showed.
    fn showed(&mut self, output: &str) {
        self.output = Some((
            agentforge_core::hash::tagged(output.as_bytes()),
            output.len(),
        ));
    }
    fn failure(summary: impl Into<String>, error: impl Into<String>) -> Executed {
        let mut e = Executed::new(ActionResult::Failure, summary);
        e.error = Some(error.into());
        e
    }
}

impl<'r> Executor<'r> {
    /// The specs of the tools named `offered`, in that order (names without a spec, such
    /// as actions that are not tools, left out); the last step's list when the names are
    /// the same.
    fn tool_list(&self, offered: &[String]) -> Arc<[ToolSpec]> {
        let mut kept = self.offered_tools.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((names, tools)) = &*kept {
            if names.as_slice() == offered {
                return Arc::clone(tools);
            }
        }
        let mut extra_tools = vec![focus::plan_tool_spec(), focus::finish_subtask_tool_spec()];
        extra_tools.extend(self.rt.tools.iter().map(|t| t.spec()));
        let tools: Arc<[ToolSpec]> = offered
            .iter()
            .filter_map(|n| {
                builtin_tools()
                    .iter()
                    .chain(&extra_tools)
                    .find(|t| &t.name == n)
                    .cloned()
            })
            .collect();
        *kept = Some((offered.to_vec(), Arc::clone(&tools)));
        tools
    }

    /// An executor for the task in `dir`.
    pub fn new(rt: &'r Runtime, dir: TaskDir) -> Executor<'r> {
        Executor {
            rt,
            dir,
            loop_memo: Default::default(),
            after_step: None,
            offered_tools: Default::default(),
        }
    }

    /// Runs `hook` after each step [`Executor::run_until`] records.
    pub fn with_after_step(mut self, hook: AfterStep<'r>) -> Executor<'r> {
        self.after_step = Some(hook);
        self
    }

    /// The task folder.
    pub fn dir(&self) -> &TaskDir {
        &self.dir
    }

    /// What plugins' `run-check` may run while this task's step runs: its checks (none
    /// when it has none, never a previous task's).
    fn declare_checks(&self, spec: &TaskSpec) {
        let checks = self.rt.checks_for(spec).unwrap_or_default();
        self.rt
            .declared_checks
            .set(&checks, self.rt.config.command_limits());
    }

    /// Repairs the folder after a crash: a torn log line, a lagging `state.yaml`, and
    /// file changes of a step that did not get recorded (rolled back from its snapshot).
    pub fn recover(&self) -> Result<(TaskState, Recovery, Option<u64>), ExecError> {
        let (state, recovery) = self.dir.recover()?;
        let pending = state.step + 1;
        let snap = self.snapshot_dir(pending);
        let mut rolled_back = None;
        if snap.exists() {
            tools::restore_snapshot(&self.rt.workspace, &snap).map_err(|source| {
                ExecError::Rollback {
                    step: pending,
                    source,
                }
            })?;
            std::fs::remove_dir_all(&snap).map_err(|source| StoreError::Io {
                op: "cannot remove",
                path: snap.display().to_string(),
                source,
            })?;
            rolled_back = Some(pending);
        }
        Ok((state, recovery, rolled_back))
    }

    /// Runs the loop detector over the recent log plus this step. A new detection warns
    /// the next contexts, blocks the looping call (persisted: blocks survive restarts),
    /// and the `max_detections`-th escalates the task.
    fn detect_loop(
        &self,
        state: &mut TaskState,
        log_tail: &[Arc<TailRecord>],
        current: StepView,
        exact_signature: Option<&str>,
    ) -> Result<Option<LoopWarning>, ExecError> {
        let cfg = &self.rt.config.loops;
        let now = current.step;
        // The detector says how far back it looks (several windows: a long stall cycling
        // through a dozen distinct actions is only visible over more than one window).
        let detector = LoopDetector::new(cfg.thresholds.clone());
        let skip = log_tail
            .len()
            .saturating_sub(detector.history_len().max(2) - 1);
        // The memo keeps each record's view (the store hands out the same `Arc` for a
        // line it parsed before) and finds its analysis by that view's address.
        let mut history: Vec<Arc<StepView>> = log_tail[skip..]
            .iter()
            .map(|r| self.loop_memo.view(r))
            .collect();
        history.push(Arc::new(current));
        let Some(d) = detector
            .check_shared(&history, &self.loop_memo)
            .filter(|d| d.step == now)
        else {
            return Ok(None);
        };
        // An ongoing loop is reported again only after two steps without a report, so
        // a model that keeps looping after the warning reaches `max_detections`.
        let kind = d.loop_type.to_string();
        let recently_reported = log_tail.iter().rev().take(2).any(|r| {
            r.loop_detection
                .as_ref()
                .is_some_and(|w| w.loop_type == kind)
        });
        if recently_reported {
            return Ok(None);
        }
        let block = match d.loop_type {
            // Block the very call that keeps failing, not every call on its target.
            LoopType::IdenticalAction => exact_signature.map(str::to_string).or(d.block.clone()),
            _ => d.block.clone(),
        };
        if let Some(sig) = &block {
            if !state.blocked_actions.iter().any(|b| &b.signature == sig) {
                let what = if sig.contains('#') {
                    "this exact call (same arguments) is refused"
                } else {
                    "calls of this action on this target are refused"
                };
                state.blocked_actions.push(BlockedAction {
                    signature: sig.clone(),
                    reason: format!("{} loop: {}; {what}", d.loop_type, d.description),
                    since_step: d.step,
                });
            }
        }
        state.loop_detections += 1;
        let warning = LoopWarning {
            step: d.step,
            loop_type: d.loop_type.to_string(),
            description: d.description.clone(),
            suggestions: d.suggestions.clone(),
            evidence: d.evidence.clone(),
            confidence: d.confidence,
            blocked: block,
        };
        state.loop_warning = Some(warning.clone());
        if state.loop_detections >= cfg.max_detections && state.status == TaskStatus::Running {
            state.status = TaskStatus::Escalated;
            state.status_reason = Some(format!(
                "{} loops detected; last: {} ({})",
                state.loop_detections, d.description, d.loop_type
            ));
        }
        Ok(Some(warning))
    }

    /// A failure of the active subtask; escalates the run when the plan has nothing left.
    fn subtask_failed(&self, state: &mut TaskState, reason: &str) {
        // With no plan beyond the goal, the task-level rules (max loop detections,
        // invalid replies) decide instead: blocking the only subtask would end the run.
        if !is_planned(state) {
            return;
        }
        let outcome = state.focus.fail_current(reason);
        let stuck = state.focus.is_stuck() && !state.focus.all_done();
        if stuck && state.status == TaskStatus::Running {
            let why = match outcome {
                FailOutcome::NothingLeft { reason } | FailOutcome::TaskEscalated { reason, .. } => {
                    reason
                }
                _ => reason.to_string(),
            };
            state.status = TaskStatus::Escalated;
            state.status_reason = Some(format!("every subtask of the plan is blocked: {why}"));
        }
    }

    /// The adaptive step budget: extend a task that is making measurable progress (up
    /// to a ceiling), stop one that has stalled in a loop, stop at the budget otherwise.
    fn check_budget(
        &self,
        spec: &TaskSpec,
        state: &mut TaskState,
        log_tail: &[Arc<TailRecord>],
        step: u64,
        feedback: &mut Option<String>,
    ) -> Result<(), ExecError> {
        // States from before the limit was recorded: the task file, else the config.
        let limit = state.step_limit.unwrap_or_else(|| {
            StepLimit::resolve(None, spec.max_steps, self.rt.config.limits.max_steps)
        });
        let policy = &limit.policy(&self.rt.config.adaptive_budget);
        let base = limit.base;
        let window = policy.stall_window as usize + 1;
        let skip = log_tail.len().saturating_sub(window);
        let mut history: Vec<ProgressPoint> = log_tail[skip..]
            .iter()
            .map(|r| {
                ProgressPoint::from_verification(
                    r.step,
                    &r.state_after.verification,
                    r.loop_detection.is_some(),
                )
            })
            .collect();
        history.push(ProgressPoint::from_verification(
            step,
            &state.verification,
            state.loop_warning.as_ref().is_some_and(|w| w.step == step),
        ));
        match budget::decide(policy, base, state.max_steps, step, &history) {
            BudgetDecision::Continue => {}
            BudgetDecision::Extend { by, reason } => {
                state.max_steps += by;
                let note = format!(
                    "step budget extended by {by} to {}: {reason}",
                    state.max_steps
                );
                *feedback = Some(match feedback.take() {
                    Some(f) => format!("{f}\n{note}"),
                    None => note,
                });
            }
            BudgetDecision::Stop { reason } => {
                state.status = TaskStatus::BudgetExhausted;
                state.status_reason = Some(if limit.extensible() || step < state.max_steps {
                    reason
                } else {
                    format!("step budget of {} (--max-steps) used up", state.max_steps)
                });
            }
        }
        Ok(())
    }

    /// The `focus` section: the current branch of the plan, this subtask's last actions,
    /// the verification probe and any fresh loop warning.
    fn focus_view(&self, state: &TaskState, recent: &[Arc<TailRecord>], step: u64) -> Value {
        let mine = state.focus.current_actions();
        let lines: Vec<String> = recent
            .iter()
            .filter(|r| mine.contains(&r.step))
            .map(|r| {
                format!(
                    "step {} {} {} -> {}",
                    r.step,
                    r.action,
                    r.target.as_deref().unwrap_or(""),
                    r.result
                )
            })
            .collect();
        let probe = if state.verification.checks.is_empty() {
            None
        } else {
            Some(
                state
                    .verification
                    .checks
                    .iter()
                    .map(|(n, c)| format!("{n}: {}", if c.passing { "pass" } else { "FAIL" }))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        };
        let mut warnings = Vec::new();
        if let Some(w) = state
            .loop_warning
            .as_ref()
            .filter(|w| step <= w.step + WARNING_TTL)
        {
            warnings.push(format!(
                "LOOP {} at step {}: {}",
                w.loop_type, w.step, w.description
            ));
            warnings.extend(w.suggestions.iter().map(|s| format!("try: {s}")));
        }
        let planned = is_planned(state);
        if !planned {
            // No plan beyond the goal itself: the branch would only repeat the task frame,
            // `recent` and `verification`; show just the loop warnings, if any.
            return if warnings.is_empty() {
                Value::Null
            } else {
                serde_json::json!({ "loop_warnings": warnings })
            };
        }
        state.focus.branch_view(&lines, probe.as_deref(), &warnings)
    }

    /// Content hash of a workspace file (`sha256:<hex>` of its first bytes and its size;
    /// `absent` if it does not exist, `unreadable` if it is not a regular file); bounded
    /// like every workspace read.
    fn file_hash(&self, rel: &str) -> String {
        match tools::read_regular_file(&self.rt.workspace.root().join(rel), MAX_HASHED_BYTES) {
            Ok(read) => {
                agentforge_core::hash::tagged_parts(&[&read.bytes, &read.size.to_le_bytes()])
            }
            Err(tools::ReadError::NotFound { .. }) => "absent".to_string(),
            Err(_) => "unreadable".to_string(),
        }
    }

    fn snapshot_dir(&self, step: u64) -> std::path::PathBuf {
        self.dir.snapshots_dir().join(format!("step-{step:04}"))
    }

    fn schema(&self, task_type: &str) -> Result<&'r dyn ContextSchema, ExecError> {
        Ok(self.rt.schemas.get(task_type)?)
    }

    /// Builds the next step's prompt from the state on disk, without calling the model.
    pub fn prepare(&self) -> Result<PreparedStep, ExecError> {
        let mut state = self.dir.load_state()?;
        state.focus.repair();
        let spec = self.dir.spec()?;
        self.declare_checks(&spec);
        let schema = self.schema(&spec.task_type)?;
        let step = state.step + 1;
        let view = schema.phase_graph().actions_view(
            &PhaseMachineState::at(state.phase.clone(), state.phase_steps),
            state.verification.ready_for_completion,
            !state.files_modified.is_empty(),
        );
        // Graphs are validated against the built-in actions and the plugins' tools.
        let mut offered: Vec<String> = view.available.iter().map(|a| a.name.clone()).collect();
        // Planning tools, where the phase graph offers them ([`PhaseSpec::offers`]);
        // `finish_subtask` only once there is a real plan (more than the implicit
        // single subtask).
        let phase_spec = schema.phase_graph().phase(&state.phase);
        let offers = |a: PlanAction| phase_spec.is_some_and(|p| p.offers(a));
        if offers(PlanAction::Plan) {
            offered.push(PLAN_TOOL.to_string());
        }
        let planned = is_planned(&state);
        if planned && offers(PlanAction::FinishSubtask) {
            offered.push(FINISH_SUBTASK_TOOL.to_string());
        }
        // Tool plugins: offered where the graph lists them or where they say they apply.
        for t in &self.rt.tools {
            if t.offered_in(&state.phase) && !offered.iter().any(|o| o == t.name()) {
                offered.push(t.name().to_string());
            }
        }
        let tools = self.tool_list(&offered);
        let mut memory = self.dir.load_working_memory()?;
        memory.max_items = self.rt.config.limits.working_memory_items;
        memory.expire(step);
        let system = self.rt.prompts.render_with(
            &PromptVars {
                task_type: &spec.task_type,
                phase: &state.phase,
                goal: &spec.goal,
                step,
                max_steps: state.max_steps,
                actions: offered.clone(),
            },
            schema.prompt_templates(),
        )?;
        // One read of the log's tail serves the context, the loop detector and the budget.
        let tail_len = 3
            .max(LoopDetector::new(self.rt.config.loops.thresholds.clone()).history_len())
            .max(self.rt.config.adaptive_budget.stall_window as usize + 1);
        let log_tail = self.dir.recent_actions(tail_len)?;
        let recent_records = &log_tail[log_tail.len().saturating_sub(3)..];
        let focus_view = self.focus_view(&state, recent_records, step);
        let recent: Vec<RecentAction> = recent_records
            .iter()
            .map(|r| RecentAction {
                step: r.step,
                action: r.action.clone(),
                target: r.target.clone(),
                result: r.result,
                summary: r.summary.clone(),
                error: r.error.clone(),
            })
            .collect();
        let success_criteria = if spec.success_criteria.is_empty() {
            schema.default_success_criteria()
        } else {
            spec.success_criteria.clone()
        };
        // Read every step, like the rest of the context: an edit to AGENTS.md shows next step.
        let instructions =
            agentforge_store::instructions::discover(&self.rt.workspace, &spec.named_paths());
        let precedents = self.rt.learning.precedents(&spec, &state);
        let input = ContextInput {
            system_prompt: &system,
            instructions: &instructions.files,
            precedents: &precedents,
            task: TaskFrame {
                id: spec.id.clone(),
                goal: spec.goal.clone(),
                success_criteria,
                constraints: spec.constraints.clone(),
                phase: state.phase.clone(),
                step,
                max_steps: state.max_steps,
            },
            focus: focus_view,
            current_state: schema.build_current_state(&spec, &state, &self.rt.workspace),
            facts: &state.facts,
            working_memory: &memory.items,
            recent_actions: recent,
            verification: &state.verification,
            feedback: state.feedback.as_deref(),
            blocked: &state.blocked_actions,
            actions: view
                .available
                .iter()
                .map(|a| ActionEntry {
                    name: a.name.clone(),
                    when: a.preconditions.join("; "),
                })
                .chain(
                    offered
                        .iter()
                        .filter(|n| !view.available.iter().any(|a| &a.name == *n))
                        .map(|n| ActionEntry {
                            name: n.clone(),
                            when: if n == PLAN_TOOL {
                                "the goal has several parts: decompose it".to_string()
                            } else if n == FINISH_SUBTASK_TOOL {
                                "the active subtask is done".to_string()
                            } else {
                                self.rt
                                    .tools
                                    .iter()
                                    .find(|t| t.name() == n)
                                    .map(|t| first_sentence(&t.spec().description))
                                    .unwrap_or_default()
                            },
                        }),
                )
                .collect(),
            recommended: view.recommended.clone(),
            not_yet: view.blocked.clone(),
            tools,
            tool_mode: self.rt.config.provider.tool_mode,
        };
        let mut budgets = self.rt.config.budget.clone();
        budgets.apply(schema.budgets()).map_err(|e| {
            ExecError::Config(format!("task type `{}`: budgets: {e}", spec.task_type))
        })?;
        // The first step of a run need not wait for the tokenizer to load: see
        // `build_for_step` (its counts are made exact in `apply`).
        let mut prompt = context::build_for_step(&input, &budgets)?;
        // The pieces counted for this prompt (and the last one's exact counts), for the
        // next process (see `use_token_count_file`).
        context::save_token_counts();
        // The last choke point before the model: whatever a section shows (a schema's
        // file insert, a task input), no key value the host holds leaves in a request.
        let secrets = agentforge_store::secrets::secrets();
        secrets.mask_string(&mut prompt.system);
        secrets.mask_string(&mut prompt.user);
        let request = ModelRequest {
            step,
            model: self.rt.config.provider.model.clone(),
            system: prompt.system.clone(),
            user: prompt.user.clone(),
            tools: Arc::clone(&prompt.tools),
            max_output_tokens: self.rt.config.provider.max_output_tokens,
            tool_mode: self.rt.config.provider.tool_mode,
            effort: self.rt.config.provider.effort,
        };
        Ok(PreparedStep {
            step,
            prompt,
            request,
            instructions_skipped: instructions.skipped,
            state,
            spec,
            memory,
            offered,
            log_tail,
        })
    }

    /// Runs one whole step: prepare, call the model, apply its answer.
    pub async fn step(&self) -> Result<StepReport, ExecError> {
        let prepared = self.prepare()?;
        agentforge_core::fault::point("before_model", prepared.step);
        let response = self.rt.provider.complete(&prepared.request).await?;
        agentforge_core::fault::point("after_model", prepared.step);
        self.apply(prepared, response).await
    }

    /// Sets the task's step budget from `--max-steps` (see [`agentforge_core::budget::StepLimit`]):
    /// recorded in the state, so a later `resume` without the flag keeps it. A task that
    /// ran out of budget runs again when `max_steps` leaves it steps. Returns the state.
    pub fn set_max_steps(&self, max_steps: u64) -> Result<TaskState, ExecError> {
        let mut state = self.dir.load_state()?;
        let limit = StepLimit {
            base: max_steps,
            source: budget::LimitSource::Flag,
        };
        if state.step_limit == Some(limit) && state.max_steps == max_steps {
            return Ok(state);
        }
        state.step_limit = Some(limit);
        state.max_steps = max_steps;
        if state.status == TaskStatus::BudgetExhausted && state.step < max_steps {
            state.status = TaskStatus::Running;
            state.status_reason = None;
            // Running again: a cost cap still reached stops it before the next call.
            state.stopped_at_cost_cap = None;
        }
        self.dir.save_state(&state)?;
        Ok(state)
    }

    /// Applies the run's spending cap ([`Runtime::cost_cap`]) to the task: a task the
    /// cap stopped runs again when it has spent less than this cap (a raised cap); with
    /// the same cap or a lower one it stays stopped. Returns the state.
    pub fn set_max_cost(&self) -> Result<TaskState, ExecError> {
        let mut state = self.dir.load_state()?;
        let Some(cap) = self.rt.cost_cap()? else {
            return Ok(state);
        };
        let spent = state.cost.unwrap_or_default().usd_micros;
        if state.status == TaskStatus::BudgetExhausted
            && state.stopped_at_cost_cap.is_some()
            && spent < cap
        {
            state.status = TaskStatus::Running;
            state.status_reason = None;
            state.stopped_at_cost_cap = None;
            self.dir.save_state(&state)?;
        }
        Ok(state)
    }

    /// Runs steps until the task leaves `running`.
    pub async fn run(&self) -> Result<RunOutcome, ExecError> {
        self.run_until(&StopRequest::new()).await
    }

    /// Runs steps until the task leaves `running` or `stop` is requested. A stop ends the
    /// run at a safe point with [`ExecError::Interrupted`]: before the next step, or by
    /// dropping the step in flight (which cancels its model request and kills its
    /// running command's process group) and rolling back its file changes, as a resume
    /// after a crash would. Recorded steps are never touched. While it runs, the process
    /// groups of the task's commands are recorded in the task folder (see
    /// [`agentforge_store::commands::ProcessGroups`]).
    pub async fn run_until(&self, stop: &StopRequest) -> Result<RunOutcome, ExecError> {
        let groups = agentforge_store::commands::ProcessGroups::global();
        groups.record_in(Some(
            self.dir
                .path()
                .join(agentforge_store::commands::GROUPS_FILE),
        ));
        // A kill between the last step's log line and the copy of its traces.
        let spec = self.dir.spec()?;
        let last = self
            .dir
            .recent_actions::<agentforge_core::state::AfterVerification>(1)?;
        self.rt.learning.sync_last(&spec, last.last().map(|r| &**r));
        let outcome = self.run_steps(stop).await;
        groups.record_in(None);
        // The run ends with its log on the disk (the last line's flush may be in flight).
        let flushed = self.dir.wait_flushed();
        let outcome = outcome?;
        flushed?;
        // At a task's end its traces are grouped into patterns (seed 003's
        // `extract_patterns`), and a pattern over the threshold is proposed as a guard.
        if outcome.status.is_terminal() {
            self.rt.learning.learn_after_task(self.rt.progress);
        }
        Ok(outcome)
    }

    async fn run_steps(&self, stop: &StopRequest) -> Result<RunOutcome, ExecError> {
        loop {
            let state = self.dir.load_state()?;
            if stop.is_requested() && !state.status.is_terminal() {
                return Err(ExecError::Interrupted {
                    step: state.step + 1,
                });
            }
            if state.status.is_terminal() {
                return Ok(RunOutcome {
                    status: state.status,
                    steps: state.step,
                    reason: state.status_reason.clone(),
                    progress_made: !state.files_modified.is_empty(),
                });
            }
            if state.step >= state.max_steps {
                let mut s = state;
                s.status = TaskStatus::BudgetExhausted;
                s.status_reason = Some(format!("step budget of {} used up", s.max_steps));
                self.dir.save_state(&s)?;
                continue;
            }
            // The cost cap, from the recorded cost, before the next model call: a resume
            // with the same cap stops here again at once.
            if let Some(cap) = self.rt.cost_cap()? {
                let spent = state.cost.unwrap_or_default();
                if spent.usd_micros >= cap {
                    let mut s = state;
                    s.status = TaskStatus::BudgetExhausted;
                    s.status_reason = Some(format!(
                        "cost cap of {cap} reached: {spent} spent (max_cost_usd); a higher cap continues it"
                    ));
                    s.stopped_at_cost_cap = Some(cap);
                    self.dir.save_state(&s)?;
                    continue;
                }
            }
            let report = tokio::select! {
                // A finished step wins over a stop that arrives at the same time.
                biased;
                report = self.step() => report?,
                () = stop.requested() => {
                    // The step's future is dropped: its command's group is killed (the
                    // command's guard) and nothing of it was recorded. Undo its file
                    // changes now, so the workspace is as the last recorded step left it.
                    self.recover()?;
                    return Err(ExecError::Interrupted { step: state.step + 1 });
                }
            };
            if self.rt.progress {
                let r = &report.record;
                eprintln!(
                    "[step {:>3}] {:<9} {:<13} {:<28} -> {:<7} ({} ctx tokens{})",
                    r.step,
                    r.phase,
                    r.action,
                    cut(r.target.as_deref().unwrap_or("-"), 28),
                    r.result,
                    r.context_tokens,
                    r.cost_usd_micros
                        .map(|c| format!(", {c}"))
                        .unwrap_or_default()
                );
            }
            if let Some(hook) = &self.after_step {
                hook(&report.record).map_err(|message| ExecError::AfterStep {
                    step: report.record.step,
                    message,
                })?;
            }
        }
    }

    /// Applies the model's answer, as a pipeline of stages whose signatures say what each
    /// may change: `classify` (reads only), `act` (guard,
    /// act, observe: verification, files, facts, plan tree, memory),
    /// `decide` (loops, plan tree, phase, budget), then the step's
    /// accounting and `record` (masking and the crash-safe writes).
    pub async fn apply(
        &self,
        prepared: PreparedStep,
        response: ModelResponse,
    ) -> Result<StepReport, ExecError> {
        let PreparedStep {
            step,
            mut prompt,
            mut state,
            spec,
            mut memory,
            offered,
            log_tail,
            ..
        } = prepared;
        let started = Instant::now();
        // The trajectory is known once the reply is: masked, compressed and written on
        // the blocking pool while the action runs, joined before the record.
        let trajectory = Trajectory {
            version: TRAJECTORY_VERSION,
            step,
            provider: self.rt.provider.name().to_string(),
            model: response.model,
            exchange: response.exchange,
            answer: Answer::from(&response.reply),
            usage: response.usage.clone(),
        };
        let writer = self.dir.clone();
        let writing = tokio::task::spawn_blocking(move || {
            let mut trajectory = trajectory;
            // Nothing stored carries a key value the host holds.
            agentforge_store::secrets::secrets().mask_serde(&mut trajectory);
            let written = writer.write_trajectory(&trajectory);
            (trajectory, written)
        });
        let schema = self.schema(&spec.task_type)?;
        let phase_before = state.phase.clone();
        // The previous step's line reaches the disk (its flush overlapped the model
        // request) before this step's action may change anything.
        self.dir.wait_flushed()?;

        let classified = self.classify(&response.reply, &offered, &state.phase);
        let acted = self
            .act(classified.call, step, &spec, &mut state, &mut memory)
            .await?;
        let decided = self.decide(
            step,
            schema,
            &spec,
            Observed {
                action_name: &classified.action_name,
                parameters: &classified.parameters,
                acted: &acted,
            },
            &log_tail,
            &mut state,
        )?;
        // The step's accounting, then the record carrying the state after it.
        state.step = step;
        state.feedback = decided.feedback;
        // Counted while the model answered, if the prompt went out on byte counts.
        if !prompt.is_exact() {
            prompt.make_exact();
            context::save_token_counts();
        }
        let tokens = prompt.total_tokens as u64;
        state.tokens.context_tokens += tokens;
        state.tokens.max_context_tokens = state.tokens.max_context_tokens.max(tokens);
        state.tokens.input_tokens += response.usage.input_tokens;
        state.tokens.output_tokens += response.usage.output_tokens;
        state.tokens.cached_input_tokens += response.usage.cached_input_tokens;
        // Priced by the model asked for (the one the cap was checked against); unknown,
        // never zero, when it has no price or the provider reported no usage.
        let cost =
            agentforge_core::cost::call_cost(self.rt.model_price().as_ref(), &response.usage);
        state
            .cost
            // The task's steps before this one were recorded without a cost.
            .get_or_insert(CostTotals {
                usd_micros: MicroUsd::ZERO,
                unpriced_steps: step.saturating_sub(1),
            })
            .add(cost);
        let record = ActionRecord {
            step,
            phase: phase_before,
            action: classified.action_name,
            target: acted.target,
            parameters: classified.parameters,
            result: acted.executed.result,
            summary: acted.executed.summary,
            error: acted.executed.error,
            duration_ms: started.elapsed().as_millis() as u64,
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            context_tokens: tokens,
            usage: response.usage,
            cost_usd_micros: cost,
            output_artifact: acted.executed.output_artifact,
            output_hash: acted.executed.output.as_ref().map(|o| o.0.clone()),
            output_len: acted.executed.output.map(|o| o.1),
            loop_detection: decided.detection,
            file_hashes: acted.executed.file_hashes,
            trajectory: None,
            traces: acted.traces.into_iter().chain(decided.traces).collect(),
            state_after: state,
        };
        let (trajectory, written) = writing.await.map_err(|e| StoreError::Io {
            op: "cannot write the trajectory of",
            path: format!("step {step}"),
            source: std::io::Error::other(e.to_string()),
        })?;
        let record = self.record(record, trajectory, written?, memory)?;
        // The line is written: its traces go to the database (a kill before this is
        // made good by the resume's `sync_last`; the key makes a repeat a no-op).
        self.rt.learning.record_step(&spec, &record);
        Ok(StepReport { record })
    }

    /// Stage *classify*: what the reply asks for, as a typed call, or the problem to feed
    /// back (no tool call, an unknown or unoffered tool, invalid arguments). Reads the
    /// offered tools; changes nothing.
    fn classify(&self, reply: &ModelReply, offered: &[String], phase: &str) -> Classified {
        match reply {
            ModelReply::ToolCall { name, arguments } => {
                let extra = self.rt.tools.iter().find(|t| t.name() == name);
                let known = builtin_tools().iter().any(|t| &t.name == name)
                    || name == PLAN_TOOL
                    || name == FINISH_SUBTASK_TOOL
                    || extra.is_some();
                let call = if !known {
                    // Only what this phase offers: naming other tools invites more misses.
                    Err(unknown_tool_feedback(name, offered))
                } else if !offered.contains(name) {
                    Err(format!(
                        "`{name}` is not available in phase {phase}; call one of: {}",
                        offered.join(", ")
                    ))
                } else if name == PLAN_TOOL {
                    focus::parse_plan(arguments).map(Call::Plan)
                } else if name == FINISH_SUBTASK_TOOL {
                    focus::parse_finish_subtask(arguments).map(Call::FinishSubtask)
                } else if let Some(t) = extra {
                    let args = if arguments.is_null() {
                        Value::Object(Default::default())
                    } else {
                        arguments.clone()
                    };
                    t.check_arguments(&args)
                        .map(|()| {
                            Call::Builtin(Action::Extra {
                                name: name.clone(),
                                arguments: args,
                            })
                        })
                        .map_err(|e| {
                            format!(
                                "invalid arguments for `{name}`: {e}. Expected: {}",
                                t.spec().input_schema
                            )
                        })
                } else {
                    parse_action(name, arguments)
                        .map(Call::Builtin)
                        .map_err(|e| e.to_string())
                };
                // The record keeps bounded arguments; the action runs with all of them.
                Classified {
                    action_name: bound_text(name, MAX_ACTION_NAME_CHARS),
                    parameters: bound_parameters(arguments),
                    call,
                }
            }
            ModelReply::NoToolCall { text } => Classified {
                action_name: INVALID_REPLY.to_string(),
                parameters: Value::Null,
                call: Err(format!(
                    "your reply had no tool call (it said: \"{}\"); call exactly one of: {}",
                    cut(text.trim(), 200),
                    offered.join(", ")
                )),
            },
            ModelReply::MalformedArguments { name, raw, error } => Classified {
                action_name: bound_text(name, MAX_ACTION_NAME_CHARS),
                parameters: Value::String(cut(raw, 1000).into_owned()),
                call: Err(format!(
                    "the arguments of `{}` are not valid JSON ({}); send one JSON object matching the tool's schema",
                    cut(name, MAX_ACTION_NAME_CHARS),
                    cut(error, MAX_ERROR_CHARS)
                )),
            },
        }
    }

    /// Stages *guard*, *act* and *observe*: the guards decide, the call runs (file
    /// actions with a snapshot, checks, tools, the plan tree), its output becomes facts
    /// and a verified outcome. Changes the state's verification, files, facts, plan
    /// tree and invalid-reply count, and the working memory; nothing else.
    async fn act(
        &self,
        call: Result<Call, String>,
        step: u64,
        spec: &TaskSpec,
        state: &mut TaskState,
        memory: &mut WorkingMemory,
    ) -> Result<Acted, ExecError> {
        let mut target = None;
        let mut exact_signature: Option<String> = None;
        let mut feedback: Option<String> = None;
        let mut traces = Vec::new();
        let executed = match call {
            Err(problem) => {
                state.consecutive_invalid += 1;
                feedback = Some(format!("Previous reply was invalid: {problem}"));
                if state.consecutive_invalid >= self.rt.config.limits.max_invalid_replies {
                    state.status = TaskStatus::Escalated;
                    state.status_reason = Some(format!(
                        "{} invalid model replies in a row; last: {problem}",
                        state.consecutive_invalid
                    ));
                }
                Executed::failure("invalid model reply", problem)
            }
            Ok(Call::Plan(plan)) => {
                state.consecutive_invalid = 0;
                match state.focus.replan(&plan) {
                    Ok(()) => {
                        let subtasks: usize =
                            state.focus.tasks.iter().map(|t| t.subtasks.len()).sum();
                        let mut e = Executed::new(
                            ActionResult::Success,
                            format!(
                                "plan: {} tasks, {subtasks} subtasks",
                                state.focus.tasks.len()
                            ),
                        );
                        e.gathered_context = true;
                        e
                    }
                    Err(err) => Executed::failure("plan rejected", err),
                }
            }
            Ok(Call::FinishSubtask(finish)) => {
                state.consecutive_invalid = 0;
                // Claiming `tested` writes a state field: the guards decide (seed 003's
                // `block-tested-true`: not without evidence).
                let decision = if finish.tested {
                    let args = serde_json::json!({
                        "field": "subtask.tested",
                        "value": true,
                        "evidence": finish.evidence,
                    });
                    let ruling = self
                        .rt
                        .guards
                        .get()
                        .map_err(ExecError::Plugins)?
                        .check_write("subtask.tested", &args, spec, state);
                    traces.extend(learning::guard_event(
                        &ruling,
                        "set_field",
                        Some("subtask.tested"),
                    ));
                    ruling.decision
                } else {
                    GuardDecision::Allow
                };
                match decision {
                    GuardDecision::Deny(reason) => refused(reason, &mut feedback),
                    decision => {
                        if let GuardDecision::Warn(w) = decision {
                            feedback = Some(format!("warning: {w}"));
                        }
                        if finish.tested {
                            state.focus.mark_current_tested(&finish.evidence);
                        }
                        let moved = state.focus.complete_current(&finish.summary);
                        Executed::new(ActionResult::Success, moved)
                    }
                }
            }
            Ok(Call::Builtin(action)) => {
                state.consecutive_invalid = 0;
                target = action
                    .target()
                    .map(|t| bound_text(&t, MAX_LOGGED_TARGET_CHARS));
                exact_signature = Some(agentforge_core::guards::exact_signature(&action));
                let ruling = self
                    .rt
                    .guards
                    .get()
                    .map_err(ExecError::Plugins)?
                    .check(&action, spec, state);
                traces.extend(learning::guard_event(
                    &ruling,
                    action.name(),
                    target.as_deref(),
                ));
                match ruling.decision {
                    GuardDecision::Deny(reason) => refused(reason, &mut feedback),
                    decision => {
                        if let GuardDecision::Warn(w) = decision {
                            feedback = Some(format!("warning: {w}"));
                        }
                        let e = self.execute(&action, step, spec, state, memory).await?;
                        // Understanding of the edit itself (what changed where, why it
                        // failed), next to the facts of the checks it triggered.
                        if action.mutates_files() {
                            let text = match &e.error {
                                Some(err) => format!("{}\n{err}", e.summary),
                                None => e.summary.clone(),
                            };
                            let details = e.edit.as_ref().map(|r| r.to_json());
                            let facts = self
                                .rt
                                .extractors
                                .get()
                                .map_err(ExecError::Plugins)?
                                .extract_action(
                                    action.name(),
                                    &text,
                                    e.result,
                                    step,
                                    details.as_deref(),
                                );
                            // The latest edit result replaces what the earlier ones said
                            // (a fixed edit must not leave its failure as an open issue).
                            if !facts.is_empty() {
                                let edits = ["edit_file", "replace_lines", "write_file"];
                                state.facts.retain(|f| !edits.contains(&f.source.as_str()));
                            }
                            merge_facts(&mut state.facts, facts);
                        }
                        // A plain failure is visible in `recent`; only a revert needs a louder note.
                        if e.reverted && feedback.is_none() {
                            feedback = Some(e.summary.clone());
                        }
                        e
                    }
                }
            }
        };
        // Bounded once, here: the loop detector compares this step with logged ones.
        let mut executed = executed;
        executed.summary = cut(&executed.summary, MAX_SUMMARY_CHARS).into_owned();
        executed.error = executed
            .error
            .map(|e| cut(&e, MAX_ERROR_CHARS).into_owned());
        Ok(Acted {
            executed,
            target,
            exact_signature,
            feedback,
            traces,
        })
    }

    /// Stage *decide*: loop detection on the step as observed, the plan tree's account
    /// of it, the phase machine and the step budget. Changes the state's phase, status,
    /// plan tree and blocked actions; returns the detection and the feedback for the
    /// next step.
    fn decide(
        &self,
        step: u64,
        schema: &dyn ContextSchema,
        spec: &TaskSpec,
        observed: Observed<'_>,
        log_tail: &[Arc<TailRecord>],
        state: &mut TaskState,
    ) -> Result<Decided, ExecError> {
        let Observed {
            action_name,
            parameters,
            acted,
        } = observed;
        let executed = &acted.executed;
        let mut feedback = acted.feedback.clone();
        let ran_checks = !state.verification.checks.is_empty();
        let current = StepView {
            step,
            action: action_name.to_string(),
            target: acted.target.clone(),
            parameters: parameters.clone(),
            result: executed.result,
            error: executed.error.clone(),
            summary: executed.summary.clone(),
            file_hashes: executed.file_hashes.clone(),
            checks_passing: ran_checks.then(|| state.verification.passing()),
            checks_failing: ran_checks.then(|| state.verification.failing()),
            output_len: executed.output.as_ref().map(|o| o.1),
            output_hash: executed.output.as_ref().map(|o| o.0.clone()),
            output: None,
            thought: None,
        };
        let detection =
            self.detect_loop(state, log_tail, current, acted.exact_signature.as_deref())?;
        let mut traces = Vec::new();
        if executed.reverted {
            let checks = executed
                .edit
                .as_ref()
                .and_then(|e| e.reverted.as_ref())
                .map(|r| r.checks.clone())
                .unwrap_or_default();
            traces.push(learning::revert_event(
                action_name,
                acted.target.as_deref(),
                &checks,
                &executed.summary,
            ));
        }
        if let Some(d) = &detection {
            traces.push(learning::loop_event(
                action_name,
                acted.target.as_deref(),
                d,
            ));
        }

        // The plan: this step belongs to the active subtask; a reverted change is a
        // failure of that subtask (two failures block it, seed 004).
        if !action_name.is_empty() && action_name != INVALID_REPLY {
            state.focus.record_action(step);
        }
        if executed.reverted {
            self.subtask_failed(state, &executed.summary);
        }
        if let Some(d) = &detection {
            self.subtask_failed(state, &format!("loop: {}", d.description));
        }

        // Phase machine.
        let graph = schema.phase_graph();
        let mut machine = PhaseMachineState {
            current: state.phase.clone(),
            phase_steps: state.phase_steps,
            history: std::mem::take(&mut state.phase_history),
        };
        if state.status == TaskStatus::Running {
            let signals = Signals {
                context_gathered: executed.gathered_context,
                files_changed: executed.changed_files,
                ready: state.verification.ready_for_completion,
                checks_failing: executed.verification_ran && state.verification.failing() > 0,
                has_modifications: !state.files_modified.is_empty(),
            };
            graph.advance(&mut machine, step, &signals);
            state.phase = machine.current.clone();
            state.phase_steps = machine.phase_steps;
            self.check_budget(spec, state, log_tail, step, &mut feedback)?;
        }
        if state.status.is_terminal() {
            // The working phase stays in `state.phase` (prompts and `context` need it);
            // the move into the terminal phase is recorded in the history.
            let terminal = match state.status {
                TaskStatus::Complete => agentforge_core::phases::COMPLETE,
                TaskStatus::Failed => agentforge_core::phases::FAILED,
                _ => agentforge_core::phases::ESCALATED,
            };
            let reason = state.status_reason.clone().unwrap_or_default();
            let mut finishing = machine.clone();
            if graph
                .finish(&mut finishing, terminal, step, &reason)
                .is_some()
            {
                machine.history = finishing.history;
            }
        }
        // The state stays constant-size: older phase changes are in the log's records.
        let excess = machine.history.len().saturating_sub(MAX_PHASE_HISTORY);
        machine.history.drain(..excess);
        state.phase_history = machine.history;
        Ok(Decided {
            detection,
            feedback,
            traces,
        })
    }

    /// Stage *record*: secrets are masked, then working memory, the fsynced log line
    /// (the step is done once it is on disk) and `state.yaml` are written, in that order
    /// (crash-safe at every point).
    fn record(
        &self,
        mut record: ActionRecord,
        trajectory: Trajectory,
        written: agentforge_store::trajectory::Written,
        mut memory: WorkingMemory,
    ) -> Result<ActionRecord, ExecError> {
        let step = record.step;
        // Nothing stored carries a key value the host holds (a read of a `.env`, an
        // error quoting a check's output...): memory and the log line (and the state it
        // carries) are masked (the trajectory was, as it was written).
        let secrets = agentforge_store::secrets::secrets();
        secrets.mask_serde(&mut memory);
        secrets.mask_serde(&mut record);
        agentforge_core::fault::point("after_action", step);
        // The trajectory's member is appended whole before the line that points to it: a
        // kill between the two leaves a member no line points to, which recovery cuts
        // off before the step runs again and appends anew. Flushed with the line.
        record.trajectory = Some(written.reference);
        agentforge_core::fault::point("after_trajectory", step);
        // One fsync per step: the log line. The working memory goes first, replaced
        // atomically but not flushed, stamped with its step: a kill leaves it complete
        // (the step reruns and its item is simply replaced, same key); a power loss that
        // leaves it behind the log is detected by its stamp on resume and it is
        // cleared rather than shown stale. `state.yaml` comes after the line and is a
        // cache of it (rebuilt from the line if it lags or cannot be read).
        memory.step = step;
        self.dir.save_working_memory_before_log(&memory)?;
        agentforge_core::fault::point("after_memory", step);
        self.dir.append_action_after(&record, written.to_flush)?;
        agentforge_core::fault::point("after_log", step);
        if let Some(recorder) = &self.rt.record_session {
            recorder.append(&trajectory)?;
        }
        self.dir.save_state_after_log(&record.state_after)?;
        agentforge_core::fault::point("after_state", step);
        Ok(record)
    }

    async fn execute(
        &self,
        action: &Action,
        step: u64,
        spec: &TaskSpec,
        state: &mut TaskState,
        memory: &mut WorkingMemory,
    ) -> Result<Executed, ExecError> {
        let now = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match action {
            Action::Complete { summary } => {
                state.status = TaskStatus::Complete;
                state.status_reason = summary.as_deref().map(|s| bound_text(s, MAX_REASON_CHARS));
                Ok(Executed::new(
                    ActionResult::Success,
                    format!(
                        "task complete: {}",
                        summary.as_deref().unwrap_or("verification passing")
                    ),
                ))
            }
            Action::Escalate { reason } => {
                state.status = TaskStatus::Escalated;
                state.status_reason = Some(bound_text(reason, MAX_REASON_CHARS));
                Ok(Executed::new(
                    ActionResult::Success,
                    format!("escalated: {}", cut(reason, 160)),
                ))
            }
            Action::CannotFix { reason } => {
                state.status = TaskStatus::Failed;
                state.status_reason = Some(format!(
                    "cannot fix: {}",
                    bound_text(reason, MAX_REASON_CHARS)
                ));
                Ok(Executed::new(
                    ActionResult::Success,
                    format!("cannot fix: {}", cut(reason, 160)),
                ))
            }
            Action::RunCheck { name } | Action::RunTests { name } => {
                let kind = if matches!(action, Action::RunCheck { .. }) {
                    CheckKind::Check
                } else {
                    CheckKind::Test
                };
                let all = self.rt.checks_for(spec)?;
                let selected: Vec<CheckSpec> = match name {
                    Some(n) => all.iter().filter(|c| &c.name == n).cloned().collect(),
                    None => {
                        let of_kind: Vec<_> =
                            all.iter().filter(|c| c.kind == kind).cloned().collect();
                        // A task with only tests still answers run_check, and vice versa.
                        if of_kind.is_empty() {
                            all.clone()
                        } else {
                            of_kind
                        }
                    }
                };
                if selected.is_empty() {
                    let names: Vec<_> = all.iter().map(|c| c.name.as_str()).collect();
                    return Ok(Executed::failure(
                        "no such check",
                        format!(
                            "no check named `{}`; checks: {}",
                            name.as_deref().unwrap_or(""),
                            names.join(", ")
                        ),
                    ));
                }
                let mut e = self.verify(&selected, &all, step, state).await?;
                e.verification_ran = true;
                // Seeing the checks fail is how analysis usually ends.
                e.gathered_context = true;
                Ok(e)
            }
            Action::LoadContext { item } => {
                Ok(self.load_context(item, step, spec, state, memory, now()))
            }
            Action::Extra { name, arguments } => {
                let Some(tool) = self.rt.tools.iter().find(|t| t.name() == name) else {
                    return Ok(Executed::failure(
                        "unknown tool",
                        format!("no tool `{name}` is loaded"),
                    ));
                };
                Ok(match tool.invoke(arguments) {
                    Ok(out) => {
                        if let (Some(summary), ActionResult::Success) =
                            (&out.completes_task, out.result)
                        {
                            state.status = TaskStatus::Complete;
                            state.status_reason = Some(bound_text(summary, MAX_REASON_CHARS));
                        }
                        let mut e = Executed::new(
                            out.result,
                            format!("{name}: {}", first_line(&out.output)),
                        );
                        e.showed(&out.output);
                        // Like a read: the output stays in working memory for a few steps.
                        if !out.output.trim().is_empty() {
                            memory.push(MemoryItem {
                                kind: ItemKind::ActionResult,
                                key: format!("tool:{name}:{}", action.target().unwrap_or_default()),
                                step,
                                content: out.output,
                                added_at: now(),
                                expires_after_steps: Some(READ_TTL),
                                pinned: false,
                            });
                        }
                        e.gathered_context = e.result == ActionResult::Success;
                        e
                    }
                    Err(message) => Executed::failure(format!("{name} failed"), message),
                })
            }
            _ => {
                let snap = self.snapshot_dir(step);
                let out = tools::execute_file_action(&self.rt.workspace, action, &snap);
                let mut e = Executed::new(out.result, out.summary);
                e.error = out.error;
                e.edit = out.edit.map(|r| *r);
                if let Some(content) = out.content {
                    e.showed(&content);
                    let key = match action {
                        Action::Search { pattern, .. } => format!("search:{pattern}"),
                        _ => format!("file:{}", action.target().unwrap_or_default()),
                    };
                    memory.push(MemoryItem {
                        kind: ItemKind::LoadedContext,
                        key,
                        step,
                        content,
                        added_at: now(),
                        expires_after_steps: Some(READ_TTL),
                        pinned: false,
                    });
                    e.gathered_context = out.result == ActionResult::Success;
                }
                if out.files_changed.is_empty() {
                    // Nothing changed: a snapshot, if one was taken, is not a pending step.
                    let _ = std::fs::remove_dir_all(&snap);
                    return Ok(e);
                }
                // Drop stale reads of the files just changed.
                for f in &out.files_changed {
                    memory.remove(&format!("file:{f}"));
                }
                state.last_change_step = step;
                let before = state.verification.clone();
                let all = self.rt.checks_for(spec)?;
                let v = self.verify(&all, &all, step, state).await?;
                e.output_artifact = v.output_artifact;
                e.output = v.output;
                e.verification_ran = true;
                let regressed: Vec<String> = before
                    .checks
                    .iter()
                    .filter(|(n, c)| {
                        c.passing
                            && state
                                .verification
                                .checks
                                .get(*n)
                                .is_some_and(|now| !now.passing)
                    })
                    .map(|(n, _)| n.clone())
                    .collect();
                if !regressed.is_empty() {
                    tools::restore_snapshot(&self.rt.workspace, &snap)
                        .map_err(|source| ExecError::Revert { step, source })?;
                    state.verification = before;
                    e.result = ActionResult::Failure;
                    e.reverted = true;
                    if let Some(edit) = &mut e.edit {
                        edit.reverted = Some(agentforge_core::edit::Reverted {
                            checks: regressed.clone(),
                        });
                    }
                    e.summary = format!(
                        "reverted: {} passed before this change and failed after it; the change was undone",
                        regressed.join(", ")
                    );
                    e.error = Some(v.summary);
                    return Ok(e);
                }
                e.changed_files = true;
                for f in &out.files_changed {
                    e.file_hashes.insert(f.clone(), self.file_hash(f));
                }
                for f in out.files_changed {
                    if !state.files_modified.contains(&f) {
                        state.files_modified.push(f);
                    }
                }
                e.summary = format!("{}; checks: {}", e.summary, v.summary);
                Ok(e)
            }
        }
    }

    /// Runs `selected` checks, records their outputs, extracts facts, updates verification.
    async fn verify(
        &self,
        selected: &[CheckSpec],
        all: &[CheckSpec],
        step: u64,
        state: &mut TaskState,
    ) -> Result<Executed, ExecError> {
        let mut combined = String::new();
        let mut summaries = Vec::new();
        let mut failed = Vec::new();
        for check in selected {
            let mut limits = self.rt.config.command_limits();
            if let Some(t) = check.timeout_secs {
                limits.timeout = std::time::Duration::from_secs(t);
            }
            let ran = run_command(&check.command, self.rt.workspace.root(), &limits).await;
            let started = ran.is_ok();
            let output = match ran {
                Ok(o) => o,
                Err(err) => CommandOutput {
                    command: check.command.clone(),
                    exit_code: None,
                    output: err.to_string(),
                    truncated: false,
                    timed_out: false,
                    duration: std::time::Duration::ZERO,
                },
            };
            let result = if output.success() {
                ActionResult::Success
            } else {
                ActionResult::Failure
            };
            let mut facts = self
                .rt
                .extractors
                .get()
                .map_err(ExecError::Plugins)?
                .extract(&check.name, &output.output, result, step);
            if self.rt.config.understanding.model_fallback
                && facts.iter().all(agentforge_core::extract::is_generic)
                && !output.output.trim().is_empty()
            {
                // No rule matched: ask the model, keep the generic fact if it fails.
                let req = agentforge_core::extract::model::request(
                    step,
                    &self.rt.config.provider.model,
                    &check.name,
                    result,
                    &output.output,
                );
                match self.rt.provider.complete(&req).await {
                    Ok(resp) => {
                        match agentforge_core::extract::model::parse(&resp.reply, &check.name, step)
                        {
                            Ok(more) if !more.is_empty() => facts.extend(more),
                            Ok(_) => {}
                            Err(e) => eprintln!(
                                "note: model fact extraction for `{}` gave nothing usable: {e}",
                                check.name
                            ),
                        }
                    }
                    Err(e) => eprintln!(
                        "note: model fact extraction for `{}` failed: {e}",
                        check.name
                    ),
                }
            }
            let verdict = self
                .rt
                .gates
                .get()
                .map_err(ExecError::Plugins)?
                .evaluate(check, &output, &facts);
            merge_facts(&mut state.facts, facts);
            combined.push_str(&format!(
                "=== {} `{}` ({}, {} ms) ===\n{}\n",
                check.name,
                check.command,
                exit_status(&output, started),
                output.duration.as_millis(),
                output.output
            ));
            summaries.push(format!("{}: {}", check.name, verdict.summary));
            if !verdict.passing {
                let tail = output.tail(MAX_ERROR_CHARS);
                let tail = if tail.trim().is_empty() {
                    "(no output)"
                } else {
                    tail.trim()
                };
                failed.push(format!("{}: {tail}", check.name));
            }
            state.verification.checks.insert(
                check.name.clone(),
                CheckStatus {
                    passing: verdict.passing,
                    summary: verdict.summary,
                    is_test: check.kind == CheckKind::Test,
                    step,
                },
            );
        }
        state.verification.last_run_step = Some(step);
        state.verification.ready_for_completion = all.iter().all(|c| {
            state
                .verification
                .checks
                .get(&c.name)
                .is_some_and(|s| s.passing && s.step >= state.last_change_step)
        });
        let name = if selected.len() == 1 {
            selected[0].name.as_str()
        } else {
            "checks"
        };
        let artifact = self.dir.write_output(step, &sanitize(name), &combined)?;
        let summary = summaries.join("; ");
        let mut e = if failed.is_empty() {
            Executed::new(ActionResult::Success, summary.clone())
        } else if failed.len() < selected.len() {
            Executed::new(ActionResult::Partial, summary.clone())
        } else {
            Executed::new(ActionResult::Failure, summary.clone())
        };
        if !failed.is_empty() {
            e.error = Some(failed.join("\n"));
        }
        e.output_artifact = Some(format!(".agentforge/tasks/{}/{}", state.task_id, artifact));
        e.showed(&combined);
        e.summary = summary;
        Ok(e)
    }

    fn load_context(
        &self,
        item: &ContextItem,
        step: u64,
        spec: &TaskSpec,
        state: &TaskState,
        memory: &mut WorkingMemory,
        now: String,
    ) -> Executed {
        let loaded: Result<String, String> = match item {
            ContextItem::FullFile(path) => {
                numbered_file(&self.rt.workspace, path).map_err(|e| e.to_string())
            }
            ContextItem::SpecSection(id) => {
                let inputs = serde_json::to_value(&spec.inputs).unwrap_or(Value::Null);
                find_section(&inputs, id)
                    .map(|v| serde_yaml_ng::to_string(&v).unwrap_or_default())
                    .ok_or_else(|| format!("no spec section with id `{id}` in the task inputs"))
            }
            ContextItem::TestOutput => self.last_output(false),
            ContextItem::ErrorDetails => self.last_output(true),
            ContextItem::RelatedFiles => self.related_files(spec, state),
        };
        match loaded {
            Ok(content) => {
                memory.push(MemoryItem {
                    kind: ItemKind::LoadedContext,
                    key: item.to_string(),
                    step,
                    content,
                    added_at: now,
                    expires_after_steps: Some(LOADED_TTL),
                    pinned: false,
                });
                let mut e = Executed::new(
                    ActionResult::Success,
                    format!("loaded {item} into working memory"),
                );
                e.gathered_context = true;
                e
            }
            Err(err) => Executed::failure(format!("could not load {item}"), err),
        }
    }

    fn last_output(&self, failing_only: bool) -> Result<String, String> {
        let records: Vec<Arc<TailRecord>> =
            self.dir.recent_actions(50).map_err(|e| e.to_string())?;
        let rec = records
            .iter()
            .rev()
            .find(|r| {
                r.output_artifact.is_some() && (!failing_only || r.result != ActionResult::Success)
            })
            .ok_or_else(|| {
                "no check or test output recorded yet; run run_tests first".to_string()
            })?;
        let rel = rec.output_artifact.as_deref().unwrap_or_default();
        let path = self.rt.workspace.root().join(rel);
        let read = tools::read_regular_file(&path, MAX_OUTPUT_READ_BYTES)
            .map_err(|e| e.shown_as(rel).to_string())?;
        let text = read.text();
        // The context builder compresses long text head/tail; keep the tail, where failures are.
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(300);
        Ok(lines[start..].join("\n"))
    }

    fn related_files(&self, spec: &TaskSpec, state: &TaskState) -> Result<String, String> {
        let anchor = spec
            .inputs
            .get("violation")
            .and_then(|v| v.get("file_path"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| state.files_modified.first().cloned())
            .ok_or(
                "no anchor file: related_files needs a violation file_path or a modified file",
            )?;
        let p = Path::new(&anchor);
        let stem = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut related = Vec::new();
        let abs_dir = self.rt.workspace.root().join(&dir);
        if let Ok(entries) = std::fs::read_dir(&abs_dir) {
            let mut names: Vec<_> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for n in names {
                let rel = dir.join(&n).to_string_lossy().into_owned();
                if rel != anchor && abs_dir.join(&n).is_file() {
                    related.push(rel);
                }
            }
        }
        let search = Action::Search {
            pattern: regex::escape(&stem),
            glob: None,
            path: None,
        };
        let hits = tools::execute_file_action(
            &self.rt.workspace,
            &search,
            &self.dir.snapshots_dir().join("unused"),
        );
        Ok(format!(
            "files next to {anchor}:\n{}\nmentions of `{stem}`:\n{}",
            related
                .iter()
                .take(20)
                .map(|r| format!("- {r}"))
                .collect::<Vec<_>>()
                .join("\n"),
            hits.content.unwrap_or_default()
        ))
    }
}

/// How a check ended, in words (never Rust's `Some(1)`): `exit 1`, `timed out and
/// killed`, `killed by a signal`, `could not start`.
fn exit_status(output: &CommandOutput, started: bool) -> String {
    match output.exit_code {
        _ if !started => "could not start".to_string(),
        _ if output.timed_out => "timed out and killed".to_string(),
        Some(code) => format!("exit {code}"),
        None => "killed by a signal".to_string(),
    }
}

/// Feedback for a call of a tool that does not exist: what this phase offers, with
/// the closest offered name when there is one.
fn unknown_tool_feedback(name: &str, offered: &[String]) -> String {
    let shown = cut(name, MAX_ACTION_NAME_CHARS);
    let near = offered
        .iter()
        .map(|o| (strsim::jaro_winkler(name, o), o))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, o)| format!(" (did you mean `{o}`?)"))
        .unwrap_or_default();
    format!(
        "there is no tool `{shown}`{near}; call one of: {}",
        offered.join(", ")
    )
}

/// Whether the task has a real plan (more than the implicit single subtask).
fn is_planned(state: &TaskState) -> bool {
    state
        .focus
        .tasks
        .iter()
        .map(|t| t.subtasks.len())
        .sum::<usize>()
        > 1
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn find_section(v: &Value, id: &str) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.get("id").and_then(Value::as_str) == Some(id) {
                return Some(v.clone());
            }
            if let Some(found) = m.get(id) {
                return Some(found.clone());
            }
            m.values().find_map(|x| find_section(x, id))
        }
        Value::Array(a) => a.iter().find_map(|x| find_section(x, id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device")
    }

    /// One row per variant: a disk failure is never reported as a configuration error.
    #[test]
    fn every_error_has_its_exit_code() {
        let tool_err = || tools::ToolError::Io {
            op: "cannot restore",
            path: "src/lib.rs".into(),
            source: io(),
        };
        let table: Vec<(ExecError, u8)> = vec![
            (
                ExecError::Config("inputs.plan: not a list".into()),
                exit::USAGE,
            ),
            (
                ExecError::Context(context::ContextError::OverBudget {
                    needed: 9000,
                    budget: 8000,
                    breakdown: "system 9000".into(),
                }),
                exit::USAGE,
            ),
            (
                ExecError::Rollback {
                    step: 3,
                    source: tool_err(),
                },
                exit::IO,
            ),
            (
                ExecError::Revert {
                    step: 3,
                    source: tool_err(),
                },
                exit::IO,
            ),
            (
                ExecError::Store(StoreError::Io {
                    op: "cannot write",
                    path: "state.yaml".into(),
                    source: io(),
                }),
                exit::IO,
            ),
            (
                ExecError::Store(StoreError::Busy {
                    id: "t".into(),
                    pid: Some(42),
                }),
                exit::BUSY,
            ),
            (
                ExecError::Store(StoreError::Corrupt {
                    path: "actions.jsonl".into(),
                    message: "line 3".into(),
                }),
                exit::FAILED,
            ),
            (
                ExecError::Provider(ProviderError::RetriesExhausted {
                    attempts: 6,
                    last: "HTTP 503".into(),
                }),
                exit::FAILED,
            ),
            (ExecError::Interrupted { step: 4 }, exit::INTERRUPTED),
        ];
        for (err, code) in table {
            assert_eq!(err.exit_code(), code, "{err}");
        }
        let rollback = ExecError::Rollback {
            step: 3,
            source: tool_err(),
        };
        assert!(
            rollback.to_string().contains("no space left"),
            "the cause is kept: {rollback}"
        );
    }
}
