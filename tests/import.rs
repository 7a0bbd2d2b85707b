//! The importers of `agentforge inspect loops` (`agentforge_loops::import`) on real files:
//! SWE-agent `.traj` files and OpenHands event streams copied from those projects'
//! repositories (`tests/data/trajectories/`, licenses there), the labelled data of
//! `tests/data/loops/` in the minimal step format (checked against its JSON Schema), and
//! malformed input, which must fail with the file, the position and the field named.
//!
//! Expected values are read from the sample files themselves (observations, thoughts, exit
//! codes, tool-call arguments), so the tests check the conversion rules of
//! `docs/loop-steps.md`, not a copy of the importer's output.

use std::path::{Path, PathBuf};

use agentforge_core::state::ActionResult;
use agentforge_loops::import::{self, detect_format, read_steps, Format, ImportError, Position};
use agentforge_loops::{LoopDetector, LoopType, StepView};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

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

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The hash the importers must give an output: `sha256:` and 32 hex digits of its SHA-256.
fn tagged(text: &str) -> String {
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{}", &hex[..32])
}

fn actions(steps: &[StepView]) -> Vec<&str> {
    steps.iter().map(|s| s.action.as_str()).collect()
}

/// Every step carries its output with the right length and hash.
fn assert_outputs_hashed(steps: &[StepView]) {
    for s in steps {
        if let Some(out) = &s.output {
            assert_eq!(s.output_len, Some(out.len()), "step {}", s.step);
            assert_eq!(
                s.output_hash.as_deref(),
                Some(tagged(out).as_str()),
                "step {}",
                s.step
            );
        }
    }
}

/// Steps are numbered 1, 2, ... in order.
fn assert_numbered(steps: &[StepView]) {
    let numbers: Vec<u64> = steps.iter().map(|s| s.step).collect();
    let expected: Vec<u64> = (1..=steps.len() as u64).collect();
    assert_eq!(numbers, expected);
}

// ---------------------------------------------------------------- SWE-agent

#[test]
fn swe_agent_line_range_edits_rejected_for_syntax_errors_are_a_loop() {
    let path = sample("swe-agent/pydicom__pydicom-1458.traj");
    let traj = json_of(&path);
    let entries = traj["trajectory"].as_array().unwrap();
    let steps = read_steps(&path).unwrap();
    assert_eq!(steps.len(), entries.len());
    assert_numbered(&steps);
    assert_eq!(
        actions(&steps),
        [
            "write_file",
            "replace_lines",
            "run_command",
            "find_files",
            "read_file",
            "replace_lines",
            "replace_lines",
            "replace_lines",
            "replace_lines",
            "run_command",
            "run_command",
            "complete"
        ]
    );
    for (s, e) in steps.iter().zip(entries) {
        assert_eq!(
            s.output.as_deref(),
            e["observation"].as_str(),
            "step {}",
            s.step
        );
        assert_eq!(
            s.thought.as_deref(),
            e["thought"].as_str(),
            "step {}",
            s.step
        );
        let rejected = e["observation"]
            .as_str()
            .unwrap()
            .starts_with("Your proposed edit has introduced new syntax error");
        if rejected {
            assert_eq!(s.result, ActionResult::Failure, "step {}", s.step);
            assert!(
                s.error.as_deref().unwrap().contains("E999 SyntaxError"),
                "{s:?}"
            );
        }
    }
    assert_outputs_hashed(&steps);
    // The line-range edit names the open file (from `state`), relative to the working
    // directory like the path `open` was given.
    assert_eq!(steps[4].target, steps[5].target);
    assert_eq!(
        steps[5].target.as_deref(),
        Some("pydicom/pixel_data_handlers/numpy_handler.py")
    );
    assert_eq!(steps[5].parameters["start_line"], 287);
    assert_eq!(steps[5].parameters["end_line"], 295);
    // A traceback fails the command; the error is the exception line.
    assert_eq!(steps[2].result, ActionResult::Failure);
    assert!(steps[2]
        .error
        .as_deref()
        .unwrap()
        .starts_with("AttributeError:"));
    assert_eq!(steps[2].target.as_deref(), Some("python"));
    assert_eq!(steps[9].result, ActionResult::Success);

    // Three identical rejected edits in a row: the detector sees the loop by step 8.
    let found = LoopDetector::default().replay(&steps);
    assert!(
        found.iter().any(|d| d.step <= 8
            && d.block
                .as_deref()
                .is_some_and(|b| b.starts_with("replace_lines:"))),
        "{found:#?}"
    );
}

#[test]
fn swe_agent_search_replace_edits_insert_and_state_objects() {
    let path = sample("swe-agent/marshmallow-code__marshmallow-1867.traj");
    let traj = json_of(&path);
    let entries = traj["trajectory"].as_array().unwrap();
    let steps = read_steps(&path).unwrap();
    assert_eq!(steps.len(), entries.len());
    assert_eq!(
        actions(&steps),
        [
            "write_file",
            "insert_lines",
            "run_command",
            "run_command",
            "find_files",
            "read_file",
            "edit_file",
            "edit_file",
            "run_command",
            "run_command",
            "complete"
        ]
    );
    // `edit 'search' 'replace'` is parsed as SWE-agent quotes it.
    let words = shlex_words(entries[7]["action"].as_str().unwrap());
    assert_eq!(steps[7].parameters["old_text"], json!(words[1]));
    assert_eq!(steps[7].parameters["new_text"], json!(words[2]));
    assert_eq!(
        steps[7].target.as_deref(),
        Some("src/marshmallow/fields.py")
    );
    assert_eq!(steps[6].result, ActionResult::Failure);
    assert!(
        steps[6].error.as_deref().unwrap().contains("E999"),
        "{:?}",
        steps[6]
    );
    assert_eq!(steps[7].result, ActionResult::Success);
    assert_eq!(
        steps[4].parameters,
        json!({"pattern": "fields.py", "path": "src"})
    );
    assert_eq!(steps[5].parameters["line"], 1474);
    let targets: Vec<Option<&str>> = steps[2..4].iter().map(|s| s.target.as_deref()).collect();
    assert_eq!(targets, [Some("python"), Some("ls")]);
    for (s, e) in steps.iter().zip(entries) {
        assert_eq!(s.output.as_deref(), e["observation"].as_str());
    }
    assert_outputs_hashed(&steps);
}

/// Independent of the importer's own splitting: SWE-agent single-quotes its arguments.
fn shlex_words(action: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = action;
    while let Some(start) = rest.find('\'') {
        if words.is_empty() {
            words.push(rest[..start].trim().to_string());
        }
        let end = start + 1 + rest[start + 1..].find('\'').unwrap();
        words.push(rest[start + 1..end].to_string());
        rest = &rest[end + 1..];
    }
    words
}

#[test]
fn swe_agent_history_only_traj_takes_calls_from_tool_calls() {
    let path = sample("swe-agent/function_calling_simple.traj");
    let traj = json_of(&path);
    assert!(traj.get("trajectory").is_none());
    let history = traj["history"].as_array().unwrap();
    let calls: Vec<&Value> = history
        .iter()
        .filter(|m| m["message_type"] == "action")
        .collect();
    let steps = read_steps(&path).unwrap();
    assert_eq!(steps.len(), calls.len());
    assert_eq!(
        actions(&steps),
        [
            "find_files",
            "read_file",
            "edit_file",
            "run_command",
            "complete"
        ]
    );
    let edit_args: Value = serde_json::from_str(
        calls[2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(steps[2].parameters["old_text"], edit_args["search"]);
    assert_eq!(steps[2].parameters["new_text"], edit_args["replace"]);
    // The open file comes from the earlier `open`, as there is no `state` here.
    assert_eq!(steps[2].target.as_deref(), Some("tests/missing_colon.py"));
    for (s, call) in steps.iter().zip(&calls) {
        assert_eq!(s.thought.as_deref(), call["thought"].as_str());
    }
    // Each step's output is the tool message answering it.
    let answers: Vec<&str> = history
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let outputs: Vec<&str> = steps.iter().map(|s| s.output.as_deref().unwrap()).collect();
    assert_eq!(outputs, answers);
    assert_outputs_hashed(&steps);
    assert!(steps.iter().all(|s| s.result == ActionResult::Success));
}

// ---------------------------------------------------------------- OpenHands

/// Agent actions that are steps, by the rules (not user/environment events, not the
/// harness's own actions).
fn agent_actions(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.get("action").is_some() && e["source"] == "agent")
        .filter(|e| {
            !matches!(
                e["action"].as_str(),
                Some("system" | "recall" | "change_agent_state")
            )
        })
        .collect()
}

fn observation_of<'a>(events: &'a [Value], action: &Value) -> Option<&'a Value> {
    events
        .iter()
        .find(|e| e.get("observation").is_some() && e["cause"] == action["id"])
}

#[test]
fn openhands_event_array_pairs_actions_with_their_observations() {
    let path = sample("openhands/wrong_initial_state.json");
    let events = json_of(&path);
    let events = events.as_array().unwrap();
    let steps = read_steps(&path).unwrap();
    let acts = agent_actions(events);
    assert_eq!(steps.len(), acts.len());
    assert_eq!(
        actions(&steps),
        ["read_file", "run_command", "read_file", "complete"]
    );
    for (s, a) in steps.iter().zip(&acts) {
        assert_eq!(
            s.thought.as_deref(),
            a["args"]["thought"].as_str(),
            "step {}",
            s.step
        );
        if let Some(obs) = observation_of(events, a) {
            assert_eq!(
                s.output.as_deref(),
                obs["content"].as_str(),
                "step {}",
                s.step
            );
        }
    }
    assert_eq!(steps[0].target.as_deref(), Some("/workspace"));
    assert_eq!(steps[1].target.as_deref(), Some("mv"));
    assert_eq!(steps[1].parameters["command"], acts[1]["args"]["command"]);
    assert!(steps.iter().all(|s| s.result == ActionResult::Success));
    // Reading the same folder twice, with a different listing the second time.
    assert_ne!(steps[0].output_hash, steps[2].output_hash);
    assert_outputs_hashed(&steps);
}

#[test]
fn openhands_edits_take_their_arguments_from_the_tool_call() {
    let path = sample("openhands/basic_gui_mode.json");
    let events = json_of(&path);
    let events = events.as_array().unwrap();
    let steps = read_steps(&path).unwrap();
    let acts = agent_actions(events);
    assert_eq!(steps.len(), acts.len());
    assert_eq!(
        actions(&steps),
        [
            "run_command",
            "write_file",
            "write_file",
            "run_command",
            "message"
        ]
    );
    for (s, a) in steps
        .iter()
        .zip(&acts)
        .filter(|(s, _)| s.action == "write_file")
    {
        let meta = &a["tool_call_metadata"];
        let call = meta["model_response"]["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == meta["tool_call_id"])
            .unwrap();
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args["command"], "create");
        let text = args["file_text"].as_str().unwrap();
        let path = a["args"]["path"].as_str().unwrap();
        assert_eq!(s.parameters["content"], text);
        assert_eq!(s.file_hashes.get(path), Some(&tagged(text)));
    }
    // `python3 -m http.server` never ends: exit code -1 is a failure, said as such.
    let server = &steps[3];
    assert_eq!(server.result, ActionResult::Failure);
    assert!(
        server.error.as_deref().unwrap().starts_with("no exit code"),
        "{server:?}"
    );
    assert_eq!(server.target.as_deref(), Some("python3"));
    assert_eq!(
        steps[4].thought.as_deref(),
        acts[4]["args"]["content"].as_str()
    );
    assert_outputs_hashed(&steps);
}

#[test]
fn openhands_evaluation_output_exit_codes_tool_errors_and_rejected_calls() {
    let path = sample("openhands/multi_swe_bench_ponyc-4593.jsonl");
    assert_eq!(
        detect_format(&path, &std::fs::read(&path).unwrap()[..4096]).unwrap(),
        Format::OpenHands
    );
    let run = json_of(&path);
    let events = run["history"].as_array().unwrap();
    let steps = read_steps(&path).unwrap();
    let acts = agent_actions(events);
    // Error observations that answer no action are steps of their own.
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["observation"] == "error" && e.get("cause").is_none())
        .collect();
    assert!(!rejected.is_empty());
    assert_eq!(steps.len(), acts.len() + rejected.len());
    let invalid: Vec<&StepView> = steps
        .iter()
        .filter(|s| s.action == "invalid_reply")
        .collect();
    assert_eq!(invalid.len(), rejected.len());
    for (s, e) in invalid.iter().zip(&rejected) {
        assert_eq!(s.result, ActionResult::Failure);
        assert_eq!(s.error.as_deref(), e["content"].as_str());
    }
    // Every command's result is its exit code.
    let runs: Vec<&StepView> = steps.iter().filter(|s| s.action == "run_command").collect();
    let codes: Vec<i64> = acts
        .iter()
        .filter(|a| a["action"] == "run")
        .map(|a| {
            observation_of(events, a).unwrap()["extras"]["metadata"]["exit_code"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(runs.len(), codes.len());
    assert!(codes.iter().any(|&c| c != 0) && codes.contains(&0));
    for (s, code) in runs.iter().zip(&codes) {
        let want = if *code == 0 {
            ActionResult::Success
        } else {
            ActionResult::Failure
        };
        assert_eq!(s.result, want, "{s:?}");
        if *code != 0 {
            assert!(s
                .error
                .as_deref()
                .unwrap()
                .starts_with(&format!("exit code {code}")));
        }
    }
    // The file editor's `ERROR:` answers fail the edit; a successful one hashes the file.
    let edits: Vec<(&StepView, &Value)> = steps
        .iter()
        .filter(|s| s.action != "invalid_reply")
        .zip(acts.iter().copied())
        .filter(|(_, a)| a["action"] == "edit")
        .collect();
    assert!(edits.len() >= 10);
    for (s, a) in edits {
        let obs = observation_of(events, a).unwrap();
        let content = obs["content"].as_str().unwrap();
        if content.starts_with("ERROR:") {
            assert_eq!(s.result, ActionResult::Failure, "{s:?}");
            assert!(s.file_hashes.is_empty());
        } else if let Some(new) = obs["extras"]["new_content"].as_str() {
            assert_eq!(s.result, ActionResult::Success);
            assert_eq!(
                s.file_hashes.get(a["args"]["path"].as_str().unwrap()),
                Some(&tagged(new))
            );
        }
    }
    assert_outputs_hashed(&steps);
    assert_eq!(steps.last().unwrap().action, "complete");

    // The agent re-reads, re-fails the same edit: the detector reports loops.
    let found = LoopDetector::default().replay(&steps);
    assert!(
        found.iter().any(|d| matches!(
            d.loop_type,
            LoopType::Repetition | LoopType::IdenticalAction | LoopType::Alternation
        ) && d
            .block
            .as_deref()
            .is_some_and(|b| b.contains("command_parser.pony"))),
        "{found:#?}"
    );
}

#[test]
fn openhands_event_folders_and_event_lines_read_like_the_array() {
    let path = sample("openhands/basic_gui_mode.json");
    let events = json_of(&path);
    let from_array = read_steps(&path).unwrap();

    // The folder OpenHands' file store writes: sessions/<id>/events/<n>.json.
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("sessions/abc");
    std::fs::create_dir_all(session.join("events")).unwrap();
    for e in events.as_array().unwrap() {
        let file = session.join(format!("events/{}.json", e["id"]));
        std::fs::write(file, serde_json::to_string_pretty(e).unwrap()).unwrap();
    }
    assert_eq!(detect_format(&session, &[]).unwrap(), Format::OpenHands);
    assert_eq!(read_steps(&session).unwrap(), from_array);
    assert_eq!(read_steps(&session.join("events")).unwrap(), from_array);

    // Events one a line.
    let lines: Vec<String> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect();
    let jsonl = tmp.path().join("events.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let head = std::fs::read(&jsonl).unwrap();
    assert_eq!(detect_format(&jsonl, &head).unwrap(), Format::OpenHands);
    assert_eq!(read_steps(&jsonl).unwrap(), from_array);

    // A folder of anything else is not guessed at.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = read_steps(&empty).unwrap_err();
    assert!(matches!(e, ImportError::Unrecognized { .. }), "{e}");
}

// ---------------------------------------------------------------- minimal steps

fn labelled_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["tests/data/loops", "tests/data/loops/blind"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "jsonl") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() > 50, "{}", files.len());
    files
}

#[test]
fn labelled_data_reads_as_minimal_steps_exactly_as_written() {
    for path in labelled_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            detect_format(&path, text.as_bytes()).unwrap(),
            Format::Steps,
            "{}",
            path.display()
        );
        let steps = read_steps(&path).unwrap();
        let direct: Vec<StepView> = text
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(steps, direct, "{}", path.display());
    }
}

#[test]
fn labelled_data_fits_the_json_schema_and_the_schema_names_every_field() {
    let schema = json_of(&root().join("docs/loop-steps.schema.json"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut lines = 0;
    for path in labelled_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(
                errors.is_empty(),
                "{}:{}: {errors:?}",
                path.display(),
                i + 1
            );
            lines += 1;
        }
    }
    assert!(lines > 1000, "{lines}");
    // A line the reader rejects is rejected by the schema too.
    for bad in [
        json!({"step": 1, "action": "read_file"}),
        json!({"step": 1, "action": "read_file", "result": "done"}),
        json!({"step": "one", "action": "read_file", "result": "success"}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
        assert!(serde_json::from_value::<StepView>(bad).is_err());
    }
    // The schema's step properties are exactly StepView's fields.
    let full = StepView {
        step: 1,
        action: "a".into(),
        target: Some("t".into()),
        parameters: json!({}),
        result: ActionResult::Success,
        error: Some("e".into()),
        summary: "s".into(),
        file_hashes: [("f".to_string(), "h".to_string())].into(),
        checks_passing: Some(1),
        checks_failing: Some(0),
        output_len: Some(1),
        output_hash: Some("h".into()),
        output: Some("o".into()),
        thought: Some("t".into()),
    };
    let mut fields: Vec<String> = serde_json::to_value(&full)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut documented: Vec<String> = schema["$defs"]["step"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    fields.sort();
    documented.sort();
    assert_eq!(fields, documented);
    assert!(validator.is_valid(&serde_json::to_value(&full).unwrap()));
}

// ---------------------------------------------------------------- detection and errors

#[test]
fn formats_are_detected_from_their_first_bytes() {
    let cases = [
        ("swe-agent/pydicom__pydicom-1458.traj", Format::SweAgent),
        ("swe-agent/function_calling_simple.traj", Format::SweAgent),
        ("openhands/wrong_initial_state.json", Format::OpenHands),
        ("openhands/basic_gui_mode.json", Format::OpenHands),
        (
            "openhands/multi_swe_bench_ponyc-4593.jsonl",
            Format::OpenHands,
        ),
    ];
    for (rel, want) in cases {
        let path = sample(rel);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(detect_format(&path, &bytes[..1024]).unwrap(), want, "{rel}");
        assert_eq!(import::import(&path, None).unwrap().format, want, "{rel}");
    }
    // A .traj under another name: detected from its content, whole or cut.
    let tmp = tempfile::tempdir().unwrap();
    let renamed = tmp.path().join("run.json");
    std::fs::copy(sample("swe-agent/pydicom__pydicom-1458.traj"), &renamed).unwrap();
    let bytes = std::fs::read(&renamed).unwrap();
    assert_eq!(detect_format(&renamed, &bytes).unwrap(), Format::SweAgent);
    assert_eq!(
        detect_format(&renamed, &bytes[..2000]).unwrap(),
        Format::SweAgent
    );
    // An AgentForge record line.
    let record = br#"{"step":1,"phase":"fix","action":"read_file","result":"success","summary":"s","duration_ms":1,"timestamp":"t","context_tokens":1,"state_after":{}}"#;
    assert_eq!(
        detect_format(Path::new("actions.jsonl"), record).unwrap(),
        Format::AgentForge
    );
    // Not JSON at all.
    let e = detect_format(Path::new("notes.txt"), b"hello").unwrap_err();
    assert!(
        e.to_string().contains("notes.txt") && e.to_string().contains("--format"),
        "{e}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn malformed_input_names_the_file_the_position_and_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ok = r#"{"step": 1, "action": "read_file", "result": "success"}"#;

    // A truncated step line.
    let p = write(
        dir,
        "cut.jsonl",
        &format!("{{\"label\": \"legit\"}}\n{ok}\n{{\"step\": 2, \"action\": \"run"),
    );
    match read_steps(&p).unwrap_err() {
        ImportError::Json { path, at, message } => {
            assert_eq!(path, p);
            assert_eq!(at, Position::Line(3));
            assert!(message.contains("EOF"), "{message}");
        }
        e => panic!("{e}"),
    }

    // A missing required field, and an unknown result.
    let p = write(
        dir,
        "missing.jsonl",
        &format!("{ok}\n{{\"step\": 2, \"action\": \"run_command\"}}\n"),
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        matches!(&e, ImportError::Field { at: Position::Line(2), field, .. } if field == "result"),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("missing.jsonl: line 2: field `result`: missing"),
        "{msg}"
    );
    let p = write(
        dir,
        "variant.jsonl",
        &format!("{ok}\n{{\"step\": 2, \"action\": \"x\", \"result\": \"done\"}}\n"),
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("line 2: field `result`: unknown variant `done`"),
        "{e}"
    );

    // A truncated .traj: line and column of the document.
    let full = std::fs::read_to_string(sample("swe-agent/function_calling_simple.traj")).unwrap();
    let p = write(dir, "cut.traj", &full[..full.len() / 2]);
    let e = read_steps(&p).unwrap_err();
    assert!(
        matches!(
            &e,
            ImportError::Json {
                at: Position::LineColumn(..),
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with(&format!("{}: line ", p.display())),
        "{e}"
    );

    // A trajectory entry without its action.
    let p = write(
        dir,
        "noaction.traj",
        r#"{"trajectory": [{"action": "ls", "observation": ""}, {"observation": "x"}]}"#,
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        matches!(&e, ImportError::Field { at: Position::Item { list: "trajectory", index: 1 }, field, .. } if field == "action"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("trajectory[1]: field `action`: missing"),
        "{e}"
    );
    let p = write(dir, "neither.traj", r#"{"info": {}}"#);
    let e = read_steps(&p).unwrap_err();
    assert!(e.to_string().contains("field `trajectory`"), "{e}");

    // An OpenHands run action without its command; an event of the wrong shape.
    let p = write(
        dir,
        "norun.json",
        r#"[{"id": 1, "source": "agent", "action": "run", "args": {"thought": "x"}}]"#,
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("events[0]: field `args.command`: missing"),
        "{e}"
    );
    let p = write(
        dir,
        "badargs.json",
        r#"[{"id": 1, "source": "agent", "action": "read", "args": {"path": "a"}}, {"id": 2, "source": "agent", "action": "run", "args": 7}]"#,
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("events[1]: field `args`: invalid type"),
        "{e}"
    );

    // Two evaluation runs in one file.
    let one =
        std::fs::read_to_string(sample("openhands/multi_swe_bench_ponyc-4593.jsonl")).unwrap();
    let p = write(
        dir,
        "two.jsonl",
        &format!("{}\n{}\n", one.trim(), one.trim()),
    );
    let e = read_steps(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("line 2: field `history`: a second run (the first is on line 1"),
        "{e}"
    );

    // Forced to a format it is not.
    let e = import::import(
        &sample("openhands/wrong_initial_state.json"),
        Some(Format::Steps),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            ImportError::Json {
                at: Position::Line(1),
                ..
            } | ImportError::Field { .. }
        ),
        "{e}"
    );
    let e = "sweagent".parse::<Format>().unwrap_err();
    assert!(e.to_string().contains("swe-agent"), "{e}");
}

#[test]
fn a_torn_last_agentforge_line_is_a_note_elsewhere_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let step = |n: u64| {
        json!({"step": n, "phase": "fix", "action": "read_file", "target": "a.rs",
               "parameters": {"path": "a.rs"}, "result": "success", "summary": "read a.rs",
               "duration_ms": 3, "timestamp": "2026-01-01T00:00:00Z", "context_tokens": 10,
               "state_after": {"task_id": "t", "task_type": "fix_violation", "phase": "fix",
                               "step": n, "max_steps": 10, "status": "running",
                               "working_memory": ""}})
        .to_string()
    };
    let text = format!("{}\n{}\n{}", step(1), step(2), &step(3)[..40]);
    let p = write(tmp.path(), "actions.jsonl", &text);
    let imported = import::import(&p, None).unwrap();
    assert_eq!(imported.format, Format::AgentForge);
    assert_eq!(imported.steps.len(), 2);
    assert_eq!(imported.notes.len(), 1);
    assert!(
        imported.notes[0].contains("line 3") && imported.notes[0].contains("torn"),
        "{:?}",
        imported.notes
    );

    let text = format!("{}\n{}\n{}", step(1), &step(2)[..40], step(3));
    let p = write(tmp.path(), "actions.jsonl", &text);
    let e = read_steps(&p).unwrap_err();
    assert!(
        matches!(
            e,
            ImportError::Json {
                at: Position::Line(2),
                ..
            }
        ),
        "{e}"
    );
}
