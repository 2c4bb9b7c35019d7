//! What moves a worker slot between states: its link's reports (ready, messages, exit), the
//! crash handling (restart backoff with jitter, the crash-loop breaker), heartbeats and the
//! operator's restarts. Times are the core's `now`; processes are started and killed
//! through [`Effect`]s.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{ControlToWorker, RunStatus, StopReason, WorkerToControl};
use ipc::{ErrorCode, RpcError};

use tokio::sync::oneshot;

use super::core::{Control, Effect};
use super::slot::{backoff, AfterExit, WorkerSlot, WorkerState};
use crate::run_end::Seen;
use crate::worker_link::{LinkEvent, LinkHandle, LinkSendError};

/// What a worker's exit leads to, decided from its slot's state.
enum AfterGone {
    /// Start the next worker at once with the frames that waited (operator restart, changed
    /// config).
    RestartNow(VecDeque<ControlToWorker>),
    /// The slot's next state; `fail` are the frames that waited and fail now (backing off,
    /// they stay queued in the state instead).
    Next {
        state: WorkerState,
        fail: VecDeque<ControlToWorker>,
    },
}

impl Control {
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
                        Gone::SpawnFailed,
                    );
                }
            }
            LinkEvent::Finished {
                agent_id,
                terminal,
                seen,
                gate,
                ..
            } => self.finished_run(&agent_id, *terminal, seen, gate),
            LinkEvent::Message {
                agent_id,
                generation,
                msg,
            } => self.worker_message(&agent_id, generation, *msg),
            LinkEvent::Exited {
                agent_id,
                generation,
                cause,
                journal_stopped,
                seen,
                unsent,
            } => {
                let how = match journal_stopped {
                    true => Gone::JournalStopped,
                    false => Gone::Exited,
                };
                self.worker_exited(agent_id, generation, cause, how, seen, unsent)
            }
        }
    }

    fn worker_message(&mut self, agent_id: &str, generation: u64, msg: WorkerToControl) {
        match msg {
            // The link reports it as `LinkEvent::Finished`, with what clients saw.
            WorkerToControl::Finished(_) => {}
            WorkerToControl::Rejected { run_id, error } => {
                self.fail_run(
                    &run_id,
                    RunStatus::Error,
                    &format!("worker refused the run: {}", error.message),
                    None,
                );
                // The worker tells nothing more of it.
                self.forget_on_link(agent_id, &run_id);
            }
            WorkerToControl::SessionDone { op_id, reply } => {
                self.answer_op(op_id, super::ask::settled(reply));
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
                let now = self.now.at;
                if let Some(WorkerSlot {
                    state: WorkerState::Ready { last_pong, .. },
                    generation: g,
                    ..
                }) = self.workers.get_mut(agent_id)
                {
                    if *g == generation {
                        *last_pong = now;
                    }
                }
            }
            WorkerToControl::Drained { completed, aborted } => {
                tracing::info!(
                    agent = agent_id,
                    generation,
                    completed,
                    aborted,
                    "Worker drained."
                );
            }
            WorkerToControl::ApprovalRequested(request) => {
                self.approval_requested(agent_id, request)
            }
            WorkerToControl::ApprovalClosed { id, why } => self.approval_closed(&id, why),
            WorkerToControl::Diagnostic(report) => self.diagnostic(agent_id, report),
            WorkerToControl::Recovery(report) => self.recovery(agent_id, report),
            WorkerToControl::Counters(c) => {
                self.deps.metrics.worker_counters(agent_id, generation, c)
            }
            // The link's relay handles events and the journal's frames itself.
            WorkerToControl::Event(_)
            | WorkerToControl::JournalSync { .. }
            | WorkerToControl::Journal { .. }
            | WorkerToControl::Unknown => {}
        }
    }

    /// The link of `generation` ended: what it never wrote carries over, then the slot
    /// handles the exit.
    fn worker_exited(
        &mut self,
        agent_id: String,
        generation: u64,
        cause: String,
        how: Gone,
        seen: HashMap<String, Seen>,
        unsent: Vec<ControlToWorker>,
    ) {
        // Runs that ended while their Submit waited unsent (an abort ends a run at once)
        // must not run in the next worker: neither they nor their cancels go on.
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
        let Some(slot) = self
            .workers
            .get_mut(&agent_id)
            .filter(|s| s.generation == generation)
        else {
            if !self.workers.contains_key(&agent_id) {
                tracing::info!(
                    agent = agent_id.as_str(),
                    generation,
                    cause = cause.as_str(),
                    "Worker of a removed agent exited."
                );
            }
            return;
        };
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
        self.worker_gone(&agent_id, cause, seen, how);
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
            match link.try_send(msg) {
                Ok(()) => slot.in_flight.extend(run_id),
                Err(LinkSendError::Full(msg)) => overflow.push(*msg),
                // The worker died right after its handshake (its exit is on its way): its
                // runs fail with the exit's cause, as if sent (session operations too, at the
                // exit), instead of a misleading "queue is full".
                Err(LinkSendError::Closed(_)) => slot.in_flight.extend(run_id),
            }
        }
        let now = self.now.at;
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
        slot.answer_restart(Ok(ipc::gateway::WorkerRestartResult {
            ok: true,
            agent_id: agent_id.clone(),
            pid,
        }));
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
        mut seen: HashMap<String, Seen>,
        how: Gone,
    ) {
        let seed = self.next_nonce;
        self.next_nonce += 1;
        let Some((cause, after, next)) = self.after_exit(agent_id, cause, how, seed) else {
            return;
        };
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        let runs = std::mem::take(&mut slot.in_flight);
        // Frames waiting for this worker either carry over to the next one or fail now.
        let (carry, to_fail, failed_now) = match next {
            AfterGone::RestartNow(queued) => {
                slot.state = WorkerState::Exited;
                (Some(queued), VecDeque::new(), false)
            }
            AfterGone::Next { state, fail } => {
                let backing_off = matches!(state, WorkerState::Backoff { .. });
                let failed_now = matches!(state, WorkerState::Failed { .. });
                slot.state = state;
                if !backing_off {
                    let err = RpcError::new(ErrorCode::Internal, format!("worker exited: {cause}"));
                    slot.answer_restart(Err(err));
                }
                (None, fail, failed_now)
            }
        };
        let verb = if how == Gone::SpawnFailed {
            "could not start"
        } else {
            "exited during the run"
        };
        let msg = format!("worker for agent {agent_id:?} {verb}: {cause}");
        // Runs the worker had end now, told after what their clients saw.
        for id in runs {
            let seen = seen.remove(&id);
            self.run_gone(&id, &msg, seen);
        }
        self.fail_frames(agent_id, to_fail, &msg);
        self.fail_ops_after_exit(agent_id, &cause, carry.as_ref());
        if after == Some(AfterExit::Remove) {
            self.workers.remove(agent_id);
        } else if let Some(queued) = carry {
            self.spawn_worker(agent_id, queued);
        }
        if failed_now {
            self.publish_failed();
        }
    }

    /// Records the exit of `agent_id`'s worker (cause, metrics, log) and decides what follows
    /// from the slot's state; `None` for an unknown agent. Returns the full cause, how the
    /// worker was being stopped (if it was), and what comes next.
    fn after_exit(
        &mut self,
        agent_id: &str,
        cause: String,
        how: Gone,
        seed: u64,
    ) -> Option<(String, Option<AfterExit>, AfterGone)> {
        let now = self.now.at;
        let stopping = self.shutdown.is_some();
        let crash = Crash::at(now, seed, &self.deps.config.workers);
        let slot = self.workers.get_mut(agent_id)?;
        let cause = match slot.kill_reason.take() {
            Some(why) => format!("{why} ({cause})"),
            None => cause,
        };
        let (after, uptime) = match &slot.state {
            WorkerState::Draining { then, since, .. } => (Some(*then), Some(now - *since)),
            WorkerState::Ready { since, .. } => (None, Some(now - *since)),
            _ => (None, None),
        };
        let expected = after.is_some() || how == Gone::JournalStopped;
        self.deps.metrics.worker_exited(agent_id, !expected);
        self.deps.metrics.worker_retired(agent_id);
        if how == Gone::JournalStopped && after.is_none() {
            tracing::warn!(
                agent = agent_id,
                cause = cause.as_str(),
                "Worker stopped: the agent's journal did not take it (not counted as a crash)."
            );
        } else if expected {
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
        if after == Some(AfterExit::Retire) {
            slot.retired = true;
        }
        let next = match after {
            Some(AfterExit::Restart) if !stopping => AfterGone::RestartNow(queued),
            // Retired; a run that came meanwhile starts the next worker now.
            Some(AfterExit::Retire) if !stopping && !queued.is_empty() => {
                AfterGone::RestartNow(queued)
            }
            Some(AfterExit::Retire) if !stopping => AfterGone::Next {
                state: WorkerState::Idle,
                fail: queued,
            },
            Some(_) => AfterGone::Next {
                state: WorkerState::Exited,
                fail: queued,
            },
            None if stopping => AfterGone::Next {
                state: WorkerState::Exited,
                fail: queued,
            },
            None if how == Gone::JournalStopped => journal_stopped(slot, crash, queued),
            None => crashed(slot, agent_id, &cause, uptime, crash, queued),
        };
        if after == Some(AfterExit::Retire) {
            self.trim_soon(now);
        }
        Some((cause, after, next))
    }

    /// Fails the session operations that waited on an exited worker, except those still
    /// queued for the next one (`carry`, or the queue of a slot backing off).
    fn fail_ops_after_exit(
        &mut self,
        agent_id: &str,
        cause: &str,
        carry: Option<&VecDeque<ControlToWorker>>,
    ) {
        let backoff_queue = self.workers.get(agent_id).and_then(|s| match &s.state {
            WorkerState::Backoff { queued, .. } => Some(queued),
            _ => None,
        });
        let waiting: HashSet<u64> = carry
            .into_iter()
            .flatten()
            .chain(backoff_queue.into_iter().flatten())
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
    }

    /// Pings ready workers; kills one whose answers stopped for the heartbeat timeout.
    pub(super) fn heartbeats(&mut self) {
        let timeout = self.deps.config.workers.heartbeat_timeout;
        let now = self.now.at;
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
                    self.effects.push(Effect::Kill { pid: *pid });
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
        let now = self.now.at;
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
        reply: oneshot::Sender<Result<ipc::gateway::WorkerRestartResult, RpcError>>,
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
                    self.effects.push(Effect::Kill { pid });
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
                    since: self.now.at,
                    then: AfterExit::Restart,
                    queued: VecDeque::new(),
                    link,
                };
            }
            WorkerState::Draining { then, pid, .. } => {
                *then = AfterExit::Restart;
                if force {
                    slot.kill_reason = Some("restarted by operator (forced)".into());
                    self.effects.push(Effect::Kill { pid: *pid });
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

    /// Kills the agent's worker, which then goes back to `Idle` ([`Command::StopWorker`]).
    pub(super) fn stop_worker(&mut self, agent_id: &str) {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        let why = "stopped: this gateway no longer holds the agent's cluster lease";
        match &mut slot.state {
            WorkerState::Ready { pid, link, .. } => {
                let (pid, link) = (*pid, Some(link.clone()));
                slot.kill_reason = Some(why.into());
                self.effects.push(Effect::Kill { pid });
                slot.state = WorkerState::Draining {
                    pid,
                    since: self.now.at,
                    then: AfterExit::Retire,
                    queued: VecDeque::new(),
                    link,
                };
            }
            WorkerState::Draining { pid, then, .. } => {
                slot.kill_reason = Some(why.into());
                self.effects.push(Effect::Kill { pid: *pid });
                if *then == AfterExit::Restart {
                    *then = AfterExit::Retire;
                }
            }
            // A worker still starting asks for its journal first, which this gateway no
            // longer serves: it stops by itself.
            WorkerState::Spawning { .. }
            | WorkerState::Backoff { .. }
            | WorkerState::Idle
            | WorkerState::Failed { .. }
            | WorkerState::Exited => {}
        }
    }

    pub(super) fn publish_failed(&mut self) {
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
}

/// A crash as the breaker and the backoff see it: when, the jitter seed, and the
/// `[workers]` settings.
#[derive(Clone, Copy)]
struct Crash {
    now: Instant,
    seed: u64,
    window: Duration,
    max: u32,
    initial: Duration,
    cap: Duration,
}

impl Crash {
    fn at(now: Instant, seed: u64, w: &crate::config::WorkersConfig) -> Self {
        Self {
            now,
            seed,
            window: w.crash_loop_window,
            max: w.crash_loop_max,
            initial: w.backoff_initial,
            cap: w.backoff_max,
        }
    }
}

/// A worker crashed at `now`: the breaker trips after `max` crashes within `window` (the
/// agent is failed until an operator restarts it), else the next start waits a backoff that
/// doubles per consecutive crash (reset by an uptime longer than the window).
/// How a worker went away.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Gone {
    Exited,
    SpawnFailed,
    /// It exited `ipc::control::EXIT_JOURNAL_STOPPED`.
    JournalStopped,
}

/// A worker its agent's journal did not take (cluster mode): this gateway may not own the
/// agent any more, or the engine did not answer. Not a crash (an agent must not be marked
/// failed for the cluster's state): with nothing waiting the agent goes back to `Idle`, and
/// its next run or session operation starts a worker; what waits goes to the next worker
/// after the crash backoff, which grows as for crashes.
fn journal_stopped(
    slot: &mut WorkerSlot,
    crash: Crash,
    queued: VecDeque<ControlToWorker>,
) -> AfterGone {
    if queued.is_empty() {
        return AfterGone::Next {
            state: WorkerState::Idle,
            fail: queued,
        };
    }
    let delay = backoff(crash.initial, crash.cap, slot.attempt, crash.seed);
    slot.attempt += 1;
    AfterGone::Next {
        state: WorkerState::Backoff {
            until: crash.now + delay,
            queued,
        },
        fail: VecDeque::new(),
    }
}

fn crashed(
    slot: &mut WorkerSlot,
    agent_id: &str,
    cause: &str,
    uptime: Option<Duration>,
    crash: Crash,
    queued: VecDeque<ControlToWorker>,
) -> AfterGone {
    let (now, policy) = (crash.now, crash);
    if uptime.is_some_and(|u| u > policy.window) {
        slot.attempt = 0;
    }
    slot.crashes.push_back(now);
    while slot
        .crashes
        .front()
        .is_some_and(|t| now - *t > policy.window)
    {
        slot.crashes.pop_front();
    }
    if slot.crashes.len() as u32 >= policy.max {
        let reason = format!(
            "{} crashes within {} s; last: {cause}",
            slot.crashes.len(),
            policy.window.as_secs()
        );
        tracing::error!(
            agent = agent_id,
            reason = reason.as_str(),
            "Crash loop: agent marked failed until an operator restarts it."
        );
        return AfterGone::Next {
            state: WorkerState::Failed { since: now, reason },
            fail: queued,
        };
    }
    let delay = backoff(policy.initial, policy.cap, slot.attempt, crash.seed);
    slot.attempt += 1;
    tracing::info!(
        agent = agent_id,
        delay_ms = delay.as_millis() as u64,
        "Restarting worker after backoff."
    );
    AfterGone::Next {
        state: WorkerState::Backoff {
            until: now + delay,
            queued,
        },
        fail: VecDeque::new(),
    }
}
