//! Traces for the tests and the benchmark: a hand-made one ([`trace`]) and realistic,
//! varied sets ([`generated`]): several enforcers and actions, thousands of targets, tens
//! of traces per task, deterministic for a seed.
#![allow(dead_code)]

use agentforge_core::trace::{trace_key, Trace, TraceContext, TraceEvent, TraceSource};

/// A trace of `task` at `step` (index 0), on 2025-01-01 plus `step` minutes.
#[allow(clippy::too_many_arguments)]
pub fn trace(
    task: &str,
    task_type: &str,
    phase: &str,
    step: u64,
    source: TraceSource,
    enforcer: &str,
    action: &str,
    target: Option<&str>,
    what_happened: &str,
    what_was_correct: &str,
    why: &str,
) -> Trace {
    Trace {
        key: trace_key(task, step, 0),
        project: "demo".into(),
        timestamp: timestamp(step as i64 * 60),
        context: TraceContext {
            task_id: task.into(),
            task_type: task_type.into(),
            phase: phase.into(),
            role: None,
            step,
        },
        event: TraceEvent {
            kind: source.kind(),
            source,
            enforcer: enforcer.into(),
            action: action.into(),
            target: target.map(Into::into),
            what_happened: what_happened.into(),
            what_was_correct: what_was_correct.into(),
            why: why.into(),
        },
    }
}

/// RFC 3339 for 2025-01-01T00:00:00Z plus `seconds`.
pub fn timestamp(seconds: i64) -> String {
    let base = chrono::DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z").unwrap();
    (base + chrono::Duration::seconds(seconds))
        .to_utc()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

pub const TASK_TYPES: &[&str] = &["code", "bugfix", "refactor", "docs", "test", "builder"];
pub const PHASES: &[&str] = &["explore", "plan", "implement", "verify", "review"];
pub const MODULES: &[&str] = &[
    "net",
    "parser",
    "config",
    "auth",
    "storage",
    "cli",
    "render",
    "cache",
    "sync",
    "api",
    "billing",
    "search",
    "queue",
    "metrics",
    "session",
    "upload",
    "mail",
    "report",
    "admin",
    "export",
    "import",
    "scheduler",
    "payments",
    "profile",
    "routing",
    "db",
    "web",
    "jobs",
    "i18n",
    "theme",
];
pub const FILES: &[&str] = &[
    "mod", "client", "server", "handler", "model", "types", "error", "util", "tests", "retry",
    "parse", "format", "store", "index", "view", "state", "events", "worker", "limits", "schema",
];
pub const CHECKS: &[&str] = &[
    "cargo test",
    "cargo clippy",
    "cargo fmt --check",
    "pytest",
    "npm test",
    "make lint",
];
pub const SUBJECTS: &[&str] = &[
    "retry with backoff",
    "the empty config case",
    "pagination",
    "the login form",
    "error messages",
    "the cache eviction",
    "unicode file names",
    "the timeout",
    "a race in the worker",
    "the export to CSV",
    "rate limiting",
    "the migration",
    "input validation",
    "the dark theme",
    "the search ranking",
    "currency rounding",
];

/// A target path: `src/<module>/<file>.rs`, a test, a doc or a protected file.
fn path(rng: &mut Rng) -> String {
    let m = rng.pick(MODULES);
    match rng.below(10) {
        0..=6 => format!("src/{m}/{}.rs", rng.pick(FILES)),
        7 => format!("tests/{m}_{}.rs", rng.pick(FILES)),
        8 => format!("docs/{m}.md"),
        _ => format!("config/{m}.toml"),
    }
}

/// `n` traces in tasks of about 50 traces each, one per step, one task every 30 minutes.
pub fn generated(n: usize, seed: u64) -> Vec<Trace> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(n);
    let per_task = 50;
    let mut task_no = 0usize;
    while out.len() < n {
        let task = format!("task-{task_no:05}");
        let task_type = *rng.pick(TASK_TYPES);
        let role = (task_type == "builder").then(|| "builder".to_string());
        let focus = rng.pick(MODULES);
        let subject = rng.pick(SUBJECTS);
        for step in 0..per_task as u64 {
            if out.len() == n {
                break;
            }
            let phase = PHASES[(step as usize * PHASES.len()) / per_task];
            // Most targets in the task's own module.
            let target = if rng.below(3) > 0 {
                format!("src/{focus}/{}.rs", rng.pick(FILES))
            } else {
                path(&mut rng)
            };
            let check = *rng.pick(CHECKS);
            let (source, enforcer, action, target, happened, correct, why) = match rng.below(20) {
                0..=3 => (
                    TraceSource::GuardDenial,
                    "guard-verify-implementation".to_string(),
                    "complete".to_string(),
                    None,
                    format!("Agent called complete for {subject} with no file changed"),
                    "Edit the files the subtask names, then call complete".to_string(),
                    "guard-verify-implementation: no file changed since the task started"
                        .to_string(),
                ),
                4..=5 => (
                    TraceSource::GuardDenial,
                    "guard-tested-evidence".to_string(),
                    "complete".to_string(),
                    Some(target.clone()),
                    format!("Agent claimed {subject} tested with no passing test after editing {target}"),
                    format!("Run {check} after the last change to {target} and show it passing"),
                    format!("guard-tested-evidence: the last test run was before the edit of {target}"),
                ),
                6 => (
                    TraceSource::GuardDenial,
                    "guard-complete-verified".to_string(),
                    "complete".to_string(),
                    None,
                    format!("Agent called complete while `{check}` was failing"),
                    format!("Make `{check}` pass before calling complete"),
                    format!("guard-complete-verified: check `{check}` is failing"),
                ),
                7..=8 => {
                    let protected = format!("config/{}.toml", rng.pick(MODULES));
                    (
                        TraceSource::GuardDenial,
                        "guard-protected-paths".to_string(),
                        rng.pick(&["edit_file", "write_file"]).to_string(),
                        Some(protected.clone()),
                        format!("Agent tried to change the protected file {protected}"),
                        "Leave configuration alone; change the code that reads it".to_string(),
                        format!("guard-protected-paths: {protected} is protected"),
                    )
                }
                9..=10 => (
                    TraceSource::GuardWarning,
                    "guard-large-edit".to_string(),
                    "edit_file".to_string(),
                    Some(target.clone()),
                    format!("Agent rewrote {} lines of {target} in one edit", 100 + rng.below(400)),
                    "Make smaller edits and run the checks between them".to_string(),
                    "guard-large-edit: edits over 100 lines are hard to review".to_string(),
                ),
                11..=13 => (
                    TraceSource::AutoRevert,
                    "auto-revert".to_string(),
                    rng.pick(&["edit_file", "write_file", "replace_in_file"]).to_string(),
                    Some(target.clone()),
                    format!("The edit of {target} for {subject} broke `{check}`, which passed before; reverted"),
                    format!("Run `{check}` after editing {target} and fix the failure before moving on"),
                    format!("check `{check}` went from passing to failing"),
                ),
                14..=16 => {
                    let action = rng.pick(&["read_file", "run_check", "edit_file", "search"]);
                    (
                        TraceSource::LoopDetection,
                        "loop-detector".to_string(),
                        action.to_string(),
                        Some(target.clone()),
                        format!("Agent repeated {action} on {target} {} times without progress", 3 + rng.below(5)),
                        "Read the error once, then change the code or the approach".to_string(),
                        format!("{} actions with the same signature", rng.pick(&["identical", "alternating", "repeated"])),
                    )
                }
                17..=18 => (
                    TraceSource::RefusedComplete,
                    "executor".to_string(),
                    "complete".to_string(),
                    None,
                    format!("complete refused for {subject}: verification not ready"),
                    format!("Run `{check}` until it passes, then call complete"),
                    format!("verification: `{check}` has not passed since the last change"),
                ),
                _ => {
                    let person = *rng.pick(&["alice", "bob"]);
                    (
                        TraceSource::PersonCorrection,
                        person.to_string(),
                        "edit_file".to_string(),
                        Some(target.clone()),
                        format!("Agent used unwrap() in {target}"),
                        "Propagate the error with ? and a context message".to_string(),
                        format!("{person}: library code must not panic"),
                    )
                }
            };
            out.push(Trace {
                key: trace_key(&task, step, 0),
                project: "demo".into(),
                timestamp: timestamp(task_no as i64 * 1800 + step as i64 * 20),
                context: TraceContext {
                    task_id: task.clone(),
                    task_type: task_type.into(),
                    phase: phase.into(),
                    role: role.clone(),
                    step,
                },
                event: TraceEvent {
                    kind: source.kind(),
                    source,
                    enforcer,
                    action,
                    target,
                    what_happened: happened,
                    what_was_correct: correct,
                    why,
                },
            });
        }
        task_no += 1;
    }
    out
}
