//! A run's terminal outcome: the final `agent` result (typed, `ipc::gateway::AgentResult`)
//! serialized once into the bytes that are stored in the gateway db and sent in every final
//! response and replay, and the `agent.wait` result.

use std::sync::Arc;

use ipc::control::{RunStatus, RunTerminal};
use ipc::gateway::{AgentResult, AgentWaitResult};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A run's durable terminal record (also what cluster mode records as a run's outcome).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTerminal {
    pub status: String,
    pub started_at: Option<u64>,
    pub ended_at: u64,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    /// The final `agent` response: `{ok, payload, error?}` as JSON text.
    pub final_json: String,
    /// The session's transcript id, when the worker reported it.
    pub session_id: Option<String>,
    /// Token usage `(input, output, total)`, added to the session's totals.
    pub usage: Option<(u64, u64, u64)>,
    /// What a run that started spent, added to the usage rollups (`None`: it never started,
    /// or its turn was another run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<Box<Spend>>,
}

/// What a run spent beyond its token totals: the model that answered, the cache tokens, how
/// long it ran, the tools it called, whether it failed. Counted in `usage.cost` and
/// `sessions.usage` (`gatewaydb::usage`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    pub provider: String,
    pub model: String,
    pub cache_read: u64,
    pub cache_write: u64,
    pub duration_ms: u64,
    pub tool_calls: u32,
    pub failed: bool,
}

impl Spend {
    /// What `t` spent, if its run started, the turn was its own and it went to a model (a
    /// slash command the gateway answered names none and used nothing).
    pub fn of(t: &RunTerminal) -> Option<Spend> {
        if t.started_at.is_none() || t.carried_by.is_some() {
            return None;
        }
        if t.provider.is_none() && t.model.is_none() && t.usage.is_none() {
            return None;
        }
        let usage = t.usage.unwrap_or_default();
        Some(Spend {
            provider: t.provider.clone().unwrap_or_default(),
            model: t.model.clone().unwrap_or_default(),
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            duration_ms: t.duration_ms,
            tool_calls: t.tool_calls,
            failed: t.status != RunStatus::Ok,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub run_id: String,
    pub status: RunStatus,
    pub started_at: Option<u64>,
    pub ended_at: u64,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    pub result: AgentResult,
    /// `{"ok":true,"payload":<result>}`: what is stored and what every final response and
    /// replay sends.
    pub final_json: Arc<str>,
    pub session_id: Option<String>,
    pub usage: Option<ipc::control::Usage>,
    pub spend: Option<Spend>,
}

/// How a final result is stored.
#[derive(Serialize)]
struct StoredFinalOut<'a> {
    ok: bool,
    payload: &'a AgentResult,
}

/// A stored final result, read without rebuilding it.
#[derive(Deserialize)]
pub struct StoredFinal<'a> {
    #[serde(default)]
    ok: bool,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// The final `agent` response frame, its payload the stored bytes.
#[derive(Serialize)]
pub struct FinalFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RawValue>,
}

impl<'a> StoredFinal<'a> {
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn frame(&self, id: &'a str) -> FinalFrame<'a> {
        FinalFrame {
            kind: "res",
            id,
            ok: self.ok,
            payload: self.payload,
            error: self.error,
        }
    }
}

impl Outcome {
    /// Builds the outcome of a run from its terminal report.
    pub fn from_terminal(t: &RunTerminal, session_key: &str, agent_id: &str) -> Outcome {
        let result = crate::projection::agent_result(t, session_key, agent_id);
        let final_json = serde_json::to_string(&StoredFinalOut {
            ok: true,
            payload: &result,
        })
        .unwrap_or_default();
        Outcome {
            run_id: t.run_id.clone(),
            status: t.status,
            started_at: t.started_at,
            ended_at: t.ended_at,
            error: t.error.clone(),
            stop_reason: t.stop_reason.map(|r| r.as_str().to_owned()),
            result,
            final_json: Arc::from(final_json),
            session_id: t.session_id.clone(),
            usage: t.usage,
            spend: Spend::of(t),
        }
    }

    /// The `agent.wait` result.
    pub fn wait_result(&self) -> AgentWaitResult {
        crate::projection::wait_result(&self.result, self.started_at, self.ended_at)
    }

    pub fn stored(&self) -> StoredTerminal {
        StoredTerminal {
            status: self.status.as_str().to_owned(),
            started_at: self.started_at,
            ended_at: self.ended_at,
            error: self.error.clone(),
            stop_reason: self.stop_reason.clone(),
            final_json: self.final_json.to_string(),
            session_id: self.session_id.clone(),
            usage: self.usage.map(|u| (u.input, u.output, u.total)),
            spend: self.spend.clone().map(Box::new),
        }
    }
}

/// The outcome of a send the gateway answered itself (a slash command): `ok`, its reply
/// the one payload, no model.
pub fn command_terminal(
    run_id: &str,
    (session_key, agent_id): (&str, &str),
    accepted_at: u64,
    ended_at: u64,
    reply: &str,
) -> StoredTerminal {
    let t = RunTerminal {
        payloads: vec![ipc::control::Payload {
            text: reply.to_owned(),
            is_error: false,
        }],
        error: None,
        started_at: Some(accepted_at),
        duration_ms: ended_at.saturating_sub(accepted_at),
        ..RunTerminal::without_work(run_id, RunStatus::Ok, ended_at, String::new(), None)
    };
    Outcome::from_terminal(&t, session_key, agent_id).stored()
}

/// `agent.wait` result of a stored terminal run.
pub fn stored_wait_result(run_id: &str, t: &StoredTerminal) -> AgentWaitResult {
    #[derive(Deserialize)]
    struct Stored {
        payload: AgentResult,
    }
    match serde_json::from_str::<Stored>(&t.final_json) {
        Ok(s) => crate::projection::wait_result(&s.payload, t.started_at, t.ended_at),
        // A row this build cannot read as a result: what the row's own columns say.
        Err(_) => AgentWaitResult {
            run_id: run_id.to_owned(),
            status: match t.status.as_str() {
                "ok" => "ok",
                "timeout" | "aborted" => "timeout",
                _ => "error",
            }
            .into(),
            timeout_phase: None,
            started_at: t.started_at,
            ended_at: Some(t.ended_at),
            error: t.error.clone(),
            stop_reason: t.stop_reason.clone(),
            terminal_receipt: None,
            terminal_reply: None,
            provider: None,
            model: None,
            fallbacks: None,
            provider_started: None,
            carried_by: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::control::{Payload, Usage};

    #[test]
    fn ok_outcome_projects_like_openclaw() {
        let t = RunTerminal {
            run_id: "r".into(),
            status: RunStatus::Ok,
            session_id: Some("s".into()),
            started_at: Some(1),
            ended_at: 5,
            error: None,
            stop_reason: Some(ipc::control::RunStopReason::Stop),
            payloads: vec![Payload {
                text: "hi".into(),
                is_error: false,
            }],
            provider: Some("p".into()),
            model: Some("m".into()),
            usage: Some(Usage {
                input: 3,
                output: 1,
                cache_read: 0,
                cache_write: 0,
                total: 4,
            }),
            duration_ms: 4,
            source_reply_delivered: false,
            fallbacks: 0,
            carried_by: None,
            session_key: None,
            tool_calls: 0,
        };
        let o = Outcome::from_terminal(&t, "agent:main:main", "main");
        let stored = StoredFinal::parse(&o.final_json).unwrap();
        let f: serde_json::Value = serde_json::to_value(stored.frame("req-1")).unwrap();
        assert_eq!(
            (f["type"].as_str(), f["id"].as_str()),
            (Some("res"), Some("req-1"))
        );
        assert_eq!(f["ok"], true);
        let p = &f["payload"];
        assert_eq!(p["status"], "ok");
        assert_eq!(p["summary"], "completed");
        assert_eq!(p["result"]["payloads"][0]["text"], "hi");
        assert_eq!(p["result"]["meta"]["agentMeta"]["usage"]["total"], 4);
        assert_eq!(p["result"]["meta"]["durationMs"], 4);
        let w = serde_json::to_value(o.wait_result()).unwrap();
        assert_eq!(w["status"], "ok");
        assert_eq!(w["startedAt"], 1);
        assert!(w.get("error").is_none());
        assert_eq!(w["terminalReply"]["text"], "hi");
        let stored = o.stored();
        assert_eq!(stored_wait_result("r", &stored), o.wait_result());
    }
}
