//! Cluster mode behind the gateway's seam (`crate::backend`): what a request asks of the
//! cluster, answered by this gateway's `Clustered`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use ipc::gateway::{AgentWaitResult, AttachmentPolicy, ClusterStatus};
use ipc::session_ops::SessionOp;

use super::{front, Clustered};
use crate::backend::{ClusterBackend, ClusterRunError, RunStart, Submitted};
use crate::control::{ControlHandle, OpResult};
use crate::outcome::StoredTerminal;

impl ClusterBackend for Clustered {
    fn node(&self) -> &str {
        self.engine.node()
    }

    fn attachment_policy(&self) -> AttachmentPolicy {
        AttachmentPolicy::within(self.engine.max_payload() as u64)
    }

    fn status<'a>(&'a self, agents: &'a [String]) -> BoxFuture<'a, ClusterStatus> {
        Box::pin(Clustered::status(self, agents))
    }

    fn session_op<'a>(
        &'a self,
        control: &'a ControlHandle,
        agent_id: String,
        op: SessionOp,
    ) -> BoxFuture<'a, OpResult> {
        Box::pin(Clustered::session_op(self, control, agent_id, op))
    }

    fn submit(&self, run: RunStart) -> BoxFuture<'_, Result<Submitted, ClusterRunError>> {
        Box::pin(front::submit(self, run))
    }

    fn outcome(
        self: Arc<Self>,
        run_id: String,
    ) -> BoxFuture<'static, Result<StoredTerminal, ClusterRunError>> {
        Box::pin(async move { front::outcome(&self, &run_id).await })
    }

    fn wait_result<'a>(
        &'a self,
        run_id: &'a str,
        window: Duration,
    ) -> BoxFuture<'a, Option<AgentWaitResult>> {
        Box::pin(front::wait_result(self, run_id, window))
    }
}
