//! Cluster mode keeps `messages.queue.max_queued_*` (issue 38): a run is reserved in the
//! queues before it crosses the cluster, at the gateway it was sent to (held until its
//! outcome comes back) and again at its agent's owner as it starts there, so a front door
//! refuses what it cannot hold as a single gateway does, and an owner bounds its agents'
//! queues whichever gateways the messages came through.

use loopgate_tests::hold;
use serde_json::json;

use super::cluster::{wait_result, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_messages_are_bounded_at_the_front_door_and_at_the_owner_issue_38() {
    let cl = Cluster::start_with(
        3,
        "[messages.queue]\nmode = \"followup\"\nmax_queued_per_agent = 3\n",
    )
    .await;
    let owner = cl.warmed_owner().await;
    let fronts: Vec<usize> = (0..3).filter(|i| *i != owner).collect();
    cl.model.push(hold("busy"));
    let mut a = cl.gateways[fronts[0]].connect().await;
    let first = a
        .start_streaming(json!({"message": "one", "idempotencyKey": "q-0", "sessionKey": "q"}))
        .await;
    // Through one front door: three wait behind the running one, the fourth is refused
    // before it is recorded, retryable, as on a single gateway (R-B3 followup).
    let mut queued = Vec::new();
    for i in 1..=3 {
        let id = a
            .send(
                "agent",
                json!({"message": "next", "idempotencyKey": format!("q-{i}"), "sessionKey": "q"}),
            )
            .await;
        let ack = a.res(&id).await;
        assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
        queued.push(id);
    }
    let over = json!({"message": "over", "idempotencyKey": "q-4", "sessionKey": "q"});
    let refused = a.call("agent", over).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "UNAVAILABLE", "{refused}");
    assert_eq!(refused["error"]["retryable"], true, "{refused}");
    assert_eq!(
        refused["error"]["details"]["reason"], "queue-full",
        "{refused}"
    );
    // Through another front door, which holds nothing of the session: accepted there, but
    // the owner already holds three waiting messages of the agent, so one run ends saying
    // so (whichever reached the owner last) instead of growing its queue past the cap.
    let mut b = cl.gateways[fronts[1]].connect().await;
    let id = b
        .send(
            "agent",
            json!({"message": "via b", "idempotencyKey": "q-5", "sessionKey": "q"}),
        )
        .await;
    let ack = b.res(&id).await;
    assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
    cl.model.release();
    assert_eq!(a.res(&first).await["payload"]["status"], "ok");
    let mut refused_by_owner = Vec::new();
    for key in ["q-1", "q-2", "q-3", "q-5"] {
        let r = wait_result(&cl.gateways[fronts[1]], key).await;
        match r["status"].as_str() {
            Some("ok") => {}
            Some("error") => {
                let why = r["error"].as_str().unwrap_or_default();
                assert!(why.contains("max_queued_per_agent is 3"), "{r}");
                refused_by_owner.push(key);
            }
            _ => panic!("{key}: {r}"),
        }
    }
    assert_eq!(refused_by_owner.len(), 1, "{refused_by_owner:?}");
    // The queue drained: both front doors take the session's messages again.
    for (c, key) in [(&mut a, "q-6"), (&mut b, "q-7")] {
        let (ack, fin) = c
            .turn(json!({"message": "again", "idempotencyKey": key, "sessionKey": "q"}))
            .await;
        assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
}
