//! `cargo bench -p agentforge --bench plugins`: load time of the cargo extractor plugin
//! (cold: compiling; warm: from the cache), and one extractor call over a ~100 KB cargo
//! output against the native rules, and start-up with 10 plugins (cold: empty cache;
//! warm: cache hit). Needs `bash plugins/build.sh` first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "native_rules.rs"]
mod native_rules;

use agentforge::extract::FactExtractor;
use agentforge::plugins::load_dir;
use agentforge::state_store::ActionResult;
use native_rules::CargoRules;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
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
    let dir = tmp.path().join("plugins");
    std::fs::create_dir_all(dir.join("extract-cargo")).unwrap();
    for f in ["plugin.toml", "extract_cargo.wasm"] {
        std::fs::copy(plugin.join(f), dir.join("extract-cargo").join(f)).unwrap();
    }
    let cache = tmp.path().join("cache");

    let t = Instant::now();
    let (loaded, errors) = load_dir(&dir, &cache);
    let cold = t.elapsed();
    assert!(errors.is_empty() && loaded[0].compiled, "{errors:?}");
    let mut warm = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let (loaded, _) = load_dir(&dir, &cache);
        warm.push(t.elapsed());
        assert!(!loaded[0].compiled);
    }
    println!(
        "load extract-cargo: cold {cold:?}, warm median {:?}",
        median(warm)
    );

    // ~100 KB: the real fixture repeated (many test binaries' worth of output).
    let one =
        std::fs::read_to_string(root.join("tests/data/outputs/cargo_test_failures.txt")).unwrap();
    let output = one.repeat(100_000 / one.len() + 1);
    let wasm = loaded[0].wasm_extractor().unwrap();
    let (mut native_t, mut wasm_t) = (Vec::new(), Vec::new());
    for _ in 0..30 {
        let t = Instant::now();
        let n = CargoRules.extract("tests", &output, ActionResult::Failure, 1);
        native_t.push(t.elapsed());
        let t = Instant::now();
        let w = wasm
            .try_extract("tests", &output, ActionResult::Failure, 1)
            .unwrap();
        wasm_t.push(t.elapsed());
        assert_eq!(n[0], w[0]);
    }
    let empty = Instant::now();
    for _ in 0..100 {
        wasm.try_extract("tests", "", ActionResult::Success, 1)
            .unwrap();
    }
    let empty = empty.elapsed() / 100;

    // The same plugin with a fresh instance per call (how third-party plugins run).
    let manifest = dir.join("extract-cargo/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("reuse_instance = true", "reuse_instance = false"),
    )
    .unwrap();
    let (fresh, _) = load_dir(&dir, &cache);
    let fresh = fresh[0].wasm_extractor().unwrap();
    let mut fresh_t = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        fresh
            .try_extract("tests", &output, ActionResult::Failure, 1)
            .unwrap();
        fresh_t.push(t.elapsed());
    }
    let fresh_empty = Instant::now();
    for _ in 0..30 {
        fresh
            .try_extract("tests", "", ActionResult::Success, 1)
            .unwrap();
    }
    let fresh_empty = fresh_empty.elapsed() / 30;

    let (n, w, f) = (median(native_t), median(wasm_t), median(fresh_t));
    println!(
        "extract over {} KB: native {n:?}; plugin, kept instance {w:?} ({:.2}x); plugin, fresh instance {f:?} ({:.2}x)",
        output.len() / 1024,
        w.as_secs_f64() / n.as_secs_f64(),
        f.as_secs_f64() / n.as_secs_f64(),
    );
    println!(
        "plugin call on empty output: kept instance {empty:?}, fresh instance {fresh_empty:?}"
    );

    ten_plugins(&plugin, tmp.path());
    gate_calls(&root.join("plugins/gate-command"), tmp.path());
}

/// Start-up with 10 plugins: `load_dir` over 10 copies of extract-cargo, each a distinct
/// component (a custom section makes its content hash, hence its cache entry, its own),
/// so the cold start compiles ten components as ten different plugins would.
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
    let mut cache = PathBuf::new();
    for rep in 0..5 {
        cache = tmp.join(format!("ten-cache-{rep}"));
        let (t, compiled) = load(&cache);
        assert_eq!(compiled, 10, "a cold start compiles every plugin");
        cold.push(t);
    }
    let mut warm = Vec::new();
    for _ in 0..20 {
        let (t, compiled) = load(&cache);
        assert_eq!(compiled, 0, "a warm start compiles nothing");
        warm.push(t);
    }
    println!(
        "start-up with 10 plugins (total load time): cold (empty cache) median {:?}, warm (cache hit) median {:?}",
        median(cold),
        median(warm)
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
/// call every time (target: median at most 50 microseconds).
fn gate_calls(plugin: &Path, tmp: &Path) {
    let dir = tmp.join("gate");
    std::fs::create_dir_all(dir.join("gate-command")).unwrap();
    for f in ["plugin.toml", "gate_command.wasm"] {
        std::fs::copy(plugin.join(f), dir.join("gate-command").join(f)).unwrap();
    }
    let (loaded, errors) = load_dir(&dir, &tmp.join("gate-cache"));
    assert!(errors.is_empty(), "{errors:?}");
    let gate = loaded[0].wasm_gate().expect("a gate");
    let mut times = Vec::new();
    for i in 0..2000 {
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
    println!(
        "gate-command, fresh store + instantiation + call: median {:?} over 2000 calls",
        median(times)
    );
}
