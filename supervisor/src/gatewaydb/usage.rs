//! Token usage rolled up as runs end, for `usage.cost` and `sessions.usage`: one row per
//! agent, UTC day and model (`usage_days`) and one per session, day and model
//! (`usage_session_days`). Both are added to in the transaction that records a run's
//! outcome, so an answer reads a few rows per day, never the runs themselves: a gateway with
//! a million recorded runs answers from a few thousand rows.
//!
//! A database from before the rollups gets them built once from the runs it still keeps
//! (`rebuild_if_needed`; older runs were pruned and their tokens are only in the sessions'
//! totals).

use rusqlite::{params, Connection, OptionalExtension};

use super::DbError;
use crate::outcome::StoredTerminal;

/// One UTC day, in milliseconds.
pub const DAY_MS: u64 = 86_400_000;
/// The most one run counts of tokens of a kind, and of milliseconds: more is a provider's
/// bad report, and sums of such could overflow SQLite's integers (a STRICT table then
/// refuses every later outcome of that row).
pub const MAX_PER_RUN: u64 = 1_000_000_000_000;
/// Sessions of the index that `sessions.usage` looks at, at most, past its `limit` (its
/// `sessionCount` is a lower bound past that: the walk stays short, however many sessions
/// the index holds and however few of them had usage in the range).
const MAX_COUNTED: usize = 10_000;

/// `v`, at most [`MAX_PER_RUN`], for SQLite.
pub(super) fn bounded(v: u64) -> i64 {
    v.min(MAX_PER_RUN) as i64
}

/// Schema v11: the rollups and the mark that they were built.
pub(super) const SCHEMA: &str = "
    CREATE TABLE usage_days(
        agent_id TEXT NOT NULL,
        day INTEGER NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        runs INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        tool_calls INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        input INTEGER NOT NULL,
        output INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        total INTEGER NOT NULL,
        min_ms INTEGER NOT NULL,
        max_ms INTEGER NOT NULL,
        PRIMARY KEY (agent_id, day, provider, model)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX usage_days_by_day ON usage_days(day);
    CREATE TABLE usage_session_days(
        session_key TEXT NOT NULL,
        day INTEGER NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        runs INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        tool_calls INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        input INTEGER NOT NULL,
        output INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        total INTEGER NOT NULL,
        min_ms INTEGER NOT NULL,
        max_ms INTEGER NOT NULL,
        first_at INTEGER NOT NULL,
        last_at INTEGER NOT NULL,
        PRIMARY KEY (session_key, day, provider, model)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE usage_rollup(built_at INTEGER NOT NULL) STRICT;";

/// What some runs spent: counts and tokens, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub runs: u64,
    pub errors: u64,
    pub tool_calls: u64,
    pub duration_ms: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
    /// The shortest and longest run (0 and 0 when `runs` is 0).
    pub min_ms: u64,
    pub max_ms: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.runs += o.runs;
        self.errors += o.errors;
        self.tool_calls += o.tool_calls;
        self.duration_ms += o.duration_ms;
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
        self.total += o.total;
        if o.runs > 0 {
            self.min_ms = if self.runs == o.runs {
                o.min_ms
            } else {
                self.min_ms.min(o.min_ms)
            };
            self.max_ms = self.max_ms.max(o.max_ms);
        }
    }

    /// Reads the eleven counters from columns `at..at + 11` in [`Counts`]' order.
    fn read(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Counts> {
        let n = |i: usize| r.get::<_, i64>(at + i).map(|v| v.max(0) as u64);
        Ok(Counts {
            runs: n(0)?,
            errors: n(1)?,
            tool_calls: n(2)?,
            duration_ms: n(3)?,
            input: n(4)?,
            output: n(5)?,
            cache_read: n(6)?,
            cache_write: n(7)?,
            total: n(8)?,
            min_ms: n(9)?,
            max_ms: n(10)?,
        })
    }
}

/// One agent's usage of one model on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayRow {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    pub agent_id: String,
    pub provider: String,
    pub model: String,
    pub counts: Counts,
}

/// One session's usage of one model on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDayRow {
    pub day: i64,
    pub provider: String,
    pub model: String,
    pub counts: Counts,
    /// When its first and last counted run of that day ended.
    pub first_at: u64,
    pub last_at: u64,
}

/// A session with usage in the asked range, and that usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionUsage {
    pub session_key: String,
    pub agent_id: String,
    /// From the session index (`None`: the session was deleted since).
    pub session_id: Option<String>,
    pub updated_at: Option<u64>,
    pub days: Vec<SessionDayRow>,
}

/// Which days and whose usage; days are counted from 1970-01-01, both ends included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub first_day: i64,
    pub last_day: i64,
    /// `None`: every agent.
    pub agent_id: Option<String>,
}

/// `sessions.usage`'s choice of sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsUsageQuery {
    pub range: UsageQuery,
    /// Exactly this session (then `range.agent_id` is ignored).
    pub key: Option<String>,
    /// At most this many sessions, the most recently updated first.
    pub limit: u32,
    /// And at most this many of their day rows in all: a session that would pass it is only
    /// counted (each row becomes a few hundred bytes of the answer, whose frame is bounded).
    pub max_day_rows: usize,
}

/// Adds a finished run's spend to both rollups, in the transaction that records its outcome;
/// `run` is its `(agent, session)`.
pub(super) fn record(
    conn: &Connection,
    (agent_id, session_key): (&str, &str),
    t: &StoredTerminal,
) -> Result<(), DbError> {
    let Some(spend) = &t.spend else {
        return Ok(());
    };
    let (input, output, total) = t.usage.unwrap_or((0, 0, 0));
    let day = (t.ended_at / DAY_MS) as i64;
    let values = params![
        agent_id,
        day,
        spend.provider,
        spend.model,
        i64::from(spend.failed),
        i64::from(spend.tool_calls),
        bounded(spend.duration_ms),
        bounded(input),
        bounded(output),
        bounded(spend.cache_read),
        bounded(spend.cache_write),
        bounded(total),
        t.ended_at as i64,
        session_key,
    ];
    conn.prepare_cached(
        "INSERT INTO usage_days(agent_id, day, provider, model, runs, errors, tool_calls,
                duration_ms, input, output, cache_read, cache_write, total, min_ms, max_ms)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?7, ?7)
         ON CONFLICT(agent_id, day, provider, model) DO UPDATE SET
            runs = runs + 1, errors = errors + excluded.errors,
            tool_calls = tool_calls + excluded.tool_calls,
            duration_ms = duration_ms + excluded.duration_ms, input = input + excluded.input,
            output = output + excluded.output, cache_read = cache_read + excluded.cache_read,
            cache_write = cache_write + excluded.cache_write, total = total + excluded.total,
            min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)",
    )?
    .execute(&values[..12])?;
    conn.prepare_cached(
        "INSERT INTO usage_session_days(session_key, day, provider, model, agent_id, runs, errors,
                tool_calls, duration_ms, input, output, cache_read, cache_write, total,
                min_ms, max_ms, first_at, last_at)
         VALUES (?14, ?2, ?3, ?4, ?1, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?7, ?7, ?13, ?13)
         ON CONFLICT(session_key, day, provider, model) DO UPDATE SET
            runs = runs + 1, errors = errors + excluded.errors,
            tool_calls = tool_calls + excluded.tool_calls,
            duration_ms = duration_ms + excluded.duration_ms, input = input + excluded.input,
            output = output + excluded.output, cache_read = cache_read + excluded.cache_read,
            cache_write = cache_write + excluded.cache_write, total = total + excluded.total,
            min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms),
            first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at)",
    )?
    .execute(values)?;
    Ok(())
}

/// The columns a kept run's stored outcome gives a rebuilt rollup, from its final result
/// (`{"ok":true,"payload":<AgentResult>}`); a carried run's turn was its carrier's.
const FROM_RUNS: &str = "
    FROM (SELECT agent_id, session_key, ended_at, status,
                 max(ended_at - coalesce(started_at, ended_at), 0) AS duration_ms,
                 coalesce(json_extract(final_json, '$.payload.result.meta.agentMeta.provider'), '') AS provider,
                 coalesce(json_extract(final_json, '$.payload.result.meta.agentMeta.model'), '') AS model,
                 json_extract(final_json, '$.payload.result.meta.agentMeta.usage') AS u
          FROM runs
          WHERE status != 'accepted' AND started_at IS NOT NULL AND ended_at IS NOT NULL
            AND json_valid(final_json)
            AND json_extract(final_json, '$.payload.result.meta.carriedBy') IS NULL
            AND (json_extract(final_json, '$.payload.result.meta.agentMeta.provider') IS NOT NULL
                 OR json_extract(final_json, '$.payload.result.meta.agentMeta.usage') IS NOT NULL))";

/// The sums a rebuilt row gets, in [`Counts`]' order after `runs`.
const SUMS: &str = "sum(status != 'ok'), 0, sum(min(duration_ms, 1000000000000)),
    sum(min(max(coalesce(json_extract(u, '$.input'), 0), 0), 1000000000000)),
    sum(min(max(coalesce(json_extract(u, '$.output'), 0), 0), 1000000000000)),
    sum(min(max(coalesce(json_extract(u, '$.cacheRead'), 0), 0), 1000000000000)),
    sum(min(max(coalesce(json_extract(u, '$.cacheWrite'), 0), 0), 1000000000000)),
    sum(min(max(coalesce(json_extract(u, '$.total'), 0), 0), 1000000000000)),
    min(min(duration_ms, 1000000000000)), max(min(duration_ms, 1000000000000))";

/// Builds the rollups from the kept runs if they were never built (a database from before
/// them); how many runs were counted. Tool calls are not in a stored outcome: rebuilt rows
/// count none.
pub(super) fn rebuild_if_needed(conn: &Connection, now_ms: u64) -> Result<Option<u64>, DbError> {
    let built: Option<i64> = conn
        .query_row("SELECT built_at FROM usage_rollup LIMIT 1", [], |r| {
            r.get(0)
        })
        .optional()?;
    if built.is_some() {
        return Ok(None);
    }
    let tx = conn.unchecked_transaction()?;
    tx.execute_batch("DELETE FROM usage_days; DELETE FROM usage_session_days;")?;
    tx.execute(
        &format!(
            "INSERT INTO usage_days(agent_id, day, provider, model, runs, errors, tool_calls,
                    duration_ms, input, output, cache_read, cache_write, total, min_ms, max_ms)
             SELECT agent_id, ended_at / {DAY_MS}, provider, model, count(*), {SUMS}
             {FROM_RUNS} GROUP BY 1, 2, 3, 4"
        ),
        [],
    )?;
    tx.execute(
        &format!(
            "INSERT INTO usage_session_days(session_key, day, provider, model, agent_id, runs,
                    errors, tool_calls, duration_ms, input, output, cache_read, cache_write,
                    total, min_ms, max_ms, first_at, last_at)
             SELECT session_key, ended_at / {DAY_MS}, provider, model, min(agent_id), count(*),
                    {SUMS}, min(ended_at), max(ended_at)
             {FROM_RUNS} GROUP BY 1, 2, 3, 4"
        ),
        [],
    )?;
    let counted: i64 = tx.query_row("SELECT coalesce(sum(runs), 0) FROM usage_days", [], |r| {
        r.get(0)
    })?;
    tx.execute(
        "INSERT INTO usage_rollup(built_at) VALUES (?1)",
        params![now_ms as i64],
    )?;
    tx.commit()?;
    Ok(Some(counted.max(0) as u64))
}

/// The rows of `q`'s days (and agent), oldest first.
pub(super) fn days(conn: &Connection, q: &UsageQuery) -> Result<Vec<DayRow>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT day, agent_id, provider, model, runs, errors, tool_calls, duration_ms, input,
                output, cache_read, cache_write, total, min_ms, max_ms
         FROM usage_days WHERE day BETWEEN ?1 AND ?2 AND (?3 IS NULL OR agent_id = ?3)
         ORDER BY day, agent_id, provider, model",
    )?;
    let rows = stmt
        .query_map(params![q.first_day, q.last_day, q.agent_id], |r| {
            Ok(DayRow {
                day: r.get(0)?,
                agent_id: r.get(1)?,
                provider: r.get(2)?,
                model: r.get(3)?,
                counts: Counts::read(r, 4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Sessions with usage in some days: the first `limit` of them, and how many there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionsUsage {
    pub sessions: Vec<SessionUsage>,
    pub count: u64,
}

/// The sessions of `q` with usage in its days, the most recently updated first, at most
/// `q.limit` of them, and how many there are. Walks the session index newest first and reads
/// each session's rows by its key, so the cost is the sessions looked at, not the runs they
/// had.
pub(super) fn sessions(
    conn: &Connection,
    q: &SessionsUsageQuery,
) -> Result<SessionsUsage, DbError> {
    let mut found = Vec::new();
    if let Some(key) = &q.key {
        let meta = conn
            .prepare_cached(
                "SELECT agent_id, session_id, updated_at FROM sessions WHERE session_key = ?1",
            )?
            .query_row(params![key], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .optional()?;
        let days = session_days(conn, key, &q.range)?;
        if let Some(first) = days.first() {
            let agent_id = match &meta {
                Some((agent, ..)) => agent.clone(),
                None => session_agent(conn, key, first.day)?,
            };
            found.push(SessionUsage {
                session_key: key.clone(),
                agent_id,
                session_id: meta.as_ref().and_then(|m| m.1.clone()),
                updated_at: meta.map(|m| m.2.max(0) as u64),
                days,
            });
        }
        let count = found.len() as u64;
        return Ok(SessionsUsage {
            sessions: found,
            count,
        });
    }
    let since = q.range.first_day.max(0).saturating_mul(DAY_MS as i64);
    let mut stmt = conn.prepare_cached(
        "SELECT session_key, agent_id, session_id, updated_at FROM sessions
         WHERE updated_at >= ?1 AND (?2 IS NULL OR agent_id = ?2)
         ORDER BY updated_at DESC, session_key",
    )?;
    let mut any = conn.prepare_cached(
        "SELECT 1 FROM usage_session_days WHERE session_key = ?1 AND day BETWEEN ?2 AND ?3 LIMIT 1",
    )?;
    let mut count = 0u64;
    let mut day_rows = 0usize;
    let mut full = false;
    let mut looked_at = 0usize;
    let mut rows = stmt.query(params![since, q.range.agent_id])?;
    while let Some(r) = rows.next()? {
        looked_at += 1;
        if looked_at > q.limit as usize + MAX_COUNTED {
            break;
        }
        let key: String = r.get(0)?;
        if full || found.len() >= q.limit as usize {
            // Past the page: only counted.
            if any.exists(params![key, q.range.first_day, q.range.last_day])? {
                count += 1;
            }
            continue;
        }
        let days = session_days(conn, &key, &q.range)?;
        if days.is_empty() {
            continue;
        }
        count += 1;
        day_rows += days.len();
        if day_rows > q.max_day_rows && !found.is_empty() {
            full = true;
            continue;
        }
        found.push(SessionUsage {
            session_key: key,
            agent_id: r.get(1)?,
            session_id: r.get(2)?,
            updated_at: Some(r.get::<_, i64>(3)?.max(0) as u64),
            days,
        });
    }
    Ok(SessionsUsage {
        sessions: found,
        count,
    })
}

fn session_days(
    conn: &Connection,
    key: &str,
    range: &UsageQuery,
) -> Result<Vec<SessionDayRow>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT day, provider, model, runs, errors, tool_calls, duration_ms, input, output,
                cache_read, cache_write, total, min_ms, max_ms, first_at, last_at
         FROM usage_session_days WHERE session_key = ?1 AND day BETWEEN ?2 AND ?3
         ORDER BY day, provider, model",
    )?;
    let rows = stmt
        .query_map(params![key, range.first_day, range.last_day], |r| {
            Ok(SessionDayRow {
                day: r.get(0)?,
                provider: r.get(1)?,
                model: r.get(2)?,
                counts: Counts::read(r, 3)?,
                first_at: r.get::<_, i64>(14)?.max(0) as u64,
                last_at: r.get::<_, i64>(15)?.max(0) as u64,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The agent of a session no longer in the index, from its usage rows.
fn session_agent(conn: &Connection, key: &str, day: i64) -> Result<String, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT agent_id FROM usage_session_days WHERE session_key = ?1 AND day = ?2 LIMIT 1",
        )?
        .query_row(params![key, day], |r| r.get(0))?)
}
