//! The value loop through the `agentforge` binary, offline: the bundled example sprint
//! (examples/sprint-slugkit) replayed from its recorded answers and delivered end to end
//! (status, views, the git safety net, a crate that really passes `cargo test`); killed
//! with SIGKILL at several points and resumed to the same end as an uninterrupted run;
//! answered by a scripted model server on 127.0.0.1 in both wire formats; and a sprint
//! folder the CLI refuses clearly.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::built_plugins::{plugins, root};
use support::notes::agentforge;
use support::scripted_server::{Protocol, Scripted, ScriptedServer};

/// The sprint's id: the example folder's name.
const SPRINT: &str = "sprint-slugkit";

/// What the example's event log decides, in order: the six pre-loop gates, the seven
/// iterations, the end.
const EXPECTED_DECISIONS: [&str; 13] = [
    "gate input",
    "gate vision",
    "gate discovery",
    "gate prd_critique",
    "gate plan",
    "gate plan_review",
    "EXECUTE",
    "EXECUTE",
    "GENERATE_QC",
    "RUN_QC",
    "FIX",
    "CRITICAL_EVAL",
    "EXIT_GATE ended delivered",
];

fn example() -> PathBuf {
    root().join("examples").join(SPRINT)
}

fn session() -> PathBuf {
    example().join("session")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// `git -C ws args` (identity given), its stdout; panics on failure.
fn git(ws: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
}

/// A workspace holding the example's project, committed once in a new repository. Its
/// .gitignore keeps only `/target` out: the safety net must keep `.agentforge/` out of
/// the commits by itself.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    copy_dir(&example().join("project"), ws);
    std::fs::write(ws.join(".gitignore"), "/target\n").unwrap();
    git(ws, &["init", "--quiet"]);
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "--quiet", "-m", "init"]);
    tmp
}

/// `agentforge --workspace ws` with none of the caller's provider variables, nor a
/// target folder that would send the workspace's builds elsewhere.
fn cli(ws: &Path) -> Command {
    let mut c = agentforge(ws);
    c.env_remove("CARGO_TARGET_DIR");
    c
}

/// `agentforge run <example> --replay <session> --plugins <plugins>` to its end.
fn run_example(ws: &Path) -> Output {
    cli(ws)
        .arg("run")
        .arg(example())
        .arg("--replay")
        .arg(session())
        .arg("--plugins")
        .arg(plugins())
        .output()
        .expect("agentforge runs")
}

fn sprint_dir(ws: &Path) -> PathBuf {
    ws.join(".agentforge/sprints").join(SPRINT)
}

fn task_dir(ws: &Path, task: &str) -> PathBuf {
    ws.join(".agentforge/tasks").join(task)
}

/// The sprint's event log, one JSON value per line (every line must parse).
fn events(ws: &Path) -> Vec<Value> {
    std::fs::read_to_string(sprint_dir(ws).join("iterations.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// One word per event: `gate <name>`, the iteration's action, or `finished <outcome>`;
/// an event that ended the sprint in the same line adds ` ended <outcome>`.
fn decisions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let word = match e["kind"].as_str().unwrap() {
                "gate" => format!("gate {}", e["name"].as_str().unwrap()),
                "iteration" => e["decision"]["action"].as_str().unwrap().to_string(),
                "finished" => format!("finished {}", e["end"]["outcome"].as_str().unwrap()),
                other => panic!("unknown event kind {other}: {e}"),
            };
            match e["kind"].as_str() {
                Some("finished") => word,
                _ => match e["ended"]["outcome"].as_str() {
                    Some(o) => format!("{word} ended {o}"),
                    None => word,
                },
            }
        })
        .collect()
}

fn status_json(ws: &Path) -> Value {
    let out = cli(ws).args(["--json", "status", SPRINT]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

/// `(step, action)` of each record of a task's actions.jsonl.
fn task_steps(ws: &Path, task: &str) -> Vec<(u64, String)> {
    std::fs::read_to_string(task_dir(ws, task).join("actions.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{task}: {e}: {l}"));
            (
                v["step"].as_u64().unwrap(),
                v["action"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The task folders of the workspace.
fn task_ids(ws: &Path) -> BTreeSet<String> {
    std::fs::read_dir(ws.join(".agentforge/tasks"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// The subjects of the commits after `init` on the current branch, oldest first.
fn commit_subjects(ws: &Path) -> Vec<String> {
    let root_commit = git(ws, &["rev-list", "--max-parents=0", "HEAD"]);
    git(
        ws,
        &[
            "log",
            "--reverse",
            "--format=%s",
            &format!("{}..HEAD", root_commit.trim()),
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

fn read(ws: &Path, rel: &str) -> String {
    std::fs::read_to_string(ws.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The files the sprint writes in the project.
const PRODUCT_FILES: [&str; 3] = ["src/lib.rs", "tests/slugify.rs", "tests/truncate.rs"];

/// The log's `seq` is 1..n; each role task has consecutive, unrepeated steps and appears
/// in exactly one event; no task folder belongs to no event.
fn assert_log_invariants(ws: &Path, what: &str) {
    let events = events(ws);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{what}: seq is 1..n without gap or repeat");
    let mut owner: BTreeMap<String, u64> = BTreeMap::new();
    for e in &events {
        for t in e["role_tasks"].as_array().into_iter().flatten() {
            let t = t.as_str().unwrap().to_string();
            if let Some(first) = owner.insert(t.clone(), e["seq"].as_u64().unwrap()) {
                panic!(
                    "{what}: role task {t} is in events {first} and {}",
                    e["seq"]
                );
            }
        }
    }
    assert_eq!(
        owner.keys().cloned().collect::<BTreeSet<_>>(),
        task_ids(ws),
        "{what}: every role task folder belongs to exactly one recorded event"
    );
    for task in owner.keys() {
        let steps: Vec<u64> = task_steps(ws, task).iter().map(|s| s.0).collect();
        let expected: Vec<u64> = (1..=steps.len() as u64).collect();
        assert_eq!(steps, expected, "{what}: {task}: each step recorded once");
    }
}

// ------------------------------------------------------------------ 1. end to end

#[test]
fn the_example_sprint_is_delivered_end_to_end() {
    let tmp = workspace();
    let ws = tmp.path();
    let out = run_example(ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("delivered"), "{}", stdout(&out));

    // Status as JSON.
    let st = status_json(ws);
    assert_eq!(st["sprint"], SPRINT);
    assert_eq!(st["phase"], "finished", "{st:#}");
    assert_eq!(st["outcome"]["outcome"], "delivered", "{st:#}");
    assert_eq!(st["iteration"], 7, "{st:#}");
    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{st:#}");
    assert!(tasks.iter().all(|t| t["status"] == "done"), "{st:#}");
    assert_eq!(
        tasks.iter().map(|t| t["id"].clone()).collect::<Vec<_>>(),
        ["T1", "T2"]
    );
    let verifications = st["verifications"].as_array().unwrap();
    assert_eq!(verifications.len(), 3, "{st:#}");
    assert!(
        verifications.iter().all(|v| v["status"] == "passed"),
        "{st:#}"
    );
    assert_eq!(st["measure"]["verifications_passing"], 3, "{st:#}");
    assert_eq!(st["measure"]["acceptance_proven"], 2, "{st:#}");
    assert!(st["tokens_used"].as_u64().unwrap() > 0, "{st:#}");
    let per_role: u64 = st["tokens_per_role"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(st["tokens_used"].as_u64().unwrap(), per_role, "{st:#}");

    // The event log: the pre-loop gates, the seven decisions, the end.
    let events = events(ws);
    assert_eq!(decisions(&events), EXPECTED_DECISIONS);
    // The pre-loop's share of the tokens (issue goal: under 15%): the host's counts of
    // what each role was sent, deterministic under replay.
    let tokens = |e: &Value| -> u64 {
        e["tokens"]
            .as_object()
            .map(|m| m.values().map(|v| v.as_u64().unwrap()).sum())
            .unwrap_or(0)
    };
    let first_execute = events
        .iter()
        .position(|e| e["decision"]["action"] == "EXECUTE")
        .unwrap();
    let before: u64 = events[..first_execute].iter().map(tokens).sum();
    let total: u64 = events.iter().map(tokens).sum();
    assert_eq!(total, st["tokens_used"].as_u64().unwrap());
    assert!(
        before * 100 < total * 15,
        "the pre-loop took {before} of {total} tokens"
    );
    assert!(events[..6]
        .iter()
        .all(|e| e["kind"] == "gate" && e["state_after"].is_object()));
    // The exit gate's event carries the end: no kill can separate the two.
    assert_eq!(events.last().unwrap()["ended"]["outcome"], "delivered");
    assert_log_invariants(ws, "uninterrupted");
    let last_state = &events.last().unwrap()["state_after"];
    assert_eq!(last_state["phase"], "finished");
    assert_eq!(last_state["tokens_used"], st["tokens_used"]);

    // The views.
    let dir = sprint_dir(ws);
    let report = std::fs::read_to_string(dir.join("DELIVERY_REPORT.md")).unwrap();
    assert!(report.contains("Outcome: delivered"), "{report}");
    for view in ["IMPLEMENTATION_PLAN.md", "VALUE_CHECKLIST.md"] {
        assert!(dir.join(view).is_file(), "{view}");
    }

    // The product: both functions, and the crate's own tests really pass.
    let lib = read(ws, "src/lib.rs");
    assert!(
        lib.contains("pub fn slugify(title: &str) -> String"),
        "{lib}"
    );
    assert!(
        lib.contains("pub fn truncate_slug(slug: &str, max: usize) -> String"),
        "{lib}"
    );
    let tested = Command::new("cargo")
        .args(["test", "--offline", "--quiet"])
        .current_dir(ws)
        .env("CARGO_TARGET_DIR", ws.join("target"))
        .output()
        .unwrap();
    assert!(
        tested.status.success(),
        "cargo test in the delivered workspace: {}{}",
        stdout(&tested),
        stderr(&tested)
    );

    // The git safety net: the sprint's branch, one commit per iteration that changed
    // files (its hash in the iteration's outcome), nothing of .agentforge ever tracked.
    assert_eq!(
        git(ws, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        format!("agentforge/{SPRINT}")
    );
    let mut committed = Vec::new();
    for e in events.iter().filter(|e| e["kind"] == "iteration") {
        let n = e["state_after"]["iteration"].as_u64().unwrap();
        let outcome = e["outcome"].as_str().unwrap();
        if let Some(rest) = outcome.split("(commit ").nth(1) {
            let hash = rest.trim_end_matches(')');
            let subject = git(ws, &["log", "-1", "--format=%s", hash]);
            assert!(
                subject.starts_with(&format!("{SPRINT} iteration {n}: ")),
                "commit {hash} of iteration {n}: {subject}"
            );
            let changed = git(ws, &["show", "--format=", "--name-only", hash]);
            assert!(!changed.trim().is_empty(), "commit {hash} changes files");
            committed.push(n);
        }
    }
    // The builders (1, 2), the QC author (3) and the fixer (5) changed files; running the
    // verifications (4) and the evaluator (6, 7) did not.
    assert_eq!(committed, [1, 2, 3, 5]);
    let subjects = commit_subjects(ws);
    assert_eq!(subjects.len(), committed.len(), "{subjects:?}");
    for (s, n) in subjects.iter().zip(&committed) {
        assert!(s.starts_with(&format!("{SPRINT} iteration {n}: ")), "{s}");
    }
    let ever_tracked = git(ws, &["log", "--all", "--format=", "--name-only"]);
    assert!(
        !ever_tracked.lines().any(|l| l.starts_with(".agentforge")),
        "{ever_tracked}"
    );
    let changed: Vec<String> = git(ws, &["status", "--porcelain"])
        .lines()
        .filter(|l| !l[3..].starts_with(".agentforge"))
        .map(str::to_string)
        .collect();
    assert!(changed.is_empty(), "uncommitted work: {changed:?}");

    // `render` rewrites the three views from the state.
    let before: Vec<String> = [
        "IMPLEMENTATION_PLAN.md",
        "VALUE_CHECKLIST.md",
        "DELIVERY_REPORT.md",
    ]
    .iter()
    .map(|v| std::fs::read_to_string(dir.join(v)).unwrap())
    .collect();
    std::fs::remove_file(dir.join("DELIVERY_REPORT.md")).unwrap();
    std::fs::write(dir.join("VALUE_CHECKLIST.md"), "edited by hand\n").unwrap();
    std::fs::write(dir.join("IMPLEMENTATION_PLAN.md"), "").unwrap();
    let out = cli(ws).args(["render", SPRINT]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for (view, text) in [
        "IMPLEMENTATION_PLAN.md",
        "VALUE_CHECKLIST.md",
        "DELIVERY_REPORT.md",
    ]
    .iter()
    .zip(&before)
    {
        assert!(stdout(&out).contains(view), "{}", stdout(&out));
        assert_eq!(
            &std::fs::read_to_string(dir.join(view)).unwrap(),
            text,
            "{view}"
        );
    }

    // `status` as text names the outcome.
    let out = cli(ws).args(["status", SPRINT]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(SPRINT) && text.contains("delivered"),
        "{text}"
    );
    assert!(text.contains("2 done"), "{text}");
    assert!(text.contains("3 of 3 passing"), "{text}");

    // `context` of a role task shows what the runner offered it: its report tools too.
    let out = cli(ws)
        .args(["--json", "context", &format!("{SPRINT}-005-planner")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ctx: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let tools: Vec<&str> = ctx["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"manage_task"), "{tools:?}");
    assert!(!tools.contains(&"report_vrc"), "{tools:?}");

    // A role task is resumed only inside its sprint.
    let out = cli(ws)
        .args(["resume", &format!("{SPRINT}-007-builder")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("agentforge resume {SPRINT}")),
        "{}",
        stderr(&out)
    );
}

// ------------------------------------------------------------------ 2. kill -9 and resume

/// When to kill the running binary.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// Once the sprint's log holds this many lines.
    Events(usize),
    /// Once the role task `<sprint>-<name>` recorded this many steps (mid role task).
    Steps(&'static str, usize),
    /// This long after the log first held this many lines (a random instant).
    Later(usize, Duration),
}

/// The lines (complete or not) of a file; 0 when it does not exist.
fn lines(p: &Path) -> usize {
    std::fs::read(p)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

/// Git's lock files the safety net's commands hold while they run.
const GIT_LOCKS: [&str; 3] = [
    ".git/index.lock",
    ".git/HEAD.lock",
    ".git/refs/heads/agentforge/sprint-slugkit.lock",
];

/// Whether to kill now.
///
/// The exit gate's event (the 13th) carries the end (`ended`) in the same append, so a
/// kill after it leaves an ended sprint, which a resume must leave as it is: random
/// instants may land there too. Instants left alone: while one of the safety net's git
/// commands holds a lock file (a kill leaves the lock behind, and git then refuses every
/// later commit of the workspace until someone removes it).
fn fire(trigger: Trigger, ws: &Path, reached: &mut Option<Instant>) -> bool {
    let events = lines(&sprint_dir(ws).join("iterations.jsonl"));
    if GIT_LOCKS.iter().any(|l| ws.join(l).exists()) {
        return false;
    }
    match trigger {
        Trigger::Events(n) => events >= n,
        Trigger::Steps(name, n) => {
            lines(&task_dir(ws, &format!("{SPRINT}-{name}")).join("actions.jsonl")) >= n
        }
        Trigger::Later(n, delay) => {
            events >= n && reached.get_or_insert_with(Instant::now).elapsed() >= delay
        }
    }
}

/// The session (field 6 of `/proc/<pid>/stat`) of a live, non-zombie process.
fn session_of(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    fields.get(3)?.parse().ok()
}

/// The live processes of session `sid`.
fn session_members(sid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|&pid| session_of(pid) == Some(sid))
        .collect()
}

/// SIGKILL to every process of the binary's session (its own group and each command's
/// group: the host runs every check in a group of its own), until none is left.
fn kill_session(sid: i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // SAFETY: kill/killpg have no memory-safety preconditions.
        unsafe {
            libc::killpg(sid, libc::SIGKILL);
        }
        let members = session_members(sid);
        if members.is_empty() {
            return;
        }
        for pid in members {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        assert!(
            Instant::now() < deadline,
            "processes of session {sid} survive SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `run` (first) or `resume` of the example sprint in a session of its own (so
/// every process it starts can be found and killed), stderr into `log`.
fn spawn_sprint(ws: &Path, first: bool, log: &Path) -> Child {
    let mut c = cli(ws);
    if first {
        c.arg("run").arg(example()).arg("--replay").arg(session());
    } else {
        // The replay folder is kept by the sprint (run.json); the plugins are not.
        c.args(["resume", SPRINT]);
    }
    c.arg("--plugins").arg(plugins());
    c.stdout(Stdio::null()).stderr(File::create(log).unwrap());
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().expect("agentforge starts")
}

/// Runs the example sprint, killing it with SIGKILL at each trigger in turn (each on a
/// new process: `run` first, `resume` after), then resumes it once more, which must
/// deliver. Returns how many kills landed.
fn run_with_kills(ws: &Path, log: &Path, triggers: &[Trigger], what: &str) -> usize {
    let mut first = true;
    let mut kills = 0;
    let mut done = false;
    for (i, trigger) in triggers.iter().enumerate() {
        let started = Instant::now();
        let mut child = spawn_sprint(ws, first, log);
        first = false;
        let sid = i32::try_from(child.id()).unwrap();
        let mut reached = None;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if fire(*trigger, ws, &mut reached) {
                kill_session(sid);
                break child.wait().unwrap();
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "{what}: kill {i} ({trigger:?}) never fired: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(2));
        };
        // Nothing the killed host started is left running.
        kill_session(sid);
        assert!(session_members(sid).is_empty());
        match (status.code(), status.signal()) {
            (None, Some(libc::SIGKILL)) => kills += 1,
            (Some(0), _) => {
                done = true;
                break;
            }
            other => panic!(
                "{what}: kill {i} ({trigger:?}): the binary ended with {other:?}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
    if !done {
        // Resumed once more, the sprint runs to its end.
        let mut child = spawn_sprint(ws, first, log);
        let status = child.wait().unwrap();
        kill_session(i32::try_from(child.id()).unwrap());
        assert_eq!(
            status.code(),
            Some(0),
            "{what}: the last resume: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    kills
}

/// What two runs of the example must share at the end.
#[derive(Debug, PartialEq)]
struct EndState {
    /// `status --json` but its folder and tokens.
    status: Value,
    /// `tokens_per_role` (compared within a margin: see [`assert_same_tokens`]).
    tokens: BTreeMap<String, u64>,
    decisions: Vec<String>,
    role_tasks: BTreeMap<String, Vec<(u64, String)>>,
    files: Vec<String>,
    commits: Vec<String>,
}

fn end_state(ws: &Path) -> EndState {
    let mut status = status_json(ws);
    let obj = status.as_object_mut().unwrap();
    obj.remove("folder");
    let tokens: BTreeMap<String, u64> = obj
        .remove("tokens_per_role")
        .unwrap()
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    let used = obj.remove("tokens_used").unwrap().as_u64().unwrap();
    assert_eq!(
        used,
        tokens.values().sum::<u64>(),
        "tokens_used is the roles' sum"
    );
    let role_tasks = task_ids(ws)
        .into_iter()
        .map(|t| {
            let steps = task_steps(ws, &t);
            (t, steps)
        })
        .collect();
    EndState {
        status,
        tokens,
        decisions: decisions(&events(ws)),
        role_tasks,
        files: PRODUCT_FILES.iter().map(|f| read(ws, f)).collect(),
        commits: commit_subjects(ws),
    }
}

/// The replayed roles' tokens are the host's count of each prompt, and a prompt quotes
/// command output that differs between any two runs (a panicking test thread's id, a
/// duration), so a role's tokens may differ by a few; a step counted twice or lost
/// would differ by a whole prompt (over 1,000 tokens for every step of the example).
fn assert_same_tokens(got: &BTreeMap<String, u64>, want: &BTreeMap<String, u64>, what: &str) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: roles"
    );
    for (role, w) in want {
        let g = got[role];
        assert!(
            g.abs_diff(*w) < 100,
            "{what}: {role} used {g} tokens, {w} in the uninterrupted run"
        );
    }
}

/// A small deterministic generator (splitmix64) for the random kill instants.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn kill_9_at_several_points_then_resume_gives_the_same_end_state() {
    let reference_ws = workspace();
    let out = run_example(reference_ws.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reference = end_state(reference_ws.path());
    assert_eq!(reference.decisions, EXPECTED_DECISIONS);

    // At chosen points: after the input gate, mid planner (one task added of two), mid
    // builder (src/lib.rs written, the task not reported), after the second build, mid
    // QC author (tests written, one verification registered), after running the
    // verifications, mid fixer, mid evaluator (tests run, no VRC yet), during the exit
    // gate's measurements, and once the end is recorded (the delivery views not yet
    // written, or written: either way the resume must leave the end as it is).
    let chosen = [
        Trigger::Events(1),
        Trigger::Steps("005-planner", 1),
        Trigger::Steps("007-builder", 2),
        Trigger::Events(8),
        Trigger::Steps("009-qc_author", 4),
        Trigger::Events(10),
        Trigger::Steps("011-fixer", 2),
        Trigger::Steps("012-evaluator", 1),
        Trigger::Events(12),
        Trigger::Events(13),
    ];
    // At random instants: each a random delay after a random number of events (the seed
    // is printed by a failure; SPRINT_KILL_SEED replays it).
    let seed: u64 = std::env::var("SPRINT_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let mut rng = seed;
    let random: Vec<Trigger> = (0..4)
        .map(|_| {
            Trigger::Later(
                1 + (splitmix(&mut rng) % 12) as usize,
                Duration::from_millis(splitmix(&mut rng) % 600),
            )
        })
        .collect();

    for (name, triggers, at_least) in [
        ("chosen points", &chosen[..], chosen.len() - 1),
        ("random instants", &random[..], 0),
    ] {
        let what = format!("{name} (SPRINT_KILL_SEED={seed}, {triggers:?})");
        let tmp = workspace();
        let ws = tmp.path();
        let logs = tempfile::tempdir().unwrap();
        let kills = run_with_kills(ws, &logs.path().join("stderr"), triggers, &what);
        assert!(
            kills >= at_least,
            "{what}: only {kills} kill(s) landed before the end"
        );
        assert_log_invariants(ws, &what);
        let got = end_state(ws);
        assert_eq!(got.status, reference.status, "{what}: status");
        assert_same_tokens(&got.tokens, &reference.tokens, &what);
        assert_eq!(got.decisions, reference.decisions, "{what}: decisions");
        assert_eq!(
            got.role_tasks, reference.role_tasks,
            "{what}: role tasks' steps"
        );
        assert_eq!(got.files, reference.files, "{what}: the product");
        // One commit per iteration that changed files, as uninterrupted: a resume must not
        // commit the interrupted iteration's unverified work under another name.
        assert_eq!(got.commits, reference.commits, "{what}: the commits");
        eprintln!("{what}: {kills} kill(s)");
    }
}

// ------------------------------------------------------------------ 3. both wire formats

/// The report tools each role's requests must offer.
fn report_tools(role: &str) -> &'static [&'static str] {
    match role {
        "planner" => &["manage_task"],
        "builder" => &["report_task_complete", "request_human_action"],
        "qc_author" => &["register_verification"],
        "evaluator" => &["report_eval_finding", "report_vrc"],
        _ => &[],
    }
}

/// The report tool of a pre-loop gate's critic or classifier, by its session file.
fn gate_report_tool(job: &str) -> Option<&'static str> {
    match job {
        "002-critic" => Some("report_vision_validation"),
        "003-classifier" => Some("report_discovery"),
        "004-critic" | "006-critic" => Some("report_critique"),
        _ => None,
    }
}

/// The role prompt's opening, as each role's system prompt says it.
fn role_prompt(role: &str) -> String {
    match role {
        "qc_author" => "You are the QC author of a value loop".to_string(),
        r => format!("You are the {r} of a value loop"),
    }
}

/// One scripted answer per recorded line of the example's sessions, in seq order, each
/// with its own usage; and for each, the job (`<seq>-<role>`) it answers.
fn script_from_sessions() -> (Vec<Scripted>, Vec<String>, Vec<(u64, u64)>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(session())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let (mut script, mut jobs, mut usage) = (Vec::new(), Vec::new(), Vec::new());
    for f in files {
        let job = f.file_stem().unwrap().to_string_lossy().to_string();
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).unwrap();
            let i = script.len() as u64;
            let u = (1000 + 37 * i, 20 + 3 * i);
            script.push(
                Scripted::tool_call(v["tool"].as_str().unwrap(), v["arguments"].clone())
                    .with_usage(u.0, u.1),
            );
            jobs.push(job.clone());
            usage.push(u);
        }
    }
    (script, jobs, usage)
}

/// Micro-dollars as the host shows them: every significant digit, at least cents.
fn dollars(micros: u64) -> String {
    let frac = format!("{:06}", micros % 1_000_000);
    let digits = frac.trim_end_matches('0');
    let digits = if digits.len() < 2 { &frac[..2] } else { digits };
    format!("${}.{digits}", micros / 1_000_000)
}

fn sprint_through(protocol: Protocol) {
    let (script, jobs, usage) = script_from_sessions();
    let server = ScriptedServer::builder(protocol)
        .script(script.clone())
        .start_background();
    let tmp = workspace();
    let ws = tmp.path();
    let (kind, key_var) = match protocol {
        Protocol::Anthropic => ("anthropic", "ANTHROPIC_API_KEY"),
        Protocol::OpenAi => ("openai", "OPENAI_API_KEY"),
    };
    let mut config = read(ws, "agentforge.toml");
    config.push_str(&format!(
        "\n[provider]\nkind = \"{kind}\"\nbase_url = \"{}\"\nmodel = \"scripted-model\"\nmax_retries = 0\n\
         [pricing.\"scripted-model\"]\ninput_per_mtok = 3\noutput_per_mtok = 15\n",
        server.base_url()
    ));
    std::fs::write(ws.join("agentforge.toml"), config).unwrap();
    let out = cli(ws)
        .arg("run")
        .arg(example())
        .arg("--plugins")
        .arg(plugins())
        .env(key_var, "sk-test-sprint-0123")
        .output()
        .unwrap();
    let what = kind.to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}\nanswered: {:?}",
        stderr(&out),
        server
            .requests()
            .iter()
            .map(|r| r.answered.clone())
            .collect::<Vec<_>>()
    );

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        script.len(),
        "{what}: one request per answer"
    );
    assert_eq!(server.remaining(), 0, "{what}");
    let mut per_role: BTreeMap<String, u64> = BTreeMap::new();
    // Micro-dollars per role at $3 in / $15 out per million tokens.
    let mut cost_per_role: BTreeMap<String, u64> = BTreeMap::new();
    for (i, r) in requests.iter().enumerate() {
        assert!(
            r.is_valid(),
            "{what}: request {i}: {:?}",
            r.validation_error
        );
        assert_eq!(r.model(), Some("scripted-model"));
        let job = &jobs[i];
        // `<seq>-<role>`, or `<seq>-vrc-<role>` for the heartbeat's VRC.
        let heartbeat = job.contains("-vrc-");
        let role = job.rsplit('-').next().unwrap();
        let system = r.system_text();
        assert!(
            system.contains(&role_prompt(role)),
            "{what}: request {i} ({job}): system prompt: {system}"
        );
        let tools = r.tool_names();
        let expected: &[&str] = if heartbeat {
            &["report_vrc"]
        } else {
            report_tools(role)
        };
        for t in expected.iter().chain(gate_report_tool(job).iter()) {
            assert!(
                tools.iter().any(|n| n == t),
                "{what}: request {i} ({job}) offers no {t}: {tools:?}"
            );
        }
        // The answer's tool was offered (else it would have been refused).
        let answered = r.answered.trim_start_matches("tool_call ");
        assert!(
            tools.iter().any(|n| n == answered),
            "{what}: request {i} ({job}): {answered} not in {tools:?}"
        );
        *per_role.entry(role.to_string()).or_default() += usage[i].0 + usage[i].1;
        *cost_per_role.entry(role.to_string()).or_default() += usage[i].0 * 3 + usage[i].1 * 15;
    }

    let st = status_json(ws);
    assert_eq!(st["outcome"]["outcome"], "delivered", "{what}: {st:#}");
    assert_eq!(st["phase"], "finished", "{what}");
    let total: u64 = usage.iter().map(|(i, o)| i + o).sum();
    assert_eq!(
        st["tokens_used"].as_u64(),
        Some(total),
        "{what}: the sprint's tokens are the server's usage"
    );
    let reported: BTreeMap<String, u64> = st["tokens_per_role"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(reported, per_role, "{what}: tokens per role");
    // Cost beside the tokens: per role in the status, the sum in the delivery report.
    let costs: BTreeMap<String, u64> = st["cost_per_role"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["usd_micros"].as_u64().unwrap()))
        .collect();
    assert_eq!(costs, cost_per_role, "{what}: cost per role");
    let cost: u64 = cost_per_role.values().sum();
    let report = std::fs::read_to_string(sprint_dir(ws).join("DELIVERY_REPORT.md")).unwrap();
    assert!(
        report.contains(&format!("- Cost: {} (", dollars(cost))),
        "{what}: {report}"
    );
    assert_eq!(decisions(&events(ws)), EXPECTED_DECISIONS, "{what}");
    assert_log_invariants(ws, &what);
}

#[test]
fn the_example_sprint_runs_through_both_wire_formats() {
    for protocol in [Protocol::Anthropic, Protocol::OpenAi] {
        sprint_through(protocol);
    }
}

// ------------------------------------------------------------------ 4. refusals

#[test]
fn a_sprint_folder_without_prd_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let input = tmp.path().join("my-sprint");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::copy(example().join("VISION.md"), input.join("VISION.md")).unwrap();

    // VISION.md without PRD.md.
    let out = cli(&ws).arg("run").arg(&input).output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("PRD.md"), "{}", stderr(&out));
    assert!(
        !ws.join(".agentforge/sprints/my-sprint").exists(),
        "a refused folder creates no sprint"
    );

    // With PRD.md the sprint is created (its first model call has no recording here,
    // so it stops there: exit 1, resumable).
    std::fs::copy(example().join("PRD.md"), input.join("PRD.md")).unwrap();
    let empty = tmp.path().join("no-sessions");
    std::fs::create_dir_all(&empty).unwrap();
    let out = cli(&ws)
        .arg("run")
        .arg(&input)
        .arg("--replay")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let kept = ws.join(".agentforge/sprints/my-sprint/VISION.md");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        read(&input, "VISION.md")
    );

    // The same folder with another VISION.md: refused, naming --sprint; the sprint's
    // copy is untouched.
    let original = read(&input, "VISION.md");
    std::fs::write(
        input.join("VISION.md"),
        format!("{original}\nAlso: slugs in French.\n"),
    )
    .unwrap();
    let out = cli(&ws)
        .arg("run")
        .arg(&input)
        .arg("--replay")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("--sprint"), "{}", stderr(&out));
    assert!(stderr(&out).contains("my-sprint"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), original);
}

/// The VRC heartbeat (on by default): after every iteration that ran no evaluator, a
/// VRC, full (the evaluator) in iterations 1-3 and 5, quick (the classifier) otherwise;
/// a role that reports none leaves the fallback snapshot. The sprint still delivers.
#[test]
fn the_vrc_heartbeat_scores_every_iteration() {
    let tmp = workspace();
    let ws = tmp.path();
    let sessions = tempfile::tempdir().unwrap();
    copy_dir(&session(), sessions.path());
    let vrc = |score: f64, summary: &str| {
        json!({"tool": "report_vrc", "arguments": {
            "value_score": score, "deliverables_verified": 0, "deliverables_total": 2,
            "recommendation": "CONTINUE", "summary": summary}})
        .to_string()
    };
    // Iterations 1, 2, 3 and 5 (events 7, 8, 9, 11): full, by the evaluator.
    for (seq, score) in [(7, 0.2), (8, 0.4), (9, 0.5), (11, 0.8)] {
        std::fs::write(
            sessions
                .path()
                .join(format!("{seq:03}-vrc-evaluator.jsonl")),
            vrc(score, "full"),
        )
        .unwrap();
    }
    // Iteration 4 (RUN_QC): quick, by the classifier, which reports an impossible score
    // (refused) and then gives up: no VRC, so the fallback snapshot.
    std::fs::write(
        sessions.path().join("010-vrc-classifier.jsonl"),
        format!(
            "{}\n{}\n",
            vrc(1.7, "too good"),
            json!({"tool": "escalate", "arguments": {"reason": "cannot score"}})
        ),
    )
    .unwrap();
    let out = cli(ws)
        .arg("run")
        .arg(example())
        .arg("--replay")
        .arg(sessions.path())
        .arg("--plugins")
        .arg(plugins())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = events(ws);
    let iterations: Vec<&Value> = events.iter().filter(|e| e["kind"] == "iteration").collect();
    assert_eq!(iterations.len(), 7);
    for e in &iterations {
        let state = &e["state_after"];
        let n = state["iteration"].as_u64().unwrap();
        let last = state["vrc_history"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["iteration"], n, "iteration {n}: {last}");
        let (full, fallback) = match n {
            4 => (false, true),
            // 6 and 7 are the critical evaluation and the exit gate: their evaluator's.
            6 => (false, false),
            _ => (true, false),
        };
        assert_eq!(last["full"], full, "iteration {n}: {last}");
        assert_eq!(last["fallback"], fallback, "iteration {n}: {last}");
    }
    // The refused call is in the quick VRC's log, fed back like any refused action.
    let quick = std::fs::read_to_string(
        task_dir(ws, &format!("{SPRINT}-010-vrc-classifier")).join("actions.jsonl"),
    )
    .unwrap();
    assert!(quick.contains("VALIDATION_ERROR"), "{quick}");
}

/// `[value_loop] vrc_every_iteration = false` turns the heartbeat off: no VRC role task
/// runs, and only the evaluator's critical evaluation and exit gate score the sprint.
#[test]
fn the_vrc_heartbeat_can_be_turned_off() {
    let tmp = workspace();
    let ws = tmp.path();
    let mut config = std::fs::read_to_string(ws.join("agentforge.toml")).unwrap();
    config.push_str("\n[value_loop]\nvrc_every_iteration = false\n");
    std::fs::write(ws.join("agentforge.toml"), config).unwrap();
    let out = run_example(ws);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ids = task_ids(ws);
    assert!(ids.iter().all(|t| !t.contains("-vrc-")), "{ids:?}");
    let state: Value = serde_json::from_str(&read_sprint_json(ws)).unwrap();
    let scored: Vec<u64> = state["vrc_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["iteration"].as_u64().unwrap())
        .collect();
    assert_eq!(scored, [6, 7], "{state:#}");
}

fn read_sprint_json(ws: &Path) -> String {
    std::fs::read_to_string(sprint_dir(ws).join("sprint.json")).unwrap()
}
