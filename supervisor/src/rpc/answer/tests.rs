//! The entry points write what their handlers declare: the parse error, the result, the
//! wait before it and the closes after it, and a run's last answer in each of its forms.

use ipc::gateway::{m, AgentAck, AgentWaitResult, RequestFrame};
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
/// the connection closes, as nothing forwards events in this test), and the connection's
/// next ordered request waits for the answer.
#[tokio::test]
async fn an_answer_after_events_waits_for_the_connection_to_pass_them() {
    let (out, mut rx, _) = Out::new();
    let (turn, mut next) = crate::rpc::AdmissionTurn::after(None);
    let req = request("agent.wait", json!({"runId": "run-1"}));
    let answering = serve_reply::<m::AgentWait>(req, &out, async |p| {
        Ok(Reply::after_events(waited(&p.run_id), 7).then_next_turn(Some(turn)))
    });
    let closing = async {
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "queued before the events");
        assert!(
            next.try_recv().is_err(),
            "the next turn went before the answer"
        );
        out.closed.cancel();
    };
    tokio::join!(answering, closing);
    assert_eq!(next_frame(&mut rx).unwrap()["payload"]["runId"], "run-1");
    assert_eq!(
        next.try_recv(),
        Err(tokio::sync::oneshot::error::TryRecvError::Closed),
        "let go after the answer"
    );
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
fn ack(status: &str) -> AgentAck {
    AgentAck {
        run_id: "run-1".into(),
        session_key: "agent:main:main".into(),
        agent_id: "main".into(),
        status: status.into(),
        accepted_at: None,
    }
}

/// A run's first answer goes out when the handler sends it, its last when the handler
/// gives it: a stored final result byte for byte, an unreadable one as an error.
#[tokio::test]
async fn a_run_is_acked_then_answered_with_its_stored_result() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent", json!({"message": "hi", "idempotencyKey": "run-1"}));
    let stored = r#"{"ok":true,"payload":{"runId":"run-1","status":"ok"}}"#;
    serve_run::<m::Agent, _>(
        &req,
        &out,
        &Answered::default(),
        None,
        |first, _, _| async move {
            first.ack(ack("accepted")).await;
            Ok(Last::Stored {
                final_json: stored.into(),
                after_hub: None,
            })
        },
    )
    .await;
    assert_eq!(
        next_frame(&mut rx).unwrap()["payload"]["status"],
        "accepted"
    );
    assert_eq!(
        next_frame(&mut rx).unwrap(),
        json!({"type": "res", "id": "r1", "ok": true, "payload": {"runId": "run-1", "status": "ok"}})
    );

    serve_run::<m::Agent, _>(&req, &out, &Answered::default(), None, |_, _, _| async {
        Ok(Last::Stored {
            final_json: "not json".into(),
            after_hub: None,
        })
    })
    .await;
    let frame = next_frame(&mut rx).unwrap();
    assert_eq!(frame["error"]["code"], "UNAVAILABLE");
    assert!(rx.try_recv().is_err());
}

/// A run acknowledged with nothing more to say sends nothing more; one never
/// acknowledged answers its result or its refusal.
#[tokio::test]
async fn a_runs_last_answer_is_nothing_a_result_or_a_refusal() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent", json!({"message": "hi", "idempotencyKey": "run-1"}));
    serve_run::<m::Agent, _>(
        &req,
        &out,
        &Answered::default(),
        None,
        |first, _, _| async move {
            first.ack(ack("accepted")).await;
            Ok(Last::Acked)
        },
    )
    .await;
    assert!(next_frame(&mut rx).is_some());
    assert!(rx.try_recv().is_err(), "acked once, nothing after");

    let in_flight = |_, _, _| async { Ok(Last::Result(Reply::now(ack("in_flight")))) };
    serve_run::<m::Agent, _>(&req, &out, &Answered::default(), None, in_flight).await;
    assert_eq!(
        next_frame(&mut rx).unwrap()["payload"]["status"],
        "in_flight"
    );

    let refused = |_, _, _| async { Err(ErrorShape::invalid("refused")) };
    serve_run::<m::Agent, _>(&req, &out, &Answered::default(), None, refused).await;
    assert_eq!(next_frame(&mut rx).unwrap()["error"]["message"], "refused");
    assert!(rx.try_recv().is_err());
}

/// R-A1 (one connection's turns in order): a run request refused before admission lets the
/// connection's next ordered request go only after its refusal is queued, though the
/// handler dropped its turn first; an acknowledged one lets it go once the handler let the
/// turn go after the ack, long before the run's last answer.
#[tokio::test]
async fn the_next_turn_goes_after_this_ones_first_answer() {
    let (out, mut rx, _) = Out::new();
    let req = request("agent", json!({"message": "hi", "idempotencyKey": "run-1"}));
    let (turn, mut next) = crate::rpc::AdmissionTurn::after(None);
    let refused = |_, _, turn: Option<crate::rpc::AdmissionTurn>| async move {
        drop(turn);
        tokio::task::yield_now().await;
        Err(ErrorShape::invalid("refused"))
    };
    let answered = Answered::default();
    let serving = serve_run::<m::Agent, _>(&req, &out, &answered, Some(turn), refused);
    let watching = async {
        tokio::task::yield_now().await;
        assert!(
            next.try_recv().is_err(),
            "let go before the refusal was queued"
        );
    };
    tokio::join!(serving, watching);
    assert_eq!(next_frame(&mut rx).unwrap()["error"]["message"], "refused");
    assert!(next
        .try_recv()
        .is_err_and(|e| e == tokio::sync::oneshot::error::TryRecvError::Closed));

    let (turn, mut next) = crate::rpc::AdmissionTurn::after(None);
    let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    let acked = |first, _, turn| async move {
        RunAnswers::<m::Agent>::ack(first, ack("accepted")).await;
        drop::<Option<crate::rpc::AdmissionTurn>>(turn);
        let _ = finished.await;
        Ok(Last::Acked)
    };
    let answered = Answered::default();
    let serving = serve_run::<m::Agent, _>(&req, &out, &answered, Some(turn), acked);
    let watching = async {
        // The next request goes while the run is still going.
        let _ = (&mut next).await;
        assert_eq!(
            next_frame(&mut rx).unwrap()["payload"]["status"],
            "accepted"
        );
        let _ = finish.send(());
    };
    tokio::join!(serving, watching);
}
