//! The fleet on NATS JetStream through the binary: real `nats-server` processes on
//! 127.0.0.1 (one node, or a three-node cluster with replicas 3), real `agentforge
//! worker` processes, a scripted model server. Tasks are the notes task (a check, the
//! fix, `complete`: three steps).
//!
//! `nats-server` is Debian's `nats-server` (`.ci/run` installs it). Under `CI=true` a
//! missing one fails every test; elsewhere each test says it is skipped (as the browser
//! test does), so `cargo test` on a machine without it stays usable.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::nats::{free_port, nats_present, Node};
use support::notes::{notes_task, FIXED};
use support::scripted_server::{Protocol, RecordedRequest, Scripted, ScriptedServer};

const KEY: &str = "sk-test-fleet-worker";
/// A key in the submitter's environment: it must never travel with an item.
const SUBMITTER_KEY: &str = "sk-test-fleet-SUBMITTER-secret";

/// How long a test waits for the fleet to finish before it fails (not a measure).
const PATIENCE: Duration = Duration::from_secs(150);

/// A node named `name`; with `cluster` (its own route port, its peers' route ports), a
/// member of the test cluster.
fn start_node(name: &str, cluster: Option<(u16, &[u16])>) -> Node {
    let mut args = vec!["-n".to_string(), name.to_string()];
    if let Some((own, peers)) = cluster {
        let routes: Vec<String> = peers
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect();
        args.extend([
            "--cluster_name".to_string(),
            "agentforge-test".to_string(),
            "--cluster".to_string(),
            format!("nats://127.0.0.1:{own}"),
            "--routes".to_string(),
            routes.join(","),
        ]);
    }
    Node::start(&args)
}

fn single() -> Node {
    start_node("solo", None)
}

fn cluster() -> Vec<Node> {
    let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
    (0..3)
        .map(|i| {
            let peers: Vec<u16> = routes
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| *p)
                .collect();
            start_node(&format!("n{i}"), Some((routes[i], &peers)))
        })
        .collect()
}

fn urls(nodes: &[Node]) -> String {
    nodes
        .iter()
        .filter(|n| n.is_running())
        .map(Node::url)
        .collect::<Vec<_>>()
        .join(",")
}

/// The step a request is for (the system prompt's "Phase: X (step N").
fn step_of(r: &RecordedRequest) -> u64 {
    r.system_text()
        .split("(step ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The notes task's three steps, chosen by the step number alone, so any number of
/// tasks can ask in any order.
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

fn model_server(
    answer: impl Fn(&RecordedRequest) -> Scripted + Send + Sync + 'static,
) -> ScriptedServer {
    let answer = Arc::new(answer);
    let script: Vec<Scripted> = (0..3000)
        .map(|_| {
            let a = answer.clone();
            Scripted::dynamic(move |r| a(r))
        })
        .collect();
    ScriptedServer::builder(Protocol::Anthropic)
        .script(script)
        .start_background()
}

/// A workspace with notes.txt and one task file per id.
fn workspace(ids: &[String]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("notes.txt"),
        "title: demo\nstatus: broken\n",
    )
    .unwrap();
    for id in ids {
        std::fs::write(
            tmp.path().join(format!("{id}.yaml")),
            notes_task(id, FIXED, 8),
        )
        .unwrap();
    }
    tmp
}

fn agentforge(dir: &Path) -> Command {
    support::notes::agentforge(dir)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn submit(ws: &Path, url: &str, replicas: usize, files: &[String]) -> Output {
    let mut c = agentforge(ws);
    c.arg("submit")
        .args(files)
        .args(["--nats", url, "--replicas", &replicas.to_string()])
        .env("ANTHROPIC_API_KEY", SUBMITTER_KEY);
    c.output().unwrap()
}

/// A worker process, its stderr in a file; killed (SIGKILL) when dropped.
struct Worker {
    child: Option<Child>,
    id: String,
    dir: PathBuf,
    log: PathBuf,
}

impl Worker {
    fn start(
        root: &Path,
        id: &str,
        url: &str,
        replicas: usize,
        concurrency: usize,
        ack_wait: u64,
        server: &ScriptedServer,
    ) -> Worker {
        let dir = root.join(id);
        let log = root.join(format!("{id}.log"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = agentforge(root);
        c.args(["worker", "--nats", url, "--id", id, "-q"])
            .args(["--replicas", &replicas.to_string()])
            .args(["--concurrency", &concurrency.to_string()])
            .args(["--ack-wait", &ack_wait.to_string()])
            .arg("--dir")
            .arg(&dir)
            .env("AGENTFORGE_PROVIDER", "anthropic")
            .env("AGENTFORGE_MODEL", "test-model")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in server.env_vars(KEY) {
            c.env(k, v);
        }
        Worker {
            child: Some(c.spawn().unwrap()),
            id: id.to_string(),
            dir,
            log,
        }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `status --nats URL --json`.
/// `None` when it fails or has not answered within a minute (then it is killed).
fn fleet_status(ws: &Path, url: &str) -> Option<Value> {
    let mut cmd = agentforge(ws);
    cmd.args(["--json", "status", "--nats", url]);
    // Read while it runs: a view larger than the pipe must not block it.
    let (out, killed) = support::output_within(&mut cmd, Duration::from_secs(60));
    if killed || !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// Items by id, from the status view.
fn items(v: &Value) -> BTreeMap<String, Value> {
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| (i["id"].as_str().unwrap_or_default().to_string(), i.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until every id has a final state; returns the last view.
fn wait_final(ws: &Path, url: &dyn Fn() -> String, ids: &[String], workers: &[Worker]) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = fleet_status(ws, &url()) {
            let its = items(&v);
            let done = ids.iter().all(|id| {
                its.get(id).is_some_and(|i| {
                    matches!(
                        i["state"].as_str(),
                        Some("complete" | "failed" | "escalated" | "budget_exhausted")
                    )
                })
            });
            if done {
                return v;
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = workers
                    .iter()
                    .map(|w| format!("--- {}\n{}", w.id, w.log()))
                    .collect();
                panic!(
                    "the fleet did not finish: {}\n{}",
                    serde_json::to_string_pretty(&v["items"]).unwrap(),
                    logs.join("\n")
                );
            }
        } else {
            assert!(Instant::now() < deadline, "status --nats never answered");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits (bounded) until the work stream holds no message: a worker writes an item's
/// final status before it acks the item, so a view taken as soon as every item is final
/// can still count the last one's message. Returns the last view.
fn drained(ws: &Path, url: &dyn Fn() -> String) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let v = fleet_status(ws, &url());
        if let Some(v) = &v {
            if v["pending_messages"] == 0 || Instant::now() > deadline {
                return v.clone();
            }
        } else {
            assert!(Instant::now() < deadline, "status --nats never answered");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The workers' logs, once `settled` holds for them (bounded: the logs as they are at
/// the deadline, for the assertions that follow to show). A worker logs an ack after
/// the server confirmed it, and refuses a bad item after the items before it, so the
/// lines a test looks for can come after the state it waited for.
fn logs_when(workers: &[Worker], settled: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let logs: String = workers.iter().map(Worker::log).collect();
        if settled(&logs) || Instant::now() > deadline {
            return logs;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The step numbers in an item's final log (in the folder of the worker that ended it).
fn steps_of(workers: &[Worker], worker: &str, id: &str) -> Vec<(u64, String)> {
    let w = workers
        .iter()
        .find(|w| w.id == worker)
        .unwrap_or_else(|| panic!("no worker {worker}"));
    let log = w
        .dir
        .join(id)
        .join(format!(".agentforge/tasks/{id}/actions.jsonl"));
    std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["step"].as_u64().unwrap(),
                v["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Every id complete, acked exactly once across all workers, its log's steps 1..=n each
/// once, ending in `complete`, the fix on disk; nothing left in the stream; no
/// submitter key anywhere a worker wrote.
/// Returns the fleet's view once its stream is drained.
fn assert_all_complete_once(
    ws: &Path,
    url: &dyn Fn() -> String,
    ids: &[String],
    workers: &[Worker],
) -> Value {
    // The final status is written before the ack, and a worker logs the ack once the
    // server confirmed it: wait (bounded) for each item's ack line, or for the line that
    // says its ack was not confirmed (a node failing over), after which a later delivery
    // is ended without running the item.
    let unconfirmed = |id: &str| format!("item {id} is complete but its ack was not confirmed");
    let logs = logs_when(workers, |logs| {
        ids.iter().all(|id| {
            logs.contains(&format!("acked item {id}: ")) || logs.contains(&unconfirmed(id))
        })
    });
    let v = drained(ws, url);
    let its = items(&v);
    for id in ids {
        let i = &its[id];
        assert_eq!(i["state"], "complete", "{id}: {i}\n{logs}");
        let acks = logs.matches(&format!("acked item {id}: ")).count();
        // JetStream delivers at least once: a fresh-clone CI saw an ack the server had
        // confirmed come back as a second delivery after a node was killed. Such a
        // delivery must resume from the item's checkpoint, re-running nothing (the step
        // log below is checked for steps 1..=n, each once), not start the item over.
        let resumed = logs.contains(&format!("item {id}: restored from its checkpoint"));
        assert!(
            acks == 1 || (acks == 0 && logs.contains(&unconfirmed(id))) || (acks == 2 && resumed),
            "{id} acked {acks} times\n{logs}"
        );
        let worker = i["worker"].as_str().unwrap();
        let steps = steps_of(workers, worker, id);
        let numbers: Vec<u64> = steps.iter().map(|s| s.0).collect();
        let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
        assert_eq!(numbers, expected, "{id}: steps {steps:?}");
        assert!(numbers.len() >= 3, "{id}: {steps:?}");
        assert_eq!(steps.last().unwrap().1, "complete", "{id}: {steps:?}");
        assert_eq!(i["step"].as_u64(), Some(numbers.len() as u64), "{id}: {i}");
        let notes = workers
            .iter()
            .find(|w| w.id == worker)
            .unwrap()
            .dir
            .join(id)
            .join("notes.txt");
        assert_eq!(
            std::fs::read_to_string(notes).unwrap(),
            "title: demo\nstatus: fixed\n"
        );
    }
    assert_eq!(v["pending_messages"], 0, "{v}");
    assert!(!logs.contains(SUBMITTER_KEY));
    for w in workers {
        assert_no_key(&w.dir);
    }
    v
}

fn assert_no_key(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert!(
                    !text(&bytes).contains(SUBMITTER_KEY),
                    "{} holds the submitter's key",
                    p.display()
                );
            }
        }
    }
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i:02}")).collect()
}

fn files(ids: &[String]) -> Vec<String> {
    ids.iter().map(|i| format!("{i}.yaml")).collect()
}

#[test]
fn fifty_tasks_on_four_workers_over_a_three_node_cluster_complete_exactly_once() {
    if !nats_present() {
        return;
    }
    let nodes = cluster();
    let url = urls(&nodes);
    let server = model_server(notes_answer);
    let ids = ids("bulk", 50);
    let ws = workspace(&ids);
    let out = submit(ws.path(), &url, 3, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches("submitted task").count(), 50);
    let root = tempfile::tempdir().unwrap();
    let workers: Vec<Worker> = (1..=4)
        .map(|i| Worker::start(root.path(), &format!("w{i}"), &url, 3, 2, 10, &server))
        .collect();
    wait_final(ws.path(), &|| url.clone(), &ids, &workers);
    let v = assert_all_complete_once(ws.path(), &|| url.clone(), &ids, &workers);
    // The work was shared.
    let by: BTreeSet<String> = items(&v)
        .values()
        .filter_map(|i| i["worker"].as_str().map(str::to_string))
        .collect();
    assert!(by.len() >= 2, "one worker did everything: {by:?}");
    // Workers' heartbeats are shown.
    let beats: Vec<&str> = v["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["worker"].as_str())
        .collect();
    for w in ["w1", "w2", "w3", "w4"] {
        assert!(beats.contains(&w), "{w} missing: {beats:?}");
    }
    // The human view.
    let out = agentforge(ws.path())
        .args(["status", "--nats", &url])
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(shown.contains("fleet at"), "{shown}");
    assert!(
        shown.contains("bulk01") && shown.contains("complete"),
        "{shown}"
    );
}

/// Publishes `payload` on `subject` with the NATS client protocol (CONNECT, PUB, PING),
/// as anyone who can reach the server can: the test of what a worker does with it.
fn raw_publish(port: u16, subject: &str, payload: &str) {
    use std::io::{BufRead, BufReader, Write};
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(tcp.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap(); // INFO
    write!(
        tcp,
        "CONNECT {{\"verbose\":false}}\r\nPUB {subject} {}\r\n{payload}\r\nPING\r\n",
        payload.len()
    )
    .unwrap();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert!(!line.starts_with("-ERR"), "{line}");
        if line.starts_with("PONG") {
            break;
        }
    }
}

/// Messages on the work subject that `submit` would never send (an id that is a path,
/// an absolute path, a sprint folder outside the workspace, not JSON) are ended by the
/// worker without touching anything outside its folder, and a real item after them
/// still completes.
#[test]
fn hostile_work_items_touch_nothing_outside_the_workers_folder() {
    if !nats_present() {
        return;
    }
    let node = single();
    let url = node.url();
    let server = model_server(notes_answer);
    let ids = vec!["plain01".to_string()];
    let ws = workspace(&ids);
    // The stream exists once something was submitted.
    let out = submit(ws.path(), &url, 1, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = tempfile::tempdir().unwrap();
    let victim = root.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "mine").unwrap();
    // An empty tar.gz.
    let empty = "H4sIADskCGsC/+3BAQ0AAADCoPdPbQ43oAAAAAAAAAAAAIA3A5reHScAKAAA";
    let item = |id: &str, kind: &str| {
        format!(
            r#"{{"version":1,"id":"{id}","kind":{kind},"workspace":{{"in":"inline","tar_gz_base64":"{empty}"}},"submitted_at":"2026-11-26T00:00:00Z"}}"#
        )
    };
    let victim_abs = victim.display().to_string();
    for payload in [
        item("../victim", r#"{"kind":"sprint","folder":"."}"#),
        item(&victim_abs, r#"{"kind":"sprint","folder":"."}"#),
        item("sprint01", r#"{"kind":"sprint","folder":"../../victim"}"#),
        "not json at all".to_string(),
    ] {
        raw_publish(node.port, "agentforge.work", &payload);
    }
    let workers = vec![Worker::start(root.path(), "w1", &url, 1, 1, 3, &server)];
    let v = wait_final(ws.path(), &|| url.clone(), &ids, &workers);
    assert_eq!(items(&v)["plain01"]["state"], "complete", "{v}");
    // `plain01` was published first, so it can complete before the worker has pulled
    // the items after it: wait until the worker has refused the three it cannot run,
    // then look at what they might have touched.
    let logs = logs_when(&workers, |l| {
        l.matches("is not one this worker can run").count() >= 3
    });
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt")).unwrap(),
        "mine",
        "{logs}"
    );
    // The sprint item with a folder outside its workspace failed, final, without a run.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let v = fleet_status(ws.path(), &url).expect("status");
        if let Some(i) = items(&v).get("sprint01") {
            if i["state"] == "failed" {
                assert!(
                    i["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("not a relative path"),
                    "{i}"
                );
                break;
            }
        }
        assert!(Instant::now() < deadline, "sprint01 never failed: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_worker_killed_mid_task_loses_no_step_and_repeats_none() {
    if !nats_present() {
        return;
    }
    let node = single();
    let url = node.url();
    let reached = Arc::new(AtomicBool::new(false));
    let seen = reached.clone();
    // The `slow` task's step 2 answer waits long enough for the test to kill its worker.
    let server = model_server(move |r| {
        if r.user_text().contains("slow01") && step_of(r) == 2 && !seen.swap(true, Ordering::SeqCst)
        {
            return Scripted::delay(Duration::from_secs(20), notes_answer(r));
        }
        notes_answer(r)
    });
    let mut ids = vec!["slow01".to_string()];
    ids.extend((1..=5).map(|i| format!("fast{i:02}")));
    let ws = workspace(&ids);
    let out = submit(ws.path(), &url, 1, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = tempfile::tempdir().unwrap();
    let mut workers: Vec<Worker> = (1..=2)
        .map(|i| Worker::start(root.path(), &format!("w{i}"), &url, 1, 1, 3, &server))
        .collect();
    let deadline = Instant::now() + PATIENCE;
    while !reached.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "slow01 never reached step 2");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its worker is the one the status names (step 1 is checkpointed before step 2 asks).
    let holder = loop {
        let v = fleet_status(ws.path(), &url).expect("status");
        let i = &items(&v)["slow01"];
        if i["state"] == "running" && i["step"] == 1 {
            break i["worker"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "slow01 not checkpointed: {i}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let victim = workers.iter().position(|w| w.id == holder).unwrap();
    workers[victim].kill9();
    // A replacement, so the fleet keeps two.
    workers.push(Worker::start(root.path(), "w3", &url, 1, 1, 3, &server));
    wait_final(ws.path(), &|| url.clone(), &ids, &workers);
    let v = assert_all_complete_once(ws.path(), &|| url.clone(), &ids, &workers);
    let slow = &items(&v)["slow01"];
    assert_ne!(slow["worker"].as_str(), Some(holder.as_str()));
    assert!(slow["deliveries"].as_u64().unwrap() >= 2, "{slow}");
    let logs: String = workers.iter().map(Worker::log).collect();
    assert!(
        logs.contains("item slow01: restored from its checkpoint (step 1); resuming"),
        "{logs}"
    );
}

#[test]
fn a_nats_node_killed_mid_run_does_not_stop_the_fleet() {
    if !nats_present() {
        return;
    }
    let mut nodes = cluster();
    let all = urls(&nodes);
    let server = model_server(notes_answer);
    let ids = ids("node", 16);
    let ws = workspace(&ids);
    let out = submit(ws.path(), &all, 3, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = tempfile::tempdir().unwrap();
    let workers: Vec<Worker> = (1..=2)
        .map(|i| Worker::start(root.path(), &format!("w{i}"), &all, 3, 2, 10, &server))
        .collect();
    // Once work is under way, one node dies.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let v = fleet_status(ws.path(), &all);
        let started = v.as_ref().is_some_and(|v| {
            items(v)
                .values()
                .any(|i| i["state"] == "complete" || i["step"].as_u64() > Some(0))
        });
        if started {
            break;
        }
        assert!(Instant::now() < deadline, "no item started");
        std::thread::sleep(Duration::from_millis(100));
    }
    nodes[0].kill9();
    let left = urls(&nodes);
    wait_final(ws.path(), &|| left.clone(), &ids, &workers);
    assert_all_complete_once(ws.path(), &|| left.clone(), &ids, &workers);
}

#[test]
fn a_duplicate_submission_is_refused_and_an_unreachable_server_is_named() {
    if !nats_present() {
        return;
    }
    let node = single();
    let url = node.url();
    let ids = vec!["dup01".to_string()];
    let ws = workspace(&ids);
    // A look at an empty server shows an empty fleet and makes nothing: the stream is
    // made by the first submit or worker, with their replica count.
    let empty = fleet_status(ws.path(), &url).unwrap();
    assert_eq!(empty["items"].as_array().unwrap().len(), 0, "{empty}");
    assert_eq!(empty["pending_messages"], 0, "{empty}");
    let has_stream = || {
        let mut stack = vec![node.store().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.file_name() == "AGENTFORGE_WORK" {
                    return true;
                }
                if e.path().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        false
    };
    assert!(!has_stream(), "status made the work stream");
    let out = submit(ws.path(), &url, 1, &files(&ids));
    assert!(
        has_stream(),
        "the server's store layout changed: fix has_stream"
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let again = submit(ws.path(), &url, 1, &files(&ids));
    let err = text(&again.stderr);
    assert_eq!(again.status.code(), Some(64), "{err}");
    assert!(err.contains("`dup01` was already submitted"), "{err}");
    assert!(err.contains("dup01.yaml"), "{err}");
    // Still one item, queued.
    let v = fleet_status(ws.path(), &url).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["pending_messages"], 1, "{v}");

    // Nothing listens here.
    let dead = format!("nats://127.0.0.1:{}", free_port());
    for args in [
        vec!["submit", "dup01.yaml", "--nats", &dead],
        vec!["worker", "--nats", &dead],
        vec!["status", "--nats", &dead],
    ] {
        let out = agentforge(ws.path()).args(&args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!("no NATS server reachable at {dead}")),
            "{args:?}: {err}"
        );
        assert!(err.contains("nats-server -js"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Bad input is named before anything is sent.
    std::fs::write(ws.path().join("bad.yaml"), "id: bad\ntask_type: nope\n").unwrap();
    let out = agentforge(ws.path())
        .args(["submit", "bad.yaml", "missing.yaml", "--nats", &url])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("bad.yaml"), "{err}");
    let v = fleet_status(ws.path(), &url).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
}

#[test]
fn an_item_that_cannot_run_is_failed_at_the_delivery_bound() {
    if !nats_present() {
        return;
    }
    let node = single();
    let url = node.url();
    let ids = vec!["doomed".to_string()];
    let ws = workspace(&ids);
    // The workspace's configuration names a provider no worker has: every attempt fails.
    std::fs::write(
        ws.path().join("agentforge.toml"),
        "[provider]\nkind = \"no-such-provider\"\n",
    )
    .unwrap();
    let out = submit(ws.path(), &url, 1, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = tempfile::tempdir().unwrap();
    // No provider override in this worker's environment: the workspace's wins.
    let mut c = agentforge(root.path());
    c.args([
        "worker",
        "--nats",
        &url,
        "--id",
        "w1",
        "-q",
        "--ack-wait",
        "3",
    ])
    .arg("--dir")
    .arg(root.path().join("w1"))
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(root.path().join("w1.log")).unwrap());
    let w1 = Worker {
        child: Some(c.spawn().unwrap()),
        id: "w1".into(),
        dir: root.path().join("w1"),
        log: root.path().join("w1.log"),
    };
    let workers = vec![w1];
    let v = wait_final(ws.path(), &|| url.clone(), &ids, &workers);
    let i = &items(&v)["doomed"];
    assert_eq!(i["state"], "failed", "{i}");
    assert_eq!(i["deliveries"], 5, "{i}");
    assert!(i["reason"].as_str().unwrap().contains("the bound"), "{i}");
    let logs: String = workers.iter().map(Worker::log).collect();
    assert_eq!(
        logs.matches("item doomed not finished").count(),
        4,
        "{logs}"
    );
    let v = drained(ws.path(), &|| url.clone());
    assert_eq!(v["pending_messages"], 0, "{v}");
}

/// A workspace with the bundled feature list (examples/features) and its project,
/// submitted as one sprint item; the example's folder.
fn submit_feature_list(url: &str) -> (tempfile::TempDir, PathBuf) {
    let example = support::built_plugins::root().join("examples/features");
    let ws = tempfile::tempdir().unwrap();
    support::copy_tree(&example.join("project"), ws.path());
    std::fs::copy(
        example.join("features.json"),
        ws.path().join("features.json"),
    )
    .unwrap();
    let out = submit(ws.path(), url, 1, &["features.json".to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("submitted sprint `features`"));
    (ws, example)
}

/// What a sprint test starts from: one nats-server node, the bundled feature list
/// submitted to it as one sprint item, and a folder for the workers.
struct SprintFixture {
    /// Kept for the test's length: dropping it kills the server.
    _node: Node,
    url: String,
    /// The submitter's workspace.
    ws: tempfile::TempDir,
    /// The example's folder (its recorded sessions, for `worker`).
    example: PathBuf,
    /// Where the workers' folders and logs go.
    root: tempfile::TempDir,
}

/// The fixture, or `None` (the test skipped, see `nats_present`) without nats-server.
fn sprint_fixture() -> Option<SprintFixture> {
    if !nats_present() {
        return None;
    }
    let node = single();
    let url = node.url();
    let (ws, example) = submit_feature_list(&url);
    Some(SprintFixture {
        _node: node,
        url,
        ws,
        example,
        root: tempfile::tempdir().unwrap(),
    })
}

impl SprintFixture {
    /// A worker that replays the example's recorded sessions (`--replay`, a run flag
    /// every item of the worker gets), with `AGENTFORGE_FAULT` set when `fault` is.
    fn worker(&self, id: &str, fault: Option<&str>) -> Worker {
        let (root, url) = (self.root.path(), self.url.as_str());
        let mut c = agentforge(root);
        c.args(["worker", "--nats", url, "--id", id, "--ack-wait", "3", "-q"])
            .arg("--replay")
            .arg(self.example.join("session"))
            .arg("--dir")
            .arg(root.join(id))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(root.join(format!("{id}.log"))).unwrap());
        if let Some(f) = fault {
            c.env("AGENTFORGE_FAULT", f);
        }
        Worker {
            child: Some(c.spawn().unwrap()),
            id: id.into(),
            dir: root.join(id),
            log: root.join(format!("{id}.log")),
        }
    }
}

/// Every feature of the sprint `worker` ended passed.
fn assert_features_passed(worker: &Worker) {
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(
            worker
                .dir
                .join("features/.agentforge/sprints/features/sprint.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for f in state["feature_list"]["features"].as_array().unwrap() {
        assert_eq!(f["status"], "passed", "{f}");
    }
}

/// A sprint is one item too: the bundled feature list, submitted with its project, run
/// by a worker from its recorded sessions to delivered.
#[test]
fn a_feature_list_sprint_runs_as_one_item() {
    let Some(f) = sprint_fixture() else {
        return;
    };
    let workers = vec![f.worker("w1", None)];
    let ids = vec!["features".to_string()];
    let v = wait_final(f.ws.path(), &|| f.url.clone(), &ids, &workers);
    let i = &items(&v)["features"];
    assert_eq!(i["state"], "complete", "{i}\n{}", workers[0].log());
    assert_eq!(i["kind"], "sprint");
    let logs = logs_when(&workers, |l| l.contains("acked item features: "));
    assert_eq!(logs.matches("acked item features: ").count(), 1, "{logs}");
    assert_features_passed(&workers[0]);
    let v = drained(f.ws.path(), &|| f.url.clone());
    assert_eq!(v["pending_messages"], 0, "{v}");
}

/// A sprint is checkpointed at every step its role tasks record: a worker that dies
/// inside a role task (fault injection: abort before step 2's model call, after step 1
/// was recorded and checkpointed) hands the sprint to another worker, which restores the
/// checkpoint and carries on; no role task's step runs twice and the list is delivered.
#[test]
fn a_sprint_whose_worker_dies_mid_role_task_resumes_from_its_checkpoint() {
    let Some(f) = sprint_fixture() else {
        return;
    };
    let mut first = f.worker("w1", Some("before_model@2"));
    let status = first.child.as_mut().unwrap().wait().unwrap();
    assert!(!status.success(), "{}", first.log());
    assert!(
        first
            .log()
            .contains("fault injection: dying at before_model@2"),
        "{}",
        first.log()
    );
    let workers = vec![first, f.worker("w2", None)];
    let ids = vec!["features".to_string()];
    let v = wait_final(f.ws.path(), &|| f.url.clone(), &ids, &workers);
    let i = &items(&v)["features"];
    assert_eq!(i["state"], "complete", "{i}\n{}", workers[1].log());
    assert_eq!(i["worker"], "w2", "{i}");
    let logs = logs_when(&workers[1..], |l| l.contains("acked item features: "));
    assert!(
        logs.contains("item features: restored from its checkpoint"),
        "{logs}"
    );
    assert_eq!(logs.matches("acked item features: ").count(), 1, "{logs}");
    // Every role task's log holds its steps 1..=n once each: the step recorded before
    // the death is not run again.
    let tasks = workers[1].dir.join("features/.agentforge/tasks");
    let mut seen = 0;
    for t in std::fs::read_dir(&tasks).unwrap().flatten() {
        let steps = support::logged_steps(&t.path().join("actions.jsonl"));
        let want: Vec<u64> = (1..=steps.len() as u64).collect();
        assert_eq!(steps, want, "{}", t.path().display());
        seen += 1;
    }
    assert!(seen >= 2, "{seen} role tasks");
    assert_features_passed(&workers[1]);
}

/// A worker paused (SIGSTOP) past its ack wait loses the item's lease to another worker,
/// which finishes it from the last checkpoint; once resumed, the paused worker finds the
/// lease lost at its next renewal, stops the item and never acks it.
#[test]
fn a_worker_that_loses_its_lease_stops_without_acking() {
    if !nats_present() {
        return;
    }
    let node = single();
    let url = node.url();
    let reached = Arc::new(AtomicBool::new(false));
    let seen = reached.clone();
    let server = model_server(move |r| {
        if r.user_text().contains("paused01")
            && step_of(r) == 2
            && !seen.swap(true, Ordering::SeqCst)
        {
            return Scripted::delay(Duration::from_secs(6), notes_answer(r));
        }
        notes_answer(r)
    });
    let ids = vec!["paused01".to_string()];
    let ws = workspace(&ids);
    let out = submit(ws.path(), &url, 1, &files(&ids));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = tempfile::tempdir().unwrap();
    let first = Worker::start(root.path(), "w1", &url, 1, 1, 3, &server);
    let deadline = Instant::now() + PATIENCE;
    while !reached.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "paused01 never reached step 2");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = first.child.as_ref().unwrap().id() as libc::pid_t;
    // SAFETY: a plain signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let second = Worker::start(root.path(), "w2", &url, 1, 1, 3, &server);
    let workers = vec![first, second];
    wait_final(ws.path(), &|| url.clone(), &ids, &workers);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    while !workers[0].log().contains("lease on item `paused01` lost") {
        assert!(
            Instant::now() < deadline,
            "the resumed worker did not find its lease lost:\n{}",
            workers[0].log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let v = assert_all_complete_once(ws.path(), &|| url.clone(), &ids, &workers);
    let i = &items(&v)["paused01"];
    assert_eq!(i["worker"], "w2", "{i}");
    assert!(
        !workers[0].log().contains("acked item"),
        "{}",
        workers[0].log()
    );
    // What the paused worker did after its lease was lost changed nothing: the status is
    // still the second worker's final one.
    let after = fleet_status(ws.path(), &url).unwrap();
    assert_eq!(items(&after)["paused01"]["state"], "complete");
    assert_eq!(items(&after)["paused01"]["worker"], "w2");
}
