//! The front door's side: a run accepted here is claimed cluster-wide and queued for its
//! agent's owner; its outcome is read from the cluster, whoever wrote it.

use std::time::Duration;

use bytes::Bytes;
use cluster::{Accepted, RunRecord};
use ipc::gateway::AgentWaitResult;

use super::{Clustered, Travelling};
use crate::backend::{ClusterRunError, RunStart, Submitted};
use crate::outcome::{stored_wait_result, StoredTerminal};

/// Claims `run.run_id` (the idempotency key) cluster-wide for this request, durably, and
/// puts the run on `agent_id`'s queue. A retry of a run whose first attempt was claimed but
/// never queued (its gateway died in between) queues it again.
pub async fn submit(c: &Clustered, start: RunStart) -> Result<Submitted, ClusterRunError> {
    let node_record = RunRecord {
        run_id: start.run.run_id.clone(),
        agent_id: start.agent_id.clone(),
        session_key: start.run.session_key.clone(),
        accepted_at: start.run.accepted_at,
        request_hash: start.request_hash.clone(),
        node: c.engine.node().to_owned(),
        started: None,
    };
    let travelling = Travelling {
        agent_id: start.agent_id,
        request_hash: start.request_hash,
        run: start.run,
    };
    let payload = serde_json::to_vec(&travelling).map_err(ClusterRunError::Encode)?;
    // Room for the headers the engine adds.
    let limit = c.engine.max_payload().saturating_sub(4096);
    if payload.len() > limit {
        return Err(ClusterRunError::TooLarge {
            size: payload.len(),
            limit,
        });
    }
    let run_id = node_record.run_id.clone();
    match c.engine.accept(&node_record).await? {
        Accepted::New => {}
        Accepted::Conflict(why) => return Ok(Submitted::Conflict(why)),
        Accepted::Existing(first) => {
            if let Some(done) = c.engine.outcome(&run_id).await? {
                return terminal(&done).map(Submitted::Finished);
            }
            // Queued again in case the first front door died before queuing it (a run
            // queued twice is started once: `Engine::start`).
            c.engine
                .enqueue(&first.agent_id, &run_id, Bytes::from(payload))
                .await?;
            return Ok(Submitted::InFlight {
                agent_id: first.agent_id,
                session_key: first.session_key,
            });
        }
    }
    c.engine
        .enqueue(&node_record.agent_id, &run_id, Bytes::from(payload))
        .await?;
    Ok(Submitted::New)
}

/// Waits for the run's outcome, wherever it is written (the engine going away for a while
/// only delays it; the caller stops waiting when the gateway stops).
pub async fn outcome(c: &Clustered, run_id: &str) -> Result<StoredTerminal, ClusterRunError> {
    let (id, rx) = c.waiters.add(run_id);
    // Registered first: an outcome recorded from now on wakes it; one recorded before is
    // read here.
    let mut pause = Duration::from_millis(100);
    loop {
        match c.engine.outcome(run_id).await {
            Ok(Some(done)) => {
                c.waiters.forget(run_id, id);
                return terminal(&done);
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(run_id, error = %e, "Reading a run's outcome again.");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
    rx.await.map_err(|_| ClusterRunError::Stopped)
}

/// `agent.wait` for a run this gateway does not know: the cluster's outcome, waiting up to
/// `window`; `None` when it is not over by then (or unknown everywhere).
pub async fn wait_result(c: &Clustered, run_id: &str, window: Duration) -> Option<AgentWaitResult> {
    let read = |t: StoredTerminal| stored_wait_result(run_id, &t);
    match c.engine.outcome(run_id).await {
        Ok(Some(done)) => return terminal(&done).ok().map(read),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(run_id, error = %e, "Cannot read a run's outcome from the cluster.");
            return None;
        }
    }
    if !matches!(c.engine.run(run_id).await, Ok(Some(_))) {
        // Unknown everywhere: like OpenClaw, wait out the window.
        tokio::time::sleep(window).await;
        return None;
    }
    let (id, rx) = c.waiters.add(run_id);
    if let Ok(Some(done)) = c.engine.outcome(run_id).await {
        c.waiters.forget(run_id, id);
        return terminal(&done).ok().map(read);
    }
    let waited = tokio::time::timeout(window, rx).await;
    c.waiters.forget(run_id, id);
    match waited {
        Ok(Ok(t)) => Some(read(t)),
        _ => None,
    }
}

pub(super) fn terminal(done: &cluster::OutcomeRecord) -> Result<StoredTerminal, ClusterRunError> {
    serde_json::from_str(done.terminal.get()).map_err(|why| ClusterRunError::Unreadable {
        run_id: done.run_id.clone(),
        why,
    })
}
