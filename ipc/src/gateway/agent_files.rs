//! `agents.files.list|get|set`: an agent's bootstrap files, as OpenClaw answers them
//! (operator-surface §9).

use serde::{Deserialize, Serialize};

/// `agents.files.list` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentFilesListParams {
    pub agent_id: String,
}

/// `agents.files.get` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentFilesGetParams {
    pub agent_id: String,
    pub name: String,
}

/// `agents.files.set` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentFilesSetParams {
    pub agent_id: String,
    pub name: String,
    pub content: String,
    /// The SHA-256 (hex) the file had when read: the write is refused if it changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_hash: Option<String>,
}

/// One file, as listed or read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFile {
    pub name: String,
    pub path: String,
    pub missing: bool,
    /// A missing file that a workspace often lacks (`SOUL.md`, `USER.md`, `MEMORY.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_absent: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// The answer to `agents.files.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFilesListResult {
    pub agent_id: String,
    pub workspace: String,
    pub files: Vec<AgentFile>,
}

/// The answer to `agents.files.get` and `agents.files.set`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFileResult {
    /// `agents.files.set` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    pub agent_id: String,
    pub workspace: String,
    pub file: AgentFile,
}

/// `details` of `agents.files.set`'s conflict refusal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFileConflict {
    /// `agent_file_conflict`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub current_hash: Option<String>,
}

/// `agents.create` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsCreateParams {
    /// The agent's name; its id is derived from it (`Ops Probe` → `ops-probe`).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// `<provider>/<model>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Written into the agent's `IDENTITY.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// Accepted; loopgate keeps no avatar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

/// The answer to `agents.create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsCreateResult {
    pub ok: bool,
    pub agent_id: String,
    pub name: String,
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `agents.update` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsUpdateParams {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A model, or `null`: the agents' default again.
    #[serde(
        default,
        with = "super::params::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<Option<String>>,
    /// Accepted; loopgate has one runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_runtime: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

/// The answer to `agents.update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsUpdateResult {
    pub ok: bool,
    pub agent_id: String,
}

/// `agents.delete` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsDeleteParams {
    pub agent_id: String,
    /// Move the agent's files to the state directory's trash (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_files: Option<bool>,
}

/// The answer to `agents.delete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsDeleteResult {
    pub ok: bool,
    pub agent_id: String,
    pub removed_bindings: u32,
    pub removed: Vec<RemovedPath>,
    pub failed: Vec<RemovedPath>,
}

/// A path `agents.delete` dealt with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemovedPath {
    pub path: String,
    /// `trash` (moved to `<state>/trash/`), `missing`, `kept` (a workspace outside the state
    /// directory: the operator's, left in place), or for `failed` the error.
    pub method: String,
}
