//! The background read worker (R-J6): a read-only connection on its own thread serving
//! history reads for context assembly. It never takes the writer's lock (WAL readers).

use std::path::Path;
use std::sync::mpsc as std_mpsc;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::Value;
use tokio::sync::oneshot;

use super::StoreError;

const QUEUE: usize = 1024;

/// One message of a session's history, as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryItem {
    pub role: String,
    pub text: String,
}

enum Cmd {
    History {
        session_key: String,
        limit: usize,
        reply: oneshot::Sender<Result<Vec<HistoryItem>, StoreError>>,
    },
}

#[derive(Clone)]
pub struct Reader {
    tx: std_mpsc::SyncSender<Cmd>,
}

impl Reader {
    /// Opens a read-only connection (the writer must have created the database).
    pub fn open(path: &Path) -> Result<Reader, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let (tx, rx) = std_mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("agent-db-reader".into())
            .spawn(move || {
                while let Ok(cmd) = rx.recv() {
                    match cmd {
                        Cmd::History {
                            session_key,
                            limit,
                            reply,
                        } => {
                            let _ = reply.send(history(&conn, &session_key, limit));
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Sqlite(format!("cannot start the reader thread: {e}")))?;
        Ok(Reader { tx })
    }

    /// The last `limit` messages of the session's current transcript, oldest first.
    pub async fn history(
        &self,
        session_key: String,
        limit: usize,
    ) -> Result<Vec<HistoryItem>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .try_send(Cmd::History {
                session_key,
                limit,
                reply,
            })
            .map_err(|e| match e {
                std_mpsc::TrySendError::Full(_) => StoreError::Overloaded,
                std_mpsc::TrySendError::Disconnected(_) => StoreError::Closed,
            })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

fn history(
    conn: &Connection,
    session_key: &str,
    limit: usize,
) -> Result<Vec<HistoryItem>, StoreError> {
    let sid: Option<String> = conn
        .query_row(
            "SELECT session_id FROM sessions WHERE session_key = ?1",
            params![session_key],
            |r| r.get(0),
        )
        .optional()?;
    let Some(sid) = sid else {
        return Ok(Vec::new());
    };
    let mut stmt = conn.prepare_cached(
        "SELECT role, entry_json FROM transcript WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![sid, limit as i64], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut items = Vec::new();
    for row in rows {
        let (role, json) = row?;
        let v: Value = serde_json::from_str(&json)
            .map_err(|e| StoreError::Sqlite(format!("corrupt transcript entry: {e}")))?;
        let text = v
            .pointer("/message/content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("")
            })
            .unwrap_or_default();
        items.push(HistoryItem { role, text });
    }
    items.reverse();
    Ok(items)
}
