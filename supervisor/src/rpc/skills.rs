//! `skills.status`: the agent's skills as its worker sees them (the workspace's `SKILL.md`
//! files and whether the worker's host meets what each requires), in OpenClaw 2026.9.6's
//! shape (`openclaw-observed/operator-surface-2026.9.6.md` section 12).

use std::path::Path;
use std::sync::Arc;

use ipc::gateway::{
    ErrorShape, SkillRequirements, SkillStatus, SkillsStatusParams, SkillsStatusResult,
};
use ipc::session_ops::{SkillNeeds, SkillState, SkillsOp};

use super::{ask, ask_error, Answer};
use crate::connection::out::Out;
use crate::gateway::Gateway;

fn requirements(n: SkillNeeds) -> SkillRequirements {
    SkillRequirements {
        bins: n.bins,
        any_bins: n.any_bins,
        env: n.env,
        config: Vec::new(),
        os: n.os,
    }
}

/// One skill, as `skills.status` lists it.
fn status(workspace: &Path, s: SkillState) -> SkillStatus {
    let file = workspace.join(&s.location);
    let base = file.parent().unwrap_or(workspace).display().to_string();
    let platform_incompatible = !s.missing.os.is_empty();
    SkillStatus {
        skill_key: s.name.clone(),
        name: s.name,
        description: s.description,
        source: "openclaw-workspace".into(),
        bundled: false,
        file_path: file.display().to_string(),
        base_dir: base,
        emoji: s.emoji,
        homepage: s.homepage,
        always: s.always,
        disabled: s.disabled,
        blocked_by_allowlist: false,
        blocked_by_agent_filter: s.blocked_by_agent_filter,
        eligible: s.eligible,
        platform_incompatible,
        model_visible: s.eligible && s.model_visible,
        user_invocable: false,
        command_visible: false,
        requirements: requirements(s.requires),
        missing: requirements(s.missing),
        config_checks: Vec::new(),
        install: Vec::new(),
    }
}

/// `skills.status`: asks the agent's worker (started if it is not running) what its
/// workspace holds.
pub(super) async fn skills_status(
    gw: &Arc<Gateway>,
    out: &Out,
    p: SkillsStatusParams,
) -> Answer<SkillsStatusResult> {
    let agent_id = p.agent_id.unwrap_or_else(|| "main".to_owned());
    if gw.config().agent(&agent_id).is_none() {
        return Err(ErrorShape::invalid(format!(
            "unknown agent id {agent_id:?}"
        )));
    }
    let reply = ask(gw, out, agent_id.clone(), SkillsOp)
        .await
        .map_err(ask_error)?;
    let workspace = Path::new(&reply.workspace);
    Ok(SkillsStatusResult {
        workspace_dir: reply.workspace.clone(),
        managed_skills_dir: workspace.join("skills").display().to_string(),
        agent_id,
        skills: reply
            .skills
            .into_iter()
            .map(|s| status(workspace, s))
            .collect(),
    })
}
