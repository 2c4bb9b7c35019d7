//! `exec.approval.list` and `exec.approval.resolve` (scope `operator.approvals`), in
//! OpenClaw's shapes; the registry is the control actor's (`control::approvals`).

use super::*;
use ipc::approval::ApprovalDecision;

pub(super) async fn exec_approval_list(gw: &Arc<Gateway>, req: Request, out: &Out) {
    if params::<m::ExecApprovalList>(&req, out).await.is_none() {
        return;
    }
    match gw.control.approval_list().await {
        Ok(list) => reply::<m::ExecApprovalList>(out, &req.id, &list).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

pub(super) async fn exec_approval_resolve(
    gw: &Arc<Gateway>,
    session: &Session,
    req: Request,
    out: &Out,
) {
    let Some(p) = params::<m::ExecApprovalResolve>(&req, out).await else {
        return;
    };
    let Some(decision) = ApprovalDecision::parse(&p.decision) else {
        return out
            .err(&req.id, ErrorShape::invalid("invalid decision"))
            .await;
    };
    // Who decided, as the log and the `resolved` event say it.
    let by = session
        .device_id
        .clone()
        .or_else(|| session.presence.client_id.clone())
        .or_else(|| Some(session.conn_id.clone()));
    match gw.control.approval_resolve(p.id, decision, by).await {
        Ok(Ok(())) => {
            reply::<m::ExecApprovalResolve>(out, &req.id, &ipc::gateway::Done { ok: true }).await
        }
        Ok(Err(e)) => out.err(&req.id, e).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

/// `loopgate.exec.allowlist`: the `allow-always` patterns the gateway keeps.
pub(super) async fn exec_allowlist(gw: &Arc<Gateway>, req: Request, out: &Out) {
    if params::<m::ExecAllowlistGet>(&req, out).await.is_none() {
        return;
    }
    match gw.control.allowed_list().await {
        Ok(rows) => {
            let result = ipc::gateway::ExecAllowlistResult {
                patterns: rows
                    .into_iter()
                    .map(|(agent_id, pattern)| ipc::gateway::KeptPattern { agent_id, pattern })
                    .collect(),
            };
            reply::<m::ExecAllowlistGet>(out, &req.id, &result).await
        }
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

/// `loopgate.exec.allowlist.remove {agentId, pattern}`: forgets a kept pattern; the agent's
/// running worker restarts gracefully without it (it holds the pattern until then).
pub(super) async fn exec_allowlist_remove(gw: &Arc<Gateway>, req: Request, out: &Out) {
    let Some(p) = params::<m::ExecAllowlistRemove>(&req, out).await else {
        return;
    };
    let removed = match gw.control.disallow(p.agent_id.clone(), p.pattern).await {
        Ok(Ok(removed)) => removed,
        Ok(Err(why)) => {
            return out
                .err(&req.id, ErrorShape::unavailable(why, Some(1000)))
                .await
        }
        Err(e) => return out.err(&req.id, control_error(e)).await,
    };
    let running = removed
        && match gw.control.status(0).await {
            Ok(s) => s
                .workers
                .iter()
                .any(|w| w.agent_id == p.agent_id && (w.state == "ready" || w.state == "spawning")),
            Err(_) => false,
        };
    let restarted = running && gw.control.restart_worker(p.agent_id, false).await.is_ok();
    let result = ipc::gateway::ExecAllowlistRemoveResult { removed, restarted };
    reply::<m::ExecAllowlistRemove>(out, &req.id, &result).await
}
