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
//! # use agentforge_core::extract::Extractors;
//! let (plugins, errors) = agentforge_plugin_host::load_dir(
//!     Path::new("plugins"),
//!     Path::new(".agentforge/cache/plugins"),
//! );
//! for e in &errors {
//!     eprintln!("warning: plugin skipped: {e}");
//! }
//! let mut extractors = Extractors::default();
//! for p in &plugins {
//!     if let Some(x) = p.as_extractor() {
//!         extractors.push(x);
//!     }
//! }
//! ```
//!
//! The other kinds: [`LoadedPlugin::as_gate`], [`LoadedPlugin::as_guard`],
//! [`LoadedPlugin::as_schema`], [`LoadedPlugin::as_tool`]. [`load_dir_with`] passes the
//! workspace `read-file` is confined to, the project's grants, limit overrides, guards'
//! `on_error` and plugin config, and the task's declared checks for `run-check`.
//! [`load_builtin`] loads the built-in plugins embedded in the host, and
//! `agentforge_engine::executor::Runtime::load_plugins` wires all of them into a run.

mod bindings;
mod capabilities;
mod engine_config;
mod epoch;
mod kinds;
mod manifest;
mod output;
mod runtime;
pub use epoch::ticks as epoch_ticks;
pub use runtime::{clean_cache, CACHE_CAP_BYTES};
mod stamp;
mod task_types;
mod tools;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::Digest as _;

use runtime::Trust;

pub use capabilities::{Capabilities, DeclaredChecks, LEARNED_RULES_KEY, MAX_READ_BYTES};
pub use kinds::{action_arguments, WasmGate, WasmGuard};
pub use manifest::{
    check_name, ApiVersion, InvalidName, LimitsOverride, Manifest, OnError, PluginKind,
    ProjectLimits, SUPPORTED_APIS,
};
pub use task_types::WasmSchema;
pub use tools::{check_arguments, ToolInfo, WasmTool};

use agentforge_core::extract::FactExtractor;
use agentforge_core::gates::Gate;
use agentforge_core::guards::Guard;
use agentforge_core::state::{ActionResult, Fact, FactCategory};
use agentforge_store::tools::Workspace;

use bindings::v0_3::types as wit;
use bindings::{v0_1, v0_2, v0_3};

/// Largest total of strings a call may return (facts, a verdict's summary, a guard's
/// reason). What crosses the boundary is bounded by the memory limit anyway; this cap
/// makes a flood a named failure instead of a context the host has to cut.
pub const MAX_RETURN_BYTES: usize = 1 << 20;
/// Log lines kept per plugin across calls (for `plugins list` and tests).
const RECENT_LOG_LINES: usize = 200;

/// Limits applied to every call of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory, in bytes.
    pub memory_bytes: usize,
    /// Fuel per call: a deterministic CPU budget (about one unit per WASM instruction).
    /// Folder plugins only: the built-ins' engine counts no fuel (`Trust::Builtin`).
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

/// The most any configuration can set, the project's included: limits are bounds, and
/// a bound that configuration can lift without end is none.
pub const HARD_LIMITS: Limits = Limits {
    memory_bytes: 4096 << 20,
    fuel: 1_000_000_000_000,
    deadline: Duration::from_secs(600),
};

impl Limits {
    /// Each limit the smaller of the two.
    pub fn min(self, other: Limits) -> Limits {
        Limits {
            memory_bytes: self.memory_bytes.min(other.memory_bytes),
            fuel: self.fuel.min(other.fuel),
            deadline: self.deadline.min(other.deadline),
        }
    }

    /// The limits of a plugin's calls: the defaults, then what its manifest asks for (a
    /// folder plugin's capped at the project's ceilings), then the project's own limits
    /// for it, all within [`HARD_LIMITS`]. Returns the notes on what was capped.
    pub fn resolve(
        manifest: &LimitsOverride,
        project: &ProjectLimits,
        name: &str,
        trusted: bool,
    ) -> (Limits, Vec<String>) {
        let mut notes = Vec::new();
        let mut asked = manifest.clone();
        if !trusted {
            let c = &project.ceiling;
            for (key, want, max) in [
                ("memory_mib", &mut asked.memory_mib, c.memory_mib),
                ("fuel", &mut asked.fuel, c.fuel),
                ("deadline_ms", &mut asked.deadline_ms, c.deadline_ms),
            ] {
                if let (Some(w), Some(m)) = (*want, max) {
                    if w > m {
                        notes.push(format!(
                            "host: the manifest asks for `{key} = {w}`; capped at the project's ceiling {m} (agentforge.toml `[plugins.limits] {key}`, or `[plugins.limits.{name}]` for this plugin)"
                        ));
                        *want = Some(m);
                    }
                }
            }
        }
        let limits = Limits::default()
            .with(&asked)
            .with(&project.for_plugin(name));
        let bounded = limits.min(HARD_LIMITS);
        if bounded != limits {
            notes.push(format!(
                "host: limits capped at the host's maximum ({} MiB, {} fuel, {:?})",
                HARD_LIMITS.memory_bytes >> 20,
                HARD_LIMITS.fuel,
                HARD_LIMITS.deadline
            ));
        }
        (bounded, notes)
    }

    /// These limits with a manifest's `[limits]` overrides applied.
    pub fn with(self, o: &LimitsOverride) -> Limits {
        Limits {
            memory_bytes: o.memory_mib.map_or(self.memory_bytes, |m| {
                usize::try_from(m.min(1 << 20)).unwrap_or(usize::MAX) << 20
            }),
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
    #[error(
        "plugin `{plugin}`: unknown kind `{kind}` (this host runs: {})",
        PluginKind::NAMES
    )]
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
    /// The manifest requests a capability the host cannot grant (an unknown kind of
    /// capability, a bad glob).
    #[error(
        "plugin `{plugin}` requests capability `{capability}`, which cannot be granted: {message}"
    )]
    Capability {
        /// Plugin name.
        plugin: String,
        /// The capability as requested.
        capability: String,
        /// Why.
        message: String,
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
    /// What the plugin describes about itself does not hold (a schema's phase graph, a
    /// tool's name or argument schema, two plugins claiming one task type or tool).
    #[error("plugin `{plugin}`: {message}")]
    Invalid {
        /// Plugin name.
        plugin: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// Its first call (`handles`, `checks`, `describe`) failed.
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
    /// Recursed too deep: the call stack is exhausted.
    #[error("stack overflow (call stack exhausted, e.g. by deep recursion)")]
    StackOverflow,
    /// Wrote or returned more than the host accepts.
    #[error("output too large: {what} of at least {size} bytes, beyond the cap of {limit}")]
    OutputTooLarge {
        /// What was too large (`stdout/stderr`, `returned facts`, ...).
        what: &'static str,
        /// The cap, in bytes.
        limit: usize,
        /// The size reached, in bytes.
        size: usize,
    },
    /// Called `exit` (WASI `exit`, `std::process::exit`): the call ends without a result.
    #[error("exited with code {code} instead of returning a result")]
    Exit {
        /// The exit code.
        code: i32,
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
    /// What the host changed of the manifest's requests (limits capped at the project's
    /// ceilings, `reuse_instance` not granted), for the caller to show where the plugin
    /// is used.
    pub notes: Vec<String>,
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The plugin folder.
    pub dir: PathBuf,
    /// The limits of its calls (defaults, then the manifest's, then the project's overrides).
    pub limits: Limits,
    /// Capabilities usable by the plugin: requested by the manifest and granted by the
    /// project (as requested and granted globs; the host checks both on each access).
    pub granted: Capabilities,
    /// Whether loading compiled the component (false: deserialized from the cache).
    pub compiled: bool,
    /// Time to load it (read, compile or deserialize, link, first `handles` call).
    pub load_time: Duration,
    inner: Arc<Inner>,
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

    /// The kind the plugin was loaded as.
    pub fn kind(&self) -> PluginKind {
        self.inner.pre.kind()
    }

    /// The plugin as an extractor for [`agentforge_core::extract::Extractors::push`], if it is one.
    pub fn as_extractor(&self) -> Option<Box<dyn FactExtractor>> {
        Some(Box::new(self.wasm_extractor()?))
    }

    /// The plugin as a [`WasmExtractor`] (typed errors via [`WasmExtractor::try_extract`]).
    pub fn wasm_extractor(&self) -> Option<WasmExtractor> {
        (self.kind() == PluginKind::Extractor).then(|| WasmExtractor {
            inner: self.inner.clone(),
        })
    }

    /// The plugin as the run's quality gate (`Runtime::gate`), if it is a gate.
    pub fn as_gate(&self) -> Option<Box<dyn Gate>> {
        Some(Box::new(self.wasm_gate()?))
    }

    /// The plugin as a [`WasmGate`] (typed errors via [`WasmGate::try_evaluate`]).
    pub fn wasm_gate(&self) -> Option<WasmGate> {
        (self.kind() == PluginKind::Gate).then(|| WasmGate::new(self.inner.clone()))
    }

    /// The plugin as a guard for [`agentforge_core::guards::Guards::push`], if it is one.
    pub fn as_guard(&self) -> Option<Box<dyn Guard>> {
        Some(Box::new(self.wasm_guard()?))
    }

    /// The plugin as a [`WasmGuard`] (typed errors via [`WasmGuard::try_check`]).
    pub fn wasm_guard(&self) -> Option<WasmGuard> {
        (self.kind() == PluginKind::Guard).then(|| WasmGuard::new(self.inner.clone()))
    }

    /// The plugin as a task type for [`agentforge_context::schemas::SchemaRegistry::register`], if it
    /// is a context schema.
    pub fn as_schema(&self) -> Option<WasmSchema> {
        let info = self.inner.schema.clone()?;
        Some(WasmSchema::new(self.inner.clone(), info))
    }

    /// The plugin as an action for the model, if it is a tool.
    pub fn as_tool(&self) -> Option<WasmTool> {
        let info = self.inner.tool.clone()?;
        Some(WasmTool::new(self.inner.clone(), info))
    }

    /// Whether `other` is the same plugin: the same manifest and the same component
    /// bytes (a copy of a built-in in a plugin folder, say).
    pub fn is_copy_of(&self, other: &LoadedPlugin) -> bool {
        self.manifest == other.manifest && self.inner.digest == other.inner.digest
    }

    /// Whether it is one of the host's built-in plugins ([`load_builtin`]).
    pub fn is_builtin(&self) -> bool {
        self.inner.builtin
    }

    /// The API version the plugin was built against, as the host dispatches on it.
    pub fn api(&self) -> ApiVersion {
        self.inner.pre.api()
    }

    /// What the plugin names: the tools an extractor handles, the checks a gate judges,
    /// a schema's task type, a tool's action name.
    pub fn claims(&self) -> Vec<String> {
        if let Some(s) = &self.inner.schema {
            return vec![s.name.clone()];
        }
        if let Some(t) = &self.inner.tool {
            return vec![t.name.clone()];
        }
        self.inner.handles.clone()
    }

    /// The latest lines of the plugin's log (its `log` calls and the host's notes, such
    /// as refused capabilities), oldest first.
    pub fn recent_log(&self) -> Vec<String> {
        self.inner.recent_log()
    }
}

/// What loading needs from the project: the workspace `read-file` is confined to, the
/// `[plugins]` config (grants, limit overrides, guards' `on_error`, plugin config) and
/// the task's declared checks (for `run-check`).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The workspace; without one no file is readable whatever is granted.
    pub workspace: Option<Workspace>,
    /// The project's `[plugins]` table.
    pub config: PluginsConfig,
    /// The checks `run-check` may run, set when a task is opened.
    pub checks: DeclaredChecks,
}

impl LoadOptions {
    /// Options for a run in `workspace` with the project's `[plugins]` config.
    pub fn new(workspace: &Workspace, config: &PluginsConfig) -> LoadOptions {
        LoadOptions {
            workspace: Some(workspace.clone()),
            config: config.clone(),
            checks: DeclaredChecks::default(),
        }
    }
}

/// Loads every plugin folder (a sub-folder with a `plugin.toml`) of `dir`, in name order,
/// caching compiled components in `cache` (created if needed). Folders without a
/// `plugin.toml` are not plugins and are ignored; a broken plugin is returned as an error
/// and skipped. No workspace and no grants: see [`load_dir_with`].
pub fn load_dir(dir: &Path, cache: &Path) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    load_dir_with(dir, cache, &LoadOptions::default())
}

/// [`load_dir`] with the project's workspace and `[plugins]` config: [`scan_dir`], then
/// [`load_folders`].
pub fn load_dir_with(
    dir: &Path,
    cache: &Path,
    opts: &LoadOptions,
) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let scanned = match scan_entries(dir) {
        Ok(scanned) => scanned,
        Err(e) => return (Vec::new(), vec![e]),
    };
    let mut loaded = in_parallel(&scanned, |entry| match entry {
        Ok(f) => Some(f.load(cache, opts)),
        Err(_) => None,
    });
    // Errors in folder order, whether of the manifest or of the component.
    let mut plugins = Vec::new();
    let mut errors = Vec::new();
    for (entry, result) in scanned.into_iter().zip(loaded.drain(..)) {
        match (entry, result) {
            (Err(e), _) => errors.push(e),
            (Ok(_), Some(Ok(p))) => plugins.push(p),
            (Ok(_), Some(Err(e))) => errors.push(e),
            (Ok(_), None) => unreachable!("every scanned folder is loaded"),
        }
    }
    (plugins, errors)
}

/// A plugin folder whose manifest is read and checked and whose component is not loaded
/// yet: what a run needs to decide when to load it (its kind) and to report a duplicate.
#[derive(Debug, Clone)]
pub struct PluginFolder {
    /// The folder.
    pub dir: PathBuf,
    /// Its parsed manifest.
    pub manifest: Manifest,
}

impl PluginFolder {
    /// The kind its manifest declares (checked when the manifest was read).
    pub fn kind(&self) -> Option<PluginKind> {
        self.manifest.kind().ok()
    }

    /// Loads its component (see [`load_plugin_with`]).
    pub fn load(&self, cache: &Path, opts: &LoadOptions) -> Result<LoadedPlugin, PluginLoadError> {
        load_manifested(
            &self.dir,
            self.manifest.clone(),
            cache,
            opts,
            Instant::now(),
        )
    }
}

/// The plugin folders of `dir` (sub-folders with a `plugin.toml`), in name order, with
/// their manifests read and checked but no component loaded: a run loads each when its
/// kind is first needed ([`load_folders`]). A broken manifest is an error and skipped; a
/// second folder of the same plugin name is [`PluginLoadError::Duplicate`].
pub fn scan_dir(dir: &Path) -> (Vec<PluginFolder>, Vec<PluginLoadError>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    match scan_entries(dir) {
        Ok(entries) => {
            for entry in entries {
                match entry {
                    Ok(f) => found.push(f),
                    Err(e) => errors.push(e),
                }
            }
        }
        Err(e) => errors.push(e),
    }
    (found, errors)
}

/// [`scan_dir`] with each folder's outcome in name order.
fn scan_entries(dir: &Path) -> Result<Vec<Result<PluginFolder, PluginLoadError>>, PluginLoadError> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| PluginLoadError::Io {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("plugin.toml").is_file())
        .collect();
    folders.sort();
    let mut entries: Vec<Result<PluginFolder, PluginLoadError>> = Vec::new();
    for folder in folders {
        let entry = Manifest::load(&folder).and_then(|manifest| {
            let first = entries
                .iter()
                .flatten()
                .find(|f| f.manifest.name == manifest.name);
            match first {
                Some(first) => Err(PluginLoadError::Duplicate {
                    plugin: manifest.name,
                    first: first.dir.clone(),
                    second: folder.clone(),
                }),
                None => Ok(PluginFolder {
                    dir: folder.clone(),
                    manifest,
                }),
            }
        });
        entries.push(entry);
    }
    Ok(entries)
}

/// Loads the components of `folders` (in parallel, results in the folders' order); a
/// broken plugin is returned as an error and skipped.
pub fn load_folders(
    folders: Vec<PluginFolder>,
    cache: &Path,
    opts: &LoadOptions,
) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let mut plugins = Vec::new();
    let mut errors = Vec::new();
    for loaded in in_parallel(&folders, |f| f.load(cache, opts)) {
        match loaded {
            Ok(p) => plugins.push(p),
            Err(e) => errors.push(e),
        }
    }
    (plugins, errors)
}

/// All of `path` if it is a regular file of at most `cap` bytes: the host's one bounded
/// read ([`agentforge_store::tools::read_regular_file`]), for a plugin folder's manifest and
/// component (a FIFO or a device is never read, a file past the cap never loaded whole).
fn read_whole(path: &Path, cap: u64) -> Result<Vec<u8>, agentforge_store::tools::ReadError> {
    agentforge_store::tools::read_regular_file(path, cap)?.complete()
}

/// The `plugin.toml` of `folder` as a TOML table, read leniently (no validation) for
/// listings; `None` when it is not a small regular file of valid TOML.
pub fn manifest_table(folder: &Path) -> Option<toml::Table> {
    let bytes = read_whole(&folder.join("plugin.toml"), manifest::MAX_MANIFEST_BYTES).ok()?;
    toml::from_str(std::str::from_utf8(&bytes).ok()?).ok()
}

/// Loads one plugin folder (no workspace, no grants: see [`load_plugin_with`]).
pub fn load_plugin(folder: &Path, cache: &Path) -> Result<LoadedPlugin, PluginLoadError> {
    load_plugin_with(folder, cache, &LoadOptions::default())
}

/// Loads one plugin folder with the project's workspace and `[plugins]` config.
pub fn load_plugin_with(
    folder: &Path,
    cache: &Path,
    opts: &LoadOptions,
) -> Result<LoadedPlugin, PluginLoadError> {
    let started = Instant::now();
    let manifest = Manifest::load(folder)?;
    load_manifested(folder, manifest, cache, opts, started)
}

/// Loads the component of the plugin in `folder` whose manifest is `manifest`.
fn load_manifested(
    folder: &Path,
    manifest: Manifest,
    cache: &Path,
    opts: &LoadOptions,
    started: Instant,
) -> Result<LoadedPlugin, PluginLoadError> {
    let path = manifest.component_path(folder)?;
    // A warm start: the digest remembered for this very version of the file (same
    // inode, size and times; see `stamp.rs`) selects its compiled code, and the component
    // is neither read nor hashed. Anything else reads, hashes and checks it.
    let stamp = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .map(|m| stamp::Stamp::of(&m))
    };
    let before = stamp(&path);
    if let Some(digest) = before
        .as_ref()
        .and_then(|s| runtime::remembered_digest(cache, &path, s))
    {
        if let Some(component) = runtime::cached_component(Trust::Sandboxed, &digest, cache) {
            let code = Code {
                component,
                compiled: false,
                digest,
            };
            return load_parts(Origin::Folder, folder, manifest, code, opts, started);
        }
    }
    let read_at = std::time::SystemTime::now();
    let wasm =
        read_whole(&path, manifest::MAX_COMPONENT_BYTES).map_err(|e| PluginLoadError::Io {
            path: path.clone(),
            message: e.to_string(),
        })?;
    let after = stamp(&path);
    // Checked before the compiler sees it: its error would quote the file's first bytes.
    if !wasm.starts_with(b"\0asm") {
        return Err(PluginLoadError::Compile {
            plugin: manifest.name.clone(),
            path,
            message:
                "not a WebAssembly file (no `\\0asm` header); build the plugin for wasm32-wasip2"
                    .to_string(),
        });
    }
    let digest: [u8; 32] = sha2::Sha256::digest(&wasm).into();
    let (component, compiled) = runtime::load_component(Trust::Sandboxed, &wasm, &digest, cache)
        .map_err(|e| compile_error(&manifest, &path, e))?;
    if let (Some(before), Some(after)) = (before, after) {
        runtime::remember_digest(cache, &path, (&before, &after), read_at, &digest);
    }
    let code = Code {
        component,
        compiled,
        digest,
    };
    load_parts(Origin::Folder, folder, manifest, code, opts, started)
}

/// A component ready to link: its compiled code and the SHA-256 of its bytes.
struct Code {
    component: Arc<wasmtime::component::Component>,
    /// Whether loading compiled it (false: deserialized from the cache or precompiled).
    compiled: bool,
    digest: [u8; 32],
}

/// The load error of a component wasmtime refused.
fn compile_error(manifest: &Manifest, path: &Path, e: wasmtime::Error) -> PluginLoadError {
    PluginLoadError::Compile {
        plugin: manifest.name.clone(),
        path: path.to_path_buf(),
        message: format!("{e:#}"),
    }
}

/// `[plugins]`: folders, and what the project allows each plugin (by name).
///
/// ```toml
/// [plugins]
/// dirs = ["plugins"]
/// replace = ["gate-tests-pass"]       # built-in guards/gates a folder plugin may replace
/// reuse_instance = ["extract-mytool"] # may keep one instance between calls
/// [plugins.grants.lint-context]       # capabilities granted; the plugin gets those it
/// read = ["src/**/*.rs"]              # also requests in its plugin.toml
/// checks = ["tests"]                  # run-check: declared checks it may run
/// [plugins.limits]                    # ceilings for what a manifest's [limits] may ask
/// memory_mib = 256                    # (defaults: 256 MiB, 2·10¹⁰ fuel, 10 000 ms)
/// [plugins.limits.gate-command]       # the project's own limits for one plugin
/// fuel = 100000000
/// [plugins.on_error]                  # guards: what a failed call decides
/// guard-tested-evidence = "allow"     # default "deny" (fail closed)
/// [plugins.config.gate-tests-pass]    # the plugin's config(), over its manifest's [config]
/// checks = ["tests", "integration"]
/// [plugins.grants.my-rules]           # a folder plugin's `learned_rules`: the approved
/// learned_rules = true                # rules as `rules` in its config() (built-ins: always)
/// ```
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// Plugin folders.
    pub dirs: Vec<PathBuf>,
    /// Capabilities granted per plugin name.
    pub grants: std::collections::BTreeMap<String, Capabilities>,
    /// Ceilings for the limits a manifest may request, and the project's limits per
    /// plugin name (`memory_mib`, `fuel`, `deadline_ms`).
    pub limits: ProjectLimits,
    /// Guards' failure effect per plugin name (`deny` or `allow`), over the manifest's.
    pub on_error: std::collections::BTreeMap<String, OnError>,
    /// Configuration per plugin name, over the keys of the manifest's `[config]`.
    pub config: std::collections::BTreeMap<String, toml::Table>,
    /// Built-in guards and gates that folder plugins may replace (by the built-in's
    /// name): a folder plugin of that name, or a folder gate taking over checks the
    /// built-in judges. Anything else that would replace one is refused.
    pub replace: Vec<String>,
    /// Folder plugins allowed to keep one instance between calls when their manifest
    /// asks (`reuse_instance = true`); others get a fresh instance per call.
    pub reuse_instance: Vec<String>,
    /// The learned rules a person approved, each a JSON object (`{"id", "action",
    /// "target_glob", "condition", "effect", "reason", "pattern"}`; the shape is the
    /// `guard-learned-rules` plugin's to check). Not read from `agentforge.toml`: the
    /// engine fills it from the trace database when a run starts. A plugin that
    /// requests the `learned_rules` capability and is granted it (built-ins are) gets
    /// them as the `rules` key of its `config()`.
    #[serde(skip)]
    pub learned_rules: Vec<serde_json::Value>,
}

/// A built-in plugin as the host embeds it (`agentforge-builtins` generates the table
/// at build time, with what is known then: the manifest's kind and the digests).
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// Its folder under `plugins/`.
    pub folder: &'static str,
    /// Its `plugin.toml`.
    pub manifest: &'static str,
    /// The manifest's `kind`, as written (`extractor`, `gate`, ...).
    pub kind: &'static str,
    /// The manifest's `task_type` (context schemas that name theirs).
    pub task_type: Option<&'static str>,
    /// The component.
    pub wasm: &'static [u8],
    /// The component precompiled for the host's engine configuration.
    pub precompiled: &'static [u8],
    /// SHA-256 of `wasm` (a copy in a plugin folder is told by it).
    pub wasm_sha256: [u8; 32],
}

impl Embedded {
    /// The kind its manifest declares (`None` for a kind this host does not know).
    pub fn kind(&self) -> Option<PluginKind> {
        PluginKind::from_manifest(self.kind)
    }
}

/// Loads the built-in plugins `builtins` (as `agentforge-builtins` embeds them). The
/// precompiled code is used when wasmtime accepts it; otherwise the component is
/// compiled and cached in `cache`. They are trusted: each keeps its instance between
/// calls. `dir` of each is `builtin:<folder>`.
pub fn load_builtin(
    builtins: &[Embedded],
    cache: &Path,
    opts: &LoadOptions,
) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let mut plugins = Vec::new();
    let mut errors = Vec::new();
    let load = |b: &Embedded| {
        let started = Instant::now();
        let dir = PathBuf::from(format!("builtin:{}", b.folder));
        Manifest::parse(b.manifest, &dir.join("plugin.toml")).and_then(|mut m| {
            // Trusted, so extractors, task types and guards keep their instance (compiled
            // regexes; a guard is asked about every action, and a fresh instance was
            // most of its cost). The built-in guards keep nothing between calls: each
            // decision is a function of its arguments. Gates (a call per check run)
            // still get a fresh store per call.
            let kind = m.kind()?;
            m.reuse_instance = matches!(
                kind,
                PluginKind::Extractor | PluginKind::ContextSchema | PluginKind::Guard
            );
            let path = dir.join(&m.component);
            let digest = b.wasm_sha256;
            let (component, compiled) =
                runtime::load_precompiled(b.precompiled, b.wasm, &digest, cache)
                    .map_err(|e| compile_error(&m, &path, e))?;
            let code = Code {
                component,
                compiled,
                digest,
            };
            load_parts(Origin::Builtin, &dir, m, code, opts, started)
        })
    };
    for loaded in in_parallel(builtins, load) {
        match loaded {
            Ok(p) => plugins.push(p),
            Err(e) => errors.push(e),
        }
    }
    (plugins, errors)
}

/// Which folder plugins may take the place of built-in guards and gates: a guard or
/// gate named like a built-in one, or a gate that takes over checks a built-in gate
/// names (its exact check names, or `*`), needs the built-in's name in the project's
/// `[plugins] replace`. Without it the folder plugin is not loaded: a plugin dropped in
/// a folder must not silently disable a safety check (a completion guard, the tests
/// gate). Returns the plugins kept and the errors for those refused; each replacement
/// granted is announced on stderr, at every run.
pub fn replacements(
    builtin: &[LoadedPlugin],
    folder: Vec<LoadedPlugin>,
    allowed: &[String],
) -> (Vec<LoadedPlugin>, Vec<String>) {
    let guarded = |p: &LoadedPlugin| matches!(p.kind(), PluginKind::Guard | PluginKind::Gate);
    let mut kept = Vec::new();
    let mut refused = Vec::new();
    for p in folder {
        // A folder holding a copy of a built-in (the bundled `plugins/` folder) replaces
        // nothing: the built-in stays.
        if builtin.iter().any(|b| b.is_copy_of(&p)) {
            continue;
        }
        let mut replaced: Vec<&LoadedPlugin> = builtin
            .iter()
            .filter(|b| guarded(b) && b.name() == p.name())
            .collect();
        if p.kind() == PluginKind::Gate {
            let claims = p.claims();
            replaced.extend(builtin.iter().filter(|b| {
                b.kind() == PluginKind::Gate
                    && b.name() != p.name()
                    && b.claims().iter().any(|c| claims.contains(c))
            }));
        }
        let missing: Vec<&str> = replaced
            .iter()
            .map(|b| b.name())
            .filter(|n| !allowed.iter().any(|a| a == n))
            .collect();
        if missing.is_empty() {
            for b in &replaced {
                eprintln!(
                    "note: plugin `{}` ({}) replaces built-in {} `{}` (agentforge.toml `[plugins] replace`)",
                    p.name(),
                    p.dir.display(),
                    b.kind(),
                    b.name()
                );
            }
            kept.push(p);
        } else {
            let list = missing
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ");
            refused.push(format!(
                "plugin `{}` ({}) not loaded: it would replace built-in {} {list}; a built-in guard or gate is replaced only when the project says so: add `replace = [{list}]` to `[plugins]` in agentforge.toml",
                p.name(),
                p.dir.display(),
                if p.kind() == PluginKind::Guard { "guard" } else { "gate" },
            ));
        }
    }
    (kept, refused)
}

/// `f` over `items` on up to one thread per core (loading is mostly compiling or
/// deserializing code, which parallelizes), results in the order of `items`.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Where compiled components are cached by default: `$AGENTFORGE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/agentforge/plugins`, else `$HOME/.cache/agentforge/plugins` (absolute
/// paths only), else a per-user folder in the temporary folder. Entries are keyed by
/// content and engine, so one cache serves every project and version; a folder that is
/// not this user's alone is not used (see the runtime).
pub fn default_cache_dir() -> PathBuf {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(d) = absolute(std::env::var_os("AGENTFORGE_CACHE_DIR")) {
        return d;
    }
    absolute(std::env::var_os("XDG_CACHE_HOME"))
        .or_else(|| absolute(std::env::var_os("HOME")).map(|h| h.join(".cache")))
        .map(|base| base.join("agentforge/plugins"))
        .unwrap_or_else(|| {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let uid = unsafe { libc::geteuid() };
            std::env::temp_dir().join(format!("agentforge-{uid}/plugins"))
        })
}

/// Loads a plugin from its parsed manifest and component bytes.
/// Where a plugin comes from: the host's own embedded built-ins are trusted (their own
/// limits, a kept instance); a folder plugin gets what the project grants. Passed
/// explicitly, never inferred from a path (a folder could be named like anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Builtin,
    Folder,
}

impl Origin {
    /// The engine its code is compiled for and runs in.
    fn trust(self) -> Trust {
        match self {
            Origin::Builtin => Trust::Builtin,
            Origin::Folder => Trust::Sandboxed,
        }
    }
}

fn load_parts(
    origin: Origin,
    folder: &Path,
    manifest: Manifest,
    code: Code,
    opts: &LoadOptions,
    started: Instant,
) -> Result<LoadedPlugin, PluginLoadError> {
    let kind = manifest.kind()?;
    let Code {
        component,
        compiled,
        digest,
    } = code;
    let mismatch = |e: wasmtime::Error| PluginLoadError::ContractMismatch {
        plugin: manifest.name.clone(),
        kind,
        api: manifest.api.clone(),
        message: format!("{e:#}"),
    };
    // Linking checks the imports (a component built against another API version imports
    // `agentforge:plugin/host@<that version>`, which this host does not define); the
    // typed pre-instance checks the exports against the world of the declared kind.
    let pre = runtime::runtime(origin.trust())
        .linker
        .instantiate_pre(&component)
        .map_err(mismatch)?;
    let api = ApiVersion::of(&manifest.api).ok_or_else(|| PluginLoadError::ApiMismatch {
        plugin: manifest.name.clone(),
        api: manifest.api.clone(),
        supported: SUPPORTED_APIS.join(", "),
    })?;
    let pre = match (api, kind) {
        (ApiVersion::V0_3, PluginKind::Extractor) => {
            Pre::Extractor(v0_3::extractor::ExtractorPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_3, PluginKind::Gate) => {
            Pre::Gate(v0_3::gate::GatePre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_3, PluginKind::Guard) => {
            Pre::Guard(v0_3::guard::GuardPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_3, PluginKind::ContextSchema) => {
            Pre::Schema(v0_3::schema::ContextSchemaPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_3, PluginKind::Tool) => {
            Pre::Tool(v0_3::tool::ToolPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_2, PluginKind::Extractor) => {
            Pre::ExtractorV0_2(v0_2::extractor::ExtractorPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_2, PluginKind::Gate) => {
            Pre::GateV0_2(v0_2::gate::GatePre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_2, PluginKind::Guard) => {
            Pre::GuardV0_2(v0_2::guard::GuardPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_2, PluginKind::ContextSchema) => {
            Pre::SchemaV0_2(v0_2::schema::ContextSchemaPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_2, PluginKind::Tool) => {
            Pre::ToolV0_2(v0_2::tool::ToolPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_1, PluginKind::Extractor) => {
            Pre::ExtractorV0_1(v0_1::extractor::ExtractorPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_1, PluginKind::Gate) => {
            Pre::GateV0_1(v0_1::gate::GatePre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_1, PluginKind::Guard) => {
            Pre::GuardV0_1(v0_1::guard::GuardPre::new(pre).map_err(mismatch)?)
        }
        (ApiVersion::V0_1, PluginKind::ContextSchema | PluginKind::Tool) => {
            return Err(mismatch(wasmtime::format_err!(
                "API 0.1.0 has no `{kind}` world (it came in 0.2.0); build the plugin against 0.3.0"
            )))
        }
    };
    let name = manifest.name.clone();
    let cfg = &opts.config;
    let builtin = origin == Origin::Builtin;
    let (limits, mut notes) = Limits::resolve(&manifest.limits, &cfg.limits, &name, builtin);
    // Keeping an instance lets one call's leftovers reach the next: the project decides.
    let reuse = manifest.reuse_instance && (builtin || cfg.reuse_instance.contains(&name));
    if manifest.reuse_instance && !reuse {
        notes.push(format!(
            "host: `reuse_instance` not granted; a fresh instance per call (the project grants it in agentforge.toml `[plugins] reuse_instance = [\"{name}\"]`)"
        ));
    }
    let grant = cfg.grants.get(&name).cloned().unwrap_or_default();
    let granted_globs = grant.read.clone();
    let read = if manifest.capabilities.read.is_empty() {
        None
    } else {
        let access = capabilities::ReadAccess::new(
            &name,
            opts.workspace.clone(),
            &manifest.capabilities.read,
            &granted_globs,
        )
        .map_err(|(pattern, message)| PluginLoadError::Capability {
            plugin: name.clone(),
            capability: format!("read = \"{pattern}\" (granted in agentforge.toml)"),
            message,
        })?;
        Some(Arc::new(access))
    };
    let checks = (!manifest.capabilities.checks.is_empty()).then(|| {
        Arc::new(capabilities::CheckAccess {
            plugin: name.clone(),
            workspace: opts.workspace.clone(),
            requested: manifest.capabilities.checks.clone(),
            granted: grant.checks.clone(),
            declared: opts.checks.clone(),
        })
    });
    // The learned rules decide what the agent may do: a folder plugin gets them only
    // where the project grants it, a built-in (trusted, like its limits and its kept
    // instance) whenever it asks.
    let rules_requested = manifest.capabilities.learned_rules;
    let rules_granted = rules_requested && (builtin || grant.learned_rules);
    let mut refusals = Vec::new();
    if rules_requested && !rules_granted {
        // Like a refused read: the plugin's log keeps it, and the caller shows the note.
        let refusal = format!(
            "host: `learned_rules` refused: the project does not grant it, so `config()` has no `{LEARNED_RULES_KEY}` (agentforge.toml `[plugins.grants.{name}] learned_rules = true`)"
        );
        notes.push(refusal.clone());
        refusals.push(refusal);
    }
    let granted = Capabilities {
        learned_rules: rules_granted,
        read: manifest
            .capabilities
            .read
            .iter()
            .filter(|_| !granted_globs.is_empty())
            .cloned()
            .collect(),
        // Names both sides allow: a requested `*` is narrowed to the granted names.
        checks: manifest
            .capabilities
            .checks
            .iter()
            .flat_map(|c| {
                if c == "*" {
                    grant.checks.clone()
                } else if grant.checks.iter().any(|g| g == "*" || g == c) {
                    vec![c.clone()]
                } else {
                    Vec::new()
                }
            })
            .collect(),
    };
    let mut config = manifest.config.clone();
    if let Some(over) = cfg.config.get(&name) {
        config.extend(over.clone());
    }
    let mut config = serde_json::to_value(&config)
        .ok()
        .and_then(|v| match v {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        })
        .ok_or_else(|| PluginLoadError::BadManifest {
            path: folder.join("plugin.toml"),
            line: None,
            message: "[config] cannot be passed to the plugin as a JSON object".to_string(),
        })?;
    // The host owns `rules` in the config of a plugin that asks for the learned rules:
    // neither the manifest nor `[plugins.config]` can pass rules off as approved ones.
    if rules_requested {
        config.remove(LEARNED_RULES_KEY);
        if rules_granted {
            config.insert(
                LEARNED_RULES_KEY.to_string(),
                serde_json::Value::Array(cfg.learned_rules.clone()),
            );
        }
    }
    let config = serde_json::Value::Object(config).to_string();
    let on_error = cfg
        .on_error
        .get(&name)
        .copied()
        .or(manifest.on_error)
        .unwrap_or_default();
    let mut inner = Inner {
        name,
        digest,
        limits,
        access: Arc::new(runtime::Access {
            read,
            checks,
            config,
        }),
        pre,
        handles: Vec::new(),
        schema: None,
        tool: None,
        builtin,
        warm: reuse.then(|| Mutex::new(None)),
        on_error,
        judges: manifest.actions.clone(),
        log: Mutex::new(refusals.into_iter().collect()),
    };
    // Ask once what the plugin names (tools, checks, a task type, an action), and check
    // it: a bad description is a load error, not a surprise in the middle of a run.
    match kind {
        PluginKind::Extractor => {
            inner.handles = inner.call(|x, s| match x {
                Instance::Extractor(x) => x.call_handles(s),
                Instance::ExtractorV0_2(x) => x.call_handles(s),
                Instance::ExtractorV0_1(x) => x.call_handles(s),
                _ => Err(wrong_instance()),
            })?;
        }
        PluginKind::Gate => {
            inner.handles = match inner.pre {
                // 0.1.0 gates judged every check.
                Pre::GateV0_1(_) => vec!["*".to_string()],
                _ => inner.call(|x, s| match x {
                    Instance::Gate(g) => g.call_checks(s),
                    Instance::GateV0_2(g) => g.call_checks(s),
                    _ => Err(wrong_instance()),
                })?,
            };
        }
        PluginKind::ContextSchema => inner.schema = Some(task_types::describe(&inner, &manifest)?),
        PluginKind::Tool => inner.tool = Some(tools::describe(&inner)?),
        PluginKind::Guard => {}
    }
    Ok(LoadedPlugin {
        notes,
        manifest,
        dir: folder.to_path_buf(),
        limits,
        granted,
        compiled,
        load_time: started.elapsed(),
        inner: Arc::new(inner),
    })
}

/// A plugin's pre-instantiated component, typed by its world and API version (no
/// suffix: the current one, 0.3.0).
enum Pre {
    Extractor(v0_3::extractor::ExtractorPre<runtime::CallState>),
    Gate(v0_3::gate::GatePre<runtime::CallState>),
    Guard(v0_3::guard::GuardPre<runtime::CallState>),
    Schema(v0_3::schema::ContextSchemaPre<runtime::CallState>),
    Tool(v0_3::tool::ToolPre<runtime::CallState>),
    ExtractorV0_2(v0_2::extractor::ExtractorPre<runtime::CallState>),
    GateV0_2(v0_2::gate::GatePre<runtime::CallState>),
    GuardV0_2(v0_2::guard::GuardPre<runtime::CallState>),
    SchemaV0_2(v0_2::schema::ContextSchemaPre<runtime::CallState>),
    ToolV0_2(v0_2::tool::ToolPre<runtime::CallState>),
    ExtractorV0_1(v0_1::extractor::ExtractorPre<runtime::CallState>),
    GateV0_1(v0_1::gate::GatePre<runtime::CallState>),
    GuardV0_1(v0_1::guard::GuardPre<runtime::CallState>),
}

/// An instance of one of the worlds.
enum Instance {
    Extractor(v0_3::extractor::Extractor),
    Gate(v0_3::gate::Gate),
    Guard(v0_3::guard::Guard),
    Schema(v0_3::schema::ContextSchema),
    Tool(v0_3::tool::Tool),
    ExtractorV0_2(v0_2::extractor::Extractor),
    GateV0_2(v0_2::gate::Gate),
    GuardV0_2(v0_2::guard::Guard),
    SchemaV0_2(v0_2::schema::ContextSchema),
    ToolV0_2(v0_2::tool::Tool),
    ExtractorV0_1(v0_1::extractor::Extractor),
    GateV0_1(v0_1::gate::Gate),
    GuardV0_1(v0_1::guard::Guard),
}

impl Pre {
    fn kind(&self) -> PluginKind {
        match self {
            Pre::Extractor(_) | Pre::ExtractorV0_2(_) | Pre::ExtractorV0_1(_) => {
                PluginKind::Extractor
            }
            Pre::Gate(_) | Pre::GateV0_2(_) | Pre::GateV0_1(_) => PluginKind::Gate,
            Pre::Guard(_) | Pre::GuardV0_2(_) | Pre::GuardV0_1(_) => PluginKind::Guard,
            Pre::Schema(_) | Pre::SchemaV0_2(_) => PluginKind::ContextSchema,
            Pre::Tool(_) | Pre::ToolV0_2(_) => PluginKind::Tool,
        }
    }

    fn api(&self) -> ApiVersion {
        match self {
            Pre::ExtractorV0_1(_) | Pre::GateV0_1(_) | Pre::GuardV0_1(_) => ApiVersion::V0_1,
            Pre::ExtractorV0_2(_)
            | Pre::GateV0_2(_)
            | Pre::GuardV0_2(_)
            | Pre::SchemaV0_2(_)
            | Pre::ToolV0_2(_) => ApiVersion::V0_2,
            Pre::Extractor(_) | Pre::Gate(_) | Pre::Guard(_) | Pre::Schema(_) | Pre::Tool(_) => {
                ApiVersion::V0_3
            }
        }
    }

    fn instantiate(
        &self,
        store: &mut wasmtime::Store<runtime::CallState>,
    ) -> wasmtime::Result<Instance> {
        Ok(match self {
            Pre::Extractor(p) => Instance::Extractor(p.instantiate(store)?),
            Pre::Gate(p) => Instance::Gate(p.instantiate(store)?),
            Pre::Guard(p) => Instance::Guard(p.instantiate(store)?),
            Pre::Schema(p) => Instance::Schema(p.instantiate(store)?),
            Pre::Tool(p) => Instance::Tool(p.instantiate(store)?),
            Pre::ExtractorV0_2(p) => Instance::ExtractorV0_2(p.instantiate(store)?),
            Pre::GateV0_2(p) => Instance::GateV0_2(p.instantiate(store)?),
            Pre::GuardV0_2(p) => Instance::GuardV0_2(p.instantiate(store)?),
            Pre::SchemaV0_2(p) => Instance::SchemaV0_2(p.instantiate(store)?),
            Pre::ToolV0_2(p) => Instance::ToolV0_2(p.instantiate(store)?),
            Pre::ExtractorV0_1(p) => Instance::ExtractorV0_1(p.instantiate(store)?),
            Pre::GateV0_1(p) => Instance::GateV0_1(p.instantiate(store)?),
            Pre::GuardV0_1(p) => Instance::GuardV0_1(p.instantiate(store)?),
        })
    }
}

/// The error of a call routed to an instance of another world: cannot happen (the
/// wrappers are only handed out for their kind), but is an error rather than a panic.
fn wrong_instance() -> wasmtime::Error {
    wasmtime::format_err!("host bug: plugin called through the wrong world")
}

struct Inner {
    name: String,
    /// SHA-256 of the component's bytes.
    digest: [u8; 32],
    limits: Limits,
    /// What the plugin may do through the host, and its config.
    access: Arc<runtime::Access>,
    pre: Pre,
    /// Tool names from `handles()` (extractors) or check names from `checks()` (gates),
    /// asked once at load.
    handles: Vec<String>,
    /// A context schema's description, asked and validated at load.
    schema: Option<task_types::SchemaInfo>,
    /// A tool's description, asked and validated at load.
    tool: Option<ToolInfo>,
    /// Embedded in the host (`load_builtin`) rather than loaded from a folder.
    builtin: bool,
    /// The kept instance, for a plugin whose manifest sets `reuse_instance`.
    warm: Option<Mutex<Option<Warm>>>,
    /// What a failed guard call decides.
    on_error: OnError,
    /// A guard's manifest `actions`: the only ones it is asked about (`None`: all).
    judges: Option<Vec<String>>,
    /// The latest log lines, across calls.
    log: Mutex<VecDeque<String>>,
}

/// An instance kept between calls, with its store and output pipe.
struct Warm {
    store: wasmtime::Store<runtime::CallState>,
    stderr: output::CappedPipe,
    instance: Instance,
}

impl Inner {
    /// The engine the plugin runs in.
    fn trust(&self) -> Trust {
        if self.builtin {
            Trust::Builtin
        } else {
            Trust::Sandboxed
        }
    }

    /// Prints the call's log lines and keeps them in the plugin's recent log.
    fn keep_log(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        for line in lines {
            eprintln!("plugin {}: {line}", self.name);
            if log.len() == RECENT_LOG_LINES {
                log.pop_front();
            }
            log.push_back(line.clone());
        }
    }

    fn recent_log(&self) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().cloned().collect()
    }

    /// Runs `f` against a fresh instance in a fresh, limited store (or the kept one), on
    /// a plugin thread outside any async runtime (see [`runtime::off_runtime`]).
    fn call<R: Send>(
        &self,
        f: impl FnOnce(&Instance, &mut wasmtime::Store<runtime::CallState>) -> wasmtime::Result<R>
            + Send,
    ) -> Result<R, PluginError> {
        runtime::off_runtime(|| self.call_here(f))
    }

    /// [`Inner::call`] on the current thread.
    fn call_here<R>(
        &self,
        f: impl FnOnce(&Instance, &mut wasmtime::Store<runtime::CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        // Guest code runs from here to the end of the call: the epoch must tick.
        let _running = epoch::running();
        if let Some(warm) = &self.warm {
            return self.call_warm(warm, f);
        }
        let (mut store, stderr) =
            runtime::new_store(self.trust(), &self.limits, self.access.clone());
        let result = self
            .pre
            .instantiate(&mut store)
            .and_then(|x| f(&x, &mut store));
        self.keep_log(&store.data().logs);
        result.map_err(|e| runtime::failure(&self.name, &self.limits, &store, &stderr, e))
    }

    /// Like [`Inner::call`] on the kept instance (created on first use). A failed call
    /// discards it: a trapped instance may not be entered again, and its state is suspect.
    fn call_warm<R>(
        &self,
        warm: &Mutex<Option<Warm>>,
        f: impl FnOnce(&Instance, &mut wasmtime::Store<runtime::CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        let mut slot = warm.lock().unwrap_or_else(|p| p.into_inner());
        let mut w = match slot.take() {
            Some(mut w) => {
                runtime::arm(&mut w.store, &self.limits);
                w.stderr.clear();
                w
            }
            None => {
                let (mut store, stderr) =
                    runtime::new_store(self.trust(), &self.limits, self.access.clone());
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
        self.keep_log(&w.store.data().logs);
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
}

/// An extractor plugin behind the host's [`FactExtractor`] trait.
///
/// On any failure it returns no facts (so the host falls back to its generic fact) and
/// reports the error on stderr; [`WasmExtractor::try_extract`] returns the error instead.
#[derive(Clone)]
pub struct WasmExtractor {
    inner: Arc<Inner>,
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
        self.try_extract_details(tool, output, result, step, None)
    }

    /// [`WasmExtractor::try_extract`] with what the host knows of the action (`details`,
    /// a JSON object such as an edit's `agentforge_core::edit::EditRecord`). A 0.3.0
    /// extractor receives it; older ones see only `output`.
    pub fn try_extract_details(
        &self,
        tool: &str,
        output: &str,
        result: ActionResult,
        step: u64,
        details: Option<&str>,
    ) -> Result<Vec<Fact>, PluginError> {
        let r = match result {
            ActionResult::Success => wit::ActionResult::Success,
            ActionResult::Failure => wit::ActionResult::Failure,
            ActionResult::Partial => wit::ActionResult::Partial,
            ActionResult::Skipped => wit::ActionResult::Skipped,
        };
        let facts = self.inner.call(|x, s| {
            let facts = match x {
                Instance::Extractor(x) => {
                    let call = v0_3::extractor::ToolCall {
                        tool: tool.to_string(),
                        output: output.to_string(),
                        result: r,
                        step,
                        details: details.map(str::to_string),
                    };
                    x.call_extract(&mut *s, &call)?
                }
                Instance::ExtractorV0_2(x) => x.call_extract(&mut *s, tool, output, r, step)?,
                Instance::ExtractorV0_1(x) => x
                    .call_extract(&mut *s, tool, output, kinds::result_to_v0_1(r), step)?
                    .into_iter()
                    .map(kinds::fact_from_v0_1)
                    .collect(),
                _ => return Err(wrong_instance()),
            };
            let size = facts
                .iter()
                .map(|f| f.statement.len() + f.source.len())
                .sum();
            output::check_returned("returned facts", size, MAX_RETURN_BYTES)?;
            Ok(facts)
        })?;
        Ok(facts
            .into_iter()
            .map(|f| Fact {
                id: String::new(),
                category: category_from_wit(f.category),
                // The context is budgeted: a plugin cannot flood it with one fact.
                statement: clean_line(&f.statement, 300),
                confidence: if f.confidence.is_finite() {
                    f.confidence.clamp(0.0, 1.0)
                } else {
                    0.0
                },
                source: if f.source.is_empty() {
                    tool.to_string()
                } else {
                    clean_line(&f.source, 200)
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

    fn names(&self, tool: &str) -> bool {
        self.inner.handles.iter().any(|h| h == tool)
    }

    fn extract(&self, tool: &str, output: &str, result: ActionResult, step: u64) -> Vec<Fact> {
        self.extract_details(tool, output, result, step, None)
    }

    fn extract_details(
        &self,
        tool: &str,
        output: &str,
        result: ActionResult,
        step: u64,
        details: Option<&str>,
    ) -> Vec<Fact> {
        if !self.handles(tool) {
            return Vec::new();
        }
        match self.try_extract_details(tool, output, result, step, details) {
            Ok(facts) => facts,
            Err(e) => {
                eprintln!("warning: {e}; falling back to the generic fact");
                Vec::new()
            }
        }
    }
}

/// `s` made one clean line ([`agentforge_core::sanitize::line`]), trimmed and cut to `max`
/// characters: what a plugin says (a fact, a summary, a reason, a log line) reaches a
/// terminal, a log and the model's context.
fn clean_line(s: &str, max: usize) -> String {
    let s = agentforge_core::sanitize::line(s);
    agentforge_core::text::cut(s.trim(), max).into_owned()
}

/// The host's category of a plugin's fact.
fn category_from_wit(c: wit::FactCategory) -> FactCategory {
    match c {
        wit::FactCategory::CodeStructure => FactCategory::CodeStructure,
        wit::FactCategory::Inference => FactCategory::Inference,
        wit::FactCategory::Pattern => FactCategory::Pattern,
        wit::FactCategory::Verification => FactCategory::Verification,
        wit::FactCategory::Error => FactCategory::Error,
    }
}

/// A host fact as the plugin sees it.
fn fact_to_wit(f: &Fact) -> wit::Fact {
    wit::Fact {
        category: match f.category {
            FactCategory::CodeStructure => wit::FactCategory::CodeStructure,
            FactCategory::Inference => wit::FactCategory::Inference,
            FactCategory::Pattern => wit::FactCategory::Pattern,
            FactCategory::Verification => wit::FactCategory::Verification,
            FactCategory::Error => wit::FactCategory::Error,
        },
        statement: f.statement.clone(),
        confidence: f.confidence,
        source: f.source.clone(),
    }
}
