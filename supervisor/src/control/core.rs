//! The control actor's core: all of its state and decisions, no I/O and no clock.
//!
//! [`Control::handle`] takes one [`Command`] and the current time ([`Now`]) and returns the
//! [`Effect`]s the shell (`shell.rs`) carries out: start or kill a worker process,
//! record an outcome or an exec pattern in the gateway db, tell systemd. What stays direct is
//! in memory only: the event hub, metrics, frames queued on a worker's link, and the answers
//! to callers (oneshot channels). Tests drive it with any clock (`control/tests.rs`).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ipc::gateway::{StatusResult, SupervisorStatus};
use tokio::sync::{oneshot, watch};

use super::approvals;
use super::command::{Command, FailedAgents};
use super::run_table::{PendingOp, RunEntry, Unsettled};
use super::slot::WorkerSlot;
use crate::config::Config;
use crate::events::EventHub;
use crate::outcome::Outcome;
use crate::worker_link::SpawnSpec;

/// The time a command is handled at: monotonic for timers, wall-clock for what clients see.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    pub wall_ms: u64,
}

impl Now {
    /// The runtime's clocks (tokio's monotonic clock, so paused time drives the timers).
    pub fn real() -> Self {
        Self {
            at: tokio::time::Instant::now().into_std(),
            wall_ms: crate::events::now_ms(),
        }
    }
}

/// What the core asks its shell to do.
pub enum Effect {
    /// Start a worker process for the agent (its link reports back as [`Command::Link`]).
    Spawn(Box<SpawnSpec>),
    /// Kill a worker process now (its exit is reported by its link).
    Kill { pid: u32 },
    /// Record a run's outcome in the gateway db, then hand back [`Command::Persisted`].
    Persist {
        run_id: String,
        outcome: Arc<Outcome>,
    },
    /// Keep an `allow-always` exec pattern in the gateway db.
    AllowExec {
        agent_id: String,
        pattern: String,
        at_ms: u64,
    },
    /// Forget a kept pattern in the gateway db, then answer `reply` (`held`: it was kept in
    /// memory).
    DisallowExec {
        agent_id: String,
        pattern: String,
        held: bool,
        reply: oneshot::Sender<Result<bool, crate::gatewaydb::DbError>>,
    },
    /// A new one-line summary for systemd (`STATUS=`).
    Status(String),
    /// Give the memory that retired workers' state freed back to the system (the allocator
    /// keeps freed pages otherwise).
    TrimHeap,
}

impl std::fmt::Debug for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Spawn(spec) => f
                .debug_struct("Spawn")
                .field("agent", &spec.agent.id.as_str())
                .field("generation", &spec.generation)
                .finish(),
            Effect::Kill { pid } => f.debug_struct("Kill").field("pid", pid).finish(),
            Effect::Persist { run_id, .. } => {
                f.debug_struct("Persist").field("run_id", run_id).finish()
            }
            Effect::AllowExec { agent_id, .. } => f
                .debug_struct("AllowExec")
                .field("agent_id", agent_id)
                .finish(),
            Effect::DisallowExec { agent_id, .. } => f
                .debug_struct("DisallowExec")
                .field("agent_id", agent_id)
                .finish(),
            Effect::Status(s) => f.debug_tuple("Status").field(s).finish(),
            Effect::TrimHeap => f.write_str("TrimHeap"),
        }
    }
}

/// What the core needs from its surroundings (all in memory).
pub struct CoreDeps {
    pub config: Arc<Config>,
    pub hub: EventHub,
    pub worker_bin: PathBuf,
    /// The supervisor's environment; each worker gets an allow-listed part of it.
    pub env: HashMap<String, String>,
    pub started: Instant,
    /// `allow-always` exec patterns by agent, from the gateway db.
    pub allowed_exec: HashMap<String, Vec<String>>,
    pub metrics: crate::metrics::Metrics,
}

pub struct Control {
    pub(super) deps: CoreDeps,
    /// When the command being handled arrived.
    pub(super) now: Now,
    /// What the command being handled asks of the shell.
    pub(super) effects: Vec<Effect>,
    pub(super) workers: HashMap<String, WorkerSlot>,
    pub(super) runs: HashMap<String, RunEntry>,
    /// Waiters of runs accepted but not handed over yet, joined to the run when it is.
    pub(super) expected: HashMap<String, Vec<oneshot::Sender<Arc<crate::outcome::Outcome>>>>,
    /// `runs` not yet settled, by session.
    pub(super) unsettled: Unsettled,
    pub(super) finished: VecDeque<String>,
    pub(super) shutdown: Option<(Instant, oneshot::Sender<()>)>,
    /// Session operations sent to workers and not yet answered.
    pub(super) ops: HashMap<u64, PendingOp>,
    pub(super) next_op: u64,
    pub(super) next_nonce: u64,
    pub(super) failed_tx: watch::Sender<FailedAgents>,
    pub(super) last_status: String,
    /// Exec approvals waiting for operators.
    pub(super) approvals: approvals::Approvals,
    /// `allow-always` exec patterns by agent (kept in the gateway db).
    pub(super) allowed: HashMap<String, Vec<String>>,
    /// What each admitted run holds of the room for queued messages (`queue_room`).
    pub(super) room: super::queue_room::QueueRoom,
    /// When to trim the heap, once a worker has retired (`retire`).
    pub(super) trim_at: Option<Instant>,
}

impl Control {
    /// The core with its config's worker set (no worker started yet), and a view of the
    /// agents whose crash-loop breaker tripped.
    pub fn new(deps: CoreDeps, now: Now) -> (Self, watch::Receiver<FailedAgents>) {
        let (failed_tx, failed_rx) = watch::channel(FailedAgents::default());
        let config = deps.config.clone();
        let allowed = deps.allowed_exec.clone();
        let mut control = Control {
            deps,
            now,
            effects: Vec::new(),
            workers: HashMap::new(),
            runs: HashMap::new(),
            expected: HashMap::new(),
            unsettled: Unsettled::default(),
            finished: VecDeque::new(),
            shutdown: None,
            ops: HashMap::new(),
            next_op: 1,
            next_nonce: 1,
            failed_tx,
            last_status: String::new(),
            approvals: approvals::Approvals::default(),
            allowed,
            room: Default::default(),
            trim_at: None,
        };
        control.reconcile(config);
        (control, failed_rx)
    }

    /// Handles one command at `now`; returns what the shell must do.
    pub fn handle(&mut self, cmd: Command, now: Now) -> Vec<Effect> {
        self.now = now;
        self.handle_command(cmd);
        if self.shutdown_complete() {
            if let Some((_, reply)) = self.shutdown.take() {
                let _ = reply.send(());
            }
        }
        std::mem::take(&mut self.effects)
    }

    /// When the core next needs a [`Command::Tick`] beyond the periodic one (a restart).
    pub fn next_wake(&self) -> Option<Instant> {
        match (self.next_restart(), self.trim_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        match cmd {
            Command::Dispatch(d) => self.dispatch(*d),
            Command::Reserve { room, reply } => {
                let _ = reply.send(self.reserve(room));
            }
            Command::Unreserve { run_id } => {
                let dispatched = self.runs.contains_key(&run_id);
                self.room.unreserve(&run_id, dispatched);
            }
            Command::Wait {
                run_id,
                expected,
                reply,
            } => {
                let _ = reply.send(self.wait(&run_id, expected));
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
            Command::HasStarted { run_id, reply } => {
                let _ = reply.send(self.has_started(&run_id));
            }
            Command::RestartWorker {
                agent_id,
                force,
                reply,
            } => self.restart_worker(&agent_id, force, reply),
            Command::StopWorker { agent_id } => self.stop_worker(&agent_id),
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
                self.prune_charges();
                self.prune_approvals();
                self.overdue_runs();
                self.retry_sends();
                self.heartbeats();
                self.retire_idle();
                self.trim_due();
                self.restart_due();
                self.report_status();
            }
        }
    }

    /// The supervisor and its workers as `status` shows them (memory figures are added by
    /// the caller, off the actor).
    fn status(&self, connections: u64) -> StatusResult {
        StatusResult {
            supervisor: SupervisorStatus {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").into(),
                uptime_ms: self
                    .now
                    .at
                    .saturating_duration_since(self.deps.started)
                    .as_millis() as u64,
                connections,
                draining: self.shutdown.is_some(),
                state_dir: self.deps.config.state_dir.display().to_string(),
                rss_bytes: None,
            },
            workers: self.worker_statuses(),
            // Filled in off the actor (it asks the cluster).
            cluster: None,
        }
    }

    /// Asks for `STATUS=` to systemd when the summary changes.
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
            self.effects.push(Effect::Status(status.clone()));
            self.last_status = status;
        }
    }

    /// Room for a queued run (`queue_room`), with what the core knows of it.
    pub(super) fn reserve(
        &mut self,
        r: super::queue_room::Reserve,
    ) -> Result<bool, super::queue_room::QueueFull> {
        self.prune_charges();
        let known = self.runs.contains_key(&r.run_id);
        let busy = !self.unsettled.of(&r.session_key).is_empty();
        let limits = self.deps.config.queue_limits;
        self.room.reserve(r, known, busy, &limits, self.now.at)
    }

    /// Drops the room of settled runs and lapsed reservations.
    pub(super) fn prune_charges(&mut self) {
        let runs = &self.runs;
        self.room
            .prune(self.now.at, |id| runs.get(id).map(RunEntry::is_unsettled));
    }

    /// Queued messages of `agent_id` (`None`: of all agents).
    #[cfg(test)]
    pub(super) fn queued_usage(&self, agent_id: Option<&str>) -> super::queue_room::Usage {
        self.room.queued_usage(agent_id)
    }
}
