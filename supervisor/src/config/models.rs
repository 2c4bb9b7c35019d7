//! `[models.providers]`: model providers as written ([`RawProvider`], [`RawModelEntry`]),
//! checked, and resolved for one model into the connection settings a worker uses
//! ([`ResolvedModel`], with each described model's [`ModelCaps`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::invalid::Invalid;
use super::{secs_to_ms, ProviderApi};

/// Default provider HTTP timeout (connect + response headers).
pub const DEFAULT_PROVIDER_TIMEOUT_SECONDS: f64 = 120.0;
/// Default model idle timeout for cloud providers (R-B4).
pub const DEFAULT_IDLE_CLOUD_SECONDS: f64 = 120.0;
/// Default model idle timeout for self-hosted (loopback / private) providers (R-B4).
pub const DEFAULT_IDLE_SELF_HOSTED_SECONDS: f64 = 300.0;

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModels {
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    #[schemars(schema_with = "super::schemas::provider_api")]
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
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModelEntry {
    /// The model can think (takes a thinking level other than `off`).
    pub reasoning: Option<bool>,
    /// Its own context window, in tokens (default: the provider's).
    pub context_window: Option<u64>,
    /// What it takes as input, as OpenClaw's model config says it: `["text"]` (the default)
    /// or `["text", "image"]`. A model without `image` gets a note instead of each image.
    pub input: Option<Vec<String>>,
    /// What it costs, in dollars per million tokens (`usage.cost`, `sessions.usage`); a
    /// model without one costs nothing, as a model of one's own does.
    pub cost: Option<Price>,
}

/// A model's price in dollars per million tokens, as OpenClaw's model `cost` says it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

/// Every configured price, by `(provider, model)`.
pub type Prices = BTreeMap<(String, String), Price>;

/// The prices the config gives its models.
pub(super) fn prices(raw: &RawModels) -> Prices {
    raw.providers
        .iter()
        .flat_map(|(provider, p)| {
            p.models.iter().filter_map(move |(model, m)| {
                m.cost.map(|c| ((provider.clone(), model.clone()), c))
            })
        })
        .collect()
}

impl RawModelEntry {
    /// Whether the model takes image inputs.
    pub fn images(&self) -> bool {
        self.input
            .as_ref()
            .is_some_and(|i| i.iter().any(|k| k == "image"))
    }
}

/// One model's capabilities, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelCaps {
    pub reasoning: bool,
    pub context_window: Option<u64>,
    /// It takes image inputs.
    pub images: bool,
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
    /// Whether `model` takes image inputs.
    pub images: bool,
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
            images: false,
        })
    }

    /// The models of this provider that take image inputs, by name.
    pub fn image_models(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .models
            .iter()
            .filter(|(_, c)| c.images)
            .map(|(n, _)| n.clone())
            .collect();
        if self.images && !names.contains(&self.model) {
            names.push(self.model.clone());
        }
        names
    }

    /// The model's context window: the provider's `context_window`, else the default.
    pub fn context_tokens(&self) -> u64 {
        self.context_window
            .unwrap_or(ipc::control::DEFAULT_CONTEXT_WINDOW)
    }
}

/// `[models.providers]`, every provider checked (in id order).
pub(super) fn check_providers(raw: &RawModels) -> Result<&BTreeMap<String, RawProvider>, Invalid> {
    for (id, p) in &raw.providers {
        check_provider(&format!("models.providers.{id}"), p)?;
    }
    Ok(&raw.providers)
}

/// One provider's checks; `key` is `models.providers.<id>`.
fn check_provider(key: &str, p: &RawProvider) -> Result<(), Invalid> {
    if p.api == ProviderApi::Unknown {
        let known: Vec<&str> = ProviderApi::KNOWN.iter().map(|a| a.as_str()).collect();
        return Err(Invalid::new(
            format!("{key}.api"),
            format!("not a known api (known: {})", known.join(", ")),
        ));
    }
    if p.base_url.trim().is_empty() {
        return Err(Invalid::new(format!("{key}.base_url"), "must not be empty"));
    }
    if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
        return Err(Invalid::new(
            format!("{key}.base_url"),
            format!("{:?} must start with http:// or https://", p.base_url),
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
                return Err(Invalid::new(
                    format!("{key}.{name}"),
                    "must be a positive number of seconds",
                ));
            }
        }
    }
    if p.max_output_tokens == Some(0) {
        return Err(Invalid::new(
            format!("{key}.max_output_tokens"),
            "must be at least 1",
        ));
    }
    if let Some(t) = p.temperature {
        if !(t.is_finite() && (0.0..=2.0).contains(&t)) {
            return Err(Invalid::new(
                format!("{key}.temperature"),
                "must be between 0 and 2",
            ));
        }
    }
    if p.context_window
        .is_some_and(|w| !(1024..=100_000_000).contains(&w))
    {
        return Err(Invalid::new(
            format!("{key}.context_window"),
            "must be between 1024 and 100000000 tokens",
        ));
    }
    for (name, m) in &p.models {
        if let Some(c) = m.cost {
            for (what, v) in [
                ("input", c.input),
                ("output", c.output),
                ("cache_read", c.cache_read),
                ("cache_write", c.cache_write),
            ] {
                if !(v.is_finite() && (0.0..=1_000_000.0).contains(&v)) {
                    return Err(Invalid::new(
                        format!("{key}.models.{name:?}.cost.{what}"),
                        "must be a number of dollars per million tokens (0 to 1000000)",
                    ));
                }
            }
        }
        for kind in m.input.iter().flatten() {
            if !matches!(kind.as_str(), "text" | "image") {
                return Err(Invalid::new(
                    format!("{key}.models.{name:?}.input"),
                    format!("{kind:?} is not an input kind (text, image)"),
                ));
            }
        }
    }
    if let Some(env) = &p.api_key_env {
        if env.is_empty() || env.contains('=') {
            return Err(Invalid::new(
                format!("{key}.api_key_env"),
                format!("{env:?} is not a variable name"),
            ));
        }
    }
    Ok(())
}

/// Loopback or private-network hosts count as self-hosted (longer idle default).
pub(super) fn is_self_hosted(base_url: &str) -> bool {
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
pub(super) fn resolve_model(id: &str, p: &RawProvider, model: &str) -> ResolvedModel {
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
        images: p.models.get(model).is_some_and(RawModelEntry::images),
        models: p
            .models
            .iter()
            .map(|(name, m)| {
                let caps = ModelCaps {
                    reasoning: m.reasoning.unwrap_or(false),
                    context_window: m.context_window.or(p.context_window),
                    images: m.images(),
                };
                (name.clone(), caps)
            })
            .collect(),
    }
}
