//! Device tokens: `device.pair.list`, `device.token.rotate`, `device.token.revoke`.

use serde::{Deserialize, Serialize};

/// `device.pair.list` params (none). Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePairListParams {}

/// `device.pair.list`: loopgate pairs local devices silently, so nothing is ever pending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicePairListResult {
    pub pending: Vec<serde_json::Value>,
    pub paired: Vec<PairedDevice>,
}

/// A device that was issued a token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairedDevice {
    pub device_id: String,
    pub client_id: String,
    pub client_mode: String,
    pub platform: String,
    pub roles: Vec<String>,
    pub scopes: Vec<String>,
    pub created_at_ms: u64,
    pub approved_via: String,
    /// A connection from it is open now.
    pub connected: bool,
    pub tokens: Vec<TokenSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenSummary {
    pub role: String,
    pub scopes: Vec<String>,
    pub created_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at_ms: Option<u64>,
}

/// `device.token.revoke` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceTokenRevokeParams {
    pub device_id: String,
    pub role: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTokenRevokeResult {
    pub device_id: String,
    pub role: String,
    pub revoked_at_ms: u64,
}

/// `device.token.rotate` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceTokenRotateParams {
    pub device_id: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTokenRotateResult {
    pub device_id: String,
    pub role: String,
    /// Only to the device itself (`tokenDelivery: "in-band"`); another caller is not given
    /// it (`withheld-cross-device`): the device gets a fresh one when it next connects
    /// with the gateway token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub scopes: Vec<String>,
    pub rotated_at_ms: u64,
    pub token_delivery: String,
}
