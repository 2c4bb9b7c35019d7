//! What a slash command sent as a `chat.send` (or `agent`) message does (parsing and
//! wording in `commands.rs`). As on OpenClaw: the send is acked as usual, then answered by
//! one chat `final` whose message the gateway wrote (no model request, no lifecycle
//! events), and the command has its effect on the session; `/stop` by `chat.send` is
//! answered as `chat.abort` is. By `agent`, the final result carries the reply.
//! Each command needs the scope of the method that has the same effect (`/new` needs what
//! `sessions.reset` needs). The send is recorded as a run, so its key replays and
//! `agent.wait` answers for it.

use ipc::gateway::{
    ChatEvent, ChatMessage, ChatSendResult, ChatState, Injected, MessagePlace, TextBlock,
};
use ipc::session_ops::{CommandOp, CommandRecord};

use std::ops::ControlFlow;

use super::commands::Command;
use super::*;

mod settings;
#[cfg(test)]
mod tests;
mod usage_cost;

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
#[derive(Debug, Clone, PartialEq, Eq)]
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
/// when it changes the model (`/model <model>`, `/new <model>`: `MODEL_CHANGE`). `/trace`
/// is read here and answers anyone but an admin with OpenClaw's refusal.
fn scope_of(command: &Command) -> Scope {
    let method = match command {
        Command::New(_) | Command::Reset(_) => Method::SessionsReset,
        Command::Stop => Method::ChatAbort,
        Command::Compact(_) => Method::SessionsCompact,
        Command::Status | Command::Help | Command::Commands | Command::Trace(_) => {
            Method::SessionsList
        }
        Command::Usage(arg) if arg.as_deref().is_some_and(usage_cost::is_cost) => {
            Method::SessionsList
        }
        Command::Usage(_)
        | Command::Think(_)
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

/// A method a command may come by, with the shapes of its answers.
pub(super) trait CommandDoor: MethodSpec {
    const DOOR: Door;
    /// How `/stop` is answered when it is answered as `chat.abort` is (`chat.send`);
    /// `None`: as any command's run (`agent`: a final result saying what stopped).
    const STOPPED: Option<fn(ChatAbortResult) -> Self::Result>;
    /// The ack of the command's run, accepted at `accepted_at`.
    fn accepted(route: &Route, run_id: &str, accepted_at: u64) -> Self::Result;
    /// The ack of a run its key named before (R-A3), with its `status` now.
    fn replayed(route: &Route, run_id: &str, status: &str) -> Self::Result;
}

impl CommandDoor for m::ChatSend {
    const DOOR: Door = Door::Chat;
    const STOPPED: Option<fn(ChatAbortResult) -> ChatSendResult> = Some(ChatSendResult::Stopped);

    fn accepted(_: &Route, run_id: &str, _: u64) -> ChatSendResult {
        chat_ack(run_id, "started")
    }

    fn replayed(_: &Route, run_id: &str, status: &str) -> ChatSendResult {
        chat_ack(run_id, status)
    }
}

impl CommandDoor for m::Agent {
    const DOOR: Door = Door::Agent;
    const STOPPED: Option<fn(ChatAbortResult) -> AgentAck> = None;

    fn accepted(route: &Route, run_id: &str, accepted_at: u64) -> AgentAck {
        agent_ack(route, run_id, "accepted", Some(accepted_at))
    }

    fn replayed(route: &Route, run_id: &str, status: &str) -> AgentAck {
        agent_ack(route, run_id, status, None)
    }
}

/// A `chat.send` or `agent` request: what [`command_or`] needs of it.
pub(super) struct Sent<'a> {
    route: &'a Route,
    run_id: &'a str,
    message: &'a str,
}

impl<'a> Sent<'a> {
    pub(super) fn new(route: &'a Route, run_id: &'a str, message: &'a str) -> Self {
        Sent {
            route,
            run_id,
            message,
        }
    }
}

/// What [`command_or`] made of a send.
pub(super) enum CommandOr<T> {
    /// Not a command: its place in the connection's order, back for its run.
    Run(Option<AdmissionTurn>),
    /// A slash command, done: the request's last answer.
    Answered(Answer<Last<T>>),
}

/// Runs the request's message if it is a slash command, and gives its last answer (its
/// ack, if any, went through `first`); else gives its place in the connection's order
/// back, for a run. `out` is the connection's share of session operations.
pub(super) async fn command_or<D: CommandDoor>(
    gw: &Arc<Gateway>,
    session: &Session,
    out: &Out,
    first: RunAnswers<'_, D>,
    sent: Sent<'_>,
    turn: Option<AdmissionTurn>,
) -> CommandOr<D::Result> {
    // (A message with an inline directive never comes here: `turns.rs` tells it apart.)
    let Some(command) = super::commands::parse(sent.message) else {
        return CommandOr::Run(turn);
    };
    CommandOr::Answered(run_command(gw, session, out, first, &sent, command, turn).await)
}

/// Runs a `chat.send` or `agent` request whose message is `command`, in its connection's
/// order; its last answer.
async fn run_command<D: CommandDoor>(
    gw: &Arc<Gateway>,
    session: &Session,
    out: &Out,
    first: RunAnswers<'_, D>,
    sent: &Sent<'_>,
    command: Command,
    mut turn: Option<AdmissionTurn>,
) -> Answer<Last<D::Result>> {
    let (route, run_id) = (sent.route, sent.run_id);
    let needed = scope_of(&command);
    if !session.has_scope(needed) {
        return Err(missing_scope(needed));
    }
    // After the messages sent before it on this connection, before the ones after it: a
    // `/think high` then a question runs the question with the new level.
    if let Some(t) = &mut turn {
        t.wait_previous().await;
    }
    if let (Command::Stop, Some(stopped)) = (&command, D::STOPPED) {
        return stop(gw, route.clone(), stopped, turn).await;
    }
    let accepted_at = match accept(gw, first, sent).await {
        ControlFlow::Continue(accepted_at) => accepted_at,
        ControlFlow::Break(last) => return last,
    };
    let recorded_as = recorded_as(&command);
    let said = match command {
        // `/stop` by `agent`: its answer is a final result like any other.
        Command::Stop => aborted(
            gw.control
                .abort(route.session_key.clone(), None, StopReason::Command)
                .await,
        ),
        other => {
            let admin = session.has_scope(Scope::Admin);
            settings::perform(gw, out, route, other, admin).await
        }
    };
    let ts = now_ms();
    let rows = match recorded_as {
        Some(context_free) => {
            let c = Recording {
                run_id,
                command: sent.message,
                context_free,
                ts,
            };
            record(gw, route, c, &said).await
        }
        None => Vec::new(),
    };
    // The session's settings (and its transcript) are what the next message of this
    // connection runs with.
    drop(turn);
    let terminal = answer(gw, route, run_id, accepted_at, said, ts, rows).await;
    Ok(match D::DOOR {
        // The chat `final` just published is the answer.
        Door::Chat => Last::Acked,
        Door::Agent => Last::Stored {
            final_json: terminal.final_json.into(),
            after_hub: Some(gw.hub.published()),
        },
    })
}

/// Records the send as a run (R-A3) and acks it through `first` as its method acks a run;
/// gives its `acceptedAt`, or the send's last answer instead (a key used before, as its run
/// stands; a refusal).
async fn accept<D: CommandDoor>(
    gw: &Arc<Gateway>,
    first: RunAnswers<'_, D>,
    sent: &Sent<'_>,
) -> ControlFlow<Answer<Last<D::Result>>, u64> {
    let (route, run_id) = (sent.route, sent.run_id);
    let accepted_at = now_ms();
    let accepted = gw
        .db
        .accept(crate::gatewaydb::NewRun {
            run_id: run_id.to_owned(),
            agent_id: route.agent_id.clone(),
            session_key: route.session_key.clone(),
            accepted_at,
            request_hash: request_hash(sent.message, None, &[]),
        })
        .await;
    let existing = match accepted {
        Err(e) => {
            let e = ErrorShape::unavailable(format!("cannot accept the run: {e}"), Some(500));
            return ControlFlow::Break(Err(e));
        }
        Ok(AcceptOutcome::Conflict(why)) => return ControlFlow::Break(Err(conflict(run_id, &why))),
        Ok(AcceptOutcome::Existing(existing)) => existing,
        Ok(AcceptOutcome::Inserted) => {
            first.ack(D::accepted(route, run_id, accepted_at)).await;
            return ControlFlow::Continue(accepted_at);
        }
    };
    ControlFlow::Break(Ok(match replay(&existing, D::DOOR) {
        Replay::Ack(status) => Last::Result(Reply::now(D::replayed(route, run_id, status))),
        Replay::Final(final_json) => Last::Stored {
            final_json: final_json.into(),
            after_hub: None,
        },
    }))
}

/// The refusal of a send whose idempotency key named another request.
fn conflict(run_id: &str, why: &str) -> ErrorShape {
    let refused = crate::backend::local::StartRefused::Conflict {
        run_id: run_id.to_owned(),
        why: why.to_owned(),
    };
    ErrorShape::invalid(refused.to_string())
}

/// What a send whose key was used before answers (R-A3): the run as it stands, in the
/// shape of the method it came by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replay<'a> {
    /// The method's ack, with this status (`in_flight`; `ok`: a `chat.send` run that ended).
    Ack(&'static str),
    /// The `agent` final result, as stored.
    Final(&'a str),
}

/// How a send replays the run its key names.
fn replay(existing: &StoredRun, door: Door) -> Replay<'_> {
    match (existing, door) {
        (StoredRun::Active { .. }, Door::Chat | Door::Agent) => Replay::Ack("in_flight"),
        (StoredRun::Terminal { .. }, Door::Chat) => Replay::Ack("ok"),
        (StoredRun::Terminal { terminal, .. }, Door::Agent) => Replay::Final(&terminal.final_json),
    }
}

/// The `chat.send` ack of a run (a command's or the model's).
pub(super) fn chat_ack(run_id: &str, status: &str) -> ChatSendResult {
    ChatSendResult::Ack(ChatSendAck {
        run_id: run_id.to_owned(),
        status: status.into(),
    })
}

/// The `agent` ack of a command's run.
fn agent_ack(route: &Route, run_id: &str, status: &str, accepted_at: Option<u64>) -> AgentAck {
    AgentAck {
        run_id: run_id.to_owned(),
        session_key: route.session_key.clone(),
        agent_id: route.agent_id.clone(),
        status: status.into(),
        accepted_at,
    }
}

/// How a command is recorded in the transcript, as OpenClaw records commands: `None` not
/// at all (`/stop`), else whether it is context-free (`/status`).
fn recorded_as(command: &Command) -> Option<bool> {
    match command {
        Command::Stop => None,
        Command::Status | Command::Help | Command::Commands | Command::Usage(_) => Some(true),
        _ => Some(false),
    }
}

/// The reply to `/stop` by `agent`, from what the abort answered (R-A5).
fn aborted<E: std::fmt::Display>(answer: Result<Result<Vec<String>, E>, ControlError>) -> Said {
    match answer {
        Ok(Ok(ids)) if !ids.is_empty() => Said::plain("⚙️ Agent was aborted."),
        Ok(Ok(_)) => Said::plain("⚙️ Nothing to stop."),
        Ok(Err(m)) => Said::plain(format!("⚠️ {m}")),
        Err(e) => Said::plain(format!("⚠️ {}", control_error(e).message)),
    }
}

/// Aborts the runs of `session_key` (or the one `run_id` names) and says which ended, as
/// `chat.abort` answers; `/stop` by `chat.send` answers the same.
pub(super) async fn abort(
    gw: &Gateway,
    session_key: String,
    run_id: Option<String>,
    why: StopReason,
) -> Answer<ChatAbortResult> {
    let aborted = gw
        .control
        .abort(session_key, run_id, why)
        .await
        .map_err(control_error)?;
    let ids = aborted.map_err(|m| ErrorShape::invalid(m.to_string()))?;
    Ok(ChatAbortResult {
        ok: true,
        aborted: !ids.is_empty(),
        run_ids: ids,
    })
}

/// `/stop`: the session's runs end as `chat.abort` ends them, and the send is answered
/// with what `chat.abort` answers (in the send's shape, `stopped`), after the aborted runs'
/// events, as OpenClaw; the connection's next message goes after that answer.
async fn stop<T>(
    gw: &Gateway,
    route: Route,
    stopped: fn(ChatAbortResult) -> T,
    turn: Option<AdmissionTurn>,
) -> Answer<Last<T>> {
    let result = abort(gw, route.session_key, None, StopReason::Command).await?;
    let reply = Reply::after_events(stopped(result), gw.hub.published());
    Ok(Last::Result(reply.then_next_turn(turn)))
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
    let place = rows.last().map(|(_, place)| place);
    let chat = reply_event(route, run_id, &said, ts, place);
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

/// The chat `final` of a command's send: its reply as the gateway's message (a status
/// notice if it tells of a change), at `place` when recorded in the transcript.
fn reply_event(
    route: &Route,
    run_id: &str,
    said: &Said,
    ts: u64,
    place: Option<&MessagePlace>,
) -> ChatEvent {
    let message = ChatMessage {
        content: vec![TextBlock {
            status_notice: said.notice,
            ..TextBlock::new(&said.text)
        }],
        injected: Some(Injected::reply_to(run_id)),
        recorded: place.cloned(),
        ..ChatMessage::assistant(&said.text, ts)
    };
    ChatEvent {
        run_id: run_id.to_owned(),
        session_key: route.session_key.clone(),
        agent_id: route.agent_id.clone(),
        seq: 1,
        state: ChatState::Final {
            message: Some(message),
            stop_reason: Some("stop".into()),
            message_id: place.map(|p| p.id.clone()),
            message_seq: place.map(|p| p.seq),
        },
    }
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
    let op = CommandOp {
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
        Ok(recorded) => recorded
            .messages
            .iter()
            .filter_map(crate::projection::display_message)
            .collect(),
        // A reply of another kind was logged where it was found; this says what it cost.
        Err(e) => {
            tracing::warn!(error = %e, "Cannot record a command in the session's history.");
            Vec::new()
        }
    }
}
