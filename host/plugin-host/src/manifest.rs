//! `plugin.toml`: what a plugin folder declares about itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Capabilities, PluginLoadError};

/// API versions of `wit/plugin.wit` this host can run, newest first. A plugin's `api`
/// matches one when major and minor are equal (the compatibility policy in the WIT file).
pub const SUPPORTED_APIS: &[&str] = &["0.3.0", "0.2.0", "0.1.0"];

/// A supported API version, as the loader dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// `agentforge:plugin@0.1.x` (frozen: extractor, gate, guard).
    V0_1,
    /// `agentforge:plugin@0.2.x` (frozen: every world; extractors get no `details`).
    V0_2,
    /// `agentforge:plugin@0.3.x` (current).
    V0_3,
}

impl ApiVersion {
    /// The supported version `api` (`major.minor.patch`) is compatible with.
    pub fn of(api: &str) -> Option<ApiVersion> {
        if same_minor("0.3.0", api) {
            Some(ApiVersion::V0_3)
        } else if same_minor("0.2.0", api) {
            Some(ApiVersion::V0_2)
        } else if same_minor("0.1.0", api) {
            Some(ApiVersion::V0_1)
        } else {
            None
        }
    }
}

/// The plugin kinds this host loads. Kinds the WIT package may define later are refused
/// with a clear error instead of being half-loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// Reads tool output into facts (`extractor` world).
    Extractor,
    /// Judges a check's outcome (`gate` world).
    Gate,
    /// Allows, warns about or denies an action before it runs (`guard` world).
    Guard,
    /// A task type: phases, budgets, the `current_state` section (`context-schema` world).
    ContextSchema,
    /// An action offered to the model (`tool` world).
    Tool,
}

impl PluginKind {
    /// The kinds this host runs, as written in `plugin.toml`.
    pub const NAMES: &'static str = "extractor, gate, guard, context-schema, tool";

    /// The kind `name` means in a manifest's `kind`, if this host knows it.
    pub fn from_manifest(name: &str) -> Option<PluginKind> {
        match name {
            "extractor" => Some(PluginKind::Extractor),
            "gate" => Some(PluginKind::Gate),
            "guard" => Some(PluginKind::Guard),
            "context-schema" => Some(PluginKind::ContextSchema),
            "tool" => Some(PluginKind::Tool),
            _ => None,
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Extractor => "extractor",
            PluginKind::Gate => "gate",
            PluginKind::Guard => "guard",
            PluginKind::ContextSchema => "context-schema",
            PluginKind::Tool => "tool",
        })
    }
}

/// What a failing guard plugin decides (its call trapped, ran out of a limit, broke the
/// contract).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Fail closed: deny the action with the error as the reason (the default: a guard
    /// that cannot decide must not let an action through).
    #[default]
    Deny,
    /// Fail open: allow the action, with the error as a warning.
    Allow,
}

/// Per-plugin overrides of the call limits (`[limits]` in `plugin.toml`,
/// `[plugins.limits.<name>]` in `agentforge.toml`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LimitsOverride {
    /// Largest linear memory, in MiB.
    pub memory_mib: Option<u64>,
    /// Fuel (roughly, WASM instructions) per call.
    pub fuel: Option<u64>,
    /// Wall-clock deadline per call, in milliseconds.
    pub deadline_ms: Option<u64>,
}

/// `[plugins.limits]` in `agentforge.toml`: at the top, the ceilings a manifest's
/// `[limits]` may ask for (a plugin author does not choose how much of the machine a
/// plugin takes); below, `[plugins.limits.<name>]`, the project's own limits for one
/// plugin. Plugin names never contain `_`, so the two cannot be confused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectLimits {
    /// Ceilings for what manifests request.
    pub ceiling: LimitsOverride,
    /// The project's limits, by plugin name.
    pub per_plugin: std::collections::BTreeMap<String, LimitsOverride>,
}

impl Default for ProjectLimits {
    /// Ceilings of 256 MiB, 2·10¹⁰ fuel (about 10 s of computation) and 10 s.
    fn default() -> Self {
        ProjectLimits {
            ceiling: LimitsOverride {
                memory_mib: Some(256),
                fuel: Some(20_000_000_000),
                deadline_ms: Some(10_000),
            },
            per_plugin: Default::default(),
        }
    }
}

impl ProjectLimits {
    /// The project's limits for plugin `name` (none set: all `None`).
    pub fn for_plugin(&self, name: &str) -> LimitsOverride {
        self.per_plugin.get(name).cloned().unwrap_or_default()
    }
}

impl Serialize for ProjectLimits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        let c = &self.ceiling;
        for (k, v) in [
            ("memory_mib", c.memory_mib),
            ("fuel", c.fuel),
            ("deadline_ms", c.deadline_ms),
        ] {
            if let Some(v) = v {
                map.serialize_entry(k, &v)?;
            }
        }
        for (name, o) in &self.per_plugin {
            map.serialize_entry(name, o)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ProjectLimits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = std::collections::BTreeMap::<String, toml::Value>::deserialize(d)?;
        let mut out = ProjectLimits::default();
        for (key, value) in raw {
            let number = |v: &toml::Value| -> Result<Option<u64>, D::Error> {
                match v.as_integer() {
                    Some(n) if n > 0 => Ok(Some(n as u64)),
                    _ => Err(D::Error::custom(format!(
                        "`{key}` (a ceiling) must be a positive integer, not `{v}`"
                    ))),
                }
            };
            match (key.as_str(), &value) {
                ("memory_mib", v) => out.ceiling.memory_mib = number(v)?,
                ("fuel", v) => out.ceiling.fuel = number(v)?,
                ("deadline_ms", v) => out.ceiling.deadline_ms = number(v)?,
                (_, toml::Value::Table(_)) => {
                    let o: LimitsOverride = value.try_into().map_err(|e: toml::de::Error| {
                        D::Error::custom(format!("[plugins.limits.{key}]: {}", e.message()))
                    })?;
                    out.per_plugin.insert(key, o);
                }
                _ => {
                    return Err(D::Error::custom(format!(
                        "unknown key `{key}`: the ceilings are `memory_mib`, `fuel` and `deadline_ms`; a plugin's own limits go in a table `[plugins.limits.<name>]`"
                    )))
                }
            }
        }
        Ok(out)
    }
}

/// A parsed `plugin.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Unique name (also the facts' extractor name).
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// Kind as written (`extractor`); see [`Manifest::kind`].
    #[serde(rename = "kind")]
    pub kind_name: String,
    /// Version of the WIT package the component was built against (`0.1.0`).
    pub api: String,
    /// Component file, relative to the plugin folder.
    pub component: PathBuf,
    /// One line for `plugins list`.
    #[serde(default)]
    pub description: String,
    /// Limit overrides.
    #[serde(default)]
    pub limits: LimitsOverride,
    /// Keep one instance between calls instead of a fresh one per call: state (e.g.
    /// compiled regexes) survives, so calls are cheaper, but so would anything a call
    /// leaves behind. For trusted (built-in) plugins; the limits still apply per call, and
    /// a failed call discards the instance.
    #[serde(default)]
    pub reuse_instance: bool,
    /// Guards only: what a failed call decides (default `deny`); the project's
    /// `[plugins.on_error]` overrides it.
    #[serde(default)]
    pub on_error: Option<OnError>,
    /// Requested capabilities; only what the project also grants is usable.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Free-form configuration for the plugin, returned by the host's `config()` as a
    /// JSON object (the project's `[plugins.config.<name>]` keys override these).
    #[serde(default)]
    pub config: toml::Table,
    /// Context schemas only: the keys the task type reads under a task's `inputs:`, as
    /// a JSON-Schema-like table (`type`, `properties`, `required`,
    /// `additionalProperties`, `items`). Tasks are checked against it when created, so
    /// a misspelt key is an error with a did-you-mean instead of an input silently not
    /// shown. Static data, like the capabilities: declared here, it needs no new
    /// contract version and serves plugins of every API version.
    #[serde(default)]
    pub input_schema: Option<toml::Table>,
    /// Context schemas only: the task type the component describes (`fix_violation`).
    /// With it, a run registers the task type from the manifest and loads the component
    /// when a task of that type is first opened (the name it describes must be this one);
    /// without it, every run loads the component at set-up to ask its name.
    #[serde(default)]
    pub task_type: Option<String>,
    /// Guards only: the actions the guard judges (`["complete"]`; a state write is the
    /// action `set_field`). The host allows every other action without calling the
    /// plugin, so a guard about one action costs nothing on the others. Absent: every
    /// action is asked about.
    #[serde(default)]
    pub actions: Option<Vec<String>>,
}

/// Largest `plugin.toml` read.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Largest component file read (the built-in plugins are well under 2 MiB).
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// Longest plugin name.
const MAX_NAME_LEN: usize = 64;

impl Manifest {
    /// Reads and validates `dir/plugin.toml` (kind, API version, component file).
    pub fn load(dir: &Path) -> Result<Manifest, PluginLoadError> {
        let path = dir.join("plugin.toml");
        let bytes =
            super::read_whole(&path, MAX_MANIFEST_BYTES).map_err(|e| PluginLoadError::Io {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let text = String::from_utf8(bytes).map_err(|_| PluginLoadError::BadManifest {
            path: path.clone(),
            line: None,
            message: "not UTF-8 text".to_string(),
        })?;
        let m = Manifest::parse(&text, &path)?;
        m.component_path(dir)?;
        Ok(m)
    }

    /// The component file inside `dir`, checked: a relative path without `..`, that stays
    /// in the folder once symlinks are resolved, to a regular file of at most
    /// `MAX_COMPONENT_BYTES`. A manifest must not make the host read `/etc/passwd`, a
    /// device, or a gigabyte before any check.
    pub fn component_path(&self, dir: &Path) -> Result<PathBuf, PluginLoadError> {
        use std::path::Component;
        let bad = |message: String| PluginLoadError::BadManifest {
            path: dir.join("plugin.toml"),
            line: None,
            message: format!(
                "`component = {:?}`: {message}",
                self.component.display().to_string()
            ),
        };
        if self.component.as_os_str().is_empty()
            || !self
                .component
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(bad(
                "must be a file inside the plugin folder (a relative path without `..`)".into(),
            ));
        }
        let path = dir.join(&self.component);
        let missing = || PluginLoadError::MissingComponent {
            plugin: self.name.clone(),
            path: path.clone(),
        };
        let real = path.canonicalize().map_err(|_| missing())?;
        let root = dir.canonicalize().map_err(|_| missing())?;
        if !real.starts_with(&root) {
            return Err(bad(format!(
                "resolves to {} (through a symlink), outside the plugin folder",
                real.display()
            )));
        }
        let meta = std::fs::metadata(&real).map_err(|_| missing())?;
        if !meta.is_file() {
            return Err(bad("is not a regular file".into()));
        }
        if meta.len() > MAX_COMPONENT_BYTES {
            return Err(bad(format!(
                "is {} bytes, beyond the {} MiB a component may have",
                meta.len(),
                MAX_COMPONENT_BYTES >> 20
            )));
        }
        Ok(real)
    }

    /// Parses and validates a manifest's text (kind, API version, capabilities); `path`
    /// names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, PluginLoadError> {
        let path = path.to_path_buf();
        // An unknown capability is a capability error (naming it), not a typo in the
        // file: the plugin asks for something this host can never grant.
        if let Ok(raw) = text.parse::<toml::Table>() {
            let caps = raw.get("capabilities").and_then(|c| c.as_table());
            if let Some(unknown) = caps.and_then(|c| {
                c.keys()
                    .find(|k| !["read", "checks", "learned_rules"].contains(&k.as_str()))
            }) {
                let name = raw.get("name").and_then(|n| n.as_str());
                return Err(PluginLoadError::Capability {
                    plugin: name.unwrap_or("?").to_string(),
                    capability: unknown.clone(),
                    message: "this host grants only `read` (workspace files by glob), `checks` (declared checks by name) and `learned_rules` (the approved learned rules, true or false)".to_string(),
                });
            }
        }
        let m: Manifest = toml::from_str(text).map_err(|e| PluginLoadError::BadManifest {
            line: e.span().map(|s| 1 + text[..s.start].matches('\n').count()),
            message: e.message().to_string(),
            path: path.clone(),
        })?;
        // The error about a field, at the first line that starts with `key`.
        let bad_at = |key: &str, message: String| PluginLoadError::BadManifest {
            path: path.clone(),
            line: text
                .lines()
                .position(|l| l.trim_start().starts_with(key))
                .map(|i| i + 1),
            message,
        };
        if let Err(invalid) = check_name(&m.name) {
            return Err(bad_at("name", invalid.to_string()));
        }
        let kind = m.kind()?;
        if let Some(schema) = &m.input_schema {
            let bad = |message: &str| bad_at("[input_schema", format!("[input_schema]: {message}"));
            if kind != PluginKind::ContextSchema {
                return Err(bad("only a context-schema plugin declares task inputs"));
            }
            if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                return Err(bad(
                    "must describe an object: `type = \"object\"` with its `properties`",
                ));
            }
        }
        if let Some(task_type) = &m.task_type {
            let problem = if kind != PluginKind::ContextSchema {
                Some("only a context-schema plugin names a task type".to_string())
            } else {
                check_task_type_name(task_type).err()
            };
            if let Some(problem) = problem {
                return Err(bad_at(
                    "task_type",
                    format!("`task_type = {task_type:?}`: {problem}"),
                ));
            }
        }
        if let Some(actions) = &m.actions {
            let problem = if kind != PluginKind::Guard {
                Some("only a guard names the actions it judges".to_string())
            } else if actions.is_empty() {
                Some("lists no action: remove the line to judge every action".to_string())
            } else {
                actions.iter().find_map(|a| {
                    let ok = !a.is_empty()
                        && a.len() <= MAX_NAME_LEN
                        && a.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                    (!ok).then(|| {
                        format!("{a:?} is not an action name (lowercase letters, digits, `_`)")
                    })
                })
            };
            if let Some(problem) = problem {
                return Err(bad_at("actions", format!("`actions`: {problem}")));
            }
        }
        if ApiVersion::of(&m.api).is_none() {
            return Err(PluginLoadError::ApiMismatch {
                plugin: m.name.clone(),
                api: m.api.clone(),
                supported: SUPPORTED_APIS.join(", "),
            });
        }
        if let Err((pattern, message)) = super::capabilities::glob_set(&m.capabilities.read) {
            return Err(PluginLoadError::Capability {
                plugin: m.name.clone(),
                capability: format!("read = \"{pattern}\""),
                message,
            });
        }
        Ok(m)
    }

    /// The `[input_schema]` table as JSON (see [`Manifest::input_schema`]).
    pub fn input_schema_json(&self) -> Option<serde_json::Value> {
        self.input_schema
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok())
    }

    /// The kind, or the error naming the unknown one.
    pub fn kind(&self) -> Result<PluginKind, PluginLoadError> {
        PluginKind::from_manifest(&self.kind_name).ok_or_else(|| PluginLoadError::UnknownKind {
            plugin: self.name.clone(),
            kind: self.kind_name.clone(),
        })
    }
}

/// A task type name is lowercase ASCII letters, digits and `_` (it is a `task.yaml`
/// value and part of prompt template names, `<task_type>.<phase>.j2`).
pub fn check_task_type_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_NAME_LEN
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(format!(
            "task type name `{name}` must be lowercase letters, digits and `_` (at most {MAX_NAME_LEN})"
        ));
    }
    Ok(())
}

/// A plugin name is lowercase ASCII letters, digits and `-`, starting with a letter, at
/// most 64 characters: it is printed on terminals, written to logs and shown to the
/// model, and keys `[plugins.*.<name>]` tables.
pub fn check_name(name: &str) -> Result<(), InvalidName> {
    let ok = name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(InvalidName(agentforge_core::sanitize::line(
            &super::clean_line(name, 80),
        )))
    }
}

/// A plugin name that [`check_name`] refuses (the name, cleaned for printing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`name = {0:?}`: a plugin name is lowercase letters, digits and `-`, starts with a letter and has at most {MAX_NAME_LEN} characters (e.g. `extract-mytool`)")]
pub struct InvalidName(pub String);

/// Whether two `major.minor.patch` versions share major and minor.
fn same_minor(a: &str, b: &str) -> bool {
    let mm = |v: &str| {
        let mut it = v.trim().split('.');
        (it.next().map(str::to_string), it.next().map(str::to_string))
    };
    let (a, b) = (mm(a), mm(b));
    a.0.is_some() && a.1.is_some() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_match_on_major_and_minor() {
        assert!(same_minor("0.1.0", "0.1.3"));
        assert!(!same_minor("0.1.0", "0.2.0"));
        assert!(!same_minor("0.1.0", "0"));
    }

    #[test]
    fn bad_toml_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plugin.toml"),
            "name = \"x\"\nversion = \"1\"\nkind = extractor\n",
        )
        .unwrap();
        let e = Manifest::load(dir.path()).unwrap_err();
        assert!(
            matches!(e, PluginLoadError::BadManifest { line: Some(3), .. }),
            "{e}"
        );
    }

    #[test]
    fn actions_are_a_guard_s_and_action_names() {
        let manifest = |kind: &str, actions: &str| {
            format!(
                "name = \"g\"\nversion = \"1\"\nkind = \"{kind}\"\napi = \"0.3.0\"\ncomponent = \"g.wasm\"\nactions = {actions}\n"
            )
        };
        let path = Path::new("plugins/g/plugin.toml");
        let m = Manifest::parse(&manifest("guard", r#"["complete", "set_field"]"#), path).unwrap();
        assert_eq!(m.actions.unwrap(), ["complete", "set_field"]);
        for (kind, actions, says) in [
            ("gate", r#"["complete"]"#, "only a guard"),
            ("guard", "[]", "lists no action"),
            (
                "guard",
                r#"["Complete"]"#,
                "\"Complete\" is not an action name",
            ),
            ("guard", r#"["complete", ""]"#, "\"\" is not an action name"),
        ] {
            let e = Manifest::parse(&manifest(kind, actions), path).unwrap_err();
            assert!(
                matches!(&e, PluginLoadError::BadManifest { line: Some(6), message, .. }
                    if message.contains(says) && message.contains("actions")),
                "{kind} {actions}: {e}"
            );
        }
    }

    #[test]
    fn task_type_is_a_context_schema_s_and_a_task_type_name() {
        let manifest = |kind: &str, task_type: &str| {
            format!(
                "name = \"s\"\nversion = \"1\"\nkind = \"{kind}\"\napi = \"0.3.0\"\ncomponent = \"s.wasm\"\ntask_type = \"{task_type}\"\n"
            )
        };
        let path = Path::new("s/plugin.toml");
        let m = Manifest::parse(&manifest("context-schema", "fix_lint2"), path).unwrap();
        assert_eq!(m.task_type.as_deref(), Some("fix_lint2"));
        for (kind, task_type, says) in [
            (
                "extractor",
                "fix_lint",
                "only a context-schema plugin names a task type",
            ),
            (
                "context-schema",
                "Fix-Lint",
                "lowercase letters, digits and `_`",
            ),
            ("context-schema", "", "lowercase letters, digits and `_`"),
        ] {
            let e = Manifest::parse(&manifest(kind, task_type), path).unwrap_err();
            assert!(
                matches!(&e, PluginLoadError::BadManifest { line: Some(6), message, .. }
                    if message.contains(says) && message.contains("task_type")),
                "{kind} {task_type:?}: {e}"
            );
        }
    }

    #[test]
    fn learned_rules_is_a_capability_and_a_boolean() {
        let head = "name = \"g\"\nversion = \"1\"\nkind = \"guard\"\napi = \"0.3.0\"\ncomponent = \"g.wasm\"\n";
        let path = Path::new("g/plugin.toml");
        let m = Manifest::parse(
            &format!("{head}[capabilities]\nlearned_rules = true\n"),
            path,
        )
        .unwrap();
        assert!(m.capabilities.learned_rules);
        assert_eq!(m.capabilities.names(), ["learned_rules"]);
        assert!(!m.capabilities.is_empty());
        let e = Manifest::parse(
            &format!("{head}[capabilities]\nlearned_rules = \"yes\"\n"),
            path,
        )
        .unwrap_err();
        assert!(
            matches!(e, PluginLoadError::BadManifest { line: Some(7), .. }),
            "{e}"
        );
        let e =
            Manifest::parse(&format!("{head}[capabilities]\nrules = true\n"), path).unwrap_err();
        assert!(e.to_string().contains("`learned_rules`"), "{e}");
        // A project grants it per plugin in `[plugins.grants.<name>]`.
        let grant: crate::Capabilities = toml::from_str("learned_rules = true").unwrap();
        assert!(grant.learned_rules && grant.read.is_empty());
    }
}
