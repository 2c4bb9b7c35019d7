//! The run table of the control actor: dispatch, waiters, terminal persistence, aborts,
//! session operations, and the backstop behind each worker's run deadline.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{ControlToWorker, RunStatus, SessionOp, StopReason};
use ipc::{ErrorCode, RpcError};
use tokio::sync::oneshot;

use super::command::{Arrival, Dispatch, OpResult, WaitReply};
use super::core::{Control, Effect};
use super::run_table::{
    PendingOp, RunClock, RunEntry, RunState, DEADLINE_GRACE, KEEP_FINISHED, MAX_FINISHED,
    MAX_PENDING_OPS,
};
use super::slot::{Delivery, WorkerState};
use crate::events::{Deferred, TerminalEvents};
use crate::outcome::Outcome;
use crate::run_end::GatewayEnd;

/// Most runs waited for before they are handed over (each a client's `agent.wait`).
const MAX_EXPECTED: usize = 4096;

impl Control {
    pub(super) fn dispatch(&mut self, d: Dispatch) {
        let run_id = d.run.run_id.clone();
        // Charged now, before the run counts as its session's: no room ends it below.
        let ends = match d.arrival {
            Arrival::Run => None,
            Arrival::ChargeAndRun(r) => self.reserve(r).err().map(|full| {
                format!(
                    "{}; this run was not started: send the message again with a new idempotencyKey",
                    full.0
                )
            }),
            Arrival::End(why) => Some(why),
        };
        self.deps.metrics.run_accepted(&d.agent_id);
        self.unsettled.add(&d.run.session_key, &run_id);
        let fallbacks = self
            .deps
            .config
            .agent(&d.agent_id)
            .map_or(0, |a| a.fallbacks.len());
        let mut waiters = vec![d.done];
        waiters.extend(self.expected.remove(&run_id).unwrap_or_default());
        self.runs.insert(
            run_id.clone(),
            RunEntry {
                agent_id: d.agent_id.clone(),
                session_key: d.run.session_key.clone(),
                state: RunState::Active {
                    waiters,
                    clock: RunClock::for_attempts(
                        d.run.timeout_ms.map(Duration::from_millis),
                        fallbacks,
                    ),
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
        if let Some(why) = ends {
            self.fail_run(&run_id, RunStatus::Error, &why, None);
            return;
        }
        match self.deliver(&d.agent_id, ControlToWorker::Submit(d.run)) {
            Delivery::Sent => {
                if let Some(slot) = self.workers.get_mut(&d.agent_id) {
                    slot.in_flight.push(run_id);
                }
            }
            // In the worker's queue until it is sent (see `worker_ready`).
            Delivery::Queued => {}
            Delivery::Refused(why) => self.fail_run(&run_id, RunStatus::Error, &why, None),
        }
    }

    pub(super) fn wait(&mut self, run_id: &str, expected: bool) -> WaitReply {
        match self.runs.get_mut(run_id) {
            None if expected => {
                // Waiters given up (their `agent.wait` timed out) are dropped first; past
                // the cap the run is called unknown (its waiter then waits out its window).
                self.expected.retain(|_, ws| {
                    ws.retain(|w| !w.is_closed());
                    !ws.is_empty()
                });
                if self.expected.len() >= MAX_EXPECTED {
                    return WaitReply::Unknown;
                }
                let (tx, rx) = oneshot::channel();
                self.expected.entry(run_id.to_owned()).or_default().push(tx);
                WaitReply::Pending(rx)
            }
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
        }
    }

    /// The unsettled index says what a scan of the run table says (tests).
    #[cfg(test)]
    pub(super) fn unsettled_index_holds(&self) -> bool {
        let mut scanned: HashMap<&str, std::collections::BTreeSet<&str>> = HashMap::new();
        for (id, e) in self.runs.iter().filter(|(_, e)| e.is_unsettled()) {
            scanned.entry(&e.session_key).or_default().insert(id);
        }
        let indexed = self.unsettled.by_session();
        indexed.len() == scanned.len()
            && indexed.iter().all(|(session, runs)| {
                let set: std::collections::BTreeSet<&str> =
                    runs.iter().map(String::as_str).collect();
                set.len() == runs.len() && scanned.get(session.as_str()) == Some(&set)
            })
    }

    pub(super) fn active_runs(&self) -> HashMap<String, Vec<String>> {
        self.unsettled.by_session().clone()
    }

    /// The outcome is durable: publish the terminal events, then answer the waiters.
    pub(super) fn persisted(&mut self, run_id: String, outcome: Arc<Outcome>) {
        let Some(entry) = self.runs.get_mut(&run_id) else {
            return;
        };
        let terminal = RunState::Terminal {
            outcome: outcome.clone(),
            at: self.now.at,
        };
        self.unsettled.settle(&entry.session_key, &run_id);
        let (waiters, deferred) = match std::mem::replace(&mut entry.state, terminal) {
            RunState::Persisting { waiters, deferred } => (waiters, deferred),
            RunState::Active { waiters, .. } => (waiters, TerminalEvents::default()),
            RunState::Terminal { .. } => (Vec::new(), TerminalEvents::default()),
        };
        for ev in &deferred.events {
            self.deps.hub.publish_deferred(ev);
        }
        // Session subscribers learn the session's new state after the terminal events, and
        // before the session's next run may start on the wire (the gate opens below).
        let watched = self.deps.hub.sessions_watched();
        if let Some(entry) = self.runs.get(&run_id).filter(|_| watched) {
            let still = self.unsettled.of(&entry.session_key).to_vec();
            let run = entry.run(&run_id);
            let changed = crate::projection::session_run_ended(
                &run,
                outcome.ended_at,
                outcome.status,
                outcome.error.as_deref(),
                still,
            );
            self.deps
                .hub
                .publish_deferred(&Deferred::sessions_changed(&changed));
        }
        drop(deferred.gate);
        for w in waiters {
            let _ = w.send(outcome.clone());
        }
        self.finished.push_back(run_id);
    }

    pub(super) fn persist(
        &mut self,
        run_id: String,
        outcome: Arc<Outcome>,
        deferred: TerminalEvents,
    ) {
        let Some(entry) = self.runs.get_mut(&run_id) else {
            return;
        };
        let placeholder = RunState::Persisting {
            waiters: Vec::new(),
            deferred: TerminalEvents::default(),
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
        let duration = outcome
            .started_at
            .map_or(0, |s| outcome.ended_at.saturating_sub(s));
        self.deps
            .metrics
            .run_ended(&entry.agent_id, outcome.status.as_str(), duration);
        self.effects.push(Effect::Persist { run_id, outcome });
    }

    pub(super) fn prune(&mut self) {
        while let Some(front) = self.finished.front() {
            let expired = match self.runs.get(front) {
                Some(RunEntry {
                    state: RunState::Terminal { at, .. },
                    ..
                }) => {
                    self.now.at.saturating_duration_since(*at) > KEEP_FINISHED
                        || self.finished.len() > MAX_FINISHED
                }
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
        let mut shrank = false;
        if self.runs.capacity() > 4 * self.runs.len() + 64 {
            self.runs.shrink_to_fit();
            self.finished.shrink_to_fit();
            shrank = true;
        }
        self.unsettled.shrink();
        shrank |= self.deps.hub.expire_runs(self.now.at);
        if shrank {
            // A burst of runs has been let go of: give the pages back (see `retire`).
            self.trim_soon(self.now.at);
        }
    }

    /// Aborts the session's runs (all, or `run_id`): queued ones end at once, running ones
    /// are cancelled in their worker and end with stop reason `reason`.
    pub(super) fn abort(
        &mut self,
        session_key: &str,
        run_id: Option<&str>,
        reason: StopReason,
    ) -> Result<Vec<String>, super::command::NotOfSession> {
        if let Some(id) = run_id {
            match self.runs.get(id) {
                Some(e) if e.session_key != session_key => {
                    return Err(super::command::NotOfSession)
                }
                Some(e) if e.is_active() => {}
                _ => return Ok(Vec::new()),
            }
        }
        let targets: Vec<(String, String)> = self
            .runs
            .iter()
            .filter(|(id, e)| {
                e.session_key == session_key
                    && e.is_active()
                    && run_id.is_none_or(|want| want == id.as_str())
            })
            .map(|(id, e)| (id.clone(), e.agent_id.clone()))
            .collect();
        for (id, agent_id) in &targets {
            if self.unqueue_run(agent_id, id) {
                let msg = format!("run aborted while queued ({})", reason.as_str());
                self.fail_run(id, RunStatus::Aborted, &msg, Some(reason));
            } else {
                // Terminal at once (R-A5); the worker cleans up behind it, on a worker that is
                // draining too.
                let error = format!("run aborted ({})", reason.as_str());
                let end = GatewayEnd::aborted(error, reason, self.now.wall_ms);
                self.end_now(id, &end);
                self.send_if_ready(
                    agent_id,
                    ControlToWorker::Cancel {
                        run_id: id.clone(),
                        reason,
                    },
                );
            }
        }
        Ok(targets.into_iter().map(|(id, _)| id).collect())
    }

    pub(super) fn session_op(
        &mut self,
        agent_id: String,
        op: SessionOp,
        reply: oneshot::Sender<OpResult>,
    ) {
        if self.ops.len() >= MAX_PENDING_OPS {
            // Ops whose callers gave up (timed out or disconnected) free their slots.
            self.ops.retain(|_, o| !o.reply.is_closed());
        }
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
        // A look at the lanes never starts a worker nor waits in a start queue.
        if matches!(op, SessionOp::Lanes)
            && !self
                .workers
                .get(&agent_id)
                .is_some_and(|s| matches!(s.state, WorkerState::Ready { .. }))
        {
            let _ = reply.send(Err(RpcError::new(
                ErrorCode::Overloaded,
                "the agent's worker is not running",
            )));
            return;
        }
        let op_id = self.next_op;
        self.next_op += 1;
        match self.deliver(&agent_id, ControlToWorker::Session { op_id, op }) {
            Delivery::Sent | Delivery::Queued => {
                self.ops.insert(op_id, PendingOp { agent_id, reply });
            }
            Delivery::Refused(why) => {
                let _ = reply.send(Err(RpcError::new(ErrorCode::Overloaded, why)));
            }
        }
    }

    pub(super) fn answer_op(&mut self, op_id: u64, result: OpResult) {
        if let Some(op) = self.ops.remove(&op_id) {
            let _ = op.reply.send(result);
        }
    }

    /// Fails the session operations waiting on `agent_id`'s worker, except those in `keep`
    /// (still queued for the next worker).
    pub(super) fn fail_ops_of(&mut self, agent_id: &str, why: &str, keep: &HashSet<u64>) {
        let ids: Vec<u64> = self
            .ops
            .iter()
            .filter(|(id, o)| o.agent_id == agent_id && !keep.contains(id))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.answer_op(id, Err(RpcError::new(ErrorCode::Internal, why)));
        }
    }

    /// The gateway's backstop behind each worker's run deadline: runs seen started, then past
    /// their deadline plus [`DEADLINE_GRACE`] (approval waits not counted) with no outcome
    /// from their worker, are ended here as errors and cancelled in the worker.
    pub(super) fn overdue_runs(&mut self) {
        let now = self.now.at;
        let waiting: HashSet<&str> = self
            .approvals
            .pending
            .values()
            .map(|p| p.request.run_id.as_str())
            .collect();
        // Only a session's earliest started run can be overdue: the runs steered into its
        // turn started too but end with it, whatever their own deadline.
        let mut first: HashMap<&str, (Instant, &str)> = HashMap::new();
        // Runs their link saw start since the last tick: their deadline counts from now.
        let started: HashSet<String> = self
            .runs
            .iter()
            .filter(|(id, e)| {
                matches!(&e.state, RunState::Active { clock, .. } if clock.started.is_none())
                    && self.told(&e.agent_id, id).is_some_and(|t| t.started)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for (id, entry) in &mut self.runs {
            let RunState::Active { clock, .. } = &mut entry.state else {
                continue;
            };
            if started.contains(id) {
                clock.started.get_or_insert(now);
            }
            clock.observe(now, waiting.contains(id.as_str()));
        }
        for (id, entry) in &self.runs {
            if let RunState::Active {
                clock: RunClock {
                    started: Some(at), ..
                },
                ..
            } = &entry.state
            {
                let earliest = first.entry(entry.session_key.as_str()).or_insert((*at, id));
                if *at < earliest.0 {
                    *earliest = (*at, id);
                }
            }
        }
        let overdue: Vec<(String, String, Duration)> = first
            .values()
            .filter_map(|(_, id)| {
                let entry = self.runs.get(*id)?;
                let RunState::Active { clock, .. } = &entry.state else {
                    return None;
                };
                let timeout = clock.timeout?;
                clock
                    .overdue(now)
                    .then(|| ((*id).to_owned(), entry.agent_id.clone(), timeout))
            })
            .collect();
        for (id, agent_id, timeout) in overdue {
            tracing::error!(
                run_id = id.as_str(),
                agent = agent_id.as_str(),
                "A run passed its deadline and the grace after it with no outcome from its worker; ended by the gateway."
            );
            let error = format!(
                "the run passed its deadline ({} s, every model call it may make counted) and {} s of grace with no outcome from its worker; ended by the gateway",
                timeout.as_secs(),
                DEADLINE_GRACE.as_secs()
            );
            self.fail_run(&id, RunStatus::Error, &error, None);
            let cancel = ControlToWorker::Cancel {
                run_id: id,
                reason: StopReason::Timeout,
            };
            self.send_if_ready(&agent_id, cancel);
        }
    }
}
