//! AgentForge host library: the stateless step executor and everything it stands on.
//!
//! See `ARCHITECTURE.md` at the workspace root for the code map.

pub mod budget;
pub mod commands;
pub mod config;
pub mod context;
pub mod executor;
pub mod extract;
pub mod fault;
pub mod focus;
pub mod gates;
pub mod guards;
pub mod loops;
pub mod phases;
pub mod plugins;
pub mod prompts;
pub mod providers;
pub mod sanitize;
pub mod scaffold;
pub mod schemas;
pub mod secrets;
pub mod state_store;
pub mod task;
pub mod tools;
pub mod working_memory;
