//! The model's view of recently used sessions, kept by the reader thread so that a turn
//! reads and converts only the rows written since the last one (R-J6), and shares the rest.
//!
//! The transcript is append-only and every row gets a higher `seq`; a reset, a compaction or
//! a new session id changes the session row, and any such change (or a different `limit`)
//! drops the entry and reads the window in full. Each entry holds the converted messages in
//! an `Arc` that every request built from it shares: appending copies the list only if a
//! request from an earlier read is still alive (a turn's ends before the next turn reads).

use std::collections::HashMap;
use std::sync::Arc;

use ipc::control::StoredMedia;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::{parse_entry, text_of, tool_calls_of, window, Bounds, Window};
use crate::llm::media::Media;
use crate::llm::messages::{Conversion, Row, SUMMARY_ROLE};
use crate::llm::{ChatMessage, History};
use crate::store::StoreError;

/// Most bytes the history cache holds (all sessions).
pub(super) const CACHE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Most sessions the history cache holds.
pub(super) const CACHE_MAX_SESSIONS: usize = 64;

#[derive(Default)]
pub(super) struct HistoryCache {
    pub(super) entries: HashMap<String, Cached>,
    pub(super) bytes: usize,
    pub(super) clock: u64,
}

pub(super) struct Cached {
    /// The session row when it was read.
    pub(super) key: Bounds,
    pub(super) limit: usize,
    /// Rows up to this `seq` are converted.
    pub(super) last_seq: i64,
    pub(super) history: History,
    pub(super) conversion: Conversion,
    pub(super) bytes: usize,
    pub(super) used: u64,
}

/// What a message holds: its text twice (the text and, once a request used it, its JSON
/// literal, `Text::json`), its tool calls and room for the rest.
pub(super) fn message_bytes(m: &ChatMessage) -> usize {
    2 * m.content.len()
        + m.images.as_ref().map_or(0, |i| {
            2 * i.text_only.len() + i.images.iter().map(|x| x.data.len()).sum::<usize>()
        })
        + m.tool_calls
            .iter()
            .map(|c| c.arguments.len() + c.name.len() + c.id.len())
            .sum::<usize>()
        + 128
}

impl HistoryCache {
    /// The last `limit` rows of the session's current window, as the model sees them.
    pub(super) fn history(
        &mut self,
        conn: &Connection,
        session_key: &str,
        limit: usize,
    ) -> Result<History, StoreError> {
        let Some(key) = Bounds::read(conn, session_key)? else {
            self.forget(session_key);
            return Ok(History::default());
        };
        self.clock += 1;
        let fresh = self
            .entries
            .get(session_key)
            .is_some_and(|c| c.key == key && c.limit == limit);
        if fresh {
            self.append(conn, session_key)?;
        }
        // Past the limit the window slides; reading it again is rarer than the limit is
        // large (`prompt::HISTORY_LIMIT`), and keeps the conversion's rule at the window's
        // start in one place.
        let slid = self
            .entries
            .get(session_key)
            .is_some_and(|c| c.history.rows > limit);
        if !fresh || slid {
            self.forget(session_key);
            let cached = read_full(conn, key, limit, self.clock)?;
            self.bytes += cached.bytes;
            self.entries.insert(session_key.to_owned(), cached);
        }
        let out = match self.entries.get_mut(session_key) {
            Some(c) => {
                c.used = self.clock;
                c.history.clone()
            }
            None => History::default(),
        };
        self.evict(session_key);
        Ok(out)
    }

    /// Converts the rows written since the entry's last read onto its list.
    fn append(&mut self, conn: &Connection, session_key: &str) -> Result<(), StoreError> {
        let Some(c) = self.entries.get_mut(session_key) else {
            return Ok(());
        };
        let mut stmt = conn.prepare_cached(
            "SELECT seq, role, text, entry_json FROM transcript
             WHERE session_id = ?1 AND seq > ?2 AND role NOT IN ('reset', 'compaction')
             ORDER BY seq",
        )?;
        let rows = stmt.query_map(
            params![c.key.session_id, c.last_seq.max(c.key.after(true))],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, String>(3)?,
                ))
            },
        )?;
        let mut added = 0;
        for row in rows {
            let (seq, role, text, json) = row?;
            let row = history_row(conn, seq, role, text, &json)?;
            c.last_seq = seq;
            c.history.rows += 1;
            let Some(row) = row else {
                continue;
            };
            let messages = Arc::make_mut(&mut c.history.messages);
            let before = messages.len();
            c.conversion.push(messages, row);
            added += messages
                .get(before..)
                .map_or(0, |m| m.iter().map(message_bytes).sum::<usize>());
        }
        c.bytes += added;
        self.bytes += added;
        Ok(())
    }

    fn forget(&mut self, session_key: &str) {
        if let Some(c) = self.entries.remove(session_key) {
            self.bytes -= c.bytes;
        }
    }

    /// Drops the least recently used sessions (never `keep`) while over the caps; a session
    /// over the byte cap on its own is not kept at all.
    pub(super) fn evict(&mut self, keep: &str) {
        while self.bytes > CACHE_MAX_BYTES || self.entries.len() > CACHE_MAX_SESSIONS {
            let victim = self
                .entries
                .iter()
                .filter(|(k, _)| k.as_str() != keep)
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => self.forget(&k),
                None => {
                    self.forget(keep);
                    break;
                }
            }
        }
    }
}

/// The session's window read and converted in full.
fn read_full(
    conn: &Connection,
    key: Bounds,
    limit: usize,
    used: u64,
) -> Result<Cached, StoreError> {
    let Window { summary, rows } = window(conn, &key, limit, 0, true)?;
    let last_seq = rows.first().map_or(0, |r| r.0);
    let mut conversion = Conversion::default();
    let mut messages = Vec::with_capacity(rows.len() + 1);
    if let Some(text) = summary {
        conversion.push(
            &mut messages,
            Row {
                role: SUMMARY_ROLE.into(),
                text: text.into(),
                tool_calls: Vec::new(),
                tool_call_id: None,
                seq: None,
                media: Vec::new(),
            },
        );
    }
    let count = rows.len();
    for (seq, role, text, json, _) in rows.into_iter().rev() {
        if let Some(row) = history_row(conn, seq, role, text, &json)? {
            conversion.push(&mut messages, row);
        }
    }
    let bytes = messages.iter().map(message_bytes).sum();
    Ok(Cached {
        key,
        limit,
        last_seq,
        history: History {
            messages: Arc::new(messages),
            rows: count,
        },
        conversion,
        bytes,
        used,
    })
}

/// One transcript row as the model sees it; `None` for one it does not see (a slash
/// command's reply, or a context-free command).
fn history_row(
    conn: &Connection,
    seq: i64,
    role: String,
    text: Option<String>,
    json: &str,
) -> Result<Option<Row>, StoreError> {
    // Plain text rows carry their text in a column; tool-bearing rows, attachments,
    // commands (and rows written before schema v2) are read from the entry.
    Ok(Some(match text {
        Some(text) => Row {
            role: role.into(),
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            seq: Some(seq),
            media: Vec::new(),
        },
        None => {
            let entry = parse_entry(json)?;
            if entry.get("modelContext") == Some(&Value::Bool(false)) {
                return Ok(None);
            }
            let message = entry.get("message").cloned().unwrap_or(Value::Null);
            Row {
                role: role.into(),
                text: text_of(&message).into(),
                tool_calls: tool_calls_of(&message),
                tool_call_id: message
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                seq: Some(seq),
                media: media_of(conn, &message)?,
            }
        }
    }))
}

/// The attachments a stored message names, with their bytes (one the database no longer
/// holds is left out: the message's text still names it).
fn media_of(conn: &Connection, message: &Value) -> Result<Vec<Media>, StoreError> {
    let Some(refs) = message.get("media") else {
        return Ok(Vec::new());
    };
    let refs: Vec<StoredMedia> = serde_json::from_value(refs.clone()).unwrap_or_default();
    let mut stmt = conn.prepare_cached("SELECT data FROM media WHERE digest = ?1")?;
    let mut out = Vec::with_capacity(refs.len());
    for stored in refs {
        let data: Option<String> = stmt
            .query_row(params![stored.digest], |r| r.get(0))
            .optional()?;
        match data {
            Some(data) => out.push(Media {
                stored,
                data: data.into(),
            }),
            None => tracing::warn!(
                digest = stored.digest.as_str(),
                "A transcript message names an attachment the database does not hold."
            ),
        }
    }
    Ok(out)
}
