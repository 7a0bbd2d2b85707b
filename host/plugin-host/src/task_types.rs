//! Context-schema plugins: a task type as a component (`context-schema` world).
//!
//! The description (name, budgets, phase graph, prompt templates, default criteria) is
//! asked once at load and validated there; `build` runs every step, in a fresh store.
//! The plugin never reads files itself: it names the workspace files it wants shown and
//! where, and the host inserts them numbered, confined to the workspace like every read.

use std::sync::Arc;

use serde_json::Value;

use super::bindings::v0_2::schema as v0_2;
use super::bindings::v0_3::schema::{
    CurrentState, FileInsert, PromptTemplate, SchemaInfo as WitSchemaInfo,
};
use super::{
    output, wrong_instance, Inner, Instance, Manifest, PluginError, PluginLoadError,
    MAX_RETURN_BYTES,
};
use agentforge_context::schemas::{numbered_file, ContextSchema};
use agentforge_context::Budgets;
use agentforge_core::phases::PhaseGraph;
use agentforge_core::state::TaskState;
use agentforge_core::task::TaskSpec;
use agentforge_store::tools::Workspace;
use agentforge_store::tools::{ReadError, ToolError};

/// Most workspace files one `build` may have inserted (the section is budgeted anyway).
const MAX_FILES: usize = 16;

/// A context schema's description, validated.
#[derive(Debug, Clone)]
pub(crate) struct SchemaInfo {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) budgets: Vec<(String, u32)>,
    pub(crate) graph: PhaseGraph,
    pub(crate) prompts: Vec<(String, String)>,
    pub(crate) default_success_criteria: Vec<String>,
    /// The task inputs the type reads (the manifest's `[input_schema]`).
    pub(crate) input_schema: Option<Value>,
}

/// Asks the plugin for its description and checks its shape: a task type name, known
/// budget keys whose sum fits, a phase graph in the host's shape (whether its actions
/// exist is checked when it is registered, when the tools are known), template names.
pub(super) fn describe(inner: &Inner, manifest: &Manifest) -> Result<SchemaInfo, PluginLoadError> {
    let invalid = |message: String| PluginLoadError::Invalid {
        plugin: inner.name.clone(),
        message,
    };
    let d = inner
        .call(|x, s| match x {
            Instance::Schema(x) => x.call_describe(s),
            Instance::SchemaV0_2(x) => x.call_describe(s).map(info_from_v0_2),
            _ => Err(wrong_instance()),
        })
        .map_err(PluginLoadError::Call)?;
    super::manifest::check_task_type_name(&d.name).map_err(invalid)?;
    // A run registers the task type by the manifest's name before loading the component.
    if let Some(named) = manifest.task_type.as_ref().filter(|t| **t != d.name) {
        return Err(invalid(agentforge_context::schemas::task_type_mismatch(
            named, &d.name,
        )));
    }
    let graph: PhaseGraph = serde_json::from_str(&d.phase_graph_json).map_err(|e| {
        invalid(format!(
            "task type `{}`: the phase graph JSON does not fit the host's shape (docs/plugins.md): {e}",
            d.name
        ))
    })?;
    let mut budgets = Budgets::default();
    budgets
        .apply(&d.budgets)
        .map_err(|e| invalid(format!("task type `{}`: budgets: {e}", d.name)))?;
    budgets
        .validate()
        .map_err(|e| invalid(format!("task type `{}`: budgets: {e}", d.name)))?;
    for t in &d.prompts {
        if !t.name.ends_with(".j2") || t.name.contains('/') {
            return Err(invalid(format!(
                "task type `{}`: prompt template name `{}` must be `<task_type>.<phase>.j2` or `<phase>.j2`",
                d.name, t.name
            )));
        }
        // A template that does not compile is the plugin's error, found now rather than
        // at every step.
        agentforge_context::prompts::check_template(&t.source)
            .map_err(|e| invalid(format!("task type `{}`: template {}: {e}", d.name, t.name)))?;
    }
    Ok(SchemaInfo {
        name: d.name,
        description: d.description,
        budgets: d.budgets,
        graph,
        prompts: d.prompts.into_iter().map(|t| (t.name, t.source)).collect(),
        default_success_criteria: d.default_success_criteria,
        input_schema: manifest.input_schema_json(),
    })
}

/// A context-schema plugin behind [`ContextSchema`].
#[derive(Clone)]
pub struct WasmSchema {
    inner: Arc<Inner>,
    info: SchemaInfo,
}

impl WasmSchema {
    pub(super) fn new(inner: Arc<Inner>, info: SchemaInfo) -> WasmSchema {
        WasmSchema { inner, info }
    }

    /// The plugin's name (not the task type's).
    pub fn plugin(&self) -> &str {
        &self.inner.name
    }

    /// Whether it is one of the host's built-in plugins.
    pub fn is_builtin(&self) -> bool {
        self.inner.builtin
    }

    /// The `current_state` section, or why the plugin could not build it.
    pub fn try_build(
        &self,
        spec: &TaskSpec,
        state: &TaskState,
        ws: &Workspace,
    ) -> Result<Value, String> {
        let task_json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let state_json = serde_json::to_string(state).map_err(|e| e.to_string())?;
        let built = self
            .inner
            .call(|x, s| match x {
                Instance::Schema(_) | Instance::SchemaV0_2(_) => {
                    let r = match x {
                        Instance::Schema(x) => x.call_build(&mut *s, &task_json, &state_json)?,
                        Instance::SchemaV0_2(x) => x
                            .call_build(&mut *s, &task_json, &state_json)?
                            .map(state_from_v0_2),
                        _ => return Err(wrong_instance()),
                    };
                    let size = match &r {
                        Ok(c) => c.json.len() + c.files.iter().map(|f| f.path.len()).sum::<usize>(),
                        Err(e) => e.len(),
                    };
                    output::check_returned("returned section", size, MAX_RETURN_BYTES)?;
                    Ok(r)
                }
                _ => Err(wrong_instance()),
            })
            .map_err(|e: PluginError| e.to_string())?
            .map_err(|e| format!("schema plugin `{}`: {e}", self.inner.name))?;
        self.resolve(built, ws)
    }

    /// The built JSON with the requested files inserted.
    fn resolve(&self, built: CurrentState, ws: &Workspace) -> Result<Value, String> {
        let mut value: Value = serde_json::from_str(&built.json).map_err(|e| {
            format!(
                "schema plugin `{}`: `build` returned invalid JSON: {e}",
                self.inner.name
            )
        })?;
        if !value.is_object() {
            return Err(format!(
                "schema plugin `{}`: `build` must return a JSON object",
                self.inner.name
            ));
        }
        if built.files.len() > MAX_FILES {
            return Err(format!(
                "schema plugin `{}`: `build` asked for {} files, more than the {MAX_FILES} a section may show",
                self.inner.name,
                built.files.len()
            ));
        }
        for f in built.files {
            // Bounded, regular files only (a FIFO or device is named, never read); a
            // missing file is `null`, as the contract says, anything else a note.
            let content = match numbered_file(ws, &f.path) {
                Ok(text) => Value::String(text),
                Err(ToolError::Read(ReadError::NotFound { .. })) => Value::Null,
                Err(e) => Value::String(format!("(not shown: {e})")),
            };
            insert_at(&mut value, &f.pointer, content).map_err(|e| {
                format!(
                    "schema plugin `{}`: file `{}` at `{}`: {e}",
                    self.inner.name, f.path, f.pointer
                )
            })?;
        }
        Ok(value)
    }
}

/// Sets `pointer` (RFC 6901) in `value` to `content`: its parent must exist and be an
/// object or an array (an index within it).
fn insert_at(value: &mut Value, pointer: &str, content: Value) -> Result<(), String> {
    let (parent, last) = pointer
        .rsplit_once('/')
        .ok_or_else(|| "a JSON pointer starts with `/`".to_string())?;
    let key = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(key, content);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let slot = key
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get_mut(i))
                .ok_or_else(|| format!("no element `{key}` in the array"))?;
            *slot = content;
            Ok(())
        }
        Some(_) => Err("its parent is neither an object nor an array".to_string()),
        None => Err("its parent does not exist in the built object".to_string()),
    }
}

impl ContextSchema for WasmSchema {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn phase_graph(&self) -> &PhaseGraph {
        &self.info.graph
    }

    fn default_success_criteria(&self) -> Vec<String> {
        self.info.default_success_criteria.clone()
    }

    fn build_current_state(&self, spec: &TaskSpec, state: &TaskState, ws: &Workspace) -> Value {
        // A failing plugin must not stop the step: the model sees why the section is
        // missing, and the plugin's error is on stderr for the operator.
        self.try_build(spec, state, ws).unwrap_or_else(|e| {
            eprintln!("warning: {e}");
            serde_json::json!({ "error": e })
        })
    }

    fn input_schema(&self) -> Option<Value> {
        self.info.input_schema.clone()
    }

    fn budgets(&self) -> &[(String, u32)] {
        &self.info.budgets
    }

    fn prompt_templates(&self) -> &[(String, String)] {
        &self.info.prompts
    }

    fn description(&self) -> &str {
        &self.info.description
    }

    fn source(&self) -> String {
        if self.inner.builtin {
            format!("built-in plugin {}", self.inner.name)
        } else {
            format!("plugin {}", self.inner.name)
        }
    }
}

/// A 0.2.0 schema's description in the current types (the same fields).
fn info_from_v0_2(d: v0_2::SchemaInfo) -> WitSchemaInfo {
    WitSchemaInfo {
        name: d.name,
        description: d.description,
        budgets: d.budgets,
        phase_graph_json: d.phase_graph_json,
        prompts: d
            .prompts
            .into_iter()
            .map(|t| PromptTemplate {
                name: t.name,
                source: t.source,
            })
            .collect(),
        default_success_criteria: d.default_success_criteria,
    }
}

/// A 0.2.0 schema's section in the current types (the same fields).
fn state_from_v0_2(c: v0_2::CurrentState) -> CurrentState {
    CurrentState {
        json: c.json,
        files: c
            .files
            .into_iter()
            .map(|f| FileInsert {
                pointer: f.pointer,
                path: f.path,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn files_are_inserted_at_their_pointer() {
        let mut v = json!({"file": {"path": "a"}, "targets": [{"path": "b"}, {"path": "c"}]});
        insert_at(&mut v, "/file/content", json!("1| x")).unwrap();
        insert_at(&mut v, "/targets/1/content", Value::Null).unwrap();
        insert_at(&mut v, "/top", json!(1)).unwrap();
        assert_eq!(v["file"]["content"], "1| x");
        assert_eq!(v["targets"][1]["content"], Value::Null);
        assert_eq!(v["top"], 1);
        assert!(insert_at(&mut v, "/missing/x", json!(1))
            .unwrap_err()
            .contains("does not exist"));
        assert!(insert_at(&mut v, "nope", json!(1)).is_err());
    }
}
