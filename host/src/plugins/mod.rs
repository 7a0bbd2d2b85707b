//! WASM plugins: components built against `wit/plugin.wit`, run sandboxed.
//!
//! [`load_dir`] reads every `<dir>/<plugin>/plugin.toml`, compiles (or loads from the
//! on-disk cache) each component and checks it against its world's contract; a broken
//! plugin is reported and skipped. Each call runs in a fresh store with memory, fuel and
//! wall-clock limits and an empty WASI context (no files, environment, arguments or
//! network); a trap becomes a [`PluginError`] naming the plugin and the cause.
//!
//! Using extractor plugins in a run:
//!
//! ```no_run
//! # use std::path::Path;
//! # use agentforge::extract::Extractors;
//! let (plugins, errors) = agentforge::plugins::load_dir(
//!     Path::new("plugins"),
//!     Path::new(".agentforge/cache/plugins"),
//! );
//! for e in &errors {
//!     eprintln!("warning: plugin skipped: {e}");
//! }
//! let mut extractors = Extractors::builtin();
//! for p in &plugins {
//!     if let Some(x) = p.as_extractor() {
//!         extractors.push(x);
//!     }
//! }
//! ```

mod manifest;
mod runtime;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use manifest::{LimitsOverride, Manifest, PluginKind, SUPPORTED_APIS};

use crate::extract::FactExtractor;
use crate::state_store::{ActionResult, Fact, FactCategory};

/// Host bindings of the `extractor` world of `agentforge:plugin@0.1.0`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "agentforge:plugin/extractor@0.1.0",
    });
}

use bindings::agentforge::plugin::types as wit;

/// Limits applied to every call of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory, in bytes.
    pub memory_bytes: usize,
    /// Fuel per call: a deterministic CPU budget (about one unit per WASM instruction).
    pub fuel: u64,
    /// Wall-clock deadline per call (rounded up to the epoch tick, 5 ms).
    pub deadline: Duration,
}

impl Default for Limits {
    /// 64 MiB, 2·10⁹ fuel (about a second of pure computation), 2 s.
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            fuel: 2_000_000_000,
            deadline: Duration::from_secs(2),
        }
    }
}

impl Limits {
    /// These limits with a manifest's `[limits]` overrides applied.
    pub fn with(self, o: &LimitsOverride) -> Limits {
        Limits {
            memory_bytes: o
                .memory_mib
                .map_or(self.memory_bytes, |m| (m as usize) << 20),
            fuel: o.fuel.unwrap_or(self.fuel),
            deadline: o.deadline_ms.map_or(self.deadline, Duration::from_millis),
        }
    }
}

/// Why a plugin could not be loaded; each names the plugin (or its manifest file).
#[derive(Debug, thiserror::Error)]
pub enum PluginLoadError {
    /// A file could not be read.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// `plugin.toml` is not valid TOML or has the wrong shape.
    #[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// `kind` is not one this host runs.
    #[error("plugin `{plugin}`: unknown kind `{kind}` (this host runs: extractor)")]
    UnknownKind {
        /// Plugin name.
        plugin: String,
        /// The kind as written.
        kind: String,
    },
    /// Built against an API version this host does not support.
    #[error("plugin `{plugin}` is built against API {api}; this host supports {supported}")]
    ApiMismatch {
        /// Plugin name.
        plugin: String,
        /// The manifest's `api`.
        api: String,
        /// Supported versions.
        supported: String,
    },
    /// The manifest requests a capability; none can be granted yet.
    #[error("plugin `{plugin}` requests capability `{capability}`, which is not granted")]
    Capability {
        /// Plugin name.
        plugin: String,
        /// The first capability requested.
        capability: String,
    },
    /// The component file named by the manifest does not exist.
    #[error("plugin `{plugin}`: component file {path} is missing")]
    MissingComponent {
        /// Plugin name.
        plugin: String,
        /// The expected file.
        path: PathBuf,
    },
    /// The file is not a component wasmtime can compile.
    #[error("plugin `{plugin}`: {path} is not a valid component: {message}")]
    Compile {
        /// Plugin name.
        plugin: String,
        /// The component file.
        path: PathBuf,
        /// Compiler message.
        message: String,
    },
    /// Imports or exports do not match the world of the declared kind and API.
    #[error("plugin `{plugin}` does not match the `{kind}` contract of API {api}: {message}")]
    ContractMismatch {
        /// Plugin name.
        plugin: String,
        /// Declared kind.
        kind: PluginKind,
        /// Declared API version.
        api: String,
        /// What does not match.
        message: String,
    },
    /// Two plugins in the loaded folders have the same name.
    #[error("two plugins are named `{plugin}`: {first} and {second}")]
    Duplicate {
        /// The name.
        plugin: String,
        /// Folder of the one kept.
        first: PathBuf,
        /// Folder of the one skipped.
        second: PathBuf,
    },
    /// Its first call (`handles`) failed.
    #[error("{0}")]
    Call(#[from] PluginError),
}

/// A failed plugin call: which plugin, and why.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}`: {cause}")]
pub struct PluginError {
    /// Plugin name.
    pub plugin: String,
    /// The cause.
    pub cause: PluginFailure,
    /// What the guest wrote to stderr during the call.
    pub stderr: String,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PluginFailure {
    /// Used up its fuel (CPU budget).
    #[error("out of fuel ({fuel} units)")]
    OutOfFuel {
        /// The budget.
        fuel: u64,
    },
    /// Ran past its wall-clock deadline.
    #[error("deadline of {deadline:?} exceeded")]
    Deadline {
        /// The deadline.
        deadline: Duration,
    },
    /// Tried to grow its memory past the limit.
    #[error("memory limit of {limit} bytes (asked for {requested})")]
    MemoryLimit {
        /// The limit.
        limit: usize,
        /// Size the memory would have grown to.
        requested: usize,
    },
    /// The guest panicked.
    #[error("panicked at {message}")]
    Panic {
        /// Location and message, from the guest's stderr.
        message: String,
    },
    /// Values crossing the boundary did not fit the contract.
    #[error("contract mismatch: {message}")]
    ContractMismatch {
        /// What did not fit.
        message: String,
    },
    /// Any other trap (out-of-bounds access, unreachable...).
    #[error("trapped: {message}")]
    Trap {
        /// The trap.
        message: String,
    },
}

/// A loaded plugin: its manifest and its pre-instantiated component.
pub struct LoadedPlugin {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The plugin folder.
    pub dir: PathBuf,
    /// The limits of its calls (defaults with the manifest's overrides).
    pub limits: Limits,
    /// Whether loading compiled the component (false: deserialized from the cache).
    pub compiled: bool,
    /// Time to load it (read, compile or deserialize, link, first `handles` call).
    pub load_time: Duration,
    inner: Arc<ExtractorInner>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.manifest.name)
            .field("dir", &self.dir)
            .field("compiled", &self.compiled)
            .finish_non_exhaustive()
    }
}

impl LoadedPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The plugin as an extractor for [`crate::extract::Extractors::push`], if it is one.
    pub fn as_extractor(&self) -> Option<Box<dyn FactExtractor>> {
        Some(Box::new(self.wasm_extractor()?))
    }

    /// The plugin as a [`WasmExtractor`] (typed errors via [`WasmExtractor::try_extract`]).
    pub fn wasm_extractor(&self) -> Option<WasmExtractor> {
        match self.manifest.kind() {
            Ok(PluginKind::Extractor) => Some(WasmExtractor {
                inner: self.inner.clone(),
            }),
            Err(_) => None,
        }
    }
}

/// Loads every plugin folder (a sub-folder with a `plugin.toml`) of `dir`, in name order,
/// caching compiled components in `cache` (created if needed). Folders without a
/// `plugin.toml` are not plugins and are ignored; a broken plugin is returned as an error
/// and skipped.
pub fn load_dir(dir: &Path, cache: &Path) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let mut plugins: Vec<LoadedPlugin> = Vec::new();
    let mut errors = Vec::new();
    let mut folders: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("plugin.toml").is_file())
            .collect(),
        Err(e) => {
            errors.push(PluginLoadError::Io {
                path: dir.to_path_buf(),
                message: e.to_string(),
            });
            return (plugins, errors);
        }
    };
    folders.sort();
    for folder in folders {
        match load_plugin(&folder, cache) {
            Ok(p) => match plugins.iter().find(|q| q.name() == p.name()) {
                Some(q) => errors.push(PluginLoadError::Duplicate {
                    plugin: p.name().to_string(),
                    first: q.dir.clone(),
                    second: p.dir,
                }),
                None => plugins.push(p),
            },
            Err(e) => errors.push(e),
        }
    }
    (plugins, errors)
}

/// Loads one plugin folder.
pub fn load_plugin(folder: &Path, cache: &Path) -> Result<LoadedPlugin, PluginLoadError> {
    let started = Instant::now();
    let manifest = Manifest::load(folder)?;
    let kind = manifest.kind()?;
    let path = folder.join(&manifest.component);
    let wasm = std::fs::read(&path).map_err(|e| PluginLoadError::Io {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let (component, compiled) =
        runtime::load_component(&wasm, cache).map_err(|e| PluginLoadError::Compile {
            plugin: manifest.name.clone(),
            path: path.clone(),
            message: format!("{e:#}"),
        })?;
    let mismatch = |e: anyhow::Error| PluginLoadError::ContractMismatch {
        plugin: manifest.name.clone(),
        kind,
        api: manifest.api.clone(),
        message: format!("{e:#}"),
    };
    let pre = runtime::runtime()
        .linker
        .instantiate_pre(&component)
        .map_err(mismatch)?;
    let pre = bindings::ExtractorPre::new(pre).map_err(mismatch)?;
    let limits = Limits::default().with(&manifest.limits);
    let mut inner = ExtractorInner {
        name: manifest.name.clone(),
        limits,
        pre,
        handles: Vec::new(),
        warm: manifest.reuse_instance.then(|| Mutex::new(None)),
    };
    inner.handles = inner.handles()?;
    Ok(LoadedPlugin {
        manifest,
        dir: folder.to_path_buf(),
        limits,
        compiled,
        load_time: started.elapsed(),
        inner: Arc::new(inner),
    })
}

struct ExtractorInner {
    name: String,
    limits: Limits,
    pre: bindings::ExtractorPre<runtime::CallState>,
    /// Tool names from `handles()`, asked once at load.
    handles: Vec<String>,
    /// The kept instance, for a plugin whose manifest sets `reuse_instance`.
    warm: Option<Mutex<Option<Warm>>>,
}

/// An instance kept between calls, with its store and stderr pipe.
struct Warm {
    store: wasmtime::Store<runtime::CallState>,
    stderr: wasmtime_wasi::p2::pipe::MemoryOutputPipe,
    instance: bindings::Extractor,
}

impl ExtractorInner {
    /// Runs `f` against a fresh instance in a fresh, limited store.
    fn call<R>(
        &self,
        f: impl FnOnce(
            &bindings::Extractor,
            &mut wasmtime::Store<runtime::CallState>,
        ) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if let Some(warm) = &self.warm {
            return self.call_warm(warm, f);
        }
        let (mut store, stderr) = runtime::new_store(&self.limits);
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|x| f(&x, &mut store));
        for line in &store.data().logs {
            eprintln!("plugin {}: {line}", self.name);
        }
        result.map_err(|e| runtime::failure(&self.name, &self.limits, &store, &stderr, e))
    }

    /// Like [`ExtractorInner::call`] on the kept instance (created on first use). A failed
    /// call discards it: a trapped instance may not be entered again, and its state is
    /// suspect.
    fn call_warm<R>(
        &self,
        warm: &Mutex<Option<Warm>>,
        f: impl FnOnce(
            &bindings::Extractor,
            &mut wasmtime::Store<runtime::CallState>,
        ) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let mut slot = warm.lock().unwrap_or_else(|p| p.into_inner());
        let mut w = match slot.take() {
            Some(mut w) => {
                runtime::arm(&mut w.store, &self.limits);
                w
            }
            None => {
                let (mut store, stderr) = runtime::new_store(&self.limits);
                let instance = self
                    .pre
                    .instantiate(&mut store)
                    .map_err(|e| runtime::failure(&self.name, &self.limits, &store, &stderr, e))?;
                Warm {
                    store,
                    stderr,
                    instance,
                }
            }
        };
        let result = f(&w.instance, &mut w.store);
        for line in &w.store.data().logs {
            eprintln!("plugin {}: {line}", self.name);
        }
        match result {
            Ok(r) => {
                *slot = Some(w);
                Ok(r)
            }
            Err(e) => Err(runtime::failure(
                &self.name,
                &self.limits,
                &w.store,
                &w.stderr,
                e,
            )),
        }
    }

    fn handles(&self) -> Result<Vec<String>, PluginError> {
        self.call(|x, s| x.call_handles(s))
    }
}

/// An extractor plugin behind the host's [`FactExtractor`] trait.
///
/// On any failure it returns no facts (so the host falls back to its generic fact) and
/// reports the error on stderr; [`WasmExtractor::try_extract`] returns the error instead.
#[derive(Clone)]
pub struct WasmExtractor {
    inner: Arc<ExtractorInner>,
}

impl WasmExtractor {
    /// Whether the plugin reads `tool`'s output (its `handles()` lists it or `*`).
    pub fn handles(&self, tool: &str) -> bool {
        self.inner.handles.iter().any(|h| h == "*" || h == tool)
    }

    /// The plugin's facts, or why the call failed.
    pub fn try_extract(
        &self,
        tool: &str,
        output: &str,
        result: ActionResult,
        step: u64,
    ) -> Result<Vec<Fact>, PluginError> {
        let r = match result {
            ActionResult::Success => wit::ActionResult::Success,
            ActionResult::Failure => wit::ActionResult::Failure,
            ActionResult::Partial => wit::ActionResult::Partial,
            ActionResult::Skipped => wit::ActionResult::Skipped,
        };
        let facts = self
            .inner
            .call(|x, s| x.call_extract(s, tool, output, r, step))?;
        Ok(facts
            .into_iter()
            .map(|f| Fact {
                id: String::new(),
                category: match f.category {
                    wit::FactCategory::CodeStructure => FactCategory::CodeStructure,
                    wit::FactCategory::Inference => FactCategory::Inference,
                    wit::FactCategory::Pattern => FactCategory::Pattern,
                    wit::FactCategory::Verification => FactCategory::Verification,
                    wit::FactCategory::Error => FactCategory::Error,
                },
                // The context is budgeted: a plugin cannot flood it with one fact.
                statement: cut(&f.statement, 300),
                confidence: if f.confidence.is_finite() {
                    f.confidence.clamp(0.0, 1.0)
                } else {
                    0.0
                },
                source: if f.source.is_empty() {
                    tool.to_string()
                } else {
                    f.source
                },
                step,
                supersedes: None,
            })
            .collect())
    }
}

impl FactExtractor for WasmExtractor {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn extract(&self, tool: &str, output: &str, result: ActionResult, step: u64) -> Vec<Fact> {
        if !self.handles(tool) {
            return Vec::new();
        }
        match self.try_extract(tool, output, result, step) {
            Ok(facts) => facts,
            Err(e) => {
                eprintln!("warning: {e}; falling back to the generic fact");
                Vec::new()
            }
        }
    }
}

/// `s` trimmed and cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}
