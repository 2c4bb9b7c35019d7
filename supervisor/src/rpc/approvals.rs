//! `exec.approval.list` and `exec.approval.resolve` (scope `operator.approvals`), in
//! OpenClaw's shapes, and loopgate's kept `allow-always` patterns; the registry is the
//! control actor's (`control::approvals`). Each takes its params and gives its answer
//! (`serve` answers).

use super::*;
use ipc::approval::ApprovalDecision;
use ipc::gateway::{
    Done, ExecAllowlistRemoveParams, ExecAllowlistRemoveResult, ExecAllowlistResult, ExecApproval,
    ExecApprovalResolveParams, KeptPattern,
};

pub(super) async fn exec_approval_list(gw: &Gateway) -> Answer<Vec<ExecApproval>> {
    gw.control.approval_list().await.map_err(control_error)
}

pub(super) async fn exec_approval_resolve(
    gw: &Gateway,
    session: &Session,
    p: ExecApprovalResolveParams,
) -> Answer<Done> {
    let decision = ApprovalDecision::parse(&p.decision)
        .ok_or_else(|| ErrorShape::invalid("invalid decision"))?;
    // Who decided, as the log and the `resolved` event say it.
    let by = session
        .device_id
        .clone()
        .or_else(|| session.presence.client_id.clone())
        .or_else(|| Some(session.conn_id.clone()));
    gw.control
        .approval_resolve(p.id, decision, by)
        .await
        .map_err(control_error)??;
    Ok(Done { ok: true })
}

/// `loopgate.exec.allowlist`: the `allow-always` patterns the gateway keeps.
pub(super) async fn exec_allowlist(gw: &Gateway) -> Answer<ExecAllowlistResult> {
    let rows = gw.control.allowed_list().await.map_err(control_error)?;
    Ok(ExecAllowlistResult {
        patterns: rows
            .into_iter()
            .map(|(agent_id, pattern)| KeptPattern { agent_id, pattern })
            .collect(),
    })
}

/// `loopgate.exec.allowlist.remove {agentId, pattern}`: forgets a kept pattern; the agent's
/// running worker restarts gracefully without it (it holds the pattern until then).
pub(super) async fn exec_allowlist_remove(
    gw: &Gateway,
    p: ExecAllowlistRemoveParams,
) -> Answer<ExecAllowlistRemoveResult> {
    let removed = gw
        .control
        .disallow(p.agent_id.clone(), p.pattern)
        .await
        .map_err(control_error)?
        .map_err(|e| {
            ErrorShape::unavailable(
                format!("cannot remove the pattern from the gateway db: {e}"),
                Some(1000),
            )
        })?;
    let running = removed
        && match gw.control.status(0).await {
            Ok(s) => s
                .workers
                .iter()
                .any(|w| w.agent_id == p.agent_id && (w.state == "ready" || w.state == "spawning")),
            Err(_) => false,
        };
    let restarted = running && gw.control.restart_worker(p.agent_id, false).await.is_ok();
    Ok(ExecAllowlistRemoveResult { removed, restarted })
}
