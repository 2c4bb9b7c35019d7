//! Methods for features loopgate does not have (tasks, talk, updates, progress cards,
//! branches, channels, nodes, heartbeats, slash-command registry, approvals): the answer a
//! gateway with nothing of that kind configured gives, so clients that call them at startup
//! show "none" instead of an error. Params are closed, as OpenClaw's.

use serde::{Deserialize, Serialize};

use super::Ignored;
use serde_json::{Map, Value};

/// `{}`. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// `tasks.list` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TasksListParams {
    pub status: Option<Ignored>,
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
    pub sort_by: Option<String>,
}

/// `tasks.list`: no tasks. Exactly these keys (clients check it against a closed schema).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TasksListResult {
    pub tasks: Vec<Value>,
}

/// `talk.catalog` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TalkCatalogParams {
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// `talk.catalog`: no voice providers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TalkCatalogResult {
    pub modes: Vec<Value>,
    pub transports: Vec<Value>,
    pub brains: Vec<Value>,
    pub speech: Providers,
    pub transcription: ReadyProviders,
    pub realtime: ReadyProviders,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Providers {
    pub providers: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReadyProviders {
    pub ready: bool,
    pub providers: Vec<Value>,
}

/// `update.status` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStatusParams {
    pub refresh_checkout: Option<bool>,
}

/// `update.status`: loopgate does not update itself (the operator's package manager does).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStatusResult {
    pub sentinel: Option<Value>,
    pub update_available: Option<Value>,
}

/// `{sessionKey, agentId?}`. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRefParams {
    pub session_key: String,
    pub agent_id: Option<String>,
}

/// `progressCard.get`: no card.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProgressCardResult {
    pub card: Option<Value>,
}

/// `sessions.branches.list`: transcripts are linear; there are no branches to switch to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BranchesResult {
    pub branches: Vec<Value>,
}

/// `commands.list` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandsListParams {
    pub session_key: Option<String>,
    pub agent_id: Option<String>,
    pub provider: Option<String>,
    pub scope: Option<String>,
    pub include_args: Option<bool>,
}

/// `channels.status` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelsStatusParams {
    pub probe: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub channel: Option<String>,
}

/// `channels.status`: no channels.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelsStatusResult {
    pub ts: u64,
    pub channel_order: Vec<String>,
    pub channel_labels: Map<String, Value>,
    pub channel_detail_labels: Map<String, Value>,
    pub channel_system_images: Map<String, Value>,
    pub channel_meta: Vec<Value>,
    pub channels: Map<String, Value>,
    pub channel_accounts: Map<String, Value>,
    pub channel_default_account_id: Map<String, Value>,
    pub status_issues: Vec<Value>,
}

/// `node.list`: no nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeListResult {
    pub ts: u64,
    pub nodes: Vec<Value>,
}

/// `node.pair.list`: no nodes pending or paired.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodePairListResult {
    pub pending: Vec<Value>,
    pub paired: Vec<Value>,
}

/// `approval.history` params. Closed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalHistoryParams {
    pub cursor: Option<String>,
    pub limit: Option<u32>,
    pub kind: Option<String>,
}

/// `approval.history`: nothing was ever asked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApprovalHistoryResult {
    pub items: Vec<Value>,
}
