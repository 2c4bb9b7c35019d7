//! Idle workers retire: a ready worker with no run, nothing queued or held for it, no
//! pending approval and no open session operation for `workers.idle_exit_seconds` drains and
//! exits; the agent shows `idle` and its next run or operation starts a new worker. A
//! retirement is an expected exit: not a crash for the breaker, not a restart. With
//! `workers.max_live`, a worker starting past the cap makes the least recently used idle
//! worker retire at once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ipc::control::ControlToWorker;

use super::core::{Control, Effect};
use super::slot::{AfterExit, WorkerSlot, WorkerState};

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

    /// Retires the workers idle for `workers.idle_exit_seconds`, then, past
    /// `workers.max_live`, the least recently used idle ones (none while stopping).
    pub(super) fn retire_idle(&mut self) {
        if self.shutdown.is_some() {
            return;
        }
        let now = self.now.at;
        let busy = self.busy_agents();
        let idle_exit = self.deps.config.workers.idle_exit;
        let drain_ms = self.drain_ms();
        for (agent_id, slot) in &mut self.workers {
            if !slot.is_ready() || !slot.has_nothing_to_do() || busy.contains(agent_id) {
                slot.idle_since = None;
                continue;
            }
            let since = *slot.idle_since.get_or_insert(now);
            let Some(idle_exit) = idle_exit else { continue };
            if now.saturating_duration_since(since) < idle_exit {
                continue;
            }
            tracing::info!(
                agent = agent_id.as_str(),
                idle_s = idle_exit.as_secs(),
                "Worker idle; it retires."
            );
            slot.retire(now, drain_ms);
        }
        self.make_room(None);
    }

    /// Past `workers.max_live` workers running (starting or ready; a draining one is on its
    /// way out), retires the least recently used idle ones, never `keep`'s, until the count
    /// is back within the cap. A worker with work is never retired for room: the count stays
    /// over the cap until one has nothing to do (the next tick looks again).
    pub(super) fn make_room(&mut self, keep: Option<&str>) {
        let Some(cap) = self.deps.config.workers.max_live else {
            return;
        };
        if self.shutdown.is_some() {
            return;
        }
        let live = self
            .workers
            .values()
            .filter(|s| {
                matches!(
                    s.state,
                    WorkerState::Spawning { .. } | WorkerState::Ready { .. }
                )
            })
            .count();
        if live <= cap {
            return;
        }
        let busy = self.busy_agents();
        let mut idle: Vec<(Option<Instant>, String)> = self
            .workers
            .iter()
            .filter(|(id, s)| {
                Some(id.as_str()) != keep
                    && s.is_ready()
                    && s.has_nothing_to_do()
                    && !busy.contains(*id)
            })
            .map(|(id, s)| (s.last_used, id.clone()))
            .collect();
        idle.sort();
        let (now, drain_ms) = (self.now.at, self.drain_ms());
        for (_, agent_id) in idle.into_iter().take(live - cap) {
            if let Some(slot) = self.workers.get_mut(&agent_id) {
                tracing::info!(
                    agent = agent_id.as_str(),
                    max_live = cap,
                    "Worker retires early: workers.max_live are running."
                );
                slot.retire(now, drain_ms);
            }
        }
    }

    /// Agents with an open session operation or a pending approval.
    fn busy_agents(&self) -> HashSet<String> {
        self.ops
            .values()
            .map(|o| o.agent_id.clone())
            .chain(self.approvals.pending.values().map(|p| p.agent_id.clone()))
            .collect()
    }

    fn drain_ms(&self) -> u64 {
        self.deps
            .config
            .gateway
            .drain_timeout_seconds
            .saturating_mul(1000)
    }
}

impl WorkerSlot {
    /// No run in flight and nothing held or waiting to be sent again.
    fn has_nothing_to_do(&self) -> bool {
        self.in_flight.is_empty() && self.held.is_empty() && self.retry.is_empty()
    }

    /// A ready worker drains and exits; its exit is a retirement (`AfterExit::Retire`).
    fn retire(&mut self, now: Instant, drain_ms: u64) {
        let WorkerState::Ready { pid, link, .. } = &self.state else {
            return;
        };
        let (pid, link) = (*pid, link.clone());
        let _ = link.send(ControlToWorker::Drain {
            deadline_ms: drain_ms,
        });
        self.idle_since = None;
        self.state = WorkerState::Draining {
            pid,
            since: now,
            then: AfterExit::Retire,
            queued: Default::default(),
            link: Some(link),
        };
    }
}
