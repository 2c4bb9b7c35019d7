//! What a slash command sent as a `chat.send` (or `agent`) message does (parsing and
//! wording in `commands.rs`). As on OpenClaw: the send is acked as usual, then answered by
//! one chat `final` whose message the gateway wrote (no model request, no lifecycle
//! events), and the command has its effect on the session; `/stop` by `chat.send` is
//! answered as `chat.abort` is. By `agent`, the final result carries the reply.
//! Each command needs the scope of the method that has the same effect (`/new` needs what
//! `sessions.reset` needs). The send is recorded as a run, so its key replays and
//! `agent.wait` answers for it.

use ipc::gateway::{
    ChatEvent, ChatMessage, ChatSendResult, ChatState, Injected, MessagePlace, SessionsPatchParams,
    TextBlock,
};
use ipc::session_ops::ResetReason;
use ipc::session_ops::{CommandRecord, SessionReply};
use ipc::thinking::Thinking;

use super::commands::{says, Command};
use super::compact::compact_session;
use super::sessions::{patch_session, reset_session, session_info};
use super::*;

/// `commands.list`: the commands a message may be (with their arguments unless
/// `includeArgs` is false).
pub(super) fn commands_list(
    p: ipc::gateway::CommandsListParams,
) -> ipc::gateway::CommandsListResult {
    ipc::gateway::CommandsListResult {
        commands: super::commands::catalog(p.include_args.unwrap_or(true)),
    }
}

/// A command's reply, and whether it tells of a change to the session (OpenClaw marks
/// those `openclawStatusNotice`).
struct Said {
    text: String,
    notice: bool,
}

impl Said {
    fn plain(text: impl Into<String>) -> Said {
        Said {
            text: text.into(),
            notice: false,
        }
    }

    fn notice(text: impl Into<String>) -> Said {
        Said {
            text: text.into(),
            notice: true,
        }
    }
}

/// The scope a command needs: its method's (the method with the same effect), an admin's
/// when it changes the model (`/model <model>`, `/new <model>`: `MODEL_CHANGE`).
fn scope_of(command: &Command) -> Scope {
    let method = match command {
        Command::New(_) | Command::Reset(_) => Method::SessionsReset,
        Command::Stop => Method::ChatAbort,
        Command::Compact(_) => Method::SessionsCompact,
        Command::Status => Method::SessionsList,
        Command::Think(_)
        | Command::Model(_)
        | Command::Queue(_)
        | Command::Reasoning(_)
        | Command::Verbose(_) => Method::SessionsPatch,
    };
    let changes_model = match command {
        Command::Model(arg) | Command::New(arg) => arg.is_some(),
        _ => false,
    };
    method.scope().with_model_change(changes_model)
}

/// The method a command came by: its answers take that method's shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Door {
    /// `chat.send`: acked `started`, answered by the chat `final` (the Control UI, the TUI).
    Chat,
    /// `agent`: acked `accepted`, answered by the final result (`openclaw agent`).
    Agent,
}

/// A `chat.send` or `agent` request: what [`command_or`] needs of it.
pub(super) struct Sent<'a> {
    req: &'a Request,
    route: &'a Route,
    run_id: &'a str,
    message: &'a str,
}

impl<'a> Sent<'a> {
    pub(super) fn new(
        req: &'a Request,
        route: &'a Route,
        run_id: &'a str,
        message: &'a str,
    ) -> Self {
        Sent {
            req,
            route,
            run_id,
            message,
        }
    }
}

/// Answers the request here if its message is a slash command (`None`); else gives its
/// place in the connection's order back, for a run.
pub(super) async fn command_or(
    gw: &Arc<Gateway>,
    session: &Session,
    out: &Out,
    sent: Sent<'_>,
    turn: Option<AdmissionTurn>,
    door: Door,
) -> Option<Option<AdmissionTurn>> {
    // (A message with an inline directive never comes here: `turns.rs` tells it apart.)
    let Some(command) = super::commands::parse(sent.message) else {
        return Some(turn);
    };
    let (route, run_id) = (sent.route.clone(), sent.run_id.to_owned());
    run_command(
        gw,
        session,
        sent.req,
        out,
        route,
        run_id,
        sent.message,
        command,
        turn,
        door,
    )
    .await;
    None
}

/// Answers a `chat.send` or `agent` request whose message is `command`, in its
/// connection's order.
#[allow(clippy::too_many_arguments)]
async fn run_command(
    gw: &Arc<Gateway>,
    session: &Session,
    req: &Request,
    out: &Out,
    route: Route,
    run_id: String,
    message: &str,
    command: Command,
    mut turn: Option<AdmissionTurn>,
    door: Door,
) {
    let needed = scope_of(&command);
    if !session.has_scope(needed) {
        return out.err(&req.id, missing_scope(needed)).await;
    }
    // After the messages sent before it on this connection, before the ones after it: a
    // `/think high` then a question runs the question with the new level.
    if let Some(t) = &mut turn {
        t.wait_previous().await;
    }
    if command == Command::Stop && door == Door::Chat {
        return stop(gw, req, out, route).await;
    }
    let accepted_at = now_ms();
    let accepted = gw
        .db
        .accept(crate::gatewaydb::NewRun {
            run_id: run_id.clone(),
            agent_id: route.agent_id.clone(),
            session_key: route.session_key.clone(),
            accepted_at,
            request_hash: request_hash(message, None, &[]),
        })
        .await;
    let chat_ack = |status: &str| {
        ChatSendResult::Ack(ChatSendAck {
            run_id: run_id.clone(),
            status: status.into(),
        })
    };
    let agent_ack = |status: &str, at: Option<u64>| AgentAck {
        run_id: run_id.clone(),
        session_key: route.session_key.clone(),
        agent_id: route.agent_id.clone(),
        status: status.into(),
        accepted_at: at,
    };
    match accepted {
        Err(e) => {
            let e = ErrorShape::unavailable(format!("cannot accept the run: {e}"), Some(500));
            return out.err(&req.id, e).await;
        }
        Ok(AcceptOutcome::Conflict(why)) => {
            let e = ErrorShape::invalid(format!(
                "idempotencyKey {run_id:?} was already used for a different request ({why}); use a new key for a new request"
            ));
            return out.err(&req.id, e).await;
        }
        Ok(AcceptOutcome::Existing(existing)) => {
            return match (*existing, door) {
                (StoredRun::Active { .. }, Door::Chat) => {
                    reply::<m::ChatSend>(out, &req.id, &chat_ack("in_flight")).await
                }
                (StoredRun::Terminal { .. }, Door::Chat) => {
                    reply::<m::ChatSend>(out, &req.id, &chat_ack("ok")).await
                }
                (StoredRun::Active { .. }, Door::Agent) => {
                    reply::<m::Agent>(out, &req.id, &agent_ack("in_flight", None)).await
                }
                (StoredRun::Terminal { terminal, .. }, Door::Agent) => {
                    final_result(out, &req.id, &terminal.final_json).await
                }
            };
        }
        Ok(AcceptOutcome::Inserted) => {}
    }
    match door {
        Door::Chat => reply::<m::ChatSend>(out, &req.id, &chat_ack("started")).await,
        Door::Agent => {
            let ack = agent_ack("accepted", Some(accepted_at));
            reply::<m::Agent>(out, &req.id, &ack).await
        }
    }
    // Recorded as OpenClaw records commands, but for `/stop`; `/status` context-free.
    let recorded_as = match &command {
        Command::Stop => None,
        Command::Status => Some(true),
        _ => Some(false),
    };
    let said = match command {
        // `/stop` by `agent`: its answer is a final result like any other.
        Command::Stop => match gw
            .control
            .abort(route.session_key.clone(), None, StopReason::Command)
            .await
        {
            Ok(Ok(ids)) if !ids.is_empty() => Said::plain("⚙️ Agent was aborted."),
            Ok(Ok(_)) => Said::plain("⚙️ Nothing to stop."),
            Ok(Err(m)) => Said::plain(format!("⚠️ {m}")),
            Err(e) => Said::plain(format!("⚠️ {}", control_error(e).message)),
        },
        other => perform(gw, out, &route, other).await,
    };
    let ts = now_ms();
    let rows = match recorded_as {
        Some(context_free) => {
            let c = Recording {
                run_id: &run_id,
                command: message,
                context_free,
                ts,
            };
            record(gw, &route, c, &said).await
        }
        None => Vec::new(),
    };
    // The session's settings (and its transcript) are what the next message of this
    // connection runs with.
    drop(turn);
    let terminal = answer(gw, &route, &run_id, accepted_at, said, ts, rows).await;
    if door == Door::Agent {
        out.after_events(gw.hub.published()).await;
        final_result(out, &req.id, &terminal.final_json).await;
    }
}

/// The final `agent` response from a stored result (a run's or a command's).
pub(super) async fn final_result(out: &Out, req_id: &str, final_json: &str) {
    match crate::outcome::StoredFinal::parse(final_json) {
        Ok(stored) => out.res(&stored.frame(req_id)).await,
        Err(e) => {
            let e = ErrorShape::unavailable(format!("stored result is unreadable: {e}"), None);
            out.err(req_id, e).await
        }
    }
}

/// `/stop`: the session's runs end as `chat.abort` ends them, and the send is answered
/// with what `chat.abort` answers (after the aborted runs' events, as OpenClaw).
async fn stop(gw: &Arc<Gateway>, req: &Request, out: &Out, route: Route) {
    match gw
        .control
        .abort(route.session_key, None, StopReason::Command)
        .await
    {
        Ok(Ok(ids)) => {
            out.after_events(gw.hub.published()).await;
            let result = ChatAbortResult {
                ok: true,
                aborted: !ids.is_empty(),
                run_ids: ids,
            };
            reply::<m::ChatSend>(out, &req.id, &ChatSendResult::Stopped(result)).await
        }
        Ok(Err(m)) => out.err(&req.id, ErrorShape::invalid(m.to_string())).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

/// Does what `command` asks of the session; what went wrong is said in the reply.
async fn perform(gw: &Arc<Gateway>, out: &Out, route: &Route, command: Command) -> Said {
    let patch = |f: fn(&mut SessionsPatchParams, String), v: String| {
        let mut p = SessionsPatchParams {
            key: route.session_key.clone(),
            ..Default::default()
        };
        f(&mut p, v);
        p
    };
    match command {
        Command::New(model) => renew(gw, out, route, ResetReason::New, model).await,
        Command::Reset(model) => renew(gw, out, route, ResetReason::Reset, model).await,
        Command::Think(None) => {
            let level = gw.session_overrides(&route.session_key).thinking;
            Said::plain(format!(
                "Current thinking level: {}. Use one of: {}.",
                level.as_deref().unwrap_or("default"),
                levels(gw, route).join(", ")
            ))
        }
        Command::Think(Some(level)) => {
            let Ok(parsed) = super::thinking::parse_level(&level) else {
                return Said::plain(format!(
                    "Unknown thinking level \"{level}\". Use one of: {}.",
                    levels(gw, route).join(", ")
                ));
            };
            let (reasons, model) = reasoning_of(gw, route);
            if parsed != Thinking::Off && !reasons {
                return Said::plain(says::think_unsupported(&level, &model, &["off"]));
            }
            let p = patch(
                |p, v| p.thinking_level = Some(Some(v)),
                parsed.as_str().into(),
            );
            match patch_session(gw, route, &p).await {
                Ok(_) => Said::plain(says::think_set(parsed.as_str())),
                Err(e) => Said::plain(format!("⚠️ {}", e.message)),
            }
        }
        Command::Model(None) => Said::plain(format!("Current model: {}.", model_of(gw, route))),
        Command::Model(Some(m)) => set_model(gw, route, m).await,
        Command::Queue(None) => {
            let mode = gw
                .session_overrides(&route.session_key)
                .queue_mode
                .unwrap_or_else(|| gw.config().queue.mode);
            Said::plain(format!("Current queue mode: {}.", mode.as_str()))
        }
        Command::Queue(Some(arg)) => {
            let mode = arg.split_whitespace().next().unwrap_or_default();
            let Some(parsed) = ipc::queue::QueueMode::parse(mode) else {
                return Said::plain(format!(
                    "Unknown queue mode \"{mode}\". Use one of: steer, followup, collect, interrupt."
                ));
            };
            if arg.split_whitespace().nth(1).is_some() {
                return Said::plain(
                    "⚠️ Only the queue mode can be set here (debounce, cap and drop are set in messages.queue of the config).",
                );
            }
            let p = patch(|p, v| p.queue_mode = Some(Some(v)), parsed.as_str().into());
            match patch_session(gw, route, &p).await {
                Ok(_) => Said::plain(says::queue_set(parsed.as_str())),
                Err(e) => Said::plain(format!("⚠️ {}", e.message)),
            }
        }
        Command::Reasoning(None) => {
            let r = gw.session_overrides(&route.session_key).reasoning;
            Said::plain(format!(
                "Current reasoning visibility: {}. Use one of: on, off, stream.",
                r.as_deref().unwrap_or("off")
            ))
        }
        Command::Reasoning(Some(mode)) => match super::thinking::parse_reasoning(&mode) {
            Err(_) => Said::plain(format!(
                "Unknown reasoning mode \"{mode}\". Use one of: on, off, stream."
            )),
            Ok(r) => {
                let p = patch(|p, v| p.reasoning_level = Some(Some(v)), r.as_str().into());
                match patch_session(gw, route, &p).await {
                    Ok(_) => Said::plain(says::reasoning_set(r.as_str())),
                    Err(e) => Said::plain(format!("⚠️ {}", e.message)),
                }
            }
        },
        Command::Verbose(None) => {
            let v = gw.session_overrides(&route.session_key).verbose;
            let config = gw.config();
            let default = config
                .agent(&route.agent_id)
                .map_or(ipc::thinking::VerboseLevel::Off, |a| a.verbose_default);
            Said::plain(format!(
                "Current verbose level: {}.\nOptions: on, full, off.",
                v.unwrap_or(default).as_str()
            ))
        }
        Command::Verbose(Some(level)) => match ipc::thinking::VerboseLevel::parse(&level) {
            None => Said::plain(format!(
                "Unrecognized verbose level \"{level}\". Valid levels: off, on, full."
            )),
            Some(v) => {
                let p = patch(|p, v| p.verbose_level = Some(Some(v)), v.as_str().into());
                match patch_session(gw, route, &p).await {
                    Ok(_) => Said::plain(says::verbose_set(v.as_str())),
                    Err(e) => Said::plain(format!("⚠️ {}", e.message)),
                }
            }
        },
        Command::Compact(Some(_)) => Said::plain(
            "⚠️ /compact takes no instructions here; send /compact alone to compact the session.",
        ),
        Command::Compact(None) => match compact_session(gw, out, route.clone()).await {
            Ok(r) => match r.result {
                Some(done) => Said::notice(format!(
                    "⚙️ Compacted {} messages: ~{} → ~{} tokens.",
                    done.messages_summarized, done.tokens_before, done.tokens_after
                )),
                None => Said::notice(format!(
                    "⚙️ Nothing compacted: {}.",
                    r.reason.as_deref().unwrap_or("nothing to compact")
                )),
            },
            Err(e) => Said::notice(format!("⚙️ Compaction failed: {}", e.message)),
        },
        Command::Status => status(gw, route).await,
        // Answered by the caller (`stop`, or the `agent` path in `run_command`).
        Command::Stop => Said::plain(""),
    }
}

/// `/new`, `/reset`: the transcript starts afresh (same session id) and the session's own
/// queue mode is dropped, as OpenClaw does; its other settings stay. With a model, the
/// session then runs on it.
async fn renew(
    gw: &Arc<Gateway>,
    out: &Out,
    route: &Route,
    reason: ResetReason,
    model: Option<String>,
) -> Said {
    if let Err(e) = reset_session(gw, out, route.clone(), reason).await {
        return Said::plain(format!("⚠️ The session was not reset: {}", e.message));
    }
    let clear = SessionsPatchParams {
        key: route.session_key.clone(),
        queue_mode: Some(None),
        ..Default::default()
    };
    if let Err(e) = patch_session(gw, route, &clear).await {
        tracing::warn!(error = %e.message, "Cannot clear a reset session's queue mode.");
    }
    let done = match reason {
        ResetReason::New => says::NEW,
        _ => says::RESET,
    };
    match model {
        None => Said::notice(done),
        Some(m) => {
            let set = set_model(gw, route, m).await;
            Said::notice(format!("{done}\n{}", set.text))
        }
    }
}

async fn set_model(gw: &Arc<Gateway>, route: &Route, model: String) -> Said {
    let p = SessionsPatchParams {
        key: route.session_key.clone(),
        model: Some(Some(model)),
        ..Default::default()
    };
    match patch_session(gw, route, &p).await {
        Ok(_) => match gw.session_model(&route.session_key) {
            Some(own) => Said::plain(says::model_set(&own)),
            None => Said::plain(says::model_default(&model_of(gw, route))),
        },
        Err(e) => Said::plain(format!("⚠️ {}", e.message)),
    }
}

/// The model the session's runs use: its own, else its agent's.
fn model_of(gw: &Gateway, route: &Route) -> String {
    if let Some(own) = gw.session_model(&route.session_key) {
        return own;
    }
    let config = gw.config();
    match config.agent(&route.agent_id).and_then(|a| a.model.as_ref()) {
        Some(m) => format!("{}/{}", m.provider, m.model),
        None => "none configured".into(),
    }
}

/// Whether the session's model reasons, and its name.
fn reasoning_of(gw: &Gateway, route: &Route) -> (bool, String) {
    let config = gw.config();
    let Some((agent, own)) = config
        .agent(&route.agent_id)
        .and_then(|a| a.model.as_ref().map(|m| (a, m)))
    else {
        return (false, model_of(gw, route));
    };
    let run_model = gw.session_model(&route.session_key).and_then(|m| {
        let (provider, model) = m.split_once('/')?;
        Some(ipc::control::RunModel {
            provider: provider.to_owned(),
            model: model.to_owned(),
        })
    });
    super::thinking::model_reasons(agent, own, run_model.as_ref())
}

/// The thinking levels the session's model takes.
fn levels(gw: &Gateway, route: &Route) -> Vec<&'static str> {
    if reasoning_of(gw, route).0 {
        Thinking::ALL.iter().map(|t| t.as_str()).collect()
    } else {
        vec!["off"]
    }
}

/// `/status`: the gateway, the session's model and settings, its tokens.
async fn status(gw: &Arc<Gateway>, route: &Route) -> Said {
    let own = gw.session_overrides(&route.session_key);
    let row = session_info(gw, route).await.ok();
    let tokens = row.as_ref().map_or((0, 0), |r| {
        (r.input_tokens.unwrap_or(0), r.output_tokens.unwrap_or(0))
    });
    let session_id = row
        .as_ref()
        .and_then(|r| r.session_id.clone())
        .unwrap_or_else(|| "none yet".into());
    let uptime = gw.started.elapsed().as_secs();
    let queue = own.queue_mode.unwrap_or_else(|| gw.config().queue.mode);
    Said::plain(format!(
        "🦞 loopgate {}\n⏱️ Uptime: gateway {}m {}s\n\n🧠 Model: {}\n🧮 Tokens: {} in / {} out\n\n🧵 Session: {} • id {}\n🎛️ Modes: think {} · reasoning {}\n🪢 Queue: {}",
        env!("CARGO_PKG_VERSION"),
        uptime / 60,
        uptime % 60,
        model_of(gw, route),
        tokens.0,
        tokens.1,
        route.session_key,
        session_id,
        own.thinking.as_deref().unwrap_or("default"),
        own.reasoning.as_deref().unwrap_or("off"),
        queue.as_str(),
    ))
}

/// Publishes the command's reply as its send's one chat `final` and records the send's
/// outcome (`ok`, the reply as its payload), which it returns.
async fn answer(
    gw: &Arc<Gateway>,
    route: &Route,
    run_id: &str,
    accepted_at: u64,
    said: Said,
    ts: u64,
    rows: Vec<(serde_json::Value, MessagePlace)>,
) -> crate::outcome::StoredTerminal {
    // The reply's place, once recorded: clients match the live copy and history's by it.
    let place = rows.last().map(|(_, place)| place.clone());
    let message = ChatMessage {
        content: vec![TextBlock {
            status_notice: said.notice,
            ..TextBlock::new(&said.text)
        }],
        injected: Some(Injected::reply_to(run_id)),
        recorded: place.clone(),
        ..ChatMessage::assistant(&said.text, ts)
    };
    let chat = ChatEvent {
        run_id: run_id.to_owned(),
        session_key: route.session_key.clone(),
        agent_id: route.agent_id.clone(),
        seq: 1,
        state: ChatState::Final {
            message: Some(message),
            stop_reason: Some("stop".into()),
            message_id: place.as_ref().map(|p| p.id.clone()),
            message_seq: place.as_ref().map(|p| p.seq),
        },
    };
    gw.hub
        .publish_deferred(&crate::events::Deferred::chat(&chat));
    // The session's followers get both rows, as for any recorded message.
    for (message, place) in rows {
        let event = crate::projection::session_message(
            &route.session_key,
            &route.agent_id,
            message,
            &place,
        );
        gw.hub
            .publish_deferred(&crate::events::Deferred::session_message(&event));
    }
    let terminal = crate::outcome::command_terminal(
        run_id,
        (&route.session_key, &route.agent_id),
        accepted_at,
        ts,
        &said.text,
    );
    if let Err(e) = gw.db.finish(run_id.to_owned(), terminal.clone()).await {
        tracing::warn!(error = %e, "Cannot record a command's outcome.");
    }
    terminal
}

/// How long a command's answer waits for its record in the transcript.
const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A command to record: its run, its text and when it was answered.
struct Recording<'a> {
    run_id: &'a str,
    command: &'a str,
    context_free: bool,
    ts: u64,
}

/// Records the command and its reply in the session's transcript, as OpenClaw does (the
/// Control UI shows both after a reload; the model sees the command on the next turn, not
/// the reply); the rows as clients see them. Not recorded while a run holds the session,
/// nor when its worker cannot be asked: the command took effect and is answered anyway.
async fn record(
    gw: &Arc<Gateway>,
    route: &Route,
    c: Recording<'_>,
    said: &Said,
) -> Vec<(serde_json::Value, MessagePlace)> {
    let op = SessionOp::Command {
        session_key: route.session_key.clone(),
        record: CommandRecord {
            run_id: c.run_id.to_owned(),
            command: c.command.to_owned(),
            reply: said.text.clone(),
            timestamp: c.ts,
            notice: said.notice,
            context_free: c.context_free,
        },
    };
    // Bounded: a worker that cannot answer soon (restarting, backing off) does not hold up
    // the answer, nor the connection's next message.
    let asked = tokio::time::timeout(
        RECORD_WAIT,
        super::at_worker(gw, route.agent_id.clone(), op),
    );
    let Ok(answered) = asked.await else {
        tracing::warn!("A command's record took too long; it may be missing from history.");
        return Vec::new();
    };
    match answered {
        Ok(SessionReply::Command { messages, .. }) => messages
            .iter()
            .filter_map(crate::projection::display_message)
            .collect(),
        Ok(other) => {
            tracing::warn!(reply = ?other, "A command's record got an unexpected answer; it is not in history.");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(error = %e.message, "Cannot record a command in the session's history.");
            Vec::new()
        }
    }
}
