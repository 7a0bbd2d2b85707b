//! A task's git history (`[git] enabled`, on by default where the workspace is the top
//! of a repository): the task works on its own branch `agentforge/<task>`, every
//! recorded step that changed files is one commit whose message names the step (and
//! what verification said after it), nothing is ever pushed. `agentforge diff <task>`
//! shows the branch's changes; `agentforge undo <task> [--to-step N]` puts the files
//! back as they were after step N and rewinds the task's log and state with them, so
//! `resume` continues from there.
//!
//! The record of it is `git.json` in the task folder ([`TaskGit`]). An undo is two
//! changes (the files, the task's log and state) that a kill could separate: it is
//! written into the record first and finished by the next command that opens the task
//! ([`finish_pending_undo`]).

use std::path::Path;

use agentforge_core::state::{ActionRecord, TaskState};
use agentforge_store::state_store::{atomic_write, StoreError, TaskDir};
use serde::{Deserialize, Serialize};

use crate::git::{Git, GitError};

/// The record's file name in the task folder.
pub const GIT_FILE: &str = "git.json";

/// The trailer of a step's commit that names the step.
const STEP_TRAILER: &str = "AgentForge-Step: ";

/// `[git]` in `agentforge.toml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GitConfig {
    /// A task in a workspace that is the top of a git repository works on its own
    /// branch with one commit per changing step (default `true`).
    pub enabled: bool,
}

impl Default for GitConfig {
    fn default() -> Self {
        GitConfig { enabled: true }
    }
}

/// A task's git record (`git.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskGit {
    /// The task's branch.
    pub branch: String,
    /// The commit the branch started from (full hash).
    pub base: String,
    /// The branch checked out when the task started (`HEAD` if detached).
    pub started_from: String,
    /// The step the history starts after (0, unless git came on for a task that had
    /// already run): nothing before it can be undone.
    pub from_step: u64,
    /// The task's state at `from_step`, for an undo back to it.
    pub state_at_start: TaskState,
    /// Untracked files there when the task started: the task's commits leave them out
    /// and an undo leaves them in place (they are the person's, not the task's).
    pub untracked_at_start: Vec<String>,
    /// The message of the stash made of the person's changes at the start (`--stash`).
    pub stash: Option<String>,
    /// An undo being carried out: finished by the next command that opens the task.
    pub pending_undo: Option<PendingUndo>,
}

/// An undo written down before it is carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingUndo {
    /// The last step kept.
    pub to_step: u64,
    /// The commit the files go back to.
    pub commit: String,
}

/// Why a task's git history could not be started, kept or changed.
#[derive(Debug, thiserror::Error)]
pub enum TaskGitError {
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The task folder.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Tracked files have changes the task would mix with its own.
    #[error(
        "the workspace {root} has uncommitted changes to tracked files ({}); commit or stash them first, \
         or run again with --stash to have them stashed (`git stash push`), \
         or set `[git] enabled = false` in agentforge.toml to run without git",
        .changes.join(", ")
    )]
    Dirty {
        /// The repository.
        root: String,
        /// `git status --porcelain` lines (the first few).
        changes: Vec<String>,
    },
    /// The repository has no commit to branch from.
    #[error("the repository {root} has no commit yet: make a first commit, or set `[git] enabled = false` in agentforge.toml")]
    NoCommit {
        /// The repository.
        root: String,
    },
    /// The task's branch exists, made by something else.
    #[error("branch `{branch}` already exists and task `{task}` has no record of it; delete the branch (`git branch -D {branch}`) or give the task another id")]
    BranchExists {
        /// The task.
        task: String,
        /// The branch.
        branch: String,
    },
    /// Another branch is checked out, with changes, while the task's branch is needed.
    #[error("task `{task}` works on branch `{branch}`, but `{current}` is checked out with uncommitted changes; commit or stash them, then `git switch {branch}`")]
    OtherBranch {
        /// The task.
        task: String,
        /// Its branch.
        branch: String,
        /// The branch checked out.
        current: String,
    },
    /// The task ran without git.
    #[error("task `{task}` has no git history ({path} is missing): it ran where the workspace is not the top of a git repository, or with `[git] enabled = false`")]
    NoHistory {
        /// The task.
        task: String,
        /// The record's path.
        path: String,
    },
    /// An undo target outside the history.
    #[error("{0}")]
    Range(String),
}

fn branch_of(task: &str) -> String {
    format!("agentforge/{task}")
}

fn load(dir: &TaskDir) -> Result<Option<TaskGit>, TaskGitError> {
    let p = dir.path().join(GIT_FILE);
    match std::fs::read_to_string(&p) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            StoreError::Corrupt {
                path: p.display().to_string(),
                message: e.to_string(),
            }
            .into()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io {
            op: "cannot read",
            path: p.display().to_string(),
            source,
        }
        .into()),
    }
}

fn save(dir: &TaskDir, rec: &TaskGit) -> Result<(), TaskGitError> {
    let p = dir.path().join(GIT_FILE);
    let bytes = serde_json::to_vec_pretty(rec).map_err(|e| StoreError::Corrupt {
        path: p.display().to_string(),
        message: e.to_string(),
    })?;
    atomic_write(&p, &bytes).map_err(|source| StoreError::Io {
        op: "cannot write",
        path: p.display().to_string(),
        source,
    })?;
    Ok(())
}

/// Finishes an undo a kill interrupted (files, then the task's log and state), and a
/// rewind of the log left half done. Run before the task's recovery, with its lock.
/// Nothing to do (and no git command run) for a task without a pending undo.
pub fn finish_pending_undo(workspace: &Path, dir: &TaskDir) -> Result<(), TaskGitError> {
    if let Some(rec) = load(dir)? {
        if rec.pending_undo.is_some() {
            if let Some(git) = Git::detect(workspace) {
                carry_out(&git, dir, rec)?;
            }
        }
    }
    dir.finish_rewind()?;
    Ok(())
}

fn carry_out(git: &Git, dir: &TaskDir, mut rec: TaskGit) -> Result<u64, TaskGitError> {
    let Some(undo) = rec.pending_undo.clone() else {
        return Ok(dir.load_state()?.step);
    };
    git.reset_to(&undo.commit, &rec.untracked_at_start)?;
    agentforge_core::fault::point("undo_files", undo.to_step);
    let initial = (undo.to_step == rec.from_step).then_some(&rec.state_at_start);
    let rewound = dir.rewind(undo.to_step, initial)?;
    rec.pending_undo = None;
    save(dir, &rec)?;
    Ok(rewound.to_step)
}

/// Makes git ignore `.agentforge/` (a `.gitignore` of `*` inside it), so the task
/// folders never show as untracked in the person's `git status`; the project's own
/// `.gitignore` is left alone.
fn ignore_state_folder(workspace: &Path) -> Result<(), TaskGitError> {
    let p = workspace.join(".agentforge/.gitignore");
    if p.exists() {
        return Ok(());
    }
    atomic_write(&p, b"# AgentForge's task state: never committed.\n*\n").map_err(|source| {
        StoreError::Io {
            op: "cannot write",
            path: p.display().to_string(),
            source,
        }
        .into()
    })
}

/// Refuses a workspace (the top of a repository) with uncommitted changes to tracked
/// files, as a new task's [`TaskRepo::start`] would; anywhere else, nothing to check.
pub fn check_clean(workspace: &Path) -> Result<(), TaskGitError> {
    let Some(git) = Git::detect(workspace) else {
        return Ok(());
    };
    let changes = git.tracked_changes()?;
    if changes.is_empty() {
        return Ok(());
    }
    Err(TaskGitError::Dirty {
        root: workspace.display().to_string(),
        changes: changes.into_iter().take(8).collect(),
    })
}

/// A task's repository while it runs.
pub struct TaskRepo {
    git: Git,
    dir: TaskDir,
    rec: TaskGit,
}

/// What [`TaskRepo::start`] did, for the person.
#[derive(Debug, Clone, PartialEq)]
pub enum Started {
    /// A new branch from `base`.
    Branched {
        /// The branch.
        branch: String,
        /// Where it starts.
        base: String,
        /// The stash made of the person's changes, if asked.
        stash: Option<String>,
    },
    /// The task's branch, again (`committed`: changes a kill left uncommitted).
    Resumed {
        /// The branch.
        branch: String,
        /// The commit of changes found uncommitted, if any.
        committed: Option<String>,
    },
}

impl TaskRepo {
    /// Starts (or resumes) the task's history: `None` where the workspace is not the top
    /// of a repository. A fresh start refuses uncommitted changes to tracked files
    /// unless `stash`; `state` is the task's state after its recovery.
    pub fn start(
        workspace: &Path,
        dir: &TaskDir,
        state: &TaskState,
        stash: bool,
    ) -> Result<Option<(TaskRepo, Started)>, TaskGitError> {
        let Some(git) = Git::detect(workspace) else {
            return Ok(None);
        };
        if let Some(rec) = load(dir)? {
            let current = git.current_branch()?;
            if current != rec.branch {
                if !git.tracked_changes()?.is_empty() {
                    return Err(TaskGitError::OtherBranch {
                        task: state.task_id.clone(),
                        branch: rec.branch.clone(),
                        current,
                    });
                }
                git.ensure_branch(&rec.branch)?;
            }
            let repo = TaskRepo {
                git,
                dir: dir.clone(),
                rec,
            };
            // Changes of a step recorded just before a kill, not committed yet.
            let committed = repo.commit(
                state.step,
                &format!(
                    "agentforge({}): step {} (changes found uncommitted at resume)",
                    state.task_id, state.step
                ),
                &state.files_modified,
            )?;
            let branch = repo.rec.branch.clone();
            return Ok(Some((repo, Started::Resumed { branch, committed })));
        }
        let root = workspace.display().to_string();
        let base = git
            .head()
            .ok_or(TaskGitError::NoCommit { root: root.clone() })?;
        let mut stashed = None;
        if !git.tracked_changes()?.is_empty() {
            if !stash {
                check_clean(workspace)?;
            }
            let message = format!("agentforge: before task {}", state.task_id);
            git.stash(&message)?;
            stashed = Some(message);
        }
        let branch = branch_of(&state.task_id);
        if git.branch_exists(&branch) {
            return Err(TaskGitError::BranchExists {
                task: state.task_id.clone(),
                branch,
            });
        }
        let started_from = git.current_branch()?;
        ignore_state_folder(workspace)?;
        git.ensure_branch(&branch)?;
        let rec = TaskGit {
            branch: branch.clone(),
            base: base.clone(),
            started_from,
            from_step: state.step,
            state_at_start: state.clone(),
            untracked_at_start: git.untracked()?,
            stash: stashed.clone(),
            pending_undo: None,
        };
        save(dir, &rec)?;
        Ok(Some((
            TaskRepo {
                git,
                dir: dir.clone(),
                rec,
            },
            Started::Branched {
                branch,
                base,
                stash: stashed,
            },
        )))
    }

    /// Opens the history of a task that ran with git (for `diff` and `undo`).
    pub fn open(workspace: &Path, dir: &TaskDir, task: &str) -> Result<TaskRepo, TaskGitError> {
        let no_history = || TaskGitError::NoHistory {
            task: task.to_string(),
            path: dir.path().join(GIT_FILE).display().to_string(),
        };
        let rec = load(dir)?.ok_or_else(no_history)?;
        let git = Git::detect(workspace).ok_or_else(no_history)?;
        Ok(TaskRepo {
            git,
            dir: dir.clone(),
            rec,
        })
    }

    /// The record.
    pub fn record(&self) -> &TaskGit {
        &self.rec
    }

    fn commit(
        &self,
        step: u64,
        subject: &str,
        written: &[String],
    ) -> Result<Option<String>, TaskGitError> {
        let message = format!(
            "{subject}\n\nAgentForge-Task: {}\n{STEP_TRAILER}{step}",
            self.rec.state_at_start.task_id
        );
        Ok(self
            .git
            .commit_task_changes(&message, written, &self.rec.untracked_at_start)?)
    }

    /// Commits what a recorded step changed (nothing when it changed no file): one
    /// commit per step, named by it, with what verification said after it. The step's
    /// changes are the tracked files that differ and the new files its actions wrote;
    /// new files a command made (build output) are not the task's to commit.
    pub fn commit_step(&self, record: &ActionRecord) -> Result<Option<String>, TaskGitError> {
        let written: Vec<String> = record.file_hashes.keys().cloned().collect();
        if written.is_empty() && self.git.tracked_changes()?.is_empty() {
            return Ok(None);
        }
        // The commit names a recorded step: its log line is on the disk first (a kill
        // between the two leaves the change to the next resume's commit).
        self.dir.wait_flushed()?;
        let v = &record.state_after.verification;
        let verified = if v.last_run_step == Some(record.step) && !v.checks.is_empty() {
            format!(
                "verified: {} of {} checks pass",
                v.passing(),
                v.checks.len()
            )
        } else {
            "not verified at this step".to_string()
        };
        let target = record
            .target
            .as_deref()
            .map(|t| format!(" {t}"))
            .unwrap_or_default();
        let subject = format!(
            "agentforge({}): step {} {}{target}\n\n{}\n{verified}",
            self.rec.state_at_start.task_id, record.step, record.action, record.summary
        );
        self.commit(record.step, &subject, &written)
    }

    /// The commits of the task's branch: (hash, step, subject), oldest first.
    pub fn history(&self) -> Result<Vec<(String, u64, String)>, TaskGitError> {
        Ok(self
            .git
            .commits_since(&self.rec.base)?
            .into_iter()
            .filter_map(|(hash, message)| {
                let step = message
                    .lines()
                    .find_map(|l| l.strip_prefix(STEP_TRAILER))?
                    .trim()
                    .parse()
                    .ok()?;
                let subject = message.lines().next().unwrap_or_default().to_string();
                Some((hash, step, subject))
            })
            .collect())
    }

    /// The task's changes: the patch from where its branch started to its last commit.
    pub fn diff(&self, stat: bool) -> Result<String, TaskGitError> {
        Ok(self.git.diff_since(&self.rec.base, stat)?)
    }

    /// Undoes the task's changes after `to_step` (default: its last changing step): the
    /// files go back to the commit of that step (or the branch's start) and the task's
    /// log and state to just after it. The caller holds the task's lock. Returns the
    /// step the task is now after and the commit the files are at.
    pub fn undo(mut self, to_step: Option<u64>) -> Result<(u64, String), TaskGitError> {
        let state = self.dir.load_state()?;
        let current = self.git.current_branch()?;
        if current != self.rec.branch {
            return Err(TaskGitError::OtherBranch {
                task: state.task_id.clone(),
                branch: self.rec.branch.clone(),
                current,
            });
        }
        let history = self.history()?;
        let to_step = match to_step {
            Some(n) => n,
            None => {
                let (_, last, _) = history.last().ok_or_else(|| {
                    TaskGitError::Range(format!(
                        "task `{}` has changed no file since its branch `{}` started: nothing to undo",
                        state.task_id, self.rec.branch
                    ))
                })?;
                last - 1
            }
        };
        if to_step > state.step {
            return Err(TaskGitError::Range(format!(
                "--to-step {to_step}: task `{}` has run {} step(s); name a step from {} to {}",
                state.task_id, state.step, self.rec.from_step, state.step
            )));
        }
        if to_step < self.rec.from_step {
            return Err(TaskGitError::Range(format!(
                "--to-step {to_step}: task `{}` started its git history after step {}; nothing before it can be undone",
                state.task_id, self.rec.from_step
            )));
        }
        let commit = history
            .iter()
            .rev()
            .find(|(_, step, _)| *step <= to_step)
            .map_or(self.rec.base.clone(), |(hash, _, _)| hash.clone());
        self.rec.pending_undo = Some(PendingUndo {
            to_step,
            commit: commit.clone(),
        });
        save(&self.dir, &self.rec)?;
        let now = carry_out(&self.git, &self.dir, self.rec)?;
        Ok((now, commit))
    }
}
