//! Agent database schema: its migration ladder (`PRAGMA user_version`, run by
//! `dbwriter::migrate`).

use std::path::Path;

use rusqlite::Connection;

use super::StoreError;

/// The agent db's schema ladder: step `i` brings `user_version` `i` to `i + 1`. Append only.
const LADDER: &[dbwriter::Step<'static>] = &[
    // v1: sessions, runs and the transcript.
    &["CREATE TABLE sessions(
                session_key TEXT PRIMARY KEY,
                session_id TEXT NOT NULL UNIQUE,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                active_writer_run_id TEXT,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                total_tokens INTEGER NOT NULL DEFAULT 0
             ) STRICT;
             CREATE TABLE runs(
                run_id TEXT PRIMARY KEY,
                session_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                status TEXT NOT NULL,
                accepted_at INTEGER NOT NULL,
                started_at INTEGER,
                ended_at INTEGER,
                error TEXT,
                stop_reason TEXT,
                provider TEXT,
                model TEXT,
                input_tokens INTEGER,
                output_tokens INTEGER,
                total_tokens INTEGER
             ) STRICT;
             CREATE INDEX runs_open ON runs(status) WHERE status = 'running';
             CREATE TABLE transcript(
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                entry_id TEXT NOT NULL UNIQUE,
                parent_id TEXT,
                run_id TEXT,
                role TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                entry_json TEXT NOT NULL,
                PRIMARY KEY(session_id, seq)
             ) STRICT;"],
    // v2: the current window's start is kept on the session (no scan for the last reset
    // per read), and message text has its own column (no JSON parse per history row).
    &["ALTER TABLE sessions ADD COLUMN window_start_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE transcript ADD COLUMN text TEXT;
             UPDATE sessions SET window_start_seq = COALESCE(
                (SELECT max(seq) FROM transcript t WHERE t.session_id = sessions.session_id AND t.role = 'reset'), 0);"],
    // v3: the audit ledger (R-D6): metadata only, bounded by the writer.
    &["CREATE TABLE audit(
                id INTEGER PRIMARY KEY,
                ts INTEGER NOT NULL,
                run_id TEXT NOT NULL,
                session_key TEXT NOT NULL,
                kind TEXT NOT NULL,
                phase TEXT NOT NULL,
                tool_name TEXT,
                tool_call_id TEXT,
                result TEXT,
                duration_ms INTEGER
             ) STRICT;"],
    // v4: compaction (R-B7, R-C5). The latest `compaction` entry of the current window
    // and the first transcript row it keeps verbatim are kept on the session, so the
    // model's history is one indexed range read plus the summary.
    &["ALTER TABLE sessions ADD COLUMN compaction_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN kept_from_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN compaction_count INTEGER NOT NULL DEFAULT 0;"],
    // v5: which user message a run recorded, found by run id (`chat.history`
    // `inputRunIds` receipts) without scanning the transcript.
    &["CREATE INDEX transcript_user_run ON transcript(run_id)
                WHERE role = 'user' AND run_id IS NOT NULL;"],
    // v6: runs whose message a collected or summarized turn recorded as part of its own
    // (R-B3): their `inputRunIds` receipt is the carrier's user message.
    &["CREATE TABLE input_alias(
                run_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                entry_id TEXT NOT NULL
             ) STRICT;
             CREATE INDEX input_alias_session ON input_alias(session_id);"],
    // v7: cluster mode: the last record of the agent's journal this database holds (the
    // database is then a cache of the journal; see `store::journal`).
    &["CREATE TABLE journal_state(
                id INTEGER PRIMARY KEY CHECK (id = 1),
                last_seq INTEGER NOT NULL
             ) STRICT;
             INSERT INTO journal_state VALUES (1, 0);"],
    // v8: attachments (issue 26), kept once per content (`media`, by SHA-256 digest) and
    // referred to by the transcript rows that carry them (`transcript_media`, in order);
    // a digest no row refers to any more is deleted with the last row.
    &["CREATE TABLE media(
                digest TEXT PRIMARY KEY,
                mime_type TEXT NOT NULL,
                size_bytes INTEGER NOT NULL,
                data TEXT NOT NULL,
                created_at INTEGER NOT NULL
             ) STRICT;
             CREATE TABLE transcript_media(
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                position INTEGER NOT NULL,
                digest TEXT NOT NULL,
                PRIMARY KEY(session_id, seq, position)
             ) STRICT;
             CREATE INDEX transcript_media_digest ON transcript_media(digest);"],
];

pub const SCHEMA_VERSION: i64 = dbwriter::top(LADDER);

pub fn open_rw(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let conn = dbwriter::open(path, dbwriter::Durability::Normal)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

pub fn migrate(conn: &Connection) -> Result<(), super::StoreError> {
    dbwriter::migrate(conn, LADDER).map_err(|e| match e {
        dbwriter::MigrateError::TooNew { found, known } => super::StoreError::Sqlite(format!(
            "agent database schema version {found} is newer than this build supports ({known})"
        )),
        dbwriter::MigrateError::Sqlite(e) => e.into(),
    })
}

/// Opens the agent database read-write and brings its schema up to this build's.
pub(super) fn open_migrated(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Sqlite(format!("cannot create {}: {e}", dir.display())))?;
    }
    let named = |e: String| {
        StoreError::Sqlite(format!(
            "cannot open the agent database {}: {e} (a damaged database is never replaced; restore it or move it aside)",
            path.display()
        ))
    };
    let conn = open_rw(path).map_err(|e| named(e.to_string()))?;
    migrate(&conn).map_err(|e| named(e.to_string()))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new database climbs to this build's version; one a newer build wrote is refused
    /// with the message operators know.
    #[test]
    fn migrates_to_the_top_and_refuses_a_newer_database() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        let version = |c: &Connection| -> i64 {
            c.pragma_query_value(None, "user_version", |r| r.get(0))
                .unwrap()
        };
        assert_eq!(version(&conn), SCHEMA_VERSION);
        assert_eq!(SCHEMA_VERSION, 8);
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let e = migrate(&conn).unwrap_err();
        assert_eq!(
            e.to_string(),
            "storage error: agent database schema version 9 is newer than this build supports (8)"
        );
    }
}
