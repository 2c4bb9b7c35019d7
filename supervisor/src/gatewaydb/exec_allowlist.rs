//! Exec commands operators allowed for good (`allow-always`), per agent: at most
//! [`MAX_ALLOWED_PER_AGENT`] each.

use rusqlite::{params, Connection};

use super::{DbError, MAX_ALLOWED_PER_AGENT};

/// Keeps `pattern` in `agent`'s allowlist (`at`: when, ms); refused once the agent has
/// [`MAX_ALLOWED_PER_AGENT`].
pub(super) fn allow(conn: &Connection, agent: &str, pattern: &str, at: u64) -> Result<(), DbError> {
    let have: i64 = conn
        .prepare_cached("SELECT count(*) FROM exec_allowlist WHERE agent_id = ?1")?
        .query_row(params![agent], |r| r.get(0))?;
    if have >= MAX_ALLOWED_PER_AGENT {
        return Err(DbError::Commit(format!(
            "agent {agent:?} already has {MAX_ALLOWED_PER_AGENT} allow-always patterns"
        )));
    }
    conn.prepare_cached(
        "INSERT OR IGNORE INTO exec_allowlist(agent_id, pattern, created_at) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![agent, pattern, at as i64])?;
    Ok(())
}

/// Forgets a kept pattern; `false` if it was not kept.
pub(super) fn disallow(conn: &Connection, agent: &str, pattern: &str) -> Result<bool, DbError> {
    let n = conn
        .prepare_cached("DELETE FROM exec_allowlist WHERE agent_id = ?1 AND pattern = ?2")?
        .execute(params![agent, pattern])?;
    Ok(n > 0)
}

/// Every kept `(agent id, pattern)`, oldest first.
pub(super) fn list(conn: &Connection) -> Result<Vec<(String, String)>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT agent_id, pattern FROM exec_allowlist ORDER BY created_at, pattern",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect::<Result<Vec<_>, _>>().map_err(DbError::from)
}
