//! What a run's end is made of, between the link that streams it and the control core that
//! decides it: what clients were told of the run so far ([`Seen`], reported by the link),
//! and an end the gateway decides itself ([`GatewayEnd`]: aborted, past its deadline, its
//! worker gone, refused), with the outcome and terminal events it makes.
//!
//! Architecture Invariant: the control core is the one author of a run's terminal. The
//! link only reports what it saw; the link's fence (`worker_link::RunFence`) numbers an end
//! the core decides while the run streams after what clients saw and shuts the run's stream;
//! the hub numbers and fans out whatever it is given.

use std::sync::Arc;

use ipc::control::{RunStatus, RunTerminal, StopReason};

use crate::events::Deferred;
use crate::outcome::Outcome;
use crate::projection::RunRef;

/// What clients were told of one run, as its link saw it, reported when the run ends there
/// (its worker's `Finished`) or when the link ends with the run unfinished.
#[derive(Debug, Default)]
pub struct Seen {
    pub session_key: String,
    /// The last `seq` of the run clients may have got (a terminal goes after it).
    pub last_seq: u64,
    /// When the run started, as its worker said.
    pub started_at: Option<u64>,
    /// The worker's own terminal events, projected and held (not published).
    pub terminal: Vec<Deferred>,
    /// Steered and taken into another run's turn: its clients were told so, and that is
    /// all they hear of it (R-B3).
    pub taken_in: bool,
}

impl Seen {
    /// The `seq` a terminal told after this takes (1 for a run clients saw nothing of).
    pub fn next_seq(seen: Option<&Seen>) -> u64 {
        seen.map_or(1, |s| s.last_seq + 1)
    }
}

/// An end the gateway decides for a run (no work of its worker in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayEnd {
    pub status: RunStatus,
    pub error: String,
    /// Why it was stopped, for an aborted run.
    pub stop: Option<StopReason>,
    pub ended_at: u64,
}

impl GatewayEnd {
    /// An `error` end saying `error`.
    pub fn error(error: impl Into<String>, ended_at: u64) -> Self {
        Self {
            status: RunStatus::Error,
            error: error.into(),
            stop: None,
            ended_at,
        }
    }

    /// An `aborted` end with stop reason `reason`.
    pub fn aborted(error: impl Into<String>, reason: StopReason, ended_at: u64) -> Self {
        Self {
            status: RunStatus::Aborted,
            error: error.into(),
            stop: Some(reason),
            ended_at,
        }
    }

    /// The run's durable outcome.
    pub fn outcome(&self, run: &RunRef<'_>) -> Arc<Outcome> {
        let t = RunTerminal::without_work(
            run.run_id,
            self.status,
            self.ended_at,
            self.error.clone(),
            self.stop.map(Into::into),
        );
        Arc::new(Outcome::from_terminal(&t, run.session_key, run.agent_id))
    }

    /// Its terminal events, numbered `seq`: lifecycle `error`, and chat `aborted` (with the
    /// stop reason and what the run had `streamed`, as OpenClaw's carries it) or `error`.
    pub fn events(
        &self,
        run: &RunRef<'_>,
        seq: u64,
        started_at: Option<u64>,
        streamed: &str,
    ) -> Vec<Deferred> {
        let aborted = match (self.status, self.stop) {
            (RunStatus::Aborted, Some(reason)) => Some(reason.into()),
            _ => None,
        };
        let (agent, mut chat) = crate::projection::ended_by_gateway(
            run,
            seq,
            self.ended_at,
            started_at,
            &self.error,
            aborted,
        );
        if let ipc::gateway::ChatState::Aborted { message, .. } = &mut chat.state {
            if !streamed.is_empty() {
                *message = Some(ipc::gateway::ChatMessage::assistant(
                    streamed,
                    self.ended_at,
                ));
            }
        }
        Deferred::terminal((agent, chat))
    }

    /// Its terminal events told after what `seen` says clients got.
    pub fn events_after(&self, run: &RunRef<'_>, seen: Option<&Seen>) -> Vec<Deferred> {
        self.events(
            run,
            Seen::next_seq(seen),
            seen.and_then(|s| s.started_at),
            "",
        )
    }
}
