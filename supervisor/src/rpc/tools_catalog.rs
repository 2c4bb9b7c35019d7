//! `tools.catalog` and `tools.effective`: the built-in tools from the one tool table
//! (`ipc::tools`), grouped and labelled as OpenClaw's Control UI shows them.

use ipc::gateway::{
    ErrorShape, Method, ToolEntry, ToolGroup, ToolProfile, ToolsCatalogParams, ToolsCatalogResult,
    ToolsEffectiveParams, ToolsEffectiveResult,
};
use ipc::tools::{Tool, ToolClass, TOOLS};

use super::Answer;
use crate::config::Config;

/// A tool class's group: id, label, and the profiles that offer its tools.
fn group_of(class: ToolClass) -> (&'static str, &'static str, &'static str) {
    match class {
        ToolClass::ReadFiles | ToolClass::WriteFiles => ("fs", "Files", "coding"),
        ToolClass::Exec => ("runtime", "Runtime", "coding"),
        ToolClass::Message => ("messaging", "Messaging", "messaging"),
        ToolClass::Web => ("web", "Web", "coding"),
        ToolClass::Memory => ("memory", "Memory", "coding"),
    }
}

fn entry(t: &Tool, catalog: bool) -> ToolEntry {
    ToolEntry {
        id: t.name.into(),
        label: t.name.into(),
        description: t.description.into(),
        source: "core".into(),
        default_profiles: catalog.then(|| vec![group_of(t.class).2.to_owned()]),
        raw_description: (!catalog).then(|| t.description.to_owned()),
    }
}

/// The agent `agent_id` names (default `main`), or OpenClaw's refusal.
fn agent_of<'a>(
    config: &'a Config,
    agent_id: Option<&str>,
) -> Answer<&'a crate::config::AgentConfig> {
    let id = agent_id.unwrap_or("main");
    config
        .agent(id)
        .ok_or_else(|| ErrorShape::invalid(format!("unknown agent id {id:?}")))
}

/// `tools.catalog`: every built-in tool, by group, with the profiles.
pub(super) fn tools_catalog(config: &Config, p: ToolsCatalogParams) -> Answer<ToolsCatalogResult> {
    let agent = agent_of(config, p.agent_id.as_deref())?;
    let mut groups: Vec<ToolGroup> = Vec::new();
    for t in TOOLS {
        let (id, label, _) = group_of(t.class);
        match groups.iter_mut().find(|g| g.id == id) {
            Some(g) => g.tools.push(entry(t, true)),
            None => groups.push(ToolGroup {
                id: id.into(),
                label: label.into(),
                source: "core".into(),
                tools: vec![entry(t, true)],
            }),
        }
    }
    let profiles = [
        ("minimal", "Minimal"),
        ("coding", "Coding"),
        ("messaging", "Messaging"),
        ("full", "Full"),
    ]
    .into_iter()
    .map(|(id, label)| ToolProfile {
        id: id.into(),
        label: label.into(),
    })
    .collect();
    Ok(ToolsCatalogResult {
        agent_id: agent.id.as_str().to_owned(),
        profiles,
        groups,
    })
}

/// `tools.effective`: the tools the session's agent is offered (`tools.allow`). A key of a
/// configured agent with no run yet is answered too (what its first run would be offered:
/// OpenClaw's Control UI asks for its main session before any turn).
pub(super) async fn tools_effective(
    config: &Config,
    p: ToolsEffectiveParams,
) -> Answer<ToolsEffectiveResult> {
    let route = super::routed(config, Method::ToolsEffective, &p.session_key, None)?;
    if let Some(asked) = p.agent_id.as_deref().filter(|a| *a != route.agent_id) {
        return Err(ErrorShape::invalid(format!(
            "agent {asked:?} does not match session key agent {:?}",
            route.agent_id
        )));
    }
    let agent = agent_of(config, Some(&route.agent_id))?;
    let allow = agent.tools_allow.as_deref();
    let tools: Vec<ToolEntry> = TOOLS
        .iter()
        .filter(|t| ipc::tools::allowed(allow, t.name))
        .map(|t| entry(t, false))
        .collect();
    Ok(ToolsEffectiveResult {
        agent_id: route.agent_id,
        profile: if allow.is_some() { "custom" } else { "full" }.into(),
        groups: vec![ToolGroup {
            id: "core".into(),
            label: "Built-in tools".into(),
            source: "core".into(),
            tools,
        }],
    })
}
