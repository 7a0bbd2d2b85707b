//! AgentForge's domain, with no I/O: what a task is ([`task`]), what a step may do
//! ([`actions`], the one table of built-in actions), what the model is asked and answers
//! ([`model`], [`text_mode`]), the state a task carries and the record of a step
//! ([`state`]), and the pure policies every step applies: the phase graph ([`phases`]),
//! the focus tree ([`focus`]), the adaptive budget ([`budget`]), the price of model calls
//! ([`cost`]), working memory,
//! fact extraction rules ([`extract`]), gate and guard contracts ([`gates`], [`guards`]).
//!
//! Everything that touches disk, network or WASM lives in the crates above this one
//! (see `ARCHITECTURE.md`).

pub mod actions;
pub mod args;
pub mod budget;
pub mod command;
pub mod cost;
pub mod deferred;
pub mod edit;
pub mod extract;
pub mod fault;
pub mod focus;
pub mod gates;
pub mod guards;
pub mod hash;
pub mod model;
pub mod phases;
pub mod sanitize;
pub mod state;
pub mod task;
pub mod text;
pub mod text_mode;
pub mod trace;
pub mod trajectory;
pub mod working_memory;
