//! Resume after a disconnect (`agent.events`, a loopgate extension): a client that lost its
//! connection mid-run gets the events it missed, with no gap and no duplicate, then the rest
//! live; past the buffer the answer says `truncated`; `loopgate agent` survives a dropped
//! socket.

use loopgate_tests::{bin, streamed, Client, Gateway};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The `agent` events of `run` a client saw, by seq.
fn agent_events(c: &Client, run: &str) -> Vec<Value> {
    c.seen
        .iter()
        .filter(|f| f["event"] == "agent" && f["payload"]["runId"] == run)
        .map(|f| f["payload"].clone())
        .collect()
}

fn is_end(p: &Value) -> bool {
    p["stream"] == "lifecycle" && p["data"]["phase"] == "end"
}

/// Drop the socket mid-stream, reconnect, ask after the last `seq` seen: the missed events
/// come in the answer, the later ones live; together they continue the run with no gap and
/// no duplicate, up to its terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_resumes_the_stream_after_its_last_seq() {
    let gw = Gateway::start().await;
    let text: String = (0..40).map(|i| format!("w{i} ")).collect();
    gw.model.push(streamed(&text, 40, 25));
    let mut a = gw.connect().await;
    let req = a
        .send(
            "agent",
            json!({"message": "go", "idempotencyKey": "res-1", "sessionKey": "res"}),
        )
        .await;
    a.res(&req).await;
    // A few deltas, then the connection is gone.
    for _ in 0..3 {
        let n = agent_events(&a, "res-1").len();
        a.wait_for(|f| {
            f["event"] == "agent"
                && f["payload"]["runId"] == "res-1"
                && f["payload"]["seq"].as_u64() > Some(n as u64)
        })
        .await;
    }
    let before = agent_events(&a, "res-1");
    let last = before
        .iter()
        .filter_map(|p| p["seq"].as_u64())
        .max()
        .unwrap();
    drop(a);

    let mut b = gw.connect().await;
    let r = b
        .call("agent.events", json!({"runId": "res-1", "afterSeq": last}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let answer = &r["payload"];
    assert_eq!(answer["truncated"], false, "{answer}");
    let mut after: Vec<Value> = answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "agent")
        .map(|e| e["payload"].clone())
        .collect();
    if !after.iter().any(is_end) {
        b.agent_event("res-1", is_end).await;
    }
    after.extend(agent_events(&b, "res-1"));
    let seqs: Vec<u64> = after.iter().filter_map(|p| p["seq"].as_u64()).collect();
    let expected: Vec<u64> = (last + 1..=*seqs.iter().max().unwrap()).collect();
    assert_eq!(seqs, expected, "no gap, no duplicate, in order");
    assert!(after.last().is_some_and(is_end), "ends with the terminal");
    // The deltas before and after make the whole reply.
    let deltas: String = before
        .iter()
        .chain(after.iter())
        .filter(|p| p["stream"] == "assistant")
        .filter_map(|p| p["data"]["delta"].as_str())
        .collect();
    assert_eq!(deltas, text);
}

/// A run whose events outgrew its buffer (its newest 1 MiB is kept): a replay from before
/// what is kept says `truncated` with the first `seq` it still has; one from inside it does
/// not. An unknown run is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_past_the_buffer_says_truncated() {
    let gw = Gateway::start().await;
    // Each delta event carries the text so far: 20 deltas of 32 KiB add up to megabytes
    // (however many the driver merges).
    let text = "x".repeat(20 * 32 * 1024);
    gw.model.push(streamed(&text, 20, 5));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "big", "idempotencyKey": "big-1", "sessionKey": "big"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let mut d = gw.connect().await;
    let r = d
        .call("agent.events", json!({"runId": "big-1", "afterSeq": 0}))
        .await;
    let answer = &r["payload"];
    let n = answer["events"].as_array().map_or(0, Vec::len);
    let size = answer["events"].to_string().len();
    assert_eq!(answer["truncated"], true, "{n} events, {size} bytes");
    assert_eq!(answer["ended"], true);
    let first = answer["firstSeq"].as_u64().unwrap();
    assert!(first > 1, "{first}");
    let events = answer["events"].as_array().unwrap();
    assert_eq!(events[0]["payload"]["seq"].as_u64(), Some(first));
    let bytes: usize = events.iter().map(|e| e["payload"].to_string().len()).sum();
    assert!(bytes <= 1 << 20, "{bytes}");
    let r = d
        .call("agent.events", json!({"runId": "big-1", "afterSeq": first}))
        .await;
    assert_eq!(r["payload"]["truncated"], false, "{r}");
    let r = d
        .call("agent.events", json!({"runId": "nope", "afterSeq": 0}))
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
}

/// Where a [`proxy`]'s first connection is cut.
#[derive(Clone, Copy)]
enum Cut {
    /// After the second `assistant` event reached the client (mid-stream).
    MidStream,
    /// When the client's `agent` request arrives: the request is lost (the gateway never
    /// sees it) and no answer reaches the client.
    AgentRequest,
}

/// A unix-socket proxy to `back` whose first connection is cut at `cut`; later connections
/// pass whole. `accepted` counts the connections.
async fn proxy(
    front: UnixListener,
    back: std::path::PathBuf,
    cut: Cut,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let mut first = true;
    loop {
        let Ok((mut client, _)) = front.accept().await else {
            return;
        };
        let Ok(mut server) = UnixStream::connect(&back).await else {
            return;
        };
        accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cutting = std::mem::take(&mut first);
        tokio::spawn(async move {
            let (mut cr, mut cw) = client.split();
            let (mut sr, mut sw) = server.split();
            let up = async {
                let mut buf = vec![0u8; 65536];
                let mut sent = Vec::new();
                loop {
                    let n = cr.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    sent.extend_from_slice(&buf[..n]);
                    if cutting
                        && matches!(cut, Cut::AgentRequest)
                        && String::from_utf8_lossy(&sent).contains("\"method\":\"agent\"")
                    {
                        return;
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            };
            let down = async {
                let mut seen = 0usize;
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = sr.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    seen += String::from_utf8_lossy(&buf[..n])
                        .matches("\"stream\":\"assistant\"")
                        .count();
                    if cw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    if cutting && matches!(cut, Cut::MidStream) && seen >= 2 {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = up => {}
                _ = down => {}
            }
        });
    }
}

/// `loopgate agent` whose socket drops mid-stream reconnects, resumes after what it printed
/// and prints the whole reply exactly once, exiting 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_survives_a_dropped_socket() {
    let gw = Gateway::start().await;
    let text: String = (0..30).map(|i| format!("p{i} ")).collect();
    gw.model.push(streamed(&text, 30, 30));
    let dir = tempfile::tempdir().unwrap();
    let front = UnixListener::bind(dir.path().join("gateway.sock")).unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(proxy(front, gw.socket(), Cut::MidStream, accepted.clone()));
    let out = cli_through(
        dir.path(),
        &["agent", "--session-key", "cli", "--message", "tell me"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{text}\n"));
    assert!(
        accepted.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "it reconnected"
    );
}

/// `loopgate agent` whose socket drops after it sent the request and before any answer
/// (the request lost on the way) sends it again with the same key: one run, its reply
/// printed once, exit 0. (Before, it asked `agent.events` for a run the gateway never had.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_survives_a_socket_lost_before_the_run_was_acknowledged() {
    let gw = Gateway::start().await;
    gw.model.push(streamed("only once", 3, 20));
    let dir = tempfile::tempdir().unwrap();
    let front = UnixListener::bind(dir.path().join("gateway.sock")).unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(proxy(front, gw.socket(), Cut::AgentRequest, accepted));
    let out = cli_through(
        dir.path(),
        &["agent", "--session-key", "early", "--message", "hello"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "only once\n");
    // One run: the model was asked once, the session has one user message.
    assert_eq!(gw.model.requests().len(), 1);
    let mut c = gw.connect().await;
    let h = c.call("chat.history", json!({"sessionKey": "early"})).await;
    let users = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 1, "{h}");
}

async fn cli_through(state: &Path, args: &[&str]) -> std::process::Output {
    let out = tokio::process::Command::new(bin("loopgate"))
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("cli finishes")
        .expect("cli runs")
}
