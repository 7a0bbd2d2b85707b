//! Sprint folders on disk (issue 12, item 1): `.agentforge/sprints/<id>/` holds the
//! sprint's inputs (`VISION.md`, `PRD.md`), its state (`sprint.json`) and an
//! append-only, fsynced log (`iterations.jsonl`) of every recorded event: each pre-loop
//! gate and each loop iteration, with the decision, what it was taken from, the outcome,
//! the measured value before and after, the tokens per role, and the state after it.
//!
//! As for tasks, the log line is the one durable write: an event is recorded when its
//! line is fsynced; `sprint.json` is a cache of the last line, rebuilt from it on
//! [`SprintDir::recover`] when it lags, is empty or does not parse. A kill at any instant
//! loses at most the event being recorded (which then runs again) and never records one
//! twice: [`SprintDir::append`] refuses a sequence number that is not the next one.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use agentforge_store::state_store::{append_synced_line, atomic_rewrite, atomic_write};
use agentforge_value_loop::{Decision, SprintState, ValueMeasure};
use serde::{Deserialize, Serialize};

pub mod probes;
pub mod report_tools;
pub mod roles;
pub mod runner;

/// The log's file name.
pub const LOG_FILE: &str = "iterations.jsonl";
/// The state cache's file name.
pub const STATE_FILE: &str = "sprint.json";

/// Errors of the sprint folder.
#[derive(Debug, thiserror::Error)]
pub enum SprintStoreError {
    /// An I/O error on a named path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or folder.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A stored file does not parse or contradicts the log.
    #[error("corrupt sprint file {path}: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The sprint exists already.
    #[error("sprint `{id}` already exists at {path}; resume it or choose another id")]
    Exists {
        /// Its id.
        id: String,
        /// Its folder.
        path: String,
    },
    /// No such sprint.
    #[error("no sprint `{id}` under {root}")]
    NotFound {
        /// The id asked for.
        id: String,
        /// Where it was looked for.
        root: String,
    },
    /// An event out of sequence: recording it would lose or repeat one.
    #[error("event {got} is out of sequence in {path}: the next is {expected}")]
    Sequence {
        /// The log.
        path: String,
        /// The next number.
        expected: u64,
        /// The number given.
        got: u64,
    },
    /// The state file is of another format version.
    #[error(
        "{path} is sprint state version {found}; this agentforge reads versions 1 to {expected}"
    )]
    Version {
        /// The file.
        path: String,
        /// Its version.
        found: u32,
        /// Ours.
        expected: u32,
    },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SprintStoreError + 'a {
    move |source| SprintStoreError::Io {
        op,
        path: path.display().to_string(),
        source,
    }
}

/// What an event was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// A pre-loop gate (input check, vision refinement, discovery, critique, plan, review).
    Gate {
        /// The gate.
        name: String,
        /// Its verdict (`PASS`, `NEEDS_REVISION`, `APPROVE`...).
        verdict: String,
    },
    /// One iteration of the value loop.
    Iteration {
        /// What the engine decided.
        decision: Decision,
        /// Value measured before the action.
        measure_before: ValueMeasure,
        /// Value measured after it.
        measure_after: ValueMeasure,
        /// Whether measured value rose above its high-water mark.
        progressed: bool,
    },
    /// One iteration of the feature-list policy (seed 003's session state machine).
    Feature {
        /// What the policy decided.
        decision: agentforge_value_loop::features::FeatureDecision,
        /// Features passed before the iteration.
        passed_before: u32,
        /// Features passed after it (measured from the verify commands' exit codes).
        passed_after: u32,
    },
    /// The loop waits for a person (a task needs them); no iteration is spent.
    Paused {
        /// What they are asked to do, and how the host will know it is done.
        instructions: String,
    },
    /// The sprint ended (the loop stopped, the exit gate passed, or the pre-loop failed).
    Finished {
        /// How it ended.
        end: runner::SprintOutcome,
    },
}

/// One line of `iterations.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// 1, 2, 3... with no gap.
    pub seq: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
    /// One line for people (`T3 done; 4/6 verifications pass`).
    pub outcome: String,
    /// The role tasks it ran (their folders under `.agentforge/tasks/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_tasks: Vec<String>,
    /// Tokens per role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens: BTreeMap<String, u64>,
    /// Cost per role: the sum of the role tasks' recorded costs (unknown for steps of an
    /// unpriced model, see [`agentforge_core::cost`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cost: BTreeMap<String, agentforge_core::cost::CostTotals>,
    /// The end this event brought (the exit gate passed, a gate failed the sprint): in
    /// the same line as the event, so no kill can separate them.
    /// (Named apart from a `finished` event's `end`: both sit in one flattened line.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<runner::SprintOutcome>,
    /// The process monitor after the event (value loop iterations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<agentforge_value_loop::monitor::ProcessMonitor>,
    /// The sprint state after the event: what `sprint.json` caches.
    pub state_after: SprintState,
}

/// The cost of each role over `events` (the sum of its role tasks' recorded costs).
pub fn cost_per_role(events: &[Event]) -> BTreeMap<String, agentforge_core::cost::CostTotals> {
    let mut per_role: BTreeMap<String, agentforge_core::cost::CostTotals> = BTreeMap::new();
    for e in events {
        for (role, c) in &e.cost {
            per_role.entry(role.clone()).or_default().merge(c);
        }
    }
    per_role
}

/// A sprint's cost for people: `$0.42 (builder $0.30, planner $0.12)`. While any role's
/// step has an unknown cost (an unpriced model, a replayed call without usage) the total
/// is unknown and says so, never `$0.00`: `unknown (12 unpriced steps); per role: builder
/// unknown, planner $0.12`. `None` when no event recorded a cost.
pub fn cost_summary(
    per_role: &BTreeMap<String, agentforge_core::cost::CostTotals>,
) -> Option<String> {
    if per_role.is_empty() {
        return None;
    }
    let mut total = agentforge_core::cost::CostTotals::default();
    for c in per_role.values() {
        total.merge(c);
    }
    // A role's lower bound is left to the total: "builder unknown" is what it is.
    let roles: Vec<String> = per_role
        .iter()
        .map(|(r, c)| match c.known() {
            Some(known) => format!("{r} {known}"),
            None => format!("{r} unknown"),
        })
        .collect();
    Some(match total.known() {
        Some(known) => format!("{known} ({})", roles.join(", ")),
        None => format!("{total}; per role: {}", roles.join(", ")),
    })
}

/// What [`SprintDir::recover`] repaired.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// A torn last line was cut and saved here.
    pub torn_line_saved_to: Option<PathBuf>,
    /// `sprint.json` was rebuilt from the log's event with this number.
    pub state_rebuilt_from: Option<u64>,
}

/// The folder of all sprints of a workspace.
#[derive(Debug, Clone)]
pub struct SprintStore {
    root: PathBuf,
}

impl SprintStore {
    /// `<workspace>/.agentforge/sprints`.
    pub fn new(workspace: &Path) -> SprintStore {
        SprintStore {
            root: workspace.join(".agentforge").join("sprints"),
        }
    }

    /// Creates a sprint folder with its inputs and initial state.
    pub fn create(
        &self,
        initial: &SprintState,
        vision: &str,
        prd: &str,
    ) -> Result<SprintDir, SprintStoreError> {
        self.create_with(initial, &[("VISION.md", vision), ("PRD.md", prd)])
    }

    /// Creates a sprint folder with `inputs` (file name, text) and its initial state
    /// (a value sprint's VISION.md and PRD.md; a feature list's `features.input.json`).
    pub fn create_with(
        &self,
        initial: &SprintState,
        inputs: &[(&str, &str)],
    ) -> Result<SprintDir, SprintStoreError> {
        let dir = self.root.join(&initial.sprint);
        if dir.exists() {
            return Err(SprintStoreError::Exists {
                id: initial.sprint.clone(),
                path: dir.display().to_string(),
            });
        }
        // Build it under a temporary name and rename it into place: a kill leaves no
        // half-made sprint that `open` would accept.
        let tmp = self.root.join(format!(".{}.creating", initial.sprint));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).map_err(io_err("cannot create", &tmp))?;
        for &(name, text) in inputs {
            let p = tmp.join(name);
            atomic_write(&p, text.as_bytes()).map_err(io_err("cannot write", &p))?;
        }
        let sd = SprintDir { dir: tmp.clone() };
        sd.save_state(initial)?;
        fs::rename(&tmp, &dir).map_err(io_err("cannot rename", &tmp))?;
        if let Ok(d) = File::open(&self.root) {
            let _ = d.sync_all();
        }
        Ok(SprintDir { dir })
    }

    /// Opens an existing sprint.
    pub fn open(&self, id: &str) -> Result<SprintDir, SprintStoreError> {
        let dir = self.root.join(id);
        if !dir.join(STATE_FILE).is_file() {
            return Err(SprintStoreError::NotFound {
                id: id.to_string(),
                root: self.root.display().to_string(),
            });
        }
        Ok(SprintDir { dir })
    }
}

/// One sprint's folder.
#[derive(Debug, Clone)]
pub struct SprintDir {
    dir: PathBuf,
}

impl SprintDir {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The log's path.
    /// Takes the sprint's exclusive run lock: one process runs a sprint at a time (the OS
    /// releases it when the process dies).
    pub fn lock(
        &self,
    ) -> Result<agentforge_store::state_store::TaskLock, agentforge_store::state_store::StoreError>
    {
        let id = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        agentforge_store::state_store::lock_folder(&self.dir, &format!("sprint `{id}`"))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Reads `sprint.json` (without consulting the log; see [`SprintDir::recover`]).
    pub fn load_state(&self) -> Result<SprintState, SprintStoreError> {
        let p = self.state_path();
        let text = fs::read_to_string(&p).map_err(io_err("cannot read", &p))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| SprintStoreError::Corrupt {
                path: p.display().to_string(),
                message: e.to_string(),
            })?;
        let found = v.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        // Older formats this build reads (version 1: no policy, the value policy).
        let readable = agentforge_value_loop::state::MIN_STATE_VERSION
            ..=agentforge_value_loop::state::STATE_VERSION;
        if !readable.contains(&found) {
            return Err(SprintStoreError::Version {
                path: p.display().to_string(),
                found,
                expected: agentforge_value_loop::state::STATE_VERSION,
            });
        }
        serde_json::from_value(v).map_err(|e| SprintStoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Writes `sprint.json` durably (creation; a cache rewrite after each event).
    pub fn save_state(&self, state: &SprintState) -> Result<(), SprintStoreError> {
        let p = self.state_path();
        let json = serde_json::to_vec_pretty(state).map_err(|e| SprintStoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        atomic_rewrite(&p, &json).map_err(io_err("cannot write", &p))
    }

    /// The number the next event must carry.
    pub fn next_seq(&self) -> Result<u64, SprintStoreError> {
        Ok(self.last_event()?.map_or(1, |e| e.seq + 1))
    }

    /// How the sprint ended, if it did: a `finished` event, or an event that carries its
    /// end (the exit gate passed, a gate failed the sprint).
    pub fn recorded_end(&self) -> Result<Option<runner::SprintOutcome>, SprintStoreError> {
        Ok(self
            .read_events()?
            .into_iter()
            .rev()
            .find_map(|e| match e.kind {
                EventKind::Finished { end } => Some(end),
                _ => e.ended,
            }))
    }

    /// The last recorded event, parsing only the log's last line (the log grows by one
    /// state per event: reading it all each iteration would cost O(n) per iteration).
    pub fn last_event(&self) -> Result<Option<Event>, SprintStoreError> {
        let p = self.log_path();
        let lines = agentforge_store::state_store::read_last_lines(&p, 1)
            .map_err(io_err("cannot read", &p))?;
        let Some(line) = lines.last() else {
            return Ok(None);
        };
        serde_json::from_str(line)
            .map(Some)
            .map_err(|e| SprintStoreError::Corrupt {
                path: p.display().to_string(),
                message: format!("last line: {e}"),
            })
    }

    /// Records an event: one appended line, fsynced (the event is done when this
    /// returns), then `sprint.json` rewritten from its `state_after`. Refuses an event
    /// whose number is not the next one.
    pub fn append(&self, event: &Event) -> Result<(), SprintStoreError> {
        let p = self.log_path();
        let expected = self.next_seq()?;
        if event.seq != expected {
            return Err(SprintStoreError::Sequence {
                path: p.display().to_string(),
                expected,
                got: event.seq,
            });
        }
        let mut line = serde_json::to_string(event).map_err(|e| SprintStoreError::Corrupt {
            path: p.display().to_string(),
            message: e.to_string(),
        })?;
        line.push('\n');
        append_synced_line(&p, line.as_bytes()).map_err(|(op, e)| io_err(op, &p)(e))?;
        self.save_state(&event.state_after)
    }

    /// Every recorded event. A torn last line is an error here: recover first.
    pub fn read_events(&self) -> Result<Vec<Event>, SprintStoreError> {
        let p = self.log_path();
        let text = match fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot read", &p)(e)),
        };
        parse(&text, &p)
    }

    /// Brings the folder to a consistent state after a crash and returns the state the
    /// sprint continues from: a torn last line is cut (and saved beside the log);
    /// `sprint.json` is rebuilt from the last event when it lags, is empty or does not
    /// parse.
    pub fn recover(&self) -> Result<(SprintState, Recovery), SprintStoreError> {
        let mut recovery = Recovery::default();
        let p = self.log_path();
        let bytes = match fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err("cannot read", &p)(e)),
        };
        let good = complete_prefix(&bytes);
        if good < bytes.len() {
            let saved = self
                .dir
                .join(format!("{LOG_FILE}.torn-{}", std::process::id()));
            atomic_write(&saved, &bytes[good..]).map_err(io_err("cannot write", &saved))?;
            let f = OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(io_err("cannot open", &p))?;
            f.set_len(good as u64)
                .map_err(io_err("cannot truncate", &p))?;
            f.sync_all().map_err(io_err("cannot fsync", &p))?;
            recovery.torn_line_saved_to = Some(saved);
        }
        let events = parse(&String::from_utf8_lossy(&bytes[..good]), &p)?;
        let Some(last) = events.last() else {
            return Ok((self.load_state()?, recovery));
        };
        let cached = self.load_state().ok();
        if cached.as_ref() != Some(&last.state_after) {
            self.save_state(&last.state_after)?;
            recovery.state_rebuilt_from = Some(last.seq);
        }
        Ok((last.state_after.clone(), recovery))
    }
}

/// The length of the log's prefix made of complete lines that parse as events.
fn complete_prefix(bytes: &[u8]) -> usize {
    if bytes.is_empty() {
        return 0;
    }
    let Some(last_nl) = bytes.iter().rposition(|&b| b == b'\n') else {
        return 0;
    };
    if last_nl + 1 < bytes.len() {
        return last_nl + 1;
    }
    let prev = bytes[..last_nl]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    if serde_json::from_slice::<Event>(&bytes[prev..last_nl]).is_ok() {
        bytes.len()
    } else {
        prev
    }
}

fn parse(text: &str, path: &Path) -> Result<Vec<Event>, SprintStoreError> {
    let mut out: Vec<Event> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let e: Event = serde_json::from_str(line).map_err(|e| SprintStoreError::Corrupt {
            path: path.display().to_string(),
            message: format!("line {}: {e}", i + 1),
        })?;
        let expected = out.last().map_or(1, |l| l.seq + 1);
        if e.seq != expected {
            return Err(SprintStoreError::Corrupt {
                path: path.display().to_string(),
                message: format!(
                    "line {}: event {} where {expected} was expected (an event lost or repeated)",
                    i + 1,
                    e.seq
                ),
            });
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_value_loop::LoopAction;
    use std::io::Write;

    #[test]
    fn a_sprint_cost_is_unknown_while_any_role_step_is_unpriced_never_zero() {
        use agentforge_core::cost::{CostTotals, MicroUsd};
        let priced = |m: u64| CostTotals {
            usd_micros: MicroUsd(m),
            unpriced_steps: 0,
        };
        let unknown = |m: u64, n: u64| CostTotals {
            usd_micros: MicroUsd(m),
            unpriced_steps: n,
        };
        assert_eq!(cost_summary(&BTreeMap::new()), None);
        let known: BTreeMap<String, CostTotals> = [
            ("builder".to_string(), priced(300_000)),
            ("planner".to_string(), priced(121_200)),
        ]
        .into();
        assert_eq!(
            cost_summary(&known).as_deref(),
            Some("$0.4212 (builder $0.30, planner $0.1212)")
        );
        // The replayed example sprint: every step without usage.
        let replayed: BTreeMap<String, CostTotals> = [
            ("builder".to_string(), unknown(0, 9)),
            ("critic".to_string(), unknown(0, 3)),
        ]
        .into();
        assert_eq!(
            cost_summary(&replayed).as_deref(),
            Some("unknown (12 unpriced steps); per role: builder unknown, critic unknown")
        );
        let partly: BTreeMap<String, CostTotals> = [
            ("builder".to_string(), unknown(100_000, 2)),
            ("planner".to_string(), priced(20_000)),
        ]
        .into();
        assert_eq!(
            cost_summary(&partly).as_deref(),
            Some("unknown (at least $0.12; 2 unpriced steps); per role: builder unknown, planner $0.02")
        );
    }

    fn event(seq: u64, state: &SprintState) -> Event {
        Event {
            seq,
            kind: EventKind::Iteration {
                decision: Decision::Act {
                    action: LoopAction::Execute,
                },
                measure_before: ValueMeasure::default(),
                measure_after: ValueMeasure::default(),
                progressed: false,
            },
            outcome: "T1 done".into(),
            role_tasks: vec!["s-it1-builder".into()],
            tokens: [("builder".to_string(), 1200u64)].into_iter().collect(),
            cost: BTreeMap::new(),
            ended: None,
            monitor: None,
            state_after: state.clone(),
        }
    }

    #[test]
    fn events_append_in_sequence_and_the_state_follows() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SprintStore::new(tmp.path());
        let mut s = SprintState::new("demo");
        let dir = store.create(&s, "# Vision", "# PRD").unwrap();
        assert!(matches!(
            store.create(&s, "", ""),
            Err(SprintStoreError::Exists { .. })
        ));
        s.iteration = 1;
        dir.append(&event(1, &s)).unwrap();
        let err = dir.append(&event(1, &s)).unwrap_err();
        assert!(err.to_string().contains("next is 2"), "{err}");
        assert!(matches!(
            dir.append(&event(3, &s)),
            Err(SprintStoreError::Sequence { .. })
        ));
        s.iteration = 2;
        dir.append(&event(2, &s)).unwrap();
        assert_eq!(
            store.open("demo").unwrap().load_state().unwrap().iteration,
            2
        );
        assert_eq!(dir.read_events().unwrap().len(), 2);
        assert_eq!(
            fs::read_to_string(dir.path().join("VISION.md")).unwrap(),
            "# Vision"
        );
    }

    #[test]
    fn a_torn_line_and_a_stale_cache_are_repaired() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SprintStore::new(tmp.path());
        let mut s = SprintState::new("demo");
        let dir = store.create(&s, "v", "p").unwrap();
        s.iteration = 1;
        dir.append(&event(1, &s)).unwrap();
        // A kill mid-append, and a cache one event behind (written before the crash).
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.log_path())
            .unwrap();
        f.write_all(b"{\"seq\":2,\"kind\":\"iter").unwrap();
        dir.save_state(&SprintState::new("demo")).unwrap();
        let (state, rec) = dir.recover().unwrap();
        assert_eq!(state.iteration, 1);
        assert!(rec.torn_line_saved_to.is_some());
        assert_eq!(rec.state_rebuilt_from, Some(1));
        assert_eq!(dir.load_state().unwrap().iteration, 1);
        assert_eq!(dir.next_seq().unwrap(), 2);
        // An unparseable cache is rebuilt too.
        fs::write(dir.path().join(STATE_FILE), "").unwrap();
        assert_eq!(dir.recover().unwrap().0.iteration, 1);
    }

    #[test]
    fn a_gap_in_the_log_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SprintStore::new(tmp.path());
        let s = SprintState::new("demo");
        let dir = store.create(&s, "v", "p").unwrap();
        dir.append(&event(1, &s)).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.log_path())
            .unwrap();
        let mut line = serde_json::to_string(&event(3, &s)).unwrap();
        line.push('\n');
        f.write_all(line.as_bytes()).unwrap();
        let err = dir.recover().unwrap_err().to_string();
        assert!(err.contains("event 3 where 2 was expected"), "{err}");
        assert!(err.contains(LOG_FILE), "{err}");
    }

    #[test]
    fn a_version_1_state_loads_as_a_value_sprint() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SprintStore::new(tmp.path());
        let dir = store.create(&SprintState::new("demo"), "v", "p").unwrap();
        fs::write(
            dir.path().join(STATE_FILE),
            r#"{"version": 1, "sprint": "demo", "phase": "value_loop", "iteration": 4}"#,
        )
        .unwrap();
        let s = dir.load_state().unwrap();
        assert_eq!(s.iteration, 4);
        assert_eq!(s.policy, agentforge_value_loop::features::Policy::Value);
        assert!(s.feature_list.is_none());
    }

    #[test]
    fn another_version_is_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SprintStore::new(tmp.path());
        let dir = store.create(&SprintState::new("demo"), "v", "p").unwrap();
        fs::write(
            dir.path().join(STATE_FILE),
            r#"{"version": 9, "sprint": "demo"}"#,
        )
        .unwrap();
        let err = dir.load_state().unwrap_err().to_string();
        assert!(err.contains("version 9"), "{err}");
    }
}
