//! Precedents: the past traces most relevant to the step about to run.
//!
//! Candidates come from
//!
//! - the full-text index (FTS5, bm25 with per-column weights, the best
//!   [`FTS_CANDIDATES`]), searched for the query's distinctive words only: each word's
//!   document count is probed first, capped at [`COMMON_WORD_DOCS`] (cheap: the probe stops
//!   there), and the rarest words are kept while their documents add up to at most
//!   [`FTS_MATCH_BUDGET`]. bm25 reads every matching row (its IDF counts them all), so a
//!   word found in half the traces would cost tens of milliseconds at 100,000 traces and
//!   add nothing to the ranking. A [`Graph`] remembers the common words it met (traces are
//!   never deleted, so they stay common) and does not probe them again;
//! - index look-ups: the latest traces on the same targets, of the same task, and of the
//!   same task type and phase.
//!
//! With a query vector ([`Graph::precedents_with`], when an embeddings endpoint is
//! configured) the candidates also include one representative per pattern (its latest
//! trace with a vector of the query's model and dimension, found among its
//! [`REPRESENTATIVE_WALK`] latest traces), so a trace sharing no word with the query can
//! still be found; each candidate's stored vector is then compared with the query's
//! (cosine). The query stays bounded: at most a few hundred vectors are read (the
//! candidates), never the whole table.
//!
//! They are re-ranked here: the text score normalised to 0..1 plus boosts for the same
//! task, task type, phase, role, an exact target and recency. With a query vector the text
//! score is a convex combination of the lexical score and the semantic one
//! ([`SEMANTIC_WEIGHT`]): the lexical score is bm25 relative to the best candidate's (as
//! without vectors), the semantic one the cosine min-max normalised over the candidates
//! that have a vector (0 without one). A convex combination of normalised scores rather
//! than reciprocal-rank fusion: it keeps the 0..1 scale the boosts were tuned against and
//! how much better a match is, not only its rank. Without a query vector the score is the
//! lexical one exactly (the ranking is today's). One trace per pattern is kept, the most
//! relevant, and only those are read whole.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use agentforge_core::trace::Trace;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::rules::{approved_by_pattern, LearnedRule};
use crate::traces::{trace_from_row, TRACE_COLUMNS};
use crate::vectors::{dot_blob, normalised, QueryVector};
use crate::{Graph, GraphError};

/// How many full-text matches are re-ranked at most (the best by bm25).
pub const FTS_CANDIDATES: usize = 200;
/// How many of the latest traces of the same task, and of the same task type and phase,
/// join the candidates.
pub const RECENT_CANDIDATES: usize = 50;
/// How many of the latest traces on each target (exactly) join the candidates.
pub const TARGET_CANDIDATES: usize = 20;
/// How many targets of a query are looked up at most.
pub const MAX_TARGETS: usize = 8;
/// How many distinct words of the query are considered at most.
pub const MAX_QUERY_WORDS: usize = 24;
/// A word found in this many traces or more is too common to search for.
pub const COMMON_WORD_DOCS: usize = 1_000;
/// The words searched for match at most this many traces together (the rarest first).
pub const FTS_MATCH_BUDGET: usize = 2_500;
/// How many common words a [`Graph`] remembers (it forgets them all when full).
pub const MAX_COMMON_WORDS: usize = 4_096;

/// How many patterns (the most frequent first) get a representative in a semantic
/// search.
pub const MAX_REPRESENTED_PATTERNS: usize = 500;
/// How many of a pattern's latest traces are looked at for one with a vector (a pattern
/// whose latest traces are not embedded yet has no representative until a backfill).
pub const REPRESENTATIVE_WALK: usize = 16;
/// The semantic score's share of the text score when a query vector is given (the
/// lexical score has the rest).
pub const SEMANTIC_WEIGHT: f64 = 0.5;

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

/// Words too common in any text to search for (sorted).
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

/// A trace being ranked: what the score needs, not the whole trace.
struct Candidate {
    id: i64,
    pattern_key: String,
    time_ms: i64,
    task_id: String,
    task_type: String,
    phase: String,
    role: Option<String>,
    target: Option<String>,
    /// bm25 (negative; lower is better), when the full-text index found it.
    bm25: Option<f64>,
    /// The cosine of its vector with the query's, when both exist.
    cosine: Option<f64>,
}

/// The columns a [`Candidate`] is read from (the traces table aliased `t`).
const CANDIDATE_COLUMNS: &str =
    "t.id, t.pattern_key, t.time_ms, t.task_id, t.task_type, t.phase, t.role, t.target";

impl Graph {
    /// The traces most relevant to the step `q` describes, most relevant first, at most
    /// `q.limit`, one per pattern (approvals are never precedents): full-text ranking
    /// only ([`Graph::precedents_with`] without a vector).
    pub fn precedents(&self, q: &PrecedentQuery) -> Result<Vec<Precedent>, GraphError> {
        self.precedents_with(q, None)
    }

    /// [`Graph::precedents`], and with `vector` (the query text's embedding) the traces
    /// with a stored vector of the same model and dimension are also ranked by their
    /// cosine with it, and each pattern's representative joins the candidates (see the
    /// module's documentation).
    pub fn precedents_with(
        &self,
        q: &PrecedentQuery,
        vector: Option<&QueryVector>,
    ) -> Result<Vec<Precedent>, GraphError> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        let any: bool = self
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM pattern_counts)")?
            .query_row([], |r| r.get(0))?;
        if !any {
            return Ok(Vec::new());
        }
        let query_vector = vector
            .filter(|v| !v.vector.is_empty())
            .map(|v| (v.model.as_str(), normalised(&v.vector)));
        let mut candidates =
            self.candidates(q, query_vector.as_ref().map(|(m, v)| (*m, v.len())))?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        if let Some((model, v)) = &query_vector {
            let mut read = self.conn.prepare_cached(
                "SELECT vector FROM trace_vectors WHERE trace_id = ?1 AND model = ?2 AND dims = ?3",
            )?;
            for c in candidates.values_mut() {
                let blob: Option<Vec<u8>> = read
                    .query_row(params![c.id, model, v.len() as i64], |r| r.get(0))
                    .optional()?;
                c.cosine = blob.and_then(|b| dot_blob(v, &b)).map(f64::from);
            }
        }

        // Re-rank; keep the best of each pattern.
        let best_bm25 = candidates
            .values()
            .filter_map(|c| c.bm25)
            .fold(0.0_f64, f64::min);
        let cosines = candidates.values().filter_map(|c| c.cosine);
        let (low, high) = cosines.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(x), h.max(x))
        });
        let newest = candidates.values().map(|c| c.time_ms).max().unwrap_or(0);
        let mut best: HashMap<&str, (f64, &Candidate)> = HashMap::new();
        for c in candidates.values() {
            let lexical = lexical(c, best_bm25);
            let text = if query_vector.is_some() {
                (1.0 - SEMANTIC_WEIGHT) * lexical + SEMANTIC_WEIGHT * semantic(c, low, high)
            } else {
                lexical
            };
            let s = score(q, c, text, newest);
            match best.get(c.pattern_key.as_str()) {
                Some((kept_score, kept))
                    if (*kept_score, kept.time_ms, kept.id) >= (s, c.time_ms, c.id) => {}
                _ => {
                    best.insert(&c.pattern_key, (s, c));
                }
            }
        }
        let mut ranked: Vec<(f64, &Candidate)> = best.into_values().collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(b.1.time_ms.cmp(&a.1.time_ms))
                .then(b.1.id.cmp(&a.1.id))
        });
        ranked.truncate(q.limit);

        let rules = approved_by_pattern(&self.conn)?;
        let mut count = self
            .conn
            .prepare_cached("SELECT count FROM pattern_counts WHERE key = ?1")?;
        let mut whole = self
            .conn
            .prepare_cached(&format!("SELECT {TRACE_COLUMNS} FROM traces WHERE id = ?1"))?;
        let mut out = Vec::with_capacity(ranked.len());
        for (score, c) in ranked {
            let pattern_count: i64 = count.query_row(params![c.pattern_key], |r| r.get(0))?;
            out.push(Precedent {
                trace: whole.query_row(params![c.id], |r| trace_from_row(r, 0))?,
                score,
                same_task: c.task_id == q.task_id,
                pattern_count: pattern_count.max(0) as u64,
                rule: rules.get(&c.pattern_key).cloned(),
            });
        }
        Ok(out)
    }

    /// The candidates by id: full-text matches (with their bm25), the index look-ups and,
    /// with an embedding `space` (model, dimension), each pattern's representative.
    fn candidates(
        &self,
        q: &PrecedentQuery,
        space: Option<(&str, usize)>,
    ) -> Result<HashMap<i64, Candidate>, GraphError> {
        let mut candidates: HashMap<i64, Candidate> = HashMap::new();
        let mut add = |row: &rusqlite::Row<'_>, bm25: Option<f64>| -> rusqlite::Result<()> {
            let id: i64 = row.get(0)?;
            if let Some(c) = candidates.get_mut(&id) {
                c.bm25 = c.bm25.or(bm25);
                return Ok(());
            }
            candidates.insert(
                id,
                Candidate {
                    id,
                    pattern_key: row.get(1)?,
                    time_ms: row.get(2)?,
                    task_id: row.get(3)?,
                    task_type: row.get(4)?,
                    phase: row.get(5)?,
                    role: row.get(6)?,
                    target: row.get(7)?,
                    bm25,
                    cosine: None,
                },
            );
            Ok(())
        };

        let terms = searched_words(&self.conn, &self.common_words, &query_words(q))?;
        if let Some(expr) = match_expression(&terms) {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {CANDIDATE_COLUMNS}, f.score FROM ( \
                 SELECT rowid AS id, bm25(traces_fts, {BM25_WEIGHTS}) AS score FROM traces_fts \
                 WHERE traces_fts MATCH ?1 ORDER BY score LIMIT {FTS_CANDIDATES}) AS f \
                 JOIN traces AS t ON t.id = f.id"
            ))?;
            let mut rows = stmt.query(params![expr])?;
            while let Some(row) = rows.next()? {
                add(row, Some(row.get(8)?))?;
            }
        }
        // (filter, its arguments, how many)
        let mut lookups: Vec<(&str, Vec<&str>, usize)> = Vec::new();
        let mut seen = HashSet::new();
        for target in q.targets.iter().filter(|t| seen.insert(t.as_str())) {
            lookups.push(("t.target = ?1", vec![target], TARGET_CANDIDATES));
            if lookups.len() == MAX_TARGETS {
                break;
            }
        }
        if !q.task_id.is_empty() {
            lookups.push(("t.task_id = ?1", vec![&q.task_id], RECENT_CANDIDATES));
        }
        if !q.task_type.is_empty() {
            lookups.push((
                "t.task_type = ?1 AND t.phase = ?2",
                vec![&q.task_type, &q.phase],
                RECENT_CANDIDATES,
            ));
        }
        for (filter, args, limit) in lookups {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {CANDIDATE_COLUMNS} FROM traces AS t \
                 WHERE t.pattern_key IS NOT NULL AND {filter} \
                 ORDER BY t.time_ms DESC, t.id DESC LIMIT {limit}"
            ))?;
            let mut rows = stmt.query(params_from_iter(args))?;
            while let Some(row) = rows.next()? {
                add(row, None)?;
            }
        }
        if let Some((model, dims)) = space {
            // Each pattern's latest embedded trace: found however few words it shares.
            let mut patterns = self.conn.prepare_cached(&format!(
                "SELECT key FROM pattern_counts ORDER BY count DESC, key \
                 LIMIT {MAX_REPRESENTED_PATTERNS}"
            ))?;
            let keys = patterns
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT {CANDIDATE_COLUMNS} FROM ( \
                 SELECT id FROM traces WHERE pattern_key = ?1 \
                 ORDER BY time_ms DESC, id DESC LIMIT {REPRESENTATIVE_WALK}) AS r \
                 JOIN traces AS t ON t.id = r.id \
                 JOIN trace_vectors AS v ON v.trace_id = r.id AND v.model = ?2 AND v.dims = ?3 \
                 ORDER BY t.time_ms DESC, t.id DESC LIMIT 1"
            ))?;
            for key in keys {
                let mut rows = stmt.query(params![key, model, dims as i64])?;
                while let Some(row) = rows.next()? {
                    add(row, None)?;
                }
            }
        }
        Ok(candidates)
    }
}

/// The lexical score: bm25 relative to the best candidate's, 0..1 (0 when the full-text
/// index did not find it).
fn lexical(c: &Candidate, best_bm25: f64) -> f64 {
    match c.bm25 {
        Some(b) if best_bm25 < 0.0 => (b / best_bm25).clamp(0.0, 1.0),
        _ => 0.0,
    }
}

/// The semantic score: the cosine min-max normalised over the candidates' (`low` to
/// `high`), 0..1; 0 without a vector; 1 for a positive cosine when all are equal.
fn semantic(c: &Candidate, low: f64, high: f64) -> f64 {
    match c.cosine {
        Some(x) if high > low => ((x - low) / (high - low)).clamp(0.0, 1.0),
        Some(x) if x > 0.0 => 1.0,
        _ => 0.0,
    }
}

/// A candidate's relevance: the text score (0..1) plus the boosts.
fn score(q: &PrecedentQuery, c: &Candidate, text: f64, newest_ms: i64) -> f64 {
    let mut s = text;
    if !q.task_id.is_empty() && c.task_id == q.task_id {
        s += BOOST_SAME_TASK;
    }
    if c.task_type == q.task_type {
        s += BOOST_TASK_TYPE;
    }
    if c.phase == q.phase {
        s += BOOST_PHASE;
    }
    if q.role.is_some() && c.role == q.role {
        s += BOOST_ROLE;
    }
    if let Some(target) = &c.target {
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

/// The distinct words of the targets, the text, the task type and the phase, in that
/// order, lowercased: runs of letters and digits (so nothing of FTS5's syntax survives),
/// without stop words and one-letter words, at most [`MAX_QUERY_WORDS`].
pub(crate) fn query_words(q: &PrecedentQuery) -> Vec<String> {
    let texts = q.targets.iter().map(String::as_str).chain([
        q.text.as_str(),
        q.task_type.as_str(),
        q.phase.as_str(),
    ]);
    let mut seen = HashSet::new();
    texts
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()))
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && STOP_WORDS.binary_search(&w.as_str()).is_err())
        .filter(|w| seen.insert(w.clone()))
        .take(MAX_QUERY_WORDS)
        .collect()
}

/// The words worth searching for: each word's document count probed (up to
/// [`COMMON_WORD_DOCS`]), the common ones left out (and remembered in `common`, at most
/// [`MAX_COMMON_WORDS`] of them), the rarest kept while their counts add up to at most
/// [`FTS_MATCH_BUDGET`]. Words found nowhere are left out too.
fn searched_words(
    conn: &Connection,
    common: &RefCell<HashSet<String>>,
    words: &[String],
) -> Result<Vec<String>, GraphError> {
    let mut probe = conn.prepare_cached(&format!(
        "SELECT count(*) FROM (SELECT 1 FROM traces_fts WHERE traces_fts MATCH ?1 \
         LIMIT {COMMON_WORD_DOCS})"
    ))?;
    let mut common = common.borrow_mut();
    let mut counted = Vec::with_capacity(words.len());
    for w in words {
        if common.contains(w) {
            continue;
        }
        let docs: i64 = probe.query_row(params![quoted(w)], |r| r.get(0))?;
        let docs = docs.max(0) as usize;
        if docs >= COMMON_WORD_DOCS {
            if common.len() == MAX_COMMON_WORDS {
                common.clear();
            }
            common.insert(w.clone());
        } else if docs > 0 {
            counted.push((docs, w));
        }
    }
    counted.sort();
    let mut total = 0;
    Ok(counted
        .into_iter()
        .take_while(|(docs, _)| {
            total += docs;
            total <= FTS_MATCH_BUDGET
        })
        .map(|(_, w)| w.clone())
        .collect())
}

/// `word` as an FTS5 string: in double quotes, a double quote doubled. Whatever it holds
/// is then a literal, never FTS5 syntax.
fn quoted(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// The FTS5 query for `words`: each quoted, joined by OR; `None` for no words.
pub(crate) fn match_expression(words: &[String]) -> Option<String> {
    (!words.is_empty()).then(|| {
        words
            .iter()
            .map(|w| quoted(w))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(i: usize, text: &str) -> Trace {
        use agentforge_core::trace::{TraceContext, TraceEvent, TraceSource};
        Trace {
            key: format!("t#{i}#0"),
            project: "p".into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            context: TraceContext {
                task_id: "t".into(),
                task_type: "code".into(),
                phase: "implement".into(),
                role: None,
                step: i as u64,
            },
            event: TraceEvent {
                kind: TraceSource::GuardDenial.kind(),
                source: TraceSource::GuardDenial,
                enforcer: "guard".into(),
                action: "edit_file".into(),
                target: None,
                what_happened: text.into(),
                what_was_correct: String::new(),
                why: String::new(),
            },
        }
    }

    #[test]
    fn common_words_are_not_searched_and_the_rarest_come_first() {
        let mut g = Graph::open_in_memory().unwrap();
        let mut traces: Vec<Trace> = (0..COMMON_WORD_DOCS)
            .map(|i| trace(i, "everywhere"))
            .collect();
        let n = traces.len();
        traces.extend((0..3).map(|i| trace(n + i, "often")));
        traces.push(trace(n + 3, "rare"));
        g.record(&traces).unwrap();
        let words: Vec<String> = ["everywhere", "often", "nowhere", "rare"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            searched_words(&g.conn, &g.common_words, &words).unwrap(),
            ["rare", "often"]
        );
        // The common word is remembered, and stays left out.
        assert!(g.common_words.borrow().contains("everywhere"));
        assert_eq!(
            searched_words(&g.conn, &g.common_words, &words).unwrap(),
            ["rare", "often"]
        );
    }

    #[test]
    fn the_words_searched_stay_within_the_budget() {
        let mut g = Graph::open_in_memory().unwrap();
        // Three words in 900 traces each: two fit in the budget, the third does not.
        let traces: Vec<Trace> = (0..2_700)
            .map(|i| trace(i, ["alpha", "beta", "gamma"][i / 900]))
            .collect();
        g.record(&traces).unwrap();
        let words: Vec<String> = ["alpha", "beta", "gamma"].map(String::from).to_vec();
        assert_eq!(
            searched_words(&g.conn, &g.common_words, &words)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn stop_words_are_sorted_for_the_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn query_words_are_plain_and_the_expression_quotes_them() {
        let q = PrecedentQuery {
            targets: vec!["src/a \"b\".rs".into(), "***".into()],
            text: "Fix NEAR(the \"parser\") -x: y* in SRC".into(),
            task_type: "code".into(),
            phase: "implement".into(),
            ..PrecedentQuery::default()
        };
        let words = query_words(&q);
        assert_eq!(
            words,
            ["src", "rs", "fix", "near", "parser", "code", "implement"]
        );
        assert_eq!(match_expression(&words[..2]).unwrap(), "\"src\" OR \"rs\"");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
        assert_eq!(match_expression(&[]), None);
    }
}
