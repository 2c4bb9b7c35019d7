//! Session operations (history, reset, delete, inject, compact) in cluster mode: only the
//! gateway that owns an agent runs its worker, so a session operation asked at any other
//! gateway is carried out there, over a request between gateways, and answered as if here.
//! `chat.history` therefore shows the same transcript on every gateway: the owner's
//! database, itself a cache of the agent's journal.

use std::sync::Arc;
use std::time::Duration;

use ipc::session_ops::SessionOp;
use ipc::{ErrorCode, RpcError};
use serde::{Deserialize, Serialize};

use super::Clustered;
use crate::control::OpResult;
use crate::gateway::Gateway;

/// How long a forwarded operation may take (a compaction asks the model for a summary).
const OP_WAIT: Duration = Duration::from_secs(600);

/// A session operation on its way to the agent's owner.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Forwarded {
    agent_id: String,
    op: SessionOp,
}

fn moving(message: String) -> RpcError {
    RpcError {
        code: ErrorCode::Overloaded,
        message,
        retryable: true,
    }
}

impl Clustered {
    /// Carries out `op` on `agent_id`'s session at the gateway that owns the agent.
    pub async fn session_op(&self, gw: &Gateway, agent_id: String, op: SessionOp) -> OpResult {
        if self.held().contains_key(&agent_id) {
            return gw.control.session_op(agent_id, op).await;
        }
        let owner = match self.engine.owner(&agent_id).await {
            Ok(Some((node, _))) if node != self.engine.node() => node,
            Ok(_) => {
                return Err(moving(format!(
                    "agent {agent_id} is between owners in the cluster right now; try again"
                )))
            }
            Err(e) => {
                return Err(moving(format!(
                    "the cluster cannot say who owns agent {agent_id}: {e}"
                )))
            }
        };
        let payload = serde_json::to_vec(&Forwarded { agent_id, op })
            .map_err(|e| RpcError::new(ErrorCode::Internal, e.to_string()))?;
        let answer = self
            .engine
            .ask(&owner, payload.into(), OP_WAIT)
            .await
            .map_err(|e| moving(e.to_string()))?;
        serde_json::from_slice::<OpResult>(&answer).map_err(|e| {
            RpcError::new(
                ErrorCode::Internal,
                format!("gateway {owner} answered a session operation unreadably: {e}"),
            )
        })?
    }

    /// Answers the session operations other gateways send here, for the agents this
    /// gateway owns, until the gateway stops.
    pub(super) async fn serve_ops(self: &Arc<Self>, gw: Arc<Gateway>) {
        let mut requests = match self.engine.requests().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "Cannot take session operations from other gateways.");
                return;
            }
        };
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let request = tokio::select! {
                    r = requests.next() => match r { Some(r) => r, None => break },
                    _ = gw.stopping.cancelled() => break,
                };
                let (me, gw) = (me.clone(), gw.clone());
                tokio::spawn(async move {
                    let result: OpResult =
                        match serde_json::from_slice::<Forwarded>(&request.payload) {
                            Ok(f) if me.held().contains_key(&f.agent_id) => {
                                gw.control.session_op(f.agent_id, f.op).await
                            }
                            Ok(f) => Err(moving(format!(
                                "gateway {} no longer owns agent {}; try again",
                                me.engine.node(),
                                f.agent_id
                            ))),
                            Err(e) => Err(RpcError::new(
                                ErrorCode::InvalidRequest,
                                format!("unreadable session operation: {e}"),
                            )),
                        };
                    let bytes = serde_json::to_vec(&result).unwrap_or_default();
                    if let Err(e) = me.engine.answer(request, bytes.into()).await {
                        tracing::warn!(error = %e, "Cannot answer another gateway's session operation.");
                    }
                });
            }
        });
    }
}
