//! OpenClaw Gateway protocol v4: the JSON frames clients exchange with the supervisor.
//!
//! One JSON object per frame: over WebSocket one text message per frame, over the unix socket
//! one line per frame (newline-delimited JSON). Request / response / event envelopes, the
//! `ErrorShape`, the connect handshake and the params and results of the methods loopgate
//! implements. Method names are defined once, in [`Method`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod absent;
mod agent_files;
mod approvals;
mod attachments;
mod catalog;
mod commands;
mod config;
mod cron;
mod devices;
mod diagnostics;
mod frames;
mod health;
mod hello;
mod ignored;
mod methods;
mod params;
mod resolve;
mod results;
mod resume;
mod run;
mod scope;
mod sessions;
pub mod shape;
mod skills;
mod surrogates;
mod tools_catalog;
mod usage;
pub use absent::*;
pub use agent_files::*;
pub use approvals::*;
pub use attachments::*;
pub use catalog::*;
pub use commands::*;
pub use config::*;
pub use cron::*;
pub use devices::*;
pub use diagnostics::*;
pub use frames::*;
pub use health::*;
pub use hello::*;
pub use ignored::{AnyParams, Capped, Ignored};
pub use methods::{m, ChatHistoryResult, Done, Method, MethodSpec, Never};
pub use params::*;
pub use resolve::*;
pub use results::*;
pub use resume::*;
pub use run::*;
pub use scope::{covers, Scope, MODEL_CHANGE};
pub use sessions::*;
pub use shape::{Limits, TooComplex};
pub use skills::*;
pub use tools_catalog::*;
pub use usage::*;

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
    /// A scheduler job added, started, finished, scheduled, updated or removed.
    pub const CRON: &str = "cron";
    /// Session index changes, to connections that called `sessions.subscribe`.
    pub const SESSIONS_CHANGED: &str = "sessions.changed";
    /// The live connections, after one connects or leaves.
    pub const PRESENCE: &str = "presence";
    /// A message recorded in a session's transcript.
    pub const SESSION_MESSAGE: &str = "session.message";
    /// The config file was written over the Gateway (`config.patch`, `config.apply`).
    pub const CONFIG_CHANGED: &str = "config.changed";
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
        CONFIG_CHANGED,
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
