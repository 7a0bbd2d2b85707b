//! Issue 13, items 1 and 2, through the binary: `agentforge run -p` / `--goal-file` (a
//! task spec derived from a sentence, written, shown and run; `--dry-run`), and the
//! project's instruction files (AGENTS.md, CLAUDE.md, `.agentforge/instructions.md`) in
//! a budgeted context section that `agentforge context` lists.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use agentforge::task::{CheckKind, TaskSpec};
use serde_json::{json, Value};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-SECRET-0123456789";

fn cmd(dir: &Path) -> Command {
    support::notes::agentforge(dir)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A workspace holding `files` (path, text).
fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// `run <args> --dry-run --json` in `dir`: the derived spec and the notes.
fn dry_run_json(dir: &Path, args: &[&str]) -> (TaskSpec, Vec<String>) {
    let out = cmd(dir)
        .args(["--json", "run", "--dry-run"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["written"], Value::Null);
    let spec: TaskSpec = serde_json::from_value(v["spec"].clone()).unwrap();
    let notes = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    (spec, notes)
}

fn commands(spec: &TaskSpec) -> Vec<&str> {
    spec.checks.iter().map(|c| c.command.as_str()).collect()
}

/// The files under `.agentforge/specs` and `.agentforge/tasks` of `dir`.
fn written(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["specs", "tasks"] {
        if let Ok(rd) = std::fs::read_dir(dir.join(".agentforge").join(sub)) {
            for e in rd.flatten() {
                out.push(format!("{sub}/{}", e.file_name().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_prompt_run_of_the_bundled_example_writes_shows_and_runs_its_spec() {
    let root = support::built_plugins::root();
    let plugins = support::built_plugins::plugins();
    let example = root.join("examples/fix-failing-test");
    let tmp = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-R")
        .arg(example.join("project/."))
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(status.success());
    let out = cmd(tmp.path())
        .args([
            "run",
            "-p",
            "fix word_count in src/lib.rs: it must count words separated by any whitespace",
            "--replay",
        ])
        .arg(example.join("session-plugins.jsonl"))
        .arg("--plugins")
        .arg(&plugins)
        .arg("--strict")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Written where it says, shown before the run starts, and run as that file.
    let id = "fix-word-count-in-src-lib";
    let file = format!(".agentforge/specs/{id}.yaml");
    assert!(
        err.contains(&format!("task spec written to {file}:\n# derived by `agentforge run -p`\n# task type: fix_violation (the prompt says `fix`")),
        "{err}"
    );
    assert!(
        err.find("task spec written").unwrap()
            < err
                .find(&format!("task `{id}` (fix_violation): starting at step 1"))
                .unwrap(),
        "{err}"
    );
    let spec = TaskSpec::load(&tmp.path().join(&file)).unwrap();
    assert_eq!(spec.id, id);
    assert_eq!(spec.task_type, "fix_violation");
    assert_eq!(
        spec.inputs["violation"],
        json!({"id": "prompt", "file_path": "src/lib.rs", "message": "fix word_count in src/lib.rs: it must count words separated by any whitespace"})
    );
    assert_eq!(spec.checks[0].name, "cargo-test");
    assert_eq!(spec.checks[0].command, "cargo test --quiet");
    assert_eq!(spec.checks[0].kind, CheckKind::Test);
    assert!(spec.checks.iter().skip(1).all(|c| c.name == "clippy"));
    // The task is that spec, and it ran to the end for real.
    let show = cmd(tmp.path())
        .args(["--json", "task", "show", id])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        serde_json::from_value::<TaskSpec>(shown["spec"].clone()).unwrap(),
        spec
    );
    assert_eq!(shown["state"]["status"], "complete");
    let lib = std::fs::read_to_string(tmp.path().join("src/lib.rs")).unwrap();
    assert!(lib.contains("text.split_whitespace().count()"), "{lib}");
    assert!(stdout(&out).contains(&format!("task `{id}`: complete after 6 steps")));
}

#[test]
fn a_dry_run_prints_a_task_file_and_writes_nothing() {
    let dir = project(&[
        ("Cargo.toml", "[package]\nname = \"d\"\n"),
        ("src/date.rs", "pub fn parse() {}\n"),
    ]);
    let prompt = "make the date parser in src/date.rs accept ISO week dates";
    let out = cmd(dir.path())
        .args(["run", "-p", prompt, "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("dry run: nothing written or run"));
    let text = stdout(&out);
    assert!(text.starts_with("# derived by `agentforge run -p`\n# task type: implement_feature (no fix or test-writing words in the prompt; --task-type NAME chooses another)\n"), "{text}");
    let spec = TaskSpec::parse(&text, "stdout").unwrap();
    assert_eq!(spec.id, "make-the-date-parser-in-src");
    assert_eq!(spec.task_type, "implement_feature");
    assert_eq!(spec.goal, prompt);
    assert_eq!(spec.inputs["spec"], prompt);
    assert_eq!(spec.inputs["target_files"], json!(["src/date.rs"]));
    assert_eq!(commands(&spec)[0], "cargo test --quiet");
    assert!(
        !dir.path().join(".agentforge").exists(),
        "a dry run writes nothing, not even the write probe's folder"
    );
    // What it printed is a task file the binary takes as it is.
    std::fs::write(dir.path().join("derived.yaml"), &text).unwrap();
    let out = cmd(dir.path())
        .args(["task", "new", "derived.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(written(dir.path()), ["tasks/make-the-date-parser-in-src"]);
    // Now that the id is taken, the next derivation of the same prompt gets another.
    let (spec, _) = dry_run_json(dir.path(), &["-p", prompt]);
    assert_eq!(spec.id, "make-the-date-parser-in-src-2");
}

#[test]
fn checks_come_from_the_flags_the_config_or_the_project_files() {
    // (the project's files, the check commands derived)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: &[Case] = &[
        (&[("go.mod", "module x\n")], &["go test ./..."]),
        (
            &[("package.json", r#"{"scripts": {"test": "vitest run"}}"#)],
            &["npm test --silent"],
        ),
        (
            &[("pyproject.toml", "[tool.pytest.ini_options]\n")],
            &["python3 -m pytest -q"],
        ),
        (&[("tests/test_dates.py", "")], &["python3 -m pytest -q"]),
        (
            &[
                (
                    "Makefile",
                    "build:\n\tgo build\ntest: build\n\tgo test ./...\n",
                ),
                ("go.mod", ""),
            ],
            &["make test"],
        ),
    ];
    for (files, want) in cases {
        let dir = project(files);
        let (spec, notes) = dry_run_json(dir.path(), &["-p", "support ISO week dates"]);
        assert_eq!(commands(&spec), *want, "{files:?}");
        assert!(spec.checks.iter().all(|c| c.kind == CheckKind::Test));
        assert!(
            notes.iter().any(|n| n.starts_with("checks: `")),
            "{notes:?}"
        );
    }
    // --check replaces discovery, named by what it runs.
    let dir = project(&[("go.mod", "module x\n")]);
    let (spec, _) = dry_run_json(
        dir.path(),
        &[
            "-p",
            "x",
            "--check",
            "go vet ./...",
            "--check",
            "go test -run Week ./...",
        ],
    );
    let checks: Vec<(&str, &str, CheckKind)> = spec
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.command.as_str(), c.kind))
        .collect();
    assert_eq!(
        checks,
        [
            ("check", "go vet ./...", CheckKind::Check),
            ("tests", "go test -run Week ./...", CheckKind::Test)
        ]
    );
    // `[commands]` in agentforge.toml: the spec names none, and says so.
    let dir = project(&[
        ("go.mod", "module x\n"),
        (
            "agentforge.toml",
            "[commands]\ntest = \"go test -short ./...\"\n",
        ),
    ]);
    let (spec, notes) = dry_run_json(dir.path(), &["-p", "x"]);
    assert!(spec.checks.is_empty());
    assert!(
        notes.contains(&"checks: none in the spec; agentforge.toml's [commands] apply (test = `go test -short ./...`)".to_string()),
        "{notes:?}"
    );
}

#[test]
fn the_task_type_follows_the_prompt_or_the_flag() {
    let dir = project(&[("go.mod", ""), ("dates_test.go", "")]);
    let (spec, notes) = dry_run_json(
        dir.path(),
        &["-p", "add tests for ParseWeek in dates_test.go"],
    );
    assert_eq!(spec.task_type, "write_tests");
    assert_eq!(spec.inputs["target_test_file"], "dates_test.go");
    assert!(notes[0].contains("the prompt starts with `add` and `tests` follows"));
    let (spec, _) = dry_run_json(dir.path(), &["-p", "the week parser panics on W53"]);
    assert_eq!(spec.task_type, "fix_violation");
    // No file named: no violation (its file_path is required), only the goal.
    assert!(spec.inputs.is_empty());
    let (spec, notes) = dry_run_json(
        dir.path(),
        &[
            "-p",
            "the week parser panics on W53",
            "--task-type",
            "implement_feature",
        ],
    );
    assert_eq!(spec.task_type, "implement_feature");
    assert_eq!(notes[0], "task type: implement_feature (--task-type)");
    let out = cmd(dir.path())
        .args([
            "run",
            "-p",
            "x",
            "--task-type",
            "fix_violatoin",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = stderr(&out);
    assert!(
        err.contains(
            "--task-type fix_violatoin: unknown task type `fix_violatoin`; known task types: "
        ) && err.contains("fix_violation"),
        "{err}"
    );
}

#[test]
fn bad_prompt_runs_are_usage_errors_that_say_what_to_do() {
    let dir = project(&[
        ("go.mod", ""),
        ("task.yaml", "id: t\ntask_type: fix_violation\ngoal: g\n"),
    ]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "task.yaml", "-p", "fix it"],
            "-p derives a task from a sentence and `task.yaml` is a task file or sprint folder to run: give one of them",
        ),
        (
            &["run", "-p", "a", "--goal-file", "g.md"],
            "-p and --goal-file both give the goal: use one",
        ),
        (&["run", "-p", "  "], "-p is empty: say what the task should achieve"),
        (&["run", "task.yaml", "--dry-run"], "--dry-run goes with -p or --goal-file"),
        (&["run", "task.yaml", "--check", "make"], "--check goes with -p or --goal-file"),
        (&["run"], "nothing to run: give a task file"),
        (&["run", "-p", "x", "--check", ""], "--check 1: the command is empty"),
        (
            &["run", "--goal-file", "missing.md"],
            "--goal-file missing.md: `missing.md` does not exist",
        ),
        (&["run", "-p", "x", "--sprint", "s"], "--sprint names a sprint and -p runs a single task"),
    ];
    for (args, want) in cases {
        let out = cmd(dir.path()).args(*args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(written(dir.path()).is_empty(), "{args:?}");
    }
}

#[test]
fn a_project_with_no_check_is_refused_unless_one_is_given() {
    let dir = project(&[("notes.txt", "status: broken\n")]);
    let out = cmd(dir.path())
        .args([
            "run",
            "-p",
            "fix the status in notes.txt",
            "--replay",
            "none.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = stderr(&out);
    assert!(err.contains("no check for this task: nothing in "), "{err}");
    assert!(
        err.contains("(looked for a Makefile with a `test:` target, Cargo.toml"),
        "{err}"
    );
    assert!(
        err.contains("pass the command that verifies the change with --check CMD"),
        "{err}"
    );
    assert!(written(dir.path()).is_empty());
    let (spec, _) = dry_run_json(
        dir.path(),
        &[
            "-p",
            "fix the status in notes.txt",
            "--check",
            "grep -q 'status: fixed' notes.txt",
        ],
    );
    assert_eq!(spec.checks[0].name, "check");
    assert_eq!(spec.inputs["violation"]["file_path"], "notes.txt");
}

#[test]
fn the_same_prompt_twice_makes_two_tasks() {
    let dir = project(&[("notes.txt", "title: demo\nstatus: broken\n")]);
    std::fs::write(
        dir.path().join("fix.jsonl"),
        [
            json!({"tool": "run_check", "arguments": {}}),
            json!({"tool": "edit_file", "arguments": {"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}}),
            json!({"tool": "complete", "arguments": {"summary": "fixed"}}),
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>(),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        cmd(dir.path())
            .args([
                "run",
                "-p",
                "fix the status in notes.txt",
                "--check",
                "grep -q 'status: fixed' notes.txt",
                "--replay",
                "fix.jsonl",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // --quiet shows where the spec is, not the spec.
    assert_eq!(
        stderr(&out).lines().next(),
        Some("task spec: .agentforge/specs/fix-the-status-in-notes-txt.yaml")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
    let out = run(&["--max-steps", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        written(dir.path()),
        [
            "specs/fix-the-status-in-notes-txt-2.yaml",
            "specs/fix-the-status-in-notes-txt.yaml",
            "tasks/fix-the-status-in-notes-txt",
            "tasks/fix-the-status-in-notes-txt-2"
        ]
    );
}

#[test]
fn a_long_goal_file_gives_its_first_paragraph_as_the_goal() {
    let details = "The parser must accept `2026-W48-3` and `2026W483`.\n".repeat(20);
    let text = format!("Accept ISO week dates in the date parser.\n\n{details}");
    let dir = project(&[("go.mod", ""), ("goal.md", &text), ("empty.md", "\n\n")]);
    let (spec, notes) = dry_run_json(dir.path(), &["--goal-file", "goal.md"]);
    assert_eq!(spec.goal, "Accept ISO week dates in the date parser.");
    assert_eq!(spec.inputs["spec"], text.trim());
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("goal: the first paragraph")),
        "{notes:?}"
    );
    // A short goal file is the goal.
    std::fs::write(dir.path().join("short.md"), "Accept ISO week dates\n").unwrap();
    let (spec, _) = dry_run_json(dir.path(), &["--goal-file", "short.md"]);
    assert_eq!(spec.goal, "Accept ISO week dates");
    let out = cmd(dir.path())
        .args(["run", "--goal-file", "empty.md", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--goal-file empty.md is empty"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------------------
// Instruction files.

/// The notes task on `sub/notes.txt`, with instruction files along and off its chain.
fn instructed_workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let outside = project(&[("AGENTS.md", "SECRET: instructions outside the workspace\n")]);
    let dir = project(&[
        ("sub/notes.txt", "title: demo\nstatus: broken\n"),
        (
            "task.yaml",
            "id: notes\ntask_type: fix_violation\ngoal: Change the status in sub/notes.txt to fixed\ninputs:\n  violation:\n    file_path: sub/notes.txt\n    message: status is broken\nchecks:\n  - name: tests\n    command: \"grep -q 'status: fixed' sub/notes.txt\"\n    kind: test\nmax_steps: 10\n",
        ),
        ("AGENTS.md", "# Project rules\n- Keep notes files in YAML style.\n"),
        ("CLAUDE.md", "Prefer small edits.\n"),
        ("sub/AGENTS.md", "# Notes folder\n- Status values are: broken, fixed.\n"),
        (".agentforge/instructions.md", "Say what you changed in the summary.\n"),
        ("other/AGENTS.md", "Not on the task's chain.\n"),
        (".git/AGENTS.md", "git internals\n"),
    ]);
    std::os::unix::fs::symlink(
        outside.path().join("AGENTS.md"),
        dir.path().join("sub/CLAUDE.md"),
    )
    .unwrap();
    (dir, outside)
}

/// The `project_instructions:` section of a context report's user message.
fn instructions_section(report: &str) -> &str {
    let start = report
        .find("\nproject_instructions:\n")
        .expect("instructions section")
        + 1;
    let end = report[start..]
        .find("\ncurrent_state:")
        .expect("current_state after it");
    &report[start..start + end + 1]
}

#[test]
fn instruction_files_are_in_the_context_nearest_first_and_listed() {
    let (dir, _outside) = instructed_workspace();
    let out = cmd(dir.path())
        .args(["task", "new", "task.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = cmd(dir.path()).args(["context", "notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout(&out);
    assert!(!report.contains("SECRET"), "{report}");
    assert!(!report.contains("git internals"), "{report}");
    assert!(!report.contains("Not on the task's chain"), "{report}");
    insta::assert_snapshot!(
        "context_instructions_section",
        instructions_section(&report)
    );
    // The token table has the section; the listing has each file with its tokens.
    let row = report
        .lines()
        .find(|l| l.starts_with("instructions "))
        .expect("a token row");
    let tokens: usize = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(tokens > 20, "{row}");
    let listing: Vec<&str> = report
        .split("=== instructions (nearest first) ===\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.is_empty())
        .collect();
    let files: Vec<&str> = listing
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            ".agentforge/instructions.md",
            "sub/AGENTS.md",
            "AGENTS.md",
            "CLAUDE.md"
        ]
    );
    assert!(
        listing.iter().all(|l| l.ends_with(" tokens")),
        "{listing:?}"
    );
    assert!(
        report.contains("=== instruction files not shown ===\nsub/CLAUDE.md: path `sub/CLAUDE.md` refused: `sub/CLAUDE.md` is a symlink to "),
        "{report}"
    );
    let out = cmd(dir.path())
        .args(["--json", "context", "notes"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = v["instructions"].as_array().unwrap();
    assert_eq!(listed.len(), 4);
    assert!(listed
        .iter()
        .all(|f| f["tokens"].as_u64().unwrap() > 0 && f["cut"] == false));
    assert_eq!(v["instructions_skipped"][0]["path"], "sub/CLAUDE.md");
    let section = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "instructions")
        .unwrap();
    assert_eq!(section["budget"], 600);
}

#[test]
fn the_model_sees_the_instructions_and_an_edit_to_them_next_step() {
    let (dir, _outside) = instructed_workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script([
            Scripted::tool_call("read_file", json!({"path": "sub/notes.txt"})),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "sub/AGENTS.md", "old_text": "broken, fixed.", "new_text": "broken, fixed, wontfix."}),
            ),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "sub/notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "status fixed"})),
        ])
        .start_background();
    let mut c = cmd(dir.path());
    c.args(["run", "task.yaml", "--provider", "openai", "--model", "m"]);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    let first = reqs[0].user_text();
    let at = |s: &str| {
        first
            .find(s)
            .unwrap_or_else(|| panic!("`{s}` not in {first}"))
    };
    assert!(at("file: .agentforge/instructions.md") < at("file: sub/AGENTS.md"));
    assert!(at("file: sub/AGENTS.md") < at("file: AGENTS.md"));
    assert!(at("file: AGENTS.md") < at("file: CLAUDE.md"));
    assert!(at("file: CLAUDE.md") < at("current_state:"));
    assert!(
        !first.contains("SECRET") && !first.contains("wontfix"),
        "{first}"
    );
    // Read every step, like the rest of the context.
    assert!(!reqs[1].user_text().contains("wontfix"));
    assert!(reqs[2]
        .user_text()
        .contains("Status values are: broken, fixed, wontfix."));
}

#[test]
fn oversize_instructions_are_cut_within_their_budget_and_say_so() {
    let (dir, _outside) = instructed_workspace();
    let long: String = (1..=300)
        .map(|i| format!("- Rule {i}: keep the notes folder tidy and the status line last.\n"))
        .collect();
    std::fs::write(dir.path().join("AGENTS.md"), &long).unwrap();
    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[budget]\ninstructions = 200\ncurrent_state = 2400\n",
    )
    .unwrap();
    let out = cmd(dir.path())
        .args(["task", "new", "task.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = cmd(dir.path())
        .args(["--json", "context", "notes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let section = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "instructions")
        .unwrap()
        .clone();
    assert!(section["tokens"].as_u64().unwrap() <= 200, "{section}");
    assert_eq!(section["compressed"], true);
    let user = v["user"].as_str().unwrap();
    assert!(user.contains("to fit budget.instructions"), "{user}");
    let agents = v["instructions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "AGENTS.md")
        .unwrap()
        .clone();
    assert!(
        agents["cut"] == true || agents["left_out"] == true,
        "{agents}"
    );
    let out = cmd(dir.path()).args(["context", "notes"]).output().unwrap();
    let report = stdout(&out);
    assert!(
        report.contains(
            "AGENTS.md                                left out to fit budget.instructions"
        ) || report.contains(" characters shown"),
        "{report}"
    );
    assert!(report.contains("- instructions: "), "{report}");
}

#[test]
fn a_spec_that_cannot_be_written_is_an_io_error_not_a_usage_error() {
    let dir = project(&[
        ("go.mod", ""),
        ("none.jsonl", ""),
        (".agentforge/specs", "a file, not a folder"),
    ]);
    let out = cmd(dir.path())
        .args(["run", "-p", "support week dates", "--replay", "none.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: cannot write the task spec "),
        "{err}"
    );
    assert!(err.contains(".agentforge/specs"), "{err}");
}
