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

/// `exec.approval.list`: the execs waiting for a decision (the control actor's registry).
pub(super) async fn exec_approval_list(control: &ControlHandle) -> Answer<Vec<ExecApproval>> {
    control.approval_list().await.map_err(control_error)
}

/// Who decided, as the log and the `resolved` event say it: the caller's device, else its
/// client id, else its connection.
fn decided_by(device_id: Option<&str>, client_id: Option<&str>, conn_id: &str) -> Option<String> {
    Some(device_id.or(client_id).unwrap_or(conn_id).to_owned())
}

/// `exec.approval.resolve`: the operator's decision on a pending exec, to the control actor.
pub(super) async fn exec_approval_resolve(
    control: &ControlHandle,
    session: &Session,
    p: ExecApprovalResolveParams,
) -> Answer<Done> {
    let decision = ApprovalDecision::parse(&p.decision)
        .ok_or_else(|| ErrorShape::invalid("invalid decision"))?;
    let by = decided_by(
        session.device_id.as_deref(),
        session.presence.client_id.as_deref(),
        &session.conn_id,
    );
    control
        .approval_resolve(p.id, decision, by)
        .await
        .map_err(control_error)??;
    Ok(Done { ok: true })
}

/// `loopgate.exec.allowlist`: the `allow-always` patterns the gateway keeps (asked of the
/// control actor).
pub(super) async fn exec_allowlist(control: &ControlHandle) -> Answer<ExecAllowlistResult> {
    let rows = control.allowed_list().await.map_err(control_error)?;
    Ok(ExecAllowlistResult {
        patterns: rows
            .into_iter()
            .map(|(agent_id, pattern)| KeptPattern { agent_id, pattern })
            .collect(),
    })
}

/// Whether the agent has a worker that holds its kept patterns (one that is up or coming
/// up), which must restart to forget one.
fn holds_patterns(workers: &[ipc::gateway::WorkerStatus], agent_id: &str) -> bool {
    workers
        .iter()
        .any(|w| w.agent_id == agent_id && (w.state == "ready" || w.state == "spawning"))
}

/// `loopgate.exec.allowlist.remove {agentId, pattern}`: the control actor forgets a kept
/// pattern; the agent's running worker restarts gracefully without it (it holds the pattern
/// until then).
pub(super) async fn exec_allowlist_remove(
    control: &ControlHandle,
    p: ExecAllowlistRemoveParams,
) -> Answer<ExecAllowlistRemoveResult> {
    let removed = control
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
        && match control.status(0).await {
            Ok(s) => holds_patterns(&s.workers, &p.agent_id),
            Err(_) => false,
        };
    let restarted = running && control.restart_worker(p.agent_id, false).await.is_ok();
    Ok(ExecAllowlistRemoveResult { removed, restarted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decider_is_named_by_device_else_client_else_connection() {
        assert_eq!(
            decided_by(Some("dev1"), Some("control-ui"), "c7").as_deref(),
            Some("dev1")
        );
        assert_eq!(
            decided_by(None, Some("control-ui"), "c7").as_deref(),
            Some("control-ui")
        );
        assert_eq!(decided_by(None, None, "c7").as_deref(), Some("c7"));
    }

    #[test]
    fn forgetting_a_pattern_restarts_only_a_worker_that_holds_it() {
        let w = |agent: &str, state: &str| ipc::gateway::WorkerStatus {
            agent_id: agent.into(),
            pid: None,
            state: state.into(),
            restarts: 0,
            runs_in_flight: 0,
            uptime_ms: None,
            last_exit: None,
            rss_bytes: None,
            failed_reason: None,
        };
        assert!(holds_patterns(
            &[w("ops", "idle"), w("main", "ready")],
            "main"
        ));
        assert!(holds_patterns(&[w("main", "spawning")], "main"));
        for state in ["idle", "draining", "backoff", "failed", "exited"] {
            assert!(!holds_patterns(&[w("main", state)], "main"), "{state}");
        }
        assert!(!holds_patterns(&[w("ops", "ready")], "main"));
    }
}
