//! `tools.catalog` and `tools.effective`: the built-in tools as OpenClaw's Control UI lists
//! them (operator-surface §13), from the one tool table (`crate::tools`).

use serde::{Deserialize, Serialize};

/// `tools.catalog` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsCatalogParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Sent by OpenClaw's Control UI; loopgate has no plugin tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_plugins: Option<bool>,
}

/// `tools.effective` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsEffectiveParams {
    pub session_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// A tool profile (`minimal`, `coding`, `messaging`, `full`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolProfile {
    pub id: String,
    pub label: String,
}

/// A group of tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolGroup {
    pub id: String,
    pub label: String,
    /// `core`: built in.
    pub source: String,
    pub tools: Vec<ToolEntry>,
}

/// One tool of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    pub id: String,
    pub label: String,
    pub description: String,
    pub source: String,
    /// `tools.catalog`: the profiles that offer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profiles: Option<Vec<String>>,
    /// `tools.effective`: the description as the model gets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_description: Option<String>,
}

/// The answer to `tools.catalog`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCatalogResult {
    pub agent_id: String,
    pub profiles: Vec<ToolProfile>,
    pub groups: Vec<ToolGroup>,
}

/// The answer to `tools.effective`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsEffectiveResult {
    pub agent_id: String,
    /// `full` when the agent is offered every tool, else `custom` (`tools.allow`).
    pub profile: String,
    pub groups: Vec<ToolGroup>,
}

/// The answer to `usage.status`: the providers' own quota windows (OpenClaw reads them from
/// the providers it has accounts with; none for a provider of one's own).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageStatusResult {
    pub updated_at: u64,
    /// Always empty: loopgate keeps no provider accounts.
    pub providers: Vec<super::Never>,
}
