//! `sessions.create`: a new session (TUI `/new`, the Control UI's New session), optionally
//! with its first turn.

use super::*;
use ipc::gateway::{CreateResolved, SessionsCreateResult};

/// Whether an option loopgate does not implement was asked for (a default value is not).
pub(super) async fn sessions_create(
    gw: &Arc<Gateway>,
    req: Request,
    out: &Out,
    turn: Option<AdmissionTurn>,
) {
    let Some(p) = params::<m::SessionsCreate>(&req, out).await else {
        return;
    };
    if !p.unsupported.is_empty() {
        let msg = format!(
            "invalid sessions.create params: not supported by loopgate: {}",
            p.unsupported.join(", ")
        );
        return out.err(&req.id, ErrorShape::invalid(msg)).await;
    }
    let first = p
        .message
        .clone()
        .or(p.task.clone())
        .filter(|m| !m.trim().is_empty());
    let run_id = p
        .idempotency_key
        .clone()
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    if let Some(m) = &first {
        if let Some(e) = turn_params_error(m, &run_id, "message must not be empty", false) {
            let msg = format!("invalid sessions.create params: {e}");
            return out.err(&req.id, ErrorShape::invalid(msg)).await;
        }
    }
    let key = p
        .key
        .clone()
        .filter(|k| !k.trim().is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let Some(route) = route_key(gw, &req, out, &key, p.agent_id.as_deref()).await else {
        return;
    };
    let label = p
        .label
        .clone()
        .or(p.display_name.clone())
        .map(|l| l.trim().chars().take(MAX_LABEL_CHARS).collect::<String>())
        .filter(|l| !l.is_empty());
    let now = now_ms();
    let patch = crate::gatewaydb::SessionPatch {
        label: label.map(Some),
        last_read_at: None,
        model_override: None,
        thinking_level: None,
        reasoning_level: None,
        verbose_level: None,
        queue_mode: None,
    };
    // A key that exists is adopted: its row is kept (a new label replaces the old).
    if let Err(e) = gw
        .db
        .patch_session(
            route.session_key.clone(),
            route.agent_id.clone(),
            patch,
            now,
        )
        .await
    {
        let msg = format!("cannot create the session: {e}");
        return out
            .err(&req.id, ErrorShape::unavailable(msg, Some(500)))
            .await;
    }
    let entry = match session_info(gw, &route).await {
        Ok(row) => row,
        Err(e) => return out.err(&req.id, e).await,
    };
    gw.hub
        .publish_deferred(&crate::events::Deferred::sessions_changed(
            &SessionsChanged::changed("create", now, entry.clone()),
        ));
    let resolved = gw
        .config()
        .agent(&route.agent_id)
        .and_then(|a| a.model.clone())
        .map(|m| CreateResolved {
            model_provider: m.provider,
            model: m.model,
        });
    let result = SessionsCreateResult {
        ok: true,
        key: route.session_key.clone(),
        session_id: entry.session_id.clone(),
        entry,
        run_started: false,
        run_id: None,
        status: None,
        run_error: None,
        resolved,
    };
    let Some(message) = first else {
        return reply::<m::SessionsCreate>(out, &req.id, &result).await;
    };
    let admission = Admission {
        turn,
        run_id: run_id.clone(),
        route,
        message,
        extra_system_prompt: None,
        timeout_ms: p.timeout_ms,
        provider: None,
        model: None,
        thinking: None,
        queue_mode: None,
        attachments: Vec::new(),
        images_need_model: false,
        verbose: None,
        block_streaming: Some(false),
    };
    let started = SessionsCreateResult {
        run_started: true,
        run_id: Some(run_id.clone()),
        status: Some("started".into()),
        ..result.clone()
    };
    // A refused first turn still created the session (as OpenClaw: `runError`).
    match admit(gw, out, &req.id, admission, |_| started).await {
        Admitted::Refused(e) => {
            let r = SessionsCreateResult {
                run_error: Some(e),
                ..result
            };
            reply::<m::SessionsCreate>(out, &req.id, &r).await
        }
        Admitted::InFlight { .. } | Admitted::Finished(_) => {
            let r = SessionsCreateResult {
                run_id: Some(run_id),
                status: Some("in_flight".into()),
                ..result
            };
            reply::<m::SessionsCreate>(out, &req.id, &r).await
        }
        Admitted::Started(_) | Admitted::Elsewhere(_) => {}
    }
}
