//! Exec approvals as OpenClaw's clients see them (`exec.approval.requested` /
//! `exec.approval.resolved` events, `exec.approval.list` / `exec.approval.resolve`), in
//! OpenClaw 2026.9.6's names and shapes (the fields loopgate has data for).

use serde::{Deserialize, Serialize};

use super::Ignored;

/// What an operator sees of a command waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecApprovalRequestView {
    pub command: String,
    /// Its words (it runs without a shell).
    pub command_argv: Vec<String>,
    pub cwd: String,
    /// Always `gateway` (the agent's own host).
    pub host: String,
    /// `allowlist` and `on-miss`: what the agent's `tools.exec.security = "ask"` means.
    pub security: String,
    pub ask: String,
    pub agent_id: String,
    pub session_key: String,
    pub run_id: String,
    /// `allow-once`, `allow-always` (when the command can become a pattern), `deny`.
    pub allowed_decisions: Vec<String>,
}

/// `exec.approval.requested`, and one entry of `exec.approval.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecApproval {
    /// Always `exec`.
    pub approval_kind: String,
    pub id: String,
    pub request: ExecApprovalRequestView,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

/// `exec.approval.resolved`: decided (`resolvedBy`: who), or denied when it expired or its
/// run ended (`resolvedBy: null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecApprovalResolved {
    pub id: String,
    pub decision: String,
    pub resolved_by: Option<String>,
    pub ts: u64,
    pub request: ExecApprovalRequestView,
}

/// `exec.approval.resolve` params. Closed; `id` may be a unique prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecApprovalResolveParams {
    pub id: String,
    pub decision: String,
    /// Accepted, not used (channel reviewers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<Ignored>,
    /// Accepted, not used (grants for automations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_expires_in_days: Option<Ignored>,
}

/// One `allow-always` pattern the gateway keeps (loopgate's `loopgate.exec.allowlist`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptPattern {
    pub agent_id: String,
    pub pattern: String,
}

/// `loopgate.exec.allowlist` result: the patterns operators allowed for good, oldest first
/// per agent (the config's own `allowlist` is not among them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecAllowlistResult {
    pub patterns: Vec<KeptPattern>,
}

/// `loopgate.exec.allowlist.remove` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecAllowlistRemoveParams {
    pub agent_id: String,
    pub pattern: String,
}

/// `loopgate.exec.allowlist.remove` result: whether the pattern was kept, and whether the
/// agent's running worker was restarted without it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecAllowlistRemoveResult {
    pub removed: bool,
    pub restarted: bool,
}
