//! Per-session order of a worker's frames on their way to clients.
//!
//! A run's terminal events wait until its outcome is durable in the gateway db, while the
//! worker has already started the session's next run. Without a hold, run k+1's
//! `lifecycle start` could reach clients before run k's `lifecycle end`. When the link hands
//! over a run's terminal events it closes a gate on that session; frames of that session
//! (the next run's events, its `Finished`) wait behind the gate until the control actor has
//! published the terminal events (or dropped them), then go on in the order they came.
//! Frames of other sessions never wait.

use std::collections::{HashMap, VecDeque};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::oneshot;

/// Sessions whose frames wait for an earlier run's terminal events.
#[derive(Default)]
pub struct SessionGates<T> {
    held: HashMap<String, VecDeque<T>>,
    /// Runs whose `lifecycle start` is held: their later frames belong to the same session.
    held_runs: HashMap<String, String>,
    opened: FuturesUnordered<BoxFuture<'static, String>>,
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

    /// Holds `frame` if `session` is gated; gives it back otherwise.
    pub fn admit(&mut self, session: &str, run_id: Option<&str>, frame: T) -> Option<T> {
        let Some(queue) = self.held.get_mut(session) else {
            return Some(frame);
        };
        queue.push_back(frame);
        if let Some(run) = run_id {
            self.held_runs
                .entry(run.to_owned())
                .or_insert_with(|| session.to_owned());
        }
        None
    }

    /// Gates `session` until the returned sender is used or dropped.
    pub fn close(&mut self, session: &str) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel::<()>();
        self.held.insert(session.to_owned(), VecDeque::new());
        let session = session.to_owned();
        self.opened.push(
            async move {
                let _ = rx.await;
                session
            }
            .boxed(),
        );
        tx
    }

    /// Whether any gate is waiting to open.
    pub fn waiting(&self) -> bool {
        !self.opened.is_empty()
    }

    /// The next session whose gate opens, with the frames it held, in order. Pending until
    /// one opens (never resolves when none is closed: check [`SessionGates::waiting`]).
    pub async fn next_open(&mut self) -> Option<(String, VecDeque<T>)> {
        let session = self.opened.next().await?;
        let frames = self.held.remove(&session).unwrap_or_default();
        self.held_runs.retain(|_, s| *s != session);
        Some((session, frames))
    }

    /// Everything still held, when the link ends (order kept within each session).
    pub fn drain(&mut self) -> Vec<T> {
        self.held_runs.clear();
        self.opened = FuturesUnordered::new();
        self.held.drain().flat_map(|(_, q)| q).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_gated_session_holds_in_order_and_others_pass() {
        let mut g = SessionGates::new();
        assert_eq!(g.admit("s1", Some("r1"), 1), Some(1));
        let open = g.close("s1");
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
        let open = g.close("s1");
        assert_eq!(g.admit("s1", None, 1), None);
        drop(open);
        let (_, frames) = g.next_open().await.unwrap();
        assert_eq!(Vec::from(frames), [1]);

        let _kept = g.close("s2");
        assert_eq!(g.admit("s2", None, 7), None);
        assert_eq!(g.drain(), [7]);
        assert!(!g.waiting());
    }
}
