#!/usr/bin/env bash
# Executes docs/plugins.md step by step in a temporary folder: scaffold an extractor,
# write the rule table shown there, build it for wasm32-wasip2, run `agentforge extract`
# on the sample and compare with the expected JSON shown there, check and install the
# plugin, and run a task with it (recorded model). The files are the page's blocks marked
# `<!-- walkthrough: PATH -->`, so the page cannot drift from what works. CI runs this.
#
# AGENTFORGE: the binary to use (default: build target/debug/agentforge).
# CARGO_TARGET_DIR: where the plugin crate builds (default: target/plugins, shared with
# plugins/build.sh so the SDK's dependencies are not rebuilt).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
doc="$repo/docs/plugins.md"

if [[ -z "${AGENTFORGE:-}" ]]; then
    cargo build --quiet -p agentforge --manifest-path "$repo/Cargo.toml"
    AGENTFORGE="$repo/target/debug/agentforge"
fi
agentforge() { "$AGENTFORGE" "$@"; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target/plugins}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# Writes the fenced block that follows `<!-- walkthrough: $1 -->` in the doc to $1.
block() {
    mkdir -p "$(dirname "$1")"
    awk -v marker="<!-- walkthrough: $1 -->" '
        $0 == marker { found = 1; next }
        found == 1 && /^```/ { found = 2; next }
        found == 2 && /^```/ { exit }
        found == 2 { print }
    ' "$doc" >"$1"
    [[ -s "$1" ]] || { echo "walkthrough: no block for $1 in $doc" >&2; exit 1; }
}
step() { echo "== $*" >&2; }

step "1. scaffold"
agentforge plugins new extractor my-lint

step "2. edit the rule table"
block my-lint/src/lib.rs

step "3. build"
cd my-lint
cargo build --quiet --target wasm32-wasip2 --release
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/my_lint.wasm" .
cd ..

step "4. try it on a real output"
block sample.txt
block expected.json
agentforge extract --tool lint --plugins my-lint --no-builtin <sample.txt >facts.json
if ! diff -u expected.json facts.json; then
    echo "walkthrough: the facts differ from docs/plugins.md (diff above)" >&2
    exit 1
fi

step "5. check and install"
mkdir -p project/plugins/my-lint
cp my-lint/plugin.toml my-lint/my_lint.wasm project/plugins/my-lint/
agentforge plugins check project/plugins
agentforge plugins list --plugins project/plugins

step "6. run a task with it (recorded model)"
block project/task.yaml
block project/src/main.rs
block project/session.jsonl
cp sample.txt project/
cd project
agentforge run --plugins plugins task.yaml --replay session.jsonl --quiet
log=.agentforge/tasks/lint-clean/actions.jsonl
for fact in 'lint: 2 problems' 'warning at src/main.rs:3: unused variable `x`'; do
    if ! grep -qF "\"statement\":\"$fact\"" "$log"; then
        echo "walkthrough: the run did not record the fact \"$fact\" ($log):" >&2
        cat "$log" >&2
        exit 1
    fi
done
echo "walkthrough: ok" >&2
