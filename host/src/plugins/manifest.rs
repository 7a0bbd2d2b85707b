//! `plugin.toml`: what a plugin folder declares about itself.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Capabilities, PluginLoadError};

/// API versions of `wit/plugin.wit` this host can run, newest first. A plugin's `api`
/// matches one when major and minor are equal (the compatibility policy in the WIT file).
pub const SUPPORTED_APIS: &[&str] = &["0.2.0", "0.1.0"];

/// A supported API version, as the loader dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// `agentforge:plugin@0.1.x` (frozen: extractor, gate, guard).
    V0_1,
    /// `agentforge:plugin@0.2.x` (current).
    V0_2,
}

impl ApiVersion {
    /// The supported version `api` (`major.minor.patch`) is compatible with.
    pub fn of(api: &str) -> Option<ApiVersion> {
        if same_minor("0.2.0", api) {
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
}

impl Manifest {
    /// Reads and validates `dir/plugin.toml` (kind, API version, component file).
    pub fn load(dir: &Path) -> Result<Manifest, PluginLoadError> {
        let path = dir.join("plugin.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| PluginLoadError::Io {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let m = Manifest::parse(&text, &path)?;
        if !dir.join(&m.component).is_file() {
            return Err(PluginLoadError::MissingComponent {
                plugin: m.name.clone(),
                path: dir.join(&m.component),
            });
        }
        Ok(m)
    }

    /// Parses and validates a manifest's text (kind, API version, capabilities); `path`
    /// names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, PluginLoadError> {
        let path = path.to_path_buf();
        // An unknown capability is a capability error (naming it), not a typo in the
        // file: the plugin asks for something this host can never grant.
        if let Ok(raw) = text.parse::<toml::Table>() {
            let caps = raw.get("capabilities").and_then(|c| c.as_table());
            if let Some(unknown) =
                caps.and_then(|c| c.keys().find(|k| *k != "read" && *k != "checks"))
            {
                let name = raw.get("name").and_then(|n| n.as_str());
                return Err(PluginLoadError::Capability {
                    plugin: name.unwrap_or("?").to_string(),
                    capability: unknown.clone(),
                    message: "this host grants only `read` (workspace files by glob) and `checks` (declared checks by name)".to_string(),
                });
            }
        }
        let m: Manifest = toml::from_str(text).map_err(|e| PluginLoadError::BadManifest {
            line: e.span().map(|s| 1 + text[..s.start].matches('\n').count()),
            message: e.message().to_string(),
            path: path.clone(),
        })?;
        m.kind()?;
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

    /// The kind, or the error naming the unknown one.
    pub fn kind(&self) -> Result<PluginKind, PluginLoadError> {
        match self.kind_name.as_str() {
            "extractor" => Ok(PluginKind::Extractor),
            "gate" => Ok(PluginKind::Gate),
            "guard" => Ok(PluginKind::Guard),
            "context-schema" => Ok(PluginKind::ContextSchema),
            "tool" => Ok(PluginKind::Tool),
            other => Err(PluginLoadError::UnknownKind {
                plugin: self.name.clone(),
                kind: other.to_string(),
            }),
        }
    }
}

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
}
