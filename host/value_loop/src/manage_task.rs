//! `manage_task`, the one way a role changes the plan, and its deterministic guardrails
//! (seed 002 section 15, "Task Mutation Guardrails"): required fields, duplicate refusal
//! (Jaccard similarity of word sets >= 0.75), dependencies that exist, no cycles, no
//! removal of a task others depend on, and the mid-loop open-task ceiling. A refused
//! call answers `VALIDATION_ERROR: ...` to the model, which is fed back, never a crash.
//! The task's source is set by the host from the calling role, never by the model.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::limits::Limits;
use crate::state::{SprintState, SprintTask, TaskSource, TaskStatus};

/// Similarity at or above which a new task is a duplicate of an open one.
pub const DUPLICATE_SIMILARITY: f64 = 0.75;

/// A `manage_task` call, as the model sends it (validated before it touches state).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum ManageTask {
    /// Add a task.
    Add {
        /// Its id.
        task_id: String,
        /// What to build.
        #[serde(default)]
        description: String,
        /// Why it matters.
        #[serde(default)]
        value: String,
        /// How to verify it.
        #[serde(default)]
        acceptance: String,
        /// Tasks that must be done first.
        #[serde(default)]
        dependencies: Vec<String>,
        /// Grouping.
        #[serde(default)]
        phase: String,
        /// Files it will touch.
        #[serde(default)]
        files_expected: Vec<String>,
        /// PRD section it traces to.
        #[serde(default)]
        prd_section: String,
    },
    /// Change one field of a task.
    Modify {
        /// The task.
        task_id: String,
        /// The change.
        #[serde(flatten)]
        change: Change,
    },
    /// Remove a task.
    Remove {
        /// The task.
        task_id: String,
    },
}

/// A field change of `modify`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "field", content = "new_value", rename_all = "snake_case")]
pub enum Change {
    /// New description.
    Description(String),
    /// New value statement.
    Value(String),
    /// New acceptance criteria.
    Acceptance(String),
    /// New dependency list.
    Dependencies(Vec<String>),
    /// Descope (`"descoped"`) or reopen (`"pending"`).
    Status(TaskStatus),
}

/// Word-set Jaccard similarity, lower-cased (the seed's `_text_similarity`).
pub fn similarity(a: &str, b: &str) -> f64 {
    let words =
        |s: &str| -> BTreeSet<String> { s.split_whitespace().map(|w| w.to_lowercase()).collect() };
    let (a, b) = (words(a), words(b));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

/// Whether making `task` depend on `dep` closes a cycle.
fn creates_cycle(state: &SprintState, task: &str, dep: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![dep.to_string()];
    while let Some(cur) = stack.pop() {
        if cur == task {
            return true;
        }
        if !seen.insert(cur.clone()) {
            continue;
        }
        if let Some(t) = state.task(&cur) {
            stack.extend(t.dependencies.iter().cloned());
        }
    }
    false
}

fn ids(state: &SprintState) -> String {
    let mut all: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
    all.sort();
    all.truncate(20);
    all.join(", ")
}

/// Checks a call against the state; `Err` is the message for the model (without the
/// `VALIDATION_ERROR:` prefix, which [`apply`] adds).
pub fn validate(
    call: &ManageTask,
    source: TaskSource,
    state: &SprintState,
    limits: &Limits,
) -> Result<(), String> {
    match call {
        ManageTask::Add {
            task_id,
            description,
            value,
            acceptance,
            dependencies,
            ..
        } => {
            if task_id.trim().is_empty() {
                return Err("task_id is empty; give the task a short unique id".into());
            }
            if state.task(task_id).is_some() {
                return Err(format!(
                    "task {task_id} already exists; use action \"modify\" to change it"
                ));
            }
            let missing: Vec<&str> = [
                ("description", description),
                ("value", value),
                ("acceptance", acceptance),
            ]
            .into_iter()
            .filter(|(_, v)| v.trim().is_empty())
            .map(|(k, _)| k)
            .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "task {task_id} is missing required fields: {}. Every task needs description, value and acceptance criteria.",
                    missing.join(", ")
                ));
            }
            for existing in state.tasks.iter().filter(|t| t.is_open()) {
                let sim = similarity(description, &existing.description);
                if sim >= DUPLICATE_SIMILARITY {
                    return Err(format!(
                        "task {task_id} appears to duplicate open task {} (similarity {:.0}%): '{}'. Modify the existing task instead, or say how this one differs.",
                        existing.id,
                        sim * 100.0,
                        existing.description.chars().take(80).collect::<String>()
                    ));
                }
            }
            if source.is_mid_loop() {
                let open = state.open_mid_loop_tasks() as u32;
                if open >= limits.max_mid_loop_tasks {
                    return Err(format!(
                        "the mid-loop task ceiling ({}) is reached: {open} tasks created during the loop are still open. Finish or descope some, or let a course correction restructure the plan.",
                        limits.max_mid_loop_tasks
                    ));
                }
            }
            for dep in dependencies {
                if state.task(dep).is_none() {
                    return Err(format!(
                        "task {task_id} depends on '{dep}', which does not exist. Existing task ids: {}",
                        ids(state)
                    ));
                }
            }
            Ok(())
        }
        ManageTask::Modify { task_id, change } => {
            if state.task(task_id).is_none() {
                return Err(format!(
                    "task {task_id} does not exist, so it cannot be modified. Existing task ids: {}",
                    ids(state)
                ));
            }
            match change {
                Change::Dependencies(deps) => {
                    for dep in deps {
                        if state.task(dep).is_none() {
                            return Err(format!("dependency '{dep}' does not exist"));
                        }
                        if creates_cycle(state, task_id, dep) {
                            return Err(format!(
                                "making {task_id} depend on {dep} creates a circular dependency; restructure the dependency graph"
                            ));
                        }
                    }
                    Ok(())
                }
                Change::Status(TaskStatus::Descoped | TaskStatus::Pending) => Ok(()),
                Change::Status(other) => Err(format!(
                    "status can be set to \"descoped\" or \"pending\" only, not {other:?}; completion is reported with report_task_complete"
                )),
                Change::Description(t) | Change::Value(t) | Change::Acceptance(t)
                    if t.trim().is_empty() =>
                {
                    Err("new_value is empty; a task's description, value and acceptance are required".into())
                }
                _ => Ok(()),
            }
        }
        ManageTask::Remove { task_id } => {
            if state.task(task_id).is_none() {
                return Err(format!(
                    "task {task_id} does not exist, so it cannot be removed"
                ));
            }
            let dependents: Vec<&str> = state
                .tasks
                .iter()
                .filter(|t| t.dependencies.iter().any(|d| d == task_id))
                .map(|t| t.id.as_str())
                .collect();
            if !dependents.is_empty() {
                return Err(format!(
                    "cannot remove {task_id}: tasks {} depend on it. Update their dependencies first.",
                    dependents.join(", ")
                ));
            }
            Ok(())
        }
    }
}

/// Validates and applies a call. The answer for the model: what changed, or
/// `VALIDATION_ERROR: <why and what to do>` with the state untouched.
pub fn apply(
    call: ManageTask,
    source: TaskSource,
    state: &mut SprintState,
    limits: &Limits,
) -> Result<String, String> {
    validate(&call, source, state, limits).map_err(|e| format!("VALIDATION_ERROR: {e}"))?;
    Ok(match call {
        ManageTask::Add {
            task_id,
            description,
            value,
            acceptance,
            dependencies,
            phase,
            files_expected,
            prd_section,
        } => {
            let mut t = SprintTask::new(&task_id, source, description, value, acceptance);
            t.dependencies = dependencies;
            t.phase = phase;
            t.files_expected = files_expected;
            t.prd_section = prd_section;
            state.tasks.push(t);
            format!("task {task_id} added")
        }
        ManageTask::Modify { task_id, change } => {
            let t = state.task_mut(&task_id).expect("validated");
            let field = match change {
                Change::Description(v) => {
                    t.description = v;
                    "description"
                }
                Change::Value(v) => {
                    t.value = v;
                    "value"
                }
                Change::Acceptance(v) => {
                    t.acceptance = v;
                    "acceptance"
                }
                Change::Dependencies(v) => {
                    t.dependencies = v;
                    "dependencies"
                }
                Change::Status(v) => {
                    t.status = v;
                    t.block = None;
                    "status"
                }
            };
            format!("task {task_id}: {field} updated")
        }
        ManageTask::Remove { task_id } => {
            state.tasks.retain(|t| t.id != task_id);
            format!("task {task_id} removed")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(v: serde_json::Value) -> ManageTask {
        serde_json::from_value(v).unwrap()
    }

    fn add(id: &str, desc: &str) -> ManageTask {
        call(
            json!({"action": "add", "task_id": id, "description": desc, "value": "users can X", "acceptance": "pytest -k x passes"}),
        )
    }

    fn run(state: &mut SprintState, c: ManageTask, source: TaskSource) -> Result<String, String> {
        apply(c, source, state, &Limits::default())
    }

    #[test]
    fn required_fields_are_named() {
        let mut s = SprintState::new("s");
        let err = run(
            &mut s,
            call(json!({"action": "add", "task_id": "T1", "description": "parse dates"})),
            TaskSource::Plan,
        )
        .unwrap_err();
        assert!(err.starts_with("VALIDATION_ERROR: "), "{err}");
        assert!(err.contains("value, acceptance"), "{err}");
        assert!(s.tasks.is_empty());
    }

    #[test]
    fn near_duplicates_are_refused_and_distinct_tasks_pass() {
        let mut s = SprintState::new("s");
        run(
            &mut s,
            add("T1", "Add a CSV export button to the report page"),
            TaskSource::Plan,
        )
        .unwrap();
        let err = run(
            &mut s,
            add("T2", "add a csv export button to the report page now"),
            TaskSource::Vrc,
        )
        .unwrap_err();
        assert!(err.contains("duplicate open task T1"), "{err}");
        run(
            &mut s,
            add("T3", "Write the user guide for importing data"),
            TaskSource::Vrc,
        )
        .unwrap();
        // A done task is no longer a duplicate target.
        s.task_mut("T1").unwrap().status = TaskStatus::Done;
        run(
            &mut s,
            add("T4", "add a csv export button to the report page now"),
            TaskSource::Vrc,
        )
        .unwrap();
    }

    #[test]
    fn similarity_is_jaccard_on_words() {
        assert_eq!(similarity("a b c d", "a b c d"), 1.0);
        assert_eq!(similarity("a b c", "a b d"), 0.5);
        assert_eq!(similarity("", "a"), 0.0);
    }

    #[test]
    fn dependencies_must_exist_and_not_cycle() {
        let mut s = SprintState::new("s");
        run(&mut s, add("T1", "one thing"), TaskSource::Plan).unwrap();
        let mut t2 = add("T2", "another thing entirely");
        if let ManageTask::Add { dependencies, .. } = &mut t2 {
            *dependencies = vec!["T9".into()];
        }
        let err = run(&mut s, t2, TaskSource::Plan).unwrap_err();
        assert!(err.contains("'T9', which does not exist"), "{err}");
        assert!(err.contains("T1"), "lists the existing ids: {err}");
        let mut t2 = add("T2", "another thing entirely");
        if let ManageTask::Add { dependencies, .. } = &mut t2 {
            *dependencies = vec!["T1".into()];
        }
        run(&mut s, t2, TaskSource::Plan).unwrap();
        let err = run(
            &mut s,
            call(json!({"action": "modify", "task_id": "T1", "field": "dependencies", "new_value": ["T2"]})),
            TaskSource::Plan,
        )
        .unwrap_err();
        assert!(err.contains("circular"), "{err}");
        let err = run(
            &mut s,
            call(json!({"action": "remove", "task_id": "T1"})),
            TaskSource::Plan,
        )
        .unwrap_err();
        assert!(err.contains("T2 depend on it"), "{err}");
        run(
            &mut s,
            call(json!({"action": "remove", "task_id": "T2"})),
            TaskSource::Plan,
        )
        .unwrap();
        run(
            &mut s,
            call(json!({"action": "remove", "task_id": "T1"})),
            TaskSource::Plan,
        )
        .unwrap();
        assert!(s.tasks.is_empty());
    }

    #[test]
    fn the_mid_loop_ceiling_holds_for_loop_tasks_only() {
        let mut s = SprintState::new("s");
        let words = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
            "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
        ];
        for (i, w) in words.iter().take(15).enumerate() {
            run(
                &mut s,
                add(&format!("V{i}"), &format!("{w} work item")),
                TaskSource::Vrc,
            )
            .unwrap();
        }
        let err = run(&mut s, add("V15", "papa work item"), TaskSource::Vrc).unwrap_err();
        assert!(err.contains("ceiling (15)"), "{err}");
        run(&mut s, add("P1", "papa work item"), TaskSource::Plan).unwrap();
        // Descoping one frees a place.
        run(
            &mut s,
            call(json!({"action": "modify", "task_id": "V0", "field": "status", "new_value": "descoped"})),
            TaskSource::CourseCorrection,
        )
        .unwrap();
        run(&mut s, add("V15", "quebec work item"), TaskSource::Vrc).unwrap();
    }

    #[test]
    fn a_model_cannot_mark_a_task_done_or_send_unknown_fields() {
        let mut s = SprintState::new("s");
        run(&mut s, add("T1", "one thing"), TaskSource::Plan).unwrap();
        let err = run(
            &mut s,
            call(json!({"action": "modify", "task_id": "T1", "field": "status", "new_value": "done"})),
            TaskSource::Plan,
        )
        .unwrap_err();
        assert!(err.contains("report_task_complete"), "{err}");
        let bad: Result<ManageTask, _> =
            serde_json::from_value(json!({"action": "add", "task_id": "T2", "source": "plan"}));
        assert!(bad.is_err(), "the source is the host's to set");
    }
}
