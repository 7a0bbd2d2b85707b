//! `agentforge plugins new`: templates for a new plugin crate, one per plugin kind
//! (extractor, gate, guard, context-schema, tool).
//!
//! A scaffolded crate is its own Cargo workspace (so it builds wherever it is created,
//! even inside another workspace), depends on the SDK by path, and builds with
//! `cargo build --target wasm32-wasip2 --release` into a component for the
//! `agentforge:plugin@0.3.0` contract that `agentforge plugins check` accepts once it is
//! copied next to its `plugin.toml`.

use std::path::{Component, Path, PathBuf};

/// Every plugin kind of the WIT package, whether or not the SDK can build it yet.
pub const KINDS: &[&str] = &["extractor", "gate", "guard", "context-schema", "tool"];

/// The kinds the SDK can build (and this scaffolder has a template for): all of them.
pub const SUPPORTED_KINDS: &[&str] = KINDS;

/// The WIT package version the SDK builds against (`api` in a scaffolded `plugin.toml`).
pub const API: &str = "0.3.0";

/// Why a plugin cannot be scaffolded.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The kind is not one of [`KINDS`].
    #[error("unknown plugin kind `{0}` (kinds: {kinds})", kinds = KINDS.join(", "))]
    UnknownKind(String),
    /// The kind exists but the SDK cannot build it yet.
    #[error("the SDK cannot build `{0}` plugins yet (it supports: {supported})", supported = SUPPORTED_KINDS.join(", "))]
    UnsupportedKind(String),
    /// The name is not usable as a crate and plugin name.
    #[error("invalid plugin name `{0}`: use lowercase letters, digits, `-` and `_`, starting with a letter (at most 64 characters)")]
    BadName(String),
    /// The target folder exists and is not empty.
    #[error("{0} already exists and is not empty")]
    Exists(PathBuf),
    /// The SDK folder has no `Cargo.toml` of the SDK.
    #[error("{0} is not the AgentForge plugin SDK (no Cargo.toml naming agentforge-plugin-sdk)")]
    NotSdk(PathBuf),
    /// A file could not be written.
    #[error("{path}: {message}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct NewPlugin {
    /// Plugin kind (one of [`SUPPORTED_KINDS`]).
    pub kind: String,
    /// Crate and plugin name.
    pub name: String,
    /// The SDK crate folder (`plugins/sdk`); the crate depends on it by a relative path.
    pub sdk: PathBuf,
}

/// What [`create`] wrote.
#[derive(Debug, Clone)]
pub struct Created {
    /// The new crate folder.
    pub dir: PathBuf,
    /// The files written, relative to `dir`.
    pub files: Vec<PathBuf>,
    /// The SDK path written into `Cargo.toml` (relative to `dir`).
    pub sdk_path: PathBuf,
    /// The component file the build produces (`<name with _>.wasm`).
    pub component: String,
}

/// Checks the kind: known, and buildable with the SDK.
pub fn check_kind(kind: &str) -> Result<(), ScaffoldError> {
    if SUPPORTED_KINDS.contains(&kind) {
        Ok(())
    } else if KINDS.contains(&kind) {
        Err(ScaffoldError::UnsupportedKind(kind.to_string()))
    } else {
        Err(ScaffoldError::UnknownKind(kind.to_string()))
    }
}

/// Checks the name: a valid crate name and plugin name.
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::BadName(name.to_string()))
    }
}

/// The component file a crate named `name` builds: `my-lint` -> `my_lint.wasm`.
pub fn component_file(name: &str) -> String {
    format!("{}.wasm", name.replace('-', "_"))
}

/// `path` relative to `base`; both absolute and free of `.`/`..` (canonical paths).
pub fn relative(path: &Path, base: &Path) -> PathBuf {
    let p: Vec<Component> = path.components().collect();
    let b: Vec<Component> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// `Cargo.toml` of a new plugin crate.
pub fn cargo_toml(name: &str, sdk_path: &Path) -> String {
    // TOML basic strings: escape backslashes (Windows paths) and quotes.
    let sdk = sdk_path
        .to_string_lossy()
        .replace('\\', "/")
        .replace('"', "\\\"");
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
# A component is a cdylib built for wasm32-wasip2.
crate-type = ["cdylib"]

[dependencies]
# Its `serde_json` re-export (`agentforge_plugin_sdk::serde_json`) reads and writes JSON.
agentforge-plugin-sdk = {{ path = "{sdk}" }}

# Its own workspace: builds alone wherever the folder is.
[workspace]

[profile.release]
# Speed over size: plugins run on every step (the host caches the compiled component).
opt-level = 3
lto = true
codegen-units = 1
strip = true
# A panic still prints its message (the host reports it) before the trap.
panic = "abort"
"#
    )
}

/// `plugin.toml` of a new plugin.
pub fn plugin_toml(kind: &str, name: &str) -> String {
    let component = component_file(name);
    let on_error = match kind {
        "guard" => {
            "# What a failed call (trap, limit) decides: deny | allow.\non_error = \"deny\"\n\
             # The only actions it judges (the host allows the others without a call);\n\
             # without this line it is asked about every action.\n\
             # actions = [\"complete\"]\n"
                .to_string()
        }
        // The name src/lib.rs describes: a run registers the task type by it and loads
        // the component only when a task of that type is opened.
        "context-schema" => format!(
            "# The task type src/lib.rs describes (the two must agree); a run loads this\n\
             # plugin only when a task of this type is opened.\ntask_type = \"{}\"\n",
            name.replace('-', "_")
        ),
        _ => String::new(),
    };
    let (config, capabilities) = match kind {
        "guard" => ("protected = [\"Cargo.lock\"]\n", ""),
        "tool" => ("", "read = [\"**\"]\n"),
        _ => ("", ""),
    };
    format!(
        r#"# Read by the host: `agentforge plugins check .` validates this folder.
name = "{name}"
version = "0.1.0"
kind = "{kind}"
api = "{API}"                 # the WIT package (wit/plugin.wit) the SDK builds against
component = "{component}"   # copy target/wasm32-wasip2/release/{component} here
description = "TODO: one line for `agentforge plugins list`"
{on_error}
[limits]
# Per-call limits; the defaults are shown.
# memory_mib = 64
# fuel = 2000000000
# deadline_ms = 2000

[config]
# Free-form settings, read with `config()`; the project's `[plugins.config.{name}]`
# keys (agentforge.toml) override them.
{config}
[capabilities]
# Requests, usable only once the project grants them too
# (`[plugins.grants.{name}]` in agentforge.toml):
# read = ["src/**/*.rs"]      # workspace files for `read_file`
# checks = ["tests"]          # the task's checks for `run_check`
{capabilities}"#
    )
}

/// `src/lib.rs` of a new extractor: a small rule table.
pub fn extractor_lib_rs(name: &str) -> String {
    format!(
        r#"//! `{name}`: an AgentForge extractor plugin (tool output -> facts).
//!
//! Try it on a real output:
//!   cargo build --target wasm32-wasip2 --release
//!   cp target/wasm32-wasip2/release/{component} .
//!   agentforge extract --tool lint --plugins . --no-builtin < output.txt

use agentforge_plugin_sdk::{{rule_extractor, Category, Rule, RuleSet}};

rule_extractor!(
    // Tool or check names whose output this plugin reads (`"*"`: every output).
    handles: ["lint"],
    // Applied in order; each rule is a regex, a fact category and a statement template
    // naming captures `{{1}}` / `{{name}}` and the tool `{{tool}}`.
    rules: RuleSet::new(vec![
        // `src/main.rs:3:5: warning: unused variable` -> one fact per finding (at most 5).
        Rule::each(
            r"(?m)^([^:\s]+):(\d+):\d+: (error|warning): (.+)$",
            Category::Error,
            "{{3}} at {{1}}:{{2}}: {{4}}",
        )
        .limit(5),
        // `2 problems` -> one fact; numbers are summed over all matching lines.
        Rule::total(
            r"(?m)^(?P<n>\d+) problems?$",
            Category::Verification,
            "{{tool}}: {{n}} problems",
        ),
    ]),
);
"#,
        component = component_file(name)
    )
}

/// Fills a template's `@NAME@` (plugin name), `@COMPONENT@` (component file) and
/// `@SNAKE@` (the name with `_` for `-`: a task type or tool name).
fn fill(template: &str, name: &str) -> String {
    template
        .replace("@NAME@", name)
        .replace("@COMPONENT@", &component_file(name))
        .replace("@SNAKE@", &name.replace('-', "_"))
}

const GATE_LIB_RS: &str = r#"//! `@NAME@`: an AgentForge gate plugin (one check's run -> a verdict).
//!
//! Build it and check the folder:
//!   cargo build --target wasm32-wasip2 --release
//!   cp target/wasm32-wasip2/release/@COMPONENT@ .
//!   agentforge plugins check .

use agentforge_plugin_sdk::{export_gate, Category, CheckRun, Gate, Verdict};

/// The gate.
pub struct Plugin;

impl Gate for Plugin {
    fn checks() -> Vec<String> {
        // The checks (task.yaml `checks` names) this gate judges; `"*"`: any check no
        // other gate names.
        vec!["lint".into()]
    }

    fn evaluate(run: CheckRun) -> Verdict {
        // The extractors' facts about the output: here, the errors they found.
        let errors = run
            .facts
            .iter()
            .filter(|f| f.category == Category::Error)
            .count();
        let status = match run.exit_code {
            Some(code) => format!("exit {code}"),
            None if run.timed_out => "timed out".to_string(),
            None => "killed".to_string(),
        };
        Verdict {
            passing: run.exit_code == Some(0) && errors == 0,
            // One line, shown to the model.
            summary: format!("{}: {errors} errors ({status})", run.check),
        }
    }
}

export_gate!(Plugin);
"#;

const GUARD_LIB_RS: &str = r#"//! `@NAME@`: an AgentForge guard plugin (consulted before an action runs).
//!
//! Denies file edits to the paths of its `protected` setting (plugin.toml `[config]`),
//! except for tasks whose role is `maintainer`, who are warned instead.
//!
//! Build it and check the folder:
//!   cargo build --target wasm32-wasip2 --release
//!   cp target/wasm32-wasip2/release/@COMPONENT@ .
//!   agentforge plugins check .

use agentforge_plugin_sdk::serde_json::{self, Value};
use agentforge_plugin_sdk::{config, export_guard, ActionCheck, Decision, Guard};

/// The guard.
pub struct Plugin;

impl Guard for Plugin {
    fn check(input: ActionCheck) -> Decision {
        // `input.action` is the tool name, `input.target` its main target (a path here);
        // `arguments_json`, `task_json` and `state_json` are JSON texts.
        if !matches!(
            input.action.as_str(),
            "write_file" | "edit_file" | "replace_lines"
        ) {
            return Decision::Allow;
        }
        let Some(path) = input.target.as_deref() else {
            return Decision::Allow;
        };
        let protected: Vec<String> = config()
            .get("protected")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect();
        let hit = protected
            .iter()
            .any(|p| path == p || path.starts_with(&format!("{}/", p.trim_end_matches('/'))));
        if !hit {
            return Decision::Allow;
        }
        // The task (task.yaml) says who acts.
        let task: Value = serde_json::from_str(&input.task_json).unwrap_or(Value::Null);
        if task["role"] == "maintainer" {
            return Decision::Warn(format!("`{path}` is protected; edit it with care"));
        }
        Decision::Deny(format!("`{path}` is protected: leave it unchanged"))
    }
}

export_guard!(Plugin);
"#;

const SCHEMA_LIB_RS: &str = r#"//! `@NAME@`: an AgentForge context-schema plugin (a task type: `task_type: @SNAKE@`).
//!
//! Its phases are data, in src/phases.json (the host validates them when it loads the
//! plugin: known actions, reachable phases, a way to `complete`).
//!
//! Build it and check the folder:
//!   cargo build --target wasm32-wasip2 --release
//!   cp target/wasm32-wasip2/release/@COMPONENT@ .
//!   agentforge plugins check .

use agentforge_plugin_sdk::serde_json::{self, Value};
use agentforge_plugin_sdk::{export_schema, CurrentState, Schema, SchemaInfo};

/// The task type.
pub struct Plugin;

impl Schema for Plugin {
    fn describe() -> SchemaInfo {
        SchemaInfo {
            name: "@SNAKE@".into(),
            description: "TODO: what this task type is for".into(),
            // Token budgets by `[budget]` key, e.g. `("current_state".into(), 6000)`;
            // the keys not named keep the project's values.
            budgets: vec![],
            phase_graph: serde_json::from_str(include_str!("phases.json"))
                .expect("src/phases.json is JSON"),
            // `(name, minijinja source)`, name `@SNAKE@.<phase>.j2` or `<phase>.j2`;
            // none: the host's templates serve.
            prompts: vec![],
            default_success_criteria: vec!["the task's checks pass".into()],
        }
    }

    fn build(task: Value, state: Value) -> Result<CurrentState, String> {
        // `task` is task.yaml as JSON (`goal`, `inputs`, `checks`, `role`...), `state`
        // state.yaml (`verification`, `modified_files`...).
        let mut out = CurrentState::new();
        out.set("goal", task["goal"].clone());
        // A file the task names (`inputs.file`), inserted by the host with numbered
        // lines (`null` when it does not exist).
        if let Some(path) = task["inputs"]["file"].as_str() {
            out.set("file", serde_json::json!({ "path": path }));
            out.file("/file/content", path);
        }
        let failing: Vec<String> = state["verification"]["checks"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, c)| c["passing"] != Value::Bool(true))
            .map(|(name, c)| format!("{name}: {}", c["summary"].as_str().unwrap_or("failing")))
            .collect();
        if !failing.is_empty() {
            out.set("failing_checks", failing);
        }
        Ok(out)
    }
}

export_schema!(Plugin);
"#;

/// `src/phases.json` of a new context schema: the phase graph (docs/plugins.md).
pub const SCHEMA_PHASES_JSON: &str = r#"{
  "initial": "analyze",
  "phases": [
    {
      "name": "analyze",
      "description": "read the code the task is about",
      "max_steps": 5,
      "recommended": "read_file",
      "actions": [
        { "name": "read_file", "preconditions": ["need to see code"], "priority": 10 },
        { "name": "search", "priority": 5 },
        { "name": "escalate", "priority": 1 }
      ]
    },
    {
      "name": "implement",
      "description": "change the code until the checks pass",
      "recommended": "edit_file",
      "plan_actions": ["finish_subtask"],
      "actions": [
        { "name": "edit_file", "priority": 10 },
        { "name": "read_file", "priority": 5 },
        { "name": "run_check", "postconditions": ["verification updated"], "priority": 5 },
        {
          "name": "complete",
          "priority": 1,
          "requires": { "condition": "ready", "reason": "verification not yet passing" }
        },
        { "name": "escalate" }
      ]
    },
    { "name": "complete", "terminal": true },
    { "name": "escalated", "terminal": true }
  ],
  "transitions": [
    {
      "from": "analyze",
      "to": "implement",
      "when": { "any": ["context_gathered", "max_steps_reached"] },
      "reason": "context gathered"
    }
  ]
}
"#;

const TOOL_LIB_RS: &str = r#"//! `@NAME@`: an AgentForge tool plugin (an action `@SNAKE@` offered to the model).
//!
//! Lists the lines of a workspace file that contain a text. It reads through the host:
//! plugin.toml requests `read`, and the project must grant it
//! (`[plugins.grants.@NAME@] read = ["**"]` in agentforge.toml); otherwise the refusal
//! is shown to the model.
//!
//! Build it and check the folder:
//!   cargo build --target wasm32-wasip2 --release
//!   cp target/wasm32-wasip2/release/@COMPONENT@ .
//!   agentforge plugins check .

use agentforge_plugin_sdk::serde_json::{json, Value};
use agentforge_plugin_sdk::{export_tool, read_file, ActionResult, Tool, ToolInfo, ToolOutput};

/// Most matching lines shown.
const MAX_LINES: usize = 20;

/// The tool.
pub struct Plugin;

impl Tool for Plugin {
    fn describe() -> ToolInfo {
        ToolInfo {
            name: "@SNAKE@".into(),
            description: "Lines of a workspace file containing a text, with their numbers.".into(),
            // A JSON Schema (an object), checked at load; the host validates every call against it.
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "file, relative to the workspace root" },
                    "text": { "type": "string", "description": "text to look for" }
                },
                "required": ["path", "text"]
            }),
            // Phases where it is offered; `*`: every non-terminal phase.
            phases: vec!["*".into()],
        }
    }

    fn invoke(args: Value) -> Result<ToolOutput, String> {
        let path = args["path"].as_str().unwrap_or_default();
        let text = args["text"].as_str().unwrap_or_default();
        // An `Err` is an error message for the model.
        let content = read_file(path)?;
        let hits: Vec<String> = content
            .lines()
            .enumerate()
            .filter(|(_, line)| line.contains(text))
            .map(|(i, line)| format!("{}: {line}", i + 1))
            .collect();
        let output = if hits.is_empty() {
            format!("no line of {path} contains {text:?}")
        } else {
            let shown = hits.len().min(MAX_LINES);
            format!(
                "{} lines of {path} contain {text:?} (first {shown}):\n{}",
                hits.len(),
                hits[..shown].join("\n")
            )
        };
        Ok(ToolOutput {
            result: ActionResult::Success,
            output,
        })
    }
}

export_tool!(Plugin);
"#;

/// The source files of a new plugin of `kind` (one of [`SUPPORTED_KINDS`]), relative
/// to its folder: `src/lib.rs`, and the phase graph of a context schema.
pub fn sources(kind: &str, name: &str) -> Vec<(PathBuf, String)> {
    let lib = match kind {
        "gate" => fill(GATE_LIB_RS, name),
        "guard" => fill(GUARD_LIB_RS, name),
        "context-schema" => fill(SCHEMA_LIB_RS, name),
        "tool" => fill(TOOL_LIB_RS, name),
        _ => extractor_lib_rs(name),
    };
    let mut files = vec![(PathBuf::from("src/lib.rs"), lib)];
    if kind == "context-schema" {
        files.push((
            PathBuf::from("src/phases.json"),
            SCHEMA_PHASES_JSON.to_string(),
        ));
    }
    files
}

/// What to do after scaffolding a plugin of `kind` in `dir`: lines for the user.
pub fn next_steps(kind: &str, dir: &Path, component: &str) -> Vec<String> {
    let edit = match kind {
        "extractor" => "edit the rule table in src/lib.rs, then",
        "context-schema" => "edit src/lib.rs and the phase graph in src/phases.json, then",
        _ => "edit src/lib.rs, then",
    };
    let mut lines = vec![
        format!("next: {edit}"),
        format!("  cd {}", dir.display()),
        "  cargo build --target wasm32-wasip2 --release".to_string(),
        format!("  cp target/wasm32-wasip2/release/{component} ."),
    ];
    if kind == "extractor" {
        lines.push(
            "  agentforge extract --tool lint --plugins . --no-builtin < output.txt".to_string(),
        );
    }
    lines.push("  agentforge plugins check .".to_string());
    lines
}

const GITIGNORE: &str = "/target\n";

/// Creates `<parent>/<name>/` with `Cargo.toml`, `plugin.toml`, `src/lib.rs` (and
/// `src/phases.json` for a context schema) and `.gitignore`. The SDK dependency is a path
/// relative to the new folder. When the SDK's workspace has a `Cargo.lock`, it is copied
/// too, so the crate builds with the dependency versions the SDK is tested with.
pub fn create(parent: &Path, plugin: &NewPlugin) -> Result<Created, ScaffoldError> {
    check_kind(&plugin.kind)?;
    check_name(&plugin.name)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| ScaffoldError::Io {
            path,
            message: e.to_string(),
        }
    };
    let sdk = plugin.sdk.canonicalize().map_err(io(&plugin.sdk))?;
    let is_sdk = std::fs::read_to_string(sdk.join("Cargo.toml"))
        .is_ok_and(|t| t.contains("name = \"agentforge-plugin-sdk\""));
    if !is_sdk {
        return Err(ScaffoldError::NotSdk(plugin.sdk.clone()));
    }
    let dir = parent.join(&plugin.name);
    if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(ScaffoldError::Exists(dir));
    }
    std::fs::create_dir_all(dir.join("src")).map_err(io(&dir))?;
    let abs = dir.canonicalize().map_err(io(&dir))?;
    let sdk_path = relative(&sdk, &abs);
    let mut files = vec![
        (
            PathBuf::from("Cargo.toml"),
            cargo_toml(&plugin.name, &sdk_path),
        ),
        (
            PathBuf::from("plugin.toml"),
            plugin_toml(&plugin.kind, &plugin.name),
        ),
    ];
    files.extend(sources(&plugin.kind, &plugin.name));
    files.push((PathBuf::from(".gitignore"), GITIGNORE.to_string()));
    if let Some(lock) = sdk
        .parent()
        .and_then(|w| std::fs::read_to_string(w.join("Cargo.lock")).ok())
    {
        files.push((PathBuf::from("Cargo.lock"), lock));
    }
    for (rel, text) in &files {
        let path = dir.join(rel);
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(Created {
        dir,
        files: files.into_iter().map(|(p, _)| p).collect(),
        sdk_path,
        component: component_file(&plugin.name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_names_are_checked() {
        for kind in KINDS {
            assert!(check_kind(kind).is_ok(), "{kind}");
        }
        let e = check_kind("formatter").unwrap_err().to_string();
        assert!(e.contains("unknown plugin kind `formatter`"), "{e}");
        assert!(e.contains("context-schema, tool"), "{e}");
        assert!(check_kind("context_schema").is_err());
        assert!(check_name("my-lint").is_ok() && check_name("x_2").is_ok());
        for bad in ["", "My", "1x", "a b", "../x", "a.b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn relative_paths() {
        let r = |a: &str, b: &str| relative(Path::new(a), Path::new(b));
        assert_eq!(
            r("/r/plugins/sdk", "/tmp/x/my"),
            Path::new("../../../r/plugins/sdk")
        );
        assert_eq!(r("/r/plugins/sdk", "/r/plugins/my"), Path::new("../sdk"));
        assert_eq!(r("/r", "/r"), Path::new("."));
    }

    #[test]
    fn templates_are_valid_toml_and_name_the_component() {
        let c: toml::Table = toml::from_str(&cargo_toml("my-lint", Path::new("../sdk"))).unwrap();
        assert_eq!(
            c["dependencies"]["agentforge-plugin-sdk"]["path"].as_str(),
            Some("../sdk")
        );
        for kind in KINDS {
            let p: toml::Table = toml::from_str(&plugin_toml(kind, "my-lint")).unwrap();
            assert_eq!(p["component"].as_str(), Some("my_lint.wasm"));
            assert_eq!(p["kind"].as_str(), Some(*kind));
            assert_eq!(p["api"].as_str(), Some(API));
            assert_eq!(p.contains_key("on_error"), *kind == "guard", "{kind}");
            // What the host checks of a manifest, short of the component file.
            crate::plugins::Manifest::parse(
                &plugin_toml(kind, "my-lint"),
                Path::new("plugin.toml"),
            )
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(
                p.get("task_type").and_then(|t| t.as_str()),
                (*kind == "context-schema").then_some("my_lint"),
                "{kind}"
            );
            let lib = &sources(kind, "my-lint")[0];
            assert_eq!(lib.0, Path::new("src/lib.rs"));
            assert!(!lib.1.contains('@'), "{kind}: unfilled placeholder");
        }
        assert!(extractor_lib_rs("my-lint").contains("\"{3} at {1}:{2}: {4}\""));
        let guard: toml::Table = toml::from_str(&plugin_toml("guard", "g")).unwrap();
        assert_eq!(guard["config"]["protected"][0].as_str(), Some("Cargo.lock"));
        let tool: toml::Table = toml::from_str(&plugin_toml("tool", "my-tool")).unwrap();
        assert_eq!(tool["capabilities"]["read"][0].as_str(), Some("**"));
        assert!(sources("tool", "my-tool")[0]
            .1
            .contains("name: \"my_tool\".into()"));
    }

    #[test]
    fn the_schema_template_has_a_valid_phase_graph() {
        let files = sources("context-schema", "my-task");
        assert_eq!(files[1].0, Path::new("src/phases.json"));
        assert!(files[0].1.contains("name: \"my_task\".into()"));
        let graph: agentforge_core::phases::PhaseGraph = serde_json::from_str(&files[1].1).unwrap();
        graph
            .validate(&agentforge_context::schemas::BUILTIN_ACTIONS)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}
