//! `loopgate approvals [list | allow ID [--always] | deny ID | patterns | revoke AGENT
//! PATTERN]`: commands waiting for an operator (`tools.exec.security = "ask"`), over
//! `exec.approval.list` and `exec.approval.resolve`; the commands allowed for good, over
//! `loopgate.exec.allowlist` and `loopgate.exec.allowlist.remove`.

use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{
    ExecAllowlistRemoveParams, ExecAllowlistRemoveResult, ExecAllowlistResult, ExecApproval,
    ExecApprovalResolveParams, Method,
};
use ipc::text::printable;

use super::{emit, fail, Client};

pub async fn list(socket: &Path, as_json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let raw = match client
        .call(Method::ExecApprovalList, serde_json::json!({}))
        .await
    {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if as_json {
        emit(&format!("{raw}\n"));
        return ExitCode::SUCCESS;
    }
    let pending: Vec<ExecApproval> = match serde_json::from_value(raw) {
        Ok(p) => p,
        Err(e) => return fail(format!("unexpected exec.approval.list reply: {e}")),
    };
    if pending.is_empty() {
        emit("No exec approvals are pending.\n");
        return ExitCode::SUCCESS;
    }
    emit(&super::render::approvals(&pending));
    ExitCode::SUCCESS
}

pub async fn resolve(socket: &Path, id: String, decision: &str) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = ExecApprovalResolveParams {
        id: id.clone(),
        decision: decision.to_owned(),
        reviewer: None,
        grant_expires_in_days: None,
    };
    match client
        .call(
            Method::ExecApprovalResolve,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(_) => {
            emit(&format!("{id}: {decision}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub async fn patterns(socket: &Path, as_json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let raw = match client
        .call(Method::ExecAllowlistGet, serde_json::json!({}))
        .await
    {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if as_json {
        emit(&format!("{raw}\n"));
        return ExitCode::SUCCESS;
    }
    let kept: ExecAllowlistResult = match serde_json::from_value(raw) {
        Ok(k) => k,
        Err(e) => return fail(format!("unexpected loopgate.exec.allowlist reply: {e}")),
    };
    if kept.patterns.is_empty() {
        emit("No commands are allowed for good.\n");
        return ExitCode::SUCCESS;
    }
    let mut out = format!("{:<16} {}\n", "AGENT", "PATTERN");
    for p in &kept.patterns {
        out.push_str(&format!(
            "{:<16} {}\n",
            printable(&p.agent_id),
            printable(&p.pattern)
        ));
    }
    emit(&out);
    ExitCode::SUCCESS
}

pub async fn revoke(socket: &Path, agent: String, pattern: String) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = ExecAllowlistRemoveParams {
        agent_id: agent.clone(),
        pattern: pattern.clone(),
    };
    let raw = match client
        .call(
            Method::ExecAllowlistRemove,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    match serde_json::from_value::<ExecAllowlistRemoveResult>(raw) {
        Ok(r) if !r.removed => fail(format!(
            "agent {agent:?} has no command allowed for good as {pattern:?} (see `loopgate approvals patterns`)"
        )),
        Ok(r) => {
            let worker = if r.restarted {
                "; its worker restarted without it"
            } else {
                ""
            };
            emit(&format!("{agent}: {pattern}: revoked{worker}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("unexpected loopgate.exec.allowlist.remove reply: {e}")),
    }
}
