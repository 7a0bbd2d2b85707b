//! Crash injection for the crash-safety tests.
//!
//! `AGENTFORGE_FAULT=<point>@<step>` makes the process die with SIGKILL-like abruptness
//! (`std::process::abort`, no destructors, no flushing) when step `<step>` reaches
//! `<point>`. Points, in the order a step passes them: `before_model`, `after_model`,
//! `after_action` (files changed, nothing recorded), `after_trajectory` (the step's
//! trajectory appended to the pack, its log line not), `after_memory`, `torn_log` (half
//! of the log line written), `after_log`, `after_state`. `agentforge undo` to step
//! `<step>` passes `undo_files` (the files reset, the log not yet rewound) and
//! `rewind_log` (the log cut, the state not yet written). Unset in normal use; reading
//! it costs one environment lookup per process.

use std::sync::LazyLock;

static FAULT: LazyLock<Option<(String, u64)>> = LazyLock::new(|| {
    let v = std::env::var("AGENTFORGE_FAULT").ok()?;
    let (point, step) = v.split_once('@')?;
    Some((point.to_string(), step.parse().ok()?))
});

/// Whether the configured fault is `point` at `step`.
pub fn armed(point: &str, step: u64) -> bool {
    matches!(&*FAULT, Some((p, s)) if p == point && *s == step)
}

/// Dies at once if the configured fault is `point` at `step`.
pub fn point(point: &str, step: u64) {
    if armed(point, step) {
        eprintln!("fault injection: dying at {point}@{step}");
        std::process::abort();
    }
}
