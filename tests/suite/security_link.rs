//! A hostile provider against the control link (issue 23, item 1). A reply of 20 MiB made
//! the worker's frames to the supervisor exceed the link's 16 MiB frame cap; they were
//! dropped, the run's terminal with them, and the run stayed in flight for good.

use loopgate_tests::{reply, streamed, Gateway};
use serde_json::json;

/// A model streaming 20 MiB of reply in 64 KiB deltas: the run ends `error` naming the cap
/// on one response, well within its deadline; no run is left in flight; the next turn works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_far_larger_than_the_link_ends_its_run_with_an_error_naming_the_cap() {
    let gw = Gateway::start().await;
    gw.model.push(streamed(&"x".repeat(20 << 20), 320, 0));
    gw.model.push(reply("small again"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "say a lot", "idempotencyKey": "huge-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let error = fin["payload"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("larger than the 2 MiB cap on one response"),
        "{error}"
    );
    let status = gw.status().await;
    let in_flight: u64 = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["runsInFlight"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(in_flight, 0, "{status}");
    let (_, next) = c
        .turn(json!({"message": "again", "idempotencyKey": "huge-2"}))
        .await;
    assert_eq!(next["payload"]["status"], "ok", "{next}");
    gw.logs.assert_clean(&[]);
}
