//! `agentforge run -p "PROMPT"` and `--goal-file FILE`: a task spec derived from a
//! sentence, written to `.agentforge/specs/<id>.yaml` and then run like any task file.
//!
//! What is derived, and from what (docs/prompt-runs.md says the same for users):
//!
//! - **id**: the prompt's first words, lowercased, `-`-joined (at most 6 words and 40
//!   characters; `task` when none is left), with `-2`, `-3`... when a task or a spec of
//!   that id exists: every prompt run is a new task (`agentforge resume <id>` continues
//!   an old one).
//! - **task type** ([`choose_task_type`]), first rule that matches:
//!   1. `write_tests` when the prompt starts with *write, add, create, generate, extend,
//!      improve, increase* or *cover* (after *please*, *can you*...) and *test*, *tests*
//!      or *coverage* comes within its next three words, before any *for, to, of, in,
//!      on, with, from, into, at, by* ("add more unit tests", not "add support for test
//!      fixtures");
//!   2. `fix_violation` when any word is one of [`FIX_WORDS`] (*fix, bug, failing,
//!      broken, crash, regression, panic*...);
//!   3. `implement_feature` otherwise.
//!
//!   `--task-type NAME` chooses instead.
//! - **inputs**: the workspace files the prompt names (`src/date.rs`: a word with a `/`
//!   or an extension that is an existing file of the workspace) become the task type's
//!   target (`violation.file_path`, `target_files`, `target_test_file`); the prompt is
//!   the `spec` of `implement_feature` and `write_tests` and the violation's `message`.
//! - **goal**: the prompt. A prompt longer than [`GOAL_MAX_CHARS`] (a goal file, usually)
//!   has its first paragraph as the goal, cut with `text::cut`, and the whole text in
//!   the inputs (`spec`, the violation's `message`, else `check_definition.description`).
//! - **checks** ([`discover_checks`]), first that applies: `--check CMD` (repeatable);
//!   none in the spec when `agentforge.toml` sets `[commands]` (they apply); else
//!   discovered from the workspace root. None at all is an error that says what to pass.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use agentforge_core::task::{CheckKind, CheckSpec, TaskSpec};
use agentforge_store::tools::{read_regular_file, ReadError, Workspace};

/// Where derived specs are written, relative to the workspace root.
pub const SPECS_DIR: &str = ".agentforge/specs";

/// The longest prompt kept whole as the goal (the task frame shows the goal every step).
pub const GOAL_MAX_CHARS: usize = 600;

/// The most bytes read of a goal file, or of a project file read to discover checks.
pub const READ_CAP: u64 = 64 * 1024;

/// Words that make a prompt a fix (`fix_violation`), rule 2 of [`choose_task_type`].
pub const FIX_WORDS: &[&str] = &[
    "fix",
    "fixes",
    "fixing",
    "bug",
    "bugs",
    "buggy",
    "failing",
    "fails",
    "broken",
    "crash",
    "crashes",
    "crashing",
    "regression",
    "panic",
    "panics",
    "panicking",
];

/// First words that, followed by a test word, make a prompt `write_tests` (rule 1).
pub const TEST_VERBS: &[&str] = &[
    "write", "add", "create", "generate", "extend", "improve", "increase", "cover",
];

/// The words rule 1 looks for within the three words after the verb.
const TEST_WORDS: &[&str] = &["test", "tests", "coverage"];

/// Words that end the verb's object in rule 1 ("add support *for* test fixtures").
const PREPOSITIONS: &[&str] = &[
    "for", "to", "of", "in", "on", "with", "from", "into", "at", "by",
];

/// Politeness skipped before the first word of rule 1.
const FILLER: &[&str] = &["please", "pls", "can", "could", "would", "you", "kindly"];

/// Why a task could not be derived; each message names the flag or file, the value,
/// and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// `-p ""` or an empty goal file.
    #[error("{origin} is empty: say what the task should achieve, e.g. -p \"make the date parser accept ISO week dates\"")]
    EmptyGoal {
        /// `-p` or `--goal-file FILE`.
        origin: String,
    },
    /// The goal file cannot be read.
    #[error("--goal-file {path}: {source}")]
    GoalFile {
        /// The file as given.
        path: String,
        /// The bounded read's error.
        #[source]
        source: ReadError,
    },
    /// The goal file is over [`READ_CAP`].
    #[error("--goal-file {path}: {size} bytes, over the {cap} bytes a goal may have; put the background in AGENTS.md or .agentforge/instructions.md (the context shows them) and keep the goal to what the task must achieve")]
    GoalTooLarge {
        /// The file as given.
        path: String,
        /// Its size.
        size: u64,
        /// [`READ_CAP`].
        cap: u64,
    },
    /// `--check ""`.
    #[error("--check {index}: the command is empty; give the shell command that verifies the change, e.g. --check \"cargo test\"")]
    EmptyCheck {
        /// 1-based position among the `--check` flags.
        index: usize,
    },
    /// Nothing says how to verify the change.
    #[error("no check for this task: nothing in {root} says how to test it (looked for {looked_for}); pass the command that verifies the change with --check CMD (repeatable, e.g. --check \"cargo test\"), or set [commands] test in agentforge.toml")]
    NoChecks {
        /// The workspace root.
        root: String,
        /// What discovery looks for.
        looked_for: String,
    },
    /// Writing the spec failed.
    #[error("cannot write the task spec {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Where the goal comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalSource {
    /// `-p TEXT`.
    Prompt(String),
    /// `--goal-file FILE`.
    File(PathBuf),
}

/// What `run -p` / `--goal-file` asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The goal.
    pub goal: GoalSource,
    /// `--check CMD`, in order.
    pub checks: Vec<String>,
    /// `--task-type NAME`.
    pub task_type: Option<String>,
    /// `[commands]` of the configuration: (`test`, `check`).
    pub config_commands: (Option<String>, Option<String>),
}

/// A check found in the project, and the file that says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiscoveredCheck {
    /// The check.
    pub check: CheckSpec,
    /// What it was discovered from (`Cargo.toml`, `Makefile (test:)`...).
    pub from: String,
}

/// The task type chosen for a prompt, and the rule that chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TypeChoice {
    /// Task type name.
    pub task_type: String,
    /// The rule, in words.
    pub rule: String,
}

/// A derived spec and how each part was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct Derived {
    /// The spec, ready to validate and write.
    pub spec: TaskSpec,
    /// One line per choice: task type, checks, files, goal.
    pub notes: Vec<String>,
}

/// The goal text of `source`: the prompt, or the goal file read with the store's bounded
/// read (a regular file, at most [`READ_CAP`] bytes). Trimmed; empty is an error.
pub fn read_goal(source: &GoalSource) -> Result<String, PromptError> {
    let (text, origin) = match source {
        GoalSource::Prompt(p) => (p.clone(), "-p".to_string()),
        GoalSource::File(path) => {
            let shown = path.display().to_string();
            let read =
                read_regular_file(path, READ_CAP).map_err(|source| PromptError::GoalFile {
                    path: shown.clone(),
                    source: source.shown_as(&shown),
                })?;
            if read.truncated {
                return Err(PromptError::GoalTooLarge {
                    path: shown,
                    size: read.size.max(READ_CAP + 1),
                    cap: READ_CAP,
                });
            }
            (read.text().into_owned(), format!("--goal-file {shown}"))
        }
    };
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(PromptError::EmptyGoal { origin });
    }
    Ok(text)
}

/// The prompt's words: lowercase ASCII letters and digits, split on everything else.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The task type for a prompt (see the module docs for the rule).
pub fn choose_task_type(prompt: &str) -> TypeChoice {
    let all = words(prompt);
    let start = all
        .iter()
        .position(|w| !FILLER.contains(&w.as_str()))
        .unwrap_or(all.len());
    let lead = &all[start..];
    if let Some((verb, rest)) = lead.split_first() {
        if TEST_VERBS.contains(&verb.as_str()) {
            // The verb's object: "add (more unit) tests", not "add support for test...".
            let mut object = rest
                .iter()
                .take(3)
                .take_while(|w| !PREPOSITIONS.contains(&w.as_str()));
            if let Some(t) = object.find(|w| TEST_WORDS.contains(&w.as_str())) {
                return TypeChoice {
                    task_type: "write_tests".into(),
                    rule: format!("the prompt starts with `{verb}` and `{t}` follows"),
                };
            }
        }
    }
    if let Some(w) = all.iter().find(|w| FIX_WORDS.contains(&w.as_str())) {
        return TypeChoice {
            task_type: "fix_violation".into(),
            rule: format!("the prompt says `{w}`"),
        };
    }
    TypeChoice {
        task_type: "implement_feature".into(),
        rule: "no fix or test-writing words in the prompt".into(),
    }
}

/// A task id from the prompt's first words, not `taken` (see the module docs).
pub fn derive_id(prompt: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut slug = String::new();
    for (i, w) in words(prompt).iter().enumerate() {
        if i == 6 || slug.len() + 1 + w.len() > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(w);
    }
    if slug.is_empty() {
        // A single word over 40 characters, or no ASCII word at all.
        slug = words(prompt)
            .first()
            .map(|w| {
                agentforge_core::text::cut(w, 40)
                    .trim_end_matches('…')
                    .to_string()
            })
            .unwrap_or_else(|| "task".to_string());
    }
    (1..)
        .map(|n| {
            if n == 1 {
                slug.clone()
            } else {
                format!("{slug}-{n}")
            }
        })
        .find(|id| !taken(id))
        .expect("some suffix is free")
}

/// Whether a task or a derived spec of this id exists in the workspace at `root`.
pub fn id_taken(root: &Path, id: &str) -> bool {
    root.join(".agentforge/tasks").join(id).exists()
        || root.join(SPECS_DIR).join(format!("{id}.yaml")).exists()
}

/// The workspace files the prompt names: words with a `/` or a file extension that are
/// existing regular files inside the workspace (confined like a model's path), in order,
/// at most 8.
pub fn named_files(ws: &Workspace, prompt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in prompt.split_whitespace() {
        let word = raw
            .trim_matches(|c: char| "`'\"()[]{}<>,;!?".contains(c))
            .trim_end_matches(['.', ':']);
        let looks_like_path = word.contains('/')
            || word.rsplit_once('.').is_some_and(|(a, b)| {
                !a.is_empty() && b.chars().all(|c| c.is_ascii_alphanumeric()) && !b.is_empty()
            });
        if !looks_like_path || word.contains("://") {
            continue;
        }
        let Ok(abs) = ws.resolve(word) else { continue };
        if !abs.is_file() {
            continue;
        }
        let rel = ws.relative(&abs);
        if !out.contains(&rel) {
            out.push(rel);
        }
        if out.len() == 8 {
            break;
        }
    }
    out
}

/// The file `name` in `root`, read with the store's bounded read; `None` when it is not
/// a regular file or cannot be read.
fn project_file(root: &Path, name: &str) -> Option<String> {
    read_regular_file(&root.join(name), READ_CAP)
        .ok()
        .map(|r| r.text().into_owned())
}

/// Whether an executable `name` is on `PATH` (no process is started).
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(name)).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
}

/// What [`discover_checks`] looks for, for the error when it finds nothing.
pub const LOOKED_FOR: &str = "a Makefile with a `test:` target, Cargo.toml, go.mod, package.json with a `test` script, pytest.ini / conftest.py / pyproject.toml [tool.pytest] / setup.cfg [tool:pytest] / Python files in tests/";

/// The checks the project at `root` declares, by the files at its root:
///
/// - a Makefile (`Makefile`, `makefile`, `GNUmakefile`) with a `test:` target:
///   `make test`, which stands for the project's tests (the language test commands
///   below are then left out);
/// - `Cargo.toml`: `cargo test --quiet`, and `cargo clippy --quiet -- -D warnings` (a
///   check) when `cargo-clippy` is installed;
/// - `go.mod`: `go test ./...`;
/// - `package.json` whose `scripts.test` is set (and is not npm's placeholder "no test
///   specified"): `npm test --silent`;
/// - `pytest.ini` or `conftest.py`, `[tool.pytest...]` in `pyproject.toml`,
///   `[tool:pytest]` in `setup.cfg`, `[pytest]` in `tox.ini`, or `.py` files in
///   `tests/` or `test/`: `python3 -m pytest -q`.
pub fn discover_checks(root: &Path) -> Vec<DiscoveredCheck> {
    let check = |name: &str, command: &str, kind: CheckKind, from: &str| DiscoveredCheck {
        check: CheckSpec {
            name: name.into(),
            command: command.into(),
            kind,
            timeout_secs: None,
        },
        from: from.into(),
    };
    let mut out = Vec::new();
    let make = ["Makefile", "makefile", "GNUmakefile"]
        .into_iter()
        .find(|m| project_file(root, m).is_some_and(|text| has_make_target(&text, "test")));
    if let Some(m) = make {
        out.push(check(
            "make-test",
            "make test",
            CheckKind::Test,
            &format!("{m} (test:)"),
        ));
    }
    let tests_from_language = make.is_none();
    if root.join("Cargo.toml").is_file() {
        if tests_from_language {
            out.push(check(
                "cargo-test",
                "cargo test --quiet",
                CheckKind::Test,
                "Cargo.toml",
            ));
        }
        if on_path("cargo-clippy") {
            out.push(check(
                "clippy",
                "cargo clippy --quiet -- -D warnings",
                CheckKind::Check,
                "Cargo.toml (cargo-clippy installed)",
            ));
        }
    }
    if !tests_from_language {
        return out;
    }
    if root.join("go.mod").is_file() {
        out.push(check("go-test", "go test ./...", CheckKind::Test, "go.mod"));
    }
    let npm_test = project_file(root, "package.json")
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["scripts"]["test"].as_str().map(str::to_string))
        .filter(|t| !t.trim().is_empty() && !t.contains("no test specified"));
    if npm_test.is_some() {
        out.push(check(
            "npm-test",
            "npm test --silent",
            CheckKind::Test,
            "package.json (scripts.test)",
        ));
    }
    if let Some(from) = pytest_marker(root) {
        out.push(check(
            "pytest",
            "python3 -m pytest -q",
            CheckKind::Test,
            &from,
        ));
    }
    out
}

/// Whether a Makefile's text defines `target` (a rule line `target:`, not `target :=`).
fn has_make_target(text: &str, target: &str) -> bool {
    text.lines().any(|line| {
        let Some(rest) = line.strip_prefix(target) else {
            return false;
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        rest.starts_with(':') && !rest.starts_with(":=") && !rest.starts_with("::=")
    })
}

/// The file that says the project is tested with pytest, if any.
fn pytest_marker(root: &Path) -> Option<String> {
    for f in ["pytest.ini", "conftest.py"] {
        if root.join(f).is_file() {
            return Some(f.to_string());
        }
    }
    let sections = [
        ("pyproject.toml", "[tool.pytest"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "[pytest]"),
    ];
    for (f, section) in sections {
        if project_file(root, f).is_some_and(|t| t.contains(section)) {
            return Some(format!("{f} ({section}"));
        }
    }
    for dir in ["tests", "test"] {
        let has_py = std::fs::read_dir(root.join(dir)).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "py"))
        });
        if has_py {
            return Some(format!("{dir}/*.py"));
        }
    }
    None
}

/// The words that make a `--check` command a test run (`run_tests`) rather than a check.
const TEST_COMMAND_WORDS: &[&str] = &[
    "test", "tests", "pytest", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "nextest",
];

/// The checks of `--check CMD` flags: `tests`, `tests-2`... for commands that run tests
/// (a word such as `test` or `pytest`), `check`, `check-2`... for the others.
pub fn checks_from_flags(commands: &[String]) -> Result<Vec<CheckSpec>, PromptError> {
    let mut out: Vec<CheckSpec> = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        if command.trim().is_empty() {
            return Err(PromptError::EmptyCheck { index: i + 1 });
        }
        let is_test = words(command)
            .iter()
            .any(|w| TEST_COMMAND_WORDS.contains(&w.as_str()));
        let (kind, base) = if is_test {
            (CheckKind::Test, "tests")
        } else {
            (CheckKind::Check, "check")
        };
        let n = out.iter().filter(|c| c.kind == kind).count() + 1;
        out.push(CheckSpec {
            name: if n == 1 {
                base.to_string()
            } else {
                format!("{base}-{n}")
            },
            command: command.trim().to_string(),
            kind,
            timeout_secs: None,
        });
    }
    Ok(out)
}

/// Derives the task spec for `req` in the workspace `ws` (see the module docs). The id
/// is free now; [`write_spec`] claims it.
pub fn derive(ws: &Workspace, req: &Request) -> Result<Derived, PromptError> {
    let text = read_goal(&req.goal)?;
    let mut notes = Vec::new();
    let choice = match &req.task_type {
        Some(t) => TypeChoice {
            task_type: t.clone(),
            rule: "--task-type".into(),
        },
        None => choose_task_type(&text),
    };
    notes.push(match &req.task_type {
        Some(_) => format!("task type: {} (--task-type)", choice.task_type),
        None => format!(
            "task type: {} ({}; --task-type NAME chooses another)",
            choice.task_type, choice.rule
        ),
    });

    let checks = if !req.checks.is_empty() {
        let checks = checks_from_flags(&req.checks)?;
        notes.push("checks: from --check".to_string());
        checks
    } else if req.config_commands.0.is_some() || req.config_commands.1.is_some() {
        let (test, check) = &req.config_commands;
        let mut shown = Vec::new();
        if let Some(t) = test {
            shown.push(format!("test = `{t}`"));
        }
        if let Some(c) = check {
            shown.push(format!("check = `{c}`"));
        }
        notes.push(format!(
            "checks: none in the spec; agentforge.toml's [commands] apply ({})",
            shown.join(", ")
        ));
        Vec::new()
    } else {
        let found = discover_checks(ws.root());
        if found.is_empty() {
            return Err(PromptError::NoChecks {
                root: ws.root().display().to_string(),
                looked_for: LOOKED_FOR.to_string(),
            });
        }
        let from: Vec<String> = found
            .iter()
            .map(|d| format!("`{}` from {}", d.check.command, d.from))
            .collect();
        notes.push(format!(
            "checks: {} (--check CMD replaces them)",
            from.join(", ")
        ));
        found.into_iter().map(|d| d.check).collect()
    };

    let files = named_files(ws, &text);
    if !files.is_empty() {
        notes.push(format!("files named in the prompt: {}", files.join(", ")));
    }
    let long = text.chars().count() > GOAL_MAX_CHARS;
    let goal = if long {
        let first = text.split("\n\n").next().unwrap_or(&text);
        let first = first.split_whitespace().collect::<Vec<_>>().join(" ");
        notes.push(format!(
            "goal: the first paragraph (the whole text, {} characters, is in the inputs)",
            text.chars().count()
        ));
        agentforge_core::text::cut(&first, GOAL_MAX_CHARS).into_owned()
    } else {
        text.clone()
    };
    let mut inputs = std::collections::BTreeMap::new();
    match choice.task_type.as_str() {
        "fix_violation" => {
            if let Some(file) = files.first() {
                inputs.insert(
                    "violation".to_string(),
                    json!({"id": "prompt", "file_path": file, "message": text}),
                );
            } else if long {
                inputs.insert(
                    "check_definition".to_string(),
                    json!({"description": text}),
                );
            }
        }
        "implement_feature" => {
            inputs.insert("spec".to_string(), Value::String(text.clone()));
            if !files.is_empty() {
                inputs.insert("target_files".to_string(), json!(files));
            }
        }
        "write_tests" => {
            inputs.insert("spec".to_string(), Value::String(text.clone()));
            if let Some(f) = files.iter().find(|f| f.contains("test")) {
                inputs.insert("target_test_file".to_string(), json!(f));
            }
        }
        other => notes.push(format!(
            "inputs: none (task type `{other}` has no prompt rule; write a task file to give it inputs)"
        )),
    }
    let root = ws.root().to_path_buf();
    let spec = TaskSpec {
        id: derive_id(&text, |id| id_taken(&root, id)),
        task_type: choice.task_type,
        goal,
        success_criteria: Vec::new(),
        constraints: Vec::new(),
        inputs,
        checks,
        max_steps: None,
        role: None,
    };
    Ok(Derived { spec, notes })
}

/// The spec as the YAML `--dry-run` prints and [`write_spec`] writes: the notes as
/// comments, then the spec (a task file `agentforge run` takes as it is).
pub fn render(derived: &Derived, prompt_flag: &str) -> String {
    let mut out = format!("# derived by `agentforge run {prompt_flag}`\n");
    for n in &derived.notes {
        out.push_str("# ");
        out.push_str(&n.replace('\n', " "));
        out.push('\n');
    }
    out.push_str(&derived.spec.to_yaml());
    out
}

/// Writes `text` (the rendered spec of `spec`) to `.agentforge/specs/<id>.yaml`,
/// claiming the id: when another run took it meanwhile, the next free suffix is used
/// and `spec.id` changes. Returns the file.
pub fn write_spec(
    root: &Path,
    derived: &mut Derived,
    prompt_flag: &str,
) -> Result<PathBuf, PromptError> {
    let dir = root.join(SPECS_DIR);
    let io = |path: &Path, source| PromptError::Write {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    loop {
        let path = dir.join(format!("{}.yaml", derived.spec.id));
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| io(&dir, e))?;
        std::io::Write::write_all(&mut tmp, render(derived, prompt_flag).as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| io(tmp.path(), e))?;
        // No-clobber: two runs of the same prompt at once get two ids, never one file.
        match tmp.persist_noclobber(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(&path, e.error)),
        }
        let taken = |id: &str| id_taken(root, id);
        derived.spec.id = next_id(&derived.spec.id, taken);
    }
}

/// The next free id after `id` (`x` -> `x-2`, `x-2` -> `x-3`).
fn next_id(id: &str, taken: impl Fn(&str) -> bool) -> String {
    let (base, n) = match id.rsplit_once('-') {
        Some((b, n)) if n.parse::<u32>().is_ok_and(|n| n >= 2) => {
            (b, n.parse::<u32>().unwrap_or(1))
        }
        _ => (id, 1),
    };
    (n + 1..)
        .map(|k| format!("{base}-{k}"))
        .find(|c| !taken(c))
        .expect("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_types_follow_the_documented_rule() {
        let cases = [
            (
                "make the date parser accept ISO week dates",
                "implement_feature",
            ),
            ("Fix the failing test in src/date.rs", "fix_violation"),
            ("the parser panics on empty input", "fix_violation"),
            ("word_count is broken for tabs", "fix_violation"),
            ("add tests for parse_date", "write_tests"),
            ("Please write unit tests for the tokenizer", "write_tests"),
            (
                "add a regression test for the crash in parse",
                "write_tests",
            ),
            ("improve test coverage of src/lib.rs", "write_tests"),
            (
                "add support for test fixtures in the runner",
                "implement_feature",
            ),
            ("fix the crash and add a regression test", "fix_violation"),
            (
                "support ISO week dates; the tests must pass",
                "implement_feature",
            ),
            ("", "implement_feature"),
        ];
        for (prompt, want) in cases {
            assert_eq!(choose_task_type(prompt).task_type, want, "{prompt}");
        }
        assert_eq!(
            choose_task_type("fix the bug").rule,
            "the prompt says `fix`"
        );
    }

    #[test]
    fn ids_are_slugs_of_the_first_words_and_unique() {
        let none = |_: &str| false;
        assert_eq!(
            derive_id("make the date parser accept ISO week dates", none),
            "make-the-date-parser-accept-iso"
        );
        assert_eq!(
            derive_id("Fix: `word_count` (tabs)!", none),
            "fix-word-count-tabs"
        );
        assert_eq!(derive_id("修复", none), "task");
        assert_eq!(derive_id(&"a".repeat(60), none), "a".repeat(40));
        let taken = |id: &str| id == "fix-it" || id == "fix-it-2";
        assert_eq!(derive_id("fix it", taken), "fix-it-3");
        assert_eq!(next_id("fix-it", taken), "fix-it-3");
        assert_eq!(next_id("fix-it-3", |_| false), "fix-it-4");
        // Every derived id is a valid task id.
        for p in ["make it so", "..", "x", "Ünïcödé words"] {
            let spec = TaskSpec {
                id: derive_id(p, none),
                task_type: "t".into(),
                goal: "g".into(),
                success_criteria: vec![],
                constraints: vec![],
                inputs: Default::default(),
                checks: vec![],
                max_steps: None,
                role: None,
            };
            spec.validate("derived").unwrap();
        }
    }

    #[test]
    fn check_flags_are_named_by_kind() {
        let checks = checks_from_flags(&[
            "cargo test".into(),
            "cargo clippy -- -D warnings".into(),
            "python3 -m pytest -q".into(),
        ])
        .unwrap();
        let named: Vec<(&str, CheckKind)> =
            checks.iter().map(|c| (c.name.as_str(), c.kind)).collect();
        assert_eq!(
            named,
            [
                ("tests", CheckKind::Test),
                ("check", CheckKind::Check),
                ("tests-2", CheckKind::Test)
            ]
        );
        let err = checks_from_flags(&["make".into(), " ".into()]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--check 2: the command is empty"),
            "{err}"
        );
    }

    #[test]
    fn make_targets_are_rules_not_assignments() {
        assert!(has_make_target(
            "all: build\ntest: build\n\tcargo test\n",
            "test"
        ));
        assert!(has_make_target("test :\n", "test"));
        assert!(!has_make_target("test := 1\ntests: x\n", "test"));
        assert!(!has_make_target("# test: no\n", "test"));
    }

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (p, text) in files {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn commands(dir: &tempfile::TempDir) -> Vec<String> {
        discover_checks(dir.path())
            .into_iter()
            .filter(|d| d.check.name != "clippy")
            .map(|d| d.check.command)
            .collect()
    }

    #[test]
    fn checks_are_discovered_from_the_project_files() {
        let d = project(&[("Cargo.toml", "[package]\n"), ("tests/it.rs", "")]);
        assert_eq!(commands(&d), ["cargo test --quiet"]);
        let d = project(&[("go.mod", "module x\n")]);
        assert_eq!(commands(&d), ["go test ./..."]);
        let d = project(&[("package.json", r#"{"scripts": {"test": "vitest run"}}"#)]);
        assert_eq!(commands(&d), ["npm test --silent"]);
        let d = project(&[(
            "package.json",
            r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#,
        )]);
        assert!(commands(&d).is_empty());
        let d = project(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]);
        assert_eq!(commands(&d), ["python3 -m pytest -q"]);
        let d = project(&[("tests/test_x.py", "")]);
        assert_eq!(commands(&d), ["python3 -m pytest -q"]);
        let d = project(&[("setup.cfg", "[metadata]\n")]);
        assert!(commands(&d).is_empty());
        // A Makefile's test target stands for the project's tests.
        let d = project(&[
            ("Makefile", "test:\n\tgo test ./...\n"),
            ("go.mod", "module x\n"),
            ("Cargo.toml", "[package]\n"),
        ]);
        assert_eq!(commands(&d), ["make test"]);
        // Several languages: each one's tests.
        let d = project(&[
            ("Cargo.toml", "[package]\n"),
            ("package.json", r#"{"scripts": {"test": "jest"}}"#),
        ]);
        assert_eq!(commands(&d), ["cargo test --quiet", "npm test --silent"]);
        let d = project(&[("README.md", "hi")]);
        assert!(discover_checks(d.path()).is_empty());
    }

    #[test]
    fn named_files_are_existing_workspace_files_only() {
        let d = project(&[("src/date.rs", ""), ("README.md", "")]);
        let ws = Workspace::new(d.path()).unwrap();
        assert_eq!(
            named_files(
                &ws,
                "fix `src/date.rs`, see README.md. Not src/missing.rs, ../etc/passwd, e.g. or https://x.io/a.rs"
            ),
            ["src/date.rs", "README.md"]
        );
    }
}
