//! What clients hear about runs: `agent` and `chat` event payloads, the final `agent`
//! result and the `agent.wait` result. The one definition of these shapes; the supervisor's
//! projection builds them, the test client and tools read them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An `agent` event payload: `{runId, seq, stream, ts, data, sessionKey, agentId}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEvent {
    pub run_id: String,
    /// Per run, from 1.
    pub seq: u64,
    #[serde(flatten)]
    pub data: AgentData,
    pub ts: u64,
    pub session_key: String,
    pub agent_id: String,
}

/// `stream` and its `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", content = "data", rename_all = "lowercase")]
pub enum AgentData {
    Lifecycle(LifecycleData),
    Assistant(AssistantData),
    Tool(ToolData),
    Compaction(CompactionData),
    /// Reasoning, for runs that show it: cumulative `text` and the `delta`.
    Thinking(AssistantData),
    /// A model attempt is being retried: `{phase: "retrying", attempt, maxAttempts, reason}`.
    #[serde(rename = "run_status")]
    RunStatus(RunStatusData),
    /// loopgate's own (OpenClaw sends block replies only to messaging channels): a block
    /// of the reply, complete and ready to deliver, for runs with block streaming (R-D5).
    Block(BlockData),
}

/// A block of a run's reply: `index` counts the run's blocks from 0; `itemId` is the
/// assistant message it was cut from; `isReasoning` marks a response's reasoning sent as a
/// block of its own (reasoning `on`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockData {
    pub text: String,
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_reasoning: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatusData {
    pub phase: String,
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: String,
}

/// A chat `status`'s `retry`: the attempt coming up and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryInfo {
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecyclePhase {
    Start,
    Finishing,
    End,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleData {
    pub phase: LifecyclePhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantData {
    /// The current assistant message's text so far (reasoning: the attempt's).
    pub text: String,
    pub delta: String,
    /// Which assistant message of the run (`<runId>:<n>`, from 1), as OpenClaw's `itemId`:
    /// `text` starts over when it changes. Absent on reasoning.
    #[serde(rename = "itemId", default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolPhase {
    Start,
    Update,
    Result,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolData {
    pub phase: ToolPhase,
    pub name: String,
    pub tool_call_id: String,
    /// `start`: the call's arguments, always a JSON object (arguments that are not one, or
    /// were clipped past parsing, come as `{"raw": "<text>"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// `update`: a piece of a running `exec`'s output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_result: Option<Value>,
    /// `result`: what the model gets back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionPhase {
    Start,
    End,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionData {
    pub phase: CompactionPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will_retry: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
}

/// A `chat` event payload, the UI's view of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatEvent {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    /// The `seq` of the agent event it projects.
    pub seq: u64,
    #[serde(flatten)]
    pub state: ChatState,
}

/// `state` and its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "state",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum ChatState {
    Delta {
        delta_text: String,
        message: ChatMessage,
    },
    Final {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<ChatMessage>,
        stop_reason: Option<String>,
        /// Where the reply was recorded: clients match it with its `chat.history` copy.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_seq: Option<i64>,
    },
    Error {
        error_message: Option<String>,
        error_kind: ChatErrorKind,
        /// Always present (`null` when none), as before.
        #[serde(default)]
        stop_reason: Option<String>,
    },
    /// A stopped run, as OpenClaw's: the text streamed so far as `message`, and no
    /// `errorMessage` (the Control UI shows a stop with one as a failure).
    Aborted {
        stop_reason: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<ChatMessage>,
    },
    /// Still running: `phase` (`starting_model` while a retry waits) and the retry, if any.
    Status {
        phase: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry: Option<RetryInfo>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatErrorKind {
    Timeout,
    Unknown,
}

/// The assistant message of a chat event: `{role, content: [{type: "text", text}], timestamp}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: Vec<TextBlock>,
    pub timestamp: u64,
    /// Where the message was recorded, as in `chat.history`.
    #[serde(
        rename = "__openclaw",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub recorded: Option<MessagePlace>,
    /// Set on a reply the gateway wrote itself (a slash command's), as OpenClaw marks one.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub injected: Option<Injected>,
}

/// What marks a gateway-injected reply (OpenClaw: provider `openclaw`, model
/// `gateway-injected`, no usage), with the idempotency key of the message it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injected {
    pub stop_reason: String,
    pub usage: ZeroUsage,
    pub api: String,
    pub provider: String,
    pub model: String,
    pub idempotency_key: String,
}

impl Injected {
    /// The marks of a reply to the message sent under `idempotency_key`.
    pub fn reply_to(idempotency_key: &str) -> Self {
        Injected {
            stop_reason: "stop".into(),
            usage: ZeroUsage::default(),
            api: "openai-responses".into(),
            provider: "openclaw".into(),
            model: "gateway-injected".into(),
            idempotency_key: idempotency_key.into(),
        }
    }
}

/// OpenClaw's usage block, all zero: no model was asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZeroUsage {
    pub input: u64,
    pub output: u64,
    pub total_tokens: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost: ZeroCost,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZeroCost {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// Where a message is in its session's transcript (`__openclaw` on history messages):
/// clients match a live copy and a fetched copy by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessagePlace {
    /// The transcript entry id.
    pub id: String,
    pub seq: i64,
    /// The run that recorded it (absent: not written by a run, e.g. injected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The message's attachments (the Control UI fetches each from
    /// `/__openclaw__/assistant-media`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<super::MediaEntry>,
    /// Where its images go: one slot per image, by its index in `media`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_image_layout: Option<super::MediaImageLayout>,
    /// A context-free slash command's rows (`/status`): recorded, never the model's context.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub context_free_command: bool,
}

impl ChatMessage {
    pub fn assistant(text: &str, timestamp: u64) -> Self {
        Self {
            role: "assistant".into(),
            content: vec![TextBlock::new(text)],
            timestamp,
            recorded: None,
            injected: None,
        }
    }
}

/// A `session.message` event: a message was recorded in a session's transcript, as
/// `chat.history` shows it. To `sessions.subscribe` subscribers and to connections that
/// follow the session (`sessions.messages.subscribe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessage {
    pub session_key: String,
    pub agent_id: String,
    /// The run that recorded it (absent for an injected message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub message: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_seq: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    /// A notice that the session changed (`/new`, `/reset`, `/compact`), as OpenClaw marks it.
    #[serde(
        rename = "openclawStatusNotice",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub status_notice: bool,
}

impl TextBlock {
    pub fn new(text: &str) -> Self {
        Self {
            kind: "text".into(),
            text: text.into(),
            status_notice: false,
        }
    }
}

/// The final `agent` response's payload (OpenClaw's `AgentRunResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentResult {
    pub run_id: String,
    /// `ok`, `timeout` (also for aborted runs) or `error`.
    pub status: String,
    /// `completed`, `aborted` or `failed`.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub result: RunResult,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub payloads: Vec<ReplyPayload>,
    pub meta: ResultMeta,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplyPayload {
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultMeta {
    pub duration_ms: u64,
    pub agent_meta: AgentMeta,
    /// Flat copies of `agentMeta`'s, for clients that read them here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageOut>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_receipt: Option<TerminalReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_reply: Option<TerminalReply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
    /// Fallback models that ran before `provider`/`model` answered (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<u32>,
    /// loopgate extension: the run whose turn carried this run's message (steered into
    /// it, collected with it or summarized by it); the outcome is that turn's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub session_key: String,
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageOut>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageOut {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalReceipt {
    pub source_reply_delivered: bool,
}

/// What the run finally said: `visible` with its text, or `silent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "disposition", rename_all = "lowercase")]
pub enum TerminalReply {
    Visible { text: String },
    Silent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultError {
    /// `error`, `timeout` or `aborted`.
    pub kind: String,
    pub message: String,
}

/// The `agent.wait` result: a finished run's, or `timeout` for one still running when the
/// wait ended (`timeoutPhase: "gateway_draining"` when the gateway stopping ended it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentWaitResult {
    pub run_id: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_receipt: Option<TerminalReceipt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_reply: Option<TerminalReply>,
    /// Who answered (a finished run): the provider and model, and how many fallbacks ran
    /// before them (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<u32>,
    /// For a wait that ended first: whether the run had reached its model yet (`false`: it
    /// is still queued behind its session's earlier runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_started: Option<bool>,
    /// loopgate extension: the run whose turn carried this run's message (R-B3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_by: Option<String>,
}

impl AgentWaitResult {
    /// The wait ended while the run was still queued: `{status: "pending", timeoutPhase:
    /// "queue", providerStarted: false}`.
    pub fn queued(run_id: &str) -> Self {
        Self {
            status: "pending".into(),
            provider_started: Some(false),
            ..Self::pending(run_id, Some("queue"))
        }
    }

    /// The wait ended before the run did.
    pub fn pending(run_id: &str, timeout_phase: Option<&str>) -> Self {
        Self {
            run_id: run_id.to_owned(),
            status: "timeout".into(),
            timeout_phase: timeout_phase.map(str::to_owned),
            started_at: None,
            ended_at: None,
            error: None,
            stop_reason: None,
            terminal_receipt: None,
            terminal_reply: None,
            provider: None,
            model: None,
            fallbacks: None,
            provider_started: None,
            carried_by: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agent_events_have_openclaws_flat_shape() {
        let ev = AgentEvent {
            run_id: "r".into(),
            seq: 3,
            data: AgentData::Lifecycle(LifecycleData {
                phase: LifecyclePhase::End,
                started_at: Some(1),
                ended_at: Some(2),
                error: None,
                stop_reason: Some("stop".into()),
                aborted: None,
            }),
            ts: 9,
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            json!({"runId": "r", "seq": 3, "stream": "lifecycle", "ts": 9,
                   "data": {"phase": "end", "startedAt": 1, "endedAt": 2, "stopReason": "stop"},
                   "sessionKey": "agent:main:main", "agentId": "main"})
        );
        assert_eq!(serde_json::from_value::<AgentEvent>(v).unwrap(), ev);
    }

    #[test]
    fn chat_events_have_openclaws_flat_shape() {
        let ev = ChatEvent {
            run_id: "r".into(),
            session_key: "k".into(),
            agent_id: "main".into(),
            seq: 2,
            state: ChatState::Error {
                error_message: Some("boom".into()),
                error_kind: ChatErrorKind::Unknown,
                stop_reason: None,
            },
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            json!({"runId": "r", "sessionKey": "k", "agentId": "main", "seq": 2,
                   "state": "error", "errorMessage": "boom", "errorKind": "unknown",
                   "stopReason": null})
        );
        assert_eq!(serde_json::from_value::<ChatEvent>(v).unwrap(), ev);
        let fin = ChatState::Final {
            message: None,
            stop_reason: Some("stop".into()),
            message_id: None,
            message_seq: None,
        };
        assert_eq!(
            serde_json::to_value(&fin).unwrap(),
            json!({"state": "final", "stopReason": "stop"})
        );
    }

    #[test]
    fn terminal_reply_is_tagged_by_disposition() {
        let v = serde_json::to_value(TerminalReply::Visible { text: "hi".into() }).unwrap();
        assert_eq!(v, json!({"disposition": "visible", "text": "hi"}));
        let v = serde_json::to_value(TerminalReply::Silent).unwrap();
        assert_eq!(v, json!({"disposition": "silent"}));
    }
}
