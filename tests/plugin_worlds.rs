//! The worlds added in API 0.2.0 and the version dispatch: context-schema plugins (the
//! built-in task types as components), tool plugins (`outline`, `rerun_check` with the
//! `read` and `checks` capabilities), per-check gate selection with plugin config, and a
//! gate built against the frozen 0.1.0 contract, run through its own binding.

use crate::support;

use support::built_plugins::plugins;

use std::path::Path;

use agentforge::config::PluginsConfig;
use agentforge::gates::Gates;
use agentforge::plugins::{
    load_dir_with, ApiVersion, DeclaredChecks, LoadOptions, LoadedPlugin, PluginLoadError,
};
use agentforge::schemas::{ContextSchema, SchemaRegistry};
use agentforge::state_store::{ActionResult, CheckStatus, TaskState};
use agentforge::task::{CheckKind, CheckSpec, TaskSpec};
use agentforge::tools::{ExtraTool, Workspace};
use serde_json::json;

/// Copies the built plugin folders `names` into `dir`.
fn install(dir: &Path, names: &[&str]) {
    for name in names {
        let src = plugins().join(name);
        let dst = dir.join(name);
        std::fs::create_dir_all(&dst).unwrap();
        for entry in std::fs::read_dir(&src).unwrap() {
            let p = entry.unwrap().path();
            let keep = p.extension().is_some_and(|e| e == "wasm")
                || p.file_name().is_some_and(|n| n == "plugin.toml");
            if keep {
                std::fs::copy(&p, dst.join(p.file_name().unwrap())).unwrap();
            }
        }
    }
}

/// Loads `dir` with workspace `ws`, the `[plugins]` config `config` and `checks` declared.
fn load(
    dir: &Path,
    ws: &Path,
    config: &str,
    checks: &[CheckSpec],
) -> (Vec<LoadedPlugin>, Vec<PluginLoadError>) {
    let config: PluginsConfig = toml::from_str(config).unwrap();
    let ws = Workspace::new(ws).unwrap();
    let mut opts = LoadOptions::new(&ws, &config);
    let declared = DeclaredChecks::default();
    declared.set(
        checks,
        agentforge::commands::CommandLimits {
            timeout: std::time::Duration::from_secs(20),
            output_cap_bytes: 64 * 1024,
        },
    );
    opts.checks = declared;
    load_dir_with(dir, &dir.join("cache"), &opts)
}

/// The hostile fixture installed in `dir` as extractor `name`, with `extra` manifest lines.
fn install_hostile(dir: &Path, name: &str, extra: &str) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(
        plugins().join("hostile/hostile.wasm"),
        d.join("hostile.wasm"),
    )
    .unwrap();
    std::fs::write(
        d.join("plugin.toml"),
        format!("name = \"{name}\"\nversion = \"0.1.0\"\nkind = \"extractor\"\napi = \"0.3.0\"\ncomponent = \"hostile.wasm\"\n{extra}"),
    )
    .unwrap();
}

/// `agentforge run task.yaml --replay session.jsonl` in `ws` (with `--strict --plugins
/// DIR` when given): the exit code and stderr.
fn run_replay(ws: &Path, plugins_dir: Option<&Path>) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentforge"));
    cmd.current_dir(ws)
        .args(["run", "task.yaml", "--replay", "session.jsonl"])
        .env_remove("AGENTFORGE_FAULT");
    if let Some(dir) = plugins_dir {
        cmd.arg("--strict").arg("--plugins").arg(dir);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The records of task `id`'s `actions.jsonl` in `ws`.
fn records(ws: &Path, id: &str) -> Vec<serde_json::Value> {
    let log =
        std::fs::read_to_string(ws.join(format!(".agentforge/tasks/{id}/actions.jsonl"))).unwrap();
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn find<'a>(loaded: &'a [LoadedPlugin], name: &str) -> &'a LoadedPlugin {
    loaded
        .iter()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("plugin {name} not loaded"))
}

fn spec(yaml: &str) -> TaskSpec {
    TaskSpec::parse(yaml, "test").unwrap()
}

#[test]
fn schema_plugins_are_the_built_in_task_types() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("plugins"), tmp.path().join("ws"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n\npub fn b() {}\n").unwrap();
    std::fs::write(ws.join("tests/example.rs"), "#[test]\nfn t() {}\n").unwrap();
    install(
        &dir,
        &[
            "schema-fix-violation",
            "schema-implement-feature",
            "schema-write-tests",
        ],
    );
    let (loaded, errors) = load(&dir, &ws, "", &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let workspace = Workspace::new(&ws).unwrap();

    let tasks = [
        ("fix_violation", "id: t\ntask_type: fix_violation\ngoal: g\ninputs:\n  violation:\n    file_path: src/lib.rs\n    message: too long\n  check_definition: max 10 lines\n"),
        ("implement_feature", "id: t\ntask_type: implement_feature\ngoal: g\ninputs:\n  spec: add c\n  target_files: [src/lib.rs, src/new.rs]\n  test_requirements: one test\n"),
        ("write_tests", "id: t\ntask_type: write_tests\ngoal: g\ninputs:\n  spec: test a\n  example_test_file: tests/example.rs\n  target_test_file: tests/a.rs\n"),
    ];
    let mut registry = SchemaRegistry::default();
    for (name, task) in tasks {
        let spec = spec(task);
        let schema = loaded
            .iter()
            .filter_map(|p| p.as_schema())
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("no schema plugin for {name}"));
        // The seed's phases: analyze -> [plan ->] implement <-> verify, then terminal.
        let g = schema.phase_graph();
        assert_eq!(g.initial, "analyze");
        let phases: Vec<&str> = g.phases.iter().map(|p| p.name.as_str()).collect();
        let with_plan = name == "implement_feature";
        let expected: &[&str] = if with_plan {
            &[
                "analyze",
                "plan",
                "implement",
                "verify",
                "complete",
                "failed",
                "escalated",
            ]
        } else {
            &[
                "analyze",
                "implement",
                "verify",
                "complete",
                "failed",
                "escalated",
            ]
        };
        assert_eq!(phases, expected, "{name}");
        assert!(!schema.default_success_criteria().is_empty());
        // The current_state section, from the task and a state with a failing check;
        // the files are inserted numbered by the host (null when missing).
        let mut state = TaskState::initial(&spec, "implement", 10);
        state.verification.checks.insert(
            "tests".into(),
            CheckStatus {
                passing: false,
                summary: "1 failed".into(),
                is_test: true,
                step: 1,
            },
        );
        let built = schema.try_build(&spec, &state, &workspace).unwrap();
        insta::assert_yaml_snapshot!(format!("current_state_{name}"), built);
        // Registered (the graph is validated against the actions), it serves the type.
        registry
            .register_with(Box::new(schema), &agentforge::schemas::BUILTIN_ACTIONS)
            .unwrap();
        assert_eq!(
            registry.get(name).unwrap().source(),
            format!("plugin schema-{}", name.replace('_', "-"))
        );
    }
}

/// The value loop's roles, one built-in task type each: every graph registers against the
/// host's actions, every phase has the role's prompt and it renders, `inputs.brief` is the
/// only input, the brief's fields are shown in the role's order and the builder's and
/// fixer's `task.files_expected` are inserted numbered by the host.
#[test]
fn the_value_loop_roles_are_task_types() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("plugins"), tmp.path().join("ws"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    // (task type, folder, first phase, the brief's fields in the order shown)
    let roles: [(&str, &str, &str, &[&str]); 8] = [
        (
            "planner",
            "schema-planner",
            "review",
            &["instructions", "vision", "prd", "discovery", "plan"],
        ),
        (
            "critic",
            "schema-critic",
            "review",
            &["instructions", "vision", "prd", "discovery", "plan"],
        ),
        (
            "classifier",
            "schema-classifier",
            "review",
            &["instructions", "vision", "prd", "failing"],
        ),
        (
            "researcher",
            "schema-researcher",
            "review",
            &["instructions", "failing", "research"],
        ),
        (
            "evaluator",
            "schema-evaluator",
            "review",
            &[
                "instructions",
                "vision",
                "prd",
                "plan",
                "verifications",
                "vrc",
                "health",
            ],
        ),
        (
            "builder",
            "schema-builder",
            "analyze",
            &["instructions", "task", "plan", "verifications", "research"],
        ),
        (
            "fixer",
            "schema-fixer",
            "analyze",
            &["instructions", "failing", "triage", "research", "task"],
        ),
        (
            "qc_author",
            "schema-qc-author",
            "analyze",
            &["instructions", "prd", "plan", "verifications"],
        ),
    ];
    install(&dir, &roles.map(|r| r.1));
    let (loaded, errors) = load(&dir, &ws, "", &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let workspace = Workspace::new(&ws).unwrap();
    let prompts = agentforge::prompts::Prompts::new(None);
    let mut registry = SchemaRegistry::default();
    for (name, folder, initial, shown) in roles {
        let schema = loaded
            .iter()
            .filter_map(|p| p.as_schema())
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("no schema plugin for {name}"));
        let g = schema.phase_graph();
        assert_eq!(g.initial, initial, "{name}");
        let writes = g
            .phases
            .iter()
            .flat_map(|p| &p.actions)
            .any(|a| ["write_file", "edit_file", "replace_lines"].contains(&a.name.as_str()));
        assert_eq!(writes, initial != "review", "{name}");
        // Every working phase has the role's own prompt, and it renders.
        for phase in g.phases.iter().filter(|p| !p.terminal) {
            let vars = agentforge::prompts::PromptVars {
                task_type: name,
                phase: &phase.name,
                goal: "the goal",
                step: 1,
                max_steps: 10,
                actions: phase.actions.iter().map(|a| a.name.clone()).collect(),
            };
            let text = prompts
                .render_with(&vars, schema.prompt_templates())
                .unwrap_or_else(|e| panic!("{name}.{}: {e}", phase.name));
            assert!(text.contains("Your task: the goal"), "{text}");
            assert!(text.contains("`instructions` section"), "{text}");
        }
        // `inputs.brief` is the one input, an open object.
        let input_schema = schema.input_schema().unwrap();
        let task = |inputs: &str| {
            spec(&format!(
                "id: t\ntask_type: {name}\ngoal: g\nrole: {name}\ninputs:\n{inputs}"
            ))
        };
        let brief = "  brief:\n    prd: the PRD\n    notes: a field no role knows\n    task: {id: T1, files_expected: [src/lib.rs, src/new.rs]}\n    instructions: call report_x\n    failing: []\n    plan: []\n";
        let spec = task(brief);
        spec.check_inputs("task.yaml", &input_schema).unwrap();
        let err = task("  brief: {}\n  breif: {}\n")
            .check_inputs("task.yaml", &input_schema)
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `brief`"), "{err}");
        // The fields shown: the role's own in its order, then the others.
        let state = TaskState::initial(&spec, initial, 10);
        let built = schema.try_build(&spec, &state, &workspace).unwrap();
        let keys: Vec<&str> = built
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let present = ["instructions", "prd", "task", "plan", "failing"];
        let mut expected: Vec<&str> = shown
            .iter()
            .copied()
            .filter(|k| present.contains(k))
            .collect();
        for k in ["instructions", "prd", "task", "plan", "failing", "notes"] {
            if !expected.contains(&k) {
                expected.push(k);
            }
        }
        assert_eq!(keys, expected, "{name}");
        let files = &built["task"]["files"];
        if ["builder", "fixer"].contains(&name) {
            assert_eq!(files[0]["path"], "src/lib.rs");
            assert!(
                files[0]["content"].as_str().unwrap().contains("pub fn a()"),
                "{built:#}"
            );
            assert_eq!(files[1], json!({"path": "src/new.rs", "content": null}));
        } else {
            assert!(files.is_null(), "{name}: {built:#}");
        }
        registry
            .register_with(Box::new(schema), &agentforge::schemas::BUILTIN_ACTIONS)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            registry.get(name).unwrap().source(),
            format!("plugin {folder}")
        );
    }
}

#[test]
fn tool_plugins_run_with_only_the_granted_capabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("plugins"), tmp.path().join("ws"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("src/lib.rs"),
        "//! doc\n\npub struct Counter {\n    n: u32,\n}\n\nimpl Counter {\n    pub fn bump(&mut self) {}\n}\n",
    )
    .unwrap();
    std::fs::write(ws.join("notes.rs"), "fn secret() {}\n").unwrap();
    install(&dir, &["tool-outline", "tool-rerun-check"]);
    // A check that fails, then passes, then fails: flaky.
    let flaky = CheckSpec {
        name: "tests".into(),
        command: "if [ -f flag ]; then rm flag; exit 0; else touch flag; exit 1; fi".into(),
        kind: CheckKind::Test,
        timeout_secs: None,
    };
    let steady = CheckSpec {
        name: "lint".into(),
        command: "echo lint ok".into(),
        kind: CheckKind::Check,
        timeout_secs: None,
    };
    let grants = "[grants.tool-outline]\nread = [\"src/**\"]\n[grants.tool-rerun-check]\nchecks = [\"tests\"]\n";
    let (loaded, errors) = load(&dir, &ws, grants, &[flaky.clone(), steady.clone()]);
    assert!(errors.is_empty(), "{errors:?}");

    let outline = find(&loaded, "tool-outline").as_tool().unwrap();
    assert_eq!(outline.name(), "outline");
    assert!(outline.offered_in("analyze"));
    let out = outline.invoke(&json!({"path": "src/lib.rs"})).unwrap();
    assert_eq!(out.result, ActionResult::Success);
    assert!(
        out.output.contains("3: pub struct Counter"),
        "{}",
        out.output
    );
    assert!(out.output.contains("8: pub fn bump"), "{}", out.output);
    // Outside the granted globs: the host refuses the read, the model gets the reason.
    let e = outline.invoke(&json!({"path": "notes.rs"})).unwrap_err();
    assert!(e.contains("not in the globs the project grants"), "{e}");
    // Arguments are checked by the host before the plugin runs.
    assert!(outline
        .check_arguments(&json!({}))
        .unwrap_err()
        .contains("`path`"));

    let rerun = find(&loaded, "tool-rerun-check").as_tool().unwrap();
    // The whole schema is enforced by the host, not only `required` and types: the
    // plugin's `maximum` refuses 9 runs before the plugin is entered.
    let e = rerun
        .check_arguments(&json!({"check": "tests", "times": 9}))
        .unwrap_err();
    assert!(e.contains("`times` must be <= 5, got a number (9)"), "{e}");
    let out = rerun
        .invoke(&json!({"check": "tests", "times": 3}))
        .unwrap();
    assert_eq!(out.result, ActionResult::Partial, "{}", out.output);
    assert!(out.output.contains("1/3"), "{}", out.output);
    assert!(out.output.contains("flaky"), "{}", out.output);
    // `lint` is declared but not granted; `nope` is not declared.
    let e = rerun.invoke(&json!({"check": "lint"})).unwrap_err();
    assert!(e.contains("does not grant"), "{e}");
    let (loaded, _) = load(
        &dir,
        &ws,
        "[grants.tool-rerun-check]\nchecks = [\"*\"]\n",
        &[steady],
    );
    let rerun = find(&loaded, "tool-rerun-check").as_tool().unwrap();
    let e = rerun.invoke(&json!({"check": "nope"})).unwrap_err();
    assert!(e.contains("declares no check named `nope`"), "{e}");
    let out = rerun.invoke(&json!({"check": "lint", "times": 2})).unwrap();
    assert_eq!(out.result, ActionResult::Success, "{}", out.output);
}

#[test]
fn gates_are_chosen_per_check_and_read_their_config() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(
        &dir,
        &["gate-command", "gate-tests-pass", "gate-conformance"],
    );
    let (loaded, errors) = load(&dir, tmp.path(), "", &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let mut gates = Gates::default();
    for p in &loaded {
        gates.push(p.as_gate().unwrap()).unwrap();
    }
    assert_eq!(gates.for_check("tests").name(), "gate-tests-pass");
    assert_eq!(gates.for_check("conformance").name(), "gate-conformance");
    assert_eq!(gates.for_check("clippy").name(), "gate-command");

    // The project's `[plugins.config.<name>]` reaches the plugin's `config()`.
    let (loaded, errors) = load(
        &dir,
        tmp.path(),
        "[config.gate-tests-pass]\nchecks = [\"unit\"]\n",
        &[],
    );
    assert!(errors.is_empty(), "{errors:?}");
    let tests_pass = find(&loaded, "gate-tests-pass").wasm_gate().unwrap();
    assert_eq!(tests_pass.checks(), ["unit"]);
    // A timed-out run fails with the reason, whatever the gate.
    let v = tests_pass
        .try_evaluate("unit", None, true, "running 3 tests\n", &[])
        .unwrap();
    assert!(!v.passing);
    assert!(v.summary.contains("timed out"), "{}", v.summary);
}

#[test]
fn a_gate_built_against_api_0_1_runs_through_the_frozen_binding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    let manifest = |api: &str, name: &str| {
        format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\nkind = \"gate\"\napi = \"{api}\"\ncomponent = \"legacy_gate_v0_1.wasm\"\n"
        )
    };
    for (name, api) in [("legacy", "0.1.0"), ("legacy-claims-0-2", "0.2.0")] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            plugins().join("legacy-gate-v0-1/legacy_gate_v0_1.wasm"),
            d.join("legacy_gate_v0_1.wasm"),
        )
        .unwrap();
        std::fs::write(d.join("plugin.toml"), manifest(api, name)).unwrap();
    }
    let (loaded, errors) = load(&dir, tmp.path(), "", &[]);
    // Declaring the current API for a 0.1.0 component is a contract mismatch, named.
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(
        matches!(errors[0], PluginLoadError::ContractMismatch { .. }),
        "{e}"
    );
    assert!(
        e.contains("legacy-claims-0-2") && e.contains("0.2.0"),
        "{e}"
    );

    let legacy = find(&loaded, "legacy");
    assert_eq!(legacy.api(), ApiVersion::V0_1);
    let gate = legacy.wasm_gate().unwrap();
    // 0.1.0 gates judged every check.
    assert_eq!(gate.checks(), ["*"]);
    let v = gate
        .try_evaluate("tests", Some(0), false, "ok", &[])
        .unwrap();
    assert!(v.passing);
    assert_eq!(v.summary, "legacy gate: exit 0");
    // A timeout reaches a 0.1.0 gate as a missing exit code, as that contract had it.
    let v = gate.try_evaluate("tests", Some(0), true, "", &[]).unwrap();
    assert!(!v.passing);
    assert_eq!(v.summary, "legacy gate: killed");

    // In a run, the old `*` gate takes over every check from the built-in `*` gate (it
    // does not clash with it), and judges the task's check: the project says so.
    std::fs::remove_dir_all(dir.join("legacy-claims-0-2")).unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("agentforge.toml"),
        "[plugins]\nreplace = [\"gate-command\"]\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(
        ws.join("task.yaml"),
        "id: old\ntask_type: fix_violation\ngoal: g\ninputs:\n  violation:\n    file_path: src/lib.rs\nchecks:\n  - name: lint\n    command: \"true\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("session.jsonl"),
        "{\"tool\":\"run_check\",\"arguments\":{}}\n{\"tool\":\"escalate\",\"arguments\":{\"reason\":\"r\"}}\n",
    )
    .unwrap();
    let (code, stderr) = run_replay(&ws, Some(&dir));
    assert_eq!(code, Some(2), "{stderr}");
    let state = std::fs::read_to_string(ws.join(".agentforge/tasks/old/state.yaml")).unwrap();
    assert!(state.contains("legacy gate: exit 0"), "{state}");
}

/// A plugin built against API 0.2.0 (an extractor, a gate and a tool in one fixture
/// component, wit-bindgen on `wit/snapshots/0.2.0`) still loads and runs through the
/// host's frozen 0.2.0 binding. The 0.2.0 extractor sees the action's output as before:
/// `details` (0.3.0) never reach it.
#[test]
fn plugins_built_against_api_0_2_run_through_the_frozen_binding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    let wasm = "legacy_extractor_v0_2.wasm";
    for (name, kind, api) in [
        ("legacy-x", "extractor", "0.2.0"),
        ("legacy-g", "gate", "0.2.0"),
        ("legacy-t", "tool", "0.2.0"),
        ("legacy-claims-0-3", "extractor", "0.3.0"),
    ] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            plugins().join("legacy-extractor-v0-2").join(wasm),
            d.join(wasm),
        )
        .unwrap();
        std::fs::write(
            d.join("plugin.toml"),
            format!("name = \"{name}\"\nversion = \"0.1.0\"\nkind = \"{kind}\"\napi = \"{api}\"\ncomponent = \"{wasm}\"\n"),
        )
        .unwrap();
    }
    let (loaded, errors) = load(&dir, tmp.path(), "", &[]);
    // Declaring 0.3.0 for a 0.2.0 extractor is a contract mismatch, named.
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = errors[0].to_string();
    assert!(
        matches!(errors[0], PluginLoadError::ContractMismatch { .. }),
        "{e}"
    );
    assert!(
        e.contains("legacy-claims-0-3") && e.contains("0.3.0"),
        "{e}"
    );

    let legacy = find(&loaded, "legacy-x");
    assert_eq!(legacy.api(), ApiVersion::V0_2);
    let x = legacy.wasm_extractor().unwrap();
    let details = r#"{"kind":"edit","action":"edit_file","path":"a.rs","created":false,"unchanged":false,"first_line":3,"lines_removed":1,"lines_added":2}"#;
    let facts = x
        .try_extract_details(
            "edit_file",
            "edited a.rs: replaced 1 line(s) at line 3 with 2 line(s)\nmore",
            ActionResult::Success,
            7,
            Some(details),
        )
        .unwrap();
    let said: Vec<(&str, &str)> = facts
        .iter()
        .map(|f| (f.statement.as_str(), f.source.as_str()))
        .collect();
    assert_eq!(
        said,
        [(
            "legacy extractor: edit_file success at step 7: edited a.rs: replaced 1 line(s) at line 3 with 2 line(s)",
            "edit_file"
        )]
    );
    // Its calls go through the 0.2.0 host too (`log`).
    assert!(
        legacy
            .recent_log()
            .iter()
            .any(|l| l.contains("legacy extractor reads `edit_file`")),
        "{:?}",
        legacy.recent_log()
    );

    let g = find(&loaded, "legacy-g");
    assert_eq!(g.api(), ApiVersion::V0_2);
    let gate = g.wasm_gate().unwrap();
    assert_eq!(gate.checks(), ["*"]);
    let v = gate
        .try_evaluate("tests", Some(0), false, "ok", &[])
        .unwrap();
    assert!(v.passing);
    assert_eq!(v.summary, "legacy 0.2 gate: exit 0");
    // 0.2.0 gates already saw the timeout flag.
    let v = gate.try_evaluate("tests", None, true, "", &[]).unwrap();
    assert!(!v.passing);
    assert_eq!(v.summary, "legacy 0.2 gate: timed out");

    let t = find(&loaded, "legacy-t");
    assert_eq!(t.api(), ApiVersion::V0_2);
    let tool = t.as_tool().unwrap();
    assert_eq!(tool.info().name, "legacy_echo");
    let out = tool.try_invoke(&json!({"text": "hi"})).unwrap().unwrap();
    assert_eq!(out.result, ActionResult::Success);
    assert_eq!(out.output, r#"{"text":"hi"}"#);
}

#[test]
fn a_manifest_declaring_another_world_is_a_contract_mismatch() {
    // A context-schema manifest on a tool component: the exports do not match.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(&dir, &["tool-outline"]);
    let m = dir.join("tool-outline/plugin.toml");
    let text = std::fs::read_to_string(&m).unwrap();
    std::fs::write(
        &m,
        text.replace("kind = \"tool\"", "kind = \"context-schema\""),
    )
    .unwrap();
    let (loaded, errors) = load(&dir, tmp.path(), "", &[]);
    assert!(loaded.is_empty());
    assert!(
        matches!(&errors[0], PluginLoadError::ContractMismatch { kind, .. } if kind.to_string() == "context-schema"),
        "{errors:?}"
    );
}

/// A run where the model misuses a tool plugin: arguments that do not fit its schema are
/// an invalid reply fed back (the plugin is not called); a read outside the granted globs
/// is the tool's failure, with the host's reason; then the task goes on.
#[test]
fn a_misused_tool_plugin_is_fed_back_not_fatal() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, ws) = (tmp.path().join("plugins"), tmp.path().join("ws"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(ws.join("secret.rs"), "fn key() {}\n").unwrap();
    std::fs::write(
        ws.join("agentforge.toml"),
        "[plugins.grants.tool-outline]\nread = [\"src/**\"]\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("task.yaml"),
        "id: misuse\ntask_type: fix_violation\ngoal: g\ninputs:\n  violation:\n    file_path: src/lib.rs\nchecks:\n  - name: tests\n    command: \"true\"\n    kind: test\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("session.jsonl"),
        concat!(
            "{\"tool\":\"outline\",\"arguments\":{\"file\":\"src/lib.rs\"}}\n",
            "{\"tool\":\"outline\",\"arguments\":{\"path\":\"secret.rs\"}}\n",
            "{\"tool\":\"outline\",\"arguments\":{\"path\":\"src/lib.rs\"}}\n",
            "{\"tool\":\"escalate\",\"arguments\":{\"reason\":\"done looking\"}}\n",
        ),
    )
    .unwrap();
    install(&dir, &["tool-outline"]);
    let (code, stderr) = run_replay(&ws, Some(&dir));
    assert_eq!(code, Some(2), "escalated: {stderr}");
    let recs = records(&ws, "misuse");
    let error = |i: usize| recs[i]["error"].as_str().unwrap_or("").to_string();
    assert_eq!(recs[0]["result"], "failure");
    assert!(
        error(0).contains("missing required field `path`"),
        "{}",
        recs[0]
    );
    assert_eq!(recs[1]["result"], "failure");
    assert!(
        error(1).contains("not in the globs the project grants"),
        "{}",
        recs[1]
    );
    assert_eq!(recs[2]["result"], "success", "{}", recs[2]);
    assert_eq!(recs[3]["action"], "escalate");
}

/// Seed 003's `block-tested-true` in a run: `finish_subtask` claiming `tested` is a state
/// write the built-in guard plugin judges. Before any test has run it is refused (the
/// model's evidence text is not enough) and the subtask stays open; after a passing test
/// run the host recorded, it is recorded.
#[test]
fn claiming_tested_before_a_test_run_is_refused_by_the_guard_plugin() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(
        ws.join("task.yaml"),
        "id: claims\ntask_type: fix_violation\ngoal: g\ninputs:\n  violation:\n    file_path: src/lib.rs\n  plan:\n    subtasks:\n      - Fix a\n      - Fix b\nchecks:\n  - name: tests\n    command: \"true\"\n    kind: test\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("session.jsonl"),
        concat!(
            "{\"tool\":\"read_file\",\"arguments\":{\"path\":\"src/lib.rs\"}}\n",
            "{\"tool\":\"finish_subtask\",\"arguments\":{\"summary\":\"fixed a\",\"tested\":true,\"evidence\":\"tests: 3 passed\"}}\n",
            "{\"tool\":\"run_tests\",\"arguments\":{}}\n",
            "{\"tool\":\"finish_subtask\",\"arguments\":{\"summary\":\"fixed a\",\"tested\":true,\"evidence\":\"tests: 3 passed\"}}\n",
            "{\"tool\":\"escalate\",\"arguments\":{\"reason\":\"stop here\"}}\n",
        ),
    )
    .unwrap();
    let (code, stderr) = run_replay(ws, None);
    assert_eq!(code, Some(2), "escalated: {stderr}");
    let recs = records(ws, "claims");
    assert_eq!(recs[1]["action"], "finish_subtask");
    assert_eq!(recs[1]["result"], "skipped", "{}", recs[1]);
    assert!(
        recs[1]["error"]
            .as_str()
            .unwrap()
            .contains("no test has run"),
        "{}",
        recs[1]
    );
    let first = |i: usize| recs[i]["state_after"]["focus"]["tasks"][0]["subtasks"][0].clone();
    assert_eq!(first(1)["status"], "in_progress", "{}", first(1));
    assert_eq!(recs[2]["action"], "run_tests");
    assert_eq!(recs[2]["result"], "success", "{}", recs[2]);
    assert_eq!(recs[3]["result"], "success", "{}", recs[3]);
    assert_eq!(first(3)["status"], "completed", "{}", first(3));
    assert_eq!(first(3)["tested"], "tests: 3 passed");
}

/// `run-check` is bounded per call: the check's time does not count against the plugin's
/// deadline, so a plugin may start at most 8 checks in one call.
#[test]
fn a_plugin_cannot_start_checks_without_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install_hostile(&dir, "hostile-checks", "[capabilities]\nchecks = [\"*\"]\n");
    let ok = CheckSpec {
        name: "ok".into(),
        command: "true".into(),
        kind: CheckKind::Check,
        timeout_secs: None,
    };
    let (loaded, errors) = load(
        &dir,
        tmp.path(),
        "[grants.hostile-checks]\nchecks = [\"ok\"]\n",
        &[ok],
    );
    assert!(errors.is_empty(), "{errors:?}");
    let x = find(&loaded, "hostile-checks").wasm_extractor().unwrap();
    let facts = x
        .try_extract("checks:20:ok", "", ActionResult::Success, 1)
        .unwrap();
    assert!(
        facts[0].statement.starts_with(
            "ran 8; last error: run-check `ok` refused: a call may run at most 8 checks"
        ),
        "{}",
        facts[0].statement
    );
    // The next call starts afresh.
    let facts = x
        .try_extract("checks:2:ok", "", ActionResult::Success, 2)
        .unwrap();
    assert_eq!(facts[0].statement, "ran 2; last error:");
}

/// A plugin blocking in a WASI clock wait (`sleep`) runs no guest code, so no epoch tick
/// can interrupt it: the host cuts such waits at the call's deadline, and the call fails
/// with the deadline instead of sleeping for ten minutes.
#[test]
fn a_sleeping_plugin_is_stopped_at_its_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install_hostile(&dir, "hostile-sleep", "[limits]\ndeadline_ms = 300\n");
    let (loaded, errors) = load(&dir, tmp.path(), "", &[]);
    assert!(errors.is_empty(), "{errors:?}");
    let x = find(&loaded, "hostile-sleep").wasm_extractor().unwrap();
    let started = std::time::Instant::now();
    let e = x
        .try_extract("sleep", "", ActionResult::Success, 1)
        .unwrap_err();
    assert!(
        matches!(e.cause, agentforge::plugins::PluginFailure::Deadline { .. }),
        "{e}"
    );
    // Not a timing assertion: the plugin asked for 600 s.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}
