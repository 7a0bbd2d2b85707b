//! The connection to a JetStream fleet: set-up of the stream, buckets and object store,
//! submission, status, checkpoints and leases.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use base64::Engine as _;
use bytes::Bytes;
use futures_util::TryStreamExt;
use tokio::io::AsyncReadExt;

use crate::item::{now_ms, now_rfc3339, ItemStatus, LeaseRecord, WorkerBeat};
use crate::{names, FleetError, ItemKind, Payload, WorkItem, DEFAULT_ACK_WAIT, MAX_DELIVER};

/// How to reach and shape the fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// NATS URL(s), comma-separated (`nats://127.0.0.1:4222,nats://...`).
    pub url: String,
    /// Replicas of the stream, buckets and object store (1 on a single node, 3 in a
    /// cluster); applies when this process creates them.
    pub replicas: usize,
    /// The consumer's ack wait, and the lease's time to live.
    pub ack_wait: Duration,
    /// The consumer's `max_deliver` (at most [`MAX_DELIVER`]).
    pub max_deliver: i64,
}

impl FleetOptions {
    /// Options for `url` with the defaults: one replica, [`DEFAULT_ACK_WAIT`],
    /// [`MAX_DELIVER`].
    pub fn new(url: impl Into<String>) -> FleetOptions {
        FleetOptions {
            url: url.into(),
            replicas: 1,
            ack_wait: DEFAULT_ACK_WAIT,
            max_deliver: MAX_DELIVER,
        }
    }

    fn check(&self) -> Result<(), FleetError> {
        if !(1..=5).contains(&self.replicas) {
            return Err(FleetError::Setting {
                setting: "--replicas",
                value: self.replicas.to_string(),
                reason:
                    "JetStream keeps 1 to 5 replicas: 1 on a single node, 3 on a three-node cluster"
                        .into(),
            });
        }
        if !(1..=MAX_DELIVER).contains(&self.max_deliver) {
            return Err(FleetError::Setting {
                setting: "max_deliver",
                value: self.max_deliver.to_string(),
                reason: format!(
                    "the delivery bound is 1 to {MAX_DELIVER}; it may be lowered, never raised"
                ),
            });
        }
        if self.ack_wait < Duration::from_secs(2) || self.ack_wait > Duration::from_secs(3600) {
            return Err(FleetError::Setting {
                setting: "--ack-wait",
                value: format!("{}s", self.ack_wait.as_secs()),
                reason: "give 2 to 3600 seconds (an item whose worker is silent this long is redelivered)".into(),
            });
        }
        Ok(())
    }
}

/// A connected fleet: the stream, buckets and object store, made if missing.
#[derive(Clone)]
pub struct Fleet {
    /// The NATS connection (progress events are published on it).
    pub client: async_nats::Client,
    js: jetstream::Context,
    opts: FleetOptions,
    work: stream::Stream,
    items: kv::Store,
    status: kv::Store,
    leases: kv::Store,
    workers: kv::Store,
    objects: object_store::ObjectStore,
}

/// What `status --nats` shows.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FleetView {
    /// Every item's latest status, by id.
    pub items: Vec<ItemStatus>,
    /// Every worker's last heartbeat, by id.
    pub workers: Vec<WorkerBeat>,
    /// Messages waiting in the work stream (not yet acked).
    pub pending_messages: u64,
}

/// A held lease on an item.
#[derive(Debug, Clone)]
pub struct Lease {
    /// The item.
    pub item: String,
    /// The holder.
    pub worker: String,
    revision: u64,
}

/// `--nats` as it may be shown: the credentials of any `user:password@` (or token@) in
/// its URLs replaced by `***`.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(|u| match (u.find("://"), u.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme + 3 => {
                format!("{}***{}", &u[..scheme + 3], &u[at..])
            }
            (None, Some(at)) => format!("***{}", &u[at..]),
            _ => u.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `--nats` into server addresses.
fn addrs(url: &str) -> Result<Vec<async_nats::ServerAddr>, FleetError> {
    url.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<async_nats::ServerAddr>()
                .map_err(|e| FleetError::BadUrl {
                    url: redact_url(s),
                    reason: e.to_string(),
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                Err(FleetError::BadUrl {
                    url: url.to_string(),
                    reason: "empty".into(),
                })
            } else {
                Ok(v)
            }
        })
}

/// Checks that `id` can be a key (and an object name part): JetStream keys take
/// `[-/_=.a-zA-Z0-9]`, and a dot may not start or end one.
pub fn check_id(id: &str) -> Result<(), FleetError> {
    let bad = |reason: &str| {
        Err(FleetError::BadId {
            id: id.to_string(),
            reason: reason.to_string(),
        })
    };
    if id.is_empty() || id.len() > 200 {
        return bad("an id is 1 to 200 characters");
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '='))
    {
        return bad("use letters, digits, `-`, `_` and `=` only (JetStream keys)");
    }
    Ok(())
}

/// A connection to `opts.url` and its JetStream context; an unreachable server is named
/// with its credentials redacted.
async fn client(
    opts: &FleetOptions,
) -> Result<(async_nats::Client, jetstream::Context), FleetError> {
    let client = async_nats::ConnectOptions::new()
        .name("agentforge")
        .connection_timeout(Duration::from_secs(3))
        .connect(addrs(&opts.url)?)
        .await
        .map_err(|e| FleetError::Unreachable {
            url: redact_url(&opts.url),
            reason: e.to_string(),
        })?;
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(10))
        .build(client.clone());
    Ok((client, js))
}

impl Fleet {
    /// Connects and makes (or opens) the stream, the buckets and the object store.
    pub async fn connect(opts: FleetOptions) -> Result<Fleet, FleetError> {
        opts.check()?;
        let (client, js) = client(&opts).await?;
        Fleet::open(opts, client, js).await
    }

    /// Makes (or opens) the stream, the buckets and the object store on a connection.
    async fn open(
        opts: FleetOptions,
        client: async_nats::Client,
        js: jetstream::Context,
    ) -> Result<Fleet, FleetError> {
        let replicas = opts.replicas;
        let work = retry("create stream AGENTFORGE_WORK", || {
            js.get_or_create_stream(stream::Config {
                name: names::STREAM.to_string(),
                subjects: vec![names::SUBJECT.to_string()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                num_replicas: replicas,
                // A re-publish of the same id within this window is dropped by the server.
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
        })
        .await?;
        let items = ensure_kv(&js, names::ITEMS, 1, replicas).await?;
        // History: the status of an item is rewritten at each step; a few are enough.
        let status = ensure_kv(&js, names::STATUS, 5, replicas).await?;
        let leases = ensure_kv(&js, names::LEASES, 1, replicas).await?;
        let workers = ensure_kv(&js, names::WORKERS, 1, replicas).await?;
        let objects = match js.get_object_store(names::OBJECTS).await {
            Ok(o) => o,
            Err(_) => {
                retry("create object store agentforge-files", || {
                    js.create_object_store(object_store::Config {
                        bucket: names::OBJECTS.to_string(),
                        num_replicas: replicas,
                        ..Default::default()
                    })
                })
                .await?
            }
        };
        Ok(Fleet {
            client,
            js,
            opts,
            work,
            items,
            status,
            leases,
            workers,
            objects,
        })
    }

    /// [`Fleet::connect`] when the fleet exists (its work stream is there), else `None`
    /// and nothing is made: a look (`status`) must not create the stream and buckets,
    /// with its own replica count, before the workers that would make them right.
    pub async fn connect_existing(opts: FleetOptions) -> Result<Option<Fleet>, FleetError> {
        opts.check()?;
        let (client, js) = client(&opts).await?;
        if js.get_stream(names::STREAM).await.is_err() {
            return Ok(None);
        }
        Fleet::open(opts, client, js).await.map(Some)
    }

    /// The options it was connected with.
    pub fn options(&self) -> &FleetOptions {
        &self.opts
    }

    /// The workers' shared durable pull consumer (made if missing). One made by another
    /// process with a higher `max_deliver` than the bound is refused.
    pub async fn consumer(&self) -> Result<consumer::PullConsumer, FleetError> {
        let config = consumer::pull::Config {
            durable_name: Some(names::CONSUMER.to_string()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: self.opts.ack_wait,
            max_deliver: self.opts.max_deliver,
            filter_subject: names::SUBJECT.to_string(),
            ..Default::default()
        };
        let mut c: consumer::PullConsumer = retry("create consumer agentforge-workers", || {
            self.work
                .get_or_create_consumer(names::CONSUMER, config.clone())
        })
        .await?;
        let info = c
            .info()
            .await
            .map_err(|e| FleetError::js("consumer agentforge-workers info", e))?;
        if info.config.max_deliver < 1 || info.config.max_deliver > MAX_DELIVER {
            return Err(FleetError::Setting {
                setting: "max_deliver of consumer agentforge-workers",
                value: info.config.max_deliver.to_string(),
                reason: format!("above the bound of {MAX_DELIVER}; delete the consumer (`nats consumer rm AGENTFORGE_WORK agentforge-workers`) and start a worker again"),
            });
        }
        // An existing consumer keeps its own settings; a worker timing its in-progress
        // acks, leases and bound on other values would let the server redeliver an item
        // it runs, or end one another worker runs. All workers share one setting.
        if info.config.ack_wait != self.opts.ack_wait
            || info.config.max_deliver != self.opts.max_deliver
        {
            return Err(FleetError::Setting {
                setting: "--ack-wait",
                value: format!("{}s", self.opts.ack_wait.as_secs()),
                reason: format!(
                    "the fleet's consumer agentforge-workers was made with ack_wait {}s and max_deliver {}: start every worker with --ack-wait {}, or delete the consumer (`nats consumer rm AGENTFORGE_WORK agentforge-workers`) when no worker runs",
                    info.config.ack_wait.as_secs(),
                    info.config.max_deliver,
                    info.config.ack_wait.as_secs()
                ),
            });
        }
        Ok(c)
    }

    /// Submits an item: its id is claimed in [`names::ITEMS`] with `create` (a second
    /// submission is [`FleetError::Duplicate`]), its workspace goes inline or to the
    /// object store, its status is `queued`, and the message is published with the id as
    /// `Nats-Msg-Id`. Returns the stream sequence.
    pub async fn submit(
        &self,
        id: &str,
        kind: ItemKind,
        workspace_tar_gz: Vec<u8>,
    ) -> Result<u64, FleetError> {
        check_id(id)?;
        let claim = serde_json::json!({"id": id, "submitted_at": now_rfc3339()});
        match self.items.create(id, Bytes::from(claim.to_string())).await {
            Ok(_) => {}
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                return Err(FleetError::Duplicate {
                    id: id.to_string(),
                    bucket: names::ITEMS,
                })
            }
            Err(e) => {
                return Err(FleetError::js(
                    format!("claim key `{id}` in {}", names::ITEMS),
                    e,
                ))
            }
        }
        let result = self.publish_item(id, kind, workspace_tar_gz).await;
        if result.is_err() {
            // The id is free again: a submission that did not reach the stream can be
            // repeated.
            let _ = self.items.purge(id).await;
        }
        result
    }

    async fn publish_item(
        &self,
        id: &str,
        kind: ItemKind,
        tar_gz: Vec<u8>,
    ) -> Result<u64, FleetError> {
        let workspace = if tar_gz.len() <= crate::INLINE_MAX {
            Payload::Inline {
                tar_gz_base64: base64::engine::general_purpose::STANDARD.encode(&tar_gz),
            }
        } else {
            let name = format!("input/{id}.tar.gz");
            self.objects
                .put(name.as_str(), &mut tar_gz.as_slice())
                .await
                .map_err(|e| {
                    FleetError::js(format!("put object {name} in {}", names::OBJECTS), e)
                })?;
            Payload::Object {
                name,
                size: tar_gz.len() as u64,
                sha256: crate::archive::sha256(&tar_gz),
            }
        };
        let kind_name = match &kind {
            ItemKind::Task { .. } => "task",
            ItemKind::Sprint { .. } => "sprint",
        };
        let item = WorkItem {
            version: crate::item::ITEM_VERSION,
            id: id.to_string(),
            kind,
            workspace,
            submitted_at: now_rfc3339(),
        };
        self.put_status(&ItemStatus {
            id: id.to_string(),
            kind: kind_name.to_string(),
            state: "queued".into(),
            ..Default::default()
        })
        .await?;
        let payload = serde_json::to_vec(&item).map_err(|e| FleetError::js("encode item", e))?;
        let ack = self
            .js
            .send_publish(
                names::SUBJECT,
                jetstream::message::PublishMessage::build()
                    .payload(payload.into())
                    .message_id(id),
            )
            .await
            .map_err(|e| FleetError::js(format!("publish item `{id}` on {}", names::SUBJECT), e))?
            .await
            .map_err(|e| FleetError::js(format!("publish item `{id}` on {}", names::SUBJECT), e))?;
        if ack.duplicate {
            return Err(FleetError::Duplicate {
                id: id.to_string(),
                bucket: names::ITEMS,
            });
        }
        Ok(ack.sequence)
    }

    /// The workspace archive an item was submitted with.
    pub async fn input_archive(&self, item: &WorkItem) -> Result<Vec<u8>, FleetError> {
        match &item.workspace {
            Payload::Inline { tar_gz_base64 } => base64::engine::general_purpose::STANDARD
                .decode(tar_gz_base64)
                .map_err(|e| FleetError::BadItem {
                    seq: 0,
                    reason: format!("item `{}`: inline workspace is not base64: {e}", item.id),
                }),
            Payload::Object { name, sha256, .. } => {
                let bytes = self
                    .get_object(name)
                    .await?
                    .ok_or_else(|| FleetError::js(format!("object {name}"), "not found"))?;
                let got = crate::archive::sha256(&bytes);
                if &got != sha256 {
                    return Err(FleetError::js(
                        format!("object {name}"),
                        format!("hash {got}, the item says {sha256}"),
                    ));
                }
                Ok(bytes)
            }
        }
    }

    async fn get_object(&self, name: &str) -> Result<Option<Vec<u8>>, FleetError> {
        retry(&format!("get object {name}"), || self.get_object_once(name)).await
    }

    async fn get_object_once(&self, name: &str) -> Result<Option<Vec<u8>>, FleetError> {
        let mut obj = match self.objects.get(name).await {
            Ok(o) => o,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FleetError::js(format!("get object {name}"), e)),
        };
        let mut out = Vec::new();
        obj.read_to_end(&mut out)
            .await
            .map_err(|e| FleetError::js(format!("read object {name}"), e))?;
        Ok(Some(out))
    }

    /// Stores `tar_gz` as the item's checkpoint (replacing the last one; readers see the
    /// old or the new, never a mix).
    pub async fn put_checkpoint(&self, id: &str, tar_gz: &[u8]) -> Result<(), FleetError> {
        let name = checkpoint_name(id);
        retry(&format!("put object {name}"), || {
            let mut r = tar_gz;
            let objects = self.objects.clone();
            let name = name.clone();
            async move { objects.put(name.as_str(), &mut r).await }
        })
        .await
        .map(|_| ())
    }

    /// The item's last checkpoint, if it has one.
    pub async fn checkpoint(&self, id: &str) -> Result<Option<Vec<u8>>, FleetError> {
        self.get_object(&checkpoint_name(id)).await
    }

    /// Writes an item's status.
    pub async fn put_status(&self, s: &ItemStatus) -> Result<(), FleetError> {
        let mut s = s.clone();
        s.updated = now_rfc3339();
        let v = serde_json::to_vec(&s).map_err(|e| FleetError::js("encode status", e))?;
        retry(&format!("put key `{}` in {}", s.id, names::STATUS), || {
            self.status.put(s.id.as_str(), Bytes::from(v.clone()))
        })
        .await
        .map(|_| ())
    }

    /// An item's status, if it has one.
    pub async fn item_status(&self, id: &str) -> Result<Option<ItemStatus>, FleetError> {
        let got = retry(&format!("get key `{id}` in {}", names::STATUS), || {
            leader_get(&self.status, id)
        })
        .await?;
        Ok(got.and_then(|b| serde_json::from_slice(&b).ok()))
    }

    /// Writes a worker's heartbeat.
    pub async fn put_beat(&self, beat: &WorkerBeat) -> Result<(), FleetError> {
        let v = serde_json::to_vec(beat).map_err(|e| FleetError::js("encode heartbeat", e))?;
        self.workers
            .put(beat.worker.as_str(), v.into())
            .await
            .map(|_| ())
            .map_err(|e| {
                FleetError::js(
                    format!("put key `{}` in {}", beat.worker, names::WORKERS),
                    e,
                )
            })
    }

    /// Items, workers and the work waiting.
    pub async fn view(&self) -> Result<FleetView, FleetError> {
        let items = read_all::<ItemStatus>(&self.status, names::STATUS).await?;
        let workers = read_all::<WorkerBeat>(&self.workers, names::WORKERS).await?;
        let mut work = self.work.clone();
        let pending_messages = work
            .info()
            .await
            .map_err(|e| FleetError::js(format!("stream {} info", names::STREAM), e))?
            .state
            .messages;
        Ok(FleetView {
            items,
            workers,
            pending_messages,
        })
    }

    /// Takes the lease on `item` for `worker` until now + ack wait: created when there is
    /// none, else updated only if expired (or already `worker`'s), with compare-and-swap
    /// on the key's revision so two workers never both win. `Err(left)`: someone else
    /// holds it for about `left` more.
    pub async fn acquire_lease(
        &self,
        item: &str,
        worker: &str,
    ) -> Result<Result<Lease, Duration>, FleetError> {
        // A JetStream error (a leader being elected) is tried again, bounded; an answer
        // (taken, or lost on the revision) is final. A try that timed out after writing
        // is found again as this worker's own lease.
        retry(&format!("lease key `{item}` in {}", names::LEASES), || {
            self.try_acquire_lease(item, worker)
        })
        .await
    }

    async fn try_acquire_lease(
        &self,
        item: &str,
        worker: &str,
    ) -> Result<Result<Lease, Duration>, FleetError> {
        let value = self.lease_value(worker)?;
        match self.leases.create(item, value.clone()).await {
            Ok(revision) => {
                return Ok(Ok(Lease {
                    item: item.to_string(),
                    worker: worker.to_string(),
                    revision,
                }))
            }
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(FleetError::js(
                    format!("create key `{item}` in {}", names::LEASES),
                    e,
                ))
            }
        }
        let entry = self
            .leases
            .entry(item)
            .await
            .map_err(|e| FleetError::js(format!("get key `{item}` in {}", names::LEASES), e))?;
        let busy = Duration::from_secs(1);
        let Some(entry) = entry else {
            return Ok(Err(busy));
        };
        let held: Option<LeaseRecord> = serde_json::from_slice(&entry.value).ok();
        let now = now_ms();
        let free = entry.operation != kv::Operation::Put
            || held
                .as_ref()
                .is_none_or(|h| h.worker == worker || h.expires_ms < now);
        if !free {
            let left = held.map_or(0, |h| h.expires_ms - now).max(0);
            return Ok(Err(Duration::from_millis(left.unsigned_abs())));
        }
        match self.leases.update(item, value, entry.revision).await {
            Ok(revision) => Ok(Ok(Lease {
                item: item.to_string(),
                worker: worker.to_string(),
                revision,
            })),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(Err(busy)),
            Err(e) => Err(FleetError::js(
                format!("update key `{item}` in {}", names::LEASES),
                e,
            )),
        }
    }

    /// Extends a held lease (compare-and-swap on its revision). `Err(LeaseLost)` when
    /// another worker wrote the key since: this worker no longer runs the item.
    pub async fn renew_lease(&self, lease: &mut Lease) -> Result<(), FleetError> {
        let value = self.lease_value(&lease.worker)?;
        let mut last = None;
        // A node failing over makes an update fail for a few seconds; the lease outlives
        // a few tries (about 15 s, as `retry`).
        let mut wait = Duration::from_millis(200);
        for _ in 0..8 {
            match self
                .leases
                .update(lease.item.as_str(), value.clone(), lease.revision)
                .await
            {
                Ok(revision) => {
                    lease.revision = revision;
                    return Ok(());
                }
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    // A timed-out try may have written it: ours if the record says so.
                    if let Ok(Some(entry)) = self.leases.entry(lease.item.as_str()).await {
                        let held: Option<LeaseRecord> = serde_json::from_slice(&entry.value).ok();
                        if entry.operation == kv::Operation::Put
                            && held.is_some_and(|h| h.worker == lease.worker)
                        {
                            lease.revision = entry.revision;
                            return Ok(());
                        }
                    }
                    return Err(FleetError::LeaseLost {
                        id: lease.item.clone(),
                    });
                }
                Err(e) => {
                    last = Some(e);
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(3));
                }
            }
        }
        Err(FleetError::js(
            format!("renew key `{}` in {}", lease.item, names::LEASES),
            last.map(|e| e.to_string()).unwrap_or_default(),
        ))
    }

    /// Gives a lease back (only if still held: a stale release never frees another
    /// worker's lease).
    pub async fn release_lease(&self, lease: &Lease) {
        let _ = self
            .leases
            .delete_expect_revision(lease.item.as_str(), Some(lease.revision))
            .await;
    }

    fn lease_value(&self, worker: &str) -> Result<Bytes, FleetError> {
        let ttl = i64::try_from(self.opts.ack_wait.as_millis()).unwrap_or(i64::MAX);
        let rec = LeaseRecord {
            worker: worker.to_string(),
            expires_ms: now_ms().saturating_add(ttl),
        };
        serde_json::to_vec(&rec)
            .map(Bytes::from)
            .map_err(|e| FleetError::js("encode lease", e))
    }

    /// Publishes a progress event (core NATS: fire and forget; the status bucket is the
    /// record).
    pub async fn publish_progress(&self, ev: &crate::ProgressEvent) {
        if let Ok(v) = serde_json::to_vec(ev) {
            let _ = self
                .client
                .publish(format!("{}.{}", names::PROGRESS_PREFIX, ev.item), v.into())
                .await;
        }
    }
}

/// The object name of an item's checkpoint.
pub fn checkpoint_name(id: &str) -> String {
    format!("checkpoint/{id}.tar.gz")
}

/// Opens the bucket, or makes it. The bucket's stream is made here with the settings the
/// client's `create_key_value` uses (`KV_<bucket>`, `$KV.<bucket>.>`, rollups, direct
/// get, discard new): that call first asks for the account's info in a shape
/// nats-server 2.9 does not answer, so it cannot make a bucket there.
async fn ensure_kv(
    js: &jetstream::Context,
    bucket: &str,
    history: i64,
    replicas: usize,
) -> Result<kv::Store, FleetError> {
    if let Ok(kv) = js.get_key_value(bucket).await {
        return Ok(kv);
    }
    retry(&format!("create bucket {bucket}"), || {
        js.get_or_create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: history,
            storage: stream::StorageType::File,
            num_replicas: replicas,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
    })
    .await?;
    js.get_key_value(bucket)
        .await
        .map_err(|e| FleetError::js(format!("open bucket {bucket}"), e))
}

/// Every key's value in a bucket, as the stream's leader has them: the keys are one
/// snapshot of the stream's subjects (stream info with a subject filter) and each value
/// is the last message on its subject. The client's `keys()` lists through a consumer
/// over the last message per subject, which delivers a key again each time it is
/// rewritten during the listing (a view of 4 busy workers listed 1,016 of them) and on
/// a busy bucket may not end.
async fn read_all<T: serde::de::DeserializeOwned>(
    store: &kv::Store,
    bucket: &str,
) -> Result<Vec<T>, FleetError> {
    let listing = |e: &dyn std::fmt::Display| FleetError::js(format!("list keys of {bucket}"), e);
    let subjects: Vec<(String, usize)> = store
        .stream
        .info_with_subjects(format!("{}>", store.prefix))
        .await
        .map_err(|e| listing(&e))?
        .try_collect()
        .await
        .map_err(|e| listing(&e))?;
    let keys: std::collections::BTreeSet<&str> = subjects
        .iter()
        .filter_map(|(s, _)| s.strip_prefix(store.prefix.as_str()))
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let value = leader_get(store, k)
            .await
            .map_err(|e| FleetError::js(format!("get key `{k}` in {bucket}"), e))?;
        if let Some(t) = value.and_then(|v| serde_json::from_slice(&v).ok()) {
            out.push(t);
        }
    }
    Ok(out)
}

/// A key's value as the stream's leader has it, `None` when it has none or was deleted.
/// The client's `get` asks any replica (direct get), and a replica that lags answers
/// with an older value: a status read just after an item ended could still say running.
async fn leader_get(
    store: &kv::Store,
    key: &str,
) -> Result<Option<Bytes>, stream::LastRawMessageError> {
    let subject = format!("{}{key}", store.prefix);
    match store.stream.get_last_raw_message_by_subject(&subject).await {
        // A delete, a purge or a server's marker is a message with a header and no value.
        Ok(m)
            if m.headers.get("KV-Operation").is_some()
                || m.headers.get("Nats-Marker-Reason").is_some() =>
        {
            Ok(None)
        }
        Ok(m) => Ok(Some(m.payload)),
        Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs a JetStream operation again while it fails, up to ~15 s: a cluster electing a
/// new leader after a node died answers nothing for a few seconds. Bounded.
pub(crate) async fn retry<T, E, F, Fut>(what: &str, mut op: F) -> Result<T, FleetError>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut wait = Duration::from_millis(200);
    let mut last = String::new();
    for _ in 0..8 {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(3));
    }
    Err(FleetError::js(what, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_as_keys() {
        assert!(check_id("fix-notes_2").is_ok());
        for bad in ["", "a.b", "a b", "a/b", "é"] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_over_their_bounds_are_refused() {
        let mut o = FleetOptions::new("nats://127.0.0.1:4222");
        assert!(o.check().is_ok());
        o.max_deliver = MAX_DELIVER + 1;
        let e = o.check().unwrap_err().to_string();
        assert!(e.contains("never raised"), "{e}");
        o.max_deliver = 3;
        o.replicas = 7;
        assert!(o.check().unwrap_err().to_string().contains("--replicas"));
    }

    #[test]
    fn credentials_in_urls_are_never_shown() {
        assert_eq!(
            redact_url("nats://alice:s3cret@10.0.0.1:4222,nats://10.0.0.2:4222"),
            "nats://***@10.0.0.1:4222,nats://10.0.0.2:4222"
        );
        assert_eq!(redact_url("tok@host:4222"), "***@host:4222");
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
    }

    #[test]
    fn urls_are_parsed_or_named() {
        assert_eq!(
            addrs("nats://127.0.0.1:1,nats://127.0.0.1:2")
                .unwrap()
                .len(),
            2
        );
        let e = addrs(" , ").unwrap_err().to_string();
        assert!(e.contains("--nats"), "{e}");
    }
}
