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
use ipc::control::WorkerToControl;
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

/// Writes the outbox to the link until every [`Outbox`] is gone or the link breaks. Frames
/// already waiting go out in one write (events come in bursts).
pub async fn write_out(mut rx: Receiver, mut writer: LinkWriter) {
    'outer: while let Some(msg) = rx.recv().await {
        let mut next = Some(msg);
        while let Some(msg) = next {
            let dropped_op = match &msg {
                WorkerToControl::SessionResult { op_id, .. } => Some(*op_id),
                _ => None,
            };
            match writer.feed(msg).await {
                Ok(()) => {}
                // Nothing was written; the link stays usable.
                Err(e @ ipc::Error::FrameTooLarge { .. }) => {
                    tracing::error!(error = %e, "A message to the supervisor was too large for the link; dropped it.");
                    // An operation must still get its answer.
                    if let Some(op_id) = dropped_op {
                        let _ = writer
                            .feed(WorkerToControl::SessionResult {
                                op_id,
                                result_json: None,
                                error: Some(RpcError::new(
                                    ErrorCode::Internal,
                                    format!("the answer was too large for the worker link ({e})"),
                                )),
                            })
                            .await;
                    }
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
}
