//! The git safety net (seed 002): where the workspace is a git repository, the sprint
//! works on its own branch, each verified task is one commit, and a task that breaks the
//! baseline is rolled back to the last commit. Nothing is ever pushed. Everything under
//! `.agentforge/` (the sprint's and the tasks' state) stays out of the commits and is
//! never touched by a rollback.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A repository the sprint works in.
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
}
