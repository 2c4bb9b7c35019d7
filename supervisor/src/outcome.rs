//! A run's terminal outcome and its wire projections: the final `agent` response and the
//! `agent.wait` result. Built once when a run ends; stored in the gateway db for replay.

use ipc::control::{RunStatus, RunTerminal};
use ipc::gateway::ResponseFrame;
use serde_json::{json, Map, Value};

use crate::gatewaydb::StoredTerminal;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub run_id: String,
    pub status: RunStatus,
    pub started_at: Option<u64>,
    pub ended_at: u64,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    /// `{ok, payload, error?}` of the final `agent` response.
    pub final_json: Value,
    pub session_id: Option<String>,
    pub usage: Option<ipc::control::Usage>,
}

/// `agent.wait` / final `status` string for a run status. Aborted runs report `timeout` with
/// their stop reason, as OpenClaw does.
pub fn wire_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Ok => "ok",
        RunStatus::Timeout | RunStatus::Aborted => "timeout",
        RunStatus::Error | RunStatus::Unknown => "error",
    }
}

impl Outcome {
    /// Builds the outcome of a run from the worker's terminal report.
    pub fn from_terminal(t: &RunTerminal, session_key: &str, agent_id: &str) -> Outcome {
        let status = wire_status(t.status);
        let summary = match t.status {
            RunStatus::Ok => "completed",
            RunStatus::Timeout | RunStatus::Aborted => "aborted",
            RunStatus::Error | RunStatus::Unknown => "failed",
        };
        let mut payloads: Vec<Value> = t
            .payloads
            .iter()
            .map(|p| {
                if p.is_error {
                    json!({"text": p.text, "isError": true})
                } else {
                    json!({"text": p.text})
                }
            })
            .collect();
        if payloads.is_empty() {
            if let Some(err) = &t.error {
                payloads.push(json!({"text": err, "isError": true}));
            }
        }
        let mut agent_meta = Map::new();
        if let Some(s) = &t.session_id {
            agent_meta.insert("sessionId".into(), json!(s));
        }
        agent_meta.insert("sessionKey".into(), json!(session_key));
        agent_meta.insert("agentId".into(), json!(agent_id));
        if let Some(p) = &t.provider {
            agent_meta.insert("provider".into(), json!(p));
        }
        if let Some(m) = &t.model {
            agent_meta.insert("model".into(), json!(m));
        }
        if let Some(u) = &t.usage {
            agent_meta.insert(
                "usage".into(),
                json!({"input": u.input, "output": u.output, "cacheRead": u.cache_read,
                       "cacheWrite": u.cache_write, "total": u.total}),
            );
        }
        let mut meta = Map::new();
        meta.insert("durationMs".into(), json!(t.duration_ms));
        meta.insert("agentMeta".into(), Value::Object(agent_meta.clone()));
        // Flat copies for clients that read them from `meta` directly.
        for k in ["provider", "model", "usage"] {
            if let Some(v) = agent_meta.get(k) {
                meta.insert(k.into(), v.clone());
            }
        }
        if let Some(sr) = &t.stop_reason {
            meta.insert("stopReason".into(), json!(sr));
        }
        if matches!(t.status, RunStatus::Aborted) {
            meta.insert("aborted".into(), json!(true));
        }
        if t.source_reply_delivered {
            meta.insert(
                "terminalReceipt".into(),
                json!({"sourceReplyDelivered": true}),
            );
        }
        // What the run finally said: its payloads' text, or that it chose silence.
        if t.status == RunStatus::Ok {
            let texts: Vec<&str> = t.payloads.iter().map(|p| p.text.as_str()).collect();
            let reply = if texts.is_empty() {
                json!({"disposition": "silent"})
            } else {
                json!({"disposition": "visible", "text": texts.join("\n\n")})
            };
            meta.insert("terminalReply".into(), reply);
        }
        if let Some(err) = &t.error {
            let kind = match t.status {
                RunStatus::Timeout => "timeout",
                RunStatus::Aborted => "aborted",
                _ => "error",
            };
            meta.insert("error".into(), json!({"kind": kind, "message": err}));
        }
        let mut payload = Map::new();
        payload.insert("runId".into(), json!(t.run_id));
        payload.insert("status".into(), json!(status));
        payload.insert("summary".into(), json!(summary));
        if let Some(sr) = &t.stop_reason {
            payload.insert("stopReason".into(), json!(sr));
        }
        if let Some(err) = &t.error {
            payload.insert("error".into(), json!(err));
        }
        payload.insert(
            "result".into(),
            json!({"payloads": payloads, "meta": Value::Object(meta)}),
        );
        Outcome {
            run_id: t.run_id.clone(),
            status: t.status,
            started_at: t.started_at,
            ended_at: t.ended_at,
            error: t.error.clone(),
            stop_reason: t.stop_reason.clone(),
            final_json: json!({"ok": true, "payload": Value::Object(payload)}),
            session_id: t.session_id.clone(),
            usage: t.usage,
        }
    }

    /// The final `agent` response frame for request `id`.
    pub fn final_frame(&self, id: &str) -> ResponseFrame {
        frame_from_final_json(id, &self.final_json)
    }

    /// The `agent.wait` result.
    pub fn wait_json(&self) -> Value {
        wait_json(
            &self.run_id,
            wire_status(self.status),
            self.started_at,
            self.ended_at,
            self.error.as_deref(),
            self.stop_reason.as_deref(),
            terminal_meta(&self.final_json),
        )
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
        }
    }
}

/// `agent.wait` result of a stored terminal run.
pub fn stored_wait_json(run_id: &str, t: &StoredTerminal) -> Value {
    let status = match t.status.as_str() {
        "ok" => "ok",
        "timeout" | "aborted" => "timeout",
        _ => "error",
    };
    wait_json(
        run_id,
        status,
        t.started_at,
        t.ended_at,
        t.error.as_deref(),
        t.stop_reason.as_deref(),
        serde_json::from_str::<Value>(&t.final_json)
            .map(|v| terminal_meta(&v))
            .unwrap_or_default(),
    )
}

/// The `terminalReceipt` and `terminalReply` recorded in a final response, if any.
fn terminal_meta(final_json: &Value) -> Vec<(&'static str, Value)> {
    ["terminalReceipt", "terminalReply"]
        .into_iter()
        .filter_map(|k| {
            final_json
                .pointer(&format!("/payload/result/meta/{k}"))
                .map(|v| (k, v.clone()))
        })
        .collect()
}

fn wait_json(
    run_id: &str,
    status: &str,
    started_at: Option<u64>,
    ended_at: u64,
    error: Option<&str>,
    stop_reason: Option<&str>,
    terminal: Vec<(&'static str, Value)>,
) -> Value {
    let mut v = Map::new();
    v.insert("runId".into(), json!(run_id));
    v.insert("status".into(), json!(status));
    if let Some(s) = started_at {
        v.insert("startedAt".into(), json!(s));
    }
    v.insert("endedAt".into(), json!(ended_at));
    if let Some(e) = error {
        v.insert("error".into(), json!(e));
    }
    if let Some(s) = stop_reason {
        v.insert("stopReason".into(), json!(s));
    }
    for (k, val) in terminal {
        v.insert(k.into(), val);
    }
    Value::Object(v)
}

/// Rebuilds a response frame from stored `{ok, payload, error?}` JSON.
pub fn frame_from_final_json(id: &str, v: &Value) -> ResponseFrame {
    ResponseFrame {
        kind: "res".into(),
        id: id.into(),
        ok: v.get("ok").and_then(Value::as_bool).unwrap_or(false),
        payload: v.get("payload").cloned(),
        error: v
            .get("error")
            .and_then(|e| serde_json::from_value(e.clone()).ok()),
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
            stop_reason: Some("stop".into()),
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
        };
        let o = Outcome::from_terminal(&t, "agent:main:main", "main");
        let f = o.final_frame("req-1");
        assert!(f.ok);
        let p = f.payload.unwrap();
        assert_eq!(p["status"], "ok");
        assert_eq!(p["summary"], "completed");
        assert_eq!(p["result"]["payloads"][0]["text"], "hi");
        assert_eq!(p["result"]["meta"]["agentMeta"]["usage"]["total"], 4);
        assert_eq!(p["result"]["meta"]["durationMs"], 4);
        let w = o.wait_json();
        assert_eq!(w["status"], "ok");
        assert_eq!(w["startedAt"], 1);
        assert!(w.get("error").is_none());
        let stored = o.stored();
        assert_eq!(stored_wait_json("r", &stored), w);
    }
}
