//! `sessions.patch`: the settings a session keeps of its own (label, read mark, model,
//! thinking level, reasoning visibility, queue mode, verbose level). Each is checked as an
//! `agent` run's would be by [`checked_patch`] (pure: the agent's config and the session's
//! model in, the settings or the refusal out), then stored and told to subscribers. The
//! commands that change a setting (`/think`, `/model`, ...) apply theirs here too.

use super::*;
use crate::session_settings::QueueOptions;
use ipc::gateway::SessionsPatchParams;

/// Longest session label.
pub(super) const MAX_LABEL_CHARS: usize = 200;

/// `sessions.patch`: a session's label, read mark, own model, thinking level, reasoning
/// visibility and queue mode. A model and a level are checked as an `agent` run's are.
pub(super) async fn sessions_patch(
    gw: &Arc<Gateway>,
    session: &Session,
    p: SessionsPatchParams,
) -> Answer<SessionsPatchResult> {
    // A model change, like a trace level (a trace shows what the model was sent), is an
    // admin's, as OpenClaw's `/trace`.
    let needed = Method::SessionsPatch
        .scope()
        .with_model_change(p.model.is_some() || p.trace_level.is_some());
    if !session.has_scope(needed) {
        return Err(missing_scope(needed));
    }
    let route = routed(
        &gw.config(),
        Method::SessionsPatch,
        &p.key,
        p.agent_id.as_deref(),
    )?;
    patch_session(gw, &route, &p).await
}

/// Applies a patch to the session routed (`sessions.patch`, and the commands that change
/// a setting) and tells subscribers.
pub(super) async fn patch_session(
    gw: &Arc<Gateway>,
    route: &Route,
    p: &SessionsPatchParams,
) -> Result<SessionsPatchResult, ErrorShape> {
    patch_session_with(gw, route, p, None).await
}

/// Like [`patch_session`], also changing the session's own queue options (`/queue`):
/// `Some(None)` clears them, `Some(Some(o))` sets the ones `o` gives.
pub(super) async fn patch_session_with(
    gw: &Arc<Gateway>,
    route: &Route,
    p: &SessionsPatchParams,
    queue_options: Option<Option<QueueOptions>>,
) -> Result<SessionsPatchResult, ErrorShape> {
    let settings = {
        let config = gw.config();
        let ctx = PatchContext {
            agent: config.agent(&route.agent_id),
            session_model: gw.sessions.model(&route.session_key),
        };
        let mut settings = checked_patch(&ctx, p)
            .map_err(|e| ErrorShape::invalid(format!("invalid sessions.patch params: {e}")))?;
        settings.queue_options = queue_options;
        settings
    };
    let now = now_ms();
    let row = gw
        .db
        .patch_session(
            route.session_key.clone(),
            route.agent_id.clone(),
            stored_patch(p, &settings, now),
            now,
        )
        .await
        .map_err(|e| {
            ErrorShape::unavailable(format!("cannot change the session: {e}"), Some(500))
        })?;
    gw.sessions
        .update(&route.session_key, |o| settings.apply(o));
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

/// What the index stores of a checked patch at `now`: the label trimmed (a blank one
/// clears it), the read mark set (`unread: false`) or cleared (`unread: true`).
fn stored_patch(
    p: &SessionsPatchParams,
    settings: &Settings,
    now: u64,
) -> crate::gatewaydb::SessionPatch {
    crate::gatewaydb::SessionPatch {
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
        response_usage: settings
            .response_usage
            .map(|u| u.map(|u| u.as_str().to_owned())),
        trace_level: settings.trace.map(|t| t.map(|t| t.as_str().to_owned())),
        queue_options: settings.queue_options.map(|o| {
            o.map(|o| crate::gatewaydb::StoredQueueOptions {
                debounce_ms: o.debounce_ms,
                cap: o.cap,
                drop: o.drop.map(|d| d.as_str().to_owned()),
            })
        }),
    }
}

/// The session's own settings a patch changes: `None` leaves one as it is, `Some(None)`
/// clears it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    /// `<provider>/<model>`.
    model: Option<Option<String>>,
    thinking: Option<Option<String>>,
    reasoning: Option<Option<String>>,
    queue_mode: Option<Option<ipc::queue::QueueMode>>,
    verbose: Option<Option<ipc::thinking::VerboseLevel>>,
    response_usage: Option<Option<ipc::footer::ResponseUsage>>,
    trace: Option<Option<ipc::footer::TraceLevel>>,
    /// Only from `/queue`: `sessions.patch` has no such params.
    queue_options: Option<Option<QueueOptions>>,
}

impl Settings {
    /// The session's own settings after the patch.
    fn apply(self, o: &mut crate::session_settings::SessionOverrides) {
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
        if let Some(u) = self.response_usage {
            o.response_usage = u;
        }
        if let Some(t) = self.trace {
            o.trace = t;
        }
        match self.queue_options {
            None => {}
            Some(None) => o.queue_options = QueueOptions::default(),
            Some(Some(newer)) => o.queue_options = o.queue_options.with(newer),
        }
    }
}

/// Why `sessions.patch` refuses a setting (each names its key); answered as
/// `invalid sessions.patch params: <this>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PatchRefused {
    #[error("label is longer than {MAX_LABEL_CHARS} characters")]
    LabelLength,
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
    #[error("invalid responseUsage (use \"off\"|\"tokens\"|\"full\")")]
    ResponseUsage,
    #[error("invalid traceLevel (use \"on\"|\"off\"|\"raw\")")]
    Trace,
}

/// What a patch is checked against.
struct PatchContext<'a> {
    /// The session's agent, as configured (`None`: not configured).
    agent: Option<&'a crate::config::AgentConfig>,
    /// The session's own model (`<provider>/<model>`), before this patch.
    session_model: Option<String>,
}

/// Checks a patch: its label's length, then each setting as an `agent` run's would be;
/// the error names the key.
fn checked_patch(
    ctx: &PatchContext<'_>,
    p: &SessionsPatchParams,
) -> Result<Settings, PatchRefused> {
    if let Some(Some(l)) = &p.label {
        if l.chars().count() > MAX_LABEL_CHARS {
            return Err(PatchRefused::LabelLength);
        }
    }
    let model = match &p.model {
        None => None,
        Some(None) => Some(None),
        Some(Some(m)) => Some(patched_model(ctx, m)?),
    };
    let thinking = match &p.thinking_level {
        None => None,
        Some(None) => Some(None),
        Some(Some(l)) => Some(Some(
            patched_thinking(ctx, l, model.as_ref()).map_err(PatchRefused::Thinking)?,
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
    let response_usage = match &p.response_usage {
        None => None,
        Some(None) => Some(None),
        Some(Some(u)) => Some(Some(
            ipc::footer::ResponseUsage::parse(u).ok_or(PatchRefused::ResponseUsage)?,
        )),
    };
    let trace = match &p.trace_level {
        None => None,
        Some(None) => Some(None),
        Some(Some(t)) => Some(Some(
            ipc::footer::TraceLevel::parse(t).ok_or(PatchRefused::Trace)?,
        )),
    };
    Ok(Settings {
        model,
        thinking,
        reasoning,
        queue_mode,
        verbose,
        response_usage,
        trace,
        queue_options: None,
    })
}

/// The agent and its configured model, if it has one.
fn agent_model<'a>(
    ctx: &PatchContext<'a>,
) -> Option<(
    &'a crate::config::AgentConfig,
    &'a crate::config::ResolvedModel,
)> {
    ctx.agent.and_then(|a| a.model.as_ref().map(|m| (a, m)))
}

/// A model of the session's own: checked as an `agent` run's `model` is, kept as
/// `<provider>/<model>` (the agent's own model clears it).
fn patched_model(ctx: &PatchContext<'_>, m: &str) -> Result<Option<String>, PatchRefused> {
    let Some((agent, own)) = agent_model(ctx) else {
        return Err(PatchRefused::NoModel);
    };
    let run_model =
        super::run_model(agent, own, None, Some(m.to_owned())).map_err(PatchRefused::Model)?;
    Ok(run_model.map(|r| format!("{}/{}", r.provider, r.model)))
}

/// A thinking level of the session's own, checked against the model its runs will use (the
/// one this patch sets, else the session's).
fn patched_thinking(
    ctx: &PatchContext<'_>,
    level: &str,
    model_override: Option<&Option<String>>,
) -> Result<String, super::thinking::LevelError> {
    let level = super::thinking::parse_level(level)?;
    let model = match model_override {
        Some(m) => m.clone(),
        None => ctx.session_model.clone(),
    };
    if let Some((agent, own)) = agent_model(ctx) {
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

#[cfg(test)]
mod tests;
