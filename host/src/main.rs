//! The `agentforge` command line.
//!
//! Exit codes: 0 complete; 2 escalated or budget exhausted; 1 failed (or an error that
//! stops the run); 64 usage or configuration error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context as _, Result};
use clap::{Args, Parser, Subcommand};

use agentforge::config::{parse_kind, Config};
use agentforge::context::render_report;
use agentforge::executor::{ExecError, Executor, Runtime};
use agentforge::providers::Provider;
use agentforge::state_store::{TaskStatus, TaskStore};
use agentforge::task::TaskSpec;
use agentforge::tools::Workspace;

/// Exit code for usage and configuration errors (EX_USAGE).
const EXIT_USAGE: u8 = 64;

#[derive(Parser, Debug)]
#[command(
    name = "agentforge",
    version,
    about = "Stateless, budgeted, crash-safe coding agents"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug)]
struct Global {
    /// Workspace root: file actions are confined to it, tasks live under its .agentforge/.
    #[arg(long, short = 'w', global = true, default_value = ".")]
    workspace: PathBuf,
    /// Config file (default: <workspace>/agentforge.toml if present).
    #[arg(long, short = 'c', global = true)]
    config: Option<PathBuf>,
    /// Print data as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Args, Debug, Default)]
struct RunFlags {
    /// Model provider: anthropic, openai or replay.
    #[arg(long)]
    provider: Option<String>,
    /// Model name.
    #[arg(long)]
    model: Option<String>,
    /// Recorded session (JSONL) for the replay provider; implies --provider replay.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Step budget (overrides the task and the config).
    #[arg(long)]
    max_steps: Option<u64>,
    /// Plugin folder (repeatable).
    #[arg(long = "plugins")]
    plugins: Vec<PathBuf>,
    /// Refuse to run if any plugin fails to load.
    #[arg(long)]
    strict: bool,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a task from a task.yaml and run it to the end (resumes it if it exists unchanged).
    Run {
        /// The task spec.
        task: PathBuf,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Resume a task (default: the most recently active running task).
    Resume {
        /// Task id.
        task_id: Option<String>,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Manage tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Print the exact next prompt (system, user, tools) with a per-section token breakdown.
    Context {
        /// Task id.
        task_id: String,
    },
    /// Post-mortems of recorded runs.
    #[command(subcommand)]
    Inspect(InspectCommand),
}

#[derive(Subcommand, Debug)]
enum InspectCommand {
    /// Replay a recorded action log offline and print every loop detection.
    Loops {
        /// A task id (in the workspace) or the path of an actions.jsonl.
        source: String,
    },
}

#[derive(Subcommand, Debug)]
enum TaskCommand {
    /// Create a task from a task.yaml without running it.
    New {
        /// The task spec.
        task: PathBuf,
    },
    /// List tasks with their status.
    List,
    /// Show a task's spec and state.
    Show {
        /// Task id.
        task_id: String,
    },
}

/// An error with its exit code.
struct Failure {
    code: u8,
    error: anyhow::Error,
}

fn usage(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        error: e.into(),
    }
}

fn failed(e: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: 1,
        error: e.into(),
    }
}

fn exec_failure(e: ExecError) -> Failure {
    match e {
        ExecError::Config(_) | ExecError::Prompt(_) | ExecError::Context(_) => usage(e),
        other => failed(other),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let g = &cli.global;
    match &cli.command {
        Command::Run { task, flags } => {
            let spec = TaskSpec::load(task).map_err(usage)?;
            let rt = runtime(g, flags)?;
            let store = &rt.store;
            let dir = match store.open(&spec.id) {
                Ok(dir) => {
                    let existing = dir.spec().map_err(failed)?;
                    if existing != spec {
                        return Err(usage(anyhow!(
                            "task `{}` already exists at {} with a different spec; resume it with `agentforge resume {}` or give the new task another id",
                            spec.id,
                            dir.path().display(),
                            spec.id
                        )));
                    }
                    eprintln!("task `{}` exists with the same spec: resuming", spec.id);
                    dir
                }
                Err(_) => rt.create_task(&spec).map_err(exec_failure)?,
            };
            drive(&rt, dir, g.json).await
        }
        Command::Resume { task_id, flags } => {
            let rt = runtime(g, flags)?;
            let id = match task_id {
                Some(id) => id.clone(),
                None => latest_running(&rt.store).map_err(usage)?,
            };
            let dir = rt.store.open(&id).map_err(usage)?;
            drive(&rt, dir, g.json).await
        }
        Command::Task(TaskCommand::New { task }) => {
            let spec = TaskSpec::load(task).map_err(usage)?;
            let rt = runtime(g, &RunFlags::default()).or_else(|_| offline_runtime(g))?;
            let dir = rt.create_task(&spec).map_err(exec_failure)?;
            if g.json {
                println!("{}", serde_json::json!({"id": spec.id, "path": dir.path()}));
            } else {
                println!("created task `{}` at {}", spec.id, dir.path().display());
            }
            Ok(0)
        }
        Command::Task(TaskCommand::List) => {
            let store = TaskStore::new(&workspace_root(g)?);
            let mut rows = Vec::new();
            for id in store.list().map_err(failed)? {
                let dir = store.open(&id).map_err(failed)?;
                let state = dir.load_state().map_err(failed)?;
                rows.push(state);
            }
            if g.json {
                let v: Vec<_> = rows
                    .iter()
                    .map(|s| serde_json::json!({"id": s.task_id, "task_type": s.task_type, "status": s.status, "phase": s.phase, "step": s.step, "max_steps": s.max_steps}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
            } else if rows.is_empty() {
                println!("no tasks in {}", store.root().display());
            } else {
                println!(
                    "{:<28} {:<18} {:<17} {:<10} STEP",
                    "ID", "TYPE", "STATUS", "PHASE"
                );
                for s in rows {
                    let status = serde_json::to_value(s.status).map_err(failed)?;
                    println!(
                        "{:<28} {:<18} {:<17} {:<10} {}/{}",
                        s.task_id,
                        s.task_type,
                        status.as_str().unwrap_or_default(),
                        s.phase,
                        s.step,
                        s.max_steps
                    );
                }
            }
            Ok(0)
        }
        Command::Task(TaskCommand::Show { task_id }) => {
            let store = TaskStore::new(&workspace_root(g)?);
            let dir = store.open(task_id).map_err(usage)?;
            let (state, recovery) = dir.recover().map_err(failed)?;
            report_recovery(&recovery);
            let spec = dir.spec().map_err(failed)?;
            let actions = dir.recent_actions(5).map_err(failed)?;
            if g.json {
                let v = serde_json::json!({"spec": spec, "state": state, "recent_actions": actions.iter().map(|a| serde_json::json!({"step": a.step, "action": a.action, "target": a.target, "result": a.result, "summary": a.summary})).collect::<Vec<_>>()});
                println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
            } else {
                println!(
                    "# {}\n{}",
                    dir.path().join("task.yaml").display(),
                    spec.to_yaml()
                );
                println!(
                    "# state.yaml\n{}",
                    serde_yaml_ng::to_string(&state).map_err(failed)?
                );
                println!("# last actions");
                for a in actions {
                    println!(
                        "{:>4} {:<13} {:<28} {:<8} {}",
                        a.step,
                        a.action,
                        a.target.unwrap_or_default(),
                        a.result,
                        a.summary
                    );
                }
            }
            Ok(0)
        }
        Command::Inspect(InspectCommand::Loops { source }) => {
            let path = Path::new(source);
            let dir = if path.is_file() {
                agentforge::state_store::TaskDir::at(
                    path.parent().unwrap_or(Path::new(".")).to_path_buf(),
                )
            } else {
                TaskStore::new(&workspace_root(g)?)
                    .open(source)
                    .map_err(usage)?
            };
            let records = if path.is_file() {
                read_log(path).map_err(usage)?
            } else {
                dir.read_actions().map_err(failed)?
            };
            let (config, _) = Config::load(g.config.as_deref(), &g.workspace).map_err(usage)?;
            let steps: Vec<agentforge::loops::StepView> = records.iter().map(Into::into).collect();
            let detector = agentforge::loops::LoopDetector::new(config.loops.thresholds.clone());
            let found = detector.replay(&steps);
            if g.json {
                println!("{}", serde_json::to_string_pretty(&found).map_err(failed)?);
            } else {
                println!("{} steps replayed", steps.len());
                print!("{}", agentforge::loops::render_text(&found));
            }
            Ok(0)
        }
        Command::Context { task_id } => {
            let rt = runtime(g, &RunFlags::default()).or_else(|_| offline_runtime(g))?;
            let dir = rt.store.open(task_id).map_err(usage)?;
            let exec = Executor::new(&rt, dir);
            let prepared = exec.prepare().map_err(exec_failure)?;
            if g.json {
                let v = serde_json::json!({
                    "step": prepared.step,
                    "system": prepared.prompt.system,
                    "user": prepared.prompt.user,
                    "tools": prepared.prompt.tools,
                    "total_tokens": prepared.prompt.total_tokens,
                    "sections": prepared.prompt.sections.iter().map(|s| serde_json::json!({"name": s.name, "tokens": s.tokens, "budget": s.budget, "compressed": s.compressed})).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
            } else {
                println!("{}", render_report(&prepared.prompt));
            }
            Ok(0)
        }
    }
}

fn workspace_root(g: &Global) -> Result<PathBuf, Failure> {
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    Ok(ws.root().to_path_buf())
}

fn load_config(g: &Global, flags: &RunFlags, ws: &Path) -> Result<Config, Failure> {
    let (mut config, _) = Config::load(g.config.as_deref(), ws).map_err(usage)?;
    if let Some(p) = &flags.provider {
        config.provider.kind = parse_kind(p).map_err(|m| usage(anyhow!("--provider: {m}")))?;
    }
    if let Some(m) = &flags.model {
        config.provider.model = m.clone();
    }
    if let Some(r) = &flags.replay {
        config.provider.replay = Some(r.clone());
        config.provider.kind = agentforge::providers::ProviderKind::Replay;
    }
    if let Some(n) = flags.max_steps {
        if n == 0 {
            return Err(usage(anyhow!("--max-steps must be at least 1")));
        }
        config.limits.max_steps = n;
    }
    // Folders given on the command line are relative to where the command runs.
    for p in &flags.plugins {
        let abs =
            std::path::absolute(p).map_err(|e| usage(anyhow!("--plugins {}: {e}", p.display())))?;
        config.plugins.dirs.push(abs);
    }
    config.validate("command line").map_err(usage)?;
    Ok(config)
}

fn runtime(g: &Global, flags: &RunFlags) -> Result<Runtime, Failure> {
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    check_writable(ws.root())?;
    let config = load_config(g, flags, ws.root())?;
    let provider = Provider::from_settings(&config.provider_settings()).map_err(usage)?;
    let mut rt = Runtime::new(ws, config, provider);
    rt.progress = !flags.quiet;
    load_plugins(&mut rt, flags.strict)?;
    Ok(rt)
}

/// A runtime for commands that never call the model (`context`, `task new`): the
/// replay provider with no file stands in so no key is needed.
fn offline_runtime(g: &Global) -> Result<Runtime, Failure> {
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    let (mut config, _) = Config::load(g.config.as_deref(), ws.root()).map_err(usage)?;
    config.provider.kind = agentforge::providers::ProviderKind::Replay;
    let empty = std::env::temp_dir().join("agentforge-no-model.jsonl");
    std::fs::write(&empty, "").map_err(failed)?;
    config.provider.replay = Some(empty);
    let provider = Provider::from_settings(&config.provider_settings()).map_err(usage)?;
    Ok(Runtime::new(ws, config, provider))
}

/// Loads the WASM plugins of every plugin folder (flags and `[plugins] dirs`, relative to
/// the workspace). A broken plugin is reported and skipped, or fatal with `--strict`.
/// Today extractor plugins take part in runs; the other kinds are loaded and checked.
fn load_plugins(rt: &mut Runtime, strict: bool) -> Result<(), Failure> {
    let cache = rt.workspace.root().join(".agentforge/cache/plugins");
    for dir in rt.config.plugins.dirs.clone() {
        let dir = if dir.is_absolute() {
            dir
        } else {
            rt.workspace.root().join(dir)
        };
        if !dir.is_dir() {
            return Err(usage(anyhow!(
                "plugin folder {} does not exist",
                dir.display()
            )));
        }
        let (loaded, errors) = agentforge::plugins::load_dir(&dir, &cache);
        for e in &errors {
            eprintln!("plugin error: {e}");
        }
        if strict && !errors.is_empty() {
            return Err(usage(anyhow!(
                "{} plugin(s) in {} failed to load (--strict)",
                errors.len(),
                dir.display()
            )));
        }
        for p in loaded {
            match p.as_extractor() {
                Some(x) => rt.extractors.push(x),
                None => eprintln!(
                    "note: plugin `{}` loaded; its kind does not take part in runs yet",
                    p.name()
                ),
            }
        }
    }
    Ok(())
}

fn check_writable(root: &Path) -> Result<(), Failure> {
    let dir = root.join(".agentforge");
    std::fs::create_dir_all(&dir)
        .and_then(|_| {
            let probe = dir.join(".write-probe");
            std::fs::write(&probe, b"ok")?;
            std::fs::remove_file(&probe)
        })
        .with_context(|| {
            format!(
                "workspace {} is not writable (tasks are stored in {})",
                root.display(),
                dir.display()
            )
        })
        .map_err(usage)
}

fn latest_running(store: &TaskStore) -> Result<String> {
    let mut best: Option<(std::time::SystemTime, String)> = None;
    for id in store.list()? {
        let dir = store.open(&id)?;
        let state = dir.load_state()?;
        if state.status != TaskStatus::Running {
            continue;
        }
        let t = std::fs::metadata(dir.path().join("state.yaml"))
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
            best = Some((t, id));
        }
    }
    best.map(|(_, id)| id).ok_or_else(|| {
        anyhow!(
            "no running task to resume in {}; name one with `agentforge resume <task-id>`",
            store.root().display()
        )
    })
}

/// Reads an actions.jsonl given by path; a torn last line (a crashed run) is skipped
/// with a note rather than failing the post-mortem.
fn read_log(path: &Path) -> Result<Vec<agentforge::state_store::ActionRecord>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(r) => out.push(r),
            Err(e) if i + 1 == lines.len() => {
                eprintln!("note: {}: last line is torn ({e}); ignored", path.display())
            }
            Err(e) => return Err(anyhow!("{}: line {}: {e}", path.display(), i + 1)),
        }
    }
    Ok(out)
}

fn report_recovery(r: &agentforge::state_store::Recovery) {
    if let Some(p) = &r.torn_line_saved_to {
        eprintln!(
            "recovered: the last line of actions.jsonl was torn by a crash; it was cut and saved to {} (that step will run again)",
            p.display()
        );
    }
    if let Some(s) = r.state_rebuilt_from_step {
        eprintln!("recovered: state.yaml lagged the log; rebuilt from the record of step {s}");
    }
}

async fn drive(
    rt: &Runtime,
    dir: agentforge::state_store::TaskDir,
    json: bool,
) -> Result<u8, Failure> {
    let exec = Executor::new(rt, dir);
    let (state, recovery, rolled_back) = exec.recover().map_err(failed)?;
    report_recovery(&recovery);
    if let Some(step) = rolled_back {
        eprintln!("recovered: step {step} was interrupted before it was recorded; its file changes were rolled back and it will run again");
    }
    if rt.progress && state.status == TaskStatus::Running {
        eprintln!(
            "task `{}` ({}): starting at step {} of {}",
            state.task_id,
            state.task_type,
            state.step + 1,
            state.max_steps
        );
    }
    let outcome = exec.run().await.map_err(exec_failure)?;
    let code = match outcome.status {
        TaskStatus::Complete => 0,
        TaskStatus::Escalated | TaskStatus::BudgetExhausted => 2,
        TaskStatus::Failed | TaskStatus::Running => 1,
    };
    let state = exec.dir().load_state().map_err(failed)?;
    if json {
        let v = serde_json::json!({
            "task_id": state.task_id,
            "status": state.status,
            "reason": state.status_reason,
            "steps": state.step,
            "files_modified": state.files_modified,
            "verification": state.verification,
            "tokens": state.tokens,
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
    } else {
        let status = serde_json::to_value(state.status).map_err(failed)?;
        println!(
            "task `{}`: {} after {} steps{}",
            state.task_id,
            status.as_str().unwrap_or_default(),
            state.step,
            state
                .status_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
        println!(
            "files modified: {}",
            if state.files_modified.is_empty() {
                "none".to_string()
            } else {
                state.files_modified.join(", ")
            }
        );
        println!(
            "tokens: max prompt {} (host count), provider input {} output {}",
            state.tokens.max_context_tokens, state.tokens.input_tokens, state.tokens.output_tokens
        );
    }
    Ok(code)
}
