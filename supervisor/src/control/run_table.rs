//! The run table's entries: a run handed to a worker (`Active`), its outcome being written
//! (`Persisting`) and done (`Terminal`), the session operations waiting for answers, and the
//! clock behind each run's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::events::TerminalEvents;
use crate::outcome::Outcome;
use crate::projection::RunRef;

/// Finished runs kept in memory for `agent.wait` and duplicate detection; older ones are
/// answered from the gateway db. Kept small: the soak benchmark showed 10 000 cached outcomes
/// costing ~80 MB of supervisor RSS.
pub(super) const KEEP_FINISHED: Duration = Duration::from_secs(60);
pub(super) const MAX_FINISHED: usize = 2048;
/// Session operations in flight at once before new ones are refused.
pub(super) const MAX_PENDING_OPS: usize = 1024;

pub(super) enum RunState {
    /// Handed to (or queued for) a worker.
    Active {
        waiters: Vec<oneshot::Sender<Arc<Outcome>>>,
        clock: RunClock,
    },
    /// Terminal, being written to the gateway db; events and waiters follow the write.
    Persisting {
        waiters: Vec<oneshot::Sender<Arc<Outcome>>>,
        deferred: TerminalEvents,
    },
    Terminal {
        outcome: Arc<Outcome>,
        at: Instant,
    },
}

pub(super) struct RunEntry {
    pub agent_id: String,
    pub session_key: String,
    pub state: RunState,
}

impl RunEntry {
    /// The run `run_id` of this entry, as its events name it.
    pub(super) fn run<'a>(&'a self, run_id: &'a str) -> RunRef<'a> {
        RunRef {
            run_id,
            session_key: &self.session_key,
            agent_id: &self.agent_id,
        }
    }
}

/// The unsettled runs of each session, in the order they came: the run table indexed by
/// session, so that admission and session events do not scan every run the table keeps
/// (it keeps up to [`MAX_FINISHED`] finished ones; the scan was 6 % of the supervisor's
/// CPU under the latency benchmark). A run is added when it is handed over and removed when
/// it settles ([`RunState::Terminal`]); `Control::unsettled_index_holds` checks it in tests.
#[derive(Default)]
pub(super) struct Unsettled(std::collections::HashMap<String, Vec<String>>);

impl Unsettled {
    pub fn add(&mut self, session_key: &str, run_id: &str) {
        let runs = self.0.entry(session_key.to_owned()).or_default();
        if !runs.iter().any(|r| r == run_id) {
            runs.push(run_id.to_owned());
        }
    }

    pub fn settle(&mut self, session_key: &str, run_id: &str) {
        if let Some(runs) = self.0.get_mut(session_key) {
            runs.retain(|r| r != run_id);
            if runs.is_empty() {
                self.0.remove(session_key);
            }
        }
    }

    /// The session's unsettled runs, oldest first.
    pub fn of(&self, session_key: &str) -> &[String] {
        self.0.get(session_key).map_or(&[], Vec::as_slice)
    }

    pub fn by_session(&self) -> &std::collections::HashMap<String, Vec<String>> {
        &self.0
    }

    pub fn shrink(&mut self) {
        if self.0.capacity() > 4 * self.0.len() + 64 {
            self.0.shrink_to_fit();
        }
    }
}

impl RunEntry {
    pub fn is_active(&self) -> bool {
        matches!(self.state, RunState::Active { .. })
    }

    /// Not settled yet: running, queued, or its outcome still being written (a session
    /// shows it as active until its terminal is durable, R-C6).
    pub fn is_unsettled(&self) -> bool {
        matches!(
            self.state,
            RunState::Active { .. } | RunState::Persisting { .. }
        )
    }
}

/// How long past its own deadline a run may go without an outcome from its worker before the
/// gateway ends it (the worker's deadline abort, its cleanup and its terminal take far less).
pub(super) const DEADLINE_GRACE: Duration = Duration::from_secs(30);

/// A run's deadline as the gateway keeps it, the backstop behind its worker's: it counts from
/// when the run was first seen started, and not while an exec approval of the run waits for
/// an operator (as the worker's does not).
#[derive(Debug, Clone, Default)]
pub(super) struct RunClock {
    /// The run's own deadline (`None`: it has none, nor has the backstop).
    pub timeout: Option<Duration>,
    pub started: Option<Instant>,
    /// Time spent waiting for approvals, before the current wait.
    pub paused: Duration,
    pub paused_since: Option<Instant>,
}

/// The grace a worker gives a compaction under way at its deadline (once a run; the
/// worker's `COMPACTION_GRACE`).
const COMPACTION_GRACE: Duration = Duration::from_secs(30);

impl RunClock {
    pub fn new(timeout: Option<Duration>) -> Self {
        Self {
            timeout,
            ..Self::default()
        }
    }

    /// The clock of a run whose execution deadline is `timeout` per model attempt, with
    /// `fallbacks` fallback models: each attempt, and the finalization pass, may take a
    /// whole `timeout` (R-B5), and a compaction one grace, before the backstop counts.
    pub fn for_attempts(timeout: Option<Duration>, fallbacks: usize) -> Self {
        let calls = u32::try_from(fallbacks)
            .unwrap_or(u32::MAX)
            .saturating_add(2);
        Self::new(timeout.map(|t| t.saturating_mul(calls).saturating_add(COMPACTION_GRACE)))
    }

    /// What a tick sees at `now`: whether the run waits for an operator.
    pub fn observe(&mut self, now: Instant, waiting: bool) {
        match (waiting, self.paused_since) {
            (true, None) => self.paused_since = Some(now),
            (false, Some(since)) => {
                self.paused += now.saturating_duration_since(since);
                self.paused_since = None;
            }
            (true, Some(_)) | (false, None) => {}
        }
    }

    /// Whether the run is past its deadline plus [`DEADLINE_GRACE`] at `now`.
    pub fn overdue(&self, now: Instant) -> bool {
        let (Some(timeout), Some(started)) = (self.timeout, self.started) else {
            return false;
        };
        let waiting = self
            .paused_since
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        let ran = now
            .saturating_duration_since(started)
            .saturating_sub(self.paused + waiting);
        ran > timeout + DEADLINE_GRACE
    }
}

pub(super) struct PendingOp {
    pub agent_id: String,
    pub reply: oneshot::Sender<super::command::OpResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_outcome_is_being_written_is_still_unsettled_r_c6() {
        let entry = |state| RunEntry {
            agent_id: "main".into(),
            session_key: "agent:main:s".into(),
            state,
        };
        let active = entry(RunState::Active {
            waiters: Vec::new(),
            clock: RunClock::default(),
        });
        let writing = entry(RunState::Persisting {
            waiters: Vec::new(),
            deferred: TerminalEvents::default(),
        });
        assert!(active.is_active() && active.is_unsettled());
        assert!(!writing.is_active(), "no second terminal may start");
        assert!(writing.is_unsettled(), "the session still shows it");
    }

    #[test]
    fn a_runs_clock_counts_from_its_start_and_not_while_it_waits_for_an_operator() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = RunClock::new(Some(Duration::from_secs(60)));
        c.observe(at(0), false);
        assert!(!c.overdue(at(1000)), "queued: no deadline yet");
        c.started = Some(at(10));
        assert!(!c.overdue(at(100)));
        assert!(c.overdue(at(101)), "60 s + 30 s of grace after its start");
        // An approval wait of 50 s in between does not count.
        let mut c = RunClock::new(Some(Duration::from_secs(60)));
        c.started = Some(at(0));
        c.observe(at(0), false);
        c.observe(at(20), true);
        assert!(!c.overdue(at(120)), "waiting for an operator");
        c.observe(at(70), false);
        assert!(!c.overdue(at(140)));
        assert!(c.overdue(at(141)));
        assert!(
            !RunClock::new(None).overdue(at(1_000_000)),
            "no deadline, no backstop"
        );
        // A fallback and the finalization pass each get a fresh deadline in the worker.
        let mut c = RunClock::for_attempts(Some(Duration::from_secs(60)), 1);
        c.started = Some(at(0));
        c.observe(at(0), false);
        assert!(
            !c.overdue(at(240)),
            "3 x 60 s + 30 s of compaction grace + 30 s"
        );
        assert!(c.overdue(at(241)));
    }
}
