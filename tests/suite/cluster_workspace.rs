//! Cluster mode, issue 25 item 4: an agent's workspace files move with the agent. Its owner
//! snapshots the workspace at the end of each run; a new owner restores the snapshot before
//! running anything; a workspace over `cluster.workspace_max_mib` is pinned to its owner
//! and says so, and an owner taking it after that one was lost has the last that fit.

use loopgate_tests::{reply, tool_call};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use super::cluster::{counter, Cluster};

fn write(id: &str, path: &str, content: &str) -> scripted_model::Step {
    let args = json!({"path": path, "content": content}).to_string();
    tool_call(id, "write", &args)
}

async fn main_agent(cl: &Cluster, gw: usize) -> Value {
    cl.gateways[gw].status().await["cluster"]["agents"][0].clone()
}

/// R-C1 across hosts for files: what a run wrote on one owner is there for the agent on the
/// next owner (the owner killed -9), and a workspace too large to move stays pinned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_files_move_with_it_and_a_workspace_over_the_cap_is_pinned() {
    let mut cl = Cluster::start_opts(3, "", "workspace_max_mib = 1").await;
    let owner = cl.warmed_owner().await;
    let mut co = cl.gateways[owner].connect().await;

    // A run on the owner writes a file: snapshotted at its end.
    cl.model.push(write("w1", "notes/plan.md", "step 1"));
    cl.model.push(reply("saved"));
    let (_, fin) = co
        .turn(json!({"message": "save the plan", "idempotencyKey": "k1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let main = main_agent(&cl, (owner + 1) % 3).await;
    assert_eq!(main["workspaceBytes"], 6, "{main}");
    assert!(main.get("pinnedTo").is_none(), "{main}");
    assert!(
        counter(
            &cl.gateways[owner],
            "loopgate_cluster_workspace_snapshots_total"
        )
        .await
            >= 1
    );

    // Past the cap: not snapshotted, the agent is pinned to its owner, and says so.
    let big = "x".repeat(1_200_000);
    cl.model.push(write("w2", "big.bin", &big));
    cl.model.push(reply("saved the big one"));
    let (_, fin) = co
        .turn(json!({"message": "save a lot", "idempotencyKey": "k2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let main = main_agent(&cl, (owner + 2) % 3).await;
    assert_eq!(main["pinnedTo"], format!("h{}", owner + 1), "{main}");
    assert_eq!(
        main["workspaceBytes"], 6,
        "the last snapshot that fit: {main}"
    );
    assert_eq!(
        counter(&cl.gateways[owner], "loopgate_cluster_workspace_pinned").await,
        1
    );

    // The owner is lost: the next owner restores the last snapshot that fit before the
    // agent's next run, which reads the file there.
    cl.gateways[owner].stop(Signal::SIGKILL).await;
    let survivor = (owner + 1) % 3;
    cl.model.push(tool_call(
        "r1",
        "read",
        &json!({"path": "notes/plan.md"}).to_string(),
    ));
    cl.model.push(reply("read it"));
    let mut cs = cl.gateways[survivor].connect().await;
    let (_, fin) = cs
        .turn(json!({"message": "what was the plan?", "idempotencyKey": "k3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let read = cl
        .model
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "r1")
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_default();
    assert!(read.contains("step 1"), "{read}");
    let main = main_agent(&cl, survivor).await;
    let now = main["owner"].as_str().unwrap().to_owned();
    assert_ne!(now, format!("h{}", owner + 1), "{main}");
    let new_owner = &cl.gateways[now[1..].parse::<usize>().unwrap() - 1];
    let ws = new_owner.state().join("agents/main/workspace");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/plan.md")).unwrap(),
        "step 1"
    );
    assert!(
        !ws.join("big.bin").exists(),
        "over the cap: it did not move"
    );
    // The pin is lifted (the agent is free to move with what it has), and the restore counted.
    assert!(main.get("pinnedTo").is_none(), "{main}");
    assert_eq!(
        counter(new_owner, "loopgate_cluster_workspace_restores_total").await,
        1
    );
}
