//! Names as the config writes them: [`AgentId`] (a validated agent id), [`ModelRef`]
//! (`"<provider>/<model>"`) and [`ModelSetting`] (a primary model and its fallbacks, in
//! either of OpenClaw's two spellings). Each refuses a malformed value while the file is
//! parsed, so the error carries the line.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A validated agent id: `^[a-z0-9][a-z0-9_-]{0,63}$`, normalized to lowercase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(String);

/// A name that is not an agent id (the name as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid agent id {0:?}: expected 1-64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit")]
pub struct BadAgentId(pub String);

impl AgentId {
    pub fn parse(raw: &str) -> Result<AgentId, BadAgentId> {
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
            Err(BadAgentId(raw.to_owned()))
        }
    }

    /// `main`, the agent every config has.
    pub(super) fn main() -> AgentId {
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
