//! The params (and the small results) of the methods loopgate implements, as clients send
//! them. Closed where OpenClaw's schema is closed: unknown fields are rejected.

use serde::{Deserialize, Serialize};

use super::Ignored;

/// `agent` params. Closed: unknown fields are rejected. Fields loopgate does not act on yet
/// are accepted so OpenClaw clients work unchanged (see `docs/protocol.md`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentParams {
    pub message: String,
    pub idempotency_key: String,
    /// What the message does if its session is busy: `steer`, `followup`, `collect` or
    /// `interrupt` (default: the session's, else `messages.queue.mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Run timeout in seconds; 0 = no execution timer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_existing_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// loopgate's own (OpenClaw's schema has none): this run's verbose level, `off`, `on`
    /// or `full`, over the session's and the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose: Option<String>,
    /// loopgate's own: whether this run streams its reply as `block` events (R-D5), over the
    /// agent's `block_streaming.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_streaming: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<super::ChatAttachment>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_account_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_space: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_effort_deliver: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_context_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_wake_trigger: Option<String>,
}

/// `agent.wait` params. Closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentWaitParams {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `chat.send` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatSendParams {
    pub session_key: String,
    pub message: String,
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Run timeout in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_mode: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_auto_on_seconds: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_channel: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_to: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_account_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_thread_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<super::ChatAttachment>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_bindings: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_context: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_leaf_entry_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_routing_contract: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_permission_mode: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_tool_overrides: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_command_interpretation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_input_provenance: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_provenance_receipt: Option<Ignored>,
}

/// `chat.history` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatHistoryParams {
    pub session_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// 1..=1000, default 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_before: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_run_ids: Option<super::Capped<String, { crate::control::MAX_INPUT_RUN_IDS }>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u64>,
}

/// `chat.inject` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatInjectParams {
    pub session_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Non-empty.
    pub message: String,
    /// At most 100 characters; shown as `[label]` above the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `chat.inject` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatInjectResult {
    pub ok: bool,
    pub message_id: String,
}

/// `chat.abort` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatAbortParams {
    pub session_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_side_runs: Option<bool>,
}

/// Params naming an agent directly or through a session key (`chat.metadata`,
/// `agent.identity.get`); other fields are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentScopeParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
}

/// `sessions.describe` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsDescribeParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_derived_titles: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_last_message: Option<bool>,
}

/// `sessions.patch` params: `label`, `unread`, `model`, `thinkingLevel`, `reasoningLevel`,
/// `queueMode`.
/// `null` clears (back to the agent's). Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsPatchParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<bool>,
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_level: Option<Option<String>>,
    /// `off`, `on` or `stream`: whether clients hear the session's reasoning.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_level: Option<Option<String>>,
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<Option<String>>,
    /// `steer`, `followup`, `collect` or `interrupt`: what the session's messages do while
    /// it is busy (`null`: `messages.queue.mode`).
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub queue_mode: Option<Option<String>>,
    /// `off`, `on` or `full` (and OpenClaw's aliases): how much of its tool work an `agent`
    /// reply of the session tells (`null`: the agent's `verbose_default`).
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub verbose_level: Option<Option<String>>,
    /// `off`, `tokens` or `full` (and OpenClaw's aliases): the usage footer on the session's
    /// replies (`null`: none).
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_usage: Option<Option<String>>,
    /// `off`, `on` or `raw` (and OpenClaw's aliases): the session's trace level (`null`:
    /// off). Admin only, as OpenClaw's `/trace`: a trace shows what the model was sent.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub trace_level: Option<Option<String>>,
    /// Guards, accepted and not checked (as for `sessions.reset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_marked_unread_at: Option<Ignored>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or set.
pub(super) mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }

    pub fn serialize<S, T>(v: &Option<Option<T>>, s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: Serialize,
    {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }
}

/// `sessions.messages.subscribe` / `unsubscribe` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessagesParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_approvals: Option<bool>,
}

/// `sessions.preview` params: the first 64 `keys` are read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsPreviewParams {
    pub keys: super::Capped<String, 64>,
    /// Newest texts per session, default 12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Characters per text, default 240 (20..=800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u32>,
}

/// `sessions.list` params (all optional). Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_minutes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_last_interaction: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_unknown: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_subagents: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_cron: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_system: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_agents_only: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_derived_titles: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_last_message: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_activity_summary: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_dir: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<Ignored>,
    /// Boards and people (OpenClaw's dashboards and activity views): loopgate's sessions
    /// have neither, so a filter on them matches none and the include flags add nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_board: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_face: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_people: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_first: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involving_me: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_relation: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationship: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involving_profile_id: Option<Ignored>,
}

/// `sessions.reset` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsResetParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// `new` or `reset` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_id: Option<String>,
}

/// `sessions.delete` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsDeleteParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_transcript: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_lifecycle_revision: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_updated_at: Option<Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit_lifecycle_hooks: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_only: Option<bool>,
}

/// `gateway.drain` params (loopgate-specific).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayDrainParams {
    /// Drain deadline; default `gateway.drain_timeout_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `loopgate.reload` result: the config file was read again; `ok: false` keeps the running
/// config and says why (`error`, as `serve` prints it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadResult {
    pub ok: bool,
    /// One line per change; empty: nothing changed.
    pub changed: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Settings that load but weaken the sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `worker.restart` params (loopgate-specific).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerRestartParams {
    pub agent_id: String,
    /// Kill now instead of draining first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// `worker.restart`: the new worker is ready.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRestartResult {
    pub ok: bool,
    pub agent_id: String,
    pub pid: u32,
}

/// `agents.list` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsListParams {}

/// `health` params.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<bool>,
}

/// `status` result (loopgate-specific).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    pub supervisor: SupervisorStatus,
    pub workers: Vec<WorkerStatus>,
    /// Cluster mode only (`[cluster]`): this gateway's view of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
}

/// The cluster as one gateway sees it (`status`, cluster mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// This gateway's node name.
    pub node: String,
    /// Gateways alive within the last lease TTL.
    pub members: Vec<String>,
    /// `ok`, or why the engine does not answer.
    pub engine: String,
    /// Each configured agent's owner now.
    pub agents: Vec<ClusterAgent>,
}

/// Who runs an agent now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAgent {
    pub agent_id: String,
    /// The owner's node name (`None`: nobody holds it now).
    pub owner: Option<String>,
    /// The ownership's epoch (grows with every new owner).
    pub epoch: Option<u64>,
    /// Bytes of files in the agent's last workspace snapshot (`None`: none yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_bytes: Option<u64>,
    /// The gateway the agent is pinned to because its workspace is over
    /// `cluster.workspace_max_mib` (it does not move while that gateway lives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_to: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SupervisorStatus {
    pub pid: u32,
    pub version: String,
    pub uptime_ms: u64,
    pub connections: u64,
    pub draining: bool,
    pub state_dir: String,
    #[serde(default)]
    pub rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    pub agent_id: String,
    #[serde(default)]
    pub pid: Option<u32>,
    /// `idle` (never spawned), `spawning`, `ready`, `draining`, `backoff`, `failed`, `exited`.
    pub state: String,
    pub restarts: u32,
    pub runs_in_flight: u64,
    #[serde(default)]
    pub uptime_ms: Option<u64>,
    #[serde(default)]
    pub last_exit: Option<String>,
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// Why the crash-loop breaker tripped (state `failed`).
    #[serde(default)]
    pub failed_reason: Option<String>,
}
