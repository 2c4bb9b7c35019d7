//! Agent database schema and migrations (`PRAGMA user_version`).

use rusqlite::Connection;

pub const SCHEMA_VERSION: i64 = 6;

pub fn open_rw(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let conn = dbwriter::open(path, dbwriter::Durability::Normal)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

pub fn migrate(conn: &Connection) -> Result<(), super::StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(super::StoreError::Sqlite(format!(
            "agent database schema version {version} is newer than this build supports ({SCHEMA_VERSION})"
        )));
    }
    if version < 1 {
        conn.execute_batch(
            "BEGIN;
             CREATE TABLE sessions(
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
             ) STRICT;
             PRAGMA user_version = 1;
             COMMIT;",
        )?;
    }
    if version < 2 {
        // v2: the current window's start is kept on the session (no scan for the last reset
        // per read), and message text has its own column (no JSON parse per history row).
        conn.execute_batch(
            "BEGIN;
             ALTER TABLE sessions ADD COLUMN window_start_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE transcript ADD COLUMN text TEXT;
             UPDATE sessions SET window_start_seq = COALESCE(
                (SELECT max(seq) FROM transcript t WHERE t.session_id = sessions.session_id AND t.role = 'reset'), 0);
             PRAGMA user_version = 2;
             COMMIT;",
        )?;
    }
    if version < 3 {
        // v3: the audit ledger (R-D6): metadata only, bounded by the writer.
        conn.execute_batch(
            "BEGIN;
             CREATE TABLE audit(
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
             ) STRICT;
             PRAGMA user_version = 3;
             COMMIT;",
        )?;
    }
    if version < 4 {
        // v4: compaction (R-B7, R-C5). The latest `compaction` entry of the current window
        // and the first transcript row it keeps verbatim are kept on the session, so the
        // model's history is one indexed range read plus the summary.
        conn.execute_batch(
            "BEGIN;
             ALTER TABLE sessions ADD COLUMN compaction_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN kept_from_seq INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN compaction_count INTEGER NOT NULL DEFAULT 0;
             PRAGMA user_version = 4;
             COMMIT;",
        )?;
    }
    if version < 5 {
        // v5: which user message a run recorded, found by run id (`chat.history`
        // `inputRunIds` receipts) without scanning the transcript.
        conn.execute_batch(
            "BEGIN;
             CREATE INDEX transcript_user_run ON transcript(run_id)
                WHERE role = 'user' AND run_id IS NOT NULL;
             PRAGMA user_version = 5;
             COMMIT;",
        )?;
    }
    if version < 6 {
        // v6: runs whose message a collected or summarized turn recorded as part of its own
        // (R-B3): their `inputRunIds` receipt is the carrier's user message.
        conn.execute_batch(
            "BEGIN;
             CREATE TABLE input_alias(
                run_id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                entry_id TEXT NOT NULL
             ) STRICT;
             CREATE INDEX input_alias_session ON input_alias(session_id);
             PRAGMA user_version = 6;
             COMMIT;",
        )?;
    }
    Ok(())
}
