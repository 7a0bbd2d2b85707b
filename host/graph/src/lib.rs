//! The trace database (seed 003's context graph, issue 14 "Learning from enforcement").
//!
//! Every time a guard denies an action, the loop detector flags a loop, the host reverts a
//! change or a person corrects the agent, the step records a [`Trace`]. This crate keeps
//! them in one SQLite file and answers three questions:
//!
//! - **precedents** ([`Graph::precedents`]): which past traces matter to the step about to
//!   run (full-text ranked, then boosted for the same task type, phase, role, target and
//!   recency; one per pattern), for a budgeted context section; with an embedding of the
//!   question ([`Graph::precedents_with`]) also by cosine with the traces' stored vectors
//!   ([`Graph::store_vectors`], [`Graph::unembedded`]);
//! - **patterns** ([`Graph::learn`], [`Graph::patterns`]): the traces grouped by source,
//!   enforcer and action, with how often and in how many tasks;
//! - **rules** ([`Graph::rules`], [`Graph::approve_rule`], [`Graph::approved_rules`]): a
//!   pattern seen often enough becomes a proposed rule; a person approves or rejects it,
//!   and the approved ones are what the learned-rules guard enforces ([`LearnedRule`]).
//!
//! One module per responsibility: [`db`] (opening, migrations), `traces` (recording and
//! listing), `precedents`, `vectors` (embeddings), `patterns`, `rules`.

#![warn(missing_docs)]

pub mod db;
mod error;
mod patterns;
mod precedents;
mod rules;
mod traces;
mod vectors;

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, TransactionBehavior};

pub use agentforge_core::trace::{
    trace_key, Trace, TraceContext, TraceEvent, TraceKind, TraceSource,
};
pub use error::GraphError;
pub use patterns::{LearnReport, LearnSettings, Pattern};
pub use precedents::{Precedent, PrecedentQuery};
pub use rules::{LearnedRule, Rule, RuleCondition, RuleEffect, RuleStatus};
pub use vectors::{trace_text, QueryVector, ToEmbed};

/// The trace database: one SQLite file (WAL mode) holding traces, their full-text index,
/// the patterns and the rules learned from them.
///
/// Reads take `&self`, writes `&mut self`; each write is one transaction. Several processes
/// may open the same file (SQLite serialises the writers; a busy writer is waited for).
#[derive(Debug)]
pub struct Graph {
    conn: Connection,
    /// The file it was opened from (`:memory:` for an in-memory database), for errors.
    path: PathBuf,
    /// Words found too common to search for (see `precedents`). Traces are never deleted,
    /// so a word once common stays common: remembering it spares the next queries the
    /// probe.
    common_words: RefCell<HashSet<String>>,
}

impl Graph {
    /// Opens the database at `path`, creating the file and its parent folder, and migrates
    /// it to the latest schema ([`db::SCHEMA_VERSION`]). WAL mode, a busy timeout of
    /// [`db::BUSY_TIMEOUT`].
    ///
    /// A database written by a newer schema is refused ([`GraphError::NewerSchema`], naming
    /// the file and both versions), a file that is not a SQLite database or is damaged with
    /// [`GraphError::Corrupt`] (naming the file and what to do).
    pub fn open(path: &Path) -> Result<Graph, GraphError> {
        let conn = db::open_file(path)?;
        Ok(Graph {
            conn,
            path: path.to_path_buf(),
            common_words: RefCell::default(),
        })
    }

    /// A fresh database in memory, migrated (for tests and dry runs).
    pub fn open_in_memory() -> Result<Graph, GraphError> {
        let conn = db::open_memory()?;
        Ok(Graph {
            conn,
            path: PathBuf::from(":memory:"),
            common_words: RefCell::default(),
        })
    }

    /// The file this database was opened from (`:memory:` for an in-memory one).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A write transaction, taking the write lock at once (waiting up to the busy timeout
    /// for another process's): a deferred one that read first could not take it later if
    /// another writer committed in between.
    fn write(&mut self) -> Result<Transaction<'_>, GraphError> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<Graph>();
    }
}
