//! A task's git history through the binary (issue 13, item 3): in a workspace that is
//! the top of a repository, a task works on its own branch with one commit per step
//! that changed files; `diff` shows them; `undo` puts the files back and rewinds the
//! task's log and state with them; a dirty tree is refused (or stashed with
//! `--stash`); kills between a step and its commit, and inside an undo, lose nothing.
//!
//! The model's side is a replayed session; the check is a real `grep`.

use crate::support;

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};
use support::notes::{agentforge, notes_task, notes_workspace, FIXED};

const TASK: &str = "fix-notes";
const BRANCH: &str = "agentforge/fix-notes";
const ORIGINAL: &str = "title: demo\nstatus: broken\n";
const HALF: &str = "title: demo\nstatus: half fixed\n";
const DONE: &str = "title: demo\nstatus: fixed\n";

fn git(ws: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository whose first commit holds `notes.txt`; `task.yaml` stays untracked (a
/// person's file the task must neither commit nor remove).
fn repo() -> (tempfile::TempDir, tempfile::TempDir) {
    // The check also leaves a file behind, as a build leaves its output: a new file a
    // command made is not the task's change to commit.
    let check = format!("echo ran >> check.log; {FIXED}");
    let ws = notes_workspace(&notes_task(TASK, &check, 10));
    git(ws.path(), &["init", "-q", "-b", "main"]);
    git(ws.path(), &["add", "notes.txt"]);
    git(ws.path(), &["commit", "-q", "-m", "notes"]);
    // The model's answers: read, a first change (the check still fails), the fix, done.
    let session = tempfile::tempdir().unwrap();
    let lines = [
        json!({"tool": "read_file", "arguments": {"path": "notes.txt"}}),
        json!({"tool": "write_file", "arguments": {"path": "notes.txt", "content": HALF}}),
        json!({"tool": "write_file", "arguments": {"path": "notes.txt", "content": DONE}}),
        json!({"tool": "complete", "arguments": {"summary": "status fixed"}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(session.path().join("s.jsonl"), text).unwrap();
    (ws, session)
}

fn run(ws: &Path, session: &Path, extra: &[&str]) -> Output {
    agentforge(ws)
        .args(["run", "task.yaml", "--replay"])
        .arg(session.join("s.jsonl"))
        .args(extra)
        .output()
        .unwrap()
}

fn cli(ws: &Path, args: &[&str]) -> Output {
    agentforge(ws).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn notes(ws: &Path) -> String {
    std::fs::read_to_string(ws.join("notes.txt")).unwrap()
}

fn task_dir(ws: &Path) -> std::path::PathBuf {
    ws.join(".agentforge/tasks").join(TASK)
}

/// The steps of the task's log, in order.
fn logged_steps(ws: &Path) -> Vec<u64> {
    std::fs::read_to_string(task_dir(ws).join("actions.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn state(ws: &Path) -> Value {
    let out = cli(ws, &["--json", "task", "show", TASK]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["state"].clone()
}

/// The task's commits since `main`, oldest first: (subject, step trailer).
fn task_commits(ws: &Path) -> Vec<(String, u64)> {
    let log = git(
        ws,
        &[
            "log",
            "--reverse",
            "--format=%s%x00%(trailers:key=AgentForge-Step,valueonly)%x1e",
            "main..HEAD",
        ],
    );
    log.split('\u{1e}')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            let (subject, step) = c.trim().split_once('\0').unwrap();
            (subject.to_string(), step.trim().parse().unwrap())
        })
        .collect()
}

fn archived_steps(ws: &Path) -> Vec<u64> {
    let mut steps = Vec::new();
    for e in std::fs::read_dir(task_dir(ws)).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("actions.undone-") {
            for l in std::fs::read_to_string(e.path()).unwrap().lines() {
                steps.push(
                    serde_json::from_str::<Value>(l).unwrap()["step"]
                        .as_u64()
                        .unwrap(),
                );
            }
        }
    }
    steps.sort();
    steps
}

#[test]
fn a_task_works_on_its_branch_and_undo_rewinds_its_files_log_and_state() {
    let (ws, session) = repo();
    let ws = ws.path();
    let out = run(ws, session.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(BRANCH), "{}", text(&out.stderr));
    assert_eq!(git(ws, &["rev-parse", "--abbrev-ref", "HEAD"]), BRANCH);
    // One commit per step that changed files, named by the step.
    let commits = task_commits(ws);
    assert_eq!(
        commits.iter().map(|c| c.1).collect::<Vec<_>>(),
        [2, 3],
        "{commits:?}"
    );
    assert!(
        commits[0].0.contains("step 2 write_file notes.txt"),
        "{commits:?}"
    );
    let bodies = git(ws, &["log", "--format=%B", "main..HEAD"]);
    assert!(bodies.contains("verified: 1 of 1 checks pass"), "{bodies}");
    assert!(bodies.contains("verified: 0 of 1 checks pass"), "{bodies}");
    // Only the task's changes: not the person's untracked file, not the state folder.
    let files = git(ws, &["log", "--name-only", "--format=", "main..HEAD"]);
    assert_eq!(
        files.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
        ["notes.txt", "notes.txt"]
    );
    assert_eq!(
        git(ws, &["status", "--porcelain"]),
        "?? check.log\n?? task.yaml"
    );
    // Nothing was pushed anywhere (there is no remote to push to, and none was added).
    assert_eq!(git(ws, &["remote"]), "");

    let diff = cli(ws, &["diff", TASK]);
    assert!(diff.status.success(), "{}", text(&diff.stderr));
    assert!(
        text(&diff.stdout).contains("-status: broken"),
        "{}",
        text(&diff.stdout)
    );
    assert!(
        text(&diff.stdout).contains("+status: fixed"),
        "{}",
        text(&diff.stdout)
    );
    let stat = cli(ws, &["diff", TASK, "--stat"]);
    assert!(
        text(&stat.stdout).contains("notes.txt | 2"),
        "{}",
        text(&stat.stdout)
    );

    // Undo the last change: files as after step 2, the log and state after step 2.
    let undo = cli(ws, &["undo", TASK]);
    assert_eq!(undo.status.code(), Some(0), "{}", text(&undo.stderr));
    assert!(
        text(&undo.stdout).contains("back after step 2"),
        "{}",
        text(&undo.stdout)
    );
    assert_eq!(notes(ws), HALF);
    assert_eq!(logged_steps(ws), [1, 2]);
    let st = state(ws);
    assert_eq!(st["step"], 2, "{st:#}");
    assert_eq!(st["status"], "running", "{st:#}");
    assert_eq!(archived_steps(ws), [3, 4]);
    assert_eq!(task_commits(ws).len(), 1);
    // The undone steps' trajectories went with their records; `show` is at step 2.
    let trajectories = ws.join(".agentforge/tasks").join(TASK).join("trajectories");
    let names = |d: &Path| {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let kept = names(&trajectories);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0], "steps.jsonl.gz");
    assert!(kept[1].starts_with("undone-"), "{kept:?}");
    assert_eq!(names(&trajectories.join(&kept[1])), ["steps.jsonl.gz"]);
    assert_eq!(packed_steps(&trajectories.join("steps.jsonl.gz")), [1, 2]);
    assert_eq!(
        packed_steps(&trajectories.join(&kept[1]).join("steps.jsonl.gz")),
        [3, 4]
    );
    let shown = cli(ws, &["--json", "show", TASK]);
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown.stderr));
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["step"], 2, "{shown}");

    // Out of range: a clear error, nothing changed.
    let bad = cli(ws, &["undo", TASK, "--to-step", "7"]);
    assert_eq!(bad.status.code(), Some(64), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("--to-step 7"),
        "{}",
        text(&bad.stderr)
    );
    assert_eq!(logged_steps(ws), [1, 2]);

    // Back to the start: the files as committed, the task as created; the person's
    // untracked file is still there.
    let undo = cli(ws, &["undo", TASK, "--to-step", "0"]);
    assert_eq!(undo.status.code(), Some(0), "{}", text(&undo.stderr));
    assert_eq!(notes(ws), ORIGINAL);
    assert!(logged_steps(ws).is_empty());
    assert_eq!(state(ws)["step"], 0);
    assert!(ws.join("task.yaml").exists());
    assert_eq!(archived_steps(ws), [1, 2, 3, 4]);
    assert!(task_commits(ws).is_empty());
    let nothing = cli(ws, &["undo", TASK]);
    assert_eq!(nothing.status.code(), Some(64));
    assert!(
        text(&nothing.stderr).contains("nothing to undo"),
        "{}",
        text(&nothing.stderr)
    );

    // The task runs again from there, on the same branch.
    let out = cli(ws, &["resume", TASK]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(notes(ws), DONE);
    assert_eq!(logged_steps(ws), [1, 2, 3, 4]);
    assert_eq!(
        task_commits(ws).iter().map(|c| c.1).collect::<Vec<_>>(),
        [2, 3]
    );
}

#[test]
fn a_dirty_tree_is_refused_and_stash_takes_the_changes_aside() {
    let (ws, session) = repo();
    let ws = ws.path();
    std::fs::write(ws.join("notes.txt"), "title: mine\nstatus: broken\n").unwrap();
    let out = run(ws, session.path(), &[]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    for word in [
        "uncommitted changes",
        "notes.txt",
        "--stash",
        "[git] enabled = false",
    ] {
        assert!(err.contains(word), "{word}: {err}");
    }
    assert_eq!(git(ws, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "title: mine\nstatus: broken\n"
    );
    assert!(logged_steps(ws).is_empty());
    // Refused before the task was created: nothing to clean up.
    assert!(!task_dir(ws).exists());

    let out = run(ws, session.path(), &["--stash"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("stashed"),
        "{}",
        text(&out.stderr)
    );
    assert!(git(ws, &["stash", "list"]).contains("agentforge: before task fix-notes"));
    // The person's change is in the stash, not in the task's commits.
    let task_diff = git(ws, &["diff", "main..HEAD"]);
    assert!(!task_diff.contains("mine"), "{task_diff}");
    assert!(git(ws, &["stash", "show", "-p"]).contains("+title: mine"));
}

#[test]
fn git_stays_off_when_asked_or_outside_a_repository() {
    // --no-git, and `[git] enabled = false`.
    for (flags, config) in [
        (&["--no-git"][..], ""),
        (&[][..], "[git]\nenabled = false\n"),
    ] {
        let (ws, session) = repo();
        let ws = ws.path();
        std::fs::write(ws.join("agentforge.toml"), config).unwrap();
        git(ws, &["add", "agentforge.toml"]);
        git(ws, &["commit", "-q", "-m", "config"]);
        let out = run(ws, session.path(), flags);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(git(ws, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
        assert_eq!(git(ws, &["branch", "--list", BRANCH]), "");
        let diff = cli(ws, &["diff", TASK]);
        assert_eq!(diff.status.code(), Some(64));
        assert!(
            text(&diff.stderr).contains("no git history"),
            "{}",
            text(&diff.stderr)
        );
    }
    // Not a repository: the task runs as ever.
    let ws = notes_workspace(&notes_task(TASK, FIXED, 10));
    let (_, session) = repo();
    let out = run(ws.path(), session.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("git:"), "{}", text(&out.stderr));
}

#[test]
fn kills_between_a_step_and_its_commit_and_inside_an_undo_lose_nothing() {
    let (ws, session) = repo();
    let ws = ws.path();
    // Killed once step 2 is recorded, before its commit.
    let out = agentforge(ws)
        .env("AGENTFORGE_FAULT", "after_state@2")
        .args(["run", "task.yaml", "--replay"])
        .arg(session.path().join("s.jsonl"))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(logged_steps(ws), [1, 2]);
    assert!(task_commits(ws).is_empty());
    let out = cli(ws, &["resume", TASK]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("left uncommitted by an interrupted run"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        task_commits(ws).iter().map(|c| c.1).collect::<Vec<_>>(),
        [2, 3]
    );

    // An undo killed after the files went back, before the log did: the next command
    // that opens the task finishes it first.
    let out = agentforge(ws)
        .env("AGENTFORGE_FAULT", "undo_files@2")
        .args(["undo", TASK, "--to-step", "2"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(notes(ws), HALF);
    assert_eq!(logged_steps(ws), [1, 2, 3, 4]);
    // `task show` (which repairs with the task's lock) finishes it before reading.
    let shown = state(ws);
    assert_eq!(shown["step"], 2, "{shown:#}");
    assert_eq!(logged_steps(ws), [1, 2]);
    assert!(!task_dir(ws).join("rewind.json").exists());
    let again = cli(ws, &["undo", TASK, "--to-step", "2"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(logged_steps(ws), [1, 2]);
    assert_eq!(notes(ws), HALF);

    // Killed after the log was cut, before the state was written: resume finishes it.
    let out = agentforge(ws)
        .env("AGENTFORGE_FAULT", "rewind_log@0")
        .args(["undo", TASK, "--to-step", "0"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(notes(ws), ORIGINAL);
    let out = cli(ws, &["resume", TASK]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("starting at step 1"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(notes(ws), DONE);
    assert_eq!(logged_steps(ws), [1, 2, 3, 4]);
    assert_eq!(archived_steps(ws), [1, 2, 3, 4]);
}

/// The steps of a trajectory pack's members, read as `zcat` reads it.
fn packed_steps(pack: &Path) -> Vec<u64> {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(pack).unwrap()),
        &mut text,
    )
    .unwrap();
    text.lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect()
}
