//! What each recent step did, in the terms the detectors reason in: did it produce
//! anything new (`fresh`), did it move the task forward (`progress`), did it put a file
//! back into an earlier state (`returns`), did it rewrite its own earlier attempt
//! (`rewrites`).
//!
//! Facts that depend on the whole history (has this file content been seen before?) are
//! computed once per history in [`Prepared`], so that replaying a log prefix by prefix
//! stays linear in the history per prefix; everything else is computed over a bounded
//! context of the most recent steps.

use std::any::Any;
use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};

use regex::Regex;
use serde_json::Value;

use super::meaning::{
    code_diff, code_id, code_lines, content_words, failure_headline, failure_meaning,
    output_differs, output_fingerprint, output_wording, same_message, Stripped,
};
use super::signature::{
    command_changes_files, command_head, command_of, failure_text, normalize_error,
    normalize_params, normalize_path, param_str, search_pattern, search_term, target_of,
    ActionCategory, ActionSignature, ErrorCategory,
};
use super::StepView;
use agentforge_core::actions::ContextItem;
use agentforge_core::state::{ActionRecord, ActionResult, RecordedVerification};

/// A step of a checked history: a [`StepView`], or one shared with the caller (whose
/// allocation a [`StepMemo`] recognises).
pub(crate) trait Step: Borrow<StepView> {
    /// The step's shared allocation, if it has one.
    fn shared(&self) -> Option<&Arc<StepView>>;
}

impl Step for StepView {
    fn shared(&self) -> Option<&Arc<StepView>> {
        None
    }
}

impl Step for Arc<StepView> {
    fn shared(&self) -> Option<&Arc<StepView>> {
        Some(self)
    }
}

/// History-wide facts about the file changes of each step.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    steps: Vec<ContentFacts>,
    fixed: Vec<Arc<Fixed>>,
}

/// Steps already analysed by themselves (`Fixed`), kept between checks: a run checks
/// its last few dozen steps at every step, and all but one of them were analysed at the
/// previous step. Looked up by the whole step (a step recorded again differently, after
/// a recovery, is analysed again), or by its allocation when the caller shares its steps
/// ([`LoopDetector::check_shared`](crate::LoopDetector::check_shared)). Also keeps the
/// view of each recent log record ([`StepMemo::view`]).
#[derive(Debug, Default)]
pub struct StepMemo {
    seen: Mutex<VecDeque<(Arc<StepView>, Arc<Fixed>)>>,
    views: Mutex<VecDeque<RecordView>>,
}

/// A record's address, the record (weakly: its allocation stays reserved, so no other
/// value can take that address while the entry lives) and its view.
type RecordView = (usize, Weak<dyn Any + Send + Sync>, Arc<StepView>);

/// Steps a [`StepMemo`] keeps, and record views: more than any history a run checks.
pub(crate) const MEMO_STEPS: usize = 256;

impl StepMemo {
    /// The analysis of `view` by itself; `shared` is `view` in the caller's allocation,
    /// when it has one.
    fn fixed(&self, view: &StepView, shared: Option<&Arc<StepView>>) -> Arc<Fixed> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // The kept views cannot change while kept (no interior mutability, and the
        // memo's reference keeps `Arc::get_mut` from succeeding), so the same allocation
        // is the same step; else the whole step is compared.
        if let Some((v, f)) = seen.iter_mut().rev().find(|(v, _)| {
            shared.is_some_and(|s| Arc::ptr_eq(s, v)) || (v.step == view.step && **v == *view)
        }) {
            // The same step in another allocation (the step just taken, now read back
            // from the log): keep the caller's, so its next checks find it by address.
            if let Some(s) = shared.filter(|s| !Arc::ptr_eq(s, v)) {
                *v = Arc::clone(s);
            }
            return Arc::clone(f);
        }
        let f = Arc::new(Fixed::of(view));
        if seen.len() >= MEMO_STEPS {
            seen.pop_front();
        }
        let kept = shared.map_or_else(|| Arc::new(view.clone()), Arc::clone);
        seen.push_back((kept, Arc::clone(&f)));
        f
    }

    /// The [`StepView`] of `record`, made once per record allocation: the store hands
    /// out the same `Arc` for a log line it parsed before, and a run reads the same few
    /// dozen records back at every step.
    ///
    /// A record must not change behind its `Arc` (records have no interior mutability);
    /// the view is made from it as it was when first asked for.
    pub fn view<S>(&self, record: &Arc<ActionRecord<S>>) -> Arc<StepView>
    where
        S: RecordedVerification + Send + Sync + 'static,
    {
        let at = Arc::as_ptr(record).cast::<()>().addr();
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        // Newest first: a check asks for the records the last one asked for, and one more.
        if let Some((_, _, v)) = views.iter().rev().find(|(a, _, _)| *a == at) {
            return Arc::clone(v);
        }
        let view = Arc::new(StepView::from(&**record));
        // A record no one holds any more cannot be asked for again.
        views.retain(|(_, r, _)| r.strong_count() > 0);
        if views.len() >= MEMO_STEPS {
            views.pop_front();
        }
        let weak: Weak<ActionRecord<S>> = Arc::downgrade(record);
        views.push_back((at, weak, Arc::clone(&view)));
        view
    }

    /// How many steps and record views it holds.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (usize, usize) {
        fn len<T>(m: &Mutex<VecDeque<T>>) -> usize {
            m.lock().unwrap_or_else(|p| p.into_inner()).len()
        }
        (len(&self.seen), len(&self.views))
    }
}

/// File-change facts of one step.
#[derive(Debug, Default, Clone)]
struct ContentFacts {
    /// `(file, content id)` of each file the step changed.
    content: Vec<(String, String)>,
    /// Some file got a content it never had before (and not by undoing an edit).
    new_content: bool,
    /// Files put back into a content they had before (not their previous one), or
    /// edits that exactly undo an earlier edit.
    returns: Vec<String>,
    /// Some step up to and including this one changed a file (or tried to).
    changed_so_far: bool,
    /// A successful edit that changes only whitespace or comments: no change to the code.
    noop: bool,
    /// For each file put back into a version it had before: the steps during which it had
    /// that version (from the step that made it, or 0 for the file as the task found it,
    /// to the step that changed it next).
    back_to: Vec<(String, u64, u64)>,
}

/// Versions of one file in order, each with the step that made it (0: as the task found
/// it); a version is a content id.
#[derive(Debug, Default)]
struct Versions(Vec<(String, u64)>, bool);

impl Versions {
    /// Records the file as the task found it, before its first change.
    fn found(&mut self, id: String) {
        self.0.push((id, 0));
        self.1 = true;
    }

    /// Changes made to the file so far.
    fn changes(&self) -> usize {
        self.0.len() - usize::from(self.1)
    }

    /// Records `id` made at `step`; returns the stretches of steps during which the file
    /// had it before, if it is a return to an earlier version (not the latest one).
    fn record(&mut self, id: String, step: u64) -> Vec<(u64, u64)> {
        let entries = &self.0;
        if entries.last().is_some_and(|(last, _)| *last == id) {
            return Vec::new();
        }
        let back: Vec<(u64, u64)> = entries
            .iter()
            .enumerate()
            .filter(|(_, (v, _))| *v == id)
            .map(|(k, (_, since))| (*since, entries.get(k + 1).map_or(step, |e| e.1)))
            .collect();
        self.0.push((id, step));
        back
    }
}

impl Prepared {
    /// Computes the file-change facts of every step of `history`, oldest first. Each
    /// step's facts depend only on the steps before it, so the result is valid for every
    /// prefix.
    pub(crate) fn new<V: Step>(history: &[V]) -> Prepared {
        Prepared::with_memo(history, None)
    }

    /// [`Prepared::new`], taking each step's [`Fixed`] from `memo` when it has it.
    pub(crate) fn with_memo<V: Step>(history: &[V], memo: Option<&StepMemo>) -> Prepared {
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        // Successful text edits per file as (removed, added) code lines, to spot an edit
        // undoing another however it is spaced, commented or quoted.
        let mut edits: HashMap<String, Vec<(usize, CodeDiff)>> = HashMap::new();
        // Per file, what its last change wrote where (a range or the whole file) as code.
        let mut last_write: HashMap<String, (String, String)> = HashMap::new();
        // Per file, without recorded hashes: the code its text edits added and removed
        // so far, so that a file put back by other edits than the exact undo shows as back.
        let mut net: HashMap<String, NetChange> = HashMap::new();
        // Per file, the code it holds as its edits tell it (comments and whitespace aside),
        // whether or not the log records hashes, and the versions it had by that code and
        // by recorded content: a file rewritten back to code it held before is back, however
        // the rewrite is commented or spaced (its hash differs).
        let mut code: HashMap<String, NetChange> = HashMap::new();
        let mut code_versions: HashMap<String, Versions> = HashMap::new();
        let mut versions: HashMap<String, Versions> = HashMap::new();
        let mut changed_so_far = false;
        let fixed: Vec<Arc<Fixed>> = history
            .iter()
            .map(|v| match memo {
                Some(m) => m.fixed(v.borrow(), v.shared()),
                None => Arc::new(Fixed::of(v.borrow())),
            })
            .collect();
        let steps = history
            .iter()
            .zip(&fixed)
            .map(|(s, f)| {
                let s: &StepView = s.borrow();
                let changes = &f.changes;
                let edit = changes.edit.as_ref();
                let rewrite = changes.rewrite.as_ref();
                let noop = edit
                    .is_some_and(|(_, (removed, added))| removed.is_empty() && added.is_empty())
                    || changes.inserts_no_code
                    || rewrite.is_some_and(|(file, place, id)| {
                        last_write
                            .get(file)
                            .is_some_and(|(p, i)| p == place && i == id)
                    });
                if let Some(file) = &changes.edited {
                    match (rewrite, file) {
                        (Some((file, place, id)), _) => {
                            last_write.insert(file.clone(), (place.clone(), id.clone()));
                        }
                        (None, Some(file)) => {
                            last_write.remove(file);
                        }
                        _ => {}
                    }
                }
                let mut content = if noop {
                    Vec::new()
                } else {
                    changes.content.clone()
                };
                if s.file_hashes.is_empty() {
                    for (file, id) in &mut content {
                        let state = net.entry(file.clone()).or_default();
                        match edit.filter(|(f, _)| f == file) {
                            Some((_, (removed, added))) => {
                                state.apply(removed, added);
                                *id = state.id();
                            }
                            None => *state = NetChange::from_base(id),
                        }
                    }
                }
                let undo = undone_edit(edit, &edits, &seen);
                changed_so_far |= !content.is_empty() || noop;
                let mut facts = ContentFacts {
                    content: content.clone(),
                    changed_so_far,
                    noop,
                    ..ContentFacts::default()
                };
                for (file, id) in &content {
                    let by_content = versions.entry(file.clone()).or_default();
                    let before = by_content.changes();
                    let mut back = by_content.record(id.clone(), s.step);
                    let state = code.entry(file.clone()).or_default();
                    let known = code_versions.entry(file.clone()).or_default();
                    match edit.filter(|(f, _)| f == file) {
                        Some((_, (removed, added))) => {
                            // The first text edit of a file starts from the code it had.
                            if known.0.is_empty() {
                                known.found(state.id());
                            }
                            state.apply(removed, added);
                        }
                        None => *state = NetChange::from_base(id),
                    }
                    let before = before.max(known.changes());
                    back.extend(known.record(state.id(), s.step));
                    if !back.is_empty() && !facts.returns.contains(file) {
                        facts.returns.push(file.clone());
                    }
                    // Taking back the only change made so far is trying one thing and
                    // taking it back, not going back to a version among several tried.
                    if before >= 2 {
                        facts
                            .back_to
                            .extend(back.into_iter().map(|(a, b)| (file.clone(), a, b)));
                    }
                }
                for (file, id) in &content {
                    let ids = seen.entry(file.clone()).or_default();
                    let returned = ids.last() != Some(id) && ids.contains(id);
                    if returned || undo.as_deref() == Some(file.as_str()) {
                        if !facts.returns.contains(file) {
                            facts.returns.push(file.clone());
                        }
                    } else if !ids.contains(id) && !facts.returns.contains(file) {
                        facts.new_content = true;
                    }
                    ids.push(id.clone());
                }
                if let Some(file) = undo {
                    if !facts.returns.contains(&file) {
                        facts.returns.push(file);
                    }
                }
                if let Some((file, diff)) = edit.filter(|_| !noop) {
                    let versions = seen.get(file).map_or(0, Vec::len);
                    edits
                        .entry(file.clone())
                        .or_default()
                        .push((versions, diff.clone()));
                }
                facts
            })
            .collect();
        Prepared { steps, fixed }
    }
}

/// A file's content as its text edits tell it, for logs without file hashes: the code
/// lines added and removed since its last known state (the start, or a whole write). Two
/// moments with the same net change hold the same code, however the edits got there:
/// removing a line one edit added, after another edit reworded it, puts the file back.
#[derive(Debug, Default, Clone)]
struct NetChange {
    base: String,
    removed: BTreeSet<String>,
    added: BTreeSet<String>,
}

impl NetChange {
    fn from_base(id: &str) -> NetChange {
        NetChange {
            base: id.to_string(),
            ..NetChange::default()
        }
    }

    fn apply(&mut self, removed: &[String], added: &[String]) {
        for line in removed {
            if !self.added.remove(line) {
                self.removed.insert(line.clone());
            }
        }
        for line in added {
            if !self.removed.remove(line) {
                self.added.insert(line.clone());
            }
        }
    }

    fn id(&self) -> String {
        let mut text = self.base.clone();
        for (sign, lines) in [('-', &self.removed), ('+', &self.added)] {
            for l in lines {
                text.push('\n');
                text.push(sign);
                text.push_str(l);
            }
        }
        format!("net:{}", agentforge_core::hash::tagged(text.as_bytes()))
    }
}

/// `(file, content id)` for each file a successful mutating step changed: the recorded
/// content hash, or (for logs without hashes) a hash of the arguments.
fn content_ids(s: &StepView) -> Vec<(String, String)> {
    if s.result != ActionResult::Success {
        return Vec::new();
    }
    // A command that rewrites files (`git stash`, `git checkout -- f`, a formatter) changes
    // them as an edit does when the log records their content after it.
    // (A check that reformats as it runs is still a check.)
    let hashed = || {
        s.file_hashes
            .iter()
            .map(|(f, h)| (normalize_path(f), h.clone()))
            .collect()
    };
    match ActionCategory::of_step(s) {
        ActionCategory::Other | ActionCategory::Edit if !s.file_hashes.is_empty() => {
            return hashed()
        }
        ActionCategory::Edit => {}
        _ => return Vec::new(),
    }
    let summary = s.summary.to_lowercase();
    if summary.contains("nothing changed") || summary.contains("already has this content") {
        return Vec::new();
    }
    let Some(target) = target_of(s) else {
        return Vec::new();
    };
    let mut params = normalize_params(&s.parameters);
    if let Value::Object(map) = &mut params {
        map.remove("path");
        // Code compared as code: a rewrite that only respaces or recomments is the same.
        // From the arguments as given: the normalized ones are on one line, and a comment
        // at the start of that line would swallow all the code after it.
        for (k, v) in map.iter_mut() {
            if let (true, Some(text)) =
                (CODE_KEYS.contains(&k.as_str()), param_str(&s.parameters, k))
            {
                *v = Value::String(code_id(text));
            }
        }
    }
    let h = agentforge_core::hash::tagged(params.to_string().as_bytes());
    vec![(normalize_path(target), format!("args:{h}"))]
}

/// A successful insertion of lines that hold no code (blank lines, comments).
fn inserts_no_code(s: &StepView) -> bool {
    s.result == ActionResult::Success
        && matches!(s.action.as_str(), "insert_lines" | "insert")
        && ["text", "new_text", "content", "new_str"]
            .iter()
            .find_map(|k| param_str(&s.parameters, k))
            .is_some_and(|t| code_lines(t).is_empty())
}

/// `(file, place, code id)` of a successful step that writes a range of lines or a whole
/// file: writing code equal to what the file's last change wrote at the same place
/// changes nothing.
fn rewrite_of(s: &StepView) -> Option<(String, String, String)> {
    if s.result != ActionResult::Success {
        return None;
    }
    let p = &s.parameters;
    let file = normalize_path(s.target.as_deref().or(param_str(p, "path"))?);
    let text = ["new_text", "new_content", "content", "file_text", "text"]
        .iter()
        .find_map(|k| param_str(p, k))?;
    let place = match s.action.as_str() {
        "replace_lines" => {
            let n = |k: &str| p.get(k).and_then(Value::as_u64);
            format!("{:?}-{:?}", n("start_line"), n("end_line"))
        }
        "write_file" | "create_file" | "create" | "write" => "whole".to_string(),
        _ => return None,
    };
    Some((file, place, code_id(text)))
}

/// Arguments holding code, compared by [`code_id`].
const CODE_KEYS: &[&str] = &[
    "content",
    "new_content",
    "new_text",
    "old_text",
    "file_text",
];

/// Lines of code an edit removes and adds.
type CodeDiff = (Vec<String>, Vec<String>);

/// `(file, code diff)` of a successful text-replacing edit.
fn text_edit(s: &StepView) -> Option<(String, CodeDiff)> {
    if ActionCategory::of(&s.action) != ActionCategory::Edit || s.result != ActionResult::Success {
        return None;
    }
    let p = &s.parameters;
    let file = normalize_path(
        s.target
            .as_deref()
            .or(param_str(p, "path"))
            .or(param_str(p, "file_path"))?,
    );
    let old = param_str(p, "old_text").or(param_str(p, "old_str"))?;
    let new = param_str(p, "new_text").or(param_str(p, "new_str"))?;
    Some((file, code_diff(old, new)))
}

/// The file of an earlier edit that this one undoes: it adds back the code that one
/// removed and removes the code that one added, however spaced or commented.
///
/// Only the file's latest change counts: taking out one of several earlier additions
/// (a debug print among others) while the later ones stay is cleaning up, not putting
/// the file back. `edits` holds each edit with the number of contents the file had
/// after it; `seen` the file's contents so far.
fn undone_edit(
    edit: Option<&(String, CodeDiff)>,
    edits: &HashMap<String, Vec<(usize, CodeDiff)>>,
    seen: &HashMap<String, Vec<String>>,
) -> Option<String> {
    let (file, (removed, added)) = edit?;
    let versions = seen.get(file).map_or(0, Vec::len);
    edits
        .get(file)?
        .last()
        .is_some_and(|(n, (r, a))| *n == versions && r == added && a == removed)
        .then(|| file.clone())
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One verification result named in a summary (`tests: 12 passed, 1 failed (exit 101)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Check name.
    pub name: String,
    /// Passed or failed, when the text says.
    pub passing: Option<bool>,
    /// Passed tests.
    pub good: u64,
    /// Failed tests, errors, warnings.
    pub bad: u64,
    /// Whether any count was found.
    pub counted: bool,
}

static COUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(\d+)\s+(passed|passing|ok|failed|failing|failures?|errors?|warnings?)\b")
        .expect("valid regex")
});
static PREVIOUS_ERRORS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)due to (\d+) previous errors?").expect("valid regex"));
static CHECK_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9_.-]{1,40}$").expect("valid regex"));

/// The verification results a step reports: a check step's summary, or the part of a
/// successful edit's summary after `checks:` (edits re-run the checks).
fn segments(s: &StepView, category: ActionCategory) -> Vec<Segment> {
    let text = match category {
        ActionCategory::Check => s.summary.as_str(),
        ActionCategory::Edit if s.result == ActionResult::Success => {
            match s.summary.split_once("; checks: ") {
                Some((_, checks)) => checks,
                None => return Vec::new(),
            }
        }
        _ => return Vec::new(),
    };
    let segs: Vec<Segment> = text
        .split("; ")
        .filter_map(|seg| {
            let (name, rest) = seg.split_once(": ")?;
            let name = name.trim();
            CHECK_NAME.is_match(name).then(|| parse_segment(name, rest))
        })
        .collect();
    if !segs.is_empty() || category != ActionCategory::Check {
        return segs;
    }
    // Other agents' logs: the counts are in the runner's output (its summary line is
    // near the end).
    let out = s.output.as_deref().or(s.error.as_deref()).unwrap_or("");
    let tail = tail_chars(out, 3_000);
    // Named after the command, so each check's counts are compared with its own.
    let name = format!(
        "output:{}",
        command_of(s).or(s.target.as_deref()).unwrap_or(&s.action)
    );
    let seg = parse_segment(&name, tail);
    if seg.counted {
        vec![seg]
    } else {
        Vec::new()
    }
}

/// The last `n` bytes of a text (at a character boundary).
fn tail_chars(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

fn parse_segment(name: &str, rest: &str) -> Segment {
    let (mut good, mut bad, mut counted) = (0, 0, false);
    if let Some(c) = PREVIOUS_ERRORS.captures(rest) {
        bad += c[1].parse::<u64>().unwrap_or(0);
        counted = true;
    } else {
        for c in COUNT.captures_iter(rest) {
            let n: u64 = c[1].parse().unwrap_or(0);
            counted = true;
            match c[2].to_lowercase().as_str() {
                "passed" | "passing" | "ok" => good += n,
                _ => bad += n,
            }
        }
    }
    let lower = rest.to_lowercase();
    let passing = if lower.contains("(exit 0)") || lower.starts_with("passed") {
        Some(true)
    } else if lower.contains("failed")
        || lower.contains("timed out")
        || lower.contains("(exit ")
        || lower.contains("killed")
    {
        Some(false)
    } else if counted && bad == 0 {
        Some(true)
    } else {
        None
    };
    Segment {
        name: name.to_string(),
        passing,
        good,
        bad,
        counted,
    }
}

impl Segment {
    /// Whether `self` is better than `before`: turned green, fewer failures with no fewer
    /// passing, or more passing without more failures. Fewer failures with fewer passing
    /// is a run that stopped earlier (a collection or build error), not a better one.
    fn improves_on(&self, before: &Segment) -> bool {
        (before.passing == Some(false) && self.passing == Some(true))
            || (self.counted
                && before.counted
                && ((self.bad < before.bad && self.good >= before.good)
                    || (self.good > before.good && self.bad <= before.bad)))
    }
}

/// One recent step as the detectors see it.
#[derive(Debug)]
pub(crate) struct Info<'a> {
    /// The step.
    pub view: &'a StepView,
    /// What the step shows by itself (shared with every check that looks at it; its
    /// fields read through `Deref`).
    fixed: Arc<Fixed>,
    /// Category of the action.
    pub category: ActionCategory,
    /// A successful edit that changes only whitespace or comments.
    pub noop: bool,
    /// A no-op edit written differently from every earlier call (respaced, recommented),
    /// rather than the very same call again.
    pub cosmetic: bool,
    /// The environment posted something new just before this step.
    pub news_before: bool,
    /// Its output differs from the last output of the same call (same action, same
    /// arguments): a polled command moved on, a file changed under a read.
    pub output_new: bool,
    /// Produced something the recent steps had not: new file content, a read not done
    /// since the file last changed, a check result that differs, more output, a new error.
    pub fresh: bool,
    /// Not fresh, or a read of lines at least a third of which were already read since
    /// the file last changed: new lines at the edges of a place already looked at.
    pub revisit: bool,
    /// Verification got better (fewer failures, more passing, a check turned green).
    pub improved: bool,
    /// Output grew since the previous run of the same action (polling a long command).
    pub grew: bool,
    /// Made progress: new content, better or different verification, growing output.
    pub progress: bool,
    /// Verification differs in any way from the previous step's.
    pub verification_changed: bool,
    /// The files it changed and their content ids.
    pub content: Vec<(String, String)>,
    /// Files it put back into an earlier state.
    pub returns: Vec<String>,
    /// For each file it put back into an earlier version: the steps during which the
    /// file had that version before (`since..until`; `since` 0: as the task found it).
    pub back_to: Vec<(String, u64, u64)>,
    /// Context indices of earlier successful mutations whose text this one rewrites.
    pub rewrites: Vec<usize>,
}

impl std::ops::Deref for Info<'_> {
    type Target = Fixed;

    fn deref(&self) -> &Fixed {
        &self.fixed
    }
}

impl Info<'_> {
    /// A successful step that changed workspace files.
    pub fn mutated(&self) -> bool {
        !self.content.is_empty()
    }

    /// One line for a detection's evidence.
    pub fn describe(&self) -> String {
        let v = self.view;
        let target = v
            .target
            .as_deref()
            .map(|t| format!(" {t}"))
            .unwrap_or_default();
        let error = self
            .sig
            .error
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        // What a message said is its substance; its summary is often just "think".
        let said = if self.category == ActionCategory::Message {
            message_text(v)
        } else {
            v.summary.clone()
        };
        let summary: String = said.chars().take(100).collect();
        format!(
            "step {}: {}{} -> {}{}: {}",
            v.step, v.action, target, v.result, error, summary
        )
    }
}

/// Windows of history the analysis looks back over for comparisons (has this been read,
/// run, said before?): enough for a cycle of a whole window's distinct actions to show
/// up twice.
pub(crate) const LOOKBACK: usize = 3;

/// The recent steps, analysed.
pub(crate) struct Analysis<'a> {
    /// The last `LOOKBACK * window` steps but the environment's events, oldest first.
    pub ctx: Vec<Info<'a>>,
    /// Index in `ctx` of the first step of the detection window.
    pub window_start: usize,
    /// No step has changed a file yet: the task is still being explored.
    pub exploring: bool,
}

impl<'a> Analysis<'a> {
    /// Analyses the end of `history` (whose file facts are `prepared`'s first entries).
    pub(crate) fn new<V: Borrow<StepView>>(
        history: &'a [V],
        prepared: &Prepared,
        window: usize,
    ) -> Self {
        let window = window.max(1);
        let base = history.len().saturating_sub(LOOKBACK * window);
        let mut ctx: Vec<Info<'a>> = Vec::with_capacity(history.len() - base);
        let mut events: HashSet<String> = HashSet::new();
        let mut news = false;
        for (i, view) in history.iter().enumerate().skip(base) {
            let view: &'a StepView = view.borrow();
            let fixed = match prepared.fixed.get(i) {
                Some(f) => Arc::clone(f),
                None => Arc::new(Fixed::of(view)),
            };
            // Notifications the environment posted are not the agent's moves; one it has
            // not posted before is news the agent may answer (say again what it said).
            // (`fixed.output` and `fixed.params` are the step's `output_fingerprint` and
            // `normalize_params`.)
            if ActionCategory::of(&view.action) == ActionCategory::Event {
                let said = fixed.output.clone().unwrap_or_else(|| {
                    format!("{}|{}", fixed.stripped.summary(view), fixed.params)
                });
                news |= events.insert(said);
                continue;
            }
            let facts = prepared.steps.get(i).cloned().unwrap_or_default();
            ctx.push(analyse_step(
                view,
                facts,
                fixed,
                &ctx,
                std::mem::take(&mut news),
            ));
        }
        let window_start = ctx.len().saturating_sub(window);
        let exploring = history
            .len()
            .checked_sub(1)
            .and_then(|last| prepared.steps.get(last))
            .is_none_or(|f| !f.changed_so_far);
        Analysis {
            ctx,
            window_start,
            exploring,
        }
    }

    /// The detection window: the last `window` steps.
    pub fn window(&self) -> &[Info<'a>] {
        &self.ctx[self.window_start..]
    }

    /// The most recent step.
    pub fn last(&self) -> Option<&Info<'a>> {
        self.ctx.last()
    }
}

/// What a read-like step looked at; the same key means the same information.
fn read_key(s: &StepView, category: ActionCategory, params: &Value) -> String {
    let target = target_of(s).unwrap_or("");
    match (category, s.action.as_str()) {
        (ActionCategory::Read, "load_context") => match target.parse::<ContextItem>() {
            Ok(ContextItem::FullFile(path)) => format!("file:{}|null-null", normalize_path(&path)),
            _ => format!("load:{}", target.trim()),
        },
        (ActionCategory::Read, action)
            if !target.is_empty() && !matches!(action, "list_files" | "list_dir") =>
        {
            let mut rest = params.clone();
            if let Value::Object(map) = &mut rest {
                map.remove("path");
            }
            format!("file:{}|{rest}", normalize_path(target))
        }
        (ActionCategory::Search, _) => format!(
            "search:{}|{}|{}",
            search_term(search_pattern(s).unwrap_or("")),
            param_str(params, "path")
                .map(normalize_path)
                .unwrap_or_default(),
            param_str(params, "glob").unwrap_or_default()
        ),
        _ => format!("{}:{}", s.action, params),
    }
}

/// The file a read key is about, if any.
fn read_key_file(key: &str) -> Option<&str> {
    key.strip_prefix("file:")
        .and_then(|rest| rest.split('|').next())
}

/// Lines a read with only a start is taken to cover (a typical page).
const NOMINAL_PAGE: u64 = 100;

/// What part of a file a read showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coverage {
    /// The whole file.
    Whole,
    /// These lines (first, last).
    Lines(u64, u64),
    /// Some part the arguments do not say in lines (a scroll, a page number).
    Unknown,
}

/// What part of a file a read asks for.
fn read_coverage(p: &Value) -> Coverage {
    if let Some((s, e)) = read_range(p) {
        return Coverage::Lines(s, e);
    }
    let extra = p
        .as_object()
        .is_some_and(|m| m.keys().any(|k| k != "path" && k != "file_path"));
    if extra {
        Coverage::Unknown
    } else {
        Coverage::Whole
    }
}

/// The lines a file read asks for, from whichever arguments the tool uses
/// (`start_line`/`end_line`, `offset`/`limit`, `view_range`, `start`/`end`, `line`).
fn read_range(p: &Value) -> Option<(u64, u64)> {
    let n = |k: &str| p.get(k).and_then(Value::as_u64);
    let (start, end) = match p.get("view_range").and_then(Value::as_array) {
        Some(r) if !r.is_empty() => (
            r[0].as_u64(),
            r.get(1)
                .and_then(Value::as_i64)
                .and_then(|e| u64::try_from(e).ok()),
        ),
        _ => {
            let start = n("start_line")
                .or(n("start"))
                .or(n("offset").map(|o| o + 1))
                .or(n("line"));
            let end = n("end_line").or(n("end")).or_else(|| {
                n("limit")
                    .zip(start.or(Some(1)))
                    .map(|(l, s)| s + l.max(1) - 1)
            });
            (start, end)
        }
    };
    match (start, end) {
        (None, None) => None,
        (Some(s), Some(e)) => Some((s, e.max(s))),
        (Some(s), None) => Some((s, s + NOMINAL_PAGE - 1)),
        (None, Some(e)) => Some((1, e.max(1))),
    }
}

/// Whether a read of `range` shows lines the earlier reads (`covered`) did not: at least
/// a third of its lines are new. A whole-file read is new after partial reads only; a read
/// of unknown extent is judged by its output instead.
fn covers_new_lines(range: Coverage, covered: &[Coverage]) -> bool {
    new_line_share(range, covered).is_none_or(|(new, all)| 3 * new > all - 1)
}

/// Of the lines a read of `range` asks for, how many the earlier reads (`covered`) did
/// not show, and how many it asks for; `None` for a whole-file read after partial reads
/// only (all new), `Some((0, 1))` when nothing can be new, or the extent is unknown.
fn new_line_share(range: Coverage, covered: &[Coverage]) -> Option<(u64, u64)> {
    if covered.contains(&Coverage::Whole) {
        return Some((0, 1));
    }
    let (s, e) = match range {
        Coverage::Lines(s, e) => (s, e),
        Coverage::Whole => return None,
        Coverage::Unknown => return Some((0, 1)),
    };
    let lines: Vec<(u64, u64)> = covered
        .iter()
        .filter_map(|c| match c {
            Coverage::Lines(a, b) => Some((*a, *b)),
            _ => None,
        })
        .collect();
    let new = (s..=e)
        .filter(|l| !lines.iter().any(|(a, b)| a <= l && l <= b))
        .count() as u64;
    Some((new, e - s + 1))
}

/// The text a message step says: its arguments, else what the agent wrote (its thought
/// and, for logs that record a message as the step's output, that output), else the
/// summary, which is often only a label such as "restates plan".
fn message_text(s: &StepView) -> String {
    if let Some(text) = ["text", "message", "content", "thought", "plan"]
        .iter()
        .find_map(|k| param_str(&s.parameters, k))
    {
        return text.to_string();
    }
    let said: Vec<&str> = [s.thought.as_deref(), s.output.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if said.is_empty() {
        s.summary.clone()
    } else {
        said.join("\n")
    }
}

/// What a step changes in files by itself, the input of [`Prepared::with_memo`]'s
/// history-wide file facts.
#[derive(Debug)]
pub(crate) struct StepChanges {
    /// [`text_edit`].
    edit: Option<(String, CodeDiff)>,
    /// [`rewrite_of`].
    rewrite: Option<(String, String, String)>,
    /// [`inserts_no_code`].
    inserts_no_code: bool,
    /// [`content_ids`].
    content: Vec<(String, String)>,
    /// A successful edit: the file it names (`None` when it names none, or is no edit).
    edited: Option<Option<String>>,
}

impl StepChanges {
    fn of(s: &StepView) -> StepChanges {
        let edited = (s.result == ActionResult::Success
            && ActionCategory::of(&s.action) == ActionCategory::Edit)
            .then(|| {
                s.target
                    .as_deref()
                    .or(param_str(&s.parameters, "path"))
                    .map(normalize_path)
            });
        StepChanges {
            edit: text_edit(s),
            rewrite: rewrite_of(s),
            inserts_no_code: inserts_no_code(s),
            content: content_ids(s),
            edited,
        }
    }
}

/// What a step shows by itself, whatever came before it: computed once per step (the
/// text work is the expensive part) and shared by every prefix that contains the step.
#[derive(Debug)]
pub(crate) struct Fixed {
    /// Its file changes.
    pub(crate) changes: StepChanges,
    /// Its semantic signature.
    pub(crate) sig: ActionSignature,
    /// `sig.key()`.
    pub(crate) key: String,
    /// Action name plus normalized target: one way of going at the problem.
    pub(crate) approach: String,
    /// The guard signature to block (`name:target`), when blocking it makes sense.
    pub(crate) block: Option<String>,
    /// Failed or skipped.
    pub(crate) failed: bool,
    /// Normalized error text of a failed step.
    pub(crate) error_fp: Option<String>,
    /// Normalized arguments.
    pub(crate) params: Value,
    /// A hash of `params`: most comparisons of two steps' arguments (dozens per step
    /// checked, each step against the ones before it) differ, and this tells them apart
    /// without walking two JSON trees. (`normalize_params` sorts keys, so equal values
    /// print, hence hash, the same.)
    params_hash: u64,
    /// What the failure of a check step that did not pass means (its
    /// [`failure_meaning`]): equal for the same failure however reworded.
    pub(crate) verif: Option<String>,
    /// Volatile-stripped summary and error of a check step.
    pub(crate) check_obs: Option<String>,
    /// What the failure of a failed step or failing check means ([`failure_meaning`]).
    pub(crate) failure: Option<String>,
    /// What a successful read-like step looked at.
    pub(crate) read_key: Option<String>,
    /// The part of the file a successful file read showed.
    pub(crate) range: Option<Coverage>,
    /// The content words of a message step.
    pub(crate) words: Option<BTreeSet<String>>,
    /// Verification results its summary reports.
    pub(crate) segs: Vec<Segment>,
    /// Fingerprint of its output ([`output_fingerprint`]).
    pub(crate) output: Option<String>,
    /// Its output's [`output_wording`], worked out the first time a prefix needs it.
    pub(crate) wording: Arc<OnceLock<Option<String>>>,
    /// Its summary and error as [`output_differs`] compares them.
    stripped: Stripped,
    /// Of a failed step: its [`failure_headline`] (empty otherwise).
    pub(crate) headline: Arc<str>,
    /// Of a command: what it runs, arguments aside ([`command_head`]).
    pub(crate) head: Option<Arc<str>>,
    /// A successful command that changed files ([`command_changes_files`]).
    pub(crate) file_command: bool,
}

impl Fixed {
    /// The two steps' normalized arguments are equal.
    pub(crate) fn same_params(&self, other: &Fixed) -> bool {
        self.params_hash == other.params_hash && self.params == other.params
    }

    fn of(view: &StepView) -> Fixed {
        let sig = ActionSignature::of(view);
        let category = sig.category;
        let key = sig.key();
        let approach = format!("{}:{}", view.action, sig.target.as_deref().unwrap_or(""));
        // A shell command's target is its program: blocking `python` would block every
        // Python command, so commands are warned about, never blocked.
        let blockable = !matches!(category, ActionCategory::Control | ActionCategory::Message)
            && view.action != "invalid_reply"
            && command_of(view).is_none();
        let block =
            blockable.then(|| format!("{}:{}", view.action, target_of(view).unwrap_or_default()));
        let failed = matches!(view.result, ActionResult::Failure | ActionResult::Skipped);
        let error_fp = failed.then(|| normalize_error(failure_text(view)));
        let params = normalize_params(&view.parameters);
        let params_hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            params.to_string().hash(&mut h);
            h.finish()
        };
        let is_check = category == ActionCategory::Check;
        let verif = (is_check && view.result != ActionResult::Success).then(|| {
            let mut text = view.error.clone().unwrap_or_else(|| view.summary.clone());
            if let Some(out) = &view.output {
                text.push('\n');
                text.push_str(tail_chars(out, 6_000));
            }
            failure_meaning(sig.error.unwrap_or(ErrorCategory::Other), &text)
        });
        let stripped = Stripped::default();
        let check_obs = is_check.then(|| stripped.said(view).to_string());
        let failure = verif.clone().or_else(|| {
            failed.then(|| {
                failure_meaning(
                    sig.error.unwrap_or(ErrorCategory::Other),
                    failure_text(view),
                )
            })
        });
        let read_key = (!failed
            && !is_check
            && !matches!(
                category,
                ActionCategory::Edit | ActionCategory::Control | ActionCategory::Message
            ))
        .then(|| read_key(view, category, &params));
        let range = read_key
            .as_deref()
            .and_then(read_key_file)
            .map(|_| read_coverage(&params));
        let segs = segments(view, category);
        let words =
            (category == ActionCategory::Message).then(|| content_words(&message_text(view)));
        Fixed {
            changes: StepChanges::of(view),
            sig,
            key,
            approach,
            block,
            failed,
            error_fp,
            params,
            params_hash,
            verif,
            check_obs,
            failure,
            read_key,
            range,
            words,
            segs,
            output: output_fingerprint(view),
            headline: if failed {
                Arc::from(failure_headline(view))
            } else {
                Arc::from("")
            },
            head: command_head(view).map(Arc::from),
            file_command: command_changes_files(view),
            wording: Arc::default(),
            stripped,
        }
    }
}

fn analyse_step<'a>(
    view: &'a StepView,
    facts: ContentFacts,
    fixed: Arc<Fixed>,
    before: &[Info<'a>],
    news_before: bool,
) -> Info<'a> {
    let Fixed {
        sig,
        approach,
        failed,
        error_fp,
        verif,
        check_obs,
        read_key,
        range,
        words,
        segs,
        output,
        wording,
        stripped,
        ..
    } = &*fixed;
    let (failed, range) = (*failed, *range);
    let category = sig.category;
    let is_check = category == ActionCategory::Check;
    let noop = facts.noop;
    let cosmetic = noop
        && !before
            .iter()
            .any(|b| b.view.action == view.action && b.same_params(&fixed));

    let same_approach = before.iter().rposition(|b| b.approach == *approach);
    // The same call made before (same action, same arguments; for a command, the same
    // command line however long it waited first): did its output move on?
    let is_command = command_of(view).is_some();
    let same_call = before.iter().rev().find(|b| {
        b.view.action == view.action
            && (b.same_params(&fixed) || (is_command && b.approach == *approach))
    });
    let grew = match (same_call, view.output_len) {
        (Some(b), Some(now)) => b.view.output_len.is_some_and(|then| now > then),
        _ => false,
    };
    let output_new = same_call.is_some_and(|b| {
        output_differs(
            view,
            output.as_deref(),
            stripped,
            b.view,
            b.output.as_deref(),
            &b.stripped,
        )
    });
    // New output counts as progress for a command still running or cut off by its time
    // limit; a finished failure that only reads differently is the same failure.
    // (An edit's output is its own report, not something it waited for; a message's
    // output is what it says, new only if its words are: see `fresh` below.)
    let output_new =
        output_new && !matches!(category, ActionCategory::Edit | ActionCategory::Message);
    let polled = (grew || output_new)
        && (view.result == ActionResult::Partial
            || view.result == ActionResult::Success
            || sig.error == Some(ErrorCategory::Timeout));

    // Verification compared with the latest earlier report of it.
    let checks = view.checks_passing.zip(view.checks_failing);
    let prev_counted = before
        .iter()
        .rev()
        .find_map(|b| Some((b, b.view.checks_passing.zip(b.view.checks_failing)?)));
    // The same failure from a run of more or fewer tests (`cargo test one_test`, then all
    // of them): only the number of passing tests it ran differs, not the verification.
    let other_selection = |b: &Info<'_>| {
        is_check
            && b.category == ActionCategory::Check
            && b.approach != *approach
            && b.verif == *verif
    };
    // Fewer failing checks is better, unless fewer pass too (the run stopped before
    // them: a collection or build error); more passing ones with as many failing is just
    // a check that ran for the first time.
    let (mut improved, mut verification_changed) = match (checks, prev_counted) {
        (Some((p, f)), Some((b, (pp, pf)))) => (
            f < pf && p >= pp,
            (p, f) != (pp, pf) && !(f == pf && other_selection(b)),
        ),
        _ => (false, false),
    };
    let mut segs_changed = false;
    for seg in segs {
        let prev = before
            .iter()
            .rev()
            .find_map(|b| b.segs.iter().find(|s| s.name == seg.name));
        if let Some(prev) = prev {
            improved |= seg.improves_on(prev);
            segs_changed |= seg != prev;
        }
    }
    verification_changed |= segs_changed;

    // A check whose result differs from its previous run: another failure (by meaning,
    // not wording), other counts, or a run still producing output.
    let prev_run = if is_check { same_approach } else { None };
    let changed_result = match prev_run {
        Some(p) => {
            let b = &before[p];
            b.view.result != view.result
                || b.verif != *verif
                || (segs_changed && !segs.is_empty())
                // Only a finished failure is compared by meaning; a run still going or
                // passing shows its progress in its summary.
                || (view.result != ActionResult::Failure && b.check_obs != *check_obs)
                || polled
        }
        None => false,
    };
    // Longer output of a finished failure is the same failure worded at more length
    // (another value named in the message); only a run still going shows progress by it.
    verification_changed |= changed_result || polled;

    let mutated_between = |from: usize, file: Option<&str>| {
        before[from + 1..].iter().any(|b| {
            b.content
                .iter()
                .any(|(f, _)| file.is_none_or(|want| want == f))
        })
    };
    // Set by a file read below that goes back over lines already read.
    let mut revisit = false;
    let fresh = if category == ActionCategory::Edit && !failed {
        facts.new_content
    } else if is_check {
        match prev_run {
            None => true,
            Some(p) => changed_result || grew || mutated_between(p, None),
        }
    } else if failed {
        let prev_failure = before
            .iter()
            .rev()
            .find(|b| b.failed && b.approach == *approach);
        // The same failing command whose output says other things in other words (not
        // just other values: `pending` became `pass` for two of four jobs) shows the
        // world moved on: a failing poll, not a repeat.
        let reworded = output_new
            && prev_failure.is_some_and(|b| {
                let now = wording.get_or_init(|| output_wording(view));
                now.is_some() && b.wording.get_or_init(|| output_wording(b.view)) != now
            });
        polled || reworded || prev_failure.is_none_or(|b| b.error_fp != *error_fp)
    } else if category == ActionCategory::Control {
        true
    } else if let Some(words) = &words {
        // Saying again what was said since anything new came in is not new. Reading
        // around in between is not acting on the plan: only progress, a change to the
        // code, a command or check with a new result, or news from the environment make
        // saying it again an answer to something.
        let since = before
            .iter()
            .rposition(|b| {
                b.progress
                    || b.mutated()
                    || b.news_before
                    || (b.fresh
                        && matches!(b.category, ActionCategory::Check | ActionCategory::Other))
            })
            .map_or(0, |p| p + 1);
        // After reading something new, talking about the same code again is expected:
        // only a near-verbatim restatement then counts as saying the same thing.
        news_before
            || !before[since..].iter().enumerate().any(|(k, b)| {
                let learned = before[since + k + 1..]
                    .iter()
                    .any(|x| x.fresh && x.category != ActionCategory::Message);
                b.words
                    .as_ref()
                    .is_some_and(|w| same_message(w, words, learned))
            })
    } else {
        let key = read_key.as_deref().unwrap_or_default();
        match read_key_file(key) {
            Some(file) => {
                // Lines read since the file last changed (or the same read showing new
                // content: the file changed outside the agent's edits).
                let last_change = before
                    .iter()
                    .rposition(|b| b.content.iter().any(|(f, _)| f == file))
                    .map_or(0, |p| p + 1);
                let earlier: Vec<&Info<'_>> = before[last_change..]
                    .iter()
                    .filter(|b| b.read_key.as_deref().and_then(read_key_file) == Some(file))
                    .collect();
                let covered: Vec<Coverage> = earlier.iter().filter_map(|b| b.range).collect();
                let seen_key = earlier.iter().any(|b| b.read_key == *read_key);
                // A third or more of its lines already read: the range shifted, the
                // place looked at did not.
                revisit = matches!(range, Some(Coverage::Lines(..)))
                    && !earlier.is_empty()
                    && new_line_share(range.unwrap_or(Coverage::Whole), &covered)
                        .is_some_and(|(new, all)| 3 * (all - new) >= all);
                earlier.is_empty()
                    || covers_new_lines(range.unwrap_or(Coverage::Whole), &covered)
                    || (range == Some(Coverage::Unknown) && !seen_key)
                    || output_new
                    || grew
            }
            None => {
                let previous = before
                    .iter()
                    .rposition(|b| b.read_key.as_deref() == Some(key));
                match previous {
                    None => true,
                    Some(p) => {
                        grew || output_new || mutated_between(p, None)
                        // Loaded test output and error details change when a check
                        // run in between gave a new result.
                            || (key.starts_with("load:")
                                && before[p + 1..]
                                    .iter()
                                    .any(|b| b.category == ActionCategory::Check && b.fresh))
                    }
                }
            }
        }
    };

    let rewrites = rewritten(view, &facts, before);
    let progress = facts.new_content || improved || changed_result || polled;
    let revisit = revisit || !fresh;
    Info {
        view,
        category,
        noop,
        cosmetic,
        output_new,
        news_before,
        fresh,
        revisit,
        improved,
        grew,
        progress,
        verification_changed,
        content: facts.content,
        returns: facts.returns,
        back_to: facts.back_to,
        rewrites,
        fixed,
    }
}

/// The text a mutation wrote (new text of an edit, content of a write).
fn written_text(s: &StepView) -> Option<String> {
    ["new_text", "content", "new_content"]
        .iter()
        .find_map(|k| param_str(&s.parameters, k))
        .map(collapse)
}

/// Earlier successful mutations (context indices) whose text `view` rewrites: a whole-file
/// write over an earlier change, an edit whose `old_text` overlaps what an earlier edit
/// wrote, a `replace_lines` over an earlier replaced range, an undo. An earlier edit that
/// changed nothing (whitespace, comments) counts: going back to the same lines is another
/// try at them.
fn rewritten(view: &StepView, facts: &ContentFacts, before: &[Info<'_>]) -> Vec<usize> {
    if facts.content.is_empty() {
        return Vec::new();
    }
    let files: HashSet<&str> = facts.content.iter().map(|(f, _)| f.as_str()).collect();
    let touches = |b: &Info<'_>| {
        b.content.iter().any(|(f, _)| files.contains(f.as_str()))
            || (b.noop
                && target_of(b.view).is_some_and(|t| files.contains(normalize_path(t).as_str())))
    };
    let old = param_str(&view.parameters, "old_text").map(collapse);
    let range = |s: &StepView| {
        let n = |k| s.parameters.get(k).and_then(Value::as_u64);
        n("start_line").zip(n("end_line"))
    };
    before
        .iter()
        .enumerate()
        .filter(|(_, b)| touches(b))
        .filter(|(_, b)| {
            if !facts.returns.is_empty() || view.action == "write_file" {
                return true;
            }
            match view.action.as_str() {
                "edit_file" => match (&old, written_text(b.view)) {
                    (Some(old), Some(written)) if !old.is_empty() && !written.is_empty() => {
                        written.contains(old.as_str()) || old.contains(written.as_str())
                    }
                    _ => false,
                },
                "replace_lines" => match (range(view), range(b.view)) {
                    (Some((s1, e1)), Some((s2, e2))) => s1 <= e2 && s2 <= e1,
                    _ => false,
                },
                _ => false,
            }
        })
        .map(|(i, _)| i)
        .collect()
}
