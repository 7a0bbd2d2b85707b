//! Builds the built-in plugins (`plugins/`, for `wasm32-wasip2`) and embeds their
//! components and manifests in the host, so the built-in behaviour (task types, extraction
//! rules, gates, guards) lives in sandboxed components that every run loads, with nothing
//! to install.
//!
//! The plugins are their own cargo workspace with their own target folder
//! (`target/plugins`, shared with `plugins/build.sh`), so this nested build never waits on
//! the host's build lock.

use std::path::{Path, PathBuf};
use std::process::Command;

// The engine settings the host runs plugins with: precompiled code loads only into an
// engine configured the same way, so both read this one file (only the built-ins'
// engine is used here).
#[path = "../plugin-host/src/engine_config.rs"]
#[allow(dead_code)]
mod engine_config;

use sha2::Digest as _;

/// The plugin crates embedded as built-ins (tools are opt-in: `--plugins plugins/`).
const BUILTINS: &[&str] = &[
    "schema-fix-violation",
    "schema-implement-feature",
    "schema-write-tests",
    // The value loop's roles, one task type each.
    "schema-planner",
    "schema-critic",
    "schema-classifier",
    "schema-researcher",
    "schema-evaluator",
    "schema-builder",
    "schema-fixer",
    "schema-qc-author",
    "extract-cargo",
    "extract-pytest",
    "extract-python-lint",
    "extract-go",
    "extract-js",
    "extract-shellcheck",
    "extract-conformance",
    "extract-edit",
    "gate-command",
    "gate-tests-pass",
    "gate-conformance",
    // Guards are consulted in this order and the first denial wins (the denial is what the
    // model is shown and what the trace database learns from): the learned rules first, so
    // that when one of them and another guard would both deny, the denial shown is the one
    // citing the learned pattern (what the person approved it for); then `complete` with no
    // file changed before `complete` with checks not passing, so that the more basic cause
    // (nothing was done) is the one named and learned.
    "guard-learned-rules",
    "guard-verify-implementation",
    "guard-complete-verified",
    "guard-tested-evidence",
    "guard-read-only-roles",
];

fn main() {
    let krate = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = krate
        .ancestors()
        .nth(2)
        .expect("host/builtins/ is in the repository")
        .to_path_buf();
    let plugins = root.join("plugins");
    let target = root.join("target/plugins");

    // Precise inputs (not the folders: `plugins/build.sh` copies components into them).
    for p in [
        krate.join("../plugin-host/src/engine_config.rs"),
        root.join("wit"),
        plugins.join("Cargo.toml"),
        plugins.join("Cargo.lock"),
        plugins.join("sdk/src"),
        plugins.join("sdk/Cargo.toml"),
        plugins.join(".cargo/config.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    for name in BUILTINS {
        for f in ["src", "Cargo.toml", "plugin.toml", "graph.json"] {
            let p = plugins.join(name).join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&plugins)
        .args([
            // The same command as `plugins/build.sh` (whole workspace, same profile and
            // target folder), so whichever runs second finds everything built.
            "build",
            "--quiet",
            "--locked",
            "--release",
            "--target",
            "wasm32-wasip2",
        ])
        .arg("--target-dir")
        .arg(&target);
    // The outer build's settings are for the host, not for the wasm guests (clippy's
    // wrapper, host rustflags, an overridden target folder).
    for var in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "cannot run cargo to build the built-in plugins in {}: {e}",
            plugins.display()
        )
    });
    if !status.success() {
        panic!(
            "building the built-in plugins in {} failed (see above). Is the wasm32-wasip2 \
             target installed? Run `rustup target add wasm32-wasip2`.",
            plugins.display()
        );
    }

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    // Compiled here, once, so the first command after installing runs no Cranelift: the
    // host deserializes these (and compiles from the component only when wasmtime refuses
    // them: another CPU, another wasmtime).
    let engine =
        wasmtime::Engine::new(&engine_config::engine_config(engine_config::Trust::Builtin))
            .expect("the plugin engine's configuration is valid");
    let mut out = String::from(
        "/// The built-in plugins, each with its component precompiled for the host's engine\n\
         /// and what a run would otherwise work out at every start (kind, digest).\n\
         pub const BUILTIN_PLUGINS: &[agentforge_plugin_host::Embedded] = &[\n",
    );
    for name in BUILTINS {
        let manifest = plugins.join(name).join("plugin.toml");
        let file = name.replace('-', "_");
        let wasm = target
            .join("wasm32-wasip2/release")
            .join(format!("{file}.wasm"));
        // Embedded from OUT_DIR (this script's own output), not from the plugins' target
        // folder, which another build may rewrite or a cache may lack.
        let embedded = out_dir.join(format!("{file}.wasm"));
        std::fs::copy(&wasm, &embedded)
            .unwrap_or_else(|e| panic!("{} was not built ({e})", wasm.display()));
        let bytes = std::fs::read(&embedded).expect("read the copied component");
        let native = engine
            .precompile_component(&bytes)
            .unwrap_or_else(|e| panic!("precompiling {} failed: {e:#}", wasm.display()));
        let precompiled = out_dir.join(format!("{file}.cwasm"));
        std::fs::write(&precompiled, native).expect("write the precompiled component");
        let (kind, task_type) = manifest_index(&manifest);
        let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
        out.push_str(&format!(
            "    agentforge_plugin_host::Embedded {{ folder: {name:?}, manifest: include_str!({:?}), kind: {kind:?}, \
             task_type: {task_type:?}, wasm: include_bytes!({:?}), precompiled: include_bytes!({:?}), wasm_sha256: {digest:?} }},\n",
            path_str(&manifest),
            path_str(&embedded),
            path_str(&precompiled)
        ));
    }
    out.push_str("];\n");
    std::fs::write(out_dir.join("builtin_plugins.rs"), out).expect("write builtin_plugins.rs");
}

/// The `kind` and `task_type` of the manifest at `path` (the host checks the whole
/// manifest when it loads the plugin; this is only the table's index).
fn manifest_index(path: &Path) -> (String, Option<String>) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", path.display()));
    let kind = match table.get("kind") {
        Some(toml::Value::String(kind)) => kind.clone(),
        _ => panic!("{} has no `kind` string", path.display()),
    };
    let task_type = match table.get("task_type") {
        None => None,
        Some(toml::Value::String(t)) => Some(t.clone()),
        Some(_) => panic!("{}: `task_type` is not a string", path.display()),
    };
    (kind, task_type)
}

fn path_str(p: &Path) -> String {
    p.to_str()
        .expect("the repository path is UTF-8")
        .to_string()
}
