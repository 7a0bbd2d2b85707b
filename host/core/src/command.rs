//! What a command run gave: its exit, output and timing (the store's `commands` runs it;
//! gates judge it).

use std::time::Duration;

/// What a finished (or killed) command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The shell command as given.
    pub command: String,
    /// Exit code; `None` when the shell was killed by a signal (including on timeout).
    pub exit_code: Option<i32>,
    /// stdout and stderr interleaved in arrival order, capped (see `CommandLimits`).
    pub output: String,
    /// Whether the middle of the output was dropped to respect the cap.
    pub truncated: bool,
    /// Whether the timeout killed the command.
    pub timed_out: bool,
    /// Wall time from spawn to the end of output collection.
    pub duration: Duration,
}

impl CommandOutput {
    /// Whether the command exited with code 0 before the timeout.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The last `max_chars` characters of the output (all of it when shorter).
    ///
    /// Counted in characters, not bytes, so the cut never splits a UTF-8 sequence.
    pub fn tail(&self, max_chars: usize) -> String {
        if max_chars == 0 {
            return String::new();
        }
        match self.output.char_indices().rev().nth(max_chars - 1) {
            Some((start, _)) => self.output[start..].to_string(),
            None => self.output.clone(),
        }
    }
}
