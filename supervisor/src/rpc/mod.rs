//! Method handlers: one function per Gateway method, each validating its params, checking
//! scopes and answering on the connection's [`Out`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{RunStatus, RunTerminal, SessionOp, StopReason, SubmitRun};
use ipc::gateway::{m, MethodSpec, Scope};
use ipc::gateway::{
    AgentAck, AgentHealth, AgentHeartbeatStatus, AgentParams, AgentSessions, AgentSummary,
    AgentWaitResult, AgentsListResult, ApprovalReplay, ChatAbortResult, ChatSendAck, CliAgentRow,
    CliAgents, CliProjection, DrainResult, ErrorShape, HealthResult, Heartbeat, HeartbeatStatus,
    HistoryDefaults, HistoryReset, Method, PatchResolved, PatchedEntry, PendingInputs, PreviewItem,
    QuestionListResult, RecentSession, RequestFrame, ResolvedAgentRef, SessionDefaults,
    SessionDefaultsStatus, SessionMessagesResult, SessionPreview, SessionRow, SessionSummary,
    SessionsChanged, SessionsDeleteResult, SessionsDescribeResult, SessionsListParams,
    SessionsListResult, SessionsPatchResult, SessionsPreviewResult, SessionsResetResult,
    SessionsStatus, SessionsSubscribeResult, StatusSummary, TaskAudit, TaskCounts,
    DEFAULT_WAIT_TIMEOUT_MS,
};
use ipc::{ErrorCode, RpcError};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::config::AgentId;
use crate::connection::out::Out;
use crate::connection::peer::Session;
use crate::control::{ControlError, Dispatch, WaitReply};
use crate::events::now_ms;
use crate::gateway::Gateway;
use crate::gatewaydb::{AcceptOutcome, NewRun, SessionQuery, StoredRun};
use crate::outcome::{stored_wait_result, Outcome, StoredFinal};

mod absent;
mod approvals;
mod chat;
mod compact;
mod create;
mod devices;
pub(crate) mod diagnostics;
mod resume;
mod sessions;
mod thinking;
use absent::*;
use chat::*;
use compact::*;
use create::*;
use devices::*;
use sessions::*;

/// A turn request's place in its connection's order of admission: it is admitted after
/// the one read before it (`previous` resolves when that one is dispatched or refused) and
/// lets the next one go when dropped. So messages sent back to back on one connection run
/// and are recorded in the order they were sent, though each is handled concurrently.
pub struct AdmissionTurn {
    previous: Option<tokio::sync::oneshot::Receiver<()>>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl AdmissionTurn {
    /// The next turn after `previous` (the receiver of the turn before, if any); returns it
    /// and the receiver the next turn waits on.
    pub fn after(
        previous: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> (AdmissionTurn, tokio::sync::oneshot::Receiver<()>) {
        let (done, next) = tokio::sync::oneshot::channel();
        (
            AdmissionTurn {
                previous,
                done: Some(done),
            },
            next,
        )
    }

    async fn wait_previous(&mut self) {
        if let Some(p) = self.previous.take() {
            let _ = p.await;
        }
    }
}

impl Drop for AdmissionTurn {
    /// A turn refused before its turn came (bad params, unknown agent, draining) still lets
    /// the next one go only after the one before it: order holds past a refusal.
    fn drop(&mut self) {
        if let (Some(previous), Some(done)) = (self.previous.take(), self.done.take()) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        let _ = previous.await;
                        drop(done);
                    });
                }
                // No runtime (cannot happen in the gateway): releasing at once is the only
                // choice left.
                Err(_) => drop(done),
            }
        }
    }
}

/// Whether `method` is admitted in its connection's order (see [`AdmissionTurn`]).
pub fn is_ordered(method: &str) -> bool {
    matches!(
        Method::parse(method),
        Some(Method::Agent | Method::ChatSend | Method::SessionsCreate)
    )
}

/// `FORBIDDEN missing scope: <needed>`, with OpenClaw's details.
fn missing_scope(needed: Scope) -> ErrorShape {
    let needed = needed.as_str();
    ErrorShape::new(
        ipc::gateway::codes::FORBIDDEN,
        format!("missing scope: {needed}"),
    )
    .with_details(
        json!({"code": "MISSING_SCOPE", "missingScope": needed, "requiredScopes": [needed]}),
    )
}

pub async fn handle(
    gw: &Arc<Gateway>,
    session: &Session,
    req: RequestFrame,
    out: &Out,
    turn: Option<AdmissionTurn>,
) {
    let Some(method) = Method::parse(&req.method) else {
        // Debug level: a client may send any name, any number of times.
        tracing::debug!(
            method = req.method.chars().take(64).collect::<String>(),
            "Unknown method."
        );
        // As OpenClaw: a method no scope is listed for needs admin, so a narrower client
        // hears the missing scope first.
        let error = if session.has_scope(Scope::Admin) {
            ErrorShape::invalid(format!("unknown method: {}", req.method))
        } else {
            missing_scope(Scope::Admin)
        };
        out.err(&req.id, error).await;
        return;
    };
    let needed = method.scope();
    if !session.has_scope(needed) {
        tracing::debug!(
            method = method.as_str(),
            needed = needed.as_str(),
            "Refused: missing scope."
        );
        out.err(&req.id, missing_scope(needed)).await;
        return;
    }
    match method {
        Method::Connect => {
            out.err(
                &req.id,
                ErrorShape::invalid("connect is only valid as the first frame"),
            )
            .await
        }
        Method::Health => health(gw, req, out).await,
        Method::Status => status_summary(gw, req, out).await,
        Method::GatewayStatus => status(gw, req, out).await,
        Method::Agent => agent(gw, session, req, out, turn).await,
        Method::AgentWait => agent_wait(gw, req, out).await,
        Method::AgentEvents => resume::agent_events(gw, session, req, out).await,
        Method::DiagnosticsLanes => diagnostics::diagnostics_lanes(gw, req, out).await,
        Method::ExecAllowlistGet => approvals::exec_allowlist(gw, req, out).await,
        Method::ExecAllowlistRemove => approvals::exec_allowlist_remove(gw, req, out).await,
        Method::ChatSend => chat_send(gw, req, out, turn).await,
        // The first page a client loads (OpenClaw runs the same handler; the `shortId` form
        // is refused by the params: a session key is required).
        Method::ChatHistory | Method::ChatStartup => chat_history(gw, req, out).await,
        Method::ChatAbort => chat_abort(gw, req, out).await,
        Method::ChatInject => chat_inject(gw, req, out).await,
        Method::SessionsList => sessions_list(gw, req, out).await,
        Method::SessionsSubscribe => sessions_subscribe(gw, req, out).await,
        Method::SessionsDescribe => sessions_describe(gw, req, out).await,
        Method::SessionsPreview => sessions_preview(gw, req, out).await,
        Method::SessionsPatch => sessions_patch(gw, req, out).await,
        Method::SessionsMessagesSubscribe | Method::SessionsMessagesUnsubscribe => {
            session_messages(gw, req, out, method == Method::SessionsMessagesSubscribe).await
        }
        Method::QuestionList => {
            let none = QuestionListResult {
                questions: Vec::new(),
            };
            reply::<m::QuestionList>(out, &req.id, &none).await
        }
        Method::ModelsList => {
            let models = crate::catalog::models(&gw.config(), &gw.env_set);
            reply::<m::ModelsList>(out, &req.id, &models).await
        }
        Method::ModelsAuthStatus => {
            let r = crate::catalog::auth_status(&gw.config(), &gw.env_set, now_ms());
            reply::<m::ModelsAuthStatus>(out, &req.id, &r).await
        }
        Method::ChatMetadata | Method::AgentIdentityGet => agent_scoped(gw, req, out, method).await,
        Method::ConfigGet => config_get(gw, req, out).await,
        Method::SessionsReset => sessions_reset(gw, req, out).await,
        Method::LogsTail => logs_tail(req, out).await,
        // A bare array, as OpenClaw answers it.
        Method::SystemPresence => reply::<m::SystemPresence>(out, &req.id, &gw.presence()).await,
        Method::SessionsDelete => sessions_delete(gw, req, out).await,
        Method::AgentsList => agents_list(gw, req, out).await,
        Method::SessionsCreate => sessions_create(gw, req, out, turn).await,
        Method::SessionsCompact => sessions_compact(gw, req, out).await,
        Method::CronList
        | Method::CronStatus
        | Method::TasksList
        | Method::TalkCatalog
        | Method::UpdateStatus
        | Method::ProgressCardGet
        | Method::SessionsBranchesList
        | Method::SessionsCompanionState
        | Method::SessionsObserverVisibility
        | Method::CommandsList
        | Method::ChannelsStatus
        | Method::LastHeartbeat
        | Method::NodeList
        | Method::NodePairList
        | Method::PluginApprovalList
        | Method::OpenclawApprovalList
        | Method::ApprovalHistory => absent(gw, req, out, method).await,
        Method::ExecApprovalList => approvals::exec_approval_list(gw, req, out).await,
        Method::ExecApprovalResolve => {
            approvals::exec_approval_resolve(gw, session, req, out).await
        }
        Method::DevicePairList => device_pair_list(gw, req, out).await,
        Method::DeviceTokenRotate => device_token_rotate(gw, session, req, out).await,
        Method::DeviceTokenRevoke => device_token_revoke(gw, req, out).await,
        Method::GatewayDrain => gateway_drain(gw, req, out).await,
        Method::GatewayReload => gateway_reload(gw, req, out).await,
        Method::WorkerRestart => worker_restart(gw, req, out).await,
    }
}

/// Parses the params of method `M` (their type is the method table's), answering
/// `invalid <method> params: ...` on failure.
async fn params<M: MethodSpec>(req: &RequestFrame, out: &Out) -> Option<M::Params> {
    let value = req.params.clone().unwrap_or_else(|| json!({}));
    match serde_json::from_value(value) {
        Ok(p) => Some(p),
        Err(e) => {
            out.err(
                &req.id,
                ErrorShape::invalid(format!("invalid {} params: {e}", req.method)),
            )
            .await;
            None
        }
    }
}

/// Answers method `M` with its result (its type is the method table's).
async fn reply<M: MethodSpec>(out: &Out, id: &str, result: &M::Result) {
    out.ok_with(id, result).await
}

/// `config.get`: the config as loaded, with the file's hash.
async fn config_get(gw: &Gateway, req: RequestFrame, out: &Out) {
    let config = gw.config();
    let hash = tokio::fs::read(&config.path).await.ok().map(|b| {
        use sha2::{Digest, Sha256};
        Sha256::digest(&b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    });
    let result = crate::catalog::config_get(&config, hash);
    reply::<m::ConfigGet>(out, &req.id, &result).await
}

async fn health(gw: &Gateway, req: RequestFrame, out: &Out) {
    let Some(_p) = params::<m::Health>(&req, out).await else {
        return;
    };
    let started = Instant::now();
    let config = gw.config();
    let mut agents = Vec::with_capacity(config.agents.len());
    for a in &config.agents {
        let sessions = match session_summary(gw, Some(a.id.as_str())).await {
            Ok(s) => s,
            Err(e) => return out.err(&req.id, e).await,
        };
        agents.push(AgentHealth {
            agent_id: a.id.as_str().to_owned(),
            name: a.name.clone(),
            is_default: a.id.as_str() == "main",
            heartbeat: Heartbeat::disabled(),
            sessions,
        });
    }
    let sessions = agents
        .iter()
        .find(|a| a.is_default)
        .map(|a| a.sessions.clone())
        .unwrap_or_else(|| SessionSummary {
            path: crate::paths::gateway_db(&config.state_dir)
                .display()
                .to_string(),
            count: 0,
            recent: Vec::new(),
        });
    let result = HealthResult {
        ok: true,
        ts: now_ms(),
        duration_ms: started.elapsed().as_millis() as u64,
        heartbeat_seconds: 0,
        default_agent_id: "main".into(),
        channels: serde_json::Map::new(),
        channel_order: Vec::new(),
        channel_labels: serde_json::Map::new(),
        agents,
        sessions,
        uptime_ms: gw.started.elapsed().as_millis() as u64,
        draining: gw.draining.load(Ordering::Relaxed),
    };
    reply::<m::Health>(out, &req.id, &result).await;
}

/// An agent's sessions (all agents' for `None`): the count and the 10 most recent.
async fn session_summary(
    gw: &Gateway,
    agent_id: Option<&str>,
) -> Result<SessionSummary, ErrorShape> {
    let q = SessionQuery {
        agent_id: agent_id.map(str::to_owned),
        limit: 10,
        ..SessionQuery::default()
    };
    let (rows, count) =
        gw.db.sessions(q).await.map_err(|e| {
            ErrorShape::unavailable(format!("cannot list sessions: {e}"), Some(500))
        })?;
    let now = now_ms();
    Ok(SessionSummary {
        path: crate::paths::gateway_db(&gw.config().state_dir)
            .display()
            .to_string(),
        count,
        recent: rows
            .iter()
            .map(|r| RecentSession {
                key: r.session_key.clone(),
                updated_at: Some(r.updated_at),
                age: Some(now.saturating_sub(r.updated_at)),
            })
            .collect(),
    })
}

/// `status`: OpenClaw's status summary (what `openclaw status --json` reads).
async fn status_summary(gw: &Gateway, req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::Status>(&req, out).await else {
        return;
    };
    let config = gw.config();
    let all = match session_summary(gw, None).await {
        Ok(s) => s,
        Err(e) => return out.err(&req.id, e).await,
    };
    let mut by_agent = Vec::with_capacity(config.agents.len());
    for a in &config.agents {
        match session_summary(gw, Some(a.id.as_str())).await {
            Ok(s) => by_agent.push(AgentSessions {
                agent_id: a.id.as_str().to_owned(),
                path: s.path,
                count: s.count,
                recent: s.recent,
            }),
            Err(e) => return out.err(&req.id, e).await,
        }
    }
    let main_model = config.agent("main").and_then(|a| a.model.as_ref());
    let result = StatusSummary {
        runtime_version: ipc::version::BUILD.to_owned(),
        heartbeat: HeartbeatStatus {
            default_agent_id: "main".into(),
            agents: config
                .agents
                .iter()
                .map(|a| AgentHeartbeatStatus {
                    agent_id: a.id.as_str().to_owned(),
                    enabled: false,
                    every: "disabled".into(),
                    every_ms: None,
                    waiting_for_route: false,
                })
                .collect(),
        },
        channel_summary: Vec::new(),
        queued_system_events: Vec::new(),
        tasks: TaskCounts { total: 0 },
        task_audit: TaskAudit { errors: 0 },
        degraded_secret_owners: Vec::new(),
        degraded_plugins: Vec::new(),
        sessions: SessionsStatus {
            paths: vec![all.path.clone()],
            count: all.count,
            defaults: SessionDefaultsStatus {
                model: main_model.map(|m| format!("{}/{}", m.provider, m.model)),
                context_tokens: main_model.map(|m| m.context_tokens()),
            },
            recent: all.recent,
            by_agent,
        },
        pid: std::process::id(),
        cli_projection: p
            .include_cli_projection
            .unwrap_or(false)
            .then(|| CliProjection {
                agents: CliAgents {
                    default_id: Some("main".into()),
                    selection_required: false,
                    rows: config
                        .agents
                        .iter()
                        .map(|a| CliAgentRow {
                            id: a.id.as_str().to_owned(),
                            name: a.name.clone(),
                        })
                        .collect(),
                },
                update_channel: None,
            }),
    };
    reply::<m::Status>(out, &req.id, &result).await;
}

async fn status(gw: &Gateway, req: RequestFrame, out: &Out) {
    match gw
        .control
        .status(gw.connections.load(Ordering::Relaxed))
        .await
    {
        Ok(s) => reply::<m::GatewayStatus>(out, &req.id, &s).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

fn control_error(e: ControlError) -> ErrorShape {
    match e {
        ControlError::Overloaded => ErrorShape::unavailable(e.to_string(), Some(250)),
        ControlError::Closed => ErrorShape::unavailable(e.to_string(), Some(1000)),
    }
}

/// Where a run goes.
#[derive(Debug, PartialEq)]
pub struct Route {
    pub agent_id: String,
    pub session_key: String,
}

/// Resolves agent and session key (R-A1): `sessionKey` (or an `agent:` key in `to`) wins,
/// then `agentId`'s main key `agent:<id>:main`, then `agent:main:main`. Bare keys are scoped
/// to the agent. Only configured agents are accepted.
pub fn route(p: &AgentParams, is_configured: impl Fn(&str) -> bool) -> Result<Route, String> {
    let explicit = match &p.agent_id {
        Some(raw) => {
            let id = AgentId::parse(raw).map_err(|_| format!("unknown agent id {raw:?}"))?;
            if !is_configured(id.as_str()) {
                return Err(format!("unknown agent id {raw:?}"));
            }
            Some(id.as_str().to_owned())
        }
        None => None,
    };
    let key = p
        .session_key
        .clone()
        .or_else(|| p.to.clone().filter(|t| t.starts_with("agent:")));
    if let Some(key) = key {
        let key = key.trim().to_owned();
        if key.is_empty() || key.len() > 512 {
            return Err("sessionKey must be 1-512 characters".into());
        }
        if let Some(rest) = key.strip_prefix("agent:") {
            let (agent_raw, tail) = rest.split_once(':').ok_or_else(|| {
                format!("invalid sessionKey {key:?}: expected agent:<agentId>:<key>")
            })?;
            if tail.is_empty() {
                return Err(format!(
                    "invalid sessionKey {key:?}: expected agent:<agentId>:<key>"
                ));
            }
            let id =
                AgentId::parse(agent_raw).map_err(|_| format!("unknown agent id {agent_raw:?}"))?;
            if !is_configured(id.as_str()) {
                return Err(format!("unknown agent id {agent_raw:?}"));
            }
            if let Some(e) = &explicit {
                if e != id.as_str() {
                    return Err(format!(
                        "sessionKey {key:?} belongs to agent {:?}, not {e:?}",
                        id.as_str()
                    ));
                }
            }
            return Ok(Route {
                agent_id: id.as_str().to_owned(),
                session_key: format!("agent:{}:{tail}", id.as_str()),
            });
        }
        let agent_id = explicit.unwrap_or_else(|| "main".into());
        return Ok(Route {
            session_key: format!("agent:{agent_id}:{key}"),
            agent_id,
        });
    }
    if p.session_id.is_some() {
        return Err(
            "sessionId without sessionKey is not supported by loopgate yet; pass sessionKey".into(),
        );
    }
    let agent_id = explicit.unwrap_or_else(|| "main".into());
    Ok(Route {
        session_key: format!("agent:{agent_id}:main"),
        agent_id,
    })
}

/// What to admit: a routed message with its run settings.
struct Admission {
    /// Its place in the connection's order (`None`: not ordered).
    turn: Option<AdmissionTurn>,
    run_id: String,
    route: Route,
    message: String,
    extra_system_prompt: Option<String>,
    /// Explicit run timeout in ms (`Some(0)` = none); `None` = the agent's default.
    timeout_ms: Option<u64>,
    /// `agent` params `provider` / `model`, as sent.
    provider: Option<String>,
    model: Option<String>,
    /// `thinking` (a level name), as sent.
    thinking: Option<String>,
    /// `queueMode`, as sent.
    queue_mode: Option<String>,
}

/// The provider and model a run asked for, checked against the config: `model` may be
/// `"<provider>/<model>"` (the provider must be configured) or a bare model name on
/// `provider` (default: the agent's). `None` when it is the agent's own model.
fn run_model(
    agent: &crate::config::AgentConfig,
    own: &crate::config::ResolvedModel,
    provider: Option<String>,
    model: Option<String>,
) -> Result<Option<ipc::control::RunModel>, String> {
    let known = |p: &str| agent.providers.iter().find(|r| r.provider == p);
    let (provider, model) = match (provider, model) {
        (None, None) => return Ok(None),
        (Some(p), None) => {
            return Err(format!(
                "provider {p:?} needs a model too (model: \"<model>\" or \"{p}/<model>\")"
            ))
        }
        (Some(p), Some(m)) => {
            let m = m
                .strip_prefix(&format!("{p}/"))
                .map(str::to_owned)
                .unwrap_or(m);
            (p, m)
        }
        // As OpenClaw reads a model ref: what comes before the first `/` is the provider, so
        // an unknown one is refused rather than sent to the agent's provider as a model name.
        (None, Some(m)) => match m.split_once('/') {
            Some((p, rest)) => (p.to_owned(), rest.to_owned()),
            None => (own.provider.clone(), m),
        },
    };
    if model.trim().is_empty() {
        return Err("model must be a non-empty model name".into());
    }
    let Some(p) = known(&provider) else {
        return Err(format!(
            "unknown provider {provider:?} (configured: {})",
            agent
                .providers
                .iter()
                .map(|r| r.provider.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    if !p.api.implemented() {
        return Err(format!(
            "provider {provider:?} uses api {:?}, which this loopgate build cannot call (supported: openai-completions, openai-responses, anthropic-messages, ollama)",
            p.api.as_str()
        ));
    }
    if provider == own.provider && model == own.model {
        return Ok(None);
    }
    Ok(Some(ipc::control::RunModel { provider, model }))
}

/// How admission went. The acknowledgement of a new run was already sent.
enum Admitted {
    Started(oneshot::Receiver<Arc<Outcome>>),
    InFlight {
        agent_id: String,
        session_key: String,
    },
    Finished(crate::outcome::StoredTerminal),
    Refused(ErrorShape),
}

/// Checks the agent can run, records the run durably, sends `ack(acceptedAt)` and hands the
/// run to the control actor. Shared by `agent` and `chat.send`.
async fn admit<A: serde::Serialize>(
    gw: &Arc<Gateway>,
    out: &Out,
    req_id: &str,
    mut a: Admission,
    ack: impl FnOnce(u64) -> A,
) -> Admitted {
    let config = gw.config();
    let Some(agent) = config.agent(&a.route.agent_id) else {
        return Admitted::Refused(ErrorShape::invalid(format!(
            "unknown agent id {:?}",
            a.route.agent_id
        )));
    };
    let Some(model) = &agent.model else {
        return Admitted::Refused(ErrorShape::invalid(format!(
            "agent {:?} has no model configured: set agents.defaults.model (\"<provider>/<model>\") in {}",
            a.route.agent_id,
            gw.config().path.display()
        )));
    };
    if !model.api.implemented() {
        return Admitted::Refused(ErrorShape::invalid(format!(
            "provider {:?} uses api {:?}, which this loopgate build cannot call (supported: openai-completions, openai-responses, anthropic-messages, ollama)",
            model.provider,
            model.api.as_str()
        )));
    }
    // A model the request names is strict (no fallback); a session's own model
    // (`sessions.patch {model}`) applies unless the request names one.
    let strict_model = a.provider.is_some() || a.model.is_some();
    let session = gw.session_overrides(&a.route.session_key);
    if !strict_model {
        a.model = session.model.clone();
    }
    let run_model = match run_model(agent, model, a.provider, a.model) {
        Ok(m) => m,
        Err(e) => {
            return Admitted::Refused(ErrorShape::invalid(format!("invalid agent params: {e}")))
        }
    };
    let levels = match thinking::resolve(
        agent,
        model,
        run_model.as_ref(),
        a.thinking.as_deref(),
        &session,
    ) {
        Ok(t) => t,
        Err(e) => {
            return Admitted::Refused(ErrorShape::invalid(format!("invalid agent params: {e}")))
        }
    };
    // Request > session > config (R-B3).
    let mut queue = config.queue;
    match a
        .queue_mode
        .as_deref()
        .map(|m| (m, ipc::queue::QueueMode::parse(m)))
    {
        Some((_, Some(mode))) => queue.mode = mode,
        Some((m, None)) => {
            return Admitted::Refused(ErrorShape::invalid(format!(
                "invalid queueMode {m:?}: use steer, followup, collect or interrupt"
            )))
        }
        None => {
            if let Some(mode) = session.queue_mode {
                queue.mode = mode;
            }
        }
    }
    if gw.draining.load(Ordering::Relaxed) || gw.stopping.is_cancelled() {
        return Admitted::Refused(
            ErrorShape::unavailable(
                "gateway is draining; retry on the restarted gateway",
                Some(1000),
            )
            .with_details(json!({"reason": "draining"})),
        );
    }
    if let Some(reason) = gw.failed.borrow().get(&a.route.agent_id) {
        return Admitted::Refused(
            ErrorShape::unavailable(
                crate::control::failed_agent_message(&a.route.agent_id, reason),
                Some(5000),
            )
            .with_details(json!({"reason": "agent-failed"})),
        );
    }
    // Admitted after the request read before it on this connection; the next one goes when
    // this returns (dispatched, refused or answered).
    let mut turn = a.turn.take();
    if let Some(t) = &mut turn {
        t.wait_previous().await;
    }
    let accepted_at = now_ms();
    let accepted = gw
        .db
        .accept(NewRun {
            run_id: a.run_id.clone(),
            agent_id: a.route.agent_id.clone(),
            session_key: a.route.session_key.clone(),
            accepted_at,
            request_hash: request_hash(&a.message, a.extra_system_prompt.as_deref()),
        })
        .await;
    match accepted {
        Err(e) => {
            tracing::warn!(error = %e, "Cannot record an accepted run.");
            Admitted::Refused(ErrorShape::unavailable(
                format!("cannot accept the run: {e}"),
                Some(500),
            ))
        }
        Ok(AcceptOutcome::Conflict(why)) => Admitted::Refused(ErrorShape::invalid(format!(
            "idempotencyKey {:?} was already used for a different request ({why}); use a new key for a new request",
            a.run_id
        ))),
        Ok(AcceptOutcome::Existing(existing)) => match *existing {
            StoredRun::Active {
                agent_id,
                session_key,
            } => Admitted::InFlight {
                agent_id,
                session_key,
            },
            StoredRun::Terminal { terminal, .. } => Admitted::Finished(terminal),
        },
        Ok(AcceptOutcome::Inserted) => {
            out.ok_with(req_id, &ack(accepted_at)).await;
            let timeout_ms = match a.timeout_ms {
                Some(0) => None,
                Some(ms) => Some(ms),
                None => agent.timeout_ms,
            };
            let (done, rx) = oneshot::channel();
            let dispatch = Dispatch {
                agent_id: a.route.agent_id.clone(),
                done,
                run: SubmitRun {
                    run_id: a.run_id.clone(),
                    session_key: a.route.session_key.clone(),
                    message: a.message,
                    extra_system_prompt: a.extra_system_prompt,
                    timeout_ms,
                    accepted_at,
                    model: run_model,
                    strict_model,
                    thinking: levels.thinking,
                    reasoning: levels.reasoning,
                    queue: Some(queue),
                },
            };
            if let Err(e) = gw.control.dispatch(dispatch) {
                // Accepted but never handed over: record the failure so the run still ends once.
                let o = Outcome::from_terminal(
                    &RunTerminal::without_work(
                        &a.run_id,
                        RunStatus::Error,
                        now_ms(),
                        format!("cannot start the run: {e}"),
                        None,
                    ),
                    &a.route.session_key,
                    &a.route.agent_id,
                );
                let _ = gw.db.finish(a.run_id.clone(), o.stored()).await;
                let (tx, rx) = oneshot::channel();
                let _ = tx.send(Arc::new(o));
                return Admitted::Started(rx);
            }
            Admitted::Started(rx)
        }
    }
}

async fn agent(
    gw: &Arc<Gateway>,
    session: &Session,
    req: RequestFrame,
    out: &Out,
    turn: Option<AdmissionTurn>,
) {
    let Some(p) = params::<m::Agent>(&req, out).await else {
        return;
    };
    // As OpenClaw: picking the model of a run is an admin's call.
    if (p.provider.is_some() || p.model.is_some()) && !session.has_scope(Scope::Admin) {
        return out
            .err(
                &req.id,
                ErrorShape::invalid("provider/model overrides are not authorized for this caller."),
            )
            .await;
    }
    let invalid = |m: String| ErrorShape::invalid(format!("invalid agent params: {m}"));
    if let Some(m) = turn_params_error(
        &p.message,
        &p.idempotency_key,
        "message must be a non-empty string",
    ) {
        return out.err(&req.id, invalid(m)).await;
    }
    let extra = p.extra_system_prompt.as_ref().map_or(0, String::len);
    if extra > ipc::gateway::MAX_EXTRA_SYSTEM_PROMPT_BYTES {
        return out
            .err(
                &req.id,
                invalid(format!(
                    "extraSystemPrompt is {extra} bytes; the limit is {}",
                    ipc::gateway::MAX_EXTRA_SYSTEM_PROMPT_BYTES
                )),
            )
            .await;
    }
    let route = match route(&p, |id| gw.config().agent(id).is_some()) {
        Ok(r) => r,
        Err(m) => return out.err(&req.id, invalid(m)).await,
    };
    let run_id = p.idempotency_key.clone();
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
    };
    let ack = |accepted_at| AgentAck {
        run_id: run_id.clone(),
        session_key: session_key.clone(),
        agent_id: agent_id.clone(),
        status: "accepted".into(),
        accepted_at: Some(accepted_at),
    };
    match admit(gw, out, &req.id, admission, ack).await {
        Admitted::Refused(e) => out.err(&req.id, e).await,
        Admitted::InFlight {
            agent_id,
            session_key,
        } => {
            let ack = AgentAck {
                run_id: run_id.clone(),
                session_key,
                agent_id,
                status: "in_flight".into(),
                accepted_at: None,
            };
            reply::<m::Agent>(out, &req.id, &ack).await;
        }
        // A replay sends the stored bytes of the final result as they are.
        Admitted::Finished(terminal) => match StoredFinal::parse(&terminal.final_json) {
            Ok(stored) => {
                out.after_events(gw.hub.published()).await;
                out.res(&stored.frame(&req.id)).await
            }
            Err(e) => {
                out.err(
                    &req.id,
                    ErrorShape::unavailable(format!("stored result is unreadable: {e}"), None),
                )
                .await;
            }
        },
        Admitted::Started(rx) => match rx.await {
            // The run's terminal events were published before its waiters were answered.
            Ok(outcome) => {
                out.after_events(gw.hub.published()).await;
                match StoredFinal::parse(&outcome.final_json) {
                    Ok(stored) => out.res(&stored.frame(&req.id)).await,
                    Err(e) => {
                        out.err(
                            &req.id,
                            ErrorShape::unavailable(format!("the result is unreadable: {e}"), None),
                        )
                        .await
                    }
                }
            }
            Err(_) => {
                out.err(
                    &req.id,
                    ErrorShape::unavailable(
                        "the gateway stopped before the run finished",
                        Some(1000),
                    ),
                )
                .await;
            }
        },
    }
}

/// What identifies a request besides its route: hex SHA-256 over the message and the extra
/// system prompt.
fn request_hash(message: &str, extra: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(message.as_bytes());
    h.update([0u8]);
    if let Some(e) = extra {
        h.update(e.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The checks `agent` and `chat.send` share: a message with text (`empty` says what is
/// wrong otherwise) and an idempotency key.
fn turn_params_error(message: &str, idempotency_key: &str, empty: &str) -> Option<String> {
    use ipc::gateway::{MAX_IDEMPOTENCY_KEY_BYTES, MAX_MESSAGE_BYTES};
    if message.trim().is_empty() {
        Some(empty.to_owned())
    } else if message.len() > MAX_MESSAGE_BYTES {
        Some(format!(
            "message is {} bytes; the limit is {MAX_MESSAGE_BYTES} bytes (put large content in a workspace file)",
            message.len()
        ))
    } else if idempotency_key.is_empty() {
        Some("idempotencyKey must be a non-empty string".to_owned())
    } else if idempotency_key.len() > MAX_IDEMPOTENCY_KEY_BYTES {
        Some(format!(
            "idempotencyKey is {} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}",
            idempotency_key.len()
        ))
    } else {
        None
    }
}

/// Routes `sessionKey` (+ optional `agentId`) the way `agent` does; a key that does not
/// route is answered with `invalid <method> params: <why>` and gives `None`.
async fn route_key(
    gw: &Gateway,
    req: &RequestFrame,
    out: &Out,
    session_key: &str,
    agent_id: Option<&str>,
) -> Option<Route> {
    let p = AgentParams {
        session_key: Some(session_key.to_owned()),
        agent_id: agent_id.map(str::to_owned),
        ..Default::default()
    };
    match route(&p, |id| gw.config().agent(id).is_some()) {
        Ok(r) => Some(r),
        Err(m) => {
            out.err(
                &req.id,
                ErrorShape::invalid(format!("invalid {} params: {m}", req.method)),
            )
            .await;
            None
        }
    }
}

async fn chat_send(gw: &Arc<Gateway>, req: RequestFrame, out: &Out, turn: Option<AdmissionTurn>) {
    let Some(p) = params::<m::ChatSend>(&req, out).await else {
        return;
    };
    let invalid = |m: String| ErrorShape::invalid(format!("invalid chat.send params: {m}"));
    if let Some(m) = turn_params_error(
        &p.message,
        &p.idempotency_key,
        "message must not be empty (attachments are not supported yet)",
    ) {
        return out.err(&req.id, invalid(m)).await;
    }
    let Some(route) = route_key(gw, &req, out, &p.session_key, p.agent_id.as_deref()).await else {
        return;
    };
    let run_id = p.idempotency_key.clone();
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
    };
    let ack = |status: &str| ChatSendAck {
        run_id: run_id.clone(),
        status: status.into(),
    };
    match admit(gw, out, &req.id, admission, |_| ack("started")).await {
        Admitted::Refused(e) => out.err(&req.id, e).await,
        Admitted::InFlight { .. } => reply::<m::ChatSend>(out, &req.id, &ack("in_flight")).await,
        Admitted::Finished(_) => reply::<m::ChatSend>(out, &req.id, &ack("ok")).await,
        // Progress and the outcome arrive as `chat` / `agent` events (and `agent.wait`).
        Admitted::Started(_) => {}
    }
}

/// A worker answered a session operation with a reply of another kind (a bug, not input).
fn unexpected_reply(reply: &ipc::control::SessionReply) -> ErrorShape {
    tracing::error!(
        ?reply,
        "The worker answered a session operation with the wrong kind of reply."
    );
    ErrorShape::unavailable("the agent's worker gave an unexpected answer", None)
}

fn session_error(e: RpcError) -> ErrorShape {
    match e.code {
        ErrorCode::SessionBusy => {
            ErrorShape::invalid(e.message).with_details(json!({"code": "SESSION_BUSY"}))
        }
        // The worker found the request wrong (no such session, changed meanwhile).
        ErrorCode::InvalidRequest => ErrorShape::invalid(e.message),
        ErrorCode::Overloaded | ErrorCode::Draining => {
            ErrorShape::unavailable(e.message, Some(500))
        }
        _ => ErrorShape::unavailable(e.message, None),
    }
}

/// A session operation at the agent's worker, within this connection's share.
async fn session_op(
    gw: &Arc<Gateway>,
    out: &Out,
    agent_id: String,
    op: SessionOp,
) -> crate::control::OpResult {
    let Ok(_permit) = out.session_ops.try_acquire() else {
        return Err(RpcError::new(
            ErrorCode::Overloaded,
            format!(
                "too many session operations in flight on this connection (at most {}); wait for their answers",
                crate::connection::out::SESSION_OPS_PER_CONN
            ),
        ));
    };
    gw.control.session_op(agent_id, op).await
}

async fn chat_abort(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::ChatAbort>(&req, out).await else {
        return;
    };
    let Some(route) = route_key(gw, &req, out, &p.session_key, p.agent_id.as_deref()).await else {
        return;
    };
    match gw
        .control
        .abort(route.session_key, p.run_id, StopReason::Rpc)
        .await
    {
        Ok(Ok(ids)) => {
            let result = ChatAbortResult {
                ok: true,
                aborted: !ids.is_empty(),
                run_ids: ids,
            };
            reply::<m::ChatAbort>(out, &req.id, &result).await
        }
        Ok(Err(m)) => out.err(&req.id, ErrorShape::invalid(m)).await,
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

/// `logs.tail`: the gateway's last log lines from the in-memory ring (read scope, as
/// OpenClaw's; log lines are operational: ids, names, timings and errors).
async fn logs_tail(req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::LogsTail>(&req, out).await else {
        return;
    };
    let limit = p.limit.unwrap_or(500);
    let max_bytes = p.max_bytes.unwrap_or(250_000);
    if !(1..=5000).contains(&limit) || !(1..=1_000_000).contains(&max_bytes) {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(
                    "invalid logs.tail params: limit must be 1..5000 and maxBytes 1..1000000",
                ),
            )
            .await;
    }
    let tail = crate::log_ring::LOGS.tail(p.cursor, limit as usize, max_bytes as usize);
    reply::<m::LogsTail>(out, &req.id, &tail).await;
}

/// `chat.metadata` and `agent.identity.get`: about the agent named by `agentId`, by
/// `sessionKey`, or `main`.
async fn agent_scoped(gw: &Arc<Gateway>, req: RequestFrame, out: &Out, method: Method) {
    let Some(p) = params::<m::AgentIdentityGet>(&req, out).await else {
        return;
    };
    let route = match &p.session_key {
        Some(key) => match route_key(gw, &req, out, key, p.agent_id.as_deref()).await {
            Some(r) => r.agent_id,
            None => return,
        },
        None => p.agent_id.clone().unwrap_or_else(|| "main".into()),
    };
    let config = gw.config();
    let Some(agent) = AgentId::parse(&route)
        .ok()
        .and_then(|id| config.agent(id.as_str()))
    else {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(format!(
                    "invalid {} params: unknown agent id {route:?}",
                    req.method
                )),
            )
            .await;
    };
    match method {
        Method::ChatMetadata => {
            let metadata = crate::catalog::chat_metadata(agent, &gw.env_set);
            reply::<m::ChatMetadata>(out, &req.id, &metadata).await
        }
        _ => reply::<m::AgentIdentityGet>(out, &req.id, &crate::catalog::identity(agent)).await,
    }
}

/// `loopgate.reload`: the same path as SIGHUP; answers what changed or why nothing did.
async fn gateway_reload(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    if params::<m::GatewayReload>(&req, out).await.is_none() {
        return;
    }
    let Some(tx) = gw.reload_requests.get() else {
        return out
            .err(
                &req.id,
                ErrorShape::unavailable("reload is not available yet", Some(1000)),
            )
            .await;
    };
    let (answer, rx) = oneshot::channel();
    if tx.try_send(answer).is_err() {
        return out
            .err(
                &req.id,
                ErrorShape::unavailable("a reload is already under way; retry", Some(1000)),
            )
            .await;
    }
    match rx.await {
        Ok(result) => reply::<m::GatewayReload>(out, &req.id, &result).await,
        Err(_) => {
            out.err(
                &req.id,
                ErrorShape::unavailable("the gateway is stopping", None),
            )
            .await
        }
    }
}

async fn gateway_drain(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::GatewayDrain>(&req, out).await else {
        return;
    };
    let deadline = Duration::from_millis(
        p.timeout_ms.unwrap_or(
            gw.config()
                .gateway
                .drain_timeout_seconds
                .saturating_mul(1000),
        ),
    );
    let already_draining = DrainResult {
        ok: true,
        draining: true,
        already_draining: Some(true),
        deadline_ms: None,
    };
    // Refuse new runs from here on: once this answers `draining`, no run is admitted.
    if gw.draining.swap(true, Ordering::SeqCst) {
        return reply::<m::GatewayDrain>(out, &req.id, &already_draining).await;
    }
    match gw.drain_requests.try_send(deadline) {
        Ok(()) => {
            let result = DrainResult {
                ok: true,
                draining: true,
                already_draining: None,
                deadline_ms: Some(deadline.as_millis() as u64),
            };
            reply::<m::GatewayDrain>(out, &req.id, &result).await
        }
        Err(_) => reply::<m::GatewayDrain>(out, &req.id, &already_draining).await,
    }
}

async fn worker_restart(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::WorkerRestart>(&req, out).await else {
        return;
    };
    let id = match AgentId::parse(&p.agent_id) {
        Ok(id) if gw.config().agent(id.as_str()).is_some() => id,
        _ => {
            return out
                .err(
                    &req.id,
                    ErrorShape::invalid(format!(
                        "invalid worker.restart params: unknown agent id {:?}",
                        p.agent_id
                    )),
                )
                .await
        }
    };
    match gw
        .control
        .restart_worker(id.as_str().to_owned(), p.force.unwrap_or(false))
        .await
    {
        Ok(restarted) => reply::<m::WorkerRestart>(out, &req.id, &restarted).await,
        Err(e) => {
            out.err(&req.id, ErrorShape::unavailable(e.message, Some(1000)))
                .await
        }
    }
}

async fn agents_list(gw: &Gateway, req: RequestFrame, out: &Out) {
    let Some(_p) = params::<m::AgentsList>(&req, out).await else {
        return;
    };
    let agents = gw
        .config()
        .agents
        .iter()
        .map(|a| AgentSummary {
            id: a.id.as_str().to_owned(),
            name: a.name.clone(),
            workspace: a.workspace.display().to_string(),
            model: crate::catalog::agent_model(a),
        })
        .collect();
    let result = AgentsListResult {
        default_id: "main".into(),
        main_key: "main".into(),
        scope: "per-sender".into(),
        agents,
    };
    reply::<m::AgentsList>(out, &req.id, &result).await;
}

async fn agent_wait(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<m::AgentWait>(&req, out).await else {
        return;
    };
    if p.run_id.is_empty() {
        return out
            .err(
                &req.id,
                ErrorShape::invalid("invalid agent.wait params: runId must be a non-empty string"),
            )
            .await;
    }
    let window = Duration::from_millis(p.timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS));
    let timed_out = AgentWaitResult::pending(&p.run_id, None);
    let draining = AgentWaitResult::pending(&p.run_id, Some("gateway_draining"));
    let waited = match gw.control.wait(p.run_id.clone()).await {
        Ok(r) => r,
        Err(e) => return out.err(&req.id, control_error(e)).await,
    };
    let pending = match waited {
        WaitReply::Done(o) => {
            out.after_events(gw.hub.published()).await;
            return reply::<m::AgentWait>(out, &req.id, &o.wait_result()).await;
        }
        WaitReply::Pending(rx) => Some(rx),
        WaitReply::Unknown => match gw.db.lookup(p.run_id.clone()).await {
            Ok(Some(StoredRun::Terminal { terminal, .. })) => {
                out.after_events(gw.hub.published()).await;
                let result = stored_wait_result(&p.run_id, &terminal);
                return reply::<m::AgentWait>(out, &req.id, &result).await;
            }
            Ok(_) => None,
            Err(e) => {
                return out
                    .err(
                        &req.id,
                        ErrorShape::unavailable(format!("cannot look up the run: {e}"), Some(500)),
                    )
                    .await;
            }
        },
    };
    let result = match pending {
        Some(rx) => tokio::select! {
            r = tokio::time::timeout(window, rx) => match r {
                Ok(Ok(o)) => o.wait_result(),
                Ok(Err(_)) => draining,
                // Still behind its session's earlier runs: say so (R-A2).
                Err(_) if !gw.hub.has_started(&p.run_id) => AgentWaitResult::queued(&p.run_id),
                Err(_) => timed_out,
            },
            _ = gw.stopping.cancelled() => draining,
        },
        // Unknown run: like OpenClaw, wait out the window and report a timeout.
        None => tokio::select! {
            _ = tokio::time::sleep(window) => timed_out,
            _ = gw.stopping.cancelled() => draining,
        },
    };
    out.after_events(gw.hub.published()).await;
    reply::<m::AgentWait>(out, &req.id, &result).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused turn between two admitted ones does not let the third overtake the first.
    #[tokio::test]
    async fn a_refused_turn_keeps_the_order_of_its_neighbours() {
        let (a, next) = AdmissionTurn::after(None);
        let (b, next) = AdmissionTurn::after(Some(next));
        let (mut c, _next) = AdmissionTurn::after(Some(next));
        drop(b); // refused before waiting for `a`
        let waiting = tokio::spawn(async move {
            c.wait_previous().await;
        });
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "c went before a was admitted");
        drop(a);
        waiting.await.unwrap();
    }

    fn p(agent: Option<&str>, key: Option<&str>) -> AgentParams {
        AgentParams {
            message: "m".into(),
            idempotency_key: "k".into(),
            agent_id: agent.map(Into::into),
            session_key: key.map(Into::into),
            ..Default::default()
        }
    }

    fn configured(id: &str) -> bool {
        id == "main" || id == "ops"
    }

    #[test]
    fn routing_follows_r_a1_precedence() {
        let r = |a, k| route(&p(a, k), configured);
        assert_eq!(r(None, None).unwrap().session_key, "agent:main:main");
        assert_eq!(r(Some("ops"), None).unwrap().session_key, "agent:ops:main");
        assert_eq!(r(Some("OPS"), None).unwrap().agent_id, "ops");
        assert_eq!(
            r(None, Some("incident-42")).unwrap().session_key,
            "agent:main:incident-42"
        );
        assert_eq!(
            r(Some("ops"), Some("x")).unwrap().session_key,
            "agent:ops:x"
        );
        let k = r(None, Some("agent:ops:thread")).unwrap();
        assert_eq!(
            (k.agent_id.as_str(), k.session_key.as_str()),
            ("ops", "agent:ops:thread")
        );
        assert!(r(Some("ghost"), None)
            .unwrap_err()
            .contains("unknown agent id"));
        assert!(r(None, Some("agent:ghost:x"))
            .unwrap_err()
            .contains("unknown agent id"));
        assert!(r(Some("main"), Some("agent:ops:x")).is_err());
    }
}
