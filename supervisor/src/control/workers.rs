//! The worker set of the control actor: one slot per agent, its lifecycle state machine,
//! restarts with exponential backoff and jitter, the crash-loop breaker, heartbeats, operator
//! restarts, config reconcile and drain.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{ControlToWorker, RunStatus, SessionReply, StopReason, WorkerToControl};
use ipc::gateway::WorkerStatus;
use ipc::{ErrorCode, RpcError};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::Control;
use crate::config::{AgentConfig, Config};
use crate::events::Deferred;
use crate::worker_link::{self, LinkEvent, LinkHandle, SpawnSpec};

/// Frames queued for a worker that is starting, backing off or restarting.
const MAX_QUEUED: usize = 4096;

/// Environment variables every worker inherits (plus each provider's `api_key_env`).
const WORKER_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "LOOPGATE_LOG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// What happens when a draining worker exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterExit {
    /// The gateway is stopping.
    Stop,
    /// Start a new worker at once (operator restart, changed config).
    Restart,
    /// The agent was removed from config.
    Remove,
}

/// Worker lifecycle. Data lives only in the state it belongs to.
pub(super) enum WorkerState {
    /// Never started (workers start on their agent's first run or session operation).
    Idle,
    Spawning {
        since: Instant,
        /// Frames (runs, session ops) waiting for the worker's handshake.
        queued: VecDeque<ControlToWorker>,
    },
    Ready {
        pid: u32,
        since: Instant,
        link: LinkHandle,
        last_pong: Instant,
    },
    Draining {
        pid: u32,
        since: Instant,
        then: AfterExit,
        queued: VecDeque<ControlToWorker>,
        /// The draining worker's link: cancels still reach the runs it finishes.
        link: Option<LinkHandle>,
    },
    /// Crashed; restarts at `until`.
    Backoff {
        until: Instant,
        queued: VecDeque<ControlToWorker>,
    },
    /// The crash-loop breaker tripped; runs are refused until an operator restarts it.
    Failed { since: Instant, reason: String },
    /// Stopped on purpose; starts again on the next run.
    Exited,
}

pub(super) struct WorkerSlot {
    pub agent: AgentConfig,
    pub state: WorkerState,
    pub generation: u64,
    pub restarts: u32,
    pub last_exit: Option<String>,
    /// Runs handed to the current generation's link and not yet terminal (runs still
    /// queued for a worker are in the queue, not here).
    pub in_flight: Vec<String>,
    /// Frames that found the link closed while the worker's exit was not yet reported;
    /// [`Control::worker_gone`] carries them over like queued frames.
    held: VecDeque<ControlToWorker>,
    /// Cancels and approval decisions the worker's full link could not take yet: sent again
    /// on every tick (an abort was already told to clients; it must reach the run).
    retry: VecDeque<ControlToWorker>,
    /// Recent crash times (within the crash-loop window).
    crashes: VecDeque<Instant>,
    /// Consecutive crashes, for the backoff exponent.
    attempt: u32,
    /// Why the supervisor killed this worker, if it did.
    kill_reason: Option<String>,
    /// Operator restarts waiting for the new worker.
    restart_waiters: Vec<oneshot::Sender<Result<Value, RpcError>>>,
}

impl WorkerSlot {
    fn new(agent: AgentConfig) -> Self {
        Self {
            agent,
            state: WorkerState::Idle,
            generation: 0,
            restarts: 0,
            last_exit: None,
            in_flight: Vec::new(),
            held: VecDeque::new(),
            retry: VecDeque::new(),
            crashes: VecDeque::new(),
            attempt: 0,
            kill_reason: None,
            restart_waiters: Vec::new(),
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, WorkerState::Ready { .. })
    }

    pub fn is_failed(&self) -> bool {
        matches!(self.state, WorkerState::Failed { .. })
    }

    fn queued_mut(&mut self) -> Option<&mut VecDeque<ControlToWorker>> {
        match &mut self.state {
            WorkerState::Spawning { queued, .. }
            | WorkerState::Backoff { queued, .. }
            | WorkerState::Draining {
                then: AfterExit::Restart,
                queued,
                ..
            } => Some(queued),
            WorkerState::Idle
            | WorkerState::Ready { .. }
            | WorkerState::Draining { .. }
            | WorkerState::Failed { .. }
            | WorkerState::Exited => None,
        }
    }

    /// Frames waiting for a worker, oldest first: those held from a closed link, then the
    /// state's queue.
    fn take_queued(&mut self) -> VecDeque<ControlToWorker> {
        let mut frames = std::mem::take(&mut self.held);
        frames.extend(self.queued_mut().map(std::mem::take).unwrap_or_default());
        frames
    }

    /// Runs waiting for a worker (queued or held), for status.
    fn queued_runs(&self) -> usize {
        let state = match &self.state {
            WorkerState::Spawning { queued, .. }
            | WorkerState::Backoff { queued, .. }
            | WorkerState::Draining { queued, .. } => Some(queued),
            _ => None,
        };
        self.held
            .iter()
            .chain(state.into_iter().flatten())
            .filter(|m| matches!(m, ControlToWorker::Submit(_)))
            .count()
    }

    fn answer_restart(&mut self, result: Result<Value, RpcError>) {
        for w in self.restart_waiters.drain(..) {
            let _ = w.send(result.clone());
        }
    }
}

/// How a frame for a worker was handled.
pub(super) enum Delivery {
    Sent,
    Queued,
    Refused(String),
}

/// Delay before restart attempt `attempt` (0-based): doubling from `initial` up to `max`,
/// with up to ±25 % jitter so crashed workers do not restart in lockstep.
pub(super) fn backoff(
    initial: Duration,
    max: Duration,
    attempt: u32,
    jitter_seed: u64,
) -> Duration {
    // Cheap deterministic jitter from the seed (splitmix64 step).
    let mut z = jitter_seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let unit = ((z ^ (z >> 31)) % 1000) as f64 / 1000.0; // [0, 1)
    backoff::delay(initial, max, attempt, 0.25, unit)
}

fn worker_env(config: &Config, env: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut names: Vec<&str> = WORKER_ENV_ALLOW.to_vec();
    for a in &config.agents {
        if let Some(k) = a.model.as_ref().and_then(|m| m.api_key_env.as_deref()) {
            names.push(k);
        }
    }
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|k| env.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

impl Control {
    /// Hands a frame to `agent_id`'s worker: sends it, queues it for a worker that is
    /// starting, or starts the worker.
    pub(super) fn deliver(&mut self, agent_id: &str, msg: ControlToWorker) -> Delivery {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return Delivery::Refused(format!("unknown agent {agent_id:?}"));
        };
        match &mut slot.state {
            WorkerState::Ready { link, .. } => match link.try_send(msg) {
                Ok(()) => Delivery::Sent,
                Err(crate::worker_link::LinkSendError::Full(_)) => {
                    Delivery::Refused("worker queue is full; retry shortly".into())
                }
                // The worker is exiting and its exit is not reported yet: the frame waits and
                // goes to the next worker (or fails with the rest if none comes).
                Err(crate::worker_link::LinkSendError::Closed(msg)) => {
                    if slot.held.len() < MAX_QUEUED {
                        slot.held.push_back(*msg);
                        Delivery::Queued
                    } else {
                        Delivery::Refused(format!(
                            "the worker for agent {agent_id:?} is exiting and restarted; retry shortly"
                        ))
                    }
                }
            },
            WorkerState::Failed { reason, .. } => {
                Delivery::Refused(failed_message(agent_id, reason))
            }
            WorkerState::Draining {
                then: AfterExit::Stop | AfterExit::Remove,
                ..
            } => Delivery::Refused("worker is draining; retry shortly".into()),
            WorkerState::Idle | WorkerState::Exited => {
                self.spawn_worker(agent_id, VecDeque::from([msg]));
                Delivery::Queued
            }
            WorkerState::Spawning { .. }
            | WorkerState::Backoff { .. }
            | WorkerState::Draining { .. } => match slot.queued_mut() {
                Some(q) if q.len() < MAX_QUEUED => {
                    q.push_back(msg);
                    Delivery::Queued
                }
                _ => Delivery::Refused(
                    "worker is starting and its queue is full; retry shortly".into(),
                ),
            },
        }
    }

    /// Removes a queued (not yet sent) run; `true` if it was queued.
    pub(super) fn unqueue_run(&mut self, agent_id: &str, run_id: &str) -> bool {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return false;
        };
        let is_run =
            |m: &ControlToWorker| matches!(m, ControlToWorker::Submit(r) if r.run_id == run_id);
        let before = slot.held.len();
        slot.held.retain(|m| !is_run(m));
        let mut removed = slot.held.len() != before;
        if let Some(q) = slot.queued_mut() {
            let before = q.len();
            q.retain(|m| !is_run(m));
            removed |= q.len() != before;
        }
        removed
    }

    pub(super) fn send_if_ready(&mut self, agent_id: &str, msg: ControlToWorker) {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        match &slot.state {
            WorkerState::Ready { link, .. } => match link.try_send(msg) {
                Ok(()) => {}
                // A closed link may still hold the run this is about, unsent: the frame
                // follows it to the next worker (a Cancel must not be lost while its Submit
                // carries over).
                Err(crate::worker_link::LinkSendError::Closed(msg)) => {
                    if slot.held.len() < MAX_QUEUED {
                        slot.held.push_back(*msg);
                    }
                }
                Err(crate::worker_link::LinkSendError::Full(msg)) => {
                    if slot.retry.len() < MAX_QUEUED {
                        slot.retry.push_back(*msg);
                    }
                }
            },
            // A draining worker still finishes its runs: a cancel must reach them.
            WorkerState::Draining {
                link: Some(link), ..
            } => {
                if let Err(crate::worker_link::LinkSendError::Full(msg)) = link.try_send(msg) {
                    if slot.retry.len() < MAX_QUEUED {
                        slot.retry.push_back(*msg);
                    }
                }
            }
            _ => {}
        }
    }

    /// Sends again what a full link could not take (see `WorkerSlot::retry`), in order.
    pub(super) fn retry_sends(&mut self) {
        for slot in self.workers.values_mut() {
            let link = match &slot.state {
                WorkerState::Ready { link, .. }
                | WorkerState::Draining {
                    link: Some(link), ..
                } => link.clone(),
                _ => {
                    slot.retry.clear();
                    continue;
                }
            };
            while let Some(msg) = slot.retry.pop_front() {
                match link.try_send(msg) {
                    Ok(()) => {}
                    Err(crate::worker_link::LinkSendError::Full(msg)) => {
                        slot.retry.push_front(*msg);
                        break;
                    }
                    Err(crate::worker_link::LinkSendError::Closed(_)) => {
                        slot.retry.clear();
                        break;
                    }
                }
            }
        }
    }

    fn spawn_worker(&mut self, agent_id: &str, queued: VecDeque<ControlToWorker>) {
        let env = worker_env(&self.deps.config, &self.deps.env);
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        if slot.generation > 0 {
            slot.restarts += 1;
            self.deps.metrics.worker_restarted(agent_id);
        }
        slot.generation += 1;
        slot.kill_reason = None;
        slot.state = WorkerState::Spawning {
            since: Instant::now(),
            queued,
        };
        tracing::info!(
            agent = agent_id,
            generation = slot.generation,
            "Starting worker."
        );
        // The patterns operators allowed with `allow-always` join the config's, while the
        // agent is still under `ask` (moving it to `allowlist` leaves only the config's).
        let mut agent = slot.agent.clone();
        let allowed = self
            .allowed
            .get(agent_id)
            .filter(|_| agent.exec.security == ipc::control::ExecSecurity::Ask)
            .map_or(&[][..], Vec::as_slice);
        for p in allowed {
            if !agent.exec.allowlist.contains(p) {
                agent.exec.allowlist.push(p.clone());
            }
        }
        worker_link::spawn(
            SpawnSpec {
                agent,
                generation: slot.generation,
                worker_bin: self.deps.worker_bin.clone(),
                run_dir: crate::paths::run_dir(&self.deps.config.state_dir),
                env,
                metrics: self.deps.metrics.clone(),
            },
            self.deps.hub.clone(),
            self.link_tx.clone(),
        );
    }

    pub(super) fn link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Ready {
                agent_id,
                generation,
                pid,
                link,
            } => self.worker_ready(agent_id, generation, pid, link),
            LinkEvent::SpawnFailed {
                agent_id,
                generation,
                error,
            } => {
                if self
                    .workers
                    .get(&agent_id)
                    .is_some_and(|s| s.generation == generation)
                {
                    tracing::error!(
                        agent = agent_id.as_str(),
                        generation,
                        error = error.as_str(),
                        "Worker failed to start."
                    );
                    self.worker_gone(
                        &agent_id,
                        format!("failed to start: {error}"),
                        HashMap::new(),
                        true,
                    );
                }
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
                WorkerToControl::SessionDone { op_id, reply } => {
                    let result = match reply {
                        SessionReply::Failed { error } => Err(error),
                        SessionReply::Unknown => Err(RpcError::new(
                            ErrorCode::Internal,
                            "the worker answered with a reply this build does not know",
                        )),
                        done => Ok(done),
                    };
                    self.answer_op(op_id, result);
                }
                WorkerToControl::SessionResult { op_id, .. } => {
                    // Only v1 workers send it, and the handshake refuses them.
                    self.answer_op(
                        op_id,
                        Err(RpcError::new(
                            ErrorCode::Internal,
                            "the worker answered in protocol v1",
                        )),
                    );
                }
                WorkerToControl::Pong { .. } => {
                    if let Some(WorkerSlot {
                        state: WorkerState::Ready { last_pong, .. },
                        generation: g,
                        ..
                    }) = self.workers.get_mut(&agent_id)
                    {
                        if *g == generation {
                            *last_pong = Instant::now();
                        }
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
                WorkerToControl::ApprovalRequested(request) => {
                    self.approval_requested(&agent_id, request)
                }
                WorkerToControl::ApprovalClosed { id, why } => self.approval_closed(&id, why),
                WorkerToControl::Diagnostic(report) => self.diagnostic(&agent_id, report),
                WorkerToControl::Recovery(report) => self.recovery(&agent_id, report),
                WorkerToControl::Counters(c) => {
                    self.deps.metrics.worker_counters(&agent_id, generation, c)
                }
                WorkerToControl::Event(_) | WorkerToControl::Unknown => {}
            },
            LinkEvent::Exited {
                agent_id,
                generation,
                cause,
                failures,
                unsent,
            } => {
                // Runs that ended while their Submit waited unsent (an abort ends a run at
                // once) must not run in the next worker: neither they nor their cancels go on.
                let ended: HashSet<String> = unsent
                    .iter()
                    .filter_map(|m| match m {
                        ControlToWorker::Submit(r)
                            if !self.runs.get(&r.run_id).is_some_and(|e| e.is_active()) =>
                        {
                            Some(r.run_id.clone())
                        }
                        _ => None,
                    })
                    .collect();
                if let Some(slot) = self
                    .workers
                    .get_mut(&agent_id)
                    .filter(|s| s.generation == generation)
                {
                    // What never reached the worker waits for the next one, first in line.
                    let carried: Vec<ControlToWorker> = unsent
                        .into_iter()
                        .filter(|m| match m {
                            ControlToWorker::Submit(r) => !ended.contains(&r.run_id),
                            ControlToWorker::Cancel { run_id, .. } => !ended.contains(run_id),
                            ControlToWorker::Session { .. } => true,
                            _ => false,
                        })
                        .collect();
                    for m in carried.iter().rev() {
                        if let ControlToWorker::Submit(run) = m {
                            slot.in_flight.retain(|id| *id != run.run_id);
                        }
                    }
                    for m in carried.into_iter().rev() {
                        slot.held.push_front(m);
                    }
                    self.worker_gone(&agent_id, cause, failures.into_iter().collect(), false);
                } else if !self.workers.contains_key(&agent_id) {
                    tracing::info!(
                        agent = agent_id.as_str(),
                        generation,
                        cause = cause.as_str(),
                        "Worker of a removed agent exited."
                    );
                }
            }
        }
    }

    fn worker_ready(&mut self, agent_id: String, generation: u64, pid: u32, link: LinkHandle) {
        let shutting_down = self.shutdown.as_ref().map(|(deadline, _)| *deadline);
        let Some(slot) = self.workers.get_mut(&agent_id) else {
            // The agent was removed while its worker started: let it go.
            let _ = link.send(ControlToWorker::Drain { deadline_ms: 0 });
            return;
        };
        if slot.generation != generation {
            let _ = link.send(ControlToWorker::Drain { deadline_ms: 0 });
            return;
        }
        let queued = slot.take_queued();
        let mut overflow = Vec::new();
        for msg in queued {
            let run_id = match &msg {
                ControlToWorker::Submit(run) => Some(run.run_id.clone()),
                _ => None,
            };
            match link.send(msg) {
                Ok(()) => slot.in_flight.extend(run_id),
                Err(msg) => overflow.push(*msg),
            }
        }
        let now = Instant::now();
        slot.state = match shutting_down {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(now);
                let _ = link.send(ControlToWorker::Drain {
                    deadline_ms: left.as_millis() as u64,
                });
                WorkerState::Draining {
                    pid,
                    since: now,
                    then: AfterExit::Stop,
                    queued: VecDeque::new(),
                    link: Some(link),
                }
            }
            None => WorkerState::Ready {
                pid,
                since: now,
                link,
                last_pong: now,
            },
        };
        slot.answer_restart(Ok(json!({"ok": true, "agentId": agent_id, "pid": pid})));
        for msg in overflow {
            match msg {
                ControlToWorker::Submit(run) => self.fail_run(
                    &run.run_id,
                    RunStatus::Error,
                    "worker queue is full; retry shortly",
                    None,
                ),
                ControlToWorker::Session { op_id, .. } => self.answer_op(
                    op_id,
                    Err(RpcError::new(
                        ErrorCode::Overloaded,
                        "worker queue is full; retry shortly",
                    )),
                ),
                _ => {}
            }
        }
    }

    /// The worker's process is gone (or never started): end what it had, then restart, back
    /// off, trip the breaker, or stay stopped, by state.
    fn worker_gone(
        &mut self,
        agent_id: &str,
        cause: String,
        mut failures: HashMap<String, Vec<Deferred>>,
        spawn_failed: bool,
    ) {
        let now = Instant::now();
        let stopping = self.shutdown.is_some();
        let window = self.deps.config.workers.crash_loop_window;
        let max = self.deps.config.workers.crash_loop_max;
        let (initial, cap) = (
            self.deps.config.workers.backoff_initial,
            self.deps.config.workers.backoff_max,
        );
        let seed = self.next_nonce;
        self.next_nonce += 1;
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        let cause = match slot.kill_reason.take() {
            Some(why) => format!("{why} ({cause})"),
            None => cause,
        };
        let (after, uptime) = match &slot.state {
            WorkerState::Draining { then, since, .. } => (Some(*then), Some(now - *since)),
            WorkerState::Ready { since, .. } => (None, Some(now - *since)),
            _ => (None, None),
        };
        let expected = after.is_some();
        self.deps.metrics.worker_exited(agent_id, !expected);
        self.deps.metrics.worker_retired(agent_id);
        if expected {
            tracing::info!(agent = agent_id, cause = cause.as_str(), "Worker exited.");
        } else {
            tracing::error!(
                agent = agent_id,
                cause = cause.as_str(),
                "Worker exited unexpectedly."
            );
        }
        slot.last_exit = Some(cause.clone());
        let queued = slot.take_queued();
        let runs = std::mem::take(&mut slot.in_flight);
        let verb = if spawn_failed {
            "could not start"
        } else {
            "exited during the run"
        };
        let msg = format!("worker for agent {agent_id:?} {verb}: {cause}");
        // Frames waiting for this worker either carry over to the next one or fail now.
        let mut carry = None;
        let mut to_fail: VecDeque<ControlToWorker> = VecDeque::new();
        let restart_now = after == Some(AfterExit::Restart) && !stopping;
        let next_state = match after {
            Some(_) => {
                if restart_now {
                    carry = Some(queued);
                    None
                } else {
                    to_fail.extend(queued);
                    Some(WorkerState::Exited)
                }
            }
            None if stopping => {
                to_fail.extend(queued);
                Some(WorkerState::Exited)
            }
            None => {
                if uptime.is_some_and(|u| u > window) {
                    slot.attempt = 0;
                }
                slot.crashes.push_back(now);
                while slot.crashes.front().is_some_and(|t| now - *t > window) {
                    slot.crashes.pop_front();
                }
                if slot.crashes.len() as u32 >= max {
                    let reason = format!(
                        "{} crashes within {} s; last: {cause}",
                        slot.crashes.len(),
                        window.as_secs()
                    );
                    tracing::error!(
                        agent = agent_id,
                        reason = reason.as_str(),
                        "Crash loop: agent marked failed until an operator restarts it."
                    );
                    to_fail.extend(queued);
                    Some(WorkerState::Failed { since: now, reason })
                } else {
                    let delay = backoff(initial, cap, slot.attempt, seed);
                    slot.attempt += 1;
                    tracing::info!(
                        agent = agent_id,
                        delay_ms = delay.as_millis() as u64,
                        "Restarting worker after backoff."
                    );
                    Some(WorkerState::Backoff {
                        until: now + delay,
                        queued,
                    })
                }
            }
        };
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        let failed_now = matches!(next_state, Some(WorkerState::Failed { .. }));
        match next_state {
            Some(state) => {
                let backing_off = matches!(state, WorkerState::Backoff { .. });
                slot.state = state;
                if !backing_off {
                    let err = RpcError::new(ErrorCode::Internal, format!("worker exited: {cause}"));
                    slot.answer_restart(Err(err));
                }
            }
            None => slot.state = WorkerState::Exited,
        }
        // Runs the worker had end now, with the failure events its link built.
        for id in runs {
            let events = failures.remove(&id);
            self.fail_run_with(&id, RunStatus::Error, &msg, None, events);
        }
        self.fail_frames(agent_id, to_fail, &msg);
        // Session operations still queued for the next worker stay pending.
        let waiting: HashSet<u64> = carry
            .iter()
            .flatten()
            .chain(
                self.workers
                    .get(agent_id)
                    .and_then(|s| match &s.state {
                        WorkerState::Backoff { queued, .. } => Some(queued),
                        _ => None,
                    })
                    .into_iter()
                    .flatten(),
            )
            .filter_map(|m| match m {
                ControlToWorker::Session { op_id, .. } => Some(*op_id),
                _ => None,
            })
            .collect();
        self.fail_ops_of(
            agent_id,
            &format!("worker for agent {agent_id:?} exited: {cause}"),
            &waiting,
        );
        if after == Some(AfterExit::Remove) {
            self.workers.remove(agent_id);
        } else if let Some(queued) = carry {
            self.spawn_worker(agent_id, queued);
        }
        if failed_now {
            self.publish_failed();
        }
    }

    /// Pings ready workers; kills one whose answers stopped for the heartbeat timeout.
    pub(super) fn heartbeats(&mut self) {
        let timeout = self.deps.config.workers.heartbeat_timeout;
        let now = Instant::now();
        let nonce = self.next_nonce;
        self.next_nonce += 1;
        for (agent_id, slot) in &mut self.workers {
            let WorkerState::Ready {
                pid,
                link,
                last_pong,
                ..
            } = &slot.state
            else {
                continue;
            };
            if now.saturating_duration_since(*last_pong) > timeout {
                if slot.kill_reason.is_none() {
                    tracing::error!(
                        agent = agent_id.as_str(),
                        pid,
                        "Worker missed its heartbeats; killing it."
                    );
                    slot.kill_reason = Some(format!(
                        "unresponsive: no heartbeat answer for {} ms",
                        timeout.as_millis()
                    ));
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            } else {
                let _ = link.send(ControlToWorker::Ping { nonce });
            }
        }
    }

    pub(super) fn next_restart(&self) -> Option<Instant> {
        self.workers
            .values()
            .filter_map(|s| match &s.state {
                WorkerState::Backoff { until, .. } => Some(*until),
                _ => None,
            })
            .min()
    }

    /// Restarts workers whose backoff has passed; ends runs stuck past a drain deadline.
    pub(super) fn restart_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .workers
            .iter()
            .filter(
                |(_, s)| matches!(&s.state, WorkerState::Backoff { until, .. } if *until <= now),
            )
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let queued = self
                .workers
                .get_mut(&id)
                .map(WorkerSlot::take_queued)
                .unwrap_or_default();
            self.spawn_worker(&id, queued);
        }
        if let Some((deadline, _)) = &self.shutdown {
            // Past the drain deadline plus grace, whatever is still open is ended here; the
            // workers are killed with the supervisor (parent-death signal).
            if now > *deadline + Duration::from_secs(5) {
                let stuck: Vec<String> = self
                    .runs
                    .iter()
                    .filter(|(_, e)| e.is_active())
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
                    slot.state = WorkerState::Exited;
                }
            }
        }
    }

    pub(super) fn restart_worker(
        &mut self,
        agent_id: &str,
        force: bool,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) {
        if self.shutdown.is_some() {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::Draining,
                "the gateway is shutting down",
            )));
            return;
        }
        let drain_ms = self
            .deps
            .config
            .gateway
            .drain_timeout_seconds
            .saturating_mul(1000);
        let Some(slot) = self.workers.get_mut(agent_id) else {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::UnknownAgent,
                format!("unknown agent {agent_id:?}"),
            )));
            return;
        };
        let was_failed = slot.is_failed();
        slot.crashes.clear();
        slot.attempt = 0;
        slot.restart_waiters.push(reply);
        let mut spawn = None;
        match &mut slot.state {
            WorkerState::Ready { pid, link, .. } => {
                let pid = *pid;
                if force {
                    slot.kill_reason = Some("restarted by operator (forced)".into());
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                } else {
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: drain_ms,
                    });
                }
                tracing::info!(
                    agent = agent_id,
                    pid,
                    force,
                    "Restarting worker (operator)."
                );
                let link = Some(link.clone());
                slot.state = WorkerState::Draining {
                    pid,
                    since: Instant::now(),
                    then: AfterExit::Restart,
                    queued: VecDeque::new(),
                    link,
                };
            }
            WorkerState::Draining { then, pid, .. } => {
                *then = AfterExit::Restart;
                if force {
                    slot.kill_reason = Some("restarted by operator (forced)".into());
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
            WorkerState::Spawning { .. } => {}
            WorkerState::Backoff { queued, .. } => spawn = Some(std::mem::take(queued)),
            WorkerState::Idle | WorkerState::Exited | WorkerState::Failed { .. } => {
                spawn = Some(VecDeque::new())
            }
        }
        if let Some(queued) = spawn {
            self.spawn_worker(agent_id, queued);
        }
        if was_failed {
            tracing::info!(agent = agent_id, "Crash-loop breaker reset by operator.");
            self.publish_failed();
        }
    }

    fn publish_failed(&mut self) {
        let failed: HashMap<String, String> = self
            .workers
            .iter()
            .filter_map(|(id, s)| match &s.state {
                WorkerState::Failed { reason, .. } => Some((id.clone(), reason.clone())),
                _ => None,
            })
            .collect();
        self.failed_tx.send_replace(Arc::new(failed));
    }

    /// Start, reload: make the worker set match `config` (one path for both).
    pub(super) fn reconcile(&mut self, config: Arc<Config>) {
        let drain_ms = config.gateway.drain_timeout_seconds.saturating_mul(1000);
        self.deps.config = config.clone();
        for agent in &config.agents {
            let id = agent.id.as_str();
            match self.workers.get_mut(id) {
                None => {
                    if self.shutdown.is_none() && !self.workers.is_empty() {
                        tracing::info!(agent = id, "Agent added.");
                    }
                    self.workers
                        .insert(id.to_owned(), WorkerSlot::new(agent.clone()));
                }
                Some(slot) if slot.agent != *agent => {
                    tracing::info!(
                        agent = id,
                        "Agent config changed; its worker restarts gracefully."
                    );
                    slot.agent = agent.clone();
                    if let WorkerState::Ready { pid, link, .. } = &slot.state {
                        let _ = link.send(ControlToWorker::Drain {
                            deadline_ms: drain_ms,
                        });
                        slot.state = WorkerState::Draining {
                            pid: *pid,
                            since: Instant::now(),
                            then: AfterExit::Restart,
                            queued: VecDeque::new(),
                            link: Some(link.clone()),
                        };
                    }
                }
                Some(_) => {}
            }
        }
        let removed: Vec<String> = self
            .workers
            .keys()
            .filter(|id| config.agent(id).is_none())
            .cloned()
            .collect();
        for id in removed {
            tracing::info!(
                agent = id.as_str(),
                "Agent removed; its worker drains and stops."
            );
            let Some(slot) = self.workers.get_mut(&id) else {
                continue;
            };
            match &slot.state {
                WorkerState::Ready { pid, link, .. } => {
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: drain_ms,
                    });
                    slot.state = WorkerState::Draining {
                        pid: *pid,
                        since: Instant::now(),
                        then: AfterExit::Remove,
                        queued: VecDeque::new(),
                        link: Some(link.clone()),
                    };
                }
                WorkerState::Draining { pid, link, .. } => {
                    let (pid, link) = (*pid, link.clone());
                    let queued = slot.take_queued();
                    slot.state = WorkerState::Draining {
                        pid,
                        since: Instant::now(),
                        then: AfterExit::Remove,
                        queued: VecDeque::new(),
                        link,
                    };
                    self.fail_frames(&id, queued, "agent removed from config");
                }
                WorkerState::Spawning { .. }
                | WorkerState::Backoff { .. }
                | WorkerState::Idle
                | WorkerState::Exited
                | WorkerState::Failed { .. } => {
                    let queued = slot.take_queued();
                    let runs = std::mem::take(&mut slot.in_flight);
                    self.workers.remove(&id);
                    self.fail_frames(&id, queued, "agent removed from config");
                    for r in runs {
                        self.fail_run(&r, RunStatus::Error, "agent removed from config", None);
                    }
                }
            }
        }
        self.publish_failed();
    }

    fn fail_frames(&mut self, _agent_id: &str, frames: VecDeque<ControlToWorker>, why: &str) {
        for f in frames {
            match f {
                ControlToWorker::Submit(run) => {
                    self.fail_run(&run.run_id, RunStatus::Error, why, None)
                }
                ControlToWorker::Session { op_id, .. } => {
                    self.answer_op(op_id, Err(RpcError::new(ErrorCode::UnknownAgent, why)))
                }
                _ => {}
            }
        }
    }

    pub(super) fn begin_shutdown(&mut self, deadline: Duration, reply: oneshot::Sender<()>) {
        let until = Instant::now() + deadline;
        let mut to_fail = Vec::new();
        for (id, slot) in &mut self.workers {
            match std::mem::replace(&mut slot.state, WorkerState::Exited) {
                WorkerState::Ready { pid, link, .. } => {
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: deadline.as_millis() as u64,
                    });
                    slot.state = WorkerState::Draining {
                        pid,
                        since: Instant::now(),
                        then: AfterExit::Stop,
                        queued: VecDeque::new(),
                        link: Some(link),
                    };
                }
                WorkerState::Draining {
                    pid,
                    since,
                    queued,
                    link,
                    ..
                } => {
                    to_fail.push((id.clone(), queued));
                    slot.state = WorkerState::Draining {
                        pid,
                        since,
                        then: AfterExit::Stop,
                        queued: VecDeque::new(),
                        link,
                    };
                }
                WorkerState::Backoff { queued, .. } => to_fail.push((id.clone(), queued)),
                // A starting worker is drained as soon as it is ready (see `worker_ready`).
                state @ WorkerState::Spawning { .. } => slot.state = state,
                state @ (WorkerState::Idle | WorkerState::Failed { .. } | WorkerState::Exited) => {
                    slot.state = state
                }
            }
            slot.answer_restart(Err(RpcError::new(
                ErrorCode::Draining,
                "the gateway is shutting down",
            )));
        }
        self.shutdown = Some((until, reply));
        for (id, frames) in to_fail {
            for f in frames {
                match f {
                    ControlToWorker::Submit(run) => self.fail_run(
                        &run.run_id,
                        RunStatus::Aborted,
                        "gateway is shutting down",
                        Some(StopReason::Restart),
                    ),
                    ControlToWorker::Session { op_id, .. } => self.answer_op(
                        op_id,
                        Err(RpcError::new(
                            ErrorCode::Draining,
                            "the gateway is shutting down",
                        )),
                    ),
                    _ => {}
                }
            }
            let _ = id;
        }
    }

    pub(super) fn shutdown_complete(&self) -> bool {
        self.shutdown.is_some()
            && self.workers.values().all(|s| {
                matches!(
                    s.state,
                    WorkerState::Idle | WorkerState::Exited | WorkerState::Failed { .. }
                )
            })
            && !self
                .runs
                .values()
                .any(|e| !matches!(e.state, super::runs::RunState::Terminal { .. }))
    }

    pub(super) fn worker_statuses(&self) -> Vec<WorkerStatus> {
        self.deps
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
                    WorkerState::Draining { pid, since, .. } => {
                        ("draining", Some(*pid), Some(since.elapsed()))
                    }
                    WorkerState::Backoff { .. } => ("backoff", None, None),
                    WorkerState::Failed { since, .. } => ("failed", None, Some(since.elapsed())),
                    WorkerState::Exited => ("exited", None, None),
                };
                WorkerStatus {
                    agent_id: a.id.as_str().to_owned(),
                    pid,
                    state: state.into(),
                    restarts: s.restarts,
                    runs_in_flight: (s.in_flight.len() + s.queued_runs()) as u64,
                    uptime_ms: uptime.map(|d| d.as_millis() as u64),
                    last_exit: s.last_exit.clone(),
                    rss_bytes: pid.and_then(crate::sys_info::rss_bytes),
                    failed_reason: match &s.state {
                        WorkerState::Failed { reason, .. } => Some(reason.clone()),
                        _ => None,
                    },
                }
            })
            .collect()
    }
}

fn failed_message(agent_id: &str, reason: &str) -> String {
    format!(
        "agent {agent_id:?} is marked failed after repeated worker crashes ({reason}); retry after an operator runs `loopgate worker restart {agent_id}`"
    )
}

/// The refusal for runs of a failed agent (used before acceptance too).
pub fn failed_agent_message(agent_id: &str, reason: &str) -> String {
    failed_message(agent_id, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let i = Duration::from_millis(100);
        let m = Duration::from_secs(5);
        for seed in 0..50 {
            let d0 = backoff(i, m, 0, seed);
            assert!(
                d0 >= Duration::from_millis(75) && d0 <= Duration::from_millis(125),
                "{d0:?}"
            );
            let d3 = backoff(i, m, 3, seed);
            assert!(
                d3 >= Duration::from_millis(600) && d3 <= Duration::from_millis(1000),
                "{d3:?}"
            );
            let d20 = backoff(i, m, 20, seed);
            assert!(d20 <= m.mul_f64(1.25), "{d20:?}");
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|s| backoff(i, m, 2, s)).collect();
        assert!(spread.len() > 5, "jitter varies");
    }
}
