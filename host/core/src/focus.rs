//! Hierarchical focus (seed 004): the Goal -> Task -> Subtask -> Action tree.
//!
//! The goal is decomposed into tasks, each task into subtasks; the steps taken while a
//! subtask is active are its actions (step numbers pointing into `actions.jsonl`).
//! Exactly one subtask is in progress at a time ([`FocusTree::current`]).
//!
//! - **Need-to-know context**: [`FocusTree::branch_view`] shows only the current
//!   branch (goal, active task and subtask, the next subtask, blocked siblings, recent
//!   actions, probe state, loop warnings) and is bounded: it always renders to fewer
//!   than [`VIEW_MAX_CHARS`] characters of YAML, however large the tree or its texts.
//! - **Escalating failures**: [`FocusTree::fail_current`] counts failures of the
//!   active subtask; at [`FAILURES_TO_BLOCK`] it is blocked and focus moves on; a task
//!   whose subtasks are all completed or blocked (at least one blocked) is escalated;
//!   when no subtask is left the run must be escalated ([`FailOutcome::NothingLeft`]).
//! - **Crash recovery**: the tree is plain serde data kept in the task state; it
//!   round-trips through YAML and JSON unchanged, and [`FocusTree::repair`] restores
//!   its invariants after loading a state written by an older or interrupted host.
//!
//! Plans come from `task.yaml` (`inputs.plan`) or from the model's `plan` action
//! ([`plan_tool_spec`], [`parse_plan`]); subtasks are closed by the `finish_subtask`
//! action ([`finish_subtask_tool_spec`], [`parse_finish_subtask`]).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::args::{json_type, ArgumentSchema};
use crate::model::ToolSpec;

/// Most tasks a plan may have.
pub const MAX_TASKS: usize = 12;
/// Most subtasks a task (or a flat plan) may have.
pub const MAX_SUBTASKS: usize = 12;
/// Longest task or subtask description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// Failures after which a subtask is blocked.
pub const FAILURES_TO_BLOCK: u32 = 2;
/// Upper bound (exclusive) of the branch view rendered as YAML, in characters.
pub const VIEW_MAX_CHARS: usize = 2000;
/// Step numbers kept per subtask (the latest).
pub const MAX_SUBTASK_ACTIONS: usize = 20;
/// What [`FocusTree::branch_view`] aims for when measured with `serde_yaml_ng`: the
/// margin to [`VIEW_MAX_CHARS`] covers the section key and the indentation of the
/// context builder's own emitter.
const VIEW_TARGET_CHARS: usize = 1800;
/// Longest note (completion summary, failure reason) kept in the tree.
const MAX_NOTE_CHARS: usize = 200;

/// Status of a task or subtask.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Not started.
    Pending,
    /// Being worked on (exactly one subtask, and its task).
    InProgress,
    /// Done.
    Completed,
    /// A subtask given up after [`FAILURES_TO_BLOCK`] failures.
    Blocked,
    /// A task whose subtasks are all completed or blocked, at least one blocked.
    Escalated,
}

/// A concrete unit of work; the steps taken while it was active are its actions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Subtask {
    /// Dotted id (`"1.2"`: second subtask of task 1); stable across replans.
    pub id: String,
    /// What to do (at most [`MAX_DESCRIPTION_CHARS`]).
    pub description: String,
    /// Status.
    pub status: NodeStatus,
    /// Failures recorded while it was active.
    pub failures: u32,
    /// Completion summary and failure reasons (`failure <n>: <reason>`), oldest first.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Step numbers taken while this subtask was active.
    #[serde(default)]
    pub actions: Vec<u64>,
    /// The evidence it was tested with, when `finish_subtask` claimed `tested` (a claim
    /// the guards let through only with evidence: seed 003's `block-tested-true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested: Option<String>,
}

/// A mid-level part of the goal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TaskNode {
    /// Id (`"1"`); stable across replans.
    pub id: String,
    /// What the task achieves.
    pub description: String,
    /// Status, derived from the subtasks.
    pub status: NodeStatus,
    /// Subtasks in order.
    pub subtasks: Vec<Subtask>,
    /// Task-level notes (blocked subtasks, replans).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The Goal -> Task -> Subtask -> Action tree of a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct FocusTree {
    /// The top-level objective.
    pub goal: String,
    /// Tasks in order.
    #[serde(default)]
    pub tasks: Vec<TaskNode>,
    /// The subtask in progress (task index, subtask index); `None` when no subtask is
    /// left (all done, or the rest is blocked).
    #[serde(default)]
    pub current: Option<(usize, usize)>,
}

/// A plan as given in `task.yaml` (`inputs.plan`) or by the model's `plan` action.
///
/// Either tasks with subtasks, or a flat list of subtasks (one implicit task named
/// after the goal). See [`parse_plan`] for the model-facing parser with its errors.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum PlanInput {
    /// `{tasks: [{description, subtasks: [..]}]}`.
    Tasks {
        /// Tasks in order.
        tasks: Vec<PlanTask>,
    },
    /// `{subtasks: [..]}`.
    Flat {
        /// Subtasks in order.
        subtasks: Vec<String>,
    },
}

/// One task of a [`PlanInput`].
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
pub struct PlanTask {
    /// What the task achieves.
    pub description: String,
    /// Its subtasks in order; a task without subtasks becomes a single subtask with
    /// the task's description.
    #[serde(default)]
    pub subtasks: Vec<String>,
}

/// What [`FocusTree::fail_current`] did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum FailOutcome {
    /// The failure was counted; the subtask stays active.
    Recorded {
        /// Failures of the subtask so far.
        failures: u32,
    },
    /// The subtask was blocked and focus moved to the next pending subtask.
    SubtaskBlocked {
        /// The blocked subtask.
        id: String,
    },
    /// The subtask was blocked and that left its task escalated; focus moved to the
    /// next pending subtask of another task.
    TaskEscalated {
        /// The escalated task.
        id: String,
        /// Why, one line.
        reason: String,
    },
    /// No subtask is left to work on: unless [`FocusTree::all_done`] (a failure
    /// reported after the last subtask was completed), the executor should escalate
    /// the run.
    NothingLeft {
        /// Why, one line.
        reason: String,
    },
}

impl FocusTree {
    /// A tree without a plan: one implicit task with one subtask, both the goal, in
    /// progress.
    pub fn new(goal: &str) -> FocusTree {
        let goal = goal.trim();
        let short = clip(goal, MAX_DESCRIPTION_CHARS);
        let mut tree = FocusTree {
            goal: goal.to_string(),
            tasks: Vec::new(),
            current: None,
        };
        tree.push_task(short.clone(), vec![short]);
        tree.focus_next();
        tree
    }

    /// A tree from a validated plan, with its first subtask in progress.
    ///
    /// Errors name the offending field (`plan.tasks[1].subtasks[0]: empty description`).
    pub fn from_plan(goal: &str, plan: &PlanInput) -> Result<FocusTree, String> {
        let checked = check_plan(plan)?;
        let goal = goal.trim();
        let mut tree = FocusTree {
            goal: goal.to_string(),
            tasks: Vec::new(),
            current: None,
        };
        match checked {
            Checked::Tasks(tasks) => {
                for (description, subtasks) in tasks {
                    tree.push_task(description, subtasks);
                }
            }
            Checked::Flat(subtasks) => tree.push_task(clip(goal, MAX_DESCRIPTION_CHARS), subtasks),
        }
        tree.focus_next();
        Ok(tree)
    }

    /// Replaces the not-yet-completed part of the tree with a new plan (the model's
    /// decomposition). On error the tree is unchanged.
    ///
    /// Completed subtasks are kept with their ids, notes and actions; a task keeping
    /// some of them is marked completed (with a note saying how many subtasks were
    /// replaced), a task keeping none is dropped. New tasks get ids following the
    /// highest existing one. A flat plan given while the current task is partly done
    /// continues that task (its new subtasks follow the completed ones); otherwise it
    /// becomes a new task named after the goal. Focus moves to the first new subtask.
    pub fn replan(&mut self, plan: &PlanInput) -> Result<(), String> {
        let checked = check_plan(plan)?;
        let current_task = self.current.map(|(t, _)| t);
        // Ids are never reused: numbering continues after the highest id, dropped
        // ones included.
        let next_task = self.next_task_number();
        let mut kept = Vec::new();
        let mut continued = None;
        for (ti, mut task) in std::mem::take(&mut self.tasks).into_iter().enumerate() {
            let total = task.subtasks.len();
            let next_subtask = next_subtask_number(&task);
            task.subtasks.retain(|s| s.status == NodeStatus::Completed);
            if task.subtasks.is_empty() {
                continue;
            }
            let replaced = total - task.subtasks.len();
            if replaced > 0 {
                task.notes.push(format!(
                    "replanned: {replaced} unfinished subtask{} replaced by the new plan",
                    plural(replaced)
                ));
                if current_task == Some(ti) {
                    continued = Some((kept.len(), next_subtask));
                }
            }
            task.status = NodeStatus::Completed;
            kept.push(task);
        }
        self.tasks = kept;
        self.current = None;
        match checked {
            Checked::Flat(subtasks) => match continued {
                Some((ti, first)) => {
                    for (i, description) in subtasks.into_iter().enumerate() {
                        self.push_subtask(ti, first + i, description);
                    }
                }
                None => self.push_task_numbered(
                    next_task,
                    clip(&self.goal, MAX_DESCRIPTION_CHARS),
                    subtasks,
                ),
            },
            Checked::Tasks(tasks) => {
                for (i, (description, subtasks)) in tasks.into_iter().enumerate() {
                    self.push_task_numbered(next_task + i, description, subtasks);
                }
            }
        }
        self.focus_next();
        Ok(())
    }

    /// Records that step `step` was taken in the current subtask (idempotent; ignored
    /// when no subtask is active).
    pub fn record_action(&mut self, step: u64) {
        if let Some(sub) = self.current_subtask_mut() {
            if !sub.actions.contains(&step) {
                sub.actions.push(step);
                // Only the latest steps are ever shown; keep the state constant-size
                // however long a subtask runs (the full history is in actions.jsonl).
                if sub.actions.len() > MAX_SUBTASK_ACTIONS {
                    let excess = sub.actions.len() - MAX_SUBTASK_ACTIONS;
                    sub.actions.drain(..excess);
                }
            }
        }
    }

    /// Records on the active subtask that it is tested, with `evidence`.
    pub fn mark_current_tested(&mut self, evidence: &str) {
        if let Some((ti, si)) = self.current {
            self.tasks[ti].subtasks[si].tested = Some(clip(evidence, MAX_NOTE_CHARS));
        }
    }

    /// Marks the current subtask completed (keeping `summary` as a note) and moves to
    /// the next pending subtask; a task whose subtasks are all done is completed (or
    /// escalated if some of them are blocked). Returns a one-line description of the
    /// move, e.g. `completed 1.2; task 1 completed; now on 2.1: Write tests`.
    pub fn complete_current(&mut self, summary: &str) -> String {
        let Some((ti, si)) = self.current else {
            return if self.all_done() {
                "no active subtask: all tasks are completed".to_string()
            } else {
                "no active subtask: the remaining subtasks are blocked".to_string()
            };
        };
        let summary = clip(summary, MAX_NOTE_CHARS);
        let sub = &mut self.tasks[ti].subtasks[si];
        sub.status = NodeStatus::Completed;
        if !summary.is_empty() {
            sub.notes.push(summary);
        }
        let mut line = format!("completed {}", sub.id);
        self.refresh_task(ti);
        let task = &self.tasks[ti];
        match task.status {
            NodeStatus::Completed => line.push_str(&format!("; task {} completed", task.id)),
            NodeStatus::Escalated => line.push_str(&format!(
                "; task {} escalated ({} blocked)",
                task.id,
                blocked_ids(task).join(", ")
            )),
            _ => {}
        }
        self.focus_next();
        match self.current_subtask() {
            Some(next) => line.push_str(&format!(
                "; now on {}: {}",
                next.id,
                clip(&next.description, 80)
            )),
            None if self.all_done() => line.push_str("; all tasks completed"),
            None => line.push_str("; no subtask left (the rest is blocked)"),
        }
        line
    }

    /// Records a failure of the current subtask (a loop detected in it, a reverted
    /// change, a failed verification attributed to it).
    ///
    /// At [`FAILURES_TO_BLOCK`] failures the subtask is blocked, its task gets the note
    /// `subtask 1.2 blocked after 2 failures: <reason>` and focus moves to the next
    /// pending subtask. If that leaves every subtask of the task completed or blocked,
    /// the task is escalated ([`FailOutcome::TaskEscalated`]); if no pending subtask
    /// remains anywhere the result is [`FailOutcome::NothingLeft`] (also when no
    /// subtask was active).
    pub fn fail_current(&mut self, reason: &str) -> FailOutcome {
        let reason = clip(reason, MAX_NOTE_CHARS);
        let reason = if reason.is_empty() {
            "no reason given".to_string()
        } else {
            reason
        };
        let Some((ti, si)) = self.current else {
            return FailOutcome::NothingLeft {
                reason: format!(
                    "no active subtask to fail ({reason}); {}",
                    self.stuck_summary()
                ),
            };
        };
        let sub = &mut self.tasks[ti].subtasks[si];
        sub.failures += 1;
        let failures = sub.failures;
        sub.notes.push(format!("failure {failures}: {reason}"));
        if failures < FAILURES_TO_BLOCK {
            return FailOutcome::Recorded { failures };
        }
        sub.status = NodeStatus::Blocked;
        let id = sub.id.clone();
        let task = &mut self.tasks[ti];
        task.notes.push(format!(
            "subtask {id} blocked after {failures} failures: {reason}"
        ));
        self.refresh_task(ti);
        self.focus_next();
        let task = &self.tasks[ti];
        if self.current.is_none() {
            return FailOutcome::NothingLeft {
                reason: format!(
                    "subtask {id} blocked after {failures} failures ({reason}); {}",
                    self.stuck_summary()
                ),
            };
        }
        if task.status == NodeStatus::Escalated {
            return FailOutcome::TaskEscalated {
                id: task.id.clone(),
                reason: format!(
                    "task {} escalated: subtask{} {} blocked; last failure: {reason}",
                    task.id,
                    plural(blocked_ids(task).len()),
                    blocked_ids(task).join(", ")
                ),
            };
        }
        FailOutcome::SubtaskBlocked { id }
    }

    /// Whether every task is completed.
    pub fn all_done(&self) -> bool {
        !self.tasks.is_empty() && self.tasks.iter().all(|t| t.status == NodeStatus::Completed)
    }

    /// Whether no subtask is left to work on although the goal is not done (the rest
    /// is blocked): the run should be escalated.
    pub fn is_stuck(&self) -> bool {
        self.current.is_none() && !self.all_done()
    }

    /// The task in progress.
    pub fn current_task(&self) -> Option<&TaskNode> {
        self.current.and_then(|(t, _)| self.tasks.get(t))
    }

    /// The subtask in progress.
    pub fn current_subtask(&self) -> Option<&Subtask> {
        self.current
            .and_then(|(t, s)| self.tasks.get(t).and_then(|task| task.subtasks.get(s)))
    }

    /// Step numbers taken in the current subtask (empty when none is active): the
    /// caller picks the recent actions for [`FocusTree::branch_view`] among these.
    pub fn current_actions(&self) -> &[u64] {
        self.current_subtask().map_or(&[], |s| &s.actions)
    }

    /// Restores the invariants after loading a tree from disk: `current` points at a
    /// subtask in progress (the first one in tree order if it did not, else the first
    /// pending one), at most one subtask is in progress, and task statuses match
    /// their subtasks.
    pub fn repair(&mut self) {
        let valid = self.current_subtask().map(|s| s.status) == Some(NodeStatus::InProgress);
        if !valid {
            let first = self
                .positions()
                .find(|&(t, s)| self.tasks[t].subtasks[s].status == NodeStatus::InProgress);
            self.current = first;
        }
        let current = self.current;
        for (ti, task) in self.tasks.iter_mut().enumerate() {
            for (si, sub) in task.subtasks.iter_mut().enumerate() {
                if sub.status == NodeStatus::InProgress && Some((ti, si)) != current {
                    sub.status = NodeStatus::Pending;
                }
            }
        }
        if self.current.is_none() {
            self.focus_next();
        }
        for ti in 0..self.tasks.len() {
            self.refresh_task(ti);
        }
    }

    /// The need-to-know view of the current branch, for the context builder.
    ///
    /// Shows the goal, overall progress, the current task (id, description, `2/4
    /// subtasks done`), the active subtask (with its failures and last failure), the
    /// next subtask, the blocked subtasks of the current task with their reasons, and
    /// what the caller passes: the last 3 `recent_actions` of this subtask (one line
    /// each; see [`FocusTree::current_actions`]), the `probe` state (`tests: 3 passed,
    /// 1 failed`) and loop warnings. Completed tasks, tasks beyond the next one and
    /// actions of other subtasks are never shown. When no subtask is active the view
    /// says whether everything is done or which tasks are escalated.
    ///
    /// Bounded: rendered as YAML it stays under [`VIEW_MAX_CHARS`] characters (texts
    /// are cut, lists end with `... and N more`, tighter limits are tried in turn).
    pub fn branch_view(
        &self,
        recent_actions: &[String],
        probe: Option<&str>,
        loop_warnings: &[String],
    ) -> Value {
        for limits in LEVELS {
            let view = self.view_at(&limits, recent_actions, probe, loop_warnings);
            if yaml_chars(&view) <= VIEW_TARGET_CHARS {
                return view;
            }
        }
        // Unreachable in practice (the last level is far below the target); keeps the
        // bound unconditional.
        let mut view = Map::new();
        view.insert("goal".into(), json!(clip(&self.goal, 60)));
        if let (Some(t), Some(s)) = (self.current_task(), self.current_subtask()) {
            view.insert("task".into(), json!(clip(&t.id, 20)));
            view.insert("subtask".into(), json!(clip(&s.id, 20)));
        }
        Value::Object(view)
    }

    fn view_at(
        &self,
        lim: &Limits,
        recent_actions: &[String],
        probe: Option<&str>,
        loop_warnings: &[String],
    ) -> Value {
        let mut view = Map::new();
        view.insert("goal".into(), json!(clip(&self.goal, lim.goal)));
        let total: usize = self.tasks.iter().map(|t| t.subtasks.len()).sum();
        let done = self
            .tasks
            .iter()
            .flat_map(|t| &t.subtasks)
            .filter(|s| s.status == NodeStatus::Completed)
            .count();
        match (self.current, self.current_task(), self.current_subtask()) {
            (Some((ti, si)), Some(task), Some(sub)) => {
                view.insert(
                    "progress".into(),
                    json!(format!(
                        "task {} of {}, {done}/{total} subtasks done",
                        ti + 1,
                        self.tasks.len()
                    )),
                );
                let task_done = task
                    .subtasks
                    .iter()
                    .filter(|s| s.status == NodeStatus::Completed)
                    .count();
                view.insert(
                    "task".into(),
                    json!({
                        "id": clip(&task.id, 20),
                        "description": clip(&task.description, lim.desc),
                        "progress": format!("{task_done}/{} subtasks done", task.subtasks.len()),
                    }),
                );
                let mut active = Map::new();
                active.insert("id".into(), json!(clip(&sub.id, 20)));
                active.insert(
                    "description".into(),
                    json!(clip(&sub.description, lim.desc)),
                );
                if sub.failures > 0 {
                    active.insert("failures".into(), json!(sub.failures));
                }
                if let Some(reason) = last_failure(sub) {
                    active.insert("last_failure".into(), json!(clip(reason, lim.line)));
                }
                view.insert("subtask".into(), Value::Object(active));
                if let Some((nt, ns)) = self.next_pending_after(Some((ti, si))) {
                    let next = &self.tasks[nt].subtasks[ns];
                    let mut line = format!(
                        "{}: {}",
                        clip(&next.id, 20),
                        clip(&next.description, lim.line)
                    );
                    if nt != ti {
                        line.push_str(&format!(
                            " (starts task {}: {})",
                            clip(&self.tasks[nt].id, 20),
                            clip(&self.tasks[nt].description, lim.line / 2)
                        ));
                    }
                    view.insert("next".into(), json!(line));
                }
                let blocked: Vec<String> = task
                    .subtasks
                    .iter()
                    .filter(|s| s.status == NodeStatus::Blocked)
                    .map(|s| {
                        format!(
                            "{} {}: {}",
                            clip(&s.id, 20),
                            clip(&s.description, lim.line / 2),
                            clip(last_failure(s).unwrap_or("blocked"), lim.line)
                        )
                    })
                    .collect();
                if !blocked.is_empty() {
                    view.insert("blocked".into(), capped(blocked, lim.items));
                }
            }
            _ => {
                view.insert(
                    "progress".into(),
                    json!(format!("{done}/{total} subtasks done")),
                );
                if self.all_done() {
                    view.insert("status".into(), json!("all tasks completed"));
                } else {
                    view.insert(
                        "status".into(),
                        json!("no subtask left: the rest is blocked; escalate or replan"),
                    );
                    let escalated: Vec<String> = self
                        .tasks
                        .iter()
                        .filter(|t| t.status != NodeStatus::Completed)
                        .map(|t| {
                            format!(
                                "{} {}: {}",
                                clip(&t.id, 20),
                                clip(&t.description, lim.line / 2),
                                clip(t.notes.last().map_or("", String::as_str), lim.line)
                            )
                        })
                        .collect();
                    view.insert("escalated_tasks".into(), capped(escalated, lim.items));
                }
            }
        }
        let actions: Vec<String> = recent_actions
            .iter()
            .rev()
            .take(3)
            .rev()
            .map(|a| clip(a, lim.line))
            .collect();
        if !actions.is_empty() {
            view.insert("recent_actions".into(), json!(actions));
        }
        if let Some(probe) = probe.map(|p| clip(p, lim.goal)).filter(|p| !p.is_empty()) {
            view.insert("probe".into(), json!(probe));
        }
        let warnings: Vec<String> = loop_warnings.iter().map(|w| clip(w, lim.line)).collect();
        if !warnings.is_empty() {
            view.insert("loop_warnings".into(), capped(warnings, lim.items));
        }
        Value::Object(view)
    }

    /// Appends a task numbered after the highest task id.
    fn push_task(&mut self, description: String, subtasks: Vec<String>) {
        self.push_task_numbered(self.next_task_number(), description, subtasks);
    }

    fn next_task_number(&self) -> usize {
        next_number(self.tasks.iter().map(|t| t.id.as_str()))
    }

    fn push_task_numbered(&mut self, n: usize, description: String, subtasks: Vec<String>) {
        self.tasks.push(TaskNode {
            id: n.to_string(),
            description,
            status: NodeStatus::Pending,
            subtasks: Vec::new(),
            notes: Vec::new(),
        });
        let ti = self.tasks.len() - 1;
        for (i, description) in subtasks.into_iter().enumerate() {
            self.push_subtask(ti, i + 1, description);
        }
    }

    /// Appends subtask number `n` to task `ti`.
    fn push_subtask(&mut self, ti: usize, n: usize, description: String) {
        let task = &mut self.tasks[ti];
        task.subtasks.push(Subtask {
            id: format!("{}.{n}", task.id),
            description,
            status: NodeStatus::Pending,
            failures: 0,
            notes: Vec::new(),
            actions: Vec::new(),
            tested: None,
        });
    }

    fn current_subtask_mut(&mut self) -> Option<&mut Subtask> {
        let (t, s) = self.current?;
        self.tasks.get_mut(t)?.subtasks.get_mut(s)
    }

    fn positions(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.tasks
            .iter()
            .enumerate()
            .flat_map(|(ti, t)| (0..t.subtasks.len()).map(move |si| (ti, si)))
    }

    /// The first pending subtask after `from` in tree order, wrapping around.
    fn next_pending_after(&self, from: Option<(usize, usize)>) -> Option<(usize, usize)> {
        let all: Vec<(usize, usize)> = self.positions().collect();
        let start = from
            .and_then(|f| all.iter().position(|&p| p == f))
            .map_or(0, |i| i + 1);
        all[start..]
            .iter()
            .chain(&all[..start])
            .copied()
            .find(|&(t, s)| self.tasks[t].subtasks[s].status == NodeStatus::Pending)
    }

    /// Moves focus to the next pending subtask (or to none) and marks it in progress.
    fn focus_next(&mut self) {
        self.current = self.next_pending_after(self.current);
        if let Some((ti, si)) = self.current {
            self.tasks[ti].subtasks[si].status = NodeStatus::InProgress;
            self.refresh_task(ti);
        }
    }

    /// Derives a task's status from its subtasks.
    fn refresh_task(&mut self, ti: usize) {
        let task = &mut self.tasks[ti];
        if task.subtasks.is_empty() {
            return;
        }
        let count =
            |f: fn(NodeStatus) -> bool| task.subtasks.iter().filter(|s| f(s.status)).count();
        let n = task.subtasks.len();
        let completed = count(|s| s == NodeStatus::Completed);
        let stuck = count(|s| matches!(s, NodeStatus::Blocked | NodeStatus::Escalated));
        let pending = count(|s| s == NodeStatus::Pending);
        task.status = if completed == n {
            NodeStatus::Completed
        } else if completed + stuck == n {
            NodeStatus::Escalated
        } else if pending == n {
            NodeStatus::Pending
        } else {
            NodeStatus::InProgress
        };
    }

    fn stuck_summary(&self) -> String {
        let open: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.status != NodeStatus::Completed)
            .map(|t| format!("task {}", t.id))
            .collect();
        if open.is_empty() {
            "all tasks are completed".to_string()
        } else {
            format!(
                "no subtask left to work on; escalated: {}",
                capped_join(&open, 6)
            )
        }
    }
}

/// Limits of one attempt at the branch view.
struct Limits {
    /// Goal and probe.
    goal: usize,
    /// Task and subtask descriptions.
    desc: usize,
    /// One-line list items (actions, warnings, blocked reasons, next subtask).
    line: usize,
    /// Items shown of the blocked / warning lists.
    items: usize,
}

/// Tried in order until the view fits; the last one is far below the target even with
/// every text at its limit and escaped.
const LEVELS: [Limits; 4] = [
    Limits {
        goal: 300,
        desc: 200,
        line: 160,
        items: 3,
    },
    Limits {
        goal: 160,
        desc: 120,
        line: 100,
        items: 3,
    },
    Limits {
        goal: 100,
        desc: 80,
        line: 70,
        items: 2,
    },
    Limits {
        goal: 60,
        desc: 50,
        line: 40,
        items: 1,
    },
];

/// A validated, trimmed plan.
enum Checked {
    Tasks(Vec<(String, Vec<String>)>),
    Flat(Vec<String>),
}

fn check_plan(plan: &PlanInput) -> Result<Checked, String> {
    match plan {
        PlanInput::Tasks { tasks } => {
            if tasks.is_empty() {
                return Err("plan.tasks: empty; give at least one task".to_string());
            }
            if tasks.len() > MAX_TASKS {
                return Err(format!(
                    "plan.tasks: {} tasks, at most {MAX_TASKS} allowed; merge related tasks",
                    tasks.len()
                ));
            }
            let mut out = Vec::with_capacity(tasks.len());
            for (i, task) in tasks.iter().enumerate() {
                let description =
                    check_description(&format!("plan.tasks[{i}].description"), &task.description)?;
                let mut subtasks =
                    check_subtasks(&format!("plan.tasks[{i}].subtasks"), &task.subtasks)?;
                if subtasks.is_empty() {
                    subtasks.push(description.clone());
                }
                out.push((description, subtasks));
            }
            Ok(Checked::Tasks(out))
        }
        PlanInput::Flat { subtasks } => {
            if subtasks.is_empty() {
                return Err("plan.subtasks: empty; give at least one subtask".to_string());
            }
            Ok(Checked::Flat(check_subtasks("plan.subtasks", subtasks)?))
        }
    }
}

fn check_subtasks(field: &str, subtasks: &[String]) -> Result<Vec<String>, String> {
    if subtasks.len() > MAX_SUBTASKS {
        return Err(format!(
            "{field}: {} subtasks, at most {MAX_SUBTASKS} allowed; merge small steps",
            subtasks.len()
        ));
    }
    subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| check_description(&format!("{field}[{i}]"), s))
        .collect()
}

fn check_description(field: &str, text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("{field}: empty description"));
    }
    let n = text.chars().count();
    if n > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "{field}: description is {n} characters, at most {MAX_DESCRIPTION_CHARS} allowed; shorten it"
        ));
    }
    Ok(text.to_string())
}

/// One line of at most `max` characters: whitespace runs (newlines included) become
/// one space, other control characters are dropped, and a cut text ends with `...`.
fn clip(text: &str, max: usize) -> String {
    let mut line = String::with_capacity(text.len().min(max * 4));
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') {
            space = true;
        } else if !c.is_control() {
            if space && !line.is_empty() {
                line.push(' ');
            }
            space = false;
            line.push(c);
        }
    }
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(3)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push_str("...");
    cut
}

/// At most `items` entries, then `... and N more`.
fn capped(mut list: Vec<String>, items: usize) -> Value {
    if list.len() > items {
        let more = list.len() - items;
        list.truncate(items);
        list.push(format!("... and {more} more"));
    }
    json!(list)
}

fn capped_join(list: &[String], items: usize) -> String {
    let mut out = list[..list.len().min(items)].join(", ");
    if list.len() > items {
        out.push_str(&format!(" and {} more", list.len() - items));
    }
    out
}

fn yaml_chars(view: &Value) -> usize {
    serde_yaml_ng::to_string(view).map_or(usize::MAX, |s| s.chars().count())
}

/// The reason of the last `failure <n>: <reason>` note.
fn last_failure(sub: &Subtask) -> Option<&str> {
    sub.notes.iter().rev().find_map(|n| {
        n.strip_prefix("failure ")
            .and_then(|rest| rest.split_once(": "))
            .map(|(_, reason)| reason)
    })
}

fn blocked_ids(task: &TaskNode) -> Vec<&str> {
    task.subtasks
        .iter()
        .filter(|s| s.status == NodeStatus::Blocked)
        .map(|s| s.id.as_str())
        .collect()
}

/// One more than the highest subtask number of a task.
fn next_subtask_number(task: &TaskNode) -> usize {
    next_number(
        task.subtasks
            .iter()
            .map(|s| s.id.rsplit('.').next().unwrap_or("")),
    )
}

/// One more than the highest numeric id (1 when there is none).
fn next_number<'a>(ids: impl Iterator<Item = &'a str>) -> usize {
    ids.filter_map(|id| id.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
        + 1
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

const PLAN_SHAPE: &str = r#"expected {"tasks": [{"description": "...", "subtasks": ["...", "..."]}]} or {"subtasks": ["...", "..."]}"#;

/// The `plan` action offered to the model.
///
/// One closed object schema with two alternative fields (`tasks` or `subtasks`): a
/// top-level `oneOf` is not accepted by every provider, so [`parse_plan`] enforces
/// the either-or.
pub fn plan_tool_spec() -> ToolSpec {
    let description = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_DESCRIPTION_CHARS,
    });
    let subtasks = json!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_SUBTASKS,
        "items": description,
    });
    ToolSpec {
        name: "plan".to_string(),
        description: "Decompose the goal into tasks and subtasks; replaces the pending part of the plan. Give either `tasks` or `subtasks`.".to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "description": "Tasks in order, each with its concrete subtasks.",
                    "minItems": 1,
                    "maxItems": MAX_TASKS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "description": description,
                            "subtasks": subtasks,
                        },
                        "required": ["description", "subtasks"],
                        "additionalProperties": false,
                    },
                },
                "subtasks": {
                    "description": "Or: a flat list of subtasks (one task).",
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_SUBTASKS,
                    "items": description,
                },
            },
            "additionalProperties": false,
        }),
    }
}

/// The `finish_subtask` action offered to the model: `{summary: string}`.
pub fn finish_subtask_tool_spec() -> ToolSpec {
    ToolSpec {
        name: "finish_subtask".to_string(),
        description: "Mark the active subtask done and move to the next one.".to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "summary": {
                    "type": "string",
                    "description": "What was done, one line.",
                },
                "tested": {
                    "type": "boolean",
                    "description": "Claim the subtask is tested: accepted once a test run passed after your last change.",
                },
                "evidence": {
                    "type": "string",
                    "description": "What the tests showed (the check and its result), kept with the subtask.",
                },
            },
            "required": ["summary"],
            "additionalProperties": false,
        }),
    }
}

/// Parses and validates the arguments of a `plan` call. Errors are shown to the
/// model: each names the field and says what to send instead.
///
/// Accepted leniently: arguments given as a string holding a JSON object, `tasks` or
/// `subtasks` given as a string holding a JSON array, a task given as a plain string
/// or without `subtasks` (it becomes one subtask).
pub fn parse_plan(arguments: &Value) -> Result<PlanInput, String> {
    let args = object_arguments("plan", arguments)?;
    if let Some(key) = args.keys().find(|k| *k != "tasks" && *k != "subtasks") {
        return Err(format!(
            "plan: unknown field `{key}` (allowed: `tasks`, `subtasks`); {PLAN_SHAPE}"
        ));
    }
    let present = |key: &str| args.get(key).filter(|v| !v.is_null());
    let plan = match (present("tasks"), present("subtasks")) {
        (Some(_), Some(_)) => {
            return Err(
                "plan: give either `tasks` or `subtasks`, not both; put subtasks inside their task"
                    .to_string(),
            )
        }
        (None, None) => return Err(format!("plan: missing `tasks` or `subtasks`; {PLAN_SHAPE}")),
        (Some(tasks), None) => {
            let tasks = array("plan.tasks", tasks)?
                .iter()
                .enumerate()
                .map(|(i, t)| parse_task(i, t))
                .collect::<Result<Vec<_>, _>>()?;
            PlanInput::Tasks { tasks }
        }
        (None, Some(subtasks)) => PlanInput::Flat {
            subtasks: strings("plan.subtasks", subtasks)?,
        },
    };
    check_plan(&plan)?;
    Ok(plan)
}

/// Parses the arguments of a `finish_subtask` call: checked against the schema the
/// model is offered ([`finish_subtask_tool_spec`]) by the one argument validator, then
/// read into [`FinishSubtask`] (summary and evidence trimmed).
pub fn parse_finish_subtask(arguments: &Value) -> Result<FinishSubtask, String> {
    static SCHEMA: std::sync::LazyLock<ArgumentSchema> = std::sync::LazyLock::new(|| {
        ArgumentSchema::new(finish_subtask_tool_spec().input_schema)
            .expect("the finish_subtask schema is valid")
    });
    const SHAPE: &str = r#"expected {"summary": "what was done"}"#;
    let args = object_arguments("finish_subtask", arguments)?;
    SCHEMA
        .check(&args)
        .map_err(|p| format!("finish_subtask: {}; {SHAPE}", p.join("; ")))?;
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let summary = text("summary");
    if summary.is_empty() {
        return Err("finish_subtask: `summary` is empty; say in one line what was done".into());
    }
    Ok(FinishSubtask {
        summary,
        tested: args.get("tested").and_then(Value::as_bool).unwrap_or(false),
        evidence: text("evidence"),
    })
}

/// A parsed `finish_subtask` call.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishSubtask {
    /// What was done.
    pub summary: String,
    /// Whether the model claims the subtask is tested.
    pub tested: bool,
    /// What shows it (may be empty; the guards decide whether a claim needs it).
    pub evidence: String,
}

fn object_arguments(tool: &str, arguments: &Value) -> Result<Map<String, Value>, String> {
    match arguments {
        Value::Object(m) => Ok(m.clone()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(format!("{tool}: arguments must be a JSON object")),
        },
        other => Err(format!(
            "{tool}: arguments must be a JSON object, got {}",
            json_type(other)
        )),
    }
}

fn parse_task(i: usize, value: &Value) -> Result<PlanTask, String> {
    let field = format!("plan.tasks[{i}]");
    let task = match value {
        Value::String(s) => {
            return Ok(PlanTask {
                description: s.clone(),
                subtasks: Vec::new(),
            })
        }
        Value::Object(m) => m,
        other => {
            return Err(format!(
                "{field}: expected an object {{\"description\": string, \"subtasks\": [string]}}, got {}",
                json_type(other)
            ))
        }
    };
    if let Some(key) = task
        .keys()
        .find(|k| *k != "description" && *k != "subtasks")
    {
        return Err(format!(
            "{field}: unknown field `{key}` (allowed: `description`, `subtasks`)"
        ));
    }
    let description = match task.get("description") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => {
            return Err(format!(
                "{field}.description: missing; each task is {{\"description\": string, \"subtasks\": [string]}}"
            ))
        }
        Some(other) => {
            return Err(format!(
                "{field}.description: expected a string, got {}",
                json_type(other)
            ))
        }
    };
    let subtasks = match task.get("subtasks") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => strings(&format!("{field}.subtasks"), v)?,
    };
    Ok(PlanTask {
        description,
        subtasks,
    })
}

/// An array, or a string holding a JSON array.
fn array(field: &str, value: &Value) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(a) => Ok(a.clone()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(a)) => Ok(a),
            _ => Err(format!("{field}: expected an array, got a string")),
        },
        other => Err(format!(
            "{field}: expected an array, got {}",
            json_type(other)
        )),
    }
}

fn strings(field: &str, value: &Value) -> Result<Vec<String>, String> {
    array(field, value)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s),
            other => Err(format!(
                "{field}[{i}]: expected a string (the subtask's description), got {}",
                json_type(&other)
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(tasks: &[(&str, &[&str])]) -> PlanInput {
        PlanInput::Tasks {
            tasks: tasks
                .iter()
                .map(|(d, subs)| PlanTask {
                    description: d.to_string(),
                    subtasks: subs.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    fn flat(subs: &[&str]) -> PlanInput {
        PlanInput::Flat {
            subtasks: subs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn three_tasks() -> FocusTree {
        FocusTree::from_plan(
            "Create mathx package with add function and tests",
            &plan(&[
                (
                    "Create package structure",
                    &["Create mathx/__init__.py", "Add add() function"],
                ),
                (
                    "Add tests",
                    &["Write tests/test_mathx.py", "Fix failing pytest"],
                ),
                ("Lint", &["Run ruff check"]),
            ]),
        )
        .unwrap()
    }

    fn statuses(tree: &FocusTree) -> Vec<(String, NodeStatus)> {
        tree.tasks
            .iter()
            .flat_map(|t| {
                std::iter::once((t.id.clone(), t.status))
                    .chain(t.subtasks.iter().map(|s| (s.id.clone(), s.status)))
            })
            .collect()
    }

    fn yaml(v: &Value) -> String {
        serde_yaml_ng::to_string(v).unwrap()
    }

    use NodeStatus::*;

    #[test]
    fn new_has_one_implicit_subtask_in_progress() {
        let tree = FocusTree::new("  Fix the bug  ");
        assert_eq!(tree.goal, "Fix the bug");
        assert_eq!(
            statuses(&tree),
            vec![("1".into(), InProgress), ("1.1".into(), InProgress)]
        );
        assert_eq!(tree.current, Some((0, 0)));
        assert_eq!(tree.current_subtask().unwrap().description, "Fix the bug");
        assert!(!tree.all_done());
    }

    #[test]
    fn from_plan_with_tasks() {
        let tree = three_tasks();
        assert_eq!(tree.current, Some((0, 0)));
        assert_eq!(
            statuses(&tree),
            vec![
                ("1".into(), InProgress),
                ("1.1".into(), InProgress),
                ("1.2".into(), Pending),
                ("2".into(), Pending),
                ("2.1".into(), Pending),
                ("2.2".into(), Pending),
                ("3".into(), Pending),
                ("3.1".into(), Pending),
            ]
        );
        assert_eq!(tree.tasks[1].subtasks[1].description, "Fix failing pytest");
    }

    #[test]
    fn from_plan_flat_makes_one_task_named_after_the_goal() {
        let tree = FocusTree::from_plan("Ship it", &flat(&[" write code ", "test it"])).unwrap();
        assert_eq!(tree.tasks.len(), 1);
        assert_eq!(tree.tasks[0].description, "Ship it");
        let ids: Vec<_> = tree.tasks[0]
            .subtasks
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(ids, ["1.1", "1.2"]);
        assert_eq!(tree.tasks[0].subtasks[0].description, "write code");
        assert_eq!(tree.current_subtask().unwrap().id, "1.1");
    }

    #[test]
    fn from_plan_task_without_subtasks_is_one_subtask() {
        let tree = FocusTree::from_plan("g", &plan(&[("Only task", &[])])).unwrap();
        assert_eq!(tree.tasks[0].subtasks.len(), 1);
        assert_eq!(tree.tasks[0].subtasks[0].description, "Only task");
    }

    #[test]
    fn from_plan_validation_names_the_field() {
        let err = |p: &PlanInput| FocusTree::from_plan("g", p).unwrap_err();
        assert_eq!(
            err(&plan(&[("a", &["x"]), ("b", &["  "])])),
            "plan.tasks[1].subtasks[0]: empty description"
        );
        assert_eq!(
            err(&plan(&[("", &["x"])])),
            "plan.tasks[0].description: empty description"
        );
        assert_eq!(err(&plan(&[])), "plan.tasks: empty; give at least one task");
        assert_eq!(
            err(&flat(&[])),
            "plan.subtasks: empty; give at least one subtask"
        );
        let long = "x".repeat(201);
        assert!(err(&flat(&["ok", &long]))
            .starts_with("plan.subtasks[1]: description is 201 characters"));
        let ok = "é".repeat(200); // characters, not bytes
        assert!(FocusTree::from_plan("g", &flat(&[&ok])).is_ok());
        let many: Vec<(&str, &[&str])> = vec![("t", &["s"]); 13];
        assert!(err(&plan(&many)).starts_with("plan.tasks: 13 tasks, at most 12"));
        let twelve: Vec<(&str, &[&str])> = vec![("t", &["s"]); 12];
        assert!(FocusTree::from_plan("g", &plan(&twelve)).is_ok());
        let subs = ["s"; 13];
        assert!(err(&plan(&[("t", &subs)]))
            .starts_with("plan.tasks[0].subtasks: 13 subtasks, at most 12"));
        assert!(err(&flat(&subs)).starts_with("plan.subtasks: 13 subtasks"));
    }

    #[test]
    fn plan_input_deserializes_both_shapes() {
        let t: PlanInput =
            serde_yaml_ng::from_str("tasks:\n  - description: a\n    subtasks: [x, y]\n").unwrap();
        assert_eq!(t, plan(&[("a", &["x", "y"])]));
        let f: PlanInput = serde_yaml_ng::from_str("subtasks: [x, y]\n").unwrap();
        assert_eq!(f, flat(&["x", "y"]));
    }

    #[test]
    fn complete_current_moves_through_subtasks_and_tasks() {
        let mut tree = three_tasks();
        assert_eq!(
            tree.complete_current("created the package"),
            "completed 1.1; now on 1.2: Add add() function"
        );
        assert_eq!(tree.tasks[0].subtasks[0].notes, ["created the package"]);
        assert_eq!(tree.tasks[0].status, InProgress);
        assert_eq!(
            tree.complete_current("added"),
            "completed 1.2; task 1 completed; now on 2.1: Write tests/test_mathx.py"
        );
        assert_eq!(tree.tasks[0].status, Completed);
        assert_eq!(tree.tasks[1].status, InProgress);
        assert_eq!(tree.current, Some((1, 0)));
        tree.complete_current("");
        tree.complete_current("fixed");
        assert_eq!(tree.current_subtask().unwrap().id, "3.1");
        assert!(!tree.all_done());
        assert_eq!(
            tree.complete_current("clean"),
            "completed 3.1; task 3 completed; all tasks completed"
        );
        assert!(tree.all_done());
        assert!(!tree.is_stuck());
        assert_eq!(tree.current, None);
        assert!(statuses(&tree).iter().all(|(_, s)| *s == Completed));
        assert_eq!(
            tree.complete_current("again"),
            "no active subtask: all tasks are completed"
        );
    }

    #[test]
    fn record_action_goes_to_the_current_subtask_once() {
        let mut tree = three_tasks();
        tree.record_action(1);
        tree.record_action(2);
        tree.record_action(2);
        tree.complete_current("done");
        tree.record_action(3);
        assert_eq!(tree.tasks[0].subtasks[0].actions, [1, 2]);
        assert_eq!(tree.tasks[0].subtasks[1].actions, [3]);
        assert_eq!(tree.current_actions(), [3]);
    }

    #[test]
    fn two_failures_block_the_subtask_and_move_on() {
        let mut tree = three_tasks();
        assert_eq!(
            tree.fail_current("pytest loop"),
            FailOutcome::Recorded { failures: 1 }
        );
        assert_eq!(tree.current, Some((0, 0)));
        assert_eq!(
            tree.fail_current("ImportError: No module named 'mathx'"),
            FailOutcome::SubtaskBlocked { id: "1.1".into() }
        );
        let task = &tree.tasks[0];
        assert_eq!(task.subtasks[0].status, Blocked);
        assert_eq!(task.subtasks[0].failures, 2);
        assert_eq!(
            task.notes,
            ["subtask 1.1 blocked after 2 failures: ImportError: No module named 'mathx'"]
        );
        assert_eq!(task.status, InProgress);
        assert_eq!(tree.current_subtask().unwrap().id, "1.2");
        assert_eq!(tree.current_subtask().unwrap().status, InProgress);
    }

    #[test]
    fn blocking_the_last_open_subtask_escalates_the_task() {
        let mut tree = three_tasks();
        tree.complete_current("ok");
        tree.fail_current("a");
        let outcome = tree.fail_current("b");
        let FailOutcome::TaskEscalated { id, reason } = outcome else {
            panic!("expected TaskEscalated, got {outcome:?}");
        };
        assert_eq!(id, "1");
        assert_eq!(
            reason,
            "task 1 escalated: subtask 1.2 blocked; last failure: b"
        );
        assert_eq!(tree.tasks[0].status, Escalated);
        assert_eq!(tree.current_subtask().unwrap().id, "2.1");
        assert!(!tree.all_done());
    }

    #[test]
    fn blocking_everything_leaves_nothing() {
        let mut tree = FocusTree::from_plan("g", &flat(&["only"])).unwrap();
        tree.fail_current("x");
        let outcome = tree.fail_current("y");
        let FailOutcome::NothingLeft { reason } = outcome else {
            panic!("expected NothingLeft, got {outcome:?}");
        };
        assert!(
            reason.contains("subtask 1.1 blocked after 2 failures (y)"),
            "{reason}"
        );
        assert!(reason.contains("escalated: task 1"), "{reason}");
        assert_eq!(tree.tasks[0].status, Escalated);
        assert!(tree.is_stuck());
        assert!(matches!(
            tree.fail_current("z"),
            FailOutcome::NothingLeft { .. }
        ));
        assert_eq!(
            tree.complete_current("?"),
            "no active subtask: the remaining subtasks are blocked"
        );
    }

    #[test]
    fn completing_next_to_a_blocked_subtask_escalates_the_task() {
        let mut tree = three_tasks();
        tree.fail_current("a");
        tree.fail_current("b");
        assert_eq!(tree.current_subtask().unwrap().id, "1.2");
        let line = tree.complete_current("done");
        assert_eq!(
            line,
            "completed 1.2; task 1 escalated (1.1 blocked); now on 2.1: Write tests/test_mathx.py"
        );
        assert_eq!(tree.tasks[0].status, Escalated);
    }

    #[test]
    fn replan_keeps_completed_subtasks() {
        let mut tree = three_tasks();
        tree.record_action(1);
        tree.complete_current("created");
        tree.record_action(2);
        tree.fail_current("wrong file");
        tree.replan(&plan(&[
            (
                "Implement add",
                &["Write add() in mathx/core.py", "Export it"],
            ),
            ("Test", &["Write tests"]),
        ]))
        .unwrap();
        assert_eq!(
            statuses(&tree),
            vec![
                ("1".into(), Completed),
                ("1.1".into(), Completed),
                ("4".into(), InProgress),
                ("4.1".into(), InProgress),
                ("4.2".into(), Pending),
                ("5".into(), Pending),
                ("5.1".into(), Pending),
            ]
        );
        assert_eq!(tree.tasks[0].subtasks[0].actions, [1]);
        assert_eq!(tree.tasks[0].subtasks[0].notes, ["created"]);
        assert_eq!(
            tree.tasks[0].notes,
            ["replanned: 1 unfinished subtask replaced by the new plan"]
        );
        assert_eq!(tree.current, Some((1, 0)));
        assert!(tree.current_actions().is_empty());
    }

    #[test]
    fn flat_replan_continues_a_partly_done_task() {
        let mut tree = three_tasks();
        tree.complete_current("created");
        tree.replan(&flat(&["Add add()", "Add sub()"])).unwrap();
        assert_eq!(
            statuses(&tree),
            vec![
                ("1".into(), InProgress),
                ("1.1".into(), Completed),
                ("1.3".into(), InProgress),
                ("1.4".into(), Pending),
            ]
        );
        // From scratch, a flat replan is a task named after the goal.
        let mut fresh = three_tasks();
        fresh.replan(&flat(&["one"])).unwrap();
        assert_eq!(fresh.tasks.len(), 1);
        assert_eq!(fresh.tasks[0].id, "4");
        assert_eq!(fresh.tasks[0].description, fresh.goal);
    }

    #[test]
    fn invalid_replan_leaves_the_tree_unchanged() {
        let mut tree = three_tasks();
        tree.complete_current("x");
        let before = tree.clone();
        assert_eq!(
            tree.replan(&plan(&[("a", &[""])])).unwrap_err(),
            "plan.tasks[0].subtasks[0]: empty description"
        );
        assert_eq!(tree, before);
    }

    #[test]
    fn repair_restores_the_invariants() {
        let mut tree = three_tasks();
        tree.complete_current("x");
        let good = tree.clone();
        tree.current = Some((7, 3));
        tree.repair();
        assert_eq!(tree, good);
        tree.current = None;
        tree.tasks[0].status = Pending;
        tree.repair();
        assert_eq!(tree, good);
        // Two subtasks in progress (a hand-edited state): the first wins.
        tree.tasks[1].subtasks[1].status = InProgress;
        tree.current = None;
        tree.repair();
        assert_eq!(tree, good);
    }

    #[test]
    fn branch_view_shows_only_the_current_branch() {
        let mut tree = three_tasks();
        tree.complete_current("created");
        tree.complete_current("added");
        tree.fail_current("first try failed");
        let view = tree.branch_view(
            &["a1".into(), "a2".into(), "a3".into(), "a4".into()],
            Some("tests: 3 passed, 1 failed"),
            &["write_file tests/test_mathx.py repeated 3 times".into()],
        );
        let text = yaml(&view);
        // Completed task 1 and task 3 (beyond the next subtask's task) are not shown.
        for absent in [
            "Create package structure",
            "mathx/__init__",
            "Add add()",
            "Lint",
            "Run ruff",
            "a1",
        ] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
        for present in [
            "Write tests/test_mathx.py",
            "Fix failing pytest",
            "a2",
            "a4",
            "first try failed",
            "tests: 3 passed",
        ] {
            assert!(text.contains(present), "{present} missing in\n{text}");
        }
        assert_eq!(view["task"]["progress"], "0/2 subtasks done");
        assert_eq!(view["subtask"]["id"], "2.1");
        assert_eq!(view["subtask"]["failures"], 1);
        assert_eq!(view["next"], "2.2: Fix failing pytest");
        // The next subtask in the next task names its task.
        tree.complete_current("written");
        let view = tree.branch_view(&[], None, &[]);
        assert_eq!(view["next"], "3.1: Run ruff check (starts task 3: Lint)");
        assert!(view.get("recent_actions").is_none());
        assert!(view.get("probe").is_none());
        assert!(view.get("blocked").is_none());
    }

    #[test]
    fn branch_view_lists_blocked_siblings_and_the_end_states() {
        let mut tree = three_tasks();
        tree.complete_current("ok");
        tree.complete_current("ok");
        tree.fail_current("x");
        tree.fail_current("ImportError");
        let view = tree.branch_view(&[], None, &[]);
        assert_eq!(
            view["blocked"],
            json!(["2.1 Write tests/test_mathx.py: ImportError"])
        );
        tree.complete_current("ok");
        tree.complete_current("ok");
        let view = tree.branch_view(&[], None, &[]);
        assert_eq!(
            view["status"],
            "no subtask left: the rest is blocked; escalate or replan"
        );
        let escalated = view["escalated_tasks"].to_string();
        assert!(
            escalated.contains("2 Add tests: subtask 2.1 blocked after 2 failures: ImportError"),
            "{escalated}"
        );

        let mut done = FocusTree::from_plan("g", &flat(&["a"])).unwrap();
        done.complete_current("ok");
        assert_eq!(
            done.branch_view(&[], None, &[])["status"],
            "all tasks completed"
        );
    }

    fn huge_tree(text: &str) -> FocusTree {
        let long = |prefix: String| {
            let mut s = prefix;
            while s.chars().count() < 200 {
                s.push_str(text);
            }
            s.chars().take(200).collect::<String>()
        };
        let mut tree = FocusTree {
            goal: long("goal ".into()).repeat(10),
            tasks: Vec::new(),
            current: None,
        };
        for t in 1..=50 {
            tree.push_task(
                long(format!("task {t} ")),
                (1..=12)
                    .map(|s| long(format!("subtask {t}.{s} ")))
                    .collect(),
            );
        }
        tree.focus_next();
        // Block 11 subtasks of task 20, completing the tasks before it.
        while tree.current.unwrap().0 < 19 {
            tree.record_action(tree.current.unwrap().0 as u64);
            tree.complete_current(&long("summary ".into()));
        }
        for _ in 0..22 {
            tree.fail_current(&long("failure ".into()));
        }
        tree
    }

    #[test]
    fn branch_view_of_a_huge_tree_stays_under_2000_chars() {
        for text in [
            "lorem ipsum dolor ",
            "\"quoted\\path\" ",
            "a\nb\tc: d # e ",
            "ünï©ødé ✓ ",
            "- [x] {y}: 'z' ",
        ] {
            let tree = huge_tree(text);
            assert_eq!(tree.current_subtask().unwrap().id, "20.12");
            let actions: Vec<String> = (0..10)
                .map(|i| format!("{i} {}", text.repeat(40)))
                .collect();
            let warnings: Vec<String> = (0..20)
                .map(|i| format!("warning {i}: {}", text.repeat(30)))
                .collect();
            let probe = text.repeat(100);
            let view = tree.branch_view(&actions, Some(&probe), &warnings);
            let rendered = yaml(&view);
            let n = rendered.chars().count();
            assert!(n < VIEW_MAX_CHARS, "{n} chars:\n{rendered}");
            // Also as a section of the context (key + nesting).
            let section = yaml(&json!({ "focus": view }));
            assert!(section.chars().count() < VIEW_MAX_CHARS, "{section}");
            assert!(rendered.contains("... and"), "{rendered}");
            assert!(view["subtask"]["id"] == "20.12", "{rendered}");
            assert!(
                !rendered.contains("task 19 ") && !rendered.contains("task 22 "),
                "{rendered}"
            );
            assert!(rendered.contains("starts task 21"), "{rendered}");
        }
        // With no current subtask: every task escalated.
        let mut tree = huge_tree("x y ");
        while !tree.is_stuck() {
            tree.fail_current(&"why ".repeat(100));
        }
        let view = tree.branch_view(&[], Some(&"p".repeat(5000)), &[]);
        let rendered = yaml(&view);
        assert!(rendered.chars().count() < VIEW_MAX_CHARS, "{rendered}");
        assert!(rendered.contains("... and"), "{rendered}");
    }

    #[test]
    fn clip_makes_one_bounded_line() {
        assert_eq!(clip("  a\n\n b\tc  ", 10), "a b c");
        assert_eq!(clip("abcdefghij", 10), "abcdefghij");
        assert_eq!(clip("abcdefghijk", 10), "abcdefg...");
        assert_eq!(clip("ab\u{7}c", 10), "abc");
        assert_eq!(clip("ééééééééééé", 5).chars().count(), 5);
    }

    fn sample_trees() -> Vec<FocusTree> {
        let mut mid = three_tasks();
        mid.record_action(3);
        mid.complete_current("created: with 'quotes' and \"double\"");
        mid.fail_current("line one\nline two");
        mid.fail_current("again");
        let mut done = FocusTree::from_plan("g", &flat(&["only"])).unwrap();
        done.complete_current("ok");
        let mut odd = FocusTree::new("yes: no # not a comment\n- list?");
        odd.tasks[0].subtasks[0].description = "null".into();
        odd.tasks[0].notes.push("~".into());
        odd.tasks[0].subtasks[0].actions = vec![u64::MAX, 0];
        vec![
            FocusTree::default(),
            FocusTree::new("Fix the bug"),
            mid,
            done,
            odd,
            huge_tree("ü \"x\" "),
        ]
    }

    #[test]
    fn serde_round_trip_is_the_identity() {
        for tree in sample_trees() {
            let text = serde_yaml_ng::to_string(&tree).unwrap();
            let back: FocusTree = serde_yaml_ng::from_str(&text).unwrap();
            assert_eq!(back, tree, "{text}");
            let json = serde_json::to_string(&tree).unwrap();
            assert_eq!(serde_json::from_str::<FocusTree>(&json).unwrap(), tree);
        }
        // Optional fields may be absent in older states.
        let old: FocusTree = serde_yaml_ng::from_str(
            "goal: g\ntasks:\n- id: '1'\n  description: t\n  status: in_progress\n  subtasks:\n  - id: '1.1'\n    description: s\n    status: in_progress\n    failures: 0\ncurrent: [0, 0]\n",
        )
        .unwrap();
        assert_eq!(old, FocusTree::new("g").with_descriptions("t", "s"));
    }

    impl FocusTree {
        fn with_descriptions(mut self, task: &str, sub: &str) -> FocusTree {
            self.tasks[0].description = task.into();
            self.tasks[0].subtasks[0].description = sub.into();
            self
        }
    }

    #[test]
    fn branch_view_snapshot() {
        let mut tree = FocusTree::from_plan(
            "Create mathx package with add function and tests",
            &plan(&[
                (
                    "Create package structure",
                    &["Create mathx/__init__.py", "Add add() function"],
                ),
                (
                    "Add tests",
                    &[
                        "Write tests/test_mathx.py",
                        "Make tests importable",
                        "Fix failing pytest",
                        "Add edge cases",
                    ],
                ),
                ("Lint", &["Run ruff check"]),
                ("Document", &["Write README usage section"]),
            ]),
        )
        .unwrap();
        for (step, summary) in [
            (1, "created mathx/__init__.py"),
            (2, "add() in mathx/core.py, exported"),
        ] {
            tree.record_action(step);
            tree.complete_current(summary);
        }
        tree.record_action(3);
        tree.complete_current("wrote 4 tests");
        tree.record_action(4);
        tree.fail_current("pytest: ImportError: No module named 'mathx'");
        tree.record_action(5);
        tree.fail_current("edit reverted: tests still fail to import mathx");
        tree.record_action(6);
        tree.fail_current("loop: run_tests repeated 3 times with the same result");
        let view = tree.branch_view(
            &[
                "step 6: run_tests -> failure (1 failed: test_add_negative)".into(),
                "step 7: read_file mathx/core.py -> success".into(),
                "step 8: edit_file mathx/core.py -> success".into(),
            ],
            Some("tests: 3 passed, 1 failed; ruff: not run"),
            &["run_tests repeated 3 times without a change: change the code first".into()],
        );
        let text = yaml(&view);
        assert!(text.chars().count() < VIEW_MAX_CHARS);
        insta::assert_snapshot!("branch_view_mid_run", text);
    }

    #[test]
    fn tool_specs() {
        let plan = plan_tool_spec();
        assert_eq!(plan.name, "plan");
        assert!(plan.description.starts_with(
            "Decompose the goal into tasks and subtasks; replaces the pending part of the plan"
        ));
        let s = &plan.input_schema;
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["tasks"]["maxItems"], 12);
        assert_eq!(
            s["properties"]["tasks"]["items"]["required"],
            json!(["description", "subtasks"])
        );
        assert_eq!(s["properties"]["subtasks"]["items"]["maxLength"], 200);
        let finish = finish_subtask_tool_spec();
        assert_eq!(finish.name, "finish_subtask");
        assert_eq!(finish.input_schema["required"], json!(["summary"]));
        assert_eq!(finish.input_schema["additionalProperties"], false);
    }

    #[test]
    fn parse_plan_accepts_both_shapes() {
        let p = parse_plan(&json!({"tasks": [{"description": "a", "subtasks": ["x", "y"]}, "b"]}))
            .unwrap();
        assert_eq!(p, plan(&[("a", &["x", "y"]), ("b", &[])]));
        assert_eq!(
            parse_plan(&json!({"subtasks": ["x"]})).unwrap(),
            flat(&["x"])
        );
        // Stringified arguments and arrays, as some providers send them.
        assert_eq!(
            parse_plan(&json!(r#"{"subtasks": ["x"]}"#)).unwrap(),
            flat(&["x"])
        );
        assert_eq!(
            parse_plan(&json!({"subtasks": "[\"x\"]", "tasks": null})).unwrap(),
            flat(&["x"])
        );
    }

    #[test]
    fn parse_plan_errors_are_actionable() {
        let err = |v: Value| parse_plan(&v).unwrap_err();
        assert!(
            err(json!({})).starts_with("plan: missing `tasks` or `subtasks`; expected {\"tasks\"")
        );
        assert!(err(json!({"tasks": [], "subtasks": []}))
            .contains("either `tasks` or `subtasks`, not both"));
        assert!(err(json!({"steps": []}))
            .starts_with("plan: unknown field `steps` (allowed: `tasks`, `subtasks`)"));
        assert!(err(json!([1])).starts_with("plan: arguments must be a JSON object, got an array"));
        assert_eq!(
            err(json!({"tasks": 3})),
            "plan.tasks: expected an array, got a number"
        );
        assert!(err(json!({"tasks": [{"subtasks": []}]}))
            .starts_with("plan.tasks[0].description: missing"));
        assert_eq!(
            err(json!({"tasks": [{"description": "a", "subtasks": ["x", 2]}]})),
            "plan.tasks[0].subtasks[1]: expected a string (the subtask's description), got a number"
        );
        assert_eq!(
            err(
                json!({"tasks": [{"description": "a", "subtasks": ["x"]}, {"description": "b", "subtasks": [""]}]})
            ),
            "plan.tasks[1].subtasks[0]: empty description"
        );
        assert!(err(json!({"tasks": [{"description": "a", "steps": []}]}))
            .starts_with("plan.tasks[0]: unknown field `steps`"));
        assert!(err(json!({"tasks": [7]})).starts_with("plan.tasks[0]: expected an object"));
        assert_eq!(
            err(json!({"subtasks": []})),
            "plan.subtasks: empty; give at least one subtask"
        );
    }

    #[test]
    fn parse_finish_subtask_reads_the_summary() {
        assert_eq!(
            parse_finish_subtask(&json!({"summary": " did it "})).unwrap(),
            FinishSubtask {
                summary: "did it".into(),
                tested: false,
                evidence: String::new(),
            }
        );
        let claimed =
            parse_finish_subtask(&json!({"summary": "x", "tested": true, "evidence": " ok "}))
                .unwrap();
        assert!(claimed.tested);
        assert_eq!(claimed.evidence, "ok");
        assert!(
            parse_finish_subtask(&json!({"summary": "x", "tested": "yes"}))
                .unwrap_err()
                .contains("`tested` must be a boolean")
        );
        assert!(parse_finish_subtask(&json!({}))
            .unwrap_err()
            .contains("missing required field `summary`"));
        assert!(parse_finish_subtask(&json!({"summary": ""}))
            .unwrap_err()
            .contains("empty"));
        assert!(parse_finish_subtask(&json!({"summary": 1}))
            .unwrap_err()
            .contains("must be a string"));
        assert!(parse_finish_subtask(&json!({"summary": "x", "y": 1}))
            .unwrap_err()
            .contains("unknown field `y`"));
    }

    mod props {
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        fn status() -> impl Strategy<Value = NodeStatus> {
            prop_oneof![
                Just(Pending),
                Just(InProgress),
                Just(Completed),
                Just(Blocked),
                Just(Escalated),
            ]
        }

        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-z0-9 :#'\"\\\\{}\\[\\]&*!|>%@`,?-]{0,24}",
                any::<String>(),
                Just("null".to_string()),
                Just("~".to_string()),
                Just("0.10".to_string()),
            ]
        }

        fn subtask() -> impl Strategy<Value = Subtask> {
            (
                text(),
                text(),
                status(),
                any::<u32>(),
                vec(text(), 0..3),
                vec(any::<u64>(), 0..4),
                proptest::option::of(text()),
            )
                .prop_map(
                    |(id, description, status, failures, notes, actions, tested)| Subtask {
                        id,
                        description,
                        status,
                        failures,
                        notes,
                        actions,
                        tested,
                    },
                )
        }

        fn any_tree() -> impl Strategy<Value = FocusTree> {
            let task = (
                text(),
                text(),
                status(),
                vec(subtask(), 0..4),
                vec(text(), 0..3),
            )
                .prop_map(|(id, description, status, subtasks, notes)| TaskNode {
                    id,
                    description,
                    status,
                    subtasks,
                    notes,
                });
            (
                text(),
                vec(task, 0..4),
                proptest::option::of((any::<usize>(), any::<usize>())),
            )
                .prop_map(|(goal, tasks, current)| FocusTree {
                    goal,
                    tasks,
                    current,
                })
        }

        #[derive(Debug, Clone)]
        enum Op {
            Record(u64),
            Complete(String),
            Fail(String),
            Replan(Vec<Vec<String>>),
            ReplanFlat(Vec<String>),
        }

        fn op() -> impl Strategy<Value = Op> {
            let desc = "[a-z][a-z ]{0,29}";
            prop_oneof![
                3 => any::<u64>().prop_map(Op::Record),
                4 => text().prop_map(Op::Complete),
                4 => text().prop_map(Op::Fail),
                1 => vec(vec(desc, 0..4), 1..4).prop_map(Op::Replan),
                1 => vec(desc, 1..4).prop_map(Op::ReplanFlat),
            ]
        }

        /// The invariants every operation keeps.
        fn check_invariants(tree: &FocusTree) -> Result<(), TestCaseError> {
            let in_progress: Vec<(usize, usize)> = tree
                .positions()
                .filter(|&(t, s)| tree.tasks[t].subtasks[s].status == InProgress)
                .collect();
            match tree.current {
                Some(c) => prop_assert_eq!(in_progress, vec![c]),
                None => {
                    prop_assert!(in_progress.is_empty());
                    prop_assert!(tree.next_pending_after(None).is_none());
                }
            }
            let mut copy = tree.clone();
            for ti in 0..copy.tasks.len() {
                copy.refresh_task(ti);
            }
            prop_assert_eq!(&copy, tree, "task statuses are derived from subtasks");
            let mut repaired = tree.clone();
            repaired.repair();
            prop_assert_eq!(&repaired, tree, "repair is a no-op on a valid tree");
            let mut ids: Vec<&str> = tree
                .tasks
                .iter()
                .flat_map(|t| std::iter::once(&t.id).chain(t.subtasks.iter().map(|s| &s.id)))
                .map(String::as_str)
                .collect();
            let n = ids.len();
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len(), n, "ids are unique");
            let view = tree.branch_view(&["a".repeat(500)], Some("p"), &["w".repeat(500)]);
            prop_assert!(yaml(&view).chars().count() < VIEW_MAX_CHARS);
            Ok(())
        }

        proptest! {
            #[test]
            fn yaml_round_trip_is_the_identity(tree in any_tree()) {
                let text = serde_yaml_ng::to_string(&tree).unwrap();
                let back: FocusTree = serde_yaml_ng::from_str(&text).unwrap();
                prop_assert_eq!(back, tree);
            }

            #[test]
            fn operations_keep_the_invariants(
                subtasks in vec(vec("[a-z][a-z ]{0,29}", 0..4), 1..4),
                ops in vec(op(), 0..40),
            ) {
                let tasks = subtasks
                    .iter()
                    .enumerate()
                    .map(|(i, subs)| PlanTask { description: format!("task {i}"), subtasks: subs.clone() })
                    .collect();
                let mut tree = FocusTree::from_plan("goal", &PlanInput::Tasks { tasks }).unwrap();
                check_invariants(&tree)?;
                for op in ops {
                    let completed_before = tree
                        .tasks
                        .iter()
                        .flat_map(|t| &t.subtasks)
                        .filter(|s| s.status == Completed)
                        .count();
                    match op {
                        Op::Record(step) => tree.record_action(step),
                        Op::Complete(summary) => {
                            tree.complete_current(&summary);
                        }
                        Op::Fail(reason) => {
                            let outcome = tree.fail_current(&reason);
                            let nothing_left = matches!(outcome, FailOutcome::NothingLeft { .. });
                            prop_assert_eq!(nothing_left, tree.current.is_none());
                        }
                        Op::Replan(tasks) => {
                            let tasks = tasks
                                .into_iter()
                                .enumerate()
                                .map(|(i, subtasks)| PlanTask { description: format!("new {i}"), subtasks })
                                .collect();
                            tree.replan(&PlanInput::Tasks { tasks }).unwrap();
                            prop_assert!(tree.current.is_some());
                        }
                        Op::ReplanFlat(subtasks) => {
                            tree.replan(&PlanInput::Flat { subtasks }).unwrap();
                            prop_assert!(tree.current.is_some());
                        }
                    }
                    let completed_after = tree
                        .tasks
                        .iter()
                        .flat_map(|t| &t.subtasks)
                        .filter(|s| s.status == Completed)
                        .count();
                    prop_assert!(completed_after >= completed_before, "completed work is never lost");
                    check_invariants(&tree)?;
                    let text = serde_yaml_ng::to_string(&tree).unwrap();
                    prop_assert_eq!(&serde_yaml_ng::from_str::<FocusTree>(&text).unwrap(), &tree);
                }
            }
        }
    }
}
