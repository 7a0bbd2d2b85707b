//! The `agentforge` package's end-to-end tests, one module per file of `tests/`, linked into
//! one test binary: every binary links wasmtime and the whole host, so the 25 binaries
//! these files were took 25 links and ~1.6 GB more disk than this one (390 MB), which
//! CI's disk once ran out of. `cargo test -p agentforge --test end_to_end crash::` runs
//! one file's tests. Two files keep their own binary:
//! `plugin_epoch.rs`, which needs a process where no other test calls plugins, and
//! `mcp.rs`, whose binary is also the MCP server its tests start.

mod support;

// Whole tasks through the binary against scripted Anthropic / OpenAI-compatible servers.
mod e2e;

// Providers against the scripted LLM server on 127.0.0.1.
mod providers;

// Each step's and each task's cost against servers that report real usage.
mod cost;

// A task's git history: its branch, a commit per step, `diff` and `undo`.
mod git;

// Learning from enforcement: traces, precedents, proposed guards.
mod learning;

// kill -9 at every point of every step, then resume: nothing lost, nothing run twice.
mod crash;

// Ctrl-C / SIGTERM, the per-task run lock, --max-steps at run and resume, write probes.
mod interrupt;

// Trajectories, `run --record` then `--replay`, `show`, through the binary.
mod trajectories;

// What a user meets through the binary: errors once, visible retries, resume's provider,
// input checks, tool feedback, bounded log lines.
mod user_facing;

// Bounded workspace reads, protected paths, the checks' environment and secret masking.
mod safety_workspace;

// `run -p` / `--goal-file` (a task derived from a sentence) and the project's instruction
// files in the context, through the binary.
mod prompt_runs;

// README's command table against `agentforge --help` (so the docs cannot drift).
mod readme;

// `report --html`, rendered by headless Chromium (skipped outside CI without it).
mod report_html;

// WASM plugins (builds plugins/ for wasm32-wasip2 via plugins/build.sh when run).
mod plugins;

// `agentforge plugins new|list|check` and `extract --tool` through the binary.
mod plugins_cli;

// Built-in extractor plugins (pytest, python linters, go, js) against real tool outputs.
mod plugin_worlds;

// The built-in extractor plugins against real tool outputs (`tests/data/outputs/`).
mod extractors;

// The built-in extractors scored on real outputs of every supported tool, with truth from
// each tool's machine-readable mode (tests/data/extraction/).
mod extraction_corpus;

// The gate and guard plugins judging real outputs through the real host.
mod gates_guards;

// Hostile plugins through the binary: every mode in extract, plugins check/list and a run.
mod hostile;

// `inspect loops` through the binary on every format it reads (tests/data/trajectories/).
mod inspect_import;

// The value loop through the binary: the example sprint (replay and both wire formats of a
// scripted server), kill -9 and resume, status and render.
mod sprint;

// The value loop's failure modes end within their bounds, with an honest report and the
// right exit code; every decision of the engine is taken at least once.
mod sprint_failures;

// The feature-list policy through the binary: pass, retry, blocked after two failed tests
// and the next feature still runs; the retry bound; kill -9 and resume; the initializer; a
// bad features.json refused naming file, feature and field.
mod features;

// The fleet on NATS JetStream through the binary: real nats-server processes (one node and
// a three-node cluster), real workers, kill -9 of a worker and of a node, duplicate
// submissions, the delivery bound. Needs `nats-server` (on PATH or in /usr/sbin): under
// `CI=true` a missing one fails the tests, elsewhere they say they are skipped.
mod fleet;
