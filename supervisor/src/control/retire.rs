//! Idle workers retire: a ready worker with no run, nothing queued or held for it, no
//! pending approval and no open session operation for `workers.idle_exit_seconds` drains and
//! exits; the agent shows `idle` and its next run or operation starts a new worker. A
//! retirement is an expected exit: not a crash for the breaker, not a restart.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ipc::control::ControlToWorker;

use super::core::{Control, Effect};
use super::slot::{AfterExit, WorkerState};

/// How long after a retirement the heap is trimmed: a burst of retirements (every agent of
/// a fleet idle at once) is trimmed once.
pub(super) const TRIM_AFTER: Duration = Duration::from_secs(2);

impl Control {
    /// Trim the heap soon: a worker retired at `now` (its link's buffers and the tasks that
    /// served it are freed, and the allocator would keep those pages), or a burst of runs
    /// expired from the run table and the replay buffer.
    pub(super) fn trim_soon(&mut self, now: Instant) {
        self.trim_at.get_or_insert(now + TRIM_AFTER);
    }

    /// The heap trim, when it is due.
    pub(super) fn trim_due(&mut self) {
        if self.trim_at.is_some_and(|at| self.now.at >= at) {
            self.trim_at = None;
            self.effects.push(Effect::TrimHeap);
        }
    }

    /// Retires the workers idle for `workers.idle_exit_seconds` (none while stopping).
    pub(super) fn retire_idle(&mut self) {
        let Some(idle_exit) = self.deps.config.workers.idle_exit else {
            return;
        };
        if self.shutdown.is_some() {
            return;
        }
        let now = self.now.at;
        let drain_ms = self
            .deps
            .config
            .gateway
            .drain_timeout_seconds
            .saturating_mul(1000);
        let busy: HashSet<&str> = self
            .ops
            .values()
            .map(|o| o.agent_id.as_str())
            .chain(self.approvals.pending.values().map(|p| p.agent_id.as_str()))
            .collect();
        for (agent_id, slot) in &mut self.workers {
            let WorkerState::Ready { pid, link, .. } = &slot.state else {
                slot.idle_since = None;
                continue;
            };
            let working = !slot.in_flight.is_empty()
                || !slot.held.is_empty()
                || !slot.retry.is_empty()
                || busy.contains(agent_id.as_str());
            if working {
                slot.idle_since = None;
                continue;
            }
            let since = *slot.idle_since.get_or_insert(now);
            if now.saturating_duration_since(since) < idle_exit {
                continue;
            }
            tracing::info!(
                agent = agent_id.as_str(),
                pid,
                idle_s = idle_exit.as_secs(),
                "Worker idle; it retires."
            );
            let (pid, link) = (*pid, link.clone());
            let _ = link.send(ControlToWorker::Drain {
                deadline_ms: drain_ms,
            });
            slot.idle_since = None;
            slot.state = WorkerState::Draining {
                pid,
                since: now,
                then: AfterExit::Retire,
                queued: Default::default(),
                link: Some(link),
            };
        }
    }
}
