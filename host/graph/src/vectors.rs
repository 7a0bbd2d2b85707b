//! The traces' embedding vectors (schema version 2): what is embedded, storing vectors,
//! finding the traces still to embed, and reading a candidate's vector for the semantic
//! part of [`Graph::precedents_with`].
//!
//! A vector is stored with the model that made it and its dimension, normalised to
//! length 1 (so a cosine is a dot product), as f32 little-endian bytes. Only vectors of
//! the model and dimension asked for are ever read: after a model change the old ones are
//! ignored (never compared with the new model's) and replaced as the traces are embedded
//! again.

use agentforge_core::trace::Trace;
use rusqlite::{params, OptionalExtension};

use crate::precedents::PrecedentQuery;
use crate::{Graph, GraphError};

/// A trace waiting for its vector: its row id and the text to embed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToEmbed {
    /// The trace's row id (what [`Graph::store_vectors`] takes back).
    pub id: i64,
    /// The text to embed ([`trace_text`]).
    pub text: String,
}

/// A query's embedding: the model that made it and the vector (any length; normalised
/// here).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    /// The embedding model's name, as stored with the traces' vectors.
    pub model: String,
    /// The query text's embedding.
    pub vector: Vec<f32>,
}

/// The text a trace is embedded from: what happened, why, what was correct, and the
/// action, target and enforcer it concerned (the columns the full-text index has).
pub fn trace_text(trace: &Trace) -> String {
    let e = &trace.event;
    text_of(
        &e.action,
        e.target.as_deref(),
        &e.what_happened,
        &e.why,
        &e.what_was_correct,
        &e.enforcer,
    )
}

fn text_of(
    action: &str,
    target: Option<&str>,
    happened: &str,
    why: &str,
    correct: &str,
    enforcer: &str,
) -> String {
    let on = target.map(|t| format!(" on {t}")).unwrap_or_default();
    format!("{action}{on}: {happened}. Why: {why}. Correct: {correct}. ({enforcer})")
}

impl PrecedentQuery {
    /// The text a step's question is embedded from: the goal and subtask, then the
    /// targets.
    pub fn embedding_text(&self) -> String {
        let mut text = self.text.trim().to_string();
        for t in &self.targets {
            text.push(' ');
            text.push_str(t);
        }
        text
    }
}

/// `v` scaled to length 1 (a zero or non-finite vector as zeros: it matches nothing).
pub(crate) fn normalised(v: &[f32]) -> Vec<f32> {
    let norm = v
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return vec![0.0; v.len()];
    }
    v.iter().map(|x| (f64::from(*x) / norm) as f32).collect()
}

/// f32 little-endian bytes.
pub(crate) fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The dot product of `a` (a normalised query) with the f32 little-endian vector `blob`;
/// `None` when their lengths differ.
pub(crate) fn dot_blob(a: &[f32], blob: &[u8]) -> Option<f32> {
    if blob.len() != a.len() * 4 {
        return None;
    }
    Some(
        blob.as_chunks::<4>()
            .0
            .iter()
            .zip(a)
            .map(|(b, x)| f32::from_le_bytes(*b) * x)
            .sum(),
    )
}

impl Graph {
    /// At most `limit` traces without a vector of `model` and `dims` (approvals, never
    /// precedents, excluded), with an id above `after_id`, in id order: a backfill walks
    /// the table once by passing the last id it got back.
    pub fn unembedded(
        &self,
        model: &str,
        dims: usize,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<ToEmbed>, GraphError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.id, t.action, t.target, t.what_happened, t.why, t.what_was_correct, \
             t.enforcer FROM traces AS t \
             LEFT JOIN trace_vectors AS v ON v.trace_id = t.id AND v.model = ?1 AND v.dims = ?2 \
             WHERE t.id > ?3 AND t.pattern_key IS NOT NULL AND v.trace_id IS NULL \
             ORDER BY t.id LIMIT ?4",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![model, dims as i64, after_id, limit], to_embed)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The traces of `keys` to embed (approvals and unknown keys left out), in id order.
    pub fn to_embed_by_keys(&self, keys: &[String]) -> Result<Vec<ToEmbed>, GraphError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT t.id, t.action, t.target, t.what_happened, t.why, t.what_was_correct, \
             t.enforcer FROM traces AS t WHERE t.key = ?1 AND t.pattern_key IS NOT NULL",
        )?;
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(e) = stmt.query_row(params![k], to_embed).optional()? {
                out.push(e);
            }
        }
        out.sort_by_key(|e| e.id);
        Ok(out)
    }

    /// Stores the vectors of `model` for the traces `(id, vector)` in one transaction,
    /// normalised, replacing any vector those traces had (of another model or dimension).
    /// Returns how many were stored (an id with no trace is skipped).
    pub fn store_vectors(
        &mut self,
        model: &str,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<usize, GraphError> {
        let tx = self.write()?;
        let mut n = 0;
        {
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO trace_vectors (trace_id, model, dims, vector) \
                 SELECT id, ?2, ?3, ?4 FROM traces WHERE id = ?1",
            )?;
            for (id, v) in vectors {
                n += put.execute(params![id, model, v.len() as i64, to_blob(&normalised(v))])?;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// How many traces have a vector of `model` and `dims`.
    pub fn vector_count(&self, model: &str, dims: usize) -> Result<u64, GraphError> {
        let n: i64 = self.conn.query_row(
            "SELECT count(*) FROM trace_vectors WHERE model = ?1 AND dims = ?2",
            params![model, dims as i64],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u64)
    }
}

fn to_embed(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToEmbed> {
    let target: Option<String> = r.get(2)?;
    Ok(ToEmbed {
        id: r.get(0)?,
        text: text_of(
            &r.get::<_, String>(1)?,
            target.as_deref(),
            &r.get::<_, String>(3)?,
            &r.get::<_, String>(4)?,
            &r.get::<_, String>(5)?,
            &r.get::<_, String>(6)?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_normalised() {
        let v = normalised(&[3.0, 4.0]);
        assert_eq!(v, [0.6, 0.8]);
        let blob = to_blob(&v);
        assert_eq!(blob.len(), 8);
        let d = dot_blob(&v, &blob).unwrap();
        assert!((d - 1.0).abs() < 1e-6, "{d}");
        assert_eq!(dot_blob(&[1.0], &blob), None);
        assert_eq!(normalised(&[0.0, 0.0]), [0.0, 0.0]);
    }
}
