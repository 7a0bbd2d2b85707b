//! Write AgentForge plugins without touching wit-bindgen.
//!
//! An extractor is a type implementing [`Extractor`] plus one [`export_extractor!`] line;
//! a table of regex rules is a [`RuleSet`], and [`rule_extractor!`] turns one into a
//! whole plugin:
//!
//! ```ignore
//! use agentforge_plugin_sdk::{rule_extractor, Category, Rule, RuleSet};
//!
//! rule_extractor!(handles: ["*"], rules: RuleSet::new(vec![
//!     Rule::each(r"(?m)^FAILED (\S+)", Category::Error, "test {1} fails").limit(5),
//! ]));
//! ```
//!
//! A gate is a type implementing [`Gate`] plus [`export_gate!`]; a guard one implementing
//! [`Guard`] plus [`export_guard!`]. [`log`] and [`read_file`] call the host.
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` is a component
//! for the `agentforge:plugin@0.1.0` contract (`wit/plugin.wit`). Every world's bindings
//! are compiled in, but only the world a plugin exports (through its macro) ends up in its
//! component: the others' type sections are unreferenced and dropped at link time.

#[cfg(feature = "extractor")]
mod rules;

#[cfg(feature = "extractor")]
pub use rules::{Rule, RuleSet};

/// The shared `types` and `host` interfaces, generated once so every world (and plugin
/// code) uses the same Rust types. Implementation detail.
#[doc(hidden)]
pub mod common_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package agentforge:sdk;
            world common {
                import agentforge:plugin/types@0.1.0;
                import agentforge:plugin/host@0.1.0;
            }",
        world: "agentforge:sdk/common",
        generate_all,
    });
}

/// Generated bindings of the `extractor` world. Implementation detail of the macros.
#[cfg(feature = "extractor")]
#[doc(hidden)]
pub mod extractor_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/extractor@0.1.0",
        with: {
            "agentforge:plugin/types@0.1.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.1.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_extractor_world",
        default_bindings_module: "agentforge_plugin_sdk::extractor_bindings",
    });
}

/// Generated bindings of the `gate` world. Implementation detail.
#[cfg(feature = "gate")]
#[doc(hidden)]
// The generated export shims take the WIT function's flattened parameters.
#[allow(clippy::too_many_arguments)]
pub mod gate_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/gate@0.1.0",
        with: {
            "agentforge:plugin/types@0.1.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.1.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_gate_world",
        default_bindings_module: "agentforge_plugin_sdk::gate_bindings",
    });
}

/// Generated bindings of the `guard` world. Implementation detail.
#[cfg(feature = "guard")]
#[doc(hidden)]
// The generated export shims take the WIT function's flattened parameters.
#[allow(clippy::too_many_arguments)]
pub mod guard_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/guard@0.1.0",
        with: {
            "agentforge:plugin/types@0.1.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.1.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_guard_world",
        default_bindings_module: "agentforge_plugin_sdk::guard_bindings",
    });
}

mod kinds;
pub use kinds::*;

pub use common_bindings::agentforge::plugin::host::LogLevel;
pub use common_bindings::agentforge::plugin::types::{
    ActionResult, Decision, Fact, FactCategory as Category, Verdict,
};

/// Writes a line to the plugin's log, kept by the host for this call.
pub fn log(level: LogLevel, message: &str) {
    common_bindings::agentforge::plugin::host::log(level, message);
}

/// Reads a workspace file (path relative to the workspace root). Needs the `read`
/// capability: requested in `plugin.toml` (`[capabilities] read = ["src/**/*.rs"]`) and
/// granted by the project; otherwise, and for paths leaving the workspace, the error says
/// why it was refused.
pub fn read_file(path: &str) -> Result<String, String> {
    common_bindings::agentforge::plugin::host::read_file(path)
}

/// One tool output handed to an extractor.
#[derive(Debug, Clone)]
pub struct Input {
    /// The tool or check name (e.g. `tests`).
    pub tool: String,
    /// Its output (stdout and stderr).
    pub output: String,
    /// Whether the action succeeded.
    pub result: ActionResult,
    /// The step that ran it.
    pub step: u64,
}

/// A fact with full confidence about `tool`'s output.
pub fn fact(category: Category, statement: impl Into<String>, tool: &str) -> Fact {
    Fact {
        category,
        statement: statement.into(),
        confidence: 1.0,
        source: tool.to_string(),
    }
}

/// What an extractor plugin implements; export it with [`export_extractor!`].
#[cfg(feature = "extractor")]
pub trait Extractor {
    /// Tool or check names whose output this extractor reads; `"*"` means any.
    fn handles() -> Vec<String>;
    /// Facts drawn from the output; empty when nothing matched.
    fn extract(input: Input) -> Vec<Fact>;
}

/// Exports a type implementing [`Extractor`] as the plugin's `extractor` world.
#[cfg(feature = "extractor")]
#[macro_export]
macro_rules! export_extractor {
    ($ty:ty) => {
        #[doc(hidden)]
        pub struct __AgentforgeExtractor;

        impl $crate::extractor_bindings::Guest for __AgentforgeExtractor {
            fn handles() -> ::std::vec::Vec<::std::string::String> {
                <$ty as $crate::Extractor>::handles()
            }

            fn extract(
                tool: ::std::string::String,
                output: ::std::string::String,
                result: $crate::ActionResult,
                step: u64,
            ) -> ::std::vec::Vec<$crate::Fact> {
                <$ty as $crate::Extractor>::extract($crate::Input {
                    tool,
                    output,
                    result,
                    step,
                })
            }
        }

        $crate::extractor_bindings::__export_extractor_world!(__AgentforgeExtractor);
    };
}

/// A whole extractor plugin from a rule table: `handles` lists the tool names (`"*"` for
/// any), `rules` is an expression building a [`RuleSet`] (built on first use).
#[cfg(feature = "extractor")]
#[macro_export]
macro_rules! rule_extractor {
    (handles: [$($tool:expr),* $(,)?], rules: $rules:expr $(,)?) => {
        #[doc(hidden)]
        pub struct __AgentforgeRules;

        impl $crate::Extractor for __AgentforgeRules {
            fn handles() -> ::std::vec::Vec<::std::string::String> {
                ::std::vec![$(::std::string::String::from($tool)),*]
            }

            fn extract(input: $crate::Input) -> ::std::vec::Vec<$crate::Fact> {
                // Compiled once per instance: a host that keeps the instance between
                // calls (`reuse_instance`) pays for the regexes once.
                static RULES: ::std::sync::OnceLock<$crate::RuleSet> =
                    ::std::sync::OnceLock::new();
                RULES.get_or_init(|| $rules).extract(&input)
            }
        }

        $crate::export_extractor!(__AgentforgeRules);
    };
}
