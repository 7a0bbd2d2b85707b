//! Shell commands (checks, test suites) run with a timeout and an output cap.
//!
//! Commands run as `sh -c <command>` in their own process group, so that a timeout
//! can kill everything they started: `cargo test` and `pytest` spawn children, and a
//! hung grandchild would otherwise keep the output pipes open and the step blocked.
//! When the shell exits, anything left in its group (stray background jobs) is killed
//! too: nothing a step starts may outlive it, or a crashed or repeated step could find
//! ports bound and files locked by its predecessor. The shell starts gated and runs the
//! command only once the host has registered its group ([`ProcessGroups`]), so that a
//! group is on record, in the task folder, before anything of it runs.
//!
//! Output is kept in memory up to a cap: the first and the last halves of the cap
//! survive, because a test run's verdict and failures are usually at its end.
//!
//! Commands run the model's code, so they get an environment built explicitly
//! (`child_environment`): no provider key, nothing the deny list names (see
//! [`crate::secrets`]); and their output is masked for the key values the host holds
//! before anyone stores or shows it.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long a command may run and how much of its output is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Wall-clock limit; the whole process group is killed when it passes.
    pub timeout: Duration,
    /// Bytes of output kept (first half + last half); the middle is dropped.
    pub output_cap_bytes: usize,
}

impl Default for CommandLimits {
    /// 300 s and 1 MiB: enough for a full test suite, bounded for a runaway one.
    fn default() -> Self {
        CommandLimits {
            timeout: Duration::from_secs(300),
            output_cap_bytes: 1024 * 1024,
        }
    }
}

pub use agentforge_core::command::CommandOutput;

/// Why a command could not be run at all (a command that runs and fails is an
/// [`CommandOutput`] with a non-zero exit code, not an error).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The shell could not be started (missing working directory, no `sh`...).
    #[error("cannot run `{command}` in {}: {source}", cwd.display())]
    Spawn {
        /// The shell command.
        command: String,
        /// The working directory it was to run in.
        cwd: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Waiting for the shell failed (an OS error, not a command failure).
    #[error("lost track of `{command}`: {source}")]
    Wait {
        /// The shell command.
        command: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// How long output is still read after the shell exited or was killed. Processes
/// that left the group (`setsid`) can hold the pipes open forever; this bounds it.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs `command` with `sh -c` in `cwd`, stdin closed (EOF), within `limits`.
///
/// On timeout the whole process group is killed and the output so far is returned
/// with `timed_out = true`. A non-zero exit is not an error.
pub async fn run_command(
    command: &str,
    cwd: &Path,
    limits: &CommandLimits,
) -> Result<CommandOutput, CommandError> {
    let spawn_error = |source| CommandError::Spawn {
        command: command.to_string(),
        cwd: cwd.to_path_buf(),
        source,
    };
    // Checked up front: the OS reports a missing cwd as a bare ENOENT, which reads
    // as if `sh` itself were missing.
    if !cwd.is_dir() {
        return Err(spawn_error(io::Error::new(
            io::ErrorKind::NotFound,
            "working directory does not exist or is not a directory",
        )));
    }

    let started = Instant::now();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(GATE)
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    child_environment(&mut cmd);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(spawn_error)?;
    // Armed until the group is known to be dead, so that dropping this future
    // (the caller gave up) still kills everything the command started.
    let mut group = GroupGuard::new(child.id());
    release(&mut child).await;

    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 64 * 1024];
    let mut output = CappedBuffer::new(limits.output_cap_bytes);
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let mut timed_out = false;
    let mut deadline = tokio::time::Instant::now() + limits.timeout;

    // One loop reads both pipes and waits for the shell, so neither pipe can fill up
    // and block the child while we wait on the other.
    while out_open || err_open || status.is_none() {
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => match read {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => output.push(&out_buf[..n]),
            },
            read = stderr.read(&mut err_buf), if err_open => match read {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => output.push(&err_buf[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                status = Some(exited.map_err(|source| CommandError::Wait {
                    command: command.to_string(),
                    source,
                })?);
                // Stray background jobs would keep the pipes open; they die with the step.
                group.kill();
                deadline = deadline.min(tokio::time::Instant::now() + DRAIN_GRACE);
            },
            _ = tokio::time::sleep_until(deadline) => {
                if status.is_none() {
                    timed_out = true;
                    group.kill();
                    let exited = child.wait().await.map_err(|source| CommandError::Wait {
                        command: command.to_string(),
                        source,
                    })?;
                    status = Some(exited);
                    deadline = tokio::time::Instant::now() + DRAIN_GRACE;
                } else {
                    // Something outside the group still holds a pipe: stop reading.
                    break;
                }
            },
        }
    }
    group.disarm();

    let (mut output, truncated) = output.finish();
    // The choke point for command output: every store and view of it comes from here.
    crate::secrets::secrets().mask_string(&mut output);
    // Escapes and control characters from the command (colours, cursor moves, a forged
    // line) go no further: not to extractors, the log, the terminal or the model.
    if let std::borrow::Cow::Owned(clean) = agentforge_core::sanitize::text(&output) {
        output = clean;
    }
    Ok(CommandOutput {
        command: command.to_string(),
        exit_code: status.and_then(|s| s.code()),
        output,
        truncated,
        timed_out,
        duration: started.elapsed(),
    })
}

/// Gives `cmd` only the variables the process's [`crate::secrets::EnvPolicy`] passes
/// (no provider key, nothing denied; in allow-list mode only what is allowed): the
/// environment is cleared and rebuilt, never inherited whole.
fn child_environment(cmd: &mut Command) {
    let policy = crate::secrets::policy();
    cmd.env_clear();
    cmd.envs(policy.child_env(std::env::vars_os()));
}

/// The shell's first act (with the command as `$0`): wait for the host's go-ahead on
/// stdin, then become the command's shell (`exec`: same pid, so the same group and start
/// time). The host registers the group in between (see [`ProcessGroups`]), so a group is
/// recorded before any of the command runs; a host that dies first closes stdin without
/// the go-ahead and the command never starts.
const GATE: &str = r#"read _ && exec sh -c "$0""#;

/// Gives the gated shell its go-ahead and closes its stdin: the command then reads EOF,
/// as from /dev/null.
async fn release(child: &mut tokio::process::Child) {
    if let Some(mut stdin) = child.stdin.take() {
        // A shell that already died cannot take it; its exit status will tell.
        let _ = tokio::io::AsyncWriteExt::write_all(&mut stdin, b"\n").await;
    }
}

/// Kills a command's process group (its pgid is the shell's pid) on demand or on drop.
/// The group is in the [`ProcessGroups`] registry while the guard is armed.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    /// Guards the group led by `pid` and registers it.
    fn new(pid: Option<u32>) -> GroupGuard {
        if let Some(pgid) = pid.and_then(|p| i32::try_from(p).ok()) {
            ProcessGroups::global().register(pgid);
        }
        GroupGuard(pid)
    }

    /// Sends SIGKILL to every process in the group. A group that is already gone
    /// (ESRCH) is fine. The pgid cannot be reused while any member lives, and we
    /// stop signalling right after the command ends, so no unrelated group is hit.
    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pgid) = self.0.and_then(|p| libc::pid_t::try_from(p).ok()) {
            // SAFETY: killpg has no memory-safety preconditions; a stale pgid only
            // yields ESRCH.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    /// Stops the guard from signalling: the command is over and reaped.
    fn disarm(&mut self) {
        if let Some(pgid) = self.0.take().and_then(|p| i32::try_from(p).ok()) {
            ProcessGroups::global().unregister(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        self.disarm();
    }
}

/// A command's process group as recorded in a task folder: enough to recognise it
/// later even if its pgid has been reused since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedGroup {
    /// The group id (the shell's pid).
    pub pgid: i32,
    /// The leader's start time, in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_ticks: u64,
    /// The leader's session.
    pub session: i32,
}

/// The process groups of the commands running now, process-wide.
///
/// Each command's `GroupGuard` kills its group when the command ends or is dropped;
/// this registry covers what a guard cannot. An exit that skips destructors (a second
/// Ctrl-C exits at once) calls [`ProcessGroups::kill_all`]; and since a host killed with
/// SIGKILL kills nothing, every group is also written to a file of the task folder
/// ([`ProcessGroups::record_in`]) from before the command runs until it is over, so the
/// next run of the task can kill what its predecessor left behind
/// ([`kill_leftover_groups`]).
#[derive(Debug)]
pub struct ProcessGroups {
    inner: std::sync::Mutex<GroupsInner>,
}

#[derive(Debug)]
struct GroupsInner {
    live: Vec<RecordedGroup>,
    record: Option<PathBuf>,
}

static PROCESS_GROUPS: ProcessGroups = ProcessGroups {
    inner: std::sync::Mutex::new(GroupsInner {
        live: Vec::new(),
        record: None,
    }),
};

/// File in a task folder listing the process groups of the commands running for it.
pub const GROUPS_FILE: &str = "running-groups";

impl ProcessGroups {
    /// The registry of this process.
    pub fn global() -> &'static ProcessGroups {
        &PROCESS_GROUPS
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupsInner> {
        // A panic elsewhere must not stop the killing of process groups.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the live groups in `file` from now on (`None`: stop recording). The
    /// caller owns the folder (the task's run lock), so no one else writes the file.
    pub fn record_in(&self, file: Option<PathBuf>) {
        let mut inner = self.lock();
        inner.record = file;
        write_record(&inner);
    }

    /// The groups running now.
    pub fn live(&self) -> Vec<RecordedGroup> {
        self.lock().live.clone()
    }

    fn register(&self, pgid: i32) {
        let (start_ticks, session) = proc_stat(pgid)
            .map(|s| (s.start_ticks, s.session))
            .unwrap_or_default();
        let mut inner = self.lock();
        inner.live.push(RecordedGroup {
            pgid,
            start_ticks,
            session,
        });
        write_record(&inner);
    }

    fn unregister(&self, pgid: i32) {
        let mut inner = self.lock();
        inner.live.retain(|g| g.pgid != pgid);
        write_record(&inner);
    }

    /// Sends SIGKILL to every live group, for an exit that will not run the guards'
    /// destructors. The groups stay registered: their guards still unregister them.
    pub fn kill_all(&self) {
        for g in self.lock().live.iter() {
            kill_group(g.pgid);
        }
    }
}

/// Writes the live groups to the record file, or removes it when there is none. Best
/// effort: a failed write only weakens the cleanup after a SIGKILL of the host.
fn write_record(inner: &GroupsInner) {
    let Some(file) = &inner.record else { return };
    if inner.live.is_empty() {
        let _ = std::fs::remove_file(file);
        return;
    }
    let text: String = inner
        .live
        .iter()
        .map(|g| format!("{} {} {}\n", g.pgid, g.start_ticks, g.session))
        .collect();
    let _ = crate::state_store::atomic_write(file, text.as_bytes());
}

/// SIGKILL to a whole process group; a group that is gone (ESRCH) is fine.
fn kill_group(pgid: i32) {
    #[cfg(unix)]
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy)]
struct ProcStat {
    pgrp: i32,
    session: i32,
    start_ticks: u64,
    zombie: bool,
}

/// Reads `/proc/<pid>/stat` (None off Linux or when the process is gone).
fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after the last ')'.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some(ProcStat {
        zombie: matches!(fields.first(), Some(&"Z") | Some(&"X")),
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The processes of group `pgid` that are not zombies.
fn live_members(pgid: i32) -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .filter(|s| s.pgrp == pgid && !s.zombie)
        .collect()
}

/// Whether the group recorded as `g` is still the one that was recorded. With its
/// leader alive, the leader's start time decides (a reused pid starts later). With the
/// leader gone, the pgid cannot have been handed out again while members of the group
/// live, so members in the recorded session that started after the leader are the
/// recorded group's.
fn still_ours(g: &RecordedGroup) -> bool {
    match proc_stat(g.pgid) {
        Some(leader) if !leader.zombie => {
            leader.pgrp == g.pgid && leader.start_ticks == g.start_ticks
        }
        _ => live_members(g.pgid)
            .iter()
            .any(|m| m.session == g.session && m.start_ticks >= g.start_ticks),
    }
}

/// Kills the process groups that a previous run of a task recorded in `file` and left
/// running (its host was killed while a command ran), so that they cannot overlap the
/// commands of the new run. A group is killed only if it is still the recorded one
/// (see [`RecordedGroup`]); then this waits (up to 2 s) for its members to die. Removes
/// the file and returns the pgids killed. Call it holding the task's run lock.
pub fn kill_leftover_groups(file: &Path) -> Vec<i32> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let mut killed = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace().map(str::parse::<i64>);
        let (Some(Ok(pgid)), Some(Ok(start)), Some(Ok(session))) = (f.next(), f.next(), f.next())
        else {
            continue;
        };
        let (Ok(pgid), Ok(start_ticks), Ok(session)) = (
            i32::try_from(pgid),
            u64::try_from(start),
            i32::try_from(session),
        ) else {
            continue;
        };
        let g = RecordedGroup {
            pgid,
            start_ticks,
            session,
        };
        // pgid 0 or 1 would signal our own group or every process: never a recorded shell.
        if pgid > 1 && still_ours(&g) {
            kill_group(pgid);
            killed.push(pgid);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while killed.iter().any(|p| !live_members(*p).is_empty()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(file);
    killed
}

/// Keeps the first half and the last half of `cap` bytes of a stream.
struct CappedBuffer {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl CappedBuffer {
    fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        CappedBuffer {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.total += data.len();
        if self.head.len() < self.head_cap {
            let take = (self.head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
        } else {
            self.tail.extend(data);
            let excess = self.tail.len().saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
        }
    }

    /// The kept text and whether anything was dropped.
    fn finish(self) -> (String, bool) {
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        let kept = head.len() + tail.len();
        if kept == self.total {
            head.extend_from_slice(&tail);
            return (String::from_utf8_lossy(&head).into_owned(), false);
        }
        // Cut at whole UTF-8 sequences so the marker is not flanked by U+FFFD.
        if let Err(e) = std::str::from_utf8(&head) {
            if e.error_len().is_none() {
                head.truncate(e.valid_up_to());
            }
        }
        let skip = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        tail.drain(..skip);
        let omitted = self.total - head.len() - tail.len();
        let text = format!(
            "{}\n... [{omitted} bytes omitted] ...\n{}",
            String::from_utf8_lossy(&head),
            String::from_utf8_lossy(&tail)
        );
        (text, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(timeout_secs: u64, cap: usize) -> CommandLimits {
        CommandLimits {
            timeout: Duration::from_secs(timeout_secs),
            output_cap_bytes: cap,
        }
    }

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[tokio::test]
    async fn reports_exit_codes() {
        let dir = tmp();
        let ok = run_command("true", dir.path(), &CommandLimits::default())
            .await
            .unwrap();
        assert_eq!(ok.exit_code, Some(0));
        assert!(ok.success());
        let bad = run_command("exit 3", dir.path(), &CommandLimits::default())
            .await
            .unwrap();
        assert_eq!(bad.exit_code, Some(3));
        assert!(!bad.success());
        assert!(!bad.timed_out);
        assert_eq!(bad.command, "exit 3");
    }

    #[tokio::test]
    async fn captures_stdout_and_stderr() {
        let dir = tmp();
        let out = run_command(
            // A second apart, so a reader stalled by a loaded machine still sees them in order.
            "echo to-out; echo to-err >&2; sleep 1; echo later",
            dir.path(),
            &CommandLimits::default(),
        )
        .await
        .unwrap();
        assert!(out.output.contains("to-out"), "{out:?}");
        assert!(out.output.contains("to-err"), "{out:?}");
        // Arrival order is kept across the two pipes.
        assert!(out.output.find("to-err").unwrap() < out.output.find("later").unwrap());
        assert!(!out.truncated);
    }

    #[tokio::test]
    async fn runs_in_cwd_with_null_stdin() {
        let dir = tmp();
        std::fs::write(dir.path().join("marker.txt"), "x").unwrap();
        let out = run_command("ls; cat; echo done", dir.path(), &CommandLimits::default())
            .await
            .unwrap();
        assert!(out.output.contains("marker.txt"), "{out:?}");
        assert!(out.output.contains("done"), "{out:?}");
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tmp();
        let pid_file = dir.path().join("child.pid");
        // The shell backgrounds a child and waits on it: killing only the shell
        // would leave `sleep 100` running and holding the pipes.
        let cmd = format!(
            "echo before; sleep 100 & echo $! > {}; wait",
            pid_file.display()
        );
        let started = Instant::now();
        // 3 s, not 1: the shell must have written the pid file before the kill, even
        // on a loaded machine; `sleep 100` still outlives it by far.
        let out = run_command(&cmd, dir.path(), &limits(3, 1024))
            .await
            .unwrap();
        assert!(out.timed_out);
        assert!(!out.success());
        assert_eq!(out.exit_code, None);
        assert!(out.output.contains("before"), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{out:?}");

        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The sleep child must be gone (allow a moment for the kernel to reap it).
        let mut alive = true;
        for _ in 0..50 {
            // SAFETY: signal 0 only checks for existence.
            alive = unsafe { libc::kill(pid, 0) } == 0 && !is_zombie(pid);
            if !alive {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive, "sleep child {pid} survived the timeout");
    }

    fn is_zombie(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[tokio::test]
    async fn background_job_does_not_hold_the_step() {
        let dir = tmp();
        let started = Instant::now();
        let out = run_command("sleep 100 & echo started", dir.path(), &limits(30, 1024))
            .await
            .unwrap();
        assert!(out.success(), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn large_output_on_both_pipes_is_capped_with_marker() {
        let dir = tmp();
        // ~600 KB on each pipe: far beyond a pipe buffer, so a reader that drains
        // one pipe at a time would deadlock.
        let cmd = "i=0; while [ $i -lt 3 ]; do head -c 200000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2; i=$((i+1)); done; echo; echo THE-END";
        let out = run_command(cmd, dir.path(), &limits(60, 1000))
            .await
            .unwrap();
        assert!(out.success(), "{}", out.tail(200));
        assert!(out.truncated);
        assert!(out.output.contains("bytes omitted] ..."), "{}", out.output);
        // The two pipes are read as data arrives, so which one ends the output is a
        // race; the byte count below is exact either way.
        let omitted: usize = out
            .output
            .split("... [")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(omitted, 1_200_000 + "\nTHE-END\n".len() - 1000);
        assert!(out.output.len() < 1100);
    }

    #[test]
    fn capped_buffer_keeps_head_and_tail() {
        let mut b = CappedBuffer::new(10);
        for chunk in ["0123", "4567", "89ab", "cdef"] {
            b.push(chunk.as_bytes());
        }
        let (text, truncated) = b.finish();
        assert!(truncated);
        assert_eq!(text, "01234\n... [6 bytes omitted] ...\nbcdef");

        let mut b = CappedBuffer::new(10);
        b.push(b"0123456789");
        assert_eq!(b.finish(), ("0123456789".to_string(), false));
    }

    #[test]
    fn capped_buffer_does_not_split_utf8() {
        let mut b = CappedBuffer::new(6);
        b.push("ééééééé".as_bytes()); // 14 bytes
        let (text, truncated) = b.finish();
        assert!(truncated);
        assert!(!text.contains('\u{FFFD}'), "{text}");
        assert!(text.starts_with("é\n"), "{text}");
        assert!(text.ends_with("\né"), "{text}");
    }

    #[test]
    fn tail_counts_characters() {
        let out = CommandOutput {
            command: "x".into(),
            exit_code: Some(0),
            output: "abcé".into(),
            truncated: false,
            timed_out: false,
            duration: Duration::ZERO,
        };
        assert_eq!(out.tail(2), "cé");
        assert_eq!(out.tail(10), "abcé");
        assert_eq!(out.tail(0), "");
    }

    #[tokio::test]
    async fn missing_cwd_is_an_error() {
        let dir = tmp();
        let err = run_command("true", &dir.path().join("nope"), &CommandLimits::default())
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Spawn { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("nope") && msg.contains("working directory"),
            "{msg}"
        );
    }

    /// A group like a check's, started by "a previous run": `sh` leading its own group
    /// with a `sleep` child. Returns the shell and the sleep's pid.
    fn orphan_like_group(dir: &Path) -> (std::process::Child, i32) {
        use std::os::unix::process::CommandExt;
        let pid_file = dir.join("sleep.pid");
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("sleep 60 & echo $! > {}; wait", pid_file.display()))
            .process_group(0)
            .spawn()
            .unwrap();
        let mut pid = None;
        for _ in 0..500 {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok());
            if pid.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (child, pid.expect("the group started"))
    }

    fn record_line(pgid: i32, start_shift: u64) -> String {
        let st = proc_stat(pgid).expect("/proc is readable");
        format!("{pgid} {} {}\n", st.start_ticks + start_shift, st.session)
    }

    #[test]
    fn leftover_group_is_killed_when_it_is_still_the_recorded_one() {
        let dir = tmp();
        let (mut shell, sleep) = orphan_like_group(dir.path());
        let pgid = shell.id() as i32;
        let file = dir.path().join(GROUPS_FILE);
        std::fs::write(&file, record_line(pgid, 0)).unwrap();
        assert_eq!(kill_leftover_groups(&file), [pgid]);
        assert!(shell.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(live_members(pgid).is_empty());
        assert!(!is_alive(sleep), "sleep {sleep} survived");
        assert!(!file.exists());
    }

    #[test]
    fn a_group_whose_leader_started_at_another_time_is_not_ours() {
        let dir = tmp();
        let (mut shell, sleep) = orphan_like_group(dir.path());
        let pgid = shell.id() as i32;
        let file = dir.path().join(GROUPS_FILE);
        // Same pgid, another start time: the pid was reused by an unrelated process.
        std::fs::write(&file, record_line(pgid, 1)).unwrap();
        assert!(kill_leftover_groups(&file).is_empty());
        assert!(is_alive(sleep));
        // Garbage lines and pgids 0/1 are ignored, never signalled.
        std::fs::write(&file, "garbage\n0 0 0\n1 0 0\n").unwrap();
        assert!(kill_leftover_groups(&file).is_empty());
        kill_group(pgid);
        let _ = shell.wait();
    }

    #[test]
    fn leftover_members_of_a_dead_leader_are_killed() {
        let dir = tmp();
        let (mut shell, sleep) = orphan_like_group(dir.path());
        let pgid = shell.id() as i32;
        let line = record_line(pgid, 0);
        // The shell dies, its background `sleep` stays in the group.
        unsafe {
            libc::kill(pgid, libc::SIGKILL);
        }
        shell.wait().unwrap();
        assert!(is_alive(sleep));
        let file = dir.path().join(GROUPS_FILE);
        std::fs::write(&file, line).unwrap();
        assert_eq!(kill_leftover_groups(&file), [pgid]);
        assert!(!is_alive(sleep), "sleep {sleep} survived");
    }

    #[tokio::test]
    async fn running_groups_are_recorded_while_they_run() {
        let dir = tmp();
        let file = dir.path().join(GROUPS_FILE);
        ProcessGroups::global().record_in(Some(file.clone()));
        // The shell waits for the record before it runs the command.
        let out = run_command(
            &format!("echo $$; cat {}", file.display()),
            dir.path(),
            &limits(30, 4096),
        )
        .await
        .unwrap();
        ProcessGroups::global().record_in(None);
        let mut lines = out.output.lines();
        let shell = lines.next().unwrap().trim().to_string();
        // Other tests' commands may be recorded too: ours is among them.
        assert!(
            lines.any(|l| l.split_whitespace().next() == Some(shell.as_str())
                && l.split_whitespace().count() == 3),
            "{}",
            out.output
        );
        assert!(!ProcessGroups::global()
            .live()
            .iter()
            .any(|g| g.pgid.to_string() == shell));
    }

    fn is_alive(pid: i32) -> bool {
        // SAFETY: signal 0 only checks for existence.
        unsafe { libc::kill(pid, 0) == 0 && !is_zombie(pid) }
    }
}
