//! `sessions.compact`: compact a session's context now (the worker summarizes with the
//! agent's model and records it through the writer fence; see `worker::agent::compact_now`).

use std::collections::HashMap;

use super::*;
use ipc::gateway::{
    CompactionDone, SessionOperation, SessionsCompactParams, SessionsCompactResult,
};
use ipc::session_ops::{CompactOp, CompactReply};

/// Why `sessions.compact` (or `/compact`) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CompactRefused {
    #[error("invalid sessions.compact params: maxLines (trimming the transcript) is not supported; compaction summarizes the older messages instead")]
    MaxLines,
    #[error("Session {0} has an active run; retry after it finishes.")]
    Busy(String),
}

/// What the params ask that loopgate does not do.
fn params_refusal(p: &SessionsCompactParams) -> Option<CompactRefused> {
    p.max_lines.is_some().then_some(CompactRefused::MaxLines)
}

/// The lane's own check (R-C5): a session with a run in progress or queued (`active`, by
/// session key) is not compacted now.
fn busy(active: &HashMap<String, Vec<String>>, session_key: &str) -> Option<CompactRefused> {
    active
        .get(session_key)
        .is_some_and(|r| !r.is_empty())
        .then(|| CompactRefused::Busy(session_key.to_owned()))
}

/// How the operation ended, as its `end` event tells it: completed, or why not.
fn ending(answer: &Result<CompactReply, AskError>) -> (bool, Option<String>) {
    match answer {
        Ok(done) => (done.compacted, done.reason.clone()),
        Err(AskError::Failed(e)) => (false, Some(e.message.clone())),
        Err(AskError::Unexpected) => (false, Some("unexpected answer".into())),
    }
}

/// The answer to a compaction the worker did (`compacted`) or found nothing to do for
/// (`reason`).
fn compact_result(
    key: String,
    compacted: bool,
    reason: Option<String>,
    done: CompactionDone,
) -> SessionsCompactResult {
    SessionsCompactResult {
        // OpenClaw's no-op answer is `ok: false` inside an ok frame.
        ok: compacted || matches!(reason.as_deref(), Some("no transcript" | "no sessionId")),
        key,
        compacted,
        reason,
        result: compacted.then_some(done),
    }
}

/// `sessions.compact`: compacts the session's context now.
pub(super) async fn sessions_compact(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsCompactParams,
) -> Answer<SessionsCompactResult> {
    if let Some(refused) = params_refusal(&p) {
        return Err(ErrorShape::invalid(refused.to_string()));
    }
    let route = routed(
        &gw.config(),
        Method::SessionsCompact,
        &p.key,
        p.agent_id.as_deref(),
    )?;
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
    if let Some(refused) = busy(&active, &route.session_key) {
        return Err(ErrorShape::invalid(refused.to_string()));
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
    let op = CompactOp {
        session_key: route.session_key.clone(),
    };
    let answer = ask(gw, out, route.agent_id.clone(), op).await;
    let (completed, reason) = ending(&answer);
    gw.hub
        .publish_deferred(&crate::events::Deferred::session_operation(&op_event(
            "end",
            Some(completed),
            reason,
        )));
    let CompactReply {
        compacted,
        reason,
        messages,
        tokens_before,
        tokens_after,
    } = answer.map_err(ask_error)?;
    if compacted {
        if let Ok(row) = session_info(gw, &route).await {
            let mut ev = SessionsChanged::changed("compact", now_ms(), row);
            ev.compacted = Some(true);
            gw.hub
                .publish_deferred(&crate::events::Deferred::sessions_changed(&ev));
        }
    }
    let done = CompactionDone {
        messages_summarized: messages,
        tokens_before,
        tokens_after,
    };
    Ok(compact_result(route.session_key, compacted, reason, done))
}

#[cfg(test)]
mod tests;
