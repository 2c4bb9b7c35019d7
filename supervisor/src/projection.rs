//! The one place worker run events and terminals become what clients see: typed `agent`
//! and `chat` payloads, the final `agent` result and the `agent.wait` result (types in
//! `ipc::gateway`). Pure: no sockets, no hub; the link relay only transports what this builds.

use ipc::control::{
    Lifecycle, Phase, RetryReason, RunStatus, RunStatusPhase, RunStopReason, RunTerminal,
    StoredMedia, StoredMessage,
};
use ipc::gateway::{
    AgentData, AgentEvent, AgentMeta, AgentResult, AgentWaitResult, AssistantData, BlockData,
    ChatErrorKind, ChatEvent, ChatMessage, ChatState, CompactionData, CompactionPhase,
    LifecycleData, LifecyclePhase, MediaEntry, MediaImageLayout, MediaSlot, MessagePlace,
    ReplyPayload, ResultError, ResultMeta, RetryInfo, RunResult, RunStatusData, SessionMessage,
    SessionRow, SessionsChanged, TerminalReceipt, TerminalReply, ToolData, ToolPhase, UsageOut,
};
use serde_json::Value;

/// Identifies a run in event payloads.
pub struct RunRef<'a> {
    pub run_id: &'a str,
    pub session_key: &'a str,
    pub agent_id: &'a str,
}

impl RunRef<'_> {
    fn agent(&self, seq: u64, ts: u64, data: AgentData) -> AgentEvent {
        AgentEvent {
            run_id: self.run_id.to_owned(),
            seq,
            data,
            ts,
            session_key: self.session_key.to_owned(),
            agent_id: self.agent_id.to_owned(),
        }
    }

    fn chat(&self, seq: u64, state: ChatState) -> ChatEvent {
        ChatEvent {
            run_id: self.run_id.to_owned(),
            session_key: self.session_key.to_owned(),
            agent_id: self.agent_id.to_owned(),
            seq,
            state,
        }
    }
}

/// A lifecycle change, and for a terminal one the chat event that ends the run in the UI.
/// `text` is the run's assistant text so far (the chat `final` carries it); `recorded` is
/// where its reply was recorded (`{id, seq, runId}`), when it was.
pub fn lifecycle(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    l: &Lifecycle,
    text: &str,
    recorded: Option<&MessagePlace>,
) -> Option<(AgentEvent, Option<ChatEvent>)> {
    let phase = match l.phase {
        Phase::Start => LifecyclePhase::Start,
        Phase::Finishing => LifecyclePhase::Finishing,
        Phase::End => LifecyclePhase::End,
        Phase::Error => LifecyclePhase::Error,
        Phase::Unknown => return None,
    };
    let event = run.agent(
        seq,
        ts,
        AgentData::Lifecycle(LifecycleData {
            phase,
            started_at: l.started_at,
            ended_at: l.ended_at,
            error: l.error.clone(),
            stop_reason: stop_name(l.stop_reason),
            aborted: l.aborted,
        }),
    );
    let chat = match phase {
        LifecyclePhase::End => Some(ChatState::Final {
            message: (!text.is_empty()).then(|| ChatMessage {
                recorded: recorded.cloned(),
                ..ChatMessage::assistant(text, ts)
            }),
            stop_reason: stop_name(l.stop_reason),
            message_id: recorded.map(|r| r.id.clone()),
            message_seq: recorded.map(|r| r.seq),
        }),
        LifecyclePhase::Error if l.aborted == Some(true) => Some(ChatState::Aborted {
            stop_reason: stop_name(l.stop_reason),
            error_message: None,
            message: (!text.is_empty()).then(|| ChatMessage::assistant(text, ts)),
        }),
        LifecyclePhase::Error => Some(ChatState::Error {
            error_message: l.error.clone(),
            error_kind: if l.stop_reason == Some(RunStopReason::Timeout) {
                ChatErrorKind::Timeout
            } else {
                ChatErrorKind::Unknown
            },
            stop_reason: stop_name(l.stop_reason),
        }),
        LifecyclePhase::Start | LifecyclePhase::Finishing => None,
    };
    Some((event, chat.map(|c| run.chat(seq, c))))
}

/// A run's reply text as clients see it (issue 26 item 4, OpenClaw's shape): `agent`
/// events carry the current assistant message's text, which starts over with each message
/// (`itemId` `<run>:<n>`); chat deltas and the chat `final` carry the whole run's, each
/// message after a blank line.
#[derive(Debug, Default)]
pub struct ReplyText {
    /// The run's, messages joined by a blank line.
    run: String,
    /// The current message's.
    message: String,
    /// Messages begun: the current one's number.
    items: u32,
    /// The current message is over (recorded, or a tool call came): more text begins
    /// another.
    closed: bool,
}

impl ReplyText {
    /// Adds text of the current message; returns the chat delta (after a blank line when
    /// it begins a message after another).
    pub fn push(&mut self, delta: &str) -> String {
        if delta.is_empty() {
            return String::new();
        }
        let mut chat_delta = String::new();
        if self.items == 0 || self.closed {
            self.items += 1;
            self.closed = false;
            self.message.clear();
            if !self.run.is_empty() {
                chat_delta.push_str("\n\n");
            }
        }
        chat_delta.push_str(delta);
        self.run.push_str(&chat_delta);
        self.message.push_str(delta);
        chat_delta
    }

    /// The current assistant message ended: the next text is another.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// An earlier message of the run as the guards left it, in place of what was streamed
    /// of it (`kept` empty: cancelled, gone with its blank line): the latest whole message
    /// with that text. A current message still open is not looked in ([`ReplyText::settle`]
    /// is its own).
    pub fn replace_earlier(&mut self, streamed: &str, kept: &str) {
        if streamed.is_empty() {
            return;
        }
        let earlier = if self.closed {
            self.run.len()
        } else {
            self.run.len().saturating_sub(self.message.len())
        };
        let region = &self.run[..earlier];
        let whole = |at: usize| {
            let end = at + streamed.len();
            (at == 0 || region[..at].ends_with("\n\n"))
                && (end == region.len() || region[end..].starts_with("\n\n"))
        };
        let Some(at) = region
            .rmatch_indices(streamed)
            .map(|(at, _)| at)
            .find(|&at| whole(at))
        else {
            return;
        };
        // The match is the (closed) current message itself: it becomes what was kept.
        let current = at >= self.run.len() - self.message.len();
        let mut end = at + streamed.len();
        let mut start = at;
        if kept.is_empty() {
            if self.run[end..].starts_with("\n\n") {
                end += 2;
            } else if self.run[..start].ends_with("\n\n") {
                start -= 2;
            }
        }
        self.run.replace_range(start..end, kept);
        if current {
            self.message = kept.to_owned();
        }
    }

    /// The current message as it was recorded, in place of what was streamed of it (the
    /// `message_sending` guards changed the final reply; empty: they cancelled it).
    pub fn settle(&mut self, recorded: &str) {
        let kept = self.run.len().saturating_sub(self.message.len());
        self.run.truncate(kept);
        if recorded.is_empty() {
            let trimmed = self.run.trim_end_matches("\n\n").len();
            self.run.truncate(trimmed);
        } else {
            self.run.push_str(recorded);
        }
        self.message = recorded.to_owned();
    }

    /// The `itemId` of the assistant message text last went to (`None` before any).
    pub fn item_id(&self, run_id: &str) -> Option<String> {
        (self.items > 0).then(|| format!("{run_id}:{}", self.items))
    }

    /// The current message's text (what its `agent` events carry).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The whole run's text (the chat `final`).
    pub fn run(&self) -> &str {
        &self.run
    }

    pub fn is_empty(&self) -> bool {
        self.run.is_empty()
    }
}

/// Assistant text for the `agent` stream: the message's text so far, the `delta` (one or
/// more of the worker's, merged) and its `itemId`.
pub fn assistant(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    reply: &ReplyText,
    delta: &str,
) -> AgentEvent {
    run.agent(
        seq,
        ts,
        AgentData::Assistant(AssistantData {
            text: reply.message.clone(),
            delta: delta.to_owned(),
            item_id: Some(format!("{}:{}", run.run_id, reply.items)),
        }),
    )
}

/// Assistant text for the chat projection: the run's text so far and `chat_delta` (what
/// [`ReplyText::push`] returned, merged over the pace).
pub fn chat_delta(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    reply: &ReplyText,
    chat_delta: &str,
) -> ChatEvent {
    run.chat(
        seq,
        ChatState::Delta {
            delta_text: chat_delta.to_owned(),
            message: ChatMessage::assistant(&reply.run, ts),
        },
    )
}

/// Reasoning a run shows (`thinking` stream: the cumulative `text` and the `delta`); no chat
/// event: it is never the reply.
pub fn thinking(run: &RunRef<'_>, seq: u64, ts: u64, text: &str, delta: &str) -> AgentEvent {
    run.agent(
        seq,
        ts,
        AgentData::Thinking(AssistantData {
            text: text.to_owned(),
            delta: delta.to_owned(),
            item_id: None,
        }),
    )
}

/// A block of the reply (block streaming, R-D5): the `agent` `block` event, naming the
/// assistant message it was cut from (none for a reasoning block).
pub fn block(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    text: &str,
    index: u32,
    is_reasoning: bool,
    item_id: Option<String>,
) -> AgentEvent {
    run.agent(
        seq,
        ts,
        AgentData::Block(BlockData {
            text: text.to_owned(),
            index,
            is_reasoning,
            item_id,
        }),
    )
}

/// What a `run_status` event from the worker says.
pub struct RunStatusEvent {
    pub phase: RunStatusPhase,
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: RetryReason,
}

/// A retry of a model attempt (or its move to a fallback model): the `agent` `run_status`
/// event and the chat `status` with its `retry` (the run stays open; no terminal). `None`
/// for a phase this build does not know (a newer worker's): clients are told no phase the
/// gateway cannot name, nor a `starting_model` status it may not mean. A reason it does not
/// know still shows, as `unknown`: the phase says what happens.
pub fn run_status(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    s: &RunStatusEvent,
) -> Option<(AgentEvent, ChatEvent)> {
    let phase = match s.phase {
        RunStatusPhase::Retrying | RunStatusPhase::Fallback => s.phase.as_str(),
        RunStatusPhase::Unknown => return None,
    };
    let agent = run.agent(
        seq,
        ts,
        AgentData::RunStatus(RunStatusData {
            phase: phase.to_owned(),
            attempt: s.attempt,
            max_attempts: s.max_attempts,
            reason: s.reason.as_str().to_owned(),
        }),
    );
    let chat = run.chat(
        seq,
        ChatState::Status {
            phase: "starting_model".into(),
            retry: Some(RetryInfo {
                attempt: s.attempt,
                max_attempts: s.max_attempts,
                reason: s.reason.as_str().to_owned(),
            }),
        },
    );
    Some((agent, chat))
}

/// A recorded message as clients see it (`chat.history`, `session.message`): the stored
/// message with where it is (`__openclaw: {id, seq, runId?}`, as OpenClaw's has: clients
/// match live and fetched copies by it). A user message names the request that sent it
/// (`idempotencyKey`: its run id), which is how a client confirms a send. `None` when the
/// stored text is not a JSON object (a damaged row is left out, not sent half-made).
pub fn display_message(m: &StoredMessage) -> Option<(Value, MessagePlace)> {
    let mut message: Value = match m.omitted_bytes {
        Some(bytes) => serde_json::to_value(ChatMessage {
            role: m.role.clone(),
            content: vec![ipc::gateway::TextBlock::new(&format!(
                "[message omitted: {bytes} bytes, more than this history page may carry]"
            ))],
            timestamp: 0,
            recorded: None,
            injected: None,
        })
        .ok()?,
        None => serde_json::from_str(&m.message_json).ok()?,
    };
    let obj = message.as_object_mut()?;
    let stored: Vec<StoredMedia> = obj
        .remove("media")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let (media, media_image_layout) = media_entries(&stored);
    let context_free_command = obj
        .get("__openclaw")
        .and_then(|o| o.get("contextFreeCommand"))
        == Some(&Value::Bool(true));
    let place = MessagePlace {
        id: m.entry_id.clone(),
        seq: m.seq,
        run_id: m.run_id.clone(),
        media,
        media_image_layout,
        context_free_command,
    };
    if let (Some(run), "user") = (&m.run_id, m.role.as_str()) {
        obj.entry("idempotencyKey")
            .or_insert(Value::String(run.clone()));
    }
    obj.insert("__openclaw".into(), serde_json::to_value(&place).ok()?);
    Some((message, place))
}

/// A message's attachments as `chat.history` names them (`__openclaw.media`), and a slot
/// for each image.
fn media_entries(stored: &[StoredMedia]) -> (Vec<MediaEntry>, Option<MediaImageLayout>) {
    let media: Vec<MediaEntry> = stored
        .iter()
        .map(|s| MediaEntry {
            url: s.url(),
            content_type: s.mime_type.clone(),
            kind: s.kind.media_kind().to_owned(),
            file_name: s.file_name.clone(),
            size_bytes: s.size_bytes,
        })
        .collect();
    let slots: Vec<MediaSlot> = stored
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == ipc::control::AttachmentKind::Image)
        .map(|(i, _)| MediaSlot {
            kind: "inline".into(),
            fact_index: i,
        })
        .collect();
    let layout = (!slots.is_empty()).then_some(MediaImageLayout { slots });
    (media, layout)
}

/// Whether a recorded message is a reply (an assistant message without tool calls).
pub fn is_reply(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("assistant")
        && !message
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "toolCall"))
}

/// A `session.message` for a recorded message (`message`: as [`display_message`] shows it).
pub fn session_message(
    session_key: &str,
    agent_id: &str,
    message: Value,
    place: &MessagePlace,
) -> SessionMessage {
    SessionMessage {
        session_key: session_key.to_owned(),
        agent_id: agent_id.to_owned(),
        run_id: place.run_id.clone(),
        message_id: Some(place.id.clone()),
        message_seq: Some(place.seq),
        message,
    }
}

/// What a tool event from the worker says.
pub struct ToolEvent<'a> {
    pub phase: ipc::control::ToolPhase,
    pub tool_call_id: &'a str,
    pub name: &'a str,
    pub args_json: Option<&'a str>,
    pub result_json: Option<&'a str>,
    pub is_error: Option<bool>,
}

/// A `tool` stream event (`None` for a phase this gateway does not know).
pub fn tool(run: &RunRef<'_>, seq: u64, ts: u64, t: &ToolEvent<'_>) -> Option<AgentEvent> {
    use ipc::control::ToolPhase as From;
    let phase = match t.phase {
        From::Start => ToolPhase::Start,
        From::Update => ToolPhase::Update,
        From::Result => ToolPhase::Result,
        From::Unknown => return None,
    };
    let result = t.result_json.map(json_or_string);
    let (partial_result, result) = match phase {
        ToolPhase::Update => (result, None),
        _ => (None, result),
    };
    Some(run.agent(
        seq,
        ts,
        AgentData::Tool(ToolData {
            phase,
            name: t.name.to_owned(),
            tool_call_id: t.tool_call_id.to_owned(),
            args: t.args_json.map(args_object),
            partial_result,
            result,
            is_error: t.is_error,
        }),
    ))
}

/// Tool arguments as clients get them: always a JSON object. Arguments that are not an
/// object (malformed, or cut short) come as `{"raw": "<text>"}`.
fn args_object(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => serde_json::json!({ "raw": text }),
    }
}

fn json_or_string(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// What a compaction event from the worker says.
pub struct CompactionEvent<'a> {
    pub phase: ipc::control::CompactionPhase,
    pub completed: Option<bool>,
    pub will_retry: Option<bool>,
    pub reason: Option<&'a str>,
    pub messages: Option<u64>,
}

/// A `compaction` stream event (`None` for an unknown phase).
pub fn compaction(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    c: &CompactionEvent<'_>,
) -> Option<AgentEvent> {
    use ipc::control::CompactionPhase as From;
    let phase = match c.phase {
        From::Start => CompactionPhase::Start,
        From::End => CompactionPhase::End,
        From::Unknown => return None,
    };
    Some(run.agent(
        seq,
        ts,
        AgentData::Compaction(CompactionData {
            phase,
            completed: c.completed,
            will_retry: c.will_retry,
            reason: c.reason.map(str::to_owned),
            messages: c.messages,
        }),
    ))
}

/// The terminal events of a run the supervisor ends (its worker died, it was refused or
/// aborted before it ran): lifecycle `error` and chat `error`, or chat `aborted` when
/// `aborted` names a stop reason.
pub fn ended_by_gateway(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    started_at: Option<u64>,
    error: &str,
    aborted: Option<RunStopReason>,
) -> (AgentEvent, ChatEvent) {
    let agent = run.agent(
        seq,
        ts,
        AgentData::Lifecycle(LifecycleData {
            phase: LifecyclePhase::Error,
            started_at,
            ended_at: Some(ts),
            error: Some(error.to_owned()),
            stop_reason: stop_name(aborted),
            aborted: aborted.map(|_| true),
        }),
    );
    let state = match aborted {
        Some(reason) => ChatState::Aborted {
            stop_reason: Some(reason.as_str().to_owned()),
            error_message: None,
            message: None,
        },
        None => ChatState::Error {
            error_message: Some(error.to_owned()),
            error_kind: ChatErrorKind::Unknown,
            stop_reason: None,
        },
    };
    (agent, run.chat(seq, state))
}

/// The terminal events of a run whose message another run's turn carried (steered,
/// collected or summarized, R-B3): its outcome is that turn's, the reply text included.
pub fn carried_terminal(run: &RunRef<'_>, seq: u64, t: &RunTerminal) -> (AgentEvent, ChatEvent) {
    let ok = t.status == RunStatus::Ok;
    let l = Lifecycle {
        phase: if ok { Phase::End } else { Phase::Error },
        started_at: t.started_at,
        ended_at: Some(t.ended_at),
        error: t.error.clone(),
        stop_reason: t.stop_reason,
        aborted: (t.status == RunStatus::Aborted).then_some(true),
        session_id: None,
        session_key: None,
        carried_by: None,
        reply: None,
        guarded: Vec::new(),
        footer: None,
    };
    let text = t
        .payloads
        .iter()
        .map(|p| p.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    match lifecycle(run, seq, t.ended_at, &l, &text, None) {
        Some((agent, Some(chat))) => (agent, chat),
        // A terminal phase always has its chat event; this is only the type's other case.
        _ => ended_by_gateway(
            run,
            seq,
            t.ended_at,
            t.started_at,
            t.error.as_deref().unwrap_or("the run ended"),
            None,
        ),
    }
}

/// A steered run's message taken into another run's turn: its one event, a chat `final`
/// with no message (OpenClaw's shape; the answer streams in the carrier).
pub fn taken_in(run: &RunRef<'_>, seq: u64) -> ChatEvent {
    run.chat(
        seq,
        ChatState::Final {
            message: None,
            stop_reason: None,
            message_id: None,
            message_seq: None,
        },
    )
}

/// A session row's `status` after a run that ended with stored status `last` (`None`: no
/// run yet).
pub fn session_status(last: Option<&str>) -> &'static str {
    match last {
        None | Some("ok") => "done",
        Some("timeout") => "timeout",
        Some("aborted") => "killed",
        Some(_) => "failed",
    }
}

/// `sessions.changed` when a run starts.
pub fn session_run_started(run: &RunRef<'_>, ts: u64) -> SessionsChanged {
    let row = SessionRow::for_run(run.session_key, run.agent_id, "running", None);
    SessionsChanged::run("start", run.run_id, ts, row)
}

/// `sessions.changed` once a run's outcome is recorded; `active` is the complete set of the
/// session's runs still going.
pub fn session_run_ended(
    run: &RunRef<'_>,
    ts: u64,
    status: RunStatus,
    error: Option<&str>,
    active: Vec<String>,
) -> SessionsChanged {
    let phase = if status == RunStatus::Ok {
        "end"
    } else {
        "error"
    };
    let state = if active.is_empty() {
        session_status(Some(status.as_str()))
    } else {
        "running"
    };
    let mut row = SessionRow::for_run(run.session_key, run.agent_id, state, Some(active));
    row.last_run_id = Some(run.run_id.to_owned());
    // As OpenClaw: an aborted run is no error (its Control UI would show one), it is
    // `abortedLastRun`.
    if status == RunStatus::Aborted {
        row.aborted_last_run = Some(true);
    } else {
        row.last_run_error = error.map(str::to_owned);
    }
    row.updated_at = Some(ts);
    SessionsChanged::run(phase, run.run_id, ts, row)
}

/// `ok`, `timeout` (aborted runs too, with their stop reason, as OpenClaw) or `error`.
pub fn wire_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Ok => "ok",
        RunStatus::Timeout | RunStatus::Aborted => "timeout",
        RunStatus::Error | RunStatus::Unknown => "error",
    }
}

/// The final `agent` result of a run.
pub fn agent_result(t: &RunTerminal, session_key: &str, agent_id: &str) -> AgentResult {
    let summary = match t.status {
        RunStatus::Ok => "completed",
        RunStatus::Timeout | RunStatus::Aborted => "aborted",
        RunStatus::Error | RunStatus::Unknown => "failed",
    };
    let mut payloads: Vec<ReplyPayload> = t
        .payloads
        .iter()
        .map(|p| ReplyPayload {
            text: p.text.clone(),
            is_error: p.is_error,
        })
        .collect();
    if payloads.is_empty() {
        if let Some(err) = &t.error {
            payloads.push(ReplyPayload {
                text: err.clone(),
                is_error: true,
            });
        }
    }
    let usage = t.usage.map(|u| UsageOut {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        total: u.total,
    });
    let terminal_reply = (t.status == RunStatus::Ok).then(|| {
        if t.payloads.is_empty() {
            TerminalReply::Silent
        } else {
            let texts: Vec<&str> = t.payloads.iter().map(|p| p.text.as_str()).collect();
            TerminalReply::Visible {
                text: texts.join("\n\n"),
            }
        }
    });
    let error = t.error.as_ref().map(|message| ResultError {
        kind: match t.status {
            RunStatus::Timeout => "timeout",
            RunStatus::Aborted => "aborted",
            _ => "error",
        }
        .into(),
        message: message.clone(),
    });
    AgentResult {
        run_id: t.run_id.clone(),
        status: wire_status(t.status).into(),
        summary: summary.into(),
        stop_reason: stop_name(t.stop_reason),
        error: t.error.clone(),
        result: RunResult {
            payloads,
            meta: ResultMeta {
                duration_ms: t.duration_ms,
                agent_meta: AgentMeta {
                    session_id: t.session_id.clone(),
                    session_key: session_key.to_owned(),
                    agent_id: agent_id.to_owned(),
                    provider: t.provider.clone(),
                    model: t.model.clone(),
                    usage,
                },
                provider: t.provider.clone(),
                model: t.model.clone(),
                usage,
                stop_reason: stop_name(t.stop_reason),
                aborted: (t.status == RunStatus::Aborted).then_some(true),
                terminal_receipt: t.source_reply_delivered.then_some(TerminalReceipt {
                    source_reply_delivered: true,
                }),
                terminal_reply,
                error,
                fallbacks: (t.fallbacks > 0).then_some(t.fallbacks),
                carried_by: t.carried_by.clone(),
            },
        },
    }
}

/// The `agent.wait` result of a finished run, from its final result and times.
pub fn wait_result(r: &AgentResult, started_at: Option<u64>, ended_at: u64) -> AgentWaitResult {
    AgentWaitResult {
        run_id: r.run_id.clone(),
        status: r.status.clone(),
        timeout_phase: None,
        started_at,
        ended_at: Some(ended_at),
        error: r.error.clone(),
        stop_reason: r.stop_reason.clone(),
        terminal_receipt: r.result.meta.terminal_receipt,
        terminal_reply: r.result.meta.terminal_reply.clone(),
        provider: r.result.meta.provider.clone(),
        model: r.result.meta.model.clone(),
        fallbacks: r.result.meta.fallbacks,
        provider_started: None,
        carried_by: r.result.meta.carried_by.clone(),
    }
}

/// A stop reason as clients read it (`stopReason`): the name it crossed the link as.
fn stop_name(r: Option<RunStopReason>) -> Option<String> {
    r.map(|r| r.as_str().to_owned())
}

#[cfg(test)]
mod tests;
