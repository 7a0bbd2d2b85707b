//! The workspace root and the confinement of model-given paths to it.

use std::ffi::OsStr;
use std::fs;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::read::{read_regular_file, BoundedRead};
use super::ToolError;

/// Top-level folders no action may touch: the harness's own state (a model editing
/// it could rewrite its budget or history) and git's internals.
const PROTECTED: [(&str, &str); 2] = [
    (
        ".agentforge",
        "`.agentforge/` holds the harness's own task state, which actions may not read or change",
    ),
    (
        ".git",
        "`.git/` holds git's internals, which actions may not read or change",
    ),
];

/// The workspace root; every file action is confined to it.
///
/// Besides confinement, a workspace knows its *protected* paths: files and folders the
/// harness itself reads (the config, the prompts and plugin folders, the task file) and
/// the project's `[tools] protected` globs. The model's write actions resolve their
/// paths with [`Workspace::resolve_for_write`], which refuses them; reads stay allowed.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical (symlink-free, absolute) root, so prefix checks are meaningful.
    root: PathBuf,
    /// Protected paths: workspace-relative, `/`-separated, ASCII-lowercased (a
    /// case-insensitive file system must not let `AgentForge.TOML` through), with the
    /// reason shown when a write is refused.
    protected: Vec<(String, String)>,
    /// `[tools] protected` patterns as given, and compiled (case-insensitive).
    protected_globs: Vec<String>,
    glob_set: GlobSet,
}

impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
            && self.protected == other.protected
            && self.protected_globs == other.protected_globs
    }
}

impl Eq for Workspace {}

/// A `[tools] protected` pattern that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protected-path glob `{pattern}`: {message}; use e.g. `secrets/**` or `*.lock`")]
pub struct ProtectedGlobError {
    /// The pattern.
    pub pattern: String,
    /// The parser's message.
    pub message: String,
}

/// The refusal message if `name` is a protected folder name (compared without
/// case: on case-insensitive file systems `.GIT` is `.git`).
fn protected_reason(name: &OsStr) -> Option<&'static str> {
    let name = name.to_str()?;
    PROTECTED
        .iter()
        .find(|(p, _)| name.eq_ignore_ascii_case(p))
        .map(|(_, why)| *why)
}

/// Compiles `[tools] protected` globs as [`Workspace::protect_globs`] matches them.
pub fn compile_protected(patterns: &[String]) -> Result<GlobSet, ProtectedGlobError> {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        let glob = GlobBuilder::new(p.trim_start_matches("./"))
            .literal_separator(true)
            .case_insensitive(true)
            .build()
            .map_err(|e| ProtectedGlobError {
                pattern: p.clone(),
                message: e.kind().to_string(),
            })?;
        builder.add(glob);
    }
    builder.build().map_err(|e| ProtectedGlobError {
        pattern: patterns.join(", "),
        message: e.to_string(),
    })
}

impl Workspace {
    /// Opens a workspace at `root`, which must be an existing directory.
    ///
    /// The root is canonicalized so that later containment checks compare real paths.
    pub fn new(root: &Path) -> Result<Workspace, ToolError> {
        let root_error = |reason: String| ToolError::Root {
            path: root.display().to_string(),
            reason,
        };
        let canonical = fs::canonicalize(root).map_err(|e| root_error(e.to_string()))?;
        if !canonical.is_dir() {
            return Err(root_error("not a directory".to_string()));
        }
        Ok(Workspace {
            root: canonical,
            protected: Vec::new(),
            protected_globs: Vec::new(),
            glob_set: GlobSet::empty(),
        })
    }

    /// Protects `path` (absolute, or relative to the root) and everything under it from
    /// the model's writes; `why` completes "`path` is protected: ...".
    ///
    /// The path is resolved like a model's path (symlinks followed, `..` judged
    /// physically), so the entry names the real file; it need not exist yet (a prompts
    /// folder the model could create is protected too). Paths outside the workspace,
    /// already unreachable for writes, and the root itself are ignored.
    pub fn protect(&mut self, path: &Path, why: impl Into<String>) {
        let abs = if path.is_absolute() {
            fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        } else {
            let Some(rel) = path.to_str() else { return };
            match self.resolve(rel) {
                Ok(abs) => abs,
                Err(_) => return,
            }
        };
        match abs.strip_prefix(&self.root) {
            Ok(inner) if !inner.as_os_str().is_empty() => {
                let key = self.relative(&abs).to_ascii_lowercase();
                if !self.protected.iter().any(|(p, _)| *p == key) {
                    self.protected.push((key, why.into()));
                }
            }
            _ => {}
        }
    }

    /// Adds the project's `[tools] protected` globs (workspace-relative, matched without
    /// case; `*` does not cross `/`, `**` does). A glob matching a folder protects
    /// everything in it.
    pub fn protect_globs(&mut self, patterns: &[String]) -> Result<(), ProtectedGlobError> {
        let mut all = self.protected_globs.clone();
        all.extend(patterns.iter().cloned());
        self.glob_set = compile_protected(&all)?;
        self.protected_globs = all;
        Ok(())
    }

    /// Why the resolved path `abs` (from [`Workspace::resolve`]) may not be written, if
    /// it is protected.
    fn protection(&self, abs: &Path) -> Option<String> {
        let rel = self.relative(abs);
        let lower = rel.to_ascii_lowercase();
        for (p, why) in &self.protected {
            if lower == *p || lower.starts_with(&format!("{p}/")) {
                return Some(why.clone());
            }
        }
        if self.glob_set.is_empty() {
            return None;
        }
        // The path and each folder above it: a glob naming a folder covers its content.
        let mut prefix = String::new();
        for part in rel.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if let Some(i) = self.glob_set.matches(&prefix).first() {
                return Some(format!(
                    "it matches `{}` in the project's `[tools] protected` list (agentforge.toml)",
                    self.protected_globs[*i]
                ));
            }
        }
        None
    }

    /// [`Workspace::resolve`] for an action that writes: protected paths are refused too,
    /// judged on the resolved path, so `./agentforge.toml`, `sub/../agentforge.toml` or a
    /// symlink to it are refused like the plain name.
    pub fn resolve_for_write(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let abs = self.resolve(rel)?;
        match self.protection(&abs) {
            None => Ok(abs),
            Some(why) => Err(ToolError::Refused {
                path: rel.to_string(),
                reason: format!(
                    "`{}` is protected ({why}); actions may not change it. Change the project's own files instead, or escalate if the task really needs this file changed",
                    self.relative(&abs)
                ),
            }),
        }
    }

    /// Reads at most `cap` bytes of the regular file `rel` (a model- or task-given path):
    /// confinement first ([`Workspace::resolve`]), then [`read_regular_file`]; errors
    /// name the path as given.
    pub fn read_bounded(&self, rel: &str, cap: u64) -> Result<BoundedRead, ToolError> {
        let abs = self.resolve(rel)?;
        read_regular_file(&abs, cap).map_err(|e| ToolError::Read(e.shown_as(rel)))
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model-given, workspace-relative path to an absolute path inside the
    /// workspace.
    ///
    /// The path is walked one component at a time against the file system, so `..`
    /// and symlinks are judged by where they really lead, not by how the text looks.
    /// Refused: empty and absolute paths, `..` that leaves the root, symlinks (at any
    /// existing prefix) leading outside the root or dangling, and anything inside
    /// `.agentforge/` or `.git/` (also when reached through a symlink). A symlink
    /// inside the workspace resolves to its target, so writes go to the real file
    /// instead of replacing the link.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
        let refuse = |reason: String| ToolError::Refused {
            path: rel.to_string(),
            reason,
        };
        if rel.trim().is_empty() {
            return Err(refuse(
                "the path is empty; give a path relative to the workspace root, e.g. `src/main.rs`"
                    .to_string(),
            ));
        }
        if rel.contains('\0') {
            return Err(refuse("the path contains a NUL byte".to_string()));
        }
        let path = Path::new(rel);
        if path.has_root() || path.is_absolute() {
            let hint = match path.strip_prefix(&self.root) {
                Ok(inner) if !inner.as_os_str().is_empty() => {
                    format!("use `{}` instead", inner.display())
                }
                _ => "give a path relative to the workspace root, e.g. `src/main.rs`".to_string(),
            };
            return Err(refuse(format!("absolute paths are not allowed; {hint}")));
        }

        let mut current = self.root.clone();
        for component in path.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    // `current` always lies inside the root, so popping the root itself
                    // is the only way to leave it.
                    if current == self.root {
                        return Err(refuse(
                            "`..` leads outside the workspace root; use a path inside the workspace"
                                .to_string(),
                        ));
                    }
                    current.pop();
                }
                Component::Normal(name) => {
                    if let Some(why) = protected_reason(name) {
                        return Err(refuse(format!("{why}; use paths of project files instead")));
                    }
                    let next = current.join(name);
                    match fs::symlink_metadata(&next) {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            let shown = self.relative(&next);
                            match fs::canonicalize(&next) {
                                Ok(target) if target.starts_with(&self.root) => current = target,
                                Ok(target) => {
                                    return Err(refuse(format!(
                                        "`{shown}` is a symlink to {} outside the workspace; only files inside the workspace can be used",
                                        target.display()
                                    )))
                                }
                                Err(_) => {
                                    return Err(refuse(format!(
                                        "`{shown}` is a broken symlink; use the path of a real file"
                                    )))
                                }
                            }
                        }
                        // Missing components are fine: write_file creates them.
                        _ => current = next,
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(refuse(
                    "absolute paths are not allowed; give a path relative to the workspace root"
                        .to_string(),
                )),
            }
        }

        // A symlink inside the workspace may still lead into a protected folder.
        if let Ok(inner) = current.strip_prefix(&self.root) {
            for component in inner.components() {
                if let Some(why) = protected_reason(component.as_os_str()) {
                    return Err(refuse(format!(
                        "{why} (the path leads there through a symlink); use paths of project files instead"
                    )));
                }
            }
        }
        Ok(current)
    }

    /// The workspace-relative form of `abs` with `/` separators (`.` for the root);
    /// paths outside the workspace are shown as given.
    pub fn relative(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(inner) if inner.as_os_str().is_empty() => ".".to_string(),
            Ok(inner) => inner
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            Err(_) => abs.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src/deep/er")).unwrap();
        fs::write(dir.path().join("src/lib.rs"), "x").unwrap();
        fs::create_dir_all(dir.path().join(".agentforge/tasks")).unwrap();
        fs::create_dir_all(dir.path().join(".git")).unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    fn refusal(ws: &Workspace, rel: &str) -> String {
        match ws.resolve(rel) {
            Err(ToolError::Refused { reason, .. }) => reason,
            other => panic!("`{rel}` was not refused: {other:?}"),
        }
    }

    #[test]
    fn new_requires_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Workspace::new(&dir.path().join("missing")),
            Err(ToolError::Root { .. })
        ));
        fs::write(dir.path().join("f"), "").unwrap();
        assert!(matches!(
            Workspace::new(&dir.path().join("f")),
            Err(ToolError::Root { .. })
        ));
    }

    #[test]
    fn resolves_paths_inside() {
        let (_d, ws) = setup();
        assert_eq!(
            ws.resolve("src/lib.rs").unwrap(),
            ws.root().join("src/lib.rs")
        );
        assert_eq!(
            ws.resolve("./src/../src/lib.rs").unwrap(),
            ws.root().join("src/lib.rs")
        );
        assert_eq!(
            ws.resolve("new/dir/file.rs").unwrap(),
            ws.root().join("new/dir/file.rs")
        );
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
        assert_eq!(
            ws.resolve(".gitignore").unwrap(),
            ws.root().join(".gitignore")
        );
    }

    #[test]
    fn refuses_absolute_paths_with_a_hint() {
        let (_d, ws) = setup();
        assert!(refusal(&ws, "/etc/passwd").contains("absolute"));
        let inside = ws.root().join("src/lib.rs");
        let reason = refusal(&ws, inside.to_str().unwrap());
        assert!(reason.contains("use `src/lib.rs` instead"), "{reason}");
    }

    #[test]
    fn refuses_parent_escapes() {
        let (_d, ws) = setup();
        assert!(refusal(&ws, "../x").contains("outside the workspace"));
        assert!(refusal(&ws, "a/../../x").contains("outside the workspace"));
        assert!(refusal(&ws, "src/deep/../../../x").contains("outside"));
        assert!(refusal(&ws, "..").contains("outside"));
    }

    #[test]
    fn refuses_protected_folders() {
        let (_d, ws) = setup();
        assert!(refusal(&ws, ".agentforge/tasks/t/state.yaml").contains(".agentforge"));
        assert!(refusal(&ws, ".agentforge/..").contains(".agentforge"));
        assert!(refusal(&ws, "./.git/config").contains(".git"));
        assert!(refusal(&ws, "sub/.git/HEAD").contains(".git"));
        assert!(refusal(&ws, ".AgentForge/x").contains(".agentforge"));
    }

    #[test]
    fn refuses_symlink_to_outside() {
        let (_d, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path().join("secret"), ws.root().join("link")).unwrap();
        assert!(refusal(&ws, "link").contains("outside the workspace"));
        symlink("/tmp", ws.root().join("tmp")).unwrap();
        assert!(refusal(&ws, "tmp/anything").contains("symlink"));
    }

    #[test]
    fn refuses_symlinked_dir_inside_pointing_outside() {
        let (_d, ws) = setup();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), ws.root().join("src/deep/out")).unwrap();
        let reason = refusal(&ws, "src/deep/out/new.rs");
        assert!(reason.contains("src/deep/out"), "{reason}");
    }

    #[test]
    fn parent_of_a_symlinked_dir_is_judged_physically() {
        let (_d, ws) = setup();
        // `up` points at src/deep/er; `up/../..` is physically `src`, not the root's parent.
        symlink(ws.root().join("src/deep/er"), ws.root().join("up")).unwrap();
        assert_eq!(
            ws.resolve("up/../../lib.rs").unwrap(),
            ws.root().join("src/lib.rs")
        );
        // A symlink to a deep folder lets `..` climb only as far as the root.
        assert!(refusal(&ws, "up/../../../../x").contains("outside"));
    }

    #[test]
    fn symlinks_inside_resolve_to_target_and_protect_state() {
        let (_d, ws) = setup();
        symlink("src/lib.rs", ws.root().join("alias.rs")).unwrap();
        assert_eq!(
            ws.resolve("alias.rs").unwrap(),
            ws.root().join("src/lib.rs")
        );
        symlink(".agentforge/tasks", ws.root().join("state")).unwrap();
        assert!(refusal(&ws, "state/x").contains(".agentforge"));
        symlink("nowhere", ws.root().join("dangling")).unwrap();
        assert!(refusal(&ws, "dangling").contains("broken symlink"));
    }

    #[test]
    fn relative_uses_slashes() {
        let (_d, ws) = setup();
        assert_eq!(ws.relative(&ws.root().join("src/lib.rs")), "src/lib.rs");
        assert_eq!(ws.relative(ws.root()), ".");
        assert_eq!(ws.relative(Path::new("/elsewhere")), "/elsewhere");
    }
}
