//! The `cron` scenario (issue 40): a gateway loaded with `jobs` scheduled jobs (daily, none
//! due during the run), its idle CPU and memory with them, then `fires` one-shot jobs due
//! over `spread_ms` among them, each one's fire lag (the `started` event's `runAtMs` less
//! its time) as the scheduler sees it.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ipc::gateway::Method;
use scripted_model::wire::Api;
use serde_json::{json, Value};

use crate::client::Client;
use crate::procs;
use crate::spawn::Spawned;
use crate::stats::summarize;

/// What the scenario builds.
#[derive(Debug, Clone, clap::Args)]
pub struct Plan {
    /// Jobs loaded (daily, none due while measuring).
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// One-shot jobs that fire while measured.
    #[arg(long, default_value_t = 200)]
    fires: usize,
    /// Over how long the one-shots come due.
    #[arg(long, default_value_t = 10_000)]
    spread_ms: u64,
    /// How long idle CPU is measured.
    #[arg(long, default_value_t = 20)]
    idle_seconds: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub async fn run(loopgate: &Path, api: Api, plan: &Plan) -> anyhow::Result<Value> {
    let g = Spawned::start(loopgate, &["main".to_owned()], None, api).await?;
    let mut c = Client::connect(&g.url, Some(&g.token)).await?;
    let started = Instant::now();
    for i in 0..plan.jobs {
        let job = json!({"name": format!("load-{i}"), "schedule": {"kind": "every", "everyMs": 86_400_000},
            "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": format!("load {i}")}});
        c.call(Method::CronAdd, &job).await.context("cron.add")?;
    }
    let add_ms = started.elapsed().as_secs_f64() * 1000.0 / plan.jobs.max(1) as f64;
    let rss_loaded = procs::total_rss(&procs::snapshot(g.pid));
    let before = procs::snapshot(g.pid);
    let idle_started = Instant::now();
    tokio::time::sleep(Duration::from_secs(plan.idle_seconds)).await;
    let after = procs::snapshot(g.pid);
    let idle_cpu_pct =
        procs::cpu_between(&before, &after) / idle_started.elapsed().as_secs_f64() * 100.0;
    // A listener of its own: it reads every event from here on.
    let mut events = Client::connect(&g.url, Some(&g.token)).await?;
    let first = now_ms() + 3_000;
    let mut due: HashMap<String, u64> = HashMap::new();
    for i in 0..plan.fires {
        let at = first + plan.spread_ms * i as u64 / plan.fires.max(1) as u64;
        let job = json!({"name": format!("fire-{i}"), "schedule": {"kind": "at", "at": ipc::calendar::iso_millis(at)},
            "sessionTarget": "isolated", "payload": {"kind": "agentTurn", "message": format!("fire {i}")}});
        let added = c.call(Method::CronAdd, &job).await.context("cron.add")?;
        let id = added["id"].as_str().unwrap_or_default().to_owned();
        due.insert(id, at);
    }
    let mut lags_us = Vec::with_capacity(plan.fires);
    let deadline = Instant::now() + Duration::from_millis(plan.spread_ms) + Duration::from_secs(60);
    while lags_us.len() < plan.fires && Instant::now() < deadline {
        let f = tokio::time::timeout(Duration::from_secs(60), events.read()).await??;
        let p = &f.value["payload"];
        if f.value["event"] == "cron" && p["action"] == "started" {
            if let (Some(at), Some(ran)) = (
                p["jobId"].as_str().and_then(|j| due.get(j)),
                p["runAtMs"].as_u64(),
            ) {
                lags_us.push((ran.saturating_sub(*at) * 1000) as f64);
            }
        }
    }
    let lag = summarize(&lags_us);
    Ok(json!({
        "scenario": "cron",
        "jobs": plan.jobs,
        "add_ms_per_job": add_ms,
        "rss_loaded_mb": rss_loaded as f64 / 1048576.0,
        "idle_cpu_pct_of_a_core": idle_cpu_pct,
        "fires": plan.fires,
        "fired": lags_us.len(),
        "fire_lag_ms": lag,
    }))
}
