//! WASM plugins: the cargo extractor against real cargo output (same facts as the native
//! rules), the compile cache, hostile components, and broken manifests.
//!
//! The components are built by `plugins/build.sh` (wasm32-wasip2, own target dir
//! `target/plugins`); the first test that needs them runs it, so `cargo test` works from
//! a fresh clone as long as the `wasm32-wasip2` target is installed.

use crate::support;

use support::built_plugins::{plugins, root};

use std::path::{Path, PathBuf};

use agentforge::extract::Extractors;
use agentforge::plugins::{load_dir, LoadedPlugin, PluginFailure, PluginLoadError};
use agentforge::state_store::ActionResult;

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
            "name = \"{as_name}\"\nversion = \"0.1.0\"\nkind = \"extractor\"\napi = \"0.3.0\"\ncomponent = \"{wasm}\"\n"
        ),
    };
    std::fs::write(dst.join("plugin.toml"), edit(manifest)).unwrap();
    dst
}

/// A run in `ws` with the plugins of `dirs`, whose model answers from an empty recording
/// (in `tmp`): for what set-up and the first prompt do, which ask the model nothing.
fn replay_runtime(
    tmp: &Path,
    ws: &Path,
    dirs: &[PathBuf],
) -> Result<agentforge::executor::Runtime, agentforge::executor::PluginSetupError> {
    use agentforge::providers::{Provider, ProviderKind};
    let replay = tmp.join("empty.jsonl");
    std::fs::write(&replay, "").unwrap();
    let mut config = agentforge::config::Config::default();
    config.provider.kind = ProviderKind::Replay;
    config.provider.replay = Some(replay);
    let provider = Provider::from_settings(&config.provider_settings()).unwrap();
    let workspace = agentforge::tools::Workspace::new(ws).unwrap();
    let mut rt = agentforge::executor::Runtime::new(workspace, config, provider);
    rt.load_plugins(dirs).map(|_| rt)
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
fn cargo_plugin_reads_real_cargo_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "extract-cargo", "extract-cargo", |m| m);
    let plugin = load_one(tmp.path(), &tmp.path().join("cache"));
    let wasm = plugin.wasm_extractor().unwrap();
    assert!(wasm.handles("tests") && wasm.handles("anything"));

    // rustc diagnostics from a real `cargo build`.
    let build = output("cargo_build_errors.txt");
    let plugged = wasm
        .try_extract("check", &build, ActionResult::Failure, 2)
        .unwrap();
    assert_eq!(
        statements(&plugged),
        [
            "cargo: 2 errors, 0 warnings",
            "error[E0308] at src/lib.rs:1: mismatched types",
            "error[E0277] at src/lib.rs:1: cannot add `i64` to `i32`"
        ]
    );

    // A real `cargo test` (two test binaries, three failures, today's panic line with a
    // thread id): the counts summed over the binaries, the failing tests...
    let test = output("cargo_test_failures.txt");
    let plugged = wasm
        .try_extract("tests", &test, ActionResult::Failure, 3)
        .unwrap();
    assert_eq!(plugged[0].statement, "tests: 3 passed, 3 failed, 1 ignored");
    assert_eq!(plugged[0].source, "tests");
    assert_eq!(plugged[0].confidence, 1.0);
    let plugged_text = statements(&plugged).join("\n");
    for name in [
        "tests::adds_negative",
        "tests::mean_of_empty_is_zero",
        "overflow_is_reported",
    ] {
        assert!(plugged_text.contains(name), "{plugged_text}");
    }
    // ...and the panic locations, with the `(thread id)` that rustc 1.9x prints.
    for location in ["src/lib.rs:8", "src/lib.rs:9", "tests/api.rs:3"] {
        assert!(plugged_text.contains(location), "{plugged_text}");
    }
    assert!(
        plugged_text
            .contains("panicked at src/lib.rs:8: assertion `left == right` failed: negative sums"),
        "{plugged_text}"
    );

    // The older panic line (no thread id).
    let old = "running 2 tests\ntest tests::adds ... FAILED\ntest tests::subs ... ok\n\nfailures:\n\n---- tests::adds stdout ----\n\nthread 'tests::adds' panicked at src/lib.rs:12:9:\nassertion `left == right` failed\n  left: 3\n right: 4\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    let facts = statements(
        &wasm
            .try_extract("tests", old, ActionResult::Failure, 1)
            .unwrap(),
    );
    assert_eq!(facts[0], "tests: 1 passed, 1 failed");
    assert!(
        facts
            .iter()
            .any(|f| f.contains("tests::adds panicked at src/lib.rs:12")),
        "{facts:?}"
    );

    // Nothing matched: no facts, so the host makes its generic fact.
    let mut x = Extractors::default();
    x.push(plugin.as_extractor().unwrap());
    let facts = x.extract("lint", "all good\n", ActionResult::Success, 4);
    assert_eq!(facts.len(), 1);
    assert!(facts[0].statement.contains("all good"));
}

/// The loaded `extract-cargo` plugin turns a cargo test summary into its fact.
fn reads_a_cargo_summary(p: &LoadedPlugin) {
    let facts = p
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
    reads_a_cargo_summary(&warm);

    // A corrupt cache entry is recompiled, not trusted.
    let entry = entries[0].as_ref().unwrap().path();
    std::fs::write(&entry, b"garbage").unwrap();
    assert!(load_one(tmp.path(), &cache).compiled);
}

/// The built-ins load from the code precompiled at build time; when wasmtime refuses
/// that code (here: garbage, or a truncated copy, as another CPU's or another wasmtime's
/// would be refused), the component is compiled instead and cached, and it still works.
#[test]
fn built_ins_fall_back_to_compiling_when_the_precompiled_code_is_refused() {
    use agentforge::plugins::{load_builtin, LoadOptions};
    let builtins = agentforge_builtins::BUILTIN_PLUGINS;
    let cargo = builtins
        .iter()
        .find(|b| b.folder == "extract-cargo")
        .expect("extract-cargo is a built-in");
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let opts = LoadOptions::default();

    let (ok, errors) = load_builtin(std::slice::from_ref(cargo), &cache, &opts);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!ok[0].compiled, "the embedded native code is used as is");

    let truncated = &cargo.precompiled[..cargo.precompiled.len() / 2];
    for native in [&b"not native code"[..], truncated] {
        let refused = [agentforge::plugins::Embedded {
            precompiled: native,
            ..*cargo
        }];
        let (loaded, errors) = load_builtin(&refused, &cache, &opts);
        assert!(errors.is_empty(), "{errors:?}");
        reads_a_cargo_summary(&loaded[0]);
    }
    // Compiled once, then served from the cache.
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
}

/// A built-in runs in the engine that counts no fuel (trusted code, the cost of metering
/// saved on every call), and is still stopped by its deadline and its memory limit; the
/// same component from a folder, with the same manifest, runs out of fuel.
#[test]
fn built_ins_are_not_metered_but_still_bounded() {
    use agentforge::plugins::{load_builtin, LoadOptions};
    let tmp = tempfile::tempdir().unwrap();
    let limits = "[limits]\nfuel = 50000000\nmemory_mib = 16\ndeadline_ms = 300\n";
    let folder = install(tmp.path(), "hostile", "hostile", |m| m + limits);
    let manifest = std::fs::read_to_string(folder.join("plugin.toml")).unwrap();
    let wasm = std::fs::read(folder.join("hostile.wasm")).unwrap();
    let builtin = [support::built_plugins::uncompiled_builtin(
        "hostile", manifest, wasm, 0x5a,
    )];
    let cache = tmp.path().join("cache");
    let (loaded, errors) = load_builtin(&builtin, &cache, &LoadOptions::default());
    assert!(errors.is_empty(), "{errors:?}");
    assert!(loaded[0].is_builtin());
    let as_builtin = loaded[0].wasm_extractor().unwrap();
    let (loaded, errors) = load_dir(tmp.path(), &cache);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!loaded[0].is_builtin());
    let from_folder = loaded[0].wasm_extractor().unwrap();
    let fail = |x: &agentforge::plugins::WasmExtractor, tool: &str| {
        x.try_extract(tool, "", ActionResult::Success, 1)
            .unwrap_err()
            .cause
    };

    // 5·10⁷ fuel lasts a few tens of milliseconds: only an unmetered call reaches 300 ms.
    let started = std::time::Instant::now();
    let cause = fail(&as_builtin, "loop");
    assert!(
        matches!(cause, PluginFailure::Deadline { deadline } if deadline.as_millis() == 300),
        "{cause:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        fail(&from_folder, "loop"),
        PluginFailure::OutOfFuel { fuel: 50_000_000 }
    );
    for x in [&as_builtin, &from_folder] {
        let cause = fail(x, "bomb");
        assert!(
            matches!(cause, PluginFailure::MemoryLimit { limit, .. } if limit == 16 << 20),
            "{cause:?}"
        );
        let ok = x.try_extract("fine", "", ActionResult::Success, 1).unwrap();
        assert_eq!(ok[0].statement, "hostile plugin was nice");
    }
    // Each engine's code is cached under its own key: two entries, neither refused.
    assert_eq!(
        std::fs::read_dir(&cache)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("cwasm".as_ref()))
            .count(),
        2
    );
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
        m.replace("api = \"0.3.0\"", "api = \"0.4.0\"")
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
    assert!(matches!(&errors[2], PluginLoadError::ApiMismatch { api, .. } if api == "0.4.0"));
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

/// `agentforge run` of the bundled example (`examples/fix-failing-test`) in a copy of its
/// project, with the recorded model `session`, the plugins of `plugins`, the compile
/// cache `cache` and `extra` arguments: the workspace and the command's output.
fn run_example(
    session: &str,
    plugins: &Path,
    cache: &Path,
    extra: &[&str],
) -> (tempfile::TempDir, std::process::Output) {
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
        .arg(example.join(session))
        .arg("--plugins")
        .arg(plugins)
        .args(extra)
        .env_remove("AGENTFORGE_FAULT")
        .env("AGENTFORGE_CACHE_DIR", cache)
        .output()
        .unwrap();
    (tmp, out)
}

/// A broken extractor in the plugin folder: it loads on first use, so a run reports it
/// when a step first extracts facts and goes on without it; `--strict` loads every kind
/// before the first step and refuses to start.
#[test]
fn strict_loads_deferred_plugins_before_the_run() {
    let folder = tempfile::tempdir().unwrap();
    let broken = install(folder.path(), "extract-cargo", "x-broken", |m| {
        m.replace("name = \"extract-cargo\"", "name = \"x-broken\"")
    });
    std::fs::write(broken.join("extract_cargo.wasm"), b"\0asm garbage").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |strict: bool| {
        let extra: &[&str] = if strict { &["--strict"] } else { &[] };
        let (tmp, out) = run_example("session.jsonl", folder.path(), cache.path(), extra);
        let log = tmp
            .path()
            .join(".agentforge/tasks/fix-word-count/actions.jsonl");
        (out, std::fs::read_to_string(log).unwrap_or_default())
    };
    let (out, log) = run(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("plugin error") && stderr.contains("x-broken"),
        "{stderr}"
    );
    assert!(!log.is_empty(), "the run went on without the broken plugin");
    let (out, log) = run(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("x-broken") && stderr.contains("--strict"),
        "{stderr}"
    );
    assert!(log.is_empty(), "no step ran: {log}");
}

/// `agentforge run --plugins plugins/`: the bundled example with every built-in plugin
/// (the README's demo): the task type, gates and extractors come from components, the
/// model's first action is the `outline` tool plugin (reading with the read capability
/// the example's agentforge.toml grants), and facts are not duplicated.
#[test]
fn run_with_plugins_folder_uses_the_plugins() {
    let cache = tempfile::tempdir().unwrap();
    let (tmp, out) = run_example(
        "session-plugins.jsonl",
        &plugins(),
        cache.path(),
        &["--strict"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("plugin error"), "{stderr}");
    let log = std::fs::read_to_string(
        tmp.path()
            .join(".agentforge/tasks/fix-word-count/actions.jsonl"),
    )
    .unwrap();
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Step 1: the tool plugin, with the outline of the file in working memory.
    assert_eq!(records[0]["action"], "outline");
    assert_eq!(records[0]["result"], "success", "{}", records[0]);
    let summary = records[0]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("outline: src/lib.rs (rust,") && summary.ends_with("definitions"),
        "{summary}"
    );
    // Step 2: the failing tests, read by the cargo extractor plugin and judged by the
    // tests-pass gate plugin.
    let facts: Vec<&str> = records[1]["state_after"]["facts"]
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
    let last = records.last().unwrap();
    assert_eq!(last["action"], "complete");
    assert_eq!(last["state_after"]["status"], "complete");
    // The compiled components are cached (`AGENTFORGE_CACHE_DIR`) for the next start.
    assert!(cache.path().read_dir().unwrap().count() >= 10);
}

/// `load_dir_with` a workspace and a `[plugins]` config.
fn load_with(
    dir: &Path,
    workspace: &Path,
    config: &str,
) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let config: agentforge::config::PluginsConfig = toml::from_str(config).unwrap();
    let ws = agentforge::tools::Workspace::new(workspace).unwrap();
    let opts = agentforge::plugins::LoadOptions::new(&ws, &config);
    agentforge::plugins::load_dir_with(dir, &dir.join("cache"), &opts)
}

fn find<'a>(loaded: &'a [LoadedPlugin], name: &str) -> &'a LoadedPlugin {
    loaded.iter().find(|p| p.name() == name).unwrap()
}

fn command_output(exit: Option<i32>, output: &str) -> agentforge::commands::CommandOutput {
    agentforge::commands::CommandOutput {
        command: "cargo test".into(),
        exit_code: exit,
        output: output.into(),
        truncated: false,
        timed_out: false,
        duration: std::time::Duration::from_millis(5),
    }
}

#[test]
fn gate_plugin_gives_the_native_verdicts_and_fails_closed() {
    use agentforge::gates::{CommandGate, Gate};
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "gate-command", "gate-command", |m| m);
    for name in ["gate-starved", "gate-dead"] {
        install(tmp.path(), "gate-command", name, |m| {
            m.replace("name = \"gate-command\"", &format!("name = \"{name}\""))
        });
    }
    // The project's per-plugin limits override the manifest's. `gate-dead` cannot even
    // say which checks it judges: a load error naming it and the cause.
    let (loaded, errors) = load_with(
        tmp.path(),
        tmp.path(),
        "[limits.gate-starved]\nfuel = 300000\n[limits.gate-dead]\nfuel = 10\n",
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(e.contains("plugin `gate-dead`: out of fuel"), "{e}");
    let gate = find(&loaded, "gate-command").as_gate().unwrap();
    assert!(find(&loaded, "gate-command").as_guard().is_none());
    let check: agentforge::task::CheckSpec =
        serde_yaml_ng::from_str("name: tests\ncommand: cargo test\n").unwrap();
    let facts = vec![agentforge::state_store::Fact {
        id: "f1-1".into(),
        category: agentforge::state_store::FactCategory::Verification,
        statement: "tests: 3 passed, 1 failed".into(),
        confidence: 1.0,
        source: "tests".into(),
        step: 1,
        supersedes: None,
    }];
    for (exit, out, facts) in [
        (Some(0), "all fine\n", &[][..]),
        (Some(1), "error: boom\n\n", &[][..]),
        (None, "", &[][..]),
        (Some(101), "x", &facts[..]),
    ] {
        let out = command_output(exit, out);
        assert_eq!(
            gate.evaluate(&check, &out, facts),
            CommandGate.evaluate(&check, &out, facts)
        );
    }
    let v = gate.evaluate(&check, &command_output(Some(101), "x"), &facts);
    assert_eq!(v.summary, "tests: 3 passed, 1 failed (exit 101)");

    // A gate that fails counts as a failed check, with the plugin error as the reason,
    // even on a passing command: scanning 4 MB of output for its last line is more than
    // 300 000 units of fuel.
    let starved = find(&loaded, "gate-starved");
    assert_eq!(starved.limits.fuel, 300_000);
    let huge = "x".repeat(4 << 20);
    let v = starved
        .as_gate()
        .unwrap()
        .evaluate(&check, &command_output(Some(0), &huge), &[]);
    assert!(!v.passing);
    assert!(
        v.summary.contains("gate plugin failed") && v.summary.contains("out of fuel"),
        "{}",
        v.summary
    );
}

#[test]
fn guard_plugins_decide_and_fail_closed_unless_configured() {
    use agentforge::guards::{GuardDecision, Guards};
    use agentforge::tools::Action;
    let tmp = tempfile::tempdir().unwrap();
    install(
        tmp.path(),
        "guard-complete-verified",
        "guard-complete-verified",
        |m| m,
    );
    install(
        tmp.path(),
        "guard-tested-evidence",
        "guard-tested-evidence",
        |m| m,
    );
    for name in ["guard-starved", "guard-starved-open", "guard-starved-any"] {
        install(tmp.path(), "guard-complete-verified", name, |m| {
            assert!(m.contains("\nactions = [\"complete\"]\n"), "{m}");
            let m = if name == "guard-starved-any" {
                m.replace("\nactions = [\"complete\"]\n", "\n")
            } else {
                m
            };
            m.replace(
                "name = \"guard-complete-verified\"",
                &format!("name = \"{name}\""),
            ) + "[limits]\nfuel = 10\n"
        });
    }
    let (loaded, errors) = load_with(
        tmp.path(),
        tmp.path(),
        "[on_error]\nguard-starved-open = \"allow\"\n",
    );
    assert!(errors.is_empty(), "{errors:?}");

    let spec = agentforge::task::TaskSpec::parse("id: t\ntask_type: fix_violation\ngoal: g\n", "t")
        .unwrap();
    let mut state = agentforge::state_store::TaskState::initial(&spec, "implement", 10);
    let complete = Action::Complete { summary: None };
    let verified = find(&loaded, "guard-complete-verified").as_guard().unwrap();
    // `complete` with no check run yet, on the real task state: denied, saying why.
    let d = verified.check(&complete, &spec, &state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.contains("no check has run")),
        "{d:?}"
    );
    let read = Action::ReadFile {
        path: "a".into(),
        start_line: None,
        end_line: None,
    };
    assert_eq!(verified.check(&read, &spec, &state), GuardDecision::Allow);
    state.verification.ready_for_completion = true;
    assert_eq!(
        verified.check(&complete, &spec, &state),
        GuardDecision::Allow
    );

    // Wired like the built-ins: the first denial wins.
    let mut guards = Guards::default();
    guards.push(find(&loaded, "guard-tested-evidence").as_guard().unwrap());
    assert_eq!(
        guards.check(&complete, &spec, &state).decision,
        GuardDecision::Allow
    );

    // block-tested-true on `set_field`: judged on the state the host recorded, not on
    // the evidence text (tests/gates_guards.rs has every case on a real task state).
    let tested = find(&loaded, "guard-tested-evidence").wasm_guard().unwrap();
    let set = |args: &str, state: &str| {
        tested
            .try_check("set_field", Some("tested"), args, "{}", state)
            .unwrap()
    };
    let tested_after_change = r#"{"last_change_step":2,"verification":{"checks":{"tests":{"passing":true,"summary":"12 passed","is_test":true,"step":3}}}}"#;
    assert!(matches!(
        set(r#"{"field":"tested","value":true,"evidence":"cargo test: 12 passed"}"#, "{}"),
        GuardDecision::Deny(r) if r.contains("no test has run")
    ));
    assert!(matches!(
        set(
            r#"{"field":"subtask.tested","value":"true","evidence":"  "}"#,
            "{}"
        ),
        GuardDecision::Deny(_)
    ));
    assert_eq!(
        set(r#"{"field":"tested","value":true}"#, tested_after_change),
        GuardDecision::Allow
    );
    assert_eq!(
        set(r#"{"field":"tested","value":false}"#, "{}"),
        GuardDecision::Allow
    );
    assert_eq!(
        set(r#"{"field":"notes","value":true}"#, "{}"),
        GuardDecision::Allow
    );
    assert!(matches!(set("not json", "{}"), GuardDecision::Deny(_)));
    assert!(matches!(
        set(r#"{"field":"tested","value":true}"#, "not json"),
        GuardDecision::Deny(r) if r.contains("task state cannot be read")
    ));

    // A failing guard denies (fail closed) ...
    let starved = find(&loaded, "guard-starved").as_guard().unwrap();
    let d = starved.check(&complete, &spec, &state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.contains("guard plugin failed") && r.contains("out of fuel")),
        "{d:?}"
    );
    // ... unless the project says `on_error = "allow"`: then it warns.
    let open = find(&loaded, "guard-starved-open").as_guard().unwrap();
    assert!(
        matches!(open.check(&complete, &spec, &state), GuardDecision::Warn(r) if r.contains("out of fuel"))
    );
    // A guard is asked only about the actions its manifest's `actions` names: the
    // starved guard (every call fails) judges only `complete`, so a read and a state
    // write pass without a call; without `actions` it is asked, fails, and denies.
    assert_eq!(starved.check(&read, &spec, &state), GuardDecision::Allow);
    let write = serde_json::json!({"field": "notes", "value": "x"});
    let input = agentforge::guards::GuardInput::new(&spec, &state);
    assert_eq!(
        starved.check_write("notes", &write, &input),
        GuardDecision::Allow
    );
    let any = find(&loaded, "guard-starved-any").as_guard().unwrap();
    for d in [
        any.check(&read, &spec, &state),
        any.check_write("notes", &write, &input),
    ] {
        assert!(
            matches!(&d, GuardDecision::Deny(r) if r.contains("out of fuel")),
            "{d:?}"
        );
    }
}

#[test]
fn hostile_corpus_recursion_output_capabilities_and_contracts() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins_dir = tmp.path().join("plugins");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }").unwrap();
    std::fs::write(ws.join("secret.txt"), "s3cret").unwrap();
    install(&plugins_dir, "hostile", "hostile", |m| {
        m + "[capabilities]\nread = [\"src/**/*.rs\", \"secret.txt\", \"../**\"]\n"
    });
    install(&plugins_dir, "hostile", "hostile-ungranted", |m| {
        m + "[capabilities]\nread = [\"src/**\"]\n"
    });
    install(&plugins_dir, "hostile", "hostile-no-caps", |m| m);
    install(&plugins_dir, "hostile-future", "hostile-future", |m| m);
    install(
        &plugins_dir,
        "hostile-wrong-types",
        "hostile-wrong-types",
        |m| m,
    );
    install(&plugins_dir, "hostile", "hostile-bad-glob", |m| {
        m + "[capabilities]\nread = [\"src/[\"]\n"
    });
    install(&plugins_dir, "hostile", "hostile-unknown-cap", |m| {
        m + "[capabilities]\nnetwork = [\"example.com\"]\n"
    });
    install(&plugins_dir, "extract-cargo", "extract-cargo", |m| m);
    let (loaded, errors) = load_with(
        &plugins_dir,
        &ws,
        "[grants.hostile]\nread = [\"src/**\", \"../**\"]\n",
    );

    // Loading: the future API, the wrong export, a bad glob and an unknown capability
    // are reported, each with its cause; the others load.
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    eprintln!("{}", text.join("\n"));
    assert_eq!(errors.len(), 4, "{text:#?}");
    let err = |name: &str| {
        errors
            .iter()
            .zip(&text)
            .find(|(_, t)| t.contains(name))
            .unwrap_or_else(|| panic!("no error for {name}: {text:#?}"))
    };
    let (e, t) = err("hostile-future");
    assert!(matches!(e, PluginLoadError::ContractMismatch { .. }), "{t}");
    assert!(t.contains("agentforge:plugin/host@0.9.0"), "{t}");
    let (e, t) = err("hostile-wrong-types");
    assert!(matches!(e, PluginLoadError::ContractMismatch { .. }), "{t}");
    assert!(t.contains("extract"), "{t}");
    let (e, t) = err("hostile-bad-glob");
    assert!(matches!(e, PluginLoadError::Capability { .. }), "{t}");
    let (e, t) = err("hostile-unknown-cap");
    assert!(matches!(e, PluginLoadError::Capability { .. }), "{t}");
    assert!(t.contains("network"), "{t}");
    let names: Vec<&str> = loaded.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "extract-cargo",
            "hostile",
            "hostile-no-caps",
            "hostile-ungranted"
        ]
    );

    let x = |name: &str| find(&loaded, name).wasm_extractor().unwrap();
    let hostile = x("hostile");
    let call = |p: &agentforge::plugins::WasmExtractor, tool: &str| {
        p.try_extract(tool, "", ActionResult::Success, 1)
    };
    let said = |p: &agentforge::plugins::WasmExtractor, tool: &str| {
        call(p, tool).unwrap()[0].statement.clone()
    };

    // Deep recursion: a stack overflow, named.
    let e = call(&hostile, "recurse").unwrap_err();
    assert_eq!(e.cause, PluginFailure::StackOverflow, "{e}");
    assert!(e.to_string().contains("stack overflow"), "{e}");

    // Huge output: its own cause, for stderr and for returned data.
    let e = call(&hostile, "shout").unwrap_err();
    assert!(
        matches!(e.cause, PluginFailure::OutputTooLarge { what: "stdout/stderr", limit, .. } if limit == 64 * 1024),
        "{e}"
    );
    assert!(
        e.stderr.starts_with("AAAA"),
        "the start of the flood is kept"
    );
    let e = call(&hostile, "flood").unwrap_err();
    assert!(
        matches!(e.cause, PluginFailure::OutputTooLarge { what: "returned facts", size, .. } if size >= 4_000_000),
        "{e}"
    );

    // Capabilities: the intersection of requested and granted is readable...
    assert_eq!(
        said(&hostile, "read:src/lib.rs"),
        "read ok: pub fn answer() -> u32 { 42 }"
    );
    // ... requested but not granted is refused, visibly to the plugin and in the log...
    let s = said(&hostile, "read:secret.txt");
    assert!(
        s.starts_with("read error:") && s.contains("not in the globs the project grants"),
        "{s}"
    );
    assert!(!s.contains("s3cret"));
    let log = find(&loaded, "hostile").recent_log();
    assert!(
        log.iter()
            .any(|l| l.contains("read-file `secret.txt` refused")),
        "{log:?}"
    );
    // ... and so is reading outside the workspace, even with `../**` requested and granted.
    let s = said(&hostile, "read:../../etc/passwd");
    assert!(
        s.contains("refused") && s.contains("outside the workspace"),
        "{s}"
    );
    assert!(!s.contains("root:"), "{s}");
    let s = said(&hostile, "read:/etc/passwd");
    assert!(s.contains("absolute paths are not allowed"), "{s}");
    // A plugin the project grants nothing, and one that requested nothing.
    let s = said(&x("hostile-ungranted"), "read:src/lib.rs");
    assert!(
        s.contains("grants plugin `hostile-ungranted` no `read` capability"),
        "{s}"
    );
    let s = said(&x("hostile-no-caps"), "read:src/lib.rs");
    assert!(s.contains("has no `read` capability"), "{s}");
    assert!(find(&loaded, "hostile-no-caps").granted.is_empty());
    assert_eq!(find(&loaded, "hostile").granted.read.len(), 3);

    // The host carries on: the same plugin and the others still work.
    assert_eq!(said(&hostile, "fine"), "hostile plugin was nice");
    let facts = x("extract-cargo")
        .try_extract(
            "tests",
            "test result: ok. 1 passed; 0 failed; 0 ignored",
            ActionResult::Success,
            2,
        )
        .unwrap();
    assert_eq!(facts[0].statement, "tests: 1 passed, 0 failed");
}

/// Whether a component's code uses WASM SIMD instructions, read from the built bytes
/// (nested core modules included), not from the build configuration.
fn uses_simd(wasm: &[u8]) -> bool {
    const SIMD_PREFIXES: [&str; 7] = ["V128", "I8x16", "I16x8", "I32x4", "I64x2", "F32x4", "F64x2"];
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let Ok(wasmparser::Payload::CodeSectionEntry(body)) = payload {
            let mut ops = body.get_operators_reader().expect("a function body");
            while !ops.eof() {
                let op = format!("{:?}", ops.read().expect("an operator"));
                if SIMD_PREFIXES.iter().any(|p| op.starts_with(p)) {
                    return true;
                }
            }
        }
    }
    false
}

/// The table the build script writes holds what a start would otherwise work out: each
/// built-in's kind as its manifest declares it, and the SHA-256 of its component.
#[test]
fn the_built_in_table_matches_the_manifests_and_components() {
    use agentforge::plugins::Manifest;
    use sha2::Digest as _;
    assert!(agentforge_builtins::BUILTIN_PLUGINS.len() >= 20);
    for b in agentforge_builtins::BUILTIN_PLUGINS {
        let manifest = Manifest::parse(b.manifest, Path::new("plugin.toml")).unwrap();
        assert_eq!(Some(manifest.kind().unwrap()), b.kind(), "{}", b.folder);
        assert_eq!(manifest.task_type.as_deref(), b.task_type, "{}", b.folder);
        // Every built-in task type is named by its manifest, so none loads at set-up.
        assert_eq!(
            b.task_type.is_some(),
            b.kind() == Some(agentforge::plugins::PluginKind::ContextSchema),
            "{}",
            b.folder
        );
        let digest: [u8; 32] = sha2::Sha256::digest(b.wasm).into();
        assert_eq!(digest, b.wasm_sha256, "{}", b.folder);
    }
}

/// A task type whose manifest names it is registered by that name and loaded when a task
/// of that type is opened: a folder's replaces the built-in one of that name (the built-in
/// is never loaded); a component describing another task type than its manifest names is
/// an error at first use, naming both; two folders naming one task type are refused at
/// set-up; `--strict` (`load_deferred_plugins`) loads them all and reports the broken one.
#[test]
fn task_types_named_by_their_manifest_load_on_first_use() {
    use agentforge::executor::PluginSetupError;

    let tmp = tempfile::tempdir().unwrap();
    let ws_dir = tmp.path().join("ws");
    std::fs::create_dir_all(&ws_dir).unwrap();
    let runtime = |dirs: &[PathBuf]| replay_runtime(tmp.path(), &ws_dir, dirs);

    let folder = tmp.path().join("plugins");
    install(&folder, "schema-fixer", "my-fixer", |m| {
        m.replace("name = \"schema-fixer\"", "name = \"my-fixer\"")
    });
    // Names `wrong_name`, but the component describes `critic`.
    install(&folder, "schema-critic", "misnamed", |m| {
        m.replace("name = \"schema-critic\"", "name = \"misnamed\"")
            .replace("task_type = \"critic\"", "task_type = \"wrong_name\"")
    });
    // `plugins check` (a load as a run does it) reports the disagreement too.
    let (_, errors) = load_dir(&folder, &tmp.path().join("cache"));
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.len() == 1
            && errors[0].contains("`misnamed`")
            && errors[0].contains("task_type = \"wrong_name\"")
            && errors[0].contains("describes task type `critic`"),
        "{errors:?}"
    );
    let rt = runtime(std::slice::from_ref(&folder)).unwrap();
    assert_eq!(rt.schemas.is_loaded("fixer"), Some(false));
    assert_eq!(rt.schemas.is_loaded("wrong_name"), Some(false));
    assert_eq!(rt.schemas.get("fixer").unwrap().source(), "plugin my-fixer");
    assert_eq!(rt.schemas.is_loaded("fixer"), Some(true));
    assert_eq!(
        rt.schemas.get("critic").unwrap().source(),
        "built-in plugin schema-critic",
        "a folder naming another task type replaces nothing"
    );
    let err = rt.schemas.get("wrong_name").err().unwrap().to_string();
    for part in ["`wrong_name`", "`misnamed`", "`critic`", "task_type"] {
        assert!(err.contains(part), "{part} in: {err}");
    }
    // The failure is kept: asked again, the same error (the plugin is not reloaded).
    assert_eq!(rt.schemas.get("wrong_name").err().unwrap().to_string(), err);
    let strict = rt.load_deferred_plugins().unwrap();
    assert_eq!(strict.len(), 1, "{strict:?}");
    assert!(strict[0].contains("`wrong_name`"), "{strict:?}");
    assert!(
        rt.schemas
            .names()
            .iter()
            .all(|t| rt.schemas.is_loaded(t) == Some(true)),
        "--strict loads every task type"
    );

    // Two folders naming one task type: refused at set-up, naming both.
    let twice = tmp.path().join("twice");
    install(&twice, "schema-fixer", "fixer-one", |m| {
        m.replace("name = \"schema-fixer\"", "name = \"fixer-one\"")
    });
    install(&twice, "schema-fixer", "fixer-two", |m| {
        m.replace("name = \"schema-fixer\"", "name = \"fixer-two\"")
    });
    match runtime(&[twice]) {
        Err(PluginSetupError::TaskTypeTwice {
            first,
            second,
            task_type,
        }) => {
            assert_eq!(
                (first.as_str(), second.as_str()),
                ("fixer-one", "fixer-two")
            );
            assert_eq!(task_type, "fixer");
        }
        Err(e) => panic!("expected two plugins for one task type, got: {e}"),
        Ok(_) => panic!("two folders naming task type `fixer` were accepted"),
    }
}

/// The extractors scan tool output with regex and memchr, whose fast paths need WASM SIMD
/// (`plugins/.cargo/config.toml`); a build path that loses the flag (a `RUSTFLAGS` in the
/// environment overrides it) would halve their speed silently. Checked on the components
/// the host embeds and on the copies `plugins/build.sh` puts in the plugin folders.
#[test]
fn built_extractors_are_compiled_with_simd() {
    let mut checked = 0;
    for b in agentforge_builtins::BUILTIN_PLUGINS {
        let (folder, wasm) = (b.folder, b.wasm);
        if !folder.starts_with("extract-") {
            continue;
        }
        assert!(
            uses_simd(wasm),
            "embedded built-in `{folder}` has no SIMD code"
        );
        let copy = plugins()
            .join(folder)
            .join(format!("{}.wasm", folder.replace('-', "_")));
        let copy = std::fs::read(&copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
        assert!(
            uses_simd(&copy),
            "plugins/{folder} component has no SIMD code"
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} extractors found");
    // The check tells the two apart: one function body `end`, and one that splats an
    // i32 to a vector (`i32.const 0; i8x16.splat; drop; end`).
    let header = b"\0asm\x01\0\0\0\x01\x04\x01\x60\0\0\x03\x02\x01\0";
    let plain = [&header[..], b"\x0a\x04\x01\x02\0\x0b"].concat();
    let simd = [&header[..], b"\x0a\x09\x01\x07\0\x41\0\xfd\x0f\x1a\x0b"].concat();
    assert!(!uses_simd(&plain));
    assert!(uses_simd(&simd));
}

/// The core module's `memcmp` in a component, if the module exports one, and whether its
/// body compares 8-byte words (`i64.load`) rather than bytes.
fn exported_memcmp_reads_words(wasm: &[u8]) -> Option<bool> {
    use wasmparser::{ExternalKind, Operator, Payload, TypeRef};
    // Per core module: functions imported, the exported `memcmp`'s index, bodies seen.
    let (mut imported, mut memcmp, mut body_index) = (0u32, None, 0u32);
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload.expect("a valid component") {
            Payload::Version { .. } => (imported, memcmp, body_index) = (0, None, 0),
            Payload::ImportSection(imports) => {
                for import in imports.into_imports() {
                    if matches!(import.expect("an import").ty, TypeRef::Func(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::ExportSection(exports) => {
                for export in exports {
                    let export = export.expect("an export");
                    if export.name == "memcmp" && export.kind == ExternalKind::Func {
                        memcmp = Some(export.index);
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                if memcmp == Some(imported + body_index) {
                    let mut ops = body.get_operators_reader().expect("a function body");
                    let mut words = false;
                    while !ops.eof() {
                        words |=
                            matches!(ops.read().expect("an operator"), Operator::I64Load { .. });
                    }
                    return Some(words);
                }
                body_index += 1;
            }
            _ => {}
        }
    }
    None
}

/// Rust compares strings of unknown length with `memcmp`, and wasi-libc's compares a byte
/// per loop iteration (a quarter of the cargo extractor's time in the component). The SDK
/// defines its own, which the linker takes instead of libc's; libc's is never exported, so
/// an exported `memcmp` that reads 8-byte words is the SDK's. Checked on every embedded
/// built-in: a link that silently went back to libc's would slow every plugin.
#[test]
fn built_in_plugins_compare_memory_a_word_at_a_time() {
    for b in agentforge_builtins::BUILTIN_PLUGINS {
        assert_eq!(
            exported_memcmp_reads_words(b.wasm),
            Some(true),
            "built-in `{}`: its `memcmp` is not the SDK's",
            b.folder
        );
    }
    // The check tells the two apart: a module exporting a `memcmp` that reads bytes, and
    // one whose `memcmp` reads a word (`(func (param i32 i32 i32) (result i32) ...)`).
    let module = |load: &[u8]| {
        let body = [b"\0\x20\0".as_slice(), load, b"\x1a\x41\0\x0b"].concat();
        [
            b"\0asm\x01\0\0\0\x01\x08\x01\x60\x03\x7f\x7f\x7f\x01\x7f\x03\x02\x01\0".as_slice(),
            b"\x05\x03\x01\0\x01\x07\x0a\x01\x06memcmp\0\0",
            &[0x0a, body.len() as u8 + 2, 1, body.len() as u8],
            &body,
        ]
        .concat()
    };
    assert_eq!(
        exported_memcmp_reads_words(&module(b"\x2d\0\0")),
        Some(false)
    );
    assert_eq!(
        exported_memcmp_reads_words(&module(b"\x29\0\0")),
        Some(true)
    );
}

/// Gates run with a fresh store per call from the instance pool: slots go back to the
/// pool when a call ends, so more calls than the pool has slots all succeed, and each
/// starts from a clean instance (the verdicts alternate exactly with the exit codes).
#[test]
fn fresh_store_calls_reuse_pool_slots() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "gate-command", "gate-command", |m| m);
    let (loaded, errors) = load_with(tmp.path(), tmp.path(), "");
    assert!(errors.is_empty(), "{errors:?}");
    let gate = find(&loaded, "gate-command").wasm_gate().unwrap();
    // More than the pool's 1,000 component instances.
    for i in 0..1_500 {
        let v = gate
            .try_evaluate(
                "tests",
                Some(i % 2),
                false,
                "test result: ok. 3 passed",
                &[],
            )
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(v.passing, i % 2 == 0, "call {i}");
    }
}

/// A fresh instance starts from the component's own memory. The pool keeps up to 4 MiB
/// of a slot resident between calls and restores only the pages a call dirtied, so this
/// checks that nothing of a call (a static's count, 6 MiB of heap bytes, past the kept
/// region) reaches the next instance in that slot. Calls come from inside the async
/// runtime, as a run makes them. A kept instance (`reuse_instance`, granted) does see its
/// earlier calls, which shows the probe can tell.
#[test]
fn fresh_instances_see_nothing_of_earlier_calls() {
    let tmp = tempfile::tempdir().unwrap();
    install(tmp.path(), "hostile", "hostile", |m| m);
    install(tmp.path(), "hostile", "hostile-kept", |m| {
        format!("reuse_instance = true\n{m}")
    });
    let (loaded, errors) = load_with(
        tmp.path(),
        tmp.path(),
        "reuse_instance = [\"hostile-kept\"]",
    );
    assert!(errors.is_empty(), "{errors:?}");
    let fresh = find(&loaded, "hostile").wasm_extractor().unwrap();
    let kept = find(&loaded, "hostile-kept").wasm_extractor().unwrap();
    let probe = |x: &agentforge::plugins::WasmExtractor| {
        let x = x.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
            .block_on(async move {
                tokio::spawn(async move {
                    x.try_extract("remember", "", ActionResult::Success, 1)
                        .unwrap()
                        .remove(0)
                        .statement
                })
                .await
                .unwrap()
            })
    };
    for _ in 0..3 {
        assert_eq!(probe(&fresh), "calls before: 0; stale bytes: 0");
    }
    assert_eq!(probe(&kept), "calls before: 0; stale bytes: 0");
    let second = probe(&kept);
    assert!(
        second.starts_with("calls before: 1;"),
        "a kept instance counts its calls: {second}"
    );
}

/// A run loads the built-in extractors, gates and guards when a step first needs them,
/// and each task type when a task of that type is opened: the first prompt is rendered
/// (what `resume` does before its model request) with only the task's own type loaded;
/// the first action consults the guards; the first check loads the gates and extractors.
#[test]
fn built_in_kinds_load_when_a_step_first_needs_them() {
    use agentforge::executor::{Executor, Runtime};
    use agentforge::providers::{ModelReply, ModelResponse, Usage};
    use agentforge::task::TaskSpec;

    let tmp = tempfile::tempdir().unwrap();
    let ws_dir = tmp.path().join("ws");
    std::fs::create_dir_all(ws_dir.join("src")).unwrap();
    std::fs::write(ws_dir.join("src/lib.rs"), "pub fn one() -> u32 { 1 }\n").unwrap();
    let runtime = |dirs: &[PathBuf]| replay_runtime(tmp.path(), &ws_dir, dirs).unwrap();
    let reply = |name: &str, arguments: serde_json::Value| ModelResponse {
        reply: ModelReply::ToolCall {
            name: name.into(),
            arguments,
        },
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
        },
        model: "test".into(),
        exchange: None,
    };
    let spec = TaskSpec::parse(
        "id: lazy\ntask_type: fix_violation\ngoal: keep it compiling\ninputs:\n  violation:\n    file_path: src/lib.rs\n    message: test\nchecks:\n  - name: tests\n    command: grep -q 'pub fn' src/lib.rs\n    kind: test\n",
        "lazy",
    )
    .unwrap();

    let rt = runtime(&[]);
    let task_types = rt.schemas.names();
    assert!(task_types.len() >= 11, "{task_types:?}");
    let loaded_types = |rt: &Runtime| -> Vec<String> {
        task_types
            .iter()
            .filter(|t| rt.schemas.is_loaded(t) == Some(true))
            .cloned()
            .collect()
    };
    assert!(
        loaded_types(&rt).is_empty(),
        "no task type before a task is opened"
    );
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let exec = Executor::new(&rt, rt.create_task(&spec).unwrap());
    let prepared = exec.prepare().unwrap();
    assert!(prepared.prompt.total_tokens > 0);
    assert_eq!(loaded_types(&rt), ["fix_violation"]);
    let loaded = |rt: &Runtime| {
        [
            rt.extractors.is_loaded(),
            rt.gates.is_loaded(),
            rt.guards.is_loaded(),
        ]
    };
    assert_eq!(
        loaded(&rt),
        [false, false, false],
        "nothing but task types before the model request"
    );
    tokio
        .block_on(exec.apply(prepared, reply("run_tests", serde_json::json!({}))))
        .unwrap();
    assert_eq!(loaded(&rt), [true, true, true], "a check uses all three");
    let state = exec.dir().load_state().unwrap();
    let check = &state.verification.checks["tests"];
    assert!(
        check.passing,
        "the built-in gate judged the check: {check:?}"
    );

    // A folder with a gate: only its manifest is read at set-up; the gate loads with the
    // built-in gates when a step first needs a gate (or `--strict` loads every kind), and
    // its load errors are kept for then: this one would replace the built-in `*` gate,
    // which the project did not allow.
    let folder = tmp.path().join("plugins");
    install(&folder, "gate-command", "my-gate", |m| {
        m.replace("name = \"gate-command\"", "name = \"my-gate\"")
    });
    let rt = runtime(&[folder]);
    assert_eq!(loaded(&rt), [false, false, false]);
    let late = rt.load_deferred_plugins().unwrap();
    assert_eq!(loaded(&rt), [true, true, true]);
    assert!(
        late.iter()
            .any(|w| w.contains("`my-gate`") && w.contains("replace = [\"gate-command\"]")),
        "{late:?}"
    );
    assert_eq!(
        rt.gates.get().unwrap().for_check("lint").name(),
        "gate-command",
        "the refused folder gate replaced nothing"
    );
}
