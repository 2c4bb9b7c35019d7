//! Recording a slash command the supervisor answered (`SessionOp::Command`), as OpenClaw
//! records one: the command as a user message, the gateway's reply as an assistant message,
//! both of the command's run, in one transaction, into a session that exists and that no
//! run holds.

use rusqlite::Connection;

use super::{append, check_unclaimed};
use crate::store::{Appended, NewMessage, StoreError};

/// Appends `rows` to the session; `None` while a run holds it (its turn is being written:
/// a command's rows would land inside it), or when it has no transcript yet (the first run
/// makes the session, and its `session_start` hook is that run's).
pub(super) fn record(
    c: &Connection,
    session_key: &str,
    run_id: &str,
    rows: &[NewMessage],
) -> Result<Option<(String, Vec<Appended>)>, StoreError> {
    let session_id = match check_unclaimed(c, session_key) {
        Ok(Some(sid)) => sid,
        Ok(None) | Err(StoreError::Fenced { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let appended = rows
        .iter()
        .map(|m| append(c, &session_id, Some(run_id), m))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((session_id, appended)))
}
