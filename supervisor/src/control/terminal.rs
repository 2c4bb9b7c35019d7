//! Every run's terminal, decided here: the worker's end (its own terminal events, a taken-in
//! run's nothing, a silent end's fallback, a run that never started), and every end the
//! gateway decides (aborted, past its deadline, its worker gone, refused, never sent).
//!
//! The link reports what clients saw of a run ([`Seen`]); the core decides the outcome and
//! the terminal events, which are published once the outcome is durable (`persisted`). An
//! end the core decides while the run streams goes through the run's link fence
//! ([`RunFence`]): it is numbered after everything clients got of the run and nothing of the
//! run goes out after it; an abort's terminal goes out at once (R-A5), any other after the
//! durable write.

use std::sync::Arc;

use ipc::control::{RunStatus, RunStopReason, RunTerminal, StopReason};
use tokio::sync::oneshot;

use super::core::Control;
use super::run_table::RunState;
use crate::events::{Deferred, TerminalEvents};
use crate::outcome::Outcome;
use crate::projection::RunRef;
use crate::run_end::{GatewayEnd, Seen};
use crate::worker_link::{RunFence, Told};

impl Control {
    /// Whether a run has started (else it is still queued behind its session); one that
    /// ended meanwhile is past its queue.
    pub(super) fn has_started(&self, run_id: &str) -> bool {
        let Some(entry) = self.runs.get(run_id) else {
            return false;
        };
        match &entry.state {
            RunState::Active { clock, .. } => {
                clock.started.is_some()
                    || self
                        .told(&entry.agent_id, run_id)
                        .is_some_and(|t| t.started)
            }
            RunState::Persisting { .. } | RunState::Terminal { .. } => true,
        }
    }

    /// How far clients were told of a run its worker has (`None`: not on a live link).
    pub(super) fn told(&self, agent_id: &str, run_id: &str) -> Option<Told> {
        self.fence_of(agent_id, run_id)?.told(run_id)
    }

    /// The worker ended run `t`; `seen` is what its clients saw, `gate` holds its session's
    /// later frames until the terminal is published.
    pub(super) fn finished_run(
        &mut self,
        agent_id: &str,
        t: RunTerminal,
        seen: Option<Seen>,
        gate: Option<oneshot::Sender<()>>,
    ) {
        self.forget_on_link(agent_id, &t.run_id);
        if let Some(slot) = self.workers.get_mut(agent_id) {
            slot.in_flight.retain(|id| *id != t.run_id);
        }
        let Some(entry) = self.runs.get(&t.run_id) else {
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
        let events = worker_terminal(&entry.run(&t.run_id), &t, seen);
        // A run the gateway ended already keeps that end (the first terminal wins).
        self.persist(t.run_id, outcome, TerminalEvents { events, gate });
    }

    /// Ends a run from the supervisor side (refused, never sent, shutting down, past its
    /// deadline).
    pub(super) fn fail_run(
        &mut self,
        run_id: &str,
        status: RunStatus,
        error: &str,
        stop: Option<StopReason>,
    ) {
        let end = GatewayEnd {
            status,
            error: error.to_owned(),
            stop,
            ended_at: self.now.wall_ms,
        };
        self.end_run(run_id, &end, None);
    }

    /// Ends a run with `end`, told once its outcome is durable: after what `seen` says
    /// clients saw (its link has gone), else after what its link's fence says, and the
    /// fence shuts the run's stream (nothing its worker still sends goes out after the end).
    pub(super) fn end_run(&mut self, run_id: &str, end: &GatewayEnd, seen: Option<&Seen>) {
        let Some(entry) = self.runs.get(run_id).filter(|e| e.is_active()) else {
            return;
        };
        let fence = self.fence_of(&entry.agent_id, run_id);
        let (agent_id, run) = (entry.agent_id.clone(), entry.run(run_id));
        let events = match (seen, fence.and_then(|f| f.close(run_id))) {
            (Some(seen), _) => end.events_after(&run, Some(seen)),
            (None, Some(told)) => end.events(&run, told.next_seq(), told.started_at, ""),
            (None, None) => end.events_after(&run, None),
        };
        let outcome = end.outcome(&run);
        if let Some(slot) = self.workers.get_mut(&agent_id) {
            slot.in_flight.retain(|id| id != run_id);
        }
        self.persist(run_id.to_owned(), outcome, TerminalEvents::ungated(events));
    }

    /// Its worker's link is gone with run `run_id` unfinished (`seen`: what clients saw).
    pub(super) fn run_gone(&mut self, run_id: &str, why: &str, seen: Option<Seen>) {
        let end = GatewayEnd::error(why, self.now.wall_ms);
        self.end_run(run_id, &end, seen.as_ref());
    }

    /// Ends a run its worker has, now, with `end` (an abort): its clients get the terminal
    /// at once, numbered after what they saw and with the text streamed so far, and nothing
    /// of the run after it; its waiters get the outcome once it is recorded. The worker's
    /// own end, when its cleanup is done, changes nothing (the first terminal wins).
    pub(super) fn end_now(&mut self, run_id: &str, end: &GatewayEnd) {
        let Some(entry) = self.runs.get(run_id).filter(|e| e.is_active()) else {
            return;
        };
        let run = entry.run(run_id);
        let hub = &self.deps.hub;
        let terminal = |told: &Told| {
            let streamed = hub.streamed_text(run_id);
            end.events(&run, told.next_seq(), told.started_at, &streamed)
        };
        match self.fence_of(&entry.agent_id, run_id) {
            Some(fence) => {
                fence.end_now(hub, run_id, terminal);
            }
            // Not on a live link: nothing of it was streamed, nor will be.
            None => hub.publish_all(&terminal(&Told::default())),
        }
        let outcome = end.outcome(&run);
        self.persist(run_id.to_owned(), outcome, TerminalEvents::default());
    }

    /// The worker reported all it will of `run_id` (its end, or its refusal): the link's
    /// fence lets it go.
    pub(super) fn forget_on_link(&self, agent_id: &str, run_id: &str) {
        if let Some(link) = self.workers.get(agent_id).and_then(|s| s.link()) {
            link.fence().forget(run_id);
        }
    }

    /// The fence of the live link `run_id` was sent on, if it is on one.
    fn fence_of(&self, agent_id: &str, run_id: &str) -> Option<Arc<RunFence>> {
        let slot = self.workers.get(agent_id)?;
        if !slot.in_flight.iter().any(|id| id == run_id) {
            return None;
        }
        slot.link().map(|l| l.fence().clone())
    }
}

/// The terminal events of a run its worker ended with `t`, given what its clients saw
/// (`None`: the run never started on the wire).
pub(super) fn worker_terminal(
    run: &RunRef<'_>,
    t: &RunTerminal,
    seen: Option<Seen>,
) -> Vec<Deferred> {
    let aborted =
        (t.status == RunStatus::Aborted).then(|| t.stop_reason.unwrap_or(RunStopReason::Rpc));
    let silent = |seq: u64, started_at: Option<u64>, default: &str| {
        let error = t.error.as_deref().unwrap_or(default);
        Deferred::terminal(crate::projection::ended_by_gateway(
            run, seq, t.ended_at, started_at, error, aborted,
        ))
    };
    match seen {
        // Ended before it started (aborted while queued in its lane, refused by its worker):
        // its clients still get a terminal (R-A5); one another turn carried ends with that
        // turn's outcome (R-B3).
        None if t.carried_by.is_some() => {
            Deferred::terminal(crate::projection::carried_terminal(run, 1, t))
        }
        None => silent(1, t.started_at, "the run ended before it started"),
        // Taken into another run's turn: its clients heard that, and nothing more (its
        // outcome, the carrier's, is for `agent.wait`).
        Some(s) if s.taken_in => Vec::new(),
        // Carried without being told (an older worker): that turn's outcome.
        Some(s) if t.carried_by.is_some() => {
            Deferred::terminal(crate::projection::carried_terminal(run, s.last_seq + 1, t))
        }
        // Started but ended with no terminal event (the worker's loop task failed): the
        // fallback terminal, numbered after what clients saw.
        Some(s) if s.terminal.is_empty() => silent(
            s.last_seq + 1,
            s.started_at,
            "the run ended without a result",
        ),
        Some(s) => s.terminal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunRef<'static> {
        RunRef {
            run_id: "r1",
            session_key: "agent:main:s",
            agent_id: "main",
        }
    }

    /// What the link saw of a started run, up to `seq` 4.
    fn seen(terminal: Vec<Deferred>, taken_in: bool) -> Option<Seen> {
        Some(Seen {
            session_key: "agent:main:s".into(),
            last_seq: 4,
            started_at: Some(1),
            terminal,
            taken_in,
        })
    }

    /// A worker's end: the terminal events its own events gave; none when it was taken into
    /// another run's turn (its clients were told); a fallback numbered after what clients
    /// saw for a silent end; the carrier's outcome for a carried run an older worker did not
    /// announce; and for a run that never started, its terminal from seq 1 (R-A5, R-B1, R-B3).
    #[test]
    fn a_workers_end_is_told_after_what_its_clients_saw() {
        let mut t = RunTerminal::without_work("r1", RunStatus::Ok, 9, String::new(), None);
        t.error = None;
        let held = || vec![Deferred::event("x", &1), Deferred::event("y", &2)];
        let text = |events: &[Deferred]| format!("{events:?}");

        let events = worker_terminal(&run(), &t, seen(held(), false));
        assert!(text(&events).contains("\"x\"") && events.len() == 2);
        assert!(worker_terminal(&run(), &t, seen(held(), true)).is_empty());

        let events = worker_terminal(&run(), &t, seen(Vec::new(), false));
        assert!(text(&events).contains("the run ended without a result"));
        assert!(text(&events).contains(r#"\"seq\":5"#), "{}", text(&events));

        let mut carried = t.clone();
        carried.carried_by = Some("r0".into());
        let events = worker_terminal(&run(), &carried, seen(Vec::new(), false));
        assert_eq!(events.len(), 2);
        assert!(!text(&events).contains("the run ended without a result"));
        assert!(text(&events).contains(r#"\"seq\":5"#));

        let mut queued = RunTerminal::without_work(
            "r1",
            RunStatus::Aborted,
            9,
            "aborted while queued".into(),
            Some(RunStopReason::Rpc),
        );
        let events = worker_terminal(&run(), &queued, None);
        assert!(text(&events).contains(r#"\"seq\":1"#) && text(&events).contains("aborted"));
        queued.carried_by = Some("r0".into());
        assert_eq!(worker_terminal(&run(), &queued, None).len(), 2);
    }
}
