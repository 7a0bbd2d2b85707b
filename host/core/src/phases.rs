//! The phase machine (seed 000 §4.4 "Phase Machine", §4.5 `_build_actions`).
//!
//! A task type describes its phases as data, a [`PhaseGraph`]: the phases with the
//! actions each offers (pre/postconditions, priority, an optional machine-checked
//! requirement), the recommended action, a step limit per phase, and guarded
//! transitions. After every step the executor computes [`Signals`] and calls
//! [`PhaseGraph::advance`]: the first transition out of the current phase whose guard
//! holds is taken and recorded in the [`PhaseMachineState`] history. Nothing else moves
//! a task between non-terminal phases.
//!
//! The terminal phases (`complete`, `failed`, `escalated`) are entered through the task
//! status, which the finishing actions set (`complete`, `cannot_fix`, `escalate`):
//! [`PhaseGraph::finish`] records that move. For validation a phase offering a finishing
//! action therefore has an implicit edge to its terminal phase ([`FINISHING_ACTIONS`]).
//!
//! Because the graph is plain serde data it can come from a WASM context-schema plugin
//! and be checked when it is loaded: [`PhaseGraph::validate`] reports every problem at
//! once, naming the phase, transition or action at fault.
//!
//! ```
//! use agentforge_core::phases::{PhaseGraph, Signals};
//!
//! let graph: PhaseGraph = serde_yaml_ng::from_str(r#"
//! initial: analyze
//! phases:
//!   - name: analyze
//!     max_steps: 3
//!     recommended: read_file
//!     actions:
//!       - { name: read_file, preconditions: [need to see code], priority: 10 }
//!       - { name: escalate, priority: 1 }
//!   - name: implement
//!     actions:
//!       - { name: edit_file, priority: 10 }
//!       - name: complete
//!         requires: { condition: ready, reason: verification not yet passing }
//!   - { name: complete, terminal: true }
//!   - { name: escalated, terminal: true }
//! transitions:
//!   - from: analyze
//!     to: implement
//!     when: { any: [context_gathered, max_steps_reached] }
//!     reason: context gathered
//! "#).unwrap();
//! graph.validate(&["read_file", "escalate", "edit_file", "complete"]).unwrap();
//!
//! let mut st = graph.start();
//! let read = Signals { context_gathered: true, ..Signals::default() };
//! assert_eq!(graph.advance(&mut st, 1, &read).unwrap().to, "implement");
//! let view = graph.actions_view(&st, false, false);
//! assert_eq!(view.blocked, [("complete".to_string(), "verification not yet passing".to_string())]);
//! ```

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

/// Terminal phase of a task whose `complete` was accepted.
pub const COMPLETE: &str = "complete";
/// Terminal phase of a task that cannot be done (`cannot_fix`, host failure).
pub const FAILED: &str = "failed";
/// Terminal phase of a task handed to a human (`escalate`, host escalation).
pub const ESCALATED: &str = "escalated";

/// Actions that end a task, with the terminal phase each one leads to.
pub const FINISHING_ACTIONS: &[(&str, &str)] = &[
    ("complete", COMPLETE),
    ("cannot_fix", FAILED),
    ("escalate", ESCALATED),
];

/// A task type's phases and the transitions between them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PhaseGraph {
    /// Phase a new task starts in.
    pub initial: String,
    /// All phases, terminal ones (`complete`, `failed`, `escalated`) included.
    pub phases: Vec<PhaseSpec>,
    /// Automatic transitions, evaluated after every step; per phase the first one
    /// (in this order) whose guard holds is taken.
    #[serde(default)]
    pub transitions: Vec<Transition>,
}

/// One phase.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Phase name (`analyze`, `plan`, `implement`, `verify`, ...): also selects the
    /// system prompt template `<task_type>.<phase>.j2` or `<phase>.j2`.
    pub name: String,
    /// What the phase is for.
    #[serde(default)]
    pub description: String,
    /// Actions offered in this phase.
    #[serde(default)]
    pub actions: Vec<ActionDef>,
    /// Steps after which [`Condition::MaxStepsReached`] holds; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Default recommended action (one of `actions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<String>,
    /// Computed recommendations, tried in order before `recommended`: the first rule
    /// whose condition holds and whose action is not blocked wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommend: Vec<Recommendation>,
    /// The plan-tree actions this phase offers besides `actions`: `plan` (decompose the
    /// goal into subtasks) and `finish_subtask` (tick one off; offered once the goal has
    /// a real plan). Absent: chosen by the phase's name as before this field existed
    /// (`analyze` and `plan` offer `plan`; `implement` and `verify` offer
    /// `finish_subtask`), so a graph with other phase names declares them here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_actions: Option<Vec<PlanAction>>,
    /// A task in this phase is finished: no actions, no transitions out.
    #[serde(default)]
    pub terminal: bool,
}

/// A plan-tree action a phase may offer ([`PhaseSpec::plan_actions`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    /// `plan`: decompose the goal into subtasks.
    Plan,
    /// `finish_subtask`: close the current subtask.
    FinishSubtask,
}

impl PlanAction {
    /// The action's name, as the model calls it.
    pub fn name(self) -> &'static str {
        match self {
            PlanAction::Plan => "plan",
            PlanAction::FinishSubtask => "finish_subtask",
        }
    }
}

impl PhaseSpec {
    /// Whether this phase offers `action`: as declared, else by the phase's name.
    pub fn offers(&self, action: PlanAction) -> bool {
        match &self.plan_actions {
            Some(declared) => declared.contains(&action),
            None => match action {
                PlanAction::Plan => matches!(self.name.as_str(), "analyze" | "plan"),
                PlanAction::FinishSubtask => matches!(self.name.as_str(), "implement" | "verify"),
            },
        }
    }
}

/// An action as a phase offers it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ActionDef {
    /// Tool name (must be a known action).
    pub name: String,
    /// When to use it, shown to the model.
    #[serde(default)]
    pub preconditions: Vec<String>,
    /// What it leads to.
    #[serde(default)]
    pub postconditions: Vec<String>,
    /// Higher first in the list shown to the model; equal priorities keep their order.
    #[serde(default)]
    pub priority: i32,
    /// Machine-checked precondition: while it does not hold, the action is listed as
    /// blocked with the reason (it stays offered; the guards enforce the refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Requirement>,
}

/// A checked precondition of an action.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// Must hold for the action to be useful.
    pub condition: Condition,
    /// Shown while it does not (`verification not yet passing`).
    pub reason: String,
}

/// A computed recommendation: `action` when `when` holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Recommendation {
    /// Condition on the task's state (step-local signals are false here).
    pub when: Condition,
    /// Recommended action (one of the phase's actions).
    pub action: String,
}

/// A guarded, automatic transition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    /// Source phase.
    pub from: String,
    /// Target phase.
    pub to: String,
    /// Guard, evaluated after every step spent in `from`.
    pub when: Condition,
    /// Why, recorded in the phase history.
    pub reason: String,
}

/// A guard over the task's state after a step.
///
/// Externally tagged in snake case: `ready`, `{ not: ready }`,
/// `{ phase_steps_at_least: 2 }`, `{ any: [files_changed, context_gathered] }`. YAML
/// may also use tags (`!any [files_changed, context_gathered]`), which is how
/// `serde_yaml_ng` writes them; JSON uses the map form.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// Always true.
    Always,
    /// Verification is ready for completion (all checks ran since the last change and pass).
    Ready,
    /// This step ran verification and a check failed.
    ChecksFailing,
    /// This step changed files (and they were kept).
    FilesChanged,
    /// This step read, searched, loaded context or ran checks successfully.
    ContextGathered,
    /// At least this many steps were spent in the current phase (this one included).
    PhaseStepsAtLeast(u64),
    /// The phase's `max_steps` are used up (never true without a limit).
    MaxStepsReached,
    /// The task has modified files so far.
    HasModifications,
    /// All of them hold (true when empty).
    All(Vec<Condition>),
    /// One of them holds (false when empty).
    Any(Vec<Condition>),
    /// It does not hold.
    Not(Box<Condition>),
}

impl Condition {
    /// Whether the condition holds after `phase_steps` steps in a phase limited to
    /// `max_steps`, given the step's signals.
    pub fn holds(&self, phase_steps: u64, max_steps: Option<u64>, s: &Signals) -> bool {
        match self {
            Condition::Always => true,
            Condition::Ready => s.ready,
            Condition::ChecksFailing => s.checks_failing,
            Condition::FilesChanged => s.files_changed,
            Condition::ContextGathered => s.context_gathered,
            Condition::PhaseStepsAtLeast(n) => phase_steps >= *n,
            Condition::MaxStepsReached => max_steps.is_some_and(|m| phase_steps >= m),
            Condition::HasModifications => s.has_modifications,
            Condition::All(cs) => cs.iter().all(|c| c.holds(phase_steps, max_steps, s)),
            Condition::Any(cs) => cs.iter().any(|c| c.holds(phase_steps, max_steps, s)),
            Condition::Not(c) => !c.holds(phase_steps, max_steps, s),
        }
    }

    /// Whether [`Condition::MaxStepsReached`] occurs anywhere in it.
    fn uses_max_steps(&self) -> bool {
        match self {
            Condition::MaxStepsReached => true,
            Condition::All(cs) | Condition::Any(cs) => cs.iter().any(Condition::uses_max_steps),
            Condition::Not(c) => c.uses_max_steps(),
            _ => false,
        }
    }
}

const UNIT_CONDITIONS: &[(&str, Condition)] = &[
    ("always", Condition::Always),
    ("ready", Condition::Ready),
    ("checks_failing", Condition::ChecksFailing),
    ("files_changed", Condition::FilesChanged),
    ("context_gathered", Condition::ContextGathered),
    ("max_steps_reached", Condition::MaxStepsReached),
    ("has_modifications", Condition::HasModifications),
];
const CONDITION_NAMES: &[&str] = &[
    "always",
    "ready",
    "checks_failing",
    "files_changed",
    "context_gathered",
    "phase_steps_at_least",
    "max_steps_reached",
    "has_modifications",
    "all",
    "any",
    "not",
];

fn unit_condition(name: &str) -> Option<Condition> {
    UNIT_CONDITIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c.clone())
}

/// Accepts a plain name, a one-key map and a tagged enum (YAML `!tag`).
impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, EnumAccess, Error as _, IgnoredAny, MapAccess, VariantAccess};

        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Condition;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a condition: a name such as `ready`, or a one-key map such as `{ any: [...] }`")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Condition, E> {
                unit_condition(v).ok_or_else(|| match v {
                    "phase_steps_at_least" | "all" | "any" | "not" => {
                        E::custom(format!("condition `{v}` needs a value: `{{ {v}: ... }}`"))
                    }
                    _ => E::unknown_variant(v, CONDITION_NAMES),
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Condition, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| A::Error::custom("an empty map is not a condition"))?;
                let c = match key.as_str() {
                    "phase_steps_at_least" => Condition::PhaseStepsAtLeast(map.next_value()?),
                    "all" => Condition::All(map.next_value()?),
                    "any" => Condition::Any(map.next_value()?),
                    "not" => Condition::Not(map.next_value()?),
                    other => match unit_condition(other) {
                        Some(_) => {
                            return Err(A::Error::custom(format!(
                                "condition `{other}` takes no value: write it as a plain name"
                            )))
                        }
                        None => return Err(A::Error::unknown_variant(other, CONDITION_NAMES)),
                    },
                };
                if map.next_key::<IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom(format!(
                        "a condition map has exactly one key (after `{key}`)"
                    )));
                }
                Ok(c)
            }

            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Condition, A::Error> {
                let (name, variant): (String, _) = data.variant()?;
                match name.as_str() {
                    "phase_steps_at_least" => {
                        variant.newtype_variant().map(Condition::PhaseStepsAtLeast)
                    }
                    "all" => variant.newtype_variant().map(Condition::All),
                    "any" => variant.newtype_variant().map(Condition::Any),
                    "not" => variant.newtype_variant().map(Condition::Not),
                    other => match unit_condition(other) {
                        Some(c) => variant.unit_variant().map(|()| c),
                        None => Err(A::Error::unknown_variant(other, CONDITION_NAMES)),
                    },
                }
            }
        }

        d.deserialize_any(V)
    }
}

/// What a step did and what the task looks like after it, as guards see it; computed
/// by the executor after each step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// The step read, searched, loaded context or ran checks successfully.
    pub context_gathered: bool,
    /// The step changed files (and they were kept).
    pub files_changed: bool,
    /// Verification is ready for completion.
    pub ready: bool,
    /// The step ran verification and a check failed.
    pub checks_failing: bool,
    /// The task has modified files so far.
    pub has_modifications: bool,
}

/// One recorded phase change.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PhaseChange {
    /// Phase left.
    pub from: String,
    /// Phase entered.
    pub to: String,
    /// Step after which it happened.
    pub step: u64,
    /// The transition's reason (or the task status, for terminal phases).
    pub reason: String,
}

/// The persisted state of a task's phase machine (seed 000 `to_state`/`from_state`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PhaseMachineState {
    /// Current phase.
    pub current: String,
    /// Steps spent in the current phase.
    #[serde(default)]
    pub phase_steps: u64,
    /// Phase changes, oldest first.
    #[serde(default)]
    pub history: Vec<PhaseChange>,
}

impl PhaseMachineState {
    /// A machine in `phase` after `phase_steps` steps there, with no history.
    pub fn at(phase: impl Into<String>, phase_steps: u64) -> PhaseMachineState {
        PhaseMachineState {
            current: phase.into(),
            phase_steps,
            history: Vec::new(),
        }
    }
}

/// What the context shows about actions in the current phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ActionsView {
    /// The phase's actions, highest priority first (blocked ones included: they stay
    /// offered and the guards refuse them with the reason).
    pub available: Vec<ActionDef>,
    /// The action to take next, if the phase has an opinion.
    pub recommended: Option<String>,
    /// `(action, reason)` for available actions whose requirement does not hold.
    pub blocked: Vec<(String, String)>,
}

/// A problem in a phase graph.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum PhaseGraphError {
    /// A transition names a phase the graph does not have.
    #[error("transition `{in_transition}`: unknown phase `{name}`")]
    UnknownPhase {
        /// The transition, as `from -> to`.
        in_transition: String,
        /// The unknown name.
        name: String,
    },
    /// The initial phase does not exist.
    #[error("initial phase `{name}` is not one of the phases")]
    UnknownInitial {
        /// The unknown name.
        name: String,
    },
    /// No transition or finishing action leads to this phase from the initial one.
    #[error("phase `{phase}` is unreachable from the initial phase")]
    Unreachable {
        /// The phase.
        phase: String,
    },
    /// A task in this phase can never complete.
    #[error("phase `{phase}` has no path to `complete` (no `complete` action in it or in any phase reachable from it)")]
    NoPathToComplete {
        /// The phase.
        phase: String,
    },
    /// Two phases share a name.
    #[error("phase `{phase}` is defined more than once")]
    Duplicate {
        /// The phase.
        phase: String,
    },
    /// A phase offers or recommends an action that is not known (or not offered there).
    #[error("phase `{phase}`: unknown action `{action}`")]
    UnknownAction {
        /// The phase.
        phase: String,
        /// The action.
        action: String,
    },
    /// A phase lists an action twice.
    #[error("phase `{phase}` lists action `{action}` more than once")]
    DuplicateAction {
        /// The phase.
        phase: String,
        /// The action.
        action: String,
    },
    /// A terminal phase the graph needs is missing or not marked terminal.
    #[error("phase `{name}` must exist and be terminal (needed by {needed_by})")]
    MissingTerminal {
        /// `complete`, `failed` or `escalated`.
        name: String,
        /// What needs it (`every graph`, `action escalate in phase analyze`).
        needed_by: String,
    },
    /// A terminal phase offers actions or has transitions out.
    #[error("terminal phase `{phase}` must have no actions and no transitions out")]
    TerminalNotFinal {
        /// The phase.
        phase: String,
    },
    /// A transition waits for `max_steps_reached` in a phase without `max_steps`.
    #[error(
        "transition `{in_transition}` uses max_steps_reached but phase `{phase}` has no max_steps"
    )]
    MaxStepsUnset {
        /// The transition, as `from -> to`.
        in_transition: String,
        /// The phase without a limit.
        phase: String,
    },
}

impl PhaseGraph {
    /// Checks the graph; `known_actions` are the actions the host can run. Every problem
    /// is reported, not only the first.
    pub fn validate(&self, known_actions: &[&str]) -> Result<(), Vec<PhaseGraphError>> {
        use PhaseGraphError as E;
        let mut errors = Vec::new();
        let mut by_name: BTreeMap<&str, &PhaseSpec> = BTreeMap::new();
        for p in &self.phases {
            if by_name.insert(p.name.as_str(), p).is_some() {
                errors.push(E::Duplicate {
                    phase: p.name.clone(),
                });
            }
        }
        if !by_name.contains_key(self.initial.as_str()) {
            errors.push(E::UnknownInitial {
                name: self.initial.clone(),
            });
        }
        match by_name.get(COMPLETE) {
            Some(p) if p.terminal => {}
            _ => errors.push(E::MissingTerminal {
                name: COMPLETE.into(),
                needed_by: "every graph".into(),
            }),
        }

        let mut not_final = BTreeSet::new();
        let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for p in &self.phases {
            let mut seen = BTreeSet::new();
            for a in &p.actions {
                if !known_actions.contains(&a.name.as_str()) {
                    errors.push(E::UnknownAction {
                        phase: p.name.clone(),
                        action: a.name.clone(),
                    });
                }
                if !seen.insert(a.name.as_str()) {
                    errors.push(E::DuplicateAction {
                        phase: p.name.clone(),
                        action: a.name.clone(),
                    });
                }
                if let Some((_, target)) = FINISHING_ACTIONS.iter().find(|(n, _)| *n == a.name) {
                    match by_name.get(target) {
                        Some(t) if t.terminal => {
                            edges.entry(p.name.as_str()).or_default().insert(*target);
                        }
                        // `complete` is already reported for every graph.
                        _ if *target == COMPLETE => {}
                        _ => errors.push(E::MissingTerminal {
                            name: target.to_string(),
                            needed_by: format!("action `{}` in phase `{}`", a.name, p.name),
                        }),
                    }
                }
            }
            let recommended = p
                .recommended
                .iter()
                .chain(p.recommend.iter().map(|r| &r.action));
            for r in recommended {
                if !seen.contains(r.as_str()) {
                    errors.push(E::UnknownAction {
                        phase: p.name.clone(),
                        action: r.clone(),
                    });
                }
            }
            if p.terminal && !p.actions.is_empty() {
                not_final.insert(p.name.clone());
            }
        }

        for t in &self.transitions {
            let label = format!("{} -> {}", t.from, t.to);
            let mut known = true;
            for name in [&t.from, &t.to] {
                if !by_name.contains_key(name.as_str()) {
                    known = false;
                    errors.push(E::UnknownPhase {
                        in_transition: label.clone(),
                        name: name.clone(),
                    });
                }
            }
            if let Some(from) = by_name.get(t.from.as_str()) {
                if from.terminal {
                    not_final.insert(from.name.clone());
                }
                if from.max_steps.is_none() && t.when.uses_max_steps() {
                    errors.push(E::MaxStepsUnset {
                        in_transition: label.clone(),
                        phase: from.name.clone(),
                    });
                }
            }
            if known {
                edges
                    .entry(t.from.as_str())
                    .or_default()
                    .insert(t.to.as_str());
            }
        }
        errors.extend(
            not_final
                .into_iter()
                .map(|phase| E::TerminalNotFinal { phase }),
        );

        // Forward reachability from the initial phase.
        let reachable = reach(&edges, &[self.initial.as_str()]);
        if by_name.contains_key(self.initial.as_str()) {
            for p in &self.phases {
                if !reachable.contains(p.name.as_str()) {
                    errors.push(E::Unreachable {
                        phase: p.name.clone(),
                    });
                }
            }
        }
        // Backward reachability from `complete`.
        let mut reverse: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (from, tos) in &edges {
            for to in tos {
                reverse.entry(*to).or_default().insert(*from);
            }
        }
        let completes = reach(&reverse, &[COMPLETE]);
        for p in &self.phases {
            if !p.terminal
                && reachable.contains(p.name.as_str())
                && !completes.contains(p.name.as_str())
            {
                errors.push(E::NoPathToComplete {
                    phase: p.name.clone(),
                });
            }
        }

        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The phase called `name`.
    pub fn phase(&self, name: &str) -> Option<&PhaseSpec> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// The state of a new task: in the initial phase, no steps, no history.
    pub fn start(&self) -> PhaseMachineState {
        PhaseMachineState::at(self.initial.clone(), 0)
    }

    /// After a step: counts it in the current phase, then takes the first transition out
    /// of it whose guard holds ([`Condition::MaxStepsReached`] is
    /// `phase_steps >= max_steps`), resets the phase's step count and records the change
    /// in the history. A terminal phase does not move or count steps.
    pub fn advance(
        &self,
        st: &mut PhaseMachineState,
        step: u64,
        s: &Signals,
    ) -> Option<PhaseChange> {
        let spec = self.phase(&st.current);
        if spec.is_some_and(|p| p.terminal) {
            return None;
        }
        st.phase_steps += 1;
        let max_steps = spec.and_then(|p| p.max_steps);
        let t = self
            .transitions
            .iter()
            .filter(|t| t.from == st.current)
            .find(|t| t.when.holds(st.phase_steps, max_steps, s))?;
        Some(self.enter(st, &t.to, step, &t.reason))
    }

    /// Moves the machine into the terminal phase `to` (the executor calls this when the
    /// task status becomes complete, failed or escalated) and records the change.
    /// `None` (nothing changes) when `to` is not a terminal phase of the graph or the
    /// machine is already there.
    pub fn finish(
        &self,
        st: &mut PhaseMachineState,
        to: &str,
        step: u64,
        reason: &str,
    ) -> Option<PhaseChange> {
        if st.current == to || !self.phase(to).is_some_and(|p| p.terminal) {
            return None;
        }
        Some(self.enter(st, to, step, reason))
    }

    fn enter(&self, st: &mut PhaseMachineState, to: &str, step: u64, reason: &str) -> PhaseChange {
        let change = PhaseChange {
            from: std::mem::replace(&mut st.current, to.to_string()),
            to: to.to_string(),
            step,
            reason: reason.to_string(),
        };
        st.phase_steps = 0;
        st.history.push(change.clone());
        change
    }

    /// What the context shows in the current phase (an unknown phase is shown as the
    /// initial one): its actions by priority, the recommended one (the first computed
    /// rule that holds, else the phase default; never a blocked action), and the actions
    /// whose requirement does not hold, with reasons. Actions of other phases are not
    /// listed.
    pub fn actions_view(
        &self,
        st: &PhaseMachineState,
        ready: bool,
        has_modifications: bool,
    ) -> ActionsView {
        let Some(spec) = self
            .phase(&st.current)
            .or_else(|| self.phase(&self.initial))
        else {
            return ActionsView::default();
        };
        let s = Signals {
            ready,
            has_modifications,
            ..Signals::default()
        };
        let holds = |c: &Condition| c.holds(st.phase_steps, spec.max_steps, &s);
        let mut available = spec.actions.clone();
        available.sort_by_key(|a| Reverse(a.priority));
        let blocked: Vec<(String, String)> = available
            .iter()
            .filter_map(|a| {
                let r = a.requires.as_ref()?;
                (!holds(&r.condition)).then(|| (a.name.clone(), r.reason.clone()))
            })
            .collect();
        let usable = |name: &str| {
            available.iter().any(|a| a.name == name) && !blocked.iter().any(|(b, _)| b == name)
        };
        let recommended = spec
            .recommend
            .iter()
            .filter(|r| holds(&r.when))
            .map(|r| &r.action)
            .chain(spec.recommended.iter())
            .find(|name| usable(name))
            .cloned();
        ActionsView {
            available,
            recommended,
            blocked,
        }
    }
}

/// Nodes reachable from `start` (included) along `edges`.
fn reach<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>, start: &[&'a str]) -> BTreeSet<&'a str> {
    let mut seen: BTreeSet<&str> = start.iter().copied().collect();
    let mut queue: VecDeque<&str> = start.iter().copied().collect();
    while let Some(n) = queue.pop_front() {
        for next in edges.get(n).into_iter().flatten() {
            if seen.insert(*next) {
                queue.push_back(*next);
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KNOWN: &[&str] = &[
        "read_file",
        "edit_file",
        "complete",
        "escalate",
        "cannot_fix",
    ];

    fn action(name: &str, priority: i32) -> ActionDef {
        ActionDef {
            name: name.into(),
            preconditions: vec![],
            postconditions: vec![],
            priority,
            requires: None,
        }
    }

    fn phase(name: &str, actions: &[&str]) -> PhaseSpec {
        PhaseSpec {
            name: name.into(),
            description: String::new(),
            actions: actions.iter().map(|a| action(a, 0)).collect(),
            max_steps: None,
            recommended: None,
            recommend: vec![],
            plan_actions: None,
            terminal: false,
        }
    }

    fn terminal(name: &str) -> PhaseSpec {
        PhaseSpec {
            plan_actions: None,
            terminal: true,
            ..phase(name, &[])
        }
    }

    fn t(from: &str, to: &str, when: Condition) -> Transition {
        Transition {
            from: from.into(),
            to: to.into(),
            when,
            reason: format!("{from} done"),
        }
    }

    /// analyze -(context)-> work (offers complete); both can escalate.
    fn small() -> PhaseGraph {
        let mut analyze = phase("analyze", &["read_file", "escalate"]);
        analyze.max_steps = Some(2);
        PhaseGraph {
            initial: "analyze".into(),
            phases: vec![
                analyze,
                phase("work", &["edit_file", "complete", "escalate"]),
                terminal(COMPLETE),
                terminal(ESCALATED),
            ],
            transitions: vec![t(
                "analyze",
                "work",
                Condition::Any(vec![Condition::ContextGathered, Condition::MaxStepsReached]),
            )],
        }
    }

    #[test]
    fn plan_actions_are_declared_or_chosen_by_name() {
        let graph: PhaseGraph = serde_json::from_value(serde_json::json!({
            "initial": "explore",
            "phases": [
                {"name": "explore", "actions": [{"name": "read_file"}], "plan_actions": ["plan"]},
                {"name": "build", "actions": [{"name": "edit_file"}],
                 "plan_actions": ["finish_subtask"]},
                {"name": "analyze", "actions": [{"name": "read_file"}]},
                {"name": "implement", "actions": [{"name": "edit_file"}], "plan_actions": []},
                {"name": "complete", "terminal": true}
            ]
        }))
        .unwrap();
        let offers = |p: &str, a| graph.phase(p).unwrap().offers(a);
        // Other phase names get the tools they declare...
        assert!(offers("explore", PlanAction::Plan));
        assert!(!offers("explore", PlanAction::FinishSubtask));
        assert!(offers("build", PlanAction::FinishSubtask));
        assert!(!offers("build", PlanAction::Plan));
        // ...an undeclared phase keeps the choice by name, and an empty list means none.
        assert!(offers("analyze", PlanAction::Plan));
        assert!(!offers("implement", PlanAction::FinishSubtask));
        assert!(!offers("complete", PlanAction::Plan));
        let err = serde_json::from_value::<PhaseSpec>(
            serde_json::json!({"name": "x", "plan_actions": ["finish"]}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("finish_subtask"), "{err}");
    }

    #[test]
    fn a_sound_graph_validates() {
        assert_eq!(small().validate(KNOWN), Ok(()));
    }

    #[test]
    fn unknown_phases_in_transitions_are_named() {
        let mut g = small();
        g.transitions.push(t("work", "verfy", Condition::Ready));
        g.transitions.push(t("nowhere", "work", Condition::Always));
        let errs = g.validate(KNOWN).unwrap_err();
        assert!(errs.contains(&PhaseGraphError::UnknownPhase {
            in_transition: "work -> verfy".into(),
            name: "verfy".into()
        }));
        assert!(errs.contains(&PhaseGraphError::UnknownPhase {
            in_transition: "nowhere -> work".into(),
            name: "nowhere".into()
        }));
        assert_eq!(
            errs[0].to_string(),
            "transition `work -> verfy`: unknown phase `verfy`"
        );
    }

    #[test]
    fn unknown_initial_phase() {
        let mut g = small();
        g.initial = "init".into();
        let errs = g.validate(KNOWN).unwrap_err();
        assert_eq!(
            errs,
            vec![PhaseGraphError::UnknownInitial {
                name: "init".into()
            }]
        );
    }

    #[test]
    fn unreachable_phase() {
        let mut g = small();
        g.phases
            .insert(2, phase("plan", &["read_file", "complete"]));
        assert_eq!(
            g.validate(KNOWN).unwrap_err(),
            vec![PhaseGraphError::Unreachable {
                phase: "plan".into()
            }]
        );
    }

    #[test]
    fn unused_terminal_phase_is_unreachable() {
        let mut g = small();
        g.phases.push(terminal(FAILED));
        assert_eq!(
            g.validate(KNOWN).unwrap_err(),
            vec![PhaseGraphError::Unreachable {
                phase: FAILED.into()
            }]
        );
    }

    #[test]
    fn no_path_to_complete() {
        let mut g = small();
        // `work` loses `complete`; it and analyze (which only leads to work) are stuck.
        g.phases[1].actions.retain(|a| a.name != "complete");
        let errs = g.validate(KNOWN).unwrap_err();
        assert_eq!(
            errs,
            vec![
                PhaseGraphError::Unreachable {
                    phase: COMPLETE.into()
                },
                PhaseGraphError::NoPathToComplete {
                    phase: "analyze".into()
                },
                PhaseGraphError::NoPathToComplete {
                    phase: "work".into()
                },
            ]
        );
        assert!(errs[2]
            .to_string()
            .contains("`work` has no path to `complete`"));
        // An explicit transition into `complete` is a path too.
        g.transitions.push(t("work", COMPLETE, Condition::Ready));
        assert_eq!(g.validate(KNOWN), Ok(()));
    }

    #[test]
    fn unknown_and_duplicate_actions() {
        let mut g = small();
        g.phases[0].actions.push(action("frobnicate", 0));
        g.phases[0].actions.push(action("read_file", 0));
        g.phases[0].recommended = Some("edit_file".into());
        let errs = g.validate(KNOWN).unwrap_err();
        assert_eq!(
            errs,
            vec![
                PhaseGraphError::UnknownAction {
                    phase: "analyze".into(),
                    action: "frobnicate".into()
                },
                PhaseGraphError::DuplicateAction {
                    phase: "analyze".into(),
                    action: "read_file".into()
                },
                // Recommended but not offered in the phase.
                PhaseGraphError::UnknownAction {
                    phase: "analyze".into(),
                    action: "edit_file".into()
                },
            ]
        );
    }

    #[test]
    fn duplicates_missing_terminals_and_bad_terminals() {
        let mut g = small();
        g.phases.push(phase("work", &["complete"]));
        g.phases[0].actions.push(action("cannot_fix", 0));
        g.phases[3].actions.push(action("read_file", 0)); // escalated
        g.transitions.push(t(COMPLETE, "work", Condition::Always));
        g.transitions
            .push(t("work", "analyze", Condition::MaxStepsReached));
        let errs = g.validate(KNOWN).unwrap_err();
        for e in [
            PhaseGraphError::Duplicate {
                phase: "work".into(),
            },
            PhaseGraphError::MissingTerminal {
                name: FAILED.into(),
                needed_by: "action `cannot_fix` in phase `analyze`".into(),
            },
            PhaseGraphError::TerminalNotFinal {
                phase: COMPLETE.into(),
            },
            PhaseGraphError::TerminalNotFinal {
                phase: ESCALATED.into(),
            },
            PhaseGraphError::MaxStepsUnset {
                in_transition: "work -> analyze".into(),
                phase: "work".into(),
            },
        ] {
            assert!(errs.contains(&e), "{e:?} missing from {errs:#?}");
        }
        let mut g = small();
        g.phases.retain(|p| p.name != COMPLETE);
        assert!(g
            .validate(KNOWN)
            .unwrap_err()
            .contains(&PhaseGraphError::MissingTerminal {
                name: COMPLETE.into(),
                needed_by: "every graph".into()
            }));
    }

    #[test]
    fn advance_takes_the_first_transition_that_holds_and_records_it() {
        let g = small();
        let mut st = g.start();
        assert_eq!(st, PhaseMachineState::at("analyze", 0));
        assert_eq!(g.advance(&mut st, 1, &Signals::default()), None);
        assert_eq!(st.phase_steps, 1);
        let change = g
            .advance(
                &mut st,
                2,
                &Signals {
                    context_gathered: true,
                    ..Signals::default()
                },
            )
            .unwrap();
        assert_eq!(
            change,
            PhaseChange {
                from: "analyze".into(),
                to: "work".into(),
                step: 2,
                reason: "analyze done".into()
            }
        );
        assert_eq!(st.current, "work");
        assert_eq!(st.phase_steps, 0);
        assert_eq!(st.history, vec![change]);
    }

    #[test]
    fn max_steps_reached_moves_on() {
        let g = small();
        let mut st = g.start();
        assert_eq!(g.advance(&mut st, 1, &Signals::default()), None);
        assert!(g.advance(&mut st, 2, &Signals::default()).is_some());
        assert_eq!(st.current, "work");
    }

    #[test]
    fn order_decides_between_transitions() {
        let mut g = small();
        g.phases.insert(1, phase("verify", &["complete"]));
        g.transitions
            .insert(0, t("analyze", "verify", Condition::Ready));
        let mut st = g.start();
        let both = Signals {
            ready: true,
            context_gathered: true,
            ..Signals::default()
        };
        assert_eq!(g.advance(&mut st, 1, &both).unwrap().to, "verify");
    }

    #[test]
    fn finish_enters_a_terminal_phase_once() {
        let g = small();
        let mut st = PhaseMachineState::at("work", 4);
        let c = g.finish(&mut st, COMPLETE, 7, "task complete").unwrap();
        assert_eq!(
            (c.from.as_str(), c.to.as_str(), c.step),
            ("work", COMPLETE, 7)
        );
        assert_eq!(g.finish(&mut st, COMPLETE, 8, "again"), None);
        assert_eq!(g.finish(&mut st, "work", 8, "not terminal"), None);
        assert_eq!(g.finish(&mut st, FAILED, 8, "not in graph"), None);
        // A terminal phase neither moves nor counts steps.
        assert_eq!(g.advance(&mut st, 9, &Signals::default()), None);
        assert_eq!(st.phase_steps, 0);
        assert_eq!(st.history.len(), 1);
    }

    #[test]
    fn actions_view_sorts_blocks_and_recommends() {
        let mut g = small();
        let work = &mut g.phases[1];
        work.actions = vec![
            action("escalate", 1),
            action("edit_file", 10),
            ActionDef {
                requires: Some(Requirement {
                    condition: Condition::Ready,
                    reason: "verification not yet passing".into(),
                }),
                ..action("complete", 5)
            },
            action("read_file", 5),
        ];
        work.recommended = Some("edit_file".into());
        work.recommend = vec![
            Recommendation {
                when: Condition::Ready,
                action: "complete".into(),
            },
            Recommendation {
                when: Condition::HasModifications,
                action: "read_file".into(),
            },
        ];
        let st = PhaseMachineState::at("work", 1);
        let v = g.actions_view(&st, false, false);
        let names: Vec<_> = v.available.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["edit_file", "complete", "read_file", "escalate"]);
        assert_eq!(
            v.blocked,
            vec![("complete".into(), "verification not yet passing".into())]
        );
        assert_eq!(v.recommended.as_deref(), Some("edit_file"));
        let v = g.actions_view(&st, true, true);
        assert!(v.blocked.is_empty());
        assert_eq!(v.recommended.as_deref(), Some("complete"));
        assert_eq!(
            g.actions_view(&st, false, true).recommended.as_deref(),
            Some("read_file")
        );
        // A blocked default is not recommended.
        g.phases[1].recommended = Some("complete".into());
        g.phases[1].recommend.clear();
        assert_eq!(g.actions_view(&st, false, false).recommended, None);
    }

    #[test]
    fn actions_view_lists_only_the_current_phase_and_falls_back_to_initial() {
        let g = small();
        let v = g.actions_view(&PhaseMachineState::at("analyze", 0), false, false);
        assert!(v.available.iter().all(|a| a.name != "edit_file"));
        let unknown = g.actions_view(&PhaseMachineState::at("gone", 0), false, false);
        assert_eq!(unknown.available, v.available);
        assert!(g
            .actions_view(&PhaseMachineState::at(COMPLETE, 0), true, true)
            .available
            .is_empty());
    }

    #[test]
    fn conditions_combine() {
        let s = Signals {
            ready: true,
            ..Signals::default()
        };
        let c = Condition::All(vec![
            Condition::Ready,
            Condition::Not(Box::new(Condition::FilesChanged)),
            Condition::PhaseStepsAtLeast(2),
        ]);
        assert!(!c.holds(1, None, &s));
        assert!(c.holds(2, None, &s));
        assert!(!Condition::Any(vec![]).holds(0, None, &s));
        assert!(Condition::All(vec![]).holds(0, None, &s));
        assert!(!Condition::MaxStepsReached.holds(100, None, &s));
        assert!(Condition::MaxStepsReached.holds(3, Some(3), &s));
    }

    #[test]
    fn graphs_are_data() {
        let yaml = r#"
initial: analyze
phases:
  - name: analyze
    max_steps: 2
    actions:
      - { name: read_file, preconditions: [need to see code], priority: 10 }
      - { name: escalate }
  - name: work
    recommended: edit_file
    recommend:
      - { when: ready, action: complete }
    actions:
      - { name: edit_file, priority: 10 }
      - name: complete
        requires: { condition: ready, reason: verification not yet passing }
      - { name: escalate }
  - { name: complete, terminal: true }
  - { name: escalated, terminal: true }
transitions:
  - from: analyze
    to: work
    when: { any: [context_gathered, max_steps_reached, { phase_steps_at_least: 5 }] }
    reason: context gathered
  - { from: work, to: analyze, when: { not: has_modifications }, reason: lost }
"#;
        let g: PhaseGraph = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(g.validate(KNOWN), Ok(()));
        assert_eq!(
            g.transitions[0].when,
            Condition::Any(vec![
                Condition::ContextGathered,
                Condition::MaxStepsReached,
                Condition::PhaseStepsAtLeast(5)
            ])
        );
        let json = serde_json::to_string(&g).unwrap();
        assert_eq!(serde_json::from_str::<PhaseGraph>(&json).unwrap(), g);
        let again: PhaseGraph =
            serde_yaml_ng::from_str(&serde_yaml_ng::to_string(&g).unwrap()).unwrap();
        assert_eq!(again, g);
        // The forms serde_yaml_ng and serde_json write, and what they refuse.
        let tagged: Condition =
            serde_yaml_ng::from_str("!any [ready, !phase_steps_at_least 2]").unwrap();
        assert_eq!(
            tagged,
            Condition::Any(vec![Condition::Ready, Condition::PhaseStepsAtLeast(2)])
        );
        let not: Condition = serde_json::from_str(r#"{"not": "ready"}"#).unwrap();
        assert_eq!(not, Condition::Not(Box::new(Condition::Ready)));
        for bad in ["redy", "any", "{ready: 1}", "{any: [], all: []}", "{}", "3"] {
            let err = serde_yaml_ng::from_str::<Condition>(bad);
            assert!(err.is_err(), "{bad} parsed as {err:?}");
        }
        let err = serde_yaml_ng::from_str::<Condition>("redy").unwrap_err();
        assert!(err.to_string().contains("unknown variant `redy`"), "{err}");
        // Typos are refused when the graph is loaded.
        let typo = yaml.replace("max_steps: 2", "max_step: 2");
        assert!(serde_yaml_ng::from_str::<PhaseGraph>(&typo).is_err());
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-z_]{1,12}",
            // Strings YAML would otherwise read as other types.
            Just("true".to_string()),
            Just("123".to_string()),
            Just("~".to_string()),
            Just("null".to_string()),
            ".{0,20}",
        ]
    }

    fn machine_state() -> impl Strategy<Value = PhaseMachineState> {
        let change = (name(), name(), any::<u64>(), name()).prop_map(|(from, to, step, reason)| {
            PhaseChange {
                from,
                to,
                step,
                reason,
            }
        });
        (name(), any::<u64>(), prop::collection::vec(change, 0..8)).prop_map(
            |(current, phase_steps, history)| PhaseMachineState {
                current,
                phase_steps,
                history,
            },
        )
    }

    proptest! {
        #[test]
        fn machine_state_survives_a_yaml_round_trip(st in machine_state()) {
            let yaml = serde_yaml_ng::to_string(&st).unwrap();
            let back: PhaseMachineState = serde_yaml_ng::from_str(&yaml).unwrap();
            prop_assert_eq!(back, st);
        }
    }
}
