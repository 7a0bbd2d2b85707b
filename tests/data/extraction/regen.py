#!/usr/bin/env python3
"""Rebuilds the extraction corpus: small throwaway projects, real tool runs, truth from
each tool's machine-readable mode.

For every case it writes `<tool>/<case>.txt` (the output a user sees: stdout and stderr
of the plain command, no terminal) and `<case>.truth.json` (totals, failing test ids or
diagnostic codes, file:line locations), with the project's absolute path replaced by
`ROOT_NAME` in both. Run through `regen.sh` (it checks the tools are installed); `--only
TOOL` regenerates one tool's cases.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = Path(os.environ.get("AF_EXTRACTION_WORK", "/tmp/af-extraction"))
JSDEPS = Path(os.environ.get("AF_JSDEPS", WORK / "jsdeps"))
# What the projects' absolute paths become in outputs and truth.
ROOT_NAME = "/home/dev/proj"
# Diagnostics are listed errors first (the order the extractors must keep under a cap).
SEVERITY = {"error": 0, "warning": 1}


def sh(cmd, cwd, env=None, merge=True):
    """Runs `cmd` (a shell line) in `cwd`; returns stdout and stderr as one text (only
    stdout when not `merge`: a machine-readable mode's own stream)."""
    full = dict(os.environ, NO_COLOR="1", FORCE_COLOR="0", CI="1", TERM="dumb")
    # The projects' JS tools (a symlinked node_modules), as `npx` would find them.
    full["PATH"] = f"{cwd}/node_modules/.bin:{full['PATH']}"
    full.pop("CARGO_TARGET_DIR", None)
    full.update(env or {})
    p = subprocess.run(
        cmd, cwd=cwd, shell=True, env=full, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.DEVNULL, text=True, timeout=600,
    )
    return p.stdout


def write_tree(root, files):
    if root.exists():
        shutil.rmtree(root)
    for name, body in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(body).lstrip("\n"))


def rel(path, root):
    """`path` relative to the project root when inside it."""
    path = path.replace("file://", "")
    r = str(root) + "/"
    return path[len(r):] if path.startswith(r) else path


def by_severity(diags):
    """[(severity, location)] -> locations, errors first, output order otherwise."""
    return [loc for _, loc in sorted(diags, key=lambda d: SEVERITY.get(d[0], 2))]


def uniq(items):
    out = []
    for i in items:
        if i and i not in out:
            out.append(i)
    return out


# ---------------------------------------------------------------- python ---

def py_cases():
    calc = """
        def add(a, b):
            return a + b

        def mean(xs):
            return sum(xs) / len(xs)
        """
    return {
        "pytest": [
            ("all_pass", {"src/calc.py": calc, "tests/test_calc.py": """
                import sys
                sys.path.insert(0, "src")
                from calc import add, mean

                def test_add():
                    assert add(1, 2) == 3

                def test_mean():
                    assert mean([1, 2, 3]) == 2

                class TestMore:
                    def test_neg(self):
                        assert add(-1, -1) == -2
                """}, "python -m pytest"),
            ("failures", {"src/calc.py": calc, "tests/conftest.py": """
                import pytest

                @pytest.fixture
                def db():
                    raise RuntimeError("database unavailable")
                """, "tests/test_calc.py": """
                import sys
                sys.path.insert(0, "src")
                import pytest
                from calc import add, mean

                def test_add():
                    assert add(1, 2) == 4

                def test_mean_empty():
                    assert mean([]) == 0

                def test_ok():
                    assert add(2, 2) == 4

                def test_query(db):
                    assert db

                @pytest.mark.skip(reason="not ready")
                def test_later():
                    pass

                class TestOps:
                    def test_sub(self):
                        assert add(5, -2) == 2
                """}, "python -m pytest"),
            ("many_fail", {"src/calc.py": calc, "tests/test_many.py": """
                import sys
                sys.path.insert(0, "src")
                import pytest
                from calc import add

                @pytest.mark.parametrize("n", range(17))
                def test_add_n(n):
                    assert add(n, 1) == n

                def test_ok():
                    assert add(1, 1) == 2
                """}, "python -m pytest"),
            ("quiet_short", {"src/calc.py": calc, "tests/test_q.py": """
                import sys
                sys.path.insert(0, "src")
                import pytest
                from calc import add, mean

                def test_add():
                    assert add(1, 2) == 4

                def test_mean_empty():
                    assert mean([]) == 0

                @pytest.mark.skip(reason="slow")
                def test_slow():
                    pass

                def test_fine():
                    assert True
                """}, "python -m pytest -q --tb=short"),
            ("collection_error", {"tests/test_ok.py": """
                def test_one():
                    assert 1 + 1 == 2
                """, "tests/test_broken.py": """
                def test_x(:
                    pass
                """}, "python -m pytest"),
            ("skips_only", {"tests/test_s.py": """
                import sys
                import pytest

                @pytest.mark.skipif(sys.platform == "linux", reason="not on linux")
                def test_win():
                    pass

                @pytest.mark.skip(reason="flaky upstream")
                def test_net():
                    pass

                def test_ok():
                    assert True
                """}, "python -m pytest -rs"),
        ],
        "unittest": [
            ("all_pass", {"test_calc.py": """
                import unittest

                class TestCalc(unittest.TestCase):
                    def test_add(self):
                        self.assertEqual(1 + 2, 3)

                    def test_sub(self):
                        self.assertEqual(3 - 2, 1)

                    @unittest.skip("not ready")
                    def test_mul(self):
                        pass
                """}, "python -m unittest"),
            ("failures", {"calc.py": calc, "test_calc.py": """
                import unittest
                from calc import add, mean

                class TestCalc(unittest.TestCase):
                    def test_add(self):
                        self.assertEqual(add(1, 2), 4)

                    def test_mean_empty(self):
                        self.assertEqual(mean([]), 0)

                    def test_ok(self):
                        self.assertEqual(add(2, 2), 4)

                    @unittest.skip("later")
                    def test_later(self):
                        pass

                class TestMore(unittest.TestCase):
                    def test_true(self):
                        self.assertTrue(add(0, 0))
                """}, "python -m unittest -v"),
            ("many_fail", {"test_many.py": "import unittest\n\n\nclass TestMany(unittest.TestCase):\n" + "".join(
                f"    def test_case_{i:02}(self):\n        self.assertEqual({i} + 1, {i})\n\n" for i in range(14)
            ) + "    def test_fine(self):\n        self.assertEqual(1, 1)\n"}, "python -m unittest"),
            ("import_error", {"test_ok.py": """
                import unittest

                class TestOk(unittest.TestCase):
                    def test_ok(self):
                        self.assertTrue(True)
                """, "test_broken.py": """
                import unittest
                import does_not_exist

                class TestBroken(unittest.TestCase):
                    def test_x(self):
                        pass
                """}, "python -m unittest"),
        ],
        "ruff": [
            ("clean", {"src/app.py": """
                def add(a: int, b: int) -> int:
                    return a + b
                """}, "ruff check src"),
            ("few", {"src/app.py": """
                import os
                import sys


                def f():
                    value = 1
                    return undefined_name
                """}, "ruff check src"),
            ("concise", {"src/app.py": """
                import os
                import json


                def f(x):
                    if x == None:
                        return 1
                    l = 2
                    return l
                """}, "ruff check --output-format concise src"),
            ("many", {"pyproject.toml": """
                [tool.ruff.lint]
                select = ["E", "F", "W"]
                """, "src/a.py": "import os\nimport sys\nimport json\nimport re\n\n\ndef f(x):\n    if x == None:\n        pass\n    if x != None:\n        pass\n    y = 1\n    z = 2\n    return undefined_a\n",
                "src/b.py": "import collections\nimport typing\n\n\ndef g():\n    l = 1\n    return undefined_b + l\n"}, "ruff check src"),
        ],
        "flake8": [
            ("few", {"app.py": """
                import os
                import sys


                def f():
                    value = 1
                    return undefined_name
                """}, "flake8 app.py"),
            ("many", {"a.py": "import os\nimport sys\nimport json\n\ndef f(x):\n    if x == None:\n        pass\n    y=1\n    return undefined_a\n",
                      "b.py": "import re\n\n\ndef g():\n    l = 1;\n    return  l\n\n\n\ndef h():\n    return undefined_b\n"}, "flake8 a.py b.py"),
            ("count_statistics", {"c.py": "import os\nimport sys\n\n\ndef f( x ):\n    return x==1\n"}, "flake8 --count --statistics c.py"),
        ],
        "mypy": [
            ("clean", {"src/ok.py": """
                def add(a: int, b: int) -> int:
                    return a + b
                """}, "mypy src"),
            ("errors", {"src/ops.py": """
                def add(a: int, b: int) -> int:
                    return a + b


                def name() -> int:
                    return "x"
                """, "src/report.py": """
                from ops import add


                def report() -> str:
                    return add([1], 2)
                """}, "mypy src"),
            ("many", {"src/m.py": "".join(
                f"def f{i}() -> int:\n    return 'v{i}'\n\n\n" for i in range(12)
            ) + "x: int = undefined_thing\n"}, "mypy src"),
            ("notes", {"src/n.py": """
                from typing import Optional


                def f(x: Optional[int]) -> int:
                    reveal_type(x)
                    return x + 1


                def g(y):
                    return y.missing
                """}, "mypy --check-untyped-defs src"),
        ],
    }


def truth_pytest(root, case, cmd):
    sh(cmd + " --junitxml=.report.xml -o junit_family=xunit1 -p no:cacheprovider", root)
    suite = ET.parse(root / ".report.xml").getroot()
    if suite.tag == "testsuites":
        suite = suite[0]
    n = int(suite.get("tests"))
    failures, errors, skipped = (int(suite.get(k)) for k in ("failures", "errors", "skipped"))
    failing, locations = [], []
    for tc in suite.iter("testcase"):
        bad = [c for c in tc if c.tag in ("failure", "error")]
        if not bad:
            continue
        file = tc.get("file") or ""
        cls = tc.get("classname", "")
        name = tc.get("name")
        if not file or name == file[:-3].replace("/", "."):
            # A collection error: the module itself.
            failing.append(file or cls.replace(".", "/") + ".py")
        else:
            parts = cls.split(".")
            mod = file[:-3].replace("/", ".")
            inner = parts[len(mod.split(".")):]
            failing.append("::".join([file] + inner + [name]))
        text = (bad[0].text or "") + "\n" + (bad[0].get("message") or "")
        hits = re.findall(r"(?m)^(\S+\.py):(\d+): ", text)
        hits = [h for h in hits if "site-packages" not in h[0] and "/lib/python" not in h[0]]
        if not hits:
            hits = re.findall(r'File "([^"]+\.py)", line (\d+)', text)
        if hits:
            locations.append(f"{rel(hits[-1][0], root)}:{hits[-1][1]}")
    totals = {"passed": n - failures - errors - skipped, "failed": failures,
              "skipped": skipped, "error": errors}
    return totals, uniq(failing), locations


UNITTEST_TRUTH = r'''
import json, sys, traceback, unittest
root = sys.argv[1]
suite = unittest.defaultTestLoader.discover(".")
class R(unittest.TestResult):
    pass
r = R()
suite.run(r)
def loc(err):
    frames = [f for f in traceback.extract_tb(err[2]) if f.filename.startswith(root)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
bad = [(t.id(), e) for t, e in r.failures] + [(t.id(), e) for t, e in r.errors]
print(json.dumps({"run": r.testsRun, "failures": len(r.failures), "errors": len(r.errors),
    "skipped": len(r.skipped), "failing": [t for t, _ in bad], "tb": [e for _, e in bad]}))
'''


def truth_unittest(root, case, cmd):
    (root / ".truth.py").write_text(UNITTEST_TRUTH)
    data = json.loads(sh(f"python .truth.py {root}", root, merge=False).strip().splitlines()[-1])
    locations = []
    for tb in data["tb"]:
        hits = [h for h in re.findall(r'File "([^"]+)", line (\d+)', tb) if h[0].startswith(str(root))]
        if hits:
            locations.append(f"{rel(hits[-1][0], root)}:{hits[-1][1]}")
    failing = []
    for t in data["failing"]:
        # A module that fails to import: unittest names it `unittest.loader._FailedTest.<module>`.
        failing.append(t.split(".")[-1] if t.startswith("unittest.loader._FailedTest.") else t)
    totals = {"passed": data["run"] - data["failures"] - data["errors"] - data["skipped"],
              "failed": data["failures"], "error": data["errors"], "skipped": data["skipped"]}
    return totals, failing, locations


def truth_ruff(root, case, cmd):
    args = cmd.replace("--output-format concise", "")
    items = json.loads(sh(args + " --output-format json", root, merge=False))
    locs = [("error", f"{rel(i['filename'], root)}:{i['location']['row']}") for i in items]
    return {"error": len(items)}, uniq(i["code"] for i in items), by_severity(locs)


def truth_flake8(root, case, cmd):
    out = sh(cmd + " --format='%(path)s\t%(row)d\t%(code)s'", root)
    rows = [line.split("\t") for line in out.splitlines() if line.count("\t") == 2]
    locs = [("error", f"{p}:{r}") for p, r, _ in rows]
    return {"error": len(rows)}, uniq(c for _, _, c in rows), by_severity(locs)


def truth_mypy(root, case, cmd):
    out = sh(cmd + " -O json --no-incremental", root, merge=False)
    items = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    errs = [i for i in items if i["severity"] == "error"]
    diags = [(i["severity"], f"{i['file']}:{i['line']}") for i in items if i["severity"] in SEVERITY]
    return {"error": len(errs)}, uniq(i.get("code") for i in errs), by_severity(diags)


# ------------------------------------------------------------------ rust ---

CARGO_TOML = """
    [package]
    name = "demo"
    version = "0.1.0"
    edition = "2021"
    """


def rust_cases():
    return {
        "cargo-test": [
            ("all_pass", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }

                #[cfg(test)]
                mod tests {
                    use super::*;
                    #[test]
                    fn adds() { assert_eq!(add(1, 2), 3); }
                    #[test]
                    #[ignore]
                    fn slow() {}
                    #[test]
                    fn negative() { assert_eq!(add(-1, -1), -2); }
                }
                """, "tests/api.rs": """
                #[test]
                fn api_adds() { assert_eq!(demo::add(2, 2), 4); }
                """}, "cargo test"),
            ("failures", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }
                pub fn mean(xs: &[i32]) -> i32 { xs.iter().sum::<i32>() / xs.len() as i32 }

                #[cfg(test)]
                mod tests {
                    use super::*;
                    #[test]
                    fn adds() { assert_eq!(add(1, 2), 4); }
                    #[test]
                    fn mean_of_empty() { assert_eq!(mean(&[]), 0); }
                    #[test]
                    fn ok() { assert_eq!(add(1, 1), 2); }
                    #[test]
                    #[ignore]
                    fn later() {}
                    #[test]
                    fn returns_err() -> Result<(), String> { Err("config missing".into()) }
                }
                """, "tests/api.rs": """
                #[test]
                fn index() { let v: Vec<i32> = Vec::new(); assert_eq!(v[3], 1); }
                #[test]
                fn api_ok() {}
                """}, "cargo test --no-fail-fast"),
            ("many_fail", {"Cargo.toml": CARGO_TOML, "src/lib.rs": "#[cfg(test)]\nmod tests {\n" + "".join(
                f"    #[test]\n    fn case_{i:02}() {{ assert_eq!({i} + 1, {i}); }}\n" for i in range(15)
            ) + "    #[test]\n    fn fine() {}\n}\n"}, "cargo test"),
            # `--quiet`: dots instead of one line per test.
            ("quiet", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn count(s: &str) -> usize { s.split(' ').count() }

                #[cfg(test)]
                mod tests {
                    use super::*;
                    #[test]
                    fn spaces() { assert_eq!(count("a b"), 2); }
                    #[test]
                    fn tabs() { assert_eq!(count("a\tb c"), 3); }
                    #[test]
                    fn empty() { assert_eq!(count(""), 0); }
                }
                """}, "cargo test --quiet"),
            ("compile_error", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }

                #[cfg(test)]
                mod tests {
                    use super::*;
                    #[test]
                    fn adds() { let s: String = add(1, 2); assert!(s.is_empty()); }
                }
                """}, "cargo test"),
        ],
        "cargo-build": [
            ("warnings", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn f() -> i32 {
                    let unused = 1;
                    let mut m = 2;
                    m
                }
                fn dead() {}
                """}, "cargo build"),
            # The library builds with warnings, then the binary fails: errors after a run
            # of warnings.
            ("warnings_then_errors", {"Cargo.toml": CARGO_TOML, "src/lib.rs": "".join(
                f"fn dead_{i}() {{}}\n" for i in range(12)
            ), "src/main.rs": """
                fn main() {
                    let s: String = 5;
                    missing_fn();
                    println!("{}", s);
                }
                """}, "cargo build"),
            ("many_errors", {"Cargo.toml": CARGO_TOML, "src/lib.rs": "".join(
                f"pub fn f{i}() -> i32 {{ \"{i}\" }}\n" for i in range(13)
            )}, "cargo build"),
        ],
        "clippy": [
            ("warnings", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn f(x: i32) -> i32 {
                    return x + 1;
                }
                pub fn g(v: &Vec<i32>) -> usize { v.len() }
                """}, "cargo clippy"),
            ("deny", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn f(x: i32) -> i32 {
                    return x + 1;
                }
                pub fn g(v: &Vec<i32>) -> bool { v.len() == 0 }
                """}, "cargo clippy -- -D warnings"),
            ("many", {"Cargo.toml": CARGO_TOML, "src/lib.rs": "".join(
                f"pub fn f{i}(x: i32) -> i32 {{\n    return x + {i};\n}}\n" for i in range(12)
            ) + "pub fn g(v: &Vec<i32>) -> bool { v.len() == 0 }\n"}, "cargo clippy"),
        ],
        "rustc": [
            ("error", {"main.rs": """
                fn main() {
                    let x: i32 = "one";
                    println!("{}", x);
                }
                """}, "rustc --edition 2021 main.rs -o /dev/null"),
            ("warnings", {"main.rs": """
                fn helper() {}
                fn main() {
                    let y = 3;
                }
                """}, "rustc --edition 2021 main.rs -o main.bin"),
            ("mixed", {"main.rs": "".join(f"fn unused_{i}() {{}}\n" for i in range(8)) + """
                fn main() {
                    let a: u8 = 300u32;
                    undefined_call();
                    let v = vec![1];
                    v.push(2);
                }
                """}, "rustc --edition 2021 main.rs -o /dev/null"),
        ],
        "nextest": [
            ("all_pass", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                #[cfg(test)]
                mod tests {
                    #[test]
                    fn a() {}
                    #[test]
                    fn b() {}
                    #[test]
                    #[ignore]
                    fn slow() {}
                }
                """}, "cargo nextest run"),
            ("failures", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                pub fn add(a: i32, b: i32) -> i32 { a + b }
                #[cfg(test)]
                mod tests {
                    use super::*;
                    #[test]
                    fn adds() { assert_eq!(add(1, 2), 4); }
                    #[test]
                    fn ok() {}
                    #[test]
                    fn divides() { let z = add(0, 0); assert_eq!(10 / z, 1); }
                }
                """}, "cargo nextest run --no-fail-fast"),
            ("many_fail", {"Cargo.toml": CARGO_TOML, "src/lib.rs": "#[cfg(test)]\nmod tests {\n" + "".join(
                f"    #[test]\n    fn case_{i:02}() {{ assert_eq!({i} + 1, {i}); }}\n" for i in range(13)
            ) + "    #[test]\n    fn fine() {}\n}\n"}, "cargo nextest run --no-fail-fast"),
            ("skipped", {"Cargo.toml": CARGO_TOML, "src/lib.rs": """
                #[cfg(test)]
                mod tests {
                    #[test]
                    fn a() {}
                    #[test]
                    #[ignore]
                    fn i1() {}
                    #[test]
                    #[ignore]
                    fn i2() {}
                    #[test]
                    fn bad() { panic!("boom"); }
                }
                """}, "cargo nextest run --no-fail-fast"),
        ],
    }


def cargo_env(root):
    return {"CARGO_TARGET_DIR": str(root / "target"), "CARGO_TERM_COLOR": "never",
            "RUSTFLAGS": "", "CARGO_INCREMENTAL": "0"}


def rust_diags(lines, root):
    """compiler-message JSON lines -> (errors, warnings, codes, [(severity, location)])."""
    errors = warnings = 0
    codes, diags = [], []
    for line in lines:
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") == "compiler-message":
            m = m["message"]
        elif "reason" in m:
            continue
        level = m.get("level")
        spans = [s for s in m.get("spans", []) if s.get("is_primary")]
        if level not in SEVERITY or not spans:
            continue  # `aborting due to`, `N warnings emitted`
        if level == "error":
            errors += 1
        else:
            warnings += 1
        if m.get("code"):
            codes.append(m["code"]["code"])
        diags.append((level, f"{spans[0]['file_name']}:{spans[0]['line_start']}"))
    return errors, warnings, uniq(codes), diags


def truth_cargo_build(root, case, cmd):
    sh("cargo clean -q", root, cargo_env(root))
    out = sh(cmd + " --message-format=json", root, cargo_env(root))
    e, w, codes, diags = rust_diags(out.splitlines(), root)
    totals = {"error": e, "warning": w}
    return totals, codes, by_severity(diags)


def truth_clippy(root, case, cmd):
    sh("cargo clean -q", root, cargo_env(root))
    base, _, extra = cmd.partition(" -- ")
    out = sh(base + " --message-format=json" + (" -- " + extra if extra else ""), root, cargo_env(root))
    e, w, codes, diags = rust_diags(out.splitlines(), root)
    return {"error": e, "warning": w}, codes, by_severity(diags)


def truth_rustc(root, case, cmd):
    out = sh(cmd + " --error-format=json", root)
    e, w, codes, diags = rust_diags(out.splitlines(), root)
    return {"error": e, "warning": w}, codes, by_severity(diags)


def truth_cargo_test(root, case, cmd):
    env = dict(cargo_env(root), RUSTC_BOOTSTRAP="1")
    out = sh(cmd.replace("cargo test", "cargo test --message-format=json")
             + " -- -Z unstable-options --format json", root, env)
    lines = out.splitlines()
    e, w, codes, diags = rust_diags(lines, root)
    passed = failed = ignored = 0
    failing, locations = [], []
    for line in lines:
        if not line.startswith("{"):
            continue
        ev = json.loads(line)
        if ev.get("type") == "suite" and ev.get("event") in ("ok", "failed"):
            passed += ev["passed"]
            failed += ev["failed"]
            ignored += ev["ignored"]
        if ev.get("type") == "test" and ev.get("event") == "failed":
            failing.append(ev["name"])
            m = re.search(r"panicked at ([^:\s]+):(\d+):", ev.get("stdout", ""))
            if m:
                locations.append(f"{m[1]}:{m[2]}")
    if e:
        return {"error": e, "warning": w}, codes, by_severity(diags)
    return {"passed": passed, "failed": failed, "ignored": ignored}, failing, locations


NEXTEST_CONFIG = """
    [profile.default.junit]
    path = "junit.xml"
    store-success-output = false
    """


def truth_nextest(root, case, cmd):
    (root / ".config").mkdir(exist_ok=True)
    (root / ".config/nextest.toml").write_text(textwrap.dedent(NEXTEST_CONFIG))
    sh(cmd, root, cargo_env(root))
    suites = ET.parse(root / "target/nextest/default/junit.xml").getroot()
    passed = failed = 0
    failing, locations = [], []
    for tc in suites.iter("testcase"):
        bad = [c for c in tc if c.tag in ("failure", "error")]
        if bad:
            failed += 1
            failing.append(tc.get("name"))
            text = "".join((c.text or "") for c in tc if c.tag in ("system-out", "system-err"))
            text += bad[0].text or ""
            m = re.search(r"panicked at ([^:\s]+):(\d+):", text)
            if m:
                locations.append(f"{m[1]}:{m[2]}")
        elif not [c for c in tc if c.tag == "skipped"]:
            passed += 1
    # Ignored tests are not in the JUnit report: their count comes from the listing.
    listed = json.loads(sh("cargo nextest list --message-format json --run-ignored only 2>/dev/null", root, cargo_env(root)).splitlines()[-1])
    skipped = sum(1 for s in listed["rust-suites"].values() for t in s["testcases"].values()
                  if t["filter-match"]["status"] == "matches")
    return {"passed": passed, "failed": failed, "skipped": skipped}, failing, locations


# -------------------------------------------------------------------- go ---

GO_MOD = "module example.com/demo\n\ngo 1.19\n"


def go_cases():
    calc = """
        package calc

        func Add(a, b int) int { return a + b }

        func Div(a, b int) int { return a / b }
        """
    return {
        "go-test": [
            ("all_pass", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": """
                package calc

                import "testing"

                func TestAdd(t *testing.T) {
                    if Add(1, 2) != 3 {
                        t.Fatal("bad")
                    }
                }

                func TestDiv(t *testing.T) {
                    t.Run("exact", func(t *testing.T) {
                        if Div(6, 2) != 3 {
                            t.Error("bad")
                        }
                    })
                    t.Run("floor", func(t *testing.T) {
                        if Div(7, 2) != 3 {
                            t.Error("bad")
                        }
                    })
                }
                """}, "go test -v ./..."),
            ("failures", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": """
                package calc

                import "testing"

                func TestAdd(t *testing.T) {
                    if got := Add(1, 2); got != 4 {
                        t.Errorf("Add(1, 2) = %d, want 4", got)
                    }
                }

                func TestDiv(t *testing.T) {
                    t.Run("exact", func(t *testing.T) {})
                    t.Run("rounds_up", func(t *testing.T) {
                        if got := Div(7, 2); got != 4 {
                            t.Errorf("Div(7, 2) = %d, want 4", got)
                        }
                    })
                }

                func TestOk(t *testing.T) {}
                """, "util/util.go": "package util\n\nfunc Id(x int) int { return x }\n",
                "util/util_test.go": "package util\n\nimport \"testing\"\n\nfunc TestId(t *testing.T) {\n\tif Id(1) != 1 {\n\t\tt.Fatal(\"x\")\n\t}\n}\n"},
             "go test ./..."),
            ("subtests_verbose", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": """
                package calc

                import "testing"

                func TestTable(t *testing.T) {
                    cases := []struct{ name string; a, b, want int }{
                        {"one", 1, 1, 2}, {"two", 2, 2, 5}, {"three", 3, 3, 6}, {"four", 4, 4, 9},
                    }
                    for _, c := range cases {
                        c := c
                        t.Run(c.name, func(t *testing.T) {
                            if got := Add(c.a, c.b); got != c.want {
                                t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
                            }
                        })
                    }
                }

                func TestSkipped(t *testing.T) {
                    t.Skip("needs a database")
                }

                func TestPlain(t *testing.T) {}
                """}, "go test -v ./..."),
            ("json", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": """
                package calc

                import "testing"

                func TestAdd(t *testing.T) {
                    if got := Add(2, 2); got != 5 {
                        t.Fatalf("Add(2, 2) = %d, want 5", got)
                    }
                }

                func TestDiv(t *testing.T) {
                    t.Run("a", func(t *testing.T) {})
                    t.Run("b", func(t *testing.T) { t.Skip("later") })
                }
                """}, "go test -json ./..."),
            ("skip_reason_passing", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": """
                package calc

                import "testing"

                func TestAdd(t *testing.T) {
                    t.Log("checking the sum")
                    if Add(1, 2) != 3 {
                        t.Fatal("bad")
                    }
                }

                func TestNetwork(t *testing.T) {
                    t.Skip("no network in CI")
                }
                """}, "go test -v ./..."),
            ("build_failed", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\n",
                "broken/broken.go": "package broken\n\nfunc F() int { return y }\n\nfunc G() string { return 1 }\n",
                "broken/broken_test.go": "package broken\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {}\n"}, "go test ./..."),
            ("many_fail", {"go.mod": GO_MOD, "calc/calc.go": calc, "calc/calc_test.go": "package calc\n\nimport \"testing\"\n\n" + "".join(
                f"func TestCase{i:02}(t *testing.T) {{\n\tif Add({i}, 1) != {i} {{\n\t\tt.Errorf(\"case {i} wrong\")\n\t}}\n}}\n\n" for i in range(14)
            ) + "func TestFine(t *testing.T) {}\n"}, "go test ./..."),
        ],
        "go-build": [
            ("errors", {"go.mod": GO_MOD, "main.go": """
                package main

                import "fmt"

                func main() {
                    var s string = 5
                    fmt.Println(s, undefinedThing)
                }
                """}, "go build ./..."),
            ("two_packages", {"go.mod": GO_MOD, "a/a.go": "package a\n\nfunc A() int { return \"x\" }\n",
                              "b/b.go": "package b\n\nimport \"os\"\n\nfunc B() { x := 1 }\n"}, "go build ./..."),
        ],
        "go-vet": [
            ("printf", {"go.mod": GO_MOD, "main.go": """
                package main

                import "fmt"

                func main() {
                    name := "x"
                    fmt.Printf("%d\\n", name)
                    fmt.Printf("%s %s\\n", name)
                }
                """}, "go vet ./..."),
            ("shadow_two_packages", {"go.mod": GO_MOD, "a/a.go": "package a\n\nimport \"fmt\"\n\nfunc A() { fmt.Println(\"%d\", 1) }\n",
                                     "b/b.go": "package b\n\nimport \"sync\"\n\nfunc B(m sync.Mutex) sync.Mutex { return m }\n"}, "go vet ./..."),
        ],
    }


GO_ENV = {"GOFLAGS": "-count=1", "GOTOOLCHAIN": "local", "GOPROXY": "off"}


def truth_go_test(root, case, cmd):
    out = sh(cmd.replace(" -v", "").replace(" -json", "") .replace("go test", "go test -json"), root, GO_ENV)
    counts = {"pass": 0, "fail": 0, "skip": 0}
    failing, locations, outputs = [], [], {}
    build_errors = []
    for line in out.splitlines():
        if not line.startswith("{"):
            m = re.match(r"^(\S+\.go):(\d+):\d+: ", line)
            if m:
                build_errors.append(f"{m[1].removeprefix('./')}:{m[2]}")
            continue
        ev = json.loads(line)
        test = ev.get("Test")
        if ev["Action"] == "output" and test:
            outputs.setdefault(test, []).append(ev["Output"])
        if test and ev["Action"] in counts:
            counts[ev["Action"]] += 1
            if ev["Action"] == "fail":
                failing.append(test)
                for o in outputs.get(test, []):
                    m = re.match(r"^\s+(\w+\.go):(\d+): ", o)
                    if m:
                        locations.append(f"{m[1]}:{m[2]}")
    if build_errors:
        return {"error": len(build_errors)}, [], build_errors
    totals = {"passed": counts["pass"], "failed": counts["fail"], "skipped": counts["skip"]}
    if " -v" not in cmd and " -json" not in cmd:
        # Without -v go test prints no passing or skipped test, only failures and
        # packages: the truth keeps what the output can tell.
        totals = {"failed": counts["fail"]}
    return totals, failing, locations


def truth_go_build(root, case, cmd):
    # The compiler's lines are its machine-readable form (one diagnostic per line);
    # `-gcflags=-e` lists them all rather than stopping at ten.
    out = sh(cmd.replace("go build", "go build -gcflags=-e"), root, GO_ENV)
    locs = [f"{m[1].removeprefix('./')}:{m[2]}" for m in re.finditer(r"(?m)^(\S+\.go):(\d+):\d+: ", out)]
    return {"error": len(locs)}, [], locs


def truth_go_vet(root, case, cmd):
    out = sh(cmd.replace("go vet", "go vet -json"), root, GO_ENV)
    locs = []
    for m in re.finditer(r'"posn": "([^"]+):(\d+):\d+"', out):
        locs.append(f"{rel(m[1], root)}:{m[2]}")
    return {"error": len(locs)} if locs else {}, [], locs


# -------------------------------------------------------------------- js ---

def js_cases():
    sum_js = """
        function sum(a, b) { return a + b; }
        function mean(xs) { if (xs.length === 0) throw new Error("empty list"); return xs.reduce(sum, 0) / xs.length; }
        module.exports = { sum, mean };
        """
    sum_ts = """
        export function sum(a: number, b: number): number { return a + b; }
        export function mean(xs: number[]): number { if (xs.length === 0) throw new Error("empty list"); return xs.reduce(sum, 0) / xs.length; }
        """
    return {
        "jest": [
            ("all_pass", {"package.json": "{}", "src/sum.js": sum_js, "src/sum.test.js": """
                const { sum } = require("./sum");
                describe("sum", () => {
                  test("adds", () => { expect(sum(1, 2)).toBe(3); });
                  test("negatives", () => { expect(sum(-1, -1)).toBe(-2); });
                });
                """}, "jest"),
            ("failures", {"package.json": "{}", "src/sum.js": sum_js, "src/sum.test.js": """
                const { sum, mean } = require("./sum");
                describe("sum", () => {
                  test("adds two numbers", () => { expect(sum(1, 2)).toBe(4); });
                  test("negatives", () => { expect(sum(-1, -1)).toBe(-2); });
                });
                test("mean of empty is zero", () => { expect(mean([])).toBe(0); });
                test.skip("later", () => {});
                test.todo("write more");
                """, "src/ok.test.js": """
                test("fine", () => { expect(1).toBe(1); });
                """}, "jest"),
            ("verbose", {"package.json": "{}", "src/sum.js": sum_js, "src/sum.test.js": """
                const { sum } = require("./sum");
                test("adds", () => { expect(sum(1, 2)).toBe(3); });
                test("breaks", () => { expect(sum(1, 2)).toEqual(5); });
                """}, "jest --verbose"),
            ("many_fail", {"package.json": "{}", "src/sum.js": sum_js, "src/many.test.js": "const { sum } = require(\"./sum\");\n" + "".join(
                f"test(\"case {i:02}\", () => {{ expect(sum({i}, 1)).toBe({i}); }});\n" for i in range(13)
            ) + "test(\"fine\", () => { expect(1).toBe(1); });\n"}, "jest"),
        ],
        "vitest": [
            ("all_pass", {"package.json": "{\"type\": \"module\"}", "src/sum.ts": sum_ts, "src/sum.test.ts": """
                import { describe, test, expect } from "vitest";
                import { sum } from "./sum";
                describe("sum", () => {
                  test("adds", () => { expect(sum(1, 2)).toBe(3); });
                  test.skip("later", () => {});
                });
                """}, "vitest run"),
            ("failures", {"package.json": "{\"type\": \"module\"}", "src/sum.ts": sum_ts, "src/sum.test.ts": """
                import { describe, test, expect } from "vitest";
                import { sum, mean } from "./sum";
                describe("sum", () => {
                  test("adds two numbers", () => { expect(sum(1, 2)).toBe(4); });
                  test("negatives", () => { expect(sum(-1, -1)).toBe(-2); });
                });
                test("mean of empty is zero", () => { expect(mean([])).toBe(0); });
                test.skip("later", () => {});
                """, "src/ok.test.ts": """
                import { test, expect } from "vitest";
                test("fine", () => { expect(1).toBe(1); });
                """}, "vitest run"),
            ("many_fail", {"package.json": "{\"type\": \"module\"}", "src/sum.ts": sum_ts, "src/many.test.ts": "import { test, expect } from \"vitest\";\nimport { sum } from \"./sum\";\n" + "".join(
                f"test(\"case {i:02}\", () => {{ expect(sum({i}, 1)).toBe({i}); }});\n" for i in range(12)
            ) + "test(\"fine\", () => { expect(1).toBe(1); });\n"}, "vitest run"),
            ("todo_skip", {"package.json": "{\"type\": \"module\"}", "src/sum.ts": sum_ts, "src/sum.test.ts": """
                import { test, expect } from "vitest";
                import { sum } from "./sum";
                test("adds", () => { expect(sum(1, 2)).toBe(3); });
                test.todo("subtracts");
                test.skip("multiplies", () => {});
                test("breaks", () => { expect(sum(2, 2)).toBe(5); });
                """}, "vitest run"),
        ],
        "eslint": [
            ("warnings_only", {"eslint.config.js": "module.exports = [{ rules: { 'eqeqeq': 'warn', 'no-console': 'warn' } }];\n",
                       "src/a.js": "const x = 1;\nif (x == 2) console.log(x);\n"}, "eslint src"),
            ("errors", {"eslint.config.js": "module.exports = [{ rules: { 'no-unused-vars': 'error', 'no-undef': 'error', 'eqeqeq': 'warn', 'no-debugger': 'error' }, languageOptions: { globals: { console: 'readonly' } } }];\n",
                        "src/app.js": "const unused = 1;\nfunction f(a) {\n  if (a == 1) return undefinedThing;\n}\nf(1);\n",
                        "src/util.js": "function g() {\n  debugger;\n}\ng();\n"}, "eslint src"),
            ("warnings_then_errors", {"eslint.config.js": "module.exports = [{ rules: { 'no-unused-vars': 'error', 'eqeqeq': 'warn', 'prefer-const': 'warn' } }];\n",
                        "src/a.js": "".join(f"let v{i} = 1;\nif (v{i} == 2) {{ v{i} = 3; }}\n" for i in range(8)),
                        "src/z.js": "const dead = 1;\nconst dead2 = 2;\n"}, "eslint src"),
            ("many", {"eslint.config.js": "module.exports = [{ rules: { 'no-unused-vars': 'error', 'no-var': 'error', 'semi': ['error', 'always'] } }];\n",
                      "src/m.js": "".join(f"var unused{i} = {i}\n" for i in range(9))}, "eslint src"),
        ],
        "tsc": [
            ("errors", {"tsconfig.json": "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}, \"include\": [\"src\"]}",
                        "src/a.ts": "export const s: string = 1;\nexport const n: number = \"x\";\n",
                        "src/b.ts": "import { s } from './a';\nexport const m: number = s;\n"}, "tsc --pretty false"),
            ("pretty", {"tsconfig.json": "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}, \"include\": [\"src\"]}",
                        "src/a.ts": "export const s: string = 1;\nexport function f(x) { return x; }\n"}, "tsc --pretty"),
            ("many", {"tsconfig.json": "{\"compilerOptions\": {\"strict\": true, \"noEmit\": true}, \"include\": [\"src\"]}",
                      "src/m.ts": "".join(f"export const v{i}: number = \"{i}\";\n" for i in range(12)) + "missing();\n"}, "tsc"),
        ],
        "node-test": [
            ("all_pass", {"package.json": "{}", "sum.js": sum_js, "test/sum.test.js": """
                const test = require("node:test");
                const assert = require("node:assert");
                const { sum } = require("../sum");
                test("adds", () => { assert.strictEqual(sum(1, 2), 3); });
                test("negatives", () => { assert.strictEqual(sum(-1, -1), -2); });
                test("later", { skip: "not ready" }, () => {});
                """}, "node --test"),
            ("failures", {"package.json": "{}", "sum.js": sum_js, "test/sum.test.js": """
                const test = require("node:test");
                const assert = require("node:assert");
                const { sum, mean } = require("../sum");
                test("adds two numbers", () => { assert.strictEqual(sum(1, 2), 4); });
                test("mean of empty", () => { assert.strictEqual(mean([]), 0); });
                test("fine", () => { assert.ok(true); });
                test("todo one", { todo: true }, () => {});
                """}, "node --test"),
            ("spec", {"package.json": "{}", "sum.js": sum_js, "test/sum.test.js": """
                const { describe, it } = require("node:test");
                const assert = require("node:assert");
                const { sum } = require("../sum");
                describe("sum", () => {
                  it("adds", () => { assert.strictEqual(sum(1, 2), 3); });
                  it("breaks", () => { assert.strictEqual(sum(2, 2), 5); });
                  it("skipped", { skip: true }, () => {});
                });
                """}, "node --test --test-reporter=spec"),
            ("many_fail", {"package.json": "{}", "sum.js": sum_js, "test/many.test.js": "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst { sum } = require(\"../sum\");\n" + "".join(
                f"test(\"case {i:02}\", () => {{ assert.strictEqual(sum({i}, 1), {i}); }});\n" for i in range(12)
            ) + "test(\"fine\", () => {});\n"}, "node --test"),
        ],
        "shellcheck": [
            ("few", {"run.sh": "#!/bin/bash\nfiles=$(ls *.txt)\nfor f in $files; do\n  cat $f\ndone\n"}, "shellcheck run.sh"),
            ("mixed", {"deploy.sh": "#!/bin/sh\nif [ $1 == \"prod\" ]; then\n  echo `date`\n  local x=1\nfi\ncd /tmp\nrm -rf $DIR/*\n"}, "shellcheck deploy.sh"),
            ("many", {"a.sh": "#!/bin/bash\n" + "".join(f"echo $v{i}\n" for i in range(11)) + "[ $x = 1 ] && echo `pwd`\n"}, "shellcheck a.sh"),
        ],
    }


def truth_jest(root, case, cmd):
    sh(cmd + " --json --outputFile=.report.json", root)
    r = json.loads((root / ".report.json").read_text())
    failing, locations = [], []
    for suite in r["testResults"]:
        for a in suite["assertionResults"]:
            if a["status"] == "failed":
                failing.append(" › ".join(a["ancestorTitles"] + [a["title"]]))
                locations += js_frame("\n".join(a["failureMessages"]), root)
    totals = {"passed": r["numPassedTests"], "failed": r["numFailedTests"],
              "skipped": r["numPendingTests"], "todo": r["numTodoTests"]}
    return totals, failing, locations


def js_frame(text, root):
    for m in re.finditer(r"(?:file://)?(/[^\s():]+\.[cm]?[jt]sx?):(\d+):\d+", text):
        if "node_modules" not in m[1] and m[1].startswith(str(root)):
            return [f"{rel(m[1], root)}:{m[2]}"]
    return []


def truth_vitest(root, case, cmd):
    sh(cmd + " --reporter=json --outputFile=.report.json", root)
    r = json.loads((root / ".report.json").read_text())
    failing, locations = [], []
    for suite in r["testResults"]:
        for a in suite["assertionResults"]:
            if a["status"] == "failed":
                failing.append(" > ".join(a["ancestorTitles"] + [a["title"]]))
                locations += js_frame("\n".join(a["failureMessages"]), root)
    totals = {"passed": r["numPassedTests"], "failed": r["numFailedTests"],
              "skipped": r["numPendingTests"], "todo": r["numTodoTests"]}
    return totals, failing, locations


def truth_eslint(root, case, cmd):
    r = json.loads(sh(cmd + " -f json", root, merge=False))
    diags, codes = [], []
    e = w = 0
    for f in r:
        for m in f["messages"]:
            sev = "error" if m["severity"] == 2 else "warning"
            e += sev == "error"
            w += sev == "warning"
            codes.append(m.get("ruleId"))
            diags.append((sev, f"{rel(f['filePath'], root)}:{m['line']}"))
    return {"error": e, "warning": w}, uniq(codes), by_severity(diags)


def truth_tsc(root, case, cmd):
    # `--pretty false` prints one line per diagnostic: tsc's machine-readable form.
    out = sh(cmd.replace("--pretty false", "").replace("--pretty", "") + " --pretty false", root)
    rows = re.findall(r"(?m)^(\S+)\((\d+),\d+\): error (TS\d+): ", out)
    return {"error": len(rows)}, uniq(c for _, _, c in rows), [f"{f}:{l}" for f, l, _ in rows]


def truth_node_test(root, case, cmd):
    out = sh("node --test --test-reporter=tap", root)
    counts = {k: int(v) for k, v in re.findall(r"(?m)^# (pass|fail|skipped|todo|cancelled) (\d+)$", out)}
    failing, locations = [], []
    # Top-level and nested `not ok N - name` lines (TAP indents subtests by 4).
    blocks = re.split(r"(?m)^(?=\s*(?:not ok|ok) \d+ - )", out)
    for b in blocks:
        m = re.match(r"^\s*not ok \d+ - (.+?)(?: # .*)?$", b, re.M)
        if not m or "failureType: 'subtestsFailed'" in b:
            continue
        failing.append(m[1])
        # Where it failed (the stack), else where the test is declared.
        stack = b.split("stack: |-", 1)
        locations += js_frame(stack[1], root) if len(stack) > 1 and js_frame(stack[1], root) else js_frame(b, root)
    totals = {"passed": counts["pass"], "failed": counts["fail"], "skipped": counts["skipped"],
              "todo": counts["todo"]}
    return totals, failing, locations


def truth_shellcheck(root, case, cmd):
    r = json.loads(sh(cmd.replace("shellcheck", "shellcheck -f json"), root, merge=False))
    levels = {}
    diags = []
    for d in r:
        levels[d["level"]] = levels.get(d["level"], 0) + 1
        diags.append((d["level"], f"{d['file']}:{d['line']}"))
    return levels, uniq(f"SC{d['code']}" for d in r), by_severity(diags)


# ------------------------------------------------------------------ main ---

TRUTH = {
    "pytest": truth_pytest, "unittest": truth_unittest, "ruff": truth_ruff,
    "flake8": truth_flake8, "mypy": truth_mypy, "cargo-test": truth_cargo_test,
    "cargo-build": truth_cargo_build, "clippy": truth_clippy, "rustc": truth_rustc,
    "nextest": truth_nextest, "go-test": truth_go_test, "go-build": truth_go_build,
    "go-vet": truth_go_vet, "jest": truth_jest, "vitest": truth_vitest,
    "eslint": truth_eslint, "tsc": truth_tsc, "node-test": truth_node_test,
    "shellcheck": truth_shellcheck,
}

JS_TOOLS = {"jest", "vitest", "eslint", "tsc", "node-test"}


def normalise(text, root):
    text = text.replace("file://" + str(root), "file://" + ROOT_NAME)
    return text.replace(str(root), ROOT_NAME)


def human(tool, root, cmd):
    env = {}
    if tool in ("cargo-test", "cargo-build", "clippy", "nextest"):
        env = cargo_env(root)
        sh("cargo clean -q", root, env)
    if tool.startswith("go-"):
        env = GO_ENV
    if tool in ("pytest",):
        env = {"PYTHONDONTWRITEBYTECODE": "1"}
        cmd += " -p no:cacheprovider"
    if tool == "mypy":
        cmd += " --no-incremental"
    return sh(cmd, root, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", action="append", help="regenerate only this tool's cases")
    ap.add_argument("--case", action="append", help="regenerate only the cases of this name")
    args = ap.parse_args()
    cases = {}
    for group in (py_cases(), rust_cases(), go_cases(), js_cases()):
        cases.update(group)
    for tool, items in cases.items():
        if args.only and tool not in args.only:
            continue
        out_dir = HERE / tool
        out_dir.mkdir(exist_ok=True)
        for name, files, cmd in items:
            if args.case and name not in args.case:
                continue
            root = WORK / tool / name
            write_tree(root, files)
            if tool in JS_TOOLS:
                (root / "node_modules").symlink_to(JSDEPS / "node_modules")
            text = human(tool, root, cmd)
            totals, failing, locations = TRUTH[tool](root, name, cmd)
            totals = {k: v for k, v in totals.items() if v}
            truth = {"tool": tool, "command": cmd, "totals": totals,
                     "failing": [normalise(f, root) for f in failing],
                     "locations": [normalise(rel(l, root), root) for l in locations]}
            (out_dir / f"{name}.txt").write_text(normalise(text, root))
            (out_dir / f"{name}.truth.json").write_text(json.dumps(truth, indent=2, ensure_ascii=False) + "\n")
            print(f"{tool}/{name}: {json.dumps(totals)} failing={len(failing)} locations={len(locations)}",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
