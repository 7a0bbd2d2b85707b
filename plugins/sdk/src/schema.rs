//! Context schemas (task types): the trait a plugin implements and the macro that
//! exports it.

use serde_json::{Map, Value};

use crate::schema_bindings as wit;

/// What a task type is: its phases, budgets, prompts and default success criteria.
#[derive(Debug, Clone, Default)]
pub struct SchemaInfo {
    /// Task type name, as in `task.yaml` `task_type`.
    pub name: String,
    /// One line for `agentforge plugins list`.
    pub description: String,
    /// Token budgets this task type needs, by `[budget]` key (`total`, `current_state`,
    /// ...); the keys not named keep the project's values.
    pub budgets: Vec<(String, u32)>,
    /// The phase graph: `{"initial", "phases": [...], "transitions": [...]}`
    /// (docs/plugins.md has its fields and conditions). The host validates it at load.
    pub phase_graph: Value,
    /// Prompt templates (minijinja) as `(name, source)`: `name` is
    /// `<task_type>.<phase>.j2` or `<phase>.j2`. Empty: the host's templates serve.
    pub prompts: Vec<(String, String)>,
    /// Success criteria for tasks that list none.
    pub default_success_criteria: Vec<String>,
}

/// The task-specific `current_state` section a schema builds: a JSON object, plus
/// workspace files the host reads and inserts into it.
#[derive(Debug, Clone, Default)]
pub struct CurrentState {
    /// The section's JSON object.
    pub json: Map<String, Value>,
    /// Files to insert, as `(json pointer, workspace path)`: the host reads the file
    /// (confined to the workspace), numbers its lines and sets it at the pointer (e.g.
    /// `/file_content/content`); `null` when the file does not exist.
    pub files: Vec<(String, String)>,
}

impl CurrentState {
    /// An empty section.
    pub fn new() -> CurrentState {
        CurrentState::default()
    }

    /// Sets the top-level key `key` to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.json.insert(key.to_string(), value.into());
        self
    }

    /// Asks the host to insert workspace file `path` at JSON pointer `pointer`.
    pub fn file(&mut self, pointer: &str, path: &str) -> &mut Self {
        self.files.push((pointer.to_string(), path.to_string()));
        self
    }
}

/// What a context-schema plugin implements; export it with [`crate::export_schema!`].
pub trait Schema {
    /// The task type.
    fn describe() -> SchemaInfo;
    /// The `current_state` section for `task` (`task.yaml` as JSON) in its current
    /// `state` (`state.yaml` as JSON). An `Err` is shown to the model as the section.
    fn build(task: Value, state: Value) -> Result<CurrentState, String>;
}

/// [`Schema::describe`] in the contract's types. Used by [`crate::export_schema!`].
#[doc(hidden)]
pub fn __schema_describe<T: Schema>() -> wit::SchemaInfo {
    let info = T::describe();
    wit::SchemaInfo {
        name: info.name,
        description: info.description,
        budgets: info.budgets,
        phase_graph_json: info.phase_graph.to_string(),
        prompts: info
            .prompts
            .into_iter()
            .map(|(name, source)| wit::PromptTemplate { name, source })
            .collect(),
        default_success_criteria: info.default_success_criteria,
    }
}

/// [`Schema::build`] over the contract's JSON texts. Used by [`crate::export_schema!`].
#[doc(hidden)]
pub fn __schema_build<T: Schema>(
    task_json: &str,
    state_json: &str,
) -> Result<wit::CurrentState, String> {
    let task = serde_json::from_str(task_json).map_err(|e| format!("task JSON: {e}"))?;
    let state = serde_json::from_str(state_json).map_err(|e| format!("state JSON: {e}"))?;
    let built = T::build(task, state)?;
    Ok(wit::CurrentState {
        json: Value::Object(built.json).to_string(),
        files: built
            .files
            .into_iter()
            .map(|(pointer, path)| wit::FileInsert { pointer, path })
            .collect(),
    })
}

/// Exports a type implementing [`Schema`] as the plugin's `context-schema` world.
#[macro_export]
macro_rules! export_schema {
    ($ty:ty) => {
        #[doc(hidden)]
        pub struct __AgentforgeSchema;

        impl $crate::schema_bindings::Guest for __AgentforgeSchema {
            fn describe() -> $crate::schema_bindings::SchemaInfo {
                $crate::__schema_describe::<$ty>()
            }

            fn build(
                task_json: ::std::string::String,
                state_json: ::std::string::String,
            ) -> ::std::result::Result<$crate::schema_bindings::CurrentState, ::std::string::String>
            {
                $crate::__schema_build::<$ty>(&task_json, &state_json)
            }
        }

        $crate::schema_bindings::__export_schema_world!(__AgentforgeSchema);
    };
}

/// The `remaining_issues` of a task's state (`state.yaml` as JSON): the failing checks
/// (`<name>: <summary>`, sorted by name as the host's map is), then the statements of the
/// error facts, in order.
pub fn remaining_issues(state: &Value) -> Vec<String> {
    let mut failing: Vec<(&String, &Value)> = state
        .pointer("/verification/checks")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, c)| c.get("passing").and_then(Value::as_bool) == Some(false))
        .collect();
    failing.sort_by_key(|(n, _)| *n);
    let mut issues: Vec<String> = failing
        .into_iter()
        .map(|(n, c)| {
            let summary = c.get("summary").and_then(Value::as_str).unwrap_or("");
            format!("{n}: {summary}")
        })
        .collect();
    issues.extend(
        state
            .get("facts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| f.get("category").and_then(Value::as_str) == Some("error"))
            .filter_map(|f| f.get("statement").and_then(Value::as_str))
            .map(str::to_string),
    );
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T;

    impl Schema for T {
        fn describe() -> SchemaInfo {
            SchemaInfo {
                name: "t".into(),
                phase_graph: serde_json::json!({"initial": "a"}),
                prompts: vec![("a.j2".into(), "hi".into())],
                ..SchemaInfo::default()
            }
        }

        fn build(task: Value, _state: Value) -> Result<CurrentState, String> {
            let mut out = CurrentState::new();
            out.set("goal", task["goal"].clone())
                .set("n", 2)
                .file("/f", "src/a.rs");
            Ok(out)
        }
    }

    #[test]
    fn describe_and_build_cross_as_json() {
        let info = __schema_describe::<T>();
        assert_eq!(info.phase_graph_json, r#"{"initial":"a"}"#);
        assert_eq!(info.prompts[0].name, "a.j2");
        let built = __schema_build::<T>(r#"{"goal":"g"}"#, "{}").unwrap();
        assert_eq!(built.json, r#"{"goal":"g","n":2}"#);
        assert_eq!(
            (
                built.files[0].pointer.as_str(),
                built.files[0].path.as_str()
            ),
            ("/f", "src/a.rs")
        );
        let e = __schema_build::<T>("{", "{}").unwrap_err();
        assert!(e.starts_with("task JSON: "), "{e}");
        let e = __schema_build::<T>("{}", "nope").unwrap_err();
        assert!(e.starts_with("state JSON: "), "{e}");
    }
}
