//! The plugin authoring commands through the `agentforge` binary: `plugins new` (and a
//! build of what it scaffolds), `plugins list`, `plugins check` and `extract --tool`.
//!
//! The bundled components are built by `plugins/build.sh` once per test process (as in
//! tests/plugins.rs); the scaffolded crate is built for `wasm32-wasip2` when that target
//! is installed (it is in CI).

use crate::support;

use support::built_plugins::{plugins, root};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", self.stdout, self.stderr))
    }
}

/// Runs `agentforge args...` in `cwd` with `stdin`.
fn af(cwd: &Path, args: &[&str], stdin: &str) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .current_dir(cwd)
        .args(args)
        .env_remove("AGENTFORGE_SDK")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn statements(facts: &Value) -> Vec<String> {
    facts
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["statement"].as_str().unwrap().to_string())
        .collect()
}

fn wasm_target_installed() -> bool {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Path::new(&sysroot)
        .join("lib/rustlib/wasm32-wasip2")
        .is_dir()
}

/// Copies the cargo plugin (manifest and component) into `dir/<as_name>`, its manifest
/// edited by `edit`.
fn install(dir: &Path, as_name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let src = plugins().join("extract-cargo");
    let dst = dir.join(as_name);
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(
        src.join("extract_cargo.wasm"),
        dst.join("extract_cargo.wasm"),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(src.join("plugin.toml")).unwrap();
    std::fs::write(dst.join("plugin.toml"), edit(manifest)).unwrap();
    dst
}

#[test]
fn plugins_new_scaffolds_a_crate_that_builds_and_extracts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = af(
        tmp.path(),
        &["plugins", "new", "extractor", "my-lint", "--dir", "crates"],
        "",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("created extractor plugin `my-lint`"));
    let dir = tmp.path().join("crates/my-lint");
    for f in ["Cargo.toml", "plugin.toml", "src/lib.rs", ".gitignore"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The SDK is found from this checkout and named by a path relative to the crate.
    let cargo: toml::Table =
        toml::from_str(&std::fs::read_to_string(dir.join("Cargo.toml")).unwrap()).unwrap();
    let sdk = cargo["dependencies"]["agentforge-plugin-sdk"]["path"]
        .as_str()
        .unwrap();
    assert!(Path::new(sdk).is_relative(), "{sdk}");
    assert_eq!(
        dir.join(sdk).canonicalize().unwrap(),
        root().join("plugins/sdk").canonicalize().unwrap()
    );
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    assert!(
        manifest.contains("component = \"my_lint.wasm\""),
        "{manifest}"
    );

    // The same name again: refused, nothing overwritten.
    let again = af(
        tmp.path(),
        &["plugins", "new", "extractor", "my-lint", "--dir", "crates"],
        "",
    );
    assert_eq!(again.code, Some(64));
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);

    // Before the component is built, `check` names the missing file.
    let check = af(tmp.path(), &["plugins", "check", "crates/my-lint"], "");
    assert_eq!(check.code, Some(1), "{}", check.stdout);
    assert!(
        check.stdout.contains("my_lint.wasm is missing"),
        "{}",
        check.stdout
    );

    if !wasm_target_installed() {
        eprintln!("wasm32-wasip2 not installed: the scaffolded crate is not built");
        return;
    }
    // Shares the bundled plugins' target dir: the SDK's dependencies are built once.
    let target = root().join("target/plugins");
    let status = Command::new("cargo")
        .current_dir(&dir)
        .args(["build", "--quiet", "--target", "wasm32-wasip2", "--release"])
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap();
    assert!(status.success(), "the scaffolded crate does not build");
    std::fs::copy(
        target.join("wasm32-wasip2/release/my_lint.wasm"),
        dir.join("my_lint.wasm"),
    )
    .unwrap();

    let check = af(tmp.path(), &["plugins", "check", "crates/my-lint"], "");
    assert_eq!(check.code, Some(0), "{}{}", check.stdout, check.stderr);
    assert!(check.stdout.contains("ok      my-lint 0.1.0 (extractor)"));

    let sample = "src/main.rs:3:9: warning: unused variable `x`\n1 problem\n";
    let out = af(
        tmp.path(),
        &[
            "extract",
            "--tool",
            "lint",
            "--plugins",
            "crates/my-lint",
            "--no-builtin",
        ],
        sample,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let facts = out.json();
    assert_eq!(
        statements(&facts),
        [
            "warning at src/main.rs:3: unused variable `x`",
            "lint: 1 problems"
        ]
    );
    assert_eq!(facts[0]["category"], "error");
    assert_eq!(facts[0]["source"], "lint");
    assert_eq!(facts[0]["extractor"], "my-lint");
    assert_eq!(facts[1]["category"], "verification");
    // It handles only `lint`.
    let other = af(
        tmp.path(),
        &["extract", "--tool", "tests", "--plugins", "crates/my-lint"],
        sample,
    );
    assert_eq!(other.code, Some(0));
    assert_eq!(other.json(), serde_json::json!([]));
    assert!(other
        .stderr
        .contains("no loaded extractor plugin handles tool `tests`"));
}

#[test]
fn plugins_new_refuses_unknown_kinds_and_bad_names() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["plugins", "new", "formatter", "f"],
            "unknown plugin kind `formatter`",
        ),
        (
            &["plugins", "new", "extractor", "My Lint"],
            "invalid plugin name `My Lint`",
        ),
        (
            &["plugins", "new", "extractor", "x", "--sdk", "."],
            "is not the AgentForge plugin SDK",
        ),
        (&["plugins", "new", "extractor"], "<NAME>"),
    ];
    for (args, message) in cases {
        let out = af(tmp.path(), args, "");
        assert_eq!(out.code, Some(64), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
    }
    // Nothing was created.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn plugins_list_shows_the_bundled_plugins() {
    let plugins = plugins();
    let tmp = tempfile::tempdir().unwrap();
    let p = plugins.to_str().unwrap();
    let out = af(
        tmp.path(),
        &["plugins", "list", "--plugins", p, "--json"],
        "",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let rows = out.json();
    let cargo = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "extract-cargo")
        .unwrap_or_else(|| panic!("{rows:#}"));
    assert_eq!(cargo["kind"], "extractor");
    assert_eq!(cargo["version"], "0.1.0");
    assert_eq!(cargo["status"], "loaded");
    assert_eq!(cargo["error"], Value::Null);
    assert_eq!(cargo["capabilities"], serde_json::json!([]));
    assert!(cargo["folder"]
        .as_str()
        .unwrap()
        .ends_with("plugins/extract-cargo"));
    // No workspace here: nothing is cached into the current folder.
    assert!(!tmp.path().join(".agentforge").exists());

    let text = af(tmp.path(), &["plugins", "list", "--plugins", p], "");
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("extract-cargo "))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    for col in ["extractor", "0.1.0", "loaded", "none", "extract-cargo"] {
        assert!(line.contains(col), "{line}");
    }

    // The built-ins every run loads are listed too, after the folders' plugins; the one
    // a folder plugin of the same name replaces says so.
    let source = |name: &str, src: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name && r["source"] == src)
            .unwrap_or_else(|| panic!("no {src} {name}: {rows:#}"))
            .clone()
    };
    assert_eq!(source("extract-cargo", "folder")["status"], "loaded");
    assert_eq!(source("extract-cargo", "built-in")["status"], "replaced");
    assert_eq!(
        source("schema-fix-violation", "folder")["provides"],
        serde_json::json!(["fix_violation"])
    );
    // Without folders: the 27 built-ins, all loaded.
    let alone = af(tmp.path(), &["plugins", "list", "--json"], "").json();
    let alone = alone.as_array().unwrap();
    assert_eq!(alone.len(), 27, "{alone:#?}");
    assert!(alone
        .iter()
        .all(|r| r["source"] == "built-in" && r["status"] == "loaded"));
    // A built-in's capabilities are listed by the names `[capabilities]` uses.
    let learned = alone
        .iter()
        .find(|r| r["name"] == "guard-learned-rules")
        .unwrap_or_else(|| panic!("{alone:#?}"));
    assert_eq!(
        learned["capabilities"],
        serde_json::json!(["learned_rules"])
    );

    // The compiled components go to the cache runs use (`AGENTFORGE_CACHE_DIR`).
    let cache = tmp.path().join("cache");
    let out = Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .current_dir(tmp.path())
        .args(["plugins", "list", "--plugins", p])
        .env("AGENTFORGE_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(cache.read_dir().unwrap().next().is_some());

    let missing = af(tmp.path(), &["plugins", "list", "--plugins", "nowhere"], "");
    assert_eq!(missing.code, Some(64));
    assert!(missing.stderr.contains("nowhere"), "{}", missing.stderr);
}

/// The first command after installing runs no Cranelift: the built-ins come precompiled
/// (by `agentforge-builtins`' build script) and are deserialized, with an empty cache.
#[test]
fn built_in_plugins_load_precompiled_on_first_use() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("fresh-cache");
    let out = Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .current_dir(tmp.path())
        .args(["plugins", "list", "--json"])
        .env("AGENTFORGE_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("notice:"), "{stderr}");
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 27, "{rows:#?}");
    for r in rows {
        assert_eq!(r["status"], "loaded", "{r:#}");
        assert_eq!(r["compiled"], false, "compiled on first use: {r:#}");
    }
    // Nothing had to be compiled, so nothing was cached.
    let cached = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert_eq!(cached, 0);

    // A folder plugin is compiled once and cached; `plugins cache clean` empties it.
    let p = plugins();
    let with_cache = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agentforge"))
            .current_dir(tmp.path())
            .args(args)
            .env("AGENTFORGE_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    let out = with_cache(&[
        "plugins",
        "list",
        "--plugins",
        p.join("extract-cargo").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    // One compiled component; beside it a `.stamp` (the digest remembered for the file)
    // when the file's times had settled, so only once the plugin was built a while ago.
    let entries: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        entries.iter().filter(|n| n.ends_with(".cwasm")).count(),
        1,
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .all(|n| n.ends_with(".cwasm") || n.ends_with(".stamp")),
        "{entries:?}"
    );
    // The token counts runs keep in the same folder are a cache too: cleaned with it.
    std::fs::write(cache.join("token-counts-o200k.bin"), b"af-o200k-xxh3-v2").unwrap();
    let out = with_cache(&["--json", "plugins", "cache", "clean"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed"], 1, "{v}");
    assert!(v["bytes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
}

#[test]
fn plugins_check_fails_on_a_broken_manifest_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("plugins");
    install(&d, "a-good", |m| m);
    install(&d, "b-bad-toml", |m| {
        m.replace("kind = \"extractor\"", "kind = extractor")
            .replace("name = \"extract-cargo\"", "name = \"b\"")
    });
    install(&d, "c-unknown-field", |m| {
        format!("colour = \"red\"\n{m}").replace("name = \"extract-cargo\"", "name = \"c\"")
    });
    install(&d, "d-capability", |m| {
        m.replace("name = \"extract-cargo\"", "name = \"d\"") + "network = true\n"
    });

    let out = af(tmp.path(), &["plugins", "check", "plugins"], "");
    assert_eq!(out.code, Some(1), "{}{}", out.stdout, out.stderr);
    let s = &out.stdout;
    assert!(
        s.contains("ok      extract-cargo 0.1.0 (extractor) in plugins/a-good"),
        "{s}"
    );
    assert!(
        s.contains("broken  plugins/b-bad-toml: plugins/b-bad-toml/plugin.toml:3:"),
        "{s}"
    );
    assert!(
        s.contains("plugins/c-unknown-field/plugin.toml:1:") && s.contains("colour"),
        "{s}"
    );
    assert!(
        s.contains("plugin `d` requests capability `network`"),
        "{s}"
    );
    assert!(s.contains("4 plugin(s) checked: 1 ok, 3 broken"), "{s}");

    let json = af(tmp.path(), &["plugins", "check", "plugins", "--json"], "").json();
    assert_eq!(json["ok"], 1);
    assert_eq!(json["broken"], 3);
    assert_eq!(json["plugins"][1]["status"], "error");
    assert_eq!(json["plugins"][1]["name"], Value::Null, "unreadable TOML");
    assert_eq!(json["plugins"][3]["name"], "d");
    assert_eq!(
        json["plugins"][3]["capabilities"],
        serde_json::json!(["network"])
    );

    // One plugin's own folder can be checked too; a good folder exits 0.
    let one = af(tmp.path(), &["plugins", "check", "plugins/a-good"], "");
    assert_eq!(one.code, Some(0), "{}", one.stdout);
    let bundled = af(
        tmp.path(),
        &["plugins", "check", plugins().to_str().unwrap()],
        "",
    );
    assert_eq!(bundled.code, Some(0), "{}", bundled.stdout);

    // `list` shows the same errors but succeeds.
    let list = af(tmp.path(), &["plugins", "list", "--plugins", "plugins"], "");
    assert_eq!(list.code, Some(0));
    assert!(
        list.stdout
            .contains("  error: plugins/b-bad-toml/plugin.toml:3:"),
        "{}",
        list.stdout
    );

    // Usage errors.
    let missing = af(tmp.path(), &["plugins", "check", "nowhere"], "");
    assert_eq!(missing.code, Some(64));
    assert!(missing
        .stderr
        .contains("plugin folder nowhere does not exist"));
    assert_eq!(af(tmp.path(), &["plugins", "check"], "").code, Some(64));
    std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
    let empty = af(tmp.path(), &["plugins", "check", "empty"], "");
    assert_eq!(empty.code, Some(1));
    assert!(empty.stdout.contains("no plugins in empty"));
}

#[test]
fn extract_prints_the_cargo_plugins_facts_on_real_outputs() {
    let plugins = plugins();
    let tmp = tempfile::tempdir().unwrap();
    let p = plugins.join("extract-cargo");
    let p = p.to_str().unwrap();
    let expected: &[(&str, &str, &[&str])] = &[
        (
            "cargo_build_errors.txt",
            "check",
            &[
                "error[E0308] at src/lib.rs:1: mismatched types",
                "error[E0277] at src/lib.rs:1: cannot add `i64` to `i32`",
            ],
        ),
        (
            "cargo_test_failures.txt",
            "tests",
            &[
                "tests: 3 passed, 3 failed",
                "panicked at src/lib.rs:8: assertion `left == right` failed: negative sums",
                "tests::mean_of_empty_is_zero",
                "overflow_is_reported",
                "tests/api.rs:3",
            ],
        ),
    ];
    for (file, tool, wanted) in expected {
        let output = std::fs::read_to_string(root().join("tests/data/outputs").join(file)).unwrap();
        let out = af(
            tmp.path(),
            &["extract", "--tool", tool, "--plugins", p, "--no-builtin"],
            &output,
        );
        assert_eq!(out.code, Some(0), "{file}: {}", out.stderr);
        let facts = out.json();
        for f in facts.as_array().unwrap() {
            assert_eq!(f["extractor"], "extract-cargo");
            assert_eq!(f["source"], *tool);
            assert_eq!(f["confidence"], 1.0);
            assert!(f["category"] == "error" || f["category"] == "verification");
        }
        let text = statements(&facts).join("\n");
        for w in *wanted {
            assert!(text.contains(w), "{file}: {w} not in\n{text}");
        }
        // With the native rules too: the same things are said once.
        let both = af(
            tmp.path(),
            &["extract", "--tool", tool, "--plugins", p],
            &output,
        );
        assert_eq!(both.code, Some(0), "{}", both.stderr);
        let mut all = statements(&both.json());
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "duplicated facts: {all:?}");
        assert!(n >= statements(&facts).len());
    }

    // Every recorded output goes through without an error, whatever the tool.
    for entry in std::fs::read_dir(root().join("tests/data/outputs")).unwrap() {
        let path = entry.unwrap().path();
        let output = std::fs::read_to_string(&path).unwrap();
        let out = af(
            tmp.path(),
            &["extract", "--tool", "tests", "--plugins", p],
            &output,
        );
        assert_eq!(out.code, Some(0), "{}: {}", path.display(), out.stderr);
        out.json();
    }

    // Only the native rules: no plugin folder needed.
    let out = af(
        tmp.path(),
        &["extract", "--tool", "tests"],
        "test result: ok. 2 passed; 0 failed; 0 ignored\n",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(statements(&out.json()), ["tests: 2 passed, 0 failed"]);
    // Nothing matched: an empty array and a note.
    let out = af(
        tmp.path(),
        &["extract", "--tool", "x", "--plugins", p],
        "hello\n",
    );
    assert_eq!(out.json(), serde_json::json!([]));
    assert!(out.stderr.contains("no rule matched"), "{}", out.stderr);
}

#[test]
fn extract_usage_errors_exit_64() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["extract"], "--tool"),
        (&["extract", "--tool", "t", "--no-builtin"], "--no-builtin"),
        (
            &["extract", "--tool", "t", "--plugins", "nowhere"],
            "plugin folder nowhere does not exist",
        ),
        (&["extract", "--tool", "t", "--result", "great"], "great"),
    ];
    for (args, message) in cases {
        let out = af(tmp.path(), args, "");
        assert_eq!(out.code, Some(64), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{args:?}: {}", out.stderr);
    }
}
