//! `sessions.resolve` (which session a key, id, label or short id names; the Control UI
//! asks it for the session in its URL) and `sessions.abort` (stop a session's run), in
//! OpenClaw's shapes.

use serde::{Deserialize, Serialize};

/// `sessions.resolve` params. Closed; exactly one of `key`, `sessionId`, `label`, `shortId`,
/// `reference`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsResolveParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `{key, slug?}`: the key is tried as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<SessionReference>,
    /// 8-32 hex digits: the start of the UUID that ends a session key, without dashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug_hint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<super::Ignored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_global: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_unknown: Option<bool>,
    /// No match answers `{ok: false}` instead of an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_missing: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionReference {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
}

/// A session `sessions.resolve` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSession {
    pub key: String,
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// `sessions.resolve` result: `{ok: true, key, agentId, ...}`; `{ok: false, candidates}`
/// when a short id names several (at most 10); `{ok: false}` when nothing matched and
/// `allowMissing` was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsResolveResult {
    pub ok: bool,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub found: Option<ResolvedSession>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<ResolvedSession>>,
}

/// `sessions.abort` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsAbortParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_queued: Option<bool>,
}

/// `sessions.abort` result: the run stopped (`null`: none was running) and `aborted` or
/// `no-active-run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsAbortResult {
    pub ok: bool,
    pub aborted_run_id: Option<String>,
    pub status: String,
}
