//! The repository and its WASM plugins, built once per test process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace root (the folder holding `host/`, `plugins/`, `tests/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// `plugins/`, with every component built by `plugins/build.sh` (once per test process).
pub fn plugins() -> PathBuf {
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

/// `wasm` with `manifest` as the built-in of folder `folder`, with no native code for
/// this binary: loading it compiles it for the built-ins' engine. `sha` fills the digest
/// (the compile cache's key), so that two tests' components are not confused.
pub fn uncompiled_builtin(
    folder: &'static str,
    manifest: String,
    wasm: Vec<u8>,
    sha: u8,
) -> agentforge::plugins::Embedded {
    agentforge::plugins::Embedded {
        folder,
        manifest: Box::leak(manifest.into_boxed_str()),
        kind: "extractor",
        task_type: None,
        wasm: Box::leak(wasm.into_boxed_slice()),
        precompiled: b"none",
        wasm_sha256: [sha; 32],
    }
}
