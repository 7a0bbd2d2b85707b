//! The wasmtime configuration of the plugin engine, in one place: the runtime builds its
//! engine from it, and `agentforge-builtins`' build script (which includes this file)
//! precompiles the built-in plugins with it. Compiled code is only loadable by an engine
//! with the same settings, so the two cannot be configured apart.

/// The plugin engine's configuration: the component model, fuel (a deterministic CPU
/// budget per call) and epoch interruption (the wall-clock deadline).
pub fn engine_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true);
    config
}
