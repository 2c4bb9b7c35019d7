//! Configuration: `loopgate.toml` is parsed into [`RawConfig`] (unknown keys rejected, with
//! the file and line in the error), merged with CLI overrides, then validated into the frozen
//! [`Config`] everything downstream takes by reference.
//!
//! Names mirror OpenClaw's where a concept is shared, in snake_case (see
//! `docs/operations.md` for every key).
//!
//! Each section has a function that turns its raw form into its validated form (an error is
//! a message that starts with the key it refuses, which `config_lines` finds in the file
//! again); [`Config::from_raw`] composes them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// `tools.exec.security` and a provider's `api`: the link's own enums (a name they do not
/// know parses as `Unknown` and is refused by validation, naming the key).
pub use ipc::control::{ExecSecurity, ProviderApi};

/// A config error: which file, and what is wrong (the key, the line when known).
#[derive(Debug)]
pub struct ConfigError {
    pub file: PathBuf,
    /// The line of the key the message names, for validation errors (TOML syntax errors
    /// say where in `message`).
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub agents: RawAgents,
    #[serde(default)]
    pub models: RawModels,
    #[serde(default)]
    pub workers: RawWorkers,
    /// `[messages.queue]`: what a message does while its session is busy (R-B3).
    #[serde(default)]
    pub messages: RawMessages,
    /// `[diagnostics]`: stuck-session diagnostics and recovery (R-I1, R-I2).
    #[serde(default)]
    pub diagnostics: RawDiagnostics,
    /// `[[hooks.<event>]]`: plugin hooks, for every agent.
    #[serde(default)]
    pub hooks: std::collections::BTreeMap<String, Vec<RawHook>>,
}

/// Overrides from the command line and environment (applied over the file).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub port: Option<u16>,
    pub bind: Option<String>,
    pub token: Option<String>,
    /// The state directory's own token (`<state>/gateway.token`), used when neither the
    /// config nor the environment names one and `gateway.auth.mode` is not `"none"`.
    pub state_token: Option<String>,
}

/// Validated, frozen configuration.
#[derive(Clone)]
pub struct Config {
    /// The file it came from (may not exist: then defaults apply).
    pub path: PathBuf,
    pub state_dir: PathBuf,
    pub gateway: GatewayConfig,
    /// Configured agents, `main` always first.
    pub agents: Vec<AgentConfig>,
    /// `agents.defaults.model` as written: `("<provider>/<model>", fallbacks)`.
    pub default_model: Option<(String, Vec<String>)>,
    pub workers: WorkersConfig,
    /// `[messages.queue]`: the queue policy of runs that name no mode (R-B3).
    pub queue: ipc::queue::QueuePolicy,
    /// `gateway_start` / `gateway_stop` hooks: the supervisor runs these itself.
    pub gateway_hooks: Vec<ipc::control::HookSpec>,
    /// Settings that load but weaken the sandbox (logged at start and reload).
    pub warnings: Vec<String>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("path", &self.path)
            .field("state_dir", &self.state_dir)
            .field("gateway", &self.gateway)
            .field("agents", &self.agents)
            .field("workers", &self.workers)
            .field("queue", &self.queue)
            .field("gateway_hooks", &self.gateway_hooks)
            .finish()
    }
}

impl Config {
    /// Loads `path` (a missing file means all defaults), applies overrides, validates.
    pub fn load(
        path: &Path,
        state_dir: &Path,
        overrides: &Overrides,
        must_exist: bool,
    ) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError {
            file: path.to_owned(),
            line: None,
            message,
        };
        let (text, raw) = match std::fs::read_to_string(path) {
            Ok(text) => {
                let raw = toml::from_str::<RawConfig>(&text)
                    .map_err(|e| err(e.to_string().trim_end().to_owned()))?;
                (text, raw)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                (String::new(), RawConfig::default())
            }
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        };
        Self::from_raw(raw, path, state_dir, overrides).map_err(|mut e| {
            e.line = crate::config_lines::message_path(&e.message)
                .and_then(|key| crate::config_lines::line_of(&text, key));
            e
        })
    }

    /// Validates `raw` section by section, in a fixed order (of several mistakes, the same
    /// one is reported first): gateway, providers, hooks, agents, the places they use,
    /// workers, the queue.
    pub fn from_raw(
        raw: RawConfig,
        path: &Path,
        state_dir: &Path,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError {
            file: path.to_owned(),
            line: None,
            message,
        };
        let mut gateway = resolve_gateway(&raw.gateway, overrides).map_err(err)?;
        let providers = check_providers(&raw.models).map_err(err)?;
        let (gateway_hooks, hooks): (Vec<_>, Vec<_>) = resolve_hooks(&raw.hooks)
            .map_err(err)?
            .into_iter()
            .partition(|h| h.event.is_gateway());
        let shared = Shared {
            providers,
            hooks: &hooks,
            diagnostics: &raw.diagnostics,
            state_dir,
        };
        let (agents, agent_warnings) = resolve_agents(&raw.agents, &shared).map_err(err)?;
        let mut warnings = gateway_warnings(&gateway);
        warnings.extend(agent_warnings);
        gateway.control_ui = check_places(&agents, state_dir, &raw.gateway).map_err(err)?;
        Ok(Config {
            path: path.to_owned(),
            state_dir: state_dir.to_owned(),
            gateway,
            default_model: default_model(&raw.agents.defaults),
            agents,
            workers: resolve_workers(&raw.workers).map_err(err)?,
            queue: resolve_queue(&raw.messages.queue).map_err(err)?,
            gateway_hooks,
            warnings,
        })
    }

    pub fn agent(&self, id: &str) -> Option<&AgentConfig> {
        self.agents.iter().find(|a| a.id.as_str() == id)
    }
}

/// The places the config points at, once the workspaces are known: workspaces never nest
/// nor hold the state directory, and the Control UI's root (returned checked, if
/// configured) overlaps neither a workspace nor the state directory.
fn check_places(
    agents: &[AgentConfig],
    state_dir: &Path,
    raw: &RawGateway,
) -> Result<Option<crate::control_ui::ControlUi>, String> {
    let spaces: Vec<(&str, &Path)> = agents
        .iter()
        .map(|a| (a.id.as_str(), a.workspace.as_path()))
        .collect();
    crate::confine::check_workspaces(state_dir, &spaces)?;
    raw.control_ui
        .as_ref()
        .map(|ui| crate::control_ui::resolve(ui, state_dir, &spaces))
        .transpose()
}

fn secs_to_ms(s: f64) -> u64 {
    (s * 1000.0).round().max(1.0) as u64
}

/// Default gateway port, as in OpenClaw.
pub const DEFAULT_PORT: u16 = 18789;
/// Default drain deadline.
pub const DEFAULT_DRAIN_TIMEOUT_SECONDS: u64 = 300;
/// Default for `gateway.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

#[derive(Debug, Default, Deserialize)]
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
    pub control_ui: Option<crate::control_ui::RawControlUi>,
    /// `[gateway.metrics]`: Prometheus metrics on `GET /metrics` of the WebSocket port.
    #[serde(default)]
    pub metrics: RawMetrics,
}

/// `[gateway.metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// Off by default.
    pub enabled: Option<bool>,
}

#[derive(Default, Deserialize)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
    pub control_ui: Option<crate::control_ui::ControlUi>,
    /// `GET /metrics` is served (`gateway.metrics.enabled`).
    pub metrics: bool,
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
fn resolve_gateway(raw: &RawGateway, overrides: &Overrides) -> Result<GatewayConfig, String> {
    let bind_raw = overrides
        .bind
        .clone()
        .or(raw.bind.clone())
        .unwrap_or_else(|| "loopback".into());
    let bind = parse_bind(&bind_raw).map_err(|m| format!("gateway.bind: {m}"))?;
    let auth = resolve_auth(&raw.auth, overrides)?;
    if auth.mode == AuthMode::None && !bind.is_loopback() {
        return Err(format!(
            "gateway.bind: {bind_raw:?} is not loopback, so gateway.auth.token (or $LOOPGATE_GATEWAY_TOKEN) is required"
        ));
    }
    let max_connections = match raw.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS) {
        0 => return Err("gateway.max_connections: must be at least 1".into()),
        n => n,
    };
    let max_buffered_bytes = raw
        .max_buffered_bytes
        .unwrap_or(ipc::gateway::MAX_BUFFERED_BYTES);
    if max_buffered_bytes < 64 * 1024 {
        return Err("gateway.max_buffered_bytes: must be at least 65536".into());
    }
    Ok(GatewayConfig {
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
fn resolve_auth(raw: &RawAuth, overrides: &Overrides) -> Result<Auth, String> {
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
        return Err(
            "gateway.auth.mode: \"token\" needs gateway.auth.token or $LOOPGATE_GATEWAY_TOKEN"
                .into(),
        );
    }
    Ok(Auth {
        mode,
        token,
        token_from_state,
    })
}

/// What a valid gateway section still warns about (logged at start and reload).
fn gateway_warnings(gateway: &GatewayConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    if gateway.auth_mode == AuthMode::None {
        warnings.push("gateway.auth.mode is \"none\": any local user or process that reaches the loopback WebSocket is an admin (remove it to use the state directory's token)".to_owned());
    }
    warnings
}

fn parse_bind(raw: &str) -> Result<IpAddr, String> {
    match raw {
        "loopback" => Ok(IpAddr::from([127, 0, 0, 1])),
        "lan" => Ok(IpAddr::from([0, 0, 0, 0])),
        other => other
            .parse::<IpAddr>()
            .map_err(|_| format!("{other:?} is neither \"loopback\", \"lan\" nor an IP address")),
    }
}

/// Default provider HTTP timeout (connect + response headers).
pub const DEFAULT_PROVIDER_TIMEOUT_SECONDS: f64 = 120.0;
/// Default model idle timeout for cloud providers (R-B4).
pub const DEFAULT_IDLE_CLOUD_SECONDS: f64 = 120.0;
/// Default model idle timeout for self-hosted (loopback / private) providers (R-B4).
pub const DEFAULT_IDLE_SELF_HOSTED_SECONDS: f64 = 300.0;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModels {
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub api: ProviderApi,
    pub base_url: String,
    pub api_key_env: Option<String>,
    /// Provider HTTP timeout (connect and response headers), seconds.
    pub timeout_seconds: Option<f64>,
    /// Model idle timeout (no stream data), seconds. Default 120 for cloud providers, 300 for
    /// loopback/private addresses.
    pub idle_timeout_seconds: Option<f64>,
    /// Sampling temperature sent with every request (default: the provider's).
    pub temperature: Option<f64>,
    /// Context window of this provider's models, in tokens (default 128 000).
    pub context_window: Option<u64>,
    /// First retry delay after a transient failure (429, 5xx, a dropped connection), seconds
    /// (default 1); it doubles per retry up to `retry_max_seconds` (default 30).
    pub retry_base_seconds: Option<f64>,
    pub retry_max_seconds: Option<f64>,
    /// Most tokens one response may generate (default: the provider's; 8192 for Anthropic,
    /// which requires one).
    pub max_output_tokens: Option<u64>,
    /// Per-model facts: `models.providers.<id>.models.<name> = { reasoning = true,
    /// context_window = N }`.
    #[serde(default)]
    pub models: BTreeMap<String, RawModelEntry>,
}

/// What the config says of one model of a provider.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModelEntry {
    /// The model can think (takes a thinking level other than `off`).
    pub reasoning: Option<bool>,
    /// Its own context window, in tokens (default: the provider's).
    pub context_window: Option<u64>,
}

/// One model's capabilities, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelCaps {
    pub reasoning: bool,
    pub context_window: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedModel {
    pub provider: String,
    pub model: String,
    pub api: ProviderApi,
    pub base_url: String,
    pub api_key_env: Option<String>,
    pub request_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub temperature: Option<f64>,
    pub context_window: Option<u64>,
    pub retry_base_ms: Option<u64>,
    pub retry_max_ms: Option<u64>,
    pub max_output_tokens: Option<u64>,
    /// Whether `model` can think.
    pub reasoning: bool,
    /// Every model the provider's config describes, by name (for a per-run choice).
    pub models: BTreeMap<String, ModelCaps>,
}

impl ResolvedModel {
    /// What the provider's config says of `model` (nothing: not reasoning, the provider's
    /// window).
    pub fn caps(&self, model: &str) -> ModelCaps {
        self.models.get(model).copied().unwrap_or(ModelCaps {
            reasoning: false,
            context_window: self.context_window,
        })
    }

    /// The model's context window: the provider's `context_window`, else the default.
    pub fn context_tokens(&self) -> u64 {
        self.context_window
            .unwrap_or(ipc::control::DEFAULT_CONTEXT_WINDOW)
    }
}

/// `[models.providers]`, every provider checked (in id order).
fn check_providers(raw: &RawModels) -> Result<&BTreeMap<String, RawProvider>, String> {
    for (id, p) in &raw.providers {
        check_provider(&format!("models.providers.{id}"), p)?;
    }
    Ok(&raw.providers)
}

/// One provider's checks; `key` is `models.providers.<id>`.
fn check_provider(key: &str, p: &RawProvider) -> Result<(), String> {
    if p.api == ProviderApi::Unknown {
        let known: Vec<&str> = ProviderApi::KNOWN.iter().map(|a| a.as_str()).collect();
        return Err(format!(
            "{key}.api: not a known api (known: {})",
            known.join(", ")
        ));
    }
    if p.base_url.trim().is_empty() {
        return Err(format!("{key}.base_url: must not be empty"));
    }
    if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
        return Err(format!(
            "{key}.base_url: {:?} must start with http:// or https://",
            p.base_url
        ));
    }
    for (name, v) in [
        ("timeout_seconds", p.timeout_seconds),
        ("idle_timeout_seconds", p.idle_timeout_seconds),
        ("retry_base_seconds", p.retry_base_seconds),
        ("retry_max_seconds", p.retry_max_seconds),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "{key}.{name}: must be a positive number of seconds"
                ));
            }
        }
    }
    if p.max_output_tokens == Some(0) {
        return Err(format!("{key}.max_output_tokens: must be at least 1"));
    }
    if let Some(t) = p.temperature {
        if !(t.is_finite() && (0.0..=2.0).contains(&t)) {
            return Err(format!("{key}.temperature: must be between 0 and 2"));
        }
    }
    if p.context_window
        .is_some_and(|w| !(1024..=100_000_000).contains(&w))
    {
        return Err(format!(
            "{key}.context_window: must be between 1024 and 100000000 tokens"
        ));
    }
    if let Some(env) = &p.api_key_env {
        if env.is_empty() || env.contains('=') {
            return Err(format!("{key}.api_key_env: {env:?} is not a variable name"));
        }
    }
    Ok(())
}

/// Loopback or private-network hosts count as self-hosted (longer idle default).
fn is_self_hosted(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let host_port = rest.split('/').next().unwrap_or("");
    let host = if let Some(stripped) = host_port.strip_prefix('[') {
        stripped.split(']').next().unwrap_or("")
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    if host == "localhost" {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        Ok(IpAddr::V6(v6)) => v6.is_loopback(),
        Err(_) => false,
    }
}

/// A provider's connection settings with `model` as the model name.
fn resolve_model(id: &str, p: &RawProvider, model: &str) -> ResolvedModel {
    let idle = p
        .idle_timeout_seconds
        .unwrap_or(if is_self_hosted(&p.base_url) {
            DEFAULT_IDLE_SELF_HOSTED_SECONDS
        } else {
            DEFAULT_IDLE_CLOUD_SECONDS
        });
    ResolvedModel {
        provider: id.to_owned(),
        model: model.to_owned(),
        api: p.api,
        base_url: p.base_url.trim_end_matches('/').to_owned(),
        api_key_env: p.api_key_env.clone(),
        request_timeout_ms: secs_to_ms(
            p.timeout_seconds
                .unwrap_or(DEFAULT_PROVIDER_TIMEOUT_SECONDS),
        ),
        idle_timeout_ms: secs_to_ms(idle),
        temperature: p.temperature,
        context_window: p
            .models
            .get(model)
            .and_then(|m| m.context_window)
            .or(p.context_window),
        retry_base_ms: p.retry_base_seconds.map(secs_to_ms),
        retry_max_ms: p.retry_max_seconds.map(secs_to_ms),
        max_output_tokens: p.max_output_tokens,
        reasoning: p
            .models
            .get(model)
            .and_then(|m| m.reasoning)
            .unwrap_or(false),
        models: p
            .models
            .iter()
            .map(|(name, m)| {
                let caps = ModelCaps {
                    reasoning: m.reasoning.unwrap_or(false),
                    context_window: m.context_window.or(p.context_window),
                };
                (name.clone(), caps)
            })
            .collect(),
    }
}

/// A validated agent id: `^[a-z0-9][a-z0-9_-]{0,63}$`, normalized to lowercase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(String);

impl AgentId {
    pub fn parse(raw: &str) -> Result<AgentId, String> {
        let id = raw.to_ascii_lowercase();
        let mut chars = id.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let rest_ok =
            chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if first_ok && rest_ok && id.len() <= 64 {
            Ok(AgentId(id))
        } else {
            Err(format!(
                "invalid agent id {raw:?}: expected 1-64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit"
            ))
        }
    }

    /// `main`, the agent every config has.
    fn main() -> AgentId {
        AgentId("main".into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AgentId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        // In the config an id is written as it is (clients' ids are normalized, as OpenClaw
        // does): `Ops` and `ops` would silently be one agent.
        if s.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(serde::de::Error::custom(format!(
                "invalid agent id {s:?}: agent ids are lowercase (write {:?})",
                s.to_ascii_lowercase()
            )));
        }
        AgentId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `"<provider>/<model>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl<'de> Deserialize<'de> for ModelRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.split_once('/') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok(ModelRef {
                provider: p.to_owned(),
                model: m.to_owned(),
            }),
            _ => Err(serde::de::Error::custom(format!(
                "invalid model {s:?}: expected \"<provider>/<model>\""
            ))),
        }
    }
}

/// `model`: `"<provider>/<model>"`, or `{ primary = "p/m", fallbacks = ["q/n", ...] }`
/// (OpenClaw's two spellings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSetting {
    pub primary: ModelRef,
    /// Tried in order when the primary fails for good.
    pub fallbacks: Vec<ModelRef>,
}

impl<'de> Deserialize<'de> for ModelSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            primary: ModelRef,
            #[serde(default)]
            fallbacks: Vec<ModelRef>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            One(ModelRef),
            Table(Table),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected \"<provider>/<model>\" or { primary = \"<provider>/<model>\", fallbacks = [\"<provider>/<model>\", ...] }",
            )
        })? {
            Either::One(primary) => Ok(ModelSetting {
                primary,
                fallbacks: Vec::new(),
            }),
            Either::Table(t) => Ok(ModelSetting {
                primary: t.primary,
                fallbacks: t.fallbacks,
            }),
        }
    }
}

/// Default run timeout (48 h), as in OpenClaw.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 172_800;
pub const DEFAULT_BOOTSTRAP_MAX_CHARS: u32 = 20_000;
pub const DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS: u32 = 60_000;
pub const DEFAULT_MAX_CONCURRENT: u32 = 8;

/// Longest exec approval wait accepted (7 days).
const MAX_APPROVAL_TIMEOUT_MS: u64 = 7 * 24 * 3600 * 1000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgents {
    #[serde(default)]
    pub defaults: RawAgentSettings,
    #[serde(default)]
    pub list: BTreeMap<AgentId, RawAgentSettings>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgentSettings {
    pub model: Option<ModelSetting>,
    pub timeout_seconds: Option<u64>,
    pub workspace: Option<PathBuf>,
    pub max_concurrent: Option<u32>,
    pub bootstrap_max_chars: Option<u32>,
    pub bootstrap_total_max_chars: Option<u32>,
    /// Replaces the built-in base system prompt.
    pub system_prompt: Option<String>,
    /// Display name (agents.list only).
    pub name: Option<String>,
    #[serde(default)]
    pub tools: Option<RawTools>,
    pub compaction: Option<RawCompaction>,
    /// Thinking level of runs that name none (`off`, `minimal`, `low`, `medium`, `high`,
    /// `xhigh`, `adaptive`, `max`, `ultra`; default: the provider's own).
    pub thinking_default: Option<String>,
    /// Whether clients hear reasoning: `off` (default), `on` or `stream`.
    pub reasoning_default: Option<String>,
}

/// `compaction`: when a session's older context is summarized (R-B7).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompaction {
    /// Tokens kept free for the reply (default 20 000, at most a quarter of the window).
    pub reserve_tokens: Option<u64>,
    /// Recent context kept verbatim (default 20 000, at most a quarter of the window).
    pub keep_recent_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTools {
    pub exec: Option<RawExec>,
    /// Tools offered to the model (default: all built-in tools).
    pub allow: Option<Vec<String>>,
}

/// `tools.exec`: who may run shell commands.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExec {
    pub security: Option<ExecSecurity>,
    pub allowlist: Option<Vec<String>>,
    pub timeout_seconds: Option<u64>,
    /// `ask`: how long a command waits for an operator before it is denied.
    pub approval_timeout_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub id: AgentId,
    pub name: Option<String>,
    pub model: Option<ResolvedModel>,
    /// Tried in order when `model` fails for good (its retries spent, or an attempt past
    /// its deadline).
    pub fallbacks: Vec<ResolvedModel>,
    /// Thinking level of runs and sessions that name none (`None`: the provider's default).
    pub thinking_default: Option<ipc::thinking::Thinking>,
    pub reasoning_default: ipc::thinking::ReasoningMode,
    /// `None`: no execution timer.
    pub timeout_ms: Option<u64>,
    pub workspace: PathBuf,
    pub db_path: PathBuf,
    /// The operator's internal (`HOOK.md`) hooks: `<state>/agents/<id>/hooks`.
    pub hooks_dir: PathBuf,
    pub max_concurrent: u32,
    pub bootstrap_max_chars: u32,
    pub bootstrap_total_max_chars: u32,
    pub system_prompt: Option<String>,
    pub exec: ipc::control::ExecPolicy,
    pub hooks: Vec<ipc::control::HookSpec>,
    /// `None`: all tools.
    pub tools_allow: Option<Vec<String>>,
    pub compaction: ipc::control::CompactionSpec,
    /// `[diagnostics]` (the same for every agent).
    pub diagnostics: ipc::diagnostics::DiagnosticsPolicy,
    /// Every configured provider (`model` empty), for per-run overrides by
    /// `before_model_resolve` hooks.
    pub providers: Vec<ResolvedModel>,
}

/// What every agent is resolved against besides its own settings and the defaults.
struct Shared<'a> {
    /// The checked `[models.providers]`.
    pub providers: &'a BTreeMap<String, RawProvider>,
    /// The agents' hooks (every one but the supervisor's own `gateway_*`).
    pub hooks: &'a [ipc::control::HookSpec],
    pub diagnostics: &'a RawDiagnostics,
    pub state_dir: &'a Path,
}

/// `agents.defaults.model` as written: `("<provider>/<model>", fallbacks)`.
fn default_model(defaults: &RawAgentSettings) -> Option<(String, Vec<String>)> {
    defaults.model.as_ref().map(|m| {
        let name = |r: &ModelRef| format!("{}/{}", r.provider, r.model);
        (name(&m.primary), m.fallbacks.iter().map(name).collect())
    })
}

/// Every agent, `main` first, then the listed ones in id order, with what their settings
/// warn about (exec allowlists that weaken the sandbox).
fn resolve_agents(
    raw: &RawAgents,
    shared: &Shared<'_>,
) -> Result<(Vec<AgentConfig>, Vec<String>), String> {
    let main = AgentId::main();
    let mut ids: Vec<AgentId> = vec![main.clone()];
    ids.extend(raw.list.keys().filter(|id| **id != main).cloned());
    let unlisted = RawAgentSettings::default();
    let mut agents = Vec::with_capacity(ids.len());
    let mut warnings = Vec::new();
    for id in ids {
        let (own, key) = match raw.list.get(&id) {
            Some(own) => (own, format!("agents.list.{id}")),
            None => (&unlisted, "agents.defaults".to_owned()),
        };
        let layers = Layers {
            own,
            defaults: &raw.defaults,
            key: &key,
        };
        agents.push(resolve_agent(id, &layers, shared, &mut warnings)?);
    }
    Ok((agents, warnings))
}

/// One agent's settings over the defaults, and the key its errors name.
struct Layers<'a> {
    own: &'a RawAgentSettings,
    defaults: &'a RawAgentSettings,
    key: &'a str,
}

/// One agent. The checks run in a fixed order (its models, thinking, concurrency, exec,
/// tools, compaction, then `[diagnostics]`), so that of several mistakes the same one is
/// reported first.
fn resolve_agent(
    id: AgentId,
    at: &Layers<'_>,
    shared: &Shared<'_>,
    warnings: &mut Vec<String>,
) -> Result<AgentConfig, String> {
    let (own, defaults, key) = (at.own, at.defaults, at.key);
    let setting = own.model.as_ref().or(defaults.model.as_ref());
    let (model, fallbacks) = resolve_models(setting, key, shared.providers)?;
    let (thinking_default, reasoning_default) = resolve_thinking(at, model.as_ref())?;
    let timeout_s = own
        .timeout_seconds
        .or(defaults.timeout_seconds)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let workspace = workspace(&id, at, shared.state_dir);
    let max_concurrent = own
        .max_concurrent
        .or(defaults.max_concurrent)
        .unwrap_or(DEFAULT_MAX_CONCURRENT);
    if max_concurrent == 0 {
        return Err(format!("{key}.max_concurrent: must be at least 1"));
    }
    let exec = resolve_exec(at)?;
    warnings.extend(crate::confine::check_exec(key, &exec)?);
    let tools_allow = resolve_tools_allow(at)?;
    let compaction = resolve_compaction(at)?;
    let agent_dir = shared.state_dir.join("agents").join(id.as_str());
    Ok(AgentConfig {
        compaction,
        diagnostics: resolve_diagnostics(shared.diagnostics)?,
        providers: shared
            .providers
            .iter()
            .map(|(pid, p)| resolve_model(pid, p, ""))
            .collect(),
        exec,
        tools_allow,
        hooks: shared.hooks.to_vec(),
        db_path: agent_dir.join("agent.sqlite"),
        hooks_dir: agent_dir.join("hooks"),
        name: own.name.clone(),
        timeout_ms: (timeout_s > 0).then(|| timeout_s.saturating_mul(1000)),
        workspace,
        max_concurrent,
        bootstrap_max_chars: own
            .bootstrap_max_chars
            .or(defaults.bootstrap_max_chars)
            .unwrap_or(DEFAULT_BOOTSTRAP_MAX_CHARS),
        bootstrap_total_max_chars: own
            .bootstrap_total_max_chars
            .or(defaults.bootstrap_total_max_chars)
            .unwrap_or(DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS),
        system_prompt: own.system_prompt.clone().or(defaults.system_prompt.clone()),
        model,
        fallbacks,
        thinking_default,
        reasoning_default,
        id,
    })
}

/// `model`: the primary and its fallbacks, each on a defined provider (the fallbacks are
/// checked first).
fn resolve_models(
    setting: Option<&ModelSetting>,
    key: &str,
    providers: &BTreeMap<String, RawProvider>,
) -> Result<(Option<ResolvedModel>, Vec<ResolvedModel>), String> {
    let resolve = |m: &ModelRef, what: &str| {
        let p = providers.get(&m.provider).ok_or_else(|| {
            format!(
                "{key}.{what}: provider {:?} is not defined under [models.providers.{}]",
                m.provider, m.provider
            )
        })?;
        Ok::<_, String>(resolve_model(&m.provider, p, &m.model))
    };
    let Some(s) = setting else {
        return Ok((None, Vec::new()));
    };
    let mut fallbacks = Vec::with_capacity(s.fallbacks.len());
    for (i, f) in s.fallbacks.iter().enumerate() {
        fallbacks.push(resolve(f, &format!("model.fallbacks[{i}]"))?);
    }
    Ok((Some(resolve(&s.primary, "model")?), fallbacks))
}

/// `thinking_default` (a level other than `off` needs a reasoning model) and
/// `reasoning_default`.
fn resolve_thinking(
    at: &Layers<'_>,
    model: Option<&ResolvedModel>,
) -> Result<
    (
        Option<ipc::thinking::Thinking>,
        ipc::thinking::ReasoningMode,
    ),
    String,
> {
    let (own, defaults, key) = (at.own, at.defaults, at.key);
    let thinking_default = match own
        .thinking_default
        .as_deref()
        .or(defaults.thinking_default.as_deref())
    {
        None => None,
        Some(t) => Some(ipc::thinking::Thinking::parse(t).ok_or_else(|| {
            format!(
                "{key}.thinking_default: {t:?} is not a thinking level (off, minimal, low, medium, high, xhigh, adaptive, max, ultra)"
            )
        })?),
    };
    if let (Some(t), Some(m)) = (thinking_default, model) {
        if t != ipc::thinking::Thinking::Off && !m.reasoning {
            return Err(format!(
                "{key}.thinking_default: {:?} needs a reasoning model, and {}/{} is not marked one (models.providers.{}.models.{:?}.reasoning = true)",
                t.as_str(), m.provider, m.model, m.provider, m.model
            ));
        }
    }
    let reasoning_default = match own
        .reasoning_default
        .as_deref()
        .or(defaults.reasoning_default.as_deref())
    {
        None => ipc::thinking::ReasoningMode::Off,
        Some(r) => ipc::thinking::ReasoningMode::parse(r)
            .ok_or_else(|| format!("{key}.reasoning_default: {r:?} must be off, on or stream"))?,
    };
    Ok((thinking_default, reasoning_default))
}

/// The agent's workspace: its own, else (main) the default one, else a sibling of the
/// default one, else `<state>/agents/<id>/workspace`; relative paths are below the state
/// directory.
fn workspace(id: &AgentId, at: &Layers<'_>, state_dir: &Path) -> PathBuf {
    let workspace = match (&at.own.workspace, &at.defaults.workspace) {
        (Some(w), _) => w.clone(),
        (None, Some(base)) if *id == AgentId::main() => base.clone(),
        // A sibling, as OpenClaw's `workspace-<id>`: never inside main's workspace.
        (None, Some(base)) => {
            let name = base
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "workspace".into());
            base.with_file_name(format!("{name}-{}", id.as_str()))
        }
        (None, None) => state_dir.join("agents").join(id.as_str()).join("workspace"),
    };
    if workspace.is_relative() {
        state_dir.join(workspace)
    } else {
        workspace
    }
}

/// `tools.exec`, each field the agent's own or the defaults' (a security name the link
/// does not know is refused where it is written).
fn resolve_exec(at: &Layers<'_>) -> Result<ipc::control::ExecPolicy, String> {
    let exec_of = |s: &RawAgentSettings| {
        s.tools
            .as_ref()
            .and_then(|t| t.exec.clone())
            .unwrap_or_default()
    };
    let (own_exec, def_exec) = (exec_of(at.own), exec_of(at.defaults));
    for (place, s) in [
        (at.key, own_exec.security),
        ("agents.defaults", def_exec.security),
    ] {
        if s == Some(ExecSecurity::Unknown) {
            return Err(format!(
                "{place}.tools.exec.security: must be \"deny\", \"allowlist\", \"ask\" or \"full\""
            ));
        }
    }
    let security = own_exec
        .security
        .or(def_exec.security)
        .unwrap_or(ExecSecurity::Deny);
    let exec = ipc::control::ExecPolicy {
        security,
        allowlist: own_exec
            .allowlist
            .or(def_exec.allowlist)
            .unwrap_or_default(),
        timeout_ms: own_exec
            .timeout_seconds
            .or(def_exec.timeout_seconds)
            .map(|s| s.saturating_mul(1000)),
        approval_timeout_ms: own_exec
            .approval_timeout_seconds
            .or(def_exec.approval_timeout_seconds)
            .map(|s| s.saturating_mul(1000)),
    };
    if exec
        .approval_timeout_ms
        .is_some_and(|ms| !(1000..=MAX_APPROVAL_TIMEOUT_MS).contains(&ms))
    {
        return Err(format!(
            "{}.tools.exec.approval_timeout_seconds: between 1 and {} (7 days)",
            at.key,
            MAX_APPROVAL_TIMEOUT_MS / 1000
        ));
    }
    Ok(exec)
}

/// `tools.allow`: built-in tool names only (`None`: all tools).
fn resolve_tools_allow(at: &Layers<'_>) -> Result<Option<Vec<String>>, String> {
    let allow_of = |s: &RawAgentSettings| s.tools.as_ref().and_then(|t| t.allow.clone());
    let tools_allow = allow_of(at.own).or_else(|| allow_of(at.defaults));
    if let Some(list) = &tools_allow {
        if let Some(bad) = list
            .iter()
            .find(|t| !ipc::control::TOOL_NAMES.contains(&t.as_str()))
        {
            return Err(format!(
                "{}.tools.allow: unknown tool {bad:?} (tools: {})",
                at.key,
                ipc::control::TOOL_NAMES.join(", ")
            ));
        }
    }
    Ok(tools_allow)
}

/// `compaction`, each field the agent's own or the defaults'.
fn resolve_compaction(at: &Layers<'_>) -> Result<ipc::control::CompactionSpec, String> {
    let own_c = at.own.compaction.clone().unwrap_or_default();
    let def_c = at.defaults.compaction.clone().unwrap_or_default();
    let compaction = ipc::control::CompactionSpec {
        reserve_tokens: own_c.reserve_tokens.or(def_c.reserve_tokens),
        keep_recent_tokens: own_c.keep_recent_tokens.or(def_c.keep_recent_tokens),
    };
    if compaction.reserve_tokens == Some(0) || compaction.keep_recent_tokens == Some(0) {
        return Err(format!(
            "{}.compaction: reserve_tokens and keep_recent_tokens must be at least 1",
            at.key
        ));
    }
    Ok(compaction)
}

/// One `[[hooks.<event>]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    /// Program and arguments (no shell).
    pub command: Vec<String>,
    /// Higher runs first (default 0).
    pub priority: Option<i32>,
    pub timeout_seconds: Option<f64>,
}

/// Default hook timeout.
const DEFAULT_HOOK_TIMEOUT_SECONDS: f64 = 10.0;
/// Default timeout of a `gateway_stop` hook: shutdown must not wait long.
const GATEWAY_STOP_HOOK_TIMEOUT_SECONDS: f64 = 5.0;

/// Validates `[[hooks.<event>]]` entries: known events, a program, a sane timeout.
fn resolve_hooks(
    raw: &std::collections::BTreeMap<String, Vec<RawHook>>,
) -> Result<Vec<ipc::control::HookSpec>, String> {
    let mut out = Vec::new();
    for (event, entries) in raw {
        let Some(hook_event) = ipc::control::HookEvent::parse(event) else {
            return Err(format!(
                "hooks.{event}: unknown or unsupported hook event (supported: {})",
                ipc::control::HookEvent::ALL.map(|e| e.as_str()).join(", ")
            ));
        };
        for (i, h) in entries.iter().enumerate() {
            let key = format!("hooks.{event}[{i}]");
            let Some(program) = h.command.first().filter(|p| !p.trim().is_empty()) else {
                return Err(format!("{key}.command: needs at least the program to run"));
            };
            crate::confine::check_hook_program(&key, program)?;
            let default = if hook_event == ipc::control::HookEvent::GatewayStop {
                GATEWAY_STOP_HOOK_TIMEOUT_SECONDS
            } else {
                DEFAULT_HOOK_TIMEOUT_SECONDS
            };
            let secs = h.timeout_seconds.unwrap_or(default);
            if !(secs > 0.0 && secs <= 600.0) {
                return Err(format!(
                    "{key}.timeout_seconds: must be more than 0 and at most 600"
                ));
            }
            out.push(ipc::control::HookSpec {
                event: hook_event,
                command: h.command.clone(),
                priority: h.priority.unwrap_or(0),
                timeout_ms: (secs * 1000.0) as u64,
            });
        }
    }
    Ok(out)
}

/// Default time a worker may leave heartbeats unanswered before it is killed as hung.
pub const DEFAULT_HEARTBEAT_TIMEOUT_SECONDS: f64 = 10.0;

/// Worker supervision settings (`[workers]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkers {
    /// A worker that answers no heartbeat for this long is killed as hung.
    pub heartbeat_timeout_seconds: Option<f64>,
    /// First restart delay after a crash; doubles per consecutive crash (with jitter).
    pub restart_backoff_initial_ms: Option<u64>,
    pub restart_backoff_max_ms: Option<u64>,
    /// This many crashes within `crash_loop_window_seconds` mark the agent failed.
    pub crash_loop_max: Option<u32>,
    pub crash_loop_window_seconds: Option<u64>,
}

/// Worker supervision policy.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkersConfig {
    pub heartbeat_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub crash_loop_max: u32,
    pub crash_loop_window: Duration,
}

fn resolve_workers(w: &RawWorkers) -> Result<WorkersConfig, String> {
    let heartbeat = w
        .heartbeat_timeout_seconds
        .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_SECONDS);
    if !(heartbeat.is_finite() && heartbeat >= 0.1) {
        return Err("workers.heartbeat_timeout_seconds: must be at least 0.1".into());
    }
    Ok(WorkersConfig {
        heartbeat_timeout: Duration::from_millis(secs_to_ms(heartbeat)),
        backoff_initial: Duration::from_millis(w.restart_backoff_initial_ms.unwrap_or(50)),
        backoff_max: Duration::from_millis(w.restart_backoff_max_ms.unwrap_or(30_000)),
        crash_loop_max: match w.crash_loop_max.unwrap_or(5) {
            0 => {
                return Err(
                    "workers.crash_loop_max: must be at least 1 (crashes within the window before an agent is marked failed)".into(),
                )
            }
            n => n,
        },
        crash_loop_window: Duration::from_secs(w.crash_loop_window_seconds.unwrap_or(60)),
    })
}

/// `[messages]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMessages {
    #[serde(default)]
    pub queue: RawQueue,
}

/// `[messages.queue]`: OpenClaw's `messages.queue` (defaults `steer`, 500 ms, 20,
/// `summarize`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub mode: Option<String>,
    pub debounce_ms: Option<u64>,
    pub cap: Option<u32>,
    pub drop: Option<String>,
}

/// Longest `collect` quiet window accepted.
const MAX_DEBOUNCE_MS: u64 = 60_000;
/// Largest `messages.queue.cap` accepted (a session's waiting messages are held in memory).
const MAX_QUEUE_CAP: u32 = 1000;

fn resolve_queue(q: &RawQueue) -> Result<ipc::queue::QueuePolicy, String> {
    use ipc::queue::{QueueDrop, QueueMode, QueuePolicy};
    let d = QueuePolicy::default();
    let mode = match &q.mode {
        None => d.mode,
        Some(m) => QueueMode::parse(m).ok_or_else(|| {
            format!("messages.queue.mode: {m:?} is not one of steer, followup, collect, interrupt")
        })?,
    };
    let drop = match &q.drop {
        None => d.drop,
        Some(x) => QueueDrop::parse(x).ok_or_else(|| {
            format!("messages.queue.drop: {x:?} is not one of old, new, summarize")
        })?,
    };
    let debounce_ms = q.debounce_ms.unwrap_or(d.debounce_ms);
    if debounce_ms > MAX_DEBOUNCE_MS {
        return Err(format!(
            "messages.queue.debounce_ms: at most {MAX_DEBOUNCE_MS}"
        ));
    }
    let cap = q.cap.unwrap_or(d.cap);
    if !(1..=MAX_QUEUE_CAP).contains(&cap) {
        return Err(format!("messages.queue.cap: between 1 and {MAX_QUEUE_CAP}"));
    }
    Ok(QueuePolicy {
        mode,
        debounce_ms,
        cap,
        drop,
    })
}

/// `[diagnostics]`: OpenClaw's `diagnostics.enabled` / `stuckSessionWarnMs`, and the floor of
/// the abort threshold (5 minutes; lowered by tests).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDiagnostics {
    pub enabled: Option<bool>,
    pub stuck_session_warn_ms: Option<u64>,
    pub stuck_session_abort_min_ms: Option<u64>,
}

/// Bounds of the diagnostics thresholds: 100 ms .. 1 day.
const DIAG_MIN_MS: u64 = 100;
const DIAG_MAX_MS: u64 = 86_400_000;

fn resolve_diagnostics(d: &RawDiagnostics) -> Result<ipc::diagnostics::DiagnosticsPolicy, String> {
    let def = ipc::diagnostics::DiagnosticsPolicy::default();
    let check = |v: Option<u64>, key: &str, default: u64| match v {
        None => Ok(default),
        Some(ms) if (DIAG_MIN_MS..=DIAG_MAX_MS).contains(&ms) => Ok(ms),
        Some(_) => Err(format!(
            "diagnostics.{key}: between {DIAG_MIN_MS} and {DIAG_MAX_MS} (milliseconds)"
        )),
    };
    Ok(ipc::diagnostics::DiagnosticsPolicy {
        enabled: d.enabled.unwrap_or(def.enabled),
        warn_ms: check(
            d.stuck_session_warn_ms,
            "stuck_session_warn_ms",
            def.warn_ms,
        )?,
        abort_min_ms: check(
            d.stuck_session_abort_min_ms,
            "stuck_session_abort_min_ms",
            def.abort_min_ms,
        )?,
    })
}

#[cfg(test)]
mod tests;
