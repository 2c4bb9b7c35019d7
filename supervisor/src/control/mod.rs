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
//! gateway stops. Start, restart and config reload share one path (`reconcile`).

pub mod approvals;
mod diagnostics;
mod runs;
mod workers;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{SessionOp, StopReason, SubmitRun};
use ipc::gateway::{StatusResult, SupervisorStatus};
use ipc::{ErrorCode, RpcError};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Config;
use crate::events::EventHub;
use crate::gatewaydb::GatewayDb;
use crate::outcome::Outcome;
use crate::systemd::Notifier;
use crate::worker_link::LinkEvent;

pub use workers::failed_agent_message;

use runs::RunEntry;
use workers::WorkerSlot;

/// What a session operation answered: the worker's typed reply, or why there is none.
pub type OpResult = Result<ipc::control::SessionReply, RpcError>;

/// Commands queued to the control actor before senders see `Overloaded`.
pub const CONTROL_QUEUE: usize = 8192;

/// A run handed to the control actor after it was durably accepted.
#[derive(Debug)]
pub struct Dispatch {
    pub run: SubmitRun,
    pub agent_id: String,
    /// Receives the outcome once it is durable.
    pub done: oneshot::Sender<Arc<Outcome>>,
}

pub enum WaitReply {
    Done(Arc<Outcome>),
    Pending(oneshot::Receiver<Arc<Outcome>>),
    Unknown,
}

/// Agents whose crash-loop breaker tripped, with the reason; read by RPC admission.
pub type FailedAgents = Arc<HashMap<String, String>>;

pub enum Command {
    Dispatch(Dispatch),
    Wait {
        run_id: String,
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
        reply: oneshot::Sender<Result<Vec<String>, String>>,
    },
    /// Runs not yet terminal, by session key.
    ActiveRuns {
        reply: oneshot::Sender<HashMap<String, Vec<String>>>,
    },
    /// Operator restart of one agent's worker (graceful: drain first; forced: kill now).
    /// Clears a tripped crash-loop breaker. Answered once the new worker is ready.
    RestartWorker {
        agent_id: String,
        force: bool,
        reply: oneshot::Sender<Result<Value, RpcError>>,
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
        reply: oneshot::Sender<Result<bool, String>>,
    },
    /// `exec.approval.resolve`.
    ApprovalResolve {
        id: String,
        decision: ipc::approval::ApprovalDecision,
        by: Option<String>,
        reply: oneshot::Sender<approvals::ResolveResult>,
    },
}

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
        self.try_send(Command::Dispatch(d))
    }

    pub async fn wait(&self, run_id: String) -> Result<WaitReply, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Wait { run_id, reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

    pub async fn status(&self, connections: u64) -> Result<StatusResult, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::Status { connections, reply })?;
        rx.await.map_err(|_| ControlError::Closed)
    }

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
    ) -> Result<Result<Vec<String>, String>, ControlError> {
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
    ) -> Result<Result<bool, String>, ControlError> {
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

    pub async fn restart_worker(&self, agent_id: String, force: bool) -> Result<Value, RpcError> {
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
}

pub struct Control {
    deps: ControlDeps,
    tx: mpsc::Sender<Command>,
    link_tx: mpsc::Sender<LinkEvent>,
    workers: HashMap<String, WorkerSlot>,
    runs: HashMap<String, RunEntry>,
    finished: VecDeque<String>,
    shutdown: Option<(Instant, oneshot::Sender<()>)>,
    /// Session operations sent to workers and not yet answered.
    ops: HashMap<u64, runs::PendingOp>,
    next_op: u64,
    next_nonce: u64,
    failed_tx: watch::Sender<FailedAgents>,
    last_status: String,
    /// Exec approvals waiting for operators.
    approvals: approvals::Approvals,
    /// `allow-always` exec patterns by agent (kept in the gateway db).
    allowed: HashMap<String, Vec<String>>,
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
    let (failed_tx, failed_rx) = watch::channel(FailedAgents::default());
    let config = deps.config.clone();
    let allowed = deps.allowed_exec.clone();
    let mut control = Control {
        deps,
        tx: tx.clone(),
        link_tx,
        workers: HashMap::new(),
        runs: HashMap::new(),
        finished: VecDeque::new(),
        shutdown: None,
        ops: HashMap::new(),
        next_op: 1,
        next_nonce: 1,
        failed_tx,
        last_status: String::new(),
        approvals: approvals::Approvals::default(),
        allowed,
    };
    control.reconcile(config);
    let task = tokio::spawn(control.run(rx));
    (ControlHandle { tx }, failed_rx, task)
}

impl Control {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick_every = (self.deps.config.workers.heartbeat_timeout / 4)
            .clamp(Duration::from_millis(25), Duration::from_secs(1));
        // The systemd watchdog is pet on this tick: at least twice per watchdog interval.
        if let Some(w) = self.deps.notifier.watchdog_interval() {
            tick_every = tick_every.min((w / 2).max(Duration::from_millis(10)));
        }
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wake = self.next_restart();
            let cmd = tokio::select! {
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = tick.tick() => Command::Tick,
                _ = sleep_until(wake), if wake.is_some() => Command::Tick,
            };
            self.handle(cmd);
            if self.shutdown_complete() {
                if let Some((_, reply)) = self.shutdown.take() {
                    let _ = reply.send(());
                }
            }
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Dispatch(d) => self.dispatch(d),
            Command::Wait { run_id, reply } => {
                let _ = reply.send(self.wait(&run_id));
            }
            Command::Status { connections, reply } => {
                let _ = reply.send(self.status(connections));
            }
            Command::Shutdown { deadline, reply } => self.begin_shutdown(deadline, reply),
            Command::SessionOp {
                agent_id,
                op,
                reply,
            } => self.session_op(agent_id, op, reply),
            Command::Abort {
                session_key,
                run_id,
                reason,
                reply,
            } => {
                let _ = reply.send(self.abort(&session_key, run_id.as_deref(), reason));
            }
            Command::ActiveRuns { reply } => {
                let _ = reply.send(self.active_runs());
            }
            Command::RestartWorker {
                agent_id,
                force,
                reply,
            } => self.restart_worker(&agent_id, force, reply),
            Command::Reload(config) => self.reconcile(config),
            Command::Link(ev) => self.link_event(ev),
            Command::Persisted { run_id, outcome } => self.persisted(run_id, outcome),
            Command::ApprovalList { reply } => {
                let _ = reply.send(self.approval_list());
            }
            Command::AllowedList { reply } => {
                let _ = reply.send(self.allowed_list());
            }
            Command::Disallow {
                agent_id,
                pattern,
                reply,
            } => self.disallow(agent_id, pattern, reply),
            Command::ApprovalResolve {
                id,
                decision,
                by,
                reply,
            } => {
                let _ = reply.send(self.approval_resolve(&id, decision, by));
            }
            Command::Tick => {
                self.prune();
                self.prune_approvals();
                self.retry_sends();
                self.heartbeats();
                self.restart_due();
                self.report_status();
                self.deps.notifier.watchdog();
            }
        }
    }

    fn status(&self, connections: u64) -> StatusResult {
        StatusResult {
            supervisor: SupervisorStatus {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_ms: self.deps.started.elapsed().as_millis() as u64,
                connections,
                draining: self.shutdown.is_some(),
                state_dir: self.deps.config.state_dir.display().to_string(),
                rss_bytes: crate::sys_info::rss_bytes(std::process::id()),
            },
            workers: self.worker_statuses(),
        }
    }

    /// Sends `STATUS=` to systemd when the summary changes.
    fn report_status(&mut self) {
        let ready = self.workers.values().filter(|s| s.is_ready()).count();
        let failed = self.workers.values().filter(|s| s.is_failed()).count();
        let in_flight = self.runs.values().filter(|r| r.is_active()).count();
        let mut status = format!("serving: {ready} worker(s) ready, {in_flight} run(s) in flight");
        if failed > 0 {
            status.push_str(&format!(", {failed} agent(s) failed"));
        }
        if self.shutdown.is_some() {
            status = format!("draining: {in_flight} run(s) in flight");
        }
        if status != self.last_status {
            self.deps.notifier.status(&status);
            self.last_status = status;
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
