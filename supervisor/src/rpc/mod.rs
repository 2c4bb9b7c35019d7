//! Method handlers: one function per Gateway method, each taking its params and giving its
//! result (or the error to answer) as the method table (`ipc::gateway::methods`) types
//! them. This file dispatches (the scope each method needs is the table's) and holds what
//! the handlers share; `answer.rs` is the one place answers are written to the connection's
//! [`Out`], `admission.rs` admits runs, `turns.rs` the turn methods, `gateway_ops.rs` the
//! gateway's own, the others by feature.

use std::future::ready;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{RunStatus, StopReason, SubmitRun};
use ipc::gateway::{m, MethodSpec, Scope};
use ipc::gateway::{
    AgentAck, AgentHealth, AgentHeartbeatStatus, AgentParams, AgentSessions, AgentSummary,
    AgentWaitResult, AgentsListResult, ApprovalReplay, ChatAbortResult, ChatSendAck,
    ChatSendResult, CliAgentRow, CliAgents, CliProjection, DrainResult, ErrorShape, HealthResult,
    Heartbeat, HeartbeatStatus, HistoryDefaults, HistoryReset, Method, PatchResolved, PatchedEntry,
    PendingInputs, PreviewItem, QuestionListResult, RecentSession, ResolvedAgentRef,
    SessionDefaults, SessionDefaultsStatus, SessionMessagesResult, SessionPreview, SessionRow,
    SessionSummary, SessionsChanged, SessionsDeleteResult, SessionsDescribeResult,
    SessionsListParams, SessionsListResult, SessionsPatchResult, SessionsPreviewResult,
    SessionsResetResult, SessionsStatus, SessionsSubscribeResult, StatusSummary, TaskAudit,
    TaskCounts, DEFAULT_WAIT_TIMEOUT_MS,
};
use ipc::session_ops::{MediaOp, Op};
use ipc::{ErrorCode, RpcError};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::config::{AgentId, Config};
use crate::connection::out::Out;
use crate::connection::peer::Session;
use crate::control::{AskError, ControlError, ControlHandle, WaitReply};
use crate::events::{now_ms, EventHub};
use crate::gateway::{ConfigRequest, ConfigWrite, Gateway, ReloadRequests};
use crate::gatewaydb::{AcceptOutcome, GatewayDb, SessionQuery, StoredRun};
use crate::outcome::{stored_wait_result, Outcome};
use crate::session_settings::SessionSettings;

mod absent;
mod admission;
mod agent_files;
mod agents_admin;
mod answer;
mod approvals;
mod attachments;
mod chat;
mod command_run;
pub(crate) mod commands;
mod compact;
mod create;
pub mod cron;
mod devices;
pub(crate) mod diagnostics;
mod directives;
mod following;
mod gateway_ops;
mod operator;
mod patch;
pub(crate) mod request;
mod resolve;
mod resume;
mod sessions;
mod skills;
mod thinking;
mod tools_catalog;
mod turns;
mod usage;

use admission::*;
use answer::*;
use chat::*;
use compact::*;
use create::*;
use devices::*;
use following::Following;
use gateway_ops::*;
use patch::*;
use resolve::*;
use sessions::*;
use turns::*;

pub use admission::{admit_self, is_ordered, route, AdmissionTurn, Route, SelfStart};
pub use request::Request;

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

/// The method a request names, if this connection (holding `granted` scopes) may call
/// it; else the error to answer. As OpenClaw: a method no scope is listed for needs admin,
/// so to a narrower client an unknown name is a missing admin scope.
fn callable(name: &str, granted: &[String]) -> Result<Method, ErrorShape> {
    let Some(method) = Method::parse(name) else {
        // Debug level: a client may send any name, any number of times.
        tracing::debug!(
            method = name.chars().take(64).collect::<String>(),
            "Unknown method."
        );
        return Err(if Scope::Admin.held_in(granted) {
            ErrorShape::invalid(format!("unknown method: {name}"))
        } else {
            missing_scope(Scope::Admin)
        });
    };
    let needed = method.scope();
    if !needed.held_in(granted) {
        tracing::debug!(
            method = method.as_str(),
            needed = needed.as_str(),
            "Refused: missing scope."
        );
        return Err(missing_scope(needed));
    }
    Ok(method)
}

/// Which handler serves a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Runs and their chat: [`turn_method`] (the ordered methods are among them).
    Turn,
    /// [`gateway_method`].
    Gateway,
    /// The operator's surface (config, agents, their files, tools): [`operator::method`].
    Operator,
    /// [`session_method`].
    Session,
    /// [`approval_method`].
    Approval,
    /// The scheduler: [`cron::method`].
    Cron,
    /// Features loopgate does not have: [`absent::answer`].
    Absent,
}

/// The group `method` is served by (exhaustive: a new method must be placed).
fn group(method: Method) -> Group {
    match method {
        Method::Connect
        | Method::Agent
        | Method::AgentWait
        | Method::AgentEvents
        | Method::ChatSend
        | Method::ChatHistory
        | Method::ChatStartup
        | Method::ChatAbort
        | Method::ChatInject
        | Method::SessionsCreate => Group::Turn,
        Method::Health
        | Method::Status
        | Method::GatewayStatus
        | Method::DiagnosticsLanes
        | Method::QuestionList
        | Method::ModelsList
        | Method::ModelsAuthStatus
        | Method::ChatMetadata
        | Method::AgentIdentityGet
        | Method::ConfigGet
        | Method::LogsTail
        | Method::SystemPresence
        | Method::AgentsList
        | Method::GatewayDrain
        | Method::GatewayReload
        | Method::WorkerRestart
        | Method::CommandsList => Group::Gateway,
        Method::ConfigSchema
        | Method::ConfigSchemaLookup
        | Method::ConfigPatch
        | Method::ConfigApply
        | Method::ConfigSet
        | Method::AgentsCreate
        | Method::AgentsUpdate
        | Method::AgentsDelete
        | Method::ToolsCatalog
        | Method::ToolsEffective
        | Method::AgentsFilesList
        | Method::AgentsFilesGet
        | Method::AgentsFilesSet
        | Method::UsageStatus
        | Method::UsageCost
        | Method::SessionsUsage
        | Method::SkillsStatus => Group::Operator,
        Method::SessionsResolve
        | Method::SessionsAbort
        | Method::SessionsList
        | Method::SessionsSubscribe
        | Method::SessionsDescribe
        | Method::SessionsPreview
        | Method::SessionsPatch
        | Method::SessionsReset
        | Method::SessionsDelete
        | Method::SessionsCompact
        | Method::SessionsMessagesSubscribe
        | Method::SessionsMessagesUnsubscribe => Group::Session,
        Method::ExecAllowlistGet
        | Method::ExecAllowlistRemove
        | Method::ExecApprovalList
        | Method::ExecApprovalResolve
        | Method::DevicePairList
        | Method::DeviceTokenRotate
        | Method::DeviceTokenRevoke => Group::Approval,
        Method::CronList
        | Method::CronStatus
        | Method::CronGet
        | Method::CronAdd
        | Method::CronUpdate
        | Method::CronRemove
        | Method::CronRun
        | Method::CronRuns
        | Method::Wake => Group::Cron,
        Method::TasksList
        | Method::TalkCatalog
        | Method::UpdateStatus
        | Method::ProgressCardGet
        | Method::SessionsBranchesList
        | Method::SessionsCompanionState
        | Method::SessionsObserverVisibility
        | Method::ChannelsStatus
        | Method::LastHeartbeat
        | Method::NodeList
        | Method::NodePairList
        | Method::PluginApprovalList
        | Method::OpenclawApprovalList
        | Method::ApprovalHistory => Group::Absent,
    }
}

/// Serves one request of a connection: its method checked against the connection's
/// scopes, then handed to its group's handler (`turn`: its place in the connection's order,
/// for the ordered methods).
pub async fn handle(
    gw: &Arc<Gateway>,
    session: &Session,
    req: Request,
    out: &Out,
    turn: Option<AdmissionTurn>,
) {
    let method = match callable(&req.method, &session.scopes) {
        Ok(method) => method,
        Err(error) => return refuse(out, &req.id, error).await,
    };
    match group(method) {
        Group::Turn => turn_method(gw, session, method, req, out, turn).await,
        Group::Gateway => gateway_method(gw, method, req, out).await,
        Group::Operator => operator::method(gw, method, req, out).await,
        Group::Session => session_method(gw, session, method, req, out).await,
        Group::Approval => approval_method(gw, session, method, req, out).await,
        Group::Cron => cron::method(gw, method, req, out).await,
        Group::Absent => absent::answer(&gw.config(), method, req, out).await,
    }
}

/// Runs, their chat and their sessions' creation.
async fn turn_method(
    gw: &Arc<Gateway>,
    session: &Session,
    method: Method,
    req: Request,
    out: &Out,
    turn: Option<AdmissionTurn>,
) {
    match method {
        Method::Connect => {
            let e = ErrorShape::invalid("connect is only valid as the first frame");
            refuse(out, &req.id, e).await
        }
        Method::Agent => {
            let agent = |first, p, turn| agent(gw, session, out, first, p, turn);
            let answered = Answered::default();
            serve_run::<m::Agent, _>(&req, out, &answered, turn, agent).await
        }
        Method::AgentWait => serve_reply::<m::AgentWait>(req, out, |p| agent_wait(gw, p)).await,
        Method::AgentEvents => {
            let replay = |p| resume::agent_events(&gw.hub, &gw.db, session, Following::of(out), p);
            serve::<m::AgentEvents, _>(req, out, replay).await
        }
        Method::ChatSend => {
            let send = |first, p, turn| chat_send(gw, session, out, first, p, turn);
            let answered = Answered::default();
            serve_run::<m::ChatSend, _>(&req, out, &answered, turn, send).await
        }
        // The first page a client loads (OpenClaw runs the same handler; the `shortId` form
        // is refused by the params: a session key is required).
        Method::ChatHistory => {
            serve::<m::ChatHistory, _>(req, out, |p| chat_history(gw, out, method, p)).await
        }
        Method::ChatStartup => {
            serve::<m::ChatStartup, _>(req, out, |p| chat_history(gw, out, method, p)).await
        }
        Method::ChatAbort => serve::<m::ChatAbort, _>(req, out, |p| chat_abort(gw, p)).await,
        Method::ChatInject => {
            serve::<m::ChatInject, _>(req, out, |p| chat_inject(gw, out, p)).await
        }
        Method::SessionsCreate => {
            let create = |first, p, turn| sessions_create(gw, session, first, p, turn);
            let answered = Answered::default();
            serve_run::<m::SessionsCreate, _>(&req, out, &answered, turn, create).await
        }
        other => misrouted(other, req, out).await,
    }
}

/// A method of a group answered by a function that does not take it: a bug, said as one.
async fn misrouted(method: Method, req: Request, out: &Out) {
    tracing::error!(
        method = method.as_str(),
        "A method reached the wrong group."
    );
    let e = ErrorShape::invalid(format!("unknown method: {}", method.as_str()));
    refuse(out, &req.id, e).await
}

/// The gateway's own methods and its catalog's.
async fn gateway_method(gw: &Arc<Gateway>, method: Method, req: Request, out: &Out) {
    match method {
        Method::Health => serve::<m::Health, _>(req, out, |_| health(gw)).await,
        Method::Status => {
            let config = gw.config();
            serve::<m::Status, _>(req, out, |p| status_summary(&config, &gw.db, p)).await
        }
        Method::GatewayStatus => serve::<m::GatewayStatus, _>(req, out, |_| status(gw)).await,
        Method::DiagnosticsLanes => {
            serve::<m::DiagnosticsLanes, _>(req, out, |_| diagnostics::lanes(gw)).await
        }
        Method::QuestionList => {
            let none = || QuestionListResult {
                questions: Vec::new(),
            };
            serve::<m::QuestionList, _>(req, out, |_| async { Ok(none()) }).await
        }
        Method::ModelsList => {
            let models = || crate::catalog::models(&gw.config(), &gw.env_set);
            serve::<m::ModelsList, _>(req, out, |_| async { Ok(models()) }).await
        }
        Method::ModelsAuthStatus => {
            let status = || crate::catalog::auth_status(&gw.config(), &gw.env_set, now_ms());
            serve::<m::ModelsAuthStatus, _>(req, out, |_| async { Ok(status()) }).await
        }
        Method::ChatMetadata => {
            let metadata = |p| async { chat_metadata(&gw.config(), &gw.env_set, p) };
            serve::<m::ChatMetadata, _>(req, out, metadata).await
        }
        Method::AgentIdentityGet => {
            let identity = |p| async { agent_identity(&gw.config(), p) };
            serve::<m::AgentIdentityGet, _>(req, out, identity).await
        }
        Method::ConfigGet => {
            let config = gw.config();
            serve::<m::ConfigGet, _>(req, out, |_| config_get(&config)).await
        }
        Method::LogsTail => serve::<m::LogsTail, _>(req, out, |p| async { logs_tail(p) }).await,
        // A bare array, as OpenClaw answers it.
        Method::SystemPresence => {
            serve::<m::SystemPresence, _>(req, out, |_| async { Ok(gw.presence.list()) }).await
        }
        Method::AgentsList => {
            serve::<m::AgentsList, _>(req, out, |_| async { Ok(agents_list(&gw.config())) }).await
        }
        Method::GatewayDrain => {
            serve::<m::GatewayDrain, _>(req, out, |p| gateway_drain(gw, p)).await
        }
        Method::GatewayReload => {
            let reload = |_| gateway_reload(&gw.reload_requests);
            serve::<m::GatewayReload, _>(req, out, reload).await
        }
        Method::WorkerRestart => {
            let config = gw.config();
            let restart = |p| worker_restart(&config, &gw.control, p);
            serve::<m::WorkerRestart, _>(req, out, restart).await
        }
        Method::CommandsList => {
            let list = |p| async { Ok(command_run::commands_list(p)) };
            serve::<m::CommandsList, _>(req, out, list).await
        }
        other => misrouted(other, req, out).await,
    }
}

/// The session index's methods.
async fn session_method(
    gw: &Arc<Gateway>,
    session: &Session,
    method: Method,
    req: Request,
    out: &Out,
) {
    match method {
        Method::SessionsResolve => {
            let config = gw.config();
            let resolve = |p| sessions_resolve(&config, &gw.db, p);
            serve::<m::SessionsResolve, _>(req, out, resolve).await
        }
        Method::SessionsAbort => {
            serve::<m::SessionsAbort, _>(req, out, |p| sessions_abort(gw, p)).await
        }
        Method::SessionsList => {
            serve::<m::SessionsList, _>(req, out, |p| async move { session_page(gw, &p).await })
                .await
        }
        Method::SessionsSubscribe => {
            let subscribe = |p| sessions_subscribe(gw, Following::of(out), p);
            serve::<m::SessionsSubscribe, _>(req, out, subscribe).await
        }
        Method::SessionsDescribe => {
            serve::<m::SessionsDescribe, _>(req, out, |p| sessions_describe(gw, p)).await
        }
        Method::SessionsPreview => {
            serve::<m::SessionsPreview, _>(req, out, |p| sessions_preview(gw, out, p)).await
        }
        Method::SessionsPatch => {
            serve::<m::SessionsPatch, _>(req, out, |p| sessions_patch(gw, session, p)).await
        }
        Method::SessionsReset => {
            serve::<m::SessionsReset, _>(req, out, |p| sessions_reset(gw, out, p)).await
        }
        Method::SessionsDelete => {
            serve::<m::SessionsDelete, _>(req, out, |p| sessions_delete(gw, out, p)).await
        }
        Method::SessionsCompact => {
            serve::<m::SessionsCompact, _>(req, out, |p| sessions_compact(gw, out, p)).await
        }
        // One handler for both: `method` says which.
        Method::SessionsMessagesSubscribe => {
            let follow = |p| ready(follow_messages(gw, out, method, p));
            serve::<m::SessionsMessagesSubscribe, _>(req, out, follow).await
        }
        Method::SessionsMessagesUnsubscribe => {
            let unfollow = |p| ready(follow_messages(gw, out, method, p));
            serve::<m::SessionsMessagesUnsubscribe, _>(req, out, unfollow).await
        }
        other => misrouted(other, req, out).await,
    }
}

/// Exec approvals, kept patterns and device tokens.
async fn approval_method(
    gw: &Arc<Gateway>,
    session: &Session,
    method: Method,
    req: Request,
    out: &Out,
) {
    match method {
        Method::ExecAllowlistGet => {
            let list = |_| approvals::exec_allowlist(&gw.control);
            serve::<m::ExecAllowlistGet, _>(req, out, list).await
        }
        Method::ExecAllowlistRemove => {
            let remove = |p| approvals::exec_allowlist_remove(&gw.control, p);
            serve::<m::ExecAllowlistRemove, _>(req, out, remove).await
        }
        Method::ExecApprovalList => {
            let list = |_| approvals::exec_approval_list(&gw.control);
            serve::<m::ExecApprovalList, _>(req, out, list).await
        }
        Method::ExecApprovalResolve => {
            let resolve = |p| approvals::exec_approval_resolve(&gw.control, session, p);
            serve::<m::ExecApprovalResolve, _>(req, out, resolve).await
        }
        Method::DevicePairList => {
            let list = |_| device_pair_list(&gw.db, &gw.device_conns);
            serve::<m::DevicePairList, _>(req, out, list).await
        }
        Method::DeviceTokenRotate => {
            let rotate = |p| device_token_rotate(gw, session, p);
            serve_reply::<m::DeviceTokenRotate>(req, out, rotate).await
        }
        Method::DeviceTokenRevoke => {
            let revoke = |p| device_token_revoke(&gw.db, &gw.device_conns, p);
            serve_reply::<m::DeviceTokenRevoke>(req, out, revoke).await
        }
        other => misrouted(other, req, out).await,
    }
}

/// `sessions.messages.subscribe` / `unsubscribe` on connection `out` (`method`: which).
fn follow_messages(
    gw: &Gateway,
    out: &Out,
    method: Method,
    p: ipc::gateway::SessionMessagesParams,
) -> Answer<ipc::gateway::SessionMessagesResult> {
    session_messages(&gw.config(), &gw.hub, Following::of(out), method, p)
}

/// `key` (with `agent_id`) routed against the configured agents, or the error of method
/// `method` that says why not.
fn routed(
    config: &crate::config::Config,
    method: Method,
    key: &str,
    agent_id: Option<&str>,
) -> Answer<Route> {
    let name = method.as_str();
    let p = AgentParams {
        session_key: Some(key.to_owned()),
        agent_id: agent_id.map(str::to_owned),
        ..Default::default()
    };
    route(&p, |id| config.agent(id).is_some())
        .map_err(|m| ErrorShape::invalid(format!("invalid {name} params: {m}")))
}

fn control_error(e: ControlError) -> ErrorShape {
    match e {
        ControlError::Overloaded => ErrorShape::unavailable(e.to_string(), Some(250)),
        ControlError::Closed => ErrorShape::unavailable(e.to_string(), Some(1000)),
    }
}

/// Why a session operation has no answer, as the method's error: what the worker said
/// ([`session_error`]), or that it answered with a reply of another kind (logged where
/// found).
fn ask_error(e: AskError) -> ErrorShape {
    match e {
        AskError::Failed(e) => session_error(e),
        AskError::Unexpected => ErrorShape::unavailable(e.to_string(), None),
    }
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

/// Why an attachment cannot be read for the Control UI.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Worker(#[from] AskError),
}

/// An attachment a message of `session_key` carries (the Control UI's media route): routed
/// as `chat.history` routes the key, read by the agent's worker.
pub(crate) async fn session_media(
    gw: &Gateway,
    agent_id: Option<&str>,
    session_key: &str,
    digits: &str,
) -> Result<Option<ipc::control::MediaBytes>, MediaError> {
    let p = AgentParams {
        session_key: Some(session_key.to_owned()),
        agent_id: agent_id.map(str::to_owned),
        ..Default::default()
    };
    let route = admission::route(&p, |id| gw.config().agent(id).is_some())?;
    let op = MediaOp {
        session_key: route.session_key,
        digest: digits.to_ascii_lowercase(),
    };
    Ok(at_worker(gw, route.agent_id, op).await?.found)
}

/// A session operation at the agent's worker, within this connection's share, answered
/// with the reply of its kind.
async fn ask<O: Op>(
    gw: &Arc<Gateway>,
    out: &Out,
    agent_id: String,
    op: O,
) -> Result<O::Reply, AskError> {
    let Ok(_permit) = out.session_ops.try_acquire() else {
        return Err(AskError::Failed(RpcError::new(
            ErrorCode::Overloaded,
            format!(
                "too many session operations in flight on this connection (at most {}); wait for their answers",
                crate::connection::out::SESSION_OPS_PER_CONN
            ),
        )));
    };
    at_worker(gw, agent_id, op).await
}

/// A session operation at the agent's worker: this gateway's, or (cluster mode) the
/// owner's.
pub(super) async fn at_worker<O: Op>(
    gw: &Gateway,
    agent_id: String,
    op: O,
) -> Result<O::Reply, AskError> {
    gw.backend.ask(&gw.control, agent_id, op).await
}

#[cfg(test)]
mod tests;
