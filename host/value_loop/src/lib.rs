//! The value loop's core (seed 002, issue 12): what a sprint is, what bounds it, how its
//! value is measured and what it does next. Pure: no I/O, no model calls, no clock.
//!
//! - [`state`]: the sprint's one state file (tasks, verifications with their failure
//!   history, VRC history, pause, counters), versioned.
//! - [`limits`]: every recovery path's bound. The hard ceilings are constants; a
//!   configuration may lower a bound, never raise it, and the [`Limits`] a sprint runs
//!   with are fixed before it starts (nothing in the loop can change them).
//! - [`measure`]: the value a sprint has, measured from verified state only
//!   (verifications passing, acceptance criteria proven, a VRC score backed by passing
//!   verifications). Progress is a rise of that measure, never an action's own report.
//! - [`decide`](mod@decide): the decision engine, a pure function from state to the next action,
//!   with the seed's priorities and the bounds above.
//! - [`manage_task`]: the deterministic guardrails every plan mutation passes.
//! - [`reports`]: the report tools each role answers with, typed and checked, and how they
//!   change the state: the loop's (task complete, eval finding, VRC, triage, course
//!   correction, human action, research) and the pre-loop's (vision validation,
//!   discovery, critique) and the QC author's `register_verification`.
//! - [`tool_specs`]: the JSON Schema of every report tool and of `manage_task`, as the
//!   model is shown them, kept in step with the types that parse the calls.
//! - [`render`]: IMPLEMENTATION_PLAN.md, VALUE_CHECKLIST.md and DELIVERY_REPORT.md from state.
//! - [`monitor`]: the process monitor's metrics and GREEN / YELLOW / RED thresholds.
//! - [`features`]: the second policy on the same state and bounds, seed 003's feature
//!   list (initializer -> coding -> tester per feature, the retry rule): `features.json`
//!   checked at the boundary, its pure decision function, its progress view and report.
//!
//! The host (a later crate) runs each decision's role as a task of the stateless
//! executor, measures the outcome and records it; this crate decides and judges.

#![deny(missing_docs)]

pub mod decide;
pub mod features;
pub mod limits;
pub mod manage_task;
pub mod measure;
pub mod monitor;
pub mod render;
pub mod reports;
pub mod state;
pub mod tool_specs;

pub use decide::{decide, Decision, LoopAction, StopReason};
pub use limits::{Limits, LimitsError};
pub use measure::ValueMeasure;
pub use state::SprintState;
pub use tool_specs::{tool_spec, ToolSpecJson};
