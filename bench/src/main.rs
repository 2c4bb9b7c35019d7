//! `loopgate-bench`: measures a Gateway protocol v4 gateway over WebSocket, as any client sees
//! it. With `--spawn` it starts its own scripted model and `loopgate serve` in a temp state
//! dir; otherwise point `--url` / `--token` at any OpenClaw-compatible gateway (whose model
//! should be a `loopgate-scripted-model`; `--gateway-pid` enables CPU and RSS figures).
//!
//! Scenarios: `latency`, `throughput`, `stream`, `startup`, `soak`, `crash-recovery`,
//! `model-ceiling`, `floor`, `density`, `session-length`, `usage`,
//! and `smoke` (all of them, tiny, for CI). Output: a table, or JSON with `--json`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod chaos;
mod client;
mod clusterbench;
mod cronbench;
mod floor;
mod procs;
mod scale;
mod spawn;
mod stats;
mod usage;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use client::Client;
use stats::summarize;

#[derive(Parser)]
#[command(
    name = "loopgate-bench",
    version,
    about = "Benchmark a Gateway protocol v4 gateway"
)]
struct Args {
    /// Start a scripted model and `loopgate serve` in a temp state dir and measure that.
    #[arg(long)]
    spawn: bool,
    /// The `loopgate` binary for --spawn and `startup` (default: next to this binary).
    #[arg(long)]
    loopgate: Option<PathBuf>,
    /// Gateway WebSocket URL (without --spawn).
    #[arg(long, default_value = "ws://127.0.0.1:18789/")]
    url: String,
    /// Gateway token (without --spawn).
    #[arg(long, env = "LOOPGATE_BENCH_TOKEN")]
    token: Option<String>,
    /// The gateway's main pid, for CPU and RSS (with --spawn it is known).
    #[arg(long)]
    gateway_pid: Option<u32>,
    /// Agents to spread sessions over (with --spawn they are created).
    #[arg(long, value_delimiter = ',', default_value = "main")]
    agents: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// With --spawn: the wire API the agent speaks to the scripted model
    /// (`openai-completions`, `openai-responses`, `anthropic-messages`, `ollama`).
    #[arg(long, default_value = "openai-completions", value_parser = parse_api)]
    api: scripted_model::wire::Api,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Clone)]
enum Scenario {
    /// Sequential turns on one session: agent -> final response.
    Latency {
        #[arg(long, default_value_t = 500)]
        turns: usize,
        #[arg(long, default_value_t = 20)]
        warmup: usize,
    },
    /// N sessions x M turns at once, sessions spread over the agents.
    Throughput {
        #[arg(long, default_value_t = 16)]
        sessions: usize,
        #[arg(long, default_value_t = 200)]
        turns: usize,
    },
    /// Long replies in many chunks stamped with their send time: chunk -> client delivery.
    Stream {
        #[arg(long, default_value_t = 500)]
        chunks: usize,
        #[arg(long, default_value_t = 10)]
        turns: usize,
        #[arg(long, default_value_t = 1)]
        chunk_delay_ms: u64,
    },
    /// Spawn `loopgate serve`: time to the first `health` answer and to the first turn.
    Startup {
        #[arg(long, default_value_t = 10)]
        runs: usize,
    },
    /// A long run sampling RSS of every gateway process.
    Soak {
        #[arg(long, default_value_t = 100_000)]
        turns: usize,
        #[arg(long, default_value_t = 8)]
        sessions: usize,
    },
    /// Kill an agent's worker (SIGKILL) and time until the next turn on that agent completes
    /// (loopgate only: needs its `status` method).
    CrashRecovery {
        #[arg(long, default_value_t = 10)]
        runs: usize,
    },
    /// The scripted model server's own ceiling (requests/s), no gateway involved.
    ModelCeiling {
        #[arg(long, default_value_t = 5000)]
        requests: usize,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
    /// N scheduled jobs: idle CPU with them loaded, and the fire lag of one-shots among them.
    Cron(cronbench::Plan),
    /// Physical floors on this machine: WebSocket echo, SQLite WAL commit, unix MessagePack.
    Floor {
        #[arg(long, default_value_t = 5000)]
        iterations: usize,
    },
    /// N agents, one turn each: PSS and file descriptors with every worker live and after
    /// they retired, and the first turn of a retired agent (spawns its own gateway).
    Density {
        #[arg(long, default_value_t = 100)]
        agents: usize,
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// `workers.idle_exit_seconds` of the spawned gateway.
        #[arg(long, default_value_t = 10)]
        idle_exit: u64,
        /// Retired agents whose first turn is timed.
        #[arg(long, default_value_t = 20)]
        retired_turns: usize,
        /// Seconds to wait after the last retirement before measuring again
        /// (`retired_settled`): past 300, the finished outcomes (60 s) and the replay buffer
        /// (300 s) have let go of the runs. 0: no second measurement.
        #[arg(long, default_value_t = 0)]
        settle: u64,
        /// `workers.max_live` of the spawned gateway (0: no cap).
        #[arg(long, default_value_t = 0)]
        max_live: usize,
    },
    /// One session's turn latency near turn 10, 100 and 1 000.
    SessionLength {
        #[arg(long, default_value_t = 1020)]
        turns: usize,
        #[arg(long, default_value_t = 20)]
        window: usize,
    },
    /// `usage.cost` and `sessions.usage` latency over a gateway db holding RUNS recorded runs
    /// over DAYS days and SESSIONS sessions per agent (four agents), its usage rollups built
    /// at start as after an upgrade (loopgate only).
    Usage(usage::Plan),
    /// Every scenario at a tiny size; fails unless every turn completed (CI).
    Smoke,
    /// Cluster mode under host faults (three hosts in network namespaces, each with a NATS
    /// server and a gateway; root only): kills and partitions mid-run, then checks every
    /// run's outcome, the journals, the model's requests and every gateway's history.
    /// Exits 1 on any violation. Not a benchmark and not in CI: `scripts/cluster-chaos`.
    /// Cluster mode's throughput and CPU per run: three NATS servers (R3) and `gateways`
    /// gateways on this host, one `throughput` client per gateway at once, after the agents
    /// settled on their owners. CPU counts the gateways, their workers and the servers.
    /// Needs `nats-server` (scripts/install-nats, or $LOOPGATE_NATS_SERVER).
    ClusterThroughput {
        #[arg(long, default_value_t = 3)]
        gateways: usize,
        /// Sessions per gateway.
        #[arg(long, default_value_t = 16)]
        sessions: usize,
        /// Turns per session.
        #[arg(long, default_value_t = 20)]
        turns: usize,
    },
    ClusterChaos {
        #[arg(long, default_value_t = 200)]
        runs: usize,
        #[arg(long, default_value_t = 20)]
        agents: usize,
        #[arg(long, default_value_t = 10)]
        kills: usize,
        #[arg(long, default_value_t = 10)]
        partitions: usize,
        #[arg(long, default_value_t = 5)]
        lease_ttl: u64,
        /// Seed of the run's choices (agents, sessions, front doors).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// Where the gateway is.
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    pub(crate) pid: Option<u32>,
    pub(crate) agents: Vec<String>,
    pub(crate) _spawned: Option<spawn::Spawned>,
}

impl Target {
    /// A gateway this benchmark started (stopped when the target is dropped).
    fn spawned(s: spawn::Spawned, agents: &[String]) -> Target {
        Target {
            url: s.url.clone(),
            token: Some(s.token.clone()),
            pid: Some(s.pid),
            agents: agents.to_vec(),
            _spawned: Some(s),
        }
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loopgate-bench: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

fn parse_api(s: &str) -> Result<scripted_model::wire::Api, String> {
    scripted_model::wire::Api::ALL
        .into_iter()
        .find(|a| a.config_name() == s)
        .ok_or_else(|| format!("unknown api {s:?}"))
}

fn loopgate_bin(args: &Args) -> PathBuf {
    args.loopgate.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("loopgate")))
            .unwrap_or_else(|| PathBuf::from("loopgate"))
    })
}

async fn target(args: &Args, stamped: Option<(usize, u64)>) -> anyhow::Result<Target> {
    if args.spawn {
        let s = spawn::Spawned::start(&loopgate_bin(args), &args.agents, stamped, args.api).await?;
        Ok(Target::spawned(s, &args.agents))
    } else {
        Ok(Target {
            url: args.url.clone(),
            token: args.token.clone(),
            pid: args.gateway_pid,
            agents: args.agents.clone(),
            _spawned: None,
        })
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let report = match args.scenario.clone() {
        Scenario::Latency { turns, warmup } => {
            latency(&target(&args, None).await?, turns, warmup).await?
        }
        Scenario::Throughput { sessions, turns } => {
            throughput(&target(&args, None).await?, sessions, turns).await?
        }
        Scenario::Stream {
            chunks,
            turns,
            chunk_delay_ms,
        } => stream(&target(&args, Some((chunks, chunk_delay_ms))).await?, turns).await?,
        Scenario::Startup { runs } => startup(&loopgate_bin(&args), runs).await?,
        Scenario::CrashRecovery { runs } => {
            crash_recovery(&target(&args, None).await?, runs).await?
        }
        Scenario::Soak { turns, sessions } => {
            soak(&target(&args, None).await?, turns, sessions).await?
        }
        Scenario::ModelCeiling {
            requests,
            concurrency,
        } => model_ceiling(requests, concurrency).await?,
        Scenario::Floor { iterations } => floor::run(iterations).await?,
        Scenario::Cron(plan) => cronbench::run(&loopgate_bin(&args), args.api, &plan).await?,
        Scenario::Density {
            agents,
            concurrency,
            idle_exit,
            retired_turns,
            settle,
            max_live,
        } => {
            let plan = scale::Density {
                agents,
                concurrency,
                idle_exit,
                retired_turns,
                settle,
                max_live: (max_live > 0).then_some(max_live),
            };
            scale::density(&loopgate_bin(&args), args.api, &plan).await?
        }
        Scenario::SessionLength { turns, window } => {
            scale::session_length(&target(&args, None).await?, turns, window).await?
        }
        Scenario::Usage(plan) => usage::run(&loopgate_bin(&args), args.api, &plan).await?,
        Scenario::Smoke => smoke(&args).await?,
        Scenario::ClusterThroughput {
            gateways,
            sessions,
            turns,
        } => {
            clusterbench::run(clusterbench::Options {
                loopgate: loopgate_bin(&args),
                gateways,
                sessions,
                turns,
                agents: args.agents.clone(),
            })
            .await?
        }
        Scenario::ClusterChaos {
            runs,
            agents,
            kills,
            partitions,
            lease_ttl,
            seed,
        } => {
            let o = chaos::Options {
                loopgate: loopgate_bin(&args),
                runs,
                agents,
                kills,
                partitions,
                lease_ttl,
                seed,
            };
            let report = chaos::run(o).await?;
            let bad = report["violations"].as_u64().unwrap_or(1);
            if bad > 0 {
                println!("{}", serde_json::to_string_pretty(&report)?);
                bail!("{bad} violations");
            }
            report
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(v: &Value) {
    let Some(obj) = v.as_object() else {
        println!("{v}");
        return;
    };
    let name = obj
        .get("scenario")
        .and_then(Value::as_str)
        .unwrap_or("result");
    println!("== {name}");
    for (k, val) in obj {
        if k == "scenario" {
            continue;
        }
        match val {
            Value::Object(o) if o.contains_key("median_ms") => println!(
                "  {k:<26} n={:<7} min {:>8.3}  median {:>8.3}  p95 {:>8.3}  p99 {:>8.3}  max {:>8.3} ms",
                o["count"], num(&o["min_ms"]), num(&o["median_ms"]), num(&o["p95_ms"]), num(&o["p99_ms"]), num(&o["max_ms"])
            ),
            Value::Object(_) | Value::Array(_) if name == "smoke" => print_table(val),
            other => println!("  {k:<26} {other}"),
        }
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

pub(crate) fn turn_params(n: usize, session: &str, agent: &str) -> ipc::gateway::AgentParams {
    ipc::gateway::AgentParams {
        message: format!("bench turn {n}"),
        // The agent is part of the key: turns on many agents start in the same microsecond.
        idempotency_key: format!(
            "bench-{agent}-{session}-{n}-{}",
            scripted_model::now_micros()
        ),
        session_key: Some(session.to_owned()),
        agent_id: Some(agent.to_owned()),
        deliver: Some(false),
        ..Default::default()
    }
}

pub(crate) fn cpu_report(
    pid: Option<u32>,
    before: &Option<std::collections::HashMap<u32, (f64, u64)>>,
    turns: usize,
) -> Value {
    match (pid, before) {
        (Some(p), Some(b)) => {
            let after = procs::snapshot(p);
            let cpu = procs::cpu_between(b, &after);
            json!({"gateway_cpu_s": cpu, "cpu_ms_per_turn": cpu * 1000.0 / turns.max(1) as f64,
                   "gateway_rss_bytes": procs::total_rss(&after), "processes": after.len()})
        }
        _ => json!(null),
    }
}

async fn latency(t: &Target, turns: usize, warmup: usize) -> anyhow::Result<Value> {
    let mut c = Client::connect(&t.url, t.token.as_deref()).await?;
    let agent = t.agents.first().cloned().unwrap_or_else(|| "main".into());
    let session = format!("lat-{}", scripted_model::now_micros());
    for n in 0..warmup {
        check_ok(&c.turn(turn_params(n, &session, &agent), |_| {}).await?)?;
    }
    let before = t.pid.map(procs::snapshot);
    let mut samples = Vec::with_capacity(turns);
    for n in 0..turns {
        let start = Instant::now();
        let fin = c
            .turn(turn_params(n + warmup, &session, &agent), |_| {})
            .await?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
        check_ok(&fin)?;
    }
    Ok(
        json!({"scenario": "latency", "turns": turns, "completed": samples.len(),
              "turn_latency": summarize(&samples), "cpu": cpu_report(t.pid, &before, turns)}),
    )
}

pub(crate) fn check_ok(fin: &Value) -> anyhow::Result<()> {
    if fin["status"] != "ok" {
        bail!("turn did not complete ok: {fin}");
    }
    Ok(())
}

pub(crate) async fn throughput(t: &Target, sessions: usize, turns: usize) -> anyhow::Result<Value> {
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(Client::connect(&t.url, t.token.as_deref()).await?);
    }
    let before = t.pid.map(procs::snapshot);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, mut c) in clients.into_iter().enumerate() {
        let agent = t.agents[i % t.agents.len()].clone();
        let session = format!("tp-{i}-{}", scripted_model::now_micros());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(turns);
            for n in 0..turns {
                let s = Instant::now();
                let fin = c.turn(turn_params(n, &session, &agent), |_| {}).await?;
                check_ok(&fin)?;
                lat.push(s.elapsed().as_secs_f64() * 1e6);
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.context("session task")??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let total = sessions * turns;
    Ok(
        json!({"scenario": "throughput", "sessions": sessions, "agents": t.agents.len(), "turns": total,
              "completed": all.len(), "elapsed_s": elapsed, "turns_per_s": all.len() as f64 / elapsed,
              "turn_latency": summarize(&all), "cpu": cpu_report(t.pid, &before, total)}),
    )
}

/// Parses `⟦µs⟧` stamps out of a delta.
fn stamps(delta: &str) -> Vec<u64> {
    delta
        .split('⟦')
        .skip(1)
        .filter_map(|p| p.split('⟧').next().and_then(|n| n.parse().ok()))
        .collect()
}

async fn stream(t: &Target, turns: usize) -> anyhow::Result<Value> {
    let mut c = Client::connect(&t.url, t.token.as_deref()).await?;
    let agent = t.agents.first().cloned().unwrap_or_else(|| "main".into());
    let mut samples = Vec::new();
    let mut chunks_seen = 0usize;
    for n in 0..turns {
        let session = format!("st-{n}-{}", scripted_model::now_micros());
        let params = turn_params(n, &session, &agent);
        let run_id = Value::String(params.idempotency_key.clone());
        let fin = c
            .turn(params, |f| {
                let p = &f.value["payload"];
                if f.value["event"] == "agent" && p["runId"] == run_id && p["stream"] == "assistant"
                {
                    let now = scripted_model::now_micros();
                    for s in stamps(p["data"]["delta"].as_str().unwrap_or("")) {
                        samples.push(now.saturating_sub(s) as f64);
                        chunks_seen += 1;
                    }
                }
            })
            .await?;
        check_ok(&fin)?;
    }
    Ok(
        json!({"scenario": "stream", "turns": turns, "chunks_delivered": chunks_seen,
              "chunk_delivery_latency": summarize(&samples)}),
    )
}

async fn startup(loopgate: &std::path::Path, runs: usize) -> anyhow::Result<Value> {
    let mut to_health = Vec::new();
    let mut to_turn = Vec::new();
    for _ in 0..runs {
        let (h, t) = spawn::measure_startup(loopgate).await?;
        to_health.push(h.as_secs_f64() * 1e6);
        to_turn.push(t.as_secs_f64() * 1e6);
    }
    Ok(
        json!({"scenario": "startup", "runs": runs, "start_to_health": summarize(&to_health),
              "start_to_first_turn": summarize(&to_turn)}),
    )
}

async fn soak(t: &Target, turns: usize, sessions: usize) -> anyhow::Result<Value> {
    let Some(pid) = t.pid else {
        bail!("soak needs --gateway-pid (or --spawn) to sample RSS")
    };
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(Client::connect(&t.url, t.token.as_deref()).await?);
    }
    let idle_rss = procs::total_rss(&procs::snapshot(pid));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(usize, u64)>::new()));
    let sampler = {
        let (done, samples) = (done.clone(), samples.clone());
        tokio::spawn(async move {
            let mut next_mark = 1000;
            loop {
                let d = done.load(std::sync::atomic::Ordering::Relaxed);
                if d >= next_mark {
                    let rss = procs::total_rss(&procs::snapshot(pid));
                    samples.lock().map(|mut s| s.push((d, rss))).ok();
                    next_mark = d - d % 1000 + 1000;
                }
                if d >= turns {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let per = turns.div_ceil(sessions);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, mut c) in clients.into_iter().enumerate() {
        let agent = t.agents[i % t.agents.len()].clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let session = format!("soak-{i}-{}", scripted_model::now_micros());
            for n in 0..per {
                check_ok(&c.turn(turn_params(n, &session, &agent), |_| {}).await?)?;
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await.context("soak task")??;
    }
    let _ = sampler.await;
    let final_rss = procs::total_rss(&procs::snapshot(pid));
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let at_1000 = samples.iter().find(|(d, _)| *d >= 1000).map(|(_, r)| *r);
    let growth = at_1000.map(|r| (final_rss as f64 / r as f64 - 1.0) * 100.0);
    Ok(
        json!({"scenario": "soak", "turns": done.load(std::sync::atomic::Ordering::Relaxed), "elapsed_s": start.elapsed().as_secs_f64(),
              "idle_rss_bytes": idle_rss, "rss_after_1000_bytes": at_1000, "rss_final_bytes": final_rss,
              "rss_growth_after_1000_pct": growth, "samples": samples.iter().map(|(d, r)| json!([d, r])).collect::<Vec<_>>()}),
    )
}

async fn crash_recovery(t: &Target, runs: usize) -> anyhow::Result<Value> {
    let mut c = Client::connect(&t.url, t.token.as_deref()).await?;
    let agent = t.agents.first().cloned().unwrap_or_else(|| "main".into());
    let session = format!("crash-{}", scripted_model::now_micros());
    let mut samples = Vec::new();
    for n in 0..runs {
        // Make sure a worker is up, then kill it and time the next turn.
        check_ok(&c.turn(turn_params(n * 2, &session, &agent), |_| {}).await?)?;
        let status = c
            .call(
                ipc::gateway::Method::GatewayStatus,
                &ipc::gateway::NoParams {},
            )
            .await?;
        let pid = status["workers"]
            .as_array()
            .and_then(|ws| ws.iter().find(|w| w["agentId"] == agent.as_str()))
            .and_then(|w| w["pid"].as_u64())
            .context("no worker pid in status (crash-recovery needs loopgate)")?;
        let start = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )?;
        // The turn is sent right away; it waits for the restarted worker.
        let fin = c
            .turn(turn_params(n * 2 + 1, &session, &agent), |_| {})
            .await?;
        if fin["status"] != "ok" {
            // Sent before the supervisor noticed the death: it failed with the crash. Retry.
            check_ok(
                &c.turn(turn_params(n * 2 + 1 + runs * 2, &session, &agent), |_| {})
                    .await?,
            )?;
        }
        samples.push(start.elapsed().as_secs_f64() * 1e6);
        // Each sample is an isolated crash: an operator restart clears the crash history, so
        // the next kill is not treated as part of a crash loop (whose backoff grows on purpose).
        let restart = ipc::gateway::WorkerRestartParams {
            agent_id: agent.clone(),
            force: None,
        };
        c.call(ipc::gateway::Method::WorkerRestart, &restart)
            .await?;
    }
    Ok(
        json!({"scenario": "crash-recovery", "runs": runs, "kill_to_next_turn_ok": summarize(&samples)}),
    )
}

async fn model_ceiling(requests: usize, concurrency: usize) -> anyhow::Result<Value> {
    let model = scripted_model::ScriptedModel::start().await?;
    let addr = model.addr();
    let start = Instant::now();
    let per = requests.div_ceil(concurrency);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        tasks.push(tokio::spawn(async move {
            spawn::raw_chat_requests(addr, per).await
        }));
    }
    let mut n = 0;
    for t in tasks {
        n += t.await.context("model task")??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(
        json!({"scenario": "model-ceiling", "requests": n, "concurrency": concurrency, "elapsed_s": elapsed,
              "requests_per_s": n as f64 / elapsed}),
    )
}

async fn smoke(args: &Args) -> anyhow::Result<Value> {
    let bin = loopgate_bin(args);
    let agents = vec!["main".to_owned(), "b".to_owned()];
    let mut out = serde_json::Map::new();
    out.insert("scenario".into(), json!("smoke"));
    {
        let t = Target::spawned(
            spawn::Spawned::start(&bin, &agents, None, args.api).await?,
            &agents,
        );
        out.insert("latency".into(), latency(&t, 20, 2).await?);
        out.insert("throughput".into(), throughput(&t, 4, 10).await?);
        out.insert("soak".into(), soak(&t, 200, 4).await?);
    }
    {
        let t = Target::spawned(
            spawn::Spawned::start(&bin, &agents, Some((50, 0)), args.api).await?,
            &agents,
        );
        out.insert("stream".into(), stream(&t, 2).await?);
    }
    out.insert("startup".into(), startup(&bin, 2).await?);
    {
        let t = Target::spawned(
            spawn::Spawned::start(&bin, &agents, None, args.api).await?,
            &agents,
        );
        out.insert("crash_recovery".into(), crash_recovery(&t, 2).await?);
    }
    out.insert(
        "density".into(),
        scale::density(
            &bin,
            args.api,
            &scale::Density {
                agents: 3,
                concurrency: 2,
                idle_exit: 1,
                retired_turns: 2,
                settle: 0,
                max_live: None,
            },
        )
        .await?,
    );
    {
        let t = Target::spawned(
            spawn::Spawned::start(&bin, &agents, None, args.api).await?,
            &agents,
        );
        out.insert(
            "session_length".into(),
            scale::session_length(&t, 30, 5).await?,
        );
    }
    let plan = usage::Plan {
        runs: 2_000,
        sessions: 20,
        days: 30,
        samples: 3,
    };
    out.insert("usage".into(), usage::run(&bin, args.api, &plan).await?);
    out.insert("model_ceiling".into(), model_ceiling(200, 4).await?);
    out.insert("floor".into(), floor::run(200).await?);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_parse_merged_deltas() {
        assert_eq!(stamps("⟦12⟧⟦34⟧"), vec![12, 34]);
        assert_eq!(stamps("no stamps"), Vec::<u64>::new());
    }
}
