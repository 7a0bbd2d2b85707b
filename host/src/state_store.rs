//! Crash-safe task state on disk.
//!
//! Layout per task, under `<workspace>/.agentforge/tasks/<task-id>/`:
//!
//! ```text
//! task.yaml            immutable spec
//! state.yaml           checkpoint of the mutable state (atomic rewrite)
//! actions.jsonl        append-only audit log, one line per executed step (fsynced)
//! working_memory.yaml  rolling buffer of loaded context (atomic rewrite)
//! provider.yaml        the provider and model the task last ran with (never a key)
//! artifacts/{inputs,outputs,snapshots}/
//! ```
//!
//! The log is the source of truth: a step counts as done once its line is on disk.
//! Every line carries the state after that step, so a crash between the log append
//! and the `state.yaml` rewrite is repaired on the next open by taking the state from
//! the last line. A torn last line (the process died mid-write) is detected, moved to
//! a `actions.jsonl.torn-*` file for the post-mortem, and cut from the log: that step
//! was never recorded as done, so it runs again.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::providers::Usage;
use crate::task::TaskSpec;
use crate::working_memory::WorkingMemory;

/// Overall status of a task.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Steps remain to be run.
    #[default]
    Running,
    /// The agent completed with verification passing.
    Complete,
    /// The agent (or the host) asked for a human.
    Escalated,
    /// The task cannot be done (`cannot_fix`) or the host failed it.
    Failed,
    /// The step budget ran out.
    BudgetExhausted,
}

impl TaskStatus {
    /// Whether no more steps will run.
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Running
    }
}

/// Outcome of one executed action.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ActionResult {
    /// Did what was asked.
    Success,
    /// Did not do what was asked.
    Failure,
    /// Did part of it (e.g. some checks pass).
    Partial,
    /// Not run (refused by a guard, blocked).
    Skipped,
}

impl std::fmt::Display for ActionResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ActionResult::Success => "success",
            ActionResult::Failure => "failure",
            ActionResult::Partial => "partial",
            ActionResult::Skipped => "skipped",
        })
    }
}

/// Latest result of one verification command.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckStatus {
    /// Whether the command passed.
    pub passing: bool,
    /// One-line summary (e.g. `3 passed, 1 failed`).
    pub summary: String,
    /// Whether this is a test suite (`run_tests`) rather than a check.
    #[serde(default)]
    pub is_test: bool,
    /// Step at which it ran.
    pub step: u64,
}

/// Verification status of a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    /// Per check name, its latest result.
    #[serde(default)]
    pub checks: BTreeMap<String, CheckStatus>,
    /// All checks have run since the last change and pass.
    #[serde(default)]
    pub ready_for_completion: bool,
    /// Step of the last verification run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_step: Option<u64>,
}

impl Verification {
    /// Number of passing checks.
    pub fn passing(&self) -> usize {
        self.checks.values().filter(|c| c.passing).count()
    }
    /// Number of failing checks.
    pub fn failing(&self) -> usize {
        self.checks.values().filter(|c| !c.passing).count()
    }
    /// Whether all test suites pass; `None` when none has run.
    pub fn tests_passing(&self) -> Option<bool> {
        let mut tests = self.checks.values().filter(|c| c.is_test).peekable();
        tests.peek()?;
        Some(tests.all(|c| c.passing))
    }
}

/// Category of a fact (seed 000 §4.1).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FactCategory {
    /// Code structure: files, functions, modifications.
    CodeStructure,
    /// Something inferred rather than observed.
    Inference,
    /// A recurring pattern.
    Pattern,
    /// Verification outcomes (test counts, check results).
    Verification,
    /// Errors seen.
    Error,
}

/// A conclusion drawn from tool output, shown instead of the raw output.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact {
    /// Stable id (`f<step>-<n>`).
    pub id: String,
    /// Category used to group facts in the context.
    pub category: FactCategory,
    /// One sentence.
    pub statement: String,
    /// 0.0 to 1.0.
    pub confidence: f32,
    /// Where it came from (tool or extractor name).
    pub source: String,
    /// Step that produced it.
    pub step: u64,
    /// Id of the fact this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// An action the host refuses to run again, with why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BlockedAction {
    /// Action signature (`name:target`).
    pub signature: String,
    /// Explanation shown to the model.
    pub reason: String,
    /// Step at which it was blocked.
    pub since_step: u64,
}

/// Token accounting for a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TokenTotals {
    /// Sum of prompt tokens counted by the host.
    pub context_tokens: u64,
    /// Largest prompt counted by the host.
    pub max_context_tokens: u64,
    /// Sum of input tokens reported by the provider.
    pub input_tokens: u64,
    /// Sum of output tokens reported by the provider.
    pub output_tokens: u64,
}

/// The mutable state of a task (`state.yaml`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskState {
    /// The task's id.
    pub task_id: String,
    /// The task type (context schema).
    pub task_type: String,
    /// Current phase.
    pub phase: String,
    /// Steps taken in the current phase.
    #[serde(default)]
    pub phase_steps: u64,
    /// Number of steps recorded as done.
    pub step: u64,
    /// Step budget (the base, plus any extension the adaptive budget granted).
    pub max_steps: u64,
    /// The base budget and where it came from (`--max-steps`, the task file, the
    /// config); absent in states written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_limit: Option<crate::budget::StepLimit>,
    /// Overall status.
    pub status: TaskStatus,
    /// Why the status is what it is (escalation reason, failure...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// Verification status.
    #[serde(default)]
    pub verification: Verification,
    /// Facts extracted from tool output.
    #[serde(default)]
    pub facts: Vec<Fact>,
    /// Pointer to the working memory file, relative to the task folder.
    pub working_memory: String,
    /// Actions refused until further notice.
    #[serde(default)]
    pub blocked_actions: Vec<BlockedAction>,
    /// Workspace-relative files the agent changed.
    #[serde(default)]
    pub files_modified: Vec<String>,
    /// Token totals.
    #[serde(default)]
    pub tokens: TokenTotals,
    /// Invalid model replies in a row (no tool call, unknown tool, bad arguments).
    #[serde(default)]
    pub consecutive_invalid: u32,
    /// Last step that changed workspace files (checks older than this are stale).
    #[serde(default)]
    pub last_change_step: u64,
    /// Phase changes so far (the phase machine's history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_history: Vec<crate::phases::PhaseChange>,
    /// The plan: goal -> task -> subtask, with the current branch.
    #[serde(default)]
    pub focus: crate::focus::FocusTree,
    /// Loops detected so far (repeated detections escalate).
    #[serde(default)]
    pub loop_detections: u32,
    /// The latest loop warning, shown in the context for a few steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_warning: Option<LoopWarning>,
    /// What the next context must tell the model about the previous step
    /// (a refused `complete`, an invalid reply, an auto-revert).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

impl TaskState {
    /// The state of a task that has not run yet.
    pub fn initial(spec: &TaskSpec, phase: &str, max_steps: u64) -> TaskState {
        TaskState {
            task_id: spec.id.clone(),
            task_type: spec.task_type.clone(),
            phase: phase.to_string(),
            phase_steps: 0,
            step: 0,
            max_steps,
            step_limit: None,
            status: TaskStatus::Running,
            status_reason: None,
            verification: Verification::default(),
            facts: Vec::new(),
            working_memory: WORKING_MEMORY_FILE.to_string(),
            blocked_actions: Vec::new(),
            files_modified: Vec::new(),
            tokens: TokenTotals::default(),
            consecutive_invalid: 0,
            last_change_step: 0,
            phase_history: Vec::new(),
            focus: crate::focus::FocusTree::new(&spec.goal),
            loop_detections: 0,
            loop_warning: None,
            feedback: None,
        }
    }
}

/// A loop warning carried in the state so the next contexts show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoopWarning {
    /// Step at which the loop was detected.
    pub step: u64,
    /// Loop type (`identical_action`, `alternation`...).
    pub loop_type: String,
    /// What was seen.
    pub description: String,
    /// How to break it.
    pub suggestions: Vec<String>,
    /// The steps that make the loop.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Detector confidence, 0.0 to 1.0.
    #[serde(default)]
    pub confidence: f32,
    /// Signature of the action blocked because of it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

/// One line of `actions.jsonl`: an executed step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ActionRecord {
    /// Step number (1-based).
    pub step: u64,
    /// Phase the step ran in.
    pub phase: String,
    /// Action name as the model gave it (or `invalid_reply`).
    pub action: String,
    /// Main target (file path, check name...).
    #[serde(default)]
    pub target: Option<String>,
    /// Arguments as the model gave them.
    #[serde(default)]
    pub parameters: serde_json::Value,
    /// Outcome.
    pub result: ActionResult,
    /// One-line summary.
    pub summary: String,
    /// Error text, cut to a bounded length.
    #[serde(default)]
    pub error: Option<String>,
    /// Wall time of the action (model call excluded).
    pub duration_ms: u64,
    /// RFC 3339 time the step finished.
    pub timestamp: String,
    /// Prompt tokens counted by the host (system + user + tools).
    pub context_tokens: u64,
    /// Usage reported by the provider.
    #[serde(default)]
    pub usage: Usage,
    /// Workspace-relative path of the full tool output, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_artifact: Option<String>,
    /// A loop detected at this step, with its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_detection: Option<LoopWarning>,
    /// Content hash of each file this step changed, after the change (for oscillation detection).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub file_hashes: BTreeMap<String, String>,
    /// The state after this step: what `state.yaml` is rebuilt from after a crash.
    pub state_after: TaskState,
}

/// The provider a task last ran with, kept in `provider.yaml` so `resume` talks to
/// the same model without repeating the flags. Holds where to find the key (the
/// variable's name), never the key.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RecordedProvider {
    /// `anthropic`, `openai` or `replay`.
    pub kind: crate::providers::ProviderKind,
    /// The model name sent.
    pub model: String,
    /// The base URL given explicitly (config or `*_BASE_URL`); absent: the public one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the variable holding the key, when not the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The recorded session of the replay provider (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
}

/// Longest string kept whole in a log record (arguments, targets, reasons); longer
/// ones keep their head and tail around a marker with their size and SHA-256.
pub const MAX_LOGGED_STRING_CHARS: usize = 2_000;
/// Largest `parameters` value kept in a record (its JSON); a larger one, even after
/// its strings are bounded, is replaced by its size, SHA-256 and JSON head.
pub const MAX_LOGGED_PARAMETERS_BYTES: usize = 16 * 1024;

/// `text` if it has at most `max` characters; else its first `max / 2` and last
/// `max / 4` characters around `…[N bytes, sha256:HEX; middle not logged]…`. The same
/// text always gives the same result, and different texts (almost surely) different
/// ones, so comparisons of logged arguments (loop detection) still hold.
pub fn bound_text(text: &str, max: usize) -> String {
    let chars = text.chars().count();
    if chars <= max {
        return text.to_string();
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text.chars().skip(chars - max / 4).collect();
    format!(
        "{head}…[{} bytes, sha256:{hex}; middle not logged]…{tail}",
        text.len()
    )
}

/// The model's arguments as a log record keeps them: every string bounded by
/// [`bound_text`] with [`MAX_LOGGED_STRING_CHARS`]; if the JSON is still larger than
/// [`MAX_LOGGED_PARAMETERS_BYTES`] (many strings, huge keys), an object
/// `{"not_logged": {"bytes", "sha256", "head"}}` stands for it. The action itself runs
/// with the whole arguments; only the record is bounded.
pub fn bound_parameters(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    fn walk(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(bound_text(s, MAX_LOGGED_STRING_CHARS)),
            Value::Array(a) => Value::Array(a.iter().map(walk).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, x)| (k.clone(), walk(x))).collect())
            }
            other => other.clone(),
        }
    }
    let bounded = walk(v);
    let json = bounded.to_string();
    if json.len() <= MAX_LOGGED_PARAMETERS_BYTES {
        return bounded;
    }
    use sha2::Digest as _;
    let full = v.to_string();
    let digest = sha2::Sha256::digest(full.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({"not_logged": {
        "bytes": full.len(),
        "sha256": hex,
        "head": json.chars().take(MAX_LOGGED_STRING_CHARS).collect::<String>(),
    }})
}

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
    #[error("task `{id}` is being run by {}; wait for it to finish or stop it (Ctrl-C, or `kill -INT <pid>`), then resume", holder(.pid))]
    Busy {
        /// The task's id.
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
pub const WORKING_MEMORY_FILE: &str = "working_memory.yaml";
const LOG_FILE: &str = "actions.jsonl";
/// File name of the recorded provider inside a task folder.
pub const PROVIDER_FILE: &str = "provider.yaml";

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
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Atomically replaces a file that is rewritten every step, without freeing disk blocks.
///
/// Same guarantee as [`atomic_write`] (the name always holds a complete old or new
/// version, durable once this returns) but it recycles two inodes instead of creating
/// and deleting one per call: on file systems mounted with `discard` (common on VMs and
/// SSDs) freeing blocks costs about a millisecond, which would dominate a step.
///
/// 1. write the new bytes into the spare file `.<name>.spare` in place, fsync;
/// 2. hard-link the current file as `.<name>.old` (its inode keeps a name);
/// 3. rename the spare over the file (atomic; the old inode is not freed);
/// 4. rename `.<name>.old` to `.<name>.spare` for the next call.
///
/// A crash between any two steps leaves the file complete; leftovers are tidied on the
/// next call.
pub fn atomic_rewrite(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let spare = dir.join(format!(".{name}.spare"));
    let old = dir.join(format!(".{name}.old"));
    if !path.exists() {
        return atomic_write(path, bytes);
    }
    if old.exists() {
        // Left by a crash between steps 2 and 4: the spare may be gone, so start clean.
        fs::remove_file(&old)?;
    }
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&spare)?;
        f.write_all(bytes)?;
        f.set_len(bytes.len() as u64)?;
        f.sync_all()?;
    }
    if fs::hard_link(path, &old).is_ok() {
        fs::rename(&spare, path)?;
        fs::rename(&old, &spare)?;
    } else {
        // No hard links here (some network file systems): plain replace.
        fs::rename(&spare, path)?;
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
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
        let task_dir = TaskDir { dir };
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
        Ok(TaskDir { dir })
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
}

impl Recovery {
    /// Whether anything was repaired.
    pub fn repaired(&self) -> bool {
        self.torn_line_saved_to.is_some() || self.state_rebuilt_from_step.is_some()
    }
}

/// One task's folder.
#[derive(Debug, Clone)]
pub struct TaskDir {
    dir: PathBuf,
}

impl TaskDir {
    /// Opens a task folder directly (as `inspect` does with a path).
    pub fn at(dir: PathBuf) -> TaskDir {
        TaskDir { dir }
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
        let p = self.dir.join(LOCK_FILE);
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
                    id: self.task_id(),
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

    /// The task's id: the folder's name.
    fn task_id(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Reads the immutable spec.
    pub fn spec(&self) -> Result<TaskSpec, StoreError> {
        let p = self.dir.join("task.yaml");
        TaskSpec::load(&p).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads `state.yaml` as it is (see [`TaskDir::recover`] for the consistent state).
    pub fn load_state(&self) -> Result<TaskState, StoreError> {
        let p = self.dir.join("state.yaml");
        let text = fs::read_to_string(&p).map_err(io_err("cannot read", &p))?;
        serde_yaml_ng::from_str(&text).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Atomically rewrites `state.yaml`.
    pub fn save_state(&self, state: &TaskState) -> Result<(), StoreError> {
        let p = self.dir.join("state.yaml");
        let yaml = serde_yaml_ng::to_string(state).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        atomic_rewrite(&p, yaml.as_bytes()).map_err(io_err("cannot write", &p))
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
        match fs::read_to_string(&p) {
            Ok(text) => serde_yaml_ng::from_str(&text).map_err(|e| StoreError::Corrupt {
                path: p.display().to_string(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(WorkingMemory::default()),
            Err(e) => Err(io_err("cannot read", &p)(e)),
        }
    }

    /// Atomically rewrites the working memory.
    pub fn save_working_memory(&self, wm: &WorkingMemory) -> Result<(), StoreError> {
        let p = self.dir.join(WORKING_MEMORY_FILE);
        let yaml = serde_yaml_ng::to_string(wm).expect("working memory serializes");
        atomic_rewrite(&p, yaml.as_bytes()).map_err(io_err("cannot write", &p))
    }

    /// Appends one record to the log and fsyncs it. The step is done once this returns.
    pub fn append_action(&self, record: &ActionRecord) -> Result<(), StoreError> {
        let p = self.log_path();
        let mut line = serde_json::to_string(record).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        line.push('\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(io_err("cannot open", &p))?;
        if crate::fault::armed("torn_log", record.step) {
            let half = &line.as_bytes()[..line.len() / 2];
            let _ = f.write_all(half);
            let _ = f.sync_all();
            crate::fault::point("torn_log", record.step);
        }
        // One write call for the whole line keeps tearing to the last line only.
        f.write_all(line.as_bytes())
            .map_err(io_err("cannot append to", &p))?;
        f.sync_all().map_err(io_err("cannot fsync", &p))?;
        Ok(())
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
    /// does not grow with the log's length.
    pub fn recent_actions(&self, n: usize) -> Result<Vec<ActionRecord>, StoreError> {
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
        let mut chunk = 16 * 1024u64;
        loop {
            let start = len.saturating_sub(chunk);
            f.seek(SeekFrom::Start(start))
                .map_err(io_err("cannot seek", &p))?;
            let mut buf = Vec::with_capacity((len - start) as usize);
            f.read_to_end(&mut buf).map_err(io_err("cannot read", &p))?;
            let text = String::from_utf8_lossy(&buf);
            // Skip a partial first line unless we read from the file's start.
            let body = if start == 0 {
                &text[..]
            } else {
                match text.find('\n') {
                    Some(i) => &text[i + 1..],
                    None => "",
                }
            };
            let complete_lines = body.lines().filter(|l| !l.trim().is_empty()).count();
            if complete_lines >= n || start == 0 {
                let records = parse_log(body, &p)?;
                let skip = records.len().saturating_sub(n);
                return Ok(records.into_iter().skip(skip).collect());
            }
            chunk *= 4;
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
        let mut state = self.load_state()?;
        if let Some(last) = last {
            if last.step > state.step {
                state = last.state_after.clone();
                self.save_state(&state)?;
                recovery.state_rebuilt_from_step = Some(last.step);
            } else if last.step < state.step {
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
        } else if state.step > 0 {
            return Err(StoreError::Corrupt {
                path: self.dir.join("state.yaml").display().to_string(),
                message: format!(
                    "state.yaml says {} steps are done but {} is empty",
                    state.step,
                    p.display()
                ),
            });
        }
        Ok((state, recovery))
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

fn parse_log(text: &str, path: &Path) -> Result<Vec<ActionRecord>, StoreError> {
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
    use super::*;

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
            output_artifact: None,
            loop_detection: None,
            file_hashes: BTreeMap::new(),
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
        let (_tmp, dir, st) = setup();
        for s in 1..=50 {
            dir.append_action(&record(s, &st)).unwrap();
        }
        let recent = dir.recent_actions(3).unwrap();
        assert_eq!(
            recent.iter().map(|r| r.step).collect::<Vec<_>>(),
            [48, 49, 50]
        );
        assert_eq!(dir.read_actions().unwrap().len(), 50);
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
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f.yaml");
        for (i, len) in [10usize, 5000, 3, 0, 70_000, 12].into_iter().enumerate() {
            let content = vec![b'a' + i as u8; len];
            atomic_rewrite(&p, &content).unwrap();
            assert_eq!(fs::read(&p).unwrap(), content);
        }
        // A leftover `.old` from a crash is tidied and the write still lands.
        fs::write(tmp.path().join(".f.yaml.old"), b"stale").unwrap();
        atomic_rewrite(&p, b"fresh").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"fresh");
        assert!(!tmp.path().join(".f.yaml.old").exists());
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
            kind: crate::providers::ProviderKind::Openai,
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
