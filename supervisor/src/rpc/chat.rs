//! `chat.history` / `chat.startup` (the page form) and `chat.inject`.

use super::*;
use ipc::gateway::{
    ChatEvent, ChatHistoryParams, ChatHistoryResult, ChatInjectParams, ChatInjectResult,
    ChatMessage, ChatState, HistoryPage, InputConsumption, InputReceipt,
};
use ipc::session_ops::{HistoryOp, InjectOp, InputConsumed, StoredMessage};

/// Most bytes of messages a page carries when the client names no `maxBytes` (the worker's
/// cap, under the control link's frame cap).
const DEFAULT_HISTORY_BYTES: u64 = 8 * 1024 * 1024;
/// The smallest `maxBytes` accepted (OpenClaw's floor).
const MIN_HISTORY_BYTES: u64 = 1024;

/// Why `chat.history` / `chat.startup` refuses its params; answered as
/// `invalid <method> params: <this>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum HistoryRefused {
    #[error("limit must be 1..1000")]
    Limit,
    #[error("maxBytes must be at least 1024")]
    MaxBytes,
    #[error("cursor cannot be used with offset")]
    CursorWithOffset,
    /// Read with at most `MAX_INPUT_RUN_IDS` kept (`Capped`): more is refused.
    #[error("inputRunIds holds at most 50 run ids")]
    TooManyRunIds,
}

/// The number of rows a history page asks for (200 unless said), once its params are
/// checked.
fn history_limit(p: &ChatHistoryParams) -> Result<u32, HistoryRefused> {
    let limit = p.limit.unwrap_or(200);
    if !(1..=1000).contains(&limit) {
        return Err(HistoryRefused::Limit);
    }
    if p.max_bytes.is_some_and(|b| b < MIN_HISTORY_BYTES) {
        return Err(HistoryRefused::MaxBytes);
    }
    if p.cursor.is_some() && p.offset.is_some() {
        return Err(HistoryRefused::CursorWithOffset);
    }
    if p.input_run_ids.as_ref().is_some_and(|ids| ids.more) {
        return Err(HistoryRefused::TooManyRunIds);
    }
    Ok(limit)
}

/// The runs whose sent message the page is asked to account for (`inputRunIds`).
fn asked_runs(p: &ChatHistoryParams) -> &[String] {
    p.input_run_ids.as_ref().map_or(&[], |ids| &ids.items)
}

/// The worker's read of the page `p` asks for, `limit` rows of `session_key`.
fn history_op(session_key: String, p: &ChatHistoryParams, limit: u32) -> HistoryOp {
    HistoryOp {
        session_key,
        limit,
        // Past `i64::MAX` rows nothing is older.
        offset: p.offset.unwrap_or(0).min(i64::MAX as u64 / 2),
        max_bytes: Some(p.max_bytes.unwrap_or(DEFAULT_HISTORY_BYTES)),
        input_run_ids: asked_runs(p).to_vec(),
    }
}

/// What the worker read of a session's transcript for one page.
struct HistoryRead {
    session_id: Option<String>,
    /// Oldest first.
    stored: Vec<StoredMessage>,
    next_offset: Option<u64>,
    /// The asked runs whose user message is recorded, with its entry.
    consumed: Vec<InputConsumed>,
}

/// `chat.history` and `chat.startup` (`method`: which, for its error texts).
pub(super) async fn chat_history(
    gw: &Arc<Gateway>,
    out: &Out,
    method: Method,
    p: ChatHistoryParams,
) -> Answer<ChatHistoryResult> {
    let limit = history_limit(&p)
        .map_err(|why| ErrorShape::invalid(format!("invalid {} params: {why}", method.as_str())))?;
    let route = routed(&gw.config(), method, &p.session_key, p.agent_id.as_deref())?;
    // This gateway hands out no delta cursors, so any cursor is one it cannot continue: the
    // client fetches a fresh page, as after a reset.
    if p.cursor.is_some() {
        return Ok(ChatHistoryResult::Reset(HistoryReset::default()));
    }
    let op = history_op(route.session_key.clone(), &p, limit);
    let read = read_history(gw, out, &route, op).await?;
    let info = session_info(gw, &route).await?;
    let defaults = gw
        .config()
        .agent(&route.agent_id)
        .and_then(|a| a.model.clone())
        .map(|m| HistoryDefaults {
            context_tokens: Some(m.context_tokens()),
            model_provider: m.provider,
            model: m.model,
        });
    let page = history_page(&route, &p, read, info, defaults);
    Ok(ChatHistoryResult::Page(Box::new(page)))
}

/// Reads one page of the session's transcript at its agent's worker.
async fn read_history(
    gw: &Arc<Gateway>,
    out: &Out,
    route: &Route,
    op: HistoryOp,
) -> Result<HistoryRead, ErrorShape> {
    let page = ask(gw, out, route.agent_id.clone(), op)
        .await
        .map_err(ask_error)?;
    Ok(HistoryRead {
        session_id: page.session_id,
        stored: page.messages,
        next_offset: page.next_offset,
        consumed: page.consumed,
    })
}

/// A run asked about, as the page tells it (R-A5): consumed once the transcript records
/// its message, pending while it waits in its lane (`active`), and not told at all when
/// this gateway does not know it (as OpenClaw's). `None` when no run was asked about.
fn receipts(
    asked: &[String],
    consumed: &[InputConsumed],
    active: &[String],
) -> Option<Vec<InputReceipt>> {
    (!asked.is_empty()).then(|| {
        asked
            .iter()
            .filter_map(
                |run_id| match consumed.iter().find(|c| &c.run_id == run_id) {
                    Some(c) => Some(InputReceipt::Consumed {
                        run_id: run_id.clone(),
                        consumed_by_event_id: c.entry_id.clone(),
                    }),
                    None => active.contains(run_id).then(|| InputReceipt::Pending {
                        run_id: run_id.clone(),
                    }),
                },
            )
            .collect()
    })
}

/// The consumed receipts again, in the shape `inputConsumptions` lists them.
fn consumptions(receipts: &[InputReceipt]) -> Vec<InputConsumption> {
    receipts
        .iter()
        .filter_map(|r| match r {
            InputReceipt::Consumed {
                run_id,
                consumed_by_event_id,
            } => Some(InputConsumption {
                run_id: run_id.clone(),
                consumed_by_event_id: consumed_by_event_id.clone(),
            }),
            InputReceipt::Pending { .. } => None,
        })
        .collect()
}

/// The page answered, from what the worker read and the session's row.
fn history_page(
    route: &Route,
    p: &ChatHistoryParams,
    read: HistoryRead,
    info: SessionRow,
    defaults: Option<HistoryDefaults>,
) -> HistoryPage {
    let active = info.active_run_ids.clone().unwrap_or_default();
    let receipts = receipts(asked_runs(p), &read.consumed, &active);
    HistoryPage {
        session_key: route.session_key.clone(),
        session_id: read.session_id,
        agent_id: route.agent_id.clone(),
        messages: read
            .stored
            .iter()
            .filter_map(|m| crate::projection::display_message(m).map(|(v, _)| v))
            .collect(),
        // Queued messages are not in the transcript yet; their texts are not listed, their
        // count is (a run that started is not pending).
        pending_inputs: PendingInputs {
            items: Vec::new(),
            total: active.len().saturating_sub(1) as u64,
        },
        input_consumptions: receipts.as_deref().map(consumptions),
        input_receipts: receipts,
        has_more: read.next_offset.map(|_| true),
        next_offset: read.next_offset,
        offset: p.offset,
        defaults,
        thinking_level: info.thinking_level.clone(),
        verbose_level: info.verbose_level.clone(),
        session_info: info,
    }
}

/// Most characters of a `chat.inject` label.
const MAX_INJECT_LABEL: usize = 100;

/// Why `chat.inject` refuses its params.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum InjectRefused {
    #[error("invalid chat.inject params: message must not be empty")]
    Empty,
    #[error("invalid chat.inject params: message is {0} bytes; the limit is {limit} bytes", limit = ipc::gateway::MAX_MESSAGE_BYTES)]
    TooLarge(usize),
    #[error("invalid chat.inject params: label is at most {MAX_INJECT_LABEL} characters")]
    LabelLength,
}

/// The note `chat.inject` records: the message, under its label (`[label]`) if it has one.
fn inject_text(p: &ChatInjectParams) -> Result<String, InjectRefused> {
    if p.message.trim().is_empty() {
        return Err(InjectRefused::Empty);
    }
    if p.message.len() > ipc::gateway::MAX_MESSAGE_BYTES {
        return Err(InjectRefused::TooLarge(p.message.len()));
    }
    let label = p.label.as_deref().map(str::trim).filter(|l| !l.is_empty());
    if label.is_some_and(|l| l.chars().count() > MAX_INJECT_LABEL) {
        return Err(InjectRefused::LabelLength);
    }
    Ok(match label {
        Some(l) => format!("[{l}]\n\n{}", p.message),
        None => p.message.clone(),
    })
}

/// `chat.inject`: a note recorded in the session's transcript as the gateway's message,
/// and told to followers.
pub(super) async fn chat_inject(
    gw: &Arc<Gateway>,
    out: &Out,
    p: ChatInjectParams,
) -> Answer<ChatInjectResult> {
    let text = inject_text(&p).map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let route = routed(
        &gw.config(),
        Method::ChatInject,
        &p.session_key,
        p.agent_id.as_deref(),
    )?;
    let op = InjectOp {
        session_key: route.session_key.clone(),
        text: text.clone(),
    };
    let injected = ask(gw, out, route.agent_id.clone(), op)
        .await
        .map_err(ask_error)?;
    let (entry_id, place) = match injected.message {
        Some(m) => {
            let shown = crate::projection::display_message(&m);
            (m.entry_id.clone(), shown)
        }
        None => {
            // Recorded, but history hides it (only `NO_REPLY`): nothing to tell.
            return Err(ErrorShape::invalid(
                "chat.inject: the message was recorded but is hidden from history (NO_REPLY)",
            ));
        }
    };
    if let Some((message, place)) = place {
        let ts = now_ms();
        let chat = ChatEvent {
            run_id: format!("inject-{entry_id}"),
            session_key: route.session_key.clone(),
            agent_id: route.agent_id.clone(),
            seq: 0,
            state: ChatState::Final {
                message: Some(ChatMessage {
                    recorded: Some(place.clone()),
                    ..ChatMessage::assistant(&text, ts)
                }),
                stop_reason: Some("stop".into()),
                message_id: Some(place.id.clone()),
                message_seq: Some(place.seq),
            },
        };
        gw.hub
            .publish_deferred(&crate::events::Deferred::chat(&chat));
        gw.hub
            .publish_deferred(&crate::events::Deferred::session_message(
                &crate::projection::session_message(
                    &route.session_key,
                    &route.agent_id,
                    message,
                    &place,
                ),
            ));
    }
    Ok(ChatInjectResult {
        ok: true,
        message_id: entry_id,
    })
}

#[cfg(test)]
mod tests;
