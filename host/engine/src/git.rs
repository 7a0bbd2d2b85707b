//! Git, the one way the host touches a repository: a sprint's safety net (seed 002: its
//! own branch, one commit per verified task, the rollback of a task that breaks the
//! baseline) and a task's branch and per-step commits ([`crate::task_git`]). Nothing is
//! ever pushed. Everything under `.agentforge/` (the sprints' and the tasks' state)
//! stays out of the commits and is never touched by a rollback.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pathspec that keeps the host's state folders out of every git command here.
const NOT_STATE: &str = ":(exclude).agentforge";

/// A repository the host works in (the workspace is its top).
#[derive(Debug, Clone)]
pub struct Git {
    root: PathBuf,
}

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
#[error("git {args} in {root}: {message}")]
pub struct GitError {
    /// The arguments.
    pub args: String,
    /// The repository.
    pub root: String,
    /// stderr, or the OS error.
    pub message: String,
}

impl Git {
    /// The repository `workspace` is the top of, if it is one and `git` runs. A
    /// workspace inside a larger repository is left alone (its commits would carry
    /// files the sprint does not own).
    pub fn detect(workspace: &Path) -> Option<Git> {
        let out = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(["rev-parse", "--show-toplevel"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let top = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let same = std::fs::canonicalize(&top).ok()? == std::fs::canonicalize(workspace).ok()?;
        same.then(|| Git {
            root: workspace.to_path_buf(),
        })
    }

    fn run(&self, args: &[&str]) -> Result<String, GitError> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args([
                "-c",
                "user.name=AgentForge",
                "-c",
                "user.email=agentforge@localhost",
                // Never a prompt (a signing passphrase) in a loop that runs unattended.
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| self.error(args, e.to_string()))?;
        if !out.status.success() {
            return Err(self.error(
                args,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn error(&self, args: &[&str], message: String) -> GitError {
        GitError {
            args: args.join(" "),
            root: self.root.display().to_string(),
            message,
        }
    }

    /// Switches to `branch`, creating it at the current commit when it does not exist.
    /// Uncommitted changes come along (git keeps them across a switch to a new branch).
    pub fn ensure_branch(&self, branch: &str) -> Result<(), GitError> {
        let current = self
            .run(&["rev-parse", "--abbrev-ref", "HEAD"])
            .unwrap_or_default();
        if current == branch {
            return Ok(());
        }
        if self
            .run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ])
            .is_ok()
        {
            self.run(&["switch", "--quiet", branch]).map(|_| ())
        } else {
            self.run(&["switch", "--quiet", "-c", branch]).map(|_| ())
        }
    }

    /// Commits every change outside `.agentforge/`; the new commit's hash, or `None`
    /// when nothing changed.
    pub fn commit(&self, message: &str) -> Result<Option<String>, GitError> {
        self.run(&["add", "-A", "--", "."])?;
        // The state folders are never committed (whether or not .gitignore says so).
        self.run(&[
            "rm",
            "-r",
            "--cached",
            "--quiet",
            "--ignore-unmatch",
            "--",
            ".agentforge",
        ])?;
        if self.run(&["diff", "--cached", "--quiet"]).is_ok() {
            return Ok(None);
        }
        self.run(&["commit", "--quiet", "--no-verify", "-m", message])?;
        self.run(&["rev-parse", "--short", "HEAD"]).map(Some)
    }

    /// Puts the working tree back to the last commit (tracked and untracked files),
    /// leaving `.agentforge/` alone.
    pub fn rollback(&self) -> Result<(), GitError> {
        self.run(&["reset", "--quiet", "--hard", "HEAD"])?;
        self.run(&["clean", "--quiet", "-fd", "-e", ".agentforge"])?;
        Ok(())
    }

    /// The commit `HEAD` names, in full; `None` in a repository with no commit yet.
    pub fn head(&self) -> Option<String> {
        self.run(&["rev-parse", "--verify", "--quiet", "HEAD"]).ok()
    }

    /// The branch checked out (`HEAD` when detached).
    pub fn current_branch(&self) -> Result<String, GitError> {
        self.run(&["rev-parse", "--abbrev-ref", "HEAD"])
    }

    /// Whether the branch exists.
    pub fn branch_exists(&self, branch: &str) -> bool {
        self.run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .is_ok()
    }

    /// Changes to tracked files (staged or not) outside `.agentforge/`, as
    /// `git status --porcelain` lines.
    pub fn tracked_changes(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            NOT_STATE,
        ])?;
        Ok(out.lines().map(str::to_string).collect())
    }

    /// Untracked files (not ignored) outside `.agentforge/`, relative to the top.
    pub fn untracked(&self) -> Result<Vec<String>, GitError> {
        let out = self.run(&[
            "ls-files",
            "--others",
            "--exclude-standard",
            "--",
            ".",
            NOT_STATE,
        ])?;
        Ok(out.lines().map(str::to_string).collect())
    }

    /// Stashes the changes to tracked files (`git stash push`), with `message`.
    pub fn stash(&self, message: &str) -> Result<(), GitError> {
        self.run(&[
            "stash", "push", "--quiet", "-m", message, "--", ".", NOT_STATE,
        ])
        .map(|_| ())
    }

    /// Commits a task's changes: every change to tracked files, and the new files in
    /// `written` (what the task's own actions wrote), outside `.agentforge/`, outside
    /// `keep_out` (files the host must not commit, such as those untracked before the
    /// task began) and not ignored. New files a command made (build output, a lock
    /// file) stay out. The new commit's full hash, or `None` when nothing was staged.
    pub fn commit_task_changes(
        &self,
        message: &str,
        written: &[String],
        keep_out: &[String],
    ) -> Result<Option<String>, GitError> {
        self.run_owned(&with_paths(&["add", "-u"], keep_out))?;
        let written: Vec<&String> = written
            .iter()
            .filter(|p| !p.starts_with(".agentforge/") && !keep_out.contains(p))
            .collect();
        if !written.is_empty() {
            // Of them, the new files git does not ignore (adding an ignored path fails).
            let mut args: Vec<String> = ["ls-files", "--others", "--exclude-standard", "--"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(written.iter().map(|p| format!(":(literal){p}")));
            let new = self.run_owned(&args)?;
            if !new.is_empty() {
                let mut add: Vec<String> = vec!["add".into(), "--".into()];
                add.extend(new.lines().map(|p| format!(":(literal){p}")));
                self.run_owned(&add)?;
            }
        }
        if self.run(&["diff", "--cached", "--quiet"]).is_ok() {
            return Ok(None);
        }
        self.run(&["commit", "--quiet", "--no-verify", "-m", message])?;
        self.run(&["rev-parse", "HEAD"]).map(Some)
    }

    /// The commits after `base` up to `HEAD`, oldest first: (full hash, message).
    pub fn commits_since(&self, base: &str) -> Result<Vec<(String, String)>, GitError> {
        let out = self.run(&[
            "log",
            "--reverse",
            "--format=%H%x00%B%x1e",
            &format!("{base}..HEAD"),
        ])?;
        Ok(out
            .split('\u{1e}')
            .filter_map(|c| {
                let (hash, message) = c.trim_start_matches('\n').split_once('\0')?;
                Some((hash.to_string(), message.trim().to_string()))
            })
            .collect())
    }

    /// The patch from `base` to `HEAD` outside `.agentforge/` (`stat`: a summary).
    pub fn diff_since(&self, base: &str, stat: bool) -> Result<String, GitError> {
        let range = format!("{base}..HEAD");
        let mut args = vec!["diff", "--no-color", "--no-ext-diff"];
        if stat {
            args.push("--stat");
        }
        args.extend([range.as_str(), "--", ".", NOT_STATE]);
        self.run(&args)
    }

    /// Puts the branch and the working tree at `rev` (tracked and untracked files other
    /// than `keep_out`), leaving `.agentforge/` alone.
    pub fn reset_to(&self, rev: &str, keep_out: &[String]) -> Result<(), GitError> {
        self.run(&["reset", "--quiet", "--hard", rev])?;
        let mut args: Vec<String> = ["clean", "--quiet", "-fd", "-e", ".agentforge"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for p in keep_out {
            args.push("-e".into());
            args.push(format!("/{p}"));
        }
        self.run_owned(&args).map(|_| ())
    }

    fn run_owned(&self, args: &[String]) -> Result<String, GitError> {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
    }
}

/// `head`, then the pathspec of everything outside `.agentforge/` and `keep_out`.
fn with_paths(head: &[&str], keep_out: &[String]) -> Vec<String> {
    head.iter()
        .map(|s| s.to_string())
        .chain(["--".to_string(), ".".to_string(), NOT_STATE.to_string()])
        .chain(keep_out.iter().map(|p| format!(":(exclude,literal){p}")))
        .collect()
}
