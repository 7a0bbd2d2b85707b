//! Tool plugins: an action a team adds for the model (`tool` world).
//!
//! The description (name, what it does, its argument schema, the phases it is offered
//! in) is asked once at load and validated; each invocation runs in a fresh store with
//! only the capabilities the project granted. The host checks the arguments against
//! the schema's `required` properties and their top-level types before calling, so a
//! malformed call is fed back to the model without entering the plugin.

use std::sync::Arc;

use serde_json::Value;

use super::wit::ActionResult as WitResult;
use super::{
    output, wrong_instance, Inner, Instance, PluginError, PluginLoadError, MAX_RETURN_BYTES,
};
use agentforge_context::schemas::builtin_action;
use agentforge_core::model::ToolSpec;
use agentforge_core::state::ActionResult;
use agentforge_store::tools::{ExtraTool, ToolOutcome};

/// Names the host's own tools use besides the actions: a plugin may not take them.
/// `set_field` is how guards see a state write: a tool of that name would pass for one.
const RESERVED: &[&str] = &["plan", "finish_subtask", "invalid_reply", "set_field"];

/// A tool's description, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// Action name.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON schema of its arguments (an object schema).
    pub parameters: Value,
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
    if parameters.get("type").and_then(Value::as_str) != Some("object") {
        return Err(invalid(format!(
            "tool `{}`: parameters must be a JSON schema with \"type\": \"object\"",
            d.name
        )));
    }
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
        phases: d.phases,
    })
}

/// Checks `args` against the object schema `schema`: an object, with every `required`
/// property, each property of a declared top-level `type` having that type.
pub fn check_arguments(schema: &Value, args: &Value) -> Result<(), String> {
    let Some(obj) = args.as_object() else {
        return Err("arguments must be a JSON object".to_string());
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !obj.contains_key(req) {
            return Err(format!("missing required argument `{req}`"));
        }
    }
    for (key, value) in obj {
        let Some(prop) = props.and_then(|p| p.get(key)) else {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                return Err(format!("unknown argument `{key}`"));
            }
            continue;
        };
        let Some(ty) = prop.get("type").and_then(Value::as_str) else {
            continue;
        };
        let ok = match ty {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if !ok {
            return Err(format!("argument `{key}` must be of type {ty}"));
        }
    }
    Ok(())
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
            Instance::Tool(x) => {
                let r = x.call_invoke(&mut *s, &args)?;
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
        check_arguments(&self.info.parameters, args)
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
    fn arguments_are_checked_against_required_and_types() {
        let schema = json!({
            "type": "object",
            "properties": {"check": {"type": "string"}, "times": {"type": "integer"}},
            "required": ["check"],
            "additionalProperties": false
        });
        assert_eq!(check_arguments(&schema, &json!({"check": "tests"})), Ok(()));
        assert!(check_arguments(&schema, &json!({}))
            .unwrap_err()
            .contains("missing required argument `check`"));
        assert!(
            check_arguments(&schema, &json!({"check": "t", "times": "3"}))
                .unwrap_err()
                .contains("`times` must be of type integer")
        );
        assert!(check_arguments(&schema, &json!({"check": "t", "x": 1}))
            .unwrap_err()
            .contains("unknown argument `x`"));
        assert!(check_arguments(&schema, &json!([1])).is_err());
    }
}
