//! The built-in extractor plugins against real tool outputs (`tests/data/outputs/`).
//!
//! Each plugin folder is installed alone into a temporary directory and loaded with
//! [`load_dir`], as `agentforge run --plugins` would; the components are built by
//! `plugins/build.sh` once per test process.

use crate::support;

use support::built_plugins::{plugins, root};

use std::path::Path;
use std::sync::OnceLock;

use agentforge::plugins::{load_dir, WasmExtractor};
use agentforge::state_store::{ActionResult, FactCategory};

/// The compile cache shared by the tests of this process.
fn cache() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// Plugin folder `name` installed alone and loaded: its extractor (of any check:
/// `handles` is `*`).
fn extractor(name: &str) -> WasmExtractor {
    let x = extractor_of(name);
    assert!(x.handles("tests") && x.handles("lint"));
    x
}

/// Plugin folder `name` installed alone and loaded: its extractor, whatever it handles.
fn extractor_of(name: &str) -> WasmExtractor {
    let src = plugins().join(name);
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for file in ["plugin.toml", &format!("{}.wasm", name.replace('-', "_"))] {
        std::fs::copy(src.join(file), dst.join(file)).unwrap();
    }
    let (mut loaded, errors) = load_dir(dir.path(), cache());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(loaded.len(), 1);
    let plugin = loaded.remove(0);
    assert_eq!(plugin.name(), name);
    plugin.wasm_extractor().expect("an extractor")
}

fn output(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/data/outputs").join(name)).unwrap()
}

/// The statements drawn from output file `file` (as check `check`, failed).
fn statements(x: &WasmExtractor, check: &str, file: &str) -> Vec<String> {
    facts(x, check, file)
        .into_iter()
        .map(|f| f.statement)
        .collect()
}

fn facts(x: &WasmExtractor, check: &str, file: &str) -> Vec<agentforge::state_store::Fact> {
    let facts = x
        .try_extract(check, &output(file), ActionResult::Failure, 1)
        .unwrap();
    for f in &facts {
        assert_eq!(f.source, check, "{f:?}");
    }
    facts
}

/// Every output file of the other tool families: the plugin must draw nothing from them.
fn assert_silent_on_others(x: &WasmExtractor, own_prefixes: &[&str]) {
    let dir = root().join("tests/data/outputs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if own_prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        assert_eq!(
            statements(x, "tests", &name),
            Vec::<String>::new(),
            "{name}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} unrelated outputs");
}

#[test]
fn pytest_counts_failing_node_ids_and_locations() {
    let x = extractor("extract-pytest");
    let expected = [
        "pytest: 2 failed, 4 passed, 1 error",
        "test tests/test_ops.py::test_add fails at tests/test_ops.py:5: AssertionError: assert 4 == 3",
        "test tests/test_ops.py::test_mean_empty fails at src/calc/ops.py:10: ZeroDivisionError: division by zero",
        "test tests/test_db.py::test_query errors at tests/conftest.py:6: RuntimeError: database unavailable",
    ];
    let facts = facts(&x, "tests", "pytest-failures.txt");
    assert_eq!(facts[0].category, FactCategory::Verification);
    assert!(facts[1..].iter().all(|f| f.category == FactCategory::Error));
    // The default long tracebacks and `-q --tb=short`: the same facts.
    assert_eq!(statements(&x, "tests", "pytest-failures.txt"), expected);
    assert_eq!(statements(&x, "tests", "pytest-quiet-short.txt"), expected);
    // A module that does not import: collected with an error, located by its SyntaxError.
    assert_eq!(
        statements(&x, "tests", "pytest-collection-error.txt"),
        [
            "pytest: 1 error",
            "tests/test_broken.py fails to collect at /tmp/pyproj/tests/test_broken.py:1: SyntaxError: invalid syntax",
        ]
    );
}

#[test]
fn pytest_plugin_is_silent_on_other_tools() {
    assert_silent_on_others(&extractor("extract-pytest"), &["pytest-"]);
}

#[test]
fn mypy_errors_with_codes_and_summary() {
    let x = extractor("extract-python-lint");
    assert_eq!(
        statements(&x, "typecheck", "mypy-errors.txt"),
        [
            "mypy: 4 errors in 2 files",
            r#"error at src/calc/ops.py:14: Incompatible return value type (got "str", expected "int") [return-value]"#,
            r#"error at src/calc/ops.py:18: Name "undefined_name" is not defined [name-defined]"#,
            r#"error at src/calc/report.py:5: Incompatible return value type (got "int", expected "str") [return-value]"#,
            r#"error at src/calc/report.py:5: Argument 1 to "add" has incompatible type "list[int]"; expected "int" [arg-type]"#,
        ]
    );
    assert_eq!(
        statements(&x, "typecheck", "mypy-clean.txt"),
        ["mypy: no issues found in 1 source file"]
    );
}

#[test]
fn ruff_and_flake8_diagnostics_and_counts() {
    let x = extractor("extract-python-lint");
    let ruff = [
        "ruff: 4 errors (2 fixable with --fix)",
        "F401 at src/calc/ops.py:1: `os` imported but unused",
        "F401 at src/calc/ops.py:2: `sys` imported but unused",
        "F841 at src/calc/ops.py:18: Local variable `value` is assigned to but never used",
        "F821 at src/calc/ops.py:18: Undefined name `undefined_name`",
    ];
    // ruff's default (full, with snippets) and concise formats: the same facts.
    assert_eq!(statements(&x, "lint", "ruff-full.txt"), ruff);
    assert_eq!(statements(&x, "lint", "ruff-concise.txt"), ruff);
    // flake8 prints no total: its lines are counted.
    assert_eq!(
        statements(&x, "lint", "flake8-errors.txt"),
        [
            "flake8: 4 errors",
            "F401 at src/calc/ops.py:1: 'os' imported but unused",
            "F401 at src/calc/ops.py:2: 'sys' imported but unused",
            "F841 at src/calc/ops.py:18: local variable 'value' is assigned to but never used",
            "F821 at src/calc/ops.py:18: undefined name 'undefined_name'",
        ]
    );
}

#[test]
fn python_lint_plugin_is_silent_on_other_tools() {
    assert_silent_on_others(
        &extractor("extract-python-lint"),
        &["mypy-", "ruff-", "flake8-"],
    );
}

#[test]
fn go_test_text_verbose_and_json_give_the_same_failures() {
    let x = extractor("extract-go");
    // Subtests count as `go test -json` counts them; each failing test once, with where
    // its first message was logged.
    let failures = [
        "test TestAdd fails at calc_test.go:7: Add(1, 2) = 4, want 3",
        "test TestDiv fails",
        "test TestDiv/rounds_down fails at calc_test.go:19: Div(7, 2) = 3, want 4",
    ];
    let with = |counts: &str| -> Vec<String> {
        std::iter::once(counts)
            .chain(failures.iter().copied())
            .map(|s| s.to_string())
            .collect()
    };
    // Without -v only failures are listed: no pass count then.
    assert_eq!(
        statements(&x, "tests", "go-test-failures.txt"),
        with("go test: 3 failed; 1 of 2 packages failed")
    );
    let verbose = with("go test: 3 failed, 3 passed, 0 skipped; 1 of 2 packages failed");
    assert_eq!(statements(&x, "tests", "go-test-verbose.txt"), verbose);
    assert_eq!(statements(&x, "tests", "go-test-json.txt"), verbose);
}

#[test]
fn go_test_build_failure_names_the_package_and_the_error() {
    let x = extractor("extract-go");
    let s = statements(&x, "tests", "go-test-build-failed.txt");
    assert_eq!(
        s[..3],
        [
            "go test: 3 failed; 2 of 3 packages failed (1 did not build)",
            "go: 1 error",
            "error at broken/broken.go:3: undefined: y",
        ]
    );
}

#[test]
fn go_test_skip_reasons_and_logs_of_passing_tests_are_not_errors() {
    let x = extractor("extract-go");
    let out = "=== RUN   TestAdd\n    calc_test.go:6: checking the sum\n--- PASS: TestAdd (0.00s)\n=== RUN   TestNetwork\n    calc_test.go:13: no network in CI\n--- SKIP: TestNetwork (0.00s)\nPASS\nok  \texample.com/demo/calc\t0.003s\n";
    let facts = x
        .try_extract("tests", out, ActionResult::Success, 1)
        .unwrap();
    let s: Vec<&str> = facts.iter().map(|f| f.statement.as_str()).collect();
    assert_eq!(s, ["go test: 0 failed, 1 passed, 1 skipped; 1 package ok"]);
}

#[test]
fn go_plugin_is_silent_on_other_tools() {
    assert_silent_on_others(&extractor("extract-go"), &["go-"]);
}

#[test]
fn jest_counts_failing_tests_and_locations() {
    let x = extractor("extract-js");
    let expected = [
        "jest: 2 failed, 3 passed, 5 total",
        "jest: suites 1 failed, 1 passed, 2 total",
        "test sum › adds two numbers fails at src/sum.test.js:5: expect(received).toBe(expected) // Object.is equality",
        "test mean of empty is zero fails at src/sum.js:5: empty list",
        "suite src/sum.test.js fails",
    ];
    assert_eq!(statements(&x, "tests", "jest-failures.txt"), expected);
    // --verbose adds ✕ lines for the same tests: no duplicates.
    assert_eq!(statements(&x, "tests", "jest-verbose.txt"), expected);
}

#[test]
fn vitest_counts_failing_tests_and_locations() {
    let x = extractor("extract-js");
    assert_eq!(
        statements(&x, "tests", "vitest-failures.txt"),
        [
            "vitest: 2 failed, 3 passed, 5 total",
            "vitest: test files 1 failed, 1 passed, 2 total",
            "test src/sum.test.ts > sum > adds two numbers fails at src/sum.test.ts:6: AssertionError: expected 4 to be 3 // Object.is equality",
            "test src/sum.test.ts > mean of empty is zero fails at src/sum.ts:5: Error: empty list",
        ]
    );
}

#[test]
fn eslint_problems_with_rule_and_location_errors_first() {
    let x = extractor("extract-js");
    assert_eq!(
        statements(&x, "lint", "eslint-stylish.txt"),
        [
            "eslint: 4 problems (3 errors, 1 warning)",
            "error no-unused-vars at /tmp/jsproj/lint/app.js:1: 'unused' is assigned a value but never used",
            "error no-undef at /tmp/jsproj/lint/app.js:3: 'undefinedThing' is not defined",
            "error no-debugger at /tmp/jsproj/lint/util.js:2: Unexpected 'debugger' statement",
            "warning eqeqeq at /tmp/jsproj/lint/app.js:3: Expected '===' and instead saw '=='",
        ]
    );
}

#[test]
fn tsc_errors_plain_and_pretty() {
    let x = extractor("extract-js");
    let expected = [
        "tsc: 4 errors",
        "error TS2322 at ts/a.ts:2: Type 'number' is not assignable to type 'string'.",
        "error TS2322 at ts/a.ts:3: Type 'string' is not assignable to type 'number'.",
        "error TS2322 at ts/b.ts:2: Type 'string' is not assignable to type 'number'.",
        "error TS2322 at ts/b.ts:2: Type 'string' is not assignable to type 'number'.",
    ];
    assert_eq!(statements(&x, "typecheck", "tsc-errors.txt"), expected);
    // --pretty: colours and code frames, then tsc's own total.
    assert_eq!(statements(&x, "typecheck", "tsc-pretty.txt"), expected);
}

#[test]
fn js_plugin_is_silent_on_other_tools() {
    assert_silent_on_others(
        &extractor("extract-js"),
        &["jest-", "vitest-", "eslint-", "tsc-"],
    );
}

/// The failing test names in `statements` (`test NAME fails` / `test NAME panicked at`).
fn failing_tests(statements: &[String]) -> Vec<String> {
    let mut names: Vec<String> = statements
        .iter()
        .filter_map(|s| s.strip_prefix("test "))
        .filter_map(|s| s.split(' ').next())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn cargo_test_json_counts_failing_tests_and_panic_locations() {
    let x = extractor("extract-cargo");
    // A real `RUSTC_BOOTSTRAP=1 cargo test --no-fail-fast -- -Z unstable-options --format
    // json` (the crate of cargo_test_failures.txt: a lib with 4 tests, one ignored, and an
    // integration test file; 3 failures).
    let facts = facts(&x, "tests", "cargo-test-json.txt");
    let s: Vec<String> = facts.iter().map(|f| f.statement.clone()).collect();
    assert_eq!(
        s,
        [
            "tests: 3 passed, 3 failed, 1 ignored",
            "test tests::mean_of_empty_is_zero panicked at src/lib.rs:10: assertion `left == right` failed",
            "test tests::adds_negative panicked at src/lib.rs:8: assertion `left == right` failed: negative sums",
            "test overflow_is_reported panicked at tests/api.rs:2: index out of bounds: the len is 0 but the index is 3",
        ]
    );
    assert_eq!(facts[0].category, FactCategory::Verification);
    assert!(facts[1..].iter().all(|f| f.category == FactCategory::Error));
    assert!(facts.iter().all(|f| f.confidence == 1.0));

    // The text output of the same suite: the same counts and failing tests.
    let text = statements(&x, "tests", "cargo_test_failures.txt");
    assert_eq!(text[0], s[0]);
    assert_eq!(failing_tests(&text), failing_tests(&s));
    assert_eq!(
        failing_tests(&s),
        [
            "overflow_is_reported",
            "tests::adds_negative",
            "tests::mean_of_empty_is_zero"
        ]
    );
}

#[test]
fn cargo_test_json_without_panic_and_passing_runs() {
    let x = extractor("extract-cargo");
    let run = |out: &str| -> Vec<String> {
        x.try_extract("tests", out, ActionResult::Failure, 1)
            .unwrap()
            .into_iter()
            .map(|f| f.statement)
            .collect()
    };
    // A test returning `Err` prints no panic: it is named without a location; the
    // rustc warning on stderr is still read.
    let out = r#"warning: unused variable: `x`
 --> src/lib.rs:3:9
{ "type": "suite", "event": "started", "test_count": 2 }
{ "type": "test", "name": "io::reads_config", "event": "failed", "stdout": "Error: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }\n" }
{ "type": "test", "name": "io::parses", "event": "ok" }
{ "type": "suite", "event": "failed", "passed": 1, "failed": 1, "ignored": 0, "measured": 0, "filtered_out": 0, "exec_time": 0.001 }
"#;
    assert_eq!(
        run(out),
        [
            "tests: 1 passed, 1 failed",
            "rustc: 0 errors, 1 warning",
            r#"test io::reads_config fails: Error: Os { code: 2, kind: NotFound, message: "No such file or directory" }"#,
            "warning at src/lib.rs:3: unused variable: `x`",
        ]
    );
    // All passing, over two binaries: summed.
    let ok = r#"{ "type": "suite", "event": "ok", "passed": 4, "failed": 0, "ignored": 1, "measured": 0, "filtered_out": 0, "exec_time": 0.01 }
{ "type": "suite", "event": "ok", "passed": 2, "failed": 0, "ignored": 0, "measured": 0, "filtered_out": 0, "exec_time": 0.01 }
"#;
    assert_eq!(run(ok), ["tests: 6 passed, 0 failed, 1 ignored"]);
    // Not JSON events: nothing.
    assert!(run("{ \"name\": \"x\" }\n{ broken").is_empty());
}

#[test]
fn conformance_violations_with_locations_and_count() {
    // There is no conformance tool on this machine: conformance-*.txt are written in the
    // formats seed 000 shows (`Function 'execute' has complexity 15 (max 10)`, `Violations
    // (N)`, `Check PASSED`, `✓`), with the `file:line:` prefix of a lint report.
    let x = extractor_of("extract-conformance");
    for check in ["conformance", "run_check", "run_conformance_check"] {
        assert!(x.handles(check), "{check}");
    }
    assert!(!x.handles("tests") && !x.handles("lint"));
    let facts = facts(&x, "conformance", "conformance-violations.txt");
    let s: Vec<&str> = facts.iter().map(|f| f.statement.as_str()).collect();
    assert_eq!(
        s,
        [
            "Function 'execute' has cyclomatic complexity 15 (threshold 10 exceeded) at src/calc/engine.py:145",
            "Function 'render_table' has cyclomatic complexity 23 (threshold 10 exceeded) at src/calc/report.py:31",
            "Function 'execute' has 66 lines (threshold 50 exceeded) at src/calc/engine.py:120",
            "Total violations: 3",
        ]
    );
    // Seed 000: all verification facts, confidence 1.0.
    assert!(facts
        .iter()
        .all(|f| f.category == FactCategory::Verification && f.confidence == 1.0));
    assert_eq!(
        statements(&x, "conformance", "conformance-passed.txt"),
        ["Conformance check passed", "Total violations: 0"]
    );
    // The seed's bare statements when a line has no location nor maximum.
    let bare = x
        .try_extract(
            "run_check",
            "Function 'execute' has complexity 15\nFunction 'execute' has 80 lines\n",
            ActionResult::Partial,
            3,
        )
        .unwrap();
    let bare: Vec<&str> = bare.iter().map(|f| f.statement.as_str()).collect();
    assert_eq!(
        bare,
        [
            "Function 'execute' has cyclomatic complexity 15 (threshold exceeded)",
            "Function 'execute' has 80 lines (threshold exceeded)",
        ]
    );
}

#[test]
fn conformance_plugin_is_silent_on_other_tools() {
    assert_silent_on_others(&extractor_of("extract-conformance"), &["conformance-"]);
}

#[test]
fn test_plugins_are_silent_on_the_new_outputs() {
    // The other families' extractors draw nothing from the conformance reports and the
    // cargo JSON (the cargo plugin reads every check: its JSON must not be misread).
    for name in [
        "extract-pytest",
        "extract-go",
        "extract-js",
        "extract-python-lint",
    ] {
        let x = extractor(name);
        for file in [
            "cargo-test-json.txt",
            "conformance-violations.txt",
            "conformance-passed.txt",
        ] {
            assert_eq!(
                statements(&x, "tests", file),
                Vec::<String>::new(),
                "{name} {file}"
            );
        }
    }
    let cargo = extractor("extract-cargo");
    for file in ["conformance-violations.txt", "conformance-passed.txt"] {
        assert_eq!(
            statements(&cargo, "tests", file),
            Vec::<String>::new(),
            "{file}"
        );
    }
}

/// The facts `extract-edit` draws from a real file action of the host: `action` with
/// `args` run by `execute_file_action` in a fresh workspace holding `src/lib.rs` (9
/// lines, two functions), its summary, error and content given as the output and its
/// edit record as the details (as the executor passes them).
fn edit_facts(
    x: &WasmExtractor,
    action: &str,
    args: serde_json::Value,
) -> Vec<(FactCategory, String, f32)> {
    use agentforge::tools::{execute_file_action, parse_action, Workspace};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "fn alpha() {\n    let x = 1;\n    x + 1\n}\n\nfn beta() {\n    let x = 1;\n    x * 2\n}\n",
    )
    .unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let parsed = parse_action(action, &args).unwrap();
    let out = execute_file_action(&ws, &parsed, &dir.path().join(".snap"));
    let text = [
        Some(out.summary.as_str()),
        out.error.as_deref(),
        out.content.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    let details = out.edit.as_ref().map(|r| r.to_json());
    assert!(details.is_some(), "{out:?}");
    let facts = x
        .try_extract_details(action, &text, out.result, 4, details.as_deref())
        .unwrap();
    for f in &facts {
        assert_eq!(f.source, action, "{f:?}");
    }
    facts
        .into_iter()
        .map(|f| (f.category, f.statement, f.confidence))
        .collect()
}

#[test]
fn edit_results_of_the_host_tools_give_what_changed_where() {
    use serde_json::json;
    use FactCategory::{CodeStructure, Error, Inference};
    let x = extractor_of("extract-edit");
    for action in ["edit_file", "replace_lines", "write_file"] {
        assert!(x.handles(action), "{action}");
    }
    assert!(!x.handles("tests") && !x.handles("read_file"));
    let one = |category, statement: &str| vec![(category, statement.to_string(), 1.0)];
    let lib = "src/lib.rs";

    // Successful edits: the lines now holding the new text, and the shift below them.
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "    x + 1\n", "new_text": "    let y = x + 1;\n    y\n"})
        ),
        one(
            CodeStructure,
            "edited src/lib.rs (lines 3-4; following lines moved by +1)"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "x * 2", "new_text": "x * 3"})
        ),
        one(CodeStructure, "edited src/lib.rs (line 8)")
    );
    assert_eq!(
        edit_facts(
            &x,
            "replace_lines",
            json!({"path": lib, "start_line": 6, "end_line": 9, "new_content": "fn beta() -> i32 {\n    2\n}\n"})
        ),
        one(
            CodeStructure,
            "edited src/lib.rs (lines 6-8; following lines moved by -1)"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "replace_lines",
            json!({"path": lib, "start_line": 5, "end_line": 9, "new_content": ""})
        ),
        one(
            CodeStructure,
            "edited src/lib.rs (deleted lines 5-9; following lines moved by -5)"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "write_file",
            json!({"path": "src/new.rs", "content": "pub mod a;\npub mod b;\n"})
        ),
        one(CodeStructure, "created src/new.rs (2 lines)")
    );
    assert_eq!(
        edit_facts(
            &x,
            "write_file",
            json!({"path": lib, "content": "fn alpha() {}\nfn beta() {}\n"})
        ),
        one(CodeStructure, "rewrote src/lib.rs (2 lines)")
    );
    assert_eq!(
        edit_facts(
            &x,
            "write_file",
            json!({"path": lib, "content": "fn alpha() {\n    let x = 1;\n    x + 1\n}\n\nfn beta() {\n    let x = 1;\n    x * 2\n}\n"})
        ),
        one(
            CodeStructure,
            "src/lib.rs unchanged: it already had the content written"
        )
    );

    // Failed edits: why, and where the host says the text is.
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "    let x = 1;\n", "new_text": "    let x = 2;\n"})
        ),
        one(
            Error,
            "edit failed: old text occurs 2 times in src/lib.rs (lines 2, 7)"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "fn beta() {\nlet x = 1;\n", "new_text": "fn beta() {\nlet x = 5;\n"})
        ),
        [
            (
                Error,
                "edit failed: old text not found in src/lib.rs".to_string(),
                1.0
            ),
            (
                Inference,
                "the old text matches src/lib.rs:6-7 except for indentation".to_string(),
                1.0
            ),
        ]
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "    x * 3\n", "new_text": "    x * 4\n"})
        ),
        [
            (
                Error,
                "edit failed: old text not found in src/lib.rs".to_string(),
                1.0
            ),
            (
                Inference,
                "the intended text is probably near src/lib.rs:8".to_string(),
                0.7
            ),
        ]
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": lib, "old_text": "   3|     x + 1\n", "new_text": "    x + 2\n"})
        ),
        [
            (
                Error,
                "edit failed: old text not found in src/lib.rs".to_string(),
                1.0
            ),
            (
                Inference,
                "the old text includes read_file's line-number prefixes (`  12| `)".to_string(),
                1.0
            ),
        ]
    );
    assert_eq!(
        edit_facts(
            &x,
            "replace_lines",
            json!({"path": lib, "start_line": 40, "end_line": 42, "new_content": "x"})
        ),
        one(
            Error,
            "edit failed: lines 40-42 are outside src/lib.rs, which has 9 lines"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": "lib.rs", "old_text": "a", "new_text": "b"})
        ),
        one(
            Error,
            "edit failed: lib.rs does not exist (did you mean src/lib.rs?)"
        )
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": "src", "old_text": "a", "new_text": "b"})
        ),
        one(Error, "edit failed: src is a folder")
    );
    assert_eq!(
        edit_facts(&x, "write_file", json!({"path": "src", "content": "b"})),
        one(Error, "write failed: src is a folder")
    );
    assert_eq!(
        edit_facts(
            &x,
            "edit_file",
            json!({"path": "../outside.rs", "old_text": "a", "new_text": "b"})
        ),
        one(
            Error,
            "edit refused: path ../outside.rs: `..` leads outside the workspace root"
        )
    );
}

#[test]
fn edit_plugin_reads_the_revert_from_the_record_and_seed_wordings_from_text() {
    let x = extractor_of("extract-edit");
    let run = |out: &str, details: Option<&str>| -> Vec<String> {
        x.try_extract_details("edit_file", out, ActionResult::Failure, 2, details)
            .unwrap()
            .into_iter()
            .map(|f| f.statement)
            .collect()
    };
    // The executor's auto-revert: the record of the edit, with the checks that regressed
    // (the summary the model sees says "reverted: ..."; it is not read).
    let reverted = r#"{"kind":"edit","action":"edit_file","path":"src/lib.rs","created":false,"unchanged":false,"first_line":3,"lines_removed":1,"lines_added":1,"reverted":{"checks":["tests","clippy"]}}"#;
    assert_eq!(
        run("anything at all", Some(reverted)),
        ["change to src/lib.rs reverted: tests, clippy passed before it and failed after it"]
    );
    // The record, not the text: a host summary without details gives no host facts.
    assert!(run(
        "edited src/lib.rs: replaced 1 line(s) at line 3 with 1 line(s)",
        None
    )
    .is_empty());
    // Seed 000's `_build_edit_rules`, for outputs without details, worded that way.
    assert_eq!(
        run("Modified src/app.py: 3 lines", None),
        ["File modified: src/app.py"]
    );
    assert_eq!(
        run("error: text to replace not found", None),
        ["Edit failed: target text not found in file"]
    );
    assert!(run("nothing to see", None).is_empty());
}
