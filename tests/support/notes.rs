//! The `notes` task most binary tests run: `notes.txt` says `status: broken`, the task
//! is to make it `fixed`, and one check greps for it. Plus the binary with none of the
//! caller's provider variables.

use std::path::Path;
use std::process::Command;

/// The variables a test must not inherit from the shell that runs it.
pub const PROVIDER_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENTFORGE_PROVIDER",
    "AGENTFORGE_MODEL",
    "AGENTFORGE_REPLAY",
    "AGENTFORGE_FAULT",
];

/// The task file: task `id`, whose `tests` check runs `command`, within `max_steps`.
pub fn notes_task(id: &str, command: &str, max_steps: u32) -> String {
    format!(
        r#"id: {id}
task_type: fix_violation
goal: Change the status in notes.txt to fixed
inputs:
  violation:
    file_path: notes.txt
    message: status is broken
checks:
  - name: tests
    command: "{command}"
    kind: test
max_steps: {max_steps}
"#
    )
}

/// The check that passes once the status is fixed.
pub const FIXED: &str = "grep -q 'status: fixed' notes.txt";

/// A workspace with `notes.txt` and `task` as `task.yaml`.
pub fn notes_workspace(task: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("notes.txt"),
        "title: demo\nstatus: broken\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("task.yaml"), task).unwrap();
    tmp
}

/// `agentforge --workspace dir` run in `dir`, with none of [`PROVIDER_VARS`].
pub fn agentforge(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentforge"));
    c.current_dir(dir).arg("--workspace").arg(dir);
    for v in PROVIDER_VARS {
        c.env_remove(v);
    }
    c
}
