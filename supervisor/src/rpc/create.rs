//! `sessions.create`: a new session (TUI `/new`, the Control UI's New session), optionally
//! with its first turn. What the params ask for is decided by [`creation`] (pure); the
//! handler creates the row, answers, and admits the first turn if there is one.

use super::*;
use ipc::gateway::{CreateResolved, SessionsCreateParams, SessionsCreateResult};

/// Why `sessions.create` refuses its params; answered as
/// `invalid sessions.create params: <this>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CreateRefused {
    /// Options loopgate does not implement were asked for (a default value is not asking).
    #[error("not supported by loopgate: {}", .0.join(", "))]
    Unsupported(Vec<String>),
    /// The first message, or the idempotency key it runs under, fails a turn's checks.
    #[error("{0}")]
    FirstTurn(String),
}

/// What a `sessions.create` asks for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Creation {
    /// The key to create or adopt, as given (a new one when none was).
    key: String,
    /// The label, trimmed and cut to [`MAX_LABEL_CHARS`]; `None` keeps any old one.
    label: Option<String>,
    /// The first turn's message, if one was sent (`message`, else `task`).
    first: Option<String>,
    /// The run id of that turn: the idempotency key, else a new id.
    run_id: String,
}

/// Checks the params and fills in what is missing (a new key, a new run id) from
/// `new_id`: the whole decision of what to create, with no gateway.
fn creation(
    p: &SessionsCreateParams,
    mut new_id: impl FnMut() -> String,
) -> Result<Creation, CreateRefused> {
    if !p.unsupported.is_empty() {
        return Err(CreateRefused::Unsupported(p.unsupported.clone()));
    }
    let first = p
        .message
        .clone()
        .or(p.task.clone())
        .filter(|m| !m.trim().is_empty());
    let run_id = p.idempotency_key.clone().unwrap_or_else(&mut new_id);
    if let Some(m) = &first {
        if let Some(e) = turn_params_error(m, &run_id, "message must not be empty", false) {
            return Err(CreateRefused::FirstTurn(e));
        }
    }
    let key = p
        .key
        .clone()
        .filter(|k| !k.trim().is_empty())
        .unwrap_or_else(new_id);
    let label = p
        .label
        .clone()
        .or(p.display_name.clone())
        .map(|l| l.trim().chars().take(MAX_LABEL_CHARS).collect::<String>())
        .filter(|l| !l.is_empty());
    Ok(Creation {
        key,
        label,
        first,
        run_id,
    })
}

/// `sessions.create`: creates (or adopts) the session's row and answers with it; with a
/// first message, the answer is that turn's admission: its ack (`started`), or the row with
/// why the turn did not start.
pub(super) async fn sessions_create(
    gw: &Arc<Gateway>,
    session: &Session,
    first: RunAnswers<'_, m::SessionsCreate>,
    p: SessionsCreateParams,
    turn: Option<AdmissionTurn>,
) -> Answer<Last<SessionsCreateResult>> {
    let c = creation(&p, || uuid::Uuid::new_v4().to_string())
        .map_err(|e| ErrorShape::invalid(format!("invalid sessions.create params: {e}")))?;
    let route = routed(
        &gw.config(),
        Method::SessionsCreate,
        &c.key,
        p.agent_id.as_deref(),
    )?;
    let entry = create_row(gw, &route, c.label).await?;
    let result = created(&route, entry, resolved_model(&gw.config(), &route.agent_id));
    let Some(message) = c.first else {
        return Ok(Last::Result(Reply::now(result)));
    };
    let mut admission = first_turn(turn, c.run_id.clone(), route, message, p.timeout_ms);
    // A session adopted with a trace level of its own traces an admin's turn.
    admission.trace_allowed = session.has_scope(Scope::Admin);
    let started = started(&result, &c.run_id);
    let admitted = admit(gw, first, admission, |_| started).await;
    Ok(match after_admission(admitted, &c.run_id, result) {
        Some(r) => Last::Result(Reply::now(r)),
        None => Last::Acked,
    })
}

/// Creates the session's index row (a key that exists is adopted: its row is kept, a new
/// label replaces the old), and tells subscribers; the row as clients see it.
async fn create_row(
    gw: &Arc<Gateway>,
    route: &Route,
    label: Option<String>,
) -> Result<SessionRow, ErrorShape> {
    let now = now_ms();
    let patch = crate::gatewaydb::SessionPatch {
        label: label.map(Some),
        last_read_at: None,
        model_override: None,
        thinking_level: None,
        reasoning_level: None,
        verbose_level: None,
        response_usage: None,
        trace_level: None,
        queue_mode: None,
        queue_options: None,
    };
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
        return Err(ErrorShape::unavailable(msg, Some(500)));
    }
    let entry = session_info(gw, route).await?;
    gw.hub
        .publish_deferred(&crate::events::Deferred::sessions_changed(
            &SessionsChanged::changed("create", now, entry.clone()),
        ));
    Ok(entry)
}

/// The agent's configured model, as `sessions.create` reports it.
fn resolved_model(config: &Config, agent_id: &str) -> Option<CreateResolved> {
    config
        .agent(agent_id)
        .and_then(|a| a.model.clone())
        .map(|m| CreateResolved {
            model_provider: m.provider,
            model: m.model,
        })
}

/// The answer for a session created with no run started.
fn created(
    route: &Route,
    entry: SessionRow,
    resolved: Option<CreateResolved>,
) -> SessionsCreateResult {
    SessionsCreateResult {
        ok: true,
        key: route.session_key.clone(),
        session_id: entry.session_id.clone(),
        entry,
        run_started: false,
        run_id: None,
        status: None,
        run_error: None,
        resolved,
    }
}

/// The answer once the first turn `run_id` is admitted (the admission's ack).
fn started(result: &SessionsCreateResult, run_id: &str) -> SessionsCreateResult {
    SessionsCreateResult {
        run_started: true,
        run_id: Some(run_id.to_owned()),
        status: Some("started".into()),
        ..result.clone()
    }
}

/// The session's first turn, admitted as a `chat.send` of `message` is, but with no
/// settings of its own and no block streaming.
fn first_turn(
    turn: Option<AdmissionTurn>,
    run_id: String,
    route: Route,
    message: String,
    timeout_ms: Option<u64>,
) -> Admission {
    Admission {
        turn,
        block_streaming: Some(false),
        ..Admission::bare(run_id, route, message, timeout_ms)
    }
}

/// What to answer after the first turn's admission, when admission did not answer itself
/// (a started run was acked with [`started`]). A refused first turn still created the
/// session (as OpenClaw: `runError`); a key already used names the run as `in_flight`.
fn after_admission(
    admitted: Admitted,
    run_id: &str,
    result: SessionsCreateResult,
) -> Option<SessionsCreateResult> {
    match admitted {
        Admitted::Refused(e) => Some(SessionsCreateResult {
            run_error: Some(e),
            ..result
        }),
        Admitted::InFlight { .. } | Admitted::Finished(_) => Some(SessionsCreateResult {
            run_id: Some(run_id.to_owned()),
            status: Some("in_flight".into()),
            ..result
        }),
        Admitted::Started(_) | Admitted::Elsewhere(_) => None,
    }
}

#[cfg(test)]
mod tests;
