//! The scheduler's jobs in memory (the gateway database holds them durably): which are due
//! and which have a run in flight. A job is never due twice at once: taking it marks it
//! running until its run is recorded.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use ipc::gateway::CronJob;
use tokio::sync::Notify;

#[derive(Default)]
struct Inner {
    jobs: BTreeMap<String, CronJob>,
    running: HashSet<String>,
}

/// Every job of this gateway.
#[derive(Default)]
pub struct Jobs {
    inner: Mutex<Inner>,
    /// Held across a change of a job and its store (the methods' and the firing's), so a
    /// firing that records a run's state never writes back a job removed or changed since.
    pub write: tokio::sync::Mutex<()>,
    /// Bumped by every change: `cron.list`'s revision.
    revision: std::sync::atomic::AtomicU64,
    /// Told when a job is added, changed or removed, or a run ends (the next due time may
    /// have moved).
    pub changed: Notify,
}

impl Jobs {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces every job with `jobs` (at start).
    pub fn load(&self, jobs: Vec<CronJob>) {
        let mut i = self.inner();
        i.jobs = jobs.into_iter().map(|j| (j.id.clone(), j)).collect();
        drop(i);
        self.changed.notify_one();
    }

    pub fn get(&self, id: &str) -> Option<CronJob> {
        self.inner().jobs.get(id).cloned()
    }

    /// Every job, in id order.
    pub fn list(&self) -> Vec<CronJob> {
        self.inner().jobs.values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.inner().jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds or replaces `job`.
    pub fn put(&self, job: CronJob) {
        self.inner().jobs.insert(job.id.clone(), job);
        self.bump();
    }

    pub fn remove(&self, id: &str) -> Option<CronJob> {
        let gone = self.inner().jobs.remove(id);
        self.bump();
        gone
    }

    /// Changes job `id` as it is now (`None`: it is gone); the changed job.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut CronJob)) -> Option<CronJob> {
        let changed = {
            let mut i = self.inner();
            let job = i.jobs.get_mut(id)?;
            f(job);
            job.clone()
        };
        self.bump();
        Some(changed)
    }

    /// How many changes the jobs have seen.
    pub fn revision(&self) -> u64 {
        self.revision.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn bump(&self) {
        self.revision
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// When the next enabled job without a run in flight is due.
    pub fn next_due(&self) -> Option<u64> {
        let i = self.inner();
        i.jobs
            .values()
            .filter(|j| j.enabled && !i.running.contains(&j.id))
            .filter_map(|j| j.state.next_run_at_ms)
            .min()
    }

    /// The enabled jobs due at `now` without a run in flight, each now marked running.
    pub fn take_due(&self, now: u64) -> Vec<CronJob> {
        let mut i = self.inner();
        let due: Vec<CronJob> = i
            .jobs
            .values()
            .filter(|j| j.enabled && !i.running.contains(&j.id))
            .filter(|j| j.state.next_run_at_ms.is_some_and(|at| at <= now))
            .cloned()
            .collect();
        for j in &due {
            i.running.insert(j.id.clone());
        }
        due
    }

    /// Marks `id` running unless it is; whether it was not.
    pub fn try_start(&self, id: &str) -> bool {
        self.inner().running.insert(id.to_owned())
    }

    pub fn is_running(&self, id: &str) -> bool {
        self.inner().running.contains(id)
    }

    /// `id`'s run is over.
    pub fn done(&self, id: &str) {
        self.inner().running.remove(id);
        self.changed.notify_one();
    }
}
