//! Opening the database and migrating its schema (`PRAGMA user_version`, through
//! rusqlite_migration).
//!
//! Schema version 1:
//!
//! - `traces`: one row per trace, unique by `key`; `time_ms` is the timestamp parsed (UTC
//!   milliseconds, 0 when it does not parse) for ordering; `pattern_key` is
//!   `source:enforcer:action` (NULL for approvals, which belong to no pattern).
//! - `traces_fts`: FTS5 over what happened, what was correct, why, action, target and
//!   enforcer (external content: the text lives in `traces`), filled by a trigger.
//! - `pattern_counts`: the live number of traces per pattern key, kept by the same trigger
//!   (precedents show it without counting).
//! - `patterns`: the groups as [`crate::Graph::learn`] last computed them (ids stable).
//! - `rules`: proposed, approved and rejected rules, one pattern each.
//!
//! Schema version 2 (embeddings, issue 14's last clause):
//!
//! - `trace_vectors`: at most one vector per trace: the embedding model's name, the
//!   dimension and the vector (f32 little-endian, normalised to length 1). A vector of
//!   another model or dimension than the one asked for is ignored, never compared, and
//!   replaced when the trace is embedded again.
//! - `traces_pattern`: traces by pattern and time, for each pattern's latest embedded
//!   trace (its representative in a semantic search).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};
use rusqlite_migration::{Migrations, SchemaVersion, M};

use crate::GraphError;

/// The newest schema version this build knows (the number of migrations).
pub const SCHEMA_VERSION: usize = 2;

/// How long a statement waits for another process's write before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's page cache per connection, in KiB (its default is 2 MiB; the indexes of a large
/// batch of traces are written several times faster with more).
const CACHE_KIB: i64 = 16 * 1024;

const V1: &str = r#"
CREATE TABLE traces (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    task_type TEXT NOT NULL,
    phase TEXT NOT NULL,
    role TEXT,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    enforcer TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    what_happened TEXT NOT NULL,
    what_was_correct TEXT NOT NULL,
    why TEXT NOT NULL,
    pattern_key TEXT
);
CREATE INDEX traces_time ON traces (time_ms, id);
CREATE INDEX traces_task ON traces (task_id, time_ms, id);
CREATE INDEX traces_type_phase ON traces (task_type, phase, time_ms, id);
CREATE INDEX traces_target ON traces (target, time_ms, id);

CREATE VIRTUAL TABLE traces_fts USING fts5 (
    what_happened, what_was_correct, why, action, target, enforcer,
    content = 'traces', content_rowid = 'id'
);

CREATE TABLE pattern_counts (
    key TEXT PRIMARY KEY,
    count INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER traces_added AFTER INSERT ON traces WHEN new.pattern_key IS NOT NULL BEGIN
    INSERT INTO traces_fts (rowid, what_happened, what_was_correct, why, action, target, enforcer)
        VALUES (new.id, new.what_happened, new.what_was_correct, new.why, new.action,
                new.target, new.enforcer);
    INSERT INTO pattern_counts (key, count) VALUES (new.pattern_key, 1)
        ON CONFLICT (key) DO UPDATE SET count = count + 1;
END;

CREATE TABLE patterns (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    enforcer TEXT NOT NULL,
    action TEXT NOT NULL,
    target_glob TEXT,
    count INTEGER NOT NULL,
    tasks TEXT NOT NULL,
    task_count INTEGER NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    example_why TEXT NOT NULL,
    example_correct TEXT NOT NULL,
    description TEXT NOT NULL
);

CREATE TABLE rules (
    id INTEGER PRIMARY KEY,
    pattern_id INTEGER NOT NULL REFERENCES patterns (id),
    status TEXT NOT NULL CHECK (status IN ('proposed', 'approved', 'rejected')),
    action TEXT NOT NULL,
    target_glob TEXT,
    condition TEXT NOT NULL,
    effect TEXT NOT NULL,
    reason TEXT NOT NULL,
    pattern TEXT NOT NULL,
    proposed_at TEXT NOT NULL,
    proposed_count INTEGER NOT NULL,
    decided_at TEXT,
    decided_by TEXT,
    decided_count INTEGER,
    note TEXT
);
CREATE INDEX rules_pattern ON rules (pattern_id, id);
CREATE INDEX rules_status ON rules (status, id);
"#;

/// Version 2: the traces' embedding vectors (never edit V1: a database at version 1 is
/// upgraded by this step alone).
const V2: &str = r#"
CREATE TABLE trace_vectors (
    trace_id INTEGER PRIMARY KEY REFERENCES traces (id),
    model TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX traces_pattern ON traces (pattern_key, time_ms, id);
"#;

const MIGRATION_LIST: &[M<'static>] = &[M::up(V1), M::up(V2)];

/// The migrations, oldest first; the schema's version is their count.
pub fn migrations() -> Migrations<'static> {
    Migrations::from_slice(MIGRATION_LIST)
}

/// Opens (creating it and its folder) and migrates the database file at `path`.
pub(crate) fn open_file(path: &Path) -> Result<Connection, GraphError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| GraphError::CreateFolder {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let mut attempt = 1;
    loop {
        let mut conn = Connection::open(path).map_err(|source| GraphError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        match prepare(&mut conn, path, true) {
            Err(e) if refused_at_once(&e) && attempt < OPEN_ATTEMPTS => {
                drop(conn);
                attempt += 1;
                std::thread::sleep(OPEN_RETRY_PAUSE);
            }
            prepared => return prepared.map(|()| conn),
        }
    }
}

/// How many times opening a file tries its settings and migrations. Two connections
/// that set up a new file at once (WAL mode, the first migration) both upgrade their
/// locks; SQLite refuses one of them at once, without its busy timeout, rather than
/// deadlock, and that one starts over. Fixed, so a file another process keeps locked still
/// fails in bounded time.
const OPEN_ATTEMPTS: u32 = 20;

/// The pause before opening again.
const OPEN_RETRY_PAUSE: Duration = Duration::from_millis(25);

/// Whether SQLite refused a step of opening because another connection held the lock.
fn refused_at_once(e: &GraphError) -> bool {
    let code = match e {
        GraphError::Open { source, .. } => source.sqlite_error_code(),
        GraphError::Migrate {
            source: rusqlite_migration::Error::RusqliteError { err, .. },
            ..
        } => err.sqlite_error_code(),
        _ => None,
    };
    matches!(
        code,
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// A migrated database in memory.
pub(crate) fn open_memory() -> Result<Connection, GraphError> {
    let mut conn = Connection::open_in_memory()?;
    prepare(&mut conn, Path::new(":memory:"), false)?;
    Ok(conn)
}

/// Settings, the version check and the migrations. Errors that say the file is no
/// database (or a damaged one) become [`GraphError::Corrupt`].
fn prepare(conn: &mut Connection, path: &Path, wal: bool) -> Result<(), GraphError> {
    let corrupt = |e: rusqlite::Error| -> GraphError {
        match e.sqlite_error_code() {
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => GraphError::Corrupt {
                path: path.to_path_buf(),
                detail: e.to_string(),
            },
            _ => GraphError::Open {
                path: path.to_path_buf(),
                source: e,
            },
        }
    };
    conn.busy_timeout(BUSY_TIMEOUT).map_err(corrupt)?;
    if wal {
        // The first statement that reads the file's header: a file that is not a database
        // fails here.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
            .map_err(corrupt)?;
        // In WAL mode NORMAL never corrupts the file; a power cut may lose the last
        // transactions, which the host copies again from the tasks' logs.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(corrupt)?;
    }
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(corrupt)?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)
        .map_err(corrupt)?;
    // Statement journals (an INSERT whose trigger writes the index opens one per row) and
    // sorts in memory, not in temporary files.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(corrupt)?;
    let migrations = migrations();
    let version = migrations
        .current_version(conn)
        .map_err(|source| migrate_error(path, source))?;
    if let SchemaVersion::Outside(found) = version {
        return Err(GraphError::NewerSchema {
            path: path.to_path_buf(),
            found: found.get(),
            supported: SCHEMA_VERSION,
        });
    }
    if let Err(source) = migrations.to_latest(conn) {
        // Two processes opening a new file at once: the one that lost the race finds it
        // migrated by the other.
        let now = migrations.current_version(conn);
        if !matches!(now, Ok(SchemaVersion::Inside(v)) if v.get() == SCHEMA_VERSION) {
            return Err(migrate_error(path, source));
        }
    }
    Ok(())
}

/// A migration's error, as [`GraphError::Corrupt`] when SQLite said the file is damaged.
fn migrate_error(path: &Path, source: rusqlite_migration::Error) -> GraphError {
    if let rusqlite_migration::Error::RusqliteError { err, .. } = &source {
        if let Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) = err.sqlite_error_code()
        {
            return GraphError::Corrupt {
                path: path.to_path_buf(),
                detail: err.to_string(),
            };
        }
    }
    GraphError::Migrate {
        path: path.to_path_buf(),
        supported: SCHEMA_VERSION,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_migrations_are_valid_and_their_count_is_the_version() {
        migrations().validate().unwrap();
        assert_eq!(MIGRATION_LIST.len(), SCHEMA_VERSION);
    }

    #[test]
    fn a_version_1_database_upgrades_to_the_latest_and_keeps_its_traces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            Migrations::from_slice(&MIGRATION_LIST[..1])
                .to_latest(&mut conn)
                .unwrap();
            conn.execute(
                "INSERT INTO traces (key, project, timestamp, time_ms, task_id, task_type, \
                 phase, step, kind, source, enforcer, action, what_happened, \
                 what_was_correct, why, pattern_key) VALUES ('t#1#0', 'p', '', 0, 't', 'code', \
                 'implement', 1, 'violation', 'guard_denial', 'g', 'complete', 'x', 'y', 'z', \
                 'guard_denial:g:complete')",
                [],
            )
            .unwrap();
            let v: i64 = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap();
            assert_eq!(v, 1);
        }
        let g = crate::Graph::open(&path).unwrap();
        let v: i64 = g
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v as usize, SCHEMA_VERSION);
        assert_eq!(g.trace_count().unwrap(), 1);
        let vectors: i64 = g
            .conn
            .query_row("SELECT count(*) FROM trace_vectors", [], |r| r.get(0))
            .unwrap();
        assert_eq!(vectors, 0);
        // The upgraded trace is one to embed.
        assert_eq!(g.unembedded("m", 2, 0, 10).unwrap().len(), 1);
    }

    #[test]
    fn the_bundled_sqlite_has_fts5() {
        let conn = open_memory().unwrap();
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM pragma_compile_options WHERE compile_options = 'ENABLE_FTS5'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1);
    }
}
