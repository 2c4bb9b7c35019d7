//! Where a run goes (R-A1): an agent and a session key from a request's `sessionKey`,
//! `agentId` and `sessionId`.

use super::super::*;

/// Where a run goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub agent_id: String,
    pub session_key: String,
}

/// Why a message cannot be routed to an agent and session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown agent id {0:?}")]
    UnknownAgent(String),
    #[error("sessionKey must be 1-512 characters")]
    KeyLength,
    #[error(
        "sessionKey must not contain control or bidirectional-text characters (found U+{0:04X})"
    )]
    KeyUnshowable(u32),
    #[error("invalid sessionKey {0:?}: expected agent:<agentId>:<key>")]
    KeyShape(String),
    #[error("sessionKey {key:?} belongs to agent {owner:?}, not {asked:?}")]
    KeyOfAnotherAgent {
        key: String,
        owner: String,
        asked: String,
    },
    #[error("sessionId must be resolved to its session first")]
    IdUnresolved,
    #[error("sessionId must be 1-512 characters")]
    IdLength,
    #[error("cannot look the sessionId up: {0}")]
    IdLookup(String),
    #[error("unknown sessionId {0:?}: no session on this gateway has it (pass sessionKey)")]
    UnknownId(String),
    #[error("sessionId {id:?} belongs to agent {agent:?}, which is not configured")]
    IdOfUnconfiguredAgent { id: String, agent: String },
    #[error("sessionId {id:?} belongs to agent {agent:?}, not {asked:?}")]
    IdOfAnotherAgent {
        id: String,
        agent: String,
        asked: String,
    },
}

/// Resolves agent and session key (R-A1): `sessionKey` (or an `agent:` key in `to`) wins,
/// then `agentId`'s main key `agent:<id>:main`, then `agent:main:main`. Bare keys are scoped
/// to the agent. Only configured agents are accepted.
pub fn route(p: &AgentParams, is_configured: impl Fn(&str) -> bool) -> Result<Route, RouteError> {
    let unknown = |raw: &str| RouteError::UnknownAgent(raw.to_owned());
    let explicit = match &p.agent_id {
        Some(raw) => {
            let id = AgentId::parse(raw).map_err(|_| unknown(raw))?;
            if !is_configured(id.as_str()) {
                return Err(unknown(raw));
            }
            Some(id.as_str().to_owned())
        }
        None => None,
    };
    let key = p
        .session_key
        .clone()
        .or_else(|| p.to.clone().filter(|t| t.starts_with("agent:")));
    if let Some(key) = key {
        let key = key.trim().to_owned();
        if key.is_empty() || key.len() > 512 {
            return Err(RouteError::KeyLength);
        }
        // Keys are printed to operators (CLI tables, logs, the Control UI): one that could
        // move a cursor, clear a screen or reorder text is refused here, the one place every
        // method that takes a client-chosen key routes it.
        if let Some(c) = key.chars().find(|&c| ipc::text::is_unshowable(c)) {
            return Err(RouteError::KeyUnshowable(c as u32));
        }
        if let Some(rest) = key.strip_prefix("agent:") {
            let (agent_raw, tail) = rest
                .split_once(':')
                .filter(|(_, tail)| !tail.is_empty())
                .ok_or_else(|| RouteError::KeyShape(key.clone()))?;
            let id = AgentId::parse(agent_raw).map_err(|_| unknown(agent_raw))?;
            if !is_configured(id.as_str()) {
                return Err(unknown(agent_raw));
            }
            if let Some(e) = &explicit {
                if e != id.as_str() {
                    return Err(RouteError::KeyOfAnotherAgent {
                        key: key.clone(),
                        owner: id.as_str().to_owned(),
                        asked: e.clone(),
                    });
                }
            }
            return Ok(Route {
                agent_id: id.as_str().to_owned(),
                session_key: format!("agent:{}:{tail}", id.as_str()),
            });
        }
        let agent_id = explicit.unwrap_or_else(|| "main".into());
        return Ok(Route {
            session_key: format!("agent:{agent_id}:{key}"),
            agent_id,
        });
    }
    if p.session_id.is_some() {
        // Callers resolve a `sessionId` first (`session_id_only`, `resolve_session_id`).
        return Err(RouteError::IdUnresolved);
    }
    let agent_id = explicit.unwrap_or_else(|| "main".into());
    Ok(Route {
        session_key: format!("agent:{agent_id}:main"),
        agent_id,
    })
}

/// The `sessionId` a run is addressed by alone (R-A1): no `sessionKey` and no `agent:` key
/// in `to`, which win over it.
pub fn session_id_only(p: &AgentParams) -> Option<&str> {
    let keyed = p.session_key.is_some() || p.to.as_ref().is_some_and(|t| t.starts_with("agent:"));
    (!keyed).then_some(p.session_id.as_deref()).flatten()
}

/// The session a `sessionId` names (R-A1): the session this gateway's index (`db`) knows it
/// for, of a configured agent, checked against an explicit `agentId`. An id this gateway has
/// not seen is refused (OpenClaw resolves an id only to an existing session; a new one needs
/// a key).
pub(in crate::rpc) async fn resolve_session_id(
    config: &Config,
    db: &GatewayDb,
    id: &str,
    agent_id: Option<&str>,
) -> Result<Route, RouteError> {
    let id = id.trim();
    if id.is_empty() || id.len() > 512 {
        return Err(RouteError::IdLength);
    }
    let found = db
        .session_by_id(id.to_owned())
        .await
        .map_err(|e| RouteError::IdLookup(e.to_string()))?;
    let Some((session_key, agent)) = found else {
        return Err(RouteError::UnknownId(id.to_owned()));
    };
    if config.agent(&agent).is_none() {
        return Err(RouteError::IdOfUnconfiguredAgent {
            id: id.to_owned(),
            agent,
        });
    }
    if let Some(explicit) = agent_id {
        let explicit =
            AgentId::parse(explicit).map_err(|_| RouteError::UnknownAgent(explicit.to_owned()))?;
        if explicit.as_str() != agent {
            return Err(RouteError::IdOfAnotherAgent {
                id: id.to_owned(),
                agent,
                asked: explicit.as_str().to_owned(),
            });
        }
    }
    Ok(Route {
        agent_id: agent,
        session_key,
    })
}
