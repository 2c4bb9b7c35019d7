//! `health` and `status` in OpenClaw's shapes (what `openclaw health` and
//! `openclaw status --json` read), with only what loopgate has: no channels, heartbeats,
//! tasks or plugins. loopgate's own process view is `loopgate.status` ([`super::StatusResult`]).

use serde::{Deserialize, Serialize};

/// Sessions of an agent, most recent first (OpenClaw's `HealthSessionSummary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Where they are kept (the gateway database).
    pub path: String,
    pub count: u64,
    /// At most 10.
    pub recent: Vec<RecentSession>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentSession {
    pub key: String,
    pub updated_at: Option<u64>,
    /// Milliseconds since its last update.
    pub age: Option<u64>,
}

/// An agent's heartbeat: loopgate runs none, so it is always disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    pub enabled: bool,
    pub every: String,
    pub every_ms: Option<u64>,
    pub prompt: String,
    pub target: String,
    pub ack_max_chars: u64,
}

impl Heartbeat {
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            every: "disabled".into(),
            every_ms: None,
            prompt: String::new(),
            target: "none".into(),
            ack_max_chars: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentHealth {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub is_default: bool,
    pub heartbeat: Heartbeat,
    pub sessions: SessionSummary,
}

/// The answer to `health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthResult {
    pub ok: bool,
    pub ts: u64,
    pub duration_ms: u64,
    pub heartbeat_seconds: u64,
    pub default_agent_id: String,
    pub channels: serde_json::Map<String, serde_json::Value>,
    pub channel_order: Vec<String>,
    pub channel_labels: serde_json::Map<String, serde_json::Value>,
    pub agents: Vec<AgentHealth>,
    /// The default agent's sessions.
    pub sessions: SessionSummary,
    /// loopgate's: how long the gateway has run, and whether it is draining.
    pub uptime_ms: u64,
    pub draining: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentHeartbeatStatus {
    pub agent_id: String,
    pub enabled: bool,
    pub every: String,
    pub every_ms: Option<u64>,
    pub waiting_for_route: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatStatus {
    pub default_agent_id: String,
    pub agents: Vec<AgentHeartbeatStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessions {
    pub agent_id: String,
    pub path: String,
    pub count: u64,
    pub recent: Vec<RecentSession>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDefaultsStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsStatus {
    pub paths: Vec<String>,
    pub count: u64,
    pub defaults: SessionDefaultsStatus,
    pub recent: Vec<RecentSession>,
    pub by_agent: Vec<AgentSessions>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounts {
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAudit {
    pub errors: u64,
}

/// `status` params; other fields are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_channel_summary: Option<bool>,
    /// Add `cliProjection` (what OpenClaw's CLI shows about agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_cli_projection: Option<bool>,
}

/// `status.cliProjection`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CliProjection {
    pub agents: CliAgents,
    pub update_channel: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CliAgents {
    pub default_id: Option<String>,
    pub selection_required: bool,
    pub rows: Vec<CliAgentRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CliAgentRow {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The answer to `status` (OpenClaw's status summary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusSummary {
    pub runtime_version: String,
    pub heartbeat: HeartbeatStatus,
    pub channel_summary: Vec<serde_json::Value>,
    pub queued_system_events: Vec<serde_json::Value>,
    pub tasks: TaskCounts,
    pub task_audit: TaskAudit,
    pub degraded_secret_owners: Vec<String>,
    pub degraded_plugins: Vec<String>,
    pub sessions: SessionsStatus,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_projection: Option<CliProjection>,
}

/// `logs.tail` params: `cursor` is a byte offset from an earlier answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogsTailParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// 1..=5000, default 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// 1..=1 000 000, default 250 000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// The answer to `logs.tail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsTailResult {
    /// Where the lines come from.
    pub file: String,
    /// The offset to ask from next time.
    pub cursor: u64,
    pub size: u64,
    pub lines: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_bytes: Option<u64>,
}
