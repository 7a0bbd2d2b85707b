//! What travels and what is kept: the work item (the stream's message), an item's status
//! (the status bucket), progress events, worker heartbeats and leases. All JSON, versioned
//! where a newer build may meet an older one.

use serde::{Deserialize, Serialize};

/// The work item's format version this build writes and runs.
pub const ITEM_VERSION: u32 = 1;

/// One unit of fleet work: a task or a sprint, with the files it runs on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkItem {
    /// Format version ([`ITEM_VERSION`]); a worker refuses a newer one.
    pub version: u32,
    /// The task's or sprint's id: the key of the item everywhere (buckets, object names,
    /// the worker's folder).
    pub id: String,
    /// What to run.
    pub kind: ItemKind,
    /// The workspace it runs in, as a tar.gz.
    pub workspace: Payload,
    /// When it was submitted (RFC 3339, UTC).
    pub submitted_at: String,
}

/// What an item runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ItemKind {
    /// A task: its spec (the task.yaml's text), run as `agentforge run` runs a task file.
    Task {
        /// The task file's text.
        spec_yaml: String,
    },
    /// A sprint: its folder, relative to the workspace, run as `agentforge run DIR`.
    Sprint {
        /// The sprint folder inside the workspace (`/`-separated).
        folder: String,
    },
}

/// Where an item's workspace archive is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "in", rename_all = "snake_case")]
pub enum Payload {
    /// In the message, base64 (archives up to [`crate::INLINE_MAX`] bytes).
    Inline {
        /// The tar.gz, base64 (standard alphabet).
        tar_gz_base64: String,
    },
    /// In the object store, under `name`.
    Object {
        /// The object's name in [`crate::names::OBJECTS`].
        name: String,
        /// Its size in bytes.
        size: u64,
        /// `sha256:<hex>` of the archive, checked when it is fetched.
        sha256: String,
    },
}

/// An item's state as the fleet shows it (the status bucket, one key per item).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ItemStatus {
    /// The item's id.
    pub id: String,
    /// `task` or `sprint`.
    pub kind: String,
    /// `queued`, `running`, `retrying`, or a final state: `complete`, `failed`,
    /// `escalated`, `budget_exhausted` (the engine's) or `failed` when the delivery
    /// bound is reached.
    pub state: String,
    /// The worker that runs or ran it.
    pub worker: Option<String>,
    /// The last checkpointed step.
    pub step: u64,
    /// Provider input tokens so far.
    pub input_tokens: u64,
    /// Provider output tokens so far.
    pub output_tokens: u64,
    /// Cost so far in micro-dollars; `None` while unknown (an unpriced step).
    pub cost_usd_micros: Option<u64>,
    /// How many times the stream delivered it.
    pub deliveries: u64,
    /// Why it is in this state (a final reason, a retry's error).
    pub reason: Option<String>,
    /// When this record was written (RFC 3339, UTC).
    pub updated: String,
}

impl ItemStatus {
    /// Whether the state is final (no worker will run the item again).
    pub fn is_final(&self) -> bool {
        is_final_state(&self.state)
    }

    /// Takes the totals (tokens and cost) of `last`, the item's previous status: a new
    /// status of a delivery keeps what earlier deliveries spent.
    pub fn carry_totals(&mut self, last: &ItemStatus) {
        self.input_tokens = last.input_tokens;
        self.output_tokens = last.output_tokens;
        self.cost_usd_micros = last.cost_usd_micros;
    }
}

/// Whether `state` is one of the final states.
pub fn is_final_state(state: &str) -> bool {
    matches!(
        state,
        "complete" | "failed" | "escalated" | "budget_exhausted"
    )
}

/// One recorded step, as published on `agentforge.progress.<item>`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgressEvent {
    /// The item's id.
    pub item: String,
    /// The worker that ran the step.
    pub worker: String,
    /// The step's number.
    pub step: u64,
    /// The phase it ran in.
    pub phase: String,
    /// The action.
    pub action: String,
    /// Its result (`success`, `failure`...).
    pub result: String,
    /// The step's provider input tokens.
    pub input_tokens: u64,
    /// The step's provider output tokens.
    pub output_tokens: u64,
    /// The step's cost in micro-dollars, when priced.
    pub cost_usd_micros: Option<u64>,
}

/// A worker's heartbeat (the workers bucket, one key per worker).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerBeat {
    /// The worker's id (`<host>-<pid>`).
    pub worker: String,
    /// Its host name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started (RFC 3339, UTC).
    pub started: String,
    /// Its last heartbeat (RFC 3339, UTC).
    pub last_heartbeat: String,
    /// The items it runs now.
    pub items: Vec<String>,
    /// How many items it may run at once.
    pub concurrency: usize,
}

/// A lease (the leases bucket, one key per item): who runs it, until when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LeaseRecord {
    /// The holder.
    pub worker: String,
    /// Milliseconds since the Unix epoch after which another worker may take it.
    pub expires_ms: i64,
}

/// Now, RFC 3339 in UTC with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_item_round_trips_with_its_tags() {
        let item = WorkItem {
            version: ITEM_VERSION,
            id: "t1".into(),
            kind: ItemKind::Task {
                spec_yaml: "id: t1\n".into(),
            },
            workspace: Payload::Object {
                name: "input/t1.tar.gz".into(),
                size: 3,
                sha256: "sha256:00".into(),
            },
            submitted_at: "2026-11-26T00:00:00.000Z".into(),
        };
        let json = serde_json::to_value(&item).unwrap();
        assert_eq!(json["kind"]["kind"], "task");
        assert_eq!(json["workspace"]["in"], "object");
        let back: WorkItem = serde_json::from_value(json).unwrap();
        assert_eq!(back, item);
    }

    #[test]
    fn final_states_are_the_engines_and_failed() {
        for s in ["complete", "failed", "escalated", "budget_exhausted"] {
            assert!(is_final_state(s), "{s}");
        }
        for s in ["queued", "running", "retrying"] {
            assert!(!is_final_state(s), "{s}");
        }
    }
}
