//! Agent placement: one gateway owns an agent at a time, through a lease in a bucket whose
//! entries expire after the lease TTL unless renewed (the bucket's `max_age`). The entry's
//! revision when a gateway takes it is that ownership's **epoch**: revisions only grow, so
//! a later owner always has a larger epoch than any earlier one. A renewal is an update
//! that names the revision it last saw, so an owner that was replaced (its entry expired
//! and was taken) learns it at its next renewal and must stop.
//!
//! Also here: starting a run, which is set once on the run's record so that a run executes
//! at most once cluster-wide, whichever owner (old or new) gets there first.

use std::time::Duration;

use bytes::Bytes;

use crate::engine::{retrying, ClusterError, Engine};
use crate::kv::{create, current, taken, Created};
use crate::names::{check_name, digest};
use crate::records::{PlacementRecord, RunRecord, StartRecord};
use crate::runs::decode;

/// Longest wait for one renewal's acknowledgement before it is sent again.
const RENEW_ATTEMPT: Duration = Duration::from_secs(1);

/// An agent's lease, held by this gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub agent: String,
    /// The ownership's epoch (the entry's revision when it was taken).
    pub epoch: u64,
    /// The entry's current revision (what the next renewal names).
    pub revision: u64,
}

/// How asking for an agent went.
#[derive(Debug, PartialEq)]
pub enum Acquired {
    Held(Lease),
    /// Another gateway owns it, under this epoch.
    Owned {
        node: String,
        epoch: u64,
    },
}

/// How starting a run went.
#[derive(Debug, PartialEq)]
pub enum Start {
    /// This gateway starts it now.
    Mine,
    /// It was started already (by this or another owner); it must not run again.
    Taken(StartRecord),
    /// No gateway accepted this run.
    Unknown,
}

impl Engine {
    /// How long a lease lasts unrenewed; owners renew three times per TTL.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// Takes `agent` if no live gateway owns it. A lease this gateway held before it
    /// restarted is taken again under a new epoch (the old one's runs are over).
    pub async fn acquire(&self, agent: &str) -> Result<Acquired, ClusterError> {
        check_name(agent).map_err(ClusterError::Name)?;
        // A new lease's epoch is the revision the engine gives it, known only after the
        // write: its renewals carry it.
        let value = self.placement_value(None)?;
        loop {
            let entry = match create(&self.placement, agent, value.clone()).await? {
                Created::New(rev) => {
                    return Ok(Acquired::Held(Lease {
                        agent: agent.to_owned(),
                        epoch: rev,
                        revision: rev,
                    }))
                }
                Created::Taken(entry) => entry,
            };
            let owner: PlacementRecord = decode(agent, &entry.value)?;
            if owner.node != self.node {
                return Ok(Acquired::Owned {
                    node: owner.node,
                    epoch: owner.epoch.unwrap_or(entry.revision),
                });
            }
            match self
                .placement
                .update(agent, value.clone(), entry.revision)
                .await
            {
                Ok(rev) => {
                    return Ok(Acquired::Held(Lease {
                        agent: agent.to_owned(),
                        epoch: rev,
                        revision: rev,
                    }))
                }
                Err(e) if taken(&e) => continue,
                Err(e) => return Err(ClusterError::engine(e)),
            }
        }
    }

    /// Renews `lease`, giving up (an error) once `within` has passed: `Ok(false)` when it
    /// was lost (another gateway owns the agent now, or the entry expired): the caller must
    /// stop running the agent at once. `within` is what is left of the lease: an answer
    /// later than that is no use (the lease may have lapsed meanwhile).
    pub async fn renew(&self, lease: &mut Lease, within: Duration) -> Result<bool, ClusterError> {
        match tokio::time::timeout(within, self.renew_now(lease, within)).await {
            Ok(renewed) => renewed,
            Err(_) => Err(ClusterError::Engine(format!(
                "no answer to the renewal of {}'s lease within {} ms",
                lease.agent,
                within.as_millis()
            ))),
        }
    }

    async fn renew_now(&self, lease: &mut Lease, within: Duration) -> Result<bool, ClusterError> {
        let value = self.placement_value(Some(lease.epoch))?;
        // Each attempt waits a second at most: an acknowledgement lost while a stream
        // changes leaders would otherwise spend the whole lease on one publish (seen after a
        // kill: takes went through while every renewal waited out its budget). A repeat of
        // a write that was stored is refused and then recognized below.
        let written = retrying(within, || async {
            let update = self
                .placement
                .update(&lease.agent, value.clone(), lease.revision);
            match tokio::time::timeout(RENEW_ATTEMPT, update).await {
                Ok(Ok(rev)) => Ok(Some(rev)),
                Ok(Err(e)) if taken(&e) => Ok(None),
                Ok(Err(e)) => Err(ClusterError::engine(e)),
                Err(_) => Err(ClusterError::Engine("no acknowledgement within 1 s".into())),
            }
        })
        .await?;
        if let Some(rev) = written {
            lease.revision = rev;
            return Ok(true);
        }
        // Refused: lost, unless the refused write was a repeat of one that was stored
        // (its answer lost), which leaves this ownership's value there.
        let Some(entry) = current(&self.placement, &lease.agent)
            .await?
            .filter(|e| e.live)
        else {
            return Ok(false);
        };
        let owner: PlacementRecord = decode(&lease.agent, &entry.value)?;
        if owner.node == self.node && owner.epoch == Some(lease.epoch) {
            lease.revision = entry.revision;
            return Ok(true);
        }
        Ok(false)
    }

    /// Gives `lease` up (a draining gateway): another gateway may take the agent at once.
    pub async fn release(&self, lease: &Lease) -> Result<(), ClusterError> {
        match self
            .placement
            .purge_expect_revision(&lease.agent, Some(lease.revision))
            .await
        {
            Ok(()) => Ok(()),
            // Lost already: nothing of ours to give up.
            Err(e) if taken(&e) => Ok(()),
            Err(e) => Err(ClusterError::engine(e)),
        }
    }

    /// Who owns `agent` now, with the epoch.
    pub async fn owner(&self, agent: &str) -> Result<Option<(String, u64)>, ClusterError> {
        check_name(agent).map_err(ClusterError::Name)?;
        let Some(entry) = current(&self.placement, agent).await?.filter(|e| e.live) else {
            return Ok(None);
        };
        let owner: PlacementRecord = decode(agent, &entry.value)?;
        // Until its first renewal a lease's revision is its epoch.
        Ok(Some((owner.node, owner.epoch.unwrap_or(entry.revision))))
    }

    /// Marks `run_id` started by this gateway under `lease`, unless it was started before.
    pub async fn start(&self, run_id: &str, lease: &Lease) -> Result<Start, ClusterError> {
        let key = digest(run_id);
        loop {
            let Some(entry) = current(&self.runs, &key).await?.filter(|e| e.live) else {
                return Ok(Start::Unknown);
            };
            let mut rec: RunRecord = decode(&key, &entry.value)?;
            let mine = StartRecord {
                node: self.node.clone(),
                epoch: lease.epoch,
            };
            if let Some(s) = rec.started {
                return Ok(if s == mine {
                    Start::Mine
                } else {
                    Start::Taken(s)
                });
            }
            rec.started = Some(mine);
            let bytes = serde_json::to_vec(&rec).map_err(ClusterError::engine)?;
            // Refused: someone changed the record since it was read (or this very write was
            // stored and its answer lost): read it again and see.
            match self
                .runs
                .update(&key, Bytes::from(bytes), entry.revision)
                .await
            {
                Ok(_) => return Ok(Start::Mine),
                Err(e) if taken(&e) => continue,
                Err(e) => return Err(ClusterError::engine(e)),
            }
        }
    }

    fn placement_value(&self, epoch: Option<u64>) -> Result<Bytes, ClusterError> {
        let rec = PlacementRecord {
            node: self.node.clone(),
            epoch,
        };
        serde_json::to_vec(&rec)
            .map(Bytes::from)
            .map_err(ClusterError::engine)
    }
}
