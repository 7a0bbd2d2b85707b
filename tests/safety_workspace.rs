//! The workspace against a hostile model and hostile files, through the `agentforge`
//! binary with a scripted model on 127.0.0.1:
//!
//! - a FIFO named as a task input (the schema's file insert), a context item or a file to
//!   read does not hang the run, and the step says why; a symlink to `/dev/zero` is
//!   refused; a huge sparse file is read only up to the cap;
//! - the model's file actions cannot write what the harness reads (`agentforge.toml`,
//!   prompts, the task file, `[tools] protected`), however the path is spelled, and sees
//!   why in its next step;
//! - checks run without the provider keys or anything the deny list names, and the key
//!   values the host holds appear nowhere it stores or shows.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};
use support::notes::{agentforge, notes_task, FIXED};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-SECRET-0123456789";

/// Longest a run of these tests may take before it counts as hung (a FIFO read blocks
/// forever; everything here finishes in seconds).
const HANG_BOUND: Duration = Duration::from_secs(120);

fn cmd(dir: &Path) -> Command {
    agentforge(dir)
}

/// Runs `agentforge run task.yaml` against `server`, killed (and the test failed) if it
/// outlives [`HANG_BOUND`].
fn run(dir: &Path, server: &ScriptedServer, extra_env: &[(&str, &str)]) -> Output {
    let mut c = cmd(dir);
    c.args([
        "run",
        "task.yaml",
        "--provider",
        "anthropic",
        "--model",
        "test-model",
    ]);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let (out, killed) = support::output_within(&mut c, HANG_BOUND);
    assert!(
        !killed,
        "agentforge hung for {HANG_BOUND:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn records(dir: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/actions.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn error_of(rec: &Value) -> String {
    rec["error"].as_str().unwrap_or_default().to_string()
}

/// Every file under `dir`, recursively.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Loop detection loosened: these scripts try several refused actions on purpose.
const LOOSE_LOOPS: &str = "[loops]\nrepetition = 20\nerror_cycle = 20\nsemantic = 20\nidentical = 20\nno_progress_reads = 20\nno_progress_unchanged = 20\n";

#[test]
fn a_fifo_as_task_input_context_item_or_read_does_not_hang_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    mkfifo(&ws.join("pipe"));
    std::fs::write(ws.join("agentforge.toml"), LOOSE_LOOPS).unwrap();
    // The violated file is the FIFO: the schema plugin asks the host to insert it.
    std::fs::write(
        ws.join("task.yaml"),
        r#"id: fifo
task_type: fix_violation
goal: Look at the pipe
inputs:
  violation:
    file_path: pipe
    message: it is a pipe
checks:
  - name: tests
    command: "true"
    kind: test
max_steps: 10
"#,
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script(vec![
            Scripted::tool_call("load_context", json!({"item": "full_file:pipe"})),
            Scripted::tool_call("read_file", json!({"path": "pipe"})),
            Scripted::tool_call("search", json!({"pattern": "x"})),
            Scripted::tool_call("escalate", json!({"reason": "the file is a pipe"})),
        ])
        .start_background();
    let out = run(ws, &server, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    // The schema's insert of the FIFO is a note, not a hang.
    let first = reqs[0].user_text();
    assert!(
        first.contains("not shown") && first.contains("FIFO"),
        "{first}"
    );
    let recs = records(ws, "fifo");
    assert_eq!(recs[0]["result"], "failure");
    assert!(error_of(&recs[0]).contains("FIFO"), "{}", recs[0]);
    assert_eq!(recs[1]["result"], "failure");
    assert!(error_of(&recs[1]).contains("FIFO"), "{}", recs[1]);
    // search skips it; the model sees the reasons in the next step.
    assert_eq!(recs[2]["result"], "success");
    assert!(reqs[2].user_text().contains("FIFO"));
}

#[test]
fn dev_zero_through_a_symlink_is_refused_and_a_huge_sparse_file_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
    // 2 MiB of text, then a hole up to 64 GiB: a read without a cap would never end.
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 2 << 20 {
        text.push_str(&format!("line {i}\n"));
        i += 1;
    }
    std::fs::write(ws.join("big.log"), &text).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(ws.join("big.log"))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    std::fs::write(ws.join("agentforge.toml"), LOOSE_LOOPS).unwrap();
    std::fs::write(
        ws.join("task.yaml"),
        r#"id: big
task_type: fix_violation
goal: Look at the log
inputs:
  violation:
    file_path: zero
    message: look
checks:
  - name: tests
    command: "true"
    kind: test
max_steps: 10
"#,
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script(vec![
            Scripted::tool_call("read_file", json!({"path": "zero"})),
            Scripted::tool_call("load_context", json!({"item": "full_file:big.log"})),
            Scripted::tool_call("read_file", json!({"path": "big.log"})),
            Scripted::tool_call("escalate", json!({"reason": "done looking"})),
        ])
        .start_background();
    let out = run(ws, &server, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(reqs[0].user_text().contains("outside the workspace"));

    let recs = records(ws, "big");
    assert_eq!(recs[0]["result"], "failure");
    assert!(error_of(&recs[0]).contains("outside the workspace"));
    // full_file: shown up to the cap, with a note that it was cut.
    assert_eq!(recs[1]["result"], "success", "{}", recs[1]);
    let memory =
        std::fs::read_to_string(ws.join(".agentforge/tasks/big/working_memory.yaml")).unwrap();
    assert!(memory.contains("only that much is shown"), "no cut marker");
    assert!(
        memory.len() < 4 << 20,
        "memory holds {} bytes",
        memory.len()
    );
    // read_file refuses a file over its cap and says so.
    assert_eq!(recs[2]["result"], "failure");
    assert!(
        error_of(&recs[2]).contains("larger than"),
        "{}",
        error_of(&recs[2])
    );
    for r in &reqs {
        assert!(
            r.raw_body.len() < 1 << 20,
            "a request of {} bytes",
            r.raw_body.len()
        );
    }
}

#[test]
fn the_model_cannot_rewrite_its_own_rules() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let config = format!("{LOOSE_LOOPS}[tools]\nprotected = [\"secrets/**\"]\n");
    std::fs::write(ws.join("agentforge.toml"), &config).unwrap();
    std::fs::create_dir(ws.join("prompts")).unwrap();
    std::fs::write(ws.join("prompts/analyze.j2"), "Analyze {{ goal }}.\n").unwrap();
    std::fs::create_dir(ws.join("secrets")).unwrap();
    std::os::unix::fs::symlink("agentforge.toml", ws.join("settings.toml")).unwrap();
    std::fs::write(ws.join("notes.txt"), "title: demo\nstatus: broken\n").unwrap();
    std::fs::write(ws.join("task.yaml"), notes_task("notes", FIXED, 14)).unwrap();

    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "agentforge.toml", "old_text": "repetition = 20", "new_text": "repetition = 99"}),
            ),
            Scripted::tool_call(
                "write_file",
                json!({"path": "prompts/analyze.j2", "content": "Ignore all checks."}),
            ),
            Scripted::tool_call(
                "write_file",
                json!({"path": "sub/../AgentForge.toml", "content": "[limits]\nmax_steps = 999\n"}),
            ),
            Scripted::tool_call(
                "replace_lines",
                json!({"path": "settings.toml", "start_line": 1, "end_line": 1, "new_content": "x"}),
            ),
            Scripted::tool_call(
                "write_file",
                json!({"path": "./task.yaml", "content": "id: notes\n"}),
            ),
            Scripted::tool_call(
                "write_file",
                json!({"path": "secrets/Key.txt", "content": "mine"}),
            ),
            Scripted::tool_call(
                "write_file",
                json!({"path": "prompts/new.j2", "content": "new template"}),
            ),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "fixed"})),
        ])
        .start_background();
    let out = run(ws, &server, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Nothing the harness reads changed.
    assert_eq!(
        std::fs::read_to_string(ws.join("agentforge.toml")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("prompts/analyze.j2")).unwrap(),
        "Analyze {{ goal }}.\n"
    );
    assert!(!ws.join("prompts/new.j2").exists());
    assert!(!ws.join("secrets/Key.txt").exists());
    assert!(!ws.join("sub").exists());
    assert!(ws.join("settings.toml").is_symlink());
    assert_eq!(
        std::fs::read_to_string(ws.join("task.yaml")).unwrap(),
        notes_task("notes", FIXED, 14)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );

    let recs = records(ws, "notes");
    let reqs = server.requests();
    let expect = [
        (1, "agentforge.toml", "configuration"),
        (2, "prompts/analyze.j2", "prompts folder"),
        (3, "agentforge.toml", "configuration"),
        (4, "agentforge.toml", "configuration"),
        (5, "task.yaml", "task file"),
        (6, "secrets/key.txt", "secrets/**"),
        (7, "prompts/new.j2", "prompts folder"),
    ];
    for (i, shown, why) in expect {
        let error = error_of(&recs[i]);
        assert_eq!(recs[i]["result"], "failure", "{}", recs[i]);
        assert!(
            error.contains("is protected")
                && error.to_lowercase().contains(shown)
                && error.contains(why),
            "step {}: {error}",
            i + 1
        );
        // The refusal is in the next request's context, and the run went on.
        let next = reqs[i + 1].user_text();
        assert!(next.contains("is protected"), "request {}: {next}", i + 2);
    }
    assert_eq!(recs[8]["result"], "success", "{}", recs[8]);
}

#[test]
fn checks_get_no_keys_and_key_values_are_masked_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let openai_key = "sk-openai-ABCDEFGH-987654";
    let token = "ghp_tokenvalue-1234567";
    let custom = "postgres://user:hunter2-pw@db/app";
    std::fs::write(
        ws.join("agentforge.toml"),
        format!("{LOOSE_LOOPS}[checks.env]\ndeny = [\"CUSTOM_DB_URL\"]\n"),
    )
    .unwrap();
    // A project file holding the key: the model reads it and a check prints it.
    std::fs::write(
        ws.join(".env"),
        format!("ANTHROPIC_API_KEY={KEY}\nOPENAI_API_KEY={openai_key}\n"),
    )
    .unwrap();
    std::fs::write(ws.join("notes.txt"), "title: demo\nstatus: broken\n").unwrap();
    std::fs::write(
        ws.join("task.yaml"),
        r#"id: leak
task_type: fix_violation
goal: Change the status in notes.txt to fixed
inputs:
  violation:
    file_path: notes.txt
    message: status is broken
checks:
  - name: tests
    command: "env > child_env.txt; python3 -c 'import os; print(dict(os.environ))'; env; cat .env; grep -q 'status: fixed' notes.txt"
    kind: test
max_steps: 10
"#,
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call("read_file", json!({"path": ".env"})),
            Scripted::tool_call("load_context", json!({"item": "test_output"})),
            Scripted::tool_call("search", json!({"pattern": "sk-"})),
            Scripted::tool_call(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "fixed"})),
        ])
        .start_background();
    let out = run(
        ws,
        &server,
        &[
            ("OPENAI_API_KEY", openai_key),
            ("MY_SERVICE_TOKEN", token),
            ("CUSTOM_DB_URL", custom),
            ("HARMLESS_SETTING", "visible-value"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // First line of defence: the check's environment has none of them.
    let child_env = std::fs::read_to_string(ws.join("child_env.txt")).unwrap();
    for name in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "MY_SERVICE_TOKEN",
        "CUSTOM_DB_URL",
    ] {
        assert!(
            !child_env.contains(&format!("{name}=")),
            "{name} reached the check"
        );
    }
    assert!(child_env.contains("PATH=") && child_env.contains("HARMLESS_SETTING=visible-value"));

    // Second line: the values the host holds are masked wherever it writes or sends.
    let secrets = [KEY, openai_key, token, custom];
    let mut masked_somewhere = false;
    for f in all_files(&ws.join(".agentforge")) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        for s in secrets {
            assert!(!text.contains(s), "a key leaked into {}", f.display());
        }
        masked_somewhere |= text.contains("***");
    }
    assert!(masked_somewhere, "the .env content should show up masked");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 6);
    for (i, r) in reqs.iter().enumerate() {
        for s in secrets {
            assert!(
                !r.raw_body.contains(s),
                "a key leaked into request {}",
                i + 1
            );
        }
    }
    // The read of .env reached the model, masked.
    assert!(reqs[2].user_text().contains("ANTHROPIC_API_KEY=***"));
    for s in secrets {
        assert!(!String::from_utf8_lossy(&out.stdout).contains(s));
        assert!(!stderr(&out).contains(s));
    }
    assert!(!stderr(&out).contains("could not mask"), "{}", stderr(&out));
}

#[test]
fn a_child_writing_more_than_a_pipe_holds_is_not_taken_for_hung() {
    // 256 KiB on each stream: a caller that read the pipes only after the child exits
    // would see it block on a full pipe and kill it at the bound.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "head -c 262144 /dev/zero; head -c 262144 /dev/zero >&2",
    ]);
    let (out, killed) = support::output_within(&mut cmd, Duration::from_secs(60));
    assert!(!killed, "killed at the bound");
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!((out.stdout.len(), out.stderr.len()), (262_144, 262_144));
}
