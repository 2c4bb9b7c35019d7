//! Prometheus metrics on `GET /metrics` (issue 14, item 5), read with a Prometheus text
//! parser: counters move after a turn, a retry, a tool call and a worker crash; the endpoint
//! is off by default and needs the gateway token beyond loopback.

use loopgate_tests::{hold, reply, tool_call, Gateway};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use prometheus_parse::{Sample, Scrape, Value};
use scripted_model::Step;
use serde_json::json;

const ON: &str =
    "retry_base_seconds = 0.01\nretry_max_seconds = 0.05\n\n[gateway.metrics]\nenabled = true\n";

async fn scrape(gw: &Gateway) -> Scrape {
    let r = gw.http("GET", "/metrics", &[]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ct = r.header("content-type").unwrap_or_default().to_owned();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let text = r.text();
    assert!(text.ends_with("# EOF\n"), "{text}");
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("a Prometheus text scrape")
}

fn matches(s: &Sample, name: &str, labels: &[(&str, &str)]) -> bool {
    s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
}

/// The value of the one sample `name` with `labels` (0 when there is none yet).
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| matches(s, name, labels))
        .collect();
    match found.as_slice() {
        [] => 0.0,
        [s] => match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{name} is not a number: {other:?}"),
        },
        many => panic!("{name} {labels:?} is ambiguous: {many:?}"),
    }
}

/// A histogram's observation count (its `+Inf` bucket).
fn observed(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| matches(s, name, labels))
        .find_map(|s| match &s.value {
            Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map(|b| b.count),
            _ => None,
        })
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_after_a_turn_a_retry_a_tool_and_a_crash() {
    let gw = Gateway::start_with(ON).await;
    let main = [("agent", "main")];
    let before = scrape(&gw).await;
    assert_eq!(value(&before, "loopgate_runs_accepted_total", &main), 0.0);
    assert!(value(&before, "loopgate_uptime_seconds", &[]) > 0.0);

    // A turn whose first model attempt fails with a 500 and is retried.
    gw.model.push(Step::HttpError {
        status: 500,
        message: "try again".into(),
        retry_after_s: None,
    });
    gw.model.push(reply("fine"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "m-1", "sessionKey": "m"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let s = scrape(&gw).await;
    assert_eq!(value(&s, "loopgate_runs_accepted_total", &main), 1.0);
    assert_eq!(
        value(
            &s,
            "loopgate_runs_ended_total",
            &[("agent", "main"), ("status", "ok")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "loopgate_model_retries_total",
            &[("agent", "main"), ("reason", "server_error")]
        ),
        1.0
    );
    let requests = |s: &Scrape, outcome: &str| {
        value(
            s,
            "loopgate_model_requests_total",
            &[
                ("agent", "main"),
                ("provider", "scripted"),
                ("api", "openai-completions"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(requests(&s, "http_5xx"), 1.0);
    assert_eq!(requests(&s, "ok"), 1.0);
    assert_eq!(observed(&s, "loopgate_run_duration_seconds", &main), 1.0);
    assert_eq!(
        observed(&s, "loopgate_time_to_first_token_seconds", &main),
        1.0
    );
    assert!(observed(&s, "loopgate_sqlite_commit_seconds", &[("db", "gateway")]) > 0.0);
    assert!(
        observed(
            &s,
            "loopgate_sqlite_commit_seconds",
            &[("db", "agent"), ("agent", "main")]
        ) > 0.0
    );
    assert_eq!(value(&s, "loopgate_worker_up", &main), 1.0);
    assert_eq!(value(&s, "loopgate_worker_breaker_open", &main), 0.0);
    assert_eq!(value(&s, "loopgate_queue_depth", &main), 0.0);
    assert!(value(&s, "loopgate_connections", &[]) >= 1.0);
    // No per-session or per-run labels anywhere.
    for sample in &s.samples {
        for key in sample.labels.keys() {
            assert!(
                [
                    "agent", "status", "reason", "provider", "api", "outcome", "tool", "result",
                    "cause", "db", "state", "action", "le"
                ]
                .contains(&key.as_str()),
                "unexpected label {key} on {}",
                sample.metric
            );
        }
    }

    // A tool call.
    gw.model.push(tool_call("call-1", "ls", "{}"));
    gw.model.push(reply("listed"));
    let (_, fin) = c
        .turn(json!({"message": "list", "idempotencyKey": "m-2", "sessionKey": "m"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let s = scrape(&gw).await;
    assert_eq!(
        value(
            &s,
            "loopgate_tool_calls_total",
            &[("agent", "main"), ("tool", "ls"), ("result", "ok")]
        ),
        1.0
    );
    assert_eq!(requests(&s, "ok"), 3.0);

    // A crash mid-run: the worker is killed, its run ends as an error.
    gw.model.push(hold("never finished"));
    let id = c
        .start_streaming(json!({"message": "crash", "idempotencyKey": "m-3", "sessionKey": "m"}))
        .await;
    let pid = gw.worker_pid("main").await.expect("a worker");
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let s = scrape(&gw).await;
    assert_eq!(
        value(
            &s,
            "loopgate_worker_exits_total",
            &[("agent", "main"), ("cause", "crash")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "loopgate_runs_ended_total",
            &[("agent", "main"), ("status", "error")]
        ),
        1.0
    );
    // The next turn starts a new worker; the earlier workers' counts are kept.
    gw.model.push(reply("back"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "m-4", "sessionKey": "m"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let s = scrape(&gw).await;
    assert_eq!(value(&s, "loopgate_worker_restarts_total", &main), 1.0);
    assert_eq!(requests(&s, "ok"), 4.0);
    assert_eq!(value(&s, "loopgate_runs_accepted_total", &main), 4.0);
}

/// Off by default; beyond loopback only with the gateway token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_off_by_default_and_need_the_token_beyond_loopback() {
    let gw = Gateway::start().await;
    let r = gw.http("GET", "/metrics", &[]).await;
    assert_eq!(r.status, 404, "{}", r.text());
    drop(gw);

    let gw = Gateway::start_gateway_keys(
        "bind = \"0.0.0.0\"\n",
        "\n[gateway.metrics]\nenabled = true\n",
    )
    .await;
    let r = gw.http("GET", "/metrics", &[]).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = gw
        .http("GET", "/metrics", &["Authorization: Bearer wrong"])
        .await;
    assert_eq!(r.status, 401, "{}", r.text());
    let auth = format!("Authorization: Bearer {}", gw.token());
    let r = gw.http("GET", "/metrics", &[auth.as_str()]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("loopgate_uptime_seconds"), "{}", r.text());
}
