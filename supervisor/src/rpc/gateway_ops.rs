//! Methods about the gateway itself: `health`, `status` (OpenClaw's summary) and
//! `loopgate.status`, `config.get`, `logs.tail`, `chat.metadata` / `agent.identity.get`,
//! `agents.list`, and the operator's `loopgate.reload`, `gateway.drain` and `worker.restart`.
//! Each takes its params and gives its result or its error (`serve` answers).

use super::*;
use ipc::gateway::{
    AgentIdentity, AgentScopeParams, ChatMetadataResult, ConfigGetResult, ConfigSchemaLookupParams,
    ConfigSchemaLookupResult, ConfigSchemaResult, ConfigWriteResult, GatewayDrainParams,
    LogsTailParams, LogsTailResult, ReloadResult, StatusParams, StatusResult, WorkerRestartParams,
    WorkerRestartResult,
};

/// `config.get`: the config as loaded, and the file as it is now: its text and parse with
/// secrets redacted, and its hash (the `baseHash` of a write).
pub(super) async fn config_get(config: &Config) -> Answer<ConfigGetResult> {
    // No file (all defaults): the hash of no bytes, so the first write can name it.
    let bytes = match tokio::fs::read(&config.path).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Vec::new()),
        read => read.ok(),
    };
    let file = bytes.map(|bytes| {
        let hash = crate::config_edit::content_hash(&bytes);
        let text = String::from_utf8_lossy(&bytes);
        let (raw, parsed) = match crate::config_edit::document(&text) {
            Ok(doc) => crate::config_edit::redacted(&doc),
            // Not TOML (edited by hand since it was loaded): shown as nothing rather than
            // risk a secret.
            Err(_) => (String::new(), serde_json::Value::Null),
        };
        crate::catalog::FileView { raw, parsed, hash }
    });
    Ok(crate::catalog::config_get(config, file))
}

/// `config.schema`: the config file's schema, generated from the config's types.
pub(super) async fn config_schema() -> Answer<ConfigSchemaResult> {
    Ok(ConfigSchemaResult {
        schema: crate::config_schema::schema().clone(),
        ui_hints: serde_json::Map::new(),
        version: env!("CARGO_PKG_VERSION").into(),
        generated_at: crate::control_ui::media::iso_ms(now_ms()),
    })
}

/// `config.schema.lookup`: one key's node, how a change of it applies, and its children.
pub(super) async fn config_schema_lookup(
    p: ConfigSchemaLookupParams,
) -> Answer<ConfigSchemaLookupResult> {
    crate::config_schema::lookup(&p.path)
        .ok_or_else(|| ErrorShape::invalid("config schema path not found"))
}

/// `config.patch` and `config.apply`: the serve loop (`requests`) writes the file and applies
/// it, one write or reload at a time; answers the write or why nothing changed.
pub(super) async fn config_write(
    requests: &ReloadRequests,
    write: ConfigWrite,
) -> Answer<ConfigWriteResult> {
    let Some(tx) = requests.get() else {
        return Err(ErrorShape::unavailable(
            "config writes are not available yet",
            Some(1000),
        ));
    };
    let (answer, rx) = oneshot::channel();
    if tx.send(ConfigRequest::Write(write, answer)).await.is_err() {
        return Err(ErrorShape::unavailable("the gateway is stopping", None));
    }
    rx.await
        .map_err(|_| ErrorShape::unavailable("the gateway is stopping", None))?
}

pub(super) async fn health(gw: &Gateway) -> Answer<HealthResult> {
    let started = Instant::now();
    let config = gw.config();
    let mut agents = Vec::with_capacity(config.agents.len());
    for a in &config.agents {
        let sessions = session_summary(&gw.db, &config, Some(a.id.as_str())).await?;
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
    Ok(HealthResult {
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
    })
}

/// An agent's sessions (all agents' for `None`) in the gateway db: the count and the 10 most
/// recent (`config`: where the db is, as the summary tells it).
pub(super) async fn session_summary(
    db: &GatewayDb,
    config: &Config,
    agent_id: Option<&str>,
) -> Result<SessionSummary, ErrorShape> {
    let q = SessionQuery {
        agent_id: agent_id.map(str::to_owned),
        limit: 10,
        ..SessionQuery::default()
    };
    let (rows, count) = db
        .sessions(q)
        .await
        .map_err(|e| ErrorShape::unavailable(format!("cannot list sessions: {e}"), Some(500)))?;
    let now = now_ms();
    Ok(SessionSummary {
        path: crate::paths::gateway_db(&config.state_dir)
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

/// `status`: OpenClaw's status summary (what `openclaw status --json` reads): the configured
/// agents and their sessions in the gateway db.
pub(super) async fn status_summary(
    config: &Config,
    db: &GatewayDb,
    p: StatusParams,
) -> Answer<StatusSummary> {
    let all = session_summary(db, config, None).await?;
    let mut by_agent = Vec::with_capacity(config.agents.len());
    for a in &config.agents {
        let s = session_summary(db, config, Some(a.id.as_str())).await?;
        by_agent.push(AgentSessions {
            agent_id: a.id.as_str().to_owned(),
            path: s.path,
            count: s.count,
            recent: s.recent,
        });
    }
    let main_model = config.agent("main").and_then(|a| a.model.as_ref());
    Ok(StatusSummary {
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
    })
}

pub(super) async fn status(gw: &Gateway) -> Answer<StatusResult> {
    let mut s = gw
        .control
        .status(gw.connections.load(Ordering::Relaxed))
        .await
        .map_err(control_error)?;
    s.cluster = gw.backend.status(&gw.config().agent_ids()).await;
    Ok(s)
}

/// `logs.tail`: the gateway's last log lines from the in-memory ring (read scope, as
/// OpenClaw's; log lines are operational: ids, names, timings and errors).
pub(super) fn logs_tail(p: LogsTailParams) -> Answer<LogsTailResult> {
    let limit = p.limit.unwrap_or(500);
    let max_bytes = p.max_bytes.unwrap_or(250_000);
    if !(1..=5000).contains(&limit) || !(1..=1_000_000).contains(&max_bytes) {
        return Err(ErrorShape::invalid(
            "invalid logs.tail params: limit must be 1..5000 and maxBytes 1..1000000",
        ));
    }
    Ok(crate::log_ring::LOGS.tail(p.cursor, limit as usize, max_bytes as usize))
}

/// `chat.metadata`: about the agent [`scoped_agent`] names (`env_set`: the environment
/// variables that are set, whether its providers' keys are present).
pub(super) fn chat_metadata(
    config: &Config,
    env_set: &std::collections::HashSet<String>,
    p: AgentScopeParams,
) -> Answer<ChatMetadataResult> {
    let agent = scoped_agent(config, Method::ChatMetadata, &p)?;
    Ok(crate::catalog::chat_metadata(agent, env_set))
}

/// `agent.identity.get`: about the agent [`scoped_agent`] names.
pub(super) fn agent_identity(config: &Config, p: AgentScopeParams) -> Answer<AgentIdentity> {
    let agent = scoped_agent(config, Method::AgentIdentityGet, &p)?;
    Ok(crate::catalog::identity(agent))
}

/// The configured agent named by `agentId`, by `sessionKey`, or `main`.
fn scoped_agent<'c>(
    config: &'c Config,
    method: Method,
    p: &AgentScopeParams,
) -> Answer<&'c crate::config::AgentConfig> {
    let route = match &p.session_key {
        Some(key) => routed(config, method, key, p.agent_id.as_deref())?.agent_id,
        None => p.agent_id.clone().unwrap_or_else(|| "main".into()),
    };
    AgentId::parse(&route)
        .ok()
        .and_then(|id| config.agent(id.as_str()))
        .ok_or_else(|| {
            ErrorShape::invalid(format!(
                "invalid {} params: unknown agent id {route:?}",
                method.as_str()
            ))
        })
}

/// `loopgate.reload`: asks the serve loop (`requests`) to take the same path as SIGHUP;
/// answers what changed or why nothing did.
pub(super) async fn gateway_reload(requests: &ReloadRequests) -> Answer<ReloadResult> {
    let Some(tx) = requests.get() else {
        return Err(ErrorShape::unavailable(
            "reload is not available yet",
            Some(1000),
        ));
    };
    let (answer, rx) = oneshot::channel();
    if tx.try_send(ConfigRequest::Reload(answer)).is_err() {
        return Err(ErrorShape::unavailable(
            "a reload is already under way; retry",
            Some(1000),
        ));
    }
    rx.await
        .map_err(|_| ErrorShape::unavailable("the gateway is stopping", None))
}

pub(super) async fn gateway_drain(gw: &Gateway, p: GatewayDrainParams) -> Answer<DrainResult> {
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
        return Ok(already_draining);
    }
    match gw.drain_requests.try_send(deadline) {
        Ok(()) => Ok(DrainResult {
            ok: true,
            draining: true,
            already_draining: None,
            deadline_ms: Some(deadline.as_millis() as u64),
        }),
        Err(_) => Ok(already_draining),
    }
}

/// `worker.restart`: the control actor restarts a configured agent's worker.
pub(super) async fn worker_restart(
    config: &Config,
    control: &ControlHandle,
    p: WorkerRestartParams,
) -> Answer<WorkerRestartResult> {
    let id = match AgentId::parse(&p.agent_id) {
        Ok(id) if config.agent(id.as_str()).is_some() => id,
        _ => {
            return Err(ErrorShape::invalid(format!(
                "invalid worker.restart params: unknown agent id {:?}",
                p.agent_id
            )))
        }
    };
    control
        .restart_worker(id.as_str().to_owned(), p.force.unwrap_or(false))
        .await
        .map_err(|e| ErrorShape::unavailable(e.message, Some(1000)))
}

/// `agents.list`: every configured agent (pure: the config's).
pub(super) fn agents_list(config: &Config) -> AgentsListResult {
    let agents = config
        .agents
        .iter()
        .map(|a| AgentSummary {
            id: a.id.as_str().to_owned(),
            name: a.name.clone(),
            workspace: a.workspace.display().to_string(),
            model: crate::catalog::agent_model(a),
        })
        .collect();
    AgentsListResult {
        default_id: "main".into(),
        main_key: "main".into(),
        scope: "per-sender".into(),
        agents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides, RawConfig};

    fn config(text: &str) -> Config {
        let raw: RawConfig = toml::from_str(text).unwrap();
        let (path, state) = (
            std::path::Path::new("/etc/lg.toml"),
            std::path::Path::new("/state"),
        );
        Config::from_raw(raw, path, state, &Overrides::default()).unwrap()
    }

    #[test]
    fn logs_tail_bounds_its_page_as_openclaw() {
        for (limit, max_bytes) in [
            (Some(0), None),
            (Some(5001), None),
            (None, Some(0)),
            (None, Some(1_000_001)),
        ] {
            let e = logs_tail(LogsTailParams {
                limit,
                max_bytes,
                ..Default::default()
            })
            .unwrap_err();
            assert_eq!(e.code, ipc::gateway::codes::INVALID_REQUEST);
            assert!(
                e.message.starts_with("invalid logs.tail params"),
                "{}",
                e.message
            );
        }
        assert!(logs_tail(LogsTailParams::default()).is_ok());
    }

    #[test]
    fn agents_list_names_every_agent_and_main_as_default() {
        let c = config(
            "[agents.defaults]\nmodel = \"p/m\"\n[agents.list.ops]\nname = \"Ops\"\n\
             [models.providers.p]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:9\"\n",
        );
        let r = agents_list(&c);
        assert_eq!(
            (r.default_id.as_str(), r.main_key.as_str()),
            ("main", "main")
        );
        let ids: Vec<_> = r.agents.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["main", "ops"]);
        assert_eq!(r.agents[1].name.as_deref(), Some("Ops"));
    }
}
