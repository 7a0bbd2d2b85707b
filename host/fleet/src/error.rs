//! The fleet's typed errors: each names the thing (server, bucket, key, file) and says
//! what to do.

use std::path::PathBuf;

/// What can go wrong between AgentForge and a NATS JetStream fleet.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No NATS server answered at the URL.
    #[error("no NATS server reachable at {url}: {reason}; start one with JetStream (`nats-server -js`) or pass the right --nats URL")]
    Unreachable {
        /// The URL(s) tried.
        url: String,
        /// The client's reason.
        reason: String,
    },
    /// The `--nats` value is not a NATS URL.
    #[error("--nats {url}: not a NATS URL ({reason}); give nats://HOST:PORT (several separated by commas)")]
    BadUrl {
        /// The value given.
        url: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A JetStream operation failed (JetStream off, a node down past the client's wait,
    /// a stream or bucket with other settings).
    #[error("JetStream: {what}: {reason}; check that nats-server runs with -js (every node of a cluster) and that a majority of the cluster is up")]
    JetStream {
        /// The operation and the thing it was on.
        what: String,
        /// The server's or the client's reason.
        reason: String,
    },
    /// The id was submitted before: a work item exists for it.
    #[error("item `{id}` was already submitted to the fleet (key `{id}` exists in bucket {bucket}); give the task or sprint another id, or see it with `agentforge status --nats URL`")]
    Duplicate {
        /// The item's id.
        id: String,
        /// The bucket holding submissions.
        bucket: &'static str,
    },
    /// An id that cannot be a key in JetStream's key-value buckets.
    #[error("id `{id}` cannot name a fleet item: {reason}")]
    BadId {
        /// The id.
        id: String,
        /// Why.
        reason: String,
    },
    /// A file or folder given to submit is not one it can send.
    #[error("{}: {reason}", path.display())]
    BadInput {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A work item's message does not parse (or is of a version this build cannot run).
    #[error("work item (stream sequence {seq}) is not one this worker can run: {reason}")]
    BadItem {
        /// The message's stream sequence.
        seq: u64,
        /// Why.
        reason: String,
    },
    /// Reading or writing local files (archives, workspaces).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A setting outside its bound.
    #[error("{setting} = {value}: {reason}")]
    Setting {
        /// The flag or setting.
        setting: &'static str,
        /// The value given.
        value: String,
        /// The bound, and what to do.
        reason: String,
    },
    /// The worker no longer holds the item's lease: another worker may run it.
    #[error("lease on item `{id}` lost (another worker took it after the lease expired); this worker stops the item without acking")]
    LeaseLost {
        /// The item's id.
        id: String,
    },
}

impl FleetError {
    /// A JetStream error on `what`.
    pub(crate) fn js(what: impl Into<String>, e: impl std::fmt::Display) -> FleetError {
        FleetError::JetStream {
            what: what.into(),
            reason: e.to_string(),
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> FleetError {
        FleetError::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether the error is the caller's input (the CLI's exit code 64).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            FleetError::Duplicate { .. }
                | FleetError::BadId { .. }
                | FleetError::BadInput { .. }
                | FleetError::BadUrl { .. }
                | FleetError::Setting { .. }
        )
    }
}
