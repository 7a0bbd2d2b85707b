//! Tools (actions a team adds for the model): the trait a plugin implements and the
//! macro that exports it.

use serde_json::Value;

use crate::tool_bindings as wit;
use crate::ActionResult;

/// What the model is offered.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    /// Tool name (lowercase, `_`-separated); must not be a built-in action's name.
    pub name: String,
    /// What it does and when to use it (the model reads this).
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// Phases where it is offered (`"*"`: every non-terminal phase).
    pub phases: Vec<String>,
}

/// What an invocation produced.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// Whether it succeeded.
    pub result: ActionResult,
    /// Shown to the model in `recent` (cut to fit the budget).
    pub output: String,
}

/// What a tool plugin implements; export it with [`crate::export_tool!`].
pub trait Tool {
    /// The tool as the model sees it.
    fn describe() -> ToolInfo;
    /// Runs the tool with the model's arguments (a JSON object the host has validated
    /// against the whole schema of [`Tool::describe`]). `Err` is an error message for
    /// the model.
    fn invoke(args: Value) -> Result<ToolOutput, String>;
}

/// [`Tool::describe`] in the contract's types. Used by [`crate::export_tool!`].
#[doc(hidden)]
pub fn __tool_describe<T: Tool>() -> wit::ToolInfo {
    let info = T::describe();
    wit::ToolInfo {
        name: info.name,
        description: info.description,
        parameters_json: info.parameters.to_string(),
        phases: info.phases,
    }
}

/// [`Tool::invoke`] over the contract's JSON text. Used by [`crate::export_tool!`].
#[doc(hidden)]
pub fn __tool_invoke<T: Tool>(arguments_json: &str) -> Result<wit::ToolOutput, String> {
    let args = serde_json::from_str(arguments_json).map_err(|e| format!("arguments JSON: {e}"))?;
    let out = T::invoke(args)?;
    Ok(wit::ToolOutput {
        result: out.result,
        output: out.output,
    })
}

/// Exports a type implementing [`Tool`] as the plugin's `tool` world.
#[macro_export]
macro_rules! export_tool {
    ($ty:ty) => {
        #[doc(hidden)]
        pub struct __AgentforgeTool;

        impl $crate::tool_bindings::Guest for __AgentforgeTool {
            fn describe() -> $crate::tool_bindings::ToolInfo {
                $crate::__tool_describe::<$ty>()
            }

            fn invoke(
                arguments_json: ::std::string::String,
            ) -> ::std::result::Result<$crate::tool_bindings::ToolOutput, ::std::string::String>
            {
                $crate::__tool_invoke::<$ty>(&arguments_json)
            }
        }

        $crate::tool_bindings::__export_tool_world!(__AgentforgeTool);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T;

    impl Tool for T {
        fn describe() -> ToolInfo {
            ToolInfo {
                name: "t".into(),
                description: "d".into(),
                parameters: serde_json::json!({"type": "object"}),
                phases: vec!["*".into()],
            }
        }

        fn invoke(args: Value) -> Result<ToolOutput, String> {
            Ok(ToolOutput {
                result: ActionResult::Success,
                output: args["x"].to_string(),
            })
        }
    }

    #[test]
    fn describe_and_invoke_cross_as_json() {
        assert_eq!(
            __tool_describe::<T>().parameters_json,
            r#"{"type":"object"}"#
        );
        assert_eq!(__tool_invoke::<T>(r#"{"x":1}"#).unwrap().output, "1");
        let e = __tool_invoke::<T>("{").unwrap_err();
        assert!(e.starts_with("arguments JSON: "), "{e}");
    }
}
