//! The value loop's roles (seed 002 section 3): each is an AgentForge task type (a
//! context-schema plugin named after the role) run by the stateless step executor. A
//! [`RoleJob`] is one such task: the role, the report tools it is offered this time, what
//! it is told to do, and the brief (the slices of sprint state it needs, shown by its
//! schema plugin).

use std::collections::BTreeMap;
use std::fmt;

use agentforge_core::task::{CheckKind, CheckSpec, TaskSpec};
use agentforge_value_loop::reports::Caller;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use agentforge_value_loop::state::{SprintState, SprintTask, Verification};

/// A role of the value loop; its task type has the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Writes the plan (`manage_task`) and course corrections.
    Planner,
    /// Judges the vision, the PRD and the plan (read-only).
    Critic,
    /// Discovers the project's context and triages failures (read-only).
    Classifier,
    /// Builds one task.
    Builder,
    /// Writes the verifications.
    QcAuthor,
    /// Fixes failing verifications and services.
    Fixer,
    /// Uses the deliverable as its user would and scores the value (read-only).
    Evaluator,
    /// Researches a failure the fixes could not solve (read-only).
    Researcher,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 8] = [
        Role::Planner,
        Role::Critic,
        Role::Classifier,
        Role::Builder,
        Role::QcAuthor,
        Role::Fixer,
        Role::Evaluator,
        Role::Researcher,
    ];

    /// The role's name: its task type and its `[value_loop.roles.<name>]` table.
    pub fn name(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Critic => "critic",
            Role::Classifier => "classifier",
            Role::Builder => "builder",
            Role::QcAuthor => "qc_author",
            Role::Fixer => "fixer",
            Role::Evaluator => "evaluator",
            Role::Researcher => "researcher",
        }
    }

    /// Step budget of one of its tasks when the configuration names none.
    pub fn default_max_steps(self) -> u64 {
        match self {
            Role::Builder | Role::Fixer | Role::QcAuthor => 30,
            Role::Planner => 20,
            Role::Evaluator => 15,
            Role::Critic | Role::Classifier | Role::Researcher => 10,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One role task to run: what the runner hands to the executor.
#[derive(Debug, Clone)]
pub struct RoleJob {
    /// The role (and task type, unless [`RoleJob::task_type`] names another).
    pub role: Role,
    /// A task type other than the role's (a project's own plan-gate plugin).
    pub task_type: Option<String>,
    /// Its name inside the sprint, `<seq>-<role>` (the task id is `<sprint>-<name>`, a
    /// recorded session for it is `<name>.jsonl`).
    pub name: String,
    /// What done looks like, in one sentence.
    pub goal: String,
    /// The report tools it is offered (besides the built-in actions of its phases).
    pub tools: Vec<&'static str>,
    /// The report whose acceptance ends the task (a role whose one job is that report
    /// spends no model call on `complete`).
    pub finish_with: Option<&'static str>,
    /// The brief: `instructions` first, then the state slices it needs.
    pub brief: BTreeMap<String, Value>,
    /// Checks the executor runs (the sprint's verifications, for roles that change code).
    pub checks: Vec<CheckSpec>,
    /// Who reports (provenance set by the host).
    pub caller: Caller,
}

impl RoleJob {
    /// A job with its instructions; add state with [`RoleJob::with`].
    pub fn new(
        role: Role,
        seq: u64,
        goal: impl Into<String>,
        tools: &[&'static str],
        instructions: impl Into<String>,
        caller: Caller,
    ) -> RoleJob {
        let mut brief = BTreeMap::new();
        brief.insert(
            "instructions".to_string(),
            Value::String(instructions.into()),
        );
        RoleJob {
            role,
            task_type: None,
            name: format!("{seq:03}-{}", role.name()),
            goal: goal.into(),
            tools: tools.to_vec(),
            finish_with: None,
            brief,
            checks: Vec::new(),
            caller,
        }
    }

    /// Names it `<seq>-<part>-<role>` (a second task of the same role in one iteration).
    pub fn named(mut self, part: &str) -> RoleJob {
        let seq = self.name.split('-').next().unwrap_or_default().to_string();
        self.name = format!("{seq}-{part}-{}", self.role.name());
        self
    }

    /// Ends the task when `tool`'s call is accepted.
    pub fn finishing_with(mut self, tool: &'static str) -> RoleJob {
        self.finish_with = Some(tool);
        self
    }

    /// Adds a brief field.
    pub fn with(mut self, key: &str, value: Value) -> RoleJob {
        if !value.is_null() {
            self.brief.insert(key.to_string(), value);
        }
        self
    }

    /// The sprint's verifications as the task's checks (so the executor's auto-revert
    /// undoes an edit that breaks one that passed).
    pub fn with_checks(mut self, verifications: &[Verification]) -> RoleJob {
        self.checks = verifications.iter().map(check_of).collect();
        self
    }

    /// The task spec the executor runs.
    pub fn spec(&self, sprint: &str, max_steps: u64) -> TaskSpec {
        let mut inputs = BTreeMap::new();
        let brief: serde_json::Map<String, Value> = self
            .brief
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        inputs.insert("brief".to_string(), Value::Object(brief));
        TaskSpec {
            id: format!("{sprint}-{}", self.name),
            task_type: self
                .task_type
                .clone()
                .unwrap_or_else(|| self.role.name().to_string()),
            goal: self.goal.clone(),
            success_criteria: if self.tools.is_empty() {
                vec!["the work is done and checked".into()]
            } else {
                vec![format!(
                    "reported through {} before `complete`",
                    self.tools.join(" / ")
                )]
            },
            constraints: vec![
                "Act only through tool calls; the host records every report".into(),
                "Do not edit anything under .agentforge/".into(),
            ],
            inputs,
            checks: self.checks.clone(),
            max_steps: Some(max_steps),
            role: Some(self.role.name().to_string()),
        }
    }
}

/// A verification as an executor check (named by its id).
pub fn check_of(v: &Verification) -> CheckSpec {
    CheckSpec {
        name: v.id.clone(),
        command: v.command.clone(),
        kind: CheckKind::Test,
        timeout_secs: Some(crate::probes::VERIFICATION_TIMEOUT_SECS),
    }
}

/// The plan as a brief shows it.
pub fn plan_brief(s: &SprintState) -> Value {
    Value::Array(s.tasks.iter().map(task_brief).collect())
}

/// The plan in one line per task (`T3 [pending] <description> (after T1, T2)`): what a
/// planner adding tasks needs to avoid duplicates and name dependencies, at a fraction
/// of the whole plan's size (it grows with every task the planner adds).
pub fn plan_outline(s: &SprintState) -> Value {
    Value::Array(
        s.tasks
            .iter()
            .map(|t| {
                let status = serde_json::to_value(t.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let after = if t.dependencies.is_empty() {
                    String::new()
                } else {
                    format!(" (after {})", t.dependencies.join(", "))
                };
                Value::String(format!("{} [{status}] {}{after}", t.id, t.description))
            })
            .collect(),
    )
}

/// The plan as a builder needs it: the tasks its task depends on and those that
/// depend on it, and a count of the rest (the whole plan would grow every builder's
/// context with the plan's size).
pub fn plan_around(s: &SprintState, task: &SprintTask) -> Value {
    /// Dependents shown (a task many others build on would otherwise bring the plan).
    const MAX_DEPENDENTS: usize = 8;
    let mut near: Vec<Value> = s
        .tasks
        .iter()
        .filter(|t| task.dependencies.contains(&t.id))
        .map(task_brief)
        .collect();
    let dependents: Vec<&SprintTask> = s
        .tasks
        .iter()
        .filter(|t| t.id != task.id && t.dependencies.contains(&task.id))
        .collect();
    near.extend(
        dependents
            .iter()
            .take(MAX_DEPENDENTS)
            .map(|t| task_brief(t)),
    );
    let more = dependents.len().saturating_sub(MAX_DEPENDENTS);
    let count = |st| s.tasks.iter().filter(|t| t.status == st).count();
    use agentforge_value_loop::state::TaskStatus as T;
    json!({
        "related_tasks": near,
        "whole_plan": format!(
            "{} tasks: {} done, {} pending or in progress, {} blocked, {} descoped{}",
            s.tasks.len(),
            count(T::Done),
            count(T::Pending) + count(T::InProgress),
            count(T::Blocked),
            count(T::Descoped),
            if more > 0 {
                format!("; {more} more tasks depend on this one")
            } else {
                String::new()
            }
        ),
    })
}

/// One task as a brief shows it.
pub fn task_brief(t: &SprintTask) -> Value {
    json!({
        "id": t.id,
        "status": t.status,
        "source": t.source.name(),
        "description": t.description,
        "value": t.value,
        "acceptance": t.acceptance,
        "dependencies": t.dependencies,
        "files_expected": t.files_expected,
    })
}

/// The verifications as a brief shows them (no failure history: see `failing`).
pub fn verifications_brief(s: &SprintState) -> Value {
    Value::Array(
        s.verifications
            .iter()
            .map(|v| {
                json!({
                    "id": v.id,
                    "category": v.category,
                    "command": v.command,
                    "status": v.status,
                    "proves": v.proves,
                })
            })
            .collect(),
    )
}

/// The verifications a builder of `task` answers for: those proving it and those that
/// passed before (it must not break them), without the lists of every task they prove.
pub fn verifications_for(s: &SprintState, task: &SprintTask) -> Value {
    Value::Array(
        s.verifications
            .iter()
            .filter(|v| v.proves.contains(&task.id) || s.regression_baseline.contains(&v.id))
            .map(|v| {
                json!({
                    "id": v.id,
                    "command": v.command,
                    "status": v.status,
                    "proves_this_task": v.proves.contains(&task.id),
                })
            })
            .collect(),
    )
}

/// Failing verifications with their last output (its tail: the verdict is at the end).
pub fn failing_brief(s: &SprintState, ids: &[String]) -> Value {
    Value::Array(
        ids.iter()
            .filter_map(|id| s.verification(id))
            .map(|v| {
                let last = v.failures.last();
                json!({
                    "id": v.id,
                    "command": v.command,
                    "attempts": v.attempts,
                    "exit_code": last.and_then(|f| f.exit_code),
                    "output": last.map(|f| tail(&f.output, 3000)).unwrap_or_default(),
                })
            })
            .collect(),
    )
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}
