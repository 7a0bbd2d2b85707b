//! WASM plugins: the cargo extractor against real cargo output (same facts as the native
//! rules), the compile cache, hostile components, and broken manifests.
//!
//! The components are built by `plugins/build.sh` (wasm32-wasip2, own target dir
//! `target/plugins`); the first test that needs them runs it, so `cargo test` works from
//! a fresh clone as long as the `wasm32-wasip2` target is installed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use agentforge::extract::{CargoRules, Extractors, FactExtractor};
use agentforge::plugins::{load_dir, LoadedPlugin, PluginFailure, PluginLoadError};
use agentforge::state_store::ActionResult;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `plugins/`, with every component built (once per test process).
fn plugins() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let status = std::process::Command::new("bash")
            .arg(root().join("plugins/build.sh"))
            .status()
            .expect("run plugins/build.sh");
        assert!(
            status.success(),
            "plugins/build.sh failed (is the wasm32-wasip2 target installed?)"
        );
    });
    root().join("plugins")
}

/// Copies plugin folder `name` (manifest and component) into `dir/<as_name>`, with the
/// manifest edited by `edit`.
fn install(dir: &Path, name: &str, as_name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let src = plugins().join(name);
    let dst = dir.join(as_name);
    std::fs::create_dir_all(&dst).unwrap();
    let wasm = format!("{}.wasm", name.replace('-', "_"));
    std::fs::copy(src.join(&wasm), dst.join(&wasm)).unwrap();
    let manifest = match std::fs::read_to_string(src.join("plugin.toml")) {
        Ok(m) => m,
        // The hostile fixture has no manifest of its own (it is not a plugin to install).
        Err(_) => format!(
            "name = \"{as_name}\"\nversion = \"0.1.0\"\nkind = \"extractor\"\napi = \"0.1.0\"\ncomponent = \"{wasm}\"\n"
        ),
    };
    std::fs::write(dst.join("plugin.toml"), edit(manifest)).unwrap();
    dst
}

fn load_one(dir: &Path, cache: &Path) -> LoadedPlugin {
    let (mut loaded, errors) = load_dir(dir, cache);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(loaded.len(), 1);
    loaded.remove(0)
}

fn output(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/data/outputs").join(name)).unwrap()
}

fn statements(facts: &[agentforge::state_store::Fact]) -> Vec<String> {
    facts.iter().map(|f| f.statement.clone()).collect()
}

#[test]
fn cargo_plugin_gives_the_native_facts_on_real_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "extract-cargo", "extract-cargo", |m| m);
    let plugin = load_one(tmp.path(), &tmp.path().join("cache"));
    let wasm = plugin.wasm_extractor().unwrap();
    assert!(wasm.handles("tests") && wasm.handles("anything"));

    // rustc diagnostics from a real `cargo build`: identical facts.
    let build = output("cargo_build_errors.txt");
    let native = CargoRules.extract("check", &build, ActionResult::Failure, 2);
    let plugged = wasm
        .try_extract("check", &build, ActionResult::Failure, 2)
        .unwrap();
    assert_eq!(plugged, native);
    assert_eq!(
        statements(&plugged),
        [
            "error[E0308] at src/lib.rs:1: mismatched types",
            "error[E0277] at src/lib.rs:1: cannot add `i64` to `i32`"
        ]
    );

    // A real `cargo test` (two test binaries, three failures, today's panic line with a
    // thread id): the same summed counts and failing tests as the native rules...
    let test = output("cargo_test_failures.txt");
    let native = CargoRules.extract("tests", &test, ActionResult::Failure, 3);
    let plugged = wasm
        .try_extract("tests", &test, ActionResult::Failure, 3)
        .unwrap();
    assert_eq!(plugged[0], native[0]);
    assert_eq!(plugged[0].statement, "tests: 3 passed, 3 failed");
    let plugged_text = statements(&plugged).join("\n");
    for name in [
        "tests::adds_negative",
        "tests::mean_of_empty_is_zero",
        "overflow_is_reported",
    ] {
        assert!(
            native.iter().any(|f| f.statement.contains(name)),
            "{native:?}"
        );
        assert!(plugged_text.contains(name), "{plugged_text}");
    }
    // ...and, because the plugin's panic rule also reads the `(thread id)` that rustc
    // 1.9x prints, the locations the native rule misses on this output.
    for location in ["src/lib.rs:8", "src/lib.rs:9", "tests/api.rs:3"] {
        assert!(plugged_text.contains(location), "{plugged_text}");
    }
    assert!(
        plugged_text
            .contains("panicked at src/lib.rs:8: assertion `left == right` failed: negative sums"),
        "{plugged_text}"
    );

    // The output format the native rules were written for: identical facts.
    let old = "running 2 tests\ntest tests::adds ... FAILED\ntest tests::subs ... ok\n\nfailures:\n\n---- tests::adds stdout ----\n\nthread 'tests::adds' panicked at src/lib.rs:12:9:\nassertion `left == right` failed\n  left: 3\n right: 4\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    assert_eq!(
        wasm.try_extract("tests", old, ActionResult::Failure, 1)
            .unwrap(),
        CargoRules.extract("tests", old, ActionResult::Failure, 1)
    );

    // Nothing matched: no facts, so the host makes its generic fact.
    let mut x = Extractors::default();
    x.push(plugin.as_extractor().unwrap());
    let facts = x.extract("lint", "all good\n", ActionResult::Success, 4);
    assert_eq!(facts.len(), 1);
    assert!(facts[0].statement.contains("all good"));
}

#[test]
fn warm_start_deserializes_from_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "extract-cargo", "extract-cargo", |m| m);
    let cache = tmp.path().join("cache");
    let cold = load_one(tmp.path(), &cache);
    assert!(cold.compiled, "first load compiles");
    let entries: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(entries.len(), 1, "one compiled entry cached");
    let warm = load_one(tmp.path(), &cache);
    assert!(!warm.compiled, "second load reads the cache");
    eprintln!(
        "extract-cargo load: cold {:?}, warm {:?}",
        cold.load_time, warm.load_time
    );
    let facts = warm
        .wasm_extractor()
        .unwrap()
        .try_extract(
            "tests",
            "test result: ok. 2 passed; 0 failed; 0 ignored",
            ActionResult::Success,
            1,
        )
        .unwrap();
    assert_eq!(facts[0].statement, "tests: 2 passed, 0 failed");

    // A corrupt cache entry is recompiled, not trusted.
    let entry = entries[0].as_ref().unwrap().path();
    std::fs::write(&entry, b"garbage").unwrap();
    assert!(load_one(tmp.path(), &cache).compiled);
}

#[test]
fn hostile_plugins_fail_with_their_cause_and_the_host_carries_on() {
    let tmp = tempfile::tempdir().unwrap();
    // Small budgets keep the test fast; the deadline one has fuel to spare so only the
    // wall clock can stop it.
    install(tmp.path(), "hostile", "hostile", |m| {
        m + "[limits]\nfuel = 50000000\nmemory_mib = 16\n"
    });
    install(tmp.path(), "hostile", "hostile-slow", |m| {
        m + "[limits]\nfuel = 1000000000000\ndeadline_ms = 100\n"
    });
    install(tmp.path(), "hostile", "hostile-reused", |m| {
        format!("reuse_instance = true\n{m}")
    });
    install(tmp.path(), "extract-cargo", "extract-cargo", |m| m);
    let (loaded, errors) = load_dir(tmp.path(), &tmp.path().join("cache"));
    assert!(errors.is_empty(), "{errors:?}");
    let get = |name: &str| {
        loaded
            .iter()
            .find(|p| p.name() == name)
            .unwrap()
            .wasm_extractor()
            .unwrap()
    };
    let (hostile, slow, cargo) = (get("hostile"), get("hostile-slow"), get("extract-cargo"));
    let fail = |x: &agentforge::plugins::WasmExtractor, tool: &str| {
        let e = x
            .try_extract(tool, "", ActionResult::Success, 1)
            .unwrap_err();
        eprintln!("{tool}: {e}");
        e
    };

    let e = fail(&hostile, "loop");
    assert_eq!(e.plugin, "hostile");
    assert_eq!(e.cause, PluginFailure::OutOfFuel { fuel: 50_000_000 });
    assert!(
        e.to_string().contains("plugin `hostile`: out of fuel"),
        "{e}"
    );

    let started = std::time::Instant::now();
    let e = fail(&slow, "loop");
    assert!(
        matches!(e.cause, PluginFailure::Deadline { .. }),
        "{:?}",
        e.cause
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    let e = fail(&hostile, "bomb");
    assert!(
        matches!(e.cause, PluginFailure::MemoryLimit { limit, requested } if limit == 16 << 20 && requested > limit),
        "{:?}",
        e.cause
    );

    let e = fail(&hostile, "panic");
    match &e.cause {
        PluginFailure::Panic { message } => {
            assert!(
                message.contains("hostile plugin gives up on \"panic\""),
                "{message}"
            );
            assert!(message.contains("src/lib.rs:"), "{message}");
        }
        other => panic!("{other:?}"),
    }

    // The same plugin still works for the next call (a fresh store each time), and so
    // do the others.
    let ok = hostile
        .try_extract("fine", "", ActionResult::Success, 1)
        .unwrap();
    assert_eq!(ok[0].statement, "hostile plugin was nice");
    let facts = cargo
        .try_extract(
            "tests",
            "test result: ok. 1 passed; 0 failed; 0 ignored",
            ActionResult::Success,
            2,
        )
        .unwrap();
    assert_eq!(facts[0].statement, "tests: 1 passed, 0 failed");

    // A kept instance that failed is replaced by a fresh one.
    let reused = get("hostile-reused");
    assert!(matches!(
        fail(&reused, "panic").cause,
        PluginFailure::Panic { .. }
    ));
    let ok = reused
        .try_extract("fine", "", ActionResult::Success, 1)
        .unwrap();
    assert_eq!(ok.len(), 1);

    // Behind the host's trait a failure means "no facts": the generic fact is made.
    let mut x = Extractors::default();
    x.push(Box::new(hostile.clone()));
    let facts = x.extract("panic", "last words\n", ActionResult::Failure, 5);
    assert_eq!(facts.len(), 1);
    assert!(agentforge::extract::is_generic(&facts[0]), "{facts:?}");
}

#[test]
fn broken_plugins_are_reported_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    install(d, "extract-cargo", "a-good", |m| m);
    install(d, "extract-cargo", "b-bad-toml", |m| {
        m.replace("kind = \"extractor\"", "kind = extractor")
    });
    install(d, "extract-cargo", "c-unknown-kind", |m| {
        m.replace("kind = \"extractor\"", "kind = \"formatter\"")
    });
    install(d, "extract-cargo", "d-future-api", |m| {
        m.replace("api = \"0.1.0\"", "api = \"0.2.0\"")
    });
    install(d, "extract-cargo", "e-missing-wasm", |m| {
        m.replace("extract_cargo.wasm", "nowhere.wasm")
    });
    install(d, "extract-cargo", "f-unknown-field", |m| {
        format!("colour = \"red\"\n{m}")
    });
    let not_component = install(d, "extract-cargo", "g-not-a-component", |m| {
        m.replace("name = \"extract-cargo\"", "name = \"g\"")
    });
    std::fs::write(not_component.join("extract_cargo.wasm"), b"\0asm garbage").unwrap();
    install(d, "extract-cargo", "h-same-name", |m| m);
    std::fs::create_dir_all(d.join("not-a-plugin")).unwrap();

    let (loaded, errors) = load_dir(d, &d.join("cache"));
    let names: Vec<_> = loaded.iter().map(|p| p.dir.file_name().unwrap()).collect();
    assert_eq!(names, ["a-good"]);
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    eprintln!("{}", text.join("\n"));
    assert_eq!(errors.len(), 7, "{text:#?}");
    assert!(
        matches!(&errors[0], PluginLoadError::BadManifest { line: Some(3), path, .. } if path.ends_with("b-bad-toml/plugin.toml"))
    );
    assert!(matches!(&errors[1], PluginLoadError::UnknownKind { kind, .. } if kind == "formatter"));
    assert!(matches!(&errors[2], PluginLoadError::ApiMismatch { api, .. } if api == "0.2.0"));
    assert!(matches!(
        &errors[3],
        PluginLoadError::MissingComponent { .. }
    ));
    assert!(
        matches!(&errors[4], PluginLoadError::BadManifest { message, .. } if message.contains("colour"))
    );
    assert!(matches!(&errors[5], PluginLoadError::Compile { plugin, .. } if plugin == "g"));
    assert!(matches!(&errors[6], PluginLoadError::Duplicate { .. }));
}

/// `agentforge run --plugins plugins/`: the bundled example with the cargo extractor
/// plugin loaded next to the native rules; facts are not duplicated.
#[test]
fn run_with_plugins_folder_uses_the_extractor_plugin() {
    let plugins = plugins();
    let example = root().join("examples/fix-failing-test");
    let tmp = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new("cp")
        .arg("-R")
        .arg(example.join("project/."))
        .arg(tmp.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .current_dir(tmp.path())
        .arg("--workspace")
        .arg(tmp.path())
        .arg("run")
        .arg(example.join("task.yaml"))
        .arg("--replay")
        .arg(example.join("session.jsonl"))
        .arg("--plugins")
        .arg(&plugins)
        .arg("--strict")
        .env_remove("AGENTFORGE_FAULT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("plugin error"), "{stderr}");
    let log = std::fs::read_to_string(
        tmp.path()
            .join(".agentforge/tasks/fix-word-count/actions.jsonl"),
    )
    .unwrap();
    let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    let facts: Vec<&str> = first["state_after"]["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["statement"].as_str().unwrap())
        .collect();
    assert!(
        facts
            .iter()
            .any(|f| f.contains("panicked at src/lib.rs:29")),
        "{facts:?}"
    );
    let mut unique = facts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), facts.len(), "duplicated facts: {facts:?}");
    // The compiled component is cached in the workspace for the next start.
    assert!(tmp
        .path()
        .join(".agentforge/cache/plugins")
        .read_dir()
        .unwrap()
        .next()
        .is_some());
}
