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
            if ty.is_dir() && entry.path().join("CACHEDIR.TAG").is_file() {
                // A cache (cargo's `target/` of a nested crate, say): rebuilt, not sent.
                continue;
            }
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
    // Build output: `target/` at the top (other caches are found by their
    // CACHEDIR.TAG in `pack`); a source folder named `target`, `src/target/mod.rs`, is
    // content and travels.
    if first.is_some_and(|f| f == "target") && rel.components().count() == 1 {
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

/// Most bytes an archive may unpack to: a gzip bomb fails here, not on a full disk.
pub const MAX_UNPACKED: u64 = 4 << 30;

/// Unpacks `bytes` (a tar.gz from [`pack`]) into `dir`, which is created. An entry whose
/// path is absolute or climbs out (`..`), a link whose target does, a device or FIFO,
/// or more than [`MAX_UNPACKED`] bytes in all is refused, naming the entry: an archive
/// comes from the network, and what it lays down is run by the worker's commands.
pub fn unpack(bytes: &[u8], dir: &Path) -> Result<(), FleetError> {
    use std::path::Component;
    std::fs::create_dir_all(dir).map_err(|e| FleetError::io(dir, e))?;
    let mut ar = tar::Archive::new(GzDecoder::new(bytes));
    ar.set_preserve_permissions(true);
    ar.set_overwrite(true);
    let refuse = |what: &Path, why: &str| {
        FleetError::io(
            dir.join(what),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("archive entry `{}` refused: {why}", what.display()),
            ),
        )
    };
    let inside = |p: &Path| {
        p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    };
    let mut total = 0u64;
    for entry in ar.entries().map_err(|e| FleetError::io(dir, e))? {
        let mut entry = entry.map_err(|e| FleetError::io(dir, e))?;
        let path = entry
            .path()
            .map_err(|e| FleetError::io(dir, e))?
            .into_owned();
        if !inside(&path) {
            return Err(refuse(&path, "its path leaves the workspace"));
        }
        let ty = entry.header().entry_type();
        if ty.is_symlink() || ty.is_hard_link() {
            let target = entry
                .link_name()
                .map_err(|e| FleetError::io(dir, e))?
                .map(|t| t.into_owned())
                .unwrap_or_default();
            // A relative link resolves from the link's folder; a hard link's name is
            // from the archive's root.
            let from = if ty.is_symlink() {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                PathBuf::new()
            };
            if !stays_inside(&from, &target) {
                return Err(refuse(&path, "its link points outside the workspace"));
            }
        } else if !(ty.is_file()
            || ty.is_dir()
            || ty.is_gnu_longname()
            || ty.is_pax_local_extensions())
        {
            return Err(refuse(&path, "not a file, folder or link"));
        }
        total = total.saturating_add(entry.size());
        if total > MAX_UNPACKED {
            return Err(refuse(
                &path,
                &format!("the archive unpacks to more than {MAX_UNPACKED} bytes"),
            ));
        }
        entry.unpack_in(dir).map_err(|e| FleetError::io(dir, e))?;
    }
    Ok(())
}

/// Whether `target`, read from the folder `from` (both relative to the archive's root),
/// stays inside the root: not absolute, and no `..` climbs above it.
fn stays_inside(from: &Path, target: &Path) -> bool {
    use std::path::Component;
    let mut depth = from.components().count();
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
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
        // A nested crate's target (cargo tags it) stays; a source folder named
        // `target` travels.
        std::fs::create_dir_all(p.join("sub/target")).unwrap();
        std::fs::write(p.join("sub/target/y"), "y").unwrap();
        std::fs::write(p.join("sub/target/CACHEDIR.TAG"), "Signature").unwrap();
        std::fs::create_dir_all(p.join("src/target")).unwrap();
        std::fs::write(p.join("src/target/mod.rs"), "// a module").unwrap();
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
        assert!(d.join("src/target/mod.rs").is_file());
        // The same tree packs to the same bytes.
        assert_eq!(sha256(&bytes), sha256(&pack(p).unwrap()));
    }

    /// A tar.gz of raw entries: (path, kind, link target or contents).
    fn raw(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for (path, ty, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*ty);
            h.set_mode(0o644);
            // Raw names: the builder's own setters refuse `..` and absolute paths.
            let name = h.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            if ty.is_symlink() || ty.is_hard_link() {
                h.set_link_name(data).unwrap();
                h.set_size(0);
                h.set_cksum();
                b.append(&h, std::io::empty()).unwrap();
            } else {
                h.set_size(data.len() as u64);
                h.set_cksum();
                b.append(&h, data.as_bytes()).unwrap();
            }
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn archives_that_leave_the_workspace_are_refused_naming_the_entry() {
        use tar::EntryType as T;
        let cases = [
            (vec![("../escape.txt", T::Regular, "x")], "../escape.txt"),
            (vec![("/etc/x", T::Regular, "x")], "/etc/x"),
            (
                vec![("link", T::Symlink, "/home/worker/.ssh/id_rsa")],
                "link",
            ),
            (vec![("a/link", T::Symlink, "../../up")], "a/link"),
            (vec![("hard", T::Link, "../outside")], "hard"),
            (vec![("fifo", T::Fifo, "")], "fifo"),
        ];
        for (entries, named) in cases {
            let dst = tempfile::tempdir().unwrap();
            let ws = dst.path().join("ws");
            let err = unpack(&raw(&entries), &ws).unwrap_err().to_string();
            assert!(
                err.contains(&format!("`{named}` refused")),
                "{named}: {err}"
            );
        }
        // Links that stay inside are laid down.
        let dst = tempfile::tempdir().unwrap();
        let ok = raw(&[
            ("a/f.txt", T::Regular, "f"),
            ("a/b/up", T::Symlink, "../f.txt"),
        ]);
        unpack(&ok, dst.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dst.path().join("a/b/up")).unwrap(),
            "f"
        );
        assert!(std::fs::symlink_metadata(dst.path().join("a/b/up"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn links_are_judged_from_their_folder() {
        assert!(stays_inside(Path::new("a/b"), Path::new("../f.txt")));
        assert!(stays_inside(Path::new("a"), Path::new("../f.txt")));
        assert!(!stays_inside(Path::new(""), Path::new("../f.txt")));
        assert!(!stays_inside(Path::new("a"), Path::new("/f.txt")));
        assert!(stays_inside(Path::new(""), Path::new("./x/../y")));
    }
}
