//! `cluster-chaos`: cluster mode under host faults, then a check of what the cluster kept.
//!
//! Three hosts, each a network namespace with its own `nats-server` and `loopgate serve` in
//! cluster mode, on a bridge to this namespace (where the scripted model and the clients
//! are). Each round submits runs across the agents, waits until the victim host is running
//! one of them, then either kills the host (SIGKILL of its gateway, workers and NATS server)
//! or partitions it (its link down, or heavy random packet loss), times each of its agents'
//! failover with a probe run on a survivor, and heals it (restarted on its data, or its link
//! restored). Afterwards [`check`] reads the cluster and asks every gateway. Needs root.

mod check;
mod drive;
mod hosts;
mod net;
mod round;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use drive::Run;
use hosts::{Host, Setup};
use net::Net;
use serde_json::{json, Value};

const HOSTS: usize = 3;
/// Longest wait for a round's runs to end once the victim is back.
const SETTLE_WITHIN: Duration = Duration::from_secs(180);

/// What the chaos run does.
pub struct Options {
    pub loopgate: PathBuf,
    pub runs: usize,
    pub agents: usize,
    pub kills: usize,
    pub partitions: usize,
    pub lease_ttl: u64,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Kill,
    Cut,
    Lossy,
}

/// A small deterministic generator: a run is repeatable from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Dropped in field order: the hosts' processes before their network.
struct World {
    hosts: Vec<Host>,
    net: Net,
    setup: Setup,
    engine: cluster::Engine,
    model: scripted_model::ScriptedModel,
    dir: tempfile::TempDir,
}

pub async fn run(o: Options) -> anyhow::Result<Value> {
    if !nix::unistd::geteuid().is_root() {
        bail!("cluster-chaos needs root (network namespaces, links, tc)");
    }
    let mut w = World::start(&o).await?;
    // Ctrl-C ends the run with the hosts and their network removed (the world is dropped).
    tokio::select! {
        r = rounds_and_check(&mut w, &o) => r,
        _ = tokio::signal::ctrl_c() => bail!("interrupted"),
    }
}

async fn rounds_and_check(w: &mut World, o: &Options) -> anyhow::Result<Value> {
    // Kills and partitions take turns; partitions alternate a cut link and a lossy one.
    let mut faults = Vec::new();
    for i in 0..o.kills.max(o.partitions) {
        if i < o.kills {
            faults.push(Fault::Kill);
        }
        if i < o.partitions {
            faults.push(if i % 2 == 0 { Fault::Cut } else { Fault::Lossy });
        }
    }
    let per_round = o.runs.div_ceil(faults.len().max(1));
    let mut rng = Rng(o.seed | 1);
    let mut runs: Vec<Run> = Vec::new();
    let mut failover: HashMap<&str, Vec<Duration>> = HashMap::new();
    let mut probes_failed = Vec::new();
    for (round, fault) in faults.iter().enumerate() {
        let victim = round % HOSTS;
        let r = w.round(round, victim, *fault, per_round, &mut rng).await?;
        eprintln!(
            "round {round}: {fault:?} of h{} with {} runs; failover {:?}",
            victim + 1,
            r.runs.len(),
            r.failover
        );
        runs.extend(r.runs);
        failover
            .entry(if *fault == Fault::Kill {
                "kill"
            } else {
                "partition"
            })
            .or_default()
            .extend(r.failover);
        probes_failed.extend(r.probes_failed);
    }
    // A run whose client gave up (no answer in time, a dropped connection) may still have
    // been accepted: its key names it in the cluster, and it is checked like any other.
    for r in runs.iter_mut().filter(|r| r.run_id.is_none()) {
        if let Some(rec) = w.engine.run(&r.key).await? {
            r.run_id = Some(rec.run_id);
        }
    }
    let agents: Vec<String> = w.setup.agents.clone();
    let urls: Vec<String> = w.hosts.iter().map(Host::url).collect();
    eprintln!("checking (state under {})", w.setup.dir.display());
    let mut f = check::Findings::default();
    let status = check::outcomes(&mut f, &w.engine, &runs, &urls, &w.setup.token).await?;
    check::journals(&mut f, &w.engine, &agents).await?;
    check::model_requests(&mut f, &w.model.requests(), &runs);
    check::histories(&mut f, &runs, &status, &urls, &w.setup.token).await?;
    let not_accepted: Vec<&str> = runs
        .iter()
        .filter(|r| r.run_id.is_none())
        .map(|r| r.key.as_str())
        .collect();
    if f.violations() > 0 || std::env::var_os("LOOPGATE_CHAOS_KEEP").is_some() {
        // Kept for a look at the logs and databases.
        let dir = std::mem::replace(&mut w.dir, tempfile::tempdir()?);
        eprintln!("kept {}", dir.keep().display());
    }
    let report = json!({
        "violations": f.violations(),
        "findings": f,
        "not_accepted": not_accepted,
        "probes_failed": probes_failed,
        "failover_ms": failover.iter().map(|(k, v)| (k.to_string(), percentiles(v))).collect::<HashMap<_, _>>(),
        "rounds": faults.len(),
        "lease_ttl_s": o.lease_ttl,
    });
    Ok(report)
}

fn percentiles(v: &[Duration]) -> Value {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| {
        ms.get(((ms.len() as f64 - 1.0) * p).round() as usize)
            .copied()
    };
    json!({"n": ms.len(), "p50": at(0.5), "p99": at(0.99), "max": ms.last()})
}

/// What one round did.
struct Round {
    runs: Vec<Run>,
    failover: Vec<Duration>,
    probes_failed: Vec<String>,
}

impl World {
    async fn start(o: &Options) -> anyhow::Result<World> {
        let net = Net::create(HOSTS)?;
        let listener = tokio::net::TcpListener::bind((net.gateway_ip().as_str(), 0)).await?;
        // Long enough replies that a fault lands in the middle of some.
        let model = scripted_model::ScriptedModel::serve(
            listener,
            scripted_model::DefaultReply::Echo {
                prefix: "Echo: ".into(),
                chunks: 8,
                delay_ms: 60,
            },
            "scripted-1".into(),
        )?;
        let dir = tempfile::tempdir()?;
        let setup = Setup {
            loopgate: o.loopgate.clone(),
            nats_server: cluster::local::server_binary(),
            dir: dir.path().to_owned(),
            model_url: format!("http://{}/v1", model.addr()),
            agents: (0..o.agents).map(|i| format!("a{i:02}")).collect(),
            token: format!("chaos-{}", scripted_model::now_micros()),
            lease_ttl: o.lease_ttl,
        };
        let mut hosts = hosts::hosts(&net, &setup, HOSTS);
        let ips: Vec<String> = hosts.iter().map(|h| h.ip.clone()).collect();
        for h in &mut hosts {
            h.start_nats(&net, &setup, &ips)?;
        }
        for h in &mut hosts {
            h.wait_nats()?;
        }
        for h in &mut hosts {
            h.start_gateway(&net, &setup, &ips)?;
        }
        let settings = cluster::Settings {
            nats: hosts.iter().map(Host::nats_url).collect(),
            node: "chaos-checker".into(),
            lease_ttl: Duration::from_secs(o.lease_ttl),
            replicas: 3,
            workspace_max_bytes: 64 << 20,
            auth: Default::default(),
        };
        let engine = cluster::Engine::connect(&settings, &|_| None)
            .await
            .context("the checker cannot reach the cluster")?;
        let w = World {
            hosts,
            net,
            setup,
            engine,
            model,
            dir,
        };
        w.settled().await?;
        Ok(w)
    }

    /// The engine whole again (every stream led, every replica caught up: the next fault
    /// must not find a server still catching up from the last, which is two faults at
    /// once and no quorum), and every agent owned by the gateway that prefers it.
    async fn settled(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETTLE_WITHIN;
        let mut lagging = Vec::new();
        while Instant::now() < deadline {
            match self.engine.lagging_streams().await {
                Ok(l) if l.is_empty() => break,
                Ok(l) => lagging = l,
                Err(e) => lagging = vec![e.to_string()],
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if Instant::now() >= deadline {
            bail!("the engine never healed: {lagging:?}");
        }
        loop {
            let owners = self.owners().await;
            let settled = self.setup.agents.iter().all(|a| {
                let preferred = (1..=HOSTS)
                    .max_by_key(|i| cluster::names::digest(&format!("{a}/h{i}")))
                    .map(|i| format!("h{i}"));
                owners.get(a) == preferred.as_ref()
            });
            if settled {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the agents never settled on their gateways: {owners:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn owners(&self) -> HashMap<String, String> {
        let mut out = HashMap::new();
        for a in &self.setup.agents {
            if let Ok(Some((node, _))) = self.engine.owner(a).await {
                out.insert(a.clone(), node);
            }
        }
        out
    }
}
