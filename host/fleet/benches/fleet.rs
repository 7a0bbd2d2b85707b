//! `cargo bench -p agentforge-fleet --bench fleet`: the fleet's throughput (tasks per
//! minute with 1 and with 4 workers, a scripted model, the notes task of three steps)
//! and what a JetStream checkpoint adds to a step (lease renewal, the workspace packed,
//! the object put, the status written: median, min and max over repeated runs).
//!
//! It starts its own `nats-server` (on PATH) and runs the `agentforge` binary of the
//! target folder (`AGENTFORGE_BIN` overrides): build it first (`cargo build -p
//! agentforge`, or `--release` for release figures). `FLEET_BENCH_TASKS` sets the tasks
//! per throughput run (default 24), `FLEET_BENCH_RUNS` the checkpoint runs (default 15).

#[path = "../../../tests/support/nats.rs"]
mod nats;
#[allow(dead_code)]
#[path = "../../../tests/support/scripted_server.rs"]
mod scripted_server;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentforge_fleet::{Fleet, FleetOptions, ItemKind, ItemStatus};
use scripted_server::{Protocol, RecordedRequest, Scripted, ScriptedServer};
use serde_json::json;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("AGENTFORGE_BIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    for profile in ["release", "debug"] {
        let p = target.join(profile).join("agentforge");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "no agentforge binary under {}: build it first (`cargo build -p agentforge`) or set AGENTFORGE_BIN",
        target.display()
    );
}

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn step_of(r: &RecordedRequest) -> u64 {
    r.system_text()
        .split("(step ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn notes_answer(r: &RecordedRequest) -> Scripted {
    match step_of(r) {
        1 => Scripted::tool_call("run_tests", json!({})),
        2 => Scripted::tool_call(
            "edit_file",
            json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
        ),
        _ => Scripted::tool_call("complete", json!({"summary": "status fixed"})),
    }
}

fn task_yaml(id: &str) -> String {
    format!(
        "id: {id}\ntask_type: fix_violation\ngoal: Change the status in notes.txt to fixed\ninputs:\n  violation:\n    file_path: notes.txt\n    message: status is broken\nchecks:\n  - name: tests\n    command: \"grep -q 'status: fixed' notes.txt\"\n    kind: test\nmax_steps: 8\n"
    )
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bin = binary();
    let nats = nats::Node::start(&[]);
    let url = nats.url();
    let fleet = loop {
        match Fleet::connect(FleetOptions::new(url.clone())).await {
            Ok(f) => break f,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let answer = Arc::new(notes_answer);
    let script: Vec<Scripted> = (0..20_000)
        .map(|_| {
            let a = answer.clone();
            Scripted::dynamic(move |r| a(r))
        })
        .collect();
    let server = ScriptedServer::builder(Protocol::Anthropic)
        .script(script)
        .start_background();
    let tasks = env_usize("FLEET_BENCH_TASKS", 24);
    println!("agentforge fleet bench: {} ({} tasks per run, 3 steps each, scripted model, nats-server at {url})", bin.display(), tasks);

    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "title: demo\nstatus: broken\n").unwrap();
    let archive = agentforge_fleet::archive::pack(&ws).unwrap();

    let mut last_item_dir = None;
    for workers in [1usize, 4] {
        let ids: Vec<String> = (0..tasks).map(|i| format!("w{workers}-t{i:03}")).collect();
        for id in &ids {
            fleet
                .submit(
                    id,
                    ItemKind::Task {
                        spec_yaml: task_yaml(id),
                    },
                    archive.clone(),
                )
                .await
                .unwrap();
        }
        let started = Instant::now();
        let mut children = Vec::new();
        for w in 0..workers {
            let dir = root.path().join(format!("run{workers}-w{w}"));
            let mut c = Command::new(&bin);
            c.args([
                "worker",
                "--nats",
                &url,
                "-q",
                "--id",
                &format!("bench-{workers}-{w}"),
            ])
            .arg("--dir")
            .arg(&dir)
            .env("AGENTFORGE_PROVIDER", "anthropic")
            .env("AGENTFORGE_MODEL", "test-model")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            for (k, v) in server.env_vars("sk-bench") {
                c.env(k, v);
            }
            children.push(c.spawn().unwrap());
            last_item_dir = Some(dir);
        }
        let _workers = Killed(children);
        loop {
            let mut done = 0;
            for id in &ids {
                if fleet
                    .item_status(id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|s: ItemStatus| s.is_final())
                {
                    done += 1;
                }
            }
            if done == ids.len() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(900),
                "run did not finish"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "throughput, {workers} worker(s): {tasks} tasks in {secs:.1} s = {:.1} tasks/min ({:.0} ms per step)",
            tasks as f64 / secs * 60.0,
            secs * 1000.0 / (tasks as f64 * 3.0) * workers as f64
        );
    }

    // A finished item's folder (task folder of three steps, trajectories, snapshots).
    let item_dir = std::fs::read_dir(last_item_dir.unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join(".agentforge/tasks").is_dir())
        .expect("a finished item folder");
    let runs = env_usize("FLEET_BENCH_RUNS", 15).max(5);
    let mut lease = fleet
        .acquire_lease("bench-checkpoint", "bench")
        .await
        .unwrap()
        .expect("the bench's lease is free");
    let (med, min, max, bytes) = time_checkpoints(&fleet, &mut lease, &item_dir, runs).await;
    println!(
        "checkpoint per step ({bytes} bytes tar.gz of a 3-step task's workspace): median {med:.2} ms (min {min:.2}, max {max:.2}) over {runs} runs"
    );
    // The same folder with a source tree of 2 MB (200 files of 10 KB of varied text): a
    // checkpoint sends the whole workspace.
    let src = item_dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for f in 0..200u32 {
        let body: String = (0..250u32)
            .map(|l| {
                format!(
                    "let value_{f}_{l} = compute({l}, {});\n",
                    (f * 31 + l * 17) % 1009
                )
            })
            .collect();
        std::fs::write(
            src.join(format!("m{f:03}.rs")),
            &body[..body.len().min(10_240)],
        )
        .unwrap();
    }
    let (med, min, max, bytes) = time_checkpoints(&fleet, &mut lease, &item_dir, runs).await;
    println!(
        "checkpoint per step with a 2 MB source tree ({bytes} bytes tar.gz): median {med:.2} ms (min {min:.2}, max {max:.2}) over {runs} runs"
    );
}

/// Times `runs` checkpoints of `dir` as the worker's after-step hook makes them: lease
/// renewal, the workspace packed, the object put, the status written. Returns median,
/// min, max (ms) and the archive's size.
async fn time_checkpoints(
    fleet: &Fleet,
    lease: &mut agentforge_fleet::Lease,
    dir: &Path,
    runs: usize,
) -> (f64, f64, f64, usize) {
    let mut totals = Vec::new();
    let mut bytes = 0;
    for _ in 0..runs {
        let t = Instant::now();
        fleet.renew_lease(lease).await.unwrap();
        let d = dir.to_path_buf();
        let tar = tokio::task::spawn_blocking(move || agentforge_fleet::archive::pack(&d))
            .await
            .unwrap()
            .unwrap();
        bytes = tar.len();
        fleet
            .put_checkpoint("bench-checkpoint", &tar)
            .await
            .unwrap();
        fleet
            .put_status(&ItemStatus {
                id: "bench-checkpoint".into(),
                kind: "task".into(),
                state: "running".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        totals.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (med, min, max) = median(totals);
    (med, min, max, bytes)
}
