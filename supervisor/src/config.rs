//! Configuration: `loopgate.toml` is parsed into [`RawConfig`] (unknown keys rejected, with
//! the file and line in the error), merged with CLI overrides, then validated into the frozen
//! [`Config`] everything downstream takes by reference.
//!
//! Names mirror OpenClaw's where a concept is shared, in snake_case (see
//! `docs/operations.md` for every key).
//!
//! One file per section, each with its raw form, its validated form and the function that
//! turns one into the other (an error is an [`Invalid`]: the key it refuses, which
//! `config_lines` finds in the file again, and what is wrong): `gateway.rs`, `models.rs`, `agents.rs`,
//! `hooks.rs`, `policies.rs` (`[workers]`, `[messages.queue]`, `[diagnostics]`);
//! `names.rs`: agent ids and model references. [`Config::from_raw`] composes them.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod agents;
mod blocks;
pub mod control_ui;
mod disk;
mod gateway;
mod hooks;
pub(crate) mod invalid;
mod models;
mod names;
mod policies;
mod schemas;
pub mod skills;

pub use agents::{
    AgentConfig, RawAgentSettings, RawAgents, RawCompaction, RawExec, RawTools,
    DEFAULT_BOOTSTRAP_MAX_CHARS, DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS, DEFAULT_MAX_CONCURRENT,
    DEFAULT_TIMEOUT_SECONDS,
};
pub use blocks::{BlockSettings, RawBlockStreaming};
pub use gateway::{
    AuthMode, BindAddr, GatewayConfig, RawAuth, RawGateway, RawMetrics,
    DEFAULT_DRAIN_TIMEOUT_SECONDS, DEFAULT_MAX_CONNECTIONS, DEFAULT_PORT,
};
pub use hooks::RawHook;
pub use invalid::Invalid;
pub use models::{
    ModelCaps, Price, Prices, RawModelEntry, RawModels, RawProvider, ResolvedModel,
    DEFAULT_IDLE_CLOUD_SECONDS, DEFAULT_IDLE_SELF_HOSTED_SECONDS, DEFAULT_PROVIDER_TIMEOUT_SECONDS,
};
pub use names::{AgentId, BadAgentId, ModelRef, ModelSetting};
pub use policies::{
    QueueLimits, RawDiagnostics, RawMessages, RawQueue, RawWorkers, WorkersConfig,
    DEFAULT_HEARTBEAT_TIMEOUT_SECONDS, MAX_DEBOUNCE_MS, MAX_QUEUE_CAP,
};

/// `tools.exec.security` and a provider's `api`: the link's own enums (a name they do not
/// know parses as `Unknown` and is refused by validation, naming the key).
pub use ipc::control::{ExecSecurity, ProviderApi};

/// A config error: which file, and what is wrong (the key, the line when known).
#[derive(Debug)]
pub struct ConfigError {
    pub file: PathBuf,
    /// The line of the refused key, for validation errors (TOML syntax errors say where in
    /// their own text).
    pub line: Option<usize>,
    pub problem: ConfigProblem,
}

/// Why a config file is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// Not TOML, or not the config's shape (unknown key, wrong type): the parser's text.
    #[error("{0}")]
    Syntax(String),
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The file, or a place it names, could be written by someone other than the operator.
    #[error("refused: {0}")]
    Unsafe(Box<dyn std::error::Error + Send + Sync>),
}

impl ConfigError {
    /// The refused key, for validation errors.
    pub fn key(&self) -> Option<&str> {
        match &self.problem {
            ConfigProblem::Invalid(i) => Some(&i.key),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid config {}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
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
    /// `[disk]`: the free-space floor and the gateway database's reserve.
    #[serde(default)]
    pub disk: disk::RawDisk,
    /// `[[hooks.<event>]]`: plugin hooks, for every agent.
    #[serde(default)]
    pub hooks: std::collections::BTreeMap<String, Vec<RawHook>>,
    /// `[cluster]`: cluster mode (absent: one gateway, no NATS).
    #[serde(default)]
    pub cluster: Option<cluster::RawSettings>,
    /// `[skills.entries.<name>]`: the operator's settings of skills (R-B6).
    #[serde(default)]
    pub skills: skills::RawSkills,
    /// `[cron]`: the scheduler.
    #[serde(default)]
    pub cron: RawCron,
}

/// `[cron]`: the scheduler (OpenClaw's `cron.*` settings).
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCron {
    /// Fire jobs (default true; false keeps them, `cron.*` still answers).
    pub enabled: Option<bool>,
    /// A recurring job that came due while the gateway was stopped skips to its next
    /// occurrence instead of running once at start (OpenClaw's `cron.skipMissedJobs`;
    /// default false). One-shots run either way.
    pub skip_missed: Option<bool>,
    /// How long an isolated run's session is kept after its last update (OpenClaw's
    /// `cron.sessionRetention`; default 86 400 = 24 h; 0 keeps them).
    pub session_retention_seconds: Option<u64>,
}

/// `[cron]`, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CronConfig {
    pub enabled: bool,
    pub skip_missed: bool,
    pub session_retention_seconds: u64,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            enabled: true,
            skip_missed: false,
            session_retention_seconds: 86_400,
        }
    }
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
    /// `messages.queue.max_queued_*`: room for messages waiting for busy sessions.
    pub queue_limits: QueueLimits,
    /// `gateway_start` / `gateway_stop` hooks: the supervisor runs these itself.
    pub gateway_hooks: Vec<ipc::control::HookSpec>,
    /// `[disk] reserve_mb` in bytes: held back for the gateway database (0: none).
    pub disk_reserve_bytes: u64,
    /// Settings that load but weaken the sandbox (logged at start and reload).
    pub warnings: Vec<String>,
    /// `[cluster]`: `None` runs today's single-host gateway.
    pub cluster: Option<cluster::Settings>,
    /// The content hash of the file this config was loaded from (`None`: no file, or not
    /// loaded from one): what `config.get` calls the applied revision.
    pub text_hash: Option<String>,
    /// Models' prices (`models.providers.<id>.models.<name>.cost`).
    pub prices: Prices,
    /// `[cron]`.
    pub cron: CronConfig,
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
        let err = |problem: ConfigProblem| ConfigError {
            file: path.to_owned(),
            line: None,
            problem,
        };
        let (text, raw) = match std::fs::read_to_string(path) {
            Ok(text) => {
                let raw = toml::from_str::<RawConfig>(&text).map_err(|e| {
                    let message = crate::config_lines::without_source(e.to_string().trim_end());
                    err(ConfigProblem::Syntax(message))
                })?;
                (text, raw)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                (String::new(), RawConfig::default())
            }
            Err(e) => return Err(err(ConfigProblem::Read(e))),
        };
        let mut config = Self::from_raw(raw, path, state_dir, overrides).map_err(|mut e| {
            e.line = e
                .key()
                .and_then(|key| crate::config_lines::line_of(&text, key));
            e
        })?;
        config.text_hash = (!text.is_empty() || path.exists())
            .then(|| crate::config_edit::content_hash(text.as_bytes()));
        Ok(config)
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
        let err = |invalid: Invalid| ConfigError {
            file: path.to_owned(),
            line: None,
            problem: ConfigProblem::Invalid(invalid),
        };
        let mut gateway = gateway::resolve_gateway(&raw.gateway, overrides).map_err(err)?;
        let providers = models::check_providers(&raw.models).map_err(err)?;
        let (gateway_hooks, hooks): (Vec<_>, Vec<_>) = hooks::resolve_hooks(&raw.hooks)
            .map_err(err)?
            .into_iter()
            .partition(|h| h.event.is_gateway());
        let skills = skills::resolve(&raw.skills).map_err(err)?;
        let shared = agents::Shared {
            providers,
            skills: &skills,
            hooks: &hooks,
            diagnostics: &raw.diagnostics,
            disk: &raw.disk,
            state_dir,
        };
        let (agents, agent_warnings) = agents::resolve_agents(&raw.agents, &shared).map_err(err)?;
        let mut warnings = gateway::gateway_warnings(&gateway);
        warnings.extend(agent_warnings);
        gateway.control_ui = check_places(&agents, state_dir, &raw.gateway).map_err(err)?;
        Ok(Config {
            path: path.to_owned(),
            state_dir: state_dir.to_owned(),
            gateway,
            default_model: agents::default_model(&raw.agents.defaults),
            agents,
            workers: policies::resolve_workers(&raw.workers).map_err(err)?,
            queue: policies::resolve_queue(&raw.messages.queue).map_err(err)?,
            queue_limits: policies::resolve_queue_limits(&raw.messages.queue).map_err(err)?,
            gateway_hooks,
            disk_reserve_bytes: disk::resolve_reserve(&raw.disk).map_err(err)?,
            warnings,
            cluster: raw
                .cluster
                .as_ref()
                .map(cluster::RawSettings::validate)
                .transpose()
                .map_err(|e| err(e.into()))?,
            text_hash: None,
            prices: models::prices(&raw.models),
            cron: CronConfig {
                enabled: raw.cron.enabled.unwrap_or(true),
                skip_missed: raw.cron.skip_missed.unwrap_or(false),
                session_retention_seconds: raw.cron.session_retention_seconds.unwrap_or(86_400),
            },
        })
    }

    /// The configured agents' ids, `main` first.
    pub fn agent_ids(&self) -> Vec<String> {
        self.agents
            .iter()
            .map(|a| a.id.as_str().to_owned())
            .collect()
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
) -> Result<Option<control_ui::ControlUi>, Invalid> {
    let spaces: Vec<(&str, &Path)> = agents
        .iter()
        .map(|a| (a.id.as_str(), a.workspace.as_path()))
        .collect();
    crate::confine::check_workspaces(state_dir, &spaces)?;
    raw.control_ui
        .as_ref()
        .map(|ui| control_ui::resolve(ui, state_dir, &spaces))
        .transpose()
}

fn secs_to_ms(s: f64) -> u64 {
    (s * 1000.0).round().max(1.0) as u64
}

#[cfg(test)]
use models::is_self_hosted;
#[cfg(test)]
mod tests;
