//! Session operations (history, reset, delete, inject, compact) in cluster mode: only the
//! gateway that owns an agent runs its worker, so a session operation asked at any other
//! gateway is carried out there, over a request between gateways, and answered as if here.
//! `chat.history` therefore shows the same transcript on every gateway: the owner's
//! database, itself a cache of the agent's journal.
//!
//! Every request and answer fits one engine message (the servers' `max_payload`): a history
//! page is cut to fit (a shorter page, with the offset that reads the rest), any other answer
//! too large for it is a clear error, and an answer that cannot be published is replaced by
//! one that says why. The asking gateway waits no longer than the operation may take at the
//! owner's worker, plus the hop.

use std::sync::Arc;
use std::time::Duration;

use ipc::session_ops::{HistoryOp, HistoryReply, SessionOp, SessionReply};
use ipc::{ErrorCode, RpcError};
use serde::{Deserialize, Serialize};

use super::Clustered;
use crate::control::{ControlHandle, OpResult};
use crate::gateway::Gateway;

/// Beyond the operation's own time at the worker: the two hops between gateways.
const HOP: Duration = Duration::from_secs(5);
/// What one message leaves for the answer itself (its framing; the reply subject).
const ENVELOPE: usize = 4096;
/// Tries at cutting a history page until its answer fits.
const CUTS: usize = 4;
/// The smallest page a cut asks for (`chat.history`'s own floor for `maxBytes`).
const MIN_PAGE_BYTES: u64 = 1024;

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

fn too_large(what: &str, bytes: usize, room: usize) -> RpcError {
    RpcError::new(
        ErrorCode::InvalidRequest,
        format!(
            "{what} is {bytes} bytes; in cluster mode one message between gateways carries at most {room} bytes (the NATS servers' max_payload)"
        ),
    )
}

/// The answer's bytes as sent between gateways.
fn encode(result: &OpResult) -> Vec<u8> {
    serde_json::to_vec(result).unwrap_or_default()
}

impl Clustered {
    /// The bytes one message between gateways may carry for an operation or its answer.
    fn room(&self) -> usize {
        self.engine.max_payload().saturating_sub(ENVELOPE).max(1024)
    }

    /// Carries out `op` on `agent_id`'s session at the gateway that owns the agent.
    pub async fn session_op(
        &self,
        control: &ControlHandle,
        agent_id: String,
        op: SessionOp,
    ) -> OpResult {
        if self.held().contains_key(&agent_id) {
            return control.session_op(agent_id, op).await;
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
        let wait = Duration::from_secs(op.timeout_secs()) + HOP;
        let payload = serde_json::to_vec(&Forwarded { agent_id, op })
            .map_err(|e| RpcError::new(ErrorCode::Internal, e.to_string()))?;
        if payload.len() > self.room() {
            return Err(too_large("the operation", payload.len(), self.room()));
        }
        let answer = self
            .engine
            .ask(&owner, payload.into(), wait)
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
                    let bytes = match serde_json::from_slice::<Forwarded>(&request.payload) {
                        Ok(f) if me.held().contains_key(&f.agent_id) => {
                            me.carry_out(&gw.control, f.agent_id, f.op).await
                        }
                        Ok(f) => encode(&Err(moving(format!(
                            "gateway {} no longer owns agent {}; try again",
                            me.engine.node(),
                            f.agent_id
                        )))),
                        Err(e) => encode(&Err(RpcError::new(
                            ErrorCode::InvalidRequest,
                            format!("unreadable session operation: {e}"),
                        ))),
                    };
                    me.answer(&request, bytes).await;
                });
            }
        });
    }

    /// `op` at this gateway's worker (through its control actor), as the bytes of an answer
    /// that fits one message: a history page is asked again with fewer bytes until it fits.
    async fn carry_out(
        &self,
        control: &ControlHandle,
        agent_id: String,
        mut op: SessionOp,
    ) -> Vec<u8> {
        let room = self.room();
        if let SessionOp::History(HistoryOp { max_bytes, .. }) = &mut op {
            *max_bytes = Some(max_bytes.map_or(room as u64, |b| b.min(room as u64)));
        }
        for _ in 0..CUTS {
            let result = control.session_op(agent_id.clone(), op.clone()).await;
            let bytes = encode(&result);
            if bytes.len() <= room {
                return bytes;
            }
            // Text escaped as JSON can take more room than the worker counted: a page of
            // proportionally fewer bytes, with its offset to the rest.
            match (&mut op, &result) {
                (
                    SessionOp::History(HistoryOp { max_bytes, .. }),
                    Ok(SessionReply::History(HistoryReply { messages, .. })),
                ) if messages.len() > 1 => {
                    let asked = max_bytes.unwrap_or(room as u64);
                    let cut = asked.saturating_mul(room as u64) / bytes.len() as u64 * 9 / 10;
                    *max_bytes = Some(cut.max(MIN_PAGE_BYTES));
                }
                _ => return encode(&Err(too_large("the answer", bytes.len(), room))),
            }
        }
        encode(&Err(RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "the history page does not fit one message between gateways ({room} bytes) even cut {CUTS} times; ask with a smaller maxBytes"
            ),
        )))
    }

    /// Sends `bytes` to the asking gateway; if that fails, an error that fits, so the asker
    /// never waits out its timeout for an answer that was never coming.
    async fn answer(&self, request: &cluster::events::Request, bytes: Vec<u8>) {
        let len = bytes.len();
        let Err(e) = self.engine.answer(request, bytes.into()).await else {
            return;
        };
        tracing::warn!(error = %e, bytes = len, "Cannot answer another gateway's session operation; answering with the error.");
        let failed = encode(&Err(RpcError::new(
            ErrorCode::Internal,
            format!("the agent's owner could not send its answer: {e}"),
        )));
        if let Err(e) = self.engine.answer(request, failed.into()).await {
            tracing::warn!(error = %e, "Cannot answer another gateway's session operation.");
        }
    }
}
