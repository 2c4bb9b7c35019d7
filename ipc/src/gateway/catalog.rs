//! What clients ask about models, credentials, agents' identities and the config
//! (`models.list`, `models.authStatus`, `chat.metadata`, `agent.identity.get`, `config.get`),
//! in OpenClaw's shapes, with only what loopgate has.

use serde::{Deserialize, Serialize};

/// A model a client may pick (OpenClaw's `ModelChoice`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelChoice {
    pub id: String,
    pub name: String,
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    pub reasoning: bool,
    pub thinking_levels: Vec<ThinkingLevel>,
    pub thinking_default: String,
    /// Whether this gateway can call it now (its api is implemented and its key is set).
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingLevel {
    pub id: String,
    pub label: String,
}

impl ThinkingLevel {
    /// `off`: what a model that cannot think offers.
    pub fn off() -> Self {
        Self::of(crate::thinking::Thinking::Off)
    }

    pub fn of(t: crate::thinking::Thinking) -> Self {
        Self {
            id: t.as_str().into(),
            label: t.as_str().into(),
        }
    }
}

/// How credentials are picked: loopgate has one per provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSelection {
    pub kind: String,
    pub label: String,
}

impl AccountSelection {
    pub fn automatic() -> Self {
        Self {
            kind: "automatic".into(),
            label: "Automatic account selection".into(),
        }
    }
}

/// The answer to `models.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelsListResult {
    pub models: Vec<ModelChoice>,
    pub account_selection: AccountSelection,
}

/// The answer to `models.authStatus`: whether each configured provider has its key, never
/// the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelsAuthStatusResult {
    pub ts: u64,
    pub providers: Vec<ProviderAuth>,
    pub provider_capabilities: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAuth {
    pub provider: String,
    pub auth_provider: String,
    pub display_name: String,
    /// `static` (a key from the environment, or none needed) or `missing` (its
    /// `api_key_env` is not set).
    pub status: String,
    pub profiles: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<KeySource>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySource {
    pub source: String,
}

/// The answer to `chat.metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatMetadataResult {
    pub models: Vec<ModelChoice>,
    /// Slash commands the gateway interprets (as `commands.list` lists them).
    pub commands: Vec<super::CommandEntry>,
    pub account_selection: AccountSelection,
    pub runtime_selection_locked: bool,
}

/// The answer to `agent.identity.get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    pub agent_id: String,
    pub name: String,
    /// `config` (the agent's `name`) or `default`.
    pub name_source: String,
    /// The name's first letter.
    pub avatar: String,
}

/// The answer to `config.get`. loopgate's config is not OpenClaw's schema, so OpenClaw's
/// config objects are empty and loopgate's effective settings (no secrets) are in `resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigGetResult {
    pub path: String,
    pub exists: bool,
    /// Never the file's text: it may hold a token.
    pub raw: Option<String>,
    pub parsed: Option<serde_json::Value>,
    pub valid: bool,
    pub config: serde_json::Value,
    pub runtime_config: serde_json::Value,
    pub source_config: serde_json::Value,
    pub resolved: ResolvedConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    pub issues: Vec<String>,
    pub warnings: Vec<String>,
    pub legacy_issues: Vec<String>,
    pub config_revision_hash: Option<String>,
    pub applied_config_hash: Option<String>,
}

/// loopgate's effective settings, without secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfig {
    pub gateway: ResolvedGateway,
    pub agents: ResolvedAgents,
}

/// `resolved.agents` in OpenClaw's shape: `{defaults: {model: {primary, fallbacks}},
/// entries: {<id>: {...}}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAgents {
    pub defaults: ResolvedDefaults,
    pub entries: std::collections::BTreeMap<String, ResolvedAgent>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedDefaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<super::AgentModel>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedGateway {
    pub port: u16,
    pub bind: String,
    /// `token` or `none`; the token itself is never shown.
    pub auth_mode: String,
    pub max_connections: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAgent {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<super::AgentModel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    pub workspace: String,
    /// `deny`, `allowlist` or `full`.
    pub exec_security: String,
}

/// The Control UI's boot document (`<base>/control-ui-config.json`), for a gateway with no
/// plugins, no terminal and no embeds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlUiConfig {
    /// `""` or `/x`.
    pub base_path: String,
    pub assistant_name: String,
    /// Text (the name's first letter); loopgate serves no avatar images.
    pub assistant_avatar: String,
    pub assistant_avatar_source: Option<String>,
    pub assistant_avatar_status: Option<String>,
    pub assistant_avatar_reason: Option<String>,
    pub assistant_agent_id: String,
    pub server_version: String,
    pub embed_sandbox: String,
    pub allow_external_embed_urls: bool,
    pub automatically_fetch_favicons: bool,
    pub community_invite: bool,
    /// Must equal the page's `data-openclaw-terminal-enabled` (else the UI reloads).
    pub terminal_enabled: bool,
    pub cli_agents_enabled: bool,
    pub plugin_assets_require_auth: bool,
    pub plugin_frame_grants: Vec<serde_json::Value>,
}

/// The JSON body of a refused HTTP request: `{error: {message, type}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpError {
    pub error: HttpErrorBody,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpErrorBody {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
}

impl HttpError {
    pub fn unauthorized() -> Self {
        HttpError {
            error: HttpErrorBody {
                message: "Unauthorized".into(),
                kind: "unauthorized".into(),
            },
        }
    }
}
