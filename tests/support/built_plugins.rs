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
