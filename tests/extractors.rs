//! The built-in extractor plugins against real tool outputs (`tests/data/outputs/`).
//!
//! Each plugin folder is installed alone into a temporary directory and loaded with
//! [`load_dir`], as `agentforge run --plugins` would; the components are built by
//! `plugins/build.sh` once per test process.

#[path = "support/mod.rs"]
mod support;

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

/// Plugin folder `name` installed alone and loaded: its extractor.
fn extractor(name: &str) -> WasmExtractor {
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
    let x = plugin.wasm_extractor().expect("an extractor");
    assert!(x.handles("tests") && x.handles("lint"));
    x
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
        "test tests/test_ops.py::test_add fails",
        "test tests/test_ops.py::test_mean_empty fails",
        "test tests/test_db.py::test_query errors",
        "error at tests/conftest.py:6: RuntimeError: database unavailable",
        "error at tests/test_ops.py:5: AssertionError: assert 4 == 3",
        "error at src/calc/ops.py:10: ZeroDivisionError: division by zero",
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
            "tests/test_broken.py fails to collect",
            "error at /tmp/pyproj/tests/test_broken.py:1: SyntaxError: invalid syntax",
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
        "ruff: 4 errors",
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
    let failures = [
        "package example.com/demo/calc fails",
        "test TestAdd fails",
        "test TestDiv fails",
        "test TestDiv/rounds_down fails",
        "error at calc_test.go:7: Add(1, 2) = 4, want 3",
        "error at calc_test.go:19: Div(7, 2) = 3, want 4",
    ];
    let with = |counts: &[&str]| -> Vec<String> {
        counts
            .iter()
            .chain(failures.iter())
            .map(|s| s.to_string())
            .collect()
    };
    // Without -v only failures are listed: no pass count then.
    assert_eq!(
        statements(&x, "tests", "go-test-failures.txt"),
        with(&["go test: 2 failed", "go test: 1 of 2 packages failed"])
    );
    let verbose = with(&[
        "go test: 2 failed, 2 passed",
        "go test: 1 of 2 packages failed",
    ]);
    assert_eq!(statements(&x, "tests", "go-test-verbose.txt"), verbose);
    assert_eq!(statements(&x, "tests", "go-test-json.txt"), verbose);
}

#[test]
fn go_test_build_failure_names_the_package_and_the_error() {
    let x = extractor("extract-go");
    let s = statements(&x, "tests", "go-test-build-failed.txt");
    assert_eq!(s[1], "go test: 2 of 3 packages failed");
    assert_eq!(s[2], "package example.com/demo/broken fails to build");
    assert_eq!(
        s.last().unwrap(),
        "error at broken/broken.go:3: undefined: y"
    );
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
        "test sum › adds two numbers fails",
        "test mean of empty is zero fails",
        "suite src/sum.test.js fails",
        "error at src/sum.test.js:5: expect(received).toBe(expected) // Object.is equality",
        "error at src/sum.js:5: empty list",
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
            "test src/sum.test.ts > sum > adds two numbers fails",
            "test src/sum.test.ts > mean of empty is zero fails",
            "error at src/sum.test.ts:6: AssertionError: expected 4 to be 3 // Object.is equality",
            "error at src/sum.ts:5: Error: empty list",
        ]
    );
}

#[test]
fn eslint_problems_with_rule_and_location() {
    let x = extractor("extract-js");
    assert_eq!(
        statements(&x, "lint", "eslint-stylish.txt"),
        [
            "eslint: 4 problems (3 errors, 1 warning)",
            "error no-unused-vars at /tmp/jsproj/lint/app.js:1: 'unused' is assigned a value but never used",
            "warning eqeqeq at /tmp/jsproj/lint/app.js:3: Expected '===' and instead saw '=='",
            "error no-undef at /tmp/jsproj/lint/app.js:3: 'undefinedThing' is not defined",
            "error no-debugger at /tmp/jsproj/lint/util.js:2: Unexpected 'debugger' statement",
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
