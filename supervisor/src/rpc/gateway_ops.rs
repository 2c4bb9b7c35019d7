//! Methods about the gateway itself: `health`, `status` (OpenClaw's summary) and
//! `loopgate.status`, `config.get`, `logs.tail`, `chat.metadata` / `agent.identity.get`,
//! `agents.list`, and the operator's `loopgate.reload`, `gateway.drain` and `worker.restart`.

use super::*;

/// `config.get`: the config as loaded, with the file's hash.
pub(super) async fn config_get(gw: &Gateway, req: Request, out: &Out) {
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

pub(super) async fn health(gw: &Gateway, req: Request, out: &Out) {
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
pub(super) async fn session_summary(
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
pub(super) async fn status_summary(gw: &Gateway, req: Request, out: &Out) {
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

pub(super) async fn status(gw: &Gateway, req: Request, out: &Out) {
    match gw
        .control
        .status(gw.connections.load(Ordering::Relaxed))
        .await
    {
        Ok(mut s) => {
            if let Some(c) = gw.cluster.get() {
                s.cluster = Some(c.status(&gw.config().agent_ids()).await);
            }
            reply::<m::GatewayStatus>(out, &req.id, &s).await
        }
        Err(e) => out.err(&req.id, control_error(e)).await,
    }
}

/// `logs.tail`: the gateway's last log lines from the in-memory ring (read scope, as
/// OpenClaw's; log lines are operational: ids, names, timings and errors).
pub(super) async fn logs_tail(req: Request, out: &Out) {
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
pub(super) async fn agent_scoped(gw: &Arc<Gateway>, req: Request, out: &Out, method: Method) {
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
pub(super) async fn gateway_reload(gw: &Arc<Gateway>, req: Request, out: &Out) {
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

pub(super) async fn gateway_drain(gw: &Arc<Gateway>, req: Request, out: &Out) {
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

pub(super) async fn worker_restart(gw: &Arc<Gateway>, req: Request, out: &Out) {
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

pub(super) async fn agents_list(gw: &Gateway, req: Request, out: &Out) {
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
