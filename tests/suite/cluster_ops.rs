//! Cluster mode, issue 25 item 5 and the engine's limits: draining a gateway hands its
//! agents to the others with its runs finished (not lost) and its agents' files; a NATS
//! cluster without quorum refuses new runs retryably and takes them again once it is back.

use std::time::{Duration, Instant};

use loopgate_tests::{reply, streamed, tool_call};
use nix::sys::signal::Signal;
use serde_json::json;

use super::cluster::{counter, Cluster};

/// A drained owner finishes its run, records it in the cluster and gives the agent up: the
/// run ends `ok` on every gateway (no other gateway closes it as a lost owner's), and the
/// next owner has the run's files and its transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_an_owner_hands_its_agent_over_with_its_run_done() {
    let mut cl = Cluster::start(3).await;
    let owner = cl.warmed_owner().await;
    let others: Vec<usize> = (0..3).filter(|i| *i != owner).collect();

    let args = json!({"path": "draft.md", "content": "v1"}).to_string();
    cl.model.push(tool_call("d1", "write", &args));
    cl.model.push(streamed("drafted before the drain", 6, 50));
    let mut co = cl.gateways[owner].connect().await;
    let id = co
        .send(
            "agent",
            json!({"message": "draft it", "idempotencyKey": "k-drain"}),
        )
        .await;
    assert_eq!(co.res(&id).await["payload"]["status"], "accepted");
    co.agent_event("k-drain", |p| p["stream"] == "assistant")
        .await;
    // SIGTERM: drain (the run finishes), then the leases are given up, then exit.
    let status = cl.gateways[owner].stop(Signal::SIGTERM).await;
    assert!(status.success(), "{status:?}");

    for &i in &others {
        let mut ci = cl.gateways[i].connect().await;
        let r = ci
            .call(
                "agent.wait",
                json!({"runId": "k-drain", "timeoutMs": 30_000}),
            )
            .await["payload"]
            .clone();
        assert_eq!(r["status"], "ok", "gateway h{}: {r}", i + 1);
    }
    cl.model.push(reply("after the drain"));
    let mut cs = cl.gateways[others[0]].connect().await;
    let (_, fin) = cs
        .turn(json!({"message": "go on", "idempotencyKey": "k-after"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let main = cl.gateways[others[0]].status().await["cluster"]["agents"][0].clone();
    let now = main["owner"].as_str().unwrap().to_owned();
    let new_owner = &cl.gateways[now[1..].parse::<usize>().unwrap() - 1];
    assert_ne!(now, format!("h{}", owner + 1));
    for &i in &others {
        assert_eq!(
            counter(
                &cl.gateways[i],
                "loopgate_cluster_runs_of_lost_owners_total"
            )
            .await,
            0,
            "nothing of the drained owner was closed as lost"
        );
    }
    let ws = new_owner.state().join("agents/main/workspace");
    assert_eq!(std::fs::read_to_string(ws.join("draft.md")).unwrap(), "v1");
}

/// Two of three NATS servers lost: no quorum. A new run is refused `UNAVAILABLE`,
/// retryable, and nothing is acknowledged that is not recorded; status says the engine does
/// not answer. With the servers back, the same request (same key) is accepted and runs, and
/// what was recorded before is all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_quorum_new_runs_are_refused_retryably_and_taken_once_it_is_back() {
    let mut cl = Cluster::start(2).await;
    cl.model.push(reply("before"));
    let mut c = cl.gateways[0].connect().await;
    c.turn(json!({"message": "before the loss", "idempotencyKey": "q0"}))
        .await;
    cl.settled_owner().await;

    cl.nats.kill(1);
    cl.nats.kill(2);
    let mut c = cl.gateways[0].connect().await;
    let r = c
        .call(
            "agent",
            json!({"message": "during", "idempotencyKey": "q1"}),
        )
        .await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["code"], "UNAVAILABLE", "{r}");
    assert_eq!(r["error"]["retryable"], true, "{r}");
    let engine = cl.gateways[0].status().await["cluster"]["engine"].clone();
    assert_ne!(engine, "ok", "status shows the engine not answering");

    cl.nats.restart(1).unwrap();
    cl.nats.restart(2).unwrap();
    cl.nats.wait_ready().unwrap();
    // As a client does: the same request again, until the cluster takes it.
    cl.model.push(reply("after"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let fin = loop {
        let mut c = cl.gateways[0].connect().await;
        let id = c
            .send(
                "agent",
                json!({"message": "during", "idempotencyKey": "q1"}),
            )
            .await;
        let first = c.res(&id).await;
        if first["ok"] == true && first["payload"]["status"] == "accepted" {
            break c.res(&id).await["payload"].clone();
        }
        if first["ok"] == true {
            // An earlier attempt was recorded after all (its answer was the refusal): the
            // run is under way; its outcome, as a client asks for it.
            assert_eq!(first["payload"]["status"], "in_flight", "{first}");
            break c
                .call("agent.wait", json!({"runId": "q1", "timeoutMs": 30_000}))
                .await["payload"]
                .clone();
        }
        assert_eq!(first["error"]["retryable"], true, "{first}");
        assert!(Instant::now() < deadline, "not taken within 60 s: {first}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(fin["status"], "ok", "{fin}");
    let mut c = cl.gateways[1].connect().await;
    let h = super::cluster::history(&mut c, "main").await;
    assert_eq!(
        h,
        [
            "user: before the loss",
            "assistant: before",
            "user: during",
            "assistant: after"
        ]
    );
}

/// Issue 37 item 3: `chat.history` asked at a gateway that does not own the agent hung for
/// the 600 s op timeout once the page was larger than NATS's `max_payload` (1 MiB by
/// default): the owner could not publish its answer and the asker waited it out. Three
/// 700 KB replies are enough (and their runs' outcomes were too large to record in the
/// cluster: the runs never ended). Now the owner cuts the page to fit one message (a shorter
/// page with the offset of the rest), large outcomes are kept as bodies in the object store,
/// and paging on the non-owner reaches every long reply the owner shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_past_one_message_is_paged_on_a_non_owner_issue_37() {
    let cl = Cluster::start(2).await;
    let owner = cl.warmed_owner().await;
    let other = 1 - owner;
    let mut co = cl.gateways[owner].connect().await;
    for i in 0..3 {
        cl.model.push(reply(&format!("{i}{}", "r".repeat(700_000))));
        let (_, fin) = co
            .turn(json!({"message": format!("long {i}"), "idempotencyKey": format!("k-long-{i}")}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    // The long replies, by their first character, on one page of the owner's own.
    let long = |page: &serde_json::Value| -> Vec<String> {
        page["payload"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"][0]["text"].as_str())
            .filter(|t| t.len() > 600_000)
            .map(|t| t[..1].to_owned())
            .collect()
    };
    let whole = co
        .call(
            "chat.history",
            json!({"sessionKey": "main", "maxBytes": 8 * 1024 * 1024}),
        )
        .await;
    let mut expected = long(&whole);
    expected.sort();
    assert!(expected.len() >= 2, "{expected:?}");
    let mut c = cl.gateways[other].connect().await;
    let mut offset = None;
    let mut pages = 0;
    let mut seen = Vec::new();
    loop {
        let mut params = json!({"sessionKey": "main", "maxBytes": 8 * 1024 * 1024});
        if let Some(o) = offset {
            params["offset"] = json!(o);
        }
        let page = tokio::time::timeout(Duration::from_secs(10), c.call("chat.history", params))
            .await
            .expect("chat.history answered within 10 s on a non-owner");
        assert_eq!(page["ok"], true, "{}", &page["error"]);
        pages += 1;
        seen.extend(long(&page));
        match page["payload"]["nextOffset"].as_u64() {
            Some(o) if pages < 10 => offset = Some(o),
            _ => break,
        }
    }
    seen.sort();
    assert_eq!(seen, expected, "every long reply is on some page");
    assert!(pages >= 2, "one page held {} long replies", seen.len());
}
