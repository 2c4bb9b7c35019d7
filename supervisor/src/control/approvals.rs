//! Pending exec approvals as the control actor keeps them, and how operators see them (the
//! request view, the listed entry, the not-found error). What happens to them is in
//! `decisions.rs`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ipc::approval::{ApprovalDecision, ApprovalRequest};
use ipc::gateway::{ErrorShape, ExecApproval, ExecApprovalRequestView};
use serde_json::json;

/// Pending approvals at most; a request beyond it is denied at once.
pub(super) const MAX_PENDING: usize = 1000;
/// The shortest id prefix `exec.approval.resolve` takes for a whole id.
pub(super) const MIN_PREFIX: usize = 8;
/// A decision repeated this soon after is answered `ok` again (as OpenClaw).
pub(super) const REPEAT_GRACE: Duration = Duration::from_secs(15);
/// How long past its deadline an approval its worker never closed stays listed.
pub(super) const EXPIRY_GRACE_MS: u64 = 5_000;

pub(super) struct Pending {
    pub agent_id: String,
    pub request: ApprovalRequest,
    /// The exact allowlist pattern of the command, if it has one (`allow-always`).
    pub pattern: Option<String>,
}

#[derive(Default)]
pub(super) struct Approvals {
    pub pending: HashMap<String, Pending>,
    /// Recent decisions: `(id, decision, when)`.
    pub decided: VecDeque<(String, ApprovalDecision, Instant)>,
}

/// What `exec.approval.resolve` answers.
pub type ResolveResult = Result<(), ErrorShape>;

pub(super) fn view(p: &Pending) -> ExecApprovalRequestView {
    let mut allowed = vec!["allow-once".to_owned()];
    if p.pattern.is_some() {
        allowed.push("allow-always".into());
    }
    allowed.push("deny".into());
    ExecApprovalRequestView {
        command: p.request.command.clone(),
        command_argv: p.request.argv.clone(),
        cwd: p.request.cwd.clone(),
        host: "gateway".into(),
        security: "allowlist".into(),
        ask: "on-miss".into(),
        agent_id: p.agent_id.clone(),
        session_key: p.request.session_key.clone(),
        run_id: p.request.run_id.clone(),
        allowed_decisions: allowed,
    }
}

pub(super) fn listed(p: &Pending) -> ExecApproval {
    ExecApproval {
        approval_kind: "exec".into(),
        id: p.request.id.clone(),
        request: view(p),
        created_at_ms: p.request.created_at_ms,
        expires_at_ms: p.request.expires_at_ms,
    }
}

pub(super) fn not_found(id: &str) -> ErrorShape {
    ErrorShape::invalid("unknown or expired approval id").with_details(json!({
        "reason": "APPROVAL_NOT_FOUND",
        "id": id,
        "remediation": "list pending approvals with exec.approval.list (loopgate approvals list)",
    }))
}

/// Loaded once at start: `(agent id, pattern)` rows of the gateway db. A pattern kept before
/// allow-always was limited to the safe list, for a program not on it, is named in a warning
/// (it still holds: it was the operator's decision, and `loopgate approvals revoke` ends it).
pub fn by_agent(rows: Vec<(String, String)>) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for (agent, pattern) in rows {
        let unsafe_why = match execpolicy::argv::parse_pattern(&pattern) {
            Ok(p) => execpolicy::safe::check_pattern(&p).err(),
            Err(e) => Some(e),
        };
        if let Some(why) = unsafe_why {
            tracing::warn!(
                agent = agent.as_str(),
                pattern = pattern.as_str(),
                why,
                "A command allowed for good may let the model run any command; revoke it with `loopgate approvals revoke`."
            );
        }
        out.entry(agent).or_default().push(pattern);
    }
    out
}
