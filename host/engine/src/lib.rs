//! AgentForge's step executor: one stateless step after another, each a fresh
//! two-message model call over context rebuilt from verified state, with the
//! configuration ([`config`]) that wires providers, plugins, budgets and checks.

pub mod config;
/// Registries filled on first use (moved to `agentforge-core`, which the task-type
/// registry also uses).
pub use agentforge_core::deferred;
pub mod embedding;
pub mod executor;
pub mod git;
pub mod learning;
pub mod mcp;
pub mod session;
pub mod task_git;
