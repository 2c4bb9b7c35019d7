//! The control actor: the supervisor's single owner of run and worker state.
//!
//! It owns the run table ([`runs`]: accepted runs, their final-response and `agent.wait`
//! waiters, recently finished outcomes) and the worker set ([`workers`]: one slot per
//! configured agent, each an explicit `WorkerState`, with restart backoff, the crash-loop
//! breaker and heartbeats). Everything reaches it as a [`Command`] on a bounded channel and is
//! handled in one loop: RPC handlers submit and wait for runs, worker links report readiness,
//! terminals and exits, timers drive heartbeats, restarts and pruning.
//!
//! Architecture Invariants: a run is terminal in the gateway db before any waiter or client
//! hears of it (`Persisting` -> `Terminal`); every accepted run ends exactly once: by the
//! worker's terminal report, or by the control actor when the worker dies, is refused or the
//! gateway stops. The core alone decides each run's terminal ([`terminal`]): links report
//! what clients saw. Start, restart and config reload share one path (`reconcile`).

pub mod approvals;
mod ask;
mod command;
mod core;
mod decisions;
mod diagnostics;
mod lifecycle;
mod queue_room;
mod reconcile;
mod retire;
mod run_table;
mod runs;
mod shell;
mod slot;
mod terminal;
#[cfg(test)]
mod tests;
mod workers;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{SessionOp, StopReason};
use ipc::gateway::StatusResult;
use ipc::session_ops::Op;
use ipc::{ErrorCode, RpcError};

use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Config;
use crate::events::EventHub;
use crate::gatewaydb::GatewayDb;
use crate::systemd::Notifier;
use crate::worker_link::LinkEvent;

pub use ask::{reply_of, AskError};
pub use command::{Arrival, Command, Dispatch, FailedAgents, OpResult, WaitReply};
pub use queue_room::{Hold, QueueFull, Reserve};
pub use slot::failed_agent_message;

pub use self::core::{Control, CoreDeps, Effect, Now};

/// Commands queued to the control actor before senders see `Overloaded`.
pub const CONTROL_QUEUE: usize = 8192;

/// Cheap handle to the control actor.
#[derive(Clone)]
pub struct ControlHandle {
    tx: mpsc::Sender<Command>,
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("the gateway is overloaded; retry shortly")]
    Overloaded,
    #[error("the gateway is shutting down")]
    Closed,
}

impl ControlHandle {
    fn try_send(&self, cmd: Command) -> Result<(), ControlError> {
        self.tx.try_send(cmd).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => ControlError::Overloaded,
            mpsc::error::TrySendError::Closed(_) => ControlError::Closed,
        })
    }

    pub fn dispatch(&self, d: Dispatch) -> Result<(), ControlError> {
        self.try_send(Command::Dispatch(Box::new(d)))
    }

    /// Room for a message (see `queue_room`): `Ok(Ok(true))` charged, give it back with
    /// [`ControlHandle::unreserve`] if the run is not handed over; `Ok(Ok(false))` the run is
    /// already known; `Ok(Err(full))` no room.
    pub async fn reserve(
        &self,
        room: queue_room::Reserve,
    ) -> Result<Result<bool, queue_room::QueueFull>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Reserve { room, reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    /// Gives back a reservation. When the actor's queue is full the give-back waits for
    /// room in a task of its own (a charge held for a run elsewhere would not lapse soon).
    pub fn unreserve(&self, run_id: String) {
        if let Err(mpsc::error::TrySendError::Full(cmd)) =
            self.tx.try_send(Command::Unreserve { run_id })
        {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let tx = self.tx.clone();
                rt.spawn(async move {
                    let _ = tx.send(cmd).await;
                });
            }
        }
    }

    pub async fn wait(&self, run_id: String) -> Result<WaitReply, ControlError> {
        self.wait_as(run_id, false).await
    }

    /// Like [`ControlHandle::wait`], for a run the gateway db has accepted: one not handed
    /// to the actor yet is waited for (admission acks a run before it hands it over, so a
    /// client's `agent.wait` right after the ack can arrive first).
    pub async fn wait_expected(&self, run_id: String) -> Result<WaitReply, ControlError> {
        self.wait_as(run_id, true).await
    }

    async fn wait_as(&self, run_id: String, expected: bool) -> Result<WaitReply, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Wait {
            run_id,
            expected,
            reply,
        })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    /// The supervisor's and workers' status, with their memory read here (off the actor).
    pub async fn status(&self, connections: u64) -> Result<StatusResult, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Status { connections, reply })?;
        let mut status = rx.await.map_err(|_| ControlError::Closed)?;
        status.supervisor.rss_bytes = crate::sys_info::rss_bytes(status.supervisor.pid);
        for w in &mut status.workers {
            w.rss_bytes = w.pid.and_then(crate::sys_info::rss_bytes);
        }
        Ok(status)
    }

    /// `op` at `agent_id`'s worker on this gateway, answered with the reply of its kind.
    pub async fn ask<O: Op>(&self, agent_id: String, op: O) -> Result<O::Reply, AskError> {
        reply_of::<O>(self.session_op(agent_id, op.into()).await)
    }

    /// `op` at `agent_id`'s worker on this gateway, as the link carries it: for cluster mode,
    /// which relays operations and replies between gateways whatever their kind. Callers that
    /// know the kind they ask for use [`ControlHandle::ask`].
    pub async fn session_op(&self, agent_id: String, op: SessionOp) -> OpResult {
        let timeout_secs = op.timeout_secs();
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::SessionOp {
            agent_id,
            op,
            reply,
        })
        .map_err(|e| RpcError::new(ErrorCode::Overloaded, e.to_string()))?;
        // A lost answer must not hold the caller (or a pending-op slot) forever: past the
        // timeout the waiter goes, and the actor prunes the op whose reply nobody awaits.
        let wait = std::time::Duration::from_secs(timeout_secs);
        match tokio::time::timeout(wait, rx).await {
            Ok(r) => {
                r.map_err(|_| RpcError::new(ErrorCode::Internal, "the gateway is shutting down"))?
            }
            Err(_) => Err(RpcError::new(
                ErrorCode::Overloaded,
                format!("the agent's worker did not answer within {timeout_secs} s"),
            )),
        }
    }

    pub async fn abort(
        &self,
        session_key: String,
        run_id: Option<String>,
        reason: StopReason,
    ) -> Result<Result<Vec<String>, command::NotOfSession>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Abort {
            session_key,
            run_id,
            reason,
            reply,
        })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn approval_list(&self) -> Result<Vec<ipc::gateway::ExecApproval>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::ApprovalList { reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn allowed_list(&self) -> Result<Vec<(String, String)>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::AllowedList { reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    /// Forgets a kept pattern; `Ok(false)` if it was not kept. Later workers of the agent
    /// start without it (the caller restarts a running one).
    pub async fn disallow(
        &self,
        agent_id: String,
        pattern: String,
    ) -> Result<Result<bool, crate::gatewaydb::DbError>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Disallow {
            agent_id,
            pattern,
            reply,
        })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn approval_resolve(
        &self,
        id: String,
        decision: ipc::approval::ApprovalDecision,
        by: Option<String>,
    ) -> Result<approvals::ResolveResult, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::ApprovalResolve {
            id,
            decision,
            by,
            reply,
        })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn active_runs(&self) -> Result<HashMap<String, Vec<String>>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::ActiveRuns { reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    /// Whether a run in flight has started (else it waits behind its session's runs).
    pub async fn has_started(&self, run_id: String) -> Result<bool, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::HasStarted { run_id, reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn restart_worker(
        &self,
        agent_id: String,
        force: bool,
    ) -> Result<ipc::gateway::WorkerRestartResult, RpcError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::RestartWorker {
            agent_id,
            force,
            reply,
        })
        .map_err(|e| RpcError::new(ErrorCode::Overloaded, e.to_string()))?;
        rx.await
            .map_err(|_| RpcError::new(ErrorCode::Internal, "the gateway is shutting down"))?
    }

    /// Cluster mode: kills the agent's worker now, without starting another
    /// ([`Command::StopWorker`]).
    pub async fn stop_worker(&self, agent_id: String) -> Result<(), ControlError> {
        self.tx
            .send(Command::StopWorker { agent_id })
            .await
            .map_err(|_| ControlError::Closed)
    }

    pub async fn reload(&self, config: Arc<Config>) -> Result<(), ControlError> {
        self.tx
            .send(Command::Reload(config))
            .await
            .map_err(|_| ControlError::Closed)
    }

    pub async fn shutdown(&self, deadline: Duration) {
        let (reply, rx) = oneshot::channel();
        if self
            .tx
            .send(Command::Shutdown { deadline, reply })
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}

/// Everything the control actor needs from its surroundings.
pub struct ControlDeps {
    pub config: Arc<Config>,
    pub db: GatewayDb,
    pub hub: EventHub,
    pub worker_bin: PathBuf,
    /// The supervisor's environment; each worker gets an allow-listed part of it.
    pub env: HashMap<String, String>,
    pub started: Instant,
    pub notifier: Notifier,
    /// `allow-always` exec patterns by agent, from the gateway db.
    pub allowed_exec: HashMap<String, Vec<String>>,
    pub metrics: crate::metrics::Metrics,
    /// Cluster mode, once joined: workers then keep their databases as caches of the
    /// agents' journals.
    pub cluster: crate::worker_link::JournalCell,
}

/// Starts the control actor; returns its handle, a view of failed agents and the task.
pub fn start(
    deps: ControlDeps,
) -> (
    ControlHandle,
    watch::Receiver<FailedAgents>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::channel(CONTROL_QUEUE);
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(CONTROL_QUEUE);
    // Link events go through their own queue so a burst of RPCs cannot starve them; they are
    // forwarded into the main loop in order.
    let fwd = tx.clone();
    tokio::spawn(async move {
        while let Some(ev) = link_rx.recv().await {
            if fwd.send(Command::Link(ev)).await.is_err() {
                break;
            }
        }
    });
    let ControlDeps {
        config,
        db,
        hub,
        worker_bin,
        env,
        started,
        notifier,
        allowed_exec,
        metrics,
        cluster,
    } = deps;
    let (core, failed_rx) = Control::new(
        CoreDeps {
            config,
            hub: hub.clone(),
            worker_bin,
            env,
            started,
            allowed_exec,
            metrics,
        },
        Now::real(),
    );
    let shell = shell::Shell {
        core,
        db,
        hub,
        notifier,
        tx: tx.clone(),
        link_tx,
        cluster,
    };
    let task = tokio::spawn(shell.run(rx));
    (ControlHandle { tx }, failed_rx, task)
}
