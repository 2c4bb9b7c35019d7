//! The `connect` request: its checks (frame, client, protocol, role), authentication
//! (`crate::auth`, device tokens from `crate::gatewaydb::devices`), one function each, and the typed
//! `hello-ok` (`hello`).

mod hello;

use ipc::gateway::{
    self as gw, ClientInfo, ConnectParams, ErrorShape, FrameError, HelloOk, Method, RequestFrame,
    Scope, GATEWAY_PROTOCOL,
};
use serde_json::json;

use crate::auth::{DeviceTokenClaim, Granted, Refusal, Verdict};
use crate::config::{AuthMode, Config};
use crate::connection::peer::{Session, Transport};
use crate::events::now_ms;
use crate::gateway::Gateway;
use crate::gatewaydb::devices::{DeviceCmd, Holder, Presented};
use crate::gatewaydb::GatewayDb;
use tokio_util::sync::CancellationToken;

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

/// Runs the `connect` checks on a connection's first frame, in order: the frame, the method
/// and params, the client's identity, the protocol range, the role, the gateway not stopping,
/// then authentication per transport; then issues a device token if one is due and builds
/// the session and `hello-ok`.
pub(crate) async fn handshake(
    gw: &Gateway,
    transport: Transport,
    conn_id: &str,
    nonce: &str,
    text: &str,
) -> Result<Accepted, HandshakeError> {
    let req = connect_frame(text)?;
    connect(gw, transport, conn_id, nonce, &req)
        .await
        .map_err(|r| {
            Box::new(Refused {
                id: Some(req.id.clone()),
                error: r.error,
                code: r.close_code,
                reason: r.close_reason,
                answer: true,
            })
        })
}

/// The first frame must be a request. Refusals here have no request id to answer, and a
/// WebSocket client hears only the close.
fn connect_frame(text: &str) -> Result<RequestFrame, HandshakeError> {
    match gw::parse_request_within(text, gw::Limits::PREAUTH) {
        Ok(Some(r)) => Ok(r),
        Ok(None) | Err(FrameError::Invalid { .. }) => Err(Box::new(Refused {
            id: None,
            error: ErrorShape::invalid("invalid handshake: first frame must be a connect request"),
            code: 1008,
            reason: "invalid request frame".into(),
            answer: false,
        })),
        Err(FrameError::NotJson(e)) => Err(Box::new(Refused {
            id: None,
            error: ErrorShape::invalid(format!("invalid handshake: frame is not JSON ({e})")),
            code: 1000,
            reason: String::new(),
            answer: false,
        })),
    }
}

/// The checks of a parsed request frame and what a passed connect produces. Every refusal
/// is answered with the request's id before the close.
async fn connect(
    gw: &Gateway,
    transport: Transport,
    conn_id: &str,
    nonce: &str,
    req: &RequestFrame,
) -> Result<Accepted, Box<Refusal>> {
    let params = connect_params(req)?;
    check_client(&params.client)?;
    check_protocol(&params)?;
    let role = operator_role(&params)?;
    check_not_stopping(&gw.stopping)?;
    // Read before any device token is checked: see `crate::device_conns`.
    let epoch = gw.device_conns.epoch();
    let config = gw.config();
    let granted = grant(&config, &gw.db, transport, conn_id, nonce, &params).await?;
    let token_checked_at = (granted.method == "device-token").then_some(epoch);
    let now = now_ms();
    let issued = issue_device_token(&config, &gw.db, &granted, &role, &params.client, now).await;
    let session = hello::session(conn_id, transport, &params, &granted, now);
    let hello = hello::hello_ok(gw, conn_id, role, &granted, issued);
    Ok(Accepted {
        id: req.id.clone(),
        hello,
        session,
        token_checked_at,
    })
}

/// A refused `connect`: the error answered, then the close code and reason.
fn refusal(error: ErrorShape, close_code: u16, close_reason: impl Into<String>) -> Box<Refusal> {
    Box::new(Refusal {
        error,
        close_code,
        close_reason: close_reason.into(),
    })
}

/// A refusal whose message is both the error and the close reason (close code 1008).
fn invalid(msg: &str) -> Box<Refusal> {
    refusal(ErrorShape::invalid(msg), 1008, msg)
}

/// The first request must be `connect`, with params of its shape.
fn connect_params(req: &RequestFrame) -> Result<ConnectParams, Box<Refusal>> {
    if Method::parse(&req.method) != Some(Method::Connect) {
        return Err(invalid("invalid handshake: first request must be connect"));
    }
    req.params_as()
        .map_err(|e| invalid(&format!("invalid connect params: {e}")))
}

/// The client names a known client id and mode.
fn check_client(client: &ClientInfo) -> Result<(), Box<Refusal>> {
    if !gw::CLIENT_IDS.contains(&client.id.as_str()) {
        return Err(invalid(&format!(
            "invalid connect params: unknown client.id {:?}",
            client.id
        )));
    }
    if !gw::CLIENT_MODES.contains(&client.mode.as_str()) {
        return Err(invalid(&format!(
            "invalid connect params: unknown client.mode {:?}",
            client.mode
        )));
    }
    Ok(())
}

/// The client's protocol range holds ours.
fn check_protocol(params: &ConnectParams) -> Result<(), Box<Refusal>> {
    if params.max_protocol >= GATEWAY_PROTOCOL && params.min_protocol <= GATEWAY_PROTOCOL {
        return Ok(());
    }
    Err(refusal(
        ErrorShape::invalid("protocol mismatch").with_details(json!({
            "code": "PROTOCOL_MISMATCH",
            "clientMinProtocol": params.min_protocol,
            "clientMaxProtocol": params.max_protocol,
            "expectedProtocol": GATEWAY_PROTOCOL,
            "minimumProbeProtocol": 3,
        })),
        1002,
        "protocol mismatch",
    ))
}

/// The role, `operator` when absent; the only one loopgate serves.
fn operator_role(params: &ConnectParams) -> Result<String, Box<Refusal>> {
    let role = params.role.clone().unwrap_or_else(|| "operator".into());
    if role == "operator" {
        return Ok(role);
    }
    Err(invalid(&if ["node", "worker"].contains(&role.as_str()) {
        format!("role {role:?} is not supported by loopgate")
    } else {
        "invalid role".to_owned()
    }))
}

/// No connect is admitted once the gateway is stopping (`stopping` cancelled).
fn check_not_stopping(stopping: &CancellationToken) -> Result<(), Box<Refusal>> {
    if stopping.is_cancelled() {
        return Err(refusal(
            ErrorShape::unavailable("connect unavailable during gateway restart", Some(1000)),
            1013,
            "gateway stopping",
        ));
    }
    Ok(())
}

/// Authentication per transport (a network client's against the config's token or the
/// gateway db's device tokens). A refused network client waits `FAILED_AUTH_DELAY` before it
/// hears so.
async fn grant(
    config: &Config,
    db: &GatewayDb,
    transport: Transport,
    conn_id: &str,
    nonce: &str,
    params: &ConnectParams,
) -> Result<Granted, Box<Refusal>> {
    match transport {
        // The unix socket is trusted by file mode (0600) and peer uid, checked on accept.
        Transport::Unix => Ok(unix_grant(params)),
        Transport::WebSocket(peer) => match authenticate(config, db, params, nonce, peer).await {
            Ok(g) => Ok(g),
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
                Err(r)
            }
        },
    }
}

/// A unix-socket client gets the scopes it asks for, or all three when it asks for none.
fn unix_grant(params: &ConnectParams) -> Granted {
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

/// A network client's credentials: the gateway token (the config's), or a device token the
/// store (the gateway db) knows.
async fn authenticate(
    config: &Config,
    db: &GatewayDb,
    params: &ConnectParams,
    nonce: &str,
    peer: crate::auth::Peer,
) -> Result<Granted, Box<Refusal>> {
    let token = match config.gateway.auth_mode {
        AuthMode::Token => config.gateway.token.as_deref(),
        AuthMode::None => None,
    };
    match crate::auth::authenticate(params, token, nonce, peer, now_ms() as i64)? {
        Verdict::Granted(g) => Ok(g),
        Verdict::CheckDeviceToken(claim) => {
            let presented = check_device_token(config, db, &claim).await?;
            crate::auth::device_token_grant(&claim, &presented)
        }
    }
}

/// What the device store (the gateway db) says of a presented device token, of the config's
/// token generation; a store that cannot answer refuses the connect as retryable.
async fn check_device_token(
    config: &Config,
    db: &GatewayDb,
    claim: &DeviceTokenClaim,
) -> Result<Presented, Box<Refusal>> {
    let (device_id, role, token) = (
        claim.device_id.clone(),
        claim.role.clone(),
        claim.token.clone(),
    );
    let generation = crate::gatewaydb::devices::generation(config);
    db.devices(|reply| DeviceCmd::Check {
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
        refusal(
            ErrorShape::unavailable("cannot check the device token now; retry", Some(1000)),
            1013,
            "device token check unavailable",
        )
    })
}

/// Issues a device token (in the gateway db, of the config's token generation) to a proven
/// device that connected with the gateway token: the token and when it was issued. A
/// failure to issue costs the client only the token (it keeps the gateway token).
async fn issue_device_token(
    config: &Config,
    db: &GatewayDb,
    granted: &Granted,
    role: &str,
    client: &ClientInfo,
    now: u64,
) -> Option<(String, u64)> {
    let (Some(device_id), true) = (&granted.device_id, granted.issue_device_token) else {
        return None;
    };
    let holder = Holder {
        device_id: device_id.clone(),
        role: role.to_owned(),
        client_id: client.id.clone(),
        client_mode: client.mode.clone(),
        platform: client.platform.clone(),
    };
    let scopes = granted.scopes.clone();
    let generation = crate::gatewaydb::devices::generation(config);
    match db
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
