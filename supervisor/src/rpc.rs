//! Method handlers: one function per Gateway method, each validating its params, checking
//! scopes and answering on the connection's [`Out`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ipc::control::SubmitRun;
use ipc::gateway::{
    AgentParams, AgentWaitParams, ErrorShape, HealthParams, Method, RequestFrame,
    DEFAULT_WAIT_TIMEOUT_MS,
};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::config::AgentId;
use crate::control::{ControlError, Dispatch, WaitReply};
use crate::events::now_ms;
use crate::gateway::{scopes, Gateway, Out, Session};
use crate::gatewaydb::{AcceptOutcome, NewRun, StoredRun};
use crate::outcome::{frame_from_final_json, stored_wait_json};

pub async fn handle(gw: &Arc<Gateway>, session: &Session, req: RequestFrame, out: &Out) {
    let Some(method) = Method::parse(&req.method) else {
        out.err(
            &req.id,
            ErrorShape::invalid(format!("unknown method: {}", req.method)),
        )
        .await;
        return;
    };
    let needed = match method {
        Method::Connect | Method::Health | Method::Status => scopes::READ,
        Method::Agent | Method::AgentWait => scopes::WRITE,
    };
    if !session.has_scope(needed) {
        out.err(
            &req.id,
            ErrorShape::new(ipc::gateway::codes::FORBIDDEN, format!("missing scope: {needed}"))
                .with_details(json!({"code": "MISSING_SCOPE", "missingScope": needed, "requiredScopes": [needed]})),
        )
        .await;
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
        Method::Status => status(gw, req, out).await,
        Method::Agent => agent(gw, req, out).await,
        Method::AgentWait => agent_wait(gw, req, out).await,
    }
}

/// Parses `params` into `T`, answering `invalid <method> params: ...` on failure.
async fn params<T: DeserializeOwned>(req: &RequestFrame, out: &Out) -> Option<T> {
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

async fn health(gw: &Gateway, req: RequestFrame, out: &Out) {
    let Some(_p) = params::<HealthParams>(&req, out).await else {
        return;
    };
    let agents: Vec<Value> = gw
        .config
        .agents
        .iter()
        .map(|a| json!({"agentId": a.id.as_str(), "name": a.name, "isDefault": a.id.as_str() == "main"}))
        .collect();
    out.ok(
        &req.id,
        json!({
            "ok": true,
            "ts": now_ms(),
            "durationMs": 0,
            "defaultAgentId": "main",
            "agents": agents,
            "uptimeMs": gw.started.elapsed().as_millis() as u64,
            "draining": gw.draining.load(Ordering::Relaxed),
        }),
    )
    .await;
}

async fn status(gw: &Gateway, req: RequestFrame, out: &Out) {
    match gw
        .control
        .status(gw.connections.load(Ordering::Relaxed))
        .await
    {
        Ok(s) => {
            out.ok(&req.id, serde_json::to_value(s).unwrap_or_default())
                .await
        }
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

async fn agent(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<AgentParams>(&req, out).await else {
        return;
    };
    let invalid = |m: String| ErrorShape::invalid(format!("invalid agent params: {m}"));
    if p.message.trim().is_empty() {
        return out
            .err(
                &req.id,
                invalid("message must be a non-empty string".into()),
            )
            .await;
    }
    if p.idempotency_key.is_empty() {
        return out
            .err(
                &req.id,
                invalid("idempotencyKey must be a non-empty string".into()),
            )
            .await;
    }
    if p.provider.is_some() || p.model.is_some() {
        return out
            .err(
                &req.id,
                ErrorShape::invalid("provider/model overrides are not supported by loopgate yet"),
            )
            .await;
    }
    let route = match route(&p, |id| gw.config.agent(id).is_some()) {
        Ok(r) => r,
        Err(m) => return out.err(&req.id, invalid(m)).await,
    };
    let Some(agent) = gw.config.agent(&route.agent_id) else {
        return out
            .err(
                &req.id,
                invalid(format!("unknown agent id {:?}", route.agent_id)),
            )
            .await;
    };
    let Some(model) = &agent.model else {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(format!(
                    "agent {:?} has no model configured: set agents.defaults.model (\"<provider>/<model>\") in {}",
                    route.agent_id,
                    gw.config.path.display()
                )),
            )
            .await;
    };
    if !model.api.implemented() {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(format!(
                    "provider {:?} uses api {:?}, which this loopgate build cannot call yet (supported: openai-completions)",
                    model.provider,
                    model.api.as_str()
                )),
            )
            .await;
    }
    if gw.draining.load(Ordering::Relaxed) || gw.stopping.is_cancelled() {
        return out
            .err(
                &req.id,
                ErrorShape::unavailable(
                    "gateway is draining; retry on the restarted gateway",
                    Some(1000),
                ),
            )
            .await;
    }
    let run_id = p.idempotency_key.clone();
    let accepted_at = now_ms();
    let accepted = gw
        .db
        .accept(NewRun {
            run_id: run_id.clone(),
            agent_id: route.agent_id.clone(),
            session_key: route.session_key.clone(),
            accepted_at,
        })
        .await;
    match accepted {
        Err(e) => {
            tracing::warn!(error = %e, "Cannot record an accepted run.");
            out.err(
                &req.id,
                ErrorShape::unavailable(format!("cannot accept the run: {e}"), Some(500)),
            )
            .await;
        }
        Ok(AcceptOutcome::Existing(StoredRun::Active {
            agent_id,
            session_key,
        })) => {
            out.ok(
                &req.id,
                json!({"runId": run_id, "status": "in_flight", "sessionKey": session_key, "agentId": agent_id}),
            )
            .await;
        }
        Ok(AcceptOutcome::Existing(StoredRun::Terminal { terminal, .. })) => {
            match serde_json::from_str::<Value>(&terminal.final_json) {
                Ok(v) => out.res(&frame_from_final_json(&req.id, &v)).await,
                Err(e) => {
                    out.err(
                        &req.id,
                        ErrorShape::unavailable(format!("stored result is unreadable: {e}"), None),
                    )
                    .await;
                }
            }
        }
        Ok(AcceptOutcome::Inserted) => {
            out.ok(
                &req.id,
                json!({"runId": run_id, "sessionKey": route.session_key, "agentId": route.agent_id,
                       "status": "accepted", "acceptedAt": accepted_at}),
            )
            .await;
            let timeout_ms = match p.timeout {
                Some(0) => None,
                Some(s) => Some(s.saturating_mul(1000)),
                None => agent.timeout_ms,
            };
            let (done, rx) = oneshot::channel();
            let dispatch = Dispatch {
                agent_id: route.agent_id.clone(),
                done,
                run: SubmitRun {
                    run_id: run_id.clone(),
                    session_key: route.session_key.clone(),
                    message: p.message,
                    extra_system_prompt: p.extra_system_prompt,
                    timeout_ms,
                    accepted_at,
                },
            };
            if let Err(e) = gw.control.dispatch(dispatch) {
                // Accepted but never handed over: record the failure so the run still ends once.
                let msg = format!("cannot start the run: {e}");
                let o = crate::outcome::Outcome::from_terminal(
                    &ipc::control::RunTerminal {
                        run_id: run_id.clone(),
                        status: ipc::control::RunStatus::Error,
                        session_id: None,
                        started_at: None,
                        ended_at: now_ms(),
                        error: Some(msg),
                        stop_reason: None,
                        payloads: vec![],
                        provider: None,
                        model: None,
                        usage: None,
                        duration_ms: 0,
                    },
                    &route.session_key,
                    &route.agent_id,
                );
                let _ = gw.db.finish(run_id.clone(), o.stored()).await;
                out.res(&o.final_frame(&req.id)).await;
                return;
            }
            match rx.await {
                Ok(outcome) => out.res(&outcome.final_frame(&req.id)).await,
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
            }
        }
    }
}

async fn agent_wait(gw: &Arc<Gateway>, req: RequestFrame, out: &Out) {
    let Some(p) = params::<AgentWaitParams>(&req, out).await else {
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
    let timed_out = json!({"runId": p.run_id, "status": "timeout"});
    let draining =
        json!({"runId": p.run_id, "status": "timeout", "timeoutPhase": "gateway_draining"});
    let reply = match gw.control.wait(p.run_id.clone()).await {
        Ok(r) => r,
        Err(e) => return out.err(&req.id, control_error(e)).await,
    };
    let pending = match reply {
        WaitReply::Done(o) => return out.ok(&req.id, o.wait_json()).await,
        WaitReply::Pending(rx) => Some(rx),
        WaitReply::Unknown => match gw.db.lookup(p.run_id.clone()).await {
            Ok(Some(StoredRun::Terminal { terminal, .. })) => {
                return out
                    .ok(&req.id, stored_wait_json(&p.run_id, &terminal))
                    .await;
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
                Ok(Ok(o)) => o.wait_json(),
                Ok(Err(_)) => draining,
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
    out.ok(&req.id, result).await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
