//! Host bindings, one module per supported API version of `wit/plugin.wit`.
//!
//! The current version (0.3.0) is bound from `wit/`; each older version the host still
//! runs from its frozen snapshot in `wit/snapshots/<version>/`. A plugin's manifest says
//! which version it was built against (`api`), and the loader picks that version's world
//! (as Zed's extension host does): an old plugin keeps working unchanged, and its calls
//! are adapted to the host's types in [`super::kinds`].
//!
//! 0.2.0's `types` interface is 0.3.0's unchanged, so its bindings use 0.3.0's Rust types
//! (`with`; wasmtime checks the component's types structurally): only its worlds' own
//! records and the `extract` call need adapting.

/// `agentforge:plugin@0.3.0`, the current contract.
pub(crate) mod v0_3 {
    /// The `extractor` world, and the shared `types` and `host` interfaces.
    pub(crate) mod extractor {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "agentforge:plugin/extractor@0.3.0",
        });
    }

    /// The `gate` world.
    pub(crate) mod gate {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "agentforge:plugin/gate@0.3.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `guard` world.
    pub(crate) mod guard {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "agentforge:plugin/guard@0.3.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `context-schema` world.
    pub(crate) mod schema {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "agentforge:plugin/context-schema@0.3.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `tool` world.
    pub(crate) mod tool {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "agentforge:plugin/tool@0.3.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    pub(crate) use extractor::agentforge::plugin::{host, types};
}

/// `agentforge:plugin@0.2.0`, frozen: every world, `types` shared with 0.3.0.
pub(crate) mod v0_2 {
    /// The `extractor` world, and the shared `types` and `host` interfaces.
    pub(crate) mod extractor {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.2.0",
            world: "agentforge:plugin/extractor@0.2.0",
            with: {
                "agentforge:plugin/types": crate::bindings::v0_3::extractor::agentforge::plugin::types,
            },
        });
    }

    /// The `gate` world.
    pub(crate) mod gate {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.2.0",
            world: "agentforge:plugin/gate@0.2.0",
            with: {
                "agentforge:plugin/types": crate::bindings::v0_3::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `guard` world.
    pub(crate) mod guard {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.2.0",
            world: "agentforge:plugin/guard@0.2.0",
            with: {
                "agentforge:plugin/types": crate::bindings::v0_3::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `context-schema` world.
    pub(crate) mod schema {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.2.0",
            world: "agentforge:plugin/context-schema@0.2.0",
            with: {
                "agentforge:plugin/types": crate::bindings::v0_3::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `tool` world.
    pub(crate) mod tool {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.2.0",
            world: "agentforge:plugin/tool@0.2.0",
            with: {
                "agentforge:plugin/types": crate::bindings::v0_3::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    pub(crate) use extractor::agentforge::plugin::host;
}

/// `agentforge:plugin@0.1.0`, frozen: extractors, gates and guards built against it.
pub(crate) mod v0_1 {
    /// The `extractor` world, and the shared `types` and `host` interfaces.
    pub(crate) mod extractor {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.1.0",
            world: "agentforge:plugin/extractor@0.1.0",
        });
    }

    /// The `gate` world.
    pub(crate) mod gate {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.1.0",
            world: "agentforge:plugin/gate@0.1.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    /// The `guard` world.
    pub(crate) mod guard {
        wasmtime::component::bindgen!({
            path: "../../wit/snapshots/0.1.0",
            world: "agentforge:plugin/guard@0.1.0",
            with: {
                "agentforge:plugin/types": super::extractor::agentforge::plugin::types,
                "agentforge:plugin/host": super::extractor::agentforge::plugin::host,
            },
        });
    }

    pub(crate) use extractor::agentforge::plugin::{host, types};
}
