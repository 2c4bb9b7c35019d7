//! The scheduler's jobs and their run history (`cron_jobs`, `cron_runs`). A job is kept as
//! its JSON (`CronJob`, the shape clients see) with the columns the scheduler looks by; a
//! run's entry is kept once per run id, so recording it again after a crash changes nothing.

use ipc::gateway::{CronJob, CronRunEntry};
use rusqlite::{params, Connection};
use tokio::sync::oneshot;

use super::DbError;

/// Schema v14.
pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS cron_jobs(
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        job_json TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE IF NOT EXISTS cron_runs(
        seq INTEGER PRIMARY KEY,
        job_id TEXT NOT NULL,
        run_id TEXT,
        ts INTEGER NOT NULL,
        entry_json TEXT NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS cron_runs_job ON cron_runs(job_id, ts);
    CREATE UNIQUE INDEX IF NOT EXISTS cron_runs_once ON cron_runs(run_id) WHERE run_id IS NOT NULL;";

/// Most history entries kept per job (the oldest go first).
pub const MAX_RUNS_PER_JOB: i64 = 500;

/// A write of the scheduler's.
pub enum CronCmd {
    Put(Box<CronJob>, oneshot::Sender<Result<(), DbError>>),
    Remove(String, oneshot::Sender<Result<bool, DbError>>),
    /// Records a run's entry; `false` if its run id was recorded before.
    Record(Box<CronRunEntry>, oneshot::Sender<Result<bool, DbError>>),
    /// Forgets the history of removed jobs older than the moment (ms); how many entries.
    PruneRemoved(u64, oneshot::Sender<Result<usize, DbError>>),
}

pub(super) fn apply(conn: &Connection, cmd: CronCmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    use super::answer;
    match cmd {
        CronCmd::Put(job, tx) => answer(tx, sp.run(conn, |c| put(c, &job))),
        CronCmd::Remove(id, tx) => answer(tx, sp.run(conn, |c| remove(c, &id))),
        CronCmd::Record(entry, tx) => answer(tx, sp.run(conn, |c| record(c, &entry))),
        CronCmd::PruneRemoved(before, tx) => answer(tx, sp.run(conn, |c| prune_removed(c, before))),
    }
}

pub(super) fn prune_removed(conn: &Connection, before: u64) -> Result<usize, DbError> {
    let n = conn
        .prepare_cached(
            "DELETE FROM cron_runs WHERE ts < ?1 AND job_id NOT IN (SELECT id FROM cron_jobs)",
        )?
        .execute(params![before as i64])?;
    Ok(n)
}

fn put(conn: &Connection, job: &CronJob) -> Result<(), DbError> {
    let json = serde_json::to_string(job).map_err(|e| DbError::Commit(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO cron_jobs(id, agent_id, job_json, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(id) DO UPDATE SET agent_id = ?2, job_json = ?3, updated_at = ?4",
    )?
    .execute(params![
        job.id,
        job.agent_id,
        json,
        job.updated_at_ms as i64
    ])?;
    Ok(())
}

fn remove(conn: &Connection, id: &str) -> Result<bool, DbError> {
    let n = conn
        .prepare_cached("DELETE FROM cron_jobs WHERE id = ?1")?
        .execute(params![id])?;
    Ok(n > 0)
}

pub(super) fn record(conn: &Connection, e: &CronRunEntry) -> Result<bool, DbError> {
    let json = serde_json::to_string(e).map_err(|e| DbError::Commit(e.to_string()))?;
    let n = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO cron_runs(job_id, run_id, ts, entry_json) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![e.job_id, e.run_id, e.ts as i64, json])?;
    conn.prepare_cached(
        "DELETE FROM cron_runs WHERE job_id = ?1 AND seq NOT IN
         (SELECT seq FROM cron_runs WHERE job_id = ?1 ORDER BY ts DESC, seq DESC LIMIT ?2)",
    )?
    .execute(params![e.job_id, MAX_RUNS_PER_JOB])?;
    Ok(n > 0)
}

/// Isolated cron runs' sessions last updated before `before` (ms), oldest first: `(key,
/// agent id)`.
pub(super) fn expired_run_sessions(
    conn: &Connection,
    before: u64,
    limit: u32,
) -> Result<Vec<(String, String)>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_key, agent_id FROM sessions
         WHERE session_key GLOB 'agent:*:cron:*:run:*' AND updated_at < ?1
         ORDER BY updated_at LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![before as i64, limit], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    rows.collect::<Result<Vec<_>, _>>().map_err(DbError::from)
}

/// Every job (a row that no longer parses is skipped, and logged).
pub(super) fn jobs(conn: &Connection) -> Result<Vec<CronJob>, DbError> {
    let mut stmt = conn.prepare_cached("SELECT id, job_json FROM cron_jobs ORDER BY id")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for row in rows {
        let (id, json) = row?;
        match serde_json::from_str(&json) {
            Ok(job) => out.push(job),
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "A stored cron job does not parse; it is skipped.")
            }
        }
    }
    Ok(out)
}

/// A page of a job's runs (`None`: every job's), newest first (`run_id`: only that run),
/// and how many there are.
pub(super) fn runs(
    conn: &Connection,
    job_id: Option<&str>,
    run_id: Option<&str>,
    limit: u32,
    offset: u32,
) -> Result<(Vec<CronRunEntry>, u64), DbError> {
    let total: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM cron_runs WHERE (?1 IS NULL OR job_id = ?1) AND (?2 IS NULL OR run_id = ?2)",
        )?
        .query_row(params![job_id, run_id], |r| r.get(0))?;
    let mut stmt = conn.prepare_cached(
        "SELECT entry_json FROM cron_runs WHERE (?1 IS NULL OR job_id = ?1) AND (?2 IS NULL OR run_id = ?2)
         ORDER BY ts DESC, seq DESC LIMIT ?3 OFFSET ?4",
    )?;
    let rows = stmt.query_map(params![job_id, run_id, limit, offset], |r| {
        r.get::<_, String>(0)
    })?;
    let mut out = Vec::new();
    for json in rows {
        if let Ok(e) = serde_json::from_str(&json?) {
            out.push(e);
        }
    }
    Ok((out, u64::try_from(total).unwrap_or(0)))
}
