//! The gate and guard plugins through the real host: `gate-tests-pass`,
//! `gate-conformance` and `guard-read-only-roles`, judging real outputs with the facts
//! the extractor plugins draw from them, configured by their manifest's `[config]` and
//! the project's `[plugins.config.<name>]`.
//!
//! The components are built by `plugins/build.sh` once per test process.

use crate::support;

use support::built_plugins::{plugins, root};

use std::path::Path;

use agentforge::gates::GateVerdict;
use agentforge::guards::GuardDecision;
use agentforge::plugins::{LoadedPlugin, WasmGate, WasmGuard};
use agentforge::state_store::{ActionResult, Fact};

/// Copies plugin folder `name` into `dir/<as_name>`, its manifest renamed.
fn install(dir: &Path, name: &str, as_name: &str) {
    let src = plugins().join(name);
    let dst = dir.join(as_name);
    std::fs::create_dir_all(&dst).unwrap();
    let wasm = format!("{}.wasm", name.replace('-', "_"));
    std::fs::copy(src.join(&wasm), dst.join(&wasm)).unwrap();
    let manifest = std::fs::read_to_string(src.join("plugin.toml")).unwrap();
    let manifest = manifest.replace(
        &format!("name = \"{name}\""),
        &format!("name = \"{as_name}\""),
    );
    std::fs::write(dst.join("plugin.toml"), manifest).unwrap();
}

/// The plugins installed as `(folder, name)` pairs, loaded with the project's
/// `[plugins]` table `config`.
struct Loaded {
    _dir: tempfile::TempDir,
    plugins: Vec<LoadedPlugin>,
}

impl Loaded {
    fn new(installs: &[(&str, &str)], config: &str) -> Loaded {
        let dir = tempfile::tempdir().unwrap();
        for (name, as_name) in installs {
            install(dir.path(), name, as_name);
        }
        let config: agentforge::config::PluginsConfig = toml::from_str(config).unwrap();
        let ws = agentforge::tools::Workspace::new(dir.path()).unwrap();
        let opts = agentforge::plugins::LoadOptions::new(&ws, &config);
        let (plugins, errors) =
            agentforge::plugins::load_dir_with(dir.path(), &dir.path().join("cache"), &opts);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(plugins.len(), installs.len());
        Loaded { _dir: dir, plugins }
    }

    fn get(&self, name: &str) -> &LoadedPlugin {
        self.plugins.iter().find(|p| p.name() == name).unwrap()
    }

    fn gate(&self, name: &str) -> WasmGate {
        self.get(name).wasm_gate().expect("a gate")
    }

    fn guard(&self, name: &str) -> WasmGuard {
        self.get(name).wasm_guard().expect("a guard")
    }

    /// The facts extractor plugin `name` draws from `output` of check `check`.
    fn facts(&self, name: &str, check: &str, output: &str) -> Vec<Fact> {
        self.get(name)
            .wasm_extractor()
            .expect("an extractor")
            .try_extract(check, output, ActionResult::Failure, 1)
            .unwrap()
    }
}

fn output(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/data/outputs").join(name)).unwrap()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn pass(summary: &str) -> GateVerdict {
    GateVerdict {
        passing: true,
        summary: summary.to_string(),
    }
}

fn fail(summary: &str) -> GateVerdict {
    GateVerdict {
        passing: false,
        summary: summary.to_string(),
    }
}

#[test]
fn tests_gate_names_its_checks_from_its_config() {
    let loaded = Loaded::new(
        &[
            ("gate-tests-pass", "gate-tests-pass"),
            ("gate-tests-pass", "gate-tests-custom"),
        ],
        "[config.gate-tests-custom]\nchecks = [\"unit\", \"integration\"]\n",
    );
    assert_eq!(
        loaded.gate("gate-tests-pass").checks(),
        strings(&["tests", "test", "run_tests"])
    );
    assert_eq!(
        loaded.gate("gate-tests-custom").checks(),
        strings(&["unit", "integration"])
    );
}

#[test]
fn tests_gate_requires_exit_0_no_failure_and_a_test_run() {
    let loaded = Loaded::new(
        &[
            ("gate-tests-pass", "gate-tests-pass"),
            ("gate-tests-pass", "gate-tests-lenient"),
            ("gate-tests-pass", "gate-tests-strict"),
            ("extract-cargo", "extract-cargo"),
            ("extract-pytest", "extract-pytest"),
        ],
        "[config.gate-tests-lenient]\nallow_no_tests = true\n[config.gate-tests-strict]\nrequire_test_counts = true\n",
    );
    let gate = loaded.gate("gate-tests-pass");
    let judge = |exit: Option<i32>, timed_out: bool, out: &str, facts: &[Fact]| {
        gate.try_evaluate("tests", exit, timed_out, out, facts)
            .unwrap()
    };
    let cargo = |out: &str| loaded.facts("extract-cargo", "tests", out);

    // A real failing cargo test run, text and JSON: failed, with the first failure.
    for file in ["cargo_test_failures.txt", "cargo-test-json.txt"] {
        let out = output(file);
        let v = judge(Some(101), false, &out, &cargo(&out));
        assert!(!v.passing, "{file}");
        assert!(
            v.summary
                .starts_with("tests: 3 passed, 3 failed, 1 ignored (exit 101); test "),
            "{file}: {}",
            v.summary
        );
        assert!(v.summary.contains(" panicked at "), "{}", v.summary);
        assert!(!v.summary.contains('\n'));
        // Exit 0 does not make it pass: the facts count failures.
        let v = judge(Some(0), false, &out, &cargo(&out));
        assert!(!v.passing, "{file}: {}", v.summary);
        assert!(v.summary.contains("despite exit 0"), "{}", v.summary);
    }
    assert_eq!(
        judge(
            Some(101),
            false,
            "x",
            &cargo(&output("cargo_test_failures.txt"))
        ),
        fail("tests: 3 passed, 3 failed, 1 ignored (exit 101); test tests::adds_negative panicked at src/lib.rs:8: assertion `left == right` failed: negative sums")
    );

    // pytest's failures and errors, also with exit 0.
    let py = output("pytest-failures.txt");
    let py_facts = loaded.facts("extract-pytest", "tests", &py);
    let v = judge(Some(0), false, &py, &py_facts);
    assert!(!v.passing);
    assert!(
        v.summary
            .starts_with("pytest: 2 failed, 4 passed, 1 error: a test failed despite exit 0; "),
        "{}",
        v.summary
    );

    // A passing run: its counts; compiler warnings are no failure.
    let ok = "warning: unused variable: `x`\n --> src/lib.rs:3:9\n\nrunning 5 tests\ntest result: ok. 5 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s\n";
    let ok_facts = cargo(ok);
    assert!(ok_facts.iter().any(|f| f.statement.starts_with("warning")));
    assert_eq!(
        judge(Some(0), false, ok, &ok_facts),
        pass("tests: 5 passed, 0 failed (exit 0)")
    );
    // The same output with exit 1: failed.
    assert!(!judge(Some(1), false, ok, &ok_facts).passing);

    // No test ran: 0 counted, or nothing to count.
    let none = "running 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    assert_eq!(
        judge(Some(0), false, none, &cargo(none)),
        fail("no tests ran (tests: 0 passed, 0 failed)")
    );
    for (out, why) in [
        ("running 0 tests\n", "running 0 tests"),
        ("no tests ran in 0.01s\n", "no tests ran"),
        (
            "?   \texample.com/demo\t[no test files]\n",
            "[no test files]",
        ),
    ] {
        assert_eq!(
            judge(Some(0), false, out, &[]),
            fail(&format!("no tests ran ({why})"))
        );
    }
    // An output with no test count at all (a `grep` named `tests`): exit 0 passes, and
    // says so; a project requiring counts fails it.
    assert_eq!(
        judge(Some(0), false, "all good\n", &[]),
        pass("passed (exit 0; no test count found)")
    );
    assert_eq!(
        loaded
            .gate("gate-tests-strict")
            .try_evaluate("tests", Some(0), false, "all good\n", &[])
            .unwrap(),
        fail("no tests ran (no test count in the output)")
    );
    // ... unless the project allows it.
    let lenient = loaded.gate("gate-tests-lenient");
    assert!(
        lenient
            .try_evaluate("tests", Some(0), false, none, &cargo(none))
            .unwrap()
            .passing
    );
    // Without facts the output is read: a go run's `ok` lines, a `FAIL` line.
    assert_eq!(
        judge(Some(0), false, "ok  \texample.com/demo/calc\t0.002s\n", &[]),
        pass("passed (exit 0)")
    );
    assert!(
        !judge(
            Some(0),
            false,
            "--- FAIL: TestAdd (0.00s)\nok  \texample.com/demo\t0.002s\n",
            &[]
        )
        .passing
    );
    assert_eq!(
        judge(
            Some(2),
            false,
            "\nerror: could not find `Cargo.toml`\n\n",
            &[]
        ),
        fail("failed (exit 2): error: could not find `Cargo.toml`")
    );

    assert_eq!(
        judge(Some(1), false, "", &[]),
        fail("failed (exit 1), no output")
    );

    // Killed: by the timeout, or otherwise.
    assert_eq!(
        judge(None, true, &output("cargo_test_failures.txt"), &[]),
        fail("timed out")
    );
    assert_eq!(judge(Some(0), true, ok, &ok_facts), fail("timed out"));
    assert_eq!(
        judge(None, false, ok, &ok_facts),
        fail("killed before it finished")
    );
}

#[test]
fn conformance_gate_fails_on_violations_and_names_the_first() {
    let loaded = Loaded::new(
        &[
            ("gate-conformance", "gate-conformance"),
            ("gate-conformance", "gate-conformance-loose"),
            ("extract-conformance", "extract-conformance"),
        ],
        "[config.gate-conformance-loose]\nchecks = [\"lint-contracts\"]\nmax_complexity = 30\nmax_function_lines = 100\n",
    );
    let gate = loaded.gate("gate-conformance");
    assert_eq!(gate.checks(), strings(&["conformance"]));
    let loose = loaded.gate("gate-conformance-loose");
    assert_eq!(loose.checks(), strings(&["lint-contracts"]));
    let judge = |g: &WasmGate, exit: Option<i32>, out: &str, facts: &[Fact]| {
        g.try_evaluate("conformance", exit, false, out, facts)
            .unwrap()
    };
    let bad = output("conformance-violations.txt");
    let bad_facts = loaded.facts("extract-conformance", "conformance", &bad);
    let first = "Function 'execute' has cyclomatic complexity 15 (threshold 10 exceeded) at src/calc/engine.py:145";
    assert_eq!(
        judge(&gate, Some(1), &bad, &bad_facts),
        fail(&format!("3 violations (exit 1); first: {first}"))
    );
    // Exit 0 with violations reported: failed all the same.
    assert_eq!(
        judge(&gate, Some(0), &bad, &bad_facts),
        fail(&format!("3 violations; first: {first}"))
    );
    // No extractor ran: the gate reads the output.
    assert_eq!(
        judge(&gate, Some(0), &bad, &[]),
        fail("3 violations; first: src/calc/engine.py:145: [max-cyclomatic-complexity] warning: Function 'execute' has complexity 15 (max 10)")
    );

    let good = output("conformance-passed.txt");
    let good_facts = loaded.facts("extract-conformance", "conformance", &good);
    assert_eq!(
        judge(&gate, Some(0), &good, &good_facts),
        pass("no violations (exit 0)")
    );
    assert_eq!(
        judge(&gate, Some(0), &good, &[]),
        pass("no violations (exit 0)")
    );
    assert_eq!(
        judge(&gate, Some(2), &good, &good_facts),
        fail("failed (exit 2): Check PASSED")
    );
    assert_eq!(
        gate.try_evaluate("conformance", None, true, &good, &good_facts)
            .unwrap(),
        fail("timed out")
    );

    // Thresholds from the config: complexity 15 and 23 are within 30, 66 lines within
    // 100; without the tool's count, nothing is over.
    let measured: Vec<Fact> = bad_facts
        .iter()
        .filter(|f| f.statement.starts_with("Function"))
        .cloned()
        .collect();
    assert_eq!(measured.len(), 3);
    assert_eq!(
        judge(&loose, Some(0), "", &measured),
        pass("no violations (exit 0)")
    );
    // The default gate keeps the tool's thresholds.
    assert_eq!(
        judge(&gate, Some(0), "", &measured),
        fail(&format!("3 violations; first: {first}"))
    );
    // The tool's count fails whatever the thresholds.
    assert!(!judge(&loose, Some(0), "", &bad_facts).passing);
}

/// A decision of `guard` on `action` for a task with `task_json`.
fn decide(guard: &WasmGuard, action: &str, target: Option<&str>, task_json: &str) -> GuardDecision {
    guard
        .try_check(action, target, r#"{"path":"src/lib.rs"}"#, task_json, "{}")
        .unwrap()
}

#[test]
fn read_only_roles_may_not_write() {
    let loaded = Loaded::new(
        &[
            ("guard-read-only-roles", "guard-read-only-roles"),
            ("guard-read-only-roles", "guard-auditors"),
        ],
        "[config.guard-auditors]\nread_only_roles = [\"auditor\"]\nwrite_actions = [\"apply_patch\"]\n",
    );
    let guard = loaded.guard("guard-read-only-roles");
    let qc = r#"{"id":"t","task_type":"fix_violation","goal":"g","role":"qc"}"#;
    let d = decide(&guard, "edit_file", Some("src/lib.rs"), qc);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.starts_with("role `qc` is read-only: `edit_file` on `src/lib.rs`")),
        "{d:?}"
    );
    for (action, role) in [
        ("write_file", "critic"),
        ("replace_lines", "reviewer"),
        ("edit_file", "QC"),
        // The value loop's roles that only read and report.
        ("edit_file", "planner"),
        ("write_file", "classifier"),
        ("replace_lines", "researcher"),
        ("edit_file", "evaluator"),
    ] {
        let task = format!(r#"{{"id":"t","role":"{role}"}}"#);
        let d = decide(&guard, action, Some("src/lib.rs"), &task);
        assert!(
            matches!(&d, GuardDecision::Deny(r) if r.contains("is read-only")),
            "{action} {role}: {d:?}"
        );
    }
    // Reading, checking and finishing are allowed; so is writing for other roles and
    // for tasks without a role.
    for action in ["read_file", "search", "run_tests", "run_check", "complete"] {
        assert_eq!(
            decide(&guard, action, None, qc),
            GuardDecision::Allow,
            "{action}"
        );
    }
    for task in [
        r#"{"id":"t","role":"builder"}"#,
        r#"{"id":"t","role":"fixer"}"#,
        r#"{"id":"t","role":"qc_author"}"#,
        r#"{"id":"t"}"#,
        r#"{"id":"t","role":null}"#,
        "",
    ] {
        assert_eq!(
            decide(&guard, "edit_file", Some("src/lib.rs"), task),
            GuardDecision::Allow,
            "{task}"
        );
    }
    // An unreadable task: writes are refused (fail closed), reads allowed.
    assert!(matches!(
        decide(&guard, "write_file", Some("a"), "{not json"),
        GuardDecision::Deny(r) if r.contains("role cannot be read")
    ));
    assert_eq!(
        decide(&guard, "read_file", Some("a"), "{not json"),
        GuardDecision::Allow
    );

    // The project's config replaces the roles and adds write actions.
    let auditors = loaded.guard("guard-auditors");
    let auditor = r#"{"id":"t","role":"auditor"}"#;
    assert!(matches!(
        decide(&auditors, "apply_patch", None, auditor),
        GuardDecision::Deny(r) if r == "role `auditor` is read-only: `apply_patch` would change the work it checks; report what should change instead"
    ));
    assert!(matches!(
        decide(&auditors, "edit_file", Some("x"), auditor),
        GuardDecision::Deny(_)
    ));
    assert_eq!(
        decide(&auditors, "edit_file", Some("x"), qc),
        GuardDecision::Allow
    );
    assert_eq!(
        decide(&guard, "apply_patch", None, qc),
        GuardDecision::Allow
    );
}

#[test]
fn read_only_guard_sees_the_role_of_a_real_task() {
    use agentforge::tools::Action;
    let loaded = Loaded::new(&[("guard-read-only-roles", "guard-read-only-roles")], "");
    let guard = loaded.get("guard-read-only-roles").as_guard().unwrap();
    let edit = Action::EditFile {
        path: "src/lib.rs".into(),
        old_text: "a".into(),
        new_text: "b".into(),
    };
    let read = Action::ReadFile {
        path: "src/lib.rs".into(),
        start_line: None,
        end_line: None,
    };
    let task = |yaml: &str| agentforge::task::TaskSpec::parse(yaml, "task.yaml").unwrap();
    let critic = task("id: t\ntask_type: fix_violation\ngoal: g\nrole: critic\n");
    let builder = task("id: t\ntask_type: fix_violation\ngoal: g\n");
    let state = agentforge::state_store::TaskState::initial(&critic, "implement", 10);
    assert!(matches!(
        guard.check(&edit, &critic, &state),
        GuardDecision::Deny(r) if r.starts_with("role `critic` is read-only")
    ));
    assert_eq!(guard.check(&read, &critic, &state), GuardDecision::Allow);
    assert_eq!(guard.check(&edit, &builder, &state), GuardDecision::Allow);
}

/// A task of type `task_type` and its initial state, as the executor holds them.
fn task_and_state(
    task_type: &str,
) -> (
    agentforge::task::TaskSpec,
    agentforge::state_store::TaskState,
) {
    let yaml = format!("id: t\ntask_type: {task_type}\ngoal: g\n");
    let spec = agentforge::task::TaskSpec::parse(&yaml, "task.yaml").unwrap();
    let state = agentforge::state_store::TaskState::initial(&spec, "implement", 20);
    (spec, state)
}

/// A test check's latest result recorded at `step`.
fn test_run(passing: bool, step: u64) -> agentforge::state_store::CheckStatus {
    agentforge::state_store::CheckStatus {
        passing,
        summary: if passing {
            "4 passed"
        } else {
            "3 passed, 1 failed"
        }
        .to_string(),
        is_test: true,
        step,
    }
}

#[test]
fn tested_needs_a_passing_test_run_the_host_recorded_after_the_last_change() {
    use agentforge::guards::Guards;
    let loaded = Loaded::new(&[("guard-tested-evidence", "guard-tested-evidence")], "");
    let mut guards = Guards::default();
    guards.push(loaded.get("guard-tested-evidence").as_guard().unwrap());
    let (spec, mut state) = task_and_state("fix_violation");
    // What the executor asks when `finish_subtask` claims `tested`.
    let args = serde_json::json!({"field": "subtask.tested", "value": true,
                                  "evidence": "cargo test: all green"});
    let claim = |state: &agentforge::state_store::TaskState| {
        guards
            .check_write("subtask.tested", &args, &spec, state)
            .decision
    };

    // No test has run: the evidence text is not enough.
    let d = claim(&state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.starts_with("`subtask.tested` may not be set to true: no test has run") && r.contains("run the tests (run_tests) after your last change")),
        "{d:?}"
    );
    // A check that is not a test is no test run.
    let mut lint = test_run(true, 2);
    lint.is_test = false;
    state.verification.checks.insert("lint".into(), lint);
    assert!(matches!(claim(&state), GuardDecision::Deny(r) if r.contains("no test has run")));

    // With no change yet, a passing test run counts.
    state
        .verification
        .checks
        .insert("tests".into(), test_run(true, 3));
    assert_eq!(claim(&state), GuardDecision::Allow);

    // A change at step 5 makes that run old.
    state.last_change_step = 5;
    state.files_modified.push("src/lib.rs".into());
    let d = claim(&state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.contains("the last test run (`tests`, step 3) is older than the change at step 5")),
        "{d:?}"
    );
    // The checks the host runs right after the change, in its step: evidence.
    state
        .verification
        .checks
        .insert("tests".into(), test_run(true, 5));
    assert_eq!(claim(&state), GuardDecision::Allow);
    // A later run that fails: denied, by name.
    state
        .verification
        .checks
        .insert("tests".into(), test_run(false, 6));
    let d = claim(&state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.contains("the test check `tests` is failing (step 6: 3 passed, 1 failed)")),
        "{d:?}"
    );
    state
        .verification
        .checks
        .insert("tests".into(), test_run(true, 7));
    assert_eq!(claim(&state), GuardDecision::Allow);
    // Claiming `tested` false is never refused.
    let not = serde_json::json!({"field": "subtask.tested", "value": false, "evidence": ""});
    state.verification.checks.clear();
    assert_eq!(
        guards
            .check_write("subtask.tested", &not, &spec, &state)
            .decision,
        GuardDecision::Allow
    );
}

#[test]
fn complete_needs_a_changed_file_unless_the_task_type_allows_none() {
    use agentforge::tools::Action;
    let loaded = Loaded::new(
        &[
            ("guard-verify-implementation", "guard-verify-implementation"),
            ("guard-verify-implementation", "guard-verify-custom"),
        ],
        "[config.guard-verify-custom]\nno_change_task_types = [\"audit\"]\n",
    );
    let guard = loaded
        .get("guard-verify-implementation")
        .as_guard()
        .unwrap();
    let complete = Action::Complete { summary: None };
    let (spec, mut state) = task_and_state("fix_violation");
    let d = guard.check(&complete, &spec, &state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.starts_with("complete refused: no workspace file has changed since the task began (task type `fix_violation` expects a change); make the change")),
        "{d:?}"
    );
    // Other actions are not judged.
    let read = Action::ReadFile {
        path: "src/lib.rs".into(),
        start_line: None,
        end_line: None,
    };
    assert_eq!(guard.check(&read, &spec, &state), GuardDecision::Allow);
    state.files_modified.push("src/lib.rs".into());
    assert_eq!(guard.check(&complete, &spec, &state), GuardDecision::Allow);

    // The value loop's roles that only read and report may complete without a change;
    // those that write may not.
    for (task_type, allowed) in [
        ("planner", true),
        ("critic", true),
        ("classifier", true),
        ("researcher", true),
        ("evaluator", true),
        ("builder", false),
        ("fixer", false),
        ("qc_author", false),
        ("implement_feature", false),
        ("write_tests", false),
    ] {
        let (spec, state) = task_and_state(task_type);
        let d = guard.check(&complete, &spec, &state);
        assert_eq!(d == GuardDecision::Allow, allowed, "{task_type}: {d:?}");
    }

    // The project's list replaces the default.
    let custom = loaded.get("guard-verify-custom").as_guard().unwrap();
    let (audit, audit_state) = task_and_state("audit");
    assert_eq!(
        custom.check(&complete, &audit, &audit_state),
        GuardDecision::Allow
    );
    let (planner, planner_state) = task_and_state("planner");
    assert!(matches!(
        custom.check(&complete, &planner, &planner_state),
        GuardDecision::Deny(_)
    ));
}

/// The approved rule of the issue's example: `complete` with no file changed.
fn learned_rule() -> serde_json::Value {
    serde_json::json!({"id": 3, "action": "complete", "target_glob": null,
        "condition": "no_files_changed", "effect": "deny",
        "reason": "completing without changing a file was refused before",
        "pattern": "guard-verify-implementation denied `complete` 4 times in 2 tasks"})
}

/// The built-in guards, loaded as a run loads them, with `learned_rules` approved.
fn builtin_guards(
    rules: Vec<serde_json::Value>,
    cache: &Path,
) -> Vec<agentforge::plugins::LoadedPlugin> {
    use agentforge::plugins::{load_builtin, LoadOptions, PluginKind};
    let guards: Vec<_> = agentforge_builtins::BUILTIN_PLUGINS
        .iter()
        .filter(|b| b.kind() == Some(PluginKind::Guard))
        .copied()
        .collect();
    let opts = LoadOptions {
        config: agentforge::config::PluginsConfig {
            learned_rules: rules,
            ..Default::default()
        },
        ..Default::default()
    };
    let (loaded, errors) = load_builtin(&guards, cache, &opts);
    assert!(errors.is_empty(), "{errors:?}");
    loaded
}

#[test]
fn builtin_learned_rules_guard_gets_the_approved_rules_and_cites_them_first() {
    use agentforge::guards::Guards;
    use agentforge::tools::Action;
    let cache = tempfile::tempdir().unwrap();
    let complete = Action::Complete { summary: None };
    let (spec, mut state) = task_and_state("fix_violation");
    state.verification.ready_for_completion = true;

    let loaded = builtin_guards(vec![learned_rule()], cache.path());
    let names: Vec<&str> = loaded.iter().map(|p| p.name()).collect();
    // Consulted in this order (the run keeps it): the learned rules before the other
    // built-in guards, and `complete` with nothing changed before `complete` not ready.
    assert_eq!(
        names,
        [
            "guard-learned-rules",
            "guard-verify-implementation",
            "guard-complete-verified",
            "guard-tested-evidence",
            "guard-read-only-roles"
        ]
    );
    let learned = loaded
        .iter()
        .find(|p| p.name() == "guard-learned-rules")
        .unwrap();
    assert!(learned.is_builtin() && learned.granted.learned_rules);
    let rule_guard = learned.as_guard().unwrap();
    let cited = "learned rule #3: completing without changing a file was refused before (pattern: guard-verify-implementation denied `complete` 4 times in 2 tasks)";
    assert_eq!(
        rule_guard.check(&complete, &spec, &state),
        GuardDecision::Deny(cited.to_string())
    );
    // Wired as a run wires them (the host's guard, then the built-ins in order): both the
    // rule and guard-verify-implementation deny; the denial shown cites the rule.
    let mut guards = Guards::default();
    for p in &loaded {
        guards.push(p.as_guard().unwrap());
    }
    let ruling = guards.check(&complete, &spec, &state);
    assert_eq!(ruling.decision, GuardDecision::Deny(cited.to_string()));
    assert_eq!(ruling.by, ["guard-learned-rules"]);
    // The rule's condition does not hold once a file changed.
    state.files_modified.push("src/lib.rs".into());
    assert_eq!(
        guards.check(&complete, &spec, &state).decision,
        GuardDecision::Allow
    );

    // No approved rules: the guard allows.
    state.files_modified.clear();
    let none = builtin_guards(Vec::new(), cache.path());
    // Then `complete` with nothing changed and the checks not ready is refused for the
    // more basic cause: nothing was done.
    let mut guards = Guards::default();
    for p in &none {
        guards.push(p.as_guard().unwrap());
    }
    let mut not_ready = state.clone();
    not_ready.verification.ready_for_completion = false;
    let ruling = guards.check(&complete, &spec, &not_ready);
    assert_eq!(ruling.by, ["guard-verify-implementation"], "{ruling:?}");
    assert!(
        matches!(&ruling.decision, GuardDecision::Deny(r) if r.contains("no workspace file has changed")),
        "{ruling:?}"
    );
    let empty = none
        .iter()
        .find(|p| p.name() == "guard-learned-rules")
        .unwrap();
    assert_eq!(
        empty.as_guard().unwrap().check(&complete, &spec, &state),
        GuardDecision::Allow
    );

    // A rule that does not parse is skipped and logged; the good one still denies.
    let bad = serde_json::json!({"id": 9, "action": "*", "target_glob": null,
        "condition": "always", "effect": "obliterate", "reason": "r", "pattern": "p"});
    let mixed = builtin_guards(vec![bad, learned_rule()], cache.path());
    let mixed = mixed
        .iter()
        .find(|p| p.name() == "guard-learned-rules")
        .unwrap();
    let read = Action::ReadFile {
        path: "src/lib.rs".into(),
        start_line: None,
        end_line: None,
    };
    let guard = mixed.as_guard().unwrap();
    assert_eq!(guard.check(&read, &spec, &state), GuardDecision::Allow);
    assert_eq!(
        guard.check(&complete, &spec, &state),
        GuardDecision::Deny(cited.to_string())
    );
    let log = mixed.recent_log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("warn: learned rule #9 skipped: unknown variant `obliterate`")),
        "{log:?}"
    );
}

#[test]
fn a_folder_learned_rules_plugin_gets_the_rules_only_where_granted() {
    use agentforge::tools::Action;
    let rules = serde_json::to_string(&vec![learned_rule()]).unwrap();
    let load = |grant: &str| {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "guard-learned-rules", "my-rules");
        let mut config: agentforge::config::PluginsConfig = toml::from_str(grant).unwrap();
        config.learned_rules = serde_json::from_str(&rules).unwrap();
        // Rules the project's config would slip in are not approved ones: the host owns
        // the key.
        config.config.insert(
            "my-rules".into(),
            toml::from_str(
                "[[rules]]\nid = 1\naction = \"*\"\ncondition = \"always\"\neffect = \"deny\"\nreason = \"r\"\npattern = \"p\"\n",
            )
            .unwrap(),
        );
        let ws = agentforge::tools::Workspace::new(dir.path()).unwrap();
        let opts = agentforge::plugins::LoadOptions::new(&ws, &config);
        let plugin = agentforge::plugins::load_plugin_with(
            &dir.path().join("my-rules"),
            &dir.path().join("cache"),
            &opts,
        )
        .unwrap();
        (dir, plugin)
    };
    let complete = Action::Complete { summary: None };
    let (spec, state) = task_and_state("fix_violation");

    // Requested, not granted: no rules, and the refusal is in its log and notes.
    let (_dir, ungranted) = load("");
    assert!(!ungranted.is_builtin() && !ungranted.granted.learned_rules);
    assert_eq!(
        ungranted
            .as_guard()
            .unwrap()
            .check(&complete, &spec, &state),
        GuardDecision::Allow
    );
    let refusal = "host: `learned_rules` refused: the project does not grant it, so `config()` has no `rules` (agentforge.toml `[plugins.grants.my-rules] learned_rules = true`)";
    assert!(
        ungranted.recent_log().iter().any(|l| l == refusal),
        "{:?}",
        ungranted.recent_log()
    );
    assert!(
        ungranted.notes.iter().any(|n| n == refusal),
        "{:?}",
        ungranted.notes
    );

    // Granted: the approved rules, not the config's.
    let (_dir, granted) = load("[grants.my-rules]\nlearned_rules = true\n");
    assert!(granted.granted.learned_rules);
    assert!(
        !granted.notes.iter().any(|n| n.contains("learned_rules")),
        "{:?}",
        granted.notes
    );
    let d = granted.as_guard().unwrap().check(&complete, &spec, &state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.starts_with("learned rule #3: ")),
        "{d:?}"
    );
}

/// The rules' JSON is a contract between `agentforge-graph` (which writes it) and the
/// guard (which reads it): every condition and effect the database can hold parses, and
/// a target glob is matched against the action's target.
#[test]
fn the_graphs_learned_rules_are_what_the_guard_reads() {
    use agentforge::graph::{LearnedRule, RuleCondition, RuleEffect};
    use agentforge::tools::Action;
    let cache = tempfile::tempdir().unwrap();
    let conditions = [
        RuleCondition::Always,
        RuleCondition::NoFilesChanged,
        RuleCondition::NoPassingTestSinceLastChange,
        RuleCondition::ChecksNotReady,
        RuleCondition::LoopWarningActive,
    ];
    let mut rules = Vec::new();
    for (i, condition) in conditions.into_iter().enumerate() {
        for (j, effect) in [RuleEffect::Warn, RuleEffect::Deny].into_iter().enumerate() {
            let rule = LearnedRule {
                id: (10 * i + j + 1) as i64,
                action: "edit_file".into(),
                target_glob: Some("src/**".into()),
                condition,
                effect,
                reason: format!("Do not call `edit_file` ({}).", condition.as_str()),
                pattern: "guard-x denied `edit_file` 3 times in 2 tasks".into(),
            };
            rules.push(serde_json::to_value(&rule).unwrap());
        }
    }
    let loaded = builtin_guards(rules, cache.path());
    let learned = loaded
        .iter()
        .find(|p| p.name() == "guard-learned-rules")
        .unwrap();
    let guard = learned.as_guard().unwrap();
    let (spec, state) = task_and_state("fix_violation");
    let edit = |path: &str| Action::EditFile {
        path: path.into(),
        old_text: "a".into(),
        new_text: "b".into(),
    };
    // On a fresh task every condition but the loop warning holds: the first deny rule
    // (`always`, #2) is the one cited.
    let d = guard.check(&edit("src/a/lib.rs"), &spec, &state);
    assert!(
        matches!(&d, GuardDecision::Deny(r) if r.starts_with("learned rule #2: Do not call `edit_file` (always).")),
        "{d:?}"
    );
    // Outside the glob no rule applies.
    assert_eq!(
        guard.check(&edit("README.md"), &spec, &state),
        GuardDecision::Allow
    );
    // Every rule parsed: nothing was skipped.
    assert!(
        !learned.recent_log().iter().any(|l| l.contains("skipped")),
        "{:?}",
        learned.recent_log()
    );
}
