//! `agentforge plugins new`: templates for a new plugin crate.
//!
//! A scaffolded crate is its own Cargo workspace (so it builds wherever it is created,
//! even inside another workspace), depends on the SDK by path, and builds with
//! `cargo build --target wasm32-wasip2 --release` into a component that
//! `agentforge plugins check` accepts once it is copied next to its `plugin.toml`.

use std::path::{Component, Path, PathBuf};

/// Every plugin kind of the WIT package, whether or not the SDK can build it yet.
pub const KINDS: &[&str] = &["extractor", "gate", "guard", "context-schema", "tool"];

/// The kinds the SDK can build (and this scaffolder has a template for).
pub const SUPPORTED_KINDS: &[&str] = &["extractor"];

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
    } else if KINDS.contains(&kind) || kind == "context_schema" {
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
agentforge-plugin-sdk = {{ path = "{sdk}" }}

# Its own workspace: builds alone wherever the folder is.
[workspace]

[profile.release]
# Speed over size: the rules run on every output (the host caches the compiled component).
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
    format!(
        r#"# Read by the host: `agentforge plugins check .` validates this folder.
name = "{name}"
version = "0.1.0"
kind = "{kind}"
api = "0.1.0"                 # the WIT package (wit/plugin.wit) the SDK builds against
component = "{component}"   # copy target/wasm32-wasip2/release/{component} here
description = "TODO: one line for `agentforge plugins list`"

[limits]
# Per-call limits; the defaults are shown.
# memory_mib = 64
# fuel = 2000000000
# deadline_ms = 2000

[capabilities]
# None can be granted yet: keep this table empty.
"#
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

const GITIGNORE: &str = "/target\n";

/// Creates `<parent>/<name>/` with `Cargo.toml`, `plugin.toml`, `src/lib.rs` and
/// `.gitignore`. The SDK dependency is a path relative to the new folder. When the SDK's
/// workspace has a `Cargo.lock`, it is copied too, so the crate builds with the
/// dependency versions the SDK is tested with.
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
        (PathBuf::from("src/lib.rs"), extractor_lib_rs(&plugin.name)),
        (PathBuf::from(".gitignore"), GITIGNORE.to_string()),
    ];
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
        assert!(check_kind("extractor").is_ok());
        let e = check_kind("gate").unwrap_err().to_string();
        assert!(
            e.contains("`gate`") && e.contains("supports: extractor"),
            "{e}"
        );
        let e = check_kind("formatter").unwrap_err().to_string();
        assert!(e.contains("unknown plugin kind `formatter`"), "{e}");
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
        let p: toml::Table = toml::from_str(&plugin_toml("extractor", "my-lint")).unwrap();
        assert_eq!(p["component"].as_str(), Some("my_lint.wasm"));
        assert_eq!(p["kind"].as_str(), Some("extractor"));
        assert!(extractor_lib_rs("my-lint").contains("\"{3} at {1}:{2}: {4}\""));
    }
}
