//! Stopping and sharing runs, through the `agentforge` binary against a scripted model
//! server on 127.0.0.1: SIGINT / SIGTERM stop a run at a safe point and kill the running
//! check's whole process group; a check left running by a host killed with SIGKILL is
//! killed by the next resume; one process runs a task at a time (a second `resume`
//! refuses with the holder's pid); `--max-steps` wins at run and at resume and is kept;
//! commands started together never trip over one another's write probe.

use crate::support;

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::notes::{agentforge, notes_task, FIXED};
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

const KEY: &str = "sk-test-interrupt-0123";

/// A task whose check, until the file `fast` exists, starts a shell that starts a
/// `sleep 60` (a grandchild) and waits; all three write their pid to `pids`.
fn slow_task() -> String {
    notes_task(
        "slow",
        &format!("if [ ! -f fast ]; then echo $$ >> pids; sh -c 'sleep 60 & echo $! >> pids; wait' & echo $! >> pids; wait; fi; {FIXED}"),
        10,
    )
}

/// A task whose check waits until the file `go` exists.
fn gated_task() -> String {
    notes_task(
        "gated",
        &format!("while [ ! -f go ]; do sleep 0.1; done; {FIXED}"),
        10,
    )
}

/// A task the scripted model never finishes (it only reads).
fn endless_task() -> String {
    notes_task("endless", FIXED, 10)
}

fn workspace(task: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("notes.txt"),
        "title: demo\nstatus: broken\n",
    )
    .unwrap();
    for f in ["a.txt", "b.txt", "c.txt"] {
        std::fs::write(tmp.path().join(f), format!("{f}\n")).unwrap();
    }
    std::fs::write(tmp.path().join("task.yaml"), task).unwrap();
    tmp
}

/// `agentforge --workspace dir ...` with the model pointed at `server`.
fn cmd(dir: &Path, server: &ScriptedServer, args: &[&str]) -> Command {
    let mut c = agentforge(dir);
    c.args(args);
    for (k, v) in server.env_vars(KEY) {
        c.env(k, v);
    }
    c
}

const MODEL: [&str; 4] = ["--provider", "openai", "--model", "test-model"];

fn run_args<'a>(first: &[&'a str]) -> Vec<&'a str> {
    let mut v = first.to_vec();
    v.extend(MODEL);
    v
}

/// Spawns with stderr into `<dir>/<name>` (read with [`read`] after the exit).
fn spawn(mut c: Command, dir: &Path, name: &str) -> Child {
    let err = File::create(dir.join(name)).unwrap();
    c.stdout(Stdio::null()).stderr(err).spawn().unwrap()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Polls `cond` every 20 ms until it holds or `limit` passes; returns whether it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The exit code of `child` if it exits within `limit` (None: still running, or
/// killed by a signal).
fn exit_within(child: &mut Child, limit: Duration) -> Option<Option<i32>> {
    let mut status = None;
    wait_until(limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.map(|s| s.code())
}

fn send(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// A pid is alive if it exists and is not a zombie (a killed process stays a zombie
/// until its parent, or init, reaps it).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        })
        .unwrap_or(true);
    exists && !zombie
}

/// The pids the slow check wrote (its shell, a child shell, the grandchild `sleep`).
fn check_pids(dir: &Path) -> Vec<i32> {
    read(dir, "pids")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn wait_for_check(dir: &Path) -> Vec<i32> {
    assert!(
        wait_until(Duration::from_secs(120), || check_pids(dir).len() == 3),
        "the slow check never started: {}",
        read(dir, "run.err")
    );
    check_pids(dir)
}

fn steps(dir: &Path, id: &str) -> Vec<u64> {
    std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/actions.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn state(dir: &Path, id: &str) -> serde_yaml_ng::Value {
    let text =
        std::fs::read_to_string(dir.join(format!(".agentforge/tasks/{id}/state.yaml"))).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

fn fix_edit() -> Scripted {
    Scripted::tool_call(
        "edit_file",
        json!({"path": "notes.txt", "old_text": "status: broken", "new_text": "status: fixed"}),
    )
}

fn finishing_script() -> Vec<Scripted> {
    vec![
        Scripted::tool_call("run_tests", json!({})),
        fix_edit(),
        Scripted::tool_call("complete", json!({"summary": "status fixed"})),
    ]
}

fn assert_completed(dir: &Path, id: &str, out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    assert_eq!(steps(dir, id), [1, 2, 3], "each step exactly once");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
}

/// Runs the slow task until its check runs and sends `signal`: the binary exits with
/// 128 + the signal, no process of the check is left, nothing is recorded, and a resume
/// completes the task.
fn signal_during_check(signal: i32) {
    let tmp = workspace(&slow_task());
    let dir = tmp.path();
    let mut script = vec![Scripted::tool_call("run_tests", json!({}))];
    script.extend(finishing_script());
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(script)
        .start_background();
    let mut child = spawn(
        cmd(dir, &server, &run_args(&["run", "task.yaml"])),
        dir,
        "run.err",
    );
    let pids = wait_for_check(dir);
    assert!(dir.join(".agentforge/tasks/slow/running-groups").exists());
    send(&child, signal);

    let code = exit_within(&mut child, Duration::from_secs(10));
    let err = read(dir, "run.err");
    assert_eq!(code, Some(Some(128 + signal)), "{err}");
    assert!(
        err.contains("interrupted; `agentforge resume slow` continues"),
        "{err}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|p| !alive(*p))),
        "check processes {pids:?} outlived the interrupt"
    );
    // Nothing half-done was recorded; the record of running groups is gone with them.
    assert!(steps(dir, "slow").is_empty());
    assert_eq!(state(dir, "slow")["status"], "running");
    assert!(!dir.join(".agentforge/tasks/slow/running-groups").exists());

    std::fs::write(dir.join("fast"), "").unwrap();
    let out = cmd(dir, &server, &run_args(&["resume", "slow", "--quiet"]))
        .output()
        .unwrap();
    assert_completed(dir, "slow", &out);
}

#[test]
fn sigint_during_a_check_kills_its_group_and_resume_completes() {
    signal_during_check(libc::SIGINT);
}

#[test]
fn sigterm_during_a_check_exits_143_and_resume_completes() {
    signal_during_check(libc::SIGTERM);
}

#[test]
fn a_second_sigint_exits_at_once_and_still_kills_the_check() {
    let tmp = workspace(&slow_task());
    let dir = tmp.path();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(vec![Scripted::tool_call("run_tests", json!({}))])
        .start_background();
    let mut child = spawn(
        cmd(dir, &server, &run_args(&["run", "task.yaml"])),
        dir,
        "run.err",
    );
    let pids = wait_for_check(dir);
    send(&child, libc::SIGINT);
    send(&child, libc::SIGINT);
    let code = exit_within(&mut child, Duration::from_secs(10));
    let err = read(dir, "run.err");
    // Whichever of the two stops it first, the exit is an interrupt's.
    assert_eq!(code, Some(Some(130)), "{err}");
    assert!(err.contains("`agentforge resume slow` continues"), "{err}");
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|p| !alive(*p))),
        "check processes {pids:?} outlived the interrupt"
    );
    assert!(steps(dir, "slow").is_empty());
}

#[test]
fn sigint_during_the_model_request_cancels_it() {
    let tmp = workspace(&slow_task());
    let dir = tmp.path();
    std::fs::write(dir.join("fast"), "").unwrap();
    let mut script = vec![Scripted::delay(
        Duration::from_secs(120),
        Scripted::tool_call("run_tests", json!({})),
    )];
    script.extend(finishing_script());
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(script)
        .start_background();
    let mut child = spawn(
        cmd(dir, &server, &run_args(&["run", "task.yaml"])),
        dir,
        "run.err",
    );
    assert!(
        server.wait_for_requests_blocking(1, Duration::from_secs(120)),
        "{}",
        read(dir, "run.err")
    );
    send(&child, libc::SIGINT);
    let code = exit_within(&mut child, Duration::from_secs(10));
    let err = read(dir, "run.err");
    assert_eq!(code, Some(Some(130)), "{err}");
    assert!(err.contains("`agentforge resume slow` continues"), "{err}");
    assert!(steps(dir, "slow").is_empty());

    let out = cmd(dir, &server, &run_args(&["resume", "slow", "--quiet"]))
        .output()
        .unwrap();
    assert_completed(dir, "slow", &out);
}

#[test]
fn a_check_left_by_a_killed_host_is_killed_by_resume() {
    let tmp = workspace(&slow_task());
    let dir = tmp.path();
    let mut script = vec![Scripted::tool_call("run_tests", json!({}))];
    script.extend(finishing_script());
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(script)
        .start_background();
    let mut child = spawn(
        cmd(dir, &server, &run_args(&["run", "task.yaml"])),
        dir,
        "run.err",
    );
    let pids = wait_for_check(dir);
    send(&child, libc::SIGKILL);
    assert_eq!(exit_within(&mut child, Duration::from_secs(10)), Some(None));
    // SIGKILL gives the host no chance: its check runs on, in its own process group.
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");

    std::fs::write(dir.join("fast"), "").unwrap();
    let out = cmd(dir, &server, &run_args(&["resume", "slow", "--quiet"]))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains(&format!("killed process group {}", pids[0])),
        "{err}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids.iter().all(|p| !alive(*p))),
        "the old check {pids:?} survived the resume"
    );
    assert_completed(dir, "slow", &out);
}

#[test]
fn two_concurrent_resumes_one_runs_the_other_refuses_with_its_pid() {
    let tmp = workspace(&gated_task());
    let dir = tmp.path();
    let server = ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(finishing_script())
        .start_background();
    let out = cmd(dir, &server, &["task", "new", "task.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let args = run_args(&["resume", "gated", "--quiet"]);
    let mut a = spawn(cmd(dir, &server, &args), dir, "a.err");
    let mut b = spawn(cmd(dir, &server, &args), dir, "b.err");
    // The runner's check waits for `go`, so it holds the lock until the other has
    // given up.
    let mut first = None;
    assert!(
        wait_until(Duration::from_secs(120), || {
            if let Some(s) = a.try_wait().unwrap() {
                first = Some(('a', s.code()));
            } else if let Some(s) = b.try_wait().unwrap() {
                first = Some(('b', s.code()));
            }
            first.is_some()
        }),
        "neither resume ended: {} / {}",
        read(dir, "a.err"),
        read(dir, "b.err")
    );
    let (loser, code) = first.unwrap();
    let (winner, winner_err, loser_err) = match loser {
        'a' => (&mut b, "b.err", "a.err"),
        _ => (&mut a, "a.err", "b.err"),
    };
    let refusal = read(dir, loser_err);
    assert_eq!(code, Some(75), "{refusal}");
    assert!(
        refusal.contains(&format!("task `gated` is being run by pid {}", winner.id())),
        "{refusal}"
    );

    // Reading the task while it runs is fine (and repairs nothing under the runner).
    let show = cmd(dir, &server, &["task", "show", "gated"])
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));

    std::fs::write(dir.join("go"), "").unwrap();
    let code = exit_within(winner, Duration::from_secs(120));
    assert_eq!(code, Some(Some(0)), "{}", read(dir, winner_err));
    assert_eq!(steps(dir, "gated"), [1, 2, 3], "no step ran twice");
    assert_eq!(server.request_count(), 3);
}

/// Reads that never finish the task, over distinct files.
fn endless_server() -> ScriptedServer {
    let reads = (0..30).map(|i| {
        let f = ["a.txt", "b.txt", "c.txt", "notes.txt"][i % 4];
        Scripted::tool_call("read_file", json!({ "path": f }))
    });
    ScriptedServer::builder(Protocol::OpenAi)
        .api_key(KEY)
        .script(reads)
        .start_background()
}

#[test]
fn max_steps_flag_wins_over_the_task_file_and_is_kept_by_resume() {
    let tmp = workspace(&endless_task());
    let dir = tmp.path();
    let server = endless_server();
    let quiet = |first: &[&'static str]| {
        let mut v = run_args(first);
        v.push("--quiet");
        v
    };

    // The task file says 10: the flag wins.
    let out = cmd(
        dir,
        &server,
        &quiet(&["run", "task.yaml", "--max-steps", "2"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1, 2]);
    let st = state(dir, "endless");
    assert_eq!(st["status"], "budget_exhausted");
    assert_eq!(st["max_steps"], 2);
    assert_eq!(st["step_limit"]["source"], "flag");
    assert!(
        st["status_reason"]
            .as_str()
            .unwrap()
            .contains("--max-steps"),
        "{st:?}"
    );

    // A resume without the flag keeps the run's value: nothing more runs.
    let out = cmd(dir, &server, &quiet(&["resume", "endless"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1, 2]);

    // A resume with the flag sets it anew and runs up to it.
    let out = cmd(
        dir,
        &server,
        &quiet(&["resume", "endless", "--max-steps", "4"]),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1, 2, 3, 4]);
    assert_eq!(state(dir, "endless")["max_steps"], 4);

    let out = cmd(dir, &server, &quiet(&["resume", "endless"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1, 2, 3, 4]);
    assert_eq!(server.request_count(), 4);
}

#[test]
fn an_interrupted_run_resumes_with_its_max_steps() {
    let tmp = workspace(&endless_task());
    let dir = tmp.path();
    let server = endless_server();
    // The process dies at step 2, before the model call.
    let mut run = cmd(
        dir,
        &server,
        &run_args(&["run", "task.yaml", "--max-steps", "3", "--quiet"]),
    );
    run.env("AGENTFORGE_FAULT", "before_model@2");
    let out = run.output().unwrap();
    assert_eq!(out.status.code(), None, "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1]);

    let out = cmd(dir, &server, &run_args(&["resume", "endless", "--quiet"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        steps(dir, "endless"),
        [1, 2, 3],
        "the run's 3, not the task's 10"
    );
}

#[test]
fn without_the_flag_the_task_file_wins_over_the_config() {
    let tmp = workspace(&endless_task().replace("max_steps: 10", "max_steps: 2"));
    let dir = tmp.path();
    std::fs::write(dir.join("agentforge.toml"), "[limits]\nmax_steps = 7\n").unwrap();
    let server = endless_server();
    let out = cmd(dir, &server, &run_args(&["run", "task.yaml", "--quiet"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(steps(dir, "endless"), [1, 2]);
    assert_eq!(state(dir, "endless")["step_limit"]["source"], "task");
}

#[test]
fn commands_started_together_never_report_an_unwritable_workspace() {
    let tmp = workspace(&endless_task());
    let dir = tmp.path();
    let server = endless_server();
    let children: Vec<Child> = (0..8)
        .map(|i| {
            spawn(
                cmd(dir, &server, &run_args(&["resume", "missing"])),
                dir,
                &format!("{i}.err"),
            )
        })
        .collect();
    for (i, mut c) in children.into_iter().enumerate() {
        let status = c.wait().unwrap();
        let err = read(dir, &format!("{i}.err"));
        assert!(!err.contains("not writable"), "{err}");
        assert!(err.contains("no task `missing`"), "{err}");
        assert_eq!(status.code(), Some(64), "{err}");
    }
    // `resume` of an unknown task may stop before probing: no folder, no probe left.
    let left: Vec<_> = std::fs::read_dir(dir.join(".agentforge"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("write-probe"))
        .collect();
    assert!(left.is_empty(), "probes left behind: {left:?}");
}
