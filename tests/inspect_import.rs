//! `agentforge inspect loops` through the binary on every format it reads: a task's own log
//! (made by running the bundled example with the replay provider), an `actions.jsonl` by
//! path (also torn), the minimal step format, SWE-agent `.traj` files, OpenHands event
//! streams and folders (real files in `tests/data/trajectories/`), with `--format auto`
//! and named formats, and the errors a user meets.
//!
//! The binary's detections must equal the library's replay of the same file: the command
//! adds reading, nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agentforge::loops::import::{read_steps, Format};
use agentforge::loops::{Detection, LoopDetector};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn sample(rel: &str) -> PathBuf {
    root().join("tests/data/trajectories").join(rel)
}

/// The binary in an empty workspace (default thresholds, no provider variables).
fn agentforge(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentforge"));
    c.current_dir(dir).arg("--workspace").arg(dir);
    for v in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"] {
        c.env_remove(v);
    }
    c
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn inspect(dir: &Path, args: &[&str]) -> Output {
    agentforge(dir)
        .args(["inspect", "loops"])
        .args(args)
        .output()
        .unwrap()
}

/// `inspect loops --json <path>` equals the library's replay of the file, and the text
/// form names the step count and the format.
fn assert_same_as_library(dir: &Path, path: &Path, format: Format) {
    let p = path.to_str().unwrap();
    let expected = LoopDetector::default().replay(&read_steps(path).unwrap());
    for args in [
        vec!["--json", p],
        vec!["--json", "--format", format.as_str(), p],
    ] {
        let out = inspect(dir, &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        // Typed, so confidences (f32) compare as written, not widened to f64.
        let got: Vec<Detection> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, expected, "{args:?}");
    }
    let out = inspect(dir, &[p]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let n = read_steps(path).unwrap().len();
    assert!(
        stdout(&out).starts_with(&format!("{n} steps replayed ({format})\n")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn swe_agent_and_openhands_files_replay_like_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    for (rel, format) in [
        ("swe-agent/pydicom__pydicom-1458.traj", Format::SweAgent),
        (
            "swe-agent/marshmallow-code__marshmallow-1867.traj",
            Format::SweAgent,
        ),
        ("swe-agent/function_calling_simple.traj", Format::SweAgent),
        ("openhands/wrong_initial_state.json", Format::OpenHands),
        ("openhands/basic_gui_mode.json", Format::OpenHands),
        (
            "openhands/multi_swe_bench_ponyc-4593.jsonl",
            Format::OpenHands,
        ),
    ] {
        assert_same_as_library(tmp.path(), &sample(rel), format);
    }
    // The real loop in the SWE-agent run is reported in text too.
    let out = inspect(
        tmp.path(),
        &[sample("swe-agent/pydicom__pydicom-1458.traj")
            .to_str()
            .unwrap()],
    );
    let text = stdout(&out);
    assert!(
        text.contains("block: replace_lines:pydicom/pixel_data_handlers/numpy_handler.py"),
        "{text}"
    );
}

#[test]
fn an_openhands_event_folder_and_the_minimal_step_format() {
    let tmp = tempfile::tempdir().unwrap();
    let events: Value = serde_json::from_str(
        &std::fs::read_to_string(sample("openhands/multi_swe_bench_ponyc-4593.jsonl")).unwrap(),
    )
    .unwrap();
    let folder = tmp.path().join("sessions/s1/events");
    std::fs::create_dir_all(&folder).unwrap();
    for e in events["history"].as_array().unwrap() {
        std::fs::write(folder.join(format!("{}.json", e["id"])), e.to_string()).unwrap();
    }
    assert_same_as_library(
        tmp.path(),
        &tmp.path().join("sessions/s1"),
        Format::OpenHands,
    );

    let labelled = root().join("tests/data/loops/blind/legit_poll_cargo_release_build.jsonl");
    assert_same_as_library(tmp.path(), &labelled, Format::Steps);
    let looping = std::fs::read_dir(root().join("tests/data/loops"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("heldout_loop_identical")
        })
        .unwrap();
    assert_same_as_library(tmp.path(), &looping, Format::Steps);
}

#[test]
fn a_tasks_own_log_by_id_by_path_and_torn() {
    // A real AgentForge log: the bundled example run with its recorded session.
    let example = root().join("examples/fix-failing-test");
    let tmp = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-R")
        .arg(example.join("project/."))
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(status.success());
    let out = agentforge(tmp.path())
        .arg("run")
        .arg(example.join("task.yaml"))
        .arg("--replay")
        .arg(example.join("session.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = tmp
        .path()
        .join(".agentforge/tasks/fix-word-count/actions.jsonl");
    assert_same_as_library(tmp.path(), &log, Format::AgentForge);
    let by_id = inspect(tmp.path(), &["--json", "fix-word-count"]);
    let by_path = inspect(tmp.path(), &["--json", log.to_str().unwrap()]);
    assert_eq!(by_id.status.code(), Some(0), "{}", stderr(&by_id));
    assert_eq!(stdout(&by_id), stdout(&by_path));
    let text = stdout(&inspect(tmp.path(), &["fix-word-count"]));
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(
        text.starts_with(&format!("{lines} steps replayed (agentforge)")),
        "{text}"
    );

    // A crash tore the last line: it is skipped with a note naming it.
    let full = std::fs::read_to_string(&log).unwrap();
    let last = full.lines().last().unwrap();
    let torn = tmp.path().join("torn-actions.jsonl");
    std::fs::write(&torn, format!("{full}{}", &last[..last.len() / 2])).unwrap();
    let out = inspect(tmp.path(), &[torn.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("{lines} steps replayed")),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("note: ")
            && err.contains(&format!("line {}", lines + 1))
            && err.contains("torn"),
        "{err}"
    );
}

#[test]
fn bad_sources_fail_with_exit_64_naming_file_position_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let traj = sample("swe-agent/function_calling_simple.traj");
    let traj = traj.to_str().unwrap();

    // A format that does not fit: the reader says where.
    let out = inspect(tmp.path(), &["--format", "steps", traj]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("function_calling_simple.traj: line 1"),
        "{}",
        stderr(&out)
    );

    // An unknown format name is refused before anything is read.
    let out = inspect(tmp.path(), &["--format", "sweagent", traj]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("swe-agent"), "{}", stderr(&out));

    // A step without its result.
    let bad = tmp.path().join("steps.jsonl");
    std::fs::write(
        &bad,
        "{\"step\": 1, \"action\": \"read_file\", \"result\": \"success\"}\n{\"step\": 2, \"action\": \"run_command\"}\n",
    )
    .unwrap();
    let out = inspect(tmp.path(), &[bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("steps.jsonl: line 2: field `result`: missing (required)"),
        "{}",
        stderr(&out)
    );

    // Text that is no known format, and a task that does not exist.
    let notes = tmp.path().join("notes.txt");
    std::fs::write(&notes, "just some notes\n").unwrap();
    let out = inspect(tmp.path(), &[notes.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("--format"), "{}", stderr(&out));
    let out = inspect(tmp.path(), &["no-such-task"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("no-such-task"), "{}", stderr(&out));
}
