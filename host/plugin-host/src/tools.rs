//! Tool plugins: an action a team adds for the model (`tool` world).
//!
//! The description (name, what it does, its argument schema, the phases it is offered
//! in) is asked once at load and validated; each invocation runs in a fresh store with
//! only the capabilities the project granted. The schema is checked against the JSON
//! Schema meta-schema at load; every call's arguments are validated against it (the one
//! validator of `agentforge_core::args`: types, `required`, `enum`, `pattern`, nested
//! objects) before the plugin runs, so a malformed call is fed back to the model
//! without entering the plugin.

use std::sync::Arc;

use serde_json::Value;

use super::bindings::v0_2::tool as v0_2;
use super::bindings::v0_3::tool::{ToolInfo as WitToolInfo, ToolOutput};
use super::wit::ActionResult as WitResult;
use super::{
    output, wrong_instance, Inner, Instance, PluginError, PluginLoadError, MAX_RETURN_BYTES,
};
use agentforge_core::actions::builtin_action;
use agentforge_core::args::ArgumentSchema;
use agentforge_core::model::ToolSpec;
use agentforge_core::state::ActionResult;
use agentforge_store::tools::{ExtraTool, ToolOutcome};

/// Names the host's own tools use besides the actions: a plugin may not take them.
/// `set_field` is how guards see a state write: a tool of that name would pass for one.
const RESERVED: &[&str] = &["plan", "finish_subtask", "invalid_reply", "set_field"];

/// A tool's description, validated.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    /// Action name.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON schema of its arguments (an object schema).
    pub parameters: Value,
    /// `parameters`, compiled: what every call is checked against.
    pub arguments: Arc<ArgumentSchema>,
    /// Phases it is offered in (`*`: all non-terminal ones).
    pub phases: Vec<String>,
}

/// Asks the plugin for its description and checks it.
pub(super) fn describe(inner: &Inner) -> Result<ToolInfo, PluginLoadError> {
    let invalid = |message: String| PluginLoadError::Invalid {
        plugin: inner.name.clone(),
        message,
    };
    let d = inner
        .call(|x, s| match x {
            Instance::Tool(x) => x.call_describe(s),
            // 0.2.0's tool-info has the same fields.
            Instance::ToolV0_2(x) => x.call_describe(s).map(|d: v0_2::ToolInfo| WitToolInfo {
                name: d.name,
                description: d.description,
                parameters_json: d.parameters_json,
                phases: d.phases,
            }),
            _ => Err(wrong_instance()),
        })
        .map_err(PluginLoadError::Call)?;
    let valid_name = d.name.len() <= 64
        && d.name.starts_with(|c: char| c.is_ascii_lowercase())
        && d.name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid_name {
        return Err(invalid(format!(
            "tool name `{}` must be 1-64 lowercase letters, digits and `_`, starting with a letter",
            d.name
        )));
    }
    if builtin_action(&d.name).is_some() || RESERVED.contains(&d.name.as_str()) {
        return Err(invalid(format!(
            "tool name `{}` is a built-in action; choose another name",
            d.name
        )));
    }
    let parameters: Value = serde_json::from_str(&d.parameters_json)
        .map_err(|e| invalid(format!("tool `{}`: parameters are not JSON: {e}", d.name)))?;
    let arguments = ArgumentSchema::new(parameters.clone())
        .map_err(|e| invalid(format!("tool `{}`: parameters: {e}", d.name)))?;
    if d.phases.is_empty() {
        return Err(invalid(format!(
            "tool `{}`: `phases` is empty, so it would never be offered (use [\"*\"] for every phase)",
            d.name
        )));
    }
    if d.description.trim().is_empty() {
        return Err(invalid(format!(
            "tool `{}`: the description is empty; the model needs it to know when to call it",
            d.name
        )));
    }
    Ok(ToolInfo {
        name: d.name,
        description: d.description,
        parameters,
        arguments: Arc::new(arguments),
        phases: d.phases,
    })
}

/// Checks `args` against a tool's compiled schema: an object, every problem named.
pub fn check_arguments(schema: &ArgumentSchema, args: &Value) -> Result<(), String> {
    let Some(obj) = args.as_object() else {
        return Err(format!(
            "arguments must be a JSON object, got {}",
            agentforge_core::args::json_type(args)
        ));
    };
    schema.check(obj).map_err(|p| p.join("; "))
}

/// A tool plugin behind [`ExtraTool`].
#[derive(Clone)]
pub struct WasmTool {
    inner: Arc<Inner>,
    info: ToolInfo,
}

impl WasmTool {
    pub(super) fn new(inner: Arc<Inner>, info: ToolInfo) -> WasmTool {
        WasmTool { inner, info }
    }

    /// The description the plugin gave.
    pub fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// Runs the tool: `Ok(Err(message))` is the plugin's own error for the model,
    /// `Err` a failed call (trap, limit, contract).
    pub fn try_invoke(&self, args: &Value) -> Result<Result<ToolOutcome, String>, PluginError> {
        let args = args.to_string();
        let r = self.inner.call(|x, s| match x {
            Instance::Tool(_) | Instance::ToolV0_2(_) => {
                let r = match x {
                    Instance::Tool(x) => x.call_invoke(&mut *s, &args)?,
                    // 0.2.0's tool-output has the same fields and types.
                    Instance::ToolV0_2(x) => {
                        x.call_invoke(&mut *s, &args)?
                            .map(|o: v0_2::ToolOutput| ToolOutput {
                                result: o.result,
                                output: o.output,
                            })
                    }
                    _ => return Err(wrong_instance()),
                };
                let size = match &r {
                    Ok(o) => o.output.len(),
                    Err(e) => e.len(),
                };
                output::check_returned("returned output", size, MAX_RETURN_BYTES)?;
                Ok(r)
            }
            _ => Err(wrong_instance()),
        })?;
        Ok(r.map(|o| ToolOutcome {
            result: match o.result {
                WitResult::Success => ActionResult::Success,
                WitResult::Failure => ActionResult::Failure,
                WitResult::Partial => ActionResult::Partial,
                WitResult::Skipped => ActionResult::Skipped,
            },
            output: agentforge_core::sanitize::text(&o.output).into_owned(),
            completes_task: None,
        })
        .map_err(|e| super::clean_line(&e, 2000)))
    }
}

impl ExtraTool for WasmTool {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.info.name.clone(),
            description: self.info.description.clone(),
            input_schema: self.info.parameters.clone(),
        }
    }

    fn offered_in(&self, phase: &str) -> bool {
        self.info.phases.iter().any(|p| p == "*" || p == phase)
    }

    fn check_arguments(&self, args: &Value) -> Result<(), String> {
        check_arguments(&self.info.arguments, args)
    }

    fn invoke(&self, args: &Value) -> Result<ToolOutcome, String> {
        match self.try_invoke(args) {
            Ok(Ok(o)) => Ok(o),
            Ok(Err(message)) => Err(format!("{}: {message}", self.info.name)),
            Err(e) => {
                eprintln!("warning: {e}");
                Err(format!("tool plugin failed: {e}"))
            }
        }
    }

    fn source(&self) -> String {
        format!("plugin {}", self.inner.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_checked_against_the_whole_schema() {
        let schema = ArgumentSchema::new(json!({
            "type": "object",
            "properties": {
                "check": {"type": "string", "enum": ["tests", "lint"]},
                "times": {"type": "integer"}
            },
            "required": ["check"],
            "additionalProperties": false
        }))
        .unwrap();
        assert_eq!(check_arguments(&schema, &json!({"check": "tests"})), Ok(()));
        let e = check_arguments(&schema, &json!({})).unwrap_err();
        assert!(e.contains("missing required field `check`"), "{e}");
        let e = check_arguments(&schema, &json!({"check": "tests", "times": "3"})).unwrap_err();
        assert!(e.contains("`times` must be an integer"), "{e}");
        let e = check_arguments(&schema, &json!({"check": "tests", "x": 1})).unwrap_err();
        assert!(e.contains("unknown field `x`"), "{e}");
        // `enum` is enforced, not only the top-level type.
        let e = check_arguments(&schema, &json!({"check": "deploy"})).unwrap_err();
        assert!(e.contains("`check` must be one of"), "{e}");
        let e = check_arguments(&schema, &json!([1])).unwrap_err();
        assert!(e.contains("must be a JSON object, got an array"), "{e}");
    }
}
