//! What a passed `connect` produces: the connection's `Session` (with its presence entry)
//! and the typed `hello-ok` (server, features, snapshot, granted auth, policy).

use ipc::gateway::{
    self as gw, ConnectParams, Features, HelloAuth, HelloOk, HelloServer, Method, Policy, Scope,
    SessionDefaults, Snapshot, StateVersion, GATEWAY_PROTOCOL, MAX_PAYLOAD_BYTES, TICK_INTERVAL_MS,
};

use crate::auth::Granted;
use crate::config::{AuthMode, Config};
use crate::connection::peer::{Session, Transport};
use crate::gateway::Gateway;

/// The connection's session: who it is, its scopes and its presence entry.
pub(super) fn session(
    conn_id: &str,
    transport: Transport,
    params: &ConnectParams,
    granted: &Granted,
    now: u64,
) -> Session {
    Session {
        conn_id: conn_id.to_owned(),
        scopes: granted.scopes.clone(),
        caps: params.caps.clone(),
        transport,
        device_id: granted.device_id.clone(),
        presence: ipc::gateway::PresenceEntry {
            ts: now,
            host: None,
            client_id: Some(params.client.id.clone()),
            mode: params.client.mode.clone(),
            version: params.client.version.clone(),
            platform: params.client.platform.clone(),
            instance_id: params.client.instance_id.clone(),
            device_family: params.client.device_family.clone(),
            roles: vec!["operator".into()],
            scopes: granted.scopes.clone(),
            reason: "connect".into(),
            online_since: Some(now),
            text: None,
            device_id: granted.device_id.clone(),
        },
    }
}

/// The typed `hello-ok`: server, features, snapshot, the granted auth, policy.
pub(super) fn hello_ok(
    gw: &Gateway,
    conn_id: &str,
    role: String,
    granted: &Granted,
    issued: Option<(String, u64)>,
) -> HelloOk {
    let config = gw.config();
    let scopes = granted.scopes.clone();
    let admin = scopes.iter().any(|s| s == Scope::Admin.as_str());
    HelloOk {
        kind: "hello-ok".into(),
        protocol: GATEWAY_PROTOCOL,
        server: HelloServer {
            version: env!("CARGO_PKG_VERSION").into(),
            conn_id: conn_id.to_owned(),
            control_ui_build_source: config
                .gateway
                .control_ui
                .as_ref()
                .map(|_| "configured".into()),
        },
        features: Features {
            methods: Method::advertised()
                .map(|m| m.as_str().to_owned())
                .collect(),
            events: gw::events::ADVERTISED
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
        },
        snapshot: snapshot(gw, &config, admin),
        auth: HelloAuth {
            role,
            scopes,
            method: granted.method.into(),
            issued_at_ms: issued.as_ref().map(|(_, at)| *at),
            device_token: issued.map(|(t, _)| t),
        },
        policy: Policy {
            max_payload: MAX_PAYLOAD_BYTES,
            max_buffered_bytes: config.gateway.max_buffered_bytes,
            tick_interval_ms: TICK_INTERVAL_MS,
            attachments: gw.backend.attachment_policy(),
        },
    }
}

/// The gateway as `hello-ok` shows it; where the config and state live only to admins.
fn snapshot(gw: &Gateway, config: &Config, admin: bool) -> Snapshot {
    Snapshot {
        presence: gw.presence.list(),
        health: serde_json::Map::new(),
        state_version: StateVersion {
            presence: 0,
            health: 0,
        },
        uptime_ms: gw.started.elapsed().as_millis() as u64,
        session_defaults: SessionDefaults {
            default_agent_id: "main".into(),
            main_key: "main".into(),
            main_session_key: "agent:main:main".into(),
        },
        config_path: admin.then(|| config.path.display().to_string()),
        state_dir: admin.then(|| config.state_dir.display().to_string()),
        auth_mode: admin.then(|| {
            match config.gateway.auth_mode {
                AuthMode::Token => "token",
                AuthMode::None => "none",
            }
            .into()
        }),
    }
}
