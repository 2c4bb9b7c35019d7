//! The `connect` request: its checks (frame, client, protocol, role), authentication
//! (`crate::auth`, device tokens from `crate::devices`) and the typed `hello-ok`.

use ipc::gateway::{
    self as gw, ConnectParams, ErrorShape, Features, FrameError, HelloAuth, HelloOk, HelloServer,
    Method, Policy, Scope, SessionDefaults, Snapshot, StateVersion, GATEWAY_PROTOCOL,
    MAX_PAYLOAD_BYTES, TICK_INTERVAL_MS,
};
use serde_json::{json, Value};

use crate::auth::{DeviceTokenClaim, Granted, Verdict};
use crate::config::AuthMode;
use crate::connection::peer::{Session, Transport};
use crate::events::now_ms;
use crate::gateway::Gateway;
use crate::gatewaydb::devices::{DeviceCmd, Holder, Presented};

/// A refused handshake.
pub(crate) struct Refused {
    pub id: Option<String>,
    pub error: ErrorShape,
    pub code: u16,
    pub reason: String,
    /// Whether a WebSocket client gets a `res` before the close (OpenClaw closes without one
    /// for frames that are not requests). The unix socket always answers.
    pub answer: bool,
}

pub(crate) type HandshakeError = Box<Refused>;

/// What a successful `connect` produced: the request id to answer, `hello-ok` and the
/// connection's session.
pub(crate) struct Accepted {
    pub id: String,
    pub hello: HelloOk,
    pub session: Session,
    /// For a device-token connect: the device registry's epoch read before the token was
    /// checked (registration refuses the connect if a revoke swept in between).
    pub token_checked_at: Option<u64>,
}

pub(crate) async fn handshake(
    gw: &Gateway,
    transport: Transport,
    conn_id: &str,
    nonce: &str,
    text: &str,
) -> Result<Accepted, HandshakeError> {
    let req = match gw::parse_request(text) {
        Ok(Some(r)) => r,
        Ok(None) | Err(FrameError::Invalid { .. }) => {
            return Err(Box::new(Refused {
                id: None,
                error: ErrorShape::invalid(
                    "invalid handshake: first frame must be a connect request",
                ),
                code: 1008,
                reason: "invalid request frame".into(),
                answer: false,
            }));
        }
        Err(FrameError::NotJson(e)) => {
            return Err(Box::new(Refused {
                id: None,
                error: ErrorShape::invalid(format!("invalid handshake: frame is not JSON ({e})")),
                code: 1000,
                reason: String::new(),
                answer: false,
            }));
        }
    };
    let id = req.id.clone();
    let fail = |error: ErrorShape, code: u16, reason: &str| {
        Err(Box::new(Refused {
            id: Some(id.clone()),
            error,
            code,
            reason: reason.to_owned(),
            answer: true,
        }))
    };
    if Method::parse(&req.method) != Some(Method::Connect) {
        let msg = "invalid handshake: first request must be connect";
        return fail(ErrorShape::invalid(msg), 1008, msg);
    }
    let params: ConnectParams =
        match serde_json::from_value(req.params.clone().unwrap_or(Value::Null)) {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("invalid connect params: {e}");
                return fail(ErrorShape::invalid(&msg), 1008, &msg);
            }
        };
    if !gw::CLIENT_IDS.contains(&params.client.id.as_str()) {
        let msg = format!(
            "invalid connect params: unknown client.id {:?}",
            params.client.id
        );
        return fail(ErrorShape::invalid(&msg), 1008, &msg);
    }
    if !gw::CLIENT_MODES.contains(&params.client.mode.as_str()) {
        let msg = format!(
            "invalid connect params: unknown client.mode {:?}",
            params.client.mode
        );
        return fail(ErrorShape::invalid(&msg), 1008, &msg);
    }
    if !(params.max_protocol >= GATEWAY_PROTOCOL && params.min_protocol <= GATEWAY_PROTOCOL) {
        return fail(
            ErrorShape::invalid("protocol mismatch").with_details(json!({
                "code": "PROTOCOL_MISMATCH",
                "clientMinProtocol": params.min_protocol,
                "clientMaxProtocol": params.max_protocol,
                "expectedProtocol": GATEWAY_PROTOCOL,
                "minimumProbeProtocol": 3,
            })),
            1002,
            "protocol mismatch",
        );
    }
    let role = params.role.clone().unwrap_or_else(|| "operator".into());
    if role != "operator" {
        let msg = if ["node", "worker"].contains(&role.as_str()) {
            format!("role {role:?} is not supported by loopgate")
        } else {
            "invalid role".to_owned()
        };
        return fail(ErrorShape::invalid(&msg), 1008, &msg);
    }
    if gw.stopping.is_cancelled() {
        return fail(
            ErrorShape::unavailable("connect unavailable during gateway restart", Some(1000)),
            1013,
            "gateway stopping",
        );
    }
    // Read before any device token is checked: see `crate::device_conns`.
    let epoch = gw.device_conns.epoch();
    let granted = match transport {
        // The unix socket is trusted by file mode (0600) and peer uid, checked on accept.
        Transport::Unix => {
            let requested = params.scopes.clone().unwrap_or_default();
            let scopes = if requested.is_empty() {
                vec![
                    Scope::Admin.as_str().to_owned(),
                    Scope::Read.as_str().to_owned(),
                    Scope::Write.as_str().to_owned(),
                ]
            } else {
                requested
            };
            Granted {
                scopes,
                method: "none",
                device_id: None,
                issue_device_token: false,
            }
        }
        Transport::WebSocket(peer) => match authenticate(gw, &params, nonce, peer).await {
            Ok(g) => g,
            Err(r) => {
                tracing::info!(
                    conn = conn_id,
                    client = params.client.id.as_str(),
                    reason = r.close_reason.as_str(),
                    "Refused a connect."
                );
                // Each guess costs the guesser this much; the connection cap bounds how
                // many wait at once.
                tokio::time::sleep(crate::door::FAILED_AUTH_DELAY).await;
                return fail(r.error, r.close_code, &r.close_reason);
            }
        },
    };
    let token_checked_at = (granted.method == "device-token").then_some(epoch);
    let now = now_ms();
    // A failure to issue costs the client only the token (it keeps the gateway token).
    let issued = match (&granted.device_id, granted.issue_device_token) {
        (Some(device_id), true) => {
            let holder = Holder {
                device_id: device_id.clone(),
                role: role.clone(),
                client_id: params.client.id.clone(),
                client_mode: params.client.mode.clone(),
                platform: params.client.platform.clone(),
            };
            let scopes = granted.scopes.clone();
            let generation = crate::gatewaydb::devices::generation(&gw.config());
            match gw
                .db
                .devices(|reply| DeviceCmd::Issue {
                    holder,
                    scopes,
                    generation,
                    now,
                    reply,
                })
                .await
            {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot issue a device token; the client keeps the gateway token.");
                    None
                }
            }
        }
        _ => None,
    };
    let scopes = granted.scopes.clone();
    let session = Session {
        conn_id: conn_id.to_owned(),
        scopes: scopes.clone(),
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
            scopes: scopes.clone(),
            reason: "connect".into(),
            online_since: Some(now),
            text: None,
            device_id: granted.device_id.clone(),
        },
    };
    let config = gw.config();
    let admin = scopes.iter().any(|s| s == Scope::Admin.as_str());
    let hello = HelloOk {
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
        snapshot: Snapshot {
            presence: gw.presence(),
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
        },
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
        },
    };
    Ok(Accepted {
        id,
        hello,
        session,
        token_checked_at,
    })
}

/// A network client's credentials: the gateway token, or a device token the store knows.
async fn authenticate(
    gw: &Gateway,
    params: &ConnectParams,
    nonce: &str,
    peer: crate::auth::Peer,
) -> Result<Granted, Box<crate::auth::Refusal>> {
    let config = gw.config();
    let token = match config.gateway.auth_mode {
        AuthMode::Token => config.gateway.token.as_deref(),
        AuthMode::None => None,
    };
    match crate::auth::authenticate(params, token, nonce, peer, now_ms() as i64)? {
        Verdict::Granted(g) => Ok(g),
        Verdict::CheckDeviceToken(claim) => {
            let presented = check_device_token(gw, &claim).await?;
            crate::auth::device_token_grant(&claim, &presented)
        }
    }
}

async fn check_device_token(
    gw: &Gateway,
    claim: &DeviceTokenClaim,
) -> Result<Presented, Box<crate::auth::Refusal>> {
    let (device_id, role, token) = (
        claim.device_id.clone(),
        claim.role.clone(),
        claim.token.clone(),
    );
    let generation = crate::gatewaydb::devices::generation(&gw.config());
    gw.db
        .devices(|reply| DeviceCmd::Check {
            device_id,
            role,
            token,
            generation,
            now: now_ms(),
            reply,
        })
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "Cannot check a device token.");
            Box::new(crate::auth::Refusal {
                error: ErrorShape::unavailable(
                    "cannot check the device token now; retry",
                    Some(1000),
                ),
                close_code: 1013,
                close_reason: "device token check unavailable".into(),
            })
        })
}
