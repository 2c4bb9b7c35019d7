//! Cluster mode: the agent database as a cache of the agent's journal in the cluster.
//!
//! - At start ([`sync`]), before the worker takes any run or session op, it tells the
//!   supervisor the last journal record its database holds and replays what it lacks (a new
//!   owner's database may be empty, or behind what another gateway wrote).
//! - From then on every transaction of the writer thread is recorded in the journal before
//!   it commits ([`Link`], a `dbwriter::Journal`): the writer thread waits for the answer.
//!   Refused (a newer owner took the agent over) or not known to be stored, the transaction
//!   rolls back, and this worker writes nothing more: its copy may be behind, so it stops and
//!   the next worker syncs again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use ipc::control::{ControlToWorker, JournalAck, WorkerToControl};
use rusqlite::{params, Connection};

use crate::link::{LinkReader, LinkWriter};
use crate::outbox::Outbox;

/// The tables the journal carries (the audit ledger stays local).
pub const TABLES: &[&str] = &[
    "sessions",
    "runs",
    "transcript",
    "input_alias",
    "media",
    "transcript_media",
];
/// Longest wait for one frame of the replay.
const REPLAY_IDLE: Duration = Duration::from_secs(120);
/// Longest wait for the journal to answer a write (the engine retries a lost leader for
/// its own request timeout first).
const RECORD_WAIT: Duration = Duration::from_secs(60);

/// The largest transaction sent to the journal: a link frame, less room for its envelope.
const MAX_RECORD: usize = ipc::frame::MAX_FRAME - 64 * 1024;

/// Writes waiting for the journal's answer, by id (answered by the link's reader).
#[derive(Clone, Default)]
pub struct Pending(Arc<Mutex<HashMap<u64, std::sync::mpsc::SyncSender<JournalAck>>>>);

impl Pending {
    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, std::sync::mpsc::SyncSender<JournalAck>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The journal answered write `id`.
    pub fn answer(&self, id: u64, ack: JournalAck) {
        if let Some(tx) = self.map().remove(&id) {
            let _ = tx.send(ack);
        }
    }
}

/// The last journal record the database at `conn` holds.
fn last_seq(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT last_seq FROM journal_state WHERE id = 1", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|v| v.max(0) as u64)
}

fn set_last_seq(conn: &Connection, seq: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE journal_state SET last_seq = ?1 WHERE id = 1")?
        .execute(params![seq as i64])
        .map(|_| ())
}

/// The agent's journal did not take this worker (see `ipc::control::EXIT_JOURNAL_STOPPED`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JournalStopped(pub String);

/// What [`sync`] leaves: where the journal ends, and the frames that arrived meanwhile.
pub struct Synced {
    pub last: u64,
    pub early: Vec<ControlToWorker>,
}

/// Brings the database at `path` up to the agent's journal: asks for the records after the
/// last one it holds and applies them, each in its own transaction with its sequence.
/// Heartbeats are answered meanwhile; other frames are kept for the main loop.
pub async fn sync(
    path: &Path,
    reader: &mut LinkReader,
    writer: &mut LinkWriter,
) -> anyhow::Result<Synced> {
    let mut conn = super::schema::open_migrated(path)?;
    let after = last_seq(&conn)?;
    writer.send(WorkerToControl::JournalSync { after }).await?;
    let mut early = Vec::new();
    let mut applied = 0usize;
    loop {
        let frame = tokio::time::timeout(REPLAY_IDLE, reader.next())
            .await
            .map_err(|_| {
                anyhow::anyhow!("the supervisor sent no journal records for {REPLAY_IDLE:?}")
            })?;
        match frame {
            Some(Ok(ControlToWorker::JournalReplay {
                records,
                last,
                error,
            })) => {
                if let Some(e) = error {
                    return Err(JournalStopped(format!(
                        "cannot bring the agent database up to the cluster's journal: {e}"
                    ))
                    .into());
                }
                for r in &records {
                    let tx = conn.transaction()?;
                    dbwriter::journal::replay(&tx, &r.changes)
                        .map_err(|e| anyhow::anyhow!("journal record {}: {e}", r.seq))?;
                    set_last_seq(&tx, r.seq)?;
                    tx.commit()?;
                }
                applied += records.len();
                if let Some(last) = last {
                    set_last_seq(&conn, last)?;
                    tracing::info!(
                        after,
                        applied,
                        last,
                        "Agent database synced with the cluster's journal."
                    );
                    return Ok(Synced { last, early });
                }
            }
            Some(Ok(ControlToWorker::Ping { nonce })) => {
                writer.send(WorkerToControl::Pong { nonce }).await?
            }
            Some(Ok(other)) => early.push(other),
            Some(Err(e)) => {
                anyhow::bail!("bad frame from the supervisor during the journal sync: {e}")
            }
            None => anyhow::bail!("the supervisor closed the link during the journal sync"),
        }
    }
}

/// The writer thread's way to the journal: through the supervisor, over the control link.
pub struct Link {
    out: Outbox,
    pending: Pending,
    next_id: u64,
    /// The journal's last record as this worker knows it.
    last: u64,
    /// Set once a write was refused or lost: this worker writes nothing more.
    broken: Arc<tokio::sync::Notify>,
    stopped: Option<String>,
}

impl Link {
    /// `broken` is told once the worker must stop (see the module doc).
    pub fn new(out: Outbox, pending: Pending, last: u64, broken: Arc<tokio::sync::Notify>) -> Link {
        Link {
            out,
            pending,
            next_id: 0,
            last,
            broken,
            stopped: None,
        }
    }

    fn stop(&mut self, why: String) -> String {
        tracing::error!(reason = why.as_str(), "The agent's journal did not take a write; this worker stops so that the next one syncs again.");
        self.broken.notify_one();
        self.stopped = Some(why.clone());
        why
    }
}

impl dbwriter::Journal for Link {
    fn tables(&self) -> &'static [&'static str] {
        TABLES
    }

    fn record(&mut self, conn: &Connection, changes: String) -> Result<(), String> {
        if let Some(why) = &self.stopped {
            return Err(format!("this worker stopped writing: {why}"));
        }
        if changes.len() > MAX_RECORD {
            // Refused before it was sent: nothing is behind, the worker goes on.
            return Err(format!(
                "one transaction of {} bytes is more than the journal takes through the worker link ({MAX_RECORD} bytes)",
                changes.len()
            ));
        }
        self.next_id += 1;
        let id = self.next_id;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.pending.map().insert(id, tx);
        self.out.push(WorkerToControl::Journal {
            id,
            after: self.last,
            changes,
        });
        let ack = rx.recv_timeout(RECORD_WAIT);
        self.pending.map().remove(&id);
        match ack {
            Ok(JournalAck::Stored { seq }) => {
                set_last_seq(conn, seq).map_err(|e| e.to_string())?;
                self.last = seq;
                Ok(())
            }
            Ok(JournalAck::Refused { reason }) => Err(self.stop(format!("refused: {reason}"))),
            Ok(JournalAck::Failed { error }) => Err(self.stop(error)),
            Ok(JournalAck::Unknown) => Err(self.stop("an answer this build does not know".into())),
            Err(_) => Err(self.stop(format!("no answer within {RECORD_WAIT:?}"))),
        }
    }
}

/// Frames read ahead of the main loop in cluster mode.
const FRAMES_AHEAD: usize = 1024;

/// Cluster mode: the frames that arrived during the journal's sync, then the link's, with
/// the journal's answers taken out on the way (the writer thread waits for them, whatever
/// the main loop is doing).
pub fn frames(
    mut reader: LinkReader,
    early: Vec<ControlToWorker>,
    pending: Pending,
) -> crate::link::Frames {
    // Bounded like the link itself: a busy main loop slows the reading (never the
    // journal's answers, which do not queue here).
    let (tx, rx) = tokio::sync::mpsc::channel(FRAMES_AHEAD);
    tokio::spawn(async move {
        for f in early {
            if tx.send(Ok(f)).await.is_err() {
                return;
            }
        }
        while let Some(frame) = reader.next().await {
            let frame = match frame {
                Ok(ControlToWorker::Journaled { id, ack }) => {
                    pending.answer(id, ack);
                    continue;
                }
                other => other,
            };
            let failed = frame.is_err();
            if tx.send(frame).await.is_err() || failed {
                break;
            }
        }
    });
    Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|f| (f, rx))
    }))
}
