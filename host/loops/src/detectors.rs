//! The seven detectors, most specific first.
//!
//! Every detector looks at the analysed window as of its last step and is *sticky*: once
//! its pattern is there, it keeps matching until a step breaks it (progress, or a step
//! that does not fit the pattern), so that replay can report each loop once.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::analysis::{Analysis, Info};
use super::meaning::{code_diff, failure_headline, meaning_is_precise};
use super::signature::{failure_text, param_str, ActionCategory, ErrorCategory};
use super::suggest;
use super::{Detection, LoopThresholds, LoopType};
use agentforge_core::state::ActionResult;

/// Reworks of the same code (beyond the first attempt) before unchanged verification
/// counts as a loop: the third attempt at the same lines.
const MIN_REWORKS: usize = 2;
/// Re-reads or re-runs in a read-only streak before it counts as a loop.
const MIN_STALE_READS: usize = 2;
/// A read-only streak is repetitive when at least one step in this many is a repeat.
const STALE_SHARE: usize = 3;
/// Edits changing only whitespace or comments, with the same failure after them, before
/// they count as a loop.
const MIN_NOOP_EDITS: usize = 2;
/// Checks after changes, all failing the same way, before different attempts with one
/// failure count as a loop.
const MIN_ATTEMPTS: usize = 3;
/// Steps in a row at the end of a read-only streak that only go back over what was already
/// seen, before the streak counts as a loop however long it is.
const STALE_RUN: usize = 3;
/// The name under which all checks' results are looked at together.
const ALL_CHECKS: &str = "verification";
/// A read-only streak that only ever looked at new things is a loop only when it is this
/// many times the usual length: reading a new area of the code is work.
const ALL_NEW_FACTOR: usize = 3;
/// A read-only streak this many times `no_progress_reads` long is judged by its latest
/// steps alone (the length an exploration at the start of a task is allowed).
const LONG_STREAK: usize = 2;
/// Approaches among failures of one kind, spread out with other steps between them,
/// before they count as a semantic loop (two suffice for failures in a row).
const SPREAD_APPROACHES: usize = 3;
/// Evidence lines kept per detection.
const MAX_EVIDENCE: usize = 8;

/// The most specific detection for the analysed history, if any.
pub(crate) fn detect(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    identical(a, t)
        .or_else(|| oscillation(a, t))
        .or_else(|| error_cycle(a, t))
        .or_else(|| alternation(a, t))
        .or_else(|| repetition(a, t))
        .or_else(|| semantic(a, t))
        .or_else(|| no_progress(a, t))
}

struct Found {
    loop_type: LoopType,
    confidence: f32,
    description: String,
    evidence: Vec<String>,
    suggestions: Vec<String>,
    block: Option<String>,
}

impl Found {
    fn at(self, a: &Analysis<'_>) -> Detection {
        let mut evidence = self.evidence;
        if evidence.len() > MAX_EVIDENCE {
            evidence.drain(..evidence.len() - MAX_EVIDENCE);
        }
        Detection {
            loop_type: self.loop_type,
            step: a.last().map_or(0, |l| l.view.step),
            confidence: self.confidence,
            description: self.description,
            evidence,
            suggestions: self.suggestions,
            block: self.block,
        }
    }
}

fn describe_all<'a>(steps: impl IntoIterator<Item = &'a Info<'a>>) -> Vec<String> {
    steps.into_iter().map(Info::describe).collect()
}

/// The last [`MAX_EVIDENCE`] attempts (changes and failures) of `steps`, oldest first,
/// described; only those kept are described (describing a step is the costly part).
fn last_attempts<'a>(steps: &'a [Info<'a>]) -> Vec<String> {
    let kept: Vec<&Info> = steps
        .iter()
        .filter(|s| s.mutated() || s.failed)
        .rev()
        .take(MAX_EVIDENCE)
        .collect();
    describe_all(kept.into_iter().rev())
}

/// The same action failing `identical` times in a row with the same arguments or the
/// same error (seed 000 `_check_identical`). A polled command whose output grows is not
/// repeating itself.
fn identical(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let last = w.last().filter(|l| l.failed)?;
    let same = |s: &Info<'_>| {
        s.failed
            && !s.grew
            && !s.output_new
            && s.view.action == last.view.action
            // The same error on other targets (a guessed path, then another) is not one
            // action repeated: that is a semantic loop, reported as one.
            && (s.same_params(last)
                || (s.error_fp == last.error_fp && s.sig.target == last.sig.target))
    };
    let run = w.iter().rev().take_while(|s| same(s)).count();
    if run < t.identical.max(2) {
        return None;
    }
    let steps = &w[w.len() - run..];
    let same_args = steps.iter().all(|s| s.same_params(last));
    let how = if same_args {
        "with the same arguments"
    } else {
        "with the same error"
    };
    let what = if steps.iter().all(|s| s.view.result == ActionResult::Skipped) {
        "been refused"
    } else {
        "failed"
    };
    Some(
        Found {
            loop_type: LoopType::IdenticalAction,
            confidence: 1.0,
            description: format!(
                "`{}` has {what} {run} times in a row {how}",
                last.view.action
            ),
            evidence: describe_all(steps),
            suggestions: suggest::identical(last),
            block: last.block.clone(),
        }
        .at(a),
    )
}

/// A file returning to content it already had (flip-flopping between versions), or a
/// check's failure returning to one it already had (fixing A breaks B, fixing B breaks A),
/// or a file edited back to a version already run, failing again as it failed then.
fn oscillation(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    file_oscillation(a, t)
        .or_else(|| verification_oscillation(a, t))
        .or_else(|| known_failure_again(a))
}

/// The last change edited a file back to a version it had before (the code as it was,
/// however commented or spaced), and the first run since of a command or check that ran
/// on that version then fails exactly as it failed then (its kind, its first line, values
/// included), with another failure had in between: the attempt went back to where it
/// already was and learned what it knew. A deliberate revert is followed by the next
/// approach, not by running the version already known to fail. A warning, never a block.
fn known_failure_again(a: &Analysis<'_>) -> Option<Detection> {
    let ctx = &a.ctx;
    let last = a.last().filter(|l| l.failed && l.failure.is_some())?;
    if last.headline.split_whitespace().count() < MIN_HEADLINE_WORDS {
        return None;
    }
    let m = ctx.iter().rposition(|s| s.mutated() || s.file_command)?;
    let change = &ctx[m];
    // An edit the agent wrote (a `git checkout` or `stash` back is a deliberate revert).
    if change.category != ActionCategory::Edit || change.back_to.is_empty() {
        return None;
    }
    if ctx[m + 1..ctx.len() - 1]
        .iter()
        .any(|s| s.approach == last.approach)
    {
        return None;
    }
    let same = |s: &Info<'_>| {
        s.failed
            && s.approach == last.approach
            && s.failure == last.failure
            && s.headline == last.headline
    };
    let (then, file) = change.back_to.iter().find_map(|(file, since, until)| {
        let j = ctx[..m]
            .iter()
            .rposition(|s| *since <= s.view.step && s.view.step < *until && same(s))?;
        // Another failure between that run and the change back.
        ctx[j + 1..m]
            .iter()
            .any(|s| s.failed && s.failure.is_some() && s.failure != last.failure)
            .then_some((j, file))
    })?;
    Some(
        Found {
            loop_type: LoopType::Oscillation,
            confidence: 0.8,
            description: format!(
                "step {} put `{file}` back to a version already run at step {}, and it fails the same way again: {}",
                change.view.step,
                ctx[then].view.step,
                first_line(failure_text(last.view)),
            ),
            evidence: last_attempts(&ctx[then..]),
            suggestions: suggest::file_oscillation(file),
            block: None,
        }
        .at(a),
    )
}

fn file_oscillation(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let ctx = &a.ctx;
    let mut returns: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, s) in ctx.iter().enumerate().skip(a.window_start) {
        // Putting code back once verification passes, or after it got better since the
        // file's previous change, is cleaning up (debug prints, an experiment), not
        // flip-flopping.
        let passing = s.view.checks_failing == Some(0) && s.view.checks_passing > Some(0);
        for f in &s.returns {
            let prev_change = ctx[..i]
                .iter()
                .rposition(|b| b.content.iter().any(|(g, _)| g == f))
                .unwrap_or(0);
            if passing || ctx[prev_change..i].iter().any(|b| b.improved) {
                continue;
            }
            returns.entry(f.as_str()).or_default().push(i);
        }
    }
    let (file, idx) = returns
        .into_iter()
        .filter(|(_, idx)| idx.len() >= t.oscillation.max(1))
        // Broken by a version never seen before, or by verification getting better.
        .filter(|(file, idx)| {
            let r = *idx.last().expect("non-empty");
            !ctx[r + 1..]
                .iter()
                .any(|s| s.improved || (s.progress && s.content.iter().any(|(f, _)| f == file)))
        })
        .max_by_key(|(_, idx)| *idx.last().expect("non-empty"))?;
    let last_return = &ctx[*idx.last().expect("non-empty")];
    // Number each version of the file in order of first appearance.
    let mut versions: Vec<&str> = Vec::new();
    let mut evidence = Vec::new();
    for s in &ctx[a.window_start..] {
        let Some((_, id)) = s.content.iter().find(|(f, _)| f == file) else {
            continue;
        };
        let seen = versions.iter().position(|v| v == id);
        let n = seen.map_or_else(
            || {
                versions.push(id);
                versions.len()
            },
            |p| p + 1,
        );
        let back = match (s.returns.iter().any(|f| f == file), seen) {
            (true, Some(_)) => " (back to an earlier version)",
            // Back to a content from before the window, or an edit undoing an earlier one.
            (true, None) => " (undoes an earlier change)",
            _ => "",
        };
        evidence.push(format!(
            "step {}: {} {file} -> version {n}{back}",
            s.view.step, s.view.action
        ));
    }
    Some(
        Found {
            loop_type: LoopType::Oscillation,
            confidence: 0.9,
            description: format!(
                "`{file}` went back to a version it already had {} times in the last {} steps",
                idx.len(),
                a.window().len()
            ),
            evidence,
            suggestions: suggest::file_oscillation(file),
            block: last_return.block.clone(),
        }
        .at(a),
    )
}

fn verification_oscillation(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let ctx = &a.ctx;
    // Check runs per approach, with their failure (None = passing).
    let mut runs: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, s) in ctx.iter().enumerate().skip(a.window_start) {
        if s.category == ActionCategory::Check {
            runs.entry(s.approach.as_str()).or_default().push(i);
        }
    }
    // And all of them together: fixing A breaks B may show in one check and then the
    // other (a build, then the tests).
    if runs.len() > 1 {
        let all: Vec<usize> = runs
            .values()
            .flatten()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        runs.insert(ALL_CHECKS, all);
    }
    let mut best: Option<(&str, Vec<usize>, Vec<usize>)> = None;
    for (approach, idx) in runs {
        // Consecutive equal results are one state; a failure seen before a different
        // state is a return.
        let mut states: Vec<(usize, Option<&str>)> = Vec::new();
        for &i in &idx {
            let st = ctx[i].verif.as_deref();
            if states.last().is_none_or(|(_, prev)| *prev != st) {
                states.push((i, st));
            }
        }
        let returns: Vec<usize> = states
            .iter()
            .enumerate()
            // A failure seen before, with verification no better in between: a red test
            // after a green one that added passing tests (test-first work) is no return.
            // And changed back by the agent: a result that flips with nothing changed in
            // between (a flaky test, a bisection checking out commits) is not its doing.
            .filter(|(k, (i, st))| {
                st.is_some()
                    && states[..*k].iter().any(|(j, p)| {
                        let between = &ctx[*j + 1..*i];
                        p == st
                            && !between.iter().any(|b| b.improved)
                            && between
                                .iter()
                                .any(|b| b.mutated() || b.file_command || b.noop)
                    })
            })
            .map(|(_, (i, _))| *i)
            .collect();
        if returns.len() < t.oscillation.max(1) {
            continue;
        }
        let r = *returns.last().expect("non-empty");
        let seen: BTreeSet<Option<&str>> = states.iter().map(|(_, s)| *s).collect();
        // Broken by better verification or by a result of this check never seen before.
        let broken = ctx[r + 1..]
            .iter()
            .any(|s| s.improved || (s.approach == approach && !seen.contains(&s.verif.as_deref())));
        if broken {
            continue;
        }
        if best.as_ref().is_none_or(|(_, _, br)| br.last() < Some(&r)) {
            best = Some((approach, idx, returns));
        }
    }
    let (approach, idx, returns) = best?;
    let mut labels: Vec<Option<&str>> = Vec::new();
    let evidence = idx
        .iter()
        .map(|&i| {
            let s = &ctx[i];
            let st = s.verif.as_deref();
            let label = match labels.iter().position(|l| *l == st) {
                Some(p) => p,
                None => {
                    labels.push(st);
                    labels.len() - 1
                }
            };
            let what = match st {
                None => "passing".to_string(),
                Some(_) => format!(
                    "failure {} ({})",
                    (b'A' + (label % 26) as u8) as char,
                    first_line(failure_text(s.view))
                ),
            };
            format!("step {}: {} -> {what}", s.view.step, s.view.action)
        })
        .collect();
    let check = approach.trim_end_matches(':');
    Some(
        Found {
            loop_type: LoopType::Oscillation,
            confidence: 0.8,
            description: format!(
                "`{check}` keeps flipping between failures it already had: its result went back to an earlier failure {} times",
                returns.len()
            ),
            evidence,
            suggestions: suggest::verification_oscillation(),
            block: None,
        }
        .at(a),
    )
}

/// The first non-empty line of a text, cut to 100 characters.
fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(100)
        .collect()
}

/// Failures alternating between approaches: in a row (A fails, B fails, A fails again),
/// or across reworks of the same code (see [`attempts_cycle`]).
fn error_cycle(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    failing_cycle(a, t)
        .or_else(|| attempts_cycle(a))
        .or_else(|| failure_returns(a))
}

/// Changes that bring back, word for word, failures already had since verification last
/// got better, before they count as a loop.
const MIN_FAILURE_RETURNS: usize = 2;
/// Words a failure's first line needs to tell one failure from another.
const MIN_HEADLINE_WORDS: usize = 3;

/// Changes followed again and again by a failure already seen since verification last got
/// better (the very same failure: its kind and its first line, values included): the
/// attempts go round known failures (A, B, C, C, A, B), whichever order they come back
/// in, and learn nothing new. A warning, never a block.
fn failure_returns(a: &Analysis<'_>) -> Option<Detection> {
    let ctx = &a.ctx;
    let last = a.last().filter(|l| l.failed && l.failure.is_some())?;
    let start = ctx.iter().rposition(|s| s.improved).map_or(0, |p| p + 1);
    // Each failure by its kind and its first line: the output around it (a traceback's
    // frames, a warning printed on the way) varies with the attempt, the failure does not.
    let mut seen: Vec<(Option<ErrorCategory>, &str, usize)> = Vec::new();
    let mut returns: Vec<(usize, usize, bool)> = Vec::new();
    let mut changed = false;
    for (i, s) in ctx.iter().enumerate().skip(start) {
        if s.mutated() {
            changed = true;
            continue;
        }
        if !s.failed {
            continue;
        }
        let headline: &str = &s.headline;
        // Too short to tell one failure from another (`exit status 1`).
        if headline.split_whitespace().count() < MIN_HEADLINE_WORDS {
            continue;
        }
        let kind = s.sig.error;
        if changed {
            if let Some(&(_, _, j)) = seen.iter().find(|(k, h, _)| *k == kind && *h == headline) {
                // Back to a failure other than the one just had: going round.
                let back = seen
                    .last()
                    .is_some_and(|(k, h, _)| *k != kind || *h != headline);
                returns.push((j, i, back));
            }
        }
        seen.push((kind, headline, i));
        changed = false;
    }
    // The same failure after every change is verification left as it was (a no-progress
    // loop, reported as one): going round needs a return to another failure than the last.
    if returns.len() < MIN_FAILURE_RETURNS
        || returns.last().map(|r| r.1) != Some(ctx.len() - 1)
        || !returns.iter().any(|r| r.2)
    {
        return None;
    }
    let (then, _, _) = *returns.last().expect("non-empty");
    // The failure had just before this one came back, for the suggestions.
    let last_headline: &str = &last.headline;
    let other = seen
        .iter()
        .rev()
        .find(|(_, h, _)| *h != last_headline)
        .map_or(then, |(_, _, i)| *i);
    let distinct: BTreeSet<&str> = seen.iter().map(|(_, h, _)| *h).collect();
    Some(
        Found {
            loop_type: LoopType::ErrorCycle,
            confidence: 0.75,
            description: format!(
                "error cycling: {} changes ended in a failure already had ({} different failures since verification last got better); the last brought back step {}'s: {}",
                returns.len(),
                distinct.len(),
                ctx[then].view.step,
                first_line(failure_text(last.view)),
            ),
            evidence: last_attempts(&ctx[start..]),
            suggestions: suggest::attempts_cycle(last, &ctx[other]),
            block: None,
        }
        .at(a),
    )
}

/// Failures alternating between approaches since the last progress: A fails, B fails,
/// A fails again (seed 000 `_check_error_cycle`, by approach rather than category so
/// that `edit_file` and `replace_lines` on the same file are two approaches).
fn failing_cycle(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let start = w.iter().rposition(|s| s.progress).map_or(0, |p| p + 1);
    let fails: Vec<&Info<'_>> = w[start..].iter().filter(|s| s.failed).collect();
    if fails.len() < 3 {
        return None;
    }
    // A-B-A by approach, or by what the failures mean: two ways of going at it that
    // each fail their own way, however the attempts and the errors are worded.
    let cycles = fails
        .windows(3)
        .filter(|f| {
            (f[0].approach == f[2].approach && f[0].approach != f[1].approach)
                || (f[0].failure.is_some()
                    && f[0].failure == f[2].failure
                    && f[0].failure != f[1].failure)
                // Errors too differently worded to match still alternate between kinds.
                || (f[0].sig.error == f[2].sig.error && f[0].sig.error != f[1].sig.error)
        })
        .count();
    if cycles < t.error_cycle.max(1) {
        return None;
    }
    let (next, other) = (fails[fails.len() - 2], fails[fails.len() - 1]);
    // Blocking is for a named approach that keeps failing; a cycle seen only in what the
    // failures mean is a warning (a false block costs more than a late warning).
    let by_approach = fails
        .windows(3)
        .filter(|f| f[0].approach == f[2].approach && f[0].approach != f[1].approach)
        .count()
        >= t.error_cycle.max(1);
    let block = if by_approach {
        block_one_of(next, other)
    } else {
        None
    };
    Some(
        Found {
            loop_type: LoopType::ErrorCycle,
            confidence: 0.9,
            description: format!(
                "error cycling: alternating between failed approaches (`{}` and `{}`)",
                next.approach.trim_end_matches(':'),
                other.approach.trim_end_matches(':')
            ),
            evidence: describe_all(fails.iter().rev().take(5).rev().copied()),
            suggestions: suggest::error_cycle(next, other),
            block,
        }
        .at(a),
    )
}

/// Two ways of going at one problem, tried in turn on the same code: a change fails one
/// way, the next change fails another way, and reworking that code brings the first
/// failure back (however each attempt and each error is worded). Changing the code is
/// not progress here: only verification getting better is. Going back to a failure
/// already had, by reworking one's own change, is going back to an approach already
/// tried; it is a warning, never a block (no one action is at fault).
fn attempts_cycle(a: &Analysis<'_>) -> Option<Detection> {
    let ctx = &a.ctx;
    a.last().filter(|l| l.failed && l.failure.is_some())?;
    let start = (a.window_start..ctx.len())
        .rev()
        .find(|&i| ctx[i].improved)
        .map_or(a.window_start, |p| p + 1);
    // The failure after each change (or run of changes), and whether that change
    // reworked code changed earlier in the stretch.
    // The failure the first change set out to fix is where the attempts started: going
    // back to it is going round as much as going back to a later one.
    let mut outcomes: Vec<(usize, bool)> = Vec::new();
    let mut before_changes: Option<usize> = None;
    let (mut changed, mut reworked) = (false, false);
    for (i, s) in ctx.iter().enumerate().skip(start) {
        if s.mutated() || s.file_command {
            changed = true;
            reworked |= s.rewrites.iter().any(|&j| j >= start);
            if outcomes.is_empty() {
                if let Some(b) = before_changes {
                    outcomes.push((b, false));
                }
            }
        } else if s.category == ActionCategory::Check && !s.failed {
            // A check passing: the attempts got somewhere. Those after it are judged on
            // their own (fixing one check and breaking another, then going back, is
            // still going round).
            outcomes.clear();
            before_changes = None;
            (changed, reworked) = (false, false);
        } else if s.failed && changed && s.failure.is_some() {
            outcomes.push((i, reworked));
            (changed, reworked) = (false, false);
        } else if s.failed && outcomes.is_empty() && s.failure.is_some() {
            before_changes = Some(i);
        }
    }
    if outcomes.last().map(|(i, _)| *i) != Some(ctx.len() - 1) {
        return None;
    }
    // The last three attempts: the first failure, another one, the first again after a
    // rework.
    let [.., (x, _), (y, _), (z, true)] = outcomes[..] else {
        return None;
    };
    let failure = |i: usize| ctx[i].failure.as_deref();
    if failure(x) != failure(z) || failure(x) == failure(y) {
        return None;
    }
    // The very same failure, values included, unless what it means is precise by
    // itself (an error code, the whole text): one test failing with an assertion, then
    // an exception, then an assertion with another value is debugging one test, not
    // going back to an approach already tried.
    if !failure(x).is_some_and(meaning_is_precise)
        && failure_headline(ctx[x].view) != failure_headline(ctx[z].view)
    {
        return None;
    }
    let (first, other) = (&ctx[x], &ctx[y]);
    // Back to the very failure the changes set out to fix: the result flipped back to
    // where it started, an oscillation of the results (the attempts may be going back
    // and forth between two versions of the code); back to a failure a change brought is
    // going round between approaches.
    let back_to_start = before_changes == Some(x);
    // Back where it started could be a revert (a way of working), unless the change
    // that brought it back is known to be a new variant.
    if back_to_start && !new_variants(&ctx[start..z], y - start) {
        return None;
    }
    let (loop_type, what) = if back_to_start {
        (
            LoopType::Oscillation,
            "the failure the changes set out to fix",
        )
    } else {
        (LoopType::ErrorCycle, "a failure it already had")
    };
    Some(
        Found {
            loop_type,
            confidence: 0.8,
            description: format!(
                "error cycling: reworking the same code went back to {what} ({} -> {} -> {} again)",
                first_line(failure_text(first.view)),
                first_line(failure_text(other.view)),
                first_line(failure_text(first.view)),
            ),
            evidence: describe_all(ctx[x..].iter().filter(|s| s.mutated() || s.failed)),
            suggestions: suggest::attempts_cycle(first, other),
            block: None,
        }
        .at(a),
    )
}

/// Whether every change in `steps[from..]` is a text edit known to write a new variant
/// of the code: it undoes no earlier edit and adds code that the earlier edits of
/// `steps` did not remove (so it does not put the original back). A whole-file write or
/// a line replacement does not say what it replaced: it may be a revert.
fn new_variants(steps: &[Info<'_>], from: usize) -> bool {
    let diff = |s: &Info<'_>| {
        let p = &s.view.parameters;
        let old = param_str(p, "old_text").or(param_str(p, "old_str"))?;
        let new = param_str(p, "new_text").or(param_str(p, "new_str"))?;
        Some(code_diff(old, new))
    };
    let mut removed: BTreeSet<String> = BTreeSet::new();
    let mut any = false;
    for (i, s) in steps.iter().enumerate().filter(|(_, s)| s.mutated()) {
        let Some((gone, added)) = diff(s) else {
            if i >= from {
                return false;
            }
            continue;
        };
        if i >= from {
            if !s.returns.is_empty()
                || added.is_empty()
                || added.iter().all(|l| removed.contains(l))
            {
                return false;
            }
            any = true;
        }
        removed.extend(gone);
    }
    any
}

/// Which of the two steps of a cycle to block. The choice must not depend on which of
/// them came last, or the same loop would look like a new one at every step. Checks are
/// blocked last (blocking verification leaves no way to see a fix work), then a failing
/// step before a succeeding one, a change before a read.
fn block_one_of(a: &Info<'_>, b: &Info<'_>) -> Option<String> {
    let rank = |s: &Info<'_>| {
        (
            s.block.is_none(),
            s.category == ActionCategory::Check,
            !s.failed,
            s.category != ActionCategory::Edit,
            s.block.clone(),
        )
    };
    [a, b].into_iter().min_by_key(|s| rank(s))?.block.clone()
}

/// Two signatures alternating, A-B-A-B, where the repeats bring nothing new (seed 004
/// §3b).
fn alternation(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let len = 2 * t.alternation_cycles.max(2);
    if w.len() < len {
        return None;
    }
    let tail = &w[w.len() - len..];
    let (ka, kb) = (&tail[0].key, &tail[1].key);
    // Edits that change nothing are a no-progress loop, and a plan said again between
    // steps a repetition: each reported as such.
    if ka == kb
        || tail
            .iter()
            .any(|s| s.cosmetic || s.category == ActionCategory::Message)
    {
        return None;
    }
    let alternates = tail
        .iter()
        .enumerate()
        .all(|(i, s)| &s.key == if i % 2 == 0 { ka } else { kb });
    if !alternates || tail[2..].iter().any(|s| s.fresh || s.progress) {
        return None;
    }
    let (next, then) = (&tail[len - 2], &tail[len - 1]);
    let block = block_one_of(next, then);
    Some(
        Found {
            loop_type: LoopType::Alternation,
            confidence: 0.85,
            description: format!(
                "alternating between `{}` and `{}` {} times without progress",
                next.approach.trim_end_matches(':'),
                then.approach.trim_end_matches(':'),
                len / 2
            ),
            evidence: describe_all(tail),
            suggestions: suggest::alternation(next, then),
            block,
        }
        .at(a),
    )
}

/// One signature `repetition` times in the window, the repeats bringing nothing new and
/// no progress since the first (seed 004 §3a); or the very same change made again over
/// itself ([`repeated_noop_change`]).
fn repetition(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    repeated_noop_change(a).or_else(|| repeated_signature(a, t))
}

/// The very same change made again (same action, same arguments) when the file already
/// holds what it writes, with a failing check after each time: it cannot bring anything
/// new, so its second time is already a repetition, once a check confirms it. Likewise
/// the very same change leaving the file exactly as the first one left it (something
/// put the file back in between, a generator or a revert) when the check after it
/// fails with the very failure it had after the first: the result of doing it again is
/// already known. Holds until something makes progress. A warning only: blocking the
/// file's edits would block the real fix as well.
fn repeated_noop_change(a: &Analysis<'_>) -> Option<Detection> {
    let w = a.window();
    let failing_check = |s: &[Info<'_>]| {
        s.iter()
            .any(|b| b.category == ActionCategory::Check && b.verif.is_some())
    };
    // The failures of the checks in `s`.
    let failures = |s: &[Info<'_>]| -> BTreeSet<String> {
        s.iter()
            .filter(|b| b.category == ActionCategory::Check)
            .filter_map(|b| b.verif.clone())
            .collect()
    };
    let (first, again) = w.iter().enumerate().rev().find_map(|(j, s)| {
        if s.category != ActionCategory::Edit || s.cosmetic {
            return None;
        }
        let i = w[..j]
            .iter()
            .rposition(|b| b.view.action == s.view.action && b.same_params(s))?;
        if s.noop {
            return (failing_check(&w[i + 1..j]) && failing_check(&w[j + 1..])).then_some((i, j));
        }
        // Same content as the first time, and every failure after it already had then.
        let after = failures(&w[j + 1..]);
        (s.mutated()
            && s.content == w[i].content
            && !after.is_empty()
            && after.is_subset(&failures(&w[i + 1..j])))
        .then_some((i, j))
    })?;
    if w[first + 1..].iter().any(|s| s.progress) {
        return None;
    }
    let last = &w[again];
    let target = on_target(last);
    Some(
        Found {
            loop_type: LoopType::Repetition,
            confidence: 0.8,
            description: format!(
                "`{}`{target} made the very same change again, over itself, after a failing check showed it did not help",
                last.view.action
            ),
            evidence: describe_all(&w[first..]),
            suggestions: suggest::repetition(last, 2),
            block: None,
        }
        .at(a),
    )
}

/// `` on `<target>` `` for a step with a target, for descriptions.
fn on_target(s: &Info<'_>) -> String {
    s.view
        .target
        .as_deref()
        .map(|t| format!(" on `{t}`"))
        .unwrap_or_default()
}

/// One signature `repetition` times in the window, the repeats bringing nothing new and
/// no progress since the first.
fn repeated_signature(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let n = t.repetition.max(2);
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in w.iter().enumerate() {
        // Reading other lines of a file is not the same read: reading around without
        // acting is a no-progress loop, reported as one.
        let key = match (&s.read_key, s.category) {
            (Some(k), ActionCategory::Read | ActionCategory::Search) => k.as_str(),
            _ => s.key.as_str(),
        };
        by_key.entry(key).or_default().push(i);
    }
    let occ = by_key
        .into_values()
        .filter(|idx| idx.len() >= n)
        .map(|idx| idx[idx.len() - n..].to_vec())
        .filter(|occ| {
            !occ[1..].iter().any(|&i| w[i].fresh) && !w[occ[0] + 1..].iter().any(|s| s.progress)
        })
        // A check run after a change the host applied, checked and undid answers that
        // attempt: it is the agent looking at where it stands, not a repeat.
        .filter(|occ| {
            !occ.windows(2).any(|p| {
                w[p[1]].category == ActionCategory::Check
                    && w[p[0] + 1..p[1]].iter().any(|s| {
                        s.category == ActionCategory::Edit
                            && s.sig.error == Some(ErrorCategory::TestRegression)
                    })
            })
        })
        // Edits written differently that change nothing (respacing, recommenting) are a
        // no-progress loop, reported as one; the very same edit again is a repetition.
        .filter(|occ| !occ[1..].iter().any(|&i| w[i].cosmetic))
        .max_by_key(|occ| *occ.last().expect("n >= 2"))?;
    let last = &w[*occ.last().expect("n >= 2")];
    let target = on_target(last);
    Some(
        Found {
            loop_type: LoopType::Repetition,
            confidence: 0.8,
            description: format!(
                "`{}`{target} repeated {n} times in the last {} steps with the same outcome and no progress",
                last.view.action,
                w.len()
            ),
            evidence: describe_all(occ.iter().map(|&i| &w[i])),
            suggestions: suggest::repetition(last, n),
            block: last.block.clone(),
        }
        .at(a),
    )
}

/// Different actions all failing with the same kind of error (seed 000
/// `_check_semantic_loop`).
fn semantic(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    failing_semantic(a, t)
        .or_else(|| same_failure_semantic(a, t))
        .or_else(|| attempts_semantic(a, t))
}

/// Different attempts in a row failing with the very same error, word for word, before
/// they count as a semantic loop: fewer than [`failing_semantic`] needs for one kind of
/// error, since an identical message says the variations do not reach the cause.
const SAME_FAILURE_RUN: usize = 3;

/// Attempts in a row, each with other arguments, failing with the very same error (the
/// same first line, values included, and the same text): what is varied is not what
/// fails. A warning, never a block: no one of the attempts is at fault.
fn same_failure_semantic(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let n = SAME_FAILURE_RUN.min(t.semantic.max(2));
    let tail = w.get(w.len().checked_sub(n)?..)?;
    let last = tail.last()?;
    let headline: &str = &last.headline;
    if headline.split_whitespace().count() < MIN_HEADLINE_WORDS {
        return None;
    }
    // A wait that ran out (a poll) and a run whose output moved on are not the same
    // failure again.
    let same = |s: &Info<'_>| {
        s.failed
            && !s.improved
            && !s.grew
            && !s.output_new
            && s.sig.error != Some(ErrorCategory::Timeout)
            && &*s.headline == headline
            && s.error_fp == last.error_fp
    };
    if !tail.iter().all(same) {
        return None;
    }
    // Each attempt other than the others (the same call again is an identical action).
    if tail
        .iter()
        .enumerate()
        .any(|(i, s)| tail[..i].iter().any(|b| b.key == s.key && b.same_params(s)))
    {
        return None;
    }
    let category = last.sig.error?;
    Some(
        Found {
            loop_type: LoopType::SemanticLoop,
            confidence: 0.8,
            description: format!(
                "{n} different attempts in a row all failed with the same error: {}",
                first_line(failure_text(last.view))
            ),
            evidence: describe_all(tail),
            suggestions: suggest::semantic(category),
            block: None,
        }
        .at(a),
    )
}

/// Changes to the code, each followed by a check failing with the same kind of error:
/// different attempts, one failure (the same borrow error, the same import error).
fn attempts_semantic(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let ctx = &a.ctx;
    let last = a.last()?;
    if last.category != ActionCategory::Check || last.verif.is_none() {
        return None;
    }
    let start = (a.window_start..ctx.len())
        .rev()
        .find(|&i| ctx[i].improved)
        .map_or(a.window_start, |p| p + 1);
    // Each check that follows changes, with the changes before it.
    let mut outcomes: Vec<usize> = Vec::new();
    let (mut changes, mut reworks) = (0usize, 0usize);
    let mut pending = 0usize;
    for (i, s) in ctx.iter().enumerate().skip(start) {
        if s.mutated() {
            pending += 1;
            // Reworking the code changed before in this stretch: another try at the same
            // thing, not the next piece of work.
            reworks += usize::from(s.rewrites.iter().any(|&j| j >= start));
        } else if s.category == ActionCategory::Check && pending > 0 {
            // A check that passed after changes ends the stretch: no loop.
            s.verif.as_ref()?;
            outcomes.push(i);
            changes += pending;
            pending = 0;
        }
    }
    if outcomes.len() < MIN_ATTEMPTS || changes <= t.semantic.max(2) || reworks + 1 < MIN_ATTEMPTS {
        return None;
    }
    if outcomes.last() != Some(&(ctx.len() - 1)) {
        return None;
    }
    let category = last.sig.error?;
    if outcomes.iter().any(|&i| ctx[i].sig.error != Some(category)) {
        return None;
    }
    // One failure or two (two errors of one problem), not a cascade of new ones.
    let meanings: BTreeSet<&str> = outcomes
        .iter()
        .filter_map(|&i| ctx[i].verif.as_deref())
        .collect();
    if meanings.len() > 2 {
        return None;
    }
    Some(
        Found {
            loop_type: LoopType::SemanticLoop,
            confidence: 0.75,
            description: format!(
                "{changes} changes in {} attempts, each followed by the same kind of failure (`{category}`)",
                outcomes.len()
            ),
            evidence: describe_all(ctx[start..].iter().filter(|s| s.mutated() || s.category == ActionCategory::Check)),
            suggestions: suggest::semantic(category),
            block: None,
        }
        .at(a),
    )
}

/// Failures of different actions with one kind of error: `semantic` in a row, or the
/// last `semantic` failures since the last progress, by at least [`SPREAD_APPROACHES`]
/// approaches, with steps between them that moved nothing (an install that changed
/// nothing, a look at `sys.path`): the failure says the same however the attempt is
/// varied.
fn failing_semantic(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let w = a.window();
    let n = t.semantic.max(2);
    if w.len() < n || !a.last().is_some_and(|l| l.failed) {
        return None;
    }
    let consecutive = w[w.len() - n..].iter().all(|s| s.failed);
    let tail: Vec<&Info<'_>> = if consecutive {
        w[w.len() - n..].iter().collect()
    } else {
        let start = w.iter().rposition(|s| s.progress).map_or(0, |p| p + 1);
        let fails: Vec<&Info<'_>> = w[start..].iter().filter(|s| s.failed).collect();
        if fails.len() < n {
            return None;
        }
        let tail = fails[fails.len() - n..].to_vec();
        // The same command succeeding in between with other arguments (halving a range
        // to find a bad record) shows the variations matter: a search, not a loop.
        let heads: BTreeSet<&str> = tail.iter().filter_map(|s| s.head.as_deref()).collect();
        let first = w
            .iter()
            .position(|s| std::ptr::eq(s, tail[0]))
            .unwrap_or(start);
        if w[first..]
            .iter()
            .any(|s| !s.failed && s.head.as_deref().is_some_and(|h| heads.contains(h)))
        {
            return None;
        }
        tail
    };
    if !tail
        .iter()
        .all(|s| s.failed && !s.improved && !s.grew && !s.output_new)
    {
        return None;
    }
    let approaches: BTreeSet<&str> = tail.iter().map(|s| s.approach.as_str()).collect();
    let min_approaches = if consecutive { 2 } else { SPREAD_APPROACHES };
    if approaches.len() < min_approaches {
        return None;
    }
    let category = tail[0].sig.error?;
    if tail.iter().any(|s| s.sig.error != Some(category)) {
        return None;
    }
    // "Other" says nothing about the errors being alike: then they must read the same.
    if category == ErrorCategory::Other && tail.iter().any(|s| s.error_fp != tail[0].error_fp) {
        return None;
    }
    Some(
        Found {
            loop_type: LoopType::SemanticLoop,
            confidence: 0.85,
            description: format!(
                "{} different approaches in a row all failing with a `{category}` error",
                approaches.len()
            ),
            evidence: describe_all(tail.iter().copied()),
            suggestions: suggest::semantic(category),
            block: None,
        }
        .at(a),
    )
}

/// Only reading, searching and checking for a long stretch, re-reading and re-running
/// along the way; or repeated changes to the same code that leave verification exactly
/// as it was (seed 000 `_check_no_progress`).
fn no_progress(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    read_only_streak(a, t).or_else(|| unchanged_verification(a, t))
}

fn read_only_streak(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let ctx = &a.ctx;
    // An edit that only respaces or recomments changes nothing: it does not end the
    // streak.
    let start = ctx
        .iter()
        .rposition(|s| (s.category == ActionCategory::Edit && !s.noop) || s.progress)
        .map_or(0, |p| p + 1);
    let streak = &ctx[start..];
    // Before the first change the agent is exploring: give it twice as long.
    let min = t.no_progress_reads.max(2) * if a.exploring { 2 } else { 1 };
    let stale: Vec<&Info<'_>> = streak.iter().filter(|s| !s.fresh).collect();
    // Going back to things already seen is what makes a stretch of reading a loop; new
    // things are exploration, and only a very long stretch of those is one.
    let repetitive = stale.len() >= MIN_STALE_READS && STALE_SHARE * stale.len() >= streak.len();
    // Once the streak is long (as long as an exploration may be), what it does now
    // counts, not how new its start was: its latest steps going back over what was seen
    // as often makes it a loop, however much new ground the first ones covered.
    let recent = &streak[streak.len().saturating_sub(t.no_progress_reads.max(2))..];
    let recent_stale = recent.iter().filter(|s| !s.fresh).count();
    let repetitive_now = streak.len() >= LONG_STREAK * t.no_progress_reads.max(2)
        && recent_stale >= MIN_STALE_READS
        && STALE_SHARE * recent_stale >= recent.len();
    let cycle = cycle_period(streak);
    // Going back over what was already seen several times in a row (shifting the
    // range over a place already read counts: the lines at its edges are not what the
    // agent is after).
    let stale_run = streak.iter().rev().take_while(|s| s.revisit).count();
    let stale_tail = stale_run >= STALE_RUN && streak.len() >= t.no_progress_reads.max(2);
    // Edits that only respace or recomment, with the same failure coming back after
    // them: the agent believes it is fixing something and changes nothing.
    let noops = streak.iter().filter(|s| s.noop).count();
    let noop_loop = noops >= MIN_NOOP_EDITS
        && streak.iter().skip_while(|s| !s.noop).skip(1).any(|s| {
            (s.category == ActionCategory::Check && !s.fresh && s.verif.is_some())
                // An edit that re-ran the checks itself and still fails.
                || (s.noop && s.view.checks_failing.is_some_and(|f| f > 0))
        });
    if !(streak.len() >= min && repetitive
        || repetitive_now
        || streak.len() >= ALL_NEW_FACTOR * min
        || cycle.is_some()
        || stale_tail
        || noop_loop)
    {
        return None;
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &stale {
        // Only a re-read or a re-search is blocked: blocking an edit (even one that
        // changed nothing) would keep the agent from the real fix.
        if matches!(s.category, ActionCategory::Read | ActionCategory::Search) {
            if let Some(b) = &s.block {
                *counts.entry(b.as_str()).or_default() += 1;
            }
        }
    }
    let block = counts
        .into_iter()
        .filter(|(_, n)| *n >= 2)
        .max_by_key(|(_, n)| *n)
        .map(|(b, _)| b.to_string());
    let last = a.last()?;
    let all_passing = last.view.checks_failing == Some(0) && last.view.checks_passing > Some(0);
    Some(
        Found {
            loop_type: LoopType::NoProgress,
            confidence: 0.75,
            description: match cycle {
                _ if noop_loop => format!(
                    "{noops} edits in the last {} steps changed only whitespace or comments while the same failure came back",
                    streak.len()
                ),
                Some(p) => format!(
                    "going round the same {p} actions again: the last {} steps only read, searched, checked or restated ({} of them repeated something already seen) with no modification",
                    streak.len(),
                    stale.len()
                ),
                None => format!(
                    "the last {} steps only read, searched, checked or restated ({} of them repeated something already seen) with no modification",
                    streak.len(),
                    stale.len()
                ),
            },
            evidence: describe_all(streak),
            suggestions: suggest::read_only(&stale, all_passing),
            block,
        }
        .at(a),
    )
}

/// Steps at the end of a streak that must repeat, in order and bringing nothing new, the
/// steps one period earlier before going round in a cycle counts as a loop.
const CYCLE_REPEATS: usize = 3;

/// The period of the cycle the streak ends in, if its last [`CYCLE_REPEATS`] steps are
/// stale and each is the same move as the step one period (3 or more steps) before it.
fn cycle_period(streak: &[Info<'_>]) -> Option<usize> {
    let n = streak.len();
    if n < CYCLE_REPEATS + 3 || streak[n - CYCLE_REPEATS..].iter().any(|s| s.fresh) {
        return None;
    }
    (3..=n - CYCLE_REPEATS).find(|&p| {
        (n - CYCLE_REPEATS..n).all(|i| {
            let (now, then) = (&streak[i], &streak[i - p]);
            now.key == then.key && now.same_params(then)
        })
    })
}

/// Attempts, each checked, that the very same failure followed, beyond the one it had
/// before them, for one rework to be enough: see [`same_failure_throughout`].
const SAME_FAILURE_ATTEMPTS: usize = 2;

/// Whether every check from `start` failed with the very same failure (its first line,
/// values included): before the first change (at `first`) and after each of at least
/// [`SAME_FAILURE_ATTEMPTS`] rounds of changes. Two attempts, one reworking the other,
/// that leave even the values in the message as they were cannot be reaching the cause.
fn same_failure_throughout(ctx: &[Info<'_>], start: usize, first: usize) -> bool {
    let checks: Vec<usize> = (start..ctx.len())
        .filter(|&i| ctx[i].category == ActionCategory::Check)
        .collect();
    let Some(&last) = checks.last() else {
        return false;
    };
    let headline: &str = &ctx[last].headline;
    if headline.split_whitespace().count() < MIN_HEADLINE_WORDS
        || checks.first().is_none_or(|&c| c > first)
        || checks
            .iter()
            .any(|&i| !ctx[i].failed || &*ctx[i].headline != headline)
    {
        return false;
    }
    let attempts = checks
        .windows(2)
        .filter(|p| ctx[p[0] + 1..p[1]].iter().any(|s| s.mutated()))
        .count();
    attempts >= SAME_FAILURE_ATTEMPTS
}

fn unchanged_verification(a: &Analysis<'_>, t: &LoopThresholds) -> Option<Detection> {
    let ctx = &a.ctx;
    let last = a.last()?;
    // The stretch since verification last changed (that step included: it may be the
    // first of the attempts).
    let span_start = (a.window_start..ctx.len())
        .rev()
        .find(|&i| ctx[i].verification_changed)
        .unwrap_or(a.window_start);
    // Changes, and edits that changed nothing but were meant to (whitespace, comments).
    let muts: Vec<usize> = (span_start..ctx.len())
        .filter(|&i| ctx[i].mutated() || ctx[i].noop)
        .collect();
    // An attempt counts once verification was seen after it (the edit re-ran the checks,
    // or a check ran later): until then nobody knows it left verification as it was.
    let verified = |i: usize| {
        !ctx[i].segs.is_empty()
            || ctx[i + 1..]
                .iter()
                .any(|s| s.category == ActionCategory::Check)
    };
    // Attempts at code already tried in this stretch, or at nothing at all.
    let reworks: Vec<usize> = muts
        .iter()
        .copied()
        .filter(|&i| {
            (ctx[i].noop || ctx[i].rewrites.iter().any(|&j| j >= span_start)) && verified(i)
        })
        .collect();
    let first = *muts.first()?;
    // With fewer reworks, the very same failure after every attempt is the evidence: the
    // stretch then counts as long as verification has been seen (a change made since the
    // last check may yet change it; one that changed only whitespace or comments cannot).
    let seen_until = (first..ctx.len())
        .rev()
        .find(|&i| {
            let s = &ctx[i];
            s.category == ActionCategory::Check || !s.segs.is_empty() || s.noop
        })
        .map_or(first, |i| i + 1);
    let min_len = t.no_progress_unchanged.max(2);
    if reworks.is_empty()
        || (reworks.len() < MIN_REWORKS
            && (!same_failure_throughout(ctx, span_start, first) || seen_until - first < min_len))
        || ctx.len() - first < min_len
    {
        return None;
    }
    let failing = match last.view.checks_failing {
        Some(f) => f > 0,
        None => ctx[span_start..]
            .iter()
            .rev()
            .find(|s| s.category == ActionCategory::Check)
            .is_some_and(|s| s.verif.is_some()),
    };
    if !failing {
        return None;
    }
    let files: BTreeSet<&str> = reworks
        .iter()
        .flat_map(|&i| ctx[i].content.iter().map(|(f, _)| f.as_str()))
        .collect();
    let failure = ctx[span_start..]
        .iter()
        .rev()
        .find(|s| s.category == ActionCategory::Check && s.verif.is_some())
        .map(|s| first_line(failure_text(s.view)));
    let files: Vec<&str> = files.into_iter().collect();
    Some(
        Found {
            loop_type: LoopType::NoProgress,
            confidence: 0.7,
            description: format!(
                "{} changes to {} in the last {} steps left verification exactly as it was",
                muts.len(),
                files.join(", "),
                ctx.len() - first
            ),
            evidence: describe_all(&ctx[first..]),
            suggestions: suggest::unchanged(&files, muts.len(), failure.as_deref()),
            block: None,
        }
        .at(a),
    )
}
