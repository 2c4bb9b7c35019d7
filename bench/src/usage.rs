//! The `usage` scenario: `usage.cost` and `sessions.usage` latency over a gateway that has
//! recorded a million runs (issue 39).
//!
//! A real turn is run first, so the recorded outcome has the gateway's own shape; the gateway
//! is stopped and its database given `runs` copies of that run spread over `days` days,
//! `sessions` sessions and four agents, with the usage rollups marked as never built. The
//! gateway then starts as one upgraded from before the rollups would: it builds them from
//! the kept runs (the time to ready says how long that takes), and the methods are timed
//! against the result.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use ipc::gateway::{AgentScope, Method, SessionsUsageParams, UsageCostParams, UsageRange};
use rusqlite::params;
use scripted_model::{wire::Api, ScriptedModel};
use serde_json::{json, Value};

use crate::client::Client;
use crate::spawn::{config, serve_with, Workers};
use crate::stats::summarize;

const DAY_MS: u64 = 86_400_000;
const AGENTS: [&str; 4] = ["main", "a1", "a2", "a3"];

/// What the scenario builds.
#[derive(Debug, Clone, clap::Args)]
pub struct Plan {
    #[arg(long, default_value_t = 1_000_000)]
    pub runs: usize,
    /// Sessions per agent (four agents).
    #[arg(long, default_value_t = 2_500)]
    pub sessions: usize,
    #[arg(long, default_value_t = 365)]
    pub days: u64,
    /// Calls timed per method.
    #[arg(long, default_value_t = 30)]
    pub samples: usize,
}

/// Stops a gateway cleanly (SIGTERM) and waits for it.
async fn stop(mut child: tokio::process::Child, pid: u32) -> anyhow::Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    child.wait().await?;
    Ok(())
}

/// Writes `plan.runs` copies of the recorded run into the gateway db, oldest `plan.days` ago,
/// and forgets that the rollups were built.
fn seed(db: &Path, plan: &Plan, now: u64) -> anyhow::Result<()> {
    let mut conn = rusqlite::Connection::open(db)?;
    let final_json: String = conn
        .query_row(
            "SELECT final_json FROM runs WHERE status = 'ok' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .context("the first turn's outcome")?;
    let tx = conn.transaction()?;
    {
        let mut run = tx.prepare(
            "INSERT INTO runs(run_id, agent_id, session_key, status, accepted_at, started_at,
                              ended_at, final_json, request_hash)
             VALUES (?1, ?2, ?3, 'ok', ?4, ?4, ?5, ?6, 'h')",
        )?;
        let mut session = tx.prepare(
            "INSERT INTO sessions(session_key, agent_id, created_at, updated_at, last_run_id)
             VALUES (?1, ?2, ?3, ?3, ?4)
             ON CONFLICT(session_key) DO UPDATE SET updated_at = max(updated_at, excluded.updated_at)",
        )?;
        let span = plan.days * DAY_MS;
        let start = now - span;
        for i in 0..plan.runs {
            let agent = AGENTS[i % AGENTS.len()];
            let key = format!(
                "agent:{agent}:s{}",
                (i / AGENTS.len()) % plan.sessions.max(1)
            );
            let ended = start + (i as u64 * span) / plan.runs.max(1) as u64;
            let id = format!("seed-{i}");
            run.execute(params![
                id,
                agent,
                key,
                (ended - 50) as i64,
                ended as i64,
                final_json
            ])?;
            session.execute(params![key, agent, ended as i64, id])?;
        }
    }
    tx.execute("DELETE FROM usage_rollup", [])?;
    tx.commit()?;
    Ok(())
}

/// Times `n` calls of `method`.
async fn timed(
    c: &mut Client,
    method: Method,
    params: &impl serde::Serialize,
    n: usize,
) -> anyhow::Result<(Value, Value)> {
    let mut samples = Vec::with_capacity(n);
    let mut last = Value::Null;
    for _ in 0..n {
        let t = Instant::now();
        last = c.call(method, params).await?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok((json!(summarize(&samples)), last))
}

pub async fn run(loopgate: &Path, api: Api, plan: &Plan) -> anyhow::Result<Value> {
    let model = ScriptedModel::start().await?;
    let dir = tempfile::tempdir()?;
    let token = format!("bench-{}", scripted_model::now_micros());
    let agents: Vec<String> = AGENTS.iter().map(|a| a.to_string()).collect();
    let toml = config(&model, api, &agents, &token, Workers::default());
    let (child, pid, url) = serve_with(loopgate, dir.path(), &toml).await?;
    let mut c = Client::connect(&url, Some(&token)).await?;
    let fin = c
        .turn(crate::turn_params(0, "seed", "main"), |_| {})
        .await?;
    crate::check_ok(&fin)?;
    let per_run = fin["result"]["meta"]["agentMeta"]["usage"]["total"]
        .as_u64()
        .context("the first turn's usage")?;
    drop(c);
    stop(child, pid).await?;

    let seeding = Instant::now();
    let now = scripted_model::now_micros() / 1000;
    seed(&dir.path().join("gateway.sqlite"), plan, now)?;
    let seed_s = seeding.elapsed().as_secs_f64();

    let starting = Instant::now();
    let (child, pid, url) = serve_with(loopgate, dir.path(), &toml).await?;
    let start_s = starting.elapsed().as_secs_f64();
    let mut c = Client::connect(&url, Some(&token)).await?;
    let n = plan.samples;
    let cost_default = timed(&mut c, Method::UsageCost, &UsageCostParams::default(), n).await?;
    let all = UsageCostParams {
        agent_scope: Some("all".into()),
        days: Some(ipc::gateway::DaysParam::Number(plan.days as f64 + 1.0)),
        ..UsageCostParams::default()
    };
    let cost_all = timed(&mut c, Method::UsageCost, &all, n).await?;
    let sessions_default = timed(
        &mut c,
        Method::SessionsUsage,
        &SessionsUsageParams::default(),
        n,
    )
    .await?;
    // What the Control UI's usage page asks: every agent, up to 1000 sessions.
    let ui = SessionsUsageParams {
        agent_scope: Some(AgentScope::All),
        range: Some(UsageRange::Month),
        limit: Some(1000),
        ..SessionsUsageParams::default()
    };
    let sessions_ui = timed(&mut c, Method::SessionsUsage, &ui, n).await?;
    let year = SessionsUsageParams {
        range: Some(UsageRange::All),
        limit: Some(1000),
        agent_scope: Some(AgentScope::All),
        ..SessionsUsageParams::default()
    };
    let sessions_all = timed(&mut c, Method::SessionsUsage, &year, n).await?;
    drop(c);
    stop(child, pid).await?;
    // Every seeded run and the first turn, counted once each.
    let counted = cost_all.1["totals"]["totalTokens"].as_u64();
    let expected = per_run * (plan.runs as u64 + 1);
    if counted != Some(expected) {
        anyhow::bail!("usage.cost counted {counted:?} tokens, expected {expected}");
    }
    Ok(json!({
        "scenario": "usage",
        "runs": plan.runs,
        "sessions": plan.sessions * AGENTS.len(),
        "days": plan.days,
        "seed_s": seed_s,
        "start_with_rollup_build_s": start_s,
        "all_time_total_tokens": counted,
        "usage_cost_default": cost_default.0,
        "usage_cost_all_agents_all_days": cost_all.0,
        "sessions_usage_default": sessions_default.0,
        "sessions_usage_ui_30d_1000": sessions_ui.0,
        "sessions_usage_all_days_1000": sessions_all.0,
        "sessions_listed_all_days": sessions_all.1["sessions"].as_array().map(Vec::len),
        "session_count_all_days": sessions_all.1["aggregates"]["sessionCount"].clone(),
    }))
}
