//! The task log's fsync off the step's critical path.
//!
//! A log line is written in one `write` before [`append_line`] returns, so a kill loses
//! nothing from then on; the flush to the disk (what a power loss needs) runs on one
//! background thread while the host asks the model for the next step. [`wait_flushed`]
//! is the barrier: the executor calls it before a step's action may change anything, and
//! [`append_line`] before it writes, so the disk never holds an effect of step N+1, or its
//! line, without step N's line. One flush is in flight at most.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, OnceLock};

/// A failed flush: the log and the OS error.
#[derive(Debug)]
pub struct FlushError {
    /// The log whose flush failed.
    pub path: PathBuf,
    /// The OS error.
    pub source: io::Error,
}

/// One flush: the log, and the files written for its line (synced first).
type Job = (PathBuf, File, Vec<File>);

struct Flusher {
    jobs: Mutex<Sender<Job>>,
    progress: Mutex<Progress>,
    done: Condvar,
}

#[derive(Default)]
struct Progress {
    submitted: u64,
    flushed: u64,
    /// Failures not yet reported by [`wait_flushed`] (each to the caller of its log).
    failed: Vec<FlushError>,
}

fn flusher() -> &'static Flusher {
    static FLUSHER: OnceLock<Flusher> = OnceLock::new();
    FLUSHER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("agentforge-log-flush".into())
            .spawn(move || {
                for (path, file, first) in rx {
                    let result = sync_all(&first).and_then(|()| file.sync_all());
                    let f = flusher();
                    let mut p = f.progress.lock().unwrap_or_else(|e| e.into_inner());
                    p.flushed += 1;
                    if let Err(source) = result {
                        p.failed.push(FlushError { path, source });
                    }
                    f.done.notify_all();
                }
            });
        if spawned.is_err() {
            // No thread: `submit` flushes in place (its send fails, see there).
            let (dead, _) = channel();
            return Flusher {
                jobs: Mutex::new(dead),
                progress: Mutex::default(),
                done: Condvar::new(),
            };
        }
        Flusher {
            jobs: Mutex::new(tx),
            progress: Mutex::default(),
            done: Condvar::new(),
        }
    })
}

/// Waits until every line appended through [`append_line`] so far is on the disk;
/// returns a flush of the log at `path` that failed (reported once).
pub fn wait_flushed(path: &Path) -> Result<(), FlushError> {
    let f = flusher();
    let mut p = f.progress.lock().unwrap_or_else(|e| e.into_inner());
    while p.flushed < p.submitted {
        p = f.done.wait(p).unwrap_or_else(|e| e.into_inner());
    }
    match p.failed.iter().position(|e| e.path == path) {
        Some(i) => Err(p.failed.remove(i)),
        None => Ok(()),
    }
}

/// Appends `line` (a whole log line, its newline included) to the log at `path` in one
/// write, after the previous lines are flushed, and has it flushed in the background (see
/// the module). On failure, says what it was doing ("cannot fsync" for an earlier line's
/// flush) with the error.
pub fn append_line(path: &Path, line: &[u8]) -> Result<(), (&'static str, io::Error)> {
    append_line_after(path, line, Vec::new())
}

/// [`append_line`], with files the line refers to (written before it, such as a step's
/// trajectory pack) flushed by the same background job, before the log.
pub fn append_line_after(
    path: &Path,
    line: &[u8],
    first: Vec<File>,
) -> Result<(), (&'static str, io::Error)> {
    wait_flushed(path).map_err(|e| ("cannot fsync", e.source))?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| ("cannot open", e))?;
    file.write_all(line).map_err(|e| ("cannot append to", e))?;
    let f = flusher();
    f.progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .submitted += 1;
    let sent =
        f.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send((path.to_path_buf(), file, first));
    if let Err(std::sync::mpsc::SendError((_, file, first))) = sent {
        // No flush thread: flush here, and count it done.
        let result = sync_all(&first).and_then(|()| file.sync_all());
        let mut p = f.progress.lock().unwrap_or_else(|e| e.into_inner());
        p.flushed += 1;
        result.map_err(|e| ("cannot fsync", e))?;
    }
    Ok(())
}

/// Flushes each file (a folder's handle flushes its entries).
fn sync_all(files: &[File]) -> io::Result<()> {
    files.iter().try_for_each(File::sync_all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_at_once_and_flushed_by_the_barrier() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("log.jsonl");
        for i in 0..20 {
            append_line(&log, format!("{i}\n").as_bytes()).unwrap();
            // Written before the call returns (a kill from here on loses nothing).
            let text = std::fs::read_to_string(&log).unwrap();
            assert_eq!(text.lines().count(), i + 1);
        }
        // The counters are process-wide and other tests append concurrently, so the
        // barrier is checked against what was submitted by the time our lines were:
        // both counters only grow, so later appends cannot break this.
        let ours = flusher().progress.lock().unwrap().submitted;
        wait_flushed(&log).unwrap();
        let flushed = flusher().progress.lock().unwrap().flushed;
        assert!(flushed >= ours, "{flushed} flushed of {ours} submitted");
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let err = append_line(&tmp.path().join("missing/log.jsonl"), b"x\n").unwrap_err();
        assert_eq!(err.0, "cannot open");
    }
}
