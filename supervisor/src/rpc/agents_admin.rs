//! `agents.create` and `agents.update`: operators add and change agents over the Gateway.
//! Each is a write of the config file through the serve loop (validated whole, applied at
//! once by the reload path, `config.changed` told), then the workspace: a new agent's is
//! seeded from the bundled templates (`agent_templates`), a renamed one's `IDENTITY.md`
//! follows.

use ipc::gateway::{
    AgentsCreateParams, AgentsCreateResult, AgentsDeleteParams, AgentsDeleteResult,
    AgentsUpdateParams, AgentsUpdateResult, ErrorShape, RemovedPath,
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
    if !matches!(seeded, Ok(Ok(()))) {
        tracing::warn!(agent = id.as_str(), outcome = ?seeded, "The new agent's workspace was not seeded.");
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

/// `agents.delete`: the agent leaves the config (its runs drain and its worker stops, as on
/// a reload), then its files go to `<state>/trash/` (`deleteFiles`, default true): its state
/// directory (database, hooks) and its workspace when that lies in the state directory; a
/// workspace elsewhere is the operator's and stays. `main`, the default agent, stays.
pub(super) async fn agents_delete(
    gw: &Gateway,
    p: AgentsDeleteParams,
) -> Answer<AgentsDeleteResult> {
    let config = gw.config();
    let Some(agent) = config.agent(&p.agent_id) else {
        return Err(ErrorShape::invalid(format!(
            "agent {:?} not found",
            p.agent_id
        )));
    };
    if agent.id.as_str() == "main" {
        return Err(ErrorShape::invalid(
            "Agent \"main\" is loopgate's default agent and cannot be deleted.",
        ));
    }
    let state_dir = config.state_dir.clone();
    let workspace = agent.workspace.clone();
    let mut patch = Map::new();
    patch.insert("agents".into(), json!({"list": {p.agent_id.clone(): null}}));
    let write = ConfigWrite::Merge {
        patch,
        note: format!("agents.delete {}", p.agent_id),
    };
    super::gateway_ops::config_write(&gw.reload_requests, write).await?;
    let mut result = AgentsDeleteResult {
        ok: true,
        agent_id: p.agent_id.clone(),
        removed_bindings: 0,
        removed: Vec::new(),
        failed: Vec::new(),
    };
    forget_grants(gw, &p.agent_id).await;
    if !p.delete_files.unwrap_or(true) {
        return Ok(result);
    }
    // The files go once its worker is gone (it drains its runs first).
    let deadline =
        std::time::Duration::from_secs(config.gateway.drain_timeout_seconds.saturating_add(10));
    let gone = tokio::time::timeout(deadline, worker_gone(gw, &p.agent_id)).await;
    // Created again meanwhile: the files are the new agent's.
    let again = gw.config().agent(&p.agent_id).is_some();
    if !matches!(gone, Ok(true)) || again {
        result.failed.push(RemovedPath {
            path: state_dir
                .join("agents")
                .join(&p.agent_id)
                .display()
                .to_string(),
            method: if again {
                "an agent of this id was created again meanwhile; files kept".into()
            } else {
                "its worker did not stop in time; files kept".into()
            },
        });
        return Ok(result);
    }
    let trash = state_dir
        .join("trash")
        .join(format!("{}-{}", p.agent_id, crate::events::now_ms()));
    let id = p.agent_id.clone();
    let moved =
        tokio::task::spawn_blocking(move || to_trash(&id, &workspace, &state_dir, &trash)).await;
    match moved {
        Ok((removed, failed)) => {
            result.removed = removed;
            result.failed = failed;
        }
        Err(e) => result.failed.push(RemovedPath {
            path: String::new(),
            method: e.to_string(),
        }),
    }
    Ok(result)
}

/// Moves agent `id`'s own state directory (`<state>/agents/<id>`) and its workspace into
/// `trash`. Paths are compared as they really are (`..` applied, links resolved): the
/// workspace moves only if it is a workspace place of this agent in the state directory
/// (`confine::workspace_place`); anywhere else it is the operator's and is kept. Nothing
/// else of the state directory is ever moved.
fn to_trash(
    id: &str,
    workspace: &std::path::Path,
    state_dir: &std::path::Path,
    trash: &std::path::Path,
) -> (Vec<RemovedPath>, Vec<RemovedPath>) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("/"));
    let state = crate::confine::real(state_dir, &cwd);
    let own = state.join("agents").join(id);
    let ws = crate::confine::real(workspace, &cwd);
    let mut places = vec![(own.clone(), true)];
    if !ws.starts_with(&own) {
        places.push((ws.clone(), crate::confine::workspace_place(&state, id, &ws)));
    }
    let (mut removed, mut failed) = (Vec::new(), Vec::new());
    for (n, (place, ours)) in places.into_iter().enumerate() {
        let entry = |method: &str| RemovedPath {
            path: place.display().to_string(),
            method: method.to_owned(),
        };
        if !ours {
            removed.push(entry("kept"));
            continue;
        }
        let to = trash.join(if n == 0 { "agent" } else { "workspace" });
        match std::fs::create_dir_all(trash).and_then(|()| std::fs::rename(&place, &to)) {
            Ok(()) => removed.push(entry("trash")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => removed.push(entry("missing")),
            Err(e) => failed.push(entry(&e.to_string())),
        }
    }
    (removed, failed)
}

/// Forgets the commands the agent was allowed for good (an agent created again under its id
/// starts without them).
async fn forget_grants(gw: &Gateway, agent_id: &str) {
    let Ok(all) = gw.control.allowed_list().await else {
        return;
    };
    for (agent, pattern) in all.into_iter().filter(|(a, _)| a == agent_id) {
        if !matches!(gw.control.disallow(agent, pattern).await, Ok(Ok(_))) {
            tracing::warn!(
                agent = agent_id,
                "A deleted agent's allowed command was not forgotten."
            );
        }
    }
}

/// Waits until the control actor has no worker for `agent_id` (`false`: it cannot say).
async fn worker_gone(gw: &Gateway, agent_id: &str) -> bool {
    loop {
        match gw.control.status(0).await {
            Ok(s) if s.workers.iter().all(|w| w.agent_id != agent_id) => return true,
            Err(_) => return false,
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
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
