//! Recording traces and reading them back.

use agentforge_core::trace::{Trace, TraceContext, TraceEvent, TraceKind, TraceSource};
use rusqlite::types::Type;
use rusqlite::{params, Row, Transaction};

use crate::{Graph, GraphError};

/// The columns [`trace_from_row`] reads, in its order.
pub(crate) const TRACE_COLUMNS: &str = "key, project, timestamp, task_id, task_type, phase, \
     role, step, kind, source, enforcer, action, target, what_happened, what_was_correct, why";

const SOURCES: [TraceSource; 6] = [
    TraceSource::GuardDenial,
    TraceSource::GuardWarning,
    TraceSource::AutoRevert,
    TraceSource::LoopDetection,
    TraceSource::RefusedComplete,
    TraceSource::PersonCorrection,
];

const KINDS: [TraceKind; 4] = [
    TraceKind::Correction,
    TraceKind::Violation,
    TraceKind::Decision,
    TraceKind::Approval,
];

impl Graph {
    /// Records `traces` in one transaction. A trace whose key is already stored (the host
    /// copies a step's traces again after a crash) is skipped; returns how many were new.
    pub fn record(&mut self, traces: &[Trace]) -> Result<usize, GraphError> {
        let tx = self.write()?;
        let added = insert_traces(&tx, traces)?;
        tx.commit()?;
        Ok(added)
    }

    /// How many traces are stored (approvals included).
    pub fn trace_count(&self) -> Result<u64, GraphError> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM traces", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// At most `limit` traces, newest first (by timestamp, then by the order they were
    /// recorded), of one task when `task_id` is given.
    pub fn traces(&self, task_id: Option<&str>, limit: usize) -> Result<Vec<Trace>, GraphError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let out = match task_id {
            Some(task) => {
                let mut stmt = self.conn.prepare_cached(&format!(
                    "SELECT {TRACE_COLUMNS} FROM traces WHERE task_id = ?1 \
                     ORDER BY time_ms DESC, id DESC LIMIT ?2"
                ))?;
                let rows = stmt.query_map(params![task, limit], |r| trace_from_row(r, 0))?;
                rows.collect::<Result<Vec<_>, _>>()?
            }
            None => {
                let mut stmt = self.conn.prepare_cached(&format!(
                    "SELECT {TRACE_COLUMNS} FROM traces ORDER BY time_ms DESC, id DESC LIMIT ?1"
                ))?;
                let rows = stmt.query_map(params![limit], |r| trace_from_row(r, 0))?;
                rows.collect::<Result<Vec<_>, _>>()?
            }
        };
        Ok(out)
    }
}

/// Inserts `traces` in the caller's transaction, skipping keys already stored; returns how
/// many were new.
pub(crate) fn insert_traces(tx: &Transaction<'_>, traces: &[Trace]) -> Result<usize, GraphError> {
    let mut added = 0;
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO traces (key, project, timestamp, time_ms, task_id, \
                 task_type, phase, role, step, kind, source, enforcer, action, target, \
                 what_happened, what_was_correct, why, pattern_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
                 ?16, ?17, ?18)",
    )?;
    for t in traces {
        let (c, e) = (&t.context, &t.event);
        let pattern =
            (e.kind != TraceKind::Approval).then(|| pattern_key(e.source, &e.enforcer, &e.action));
        added += insert.execute(params![
            t.key,
            t.project,
            t.timestamp,
            time_ms(&t.timestamp),
            c.task_id,
            c.task_type,
            c.phase,
            c.role,
            i64::try_from(c.step).unwrap_or(i64::MAX),
            e.kind.as_str(),
            e.source.as_str(),
            e.enforcer,
            e.action,
            e.target,
            e.what_happened,
            e.what_was_correct,
            e.why,
            pattern,
        ])?;
    }
    Ok(added)
}

/// A pattern's key: `source:enforcer:action` (what traces are grouped by).
pub(crate) fn pattern_key(source: TraceSource, enforcer: &str, action: &str) -> String {
    format!("{}:{enforcer}:{action}", source.as_str())
}

/// An RFC 3339 timestamp as UTC milliseconds; 0 when it does not parse (such a trace sorts
/// oldest and gets no recency boost).
pub(crate) fn time_ms(timestamp: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(timestamp)
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}

/// A stored source name back as a [`TraceSource`].
pub(crate) fn parse_source(s: &str) -> Option<TraceSource> {
    SOURCES.into_iter().find(|v| v.as_str() == s)
}

/// A stored kind name back as a [`TraceKind`].
fn parse_kind(s: &str) -> Option<TraceKind> {
    KINDS.into_iter().find(|v| v.as_str() == s)
}

/// A text column read through `parse`, a conversion error when it does not parse.
pub(crate) fn parsed<T>(
    row: &Row<'_>,
    idx: usize,
    parse: impl Fn(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let s: String = row.get(idx)?;
    parse(&s).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            Type::Text,
            format!("unknown value {s:?}").into(),
        )
    })
}

/// Reads a trace from [`TRACE_COLUMNS`] starting at column `at`.
pub(crate) fn trace_from_row(row: &Row<'_>, at: usize) -> rusqlite::Result<Trace> {
    let step: i64 = row.get(at + 7)?;
    Ok(Trace {
        key: row.get(at)?,
        project: row.get(at + 1)?,
        timestamp: row.get(at + 2)?,
        context: TraceContext {
            task_id: row.get(at + 3)?,
            task_type: row.get(at + 4)?,
            phase: row.get(at + 5)?,
            role: row.get(at + 6)?,
            step: step.max(0) as u64,
        },
        event: TraceEvent {
            kind: parsed(row, at + 8, parse_kind)?,
            source: parsed(row, at + 9, parse_source)?,
            enforcer: row.get(at + 10)?,
            action: row.get(at + 11)?,
            target: row.get(at + 12)?,
            what_happened: row.get(at + 13)?,
            what_was_correct: row.get(at + 14)?,
            why: row.get(at + 15)?,
        },
    })
}
