//! Stuck-session diagnostics on the real binaries (issue 14, R-I1..R-I3): classification of
//! quiet sessions, abort-drain of stalled runs past the abort threshold, recovery of stale
//! bookkeeping, and what operators see (`diagnostic` events, `diagnostics.lanes`, `loopgate
//! status`, the log line with its transcript excerpt). Thresholds are lowered by config.

use loopgate_tests::{client::Client, hold, reply, streamed, Gateway};
use serde_json::{json, Value};

/// warn 1 s, abort threshold max(3 s, 3 x 1 s) = 3 s; the worker observes every 250 ms.
const FAST: &str =
    "\n[diagnostics]\nstuck_session_warn_ms = 1000\nstuck_session_abort_min_ms = 3000\n";

fn diagnostic<'a>(kind: &'a str, session: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |f: &Value| {
        f["type"] == "event"
            && f["event"] == "diagnostic"
            && f["payload"]["type"] == kind
            && f["payload"]["sessionKey"]
                .as_str()
                .is_some_and(|k| k.ends_with(session))
    }
}

fn diagnostics_seen(c: &Client, session: &str) -> Vec<Value> {
    c.seen
        .iter()
        .filter(|f| {
            f["event"] == "diagnostic"
                && f["payload"]["sessionKey"]
                    .as_str()
                    .is_some_and(|k| k.ends_with(session))
        })
        .cloned()
        .collect()
}

/// R-I1, R-I2: a model that goes silent is `long_running` (an owned model call) after the
/// warning threshold, `stalled` at the abort threshold, then abort-drained with its own stop
/// reason; the message queued behind it then runs. Operators see each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_model_is_long_running_then_stalled_then_abort_drained_r_i1_r_i2() {
    let gw = Gateway::start_with(&format!("{FAST}\n[gateway.metrics]\nenabled = true\n")).await;
    gw.model.push(hold("first reply"));
    gw.model.push(reply("second reply"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "st-1", "sessionKey": "quiet"}))
        .await;
    let second = c
        .send(
            "agent",
            json!({"message": "two", "idempotencyKey": "st-2", "sessionKey": "quiet", "queueMode": "followup"}),
        )
        .await;
    let long = c
        .wait_for(diagnostic("session.long_running", "quiet"))
        .await;
    let p = &long["payload"];
    assert_eq!(p["reason"], "active_model_call_without_progress", "{long}");
    assert_eq!(p["activeWorkKind"], "model_call", "{long}");
    assert_eq!(p["runId"], "st-1", "{long}");
    assert_eq!(p["queueDepth"], 1, "{long}");
    assert_eq!(p["agentId"], "main", "{long}");
    assert!(p["ageMs"].as_u64().unwrap() >= 1000, "{long}");
    // diagnostics.lanes shows it at once, in OpenClaw's shape plus the session lanes.
    let lanes = c.call("diagnostics.lanes", json!({})).await;
    let l = &lanes["payload"];
    assert_eq!(l["lanes"][0]["lane"], "agent:main", "{lanes}");
    assert_eq!(l["lanes"][0]["activeCount"], 1, "{lanes}");
    assert_eq!(l["dynamic"]["queuedCount"], 1, "{lanes}");
    let s = l["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["runId"] == "st-1")
        .unwrap_or_else(|| panic!("{lanes}"));
    assert_eq!(s["state"], "long_running", "{lanes}");
    assert_eq!(s["activeWorkKind"], "model_call", "{lanes}");
    // `loopgate status` names it.
    let out = gw.cli(&["status"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sessions needing attention (1)"), "{text}");
    assert!(text.contains("long_running"), "{text}");

    let stalled = c.wait_for(diagnostic("session.stalled", "quiet")).await;
    assert!(
        stalled["payload"]["ageMs"].as_u64().unwrap() >= 3000,
        "not before the abort threshold: {stalled}"
    );
    assert_eq!(stalled["payload"]["classification"], "stalled_agent_run");
    let req = c
        .wait_for(diagnostic("session.recovery.requested", "quiet"))
        .await;
    assert_eq!(req["payload"]["action"], "abort_run", "{req}");
    assert_eq!(req["payload"]["runId"], "st-1", "{req}");
    let fin = c.res(&first).await;
    // An aborted run's wire status, as OpenClaw's, with its own stop reason.
    assert_eq!(fin["payload"]["status"], "timeout", "{fin}");
    assert_eq!(fin["payload"]["stopReason"], "stalled", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("stopped making progress"),
        "{fin}"
    );
    let done = c
        .wait_for(diagnostic("session.recovery.completed", "quiet"))
        .await;
    assert_eq!(done["payload"]["status"], "aborted", "{done}");
    // The queued message runs next.
    let acc = c.res(&second).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    let fin2 = c.res(&second).await;
    assert_eq!(fin2["payload"]["status"], "ok", "{fin2}");
    assert_eq!(c.assistant_text("st-2"), "second reply");
    // The agent db recorded the stop reason.
    let stop: String = gw
        .agent_db("main")
        .query_row(
            "SELECT stop_reason FROM runs WHERE run_id = 'st-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stop, "stalled");
    // Counted for `/metrics`.
    let m = gw.http("GET", "/metrics", &[]).await.text();
    assert!(
        m.contains(r#"loopgate_session_diagnostics_total{agent="main",state="stalled",reason="active_work_without_progress"}"#),
        "{m}"
    );
    assert!(
        m.contains(r#"loopgate_session_recoveries_total{agent="main",action="abort_run",status="aborted"} 1"#),
        "{m}"
    );
    // Healthy again: nothing is flagged.
    let lanes = c.call("diagnostics.lanes", json!({})).await;
    assert!(
        lanes["payload"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"].is_null()),
        "{lanes}"
    );
}

/// R-I1: a slow model that keeps streaming is never called stalled (nor anything else),
/// though the run lasts longer than the abort threshold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_but_streaming_model_is_never_flagged_r_i1() {
    let gw = Gateway::start_with(FAST).await;
    let text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
    gw.model.push(streamed(text, 14, 300));
    let mut c = gw.connect().await;
    let started = std::time::Instant::now();
    let (_, fin) = c
        .turn(json!({"message": "slowly", "idempotencyKey": "slow-1", "sessionKey": "slow"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(3900));
    assert_eq!(c.assistant_text("slow-1"), text);
    // A report would have been published before the run's terminal.
    assert_eq!(diagnostics_seen(&c, "slow"), Vec::<Value>::new());
}

/// R-I2: a run that resumes between the observation that found it stalled and the recovery
/// is not aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_resumes_after_the_observation_is_not_aborted_r_i2() {
    // Observed every 750 ms: the recovery would be due one observation after the report.
    let gw = Gateway::start_with(
        "\n[diagnostics]\nstuck_session_warn_ms = 3000\nstuck_session_abort_min_ms = 3000\n",
    )
    .await;
    gw.model.push(hold("back again"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(
            json!({"message": "pause", "idempotencyKey": "rs-1", "sessionKey": "resume"}),
        )
        .await;
    c.wait_for(diagnostic("session.stalled", "resume")).await;
    gw.model.release();
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(c.assistant_text("rs-1"), "back again");
    for f in diagnostics_seen(&c, "resume") {
        assert_ne!(f["payload"]["type"], "session.recovery.requested", "{f}");
    }
}

/// R-I1, R-I2, R-I3: a writer claim no live run holds (stale bookkeeping, here left by a
/// competing writer) is `stuck`; recovery releases it and the session works again. The log
/// line carries the session's last assistant text, cut to 140 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_claim_is_stuck_then_released_with_an_excerpt_r_i1_r_i2_r_i3() {
    let gw = Gateway::start_with(FAST).await;
    let long = format!("Here is what I found: {}", "lorem ipsum dolor ".repeat(20));
    gw.model.push(reply(&long));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "cl-1", "sessionKey": "claimed"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let n = gw
        .agent_db("main")
        .execute(
            "UPDATE sessions SET active_writer_run_id = 'ghost-run' WHERE session_key LIKE '%claimed'",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);
    let stuck = c.wait_for(diagnostic("session.stuck", "claimed")).await;
    assert_eq!(stuck["payload"]["reason"], "stale_session_state", "{stuck}");
    assert_eq!(stuck["payload"]["activeWorkKind"], "claim", "{stuck}");
    assert_eq!(stuck["payload"]["state"], "idle", "{stuck}");
    let done = c
        .wait_for(diagnostic("session.recovery.completed", "claimed"))
        .await;
    assert_eq!(done["payload"]["action"], "release_claim", "{done}");
    assert_eq!(done["payload"]["status"], "released", "{done}");
    let claim: Option<String> = gw
        .agent_db("main")
        .query_row(
            "SELECT active_writer_run_id FROM sessions WHERE session_key LIKE '%claimed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(claim, None);
    // The lane works again: a reset is no longer refused, a turn runs.
    let reset = c.call("sessions.reset", json!({"key": "claimed"})).await;
    assert_eq!(reset["ok"], true, "{reset}");
    gw.model.push(reply("fine"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "cl-2", "sessionKey": "claimed"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    // The log line: OpenClaw's words, the excerpt at most 140 characters.
    let line = gw.logs.wait_for("stuck session").await;
    let excerpt = field(&line, "last_assistant");
    assert!(excerpt.starts_with("Here is what I found: lorem"), "{line}");
    assert_eq!(excerpt.chars().count(), 140, "{line}");
    assert!(excerpt.ends_with("..."), "{line}");
    let rec = gw.logs.wait_for("stuck session recovery").await;
    assert!(rec.contains("release_claim"), "{rec}");
}

/// A string field of a relayed JSON log line (`"name":"value"` or `name="value"`).
fn field(line: &str, name: &str) -> String {
    let json_key = format!("\"{name}\":\"");
    let text_key = format!("{name}=\"");
    let start = line
        .find(&json_key)
        .map(|i| i + json_key.len())
        .or_else(|| line.find(&text_key).map(|i| i + text_key.len()))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    let rest = &line[start..];
    let end = rest.find('"').unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// R-I2: a pending exec approval protects its run: it stays `long_running` past the abort
/// threshold and is never aborted by recovery; the command approved after that starts with
/// a fresh quiet time (a quiet 2 s command is not aborted for the operator's wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_protects_its_run_r_i2() {
    let gw = Gateway::start_with(&format!(
        "{FAST}\n[agents.defaults.tools.exec]\nsecurity = \"ask\"\n"
    ))
    .await;
    gw.model.push(loopgate_tests::tool_call(
        "call-1",
        "exec",
        r#"{"command":"sleep 2"}"#,
    ));
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let id = c
        .send(
            "agent",
            json!({"message": "run it", "idempotencyKey": "ap-1", "sessionKey": "asking"}),
        )
        .await;
    let req = c
        .wait_for(|f| f["event"] == "exec.approval.requested")
        .await;
    let approval = req["payload"]["id"].as_str().unwrap().to_owned();
    let long = c
        .wait_for(diagnostic("session.long_running", "asking"))
        .await;
    assert_eq!(long["payload"]["reason"], "human_input_wait", "{long}");
    // Past the abort threshold, still only long-running (re-reported with back-off).
    let again = c
        .wait_for(|f| {
            diagnostic("session.long_running", "asking")(f)
                && f["payload"]["ageMs"].as_u64().unwrap_or(0) >= 3000
        })
        .await;
    assert_eq!(again["payload"]["reason"], "human_input_wait", "{again}");
    let r = c
        .call(
            "exec.approval.resolve",
            json!({"id": approval, "decision": "allow-once"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    c.res(&id).await;
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let result = loopgate_tests::tool_result(&gw, "call-1");
    assert!(!result.contains("denied"), "the command ran: {result}");
    for f in diagnostics_seen(&c, "asking") {
        let kind = f["payload"]["type"].as_str().unwrap_or("");
        assert!(!kind.starts_with("session.recovery"), "no recovery: {f}");
    }
}
