//! The project's instruction files: `AGENTS.md` and `CLAUDE.md` along the folders from
//! the task's files up to the workspace root, and `.agentforge/instructions.md`.
//!
//! Which files, in which order (nearest first, so the most specific rules come first and
//! are the last to be cut when the context is over its budget):
//!
//! 1. `.agentforge/instructions.md`, the project's instructions for AgentForge itself;
//! 2. for each folder of the task's files (the paths its inputs name, see
//!    `TaskSpec::named_paths`; the workspace root when it names none), that folder's
//!    `AGENTS.md` then `CLAUDE.md`, then those of its parent, and so on up to the root.
//!    A folder shared by several chains is read once.
//!
//! Every file is read with the store's bounded read ([`Workspace::read_bounded`], or
//! [`read_regular_file`] for the one file in `.agentforge/`): only regular files, at most
//! [`READ_CAP`] bytes (a longer file is kept cut, and says so). Nothing outside the
//! workspace is read: a symlink leading outside it, or into `.git/` or `.agentforge/`
//! (folders actions may not read), is skipped with the reason, and so is a task path
//! that leads there. A file whose text is the same as one already found (a `CLAUDE.md`
//! that is a copy or a symlink of `AGENTS.md`) is shown once.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::tools::{read_regular_file, ReadError, ToolError, Workspace};

/// The instruction file names looked for in each folder of a chain, in this order.
pub const FILE_NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The project's instructions for AgentForge, relative to the workspace root.
pub const AGENTFORGE_INSTRUCTIONS: &str = ".agentforge/instructions.md";

/// The most bytes read of one instruction file (Codex reads 32 KiB of its project docs;
/// the context section cuts far below this anyway).
pub const READ_CAP: u64 = 64 * 1024;

/// One instruction file as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionFile {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// Its text (invalid UTF-8 replaced), at most [`READ_CAP`] bytes of it.
    pub content: String,
    /// The file's size in bytes when it was longer than [`READ_CAP`] (the text is cut).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_from_bytes: Option<u64>,
}

/// An instruction file that exists but was not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFile {
    /// Workspace-relative path.
    pub path: String,
    /// Why it was not read (outside the workspace, not a regular file, same text as...).
    pub reason: String,
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instructions {
    /// The files to show, nearest first.
    pub files: Vec<InstructionFile>,
    /// Files found but not shown, with the reason.
    pub skipped: Vec<SkippedFile>,
}

/// Finds and reads the instruction files for a task whose inputs name `targets`
/// (workspace-relative paths; files or folders, existing or not). See the module docs.
pub fn discover(ws: &Workspace, targets: &[String]) -> Instructions {
    let mut found = Instructions::default();
    read_agentforge_instructions(ws, &mut found);
    let mut folders_done: Vec<PathBuf> = Vec::new();
    let mut starts: Vec<PathBuf> = targets.iter().filter_map(|t| start_folder(ws, t)).collect();
    if starts.is_empty() {
        starts.push(ws.root().to_path_buf());
    }
    for start in starts {
        // `start` lies inside the root (resolved), so the walk ends at the root.
        for folder in start.ancestors() {
            if !folder.starts_with(ws.root()) {
                break;
            }
            if folders_done.iter().any(|d| d == folder) {
                // Its parents are done too: they were walked from here before.
                break;
            }
            folders_done.push(folder.to_path_buf());
            for name in FILE_NAMES {
                let rel = match ws.relative(folder).as_str() {
                    "." => name.to_string(),
                    dir => format!("{dir}/{name}"),
                };
                read_one(ws, &rel, &mut found);
            }
        }
    }
    found
}

/// The existing folder a task path starts its chain from: the path itself when it is a
/// folder, else the nearest existing folder above it (a file may not exist yet). `None`
/// when the path is refused (outside the workspace, inside `.git/` or `.agentforge/`).
fn start_folder(ws: &Workspace, target: &str) -> Option<PathBuf> {
    let abs = ws.resolve(target).ok()?;
    abs.ancestors()
        .find(|p| p.is_dir())
        .filter(|p| p.starts_with(ws.root()))
        .map(Path::to_path_buf)
}

/// Reads the workspace file `rel` into `found`, unless it does not exist.
fn read_one(ws: &Workspace, rel: &str, found: &mut Instructions) {
    match ws.read_bounded(rel, READ_CAP) {
        Ok(read) => push(found, rel, read),
        Err(ToolError::Read(ReadError::NotFound { .. })) => {}
        // A folder that happens to be called AGENTS.md is no instruction file either.
        Err(ToolError::Read(ReadError::NotRegular {
            kind: "a folder", ..
        })) => {}
        Err(e) => found.skipped.push(SkippedFile {
            path: rel.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// `.agentforge/instructions.md`: the one file the host reads in `.agentforge/`, which
/// model-given paths cannot reach. `.agentforge` must be a real folder (not a symlink to
/// somewhere else) and the file a regular file (a symlink is refused by the read).
fn read_agentforge_instructions(ws: &Workspace, found: &mut Instructions) {
    let folder = ws.root().join(".agentforge");
    match std::fs::symlink_metadata(&folder) {
        Ok(m) if m.file_type().is_dir() => {}
        Ok(_) => {
            found.skipped.push(SkippedFile {
                path: AGENTFORGE_INSTRUCTIONS.to_string(),
                reason: "`.agentforge` is not a folder of the workspace (a symlink?); its instructions are not read".to_string(),
            });
            return;
        }
        Err(_) => return,
    }
    match read_regular_file(&ws.root().join(AGENTFORGE_INSTRUCTIONS), READ_CAP) {
        Ok(read) => push(found, AGENTFORGE_INSTRUCTIONS, read),
        Err(ReadError::NotFound { .. }) => {}
        Err(e) => found.skipped.push(SkippedFile {
            path: AGENTFORGE_INSTRUCTIONS.to_string(),
            reason: e.shown_as(AGENTFORGE_INSTRUCTIONS).to_string(),
        }),
    }
}

fn push(found: &mut Instructions, rel: &str, read: crate::tools::BoundedRead) {
    let content = read.text().into_owned();
    if content.trim().is_empty() {
        return;
    }
    if let Some(same) = found.files.iter().find(|f| f.content == content) {
        let reason = format!("same text as `{}`, shown once", same.path);
        found.skipped.push(SkippedFile {
            path: rel.to_string(),
            reason,
        });
        return;
    }
    found.files.push(InstructionFile {
        path: rel.to_string(),
        content,
        cut_from_bytes: read.truncated.then_some(read.size.max(read.cap + 1)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn ws_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    fn paths(i: &Instructions) -> Vec<&str> {
        i.files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn nearest_first_up_to_the_root_with_the_harness_file_first() {
        let (_d, ws) = ws_with(&[
            ("AGENTS.md", "root rules"),
            ("CLAUDE.md", "claude rules"),
            ("crates/date/AGENTS.md", "date rules"),
            ("crates/other/AGENTS.md", "not on the chain"),
            (".agentforge/instructions.md", "harness rules"),
            ("crates/date/src/lib.rs", ""),
        ]);
        let found = discover(&ws, &["crates/date/src/lib.rs".to_string()]);
        assert_eq!(
            paths(&found),
            [
                ".agentforge/instructions.md",
                "crates/date/AGENTS.md",
                "AGENTS.md",
                "CLAUDE.md"
            ]
        );
        assert!(found.skipped.is_empty(), "{:?}", found.skipped);
        // No task path: the root's files only.
        let found = discover(&ws, &[]);
        assert_eq!(
            paths(&found),
            [".agentforge/instructions.md", "AGENTS.md", "CLAUDE.md"]
        );
    }

    #[test]
    fn several_targets_share_their_common_folders_and_new_files_count() {
        let (_d, ws) = ws_with(&[
            ("AGENTS.md", "root"),
            ("a/AGENTS.md", "a"),
            ("a/b/AGENTS.md", "b"),
            ("a/c/AGENTS.md", "c"),
            ("a/b/x.rs", ""),
        ]);
        // `a/c/new/y.rs` does not exist yet: its chain starts at `a/c`.
        let found = discover(&ws, &["a/b/x.rs".to_string(), "a/c/new/y.rs".to_string()]);
        assert_eq!(
            paths(&found),
            ["a/b/AGENTS.md", "a/AGENTS.md", "AGENTS.md", "a/c/AGENTS.md"]
        );
    }

    #[test]
    fn nothing_outside_or_protected_is_read_and_copies_are_shown_once() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("AGENTS.md"), "SECRET outside").unwrap();
        let (_d, ws) = ws_with(&[
            ("AGENTS.md", "same"),
            ("sub/x.rs", ""),
            (".git/AGENTS.md", "git internals"),
        ]);
        symlink(
            outside.path().join("AGENTS.md"),
            ws.root().join("sub/AGENTS.md"),
        )
        .unwrap();
        symlink("AGENTS.md", ws.root().join("CLAUDE.md")).unwrap();
        let found = discover(
            &ws,
            &[
                "sub/x.rs".to_string(),
                ".git/x".to_string(),
                "../elsewhere/x.rs".to_string(),
            ],
        );
        assert_eq!(paths(&found), ["AGENTS.md"]);
        assert!(found.files.iter().all(|f| !f.content.contains("SECRET")));
        let skipped: Vec<(&str, &str)> = found
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert_eq!(skipped[0].0, "sub/AGENTS.md");
        assert!(
            skipped[0].1.contains("outside the workspace"),
            "{skipped:?}"
        );
        assert_eq!(skipped[1].0, "CLAUDE.md");
        assert!(
            skipped[1].1.contains("same text as `AGENTS.md`"),
            "{skipped:?}"
        );
    }

    #[test]
    fn the_harness_file_must_be_a_regular_file_in_a_real_folder() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("instructions.md"), "SECRET").unwrap();
        let (_d, ws) = ws_with(&[]);
        fs::create_dir(ws.root().join(".agentforge")).unwrap();
        symlink(
            outside.path().join("instructions.md"),
            ws.root().join(AGENTFORGE_INSTRUCTIONS),
        )
        .unwrap();
        let found = discover(&ws, &[]);
        assert!(found.files.is_empty());
        assert!(found.skipped[0].reason.contains("symlink"), "{found:?}");

        let (_d2, ws) = ws_with(&[]);
        symlink(outside.path(), ws.root().join(".agentforge")).unwrap();
        let found = discover(&ws, &[]);
        assert!(found.files.is_empty());
        assert!(
            found.skipped[0].reason.contains("not a folder"),
            "{found:?}"
        );
    }

    #[test]
    fn a_long_file_is_read_up_to_the_cap_and_says_so() {
        let long = "x".repeat(READ_CAP as usize + 10);
        let (_d, ws) = ws_with(&[("AGENTS.md", &long)]);
        let found = discover(&ws, &[]);
        assert_eq!(found.files[0].content.len(), READ_CAP as usize);
        assert_eq!(found.files[0].cut_from_bytes, Some(READ_CAP + 10));
    }
}
