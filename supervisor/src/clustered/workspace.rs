//! The owner's side of an agent's workspace moving with it (`cluster::workspace`): on
//! taking an agent, claim its workspace head and restore the snapshot it names (unless the
//! local files are that snapshot already); after each run, snapshot the workspace if it
//! changed. A workspace over `cluster.workspace_max_mib` is not snapshotted: the head says
//! the agent is pinned here, and this gateway does not hand it over.
//!
//! Nothing here fails a run: a snapshot that cannot be stored is tried again at the next
//! run's end (and before a hand-over), and says why in the log.

use std::path::PathBuf;
use std::sync::Arc;

use cluster::archive::{self, ArchiveError, Manifest};
use cluster::{Lease, Pinned, Refused, WorkspaceHeadAt};

use super::Clustered;
use crate::config::Config;
use crate::gateway::Gateway;
use crate::metrics::Metrics;

/// What this owner knows of its agent's workspace snapshot (`None` until claimed).
pub(super) type Workspace = Arc<tokio::sync::Mutex<Option<Synced>>>;

pub(super) struct Synced {
    head: WorkspaceHeadAt,
    /// The manifest of the local files when they last matched the head's snapshot (`None`:
    /// they never did: the next run's end snapshots them).
    manifest: Option<String>,
}

/// The configured workspace of `agent` (`None`: no such agent).
fn workspace_of(config: &Config, agent: &str) -> Option<PathBuf> {
    config.agent(agent).map(|a| a.workspace.clone())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ArchiveError> + Send + 'static,
) -> Result<T, ArchiveError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(ArchiveError::Io(std::io::Error::other(e.to_string()))))
}

/// Why a workspace snapshot could not be brought here.
#[derive(Debug, thiserror::Error)]
enum Unrestored {
    #[error(transparent)]
    Fetch(#[from] cluster::ClusterError),
    #[error(transparent)]
    Unpack(#[from] ArchiveError),
}

impl Clustered {
    /// Claims `lease.agent`'s workspace head and brings the local files to its snapshot.
    /// `Ok(false)`: a newer owner claimed it (this lease is stale). An engine error is the
    /// caller's to retry; a snapshot that cannot be fetched or unpacked leaves the local
    /// files (said in the log), never the agent stuck.
    pub(super) async fn restore_workspace(
        &self,
        gw: &Gateway,
        lease: &Lease,
        ws: &Workspace,
    ) -> Result<bool, cluster::ClusterError> {
        let agent = lease.agent.as_str();
        let (head, left_behind) = match self.engine.workspace_claim(lease).await? {
            Ok(claimed) => (claimed.head, claimed.left_behind),
            Err(Refused) => return Ok(false),
        };
        let Some(path) = workspace_of(&gw.config(), agent) else {
            return Ok(true);
        };
        let local = {
            let path = path.clone();
            blocking(move || archive::manifest(&path)).await.ok()
        };
        let mut synced = local.as_ref().map(|m| m.digest.clone());
        if let (Some(object), Some(want)) = (&head.head.object, &head.head.manifest) {
            if synced.as_ref() != Some(want) {
                match self.fetch_and_restore(object, path).await {
                    Ok(m) => {
                        tracing::info!(
                            agent,
                            bytes = m.bytes,
                            files = m.files,
                            from = head.head.node.as_str(),
                            "Restored the agent's workspace from the cluster."
                        );
                        gw.metrics.cluster_workspace_restored(agent);
                        synced = Some(m.digest);
                    }
                    Err(e) => {
                        tracing::error!(agent, object = object.as_str(), error = %e, "Cannot restore the agent's workspace from the cluster; it runs with the files this gateway has.");
                        synced = None;
                    }
                }
            }
        }
        if let Some(Pinned { node, bytes }) = &left_behind {
            tracing::warn!(
                agent,
                pinned_on = node.as_str(),
                bytes,
                cap = self.engine.workspace_cap(),
                "The agent's workspace was too large to move with it (cluster.workspace_max_mib): it runs here with the last snapshot that fit."
            );
        }
        *ws.lock().await = Some(Synced {
            head,
            manifest: synced,
        });
        Ok(true)
    }

    async fn fetch_and_restore(&self, object: &str, path: PathBuf) -> Result<Manifest, Unrestored> {
        let data = self.engine.workspace_fetch(object).await?;
        let cap = self.engine.workspace_cap();
        Ok(blocking(move || archive::restore(&path, &data, cap)).await?)
    }

    /// Snapshots `lease.agent`'s workspace if it changed since the last snapshot (or pins
    /// the agent here if it is over the cap).
    pub(super) async fn snapshot_workspace(&self, gw: &Gateway, lease: &Lease, ws: &Workspace) {
        let agent = lease.agent.as_str();
        let mut guard = ws.lock().await;
        let Some(synced) = guard.as_mut() else { return };
        let Some(path) = workspace_of(&gw.config(), agent) else {
            return;
        };
        let cap = self.engine.workspace_cap();
        let pinned_here = synced
            .head
            .head
            .pinned
            .as_ref()
            .is_some_and(|p| p.node == self.engine.node());
        let now = {
            let path = path.clone();
            blocking(move || archive::manifest(&path)).await
        };
        let now = match now {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot read the agent's workspace to snapshot it.");
                return;
            }
        };
        if now.bytes > cap {
            if !pinned_here {
                self.pin(&gw.metrics, lease, synced, now.bytes).await;
            }
            return;
        }
        if synced.manifest.as_deref() == Some(now.digest.as_str()) && !pinned_here {
            return;
        }
        let packed = match blocking(move || archive::pack(&path, cap)).await {
            Ok(p) => p,
            Err(ArchiveError::TooLarge { bytes, .. }) => {
                return self.pin(&gw.metrics, lease, synced, bytes).await;
            }
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot pack the agent's workspace; the next run's end tries again.");
                return;
            }
        };
        let stored = self
            .engine
            .workspace_store(lease, &synced.head, packed.archive, &packed.manifest)
            .await;
        match stored {
            Ok(Ok(head)) => {
                tracing::debug!(
                    agent,
                    bytes = packed.manifest.bytes,
                    files = packed.manifest.files,
                    "Snapshotted the agent's workspace."
                );
                if pinned_here {
                    tracing::info!(
                        agent,
                        "The agent's workspace fits again: it moves with the agent."
                    );
                }
                gw.metrics.cluster_workspace_snapshot(agent, false);
                synced.head = head;
                synced.manifest = Some(packed.manifest.digest);
            }
            Ok(Err(Refused)) => {
                tracing::warn!(agent, epoch = lease.epoch, "A newer owner took the agent's workspace over; this gateway's snapshot is dropped.");
            }
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot store the agent's workspace snapshot; the next run's end tries again.");
            }
        }
    }

    /// Marks the agent's workspace pinned to this gateway (it is over the cap), counted in
    /// `metrics`.
    async fn pin(&self, metrics: &Metrics, lease: &Lease, synced: &mut Synced, bytes: u64) {
        let agent = lease.agent.as_str();
        match self.engine.workspace_pin(lease, &synced.head, bytes).await {
            Ok(Ok(head)) => {
                tracing::warn!(
                    agent,
                    bytes,
                    cap = self.engine.workspace_cap(),
                    "The agent's workspace is over cluster.workspace_max_mib: it is not snapshotted and the agent stays on this gateway (pinned)."
                );
                metrics.cluster_workspace_snapshot(agent, true);
                synced.head = head;
            }
            Ok(Err(Refused)) => {
                tracing::warn!(
                    agent,
                    epoch = lease.epoch,
                    "A newer owner took the agent's workspace over."
                );
            }
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot mark the agent's workspace pinned; trying again after the next run.");
            }
        }
    }
}

/// Whether the agent must stay here: its workspace is pinned to this gateway, or a snapshot
/// of it is being taken now.
pub(super) fn stays(ws: &Workspace, node: &str) -> bool {
    match ws.try_lock() {
        Ok(guard) => guard
            .as_ref()
            .and_then(|s| s.head.head.pinned.as_ref())
            .is_some_and(|p| p.node == node),
        Err(_) => true,
    }
}
