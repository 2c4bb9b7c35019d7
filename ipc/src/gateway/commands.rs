//! The slash commands the gateway interprets, as `commands.list` lists them (OpenClaw's
//! entry shape, recorded in `openclaw-observed/chat-surface-2026.9.6.md` section 5).

use serde::{Deserialize, Serialize};

/// One command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandEntry {
    pub name: String,
    pub native_name: String,
    /// What a user types, leading slash included (`/think`, `/t`).
    pub text_aliases: Vec<String>,
    pub description: String,
    /// `session`, `options` or `status`.
    pub category: String,
    /// `native`: built into the gateway.
    pub source: String,
    /// `both`: typed as text and offered natively.
    pub scope: String,
    pub accepts_args: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<CommandArg>,
}

/// An argument a command takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandArg {
    pub name: String,
    pub description: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Its values depend on the session (the thinking levels of its model).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dynamic: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<CommandChoice>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandChoice {
    pub value: String,
    pub label: String,
}

/// `commands.list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CommandsListResult {
    pub commands: Vec<CommandEntry>,
}
