//! What a user (and the model) meets through the `agentforge` binary: errors printed
//! once, retries announced as they happen, `resume` keeping the task's provider,
//! task inputs checked against the task type, feedback on unknown tools, exit codes in
//! words, and log lines that stay bounded however large the model's arguments.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::notes::{agentforge, notes_task, notes_workspace, FIXED};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-SECRET-0123456789";

fn workspace() -> tempfile::TempDir {
    notes_workspace(&notes_task("notes", FIXED, 10))
}

/// The binary in `dir`, with none of the provider variables of the caller's shell.
fn cmd(dir: &Path) -> Command {
    agentforge(dir)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn task_dir(dir: &Path) -> std::path::PathBuf {
    dir.join(".agentforge/tasks/notes")
}

fn log_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(task_dir(dir).join("actions.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn records(dir: &Path) -> Vec<Value> {
    log_lines(dir)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A replay recording, one answer per step.
fn replay(dir: &Path, name: &str, answers: &[Value]) {
    let text: String = answers.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(dir.join(name), text).unwrap();
}

fn fast_retries(dir: &Path, retries: u32) {
    std::fs::write(
        dir.join("agentforge.toml"),
        format!("[provider]\nmax_retries = {retries}\ninitial_backoff_ms = 10\nmax_backoff_ms = 20\ntimeout_secs = 5\n"),
    )
    .unwrap();
}

#[test]
fn an_unreadable_task_file_is_reported_once() {
    let dir = workspace();
    let out = cmd(dir.path())
        .args(["run", "missing.yaml", "--replay", "none.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("cannot read task file missing.yaml"), "{err}");
    // The OS error is the message's own text and its source: printed once.
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
}

#[test]
fn retries_are_announced_and_the_final_error_names_resume() {
    let dir = workspace();
    fast_retries(dir.path(), 2);
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--provider", "openai", "--model", "m"])
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let retries: Vec<&str> = err.lines().filter(|l| l.starts_with("retry: ")).collect();
    assert_eq!(retries.len(), 2, "one line per retry:\n{err}");
    for (i, line) in retries.iter().enumerate() {
        assert!(
            line.contains(&format!(
                "openai: attempt {}/3 failed (connection failed",
                i + 1
            )),
            "{line}"
        );
        assert!(line.contains("; retrying in 0.0"), "{line}");
    }
    assert!(err.contains("giving up after 3 attempts"), "{err}");
    assert!(err.contains("agentforge resume notes"), "{err}");
    assert!(!err.contains(KEY), "{err}");
    assert!(log_lines(dir.path()).is_empty());
}

#[test]
fn resume_uses_the_provider_and_model_the_task_ran_with() {
    let dir = workspace();
    fast_retries(dir.path(), 0);
    // Step 1 is answered, step 2's call is rejected: the run stops with one step.
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script([
            Scripted::tool_call("run_tests", json!({})),
            Scripted::status(400),
        ])
        .start_background();
    let mut c = cmd(dir.path());
    c.args([
        "run",
        "task.yaml",
        "--provider",
        "openai",
        "--model",
        "test-model",
    ]);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(records(dir.path()).len(), 1);
    let recorded = std::fs::read_to_string(task_dir(dir.path()).join("provider.yaml")).unwrap();
    assert!(recorded.contains("kind: openai"), "{recorded}");
    assert!(recorded.contains("model: test-model"), "{recorded}");
    assert!(recorded.contains(&server.base_url()), "{recorded}");
    assert!(!recorded.contains(KEY), "never the key: {recorded}");

    // No flags, no base URL in the environment, only the key it needs: the same
    // provider, endpoint and model (not the default anthropic asking for its key).
    server.push(Scripted::tool_call(
        "edit_file",
        json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
    ));
    server.push(Scripted::tool_call("complete", json!({"summary": "fixed"})));
    let out = cmd(dir.path())
        .args(["resume", "notes"])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("with openai model `test-model`"),
        "{}",
        stderr(&out)
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    assert!(reqs.iter().all(|r| r.model() == Some("test-model")));
    assert_eq!(records(dir.path()).len(), 3);

    // A flag still overrides the record.
    let out = cmd(dir.path())
        .args(["resume", "notes", "--provider", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
}

/// Needs the task types to declare their inputs: the built-in schema plugins do so
/// through the plugin API's input schema (wired in `host/plugin-host/src/task_types.rs`).
#[test]
fn a_misspelt_input_key_is_refused_with_a_suggestion() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("typo.yaml"),
        notes_task("notes", FIXED, 10).replace("file_path: notes.txt", "file_pth: notes.txt"),
    )
    .unwrap();
    replay(
        dir.path(),
        "s.jsonl",
        &[json!({"tool": "escalate", "arguments": {"reason": "x"}})],
    );
    let out = cmd(dir.path())
        .args(["run", "typo.yaml", "--replay", "s.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("typo.yaml"), "{err}");
    assert!(err.contains("inputs.violation"), "{err}");
    assert!(err.contains("did you mean `file_path`?"), "{err}");
    assert!(!task_dir(dir.path()).exists(), "no task is created");
}

#[test]
fn an_unknown_tool_gets_only_the_tools_of_the_phase() {
    let dir = workspace();
    replay(
        dir.path(),
        "s.jsonl",
        &[
            json!({"tool": "read_fil", "arguments": {"path": "notes.txt"}}),
            json!({"tool": "escalate", "arguments": {"reason": "stop"}}),
        ],
    );
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "s.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let recs = records(dir.path());
    assert_eq!(recs[0]["phase"], "analyze");
    let error = recs[0]["error"].as_str().unwrap();
    assert!(
        error.contains(
            "there is no tool `read_fil` (did you mean `read_file`?); call one of: read_file"
        ),
        "{error}"
    );
    // analyze offers no edits: they are not named.
    for not_offered in ["edit_file", "write_file", "replace_lines", "complete"] {
        assert!(!error.contains(not_offered), "{not_offered} in: {error}");
    }
    // The next step's feedback is the same text.
    let feedback = recs[1]["state_after"]["feedback"]
        .as_str()
        .unwrap_or_default();
    assert!(recs[0]["state_after"]["feedback"]
        .as_str()
        .unwrap()
        .contains("call one of: read_file"));
    assert!(!feedback.contains("edit_file"), "{feedback}");
}

#[test]
fn the_model_reads_exit_codes_in_words() {
    let dir = workspace();
    replay(
        dir.path(),
        "s.jsonl",
        &[
            json!({"tool": "run_tests", "arguments": {}}),
            json!({"tool": "load_context", "arguments": {"item": "test_output"}}),
            json!({"tool": "escalate", "arguments": {"reason": "stop"}}),
        ],
    );
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "s.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let outputs = task_dir(dir.path()).join("artifacts/outputs");
    let mut seen = 0;
    for e in std::fs::read_dir(&outputs).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        assert!(text.contains("(exit 1, "), "{text}");
        assert!(!text.contains("Some("), "{text}");
        seen += 1;
    }
    assert_eq!(seen, 1);
    // What `load_context test_output` put before the model.
    let memory = std::fs::read_to_string(task_dir(dir.path()).join("working_memory.yaml")).unwrap();
    assert!(memory.contains("exit 1"), "{memory}");
    assert!(!memory.contains("Some("), "{memory}");
}

#[test]
fn a_huge_argument_is_bounded_in_the_log_and_the_task_still_resumes() {
    let dir = workspace();
    let big = format!("BEGIN\n{}\nEND\n", "0123456789".repeat(10_000));
    replay(
        dir.path(),
        "s.jsonl",
        &[
            json!({"tool": "read_file", "arguments": {"path": "notes.txt"}}),
            json!({"tool": "write_file", "arguments": {"path": "big.txt", "content": big}}),
            json!({"tool": "edit_file", "arguments": {"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}}),
            json!({"tool": "complete", "arguments": {"summary": "fixed"}}),
        ],
    );
    // Dies right after step 2's line is on disk, before state.yaml catches up.
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "s.jsonl"])
        .env("AGENTFORGE_FAULT", "after_log@2")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    // The file got every byte; the log line only a bounded view of them.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("big.txt")).unwrap(),
        big
    );
    let lines = log_lines(dir.path());
    assert_eq!(lines.len(), 2);
    assert!(
        lines[1].len() < 32 * 1024,
        "log line of {} bytes",
        lines[1].len()
    );
    let rec: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(rec["action"], "write_file");
    let content = rec["parameters"]["content"].as_str().unwrap();
    assert!(content.starts_with("BEGIN"), "{content}");
    assert!(content.trim_end().ends_with("END"), "{content}");
    assert!(
        content.contains(&format!("{} bytes, sha256:", big.len())),
        "{content}"
    );

    // Resume (the recorded replay provider, no flags): the state comes back from the
    // bounded record and the task completes with steps 3 and 4 only.
    let out = cmd(dir.path()).args(["resume", "notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rebuilt from the record of step 2"),
        "{}",
        stderr(&out)
    );
    let steps: Vec<u64> = records(dir.path())
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4]);
    assert!(log_lines(dir.path()).iter().all(|l| l.len() < 32 * 1024));
}
