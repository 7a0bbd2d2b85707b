//! Precedents: the past traces most relevant to the step about to run.
//!
//! Candidates come from the full-text index (FTS5, bm25 with per-column weights, the best
//! [`FTS_CANDIDATES`] only, so common words cannot make a query slow) and from the latest
//! traces of the same task and of the same task type and phase (index look-ups). They are
//! re-ranked here: the text score normalised to 0..1 plus boosts for the same task, task
//! type, phase, role, an exact target and recency. One trace per pattern is kept, the most
//! relevant.

use std::collections::{HashMap, HashSet};

use agentforge_core::trace::Trace;
use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::rules::{approved_by_pattern, LearnedRule};
use crate::traces::{trace_from_row, TRACE_COLUMNS, TRACE_COLUMN_COUNT};
use crate::{Graph, GraphError};

/// How many full-text matches are re-ranked at most (the best by bm25).
pub const FTS_CANDIDATES: usize = 200;
/// How many of the latest traces of the same task, and of the same task type and phase,
/// join the candidates.
pub const RECENT_CANDIDATES: usize = 50;
/// How many distinct words of the query are searched for at most.
pub const MAX_QUERY_WORDS: usize = 32;

/// bm25's weights per column: what_happened, what_was_correct, why, action, target,
/// enforcer.
const BM25_WEIGHTS: &str = "1.0, 1.0, 0.75, 2.0, 3.0, 1.0";

/// Added to the text score (0..1) for each match.
const BOOST_SAME_TASK: f64 = 0.5;
const BOOST_TASK_TYPE: f64 = 0.5;
const BOOST_PHASE: f64 = 0.25;
const BOOST_ROLE: f64 = 0.25;
const BOOST_TARGET: f64 = 1.0;
/// The recency boost at age 0; it halves every [`RECENCY_HALF_LIFE_DAYS`] before the
/// newest candidate.
const BOOST_RECENCY: f64 = 0.3;
const RECENCY_HALF_LIFE_DAYS: f64 = 14.0;

/// Words too common to search for.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "do", "does", "for", "from", "has", "have", "how", "if", "in",
    "into", "is", "it", "its", "let", "make", "may", "must", "of", "on", "one", "or", "our",
    "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "to", "up", "use", "was", "we", "were", "what", "when",
    "where", "which", "while", "will", "with", "would", "you", "your",
];

/// What a step is about, to find its precedents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecedentQuery {
    /// The task's id.
    pub task_id: String,
    /// Its task type.
    pub task_type: String,
    /// The step's phase.
    pub phase: String,
    /// The task's role in a value loop, if any.
    pub role: Option<String>,
    /// The paths (or checks) the step is about.
    pub targets: Vec<String>,
    /// The goal and the current subtask (any text: it is never parsed as a query).
    pub text: String,
    /// At most this many precedents.
    pub limit: usize,
}

/// A past trace relevant to a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Precedent {
    /// The trace (the most relevant of its pattern).
    pub trace: Trace,
    /// Its relevance (higher is more relevant; text 0..1 plus the boosts).
    pub score: f64,
    /// Whether it was recorded by the same task.
    pub same_task: bool,
    /// How many traces its pattern has.
    pub pattern_count: u64,
    /// An approved rule learned from its pattern.
    pub rule: Option<LearnedRule>,
}

/// A trace being ranked.
struct Candidate {
    trace: Trace,
    pattern_key: String,
    time_ms: i64,
    /// bm25 (negative; lower is better), when the full-text index found it.
    bm25: Option<f64>,
}

impl Graph {
    /// The traces most relevant to the step `q` describes, most relevant first, at most
    /// `q.limit`, one per pattern (approvals are never precedents).
    pub fn precedents(&self, q: &PrecedentQuery) -> Result<Vec<Precedent>, GraphError> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        let any: bool =
            self.conn
                .query_row("SELECT EXISTS (SELECT 1 FROM pattern_counts)", [], |r| {
                    r.get(0)
                })?;
        if !any {
            return Ok(Vec::new());
        }
        let mut candidates: HashMap<i64, Candidate> = HashMap::new();
        let columns = TRACE_COLUMNS
            .split(", ")
            .map(|c| format!("t.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let n = TRACE_COLUMN_COUNT;
        let mut add = |row: &rusqlite::Row<'_>, bm25: Option<f64>| -> rusqlite::Result<()> {
            let id: i64 = row.get(n)?;
            if let Some(c) = candidates.get_mut(&id) {
                c.bm25 = c.bm25.or(bm25);
                return Ok(());
            }
            candidates.insert(
                id,
                Candidate {
                    trace: trace_from_row(row, 0)?,
                    pattern_key: row.get(n + 1)?,
                    time_ms: row.get(n + 2)?,
                    bm25,
                },
            );
            Ok(())
        };
        if let Some(expr) = match_expression(q) {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {columns}, t.id, t.pattern_key, t.time_ms, f.score FROM ( \
                 SELECT rowid AS id, bm25(traces_fts, {BM25_WEIGHTS}) AS score FROM traces_fts \
                 WHERE traces_fts MATCH ?1 ORDER BY score LIMIT {FTS_CANDIDATES}) AS f \
                 JOIN traces AS t ON t.id = f.id"
            ))?;
            let mut rows = stmt.query(params![expr])?;
            while let Some(row) = rows.next()? {
                add(row, Some(row.get(n + 3)?))?;
            }
        }
        if !q.task_id.is_empty() {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {columns}, t.id, t.pattern_key, t.time_ms FROM traces AS t \
                 WHERE t.task_id = ?1 AND t.pattern_key IS NOT NULL \
                 ORDER BY t.time_ms DESC, t.id DESC LIMIT {RECENT_CANDIDATES}"
            ))?;
            let mut rows = stmt.query(params![q.task_id])?;
            while let Some(row) = rows.next()? {
                add(row, None)?;
            }
        }
        if !q.task_type.is_empty() {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {columns}, t.id, t.pattern_key, t.time_ms FROM traces AS t \
                 WHERE t.task_type = ?1 AND t.phase = ?2 AND t.pattern_key IS NOT NULL \
                 ORDER BY t.time_ms DESC, t.id DESC LIMIT {RECENT_CANDIDATES}"
            ))?;
            let mut rows = stmt.query(params![q.task_type, q.phase])?;
            while let Some(row) = rows.next()? {
                add(row, None)?;
            }
        }
        if candidates.is_empty() {
            return Ok(Vec::new());
        }

        // Re-rank; keep the best of each pattern.
        let best_bm25 = candidates
            .values()
            .filter_map(|c| c.bm25)
            .fold(0.0_f64, f64::min);
        let newest = candidates.values().map(|c| c.time_ms).max().unwrap_or(0);
        let mut best: HashMap<String, (f64, i64, Candidate)> = HashMap::new();
        for (id, c) in candidates {
            let score = score(q, &c, best_bm25, newest);
            match best.get(&c.pattern_key) {
                Some((s, i, kept)) if (*s, kept.time_ms, *i) >= (score, c.time_ms, id) => {}
                _ => {
                    best.insert(c.pattern_key.clone(), (score, id, c));
                }
            }
        }
        let mut ranked: Vec<(f64, i64, Candidate)> = best.into_values().collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.2.time_ms.cmp(&a.2.time_ms))
                .then(b.1.cmp(&a.1))
        });
        ranked.truncate(q.limit);

        let rules = approved_by_pattern(&self.conn)?;
        let mut count = self
            .conn
            .prepare_cached("SELECT count FROM pattern_counts WHERE key = ?1")?;
        let mut out = Vec::with_capacity(ranked.len());
        for (score, _, c) in ranked {
            let pattern_count: i64 = count.query_row(params![c.pattern_key], |r| r.get(0))?;
            out.push(Precedent {
                same_task: c.trace.context.task_id == q.task_id,
                score,
                pattern_count: pattern_count.max(0) as u64,
                rule: rules.get(&c.pattern_key).cloned(),
                trace: c.trace,
            });
        }
        Ok(out)
    }
}

/// A candidate's relevance: the text score (bm25 relative to the best candidate's, 0..1)
/// plus the boosts.
fn score(q: &PrecedentQuery, c: &Candidate, best_bm25: f64, newest_ms: i64) -> f64 {
    let ctx = &c.trace.context;
    let mut s = match c.bm25 {
        Some(b) if best_bm25 < 0.0 => (b / best_bm25).clamp(0.0, 1.0),
        _ => 0.0,
    };
    if !q.task_id.is_empty() && ctx.task_id == q.task_id {
        s += BOOST_SAME_TASK;
    }
    if ctx.task_type == q.task_type {
        s += BOOST_TASK_TYPE;
    }
    if ctx.phase == q.phase {
        s += BOOST_PHASE;
    }
    if q.role.is_some() && ctx.role == q.role {
        s += BOOST_ROLE;
    }
    if let Some(target) = &c.trace.event.target {
        if q.targets.iter().any(|t| t == target) {
            s += BOOST_TARGET;
        }
    }
    if c.time_ms > 0 {
        let age_days = (newest_ms - c.time_ms).max(0) as f64 / 86_400_000.0;
        s += BOOST_RECENCY * 0.5_f64.powf(age_days / RECENCY_HALF_LIFE_DAYS);
    }
    s
}

/// The FTS5 query for `q`: each target as a quoted phrase, then the distinct words of the
/// text, the task type and the phase (stop words and one-letter words left out), each
/// quoted, joined by OR. Quoting makes any text a literal: FTS5's syntax (`"`, `*`,
/// `NEAR(`, `-`, `:`, `AND`...) in it is never interpreted. `None` when nothing is left.
pub(crate) fn match_expression(q: &PrecedentQuery) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for target in &q.targets {
        let target = target.replace('\0', " ");
        let target = target.trim();
        if target.chars().any(char::is_alphanumeric) && seen.insert(target.to_string()) {
            terms.push(format!("\"{}\"", target.replace('"', "\"\"")));
        }
    }
    let texts = [q.text.as_str(), q.task_type.as_str(), q.phase.as_str()];
    let mut words = 0;
    for word in texts
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()))
    {
        if words == MAX_QUERY_WORDS {
            break;
        }
        let word = word.to_lowercase();
        if word.chars().count() < 2 || STOP_WORDS.binary_search(&word.as_str()).is_ok() {
            continue;
        }
        if seen.insert(word.clone()) {
            terms.push(format!("\"{word}\""));
            words += 1;
        }
    }
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_the_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_term_is_quoted() {
        let q = PrecedentQuery {
            targets: vec!["src/a \"b\".rs".into(), "***".into()],
            text: "Fix NEAR(the \"parser\") -x: y* in src".into(),
            task_type: "code".into(),
            phase: "implement".into(),
            ..PrecedentQuery::default()
        };
        assert_eq!(
            match_expression(&q).unwrap(),
            "\"src/a \"\"b\"\".rs\" OR \"fix\" OR \"near\" OR \"parser\" OR \"src\" OR \
             \"code\" OR \"implement\""
        );
        assert_eq!(match_expression(&PrecedentQuery::default()), None);
    }
}
