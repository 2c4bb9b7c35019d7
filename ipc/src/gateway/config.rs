//! `config.patch` and `config.apply`: their params (closed, as OpenClaw's) and answer, and
//! the `config.changed` event. loopgate's config is its own TOML file: `raw` is a JSON5
//! merge patch over its parse (`config.patch`) or the whole TOML text (`config.apply`).

use serde::{Deserialize, Serialize};

/// `config.set` params. Closed, as OpenClaw's: the whole config, as the file's TOML text (the
/// Control UI's raw view) or as one JSON5 object (its form view), with `baseHash`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigSetParams {
    pub raw: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_hash: Option<String>,
}

/// `config.patch` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigPatchParams {
    /// A JSON5 object: objects merge, `null` deletes, anything else replaces.
    pub raw: String,
    /// `config.get`'s `hash`: the write is refused unless the file still has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_hash: Option<String>,
    /// Accepted for OpenClaw's clients; a TOML array is always replaced whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_paths: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// Said in the answer's sentinel and the gateway's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How long the gateway waits before it restarts itself for a change that needs it
    /// (`requiresRestart`); capped at [`MAX_RESTART_DELAY_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_delay_ms: Option<u64>,
}

/// The longest `restartDelayMs` a config write is waited for.
pub const MAX_RESTART_DELAY_MS: u64 = 60_000;

/// `config.apply` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigApplyParams {
    /// The whole file, as TOML (`config.get`'s `raw`, redacted values kept as they are).
    pub raw: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_delay_ms: Option<u64>,
}

/// The answer to a config write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigWriteResult {
    pub ok: bool,
    pub path: String,
    /// The file's new hash (its old one for a no-op): `config.get`'s next `hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The file's parse after the write, secrets redacted.
    pub config: serde_json::Value,
    /// `config.patch`: the dotted paths whose values changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_paths: Option<Vec<String>>,
    /// `config.patch`: nothing changed and nothing was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noop: Option<bool>,
    /// What was written, as OpenClaw's answers say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<ConfigSentinel>,
}

/// `sentinel` of a config write's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSentinel {
    pub persisted: bool,
    pub payload: SentinelPayload,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentinelPayload {
    /// `config-patch` or `config-apply`.
    pub kind: String,
    pub status: String,
    pub ts: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub stats: SentinelStats,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentinelStats {
    /// `config.patch` or `config.apply`.
    pub mode: String,
    /// The config file.
    pub root: String,
    /// Only a listener change (`gateway.port`, `gateway.bind`) needs a restart; everything
    /// else is in effect when the answer is sent.
    pub requires_restart: bool,
}

/// `shutdown`: the gateway stops serving (`reason` `stop`, `drain` or `restart`); a restart
/// says how soon it expects to be back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShutdownEvent {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_expected_ms: Option<u64>,
}

/// `config.changed`: the config file was written over the Gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigChanged {
    pub path: String,
    pub hash: String,
    pub ts: u64,
}

/// `details` of a refused config write: what is wrong, where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigIssues {
    pub issues: Vec<ConfigIssue>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigIssue {
    /// The dotted key (empty when the text as a whole is refused).
    pub path: String,
    pub message: String,
}

/// The answer to `config.schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSchemaResult {
    /// JSON Schema draft-07 of the config file's keys (loopgate's TOML), generated from the
    /// config's own types.
    pub schema: serde_json::Value,
    /// By dotted path; loopgate keeps its hints in the schema's descriptions.
    pub ui_hints: serde_json::Map<String, serde_json::Value>,
    pub version: String,
    pub generated_at: String,
}

/// `config.schema.lookup` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigSchemaLookupParams {
    /// A dotted key (`agents.defaults.timeout_seconds`); `*` stands for a map's key.
    pub path: String,
}

/// The answer to `config.schema.lookup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSchemaLookupResult {
    pub path: String,
    /// The node, its own children shown by their type only.
    pub schema: serde_json::Value,
    /// `hot` (applied by a reload, agents' workers restarted between runs) or `restart`
    /// (the listener: applies after the gateway restarts).
    pub reload_kind: String,
    pub hint: Option<serde_json::Value>,
    pub hint_path: Option<String>,
    pub children: Vec<ConfigSchemaChild>,
}

/// One child key of a `config.schema.lookup` node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSchemaChild {
    pub key: String,
    pub path: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<serde_json::Value>,
    pub reload_kind: String,
}
