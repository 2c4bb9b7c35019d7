//! `[agents]`: the settings every agent inherits (`agents.defaults`) and the agents listed
//! (`agents.list.<id>`), as written ([`RawAgents`], [`RawAgentSettings`] with its
//! [`RawTools`], [`RawExec`] and [`RawCompaction`]), and resolved into one [`AgentConfig`]
//! per agent, `main` first: the agent's own setting, else the defaults', else the built-in
//! default. Errors name the agent's key (`agents.list.<id>`, or `agents.defaults` for an
//! agent that is not listed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::invalid::Invalid;
use super::models::{resolve_model, RawProvider, ResolvedModel};
use super::names::{AgentId, ModelRef, ModelSetting};
use super::policies::{resolve_diagnostics, RawDiagnostics};
use super::ExecSecurity;

/// Default run timeout (48 h), as in OpenClaw.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 172_800;
pub const DEFAULT_BOOTSTRAP_MAX_CHARS: u32 = 20_000;
pub const DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS: u32 = 60_000;
pub const DEFAULT_MAX_CONCURRENT: u32 = 8;

/// Longest exec approval wait accepted (7 days).
const MAX_APPROVAL_TIMEOUT_MS: u64 = 7 * 24 * 3600 * 1000;

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgents {
    #[serde(default)]
    pub defaults: RawAgentSettings,
    #[serde(default)]
    pub list: BTreeMap<AgentId, RawAgentSettings>,
}

#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgentSettings {
    #[serde(default)]
    #[schemars(schema_with = "super::schemas::model_setting")]
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
    /// How much of a run's tool work its `agent` reply tells: `off` (default), `on` (a line
    /// per tool call) or `full` (also each tool's output).
    pub verbose_default: Option<String>,
    /// Block streaming of `agent` replies (R-D5).
    pub block_streaming: Option<super::blocks::RawBlockStreaming>,
    /// This agent's disk budget (`workspace_max_mb`, `transcript_max_mb`).
    pub disk: Option<super::disk::RawAgentDisk>,
    /// The skills this agent may be offered, by name (absent: every skill of its workspace).
    /// Only these get their `[skills.entries]` settings and keys (R-B6).
    pub skills: Option<Vec<String>>,
    /// Leave a new workspace empty instead of writing the bootstrap files (`AGENTS.md`,
    /// `SOUL.md`, `IDENTITY.md`, `USER.md`, `BOOTSTRAP.md`) into it when the agent's worker
    /// first starts (OpenClaw's `skipBootstrap`; default false).
    pub skip_bootstrap: Option<bool>,
}

/// `compaction`: when a session's older context is summarized (R-B7).
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCompaction {
    /// Tokens kept free for the reply (default 20 000, at most a quarter of the window).
    pub reserve_tokens: Option<u64>,
    /// Recent context kept verbatim (default 20 000, at most a quarter of the window).
    pub keep_recent_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTools {
    pub exec: Option<RawExec>,
    /// Tools offered to the model (default: all built-in tools).
    pub allow: Option<Vec<String>>,
    /// What `web_fetch` may reach and bring back.
    pub web_fetch: Option<RawWebFetch>,
}

/// `tools.web_fetch`: OpenClaw's `tools.web.fetch` (its `ssrfPolicy` and limits).
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWebFetch {
    /// Host names fetched even when they are, or resolve to, private, loopback or
    /// special-use addresses (exact names: `localhost` is not `127.0.0.1`).
    pub allowed_hostnames: Option<Vec<String>>,
    /// Fetch any address, the private network and this host included (default false).
    pub dangerously_allow_private_network: Option<bool>,
    /// Most bytes of a response read (default 750 000; 32 000 to 10 000 000).
    pub max_response_bytes: Option<u64>,
    /// Most seconds for a whole fetch, redirects included (default 30; 1 to 300).
    pub timeout_seconds: Option<u64>,
    /// Redirects followed (default 3; at most 10).
    pub max_redirects: Option<u32>,
}

/// `tools.exec`: who may run shell commands.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExec {
    #[serde(default)]
    #[schemars(schema_with = "super::schemas::exec_security")]
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
    pub verbose_default: ipc::thinking::VerboseLevel,
    pub block_streaming: super::blocks::BlockSettings,
    /// `None`: no execution timer.
    pub timeout_ms: Option<u64>,
    pub workspace: PathBuf,
    /// A workspace that does not exist yet gets the bootstrap files when the worker starts
    /// (`skip_bootstrap` false).
    pub seed_workspace: bool,
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
    /// `tools.web_fetch`.
    pub web_fetch: ipc::web::WebFetchPolicy,
    pub compaction: ipc::control::CompactionSpec,
    /// `[diagnostics]` (the same for every agent).
    pub diagnostics: ipc::diagnostics::DiagnosticsPolicy,
    /// The agent's disk budget, with `[disk] min_free_mb`.
    pub disk: ipc::disk::DiskPolicy,
    /// Every configured provider (`model` empty), for per-run overrides by
    /// `before_model_resolve` hooks.
    pub providers: Vec<ResolvedModel>,
    /// `[skills.entries]` (the same for every agent: a change restarts every worker).
    pub skills: Vec<super::skills::SkillConfig>,
    /// `agents.*.skills`: the skills it may be offered (`None`: all).
    pub skill_filter: Option<Vec<String>>,
}

/// What every agent is resolved against besides its own settings and the defaults.
pub(super) struct Shared<'a> {
    /// The checked `[models.providers]`.
    pub providers: &'a BTreeMap<String, RawProvider>,
    /// The agents' hooks (every one but the supervisor's own `gateway_*`).
    pub hooks: &'a [ipc::control::HookSpec],
    pub diagnostics: &'a RawDiagnostics,
    pub disk: &'a super::disk::RawDisk,
    pub state_dir: &'a Path,
    /// `[skills.entries]` (the same for every agent).
    pub skills: &'a [super::skills::SkillConfig],
}

/// `agents.defaults.model` as written: `("<provider>/<model>", fallbacks)`.
pub(super) fn default_model(defaults: &RawAgentSettings) -> Option<(String, Vec<String>)> {
    defaults.model.as_ref().map(|m| {
        let name = |r: &ModelRef| format!("{}/{}", r.provider, r.model);
        (name(&m.primary), m.fallbacks.iter().map(name).collect())
    })
}

/// Every agent, `main` first, then the listed ones in id order, with what their settings
/// warn about (exec allowlists that weaken the sandbox).
pub(super) fn resolve_agents(
    raw: &RawAgents,
    shared: &Shared<'_>,
) -> Result<(Vec<AgentConfig>, Vec<String>), Invalid> {
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
) -> Result<AgentConfig, Invalid> {
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
        return Err(Invalid::new(
            format!("{key}.max_concurrent"),
            "must be at least 1",
        ));
    }
    let exec = resolve_exec(at)?;
    warnings.extend(crate::confine::check_exec(key, &exec)?);
    let tools_allow = resolve_tools_allow(at)?;
    let web_fetch = resolve_web_fetch(at)?;
    let compaction = resolve_compaction(at)?;
    let disk = super::disk::resolve_agent_disk(
        own.disk.as_ref(),
        defaults.disk.as_ref(),
        shared.disk,
        key,
    )?;
    let agent_dir = shared.state_dir.join("agents").join(id.as_str());
    let verbose_default = match own
        .verbose_default
        .as_deref()
        .or(defaults.verbose_default.as_deref())
    {
        None => ipc::thinking::VerboseLevel::Off,
        Some(v) => ipc::thinking::VerboseLevel::parse(v).ok_or_else(|| {
            Invalid::new(
                format!("{key}.verbose_default"),
                format!("{v:?} must be off, on or full"),
            )
        })?,
    };
    let block_streaming = super::blocks::resolve(
        own.block_streaming.as_ref(),
        defaults.block_streaming.as_ref(),
        key,
    )?;
    Ok(AgentConfig {
        verbose_default,
        block_streaming,
        compaction,
        diagnostics: resolve_diagnostics(shared.diagnostics)?,
        disk,
        providers: shared
            .providers
            .iter()
            .map(|(pid, p)| resolve_model(pid, p, ""))
            .collect(),
        exec,
        tools_allow,
        web_fetch,
        hooks: shared.hooks.to_vec(),
        skills: shared.skills.to_vec(),
        skill_filter: own.skills.clone().or_else(|| defaults.skills.clone()),
        db_path: agent_dir.join("agent.sqlite"),
        hooks_dir: agent_dir.join("hooks"),
        name: own.name.clone(),
        timeout_ms: (timeout_s > 0).then(|| timeout_s.saturating_mul(1000)),
        workspace,
        seed_workspace: !own
            .skip_bootstrap
            .or(defaults.skip_bootstrap)
            .unwrap_or(false),
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
) -> Result<(Option<ResolvedModel>, Vec<ResolvedModel>), Invalid> {
    let resolve = |m: &ModelRef, what: &str| {
        let p = providers.get(&m.provider).ok_or_else(|| {
            Invalid::new(
                format!("{key}.{what}"),
                format!(
                    "provider {:?} is not defined under [models.providers.{}]",
                    m.provider, m.provider
                ),
            )
        })?;
        Ok::<_, Invalid>(resolve_model(&m.provider, p, &m.model))
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
    Invalid,
> {
    let (own, defaults, key) = (at.own, at.defaults, at.key);
    let thinking_default = match own
        .thinking_default
        .as_deref()
        .or(defaults.thinking_default.as_deref())
    {
        None => None,
        Some(t) => Some(ipc::thinking::Thinking::parse(t).ok_or_else(|| {
            Invalid::new(format!("{key}.thinking_default"), format!("{t:?} is not a thinking level (off, minimal, low, medium, high, xhigh, adaptive, max, ultra)"))
        })?),
    };
    if let (Some(t), Some(m)) = (thinking_default, model) {
        if t != ipc::thinking::Thinking::Off && !m.reasoning {
            return Err(Invalid::new(format!("{key}.thinking_default"), format!("{:?} needs a reasoning model, and {}/{} is not marked one (models.providers.{}.models.{:?}.reasoning = true)", t.as_str(), m.provider, m.model, m.provider, m.model)));
        }
    }
    let reasoning_default = match own
        .reasoning_default
        .as_deref()
        .or(defaults.reasoning_default.as_deref())
    {
        None => ipc::thinking::ReasoningMode::Off,
        Some(r) => ipc::thinking::ReasoningMode::parse(r).ok_or_else(|| {
            Invalid::new(
                format!("{key}.reasoning_default"),
                format!("{r:?} must be off, on or stream"),
            )
        })?,
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
fn resolve_exec(at: &Layers<'_>) -> Result<ipc::control::ExecPolicy, Invalid> {
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
            return Err(Invalid::new(
                format!("{place}.tools.exec.security"),
                "must be \"deny\", \"allowlist\", \"ask\" or \"full\"",
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
        return Err(Invalid::new(
            format!("{}.tools.exec.approval_timeout_seconds", at.key),
            format!("between 1 and {} (7 days)", MAX_APPROVAL_TIMEOUT_MS / 1000),
        ));
    }
    Ok(exec)
}

/// `tools.allow`: built-in tool names only (`None`: all tools).
fn resolve_tools_allow(at: &Layers<'_>) -> Result<Option<Vec<String>>, Invalid> {
    let allow_of = |s: &RawAgentSettings| s.tools.as_ref().and_then(|t| t.allow.clone());
    let tools_allow = allow_of(at.own).or_else(|| allow_of(at.defaults));
    if let Some(list) = &tools_allow {
        if let Some(bad) = list.iter().find(|t| ipc::tools::find(t).is_none()) {
            return Err(Invalid::new(
                format!("{}.tools.allow", at.key),
                format!(
                    "unknown tool {bad:?} (tools: {})",
                    ipc::tools::TOOL_NAMES.join(", ")
                ),
            ));
        }
    }
    Ok(tools_allow)
}

/// `tools.web_fetch`, each field the agent's own or the defaults', in range.
fn resolve_web_fetch(at: &Layers<'_>) -> Result<ipc::web::WebFetchPolicy, Invalid> {
    let of = |s: &RawAgentSettings| s.tools.as_ref().and_then(|t| t.web_fetch.clone());
    let (own, def) = (
        of(at.own).unwrap_or_default(),
        of(at.defaults).unwrap_or_default(),
    );
    let base = ipc::web::WebFetchPolicy::default();
    let key = |field: &str| format!("{}.tools.web_fetch.{field}", at.key);
    let in_range = |v: u64, lo: u64, hi: u64, field: &str| {
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(Invalid::new(key(field), format!("between {lo} and {hi}")))
        }
    };
    let max_response_bytes = in_range(
        own.max_response_bytes
            .or(def.max_response_bytes)
            .unwrap_or(base.max_response_bytes),
        32_000,
        10_000_000,
        "max_response_bytes",
    )?;
    let timeout_s = in_range(
        own.timeout_seconds
            .or(def.timeout_seconds)
            .unwrap_or(base.timeout_ms / 1000),
        1,
        300,
        "timeout_seconds",
    )?;
    let max_redirects = in_range(
        u64::from(
            own.max_redirects
                .or(def.max_redirects)
                .unwrap_or(base.max_redirects),
        ),
        0,
        10,
        "max_redirects",
    )?;
    let allowed_hostnames = own
        .allowed_hostnames
        .or(def.allowed_hostnames)
        .unwrap_or_default();
    if let Some(bad) = allowed_hostnames
        .iter()
        .find(|h| !ipc::web::is_host_name(h))
    {
        return Err(Invalid::new(
            key("allowed_hostnames"),
            format!("{bad:?} is not a host name or address (no scheme, port or wildcard)"),
        ));
    }
    Ok(ipc::web::WebFetchPolicy {
        allowed_hostnames,
        allow_private_network: own
            .dangerously_allow_private_network
            .or(def.dangerously_allow_private_network)
            .unwrap_or(false),
        max_response_bytes,
        timeout_ms: timeout_s * 1000,
        max_redirects: u32::try_from(max_redirects).unwrap_or(base.max_redirects),
    })
}

/// `compaction`, each field the agent's own or the defaults'.
fn resolve_compaction(at: &Layers<'_>) -> Result<ipc::control::CompactionSpec, Invalid> {
    let own_c = at.own.compaction.clone().unwrap_or_default();
    let def_c = at.defaults.compaction.clone().unwrap_or_default();
    let compaction = ipc::control::CompactionSpec {
        reserve_tokens: own_c.reserve_tokens.or(def_c.reserve_tokens),
        keep_recent_tokens: own_c.keep_recent_tokens.or(def_c.keep_recent_tokens),
    };
    if compaction.reserve_tokens == Some(0) || compaction.keep_recent_tokens == Some(0) {
        return Err(Invalid::new(
            format!("{}.compaction", at.key),
            "reserve_tokens and keep_recent_tokens must be at least 1",
        ));
    }
    Ok(compaction)
}
