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

/// The plugin crates embedded as built-ins (tools are opt-in: `--plugins plugins/`).
const BUILTINS: &[&str] = &[
    "schema-fix-violation",
    "schema-implement-feature",
    "schema-write-tests",
    "extract-cargo",
    "extract-pytest",
    "extract-python-lint",
    "extract-go",
    "extract-js",
    "extract-conformance",
    "extract-edit",
    "gate-command",
    "gate-tests-pass",
    "gate-conformance",
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
    let mut out = String::from(
        "/// The built-in plugins: (folder name, `plugin.toml`, component).\n\
         pub const BUILTIN_PLUGINS: &[(&str, &str, &[u8])] = &[\n",
    );
    for name in BUILTINS {
        let manifest = plugins.join(name).join("plugin.toml");
        let wasm = target
            .join("wasm32-wasip2/release")
            .join(format!("{}.wasm", name.replace('-', "_")));
        // Embedded from OUT_DIR (this script's own output), not from the plugins' target
        // folder, which another build may rewrite or a cache may lack.
        let embedded = out_dir.join(format!("{}.wasm", name.replace('-', "_")));
        std::fs::copy(&wasm, &embedded)
            .unwrap_or_else(|e| panic!("{} was not built ({e})", wasm.display()));
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?}), include_bytes!({:?})),\n",
            path_str(&manifest),
            path_str(&embedded)
        ));
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("builtin_plugins.rs");
    std::fs::write(&dest, out).expect("write builtin_plugins.rs");
}

fn path_str(p: &Path) -> String {
    p.to_str()
        .expect("the repository path is UTF-8")
        .to_string()
}
