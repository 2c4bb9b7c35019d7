//! The entry points write what their handlers declare: the parse error, the result, the
//! wait before it and the closes after it, and a run's last answer in each of its forms.

use ipc::gateway::{m, AgentWaitResult, RequestFrame};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::*;
use crate::connection::out::Outbound;

fn request(method: &str, params: Value) -> Request {
    let frame = json!({"type": "req", "id": "r1", "method": method, "params": params});
    let frame: RequestFrame = serde_json::from_value(frame).unwrap();
    Request::new(frame, None)
}

/// The next frame queued on the connection, as JSON (`None`: nothing queued, or a close).
fn next_frame(rx: &mut mpsc::Receiver<Outbound>) -> Option<Value> {
    match rx.try_recv() {
        Ok(Outbound::Frame(text)) => Some(serde_json::from_str(&text).unwrap()),
        _ => None,
    }
}

fn waited(run_id: &str) -> AgentWaitResult {
    AgentWaitResult::pending(run_id, None)
}

#[tokio::test]
async fn params_that_do_not_parse_are_refused_and_the_handler_not_run() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent.wait", json!({"runId": 5}));
    serve::<m::AgentWait, _>(req, &out, |_| async { panic!("not parsed") }).await;
    let frame = next_frame(&mut rx).unwrap();
    assert_eq!(
        (frame["id"].clone(), frame["ok"].clone()),
        (json!("r1"), json!(false))
    );
    assert_eq!(frame["error"]["code"], "INVALID_REQUEST");
    let message = frame["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("invalid agent.wait params: "),
        "{message}"
    );
    assert!(rx.try_recv().is_err(), "answered once");
}

#[tokio::test]
async fn a_result_and_an_error_are_each_answered_once() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent.wait", json!({"runId": "run-1"}));
    serve::<m::AgentWait, _>(req, &out, |p| async move { Ok(waited(&p.run_id)) }).await;
    let frame = next_frame(&mut rx).unwrap();
    assert_eq!(frame["ok"], true);
    assert_eq!(frame["payload"]["runId"], "run-1");
    assert!(rx.try_recv().is_err());

    let req = request("agent.wait", json!({"runId": "run-1"}));
    let refused = |_| async { Err(ErrorShape::invalid("no")) };
    serve::<m::AgentWait, _>(req, &out, refused).await;
    let frame = next_frame(&mut rx).unwrap();
    assert_eq!(
        (frame["ok"].clone(), frame["error"]["message"].clone()),
        (json!(false), json!("no"))
    );
}

/// An answer that waits for the events before it is not queued before them (here: until
/// the connection closes, as nothing forwards events in this test).
#[tokio::test]
async fn an_answer_after_events_waits_for_the_connection_to_pass_them() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent.wait", json!({"runId": "run-1"}));
    let answering = serve_reply::<m::AgentWait>(req, &out, async |p| {
        Ok(Reply::after_events(waited(&p.run_id), 7))
    });
    let closing = async {
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "queued before the events");
        out.closed.cancel();
    };
    tokio::join!(answering, closing);
    assert_eq!(next_frame(&mut rx).unwrap()["payload"]["runId"], "run-1");
}

/// R-D3: the connections a revoke or rotation closes are closed after the answer, which
/// the caller gets even when it is one of them.
#[tokio::test]
async fn closes_follow_the_answer() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent.wait", json!({"runId": "run-1"}));
    let own = out.clone();
    serve_reply::<m::AgentWait>(req, &out, async |p| {
        Ok(Reply::now(waited(&p.run_id)).then_close_device(vec![own]))
    })
    .await;
    assert_eq!(next_frame(&mut rx).unwrap()["ok"], true);
    match rx.try_recv() {
        Ok(Outbound::Close { code, reason }) => {
            assert_eq!((code, reason.as_str()), (4001, "device removed"))
        }
        other => panic!("expected a close, got {other:?}"),
    }
}
