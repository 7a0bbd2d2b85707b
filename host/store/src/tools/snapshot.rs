//! Snapshots of files before a change, their restoration, and atomic file writes.
//!
//! A snapshot folder holds `manifest.json` and one backup per file that existed. The
//! manifest is written (atomically, fsynced) before the workspace is touched, so after
//! a crash at any point the folder either does not list a file (it was not changed
//! yet) or can restore it exactly. Snapshotting the same folder again keeps the first
//! record of each path: the first backup is the state before the step.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::read::read_regular_file;
use super::{ToolError, Workspace};

/// Name of the manifest inside a snapshot folder.
pub(crate) const MANIFEST: &str = "manifest.json";

/// Largest file a step may change: its backup is read into memory and written to the
/// snapshot before the change.
pub(crate) const MAX_SNAPSHOT_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    /// One entry per workspace-relative file, in snapshot order.
    files: Vec<ManifestFile>,
    /// Folders the step created (they are removed on restore if left empty).
    #[serde(default)]
    created_dirs: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ManifestFile {
    /// Workspace-relative path with `/` separators.
    path: String,
    /// Whether the file existed before the change; if not, restore deletes it.
    existed: bool,
    /// Backup file name inside the snapshot folder, when `existed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backup: Option<String>,
    /// Unix permission bits of the original, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<u32>,
}

fn io_error(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ToolError {
    let path = path.display().to_string();
    move |source| ToolError::Io { op, path, source }
}

fn read_manifest(snapshot_dir: &Path) -> Result<Option<Manifest>, ToolError> {
    let path = snapshot_dir.join(MANIFEST);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("read snapshot manifest", &path)(e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ToolError::Snapshot {
            path: path.display().to_string(),
            message: e.to_string(),
        })
}

/// Records `files` (absolute paths inside the workspace) and the folders about to be
/// created in `snapshot_dir`, backing up the current content of existing files.
pub(crate) fn snapshot_files(
    ws: &Workspace,
    snapshot_dir: &Path,
    files: &[&Path],
    created_dirs: &[PathBuf],
) -> Result<(), ToolError> {
    fs::create_dir_all(snapshot_dir).map_err(io_error("create snapshot folder", snapshot_dir))?;
    let mut manifest = read_manifest(snapshot_dir)?.unwrap_or_default();
    manifest.version = 1;
    for &abs in files {
        let rel = ws.relative(abs);
        if manifest.files.iter().any(|f| f.path == rel) {
            continue;
        }
        let entry = match fs::metadata(abs) {
            Ok(meta) if meta.is_file() => {
                let backup = format!("file-{}", manifest.files.len());
                let dest = snapshot_dir.join(&backup);
                let data = read_regular_file(abs, MAX_SNAPSHOT_BYTES)
                    .and_then(|r| r.complete())
                    .map_err(|e| ToolError::Read(e.shown_as(&rel)))?;
                write_synced(&dest, &data).map_err(io_error("write snapshot backup", &dest))?;
                ManifestFile {
                    path: rel,
                    existed: true,
                    backup: Some(backup),
                    mode: mode_of(&meta),
                }
            }
            Ok(_) => {
                return Err(ToolError::Io {
                    op: "snapshot",
                    path: rel,
                    source: io::Error::other("not a regular file"),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => ManifestFile {
                path: rel,
                existed: false,
                backup: None,
                mode: None,
            },
            Err(e) => return Err(io_error("inspect file to snapshot", abs)(e)),
        };
        manifest.files.push(entry);
    }
    for dir in created_dirs {
        let rel = ws.relative(dir);
        if !manifest.created_dirs.contains(&rel) {
            manifest.created_dirs.push(rel);
        }
    }
    let path = snapshot_dir.join(MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
    atomic_write(&path, text.as_bytes(), None).map_err(io_error("write snapshot manifest", &path))
}

/// A file as a snapshot recorded it, before its step changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeforeChange {
    /// The file did not exist (the step created it).
    Absent,
    /// Its content.
    Content(Vec<u8>),
}

/// The files a snapshot folder records, in snapshot order, each as it was before the
/// step (`agentforge report` diffs the task's changes from the earliest of them). A
/// folder without a manifest records none.
pub fn snapshot_contents(snapshot_dir: &Path) -> Result<Vec<(String, BeforeChange)>, ToolError> {
    let Some(manifest) = read_manifest(snapshot_dir)? else {
        return Ok(Vec::new());
    };
    manifest
        .files
        .iter()
        .map(|f| {
            let before = match (&f.backup, f.existed) {
                (Some(backup), true) => {
                    // The name comes from the manifest: only a plain file name is read.
                    if backup.contains(['/', '\\']) || backup.starts_with('.') {
                        return Err(ToolError::Snapshot {
                            path: snapshot_dir.join(MANIFEST).display().to_string(),
                            message: format!("backup name `{backup}` is not a file name"),
                        });
                    }
                    let p = snapshot_dir.join(backup);
                    let data = read_regular_file(&p, MAX_SNAPSHOT_BYTES)
                        .and_then(|r| r.complete())
                        .map_err(|e| ToolError::Read(e.shown_as(&f.path)))?;
                    BeforeChange::Content(data)
                }
                _ => BeforeChange::Absent,
            };
            Ok((f.path.clone(), before))
        })
        .collect()
}

/// Restores every file recorded in a snapshot folder (written by
/// [`execute_file_action`](super::execute_file_action)) and returns their
/// workspace-relative paths.
///
/// Files that existed get their old content and permissions back; files that did not
/// exist are deleted; folders the step created are removed when empty. Restoring
/// twice is harmless, and a folder without a manifest (nothing was changed yet)
/// restores nothing. Every entry is attempted even if one fails; the first error is
/// returned.
pub fn restore_snapshot(ws: &Workspace, snapshot_dir: &Path) -> Result<Vec<String>, ToolError> {
    let Some(manifest) = read_manifest(snapshot_dir)? else {
        return Ok(Vec::new());
    };
    let mut restored = Vec::new();
    let mut first_error = None;
    for entry in &manifest.files {
        match restore_one(ws, snapshot_dir, entry) {
            Ok(()) => restored.push(entry.path.clone()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // Deepest first, so nested created folders go before their parents.
    let mut dirs: Vec<&String> = manifest.created_dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for dir in dirs {
        if let Ok(abs) = ws.resolve(dir) {
            // Fails (and is meant to) when the folder holds files the step did not create.
            let _ = fs::remove_dir(abs);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(restored),
    }
}

fn restore_one(ws: &Workspace, snapshot_dir: &Path, entry: &ManifestFile) -> Result<(), ToolError> {
    // Resolved again (not trusted from the manifest) so a damaged manifest cannot
    // direct writes outside the workspace.
    let abs = ws.resolve(&entry.path)?;
    if !entry.existed {
        return match fs::remove_file(&abs) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove file created by the step", &abs)(e)),
        };
    }
    let backup_name = entry.backup.as_deref().ok_or_else(|| ToolError::Snapshot {
        path: snapshot_dir.join(MANIFEST).display().to_string(),
        message: format!("entry `{}` existed but names no backup", entry.path),
    })?;
    let backup = snapshot_dir.join(backup_name);
    let data = fs::read(&backup).map_err(io_error("read snapshot backup", &backup))?;
    // Skip identical content: rewriting would bump mtimes and trigger rebuilds.
    // Bounded and type-checked: a check may have replaced the file with a FIFO.
    let same = read_regular_file(&abs, MAX_SNAPSHOT_BYTES)
        .is_ok_and(|current| !current.truncated && current.bytes == data)
        && entry
            .mode
            .is_none_or(|m| fs::metadata(&abs).ok().and_then(|meta| mode_of(&meta)) == Some(m));
    if same {
        return Ok(());
    }
    if let Some(parent) = abs.parent() {
        fs::create_dir_all(parent).map_err(io_error("recreate folder", parent))?;
    }
    atomic_write(&abs, &data, entry.mode).map_err(io_error("restore file", &abs))
}

/// Writes `data` to `path` through a temporary file in the same folder and a rename,
/// so readers (and a crash) see either the old or the new content, never a mix.
///
/// Permissions: `mode` when given, else those of the file being replaced, else the
/// process default for new files.
pub(crate) fn atomic_write(path: &Path, data: &[u8], mode: Option<u32>) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("path has no parent folder"))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("path has no file name"))?
        .to_string_lossy();
    let tmp = dir.join(format!(
        ".{name}.agentforge-tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        write_synced(&tmp, data)?;
        match mode {
            Some(mode) => set_mode(&tmp, mode)?,
            None => {
                if let Ok(meta) = fs::metadata(path) {
                    fs::set_permissions(&tmp, meta.permissions())?;
                }
            }
        }
        fs::rename(&tmp, path)?;
        sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` (which must not exist) with `data`, fsynced.
fn write_synced(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .or_else(|e| {
            // A leftover from an interrupted earlier run; it is ours to replace.
            if e.kind() == io::ErrorKind::AlreadyExists {
                File::create(path)
            } else {
                Err(e)
            }
        })?;
    file.write_all(data)?;
    file.sync_all()
}

/// Makes a rename durable (best effort: not every platform can fsync a folder).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    Some(meta.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
fn mode_of(_meta: &fs::Metadata) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}
