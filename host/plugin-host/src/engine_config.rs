//! The wasmtime configuration of the plugin engines, in one place: the runtime builds its
//! engines from it, and `agentforge-builtins`' build script (which includes this file)
//! precompiles the built-in plugins with it. Compiled code is only loadable by an engine
//! with the same settings, so the two cannot be configured apart.

/// Which plugins an engine runs: it decides whether their code counts fuel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trust {
    /// The built-in plugins, embedded in the host from this repository's own sources:
    /// bounded by their memory limit and the wall-clock deadline, not metered. Counting
    /// fuel costs about a sixth of an extractor call (a counter updated in every block
    /// of a hot loop), and the deadline already stops a built-in that runs away.
    Builtin,
    /// Every other plugin: fuel is a deterministic CPU budget per call, on top of the
    /// deadline, so a third-party plugin's budget does not depend on how busy the
    /// machine is.
    Sandboxed,
}

/// The configuration of the engine for `trust`: the component model, epoch interruption
/// (the wall-clock deadline) and, for sandboxed plugins, fuel (a CPU budget per call).
pub fn engine_config(trust: Trust) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(trust == Trust::Sandboxed)
        .epoch_interruption(true);
    config
}
