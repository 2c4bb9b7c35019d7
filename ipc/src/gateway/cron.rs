//! The scheduler's methods (`cron.*`, `wake`) and `cron` events, in OpenClaw 2026.9.6's
//! shapes (`tools-cron-2026.9.6.md` section 6).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Ignored;

/// When a job runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum CronSchedule {
    /// Once, at an ISO 8601 time.
    #[serde(rename_all = "camelCase")]
    At { at: String },
    /// Every `everyMs`, from `anchorMs` (the job's creation or last schedule change).
    #[serde(rename_all = "camelCase")]
    Every {
        every_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<u64>,
    },
    /// A cron expression (5 fields, or 6 with seconds first) in a time zone (default: the
    /// gateway host's).
    #[serde(rename_all = "camelCase")]
    Cron {
        expr: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
    },
}

/// What a job does when it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum CronPayload {
    /// A model turn with `message`.
    #[serde(rename = "agentTurn", rename_all = "camelCase")]
    AgentTurn {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_seconds: Option<u64>,
    },
    /// A reminder handed to the agent's main session.
    #[serde(rename = "systemEvent")]
    SystemEvent { text: String },
}

/// Where a job's reply goes: loopgate has no channels, so a reply stays in its session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CronDelivery {
    pub mode: String,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Default for CronDelivery {
    fn default() -> Self {
        CronDelivery {
            mode: "none".into(),
            rest: Map::new(),
        }
    }
}

/// A job's running state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<u64>,
    /// The run in flight (loopgate's: its outcome is recorded after a restart too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<String>,
}

/// A scheduled job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJob {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub agent_id: String,
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub schedule: CronSchedule,
    /// `isolated`, `main` or `session:<key>`.
    pub session_target: String,
    pub wake_mode: String,
    pub payload: CronPayload,
    pub delivery: CronDelivery,
    pub state: CronJobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
}

/// `cron.add` params (OpenClaw's job fields; ones loopgate has no use for are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronAddParams {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    pub schedule: CronSchedule,
    pub session_target: String,
    #[serde(default)]
    pub wake_mode: Option<String>,
    pub payload: CronPayload,
    #[serde(default)]
    pub delivery: Option<CronDelivery>,
    /// `current` targets resolve to this session.
    #[serde(default)]
    pub session_key: Option<String>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `cron.update` params: the job (`id` or `jobId`) and what changes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronUpdateParams {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
    pub patch: CronPatch,
}

/// What `cron.update` changes; absent fields stay.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
    pub delete_after_run: Option<bool>,
    pub schedule: Option<CronSchedule>,
    pub session_target: Option<String>,
    pub wake_mode: Option<String>,
    pub payload: Option<CronPayload>,
    pub delivery: Option<CronDelivery>,
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A job named by `id` or `jobId`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronIdParams {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
}

impl CronIdParams {
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref().or(self.job_id.as_deref())
    }
}

/// `cron.run` params.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunParams {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
    /// `force` (default: run now) or `due` (only if it is due).
    #[serde(default)]
    pub mode: Option<String>,
}

/// `cron.run`: started, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CronRunResult {
    #[serde(rename_all = "camelCase")]
    Enqueued {
        ok: bool,
        enqueued: bool,
        run_id: String,
    },
    #[serde(rename_all = "camelCase")]
    NotRun { ok: bool, ran: bool, reason: String },
}

/// `cron.remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CronRemoveResult {
    pub ok: bool,
    pub removed: bool,
}

/// `cron.runs` params.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunsParams {
    /// `all`: every job's runs (the Control UI's run list); else the job's.
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub sort_dir: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub offset: Option<u32>,
}

/// One run of a job, newest first in `cron.runs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunEntry {
    pub ts: u64,
    pub job_id: String,
    pub action: String,
    /// `ok`, `error` or `skipped`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub run_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
    pub delivered: bool,
    pub delivery_status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// `cron.runs`: a page of a job's runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunsResult {
    pub entries: Vec<CronRunEntry>,
    pub total: u64,
    pub offset: u32,
    pub limit: u32,
    pub has_more: bool,
    pub next_offset: Option<u32>,
}

/// A `cron` event: a job added, started, finished, scheduled, updated or removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronEvent {
    pub job_id: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<CronJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `wake` params: a system event for the agent's main session.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeParams {
    pub text: String,
    /// `now` (default) or `next-heartbeat` (loopgate has no heartbeat: now as well).
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// `cron.list` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronListParams {
    pub session_key: Option<String>,
    pub session_agent_id: Option<String>,
    pub include_disabled: Option<bool>,
    /// 1..=200.
    pub limit: Option<u32>,
    pub offset: Option<u32>,
    pub query: Option<String>,
    /// `enabled`, `disabled` or `all` (with `includeDisabled`, the Control UI's filter).
    pub enabled: Option<Value>,
    pub schedule_kind: Option<Ignored>,
    pub last_run_status: Option<Ignored>,
    pub trigger: Option<Ignored>,
    pub sort_by: Option<String>,
    pub sort_dir: Option<String>,
    pub agent_id: Option<String>,
    pub compact: Option<bool>,
    pub include_delivery_previews: Option<bool>,
}

/// `cron.list`: a page of jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronListResult {
    pub jobs: Vec<CronListEntry>,
    pub snapshot_revision: String,
    pub total: u64,
    pub offset: u32,
    pub limit: u32,
    pub has_more: bool,
    pub next_offset: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_previews: Option<Map<String, Value>>,
}

/// A job as `cron.list` gives it: whole, or in its compact row (`compact:true`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CronListEntry {
    Full(Box<CronJob>),
    Compact(Box<CronCompactJob>),
}

/// `cron.list {compact:true}`'s row, each field present (null when unknown), as the
/// Control UI checks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronCompactJob {
    pub id: String,
    pub name: String,
    pub enabled: bool,
    pub next_run_at: Option<String>,
    pub next_run_at_ms: Option<u64>,
    pub schedule_kind: String,
    pub schedule: CronSchedule,
    pub last_run_at: Option<String>,
    pub last_run_at_ms: Option<u64>,
    pub last_run_status: Option<String>,
    pub last_run_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<u64>,
    pub effective_agent_id: String,
}

/// `cron.status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronStatusResult {
    pub enabled: bool,
    pub triggers_enabled: bool,
    pub storage: String,
    pub store_path: String,
    pub jobs: u64,
    pub next_wake_at_ms: Option<u64>,
}
