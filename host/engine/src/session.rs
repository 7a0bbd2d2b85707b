//! `agentforge run --record FILE`: a run written as a session the replay provider plays
//! back (the JSONL of [`agentforge_providers::ReplayProvider`], line N answering step N).
//!
//! The session is drawn from the task's trajectories, the record of what each step got
//! from the model: when a run starts, the file is rewritten with the answers of the steps
//! already recorded (so a resume after a kill, or a run recorded only from its resume,
//! still gives a whole session), then each step's answer is appended once its log line
//! is written. A kill between the two leaves the file a line short, which the next start
//! repairs; the file never holds a step the log does not.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use agentforge_core::model::ModelReply;
use agentforge_core::trajectory::Trajectory;
use agentforge_store::state_store::{atomic_write, StoreError, TaskDir};

/// Why a session cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A recorded step has no trajectory (it ran before trajectories were kept).
    #[error("step {step} of task `{task}` has no trajectory (it was recorded before trajectories were kept), so --record cannot write its answer; record a new task instead")]
    NoTrajectory {
        /// The task.
        task: String,
        /// The step.
        step: u64,
    },
    /// Reading the task's log or a trajectory, or writing the file, failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes the session of one task's run to a file.
#[derive(Debug, Clone)]
pub struct SessionRecorder {
    path: PathBuf,
}

/// One session line for a step: its answer, usage and model, as
/// [`agentforge_providers::record_line`] writes them.
pub fn session_line(t: &Trajectory) -> String {
    let line = agentforge_providers::record_line(&ModelReply::from(&t.answer), &t.usage);
    // The model that answered replays as the same (`ModelResponse::model`).
    match serde_json::from_str::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.insert("model".into(), t.model.clone().into());
            serde_json::Value::Object(map).to_string()
        }
        _ => line,
    }
}

impl SessionRecorder {
    /// A recorder writing `path`.
    pub fn new(path: &Path) -> SessionRecorder {
        SessionRecorder {
            path: path.to_path_buf(),
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rewrites the file (atomically) with the answers of the task's steps recorded so
    /// far, read from their trajectories. Returns how many lines it holds.
    pub fn begin(&self, dir: &TaskDir) -> Result<u64, SessionError> {
        let mut text = String::new();
        let records = dir.read_actions()?;
        for r in &records {
            let reference = r
                .trajectory
                .as_ref()
                .ok_or_else(|| SessionError::NoTrajectory {
                    task: r.state_after.task_id.clone(),
                    step: r.step,
                })?;
            text.push_str(&session_line(&dir.read_trajectory(reference)?));
            text.push('\n');
        }
        atomic_write(&self.path, text.as_bytes()).map_err(|source| StoreError::Io {
            op: "cannot write the session",
            path: self.path.display().to_string(),
            source,
        })?;
        Ok(records.len() as u64)
    }

    /// Appends one step's answer (after its log line is written).
    pub fn append(&self, t: &Trajectory) -> Result<(), StoreError> {
        let io = |op: &'static str| {
            let path = self.path.display().to_string();
            move |source| StoreError::Io { op, path, source }
        };
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(io("cannot open the session"))?;
        f.write_all(format!("{}\n", session_line(t)).as_bytes())
            .map_err(io("cannot append to the session"))
    }
}
