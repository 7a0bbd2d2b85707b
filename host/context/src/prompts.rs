//! System prompt templates, one per phase and optionally per task type.
//!
//! Templates are minijinja files named `<task_type>.<phase>.j2` or `<phase>.j2`. The
//! workspace's `prompts/` folder (or `[prompts] dir`) overrides the built-in copies
//! compiled into the binary from the repository's `prompts/` folder. Lookup order:
//! project `<task_type>.<phase>.j2`, built-in `<task_type>.<phase>.j2`, project
//! `<phase>.j2`, built-in `<phase>.j2`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

/// Built-in templates, compiled in so the binary works from any folder.
const BUILTIN: &[(&str, &str)] = &[
    ("analyze.j2", include_str!("../../../prompts/analyze.j2")),
    ("plan.j2", include_str!("../../../prompts/plan.j2")),
    (
        "implement.j2",
        include_str!("../../../prompts/implement.j2"),
    ),
    ("verify.j2", include_str!("../../../prompts/verify.j2")),
    (
        "fix_violation.implement.j2",
        include_str!("../../../prompts/fix_violation.implement.j2"),
    ),
    (
        "write_tests.implement.j2",
        include_str!("../../../prompts/write_tests.implement.j2"),
    ),
    (
        "implement_feature.implement.j2",
        include_str!("../../../prompts/implement_feature.implement.j2"),
    ),
];

/// Templates compiled in this process, by their text's digest: a step renders the same
/// few templates, and compiling one was half the cost of rendering it. Bounded; past it,
/// compiling starts over.
static COMPILED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<u128, Arc<minijinja::Environment<'static>>>>,
> = std::sync::LazyLock::new(Default::default);
const COMPILED_ENTRIES: usize = 64;

/// An environment holding `text` compiled as template `t`, with strict undefined
/// variables and the rendering bounded by fuel (templates may come from task-type
/// plugins).
fn compiled(text: String) -> Result<Arc<minijinja::Environment<'static>>, minijinja::Error> {
    let key = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
    if let Some(env) = COMPILED.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(env);
    }
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.add_template_owned("t", text)?;
    let env = Arc::new(env);
    if let Ok(mut c) = COMPILED.lock() {
        if c.len() >= COMPILED_ENTRIES {
            c.clear();
        }
        c.insert(key, Arc::clone(&env));
    }
    Ok(env)
}

/// Values a template can use.
#[derive(Debug, Clone, Serialize)]
pub struct PromptVars<'a> {
    /// Task type.
    pub task_type: &'a str,
    /// Current phase.
    pub phase: &'a str,
    /// The task's goal.
    pub goal: &'a str,
    /// Step about to run.
    pub step: u64,
    /// Step budget.
    pub max_steps: u64,
    /// Names of the actions offered.
    pub actions: Vec<String>,
}

/// Errors finding or rendering a template.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// No template for this phase.
    #[error("no system prompt template for task type `{task_type}`, phase `{phase}`: add {phase}.j2 or {task_type}.{phase}.j2 to the prompts folder")]
    Missing {
        /// Task type.
        task_type: String,
        /// Phase.
        phase: String,
    },
    /// A template does not render.
    #[error("prompt template {name}: {message}")]
    Render {
        /// Template file.
        name: String,
        /// minijinja's message, with the line.
        message: String,
    },
}

/// Fuel for rendering one template (minijinja instructions): plenty for a prompt, and a
/// bound on a template (a plugin's) that loops.
const TEMPLATE_FUEL: u64 = 200_000;

/// Whether `source` compiles as a template (the message says where it does not).
pub fn check_template(source: &str) -> Result<(), minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.add_template_owned("t", source.to_string())
}

/// Largest project template file read (a template is a page of text).
const MAX_TEMPLATE_FILE_BYTES: u64 = 1 << 20;

/// The prompt templates of a run.
#[derive(Debug, Clone, Default)]
pub struct Prompts {
    override_dir: Option<PathBuf>,
}

impl Prompts {
    /// Built-in templates, overridden by files in `override_dir` when it exists.
    pub fn new(override_dir: Option<&Path>) -> Prompts {
        Prompts {
            override_dir: override_dir.filter(|d| d.is_dir()).map(Path::to_path_buf),
        }
    }

    /// The template `name`: the project's file, else the task type's (a schema plugin's),
    /// else the built-in one.
    fn source(&self, name: &str, schema: &[(String, String)]) -> Option<(String, String)> {
        if let Some(dir) = &self.override_dir {
            let p = dir.join(name);
            // A workspace file: regular files only, bounded (a FIFO must not hang a step).
            if let Ok(bytes) =
                agentforge_store::tools::read_regular_file(&p, MAX_TEMPLATE_FILE_BYTES)
                    .and_then(|r| r.complete())
            {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                return Some((p.display().to_string(), text));
            }
        }
        if let Some((n, t)) = schema.iter().find(|(n, _)| n == name) {
            return Some((format!("task type's {n}"), t.clone()));
        }
        BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, t)| (format!("built-in {n}"), (*t).to_string()))
    }

    /// Renders the system prompt for the step described by `vars`, with the built-in
    /// templates only.
    pub fn render(&self, vars: &PromptVars<'_>) -> Result<String, PromptError> {
        self.render_with(vars, &[])
    }

    /// Renders the system prompt for the step described by `vars`; `schema` holds the
    /// templates (name, source) the task type brings.
    pub fn render_with(
        &self,
        vars: &PromptVars<'_>,
        schema: &[(String, String)],
    ) -> Result<String, PromptError> {
        let specific = format!("{}.{}.j2", vars.task_type, vars.phase);
        let generic = format!("{}.j2", vars.phase);
        let (name, text) = self
            .source(&specific, schema)
            .or_else(|| self.source(&generic, schema))
            .ok_or_else(|| PromptError::Missing {
                task_type: vars.task_type.to_string(),
                phase: vars.phase.to_string(),
            })?;
        let render_err = |e: minijinja::Error| PromptError::Render {
            name: name.clone(),
            message: e.to_string(),
        };
        let env = compiled(text).map_err(render_err)?;
        let tmpl = env.get_template("t").map_err(render_err)?;
        let mut out = CappedWriter::default();
        if let Err(e) = tmpl.render_captured_to(vars, &mut out) {
            return Err(if out.over {
                PromptError::Render {
                    name: name.clone(),
                    message: format!(
                        "renders more than {} KiB; a system prompt is a few KiB (is a loop or a repeat unbounded?)",
                        MAX_PROMPT_BYTES >> 10
                    ),
                }
            } else {
                render_err(e)
            });
        }
        let out = String::from_utf8_lossy(&out.bytes);
        Ok(out.trim_end().to_string())
    }
}

/// Largest rendered system prompt: fuel bounds a template's instructions, not what one
/// instruction writes (`{{ 'x' * 100000000 }}`), and the text is then tokenized whole.
pub const MAX_PROMPT_BYTES: usize = 256 * 1024;

/// Collects a rendering and fails the write that would go past [`MAX_PROMPT_BYTES`].
#[derive(Default)]
struct CappedWriter {
    bytes: Vec<u8>,
    over: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_PROMPT_BYTES {
            self.over = true;
            return Err(std::io::Error::other("prompt output cap reached"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(task_type: &'static str, phase: &'static str) -> PromptVars<'static> {
        PromptVars {
            task_type,
            phase,
            goal: "Make the test pass",
            step: 2,
            max_steps: 20,
            actions: vec!["read_file".into(), "edit_file".into()],
        }
    }

    #[test]
    fn task_type_specific_template_wins() {
        let p = Prompts::new(None);
        let s = p.render(&vars("fix_violation", "implement")).unwrap();
        assert!(
            s.starts_with("You are fixing a conformance violation"),
            "{s}"
        );
        assert!(s.contains("read_file, edit_file"));
        let g = p.render(&vars("other", "implement")).unwrap();
        assert!(g.contains("Phase: IMPLEMENT"));
    }

    #[test]
    fn every_phase_of_every_builtin_task_type_has_a_template() {
        let p = Prompts::new(None);
        let registry = crate::schemas::SchemaRegistry::default();
        for name in registry.names() {
            let schema = registry.get(&name).unwrap();
            for phase in &schema.phase_graph().phases {
                if phase.terminal {
                    continue;
                }
                let v = PromptVars {
                    task_type: &name,
                    phase: &phase.name,
                    goal: "g",
                    step: 1,
                    max_steps: 2,
                    actions: vec![],
                };
                p.render(&v)
                    .unwrap_or_else(|e| panic!("{name}/{}: {e}", phase.name));
            }
        }
    }

    #[test]
    fn project_folder_overrides_builtin() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("analyze.j2"), "Custom {{ phase }}").unwrap();
        let p = Prompts::new(Some(dir.path()));
        assert_eq!(p.render(&vars("x", "analyze")).unwrap(), "Custom analyze");
    }

    #[test]
    fn a_template_that_renders_too_much_is_an_error_not_an_abort() {
        let bomb = "{% set line = 'x' * 1024 %}{% for a in range(64) %}{% for b in range(64) %}{% for c in range(64) %}{{ line }}{% endfor %}{% endfor %}{% endfor %}";
        let schema = vec![("x.analyze.j2".to_string(), bomb.to_string())];
        let e = Prompts::new(None)
            .render_with(&vars("x", "analyze"), &schema)
            .unwrap_err();
        assert!(e.to_string().contains("renders more than 256 KiB"), "{e}");
        let big = vec![(
            "x.analyze.j2".to_string(),
            "{{ 'y' * 100000000 }}".to_string(),
        )];
        let e = Prompts::new(None)
            .render_with(&vars("x", "analyze"), &big)
            .unwrap_err();
        assert!(e.to_string().contains("renders more than"), "{e}");
    }

    /// A compiled template is kept for the next render: each render still gets its own
    /// variables and its own fuel, and an error names the template it came from.
    #[test]
    fn a_kept_template_renders_each_call_afresh() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("analyze.j2"),
            "Step {{ step }} of {{ goal }}",
        )
        .unwrap();
        let p = Prompts::new(Some(dir.path()));
        let mut v = vars("x", "analyze");
        assert_eq!(p.render(&v).unwrap(), "Step 2 of Make the test pass");
        v.step = 3;
        v.goal = "Another goal";
        assert_eq!(p.render(&v).unwrap(), "Step 3 of Another goal");
        // 256 * 1024 iterations use up the fuel; again from the kept template.
        let spin = "{% for a in range(256) %}{% for b in range(1024) %}{% endfor %}{% endfor %}";
        for (task_type, name) in [("x", "x.analyze.j2"), ("y", "y.analyze.j2")] {
            let schema = vec![(name.to_string(), spin.to_string())];
            for _ in 0..2 {
                let e = p
                    .render_with(&vars(task_type, "analyze"), &schema)
                    .unwrap_err();
                assert!(e.to_string().contains(name), "{e}");
                assert!(e.to_string().contains("fuel"), "{e}");
            }
        }
        // Within the fuel, it renders every time.
        let small = "{% for a in range(100) %}{% endfor %}ok {{ step }}";
        let schema = vec![("x.analyze.j2".to_string(), small.to_string())];
        for _ in 0..3 {
            assert_eq!(
                p.render_with(&vars("x", "analyze"), &schema).unwrap(),
                "ok 2"
            );
        }
    }

    #[test]
    fn missing_and_broken_templates_are_named() {
        let p = Prompts::new(None);
        let err = p.render(&vars("x", "nosuch")).unwrap_err();
        assert!(err.to_string().contains("nosuch.j2"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("analyze.j2"), "{{ unknown_var }}").unwrap();
        let err = Prompts::new(Some(dir.path()))
            .render(&vars("x", "analyze"))
            .unwrap_err();
        assert!(err.to_string().contains("analyze.j2"), "{err}");
    }
}
