//! The agents' journals, for this gateway's workers (see `cluster::journal` and
//! `worker::store::journal`): a worker of an agent this gateway owns replays the records
//! its database lacks, then records each transaction before committing it. Only the lease
//! holder's workers are served; the engine refuses whatever a taken-over owner still sends.

use ipc::control::{ControlToWorker, JournalAck, JournalChanges};
use tokio::sync::mpsc;

use super::Clustered;

/// Longest wait of a starting worker for its gateway's takeover record.
const TAKEOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Most bytes of records in one replay frame (the link's frames are at most 16 MiB).
const REPLAY_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// Why a worker cannot sync its journal through this gateway.
#[derive(Debug, thiserror::Error)]
enum SyncRefused {
    #[error("gateway {node} does not own agent {agent} (another gateway runs it)")]
    NotOwner { node: String, agent: String },
    #[error("gateway {node} has not taken agent {agent}'s journal over within {TAKEOVER_WAIT:?}")]
    NotTakenOver { node: String, agent: String },
    #[error(
        "a newer owner (epoch {newer}) took agent {agent} over from gateway {node} (epoch {mine})"
    )]
    Superseded {
        newer: u64,
        agent: String,
        node: String,
        mine: u64,
    },
    #[error("journal record {seq} of {agent} is not UTF-8")]
    NotText { seq: u64, agent: String },
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
}

impl Clustered {
    /// The lease this gateway holds on `agent`, if any.
    fn lease_of(&self, agent: &str) -> Option<cluster::Lease> {
        self.held().get(agent).map(|h| h.lease.clone())
    }

    /// The lease on `agent` once its takeover record is in the journal (waiting for it up
    /// to [`TAKEOVER_WAIT`]); `None` if this gateway does not hold the agent.
    async fn taken_lease(&self, agent: &str) -> Result<cluster::Lease, SyncRefused> {
        let not_mine = || SyncRefused::NotOwner {
            node: self.engine.node().to_owned(),
            agent: agent.to_owned(),
        };
        let mut taken = self
            .held()
            .get(agent)
            .map(|h| h.shared.taken.subscribe())
            .ok_or_else(not_mine)?;
        let waited = tokio::time::timeout(TAKEOVER_WAIT, taken.wait_for(|t| *t))
            .await
            .map(|r| r.is_ok());
        match waited {
            Ok(true) => self.lease_of(agent).ok_or_else(not_mine),
            Ok(false) => Err(not_mine()),
            Err(_) => Err(SyncRefused::NotTakenOver {
                node: self.engine.node().to_owned(),
                agent: agent.to_owned(),
            }),
        }
    }

    /// Answers a worker's `JournalSync`: the records of `agent`'s journal after `after`, in
    /// frames, the last one saying where the journal ends (or why the worker cannot serve).
    pub(crate) async fn journal_sync(
        &self,
        agent: &str,
        after: u64,
        to: &mpsc::Sender<ControlToWorker>,
    ) {
        let replay = match self.taken_lease(agent).await {
            Err(e) => Err(e),
            Ok(lease) => self.replay_for(&lease, after).await,
        };
        let replay = match replay {
            Ok(r) => r,
            Err(error) => return refuse_sync(to, error).await,
        };
        let mut frame = Vec::new();
        let mut bytes = 0;
        for r in replay.records {
            if r.kind != cluster::journal::Kind::Changes {
                continue;
            }
            let changes = match String::from_utf8(r.changes) {
                Ok(c) => c,
                Err(_) => {
                    let error = SyncRefused::NotText {
                        seq: r.seq,
                        agent: agent.to_owned(),
                    };
                    return refuse_sync(to, error).await;
                }
            };
            if bytes + changes.len() > REPLAY_FRAME_BYTES && !frame.is_empty() {
                let records = std::mem::take(&mut frame);
                bytes = 0;
                let more = ControlToWorker::JournalReplay {
                    records,
                    last: None,
                    error: None,
                };
                if to.send(more).await.is_err() {
                    return;
                }
            }
            bytes += changes.len();
            frame.push(JournalChanges {
                seq: r.seq,
                changes,
            });
        }
        let _ = to
            .send(ControlToWorker::JournalReplay {
                records: frame,
                last: Some(replay.last),
                error: None,
            })
            .await;
    }

    /// The records after `after`, unless a newer owner wrote in the journal: then this
    /// gateway's lease is stale, and a worker synced to the newer owner's records must not
    /// append after them.
    async fn replay_for(
        &self,
        lease: &cluster::Lease,
        after: u64,
    ) -> Result<cluster::Replay, SyncRefused> {
        let agent = lease.agent.as_str();
        let replay = self.engine.journal_read(agent, after).await?;
        let last = self.engine.journal_last(agent).await?;
        if last.epoch > lease.epoch {
            return Err(SyncRefused::Superseded {
                newer: last.epoch,
                agent: agent.to_owned(),
                node: self.engine.node().to_owned(),
                mine: lease.epoch,
            });
        }
        Ok(replay)
    }

    /// Records one transaction of `agent`'s worker after record `after`.
    pub(crate) async fn journal_write(&self, agent: &str, after: u64, changes: &str) -> JournalAck {
        let Some(lease) = self.lease_of(agent) else {
            return JournalAck::Failed {
                error: format!(
                    "gateway {} no longer owns agent {agent}",
                    self.engine.node()
                ),
            };
        };
        match self
            .engine
            .journal_append(&lease, after, changes.as_bytes())
            .await
        {
            Ok(Ok(seq)) => JournalAck::Stored { seq },
            Ok(Err(cluster::Refused)) => JournalAck::Refused {
                reason: format!(
                    "another record follows journal record {after} of agent {agent} (taken over by a newer owner than epoch {})",
                    lease.epoch
                ),
            },
            Err(e) => JournalAck::Failed {
                error: e.to_string(),
            },
        }
    }
}

/// Tells a syncing worker why it cannot serve (it exits; the next one syncs again).
async fn refuse_sync(to: &mpsc::Sender<ControlToWorker>, error: SyncRefused) {
    let _ = to
        .send(ControlToWorker::JournalReplay {
            records: Vec::new(),
            last: None,
            error: Some(error.to_string()),
        })
        .await;
}

impl crate::worker_link::Journal for Clustered {
    fn sync<'a>(
        &'a self,
        agent: &'a str,
        after: u64,
        to: &'a mpsc::Sender<ControlToWorker>,
    ) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(self.journal_sync(agent, after, to))
    }

    fn write<'a>(
        &'a self,
        agent: &'a str,
        after: u64,
        changes: &'a str,
    ) -> futures_util::future::BoxFuture<'a, JournalAck> {
        Box::pin(self.journal_write(agent, after, changes))
    }
}
