#!/usr/bin/env bash
# Runs the bundled examples end to end. First the task: a fresh copy of examples/fix-failing-test/project,
# real files, real `cargo test` and `cargo clippy`, real task state on disk, with the
# model's side answered by the recorded session (replay provider).
#
# To run the same task with a real model instead, see README.md ("Run with a real model").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
example="$root/examples/fix-failing-test"
demo="$root/target/agentforge-demo"

# The WASM plugins first (every plugin, the `outline` tool included, copied into
# `plugins/`), then the host, which embeds the built-ins from that same build (its build
# script's cargo command finds them built). Cargo shows its progress for both.
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
started=$SECONDS
echo "== building the WASM plugins (plugins/, wasm32-wasip2, release) ==" >&2
bash "$root/plugins/build.sh" --progress
# The dev profile, whose wasmtime and Cranelift are optimised (Cargo.toml): a fresh build
# takes about half the time of a release one on 2 cores (5 vs 9.5 minutes), the example's
# run time is its `cargo test` and `cargo clippy`, and `cargo test --workspace` reuses
# this build. `cargo build --release -p agentforge` builds the binary to install.
echo "== building agentforge (dev profile, optimised wasmtime) ==" >&2
cargo build -p agentforge --manifest-path "$root/Cargo.toml"
echo "== built in $((SECONDS - started)) s; running the example ==" >&2
rm -rf "$demo"
mkdir -p "$demo"
cp -R "$example/project/." "$demo/"

set +e
"$root/target/debug/agentforge" --workspace "$demo" run "$example/task.yaml" \
    --replay "$example/session-plugins.jsonl" --plugins "$root/plugins" --strict "$@"
status=$?
set -e
echo
echo "exit code: $status (0 = complete)"
echo "task state: $demo/.agentforge/tasks/fix-word-count/ (state.yaml, actions.jsonl, artifacts/)"
echo "the fixed code:"
sed -n '3,6p' "$demo/src/lib.rs"
[ "$status" -eq 0 ] || exit "$status"

# The value loop: a sprint from examples/sprint-slugkit's VISION.md and PRD.md to a
# delivered crate. Every role (critic, classifier, planner, builder, QC author, fixer,
# evaluator) is a task on the same executor; its answers come from the recorded
# session (one file per role task); the verifications are real `cargo test` and
# `cargo clippy` runs; the workspace is a git repository, so each iteration that
# changed files is one commit on the sprint's branch.
sprint="$root/examples/sprint-slugkit"
sprint_demo="$root/target/agentforge-sprint-demo"
echo
echo "== running the example sprint (examples/sprint-slugkit) ==" >&2
rm -rf "$sprint_demo"
mkdir -p "$sprint_demo"
cp -R "$sprint/project/." "$sprint_demo/"
git -C "$sprint_demo" init -q
git -C "$sprint_demo" add -A
git -C "$sprint_demo" -c user.name=demo -c user.email=demo@localhost commit -q -m "slugkit: empty crate"
set +e
"$root/target/debug/agentforge" --workspace "$sprint_demo" run "$sprint" \
    --replay "$sprint/session" --plugins "$root/plugins" --strict "$@"
sprint_status=$?
set -e
echo
echo "exit code: $sprint_status (0 = delivered, 2 = partial value, 1 = failed)"
echo "sprint folder: $sprint_demo/.agentforge/sprints/sprint-slugkit/ (sprint.json, iterations.jsonl, DELIVERY_REPORT.md)"
echo "commits on the sprint's branch:"
git -C "$sprint_demo" log --oneline
[ "$sprint_status" -eq 0 ] || exit "$sprint_status"

# The feature-list policy (docs/feature-list.md): examples/features/features.json, three
# features of a small Python module, each coded by one builder session (replayed) and
# tested by the host's own run of its `verify` commands; F-2's first version fails its
# test and the retry, shown the failure, passes.
features="$root/examples/features"
features_demo="$root/target/agentforge-features-demo"
echo
echo "== running the example feature list (examples/features) ==" >&2
rm -rf "$features_demo"
mkdir -p "$features_demo"
cp -R "$features/project/." "$features_demo/"
git -C "$features_demo" init -q
git -C "$features_demo" add -A
git -C "$features_demo" -c user.name=demo -c user.email=demo@localhost commit -q -m "textstats: stubs and tests"
set +e
"$root/target/debug/agentforge" --workspace "$features_demo" run "$features/features.json" \
    --replay "$features/session" --plugins "$root/plugins" --strict "$@"
features_status=$?
set -e
echo
echo "exit code: $features_status (0 = every feature passed, 2 = some blocked)"
echo "sprint folder: $features_demo/.agentforge/sprints/features/ (FEATURE_REPORT.md, features.json, iterations.jsonl)"
exit $features_status
