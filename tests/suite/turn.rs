//! A turn end to end: CLI streaming, events, history and prompt assembly, provider failures.

use loopgate_tests::{alive, Gateway};
use scripted_model::Step;
use serde_json::{json, Value};

fn text(t: &str, chunks: usize) -> Step {
    Step::Text {
        text: t.into(),
        chunks,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    }
}

/// R-A4: `loopgate agent` streams the reply and exits 0; the worker is its own process (R-J2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_turn_streams_reply_and_worker_is_its_own_process_r_a4_r_j2() {
    let gw = Gateway::start().await;
    gw.model.push(text("The quick brown fox jumps.", 5));
    let out = gw.cli(&["agent", "--message", "tell me"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "The quick brown fox jumps.\n"
    );

    let out = gw.cli(&["status", "--json"]).await;
    assert_eq!(out.status.code(), Some(0));
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["supervisor"]["pid"], gw.pid());
    let w = &status["workers"][0];
    assert_eq!(w["agentId"], "main");
    assert_eq!(w["state"], "ready");
    let wpid = w["pid"].as_u64().unwrap() as u32;
    assert_ne!(wpid, gw.pid(), "worker runs in its own process");
    assert!(alive(wpid));
    let human = gw.cli(&["status"]).await;
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("main") && human.contains(&wpid.to_string()),
        "{human}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-A1, R-D1: accepted before model work, then events in order with per-run seq, then final.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_turn_events_in_order_r_a1_r_d1() {
    let gw = Gateway::start().await;
    gw.model.push(text("abcdefgh", 4));
    let mut c = gw.connect().await;
    let (acc, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "run-events"}))
        .await;
    let p = &acc["payload"];
    assert_eq!(p["runId"], "run-events");
    assert_eq!(p["sessionKey"], "agent:main:main");
    assert_eq!(p["agentId"], "main");
    assert!(p["acceptedAt"].as_u64().unwrap() > 0);

    let f = &fin["payload"];
    assert_eq!(fin["ok"], true);
    assert_eq!(f["status"], "ok");
    assert_eq!(f["summary"], "completed");
    assert_eq!(f["result"]["payloads"][0]["text"], "abcdefgh");
    let meta = &f["result"]["meta"];
    assert!(meta["durationMs"].is_u64());
    assert_eq!(meta["agentMeta"]["provider"], "scripted");
    assert_eq!(meta["agentMeta"]["model"], "scripted-1");
    assert!(meta["agentMeta"]["usage"]["total"].as_u64().unwrap() > 0);

    // The lifecycle end may arrive just after the final res: wait for it.
    c.agent_event("run-events", |p| p["data"]["phase"] == "end")
        .await;
    let events: Vec<&Value> = c
        .seen
        .iter()
        .filter(|f| {
            f["type"] == "event" && f["event"] == "agent" && f["payload"]["runId"] == "run-events"
        })
        .collect();
    let streams: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["payload"]["stream"].as_str().unwrap(),
                e["payload"]["data"]["phase"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(streams.first().map(String::as_str), Some("lifecycle:start"));
    assert_eq!(streams.last().map(String::as_str), Some("lifecycle:end"));
    let assistant: Vec<&&Value> = events
        .iter()
        .filter(|e| e["payload"]["stream"] == "assistant")
        .collect();
    assert!(!assistant.is_empty());
    let mut acc_text = String::new();
    for a in &assistant {
        acc_text.push_str(a["payload"]["data"]["delta"].as_str().unwrap());
        assert_eq!(
            a["payload"]["data"]["text"],
            acc_text.as_str(),
            "text is cumulative"
        );
        assert_eq!(a["payload"]["sessionKey"], "agent:main:main");
    }
    assert_eq!(acc_text, "abcdefgh");
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["payload"]["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] > w[0]),
        "per-run seq increases: {seqs:?}"
    );
    assert_eq!(seqs[0], 1);
    // Per-connection envelope seq is contiguous.
    let env: Vec<u64> = c
        .seen
        .iter()
        .filter(|f| f["type"] == "event")
        .filter_map(|f| f["seq"].as_u64())
        .collect();
    assert!(
        env.windows(2).all(|w| w[1] == w[0] + 1),
        "envelope seq contiguous: {env:?}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-B1, R-B6, R-B7: history from the transcript, bootstrap files and extraSystemPrompt in
/// the system prompt; user and assistant messages with usage in the agent db.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_bootstrap_and_transcript_r_b6_r_b7() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("AGENTS.md"), "Always answer in haiku.").unwrap();
    std::fs::write(ws.join("SOUL.md"), "x".repeat(30_000)).unwrap();
    let mut c = gw.connect().await;
    gw.model.push(text("first answer", 2));
    c.turn(json!({"message": "first question", "idempotencyKey": "h1"}))
        .await;
    gw.model.push(text("second answer", 2));
    let (_, fin) = c
        .turn(json!({"message": "second question", "idempotencyKey": "h2", "extraSystemPrompt": "Be terse."}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");

    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let system = msgs[0]["content"].as_str().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert!(
        system.contains("Always answer in haiku."),
        "AGENTS.md injected"
    );
    assert!(
        system.contains("## SOUL.md") && system.contains("truncated"),
        "SOUL.md capped at 20 000 chars"
    );
    assert!(system.contains(&"x".repeat(20_000)) && !system.contains(&"x".repeat(20_001)));
    assert!(system.ends_with("Be terse."));
    let turns: Vec<(String, String)> = msgs[1..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        turns,
        vec![
            ("user".into(), "first question".into()),
            ("assistant".into(), "first answer".into()),
            ("user".into(), "second question".into())
        ]
    );

    let db = gw.agent_db("main");
    let rows: Vec<(String, String)> = db
        .prepare("SELECT role, entry_json FROM transcript ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 4);
    let last: Value = serde_json::from_str(&rows[3].1).unwrap();
    assert_eq!(last["message"]["role"], "assistant");
    assert!(
        last["message"]["usage"]["totalTokens"].as_u64().unwrap() > 0,
        "usage recorded"
    );
    let claims: i64 = db
        .query_row(
            "SELECT count(*) FROM sessions WHERE active_writer_run_id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(claims, 0, "writer claims are released after each run");
    gw.logs.assert_clean(&[]);
}

/// A provider HTTP error that is not worth a retry (4xx other than 429) ends the run with a
/// clear error; the next turn on the session works. (Transient ones are retried:
/// `suite::retries`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_http_error_then_next_turn_works_r_b4() {
    let gw = Gateway::start().await;
    gw.model.push(Step::HttpError {
        status: 400,
        message: "upstream exploded".into(),
        retry_after_s: None,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "e1"}))
        .await;
    let p = &fin["payload"];
    assert_eq!(p["status"], "error", "{fin}");
    let err = p["error"].as_str().unwrap();
    assert!(
        err.contains("HTTP 400") && err.contains("upstream exploded"),
        "{err}"
    );
    let ev = c
        .agent_event("e1", |p| {
            p["stream"] == "lifecycle" && p["data"]["phase"] == "error"
        })
        .await;
    assert!(ev["payload"]["data"]["error"]
        .as_str()
        .unwrap()
        .contains("HTTP 400"));
    let wait = c.call("agent.wait", json!({"runId": "e1"})).await;
    assert_eq!(wait["payload"]["status"], "error");
    assert!(wait["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("upstream exploded"));

    let out = gw.cli(&["agent", "--message", "again"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Echo: again\n");

    // The CLI exits 1 on an error with one clear line on stderr.
    gw.model.push(Step::HttpError {
        status: 401,
        message: "bad key".into(),
        retry_after_s: None,
    });
    let out = gw.cli(&["agent", "--message", "x"]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("HTTP 401") && stderr.lines().count() == 1,
        "{stderr}"
    );
    gw.logs.assert_clean(&[]);
}

/// A stalled stream trips the model idle timeout (R-B4); a dropped stream is an error; the
/// next turn on the session works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_dropped_streams_end_with_errors_r_b4() {
    // A short model idle window for this provider.
    let gw = Gateway::start_opts("", 0.5).await;

    gw.model.push(Step::Stall {
        text: "partial reply here".into(),
        chunks: 3,
        after_chunks: 1,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "stall-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("idle timeout"),
        "{fin}"
    );

    // Dropped after text was shown: an error (it cannot be retried without showing it twice).
    gw.model.push(Step::Disconnect {
        text: "cut off mid sentence".into(),
        chunks: 4,
        after_chunks: 2,
        after_release: true,
    });
    let id = c
        .send(
            "agent",
            json!({"message": "hi", "idempotencyKey": "drop-1"}),
        )
        .await;
    c.agent_event("drop-1", |p| p["stream"] == "assistant")
        .await;
    gw.model.release();
    let fin = c
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["summary"].is_string()
        })
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["error"].as_str().unwrap();
    assert!(err.contains("model request failed"), "{err}");

    let (_, fin) = c
        .turn(json!({"message": "still there?", "idempotencyKey": "after"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "Echo: still there?"
    );
    gw.logs.assert_clean(&[]);
}

/// The `timeout` param (seconds) bounds the run; it ends with status `timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_timeout_param_ends_run_as_timeout_r_b4() {
    let gw = Gateway::start().await;
    gw.model.push(Step::Hold {
        text: "never finished".into(),
        chunks: 2,
        after_chunks: 1,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "to-1", "timeout": 1}))
        .await;
    assert_eq!(fin["payload"]["status"], "timeout", "{fin}");
    assert_eq!(fin["payload"]["stopReason"], "timeout");
    let out = gw.cli(&["wait", "to-1"]).await;
    assert_eq!(out.status.code(), Some(2), "wait exit code 2 on timeout");
    gw.model.release();
    gw.logs.assert_clean(&[]);
}

/// `agent` params `provider` / `model` (OpenClaw's per-run override, `openclaw agent --model`):
/// `"<provider>/<model>"` or a model name on the agent's provider runs there; an unknown
/// provider or a provider without a model is refused before the run is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_run_provider_and_model_params() {
    let (gw, second) = Gateway::start_with_second().await;
    let mut c = gw.connect().await;
    second.push(text("from second", 2));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "pm-1", "model": "second/big-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"],
        "second"
    );
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["model"],
        "big-2"
    );
    assert_eq!(second.requests()[0].body["model"], "big-2");

    // A model id with a slash on the agent's own provider is spelled with that provider;
    // bare, its first segment is read as the provider (see the refusals below).
    gw.model.push(text("own provider", 2));
    let (_, fin) = c
        .turn(
            json!({"message": "hi", "idempotencyKey": "pm-2", "model": "scripted/org/other-model"}),
        )
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(gw.model.requests()[0].body["model"], "org/other-model");
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"],
        "scripted"
    );

    for (params, needle) in [
        (
            json!({"provider": "nope", "model": "m"}),
            "unknown provider \"nope\"",
        ),
        (json!({"provider": "second"}), "needs a model"),
        // Issue 12: this used to run on the agent's provider as the model "org/other-model".
        (
            json!({"model": "org/other-model"}),
            "unknown provider \"org\"",
        ),
        (json!({"model": " "}), "non-empty"),
    ] {
        let mut p = json!({"message": "hi", "idempotencyKey": "pm-bad"});
        p.as_object_mut()
            .unwrap()
            .extend(params.as_object().unwrap().clone());
        let r = c.call("agent", p).await;
        assert_eq!(r["ok"], false, "{r}");
        assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(needle),
            "{r}"
        );
    }
    // As OpenClaw: only operator.admin may pick a run's model.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.write"]);
    let mut writer = loopgate_tests::Client::connect_with(&gw.socket(), params).await;
    let r = writer
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "pm-w", "model": "second/big-2"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not authorized"));

    // The loopgate CLI's --model sends the same param.
    second.push(text("cli pick", 1));
    let out = gw
        .cli(&["agent", "--model", "second/big-3", "--message", "via cli"])
        .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "cli pick");
    assert_eq!(second.requests()[1].body["model"], "big-3");
    // Refused runs were never accepted: the id is still free.
    gw.model.push(text("fine", 1));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "pm-bad"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[]);
}
