//! Start, reload and stop of the worker set: `reconcile` turns a config into slots (one path
//! for start and reload: agents added, changed, removed), the gateway's drain, and the
//! workers as `status` shows them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ipc::control::{ControlToWorker, RunStatus, StopReason};
use ipc::gateway::WorkerStatus;
use ipc::{ErrorCode, RpcError};
use tokio::sync::oneshot;

use super::core::Control;
use super::run_table::RunState;
use super::slot::{AfterExit, WorkerSlot, WorkerState};
use crate::config::Config;

impl Control {
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
                            since: self.now.at,
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
                        since: self.now.at,
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
                        since: self.now.at,
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

    pub(super) fn fail_frames(
        &mut self,
        _agent_id: &str,
        frames: VecDeque<ControlToWorker>,
        why: &str,
    ) {
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
        let until = self.now.at + deadline;
        let mut to_fail = Vec::new();
        for (id, slot) in &mut self.workers {
            match std::mem::replace(&mut slot.state, WorkerState::Exited) {
                WorkerState::Ready { pid, link, .. } => {
                    let _ = link.send(ControlToWorker::Drain {
                        deadline_ms: deadline.as_millis() as u64,
                    });
                    slot.state = WorkerState::Draining {
                        pid,
                        since: self.now.at,
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
                .any(|e| !matches!(e.state, RunState::Terminal { .. }))
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
                    WorkerState::Spawning { since, .. } => ("spawning", None, Some(*since)),
                    WorkerState::Ready { pid, since, .. } => ("ready", Some(*pid), Some(*since)),
                    WorkerState::Draining { pid, since, .. } => {
                        ("draining", Some(*pid), Some(*since))
                    }
                    WorkerState::Backoff { .. } => ("backoff", None, None),
                    WorkerState::Failed { since, .. } => ("failed", None, Some(*since)),
                    WorkerState::Exited => ("exited", None, None),
                };
                WorkerStatus {
                    agent_id: a.id.as_str().to_owned(),
                    pid,
                    state: state.into(),
                    restarts: s.restarts,
                    runs_in_flight: (s.in_flight.len() + s.queued_runs()) as u64,
                    uptime_ms: uptime.map(|since| {
                        self.now.at.saturating_duration_since(since).as_millis() as u64
                    }),
                    last_exit: s.last_exit.clone(),
                    rss_bytes: None,
                    failed_reason: match &s.state {
                        WorkerState::Failed { reason, .. } => Some(reason.clone()),
                        _ => None,
                    },
                }
            })
            .collect()
    }
}
