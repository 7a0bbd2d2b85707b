//! Learning from enforcement (issue 14, seed 003 layer 3) through the `agentforge`
//! binary, with a scripted model on 127.0.0.1:
//!
//! - a model that keeps claiming `tested` without a test run and keeps trying to
//!   `complete` without changing a file: every refusal is a trace in
//!   `.agentforge/graph.db`; at the task's end the refusals are grouped into patterns
//!   and the patterns over the threshold are proposed as rules; a person approves one;
//!   in the next task the precedent is in the first prompt and the approved rule blocks
//!   `complete` at the first attempt, citing its pattern;
//! - a kill -9 right after a traced step's log line, then a resume: the trace is in the
//!   database exactly once;
//! - `[learning.embeddings]` with an embeddings endpoint on 127.0.0.1: `learn` embeds
//!   the traces recorded before it was configured, a run embeds its own, and a
//!   precedent sharing no word with the task but near it in the endpoint's vectors is in
//!   `agentforge context`'s `precedents:`; the key is in no file under `.agentforge/`
//!   and in no output. The endpoint down: the run completes and warns once, one call is
//!   made (its bounded attempts), and the next `learn` embeds what it left out.

use crate::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use support::notes::{agentforge, notes_workspace};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-LEARN-0123456789";

/// The embeddings endpoint's key and its variable (set for every command).
const EMBED_KEY: &str = "sk-embed-SECRET-e2e-9876";
const EMBED_KEY_ENV: &str = "AF_TEST_EMBED_KEY";

/// The notes task with a two-subtask plan (so `finish_subtask` is offered) and a test
/// check that passes once the status is fixed.
fn task(id: &str) -> String {
    format!(
        r#"id: {id}
task_type: fix_violation
goal: Change the status in notes.txt to fixed
inputs:
  violation:
    file_path: notes.txt
    message: status is broken
  plan:
    subtasks:
      - Fix the status line
      - Keep the title line intact
checks:
  - name: tests
    command: "grep -q 'status: fixed' notes.txt"
    kind: test
max_steps: 12
"#
    )
}

fn cmd(dir: &Path, server: Option<&ScriptedServer>, args: &[&str]) -> Command {
    let mut c = agentforge(dir);
    c.args(args);
    c.env(EMBED_KEY_ENV, EMBED_KEY);
    if let Some(server) = server {
        for (k, v) in server.env_vars(KEY) {
            c.env(k, v);
        }
    }
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn run_task(
    dir: &Path,
    id: &str,
    script: Vec<Scripted>,
    fault: Option<&str>,
) -> (Output, ScriptedServer) {
    std::fs::write(dir.join(format!("{id}.yaml")), task(id)).unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(script)
        .start_background();
    let mut c = cmd(
        dir,
        Some(&server),
        &[
            "run",
            &format!("{id}.yaml"),
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
        ],
    );
    if let Some(f) = fault {
        c.env("AGENTFORGE_FAULT", f);
    }
    (c.output().unwrap(), server)
}

/// `agentforge resume <id>` against a new scripted model.
fn resume(dir: &Path, id: &str, script: Vec<Scripted>) -> Output {
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(script)
        .start_background();
    let args = ["resume", id, "--provider", "openai", "--model", "gpt-4o"];
    cmd(dir, Some(&server), &args).output().unwrap()
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = cmd(dir, None, args).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn records(dir: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/actions.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn claim_tested() -> Scripted {
    Scripted::tool_call(
        "finish_subtask",
        json!({"summary": "status fixed", "tested": true, "evidence": "I checked it, looks fine"}),
    )
}

/// A claim with no evidence at all (refused by every version of the guard).
fn bare_claim() -> Scripted {
    Scripted::tool_call(
        "finish_subtask",
        json!({"summary": "status fixed", "tested": true}),
    )
}

fn complete() -> Scripted {
    Scripted::tool_call("complete", json!({"summary": "done"}))
}

fn read_notes() -> Scripted {
    Scripted::tool_call("read_file", json!({"path": "notes.txt"}))
}

fn escalate() -> Scripted {
    Scripted::tool_call("escalate", json!({"reason": "giving up"}))
}

/// A task in which the model claims `tested` twice and tries `complete` twice, all
/// refused, then escalates.
fn stubborn_task(dir: &Path, id: &str) -> Output {
    let (out, _server) = run_task(
        dir,
        id,
        vec![
            read_notes(),
            claim_tested(),
            complete(),
            claim_tested(),
            complete(),
            escalate(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "escalated: {}", stderr(&out));
    let recs = records(dir, id);
    for (step, source) in [
        (1, "guard_denial"),
        (2, "refused_complete"),
        (3, "guard_denial"),
        (4, "refused_complete"),
    ] {
        assert_eq!(recs[step]["result"], "skipped", "refused: {}", recs[step]);
        assert_eq!(recs[step]["traces"][0]["source"], source, "{}", recs[step]);
    }
    // Alternating between two refused actions is also a loop (step 5), traced too.
    assert_eq!(
        recs[4]["traces"][1]["source"], "loop_detection",
        "{}",
        recs[4]
    );
    out
}

#[test]
fn repeated_violations_become_an_approved_rule_that_blocks_the_next_task_at_once() {
    let tmp = notes_workspace(&task("unused"));
    let dir = tmp.path();
    stubborn_task(dir, "claims-1");
    stubborn_task(dir, "claims-2");

    // Eight refusals and two loops, recorded once each, with their context.
    let traces = json_of(dir, &["--json", "traces", "--limit", "100"]);
    let traces = traces.as_array().unwrap();
    assert_eq!(traces.len(), 10, "{traces:#?}");
    let of = |source: &str| {
        traces
            .iter()
            .filter(|t| t["event"]["source"] == source)
            .count()
    };
    assert_eq!(of("guard_denial"), 4, "tested claims: {traces:#?}");
    assert_eq!(of("refused_complete"), 4, "complete attempts: {traces:#?}");
    assert_eq!(of("loop_detection"), 2, "loops: {traces:#?}");
    assert!(traces
        .iter()
        .all(|t| t["context"]["task_type"] == "fix_violation"));

    // The task ends learned the patterns and proposed rules; `learn` adds nothing new.
    let learned = json_of(dir, &["--json", "learn"]);
    assert_eq!(learned["traces"], 10, "{learned}");
    assert_eq!(
        learned["proposed"].as_array().unwrap().len(),
        0,
        "{learned}"
    );
    let patterns = json_of(dir, &["--json", "patterns"]);
    let complete_pattern = patterns
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["action"] == "complete")
        .unwrap_or_else(|| panic!("a pattern of `complete`: {patterns:#}"));
    assert_eq!(complete_pattern["count"], 4, "{complete_pattern}");
    assert_eq!(complete_pattern["task_count"], 2, "{complete_pattern}");

    let proposed = json_of(dir, &["--json", "guards", "proposed"]);
    let rule = proposed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"]["action"] == "complete")
        .unwrap_or_else(|| panic!("a rule for `complete`: {proposed:#}"))
        .clone();
    assert_eq!(rule["status"], "proposed");
    let id = rule["id"].as_i64().unwrap().to_string();

    // Nothing is enforced before a person approves it: the rule is not in force yet.
    assert!(json_of(dir, &["--json", "guards", "list"])
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] != "approved"));
    let out = cmd(dir, None, &["guards", "approve", &id, "--by", "reviewer"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // The next task: the precedent is in the first prompt, and the rule blocks at the
    // first attempt, citing itself and its pattern.
    let (out, server) = run_task(
        dir,
        "claims-3",
        vec![read_notes(), complete(), escalate()],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let first = server.requests()[0].user_text();
    assert!(first.contains("precedents:"), "{first}");
    assert!(first.contains("`complete`"), "{first}");
    assert!(first.contains(&format!("learned rule #{id}")), "{first}");
    let recs = records(dir, "claims-3");
    assert_eq!(recs[1]["action"], "complete", "{}", recs[1]);
    assert_eq!(recs[1]["result"], "skipped", "{}", recs[1]);
    let error = recs[1]["error"].as_str().unwrap();
    assert!(error.contains(&format!("learned rule #{id}")), "{error}");
    assert!(error.contains("pattern:"), "{error}");
    assert_eq!(
        recs[1]["traces"][0]["enforcer"], "guard-learned-rules",
        "{}",
        recs[1]
    );
}

#[test]
fn a_kill_after_a_traced_steps_log_line_leaves_exactly_one_trace_after_resume() {
    let tmp = notes_workspace(&task("unused"));
    let dir = tmp.path();
    // Step 2 (the refused claim) is recorded, then the process dies before its trace is
    // copied into the database.
    let (out, _server) = run_task(
        dir,
        "killed",
        vec![read_notes(), bare_claim()],
        Some("after_log@2"),
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "the fault kills the run: {}",
        stderr(&out)
    );
    assert_eq!(records(dir, "killed").len(), 2);
    let out = resume(dir, "killed", vec![escalate()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let traces = json_of(dir, &["--json", "traces", "--task", "killed"]);
    assert_eq!(traces.as_array().unwrap().len(), 1, "{traces:#}");
    assert_eq!(traces[0]["context"]["step"], 2);
    // `learn` copies every log again: still one.
    json_of(dir, &["--json", "learn"]);
    let traces = json_of(dir, &["--json", "traces", "--task", "killed"]);
    assert_eq!(traces.as_array().unwrap().len(), 1, "{traces:#}");

    // A kill before the step's line: the step runs again, and is traced once.
    let (out, _server) = run_task(
        dir,
        "killed-early",
        vec![read_notes(), bare_claim()],
        Some("after_action@2"),
    );
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(records(dir, "killed-early").len(), 1);
    let out = resume(dir, "killed-early", vec![bare_claim(), escalate()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let traces = json_of(dir, &["--json", "traces", "--task", "killed-early"]);
    assert_eq!(traces.as_array().unwrap().len(), 1, "{traces:#}");
}

// --- embeddings ----------------------------------------------------------------------

/// A minimal OpenAI-compatible embeddings endpoint on 127.0.0.1 (one request per
/// connection): it answers `status` (200: vectors), checks the bearer key, and records
/// the inputs it was asked for.
struct EmbedServer {
    url: String,
    /// Every request's inputs (an empty list for a refused one).
    requests: Arc<Mutex<Vec<Vec<String>>>>,
}

/// The endpoint's idea of meaning, in three dimensions: finishing a job (a refused
/// `complete`, or wrapping up a release) points one way, everything else another.
fn meaning(text: &str) -> [f32; 3] {
    let t = text.to_lowercase();
    if t.starts_with("complete:") {
        [1.0, 0.1, 0.0]
    } else if t.contains("wrap") {
        [0.95, 0.0, 0.05]
    } else {
        [0.0, 0.2, 1.0]
    }
}

fn embed_server(status: u16) -> EmbedServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            answer(stream, status, &seen);
        }
    });
    EmbedServer { url, requests }
}

fn answer(mut s: TcpStream, status: u16, seen: &Mutex<Vec<Vec<String>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = s.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let authorised = head.contains(&format!(
        "authorization: bearer {}",
        EMBED_KEY.to_lowercase()
    ));
    let (code, reply) = if status != 200 {
        (status, json!({"error": {"message": "embeddings are down"}}))
    } else if !authorised {
        (401, json!({"error": {"message": "bad key"}}))
    } else if body["model"] != "embed-test" {
        (400, json!({"error": {"message": "unknown model"}}))
    } else {
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"index": i, "embedding": meaning(t)}))
            .collect();
        (200, json!({"data": data}))
    };
    seen.lock()
        .unwrap()
        .push(if code == 200 { inputs } else { Vec::new() });
    let text = reply.to_string();
    let _ = write!(
        s,
        "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
}

fn embeddings_config(url: &str) -> String {
    format!(
        "[learning.embeddings]\nurl = \"{url}\"\nmodel = \"embed-test\"\napi_key_env = \"{EMBED_KEY_ENV}\"\ntimeout_secs = 5\nbatch = 4\n"
    )
}

/// Every file under `dir` (gzip files decompressed), as bytes.
fn files_under(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        if path.extension().is_some_and(|e| e == "gz") {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&bytes[..])
                .read_to_end(&mut plain)
                .unwrap();
            bytes = plain;
        }
        out.push((path.display().to_string(), bytes));
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The precedents of `agentforge context <id>`'s user message (empty without the
/// section).
fn precedents_of(dir: &Path, id: &str, outputs: &mut Vec<Output>) -> String {
    let out = cmd(dir, None, &["--json", "context", id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    outputs.push(out);
    let user = v["user"].as_str().unwrap().to_string();
    user.split_once("precedents:")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(rest).to_string())
        .unwrap_or_default()
}

#[test]
fn an_embeddings_endpoint_finds_a_precedent_sharing_no_word_and_its_key_is_kept_out() {
    let tmp = notes_workspace(&task("unused"));
    let dir = tmp.path();
    let mut outputs = vec![stubborn_task(dir, "claims-1")];

    // A task sharing no word with those traces, of another type: full text finds nothing.
    std::fs::write(
        dir.join("wrap.yaml"),
        "id: wrap-up\ntask_type: implement_feature\ngoal: Wrap up the release and tidy CHANGELOG.md\n\
         inputs:\n  target_files: [CHANGELOG.md]\nchecks:\n  - name: lint\n    command: \"true\"\n    kind: check\n\
         max_steps: 5\n",
    )
    .unwrap();
    let out = cmd(dir, None, &["task", "new", "wrap.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = precedents_of(dir, "wrap-up", &mut outputs);
    assert!(!before.contains("`complete`"), "no embeddings: {before}");

    // Configured: `learn` embeds the traces recorded before (in batches of 4).
    let server = embed_server(200);
    std::fs::write(dir.join("agentforge.toml"), embeddings_config(&server.url)).unwrap();
    let out = cmd(dir, None, &["--json", "learn"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let learned: Value = serde_json::from_slice(&out.stdout).unwrap();
    outputs.push(out);
    let traces = learned["traces"].as_u64().unwrap();
    assert_eq!(learned["embeddings"]["embedded"], traces, "{learned}");
    assert_eq!(learned["embeddings"]["dimensions"], 3, "{learned}");
    assert!(server.requests.lock().unwrap().iter().all(|r| r.len() <= 4));

    // The precedent is found by meaning.
    let after = precedents_of(dir, "wrap-up", &mut outputs);
    assert!(
        after.contains("tried `complete`"),
        "with embeddings: {after}"
    );
    let asked = server.requests.lock().unwrap().concat();
    assert!(
        asked.iter().any(|t| t.contains("Wrap up the release")),
        "the question was embedded: {asked:?}"
    );

    // A run embeds its own traces after recording them: nothing left for `learn`.
    outputs.push(stubborn_task(dir, "claims-2"));
    let out = cmd(dir, None, &["--json", "learn"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let learned: Value = serde_json::from_slice(&out.stdout).unwrap();
    outputs.push(out);
    assert_eq!(learned["embeddings"]["embedded"], 0, "{learned}");
    assert_eq!(
        learned["embeddings"]["total"], learned["traces"],
        "{learned}"
    );

    // The key: in no file under .agentforge/ (the database, logs, trajectories), in no
    // output.
    let mut files = Vec::new();
    files_under(&dir.join(".agentforge"), &mut files);
    assert!(files.iter().any(|(p, _)| p.ends_with("graph.db")));
    for (path, bytes) in &files {
        assert!(!contains(bytes, EMBED_KEY), "the key is in {path}");
    }
    for o in &outputs {
        assert!(!contains(&o.stdout, EMBED_KEY) && !contains(&o.stderr, EMBED_KEY));
    }
}

#[test]
fn an_embeddings_endpoint_down_warns_once_and_the_run_completes() {
    let tmp = notes_workspace(&task("unused"));
    let dir = tmp.path();
    let server = embed_server(503);
    std::fs::write(dir.join("agentforge.toml"), embeddings_config(&server.url)).unwrap();
    // The same run as without embeddings: refusals traced, then the escalation.
    let out = stubborn_task(dir, "down-1");
    let err = stderr(&out);
    assert_eq!(
        err.matches("embeddings endpoint").count(),
        1,
        "one warning: {err}"
    );
    assert!(
        err.contains(&server.url) && err.contains("full-text"),
        "{err}"
    );
    // One call (its bounded attempts), then no more for the run.
    assert_eq!(server.requests.lock().unwrap().len(), 3, "{err}");
    let traces = json_of(dir, &["--json", "traces", "--task", "down-1"]);
    assert_eq!(traces.as_array().unwrap().len(), 5, "{traces:#}");
    assert!(!contains(&out.stderr, EMBED_KEY) && !contains(&out.stdout, EMBED_KEY));

    // The traces stayed without a vector: the next `learn` with the endpoint up embeds
    // them.
    let up = embed_server(200);
    std::fs::write(dir.join("agentforge.toml"), embeddings_config(&up.url)).unwrap();
    let learned = json_of(dir, &["--json", "learn"]);
    assert_eq!(learned["embeddings"]["embedded"], 5, "{learned}");
    assert_eq!(learned["embeddings"]["total"], 5, "{learned}");
}
