//! The epoch thread: it advances every engine's epoch (how a call's deadline is checked)
//! while plugin code may be running, and sleeps when none has run for a second.
//!
//! A run spends most of its time waiting for the model, with no plugin running. A
//! thread that ticked every 5 ms regardless woke the process 200 times a second for
//! days; on the 2-core VM it measured 2.9% of the samples of the step bench.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, Once};
use std::time::Duration;

use wasmtime::{Engine, EngineWeak};

/// How often the epoch ticks; deadlines are rounded up to it.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Ticks in a row with no call in flight before the thread sleeps (1 s): calls come in
/// bursts (a step's extractions, a gate per check), and the burst wakes it once.
const IDLE_TICKS: u32 = 200;

/// The engines ticked; an engine is kept alive by its users only.
static ENGINES: Mutex<Vec<EngineWeak>> = Mutex::new(Vec::new());
/// Calls running guest code now (instantiation included).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Whether the thread sleeps (or is about to): guarded by the mutex for the wait, and
/// mirrored in [`ASLEEP`] so that a call checks it without taking the lock.
static SLEEPING: Mutex<bool> = Mutex::new(false);
static WAKE: Condvar = Condvar::new();
static ASLEEP: AtomicBool = AtomicBool::new(false);
/// Ticks so far (for [`ticks`]).
static TICKS: AtomicU64 = AtomicU64::new(0);

/// Ticks `engine` from now on (the thread starts with the first engine).
pub(crate) fn register(engine: &Engine) {
    static THREAD: Once = Once::new();
    ENGINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(engine.weak());
    THREAD.call_once(|| {
        std::thread::Builder::new()
            .name("plugin-epoch".into())
            .spawn(run)
            .expect("spawn the plugin epoch thread");
    });
}

/// How many times the epoch thread has ticked in this process (diagnostics and tests:
/// it stays still while no plugin runs).
pub fn ticks() -> u64 {
    TICKS.load(SeqCst)
}

/// A call running guest code: while one exists, the epoch ticks.
#[must_use = "the epoch ticks only while this is alive"]
pub(crate) struct Running(());

/// Marks a call as running guest code until the result is dropped, waking the epoch
/// thread if it sleeps. Costs two atomic operations when it is awake.
pub(crate) fn running() -> Running {
    IN_FLIGHT.fetch_add(1, SeqCst);
    // Sequentially consistent with the thread's store of `ASLEEP` then load of
    // `IN_FLIGHT`: either this sees it asleep and wakes it, or it sees this call.
    if ASLEEP.load(SeqCst) {
        let mut sleeping = SLEEPING.lock().unwrap_or_else(|p| p.into_inner());
        if *sleeping {
            *sleeping = false;
            ASLEEP.store(false, SeqCst);
            WAKE.notify_one();
        }
    }
    Running(())
}

impl Drop for Running {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, SeqCst);
    }
}

/// The thread's loop: tick, and sleep after [`IDLE_TICKS`] idle ticks until a call
/// starts.
fn run() {
    let mut idle = 0;
    loop {
        for engine in ENGINES.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
            }
        }
        TICKS.fetch_add(1, SeqCst);
        std::thread::sleep(EPOCH_TICK);
        if IN_FLIGHT.load(SeqCst) > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < IDLE_TICKS {
            continue;
        }
        idle = 0;
        let mut sleeping = SLEEPING.lock().unwrap_or_else(|p| p.into_inner());
        *sleeping = true;
        ASLEEP.store(true, SeqCst);
        // A call that started before `ASLEEP` was set saw it false and sends no wake-up:
        // it is counted in `IN_FLIGHT` by now.
        while *sleeping {
            if IN_FLIGHT.load(SeqCst) > 0 {
                *sleeping = false;
                ASLEEP.store(false, SeqCst);
                break;
            }
            sleeping = WAKE.wait(sleeping).unwrap_or_else(|p| p.into_inner());
        }
    }
}
