//! The worker: pulls items, runs each under a lease in its own folder, checkpoints every
//! recorded step, acks only a final state.
//!
//! What an item runs on is the CLI's: an [`ItemRunner`] (the same executor as
//! `agentforge run`). This module owns the rest: the delivery bound, the lease and its
//! renewal, in-progress acks, the workspace restored from the last checkpoint (or the
//! submission), the item's status and its ack.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::item::{is_final_state, now_rfc3339, ITEM_VERSION};
use crate::{
    archive, Fleet, FleetError, ItemKind, ItemStatus, Lease, ProgressEvent, WorkItem, WorkerBeat,
};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The folder items run in (`<dir>/<item-id>/`, kept after the item ends).
    pub dir: PathBuf,
    /// How many items at once.
    pub concurrency: usize,
    /// The worker's id (`<host>-<pid>` by default).
    pub worker_id: String,
}

/// The worker's id on this machine: `<host>-<pid>`.
pub fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_string());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{host}-{}", std::process::id())
}

/// One item handed to the runner.
pub struct Job {
    /// The item.
    pub item: WorkItem,
    /// Its workspace, restored (from the last checkpoint, else the submission).
    pub workspace: PathBuf,
    /// Whether it was restored from a checkpoint (else it starts from the submission).
    pub restored_step: Option<u64>,
    /// Checkpoints its steps (the executor's after-step hook calls it).
    pub session: Arc<ItemSession>,
    /// Becomes `true` when the worker lost the item's lease: stop at once (the step in
    /// flight is dropped and rolled back; nothing is acked).
    pub stop: watch::Receiver<bool>,
}

/// How the runner left the item.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    /// The engine's status: `complete`, `failed`, `escalated`, `budget_exhausted` (final)
    /// or `running` (stopped before the end).
    pub state: String,
    /// Steps recorded.
    pub steps: u64,
    /// The reason the engine gives.
    pub reason: Option<String>,
}

/// The future an [`ItemRunner`] returns.
pub type RunFuture = Pin<Box<dyn Future<Output = Result<Finished, String>> + Send>>;

/// Runs one item on the executor (the CLI implements it).
pub trait ItemRunner: Send + Sync + 'static {
    /// Runs `job` to a final state, or as far as it goes; `Err` is a failure to run
    /// (the item is retried within the delivery bound).
    fn run(&self, job: Job) -> RunFuture;
}

/// One step as it is checkpointed: the event, and the item's totals after it.
#[derive(Debug, Clone)]
pub struct StepDone {
    /// The step's event.
    pub event: ProgressEvent,
    /// Provider input tokens of the whole item so far.
    pub total_input_tokens: u64,
    /// Provider output tokens so far.
    pub total_output_tokens: u64,
    /// Cost so far, micro-dollars; `None` while unknown.
    pub total_cost_usd_micros: Option<u64>,
}

/// An item being run by this worker: its lease and its checkpoints.
pub struct ItemSession {
    fleet: Fleet,
    id: String,
    kind: String,
    worker: String,
    workspace: PathBuf,
    deliveries: u64,
    lease: tokio::sync::Mutex<Lease>,
    lost: watch::Sender<bool>,
}

impl ItemSession {
    /// The item's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The worker's id.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Checkpoints a recorded step: the lease is renewed first (a worker that lost it
    /// writes nothing), then the workspace with its task folder goes to the object store
    /// as one tar.gz (the commit point), then the status and the progress event.
    pub async fn checkpoint(&self, step: &StepDone) -> Result<(), FleetError> {
        self.renew().await?;
        let ws = self.workspace.clone();
        let bytes = tokio::task::spawn_blocking(move || archive::pack(&ws))
            .await
            .map_err(|e| FleetError::js("pack checkpoint", e))??;
        self.fleet.put_checkpoint(&self.id, &bytes).await?;
        self.fleet
            .put_status(&ItemStatus {
                id: self.id.clone(),
                kind: self.kind.clone(),
                state: "running".into(),
                worker: Some(self.worker.clone()),
                step: step.event.step,
                input_tokens: step.total_input_tokens,
                output_tokens: step.total_output_tokens,
                cost_usd_micros: step.total_cost_usd_micros,
                deliveries: self.deliveries,
                reason: None,
                updated: String::new(),
            })
            .await?;
        self.fleet.publish_progress(&step.event).await;
        Ok(())
    }

    /// Renews the lease; on loss, tells the runner to stop.
    async fn renew(&self) -> Result<(), FleetError> {
        let mut lease = self.lease.lock().await;
        match self.fleet.renew_lease(&mut lease).await {
            Err(e @ FleetError::LeaseLost { .. }) => {
                let _ = self.lost.send(true);
                Err(e)
            }
            other => other,
        }
    }
}

/// Runs a worker until `shutdown` resolves (then it takes no new item and waits for
/// those running).
pub async fn run_worker(
    fleet: Fleet,
    opts: WorkerOptions,
    runner: Arc<dyn ItemRunner>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), FleetError> {
    if opts.concurrency == 0 || opts.concurrency > 64 {
        return Err(FleetError::Setting {
            setting: "--concurrency",
            value: opts.concurrency.to_string(),
            reason: "give 1 to 64 items at once".into(),
        });
    }
    std::fs::create_dir_all(&opts.dir).map_err(|e| FleetError::io(&opts.dir, e))?;
    let consumer = fleet.consumer().await?;
    let running: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let started = now_rfc3339();
    let beat = {
        let (fleet, running, opts, started) = (
            fleet.clone(),
            running.clone(),
            opts.clone(),
            started.clone(),
        );
        tokio::spawn(async move {
            loop {
                let items = running
                    .lock()
                    .map(|r| r.iter().cloned().collect())
                    .unwrap_or_default();
                let b = WorkerBeat {
                    worker: opts.worker_id.clone(),
                    host: opts
                        .worker_id
                        .rsplit_once('-')
                        .map(|(h, _)| h.to_string())
                        .unwrap_or_default(),
                    pid: std::process::id(),
                    started: started.clone(),
                    last_heartbeat: now_rfc3339(),
                    items,
                    concurrency: opts.concurrency,
                };
                let _ = fleet.put_beat(&b).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };
    eprintln!(
        "worker {}: pulling from {} on {} ({} at once, ack wait {}s, at most {} deliveries)",
        opts.worker_id,
        crate::names::STREAM,
        crate::fleet::redact_url(&fleet.options().url),
        opts.concurrency,
        fleet.options().ack_wait.as_secs(),
        fleet.options().max_deliver
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(opts.concurrency));
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let fetched = tokio::select! {
            f = fetch_one(&consumer) => f,
            () = &mut shutdown => break,
        };
        let msg = match fetched {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("worker {}: fetch: {e}; trying again", opts.worker_id);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let (fleet, opts, runner, running) =
            (fleet.clone(), opts.clone(), runner.clone(), running.clone());
        tasks.spawn(async move {
            handle(&fleet, &opts, runner, &running, msg).await;
            drop(permit);
        });
        // Reap what ended.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    beat.abort();
    Ok(())
}

async fn fetch_one(
    consumer: &jetstream::consumer::PullConsumer,
) -> Result<Option<jetstream::Message>, String> {
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(2))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    match batch.next().await {
        None => Ok(None),
        Some(Ok(m)) => Ok(Some(m)),
        Some(Err(e)) => Err(e.to_string()),
    }
}

/// One delivery of one item, from parse to ack (or not).
async fn handle(
    fleet: &Fleet,
    opts: &WorkerOptions,
    runner: Arc<dyn ItemRunner>,
    running: &Mutex<BTreeSet<String>>,
    msg: jetstream::Message,
) {
    let me = &opts.worker_id;
    let (seq, delivered) = match msg.info() {
        Ok(i) => (i.stream_sequence, u64::try_from(i.delivered).unwrap_or(0)),
        Err(_) => (0, 0),
    };
    // The id names a folder this worker empties and fills: one that `submit` would
    // refuse (a path, `..`) is refused here too, whoever published the message.
    let checked = serde_json::from_slice::<WorkItem>(&msg.payload)
        .map_err(|e| e.to_string())
        .and_then(|item| {
            crate::fleet::check_id(&item.id)
                .map(|()| item)
                .map_err(|e| e.to_string())
        });
    let item = match checked {
        Ok(item) => item,
        Err(reason) => {
            eprintln!("worker {me}: {}", FleetError::BadItem { seq, reason });
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    let id = item.id.clone();
    // A redelivery of an item this worker is running (its in-progress acks were late,
    // e.g. while a node failed over) is left alone: the run in progress keeps the item,
    // and two runs in one folder would undo each other.
    let fresh = running
        .lock()
        .map(|mut r| r.insert(id.clone()))
        .unwrap_or(false);
    if !fresh {
        eprintln!("worker {me}: item {id} redelivered while this worker runs it; left to the run in progress");
        return;
    }
    handle_item(fleet, opts, runner, msg, item, delivered).await;
    running.lock().map(|mut r| r.remove(&id)).ok();
}

/// [`handle`] for an item this worker is not running yet.
async fn handle_item(
    fleet: &Fleet,
    opts: &WorkerOptions,
    runner: Arc<dyn ItemRunner>,
    msg: jetstream::Message,
    item: WorkItem,
    delivered: u64,
) {
    let me = &opts.worker_id;
    let id = item.id.clone();
    // A delivery of an item already final (its ack raced a redelivery, or was lost) ends
    // here: the final status is written before the ack, so the item is not run again
    // and is acked once by the worker that ended it.
    if let Ok(Some(done)) = fleet.item_status(&id).await {
        if done.is_final() {
            let _ = msg.ack_with(AckKind::Term).await;
            eprintln!(
                "worker {me}: item {id} is already {} (by {}); delivery {delivered} ended",
                done.state,
                done.worker.as_deref().unwrap_or("-")
            );
            return;
        }
    }
    let kind = match item.kind {
        ItemKind::Task { .. } => "task",
        ItemKind::Sprint { .. } => "sprint",
    }
    .to_string();
    let mut status = ItemStatus {
        id: id.clone(),
        kind: kind.clone(),
        state: "failed".into(),
        worker: Some(me.clone()),
        deliveries: delivered,
        ..Default::default()
    };
    if item.version > ITEM_VERSION {
        status.reason = Some(format!(
            "work item version {} is newer than this worker's ({ITEM_VERSION}); run a newer agentforge",
            item.version
        ));
        let _ = fleet.put_status(&status).await;
        let _ = msg.ack_with(AckKind::Term).await;
        return;
    }
    // The delivery bound: the last delivery is not run, it ends the item.
    let bound = u64::try_from(fleet.options().max_deliver).unwrap_or(1);
    if delivered >= bound {
        status.reason = Some(format!(
            "delivered {delivered} times, the bound (max_deliver {bound}): no more attempts"
        ));
        if let Ok(Some(last)) = fleet.item_status(&id).await {
            status.step = last.step;
            status.carry_totals(&last);
        }
        let _ = fleet.put_status(&status).await;
        let _ = msg.ack_with(AckKind::Term).await;
        eprintln!("worker {me}: item {id} failed: delivered {delivered} times (the bound)");
        return;
    }
    let ack_wait = fleet.options().ack_wait;
    let owner = lease_owner(me);
    let mut waited = false;
    let lease = loop {
        match fleet.acquire_lease(&id, &owner).await {
            Ok(Ok(l)) => break l,
            Ok(Err(left)) if !waited => {
                // A worker that died renewed its lease at its last checkpoint, so the
                // lease can outlive its message's ack deadline by up to a third of the
                // ack wait. Wait that out once, keeping this delivery with in-progress
                // acks, rather than spend a delivery: a worker's death costs one
                // delivery, not two. Bounded: one wait of at most the ack wait.
                waited = true;
                let until =
                    tokio::time::Instant::now() + left.min(ack_wait) + Duration::from_millis(250);
                while tokio::time::Instant::now() < until {
                    let _ = msg.ack_with(AckKind::Progress).await;
                    tokio::time::sleep_until(until.min(tokio::time::Instant::now() + ack_wait / 3))
                        .await;
                }
                let _ = msg.ack_with(AckKind::Progress).await;
            }
            Ok(Err(left)) => {
                // Still held after the wait: its holder is alive (it renews the lease,
                // and its in-progress acks keep its own delivery). Back once the lease
                // would have run out, never later than an ack wait.
                eprintln!("worker {me}: item {id} is leased by another worker for {} ms more; returned to the stream", left.as_millis());
                let _ = msg
                    .ack_with(AckKind::Nak(Some(
                        left.min(ack_wait) + Duration::from_millis(250),
                    )))
                    .await;
                return;
            }
            Err(e) => {
                // JetStream did not answer for ~15 s: back after an ack wait, not at
                // once, so a cluster in trouble does not use up the item's deliveries.
                eprintln!("worker {me}: item {id}: {e}");
                let _ = msg.ack_with(AckKind::Nak(Some(ack_wait))).await;
                return;
            }
        }
    };
    let outcome = run_leased(fleet, opts, runner, &msg, item, lease, delivered).await;
    match outcome {
        Outcome::LeaseLost => {
            eprintln!("worker {me}: {}", FleetError::LeaseLost { id: id.clone() });
        }
        Outcome::Final(f, mut lease) => {
            // Still ours? A worker paused past its lease (a suspended VM) must not write
            // the status or ack while the new holder runs the item.
            if let Err(e) = fleet.renew_lease(&mut lease).await {
                eprintln!("worker {me}: item {id}: {e}; left to the lease's holder, not acked");
                return;
            }
            status.state = f.state.clone();
            status.reason = f.reason.clone();
            status.step = f.steps;
            if let Ok(Some(last)) = fleet.item_status(&id).await {
                status.carry_totals(&last);
            }
            if let Err(e) = fleet.put_status(&status).await {
                // The final status is written before the ack, or not acked at all: the
                // redelivery finds the final checkpoint and ends the item then.
                fleet.release_lease(&lease).await;
                eprintln!("worker {me}: item {id} is {} but its status was not written ({e}); not acked, it will be redelivered", f.state);
                return;
            }
            // Confirmed by the server; a lost ack redelivers the item, whose checkpoint
            // is final, so the next worker acks it without running a step.
            let mut acked = false;
            for _ in 0..5 {
                if msg.double_ack().await.is_ok() {
                    acked = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            fleet.release_lease(&lease).await;
            if acked {
                eprintln!(
                    "worker {me}: acked item {id}: {} after {} steps (delivery {delivered})",
                    f.state, f.steps
                );
            } else {
                eprintln!("worker {me}: item {id} is {} but its ack was not confirmed; it will be redelivered and acked from its final checkpoint", f.state);
            }
        }
        Outcome::Retry(reason, mut lease) => {
            if let Err(e) = fleet.renew_lease(&mut lease).await {
                eprintln!("worker {me}: item {id}: {e}; left to the lease's holder");
                return;
            }
            status.state = "retrying".into();
            status.reason = Some(reason.clone());
            if let Ok(Some(last)) = fleet.item_status(&id).await {
                status.step = last.step;
                status.carry_totals(&last);
            }
            let _ = fleet.put_status(&status).await;
            fleet.release_lease(&lease).await;
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                .await;
            eprintln!("worker {me}: item {id} not finished (delivery {delivered} of at most {bound}): {reason}; returned to the stream");
        }
    }
}

/// Who holds a lease this process takes: the worker's id (shown, and not necessarily
/// unique: two containers may both be `host-1`) and a NUID made once per process, so two
/// processes never both take one lease as "their own".
fn lease_owner(worker: &str) -> String {
    static NONCE: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| nuid::next().to_string());
    format!("{worker}#{}", *NONCE)
}

enum Outcome {
    Final(Finished, Lease),
    Retry(String, Lease),
    LeaseLost,
}

async fn run_leased(
    fleet: &Fleet,
    opts: &WorkerOptions,
    runner: Arc<dyn ItemRunner>,
    msg: &jetstream::Message,
    item: WorkItem,
    lease: Lease,
    delivered: u64,
) -> Outcome {
    let id = item.id.clone();
    let workspace = opts.dir.join(&id);
    let restored = match restore(fleet, &item, &workspace).await {
        Ok(r) => r,
        Err(e) => return Outcome::Retry(e.to_string(), lease),
    };
    let kind = match item.kind {
        ItemKind::Task { .. } => "task",
        ItemKind::Sprint { .. } => "sprint",
    };
    let _ = fleet
        .put_status(&ItemStatus {
            id: id.clone(),
            kind: kind.to_string(),
            state: "running".into(),
            worker: Some(opts.worker_id.clone()),
            step: restored.unwrap_or(0),
            deliveries: delivered,
            reason: restored.map(|s| format!("resumed from the checkpoint of step {s}")),
            ..fleet
                .item_status(&id)
                .await
                .ok()
                .flatten()
                .unwrap_or_default()
        })
        .await;
    let (lost_tx, lost_rx) = watch::channel(false);
    let session = Arc::new(ItemSession {
        fleet: fleet.clone(),
        id: id.clone(),
        kind: kind.to_string(),
        worker: opts.worker_id.clone(),
        workspace: workspace.clone(),
        deliveries: delivered,
        lease: tokio::sync::Mutex::new(lease),
        lost: lost_tx,
    });
    // In-progress acks and lease renewal, a third of the ack wait apart.
    let keeper = {
        let session = session.clone();
        let msg_ack = msg.clone();
        let every = fleet.options().ack_wait / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let _ = msg_ack.ack_with(AckKind::Progress).await;
                if let Err(FleetError::LeaseLost { .. }) = session.renew().await {
                    break;
                }
            }
        })
    };
    let job = Job {
        item,
        workspace,
        restored_step: restored,
        session: session.clone(),
        stop: lost_rx.clone(),
    };
    let result = runner.run(job).await;
    keeper.abort();
    if *lost_rx.borrow() {
        return Outcome::LeaseLost;
    }
    let lease = session.lease.lock().await.clone();
    match result {
        Ok(f) if is_final_state(&f.state) => Outcome::Final(f, lease),
        Ok(f) => Outcome::Retry(
            format!(
                "stopped at step {} in state {}{}",
                f.steps,
                f.state,
                f.reason.map(|r| format!(" ({r})")).unwrap_or_default()
            ),
            lease,
        ),
        Err(e) => Outcome::Retry(e, lease),
    }
}

/// Lays the item's workspace in `dir` afresh: its last checkpoint if it has one, else
/// the submitted archive. Returns the checkpoint's step, if any.
async fn restore(fleet: &Fleet, item: &WorkItem, dir: &Path) -> Result<Option<u64>, FleetError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| FleetError::io(dir, e))?;
    }
    let (bytes, step) = match fleet.checkpoint(&item.id).await? {
        Some(b) => {
            let step = fleet.item_status(&item.id).await?.map(|s| s.step);
            (b, Some(step.unwrap_or(0)))
        }
        None => (fleet.input_archive(item).await?, None),
    };
    let dir2 = dir.to_path_buf();
    tokio::task::spawn_blocking(move || archive::unpack(&bytes, &dir2))
        .await
        .map_err(|e| FleetError::js("unpack workspace", e))??;
    Ok(step)
}
