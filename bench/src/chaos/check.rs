//! What the chaos run checks once every host is back: the cluster's records, the journals,
//! the model's requests and what every gateway answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use ipc::gateway::{ChatHistoryParams, Method};
use serde::Serialize;
use serde_json::Value;

use super::drive::Run;
use crate::client::Client;

const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// Everything counted; every field but the totals must be zero.
#[derive(Debug, Default, Serialize)]
pub struct Findings {
    pub runs_accepted: usize,
    pub runs_ok: usize,
    pub runs_error: usize,
    /// Why runs ended `error`, with how many did.
    pub errors: BTreeMap<String, usize>,
    /// Accepted runs the cluster has no outcome for.
    pub missing_outcomes: Vec<String>,
    /// Keys whose replay on some gateway named another run or another outcome.
    pub replay_mismatches: Vec<String>,
    /// Journal records written under an epoch a takeover before them had fenced.
    pub fenced_commits: usize,
    /// Each of them: agent, sequence, kind, node and epoch.
    pub fenced: Vec<String>,
    pub journal_records: usize,
    pub journal_takeovers: usize,
    /// Runs whose model requests came from more than one host (run twice).
    pub duplicate_executions: Vec<String>,
    /// Model requests repeated by the same host for one run (model retries; allowed).
    pub retried_model_requests: usize,
    /// Sessions whose history differs between gateways.
    pub history_mismatches: Vec<String>,
    /// Runs whose message is in its session's history more than once, or, ended `ok`,
    /// not at all.
    pub transcript_errors: Vec<String>,
}

impl Findings {
    pub fn violations(&self) -> usize {
        self.missing_outcomes.len()
            + self.replay_mismatches.len()
            + self.fenced_commits
            + self.duplicate_executions.len()
            + self.history_mismatches.len()
            + self.transcript_errors.len()
    }
}

/// Outcomes in the cluster, and each key replayed on every gateway.
pub async fn outcomes(
    f: &mut Findings,
    engine: &cluster::Engine,
    runs: &[Run],
    urls: &[String],
    token: &str,
) -> anyhow::Result<HashMap<String, String>> {
    let mut status = HashMap::new();
    for r in runs {
        let Some(run_id) = &r.run_id else { continue };
        f.runs_accepted += 1;
        match engine.outcome(run_id).await? {
            Some(o) => {
                let t: Value = serde_json::from_str(o.terminal.get())?;
                let s = t["status"].as_str().unwrap_or("?").to_owned();
                if s == "ok" {
                    f.runs_ok += 1;
                } else {
                    f.runs_error += 1;
                    let why = t["error"].as_str().unwrap_or("?");
                    *f.errors.entry(gist(why)).or_default() += 1;
                }
                status.insert(r.key.clone(), s);
            }
            None => f.missing_outcomes.push(r.key.clone()),
        }
    }
    for url in urls {
        let mut c = Client::connect(url, Some(token)).await?;
        for r in runs.iter().filter(|r| r.run_id.is_some()) {
            let replay = tokio::time::timeout(ANSWER_WITHIN, c.turn(r.params(), |_| {})).await;
            let same = match replay {
                Ok(Ok(fin)) => {
                    fin["runId"].as_str() == r.run_id.as_deref()
                        && fin["status"].as_str() == status.get(&r.key).map(String::as_str)
                }
                _ => false,
            };
            if !same {
                f.replay_mismatches.push(format!("{} on {url}", r.key));
            }
        }
    }
    Ok(status)
}

/// No record of a fenced owner in any agent's journal.
pub async fn journals(
    f: &mut Findings,
    engine: &cluster::Engine,
    agents: &[String],
) -> anyhow::Result<()> {
    for a in agents {
        let j = engine.journal_read(a, 0).await?;
        f.journal_records += j.records.len();
        f.journal_takeovers += j
            .records
            .iter()
            .filter(|r| r.kind == cluster::journal::Kind::Takeover)
            .count();
        for r in cluster::journal::fenced(&j.records) {
            f.fenced_commits += 1;
            f.fenced.push(format!(
                "{a} #{} {:?} by {} at epoch {}",
                r.seq, r.kind, r.node, r.epoch
            ));
        }
    }
    Ok(())
}

/// Each run's model requests: from one host only.
pub fn model_requests(f: &mut Findings, requests: &[scripted_model::Recorded], runs: &[Run]) {
    let mut by_message: HashMap<String, Vec<String>> = HashMap::new();
    for r in requests {
        let Some(last) = r.body["messages"].as_array().and_then(|m| m.last()) else {
            continue;
        };
        if last["role"] != "user" {
            continue;
        }
        let host = r.authorization.clone().unwrap_or_default();
        by_message
            .entry(text(&last["content"]))
            .or_default()
            .push(host);
    }
    for run in runs {
        let Some(hosts) = by_message.get(&run.message) else {
            continue;
        };
        let distinct: BTreeSet<&String> = hosts.iter().collect();
        if distinct.len() > 1 {
            f.duplicate_executions
                .push(format!("{} from {distinct:?}", run.key));
        }
        f.retried_model_requests += hosts.len() - distinct.len();
    }
}

/// A message's text, whether a string or content parts.
fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Every session's history is the same on every gateway, with each run's message at most
/// once (exactly once if it ended `ok`).
pub async fn histories(
    f: &mut Findings,
    runs: &[Run],
    status: &HashMap<String, String>,
    urls: &[String],
    token: &str,
) -> anyhow::Result<()> {
    let mut sessions: BTreeMap<(String, String), Vec<&Run>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.run_id.is_some()) {
        sessions
            .entry((r.agent.clone(), r.session.clone()))
            .or_default()
            .push(r);
    }
    let mut clients = Vec::new();
    for url in urls {
        clients.push(Client::connect(url, Some(token)).await?);
    }
    for ((agent, session), in_session) in &sessions {
        let mut seen: Vec<Vec<String>> = Vec::new();
        for c in &mut clients {
            let params = ChatHistoryParams {
                session_key: session.clone(),
                agent_id: Some(agent.clone()),
                limit: Some(1000),
                ..Default::default()
            };
            let h =
                tokio::time::timeout(ANSWER_WITHIN, c.call(Method::ChatHistory, &params)).await??;
            seen.push(
                h["messages"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .map(|m| format!("{}: {}", m["role"], text(&m["content"])))
                            .collect()
                    })
                    .unwrap_or_default(),
            );
        }
        if seen.windows(2).any(|w| w[0] != w[1]) {
            f.history_mismatches.push(format!("{agent}/{session}"));
        }
        let first = seen.first().cloned().unwrap_or_default();
        for r in in_session {
            let line = format!("\"user\": {}", r.message);
            let n = first.iter().filter(|l| **l == line).count();
            let ok = status.get(&r.key).is_some_and(|s| s == "ok");
            if n > 1 || (ok && n == 0) {
                f.transcript_errors
                    .push(format!("{}: in its history {n} times", r.key));
            }
        }
    }
    Ok(())
}

/// An error's gist, so that like errors count together: its first 80 characters with each
/// run of digits (epochs, exit codes, ids) as `#` and each quoted name (agents) as `"…"`.
fn gist(why: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in why.chars() {
        match c {
            '"' if quoted => quoted = false,
            '"' => {
                quoted = true;
                out.push_str("\"…\"");
            }
            _ if quoted => {}
            '0'..='9' if out.ends_with('#') => {}
            '0'..='9' => out.push('#'),
            _ => out.push(c),
        }
        if out.chars().count() >= 80 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn like_errors_share_a_gist() {
        let a = super::gist("the gateway running this run (h1, epoch 1187) was lost");
        let b = super::gist("the gateway running this run (h1, epoch 3) was lost");
        assert_eq!(a, b);
        assert_eq!(a, "the gateway running this run (h#, epoch #) was lost");
        let w = super::gist(r#"worker for agent "a00" exited during the run: stopped"#);
        assert_eq!(w, r#"worker for agent "…" exited during the run: stopped"#);
    }
}
