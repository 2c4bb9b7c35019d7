//! Waiting for outcomes recorded anywhere in the cluster: one watch per gateway on every
//! outcome (a watch per waiting run cost the engine a consumer per run), and the runs
//! waited for here. A waiter registers, then reads the outcome once, so an outcome recorded
//! before it registered is not missed; the feed wakes it otherwise. When the feed is lost it
//! starts again, and every waiter's outcome is read once more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::Clustered;
use crate::outcome::StoredTerminal;

type Waiting = HashMap<String, Vec<(u64, oneshot::Sender<StoredTerminal>)>>;

#[derive(Default)]
pub(super) struct Waiters {
    runs: Mutex<Waiting>,
    next: AtomicU64,
}

impl Waiters {
    fn runs(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `run_id`'s outcome: the waiter's id and where the outcome comes.
    pub(super) fn add(&self, run_id: &str) -> (u64, oneshot::Receiver<StoredTerminal>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.runs()
            .entry(run_id.to_owned())
            .or_default()
            .push((id, tx));
        (id, rx)
    }

    /// The waiter `id` of `run_id` waits no more (it read the outcome itself, or gave up).
    pub(super) fn forget(&self, run_id: &str, id: u64) {
        let mut runs = self.runs();
        if let Some(list) = runs.get_mut(run_id) {
            list.retain(|(i, _)| *i != id);
            if list.is_empty() {
                runs.remove(run_id);
            }
        }
    }

    fn wake(&self, run_id: &str, t: &StoredTerminal) {
        if let Some(list) = self.runs().remove(run_id) {
            for (_, tx) in list {
                let _ = tx.send(t.clone());
            }
        }
    }

    fn pending(&self) -> Vec<String> {
        self.runs().keys().cloned().collect()
    }
}

/// Follows the cluster's outcomes for this gateway's waiters until the gateway stops.
pub(super) fn start(c: &Arc<Clustered>, stopping: tokio_util::sync::CancellationToken) {
    let c = c.clone();
    tokio::spawn(async move {
        loop {
            match c.engine.outcome_feed().await {
                Ok(mut feed) => {
                    // Outcomes recorded while there was no feed.
                    for run_id in c.waiters.pending() {
                        if let Ok(Some(done)) = c.engine.outcome(&run_id).await {
                            if let Ok(t) = super::front::terminal(&done) {
                                c.waiters.wake(&run_id, &t);
                            }
                        }
                    }
                    while let Some(next) = feed.next().await {
                        match next {
                            Ok(done) => {
                                if let Ok(t) = super::front::terminal(&done) {
                                    c.waiters.wake(&done.run_id, &t);
                                }
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "The outcome feed failed.");
                                break;
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot follow the cluster's outcomes; trying again.")
                }
            }
            if stopping.is_cancelled() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
}
