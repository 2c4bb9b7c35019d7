//! OpenClaw Gateway protocol v4: the JSON frames clients exchange with the supervisor.
//!
//! One JSON object per frame: over WebSocket one text message per frame, over the unix socket
//! one line per frame (newline-delimited JSON). Request / response / event envelopes, the
//! `ErrorShape`, the connect handshake and the params and results of the methods loopgate
//! implements. Method names are defined once, in [`Method`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod absent;
mod approvals;
mod catalog;
mod devices;
mod diagnostics;
mod health;
mod hello;
mod methods;
mod results;
mod resume;
mod run;
mod scope;
mod sessions;
mod surrogates;
pub use absent::*;
pub use approvals::*;
pub use catalog::*;
pub use devices::*;
pub use diagnostics::*;
pub use health::*;
pub use hello::*;
pub use methods::{m, ChatHistoryResult, Done, Method, MethodSpec, Never};
pub use results::*;
pub use resume::*;
pub use run::*;
pub use scope::{covers, Scope};
pub use sessions::*;

/// Gateway protocol version spoken to clients.
pub const GATEWAY_PROTOCOL: u32 = 4;
/// Largest frame accepted before `connect` succeeds.
pub const MAX_PREAUTH_PAYLOAD_BYTES: usize = 64 * 1024;
/// Largest frame accepted after `connect` (advertised as `policy.maxPayload`).
pub const MAX_PAYLOAD_BYTES: usize = 25 * 1024 * 1024;
/// Largest `message` of `agent` / `chat.send` (well under the control link's
/// [`crate::frame::MAX_FRAME`], which must carry it with the rest of the run).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Largest `extraSystemPrompt` of `agent`.
pub const MAX_EXTRA_SYSTEM_PROMPT_BYTES: usize = 1024 * 1024;
/// Largest `idempotencyKey` (it is the run id, copied into every event of the run).
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;
/// Per-connection outbound buffer cap (advertised as `policy.maxBufferedBytes`).
pub const MAX_BUFFERED_BYTES: usize = 50 * 1024 * 1024;
/// Interval of `tick` events (advertised as `policy.tickIntervalMs`).
pub const TICK_INTERVAL_MS: u64 = 30_000;
/// How long a client has to complete `connect`.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 15_000;
/// Default `agent.wait` window.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 30_000;

/// The client capability that scopes run events (`agent`, `chat`) to the sessions the
/// connection follows (`sessions.messages.subscribe`).
pub const SESSION_SCOPED_EVENTS_CAP: &str = "session-scoped-events";

/// Event names loopgate emits.
pub mod events {
    pub const CONNECT_CHALLENGE: &str = "connect.challenge";
    pub const AGENT: &str = "agent";
    pub const CHAT: &str = "chat";
    pub const TICK: &str = "tick";
    pub const SHUTDOWN: &str = "shutdown";
    /// Session index changes, to connections that called `sessions.subscribe`.
    pub const SESSIONS_CHANGED: &str = "sessions.changed";
    /// The live connections, after one connects or leaves.
    pub const PRESENCE: &str = "presence";
    /// A message recorded in a session's transcript.
    pub const SESSION_MESSAGE: &str = "session.message";
    /// A session-wide operation (a compaction) starts or ends.
    pub const SESSION_OPERATION: &str = "session.operation";
    /// An `exec` waits for an operator, and was decided (to `operator.approvals`).
    pub const EXEC_APPROVAL_REQUESTED: &str = "exec.approval.requested";
    pub const EXEC_APPROVAL_RESOLVED: &str = "exec.approval.resolved";
    /// A stuck-session classification or recovery step (to `operator.read`; loopgate's).
    pub const DIAGNOSTIC: &str = "diagnostic";
    /// Events advertised in `hello-ok.features.events`.
    pub const ADVERTISED: &[&str] = &[
        CONNECT_CHALLENGE,
        AGENT,
        CHAT,
        SESSIONS_CHANGED,
        SESSION_MESSAGE,
        SESSION_OPERATION,
        EXEC_APPROVAL_REQUESTED,
        EXEC_APPROVAL_RESOLVED,
        DIAGNOSTIC,
        PRESENCE,
        TICK,
        SHUTDOWN,
    ];
}

/// Top-level error codes of `ErrorShape.code`.
pub mod codes {
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    pub const FORBIDDEN: &str = "FORBIDDEN";
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    pub const NOT_PAIRED: &str = "NOT_PAIRED";
}

/// A client request frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    #[serde(
        default,
        rename = "expectedProfileId",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_profile_id: Option<String>,
}

impl RequestFrame {
    pub fn new(id: impl Into<String>, method: Method, params: Value) -> Self {
        Self {
            kind: "req".into(),
            id: id.into(),
            method: method.as_str().into(),
            params: Some(params),
            traceparent: None,
            expected_profile_id: None,
        }
    }
}

/// Why an inbound text could not be used as a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not a request frame (e.g. a `res`, or missing fields). `id` is set when the
    /// frame carried a usable one.
    #[error("{reason}")]
    Invalid { id: Option<String>, reason: String },
}

/// Parses one inbound client frame. Unknown frame types (e.g. `cancel`) are reported as
/// `Ok(None)` so callers can ignore them.
pub fn parse_request(text: &str) -> Result<Option<RequestFrame>, FrameError> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(not_json(text, e)),
    };
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
        Some("req") => {}
        Some("cancel") => return Ok(None),
        Some(other) => {
            return Err(FrameError::Invalid {
                id,
                reason: format!("unexpected frame type {other:?}"),
            })
        }
        None => {
            return Err(FrameError::Invalid {
                id,
                reason: "missing frame type".into(),
            })
        }
    }
    let frame: RequestFrame = serde_json::from_value(value).map_err(|e| FrameError::Invalid {
        id: id.clone(),
        reason: e.to_string(),
    })?;
    if frame.id.is_empty() {
        return Err(FrameError::Invalid {
            id: None,
            reason: "id must be a non-empty string".into(),
        });
    }
    if frame.method.is_empty() {
        return Err(FrameError::Invalid {
            id,
            reason: "method must be a non-empty string".into(),
        });
    }
    if frame.traceparent.as_ref().is_some_and(|t| t.len() > 128) {
        return Err(FrameError::Invalid {
            id,
            reason: "traceparent longer than 128 characters".into(),
        });
    }
    Ok(Some(frame))
}

/// Why `text` did not parse: JSON with a lone surrogate escape is answered as an invalid
/// request of its id (when it has one); anything else is not JSON.
fn not_json(text: &str, e: serde_json::Error) -> FrameError {
    let Some((clean, unit)) = surrogates::replace_lone_surrogates(text) else {
        return FrameError::NotJson(e.to_string());
    };
    let Ok(value) = serde_json::from_str::<Value>(&clean) else {
        return FrameError::NotJson(e.to_string());
    };
    FrameError::Invalid {
        id: value
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        reason: format!(
            "a string holds the lone surrogate \\u{unit:04x}, which is not Unicode text (surrogates come in pairs)"
        ),
    }
}

/// The error object of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorShape {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ErrorShape {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            details: None,
            retryable: None,
            retry_after_ms: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST, message)
    }

    pub fn unavailable(message: impl Into<String>, retry_after_ms: Option<u64>) -> Self {
        Self {
            retryable: Some(true),
            retry_after_ms,
            ..Self::new(codes::UNAVAILABLE, message)
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// A response frame. A request may get two (`agent`: accepted, then final).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorShape>,
}

impl ResponseFrame {
    pub fn ok(id: impl Into<String>, payload: Value) -> Self {
        Self {
            kind: "res".into(),
            id: id.into(),
            ok: true,
            payload: Some(payload),
            error: None,
        }
    }

    pub fn err(id: impl Into<String>, error: ErrorShape) -> Self {
        Self {
            kind: "res".into(),
            id: id.into(),
            ok: false,
            payload: None,
            error: Some(error),
        }
    }

    /// A failed response that still carries a payload (e.g. a failed `agent` final).
    pub fn err_with_payload(id: impl Into<String>, payload: Value, error: ErrorShape) -> Self {
        Self {
            payload: Some(payload),
            ..Self::err(id, error)
        }
    }
}

/// An event frame. `seq` is per connection; `connect.challenge` carries none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventFrame {
    #[serde(rename = "type")]
    pub kind: String,
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_version: Option<Value>,
}

impl EventFrame {
    pub fn new(event: &str, payload: Value, seq: Option<u64>) -> Self {
        Self {
            kind: "event".into(),
            event: event.into(),
            payload: Some(payload),
            seq,
            state_version: None,
        }
    }
}

/// Any frame a server sends, as a client decodes it.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerFrame {
    Res(ResponseFrame),
    Event(EventFrame),
}

/// Parses a frame received from a server (used by the CLI and test clients).
pub fn parse_server_frame(text: &str) -> Result<ServerFrame, FrameError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| FrameError::NotJson(e.to_string()))?;
    let invalid = |reason: String| FrameError::Invalid { id: None, reason };
    match value.get("type").and_then(Value::as_str) {
        Some("res") => serde_json::from_value(value)
            .map(ServerFrame::Res)
            .map_err(|e| invalid(e.to_string())),
        Some("event") => serde_json::from_value(value)
            .map(ServerFrame::Event)
            .map_err(|e| invalid(e.to_string())),
        other => Err(invalid(format!("unexpected frame type {other:?}"))),
    }
}

/// `connect` params (validated loosely: unknown fields are tolerated, the closed enums of
/// `client.id` and `client.mode` are checked by the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectParams {
    pub min_protocol: u32,
    pub max_protocol: u32,
    pub client: ClientInfo,
    #[serde(default)]
    pub caps: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Value>,
}

/// `connect.client`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    pub id: String,
    pub version: String,
    pub platform: String,
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

impl ClientInfo {
    /// A client named by its id, version, platform and mode, nothing else.
    pub fn new(id: &str, version: &str, platform: &str, mode: &str) -> Self {
        ClientInfo {
            id: id.to_owned(),
            version: version.to_owned(),
            platform: platform.to_owned(),
            mode: mode.to_owned(),
            display_name: None,
            instance_id: None,
            device_family: None,
            model_identifier: None,
            build_id: None,
        }
    }
}

/// `connect.device`: a device identity and its signature over the connect. The server reads
/// it field by field (each malformed field has its own refusal); clients build it with this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceProof {
    /// Hex SHA-256 of the raw Ed25519 public key.
    pub id: String,
    /// The raw public key, base64url without padding (or an SPKI PEM).
    pub public_key: String,
    /// Over the `v3|...` (or `v2|...`) payload, base64url without padding.
    pub signature: String,
    /// Milliseconds since the epoch.
    pub signed_at: i64,
    /// The `connect.challenge` nonce.
    pub nonce: String,
}

/// `connect.auth`. Secrets are redacted from `Debug`.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<String>,
}

impl std::fmt::Debug for ConnectAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let red = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("ConnectAuth")
            .field("token", &red(&self.token))
            .field("password", &red(&self.password))
            .field("device_token", &red(&self.device_token))
            .field("bootstrap_token", &red(&self.bootstrap_token))
            .finish()
    }
}

/// Closed enum of `client.id` values.
pub const CLIENT_IDS: &[&str] = &[
    "webchat-ui",
    "openclaw-control-ui",
    "openclaw-browser-copilot",
    "openclaw-tui",
    "webchat",
    "cli",
    "gateway-client",
    "openclaw-macos",
    "openclaw-linux",
    "openclaw-ios",
    "openclaw-watchos",
    "openclaw-android",
    "node-host",
    "openclaw-worker",
    "test",
    "fingerprint",
    "openclaw-probe",
];

/// Closed enum of `client.mode` values.
pub const CLIENT_MODES: &[&str] = &[
    "webchat", "cli", "ui", "backend", "node", "worker", "probe", "test",
];

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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Value>>,
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
    pub fast_mode: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_auto_on_seconds: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_channel: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_to: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_account_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub originating_thread_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_bindings: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_context: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_leaf_entry_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_routing_contract: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_permission_mode: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_tool_overrides: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_command_interpretation: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_input_provenance: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_provenance_receipt: Option<Value>,
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
    pub cursor: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_run_ids: Option<Vec<String>>,
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
    /// Guards, accepted and not checked (as for `sessions.reset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_marked_unread_at: Option<Value>,
}

/// A field that may be absent (`None`), `null` (`Some(None)`) or set.
mod double_option {
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
    pub keys: Vec<String>,
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
    pub archived: Option<Value>,
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
    pub project_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_dir: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<Value>,
    /// Boards and people (OpenClaw's dashboards and activity views): loopgate's sessions
    /// have neither, so a filter on them matches none and the include flags add nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_board: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_face: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_people: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_first: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involving_me: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_relation: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relationship: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involving_profile_id: Option<Value>,
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
    pub expected_lifecycle_revision: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_session_updated_at: Option<Value>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn method_names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(*m));
        }
        assert_eq!(Method::parse("nope"), None);
        assert!(!Method::advertised().any(|m| m == Method::Connect));
    }

    #[test]
    fn parses_request_and_rejects_bad_frames() {
        let f = parse_request(r#"{"type":"req","id":"1","method":"health","params":{}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(f.method, "health");
        assert!(matches!(
            parse_request("{nope"),
            Err(FrameError::NotJson(_))
        ));
        assert!(matches!(
            parse_request(r#"{"type":"res","id":"1","ok":true}"#),
            Err(FrameError::Invalid { .. })
        ));
        // Closed object: unknown top-level fields are rejected, the id is still reported.
        match parse_request(r#"{"type":"req","id":"7","method":"x","extra":1}"#) {
            Err(FrameError::Invalid { id, .. }) => assert_eq!(id.as_deref(), Some("7")),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(parse_request(r#"{"type":"cancel","id":"1"}"#), Ok(None));
    }

    #[test]
    fn agent_params_are_closed() {
        let ok: AgentParams = serde_json::from_value(json!({
            "message": "hi", "idempotencyKey": "k", "agentId": "main", "deliver": false, "timeout": 600
        }))
        .unwrap();
        assert_eq!(ok.timeout, Some(600));
        let bad = serde_json::from_value::<AgentParams>(json!({
            "message": "hi", "idempotencyKey": "k", "bogus": 1
        }));
        assert!(bad.is_err());
    }

    #[test]
    fn error_shape_serializes_camel_case() {
        let e = ErrorShape::unavailable("busy", Some(500));
        let v = serde_json::to_value(ResponseFrame::err("9", e)).unwrap();
        assert_eq!(
            v,
            json!({"type":"res","id":"9","ok":false,
                   "error":{"code":"UNAVAILABLE","message":"busy","retryable":true,"retryAfterMs":500}})
        );
    }
}
