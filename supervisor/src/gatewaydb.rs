//! The gateway database (`<state>/gateway.sqlite`): accepted runs, their terminal outcomes
//! (for idempotent replay across restarts, R-A3) and the session index.
//!
//! Architecture Invariant: the supervisor is this database's only writer, and it writes from
//! exactly one thread: the [`dbwriter`] thread started by [`GatewayDb::open`]. Commands arrive
//! over a bounded queue; the thread commits what is queued in one transaction, each command
//! in its own savepoint, then answers each on its `oneshot`. Nothing on the async runtime
//! touches SQLite.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use crate::outcome::StoredTerminal;

pub mod cron;
pub mod devices;
mod exec_allowlist;
mod sessions;
pub mod usage;

/// Reads beside the writer (the usage answers) at once; more wait their turn.
const READERS: usize = 2;

/// Terminal runs older than this are pruned (their replay is no longer available).
pub const RETENTION_MS: u64 = 7 * 24 * 3600 * 1000;
const QUEUE: usize = 4096;
const MAX_BATCH: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("gateway database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("gateway database is overloaded")]
    Overloaded,
    #[error("gateway database writer has stopped")]
    Closed,
    #[error("gateway database commit failed: {0}")]
    Commit(String),
    #[error("gateway database schema v{0} is newer than this build's v{SCHEMA_VERSION}: run the loopgate that wrote it, or a newer one")]
    TooNew(i64),
}

/// The schema version [`migrate`] brings a database to.
const SCHEMA_VERSION: i64 = dbwriter::top(LADDER);
/// `allow-always` exec patterns kept per agent at most.
pub const MAX_ALLOWED_PER_AGENT: i64 = 1000;

impl From<dbwriter::QueueError> for DbError {
    fn from(e: dbwriter::QueueError) -> Self {
        match e {
            dbwriter::QueueError::Full => DbError::Overloaded,
            dbwriter::QueueError::Gone => DbError::Closed,
        }
    }
}

/// A run as accepted.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    pub accepted_at: u64,
    /// Hex SHA-256 of what was asked (message and extra system prompt): a key reused for
    /// another request is refused instead of answered with the other request's reply.
    pub request_hash: String,
}

/// One row of the session index (`sessions.list`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub session_key: String,
    pub agent_id: String,
    pub session_id: Option<String>,
    pub created_at: u64,
    pub updated_at: u64,
    pub last_run_id: Option<String>,
    pub last_status: Option<String>,
    pub last_error: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub label: Option<String>,
    pub last_read_at: Option<u64>,
    /// The session's own model (`"<provider>/<model>"`, set with `sessions.patch`).
    pub model_override: Option<String>,
    /// The session's own thinking level and reasoning visibility (`sessions.patch`).
    pub thinking_level: Option<String>,
    pub reasoning_level: Option<String>,
    /// The session's own queue mode (`sessions.patch queueMode`).
    pub queue_mode: Option<String>,
    /// The session's own verbose level (`sessions.patch verboseLevel`, `/verbose`).
    pub verbose_level: Option<String>,
    /// The session's own usage footer mode and trace level (`/usage`, `/trace`).
    pub response_usage: Option<String>,
    pub trace_level: Option<String>,
    /// When the last run started and ended (while its outcome is kept).
    pub last_run_started_at: Option<u64>,
    pub last_run_ended_at: Option<u64>,
}

/// What `sessions.patch` changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct SessionPatch {
    /// `Some(None)` clears the label.
    pub label: Option<Option<String>>,
    /// `Some(None)` marks the session unread again.
    pub last_read_at: Option<Option<u64>>,
    /// `Some(None)` returns the session to its agent's model.
    pub model_override: Option<Option<String>>,
    /// `Some(None)` returns the session to its agent's defaults.
    pub thinking_level: Option<Option<String>>,
    pub reasoning_level: Option<Option<String>>,
    /// `Some(None)` returns the session to `messages.queue.mode`.
    pub queue_mode: Option<Option<String>>,
    /// `Some(None)` returns the session to its agent's `verbose_default`.
    pub verbose_level: Option<Option<String>>,
    /// `Some(None)`: no usage footer; no trace.
    pub response_usage: Option<Option<String>>,
    pub trace_level: Option<Option<String>>,
    /// `Some(None)` returns the session to `messages.queue`'s debounce, cap and drop;
    /// `Some(Some(o))` sets the options `o` gives and keeps the others.
    pub queue_options: Option<Option<StoredQueueOptions>>,
}

/// A session's own queue options, as stored (`None`: the config's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredQueueOptions {
    pub debounce_ms: Option<u64>,
    pub cap: Option<u32>,
    pub drop: Option<String>,
}

/// A session's own settings, as stored (canonical names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOverrides {
    pub session_key: String,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub reasoning: Option<String>,
    pub queue_mode: Option<String>,
    pub verbose: Option<String>,
    pub response_usage: Option<String>,
    pub trace_level: Option<String>,
    pub queue_options: StoredQueueOptions,
}

/// Filter and page of `sessions.list`.
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    pub agent_id: Option<String>,
    pub updated_since: Option<u64>,
    pub search: Option<String>,
    /// Exactly this session key.
    pub key: Option<String>,
    pub limit: u32,
    pub offset: u32,
}

/// What the database knows of a run id.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredRun {
    /// Accepted, not terminal yet.
    Active {
        agent_id: String,
        session_key: String,
    },
    Terminal {
        agent_id: String,
        session_key: String,
        terminal: StoredTerminal,
    },
}

#[derive(Debug)]
pub enum AcceptOutcome {
    Inserted,
    Existing(Box<StoredRun>),
    /// The key was used before for another agent, session or request: why.
    Conflict(String),
}

enum Cmd {
    Accept(NewRun, oneshot::Sender<Result<AcceptOutcome, DbError>>),
    Finish(String, StoredTerminal, oneshot::Sender<Result<(), DbError>>),
    Lookup(String, oneshot::Sender<Result<Option<StoredRun>, DbError>>),
    PatchSession(
        String,
        String,
        SessionPatch,
        u64,
        oneshot::Sender<Result<SessionRow, DbError>>,
    ),
    Prune(u64, oneshot::Sender<Result<usize, DbError>>),
    Sessions(
        SessionQuery,
        oneshot::Sender<Result<(Vec<SessionRow>, u64), DbError>>,
    ),
    DeleteSession(String, oneshot::Sender<Result<bool, DbError>>),
    SessionById(
        String,
        oneshot::Sender<Result<Option<(String, String)>, DbError>>,
    ),
    SessionOverrides(oneshot::Sender<Result<Vec<StoredOverrides>, DbError>>),
    Devices(devices::DeviceCmd),
    Cron(cron::CronCmd),
    AllowExec(String, String, u64, oneshot::Sender<Result<(), DbError>>),
    DisallowExec(String, String, oneshot::Sender<Result<bool, DbError>>),
    ExecAllowlist(oneshot::Sender<Result<Vec<(String, String)>, DbError>>),
}

/// Handle to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct GatewayDb {
    tx: dbwriter::Queue<Cmd>,
    /// The file, for reads that must not wait on (or hold up) the writer: the usage
    /// answers, on a read-only connection of their own.
    path: std::sync::Arc<std::path::PathBuf>,
    /// At most [`READERS`] such reads at once (threads, descriptors, WAL snapshots).
    readers: std::sync::Arc<tokio::sync::Semaphore>,
    /// How long the gateway db's commits take (`/metrics`).
    pub commits: std::sync::Arc<dbwriter::CommitStats>,
}

impl GatewayDb {
    /// The database file.
    pub fn path(&self) -> &Path {
        self.path.as_path()
    }

    /// Opens (creating and migrating) the database, ends runs a crash left non-terminal
    /// (returning how many) and starts the writer thread.
    pub fn open(path: &Path, now_ms: u64) -> Result<(GatewayDb, usize), DbError> {
        Self::open_reserved(path, now_ms, None)
    }

    /// Like [`GatewayDb::open`], with a [`dbwriter::Reserve`] a commit that finds the disk
    /// full releases (one agent filling the disk must not stop the outcomes of the others).
    pub fn open_reserved(
        path: &Path,
        now_ms: u64,
        reserve: Option<std::sync::Arc<dbwriter::Reserve>>,
    ) -> Result<(GatewayDb, usize), DbError> {
        let conn = dbwriter::open(path, dbwriter::Durability::Normal)?;
        migrate(&conn)?;
        if let Some(runs) = usage::rebuild_if_needed(&conn, now_ms)? {
            tracing::info!(runs, "usage rollups built from the kept runs");
        }
        let recovered = recover(&conn, now_ms)?;
        // An acknowledged `accepted` survives a power cut: batches with an accept are
        // fsynced before they are answered. Outcomes are not: one lost to a power cut is
        // ended as an error by `recover` on the next start.
        let options = dbwriter::Options {
            durable: |c| matches!(c, Cmd::Accept(..)),
            reserve,
            ..dbwriter::Options::new(QUEUE, MAX_BATCH)
        };
        let commits = options.stats.clone();
        let tx = dbwriter::start("gateway-db", conn, options, apply)
            .map_err(|e| DbError::Sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        let path = std::sync::Arc::new(path.to_owned());
        let readers = std::sync::Arc::new(tokio::sync::Semaphore::new(READERS));
        Ok((
            GatewayDb {
                tx,
                commits,
                path,
                readers,
            },
            recovered,
        ))
    }

    /// Records an accepted run, or reports what is already recorded under that id.
    pub async fn accept(&self, run: NewRun) -> Result<AcceptOutcome, DbError> {
        self.tx.ask(|tx| Cmd::Accept(run, tx)).await
    }

    pub async fn finish(&self, run_id: String, terminal: StoredTerminal) -> Result<(), DbError> {
        self.tx.ask(|tx| Cmd::Finish(run_id, terminal, tx)).await
    }

    pub async fn lookup(&self, run_id: String) -> Result<Option<StoredRun>, DbError> {
        self.tx.ask(|tx| Cmd::Lookup(run_id, tx)).await
    }

    /// A page of the session index, most recently updated first, and the total count.
    pub async fn sessions(&self, q: SessionQuery) -> Result<(Vec<SessionRow>, u64), DbError> {
        self.tx.ask(|tx| Cmd::Sessions(q, tx)).await
    }

    /// Changes a session's label or read mark (creating its index row for a key with no run
    /// yet); returns the row.
    pub async fn patch_session(
        &self,
        session_key: String,
        agent_id: String,
        patch: SessionPatch,
        now_ms: u64,
    ) -> Result<SessionRow, DbError> {
        self.tx
            .ask(|tx| Cmd::PatchSession(session_key, agent_id, patch, now_ms, tx))
            .await
    }

    /// Removes a session from the index; `true` if it was there.
    pub async fn delete_session(&self, session_key: String) -> Result<bool, DbError> {
        self.tx.ask(|tx| Cmd::DeleteSession(session_key, tx)).await
    }

    /// The session (key, agent id) whose transcript id is `session_id`, if one is known.
    pub async fn session_by_id(
        &self,
        session_id: String,
    ) -> Result<Option<(String, String)>, DbError> {
        self.tx.ask(|tx| Cmd::SessionById(session_id, tx)).await
    }

    /// Every session's own settings (`sessions.patch` model, thinking, reasoning).
    pub async fn session_overrides(&self) -> Result<Vec<StoredOverrides>, DbError> {
        self.tx.ask(Cmd::SessionOverrides).await
    }

    /// A device-token command (see [`devices`]), on this database's writer.
    pub async fn devices<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, DbError>>) -> devices::DeviceCmd,
    ) -> Result<T, DbError> {
        self.tx.ask(|tx| Cmd::Devices(make(tx))).await
    }

    /// Forgets a kept `allow-always` pattern; `Ok(false)` if it was not kept.
    pub async fn disallow_exec(&self, agent_id: String, pattern: String) -> Result<bool, DbError> {
        self.tx
            .ask(|tx| Cmd::DisallowExec(agent_id, pattern, tx))
            .await
    }

    /// Keeps `pattern` in `agent_id`'s exec allowlist (`allow-always`).
    pub async fn allow_exec(
        &self,
        agent_id: String,
        pattern: String,
        at_ms: u64,
    ) -> Result<(), DbError> {
        self.tx
            .ask(|tx| Cmd::AllowExec(agent_id, pattern, at_ms, tx))
            .await
    }

    /// Stores `job` in place of any job with its id.
    pub async fn cron_put(&self, job: ipc::gateway::CronJob) -> Result<(), DbError> {
        self.tx
            .ask(|tx| Cmd::Cron(cron::CronCmd::Put(Box::new(job), tx)))
            .await
    }

    /// Forgets job `id` (its run history stays); whether it was there.
    pub async fn cron_remove(&self, id: String) -> Result<bool, DbError> {
        self.tx
            .ask(|tx| Cmd::Cron(cron::CronCmd::Remove(id, tx)))
            .await
    }

    /// Records a job's run; `false` if that run was recorded before.
    pub async fn cron_record(&self, entry: ipc::gateway::CronRunEntry) -> Result<bool, DbError> {
        self.tx
            .ask(|tx| Cmd::Cron(cron::CronCmd::Record(Box::new(entry), tx)))
            .await
    }

    /// Forgets the run history of removed jobs older than `before` (ms); how many entries.
    pub async fn cron_prune_removed(&self, before: u64) -> Result<usize, DbError> {
        self.tx
            .ask(|tx| Cmd::Cron(cron::CronCmd::PruneRemoved(before, tx)))
            .await
    }

    /// Isolated cron runs' sessions last updated before `before` (ms): `(key, agent id)`.
    pub async fn cron_run_sessions(
        &self,
        before: u64,
        limit: u32,
    ) -> Result<Vec<(String, String)>, DbError> {
        self.read(move |c| cron::expired_run_sessions(c, before, limit))
            .await
    }

    /// Every stored job, read beside the writer.
    pub async fn cron_jobs(&self) -> Result<Vec<ipc::gateway::CronJob>, DbError> {
        self.read(cron::jobs).await
    }

    /// A page of a job's runs, newest first, and how many there are.
    pub async fn cron_runs(
        &self,
        job_id: Option<String>,
        run_id: Option<String>,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<ipc::gateway::CronRunEntry>, u64), DbError> {
        self.read(move |c| cron::runs(c, job_id.as_deref(), run_id.as_deref(), limit, offset))
            .await
    }

    /// Every kept `(agent id, pattern)`, oldest first.
    pub async fn exec_allowlist(&self) -> Result<Vec<(String, String)>, DbError> {
        self.tx.ask(Cmd::ExecAllowlist).await
    }

    /// The usage rollup's rows of some days (`usage.cost`), read beside the writer.
    pub async fn usage_days(&self, q: usage::UsageQuery) -> Result<Vec<usage::DayRow>, DbError> {
        self.read(move |c| usage::days(c, &q)).await
    }

    /// The sessions with usage in some days, and their rows (`sessions.usage`), read beside
    /// the writer.
    pub async fn usage_sessions(
        &self,
        q: usage::SessionsUsageQuery,
    ) -> Result<usage::SessionsUsage, DbError> {
        self.read(move |c| usage::sessions(c, &q)).await
    }

    /// `f` on a read-only connection of its own, on a blocking thread: a long read neither
    /// waits for the writer's batches nor holds them up (WAL).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, DbError> + Send + 'static,
    ) -> Result<T, DbError> {
        let path = self.path.clone();
        let permit = self
            .readers
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| DbError::Overloaded)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let c = Connection::open_with_flags(
                path.as_path(),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            c.busy_timeout(std::time::Duration::from_secs(5))?;
            f(&c)
        })
        .await
        .map_err(|_| DbError::Overloaded)?
    }

    /// Deletes terminal runs that ended before `before_ms`.
    pub async fn prune(&self, before_ms: u64) -> Result<usize, DbError> {
        self.tx.ask(|tx| Cmd::Prune(before_ms, tx)).await
    }
}

/// The gateway db's schema ladder: step `i` brings `user_version` `i` to `i + 1`. Append
/// only.
const LADDER: &[dbwriter::Step<'static>] = &[
    // v1: runs and the session index.
    &["CREATE TABLE IF NOT EXISTS runs(
                run_id TEXT PRIMARY KEY,
                agent_id TEXT NOT NULL,
                session_key TEXT NOT NULL,
                status TEXT NOT NULL,
                accepted_at INTEGER NOT NULL,
                started_at INTEGER,
                ended_at INTEGER,
                error TEXT,
                stop_reason TEXT,
                final_json TEXT
             ) STRICT;
             CREATE INDEX IF NOT EXISTS runs_open ON runs(status) WHERE status = 'accepted';
             CREATE INDEX IF NOT EXISTS runs_ended ON runs(ended_at);
             CREATE TABLE IF NOT EXISTS sessions(
                session_key TEXT PRIMARY KEY,
                agent_id TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                last_run_id TEXT
             ) STRICT;"],
    // v2: a session's id, last outcome and token counts.
    &["ALTER TABLE sessions ADD COLUMN session_id TEXT;
             ALTER TABLE sessions ADD COLUMN last_status TEXT;
             ALTER TABLE sessions ADD COLUMN last_error TEXT;
             ALTER TABLE sessions ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE sessions ADD COLUMN total_tokens INTEGER NOT NULL DEFAULT 0;
             CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated_at);"],
    // v3: what a run asked (`request_hash`): a key reused for another request is refused.
    &["ALTER TABLE runs ADD COLUMN request_hash TEXT;"],
    // v4: a session's label and read mark.
    &["ALTER TABLE sessions ADD COLUMN label TEXT;
             ALTER TABLE sessions ADD COLUMN last_read_at INTEGER;"],
    // v5: device tokens (their digests), see `devices`; a session's own model.
    &[
        devices::SCHEMA,
        "ALTER TABLE sessions ADD COLUMN model_override TEXT;",
    ],
    // v6: a session's own thinking level and reasoning visibility.
    &["ALTER TABLE sessions ADD COLUMN thinking_level TEXT;
             ALTER TABLE sessions ADD COLUMN reasoning_level TEXT;"],
    // v7: a session's own queue mode.
    &["ALTER TABLE sessions ADD COLUMN queue_mode TEXT;"],
    // v8: exec commands operators allowed for good (`allow-always`).
    &["CREATE TABLE exec_allowlist(
                agent_id TEXT NOT NULL,
                pattern TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (agent_id, pattern)
             ) STRICT;"],
    // v9: sessions found by their transcript id (`agent` with `sessionId` alone, R-A1).
    &["CREATE INDEX IF NOT EXISTS sessions_by_id ON sessions(session_id) WHERE session_id IS NOT NULL;"],
    // v10: a session's own verbose level.
    &["ALTER TABLE sessions ADD COLUMN verbose_level TEXT;"],
    // v11: token usage rolled up per agent, session, day and model (`usage`).
    &[usage::SCHEMA],
    // v12: a session's own queue debounce, cap and drop policy.
    &["ALTER TABLE sessions ADD COLUMN queue_debounce_ms INTEGER;
             ALTER TABLE sessions ADD COLUMN queue_cap INTEGER;
             ALTER TABLE sessions ADD COLUMN queue_drop TEXT;"],
    // v13: a session's own usage footer mode and trace level (`/usage`, `/trace`).
    &["ALTER TABLE sessions ADD COLUMN response_usage TEXT;
             ALTER TABLE sessions ADD COLUMN trace_level TEXT;"],
    // v14: the scheduler's jobs and their run history.
    &[cron::SCHEMA],
];

fn migrate(conn: &Connection) -> Result<(), DbError> {
    dbwriter::migrate(conn, LADDER).map_err(|e| match e {
        dbwriter::MigrateError::TooNew { found, .. } => DbError::TooNew(found),
        dbwriter::MigrateError::Sqlite(e) => DbError::Sqlite(e),
    })
}

/// Ends runs left `accepted` by a crash of the previous gateway (invariant 1).
/// The error of runs left `accepted` by a crash, ended at the next start.
pub const INTERRUPTED: &str = "interrupted by worker/gateway crash";

fn recover(conn: &Connection, now_ms: u64) -> Result<usize, DbError> {
    let mut stmt = conn.prepare(
        "SELECT r.run_id, r.agent_id, r.session_key, s.session_id FROM runs r
         LEFT JOIN sessions s ON s.session_key = r.session_key WHERE r.status = 'accepted'",
    )?;
    let open: Vec<(String, String, String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    drop(stmt);
    for (run_id, agent_id, session_key, session_id) in &open {
        // The same outcome a run failed by the supervisor gets, so a replay after a crash
        // has the shape of any other failure (`error`, `agentMeta`).
        let mut t = ipc::control::RunTerminal::without_work(
            run_id,
            ipc::control::RunStatus::Error,
            now_ms,
            INTERRUPTED.to_owned(),
            None,
        );
        t.session_id = session_id.clone();
        let outcome = crate::outcome::Outcome::from_terminal(&t, session_key, agent_id);
        // Ending it is bookkeeping, not activity: the session keeps its place in the list.
        finish_as(conn, run_id, &outcome.stored(), false)?;
    }
    Ok(open.len())
}

/// `result`, delivered to `tx` once the batch commits (a failed commit instead).
pub(crate) fn answer<T: Send + 'static>(
    tx: oneshot::Sender<Result<T, DbError>>,
    result: Result<T, DbError>,
) -> dbwriter::Held {
    dbwriter::Held::to(tx, result, |e| DbError::Commit(e.to_string()))
}

/// Carries out one command, its writes in its own savepoint.
fn apply(conn: &Connection, cmd: Cmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    match cmd {
        Cmd::Accept(run, tx) => answer(tx, sp.run(conn, |c| accept(c, &run))),
        Cmd::Finish(id, t, tx) => answer(tx, sp.run(conn, |c| finish(c, &id, &t))),
        Cmd::Lookup(id, tx) => answer(tx, sp.run(conn, |c| lookup(c, &id))),
        Cmd::PatchSession(key, agent, patch, now, tx) => answer(
            tx,
            sp.run(conn, |c| sessions::patch(c, &key, &agent, &patch, now)),
        ),
        Cmd::Sessions(q, tx) => answer(tx, sp.run(conn, |c| sessions::list(c, &q))),
        Cmd::DeleteSession(key, tx) => answer(tx, sp.run(conn, |c| sessions::delete(c, &key))),
        Cmd::SessionById(id, tx) => answer(tx, sp.run(conn, |c| sessions::by_id(c, &id))),
        Cmd::Devices(d) => devices::apply(conn, d, sp),
        Cmd::Cron(c) => cron::apply(conn, c, sp),
        Cmd::SessionOverrides(tx) => answer(tx, sp.run(conn, sessions::overrides)),
        Cmd::AllowExec(agent, pattern, at, tx) => answer(
            tx,
            sp.run(conn, |c| exec_allowlist::allow(c, &agent, &pattern, at)),
        ),
        Cmd::DisallowExec(agent, pattern, tx) => answer(
            tx,
            sp.run(conn, |c| exec_allowlist::disallow(c, &agent, &pattern)),
        ),
        Cmd::ExecAllowlist(tx) => answer(tx, sp.run(conn, exec_allowlist::list)),
        Cmd::Prune(before, tx) => answer(tx, sp.run(conn, |c| prune(c, before))),
    }
}

/// Deletes terminal runs that ended before `before` (ms); how many.
fn prune(conn: &Connection, before: u64) -> Result<usize, DbError> {
    conn.prepare_cached("DELETE FROM runs WHERE status != 'accepted' AND ended_at < ?1")?
        .execute(params![before as i64])
        .map_err(DbError::from)
}

fn accept(conn: &Connection, run: &NewRun) -> Result<AcceptOutcome, DbError> {
    if let Some(existing) = lookup(conn, &run.run_id)? {
        let hash: Option<String> = conn
            .prepare_cached("SELECT request_hash FROM runs WHERE run_id = ?1")?
            .query_row(params![run.run_id], |r| r.get(0))
            .optional()?
            .flatten();
        let (agent, session) = match &existing {
            StoredRun::Active {
                agent_id,
                session_key,
            }
            | StoredRun::Terminal {
                agent_id,
                session_key,
                ..
            } => (agent_id, session_key),
        };
        let why = if *agent != run.agent_id || *session != run.session_key {
            Some(format!("agent {agent:?}, session {session:?}"))
        } else if hash.is_some_and(|h| h != run.request_hash) {
            Some("another message".to_owned())
        } else {
            None
        };
        return Ok(match why {
            Some(why) => AcceptOutcome::Conflict(why),
            None => AcceptOutcome::Existing(Box::new(existing)),
        });
    }
    conn.prepare_cached("INSERT INTO runs(run_id, agent_id, session_key, status, accepted_at, request_hash) VALUES (?1, ?2, ?3, 'accepted', ?4, ?5)")?.execute(params![run.run_id, run.agent_id, run.session_key, run.accepted_at as i64, run.request_hash],
    )?;
    conn.prepare_cached("INSERT INTO sessions(session_key, agent_id, created_at, updated_at, last_run_id)
         VALUES (?1, ?2, ?3, ?3, ?4)
         ON CONFLICT(session_key) DO UPDATE SET updated_at = excluded.updated_at, last_run_id = excluded.last_run_id")?.execute(params![run.session_key, run.agent_id, run.accepted_at as i64, run.run_id],
    )?;
    Ok(AcceptOutcome::Inserted)
}

fn finish(conn: &Connection, run_id: &str, t: &StoredTerminal) -> Result<(), DbError> {
    finish_as(conn, run_id, t, true)
}

/// Records a terminal; `touch` moves the session's `updated_at` to the run's end.
fn finish_as(
    conn: &Connection,
    run_id: &str,
    t: &StoredTerminal,
    touch: bool,
) -> Result<(), DbError> {
    // The run's agent and session come back with the change: one lookup of the run.
    let ended: Option<(String, String)> = conn.prepare_cached("UPDATE runs SET status = ?2, started_at = ?3, ended_at = ?4, error = ?5, stop_reason = ?6, final_json = ?7
         WHERE run_id = ?1 AND status = 'accepted' RETURNING agent_id, session_key")?.query_row(params![
            run_id,
            t.status,
            t.started_at.map(|v| v as i64),
            t.ended_at as i64,
            t.error,
            t.stop_reason,
            t.final_json
        ],
        |r| Ok((r.get(0)?, r.get(1)?)),
    ).optional()?;
    if let Some((agent_id, session_key)) = ended {
        let (input, output, total) = t.usage.unwrap_or((0, 0, 0));
        conn.prepare_cached("UPDATE sessions SET updated_at = CASE WHEN ?9 THEN max(updated_at, ?2) ELSE updated_at END, last_run_id = ?1, last_status = ?3, last_error = ?4,
                    session_id = COALESCE(?5, session_id),
                    input_tokens = input_tokens + ?6, output_tokens = output_tokens + ?7, total_tokens = total_tokens + ?8
             WHERE session_key = ?10")?.execute(params![
                run_id,
                t.ended_at as i64,
                t.status,
                t.error,
                t.session_id,
                usage::bounded(input),
                usage::bounded(output),
                usage::bounded(total),
                touch,
                session_key
            ],
        )?;
        usage::record(conn, (&agent_id, &session_key), t)?;
    }
    Ok(())
}

fn lookup(conn: &Connection, run_id: &str) -> Result<Option<StoredRun>, DbError> {
    let row = conn
        .prepare_cached("SELECT agent_id, session_key, status, started_at, ended_at, error, stop_reason, final_json
             FROM runs WHERE run_id = ?1")?
        .query_row(
            params![run_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                ))
            },
        )
        .optional()?;
    Ok(row.map(
        |(agent_id, session_key, status, started, ended, error, stop_reason, final_json)| match (
            status.as_str(),
            final_json,
        ) {
            ("accepted", _) | (_, None) => StoredRun::Active {
                agent_id,
                session_key,
            },
            (_, Some(final_json)) => StoredRun::Terminal {
                agent_id,
                session_key,
                terminal: StoredTerminal {
                    status,
                    started_at: started.map(|v| v as u64),
                    ended_at: ended.unwrap_or(0) as u64,
                    error,
                    stop_reason,
                    final_json,
                    session_id: None,
                    usage: None,
                    spend: None,
                },
            },
        },
    ))
}

#[cfg(test)]
mod tests;
