//! The control actor: the supervisor's single owner of run and worker state.
//!
//! It owns the run table (accepted runs, their final-response and `agent.wait` waiters, and
//! recently finished outcomes) and the worker set (one slot per configured agent, each an
//! explicit [`WorkerState`]). Everything reaches it as a [`Command`] on a bounded channel and
//! is handled in one loop: RPC handlers submit and wait for runs, worker links report
//! readiness, terminals and exits, a timer prunes finished runs.
//!
//! Architecture Invariant: a run is terminal in the gateway db before any waiter hears of it
//! (`Persisting` -> `Terminal`), and every accepted run ends exactly once: by the worker's
//! terminal report, or by the control actor when the worker dies or the gateway stops.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{
    ControlToWorker, RunStatus, RunTerminal, SessionOp, StopReason, SubmitRun, WorkerToControl,
};
use ipc::gateway::{StatusResult, SupervisorStatus, WorkerStatus};
use ipc::{ErrorCode, RpcError};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::events::{agent_event, chat_event, now_ms, run_failed, Deferred, EventHub, RunRef};
use crate::gatewaydb::GatewayDb;
use crate::outcome::Outcome;
use crate::worker_link::{self, LinkEvent, LinkHandle, SpawnSpec};

/// Commands queued to the control actor before senders see `Overloaded`.
pub const CONTROL_QUEUE: usize = 8192;
/// Finished runs kept in memory for `agent.wait` (older ones are answered from the db).
const KEEP_FINISHED: Duration = Duration::from_secs(300);
const MAX_FINISHED: usize = 10_000;
/// Runs queued for a worker that is still starting.
const MAX_PENDING_SPAWN: usize = 4096;

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
        reply: oneshot::Sender<Result<Value, RpcError>>,
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
    Link(LinkEvent),
    Persisted {
        run_id: String,
        outcome: Arc<Outcome>,
    },
    Tick,
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

    pub async fn session_op(&self, agent_id: String, op: SessionOp) -> Result<Value, RpcError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::SessionOp {
            agent_id,
            op,
            reply,
        })
        .map_err(|e| RpcError::new(ErrorCode::Overloaded, e.to_string()))?;
        rx.await
            .map_err(|_| RpcError::new(ErrorCode::Internal, "the gateway is shutting down"))?
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

    pub async fn active_runs(&self) -> Result<HashMap<String, Vec<String>>, ControlError> {
        let (reply, rx) = oneshot::channel();
        self.try_send(Command::ActiveRuns { reply })?;
        rx.await.map_err(|_| ControlError::Closed)
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

/// Worker lifecycle. Data lives only in the state it belongs to.
enum WorkerState {
    /// Never started (workers start on their agent's first run).
    Idle,
    Spawning {
        generation: u64,
        since: Instant,
        /// Frames (runs, session ops) waiting for the worker's handshake.
        queued: VecDeque<ControlToWorker>,
    },
    Ready {
        generation: u64,
        pid: u32,
        since: Instant,
        link: LinkHandle,
    },
    Draining {
        pid: u32,
        since: Instant,
    },
    /// Exited (cause in `WorkerSlot::last_exit`); restarts on the next run.
    Exited,
}

struct WorkerSlot {
    state: WorkerState,
    generation: u64,
    restarts: u32,
    last_exit: Option<String>,
    /// Runs submitted to the current generation and not yet terminal.
    in_flight: Vec<String>,
}

enum RunState {
    Active {
        generation: u64,
        waiters: Vec<oneshot::Sender<Arc<Outcome>>>,
    },
    /// Terminal, being written to the gateway db; events and waiters follow the write.
    Persisting {
        waiters: Vec<oneshot::Sender<Arc<Outcome>>>,
        deferred: Vec<Deferred>,
    },
    Terminal {
        outcome: Arc<Outcome>,
        at: Instant,
    },
}

struct RunEntry {
    agent_id: String,
    session_key: String,
    state: RunState,
}

/// Everything the control actor needs from its surroundings.
pub struct ControlDeps {
    pub config: Arc<Config>,
    pub db: GatewayDb,
    pub hub: EventHub,
    pub worker_bin: PathBuf,
    pub worker_env: Vec<(String, String)>,
    pub started: Instant,
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
    ops: HashMap<u64, PendingOp>,
    next_op: u64,
}

struct PendingOp {
    agent_id: String,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// Session operations in flight at once before new ones are refused.
const MAX_PENDING_OPS: usize = 1024;

/// Starts the control actor; returns its handle and the task running it.
pub fn start(deps: ControlDeps) -> (ControlHandle, tokio::task::JoinHandle<()>) {
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
    let workers = deps
        .config
        .agents
        .iter()
        .map(|a| {
            (
                a.id.as_str().to_owned(),
                WorkerSlot {
                    state: WorkerState::Idle,
                    generation: 0,
                    restarts: 0,
                    last_exit: None,
                    in_flight: Vec::new(),
                },
            )
        })
        .collect();
    let control = Control {
        deps,
        tx: tx.clone(),
        link_tx,
        workers,
        runs: HashMap::new(),
        finished: VecDeque::new(),
        shutdown: None,
        ops: HashMap::new(),
        next_op: 1,
    };
    let task = tokio::spawn(control.run(rx));
    (ControlHandle { tx }, task)
}

impl Control {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let cmd = tokio::select! {
                c = rx.recv() => match c { Some(c) => c, None => break },
                _ = tick.tick() => Command::Tick,
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
                let r = match self.runs.get_mut(&run_id) {
                    None => WaitReply::Unknown,
                    Some(entry) => match &mut entry.state {
                        RunState::Terminal { outcome, .. } => WaitReply::Done(outcome.clone()),
                        RunState::Active { waiters, .. } | RunState::Persisting { waiters, .. } => {
                            let (tx, rx) = oneshot::channel();
                            waiters.retain(|w| !w.is_closed());
                            waiters.push(tx);
                            WaitReply::Pending(rx)
                        }
                    },
                };
                let _ = reply.send(r);
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
                let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
                for (id, e) in &self.runs {
                    if matches!(e.state, RunState::Active { .. }) {
                        by_session
                            .entry(e.session_key.clone())
                            .or_default()
                            .push(id.clone());
                    }
                }
                let _ = reply.send(by_session);
            }
            Command::Link(ev) => self.link_event(ev),
            Command::Persisted { run_id, outcome } => {
                if let Some(entry) = self.runs.get_mut(&run_id) {
                    let old = std::mem::replace(
                        &mut entry.state,
                        RunState::Terminal {
                            outcome: outcome.clone(),
                            at: Instant::now(),
                        },
                    );
                    let (waiters, deferred) = match old {
                        RunState::Persisting { waiters, deferred } => (waiters, deferred),
                        RunState::Active { waiters, .. } => (waiters, Vec::new()),
                        RunState::Terminal { .. } => (Vec::new(), Vec::new()),
                    };
                    // The outcome is durable: now clients may see the terminal events.
                    for ev in &deferred {
                        self.deps.hub.publish_deferred(ev);
                    }
                    for w in waiters {
                        let _ = w.send(outcome.clone());
                    }
                    self.finished.push_back(run_id);
                }
            }
            Command::Tick => self.prune(),
        }
    }

    fn dispatch(&mut self, d: Dispatch) {
        let run_id = d.run.run_id.clone();
        self.runs.insert(
            run_id.clone(),
            RunEntry {
                agent_id: d.agent_id.clone(),
                session_key: d.run.session_key.clone(),
                state: RunState::Active {
                    generation: 0,
                    waiters: vec![d.done],
                },
            },
        );
        if self.shutdown.is_some() {
            self.fail_run(
                &run_id,
                RunStatus::Aborted,
                "gateway is shutting down",
                Some(StopReason::Restart),
            );
            return;
        }
        let Some(slot) = self.workers.get_mut(&d.agent_id) else {
            self.fail_run(
                &run_id,
                RunStatus::Error,
                &format!("unknown agent {:?}", d.agent_id),
                None,
            );
            return;
        };
        let generation;
        match &mut slot.state {
            WorkerState::Ready {
                link,
                generation: g,
                ..
            } => {
                generation = *g;
                if let Err(_msg) = link.send(ControlToWorker::Submit(d.run)) {
                    self.fail_run(
                        &run_id,
                        RunStatus::Error,
                        "worker queue is full; retry shortly",
                        None,
                    );
                    return;
                }
            }
            WorkerState::Spawning {
                queued,
                generation: g,
                ..
            } => {
                generation = *g;
                if queued.len() >= MAX_PENDING_SPAWN {
                    self.fail_run(
                        &run_id,
                        RunStatus::Error,
                        "worker is starting and its queue is full; retry shortly",
                        None,
                    );
                    return;
                }
                queued.push_back(ControlToWorker::Submit(d.run));
            }
            WorkerState::Draining { .. } => {
                self.fail_run(
                    &run_id,
                    RunStatus::Error,
                    "worker is draining; retry shortly",
                    None,
                );
                return;
            }
            WorkerState::Idle | WorkerState::Exited => {
                generation = self.spawn_worker(
                    &d.agent_id,
                    VecDeque::from([ControlToWorker::Submit(d.run)]),
                );
            }
        }
        if let Some(slot) = self.workers.get_mut(&d.agent_id) {
            slot.in_flight.push(run_id.clone());
        }
        if let Some(RunEntry {
            state: RunState::Active { generation: g, .. },
            ..
        }) = self.runs.get_mut(&run_id)
        {
            *g = generation;
        }
    }

    fn spawn_worker(&mut self, agent_id: &str, queued: VecDeque<ControlToWorker>) -> u64 {
        let Some(agent) = self.deps.config.agent(agent_id).cloned() else {
            return 0;
        };
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return 0;
        };
        if matches!(slot.state, WorkerState::Exited) {
            slot.restarts += 1;
        }
        slot.generation += 1;
        let generation = slot.generation;
        slot.state = WorkerState::Spawning {
            generation,
            since: Instant::now(),
            queued,
        };
        tracing::info!(agent = agent_id, generation, "Starting worker.");
        worker_link::spawn(
            SpawnSpec {
                agent,
                generation,
                worker_bin: self.deps.worker_bin.clone(),
                run_dir: crate::paths::run_dir(&self.deps.config.state_dir),
                env: self.deps.worker_env.clone(),
            },
            self.deps.hub.clone(),
            self.link_tx.clone(),
        );
        generation
    }

    fn link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Ready {
                agent_id,
                generation,
                pid,
                link,
            } => {
                let Some(slot) = self.workers.get_mut(&agent_id) else {
                    return;
                };
                if slot.generation != generation {
                    return;
                }
                let queued = match std::mem::replace(&mut slot.state, WorkerState::Idle) {
                    WorkerState::Spawning { queued, .. } => queued,
                    other => {
                        slot.state = other;
                        return;
                    }
                };
                let mut overflow = Vec::new();
                let mut failed_ops = Vec::new();
                for msg in queued {
                    if let Err(msg) = link.send(msg) {
                        match msg {
                            ControlToWorker::Submit(run) => overflow.push(run.run_id),
                            ControlToWorker::Session { op_id, .. } => failed_ops.push(op_id),
                            _ => {}
                        }
                    }
                }
                if let Some((deadline, _)) = &self.shutdown {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: left.as_millis() as u64,
                    });
                    slot.state = WorkerState::Draining {
                        pid,
                        since: Instant::now(),
                    };
                } else {
                    slot.state = WorkerState::Ready {
                        generation,
                        pid,
                        since: Instant::now(),
                        link,
                    };
                }
                for id in overflow {
                    self.fail_run(
                        &id,
                        RunStatus::Error,
                        "worker queue is full; retry shortly",
                        None,
                    );
                }
                for op_id in failed_ops {
                    self.fail_op(
                        op_id,
                        RpcError::new(ErrorCode::Overloaded, "worker queue is full; retry shortly"),
                    );
                }
            }
            LinkEvent::SpawnFailed {
                agent_id,
                generation,
                error,
            } => {
                tracing::error!(
                    agent = agent_id.as_str(),
                    generation,
                    error = error.as_str(),
                    "Worker failed to start."
                );
                let Some(slot) = self.workers.get_mut(&agent_id) else {
                    return;
                };
                if slot.generation != generation {
                    return;
                }
                slot.last_exit = Some(error.clone());
                slot.state = WorkerState::Exited;
                let runs = std::mem::take(&mut slot.in_flight);
                for id in runs {
                    self.fail_run(
                        &id,
                        RunStatus::Error,
                        &format!("worker for agent {agent_id:?} failed to start: {error}"),
                        None,
                    );
                }
                self.fail_ops_of(
                    &agent_id,
                    &format!("worker for agent {agent_id:?} failed to start: {error}"),
                );
            }
            LinkEvent::Message {
                agent_id,
                generation,
                msg,
                deferred,
            } => match *msg {
                WorkerToControl::Finished(t) => self.finished_run(&agent_id, t, deferred),
                WorkerToControl::Rejected { run_id, error } => {
                    self.fail_run(
                        &run_id,
                        RunStatus::Error,
                        &format!("worker refused the run: {}", error.message),
                        None,
                    );
                }
                WorkerToControl::SessionResult {
                    op_id,
                    result_json,
                    error,
                } => {
                    let result = match (result_json, error) {
                        (_, Some(e)) => Err(e),
                        (Some(text), None) => serde_json::from_str::<Value>(&text).map_err(|e| {
                            RpcError::new(ErrorCode::Internal, format!("bad worker reply: {e}"))
                        }),
                        (None, None) => {
                            Err(RpcError::new(ErrorCode::Internal, "empty worker reply"))
                        }
                    };
                    if let Some(op) = self.ops.remove(&op_id) {
                        let _ = op.reply.send(result);
                    }
                }
                WorkerToControl::Drained { completed, aborted } => {
                    tracing::info!(
                        agent = agent_id.as_str(),
                        generation,
                        completed,
                        aborted,
                        "Worker drained."
                    );
                }
                WorkerToControl::Pong { .. }
                | WorkerToControl::Event(_)
                | WorkerToControl::Unknown => {}
            },
            LinkEvent::Exited {
                agent_id,
                generation,
                cause,
                failures,
            } => {
                let Some(slot) = self.workers.get_mut(&agent_id) else {
                    return;
                };
                if slot.generation != generation {
                    return;
                }
                let expected = matches!(slot.state, WorkerState::Draining { .. });
                if expected {
                    tracing::info!(
                        agent = agent_id.as_str(),
                        generation,
                        cause = cause.as_str(),
                        "Worker exited."
                    );
                } else {
                    tracing::error!(
                        agent = agent_id.as_str(),
                        generation,
                        cause = cause.as_str(),
                        "Worker exited unexpectedly."
                    );
                }
                slot.last_exit = Some(cause.clone());
                slot.state = WorkerState::Exited;
                let runs = std::mem::take(&mut slot.in_flight);
                let msg = format!("worker for agent {agent_id:?} exited during the run: {cause}");
                let mut failures: HashMap<String, Vec<Deferred>> = failures.into_iter().collect();
                for id in runs {
                    let events = failures.remove(&id);
                    self.fail_run_with(&id, RunStatus::Error, &msg, None, events);
                }
                self.fail_ops_of(
                    &agent_id,
                    &format!("worker for agent {agent_id:?} exited: {cause}"),
                );
            }
        }
    }

    fn finished_run(&mut self, agent_id: &str, t: RunTerminal, deferred: Vec<Deferred>) {
        if let Some(slot) = self.workers.get_mut(agent_id) {
            slot.in_flight.retain(|id| *id != t.run_id);
        }
        let Some(entry) = self.runs.get_mut(&t.run_id) else {
            tracing::warn!(
                run_id = t.run_id.as_str(),
                "Terminal for an unknown run ignored."
            );
            return;
        };
        let outcome = Arc::new(Outcome::from_terminal(
            &t,
            &entry.session_key,
            &entry.agent_id,
        ));
        self.persist(t.run_id, outcome, deferred);
    }

    fn session_op(
        &mut self,
        agent_id: String,
        op: SessionOp,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        if self.ops.len() >= MAX_PENDING_OPS {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::Overloaded,
                "too many session operations in flight",
            )));
            return;
        }
        if self.shutdown.is_some() {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::Draining,
                "the gateway is shutting down",
            )));
            return;
        }
        let op_id = self.next_op;
        self.next_op += 1;
        let msg = ControlToWorker::Session { op_id, op };
        let Some(slot) = self.workers.get_mut(&agent_id) else {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::UnknownAgent,
                format!("unknown agent {agent_id:?}"),
            )));
            return;
        };
        let mut failure = None;
        let mut spawn = None;
        match &mut slot.state {
            WorkerState::Ready { link, .. } => {
                if link.send(msg).is_err() {
                    failure = Some(RpcError::new(
                        ErrorCode::Overloaded,
                        "worker queue is full; retry shortly",
                    ));
                }
            }
            WorkerState::Spawning { queued, .. } => queued.push_back(msg),
            WorkerState::Draining { .. } => {
                failure = Some(RpcError::new(
                    ErrorCode::Draining,
                    "worker is draining; retry shortly",
                ));
            }
            WorkerState::Idle | WorkerState::Exited => spawn = Some(msg),
        }
        if let Some(e) = failure {
            let _ = reply.send(Err(e));
            return;
        }
        self.ops.insert(
            op_id,
            PendingOp {
                agent_id: agent_id.clone(),
                reply,
            },
        );
        if let Some(msg) = spawn {
            self.spawn_worker(&agent_id, VecDeque::from([msg]));
        }
    }

    fn fail_op(&mut self, op_id: u64, error: RpcError) {
        if let Some(op) = self.ops.remove(&op_id) {
            let _ = op.reply.send(Err(error));
        }
    }

    /// Fails the session operations waiting on `agent_id`'s worker.
    fn fail_ops_of(&mut self, agent_id: &str, why: &str) {
        let ids: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, o)| o.agent_id == agent_id)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.fail_op(id, RpcError::new(ErrorCode::Internal, why));
        }
    }

    /// Aborts the session's runs (all, or `run_id`): queued ones end at once, running ones
    /// are cancelled in their worker and end with stop reason `reason`.
    fn abort(
        &mut self,
        session_key: &str,
        run_id: Option<&str>,
        reason: StopReason,
    ) -> Result<Vec<String>, String> {
        if let Some(id) = run_id {
            match self.runs.get(id) {
                Some(e) if e.session_key != session_key => {
                    return Err("runId does not match sessionKey".into())
                }
                Some(RunEntry {
                    state: RunState::Active { .. },
                    ..
                }) => {}
                _ => return Ok(Vec::new()),
            }
        }
        let targets: Vec<(String, String)> = self
            .runs
            .iter()
            .filter(|(id, e)| {
                e.session_key == session_key
                    && matches!(e.state, RunState::Active { .. })
                    && run_id.is_none_or(|want| want == id.as_str())
            })
            .map(|(id, e)| (id.clone(), e.agent_id.clone()))
            .collect();
        for (id, agent_id) in &targets {
            let mut queued_abort = false;
            if let Some(slot) = self.workers.get_mut(agent_id) {
                match &mut slot.state {
                    WorkerState::Ready { link, .. } => {
                        let _ = link.send(ControlToWorker::Cancel {
                            run_id: id.clone(),
                            reason,
                        });
                    }
                    WorkerState::Spawning { queued, .. } => {
                        queued.retain(
                            |m| !matches!(m, ControlToWorker::Submit(r) if r.run_id == *id),
                        );
                        queued_abort = true;
                    }
                    WorkerState::Idle | WorkerState::Draining { .. } | WorkerState::Exited => {}
                }
            }
            if queued_abort {
                let msg = format!("run aborted while queued ({})", reason.as_str());
                self.fail_run(id, RunStatus::Aborted, &msg, Some(reason));
            }
        }
        Ok(targets.into_iter().map(|(id, _)| id).collect())
    }

    /// Ends a run from the supervisor side (worker gone, refused, shutting down).
    fn fail_run(&mut self, run_id: &str, status: RunStatus, error: &str, stop: Option<StopReason>) {
        self.fail_run_with(run_id, status, error, stop, None);
    }

    /// Ends a run from the supervisor side. `events` are its terminal events if already built
    /// (by the link); otherwise `lifecycle error` + `chat error`/`aborted` are built here.
    fn fail_run_with(
        &mut self,
        run_id: &str,
        status: RunStatus,
        error: &str,
        stop: Option<StopReason>,
        events: Option<Vec<Deferred>>,
    ) {
        let Some(entry) = self.runs.get(run_id) else {
            return;
        };
        if !matches!(entry.state, RunState::Active { .. }) {
            return;
        }
        if let Some(slot) = self.workers.get_mut(&entry.agent_id) {
            slot.in_flight.retain(|id| id != run_id);
        }
        let ended_at = now_ms();
        let t = RunTerminal {
            run_id: run_id.to_owned(),
            status,
            session_id: None,
            started_at: None,
            ended_at,
            error: Some(error.to_owned()),
            stop_reason: stop.map(|s| s.as_str().to_owned()),
            payloads: Vec::new(),
            provider: None,
            model: None,
            usage: None,
            duration_ms: 0,
        };
        let outcome = Arc::new(Outcome::from_terminal(
            &t,
            &entry.session_key,
            &entry.agent_id,
        ));
        let run = RunRef {
            run_id,
            session_key: &entry.session_key,
            agent_id: &entry.agent_id,
        };
        let deferred = events.unwrap_or_else(|| match (status, stop) {
            (RunStatus::Aborted, Some(reason)) => vec![
                agent_event(
                    &run,
                    1,
                    ended_at,
                    "lifecycle",
                    json!({"phase": "error", "endedAt": ended_at, "error": error, "aborted": true, "stopReason": reason.as_str()}),
                ),
                chat_event(&run, 1, "aborted", json!({"stopReason": reason.as_str(), "errorMessage": error})),
            ],
            _ => run_failed(&run, 1, ended_at, None, error),
        });
        self.persist(run_id.to_owned(), outcome, deferred);
    }

    fn persist(&mut self, run_id: String, outcome: Arc<Outcome>, deferred: Vec<Deferred>) {
        let Some(entry) = self.runs.get_mut(&run_id) else {
            return;
        };
        let placeholder = RunState::Persisting {
            waiters: Vec::new(),
            deferred: Vec::new(),
        };
        let waiters = match std::mem::replace(&mut entry.state, placeholder) {
            RunState::Active { waiters, .. } => waiters,
            old @ (RunState::Persisting { .. } | RunState::Terminal { .. }) => {
                // Already ending: the first terminal wins (invariant 1).
                entry.state = old;
                return;
            }
        };
        entry.state = RunState::Persisting { waiters, deferred };
        let db = self.deps.db.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            if let Err(e) = db.finish(run_id.clone(), outcome.stored()).await {
                tracing::error!(run_id = run_id.as_str(), error = %e, "Recording a run's outcome failed; waiters are answered anyway.");
            }
            let _ = tx.send(Command::Persisted { run_id, outcome }).await;
        });
    }

    fn prune(&mut self) {
        while let Some(front) = self.finished.front() {
            let expired = match self.runs.get(front) {
                Some(RunEntry {
                    state: RunState::Terminal { at, .. },
                    ..
                }) => at.elapsed() > KEEP_FINISHED || self.finished.len() > MAX_FINISHED,
                _ => true,
            };
            if !expired {
                break;
            }
            if let Some(id) = self.finished.pop_front() {
                if matches!(
                    self.runs.get(&id),
                    Some(RunEntry {
                        state: RunState::Terminal { .. },
                        ..
                    })
                ) {
                    self.runs.remove(&id);
                }
            }
        }
        if let Some((deadline, _)) = &self.shutdown {
            // Past the drain deadline plus grace, workers that did not exit are killed by
            // dropping their links' children; their runs are ended here.
            if Instant::now() > *deadline + Duration::from_secs(5) {
                let stuck: Vec<String> = self
                    .runs
                    .iter()
                    .filter(|(_, e)| matches!(e.state, RunState::Active { .. }))
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in stuck {
                    self.fail_run(
                        &id,
                        RunStatus::Aborted,
                        "gateway stopped before the run finished",
                        Some(StopReason::Restart),
                    );
                }
                for slot in self.workers.values_mut() {
                    if !matches!(slot.state, WorkerState::Exited | WorkerState::Idle) {
                        slot.state = WorkerState::Exited;
                    }
                }
            }
        }
    }

    fn begin_shutdown(&mut self, deadline: Duration, reply: oneshot::Sender<()>) {
        let until = Instant::now() + deadline;
        for slot in self.workers.values_mut() {
            let state = std::mem::replace(&mut slot.state, WorkerState::Idle);
            slot.state = match state {
                WorkerState::Ready { pid, link, .. } => {
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: deadline.as_millis() as u64,
                    });
                    WorkerState::Draining {
                        pid,
                        since: Instant::now(),
                    }
                }
                other => other,
            };
        }
        self.shutdown = Some((until, reply));
    }

    fn shutdown_complete(&self) -> bool {
        self.shutdown.is_some()
            && self
                .workers
                .values()
                .all(|s| matches!(s.state, WorkerState::Idle | WorkerState::Exited))
            && !self.runs.values().any(|e| {
                matches!(
                    e.state,
                    RunState::Active { .. } | RunState::Persisting { .. }
                )
            })
    }

    fn status(&self, connections: u64) -> StatusResult {
        let mut workers: Vec<WorkerStatus> = self
            .deps
            .config
            .agents
            .iter()
            .filter_map(|a| self.workers.get(a.id.as_str()).map(|s| (a, s)))
            .map(|(a, s)| {
                let (state, pid, uptime) = match &s.state {
                    WorkerState::Idle => ("idle", None, None),
                    WorkerState::Spawning { since, .. } => {
                        ("spawning", None, Some(since.elapsed()))
                    }
                    WorkerState::Ready { pid, since, .. } => {
                        ("ready", Some(*pid), Some(since.elapsed()))
                    }
                    WorkerState::Draining { pid, since } => {
                        ("draining", Some(*pid), Some(since.elapsed()))
                    }
                    WorkerState::Exited => ("exited", None, None),
                };
                WorkerStatus {
                    agent_id: a.id.as_str().to_owned(),
                    pid,
                    state: state.into(),
                    restarts: s.restarts,
                    runs_in_flight: s.in_flight.len() as u64,
                    uptime_ms: uptime.map(|d| d.as_millis() as u64),
                    last_exit: s.last_exit.clone(),
                }
            })
            .collect();
        workers.sort_by(|a, b| {
            (a.agent_id != "main")
                .cmp(&(b.agent_id != "main"))
                .then(a.agent_id.cmp(&b.agent_id))
        });
        StatusResult {
            supervisor: SupervisorStatus {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_ms: self.deps.started.elapsed().as_millis() as u64,
                connections,
                draining: self.shutdown.is_some(),
                state_dir: self.deps.config.state_dir.display().to_string(),
            },
            workers,
        }
    }
}
