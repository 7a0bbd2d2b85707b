//! The `agentforge` command line.
//!
//! Exit codes: 0 complete; 2 escalated or budget exhausted; 1 failed (or an error that
//! stops the run); 64 usage or configuration error; 75 the task is being run by another
//! process; 130 / 143 interrupted by SIGINT / SIGTERM (the task is resumable).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context as _, Result};
use clap::{Args, Parser, Subcommand};

use agentforge::config::{parse_kind, Config};
use agentforge::context::render_report;
use agentforge::executor::{ExecError, Executor, Runtime};
use agentforge::providers::{Provider, RetryObserver};
use agentforge::state_store::{RecordedProvider, TaskStatus, TaskStore};
use agentforge::task::TaskSpec;
use agentforge::task_git::{Started, TaskGitError, TaskRepo};
use agentforge::tools::Workspace;

mod fleet_cli;
mod learning_cli;
mod sprint;
mod trajectories;

/// Exit code for usage and configuration errors (EX_USAGE).
const EXIT_USAGE: u8 = agentforge::executor::exit::USAGE;
/// Exit code when another process holds the task's run lock (EX_TEMPFAIL: try later).
const EXIT_BUSY: u8 = agentforge::executor::exit::BUSY;

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

#[derive(Args, Debug, Default, Clone)]
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
    /// Step budget: a hard cap that wins over the task file's and the config's, and is
    /// kept by later resumes of the task (a resume with the flag sets it anew).
    #[arg(long)]
    max_steps: Option<u64>,
    /// Spending cap in US dollars (wins over `[limits] max_cost_usd`): the run stops,
    /// resumably, before the first model call made once the task's recorded cost reaches
    /// it; a resume with a higher cap continues. The model needs a price (`[pricing]`).
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<f64>,
    /// Plugin folder (repeatable).
    #[arg(long = "plugins")]
    plugins: Vec<PathBuf>,
    /// Refuse to run if any plugin fails to load.
    #[arg(long)]
    strict: bool,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Git: stash uncommitted changes to tracked files (`git stash push`) before the
    /// task's branch starts, instead of refusing to start.
    #[arg(long)]
    stash: bool,
    /// Git: no branch and no commits for this task (as `[git] enabled = false`).
    #[arg(long)]
    no_git: bool,
    /// Write the run as a session the replay provider plays back (`--replay FILE`): one
    /// line per step, the steps already recorded included.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

/// `run -p` / `--goal-file`: a task derived from a sentence (docs/prompt-runs.md).
#[derive(Args, Debug, Default)]
struct PromptFlags {
    /// What the task should achieve, in a sentence: the task spec is derived from it
    /// (type, checks, inputs), written to .agentforge/specs/<id>.yaml, shown and run.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    prompt: Option<String>,
    /// Like -p, with the goal read from FILE (its first paragraph is the goal when long).
    #[arg(long, value_name = "FILE")]
    goal_file: Option<PathBuf>,
    /// With -p / --goal-file: print the derived spec (a task file) and stop; nothing is
    /// written or run.
    #[arg(long)]
    dry_run: bool,
    /// With -p / --goal-file: a command that verifies the change (repeatable); replaces
    /// the checks discovered from the project.
    #[arg(long = "check", value_name = "CMD")]
    checks: Vec<String>,
    /// With -p / --goal-file: the task type, instead of the one the prompt's words choose.
    #[arg(long, value_name = "NAME")]
    task_type: Option<String>,
}

impl PromptFlags {
    /// The flag that gives the goal, as the user wrote it (for messages).
    fn origin(&self) -> Option<String> {
        match (&self.prompt, &self.goal_file) {
            (Some(_), _) => Some("-p".to_string()),
            (None, Some(f)) => Some(format!("--goal-file {}", f.display())),
            (None, None) => None,
        }
    }

    /// The first flag given that only a prompt run takes.
    fn prompt_only_flag(&self) -> Option<&'static str> {
        if self.dry_run {
            Some("--dry-run")
        } else if !self.checks.is_empty() {
            Some("--check")
        } else if self.task_type.is_some() {
            Some("--task-type")
        } else {
            None
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a task from a task.yaml, or a sprint from a folder holding VISION.md and PRD.md
    /// (the value loop), to the end; resumes it if it exists unchanged. With -p or
    /// --goal-file: derive the task spec from a sentence, write it under
    /// .agentforge/specs/, show it and run it.
    Run {
        /// The task spec, or the sprint's folder (not with -p / --goal-file).
        task: Option<PathBuf>,
        /// The sprint's id (default: the folder's name).
        #[arg(long)]
        sprint: Option<String>,
        #[command(flatten)]
        prompt: PromptFlags,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Resume a task or a sprint (default: the most recently active running task).
    Resume {
        /// Task or sprint id.
        task_id: Option<String>,
        /// For a sprint paused for a person: they did what was asked.
        #[arg(long)]
        confirm_pause: bool,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Show a sprint's progress: tasks, verifications, measured value, health, tokens.
    /// With --nats: the fleet's items and workers instead.
    Status {
        /// Sprint id (default: the most recent sprint).
        sprint: Option<String>,
        /// Show the fleet on this NATS JetStream server (items with state, worker, step,
        /// tokens, cost; workers with their last heartbeat).
        #[arg(long, value_name = "URL")]
        nats: Option<String>,
    },
    /// Send tasks (task.yaml) or sprints (folders) to a NATS JetStream fleet, one work
    /// item each with its workspace; `agentforge worker` runs them.
    Submit(fleet_cli::SubmitArgs),
    /// Run fleet work items from NATS JetStream: each in its own folder, on the same
    /// executor as `run`, checkpointed at every step; acked once final.
    Worker(fleet_cli::WorkerArgs),
    /// Rewrite a sprint's IMPLEMENTATION_PLAN.md, VALUE_CHECKLIST.md and DELIVERY_REPORT.md from its state.
    Render {
        /// Sprint id (default: the most recent sprint).
        sprint: Option<String>,
    },
    /// Manage tasks.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Show a task's changes: the patch of its git branch since it started.
    Diff {
        /// Task id.
        task_id: String,
        /// A summary of the files changed instead of the patch.
        #[arg(long)]
        stat: bool,
    },
    /// Undo a task's changes: the files go back to the commit of an earlier step and the
    /// task's log and state rewind with them (the undone records are archived).
    Undo {
        /// Task id.
        task_id: String,
        /// The last step to keep (default: undo the task's last changing step).
        #[arg(long)]
        to_step: Option<u64>,
    },
    /// Print the exact next prompt (system, user, tools) with a per-section token breakdown.
    Context {
        /// Task id.
        task_id: String,
    },
    /// Print what the model saw (system, user, tool names) and answered at a step of a task.
    Show {
        /// Task id.
        task_id: String,
        /// The step (default: the last recorded step).
        #[arg(long)]
        step: Option<u64>,
    },
    /// Write one self-contained HTML page of a task's run (timeline, tokens, loops, facts, checks, diff).
    Report {
        /// Task id.
        task_id: String,
        /// The HTML file to write.
        #[arg(long, value_name = "OUT")]
        html: PathBuf,
    },
    /// Group the recorded traces of enforcement into patterns and propose guards for
    /// the patterns over the threshold ([learning] in agentforge.toml).
    Learn,
    /// List the patterns learned from traces: count, tasks, first and last seen.
    Patterns,
    /// Rules learned from patterns: list, approve or reject what was proposed.
    #[command(subcommand)]
    Guards(learning_cli::GuardsCommand),
    /// List the newest traces of enforcement (guard denials, auto-reverts, loops...).
    Traces {
        /// Only this task's traces.
        #[arg(long)]
        task: Option<String>,
        /// How many (newest first).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Post-mortems of recorded runs.
    #[command(subcommand)]
    Inspect(InspectCommand),
    /// Write, list and check WASM plugins.
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Print, as JSON, the facts the extractors draw from a tool output read on stdin.
    Extract(ExtractArgs),
}

#[derive(Subcommand, Debug)]
enum PluginsCommand {
    /// Scaffold a buildable plugin crate in <DIR>/<NAME>.
    New {
        /// Plugin kind: extractor, gate, guard, context-schema or tool.
        kind: String,
        /// Crate and plugin name (lowercase letters, digits, `-`, `_`).
        name: String,
        /// Folder to create the crate in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The SDK crate (plugins/sdk of this repository; found automatically when the
        /// binary runs from a checkout).
        #[arg(long, env = "AGENTFORGE_SDK")]
        sdk: Option<PathBuf>,
    },
    /// List the plugins of the plugin folders (flags, else `[plugins] dirs`) with their status.
    List {
        /// Plugin folder, or a single plugin's folder (repeatable).
        #[arg(long = "plugins")]
        plugins: Vec<PathBuf>,
    },
    /// Validate every plugin in DIR (manifest, component, contract); exit 1 if any is broken.
    Check {
        /// A folder of plugin folders, or one plugin's folder.
        dir: PathBuf,
    },
    /// The cache of compiled folder plugins (capped; built-ins come precompiled).
    #[command(subcommand)]
    Cache(CacheCommand),
}

#[derive(Subcommand, Debug)]
enum CacheCommand {
    /// Remove every compiled component from the cache (they are recompiled on next use),
    /// and the token counts kept beside them.
    Clean,
}

#[derive(Args, Debug)]
struct ExtractArgs {
    /// The tool or check name the output comes from (plugins choose outputs by it).
    #[arg(long)]
    tool: String,
    /// Plugin folder, or a single plugin's folder (repeatable; added to `[plugins] dirs`).
    #[arg(long = "plugins")]
    plugins: Vec<PathBuf>,
    /// Only the plugins of the folders: leave out the built-in extractor plugins.
    #[arg(long)]
    no_builtin: bool,
    /// The action's result passed to the extractors.
    #[arg(long, default_value = "failure", value_parser = ["success", "failure", "partial", "skipped"])]
    result: String,
}

#[derive(Subcommand, Debug)]
enum InspectCommand {
    /// Replay a recorded action log offline and print every loop detection.
    Loops {
        /// A task id (in the workspace), or a file or folder of steps: an actions.jsonl, the
        /// minimal step format (docs/loop-steps.md), a SWE-agent .traj, an OpenHands event stream.
        source: String,
        /// The source's format; `auto` tells them apart by their content.
        #[arg(long, default_value = "auto", value_parser = ["auto", "agentforge", "steps", "swe-agent", "openhands"])]
        format: String,
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
    Failure {
        code: e.exit_code(),
        error: e.into(),
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
        // Plugin calls run on the calling worker (`block_in_place`), so guest code
        // (bounded by wasmtime to 512 KiB of stack) and the host functions it calls need
        // the room a plugin thread has.
        .thread_stack_size(8 << 20)
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
            eprintln!(
                "error: {}",
                agentforge::secrets::mask(&render_error(&f.error))
            );
            ExitCode::from(f.code)
        }
    }
}

/// The error and its causes on one line, each cause once: many of our errors (and
/// those of the crates below) already put their source in their own message, so the
/// plain `{:#}` chain would print it twice. A cause whose text is already shown is
/// left out.
fn render_error(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let g = &cli.global;
    match &cli.command {
        Command::Run {
            task,
            sprint,
            prompt,
            flags,
        } => match (task, prompt.origin()) {
            (Some(task), Some(origin)) => Err(usage(anyhow!(
                "{origin} derives a task from a sentence and `{}` is a task file or sprint folder to run: give one of them (`agentforge run {}`, or `agentforge run {origin} ...` without the file)",
                task.display(),
                task.display()
            ))),
            (_, Some(_)) if prompt.prompt.is_some() && prompt.goal_file.is_some() => {
                Err(usage(anyhow!(
                    "-p and --goal-file both give the goal: use one (-p \"TEXT\" or --goal-file FILE)"
                )))
            }
            (_, Some(origin)) if sprint.is_some() => Err(usage(anyhow!(
                "--sprint names a sprint and {origin} runs a single task: drop --sprint, or run the sprint's folder"
            ))),
            (None, Some(_)) => run_prompt(g, prompt, flags).await,
            (None, None) => Err(usage(anyhow!(
                "nothing to run: give a task file (`agentforge run task.yaml`), a sprint folder, or a goal (`agentforge run -p \"make the date parser accept ISO week dates\"`)"
            ))),
            (Some(task), None) => {
                if let Some(flag) = prompt.prompt_only_flag() {
                    return Err(usage(anyhow!(
                        "{flag} goes with -p or --goal-file (a derived task), and `{}` is run as written; drop {flag}{}",
                        task.display(),
                        if flag == "--dry-run" {
                            " (`agentforge task new FILE` creates a task without running it)"
                        } else {
                            ", or change the file"
                        }
                    )));
                }
                match sprint {
                    Some(_) if !sprint::is_sprint_input(task) => Err(usage(anyhow!(
                        "--sprint names a sprint, and {} is not a sprint folder (VISION.md and PRD.md) or a feature list (features.json)",
                        task.display()
                    ))),
                    _ if sprint::is_sprint_input(task) => {
                        sprint::run(g, task, flags, sprint.as_deref()).await
                    }
                    _ => run_task_file(g, task, flags).await,
                }
            }
        },
        Command::Resume {
            task_id: Some(id),
            confirm_pause,
            flags,
        } if sprint::exists(g, id) => sprint::resume(g, id, flags, *confirm_pause).await,
        Command::Resume { task_id, flags, .. } => {
            start_token_counting();
            let store = TaskStore::new(&workspace_root(g)?);
            let id = match task_id {
                Some(id) => id.clone(),
                None => latest_running(&store).map_err(usage)?,
            };
            if let Some(sprint) = store
                .open(&id)
                .ok()
                .and_then(|d| sprint::role_task_sprint(d.path()))
            {
                return Err(usage(anyhow!(
                    "task `{id}` is a role task of sprint `{sprint}`: it runs with the sprint's report tools and model routing; resume the sprint with `agentforge resume {sprint}`"
                )));
            }
            let recorded = store
                .open(&id)
                .map_err(usage)?
                .load_provider()
                .map_err(usage)?;
            let mut rt = runtime(g, flags, recorded.as_ref())?;
            add_mcp_tools(&mut rt).await?;
            let dir = rt.store.open(&id).map_err(usage)?;
            drive(&rt, dir, g.json, flags).await
        }
        Command::Diff { task_id, stat } => {
            let root = workspace_root(g)?;
            let store = TaskStore::new(&root);
            let dir = store.open(task_id).map_err(usage)?;
            let repo = TaskRepo::open(&root, &dir, task_id).map_err(git_failure)?;
            let patch = repo.diff(*stat).map_err(git_failure)?;
            if patch.is_empty() {
                eprintln!(
                    "task `{task_id}` has changed nothing on branch `{}`",
                    repo.record().branch
                );
            } else {
                println!("{patch}");
            }
            Ok(0)
        }
        Command::Undo { task_id, to_step } => undo(g, task_id, *to_step),
        Command::Task(TaskCommand::New { task }) => {
            let spec = TaskSpec::load(task).map_err(usage)?;
            let rt = runtime(g, &RunFlags::default(), None).or_else(|_| offline_runtime(g))?;
            check_inputs(&rt, &spec, task)?;
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
            // Repairs only with the run lock: a runner may be appending to the log now.
            let (state, recovery) = match dir.lock() {
                Ok(_lock) => {
                    // An undo a kill interrupted is finished before the log is read.
                    agentforge::task_git::finish_pending_undo(&workspace_root(g)?, &dir)
                        .map_err(git_failure)?;
                    dir.recover().map_err(failed)?
                }
                Err(agentforge::state_store::StoreError::Busy { .. }) => (
                    dir.load_state().map_err(failed)?,
                    agentforge::state_store::Recovery::default(),
                ),
                Err(e) => return Err(failed(e)),
            };
            report_recovery(&recovery);
            let spec = dir.spec().map_err(failed)?;
            let actions: Vec<std::sync::Arc<agentforge::state_store::ActionRecord>> =
                dir.recent_actions(5).map_err(failed)?;
            // What priced the task: the config with the model the task ran with.
            let (mut config, _) =
                Config::load(g.config.as_deref(), &workspace_root(g)?).map_err(usage)?;
            if let Some(r) = dir.load_provider().map_err(usage)? {
                config.provider.model = r.model;
            }
            if g.json {
                let v = serde_json::json!({"spec": spec, "state": state, "cost": cost_json(state.cost), "recent_actions": actions.iter().map(|a| serde_json::json!({"step": a.step, "action": a.action, "target": a.target, "result": a.result, "summary": a.summary, "cost_usd_micros": a.cost_usd_micros})).collect::<Vec<_>>()});
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
                println!("# cost\n{}\n", cost_line(state.cost, &config));
                println!("# last actions");
                for a in actions {
                    println!(
                        "{:>4} {:<13} {:<28} {:<8} {:>9} {}",
                        a.step,
                        a.action,
                        a.target.as_deref().unwrap_or_default(),
                        a.result,
                        a.cost_usd_micros
                            .map_or_else(|| "unknown".to_string(), |c| c.to_string()),
                        a.summary
                    );
                }
            }
            Ok(0)
        }
        Command::Inspect(InspectCommand::Loops { source, format }) => {
            inspect_loops(g, source, format)
        }
        Command::Learn => learning_cli::learn(g, g.json),
        Command::Patterns => learning_cli::patterns(g, g.json),
        Command::Guards(cmd) => learning_cli::guards(g, cmd, g.json),
        Command::Traces { task, limit } => learning_cli::traces(g, task.as_deref(), *limit, g.json),
        Command::Show { task_id, step } => trajectories::show(g, task_id, *step),
        Command::Report { task_id, html } => trajectories::report(g, task_id, html),
        Command::Context { task_id } => {
            // The counts it makes serve the next run or resume of the task too.
            start_token_counting();
            let mut rt = runtime(g, &RunFlags::default(), None).or_else(|_| offline_runtime(g))?;
            let dir = rt.store.open(task_id).map_err(usage)?;
            // A value-loop role task is offered its report tools too, as the runner does.
            if let Some(role) = agentforge::sprint::report_tools::RoleTools::load(dir.path()) {
                rt.tools.extend(role.build(
                    &agentforge::value_loop::Limits::default(),
                    agentforge::value_loop::SprintState::new("context"),
                ));
            }
            // The MCP servers' tools, as a run offers them; one that cannot be reached is
            // listed, not fatal: `context` only shows.
            let (mcp, mcp_errors) = agentforge::mcp::connect_each(&rt.config.mcp).await;
            rt.tools.extend(mcp.tools);
            let phase = dir.load_state().map(|s| s.phase).unwrap_or_default();
            let exec = Executor::new(&rt, dir);
            let mut prepared = exec.prepare().map_err(exec_failure)?;
            prepared.prompt.make_exact();
            agentforge::context::save_token_counts();
            let offered: Vec<&str> = prepared.request.tools.iter().map(|t| t.name.as_str()).collect();
            if g.json {
                let v = serde_json::json!({
                    "step": prepared.step,
                    "system": prepared.prompt.system,
                    "user": prepared.prompt.user,
                    "tools": prepared.prompt.tools,
                    "total_tokens": prepared.prompt.total_tokens,
                    "sections": prepared.prompt.sections.iter().map(|s| serde_json::json!({"name": s.name, "tokens": s.tokens, "budget": s.budget, "compressed": s.compressed})).collect::<Vec<_>>(),
                    "instructions": prepared.prompt.instructions.iter().map(|f| serde_json::json!({"path": f.path, "tokens": f.tokens(), "chars": f.chars, "shown_chars": f.shown_chars, "cut": f.cut, "left_out": f.left_out})).collect::<Vec<_>>(),
                    "instructions_skipped": prepared.instructions_skipped,
                    "mcp_tools": mcp.info.iter().map(|t| serde_json::json!({"name": t.action, "server": t.server, "offered": offered.contains(&t.action.as_str()), "tokens": agentforge::context::count_tokens(&serde_json::to_string(&t.spec).unwrap_or_default())})).collect::<Vec<_>>(),
                    "mcp_errors": mcp_errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
            } else {
                print!("{}", render_report(&prepared.prompt));
                if !rt.config.mcp.servers.is_empty() {
                    let listing = agentforge::mcp::render_listing(&mcp.info, &mcp_errors, &offered, &phase);
                    println!("\n{listing}");
                }
                // Found but not read: say why, so a missing rule is never a mystery.
                if !prepared.instructions_skipped.is_empty() {
                    println!("\n=== instruction files not shown ===");
                    for f in &prepared.instructions_skipped {
                        println!("{}: {}", f.path, f.reason);
                    }
                }
                println!();
            }
            Ok(0)
        }
        Command::Plugins(PluginsCommand::New {
            kind,
            name,
            dir,
            sdk,
        }) => plugins_new(kind, name, dir, sdk.as_deref(), g.json),
        Command::Plugins(PluginsCommand::List { plugins }) => plugins_list(g, plugins),
        Command::Plugins(PluginsCommand::Check { dir }) => plugins_check(g, dir),
        Command::Plugins(PluginsCommand::Cache(CacheCommand::Clean)) => plugins_cache_clean(g),
        Command::Extract(args) => extract_stdin(g, args),
        Command::Status {
            nats: Some(url),
            sprint,
        } => fleet_cli::status(g, url, sprint.as_deref()).await,
        Command::Status { sprint: id, .. } => sprint::status(g, id.as_deref()),
        Command::Submit(args) => fleet_cli::submit(g, args).await,
        Command::Worker(args) => fleet_cli::worker(g, args).await,
        Command::Render { sprint: id } => sprint::render(g, id.as_deref()),
    }
}

/// `agentforge run task.yaml`: creates the task (or resumes it when it exists with the
/// same spec) and runs it.
async fn run_task_file(g: &Global, task: &Path, flags: &RunFlags) -> Result<u8, Failure> {
    // The first prompt counts tokens: load the tokenizer meanwhile.
    start_token_counting();
    let spec = TaskSpec::load(task).map_err(usage)?;
    // A task that exists keeps the provider it ran with (flags still override).
    let store = TaskStore::new(&workspace_root(g)?);
    let recorded = match store.open(&spec.id) {
        Ok(dir) => dir.load_provider().map_err(usage)?,
        Err(_) => None,
    };
    let rt = runtime(g, flags, recorded.as_ref())?;
    run_spec(g, rt, spec, task, flags).await
}

/// Runs `spec`, read from the file `task`, with `rt`: the one way `run` runs a task file,
/// a written one or a derived one.
async fn run_spec(
    g: &Global,
    rt: Runtime,
    spec: TaskSpec,
    task: &Path,
    flags: &RunFlags,
) -> Result<u8, Failure> {
    run_spec_with(g, rt, spec, task, flags, None).await
}

/// [`run_spec`], with a fleet worker's hooks (`fleet_cli`): its checkpoint after each
/// recorded step, and its stop when the item's lease is lost.
async fn run_spec_with(
    g: &Global,
    mut rt: Runtime,
    spec: TaskSpec,
    task: &Path,
    flags: &RunFlags,
    fleet: Option<fleet_cli::FleetHooks>,
) -> Result<u8, Failure> {
    rt.workspace.protect(
        &std::path::absolute(task).unwrap_or(task.to_path_buf()),
        "the task file of this run",
    );
    add_mcp_tools(&mut rt).await?;
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
        Err(_) => {
            check_inputs(&rt, &spec, task)?;
            // Before the task exists: a refused start leaves nothing behind.
            refuse_dirty_tree(&rt, flags)?;
            rt.create_task(&spec).map_err(exec_failure)?
        }
    };
    drive_with(&rt, dir, g.json, flags, fleet).await
}

/// A new task's git start refuses uncommitted changes to tracked files (unless
/// `--stash`): checked before the task (or a derived spec) is written.
fn refuse_dirty_tree(rt: &Runtime, flags: &RunFlags) -> Result<(), Failure> {
    if !rt.config.git.enabled || flags.no_git || flags.stash {
        return Ok(());
    }
    agentforge::task_git::check_clean(rt.workspace.root()).map_err(git_failure)
}

/// `agentforge run -p PROMPT` / `--goal-file FILE`: derives the task spec
/// (`agentforge::prompt_task`), checks it against its task type, and either prints it
/// (`--dry-run`: nothing written) or writes it to `.agentforge/specs/<id>.yaml`, shows
/// it on stderr and runs that file as `agentforge run FILE` would.
async fn run_prompt(g: &Global, p: &PromptFlags, flags: &RunFlags) -> Result<u8, Failure> {
    use agentforge::prompt_task::{self, GoalSource, Request};
    let origin = p.origin().unwrap_or_default();
    if !p.dry_run {
        start_token_counting();
    }
    // The prompt's own problems first: they are the user's to fix before any key's.
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    let (config, _) = Config::load(g.config.as_deref(), ws.root()).map_err(usage)?;
    let request = Request {
        goal: match (&p.prompt, &p.goal_file) {
            (Some(text), _) => GoalSource::Prompt(text.clone()),
            (None, Some(file)) => GoalSource::File(file.clone()),
            (None, None) => unreachable!("run_prompt is called with a goal"),
        },
        checks: p.checks.clone(),
        task_type: p.task_type.clone(),
        config_commands: (config.commands.test.clone(), config.commands.check.clone()),
    };
    let mut derived = prompt_task::derive(&ws, &request).map_err(prompt_failure)?;
    // A dry run calls no model: it needs no key, only the task types (and the plugin
    // folders that may add some).
    let rt = if p.dry_run {
        let empty = std::env::temp_dir().join("agentforge-no-model.jsonl");
        std::fs::write(&empty, "").map_err(failed)?;
        let offline = RunFlags {
            replay: Some(empty),
            plugins: flags.plugins.clone(),
            strict: flags.strict,
            quiet: true,
            ..RunFlags::default()
        };
        runtime_with(g, &offline, None, false)?
    } else {
        runtime(g, flags, None)?
    };
    // The task type must exist, and the inputs derived must be ones it takes.
    if let Err(e) = rt.schemas.get(&derived.spec.task_type) {
        return Err(usage(match &p.task_type {
            Some(t) => anyhow!("--task-type {t}: {e}"),
            None => anyhow!(e),
        }));
    }
    check_inputs(&rt, &derived.spec, Path::new(&origin))?;
    if p.dry_run {
        if g.json {
            let v =
                serde_json::json!({"spec": derived.spec, "notes": derived.notes, "written": null});
            println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        } else {
            print!("{}", prompt_task::render(&derived, &origin));
            eprintln!("dry run: nothing written or run; the spec above is a task file for `agentforge run FILE`");
        }
        return Ok(0);
    }
    let root = rt.workspace.root().to_path_buf();
    // A tree git would refuse is refused before anything is written.
    refuse_dirty_tree(&rt, flags)?;
    let path = prompt_task::write_spec(&root, &mut derived, &origin).map_err(prompt_failure)?;
    let shown = rt.workspace.relative(&path);
    if flags.quiet {
        eprintln!("task spec: {shown}");
    } else {
        eprintln!(
            "task spec written to {shown}:\n{}",
            prompt_task::render(&derived, &origin).trim_end()
        );
    }
    // Read back from the file: the run is that of `agentforge run <file>`.
    let spec = TaskSpec::load(&path).map_err(usage)?;
    run_spec(g, rt, spec, &path, flags).await
}

/// A prompt run's error with its exit code: the disk's are I/O errors (74), never usage.
fn prompt_failure(e: agentforge::prompt_task::PromptError) -> Failure {
    match e {
        e @ agentforge::prompt_task::PromptError::Write { .. } => Failure {
            code: agentforge::executor::exit::IO,
            error: e.into(),
        },
        e => usage(e),
    }
}

fn workspace_root(g: &Global) -> Result<PathBuf, Failure> {
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    Ok(ws.root().to_path_buf())
}

/// The effective configuration of a run. `recorded` is the provider the task ran
/// with: it replaces `agentforge.toml`'s `[provider]` kind, model, base URL, key
/// variable and recording, unless this invocation says otherwise (flags,
/// `AGENTFORGE_PROVIDER` / `AGENTFORGE_MODEL` / `AGENTFORGE_REPLAY`, and the
/// provider's `*_BASE_URL` for the base URL).
fn load_config(
    g: &Global,
    flags: &RunFlags,
    ws: &Path,
    recorded: Option<&RecordedProvider>,
) -> Result<Config, Failure> {
    let (mut config, _) = Config::load(g.config.as_deref(), ws).map_err(usage)?;
    let env_set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if let Some(r) = recorded {
        if !env_set("AGENTFORGE_PROVIDER") && !env_set("AGENTFORGE_REPLAY") {
            config.provider.kind = r.kind;
        }
    }
    if let Some(p) = &flags.provider {
        config.provider.kind = parse_kind(p).map_err(|m| usage(anyhow!("--provider: {m}")))?;
    }
    if let Some(r) = &flags.replay {
        config.provider.replay = Some(r.clone());
        config.provider.kind = agentforge::providers::ProviderKind::Replay;
    }
    // The rest of the record belongs to its provider: used only when the kind stays.
    if let Some(r) = recorded.filter(|r| r.kind == config.provider.kind) {
        if !env_set("AGENTFORGE_MODEL") {
            config.provider.model = r.model.clone();
        }
        let url_var = match r.kind {
            agentforge::providers::ProviderKind::Anthropic => {
                agentforge::providers::ANTHROPIC_BASE_URL_ENV
            }
            _ => agentforge::providers::OPENAI_BASE_URL_ENV,
        };
        if r.base_url.is_some() && !env_set(url_var) {
            config.provider.base_url = r.base_url.clone();
        }
        if r.api_key_env.is_some() {
            config.provider.api_key_env = r.api_key_env.clone();
        }
        if r.replay.is_some() && flags.replay.is_none() && !env_set("AGENTFORGE_REPLAY") {
            config.provider.replay = r.replay.clone();
        }
    }
    if let Some(m) = &flags.model {
        config.provider.model = m.clone();
    }
    // `--max-steps` is not a config value: it goes to the task's state (see `runtime`).
    if flags.max_steps == Some(0) {
        return Err(usage(anyhow!("--max-steps must be at least 1")));
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

/// What `provider.yaml` keeps of a run's provider: never the key, only where it is read.
fn record_of(config: &Config) -> RecordedProvider {
    let settings = config.provider_settings();
    RecordedProvider {
        kind: config.provider.kind,
        model: config.provider.model.clone(),
        base_url: settings.explicit_base_url(&|k| std::env::var(k).ok()),
        api_key_env: config.provider.api_key_env.clone(),
        replay: config
            .provider
            .replay
            .as_ref()
            .filter(|_| config.provider.kind == agentforge::providers::ProviderKind::Replay)
            .map(|r| std::path::absolute(r).unwrap_or_else(|_| r.clone())),
    }
}

/// Starts the tokenizer's load on its own thread, and uses the counts earlier processes
/// made (a file in the compiled-plugin cache folder), so the first prompt of a run or
/// resume can go out before the tokenizer is there.
fn start_token_counting() {
    agentforge::context::preload_tokenizer();
    let cache = agentforge::plugins::default_cache_dir();
    if std::fs::create_dir_all(&cache).is_ok() {
        agentforge::context::use_token_count_file(&cache.join("token-counts-o200k.bin"));
    }
}

fn runtime(
    g: &Global,
    flags: &RunFlags,
    recorded: Option<&RecordedProvider>,
) -> Result<Runtime, Failure> {
    runtime_with(g, flags, recorded, true)
}

/// [`runtime`], with the workspace's write probe only when `probe` (a dry run writes
/// nothing, not even the probe's `.agentforge/`).
fn runtime_with(
    g: &Global,
    flags: &RunFlags,
    recorded: Option<&RecordedProvider>,
    probe: bool,
) -> Result<Runtime, Failure> {
    let ws = Workspace::new(&g.workspace)
        .with_context(|| format!("workspace {}", g.workspace.display()))
        .map_err(usage)?;
    if probe {
        check_writable(ws.root())?;
    }
    let config = load_config(g, flags, ws.root(), recorded)?;
    let mut provider = Provider::from_settings(&config.provider_settings()).map_err(usage)?;
    if !flags.quiet {
        // Retries are announced as they happen rather than waited out in silence.
        provider.on_retry(RetryObserver::new(|n| eprintln!("retry: {n}")));
    }
    let mut rt = Runtime::new(ws, config, provider);
    if let Some(c) = &g.config {
        let c = std::path::absolute(c).unwrap_or(c.clone());
        rt.workspace
            .protect(&c, "the AgentForge configuration of this run");
    }
    rt.progress = !flags.quiet;
    rt.max_steps = flags.max_steps;
    rt.max_cost = match flags.max_cost_usd.or(rt.config.limits.max_cost_usd) {
        Some(usd) => Some(
            agentforge::config::parse_cap(usd)
                .map_err(|m| usage(anyhow!("--max-cost-usd: {m}")))?,
        ),
        None => None,
    };
    // A cap on a model with no price is refused before any task is made or resumed.
    rt.cost_cap().map_err(|e| usage(anyhow!(e)))?;
    rt.record_session = flags
        .record
        .as_deref()
        .map(agentforge::session::SessionRecorder::new);
    load_plugins(&mut rt, flags.strict)?;
    Ok(rt)
}

/// Starts the `[mcp.servers]` and offers their tools (a server that does not start, or
/// a tool named like another, is a configuration error).
async fn add_mcp_tools(rt: &mut Runtime) -> Result<(), Failure> {
    if rt.config.mcp.servers.is_empty() {
        return Ok(());
    }
    let (tools, notes) = agentforge::mcp::connect(&rt.config.mcp)
        .await
        .map_err(usage)?;
    if rt.progress {
        for n in notes {
            eprintln!("mcp: {n}");
        }
    }
    for t in tools {
        if let Some(other) = rt.tools.iter().find(|o| o.name() == t.name()) {
            return Err(usage(anyhow!(
                "tool `{}` of {} is also defined by {}; rename one",
                t.name(),
                t.source(),
                other.source()
            )));
        }
        rt.tools.push(t);
    }
    Ok(())
}

/// Checks the task's `inputs:` against the input schema its task type declares (when
/// it declares one); the error names the task file.
fn check_inputs(rt: &Runtime, spec: &TaskSpec, file: &Path) -> Result<(), Failure> {
    // An unknown task type is reported (with the known ones) by `create_task`.
    let Ok(schema) = rt.schemas.get(&spec.task_type) else {
        return Ok(());
    };
    if let Some(input_schema) = schema.input_schema() {
        spec.check_inputs(&file.display().to_string(), &input_schema)
            .map_err(usage)?;
    }
    Ok(())
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
    let mut rt = Runtime::new(ws, config, provider);
    // The task types live in plugins: `task new` and `context` need them too.
    load_plugins(&mut rt, false)?;
    Ok(rt)
}

/// Loads the built-in plugins and those of every plugin folder (flags and `[plugins]
/// dirs`, relative to the workspace) into the runtime. A broken plugin is reported and
/// skipped, or fatal with `--strict` (which also loads now what would load on first use);
/// two plugins claiming one task type, tool or check is always an error naming both.
fn load_plugins(rt: &mut Runtime, strict: bool) -> Result<(), Failure> {
    let dirs = rt.config.plugins.dirs.clone();
    let mut errors = rt.load_plugins(&dirs).map_err(|e| usage(anyhow!(e)))?;
    for e in &errors {
        eprintln!("plugin error: {e}");
    }
    // Extractors, gates and guards load on first use; `--strict` wants every broken
    // plugin known before the run starts (their errors are printed as they load).
    if strict {
        errors.extend(rt.load_deferred_plugins().map_err(|e| usage(anyhow!(e)))?);
    }
    if strict && !errors.is_empty() {
        return Err(usage(anyhow!(
            "{} plugin(s) failed to load (--strict)",
            errors.len()
        )));
    }
    Ok(())
}

fn check_writable(root: &Path) -> Result<(), Failure> {
    agentforge::state_store::probe_writable(root)
        .with_context(|| {
            format!(
                "workspace {} is not writable (tasks are stored in {})",
                root.display(),
                root.join(".agentforge").display()
            )
        })
        .map_err(usage)
}

fn latest_running(store: &TaskStore) -> Result<String> {
    let mut best: Option<(std::time::SystemTime, String)> = None;
    for id in store.list()? {
        let dir = store.open(&id)?;
        let state = dir.load_state()?;
        // A sprint's role task runs only inside its sprint (`resume <sprint-id>`).
        if state.status != TaskStatus::Running || sprint::role_task_sprint(dir.path()).is_some() {
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

/// `inspect loops`: the steps of a task's log or of a file/folder in any format the
/// importer reads (`agentforge_loops::import`), replayed through the detector.
fn inspect_loops(g: &Global, source: &str, format: &str) -> Result<u8, Failure> {
    use agentforge::loops::import::{self, Format};
    let format: Option<Format> = match format {
        "auto" => None,
        name => Some(name.parse().map_err(usage)?),
    };
    let path = Path::new(source);
    let read_path = || -> Result<_, Failure> {
        let imported = import::import(path, format).map_err(usage)?;
        for note in &imported.notes {
            eprintln!("note: {note}");
        }
        Ok((imported.steps, imported.format))
    };
    // A file is read as one; a task id wins over a folder of the same name.
    let task =
        (!path.is_file()).then(|| workspace_root(g).map(|root| TaskStore::new(&root).open(source)));
    let (steps, label) = match task {
        None => read_path()?,
        Some(Ok(Ok(dir))) => {
            let records = dir.read_actions().map_err(failed)?;
            (records.iter().map(Into::into).collect(), Format::AgentForge)
        }
        Some(_) if path.is_dir() => read_path()?,
        Some(Err(e)) => return Err(e),
        Some(Ok(Err(e))) => return Err(usage(e)),
    };
    let (config, _) = Config::load(g.config.as_deref(), &g.workspace).map_err(usage)?;
    let detector = agentforge::loops::LoopDetector::new(config.loops.thresholds.clone());
    let found = detector.replay(&steps);
    if g.json {
        println!("{}", serde_json::to_string_pretty(&found).map_err(failed)?);
    } else {
        println!("{} steps replayed ({label})", steps.len());
        print!("{}", agentforge::loops::render_text(&found));
    }
    Ok(0)
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
    for step in &r.trajectories_removed {
        eprintln!("recovered: removed the trajectory of step {step}, which was never recorded (it runs again)");
    }
    if r.working_memory_cleared {
        eprintln!(
            "recovered: working_memory.yaml lagged the log (a power cut); cleared, so the model reads again what it needs"
        );
    }
}

/// A task git error with its exit code: what the person must fix is a usage error.
fn git_failure(e: TaskGitError) -> Failure {
    match e {
        TaskGitError::Git(_) | TaskGitError::Store(_) => failed(e),
        _ => usage(e),
    }
}

/// The task's run lock; busy (exit 75) when another process runs it.
fn lock_task(
    dir: &agentforge::state_store::TaskDir,
) -> Result<agentforge::state_store::TaskLock, Failure> {
    dir.lock().map_err(|e| match e {
        e @ agentforge::state_store::StoreError::Busy { .. } => Failure {
            code: EXIT_BUSY,
            error: e.into(),
        },
        e => failed(e),
    })
}

/// `agentforge undo`: with the task's lock, its files back to an earlier step's commit
/// and its log and state rewound with them.
fn undo(g: &Global, task_id: &str, to_step: Option<u64>) -> Result<u8, Failure> {
    let root = workspace_root(g)?;
    let store = TaskStore::new(&root);
    let dir = store.open(task_id).map_err(usage)?;
    let _lock = lock_task(&dir)?;
    agentforge::task_git::finish_pending_undo(&root, &dir).map_err(git_failure)?;
    let (_, recovery) = dir.recover().map_err(failed)?;
    report_recovery(&recovery);
    let repo = TaskRepo::open(&root, &dir, task_id).map_err(git_failure)?;
    let branch = repo.record().branch.clone();
    let (step, commit) = repo.undo(to_step).map_err(git_failure)?;
    let short = &commit[..commit.len().min(10)];
    if g.json {
        println!(
            "{}",
            serde_json::json!({"task_id": task_id, "step": step, "commit": commit, "branch": branch})
        );
    } else {
        println!(
            "task `{task_id}` is back after step {step}: branch `{branch}` at {short}; the undone records are in its folder (actions.undone-*.jsonl); `agentforge resume {task_id}` continues from step {}",
            step + 1
        );
    }
    Ok(0)
}

async fn drive(
    rt: &Runtime,
    dir: agentforge::state_store::TaskDir,
    json: bool,
    flags: &RunFlags,
) -> Result<u8, Failure> {
    drive_with(rt, dir, json, flags, None).await
}

/// [`drive`], with a fleet worker's hooks: its checkpoint runs after each recorded step
/// (after git's commit, so the checkpoint holds it), and its stop ends the run as a
/// signal would.
async fn drive_with(
    rt: &Runtime,
    dir: agentforge::state_store::TaskDir,
    json: bool,
    flags: &RunFlags,
    fleet: Option<fleet_cli::FleetHooks>,
) -> Result<u8, Failure> {
    // One process per task: held until this process exits (the OS drops it on death).
    let _lock = lock_task(&dir)?;
    let leftover = dir.path().join(agentforge::commands::GROUPS_FILE);
    for pgid in agentforge::commands::kill_leftover_groups(&leftover) {
        eprintln!("recovered: killed process group {pgid}, a command left running by an earlier run of this task");
    }
    dir.save_provider(&record_of(&rt.config)).map_err(failed)?;
    let root = rt.workspace.root().to_path_buf();
    // An undo a kill interrupted is finished before anything reads the task.
    agentforge::task_git::finish_pending_undo(&root, &dir).map_err(git_failure)?;
    let mut exec = Executor::new(rt, dir.clone());
    let (_, recovery, rolled_back) = exec.recover().map_err(failed)?;
    report_recovery(&recovery);
    if let Some(step) = rolled_back {
        eprintln!("recovered: step {step} was interrupted before it was recorded; its file changes were rolled back and it will run again");
    }
    // The budgets first: a task they stopped and now let go on is running when git
    // starts its branch.
    if let Some(n) = rt.max_steps {
        exec.set_max_steps(n).map_err(exec_failure)?;
    }
    // Refused here when the model has no price; a task the cap stopped runs again under
    // a higher one. Returns the state as the run starts from it.
    let state = exec.set_max_cost().map_err(exec_failure)?;
    let git_on = rt.config.git.enabled && !flags.no_git;
    let mut branch = None;
    let (checkpoint, fleet_stop) = match fleet {
        Some(h) => (Some(h.after_step), Some(h.stop)),
        None => (None, None),
    };
    let mut git_hook: Option<agentforge::executor::AfterStep<'_>> = None;
    if git_on && state.status == TaskStatus::Running {
        if let Some((repo, started)) =
            TaskRepo::start(&root, &dir, &state, flags.stash).map_err(git_failure)?
        {
            match &started {
                Started::Branched {
                    branch,
                    base,
                    stash,
                } => {
                    eprintln!(
                        "git: task `{}` works on branch `{branch}` (from {}), one commit per step that changes files{}",
                        state.task_id,
                        &base[..base.len().min(10)],
                        stash
                            .as_ref()
                            .map(|m| format!("; your changes are stashed as \"{m}\" (`git stash list`)"))
                            .unwrap_or_default()
                    );
                }
                Started::Resumed { branch, committed } => {
                    if let Some(c) = committed {
                        eprintln!("git: committed changes left uncommitted by an interrupted run on `{branch}` ({})", &c[..c.len().min(10)]);
                    }
                }
            }
            branch = Some(repo.record().branch.clone());
            let progress = rt.progress;
            git_hook = Some(Box::new(move |record| {
                let commit = repo.commit_step(record).map_err(|e| e.to_string())?;
                if let (true, Some(c)) = (progress, commit) {
                    eprintln!(
                        "           git: step {} is commit {}",
                        record.step,
                        &c[..c.len().min(10)]
                    );
                }
                Ok(())
            }));
        }
    }
    match (git_hook, checkpoint) {
        (Some(git), Some(cp)) => {
            exec = exec.with_after_step(Box::new(move |record| {
                git(record)?;
                cp(record)
            }))
        }
        (Some(git), None) => exec = exec.with_after_step(git),
        (None, Some(cp)) => exec = exec.with_after_step(Box::new(move |record| cp(record))),
        (None, None) => {}
    }
    if let Some(recorder) = &rt.record_session {
        trajectories::begin_recording(recorder, exec.dir())?;
    }
    if rt.progress && state.status == TaskStatus::Running {
        eprintln!(
            "task `{}` ({}): starting at step {} of {} with {} model `{}`{}",
            state.task_id,
            state.task_type,
            state.step + 1,
            state.max_steps,
            rt.config.provider.kind,
            rt.config.provider.model,
            rt.max_cost
                .map(|cap| format!("; cost cap {cap}, {} spent", state.cost.unwrap_or_default()))
                .unwrap_or_default()
        );
    }
    let stop = agentforge::executor::StopRequest::new();
    let signal = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let watcher = tokio::spawn(watch_signals(
        stop.clone(),
        signal.clone(),
        state.task_id.clone(),
    ));
    // A fleet item whose lease is lost stops as on a signal (its step in flight is
    // dropped and rolled back).
    let lease_watch = fleet_stop.map(|mut lost| {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !*lost.borrow_and_update() {
                if lost.changed().await.is_err() {
                    return;
                }
            }
            stop.request();
        })
    });
    let result = exec.run_until(&stop).await;
    watcher.abort();
    if let Some(w) = lease_watch {
        w.abort();
    }
    let outcome = match result {
        Err(ExecError::Interrupted { .. }) => {
            eprintln!(
                "interrupted; `agentforge resume {}` continues",
                state.task_id
            );
            let sig = signal.load(std::sync::atomic::Ordering::SeqCst);
            // 128 + the signal's number, as a shell reports a death by that signal.
            return Ok(128 + u8::try_from(sig).unwrap_or(2));
        }
        // Every recorded step is kept: say how to go on once the provider answers.
        Err(e @ ExecError::Provider(_)) => {
            let done = exec.dir().load_state().map_or(state.step, |s| s.step);
            return Err(failed(anyhow!(
                "{e}\ntask `{id}` keeps its {done} recorded step(s); continue it with `agentforge resume {id}` once the provider answers",
                id = state.task_id
            )));
        }
        other => other.map_err(exec_failure)?,
    };
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
            "cost": cost_json(state.cost),
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
        println!("cost: {}", cost_line(state.cost, &rt.config));
        if let Some(b) = branch {
            println!(
                "changes: on branch `{b}` (`agentforge diff {id}` shows them, `agentforge undo {id}` takes back the last one)",
                id = state.task_id
            );
        }
    }
    Ok(code)
}

/// A task's cost as JSON: `usd_micros` is `null` while any step's cost is unknown
/// (`priced_usd_micros` is then a lower bound).
fn cost_json(cost: Option<agentforge::cost::CostTotals>) -> serde_json::Value {
    let c = cost.unwrap_or_default();
    serde_json::json!({
        "usd_micros": c.known(),
        "priced_usd_micros": c.usd_micros,
        "unpriced_steps": c.unpriced_steps,
        "shown": c.to_string(),
    })
}

/// A task's cost for people, with what priced it: `$0.0426 (claude-sonnet-4-5 at $3 /
/// $15 per MTok, shipped default of 2026-11-26)`, or why it is unknown.
fn cost_line(cost: Option<agentforge::cost::CostTotals>, config: &Config) -> String {
    let c = cost.unwrap_or_default();
    let model = &config.provider.model;
    let table = config.price_table().unwrap_or_default();
    let priced = match table.price(model) {
        Some((key, p)) => format!(
            "`{model}` at {} in / {} out{} per MTok, {}",
            p.input_per_mtok,
            p.output_per_mtok,
            p.cached_input_per_mtok
                .map(|c| format!(" / {c} cached"))
                .unwrap_or_default(),
            if table.is_overridden(key) {
                format!("[pricing.\"{key}\"] of the config")
            } else {
                format!(
                    "shipped default of {} (override in [pricing.\"{key}\"])",
                    agentforge::cost::DEFAULT_PRICES_DATE
                )
            }
        ),
        None => format!("`{model}` has no price: add [pricing.\"{model}\"] to agentforge.toml"),
    };
    format!("{c} ({priced})")
}

/// Turns SIGINT and SIGTERM into a stop request: the first stops the run at a safe point
/// (the run then exits with 128 + the signal's number); a second one exits at once,
/// still killing the running commands' process groups. Spawned, it runs on a worker
/// thread, so it answers even while the run's own thread is busy.
///
/// The handlers are installed by this call, in the caller (inside the runtime), not
/// by the task: a task's body runs only when a worker first polls it, and a signal
/// before that would meet the default action. Must be called in the runtime's context.
#[cfg(unix)]
fn watch_signals(
    stop: agentforge::executor::StopRequest,
    got: std::sync::Arc<std::sync::atomic::AtomicI32>,
    task_id: String,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            // Without handlers the default actions apply: the process dies and resume repairs.
            return;
        };
        loop {
            let number = tokio::select! {
                _ = int.recv() => SignalKind::interrupt().as_raw_value(),
                _ = term.recv() => SignalKind::terminate().as_raw_value(),
            };
            if stop.is_requested() {
                agentforge::commands::ProcessGroups::global().kill_all();
                eprintln!(
                    "interrupted again: exiting now; `agentforge resume {task_id}` continues"
                );
                std::process::exit(128 + number);
            }
            got.store(number, std::sync::atomic::Ordering::SeqCst);
            stop.request();
            eprintln!("stopping at a safe point (press Ctrl-C again to exit at once)");
        }
    }
}

/// Off Unix only Ctrl-C is watched, with the same two-stage behaviour.
#[cfg(not(unix))]
async fn watch_signals(
    stop: agentforge::executor::StopRequest,
    got: std::sync::Arc<std::sync::atomic::AtomicI32>,
    task_id: String,
) {
    while tokio::signal::ctrl_c().await.is_ok() {
        if stop.is_requested() {
            agentforge::commands::ProcessGroups::global().kill_all();
            eprintln!("interrupted again: exiting now; `agentforge resume {task_id}` continues");
            std::process::exit(130);
        }
        got.store(2, std::sync::atomic::Ordering::SeqCst);
        stop.request();
        eprintln!("stopping at a safe point (press Ctrl-C again to exit at once)");
    }
}

// ---------------------------------------------------------------------------------------
// `plugins new | list | check` and `extract`: authoring and inspecting plugins.

/// `plugins new <kind> <name>`: scaffolds a plugin crate.
fn plugins_new(
    kind: &str,
    name: &str,
    dir: &Path,
    sdk: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    use agentforge::scaffold::{self, ScaffoldError};
    // Kind and name first: a clear error before looking for the SDK.
    scaffold::check_kind(kind).map_err(usage)?;
    scaffold::check_name(name).map_err(usage)?;
    let sdk = match sdk {
        Some(p) => p.to_path_buf(),
        None => find_sdk().ok_or_else(|| {
            usage(anyhow!(
                "cannot find the plugin SDK (plugins/sdk of the AgentForge repository); give it with --sdk PATH"
            ))
        })?,
    };
    let plugin = scaffold::NewPlugin {
        kind: kind.to_string(),
        name: name.to_string(),
        sdk,
    };
    let created = scaffold::create(dir, &plugin).map_err(|e| match e {
        ScaffoldError::Io { .. } => failed(e),
        other => usage(other),
    })?;
    if json {
        let v = serde_json::json!({
            "name": name,
            "kind": kind,
            "dir": created.dir,
            "files": created.files,
            "sdk": created.sdk_path,
            "component": created.component,
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
    } else {
        println!(
            "created {kind} plugin `{name}` in {} (SDK at {})",
            created.dir.display(),
            created.sdk_path.display()
        );
        for f in &created.files {
            println!("  {}", f.display());
        }
        for line in scaffold::next_steps(kind, &created.dir, &created.component) {
            println!("{line}");
        }
    }
    Ok(0)
}

/// The SDK of the checkout this binary was built from, or one above the executable.
fn find_sdk() -> Option<PathBuf> {
    let mut candidates = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/sdk")];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|a| a.join("plugins/sdk")));
    }
    candidates
        .into_iter()
        .find(|c| c.join("Cargo.toml").is_file())
}

/// One plugin folder as `plugins list` / `check` see it.
struct PluginRow {
    folder: PathBuf,
    /// From the manifest, when it is readable TOML.
    name: Option<String>,
    kind: Option<String>,
    version: Option<String>,
    description: Option<String>,
    capabilities: Vec<String>,
    loaded: Option<agentforge::plugins::LoadedPlugin>,
    error: Option<String>,
    /// A built-in plugin (embedded in the host) rather than one of a folder.
    builtin: bool,
    /// A built-in replaced by a folder's plugin of the same name.
    replaced: bool,
}

impl PluginRow {
    /// A row for a built-in plugin; `replaced` when a folder has one of the same name.
    fn builtin(p: agentforge::plugins::LoadedPlugin, replaced: bool) -> PluginRow {
        let m = &p.manifest;
        let capabilities = m
            .capabilities
            .names()
            .into_iter()
            .map(str::to_string)
            .collect();
        PluginRow {
            folder: PathBuf::from("built-in"),
            name: Some(m.name.clone()),
            kind: Some(m.kind_name.clone()),
            version: Some(m.version.clone()),
            description: Some(m.description.clone()),
            capabilities,
            loaded: Some(p),
            error: None,
            builtin: true,
            replaced,
        }
    }

    fn status(&self) -> &'static str {
        match (&self.loaded, self.replaced) {
            (_, true) => "replaced",
            (Some(_), false) => "loaded",
            (None, _) => "error",
        }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "kind": self.kind,
            "version": self.version,
            "description": self.description,
            "folder": self.folder,
            "capabilities": self.capabilities,
            "status": self.status(),
            "source": if self.builtin { "built-in" } else { "folder" },
            "error": self.error,
            "compiled": self.loaded.as_ref().map(|p| p.compiled),
            "api": self.loaded.as_ref().map(|p| p.manifest.api.clone()),
            "provides": self.loaded.as_ref().map(|p| p.claims()),
            "load_ms": self.loaded.as_ref().map(|p| p.load_time.as_secs_f64() * 1e3),
        })
    }
}

/// The plugin folders of `dir`: `dir` itself when it holds a `plugin.toml`, else its
/// sub-folders that do, in name order.
fn plugin_folders(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    if dir.join("plugin.toml").is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let rd = std::fs::read_dir(dir)
        .map_err(|e| usage(anyhow!("plugin folder {}: {e}", dir.display())))?;
    let mut folders: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("plugin.toml").is_file())
        .collect();
    folders.sort();
    Ok(folders)
}

/// Loads every plugin folder of `dirs`, one row each (broken ones with their error; a
/// second plugin with a name already loaded is an error, as in a run).
fn load_rows(dirs: &[PathBuf], cache: &PluginCache) -> Result<Vec<PluginRow>, Failure> {
    let mut rows: Vec<PluginRow> = Vec::new();
    for dir in dirs {
        for folder in plugin_folders(dir)? {
            // Lenient read for the columns, even when the manifest does not validate.
            let table = agentforge::plugins::manifest_table(&folder);
            let field = |k: &str| {
                table
                    .as_ref()
                    .and_then(|t| t.get(k))
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            };
            let capabilities = table
                .as_ref()
                .and_then(|t| t.get("capabilities"))
                .and_then(|c| c.as_table())
                .map(|c| c.keys().cloned().collect())
                .unwrap_or_default();
            let mut row = PluginRow {
                name: field("name"),
                kind: field("kind"),
                version: field("version"),
                description: field("description"),
                capabilities,
                folder: folder.clone(),
                loaded: None,
                error: None,
                builtin: false,
                replaced: false,
            };
            match agentforge::plugins::load_plugin_with(&folder, &cache.path, &cache.opts) {
                Ok(p) => {
                    for note in &p.notes {
                        eprintln!("plugin {}: {note}", p.name());
                    }
                    let first = rows
                        .iter()
                        .find(|r| r.loaded.as_ref().is_some_and(|q| q.name() == p.name()));
                    match first {
                        Some(q) => {
                            row.error = Some(
                                agentforge::plugins::PluginLoadError::Duplicate {
                                    plugin: p.name().to_string(),
                                    first: q.folder.clone(),
                                    second: folder.clone(),
                                }
                                .to_string(),
                            )
                        }
                        None => row.loaded = Some(p),
                    }
                }
                Err(e) => row.error = Some(e.to_string()),
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Where `list`, `check` and `extract` cache compiled components: the same cache as runs
/// (`agentforge::plugins::default_cache_dir`), so a run after a check starts warm.
struct PluginCache {
    path: PathBuf,
    /// The project's workspace and `[plugins]` config (grants, ceilings, config), so
    /// the authoring commands load plugins as a run would.
    opts: agentforge::plugins::LoadOptions,
}

impl PluginCache {
    fn for_workspace(g: &Global) -> PluginCache {
        // A broken config is reported by `plugin_dirs`, which every caller runs first.
        let config = Config::load(g.config.as_deref(), &g.workspace)
            .map(|(c, _)| c.plugins)
            .unwrap_or_default();
        PluginCache {
            path: agentforge::plugins::default_cache_dir(),
            opts: agentforge::plugins::LoadOptions {
                workspace: Workspace::new(&g.workspace).ok(),
                config,
                checks: Default::default(),
            },
        }
    }
}

/// Plugin folders from `[plugins] dirs` (relative to the workspace) and then `flags`
/// (relative to the current directory).
fn plugin_dirs(g: &Global, flags: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let (config, _) = Config::load(g.config.as_deref(), &g.workspace).map_err(usage)?;
    let mut dirs: Vec<PathBuf> = config
        .plugins
        .dirs
        .iter()
        .map(|d| {
            if d.is_absolute() {
                d.clone()
            } else {
                g.workspace.join(d)
            }
        })
        .collect();
    dirs.extend(flags.iter().cloned());
    for d in &dirs {
        if !d.is_dir() {
            return Err(usage(anyhow!(
                "plugin folder {} does not exist",
                d.display()
            )));
        }
    }
    Ok(dirs)
}

/// `plugins list`: every plugin with its status; exit 0 (use `check` to fail on errors).
fn plugins_list(g: &Global, flags: &[PathBuf]) -> Result<u8, Failure> {
    let dirs = plugin_dirs(g, flags)?;
    let cache = PluginCache::for_workspace(g);
    let mut rows = load_rows(&dirs, &cache)?;
    // The built-ins every run loads, after the folders' plugins (which replace them).
    let (builtin, errors) = agentforge::plugins::load_builtin(
        agentforge_builtins::BUILTIN_PLUGINS,
        &cache.path,
        &cache.opts,
    );
    for e in &errors {
        eprintln!("plugin error: built-in: {e}");
    }
    for p in builtin {
        let replaced = rows
            .iter()
            .any(|r| r.loaded.as_ref().is_some_and(|q| q.name() == p.name()));
        rows.push(PluginRow::builtin(p, replaced));
    }
    if g.json {
        let v: Vec<_> = rows.iter().map(PluginRow::json).collect();
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        return Ok(0);
    }
    println!(
        "{:<24} {:<14} {:<9} {:<8} {:<14} {:<24} SOURCE",
        "NAME", "KIND", "VERSION", "STATUS", "CAPABILITIES", "PROVIDES"
    );
    for r in &rows {
        let caps = if r.capabilities.is_empty() {
            "none".to_string()
        } else {
            r.capabilities.join(",")
        };
        let provides = r
            .loaded
            .as_ref()
            .map(|p| p.claims().join(","))
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "-".to_string());
        println!(
            "{:<24} {:<14} {:<9} {:<8} {:<14} {:<24} {}",
            r.name.as_deref().unwrap_or("?"),
            r.kind.as_deref().unwrap_or("?"),
            r.version.as_deref().unwrap_or("?"),
            r.status(),
            caps,
            provides,
            r.folder.display()
        );
        if let Some(e) = &r.error {
            println!("  error: {e}");
        }
    }
    if dirs.is_empty() {
        println!(
            "(no plugin folders: give --plugins DIR or set [plugins] dirs in agentforge.toml)"
        );
    }
    Ok(0)
}

/// `plugins check DIR`: loads every plugin (manifest, component, contract, first call);
/// exit 0 when all load, 1 when any is broken or there is none.
/// `agentforge plugins cache clean`: empties the compiled-plugin cache runs use.
fn plugins_cache_clean(g: &Global) -> Result<u8, Failure> {
    let dir = agentforge::plugins::default_cache_dir();
    let (entries, bytes) = agentforge::plugins::clean_cache(&dir).map_err(|e| {
        failed(anyhow!(
            "cannot clean the plugin cache {}: {e}",
            dir.display()
        ))
    })?;
    if g.json {
        let v = serde_json::json!({"cache": dir, "removed": entries, "bytes": bytes});
        println!("{v}");
    } else {
        println!(
            "removed {entries} compiled component(s) and any kept token counts, {:.1} MiB, from {}",
            bytes as f64 / (1024.0 * 1024.0),
            dir.display()
        );
    }
    Ok(0)
}

fn plugins_check(g: &Global, dir: &Path) -> Result<u8, Failure> {
    if !dir.is_dir() {
        return Err(usage(anyhow!(
            "plugin folder {} does not exist",
            dir.display()
        )));
    }
    let cache = PluginCache::for_workspace(g);
    let rows = load_rows(&[dir.to_path_buf()], &cache)?;
    let broken = rows.iter().filter(|r| r.error.is_some()).count();
    let code = if broken > 0 || rows.is_empty() { 1 } else { 0 };
    if g.json {
        let v = serde_json::json!({
            "dir": dir,
            "ok": rows.len() - broken,
            "broken": broken,
            "plugins": rows.iter().map(PluginRow::json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
        return Ok(code);
    }
    for r in &rows {
        match (&r.loaded, &r.error) {
            (Some(p), _) => println!(
                "ok      {} {} ({}) in {}",
                p.name(),
                p.manifest.version,
                p.manifest.kind_name,
                r.folder.display()
            ),
            (None, Some(e)) => println!("broken  {}: {e}", r.folder.display()),
            (None, None) => {}
        }
    }
    if rows.is_empty() {
        println!(
            "no plugins in {} (a plugin is a folder with a plugin.toml)",
            dir.display()
        );
    } else {
        println!(
            "{} plugin(s) checked: {} ok, {broken} broken",
            rows.len(),
            rows.len() - broken
        );
    }
    Ok(code)
}

/// `extract --tool NAME < output`: the facts the native rules and the extractor plugins
/// draw from stdin, as a JSON array, deduplicated as in a run. Exit 1 if a plugin failed
/// to load or to run (the facts of the others are still printed).
fn extract_stdin(g: &Global, args: &ExtractArgs) -> Result<u8, Failure> {
    use agentforge::state_store::{ActionResult, Fact};
    use std::io::Read as _;

    let result = match args.result.as_str() {
        "success" => ActionResult::Success,
        "partial" => ActionResult::Partial,
        "skipped" => ActionResult::Skipped,
        _ => ActionResult::Failure,
    };
    let dirs = plugin_dirs(g, &args.plugins)?;
    if args.no_builtin && dirs.is_empty() {
        return Err(usage(anyhow!(
            "--no-builtin with no plugin folder: nothing would read the output; give --plugins DIR"
        )));
    }
    let cache = PluginCache::for_workspace(g);
    let rows = load_rows(&dirs, &cache)?;
    let mut code = 0;
    for r in &rows {
        if let Some(e) = &r.error {
            eprintln!("plugin error: {e}");
            code = 1;
        }
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .context("cannot read the tool output from stdin")
        .map_err(failed)?;
    let output = String::from_utf8_lossy(&bytes);
    let (tool, step) = (args.tool.as_str(), 1);

    let mut facts: Vec<(String, Fact)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |extractor: &str, new: Vec<Fact>| {
        for f in new {
            // As in a run: a plugin and a native rule set may both know a tool.
            if seen.insert((f.category, f.statement.clone())) {
                facts.push((extractor.to_string(), f));
            }
        }
    };
    if !args.no_builtin {
        // The built-in extractor plugins, unless a folder has a plugin of the same name.
        let (builtin, errors) = agentforge::plugins::load_builtin(
            agentforge_builtins::BUILTIN_PLUGINS,
            &cache.path,
            &cache.opts,
        );
        for e in &errors {
            eprintln!("plugin error: built-in: {e}");
            code = 1;
        }
        let folder_names: Vec<&str> = rows.iter().filter_map(|r| r.name.as_deref()).collect();
        for x in builtin
            .iter()
            .filter(|p| !folder_names.contains(&p.name()))
            .filter_map(|p| p.wasm_extractor())
            .filter(|x| x.handles(tool))
        {
            match x.try_extract(tool, &output, result, step) {
                Ok(f) => add(agentforge::extract::FactExtractor::name(&x), f),
                Err(e) => {
                    eprintln!("plugin error: {e}");
                    code = 1;
                }
            }
        }
    }
    let mut handled = 0;
    for p in rows.iter().filter_map(|r| r.loaded.as_ref()) {
        let Some(x) = p.wasm_extractor() else {
            eprintln!(
                "note: plugin `{}` is a {}, not an extractor",
                p.name(),
                p.manifest.kind_name
            );
            continue;
        };
        if !x.handles(tool) {
            continue;
        }
        handled += 1;
        match x.try_extract(tool, &output, result, step) {
            Ok(f) => add(p.name(), f),
            Err(e) => {
                eprintln!("error: {e}");
                code = 1;
            }
        }
    }
    if !rows.is_empty() && handled == 0 {
        eprintln!("note: no loaded extractor plugin handles tool `{tool}`");
    }
    if facts.is_empty() {
        eprintln!("note: no rule matched; a run would record only the generic result fact");
    }
    let v: Vec<_> = facts
        .iter()
        .map(|(extractor, f)| {
            serde_json::json!({
                "category": f.category,
                "statement": f.statement,
                "confidence": f.confidence,
                "source": f.source,
                "extractor": extractor,
            })
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
    Ok(code)
}
