//! AgentForge's disk and processes: task folders with atomic writes, the append-only
//! audit log and crash recovery ([`state_store`]), the confined workspace, bounded reads
//! and file actions with snapshots ([`tools`]), step trajectories ([`trajectory`]),
//! commands run in their own process group with capped output ([`commands`]), the
//! secrets policy for their environment ([`secrets`]), and the project's instruction
//! files (AGENTS.md, CLAUDE.md, `.agentforge/instructions.md`: [`instructions`]).

pub mod commands;
mod exchange;
pub mod flush;
pub mod instructions;
mod parsed;
pub mod rewind;
pub mod secrets;
pub mod state_store;
pub mod tools;
pub mod trajectory;
mod yaml_json;
