//! The turn methods: `agent` (acknowledged, then answered with the run's final result),
//! `chat.send`, `chat.abort` and `agent.wait`.

use super::attachments::{normalize, Takes};
use super::command_run::{abort, chat_ack, command_or, CommandOr, Sent};
use super::*;
use crate::backend::ClusterRunError;
use ipc::gateway::{AgentWaitParams, ChatAbortParams, ChatSendParams};
use tokio_util::sync::CancellationToken;

/// The checks of `agent` params beyond their types: a message with text (or attachments),
/// an idempotency key, an extra system prompt within its cap.
fn agent_params_error(p: &ipc::gateway::AgentParams, attached: bool) -> Option<String> {
    if let Some(m) = turn_params_error(
        &p.message,
        &p.idempotency_key,
        "message must be a non-empty string",
        attached,
    ) {
        return Some(m);
    }
    let extra = p.extra_system_prompt.as_ref().map_or(0, String::len);
    (extra > ipc::gateway::MAX_EXTRA_SYSTEM_PROMPT_BYTES).then(|| {
        format!(
            "extraSystemPrompt is {extra} bytes; the limit is {}",
            ipc::gateway::MAX_EXTRA_SYSTEM_PROMPT_BYTES
        )
    })
}

/// `agent`: acknowledged `accepted` once its run is admitted, then answered with the run's
/// final result (a command, a key used before or a refusal is answered once). `out` is the
/// connection's share of session operations, for a command.
pub(super) async fn agent(
    gw: &Arc<Gateway>,
    session: &Session,
    out: &Out,
    first: RunAnswers<'_, m::Agent>,
    mut p: AgentParams,
    turn: Option<AdmissionTurn>,
) -> Answer<Last<AgentAck>> {
    let attachments = checked_agent_params(session, &mut p)?;
    let invalid = |m: String| ErrorShape::invalid(format!("invalid agent params: {m}"));
    let config = gw.config();
    let routed = match session_id_only(&p) {
        Some(id) => resolve_session_id(&config, &gw.db, id, p.agent_id.as_deref()).await,
        None => route(&p, |id| config.agent(id).is_some()),
    };
    let route = routed.map_err(|m| invalid(m.to_string()))?;
    let run_id = p.idempotency_key.clone();
    // `/think high what is ...`: a message with an inline directive, not a command.
    let inline = super::directives::inline(&p.message);
    // `openclaw agent --message /new`: a command, as on `chat.send` (a message with
    // attachments is content for the model).
    let turn = if attachments.is_empty() && inline.is_none() {
        let sent = Sent::new(&route, &run_id, &p.message);
        match command_or(gw, session, out, first, sent, turn).await {
            CommandOr::Run(turn) => turn,
            CommandOr::Answered(last) => return last,
        }
    } else {
        turn
    };
    // The directive's level for this message only, the rest for the model.
    if let Some((inline, rest)) = inline {
        p.thinking = p.thinking.take().or(inline.thinking);
        p.verbose = p.verbose.take().or(inline.verbose);
        p.message = rest;
    }
    let (session_key, agent_id) = (route.session_key.clone(), route.agent_id.clone());
    let admission = Admission {
        turn,
        run_id: run_id.clone(),
        route,
        message: p.message,
        extra_system_prompt: p.extra_system_prompt,
        timeout_ms: p.timeout.map(|s| s.saturating_mul(1000)),
        provider: p.provider,
        model: p.model,
        thinking: p.thinking,
        queue_mode: p.queue_mode,
        attachments,
        images_need_model: true,
        verbose: p.verbose,
        block_streaming: p.block_streaming,
        trace_allowed: session.has_scope(Scope::Admin),
    };
    let ack = |accepted_at| AgentAck {
        run_id: run_id.clone(),
        session_key: session_key.clone(),
        agent_id: agent_id.clone(),
        status: "accepted".into(),
        accepted_at: Some(accepted_at),
    };
    let admitted = admit(gw, first, admission, ack).await;
    agent_last(&gw.hub, &gw.stopping, &run_id, admitted).await
}

/// `agent`'s attachments, decoded and checked, once the caller may pick the run's model
/// and the params hold a message and a key; or the refusal.
fn checked_agent_params(
    session: &Session,
    p: &mut ipc::gateway::AgentParams,
) -> Result<Vec<ipc::control::Attachment>, ErrorShape> {
    let attachments = normalize(p.attachments.take(), Takes::ImagesAndText)
        .map_err(|m| ErrorShape::invalid(m.to_string()))?;
    // As OpenClaw: picking the model of a run is an admin's call (`MODEL_CHANGE`, the rule
    // of every path that changes a model).
    let changes_model = p.provider.is_some() || p.model.is_some();
    if !session.has_scope(Method::Agent.scope().with_model_change(changes_model)) {
        return Err(ErrorShape::invalid(
            "provider/model overrides are not authorized for this caller.",
        ));
    }
    if let Some(m) = agent_params_error(p, !attachments.is_empty()) {
        return Err(ErrorShape::invalid(format!("invalid agent params: {m}")));
    }
    Ok(attachments)
}

/// `agent`'s last answer (the first, `accepted`, went with admission): the run's final
/// result once it ended, here or (cluster mode) wherever it ran, after the events the hub
/// published by then (its terminal ones among them); a replay's stored one; or why there is
/// none (the gateway `stopping` first, in cluster mode).
async fn agent_last(
    hub: &EventHub,
    stopping: &CancellationToken,
    run_id: &str,
    admitted: Admitted,
) -> Answer<Last<AgentAck>> {
    let stopped =
        || ErrorShape::unavailable("the gateway stopped before the run finished", Some(1000));
    let final_json: Arc<str> = match admitted {
        Admitted::Refused(e) => return Err(e),
        Admitted::InFlight {
            agent_id,
            session_key,
        } => {
            let ack = AgentAck {
                run_id: run_id.to_owned(),
                session_key,
                agent_id,
                status: "in_flight".into(),
                accepted_at: None,
            };
            return Ok(Last::Result(Reply::now(ack)));
        }
        // A replay sends the stored bytes of the final result as they are.
        Admitted::Finished(terminal) => terminal.final_json.into(),
        // The run's terminal events were published before its waiters were answered.
        Admitted::Started(rx) => rx.await.map_err(|_| stopped())?.final_json.clone(),
        // Cluster mode: the outcome another gateway (or this one, as the owner) recorded.
        Admitted::Elsewhere(waiting) => {
            let done = tokio::select! {
                r = waiting => r.map_err(|e| ClusterRunError::Waiting(e.to_string())).and_then(|r| r),
                _ = stopping.cancelled() => Err(ClusterRunError::Stopped),
            };
            let done = done.map_err(|why| ErrorShape::unavailable(why.to_string(), Some(1000)))?;
            done.final_json.into()
        }
    };
    Ok(Last::Stored {
        final_json,
        after_hub: Some(hub.published()),
    })
}

/// `chat.send`: acknowledged `started` once its run is admitted (its progress and outcome
/// follow as `chat` / `agent` events); a command, a key used before or a refusal is answered
/// as its own. `out` is the connection's share of session operations, for a command.
pub(super) async fn chat_send(
    gw: &Arc<Gateway>,
    session: &Session,
    out: &Out,
    first: RunAnswers<'_, m::ChatSend>,
    mut p: ChatSendParams,
    turn: Option<AdmissionTurn>,
) -> Answer<Last<ChatSendResult>> {
    let attachments = normalize(p.attachments.take(), Takes::Anything)
        .map_err(|m| ErrorShape::invalid(m.to_string()))?;
    let invalid = |m: String| ErrorShape::invalid(format!("invalid chat.send params: {m}"));
    if let Some(m) = turn_params_error(
        &p.message,
        &p.idempotency_key,
        "message or attachment required",
        !attachments.is_empty(),
    ) {
        return Err(invalid(m));
    }
    let route = routed(
        &gw.config(),
        Method::ChatSend,
        &p.session_key,
        p.agent_id.as_deref(),
    )?;
    let run_id = p.idempotency_key.clone();
    let interpret = p.suppress_command_interpretation != Some(true);
    // `/think high what is ...`: a message with an inline directive, not a command.
    let inline = interpret
        .then(|| super::directives::inline(&p.message))
        .flatten();
    let turn = if !interpret || !attachments.is_empty() || inline.is_some() {
        turn
    } else {
        let sent = Sent::new(&route, &run_id, &p.message);
        match command_or(gw, session, out, first, sent, turn).await {
            CommandOr::Run(turn) => turn,
            CommandOr::Answered(last) => return last,
        }
    };
    // The directive's level for this message only, the rest for the model.
    let mut inline_verbose = None;
    if let Some((inline, rest)) = inline {
        p.thinking = p.thinking.take().or(inline.thinking);
        inline_verbose = inline.verbose;
        p.message = rest;
    }
    let admission = Admission {
        turn,
        run_id: run_id.clone(),
        route,
        message: p.message,
        extra_system_prompt: None,
        timeout_ms: p.timeout_ms,
        provider: None,
        model: None,
        thinking: p.thinking,
        queue_mode: p.queue_mode,
        attachments,
        images_need_model: false,
        verbose: inline_verbose,
        block_streaming: Some(false),
        trace_allowed: session.has_scope(Scope::Admin),
    };
    let admitted = admit(gw, first, admission, |_| chat_ack(&run_id, "started")).await;
    chat_send_last(&run_id, admitted)
}

/// `chat.send`'s answer after admission, unless the ack `started` was it (progress and
/// the outcome arrive as `chat` / `agent` events, and `agent.wait`): the run of a key used
/// before as it stands, or the refusal.
fn chat_send_last(run_id: &str, admitted: Admitted) -> Answer<Last<ChatSendResult>> {
    let status = match admitted {
        Admitted::Refused(e) => return Err(e),
        Admitted::InFlight { .. } => "in_flight",
        Admitted::Finished(_) => "ok",
        Admitted::Started(_) | Admitted::Elsewhere(_) => return Ok(Last::Acked),
    };
    Ok(Last::Result(Reply::now(chat_ack(run_id, status))))
}

/// `chat.abort`: the session's runs (or the one named) end, aborted.
pub(super) async fn chat_abort(gw: &Arc<Gateway>, p: ChatAbortParams) -> Answer<ChatAbortResult> {
    let route = routed(
        &gw.config(),
        Method::ChatAbort,
        &p.session_key,
        p.agent_id.as_deref(),
    )?;
    abort(gw, route.session_key, p.run_id, StopReason::Rpc).await
}

/// `agent.wait`: how the run stands once it ended (or once the wait's window closed),
/// answered after the events published by then, so its terminal events come first.
pub(super) async fn agent_wait(
    gw: &Arc<Gateway>,
    p: AgentWaitParams,
) -> Answer<Reply<AgentWaitResult>> {
    if p.run_id.is_empty() {
        return Err(ErrorShape::invalid(
            "invalid agent.wait params: runId must be a non-empty string",
        ));
    }
    let result = wait_result(gw, &p).await?;
    Ok(Reply::after_events(result, gw.hub.published()))
}

/// The run `p` names as it stands once it ended, or when the wait's window closed (or the
/// gateway began to stop).
async fn wait_result(gw: &Gateway, p: &AgentWaitParams) -> Answer<AgentWaitResult> {
    let window = Duration::from_millis(p.timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS));
    let timed_out = AgentWaitResult::pending(&p.run_id, None);
    let draining = AgentWaitResult::pending(&p.run_id, Some("gateway_draining"));
    let waited = gw
        .control
        .wait(p.run_id.clone())
        .await
        .map_err(control_error)?;
    let pending = match waited {
        WaitReply::Done(o) => return Ok(o.wait_result()),
        WaitReply::Pending(rx) => Some(rx),
        WaitReply::Unknown => match gw.db.lookup(p.run_id.clone()).await {
            Ok(Some(StoredRun::Terminal { terminal, .. })) => {
                return Ok(stored_wait_result(&p.run_id, &terminal));
            }
            // Accepted here and not handed over yet (the ack goes out first): wait for it.
            Ok(Some(StoredRun::Active { .. })) if gw.backend.elsewhere().is_none() => {
                let expected = gw.control.wait_expected(p.run_id.clone()).await;
                match expected.map_err(control_error)? {
                    WaitReply::Done(o) => return Ok(o.wait_result()),
                    WaitReply::Pending(rx) => Some(rx),
                    WaitReply::Unknown => None,
                }
            }
            Ok(_) => None,
            Err(e) => {
                let e = format!("cannot look up the run: {e}");
                return Err(ErrorShape::unavailable(e, Some(500)));
            }
        },
    };
    // Cluster mode: a run another gateway accepted or runs.
    if let (None, Some(c)) = (&pending, gw.backend.elsewhere()) {
        return Ok(tokio::select! {
            r = c.wait_result(&p.run_id, window) => r.unwrap_or(timed_out),
            _ = gw.stopping.cancelled() => draining,
        });
    }
    let started =
        |run_id: String| async move { gw.control.has_started(run_id).await.unwrap_or(true) };
    Ok(match pending {
        Some(rx) => tokio::select! {
            r = tokio::time::timeout(window, rx) => match r {
                Ok(Ok(o)) => o.wait_result(),
                Ok(Err(_)) => draining,
                // Still behind its session's earlier runs: say so (R-A2).
                Err(_) if !started(p.run_id.clone()).await => AgentWaitResult::queued(&p.run_id),
                Err(_) => timed_out,
            },
            _ = gw.stopping.cancelled() => draining,
        },
        // Unknown run: like OpenClaw, wait out the window and report a timeout.
        None => tokio::select! {
            _ = tokio::time::sleep(window) => timed_out,
            _ = gw.stopping.cancelled() => draining,
        },
    })
}

#[cfg(test)]
mod tests {
    use ipc::gateway::{AgentParams, MAX_EXTRA_SYSTEM_PROMPT_BYTES, MAX_MESSAGE_BYTES};

    use super::{agent_params_error, chat_ack, chat_send_last, Admitted, ErrorShape, Last};

    fn params(message: &str, key: &str) -> AgentParams {
        AgentParams {
            message: message.into(),
            idempotency_key: key.into(),
            ..Default::default()
        }
    }

    /// R-A1: a turn needs text, or attachments to carry it; and a key to be idempotent
    /// by (R-A3).
    #[test]
    fn a_turn_needs_text_or_attachments_and_a_key() {
        let blank = params("  \n", "k");
        assert_eq!(
            agent_params_error(&blank, false).as_deref(),
            Some("message must be a non-empty string")
        );
        assert_eq!(
            agent_params_error(&blank, true),
            None,
            "attachments carry it"
        );
        assert_eq!(
            agent_params_error(&params("hi", ""), false).as_deref(),
            Some("idempotencyKey must be a non-empty string")
        );
        assert_eq!(agent_params_error(&params("hi", "k"), false), None);
    }

    /// The message and the extra system prompt are capped, and the refusal says by how much.
    #[test]
    fn oversized_text_is_refused_with_its_size() {
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1);
        let why = agent_params_error(&params(&long, "k"), false).unwrap_or_default();
        assert!(
            why.starts_with(&format!("message is {} bytes;", MAX_MESSAGE_BYTES + 1)),
            "{why}"
        );
        let mut p = params("hi", "k");
        p.extra_system_prompt = Some("y".repeat(MAX_EXTRA_SYSTEM_PROMPT_BYTES + 1));
        assert_eq!(
            agent_params_error(&p, false),
            Some(format!(
                "extraSystemPrompt is {} bytes; the limit is {MAX_EXTRA_SYSTEM_PROMPT_BYTES}",
                MAX_EXTRA_SYSTEM_PROMPT_BYTES + 1
            ))
        );
        p.extra_system_prompt = Some("y".repeat(MAX_EXTRA_SYSTEM_PROMPT_BYTES));
        assert_eq!(agent_params_error(&p, false), None, "at the cap is fine");
    }

    /// A `chat.send` run acked `started` says nothing more; a key used before answers its
    /// run as it stands, and a refusal its error.
    #[test]
    fn a_chat_send_is_answered_once_after_admission() {
        let (_tx, rx) = tokio::sync::oneshot::channel();
        assert!(matches!(
            chat_send_last("r1", Admitted::Started(rx)),
            Ok(Last::Acked)
        ));
        let in_flight = Admitted::InFlight {
            agent_id: "main".into(),
            session_key: "agent:main:main".into(),
        };
        match chat_send_last("r1", in_flight) {
            Ok(Last::Result(reply)) => assert_eq!(reply.result(), &chat_ack("r1", "in_flight")),
            _ => panic!("expected the in_flight ack"),
        }
        let finished = Admitted::Finished(crate::outcome::command_terminal(
            "r1",
            ("agent:main:main", "main"),
            1,
            2,
            "x",
        ));
        match chat_send_last("r1", finished) {
            Ok(Last::Result(reply)) => assert_eq!(reply.result(), &chat_ack("r1", "ok")),
            _ => panic!("expected the ok ack"),
        }
        let refused = Admitted::Refused(ErrorShape::invalid("no"));
        assert!(matches!(chat_send_last("r1", refused), Err(e) if e.message == "no"));
    }
}
