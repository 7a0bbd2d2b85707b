//! Shared support for the workspace's integration tests.
//!
//! `tests/end_to_end.rs` declares it once for the modules it links; a test file with
//! its own binary includes it with:
//!
//! ```ignore
//! #[path = "support/mod.rs"]
//! mod support;
//! use support::scripted_server::{Protocol, Scripted, ScriptedServer};
//! ```
//!
//! Each binary uses only part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod built_plugins;
pub mod nats;
pub mod notes;
pub mod scripted_server;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` with its stdout and stderr captured, killing it after `bound`: the output
/// and whether it was killed. Both pipes are read while the child runs (a child that
/// writes more than a pipe holds, 64 KiB, would otherwise block and look hung).
pub fn output_within(cmd: &mut Command, bound: Duration) -> (Output, bool) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    }
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let started = Instant::now();
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let output = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (output, killed)
}

/// The `step` of every record in the task log at `path` (an `actions.jsonl`), in the
/// order they were written. Panics, naming the file (and the line), when it cannot be
/// read or a line is not a JSON record with a whole-number `step`.
pub fn logged_steps(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read the task log {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let at = format!("{}:{}", path.display(), i + 1);
            let record: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{at}: not a JSON record ({e}): {line}"));
            record["step"]
                .as_u64()
                .unwrap_or_else(|| panic!("{at}: no whole-number `step`: {line}"))
        })
        .collect()
}

/// Copies the folders and files under `from` into `to`, which must exist: `from/a/b`
/// becomes `to/a/b`.
pub fn copy_tree(from: &Path, to: &Path) {
    let mut stack = vec![from.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let dest = to.join(p.strip_prefix(from).unwrap());
            if p.is_dir() {
                std::fs::create_dir_all(&dest).unwrap();
                stack.push(p);
            } else {
                std::fs::copy(&p, &dest).unwrap();
            }
        }
    }
}
