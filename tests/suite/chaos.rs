//! Chaos: many turns across several agents while workers are killed at random. Every
//! accepted run must reach exactly one terminal outcome, recorded in the gateway db, and
//! every agent database must pass `PRAGMA integrity_check` with no run left open and no
//! writer claim left behind (R-J2, invariant 1).
//!
//! `LOOPGATE_CHAOS_TURNS` sets the number of turns (default 120, run in CI);
//! `scripts/chaos 10000` runs a large one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopgate_tests::Gateway;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use scripted_model::DefaultReply;
use serde_json::json;

const AGENTS: [&str; 3] = ["main", "alpha", "beta"];
const CLIENTS: usize = 6;

/// xorshift64*: enough randomness for chaos without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_accepted_run_ends_exactly_once() {
    let turns: usize = std::env::var("LOOPGATE_CHAOS_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let gw = Gateway::start_with(
        "[agents.list.alpha]\n[agents.list.beta]\n[workers]\ncrash_loop_max = 100000\nrestart_backoff_initial_ms = 5\nrestart_backoff_max_ms = 200\n",
    )
    .await;
    gw.model.set_default(DefaultReply::Echo {
        prefix: "Echo: ".into(),
        chunks: 4,
        delay_ms: 3,
    });
    let started = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(7)
        | 1;
    eprintln!("chaos: {turns} turns, seed {seed}");

    // The killer: SIGKILL a random agent's worker every 20-80 ms.
    let killer = {
        let done = done.clone();
        let socket = gw.socket();
        tokio::spawn(async move {
            let mut rng = Rng(seed);
            let mut kills = 0u64;
            let mut c = loopgate_tests::Client::connect(&socket).await;
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20 + rng.next() % 60)).await;
                let s = c.call("loopgate.status", json!({})).await;
                let agent = AGENTS[(rng.next() % AGENTS.len() as u64) as usize];
                let pid = s["payload"]["workers"]
                    .as_array()
                    .and_then(|ws| ws.iter().find(|w| w["agentId"] == agent))
                    .and_then(|w| w["pid"].as_u64());
                if let Some(pid) = pid {
                    if kill(Pid::from_raw(pid as i32), Signal::SIGKILL).is_ok() {
                        kills += 1;
                    }
                }
            }
            kills
        })
    };

    // The clients: each runs its share of turns, recording every final frame per run.
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let socket = gw.socket();
        tasks.push(tokio::spawn(async move {
            let mut c = loopgate_tests::Client::connect(&socket).await;
            let mut outcomes: HashMap<String, Vec<String>> = HashMap::new();
            let mut refused = 0usize;
            for n in (client..turns).step_by(CLIENTS) {
                let agent = AGENTS[n % AGENTS.len()];
                let run_id = format!("chaos-{n}");
                let params = json!({"message": format!("turn {n}"), "idempotencyKey": run_id, "agentId": agent,
                                    "sessionKey": format!("s{}", n % 5)});
                let id = c.send("agent", params).await;
                let first = c.res(&id).await;
                if first["payload"]["status"] != "accepted" {
                    // Refused before acceptance (e.g. overloaded): not a run.
                    assert_eq!(first["ok"], false, "{first}");
                    refused += 1;
                    continue;
                }
                let fin = c.res(&id).await;
                let status = fin["payload"]["status"].as_str().unwrap_or("missing").to_owned();
                outcomes.entry(run_id).or_default().push(status);
            }
            // Nothing else arrives for these requests later.
            (outcomes, refused, c)
        }));
    }
    let mut all: HashMap<String, Vec<String>> = HashMap::new();
    let mut refused = 0;
    let mut clients = Vec::new();
    for t in tasks {
        let (o, r, c) = t.await.expect("client task");
        all.extend(o);
        refused += r;
        clients.push(c);
    }
    done.store(true, Ordering::Relaxed);
    let kills = killer.await.expect("killer");
    let elapsed = started.elapsed();

    let ok = all.values().filter(|v| v[0] == "ok").count();
    let errors = all.values().filter(|v| v[0] == "error").count();
    eprintln!(
        "chaos: {} accepted ({ok} ok, {errors} error), {refused} refused, {kills} worker kills, {:.1} s, {:.0} turns/s",
        all.len(),
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64()
    );
    for (run, finals) in &all {
        assert_eq!(finals.len(), 1, "{run} got {finals:?}");
        assert!(
            finals[0] == "ok" || finals[0] == "error",
            "{run}: {finals:?}"
        );
        if finals[0] == "error" {
            // Errors here come from killed workers only.
        }
    }
    assert_eq!(all.len() + refused, turns);
    assert!(ok > 0, "some turns must survive the chaos");

    // The gateway db agrees: one terminal record per accepted run, none left open.
    let gdb = rusqlite::Connection::open(gw.state().join("gateway.sqlite")).unwrap();
    gdb.busy_timeout(Duration::from_secs(5)).unwrap();
    let open: i64 = gdb
        .query_row(
            "SELECT count(*) FROM runs WHERE status = 'accepted'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open, 0, "runs left open in the gateway db");
    let recorded: i64 = gdb
        .query_row(
            "SELECT count(*) FROM runs WHERE run_id LIKE 'chaos-%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(recorded as usize, all.len());
    let mut stmt = gdb
        .prepare("SELECT run_id, status FROM runs WHERE run_id LIKE 'chaos-%'")
        .unwrap();
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for (run, status) in rows {
        assert_eq!(
            all[&run][0], status,
            "{run}: client saw {:?}, db has {status}",
            all[&run]
        );
    }

    // Every agent db is intact, with no run left running and no claim left behind once the
    // workers have restarted (recovery) or finished.
    for agent in AGENTS {
        let db = gw.agent_db(agent);
        let ok: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "{agent}");
    }
    // Restart every worker gracefully: recovery closes whatever a kill left open.
    let mut c = gw.connect().await;
    for agent in AGENTS {
        let r = c.call("worker.restart", json!({"agentId": agent})).await;
        assert_eq!(r["ok"], true, "{r}");
        // The new worker recovers its db before it serves anything: a session read through
        // it is answered only after that recovery committed.
        let h = c
            .call(
                "chat.history",
                json!({"sessionKey": "s0", "agentId": agent}),
            )
            .await;
        assert_eq!(h["ok"], true, "{h}");
        let db = gw.agent_db(agent);
        let running: i64 = db
            .query_row(
                "SELECT count(*) FROM runs WHERE status = 'running'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(running, 0, "{agent}: runs left running");
        let claims: i64 = db
            .query_row(
                "SELECT count(*) FROM sessions WHERE active_writer_run_id IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(claims, 0, "{agent}: writer claims left behind");
    }
    drop(clients);
}
