//! The trace database's errors.

use std::path::PathBuf;

use crate::rules::RuleStatus;

/// What can go wrong with the trace database.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The database's folder could not be created.
    #[error("cannot create the folder {} for the trace database: {source}", path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file could not be opened (permissions, a folder in its place...).
    #[error("cannot open the trace database {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// SQLite's reason.
        source: rusqlite::Error,
    },
    /// The file is not a SQLite database, or is damaged.
    #[error(
        "the trace database {} is damaged or is not a SQLite database ({detail}); move it \
         aside (or delete it) and a new, empty one is created on the next open (the tasks' \
         logs, actions.jsonl, still hold every step's traces)",
        path.display()
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's words.
        detail: String,
    },
    /// The file was written by a newer AgentForge, with a schema this one does not know.
    #[error(
        "the trace database {} has schema version {found}, but this AgentForge knows versions \
         up to {supported}: a newer AgentForge wrote it; upgrade AgentForge, or use another \
         database file",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version the file has (`PRAGMA user_version`).
        found: usize,
        /// The newest version this build knows.
        supported: usize,
    },
    /// Migrating the schema failed.
    #[error("cannot migrate the trace database {} to schema version {supported}: {source}", path.display())]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The version it was migrating to.
        supported: usize,
        /// The migration's error.
        source: rusqlite_migration::Error,
    },
    /// A query failed.
    #[error("trace database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// No rule has this id.
    #[error("no learned rule has id {id}")]
    RuleNotFound {
        /// The id asked for.
        id: i64,
    },
    /// The rule already has the status asked for.
    #[error("learned rule {id} is already {status}")]
    RuleAlreadyDecided {
        /// The rule.
        id: i64,
        /// Its status.
        status: RuleStatus,
    },
}
