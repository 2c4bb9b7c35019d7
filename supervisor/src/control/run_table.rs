//! The run table's entries: a run handed to a worker (`Active`), its outcome being written
//! (`Persisting`) and done (`Terminal`), the session operations waiting for answers, and the
//! outcome and events of a run the gateway ends itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{RunStatus, RunTerminal, StopReason};
use tokio::sync::oneshot;

use crate::events::{Deferred, TerminalEvents};
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

pub(super) struct PendingOp {
    pub agent_id: String,
    pub reply: oneshot::Sender<super::command::OpResult>,
}

/// The outcome of a run the gateway ends itself (no work of the worker in it).
pub(super) fn gateway_outcome(
    entry: &RunEntry,
    run_id: &str,
    status: RunStatus,
    ended_at: u64,
    error: &str,
    stop: Option<StopReason>,
) -> Arc<Outcome> {
    let t = RunTerminal::without_work(
        run_id,
        status,
        ended_at,
        error.to_owned(),
        stop.map(|s| s.as_str().to_owned()),
    );
    Arc::new(Outcome::from_terminal(
        &t,
        &entry.session_key,
        &entry.agent_id,
    ))
}

/// Its terminal events, numbered `seq`: lifecycle `error`, and chat `aborted` (with the stop
/// reason) or `error`.
pub(super) fn gateway_events(
    entry: &RunEntry,
    run_id: &str,
    seq: u64,
    status: RunStatus,
    ended_at: u64,
    error: &str,
    stop: Option<StopReason>,
) -> Vec<Deferred> {
    let run = RunRef {
        run_id,
        session_key: &entry.session_key,
        agent_id: &entry.agent_id,
    };
    let aborted = match (status, stop) {
        (RunStatus::Aborted, Some(reason)) => Some(reason.as_str()),
        _ => None,
    };
    Deferred::terminal(crate::projection::ended_by_gateway(
        &run, seq, ended_at, None, error, aborted,
    ))
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
        });
        let writing = entry(RunState::Persisting {
            waiters: Vec::new(),
            deferred: TerminalEvents::default(),
        });
        assert!(active.is_active() && active.is_unsettled());
        assert!(!writing.is_active(), "no second terminal may start");
        assert!(writing.is_unsettled(), "the session still shows it");
    }
}
