//! What reaches the control actor: its [`Command`]s and the types they carry.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ipc::control::{SessionOp, StopReason, SubmitRun};
use ipc::gateway::StatusResult;
use ipc::RpcError;

use tokio::sync::oneshot;

use super::approvals;
use crate::config::Config;
use crate::outcome::Outcome;
use crate::worker_link::LinkEvent;

/// An abort named a run of another session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("runId does not match sessionKey")]
pub struct NotOfSession;

/// What a session operation answered: the worker's typed reply, or why there is none.
pub type OpResult = Result<ipc::control::SessionReply, RpcError>;

/// A run handed to the control actor after it was durably accepted.
#[derive(Debug)]
pub struct Dispatch {
    pub run: SubmitRun,
    pub agent_id: String,
    /// Receives the outcome once it is durable.
    pub done: oneshot::Sender<Arc<Outcome>>,
    /// What the actor does with the run as it takes it.
    pub arrival: Arrival,
}

/// What the control actor does with a run as it takes it, besides keeping it until it ends.
#[derive(Debug)]
pub enum Arrival {
    /// Send it to its worker (its queue room was charged before it was recorded, with
    /// `Command::Reserve`).
    Run,
    /// Charge its room now, then send it to its worker; without room it ends `error`
    /// saying so, as any run ends (durably, with its terminal events). Cluster mode's
    /// owner: the run's front door acknowledged it already.
    ChargeAndRun(super::queue_room::Reserve),
    /// End it `error` at once with this reason, never sending it to a worker: a run the
    /// cluster accepted that must not run (an owner that was lost started it).
    End(String),
}

pub enum WaitReply {
    Done(Arc<Outcome>),
    Pending(oneshot::Receiver<Arc<Outcome>>),
    Unknown,
}

/// Agents whose crash-loop breaker tripped, with the reason; read by RPC admission.
pub type FailedAgents = Arc<HashMap<String, String>>;

pub enum Command {
    Dispatch(Box<Dispatch>),
    /// Room for a queued message, asked before the run is recorded (`queue_room`).
    Reserve {
        room: super::queue_room::Reserve,
        reply: oneshot::Sender<Result<bool, super::queue_room::QueueFull>>,
    },
    /// A reservation whose run will not be handed over.
    Unreserve {
        run_id: String,
    },
    Wait {
        run_id: String,
        /// The gateway db has the run accepted: if it is not here yet (admission acks
        /// before it hands the run over), wait for it rather than call it unknown.
        expected: bool,
        reply: oneshot::Sender<WaitReply>,
    },
    Status {
        connections: u64,
        reply: oneshot::Sender<StatusResult>,
    },
    /// Stop: drain workers (deadline), then answer.
    Shutdown {
        deadline: Duration,
        reply: oneshot::Sender<()>,
    },
    /// A session operation for `agent_id`'s worker (spawned if needed).
    SessionOp {
        agent_id: String,
        op: SessionOp,
        reply: oneshot::Sender<OpResult>,
    },
    /// Abort the session's active and queued runs (or just `run_id`).
    Abort {
        session_key: String,
        run_id: Option<String>,
        reason: StopReason,
        reply: oneshot::Sender<Result<Vec<String>, NotOfSession>>,
    },
    /// Runs not yet terminal, by session key.
    ActiveRuns {
        reply: oneshot::Sender<HashMap<String, Vec<String>>>,
    },
    /// Whether a run in flight has started (else it waits behind its session's runs).
    HasStarted {
        run_id: String,
        reply: oneshot::Sender<bool>,
    },
    /// Operator restart of one agent's worker (graceful: drain first; forced: kill now).
    /// Clears a tripped crash-loop breaker. Answered once the new worker is ready.
    RestartWorker {
        agent_id: String,
        force: bool,
        reply: oneshot::Sender<Result<ipc::gateway::WorkerRestartResult, RpcError>>,
    },
    /// Cluster mode: this gateway lost the agent's lease. Its worker is killed at once (no
    /// tool may run on under a stale epoch) and not started again until a run or session
    /// operation needs it; its crash-loop record is untouched.
    StopWorker {
        agent_id: String,
    },
    /// A new config: reconcile the worker set (agents added, removed, changed).
    Reload(Arc<Config>),
    Link(LinkEvent),
    Persisted {
        run_id: String,
        outcome: Arc<Outcome>,
    },
    Tick,
    /// `exec.approval.list`.
    ApprovalList {
        reply: oneshot::Sender<Vec<ipc::gateway::ExecApproval>>,
    },
    /// `loopgate.exec.allowlist`: the kept `allow-always` patterns.
    AllowedList {
        reply: oneshot::Sender<Vec<(String, String)>>,
    },
    /// `loopgate.exec.allowlist.remove`: forget one (from the gateway db too).
    Disallow {
        agent_id: String,
        pattern: String,
        reply: oneshot::Sender<Result<bool, crate::gatewaydb::DbError>>,
    },
    /// `exec.approval.resolve`.
    ApprovalResolve {
        id: String,
        decision: ipc::approval::ApprovalDecision,
        by: Option<String>,
        reply: oneshot::Sender<approvals::ResolveResult>,
    },
}
