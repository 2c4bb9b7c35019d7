//! The session index (`sessions.list`, `sessions.patch`, `sessions.delete`): its rows, each
//! session's own settings, and the session a transcript id belongs to.

use rusqlite::{params, Connection, OptionalExtension};

use super::{DbError, SessionPatch, SessionQuery, SessionRow, StoredOverrides};

/// Changes a session's own settings, label or read mark (creating its index row for a key
/// with no run yet); the row as it is now.
pub(super) fn patch(
    conn: &Connection,
    key: &str,
    agent_id: &str,
    patch: &SessionPatch,
    now: u64,
) -> Result<SessionRow, DbError> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sessions(session_key, agent_id, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?3)",
    )?
    .execute(params![key, agent_id, now as i64])?;
    if let Some(label) = &patch.label {
        conn.prepare_cached("UPDATE sessions SET label = ?2 WHERE session_key = ?1")?
            .execute(params![key, label])?;
    }
    if let Some(model) = &patch.model_override {
        conn.prepare_cached("UPDATE sessions SET model_override = ?2 WHERE session_key = ?1")?
            .execute(params![key, model])?;
    }
    if let Some(t) = &patch.thinking_level {
        conn.prepare_cached("UPDATE sessions SET thinking_level = ?2 WHERE session_key = ?1")?
            .execute(params![key, t])?;
    }
    if let Some(r) = &patch.reasoning_level {
        conn.prepare_cached("UPDATE sessions SET reasoning_level = ?2 WHERE session_key = ?1")?
            .execute(params![key, r])?;
    }
    if let Some(q) = &patch.queue_mode {
        conn.prepare_cached("UPDATE sessions SET queue_mode = ?2 WHERE session_key = ?1")?
            .execute(params![key, q])?;
    }
    match &patch.queue_options {
        None => {}
        Some(None) => {
            conn.prepare_cached(
                "UPDATE sessions SET queue_debounce_ms = NULL, queue_cap = NULL, queue_drop = NULL
                 WHERE session_key = ?1",
            )?
            .execute(params![key])?;
        }
        Some(Some(o)) => {
            conn.prepare_cached(
                "UPDATE sessions SET queue_debounce_ms = coalesce(?2, queue_debounce_ms),
                        queue_cap = coalesce(?3, queue_cap), queue_drop = coalesce(?4, queue_drop)
                 WHERE session_key = ?1",
            )?
            .execute(params![
                key,
                o.debounce_ms.map(|v| v.min(i64::MAX as u64) as i64),
                o.cap,
                o.drop
            ])?;
        }
    }
    if let Some(v) = &patch.verbose_level {
        conn.prepare_cached("UPDATE sessions SET verbose_level = ?2 WHERE session_key = ?1")?
            .execute(params![key, v])?;
    }
    if let Some(u) = &patch.response_usage {
        conn.prepare_cached("UPDATE sessions SET response_usage = ?2 WHERE session_key = ?1")?
            .execute(params![key, u])?;
    }
    if let Some(t) = &patch.trace_level {
        conn.prepare_cached("UPDATE sessions SET trace_level = ?2 WHERE session_key = ?1")?
            .execute(params![key, t])?;
    }
    if let Some(read) = &patch.last_read_at {
        conn.prepare_cached("UPDATE sessions SET last_read_at = ?2 WHERE session_key = ?1")?
            .execute(params![key, read.map(|v| v as i64)])?;
    }
    let q = SessionQuery {
        key: Some(key.to_owned()),
        limit: 1,
        ..SessionQuery::default()
    };
    list(conn, &q)?
        .0
        .into_iter()
        .next()
        .ok_or(DbError::Sqlite(rusqlite::Error::QueryReturnedNoRows))
}

/// A page of the session index (`q`), most recently updated first, and how many match.
pub(super) fn list(conn: &Connection, q: &SessionQuery) -> Result<(Vec<SessionRow>, u64), DbError> {
    let search = q.search.as_ref().map(|s| {
        format!(
            "%{}%",
            s.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        )
    });
    let filter = "WHERE (?1 IS NULL OR s.agent_id = ?1) AND (?2 IS NULL OR s.updated_at >= ?2)
                    AND (?3 IS NULL OR s.session_key LIKE ?3 ESCAPE '\\')
                    AND (?4 IS NULL OR s.session_key = ?4)";
    let total: i64 = conn.query_row(
        &format!("SELECT count(*) FROM sessions s {filter}"),
        params![q.agent_id, q.updated_since.map(|v| v as i64), search, q.key],
        |r| r.get(0),
    )?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT s.session_key, s.agent_id, s.session_id, s.created_at, s.updated_at, s.last_run_id,
                s.last_status, s.last_error, s.input_tokens, s.output_tokens, s.total_tokens, s.label,
                s.last_read_at, s.model_override, s.thinking_level, s.reasoning_level,
                r.started_at, r.ended_at, s.queue_mode, s.verbose_level, s.response_usage,
                s.trace_level
         FROM sessions s LEFT JOIN runs r ON r.run_id = s.last_run_id
         {filter} ORDER BY s.updated_at DESC, s.session_key LIMIT ?5 OFFSET ?6"
    ))?;
    let rows = stmt
        .query_map(
            params![
                q.agent_id,
                q.updated_since.map(|v| v as i64),
                search,
                q.key,
                q.limit as i64,
                q.offset as i64
            ],
            |r| {
                Ok(SessionRow {
                    session_key: r.get(0)?,
                    agent_id: r.get(1)?,
                    session_id: r.get(2)?,
                    created_at: r.get::<_, i64>(3)? as u64,
                    updated_at: r.get::<_, i64>(4)? as u64,
                    last_run_id: r.get(5)?,
                    last_status: r.get(6)?,
                    last_error: r.get(7)?,
                    input_tokens: r.get::<_, i64>(8)? as u64,
                    output_tokens: r.get::<_, i64>(9)? as u64,
                    total_tokens: r.get::<_, i64>(10)? as u64,
                    label: r.get(11)?,
                    last_read_at: r.get::<_, Option<i64>>(12)?.map(|v| v as u64),
                    model_override: r.get(13)?,
                    thinking_level: r.get(14)?,
                    reasoning_level: r.get(15)?,
                    last_run_started_at: r.get::<_, Option<i64>>(16)?.map(|v| v as u64),
                    last_run_ended_at: r.get::<_, Option<i64>>(17)?.map(|v| v as u64),
                    queue_mode: r.get(18)?,
                    verbose_level: r.get(19)?,
                    response_usage: r.get(20)?,
                    trace_level: r.get(21)?,
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rows, total as u64))
}

/// Removes a session from the index; `true` if it was there.
pub(super) fn delete(conn: &Connection, key: &str) -> Result<bool, DbError> {
    conn.prepare_cached("DELETE FROM sessions WHERE session_key = ?1")?
        .execute(params![key])
        .map(|n| n > 0)
        .map_err(DbError::from)
}

/// The session (key, agent id) whose transcript id is `id`. The most recently used, should
/// an id ever be on two rows (a session deleted from the index and its key used again with
/// the old transcript).
pub(super) fn by_id(conn: &Connection, id: &str) -> Result<Option<(String, String)>, DbError> {
    conn.prepare_cached(
        "SELECT session_key, agent_id FROM sessions WHERE session_id = ?1
         ORDER BY updated_at DESC LIMIT 1",
    )?
    .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
    .optional()
    .map_err(DbError::from)
}

/// Every session with a setting of its own (model, thinking, reasoning, queue mode and
/// options, verbose level, usage footer, trace level).
pub(super) fn overrides(conn: &Connection) -> Result<Vec<StoredOverrides>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_key, model_override, thinking_level, reasoning_level, queue_mode,
                verbose_level, queue_debounce_ms, queue_cap, queue_drop, response_usage,
                trace_level
         FROM sessions
         WHERE model_override IS NOT NULL OR thinking_level IS NOT NULL
            OR reasoning_level IS NOT NULL OR queue_mode IS NOT NULL
            OR verbose_level IS NOT NULL OR queue_debounce_ms IS NOT NULL
            OR queue_cap IS NOT NULL OR queue_drop IS NOT NULL
            OR response_usage IS NOT NULL OR trace_level IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(StoredOverrides {
            session_key: r.get(0)?,
            model: r.get(1)?,
            thinking: r.get(2)?,
            reasoning: r.get(3)?,
            queue_mode: r.get(4)?,
            verbose: r.get(5)?,
            response_usage: r.get(9)?,
            trace_level: r.get(10)?,
            queue_options: super::StoredQueueOptions {
                debounce_ms: r.get::<_, Option<i64>>(6)?.map(|v| v.max(0) as u64),
                cap: r
                    .get::<_, Option<i64>>(7)?
                    .map(|v| v.clamp(0, i64::from(u32::MAX)) as u32),
                drop: r.get(8)?,
            },
        })
    })?;
    rows.collect::<Result<Vec<_>, _>>().map_err(DbError::from)
}
