//! The seam between the gateway's requests and cluster mode: what a request does
//! differently when the gateway is a member of a cluster (`[cluster]`), asked through one
//! interface. The gateway keeps a [`Backend`]; on a single host it answers for this gateway
//! alone, and `serve` puts the `clustered` implementation of [`ClusterBackend`] in it once
//! the gateway has joined. Either way a run starts at the gateway that runs it through one
//! function, [`local::start`] (room in the queues, the record, the hand-over, the failure):
//! called by admission on a single host, by the agent's owner in cluster mode. Nothing
//! outside `clustered/`, `serve.rs`, `lib.rs` and this file names cluster mode's own types.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use ipc::gateway::{AgentWaitResult, AttachmentPolicy, ClusterStatus};
use ipc::session_ops::{Op, SessionOp};

use crate::control::{reply_of, AskError, ControlHandle, OpResult};
use crate::outcome::StoredTerminal;

pub mod local;

pub use local::RunStart;

/// What the gateway's requests ask of the mode it runs in: answered here for a single
/// gateway, by the cluster once this gateway has joined one.
#[derive(Clone, Default)]
pub struct Backend {
    /// This gateway's place in the cluster, once joined (set once, by `serve`).
    cluster: Arc<OnceLock<Arc<dyn ClusterBackend>>>,
}

impl Backend {
    /// From now on, the cluster answers (`serve`, once the gateway joined; once only).
    pub fn join(&self, cluster: Arc<dyn ClusterBackend>) {
        let _ = self.cluster.set(cluster);
    }

    /// Cluster mode's side, for what only a cluster does (a run queued for another
    /// gateway, the outcome of a run this gateway does not know); `None` on a single host.
    pub fn elsewhere(&self) -> Option<&Arc<dyn ClusterBackend>> {
        self.cluster.get()
    }

    /// The attachments one run may carry, as `hello-ok` advertises them.
    pub fn attachment_policy(&self) -> AttachmentPolicy {
        match self.cluster.get() {
            Some(c) => c.attachment_policy(),
            None => AttachmentPolicy::GATEWAY,
        }
    }

    /// The cluster as this gateway sees it, for `loopgate.status` (`None`: a single host).
    pub async fn status(&self, agents: &[String]) -> Option<ClusterStatus> {
        match self.cluster.get() {
            Some(c) => Some(c.status(agents).await),
            None => None,
        }
    }

    /// `op` on `agent_id`'s session at the worker that holds it (this gateway's, or the
    /// owner's in cluster mode), answered with the reply of its kind.
    pub async fn ask<O: Op>(
        &self,
        control: &ControlHandle,
        agent_id: String,
        op: O,
    ) -> Result<O::Reply, AskError> {
        let op = op.into();
        let result = match self.cluster.get() {
            Some(c) => c.session_op(control, agent_id, op).await,
            None => control.session_op(agent_id, op).await,
        };
        reply_of::<O>(result)
    }
}

/// How a submission went.
pub enum Submitted {
    /// Claimed and queued: the answer comes with the outcome.
    New,
    /// Accepted before (any gateway) and not ended yet.
    InFlight {
        agent_id: String,
        session_key: String,
    },
    /// Accepted before and ended: its outcome.
    Finished(StoredTerminal),
    /// The key was used for a different request (why).
    Conflict(String),
}

/// Why the cluster could not take a run, or give its outcome.
#[derive(Debug, thiserror::Error)]
pub enum ClusterRunError {
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    #[error("the run is {size} bytes with its message and attachments; cluster mode carries at most {limit} bytes per run (the NATS servers' max_payload)")]
    TooLarge { size: usize, limit: usize },
    #[error("cannot encode the run: {0}")]
    Encode(serde_json::Error),
    #[error("the cluster's outcome of {run_id} is unreadable: {why}")]
    Unreadable {
        run_id: String,
        why: serde_json::Error,
    },
    #[error("the gateway stopped before the run finished")]
    Stopped,
    /// The task waiting for the outcome ended without one (it panicked or was cancelled).
    #[error("waiting for the run's outcome failed: {0}")]
    Waiting(String),
}

/// What a cluster member does where a single gateway does it alone.
pub trait ClusterBackend: Send + Sync {
    /// This gateway's node name.
    fn node(&self) -> &str;

    /// The attachments one run may carry (it crosses the cluster as one message).
    fn attachment_policy(&self) -> AttachmentPolicy;

    /// The cluster as this gateway sees it, for `loopgate.status`.
    fn status<'a>(&'a self, agents: &'a [String]) -> BoxFuture<'a, ClusterStatus>;

    /// `op` on `agent_id`'s session, at whichever gateway owns the agent (`control`: this
    /// gateway's, for the agents it owns).
    fn session_op<'a>(
        &'a self,
        control: &'a ControlHandle,
        agent_id: String,
        op: SessionOp,
    ) -> BoxFuture<'a, OpResult>;

    /// Claims the run's key cluster-wide and queues the run for its agent's owner (which
    /// starts it with [`local::start`]).
    fn submit(&self, run: RunStart) -> BoxFuture<'_, Result<Submitted, ClusterRunError>>;

    /// The run's outcome, whichever gateway recorded it (waits for it).
    fn outcome(
        self: Arc<Self>,
        run_id: String,
    ) -> BoxFuture<'static, Result<StoredTerminal, ClusterRunError>>;

    /// `agent.wait` for a run this gateway does not know: its outcome within `window`.
    fn wait_result<'a>(
        &'a self,
        run_id: &'a str,
        window: Duration,
    ) -> BoxFuture<'a, Option<AgentWaitResult>>;
}
