//! Session methods: the index (`sessions.list`, `describe`, `preview`, `patch`, `reset`,
//! `delete`), subscriptions (`sessions.subscribe`, `sessions.messages.subscribe`) and the
//! session row clients see.

use super::*;
use ipc::control::{ResetReason, SessionReply};
use ipc::gateway::{
    Ignored, ResetEntry, SessionDeleted, SessionsDeleteParams, SessionsDescribeParams,
    SessionsPatchParams, SessionsPreviewParams, SessionsResetParams,
};

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
    // No session has a board or a person attached, nor was spawned by another (loopgate
    // has no subagents; the Control UI asks for a session's children): such a filter
    // matches none.
    // (A `null` filter reads as none.)
    let set = |v: &Option<Ignored>| v.is_some();
    let none_match = p.has_board == Some(true)
        || [
            &p.creator_id,
            &p.owner_id,
            &p.profile_id,
            &p.involving_profile_id,
            &p.spawned_by,
        ]
        .into_iter()
        .any(set);
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
    let end = offset as u64 + rows.len() as u64;
    let has_more = end < total;
    Ok(SessionsListResult {
        ts: now_ms(),
        path: crate::paths::gateway_db(&config.state_dir)
            .display()
            .to_string(),
        count: sessions.len() as u64,
        total_count: total,
        limit_applied: limit,
        offset,
        next_offset: has_more.then_some(end),
        has_more,
        owners: Vec::new(),
        defaults: SessionDefaults {
            default_agent_id: "main".into(),
            main_key: "main".into(),
            main_session_key: "agent:main:main".into(),
        },
        sessions,
    })
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

/// The session index row of one key, if the session exists.
pub(super) async fn find_session(
    gw: &Gateway,
    session_key: &str,
) -> Result<Option<crate::gatewaydb::SessionRow>, ErrorShape> {
    let q = SessionQuery {
        key: Some(session_key.to_owned()),
        limit: 1,
        ..SessionQuery::default()
    };
    let (rows, _) =
        gw.db.sessions(q).await.map_err(|e| {
            ErrorShape::unavailable(format!("cannot read the session: {e}"), Some(500))
        })?;
    Ok(rows.into_iter().next())
}

/// One session's row (`sessionInfo`), synthesized for a key with no run yet.
pub(super) async fn session_info(
    gw: &Arc<Gateway>,
    route: &Route,
) -> Result<SessionRow, ErrorShape> {
    let found = find_session(gw, &route.session_key).await?;
    session_info_of(gw, route, found.as_ref()).await
}

/// [`session_info`] of a row already read.
pub(super) async fn session_info_of(
    gw: &Arc<Gateway>,
    route: &Route,
    found: Option<&crate::gatewaydb::SessionRow>,
) -> Result<SessionRow, ErrorShape> {
    let active = gw.control.active_runs().await.map_err(control_error)?;
    let runs = active.get(&route.session_key).cloned().unwrap_or_default();
    let config = gw.config();
    Ok(match found {
        Some(r) => session_row(&config, r, runs),
        None => {
            let status = if runs.is_empty() { "done" } else { "running" };
            SessionRow::for_run(&route.session_key, &route.agent_id, status, Some(runs))
        }
    })
}

/// Sessions one connection may follow with `sessions.messages.subscribe`.
const MAX_MESSAGE_SUBSCRIPTIONS: usize = 1024;

/// `sessions.messages.subscribe` / `unsubscribe`: a follower gets the session's
/// `session.message` events (every connection gets all sessions' `agent` and `chat` events
/// anyway: loopgate does not offer `session-scoped-events`).
pub(super) async fn session_messages(gw: &Arc<Gateway>, req: Request, out: &Out, subscribe: bool) {
    let Some(p) = params::<m::SessionsMessagesSubscribe>(&req, out).await else {
        return;
    };
    let Some(route) = route_key(gw, &req, out, &p.key, p.agent_id.as_deref()).await else {
        return;
    };
    let full = {
        let mut keys = out.message_keys.lock().unwrap_or_else(|e| e.into_inner());
        if !subscribe {
            keys.remove(&route.session_key);
            false
        } else if keys.len() >= MAX_MESSAGE_SUBSCRIPTIONS && !keys.contains(&route.session_key) {
            true
        } else {
            keys.insert(route.session_key.clone());
            false
        }
    };
    if full {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(format!(
                    "a connection may follow at most {MAX_MESSAGE_SUBSCRIPTIONS} sessions"
                )),
            )
            .await;
    }
    if subscribe {
        out.watch_sessions(&gw.hub);
    }
    let approval_replay =
        (subscribe && p.include_approvals == Some(true)).then(|| ApprovalReplay {
            session_key: route.session_key.clone(),
            updated_at_ms: now_ms(),
            approvals: Vec::new(),
            truncated: false,
        });
    let result = SessionMessagesResult {
        subscribed: subscribe,
        key: route.session_key,
        approval_replay,
    };
    reply::<m::SessionsMessagesSubscribe>(out, &req.id, &result).await;
}

/// Longest session label.
pub(super) const MAX_LABEL_CHARS: usize = 200;

/// `sessions.patch`: a session's label, read mark, own model, thinking level, reasoning
/// visibility and queue mode. A model and a level are checked as an `agent` run's are.
pub(super) async fn sessions_patch(
    gw: &Arc<Gateway>,
    session: &Session,
    p: SessionsPatchParams,
) -> Answer<SessionsPatchResult> {
    let needed = Method::SessionsPatch
        .scope()
        .with_model_change(p.model.is_some());
    if !session.has_scope(needed) {
        return Err(missing_scope(needed));
    }
    let route = routed(gw, Method::SessionsPatch, &p.key, p.agent_id.as_deref())?;
    patch_session(gw, &route, &p).await
}

/// Applies a patch to the session routed (`sessions.patch`, and the commands that change
/// a setting) and tells subscribers.
pub(super) async fn patch_session(
    gw: &Arc<Gateway>,
    route: &Route,
    p: &ipc::gateway::SessionsPatchParams,
) -> Result<SessionsPatchResult, ErrorShape> {
    let invalid = |m: &str| ErrorShape::invalid(format!("invalid sessions.patch params: {m}"));
    if let Some(Some(l)) = &p.label {
        if l.chars().count() > MAX_LABEL_CHARS {
            let too_long = format!("label is longer than {MAX_LABEL_CHARS} characters");
            return Err(invalid(&too_long));
        }
    }
    let settings = patched_settings(gw, route, p).map_err(|e| invalid(&e.to_string()))?;
    let now = now_ms();
    let patch = crate::gatewaydb::SessionPatch {
        label: p
            .label
            .clone()
            .map(|l| l.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty())),
        last_read_at: p.unread.map(|unread| (!unread).then_some(now)),
        model_override: settings.model.clone(),
        thinking_level: settings.thinking.clone(),
        reasoning_level: settings.reasoning.clone(),
        queue_mode: settings
            .queue_mode
            .map(|m| m.map(|m| m.as_str().to_owned())),
        verbose_level: settings.verbose.map(|v| v.map(|v| v.as_str().to_owned())),
    };
    let row = gw
        .db
        .patch_session(
            route.session_key.clone(),
            route.agent_id.clone(),
            patch,
            now,
        )
        .await
        .map_err(|e| {
            ErrorShape::unavailable(format!("cannot change the session: {e}"), Some(500))
        })?;
    gw.update_session_overrides(&route.session_key, |o| settings.apply(o));
    let config = gw.config();
    let active = gw.control.active_runs().await.unwrap_or_default();
    let runs = active.get(&route.session_key).cloned().unwrap_or_default();
    let view = session_row(&config, &row, runs);
    gw.hub
        .publish_deferred(&crate::events::Deferred::sessions_changed(
            &SessionsChanged::changed("patch", now, view.clone()),
        ));
    Ok(SessionsPatchResult {
        ok: true,
        key: route.session_key.clone(),
        entry: PatchedEntry {
            session_id: row.session_id,
            updated_at: row.updated_at,
            label: row.label,
            last_read_at: row.last_read_at,
        },
        resolved: PatchResolved {
            model_provider: view.model_provider,
            model: view.model,
        },
    })
}

/// The session's own settings a patch changes: `None` leaves one as it is, `Some(None)`
/// clears it.
struct Settings {
    /// `<provider>/<model>`.
    model: Option<Option<String>>,
    thinking: Option<Option<String>>,
    reasoning: Option<Option<String>>,
    queue_mode: Option<Option<ipc::queue::QueueMode>>,
    verbose: Option<Option<ipc::thinking::VerboseLevel>>,
}

impl Settings {
    fn apply(self, o: &mut crate::gateway::SessionOverrides) {
        if let Some(m) = self.model {
            o.model = m;
        }
        if let Some(t) = self.thinking {
            o.thinking = t;
        }
        if let Some(r) = self.reasoning {
            o.reasoning = r;
        }
        if let Some(q) = self.queue_mode {
            o.queue_mode = q;
        }
        if let Some(v) = self.verbose {
            o.verbose = v;
        }
    }
}

/// Why `sessions.patch` refuses a setting (each names its key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PatchRefused {
    #[error("model: {0}")]
    Model(super::admission::ModelChoiceError),
    #[error("model: the agent has no model configured")]
    NoModel,
    #[error("thinkingLevel: {0}")]
    Thinking(super::thinking::LevelError),
    #[error("reasoningLevel: {0}")]
    Reasoning(super::thinking::LevelError),
    #[error("queueMode: {0:?} is not one of steer, followup, collect, interrupt")]
    QueueMode(String),
    #[error("invalid verboseLevel (use \"on\"|\"off\"|\"full\")")]
    Verbose,
}

/// Checks the settings a patch asks for, each as an `agent` run's would be; the error names
/// the key.
fn patched_settings(
    gw: &Gateway,
    route: &Route,
    p: &ipc::gateway::SessionsPatchParams,
) -> Result<Settings, PatchRefused> {
    let model = match &p.model {
        None => None,
        Some(None) => Some(None),
        Some(Some(m)) => Some(patched_model(gw, route, m)?),
    };
    let thinking = match &p.thinking_level {
        None => None,
        Some(None) => Some(None),
        Some(Some(l)) => Some(Some(
            patched_thinking(gw, route, l, model.as_ref()).map_err(PatchRefused::Thinking)?,
        )),
    };
    let reasoning = match &p.reasoning_level {
        None => None,
        Some(None) => Some(None),
        Some(Some(r)) => Some(Some(
            super::thinking::parse_reasoning(r)
                .map_err(PatchRefused::Reasoning)?
                .as_str()
                .to_owned(),
        )),
    };
    let queue_mode = match &p.queue_mode {
        None => None,
        Some(None) => Some(None),
        Some(Some(m)) => Some(Some(
            ipc::queue::QueueMode::parse(m).ok_or_else(|| PatchRefused::QueueMode(m.clone()))?,
        )),
    };
    let verbose = match &p.verbose_level {
        None => None,
        Some(None) => Some(None),
        Some(Some(v)) => Some(Some(
            ipc::thinking::VerboseLevel::parse(v).ok_or(PatchRefused::Verbose)?,
        )),
    };
    Ok(Settings {
        model,
        thinking,
        reasoning,
        queue_mode,
        verbose,
    })
}

/// A model of the session's own: checked as an `agent` run's `model` is, kept as
/// `<provider>/<model>` (the agent's own model clears it).
fn patched_model(gw: &Gateway, route: &Route, m: &str) -> Result<Option<String>, PatchRefused> {
    let config = gw.config();
    let Some((agent, own)) = config
        .agent(&route.agent_id)
        .and_then(|a| a.model.as_ref().map(|m| (a, m)))
    else {
        return Err(PatchRefused::NoModel);
    };
    let run_model =
        super::run_model(agent, own, None, Some(m.to_owned())).map_err(PatchRefused::Model)?;
    Ok(run_model.map(|r| format!("{}/{}", r.provider, r.model)))
}

/// A thinking level of the session's own, checked against the model its runs will use (the
/// one this patch sets, else the session's).
fn patched_thinking(
    gw: &Gateway,
    route: &Route,
    level: &str,
    model_override: Option<&Option<String>>,
) -> Result<String, super::thinking::LevelError> {
    let level = super::thinking::parse_level(level)?;
    let config = gw.config();
    let model = match model_override {
        Some(m) => m.clone(),
        None => gw.session_model(&route.session_key),
    };
    if let Some((agent, own)) = config
        .agent(&route.agent_id)
        .and_then(|a| a.model.as_ref().map(|m| (a, m)))
    {
        let run_model = model.as_deref().and_then(|m| {
            let (provider, model) = m.split_once('/')?;
            Some(ipc::control::RunModel {
                provider: provider.to_owned(),
                model: model.to_owned(),
            })
        });
        let (reasons, name) = super::thinking::model_reasons(agent, own, run_model.as_ref());
        super::thinking::check_level(level, reasons, &name)?;
    }
    Ok(level.as_str().to_owned())
}

/// `sessions.describe`: one session's row, `null` when there is no such session.
pub(super) async fn sessions_describe(
    gw: &Arc<Gateway>,
    p: SessionsDescribeParams,
) -> Answer<SessionsDescribeResult> {
    let route = routed(gw, Method::SessionsDescribe, &p.key, p.agent_id.as_deref())?;
    // One read of the index: the row it found is the one described.
    let session = match find_session(gw, &route.session_key).await? {
        Some(found) => Some(session_info_of(gw, &route, Some(&found)).await?),
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
        let route = routed(gw, Method::SessionsPreview, key, None)?;
        let known = matches!(find_session(gw, &route.session_key).await, Ok(Some(_)));
        if !known {
            previews.push(SessionPreview {
                key: key.clone(),
                status: "missing".into(),
                items: Vec::new(),
            });
            continue;
        }
        // Tool rows are skipped, so read more than `limit` rows.
        let op = SessionOp::History {
            session_key: route.session_key.clone(),
            limit: (limit * 4).min(1000) as u32,
            offset: 0,
            max_bytes: None,
            input_run_ids: Vec::new(),
        };
        let preview = match session_op(gw, out, route.agent_id.clone(), op).await {
            Ok(SessionReply::History { messages, .. }) => {
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
                    key: key.clone(),
                    status: if items.is_empty() { "empty" } else { "ok" }.into(),
                    items,
                }
            }
            Ok(_) | Err(_) => SessionPreview {
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
pub(super) async fn sessions_subscribe(gw: &Arc<Gateway>, req: Request, out: &Out) {
    let Some(p) = params::<m::SessionsSubscribe>(&req, out).await else {
        return;
    };
    out.sessions_subscribed.store(true, Ordering::Relaxed);
    out.watch_sessions(&gw.hub);
    if p == SessionsListParams::default() {
        let result = SessionsSubscribeResult {
            subscribed: true,
            list: None,
        };
        return reply::<m::SessionsSubscribe>(out, &req.id, &result).await;
    }
    match session_page(gw, &p).await {
        Ok(list) => {
            let result = SessionsSubscribeResult {
                subscribed: true,
                list: Some(list),
            };
            reply::<m::SessionsSubscribe>(out, &req.id, &result).await
        }
        Err(e) => out.err(&req.id, e).await,
    }
}

pub(super) async fn sessions_reset(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsResetParams,
) -> Answer<SessionsResetResult> {
    let reason = match p.reason.as_deref() {
        None | Some("reset") => ResetReason::Reset,
        Some("new") => ResetReason::New,
        Some(_) => {
            return Err(ErrorShape::invalid(
                "invalid sessions.reset params: reason must be \"new\" or \"reset\"",
            ))
        }
    };
    let route = routed(gw, Method::SessionsReset, &p.key, p.agent_id.as_deref())?;
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
    let op = SessionOp::Reset {
        session_key: route.session_key.clone(),
        reason,
    };
    match session_op(gw, out, route.agent_id.clone(), op).await {
        Ok(SessionReply::Reset {
            session_id,
            updated_at,
        }) => {
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
        Ok(other) => Err(unexpected_reply(&other)),
        Err(e) => Err(session_error(e)),
    }
}

pub(super) async fn sessions_delete(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SessionsDeleteParams,
) -> Answer<SessionsDeleteResult> {
    let route = routed(gw, Method::SessionsDelete, &p.key, p.agent_id.as_deref())?;
    if p.archived_only.unwrap_or(false) {
        // loopgate does not archive sessions, so there is nothing archived to delete.
        return Ok(SessionsDeleteResult {
            ok: true,
            key: route.session_key,
            deleted: false,
            archived: Vec::new(),
        });
    }
    let op = SessionOp::Delete {
        session_key: route.session_key.clone(),
        delete_transcript: p.delete_transcript.unwrap_or(true),
    };
    match session_op(gw, out, route.agent_id.clone(), op).await {
        Ok(SessionReply::Delete { deleted: in_agent }) => {
            let in_index = gw
                .db
                .delete_session(route.session_key.clone())
                .await
                .unwrap_or(false);
            let deleted = in_agent || in_index;
            gw.clear_session_overrides(&route.session_key);
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
        Ok(other) => Err(unexpected_reply(&other)),
        Err(e) => Err(session_error(e)),
    }
}
