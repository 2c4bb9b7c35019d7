//! `agents.create` and `agents.update`: operators add and change agents over the Gateway.
//! Each is a write of the config file through the serve loop (validated whole, applied at
//! once by the reload path, `config.changed` told), then the workspace: a new agent's is
//! seeded from the bundled templates (`agent_templates`), a renamed one's `IDENTITY.md`
//! follows.

use ipc::gateway::{
    AgentsCreateParams, AgentsCreateResult, AgentsUpdateParams, AgentsUpdateResult, ErrorShape,
};
use serde_json::{json, Map, Value};

use super::gateway_ops::config_write;
use super::Answer;
use crate::config::AgentId;
use crate::gateway::{ConfigWrite, Gateway};

/// The id OpenClaw derives from a name: lowercased, every run of other characters one `-`,
/// none at either end (`Ops Probe` → `ops-probe`).
pub(super) fn id_of(name: &str) -> Result<AgentId, ErrorShape> {
    let mut id = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            id.push(c);
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-');
    if id.is_empty() {
        return Err(ErrorShape::invalid(format!(
            "Agent name {name:?} has no valid id characters. Use at least one letter a-z or digit."
        )));
    }
    let id: String = id.chars().take(64).collect();
    AgentId::parse(id.trim_end_matches('-'))
        .map_err(|e| ErrorShape::invalid(format!("invalid agents.create params: {e}")))
}

/// `{agents: {list: {<id>: table}}}`.
fn agent_patch(id: &str, table: Map<String, Value>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("agents".into(), json!({"list": {id: Value::Object(table)}}));
    m
}

/// `agents.create`: the agent is in the config, applied, and its workspace seeded when the
/// answer is sent; a turn can go to it at once.
pub(super) async fn agents_create(
    gw: &Gateway,
    p: AgentsCreateParams,
) -> Answer<AgentsCreateResult> {
    if p.name.trim().is_empty() {
        return Err(ErrorShape::invalid(
            "invalid agents.create params: at /name: must not have fewer than 1 characters",
        ));
    }
    let id = id_of(&p.name)?;
    if gw.config().agent(id.as_str()).is_some() {
        return Err(ErrorShape::invalid(format!(
            "agent {:?} already exists",
            id.as_str()
        )));
    }
    let mut table = Map::new();
    table.insert("name".into(), Value::from(p.name.clone()));
    if let Some(m) = &p.model {
        table.insert("model".into(), Value::from(m.clone()));
    }
    if let Some(w) = &p.workspace {
        table.insert("workspace".into(), Value::from(w.clone()));
    }
    let write = ConfigWrite::Merge {
        patch: agent_patch(id.as_str(), table),
        note: format!("agents.create {}", id.as_str()),
    };
    config_write(&gw.reload_requests, write).await?;
    let config = gw.config();
    let Some(agent) = config.agent(id.as_str()) else {
        return Err(ErrorShape::unavailable(
            "the new agent was not applied",
            None,
        ));
    };
    let workspace = agent.workspace.clone();
    let (name, emoji) = (p.name.clone(), p.emoji.clone());
    let seeded = tokio::task::spawn_blocking({
        let ws = workspace.clone();
        move || crate::agent_templates::seed(&ws, &name, emoji.as_deref())
    })
    .await;
    if let Ok(Err(e)) | Err(e) = seeded.map_err(|e| crate::workspace_files::FileError::Io(e.into()))
    {
        tracing::warn!(agent = id.as_str(), error = %e, "The new agent's workspace was not seeded.");
    }
    Ok(AgentsCreateResult {
        ok: true,
        agent_id: id.as_str().to_owned(),
        name: p.name,
        workspace: workspace.display().to_string(),
        model: p.model,
    })
}

/// `agents.update`: name, model (`null`: the agents' default) and workspace, in the config
/// and applied when answered; the name and emoji in `IDENTITY.md` too.
pub(super) async fn agents_update(
    gw: &Gateway,
    p: AgentsUpdateParams,
) -> Answer<AgentsUpdateResult> {
    if gw.config().agent(&p.agent_id).is_none() {
        return Err(ErrorShape::invalid(format!(
            "agent {:?} not found",
            p.agent_id
        )));
    }
    let mut table = Map::new();
    if let Some(n) = &p.name {
        table.insert("name".into(), Value::from(n.clone()));
    }
    if let Some(m) = &p.model {
        table.insert("model".into(), m.clone().map_or(Value::Null, Value::from));
    }
    if let Some(w) = &p.workspace {
        table.insert("workspace".into(), Value::from(w.clone()));
    }
    if !table.is_empty() {
        let write = ConfigWrite::Merge {
            patch: agent_patch(&p.agent_id, table),
            note: format!("agents.update {}", p.agent_id),
        };
        config_write(&gw.reload_requests, write).await?;
    }
    if p.name.is_some() || p.emoji.is_some() {
        if let Some(agent) = gw.config().agent(&p.agent_id) {
            let ws = agent.workspace.clone();
            let (name, emoji) = (p.name.clone(), p.emoji.clone());
            let renamed = tokio::task::spawn_blocking(move || {
                crate::agent_templates::rename(&ws, name.as_deref(), emoji.as_deref())
            })
            .await;
            if !matches!(renamed, Ok(Ok(()))) {
                tracing::warn!(agent = p.agent_id.as_str(), "IDENTITY.md was not updated.");
            }
        }
    }
    Ok(AgentsUpdateResult {
        ok: true,
        agent_id: p.agent_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_derived_from_a_name_as_openclaw_does() {
        let id = |n: &str| id_of(n).map(|i| i.as_str().to_owned());
        assert_eq!(id("Ops Probe").unwrap(), "ops-probe");
        assert_eq!(id("Hash Check").unwrap(), "hash-check");
        assert_eq!(id("  --Ünïcode  Bot!! ").unwrap(), "n-code-bot");
        assert_eq!(
            id("!!!").unwrap_err().message,
            "Agent name \"!!!\" has no valid id characters. Use at least one letter a-z or digit."
        );
        assert!(id(&"a".repeat(100)).unwrap().len() <= 64);
    }
}
