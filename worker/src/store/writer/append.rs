//! Appending a message to a session's transcript: the entry as clients see it (OpenClaw's
//! message shape), the text column the model's view reads plain rows from, the attachments
//! kept once, and a command's marks (shown, or left out of the model's context).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;

use crate::store::{Appended, CommandRow, NewMessage, StoreError};

/// Where the session's next transcript entry goes: its `seq`, its parent entry and a new id.
pub(super) fn next_entry(
    c: &Connection,
    session_id: &str,
) -> Result<(i64, Option<String>, String), StoreError> {
    let last: Option<(i64, String)> = c
        .prepare_cached(
            "SELECT seq, entry_id FROM transcript WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![session_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (seq, parent) = match last {
        Some((s, id)) => (s + 1, Some(id)),
        None => (1, None),
    };
    Ok((seq, parent, uuid::Uuid::new_v4().to_string()))
}

/// Appends a message to the session's transcript: its entry (the message as clients see it),
/// the text column for a plain row, its attachments; returns where it went.
pub(super) fn append(
    c: &Connection,
    session_id: &str,
    run_id: Option<&str>,
    m: &NewMessage,
) -> Result<Appended, StoreError> {
    let (seq, parent, entry_id) = next_entry(c, session_id)?;
    let message = message(m);
    let display =
        crate::store::reader::stored_message(m.role.as_str(), &message, &entry_id, seq, run_id);
    let mut entry = json!({
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": m.created_at,
        "message": message,
    });
    // Left out of the model's view: said on the entry (clients see only its message).
    if m.command.is_some_and(|c| !c.in_context()) {
        if let Some(obj) = entry.as_object_mut() {
            obj.insert("modelContext".into(), json!(false));
        }
    }
    // A row with attachments keeps no text column: the model's view reads its entry (and
    // the attachments it names); so does a command's (its entry says whether the model sees
    // it, and `last_assistant` passes over a gateway's reply).
    let plain = m.tool_calls.is_empty()
        && m.tool_result.is_none()
        && m.media.is_empty()
        && m.command.is_none();
    c.prepare_cached("INSERT INTO transcript(session_id, seq, entry_id, parent_id, run_id, role, created_at, entry_json, text)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?.execute(params![session_id, seq, entry_id, parent, run_id, m.role.as_str(), m.created_at as i64, entry.to_string(),
            plain.then_some(&m.text)],
    )?;
    crate::store::media::keep(c, session_id, seq, &m.media, m.created_at)?;
    c.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE session_id = ?1")?
        .execute(params![session_id, m.created_at as i64])?;
    Ok(Appended {
        seq,
        entry_id,
        display,
    })
}

/// The message as clients see it (OpenClaw's shape): its content blocks, or a tool result's
/// text and call, and what is known of how it was made.
fn message(m: &NewMessage) -> serde_json::Value {
    let mut message = json!({
        "role": m.role.as_str(),
        "content": content(m),
        "timestamp": m.created_at,
    });
    if let Some((id, name, is_error)) = &m.tool_result {
        if let Some(obj) = message.as_object_mut() {
            obj.insert("content".into(), json!([{"type": "text", "text": m.text}]));
            obj.insert("toolCallId".into(), json!(id));
            obj.insert("toolName".into(), json!(name));
            obj.insert("isError".into(), json!(is_error));
        }
    }
    if let Some(obj) = message.as_object_mut() {
        add_details(obj, m);
    }
    message
}

/// The message's content blocks: its reasoning, its text (also when it has nothing else) and
/// its tool calls.
fn content(m: &NewMessage) -> Vec<serde_json::Value> {
    let mut content: Vec<serde_json::Value> = Vec::new();
    if let Some(r) = &m.reasoning {
        content.push(json!({"type": "thinking", "thinking": r}));
    }
    if !m.text.is_empty() || (m.tool_calls.is_empty() && m.tool_result.is_none()) {
        content.push(match m.command {
            Some(CommandRow::Reply { notice: true, .. }) => {
                json!({"type": "text", "text": m.text, "openclawStatusNotice": true})
            }
            _ => json!({"type": "text", "text": m.text}),
        });
    }
    for c in &m.tool_calls {
        let mut args: serde_json::Value =
            serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!(c.arguments));
        crate::tools::budget::bound_strings(&mut args);
        content.push(json!({"type": "toolCall", "id": c.id, "name": c.name, "arguments": args}));
    }
    content
}

/// What is known of how the message was made (provider, model, usage, stop reason, error,
/// diagnostics), its attachments, and a context-free command's marks.
fn add_details(obj: &mut serde_json::Map<String, serde_json::Value>, m: &NewMessage) {
    if let Some(p) = &m.provider {
        obj.insert("provider".into(), json!(p));
    }
    if let Some(model) = &m.model {
        obj.insert("model".into(), json!(model));
    }
    if let Some(u) = &m.usage {
        obj.insert(
            "usage".into(),
            json!({"input": u.input, "output": u.output, "cacheRead": u.cache_read,
                   "cacheWrite": u.cache_write, "totalTokens": u.total}),
        );
    }
    if let Some(s) = &m.stop_reason {
        obj.insert("stopReason".into(), json!(s));
    }
    if let Some(e) = &m.error {
        obj.insert("errorMessage".into(), json!(e));
    }
    if !m.diagnostics.is_empty() {
        obj.insert("diagnostics".into(), json!(m.diagnostics));
    }
    if !m.media.is_empty() {
        let refs: Vec<_> = m.media.iter().map(|a| a.stored()).collect();
        obj.insert("media".into(), json!(refs));
    }
    // A context-free command's rows say so, as OpenClaw's `/status` rows do.
    if m.command.is_some_and(CommandRow::context_free) {
        obj.insert("excludeFromContext".into(), json!(true));
        obj.insert("__openclaw".into(), json!({"contextFreeCommand": true}));
    }
}
