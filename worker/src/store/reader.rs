//! The background read worker (R-J6): a read-only connection on its own thread serving
//! history reads (context assembly, `chat.history`). It never takes the writer's lock (WAL
//! readers).

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
    /// Assistant: the tool calls it made.
    pub tool_calls: Vec<crate::tools::ToolCall>,
    /// Tool result: the call it answers.
    pub tool_call_id: Option<String>,
    /// Transcript position (`None` for the compaction summary, which stands for many).
    pub seq: Option<i64>,
}

/// The role of the history item that carries the latest compaction summary (first, when the
/// session was compacted).
pub const SUMMARY_ROLE: &str = "compactionSummary";

/// The current transcript window for display (`chat.history`).
#[derive(Debug, Clone, PartialEq)]
pub struct DisplayHistory {
    pub session_id: Option<String>,
    /// Stored `message` objects, oldest first.
    pub messages: Vec<Value>,
}

enum Cmd {
    History {
        session_key: String,
        limit: usize,
        reply: oneshot::Sender<Result<Vec<HistoryItem>, StoreError>>,
    },
    Display {
        session_key: String,
        limit: usize,
        reply: oneshot::Sender<Result<DisplayHistory, StoreError>>,
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
        conn.set_prepared_statement_cache_capacity(64);
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
                        Cmd::Display {
                            session_key,
                            limit,
                            reply,
                        } => {
                            let _ = reply.send(display(&conn, &session_key, limit));
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Sqlite(format!("cannot start the reader thread: {e}")))?;
        Ok(Reader { tx })
    }

    fn send(&self, cmd: Cmd) -> Result<(), StoreError> {
        self.tx.try_send(cmd).map_err(|e| match e {
            std_mpsc::TrySendError::Full(_) => StoreError::Overloaded,
            std_mpsc::TrySendError::Disconnected(_) => StoreError::Closed,
        })
    }

    /// The last `limit` messages of the session's current window, oldest first.
    pub async fn history(
        &self,
        session_key: String,
        limit: usize,
    ) -> Result<Vec<HistoryItem>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::History {
            session_key,
            limit,
            reply,
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// The last `limit` messages of the current window, for display: empty and silent
    /// (`NO_REPLY`) assistant messages are left out.
    pub async fn display(
        &self,
        session_key: String,
        limit: usize,
    ) -> Result<DisplayHistory, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Cmd::Display {
            session_key,
            limit,
            reply,
        })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// One transcript row: `seq`, role, text column, entry JSON.
type Row = (i64, String, Option<String>, String);

/// A session's current window.
struct Window {
    session_id: Option<String>,
    /// The latest compaction summary (model view only).
    summary: Option<String>,
    /// Message rows, newest first.
    rows: Vec<Row>,
}

/// The current window's message rows (after the last `reset` boundary), newest first. The
/// model's view (`for_model`) starts at the latest compaction instead: its summary, then the
/// rows it kept verbatim and everything after.
fn window(
    conn: &Connection,
    session_key: &str,
    limit: usize,
    for_model: bool,
) -> Result<Window, StoreError> {
    let row: Option<(String, i64, i64, i64)> = conn
        .prepare_cached(
            "SELECT session_id, window_start_seq, compaction_seq, kept_from_seq
             FROM sessions WHERE session_key = ?1",
        )?
        .query_row(params![session_key], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((sid, mut start, compaction_seq, kept_from)) = row else {
        return Ok(Window {
            session_id: None,
            summary: None,
            rows: Vec::new(),
        });
    };
    let mut summary = None;
    if for_model && compaction_seq > start {
        summary = conn
            .prepare_cached("SELECT text FROM transcript WHERE session_id = ?1 AND seq = ?2")?
            .query_row(params![sid, compaction_seq], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten();
        start = start.max(kept_from - 1);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT seq, role, text, entry_json FROM transcript
         WHERE session_id = ?1 AND seq > ?2 AND role NOT IN ('reset', 'compaction')
         ORDER BY seq DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![sid, start, limit as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    let mut out = Vec::with_capacity(limit.min(256));
    for row in rows {
        out.push(row?);
    }
    Ok(Window {
        session_id: Some(sid),
        summary,
        rows: out,
    })
}

fn parse_entry(json: &str) -> Result<Value, StoreError> {
    serde_json::from_str(json)
        .map_err(|e| StoreError::Sqlite(format!("corrupt transcript entry: {e}")))
}

fn text_of(message: &Value) -> String {
    message
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}

fn tool_calls_of(message: &Value) -> Vec<crate::tools::ToolCall> {
    let Some(blocks) = message.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .map(|b| {
            let str_field = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            // Arguments are stored as parsed JSON when they parsed, else as the raw string.
            let arguments = match b.get("arguments") {
                Some(Value::String(raw)) => raw.clone(),
                Some(v) => v.to_string(),
                None => "{}".to_owned(),
            };
            crate::tools::ToolCall {
                id: str_field("id"),
                name: str_field("name"),
                arguments,
            }
        })
        .collect()
}

fn display(
    conn: &Connection,
    session_key: &str,
    limit: usize,
) -> Result<DisplayHistory, StoreError> {
    let Window {
        session_id, rows, ..
    } = window(conn, session_key, limit, false)?;
    let mut messages: Vec<Value> = rows
        .into_iter()
        .filter_map(|(_, role, _, json)| {
            let entry = parse_entry(&json).ok()?;
            let message = entry.get("message")?.clone();
            if role == "assistant" && tool_calls_of(&message).is_empty() {
                let text = text_of(&message);
                if text.trim().is_empty() || text.trim() == "NO_REPLY" {
                    return None;
                }
            }
            Some(message)
        })
        .collect();
    messages.reverse();
    Ok(DisplayHistory {
        session_id,
        messages,
    })
}

fn history(
    conn: &Connection,
    session_key: &str,
    limit: usize,
) -> Result<Vec<HistoryItem>, StoreError> {
    let Window { summary, rows, .. } = window(conn, session_key, limit, true)?;
    let mut items = Vec::with_capacity(rows.len() + 1);
    if let Some(text) = summary {
        items.push(HistoryItem {
            role: SUMMARY_ROLE.into(),
            text,
            tool_calls: Vec::new(),
            tool_call_id: None,
            seq: None,
        });
    }
    for (seq, role, text, json) in rows.into_iter().rev() {
        // Plain text rows carry their text in a column; tool-bearing rows (and rows written
        // before schema v2) are read from the entry.
        let item = match text {
            Some(text) => HistoryItem {
                role,
                text,
                tool_calls: Vec::new(),
                tool_call_id: None,
                seq: Some(seq),
            },
            None => {
                let entry = parse_entry(&json)?;
                let message = entry.get("message").cloned().unwrap_or(Value::Null);
                HistoryItem {
                    role,
                    text: text_of(&message),
                    tool_calls: tool_calls_of(&message),
                    tool_call_id: message
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    seq: Some(seq),
                }
            }
        };
        items.push(item);
    }
    Ok(items)
}
