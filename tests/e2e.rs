//! End-to-end tests: whole tasks through the `agentforge` binary, with the model's side
//! played by scripted Anthropic / OpenAI-compatible servers on 127.0.0.1 (real HTTP,
//! real request validation) or by the replay provider.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-SECRET-0123456789";

const NOTES_TASK: &str = r#"id: notes
task_type: fix_violation
goal: Change the status in notes.txt to fixed
inputs:
  violation:
    file_path: notes.txt
    message: status is broken
checks:
  - name: tests
    command: "grep -q 'status: fixed' notes.txt"
    kind: test
  - name: format
    command: "grep -q '^title:' notes.txt"
    kind: check
max_steps: 10
"#;

fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("notes.txt"),
        "title: demo\nstatus: broken\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("task.yaml"), NOTES_TASK).unwrap();
    tmp
}

fn cmd(dir: &Path) -> Command {
    support::notes::agentforge(dir)
}

fn run_with_server(dir: &Path, server: &ScriptedServer, provider: &str, extra: &[&str]) -> Output {
    let mut c = cmd(dir);
    c.args([
        "run",
        "task.yaml",
        "--provider",
        provider,
        "--model",
        "test-model",
    ]);
    c.args(extra);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    c.output().unwrap()
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

/// The edit that fixes `notes.txt`.
fn fix_edit() -> Scripted {
    Scripted::tool_call(
        "edit_file",
        json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
    )
}

fn happy_script() -> Vec<Scripted> {
    vec![
        Scripted::tool_call("run_tests", json!({})).with_usage(1500, 20),
        fix_edit().with_usage(1600, 40),
        Scripted::tool_call("complete", json!({"summary": "status fixed"})).with_usage(1550, 15),
    ]
}

fn assert_happy_run(dir: &Path, server: &ScriptedServer, out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert!(r.is_valid(), "invalid request: {:?}", r.validation_error);
        // Exactly one system and one user message: no history, ever.
        assert_eq!(r.user_text().matches("# Context").count(), 1);
        assert!(!r.tool_names().is_empty());
    }
    // Step 3's context reflects step 2's edit, rebuilt from disk.
    assert!(
        reqs[2].user_text().contains("status: fixed"),
        "{}",
        reqs[2].user_text()
    );
    let recs = records(dir, "notes");
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[1]["usage"]["input_tokens"], 1600);
    assert_eq!(recs[0]["action"], "run_tests");
    assert!(recs
        .iter()
        .all(|r| r["context_tokens"].as_u64().unwrap() > 0));
    // The key is never written anywhere.
    for f in all_files(dir) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "API key leaked into {}",
            f.display()
        );
    }
    assert!(!stderr(out).contains(KEY));
}

#[test]
fn openai_compatible_provider_runs_a_task_to_completion() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(happy_script())
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_happy_run(dir.path(), &server, &out);
    let reqs = server.requests();
    assert_eq!(reqs[0].messages().len(), 2);
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(reqs[0].model(), Some("test-model"));
}

#[test]
fn anthropic_provider_runs_a_task_to_completion() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key(KEY)
        .script(happy_script())
        .start_background();
    let out = run_with_server(dir.path(), &server, "anthropic", &[]);
    assert_happy_run(dir.path(), &server, &out);
    let reqs = server.requests();
    assert_eq!(
        reqs[0].messages().len(),
        1,
        "one user message + top-level system"
    );
    assert_eq!(reqs[0].header("x-api-key"), Some(KEY));
    assert!(reqs[0].system_text().contains("Phase: ANALYZE"));
}

#[test]
fn invalid_replies_are_fed_back_and_three_in_a_row_escalate() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::text("I think I should look at the file."),
            Scripted::malformed("read_file", "{\"path\": notes.txt"),
            Scripted::tool_call("frobnicate", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[1].user_text().contains("no tool call"),
        "{}",
        reqs[1].user_text()
    );
    assert!(
        reqs[2].user_text().contains("not valid JSON"),
        "{}",
        reqs[2].user_text()
    );
    let recs = records(dir.path(), "notes");
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r["result"] == "failure"));
    assert!(recs[2]["error"].as_str().unwrap().contains("frobnicate"));
    let state =
        std::fs::read_to_string(dir.path().join(".agentforge/tasks/notes/state.yaml")).unwrap();
    assert_eq!(state_of(&state)["status"], "escalated", "{state}");
}

#[test]
fn a_bad_reply_then_a_good_one_recovers() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("edit_file", json!({"path": "notes.txt"})),
            Scripted::tool_call("run_tests", json!({})),
            fix_edit(),
            Scripted::tool_call("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = server.requests();
    // edit_file is not offered while analyzing; the next context says so.
    assert!(
        reqs[1].user_text().contains("edit_file"),
        "{}",
        reqs[1].user_text()
    );
    assert!(reqs[1]
        .user_text()
        .contains("not available in phase analyze"));
}

#[test]
fn complete_is_refused_until_verification_passes_and_the_refusal_is_shown() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call("complete", json!({"summary": "done, trust me"})),
            fix_edit(),
            Scripted::tool_call("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recs = records(dir.path(), "notes");
    assert_eq!(recs[1]["action"], "complete");
    assert_eq!(recs[1]["result"], "skipped");
    let user = server.requests()[2].user_text();
    assert!(user.contains("complete refused"), "{user}");
}

#[test]
fn an_edit_that_breaks_a_passing_check_is_reverted() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_check", json!({})),
            // Fixes the status but deletes the title line: `format` regresses.
            Scripted::tool_call(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "title: demo\nstatus: broken", "new_text": "status: fixed"}),
            ),
            fix_edit(),
            Scripted::tool_call("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let recs = records(dir.path(), "notes");
    assert_eq!(recs[1]["result"], "failure");
    assert!(
        recs[1]["summary"].as_str().unwrap().contains("reverted"),
        "{}",
        recs[1]
    );
    assert!(server.requests()[2].user_text().contains("reverted"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
}

#[test]
fn paths_outside_the_workspace_are_refused_and_the_run_goes_on() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("read_file", json!({"path": "../../etc/passwd"})),
            Scripted::tool_call("read_file", json!({"path": "/etc/passwd"})),
            Scripted::tool_call("escalate", json!({"reason": "cannot see the file"})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let recs = records(dir.path(), "notes");
    assert_eq!(recs[0]["result"], "failure");
    assert_eq!(recs[1]["result"], "failure");
    let user = server.requests()[1].user_text();
    assert!(!user.contains("root:x:0"), "outside content leaked");
}

#[test]
fn text_mode_parses_a_fenced_action_block() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[provider]\ntool_mode = \"text\"\n",
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .tools(support::scripted_server::ToolsExpectation::Absent)
        .script(vec![
            Scripted::action_block("run_tests", json!({})),
            Scripted::action_block(
                "edit_file",
                json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
            ),
            Scripted::action_block("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(server.requests()[0].user_text().contains("```action"));
}

#[test]
fn a_rejected_key_names_the_variable_and_loses_nothing() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .api_key("the-right-key")
        .script(happy_script())
        .start_background();
    let out = run_with_server(dir.path(), &server, "anthropic", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(KEY));
    // The task exists with no step recorded; it can be resumed once the key is fixed.
    assert!(records(dir.path(), "notes").is_empty());
    assert!(dir
        .path()
        .join(".agentforge/tasks/notes/state.yaml")
        .is_file());
}

#[test]
fn a_missing_key_is_a_configuration_error() {
    let dir = workspace();
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--provider", "anthropic"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unreachable_endpoint_fails_cleanly_and_the_task_resumes_later() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[provider]\nmax_retries = 1\ninitial_backoff_ms = 10\nmax_backoff_ms = 20\ntimeout_secs = 5\n",
    )
    .unwrap();
    // Step 1 via replay, then the endpoint is down.
    std::fs::write(
        dir.path().join("one.jsonl"),
        "{\"tool\":\"run_tests\",\"arguments\":{}}\n",
    )
    .unwrap();
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "one.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(records(dir.path(), "notes").len(), 1);
    let out = cmd(dir.path())
        .args(["resume", "notes", "--provider", "openai"])
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1:9"), "{}", stderr(&out));
    assert_eq!(
        records(dir.path(), "notes").len(),
        1,
        "nothing recorded is lost"
    );
    // Later, with a model that answers, the task resumes at step 2.
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(happy_script().into_iter().skip(1))
        .start_background();
    let mut c = cmd(dir.path());
    c.args(["resume", "notes", "--provider", "openai"]);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let steps: Vec<u64> = records(dir.path(), "notes")
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3]);
}

#[test]
fn a_hanging_check_times_out() {
    let dir = workspace();
    let task = NOTES_TASK.replace(
        "command: \"grep -q '^title:' notes.txt\"",
        "command: sleep 600\n    timeout_secs: 1",
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    std::fs::write(
        dir.path().join("s.jsonl"),
        "{\"tool\":\"run_check\",\"arguments\":{\"name\":\"format\"}}\n{\"tool\":\"escalate\",\"arguments\":{\"reason\":\"check hangs\"}}\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "s.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let recs = records(dir.path(), "notes");
    assert!(
        recs[0]["summary"].as_str().unwrap().contains("timed out"),
        "{}",
        recs[0]
    );
}

#[test]
fn bad_input_gets_exit_64_and_a_message_naming_the_problem() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "id: x\ntask_type: fix_violation\ngoal: [unclosed\n",
    )
    .unwrap();
    let out = cmd(dir.path())
        .args([
            "run",
            "bad.yaml",
            "--provider",
            "replay",
            "--replay",
            "none.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("bad.yaml") && stderr(&out).contains("line"),
        "{}",
        stderr(&out)
    );

    std::fs::write(
        dir.path().join("t2.yaml"),
        NOTES_TASK.replace("fix_violation", "refactor"),
    )
    .unwrap();
    std::fs::write(dir.path().join("r.jsonl"), "").unwrap();
    let out = cmd(dir.path())
        .args(["run", "t2.yaml", "--replay", "r.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("unknown task type `refactor`"),
        "{}",
        stderr(&out)
    );

    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[limits]\nmax_steps = \"many\"\n",
    )
    .unwrap();
    let out = cmd(dir.path())
        .args(["run", "task.yaml", "--replay", "r.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("agentforge.toml") && stderr(&out).contains("max_steps"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(dir.path().join("agentforge.toml")).unwrap();

    let out = cmd(dir.path())
        .args(["run", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(64),
        "clap usage errors map to 64, not 2"
    );

    let out = cmd(dir.path())
        .args(["task", "show", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("no task `nope`"), "{}", stderr(&out));
}

#[test]
fn task_commands_and_context_report() {
    let dir = workspace();
    let out = cmd(dir.path())
        .args(["task", "new", "task.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = cmd(dir.path())
        .args(["task", "list", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["id"], "notes");
    assert_eq!(list[0]["status"], "running");
    let out = cmd(dir.path())
        .args(["context", "notes", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ctx: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(ctx["total_tokens"].as_u64().unwrap() <= 8000);
    assert!(ctx["user"].as_str().unwrap().contains("status: broken"));
    assert!(ctx["sections"].as_array().unwrap().len() >= 5);
    let out = cmd(dir.path()).args(["context", "notes"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("current_state"), "{text}");
}

#[test]
fn the_bundled_example_runs_for_real_with_the_replay_provider() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
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
        .arg("run")
        .arg(example.join("task.yaml"))
        .arg("--replay")
        .arg(example.join("session.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lib = std::fs::read_to_string(tmp.path().join("src/lib.rs")).unwrap();
    assert!(lib.contains("text.split_whitespace().count()"));
    let recs = records(tmp.path(), "fix-word-count");
    let results: Vec<&str> = recs.iter().map(|r| r["result"].as_str().unwrap()).collect();
    // run_tests fails, the first edit misses (wrong quotes), read, the fix, complete.
    assert_eq!(
        results,
        ["failure", "failure", "success", "success", "success"]
    );
    assert!(
        recs[1]["error"].as_str().unwrap().contains("old_text"),
        "{}",
        recs[1]
    );
}

/// What the model sees after a failing test run and a failed edit: reviewed as a snapshot
/// so that any change to the rendered context is deliberate.
#[test]
fn rendered_context_after_two_steps_snapshot() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("two.jsonl"),
        concat!(
            "{\"tool\":\"run_tests\",\"arguments\":{}}\n",
            "{\"tool\":\"edit_file\",\"arguments\":{\"path\":\"notes.txt\",\"old_text\":\"status: brokn\",\"new_text\":\"status: fixed\"}}\n",
        ),
    )
    .unwrap();
    let out = cmd(dir.path())
        .args([
            "run",
            "task.yaml",
            "--replay",
            "two.jsonl",
            "--max-steps",
            "10",
        ])
        .output()
        .unwrap();
    // The recording ends after two steps: the run stops with a replay error, state intact.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(records(dir.path(), "notes").len(), 2);
    let out = cmd(dir.path()).args(["context", "notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

/// The model loops on a failing edit, is warned with suggestions, keeps trying and is
/// blocked, then changes approach and completes (issue 4's end-to-end scenario).
#[test]
fn a_looping_model_is_warned_blocked_and_recovers() {
    let dir = workspace();
    let bad_edit =
        json!({"path": "notes.txt", "old_text": "status: brokn", "new_text": "status: fixed"});
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call("edit_file", bad_edit.clone()),
            Scripted::tool_call("edit_file", bad_edit.clone()),
            Scripted::tool_call("edit_file", bad_edit.clone()),
            // Warned; tries the very same call once more: refused at once.
            Scripted::tool_call("edit_file", bad_edit.clone()),
            // Changes approach: line-based replacement.
            Scripted::tool_call(
                "replace_lines",
                json!({"path": "notes.txt", "start_line": 2, "end_line": 2, "new_content": "status: fixed"}),
            ),
            Scripted::tool_call("complete", json!({"summary": "fixed with replace_lines"})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = server.requests();
    // After the third identical failure the next context carries the warning and suggestions.
    let warned = reqs[4].user_text();
    assert!(warned.contains("identical_action"), "{warned}");
    assert!(
        warned.contains("replace_lines"),
        "suggestion to change approach: {warned}"
    );
    let recs = records(dir.path(), "notes");
    assert_eq!(
        recs[3]["loop_detection"]["loop_type"], "identical_action",
        "{}",
        recs[3]
    );
    // The repeat was refused without running.
    assert_eq!(recs[4]["action"], "edit_file");
    assert_eq!(recs[4]["result"], "skipped");
    assert!(
        recs[4]["error"].as_str().unwrap().contains("blocked"),
        "{}",
        recs[4]
    );
    assert_eq!(recs[5]["result"], "success");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
    // The block persists in the state across restarts.
    let state =
        std::fs::read_to_string(dir.path().join(".agentforge/tasks/notes/state.yaml")).unwrap();
    assert!(state.contains("blocked_actions"), "{state}");
    assert!(state.contains("edit_file:notes.txt#"), "{state}");

    // Post-mortem: the same detection from the recorded log, offline.
    let out = cmd(dir.path())
        .args(["inspect", "loops", "notes", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found[0]["loop_type"], "identical_action", "{found}");
    assert_eq!(found[0]["step"], 4);
}

#[test]
fn a_planned_task_shows_the_current_branch_and_ticks_subtasks_off() {
    let dir = workspace();
    let task = NOTES_TASK.replace(
        "inputs:\n",
        "inputs:\n  plan:\n    subtasks:\n      - Fix the status line\n      - Keep the title line intact\n",
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            fix_edit(),
            Scripted::tool_call("finish_subtask", json!({"summary": "status fixed"})),
            Scripted::tool_call("finish_subtask", json!({"summary": "title kept"})),
            Scripted::tool_call("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = server.requests();
    let first = reqs[0].user_text();
    assert!(
        first.contains("focus:") && first.contains("Fix the status line"),
        "{first}"
    );
    assert!(reqs[2].tool_names().contains(&"finish_subtask".to_string()));
    let after = reqs[3].user_text();
    assert!(after.contains("Keep the title line intact"), "{after}");
    let state =
        std::fs::read_to_string(dir.path().join(".agentforge/tasks/notes/state.yaml")).unwrap();
    let history = &state_of(&state)["phase_history"];
    assert!(
        history
            .as_array()
            .is_some_and(|h| h.iter().any(|t| t["to"] == "complete")),
        "{state}"
    );
}

#[test]
fn a_task_making_progress_gets_its_budget_extended() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("task.yaml"),
        NOTES_TASK.replace("max_steps: 10", "max_steps: 3"),
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call("read_file", json!({"path": "notes.txt"})),
            fix_edit(),
            Scripted::tool_call("complete", json!({})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(server.requests()[3]
        .user_text()
        .contains("step budget extended"));
    let recs = records(dir.path(), "notes");
    assert_eq!(recs.len(), 4);
    // Base 3, ceiling 2 x 3 = 6: the extension of 5 is capped.
    assert_eq!(recs[2]["state_after"]["max_steps"], 6);
}

#[test]
fn a_task_without_progress_stops_at_its_budget() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("task.yaml"),
        NOTES_TASK.replace("max_steps: 10", "max_steps: 3"),
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call("read_file", json!({"path": "notes.txt"})),
            Scripted::tool_call("search", json!({"pattern": "status"})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let state =
        std::fs::read_to_string(dir.path().join(".agentforge/tasks/notes/state.yaml")).unwrap();
    assert_eq!(state_of(&state)["status"], "budget_exhausted", "{state}");
}

#[test]
fn unmatched_output_falls_back_to_model_facts_capped_at_0_8() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("agentforge.toml"),
        "[understanding]\nmodel_fallback = true\n",
    )
    .unwrap();
    let task = NOTES_TASK.replace(
        "command: \"grep -q 'status: fixed' notes.txt\"",
        "command: \"grep -q 'status: fixed' notes.txt || { echo 'notes.txt:2: status still broken'; exit 1; }\"",
    );
    std::fs::write(dir.path().join("task.yaml"), task).unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(vec![
            Scripted::tool_call("run_tests", json!({})),
            Scripted::tool_call(
                "report_facts",
                json!({"facts": [{"category": "error", "statement": "notes.txt line 2 still says broken", "confidence": 0.95}]}),
            ),
            Scripted::tool_call("escalate", json!({"reason": "stop here"})),
        ])
        .start_background();
    let out = run_with_server(dir.path(), &server, "openai", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1].tool_names(), ["report_facts"]);
    assert!(reqs[1].user_text().contains("status still broken"));
    let ctx = reqs[2].user_text();
    assert!(
        ctx.contains("notes.txt line 2 still says broken (conf: 0.8)"),
        "{ctx}"
    );
}

/// The token counts a command makes are kept in the cache folder
/// (`token-counts-o200k.bin`) for later ones, which then build the first prompt without
/// waiting for the tokenizer: the same prompt, counted the same, as with no counts kept.
#[test]
fn kept_token_counts_give_the_same_prompt_and_counts() {
    let dir = workspace();
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = cmd(dir.path())
            .args(args)
            .env("AGENTFORGE_CACHE_DIR", cache.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["task", "new", "task.yaml"]);
    let file = cache.path().join("token-counts-o200k.bin");
    let _ = std::fs::remove_file(&file);
    let cold: Value = serde_json::from_str(&run(&["--json", "context", "notes"])).unwrap();
    let kept = std::fs::read(&file).unwrap();
    assert!(
        kept.len() > 16 + 20 && (kept.len() - 16).is_multiple_of(20),
        "{}",
        kept.len()
    );
    let warm: Value = serde_json::from_str(&run(&["--json", "context", "notes"])).unwrap();
    assert_eq!(warm, cold);
    assert!(cold["total_tokens"].as_u64().unwrap() > 100, "{cold}");
}

/// `state.yaml`'s text as a tree, read as YAML (as any reader of the file would), after
/// checking that a YAML reader also reads it as the typed state (as an earlier version of
/// the host, reading only YAML, would).
fn state_of(text: &str) -> Value {
    let typed: Result<agentforge::state_store::TaskState, _> = serde_yaml_ng::from_str(text);
    if let Err(e) = typed {
        panic!("state.yaml reads as a TaskState with a YAML reader: {e}\n{text}");
    }
    serde_yaml_ng::from_str(text)
        .unwrap_or_else(|e| panic!("state.yaml reads as YAML: {e}\n{text}"))
}
