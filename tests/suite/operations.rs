//! Crash isolation and operations (R-J2..R-J5): worker crashes and hangs, restarts with
//! backoff, the crash-loop breaker, supervisor death, drain, worker restart, reload, systemd.

use std::time::Duration;

use loopgate_tests::{alive, bin, gone_within, hold, Gateway, WAIT};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use scripted_model::Step;
use serde_json::json;

fn signal(pid: u32, sig: Signal) {
    kill(Pid::from_raw(pid as i32), sig).expect("signal");
}

/// R-J2: a worker killed mid-stream fails only its own run; another agent's concurrent turn
/// completes; the killed agent's worker comes back with backoff and its next turn works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_stream_spares_other_agents_r_j2() {
    let gw = Gateway::start_with("[agents.list.ops]\n").await;
    let mut c = gw.connect().await;
    // ops: a turn that keeps streaming while main's worker dies.
    let ops = c
        .send(
            "agent",
            json!({"message": "slow", "idempotencyKey": "ops-slow", "agentId": "ops"}),
        )
        .await;
    gw.model.push(Step::Text {
        text: "ops keeps going fine".into(),
        chunks: 10,
        delay_ms: 30,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    c.res(&ops).await;
    c.agent_event("ops-slow", |p| p["stream"] == "assistant")
        .await;
    gw.model.push(hold("main is doomed"));
    let main = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "main-doomed"}))
        .await;
    let wpid = gw.worker_pid("main").await.unwrap();
    signal(wpid, Signal::SIGKILL);

    let fin = c.res(&main).await;
    assert_eq!(fin["payload"]["status"], "error");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("SIGKILL"),
        "{fin}"
    );
    let fin = c.res(&ops).await;
    assert_eq!(
        fin["payload"]["status"], "ok",
        "the other agent's run is untouched: {fin}"
    );
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "ops keeps going fine"
    );

    gw.logs.wait_for_count("Worker ready.", 3).await; // main, ops, main again
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "main-after"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let db = gw.agent_db("main");
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    gw.logs.assert_clean(&[
        "Worker exited unexpectedly",
        "Ended runs left open by a crash",
    ]);
}

/// R-J2: a crash loop trips the breaker; runs are refused (retryable) until `loopgate worker
/// restart` clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_loop_trips_breaker_and_worker_restart_clears_it_r_j2() {
    let gw =
        Gateway::start_with("[workers]\ncrash_loop_max = 3\nrestart_backoff_initial_ms = 10\n")
            .await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "warm up", "idempotencyKey": "w0"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    for n in 1..=3 {
        gw.logs.wait_for_count("Worker ready.", n).await;
        let pid = gw.worker_pid("main").await.expect("worker up");
        signal(pid, Signal::SIGABRT);
        gw.logs
            .wait_for_count("Worker exited unexpectedly", n)
            .await;
    }
    gw.logs.wait_for("Crash loop: agent marked failed").await;
    let s = gw.status().await;
    assert_eq!(s["workers"][0]["state"], "failed", "{s}");
    assert!(
        s["workers"][0]["failedReason"]
            .as_str()
            .unwrap()
            .contains("SIGABRT"),
        "{s}"
    );
    let r = c
        .call(
            "agent",
            json!({"message": "refused", "idempotencyKey": "w-refused"}),
        )
        .await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["code"], "UNAVAILABLE");
    assert_eq!(r["error"]["retryable"], true);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("loopgate worker restart main"),
        "{r}"
    );

    let out = gw.cli(&["worker", "restart", "main"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("restarted"));
    let (_, fin) = c
        .turn(json!({"message": "back", "idempotencyKey": "w-back"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    gw.logs
        .assert_clean(&["Worker exited unexpectedly", "Crash loop", "worker"]);
}

/// A hung worker (stopped, answering no heartbeats) is killed within the heartbeat deadline
/// and its run ends with an error naming the cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_worker_is_killed_after_missed_heartbeats() {
    let gw = Gateway::start_with("[workers]\nheartbeat_timeout_seconds = 0.5\n").await;
    gw.model.push(hold("frozen"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "hang-1"}))
        .await;
    let pid = gw.worker_pid("main").await.unwrap();
    signal(pid, Signal::SIGSTOP);
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "error");
    let err = fin["payload"]["error"].as_str().unwrap();
    assert!(
        err.contains("unresponsive") && err.contains("SIGKILL"),
        "{err}"
    );
    assert!(!alive(pid));
    gw.model.release();
    gw.logs.assert_clean(&[
        "Worker exited unexpectedly",
        "missed its heartbeats",
        "Ended runs left open",
    ]);
}

/// R-J3: when the supervisor dies its workers exit within a second; a new supervisor serves
/// the state dir at once, ends the interrupted run as an error and the session works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_death_takes_workers_and_restart_recovers_r_j3() {
    let mut gw = Gateway::start().await;
    gw.model.push(hold("interrupted"));
    let mut c = gw.connect().await;
    c.start_streaming(json!({"message": "hi", "idempotencyKey": "orphan-1"}))
        .await;
    let wpid = gw.worker_pid("main").await.unwrap();
    gw.stop(Signal::SIGKILL).await;
    let took = gone_within(wpid, Duration::from_secs(1)).await;
    assert!(
        took.is_some(),
        "worker {wpid} outlived its supervisor by more than a second"
    );

    gw.spawn().await;
    let mut c = gw.connect().await;
    let w = c
        .call("agent.wait", json!({"runId": "orphan-1", "timeoutMs": 0}))
        .await;
    assert_eq!(w["payload"]["status"], "error");
    assert!(
        w["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("interrupted by worker/gateway crash"),
        "{w}"
    );
    // Issue 10: the replayed final has the shape of any failed run's (`error`, `agentMeta`).
    let id = c
        .send(
            "agent",
            json!({"message": "hi", "idempotencyKey": "orphan-1"}),
        )
        .await;
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted by worker/gateway crash"),
        "{fin}"
    );
    let meta = &fin["payload"]["result"]["meta"];
    assert_eq!(meta["agentMeta"]["agentId"], "main", "{fin}");
    assert_eq!(meta["agentMeta"]["sessionKey"], "agent:main:main", "{fin}");
    assert_eq!(meta["error"]["kind"], "error", "{fin}");
    let (_, fin) = c
        .turn(json!({"message": "after", "idempotencyKey": "orphan-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let db = gw.agent_db("main");
    let status: String = db
        .query_row(
            "SELECT status FROM runs WHERE run_id = 'orphan-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "error");
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    gw.model.release();
    gw.logs.assert_clean(&["Ended runs left open"]);
}

/// R-J4, R-A2: `loopgate drain` lets a slow in-flight turn finish, refuses new runs with a
/// retryable UNAVAILABLE, then the gateway exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_finishes_in_flight_refuses_new_and_exits_zero_r_j4() {
    let mut gw = Gateway::start().await;
    gw.model.push(Step::Text {
        text: "a slow but complete answer".into(),
        chunks: 10,
        delay_ms: 40,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "drain-1"}))
        .await;
    let drain = tokio::process::Command::new(bin("loopgate"))
        .arg("--state-dir")
        .arg(gw.state())
        .args(["drain", "--timeout", "30"])
        .kill_on_drop(true)
        .output();
    let drain = tokio::spawn(drain);
    gw.logs.wait_for("Drain requested by an operator.").await;
    let r = c
        .call(
            "agent",
            json!({"message": "too late", "idempotencyKey": "drain-2"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "UNAVAILABLE");
    assert_eq!(r["error"]["retryable"], true);
    assert_eq!(r["error"]["details"]["reason"], "draining");
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "a slow but complete answer"
    );
    let out = tokio::time::timeout(WAIT, drain)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = tokio::time::timeout(WAIT, gw.child.as_mut().unwrap().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    gw.logs.assert_clean(&[]);
}

/// A drain deadline that passes aborts the rest with stop reason `restart`; waits cut short
/// by the stop report `gateway_draining`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_deadline_aborts_with_restart() {
    let mut gw = Gateway::start().await;
    gw.model.push(hold("never done"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "dd-1"}))
        .await;
    let mut waiter = gw.connect().await;
    let unknown_wait = waiter
        .send(
            "agent.wait",
            json!({"runId": "no-such-run", "timeoutMs": 60000}),
        )
        .await;
    let r = c.call("gateway.drain", json!({"timeoutMs": 200})).await;
    assert_eq!(r["payload"]["draining"], true);
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "timeout", "{fin}");
    assert_eq!(fin["payload"]["stopReason"], "restart");
    let w = waiter.res(&unknown_wait).await;
    assert_eq!(w["payload"]["timeoutPhase"], "gateway_draining", "{w}");
    let status = tokio::time::timeout(WAIT, gw.child.as_mut().unwrap().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Graceful `worker restart` lets the running turn finish, then a new worker serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_worker_restart_keeps_in_flight_runs() {
    let gw = Gateway::start().await;
    gw.model.push(Step::Text {
        text: "finished before restart".into(),
        chunks: 8,
        delay_ms: 30,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "gr-1"}))
        .await;
    let old = gw.worker_pid("main").await.unwrap();
    let r = c.call("worker.restart", json!({"agentId": "main"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let new = r["payload"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(new, old);
    let (_, fin) = c
        .turn(json!({"message": "next", "idempotencyKey": "gr-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    // Forced: the in-flight run errors.
    gw.model.push(hold("cut"));
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "gr-3"}))
        .await;
    let out = gw.cli(&["worker", "restart", "main", "--force"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "error");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("restarted by operator"),
        "{fin}"
    );
    gw.model.release();
    gw.logs.assert_clean(&["Ended runs left open"]);
}

/// R-J4: SIGHUP reloads config: agents added and removed through the one reconcile path;
/// a broken config is refused and the running one kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_agents() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "r1", "agentId": "ops"}),
        )
        .await;
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown agent id"));
    gw.rewrite_config("", "[agents.list.ops]\nname = \"Operations\"\n");
    signal(gw.pid(), Signal::SIGHUP);
    gw.logs.wait_for("Config reloaded.").await;
    let (_, fin) = c
        .turn(json!({"message": "hi ops", "idempotencyKey": "r2", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let a = c.call("agents.list", json!({})).await;
    assert_eq!(a["payload"]["agents"][1]["name"], "Operations");

    std::fs::write(gw.state().join("loopgate.toml"), "[gateway]\nbogus = 1\n").unwrap();
    signal(gw.pid(), Signal::SIGHUP);
    gw.logs.wait_for("config reload failed").await;
    let (_, fin) = c
        .turn(json!({"message": "still", "idempotencyKey": "r3", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "the running config stays");

    gw.rewrite_config("", "");
    signal(gw.pid(), Signal::SIGHUP);
    gw.logs.wait_for_count("Config reloaded.", 2).await;
    gw.logs.wait_for("Agent removed").await;
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "r4", "agentId": "ops"}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown agent id"),
        "{r}"
    );
    gw.logs.assert_clean(&["config reload failed"]);
}

/// R-J5: READY=1 once serving, WATCHDOG=1 when asked, STOPPING=1 on drain, on a real
/// NOTIFY_SOCKET datagram socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sd_notify_ready_watchdog_stopping_r_j5() {
    let mut gw = Gateway::start().await;
    gw.stop(Signal::SIGTERM).await;
    let sock_path = gw.state().join("notify.sock");
    let sock = tokio::net::UnixDatagram::bind(&sock_path).unwrap();
    gw.spawn_with_env(&[
        ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
        ("WATCHDOG_USEC", "200000"),
    ])
    .await;
    async fn recv(sock: &tokio::net::UnixDatagram, want: &str) -> String {
        let mut buf = vec![0u8; 4096];
        loop {
            let n = tokio::time::timeout(WAIT, sock.recv(&mut buf))
                .await
                .expect("a notification")
                .unwrap();
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            if msg.contains(want) {
                return msg;
            }
        }
    }
    let ready = recv(&sock, "READY=1").await;
    assert!(ready.contains(&format!("MAINPID={}", gw.pid())), "{ready}");
    recv(&sock, "WATCHDOG=1").await;
    let pid = gw.pid();
    signal(pid, Signal::SIGTERM);
    recv(&sock, "STOPPING=1").await;
    let status = tokio::time::timeout(WAIT, gw.child.as_mut().unwrap().wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The systemd unit parses (with `systemd-analyze verify` where available).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_unit_is_valid() {
    let unit_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/loopgate.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let mut section = String::new();
    let mut keys = std::collections::HashMap::new();
    for line in unit
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if line.starts_with('[') {
            assert!(line.ends_with(']'), "bad section line {line:?}");
            section = line.to_owned();
        } else {
            let (k, v) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not key=value: {line:?}"));
            keys.insert(format!("{section}{}", k.trim()), v.trim().to_owned());
        }
    }
    assert_eq!(keys["[Service]Type"], "notify");
    assert_eq!(keys["[Service]KillMode"], "mixed");
    assert_eq!(keys["[Service]RestartPreventExitStatus"], "78");
    assert_eq!(keys["[Service]Restart"], "on-failure");
    let stop: u64 = keys["[Service]TimeoutStopSec"].parse().unwrap();
    assert!(stop > 300, "TimeoutStopSec above the default drain timeout");
    assert!(keys.contains_key("[Service]WatchdogSec"));
    assert!(keys.contains_key("[Service]StateDirectory"));
    if let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    {
        if out.status.success() {
            let dir = tempfile::tempdir().unwrap();
            let real = unit.replace("/usr/local/bin/loopgate", bin("loopgate").to_str().unwrap());
            let p = dir.path().join("loopgate.service");
            std::fs::write(&p, real).unwrap();
            let v = std::process::Command::new("systemd-analyze")
                .arg("verify")
                .arg(&p)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&v.stderr);
            assert!(
                v.status.success() || !err.contains("loopgate.service:"),
                "systemd-analyze verify: {err}"
            );
        }
    }
}

/// Regression: workers of several agents starting at the same moment each get their own link
/// (they once shared a socket path and were rejected as impostors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_of_many_agents_start_concurrently() {
    let gw = Gateway::start_with("[agents.list.a1]\n[agents.list.a2]\n[agents.list.a3]\n").await;
    let mut c = gw.connect().await;
    let mut ids = Vec::new();
    for agent in ["main", "a1", "a2", "a3"] {
        ids.push(
            c.send(
                "agent",
                json!({"message": "hi", "idempotencyKey": format!("cc-{agent}"), "agentId": agent}),
            )
            .await,
        );
    }
    for id in ids {
        assert_eq!(c.res(&id).await["payload"]["status"], "accepted");
        let fin = c.res(&id).await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    let s = gw.status().await;
    assert!(
        s["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["state"] == "ready"),
        "{s}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-H2 `gateway_start` / `gateway_stop`: the supervisor runs them itself (in the state dir)
/// with the gateway's addresses; `gateway_stop` has finished when the process exits, and a
/// failing gateway hook is logged, never fatal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_start_and_stop_hooks_r_h2() {
    let fifo_dir = tempfile::tempdir().unwrap();
    let fifo = fifo_dir.path().join("start.fifo");
    let mut hooks = loopgate_tests::HookFifo::create(&fifo);
    let mut gw = Gateway::start_with(&format!(
        "[[hooks.gateway_start]]\n\
         command = [\"sh\", \"-c\", \"e=$(cat); printf '%s\\\\n' \\\"$e\\\" > {}\"]\n\n\
         [[hooks.gateway_stop]]\ncommand = [\"sh\", \"-c\", \"exit 9\"]\npriority = 5\n\n\
         [[hooks.gateway_stop]]\ncommand = [\"sh\", \"-c\", \"cat > stopped.json\"]\n",
        fifo.display()
    ))
    .await;
    let started = hooks.next().await;
    assert_eq!(started["event"], "gateway_start", "{started}");
    assert_eq!(started["wsUrl"], format!("ws://{}", gw.ws_addr()));
    assert_eq!(started["pid"], gw.pid());
    // The gateway serves normally with gateway hooks configured (workers do not get them).
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "gh-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let status = gw.stop(Signal::SIGTERM).await;
    assert!(status.success(), "{status:?}");
    let stopped = std::fs::read_to_string(gw.state().join("stopped.json"))
        .expect("gateway_stop ran before the gateway exited");
    let stopped: serde_json::Value = serde_json::from_str(&stopped).unwrap();
    assert_eq!(stopped["event"], "gateway_stop");
    assert_eq!(stopped["reason"], "drain");
    gw.logs.assert_clean(&["Gateway hook failed"]);
    assert!(gw
        .logs
        .all()
        .iter()
        .any(|l| l.contains("Gateway hook failed") && l.contains("exit status: 9")));
}
