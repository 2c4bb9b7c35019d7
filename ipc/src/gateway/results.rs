//! Results of the methods that start, stop and list things (beyond a run's own result).

use serde::{Deserialize, Serialize};

/// The first answer to `agent`: the run was accepted (`status: "accepted"`, with
/// `acceptedAt`), or the same idempotency key's run is still going (`"in_flight"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentAck {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<u64>,
}

/// The answer to `chat.send`: `started`, `in_flight` (same key, still running) or `ok` (same
/// key, already finished). Progress and the outcome arrive as events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatSendAck {
    pub run_id: String,
    pub status: String,
}

/// What `chat.send` answers: its ack, or, for a `/stop` message, what `chat.abort` would
/// (as OpenClaw answers one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ChatSendResult {
    Ack(ChatSendAck),
    Stopped(ChatAbortResult),
}

/// The answer to `chat.abort`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatAbortResult {
    pub ok: bool,
    pub aborted: bool,
    pub run_ids: Vec<String>,
}

/// The answer to `sessions.delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsDeleteResult {
    pub ok: bool,
    pub key: String,
    pub deleted: bool,
    /// Archived transcript files (none: transcripts live in the agent's database).
    pub archived: Vec<String>,
}

/// The answer to `gateway.drain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainResult {
    pub ok: bool,
    pub draining: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_draining: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

/// The answer to `agents.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentsListResult {
    pub default_id: String,
    pub main_key: String,
    pub scope: String,
    pub agents: Vec<AgentSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSummary {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<AgentModel>,
}

/// An agent's model as OpenClaw lists it: `primary` is `<provider>/<model>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentModel {
    pub primary: String,
    pub fallbacks: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agents_list_names_the_model_as_openclaw_does() {
        let r = AgentsListResult {
            default_id: "main".into(),
            main_key: "main".into(),
            scope: "per-sender".into(),
            agents: vec![AgentSummary {
                id: "main".into(),
                name: None,
                workspace: "/w".into(),
                model: Some(AgentModel {
                    primary: "local/qwen".into(),
                    fallbacks: vec![],
                }),
            }],
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"defaultId": "main", "mainKey": "main", "scope": "per-sender",
                   "agents": [{"id": "main", "workspace": "/w",
                               "model": {"primary": "local/qwen", "fallbacks": []}}]})
        );
    }

    #[test]
    fn acks_skip_what_they_do_not_know() {
        let a = AgentAck {
            run_id: "r".into(),
            session_key: "k".into(),
            agent_id: "main".into(),
            status: "in_flight".into(),
            accepted_at: None,
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"runId": "r", "sessionKey": "k", "agentId": "main", "status": "in_flight"})
        );
    }
}
