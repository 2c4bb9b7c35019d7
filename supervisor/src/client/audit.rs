//! `loopgate audit`: reads the agents' audit ledgers (R-D6) straight from their databases,
//! read-only (SQLite WAL readers never block the worker's writer). Works whether or not the
//! gateway is running.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rusqlite::{params, Connection, OpenFlags};
use serde_json::{json, Value};

use ipc::text::printable;

use super::{emit, fail};
use crate::config::AgentId;

/// One ledger row, with its agent.
struct Row {
    agent: String,
    id: i64,
    ts: i64,
    time: String,
    run_id: String,
    session_key: String,
    kind: String,
    phase: String,
    tool_name: Option<String>,
    result: Option<String>,
    duration_ms: Option<i64>,
}

/// Why the ledger could not be read.
#[derive(Debug, thiserror::Error)]
enum AuditError {
    #[error("--agent: {0}")]
    Agent(#[from] crate::config::BadAgentId),
    #[error("agent {id:?} has no database at {} (has it ever run?)", db.display())]
    NoDatabase { id: String, db: PathBuf },
    #[error("cannot list {}: {why}", dir.display())]
    List { dir: PathBuf, why: std::io::Error },
    #[error("cannot open {}: {why}", db.display())]
    Open { db: PathBuf, why: rusqlite::Error },
    #[error("cannot read {}: {why}", db.display())]
    Read { db: PathBuf, why: rusqlite::Error },
}

/// The agent databases to read: one agent's, or every agent's under `<state>/agents`.
fn databases(state_dir: &Path, agent: Option<&str>) -> Result<Vec<(String, PathBuf)>, AuditError> {
    let agents_dir = state_dir.join("agents");
    if let Some(a) = agent {
        let id = AgentId::parse(a)?;
        let id = id.as_str().to_owned();
        let db = agents_dir.join(&id).join("agent.sqlite");
        if !db.exists() {
            return Err(AuditError::NoDatabase { id, db });
        }
        return Ok(vec![(id, db)]);
    }
    let entries = match std::fs::read_dir(&agents_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(why) => {
            return Err(AuditError::List {
                dir: agents_dir,
                why,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let db = entry.path().join("agent.sqlite");
        if db.exists() {
            out.push((entry.file_name().to_string_lossy().into_owned(), db));
        }
    }
    out.sort();
    Ok(out)
}

fn read(agent: &str, db: &Path, limit: usize) -> Result<Vec<Row>, AuditError> {
    let unreadable = |why| AuditError::Read {
        db: db.to_owned(),
        why,
    };
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|why| AuditError::Open {
        db: db.to_owned(),
        why,
    })?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'audit'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n > 0)
        .map_err(unreadable)?;
    if !has_table {
        // Written by a build from before the ledger: nothing recorded yet.
        return Ok(vec![]);
    }
    let mut stmt = conn
        .prepare(
            "SELECT id, ts, strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000.0, 'unixepoch'), run_id,
                    session_key, kind, phase, tool_name, result, duration_ms
             FROM audit ORDER BY id DESC LIMIT ?1",
        )
        .map_err(unreadable)?;
    let rows = stmt
        .query_map(params![limit as i64], |r| {
            Ok(Row {
                agent: agent.to_owned(),
                id: r.get(0)?,
                ts: r.get(1)?,
                time: r.get(2)?,
                run_id: r.get(3)?,
                session_key: r.get(4)?,
                kind: r.get(5)?,
                phase: r.get(6)?,
                tool_name: r.get(7)?,
                result: r.get(8)?,
                duration_ms: r.get(9)?,
            })
        })
        .map_err(unreadable)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(unreadable)
}

/// Prints the newest `limit` records (of one agent or all), oldest first.
pub fn audit(state_dir: &Path, agent: Option<String>, limit: usize, as_json: bool) -> ExitCode {
    let dbs = match databases(state_dir, agent.as_deref()) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let mut rows = Vec::new();
    for (agent, db) in &dbs {
        match read(agent, db, limit) {
            Ok(r) => rows.extend(r),
            Err(e) => return fail(e),
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse((r.ts, r.id)));
    rows.truncate(limit);
    rows.reverse();
    let mut out = String::new();
    for r in &rows {
        if as_json {
            let v: Value = json!({
                "agentId": r.agent, "ts": r.ts, "runId": r.run_id, "sessionKey": r.session_key,
                "kind": r.kind, "phase": r.phase, "tool": r.tool_name, "result": r.result,
                "durationMs": r.duration_ms,
            });
            out.push_str(&v.to_string());
        } else {
            let what = match &r.tool_name {
                Some(t) => format!("{} {} {t}", r.kind, r.phase),
                None => format!("{} {}", r.kind, r.phase),
            };
            out.push_str(&format!(
                "{}  {:<10} {:<28} {:<24} {:<7} {:>7}  {}",
                r.time,
                printable(&r.agent),
                printable(&what),
                printable(&r.session_key),
                printable(r.result.as_deref().unwrap_or("-")),
                r.duration_ms.map_or("-".into(), |d| format!("{d}ms")),
                printable(&r.run_id)
            ));
        }
        out.push('\n');
    }
    if rows.is_empty() && !as_json {
        eprintln!("loopgate: no audit records");
    }
    emit(&out);
    ExitCode::SUCCESS
}
