//! Step trajectories on disk: `trajectories/step-NNNN.json.gz` in a task folder, the
//! [`Trajectory`] of one step as gzip-compressed JSON.
//!
//! Crash safety, with the log line that points to it ([`TrajectoryRef`]):
//!
//! - The file is written to a temporary name and renamed into place *before* the step's
//!   log line is appended, so a kill leaves either no file or a whole one, and a line is
//!   never written before its file. The line carries the file's SHA-256.
//! - The file is named by its step: a step killed after its file and before its line
//!   runs again on resume and its new file replaces the orphan (and
//!   [`remove_after`] deletes orphans when the folder is recovered, so nothing shows a
//!   trajectory of a step that was never recorded).
//! - The file and its folder are flushed to the disk by the log's background flush,
//!   before the line ([`crate::flush::append_line_after`]). The kernel may still write
//!   the line back first: after a power cut (not a kill) a line may point to a file that
//!   did not reach the disk, which [`read`] reports as such (the hash does not match),
//!   as the working memory is handled.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use agentforge_core::trajectory::{Trajectory, TrajectoryRef};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::state_store::StoreError;

/// Folder of a task's trajectories, inside the task folder.
pub const TRAJECTORY_DIR: &str = "trajectories";

/// Largest decompressed trajectory read back (a prompt is bounded by its token budget;
/// this only stops a damaged or hostile file from exhausting memory).
pub const MAX_TRAJECTORY_BYTES: u64 = 256 * 1024 * 1024;

/// A trajectory written to its final name, not yet flushed.
#[derive(Debug)]
pub struct Written {
    /// What the step's log line records.
    pub reference: TrajectoryRef,
    /// The file and its folder, for the log's background flush.
    pub to_flush: Vec<File>,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// The file name of step `step`'s trajectory, relative to the task folder.
pub fn relative_path(step: u64) -> String {
    format!("{TRAJECTORY_DIR}/step-{step:04}.json.gz")
}

/// The step a trajectory file name is of (`step-0003.json.gz` -> 3).
fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("step-")?
        .strip_suffix(".json.gz")?
        .parse()
        .ok()
}

/// Compresses `t` and puts it at its step's name in `task_dir`: written under a
/// temporary name, then renamed (a kill leaves no torn file under the final name).
pub fn write(task_dir: &Path, t: &Trajectory) -> Result<Written, StoreError> {
    let dir = task_dir.join(TRAJECTORY_DIR);
    fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
    let rel = relative_path(t.step);
    let path = task_dir.join(&rel);
    let json = serde_json::to_vec(t).map_err(|e| StoreError::Corrupt {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut gz = GzEncoder::new(Vec::with_capacity(json.len() / 4), Compression::default());
    gz.write_all(&json)
        .map_err(io_err("cannot compress", &path))?;
    let compressed = gz.finish().map_err(io_err("cannot compress", &path))?;
    let tmp = dir.join(format!(".step-{:04}.tmp-{}", t.step, std::process::id()));
    let mut file = File::create(&tmp).map_err(io_err("cannot create", &tmp))?;
    file.write_all(&compressed)
        .map_err(io_err("cannot write", &tmp))?;
    fs::rename(&tmp, &path).map_err(io_err("cannot rename into", &path))?;
    let folder = File::open(&dir).map_err(io_err("cannot open", &dir))?;
    Ok(Written {
        reference: TrajectoryRef {
            file: rel,
            sha256: agentforge_core::hash::tagged(&compressed),
            bytes: compressed.len() as u64,
            raw_bytes: json.len() as u64,
        },
        to_flush: vec![file, folder],
    })
}

/// Reads the trajectory a log line points to, checking it is the file written with that
/// line (its hash).
pub fn read(task_dir: &Path, r: &TrajectoryRef) -> Result<Trajectory, StoreError> {
    // Only names this module writes: a log line edited to point elsewhere reads nothing.
    let path = match r.file.strip_prefix(&format!("{TRAJECTORY_DIR}/")) {
        Some(name) if step_of(name).is_some() => task_dir.join(&r.file),
        _ => {
            return Err(StoreError::Corrupt {
                path: task_dir.join("actions.jsonl").display().to_string(),
                message: format!("`{}` is not a trajectory file name", r.file),
            })
        }
    };
    let compressed = fs::read(&path).map_err(io_err("cannot read", &path))?;
    let corrupt = |message: String| StoreError::Corrupt {
        path: path.display().to_string(),
        message,
    };
    if agentforge_core::hash::tagged(&compressed) != r.sha256 {
        return Err(corrupt(format!(
            "its hash does not match the one its log line recorded ({}); the file was \
             changed, or did not reach the disk before a power cut",
            r.sha256
        )));
    }
    let mut json = Vec::new();
    GzDecoder::new(&compressed[..])
        .take(MAX_TRAJECTORY_BYTES)
        .read_to_end(&mut json)
        .map_err(|e| corrupt(format!("cannot decompress: {e}")))?;
    serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))
}

/// Deletes the trajectories of steps after `last` (written by a step that was killed
/// before its log line) and leftover temporary files; returns the steps removed.
pub fn remove_after(task_dir: &Path, last: u64) -> Result<Vec<u64>, StoreError> {
    let dir = task_dir.join(TRAJECTORY_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("cannot list", &dir)(e)),
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let orphan = match step_of(&name) {
            Some(step) if step > last => Some(step),
            Some(_) => None,
            None if name.starts_with(".step-") => Some(0),
            None => None,
        };
        if let Some(step) = orphan {
            let p: PathBuf = entry.path();
            fs::remove_file(&p).map_err(io_err("cannot remove", &p))?;
            if step > 0 {
                removed.push(step);
            }
        }
    }
    removed.sort_unstable();
    Ok(removed)
}

/// The folder, under [`TRAJECTORY_DIR`], that keeps the trajectories of the records
/// moved to the log archive `archive` (`actions.undone-<ms>.jsonl` -> `undone-<ms>`).
fn archive_dir(archive: &str) -> String {
    let stem = archive.strip_suffix(".jsonl").unwrap_or(archive);
    stem.strip_prefix("actions.").unwrap_or(stem).to_string()
}

/// A log line moved to the archive `archive`, its trajectory's file named where
/// [`archive_after`] moves it (the line unchanged when it has none or does not parse).
pub fn archived_line(line: &str, archive: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    let moved = v
        .pointer("/trajectory/file")
        .and_then(serde_json::Value::as_str)
        .and_then(|f| f.strip_prefix(&format!("{TRAJECTORY_DIR}/")))
        .map(|name| format!("{TRAJECTORY_DIR}/{}/{name}", archive_dir(archive)));
    match (moved, v.pointer_mut("/trajectory/file")) {
        (Some(moved), Some(file)) => {
            *file = moved.into();
            v.to_string()
        }
        _ => line.to_string(),
    }
}

/// Moves the trajectories of the steps after `last` into the folder of the log archive
/// `archive` (`agentforge undo`); can be done twice.
pub fn archive_after(task_dir: &Path, last: u64, archive: &str) -> Result<(), StoreError> {
    let dir = task_dir.join(TRAJECTORY_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("cannot list", &dir)(e)),
    };
    let into = dir.join(archive_dir(archive));
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if step_of(&name).is_some_and(|s| s > last) {
            fs::create_dir_all(&into).map_err(io_err("cannot create", &into))?;
            let to = into.join(&name);
            fs::rename(entry.path(), &to).map_err(io_err("cannot move into", &to))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_core::model::{WireExchange, WireReply, WireRequest};
    use agentforge_core::trajectory::{Answer, TRAJECTORY_VERSION};

    fn sample(step: u64) -> Trajectory {
        Trajectory {
            version: TRAJECTORY_VERSION,
            step,
            provider: "openai".into(),
            model: "m".into(),
            exchange: Some(WireExchange {
                request: WireRequest {
                    method: "POST".into(),
                    url: "http://127.0.0.1:1/v1/chat/completions".into(),
                    headers: Default::default(),
                    body: "{\"messages\":[]}".repeat(100),
                },
                reply: WireReply {
                    status: 200,
                    body: "{}".into(),
                },
                attempts: 1,
            }),
            answer: Answer::NoToolCall { text: "hi".into() },
            usage: Default::default(),
        }
    }

    #[test]
    fn written_then_read_back_compressed() {
        let tmp = tempfile::tempdir().unwrap();
        let w = write(tmp.path(), &sample(3)).unwrap();
        assert_eq!(w.reference.file, "trajectories/step-0003.json.gz");
        assert!(w.reference.bytes < w.reference.raw_bytes);
        assert_eq!(read(tmp.path(), &w.reference).unwrap(), sample(3));
    }

    #[test]
    fn a_changed_file_or_a_foreign_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let w = write(tmp.path(), &sample(1)).unwrap();
        let p = tmp.path().join(&w.reference.file);
        let mut bytes = fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&p, bytes).unwrap();
        let e = read(tmp.path(), &w.reference).unwrap_err().to_string();
        assert!(e.contains("does not match"), "{e}");
        let mut foreign = w.reference.clone();
        foreign.file = "../../etc/passwd".into();
        let e = read(tmp.path(), &foreign).unwrap_err().to_string();
        assert!(e.contains("not a trajectory file name"), "{e}");
    }

    #[test]
    fn undone_steps_keep_their_trajectories_beside_their_archive() {
        let tmp = tempfile::tempdir().unwrap();
        let mut lines = Vec::new();
        for s in 1..=3 {
            let w = write(tmp.path(), &sample(s)).unwrap();
            lines.push(serde_json::json!({"step": s, "trajectory": w.reference}).to_string());
        }
        let archive = "actions.undone-17.jsonl";
        let moved = archived_line(&lines[2], archive);
        assert!(
            moved.contains("\"trajectories/undone-17/step-0003.json.gz\""),
            "{moved}"
        );
        assert_eq!(archived_line("not json", archive), "not json");
        archive_after(tmp.path(), 1, archive).unwrap();
        archive_after(tmp.path(), 1, archive).unwrap();
        let d = tmp.path().join(TRAJECTORY_DIR);
        assert!(d.join("step-0001.json.gz").is_file());
        assert!(!d.join("step-0002.json.gz").exists());
        assert!(d.join("undone-17/step-0002.json.gz").is_file());
        assert!(d.join("undone-17/step-0003.json.gz").is_file());
        // Recovery leaves the archived ones alone.
        assert!(remove_after(tmp.path(), 1).unwrap().is_empty());
    }

    #[test]
    fn orphans_after_the_last_step_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        for s in 1..=4 {
            write(tmp.path(), &sample(s)).unwrap();
        }
        fs::write(tmp.path().join("trajectories/.step-0005.tmp-1"), b"x").unwrap();
        assert_eq!(remove_after(tmp.path(), 2).unwrap(), [3, 4]);
        let mut left: Vec<_> = fs::read_dir(tmp.path().join(TRAJECTORY_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["step-0001.json.gz", "step-0002.json.gz"]);
    }
}
