//! The epoch thread (how plugin deadlines are checked) sleeps while no plugin runs and
//! wakes for the next call: alone in its own test binary, so that no other test's
//! plugin calls keep it awake.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use agentforge::plugins::{epoch_ticks, load_builtin, LoadOptions, PluginFailure};
use agentforge::state_store::ActionResult;
use support::built_plugins::{plugins, uncompiled_builtin};

/// Waits (up to `within`) until the epoch has not ticked for 200 ms; whether it did.
fn becomes_still(within: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        let before = epoch_ticks();
        std::thread::sleep(Duration::from_millis(200));
        if epoch_ticks() == before {
            return true;
        }
    }
    false
}

#[test]
fn the_epoch_sleeps_while_no_plugin_runs_and_a_call_still_meets_its_deadline() {
    // As a built-in: no fuel, so only the wall-clock deadline, checked at epoch ticks,
    // stops an endless loop.
    let manifest = "name = \"hostile\"\nversion = \"0.1.0\"\nkind = \"extractor\"\n\
                    api = \"0.3.0\"\ncomponent = \"hostile.wasm\"\n[limits]\ndeadline_ms = 300\n";
    let wasm = std::fs::read(plugins().join("hostile/hostile.wasm")).unwrap();
    let builtin = [uncompiled_builtin(
        "hostile",
        manifest.to_string(),
        wasm,
        0x5b,
    )];
    let tmp = tempfile::tempdir().unwrap();
    let (loaded, errors) = load_builtin(&builtin, tmp.path(), &LoadOptions::default());
    assert!(errors.is_empty(), "{errors:?}");
    let x = loaded[0].wasm_extractor().unwrap();
    let ok = x.try_extract("fine", "", ActionResult::Success, 1).unwrap();
    assert_eq!(ok[0].statement, "hostile plugin was nice");
    assert!(epoch_ticks() > 0, "the epoch ticked while plugins ran");

    // Idle: it stops ticking about a second after the last call, and stays still.
    assert!(
        becomes_still(Duration::from_secs(10)),
        "the epoch still ticks with no plugin running"
    );
    let still = epoch_ticks();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(epoch_ticks(), still, "the epoch ticked while idle");

    // A call wakes it: an endless loop ends at its deadline, not never.
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(x.try_extract("loop", "", ActionResult::Success, 1));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the endless loop was not stopped: the epoch did not wake for the call");
    let cause = result.unwrap_err().cause;
    assert!(
        matches!(cause, PluginFailure::Deadline { deadline } if deadline.as_millis() == 300),
        "{cause:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(epoch_ticks() > still, "the epoch ticked during the call");
}
