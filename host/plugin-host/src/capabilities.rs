//! Capabilities: none by default. A plugin's manifest requests, the project grants, and
//! the host enforces the intersection on every host call.

use std::sync::{Arc, RwLock};

use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use agentforge_core::command::CommandOutput;
use agentforge_core::task::CheckSpec;
use agentforge_store::commands::{run_command, CommandLimits};
use agentforge_store::tools::Workspace;

/// Largest file `read-file` returns: a plugin call's result is bounded anyway (memory
/// limit), and reading a huge file would eat the call's deadline inside the host.
pub const MAX_READ_BYTES: u64 = 1 << 20;

/// Capabilities as a manifest requests them (`[capabilities]` in `plugin.toml`) or a
/// project grants them (`[plugins.grants.<plugin>]` in `agentforge.toml`). An unknown
/// key is an error, so a plugin cannot ask for something the host silently ignores.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Workspace paths the plugin may read through `read-file`: globs relative to the
    /// workspace root (`src/**/*.rs`; `*` does not cross `/`, `**` does).
    #[serde(default)]
    pub read: Vec<String>,
    /// Checks the plugin may run through `run-check`, by name (`*`: any the task declares).
    #[serde(default)]
    pub checks: Vec<String>,
    /// The rules a person approved (`PluginsConfig::learned_rules`), handed to the
    /// plugin as the `rules` key of its `config()`. Data that decides what the agent may
    /// do, so a folder plugin gets it only where the project grants it; built-ins are
    /// trusted with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learned_rules: bool,
}

impl Capabilities {
    /// Whether nothing is requested (or granted).
    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.checks.is_empty() && !self.learned_rules
    }

    /// The names of the capabilities requested (or granted), as `[capabilities]` spells
    /// them: `read`, `checks`, `learned_rules`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if !self.read.is_empty() {
            names.push("read");
        }
        if !self.checks.is_empty() {
            names.push("checks");
        }
        if self.learned_rules {
            names.push("learned_rules");
        }
        names
    }
}

/// The key of `config()` that holds the learned rules for a plugin granted
/// [`Capabilities::learned_rules`]; the host owns it in the config of every plugin that
/// requests the capability.
pub const LEARNED_RULES_KEY: &str = "rules";

/// The checks of the task being run, which `run-check` may run: set by the executor when
/// it opens a task, shared with every plugin's `CheckAccess`.
#[derive(Debug, Clone, Default)]
pub struct DeclaredChecks(Arc<RwLock<(Vec<CheckSpec>, Option<CommandLimits>)>>);

impl DeclaredChecks {
    /// Declares the task's checks and the command limits they run with.
    pub fn set(&self, checks: &[CheckSpec], limits: CommandLimits) {
        let mut d = self.0.write().unwrap_or_else(|p| p.into_inner());
        *d = (checks.to_vec(), Some(limits));
    }

    fn get(&self, name: &str) -> Option<(CheckSpec, CommandLimits)> {
        let d = self.0.read().unwrap_or_else(|p| p.into_inner());
        let limits = d.1?;
        let check = d.0.iter().find(|c| c.name == name)?.clone();
        Some((check, limits))
    }

    fn names(&self) -> Vec<String> {
        let d = self.0.read().unwrap_or_else(|p| p.into_inner());
        d.0.iter().map(|c| c.name.clone()).collect()
    }
}

/// Which checks one plugin's `run-check` may run: names both requested and granted, among
/// those the task declares.
pub(crate) struct CheckAccess {
    pub(crate) plugin: String,
    pub(crate) workspace: Option<Workspace>,
    pub(crate) requested: Vec<String>,
    pub(crate) granted: Vec<String>,
    pub(crate) declared: DeclaredChecks,
}

impl CheckAccess {
    /// Runs check `name`, or says why it is refused.
    pub(crate) fn run(&self, name: &str) -> Result<CommandOutput, String> {
        let refuse = |why: String| format!("run-check `{name}` refused: {why}");
        let listed = |names: &[String]| names.iter().any(|n| n == "*" || n == name);
        if !listed(&self.requested) {
            return Err(refuse(
                "not in the plugin's requested `[capabilities] checks`".to_string(),
            ));
        }
        if !listed(&self.granted) {
            return Err(refuse(format!(
                "the project does not grant it (agentforge.toml `[plugins.grants.{}] checks = [\"{name}\"]`)",
                self.plugin
            )));
        }
        let Some(ws) = &self.workspace else {
            return Err(refuse("no workspace is open in this host".to_string()));
        };
        let Some((check, mut limits)) = self.declared.get(name) else {
            return Err(refuse(format!(
                "the task declares no check named `{name}` (its checks: {})",
                self.declared.names().join(", ")
            )));
        };
        if let Some(t) = check.timeout_secs {
            limits.timeout = std::time::Duration::from_secs(t);
        }
        // Plugin calls are synchronous and may come from inside the executor's async
        // runtime: the command runs on a thread of its own with its own small runtime.
        let root = ws.root().to_path_buf();
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| refuse(format!("cannot start the command runtime: {e}")))?;
                rt.block_on(run_command(&check.command, &root, &limits))
                    .map_err(|e| refuse(e.to_string()))
            })
            .join()
            .unwrap_or_else(|_| Err(refuse("the command runner panicked".to_string())))
        })
    }
}

/// The globs compiled; `Err` carries the bad pattern and why.
pub(crate) fn glob_set(patterns: &[String]) -> Result<GlobSet, (String, String)> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| (p.clone(), e.to_string()))?;
        b.add(g);
    }
    b.build().map_err(|e| (patterns.join(", "), e.to_string()))
}

/// What one plugin's `read-file` may read: paths matching both a requested and a granted
/// glob, resolved inside the workspace.
pub(crate) struct ReadAccess {
    plugin: String,
    /// `None` when the plugins were loaded without a workspace (nothing is readable).
    workspace: Option<Workspace>,
    requested: GlobSet,
    granted: GlobSet,
    granted_empty: bool,
}

impl ReadAccess {
    pub(crate) fn new(
        plugin: &str,
        workspace: Option<Workspace>,
        requested: &[String],
        granted: &[String],
    ) -> Result<ReadAccess, (String, String)> {
        Ok(ReadAccess {
            plugin: plugin.to_string(),
            workspace,
            requested: glob_set(requested)?,
            granted: glob_set(granted)?,
            granted_empty: granted.is_empty(),
        })
    }

    /// The file's text, or why it is refused (the message the plugin sees and the log keeps).
    pub(crate) fn read(&self, path: &str) -> Result<String, String> {
        let refuse = |why: String| format!("read-file `{path}` refused: {why}");
        let Some(ws) = &self.workspace else {
            return Err(refuse("no workspace is open in this host".to_string()));
        };
        // Confinement first, exactly as for the model's file actions: `..`, absolute
        // paths, symlinks leading out and `.git`/`.agentforge` never get as far as a glob.
        let abs = ws.resolve(path).map_err(|e| refuse(e.to_string()))?;
        // Globs are matched on the resolved path, so `src/../secrets` or a symlink cannot
        // dress an ungranted file up as a granted one.
        let rel = ws.relative(&abs);
        if !self.requested.is_match(&rel) {
            return Err(refuse(format!(
                "`{rel}` is not in the plugin's requested `[capabilities] read` globs"
            )));
        }
        if !self.granted.is_match(&rel) {
            let why = if self.granted_empty {
                format!(
                    "the project grants plugin `{}` no `read` capability (agentforge.toml `[plugins.grants.{}] read = [...]`)",
                    self.plugin, self.plugin
                )
            } else {
                format!(
                    "`{rel}` is not in the globs the project grants (agentforge.toml `[plugins.grants.{}] read`)",
                    self.plugin
                )
            };
            return Err(refuse(why));
        }
        // Regular files only (a FIFO or device never blocks or floods the call), at most
        // the cap, whatever the file claims or becomes.
        let bytes = agentforge_store::tools::read_regular_file(&abs, MAX_READ_BYTES)
            .and_then(|r| r.complete())
            .map_err(|e| refuse(e.shown_as(&rel).to_string()))?;
        String::from_utf8(bytes).map_err(|_| refuse(format!("`{rel}` is not UTF-8 text")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_intersection_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        std::fs::write(dir.path().join("src/a/x.rs"), "fn x() {}").unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "lib").unwrap();
        std::fs::write(dir.path().join("README.md"), "readme").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let access = ReadAccess::new(
            "p",
            Some(ws),
            &["src/**/*.rs".into(), "README.md".into()],
            &["src/**".into()],
        )
        .unwrap();
        assert_eq!(access.read("src/a/x.rs").unwrap(), "fn x() {}");
        assert_eq!(access.read("src/a/../lib.rs").unwrap(), "lib");
        let e = access.read("README.md").unwrap_err();
        assert!(e.contains("not in the globs the project grants"), "{e}");
        let e = access.read("Cargo.toml").unwrap_err();
        assert!(e.contains("requested"), "{e}");
        let e = access.read("../../etc/passwd").unwrap_err();
        assert!(e.contains("outside the workspace"), "{e}");
        let e = access.read("/etc/passwd").unwrap_err();
        assert!(e.contains("absolute"), "{e}");
    }
}
