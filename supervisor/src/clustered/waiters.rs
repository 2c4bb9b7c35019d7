//! Waiting for outcomes recorded anywhere in the cluster: one watch per gateway on every
//! outcome (a watch per waiting run cost the engine a consumer per run), and the runs
//! waited for here. A waiter registers, then reads the outcome once, so an outcome recorded
//! before it registered is not missed; the feed wakes it otherwise. When the feed is lost it
//! starts again, and every waiter's outcome is read once more; every few seconds too, in
//! case the feed stalled without saying so.

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

/// How often the outcomes of the runs waited for here are read again, whatever the feed
/// says: a watch can stall without ending after the servers restart (seen here after a
/// quorum loss: the outcome was recorded, the front door waited on), and a run must never
/// wait forever for an outcome that is there.
const SWEEP_EVERY: Duration = Duration::from_secs(3);

/// Follows the cluster's outcomes for this gateway's waiters until the gateway stops.
pub(super) fn start(c: &Arc<Clustered>, stopping: tokio_util::sync::CancellationToken) {
    let c = c.clone();
    tokio::spawn(async move {
        loop {
            match c.engine.outcome_feed().await {
                Ok(mut feed) => {
                    // The first tick at once: outcomes recorded while there was no feed.
                    let mut sweep = tokio::time::interval(SWEEP_EVERY);
                    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    let mut first = true;
                    loop {
                        tokio::select! {
                            next = feed.next() => match next {
                                Some(Ok(done)) => {
                                    if let Ok(t) = super::front::terminal(&done) {
                                        c.waiters.wake(&done.run_id, &t);
                                    }
                                }
                                Some(Err(e)) => {
                                    tracing::debug!(error = %e, "The outcome feed failed.");
                                    break;
                                }
                                None => break,
                            },
                            _ = sweep.tick() => {
                                let found = sweep_pending(&c).await;
                                if found > 0 && !first {
                                    // The feed should have told: follow it afresh.
                                    tracing::debug!(found, "Outcomes the feed missed; following it again.");
                                    break;
                                }
                                first = false;
                            }
                            _ = stopping.cancelled() => return,
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

/// Reads the outcome of every run waited for here; wakes the ended ones. How many it woke.
async fn sweep_pending(c: &Clustered) -> usize {
    let mut woke = 0;
    for run_id in c.waiters.pending() {
        if let Ok(Some(done)) = c.engine.outcome(&run_id).await {
            if let Ok(t) = super::front::terminal(&done) {
                c.waiters.wake(&run_id, &t);
                woke += 1;
            }
        }
    }
    woke
}
