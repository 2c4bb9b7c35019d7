//! The writer actor: the agent database's only read-write connection, on its own thread.
//! Commands queue on a bounded channel; whatever is queued is applied in one transaction with
//! a savepoint per command when there are several (one command's failure, e.g. a fenced write, never undoes its
//! neighbours), then each caller is answered on its `oneshot`.

use std::path::Path;

use ipc::control::RunStatus;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;
use tokio::sync::oneshot;

use super::{
    schema, Appended, AuditRecord, BeginRun, Compaction, FinishRun, NewMessage, StoreError,
};

mod append;
mod command;

use append::{append, next_entry};

/// A recorded command: the session, whether the command made it, and its two rows; `None`
/// while a run held the session.
pub type CommandRecorded = Option<(String, bool, Vec<Appended>)>;

const QUEUE: usize = 4096;
const MAX_BATCH: usize = 256;
/// Audit records kept per agent; older ones are pruned (up to `AUDIT_PRUNE_EVERY` more
/// accumulate between prunes).
pub const AUDIT_MAX_RECORDS: i64 = 10_000;
/// Prune the ledger once per this many inserts.
const AUDIT_PRUNE_EVERY: i64 = 256;
/// Message stored for runs a crash left open.
pub const INTERRUPTED: &str = "interrupted by worker/gateway crash";

enum Cmd {
    /// A run's own writes, fenced by its writer claim.
    Run(RunCmd),
    /// Changes to a session no run makes.
    Session(SessionCmd),
    Audit(AuditRecord),
    /// Cluster mode's crash recovery, journaled like any write ([`recover`]).
    Recover {
        now: u64,
        reply: oneshot::Sender<Result<usize, StoreError>>,
    },
}

/// What a run writes: its start (taking the claim), its messages and compactions (fenced by
/// the claim) and its end.
enum RunCmd {
    Begin(
        BeginRun,
        oneshot::Sender<Result<(String, bool, Appended), StoreError>>,
    ),
    Append {
        session_key: String,
        expected_writer_run_id: String,
        run_id: String,
        message: NewMessage,
        reply: oneshot::Sender<Result<Appended, StoreError>>,
    },
    Compact {
        session_key: String,
        run_id: String,
        compaction: Compaction,
        reply: oneshot::Sender<Result<i64, StoreError>>,
    },
    Finish(
        FinishRun,
        oneshot::Sender<Result<Option<Appended>, StoreError>>,
    ),
}

/// A session change made outside any run: operator and slash-command writes (refused or
/// skipped while a run holds the claim) and the release of a claim no live run holds.
// An injected message makes it as large as `RunCmd::Append`: `Cmd` is that size anyway.
#[allow(clippy::large_enum_variant)]
enum SessionCmd {
    Reset {
        session_key: String,
        reason: String,
        now: u64,
        reply: oneshot::Sender<Result<SessionInfo, StoreError>>,
    },
    Delete {
        session_key: String,
        delete_transcript: bool,
        reply: oneshot::Sender<Result<bool, StoreError>>,
    },
    Inject {
        session_key: String,
        message: NewMessage,
        reply: oneshot::Sender<Result<Option<(String, Appended)>, StoreError>>,
    },
    Command {
        session_key: String,
        run_id: String,
        rows: Vec<NewMessage>,
        reply: oneshot::Sender<Result<CommandRecorded, StoreError>>,
    },
    CompactNow {
        session_key: String,
        session_id: String,
        compaction: Compaction,
        reply: oneshot::Sender<Result<i64, StoreError>>,
    },
    ReleaseClaim {
        session_key: String,
        run_id: String,
        now: u64,
        reply: oneshot::Sender<Result<bool, StoreError>>,
    },
}

/// The error recorded on a run whose stale claim stuck-session recovery released.
pub const RELEASED: &str = "released by stuck-session recovery: no live run held its writer claim";

/// A session's identity after a change.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub session_id: String,
    pub updated_at: u64,
}

/// Handle to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    tx: dbwriter::Queue<Cmd>,
    /// How long this database's commits take (reported to the supervisor's metrics).
    pub commits: std::sync::Arc<dbwriter::CommitStats>,
}

impl Writer {
    /// Opens and migrates the database, ends runs a crash left open (releasing their writer
    /// claims) and starts the writer thread. Returns the handle and the number of runs
    /// recovered.
    pub fn open(path: &Path, now_ms: u64) -> Result<(Writer, usize), StoreError> {
        let mut conn = schema::open_migrated(path)?;
        let recovered = recover(&mut conn, now_ms)?;
        Ok((Writer::start(conn, None)?, recovered))
    }

    /// Cluster mode: like [`Writer::open`] over a database already synced with the agent's
    /// journal, every transaction (the crash recovery first) recorded there before it
    /// commits.
    pub async fn open_journaled(
        path: &Path,
        now_ms: u64,
        journal: super::journal::Link,
    ) -> Result<(Writer, usize), StoreError> {
        let writer = Writer::start(schema::open_migrated(path)?, Some(Box::new(journal)))?;
        let recovered = writer
            .tx
            .ask(|reply| Cmd::Recover { now: now_ms, reply })
            .await?;
        Ok((writer, recovered))
    }

    fn start(
        conn: Connection,
        journal: Option<Box<dyn dbwriter::Journal>>,
    ) -> Result<Writer, StoreError> {
        let mut options = dbwriter::Options::new(QUEUE, MAX_BATCH);
        options.journal = journal;
        let commits = options.stats.clone();
        let tx = dbwriter::start("agent-db-writer", conn, options, apply_one)
            .map_err(|e| StoreError::Sqlite(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { tx, commits })
    }

    /// Queues a run's write and waits for its answer.
    async fn ask_run<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> RunCmd,
    ) -> Result<T, StoreError> {
        self.tx.ask(|reply| Cmd::Run(make(reply))).await
    }

    /// Queues a session change and waits for its answer.
    async fn ask_session<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> SessionCmd,
    ) -> Result<T, StoreError> {
        self.tx.ask(|reply| Cmd::Session(make(reply))).await
    }

    /// Claims the session for `run.run_id` (superseding any older claim), records the run and
    /// the user message. Returns the session's transcript id.
    pub async fn begin(&self, run: BeginRun) -> Result<String, StoreError> {
        self.begin_run(run).await.map(|(sid, _, _)| sid)
    }

    /// Like [`Writer::begin`], also saying whether this run created the session, and the
    /// user message it recorded.
    pub async fn begin_run(&self, run: BeginRun) -> Result<(String, bool, Appended), StoreError> {
        self.ask_run(|tx| RunCmd::Begin(run, tx)).await
    }

    /// Appends a transcript message, only if `expected_writer_run_id` still holds the claim.
    /// Returns where the message was recorded.
    pub async fn append(
        &self,
        session_key: String,
        expected_writer_run_id: String,
        message: NewMessage,
    ) -> Result<Appended, StoreError> {
        self.ask_run(|reply| RunCmd::Append {
            session_key,
            run_id: message
                .input_run_id
                .clone()
                .unwrap_or_else(|| expected_writer_run_id.clone()),
            expected_writer_run_id,
            message,
            reply,
        })
        .await
    }

    /// Records a compaction of the session's context, fenced like any transcript write
    /// (R-C5): a `compaction` entry with the summary, and the session's model history from
    /// then on is the summary plus the rows from `compaction.kept_from_seq` on. Returns the
    /// entry's `seq`.
    pub async fn compact(
        &self,
        session_key: String,
        expected_writer_run_id: String,
        compaction: Compaction,
    ) -> Result<i64, StoreError> {
        self.ask_run(|reply| RunCmd::Compact {
            session_key,
            run_id: expected_writer_run_id,
            compaction,
            reply,
        })
        .await
    }

    /// Queues an audit record without waiting for it. When the writer's queue is full the
    /// record is dropped with a warning: the ledger never holds up a run.
    pub fn audit(&self, record: AuditRecord) {
        if self.tx.send(Cmd::Audit(record)) == Err(dbwriter::QueueError::Full) {
            tracing::warn!("Agent db queue full; dropped an audit record.")
        }
    }

    /// Records the run's outcome. The assistant message (if any) is fenced: if the run lost
    /// its claim, the message is not written, the run is recorded as an error and
    /// `Err(Fenced)` is returned.
    /// Records the run's end; returns the assistant message it recorded, if any.
    pub async fn finish(&self, f: FinishRun) -> Result<Option<Appended>, StoreError> {
        self.ask_run(|tx| RunCmd::Finish(f, tx)).await
    }

    /// Starts a new transcript window (a `reset` boundary; the session id is kept). Refused
    /// with `Fenced` while a run holds the session's writer claim (R-C5).
    pub async fn reset(
        &self,
        session_key: String,
        reason: String,
        now: u64,
    ) -> Result<SessionInfo, StoreError> {
        self.ask_session(|reply| SessionCmd::Reset {
            session_key,
            reason,
            now,
            reply,
        })
        .await
    }

    /// Appends a message no run wrote (an operator's note) to an existing session. `Ok(None)`
    /// if the session does not exist; refused with `Fenced` while a run holds the claim.
    /// Returns the session id and where the message was recorded.
    pub async fn inject(
        &self,
        session_key: String,
        message: NewMessage,
    ) -> Result<Option<(String, Appended)>, StoreError> {
        self.ask_session(|reply| SessionCmd::Inject {
            session_key,
            message,
            reply,
        })
        .await
    }

    /// Records a slash command and its reply (`rows`, in order) in the session, made if it
    /// has none; `None` while a run holds the session.
    pub async fn command(
        &self,
        session_key: String,
        run_id: String,
        rows: Vec<NewMessage>,
    ) -> Result<CommandRecorded, StoreError> {
        self.ask_session(|reply| SessionCmd::Command {
            session_key,
            run_id,
            rows,
            reply,
        })
        .await
    }

    /// Records a compaction no run made (`sessions.compact`): refused with `Fenced` while a
    /// run holds the claim, and with [`StoreError::Changed`] if the rows it keeps are no
    /// longer what the model sees (a reset or a later compaction came first).
    pub async fn compact_now(
        &self,
        session_key: String,
        session_id: String,
        compaction: Compaction,
    ) -> Result<i64, StoreError> {
        self.ask_session(|reply| SessionCmd::CompactNow {
            session_key,
            session_id,
            compaction,
            reply,
        })
        .await
    }

    /// Releases the session's writer claim if `run_id` still holds it (stuck-session
    /// recovery, R-I2: the caller knows no live run of this worker is `run_id`); a run row
    /// left `running` by it is ended as an error. `Ok(false)`: the claim had changed.
    pub async fn release_claim(
        &self,
        session_key: String,
        run_id: String,
        now: u64,
    ) -> Result<bool, StoreError> {
        self.ask_session(|reply| SessionCmd::ReleaseClaim {
            session_key,
            run_id,
            now,
            reply,
        })
        .await
    }

    /// Deletes the session row (and its transcript when asked). `Ok(false)` if it did not
    /// exist. Refused with `Fenced` while a run holds the claim.
    pub async fn delete(
        &self,
        session_key: String,
        delete_transcript: bool,
    ) -> Result<bool, StoreError> {
        self.ask_session(|reply| SessionCmd::Delete {
            session_key,
            delete_transcript,
            reply,
        })
        .await
    }
}

/// `result`, delivered once the batch commits.
fn answer<T: Send + 'static>(
    tx: oneshot::Sender<Result<T, StoreError>>,
    result: Result<T, StoreError>,
) -> dbwriter::Held {
    dbwriter::Held::to(tx, result, |e| match dbwriter::journal::refusal(e) {
        Some(why) => StoreError::Journal(why.to_owned()),
        None => StoreError::Sqlite(format!("commit failed: {e}")),
    })
}

/// Carries out one command, its writes in its own savepoint: a failed command leaves nothing
/// behind.
fn apply_one(conn: &Connection, cmd: Cmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    match cmd {
        Cmd::Run(cmd) => apply_run(conn, cmd, sp),
        Cmd::Session(cmd) => apply_session(conn, cmd, sp),
        Cmd::Recover { now, reply } => answer(reply, sp.run(conn, |c| end_interrupted(c, now))),
        Cmd::Audit(rec) => {
            if let Err(e) = sp.run(conn, |c| audit(c, &rec)) {
                tracing::warn!(error = %e, "Cannot write an audit record.");
            }
            dbwriter::Held::unanswered(
                |e| tracing::warn!(error = %e, "Audit records lost in a failed commit."),
            )
        }
    }
}

/// A run's write; its messages and compactions only while it holds the claim.
fn apply_run(conn: &Connection, cmd: RunCmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    match cmd {
        RunCmd::Begin(b, reply) => answer(reply, sp.run(conn, |c| begin(c, &b))),
        RunCmd::Append {
            session_key,
            expected_writer_run_id,
            run_id,
            message,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                let sid = check_claim(c, &session_key, &expected_writer_run_id)?;
                append(c, &sid, Some(&run_id), &message)
            }),
        ),
        RunCmd::Compact {
            session_key,
            run_id,
            compaction,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                let sid = check_claim(c, &session_key, &run_id)?;
                compact(c, &sid, Some(&run_id), &compaction)
            }),
        ),
        RunCmd::Finish(f, reply) => {
            // A fenced finish still records the run (as an error) and commits; the caller is
            // told it was fenced.
            let res = sp
                .run(conn, |c| finish(c, &f))
                .and_then(|(fenced, appended)| match fenced {
                    Some(e) => Err(e),
                    None => Ok(appended),
                });
            answer(reply, res)
        }
    }
}

/// A session change no run makes.
fn apply_session(conn: &Connection, cmd: SessionCmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    match cmd {
        SessionCmd::Reset {
            session_key,
            reason,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| reset(c, &session_key, &reason, now)),
        ),
        SessionCmd::ReleaseClaim {
            session_key,
            run_id,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| release_claim(c, &session_key, &run_id, now)),
        ),
        SessionCmd::Delete {
            session_key,
            delete_transcript,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| delete(c, &session_key, delete_transcript)),
        ),
        SessionCmd::Inject {
            session_key,
            message,
            reply,
        } => answer(reply, sp.run(conn, |c| inject(c, &session_key, &message))),
        SessionCmd::Command {
            session_key,
            run_id,
            rows,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| command::record(c, &session_key, &run_id, &rows)),
        ),
        SessionCmd::CompactNow {
            session_key,
            session_id,
            compaction,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                compact_now(c, &session_key, &session_id, &compaction)
            }),
        ),
    }
}

/// An operator's message, appended to an existing session no run holds; `None` without one.
fn inject(
    c: &Connection,
    session_key: &str,
    message: &NewMessage,
) -> Result<Option<(String, Appended)>, StoreError> {
    let Some(sid) = check_unclaimed(c, session_key)? else {
        return Ok(None);
    };
    let appended = append(c, &sid, None, message)?;
    Ok(Some((sid, appended)))
}

/// `sessions.compact`: the compaction is recorded only if the session is still the one it
/// was made from, unclaimed, and the rows it keeps are still what the model sees.
fn compact_now(
    c: &Connection,
    session_key: &str,
    session_id: &str,
    compaction: &Compaction,
) -> Result<i64, StoreError> {
    // Deleted and made again under the same key: another conversation.
    let Some(sid) = check_unclaimed(c, session_key)?.filter(|s| *s == session_id) else {
        return Err(StoreError::Changed);
    };
    let (window_start, kept_from): (i64, i64) = c
        .prepare_cached(
            "SELECT window_start_seq, kept_from_seq FROM sessions WHERE session_id = ?1",
        )?
        .query_row(params![sid], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if compaction.kept_from_seq <= window_start || compaction.kept_from_seq <= kept_from {
        return Err(StoreError::Changed);
    }
    compact(c, &sid, None, compaction)
}

fn audit(c: &Connection, r: &AuditRecord) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT INTO audit(ts, run_id, session_key, kind, phase, tool_name, tool_call_id, result, duration_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        r.ts as i64,
        r.run_id,
        r.session_key,
        r.kind,
        r.phase,
        r.tool_name,
        r.tool_call_id,
        r.result,
        r.duration_ms.map(|d| d as i64)
    ])?;
    let id = c.last_insert_rowid();
    if id % AUDIT_PRUNE_EVERY == 0 {
        c.prepare_cached("DELETE FROM audit WHERE id <= ?1")?
            .execute(params![id - AUDIT_MAX_RECORDS])?;
    }
    Ok(())
}

/// Refuses a session mutation while a run holds the session's writer claim.
fn check_unclaimed(c: &Connection, session_key: &str) -> Result<Option<String>, StoreError> {
    let row: Option<(String, Option<String>)> = c
        .prepare_cached(
            "SELECT session_id, active_writer_run_id FROM sessions WHERE session_key = ?1",
        )?
        .query_row(params![session_key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        Some((_, Some(claim))) => Err(StoreError::Fenced {
            expected: String::new(),
            actual: Some(claim),
        }),
        Some((sid, None)) => Ok(Some(sid)),
        None => Ok(None),
    }
}

fn reset(
    c: &Connection,
    session_key: &str,
    reason: &str,
    now: u64,
) -> Result<SessionInfo, StoreError> {
    let session_id = match check_unclaimed(c, session_key)? {
        Some(sid) => sid,
        None => {
            let sid = uuid::Uuid::now_v7().to_string();
            c.prepare_cached("INSERT INTO sessions(session_key, session_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)")?.execute(params![session_key, sid, now as i64],
            )?;
            sid
        }
    };
    let (seq, parent, entry_id) = next_entry(c, &session_id)?;
    let entry = json!({"type": "reset", "id": entry_id, "parentId": parent, "timestamp": now, "reason": reason});
    c.prepare_cached("INSERT INTO transcript(session_id, seq, entry_id, parent_id, run_id, role, created_at, entry_json)
         VALUES (?1, ?2, ?3, ?4, NULL, 'reset', ?5, ?6)")?.execute(params![session_id, seq, entry_id, parent, now as i64, entry.to_string()],
    )?;
    c.prepare_cached(
        "UPDATE sessions SET updated_at = ?2, window_start_seq = ?3 WHERE session_key = ?1",
    )?
    .execute(params![session_key, now as i64, seq])?;
    Ok(SessionInfo {
        session_id,
        updated_at: now,
    })
}

fn delete(c: &Connection, session_key: &str, delete_transcript: bool) -> Result<bool, StoreError> {
    let Some(session_id) = check_unclaimed(c, session_key)? else {
        return Ok(false);
    };
    if delete_transcript {
        c.prepare_cached("DELETE FROM transcript WHERE session_id = ?1")?
            .execute(params![session_id])?;
        c.prepare_cached("DELETE FROM input_alias WHERE session_id = ?1")?
            .execute(params![session_id])?;
        super::media::forget_session(c, &session_id)?;
    }
    c.prepare_cached("DELETE FROM sessions WHERE session_key = ?1")?
        .execute(params![session_key])?;
    Ok(true)
}

fn begin(c: &Connection, b: &BeginRun) -> Result<(String, bool, Appended), StoreError> {
    let previous: Option<Option<String>> = c
        .prepare_cached("SELECT active_writer_run_id FROM sessions WHERE session_key = ?1")?
        .query_row(params![b.session_key], |r| r.get(0))
        .optional()?;
    if let Some(Some(prev)) = &previous {
        if *prev != b.run_id {
            tracing::warn!(
                session_key = b.session_key.as_str(),
                superseded = prev.as_str(),
                run_id = b.run_id.as_str(),
                "Run supersedes a stale writer claim."
            );
        }
    }
    let new_id = uuid::Uuid::now_v7().to_string();
    c.prepare_cached("INSERT INTO sessions(session_key, session_id, created_at, updated_at, active_writer_run_id)
         VALUES (?1, ?2, ?3, ?3, ?4)
         ON CONFLICT(session_key) DO UPDATE SET active_writer_run_id = excluded.active_writer_run_id,
                                                updated_at = excluded.updated_at")?.execute(params![b.session_key, new_id, b.started_at as i64, b.run_id],
    )?;
    let session_id: String = c
        .prepare_cached("SELECT session_id FROM sessions WHERE session_key = ?1")?
        .query_row(params![b.session_key], |r| r.get(0))?;
    c.prepare_cached(
        "INSERT INTO runs(run_id, session_key, session_id, status, accepted_at, started_at)
         VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
    )?
    .execute(params![
        b.run_id,
        b.session_key,
        session_id,
        b.accepted_at as i64,
        b.started_at as i64
    ])?;
    let user = NewMessage {
        media: b.attachments.clone(),
        ..NewMessage::text(super::Role::User, b.user_text.clone(), b.started_at)
    };
    let appended = append(c, &session_id, Some(&b.run_id), &user)?;
    let mut alias = c.prepare_cached(
        "INSERT OR REPLACE INTO input_alias(run_id, session_id, entry_id) VALUES (?1, ?2, ?3)",
    )?;
    for carried in &b.carried {
        alias.execute(params![carried, session_id, appended.entry_id])?;
    }
    Ok((session_id, previous.is_none(), appended))
}

/// The fence (R-C1): the session's claim must still be `expected`. Returns the session id.
fn check_claim(c: &Connection, session_key: &str, expected: &str) -> Result<String, StoreError> {
    let row: Option<(String, Option<String>)> = c
        .prepare_cached(
            "SELECT session_id, active_writer_run_id FROM sessions WHERE session_key = ?1",
        )?
        .query_row(params![session_key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        Some((sid, Some(claim))) if claim == expected => Ok(sid),
        Some((_, actual)) => Err(StoreError::Fenced {
            expected: expected.to_owned(),
            actual,
        }),
        None => Err(StoreError::Fenced {
            expected: expected.to_owned(),
            actual: None,
        }),
    }
}

fn compact(
    c: &Connection,
    session_id: &str,
    run_id: Option<&str>,
    k: &Compaction,
) -> Result<i64, StoreError> {
    let kept: Option<String> = c
        .prepare_cached("SELECT entry_id FROM transcript WHERE session_id = ?1 AND seq = ?2")?
        .query_row(params![session_id, k.kept_from_seq], |r| r.get(0))
        .optional()?;
    let Some(first_kept) = kept else {
        return Err(StoreError::Sqlite(format!(
            "compaction keeps from transcript position {}, which does not exist",
            k.kept_from_seq
        )));
    };
    let (seq, parent, entry_id) = next_entry(c, session_id)?;
    let entry = json!({
        "type": "compaction",
        "id": entry_id,
        "parentId": parent,
        "timestamp": k.created_at,
        "summary": k.summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": k.tokens_before,
        "tokensAfter": k.tokens_after,
        "details": {"messagesSummarized": k.messages},
        "fromHook": false,
    });
    c.prepare_cached("INSERT INTO transcript(session_id, seq, entry_id, parent_id, run_id, role, created_at, entry_json, text)
         VALUES (?1, ?2, ?3, ?4, ?5, 'compaction', ?6, ?7, ?8)")?
        .execute(params![session_id, seq, entry_id, parent, run_id, k.created_at as i64, entry.to_string(), k.summary])?;
    c.execute(
        "UPDATE sessions SET updated_at = ?2, compaction_seq = ?3, kept_from_seq = ?4,
                compaction_count = compaction_count + 1
         WHERE session_id = ?1",
        params![session_id, k.created_at as i64, seq, k.kept_from_seq],
    )?;
    Ok(seq)
}

fn status_str(s: RunStatus) -> &'static str {
    s.as_str()
}

/// The fence error if the run was superseded, and the assistant message recorded.
type Finished = (Option<StoreError>, Option<Appended>);

fn finish(c: &Connection, f: &FinishRun) -> Result<Finished, StoreError> {
    let mut status = f.status;
    let mut error = f.error.clone();
    let mut fenced = None;
    let mut appended = None;
    if let Some(msg) = &f.assistant {
        match check_claim(c, &f.session_key, &f.run_id) {
            Ok(sid) => {
                appended = Some(append(c, &sid, Some(&f.run_id), msg)?);
            }
            Err(e @ StoreError::Fenced { .. }) => {
                status = RunStatus::Error;
                error = Some(e.to_string());
                fenced = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    let u = f.usage.unwrap_or_default();
    c.prepare_cached("UPDATE runs SET status = ?2, ended_at = ?3, error = ?4, stop_reason = ?5, provider = ?6, model = ?7,
                         input_tokens = ?8, output_tokens = ?9, total_tokens = ?10
         WHERE run_id = ?1")?.execute(params![
            f.run_id,
            status_str(status),
            f.ended_at as i64,
            error,
            f.stop_reason,
            f.provider,
            f.model,
            u.input as i64,
            u.output as i64,
            u.total as i64
        ],
    )?;
    c.prepare_cached(
        "UPDATE sessions SET active_writer_run_id = NULL,
                             input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4,
                             total_tokens = total_tokens + ?5
         WHERE session_key = ?1 AND active_writer_run_id = ?2",
    )?
    .execute(params![
        f.session_key,
        f.run_id,
        u.input as i64,
        u.output as i64,
        u.total as i64
    ])?;
    Ok((fenced, appended))
}

fn release_claim(
    c: &Connection,
    session_key: &str,
    run_id: &str,
    now: u64,
) -> Result<bool, StoreError> {
    let n = c
        .prepare_cached(
            "UPDATE sessions SET active_writer_run_id = NULL
             WHERE session_key = ?1 AND active_writer_run_id = ?2",
        )?
        .execute(params![session_key, run_id])?;
    if n > 0 {
        c.prepare_cached(
            "UPDATE runs SET status = 'error', ended_at = ?2, error = ?3
             WHERE run_id = ?1 AND status = 'running'",
        )?
        .execute(params![run_id, now as i64, RELEASED])?;
    }
    Ok(n > 0)
}

/// Ends runs left `running` by a crash and releases writer claims held by runs that are not
/// running (so the next turn on the session works).
fn recover(conn: &mut Connection, now_ms: u64) -> Result<usize, StoreError> {
    let tx = conn.transaction()?;
    let n = end_interrupted(&tx, now_ms)?;
    tx.commit()?;
    Ok(n)
}

fn end_interrupted(tx: &Connection, now_ms: u64) -> Result<usize, StoreError> {
    let n = tx
        .prepare_cached(
            "UPDATE runs SET status = 'error', ended_at = ?1, error = ?2 WHERE status = 'running'",
        )?
        .execute(params![now_ms as i64, INTERRUPTED])?;
    tx.prepare_cached(
        "UPDATE sessions SET active_writer_run_id = NULL
         WHERE active_writer_run_id IS NOT NULL
           AND active_writer_run_id NOT IN (SELECT run_id FROM runs WHERE status = 'running')",
    )?
    .execute([])?;
    Ok(n)
}

#[cfg(test)]
mod tests;
