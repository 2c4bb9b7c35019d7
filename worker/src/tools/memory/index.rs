//! The agent's memory index: its memory files' chunks in an SQLite FTS5 table, in
//! `memory.sqlite` beside the agent's database. Derived data only: it is never journaled
//! (cluster mode), never counted in the transcript budget, and deleting it loses nothing.
//!
//! Before every search the index is brought up to date with the files (each one's size and
//! modification time against what was indexed; a file modified within [`RACY_NS`] of its
//! indexing is read again, as git treats racily clean files), so a line `write`, `edit`,
//! `apply_patch` or an `exec` command added a moment before is found.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use rusqlite::{params, Connection};

use super::chunk::chunks;
use super::paths::{memory_files, FileStamp};

/// A file modified this close to when it was indexed may have changed again unseen.
const RACY_NS: i64 = 2_000_000_000;
/// Most bytes of one file indexed.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Most words of a query used.
const MAX_QUERY_WORDS: usize = 32;

/// One chunk that matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
    /// The match's own strength, 0..1 (bm25, squashed).
    pub text_score: f64,
    /// Relative to the best hit of the search (1 for it).
    pub score: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("memory index: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("memory index: {0}")]
    Io(#[from] std::io::Error),
}

/// The index of one agent, opened on its first search.
pub struct MemoryIndex {
    path: PathBuf,
    conn: Mutex<Option<Connection>>,
}

impl MemoryIndex {
    /// The index kept in `path` (not opened yet).
    pub fn new(path: PathBuf) -> MemoryIndex {
        MemoryIndex {
            path,
            conn: Mutex::new(None),
        }
    }

    /// The chunks of `workspace`'s memory files that match `query`, best first. Blocking.
    pub fn search(
        &self,
        workspace: &Path,
        query: &str,
        max: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let Some(expr) = match_expression(query) else {
            return Ok(Vec::new());
        };
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(open(&self.path)?);
        }
        let Some(conn) = guard.as_mut() else {
            return Ok(Vec::new());
        };
        refresh(conn, workspace)?;
        let mut stmt = conn.prepare_cached(
            "SELECT path, start_line, end_line, text, bm25(memory_chunks) FROM memory_chunks \
             WHERE memory_chunks MATCH ?1 ORDER BY bm25(memory_chunks) LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![expr, i64::try_from(max).unwrap_or(50)], |r| {
            let rank: f64 = r.get(4)?;
            let strength = (-rank).max(0.0);
            Ok(Hit {
                path: r.get(0)?,
                start_line: usize::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                end_line: usize::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                text: r.get(3)?,
                text_score: strength / (1.0 + strength),
                score: 0.0,
            })
        })?;
        let mut hits = rows.collect::<Result<Vec<_>, _>>()?;
        let best = hits.iter().map(|h| h.text_score).fold(0.0, f64::max);
        for h in &mut hits {
            h.score = if best > 0.0 { h.text_score / best } else { 0.0 };
        }
        Ok(hits)
    }
}

fn open(path: &Path) -> Result<Connection, IndexError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         CREATE TABLE IF NOT EXISTS memory_files(
             path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
             indexed_ns INTEGER NOT NULL);
         CREATE VIRTUAL TABLE IF NOT EXISTS memory_chunks USING fts5(
             text, path UNINDEXED, start_line UNINDEXED, end_line UNINDEXED,
             tokenize = 'unicode61 remove_diacritics 2');",
    )?;
    Ok(conn)
}

/// The query as an FTS5 expression: each word a quoted phrase, any of them matching
/// (`None`: no word). The model's text never reaches FTS5's syntax.
pub fn match_expression(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .take(MAX_QUERY_WORDS)
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Reindexes every memory file that changed (or may have) since it was indexed, and drops
/// the ones that are gone, in one transaction.
fn refresh(conn: &mut Connection, workspace: &Path) -> Result<(), IndexError> {
    let files = memory_files(workspace);
    let tx = conn.transaction()?;
    let known: HashMap<String, (i64, i64, i64)> = {
        let mut stmt =
            tx.prepare_cached("SELECT path, mtime_ns, size, indexed_ns FROM memory_files")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))?;
        rows.collect::<Result<_, _>>()?
    };
    let now = now_ns();
    for f in &files {
        // Racily clean: modified so close before it was indexed that a change in the same
        // clock tick would not show. A time in the future is not racy: a write sets a new one.
        let fresh = known.get(&f.rel).is_some_and(|&(mtime, size, indexed)| {
            mtime == f.mtime_ns && size == f.size && (mtime > indexed || indexed - mtime > RACY_NS)
        });
        if !fresh {
            index_file(&tx, f, now)?;
        }
    }
    for gone in known.keys().filter(|k| !files.iter().any(|f| &f.rel == *k)) {
        tx.execute("DELETE FROM memory_chunks WHERE path = ?1", [gone])?;
        tx.execute("DELETE FROM memory_files WHERE path = ?1", [gone])?;
    }
    tx.commit()?;
    Ok(())
}

fn index_file(tx: &rusqlite::Transaction<'_>, f: &FileStamp, now: i64) -> Result<(), IndexError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let mut bytes = Vec::new();
    // Only the very file the walk saw, never through a link put in its place or a FIFO
    // (which would block the index for good); one that changed since is indexed empty and
    // read again by the next search.
    if let Ok((file, meta)) = crate::tools::fs::open_plain(&f.abs) {
        if meta.dev() == f.dev && meta.ino() == f.ino {
            let _ = file.take(MAX_FILE_BYTES).read_to_end(&mut bytes);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    tx.execute("DELETE FROM memory_chunks WHERE path = ?1", [&f.rel])?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO memory_chunks(text, path, start_line, end_line) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for c in chunks(&text) {
        insert.execute(params![
            c.text,
            f.rel,
            i64::try_from(c.start_line).unwrap_or(i64::MAX),
            i64::try_from(c.end_line).unwrap_or(i64::MAX)
        ])?;
    }
    tx.execute(
        "INSERT INTO memory_files(path, mtime_ns, size, indexed_ns) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(path) DO UPDATE SET mtime_ns = ?2, size = ?3, indexed_ns = ?4",
        params![f.rel, f.mtime_ns, f.size, now],
    )?;
    Ok(())
}

/// Whether the index holds `rel` (for tests and status).
#[cfg(test)]
fn indexed(conn: &Connection, rel: &str) -> bool {
    use rusqlite::OptionalExtension;
    conn.query_row("SELECT 1 FROM memory_files WHERE path = ?1", [rel], |_| {
        Ok(())
    })
    .optional()
    .ok()
    .flatten()
    .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_quoted_words_never_fts_syntax() {
        assert_eq!(
            match_expression("staging cluster").as_deref(),
            Some("\"staging\" OR \"cluster\"")
        );
        assert_eq!(
            match_expression("BLUEHERON-7").as_deref(),
            Some("\"BLUEHERON-7\"")
        );
        assert_eq!(
            match_expression("a\"b NEAR( c* :x").as_deref(),
            Some("\"a\"\"b\" OR \"NEAR\" OR \"c\" OR \"x\"")
        );
        assert_eq!(match_expression(" ** ( ) "), None);
    }

    #[test]
    fn a_line_written_a_moment_before_is_found_and_a_deleted_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("memory/deep")).unwrap();
        std::fs::write(
            ws.join("MEMORY.md"),
            "# Memory\n\n- Favourite fruit: kumquat.\n",
        )
        .unwrap();
        std::fs::write(ws.join("AGENTS.md"), "kumquat here is not memory\n").unwrap();
        let idx = MemoryIndex::new(dir.path().join("memory.sqlite"));
        let hits = idx.search(&ws, "kumquat", 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            (hits[0].path.as_str(), hits[0].start_line, hits[0].end_line),
            ("MEMORY.md", 1, 3)
        );
        assert_eq!(hits[0].score, 1.0);
        std::fs::write(
            ws.join("memory/deep/2026-12-01.md"),
            "Staging is BLUEHERON-7.\n",
        )
        .unwrap();
        let hits = idx.search(&ws, "blueheron-7 staging", 10).unwrap();
        assert_eq!(hits[0].path, "memory/deep/2026-12-01.md");
        // Same size, same second: still seen (the file is racily clean).
        std::fs::write(
            ws.join("memory/deep/2026-12-01.md"),
            "Staging is REDHERONS-7.\n",
        )
        .unwrap();
        assert!(idx.search(&ws, "blueheron", 10).unwrap().is_empty());
        assert_eq!(idx.search(&ws, "redherons", 10).unwrap().len(), 1);
        std::fs::remove_file(ws.join("MEMORY.md")).unwrap();
        assert!(idx.search(&ws, "kumquat", 10).unwrap().is_empty());
        let guard = idx.conn.lock().unwrap();
        assert!(!indexed(guard.as_ref().unwrap(), "MEMORY.md"));
    }
}
