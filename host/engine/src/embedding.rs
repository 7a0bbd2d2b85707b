//! `[learning.embeddings]`: the run's side of the semantic precedents.
//!
//! An [`Embedder`] asks the configured endpoint for vectors: of the question before a
//! step (cached per question text), of the traces a step recorded, and of the traces a
//! backfill (`agentforge learn`) finds without one. Learning's methods are synchronous
//! (they run inside a step's `prepare` and after its log line), so the HTTP calls run on
//! one worker thread of the embedder's own with a current-thread runtime: the same from
//! any caller (a multi-thread runtime's worker, a current-thread runtime, no runtime),
//! and its runtime is dropped on that thread, never inside an async context.
//!
//! A run never stops or waits for the endpoint more than once: the first failure (a
//! missing key, an endpoint down, an invalid answer) is warned about once and the
//! embedder stops trying for the rest of the process (the run falls back to full-text
//! ranking; traces recorded meanwhile are embedded by the next `agentforge learn`). One
//! call is bounded by `timeout_secs`, attempts and waits included.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use agentforge_providers::{EmbeddingsClient, EmbeddingsError, EmbeddingsSettings};

/// `[learning.embeddings]` in `agentforge.toml`.
///
/// ```toml
/// [learning.embeddings]
/// url = "https://api.openai.com/v1/embeddings"
/// model = "text-embedding-3-small"
/// api_key_env = "OPENAI_API_KEY"   # the variable's name; the key is never in the config
/// dimensions = 384                 # optional: asked for, and required of every vector
/// timeout_secs = 10                # one call, retries included
/// batch = 64                       # traces per request of a backfill
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// The OpenAI-compatible embeddings endpoint (the whole URL, `.../v1/embeddings`).
    pub url: String,
    /// The embedding model (stored with each vector: another model's are ignored).
    pub model: String,
    /// The environment variable holding the key (none: no key is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The dimension asked of the model (`dimensions` in the request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    /// The deadline of one call, attempts and waits included (default 10).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Inputs per request when traces are embedded in bulk (default 64).
    #[serde(default = "default_batch")]
    pub batch: usize,
}

/// The most inputs one request may carry (the OpenAI API's limit).
pub const MAX_BATCH: usize = 2048;

fn default_timeout_secs() -> u64 {
    10
}

fn default_batch() -> usize {
    64
}

impl EmbeddingsConfig {
    /// Checks the values; an error is (field under `learning.embeddings`, message).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let url = self.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err((
                "learning.embeddings.url",
                format!("`{url}` is not an http(s) URL; give the whole endpoint, e.g. https://api.openai.com/v1/embeddings"),
            ));
        }
        if self.model.trim().is_empty() {
            return Err((
                "learning.embeddings.model",
                "must name the embedding model (e.g. text-embedding-3-small)".into(),
            ));
        }
        if let Some(var) = &self.api_key_env {
            let name = !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name {
                // Never echo the value: it may be the key itself.
                return Err((
                    "learning.embeddings.api_key_env",
                    "must be the name of the environment variable holding the key (letters, digits, _; e.g. OPENAI_API_KEY), never the key itself".into(),
                ));
            }
        }
        if self.dimensions == Some(0) {
            return Err((
                "learning.embeddings.dimensions",
                "must be at least 1 (or left out: the model's own)".into(),
            ));
        }
        if self.timeout_secs == 0 {
            return Err((
                "learning.embeddings.timeout_secs",
                "must be at least 1".into(),
            ));
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err((
                "learning.embeddings.batch",
                format!("must be 1 to {MAX_BATCH}"),
            ));
        }
        Ok(())
    }

    /// The client's settings.
    pub fn settings(&self) -> EmbeddingsSettings {
        EmbeddingsSettings {
            url: self.url.trim().to_string(),
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone(),
            dimensions: self.dimensions,
            timeout: Duration::from_secs(self.timeout_secs),
        }
    }
}

type Job = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// The embedding side of a workspace's learning.
pub struct Embedder {
    config: EmbeddingsConfig,
    /// Built on first use (a missing key is then the first failure).
    client: OnceLock<Result<Arc<EmbeddingsClient>, String>>,
    /// The worker thread's queue, started on first use.
    worker: Mutex<Option<mpsc::Sender<Job>>>,
    /// Set by the first failure of a run: no call is made after it.
    down: AtomicBool,
    /// The last question embedded and its vector.
    question: Mutex<Option<(String, Vec<f32>)>>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("url", &self.config.url)
            .field("model", &self.config.model)
            .field("down", &self.down)
            .finish()
    }
}

impl Embedder {
    /// An embedder for `config` (nothing is connected or read before the first call).
    pub fn new(config: EmbeddingsConfig) -> Embedder {
        Embedder {
            config,
            client: OnceLock::new(),
            worker: Mutex::new(None),
            down: AtomicBool::new(false),
            question: Mutex::new(None),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EmbeddingsConfig {
        &self.config
    }

    /// Whether a failure stopped this run's calls.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// The vectors of `inputs`, in order: one call to the endpoint (an error, not a
    /// warning: for `agentforge learn`).
    pub fn embed(&self, inputs: Vec<String>) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let client = match self.client.get_or_init(|| {
            EmbeddingsClient::new(&self.config.settings())
                .map(Arc::new)
                .map_err(|e| e.to_string())
        }) {
            Ok(c) => c.clone(),
            Err(message) => {
                return Err(EmbeddingsError::Config {
                    url: self.config.url.clone(),
                    message: message.clone(),
                })
            }
        };
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |rt| {
            let _ = tx.send(rt.block_on(async move { client.embed(&inputs).await }));
        });
        let lost = || EmbeddingsError::Config {
            url: self.config.url.clone(),
            message: "the embedding worker thread stopped".into(),
        };
        self.send(job).map_err(|_| lost())?;
        rx.recv().map_err(|_| lost())?
    }

    /// [`Embedder::embed`] during a run: `None` once a call failed, the failure warned
    /// about once (`warn` prints it).
    pub fn embed_for_run(
        &self,
        inputs: Vec<String>,
        warn: impl FnOnce(&EmbeddingsError),
    ) -> Option<Vec<Vec<f32>>> {
        if self.is_down() || inputs.is_empty() {
            return None;
        }
        match self.embed(inputs) {
            Ok(v) => Some(v),
            Err(e) => {
                if !self.down.swap(true, Ordering::Relaxed) {
                    warn(&e);
                }
                None
            }
        }
    }

    /// The vector of a step's question, embedded once per distinct text; `None` once
    /// the run's calls stopped.
    pub fn question_vector(
        &self,
        text: &str,
        warn: impl FnOnce(&EmbeddingsError),
    ) -> Option<Vec<f32>> {
        let mut cached = self.question.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, v)) = cached.as_ref() {
            if t == text {
                return Some(v.clone());
            }
        }
        let v = self
            .embed_for_run(vec![text.to_string()], warn)?
            .into_iter()
            .next()?;
        *cached = Some((text.to_string(), v.clone()));
        Some(v)
    }

    /// Queues `job` on the worker thread, starting it on first use.
    fn send(&self, job: Job) -> Result<(), ()> {
        let mut worker = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        if worker.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|_| ())?;
            std::thread::Builder::new()
                .name("agentforge-embeddings".into())
                .spawn(move || {
                    // Ends when the embedder (the queue's sender) is dropped; the runtime
                    // is dropped here, outside any async context.
                    for job in rx {
                        job(&rt);
                    }
                })
                .map_err(|_| ())?;
            *worker = Some(tx);
        }
        worker
            .as_ref()
            .expect("started above")
            .send(job)
            .map_err(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EmbeddingsConfig {
        toml::from_str(
            "url = \"http://127.0.0.1:9/v1/embeddings\"\nmodel = \"m\"\napi_key_env = \"EMBED_KEY_FOR_TEST\"\n",
        )
        .unwrap()
    }

    #[test]
    fn defaults_and_checks_name_the_field() {
        let c = config();
        assert_eq!((c.timeout_secs, c.batch, c.dimensions), (10, 64, None));
        c.validate().unwrap();
        let bad = |f: &dyn Fn(&mut EmbeddingsConfig)| {
            let mut c = config();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(
            bad(&|c| c.url = "ftp://x".into()).0,
            "learning.embeddings.url"
        );
        assert_eq!(
            bad(&|c| c.model = " ".into()).0,
            "learning.embeddings.model"
        );
        let (field, m) = bad(&|c| c.api_key_env = Some("sk-live abc=".into()));
        assert_eq!(field, "learning.embeddings.api_key_env");
        assert!(!m.contains("sk-live"), "{m}");
        assert_eq!(
            bad(&|c| c.dimensions = Some(0)).0,
            "learning.embeddings.dimensions"
        );
        assert_eq!(
            bad(&|c| c.timeout_secs = 0).0,
            "learning.embeddings.timeout_secs"
        );
        assert_eq!(bad(&|c| c.batch = 5000).0, "learning.embeddings.batch");
    }

    #[test]
    fn a_failure_is_warned_once_and_stops_the_calls() {
        // The key's variable is unset: the first call fails before any connection.
        let e = Embedder::new(config());
        let mut warnings = 0;
        assert!(e.question_vector("q", |_| warnings += 1).is_none());
        assert!(e.is_down());
        assert!(e
            .embed_for_run(vec!["t".into()], |_| warnings += 1)
            .is_none());
        assert!(e.question_vector("other", |_| warnings += 1).is_none());
        assert_eq!(warnings, 1);
    }
}
