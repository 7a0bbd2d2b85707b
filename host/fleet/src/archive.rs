//! Workspaces as tar.gz: what a submission sends and what a checkpoint keeps.
//!
//! Left out: `target/` folders at any depth (build output, large and rebuilt) and, under
//! `.agentforge/`, everything but `tasks/`, `sprints/` and `specs/` (caches, the trace
//! database, the fleet's own folder): the task folders are the run's state, the rest is
//! rebuilt by the worker. Symbolic links are stored as links, never followed.

use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use crate::FleetError;

/// The `.agentforge/` entries an archive keeps.
const KEPT_STATE: &[&str] = &["tasks", "sprints", "specs"];

/// `dir` as a tar.gz, less what the module doc says is left out.
pub fn pack(dir: &Path) -> Result<Vec<u8>, FleetError> {
    let enc = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(enc);
    tar.follow_symlinks(false);
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&abs)
            .map_err(|e| FleetError::io(&abs, e))?
            .collect::<Result<_, _>>()
            .map_err(|e| FleetError::io(&abs, e))?;
        // A stable order: the same tree packs to the same bytes.
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            let child = rel.join(&name);
            if left_out(&child) {
                continue;
            }
            let ty = entry
                .file_type()
                .map_err(|e| FleetError::io(entry.path(), e))?;
            if ty.is_dir() {
                tar.append_dir(&child, entry.path())
                    .map_err(|e| FleetError::io(entry.path(), e))?;
                stack.push(child);
            } else if ty.is_file() || ty.is_symlink() {
                tar.append_path_with_name(entry.path(), &child)
                    .map_err(|e| FleetError::io(entry.path(), e))?;
            }
            // FIFOs, sockets and devices are not workspace content: left out.
        }
    }
    let enc = tar.into_inner().map_err(|e| FleetError::io(dir, e))?;
    enc.finish().map_err(|e| FleetError::io(dir, e))
}

/// Whether the workspace-relative path is left out of archives.
fn left_out(rel: &Path) -> bool {
    let mut parts = rel.components().map(|c| c.as_os_str());
    let first = parts.next();
    if rel.file_name().is_some_and(|n| n == "target") {
        return true;
    }
    if first.is_some_and(|f| f == ".agentforge") {
        return match parts.next() {
            None => false,
            Some(second) => !KEPT_STATE.iter().any(|k| second == *k),
        };
    }
    false
}

/// Unpacks `bytes` (a tar.gz from [`pack`]) into `dir`, which is created. Entries that
/// would land outside `dir` are refused by the tar crate's `unpack_in`.
pub fn unpack(bytes: &[u8], dir: &Path) -> Result<(), FleetError> {
    std::fs::create_dir_all(dir).map_err(|e| FleetError::io(dir, e))?;
    let mut ar = tar::Archive::new(GzDecoder::new(bytes));
    ar.set_preserve_permissions(true);
    ar.set_overwrite(true);
    for entry in ar.entries().map_err(|e| FleetError::io(dir, e))? {
        let mut entry = entry.map_err(|e| FleetError::io(dir, e))?;
        entry.unpack_in(dir).map_err(|e| FleetError::io(dir, e))?;
    }
    Ok(())
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_the_workspace_and_task_folders_but_not_caches_or_targets() {
        let src = tempfile::tempdir().unwrap();
        let p = src.path();
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::write(p.join("src/a.txt"), "a").unwrap();
        std::fs::create_dir_all(p.join("target/debug")).unwrap();
        std::fs::write(p.join("target/debug/big"), "x").unwrap();
        std::fs::create_dir_all(p.join("sub/target")).unwrap();
        std::fs::write(p.join("sub/target/y"), "y").unwrap();
        std::fs::create_dir_all(p.join(".agentforge/tasks/t1")).unwrap();
        std::fs::write(p.join(".agentforge/tasks/t1/actions.jsonl"), "{}\n").unwrap();
        std::fs::write(p.join(".agentforge/graph.db"), "db").unwrap();
        let bytes = pack(p).unwrap();
        let dst = tempfile::tempdir().unwrap();
        unpack(&bytes, dst.path()).unwrap();
        let d = dst.path();
        assert_eq!(std::fs::read_to_string(d.join("src/a.txt")).unwrap(), "a");
        assert!(d.join(".agentforge/tasks/t1/actions.jsonl").is_file());
        assert!(!d.join(".agentforge/graph.db").exists());
        assert!(!d.join("target").exists());
        assert!(!d.join("sub/target").exists());
        // The same tree packs to the same bytes.
        assert_eq!(sha256(&bytes), sha256(&pack(p).unwrap()));
    }
}
