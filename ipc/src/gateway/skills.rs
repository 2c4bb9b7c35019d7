//! `skills.status`: the agent's skills and whether each can be offered, as OpenClaw
//! 2026.9.6 answers it (`openclaw-observed/operator-surface-2026.9.6.md` section 12).

use serde::{Deserialize, Serialize};

/// `skills.status` params. Closed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsStatusParams {
    /// Default: the default agent (`main`).
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// Programs, variables, config keys and platforms a skill needs (or lacks).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillRequirements {
    pub bins: Vec<String>,
    pub any_bins: Vec<String>,
    pub env: Vec<String>,
    /// loopgate skills need no config keys.
    pub config: Vec<String>,
    pub os: Vec<String>,
}

/// One skill of `skills.status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillStatus {
    pub name: String,
    pub description: String,
    /// `openclaw-workspace`: loopgate reads skills from the agent's workspace only.
    pub source: String,
    pub bundled: bool,
    pub file_path: String,
    pub base_dir: String,
    pub skill_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    pub always: bool,
    pub disabled: bool,
    pub blocked_by_allowlist: bool,
    pub blocked_by_agent_filter: bool,
    pub eligible: bool,
    pub platform_incompatible: bool,
    pub model_visible: bool,
    /// loopgate has no skill slash commands.
    pub user_invocable: bool,
    pub command_visible: bool,
    pub requirements: SkillRequirements,
    pub missing: SkillRequirements,
    pub config_checks: Vec<super::Never>,
    pub install: Vec<super::Never>,
}

/// The answer to `skills.status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsStatusResult {
    pub workspace_dir: String,
    /// Where an operator puts the agent's skills (`<workspace>/skills`).
    pub managed_skills_dir: String,
    pub agent_id: String,
    pub skills: Vec<SkillStatus>,
}
