//! The background read worker (R-J6): a read-only connection on its own thread serving
//! history reads (context assembly, `chat.history`). It never takes the writer's lock (WAL
//! readers).

use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde_json::Value;
use tokio::sync::oneshot;

use ipc::control::{InputConsumed, MediaBytes, StoredMessage, MAX_INPUT_RUN_IDS};

use super::StoreError;
use crate::llm::History;
use cache::HistoryCache;

mod cache;

const QUEUE: usize = 1024;

pub use crate::llm::messages::SUMMARY_ROLE;

/// The current transcript window for display (`chat.history`).
#[derive(Debug, Clone, PartialEq)]
pub struct DisplayHistory {
    pub session_id: Option<String>,
    /// Visible messages, oldest first.
    pub messages: Vec<StoredMessage>,
    /// Older rows remain: skip this many newest rows to read them.
    pub next_offset: Option<u64>,
    /// The asked-for runs whose user message is recorded.
    pub consumed: Vec<InputConsumed>,
}

enum Cmd {
    History {
        session_key: String,
        limit: usize,
        reply: oneshot::Sender<Result<History, StoreError>>,
    },
    Display {
        session_key: String,
        limit: usize,
        offset: u64,
        max_bytes: usize,
        input_run_ids: Vec<String>,
        reply: oneshot::Sender<Result<DisplayHistory, StoreError>>,
    },
    Claims {
        reply: oneshot::Sender<Result<Vec<Claim>, StoreError>>,
    },
    LastAssistant {
        session_key: String,
        reply: oneshot::Sender<Result<Option<String>, StoreError>>,
    },
    Media {
        session_key: String,
        digest: String,
        reply: oneshot::Sender<Result<Option<MediaBytes>, StoreError>>,
    },
}

/// A session's writer claim as stored (`sessions.active_writer_run_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub session_key: String,
    pub run_id: String,
}

/// Most claims one diagnostic read returns (a worker runs few sessions at once).
const MAX_CLAIMS: usize = 4096;

#[derive(Clone)]
pub struct Reader {
    tx: dbwriter::Queue<Cmd>,
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
        let (tx, mut rx) = dbwriter::channel(QUEUE);
        std::thread::Builder::new()
            .name("agent-db-reader".into())
            .spawn(move || {
                let mut cache = HistoryCache::default();
                while let Some(cmd) = rx.blocking_recv() {
                    match cmd {
                        Cmd::History {
                            session_key,
                            limit,
                            reply,
                        } => {
                            let _ = reply.send(cache.history(&conn, &session_key, limit));
                        }
                        Cmd::Display {
                            session_key,
                            limit,
                            offset,
                            max_bytes,
                            input_run_ids,
                            reply,
                        } => {
                            let _ = reply.send(display(
                                &conn,
                                &session_key,
                                limit,
                                offset,
                                max_bytes,
                                &input_run_ids,
                            ));
                        }
                        Cmd::Claims { reply } => {
                            let _ = reply.send(claims(&conn));
                        }
                        Cmd::LastAssistant { session_key, reply } => {
                            let _ = reply.send(last_assistant(&conn, &session_key));
                        }
                        Cmd::Media {
                            session_key,
                            digest,
                            reply,
                        } => {
                            let _ = reply.send(media(&conn, &session_key, &digest));
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Sqlite(format!("cannot start the reader thread: {e}")))?;
        Ok(Reader { tx })
    }

    /// The last `limit` rows of the session's current window, as the model sees them
    /// (oldest first), shared with the reader's cache.
    pub async fn history(&self, session_key: String, limit: usize) -> Result<History, StoreError> {
        self.tx
            .ask(|reply| Cmd::History {
                session_key,
                limit,
                reply,
            })
            .await
    }

    /// The last `limit` messages of the current window that fit `max_bytes`, after skipping
    /// the `offset` newest rows, for display:
    /// empty and silent (`NO_REPLY`) assistant messages are left out.
    /// `input_run_ids`: runs whose recorded user message to find anywhere in the session
    /// (at most [`ipc::control::MAX_INPUT_RUN_IDS`]).
    pub async fn display(
        &self,
        session_key: String,
        limit: usize,
        offset: u64,
        max_bytes: usize,
        input_run_ids: Vec<String>,
    ) -> Result<DisplayHistory, StoreError> {
        self.tx
            .ask(|reply| Cmd::Display {
                session_key,
                limit,
                offset,
                max_bytes,
                input_run_ids,
                reply,
            })
            .await
    }
}

impl Reader {
    /// Every session's writer claim (for stuck-session diagnostics, R-I1).
    pub async fn claims(&self) -> Result<Vec<Claim>, StoreError> {
        self.tx.ask(|reply| Cmd::Claims { reply }).await
    }

    /// The text of the latest assistant message of the session's current window, for a
    /// diagnostic report's excerpt (R-I3).
    pub async fn last_assistant(&self, session_key: String) -> Result<Option<String>, StoreError> {
        self.tx
            .ask(|reply| Cmd::LastAssistant { session_key, reply })
            .await
    }
}

impl Reader {
    /// An attachment a message of the session carries, by the leading digits of its digest
    /// (lowercase hex; anything else finds nothing).
    pub async fn media(
        &self,
        session_key: String,
        digest: String,
    ) -> Result<Option<MediaBytes>, StoreError> {
        self.tx
            .ask(|reply| Cmd::Media {
                session_key,
                digest,
                reply,
            })
            .await
    }
}

fn media(
    conn: &Connection,
    session_key: &str,
    digits: &str,
) -> Result<Option<MediaBytes>, StoreError> {
    let hex = !digits.is_empty()
        && digits.len() <= 64
        && digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex {
        return Ok(None);
    }
    // Digests starting with `digits`: from `digits` up to (not including) `digits` + "g".
    let end = format!("{digits}g");
    Ok(conn
        .prepare_cached(
            "SELECT m.mime_type, m.size_bytes, m.data
             FROM sessions s
             JOIN transcript_media t ON t.session_id = s.session_id
             JOIN media m ON m.digest = t.digest
             WHERE s.session_key = ?1 AND t.digest >= ?2 AND t.digest < ?3
             LIMIT 1",
        )?
        .query_row(params![session_key, digits, end], |r| {
            Ok(MediaBytes {
                mime_type: r.get(0)?,
                size_bytes: r.get::<_, i64>(1)?.max(0) as u64,
                data: r.get(2)?,
            })
        })
        .optional()?)
}

fn claims(conn: &Connection) -> Result<Vec<Claim>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_key, active_writer_run_id FROM sessions
         WHERE active_writer_run_id IS NOT NULL LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![MAX_CLAIMS as i64], |r| {
        Ok(Claim {
            session_key: r.get(0)?,
            run_id: r.get(1)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn last_assistant(conn: &Connection, session_key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT t.text FROM sessions s JOIN transcript t ON t.session_id = s.session_id
             WHERE s.session_key = ?1 AND t.seq > s.window_start_seq AND t.role = 'assistant'
               AND t.text IS NOT NULL AND t.text NOT IN ('', 'NO_REPLY')
             ORDER BY t.seq DESC LIMIT 1",
        )?
        .query_row(params![session_key], |r| r.get::<_, String>(0))
        .optional()?)
}

/// One transcript row: `seq`, role, text column, entry JSON, the run that wrote it.
type Row = (i64, String, Option<String>, String, Option<String>);

/// A session's current window.
struct Window {
    /// The latest compaction summary (model view only).
    summary: Option<String>,
    /// Message rows, newest first.
    rows: Vec<Row>,
}

/// Where a session's visible transcript starts, from its session row.
#[derive(Debug, Clone, PartialEq)]
struct Bounds {
    session_id: String,
    /// The last reset boundary (rows after it are the current window).
    window_start: i64,
    /// The latest compaction entry and the first row it kept verbatim.
    compaction_seq: i64,
    kept_from: i64,
}

impl Bounds {
    fn read(conn: &Connection, session_key: &str) -> Result<Option<Bounds>, StoreError> {
        Ok(conn
            .prepare_cached(
                "SELECT session_id, window_start_seq, compaction_seq, kept_from_seq
                 FROM sessions WHERE session_key = ?1",
            )?
            .query_row(params![session_key], |r| {
                Ok(Bounds {
                    session_id: r.get(0)?,
                    window_start: r.get(1)?,
                    compaction_seq: r.get(2)?,
                    kept_from: r.get(3)?,
                })
            })
            .optional()?)
    }

    /// Whether the current window was compacted.
    fn compacted(&self) -> bool {
        self.compaction_seq > self.window_start
    }

    /// Rows after this `seq` are visible: to the model, from the latest compaction's kept
    /// rows on; for display, the whole window.
    fn after(&self, for_model: bool) -> i64 {
        if for_model && self.compacted() {
            self.window_start.max(self.kept_from - 1)
        } else {
            self.window_start
        }
    }
}

/// The window's message rows (after the last `reset` boundary), newest first. The model's
/// view (`for_model`) starts at the latest compaction instead: its summary, then the rows it
/// kept verbatim and everything after.
fn window(
    conn: &Connection,
    b: &Bounds,
    limit: usize,
    skip_newest: u64,
    for_model: bool,
) -> Result<Window, StoreError> {
    let summary = if for_model && b.compacted() {
        conn.prepare_cached("SELECT text FROM transcript WHERE session_id = ?1 AND seq = ?2")?
            .query_row(params![b.session_id, b.compaction_seq], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten()
    } else {
        None
    };
    let mut stmt = conn.prepare_cached(
        "SELECT seq, role, text, entry_json, run_id FROM transcript
         WHERE session_id = ?1 AND seq > ?2 AND role NOT IN ('reset', 'compaction')
         ORDER BY seq DESC LIMIT ?3 OFFSET ?4",
    )?;
    let rows = stmt.query_map(
        params![
            b.session_id,
            b.after(for_model),
            limit as i64,
            skip_newest as i64
        ],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    let mut out = Vec::with_capacity(limit.min(256));
    for row in rows {
        out.push(row?);
    }
    Ok(Window { summary, rows: out })
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

/// Most bytes of transcript rows one `chat.history` answer carries (well under the control
/// link's 16 MiB frame cap); older messages past it are left out.
pub const MAX_DISPLAY_BYTES: usize = 8 * 1024 * 1024;

/// What an omitted message costs of a page's byte cap (its place and size).
const OMITTED_COST: usize = 256;

/// Whether history shows a stored message: not an assistant message with no visible text
/// and no tool calls, nor one that is only the silent `NO_REPLY`.
pub fn visible(role: &str, message: &Value) -> bool {
    if role == "assistant" && tool_calls_of(message).is_empty() {
        // A failed run's notice shows even without text.
        if message.get("errorMessage").is_some_and(|e| e.is_string()) {
            return true;
        }
        let text = text_of(message);
        return !(text.trim().is_empty() || text.trim() == "NO_REPLY");
    }
    true
}

/// A recorded message as the control link carries it, if history shows it.
pub fn stored_message(
    role: &str,
    message: &Value,
    entry_id: &str,
    seq: i64,
    run_id: Option<&str>,
) -> Option<StoredMessage> {
    visible(role, message).then(|| StoredMessage {
        entry_id: entry_id.to_owned(),
        seq,
        role: role.to_owned(),
        run_id: run_id.map(str::to_owned),
        message_json: message.to_string(),
        omitted_bytes: None,
    })
}

fn display(
    conn: &Connection,
    session_key: &str,
    limit: usize,
    offset: u64,
    max_bytes: usize,
    input_run_ids: &[String],
) -> Result<DisplayHistory, StoreError> {
    let Some(b) = Bounds::read(conn, session_key)? else {
        return Ok(DisplayHistory {
            session_id: None,
            messages: Vec::new(),
            next_offset: None,
            consumed: Vec::new(),
        });
    };
    let mut consumed = Vec::new();
    let mut find = conn.prepare_cached(
        "SELECT entry_id FROM transcript
         WHERE run_id = ?1 AND role = 'user' AND session_id = ?2 LIMIT 1",
    )?;
    let mut alias = conn
        .prepare_cached("SELECT entry_id FROM input_alias WHERE run_id = ?1 AND session_id = ?2")?;
    for run_id in input_run_ids.iter().take(MAX_INPUT_RUN_IDS) {
        let own = find
            .query_row(params![run_id, b.session_id], |r| r.get::<_, String>(0))
            .optional()?;
        // A collected or summarized message: recorded within its carrier's.
        let found = match own {
            Some(e) => Some(e),
            None => alias
                .query_row(params![run_id, b.session_id], |r| r.get::<_, String>(0))
                .optional()?,
        };
        if let Some(entry_id) = found {
            consumed.push(InputConsumed {
                run_id: run_id.clone(),
                entry_id,
            });
        }
    }
    let session_id = Some(b.session_id.clone());
    // One row more than asked tells whether older ones exist.
    let Window { mut rows, .. } = window(conn, &b, limit + 1, offset, false)?;
    let mut truncated = rows.len() > limit;
    rows.truncate(limit);
    // Newest first: the answer keeps the newest messages that fit the byte cap (it must
    // cross the control link, whose frames are capped), as OpenClaw's history has one. A
    // message larger than the whole cap is given as its place only (a client shows it as
    // omitted), so one huge reply does not hide everything after it.
    let cap = max_bytes.min(MAX_DISPLAY_BYTES);
    let mut budget = cap;
    let total = rows.len();
    let fitting: Vec<(Row, bool)> = rows
        .into_iter()
        .map_while(|row| {
            let size = row.3.len();
            let omit = size > cap;
            let cost = if omit { OMITTED_COST } else { size };
            if cost > budget {
                return None;
            }
            budget -= cost;
            Some((row, omit))
        })
        .collect();
    truncated |= fitting.len() < total;
    // A single row larger than the byte cap is passed over, so paging always moves on.
    let read = (fitting.len() as u64).max(u64::from(total > 0));
    let mut messages: Vec<StoredMessage> = fitting
        .into_iter()
        .filter_map(|((seq, role, _, json, run_id), omit)| {
            let entry = parse_entry(&json).ok()?;
            let message = entry.get("message")?;
            let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
            let mut m = stored_message(&role, message, id, seq, run_id.as_deref())?;
            if omit {
                m.message_json = "{}".into();
                m.omitted_bytes = Some(json.len() as u64);
            }
            Some(m)
        })
        .collect();
    messages.reverse();
    Ok(DisplayHistory {
        session_id,
        messages,
        next_offset: truncated.then_some(offset.saturating_add(read)),
        consumed,
    })
}

#[cfg(test)]
impl Reader {
    /// A reader whose thread never answers (tests: a slow reader); the returned guard keeps
    /// its queue open.
    pub fn never_answering() -> (Reader, Box<dyn std::any::Any>) {
        let (tx, rx) = dbwriter::channel::<Cmd>(QUEUE);
        (Reader { tx }, Box::new(rx))
    }
}

#[cfg(test)]
mod tests;
