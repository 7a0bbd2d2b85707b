//! The loop detector against the labelled trajectories in `tests/data/loops/`.
//!
//! Each `*.jsonl` file is one trajectory: a label line
//! (`{"label": "loop"|"legit", "loop_type", "first_loop_step", "note"}`, written from a
//! human reading of the trajectory) followed by one [`StepView`] per line. The detector
//! replays each trajectory offline, as `agentforge inspect loops` does.
//!
//! Files named `heldout_*` were written by someone who never saw the detector's code;
//! their rates are printed separately. They are no longer unseen: on 2026-11-25 the
//! detector was improved looking at their two misses (with those of `blind/`).
//!
//! Quality targets asserted here:
//! - loops detected >= 95%: the first detection is at most 2 steps after
//!   `first_loop_step`, and not before it unless it is a detection of that same loop type;
//! - legitimate trajectories flagged <= 3% (any detection at all counts).
//!
//! Run with `--nocapture` to see the per-trajectory table and the measured rates.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use agentforge_loops::{render_text, Detection, LoopDetector, LoopType, StepView};
use serde::Deserialize;

/// The label line of a trajectory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Label {
    label: Kind,
    #[serde(default)]
    loop_type: Option<LoopType>,
    #[serde(default)]
    first_loop_step: Option<u64>,
    #[serde(default)]
    note: String,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Loop,
    Legit,
}

struct Trajectory {
    name: String,
    label: Label,
    steps: Vec<StepView>,
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/loops")
}

fn load_all() -> Vec<Trajectory> {
    load_dir(&data_dir())
}

/// The trajectories directly in `dir` (not its subfolders), sorted by name.
fn load_dir(dir: &Path) -> Vec<Trajectory> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).expect("readable");
            let mut lines = text.lines().filter(|l| !l.trim().is_empty());
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let label: Label = serde_json::from_str(lines.next().expect("label line"))
                .unwrap_or_else(|e| panic!("{name}: bad label: {e}"));
            let steps: Vec<StepView> = lines
                .enumerate()
                .map(|(i, l)| {
                    serde_json::from_str(l)
                        .unwrap_or_else(|e| panic!("{name}: bad step line {}: {e}", i + 2))
                })
                .collect();
            Trajectory { name, label, steps }
        })
        .collect()
}

/// How the detector did on one loop trajectory.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Detected in time; `latency` steps after `first_loop_step` (negative: early, but of that loop).
    Detected {
        latency: i64,
        same_type: bool,
    },
    Missed,
    Late {
        latency: i64,
    },
    /// A detection of another type before the loop started.
    Premature,
}

fn judge(label: &Label, found: &[Detection]) -> Outcome {
    let first_loop = label
        .first_loop_step
        .expect("loop trajectories have first_loop_step") as i64;
    let want = label.loop_type.expect("loop trajectories have loop_type");
    let Some(d) = found.first() else {
        return Outcome::Missed;
    };
    let latency = d.step as i64 - first_loop;
    if latency < 0 && d.loop_type != want {
        Outcome::Premature
    } else if latency > 2 {
        Outcome::Late { latency }
    } else {
        Outcome::Detected {
            latency,
            same_type: d.loop_type == want,
        }
    }
}

#[test]
fn labelled_set_meets_quality_targets() {
    let all = load_all();
    let detector = LoopDetector::default();

    // The set itself: big enough, balanced, every loop type several times.
    assert!(all.len() >= 40, "only {} trajectories", all.len());
    let loops: Vec<&Trajectory> = all.iter().filter(|t| t.label.label == Kind::Loop).collect();
    let legit: Vec<&Trajectory> = all
        .iter()
        .filter(|t| t.label.label == Kind::Legit)
        .collect();
    assert!(
        loops.len() >= 20 && legit.len() >= 20,
        "{} loops, {} legit",
        loops.len(),
        legit.len()
    );
    let mut per_type: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &loops {
        *per_type
            .entry(t.label.loop_type.unwrap().as_str())
            .or_default() += 1;
    }
    for ty in [
        LoopType::IdenticalAction,
        LoopType::Repetition,
        LoopType::Alternation,
        LoopType::ErrorCycle,
        LoopType::SemanticLoop,
        LoopType::NoProgress,
        LoopType::Oscillation,
    ] {
        assert!(
            per_type.get(ty.as_str()).copied().unwrap_or(0) >= 3,
            "too few {ty} trajectories: {per_type:?}"
        );
    }

    let mut detected = 0usize;
    let mut same_type = 0usize;
    let mut latencies = Vec::new();
    let mut misses = Vec::new();
    eprintln!("\n== loop trajectories ==");
    for t in &loops {
        let found = detector.replay(&t.steps);
        let outcome = judge(&t.label, &found);
        let first = found.first();
        eprintln!(
            "{:<42} want {:<16} at {:>2} | got {:<16} at {:>2} | {:?}",
            t.name,
            t.label.loop_type.unwrap().as_str(),
            t.label.first_loop_step.unwrap(),
            first.map_or("-", |d| d.loop_type.as_str()),
            first.map_or(0, |d| d.step),
            outcome
        );
        match outcome {
            Outcome::Detected {
                latency,
                same_type: st,
            } => {
                detected += 1;
                same_type += usize::from(st);
                latencies.push(latency);
            }
            _ => misses.push(format!("{}: {outcome:?}\n{}", t.name, render_text(&found))),
        }
    }

    let mut flagged = Vec::new();
    eprintln!("\n== legitimate trajectories ==");
    for t in &legit {
        let found = detector.replay(&t.steps);
        eprintln!(
            "{:<42} {:>2} steps | {}",
            t.name,
            t.steps.len(),
            if found.is_empty() {
                "clean".to_string()
            } else {
                format!(
                    "FLAGGED: {}",
                    found
                        .iter()
                        .map(|d| format!("{}@{}", d.loop_type, d.step))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        if !found.is_empty() {
            flagged.push(format!(
                "{} ({})\n{}",
                t.name,
                t.label.note,
                render_text(&found)
            ));
        }
    }

    // The `heldout_*` files were written by someone who never saw the detector's code;
    // report them on their own so the rest of the set cannot hide a weaker result there.
    let heldout = |name: &str| name.starts_with("heldout_");
    let ho_loops: Vec<_> = loops.iter().filter(|t| heldout(&t.name)).collect();
    let ho_caught = ho_loops
        .iter()
        .filter(|t| {
            matches!(
                judge(&t.label, &detector.replay(&t.steps)),
                Outcome::Detected { .. }
            )
        })
        .count();
    let ho_legit: Vec<_> = legit.iter().filter(|t| heldout(&t.name)).collect();
    let ho_flagged = ho_legit
        .iter()
        .filter(|t| !detector.replay(&t.steps).is_empty())
        .count();
    eprintln!(
        "held-out only: loops detected {ho_caught}/{}, legitimate flagged {ho_flagged}/{}",
        ho_loops.len(),
        ho_legit.len()
    );

    let detection_rate = detected as f64 / loops.len() as f64;
    let false_positive_rate = flagged.len() as f64 / legit.len() as f64;
    let type_agreement = same_type as f64 / detected.max(1) as f64;
    let mean_latency = latencies.iter().sum::<i64>() as f64 / latencies.len().max(1) as f64;
    // Never above 2: the judge counts a later detection as a miss.
    let max_latency = latencies.iter().copied().max().unwrap_or(0);
    eprintln!(
        "\nloops detected: {detected}/{} = {:.1}% | legitimate flagged: {}/{} = {:.1}% | \
         detections of the labelled type: {:.1}% | latency after first_loop_step: mean {mean_latency:.2}, max {max_latency} steps",
        loops.len(),
        100.0 * detection_rate,
        flagged.len(),
        legit.len(),
        100.0 * false_positive_rate,
        100.0 * type_agreement,
    );
    for m in &misses {
        eprintln!("\nMISSED {m}");
    }
    for f in &flagged {
        eprintln!("\nFLAGGED {f}");
    }

    assert!(
        detection_rate >= 0.95,
        "detection rate {detection_rate:.3} < 0.95"
    );
    assert!(
        false_positive_rate <= 0.03,
        "false-positive rate {false_positive_rate:.3} > 0.03"
    );
}

/// Recall and false-flag rate of a blind set.
struct Rates {
    recall: f64,
    false_flags: f64,
}

/// Scores the blind set in `tests/data/loops/<folder>` with [`judge`] and prints rates,
/// detection latencies and misses per loop type only (never per file, so nobody tunes on
/// a held-out set by reading its output).
fn score_blind_set(folder: &str, title: &str) -> Rates {
    let all = load_dir(&data_dir().join(folder));
    let detector = LoopDetector::default();
    let loops: Vec<&Trajectory> = all.iter().filter(|t| t.label.label == Kind::Loop).collect();
    let legit: Vec<&Trajectory> = all
        .iter()
        .filter(|t| t.label.label == Kind::Legit)
        .collect();
    assert!(
        all.len() >= 40 && loops.len() >= 20 && legit.len() >= 20,
        "{title} too small: {} files, {} loops, {} legit",
        all.len(),
        loops.len(),
        legit.len()
    );
    let mut detected = 0usize;
    let mut latencies = Vec::new();
    let mut missed_by_type: BTreeMap<String, usize> = BTreeMap::new();
    for t in &loops {
        match judge(&t.label, &detector.replay(&t.steps)) {
            Outcome::Detected { latency, .. } => {
                detected += 1;
                latencies.push(latency);
            }
            other => {
                let kind = format!("{:?}", t.label.loop_type.expect("loop type"));
                let why = match other {
                    Outcome::Missed => "missed",
                    Outcome::Late { .. } => "late",
                    _ => "premature",
                };
                *missed_by_type.entry(format!("{kind} ({why})")).or_default() += 1;
            }
        }
    }
    let flagged = legit
        .iter()
        .filter(|t| !detector.replay(&t.steps).is_empty())
        .count();
    let recall = detected as f64 / loops.len() as f64;
    let false_flags = flagged as f64 / legit.len() as f64;
    latencies.sort();
    eprintln!(
        "\n{title}: loops detected {detected}/{} = {:.1}% | legitimate flagged {flagged}/{} = {:.1}% | latency of detections (steps after the labelled step): min {:?}, median {:?}, max {:?} | not detected in time, by type: {missed_by_type:?}",
        loops.len(),
        100.0 * recall,
        legit.len(),
        100.0 * false_flags,
        latencies.first(),
        latencies.get(latencies.len() / 2),
        latencies.last(),
    );
    Rates {
        recall,
        false_flags,
    }
}

/// The fifth blind set (`tests/data/loops/blind5/`, 44 sequences), written by a helper
/// that saw only the step format and the loop definitions (not the detector's code, its
/// tests or the other labelled sets), with outputs from real tool runs where the tools
/// exist here (see its README). Held out first: 16 of 22 loops (72.7%) and 1 of 22
/// legitimate sequences flagged (4.5%), against issue 11's targets of recall >= 90% (a
/// detection no later than 2 steps after the labelled step) and false flags <= 5%.
///
/// A development set since 2026-11-25 night: the detector was improved looking at its
/// misses and its false flag (general rules: an error that only gives the exit status is
/// read from the output; an edit back to a version already run that fails as it did then;
/// code versions tracked through comments and hashes; a check flipping with nothing
/// edited is no oscillation), so its score no longer says how the detector does on unseen
/// work; `tests/data/loops/blind6/` is the held-out set now. Asserted here: the level
/// reached (20 of 22, 90.9%; none of 22 flagged), so a regression fails.
#[test]
fn blind5_dev_set_scores() {
    let Rates {
        recall,
        false_flags,
    } = score_blind_set("blind5", "blind5 dev set");
    assert!(recall >= 0.90, "blind5 dev set recall {recall:.3} < 0.90");
    assert!(
        false_flags <= 0.0,
        "blind5 dev set false-flag rate {false_flags:.3} > 0 (none flagged since 2026-11-25 night)"
    );
}

/// The held-out set since 2026-11-25 night (`tests/data/loops/blind6/`, 44 sequences:
/// 22 legitimate and hard, 22 loops of every kind), written by a helper that saw only
/// the step format and the loop definitions (not the detector's code, its tests or the
/// other labelled sets), from real tool runs (see its README), while the detector was
/// improved on blind5 by someone who never opened this folder. Scored on its own against
/// issue 11's targets: recall >= 90% (a detection no later than 2 steps after the
/// labelled step) and false flags <= 5%.
///
/// Do not tune the detector on these files: this test prints rates and misses per loop
/// type only. Once someone improves the detector looking at this set, it becomes a
/// development set and a new held-out set has to be written.
#[test]
fn blind6_heldout_set_scores() {
    let Rates {
        recall,
        false_flags,
    } = score_blind_set("blind6", "held-out set (blind6)");
    assert!(
        recall >= BLIND6_RECALL,
        "held-out recall {recall:.3} < {BLIND6_RECALL} (the level first scored; the target is 0.90)"
    );
    assert!(
        false_flags <= BLIND6_FALSE_FLAGS,
        "held-out false-flag rate {false_flags:.3} > {BLIND6_FALSE_FLAGS}"
    );
}

/// Issue 11's recall target, asserted on blind6 alone. First scored 2026-11-25 night:
/// 20 of 22 loops (90.9%; one no-progress loop missed, one repetition caught a step early).
const BLIND6_RECALL: f64 = 0.90;
/// Issue 11's false-flag target. First scored: none of 22 legitimate sequences flagged.
const BLIND6_FALSE_FLAGS: f64 = 0.05;

/// The fourth blind set (`tests/data/loops/blind4/`, 44 sequences), written by a helper
/// that saw only the step format and the loop definitions (not the detector's code, its
/// tests or the other labelled sets), with outputs from real tool runs where the tools
/// exist here (see its README). Held out first: 14 of 22 loops (63.6%), none of 22
/// legitimate sequences flagged, before and after the detector was improved on blind3.
/// A development set since (improved on it the same evening: 20 of 22, none flagged;
/// 21 of 22 after the work on blind5 that night).
#[test]
fn blind4_dev_set_scores() {
    let Rates {
        recall,
        false_flags,
    } = score_blind_set("blind4", "blind4 dev set");
    assert!(recall >= 0.90, "blind4 dev set recall {recall:.3} < 0.90");
    assert!(
        false_flags <= 0.05,
        "blind4 dev set false-flag rate {false_flags:.3} > 0.05"
    );
}

/// The third blind set (`tests/data/loops/blind3/`, 44 sequences), held out until
/// blind4 arrived and a development set since (the detector may be tuned on it), written on 2026-11-25 by
/// a helper that saw only the step format and the loop definitions, never the detector's
/// code, its tests or the other labelled data, while the detector was improved on the
/// other sets (blind2 among them) by someone who never opened this folder. Scored on its
/// own with the same judge. Issue 11's targets: recall >= 90% (a detection no later than
/// 2 steps after the labelled step) and false flags <= 5%. First score, 2026-11-25: 14
/// of 22 loops (63.6%; 5 of the 8 misses detected, but 3+ steps after the labelled step)
/// and 1 of 22 legitimate sequences flagged (4.5%). Improved on it the same evening
/// (rules in `host/loops`, by a helper that never saw blind4): 20 of 22 (90.9%), none
/// flagged; blind4, held out, stayed at 14 of 22 (see [`blind4_dev_set_scores`]).
#[test]
fn blind3_dev_set_scores() {
    let Rates {
        recall,
        false_flags,
    } = score_blind_set("blind3", "blind3 dev set");
    assert!(recall >= 0.90, "blind3 dev set recall {recall:.3} < 0.90");
    assert!(
        false_flags <= 0.05,
        "blind3 false-flag rate {false_flags:.3} > 0.05"
    );
}

/// The second blind set (`tests/data/loops/blind2/`, 44 sequences), written on 2026-11-25
/// by a helper that saw only the step format and the loop definitions, never the
/// detector's code, its tests or the other labelled data. Scored with the same judge.
///
/// It became a development set on 2026-11-25, after its first score as the held-out set:
/// 15 of 22 loops detected in time (68.2%; 4 of the 7 misses detected 3+ steps late) and
/// 2 of 22 legitimate sequences flagged (9.1%), against issue 11's targets of recall >=
/// 90% (a detection no later than 2 steps after the labelled step) and false flags <= 5%.
/// The detector was then improved looking at its misses and false flags (general rules
/// about progress, not matches on these files), so its score no longer says how the
/// detector does on unseen work. The held-out set is now `tests/data/loops/blind3/`, scored
/// by a test someone else adds. Asserted here: the level reached on this set (20 of 22,
/// 90.9%; 1 of 22 flagged, 4.5%), so a regression fails.
#[test]
fn blind2_dev_set_scores() {
    let Rates {
        recall,
        false_flags,
    } = score_blind_set("blind2", "blind2 dev set");
    assert!(recall >= 0.90, "blind2 dev set recall {recall:.3} < 0.90");
    assert!(
        false_flags <= 0.05,
        "blind2 dev set false-flag rate {false_flags:.3} > 0.05"
    );
}

/// The first blind set (`tests/data/loops/blind/`), written by someone who saw neither the
/// detector's code nor the rest of this set, scored on its own with the same judge.
///
/// It became a development set on 2026-11-25: the detector was improved looking at its
/// misses and its one false flag (from 23 of 27 loops, 85.2%, and 1 of 27 legitimate
/// sequences flagged, to 27 of 27 and none flagged), so its score no longer says how the
/// detector does on unseen work. The next held-out set, `tests/data/loops/blind2/`, has
/// since become a development set too (see [`blind2_dev_set_scores`]). Asserted here: the targets the detector now meets on this
/// set (recall >= 95%, false flags <= 3%), so a regression fails.
#[test]
fn blind_dev_set_scores() {
    let all = load_dir(&data_dir().join("blind"));
    let detector = LoopDetector::default();
    let loops: Vec<&Trajectory> = all.iter().filter(|t| t.label.label == Kind::Loop).collect();
    let legit: Vec<&Trajectory> = all
        .iter()
        .filter(|t| t.label.label == Kind::Legit)
        .collect();
    assert!(
        all.len() >= 40 && loops.len() >= 15 && legit.len() >= 15,
        "blind set too small: {} files, {} loops, {} legit",
        all.len(),
        loops.len(),
        legit.len()
    );

    eprintln!("\n== blind dev set ==");
    let mut detected = 0usize;
    for t in &loops {
        let found = detector.replay(&t.steps);
        let outcome = judge(&t.label, &found);
        detected += usize::from(matches!(outcome, Outcome::Detected { .. }));
        eprintln!("{:<52} loop  | {outcome:?}", t.name);
    }
    let mut flagged = 0usize;
    for t in &legit {
        let found = detector.replay(&t.steps);
        flagged += usize::from(!found.is_empty());
        eprintln!(
            "{:<52} legit | {}",
            t.name,
            found.first().map_or("clean".to_string(), |d| format!(
                "FLAGGED {}@{}",
                d.loop_type, d.step
            ))
        );
    }
    let recall = detected as f64 / loops.len() as f64;
    let false_flags = flagged as f64 / legit.len() as f64;
    eprintln!(
        "\nblind dev set: loops detected {detected}/{} = {:.1}% | legitimate flagged {flagged}/{} = {:.1}%",
        loops.len(),
        100.0 * recall,
        legit.len(),
        100.0 * false_flags
    );
    assert!(recall >= 0.95, "blind dev set recall {recall:.3} < 0.95");
    assert!(
        false_flags <= 0.03,
        "blind dev set false-flag rate {false_flags:.3} > 0.03"
    );
}

#[test]
fn replay_of_the_labelled_set_is_deterministic() {
    let detector = LoopDetector::default();
    for t in load_all() {
        assert_eq!(
            detector.replay(&t.steps),
            detector.replay(&t.steps),
            "{}",
            t.name
        );
    }
}

#[test]
fn check_agrees_with_replay_on_every_prefix() {
    // replay reports a subset of the per-prefix checks: each reported detection is
    // exactly what `check` says at that step.
    let detector = LoopDetector::default();
    for t in load_all() {
        for d in detector.replay(&t.steps) {
            let end = t.steps.iter().position(|s| s.step == d.step).unwrap() + 1;
            assert_eq!(
                detector.check(&t.steps[..end]).as_ref(),
                Some(&d),
                "{}",
                t.name
            );
        }
    }
}

#[test]
fn check_with_a_memo_agrees_with_check_as_a_run_calls_it() {
    // A run checks the last `history_len` steps at every step with one memo; every set
    // (the labelled set and every blind set) is walked that way, and each answer must be
    // `check`'s. One memo serves all sets, so steps of other trajectories with the same
    // numbers are in it too (they must not be mistaken for these).
    let detector = LoopDetector::default();
    let memo = agentforge_loops::StepMemo::default();
    let mut checked = 0;
    let mut found = 0;
    let dirs = ["", "blind", "blind2", "blind3", "blind4", "blind5"];
    for d in dirs {
        for t in load_dir(&data_dir().join(d)) {
            for end in 1..=t.steps.len() {
                let start = end.saturating_sub(detector.history_len());
                let h = &t.steps[start..end];
                let want = detector.check(h);
                found += usize::from(want.is_some());
                assert_eq!(detector.check_with(h, &memo), want, "{} at {end}", t.name);
                checked += 1;
            }
        }
    }
    assert!(
        checked > 1000 && found > 100,
        "{checked} checks, {found} detections"
    );
}

/// The trajectory with details a human would call irrelevant changed: a `reason` in
/// every call, other line/column numbers and durations in error texts.
fn perturbed(steps: &[StepView]) -> Vec<StepView> {
    let location = regex::Regex::new(r"(\.\w+):(\d+):(\d+)").unwrap();
    let duration = regex::Regex::new(r"\b(\d+)\.(\d+)s\b").unwrap();
    steps
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if let serde_json::Value::Object(map) = &mut s.parameters {
                map.insert(
                    "reason".into(),
                    format!("attempt at step {}: let me try this", s.step).into(),
                );
            }
            s.error = s.error.map(|e| {
                let e = location.replace_all(&e, |c: &regex::Captures| {
                    let line: u32 = c[2].parse().unwrap();
                    format!("{}:{}:{}", &c[1], line + 17, 4)
                });
                duration.replace_all(&e, "9.87s").into_owned()
            });
            s
        })
        .collect()
}

/// Unrelated productive work (distinct files, checks improving) before the trajectory.
fn with_productive_prefix(steps: &[StepView]) -> Vec<StepView> {
    let mut out: Vec<StepView> = (0..6u64)
        .map(|i| {
            let path = format!("docs/chapter{i}.md");
            serde_json::from_value(serde_json::json!({
                "step": i + 1, "action": "write_file", "target": path,
                "parameters": { "path": path, "content": format!("# Chapter {i}\n") },
                "result": "success",
                "summary": format!("created {path} (1 lines, 12 bytes); checks: docs: docs: {} passed, {} failed (exit {})", i + 1, 5 - i, if i == 5 { 0 } else { 1 }),
                "file_hashes": { path.clone(): format!("prefix{i}") },
                "checks_passing": 0, "checks_failing": 1
            }))
            .unwrap()
        })
        .collect();
    let offset = out.len() as u64;
    out.extend(steps.iter().cloned().map(|mut s| {
        s.step += offset;
        s
    }));
    out
}

#[test]
fn outcomes_survive_irrelevant_changes() {
    let detector = LoopDetector::default();
    let summary = |d: Vec<Detection>, offset: u64| -> Vec<(LoopType, u64)> {
        d.into_iter()
            .map(|d| (d.loop_type, d.step - offset))
            .collect()
    };
    for t in load_all() {
        let base = summary(detector.replay(&t.steps), 0);
        assert_eq!(
            base,
            summary(detector.replay(&perturbed(&t.steps)), 0),
            "{}: perturbed",
            t.name
        );
        // After unrelated productive work the task is no longer exploring, so the
        // detector's extra patience for a task's first reads no longer applies: a loop
        // missed while exploring may then be caught. What must hold: legitimate work
        // stays clean and every loop caught is still caught, no later.
        let prefixed = summary(detector.replay(&with_productive_prefix(&t.steps)), 6);
        if base.is_empty() {
            if t.label.label == Kind::Legit {
                assert!(
                    prefixed.is_empty(),
                    "{}: flagged after unrelated work: {prefixed:?}",
                    t.name
                );
            }
        } else {
            for (kind, step) in &base {
                assert!(
                    prefixed.iter().any(|(k, s)| k == kind && s <= step),
                    "{}: {kind:?} at {step} not caught as early after unrelated work: {prefixed:?}",
                    t.name
                );
            }
        }
    }
}
