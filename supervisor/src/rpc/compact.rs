//! `sessions.compact`: compact a session's context now (the worker summarizes with the
//! agent's model and records it through the writer fence; see `worker::agent::compact_now`).

use super::*;
use ipc::control::SessionReply;
use ipc::gateway::{
    CompactionDone, SessionOperation, SessionsCompactParams, SessionsCompactResult,
};

pub(super) async fn sessions_compact(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsCompactParams,
) -> Answer<SessionsCompactResult> {
    if p.max_lines.is_some() {
        let msg = "invalid sessions.compact params: maxLines (trimming the transcript) is not supported; compaction summarizes the older messages instead";
        return Err(ErrorShape::invalid(msg));
    }
    let route = routed(gw, Method::SessionsCompact, &p.key, p.agent_id.as_deref())?;
    compact_session(gw, out, route).await
}

/// Compacts the session's context now (`sessions.compact`, `/compact`), telling
/// subscribers as it starts and ends.
pub(super) async fn compact_session(
    gw: &Arc<Gateway>,
    out: &Out,
    route: Route,
) -> Answer<SessionsCompactResult> {
    // The lane's own check: a run in progress or queued (the worker checks again, and the
    // writer fence once more when the summary is recorded).
    let active = gw.control.active_runs().await.unwrap_or_default();
    if active
        .get(&route.session_key)
        .is_some_and(|r| !r.is_empty())
    {
        let msg = format!(
            "Session {} has an active run; retry after it finishes.",
            route.session_key
        );
        return Err(ErrorShape::invalid(msg));
    }
    let operation_id = uuid::Uuid::new_v4().to_string();
    let op_event =
        |phase: &str, completed: Option<bool>, reason: Option<String>| SessionOperation {
            operation_id: operation_id.clone(),
            operation: "compact".into(),
            phase: phase.into(),
            session_key: route.session_key.clone(),
            agent_id: route.agent_id.clone(),
            ts: now_ms(),
            completed,
            reason,
        };
    gw.hub
        .publish_deferred(&crate::events::Deferred::session_operation(&op_event(
            "start", None, None,
        )));
    let op = SessionOp::Compact {
        session_key: route.session_key.clone(),
    };
    let answer = session_op(gw, out, route.agent_id.clone(), op).await;
    let (completed, reason) = match &answer {
        Ok(SessionReply::Compact {
            compacted, reason, ..
        }) => (*compacted, reason.clone()),
        Ok(_) => (false, Some("unexpected answer".into())),
        Err(e) => (false, Some(e.message.clone())),
    };
    gw.hub
        .publish_deferred(&crate::events::Deferred::session_operation(&op_event(
            "end",
            Some(completed),
            reason,
        )));
    match answer {
        Ok(SessionReply::Compact {
            compacted,
            reason,
            messages,
            tokens_before,
            tokens_after,
        }) => {
            if compacted {
                if let Ok(row) = session_info(gw, &route).await {
                    let mut ev = SessionsChanged::changed("compact", now_ms(), row);
                    ev.compacted = Some(true);
                    gw.hub
                        .publish_deferred(&crate::events::Deferred::sessions_changed(&ev));
                }
            }
            let result = SessionsCompactResult {
                // OpenClaw's no-op answer is `ok: false` inside an ok frame.
                ok: compacted
                    || matches!(reason.as_deref(), Some("no transcript" | "no sessionId")),
                key: route.session_key,
                compacted,
                reason,
                result: compacted.then_some(CompactionDone {
                    messages_summarized: messages,
                    tokens_before,
                    tokens_after,
                }),
            };
            Ok(result)
        }
        Ok(other) => Err(unexpected_reply(&other)),
        Err(e) => Err(session_error(e)),
    }
}
