//! The seam between the gateway's requests and cluster mode: what a request does
//! differently when the gateway is a member of a cluster (`[cluster]`), asked through one
//! interface. The gateway keeps a [`ClusterCell`], empty on a single host; `serve` fills it
//! with the `clustered` implementation once the gateway has joined. Nothing outside
//! `clustered/`, `serve.rs`, `lib.rs` and this file names cluster mode's own types.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use ipc::control::SubmitRun;
use ipc::gateway::{AgentWaitResult, AttachmentPolicy, ClusterStatus};
use ipc::session_ops::SessionOp;

use crate::control::{ControlHandle, OpResult};
use crate::outcome::StoredTerminal;

/// Where the gateway keeps its place in the cluster, once joined.
pub type ClusterCell = Arc<OnceLock<Arc<dyn ClusterBackend>>>;

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

    /// Claims the run's key cluster-wide and queues the run for its agent's owner.
    fn submit(
        &self,
        record: cluster::RunRecord,
        run: SubmitRun,
    ) -> BoxFuture<'_, Result<Submitted, ClusterRunError>>;

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
