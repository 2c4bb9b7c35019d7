//! Issue 23 item 3, a hostile model with the default tools fills the disk: on a851bfd
//! `write` alone (4 MB a call) filled a 48 MiB state filesystem in 1.9 s, every byte stored
//! twice (the file and the call's arguments in the transcript), and then no agent could
//! start a run. Now each agent has a workspace budget and a transcript cap, the transcript
//! keeps a bounded copy of long tool arguments, and the other agents keep working.

use loopgate_tests::{reply, tool_call, tool_result, Gateway};
use serde_json::json;

const KIB: usize = 1024;

fn write_call(id: &str, path: &str, bytes: usize) -> scripted_model::Step {
    let args = json!({"path": path, "content": "w".repeat(bytes)}).to_string();
    tool_call(id, "write", &args)
}

/// R-E2: agent `hog` writes 400 KiB files until its 1 MiB workspace budget refuses (a clear
/// tool result, the run still ends `ok`); the transcript holds a bounded copy of each
/// write's text; agent `main` keeps running turns meanwhile and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_budget_refuses_the_write_and_other_agents_keep_working_r_e2() {
    // A window the 400 KiB calls fit, so no compaction runs between them.
    let gw = Gateway::start_with(
        "context_window = 100000000\n[agents.list.hog.disk]\nworkspace_max_mb = 1\n",
    )
    .await;
    for i in 0..3 {
        gw.model.push(write_call(
            &format!("w{i}"),
            &format!("f{i}.txt"),
            400 * KIB,
        ));
    }
    gw.model.push(reply("wrote what I could"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "fill it", "agentId": "hog", "idempotencyKey": "hog-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(tool_result(&gw, "w1").contains("\"bytes\":409600"));
    let refused = tool_result(&gw, "w2");
    assert!(
        refused.contains("disk.workspace_max_mb")
            && refused.contains("over this agent's 1.0 MiB budget"),
        "{refused}"
    );
    let ws = gw.workspace("hog");
    assert!(ws.join("f1.txt").exists() && !ws.join("f2.txt").exists());

    // The transcript keeps a bounded copy of the 400 KiB arguments, not the text again.
    let history = c
        .call(
            "chat.history",
            json!({"sessionKey": "agent:hog:main", "limit": 100}),
        )
        .await;
    assert_eq!(history["ok"], true, "{history}");
    let calls: Vec<String> = history["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|part| part["type"] == "toolCall")
        .map(|part| {
            part["arguments"]["content"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(calls.len(), 3, "{history}");
    for kept in &calls {
        assert!(
            kept.len() < 16 * KIB,
            "a bounded copy, not {} bytes",
            kept.len()
        );
        assert!(kept.ends_with("of 400 KiB in the transcript]"), "{kept}");
    }

    gw.model.push(reply("main is fine"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "main-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[]);
}

/// R-E2: past its transcript cap an agent's next run ends `error` naming the cap (nothing
/// recorded), while another agent's runs complete and are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_cap_ends_new_runs_and_other_agents_keep_recording_r_e2() {
    let gw = Gateway::start_with("[agents.list.hog.disk]\ntranscript_max_mb = 1\n").await;
    gw.model.push(reply(&"t".repeat(1536 * KIB)));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "talk a lot", "agentId": "hog", "idempotencyKey": "hog-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let (_, fin) = c
        .turn(json!({"message": "more", "agentId": "hog", "idempotencyKey": "hog-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let error = fin["payload"]["error"].to_string();
    assert!(error.contains("disk.transcript_max_mb"), "{error}");
    assert_eq!(
        gw.model.requests().len(),
        1,
        "the refused run never called the model"
    );

    gw.model.push(reply("main records"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "main-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let history = c
        .call("chat.history", json!({"sessionKey": "main", "limit": 10}))
        .await;
    assert!(history.to_string().contains("main records"), "{history}");
    gw.logs.assert_clean(&["disk.transcript_max_mb"]);
}

/// R-E2: under the free-space floor the file tools refuse to grow files (shrinking still
/// works), with a result that names the setting; the run itself completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_free_space_floor_writes_are_refused_r_e2() {
    // A floor no disk here meets.
    let gw = Gateway::start_with("[disk]\nmin_free_mb = 1000000000\n").await;
    std::fs::create_dir_all(gw.workspace("main")).unwrap();
    std::fs::write(gw.workspace("main").join("big.txt"), "x".repeat(4096)).unwrap();
    gw.model.push(write_call("grow", "new.txt", 10));
    gw.model.push(write_call("shrink", "big.txt", 10));
    gw.model.push(reply("done"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "write", "idempotencyKey": "floor-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let grow = tool_result(&gw, "grow");
    assert!(grow.contains("disk.min_free_mb"), "{grow}");
    assert!(tool_result(&gw, "shrink").contains("\"bytes\":10"));
    assert_eq!(
        std::fs::read_to_string(gw.workspace("main").join("big.txt"))
            .unwrap()
            .len(),
        10
    );
    gw.logs.assert_clean(&[]);
}
