//! Write AgentForge plugins without touching wit-bindgen.
//!
//! Each plugin kind (a world of `wit/plugin.wit`) is a trait to implement plus one export
//! macro, behind a cargo feature of the same name (all on by default):
//!
//! | kind | trait | macro | feature |
//! | --- | --- | --- | --- |
//! | extractor (tool output -> facts) | [`Extractor`] | [`export_extractor!`], or [`rule_extractor!`] from a [`RuleSet`] | `extractor` |
//! | gate (check run -> verdict) | [`Gate`] | [`export_gate!`] | `gate` |
//! | guard (action -> allow/warn/deny) | [`Guard`] | [`export_guard!`] | `guard` |
//! | context-schema (a task type) | [`Schema`] | [`export_schema!`] | `schema` |
//! | tool (an action for the model) | [`Tool`] | [`export_tool!`] | `tool` |
//!
//! The value loop's roles (task types that show a brief) share their schema in [`role`]
//! (feature `schema`); guards read the task state they receive with [`state`] (feature
//! `guard`).
//!
//! A table of regex rules is a whole extractor:
//!
//! ```ignore
//! use agentforge_plugin_sdk::{rule_extractor, Category, Rule, RuleSet};
//!
//! rule_extractor!(handles: ["*"], rules: RuleSet::new(vec![
//!     Rule::each(r"(?m)^FAILED (\S+)", Category::Error, "test {1} fails").limit(5),
//! ]));
//! ```
//!
//! Any kind may call the host: [`log`], [`config`] (the plugin's configuration),
//! [`read_file`] and [`run_check`] (both capability-gated). JSON crosses the contract as
//! text; the SDK parses and prints it with the re-exported [`serde_json`].
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` is a component
//! for the `agentforge:plugin@0.3.0` contract (`wit/plugin.wit`; the plugin's
//! `plugin.toml` says `api = "0.3.0"`). Every world's bindings are compiled in, but only
//! the world a plugin exports (through its macro) ends up in its component: the others'
//! type sections are unreferenced and dropped at link time.

pub use serde_json;

// Replaces wasi-libc's byte-at-a-time `memcmp` in every plugin built with the SDK.
#[cfg(any(target_arch = "wasm32", test))]
mod memcmp;

#[cfg(feature = "extractor")]
mod rules;

#[cfg(feature = "extractor")]
pub use rules::{Rule, RuleSet};

#[cfg(feature = "extractor")]
pub mod edit;

/// The shared `types` and `host` interfaces, generated once so every world (and plugin
/// code) uses the same Rust types. Implementation detail.
#[doc(hidden)]
pub mod common_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package agentforge:sdk;
            world common {
                import agentforge:plugin/types@0.3.0;
                import agentforge:plugin/host@0.3.0;
            }",
        world: "agentforge:sdk/common",
        generate_all,
    });
}

/// Generated bindings of the `extractor` world. Implementation detail of the macros.
#[cfg(feature = "extractor")]
#[doc(hidden)]
// The generated export shim takes the `tool-call` record's flattened fields.
#[allow(clippy::too_many_arguments)]
pub mod extractor_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/extractor@0.3.0",
        with: {
            "agentforge:plugin/types@0.3.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.3.0": crate::common_bindings::agentforge::plugin::host,
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
        world: "agentforge:plugin/gate@0.3.0",
        with: {
            "agentforge:plugin/types@0.3.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.3.0": crate::common_bindings::agentforge::plugin::host,
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
        world: "agentforge:plugin/guard@0.3.0",
        with: {
            "agentforge:plugin/types@0.3.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.3.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_guard_world",
        default_bindings_module: "agentforge_plugin_sdk::guard_bindings",
    });
}

/// Generated bindings of the `context-schema` world. Implementation detail.
#[cfg(feature = "schema")]
#[doc(hidden)]
pub mod schema_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/context-schema@0.3.0",
        with: {
            "agentforge:plugin/types@0.3.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.3.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_schema_world",
        default_bindings_module: "agentforge_plugin_sdk::schema_bindings",
    });
}

/// Generated bindings of the `tool` world. Implementation detail.
#[cfg(feature = "tool")]
#[doc(hidden)]
pub mod tool_bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "agentforge:plugin/tool@0.3.0",
        with: {
            "agentforge:plugin/types@0.3.0": crate::common_bindings::agentforge::plugin::types,
            "agentforge:plugin/host@0.3.0": crate::common_bindings::agentforge::plugin::host,
        },
        pub_export_macro: true,
        export_macro_name: "__export_tool_world",
        default_bindings_module: "agentforge_plugin_sdk::tool_bindings",
    });
}

mod kinds;
pub use kinds::*;

#[cfg(feature = "schema")]
mod schema;
#[cfg(feature = "schema")]
#[doc(hidden)]
pub use schema::{__schema_build, __schema_describe};
#[cfg(feature = "schema")]
pub use schema::{remaining_issues, CurrentState, Schema, SchemaInfo};

#[cfg(feature = "schema")]
pub mod role;

#[cfg(feature = "guard")]
pub mod state;

#[cfg(feature = "tool")]
mod tool;
#[cfg(feature = "tool")]
#[doc(hidden)]
pub use tool::{__tool_describe, __tool_invoke};
#[cfg(feature = "tool")]
pub use tool::{Tool, ToolInfo, ToolOutput};

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

/// The plugin's configuration: the manifest's `[config]` table with the project's
/// `[plugins.config.<name>]` keys over it. Empty when there is none (or, defensively,
/// when the host's JSON is not an object).
pub fn config() -> serde_json::Map<String, serde_json::Value> {
    match serde_json::from_str(&common_bindings::agentforge::plugin::host::config()) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// A list of strings from `config` (`key = ["a", "b"]`, or one string `key = "a"`);
/// `None` when absent, or when it has another type (logged as a warning, so the plugin
/// falls back to its default rather than failing).
pub fn config_list(
    config: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<Vec<String>> {
    use serde_json::Value;
    match config.get(key)? {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) if items.iter().all(Value::is_string) => Some(
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        ),
        other => {
            log(
                LogLevel::Warn,
                &format!(
                    "config `{key}` must be a list of strings, not {other}; using the default"
                ),
            );
            None
        }
    }
}

/// Runs a check the task declares, by name (`tests`, `clippy`...), with the check's own
/// timeout and output cap. Needs the `checks` capability: requested in `plugin.toml`
/// (`[capabilities] checks = ["tests"]`) and granted by the project; otherwise the error
/// says why it was refused. The returned run has no `facts` (no extractor has read it).
pub fn run_check(name: &str) -> Result<CheckRun, String> {
    common_bindings::agentforge::plugin::host::run_check(name)
        .map(|run| kinds::__check_run(run, Vec::new()))
}

/// One tool output handed to an extractor.
#[derive(Debug, Clone)]
pub struct Input {
    /// The tool or check name (e.g. `tests`).
    pub tool: String,
    /// Its output: a check's stdout and stderr, an action's summary for the model.
    pub output: String,
    /// Whether the action succeeded.
    pub result: ActionResult,
    /// The step that ran it.
    pub step: u64,
    /// What the host knows of the action, as a JSON object whose `kind` names its shape
    /// (`"edit"` for `edit_file`, `replace_lines`, `write_file`: see [`Input::edit`] and
    /// `wit/plugin.wit`); `None` for checks and tools the host keeps no record of.
    pub details: Option<serde_json::Value>,
}

impl Input {
    /// An input without details (a check's output, a test's input).
    pub fn new(tool: &str, output: &str, result: ActionResult, step: u64) -> Input {
        Input {
            tool: tool.to_string(),
            output: output.to_string(),
            result,
            step,
            details: None,
        }
    }

    /// The edit record in [`Input::details`], when the host gave one (`kind` `"edit"`).
    /// A record that does not fit [`edit::Edit`] is logged and taken as absent.
    #[cfg(feature = "extractor")]
    pub fn edit(&self) -> Option<edit::Edit> {
        let details = self.details.as_ref()?;
        if details.get("kind").and_then(serde_json::Value::as_str) != Some("edit") {
            return None;
        }
        match serde_json::from_value(details.clone()) {
            Ok(e) => Some(e),
            Err(e) => {
                log(
                    LogLevel::Warn,
                    &format!("the host's edit details do not fit the SDK's shape: {e}"),
                );
                None
            }
        }
    }
}

/// The WIT `tool-call` as an [`Input`]: `details` parsed (text that is not JSON is
/// logged and dropped; the host always sends an object). Implementation detail of
/// [`export_extractor!`].
#[cfg(feature = "extractor")]
#[doc(hidden)]
pub fn __input(call: extractor_bindings::ToolCall) -> Input {
    let details = call
        .details
        .and_then(|d| match serde_json::from_str::<serde_json::Value>(&d) {
            Ok(v) => Some(v),
            Err(e) => {
                log(
                    LogLevel::Warn,
                    &format!("the host's details are not JSON ({e}); ignored"),
                );
                None
            }
        });
    Input {
        tool: call.tool,
        output: call.output,
        result: call.result,
        step: call.step,
        details,
    }
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
                call: $crate::extractor_bindings::ToolCall,
            ) -> ::std::vec::Vec<$crate::Fact> {
                <$ty as $crate::Extractor>::extract($crate::__input(call))
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
