//! Learning from enforcement (seed 003, layer 3) as a run uses it.
//!
//! - A step's enforcement events (a guard's denial or warning, a refused `complete`, an
//!   auto-revert, a loop) become [`TraceEvent`]s in the step's log line
//!   ([`guard_event`], [`revert_event`], [`loop_event`]).
//! - Once the line is written they are copied into `.agentforge/graph.db`
//!   ([`Learning::record_step`]), keyed by task, step and index, so the copy repeated
//!   when a killed run resumes ([`Learning::sync_last`]) or by `agentforge learn`
//!   ([`Learning::sync_log`]) adds nothing twice.
//! - Before each step the most relevant traces are shown as `precedents:`
//!   ([`Learning::precedents`]).
//! - At a task's end (and on `agentforge learn`) traces are grouped into patterns and
//!   patterns over the threshold become proposed rules ([`Learning::learn`]); approved
//!   rules reach the `guard-learned-rules` plugin ([`Learning::approved_rules_json`]).
//!
//! - With `[learning.embeddings]` (see [`crate::embedding`]) the traces a step recorded
//!   are embedded after they are copied, the question before a step is embedded too and
//!   the precedents are ranked by full text and by cosine together; `agentforge learn`
//!   embeds the traces still without a vector ([`Learning::backfill`]).
//!
//! Learning never stops a run: the log line is the record, so a trace the database
//! could not take (a locked or broken file) is reported and copied on the next sync.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use agentforge_context::Precedent as ShownPrecedent;
use agentforge_core::guards::{GuardDecision, Ruling};
use agentforge_core::state::{ActionRecord, LoopWarning, TaskState};
use agentforge_core::task::TaskSpec;
use agentforge_core::text::cut;
use agentforge_core::trace::{trace_key, Trace, TraceContext, TraceEvent, TraceKind, TraceSource};
use agentforge_graph::{
    Graph, GraphError, LearnReport, LearnSettings, PrecedentQuery, QueryVector,
};
use agentforge_providers::EmbeddingsError;

use crate::embedding::{Embedder, EmbeddingsConfig};

/// The trace database, in the workspace's `.agentforge/`.
pub const GRAPH_FILE: &str = "graph.db";

/// Longest text of a trace field: a trace is one event, not a log.
const MAX_FIELD_CHARS: usize = 400;

/// Longest text of a precedent's line in the prompt: three of them fit the section's
/// default budget whole.
const SHOWN_CHARS: usize = 160;

/// What would have been right, for an action a guard refused: the host's own actions
/// have a known right way; for the others, the guard's reason says it.
fn correct_instead(action: &str, target: Option<&str>, reason: &str) -> String {
    match (action, target) {
        ("complete", _) => {
            "change what the task asks, run the checks after the last change, and complete only when they pass".into()
        }
        ("set_field", Some(field)) if field.ends_with("tested") => {
            "run the tests after the last change; claim tested only when that run passes".into()
        }
        _ => format!("do what the guard requires first: {reason}"),
    }
}

/// `[learning]` in `agentforge.toml`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LearningConfig {
    /// Record traces, show precedents and learn patterns (default `true`).
    pub enabled: bool,
    /// Most precedents a prompt shows (default 3; 0 shows none, traces are still kept).
    pub precedents: usize,
    /// A pattern seen this many times becomes a proposed guard (default 3).
    pub propose_threshold: u32,
    /// ... when it was seen in at least this many tasks (default 1).
    pub min_tasks: u32,
    /// Approve proposed guards without a person (default `false`): nothing a run
    /// learned is enforced before a person, or this setting, approves it.
    pub auto_approve: bool,
    /// `[learning.embeddings]`: an embeddings endpoint for semantic precedents (none:
    /// full-text ranking only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<EmbeddingsConfig>,
}

impl Default for LearningConfig {
    fn default() -> Self {
        LearningConfig {
            enabled: true,
            precedents: 3,
            propose_threshold: 3,
            min_tasks: 1,
            auto_approve: false,
            embeddings: None,
        }
    }
}

/// What went wrong with the trace database.
#[derive(Debug, thiserror::Error)]
pub enum LearningError {
    /// The database refused an operation (its error names the file).
    #[error(transparent)]
    Graph(Box<GraphError>),
    /// Learning is off (`[learning] enabled = false`).
    #[error("learning is off ([learning] enabled = false in agentforge.toml)")]
    Disabled,
    /// The embeddings endpoint failed (its error names the URL).
    #[error(transparent)]
    Embeddings(Box<EmbeddingsError>),
}

/// What a backfill embedded ([`Learning::backfill`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillReport {
    /// The embedding model.
    pub model: String,
    /// The vectors' dimension.
    pub dimensions: usize,
    /// Traces embedded now.
    pub embedded: u64,
    /// Traces with a vector of this model and dimension, after the backfill.
    pub total: u64,
}

/// The trace database of a workspace, opened on first use.
pub struct Learning {
    path: PathBuf,
    project: String,
    config: LearningConfig,
    graph: Mutex<Option<Graph>>,
    /// The last precedents shown and what they were asked for: a step whose question is
    /// the same, with no trace written since, reuses them (no query per step).
    shown: Mutex<Option<(String, Vec<ShownPrecedent>)>>,
    /// Traces this process wrote (part of the cache key).
    written: std::sync::atomic::AtomicU64,
    /// `written` when patterns were last learned.
    learned_at: std::sync::atomic::AtomicU64,
    /// The database's failures are reported once per process, not per step.
    warned: std::sync::atomic::AtomicBool,
    /// `[learning.embeddings]`, when configured.
    embedder: Option<Embedder>,
}

impl Learning {
    /// The learning of the workspace at `root`.
    pub fn new(root: &Path, config: LearningConfig) -> Learning {
        let project = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workspace".to_string());
        let embedder = config
            .embeddings
            .clone()
            .filter(|_| config.enabled)
            .map(Embedder::new);
        Learning {
            path: root.join(".agentforge").join(GRAPH_FILE),
            project,
            embedder,
            config,
            graph: Mutex::new(None),
            shown: Mutex::new(None),
            written: Default::default(),
            learned_at: Default::default(),
            warned: Default::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LearningConfig {
        &self.config
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the database, opening it first if needed.
    pub fn with_graph<R>(
        &self,
        f: impl FnOnce(&mut Graph) -> Result<R, GraphError>,
    ) -> Result<R, LearningError> {
        if !self.config.enabled {
            return Err(LearningError::Disabled);
        }
        let wrap = |e| LearningError::Graph(Box::new(e));
        let mut guard = self.graph.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(Graph::open(&self.path).map_err(wrap)?);
        }
        f(guard.as_mut().expect("opened above")).map_err(wrap)
    }

    /// Reports a failure of the database once per process; the run goes on (the log
    /// line holds the traces).
    fn warn(&self, e: &LearningError) {
        if matches!(e, LearningError::Disabled) {
            return;
        }
        if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "warning: {e}; traces stay in the task logs and are copied by `agentforge learn`"
            );
        }
    }

    /// The traces of `record` (a step of `spec`) as the database keeps them.
    pub fn traces_of<S>(&self, spec: &TaskSpec, record: &ActionRecord<S>) -> Vec<Trace> {
        record
            .traces
            .iter()
            .enumerate()
            .map(|(i, event)| Trace {
                key: trace_key(&spec.id, record.step, i),
                project: self.project.clone(),
                timestamp: record.timestamp.clone(),
                context: TraceContext {
                    task_id: spec.id.clone(),
                    task_type: spec.task_type.clone(),
                    phase: record.phase.clone(),
                    role: spec.role.clone(),
                    step: record.step,
                },
                event: event.clone(),
            })
            .collect()
    }

    /// Copies the traces of a step whose log line is written. Returns how many were new.
    pub fn record_step<S>(&self, spec: &TaskSpec, record: &ActionRecord<S>) -> usize {
        if record.traces.is_empty() || !self.config.enabled {
            return 0;
        }
        let traces = self.traces_of(spec, record);
        match self.with_graph(|g| g.record(&traces)) {
            Ok(n) => {
                self.written
                    .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                if n > 0 {
                    let keys: Vec<String> = traces.into_iter().map(|t| t.key).collect();
                    self.embed_recorded(&keys);
                }
                n
            }
            Err(e) => {
                self.warn(&e);
                0
            }
        }
    }

    /// Embeds the traces of `keys` just recorded (best effort: a failure is warned
    /// about once, the traces stay without a vector until `agentforge learn`).
    fn embed_recorded(&self, keys: &[String]) {
        let Some(embedder) = self.embedder.as_ref().filter(|e| !e.is_down()) else {
            return;
        };
        let todo = match self.with_graph(|g| g.to_embed_by_keys(keys)) {
            Ok(todo) => todo,
            Err(e) => return self.warn(&e),
        };
        for chunk in todo.chunks(embedder.config().batch) {
            let texts = chunk.iter().map(|t| t.text.clone()).collect();
            let Some(vectors) = embedder.embed_for_run(texts, warn_embeddings) else {
                return;
            };
            let pairs: Vec<(i64, Vec<f32>)> = chunk.iter().map(|t| t.id).zip(vectors).collect();
            let model = &embedder.config().model;
            if let Err(e) = self.with_graph(|g| g.store_vectors(model, &pairs)) {
                return self.warn(&e);
            }
        }
    }

    /// Embeds, in batches of `[learning.embeddings] batch`, every trace without a vector
    /// of the configured model and dimension (all of them after a model change); `None`
    /// without `[learning.embeddings]`. The dimension is the configured one, else the
    /// model's, learnt from one short request first.
    pub fn backfill(&self) -> Result<Option<BackfillReport>, LearningError> {
        let Some(embedder) = &self.embedder else {
            return Ok(None);
        };
        let config = embedder.config();
        let failed = |e| LearningError::Embeddings(Box::new(e));
        let dims = match config.dimensions {
            Some(d) => d,
            None => embedder
                .embed(vec!["dimension probe".to_string()])
                .map_err(failed)?
                .first()
                .map_or(0, Vec::len),
        };
        let mut after = 0;
        let mut embedded = 0;
        loop {
            let batch =
                self.with_graph(|g| g.unembedded(&config.model, dims, after, config.batch))?;
            let Some(last) = batch.last() else { break };
            after = last.id;
            let texts = batch.iter().map(|t| t.text.clone()).collect();
            let vectors = embedder.embed(texts).map_err(failed)?;
            let pairs: Vec<(i64, Vec<f32>)> = batch.iter().map(|t| t.id).zip(vectors).collect();
            embedded += self.with_graph(|g| g.store_vectors(&config.model, &pairs))? as u64;
        }
        let total = self.with_graph(|g| g.vector_count(&config.model, dims))?;
        Ok(Some(BackfillReport {
            model: config.model.clone(),
            dimensions: dims,
            embedded,
            total,
        }))
    }

    /// Copies the traces of the last recorded step of a task being resumed: a kill
    /// between its log line and the copy leaves them only in the line.
    pub fn sync_last<S>(&self, spec: &TaskSpec, last: Option<&ActionRecord<S>>) -> usize {
        last.map_or(0, |r| self.record_step(spec, r))
    }

    /// Copies the traces of every step of a task's log (what a failed copy left out).
    pub fn sync_log(
        &self,
        spec: &TaskSpec,
        records: &[ActionRecord],
    ) -> Result<usize, LearningError> {
        let traces: Vec<Trace> = records
            .iter()
            .flat_map(|r| self.traces_of(spec, r))
            .collect();
        if traces.is_empty() {
            return Ok(0);
        }
        let n = self.with_graph(|g| g.record(&traces))?;
        self.written
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }

    /// The precedents to show before the next step of `spec` in `state`, most relevant
    /// first (none when learning is off, the database is empty or cannot be read).
    pub fn precedents(&self, spec: &TaskSpec, state: &TaskState) -> Vec<ShownPrecedent> {
        if !self.config.enabled || self.config.precedents == 0 {
            return Vec::new();
        }
        // No database yet: nothing was ever traced here, and opening one would create it.
        if !self.path.exists() && self.written.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let mut text = spec.goal.clone();
        if let Some(sub) = state.focus.current_subtask() {
            text.push(' ');
            text.push_str(&sub.description);
        }
        let mut targets = spec.named_paths();
        for f in state.files_modified.iter().rev().take(5) {
            if !targets.contains(f) {
                targets.push(f.clone());
            }
        }
        let query = PrecedentQuery {
            task_id: spec.id.clone(),
            task_type: spec.task_type.clone(),
            phase: state.phase.clone(),
            role: spec.role.clone(),
            targets,
            text,
            limit: self.config.precedents,
        };
        let key = format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}",
            self.written.load(std::sync::atomic::Ordering::Relaxed),
            query.phase,
            query.text,
            query.targets.join("\u{1e}")
        );
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, v)) = shown.as_ref() {
            if *k == key {
                return v.clone();
            }
        }
        // The question's vector (cached per text); none when the endpoint failed once.
        let vector = self.embedder.as_ref().and_then(|e| {
            e.question_vector(&query.embedding_text(), warn_embeddings)
                .map(|vector| QueryVector {
                    model: e.config().model.clone(),
                    vector,
                })
        });
        let found = match self.with_graph(|g| g.precedents_with(&query, vector.as_ref())) {
            Ok(found) => found,
            Err(e) => {
                self.warn(&e);
                return Vec::new();
            }
        };
        // A lesson a person confirmed (its pattern has an approved rule) comes first.
        let mut found = found;
        found.sort_by_key(|p| p.rule.is_none());
        let view: Vec<ShownPrecedent> = found.iter().map(show).collect();
        *shown = Some((key, view.clone()));
        view
    }

    /// Groups the traces into patterns and proposes rules; with `auto_approve`, approves
    /// what it proposed (recorded as approved by `config`).
    pub fn learn(&self) -> Result<LearnReport, LearningError> {
        let settings = LearnSettings {
            propose_threshold: self.config.propose_threshold,
            min_tasks: self.config.min_tasks,
        };
        let now = now();
        let report = self.with_graph(|g| g.learn(&settings, &now))?;
        if self.config.auto_approve {
            for rule in &report.proposed {
                self.with_graph(|g| {
                    g.approve_rule(rule.id, "config: [learning] auto_approve", &now)
                })?;
            }
        }
        Ok(report)
    }

    /// [`Learning::learn`] at a task's end, when this process recorded traces since the
    /// last time; says what was proposed (and approved, with `auto_approve`). A failure
    /// is reported, not raised: the task's outcome stands.
    pub fn learn_after_task(&self, verbose: bool) {
        let written = self.written.load(std::sync::atomic::Ordering::Relaxed);
        if written
            == self
                .learned_at
                .swap(written, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        match self.learn() {
            Ok(report) => {
                for rule in &report.proposed {
                    let approved = if self.config.auto_approve {
                        "approved by [learning] auto_approve"
                    } else {
                        "approve with `agentforge guards approve`"
                    };
                    eprintln!(
                        "learned: guard #{} proposed for `{}` ({}); {approved}",
                        rule.id, rule.rule.action, rule.rule.pattern
                    );
                }
                if verbose {
                    eprintln!(
                        "learned: {} traces in {} patterns ({} new)",
                        report.traces, report.patterns, report.new_patterns
                    );
                }
            }
            Err(e) => self.warn(&e),
        }
    }

    /// The approved rules as the `guard-learned-rules` plugin reads them (none when there
    /// is no database yet).
    pub fn approved_rules_json(&self) -> Result<Vec<serde_json::Value>, LearningError> {
        if !self.config.enabled || !self.path.exists() {
            return Ok(Vec::new());
        }
        let rules = self.with_graph(|g| g.approved_rules())?;
        Ok(rules
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect())
    }
}

/// The one warning of a run whose embeddings endpoint failed (the error names the URL,
/// never the key).
fn warn_embeddings(e: &EmbeddingsError) {
    eprintln!(
        "warning: {e}; precedents use full-text ranking only for the rest of this run \
         (no further embeddings calls), and traces recorded meanwhile are embedded by \
         `agentforge learn`"
    );
}

/// Now, as traces and decisions record time.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// How a precedent is shown.
fn show(p: &agentforge_graph::Precedent) -> ShownPrecedent {
    let t = &p.trace;
    let e = &t.event;
    let day = t.timestamp.get(..10).unwrap_or(&t.timestamp);
    let mut seen = if p.pattern_count > 1 {
        format!("{} times, last {day}", p.pattern_count)
    } else {
        format!("once, {day}")
    };
    if p.same_task {
        seen.push_str(" (this task)");
    }
    ShownPrecedent {
        seen,
        happened: cut(
            &format!("{} ({}: {})", e.what_happened, e.enforcer, e.why),
            SHOWN_CHARS,
        )
        .into_owned(),
        correct: cut(&e.what_was_correct, SHOWN_CHARS).into_owned(),
        rule: p.rule.as_ref().map(|r| {
            let on = r
                .target_glob
                .as_deref()
                .map(|g| format!(" on `{g}`"))
                .unwrap_or_default();
            let effect = serde_json::to_value(r.effect)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!(
                "learned rule #{} ({effect}) applies to `{}`{on}",
                r.id, r.action
            )
        }),
    }
}

fn bounded(text: &str) -> String {
    cut(text, MAX_FIELD_CHARS).into_owned()
}

/// The trace of a guard's ruling on `action` (`target`): a denial (of `complete`: a
/// refused `complete`) or a warning; none for allow.
pub fn guard_event(ruling: &Ruling, action: &str, target: Option<&str>) -> Option<TraceEvent> {
    let enforcer = ruling.by.join(", ");
    let on = target.map(|t| format!(" on `{t}`")).unwrap_or_default();
    let (source, reason, what_happened) = match &ruling.decision {
        GuardDecision::Allow => return None,
        GuardDecision::Deny(reason) => {
            let source = if action == "complete" {
                TraceSource::RefusedComplete
            } else {
                TraceSource::GuardDenial
            };
            (source, reason, format!("tried `{action}`{on}; refused"))
        }
        GuardDecision::Warn(reason) => (
            TraceSource::GuardWarning,
            reason,
            format!("ran `{action}`{on} despite a warning"),
        ),
    };
    Some(TraceEvent {
        kind: source.kind(),
        source,
        enforcer,
        action: action.to_string(),
        target: target.map(bounded),
        what_happened: bounded(&what_happened),
        what_was_correct: bounded(&correct_instead(action, target, reason)),
        why: bounded(reason),
    })
}

/// The trace of a change the host undid because it broke `checks` that passed before.
pub fn revert_event(
    action: &str,
    target: Option<&str>,
    checks: &[String],
    summary: &str,
) -> TraceEvent {
    let on = target.map(|t| format!(" of `{t}`")).unwrap_or_default();
    let checks = if checks.is_empty() {
        "a passing check".to_string()
    } else {
        checks.join(", ")
    };
    TraceEvent {
        kind: TraceKind::Correction,
        source: TraceSource::AutoRevert,
        enforcer: "auto-revert".into(),
        action: action.to_string(),
        target: target.map(bounded),
        what_happened: bounded(&format!("the change{on} broke {checks}; it was undone")),
        what_was_correct: bounded(&format!(
            "change it so that {checks} keep passing: read the failing assertion first, then run the checks after the edit"
        )),
        why: bounded(summary),
    }
}

/// The trace of a loop the detector reported at this step.
pub fn loop_event(action: &str, target: Option<&str>, warning: &LoopWarning) -> TraceEvent {
    let correct = if warning.suggestions.is_empty() {
        "change the approach instead of repeating the action".to_string()
    } else {
        warning.suggestions.join("; ")
    };
    TraceEvent {
        kind: TraceKind::Correction,
        source: TraceSource::LoopDetection,
        enforcer: "loop-detector".into(),
        action: action.to_string(),
        target: target.map(bounded),
        what_happened: bounded(&format!(
            "repeated `{action}` without progress ({})",
            warning.loop_type
        )),
        what_was_correct: bounded(&correct),
        why: bounded(&warning.description),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_of_complete_is_a_refused_complete_and_names_its_guard() {
        let ruling = Ruling {
            decision: GuardDecision::Deny("no file changed since the task began".into()),
            by: vec!["guard-verify-implementation".into()],
        };
        let e = guard_event(&ruling, "complete", None).unwrap();
        assert_eq!(e.source, TraceSource::RefusedComplete);
        assert_eq!(e.kind, TraceKind::Violation);
        assert_eq!(e.enforcer, "guard-verify-implementation");
        assert!(e.why.contains("no file changed"));
        let other = guard_event(&ruling, "set_field", Some("subtask.tested")).unwrap();
        assert_eq!(other.source, TraceSource::GuardDenial);
        assert_eq!(other.target.as_deref(), Some("subtask.tested"));
        let allow = Ruling {
            decision: GuardDecision::Allow,
            by: vec![],
        };
        assert!(guard_event(&allow, "complete", None).is_none());
    }

    #[test]
    fn trace_fields_are_bounded() {
        let ruling = Ruling {
            decision: GuardDecision::Warn("x".repeat(5_000)),
            by: vec!["g".into()],
        };
        let e = guard_event(&ruling, "edit_file", Some(&"p/".repeat(1_000))).unwrap();
        assert!(e.why.chars().count() <= MAX_FIELD_CHARS + 1);
        assert!(e.target.unwrap().chars().count() <= MAX_FIELD_CHARS + 1);
    }
}
