#!/usr/bin/env bash
# Builds every plugin for wasm32-wasip2 and copies each component next to its plugin.toml,
# so `agentforge run --plugins plugins/` finds them. Own target dir: no lock contention
# with the host's build. Every crate but the SDK is a component: a plugin (its
# `plugin.toml` names the component file) or a test fixture (no manifest; the component
# is `<crate_name>.wasm`).
#
# `--progress` shows cargo's progress (the demo script uses it); quiet otherwise. The host's
# build script (host/builtins/build.rs) runs the same cargo command, so after either one
# the other finds everything built.
set -euo pipefail
cd "$(dirname "$0")"
target="${AGENTFORGE_PLUGINS_TARGET:-../target/plugins}"
quiet=--quiet
[ "${1:-}" = --progress ] && quiet=
# A RUSTFLAGS in the environment would replace the target's flags in .cargo/config.toml
# (WASM SIMD, which the extractors' regex and memchr need to be fast): host flags are not
# for the guests.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS
cargo build $quiet --locked --manifest-path Cargo.toml --target wasm32-wasip2 --release --target-dir "$target"
for cargo_toml in */Cargo.toml; do
    crate="$(dirname "$cargo_toml")"
    [ "$crate" = sdk ] && continue
    wasm="${crate//-/_}.wasm"
    if [ -f "$crate/plugin.toml" ]; then
        wasm="$(sed -n 's/^component *= *"\(.*\)"/\1/p' "$crate/plugin.toml")"
    fi
    # Copy then rename: a concurrent reader never sees half a file.
    cp "$target/wasm32-wasip2/release/$wasm" "$crate/.$wasm.tmp"
    mv "$crate/.$wasm.tmp" "$crate/$wasm"
done
