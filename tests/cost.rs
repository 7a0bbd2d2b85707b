//! Cost through the `agentforge` binary, against scripted Anthropic and OpenAI-compatible
//! servers on 127.0.0.1 that report real usage (cached prompt tokens included, in each
//! wire format's own fields): each step's cost in `actions.jsonl`, the task's in its
//! state, `task show` and the run's summary; the shipped prices and `[pricing]`
//! overrides; `max_cost_usd` / `--max-cost-usd` stopping a run resumably before the next
//! model call; an unpriced model's cost unknown (never zero) and a cap on it refused.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::notes::{agentforge, notes_task, notes_workspace, FIXED};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-COST-0123456789";

fn cmd(dir: &Path, server: &ScriptedServer, args: &[&str]) -> Command {
    let mut c = agentforge(dir);
    c.args(args);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn records(dir: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/actions.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn state(dir: &Path, id: &str) -> serde_yaml_ng::Value {
    let text =
        std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/state.yaml"))).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// Micro-dollars as the host shows them: every significant digit, at least cents.
fn dollars(micros: u64) -> String {
    let frac = format!("{:06}", micros % 1_000_000);
    let digits = frac.trim_end_matches('0');
    let digits = if digits.len() < 2 { &frac[..2] } else { digits };
    format!("${}.{digits}", micros / 1_000_000)
}

fn fix_edit() -> Scripted {
    Scripted::tool_call(
        "edit_file",
        json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
    )
}

/// A tool call answered with a body written out in the protocol's wire format, whose
/// usage reports `input` prompt tokens of which `cached` came from the prompt cache:
/// Anthropic counts cache reads apart from `input_tokens`, OpenAI within
/// `prompt_tokens`.
fn cached_call(protocol: Protocol, name: &str, args: Value, input: u64, cached: u64) -> Scripted {
    let body = match protocol {
        Protocol::Anthropic => json!({
            "id": "msg_cached", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": args}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": input - cached, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached, "output_tokens": 50},
        }),
        Protocol::OpenAi => json!({
            "id": "chatcmpl-cached", "object": "chat.completion", "created": 0,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]}}],
            "usage": {"prompt_tokens": input, "completion_tokens": 50,
                      "total_tokens": input + 50,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }),
    };
    Scripted::Raw {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

/// The notes task fixed in three calls, the first with 4,000 of its 5,000 prompt tokens
/// cached; `model` (a dated snapshot id) is priced by its base id's shipped price.
fn priced_run(protocol: Protocol, provider: &str, model: &str, prices: [u64; 3]) {
    let tmp = notes_workspace(&notes_task("notes", FIXED, 10));
    let dir = tmp.path();
    let server = ScriptedServer::builder(protocol)
        .api_key(KEY)
        .script([
            cached_call(protocol, "run_tests", json!({}), 5000, 4000),
            fix_edit().with_usage(1600, 40),
            Scripted::tool_call("complete", json!({"summary": "fixed"})).with_usage(1550, 15),
        ])
        .start_background();
    let out = cmd(
        dir,
        &server,
        &["run", "task.yaml", "--provider", provider, "--model", model],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Each step's cost in the log, computed from its usage at the model's price.
    let recs = records(dir, "notes");
    let costs: Vec<u64> = recs
        .iter()
        .map(|r| {
            r["cost_usd_micros"]
                .as_u64()
                .expect("a priced step has a cost")
        })
        .collect();
    assert_eq!(costs, prices, "{recs:?}");
    assert_eq!(recs[0]["usage"]["input_tokens"], 5000);
    assert_eq!(recs[0]["usage"]["cached_input_tokens"], 4000);
    assert!(recs[1]["usage"].get("cached_input_tokens").is_none());

    // The task's cost: the sum of its steps', in the state the log carries.
    let total: u64 = prices.iter().sum();
    let st = state(dir, "notes");
    assert_eq!(st["cost"]["usd_micros"].as_u64(), Some(total));
    assert_eq!(st["cost"]["unpriced_steps"].as_u64(), Some(0));
    assert_eq!(st["tokens"]["cached_input_tokens"].as_u64(), Some(4000));
    assert_eq!(
        recs[2]["state_after"]["cost"]["usd_micros"].as_u64(),
        Some(total)
    );
    let shown = dollars(total);
    assert!(
        stdout(&out).contains(&format!("cost: {shown} (")),
        "{}",
        stdout(&out)
    );

    // `task show`: the total with what priced it, and each recent step's cost.
    let show = cmd(dir, &server, &["task", "show", "notes"])
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    let text = stdout(&show);
    assert!(text.contains("# cost\n"), "{text}");
    assert!(text.contains(&shown), "{text}");
    assert!(text.contains("shipped default of 2026-11-26"), "{text}");
    for c in prices {
        let step = dollars(c);
        assert!(text.contains(&step), "{step} in {text}");
    }
    let show = cmd(dir, &server, &["--json", "task", "show", "notes"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(v["cost"]["usd_micros"].as_u64(), Some(total));
    assert_eq!(
        v["recent_actions"][0]["cost_usd_micros"].as_u64(),
        Some(prices[0])
    );

    // The key is written nowhere, costs or not.
    for r in &recs {
        assert!(!r.to_string().contains(KEY));
    }
}

#[test]
fn anthropic_usage_is_priced_per_step_and_per_task_with_cache_reads() {
    // claude-sonnet-4-5: $3 in, $0.30 cache read, $15 out per MTok.
    // 1,000 x 3 + 4,000 x 0.3 + 50 x 15; 1,600 x 3 + 40 x 15; 1,550 x 3 + 15 x 15.
    priced_run(
        Protocol::Anthropic,
        "anthropic",
        "claude-sonnet-4-5-20250929",
        [4_950, 5_400, 4_875],
    );
}

#[test]
fn openai_usage_is_priced_per_step_and_per_task_with_cached_input() {
    // gpt-4o: $2.50 in, $1.25 cached, $10 out per MTok.
    // 1,000 x 2.5 + 4,000 x 1.25 + 50 x 10; 1,600 x 2.5 + 40 x 10; 1,550 x 2.5 + 15 x 10.
    priced_run(
        Protocol::OpenAi,
        "openai",
        "gpt-4o-2024-08-06",
        [8_000, 4_400, 4_025],
    );
}

/// The notes workspace with files `f0.txt`... for [`expensive_server`] to read.
fn spend_workspace(task: &str) -> tempfile::TempDir {
    let tmp = notes_workspace(task);
    for i in 0..30 {
        std::fs::write(tmp.path().join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    tmp
}

/// Reads of distinct files (no loop) that never finish the task, each reporting 100,000
/// prompt and 1,000 completion tokens: $0.26 a call with gpt-4o.
fn expensive_server() -> ScriptedServer {
    let reads = (0..30).map(|i| {
        Scripted::tool_call("read_file", json!({ "path": format!("f{i}.txt") }))
            .with_usage(100_000, 1_000)
    });
    ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(reads)
        .start_background()
}

fn args<'a>(first: &[&'a str]) -> Vec<&'a str> {
    let mut v = first.to_vec();
    v.extend(["--provider", "openai", "--model", "gpt-4o", "--quiet"]);
    v
}

#[test]
fn a_cost_cap_stops_the_run_resumably_and_a_raised_cap_continues() {
    let tmp = spend_workspace(&notes_task("spend", FIXED, 20));
    let dir = tmp.path();
    let server = expensive_server();

    // $0.26 after step 1, $0.52 after step 2: the cap of $0.50 stops it before step 3.
    let out = cmd(
        dir,
        &server,
        &args(&["run", "task.yaml", "--max-cost-usd", "0.5"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 2);
    assert_eq!(records(dir, "spend").len(), 2);
    let st = state(dir, "spend");
    assert_eq!(st["status"].as_str(), Some("budget_exhausted"));
    assert_eq!(st["cost"]["usd_micros"].as_u64(), Some(520_000));
    let reason = st["status_reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains("$0.50") && reason.contains("$0.52"),
        "{reason}"
    );
    assert!(
        stdout(&out).contains("budget_exhausted"),
        "{}",
        stdout(&out)
    );

    // The same cap (from the config this time): stopped again at once, no model call.
    std::fs::write(
        dir.join("agentforge.toml"),
        "[limits]\nmax_cost_usd = 0.5\n",
    )
    .unwrap();
    let out = cmd(dir, &server, &args(&["resume", "spend"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 2);

    // A raised cap continues, and stops once $1.00 is reached: after step 4 ($1.04).
    let out = cmd(
        dir,
        &server,
        &args(&["resume", "spend", "--max-cost-usd", "1"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 4);
    let steps: Vec<u64> = records(dir, "spend")
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4], "no step ran twice");
    let st = state(dir, "spend");
    assert_eq!(st["cost"]["usd_micros"].as_u64(), Some(1_040_000));
    assert!(st["status_reason"].as_str().unwrap().contains("$1.00"));

    // The flag wins over the config's cap, which is lower.
    let out = cmd(
        dir,
        &server,
        &args(&["resume", "spend", "--max-cost-usd", "1.3"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 5);
    assert_eq!(
        state(dir, "spend")["cost"]["usd_micros"].as_u64(),
        Some(1_300_000)
    );
}

#[test]
fn a_step_budget_stop_is_not_reopened_by_a_cost_cap() {
    let tmp = spend_workspace(&notes_task("steps", FIXED, 2));
    let dir = tmp.path();
    let server = expensive_server();
    let out = cmd(dir, &server, &args(&["run", "task.yaml"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 2);
    // Out of steps, not money: a cap with room left runs nothing more.
    let out = cmd(
        dir,
        &server,
        &args(&["resume", "steps", "--max-cost-usd", "100"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(server.request_count(), 2);
    assert!(state(dir, "steps")["status_reason"]
        .as_str()
        .unwrap()
        .contains("step budget"));
}

#[test]
fn an_unpriced_model_costs_unknown_and_a_cap_on_it_is_refused_until_priced() {
    let tmp = notes_workspace(&notes_task("local", FIXED, 10));
    let dir = tmp.path();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script([
            Scripted::tool_call("run_tests", json!({})).with_usage(1000, 100),
            fix_edit().with_usage(1000, 100),
            Scripted::tool_call("complete", json!({"summary": "fixed"})).with_usage(1000, 100),
        ])
        .start_background();
    let local = |first: &[&'static str]| {
        let mut v = first.to_vec();
        v.extend([
            "--provider",
            "openai",
            "--model",
            "my-local-model",
            "--quiet",
        ]);
        v
    };

    // A cap on a model with no price: a configuration error naming the model and the
    // table key to add, before any model call.
    let out = cmd(
        dir,
        &server,
        &local(&["run", "task.yaml", "--max-cost-usd", "1"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("`my-local-model` has no price")
            && err.contains("[pricing.\"my-local-model\"]"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(server.request_count(), 0);

    // Without a cap it runs, and its cost is unknown, never zero.
    let out = cmd(dir, &server, &local(&["run", "task.yaml"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.request_count(), 3);
    let recs = records(dir, "local");
    assert!(
        recs.iter().all(|r| r["cost_usd_micros"].is_null()),
        "{recs:?}"
    );
    let st = state(dir, "local");
    assert_eq!(st["cost"]["usd_micros"].as_u64(), Some(0));
    assert_eq!(st["cost"]["unpriced_steps"].as_u64(), Some(3));
    assert!(
        stdout(&out).contains("cost: unknown (3 unpriced steps)"),
        "{}",
        stdout(&out)
    );
    let show = cmd(dir, &server, &["task", "show", "local"])
        .output()
        .unwrap();
    let text = stdout(&show);
    assert!(
        text.contains("unknown (3 unpriced steps) (`my-local-model` has no price"),
        "{text}"
    );
    let show = cmd(dir, &server, &["--json", "task", "show", "local"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert!(v["cost"]["usd_micros"].is_null(), "{v}");
    assert_eq!(v["cost"]["unpriced_steps"], 3);

    // Priced in the config, the model's cost is known from then on and shown as the
    // config's price.
    std::fs::write(
        dir.join("agentforge.toml"),
        "[pricing.\"my-local-model\"]\ninput_per_mtok = 0.5\noutput_per_mtok = 2\n",
    )
    .unwrap();
    let show = cmd(dir, &server, &["task", "show", "local"])
        .output()
        .unwrap();
    assert!(
        stdout(&show).contains("[pricing.\"my-local-model\"] of the config"),
        "{}",
        stdout(&show)
    );
}

#[test]
fn a_pricing_override_replaces_the_shipped_price() {
    let tmp = notes_workspace(&notes_task("cheap", FIXED, 10));
    let dir = tmp.path();
    std::fs::write(
        dir.join("agentforge.toml"),
        "[pricing.\"gpt-4o\"]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncached_input_per_mtok = 0.1\n",
    )
    .unwrap();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script([
            cached_call(Protocol::OpenAi, "run_tests", json!({}), 5000, 4000),
            fix_edit().with_usage(1000, 100),
            Scripted::tool_call("complete", json!({"summary": "fixed"})).with_usage(1000, 100),
        ])
        .start_background();
    let out = cmd(dir, &server, &args(&["run", "task.yaml"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let costs: Vec<Option<u64>> = records(dir, "cheap")
        .iter()
        .map(|r| r["cost_usd_micros"].as_u64())
        .collect();
    // 1,000 x 1 + 4,000 x 0.1 + 50 x 2; then 1,000 x 1 + 100 x 2 twice.
    assert_eq!(costs, [Some(1_500), Some(1_200), Some(1_200)]);
}

#[test]
fn bad_prices_and_caps_are_refused_naming_the_field_and_value() {
    let tmp = notes_workspace(&notes_task("bad", FIXED, 10));
    let dir = tmp.path();
    let server = expensive_server();
    let cases: [(&str, &[&str], &[&str]); 5] = [
        (
            "[pricing.\"gpt-4o\"]\ninput_per_mtok = -1\noutput_per_mtok = 2\n",
            &[],
            &["pricing.\"gpt-4o\".input_per_mtok", "-1 is not a price"],
        ),
        (
            "[pricing.\"gpt-4o\"]\ninput_per_mtok = 1\n",
            &[],
            &["agentforge.toml", "output_per_mtok"],
        ),
        (
            "[pricing.\"gpt-4o\"]\ninput_per_mtok = 1\noutput_per_mtok = 2\ncache_per_mtok = 1\n",
            &[],
            &["agentforge.toml", "cache_per_mtok"],
        ),
        (
            "[limits]\nmax_cost_usd = 0\n",
            &[],
            &["limits.max_cost_usd", "0 is not a spending cap"],
        ),
        (
            "",
            &["--max-cost-usd=-2"],
            &["--max-cost-usd", "-2 is not a spending cap"],
        ),
    ];
    for (toml, extra, wanted) in cases {
        std::fs::write(dir.join("agentforge.toml"), toml).unwrap();
        let mut a = args(&["run", "task.yaml"]);
        a.extend(extra);
        let out = cmd(dir, &server, &a).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(64), "{toml}: {err}");
        for w in wanted {
            assert!(err.contains(w), "{toml} {extra:?}: `{w}` in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(server.request_count(), 0);
}
