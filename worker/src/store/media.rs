//! Attachments in the agent database (schema v8): each content once in `media`, by its
//! SHA-256, and which transcript rows carry which in `transcript_media`. Written inside the
//! writer's transactions (see [`super::writer`]).

use rusqlite::{params, Connection};

use super::StoreError;

/// Records that transcript row `seq` of `session_id` carries `media`, in order, keeping each
/// content that is not there yet.
pub(super) fn keep(
    c: &Connection,
    session_id: &str,
    seq: i64,
    media: &[ipc::control::Attachment],
    created_at: u64,
) -> Result<(), StoreError> {
    for (position, a) in media.iter().enumerate() {
        c.prepare_cached(
            "INSERT OR IGNORE INTO media(digest, mime_type, size_bytes, data, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            a.digest,
            a.mime_type,
            a.size_bytes as i64,
            a.data,
            created_at as i64
        ])?;
        c.prepare_cached(
            "INSERT INTO transcript_media(session_id, seq, position, digest) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![session_id, seq, position as i64, a.digest])?;
    }
    Ok(())
}

/// Forgets what a deleted transcript carried: contents no other session refers to go too.
pub(super) fn forget_session(c: &Connection, session_id: &str) -> Result<(), StoreError> {
    c.prepare_cached("DELETE FROM transcript_media WHERE session_id = ?1")?
        .execute(params![session_id])?;
    c.prepare_cached(
        "DELETE FROM media WHERE NOT EXISTS
            (SELECT 1 FROM transcript_media t WHERE t.digest = media.digest)",
    )?
    .execute([])?;
    Ok(())
}
