//! `hello-ok`: what a client learns when `connect` succeeds.

use serde::{Deserialize, Serialize};

use super::{PresenceEntry, SessionDefaults};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloOk {
    /// `hello-ok`.
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u32,
    pub server: HelloServer,
    pub features: Features,
    pub snapshot: Snapshot,
    pub auth: HelloAuth,
    pub policy: Policy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloServer {
    pub version: String,
    pub conn_id: String,
    /// `configured` when this gateway serves an operator-installed Control UI: the page then
    /// skips its check that the gateway is the build it came with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_ui_build_source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// Exactly the methods implemented.
    pub methods: Vec<String>,
    pub events: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub presence: Vec<PresenceEntry>,
    /// Empty: clients call `health`.
    pub health: serde_json::Map<String, serde_json::Value>,
    pub state_version: StateVersion,
    pub uptime_ms: u64,
    pub session_defaults: SessionDefaults,
    /// Admin connections only, as OpenClaw: where the gateway keeps its state and config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    /// `token` or `none` (admin connections only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_mode: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateVersion {
    pub presence: u64,
    pub health: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloAuth {
    pub role: String,
    /// The connection's effective scopes.
    pub scopes: Vec<String>,
    /// `token`, `device-token` or `none`.
    pub method: String,
    /// Issued to a device that proved its identity with the gateway token: present it as
    /// `auth.deviceToken` (with the signed device) on later connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub max_payload: usize,
    pub max_buffered_bytes: usize,
    pub tick_interval_ms: u64,
    /// The attachment sizes `chat.send` and `agent` take.
    pub attachments: super::AttachmentPolicy,
}
