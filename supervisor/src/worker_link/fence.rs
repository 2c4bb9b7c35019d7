//! The fence between a link's relay and the control core for the runs streaming on that
//! link: how far clients were told of each run, and whether the core has ended it.
//!
//! The relay publishes a run's events through the fence ([`RunFence::publish`]); the core
//! ends a run through it ([`RunFence::end_now`], [`RunFence::close`]). Both hold the fence's
//! lock while they do, so an end the core decides is numbered after everything clients got
//! of the run, and nothing of the run goes out after it, whichever task gets there first.
//! The fence decides nothing about a run's end: the core builds the terminal, the fence
//! numbers it and shuts the run's stream. An entry lives from the run's start (or an end the
//! core decided before it) until the core has handled the run's report (`forget`), or the
//! link ends with the fence.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::events::{Deferred, EventHub};

/// How far clients were told of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Told {
    /// The last `seq` of the run clients may have got (0: none).
    pub last_seq: u64,
    /// When the run started, as its worker said.
    pub started_at: Option<u64>,
    /// Whether the run has started on the wire.
    pub started: bool,
    /// The core ended it: nothing more of it is published.
    pub ended: bool,
}

impl Told {
    /// The `seq` a terminal told now takes.
    pub fn next_seq(&self) -> u64 {
        self.last_seq + 1
    }
}

/// The runs of one link (one worker process), by run id.
#[derive(Debug, Default)]
pub struct RunFence(Mutex<HashMap<String, Told>>);

impl RunFence {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Told>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's start (`seq`, as its worker numbered it) reaches clients now with `events`,
    /// unless the core ended the run before it started. False if it was ended.
    pub fn start(
        &self,
        hub: &EventHub,
        run_id: &str,
        seq: u64,
        started_at: Option<u64>,
        events: &[Deferred],
    ) -> bool {
        let mut runs = self.runs();
        let told = runs.entry(run_id.to_owned()).or_default();
        if told.ended {
            return false;
        }
        *told = Told {
            last_seq: seq,
            started_at,
            started: true,
            ended: false,
        };
        hub.publish_all(events);
        true
    }

    /// Publishes the run's `events` (numbered `seq` by its worker), unless the core ended it.
    pub fn publish(&self, hub: &EventHub, run_id: &str, seq: u64, events: &[Deferred]) {
        let mut runs = self.runs();
        let told = runs.entry(run_id.to_owned()).or_default();
        if told.ended {
            return;
        }
        told.last_seq = told.last_seq.max(seq);
        if !events.is_empty() {
            hub.publish_all(events);
        }
    }

    /// How far clients were told of the run (`None`: the fence does not know it).
    pub fn told(&self, run_id: &str) -> Option<Told> {
        self.runs().get(run_id).copied()
    }

    /// Ends the run now: the events `terminal` builds from what clients were told go out at
    /// once, and nothing of the run after them. `false` if the core had ended it already.
    pub fn end_now(
        &self,
        hub: &EventHub,
        run_id: &str,
        terminal: impl FnOnce(&Told) -> Vec<Deferred>,
    ) -> bool {
        let mut runs = self.runs();
        let told = runs.entry(run_id.to_owned()).or_default();
        if told.ended {
            return false;
        }
        told.ended = true;
        hub.publish_all(&terminal(told));
        true
    }

    /// Shuts the run's stream: nothing more of it is published; the core tells its end
    /// later (after the outcome is durable). What clients were told, or `None` if the core
    /// had ended it already.
    pub fn close(&self, run_id: &str) -> Option<Told> {
        let mut runs = self.runs();
        let told = runs.entry(run_id.to_owned()).or_default();
        if told.ended {
            return None;
        }
        told.ended = true;
        Some(*told)
    }

    /// The core has handled the run's report: its entry goes.
    pub fn forget(&self, run_id: &str) {
        self.runs().remove(run_id);
    }

    /// Runs the fence holds (tests).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.runs().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u64) -> Deferred {
        Deferred::event("x", &n)
    }

    /// An end numbered after what clients got, once, and nothing of the run after it; a
    /// run ended before it started is told from seq 1 and its start goes nowhere (R-A5).
    #[test]
    fn an_end_follows_what_clients_got_and_shuts_the_run() {
        let hub = EventHub::new();
        let (mut rx, _) = hub.subscribe();
        let fence = RunFence::default();
        assert!(fence.start(&hub, "r", 1, Some(7), &[event(1)]));
        fence.publish(&hub, "r", 4, &[event(4)]);
        let mut numbered = None;
        assert!(fence.end_now(&hub, "r", |t| {
            numbered = Some((t.next_seq(), t.started_at));
            vec![event(99)]
        }));
        assert_eq!(numbered, Some((5, Some(7))));
        fence.publish(&hub, "r", 5, &[event(5)]);
        assert!(!fence.end_now(&hub, "r", |_| vec![event(100)]));
        assert_eq!(fence.close("r"), None, "ended once");
        let got = std::iter::from_fn(|| rx.try_recv().ok()).count();
        assert_eq!(got, 3, "two events and one terminal");

        let closed = fence.close("q").expect("not ended before");
        assert_eq!((closed.next_seq(), closed.started), (1, false));
        assert!(!fence.start(&hub, "q", 1, None, &[event(1)]));
        assert!(rx.try_recv().is_err(), "nothing of q goes out");
        fence.forget("q");
        fence.forget("r");
        assert_eq!(fence.held(), 0);
    }
}
