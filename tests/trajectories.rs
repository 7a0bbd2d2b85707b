//! Trajectories through the binary: each step keeps the exact request it sent and the raw
//! reply (compressed, keys and known secrets masked); `run --record` turns a live run
//! (a scripted OpenAI-compatible server on 127.0.0.1) into a session the replay provider
//! plays back to the same end; `show` prints what the model saw and answered; bad input
//! gets a clear error.

use crate::support;

use std::io::Read;
use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-SECRET-0123456789";
/// A secret the host masks (its variable's name says it holds one), that the model
/// repeats in an answer.
const TOKEN: &str = "tok-SERVICE-9876543210";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn workspace() -> tempfile::TempDir {
    support::notes::notes_workspace(&support::notes::notes_task(
        "notes",
        support::notes::FIXED,
        12,
    ))
}

/// The looping run of `e2e.rs` (a failing edit repeated until warned and blocked, then a
/// change of approach), ending with a summary that quotes markup and a secret.
fn script() -> Vec<Scripted> {
    let bad_edit =
        json!({"path": "notes.txt", "old_text": "status: brokn", "new_text": "status: fixed"});
    vec![
        Scripted::tool_call("run_tests", json!({})).with_usage(1500, 20),
        Scripted::tool_call("edit_file", bad_edit.clone()).with_usage(1510, 30),
        Scripted::tool_call("edit_file", bad_edit.clone()).with_usage(1520, 30),
        Scripted::tool_call("edit_file", bad_edit.clone()).with_usage(1530, 30),
        Scripted::tool_call("edit_file", bad_edit).with_usage(1540, 30),
        Scripted::tool_call(
            "replace_lines",
            json!({"path": "notes.txt", "start_line": 2, "end_line": 2, "new_content": "status: fixed"}),
        )
        .with_usage(1550, 40),
        Scripted::tool_call(
            "complete",
            json!({"summary": format!("fixed <script>alert('x')</script> with {TOKEN}")}),
        )
        .with_usage(1560, 25),
    ]
}

/// `agentforge` in `dir` with the scripted server's variables and the secret set.
fn live_run(dir: &Path, server: &ScriptedServer, extra: &[&str]) -> Output {
    let mut c = support::notes::agentforge(dir);
    c.args([
        "run",
        "task.yaml",
        "--provider",
        "openai",
        "--model",
        "test-model",
    ])
    .args(extra)
    .env("MY_SERVICE_TOKEN", TOKEN);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join(".agentforge/tasks/notes/actions.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A step's trajectory (its member of the task's pack), decompressed.
fn trajectory(dir: &Path, record: &Value) -> (Value, Vec<u8>) {
    let rel = record["trajectory"]["file"].as_str().expect("a trajectory");
    assert_eq!(rel, "trajectories/steps.jsonl.gz");
    let pack = std::fs::read(dir.join(".agentforge/tasks/notes").join(rel)).unwrap();
    let offset = record["trajectory"]["offset"].as_u64().expect("an offset") as usize;
    let bytes = record["trajectory"]["bytes"].as_u64().unwrap() as usize;
    let compressed = &pack[offset..offset + bytes];
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(compressed)
        .read_to_end(&mut raw)
        .unwrap();
    assert_eq!(record["trajectory"]["raw_bytes"], raw.len() as u64);
    assert_eq!(record["trajectory"]["bytes"], compressed.len() as u64);
    (serde_json::from_slice(&raw).unwrap(), raw)
}

/// What two runs must agree on: each step's call and outcome, and the end state.
fn outcome(dir: &Path) -> Value {
    let recs = records(dir);
    let state: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(dir.join(".agentforge/tasks/notes/state.yaml")).unwrap(),
    )
    .unwrap();
    json!({
        "steps": recs.iter().map(|r| json!({
            "step": r["step"], "action": r["action"], "parameters": r["parameters"],
            "result": r["result"], "summary": r["summary"], "usage": r["usage"],
            "context_tokens": r["context_tokens"], "loop": r["loop_detection"]["loop_type"],
        })).collect::<Vec<_>>(),
        "status": state["status"],
        "step": state["step"],
        "phase": state["phase"],
        "files_modified": state["files_modified"],
        "verification": state["verification"],
        "tokens": state["tokens"],
        "blocked": state["blocked_actions"],
        "facts": state["facts"].as_array().map(|f| f.iter().map(|f| f["statement"].clone()).collect::<Vec<_>>()),
        "notes": std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
    })
}

#[test]
fn a_recorded_live_run_replays_offline_to_the_same_end() {
    let live = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(script())
        .start_background();
    let session = live.path().join("recorded.jsonl");
    let out = live_run(
        live.path(),
        &server,
        &["--record", session.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 7);

    // Each step's trajectory holds the request exactly as the server received it and
    // the raw reply; the key and the secret appear nowhere in it.
    let recs = records(live.path());
    assert_eq!(recs.len(), 7);
    for (r, req) in recs.iter().zip(&reqs) {
        let (t, raw) = trajectory(live.path(), r);
        assert_eq!(t["step"], r["step"]);
        let x = &t["exchange"];
        assert_eq!(x["request"]["method"], "POST");
        assert_eq!(
            x["request"]["url"],
            format!("{}/chat/completions", server.base_url())
        );
        assert_eq!(x["request"]["body"].as_str().unwrap(), req.raw_body);
        assert_eq!(x["request"]["headers"]["authorization"], "***");
        assert_eq!(x["reply"]["status"], 200);
        let reply: Value = serde_json::from_str(x["reply"]["body"].as_str().unwrap()).unwrap();
        assert!(reply["choices"][0]["message"]["tool_calls"].is_array());
        let text = String::from_utf8_lossy(&raw);
        assert!(!text.contains(KEY), "the key in step {}", r["step"]);
        assert!(!text.contains(TOKEN), "the secret in step {}", r["step"]);
    }
    let (last, _) = trajectory(live.path(), &recs[6]);
    let reply = last["exchange"]["reply"]["body"].as_str().unwrap();
    assert!(reply.contains("***"), "{reply}");

    // The session: one line per step, in the replay provider's format.
    let lines: Vec<Value> = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[5]["tool"], "replace_lines");
    assert_eq!(lines[0]["usage"]["input_tokens"], 1500);
    assert!(!std::fs::read_to_string(&session).unwrap().contains(TOKEN));

    // Replayed offline, in a fresh copy of the workspace: the same end.
    let offline = workspace();
    let out = support::notes::agentforge(offline.path())
        .args(["run", "task.yaml", "--replay", session.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (a, b) = (outcome(live.path()), outcome(offline.path()));
    assert_eq!(a, b);
    assert_eq!(a["status"], "complete");
    assert_eq!(a["steps"][3]["loop"], "identical_action");
    // The replayed run's trajectories say where its answers came from.
    let (t, _) = trajectory(offline.path(), &records(offline.path())[1]);
    assert_eq!(t["exchange"]["request"]["method"], "REPLAY");
    assert!(
        t["exchange"]["request"]["url"]
            .as_str()
            .unwrap()
            .ends_with("recorded.jsonl#2"),
        "{t}"
    );
}

/// A run killed between steps, resumed with `--record`, still gives a whole session:
/// the steps before the kill come from their trajectories.
#[test]
fn record_on_resume_writes_the_whole_session() {
    let dir = workspace();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .script(script())
        .start_background();
    let out = live_run(dir.path(), &server, &["--max-steps", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let session = dir.path().join("s.jsonl");
    let mut c = support::notes::agentforge(dir.path());
    c.args([
        "resume",
        "notes",
        "--max-steps",
        "12",
        "--record",
        session.to_str().unwrap(),
    ])
    .env("MY_SERVICE_TOKEN", TOKEN);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&session).unwrap();
    let tools: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["tool"].to_string())
        .collect();
    assert_eq!(
        tools,
        [
            "\"run_tests\"",
            "\"edit_file\"",
            "\"edit_file\"",
            "\"edit_file\"",
            "\"edit_file\"",
            "\"replace_lines\"",
            "\"complete\""
        ]
    );
}

/// The replayed run of the looping script, for `show`.
fn replayed() -> tempfile::TempDir {
    let dir = workspace();
    let lines: Vec<String> = script()
        .iter()
        .map(|s| match s {
            Scripted::ToolCall {
                name,
                arguments,
                usage,
            } => json!({"tool": name, "arguments": arguments,
                        "usage": {"input_tokens": usage.0, "output_tokens": usage.1}})
            .to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    std::fs::write(dir.path().join("session.jsonl"), lines.join("\n")).unwrap();
    let out = support::notes::agentforge(dir.path())
        .args(["run", "task.yaml", "--replay", "session.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    dir
}

#[test]
fn show_prints_what_the_model_saw_and_answered() {
    let dir = replayed();
    let show = |args: &[&str]| {
        support::notes::agentforge(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = show(&["show", "notes", "--step", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The recording's path is the temporary folder's: not part of the snapshot.
    let text = text.replace(&dir.path().display().to_string(), "[workspace]");
    insta::assert_snapshot!(text);

    // Default: the last step. As JSON too.
    let out = show(&["--json", "show", "notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["step"], 7);
    assert_eq!(v["last_step"], 7);
    assert_eq!(v["answer"]["kind"], "tool_call");
    assert_eq!(v["answer"]["name"], "complete");
    assert!(v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "complete"));
    assert!(v["user"].as_str().unwrap().contains("# Context"), "{v}");
    assert!(v["stored_bytes"].as_u64().unwrap() < v["raw_bytes"].as_u64().unwrap());
}

#[test]
fn bad_input_gets_a_clear_error_and_no_panic() {
    let dir = replayed();
    let run = |args: &[&str]| {
        support::notes::agentforge(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["show", "nope"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no task `nope`") && stderr(&out).contains("agentforge task list"),
        "{}",
        stderr(&out)
    );
    for step in ["8", "0"] {
        let out = run(&["show", "notes", "--step", step]);
        assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("--step {step} is out of range"))
                && stderr(&out).contains("steps 1 to 7"),
            "{}",
            stderr(&out)
        );
    }
    let out = run(&["report", "nope", "--html", "r.html"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("no task `nope`"), "{}", stderr(&out));
    // A path under a regular file cannot be created (whoever runs the test).
    let out = run(&["report", "notes", "--html", "notes.txt/report.html"]);
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("notes.txt/report.html") && stderr(&out).contains("writable"),
        "{}",
        stderr(&out)
    );
    // --record to a place it cannot write: said before any step runs.
    let out = run(&[
        "resume",
        "notes",
        "--replay",
        "session.jsonl",
        "--record",
        "notes.txt/s.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--record notes.txt/s.jsonl"),
        "{}",
        stderr(&out)
    );
    for out in [
        run(&["show", "nope"]),
        run(&["report", "notes", "--html", "notes.txt/x"]),
    ] {
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}
