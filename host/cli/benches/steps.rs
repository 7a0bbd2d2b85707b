//! Measures the executor's claims (run: `cargo bench -p agentforge --bench steps`):
//!
//! 1. context tokens at step 100 vs step 1 of a 100-step scripted session that keeps
//!    reading, editing and checking, and the largest prompt against the budget;
//! 2. host overhead per step (prepare + apply, excluding the model call and commands)
//!    with 1,000 prior actions in the log, each step keeping the trajectory of a request
//!    as Anthropic's provider sends it: median and p90, back to back and with a model
//!    call's pause between a step's halves; beside it, how much slower fixed reference
//!    work runs after the same pause (the machine's share of the second figure);
//! 3. resume after kill -9: time from process start to the next model request.

#[path = "stats.rs"]
mod stats;
#[path = "../../../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use agentforge::config::Config;
use agentforge::executor::{Executor, Runtime};
use agentforge::providers::{ModelReply, ModelResponse, Provider, ProviderKind, Usage};
use agentforge::state_store::{ActionRecord, ActionResult};
use agentforge::task::TaskSpec;
use agentforge::tools::Workspace;
use serde_json::json;
use stats::{Summary, RUNS};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

fn source_file() -> String {
    let mut s = String::from("//! Generated module for the benchmark.\n\n");
    for i in 0..60 {
        s.push_str(&format!("/// Returns {i} plus the input.\npub fn add_{i}(x: u64) -> u64 {{\n    let value = 1;\n    x + {i} + value - 1\n}}\n\n"));
    }
    s
}

fn task(max_steps: u64) -> String {
    format!(
        "id: bench\ntask_type: fix_violation\ngoal: Keep the module compiling while editing it\ninputs:\n  violation:\n    file_path: src/lib.rs\n    message: benchmark\nchecks:\n  - name: tests\n    command: grep -q 'pub fn' src/lib.rs\n    kind: test\nmax_steps: {max_steps}\n"
    )
}

fn setup(dir: &Path, max_steps: u64) -> (Runtime, TaskSpec) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), source_file()).unwrap();
    let ws = Workspace::new(dir).unwrap();
    let replay = dir.join("empty.jsonl");
    std::fs::write(&replay, "").unwrap();
    let mut config = Config::default();
    config.provider.kind = ProviderKind::Replay;
    config.provider.replay = Some(replay);
    let provider = Provider::from_settings(&config.provider_settings()).unwrap();
    let mut rt = Runtime::new(ws, config, provider);
    // The built-in plugins, as every run loads them (task types, extractors, gates,
    // guards): their calls are part of the host's per-step overhead measured here.
    rt.load_plugins(&[]).unwrap();
    let spec = TaskSpec::parse(&task(max_steps), "bench").unwrap();
    (rt, spec)
}

fn reply(step: u64) -> (String, serde_json::Value) {
    match step % 5 {
        1 => (
            "read_file".into(),
            json!({"path": "src/lib.rs", "start_line": 1, "end_line": 80}),
        ),
        2 => {
            let (from, to) = if (step / 5).is_multiple_of(2) {
                ("let value = 1;", "let value = 2;")
            } else {
                ("let value = 2;", "let value = 1;")
            };
            (
                "edit_file".into(),
                json!({"path": "src/lib.rs", "old_text": format!("pub fn add_7(x: u64) -> u64 {{\n    {from}"), "new_text": format!("pub fn add_7(x: u64) -> u64 {{\n    {to}")}),
            )
        }
        3 => ("run_tests".into(), json!({})),
        4 => (
            "load_context".into(),
            json!({"item": "full_file:src/lib.rs"}),
        ),
        _ => ("search".into(), json!({"pattern": "add_1[0-9]"})),
    }
}

fn response(name: String, arguments: serde_json::Value) -> ModelResponse {
    ModelResponse {
        reply: ModelReply::ToolCall { name, arguments },
        usage: Usage {
            input_tokens: 0,
            output_tokens: 0,
            cached_input_tokens: 0,
        },
        model: "bench".into(),
        exchange: None,
    }
}

/// [`response`] with the exchange an HTTP provider reports: the request body as
/// Anthropic's provider sends it for `prepared`, and a reply of the size a tool call
/// takes. The step keeps both in its trajectory (masked, compressed, appended), so the
/// trajectory's cost in the figure is that of a real run's step, not of an empty one.
fn response_as_sent(
    prepared: &agentforge::executor::PreparedStep,
    name: String,
    arguments: serde_json::Value,
) -> ModelResponse {
    use agentforge::providers::{AnthropicProvider, WireExchange, WireReply, WireRequest};
    let body = AnthropicProvider::request_body(&prepared.request).to_string();
    let reply = json!({
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
        "content": [
            {"type": "text", "text": "Reading the next module to find the definition the violation names."},
            {"type": "tool_use", "id": "toolu_bench", "name": name, "input": arguments}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5000, "output_tokens": 60}
    });
    let headers = [
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
        ("x-api-key", "***"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    ModelResponse {
        exchange: Some(WireExchange {
            request: WireRequest {
                method: "POST".into(),
                url: "https://api.anthropic.com/v1/messages".into(),
                headers,
                body,
            },
            reply: WireReply {
                status: 200,
                body: reply.to_string(),
            },
            attempts: 1,
        }),
        ..response(name, arguments)
    }
}

fn flat_tokens(tokio: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let (rt, spec) = setup(tmp.path(), 200);
    let dir = rt.create_task(&spec).unwrap();
    let exec = Executor::new(&rt, dir);
    let mut tokens = Vec::new();
    for step in 1..=100u64 {
        let prepared = exec.prepare().unwrap();
        tokens.push(prepared.prompt.total_tokens);
        // `AGENTFORGE_BENCH_SECTIONS=1`: each section's tokens every 20 steps, to see
        // which one a change in the ratio comes from.
        if std::env::var_os("AGENTFORGE_BENCH_SECTIONS").is_some() && (step == 1 || step % 20 == 0)
        {
            let parts: Vec<String> = prepared
                .prompt
                .sections
                .iter()
                .map(|s| format!("{}={}", s.name, s.tokens))
                .collect();
            println!("  step {step}: {}", parts.join(" "));
        }
        // Start the analysis phase with a check so the rest of the cycle is allowed.
        let (name, args) = if step == 1 {
            ("run_tests".to_string(), json!({}))
        } else {
            reply(step)
        };
        tokio
            .block_on(exec.apply(prepared, response(name, args)))
            .unwrap();
    }
    let (first, last) = (tokens[0], tokens[99]);
    let max = *tokens.iter().max().unwrap();
    let min = *tokens.iter().min().unwrap();
    println!("== 100-step scripted session (read, edit, run_tests, load_context, search) ==");
    println!(
        "context tokens: step 1 = {first}, step 100 = {last}, ratio = {:.3}",
        last as f64 / first as f64
    );
    println!(
        "min = {min}, max = {max}, budget = {}",
        rt.config.budget.total
    );
    let steady: Vec<_> = tokens[10..].to_vec();
    let smin = *steady.iter().min().unwrap();
    let smax = *steady.iter().max().unwrap();
    println!("steps 11-100: min = {smin}, max = {smax}");
}

fn fake_history(rt: &Runtime, spec: &TaskSpec, n: u64) -> agentforge::state_store::TaskDir {
    let dir = rt.create_task(spec).unwrap();
    let mut state = dir.load_state().unwrap();
    state.phase = "implement".into();
    for step in 1..=n {
        state.step = step;
        let rec = ActionRecord {
            step,
            phase: "implement".into(),
            action: "read_file".into(),
            target: Some("src/lib.rs".into()),
            parameters: json!({"path": "src/lib.rs"}),
            result: ActionResult::Success,
            summary: format!("read 80 lines of src/lib.rs (step {step})"),
            error: None,
            duration_ms: 1,
            timestamp: "2026-11-22T00:00:00.000Z".into(),
            context_tokens: 3000,
            usage: Usage {
                input_tokens: 3000,
                output_tokens: 40,
                cached_input_tokens: 0,
            },
            cost_usd_micros: None,
            output_artifact: None,
            output_hash: None,
            output_len: None,
            loop_detection: None,
            file_hashes: Default::default(),
            trajectory: None,
            traces: Vec::new(),
            state_after: state.clone(),
        };
        dir.append_action(&rec).unwrap();
    }
    dir.save_state(&state).unwrap();
    dir
}

fn overhead(tokio: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut rt, spec) = setup(tmp.path(), 5000);
    // A task in normal flow: the detector runs every step (its cost is measured) but a
    // long exploration must not turn into a detected loop that changes the workload.
    rt.config.loops.thresholds.no_progress_reads = 100_000;
    rt.config.loops.thresholds.repetition = 100_000;
    rt.config.loops.max_detections = 100_000;
    for f in 0..20 {
        std::fs::write(tmp.path().join(format!("src/mod_{f}.rs")), source_file()).unwrap();
    }
    let dir = fake_history(&rt, &spec, 1000);
    let exec = Executor::new(&rt, dir);
    // Back to back first (steps in a hot loop, the figure the goal is set on: each `apply`
    // also waits for the previous step's log line to reach the disk, which a run does
    // while the model answers). Then as a run goes: a model call of MODEL_CALL (far
    // shorter than any real one) between `prepare` and `apply`, its time excluded; the
    // thread sleeps meanwhile and usually wakes on the other core, with cold caches.
    const MODEL_CALL: Duration = Duration::from_millis(20);
    let mut step = 0u64;
    // A request body as the steps send it: the reference work below compresses it.
    let mut body = String::new();
    let mut measure = |model_call: Option<Duration>| {
        // RUNS runs of 50 steps; each run's figure is its median step.
        let (mut prep_runs, mut total_runs, mut cpu_runs, mut all) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let (mut prep, mut total, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..50 {
                let i = step;
                step += 1;
                let (t0, c0) = (Instant::now(), stats::thread_cpu());
                let prepared = exec.prepare().unwrap();
                let (t1, c1) = (Instant::now(), stats::thread_cpu());
                if let Some(d) = model_call {
                    std::thread::sleep(d);
                }
                let args = json!({"path": format!("src/mod_{}.rs", i % 20), "start_line": 1 + (i % 40), "end_line": 60 + (i % 40)});
                // The provider's side of the call (its body, the reply): not timed.
                let answer = response_as_sent(&prepared, "read_file".into(), args);
                if let Some(x) = answer.exchange.as_ref().filter(|_| body.is_empty()) {
                    body.clone_from(&x.request.body);
                }
                let (t2, c2) = (Instant::now(), stats::thread_cpu());
                tokio.block_on(exec.apply(prepared, answer)).unwrap();
                let (t3, c3) = (Instant::now(), stats::thread_cpu());
                prep.push(t1 - t0);
                total.push((t1 - t0) + (t3 - t2));
                cpu.push((c1 - c0) + (c3 - c2));
            }
            all.extend(total.iter().copied());
            prep_runs.push(stats::median(&mut prep));
            total_runs.push(stats::median(&mut total));
            cpu_runs.push(stats::median(&mut cpu));
        }
        all.sort();
        (prep_runs, total_runs, cpu_runs, all)
    };
    let (prep_runs, total_runs, cpu_runs, all) = measure(None);
    let (_, with_model, _, all_model) = measure(Some(MODEL_CALL));
    let state = exec.dir().load_state().unwrap();
    assert_eq!(
        state.status,
        agentforge::state_store::TaskStatus::Running,
        "{:?}",
        state.status_reason
    );
    println!("== host overhead per step, 1,000+ prior actions, {RUNS} runs of 50 steps (read_file, no model, no commands) ==");
    let size = |name: &str| std::fs::metadata(exec.dir().path().join(name)).map_or(0, |m| m.len());
    println!(
        "files the step rewrites: state.yaml {} bytes, working_memory.yaml {} bytes",
        size("state.yaml"),
        size("working_memory.yaml")
    );
    let last = exec.dir().read_actions().unwrap().pop().unwrap();
    let kept = last.trajectory.expect("the step kept its trajectory");
    println!(
        "trajectory the step appends (request as sent to Anthropic, reply): {} bytes of JSON, {} stored",
        kept.raw_bytes, kept.bytes
    );
    println!(
        "prepare (per-run median): {}",
        Summary::of_times(&prep_runs).time()
    );
    println!(
        "prepare + apply (per-run median): {}; p90 over all steps {}",
        Summary::of_times(&total_runs).time(),
        stats::human(all[all.len() * 9 / 10].as_secs_f64())
    );
    println!(
        "  CPU time of the stepping thread (per-run median; waits left out): {}",
        Summary::of_times(&cpu_runs).time()
    );
    println!(
        "  with a {} ms model call between prepare and apply (as a run goes; cold caches): {}; p90 {}",
        MODEL_CALL.as_millis(),
        Summary::of_times(&with_model).time(),
        stats::human(all_model[all_model.len() * 9 / 10].as_secs_f64())
    );
    cold_factor(body.as_bytes(), MODEL_CALL);
}

/// How much slower the machine runs a fixed piece of work on a thread that has just
/// slept `pause` (as a step's thread sleeps through its model call) than back to back,
/// pair by pair, for two pieces: the gzip (level 2, as trajectories are kept) of a step's
/// request body, which reads and writes a few hundred KB, and arithmetic in registers.
/// It tells what of the gap between the two step figures is the machine's (what a
/// sleeping thread finds left in the caches) rather than the step's own work.
fn cold_factor(body: &[u8], pause: Duration) {
    use std::io::Write;
    let gzip = || {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(2));
        gz.write_all(body).unwrap();
        std::hint::black_box(gz.finish().unwrap());
    };
    let arithmetic = || {
        let mut x = std::hint::black_box(0x9E37_79B9_7F4A_7C15u64);
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x = x.wrapping_add(i);
        }
        std::hint::black_box(x);
    };
    let kb = body.len() / 1024;
    for (what, work) in [
        (
            format!("gzip of one step's {kb} KB request body"),
            &gzip as &dyn Fn(),
        ),
        (
            "20,000 rounds of xorshift, in registers".to_string(),
            &arithmetic,
        ),
    ] {
        let timed = || {
            let t = Instant::now();
            work();
            t.elapsed()
        };
        let mut pairs = Vec::new();
        for _ in 0..RUNS {
            let (mut warm, mut cold) = (Vec::new(), Vec::new());
            for _ in 0..50 {
                warm.push(timed());
            }
            for _ in 0..50 {
                std::thread::sleep(pause);
                cold.push(timed());
            }
            pairs.push((stats::median(&mut warm), stats::median(&mut cold)));
        }
        println!(
            "  reference work ({what}): back to back {}; after a {} ms sleep {}; slower after the sleep, pair by pair: {}",
            Summary::of_times(&pairs.iter().map(|p| p.0).collect::<Vec<_>>()).time(),
            pause.as_millis(),
            Summary::of_times(&pairs.iter().map(|p| p.1).collect::<Vec<_>>()).time(),
            Summary::of_ratios(&pairs)
        );
    }
}

fn resume_time() {
    let bin = env!("CARGO_BIN_EXE_agentforge");
    // Warm: the killed run had built the prompt of the step it was on (here by `agentforge
    // context`, which builds that very prompt), so the token counts it made are on disk;
    // cold: no counts on disk, the first prompt waits for the tokenizer to load.
    let mut samples = [Vec::new(), Vec::new()];
    for _ in 0..RUNS {
        for (warm, samples) in [false, true].into_iter().zip(samples.iter_mut()) {
            let tmp = tempfile::tempdir().unwrap();
            let cache = tmp.path().join("cache/plugins");
            let (rt, spec) = setup(tmp.path(), 5000);
            let dir = fake_history(&rt, &spec, 1000);
            if warm {
                let ok = std::process::Command::new(bin)
                    .arg("--workspace")
                    .arg(tmp.path())
                    .args(["context", "bench"])
                    .env("AGENTFORGE_CACHE_DIR", &cache)
                    .stdout(std::process::Stdio::null())
                    .status()
                    .unwrap()
                    .success();
                assert!(ok);
            }
            // A crash mid-append: a torn last line, and state.yaml one step behind.
            let mut log = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.log_path())
                .unwrap();
            std::io::Write::write_all(&mut log, b"{\"step\":1001,\"phase\":\"impl").unwrap();
            let server = ScriptedServer::builder(Protocol::OpenAi)
                .script(vec![Scripted::tool_call(
                    "escalate",
                    json!({"reason": "bench"}),
                )])
                .start_background();
            let started = Instant::now();
            let mut child = std::process::Command::new(bin)
                .arg("--workspace")
                .arg(tmp.path())
                .args(["resume", "bench", "--provider", "openai", "--quiet"])
                .env("OPENAI_BASE_URL", server.base_url())
                .env("OPENAI_API_KEY", "bench-key")
                .env("AGENTFORGE_CACHE_DIR", &cache)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            assert!(server.wait_for_requests_blocking(1, Duration::from_secs(30)));
            let first = server.requests()[0].received_at;
            samples.push(first - started);
            let _ = child.wait();
        }
    }
    println!("== resume after kill -9 (torn last line, 1,000 prior actions) ==");
    println!(
        "process start -> next model request, token counts of the killed run on disk: {}",
        Summary::of_times(&samples[1]).time()
    );
    println!(
        "process start -> next model request, no token counts on disk: {}",
        Summary::of_times(&samples[0]).time()
    );
}

fn main() {
    // `cargo test --benches` runs this too; keep that fast by skipping unless benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        println!("steps bench: run with `cargo bench -p agentforge --bench steps`");
        return;
    }
    // The runtime the CLI runs the executor on (plugin calls block in place on it).
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .unwrap();
    // `cargo bench -p agentforge --bench steps -- tokens|overhead|resume` runs one part.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    stats::print_load("at the start");
    if want("tokens") {
        flat_tokens(&tokio);
    }
    if want("overhead") {
        overhead(&tokio);
    }
    if want("resume") {
        resume_time();
    }
    stats::print_load("at the end");
}
