//! Rewinding a task to an earlier step (`agentforge undo`): the log keeps the records up
//! to that step, the later ones move to an archive beside it (the audit trail loses
//! nothing; their trajectories move to `trajectories/undone-<ms>/`), and the state, the
//! working memory and the snapshots are put back as they were after that step, so
//! `resume` continues from there.
//!
//! A rewind is several writes; a marker ([`REWIND_FILE`]) written first makes it
//! restartable: [`TaskDir::finish_rewind`] completes one a kill interrupted, and
//! [`TaskDir::rewind`] does so before starting another.

use std::fs;
use std::io;
use std::path::Path;

use agentforge_core::state::{ActionRecord, TaskState};
use agentforge_core::working_memory::{WorkingMemory, DEFAULT_MAX_ITEMS};
use serde::{Deserialize, Serialize};

use crate::state_store::{atomic_rewrite, atomic_write, StoreError, TaskDir};

/// The marker of a rewind in progress, in the task folder.
pub const REWIND_FILE: &str = "rewind.json";

/// A rewind in progress, as its marker records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rewind {
    /// The last step kept.
    pub to_step: u64,
    /// The archive the later records go to (a file name in the task folder).
    pub archive: String,
    /// The state after step 0 (the task as created), for a rewind to step 0.
    pub initial: Option<TaskState>,
}

/// What a rewind did.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewound {
    /// The last step kept.
    pub to_step: u64,
    /// How many records moved to the archive.
    pub archived: usize,
    /// The archive's path (none when no record was moved).
    pub archive: Option<std::path::PathBuf>,
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// The step of one log line, read without parsing its state.
fn step_of(line: &str, log: &Path) -> Result<u64, StoreError> {
    #[derive(Deserialize)]
    struct Step {
        step: u64,
    }
    serde_json::from_str::<Step>(line)
        .map(|s| s.step)
        .map_err(|e| StoreError::Corrupt {
            path: log.display().to_string(),
            message: format!("a record does not parse: {e}"),
        })
}

impl TaskDir {
    /// Rewinds the task to just after `to_step` (0: before its first step; then
    /// `initial` is the state to put back, the task as created). The caller holds the
    /// task's lock and has run [`TaskDir::recover`]. A rewind a kill interrupted is
    /// finished first, whatever `to_step` says.
    pub fn rewind(&self, to_step: u64, initial: Option<&TaskState>) -> Result<Rewound, StoreError> {
        if let Some(done) = self.finish_rewind()? {
            return Ok(done);
        }
        let millis = chrono::Utc::now().timestamp_millis();
        let marker = Rewind {
            to_step,
            archive: format!("actions.undone-{millis}.jsonl"),
            initial: initial.cloned(),
        };
        if to_step == 0 && initial.is_none() {
            return Err(StoreError::Corrupt {
                path: self.path().display().to_string(),
                message: "a rewind to step 0 needs the task's initial state".into(),
            });
        }
        let p = self.path().join(REWIND_FILE);
        let bytes = serde_json::to_vec_pretty(&marker).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        atomic_write(&p, &bytes).map_err(io_err("cannot write", &p))?;
        self.apply_rewind(&marker)
    }

    /// Finishes a rewind a kill interrupted (its marker is there); `None` when there is
    /// none. Every step of it can be done twice.
    pub fn finish_rewind(&self) -> Result<Option<Rewound>, StoreError> {
        let p = self.path().join(REWIND_FILE);
        let text = match fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("cannot read", &p)(e)),
        };
        let marker: Rewind = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        self.apply_rewind(&marker).map(Some)
    }

    fn apply_rewind(&self, marker: &Rewind) -> Result<Rewound, StoreError> {
        let log = self.log_path();
        let text = match fs::read_to_string(&log) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io_err("cannot read", &log)(e)),
        };
        let (mut kept, mut later) = (String::new(), String::new());
        let mut last_kept: Option<&str> = None;
        let mut undone_lines = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if step_of(line, &log)? <= marker.to_step {
                kept.push_str(line);
                kept.push('\n');
                last_kept = Some(line);
            } else {
                undone_lines.push(line);
            }
        }
        // Where the undone steps' trajectories start in the pack; the archived lines
        // point into the archive's pack, which starts there.
        let undone_start = crate::trajectory::undone_start(undone_lines.iter().copied());
        for line in &undone_lines {
            later.push_str(&crate::trajectory::archived_line(
                line,
                &marker.archive,
                undone_start,
            ));
            later.push('\n');
        }
        let mut archived = undone_lines.len();
        // The archive first: once the log is cut, these records live only there. (On a
        // second pass the log holds none of them and the archive is left as it is.)
        let archive = self.path().join(&marker.archive);
        if archived > 0 {
            atomic_write(&archive, later.as_bytes()).map_err(io_err("cannot write", &archive))?;
            // The undone steps' trajectories go with their records (whose lines in the
            // archive name them there), before the log is cut: `recover` would take
            // them for orphans and cut them off the pack.
            crate::trajectory::archive_after(
                self.path(),
                marker.to_step,
                &marker.archive,
                undone_start,
            )?;
            atomic_rewrite(&log, kept.as_bytes()).map_err(io_err("cannot rewrite", &log))?;
            agentforge_core::fault::point("rewind_log", marker.to_step);
        }
        // Money spent stays spent: the undone steps' costs stay in the task's totals (a
        // cost cap would otherwise let an undone task spend past it). On a second pass
        // the log holds none of them; the archive does.
        let undone_lines = if archived > 0 {
            later.clone()
        } else {
            fs::read_to_string(&archive).unwrap_or_default()
        };
        let mut undone_costs = Vec::new();
        for line in undone_lines.lines().filter(|l| !l.trim().is_empty()) {
            #[derive(Deserialize)]
            struct Cost {
                #[serde(default)]
                cost_usd_micros: Option<agentforge_core::cost::MicroUsd>,
            }
            let c: Cost = serde_json::from_str(line).map_err(|e| StoreError::Corrupt {
                path: archive.display().to_string(),
                message: format!("an undone record does not parse: {e}"),
            })?;
            undone_costs.push(c.cost_usd_micros);
        }
        let mut state = match last_kept {
            Some(line) => {
                let r: ActionRecord =
                    serde_json::from_str(line).map_err(|e| StoreError::Corrupt {
                        path: log.display().to_string(),
                        message: format!("step {}: {e}", marker.to_step),
                    })?;
                r.state_after
            }
            None => marker.initial.clone().ok_or_else(|| StoreError::Corrupt {
                path: log.display().to_string(),
                message: format!(
                    "no record up to step {} and no initial state to go back to",
                    marker.to_step
                ),
            })?,
        };
        if !undone_costs.is_empty() {
            let totals = state.cost.get_or_insert_with(Default::default);
            for c in undone_costs {
                totals.add(c);
            }
        }
        self.save_state(&state)?;
        // What was loaded after the kept step may describe files as the undone steps left
        // them: the memory starts empty, stamped with the step it is now after.
        let max_items = self
            .load_working_memory()
            .map_or(DEFAULT_MAX_ITEMS, |m| m.max_items);
        let mut memory = WorkingMemory::with_capacity(max_items);
        memory.step = state.step;
        self.save_working_memory(&memory)?;
        // A snapshot of a later step would be "restored" by the next resume.
        let snaps = self.snapshots_dir();
        if let Ok(entries) = fs::read_dir(&snaps) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let later_step = name
                    .strip_prefix("step-")
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n > marker.to_step);
                if later_step {
                    let path = e.path();
                    fs::remove_dir_all(&path).map_err(io_err("cannot remove", &path))?;
                }
            }
        }
        let p = self.path().join(REWIND_FILE);
        fs::remove_file(&p).map_err(io_err("cannot remove", &p))?;
        if archived == 0 {
            // A second pass: the first one moved them.
            archived = fs::read_to_string(&archive).map_or(0, |t| t.lines().count());
        }
        Ok(Rewound {
            to_step: state.step,
            archived,
            archive: (archived > 0 || archive.exists()).then_some(archive),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_store::TaskStore;
    use agentforge_core::task::TaskSpec;

    fn spec() -> TaskSpec {
        TaskSpec::parse(
            "id: t1\ntask_type: fix_violation\ngoal: fix it\n",
            "task.yaml",
        )
        .unwrap()
    }

    /// A record of `step` whose state says so (built from JSON: only the fields a log
    /// line must have).
    fn record(step: u64, initial: &TaskState) -> ActionRecord {
        let mut after = initial.clone();
        after.step = step;
        after.files_modified = vec![format!("f{step}.txt")];
        serde_json::from_value(serde_json::json!({
            "step": step, "phase": "implement", "action": "write_file",
            "target": format!("f{step}.txt"), "parameters": {}, "result": "success",
            "summary": "wrote", "duration_ms": 1, "timestamp": "2026-01-01T00:00:00Z",
            "context_tokens": 100, "usage": {"input_tokens": 0, "output_tokens": 0},
            "state_after": after,
        }))
        .unwrap()
    }

    fn task_with_steps(n: u64) -> (tempfile::TempDir, TaskDir, TaskState) {
        let tmp = tempfile::tempdir().unwrap();
        let initial = TaskState::initial(&spec(), "analyze", 10);
        let dir = TaskStore::new(tmp.path())
            .create(&spec(), &initial)
            .unwrap();
        for s in 1..=n {
            let r = record(s, &initial);
            dir.append_action(&r).unwrap();
            dir.save_state(&r.state_after).unwrap();
            std::fs::create_dir_all(dir.snapshots_dir().join(format!("step-{s:04}"))).unwrap();
        }
        dir.wait_flushed().unwrap();
        (tmp, dir, initial)
    }

    #[test]
    fn a_rewind_keeps_the_steps_up_to_its_target_and_archives_the_rest() {
        let (_tmp, dir, initial) = task_with_steps(5);
        let done = dir.rewind(2, Some(&initial)).unwrap();
        assert_eq!((done.to_step, done.archived), (2, 3));
        let steps: Vec<u64> = dir.read_actions().unwrap().iter().map(|r| r.step).collect();
        assert_eq!(steps, [1, 2]);
        let state = dir.load_state().unwrap();
        assert_eq!(state.step, 2);
        assert_eq!(state.files_modified, ["f2.txt"]);
        let archive = std::fs::read_to_string(done.archive.unwrap()).unwrap();
        let archived: Vec<u64> = archive
            .lines()
            .map(|l| step_of(l, Path::new("a")).unwrap())
            .collect();
        assert_eq!(archived, [3, 4, 5]);
        assert_eq!(dir.load_working_memory().unwrap().step, 2);
        let mut snaps: Vec<String> = std::fs::read_dir(dir.snapshots_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        snaps.sort();
        assert_eq!(snaps, ["step-0001", "step-0002"]);
        assert!(!dir.path().join(REWIND_FILE).exists());
        // What recovery sees next is consistent: nothing to repair.
        let (state, recovery) = dir.recover().unwrap();
        assert_eq!(state.step, 2);
        assert!(!recovery.repaired(), "{recovery:?}");
    }

    #[test]
    fn the_undone_steps_costs_stay_in_the_task_totals() {
        let tmp = tempfile::tempdir().unwrap();
        let initial = TaskState::initial(&spec(), "analyze", 10);
        let dir = TaskStore::new(tmp.path())
            .create(&spec(), &initial)
            .unwrap();
        let mut spent = agentforge_core::cost::CostTotals::default();
        for s in 1..=3u64 {
            let mut r = record(s, &initial);
            let cost = (s != 2).then_some(agentforge_core::cost::MicroUsd(1_000 * s));
            r.cost_usd_micros = cost;
            spent.add(cost);
            r.state_after.cost = Some(spent);
            dir.append_action(&r).unwrap();
            dir.save_state(&r.state_after).unwrap();
        }
        dir.wait_flushed().unwrap();
        dir.rewind(1, Some(&initial)).unwrap();
        let cost = dir.load_state().unwrap().cost.unwrap();
        // Step 1's 1,000 kept, step 3's 3,000 still spent, step 2's unknown.
        assert_eq!(cost.usd_micros, agentforge_core::cost::MicroUsd(4_000));
        assert_eq!(cost.unpriced_steps, 1);
    }

    #[test]
    fn a_rewind_to_step_zero_puts_back_the_task_as_created() {
        let (_tmp, dir, initial) = task_with_steps(3);
        assert!(dir.rewind(0, None).is_err(), "no initial state");
        assert!(!dir.path().join(REWIND_FILE).exists());
        let done = dir.rewind(0, Some(&initial)).unwrap();
        assert_eq!((done.to_step, done.archived), (0, 3));
        assert!(dir.read_actions().unwrap().is_empty());
        // The task as created, but for what its undone steps cost (unknown here: the
        // records carry no price).
        let mut state = dir.load_state().unwrap();
        assert_eq!(state.cost.take().unwrap().unpriced_steps, 3);
        assert_eq!(state, initial);
        let (mut state, _) = dir.recover().unwrap();
        state.cost = None;
        assert_eq!(state, initial);
    }

    #[test]
    fn a_rewind_cut_short_by_a_kill_is_finished_by_the_next_call() {
        let (_tmp, dir, initial) = task_with_steps(4);
        // Killed after the marker and the archive were written, before the log was cut.
        let marker = Rewind {
            to_step: 1,
            archive: "actions.undone-1.jsonl".into(),
            initial: Some(initial.clone()),
        };
        atomic_write(
            &dir.path().join(REWIND_FILE),
            &serde_json::to_vec(&marker).unwrap(),
        )
        .unwrap();
        // The next call (another target) finishes the interrupted one first.
        let done = dir.rewind(3, Some(&initial)).unwrap();
        assert_eq!((done.to_step, done.archived), (1, 3));
        assert_eq!(dir.load_state().unwrap().step, 1);
        // Killed after the log was cut, before the state was written: the marker is
        // still there and a second pass gives the same result.
        atomic_write(
            &dir.path().join(REWIND_FILE),
            &serde_json::to_vec(&marker).unwrap(),
        )
        .unwrap();
        let again = dir.finish_rewind().unwrap().unwrap();
        assert_eq!((again.to_step, again.archived), (1, 3));
        assert_eq!(dir.finish_rewind().unwrap(), None);
        let steps: Vec<u64> = dir.read_actions().unwrap().iter().map(|r| r.step).collect();
        assert_eq!(steps, [1]);
    }
}
