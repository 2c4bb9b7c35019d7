//! Cluster mode, issue 25 item 3: `agent.events` resume works on any gateway. A client whose
//! connection dropped reconnects to another gateway (neither the run's owner nor where it
//! was submitted) and continues the run's stream after the last `seq` it saw.

use loopgate_tests::streamed;
use serde_json::{json, Value};

use super::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_resumes_on_a_gateway_that_neither_owns_nor_took_it() {
    let cl = Cluster::start_opts(3, "", "").await;
    let owner = cl.warmed_owner().await;
    let (front, third) = ((owner + 1) % 3, (owner + 2) % 3);

    cl.model.push(streamed("resumed on another gateway", 4, 5));
    let mut cf = cl.gateways[front].connect().await;
    let id = cf
        .send(
            "agent",
            json!({"message": "stream it", "idempotencyKey": "rs1"}),
        )
        .await;
    assert_eq!(cf.res(&id).await["payload"]["status"], "accepted");
    // The client saw the first assistant event, then its connection dropped.
    let first = cf.agent_event("rs1", |p| p["stream"] == "assistant").await;
    let seen = first["seq"].as_u64().unwrap();
    drop(cf);

    // The events after `seen` come in the answer up to where this connection's live
    // stream starts, the rest live: together, the run's stream with no gap or duplicate.
    let mut ct = cl.gateways[third].connect().await;
    let r = ct
        .call("agent.events", json!({"runId": "rs1", "afterSeq": seen}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["payload"]["truncated"], false, "{r}");
    let mut agent: Vec<Value> = r["payload"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["event"] == "agent")
        .map(|e| e["payload"].clone())
        .collect();
    let is_end = |p: &Value| p["stream"] == "lifecycle" && p["data"]["phase"] == "end";
    if !agent.iter().any(is_end) {
        ct.agent_event("rs1", is_end).await;
    }
    agent.extend(
        ct.seen
            .iter()
            .filter(|f| f["event"] == "agent" && f["payload"]["runId"] == "rs1")
            .map(|f| f["payload"].clone()),
    );
    let seqs: Vec<u64> = agent.iter().filter_map(|p| p["seq"].as_u64()).collect();
    let expected: Vec<u64> = (seen + 1..=seqs.iter().copied().max().unwrap_or(0)).collect();
    assert_eq!(seqs, expected, "in order, no gap, no duplicate");
    let last = agent.last().unwrap();
    assert_eq!(last["stream"], "lifecycle", "{last}");
    assert_eq!(last["data"]["phase"], "end", "{last}");
    let text = agent
        .iter()
        .rev()
        .find(|p| p["stream"] == "assistant")
        .map(|p| p["data"]["text"].clone());
    assert_eq!(text, Some(json!("resumed on another gateway")));
}
