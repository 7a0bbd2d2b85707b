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
//!   database exactly once.

#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::notes::{agentforge, notes_workspace};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-LEARN-0123456789";

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
fn stubborn_task(dir: &Path, id: &str) {
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
