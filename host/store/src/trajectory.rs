//! Step trajectories on disk: the [`Trajectory`] of each step as gzip-compressed JSON,
//! appended to the task's pack, `trajectories/steps.jsonl.gz`.
//!
//! The pack is one gzip member per step, each holding the step's JSON and a line break,
//! so `zcat trajectories/steps.jsonl.gz` prints JSON Lines. A step's log line records
//! where its member starts, its size and its SHA-256 ([`TrajectoryRef`]). One file per
//! task, not one per step: creating a file each step (an inode, a directory entry, and
//! the directory's fsync) was the larger part of keeping a trajectory on ext4.
//!
//! Crash safety, with the log line that points to it:
//!
//! - The member is appended *before* the step's log line, so a line is never written
//!   before its member; a kill during the append leaves a torn tail that no line points to.
//! - A step killed after its member and before its line runs again on resume. Recovery
//!   first cuts the pack back to the end of the last whole member a line points to
//!   ([`intact_end`], [`remove_after`]), so the tail of a step that was never recorded
//!   goes, torn or whole, and the step's new member takes its place.
//! - The pack (and its folder, when the append created it) is flushed to the disk by the
//!   log's background flush, before the line ([`crate::flush::append_line_after`]). The
//!   kernel may still write the line back first: after a power cut (not a kill) a line may
//!   point past the end of the pack or at bytes that did not reach the disk, which
//!   [`read`] reports as such (the hash does not match), as the working memory is handled.
//!
//! Tasks recorded before packs have a file per step (`trajectories/step-NNNN.json.gz`,
//! no offset in the line); they are read, archived and cleaned up as before.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use agentforge_core::trajectory::{Trajectory, TrajectoryRef};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::state_store::StoreError;

/// Folder of a task's trajectories, inside the task folder.
pub const TRAJECTORY_DIR: &str = "trajectories";

/// File name of the pack, in [`TRAJECTORY_DIR`] (and in an undo's archive folder).
pub const PACK_NAME: &str = "steps.jsonl.gz";

/// Largest decompressed trajectory read back (a prompt is bounded by its token budget;
/// this only stops a damaged or hostile file from exhausting memory). Also the largest
/// member read back compressed.
pub const MAX_TRAJECTORY_BYTES: u64 = 256 * 1024 * 1024;

/// A trajectory appended to the pack, not yet flushed.
#[derive(Debug)]
pub struct Written {
    /// What the step's log line records.
    pub reference: TrajectoryRef,
    /// The pack, and its folder when the append created the pack, for the log's
    /// background flush.
    pub to_flush: Vec<File>,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// The pack's name relative to the task folder.
fn pack_path() -> String {
    format!("{TRAJECTORY_DIR}/{PACK_NAME}")
}

/// The step a per-step trajectory file name is of (`step-0003.json.gz` -> 3).
fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("step-")?
        .strip_suffix(".json.gz")?
        .parse()
        .ok()
}

/// Compresses `t` (its JSON and a line break) into one gzip member and appends it to the
/// task's pack in `task_dir`.
pub fn write(task_dir: &Path, t: &Trajectory) -> Result<Written, StoreError> {
    let dir = task_dir.join(TRAJECTORY_DIR);
    fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
    let rel = pack_path();
    let path = task_dir.join(&rel);
    let mut json = serde_json::to_vec(t).map_err(|e| StoreError::Corrupt {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    json.push(b'\n');
    // Level 2 of zlib-rs: within ~7% of level 6's size on request bodies, at 1.4–1.7x
    // its speed and 2–3x that of miniz_oxide's level 6 (docs/performance.md); the
    // member is compressed while the step's action runs, on a machine of two cores.
    let mut gz = GzEncoder::new(Vec::with_capacity(json.len() / 4), Compression::new(2));
    gz.write_all(&json)
        .map_err(io_err("cannot compress", &path))?;
    let member = gz.finish().map_err(io_err("cannot compress", &path))?;
    // Not `append`: the member's offset is where this writer put it (one writer per task,
    // under the task's lock).
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err("cannot open", &path))?;
    let offset = file
        .seek(SeekFrom::End(0))
        .map_err(io_err("cannot seek in", &path))?;
    if let Err(e) = file.write_all(&member) {
        // A part written (a full disk) would sit between this member's place and the
        // next one's; take it back so the pack stays a sequence of whole members.
        let _ = file.set_len(offset);
        return Err(io_err("cannot append to", &path)(e));
    }
    let mut to_flush = vec![file];
    if offset == 0 {
        // The pack may be new: its folder's entry must reach the disk too.
        to_flush.push(File::open(&dir).map_err(io_err("cannot open", &dir))?);
    }
    Ok(Written {
        reference: TrajectoryRef {
            file: rel,
            offset: Some(offset),
            sha256: agentforge_core::hash::tagged(&member),
            bytes: member.len() as u64,
            raw_bytes: json.len() as u64,
        },
        to_flush,
    })
}

/// Reads the trajectory a log line points to, checking it is the one written with that
/// line (its hash).
pub fn read(task_dir: &Path, r: &TrajectoryRef) -> Result<Trajectory, StoreError> {
    // Only names this module writes: a log line edited to point elsewhere reads nothing.
    let known = match (r.offset, r.file.strip_prefix(&format!("{TRAJECTORY_DIR}/"))) {
        (Some(_), Some(name)) => name == PACK_NAME,
        (None, Some(name)) => step_of(name).is_some(),
        (_, None) => false,
    };
    if !known {
        return Err(StoreError::Corrupt {
            path: task_dir.join("actions.jsonl").display().to_string(),
            message: format!("`{}` is not a trajectory file name", r.file),
        });
    }
    let path = task_dir.join(&r.file);
    let corrupt = |message: String| StoreError::Corrupt {
        path: path.display().to_string(),
        message,
    };
    let compressed = match r.offset {
        None => fs::read(&path).map_err(io_err("cannot read", &path))?,
        Some(offset) => {
            if r.bytes > MAX_TRAJECTORY_BYTES {
                return Err(corrupt(format!(
                    "its log line gives a member of {} bytes, more than the {} read back",
                    r.bytes, MAX_TRAJECTORY_BYTES
                )));
            }
            let mut file = File::open(&path).map_err(io_err("cannot open", &path))?;
            file.seek(SeekFrom::Start(offset))
                .map_err(io_err("cannot seek in", &path))?;
            // Grown as read: the line's size is not trusted for an allocation.
            let mut member = Vec::new();
            file.take(r.bytes)
                .read_to_end(&mut member)
                .map_err(io_err("cannot read", &path))?;
            member
        }
    };
    if agentforge_core::hash::tagged(&compressed) != r.sha256 {
        return Err(corrupt(format!(
            "the {} bytes at {} do not match the hash its log line recorded ({}); the \
             file was changed, or did not reach the disk before a power cut",
            r.bytes,
            r.offset
                .map_or_else(|| "the start".to_string(), |o| format!("offset {o}")),
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

/// The reference of the pack member a log line points to (its `offset` is `Some`);
/// `None` for a line without a trajectory, with a per-step file, or that does not parse.
fn pack_ref(line: &str) -> Option<TrajectoryRef> {
    #[derive(serde::Deserialize)]
    struct Line {
        trajectory: Option<TrajectoryRef>,
    }
    // Most lines of a log are skipped without parsing them.
    if !line.contains("\"offset\"") {
        return None;
    }
    serde_json::from_str::<Line>(line)
        .ok()?
        .trajectory
        .filter(|r| r.offset.is_some())
}

/// The pack member a log line points to: `(offset, bytes)`; `None` for a line without a
/// trajectory, with a per-step file, or that does not parse.
fn pack_member(line: &str) -> Option<(u64, u64)> {
    pack_ref(line).and_then(|r| Some((r.offset?, r.bytes)))
}

/// Where recovery cuts the pack: the end of the last member a line of `log` points to
/// that is whole on disk (inside the pack, its hash the line's). After a power cut the
/// last line's member may be short or unwritten; cutting after the last intact one
/// instead means a step that then appends and is killed before its line leaves nothing
/// behind in the pack, and the pack is only ever shortened. 0 when no member is intact.
pub fn intact_end(task_dir: &Path, log: &str) -> Result<u64, StoreError> {
    let path = task_dir.join(TRAJECTORY_DIR).join(PACK_NAME);
    let Some((mut file, len)) = open_pack(&path, false)? else {
        return Ok(0);
    };
    for r in log.lines().rev().filter_map(pack_ref) {
        let offset = r.offset.unwrap_or_default();
        let end = offset.saturating_add(r.bytes);
        if end > len || r.bytes > MAX_TRAJECTORY_BYTES {
            continue;
        }
        file.seek(SeekFrom::Start(offset))
            .map_err(io_err("cannot seek in", &path))?;
        let mut member = Vec::new();
        (&mut file)
            .take(r.bytes)
            .read_to_end(&mut member)
            .map_err(io_err("cannot read", &path))?;
        if agentforge_core::hash::tagged(&member) == r.sha256 {
            return Ok(end);
        }
    }
    Ok(0)
}

/// The steps of the whole gzip members at the start of `bytes` (each member's JSON holds
/// its `step`); stops at the first torn or foreign one.
fn member_steps(mut bytes: &[u8]) -> Vec<u64> {
    #[derive(serde::Deserialize)]
    struct Step {
        step: u64,
    }
    let mut steps = Vec::new();
    while !bytes.is_empty() {
        // The bufread decoder consumes exactly one member, leaving the slice at the next.
        let mut d = flate2::bufread::GzDecoder::new(bytes);
        let mut json = Vec::new();
        if d.by_ref()
            .take(MAX_TRAJECTORY_BYTES)
            .read_to_end(&mut json)
            .is_err()
        {
            break;
        }
        match serde_json::from_slice::<Step>(&json) {
            Ok(s) => steps.push(s.step),
            Err(_) => break,
        }
        let rest = d.into_inner();
        if rest.len() == bytes.len() {
            break;
        }
        bytes = rest;
    }
    steps
}

/// Deletes what was written for steps after `last` and never recorded (a step killed
/// before its log line): the pack past `keep_end` (recovery gives [`intact_end`]), per-step
/// files of later steps, and leftover temporary files. Returns the steps whose
/// trajectories went.
pub fn remove_after(task_dir: &Path, last: u64, keep_end: u64) -> Result<Vec<u64>, StoreError> {
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
    removed.extend(cut_pack(&dir.join(PACK_NAME), keep_end)?);
    removed.sort_unstable();
    removed.dedup();
    Ok(removed)
}

/// Opens the pack at `path` (for writing too when `write`) with its length; `None` when
/// the task has none, which every caller treats as nothing to do.
fn open_pack(path: &Path, write: bool) -> Result<Option<(File, u64)>, StoreError> {
    let file = match OpenOptions::new().read(true).write(write).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("cannot open", path)(e)),
    };
    let len = file
        .metadata()
        .map_err(io_err("cannot read the size of", path))?
        .len();
    Ok(Some((file, len)))
}

/// Cuts the pack at `path` back to `end` bytes (nothing when it is not longer: after a
/// power cut it may be shorter, and is never lengthened); returns the steps of the whole
/// members cut.
fn cut_pack(path: &Path, end: u64) -> Result<Vec<u64>, StoreError> {
    let Some((mut file, len)) = open_pack(path, true)? else {
        return Ok(Vec::new());
    };
    if len <= end {
        return Ok(Vec::new());
    }
    file.seek(SeekFrom::Start(end))
        .map_err(io_err("cannot seek in", path))?;
    let mut tail = Vec::new();
    (&mut file)
        .take(MAX_TRAJECTORY_BYTES)
        .read_to_end(&mut tail)
        .map_err(io_err("cannot read", path))?;
    let steps = member_steps(&tail);
    file.set_len(end).map_err(io_err("cannot truncate", path))?;
    file.sync_all().map_err(io_err("cannot fsync", path))?;
    Ok(steps)
}

/// The folder, under [`TRAJECTORY_DIR`], that keeps the trajectories of the records
/// moved to the log archive `archive` (`actions.undone-<ms>.jsonl` -> `undone-<ms>`).
fn archive_dir(archive: &str) -> String {
    let stem = archive.strip_suffix(".jsonl").unwrap_or(archive);
    stem.strip_prefix("actions.").unwrap_or(stem).to_string()
}

/// Where the undone steps' members start in the pack: the first member the undone log
/// lines point to (`None` when none does). [`archived_line`] and [`archive_after`] take it.
pub fn undone_start<'a>(undone_lines: impl IntoIterator<Item = &'a str>) -> Option<u64> {
    undone_lines
        .into_iter()
        .filter_map(pack_member)
        .map(|(offset, _)| offset)
        .min()
}

/// A log line moved to the archive `archive`, its trajectory named where
/// [`archive_after`] moves it: a per-step file into the archive's folder, a pack member
/// into the archive's pack, at its offset less `undone_start` (the line unchanged when it
/// has no trajectory or does not parse).
pub fn archived_line(line: &str, archive: &str, undone_start: Option<u64>) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    let moved = v
        .pointer("/trajectory/file")
        .and_then(serde_json::Value::as_str)
        .and_then(|f| f.strip_prefix(&format!("{TRAJECTORY_DIR}/")))
        .map(|name| format!("{TRAJECTORY_DIR}/{}/{name}", archive_dir(archive)));
    let Some(moved) = moved else {
        return line.to_string();
    };
    if let Some(offset) = v.pointer_mut("/trajectory/offset") {
        match (offset.as_u64(), undone_start) {
            (Some(o), Some(start)) if o >= start => *offset = (o - start).into(),
            _ => return line.to_string(),
        }
    }
    match v.pointer_mut("/trajectory/file") {
        Some(file) => {
            *file = moved.into();
            v.to_string()
        }
        None => line.to_string(),
    }
}

/// Moves the trajectories of the steps after `last` into the folder of the log archive
/// `archive` (`agentforge undo`): per-step files of those steps, and the pack's members
/// from `undone_start` on (see [`undone_start`]), copied to the archive's pack before
/// the pack is cut. Can be done twice (a second pass finds nothing left to move).
pub fn archive_after(
    task_dir: &Path,
    last: u64,
    archive: &str,
    undone_start: Option<u64>,
) -> Result<(), StoreError> {
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
    let Some(start) = undone_start else {
        return Ok(());
    };
    let pack = dir.join(PACK_NAME);
    let Some((mut file, len)) = open_pack(&pack, true)? else {
        return Ok(());
    };
    if len <= start {
        // Moved by a first pass that stopped before the log was cut.
        return Ok(());
    }
    let to = into.join(PACK_NAME);
    // A copy that exists is whole (written atomically by a first pass that stopped before
    // the cut) and is kept: the pack past `start` may since hold other steps' members.
    if !to.exists() {
        file.seek(SeekFrom::Start(start))
            .map_err(io_err("cannot seek in", &pack))?;
        let mut undone = Vec::new();
        file.read_to_end(&mut undone)
            .map_err(io_err("cannot read", &pack))?;
        fs::create_dir_all(&into).map_err(io_err("cannot create", &into))?;
        crate::state_store::atomic_write(&to, &undone).map_err(io_err("cannot write", &to))?;
        // The archive folder's entry reaches the disk before the members leave the pack.
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("cannot fsync", &dir))?;
    }
    file.set_len(start)
        .map_err(io_err("cannot truncate", &pack))?;
    file.sync_all().map_err(io_err("cannot fsync", &pack))?;
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

    /// Where the last member a line of `log` points to ends, intact or not (0 when none
    /// does): what recovery would cut at if it did not check the member.
    fn recorded_end(log: &str) -> u64 {
        log.lines()
            .rev()
            .find_map(pack_member)
            .map_or(0, |(offset, bytes)| offset.saturating_add(bytes))
    }

    /// A log line as the executor writes it: the step and its trajectory's reference.
    fn line(step: u64, r: &TrajectoryRef) -> String {
        serde_json::json!({"step": step, "trajectory": r}).to_string()
    }

    /// Steps `1..=n` appended; their log lines.
    fn steps(dir: &Path, n: u64) -> Vec<String> {
        (1..=n)
            .map(|s| line(s, &write(dir, &sample(s)).unwrap().reference))
            .collect()
    }

    /// The names in the task folder's trajectory folder.
    fn names(dir: &Path) -> Vec<String> {
        fs::read_dir(dir.join(TRAJECTORY_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn pack_len(dir: &Path) -> u64 {
        fs::metadata(dir.join(pack_path())).unwrap().len()
    }

    /// Every member of a pack, decompressed as `zcat` does (all members in order).
    fn zcat(path: &Path) -> Vec<Trajectory> {
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(File::open(path).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn steps_append_to_one_pack_that_reads_back_by_offset_and_as_json_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let w1 = write(tmp.path(), &sample(1)).unwrap();
        let w2 = write(tmp.path(), &sample(2)).unwrap();
        assert_eq!(w1.reference.file, "trajectories/steps.jsonl.gz");
        assert_eq!(w1.reference.offset, Some(0));
        assert_eq!(w2.reference.offset, Some(w1.reference.bytes));
        assert!(w2.reference.bytes < w2.reference.raw_bytes);
        // The first append flushes the folder that holds the new pack; later ones don't.
        assert_eq!((w1.to_flush.len(), w2.to_flush.len()), (2, 1));
        assert_eq!(read(tmp.path(), &w2.reference).unwrap(), sample(2));
        assert_eq!(read(tmp.path(), &w1.reference).unwrap(), sample(1));
        assert_eq!(zcat(&tmp.path().join(pack_path())), [sample(1), sample(2)]);
        assert_eq!(names(tmp.path()), [PACK_NAME]);
    }

    #[test]
    fn a_step_file_of_an_earlier_version_still_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let t = sample(3);
        let json = serde_json::to_vec(&t).unwrap();
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&json).unwrap();
        let compressed = gz.finish().unwrap();
        fs::create_dir_all(tmp.path().join(TRAJECTORY_DIR)).unwrap();
        fs::write(
            tmp.path().join("trajectories/step-0003.json.gz"),
            &compressed,
        )
        .unwrap();
        // The line as that version wrote it: no offset.
        let old = format!(
            "{{\"file\":\"trajectories/step-0003.json.gz\",\"sha256\":\"{}\",\"bytes\":{},\"raw_bytes\":{}}}",
            agentforge_core::hash::tagged(&compressed),
            compressed.len(),
            json.len()
        );
        let r: TrajectoryRef = serde_json::from_str(&old).unwrap();
        assert_eq!(r.offset, None);
        assert_eq!(read(tmp.path(), &r).unwrap(), t);
        // Its name in a pack's place, or the pack's without an offset, reads nothing.
        let mut wrong = r.clone();
        wrong.offset = Some(0);
        let e = read(tmp.path(), &wrong).unwrap_err().to_string();
        assert!(e.contains("not a trajectory file name"), "{e}");
    }

    #[test]
    fn a_changed_member_a_short_pack_or_a_foreign_name_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let w1 = write(tmp.path(), &sample(1)).unwrap();
        let w2 = write(tmp.path(), &sample(2)).unwrap();
        let p = tmp.path().join(pack_path());
        let mut bytes = fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&p, &bytes).unwrap();
        let e = read(tmp.path(), &w2.reference).unwrap_err().to_string();
        assert!(e.contains("do not match"), "{e}");
        // The member before it is untouched.
        assert_eq!(read(tmp.path(), &w1.reference).unwrap(), sample(1));
        // A pack cut short (a power cut): the line points past its end.
        fs::write(&p, &bytes[..bytes.len() - 5]).unwrap();
        let e = read(tmp.path(), &w2.reference).unwrap_err().to_string();
        assert!(e.contains("did not reach the disk"), "{e}");
        for name in [
            "../../etc/passwd",
            "trajectories/other.gz",
            "trajectories/x/steps.jsonl.gz",
        ] {
            let mut foreign = w1.reference.clone();
            foreign.file = name.into();
            let e = read(tmp.path(), &foreign).unwrap_err().to_string();
            assert!(e.contains("not a trajectory file name"), "{name}: {e}");
        }
        let mut huge = w1.reference.clone();
        huge.bytes = MAX_TRAJECTORY_BYTES + 1;
        let e = read(tmp.path(), &huge).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
    }

    #[test]
    fn undone_steps_keep_their_trajectories_beside_their_archive() {
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 3);
        let archive = "actions.undone-17.jsonl";
        let undone: Vec<&str> = lines[1..].iter().map(String::as_str).collect();
        let start = undone_start(undone.iter().copied());
        let end_of_1 = recorded_end(&lines[0]);
        assert_eq!(start, Some(end_of_1));
        let moved: Vec<String> = undone
            .iter()
            .map(|l| archived_line(l, archive, start))
            .collect();
        assert!(
            moved[1].contains("\"trajectories/undone-17/steps.jsonl.gz\""),
            "{}",
            moved[1]
        );
        assert_eq!(archived_line("not json", archive, start), "not json");
        archive_after(tmp.path(), 1, archive, start).unwrap();
        // A second pass (the first stopped before the log was cut) changes nothing.
        archive_after(tmp.path(), 1, archive, start).unwrap();
        assert_eq!(pack_len(tmp.path()), end_of_1);
        assert_eq!(zcat(&tmp.path().join(pack_path())), [sample(1)]);
        let archived = tmp.path().join("trajectories/undone-17").join(PACK_NAME);
        assert_eq!(zcat(&archived), [sample(2), sample(3)]);
        // The archived lines point at their members in the archive's pack.
        for (l, s) in moved.iter().zip(2..) {
            let (offset, bytes) = pack_member(l).unwrap();
            let all = fs::read(&archived).unwrap();
            let member = &all[offset as usize..(offset + bytes) as usize];
            let mut json = Vec::new();
            GzDecoder::new(member).read_to_end(&mut json).unwrap();
            assert_eq!(
                serde_json::from_slice::<Trajectory>(&json).unwrap(),
                sample(s)
            );
        }
        // The steps run again append after step 1; recovery leaves the archive alone.
        let again = write(tmp.path(), &sample(2)).unwrap();
        assert_eq!(again.reference.offset, Some(end_of_1));
        let log = format!("{}\n{}\n", lines[0], line(2, &again.reference));
        assert!(remove_after(tmp.path(), 2, recorded_end(&log))
            .unwrap()
            .is_empty());
        assert_eq!(zcat(&archived), [sample(2), sample(3)]);
        // A pass of the same undo after that (its marker left behind) keeps the archive.
        archive_after(tmp.path(), 1, archive, start).unwrap();
        assert_eq!(zcat(&archived), [sample(2), sample(3)]);
    }

    #[test]
    fn the_pack_past_the_last_recorded_member_is_cut_torn_or_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 4);
        fs::write(tmp.path().join("trajectories/.step-0005.tmp-1"), b"x").unwrap();
        // Steps 3 and 4 were written but never recorded; step 5 was killed mid-append.
        write(tmp.path(), &sample(5)).unwrap();
        let torn = pack_len(tmp.path()) - 7;
        OpenOptions::new()
            .write(true)
            .open(tmp.path().join(pack_path()))
            .unwrap()
            .set_len(torn)
            .unwrap();
        let log = format!("{}\n{}\n", lines[0], lines[1]);
        let end = recorded_end(&log);
        assert_eq!(remove_after(tmp.path(), 2, end).unwrap(), [3, 4]);
        assert_eq!(pack_len(tmp.path()), end);
        assert_eq!(zcat(&tmp.path().join(pack_path())), [sample(1), sample(2)]);
        assert_eq!(names(tmp.path()), [PACK_NAME]);
        // Nothing recorded at all: the whole pack goes.
        assert_eq!(
            remove_after(tmp.path(), 0, recorded_end("")).unwrap(),
            [1, 2]
        );
        assert_eq!(pack_len(tmp.path()), 0);
    }

    #[test]
    fn a_pack_shorter_than_its_log_says_is_never_lengthened() {
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 2);
        let full = pack_len(tmp.path());
        // A power cut kept the line but not all of the member it points to.
        let f = OpenOptions::new()
            .write(true)
            .open(tmp.path().join(pack_path()))
            .unwrap();
        f.set_len(full - 10).unwrap();
        let log = lines.join("\n");
        assert_eq!(recorded_end(&log), full);
        assert!(remove_after(tmp.path(), 2, full).unwrap().is_empty());
        assert_eq!(pack_len(tmp.path()), full - 10);
    }

    #[test]
    fn after_a_power_cut_recovery_cuts_after_the_last_intact_member() {
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 2);
        let log = lines.join("\n");
        let end_of_1 = recorded_end(&lines[0]);
        assert_eq!(intact_end(tmp.path(), &log).unwrap(), pack_len(tmp.path()));
        // The power cut kept both lines but only part of step 2's member; step 3 then
        // appended after that part and was killed before its line.
        let f = OpenOptions::new()
            .write(true)
            .open(tmp.path().join(pack_path()))
            .unwrap();
        f.set_len(pack_len(tmp.path()) - 10).unwrap();
        write(tmp.path(), &sample(3)).unwrap();
        let end = intact_end(tmp.path(), &log).unwrap();
        assert_eq!(end, end_of_1);
        remove_after(tmp.path(), 2, end).unwrap();
        // Nothing of step 3 is left to be read as a step; step 2's line says what it lost.
        assert_eq!(zcat(&tmp.path().join(pack_path())), [sample(1)]);
        let r2: TrajectoryRef = serde_json::from_value(
            serde_json::from_str::<serde_json::Value>(&lines[1]).unwrap()["trajectory"].clone(),
        )
        .unwrap();
        let e = read(tmp.path(), &r2).unwrap_err().to_string();
        assert!(e.contains("did not reach the disk"), "{e}");
        // A member of the right length whose bytes are not the line's is not intact either.
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 2);
        let p = tmp.path().join(pack_path());
        let mut bytes = fs::read(&p).unwrap();
        let last = bytes.len() - 3;
        bytes[last] = 0;
        fs::write(&p, bytes).unwrap();
        assert_eq!(
            intact_end(tmp.path(), &lines.join("\n")).unwrap(),
            recorded_end(&lines[0])
        );
        // No pack, or no line pointing into one: nothing to keep.
        assert_eq!(intact_end(tmp.path(), "{\"step\":1}").unwrap(), 0);
        assert_eq!(intact_end(&tmp.path().join("none"), &lines[0]).unwrap(), 0);
    }

    #[test]
    fn lines_of_per_step_files_or_without_trajectories_point_into_no_pack() {
        assert_eq!(pack_member("{\"step\":1}"), None);
        assert_eq!(pack_member("not json \"offset\""), None);
        let old = "{\"step\":1,\"trajectory\":{\"file\":\"trajectories/step-0001.json.gz\",\"sha256\":\"s\",\"bytes\":5,\"raw_bytes\":9},\"note\":\"offset\"}";
        assert_eq!(pack_member(old), None);
        // The last line with a member gives the end, whatever lines follow it.
        let log = "{\"step\":1,\"trajectory\":{\"file\":\"trajectories/steps.jsonl.gz\",\"offset\":0,\"sha256\":\"s\",\"bytes\":40,\"raw_bytes\":90}}\n{\"step\":2,\"trajectory\":null}\n";
        assert_eq!(recorded_end(log), 40);
        let hostile = "{\"step\":1,\"trajectory\":{\"file\":\"trajectories/steps.jsonl.gz\",\"offset\":18446744073709551615,\"sha256\":\"s\",\"bytes\":40,\"raw_bytes\":90}}";
        assert_eq!(recorded_end(hostile), u64::MAX);
        // Recovery neither wraps nor panics on it: the member before it is the last whole.
        let tmp = tempfile::tempdir().unwrap();
        let lines = steps(tmp.path(), 2);
        let full = pack_len(tmp.path());
        let log = format!("{}\n{}\n{hostile}\n", lines[0], lines[1]);
        assert_eq!(intact_end(tmp.path(), &log).unwrap(), full);
        assert!(remove_after(tmp.path(), 3, full).unwrap().is_empty());
        assert_eq!(pack_len(tmp.path()), full);
    }
}
