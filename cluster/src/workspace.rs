//! An agent's workspace files move with the agent: its owner snapshots the workspace to the
//! object store at the end of each run ([`crate::archive`]), and a new owner restores the
//! latest snapshot before it runs anything.
//!
//! Which snapshot is the agent's is the agent's **head** in a bucket, written only with the
//! revision its writer last saw (the engine checks it). A new owner first *claims* the head
//! (writes its node and epoch there); from then on an owner it replaced (paused, cut off) can
//! no longer make its own snapshot current: its write names a revision that is not the
//! latest. An object is named by agent, epoch and content, put before the head names it, and
//! deleted once a newer head no longer does.
//!
//! A workspace larger than the cap does not travel: the head says the agent is **pinned**
//! (with the size), its owner keeps it (no hand-over), and an owner that takes it after the
//! pinned owner was lost restores the last snapshot that fit, and says so.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::archive::Manifest;
use crate::engine::{retrying, ClusterError, Engine, REQUEST_TIMEOUT};
use crate::journal::Refused;
use crate::kv::{create, current, taken, Created};
use crate::lease::Lease;
use crate::names::check_name;
use crate::runs::decode;

/// An agent's current workspace snapshot, and who may replace it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceHead {
    /// The owner that claimed or wrote it last, under this epoch.
    pub node: String,
    pub epoch: u64,
    /// The object holding the snapshot (`None`: no snapshot yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// The snapshot's manifest digest ([`Manifest::digest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// Bytes of files in the snapshot.
    #[serde(default)]
    pub bytes: u64,
    /// Set while the workspace is over the cap: its size then, and the owner it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pinned>,
}

/// A workspace too large to move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pinned {
    pub node: String,
    pub bytes: u64,
}

/// The head as this owner holds it: what it says and the revision the next write names.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub head: WorkspaceHead,
    pub revision: u64,
}

/// A head this owner claimed, and the pin it lifted: the workspace that was too large to
/// move stayed on that gateway, and this owner has the last snapshot that fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub head: Head,
    pub left_behind: Option<Pinned>,
}

impl Engine {
    /// Claims `lease.agent`'s workspace head for this owner: from now on no earlier owner can
    /// replace the snapshot. `Refused` when a newer owner claimed it already.
    pub async fn workspace_claim(
        &self,
        lease: &Lease,
    ) -> Result<Result<Claimed, Refused>, ClusterError> {
        let agent = lease.agent.as_str();
        check_name(agent).map_err(ClusterError::Name)?;
        loop {
            let seen = current(&self.workspaces, agent).await?.filter(|c| c.live);
            let Some(seen) = seen else {
                let head = self.fresh_head(lease);
                match create(&self.workspaces, agent, encode(&head)?).await? {
                    Created::New(revision) => {
                        return Ok(Ok(Claimed {
                            head: Head { head, revision },
                            left_behind: None,
                        }))
                    }
                    Created::Taken(_) => continue,
                }
            };
            let mut head: WorkspaceHead = decode(agent, &seen.value)?;
            if head.epoch > lease.epoch {
                return Ok(Err(Refused));
            }
            head.node = self.node.clone();
            head.epoch = lease.epoch;
            // A pin holds an agent on the gateway its workspace is on; here it runs with
            // the last snapshot that fit, and is free to move again.
            let left_behind = head.pinned.take_if(|p| p.node != self.node);
            match self.write_head(agent, &head, seen.revision).await? {
                Some(revision) => {
                    return Ok(Ok(Claimed {
                        head: Head { head, revision },
                        left_behind,
                    }))
                }
                // Written meanwhile (by an owner before this one, or a newer one): again.
                None => continue,
            }
        }
    }

    /// The snapshot `object` (as a head names it).
    pub async fn workspace_fetch(&self, object: &str) -> Result<Vec<u8>, ClusterError> {
        use tokio::io::AsyncReadExt;
        let mut obj = retrying(REQUEST_TIMEOUT, || async {
            self.objects.get(object).await.map_err(ClusterError::engine)
        })
        .await?;
        let mut out = Vec::new();
        obj.read_to_end(&mut out)
            .await
            .map_err(|e| ClusterError::Engine(format!("reading snapshot {object}: {e}")))?;
        Ok(out)
    }

    /// Makes `archive` (of a workspace whose manifest is `manifest`) the agent's snapshot,
    /// after `at`. `Refused`: a newer owner claimed the head (nothing of this one is kept).
    pub async fn workspace_store(
        &self,
        lease: &Lease,
        at: &Head,
        archive: Vec<u8>,
        manifest: &Manifest,
    ) -> Result<Result<Head, Refused>, ClusterError> {
        let name = format!(
            "{}/{}/{}",
            lease.agent,
            lease.epoch,
            &manifest.digest[..manifest.digest.len().min(32)]
        );
        let data = Bytes::from(archive);
        retrying(REQUEST_TIMEOUT, || async {
            let mut reader = std::io::Cursor::new(data.clone());
            self.objects
                .put(name.as_str(), &mut reader)
                .await
                .map_err(ClusterError::engine)
        })
        .await?;
        let head = WorkspaceHead {
            node: self.node.clone(),
            epoch: lease.epoch,
            object: Some(name.clone()),
            manifest: Some(manifest.digest.clone()),
            bytes: manifest.bytes,
            pinned: None,
        };
        let stored = self.replace_head(lease, at, &head).await?;
        match &stored {
            Ok(_) => {
                if let Some(old) = at.head.object.as_deref().filter(|o| *o != name) {
                    self.forget(old).await;
                }
            }
            Err(Refused) => self.forget(&name).await,
        }
        Ok(stored)
    }

    /// Says on the head that the workspace (`bytes` of files) is too large to move and stays
    /// on this owner; the last snapshot that fit stays named.
    pub async fn workspace_pin(
        &self,
        lease: &Lease,
        at: &Head,
        bytes: u64,
    ) -> Result<Result<Head, Refused>, ClusterError> {
        let head = WorkspaceHead {
            pinned: Some(Pinned {
                node: self.node.clone(),
                bytes,
            }),
            ..at.head.clone()
        };
        self.replace_head(lease, at, &head).await
    }

    /// `agent`'s workspace head, as the cluster has it now.
    pub async fn workspace_head(&self, agent: &str) -> Result<Option<WorkspaceHead>, ClusterError> {
        check_name(agent).map_err(ClusterError::Name)?;
        match current(&self.workspaces, agent).await?.filter(|c| c.live) {
            Some(c) => Ok(Some(decode(agent, &c.value)?)),
            None => Ok(None),
        }
    }

    /// Writes `head` after `at`; a refused write is this owner's own (its answer lost) when
    /// the head there now is exactly `head`.
    async fn replace_head(
        &self,
        lease: &Lease,
        at: &Head,
        head: &WorkspaceHead,
    ) -> Result<Result<Head, Refused>, ClusterError> {
        let agent = lease.agent.as_str();
        if let Some(revision) = self.write_head(agent, head, at.revision).await? {
            return Ok(Ok(Head {
                head: head.clone(),
                revision,
            }));
        }
        match current(&self.workspaces, agent).await?.filter(|c| c.live) {
            Some(c) if decode::<WorkspaceHead>(agent, &c.value)? == *head => Ok(Ok(Head {
                head: head.clone(),
                revision: c.revision,
            })),
            _ => Ok(Err(Refused)),
        }
    }

    /// The head's new revision, or `None` if `after` is not its latest.
    async fn write_head(
        &self,
        agent: &str,
        head: &WorkspaceHead,
        after: u64,
    ) -> Result<Option<u64>, ClusterError> {
        let value = encode(head)?;
        retrying(REQUEST_TIMEOUT, || async {
            match self.workspaces.update(agent, value.clone(), after).await {
                Ok(rev) => Ok(Some(rev)),
                Err(e) if taken(&e) => Ok(None),
                Err(e) => Err(ClusterError::engine(e)),
            }
        })
        .await
    }

    /// Deletes a snapshot no head names any more (one left behind only costs space).
    async fn forget(&self, object: &str) {
        if let Err(e) = self.objects.delete(object).await {
            tracing::warn!(object, error = %e, "Cannot delete a workspace snapshot no longer used.");
        }
    }

    fn fresh_head(&self, lease: &Lease) -> WorkspaceHead {
        WorkspaceHead {
            node: self.node.clone(),
            epoch: lease.epoch,
            object: None,
            manifest: None,
            bytes: 0,
            pinned: None,
        }
    }
}

fn encode(head: &WorkspaceHead) -> Result<Bytes, ClusterError> {
    serde_json::to_vec(head)
        .map(Bytes::from)
        .map_err(ClusterError::engine)
}
