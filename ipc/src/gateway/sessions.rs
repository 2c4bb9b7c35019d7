//! Session rows and session events (`sessions.list`, `sessions.subscribe`,
//! `sessions.changed`), in OpenClaw's shapes.

use serde::{Deserialize, Serialize};

use super::ignored::Glance;

/// A session as `sessions.list` lists it and `sessions.changed` carries it (OpenClaw's
/// `SessionRow`, an open object: these are the fields loopgate knows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    pub key: String,
    /// Always `direct` (loopgate has no groups or channels).
    pub kind: String,
    pub agent_id: String,
    /// The agent's main session (`agent:<id>:main`).
    pub is_main: bool,
    /// Always `direct`.
    pub chat_type: String,
    /// loopgate neither archives nor pins sessions.
    pub archived: bool,
    pub pinned: bool,
    /// Every session is shared with the gateway's operators, who may send (a client treats
    /// other visibilities as read-only).
    pub visibility: String,
    pub sharing_role: String,
    /// What a message sent while a run is active does: the session's own queue mode, else
    /// `messages.queue.mode` (R-B3).
    pub effective_queue_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<u64>,
    /// `running` while a run is active, else how the last run ended: `done`, `failed`,
    /// `killed` (aborted) or `timeout`.
    pub status: String,
    pub has_active_run: bool,
    /// The complete set of active runs; omitted when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_run_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    /// Why the last run failed or timed out (not for one that was aborted: OpenClaw's
    /// Control UI shows this as an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_error: Option<String>,
    /// The last run was aborted (`status: "killed"`), as OpenClaw marks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_last_run: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    /// The model's context window, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    /// Set with `sessions.patch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// When a client last marked the session read (`sessions.patch {unread: false}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_read_at: Option<u64>,
    /// The session's own thinking level and reasoning visibility (`sessions.patch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_level: Option<String>,
    /// The session's own queue mode (`sessions.patch queueMode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mode: Option<String>,
    /// The session's own verbose level (`sessions.patch verboseLevel`, `/verbose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose_level: Option<String>,
    /// The session's own usage footer mode and trace level (`/usage`, `/trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_usage: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_level: Option<String>,
    /// The last run's start and end, and how long it ran (OpenClaw's `startedAt`,
    /// `endedAt`, `runtimeMs`); a running session has only its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_ms: Option<u64>,
}

impl SessionRow {
    /// A row with what a run's lifecycle tells, nothing more.
    pub fn for_run(key: &str, agent_id: &str, status: &str, active: Option<Vec<String>>) -> Self {
        SessionRow {
            key: key.to_owned(),
            kind: "direct".into(),
            agent_id: agent_id.to_owned(),
            is_main: key == format!("agent:{agent_id}:main"),
            chat_type: "direct".into(),
            archived: false,
            pinned: false,
            visibility: "shared".into(),
            sharing_role: "admin".into(),
            effective_queue_mode: "followup".into(),
            session_id: None,
            updated_at: None,
            last_activity_at: None,
            created_at: None,
            status: status.to_owned(),
            has_active_run: status == "running" || active.as_ref().is_some_and(|a| !a.is_empty()),
            active_run_ids: active,
            last_run_id: None,
            last_run_error: None,
            aborted_last_run: None,
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            model: None,
            model_provider: None,
            context_tokens: None,
            label: None,
            last_read_at: None,
            thinking_level: None,
            verbose_level: None,
            response_usage: None,
            trace_level: None,
            reasoning_level: None,
            queue_mode: None,
            started_at: None,
            ended_at: None,
            runtime_ms: None,
        }
    }
}

impl SessionsChanged {
    /// The session itself changed (`reason`, e.g. `patch`).
    pub fn changed(reason: &str, ts: u64, row: SessionRow) -> Self {
        SessionsChanged {
            reason: Some(reason.to_owned()),
            phase: None,
            run_id: None,
            ..SessionsChanged::run("", "", ts, row)
        }
    }
}

/// The answer to `sessions.patch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsPatchResult {
    pub ok: bool,
    pub key: String,
    pub entry: PatchedEntry,
    pub resolved: PatchResolved,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchedEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub updated_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_read_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchResolved {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A page of `sessions.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsListResult {
    pub ts: u64,
    pub path: String,
    pub count: u64,
    pub total_count: u64,
    pub limit_applied: u32,
    pub offset: u32,
    /// Where the next page starts; `null` on the last page.
    pub next_offset: Option<u64>,
    pub has_more: bool,
    pub owners: Vec<String>,
    pub defaults: SessionDefaults,
    pub sessions: Vec<SessionRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDefaults {
    pub default_agent_id: String,
    pub main_key: String,
    pub main_session_key: String,
}

/// What `chat.history` and `chat.startup` add to the transcript page the worker reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    pub session_key: String,
    /// Absent for a session that does not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub agent_id: String,
    /// Recorded messages, oldest first, each with its `__openclaw` place.
    pub messages: Vec<serde_json::Value>,
    pub session_info: SessionRow,
    pub pending_inputs: PendingInputs,
    /// Only when `inputRunIds` was asked: each asked run that is still queued (`pending`) or
    /// whose message was recorded (`consumed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_receipts: Option<Vec<InputReceipt>>,
    /// The consumed receipts again, as `{runId, consumedByEventId}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_consumptions: Option<Vec<InputConsumption>>,
    /// Present when older messages remain (read them with `offset: nextOffset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<HistoryDefaults>,
    /// The session's own thinking level (`sessions.patch`, `/think`); absent when it has
    /// none, as OpenClaw's (operator-surface §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<String>,
    /// The session's own verbose level, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose_level: Option<String>,
}

/// Whether a sent message has reached the transcript yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum InputReceipt {
    #[serde(rename_all = "camelCase")]
    Pending { run_id: String },
    #[serde(rename_all = "camelCase")]
    Consumed {
        run_id: String,
        /// The transcript entry that recorded it.
        consumed_by_event_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputConsumption {
    pub run_id: String,
    pub consumed_by_event_id: String,
}

/// Messages accepted for the session that no run has taken yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInputs {
    pub items: Vec<serde_json::Value>,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryDefaults {
    pub model_provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

/// `chat.history` with a cursor this gateway cannot continue: fetch a fresh page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryReset {
    pub kind: String,
}

impl Default for HistoryReset {
    fn default() -> Self {
        Self {
            kind: "reset".into(),
        }
    }
}

/// The answer to `sessions.describe`: the row, or `null` for a key with no session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionsDescribeResult {
    pub session: Option<SessionRow>,
}

/// The answer to `sessions.preview`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsPreviewResult {
    pub ts: u64,
    pub previews: Vec<SessionPreview>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPreview {
    pub key: String,
    /// `ok`, `empty` (no visible text), `missing` (no such session) or `error`.
    pub status: String,
    pub items: Vec<PreviewItem>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewItem {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
}

/// The answer to `sessions.subscribe` (with `list` when it was given list params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionsSubscribeResult {
    pub subscribed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<SessionsListResult>,
}

/// The answer to `sessions.reset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionsResetResult {
    pub ok: bool,
    pub key: String,
    pub entry: ResetEntry,
    pub resolved: ResolvedAgentRef,
}

/// The session as it was reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResetEntry {
    pub session_id: String,
    pub updated_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAgentRef {
    pub agent_id: String,
}

/// A `sessions.changed` event for a run's lifecycle: `phase` `start` when it starts, `end` or
/// `error` once its outcome is recorded. The row's fields are also copied to the top level,
/// as OpenClaw's snapshot does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsChanged {
    pub session_key: String,
    pub agent_id: String,
    /// For a run's lifecycle: `start`, `end` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// For a change to the session itself: `patch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub ts: u64,
    pub session: SessionRow,
    pub status: String,
    pub has_active_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_run_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_last_run: Option<bool>,
    /// For `reason: "compact"`: whether the context was compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<bool>,
}

/// `sessions.changed` for a deleted session: `{sessionKey, agentId, reason: "delete", ts}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDeleted {
    pub session_key: String,
    pub agent_id: String,
    pub reason: String,
    pub ts: u64,
}

impl SessionDeleted {
    pub fn new(session_key: &str, agent_id: &str, ts: u64) -> Self {
        SessionDeleted {
            session_key: session_key.to_owned(),
            agent_id: agent_id.to_owned(),
            reason: "delete".into(),
            ts,
        }
    }
}

impl SessionsChanged {
    pub fn run(phase: &str, run_id: &str, ts: u64, row: SessionRow) -> Self {
        SessionsChanged {
            session_key: row.key.clone(),
            agent_id: row.agent_id.clone(),
            phase: Some(phase.to_owned()),
            run_id: Some(run_id.to_owned()),
            reason: None,
            ts,
            status: row.status.clone(),
            has_active_run: row.has_active_run,
            active_run_ids: row.active_run_ids.clone(),
            last_run_id: row.last_run_id.clone(),
            last_run_error: row.last_run_error.clone(),
            aborted_last_run: row.aborted_last_run,
            compacted: None,
            session: row,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_run_leaves_an_idle_row() {
        let mut row = SessionRow::for_run("agent:main:main", "main", "done", Some(vec![]));
        row.last_run_id = Some("r1".into());
        let ev = SessionsChanged::run("end", "r1", 5, row);
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["sessionKey"], "agent:main:main");
        assert_eq!(v["phase"], "end");
        assert_eq!(v["status"], "done");
        assert_eq!(v["hasActiveRun"], false);
        assert_eq!(v["activeRunIds"], json!([]));
        assert_eq!(v["session"]["key"], "agent:main:main");
        assert_eq!(v["session"]["kind"], "direct");
        assert_eq!(v["session"]["hasActiveRun"], false);
        assert_eq!(v["lastRunId"], "r1");
    }
}

/// One presence entry, as `system-presence` and `presence` events list them: the gateway
/// itself first (`mode: "gateway"`, `reason: "self"`, OpenClaw's shape, which
/// `openclaw status` reads as `gateway.self`), then each live client connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PresenceEntry {
    /// When it connected, or the gateway started (ms since the epoch).
    pub ts: u64,
    /// The gateway's host name (its own entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A client's id (absent on the gateway's own entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    pub mode: String,
    pub version: String,
    pub platform: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_family: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `connect` for a client, `self` for the gateway.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_since: Option<u64>,
    /// A one-line summary (the gateway's: `Gateway: <host> · app <version> · mode gateway ·
    /// reason self`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The device the connection proved (a client matches it with `device.pair.list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// A `presence` event: every live connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceEvent {
    pub presence: Vec<PresenceEntry>,
}

/// The answer to `sessions.messages.subscribe` / `unsubscribe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessagesResult {
    pub subscribed: bool,
    /// The canonical session key.
    pub key: String,
    /// With `includeApprovals`: the session's pending approvals (loopgate has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_replay: Option<ApprovalReplay>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalReplay {
    pub session_key: String,
    pub updated_at_ms: u64,
    pub approvals: Vec<serde_json::Value>,
    pub truncated: bool,
}

/// The answer to `question.list`: loopgate's agents never ask questions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionListResult {
    pub questions: Vec<serde_json::Value>,
}

/// `sessions.create` params: the ones loopgate acts on; any other field OpenClaw knows
/// (forks, worktrees, incognito, tool overrides, attachments, ...) that asks for something
/// (not `null`, `false`, `""`, `[]`, nor `visibility: "shared"`) is named in `unsupported`
/// and refused by name. Read field by field: an unsupported field's value is looked at
/// (asked or not) and skipped, never built.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsCreateParams {
    /// A bare key is scoped to the agent (`agent:<id>:<key>`); absent: a new key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Taken as the label when no label is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_source: Option<String>,
    /// The session the client came from (TUI `/new`); recorded nowhere, accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeds_parent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emit_command_hooks: Option<bool>,
    /// A first message: the session's first turn starts at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The other fields that ask for something, by name (at most 16 are named).
    #[serde(skip)]
    pub unsupported: Vec<String>,
}

impl<'de> Deserialize<'de> for SessionsCreateParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SessionsCreateParams;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("sessions.create params")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut p = SessionsCreateParams::default();
                while let Some(name) = map.next_key::<String>()? {
                    match name.as_str() {
                        "key" => p.key = map.next_value()?,
                        "idempotencyKey" => p.idempotency_key = map.next_value()?,
                        "agentId" => p.agent_id = map.next_value()?,
                        "label" => p.label = map.next_value()?,
                        "displayName" => p.display_name = map.next_value()?,
                        "titleSource" => p.title_source = map.next_value()?,
                        "parentSessionKey" => p.parent_session_key = map.next_value()?,
                        "succeedsParent" => p.succeeds_parent = map.next_value()?,
                        "emitCommandHooks" => p.emit_command_hooks = map.next_value()?,
                        "message" => p.message = map.next_value()?,
                        "task" => p.task = map.next_value()?,
                        "timeoutMs" => p.timeout_ms = map.next_value()?,
                        other => {
                            let value = map.next_value::<Glance>()?;
                            if asks(other, &value) && p.unsupported.len() < 16 {
                                p.unsupported.push(other.to_owned());
                            }
                        }
                    }
                }
                Ok(p)
            }
        }
        d.deserialize_map(V)
    }
}

/// Whether an unsupported field's value asks for anything: not `null`, `false`, `""`, `[]`,
/// nor `visibility: "shared"` (OpenClaw's default).
fn asks(name: &str, value: &Glance) -> bool {
    match value {
        Glance::Null | Glance::Bool(false) | Glance::List { empty: true } => false,
        Glance::Str(s) => !(s.is_empty() || (name == "visibility" && s == "shared")),
        _ => true,
    }
}

/// `sessions.create` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsCreateResult {
    pub ok: bool,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub entry: SessionRow,
    pub run_started: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_error: Option<super::ErrorShape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<CreateResolved>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateResolved {
    pub model_provider: String,
    pub model: String,
}

/// `sessions.compact` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsCompactParams {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Trimming to the last lines instead of summarizing: not supported (refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lines: Option<u64>,
}

/// `sessions.compact` result: `ok:false` (inside an ok frame) when there was nothing to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsCompactResult {
    pub ok: bool,
    pub key: String,
    pub compacted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CompactionDone>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionDone {
    pub messages_summarized: u64,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// A `session.operation` event: a session-wide operation (a compaction) starts or ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOperation {
    pub operation_id: String,
    /// `compact`.
    pub operation: String,
    /// `start` or `end`.
    pub phase: String,
    pub session_key: String,
    pub agent_id: String,
    pub ts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
