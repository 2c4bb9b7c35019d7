//! Cluster mode end to end (issue 25): three NATS servers and three gateways on loopback,
//! one scripted model behind them all. R-A3 (a retry replays the outcome) and G1 (one
//! outcome per run) across gateways; an owner killed mid-run.

use std::time::{Duration, Instant};

use cluster::local::LocalCluster;
use loopgate_tests::{hold, reply, streamed, Gateway};
use nix::sys::signal::Signal;
use scripted_model::{wire::Api, ScriptedModel};
use serde_json::{json, Value};

/// The lease TTL of these clusters (seconds): failover within it plus the engine's sweep.
const TTL: u64 = 2;

pub(super) struct Cluster {
    pub(super) gateways: Vec<Gateway>,
    pub(super) model: ScriptedModel,
    pub(super) nats: LocalCluster,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub(super) async fn start(n: usize) -> Cluster {
        Self::start_with(n, "").await
    }

    /// `n` gateways with `extra` TOML (before the `[cluster]` table).
    pub(super) async fn start_with(n: usize, extra_agents: &str) -> Cluster {
        Self::start_opts(n, extra_agents, "").await
    }

    /// `n` gateways with `extra_agents` TOML before the `[cluster]` table and
    /// `extra_cluster` keys in it.
    pub(super) async fn start_opts(n: usize, extra_agents: &str, extra_cluster: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let nats = LocalCluster::start(3, dir.path()).unwrap();
        let model = ScriptedModel::start().await.unwrap();
        let urls = nats.urls_toml();
        let mut gateways = Vec::new();
        for i in 1..=n {
            let extra = format!(
                "\n{extra_agents}\n[gateway.metrics]\nenabled = true\n\n[cluster]\nnats = [{urls}]\nnode = \"h{i}\"\nlease_ttl_seconds = {TTL}\n{extra_cluster}\n"
            );
            gateways.push(
                Gateway::start_with_provider_api(
                    Api::Completions,
                    &Api::Completions.base_url(model.addr()),
                    "scripted-1",
                    &extra,
                )
                .await,
            );
        }
        Cluster {
            gateways,
            model,
            nats,
            _dir: dir,
        }
    }

    /// One turn on the first gateway (the agent's worker up on its owner), then the
    /// settled owner (see [`Cluster::settled_owner`]).
    pub(super) async fn warmed_owner(&self) -> usize {
        self.model.push(reply("warm"));
        let mut c = self.gateways[0].connect().await;
        c.turn(json!({"message": "warm up", "idempotencyKey": "w"}))
            .await;
        self.settled_owner().await
    }

    /// The gateway that owns `main` (its only agent) once ownership settled: the gateway its
    /// rendezvous hash prefers among the running ones holds it (agents move to it when idle).
    pub(super) async fn settled_owner(&self) -> usize {
        let alive: Vec<usize> = (0..self.gateways.len())
            .filter(|i| self.gateways[*i].child.is_some())
            .collect();
        let preferred = *alive
            .iter()
            .max_by_key(|i| cluster::names::digest(&format!("main/h{}", **i + 1)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.gateways[alive[0]].status().await;
            let c = &s["cluster"];
            let owner = c["agents"][0]["owner"].as_str().map(str::to_owned);
            if owner == Some(format!("h{}", preferred + 1))
                && c["members"].as_array().map(Vec::len) == Some(alive.len())
            {
                return preferred;
            }
            assert!(Instant::now() < deadline, "ownership never settled: {s}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A gateway process and its descendants (workers, their tools): a host to pause.
fn family(pid: u32) -> Vec<i32> {
    let mut out = vec![pid as i32];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        let tasks = std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten();
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
        i += 1;
    }
    out
}

fn signal_all(pids: &[i32], sig: Signal) {
    for p in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), sig);
    }
}

/// The sum of a counter's series in gateway `gw`'s `/metrics`.
pub(super) async fn counter(gw: &Gateway, name: &str) -> u64 {
    let text = gw.http("GET", "/metrics", &[]).await.text();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

pub(super) async fn wait_result(gw: &Gateway, run_id: &str) -> Value {
    let mut c = gw.connect().await;
    c.call("agent.wait", json!({"runId": run_id, "timeoutMs": 30_000}))
        .await["payload"]
        .clone()
}

/// A run submitted on one gateway is waited on from another; a retry with its key on a
/// third gets the same outcome, not a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_on_one_gateway_wait_on_another_retry_on_a_third_r_a3() {
    let cl = Cluster::start(3).await;
    cl.model.push(reply("the answer"));
    let mut c1 = cl.gateways[0].connect().await;
    let (_, fin) = c1
        .turn(json!({"message": "hi", "idempotencyKey": "k1"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "the answer",
        "{fin}"
    );
    let waited = wait_result(&cl.gateways[1], "k1").await;
    assert_eq!(waited["status"], "ok", "{waited}");

    let mut c3 = cl.gateways[2].connect().await;
    let id = c3
        .send("agent", json!({"message": "hi", "idempotencyKey": "k1"}))
        .await;
    let again = c3.res(&id).await;
    assert_eq!(
        again["payload"], fin["payload"],
        "the same outcome, replayed"
    );
    assert_eq!(
        cl.model.requests().len(),
        1,
        "one model request for one run"
    );

    // The same key for another message is refused on any gateway.
    let id = c3
        .send("agent", json!({"message": "other", "idempotencyKey": "k1"}))
        .await;
    let refused = c3.res(&id).await;
    assert_eq!(refused["ok"], false, "{refused}");
}

/// kill -9 of the gateway that owns an agent, mid-run: the run ends `error` naming the
/// loss on every gateway (its tools are never run again), and the agent's next run
/// completes on another gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_killed_mid_run_fails_its_run_and_another_gateway_takes_over() {
    let mut cl = Cluster::start(3).await;
    cl.model.push(reply("warm"));
    let mut c = cl.gateways[0].connect().await;
    c.turn(json!({"message": "warm up", "idempotencyKey": "w"}))
        .await;
    let owner = cl.settled_owner().await;
    let before = cl.gateways[(owner + 1) % 3].status().await["cluster"].clone();
    assert_eq!(before["members"], json!(["h1", "h2", "h3"]), "{before}");
    assert_eq!(before["engine"], "ok");
    let main = &before["agents"][0];
    assert_eq!(main["agentId"], "main");
    assert_eq!(main["owner"], format!("h{}", owner + 1));
    let old_epoch = main["epoch"].as_u64().unwrap();

    cl.model.push(hold("never finished"));
    // A client of a surviving gateway, to hear how the run ended.
    let mut watcher = cl.gateways[(owner + 1) % 3].connect().await;
    let mut co = cl.gateways[owner].connect().await;
    co.start_streaming(json!({"message": "long", "idempotencyKey": "k2"}))
        .await;
    let killed = Instant::now();
    cl.gateways[owner].stop(Signal::SIGKILL).await;

    let others: Vec<usize> = (0..3).filter(|i| *i != owner).collect();
    for &i in &others {
        let r = wait_result(&cl.gateways[i], "k2").await;
        assert_eq!(r["status"], "error", "{r}");
        assert!(
            r["error"].as_str().unwrap_or_default().contains("was lost"),
            "{r}"
        );
    }
    let failed_over = killed.elapsed();
    // The new owner ended it as any run ends: its clients hear the error (issue 38).
    let ended = watcher.chat_event("k2", |p| p["state"] == "error").await;
    assert!(
        ended["payload"]["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("was lost"),
        "{ended}"
    );

    cl.model.push(reply("after the loss"));
    let mut cn = cl.gateways[others[0]].connect().await;
    let (_, fin) = cn
        .turn(json!({"message": "again", "idempotencyKey": "k3"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "after the loss"
    );
    eprintln!("owner lost -> its run closed on every gateway in {failed_over:?}");
    let after = cl.gateways[others[0]].status().await["cluster"].clone();
    let main = &after["agents"][0];
    assert_ne!(main["owner"], format!("h{}", owner + 1), "{after}");
    assert!(main["epoch"].as_u64().unwrap() > old_epoch, "{after}");
    // The new owner counted the lost owner's run it closed.
    let mut closed = 0;
    for &i in &others {
        let text = cl.gateways[i].http("GET", "/metrics", &[]).await.text();
        closed += text
            .lines()
            .filter(|l| l.starts_with("loopgate_cluster_runs_of_lost_owners_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    assert_eq!(closed, 1);
    assert!(
        failed_over < Duration::from_secs(TTL + 10),
        "failover took {failed_over:?}"
    );
    // The killed run's model request was made once and never again (later requests carry
    // its user message in their history, never as the message they answer).
    let longs = cl
        .model
        .requests()
        .iter()
        .filter(|r| {
            r.body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .map(|m| m["content"].clone())
                == Some(json!("long"))
        })
        .count();
    assert_eq!(longs, 1);

    // The new owner rebuilt the agent's database from its journal: every surviving
    // gateway shows the same history, the lost owner's part included (the lost run's user
    // message, without a reply).
    let mut seen = Vec::new();
    for &i in &others {
        let mut c = cl.gateways[i].connect().await;
        seen.push(history(&mut c, "main").await);
    }
    assert_eq!(
        seen[0],
        [
            "user: warm up",
            "assistant: warm",
            "user: long",
            "user: again",
            "assistant: after the loss"
        ]
    );
    assert_eq!(seen[0], seen[1]);
}

/// `chat.history` of `session`, one `role: text` line per message.
pub(super) async fn history(c: &mut loopgate_tests::Client, session: &str) -> Vec<String> {
    // As a client does: an agent between owners (a hand-over under way) answers
    // UNAVAILABLE, retryable; ask again after the pause it names.
    let deadline = Instant::now() + Duration::from_secs(30);
    let h = loop {
        let h = c.call("chat.history", json!({"sessionKey": session})).await;
        if h["ok"] == true || h["error"]["retryable"] != true || Instant::now() > deadline {
            break h;
        }
        let pause = h["error"]["retryAfterMs"].as_u64().unwrap_or(500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    };
    h["payload"]["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{h}"))
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or("?"),
                m["content"][0]["text"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// A client on a gateway that does not own the agent sees the run's stream: the `agent`
/// events as they are produced and the `chat` final, relayed from the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_any_gateway_sees_the_runs_stream() {
    let cl = Cluster::start(2).await;
    let owner = cl.warmed_owner().await;
    let other = 1 - owner;

    cl.model.push(streamed("streamed from the owner", 3, 5));
    let mut co = cl.gateways[other].connect().await;
    let id = co
        .send(
            "agent",
            json!({"message": "stream it", "idempotencyKey": "s1"}),
        )
        .await;
    assert_eq!(co.res(&id).await["payload"]["status"], "accepted");
    co.agent_event("s1", |p| p["stream"] == "assistant").await;
    co.agent_event("s1", |p| {
        p["stream"] == "lifecycle" && p["data"]["phase"] == "end"
    })
    .await;
    let fin = co.res(&id).await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "streamed from the owner"
    );
    assert_eq!(co.assistant_text("s1"), "streamed from the owner");

    cl.model.push(reply("chat answer"));
    let id = co
        .send(
            "chat.send",
            json!({"sessionKey": "agent:main:main", "message": "chat", "idempotencyKey": "c1"}),
        )
        .await;
    assert_eq!(co.res(&id).await["ok"], true);
    let fin = co.chat_event("c1", |p| p["state"] == "final").await;
    assert!(fin.to_string().contains("chat answer"), "{fin}");
}

/// Agents spread over the gateways: each ends up on the gateway its rendezvous hash
/// prefers (the first gateway up takes them all, then hands each to its preferred member
/// once it is idle), and runs of each agent complete wherever they are submitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_spread_over_the_gateways_and_run_wherever_submitted() {
    let agents = ["main", "a1", "a2", "a3", "a4", "a5"];
    let extra: String = agents[1..]
        .iter()
        .map(|a| format!("[agents.list.{a}]\n"))
        .collect();
    let cl = Cluster::start_with(3, &extra).await;
    let preferred = |agent: &str| {
        (1..=3)
            .max_by_key(|i| cluster::names::digest(&format!("{agent}/h{i}")))
            .map(|i| format!("h{i}"))
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let owners = loop {
        let s = cl.gateways[2].status().await;
        let owners: Vec<(String, String)> = s["cluster"]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["agentId"].as_str().unwrap().to_owned(),
                    a["owner"].as_str().unwrap_or("-").to_owned(),
                )
            })
            .collect();
        if owners.iter().all(|(a, o)| *o == preferred(a)) {
            break owners;
        }
        assert!(Instant::now() < deadline, "agents never settled: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let distinct: std::collections::HashSet<&String> = owners.iter().map(|(_, o)| o).collect();
    assert!(distinct.len() >= 2, "the agents spread: {owners:?}");
    for (i, agent) in agents.iter().enumerate() {
        cl.model.push(reply(&format!("answer of {agent}")));
        let mut c = cl.gateways[i % 3].connect().await;
        let (_, fin) = c
            .turn(
                json!({"message": "hi", "agentId": agent, "idempotencyKey": format!("k-{agent}")}),
            )
            .await;
        assert_eq!(
            fin["payload"]["result"]["payloads"][0]["text"],
            format!("answer of {agent}")
        );
    }
}

/// A paused owner (SIGSTOP of its supervisor, worker and tools) loses the agent; resumed
/// after the takeover, with its model's answer arriving, it can commit nothing (R-C1 across
/// hosts): the agent's journal holds nothing of its epoch after the new owner's takeover,
/// and no gateway's history shows the answer it got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_resumed_after_takeover_cannot_commit_r_c1() {
    let cl = Cluster::start(3).await;
    cl.model.push(reply("warm"));
    let mut c = cl.gateways[0].connect().await;
    c.turn(json!({"message": "warm up", "idempotencyKey": "w"}))
        .await;
    let owner = cl.settled_owner().await;
    let watcher = (owner + 1) % 3;

    cl.model.push(hold("from the paused owner"));
    let mut cw = cl.gateways[watcher].connect().await;
    // Returns once the owner's model call is under way: its first piece reached the watcher.
    cw.start_streaming(json!({"message": "paused", "idempotencyKey": "p"}))
        .await;
    let paused = family(cl.gateways[owner].pid());
    assert!(paused.len() >= 2, "the gateway and its worker: {paused:?}");
    signal_all(&paused, Signal::SIGSTOP);

    let r = wait_result(&cl.gateways[watcher], "p").await;
    assert_eq!(r["status"], "error", "{r}");
    assert!(
        r["error"].as_str().unwrap_or_default().contains("was lost"),
        "{r}"
    );

    // Resumed: its worker gets the rest of the answer and tries to record it.
    cl.model.release();
    signal_all(&paused, Signal::SIGCONT);
    let old = &cl.gateways[owner];
    let deadline = Instant::now() + Duration::from_secs(30);
    while counter(old, "loopgate_cluster_leases_lost_total").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the resumed owner never saw its lease gone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "resumed owner: journal writes refused {}",
        counter(old, "loopgate_cluster_journal_writes_refused_total").await
    );

    // The next run completes on the new owner, after what the resumed one could do.
    cl.model.push(reply("after"));
    let (_, fin) = cw
        .turn(json!({"message": "next", "idempotencyKey": "n"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "after",
        "{fin}"
    );

    let checker = cluster::Engine::connect(
        &super::cluster_engine::settings(cl.nats.urls(), "checker"),
        &|_| None,
    )
    .await
    .unwrap();
    let journal = checker.journal_read("main", 0).await.unwrap();
    let takeovers = journal
        .records
        .iter()
        .filter(|r| r.kind == cluster::journal::Kind::Takeover)
        .count();
    assert!(takeovers >= 2, "{:?}", journal.records);
    let fenced = cluster::journal::fenced(&journal.records);
    assert!(fenced.is_empty(), "commits of a fenced owner: {fenced:?}");
    assert!(!journal
        .records
        .iter()
        .any(|r| String::from_utf8_lossy(&r.changes).contains("from the paused owner")));
    for gw in &cl.gateways {
        let mut c = gw.connect().await;
        let h = history(&mut c, "main").await;
        assert_eq!(
            h,
            [
                "user: warm up",
                "assistant: warm",
                "user: paused",
                "user: next",
                "assistant: after"
            ],
            "on h{}",
            gw.pid()
        );
    }
}

/// An agent that comes back to a gateway it had left goes on there: the worker it had is
/// stopped when the agent is handed over, and the next one syncs from the journal (before,
/// the idle worker left running named a record long past, and the first run back ended
/// `error` when the journal refused its write). R-C1 across owners, three moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_handed_back_to_a_gateway_it_left_goes_on_there_r_c1() {
    async fn turn(cl: &Cluster, i: usize, text: &str, key: &str) {
        cl.model.push(reply(text));
        let mut c = cl.gateways[i].connect().await;
        let (_, fin) = c.turn(json!({"message": key, "idempotencyKey": key})).await;
        assert_eq!(fin["payload"]["status"], "ok", "{key}: {fin}");
    }
    let mut cl = Cluster::start(3).await;
    let first = cl.settled_owner().await;
    let entry = (first + 1) % 3;
    turn(&cl, entry, "one", "k1").await;

    // The owner dies: the next preferred gateway takes the agent and runs a turn (its
    // worker syncs and stays).
    cl.gateways[first].stop(Signal::SIGKILL).await;
    let second = cl.settled_owner().await;
    turn(&cl, second, "two", "k2").await;

    // The first comes back and is preferred again: the agent is handed back to it.
    cl.gateways[first].spawn().await;
    assert_eq!(cl.settled_owner().await, first);
    turn(&cl, second, "three", "k3").await;

    // It dies again: the agent returns to the gateway it had left, whose turn completes.
    cl.gateways[first].stop(Signal::SIGKILL).await;
    assert_eq!(cl.settled_owner().await, second);
    turn(&cl, second, "four", "k4").await;

    let want = [
        "user: k1",
        "assistant: one",
        "user: k2",
        "assistant: two",
        "user: k3",
        "assistant: three",
        "user: k4",
        "assistant: four",
    ];
    for (i, gw) in cl.gateways.iter().enumerate().filter(|(i, _)| *i != first) {
        let mut c = gw.connect().await;
        assert_eq!(history(&mut c, "main").await, want, "on gateway {i}");
    }
}
