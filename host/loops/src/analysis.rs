//! What each recent step did, in the terms the detectors reason in: did it produce
//! anything new (`fresh`), did it move the task forward (`progress`), did it put a file
//! back into an earlier state (`returns`), did it rewrite its own earlier attempt
//! (`rewrites`).
//!
//! Facts that depend on the whole history (has this file content been seen before?) are
//! computed once per history in [`Prepared`], so that replaying a log prefix by prefix
//! stays linear in the history per prefix; everything else is computed over a bounded
//! context of the most recent steps.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::signature::{
    normalize_error, normalize_params, normalize_path, param_str, search_term, strip_volatile,
    ActionCategory, ActionSignature,
};
use super::StepView;
use agentforge_core::actions::ContextItem;
use agentforge_core::state::ActionResult;

/// History-wide facts about the file changes of each step.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    steps: Vec<ContentFacts>,
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
    /// Some step up to and including this one changed a file.
    changed_so_far: bool,
}

impl Prepared {
    /// Computes the file-change facts of every step of `history`, oldest first. Each
    /// step's facts depend only on the steps before it, so the result is valid for every
    /// prefix.
    pub(crate) fn new(history: &[StepView]) -> Prepared {
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        // Successful text edits per file as (old, new), to spot an edit undoing another.
        let mut edits: HashMap<String, Vec<(String, String)>> = HashMap::new();
        let mut changed_so_far = false;
        let steps = history
            .iter()
            .map(|s| {
                let content = content_ids(s);
                let undo = undone_edit(s, &edits);
                changed_so_far |= !content.is_empty();
                let mut facts = ContentFacts {
                    content: content.clone(),
                    changed_so_far,
                    ..ContentFacts::default()
                };
                for (file, id) in &content {
                    let ids = seen.entry(file.clone()).or_default();
                    let returned = ids.last() != Some(id) && ids.contains(id);
                    if returned || undo.as_deref() == Some(file.as_str()) {
                        facts.returns.push(file.clone());
                    } else if !ids.contains(id) {
                        facts.new_content = true;
                    }
                    ids.push(id.clone());
                }
                if let Some(file) = undo {
                    if !facts.returns.contains(&file) {
                        facts.returns.push(file);
                    }
                }
                if let Some((file, old, new)) = text_edit(s) {
                    edits.entry(file).or_default().push((old, new));
                }
                facts
            })
            .collect();
        Prepared { steps }
    }
}

/// `(file, content id)` for each file a successful mutating step changed: the recorded
/// content hash, or (for logs without hashes) a hash of the arguments.
fn content_ids(s: &StepView) -> Vec<(String, String)> {
    if ActionCategory::of(&s.action) != ActionCategory::Edit || s.result != ActionResult::Success {
        return Vec::new();
    }
    if !s.file_hashes.is_empty() {
        return s
            .file_hashes
            .iter()
            .map(|(f, h)| (normalize_path(f), h.clone()))
            .collect();
    }
    let summary = s.summary.to_lowercase();
    if summary.contains("nothing changed") || summary.contains("already has this content") {
        return Vec::new();
    }
    let Some(target) = s.target.as_deref() else {
        return Vec::new();
    };
    let mut params = normalize_params(&s.parameters);
    if let Value::Object(map) = &mut params {
        map.remove("path");
    }
    let h = agentforge_core::hash::tagged(params.to_string().as_bytes());
    vec![(normalize_path(target), format!("args:{h}"))]
}

/// `(file, old_text, new_text)` of a successful `edit_file`, whitespace-collapsed.
fn text_edit(s: &StepView) -> Option<(String, String, String)> {
    if s.action != "edit_file" || s.result != ActionResult::Success {
        return None;
    }
    let file = normalize_path(s.target.as_deref().or(param_str(&s.parameters, "path"))?);
    let old = collapse(param_str(&s.parameters, "old_text")?);
    let new = collapse(param_str(&s.parameters, "new_text")?);
    Some((file, old, new))
}

/// The file of an earlier edit that `s` exactly undoes (its old and new text swapped).
fn undone_edit(s: &StepView, edits: &HashMap<String, Vec<(String, String)>>) -> Option<String> {
    let (file, old, new) = text_edit(s)?;
    edits
        .get(&file)?
        .iter()
        .any(|(o, n)| *o == new && *n == old && o != n)
        .then_some(file)
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
    text.split("; ")
        .filter_map(|seg| {
            let (name, rest) = seg.split_once(": ")?;
            let name = name.trim();
            CHECK_NAME.is_match(name).then(|| parse_segment(name, rest))
        })
        .collect()
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
    /// Whether `self` is better than `before`: turned green, fewer failures, or more
    /// passing without more failures.
    fn improves_on(&self, before: &Segment) -> bool {
        (before.passing == Some(false) && self.passing == Some(true))
            || (self.counted
                && before.counted
                && (self.bad < before.bad || (self.good > before.good && self.bad <= before.bad)))
    }
}

/// One recent step as the detectors see it.
#[derive(Debug)]
pub(crate) struct Info<'a> {
    /// The step.
    pub view: &'a StepView,
    /// Its semantic signature.
    pub sig: ActionSignature,
    /// `sig.key()`.
    pub key: String,
    /// Action name plus normalized target: one way of going at the problem.
    pub approach: String,
    /// The guard signature to block (`name:target`), when blocking it makes sense.
    pub block: Option<String>,
    /// Category of the action.
    pub category: ActionCategory,
    /// Failed or skipped.
    pub failed: bool,
    /// Normalized error text of a failed step.
    pub error_fp: Option<String>,
    /// Normalized arguments.
    pub params: Value,
    /// Normalized failure output of a check step that did not pass.
    pub verif: Option<String>,
    /// Produced something the recent steps had not: new file content, a read not done
    /// since the file last changed, a check result that differs, more output, a new error.
    pub fresh: bool,
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
    /// Context indices of earlier successful mutations whose text this one rewrites.
    pub rewrites: Vec<usize>,
    /// Verification results its summary reports.
    segs: Vec<Segment>,
    /// Volatile-stripped summary and error of a check step.
    check_obs: Option<String>,
    /// What a successful read-like step looked at.
    read_key: Option<String>,
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
        let summary: String = v.summary.chars().take(100).collect();
        format!(
            "step {}: {}{} -> {}{}: {}",
            v.step, v.action, target, v.result, error, summary
        )
    }
}

/// The recent steps, analysed.
pub(crate) struct Analysis<'a> {
    /// The last `2 * window` steps (lookback for comparisons), oldest first.
    pub ctx: Vec<Info<'a>>,
    /// Index in `ctx` of the first step of the detection window.
    pub window_start: usize,
    /// No step has changed a file yet: the task is still being explored.
    pub exploring: bool,
}

impl<'a> Analysis<'a> {
    /// Analyses the end of `history` (whose file facts are `prepared`'s first entries).
    pub(crate) fn new(history: &'a [StepView], prepared: &Prepared, window: usize) -> Self {
        let window = window.max(1);
        let base = history.len().saturating_sub(2 * window);
        let mut ctx: Vec<Info<'a>> = Vec::with_capacity(history.len() - base);
        for (i, view) in history.iter().enumerate().skip(base) {
            let facts = prepared.steps.get(i).cloned().unwrap_or_default();
            let info = analyse_step(view, facts, &ctx);
            ctx.push(info);
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
    let target = s.target.as_deref().unwrap_or("");
    match (category, s.action.as_str()) {
        (ActionCategory::Read, "read_file") => format!(
            "file:{}|{}-{}",
            normalize_path(target),
            params.get("start_line").unwrap_or(&Value::Null),
            params.get("end_line").unwrap_or(&Value::Null)
        ),
        (ActionCategory::Read, "load_context") => match target.parse::<ContextItem>() {
            Ok(ContextItem::FullFile(path)) => format!("file:{}|null-null", normalize_path(&path)),
            _ => format!("load:{}", target.trim()),
        },
        (ActionCategory::Search, _) => format!(
            "search:{}|{}|{}",
            search_term(target),
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

fn analyse_step<'a>(view: &'a StepView, facts: ContentFacts, before: &[Info<'a>]) -> Info<'a> {
    let sig = ActionSignature::of(view);
    let category = sig.category;
    let key = sig.key();
    let approach = format!("{}:{}", view.action, sig.target.as_deref().unwrap_or(""));
    let blockable = category != ActionCategory::Control && view.action != "invalid_reply";
    let block = blockable.then(|| {
        format!(
            "{}:{}",
            view.action,
            view.target.clone().unwrap_or_default()
        )
    });
    let failed = matches!(view.result, ActionResult::Failure | ActionResult::Skipped);
    let error_fp = failed.then(|| normalize_error(view.error.as_deref().unwrap_or(&view.summary)));
    let params = normalize_params(&view.parameters);
    let is_check = category == ActionCategory::Check;
    let verif = (is_check && view.result != ActionResult::Success)
        .then(|| normalize_error(view.error.as_deref().unwrap_or(&view.summary)));
    let check_obs = is_check.then(|| {
        format!(
            "{}\n{}",
            strip_volatile(&view.summary),
            strip_volatile(view.error.as_deref().unwrap_or(""))
        )
    });

    let read_key = (!failed
        && !is_check
        && !matches!(category, ActionCategory::Edit | ActionCategory::Control))
    .then(|| read_key(view, category, &params));
    let same_approach = before.iter().rposition(|b| b.approach == approach);
    let grew = match (same_approach, view.output_len) {
        (Some(p), Some(now)) => before[p].view.output_len.is_some_and(|then| now > then),
        _ => false,
    };

    // Verification compared with the latest earlier report of it.
    let checks = view.checks_passing.zip(view.checks_failing);
    let prev_checks = before
        .iter()
        .rev()
        .find_map(|b| b.view.checks_passing.zip(b.view.checks_failing));
    // Fewer failing checks is better; more passing ones with as many failing is just a
    // check that ran for the first time.
    let (mut improved, mut verification_changed) = match (checks, prev_checks) {
        (Some((p, f)), Some((pp, pf))) => (f < pf, (p, f) != (pp, pf)),
        _ => (false, false),
    };
    let segs = segments(view, category);
    for seg in &segs {
        let prev = before
            .iter()
            .rev()
            .find_map(|b| b.segs.iter().find(|s| s.name == seg.name));
        if let Some(prev) = prev {
            improved |= seg.improves_on(prev);
            verification_changed |= seg != prev;
        }
    }

    // A check whose result differs from its previous run: the failure moved (or the
    // command is still producing output).
    let prev_run = if is_check { same_approach } else { None };
    let changed_result = match (prev_run, &check_obs) {
        (Some(p), Some(obs)) => before[p].check_obs.as_deref() != Some(obs.as_str()),
        _ => false,
    };
    verification_changed |= changed_result || grew;

    let mutated_between = |from: usize, file: Option<&str>| {
        before[from + 1..].iter().any(|b| {
            b.content
                .iter()
                .any(|(f, _)| file.is_none_or(|want| want == f))
        })
    };
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
            .find(|b| b.failed && b.approach == approach);
        prev_failure.is_none_or(|b| b.error_fp != error_fp)
    } else if category == ActionCategory::Control {
        true
    } else {
        let key = read_key.as_deref().unwrap_or_default();
        let previous = before
            .iter()
            .rposition(|b| b.read_key.as_deref() == Some(key));
        match previous {
            None => true,
            Some(p) => {
                grew || match read_key_file(key) {
                    Some(file) => mutated_between(p, Some(file)),
                    // Loaded test output and error details change when a check run
                    // in between gave a new result.
                    None if key.starts_with("load:") => {
                        mutated_between(p, None)
                            || before[p + 1..]
                                .iter()
                                .any(|b| b.category == ActionCategory::Check && b.fresh)
                    }
                    None => mutated_between(p, None),
                }
            }
        }
    };

    let rewrites = rewritten(view, &facts, before);
    let progress = facts.new_content || improved || changed_result || grew;
    Info {
        view,
        sig,
        key,
        approach,
        block,
        category,
        failed,
        error_fp,
        params,
        verif,
        fresh,
        improved,
        grew,
        progress,
        verification_changed,
        content: facts.content,
        returns: facts.returns,
        rewrites,
        segs,
        check_obs,
        read_key,
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
/// wrote, a `replace_lines` over an earlier replaced range, an undo.
fn rewritten(view: &StepView, facts: &ContentFacts, before: &[Info<'_>]) -> Vec<usize> {
    if facts.content.is_empty() {
        return Vec::new();
    }
    let files: HashSet<&str> = facts.content.iter().map(|(f, _)| f.as_str()).collect();
    let old = param_str(&view.parameters, "old_text").map(collapse);
    let range = |s: &StepView| {
        let n = |k| s.parameters.get(k).and_then(Value::as_u64);
        n("start_line").zip(n("end_line"))
    };
    before
        .iter()
        .enumerate()
        .filter(|(_, b)| b.content.iter().any(|(f, _)| files.contains(f.as_str())))
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
