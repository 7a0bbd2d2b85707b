//! `plugin.toml`: what a plugin folder declares about itself.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::PluginLoadError;

/// API versions of `wit/plugin.wit` this host can run, newest first. A plugin's `api`
/// matches one when major and minor are equal (the compatibility policy in the WIT file).
pub const SUPPORTED_APIS: &[&str] = &["0.1.0"];

/// The plugin kinds this host loads. The WIT package defines more worlds than the host
/// runs yet; those kinds are refused with a clear error instead of being half-loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// Reads tool output into facts (`extractor` world).
    Extractor,
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::Extractor => "extractor",
        })
    }
}

/// Per-plugin overrides of the call limits (`[limits]`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
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
    /// Requested capabilities; none are grantable yet, so this must be empty.
    #[serde(default)]
    pub capabilities: toml::Table,
    /// Free-form configuration for the plugin (not passed to it yet).
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
        let m: Manifest = toml::from_str(&text).map_err(|e| PluginLoadError::BadManifest {
            line: e.span().map(|s| 1 + text[..s.start].matches('\n').count()),
            message: e.message().to_string(),
            path: path.clone(),
        })?;
        m.kind()?;
        if !SUPPORTED_APIS.iter().any(|s| same_minor(s, &m.api)) {
            return Err(PluginLoadError::ApiMismatch {
                plugin: m.name.clone(),
                api: m.api.clone(),
                supported: SUPPORTED_APIS.join(", "),
            });
        }
        if let Some(cap) = m.capabilities.keys().next() {
            return Err(PluginLoadError::Capability {
                plugin: m.name.clone(),
                capability: cap.clone(),
            });
        }
        if !dir.join(&m.component).is_file() {
            return Err(PluginLoadError::MissingComponent {
                plugin: m.name.clone(),
                path: dir.join(&m.component),
            });
        }
        Ok(m)
    }

    /// The kind, or the error naming the unknown one.
    pub fn kind(&self) -> Result<PluginKind, PluginLoadError> {
        match self.kind_name.as_str() {
            "extractor" => Ok(PluginKind::Extractor),
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
