#!/usr/bin/env bash
# Builds every plugin for wasm32-wasip2 and copies each component next to its plugin.toml,
# so `agentforge run --plugins plugins/` finds them. Own target dir: no lock contention
# with the host's build.
set -euo pipefail
cd "$(dirname "$0")"
target="${AGENTFORGE_PLUGINS_TARGET:-../target/plugins}"
cargo build --quiet --manifest-path Cargo.toml --target wasm32-wasip2 --release --target-dir "$target"
for crate in extract-cargo hostile extract-pytest extract-python-lint extract-go extract-js gate-command guard-complete-verified guard-tested-evidence hostile-future hostile-wrong-types; do
    wasm="${crate//-/_}.wasm"
    # Copy then rename: a concurrent reader never sees half a file.
    cp "$target/wasm32-wasip2/release/$wasm" "$crate/.$wasm.tmp"
    mv "$crate/.$wasm.tmp" "$crate/$wasm"
done
