//! `diagnostics.lanes` and the `diagnostic` event (R-I1, R-I2): stuck-session reports as
//! operator clients see them. The lane list has OpenClaw's shape (`{ts, lanes, dynamic}`,
//! one command lane per agent worker); `sessions` is loopgate's own addition.

use serde::{Deserialize, Serialize};

/// `diagnostics.lanes` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsLanes {
    pub ts: u64,
    /// One lane per agent whose worker runs (`agent:<id>`).
    pub lanes: Vec<CommandLane>,
    /// The session lanes of all agents, summed.
    pub dynamic: DynamicLanes,
    /// Every session lane: its run, queue and classification.
    pub sessions: Vec<SessionLane>,
}

/// One agent worker as a command lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandLane {
    pub lane: String,
    pub queued_count: u32,
    pub active_count: u32,
    pub max_concurrent: u32,
    pub draining: bool,
    /// The worker's generation (bumped on every restart).
    pub generation: u64,
    /// Why the lane takes nothing now (`"lane"`: it is full), or `null`.
    #[serde(default)]
    pub blocked_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicLanes {
    pub lane_count: u32,
    pub active_count: u32,
    pub queued_count: u32,
    pub queued_lane_count: u32,
}

/// One session lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionLane {
    pub agent_id: String,
    pub session_key: String,
    #[serde(default)]
    pub run_id: Option<String>,
    /// `run`, `model_call`, `tool_call`, `approval`, `backoff`, `finishing`, `queued`, `claim`.
    pub active_work_kind: String,
    pub queue_depth: u32,
    /// Last observed progress, ms since the epoch.
    pub last_progress_at: u64,
    pub last_progress_age_ms: u64,
    /// `long_running`, `stalled`, `stuck`; `null` while the session is healthy.
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The `diagnostic` event: a session classification or a recovery step, with OpenClaw's
/// diagnostic event `type` and field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum DiagnosticEvent {
    #[serde(rename = "session.long_running")]
    LongRunning(SessionAttention),
    #[serde(rename = "session.stalled")]
    Stalled(SessionAttention),
    #[serde(rename = "session.stuck")]
    Stuck(SessionAttention),
    #[serde(rename = "session.recovery.requested")]
    RecoveryRequested(SessionRecovery),
    #[serde(rename = "session.recovery.completed")]
    RecoveryCompleted(SessionRecovery),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAttention {
    pub ts: u64,
    pub agent_id: String,
    pub session_key: String,
    /// `processing` with a run, `waiting` with queued work only, `idle` otherwise.
    pub state: String,
    pub age_ms: u64,
    pub queue_depth: u32,
    pub reason: String,
    /// `long_running`, `stalled_agent_run`, `blocked_tool_call`, `stale_session_state`.
    pub classification: String,
    pub active_work_kind: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub state_generation: u64,
    /// Earlier reports about the unchanged session.
    pub repeat: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecovery {
    pub ts: u64,
    pub agent_id: String,
    pub session_key: String,
    /// `abort_run`, `release_lane`, `release_claim`, `reschedule`.
    pub action: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub state_generation: u64,
    /// `completed`: `aborted`, `force_cleared`, `released`, `rescheduled`, or why nothing
    /// was done (`resumed`, `replaced`, `protected`, `failed: ...`).
    #[serde(default)]
    pub status: Option<String>,
}
