//! Crash-safe task state on disk.
//!
//! Layout per task, under `<workspace>/.agentforge/tasks/<task-id>/`:
//!
//! ```text
//! task.yaml            immutable spec
//! state.yaml           the state after the last step (a cache of the log's last line;
//!                      written as indented JSON, which YAML readers read, see `yaml_json`)
//! actions.jsonl        append-only audit log, one line per executed step (flushed)
//! working_memory.yaml  the loaded context, stamped with its step (atomic rewrite)
//! provider.yaml        the provider and model the task last ran with (never a key)
//! trajectories/        each step's request and reply, compressed (see [`crate::trajectory`])
//! artifacts/{inputs,outputs,snapshots}/
//! ```
//!
//! The log is the source of truth: a step counts as done once its line is written (a
//! kill loses nothing from then on); its flush to the disk runs while the model is asked
//! for the next step, and the executor waits for it before that step's action changes
//! anything ([`crate::flush`]). Every line carries the state after that step, so the
//! line's flush is the step's only durable write: `state.yaml` is then replaced atomically (rename) without
//! waiting for the disk, and a crash or power loss that leaves it behind, empty or
//! unreadable is repaired on the next open from the last line. The working memory is
//! written the same way just before the line, stamped with its step: a power loss that
//! leaves it behind the log is seen from the stamp, and it is cleared, never shown stale. A torn last line (the process died mid-write) is detected, moved to
//! a `actions.jsonl.torn-*` file for the post-mortem, and cut from the log: that step
//! was never recorded as done, so it runs again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentforge_core::state::{ActionRecord, RecordedProvider, TaskState};
use agentforge_core::task::TaskSpec;
use agentforge_core::working_memory::{WorkingMemory, DEFAULT_MAX_ITEMS};

/// Errors of the state store. Each names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O error on a named path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A stored file does not parse.
    #[error("corrupt state file {path}: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// Parser message.
        message: String,
    },
    /// No task with that id.
    #[error("no task `{id}` under {root} (list tasks with `agentforge task list`)")]
    NotFound {
        /// Requested id.
        id: String,
        /// Where it was looked for.
        root: String,
    },
    /// Another process holds the task's lock: it is running the task now.
    #[error("{id} is being run by {}; wait for it to finish or stop it (Ctrl-C, or `kill -INT <pid>`), then resume", holder(.pid))]
    Busy {
        /// What is locked (``task `x` ``, ``sprint `y` ``).
        id: String,
        /// The holder's pid, as it wrote it into the lock file (unknown if unreadable).
        pid: Option<u32>,
    },
    /// Creating a task whose folder exists.
    #[error("task `{id}` already exists at {path}; resume it with `agentforge resume {id}` or pick another id")]
    Exists {
        /// The id.
        id: String,
        /// Its folder.
        path: String,
    },
}

fn holder(pid: &Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "another process".to_string(),
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// File in a task folder that `run` and `resume` hold locked (with the holder's pid in
/// it) while they run the task.
pub const LOCK_FILE: &str = "run.lock";

/// An exclusive hold on a task folder, so that one process at a time runs a task. The
/// lock is an `flock` on [`LOCK_FILE`]: it lasts as long as this value (or the process)
/// and the OS releases it when the process dies, however it dies, so a crash never
/// leaves a stale lock. The file itself stays, with the last holder's pid.
#[derive(Debug)]
pub struct TaskLock {
    // Held for its descriptor: closing it releases the lock.
    _file: File,
}

/// Takes `flock(LOCK_EX | LOCK_NB)` on `f`: `WouldBlock` when another descriptor holds it.
#[cfg(unix)]
fn try_lock_exclusive(f: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock takes a descriptor we own for the duration of the call and no memory.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No advisory locks off Unix: the task is not protected against a second runner.
#[cfg(not(unix))]
fn try_lock_exclusive(_f: &File) -> io::Result<()> {
    Ok(())
}

/// The pid a lock holder wrote into the lock file. The holder writes it just after it
/// took the lock, so an empty file is read again a few times before giving up.
fn read_holder(path: &Path) -> Option<u32> {
    for _ in 0..20 {
        if let Some(pid) = fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    None
}

/// Checks that tasks can be stored under `<workspace>/.agentforge/`: creates the folder,
/// then writes and removes a probe file. The probe's name is unique to the call (pid and
/// random part), so commands started together never remove each other's probe, and it
/// is removed on every path, failures included.
pub fn probe_writable(workspace: &Path) -> Result<(), StoreError> {
    let dir = workspace.join(".agentforge");
    fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
    let mut probe = tempfile::Builder::new()
        .prefix(&format!(".write-probe-{}-", std::process::id()))
        .tempfile_in(&dir)
        .map_err(io_err("cannot create a file in", &dir))?;
    let written = probe
        .write_all(b"ok")
        .and_then(|()| probe.as_file().sync_all());
    let path = probe.path().to_path_buf();
    // `close` removes the file; on a write error dropping `probe` removes it too.
    written.map_err(io_err("cannot write", &path))?;
    probe.close().map_err(io_err("cannot remove", &path))
}

/// File name of the working memory inside a task folder.
pub use agentforge_core::state::WORKING_MEMORY_FILE;
const LOG_FILE: &str = "actions.jsonl";
/// File name of the recorded provider inside a task folder.
pub const PROVIDER_FILE: &str = "provider.yaml";

/// Appends `line` (a whole log line, its newline included) to the log at `path` in one
/// write and fsyncs it: one write keeps a crash's tearing to the last line only, and the
/// line is durable once this returns. On failure, says what it was doing ("cannot open",
/// "cannot append to", "cannot fsync") with the error. The sprint iteration log appends
/// through it; the task log flushes in the background instead ([`crate::flush`]).
pub fn append_synced_line(path: &Path, line: &[u8]) -> Result<(), (&'static str, io::Error)> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| ("cannot open", e))?;
    f.write_all(line).map_err(|e| ("cannot append to", e))?;
    f.sync_all().map_err(|e| ("cannot fsync", e))
}

/// Writes `bytes` to `path` atomically: temp file in the same folder, fsync, rename, fsync folder.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    // Persist the rename itself.
    sync_dir(dir);
    Ok(())
}

/// Makes the renames in `dir` durable (best effort: some systems cannot sync a folder).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Atomically replaces a file that is rewritten every step, without freeing disk blocks.
///
/// Same guarantee as [`atomic_write`] (the name always holds a complete old or new
/// version, durable once this returns) but it recycles two inodes instead of creating
/// and deleting one per call: on file systems mounted with `discard` (common on VMs and
/// SSDs) freeing blocks costs about a millisecond, which would dominate a step.
///
/// 1. write the new bytes into the spare file `.<name>.spare` in place, fsync;
/// 2. exchange the spare and the file (Linux `RENAME_EXCHANGE`, one atomic call): the
///    file names the new bytes, the spare the old ones, kept for the next call.
///
/// Where names cannot be exchanged (another system, an old kernel, some network file
/// systems), step 2 is three calls with the same effect:
///
/// 2. hard-link the current file as `.<name>.old` (its inode keeps a name);
/// 3. rename the spare over the file (atomic; the old inode is not freed);
/// 4. rename `.<name>.old` to `.<name>.spare` for the next call.
///
/// A crash between any two steps leaves the file complete; the second way's leftovers
/// are tidied on its next call.
pub fn atomic_rewrite(path: &Path, bytes: &[u8]) -> io::Result<()> {
    rewrite(path, bytes, Durability::Synced)
}

/// Whether a rewrite waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// fsync the data and the folder before returning.
    Synced,
    /// Atomic for other processes and across a kill (the rename), but not flushed: for
    /// files the log can rebuild ([`TaskDir::recover`]).
    Cache,
}

/// The last `n` non-blank lines of `body` (split as `str::lines` splits, invalid UTF-8
/// replaced), oldest first, with the offset in `body` where the first of them starts;
/// fewer than `n` only when `whole` (`body` is the whole file), `None` otherwise (read
/// more). Found by searching newlines backwards from the end: only the lines returned
/// are looked at, however long `body` is.
fn last_lines(body: &[u8], n: usize, whole: bool) -> Option<(Vec<String>, usize)> {
    let (lines, first) = last_line_bytes(body, n, whole)?;
    let lines = lines
        .into_iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    Some((lines, first))
}

/// [`last_lines`] as the lines' bytes in `body`, not yet checked as UTF-8: the log's
/// reader looks most of them up by their bytes (lines it parsed at an earlier step), so
/// only a new line is ever decoded.
fn last_line_bytes(body: &[u8], n: usize, whole: bool) -> Option<(Vec<&[u8]>, usize)> {
    let mut out = Vec::with_capacity(n);
    let mut end = body.len();
    let mut first = body.len();
    // A final line without its newline counts as a line (a torn write is reported by
    // its parse error); a final newline ends the last line.
    let mut newlines = memchr::memrchr_iter(b'\n', body).peekable();
    // `\r` is cut only before a newline, as `str::lines` does.
    let mut terminated = newlines.peek() == Some(&body.len().wrapping_sub(1));
    if terminated {
        newlines.next();
        end -= 1;
    }
    while out.len() < n {
        let start = newlines.next().map_or(0, |i| i + 1);
        let raw = &body[start..end];
        let raw = match raw.strip_suffix(b"\r") {
            Some(r) if terminated => r,
            _ => raw,
        };
        terminated = true;
        if !is_blank(raw) {
            out.push(raw);
            first = start;
        }
        if start == 0 {
            break;
        }
        end = start - 1;
    }
    if out.len() < n && !whole {
        return None;
    }
    out.reverse();
    Some((out, first))
}

/// Whether the line is only white space as `str::trim` sees it (invalid UTF-8 replaced):
/// decided from the bytes when one of them is visible ASCII, as in every log line.
fn is_blank(raw: &[u8]) -> bool {
    if raw
        .iter()
        .any(|&b| b.is_ascii() && !(b as char).is_whitespace())
    {
        return false;
    }
    String::from_utf8_lossy(raw).trim().is_empty()
}

/// The last `n` non-blank lines of the file at `path` (oldest first; empty when it does
/// not exist), read from its end: [`last_lines`] over a tail that grows only until it
/// holds them, so the cost follows the lines' size, not the file's.
pub fn read_last_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let mut chunk: u64 = 64 * 1024;
    loop {
        let start = len.saturating_sub(chunk);
        f.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::with_capacity((len - start) as usize);
        f.read_to_end(&mut buf)?;
        // Skip a partial first line unless the read began at the file's start.
        let body_start = if start == 0 {
            0
        } else {
            memchr::memchr(b'\n', &buf).map_or(buf.len(), |i| i + 1)
        };
        match last_lines(&buf[body_start..], n, start == 0) {
            Some((lines, _)) => return Ok(lines),
            None => chunk = chunk.saturating_mul(4),
        }
    }
}

/// The steps of [`atomic_rewrite`]. Each system call here is paid every step for two
/// files, so the states are told apart by the calls' own errors, not by looking first:
/// the exchange fails on a first write (`NotFound`), the link finds a leftover `.old`
/// (`AlreadyExists`) and a first write, and the spare is truncated only when it was
/// longer than the new bytes.
fn rewrite(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    rewrite_with(path, bytes, durability, true)
}

/// [`rewrite`]; with `may_exchange` false, always by links and renames (as where the
/// system cannot exchange names).
fn rewrite_with(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
    may_exchange: bool,
) -> io::Result<()> {
    let synced = durability == Durability::Synced;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let spare = dir.join(format!(".{name}.spare"));
    let old = dir.join(format!(".{name}.old"));
    if synced {
        // The spare is about to be overwritten in place: the last rewrite (maybe one
        // without a folder fsync) must have made it the spare on the disk too, or a power
        // loss could leave the file's name on the inode being overwritten.
        sync_dir(dir);
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&spare)?;
    let had = f.metadata()?.len();
    f.write_all(bytes)?;
    if had > bytes.len() as u64 {
        f.set_len(bytes.len() as u64)?;
    }
    if synced {
        f.sync_all()?;
    }
    drop(f);
    // Any error (a first write, a system that cannot) leaves both names as they were:
    // the links below then tell what it was.
    if may_exchange && crate::exchange::exchange(&spare, path).is_ok() {
        if had == 0 {
            // A new spare: the links' way may have crashed between its renames here
            // before (no spare, a `.old`). Tidy that leftover once; rarely paid.
            let _ = fs::remove_file(&old);
        }
        if synced {
            sync_dir(dir);
        }
        return Ok(());
    }
    let linked = match fs::hard_link(path, &old) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Left by a crash between steps 2 and 4: start clean.
            fs::remove_file(&old)?;
            fs::hard_link(path, &old)
        }
        linked => linked,
    };
    match linked {
        Ok(()) => {
            fs::rename(&spare, path)?;
            fs::rename(&old, &spare)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // First write: durable whatever is asked (there is no older version to fall
            // back on).
            if !synced {
                File::open(&spare)?.sync_all()?;
            }
            fs::rename(&spare, path)?;
            sync_dir(dir);
            return Ok(());
        }
        Err(_) => {
            // No hard links here (some network file systems): plain replace.
            fs::rename(&spare, path)?;
        }
    }
    if synced {
        sync_dir(dir);
    }
    Ok(())
}

/// The store of all tasks of one workspace.
#[derive(Debug, Clone)]
pub struct TaskStore {
    root: PathBuf,
}

impl TaskStore {
    /// The store of `workspace` (tasks under `<workspace>/.agentforge/tasks`).
    pub fn new(workspace: &Path) -> TaskStore {
        TaskStore {
            root: workspace.join(".agentforge").join("tasks"),
        }
    }

    /// Folder holding all tasks.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a task folder with its spec and initial state. Fails if it exists.
    pub fn create(&self, spec: &TaskSpec, initial: &TaskState) -> Result<TaskDir, StoreError> {
        let dir = self.root.join(&spec.id);
        if dir.join("task.yaml").exists() {
            return Err(StoreError::Exists {
                id: spec.id.clone(),
                path: dir.display().to_string(),
            });
        }
        for sub in [
            "artifacts/inputs",
            "artifacts/outputs",
            "artifacts/snapshots",
        ] {
            let p = dir.join(sub);
            fs::create_dir_all(&p).map_err(io_err("cannot create", &p))?;
        }
        let task_dir = TaskDir::at(dir);
        task_dir.save_working_memory(&WorkingMemory::default())?;
        task_dir.save_state(initial)?;
        // Inputs are kept verbatim for `load_context spec_section:` and post-mortems.
        let inputs = task_dir.dir.join("artifacts/inputs/inputs.yaml");
        let inputs_yaml = serde_yaml_ng::to_string(&spec.inputs).unwrap_or_default();
        atomic_write(&inputs, inputs_yaml.as_bytes()).map_err(io_err("cannot write", &inputs))?;
        // task.yaml last: its presence marks a fully created task.
        let p = task_dir.dir.join("task.yaml");
        atomic_write(&p, spec.to_yaml().as_bytes()).map_err(io_err("cannot write", &p))?;
        Ok(task_dir)
    }

    /// Opens an existing task.
    pub fn open(&self, id: &str) -> Result<TaskDir, StoreError> {
        let dir = self.root.join(id);
        if !dir.join("task.yaml").is_file() {
            return Err(StoreError::NotFound {
                id: id.to_string(),
                root: self.root.display().to_string(),
            });
        }
        Ok(TaskDir::at(dir))
    }

    /// Ids of all tasks, sorted.
    pub fn list(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ids),
            Err(e) => return Err(io_err("cannot list", &self.root)(e)),
        };
        for entry in entries.flatten() {
            if entry.path().join("task.yaml").is_file() {
                ids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        ids.sort();
        Ok(ids)
    }
}

/// What opening a task's log found and repaired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recovery {
    /// A torn final line was cut from the log and saved to this file.
    pub torn_line_saved_to: Option<PathBuf>,
    /// `state.yaml` lagged the log and was rebuilt from the last record.
    pub state_rebuilt_from_step: Option<u64>,
    /// The working memory lagged the log (a power cut) and was cleared.
    pub working_memory_cleared: bool,
    /// Trajectories of steps that were never recorded (a kill between the trajectory
    /// and the log line), removed.
    pub trajectories_removed: Vec<u64>,
}

impl Recovery {
    /// Whether anything was repaired.
    pub fn repaired(&self) -> bool {
        self.torn_line_saved_to.is_some()
            || self.state_rebuilt_from_step.is_some()
            || self.working_memory_cleared
            || !self.trajectories_removed.is_empty()
    }
}

/// One task's folder.
#[derive(Debug, Clone)]
pub struct TaskDir {
    dir: PathBuf,
    /// Parsed copies of its files, used when the bytes on the disk are those parsed.
    parsed: std::sync::Arc<crate::parsed::ParseCache>,
    /// How many bytes from the log's end the last [`TaskDir::recent_actions`] needed:
    /// the next call reads that much at once instead of growing from 16 KiB (records
    /// carry the state after them, so a step's tail is often a few hundred KiB).
    tail_hint: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl TaskDir {
    /// Opens a task folder directly (as `inspect` does with a path).
    pub fn at(dir: PathBuf) -> TaskDir {
        TaskDir {
            dir,
            parsed: Default::default(),
            tail_hint: Default::default(),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Path of the action log.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// Folder of full tool outputs.
    pub fn outputs_dir(&self) -> PathBuf {
        self.dir.join("artifacts/outputs")
    }

    /// Folder of pre-change file snapshots.
    pub fn snapshots_dir(&self) -> PathBuf {
        self.dir.join("artifacts/snapshots")
    }

    /// Folder of verified inputs.
    pub fn inputs_dir(&self) -> PathBuf {
        self.dir.join("artifacts/inputs")
    }

    /// Takes the task's exclusive run lock (see [`TaskLock`]) and writes this process's
    /// pid into it. Fails at once with [`StoreError::Busy`], naming the holder's pid, when
    /// another process runs the task.
    pub fn lock(&self) -> Result<TaskLock, StoreError> {
        lock_folder(&self.dir, &format!("task `{}`", self.task_id()))
    }

    /// The task's id: the folder's name.
    fn task_id(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Takes the exclusive run lock of `dir` (its [`LOCK_FILE`], see [`TaskLock`]) and writes
/// this process's pid into it; `what` names the folder's owner in the error (``task `x` ``,
/// ``sprint `y` ``). Fails at once with [`StoreError::Busy`] when another process holds it.
pub fn lock_folder(dir: &Path, what: &str) -> Result<TaskLock, StoreError> {
    {
        let p = dir.join(LOCK_FILE);
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .map_err(io_err("cannot open", &p))?;
        match try_lock_exclusive(&f) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(StoreError::Busy {
                    id: what.to_string(),
                    pid: read_holder(&p),
                })
            }
            Err(e) => return Err(io_err("cannot lock", &p)(e)),
        }
        // Only the holder writes, so the pid in the file is always the holder's.
        f.set_len(0)
            .and_then(|()| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
            .map_err(io_err("cannot write", &p))?;
        Ok(TaskLock { _file: f })
    }
}

impl TaskDir {
    /// Reads the immutable spec.
    pub fn spec(&self) -> Result<TaskSpec, StoreError> {
        let p = self.dir.join("task.yaml");
        let corrupt = |message: String| StoreError::Corrupt {
            path: p.display().to_string(),
            message,
        };
        let bytes = fs::read(&p).map_err(|e| corrupt(e.to_string()))?;
        self.parsed.spec.get_or_parse(&bytes, |b| {
            let text = std::str::from_utf8(b).map_err(|e| corrupt(e.to_string()))?;
            TaskSpec::parse(text, &p.display().to_string()).map_err(|e| corrupt(e.to_string()))
        })
    }

    /// Reads `state.yaml` as it is (see [`TaskDir::recover`] for the consistent state).
    pub fn load_state(&self) -> Result<TaskState, StoreError> {
        let p = self.dir.join("state.yaml");
        let bytes = fs::read(&p).map_err(io_err("cannot read", &p))?;
        self.parsed.state.get_or_parse(&bytes, |b| {
            crate::yaml_json::from_slice(b).map_err(|message| StoreError::Corrupt {
                path: p.display().to_string(),
                message,
            })
        })
    }

    /// Atomically rewrites `state.yaml`, durable once this returns.
    pub fn save_state(&self, state: &TaskState) -> Result<(), StoreError> {
        self.write_state(state, Durability::Synced)
    }

    /// Atomically rewrites `state.yaml` from a step's record whose log line is already
    /// written ([`TaskDir::append_action`]): no fsync, since [`TaskDir::recover`] rebuilds
    /// the file from that line if a power loss leaves it behind.
    pub fn save_state_after_log(&self, state: &TaskState) -> Result<(), StoreError> {
        self.write_state(state, Durability::Cache)
    }

    fn write_state(&self, state: &TaskState, durability: Durability) -> Result<(), StoreError> {
        let p = self.dir.join("state.yaml");
        // JSON, which is YAML (see `yaml_json`): libyaml's emitter was half of this
        // rewrite's time, and the file is rewritten every step.
        let yaml = crate::yaml_json::to_string(state).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        rewrite(&p, yaml.as_bytes(), durability).map_err(io_err("cannot write", &p))?;
        self.parsed.state.wrote(yaml.as_bytes(), state);
        Ok(())
    }

    /// The provider the task last ran with; `None` for a task that never ran (or was
    /// created before providers were recorded).
    pub fn load_provider(&self) -> Result<Option<RecordedProvider>, StoreError> {
        let p = self.dir.join(PROVIDER_FILE);
        match fs::read_to_string(&p) {
            Ok(text) => serde_yaml_ng::from_str(&text)
                .map(Some)
                .map_err(|e| StoreError::Corrupt {
                    path: p.display().to_string(),
                    message: format!("{e}; delete it and give --provider and --model"),
                }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("cannot read", &p)(e)),
        }
    }

    /// Records the provider a run of the task uses (atomic rewrite).
    pub fn save_provider(&self, provider: &RecordedProvider) -> Result<(), StoreError> {
        let p = self.dir.join(PROVIDER_FILE);
        let yaml = serde_yaml_ng::to_string(provider).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        atomic_write(&p, yaml.as_bytes()).map_err(io_err("cannot write", &p))
    }

    /// Reads the working memory (empty if the file is missing).
    pub fn load_working_memory(&self) -> Result<WorkingMemory, StoreError> {
        let p = self.dir.join(WORKING_MEMORY_FILE);
        match fs::read(&p) {
            Ok(bytes) => self.parsed.memory.get_or_parse(&bytes, |b| {
                crate::yaml_json::from_slice(b).map_err(|message| StoreError::Corrupt {
                    path: p.display().to_string(),
                    message,
                })
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(WorkingMemory::default()),
            Err(e) => Err(io_err("cannot read", &p)(e)),
        }
    }

    /// Atomically rewrites the working memory, durable once this returns.
    pub fn save_working_memory(&self, wm: &WorkingMemory) -> Result<(), StoreError> {
        self.write_working_memory(wm, Durability::Synced)
    }

    /// Atomically rewrites the working memory of the step about to be logged, without
    /// waiting for the disk: a kill leaves a complete file; a power loss may leave an
    /// older one, which [`TaskDir::recover`] tells from `wm.step` and clears.
    pub fn save_working_memory_before_log(&self, wm: &WorkingMemory) -> Result<(), StoreError> {
        self.write_working_memory(wm, Durability::Cache)
    }

    fn write_working_memory(
        &self,
        wm: &WorkingMemory,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let p = self.dir.join(WORKING_MEMORY_FILE);
        // Most steps leave the working memory as it was: when the file holds exactly what
        // this value was written as (read back to be sure), there is nothing to write.
        // (A durable write is never skipped: the file may not be on the disk yet.)
        if let Some(bytes) = (durability == Durability::Cache)
            .then(|| self.parsed.memory.bytes_of(wm))
            .flatten()
        {
            if fs::read(&p).is_ok_and(|on_disk| on_disk == bytes) {
                return Ok(());
            }
        }
        // JSON, which is YAML, written ~10x faster than libyaml writes it (`yaml_json`).
        let text = crate::yaml_json::to_string(wm).expect("working memory serializes");
        rewrite(&p, text.as_bytes(), durability).map_err(io_err("cannot write", &p))?;
        self.parsed.memory.wrote(text.as_bytes(), wm);
        Ok(())
    }

    /// Appends one record to the log, flushed to the disk in the background
    /// ([`crate::flush`]). The step is done once this returns: a kill loses nothing.
    pub fn append_action(&self, record: &ActionRecord) -> Result<(), StoreError> {
        self.append_action_after(record, Vec::new())
    }

    /// [`TaskDir::append_action`] for a record whose files were written just before it
    /// (its trajectory): the background flush syncs them before the log.
    pub fn append_action_after(
        &self,
        record: &ActionRecord,
        written: Vec<File>,
    ) -> Result<(), StoreError> {
        let p = self.log_path();
        let mut line = serde_json::to_string(record).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        line.push('\n');
        if agentforge_core::fault::armed("torn_log", record.step) {
            let half = &line.as_bytes()[..line.len() / 2];
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&p) {
                let _ = f.write_all(half);
                let _ = f.sync_all();
            }
            agentforge_core::fault::point("torn_log", record.step);
        }
        crate::flush::append_line_after(&p, line.as_bytes(), written)
            .map_err(|(op, e)| io_err(op, &p)(e))
    }

    /// Waits until the log's lines are on the disk ([`crate::flush`]): the barrier the
    /// executor passes before a step's action may change anything.
    pub fn wait_flushed(&self) -> Result<(), StoreError> {
        let p = self.log_path();
        crate::flush::wait_flushed(&p).map_err(|e| io_err("cannot fsync", &p)(e.source))
    }

    /// Reads every record. A torn last line is an error here: call [`TaskDir::recover`] first.
    pub fn read_actions(&self) -> Result<Vec<ActionRecord>, StoreError> {
        let p = self.log_path();
        let text = match fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot read", &p)(e)),
        };
        parse_log(&text, &p)
    }

    /// The last `n` records, oldest first, read from the end of the log so the cost
    /// does not grow with the log's length. `S` is how much of each record's state is
    /// parsed (the whole `TaskState`, or only what a reader needs, as in
    /// [`agentforge_core::state::TailRecord`]). Shared with the folder's parse cache: a
    /// record that is still in the tail next step is neither parsed nor copied again.
    pub fn recent_actions<S: serde::de::DeserializeOwned + Send + Sync + 'static>(
        &self,
        n: usize,
    ) -> Result<Vec<Arc<ActionRecord<S>>>, StoreError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let p = self.log_path();
        let mut f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot open", &p)(e)),
        };
        let len = f.metadata().map_err(io_err("cannot stat", &p))?.len();
        let hint = self.tail_hint.load(std::sync::atomic::Ordering::Relaxed);
        let mut chunk = hint.max(16 * 1024);
        loop {
            let start = len.saturating_sub(chunk);
            f.seek(SeekFrom::Start(start))
                .map_err(io_err("cannot seek", &p))?;
            let mut buf = Vec::with_capacity((len - start) as usize);
            f.read_to_end(&mut buf).map_err(io_err("cannot read", &p))?;
            // Skip a partial first line unless we read from the file's start.
            let body_start = if start == 0 {
                0
            } else {
                memchr::memchr(b'\n', &buf).map_or(buf.len(), |i| i + 1)
            };
            let Some((lines, first)) = last_line_bytes(&buf[body_start..], n, start == 0) else {
                chunk *= 4;
                continue;
            };
            // Room for a step or two of growth before the next call must read again.
            let needed = buf.len() - body_start - first;
            let hint = (needed as u64).saturating_mul(5) / 4 + 4096;
            self.tail_hint
                .store(hint, std::sync::atomic::Ordering::Relaxed);
            // Each line parsed once across steps (the same bytes give the same record;
            // see `parsed.rs`).
            let total = lines.len();
            return lines
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    self.parsed.line(l, |l| {
                        serde_json::from_str(&String::from_utf8_lossy(l)).map_err(|e| {
                            StoreError::Corrupt {
                                path: p.display().to_string(),
                                message: format!("line {} from the end: {e}", total - i),
                            }
                        })
                    })
                })
                .collect();
        }
    }

    /// Brings the task folder to a consistent state after a crash and returns that state.
    ///
    /// - A final line without its newline, or one that does not parse, is torn: it is
    ///   saved to `actions.jsonl.torn-<unix-ms>`, cut from the log, and reported.
    /// - A corrupt line before the last is not repairable and is an error.
    /// - If the log holds steps `state.yaml` does not reflect, the state is taken from
    ///   the last record and `state.yaml` rewritten.
    pub fn recover(&self) -> Result<(TaskState, Recovery), StoreError> {
        let mut recovery = Recovery::default();
        let p = self.log_path();
        let bytes = match fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("cannot read", &p)(e)),
        };
        // Find the end of the last complete, parseable line.
        let mut good_len = bytes.len();
        if !bytes.is_empty() {
            let last_nl = bytes.iter().rposition(|&b| b == b'\n');
            let tail_start = last_nl.map(|i| i + 1).unwrap_or(0);
            if tail_start < bytes.len() {
                // Bytes after the last newline: a torn write.
                good_len = tail_start;
            } else {
                // Ends with a newline: the last line must parse.
                let prev_nl = bytes[..bytes.len() - 1]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map(|i| i + 1)
                    .unwrap_or(0);
                let last = &bytes[prev_nl..bytes.len() - 1];
                if serde_json::from_slice::<ActionRecord>(last).is_err() {
                    good_len = prev_nl;
                }
            }
        }
        if good_len < bytes.len() {
            let torn = &bytes[good_len..];
            let millis = chrono::Utc::now().timestamp_millis();
            let saved = self.dir.join(format!("{LOG_FILE}.torn-{millis}"));
            atomic_write(&saved, torn).map_err(io_err("cannot write", &saved))?;
            let f = OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(io_err("cannot open", &p))?;
            f.set_len(good_len as u64)
                .map_err(io_err("cannot truncate", &p))?;
            f.sync_all().map_err(io_err("cannot fsync", &p))?;
            recovery.torn_line_saved_to = Some(saved);
        }
        let text = String::from_utf8_lossy(&bytes[..good_len]);
        let last = last_record(&text, &p)?;
        // `state.yaml` is a cache of the last line: after a power loss it may be behind,
        // empty or unreadable. With a log to rebuild it from, none of these is an error.
        let mut state = match (self.load_state(), &last) {
            (Ok(state), _) => state,
            (Err(_), Some(last)) => {
                let mut lagging = last.state_after.clone();
                lagging.step = 0;
                lagging
            }
            (Err(e), None) => return Err(e),
        };
        if let Some(last) = &last {
            if last.step > state.step {
                state = last.state_after.clone();
                self.save_state(&state)?;
                recovery.state_rebuilt_from_step = Some(last.step);
            }
            // A memory stamped before the last logged step (or unreadable) lost a write
            // in a power cut: it may show a file as it was before an edit, so it goes.
            // One stamped 0 predates stamps (or any step) and is kept, as before.
            let memory = self.load_working_memory();
            let stale = match &memory {
                Ok(m) => m.step != 0 && m.step < last.step,
                Err(_) => true,
            };
            if stale {
                let max_items = memory.map_or(DEFAULT_MAX_ITEMS, |m| m.max_items);
                let mut cleared = WorkingMemory::with_capacity(max_items);
                cleared.step = last.step;
                self.save_working_memory(&cleared)?;
                recovery.working_memory_cleared = true;
            }
            if last.step < state.step {
                return Err(StoreError::Corrupt {
                    path: self.dir.join("state.yaml").display().to_string(),
                    message: format!(
                        "state.yaml says {} steps are done but {} records only {}; \
                         the state file was edited or the log truncated by hand",
                        state.step,
                        p.display(),
                        last.step
                    ),
                });
            }
        }
        if last.is_none() && state.step > 0 {
            return Err(StoreError::Corrupt {
                path: self.dir.join("state.yaml").display().to_string(),
                message: format!(
                    "state.yaml says {} steps are done but {} is empty",
                    state.step,
                    p.display()
                ),
            });
        }
        // A trajectory after the last recorded step belongs to a step that runs again.
        recovery.trajectories_removed = crate::trajectory::remove_after(
            &self.dir,
            state.step,
            crate::trajectory::intact_end(&self.dir, &text)?,
        )?;
        Ok((state, recovery))
    }

    /// Writes step `t.step`'s trajectory (see [`crate::trajectory`]): in place before
    /// the step's log line, flushed with it ([`TaskDir::append_action_after`]).
    pub fn write_trajectory(
        &self,
        t: &agentforge_core::trajectory::Trajectory,
    ) -> Result<crate::trajectory::Written, StoreError> {
        crate::trajectory::write(&self.dir, t)
    }

    /// Reads the trajectory a log record points to, checked against its hash.
    pub fn read_trajectory(
        &self,
        r: &agentforge_core::trajectory::TrajectoryRef,
    ) -> Result<agentforge_core::trajectory::Trajectory, StoreError> {
        crate::trajectory::read(&self.dir, r)
    }

    /// Writes a full tool output for `step` and returns its path relative to the task folder.
    pub fn write_output(&self, step: u64, name: &str, content: &str) -> Result<String, StoreError> {
        let rel = format!("artifacts/outputs/step-{step:04}-{name}.txt");
        let p = self.dir.join(&rel);
        atomic_write(&p, content.as_bytes()).map_err(io_err("cannot write", &p))?;
        Ok(rel)
    }

    /// Reads a file relative to the task folder.
    pub fn read_relative(&self, rel: &str) -> Result<String, StoreError> {
        let p = self.dir.join(rel);
        fs::read_to_string(&p).map_err(io_err("cannot read", &p))
    }
}

fn parse_log<S: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
) -> Result<Vec<ActionRecord<S>>, StoreError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| StoreError::Corrupt {
                path: path.display().to_string(),
                message: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

fn last_record(text: &str, path: &Path) -> Result<Option<ActionRecord>, StoreError> {
    match text.lines().rev().find(|l| !l.trim().is_empty()) {
        None => Ok(None),
        Some(l) => serde_json::from_str(l)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: path.display().to_string(),
                message: format!("last line: {e}"),
            }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentforge_core::model::Usage;
    use agentforge_core::state::*;

    use super::*;

    #[test]
    fn read_last_lines_reads_the_tail_of_a_long_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        assert!(read_last_lines(&p, 1).unwrap().is_empty());
        // Lines longer than the first read, so the tail must grow.
        let long = "x".repeat(100 * 1024);
        let text = format!("first\n{long}\nsecond-to-last {long}\nlast\n\n");
        std::fs::write(&p, &text).unwrap();
        assert_eq!(read_last_lines(&p, 1).unwrap(), ["last"]);
        let two = read_last_lines(&p, 2).unwrap();
        assert_eq!(two[1], "last");
        assert!(two[0].starts_with("second-to-last x"));
        assert_eq!(two[0].len(), "second-to-last ".len() + long.len());
        assert_eq!(read_last_lines(&p, 9).unwrap().len(), 4);
    }

    /// `last_lines` against `str::lines` on every tail of many small logs: blank lines,
    /// CRLF, a last line without its newline, invalid UTF-8, and bodies that start mid-way.
    #[test]
    fn last_lines_are_the_last_lines_str_lines_gives() {
        let texts: [&[u8]; 10] = [
            b"",
            b"\n",
            b"a\nb\nc\n",
            b"a\nb\nc",
            b"a\r\n\r\n  \nb\r\nc\r",
            b"\n\n\nx\n\n",
            b"one\xff\ntwo\n",
            b"{\"step\":1}\n{\"step\":2}\n{\"ste",
            b"a\n \t\nb\n\n\nc\nd\ne\n",
            // White space beyond ASCII (NBSP, vertical tab, U+2028) and a lone invalid byte.
            b"a\n\xc2\xa0\nb\n\x0b \n\xe2\x80\xa8\n\xff\n\t\xe3\x80\x80\n",
        ];
        for text in texts {
            let all: Vec<String> = String::from_utf8_lossy(text)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect();
            for n in 1..=all.len() + 1 {
                let (got, first) = last_lines(text, n, true).expect("whole text");
                let want = &all[all.len().saturating_sub(n)..];
                assert_eq!(got, want, "{text:?}, n = {n}");
                if let Some(l) = got.first() {
                    let tail = String::from_utf8_lossy(&text[first..]);
                    assert!(tail.starts_with(l.as_str()), "{text:?}: first at {first}");
                }
                // Not the whole file: fewer lines than asked for means read more.
                let partial = last_lines(text, n, false);
                assert_eq!(partial.is_some(), all.len() >= n, "{text:?}, n = {n}");
            }
        }
    }

    fn spec() -> TaskSpec {
        TaskSpec::parse(
            "id: t1\ntask_type: fix_violation\ngoal: fix it\n",
            "task.yaml",
        )
        .unwrap()
    }

    fn record(step: u64, state: &TaskState) -> ActionRecord {
        let mut after = state.clone();
        after.step = step;
        ActionRecord {
            step,
            phase: "implement".into(),
            action: "read_file".into(),
            target: Some("src/lib.rs".into()),
            parameters: serde_json::json!({"path": "src/lib.rs"}),
            result: ActionResult::Success,
            summary: "read".into(),
            error: None,
            duration_ms: 1,
            timestamp: "2026-01-01T00:00:00Z".into(),
            context_tokens: 100,
            usage: Usage::default(),
            cost_usd_micros: None,
            output_artifact: None,
            output_hash: None,
            output_len: None,
            loop_detection: None,
            file_hashes: BTreeMap::new(),
            trajectory: None,
            traces: Vec::new(),
            state_after: after,
        }
    }

    fn setup() -> (tempfile::TempDir, TaskDir, TaskState) {
        let tmp = tempfile::tempdir().unwrap();
        let store = TaskStore::new(tmp.path());
        let st = TaskState::initial(&spec(), "analyze", 10);
        let dir = store.create(&spec(), &st).unwrap();
        (tmp, dir, st)
    }

    #[test]
    fn create_twice_is_an_error() {
        let (tmp, _dir, st) = setup();
        let err = TaskStore::new(tmp.path()).create(&spec(), &st).unwrap_err();
        assert!(matches!(err, StoreError::Exists { .. }));
    }

    #[test]
    fn recent_actions_reads_the_tail() {
        let (_tmp, dir, mut st) = setup();
        for s in 1..=50 {
            st.verification.last_run_step = Some(s);
            st.verification.ready_for_completion = s % 2 == 0;
            dir.append_action(&record(s, &st)).unwrap();
        }
        let recent: Vec<Arc<ActionRecord>> = dir.recent_actions(3).unwrap();
        assert_eq!(
            recent.iter().map(|r| r.step).collect::<Vec<_>>(),
            [48, 49, 50]
        );
        assert_eq!(dir.read_actions().unwrap().len(), 50);
        // Read with only the verification of each state: the same records otherwise.
        let tail: Vec<Arc<agentforge_core::state::TailRecord>> = dir.recent_actions(3).unwrap();
        assert_eq!(tail.len(), 3);
        for (t, r) in tail.iter().zip(&recent) {
            assert_eq!(t.state_after.verification, r.state_after.verification);
            assert_eq!(t.state_after.verification.last_run_step, Some(t.step));
            assert_eq!(
                (t.step, &t.action, &t.summary, t.result, &t.file_hashes),
                (r.step, &r.action, &r.summary, r.result, &r.file_hashes)
            );
        }
    }

    /// The parsed copies are used only while the bytes on the disk are those parsed:
    /// a file changed behind the host's back (same length, even) is read as it is now.
    #[test]
    fn reads_see_files_changed_behind_the_host() {
        let (_tmp, dir, mut st) = setup();
        st.step = 11;
        dir.save_state(&st).unwrap();
        assert_eq!(dir.load_state().unwrap().step, 11);
        let path = dir.path().join("state.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        // Written as JSON (`yaml_json`); a person may edit it as either, and a state.yaml
        // from an earlier version is block YAML.
        std::fs::write(&path, text.replace("\"step\": 11", "\"step\": 12")).unwrap();
        assert_eq!(dir.load_state().unwrap().step, 12);
        let block = serde_yaml_ng::to_string(&TaskState {
            step: 13,
            ..st.clone()
        })
        .unwrap();
        assert!(block.contains("\nstep: 13\n"), "{block}");
        std::fs::write(&path, &block).unwrap();
        assert_eq!(
            dir.load_state().unwrap(),
            TaskState {
                step: 13,
                ..st.clone()
            }
        );

        let wm = WorkingMemory {
            step: 3,
            ..Default::default()
        };
        dir.save_working_memory(&wm).unwrap();
        assert_eq!(dir.load_working_memory().unwrap().step, 3);
        let path = dir.path().join(WORKING_MEMORY_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        // Written as JSON (`yaml_json`); a person may edit it as either.
        std::fs::write(&path, text.replace("\"step\": 3", "\"step\": 4")).unwrap();
        assert_eq!(dir.load_working_memory().unwrap().step, 4);
        std::fs::write(&path, "max_items: 20\nstep: 5\nitems: []\n").unwrap();
        assert_eq!(dir.load_working_memory().unwrap().step, 5);
        std::fs::write(&path, text.replace("\"step\": 3", "\"step\": 4")).unwrap();
        assert_eq!(dir.load_working_memory().unwrap().step, 4);

        for s in 1..=3 {
            dir.append_action(&record(s, &st)).unwrap();
        }
        let before: Vec<Arc<ActionRecord>> = dir.recent_actions(2).unwrap();
        assert_eq!(before[1].summary, record(3, &st).summary);
        let log = std::fs::read_to_string(dir.log_path()).unwrap();
        let old = &record(3, &st).summary;
        let new: String = old.chars().rev().collect();
        assert_eq!(old.len(), new.len());
        std::fs::write(dir.log_path(), log.replace(old.as_str(), &new)).unwrap();
        let after: Vec<Arc<ActionRecord>> = dir.recent_actions(2).unwrap();
        assert_eq!(after[1].summary, new);
    }

    #[test]
    fn torn_last_line_is_saved_and_cut() {
        let (_tmp, dir, st) = setup();
        dir.append_action(&record(1, &st)).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.log_path())
            .unwrap();
        f.write_all(b"{\"step\":2,\"pha").unwrap();
        let (state, rec) = dir.recover().unwrap();
        let saved = rec.torn_line_saved_to.expect("torn line reported");
        assert_eq!(fs::read_to_string(saved).unwrap(), "{\"step\":2,\"pha");
        assert_eq!(dir.read_actions().unwrap().len(), 1);
        // State lagged the log by one step: rebuilt from the record.
        assert_eq!(state.step, 1);
        assert_eq!(rec.state_rebuilt_from_step, Some(1));
        assert_eq!(dir.load_state().unwrap().step, 1);
    }

    #[test]
    fn unparseable_last_line_with_newline_is_torn_too() {
        let (_tmp, dir, st) = setup();
        dir.append_action(&record(1, &st)).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.log_path())
            .unwrap();
        f.write_all(b"{\"step\":2}\n").unwrap();
        let (_, rec) = dir.recover().unwrap();
        assert!(rec.torn_line_saved_to.is_some());
        assert_eq!(dir.read_actions().unwrap().len(), 1);
    }

    #[test]
    fn corrupt_middle_line_is_an_error_not_a_repair() {
        let (_tmp, dir, st) = setup();
        dir.append_action(&record(1, &st)).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.log_path())
            .unwrap();
        f.write_all(b"garbage\n").unwrap();
        dir.append_action(&record(2, &st)).unwrap();
        let err = dir.read_actions().unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn clean_log_needs_no_repair() {
        let (_tmp, dir, st) = setup();
        let r = record(1, &st);
        dir.append_action(&r).unwrap();
        dir.save_state(&r.state_after).unwrap();
        let (state, rec) = dir.recover().unwrap();
        assert!(!rec.repaired());
        assert_eq!(state, r.state_after);
    }

    #[test]
    fn atomic_rewrite_keeps_exact_contents_across_sizes() {
        // Both ways: exchanging names (where the system can) and links and renames.
        for (durability, may_exchange) in [
            (Durability::Synced, true),
            (Durability::Cache, true),
            (Durability::Synced, false),
            (Durability::Cache, false),
        ] {
            let case = format!("{durability:?}, exchange {may_exchange}");
            let rewrite = |p: &Path, b: &[u8]| rewrite_with(p, b, durability, may_exchange);
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join("f.yaml");
            let spare = tmp.path().join(".f.yaml.spare");
            // Longer and shorter than the version before and the one before that (the
            // spare holds the latter).
            let sizes = [10usize, 5000, 3, 0, 70_000, 12, 11, 13, 4999, 1, 1, 0, 0, 2];
            for (i, len) in sizes.into_iter().enumerate() {
                let content = vec![b'a' + i as u8; len];
                rewrite(&p, &content).unwrap();
                assert_eq!(fs::read(&p).unwrap(), content, "{case}, write {i}");
                // The version before is kept as the next call's spare.
                if i > 0 {
                    let before = vec![b'a' + i as u8 - 1; sizes[i - 1]];
                    assert_eq!(fs::read(&spare).unwrap(), before, "{case}, write {i}");
                }
            }
            // A leftover `.old` from a crash of the links' way: the write still lands,
            // and the links' way tidies it.
            fs::write(tmp.path().join(".f.yaml.old"), b"stale").unwrap();
            rewrite(&p, b"fresh").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"fresh");
            if !may_exchange {
                assert!(!tmp.path().join(".f.yaml.old").exists());
            }
            let _ = fs::remove_file(tmp.path().join(".f.yaml.old"));
            // A crash after the spare was renamed over the file, before `.old` became the
            // next spare: no spare, a `.old`.
            fs::rename(&spare, tmp.path().join(".f.yaml.old")).unwrap();
            rewrite(&p, b"after the crash").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"after the crash");
            assert!(!tmp.path().join(".f.yaml.old").exists(), "{case}");
            rewrite(&p, b"next").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"next");
            // The first write of a file leaves it and no spare.
            let q = tmp.path().join("new.yaml");
            rewrite(&q, b"first").unwrap();
            assert_eq!(fs::read(&q).unwrap(), b"first");
            assert!(!tmp.path().join(".new.yaml.spare").exists());
        }
    }

    #[test]
    fn unreadable_state_cache_is_rebuilt_from_the_log() {
        let (_tmp, dir, st) = setup();
        let rec = record(1, &st);
        dir.append_action(&rec).unwrap();
        // A power loss after the log's fsync: the cache written but never flushed.
        fs::write(dir.path().join("state.yaml"), "").unwrap();
        let (state, recovery) = dir.recover().unwrap();
        assert_eq!(state.step, 1);
        assert_eq!(recovery.state_rebuilt_from_step, Some(1));
        assert_eq!(dir.load_state().unwrap(), rec.state_after);
    }

    fn memory_at(step: u64) -> WorkingMemory {
        let mut memory = WorkingMemory::with_capacity(4);
        memory.step = step;
        memory
            .items
            .push(agentforge_core::working_memory::MemoryItem {
                kind: agentforge_core::working_memory::ItemKind::LoadedContext,
                key: "file:src/lib.rs".into(),
                step,
                content: "fn main() {}".into(),
                added_at: "2026-01-01T00:00:00Z".into(),
                expires_after_steps: None,
                pinned: false,
            });
        memory
    }

    #[test]
    fn memory_behind_the_log_is_cleared_not_shown_stale() {
        let (_tmp, dir, st) = setup();
        dir.save_working_memory_before_log(&memory_at(1)).unwrap();
        dir.append_action(&record(1, &st)).unwrap();
        // Step 2's memory write lost in a power cut; its line made it.
        dir.append_action(&record(2, &st)).unwrap();
        let (_, recovery) = dir.recover().unwrap();
        assert!(recovery.working_memory_cleared);
        let memory = dir.load_working_memory().unwrap();
        assert!(memory.items.is_empty());
        assert_eq!((memory.step, memory.max_items), (2, 4));
    }

    #[test]
    fn memory_of_the_last_step_or_of_an_unlogged_one_is_kept() {
        let (_tmp, dir, st) = setup();
        dir.save_working_memory_before_log(&memory_at(1)).unwrap();
        dir.append_action(&record(1, &st)).unwrap();
        dir.save_state_after_log(&record(1, &st).state_after)
            .unwrap();
        let (_, recovery) = dir.recover().unwrap();
        assert!(!recovery.repaired());
        assert_eq!(dir.load_working_memory().unwrap(), memory_at(1));
        // Killed after step 2's memory, before its line: the step reruns and replaces it.
        dir.save_working_memory_before_log(&memory_at(2)).unwrap();
        let (_, recovery) = dir.recover().unwrap();
        assert!(!recovery.working_memory_cleared);
        assert_eq!(dir.load_working_memory().unwrap(), memory_at(2));
    }

    #[test]
    fn unreadable_memory_is_cleared() {
        let (_tmp, dir, st) = setup();
        dir.append_action(&record(1, &st)).unwrap();
        fs::write(dir.path().join(WORKING_MEMORY_FILE), "items: [").unwrap();
        let (_, recovery) = dir.recover().unwrap();
        assert!(recovery.working_memory_cleared);
        assert!(dir.load_working_memory().unwrap().items.is_empty());
    }

    #[test]
    fn unreadable_state_without_a_log_is_an_error() {
        let (_tmp, dir, _st) = setup();
        fs::write(dir.path().join("state.yaml"), "step: [").unwrap();
        let err = dir.recover().unwrap_err();
        assert!(err.to_string().contains("state.yaml"), "{err}");
    }

    #[test]
    fn state_ahead_of_log_is_reported() {
        let (_tmp, dir, st) = setup();
        let mut ahead = st.clone();
        ahead.step = 3;
        dir.save_state(&ahead).unwrap();
        assert!(matches!(dir.recover(), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid() {
        let (_tmp, dir, _st) = setup();
        let held = dir.lock().unwrap();
        let text = fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
        // flock locks belong to the open file description: a second open in this
        // process conflicts as another process's would.
        let err = TaskDir::at(dir.path().to_path_buf()).lock().unwrap_err();
        assert!(
            matches!(err, StoreError::Busy { pid: Some(p), .. } if p == std::process::id()),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "task `t1` is being run by pid {}",
                std::process::id()
            )),
            "{err}"
        );
        drop(held);
        let again = dir.lock();
        assert!(again.is_ok(), "{again:?}");
    }

    #[test]
    fn write_probes_are_unique_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let ws = tmp.path().to_path_buf();
                std::thread::spawn(move || (0..50).try_for_each(|_| probe_writable(&ws)))
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let left: Vec<_> = fs::read_dir(tmp.path().join(".agentforge"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn bounded_arguments_keep_size_hash_head_and_tail() {
        let big = format!("HEAD{}TAIL", "x".repeat(100_000));
        let v = serde_json::json!({"path": "a.rs", "content": big});
        let b = bound_parameters(&v);
        let content = b["content"].as_str().unwrap();
        assert!(
            content.chars().count() < MAX_LOGGED_STRING_CHARS + 200,
            "{}",
            content.len()
        );
        assert!(content.starts_with("HEAD") && content.ends_with("TAIL"));
        assert!(content.contains("100008 bytes, sha256:"), "{content}");
        assert_eq!(b["path"], "a.rs");
        // Same text, same record; different text, different record.
        assert_eq!(bound_parameters(&v), b);
        let other = serde_json::json!({"path": "a.rs", "content": big.replace("HEADx", "HEADy")});
        assert_ne!(bound_parameters(&other), b);
        // Small arguments are kept as they are.
        let small = serde_json::json!({"path": "a.rs", "n": 3});
        assert_eq!(bound_parameters(&small), small);
        // Many strings: the whole value gives way to its size and hash.
        let many: Vec<String> = (0..2_000)
            .map(|i| format!("item {i} {}", "y".repeat(50)))
            .collect();
        let b = bound_parameters(&serde_json::json!({"items": many}));
        assert!(
            b.to_string().len() <= MAX_LOGGED_PARAMETERS_BYTES,
            "{}",
            b.to_string().len()
        );
        assert!(b["not_logged"]["sha256"].as_str().unwrap().len() == 64);
    }

    #[test]
    fn a_record_with_bounded_fields_rebuilds_the_state() {
        let (_tmp, dir, st) = setup();
        let mut r = record(1, &st);
        r.parameters = bound_parameters(&serde_json::json!({"content": "z".repeat(200_000)}));
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.len() < 32 * 1024, "{}", line.len());
        dir.append_action(&r).unwrap();
        // state.yaml lags the log: the bounded record is what the state comes from.
        let (state, rec) = dir.recover().unwrap();
        assert_eq!(rec.state_rebuilt_from_step, Some(1));
        assert_eq!(state, r.state_after);
        assert_eq!(dir.read_actions().unwrap()[0].parameters, r.parameters);
    }

    #[test]
    fn the_recorded_provider_round_trips_without_a_key() {
        let (_tmp, dir, _) = setup();
        assert_eq!(dir.load_provider().unwrap(), None);
        let p = RecordedProvider {
            kind: agentforge_core::model::ProviderKind::Openai,
            model: "qwen".into(),
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            api_key_env: Some("MY_KEY".into()),
            replay: None,
        };
        dir.save_provider(&p).unwrap();
        assert_eq!(dir.load_provider().unwrap(), Some(p));
        fs::write(dir.path().join(PROVIDER_FILE), "kind: nope\n").unwrap();
        let err = dir.load_provider().unwrap_err().to_string();
        assert!(err.contains(PROVIDER_FILE), "{err}");
    }
}
