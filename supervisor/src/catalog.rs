//! Answers about models, credentials, identities and the config, built from the config and
//! the names of the environment variables that are set (never their values). Pure: the rpc
//! handlers only route to these.

use std::collections::{BTreeSet, HashSet};

use ipc::gateway::{
    AccountSelection, AgentIdentity, AgentModel, ChatMetadataResult, ConfigGetResult, KeySource,
    ModelChoice, ModelsAuthStatusResult, ModelsListResult, ProviderAuth, ResolvedAgent,
    ResolvedAgents, ResolvedConfig, ResolvedDefaults, ResolvedGateway, ThinkingLevel,
};

use crate::config::{AgentConfig, AuthMode, Config, ResolvedModel};

/// Whether a provider's key is where its config says (`None`: it needs none).
fn key_present(m: &ResolvedModel, env_set: &HashSet<String>) -> Option<bool> {
    m.api_key_env.as_ref().map(|k| env_set.contains(k))
}

fn choice(m: &ResolvedModel, env_set: &HashSet<String>) -> ModelChoice {
    let (available, reason) = if !m.api.implemented() {
        (false, Some("unsupported-api".to_owned()))
    } else if key_present(m, env_set) == Some(false) {
        (false, Some("missing-auth".to_owned()))
    } else {
        (true, None)
    };
    ModelChoice {
        id: m.model.clone(),
        name: m.model.clone(),
        provider: m.provider.clone(),
        context_window: m.context_window,
        reasoning: m.reasoning,
        // A reasoning model takes every level (each API maps them onto its own knob).
        thinking_levels: if m.reasoning {
            ipc::thinking::Thinking::ALL
                .iter()
                .map(|t| ThinkingLevel::of(*t))
                .collect()
        } else {
            vec![ThinkingLevel::off()]
        },
        thinking_default: if m.reasoning { "medium" } else { "off" }.into(),
        available,
        unavailable_reason: reason,
    }
}

/// `models.list`: the models agents are configured with, each once.
pub fn models(config: &Config, env_set: &HashSet<String>) -> ModelsListResult {
    let mut seen = BTreeSet::new();
    let models = config
        .agents
        .iter()
        .filter_map(|a| a.model.as_ref())
        .filter(|m| seen.insert((m.provider.clone(), m.model.clone())))
        .map(|m| choice(m, env_set))
        .collect();
    ModelsListResult {
        models,
        account_selection: AccountSelection::automatic(),
    }
}

/// `chat.metadata` for one agent: its model and the slash commands.
pub fn chat_metadata(agent: &AgentConfig, env_set: &HashSet<String>) -> ChatMetadataResult {
    ChatMetadataResult {
        models: agent.model.iter().map(|m| choice(m, env_set)).collect(),
        commands: crate::rpc::commands::catalog(true),
        account_selection: AccountSelection::automatic(),
        runtime_selection_locked: false,
    }
}

/// `models.authStatus`: one entry per configured provider.
pub fn auth_status(config: &Config, env_set: &HashSet<String>, ts: u64) -> ModelsAuthStatusResult {
    let mut seen = BTreeSet::new();
    let providers = config
        .agents
        .iter()
        .flat_map(|a| a.providers.iter())
        .filter(|p| seen.insert(p.provider.clone()))
        .map(|p| {
            let present = key_present(p, env_set);
            ProviderAuth {
                provider: p.provider.clone(),
                auth_provider: p.provider.clone(),
                display_name: p.provider.clone(),
                status: if present == Some(false) {
                    "missing"
                } else {
                    "static"
                }
                .into(),
                profiles: Vec::new(),
                api_key: (present == Some(true)).then(|| KeySource {
                    source: "env".into(),
                }),
            }
        })
        .collect();
    ModelsAuthStatusResult {
        ts,
        providers,
        provider_capabilities: Vec::new(),
    }
}

/// `agent.identity.get`.
pub fn identity(agent: &AgentConfig) -> AgentIdentity {
    let (name, source) = match &agent.name {
        Some(n) if !n.trim().is_empty() => (n.clone(), "config"),
        _ => ("Assistant".to_owned(), "default"),
    };
    AgentIdentity {
        agent_id: agent.id.as_str().to_owned(),
        avatar: name.chars().next().map(String::from).unwrap_or_default(),
        name,
        name_source: source.into(),
    }
}

/// An agent's model and fallbacks as clients see them (`"<provider>/<model>"`).
pub fn agent_model(a: &crate::config::AgentConfig) -> Option<AgentModel> {
    a.model.as_ref().map(|m| AgentModel {
        primary: format!("{}/{}", m.provider, m.model),
        fallbacks: a
            .fallbacks
            .iter()
            .map(|f| format!("{}/{}", f.provider, f.model))
            .collect(),
    })
}

/// `config.get`: where the config is and loopgate's effective settings; never the file's
/// text (it may hold the gateway token) nor any key.
pub fn config_get(config: &Config, file: Option<FileView>) -> ConfigGetResult {
    let empty = serde_json::Value::Object(serde_json::Map::new());
    let agents: Vec<ResolvedAgent> = config
        .agents
        .iter()
        .map(|a| ResolvedAgent {
            id: a.id.as_str().to_owned(),
            model: agent_model(a),
            api: a.model.as_ref().map(|m| m.api.as_str().to_owned()),
            workspace: a.workspace.display().to_string(),
            exec_security: a.exec.security.as_str().to_owned(),
        })
        .collect();
    ConfigGetResult {
        path: config.path.display().to_string(),
        exists: config.path.exists(),
        raw: file.as_ref().map(|f| f.raw.clone()),
        parsed: file.as_ref().map(|f| f.parsed.clone()),
        valid: true,
        // The file's settings (redacted) as OpenClaw's UI reads them (agents under
        // `agents.entries`), which its config form and agent pages edit and send back whole
        // with `config.set`.
        config: file.as_ref().map_or(empty.clone(), |f| {
            crate::config_edit::to_openclaw(&f.parsed)
        }),
        runtime_config: serde_json::json!({ "gateway": {} }),
        source_config: file
            .as_ref()
            .map_or(empty, |f| crate::config_edit::to_openclaw(&f.parsed)),
        resolved: ResolvedConfig {
            gateway: ResolvedGateway {
                port: config.gateway.port,
                bind: config.gateway.bind.to_string(),
                auth_mode: match config.gateway.auth_mode {
                    AuthMode::Token => "token",
                    AuthMode::None => "none",
                }
                .into(),
                max_connections: config.gateway.max_connections,
            },
            agents: ResolvedAgents {
                defaults: ResolvedDefaults {
                    model: config
                        .default_model
                        .clone()
                        .map(|(primary, fallbacks)| AgentModel { primary, fallbacks }),
                },
                entries: agents.into_iter().map(|a| (a.id.clone(), a)).collect(),
            },
        },
        hash: file.map(|f| f.hash),
        issues: Vec::new(),
        warnings: config.warnings.clone(),
        legacy_issues: Vec::new(),
        // The file the running config was loaded from: applied (loopgate applies a file
        // when it loads it, or refuses it whole).
        config_revision_hash: config.text_hash.clone(),
        applied_config_hash: config.text_hash.clone(),
    }
}

/// The config file as `config.get` shows it: its text and its parse with secrets redacted,
/// and its content hash.
pub struct FileView {
    pub raw: String,
    pub parsed: serde_json::Value,
    pub hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, RawConfig};
    use std::path::Path;

    fn config(text: &str) -> Config {
        let raw: RawConfig = toml::from_str(text).unwrap();
        Config::from_raw(
            raw,
            Path::new("/etc/lg.toml"),
            Path::new("/state"),
            &Overrides::default(),
        )
        .unwrap()
    }

    const TEXT: &str = r#"
[gateway.auth]
token = "s3cret-token"

[models.providers.cloud]
api = "openai-completions"
base_url = "https://api.example.com/v1"
api_key_env = "CLOUD_KEY"

[models.providers.local]
api = "openai-completions"
base_url = "http://127.0.0.1:8080/v1"

[agents.defaults]
model = "cloud/big"

[agents.list.ops]
name = "Ops"
model = "local/small"
"#;

    #[test]
    fn models_say_whether_they_can_be_called_and_keys_are_never_shown() {
        let c = config(TEXT);
        let none = HashSet::new();
        let m = models(&c, &none);
        let by: Vec<(&str, bool)> = m
            .models
            .iter()
            .map(|m| (m.id.as_str(), m.available))
            .collect();
        assert_eq!(by, [("big", false), ("small", true)]);
        assert_eq!(
            m.models[0].unavailable_reason.as_deref(),
            Some("missing-auth")
        );
        let set: HashSet<String> = ["CLOUD_KEY".to_owned()].into();
        assert!(models(&c, &set).models.iter().all(|m| m.available));

        let a = auth_status(&c, &none, 1);
        let status: Vec<(&str, &str)> = a
            .providers
            .iter()
            .map(|p| (p.provider.as_str(), p.status.as_str()))
            .collect();
        assert_eq!(status, [("cloud", "missing"), ("local", "static")]);
        let a = auth_status(&c, &set, 1);
        assert_eq!(
            a.providers[0].api_key.as_ref().map(|k| k.source.as_str()),
            Some("env")
        );
    }

    #[test]
    fn identity_uses_the_configured_name() {
        let c = config(TEXT);
        let main = identity(c.agent("main").unwrap());
        assert_eq!(
            (
                main.name.as_str(),
                main.name_source.as_str(),
                main.avatar.as_str()
            ),
            ("Assistant", "default", "A")
        );
        let ops = identity(c.agent("ops").unwrap());
        assert_eq!(
            (
                ops.name.as_str(),
                ops.name_source.as_str(),
                ops.avatar.as_str()
            ),
            ("Ops", "config", "O")
        );
    }

    #[test]
    fn config_get_never_holds_the_token() {
        let c = config(TEXT);
        let doc = crate::config_edit::document(TEXT).unwrap();
        let (raw, parsed) = crate::config_edit::redacted(&doc);
        let file = FileView {
            raw,
            parsed,
            hash: "h".into(),
        };
        let r = config_get(&c, Some(file));
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains(crate::config_edit::REDACTED), "{text}");
        assert_eq!(r.resolved.gateway.auth_mode, "token");
        assert_eq!(r.resolved.agents.entries.len(), 2);
        assert!(r.runtime_config["gateway"].is_object());
        assert_eq!(r.hash.as_deref(), Some("h"));
    }
}
