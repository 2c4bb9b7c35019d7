//! Session methods: the index (`sessions.list`, `describe`, `preview`, `reset`, `delete`;
//! `patch` is `patch.rs`), subscriptions (`sessions.subscribe`, `sessions.messages.subscribe`) and the
//! session row clients see.

use super::*;
use ipc::control::ResetReason;
use ipc::gateway::{
    Ignored, ResetEntry, SessionDeleted, SessionMessagesParams, SessionsDeleteParams,
    SessionsDescribeParams, SessionsPreviewParams, SessionsResetParams,
};
use ipc::session_ops::{DeleteOp, HistoryOp, ResetOp, ResetReply};

/// One page of the session index, with each session's live run state.
pub(super) async fn session_page(
    gw: &Arc<Gateway>,
    p: &SessionsListParams,
) -> Result<SessionsListResult, ErrorShape> {
    let limit = p.limit.unwrap_or(100).clamp(1, 1000);
    let offset = p.offset.unwrap_or(0);
    let agent_id = match &p.agent_id {
        Some(raw) => match AgentId::parse(raw) {
            Ok(id) if gw.config().agent(id.as_str()).is_some() => Some(id.as_str().to_owned()),
            _ => {
                return Err(ErrorShape::invalid(format!(
                    "invalid sessions.list params: unknown agent id {raw:?}"
                )))
            }
        },
        None => None,
    };
    let none_match = matches_none(p);
    let q = SessionQuery {
        agent_id,
        updated_since: p
            .active_minutes
            .map(|m| now_ms().saturating_sub(m.saturating_mul(60_000))),
        search: p.search.clone().filter(|s| !s.is_empty()),
        key: None,
        limit,
        offset,
    };
    let (rows, total) = if none_match {
        (Vec::new(), 0)
    } else {
        gw.db
            .sessions(q)
            .await
            .map_err(|e| ErrorShape::unavailable(format!("cannot list sessions: {e}"), Some(500)))?
    };
    let active = gw.control.active_runs().await.map_err(control_error)?;
    let config = gw.config();
    let sessions: Vec<SessionRow> = rows
        .iter()
        .filter(|r| !p.active_only.unwrap_or(false) || active.contains_key(&r.session_key))
        .map(|r| {
            let runs = active.get(&r.session_key).cloned().unwrap_or_default();
            session_row(&config, r, runs)
        })
        .collect();
    let next_offset = next_offset(offset, rows.len(), total);
    Ok(SessionsListResult {
        ts: now_ms(),
        path: crate::paths::gateway_db(&config.state_dir)
            .display()
            .to_string(),
        count: sessions.len() as u64,
        total_count: total,
        limit_applied: limit,
        offset,
        next_offset,
        has_more: next_offset.is_some(),
        owners: Vec::new(),
        defaults: SessionDefaults {
            default_agent_id: "main".into(),
            main_key: "main".into(),
            main_session_key: "agent:main:main".into(),
        },
        sessions,
    })
}

/// Whether a list's filters match no session at all: no session has a board or a person
/// attached, nor was spawned by another (loopgate has no subagents; the Control UI asks
/// for a session's children). A `null` filter reads as none.
fn matches_none(p: &SessionsListParams) -> bool {
    let set = |v: &Option<Ignored>| v.is_some();
    p.has_board == Some(true)
        || [
            &p.creator_id,
            &p.owner_id,
            &p.profile_id,
            &p.involving_profile_id,
            &p.spawned_by,
        ]
        .into_iter()
        .any(set)
}

/// The offset of the next page, when the `shown` rows from `offset` leave some of `total`.
fn next_offset(offset: u32, shown: usize, total: u64) -> Option<u64> {
    let end = u64::from(offset) + shown as u64;
    (end < total).then_some(end)
}

/// A session index row as clients see it, with its active runs (the complete set).
pub(super) fn session_row(
    config: &crate::config::Config,
    r: &crate::gatewaydb::SessionRow,
    runs: Vec<String>,
) -> SessionRow {
    let agent = config.agent(&r.agent_id);
    let model = agent.and_then(|a| a.model.as_ref());
    // The session's own model, if it has one and it is still configured.
    let own = r.model_override.as_deref().and_then(|o| {
        let (provider, name) = o.split_once('/')?;
        let p = agent?.providers.iter().find(|p| p.provider == provider)?;
        Some((provider.to_owned(), name.to_owned(), p.context_tokens()))
    });
    let running = !runs.is_empty();
    let aborted = r.last_status.as_deref() == Some(RunStatus::Aborted.as_str());
    let status = if running {
        "running"
    } else {
        crate::projection::session_status(r.last_status.as_deref())
    };
    SessionRow {
        session_id: r.session_id.clone(),
        updated_at: Some(r.updated_at),
        last_activity_at: Some(r.updated_at),
        created_at: Some(r.created_at),
        last_run_id: r.last_run_id.clone(),
        // As OpenClaw: an aborted run is no error; it is `abortedLastRun`.
        last_run_error: r.last_error.clone().filter(|_| !aborted),
        aborted_last_run: aborted.then_some(true),
        input_tokens: Some(r.input_tokens),
        output_tokens: Some(r.output_tokens),
        total_tokens: Some(r.total_tokens),
        model: own
            .as_ref()
            .map(|o| o.1.clone())
            .or(model.map(|m| m.model.clone())),
        model_provider: own
            .as_ref()
            .map(|o| o.0.clone())
            .or(model.map(|m| m.provider.clone())),
        context_tokens: own
            .as_ref()
            .map(|o| o.2)
            .or(model.map(|m| m.context_tokens())),
        label: r.label.clone(),
        last_read_at: r.last_read_at,
        thinking_level: r.thinking_level.clone(),
        reasoning_level: r.reasoning_level.clone(),
        queue_mode: r.queue_mode.clone(),
        verbose_level: r.verbose_level.clone(),
        response_usage: r.response_usage.clone(),
        trace_level: r.trace_level.clone(),
        effective_queue_mode: r
            .queue_mode
            .clone()
            .unwrap_or_else(|| config.queue.mode.as_str().to_owned()),
        // A session running now shows no previous run's end.
        started_at: r.last_run_started_at.filter(|_| !running),
        ended_at: r.last_run_ended_at.filter(|_| !running),
        runtime_ms: r
            .last_run_started_at
            .zip(r.last_run_ended_at)
            .filter(|_| !running)
            .map(|(s, e)| e.saturating_sub(s)),
        ..SessionRow::for_run(&r.session_key, &r.agent_id, status, Some(runs))
    }
}

/// The session index row of one key in the gateway db, if the session exists.
pub(super) async fn find_session(
    db: &GatewayDb,
    session_key: &str,
) -> Result<Option<crate::gatewaydb::SessionRow>, ErrorShape> {
    let q = SessionQuery {
        key: Some(session_key.to_owned()),
        limit: 1,
        ..SessionQuery::default()
    };
    let (rows, _) = db
        .sessions(q)
        .await
        .map_err(|e| ErrorShape::unavailable(format!("cannot read the session: {e}"), Some(500)))?;
    Ok(rows.into_iter().next())
}

/// One session's row (`sessionInfo`), synthesized for a key with no run yet.
pub(super) async fn session_info(
    gw: &Arc<Gateway>,
    route: &Route,
) -> Result<SessionRow, ErrorShape> {
    let found = find_session(&gw.db, &route.session_key).await?;
    session_info_of(&gw.control, &gw.config(), route, found.as_ref()).await
}

/// [`session_info`] of a row already read: with the runs the control actor has active,
/// the model as configured.
pub(super) async fn session_info_of(
    control: &ControlHandle,
    config: &Config,
    route: &Route,
    found: Option<&crate::gatewaydb::SessionRow>,
) -> Result<SessionRow, ErrorShape> {
    let active = control.active_runs().await.map_err(control_error)?;
    let runs = active.get(&route.session_key).cloned().unwrap_or_default();
    Ok(match found {
        Some(r) => session_row(config, r, runs),
        None => {
            let status = if runs.is_empty() { "done" } else { "running" };
            SessionRow::for_run(&route.session_key, &route.agent_id, status, Some(runs))
        }
    })
}

/// `sessions.messages.subscribe` / `unsubscribe` (`method`): a follower gets the session's
/// `session.message` events from the hub (every connection gets all sessions' `agent` and
/// `chat` events anyway: loopgate does not offer `session-scoped-events`); the key is routed
/// against the configured agents.
pub(super) fn session_messages(
    config: &Config,
    hub: &EventHub,
    following: Following<'_>,
    method: Method,
    p: SessionMessagesParams,
) -> Answer<SessionMessagesResult> {
    let subscribe = method == Method::SessionsMessagesSubscribe;
    let route = routed(config, method, &p.key, p.agent_id.as_deref())?;
    following
        .set_messages(hub, &route.session_key, subscribe)
        .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let approval_replay =
        (subscribe && p.include_approvals == Some(true)).then(|| ApprovalReplay {
            session_key: route.session_key.clone(),
            updated_at_ms: now_ms(),
            approvals: Vec::new(),
            truncated: false,
        });
    Ok(SessionMessagesResult {
        subscribed: subscribe,
        key: route.session_key,
        approval_replay,
    })
}

/// `sessions.describe`: one session's row, `null` when there is no such session.
pub(super) async fn sessions_describe(
    gw: &Arc<Gateway>,
    p: SessionsDescribeParams,
) -> Answer<SessionsDescribeResult> {
    let config = gw.config();
    let route = routed(
        &config,
        Method::SessionsDescribe,
        &p.key,
        p.agent_id.as_deref(),
    )?;
    // One read of the index: the row it found is the one described.
    let session = match find_session(&gw.db, &route.session_key).await? {
        Some(found) => Some(session_info_of(&gw.control, &config, &route, Some(&found)).await?),
        None => None,
    };
    Ok(SessionsDescribeResult { session })
}

/// `sessions.preview`: the newest visible user and assistant texts of up to 64 sessions.
pub(super) async fn sessions_preview(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsPreviewParams,
) -> Answer<SessionsPreviewResult> {
    let limit = p.limit.unwrap_or(12).clamp(1, 100) as usize;
    let max_chars = p.max_chars.unwrap_or(240).clamp(20, 800) as usize;
    let mut previews = Vec::new();
    for key in &p.keys.items {
        let route = routed(&gw.config(), Method::SessionsPreview, key, None)?;
        let known = matches!(find_session(&gw.db, &route.session_key).await, Ok(Some(_)));
        if !known {
            previews.push(SessionPreview {
                key: key.clone(),
                status: "missing".into(),
                items: Vec::new(),
            });
            continue;
        }
        // Tool rows are skipped, so read more than `limit` rows.
        let op = HistoryOp {
            session_key: route.session_key.clone(),
            limit: (limit * 4).min(1000) as u32,
            offset: 0,
            max_bytes: None,
            input_run_ids: Vec::new(),
        };
        let preview = match ask(gw, out, route.agent_id.clone(), op).await {
            Ok(page) => preview_of(key, &page.messages, limit, max_chars),
            Err(_) => SessionPreview {
                key: key.clone(),
                status: "error".into(),
                items: Vec::new(),
            },
        };
        previews.push(preview);
    }
    Ok(SessionsPreviewResult {
        ts: now_ms(),
        previews,
    })
}

/// A session's preview from its newest stored messages: the last `limit` user and
/// assistant texts (tool rows and empty texts skipped), each cut at `max_chars`.
fn preview_of(
    key: &str,
    messages: &[ipc::control::StoredMessage],
    limit: usize,
    max_chars: usize,
) -> SessionPreview {
    let mut items: Vec<PreviewItem> = messages
        .iter()
        .filter(|m| m.role == "user" || m.role == "assistant")
        .filter_map(|m| {
            let message: Value = serde_json::from_str(&m.message_json).ok()?;
            let text = preview_text(&message, max_chars);
            (!text.is_empty()).then(|| PreviewItem {
                role: m.role.clone(),
                text,
            })
        })
        .collect();
    let skip = items.len().saturating_sub(limit);
    items.drain(..skip);
    SessionPreview {
        key: key.to_owned(),
        status: if items.is_empty() { "empty" } else { "ok" }.into(),
        items,
    }
}

/// A message's text blocks, joined, cut at `max` characters with `...`.
pub(super) fn preview_text(message: &Value, max: usize) -> String {
    let text: String = message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

/// `sessions.subscribe`: this connection gets `sessions.changed` events from now until it
/// closes. Takes `sessions.list`'s params, as OpenClaw; with any of them set, the answer also
/// holds that list.
pub(super) async fn sessions_subscribe(
    gw: &Arc<Gateway>,
    following: Following<'_>,
    p: SessionsListParams,
) -> Answer<SessionsSubscribeResult> {
    following.subscribe_sessions(&gw.hub);
    let list = if p == SessionsListParams::default() {
        None
    } else {
        Some(session_page(gw, &p).await?)
    };
    Ok(SessionsSubscribeResult {
        subscribed: true,
        list,
    })
}

/// The reason a `sessions.reset` names (`reset` unless said); `None` for another word.
fn reset_reason(reason: Option<&str>) -> Option<ResetReason> {
    match reason {
        None | Some("reset") => Some(ResetReason::Reset),
        Some("new") => Some(ResetReason::New),
        Some(_) => None,
    }
}

/// `sessions.reset`: the session's transcript starts afresh (`reason` `new` or `reset`).
pub(super) async fn sessions_reset(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsResetParams,
) -> Answer<SessionsResetResult> {
    let Some(reason) = reset_reason(p.reason.as_deref()) else {
        return Err(ErrorShape::invalid(
            "invalid sessions.reset params: reason must be \"new\" or \"reset\"",
        ));
    };
    let route = routed(
        &gw.config(),
        Method::SessionsReset,
        &p.key,
        p.agent_id.as_deref(),
    )?;
    reset_session(gw, out, route, reason).await
}

/// Starts the session's transcript afresh, keeping its id (`sessions.reset`, `/new`,
/// `/reset`); subscribers drop what they show of the old one.
pub(super) async fn reset_session(
    gw: &Arc<Gateway>,
    out: &Out,
    route: Route,
    reason: ResetReason,
) -> Result<SessionsResetResult, ErrorShape> {
    let op = ResetOp {
        session_key: route.session_key.clone(),
        reason,
    };
    let ResetReply {
        session_id,
        updated_at,
    } = ask(gw, out, route.agent_id.clone(), op)
        .await
        .map_err(ask_error)?;
    // Subscribers drop what they show of the old transcript (`reason` `new`/`reset`).
    if let Ok(mut row) = session_info(gw, &route).await {
        row.session_id = Some(session_id.clone());
        gw.hub
            .publish_deferred(&crate::events::Deferred::sessions_changed(
                &SessionsChanged::changed(reason.as_str(), now_ms(), row),
            ));
    }
    Ok(SessionsResetResult {
        ok: true,
        key: route.session_key,
        entry: ResetEntry {
            session_id,
            updated_at,
        },
        resolved: ResolvedAgentRef {
            agent_id: route.agent_id,
        },
    })
}

pub(super) async fn sessions_delete(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsDeleteParams,
) -> Answer<SessionsDeleteResult> {
    let route = routed(
        &gw.config(),
        Method::SessionsDelete,
        &p.key,
        p.agent_id.as_deref(),
    )?;
    if p.archived_only.unwrap_or(false) {
        // loopgate does not archive sessions, so there is nothing archived to delete.
        return Ok(SessionsDeleteResult {
            ok: true,
            key: route.session_key,
            deleted: false,
            archived: Vec::new(),
        });
    }
    let op = DeleteOp {
        session_key: route.session_key.clone(),
        delete_transcript: p.delete_transcript.unwrap_or(true),
    };
    let in_agent = ask(gw, out, route.agent_id.clone(), op)
        .await
        .map_err(ask_error)?
        .deleted;
    let in_index = gw
        .db
        .delete_session(route.session_key.clone())
        .await
        .unwrap_or(false);
    let deleted = in_agent || in_index;
    gw.sessions.clear(&route.session_key);
    if deleted {
        // Subscribers drop the session from their lists.
        gw.hub
            .publish_deferred(&crate::events::Deferred::session_deleted(
                &SessionDeleted::new(&route.session_key, &route.agent_id, now_ms()),
            ));
    }
    Ok(SessionsDeleteResult {
        ok: true,
        key: route.session_key,
        deleted,
        archived: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
