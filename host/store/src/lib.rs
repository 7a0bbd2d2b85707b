//! AgentForge's disk and processes: task folders with atomic writes, the append-only
//! audit log and crash recovery ([`state_store`]), the confined workspace, bounded reads
//! and file actions with snapshots ([`tools`]), commands run in their own process group
//! with capped output ([`commands`]), and the secrets policy for their environment
//! ([`secrets`]).

pub mod commands;
pub mod flush;
mod parsed;
pub mod rewind;
pub mod secrets;
pub mod state_store;
pub mod tools;
