//! Attachments in cluster mode (issue 26 item 1 with issue 25): the run and its image travel
//! to the agent's owner, the image is kept in the journaled agent database and shown in any
//! gateway's history; what one NATS message cannot carry is refused with the limit that
//! `hello-ok` advertises (R-A1, R-A5).

use serde_json::json;

use super::cluster::Cluster;

const DOT: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_reaches_the_model_through_the_cluster_and_any_history_shows_it() {
    let cl =
        Cluster::start_opts(2, "models.\"scripted-1\".input = [\"text\", \"image\"]", "").await;
    let mut c1 = cl.gateways[0].connect().await;
    let hello = c1.seen[1].clone();
    let policy = &hello["payload"]["policy"]["attachments"];
    let max = policy["maxBytes"].as_u64().unwrap_or_default();
    assert!(max > 0 && max < 8 * 1024 * 1024, "{policy}");

    let dot =
        json!({"type": "image", "mimeType": "image/png", "fileName": "dot.png", "content": DOT});
    let (_, fin) = c1
        .turn(
            json!({"message": "look", "sessionKey": "img", "idempotencyKey": "ci-1",
                     "attachments": [dot]}),
        )
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let body = &cl.model.requests()[0].body;
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rfind(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        user["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{DOT}"),
        "{user}"
    );
    let mut c2 = cl.gateways[1].connect().await;
    let h = c2.call("chat.history", json!({"sessionKey": "img"})).await;
    let media = &h["payload"]["messages"][0]["__openclaw"]["media"][0];
    assert_eq!(media["contentType"], "image/png", "{h}");

    use base64::Engine;
    let big = base64::engine::general_purpose::STANDARD.encode(vec![b'a'; max as usize + 1]);
    let r = c2
        .call(
            "agent",
            json!({"message": "x", "sessionKey": "img", "idempotencyKey": "ci-2",
                   "attachments": [{"mimeType": "text/plain", "fileName": "big.txt", "content": big}]}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("attachments exceed size limit")),
        "{r}"
    );
}
