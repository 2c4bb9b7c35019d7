//! Starting a run on this gateway, the one way a run starts in either mode: room for it in
//! the session queues (`control::queue_room`), its durable record in the gateway db (the
//! idempotency key, R-A3), the acknowledgement, the hand-over to the control actor, and
//! the failure recorded when the actor cannot take it, so the run still ends once.
//! Admission calls [`start`] for a run admitted on a single gateway; in cluster mode the
//! agent's owner calls it for every run it takes from the agent's queue.

use std::sync::Arc;

use ipc::control::SubmitRun;
use tokio::sync::oneshot;

use crate::control::{Arrival, ControlError, ControlHandle, Dispatch, Hold, QueueFull, Reserve};
use crate::events::now_ms;
use crate::gatewaydb::{AcceptOutcome, DbError, GatewayDb, NewRun, StoredRun};
use crate::outcome::{Outcome, StoredTerminal};
use crate::run_end::GatewayEnd;

/// A run to start: what the worker gets, and what its record keeps besides.
pub struct RunStart {
    pub agent_id: String,
    /// What identifies the request besides its key (a retry must match it).
    pub request_hash: String,
    pub run: SubmitRun,
}

/// How a run comes to this gateway, which decides when it asks for room in the session
/// queues and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Admitted here: its room is charged before it is recorded, and no room is a refusal
    /// the client may retry with the same key.
    Admitted,
    /// Delivered from the cluster to its agent's owner: charged as it is handed over; no
    /// room ends the run `error`, recorded and told as any run's end (its front door
    /// acknowledged it already, and a run the cluster accepted must end once).
    Delivered,
    /// Delivered, but started by an owner that was lost: recorded and ended `error` with
    /// this reason by the control actor, as any run ends, and never run (its tools may
    /// have run).
    Orphaned(String),
}

/// How a start went.
pub enum Started {
    /// Recorded and handed over (or failed as it was handed over): its outcome, once durable.
    New(oneshot::Receiver<Arc<Outcome>>),
    /// Its key was recorded before and the run has not ended.
    InFlight {
        agent_id: String,
        session_key: String,
    },
    /// Its key was recorded before and the run ended: its outcome.
    Finished(StoredTerminal),
}

/// Why a run was not started (nothing of it was recorded).
#[derive(Debug, thiserror::Error)]
pub enum StartRefused {
    #[error("{}", .0.0)]
    QueueFull(QueueFull),
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("cannot accept the run: {0}")]
    Record(DbError),
    #[error("idempotencyKey {run_id:?} was already used for a different request ({why}); use a new key for a new request")]
    Conflict { run_id: String, why: String },
}

/// Starts `s`, which came as `entry` says: charges its room (admitted), records it, calls
/// `accepted(accepted_at)` once it is recorded new (the admission's acknowledgement), then
/// hands it to the control actor.
pub async fn start(
    db: &GatewayDb,
    control: &ControlHandle,
    s: RunStart,
    entry: Entry,
    accepted: impl AsyncFnOnce(u64),
) -> Result<Started, StartRefused> {
    let mut room = match entry {
        Entry::Admitted => Room::reserve(control, room_for(&s, Hold::Dispatch)).await?,
        Entry::Delivered | Entry::Orphaned(_) => Room { charged: None },
    };
    let recorded = db
        .accept(NewRun {
            run_id: s.run.run_id.clone(),
            agent_id: s.agent_id.clone(),
            session_key: s.run.session_key.clone(),
            accepted_at: s.run.accepted_at,
            request_hash: s.request_hash.clone(),
        })
        .await;
    match recorded {
        Err(e) => {
            tracing::warn!(error = %e, "Cannot record an accepted run.");
            Err(StartRefused::Record(e))
        }
        Ok(AcceptOutcome::Conflict(why)) => Err(StartRefused::Conflict {
            run_id: s.run.run_id,
            why,
        }),
        Ok(AcceptOutcome::Existing(existing)) => Ok(match *existing {
            StoredRun::Active {
                agent_id,
                session_key,
            } => Started::InFlight {
                agent_id,
                session_key,
            },
            StoredRun::Terminal { terminal, .. } => Started::Finished(terminal),
        }),
        Ok(AcceptOutcome::Inserted) => {
            accepted(s.run.accepted_at).await;
            // The charge now follows the run in the control actor.
            room.handed_over();
            let arrival = match entry {
                Entry::Admitted => Arrival::Run,
                Entry::Delivered => Arrival::ChargeAndRun(room_for(&s, Hold::Dispatch)),
                Entry::Orphaned(why) => Arrival::End(why),
            };
            Ok(Started::New(hand_over(db, control, s, arrival).await))
        }
    }
}

/// Hands a recorded run to the control actor; one it cannot take is recorded as failed.
async fn hand_over(
    db: &GatewayDb,
    control: &ControlHandle,
    s: RunStart,
    arrival: Arrival,
) -> oneshot::Receiver<Arc<Outcome>> {
    let (run_id, session_key) = (s.run.run_id.clone(), s.run.session_key.clone());
    let (done, rx) = oneshot::channel();
    let dispatch = Dispatch {
        agent_id: s.agent_id.clone(),
        done,
        run: s.run,
        arrival,
    };
    let Err(e) = control.dispatch(dispatch) else {
        return rx;
    };
    let run = crate::projection::RunRef {
        run_id: &run_id,
        session_key: &session_key,
        agent_id: &s.agent_id,
    };
    let o = GatewayEnd::error(format!("cannot start the run: {e}"), now_ms()).outcome(&run);
    let _ = db.finish(run_id.clone(), o.stored()).await;
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(o);
    rx
}

/// What `s` asks of the queue room: its message, extra prompt and attachments.
pub fn room_for(s: &RunStart, hold: Hold) -> Reserve {
    let r = &s.run;
    let bytes = r.message.len()
        + r.extra_system_prompt.as_ref().map_or(0, String::len)
        + r.attachments.iter().map(|x| x.data.len()).sum::<usize>();
    Reserve {
        run_id: r.run_id.clone(),
        agent_id: s.agent_id.clone(),
        session_key: r.session_key.clone(),
        bytes: bytes as u64,
        hold,
    }
}

/// A run's charge on the room for queued messages, given back when dropped before its
/// run is handed over (a duplicate, a conflict, a failed record; in cluster mode at the
/// front door, when the run's outcome has come back).
pub struct Room {
    charged: Option<(ControlHandle, String)>,
}

impl Room {
    /// Room for the run, or why not (the queues are full, or the actor is gone).
    pub async fn reserve(control: &ControlHandle, ask: Reserve) -> Result<Room, StartRefused> {
        let run_id = ask.run_id.clone();
        match control.reserve(ask).await? {
            Ok(true) => Ok(Room {
                charged: Some((control.clone(), run_id)),
            }),
            // Already charged, or a retry of a run the actor knows: nothing new to give back.
            Ok(false) => Ok(Room { charged: None }),
            Err(full) => Err(StartRefused::QueueFull(full)),
        }
    }

    fn handed_over(&mut self) {
        self.charged = None;
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        if let Some((control, run_id)) = self.charged.take() {
            control.unreserve(run_id);
        }
    }
}
