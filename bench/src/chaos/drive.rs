//! The clients: runs submitted to a front door (another one if that fails, with the same
//! idempotency key, as a client retries), and probes that time an agent's failover.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use ipc::gateway::{AgentParams, Method};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::client::Client;

/// How long one front door may take to accept a run before the client tries another.
const ACCEPT_WITHIN: Duration = Duration::from_secs(15);
/// How long a client waits for a run's final answer.
const FINAL_WITHIN: Duration = Duration::from_secs(180);

/// One run the chaos run asked for.
#[derive(Debug, Clone)]
pub struct Run {
    pub key: String,
    pub agent: String,
    pub session: String,
    /// Unique per run: how its model requests are told apart.
    pub message: String,
    /// Its run id, once a front door accepted it.
    pub run_id: Option<String>,
}

impl Run {
    pub fn new(key: String, agent: &str, session: &str) -> Run {
        Run {
            message: format!("chaos {key}"),
            key,
            agent: agent.to_owned(),
            session: session.to_owned(),
            run_id: None,
        }
    }

    pub fn params(&self) -> AgentParams {
        AgentParams {
            message: self.message.clone(),
            idempotency_key: self.key.clone(),
            session_key: Some(self.session.clone()),
            agent_id: Some(self.agent.clone()),
            deliver: Some(false),
            ..Default::default()
        }
    }
}

/// Submits `run` at `fronts[0]`, then each next one while a front door fails, until one
/// accepts it. Tells `accepted` the run id, then waits for the final answer (`None` when the
/// front door went away first: the outcome is read from the cluster later).
pub async fn submit(
    run: Run,
    fronts: Vec<String>,
    token: String,
    accepted: oneshot::Sender<anyhow::Result<String>>,
) -> Option<Value> {
    let mut last = anyhow!("no front door");
    for url in fronts {
        let attempt = tokio::time::timeout(ACCEPT_WITHIN, accept(&url, &token, &run)).await;
        match attempt {
            Ok(Ok(Accepted::Ended(run_id, fin))) => {
                let _ = accepted.send(Ok(run_id));
                return Some(fin);
            }
            Ok(Ok(Accepted::Running(mut client, id, run_id))) => {
                let _ = accepted.send(Ok(run_id));
                let done = tokio::time::timeout(FINAL_WITHIN, client.response(&id)).await;
                return done.ok()?.ok().map(|f| f["payload"].clone());
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = anyhow!("{url} did not accept within {ACCEPT_WITHIN:?}"),
        }
    }
    let _ = accepted.send(Err(last));
    None
}

enum Accepted {
    /// Accepted now: the client, its request id and the run id.
    Running(Client, String, String),
    /// An earlier attempt's run already ended: its outcome is the answer.
    Ended(String, Value),
}

async fn accept(url: &str, token: &str, run: &Run) -> anyhow::Result<Accepted> {
    let mut c = Client::connect(url, Some(token)).await?;
    let id = c.send(Method::Agent, &run.params()).await?;
    let r = c.response(&id).await?;
    if r["ok"] != true {
        bail!("{url} refused {}: {}", run.key, r["error"]);
    }
    let run_id = r["payload"]["runId"]
        .as_str()
        .ok_or_else(|| anyhow!("no runId in {r}"))?
        .to_owned();
    if r["payload"]["status"] != "accepted" {
        return Ok(Accepted::Ended(run_id, r["payload"].clone()));
    }
    Ok(Accepted::Running(c, id, run_id))
}

/// `agent.wait` for `run_id` until it ended or `deadline`.
async fn wait(url: &str, token: &str, run_id: &str, deadline: Instant) -> anyhow::Result<Value> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("{run_id} did not end within {FINAL_WITHIN:?}");
        }
        let attempt = async {
            let mut c = Client::connect(url, Some(token)).await?;
            let params = ipc::gateway::AgentWaitParams {
                run_id: run_id.to_owned(),
                timeout_ms: Some(left.as_millis() as u64),
            };
            c.call(Method::AgentWait, &params).await
        };
        match tokio::time::timeout(left, attempt).await {
            Ok(Ok(w)) if w["status"] == "timeout" => continue,
            Ok(Ok(w)) => return Ok(w),
            Ok(Err(e)) if retryable(&e) => tokio::time::sleep(RETRY_AFTER).await,
            Ok(Err(e)) => return Err(e),
            Err(_) => bail!("{run_id} did not end within {FINAL_WITHIN:?}"),
        }
    }
}

/// How long a client waits before asking again after a retryable refusal.
const RETRY_AFTER: Duration = Duration::from_millis(250);

fn retryable(e: &anyhow::Error) -> bool {
    e.to_string().contains("\"retryable\":true")
}

/// Probes an agent at `url` until a run of it completes `ok`: a run that ends `error`
/// (its owner was lost under it) is followed by another with a new key, as a user sends
/// the message again. Returns every run it made (with their ids) and the time from `since`
/// to the first `ok`.
pub async fn probe(
    url: &str,
    token: &str,
    first: &Run,
    since: Instant,
) -> (Vec<Run>, anyhow::Result<Duration>) {
    let deadline = Instant::now() + FINAL_WITHIN;
    let mut runs = Vec::new();
    let mut n = 0;
    loop {
        n += 1;
        let mut run = match n {
            1 => first.clone(),
            n => Run::new(format!("{}.{n}", first.key), &first.agent, &first.session),
        };
        let done = probe_once(url, token, &run, deadline).await;
        match done {
            Ok((run_id, fin)) => {
                run.run_id = Some(run_id);
                runs.push(run);
                if fin["status"] == "ok" {
                    return (runs, Ok(since.elapsed()));
                }
                if Instant::now() >= deadline {
                    let e = anyhow!("no run of {} ended ok within {FINAL_WITHIN:?}", first.agent);
                    return (runs, Err(e));
                }
            }
            Err(e) => {
                runs.push(run);
                return (runs, Err(e));
            }
        }
    }
}

/// One probe run to its end: its run id and final answer.
async fn probe_once(
    url: &str,
    token: &str,
    run: &Run,
    deadline: Instant,
) -> anyhow::Result<(String, Value)> {
    // As a client does: a retryable refusal (the engine electing a leader) is asked again
    // with the same key after a moment.
    let fin = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = async {
            let mut c = Client::connect(url, Some(token)).await?;
            c.turn(run.params(), |_| {}).await
        };
        match tokio::time::timeout(left, attempt).await {
            Ok(Ok(fin)) => break fin,
            Ok(Err(e)) if retryable(&e) && Instant::now() < deadline => {
                tokio::time::sleep(RETRY_AFTER).await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => bail!("probe {} did not end within {FINAL_WITHIN:?}", run.key),
        }
    };
    let run_id = fin["runId"].as_str().unwrap_or_default().to_owned();
    // A retry whose first attempt was recorded after all: the run is under way.
    let fin = match fin["status"].as_str() {
        Some("in_flight" | "accepted") => wait(url, token, &run_id, deadline).await?,
        _ => fin,
    };
    Ok((run_id, fin))
}
