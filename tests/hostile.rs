//! Hostile plugins through the `agentforge` binary, as the product calls them: inside
//! its async runtime, in a run and in `extract`, `plugins check` and `plugins list`.
//!
//! Every misbehaviour of the fixtures (`plugins/hostile`, `plugins/hostile-gate`,
//! `plugins/hostile-schema`) must end as the plugin's typed error while the host carries
//! on: never a host panic (exit 101), an abort or a hang.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use support::built_plugins::plugins;
use support::notes::{agentforge, notes_task, notes_workspace, FIXED};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

/// Installs fixture crate `fixture` (its component) in `dir/<name>` with a manifest of
/// `kind` and the `extra` lines.
fn install(dir: &Path, fixture: &str, name: &str, kind: &str, extra: &str) -> PathBuf {
    let wasm = format!("{}.wasm", fixture.replace('-', "_"));
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(plugins().join(fixture).join(&wasm), d.join(&wasm)).unwrap();
    std::fs::write(
        d.join("plugin.toml"),
        format!(
            "name = \"{name}\"\nversion = \"0.1.0\"\nkind = \"{kind}\"\napi = \"0.3.0\"\ncomponent = \"{wasm}\"\n{extra}"
        ),
    )
    .unwrap();
    d
}

fn af(cwd: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentforge"))
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin_pipe = child.stdin.take().unwrap();
    // A command that fails early may not read its input.
    let _ = stdin_pipe.write_all(stdin.as_bytes());
    drop(stdin_pipe);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// No escape, NUL or bidi control reaches the terminal.
fn assert_clean(s: &str) {
    for bad in ['\u{1b}', '\u{0}', '\u{202e}', '\u{9b}', '\r', '\u{7}'] {
        assert!(!s.contains(bad), "{bad:?} reached the terminal:\n{s:?}");
    }
}

#[test]
fn every_hostile_mode_is_a_typed_error_in_extract_and_the_host_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    // The same plugin twice, in two folders: a short deadline only for the modes that
    // wait for it, a generous one for the rest, so that a slow machine turns no other
    // error (the memory bomb's) into a deadline.
    let dir = tmp.path().join("plugins");
    install(
        &dir,
        "hostile",
        "hostile",
        "extractor",
        "[limits]\ndeadline_ms = 5000\n",
    );
    let short = tmp.path().join("short-deadline");
    install(
        &short,
        "hostile",
        "hostile",
        "extractor",
        "[limits]\ndeadline_ms = 500\n",
    );
    let (p, short) = (dir.to_str().unwrap(), short.to_str().unwrap());
    // mode -> what the output must say (stdout facts or stderr error), and the plugins.
    let cases: &[(&str, &str, &str)] = &[
        ("print", "printed", p),
        ("clock", "clock ok", p),
        ("tcp", "tcp: Err", p),
        ("udp", "udp: Err", p),
        ("dns", "dns: Err", p),
        ("panic", "panicked at", p),
        ("exit", "exited with code 1", p),
        ("bomb", "memory limit", p),
        // Out of fuel or past the deadline, whichever comes first.
        ("loop", "plugin `hostile`: ", short),
        ("sleep", "deadline of 500ms exceeded", short),
        ("shout", "output too large", p),
        ("recurse", "stack overflow", p),
        ("escape", "red", p),
    ];
    for (mode, wanted, plugins) in cases {
        let out = af(
            tmp.path(),
            &[
                "extract",
                "--tool",
                mode,
                "--plugins",
                plugins,
                "--no-builtin",
            ],
            "some output\n",
        );
        let (stdout, stderr) = text(&out);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{mode}: exit {:?}\n{stderr}",
            out.status.code()
        );
        assert!(
            !stderr.contains("Cannot start a runtime") && !stderr.contains("host panicked"),
            "{mode}: {stderr}"
        );
        assert!(
            stdout.contains(wanted) || stderr.contains(wanted),
            "{mode}: `{wanted}` not in\n{stdout}\n{stderr}"
        );
        assert_clean(&stdout);
        assert_clean(&stderr);
    }
}

#[test]
fn many_duplicate_facts_are_said_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(&dir, "hostile", "hostile", "extractor", "");
    let out = af(
        tmp.path(),
        &[
            "extract",
            "--tool",
            "many",
            "--plugins",
            dir.to_str().unwrap(),
            "--no-builtin",
        ],
        "x\n",
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let facts: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(facts.as_array().unwrap().len(), 1000);
}

#[test]
fn a_panic_while_describing_itself_is_reported_by_check_and_list() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(
        &dir,
        "hostile",
        "a-extractor",
        "extractor",
        "[config]\npanic_in = \"handles\"\n",
    );
    install(
        &dir,
        "hostile-gate",
        "b-gate",
        "gate",
        "[config]\npanic_in = \"checks\"\n",
    );
    install(
        &dir,
        "hostile-schema",
        "c-schema",
        "context-schema",
        "[config]\npanic_in = \"describe\"\n",
    );
    install(&dir, "hostile-schema", "d-schema-ok", "context-schema", "");
    let check = af(tmp.path(), &["plugins", "check", "plugins"], "");
    let (stdout, stderr) = text(&check);
    assert_eq!(check.status.code(), Some(1), "{stdout}\n{stderr}");
    for (name, message) in [
        ("a-extractor", "refuses to say what it handles"),
        ("b-gate", "refuses to name its checks"),
        ("c-schema", "refuses to describe itself"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("{name} not reported:\n{stdout}"));
        assert!(
            line.contains("panicked at") && line.contains(message),
            "{line}"
        );
    }
    assert!(stdout.contains("ok      d-schema-ok"), "{stdout}");
    let list = af(tmp.path(), &["plugins", "list", "--plugins", "plugins"], "");
    let (stdout, stderr) = text(&list);
    assert_eq!(list.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("refuses to describe itself"), "{stdout}");
}

#[test]
fn manifests_cannot_reach_outside_their_folder_or_lift_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    // A secret next to the plugin folder, and the usual suspects.
    std::fs::write(tmp.path().join("secret.txt"), "TOP-SECRET-CONTENT\n").unwrap();
    let escape = |name: &str, component: &str| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("plugin.toml"),
            format!("name = \"{name}\"\nversion = \"1\"\nkind = \"extractor\"\napi = \"0.3.0\"\ncomponent = \"{component}\"\n"),
        )
        .unwrap();
        d
    };
    escape("up", "../../secret.txt");
    escape("absolute", "/etc/passwd");
    let linked = escape("linked", "component.wasm");
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), linked.join("component.wasm"))
        .unwrap();
    let big = escape("big", "big.wasm");
    let f = std::fs::File::create(big.join("big.wasm")).unwrap();
    f.set_len(200 << 20).unwrap();
    let text_file = escape("text", "notes.wasm");
    std::fs::write(text_file.join("notes.wasm"), "root:x:0:0:not wasm\n").unwrap();
    let bad_name = install(&dir, "hostile", "tmp", "extractor", "");
    let manifest = std::fs::read_to_string(bad_name.join("plugin.toml")).unwrap();
    std::fs::write(
        bad_name.join("plugin.toml"),
        manifest.replace("name = \"tmp\"", "name = \"Bad_Name\\u001b[2J\""),
    )
    .unwrap();

    let out = af(tmp.path(), &["plugins", "check", "plugins"], "");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("TOP-SECRET") && !stderr.contains("TOP-SECRET"));
    assert!(!stdout.contains("root:x") && !stderr.contains("root:x"));
    assert_clean(&stdout);
    for (plugin, message) in [
        ("plugins/up", "inside the plugin folder"),
        ("plugins/absolute", "inside the plugin folder"),
        ("plugins/linked", "outside the plugin folder"),
        ("plugins/big", "beyond the 64 MiB"),
        ("plugins/text", "not a WebAssembly file"),
        ("plugins/tmp", "a plugin name is lowercase letters"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.contains(plugin))
            .unwrap_or_else(|| panic!("{plugin} not reported:\n{stdout}"));
        assert!(line.contains(message), "{plugin}: {line}");
    }

    // Limits a manifest asks for are capped at the project's ceilings (256 MiB by default,
    // lower here), and the cap is said.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plugins");
    install(
        &dir,
        "hostile",
        "greedy",
        "extractor",
        "reuse_instance = true\n[limits]\nmemory_mib = 4096\ndeadline_ms = 100000000\nfuel = 100000000000000\n",
    );
    std::fs::write(
        tmp.path().join("agentforge.toml"),
        "[plugins.limits]\nmemory_mib = 32\ndeadline_ms = 1000\n",
    )
    .unwrap();
    let p = dir.to_str().unwrap();
    let bomb = af(
        tmp.path(),
        &["extract", "--tool", "bomb", "--plugins", p, "--no-builtin"],
        "",
    );
    let (_, stderr) = text(&bomb);
    assert!(
        stderr.contains(&format!("memory limit of {} bytes", 32u64 << 20)),
        "{stderr}"
    );
    assert!(
        stderr.contains("capped at the project's ceiling 32"),
        "{stderr}"
    );
    assert!(stderr.contains("`reuse_instance` not granted"), "{stderr}");
    // A folder named like the host's embedded plugins gets no trust from its name: the
    // same caps apply (the origin is passed by the loader, not read from the path).
    std::fs::rename(&dir, tmp.path().join("builtin:plugins")).unwrap();
    let named = af(
        tmp.path(),
        &[
            "extract",
            "--tool",
            "bomb",
            "--plugins",
            "builtin:plugins",
            "--no-builtin",
        ],
        "",
    );
    let (_, stderr) = text(&named);
    assert!(
        stderr.contains("capped at the project's ceiling 32"),
        "{stderr}"
    );
    assert!(stderr.contains("`reuse_instance` not granted"), "{stderr}");
    std::fs::rename(tmp.path().join("builtin:plugins"), &dir).unwrap();
    let looped = af(
        tmp.path(),
        &["extract", "--tool", "sleep", "--plugins", p, "--no-builtin"],
        "",
    );
    let (_, stderr) = text(&looped);
    assert!(stderr.contains("deadline of 1s exceeded"), "{stderr}");
}

/// The notes task, within 6 steps.
fn task() -> String {
    notes_task("notes", FIXED, 6)
}

fn run(dir: &Path, server: &ScriptedServer, plugins: &str) -> Output {
    let mut c = agentforge(dir);
    c.args(["run", "task.yaml", "--provider", "openai", "--model", "m"])
        .args(["--plugins", plugins]);
    for (k, v) in server.env_vars("sk-test") {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn a_run_with_a_hostile_extractor_goes_on_to_completion() {
    // Each check's name picks the hostile mode: its output reaches every `*` extractor.
    let mut task = task().replace("max_steps: 6\n", "");
    for mode in ["print", "panic", "exit", "bomb", "sleep", "escape", "tcp"] {
        task.push_str(&format!(
            "  - name: {mode}\n    command: \"true\"\n    kind: test\n"
        ));
    }
    task.push_str("max_steps: 8\n");
    let dir = notes_workspace(&task);
    let plugins_dir = dir.path().join("my-plugins");
    // Every mode runs under this one deadline, `sleep` to its end: long enough that the
    // other modes (the memory bomb on a loaded machine) reach their own error first.
    install(
        &plugins_dir,
        "hostile",
        "hostile",
        "extractor",
        "[limits]\ndeadline_ms = 3000\n",
    );
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "fixed"})),
        ])
        .start_background();
    let out = run(dir.path(), &server, "my-plugins");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for wanted in [
        "panicked at",
        "exited with code 1",
        "memory limit",
        "deadline of 3s exceeded",
    ] {
        assert!(stderr.contains(wanted), "`{wanted}` not in\n{stderr}");
    }
    assert_clean(&stderr);
    assert_clean(&stdout);
    // What the model saw is clean too.
    for r in server.requests() {
        assert_clean(&r.user_text());
    }
}

#[test]
fn a_folder_gate_replaces_a_built_in_only_when_the_project_says_so() {
    // As many replies as the task has steps: a model that touches the file without fixing
    // the violation (`complete` needs a changed file: guard-verify-implementation), then
    // keeps claiming it is done. Only a gate passing everything lets that through.
    let script = || {
        let mut s = vec![
            Scripted::tool_call("read_file", json!({"path": "notes.txt"})),
            // The checks run after the edit: the gate judges them.
            Scripted::tool_call(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "title: demo", "new_text": "title: demo notes"}),
            ),
        ];
        s.extend((0..4).map(|_| Scripted::tool_call("complete", json!({"summary": "trust me"}))));
        s
    };
    // Named like the built-in tests gate, passing everything.
    let dir = notes_workspace(&task());
    install(
        &dir.path().join("my-plugins"),
        "hostile-gate",
        "gate-tests-pass",
        "gate",
        "",
    );
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(script())
        .start_background();
    let out = run(dir.path(), &server, "my-plugins");
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("plugin `gate-tests-pass`")
            && stderr.contains("not loaded: it would replace built-in gate")
            && stderr.contains("replace = [\"gate-tests-pass\", \"gate-command\"]"),
        "{stderr}"
    );
    let requests = server.requests();
    assert!(requests.len() >= 2);
    assert!(
        !requests[1].user_text().contains("passes everything"),
        "{}",
        requests[1].user_text()
    );

    // With the project's word, it replaces them, and every run says so.
    let dir = notes_workspace(&task());
    install(
        &dir.path().join("my-plugins"),
        "hostile-gate",
        "gate-tests-pass",
        "gate",
        "",
    );
    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[plugins]\nreplace = [\"gate-tests-pass\", \"gate-command\"]\n",
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(script())
        .start_background();
    let out = run(dir.path(), &server, "my-plugins");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("replaces built-in gate `gate-tests-pass`"),
        "{stderr}"
    );
}
