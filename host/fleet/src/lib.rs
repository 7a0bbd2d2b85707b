//! AgentForge beyond one machine: tasks and sprints as work items on a NATS JetStream
//! cluster, run by workers that may die.
//!
//! Local disk stays the default; nothing here runs unless `--nats` is given. The design
//! (docs/scale-out.md has the whole of it):
//!
//! - **submit**: one message per task or sprint on the work-queue stream
//!   [`names::STREAM`] (subject [`names::SUBJECT`]), carrying the task spec and the
//!   workspace as a tar.gz (inline when small, else in the object store). A key per id,
//!   made with `create` in [`names::ITEMS`], refuses a second submission of the same id;
//!   the message's `Nats-Msg-Id` is the id too (the stream's duplicate window).
//! - **worker**: a durable pull consumer, explicit acks, `ack_wait` with in-progress acks
//!   while an item runs, [`MAX_DELIVER`] deliveries at most. An item runs under a lease
//!   (a key in [`names::LEASES`] written with compare-and-swap on its revision), in its
//!   own folder, on the same executor as `agentforge run` (the CLI supplies it: an
//!   [`worker::ItemRunner`]). It is acked only once it reached a final state.
//! - **checkpoints**: after every recorded step, the item's workspace (task folder
//!   included) goes to the object store as one tar.gz: the commit point. A redelivered
//!   item is restored from its last checkpoint and resumed by the engine's resume path.
//! - **status**: the item's latest state in [`names::STATUS`], worker heartbeats in
//!   [`names::WORKERS`], one progress event per step on `agentforge.progress.<item>`.

pub mod archive;
mod error;
pub mod fleet;
pub mod item;
pub mod worker;

pub use error::FleetError;
pub use fleet::{Fleet, FleetOptions, FleetView, Lease};
pub use item::{ItemKind, ItemStatus, Payload, ProgressEvent, WorkItem, WorkerBeat};

/// The names the fleet uses in JetStream.
pub mod names {
    /// The work-queue stream: a message is removed once acked.
    pub const STREAM: &str = "AGENTFORGE_WORK";
    /// The subject work items are published on.
    pub const SUBJECT: &str = "agentforge.work";
    /// The durable pull consumer every worker shares.
    pub const CONSUMER: &str = "agentforge-workers";
    /// Progress events: `agentforge.progress.<item>`.
    pub const PROGRESS_PREFIX: &str = "agentforge.progress";
    /// Submissions, one key per id (`create` refuses a second).
    pub const ITEMS: &str = "agentforge-items";
    /// Each item's latest status.
    pub const STATUS: &str = "agentforge-status";
    /// Leases, one key per item being run.
    pub const LEASES: &str = "agentforge-leases";
    /// Worker heartbeats, one key per worker.
    pub const WORKERS: &str = "agentforge-workers";
    /// The object store: `input/<id>.tar.gz` (large submissions) and
    /// `checkpoint/<id>.tar.gz` (each item's last checkpoint).
    pub const OBJECTS: &str = "agentforge-files";
}

/// The most times the stream delivers one item (the consumer's `max_deliver`). The last
/// delivery is not run: the worker that gets it marks the item `failed` and terminates
/// it, so an item is attempted at most `MAX_DELIVER - 1` times. A hard bound: a lower
/// value may be asked for, a higher one is refused.
pub const MAX_DELIVER: i64 = 5;

/// Workspace archives up to this size travel inside the work message; larger ones go to
/// the object store (the server's default max payload is 1 MiB, and base64 adds a third).
pub const INLINE_MAX: usize = 256 * 1024;

/// The default ack wait: an item whose worker sent no in-progress ack for this long is
/// redelivered; also the lease's time to live.
pub const DEFAULT_ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
