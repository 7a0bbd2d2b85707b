//! The built-in plugins: built from `plugins/` for `wasm32-wasip2` by this crate's build
//! script and embedded, so every run has its task types, extractors, gates and guards with
//! nothing to install. Only this crate runs the WASM build; the crates that do not embed
//! the built-ins (core, loops, context, store, providers, plugin-host) build without it.

include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));
