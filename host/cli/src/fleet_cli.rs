//! `agentforge submit`, `agentforge worker` and `agentforge status --nats`: the fleet on
//! NATS JetStream (`agentforge-fleet`; docs/scale-out.md). The worker runs each item
//! with the same path as `agentforge run` (`run_spec_with` / `sprint::run`), adding only
//! the fleet's checkpoint after each recorded step and a stop on a lost lease.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;

use agentforge::fleet::worker::{Finished, ItemRunner, Job, RunFuture, StepDone, WorkerOptions};
use agentforge::fleet::{Fleet, FleetError, FleetOptions, ItemKind, ProgressEvent};
use agentforge::state_store::{ActionRecord, TaskStore};
use agentforge::task::TaskSpec;

use super::{failed, usage, Failure, Global, RunFlags};

/// The fleet's checkpoint, run after each recorded step (shared, unlike the executor's
/// boxed hook, so it can be chained after git's).
pub(crate) type Checkpoint = Arc<dyn Fn(&ActionRecord) -> Result<(), String> + Send + Sync>;

/// The fleet's hooks on one run: the checkpoint after each recorded step, and the stop
/// that becomes `true` when the item's lease is lost.
pub(crate) struct FleetHooks {
    /// Runs after each recorded step (after git's commit); an `Err` stops the run.
    pub after_step: Checkpoint,
    /// `true`: stop now.
    pub stop: tokio::sync::watch::Receiver<bool>,
}

/// `agentforge submit`.
#[derive(Args, Debug)]
pub(crate) struct SubmitArgs {
    /// Task files (task.yaml) and sprint folders (VISION.md and PRD.md, or a
    /// features.json), each sent as one work item with the workspace (-w) it runs in.
    #[arg(required = true, value_name = "TASK_OR_SPRINT")]
    inputs: Vec<PathBuf>,
    #[command(flatten)]
    nats: NatsArgs,
}

/// `agentforge worker`.
#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    nats: NatsArgs,
    /// How many items this worker runs at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// The folder items run in (`<DIR>/<item-id>/`, kept after the item ends).
    #[arg(long, value_name = "DIR", default_value = "agentforge-worker")]
    dir: PathBuf,
    /// Seconds without an in-progress ack after which an item is redelivered to another
    /// worker; also its lease's time to live.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    ack_wait: u64,
    /// The worker's id in the fleet (default: <host>-<pid>).
    #[arg(long)]
    id: Option<String>,
    /// As for `run`, applied to every item this worker runs (the worker's own provider,
    /// model, plugins...; an item's `agentforge.toml` applies where they are silent).
    #[command(flatten)]
    run: RunFlags,
}

/// What reaches the fleet.
#[derive(Args, Debug)]
pub(crate) struct NatsArgs {
    /// The NATS server(s) with JetStream: nats://HOST:PORT, several comma-separated.
    #[arg(long, value_name = "URL", env = "AGENTFORGE_NATS")]
    nats: String,
    /// Replicas of the stream, buckets and object store when this command creates them
    /// (1 on a single node, 3 on a three-node cluster).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
}

impl NatsArgs {
    fn options(&self) -> FleetOptions {
        let mut o = FleetOptions::new(self.nats.clone());
        o.replicas = self.replicas;
        o
    }
}

/// A fleet error with the CLI's exit code: 64 for the caller's input, 74 for the local
/// disk, 1 for the server.
fn fleet_failure(e: FleetError) -> Failure {
    let code = match &e {
        e if e.is_usage() => super::EXIT_USAGE,
        FleetError::Io { .. } => agentforge::executor::exit::IO,
        _ => 1,
    };
    Failure {
        code,
        error: e.into(),
    }
}

/// `agentforge submit INPUT... --nats URL`.
pub(crate) async fn submit(g: &Global, args: &SubmitArgs) -> Result<u8, Failure> {
    let root = super::workspace_root(g)?;
    // Every input is read and checked before anything is sent.
    let mut items = Vec::new();
    for input in &args.inputs {
        items.push(read_input(&root, input)?);
    }
    let fleet = Fleet::connect(args.nats.options())
        .await
        .map_err(fleet_failure)?;
    // One archive of the workspace serves every item of this call.
    let archive = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || agentforge::fleet::archive::pack(&root))
            .await
            .map_err(failed)?
            .map_err(fleet_failure)?
    };
    let mut sent = Vec::new();
    for (id, kind, input) in items {
        let seq = fleet
            .submit(&id, kind.clone(), archive.clone())
            .await
            .map_err(|e| {
                let f = fleet_failure(e);
                Failure {
                    code: f.code,
                    error: f.error.context(format!(
                        "submit {}{}",
                        input.display(),
                        if sent.is_empty() {
                            String::new()
                        } else {
                            format!(" (submitted before it: {})", sent.join(", "))
                        }
                    )),
                }
            })?;
        if !g.json {
            println!(
                "submitted {} `{id}` from {} (stream sequence {seq}, workspace {} bytes)",
                match kind {
                    ItemKind::Task { .. } => "task",
                    ItemKind::Sprint { .. } => "sprint",
                },
                input.display(),
                archive.len()
            );
        }
        sent.push(id);
    }
    if g.json {
        let v = serde_json::json!({"submitted": sent, "workspace_bytes": archive.len()});
        println!("{}", serde_json::to_string_pretty(&v).map_err(failed)?);
    }
    Ok(0)
}

/// One input of `submit`: a task file (its spec checked) or a sprint folder inside the
/// workspace.
fn read_input(root: &Path, input: &Path) -> Result<(String, ItemKind, PathBuf), Failure> {
    if !input.exists() {
        return Err(usage(anyhow!(
            "{}: no such file or folder; give a task file (task.yaml) or a sprint folder",
            input.display()
        )));
    }
    if super::sprint::is_sprint_input(input) {
        let abs = std::path::absolute(input).map_err(failed)?;
        let folder = abs.strip_prefix(root).map_err(|_| {
            usage(anyhow!(
                "{}: a sprint folder must be inside the workspace {} (its archive is what a worker gets); move it there or pass -w",
                input.display(),
                root.display()
            ))
        })?;
        let folder = folder.to_string_lossy().replace('\\', "/");
        let id = abs
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        agentforge::fleet::fleet::check_id(&id).map_err(fleet_failure)?;
        return Ok((id, ItemKind::Sprint { folder }, input.to_path_buf()));
    }
    let text = std::fs::read_to_string(input)
        .map_err(|e| usage(anyhow!("{}: cannot read it: {e}", input.display())))?;
    let spec = TaskSpec::parse(&text, &input.display().to_string()).map_err(usage)?;
    agentforge::fleet::fleet::check_id(&spec.id).map_err(fleet_failure)?;
    Ok((
        spec.id.clone(),
        ItemKind::Task { spec_yaml: text },
        input.to_path_buf(),
    ))
}

/// `agentforge worker --nats URL`.
pub(crate) async fn worker(g: &Global, args: &WorkerArgs) -> Result<u8, Failure> {
    let mut opts = args.nats.options();
    opts.ack_wait = Duration::from_secs(args.ack_wait);
    let fleet = Fleet::connect(opts).await.map_err(fleet_failure)?;
    let dir = if args.dir.is_absolute() {
        args.dir.clone()
    } else {
        std::path::absolute(&args.dir).map_err(failed)?
    };
    let worker_opts = WorkerOptions {
        dir,
        concurrency: args.concurrency,
        worker_id: args
            .id
            .clone()
            .unwrap_or_else(agentforge::fleet::worker::default_worker_id),
    };
    let runner = Arc::new(CliRunner {
        fleet: fleet.clone(),
        handle: tokio::runtime::Handle::current(),
        config: g.config.clone(),
        flags: args.run.clone(),
    });
    super::start_token_counting();
    agentforge::fleet::worker::run_worker(fleet, worker_opts, runner, shutdown_signal())
        .await
        .map_err(fleet_failure)?;
    Ok(0)
}

/// Resolves on the first SIGINT or SIGTERM: the worker takes no new item (the items
/// running get the same signal and stop at a safe point, unacked).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs items on the CLI's own path: each on a thread of its own with its own runtime,
/// as one `agentforge run` process would (the executor's futures stay on it).
struct CliRunner {
    fleet: Fleet,
    handle: tokio::runtime::Handle,
    config: Option<PathBuf>,
    flags: RunFlags,
}

impl ItemRunner for CliRunner {
    fn run(&self, job: Job) -> RunFuture {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let handle = self.handle.clone();
        let fleet = self.fleet.clone();
        let config = self.config.clone();
        let flags = self.flags.clone();
        let name = format!("item-{}", job.item.id);
        let spawned = std::thread::Builder::new()
            .name(name)
            .stack_size(8 << 20)
            .spawn(move || {
                let _ = tx.send(run_item_thread(job, handle, fleet, config, flags));
            });
        Box::pin(async move {
            spawned.map_err(|e| format!("cannot start the item's thread: {e}"))?;
            rx.await
                .map_err(|_| "the item's thread ended without an outcome".to_string())?
        })
    }
}

fn run_item_thread(
    job: Job,
    fleet_handle: tokio::runtime::Handle,
    _fleet: Fleet,
    config: Option<PathBuf>,
    flags: RunFlags,
) -> Result<Finished, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the item's runtime: {e}"))?;
    rt.block_on(run_item(job, fleet_handle, config, flags))
        .map_err(|f| agentforge::secrets::mask(&super::render_error(&f.error)))
}

async fn run_item(
    job: Job,
    fleet_handle: tokio::runtime::Handle,
    config: Option<PathBuf>,
    flags: RunFlags,
) -> Result<Finished, Failure> {
    let g = Global {
        workspace: job.workspace.clone(),
        config,
        json: false,
    };
    if let Some(step) = job.restored_step {
        // The step the restored log holds (the status may lag it by a write).
        let step = TaskStore::new(&job.workspace)
            .open(&job.item.id)
            .ok()
            .and_then(|d| d.load_state().ok())
            .map_or(step, |s| s.step);
        eprintln!(
            "worker {}: item {}: restored from its checkpoint (step {step}); resuming",
            job.session.worker(),
            job.item.id
        );
    }
    // Each recorded step (of the task, or of a sprint's role tasks) is checkpointed
    // before the next one runs: the commit point of a redelivery.
    let checkpoint: Checkpoint = {
        let session = job.session.clone();
        let fleet_handle = fleet_handle.clone();
        Arc::new(move |record: &ActionRecord| {
            let done = step_done(session.id(), session.worker(), record);
            let session = session.clone();
            // The hook is synchronous; the fleet's connection lives on the worker's
            // runtime.
            tokio::task::block_in_place(|| {
                fleet_handle.block_on(async move { session.checkpoint(&done).await })
            })
            .map_err(|e| format!("fleet checkpoint of step {}: {e}", record.step))
        })
    };
    match &job.item.kind {
        ItemKind::Task { spec_yaml } => {
            let dir = job.workspace.join(".agentforge").join("fleet");
            std::fs::create_dir_all(&dir).map_err(failed)?;
            let path = dir.join(format!("{}.yaml", job.item.id));
            std::fs::write(&path, spec_yaml).map_err(failed)?;
            let spec = match TaskSpec::load(&path) {
                Ok(s) => s,
                // A spec this build cannot read never will: final, not retried.
                Err(e) => {
                    return Ok(Finished {
                        state: "failed".into(),
                        steps: 0,
                        reason: Some(format!("the task spec does not load: {e}")),
                    })
                }
            };
            let store = TaskStore::new(&job.workspace);
            let recorded = match store.open(&spec.id) {
                Ok(dir) => dir.load_provider().map_err(usage)?,
                Err(_) => None,
            };
            let rt = super::runtime(&g, &flags, recorded.as_ref())?;
            let hooks = FleetHooks {
                after_step: checkpoint,
                stop: job.stop.clone(),
            };
            let id = spec.id.clone();
            super::run_spec_with(&g, rt, spec, &path, &flags, Some(hooks)).await?;
            let state = store
                .open(&id)
                .map_err(failed)?
                .load_state()
                .map_err(failed)?;
            let status = serde_json::to_value(state.status).map_err(failed)?;
            Ok(Finished {
                state: status.as_str().unwrap_or("running").to_string(),
                steps: state.step,
                reason: state.status_reason.clone(),
            })
        }
        ItemKind::Sprint { folder } => {
            // The folder comes from the network: a plain relative path inside the item's
            // workspace, or the item fails (final: it never will run).
            let plain = Path::new(folder).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if !plain {
                return Ok(Finished {
                    state: "failed".into(),
                    steps: 0,
                    reason: Some(format!(
                        "sprint folder `{folder}` is not a relative path inside the workspace"
                    )),
                });
            }
            let input = job.workspace.join(folder);
            let code = super::sprint::run_with(&g, &input, &flags, None, Some(checkpoint)).await?;
            // Each role task's recorded step was checkpointed; once more at the end, with
            // the sprint's last iteration and reports.
            let session = job.session.clone();
            let done = StepDone {
                event: ProgressEvent {
                    item: job.item.id.clone(),
                    worker: session.worker().to_string(),
                    step: 0,
                    phase: "sprint".into(),
                    action: "sprint".into(),
                    result: format!("exit {code}"),
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_usd_micros: None,
                },
                total_input_tokens: 0,
                total_output_tokens: 0,
                total_cost_usd_micros: None,
            };
            fleet_handle
                .spawn(async move { session.checkpoint(&done).await })
                .await
                .map_err(failed)?
                .map_err(fleet_failure)?;
            let state = match code {
                0 => "complete",
                1 => "failed",
                2 => "budget_exhausted",
                75 => "escalated",
                _ => "running",
            };
            Ok(Finished {
                state: state.into(),
                steps: 0,
                reason: Some(format!("sprint exit code {code}")),
            })
        }
    }
}

/// A recorded step as the fleet checkpoints and publishes it.
fn step_done(item: &str, worker: &str, r: &ActionRecord) -> StepDone {
    let result = serde_json::to_value(r.result)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    StepDone {
        event: ProgressEvent {
            item: item.to_string(),
            worker: worker.to_string(),
            step: r.step,
            phase: r.phase.clone(),
            action: r.action.clone(),
            result,
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cost_usd_micros: r.cost_usd_micros.map(|c| c.0),
        },
        total_input_tokens: r.state_after.tokens.input_tokens,
        total_output_tokens: r.state_after.tokens.output_tokens,
        total_cost_usd_micros: r
            .state_after
            .cost
            .as_ref()
            .and_then(|c| c.known())
            .map(|c| c.0),
    }
}

/// How long `status --nats` waits for the fleet's answers.
const STATUS_PATIENCE: Duration = Duration::from_secs(30);

/// `agentforge status --nats URL`: the fleet's items and workers.
pub(crate) async fn status(g: &Global, url: &str, sprint: Option<&str>) -> Result<u8, Failure> {
    if let Some(id) = sprint {
        return Err(usage(anyhow!(
            "status --nats shows the whole fleet, and `{id}` names a local sprint: drop one of them"
        )));
    }
    // A view is a few reads: a cluster that cannot answer them in this time is said to
    // be so, rather than waited on.
    let view = tokio::time::timeout(STATUS_PATIENCE, async {
        match Fleet::connect_existing(FleetOptions::new(url)).await? {
            Some(fleet) => fleet.view().await,
            // Nothing submitted and no worker started yet: an empty fleet, and nothing
            // made on the server.
            None => Ok(agentforge::fleet::FleetView::default()),
        }
    })
    .await
    .map_err(|_| {
        fleet_failure(FleetError::JetStream {
            what: format!(
                "status of the fleet at {}",
                agentforge::fleet::fleet::redact_url(url)
            ),
            reason: format!("no answer within {} s", STATUS_PATIENCE.as_secs()),
        })
    })?
    .map_err(fleet_failure)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&view).map_err(failed)?);
        return Ok(0);
    }
    println!(
        "fleet at {}: {} item(s), {} message(s) waiting, {} worker(s)",
        agentforge::fleet::fleet::redact_url(url),
        view.items.len(),
        view.pending_messages,
        view.workers.len()
    );
    println!(
        "{:<28} {:<7} {:<17} {:<24} {:>5} {:>10} {:>10} {:>10}",
        "ITEM", "KIND", "STATE", "WORKER", "STEP", "TOKENS IN", "TOKENS OUT", "COST"
    );
    for i in &view.items {
        println!(
            "{:<28} {:<7} {:<17} {:<24} {:>5} {:>10} {:>10} {:>10}",
            i.id,
            i.kind,
            i.state,
            i.worker.as_deref().unwrap_or("-"),
            i.step,
            i.input_tokens,
            i.output_tokens,
            i.cost_usd_micros
                .map(|c| agentforge::cost::MicroUsd(c).to_string())
                .unwrap_or_else(|| "unknown".into())
        );
        if let (false, Some(r)) = (i.state == "running", &i.reason) {
            println!("    {r}");
        }
    }
    for w in &view.workers {
        println!(
            "worker {:<24} last heartbeat {}  running: {}",
            w.worker,
            w.last_heartbeat,
            if w.items.is_empty() {
                "-".to_string()
            } else {
                w.items.join(", ")
            }
        );
    }
    Ok(0)
}
