//! `cargo bench -p agentforge --bench plugins`: the first command after install (empty
//! cache), load time of the cargo extractor plugin (cold: compiling; warm: from the
//! cache), one extractor call over a ~100 KB cargo output against the native rules (pair
//! by pair), start-up with 10 plugins, and a gate called with a fresh store each time.
//! Every figure is min / median / max over several runs (`stats.rs`). Needs
//! `bash plugins/build.sh` first. `-- first|load|extract|ten|gate` runs one part.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "native_rules.rs"]
mod native_rules;
#[path = "stats.rs"]
mod stats;

use agentforge::config::Config;
use agentforge::executor::Runtime;
use agentforge::extract::FactExtractor;
use agentforge::plugins::load_dir;
use agentforge::providers::{Provider, ProviderKind};
use agentforge::state_store::ActionResult;
use agentforge::tools::Workspace;
use native_rules::CargoRules;
use stats::{median, Summary, RUNS};

fn main() {
    // `cargo test --benches` runs this too; keep that fast by skipping unless benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        println!("plugins bench: run with `cargo bench -p agentforge --bench plugins`");
        return;
    }
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    stats::print_load("at the start");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let plugin = root.join("plugins/extract-cargo");
    assert!(
        plugin.join("extract_cargo.wasm").is_file(),
        "run `bash plugins/build.sh` first"
    );
    let tmp = tempfile::tempdir().unwrap();
    println!("(each figure: median (min, max, n runs))");
    if want("first") {
        first_command(tmp.path());
    }
    let dir = tmp.path().join("plugins");
    std::fs::create_dir_all(dir.join("extract-cargo")).unwrap();
    for f in ["plugin.toml", "extract_cargo.wasm"] {
        std::fs::copy(plugin.join(f), dir.join("extract-cargo").join(f)).unwrap();
    }
    if want("load") {
        load_times(&dir, tmp.path());
    }
    if want("extract") {
        extract_calls(root, &dir, tmp.path());
    }
    if want("ten") {
        ten_plugins(&plugin, tmp.path());
    }
    if want("setup") {
        builtin_setup(tmp.path());
    }
    if want("gate") {
        gate_calls(&root.join("plugins/gate-command"), tmp.path());
    }
    stats::print_load("at the end");
}

/// `agentforge plugins list` as the first command after install: a new process, an empty
/// compile cache; then the same with the cache as the first call left it.
fn first_command(tmp: &Path) {
    let bin = env!("CARGO_BIN_EXE_agentforge");
    let ws = tmp.join("first-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let run = |cache: &Path| {
        let t = Instant::now();
        let out = std::process::Command::new(bin)
            .arg("--workspace")
            .arg(&ws)
            .args(["plugins", "list"])
            .env("AGENTFORGE_CACHE_DIR", cache)
            .output()
            .unwrap();
        let elapsed = t.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        elapsed
    };
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for rep in 0..RUNS {
        let cache = tmp.join(format!("first-cache-{rep}"));
        cold.push(run(&cache));
        warm.push(run(&cache));
    }
    println!(
        "first command after install (`plugins list`, empty cache): {}",
        Summary::of_times(&cold).time()
    );
    println!(
        "second command (`plugins list`, same cache): {}",
        Summary::of_times(&warm).time()
    );
}

/// Loading the cargo extractor from its folder: compiling (empty cache), then from the
/// cache.
fn load_times(dir: &Path, tmp: &Path) {
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for rep in 0..RUNS {
        let cache = tmp.join(format!("load-cache-{rep}"));
        let t = Instant::now();
        let (loaded, errors) = load_dir(dir, &cache);
        cold.push(t.elapsed());
        assert!(errors.is_empty() && loaded[0].compiled, "{errors:?}");
        let t = Instant::now();
        let (loaded, _) = load_dir(dir, &cache);
        warm.push(t.elapsed());
        assert!(!loaded[0].compiled);
    }
    println!(
        "load extract-cargo, cold (compile): {}",
        Summary::of_times(&cold).time()
    );
    println!(
        "load extract-cargo, warm (cache hit): {}",
        Summary::of_times(&warm).time()
    );
}

/// One extraction over ~100 KB of cargo output: native rules, then the built-in plugin
/// (how a run calls it: the precompiled component, its kept instance, no fuel), the same
/// component as a folder plugin with a kept instance (fuel counted), and with a fresh
/// instance per call, each plugin sample paired with the native sample taken just before.
fn extract_calls(root: &Path, dir: &Path, tmp: &Path) {
    let cache = tmp.join("extract-cache");
    // A folder plugin keeps its instance only where the project grants it (built-ins
    // always do): granted here, as `[plugins] reuse_instance = ["extract-cargo"]` would.
    let mut opts = agentforge::plugins::LoadOptions::default();
    opts.config.reuse_instance = vec!["extract-cargo".to_string()];
    let (loaded, errors) = agentforge::plugins::load_dir_with(dir, &cache, &opts);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(loaded[0].notes.is_empty(), "{:?}", loaded[0].notes);
    // ~100 KB: the real fixture repeated (many test binaries' worth of output).
    let one =
        std::fs::read_to_string(root.join("tests/data/outputs/cargo_test_failures.txt")).unwrap();
    let output = one.repeat(100_000 / one.len() + 1);
    let kept = loaded[0].wasm_extractor().unwrap();
    let cargo = agentforge_builtins::BUILTIN_PLUGINS
        .iter()
        .find(|b| b.folder == "extract-cargo")
        .expect("extract-cargo is a built-in");
    let (builtin, errors) = agentforge::plugins::load_builtin(
        std::slice::from_ref(cargo),
        &cache,
        &agentforge::plugins::LoadOptions::default(),
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!builtin[0].compiled, "the precompiled built-in is used");
    let builtin = builtin[0].wasm_extractor().unwrap();

    // The same plugin with a fresh instance per call (how third-party plugins run).
    let fresh_dir = tmp.join("extract-fresh");
    std::fs::create_dir_all(fresh_dir.join("extract-cargo")).unwrap();
    for f in ["plugin.toml", "extract_cargo.wasm"] {
        std::fs::copy(
            dir.join("extract-cargo").join(f),
            fresh_dir.join("extract-cargo").join(f),
        )
        .unwrap();
    }
    let manifest = fresh_dir.join("extract-cargo/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("reuse_instance = true", "reuse_instance = false"),
    )
    .unwrap();
    let (fresh, errors) = load_dir(&fresh_dir, &cache);
    assert!(errors.is_empty(), "{errors:?}");
    let fresh = fresh[0].wasm_extractor().unwrap();

    // The same rules on both sides (`native_rules.rs` compiles the component's source):
    // every fact must agree, on the bench's input and on every cargo output the repository
    // keeps, before any time is compared.
    let mut agreed = 0;
    for folder in [
        "tests/data/outputs",
        "tests/data/extraction/cargo-test",
        "tests/data/extraction/cargo-build",
        "tests/data/extraction/clippy",
        "tests/data/extraction/rustc",
        "tests/data/extraction/nextest",
    ] {
        let Ok(rd) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let path = e.path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".txt")
                || (folder.ends_with("outputs") && !name.starts_with("cargo"))
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let n = CargoRules.extract("tests", &text, ActionResult::Failure, 1);
            for x in [&kept, &builtin] {
                let w = x
                    .try_extract("tests", &text, ActionResult::Failure, 1)
                    .unwrap();
                assert_eq!(n, w, "native and plugin facts differ on {}", path.display());
            }
            agreed += 1;
        }
    }
    assert!(agreed >= 10, "only {agreed} cargo outputs found to compare");
    let native = |text: &str| {
        let t = Instant::now();
        let n = CargoRules.extract("tests", text, ActionResult::Failure, 1);
        (t.elapsed(), n)
    };
    // Warm-up: a kept instance's first call compiles its regexes.
    for x in [&kept, &builtin] {
        x.try_extract("tests", &output, ActionResult::Failure, 1)
            .unwrap();
    }
    // One native call, then one plugin call: the pair, after checking their facts agree.
    let pair = |x: &agentforge::plugins::WasmExtractor, text: &str| {
        let (n_t, n) = native(text);
        let t = Instant::now();
        let w = x
            .try_extract("tests", text, ActionResult::Failure, 1)
            .unwrap();
        let pair = (n_t, t.elapsed());
        assert_eq!(n, w, "the plugin and the native rules agree");
        pair
    };
    let (mut builtin_pairs, mut kept_pairs, mut fresh_pairs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 * RUNS {
        builtin_pairs.push(pair(&builtin, &output));
        kept_pairs.push(pair(&kept, &output));
        fresh_pairs.push(pair(&fresh, &output));
    }
    let natives: Vec<Duration> = builtin_pairs
        .iter()
        .chain(&kept_pairs)
        .chain(&fresh_pairs)
        .map(|p| p.0)
        .collect();
    let kb = output.len() / 1024;
    println!("native and plugin facts identical on {agreed} cargo outputs and the bench input");
    println!(
        "extract over {kb} KB, native rules: {}",
        Summary::of_times(&natives).time()
    );
    println!(
        "extract over {kb} KB, built-in (kept instance, no fuel; as runs call it): {}; vs native, pair by pair: {}",
        Summary::of_times(&builtin_pairs.iter().map(|p| p.1).collect::<Vec<_>>()).time(),
        Summary::of_ratios(&builtin_pairs)
    );
    println!(
        "extract over {kb} KB, folder plugin (kept instance, fuel): {}; vs native, pair by pair: {}",
        Summary::of_times(&kept_pairs.iter().map(|p| p.1).collect::<Vec<_>>()).time(),
        Summary::of_ratios(&kept_pairs)
    );
    println!(
        "extract over {kb} KB, folder plugin (fresh instance, fuel): {}; vs native, pair by pair: {}",
        Summary::of_times(&fresh_pairs.iter().map(|p| p.1).collect::<Vec<_>>()).time(),
        Summary::of_ratios(&fresh_pairs)
    );
    // The cargo extractor reads every tool's output (`handles = *`), and most are not
    // cargo's: the same size of pytest's output, where its rules find nothing.
    let one = std::fs::read_to_string(root.join("tests/data/outputs/pytest-failures.txt")).unwrap();
    let other = one.repeat(100_000 / one.len() + 1);
    let other_pairs: Vec<(Duration, Duration)> =
        (0..3 * RUNS).map(|_| pair(&builtin, &other)).collect();
    println!(
        "extract over {} KB of pytest output (nothing for cargo's rules), built-in: {}; native {}; vs native, pair by pair: {}",
        other.len() / 1024,
        Summary::of_times(&other_pairs.iter().map(|p| p.1).collect::<Vec<_>>()).time(),
        Summary::of_times(&other_pairs.iter().map(|p| p.0).collect::<Vec<_>>()).time(),
        Summary::of_ratios(&other_pairs)
    );
    // A call with nothing to do: the boundary's fixed cost.
    let per_call = |x: &agentforge::plugins::WasmExtractor| {
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..100 {
                    x.try_extract("tests", "", ActionResult::Success, 1)
                        .unwrap();
                }
                t.elapsed() / 100
            })
            .collect::<Vec<_>>()
    };
    println!(
        "plugin call on empty output, kept instance: {}",
        Summary::of_times(&per_call(&kept)).time()
    );
    println!(
        "plugin call on empty output, fresh instance: {}",
        Summary::of_times(&per_call(&fresh)).time()
    );
}

/// Start-up with 10 plugins: a run's set-up with them in its plugin folder (they load on
/// first use), and `load_dir` (all loaded now) over 10 copies of extract-cargo, each a
/// distinct component (a custom section makes its content hash, hence its cache entry,
/// its own), so the cold start compiles ten components as ten different plugins would.
fn ten_plugins(plugin: &Path, tmp: &Path) {
    let dir = tmp.join("ten");
    let wasm = std::fs::read(plugin.join("extract_cargo.wasm")).unwrap();
    let manifest = std::fs::read_to_string(plugin.join("plugin.toml")).unwrap();
    for i in 0..10 {
        let name = format!("extract-cargo-{i}");
        let folder = dir.join(&name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("extract_cargo.wasm"),
            with_custom_section(&wasm, i),
        )
        .unwrap();
        std::fs::write(
            folder.join("plugin.toml"),
            manifest.replace("name = \"extract-cargo\"", &format!("name = \"{name}\"")),
        )
        .unwrap();
    }
    let load = |cache: &Path| {
        let t = Instant::now();
        let (loaded, errors) = load_dir(&dir, cache);
        let elapsed = t.elapsed();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(loaded.len(), 10);
        (elapsed, loaded.iter().filter(|p| p.compiled).count())
    };
    let mut cold = Vec::new();
    let mut first_warm = Vec::new();
    let mut warm = Vec::new();
    for rep in 0..5 {
        let cache = tmp.join(format!("ten-cache-{rep}"));
        let (t, compiled) = load(&cache);
        assert_eq!(compiled, 10, "a cold start compiles every plugin");
        cold.push(t);
        // The first warm start reads and hashes each component (and, the files being
        // older than a few seconds by now, remembers their digests); later ones find
        // the same file stamps and skip both.
        let (t, compiled) = load(&cache);
        assert_eq!(compiled, 0, "a warm start compiles nothing");
        first_warm.push(t);
        let (t, compiled) = load(&cache);
        assert_eq!(compiled, 0, "a warm start compiles nothing");
        warm.push(t);
    }
    let cache = tmp.join("ten-cache-0");
    for _ in 5..RUNS {
        warm.push(load(&cache).0);
    }
    // A run's set-up with the 10 plugins in its plugin folder (`Runtime::load_plugins`):
    // their manifests are read and the built-in task types registered by name (each loads
    // when a task of its type is opened, `-- setup`); the extractors (these 10 and the
    // built-in ones) load when a step first extracts facts, measured apart.
    std::env::set_var("AGENTFORGE_CACHE_DIR", &cache);
    let ws = tmp.join("ten-ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("empty.jsonl"), "").unwrap();
    let mut setup = Vec::new();
    let mut first_use = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let rt = run_setup(&ws, std::slice::from_ref(&dir));
        setup.push(t.elapsed());
        assert!(!rt.extractors.is_loaded());
        let t = Instant::now();
        rt.extractors.get().unwrap();
        first_use.push(t.elapsed());
    }
    println!(
        "run set-up with 10 plugins in its folder, warm (extractors load on first use): {}",
        Summary::of_times(&setup).time()
    );
    println!(
        "  then the first use of extractors (the 10 and the built-in ones load): {}",
        Summary::of_times(&first_use).time()
    );
    println!(
        "start-up with 10 plugins, cold (empty cache): {}",
        Summary::of_times(&cold).time()
    );
    println!(
        "start-up with 10 plugins, first warm start (cache hit, components hashed): {}",
        Summary::of_times(&first_warm).time()
    );
    println!(
        "start-up with 10 plugins, warm (cache hit, digests remembered): {}",
        Summary::of_times(&warm).time()
    );
}

/// A run's set-up as `agentforge run` does it (replay provider, plugins from `folders`),
/// in the workspace `ws`, which holds an empty `empty.jsonl`.
fn run_setup(ws: &Path, folders: &[PathBuf]) -> Runtime {
    let mut config = Config::default();
    config.provider.kind = ProviderKind::Replay;
    config.provider.replay = Some(ws.join("empty.jsonl"));
    let provider = Provider::from_settings(&config.provider_settings()).unwrap();
    let mut rt = Runtime::new(Workspace::new(ws).unwrap(), config, provider);
    let errors = rt.load_plugins(folders).unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    rt
}

/// A run's set-up with no plugin folder (the built-in plugins only), many times: the
/// part of the 10-plugin figure that does not depend on the folder, and a loop long
/// enough to profile (`perf record ... --bench setup`).
fn builtin_setup(tmp: &Path) {
    let ws = tmp.join("setup-ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("empty.jsonl"), "").unwrap();
    std::env::set_var("AGENTFORGE_CACHE_DIR", tmp.join("setup-cache"));
    let mut setup = Vec::new();
    let mut task_type = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let rt = run_setup(&ws, &[]);
        setup.push(t.elapsed());
        // What opening a task adds: its one task type loads (the others never do).
        let t = Instant::now();
        rt.schemas.get("fix_violation").unwrap();
        task_type.push(t.elapsed());
        drop(rt);
    }
    println!(
        "run set-up, built-in plugins only (no folder), 30 runs: {}",
        Summary::of_times(&setup).time()
    );
    println!(
        "  then the first use of a task type (`fix_violation` loads): {}",
        Summary::of_times(&task_type).time()
    );
}

/// `wasm` with a custom section appended (valid at the top level of a component).
fn with_custom_section(wasm: &[u8], i: usize) -> Vec<u8> {
    let name = b"agentforge-bench";
    let payload = [name.len() as u8]
        .into_iter()
        .chain(name.iter().copied())
        .chain(i.to_le_bytes())
        .collect::<Vec<u8>>();
    let mut out = wasm.to_vec();
    out.push(0); // custom section id
    let mut len = payload.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        out.push(if len == 0 { byte } else { byte | 0x80 });
        if len == 0 {
            break;
        }
    }
    out.extend(payload);
    out
}

/// A small gate called the way untrusted plugins are: a fresh store, instantiation and
/// call every time. Each run's figure is the median of 1,000 calls.
fn gate_calls(plugin: &Path, tmp: &Path) {
    let dir = tmp.join("gate");
    std::fs::create_dir_all(dir.join("gate-command")).unwrap();
    for f in ["plugin.toml", "gate_command.wasm"] {
        std::fs::copy(plugin.join(f), dir.join("gate-command").join(f)).unwrap();
    }
    let (loaded, errors) = load_dir(&dir, &tmp.join("gate-cache"));
    assert!(errors.is_empty(), "{errors:?}");
    let gate = loaded[0].wasm_gate().expect("a gate");
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut times = Vec::new();
        for i in 0..1000 {
            let t = Instant::now();
            let v = gate
                .try_evaluate(
                    "tests",
                    Some(i % 2),
                    false,
                    "test result: ok. 3 passed",
                    &[],
                )
                .unwrap();
            times.push(t.elapsed());
            assert_eq!(v.passing, i % 2 == 0);
        }
        runs.push(median(&mut times));
    }
    println!(
        "gate-command, fresh store + instantiation + call: {}",
        Summary::of_times(&runs).time()
    );
}
