//! `[gateway]`: the listeners, authentication, connection limits, metrics and Control UI,
//! as written ([`RawGateway`], [`RawAuth`], [`RawMetrics`]) and validated
//! ([`GatewayConfig`]), with the command line's overrides applied.

use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;

use super::invalid::Invalid;
use super::Overrides;

/// Default gateway port, as in OpenClaw.
pub const DEFAULT_PORT: u16 = 18789;
/// Default drain deadline.
pub const DEFAULT_DRAIN_TIMEOUT_SECONDS: u64 = 300;
/// Default for `gateway.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGateway {
    pub port: Option<u16>,
    pub bind: Option<String>,
    #[serde(default)]
    pub auth: RawAuth,
    /// Deadline for `loopgate drain` / SIGTERM, in seconds.
    pub drain_timeout_seconds: Option<u64>,
    /// Per-connection outbound buffer cap in bytes (slow consumers are dropped past it).
    pub max_buffered_bytes: Option<usize>,
    /// Most WebSocket/HTTP connections at once (default 1024).
    pub max_connections: Option<usize>,
    /// `[gateway.control_ui]`: serve an installed Control UI on the WebSocket port.
    pub control_ui: Option<super::control_ui::RawControlUi>,
    /// `[gateway.metrics]`: Prometheus metrics on `GET /metrics` of the WebSocket port.
    #[serde(default)]
    pub metrics: RawMetrics,
    /// Host names besides localhost and loopback addresses that a loopback bind answers
    /// (a name in /etc/hosts, or a local reverse proxy that keeps the public `Host`).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

/// `[gateway.metrics]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// Off by default.
    pub enabled: Option<bool>,
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    pub mode: Option<AuthMode>,
    pub token: Option<String>,
}

impl fmt::Debug for RawAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawAuth")
            .field("mode", &self.mode)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    None,
    Token,
}

/// Where `gateway.bind` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAddr(pub IpAddr);

#[derive(Clone)]
pub struct GatewayConfig {
    pub port: u16,
    pub bind: IpAddr,
    pub auth_mode: AuthMode,
    pub token: Option<String>,
    /// The token is the state directory's own (`<state>/gateway.token`).
    pub token_from_state: bool,
    /// Most WebSocket/HTTP connections at once (file descriptors stay reserved beyond it).
    pub max_connections: usize,
    pub drain_timeout_seconds: u64,
    pub max_buffered_bytes: usize,
    /// The Control UI served on the WebSocket port, if configured.
    pub control_ui: Option<super::control_ui::ControlUi>,
    /// `GET /metrics` is served (`gateway.metrics.enabled`).
    pub metrics: bool,
    /// `gateway.allowed_hosts`, lowercased: the `Host` names a loopback bind answers
    /// besides localhost and loopback addresses (others get 421).
    pub allowed_hosts: Vec<String>,
}

impl fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("port", &self.port)
            .field("bind", &self.bind)
            .field("auth_mode", &self.auth_mode)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("control_ui", &self.control_ui)
            .finish()
    }
}

/// `[gateway]` with `overrides` applied, validated. The Control UI is left `None`: its root
/// is checked against the agents' workspaces, once they are known.
pub(super) fn resolve_gateway(
    raw: &RawGateway,
    overrides: &Overrides,
) -> Result<GatewayConfig, Invalid> {
    let bind_raw = overrides
        .bind
        .clone()
        .or(raw.bind.clone())
        .unwrap_or_else(|| "loopback".into());
    let bind = parse_bind(&bind_raw)?;
    let auth = resolve_auth(&raw.auth, overrides)?;
    if auth.mode == AuthMode::None && !bind.is_loopback() {
        return Err(Invalid::new("gateway.bind", format!("{bind_raw:?} is not loopback, so gateway.auth.token (or $LOOPGATE_GATEWAY_TOKEN) is required")));
    }
    let max_connections = match raw.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS) {
        0 => {
            return Err(Invalid::new(
                "gateway.max_connections",
                "must be at least 1",
            ))
        }
        n => n,
    };
    let max_buffered_bytes = raw
        .max_buffered_bytes
        .unwrap_or(ipc::gateway::MAX_BUFFERED_BYTES);
    if max_buffered_bytes < 64 * 1024 {
        return Err(Invalid::new(
            "gateway.max_buffered_bytes",
            "must be at least 65536",
        ));
    }
    let mut allowed_hosts = Vec::new();
    for h in &raw.allowed_hosts {
        let valid = !h.is_empty()
            && h.len() <= 253
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if !valid {
            return Err(Invalid::new(
                "gateway.allowed_hosts",
                format!("{h:?} is not a host name (letters, digits, '-' and '.', no port)"),
            ));
        }
        allowed_hosts.push(h.trim_end_matches('.').to_ascii_lowercase());
    }
    Ok(GatewayConfig {
        allowed_hosts,
        port: overrides.port.or(raw.port).unwrap_or(DEFAULT_PORT),
        bind,
        auth_mode: auth.mode,
        token: auth.token,
        token_from_state: auth.token_from_state,
        metrics: raw.metrics.enabled.unwrap_or(false),
        max_connections,
        drain_timeout_seconds: raw
            .drain_timeout_seconds
            .unwrap_or(DEFAULT_DRAIN_TIMEOUT_SECONDS),
        max_buffered_bytes,
        control_ui: None,
    })
}

/// `[gateway.auth]` resolved: the mode and the token it uses.
struct Auth {
    mode: AuthMode,
    token: Option<String>,
    token_from_state: bool,
}

/// The token: the command line's or environment's, else the file's, else (no token named
/// and no explicit `mode = "none"`) the state directory's own.
fn resolve_auth(raw: &RawAuth, overrides: &Overrides) -> Result<Auth, Invalid> {
    let token = overrides
        .token
        .clone()
        .or(raw.token.clone())
        .filter(|t| !t.is_empty());
    let token_from_state = token.is_none() && raw.mode != Some(AuthMode::None);
    let token = if token_from_state {
        overrides.state_token.clone()
    } else {
        token
    };
    let token_from_state = token_from_state && token.is_some();
    let mode = raw.mode.unwrap_or(if token.is_some() {
        AuthMode::Token
    } else {
        AuthMode::None
    });
    if mode == AuthMode::Token && token.is_none() {
        return Err(Invalid::new(
            "gateway.auth.mode",
            "\"token\" needs gateway.auth.token or $LOOPGATE_GATEWAY_TOKEN",
        ));
    }
    Ok(Auth {
        mode,
        token,
        token_from_state,
    })
}

/// What a valid gateway section still warns about (logged at start and reload).
pub(super) fn gateway_warnings(gateway: &GatewayConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    if gateway.auth_mode == AuthMode::None {
        warnings.push("gateway.auth.mode is \"none\": any local user or process that reaches the loopback WebSocket is an admin (remove it to use the state directory's token)".to_owned());
    }
    warnings
}

fn parse_bind(raw: &str) -> Result<IpAddr, Invalid> {
    match raw {
        "loopback" => Ok(IpAddr::from([127, 0, 0, 1])),
        "lan" => Ok(IpAddr::from([0, 0, 0, 0])),
        other => other.parse::<IpAddr>().map_err(|_| {
            Invalid::new(
                "gateway.bind",
                format!("{other:?} is neither \"loopback\", \"lan\" nor an IP address"),
            )
        }),
    }
}
