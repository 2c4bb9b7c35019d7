//! `loopgate serve` as a process: the state-dir lock, config errors, routing refusals.

use std::time::{Duration, Instant};

use loopgate_tests::{bin, Gateway, WAIT};
use serde_json::json;

/// R-C3: a second gateway on the same state dir exits 78 within a second naming the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_serve_exits_78_naming_the_holder_r_c3() {
    let gw = Gateway::start().await;
    let started = Instant::now();
    let out = tokio::time::timeout(WAIT, gw.serve_command().output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("pid {}", gw.pid())), "{stderr}");
    // The first gateway is unaffected.
    let mut c = gw.connect().await;
    assert_eq!(c.call("health", json!({})).await["ok"], true);
}

/// R-C3, R-J3: a lock left by a killed gateway never blocks the next start, which serves the
/// same state dir at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_of_a_dead_gateway_does_not_block_restart_r_c3() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "before", "idempotencyKey": "k-before"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let status = gw.stop(nix::sys::signal::Signal::SIGKILL).await;
    assert_eq!(status.code(), None, "killed");
    gw.spawn().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "after", "idempotencyKey": "k-after"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
}

/// Bad config exits 78 naming the file, the line and the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_exits_78_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("loopgate.toml");
    std::fs::write(
        &cfg,
        "[gateway]\nport = 1\n\n[agents.defaults]\ntimeout_secs = 5\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(bin("loopgate"))
        .args(["serve", "--state-dir"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&cfg.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("line 5") && stderr.contains("timeout_secs"),
        "{stderr}"
    );

    // Validation errors (issue 10) name the key and, as `<file>:<line>:`, where it is written.
    std::fs::write(&cfg, "\n[agents.defaults]\nmodel = \"nowhere/m\"\n").unwrap();
    let out = tokio::process::Command::new(bin("loopgate"))
        .args(["serve", "--state-dir"])
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("agents.defaults.model") && stderr.contains("nowhere"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:3: ", cfg.display())),
        "{stderr}"
    );

    // Hooks: unknown events and empty commands are refused by name, at their line.
    for (text, needle, line) in [
        (
            "[[hooks.before_lunch]]\ncommand = [\"true\"]\n",
            "hooks.before_lunch",
            1,
        ),
        (
            "[[hooks.agent_end]]\ncommand = [\"/bin/true\"]\n\n[[hooks.agent_end]]\ncommand = []\n",
            "hooks.agent_end[1].command",
            5,
        ),
        (
            "[[hooks.agent_end]]\ncommand = [\"true\"]\ntimeout_seconds = 0\n",
            "hooks.agent_end[0].timeout_seconds",
            3,
        ),
        (
            "[models.providers.x]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:1/v1\"\ntemperature = 7\n",
            "models.providers.x.temperature",
            4,
        ),
        (
            "[workers]\nheartbeat_timeout_seconds = 1\ncrash_loop_max = 0\n",
            "workers.crash_loop_max",
            3,
        ),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let (code, stderr) = loopgate_tests::serve_refusal(dir.path()).await;
        assert_eq!(code, Some(78));
        assert!(stderr.contains(needle), "{stderr}");
        assert!(
            stderr.contains(&format!("{}:{line}: ", cfg.display())),
            "{stderr}"
        );
    }

    // An explicit --config that does not exist is an error too.
    let out = tokio::process::Command::new(bin("loopgate"))
        .args(["serve", "--state-dir"])
        .arg(dir.path())
        .arg("--config")
        .arg(dir.path().join("missing.toml"))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
}

/// R-A1: an unknown agent id is refused before acceptance; so are bad params.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_agent_and_bad_params_are_refused_before_acceptance_r_a1() {
    let gw = Gateway::start_with("[agents.list.ops]\n").await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "u1", "agentId": "ghost"}),
        )
        .await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["code"], "INVALID_REQUEST");
    assert_eq!(
        r["error"]["message"],
        "invalid agent params: unknown agent id \"ghost\""
    );
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "u2", "sessionKey": "agent:ghost:x"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST");
    let r = c
        .call("agent", json!({"message": "", "idempotencyKey": "u3"}))
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid agent params:"),
        "{r}"
    );
    let r = c.call("agent", json!({"message": "hi"})).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idempotencyKey"),
        "{r}"
    );
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "u4", "bogus": true}),
        )
        .await;
    assert!(
        r["error"]["message"].as_str().unwrap().contains("bogus"),
        "{r}"
    );
    let r = c.call("agent.wait", json!({"timeoutMs": 5})).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid agent.wait params:"),
        "{r}"
    );
    // Nothing was accepted, so no model request was made.
    assert!(gw.model.requests().is_empty());

    // The second configured agent runs in its own worker.
    let (acc, fin) = c
        .turn(json!({"message": "hi ops", "idempotencyKey": "ops-1", "agentId": "ops"}))
        .await;
    assert_eq!(acc["payload"]["sessionKey"], "agent:ops:main");
    assert_eq!(fin["payload"]["status"], "ok");
    let (_, fin) = c
        .turn(json!({"message": "hi main", "idempotencyKey": "main-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let s = c.call("loopgate.status", json!({})).await;
    let workers = s["payload"]["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let pids: Vec<u64> = workers.iter().map(|w| w["pid"].as_u64().unwrap()).collect();
    assert_ne!(pids[0], pids[1], "one worker process per agent");
    assert!(gw.state().join("agents/ops/agent.sqlite").exists());
    gw.logs.assert_clean(&[]);
}
