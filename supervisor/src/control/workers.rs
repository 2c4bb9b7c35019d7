//! The worker set of the control actor: one slot per agent and its lifecycle state, and how
//! frames reach a worker (sent, queued for a worker that is starting, held from a closed
//! link, retried on a full one). What moves a slot between states is in `lifecycle.rs`
//! (readiness, exits, restarts, heartbeats) and `reconcile.rs` (start, reload, drain).

use std::collections::VecDeque;

use ipc::control::ControlToWorker;

use super::core::{Control, Effect};
use super::slot::{
    failed_message, run_keys, worker_env, worker_keys, AfterExit, Delivery, WorkerState, MAX_QUEUED,
};
use crate::worker_link::SpawnSpec;

impl Control {
    /// Hands a frame to `agent_id`'s worker: sends it, queues it for a worker that is
    /// starting, or starts the worker.
    pub(super) fn deliver(&mut self, agent_id: &str, msg: ControlToWorker) -> Delivery {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return Delivery::Refused(format!("unknown agent {agent_id:?}"));
        };
        // A run on a provider whose key the worker lacks: the key goes first, in order.
        let keys = match &msg {
            ControlToWorker::Submit(run) => run_keys(&slot.agent, run, &slot.keys, &self.deps.env),
            _ => None,
        };
        if let Some(keys) = keys {
            let names: Vec<String> = keys.0.keys().cloned().collect();
            match self.send_frame(agent_id, ControlToWorker::Keys(keys)) {
                Delivery::Refused(why) => return Delivery::Refused(why),
                Delivery::Sent | Delivery::Queued => {
                    if let Some(slot) = self.workers.get_mut(agent_id) {
                        slot.keys.extend(names);
                    }
                }
            }
        }
        self.send_frame(agent_id, msg)
    }

    /// [`Control::deliver`] of one frame, as it is.
    fn send_frame(&mut self, agent_id: &str, msg: ControlToWorker) -> Delivery {
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return Delivery::Refused(format!("unknown agent {agent_id:?}"));
        };
        slot.last_used = Some(self.now.at);
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

    pub(super) fn spawn_worker(&mut self, agent_id: &str, queued: VecDeque<ControlToWorker>) {
        let env = worker_env(&self.deps.env);
        let Some(slot) = self.workers.get_mut(agent_id) else {
            return;
        };
        let secrets = worker_keys(&slot.agent, &self.deps.env);
        slot.keys = secrets.0.keys().cloned().collect();
        // A worker started again after it retired when idle is not a restart.
        if slot.generation > 0 && !slot.retired {
            slot.restarts += 1;
            self.deps.metrics.worker_restarted(agent_id);
        }
        slot.retired = false;
        slot.idle_since = None;
        slot.generation += 1;
        slot.kill_reason = None;
        slot.state = WorkerState::Spawning {
            since: self.now.at,
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
        self.effects.push(Effect::Spawn(Box::new(SpawnSpec {
            agent,
            generation: slot.generation,
            worker_bin: self.deps.worker_bin.clone(),
            run_dir: crate::paths::run_dir(&self.deps.config.state_dir),
            env,
            secrets,
            metrics: self.deps.metrics.clone(),
            journal: None,
        })));
        self.make_room(Some(agent_id));
    }
}
