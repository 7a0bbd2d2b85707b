//! Context schemas: one per task type (seed 001, "Context Schemas by Task Type").
//!
//! A schema supplies its phase graph (phases, the actions offered in each, the automatic
//! transitions: see [`crate::phases`]) and builds the task-specific `current_state`
//! section from the spec and the files on disk. The native schemas here sit behind
//! [`ContextSchema`] so the plugin system can add task types as WASM components; the
//! [`SchemaRegistry`] validates every graph it is given.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::phases::{
    ActionDef, Condition, PhaseGraph, PhaseGraphError, PhaseSpec, Recommendation, Requirement,
    Transition, COMPLETE, ESCALATED, FAILED,
};
use crate::state_store::TaskState;
use crate::task::TaskSpec;
use crate::tools::Workspace;

/// The actions the host can run (the built-in tools): the names phase graphs may use.
pub const BUILTIN_ACTIONS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "replace_lines",
    "search",
    "run_check",
    "run_tests",
    "load_context",
    "complete",
    "escalate",
    "cannot_fix",
];

/// The `'static` name of the built-in action `name`.
pub fn builtin_action(name: &str) -> Option<&'static str> {
    BUILTIN_ACTIONS.iter().copied().find(|a| *a == name)
}

/// A task type.
pub trait ContextSchema: Send + Sync {
    /// Task type name, as in `task.yaml` `task_type`.
    fn name(&self) -> &str;
    /// The phases, their actions and transitions.
    fn phase_graph(&self) -> &PhaseGraph;
    /// Success criteria used when the task lists none.
    fn default_success_criteria(&self) -> Vec<String>;
    /// The task-type specific `current_state` section.
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value;

    /// The phase a new task starts in.
    fn initial_phase(&self) -> &str {
        &self.phase_graph().initial
    }
}

/// An action of the built-in graphs, with its pre/postconditions. The first
/// precondition is the `when:` hint the context shows.
fn action(name: &str, priority: i32) -> ActionDef {
    const EDITED: &[&str] = &[
        "the file is changed and all checks run",
        "a change that breaks a passing check is reverted",
    ];
    let (pre, post): (&str, &[&str]) = match name {
        "read_file" => (
            "need to see code (optionally a line range)",
            &["the numbered lines are in working memory for 3 steps"],
        ),
        "search" => (
            "need to find where something is",
            &["up to 50 matching lines are in working memory"],
        ),
        "load_context" => (
            "need more than the context shows",
            &["the item is in working memory for 5 steps"],
        ),
        "edit_file" => ("know the exact text to change", EDITED),
        "replace_lines" => ("know the line numbers to replace", EDITED),
        "write_file" => ("creating a new file", EDITED),
        "run_check" => (
            "after changes, to see the checks",
            &["verification status updated"],
        ),
        "run_tests" => (
            "after changes, to see the tests",
            &["verification status updated"],
        ),
        "complete" => (
            "all checks pass and criteria are met",
            &["the task is complete"],
        ),
        "escalate" => (
            "stuck after 3 different approaches",
            &["the task is handed to a human"],
        ),
        "cannot_fix" => (
            "the task is impossible as specified",
            &["the task is failed"],
        ),
        _ => ("", &[]),
    };
    ActionDef {
        name: name.to_string(),
        preconditions: vec![pre.to_string()],
        postconditions: post.iter().map(|p| p.to_string()).collect(),
        priority,
        requires: (name == "complete").then(|| Requirement {
            condition: Condition::Ready,
            reason: "verification not yet passing".into(),
        }),
    }
}

/// `names` as actions, in that order of priority.
fn actions(names: &[&str]) -> Vec<ActionDef> {
    let n = names.len() as i32;
    names
        .iter()
        .enumerate()
        .map(|(i, a)| action(a, n - i as i32))
        .collect()
}

fn phase(name: &str, description: &str, names: &[&str]) -> PhaseSpec {
    PhaseSpec {
        name: name.into(),
        description: description.into(),
        actions: actions(names),
        max_steps: None,
        recommended: None,
        recommend: Vec::new(),
        terminal: false,
    }
}

fn terminal(name: &str, description: &str) -> PhaseSpec {
    PhaseSpec {
        terminal: true,
        ..phase(name, description, &[])
    }
}

fn transition(from: &str, to: &str, when: Condition, reason: &str) -> Transition {
    Transition {
        from: from.into(),
        to: to.into(),
        when,
        reason: reason.into(),
    }
}

/// Actions offered while analyzing: reading and running checks, no edits.
pub const ANALYZE_ACTIONS: &[&str] = &[
    "read_file",
    "search",
    "load_context",
    "run_check",
    "run_tests",
    "escalate",
    "cannot_fix",
];
/// Actions offered while planning: reading and loading context.
pub const PLAN_ACTIONS: &[&str] = &[
    "load_context",
    "read_file",
    "search",
    "escalate",
    "cannot_fix",
];
/// Actions offered while implementing.
pub const IMPLEMENT_ACTIONS: &[&str] = &[
    "edit_file",
    "replace_lines",
    "write_file",
    "read_file",
    "search",
    "load_context",
    "run_check",
    "run_tests",
    "complete",
    "escalate",
    "cannot_fix",
];
/// Actions offered while verifying.
pub const VERIFY_ACTIONS: &[&str] = &[
    "complete",
    "run_check",
    "run_tests",
    "read_file",
    "escalate",
];

/// The built-in graph: `analyze -> [plan ->] implement <-> verify`, plus the terminal
/// phases entered through `complete`, `cannot_fix` and `escalate`.
///
/// - analyze (at most 3 steps) moves on after a step that gathered context; straight to
///   verify if verification already passes;
/// - plan (at most 2 steps, `with_plan` only) moves on after a step that read or loaded
///   context;
/// - implement moves to verify once verification is ready; verify goes back to
///   implement when a check fails or verification is no longer ready.
pub fn standard_graph(with_plan: bool) -> PhaseGraph {
    let after_analyze = if with_plan { "plan" } else { "implement" };
    let mut analyze = phase(
        "analyze",
        "understand the problem: read the code, run the checks",
        ANALYZE_ACTIONS,
    );
    analyze.max_steps = Some(3);
    analyze.recommended = Some("read_file".into());
    let mut plan = phase(
        "plan",
        "decide the change: load the spec sections and files it needs",
        PLAN_ACTIONS,
    );
    plan.max_steps = Some(2);
    plan.recommended = Some("load_context".into());
    let mut implement = phase(
        "implement",
        "make the change until verification passes",
        IMPLEMENT_ACTIONS,
    );
    implement.recommended = Some("edit_file".into());
    implement.recommend = vec![Recommendation {
        when: Condition::Ready,
        action: "complete".into(),
    }];
    let mut verify = phase(
        "verify",
        "verification passes: confirm and complete",
        VERIFY_ACTIONS,
    );
    verify.recommended = Some("complete".into());
    verify.recommend = vec![Recommendation {
        when: Condition::Not(Box::new(Condition::Ready)),
        action: "run_tests".into(),
    }];

    let mut phases = vec![analyze];
    let mut transitions = vec![
        transition(
            "analyze",
            "verify",
            Condition::Ready,
            "verification already passing",
        ),
        transition(
            "analyze",
            after_analyze,
            Condition::Any(vec![Condition::ContextGathered, Condition::FilesChanged]),
            "context gathered",
        ),
        transition(
            "analyze",
            after_analyze,
            Condition::MaxStepsReached,
            "analysis step limit reached",
        ),
    ];
    if with_plan {
        phases.push(plan);
        transitions.push(transition(
            "plan",
            "implement",
            Condition::ContextGathered,
            "context for the plan loaded",
        ));
        transitions.push(transition(
            "plan",
            "implement",
            Condition::MaxStepsReached,
            "planning step limit reached",
        ));
    }
    phases.extend([
        implement,
        verify,
        terminal(COMPLETE, "the task is done"),
        terminal(FAILED, "the task cannot be done"),
        terminal(ESCALATED, "a human must decide"),
    ]);
    transitions.extend([
        transition(
            "implement",
            "verify",
            Condition::Ready,
            "verification passing",
        ),
        transition(
            "verify",
            "implement",
            Condition::ChecksFailing,
            "a check failed",
        ),
        transition(
            "verify",
            "implement",
            Condition::Not(Box::new(Condition::Ready)),
            "verification no longer passing",
        ),
    ]);
    PhaseGraph {
        initial: "analyze".into(),
        phases,
        transitions,
    }
}

/// The graph without a plan phase, built once.
fn graph_without_plan() -> &'static PhaseGraph {
    static GRAPH: OnceLock<PhaseGraph> = OnceLock::new();
    GRAPH.get_or_init(|| standard_graph(false))
}

/// The graph with a plan phase, built once.
fn graph_with_plan() -> &'static PhaseGraph {
    static GRAPH: OnceLock<PhaseGraph> = OnceLock::new();
    GRAPH.get_or_init(|| standard_graph(true))
}

/// Lines of a file shown with numbers, as `  12| code`; `None` if unreadable.
pub fn numbered_file(ws: &Workspace, rel: &str) -> Option<String> {
    let path = ws.resolve(rel).ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    let width = text.lines().count().max(1).to_string().len();
    Some(
        text.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>width$}| {l}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

fn input<'a>(spec: &'a TaskSpec, key: &str) -> Option<&'a Value> {
    spec.inputs.get(key)
}

fn remaining_issues(state: &TaskState) -> Vec<String> {
    let mut issues: Vec<String> = state
        .verification
        .checks
        .iter()
        .filter(|(_, c)| !c.passing)
        .map(|(n, c)| format!("{n}: {}", c.summary))
        .collect();
    issues.extend(
        state
            .facts
            .iter()
            .filter(|f| f.category == crate::state_store::FactCategory::Error)
            .map(|f| f.statement.clone()),
    );
    issues
}

/// `fix_violation`: make a failing check or test pass with a minimal change.
pub struct FixViolation;

impl ContextSchema for FixViolation {
    fn name(&self) -> &str {
        "fix_violation"
    }
    fn phase_graph(&self) -> &PhaseGraph {
        graph_without_plan()
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "The violated check passes".into(),
            "All other checks and tests still pass".into(),
            "Minimal changes, only to code related to the violation".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value {
        let violation = input(spec, "violation").cloned().unwrap_or(Value::Null);
        let file = violation
            .get("file_path")
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut out = serde_json::Map::new();
        out.insert("violation".into(), violation);
        if let Some(def) = input(spec, "check_definition") {
            out.insert("check_definition".into(), def.clone());
        }
        if let Some(path) = file {
            let content = numbered_file(ws, &path).unwrap_or_else(|| "(file not found)".into());
            out.insert(
                "file_content".into(),
                json!({ "path": path, "content": content }),
            );
        }
        let issues = remaining_issues(state);
        if !issues.is_empty() {
            out.insert("remaining_issues".into(), json!(issues));
        }
        Value::Object(out)
    }
}

/// `implement_feature`: implement a verified spec in target files until tests pass.
pub struct ImplementFeature;

impl ContextSchema for ImplementFeature {
    fn name(&self) -> &str {
        "implement_feature"
    }
    fn phase_graph(&self) -> &PhaseGraph {
        graph_with_plan()
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "Every requirement's acceptance criteria are met".into(),
            "All tests pass".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value {
        let mut out = serde_json::Map::new();
        out.insert(
            "spec".into(),
            input(spec, "spec").cloned().unwrap_or(Value::Null),
        );
        let targets: Vec<Value> = input(spec, "target_files")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|p| match numbered_file(ws, p) {
                        Some(c) => json!({"path": p, "status": "to_modify", "content": c}),
                        None => json!({"path": p, "status": "to_create"}),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.insert("target_files".into(), Value::Array(targets));
        if let Some(t) = input(spec, "test_requirements") {
            out.insert("test_requirements".into(), t.clone());
        }
        let issues = remaining_issues(state);
        if !issues.is_empty() {
            out.insert("remaining_issues".into(), json!(issues));
        }
        Value::Object(out)
    }
}

/// `write_tests`: the RED phase, tests that define the behaviour and currently fail.
pub struct WriteTests;

impl ContextSchema for WriteTests {
    fn name(&self) -> &str {
        "write_tests"
    }
    fn phase_graph(&self) -> &PhaseGraph {
        graph_without_plan()
    }
    fn default_success_criteria(&self) -> Vec<String> {
        vec![
            "One test per acceptance criterion".into(),
            "Tests run and currently fail for the missing behaviour".into(),
        ]
    }
    fn build_current_state(&self, spec: &TaskSpec, _state: &TaskState, ws: &Workspace) -> Value {
        let mut out = serde_json::Map::new();
        out.insert(
            "spec".into(),
            input(spec, "spec").cloned().unwrap_or(Value::Null),
        );
        if let Some(p) = input(spec, "example_test_file").and_then(Value::as_str) {
            if let Some(c) = numbered_file(ws, p) {
                out.insert(
                    "test_patterns".into(),
                    json!({"path": p, "example_test": c}),
                );
            }
        }
        if let Some(p) = input(spec, "target_test_file").and_then(Value::as_str) {
            out.insert(
                "target_test_file".into(),
                json!({"path": p, "existing_content": numbered_file(ws, p)}),
            );
        }
        Value::Object(out)
    }
}

/// A task type refused by [`SchemaRegistry::register`]: its phase graph is invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("task type `{task_type}` has an invalid phase graph: {}", list(.errors))]
pub struct InvalidSchema {
    /// The refused task type.
    pub task_type: String,
    /// Every problem found in its graph.
    pub errors: Vec<PhaseGraphError>,
}

fn list(errors: &[PhaseGraphError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The task types known to a run.
pub struct SchemaRegistry {
    schemas: BTreeMap<String, Box<dyn ContextSchema>>,
}

impl Default for SchemaRegistry {
    fn default() -> Self {
        let mut r = SchemaRegistry {
            schemas: BTreeMap::new(),
        };
        for s in [
            Box::new(FixViolation) as Box<dyn ContextSchema>,
            Box::new(ImplementFeature),
            Box::new(WriteTests),
        ] {
            r.register(s).expect("built-in phase graphs are valid");
        }
        r
    }
}

impl SchemaRegistry {
    /// Adds or replaces a task type after validating its phase graph against the
    /// built-in actions; an invalid graph is refused with all its problems.
    pub fn register(&mut self, s: Box<dyn ContextSchema>) -> Result<(), InvalidSchema> {
        s.phase_graph()
            .validate(BUILTIN_ACTIONS)
            .map_err(|errors| InvalidSchema {
                task_type: s.name().to_string(),
                errors,
            })?;
        self.schemas.insert(s.name().to_string(), s);
        Ok(())
    }

    /// The schema of `task_type`, or an error listing the known ones.
    pub fn get(&self, task_type: &str) -> Result<&dyn ContextSchema, String> {
        self.schemas
            .get(task_type)
            .map(|b| b.as_ref())
            .ok_or_else(|| {
                format!(
                    "unknown task type `{task_type}`; known task types: {}",
                    self.schemas.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })
    }

    /// Names of all task types.
    pub fn names(&self) -> Vec<String> {
        self.schemas.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::{PhaseMachineState, Signals};

    /// Signals of a step: context gathered, files changed, ready, checks failing.
    fn sig(gathered: bool, changed: bool, ready: bool, failing: bool) -> Signals {
        Signals {
            context_gathered: gathered,
            files_changed: changed,
            ready,
            checks_failing: failing,
            has_modifications: changed,
        }
    }

    const NOTHING: (bool, bool, bool, bool) = (false, false, false, false);

    /// The phase after one more step in `phase` (after `done` steps there already),
    /// with the recorded reason if it moved.
    fn after(
        g: &PhaseGraph,
        phase: &str,
        done: u64,
        (a, b, c, d): (bool, bool, bool, bool),
    ) -> (String, Option<String>) {
        let mut st = PhaseMachineState::at(phase, done);
        let change = g.advance(&mut st, 10, &sig(a, b, c, d));
        if let Some(c) = &change {
            assert_eq!(st.history, vec![c.clone()]);
            assert_eq!((c.from.as_str(), c.step), (phase, 10));
        }
        (st.current, change.map(|c| c.reason))
    }

    fn to(g: &PhaseGraph, phase: &str, done: u64, s: (bool, bool, bool, bool)) -> String {
        after(g, phase, done, s).0
    }

    fn schemas() -> Vec<Box<dyn ContextSchema>> {
        vec![
            Box::new(FixViolation),
            Box::new(ImplementFeature),
            Box::new(WriteTests),
        ]
    }

    #[test]
    fn built_in_graphs_are_valid_and_start_in_analyze() {
        for s in schemas() {
            let g = s.phase_graph();
            let yaml = serde_yaml_ng::to_string(g).unwrap();
            assert_eq!(&serde_yaml_ng::from_str::<PhaseGraph>(&yaml).unwrap(), g);
            let json = serde_json::to_string(g).unwrap();
            assert_eq!(&serde_json::from_str::<PhaseGraph>(&json).unwrap(), g);
            assert_eq!(
                s.phase_graph().validate(BUILTIN_ACTIONS),
                Ok(()),
                "{}",
                s.name()
            );
            assert_eq!(s.initial_phase(), "analyze");
        }
    }

    /// fix_violation and write_tests: analyze -> implement <-> verify.
    #[test]
    fn transitions_without_plan() {
        for s in [&FixViolation as &dyn ContextSchema, &WriteTests] {
            let g = s.phase_graph();
            // analyze: stays without context, moves after a read/search/check...
            assert_eq!(after(g, "analyze", 0, NOTHING), ("analyze".into(), None));
            assert_eq!(
                after(g, "analyze", 0, (true, false, false, true)),
                ("implement".into(), Some("context gathered".into()))
            );
            assert_eq!(
                to(g, "analyze", 1, (false, true, false, false)),
                "implement"
            );
            // ...or once its 3 steps are used up...
            assert_eq!(to(g, "analyze", 1, NOTHING), "analyze");
            assert_eq!(
                after(g, "analyze", 2, NOTHING),
                (
                    "implement".into(),
                    Some("analysis step limit reached".into())
                )
            );
            // ...straight to verify when verification already passes.
            assert_eq!(
                after(g, "analyze", 0, (true, false, true, false)),
                ("verify".into(), Some("verification already passing".into()))
            );
            // implement: stays until ready, however many steps.
            assert_eq!(
                to(g, "implement", 0, (true, false, false, false)),
                "implement"
            );
            assert_eq!(
                to(g, "implement", 50, (false, true, false, true)),
                "implement"
            );
            assert_eq!(
                after(g, "implement", 3, (false, true, true, false)),
                ("verify".into(), Some("verification passing".into()))
            );
            // verify: back to implement when a check fails or it is no longer ready.
            assert_eq!(to(g, "verify", 0, (true, false, true, false)), "verify");
            assert_eq!(
                after(g, "verify", 0, (true, false, false, true)),
                ("implement".into(), Some("a check failed".into()))
            );
            assert_eq!(
                after(g, "verify", 0, (false, false, false, false)),
                (
                    "implement".into(),
                    Some("verification no longer passing".into())
                )
            );
            assert!(g.phase("plan").is_none());
        }
    }

    /// implement_feature: analyze -> plan -> implement <-> verify.
    #[test]
    fn transitions_with_plan() {
        let g = ImplementFeature.phase_graph();
        assert_eq!(to(g, "analyze", 0, NOTHING), "analyze");
        assert_eq!(
            after(g, "analyze", 0, (true, false, false, false)),
            ("plan".into(), Some("context gathered".into()))
        );
        assert_eq!(to(g, "analyze", 2, NOTHING), "plan");
        assert_eq!(to(g, "analyze", 0, (true, false, true, false)), "verify");
        // plan: moves on after it loaded or read something, or after 2 steps.
        assert_eq!(to(g, "plan", 0, NOTHING), "plan");
        assert_eq!(
            after(g, "plan", 0, (true, false, false, false)),
            (
                "implement".into(),
                Some("context for the plan loaded".into())
            )
        );
        assert_eq!(
            after(g, "plan", 1, NOTHING),
            (
                "implement".into(),
                Some("planning step limit reached".into())
            )
        );
        assert_eq!(
            to(g, "implement", 0, (false, true, false, true)),
            "implement"
        );
        assert_eq!(to(g, "implement", 0, (false, true, true, false)), "verify");
        assert_eq!(to(g, "verify", 0, (false, false, false, true)), "implement");
        assert_eq!(to(g, "verify", 0, (false, false, true, false)), "verify");
    }

    #[test]
    fn terminal_phases_are_entered_from_the_status_only() {
        let g = FixViolation.phase_graph();
        for t in [COMPLETE, FAILED, ESCALATED] {
            assert!(g.phase(t).unwrap().terminal);
            assert!(g.transitions.iter().all(|tr| tr.to != t && tr.from != t));
            let mut st = PhaseMachineState::at("implement", 2);
            assert!(g.finish(&mut st, t, 5, "status").is_some());
            assert_eq!(st.current, t);
        }
    }

    fn names(v: &crate::phases::ActionsView) -> Vec<&str> {
        v.available.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn actions_per_phase_keep_their_order() {
        for s in schemas() {
            let g = s.phase_graph();
            let view = |p: &str| g.actions_view(&PhaseMachineState::at(p, 0), false, false);
            assert_eq!(names(&view("analyze")), ANALYZE_ACTIONS);
            assert_eq!(names(&view("implement")), IMPLEMENT_ACTIONS);
            assert_eq!(names(&view("verify")), VERIFY_ACTIONS);
            assert!(!names(&view("analyze")).contains(&"edit_file"));
            for p in &g.phases {
                for a in &p.actions {
                    assert!(!a.preconditions.is_empty(), "{}/{}", p.name, a.name);
                    assert!(!a.postconditions.is_empty(), "{}/{}", p.name, a.name);
                }
            }
        }
        let g = ImplementFeature.phase_graph();
        let plan = g.actions_view(&PhaseMachineState::at("plan", 0), false, false);
        assert_eq!(names(&plan), PLAN_ACTIONS);
        assert_eq!(plan.recommended.as_deref(), Some("load_context"));
    }

    #[test]
    fn recommended_and_blocked_actions() {
        let g = FixViolation.phase_graph();
        let at = |p: &str| PhaseMachineState::at(p, 0);
        let v = g.actions_view(&at("analyze"), false, false);
        assert_eq!(v.recommended.as_deref(), Some("read_file"));
        assert!(v.blocked.is_empty(), "complete is not offered in analyze");
        // implement without modifications (or with failing checks): an edit.
        let v = g.actions_view(&at("implement"), false, false);
        assert_eq!(v.recommended.as_deref(), Some("edit_file"));
        assert_eq!(
            v.blocked,
            vec![("complete".into(), "verification not yet passing".into())]
        );
        assert!(
            names(&v).contains(&"complete"),
            "still offered: the guard refuses it"
        );
        assert_eq!(
            g.actions_view(&at("implement"), false, true)
                .recommended
                .as_deref(),
            Some("edit_file")
        );
        // verify and ready: complete; not ready: run the tests again.
        let v = g.actions_view(&at("verify"), true, true);
        assert_eq!(v.recommended.as_deref(), Some("complete"));
        assert!(v.blocked.is_empty());
        let v = g.actions_view(&at("verify"), false, true);
        assert_eq!(v.recommended.as_deref(), Some("run_tests"));
        assert_eq!(v.blocked.len(), 1);
    }

    #[test]
    fn builtin_actions_are_the_tools() {
        let mut tools: Vec<String> = crate::tools::builtin_tool_specs()
            .into_iter()
            .map(|t| t.name)
            .collect();
        let mut known: Vec<String> = BUILTIN_ACTIONS.iter().map(|s| s.to_string()).collect();
        tools.sort();
        known.sort();
        assert_eq!(tools, known);
        assert_eq!(builtin_action("edit_file"), Some("edit_file"));
        assert_eq!(builtin_action("frobnicate"), None);
    }

    struct Broken(PhaseGraph);

    impl ContextSchema for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn phase_graph(&self) -> &PhaseGraph {
            &self.0
        }
        fn default_success_criteria(&self) -> Vec<String> {
            Vec::new()
        }
        fn build_current_state(&self, _: &TaskSpec, _: &TaskState, _: &Workspace) -> Value {
            Value::Null
        }
    }

    #[test]
    fn register_refuses_an_invalid_graph_with_all_its_errors() {
        let mut g = standard_graph(false);
        g.phases[0].actions.push(action("frobnicate", 0));
        g.transitions
            .push(transition("verify", "review", Condition::Always, "typo"));
        let mut r = SchemaRegistry::default();
        let err = r.register(Box::new(Broken(g))).unwrap_err();
        assert_eq!(err.task_type, "broken");
        assert_eq!(err.errors.len(), 2, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("unknown action `frobnicate`"), "{msg}");
        assert!(msg.contains("unknown phase `review`"), "{msg}");
        assert!(r.get("broken").is_err());
        r.register(Box::new(Broken(standard_graph(true)))).unwrap();
        assert!(r.get("broken").is_ok());
    }

    #[test]
    fn unknown_task_type_lists_known_ones() {
        let err = SchemaRegistry::default().get("refactor").err().unwrap();
        assert!(err.contains("fix_violation"), "{err}");
    }
}
