//! The sandbox: the two engines (built-ins, sandboxed), the on-disk compile cache, and a
//! fresh limited store per call.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::{v0_1, v0_2, v0_3};
use super::capabilities::{CheckAccess, ReadAccess};
use super::engine_config::engine_config;
pub(crate) use super::engine_config::Trust;
use super::output::{CapExceeded, CappedPipe};
use super::{Limits, PluginError, PluginFailure};

/// Guest stdout + stderr allowed per call (plenty for a panic message and a backtrace
/// line or two); writing more fails the call with [`PluginFailure::OutputTooLarge`].
pub(crate) const STDERR_CAP: usize = 64 * 1024;
/// Log lines kept per call, and their length.
const MAX_LOG_LINES: usize = 100;
const MAX_LOG_LINE: usize = 1000;

/// A process-wide engine and its linker: compiled code is only shareable within one
/// engine. There are two, one per [`Trust`]: the built-ins' (no fuel) and the sandboxed
/// plugins' (fuel); each is created on first use, so a run without folder plugins never
/// creates the second.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
}

/// The runtime for plugins of `trust`, created on first use.
pub(crate) fn runtime(trust: Trust) -> &'static Runtime {
    static BUILTIN: OnceLock<Runtime> = OnceLock::new();
    static SANDBOXED: OnceLock<Runtime> = OnceLock::new();
    let cell = match trust {
        Trust::Builtin => &BUILTIN,
        Trust::Sandboxed => &SANDBOXED,
    };
    cell.get_or_init(|| new_runtime(trust))
}

fn new_runtime(trust: Trust) -> Runtime {
    let engine = pooled_engine(trust).unwrap_or_else(|e| {
        // Reserving the pool's address space can fail where virtual memory is capped
        // (`ulimit -v`, strict overcommit): the on-demand allocator still works.
        eprintln!(
            "notice: the plugin instance pool could not be reserved ({e:#}); plugins get their memory on demand"
        );
        Engine::new(&engine_config(trust)).expect("the plugin engine's configuration is valid")
    });
    super::epoch::register(&engine);
    let mut linker = Linker::new(&engine);
    // All of WASI p2 is linked, but each store's context is empty: no preopened
    // directories, environment, arguments or sockets, so nothing ambient is reachable.
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("link WASI");
    bounded_clock_waits(&mut linker).expect("link the bounded clock waits");
    // The `host` interface of every supported API version: a plugin imports the one
    // it was built against.
    v0_3::extractor::Extractor::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
        .expect("link host 0.3");
    // 0.2.0's `types` are 0.3.0's (type-only, nothing to link): its `host` alone.
    v0_2::host::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).expect("link host 0.2");
    v0_1::extractor::Extractor::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
        .expect("link host 0.1");
    Runtime { engine, linker }
}

/// Most component instances alive at once in an engine's pool (kept instances of plugins
/// that reuse one, plus calls in flight); instantiating past it fails the call with
/// wasmtime's "maximum concurrent instance limit" error.
pub(crate) const POOL_INSTANCES: u32 = 1000;
/// Core instances per component instance, on average: a Rust `wasm32-wasip2` component
/// holds its module plus a few adapter shims.
const CORE_INSTANCES_PER_COMPONENT: u32 = 4;

/// Bytes of linear memory and of tables a freed slot keeps resident instead of returning
/// them to the kernel. With Linux's `PAGEMAP_SCAN` (6.7+, [`pooled_engine`] turns it on
/// where the kernel has it) the slot's reset finds the pages the call dirtied and restores
/// up to this many in place (a `memset` each), so the next instance in the slot takes no
/// page faults on them; the rest is returned to the kernel. Without `PAGEMAP_SCAN` the
/// kept bytes would be cleared with one `memset` of the whole size, so there nothing is
/// kept.
///
/// Measured with the gate bench on the 2-core machine. On wasmtime 48 (2026-11-26): 43-49
/// us per gate call with nothing kept, 13-27 us with 4 MiB kept (48's scan stopped after
/// 32 dirty regions and returned the rest). Wasmtime 50 resets every dirty page within
/// the budget, swapped-out ones too (48 left those for the next instance): with 4 MiB kept
/// a gate call took 34 us, most of it `memset`; by budget (2026-11-29, three runs each)
/// 0: 23-24 us, 32 KiB: 27-29, 64 KiB: 17-25, 128 KiB: 27-33, 256 KiB: 32-37.
const KEEP_RESIDENT: (usize, usize) = (64 << 10, 64 << 10);
/// Freed slots returned to the kernel together: one `madvise` (and one TLB shootdown)
/// per batch instead of per call (31 -> 27 us per gate call).
const DECOMMIT_BATCH: usize = 32;
/// Freed slots kept ready for the plugin that last used them (its memory image mapped);
/// with [`KEEP_RESIDENT`] each holds at most 64 KiB of the pages its plugin touched, so
/// this bounds that memory at 2 MiB.
const WARM_SLOTS: u32 = 32;

/// The engine with the pooling instance allocator: a fresh store per call (how gates,
/// guards and untrusted plugins run) takes a ready slot instead of mapping memory and
/// tables anew. Slots are reset on reuse (copy-on-write memory images, freed memory
/// returned to the kernel in batches).
///
/// The allocation strategy does not change compiled code: precompiled built-ins and the
/// compile cache (made with [`engine_config`]) load into either allocation strategy.
fn pooled_engine(trust: Trust) -> wasmtime::Result<Engine> {
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(POOL_INSTANCES)
        .total_tables(POOL_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_module(1)
        // The hard ceiling of any plugin's memory limit (`HARD_LIMITS`); each store's
        // limiter enforces the plugin's own, smaller limit.
        .max_memory_size(super::HARD_LIMITS.memory_bytes)
        .decommit_batch_size(DECOMMIT_BATCH)
        .max_unused_warm_slots(WARM_SLOTS);
    if wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(wasmtime::Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT.0)
            .table_keep_resident(KEEP_RESIDENT.1);
    }
    let mut config = engine_config(trust);
    config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    // For profiling plugins with `perf`: names the compiled functions in
    // /tmp/perf-<pid>.map (no change to the code).
    if std::env::var_os("AGENTFORGE_PLUGIN_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config)
}

/// Runs `f` where WASI's synchronous bindings may block: right here outside a Tokio
/// runtime, and inside one (the executor always is) either here after telling the
/// runtime this thread blocks (a multi-thread runtime, as the CLI's) or on a plugin
/// thread (a current-thread runtime).
///
/// The bindings wait for guest I/O (stdout, stderr, clock waits, polls, socket calls) by
/// blocking on the current runtime's handle, and Tokio panics when that happens inside
/// the runtime's own execution context ("Cannot start a runtime from within a runtime"):
/// one print by a plugin would bring the host down. `block_in_place` leaves that context
/// (the worker's other tasks move to another worker); a current-thread runtime has no
/// other worker, so there the call hops to a plugin thread and the caller waits. The hop
/// cost about 0.1 ms a call (a wake-up and idle workers spinning on 2 cores).
pub(crate) fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match tokio::runtime::Handle::try_current() {
        Err(_) => return f(),
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            return tokio::task::block_in_place(f);
        }
        Ok(_) => {}
    }
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(std::thread::available_parallelism().map_or(2, |n| n.get().max(2)))
            .thread_name(|i| format!("plugin-call-{i}"))
            // Guest code runs on this stack (wasmtime bounds its use to `max_wasm_stack`,
            // 512 KiB); host functions and compiled trampolines need room beyond it.
            .stack_size(8 << 20)
            .build()
            .ok()
    });
    match pool {
        Some(pool) => pool.install(f),
        // No pool (threads could not be spawned): a scoped thread per call.
        None => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}

/// The WASI 0.2 version wasmtime-wasi defines (its `src/p2/wit/deps/clocks.wit`). The
/// shadow below must use exactly this version: a guest importing any 0.2.x is linked to
/// the newest 0.2 definition, so a shadow under an older version is silently bypassed and
/// a guest's `sleep` outlives its deadline (`a_sleeping_plugin_is_stopped_at_its_deadline`
/// fails). Update it with every wasmtime upgrade.
const WASI_P2_VERSION: &str = "0.2.12";

/// Replaces WASI's monotonic-clock subscriptions with ones that end at the call's
/// deadline: the deadline is enforced at epoch ticks, which only happen while guest code
/// runs, so an unbounded wait in the host (a guest's `sleep`) would outlive it. A clamped
/// wait returns at the deadline and the next tick traps the call.
fn bounded_clock_waits(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::clocks::WasiClocksView;
    use wasmtime_wasi::p2::bindings::clocks::monotonic_clock::Host as Clock;
    use wasmtime_wasi::p2::DynPollable;

    /// The wait in nanoseconds, cut to what is left of the call's deadline (+1 ms).
    fn clamp(state: &CallState, nanos: u64) -> u64 {
        let left = state.deadline_at.saturating_duration_since(Instant::now());
        let left = (left + Duration::from_millis(1)).as_nanos();
        nanos.min(u64::try_from(left).unwrap_or(u64::MAX))
    }

    linker.allow_shadowing(true);
    // Shadowing replaces the whole instance: every function of the interface is defined
    // again here, or a plugin that reads the clock could not be linked.
    let mut clock = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI_P2_VERSION}"))?;
    clock.func_wrap(
        "now",
        |mut store: wasmtime::StoreContextMut<'_, CallState>, (): ()| -> wasmtime::Result<(u64,)> {
            Ok((store.data_mut().clocks().now()?,))
        },
    )?;
    clock.func_wrap(
        "resolution",
        |mut store: wasmtime::StoreContextMut<'_, CallState>, (): ()| -> wasmtime::Result<(u64,)> {
            Ok((store.data_mut().clocks().resolution()?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: wasmtime::StoreContextMut<'_, CallState>,
         (nanos,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let state = store.data_mut();
            let nanos = clamp(state, nanos);
            Ok((state.clocks().subscribe_duration(nanos)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: wasmtime::StoreContextMut<'_, CallState>,
         (when,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let state = store.data_mut();
            let now = state.clocks().now()?;
            let nanos = clamp(state, when.saturating_sub(now));
            Ok((state.clocks().subscribe_duration(nanos)?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The store's data for one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    /// Lines the plugin logged through the `host` interface, and the host's notes about
    /// the call (refused capabilities).
    pub(crate) logs: Vec<String>,
    /// What the plugin may call on the host (`read-file`, `run-check`) and its config.
    access: Arc<Access>,
    /// When the call's wall-clock deadline passes; pushed back by the time the host
    /// spends running a check for the plugin.
    deadline_at: Instant,
    /// `run-check` calls made in this call (bounded by [`MAX_CHECK_RUNS`]).
    checks_run: u32,
}

/// Most `run-check` calls in one plugin call: the time of a check does not count against
/// the plugin's deadline, so the number of checks it may start is bounded instead.
pub(crate) const MAX_CHECK_RUNS: u32 = 8;

/// A plugin's host-side grants and configuration, shared by all its calls.
#[derive(Default)]
pub(crate) struct Access {
    /// What `read-file` may read; `None`: the plugin has no `read` capability.
    pub(crate) read: Option<Arc<ReadAccess>>,
    /// Which checks `run-check` may run; `None`: no `checks` capability.
    pub(crate) checks: Option<Arc<CheckAccess>>,
    /// The `config()` answer: a JSON object.
    pub(crate) config: String,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

// The `types` interfaces have no functions; their host traits are empty.
impl v0_3::types::Host for CallState {}
impl v0_1::types::Host for CallState {}

impl CallState {
    fn push_log(&mut self, line: String) {
        if self.logs.len() < MAX_LOG_LINES {
            // One line, no escapes: it is printed on the user's terminal.
            self.logs.push(super::clean_line(
                &agentforge_core::sanitize::line(&line),
                MAX_LOG_LINE,
            ));
        }
    }
}

impl CallState {
    fn log_line(&mut self, level: &str, message: &str) {
        self.push_log(format!("{level}: {message}"));
    }

    fn read(&mut self, path: &str) -> Result<String, String> {
        let result = match &self.access.read {
            Some(access) => access.read(path),
            None => Err(format!(
                "read-file `{path}` refused: the plugin has no `read` capability (request it in plugin.toml `[capabilities] read = [...]`; the project grants it in agentforge.toml `[plugins.grants.<name>] read = [...]`)"
            )),
        };
        // The plugin sees the error; the host's log keeps it too, so a refused read is
        // visible even when the plugin swallows the error.
        if let Err(e) = &result {
            self.push_log(format!("host: {e}"));
        }
        result
    }
}

impl v0_3::host::Host for CallState {
    fn log(&mut self, level: v0_3::host::LogLevel, message: String) {
        use v0_3::host::LogLevel as L;
        let level = match level {
            L::Debug => "debug",
            L::Info => "info",
            L::Warn => "warn",
            L::Error => "error",
        };
        self.log_line(level, &message);
    }

    fn config(&mut self) -> String {
        self.access.config.clone()
    }

    fn read_file(&mut self, path: String) -> Result<String, String> {
        self.read(&path)
    }

    fn run_check(&mut self, name: String) -> Result<v0_3::types::CheckRun, String> {
        if self.checks_run >= MAX_CHECK_RUNS {
            let e = format!(
                "run-check `{name}` refused: a call may run at most {MAX_CHECK_RUNS} checks"
            );
            self.push_log(format!("host: {e}"));
            return Err(e);
        }
        self.checks_run += 1;
        let started = Instant::now();
        let result = match &self.access.checks {
            Some(access) => access.run(&name),
            None => Err(format!(
                "run-check `{name}` refused: the plugin has no `checks` capability (request it in plugin.toml `[capabilities] checks = [...]`; the project grants it in agentforge.toml `[plugins.grants.<name>] checks = [...]`)"
            )),
        };
        // The command's time is the host's, not the plugin's: the deadline moves with it.
        self.deadline_at += started.elapsed();
        match result {
            Ok(out) => {
                self.push_log(format!(
                    "host: ran check `{name}` ({})",
                    match out.exit_code {
                        Some(c) => format!("exit {c}"),
                        None => "killed".to_string(),
                    }
                ));
                Ok(v0_3::types::CheckRun {
                    check: name,
                    exit_code: if out.timed_out { None } else { out.exit_code },
                    timed_out: out.timed_out,
                    output: out.output,
                })
            }
            Err(e) => {
                self.push_log(format!("host: {e}"));
                Err(e)
            }
        }
    }
}

/// 0.2.0's `host` is 0.3.0's: the same calls, the same types.
impl v0_2::host::Host for CallState {
    fn log(&mut self, level: v0_2::host::LogLevel, message: String) {
        use v0_2::host::LogLevel as L;
        let level = match level {
            L::Debug => v0_3::host::LogLevel::Debug,
            L::Info => v0_3::host::LogLevel::Info,
            L::Warn => v0_3::host::LogLevel::Warn,
            L::Error => v0_3::host::LogLevel::Error,
        };
        v0_3::host::Host::log(self, level, message)
    }

    fn config(&mut self) -> String {
        v0_3::host::Host::config(self)
    }

    fn read_file(&mut self, path: String) -> Result<String, String> {
        v0_3::host::Host::read_file(self, path)
    }

    fn run_check(&mut self, name: String) -> Result<v0_3::types::CheckRun, String> {
        v0_3::host::Host::run_check(self, name)
    }
}

impl v0_1::host::Host for CallState {
    fn log(&mut self, level: v0_1::host::LogLevel, message: String) {
        use v0_1::host::LogLevel as L;
        let level = match level {
            L::Debug => "debug",
            L::Info => "info",
            L::Warn => "warn",
            L::Error => "error",
        };
        self.log_line(level, &message);
    }

    fn read_file(&mut self, path: String) -> Result<String, String> {
        self.read(&path)
    }
}

/// Memory limit that remembers refusing, so a trap after a failed allocation is reported
/// as the memory limit rather than as whatever the guest did next (usually an abort).
struct Limiter {
    max_memory: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// A store with `limits` applied and its output pipe (guest stdout and stderr).
pub(crate) fn new_store(
    trust: Trust,
    limits: &Limits,
    access: Arc<Access>,
) -> (Store<CallState>, CappedPipe) {
    let rt = runtime(trust);
    let stderr = CappedPipe::new(STDERR_CAP);
    let wasi = WasiCtxBuilder::new()
        .stdout(stderr.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    let mut store = Store::new(
        &rt.engine,
        CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory: limits.memory_bytes,
                refused: None,
            },
            logs: Vec::new(),
            access,
            deadline_at: Instant::now(),
            checks_run: 0,
        },
    );
    store.limiter(|s| &mut s.limiter);
    // Checked at every epoch tick: the deadline is an instant (not a tick count) so that
    // time the host spends on the plugin's behalf (`run-check`) can be given back.
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline_at {
            Err(Trap::Interrupt.into())
        } else {
            Ok(UpdateDeadline::Continue(1))
        }
    });
    arm(&mut store, limits);
    (store, stderr)
}

/// Gives a store a full call's budget: fuel (where its engine meters it), deadline, and a
/// clean limiter and log (a reused store is re-armed before every call).
pub(crate) fn arm(store: &mut Store<CallState>, limits: &Limits) {
    // `get_fuel` fails exactly when the engine counts no fuel (the built-ins').
    if store.get_fuel().is_ok() {
        store
            .set_fuel(limits.fuel)
            .expect("fuel is enabled on the engine");
    }
    store.set_epoch_deadline(1);
    store.data_mut().deadline_at = Instant::now() + limits.deadline;
    store.data_mut().checks_run = 0;
    store.data_mut().limiter.refused = None;
    store.data_mut().logs.clear();
}

/// Turns a failed call into the typed cause, reading the store's limiter and the guest's
/// stderr (for a panic's message).
pub(crate) fn failure(
    plugin: &str,
    limits: &Limits,
    store: &Store<CallState>,
    stderr: &CappedPipe,
    err: wasmtime::Error,
) -> PluginError {
    let stderr =
        agentforge_core::sanitize::text(&String::from_utf8_lossy(&stderr.contents())).into_owned();
    let cause = if let Some(cap) = err.downcast_ref::<CapExceeded>() {
        PluginFailure::OutputTooLarge {
            what: cap.what,
            limit: cap.limit,
            size: cap.size,
        }
    } else if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        // `std::process::exit` in the guest ends the call, never the host.
        PluginFailure::Exit { code: exit.0 }
    } else if let Some(requested) = store.data().limiter.refused {
        PluginFailure::MemoryLimit {
            limit: limits.memory_bytes,
            requested,
        }
    } else {
        match err.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => PluginFailure::OutOfFuel { fuel: limits.fuel },
            Some(Trap::Interrupt) => PluginFailure::Deadline {
                deadline: limits.deadline,
            },
            // Deep (or endless) recursion exhausts wasmtime's native stack before the
            // guest's own shadow stack in linear memory.
            Some(Trap::StackOverflow) => PluginFailure::StackOverflow,
            Some(trap) => match panic_message(&stderr) {
                Some(message) => PluginFailure::Panic { message },
                None => PluginFailure::Trap {
                    message: trap.to_string(),
                },
            },
            // Not a trap: the values crossing the boundary did not fit the contract
            // (bad UTF-8, an out-of-range enum, a missing export...).
            None => PluginFailure::ContractMismatch {
                message: format!("{err:#}"),
            },
        }
    };
    PluginError {
        plugin: plugin.to_string(),
        cause,
        stderr,
    }
}

/// The message of a Rust panic printed by the guest: `thread '…' panicked at file:line:col:`
/// followed by the message lines.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")? + "panicked at ".len();
    let rest = &stderr[start..];
    let (location, message) = rest.split_once('\n').unwrap_or((rest, ""));
    let message: Vec<&str> = message
        .lines()
        .take_while(|l| !l.starts_with("note: "))
        .collect();
    let message = format!(
        "{}: {}",
        location.trim_end_matches(':').trim(),
        message.join(" ").trim()
    );
    Some(super::clean_line(&message, 1000))
}

/// The cache entry of the component with SHA-256 `digest`: keyed by the content and by
/// everything in the engine that affects compiled code (wasmtime version, target,
/// settings), so a stale entry is never deserialized.
fn cache_entry(trust: Trust, digest: &[u8; 32], cache: &Path) -> std::path::PathBuf {
    let mut compat = agentforge_core::hash::StableHasher::default();
    runtime(trust)
        .engine
        .precompile_compatibility_hash()
        .hash(&mut compat);
    let key: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    cache.join(format!("{key}-{:016x}.cwasm", compat.finish()))
}

/// The compiled code of the component with SHA-256 `digest`, if the cache holds it (and
/// the cache folder is private: see [`load_component`]).
pub(crate) fn cached_component(
    trust: Trust,
    digest: &[u8; 32],
    cache: &Path,
) -> Option<Arc<Component>> {
    if !private_folder(cache) {
        return None;
    }
    let path = cache_entry(trust, digest, cache);
    // Read into memory rather than `deserialize_file` (mmap): another process rewriting
    // or truncating a mapped entry would crash this one with SIGBUS.
    let bytes = std::fs::read(&path).ok()?;
    // SAFETY: the cache folder is the host's own; entries are written below by this
    // engine from `Component::serialize` and named by the compatibility hash, and
    // wasmtime checks the header (version, target, settings) before using one.
    match unsafe { Component::deserialize(&runtime(trust).engine, &bytes) } {
        Ok(c) => Some(Arc::new(c)),
        // A truncated or foreign file: recompiled and overwritten by the caller.
        Err(_) => {
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// A compiled component, from the cache or freshly compiled (then written to the cache).
/// Returns whether it was compiled.
pub(crate) fn load_component(
    trust: Trust,
    wasm: &[u8],
    digest: &[u8; 32],
    cache: &Path,
) -> wasmtime::Result<(Arc<Component>, bool)> {
    let engine = &runtime(trust).engine;
    // Entries are native code: only a folder this user owns and nobody else can write
    // is used at all (a planted entry would run inside the host).
    if !private_folder(cache) {
        return Ok((Arc::new(Component::new(engine, wasm)?), true));
    }
    if let Some(c) = cached_component(trust, digest, cache) {
        return Ok((c, false));
    }
    let path = cache_entry(trust, digest, cache);
    let component = Component::new(engine, wasm)?;
    // The cache is an optimisation: failing to write it only costs the next start.
    {
        if let Ok(bytes) = component.serialize() {
            // Unique per process and per loader thread: two threads may compile the
            // same component (identical plugins under two names) at once.
            static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_ok() {
                trim_cache(cache, CACHE_CAP_BYTES, &path);
            }
        }
    }
    Ok((Arc::new(component), true))
}

/// The digest remembered for the component at `path` whose file shows `stamp` (see
/// `stamp.rs`); only from a private cache folder, like the code it selects.
pub(crate) fn remembered_digest(
    cache: &Path,
    path: &Path,
    stamp: &super::stamp::Stamp,
) -> Option<[u8; 32]> {
    if !private_folder(cache) {
        return None;
    }
    super::stamp::remembered(cache, path, stamp)
}

/// Remembers `digest` for the component at `path` (stamps taken before and after its
/// bytes were read at `read_at`), in a private cache folder only.
pub(crate) fn remember_digest(
    cache: &Path,
    path: &Path,
    (before, after): (&super::stamp::Stamp, &super::stamp::Stamp),
    read_at: std::time::SystemTime,
    digest: &[u8; 32],
) {
    if private_folder(cache) {
        super::stamp::remember(cache, path, before, after, read_at, digest);
    }
}

/// Loads a built-in plugin from the native code its build precompiled
/// (`agentforge-builtins`), so no Cranelift runs on first use. When wasmtime refuses that
/// code (a binary copied to a CPU without the features it was built for, or built against
/// another wasmtime), says so once on stderr and compiles `wasm` through the cache.
pub(crate) fn load_precompiled(
    precompiled: &[u8],
    wasm: &[u8],
    digest: &[u8; 32],
    cache: &Path,
) -> wasmtime::Result<(Arc<Component>, bool)> {
    // SAFETY: the bytes were produced by `Engine::precompile_component` in this
    // binary's own build script, from the same engine configuration
    // (`engine_config.rs`, `Trust::Builtin`), and are embedded read-only in the executable; wasmtime
    // checks their header (version, target, CPU features, settings) before use.
    match unsafe { Component::deserialize(&runtime(Trust::Builtin).engine, precompiled) } {
        Ok(c) => Ok((Arc::new(c), false)),
        Err(e) => {
            static NOTICE: std::sync::Once = std::sync::Once::new();
            NOTICE.call_once(|| {
                eprintln!(
                    "notice: the built-in plugins' precompiled code does not fit this machine ({e}); compiling them (cached for the next runs)"
                )
            });
            load_component(Trust::Builtin, wasm, digest, cache)
        }
    }
}

/// Most bytes of compiled components the cache keeps; past it the oldest entries go.
pub const CACHE_CAP_BYTES: u64 = 512 << 20;

/// The compiled-component entries of the cache folder `dir`, with size and write time.
fn cache_entries(dir: &Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            m.is_file().then(|| {
                (
                    e.path(),
                    m.len(),
                    m.modified().unwrap_or(std::time::UNIX_EPOCH),
                )
            })
        })
        .collect()
}

/// Removes the oldest entries until the cache holds at most `cap` bytes, never `keep`
/// (the entry just written). Best effort: an entry another process removed is skipped.
pub(crate) fn trim_cache(dir: &Path, cap: u64, keep: &Path) {
    let mut entries = cache_entries(dir);
    let mut total: u64 = entries.iter().map(|e| e.1).sum();
    if total <= cap {
        return;
    }
    entries.sort_by_key(|e| e.2);
    for (path, size, _) in entries {
        if total <= cap {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(size);
        }
    }
}

/// Empties the compiled-component cache `dir` (`agentforge plugins cache clean`): every
/// entry, remembered digest (`.stamp`), leftover temporary file and the token counts kept
/// beside them (`token-counts-*.bin`, also a cache). Returns how many entries and bytes
/// were removed.
pub fn clean_cache(dir: &Path) -> std::io::Result<(usize, u64)> {
    let mut removed = (0, 0);
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for e in rd.filter_map(Result::ok) {
        let path = e.path();
        let ours = path
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x == "cwasm" || x == "stamp" || x.starts_with("tmp"))
            || path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("token-counts-") && n.ends_with(".bin"));
        let Ok(m) = e.metadata() else { continue };
        if ours && m.is_file() {
            std::fs::remove_file(&path)?;
            if path.extension().is_some_and(|x| x == "cwasm") {
                removed.0 += 1;
            }
            removed.1 += m.len();
        }
    }
    Ok(removed)
}

/// Creates `dir` (mode 0700) if needed; whether it is owned by this user and writable
/// by nobody else.
fn private_folder(dir: &Path) -> bool {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    match std::fs::metadata(dir) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Ok(m) => m.is_dir() && m.uid() == unsafe { libc::geteuid() } && m.mode() & 0o022 == 0,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_capped_oldest_first_and_cleaned() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let t0 = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
        for (i, name) in ["a.cwasm", "b.cwasm", "c.cwasm"].iter().enumerate() {
            let p = dir.join(name);
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(t0 + std::time::Duration::from_secs(i as u64 * 10))
                .unwrap();
        }
        std::fs::write(dir.join("notes.txt"), "not ours").unwrap();
        // 300 bytes over a 250-byte cap: the oldest (a) goes; c was just written.
        trim_cache(dir, 250, &dir.join("c.cwasm"));
        assert!(!dir.join("a.cwasm").exists());
        assert!(dir.join("b.cwasm").exists() && dir.join("c.cwasm").exists());
        // Even a cap below the newest entry keeps the entry just written.
        trim_cache(dir, 10, &dir.join("c.cwasm"));
        assert!(!dir.join("b.cwasm").exists() && dir.join("c.cwasm").exists());
        std::fs::write(dir.join("d.tmp123-0"), "half").unwrap();
        assert_eq!(clean_cache(dir).unwrap(), (1, 104));
        assert!(dir.join("notes.txt").exists(), "other files are left alone");
        assert_eq!(clean_cache(&dir.join("missing")).unwrap(), (0, 0));
    }

    #[test]
    fn a_cache_folder_others_can_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp.path().join("own/plugins");
        assert!(private_folder(&own));
        assert_eq!(
            std::fs::metadata(&own).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(!private_folder(&shared));
    }

    #[test]
    fn panic_message_is_read_from_stderr() {
        let s = "thread '<unnamed>' panicked at src/lib.rs:30:24:\nboom \"x\"\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(s).unwrap(),
            "src/lib.rs:30:24: boom \"x\"".to_string()
        );
        assert!(panic_message("nothing").is_none());
    }
}
