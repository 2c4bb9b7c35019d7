//! `agent.events`: a loopgate extension that lets a client whose connection dropped mid-run
//! resume the run's event stream where it left off (no peer gateway has one).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `agent.events` params. Closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentEventsParams {
    pub run_id: String,
    /// The last per-run `seq` the client saw (default 0: from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

/// One replayed event, as it was sent live.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplayedEvent {
    /// `agent` or `chat`.
    pub event: String,
    pub payload: Box<RawValue>,
}

/// `agent.events` result: the run's events after `afterSeq` that this connection did not
/// get live (in order); every later one comes live on the connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEventsResult {
    pub run_id: String,
    pub events: Vec<ReplayedEvent>,
    /// Events after `afterSeq` are missing: the run's buffer no longer holds them (it
    /// keeps each run's newest 1 MiB, 5 minutes after its terminal). `chat.history` has
    /// what the run recorded.
    pub truncated: bool,
    /// The oldest `seq` the buffer still holds, when it holds any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    /// The run's terminal events are among `events` or were already sent: nothing more
    /// comes.
    pub ended: bool,
}
