//! Per-session order of a worker's frames on their way to clients.
//!
//! Architecture Invariant: a session's runs never overlap on the wire (R-B2). This is the one
//! place that holds it. The worker's outbox delivers each session's frames in the order
//! they happened (run k's terminal event, its `Finished`, then run k+1's frames); the gate
//! here makes clients see them in that order although run k's terminal events wait until
//! its outcome is durable in the gateway db.
//!
//! When run k's terminal event arrives, the link closes a gate on its session: frames of the
//! session's other runs (the next run's events, a carried run's `Finished`) wait behind it,
//! while run k's own `Finished` passes and hands the gate over with the terminal events to
//! the control actor. The gate opens once those are published (or dropped), and what waited
//! goes on in the order it came. Frames of other sessions never wait.

use std::collections::{HashMap, VecDeque};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::oneshot;

/// Sessions whose frames wait for an earlier run's terminal events.
#[derive(Default)]
pub struct SessionGates<T> {
    held: HashMap<String, Gate<T>>,
    /// Runs whose `lifecycle start` is held: their later frames belong to the same session.
    held_runs: HashMap<String, String>,
    opened: FuturesUnordered<BoxFuture<'static, String>>,
}

/// One closed session.
struct Gate<T> {
    /// The run whose terminal events the session waits for (its own frames pass).
    run_id: String,
    /// Whether those events were handed over (the gate opens when they are published).
    handed_over: bool,
    frames: VecDeque<T>,
}

impl<T: Send + 'static> SessionGates<T> {
    pub fn new() -> Self {
        Self {
            held: HashMap::new(),
            held_runs: HashMap::new(),
            opened: FuturesUnordered::new(),
        }
    }

    /// The session of a held run, if `run_id` is one.
    pub fn session_of_held_run(&self, run_id: &str) -> Option<&str> {
        self.held_runs.get(run_id).map(String::as_str)
    }

    /// Holds `frame` (of run `run_id`) if `session` is closed behind another run's terminal
    /// events; gives it back otherwise.
    pub fn admit(&mut self, session: &str, run_id: Option<&str>, frame: T) -> Option<T> {
        let Some(gate) = self.held.get_mut(session) else {
            return Some(frame);
        };
        if run_id.is_some_and(|r| r == gate.run_id) {
            return Some(frame);
        }
        gate.frames.push_back(frame);
        if let Some(run) = run_id {
            self.held_runs
                .entry(run.to_owned())
                .or_insert_with(|| session.to_owned());
        }
        None
    }

    /// Run `run_id`'s terminal event arrived: `session` waits for it from now on.
    pub fn close(&mut self, session: &str, run_id: &str) {
        self.held.entry(session.to_owned()).or_insert_with(|| Gate {
            run_id: run_id.to_owned(),
            handed_over: false,
            frames: VecDeque::new(),
        });
    }

    /// Run `run_id`'s terminal events are handed over: `session` stays closed (closing it if
    /// it was not) until the returned sender is used or dropped.
    pub fn hand_over(&mut self, session: &str, run_id: &str) -> oneshot::Sender<()> {
        self.close(session, run_id);
        let (tx, rx) = oneshot::channel::<()>();
        self.opening(session, async move {
            let _ = rx.await;
        });
        tx
    }

    /// Run `run_id` ended with no terminal events to publish: a gate it closed opens now.
    pub fn release(&mut self, session: &str, run_id: &str) {
        if self.held.get(session).is_some_and(|g| g.run_id == run_id) {
            self.opening(session, async {});
        }
    }

    fn opening(
        &mut self,
        session: &str,
        open: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let Some(gate) = self.held.get_mut(session).filter(|g| !g.handed_over) else {
            return;
        };
        gate.handed_over = true;
        let session = session.to_owned();
        self.opened.push(
            async move {
                open.await;
                session
            }
            .boxed(),
        );
    }

    /// Whether any gate is waiting to open.
    pub fn waiting(&self) -> bool {
        !self.opened.is_empty()
    }

    /// The next session whose gate opens, with the frames it held, in order. Pending until
    /// one opens (never resolves when none is handed over: check [`SessionGates::waiting`]).
    pub async fn next_open(&mut self) -> Option<(String, VecDeque<T>)> {
        let session = self.opened.next().await?;
        let frames = self
            .held
            .remove(&session)
            .map(|g| g.frames)
            .unwrap_or_default();
        self.held_runs.retain(|_, s| *s != session);
        Some((session, frames))
    }

    /// Everything still held, when the link ends (order kept within each session).
    pub fn drain(&mut self) -> Vec<T> {
        self.held_runs.clear();
        self.opened = FuturesUnordered::new();
        self.held.drain().flat_map(|(_, g)| g.frames).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_gated_session_holds_in_order_and_others_pass() {
        let mut g = SessionGates::new();
        assert_eq!(g.admit("s1", Some("r1"), 1), Some(1));
        g.close("s1", "r1");
        assert!(!g.waiting(), "closed, not handed over yet");
        assert_eq!(
            g.admit("s1", Some("r1"), 0),
            Some(0),
            "r1's own frames pass"
        );
        let open = g.hand_over("s1", "r1");
        assert!(g.waiting());
        assert_eq!(g.admit("s1", Some("r2"), 2), None);
        assert_eq!(g.session_of_held_run("r2"), Some("s1"));
        assert_eq!(g.admit("s2", Some("r3"), 3), Some(3));
        assert_eq!(g.admit("s1", Some("r2"), 4), None);
        open.send(()).unwrap();
        let (session, frames) = g.next_open().await.unwrap();
        assert_eq!(session, "s1");
        assert_eq!(Vec::from(frames), [2, 4]);
        assert!(!g.waiting());
        assert_eq!(g.session_of_held_run("r2"), None);
        assert_eq!(g.admit("s1", None, 5), Some(5));
    }

    #[tokio::test]
    async fn a_dropped_gate_opens_too_and_drain_gives_back_everything() {
        let mut g = SessionGates::new();
        let open = g.hand_over("s1", "r0");
        assert_eq!(g.admit("s1", None, 1), None);
        drop(open);
        let (_, frames) = g.next_open().await.unwrap();
        assert_eq!(Vec::from(frames), [1]);

        let _kept = g.hand_over("s2", "r0");
        assert_eq!(g.admit("s2", None, 7), None);
        assert_eq!(g.drain(), [7]);
        assert!(!g.waiting());
    }

    #[tokio::test]
    async fn a_run_with_nothing_to_publish_releases_its_gate_at_once() {
        let mut g = SessionGates::new();
        g.close("s1", "r1");
        assert_eq!(g.admit("s1", Some("r2"), 2), None);
        g.release("s1", "other");
        assert!(!g.waiting(), "only the run that closed it releases it");
        g.release("s1", "r1");
        let (_, frames) = g.next_open().await.unwrap();
        assert_eq!(Vec::from(frames), [2]);
    }
}
