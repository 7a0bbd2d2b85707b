//! Crash safety: kill the `agentforge` process at every point of every step of a run,
//! resume it, and check that no recorded step is lost or executed twice, that a torn log
//! line is detected, saved and cut, that every step's log record points to its whole
//! trajectory and no trajectory outlives a step that was not recorded, and that the
//! workspace ends exactly as in an uninterrupted run.

use std::path::Path;
use std::process::{Command, Output};

const SESSION: &str = r#"{"tool":"run_tests","arguments":{}}
{"tool":"read_file","arguments":{"path":"notes.txt"}}
{"tool":"edit_file","arguments":{"path":"notes.txt","old_text":"status: broken","new_text":"status: fixed"}}
{"tool":"complete","arguments":{"summary":"fixed"}}
"#;

const TASK: &str = r#"id: crash-task
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
max_steps: 10
"#;

const POINTS: &[&str] = &[
    "before_model",
    "after_model",
    "after_action",
    "after_trajectory",
    "after_memory",
    "torn_log",
    "after_log",
    "after_state",
];

fn setup(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), "title: demo\nstatus: broken\n").unwrap();
    std::fs::write(dir.join("task.yaml"), TASK).unwrap();
    std::fs::write(dir.join("session.jsonl"), SESSION).unwrap();
}

fn agentforge(dir: &Path, args: &[&str], fault: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentforge"));
    cmd.current_dir(dir)
        .arg("--workspace")
        .arg(dir)
        .args(args)
        .arg("--quiet");
    cmd.env_remove("AGENTFORGE_FAULT");
    if let Some(f) = fault {
        cmd.env("AGENTFORGE_FAULT", f);
    }
    cmd.output().expect("agentforge runs")
}

fn logged_steps(dir: &Path) -> Vec<u64> {
    let log =
        std::fs::read_to_string(dir.join(".agentforge/tasks/crash-task/actions.jsonl")).unwrap();
    log.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("every line parses");
            v["step"].as_u64().unwrap()
        })
        .collect()
}

fn torn_files(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".agentforge/tasks/crash-task"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("actions.jsonl.torn-")
        })
        .count()
}

#[test]
fn uninterrupted_run_is_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    setup(tmp.path());
    let out = agentforge(
        tmp.path(),
        &["run", "task.yaml", "--replay", "session.jsonl"],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(logged_steps(tmp.path()), [1, 2, 3, 4]);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("notes.txt")).unwrap(),
        "title: demo\nstatus: fixed\n"
    );
}

#[test]
fn kill_at_every_point_then_resume_keeps_the_invariants() {
    for step in 1..=4u64 {
        for point in POINTS {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            setup(dir);
            let fault = format!("{point}@{step}");
            let out = agentforge(
                dir,
                &["run", "task.yaml", "--replay", "session.jsonl"],
                Some(&fault),
            );
            assert_eq!(
                out.status.code(),
                None,
                "{fault}: the process should have died: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let before: Vec<u64> = logged_steps_or_empty(dir);
            // What was recorded before the crash is never lost.
            let expected_before: Vec<u64> = match *point {
                "after_log" | "after_state" => (1..=step).collect(),
                _ => (1..step).collect(),
            };
            if *point != "torn_log" {
                assert_eq!(before, expected_before, "{fault}: log before resume");
            }

            let out = agentforge(
                dir,
                &["resume", "crash-task", "--replay", "session.jsonl"],
                None,
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{fault}: resume failed: {stderr}"
            );
            assert_eq!(
                logged_steps(dir),
                [1, 2, 3, 4],
                "{fault}: each step exactly once"
            );
            assert_eq!(
                std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
                "title: demo\nstatus: fixed\n",
                "{fault}: workspace"
            );
            let state =
                std::fs::read_to_string(dir.join(".agentforge/tasks/crash-task/state.yaml"))
                    .unwrap();
            let parsed: serde_json::Value = serde_yaml_ng::from_str(&state)
                .unwrap_or_else(|e| panic!("{fault}: state.yaml reads as YAML: {e}\n{state}"));
            // A YAML reader (an earlier version of the host) reads it as the typed state.
            let typed: Result<agentforge::state_store::TaskState, _> =
                serde_yaml_ng::from_str(&state);
            assert!(typed.is_ok(), "{fault}: {typed:?}\n{state}");
            assert_eq!(parsed["status"], "complete", "{fault}: {state}");
            assert_eq!(parsed["step"], 4, "{fault}: {state}");
            if *point == "torn_log" {
                assert_eq!(torn_files(dir), 1, "{fault}: torn line saved");
                assert!(
                    stderr.contains("torn"),
                    "{fault}: torn line reported: {stderr}"
                );
            } else {
                assert_eq!(torn_files(dir), 0, "{fault}: nothing torn");
            }
            if *point == "after_log" {
                assert!(
                    stderr.contains("rebuilt"),
                    "{fault}: lagging state reported: {stderr}"
                );
            }
            if *point == "after_trajectory" {
                assert!(
                    stderr.contains(&format!("removed the trajectory of step {step}")),
                    "{fault}: orphan trajectory reported: {stderr}"
                );
            }
            assert_trajectories(dir, &fault);
        }
    }
}

/// One trajectory per recorded step, no other (the pack holds exactly one whole member
/// per step, in order, and nothing after them), each the one its record points to (the
/// binary's `show` checks the hash and decodes it) and answering that step.
fn assert_trajectories(dir: &Path, fault: &str) {
    let folder = dir.join(".agentforge/tasks/crash-task/trajectories");
    let files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["steps.jsonl.gz"], "{fault}: trajectories");
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::MultiGzDecoder::new(
            std::fs::File::open(folder.join("steps.jsonl.gz")).unwrap(),
        ),
        &mut text,
    )
    .unwrap_or_else(|e| panic!("{fault}: the pack is not whole gzip members: {e}"));
    let packed: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(packed, [1, 2, 3, 4], "{fault}: steps in the pack");
    let tools = ["run_tests", "read_file", "edit_file", "complete"];
    for (i, tool) in tools.iter().enumerate() {
        let step = (i + 1).to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_agentforge"))
            .current_dir(dir)
            .args([
                "--workspace",
                ".",
                "--json",
                "show",
                "crash-task",
                "--step",
                &step,
            ])
            .env_remove("AGENTFORGE_FAULT")
            .output()
            .expect("agentforge runs");
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{fault}: show --step {step}: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(shown["step"], i as u64 + 1, "{fault}");
        assert_eq!(shown["answer"]["name"], *tool, "{fault}: step {step}");
    }
}

fn logged_steps_or_empty(dir: &Path) -> Vec<u64> {
    let p = dir.join(".agentforge/tasks/crash-task/actions.jsonl");
    match std::fs::read_to_string(p) {
        Ok(log) => log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["step"].as_u64().unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}
