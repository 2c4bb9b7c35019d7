//! The worker's one ordered outbox: everything it tells the supervisor goes out in the order
//! it was put in, whoever put it there (a run's driver, the main loop, a session operation).
//!
//! Architecture Invariant: a run's terminal (`Finished`) is put in by the main loop before it
//! starts the session's next run, so that run's `lifecycle start` can never overtake it on
//! the link (R-B2). There is no second queue or forwarding task in between.
//!
//! Bounds: frames put in with [`Outbox::send`] (run events, approval requests, session
//! answers) wait while [`STREAM_CAP`] of them wait to be written. Outcomes put in with
//! [`Outbox::push`] (terminals, refusals, reports) never wait and are never dropped: a lost
//! terminal would leave its run open. They are bounded by what the worker holds (one per run
//! or report; the supervisor caps the runs and operations it hands over).

use std::sync::Arc;

use futures_util::SinkExt;
use ipc::control::{EventBody, RunStatus, SessionReply, WorkerToControl};
use ipc::frame::MAX_FRAME;
use ipc::{ErrorCode, RpcError};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::link::LinkWriter;

/// Streamed frames waiting to be written before senders wait.
pub const STREAM_CAP: usize = 4096;

/// The link to the supervisor is gone.
#[derive(Debug)]
pub struct Closed;

struct Entry {
    msg: WorkerToControl,
    /// Returned once the frame is taken for writing (streamed frames only).
    _room: Option<OwnedSemaphorePermit>,
}

/// Puts frames in the outbox. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Entry>,
    room: Arc<Semaphore>,
}

/// Takes frames out, in order (the link's writer).
pub struct Receiver {
    rx: mpsc::UnboundedReceiver<Entry>,
    room: Arc<Semaphore>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // Senders waiting for room learn that none will come.
        self.room.close();
    }
}

/// An outbox whose streamed frames wait beyond `cap` in flight.
pub fn new(cap: usize) -> (Outbox, Receiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let room = Arc::new(Semaphore::new(cap));
    (
        Outbox {
            tx,
            room: room.clone(),
        },
        Receiver { rx, room },
    )
}

impl Outbox {
    /// Puts a streamed frame in, waiting while the outbox is full.
    pub async fn send(&self, msg: WorkerToControl) -> Result<(), Closed> {
        let permit = self
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Closed)?;
        self.put(msg, Some(permit))
    }

    /// Puts an outcome in at once: never waits, never dropped while the link lives.
    pub fn push(&self, msg: WorkerToControl) {
        let _ = self.put(msg, None);
    }

    /// Puts a best-effort frame in (a pong, counters), unless the outbox is full.
    pub fn try_send(&self, msg: WorkerToControl) -> Result<(), Closed> {
        let permit = self.room.clone().try_acquire_owned().map_err(|_| Closed)?;
        self.put(msg, Some(permit))
    }

    fn put(&self, msg: WorkerToControl, room: Option<OwnedSemaphorePermit>) -> Result<(), Closed> {
        self.tx.send(Entry { msg, _room: room }).map_err(|_| Closed)
    }
}

impl Receiver {
    /// The next frame, once one is there; `None` when every [`Outbox`] is gone.
    pub async fn recv(&mut self) -> Option<WorkerToControl> {
        self.rx.recv().await.map(|e| e.msg)
    }

    /// The next frame if one is there now.
    pub fn try_recv(&mut self) -> Option<WorkerToControl> {
        self.rx.try_recv().ok().map(|e| e.msg)
    }
}

/// Frames whose big fields add up to more than this are measured before they are written.
const MEASURE_ABOVE: usize = 4 << 20;

/// Writes the outbox to the link until every [`Outbox`] is gone or the link breaks. Frames
/// already waiting go out in one write (events come in bursts). A frame too large for the
/// link is replaced by a smaller one of the same meaning ([`shrink`]): nothing is dropped
/// silently, and a run's terminal always arrives.
pub async fn write_out(mut rx: Receiver, mut writer: LinkWriter) {
    'outer: while let Some(msg) = rx.recv().await {
        let mut next = Some(msg);
        while let Some(msg) = next {
            let msg = fit(msg);
            match writer.feed(msg).await {
                Ok(()) => {}
                // Nothing was written; the link stays usable. `fit` measured every frame that
                // could be this large, so this is a bug.
                Err(e @ ipc::Error::FrameTooLarge { .. }) => {
                    tracing::error!(error = %e, "A message to the supervisor was too large for the link; dropped it.");
                }
                Err(_) => break 'outer,
            }
            next = rx.try_recv();
        }
        if writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.close().await;
}

/// `msg`, or its smaller stand-in when it would not fit a link frame.
fn fit(msg: WorkerToControl) -> WorkerToControl {
    if weight(&msg) <= MEASURE_ABOVE {
        return msg;
    }
    let size = ipc::frame::encode_body(&msg).map_or(usize::MAX, |b| b.len());
    if size <= MAX_FRAME {
        return msg;
    }
    tracing::error!(
        bytes = size,
        max = MAX_FRAME,
        "A message to the supervisor was too large for the link; sent a smaller one in its place."
    );
    shrink(msg, size)
}

/// The bytes of a frame's big fields (text a model, a tool or a transcript gave it).
fn weight(msg: &WorkerToControl) -> usize {
    match msg {
        WorkerToControl::Finished(t) => {
            t.payloads.iter().map(|p| p.text.len()).sum::<usize>()
                + t.error.as_ref().map_or(0, String::len)
        }
        WorkerToControl::Event(ev) => match &ev.body {
            EventBody::Message(m) => m.message_json.len(),
            EventBody::Assistant { delta } | EventBody::Thinking { delta } => delta.len(),
            EventBody::Block { text, .. } => text.len(),
            EventBody::Tool {
                args_json,
                result_json,
                ..
            } => {
                args_json.as_ref().map_or(0, String::len)
                    + result_json.as_ref().map_or(0, String::len)
            }
            EventBody::Lifecycle(l) => {
                l.error.as_ref().map_or(0, String::len)
                    + l.reply.as_ref().map_or(0, String::len)
                    + l.guarded
                        .iter()
                        .map(|g| g.streamed.len() + g.kept.len())
                        .sum::<usize>()
            }
            EventBody::RunStatus { reason, .. } => reason.as_str().len(),
            EventBody::Compaction { .. } | EventBody::Unknown => 0,
        },
        // Session answers (history pages) are bounded by their byte cap, but not below the
        // frame: measure the large ones.
        WorkerToControl::SessionDone { .. } | WorkerToControl::SessionResult { .. } => {
            MEASURE_ABOVE + 1
        }
        WorkerToControl::ApprovalRequested(r) => {
            r.command.len() + r.argv.iter().map(String::len).sum::<usize>()
        }
        WorkerToControl::Diagnostic(r) => r.excerpt.as_ref().map_or(0, String::len),
        // Never shrunk: the journal's writer refuses a transaction too large for a frame.
        WorkerToControl::Journal { changes, .. } => changes.len(),
        WorkerToControl::JournalSync { .. }
        | WorkerToControl::Rejected { .. }
        | WorkerToControl::Pong { .. }
        | WorkerToControl::Drained { .. }
        | WorkerToControl::ApprovalClosed { .. }
        | WorkerToControl::Recovery(_)
        | WorkerToControl::Counters(_)
        | WorkerToControl::Unknown => 0,
    }
}

/// What a frame of `size` bytes (over the link's cap) says, in a frame that fits: a run's
/// terminal becomes an error terminal naming the cap, a recorded message is given by its
/// place and size only, long texts are cut, a session answer becomes its error.
fn shrink(msg: WorkerToControl, size: usize) -> WorkerToControl {
    let over = format!(
        "{size} bytes, more than the worker link's {} MiB frame cap",
        MAX_FRAME >> 20
    );
    match msg {
        WorkerToControl::Finished(mut t) => {
            t.payloads.clear();
            t.status = RunStatus::Error;
            t.error = Some(format!(
                "the run's result was {over}; its reply was not delivered"
            ));
            WorkerToControl::Finished(t)
        }
        WorkerToControl::Event(mut ev) => {
            ev.body = match ev.body {
                EventBody::Message(mut m) => {
                    m.omitted_bytes = Some(m.message_json.len() as u64);
                    m.message_json = "{}".into();
                    EventBody::Message(m)
                }
                EventBody::Assistant { delta } => EventBody::Assistant {
                    delta: cut(delta, &over),
                },
                EventBody::Thinking { delta } => EventBody::Thinking {
                    delta: cut(delta, &over),
                },
                EventBody::Block {
                    text,
                    index,
                    reasoning,
                } => EventBody::Block {
                    text: cut(text, &over),
                    index,
                    reasoning,
                },
                EventBody::Tool {
                    phase,
                    tool_call_id,
                    name,
                    is_error,
                    ..
                } => EventBody::Tool {
                    phase,
                    tool_call_id,
                    name,
                    args_json: None,
                    result_json: None,
                    is_error,
                },
                EventBody::Lifecycle(mut l) => {
                    l.error = l.error.map(|e| cut(e, &over));
                    // The chat `final` then shows the run's text as streamed.
                    l.reply = None;
                    l.guarded.clear();
                    EventBody::Lifecycle(l)
                }
                other => other,
            };
            WorkerToControl::Event(ev)
        }
        WorkerToControl::SessionDone { op_id, .. }
        | WorkerToControl::SessionResult { op_id, .. } => WorkerToControl::SessionDone {
            op_id,
            reply: SessionReply::Failed {
                error: RpcError::new(ErrorCode::Internal, format!("the answer was {over}")),
            },
        },
        WorkerToControl::Diagnostic(mut r) => {
            r.excerpt = None;
            WorkerToControl::Diagnostic(r)
        }
        // Nothing else can grow that large: the exec tool refuses a command over 64 KiB
        // before asking an operator, and the rest carry ids and counts.
        other => other,
    }
}

/// `text` cut to a quarter of the frame cap (on a character boundary), saying so.
fn cut(mut text: String, over: &str) -> String {
    let mut at = (MAX_FRAME / 4).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    text.push_str(&format!(" [cut: {over}]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::control::{RunStatus, RunTerminal};

    fn pong(nonce: u64) -> WorkerToControl {
        WorkerToControl::Pong { nonce }
    }

    fn nonce(m: Option<WorkerToControl>) -> Option<u64> {
        match m {
            Some(WorkerToControl::Pong { nonce }) => Some(nonce),
            Some(WorkerToControl::Finished(t)) => t.run_id.parse().ok(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn streamed_and_pushed_frames_keep_one_order() {
        let (out, mut rx) = new(2);
        out.send(pong(1)).await.unwrap();
        out.push(WorkerToControl::Finished(RunTerminal::without_work(
            "2",
            RunStatus::Ok,
            0,
            String::new(),
            None,
        )));
        out.send(pong(3)).await.unwrap();
        // Full for streamed and best-effort frames; an outcome still goes in, behind them.
        assert!(out.try_send(pong(99)).is_err());
        out.push(WorkerToControl::Finished(RunTerminal::without_work(
            "4",
            RunStatus::Ok,
            0,
            String::new(),
            None,
        )));
        let blocked = tokio::spawn({
            let out = out.clone();
            async move { out.send(pong(5)).await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!blocked.is_finished(), "a streamed frame waits for room");
        let got: Vec<_> = [
            rx.recv().await,
            rx.recv().await,
            rx.recv().await,
            rx.recv().await,
        ]
        .into_iter()
        .map(nonce)
        .collect();
        assert_eq!(got, [Some(1), Some(2), Some(3), Some(4)]);
        assert!(blocked.await.unwrap());
        assert_eq!(nonce(rx.recv().await), Some(5));
    }

    #[tokio::test]
    async fn senders_waiting_for_room_learn_the_link_is_gone() {
        let (out, rx) = new(1);
        out.send(pong(1)).await.unwrap();
        let waiting = tokio::spawn({
            let out = out.clone();
            async move { out.send(pong(2)).await.is_err() }
        });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(waiting.await.unwrap());
        assert!(out.try_send(pong(3)).is_err());
    }

    fn encoded(msg: &WorkerToControl) -> usize {
        ipc::frame::encode_body(msg).unwrap().len()
    }

    /// Frames past the link's cap become smaller ones that say what happened; a run's
    /// terminal is never lost (issue 23).
    #[test]
    fn a_frame_too_large_for_the_link_is_replaced_by_one_that_fits() {
        let huge = "\u{1}".repeat(MAX_FRAME + 1);
        let mut t = RunTerminal::without_work("r", RunStatus::Ok, 0, String::new(), None);
        t.payloads.push(ipc::control::Payload {
            text: huge.clone(),
            is_error: false,
        });
        let small = fit(WorkerToControl::Finished(t));
        assert!(encoded(&small) <= MAX_FRAME);
        match small {
            WorkerToControl::Finished(t) => {
                assert_eq!(t.status, RunStatus::Error);
                assert!(t.payloads.is_empty());
                let e = t.error.unwrap();
                assert!(e.contains("16 MiB frame cap"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        let message = ipc::session_ops::StoredMessage {
            entry_id: "e".into(),
            seq: 1,
            role: "assistant".into(),
            run_id: Some("r".into()),
            message_json: huge.clone(),
            omitted_bytes: None,
        };
        let ev = WorkerToControl::Event(ipc::control::RunEvent {
            run_id: "r".into(),
            seq: 2,
            ts: 0,
            body: EventBody::Message(message),
        });
        match fit(ev) {
            WorkerToControl::Event(ipc::control::RunEvent {
                body: EventBody::Message(m),
                ..
            }) => {
                assert_eq!(m.omitted_bytes, Some(huge.len() as u64));
                assert_eq!(m.message_json, "{}");
            }
            other => panic!("{other:?}"),
        }
        let delta = WorkerToControl::Event(ipc::control::RunEvent {
            run_id: "r".into(),
            seq: 3,
            ts: 0,
            body: EventBody::Assistant {
                delta: huge.clone(),
            },
        });
        let cut = fit(delta);
        assert!(encoded(&cut) <= MAX_FRAME);
        // Small frames pass untouched, unmeasured.
        assert_eq!(nonce(Some(fit(pong(7)))), Some(7));
    }
}
