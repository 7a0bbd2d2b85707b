//! Context schemas: one per task type (seed 001, "Context Schemas by Task Type").
//!
//! A schema supplies its phase graph (phases, the actions offered in each, the automatic
//! transitions: see [`agentforge_core::phases`]) and builds the task-specific `current_state`
//! section from the spec and the files on disk. Task types are plugins: the built-in
//! ones (`fix_violation`, `implement_feature`, `write_tests`) are the components in
//! `plugins/schema-*`, embedded in the host and loaded by
//! `agentforge_engine::executor::Runtime::load_plugins` behind [`ContextSchema`]. This module is the
//! seam and the [`SchemaRegistry`], which validates every graph it is given.

use std::collections::BTreeMap;

use serde_json::Value;

use agentforge_core::deferred::{Deferred, FillPanicked};
use agentforge_core::phases::{PhaseGraph, PhaseGraphError};
use agentforge_core::state::TaskState;
use agentforge_core::task::TaskSpec;
use agentforge_store::tools::{ToolError, Workspace};

pub use agentforge_core::actions::{builtin_action, BUILTIN_ACTIONS};

/// A task type that is not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task type `{name}`; known task types: {}", known.join(", "))]
pub struct UnknownTaskType {
    /// The name asked for.
    pub name: String,
    /// The registered task types, sorted.
    pub known: Vec<String>,
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

    /// Token budgets this task type sets (`[budget]` keys); the others keep the
    /// project's values.
    fn budgets(&self) -> &[(String, u32)] {
        &[]
    }

    /// Prompt templates (name, source) the task type brings; the project's own files
    /// still override them.
    fn prompt_templates(&self) -> &[(String, String)] {
        &[]
    }

    /// The keys the task type reads under `task.yaml`'s `inputs:`, as a JSON-Schema-like
    /// object (`type`, `properties`, `required`, `additionalProperties`, `items`; see
    /// [`agentforge_core::task::check_value`]). A task is checked against it when it is created,
    /// so a misspelt key is an error rather than an input silently not shown. `None`
    /// (the default): inputs are not checked.
    fn input_schema(&self) -> Option<Value> {
        None
    }

    /// One line for listings.
    fn description(&self) -> &str {
        ""
    }

    /// Where the task type comes from (`built-in`, `plugin <name>`).
    fn source(&self) -> String {
        "built-in".to_string()
    }
}

/// Most bytes of a file shown in a context section (a schema's file insert, a
/// `full_file:` item); the context builder compresses long text further.
pub const MAX_SHOWN_FILE_BYTES: u64 = 1 << 20;

/// Lines of a workspace file shown with numbers, as `  12| code`, or why it cannot be
/// shown (refused path, missing, not a regular file: a FIFO or device is never read).
///
/// At most [`MAX_SHOWN_FILE_BYTES`] are read; a longer file is shown up to there, with a
/// last line saying it was cut. Invalid UTF-8 is replaced.
pub fn numbered_file(ws: &Workspace, rel: &str) -> Result<String, ToolError> {
    let read = ws.read_bounded(rel, MAX_SHOWN_FILE_BYTES)?;
    let text = read.text();
    let count = text.lines().count().max(1);
    let width = count.to_string().len();
    // Built in one buffer: this runs on every step for every file a task type shows.
    let mut shown = String::with_capacity(text.len() + count * (width + 3));
    for (i, l) in text.lines().enumerate() {
        if i > 0 {
            shown.push('\n');
        }
        agentforge_core::text::push_right_aligned(&mut shown, i + 1, width);
        shown.push_str("| ");
        shown.push_str(l);
    }
    if read.truncated {
        shown.push_str(&format!(
            "\n... (cut: `{rel}` is longer than {} bytes; only that much is shown)",
            read.cap
        ));
    }
    Ok(shown)
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

/// A task type that could not be opened: not registered, or its plugin failed to load
/// when a task of that type was first opened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TaskTypeError {
    /// No plugin defines it.
    #[error(transparent)]
    Unknown(#[from] UnknownTaskType),
    /// Its plugin is registered by its manifest and failed to load, or what it describes
    /// does not match (another name, an invalid phase graph).
    #[error("task type `{task_type}` (plugin `{plugin}`) cannot be used: {message}")]
    Unavailable {
        /// The task type.
        task_type: String,
        /// The plugin that defines it.
        plugin: String,
        /// Why.
        message: String,
    },
}

/// Why a task type registered by name failed on first use (the registry adds its name).
#[derive(Debug, Clone, PartialEq)]
struct LoadFailed(String);

impl From<FillPanicked> for LoadFailed {
    fn from(e: FillPanicked) -> Self {
        LoadFailed(e.to_string())
    }
}

/// Loads a task type registered by name ([`SchemaRegistry::register_on_first_use`]).
pub type LoadSchema = Box<dyn FnOnce() -> Result<Box<dyn ContextSchema>, String> + Send>;

/// A registered task type: loaded, or loaded when first asked for.
enum Entry {
    Ready(Box<dyn ContextSchema>),
    OnFirstUse {
        plugin: String,
        schema: Deferred<Box<dyn ContextSchema>, LoadFailed>,
    },
}

/// The task types known to a run.
pub struct SchemaRegistry {
    schemas: BTreeMap<String, Entry>,
}

impl Default for SchemaRegistry {
    /// An empty registry: task types come from plugins.
    fn default() -> Self {
        SchemaRegistry {
            schemas: BTreeMap::new(),
        }
    }
}

impl SchemaRegistry {
    /// Adds a task type whose phase graph uses only the built-in actions.
    pub fn register(&mut self, s: Box<dyn ContextSchema>) -> Result<(), InvalidSchema> {
        self.register_with(s, &BUILTIN_ACTIONS)
    }

    /// Adds (or replaces) a task type whose phase graph may use `actions` (the built-in
    /// ones plus the tools plugins add). The graph is validated first.
    pub fn register_with(
        &mut self,
        s: Box<dyn ContextSchema>,
        actions: &[&str],
    ) -> Result<(), InvalidSchema> {
        validate(s.as_ref(), actions)?;
        self.schemas.insert(s.name().to_string(), Entry::Ready(s));
        Ok(())
    }

    /// Adds (or replaces) task type `task_type`, defined by plugin `plugin`, without
    /// loading it: `load` runs when the task type is first asked for ([`Self::get`],
    /// [`Self::load_all`]), once. What it loads must describe `task_type`, and its phase
    /// graph may use `actions`; a failure is kept and returned on every later use.
    pub fn register_on_first_use(
        &mut self,
        task_type: &str,
        plugin: &str,
        actions: Vec<String>,
        load: LoadSchema,
    ) {
        let expected = task_type.to_string();
        let schema = Deferred::on_first_use(move || {
            let s = load().map_err(LoadFailed)?;
            if s.name() != expected {
                return Err(LoadFailed(task_type_mismatch(&expected, s.name())));
            }
            let actions: Vec<&str> = actions.iter().map(String::as_str).collect();
            validate(s.as_ref(), &actions).map_err(|e| LoadFailed(e.to_string()))?;
            Ok(s)
        });
        self.schemas.insert(
            task_type.to_string(),
            Entry::OnFirstUse {
                plugin: plugin.to_string(),
                schema,
            },
        );
    }

    /// The task type `task_type` (loading it if it was registered by name), or an error
    /// listing the known ones or saying why it failed to load.
    pub fn get(&self, task_type: &str) -> Result<&dyn ContextSchema, TaskTypeError> {
        match self.schemas.get(task_type) {
            Some(Entry::Ready(s)) => Ok(s.as_ref()),
            Some(Entry::OnFirstUse { plugin, schema }) => {
                schema
                    .get()
                    .map(|s| s.as_ref())
                    .map_err(|LoadFailed(message)| TaskTypeError::Unavailable {
                        task_type: task_type.to_string(),
                        plugin: plugin.clone(),
                        message,
                    })
            }
            None => Err(UnknownTaskType {
                name: task_type.to_string(),
                known: self.names(),
            }
            .into()),
        }
    }

    /// Loads every task type registered by name that is not loaded yet (`--strict`: every
    /// broken plugin known before a run starts) and returns those that failed.
    pub fn load_all(&self) -> Vec<TaskTypeError> {
        self.schemas
            .keys()
            .filter_map(|name| self.get(name).err())
            .collect()
    }

    /// Whether task type `task_type` is loaded (`None`: not registered).
    pub fn is_loaded(&self, task_type: &str) -> Option<bool> {
        self.schemas.get(task_type).map(|e| match e {
            Entry::Ready(_) => true,
            Entry::OnFirstUse { schema, .. } => schema.is_loaded(),
        })
    }

    /// The known task type names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.schemas.keys().cloned().collect()
    }
}

/// Why a plugin whose manifest names task type `named` is refused when its component
/// describes `described` (the plugin host checks it when loading; the registry again on
/// first use, for loaders that do not go through a manifest).
pub fn task_type_mismatch(named: &str, described: &str) -> String {
    format!(
        "its manifest says `task_type = {named:?}` but the component describes task type `{described}`; make the two agree"
    )
}

/// Checks the phase graph of `s` against the actions a run offers.
fn validate(s: &dyn ContextSchema, actions: &[&str]) -> Result<(), InvalidSchema> {
    s.phase_graph()
        .validate(actions)
        .map_err(|errors| InvalidSchema {
            task_type: s.name().to_string(),
            errors,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentforge_core::phases::{PhaseMachineState, Signals, COMPLETE, ESCALATED, FAILED};

    #[test]
    fn numbered_file_aligns_numbers_to_the_widest() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        for n in [0usize, 1, 9, 10, 99, 100, 1234] {
            let text: String = (0..n).map(|i| format!("line {i}\r\n")).collect();
            std::fs::write(dir.path().join("f.txt"), &text).unwrap();
            let width = text.lines().count().max(1).to_string().len();
            let want = text
                .lines()
                .enumerate()
                .map(|(i, l)| format!("{:>width$}| {l}", i + 1))
                .collect::<Vec<_>>()
                .join("\n");
            assert_eq!(numbered_file(&ws, "f.txt").unwrap(), want, "{n} lines");
        }
        assert_eq!(
            numbered_file(&ws, "f.txt").unwrap().lines().nth(9),
            Some("  10| line 9")
        );
    }

    /// The actions each phase offers, in order of priority (the seed's per-phase lists).
    const ANALYZE_ACTIONS: &[&str] = &[
        "read_file",
        "search",
        "load_context",
        "run_check",
        "run_tests",
        "escalate",
        "cannot_fix",
    ];
    const PLAN_ACTIONS: &[&str] = &[
        "load_context",
        "read_file",
        "search",
        "escalate",
        "cannot_fix",
    ];
    const IMPLEMENT_ACTIONS: &[&str] = &[
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
    const VERIFY_ACTIONS: &[&str] = &[
        "complete",
        "run_check",
        "run_tests",
        "read_file",
        "escalate",
    ];

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

    /// A built-in task type's phase graph, as its plugin ships it.
    struct Shipped(&'static str, PhaseGraph);

    impl ContextSchema for Shipped {
        fn name(&self) -> &str {
            self.0
        }
        fn phase_graph(&self) -> &PhaseGraph {
            &self.1
        }
        fn default_success_criteria(&self) -> Vec<String> {
            Vec::new()
        }
        fn build_current_state(&self, _: &TaskSpec, _: &TaskState, _: &Workspace) -> Value {
            Value::Null
        }
    }

    fn shipped(name: &'static str, json: &str) -> Shipped {
        Shipped(name, serde_json::from_str(json).unwrap())
    }

    #[allow(non_snake_case)]
    fn FixViolation() -> Shipped {
        shipped(
            "fix_violation",
            include_str!("../../../plugins/schema-fix-violation/graph.json"),
        )
    }

    #[allow(non_snake_case)]
    fn ImplementFeature() -> Shipped {
        shipped(
            "implement_feature",
            include_str!("../../../plugins/schema-implement-feature/graph.json"),
        )
    }

    #[allow(non_snake_case)]
    fn WriteTests() -> Shipped {
        shipped(
            "write_tests",
            include_str!("../../../plugins/schema-write-tests/graph.json"),
        )
    }

    fn schemas() -> Vec<Box<dyn ContextSchema>> {
        vec![
            Box::new(FixViolation()),
            Box::new(ImplementFeature()),
            Box::new(WriteTests()),
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
                s.phase_graph().validate(&BUILTIN_ACTIONS),
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
        for s in [FixViolation(), WriteTests()] {
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
        let g = &ImplementFeature().1;
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
        let g = &FixViolation().1;
        for t in [COMPLETE, FAILED, ESCALATED] {
            assert!(g.phase(t).unwrap().terminal);
            assert!(g.transitions.iter().all(|tr| tr.to != t && tr.from != t));
            let mut st = PhaseMachineState::at("implement", 2);
            assert!(g.finish(&mut st, t, 5, "status").is_some());
            assert_eq!(st.current, t);
        }
    }

    fn names(v: &agentforge_core::phases::ActionsView) -> Vec<&str> {
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
        let g = &ImplementFeature().1;
        let plan = g.actions_view(&PhaseMachineState::at("plan", 0), false, false);
        assert_eq!(names(&plan), PLAN_ACTIONS);
        assert_eq!(plan.recommended.as_deref(), Some("load_context"));
    }

    #[test]
    fn recommended_and_blocked_actions() {
        let g = &FixViolation().1;
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
        let mut tools: Vec<String> = agentforge_core::actions::builtin_tools()
            .iter()
            .map(|t| t.name.clone())
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
        let mut g = FixViolation().1;
        let mut frobnicate = g.phases[0].actions[0].clone();
        frobnicate.name = "frobnicate".into();
        g.phases[0].actions.push(frobnicate);
        g.transitions.push(agentforge_core::phases::Transition {
            from: "verify".into(),
            to: "review".into(),
            when: agentforge_core::phases::Condition::Always,
            reason: "typo".into(),
        });
        let mut r = SchemaRegistry::default();
        let err = r.register(Box::new(Broken(g))).unwrap_err();
        assert_eq!(err.task_type, "broken");
        assert_eq!(err.errors.len(), 2, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("unknown action `frobnicate`"), "{msg}");
        assert!(msg.contains("unknown phase `review`"), "{msg}");
        assert!(r.get("broken").is_err());
        r.register(Box::new(Broken(ImplementFeature().1))).unwrap();
        assert!(r.get("broken").is_ok());
    }

    #[test]
    fn unknown_task_type_lists_known_ones() {
        let mut r = SchemaRegistry::default();
        r.register(Box::new(FixViolation())).unwrap();
        let err = r.get("refactor").err().unwrap().to_string();
        assert!(err.contains("known task types: fix_violation"), "{err}");
    }

    #[test]
    fn a_task_type_registered_by_name_loads_once_on_first_use_and_is_checked_then() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let loads = Arc::new(AtomicUsize::new(0));
        let actions: Vec<String> = BUILTIN_ACTIONS.iter().map(|a| a.to_string()).collect();
        let counted = |loads: &Arc<AtomicUsize>, s: Box<dyn ContextSchema>| -> LoadSchema {
            let loads = loads.clone();
            Box::new(move || {
                loads.fetch_add(1, Ordering::SeqCst);
                Ok(s)
            })
        };
        let mut r = SchemaRegistry::default();
        r.register_on_first_use(
            "fix_violation",
            "schema-fix-violation",
            actions.clone(),
            counted(&loads, Box::new(FixViolation())),
        );
        // Named `write_tests` but describes `fix_violation`.
        r.register_on_first_use(
            "write_tests",
            "misnamed",
            actions.clone(),
            counted(&loads, Box::new(FixViolation())),
        );
        let mut g = FixViolation().1;
        g.transitions[0].to = "review".into();
        r.register_on_first_use(
            "broken",
            "broken-plugin",
            actions.clone(),
            counted(&loads, Box::new(Broken(g))),
        );
        r.register_on_first_use(
            "failing",
            "failing-plugin",
            actions,
            Box::new(|| Err("component refused: boom".to_string())),
        );
        assert_eq!(
            r.names(),
            ["broken", "failing", "fix_violation", "write_tests"]
        );
        assert_eq!(loads.load(Ordering::SeqCst), 0, "registering loads nothing");
        assert_eq!(r.is_loaded("fix_violation"), Some(false));
        assert_eq!(r.is_loaded("refactor"), None);

        assert_eq!(r.get("fix_violation").unwrap().name(), "fix_violation");
        assert_eq!(r.get("fix_violation").unwrap().initial_phase(), "analyze");
        assert_eq!(loads.load(Ordering::SeqCst), 1, "loaded once");
        assert_eq!(r.is_loaded("fix_violation"), Some(true));
        assert_eq!(r.is_loaded("write_tests"), Some(false));

        let misnamed = r.get("write_tests").err().unwrap();
        assert!(
            matches!(&misnamed, TaskTypeError::Unavailable { plugin, .. } if plugin == "misnamed"),
            "{misnamed:?}"
        );
        let msg = misnamed.to_string();
        assert!(msg.contains("`task_type = \"write_tests\"`"), "{msg}");
        assert!(msg.contains("describes task type `fix_violation`"), "{msg}");
        let broken = r.get("broken").err().unwrap().to_string();
        assert!(broken.contains("unknown phase `review`"), "{broken}");
        let failing = r.get("failing").err().unwrap().to_string();
        assert!(
            failing.contains("`failing`")
                && failing.contains("failing-plugin")
                && failing.contains("boom"),
            "{failing}"
        );
        // Failures are kept, not retried; `load_all` reports each broken one once more.
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        let all: Vec<String> = r.load_all().iter().map(ToString::to_string).collect();
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        assert!(matches!(r.get("refactor"), Err(TaskTypeError::Unknown(_))));
    }

    /// A task type that declares its inputs, as a native implementation would.
    struct WithInputs(PhaseGraph);

    impl ContextSchema for WithInputs {
        fn name(&self) -> &str {
            "with_inputs"
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
        fn input_schema(&self) -> Option<Value> {
            Some(serde_json::json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "spec": {},
                    "target_test_file": {"type": "string"}
                }
            }))
        }
    }

    #[test]
    fn a_declared_input_schema_checks_task_inputs() {
        let mut r = SchemaRegistry::default();
        r.register(Box::new(WithInputs(WriteTests().1))).unwrap();
        r.register(Box::new(WriteTests())).unwrap();
        let schema = r.get("with_inputs").unwrap().input_schema().unwrap();
        let spec = |inputs: &str| {
            TaskSpec::parse(
                &format!("id: a\ntask_type: with_inputs\ngoal: g\ninputs:\n{inputs}"),
                "tasks/a.yaml",
            )
            .unwrap()
        };
        spec("  spec: x\n  target_test_file: t.rs\n")
            .check_inputs("tasks/a.yaml", &schema)
            .unwrap();
        let err = spec("  spec: x\n  target_tst_file: t.rs\n")
            .check_inputs("tasks/a.yaml", &schema)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tasks/a.yaml"), "{err}");
        assert!(
            err.contains("unknown key `target_tst_file` (did you mean `target_test_file`?)"),
            "{err}"
        );
        assert!(
            err.contains("accepted keys: plan, spec, target_test_file"),
            "{err}"
        );
        // The default: no schema, nothing checked.
        assert!(r.get("write_tests").unwrap().input_schema().is_none());
    }
}
