//! `cluster-throughput`: cluster mode's cost and throughput. Three NATS servers (one
//! JetStream cluster, R3) and `gateways` gateways on this host against one scripted model;
//! once the agents settled on their owners, one `throughput` client per gateway at once.
//! CPU is counted over every gateway, its workers and the three NATS servers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cluster::local::LocalCluster;
use scripted_model::{DefaultReply, ScriptedModel};
use serde_json::{json, Value};

use crate::spawn::Member;
use crate::{procs, Target};

/// Longest wait for the agents to settle on their owners.
const SETTLE_WITHIN: Duration = Duration::from_secs(90);
/// Owners unchanged this long count as settled (hand-overs happen within a lease round).
const STABLE_FOR: Duration = Duration::from_secs(12);

pub struct Options {
    pub loopgate: PathBuf,
    pub gateways: usize,
    pub sessions: usize,
    pub turns: usize,
    pub agents: Vec<String>,
}

pub async fn run(o: Options) -> anyhow::Result<Value> {
    if o.gateways == 0 {
        bail!("--gateways must be at least 1");
    }
    let dir = tempfile::tempdir()?;
    let nats_dir = dir.path().to_owned();
    let nats = tokio::task::spawn_blocking(move || LocalCluster::start(3, &nats_dir))
        .await?
        .map_err(|e| anyhow::anyhow!(e))
        .context("cannot start the NATS servers (scripts/install-nats)")?;
    let model = ScriptedModel::start().await?;
    model.set_default(DefaultReply::Echo {
        prefix: "Echo: ".into(),
        chunks: 4,
        delay_ms: 0,
    });
    let urls = nats.urls_toml();
    let token = format!("bench-{}", scripted_model::now_micros());
    let mut members = Vec::new();
    for i in 1..=o.gateways {
        let section = format!("\n[cluster]\nnats = [{urls}]\nnode = \"h{i}\"\n");
        members.push(Member::start(&o.loopgate, &model, &o.agents, &token, &section).await?);
    }
    settle(&o, &members, &token).await?;

    let nats_pids: Vec<u32> = nats.servers.iter().filter_map(|s| s.pid()).collect();
    let snapshot = |members: &[Member]| -> HashMap<u32, (f64, u64)> {
        let mut all: HashMap<u32, (f64, u64)> = members
            .iter()
            .flat_map(|m| procs::snapshot(m.pid))
            .collect();
        all.extend(
            nats_pids
                .iter()
                .filter_map(|p| procs::sample(*p).map(|s| (*p, s))),
        );
        all
    };
    let monitors: Vec<u16> = nats.servers.iter().map(|s| s.monitor_port).collect();
    let engine_before = engine_counts(&monitors);
    let before = snapshot(&members);
    let start = Instant::now();
    let runs = members.iter().map(|m| {
        let t = Target {
            url: m.url.clone(),
            token: Some(token.clone()),
            pid: None,
            agents: o.agents.clone(),
            _spawned: None,
        };
        async move { crate::throughput(&t, o.sessions, o.turns).await }
    });
    let reports = futures_util::future::join_all(runs).await;
    let elapsed = start.elapsed().as_secs_f64();
    let after = snapshot(&members);
    let engine_after = engine_counts(&monitors);
    let mut completed = 0u64;
    for r in &reports {
        let r = r.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        completed += r["completed"].as_u64().unwrap_or(0);
    }
    let cpu_all = procs::cpu_between(&before, &after);
    let nats_before: HashMap<u32, (f64, u64)> = before
        .iter()
        .filter(|(p, _)| nats_pids.contains(p))
        .map(|(p, s)| (*p, *s))
        .collect();
    let nats_after: HashMap<u32, (f64, u64)> = after
        .iter()
        .filter(|(p, _)| nats_pids.contains(p))
        .map(|(p, s)| (*p, *s))
        .collect();
    let cpu_nats = procs::cpu_between(&nats_before, &nats_after);
    let per = |cpu: f64| cpu * 1000.0 / completed.max(1) as f64;
    Ok(json!({
        "scenario": "cluster-throughput",
        "gateways": o.gateways,
        "sessions_per_gateway": o.sessions,
        "agents": o.agents.len(),
        "completed": completed,
        "elapsed_s": elapsed,
        "turns_per_s": completed as f64 / elapsed,
        "cpu_ms_per_turn": per(cpu_all),
        "nats_cpu_ms_per_turn": per(cpu_nats),
        // JetStream API requests the servers served (reads, writes, acks are not), and
        // journal records written, per turn.
        "engine_api_requests_per_turn": (engine_after.0 - engine_before.0) as f64 / completed.max(1) as f64,
        "journal_records_per_turn": (engine_after.1 - engine_before.1) as f64 / completed.max(1) as f64,
        "per_gateway": reports.into_iter().filter_map(Result::ok).map(|r| json!({
            "turns_per_s": r["turns_per_s"], "turn_latency": r["turn_latency"],
        })).collect::<Vec<_>>(),
    }))
}

/// JetStream API requests served by all the servers, and the journal stream's last sequence.
fn engine_counts(monitors: &[u16]) -> (u64, u64) {
    let (mut api, mut journal) = (0, 0);
    for port in monitors {
        let Some(j) = cluster::local::monitor_json("127.0.0.1", *port, "/jsz?streams=true") else {
            continue;
        };
        api += j["api"]["total"].as_u64().unwrap_or(0);
        for account in j["account_details"].as_array().into_iter().flatten() {
            for s in account["stream_detail"].as_array().into_iter().flatten() {
                if s["name"] == cluster::names::TX_STREAM {
                    journal = journal.max(s["state"]["last_seq"].as_u64().unwrap_or(0));
                }
            }
        }
    }
    (api, journal)
}

/// Waits until every agent has an owner, every gateway is a member, and the owners stayed
/// the same for [`STABLE_FOR`] (agents move to their preferred gateways when idle): one
/// turn per agent first, so that each agent's owner has its worker up.
async fn settle(o: &Options, members: &[Member], token: &str) -> anyhow::Result<()> {
    let first = &members[0];
    let mut c = crate::client::Client::connect(&first.url, Some(token)).await?;
    for (n, agent) in o.agents.iter().enumerate() {
        let fin = c
            .turn(
                crate::turn_params(
                    n,
                    &format!("settle-{}", scripted_model::now_micros()),
                    agent,
                ),
                |_| {},
            )
            .await?;
        crate::check_ok(&fin)?;
    }
    let deadline = Instant::now() + SETTLE_WITHIN;
    let mut last: Option<(Vec<Option<String>>, Instant)> = None;
    loop {
        let owners = owners(&o.loopgate, first, o.gateways).await?;
        match (&owners, &last) {
            (Some(now), Some((before, since))) if now == before => {
                if since.elapsed() >= STABLE_FOR {
                    return Ok(());
                }
            }
            (Some(now), _) => last = Some((now.clone(), Instant::now())),
            (None, _) => last = None,
        }
        if Instant::now() > deadline {
            bail!("the agents did not settle on their owners within {SETTLE_WITHIN:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each agent's owner as `loopgate status --json` on `m` shows it, once every agent has one
/// and all `gateways` are members (`None` before).
async fn owners(
    loopgate: &std::path::Path,
    m: &Member,
    gateways: usize,
) -> anyhow::Result<Option<Vec<Option<String>>>> {
    let out = tokio::process::Command::new(loopgate)
        .args(["status", "--json", "--state-dir"])
        .arg(&m.state)
        .output()
        .await?;
    let s: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let c = &s["cluster"];
    let members = c["members"].as_array().map_or(0, Vec::len);
    let owners: Vec<Option<String>> = c["agents"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x["owner"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let ready = members == gateways && !owners.is_empty() && owners.iter().all(Option::is_some);
    Ok(ready.then_some(owners))
}
