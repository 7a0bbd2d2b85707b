//! The `agentforge` command's library face: the host's crates under the module names the
//! binary, the end-to-end tests (`tests/`) and the benches use. Each module is one of the
//! crates below (see `ARCHITECTURE.md`); nothing is defined here but [`scaffold`],
//! [`prompt_task`] and [`report`] (`agentforge show` and `agentforge report`).

/// mimalloc instead of glibc's malloc for the binary, the tests and the benches (all link
/// this library). A step allocates and frees many small values (parsed records, rendered
/// sections, JSON trees); under glibc, the first large allocation after them consolidates
/// its fast bins (`malloc_consolidate`), which the step bench measured at a seventh of a
/// step's CPU time, most of it under a guard input's JSON serialization.
///
/// Built without transparent huge pages (`no_thp`): mimalloc otherwise asks the kernel
/// for them on its arenas, and the first touch of each 2 MiB of fresh or purged memory
/// then zeroes the whole huge page (`clear_page_erms`, 8% of the step bench's samples).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub use agentforge_context as context;
pub use agentforge_context::{prompts, schemas};
pub use agentforge_core::{
    actions, budget, command, cost, extract, fault, focus, gates, guards, hash, model, phases,
    sanitize, task, text, working_memory,
};
pub use agentforge_engine::{config, executor, learning, mcp, session, task_git};
pub use agentforge_fleet as fleet;
pub use agentforge_graph as graph;
pub use agentforge_loops as loops;
pub use agentforge_plugin_host as plugins;
pub use agentforge_providers as providers;
pub use agentforge_sprint as sprint;
pub use agentforge_store::{commands, secrets};
pub use agentforge_value_loop as value_loop;

/// Task state and its store: the domain types (`agentforge_core::state`) and the task
/// folders that persist them (`agentforge_store::state_store`).
pub mod state_store {
    pub use agentforge_core::state::*;
    pub use agentforge_store::state_store::*;
}

/// The built-in actions (`agentforge_core::actions`) and the workspace they run in
/// (`agentforge_store::tools`).
pub mod tools {
    pub use agentforge_core::actions::*;
    pub use agentforge_store::tools::*;
}

pub mod prompt_task;
pub mod report;
pub mod scaffold;
