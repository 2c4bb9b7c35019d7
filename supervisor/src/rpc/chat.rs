//! `chat.history` / `chat.startup` (the page form) and `chat.inject`.

use super::*;
use ipc::control::SessionReply;
use ipc::gateway::{
    ChatEvent, ChatHistoryParams, ChatHistoryResult, ChatInjectParams, ChatInjectResult,
    ChatMessage, ChatState, HistoryPage, InputConsumption, InputReceipt,
};

/// Most bytes of messages a page carries when the client names no `maxBytes` (the worker's
/// cap, under the control link's frame cap).
const DEFAULT_HISTORY_BYTES: u64 = 8 * 1024 * 1024;
/// The smallest `maxBytes` accepted (OpenClaw's floor).
const MIN_HISTORY_BYTES: u64 = 1024;

/// `chat.history` and `chat.startup` (`method`: which, for its error texts).
pub(super) async fn chat_history(
    gw: &Arc<Gateway>,
    out: &Out,
    method: Method,
    p: ChatHistoryParams,
) -> Answer<ChatHistoryResult> {
    let limit = p.limit.unwrap_or(200);
    let refuse =
        |why: &str| ErrorShape::invalid(format!("invalid {} params: {why}", method.as_str()));
    if !(1..=1000).contains(&limit) {
        return Err(refuse("limit must be 1..1000"));
    }
    if p.max_bytes.is_some_and(|b| b < MIN_HISTORY_BYTES) {
        return Err(refuse("maxBytes must be at least 1024"));
    }
    if p.cursor.is_some() && p.offset.is_some() {
        return Err(refuse("cursor cannot be used with offset"));
    }
    // Read with at most MAX_INPUT_RUN_IDS kept (`Capped`): more is refused.
    let input_run_ids = p.input_run_ids.clone().unwrap_or_default();
    if input_run_ids.more {
        return Err(refuse("inputRunIds holds at most 50 run ids"));
    }
    let route = routed(gw, method, &p.session_key, p.agent_id.as_deref())?;
    // This gateway hands out no delta cursors, so any cursor is one it cannot continue: the
    // client fetches a fresh page, as after a reset.
    if p.cursor.is_some() {
        return Ok(ChatHistoryResult::Reset(HistoryReset::default()));
    }
    let op = SessionOp::History {
        session_key: route.session_key.clone(),
        limit,
        // Past `i64::MAX` rows nothing is older.
        offset: p.offset.unwrap_or(0).min(i64::MAX as u64 / 2),
        max_bytes: Some(p.max_bytes.unwrap_or(DEFAULT_HISTORY_BYTES)),
        input_run_ids: input_run_ids.items.clone(),
    };
    let (session_id, stored, next_offset, consumed) =
        match session_op(gw, out, route.agent_id.clone(), op).await {
            Ok(SessionReply::History {
                session_id,
                messages,
                next_offset,
                consumed,
            }) => (session_id, messages, next_offset, consumed),
            Ok(other) => return Err(unexpected_reply(&other)),
            Err(e) => return Err(session_error(e)),
        };
    let info = session_info(gw, &route).await?;
    let active = info.active_run_ids.clone().unwrap_or_default();
    // A run still waiting in its lane is pending; one whose message is recorded is consumed;
    // a run this gateway does not know has no receipt (as OpenClaw's).
    let receipts = (!input_run_ids.items.is_empty()).then(|| {
        input_run_ids
            .items
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
            .collect::<Vec<_>>()
    });
    let consumptions = receipts.as_ref().map(|r| {
        r.iter()
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
    });
    let model = gw
        .config()
        .agent(&route.agent_id)
        .and_then(|a| a.model.clone());
    let page = HistoryPage {
        session_key: route.session_key.clone(),
        session_id,
        agent_id: route.agent_id.clone(),
        messages: stored
            .iter()
            .filter_map(|m| crate::projection::display_message(m).map(|(v, _)| v))
            .collect(),
        // Queued messages are not in the transcript yet; their texts are not listed, their
        // count is (a run that started is not pending).
        pending_inputs: PendingInputs {
            items: Vec::new(),
            total: active.len().saturating_sub(1) as u64,
        },
        input_receipts: receipts,
        input_consumptions: consumptions,
        has_more: next_offset.map(|_| true),
        next_offset,
        offset: p.offset,
        defaults: model.map(|m| HistoryDefaults {
            context_tokens: Some(m.context_tokens()),
            model_provider: m.provider,
            model: m.model,
        }),
        session_info: info,
    };
    Ok(ChatHistoryResult::Page(Box::new(page)))
}

/// Most characters of a `chat.inject` label.
const MAX_INJECT_LABEL: usize = 100;

pub(super) async fn chat_inject(
    gw: &Arc<Gateway>,
    out: &Out,
    p: ChatInjectParams,
) -> Answer<ChatInjectResult> {
    if p.message.trim().is_empty() {
        return Err(ErrorShape::invalid(
            "invalid chat.inject params: message must not be empty",
        ));
    }
    if p.message.len() > ipc::gateway::MAX_MESSAGE_BYTES {
        let msg = format!(
            "invalid chat.inject params: message is {} bytes; the limit is {} bytes",
            p.message.len(),
            ipc::gateway::MAX_MESSAGE_BYTES
        );
        return Err(ErrorShape::invalid(msg));
    }
    let label = p.label.as_deref().map(str::trim).filter(|l| !l.is_empty());
    if label.is_some_and(|l| l.chars().count() > MAX_INJECT_LABEL) {
        return Err(ErrorShape::invalid(
            "invalid chat.inject params: label is at most 100 characters",
        ));
    }
    let route = routed(
        gw,
        Method::ChatInject,
        &p.session_key,
        p.agent_id.as_deref(),
    )?;
    let text = match label {
        Some(l) => format!("[{l}]\n\n{}", p.message),
        None => p.message.clone(),
    };
    let op = SessionOp::Inject {
        session_key: route.session_key.clone(),
        text: text.clone(),
    };
    let (entry_id, place) = match session_op(gw, out, route.agent_id.clone(), op).await {
        Ok(SessionReply::Inject { message, .. }) => match message {
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
        },
        Ok(other) => return Err(unexpected_reply(&other)),
        Err(e) => return Err(session_error(e)),
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
