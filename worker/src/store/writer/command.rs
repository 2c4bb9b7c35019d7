//! Recording a slash command the supervisor answered (`SessionOp::Command`), as OpenClaw
//! records one: the command as a user message, the gateway's reply as an assistant message,
//! both of the command's run, in one transaction, into a session no run holds (made if
//! the key has none).

use rusqlite::{params, Connection};

use super::{append, check_unclaimed};
use crate::store::{NewMessage, StoreError};

/// Appends `rows` to the session, made if it has none (then `true`: its `session_start`
/// is the command's); `None` while a run holds it (its turn is being written: a command's
/// rows would land inside it).
pub(super) fn record(
    c: &Connection,
    session_key: &str,
    run_id: &str,
    rows: &[NewMessage],
) -> Result<super::CommandRecorded, StoreError> {
    let (session_id, created) = match check_unclaimed(c, session_key) {
        Ok(Some(sid)) => (sid, false),
        Ok(None) => {
            let sid = uuid::Uuid::now_v7().to_string();
            let now = rows.first().map_or(0, |m| m.created_at) as i64;
            c.prepare_cached(
                "INSERT INTO sessions(session_key, session_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
            )?
            .execute(params![session_key, sid, now])?;
            (sid, true)
        }
        Err(StoreError::Fenced { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let appended = rows
        .iter()
        .map(|m| append(c, &session_id, Some(run_id), m))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((session_id, created, appended)))
}
