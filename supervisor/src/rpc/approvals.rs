//! `exec.approval.list` and `exec.approval.resolve` (scope `operator.approvals`), in
//! OpenClaw's shapes; the registry is the control actor's (`control::approvals`).

use super::*;
use ipc::approval::ApprovalDecision;
use ipc::gateway::{AnyParams, ExecApprovalResolveParams};

pub(super) async fn exec_approval_list(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    if params::<AnyParams>(&req, out).await.is_none() {
        return;
    }
    match gw.control.approval_list().await {
        Ok(list) => out.ok_with(&req.id, &list).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

pub(super) async fn exec_approval_resolve(
    gw: &Arc<Gateway>,
    session: &Session,
    req: RequestFrame,
    out: &Out,
) {
    let Some(p) = params::<ExecApprovalResolveParams>(&req, out).await else {
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
        Ok(Ok(())) => out.ok_with(&req.id, &json!({"ok": true})).await,
        Ok(Err(e)) => out.err(&req.id, e).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}
