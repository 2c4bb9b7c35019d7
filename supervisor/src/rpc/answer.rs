//! How a method's answer reaches its connection, in one place. A handler reads its params
//! and gives its result (or the error to answer) as the method table types them; what must
//! happen around the answer (wait for the events before it; close connections, or let the
//! connection's next ordered request go, after it) it declares in a [`Reply`], and the entry
//! points here carry it out. Handlers never write to the connection themselves.
//!
//! Most methods answer once, through [`serve`] / [`serve_reply`]. The three that start a run
//! (`agent`, `chat.send`, `sessions.create`) go through [`serve_run`]: their handler may send
//! a first answer ([`RunAnswers::ack`]) in the middle of its work, and gives its last one
//! ([`Last`]) at the end.

use std::marker::PhantomData;

use ipc::gateway::{ErrorShape, MethodSpec, Never};

use super::request::{self, Request};
use super::AdmissionTurn;
use crate::connection::out::Out;

/// What a method's handler gives: its result, or the error to answer.
pub(super) type Answer<T> = Result<T, ErrorShape>;

/// The WebSocket close a connection gets when its device's token is revoked or rotated
/// (OpenClaw's `4001 device removed`).
const DEVICE_REMOVED: (u16, &str) = (4001, "device removed");

/// A method's result and what must happen around its answer, declared by the handler and
/// carried out by [`serve_reply`] (and [`serve_run`]): the handler decides, the entry point
/// writes.
#[must_use]
pub(super) struct Reply<T> {
    result: T,
    /// Answered only once the connection has passed this hub position (`hub.published()`
    /// read after the outcome the answer tells of was published): the run's terminal events
    /// reach the client before the answer that says it ended.
    after_hub: Option<u64>,
    /// Closed once the answer is queued: the connections of a device whose token was just
    /// revoked or rotated (the caller may be one of them, and still gets its answer).
    closing: Vec<Out>,
    /// Let go once the answer is queued: the request's place in its connection's order, so
    /// that the next ordered request is admitted (and acked) only after this answer.
    turn: Option<AdmissionTurn>,
}

impl<T> Reply<T> {
    /// `result`, answered at once.
    pub(super) fn now(result: T) -> Self {
        Reply {
            result,
            after_hub: None,
            closing: Vec::new(),
            turn: None,
        }
    }

    /// `result`, answered once the connection has passed hub position `hub_seq`.
    pub(super) fn after_events(result: T, hub_seq: u64) -> Self {
        Reply {
            after_hub: Some(hub_seq),
            ..Reply::now(result)
        }
    }

    /// The result answered (for tests of the handlers that give it).
    #[cfg(test)]
    pub(super) fn result(&self) -> &T {
        &self.result
    }

    /// Then the connection's next ordered request goes (`turn` is let go).
    pub(super) fn then_next_turn(self, turn: Option<AdmissionTurn>) -> Self {
        Reply { turn, ..self }
    }

    /// Then `conns` are closed as their device's are (`4001 device removed`).
    pub(super) fn then_close_device(self, conns: Vec<Out>) -> Self {
        Reply {
            closing: conns,
            ..self
        }
    }
}

/// Parses the params of method `M` (their type is the method table's) straight from the
/// frame's text, or gives the error `invalid <method> params: ...`. A large frame is parsed
/// on the blocking pool, off the threads that serve other connections; either way the
/// request's share of the parse budgets is given back once its params are read.
async fn params<M: MethodSpec>(req: &Request) -> Answer<M::Params> {
    let raw = req.params.clone();
    let parsed = if raw
        .as_ref()
        .is_some_and(|r| r.get().len() > request::INLINE_PARSE_BYTES)
    {
        crate::connection::budget::off_thread(move || {
            ipc::gateway::parse_params::<M::Params>(raw.as_deref())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the parse did not finish: {e}")))
    } else {
        ipc::gateway::parse_params::<M::Params>(raw.as_deref())
    };
    req.parsed();
    parsed.map_err(|e| ErrorShape::invalid(format!("invalid {} params: {e}", req.method)))
}

/// Serves method `M` with `handler`, which takes its params and gives its result or the
/// error to answer, answered at once (see [`serve_reply`]).
pub(super) async fn serve<M: MethodSpec, Fut>(
    req: Request,
    out: &Out,
    handler: impl FnOnce(M::Params) -> Fut,
) where
    Fut: std::future::Future<Output = Answer<M::Result>>,
{
    serve_reply::<M>(req, out, async |p| handler(p).await.map(Reply::now)).await
}

/// Serves method `M` with `handler`, which takes its params and gives its [`Reply`] or the
/// error to answer: the params are parsed once (their type is the table's), and the answer
/// is written here, once, with what its reply declares around it.
pub(super) async fn serve_reply<M: MethodSpec>(
    req: Request,
    out: &Out,
    handler: impl AsyncFnOnce(M::Params) -> Answer<Reply<M::Result>>,
) {
    let answer = match params::<M>(&req).await {
        Ok(p) => handler(p).await,
        Err(e) => Err(e),
    };
    respond(out, &req.id, answer).await
}

/// Answers request `id` with a method's result or error: the one place a single answer is
/// written, after the events its reply waits for and before the closes it asks for.
async fn respond<T: serde::Serialize>(out: &Out, id: &str, answer: Answer<Reply<T>>) {
    match answer {
        Ok(reply) => {
            if let Some(hub_seq) = reply.after_hub {
                out.after_events(hub_seq).await;
            }
            out.ok_with(id, &reply.result).await;
            let (code, reason) = DEVICE_REMOVED;
            for conn in reply.closing {
                conn.close(code, reason).await;
            }
            drop(reply.turn);
        }
        Err(error) => out.err(id, error).await,
    }
}

/// Answers request `id` with `error`, for a request no handler takes (a method this
/// connection may not call, or one routed wrongly).
pub(super) async fn refuse(out: &Out, id: &str, error: ErrorShape) {
    respond::<Never>(out, id, Err(error)).await
}

/// The last answer of a method that starts a run, as its handler gives it to [`serve_run`].
#[must_use]
pub(super) enum Last<T> {
    /// Nothing more: the acknowledgement sent with the run's admission was the answer (the
    /// run's progress and outcome follow as events).
    Acked,
    /// This result, with what its reply declares.
    Result(Reply<T>),
    /// `agent`'s final result, as stored (`{ok, payload | error}` JSON text): sent byte for
    /// byte, so a replay gives what the first answer gave; after the events up to
    /// `after_hub`, if set.
    Stored {
        final_json: std::sync::Arc<str>,
        after_hub: Option<u64>,
    },
}

/// Where the answers of a request that starts a run go (`agent`, `chat.send`,
/// `sessions.create`). Unlike [`serve`]'s handlers, theirs answer in the middle of their
/// work: the run is acknowledged ([`RunAnswers::ack`]) after it is recorded and before it is
/// handed over, so that the ack reaches the client before any of the run's events; the last
/// answer (`agent`'s final result, or the only answer when no run was acknowledged) is the
/// handler's [`Last`], which [`serve_run`] writes.
pub(super) struct RunAnswers<'a, M> {
    out: &'a Out,
    id: &'a str,
    /// Told once an answer is queued (the ack, or the last answer): the connection's next
    /// ordered request waits for it (see [`serve_run`]).
    answered: &'a Answered,
    method: PhantomData<fn() -> M>,
}

impl<M> Clone for RunAnswers<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for RunAnswers<'_, M> {}

impl<M: MethodSpec> RunAnswers<'_, M> {
    /// The first answer: the acknowledgement of the run just accepted.
    pub(super) async fn ack(self, ack: M::Result) {
        respond(self.out, self.id, Ok(Reply::now(ack))).await;
        self.answered.0.notify_one();
    }

    /// The last answer (see [`Last`]).
    async fn last(self, last: Answer<Last<M::Result>>) {
        let (out, id) = (self.out, self.id);
        match last {
            Ok(Last::Acked) => {}
            Ok(Last::Result(reply)) => respond(out, id, Ok(reply)).await,
            Ok(Last::Stored {
                final_json,
                after_hub,
            }) => {
                if let Some(hub_seq) = after_hub {
                    out.after_events(hub_seq).await;
                }
                match crate::outcome::StoredFinal::parse(&final_json) {
                    Ok(stored) => out.res(&stored.frame(id)).await,
                    Err(e) => {
                        let e = format!("stored result is unreadable: {e}");
                        respond::<Never>(out, id, Err(ErrorShape::unavailable(e, None))).await
                    }
                }
            }
            Err(error) => respond::<Never>(out, id, Err(error)).await,
        }
    }
}

/// Serves method `M`, which starts a run, with `handler`: it takes where its answers go, its
/// params and the request's place in its connection's order (`turn`), may acknowledge the
/// run on the way, and gives its last answer, written here. The connection's next ordered
/// request goes when the handler lets the turn go (admission does, once the run is
/// dispatched or refused) and not before this request's first answer is queued, though a
/// handler that refuses early drops its turn before its error is written.
pub(super) async fn serve_run<'a, M: MethodSpec, Fut>(
    req: &'a Request,
    out: &'a Out,
    answered: &'a Answered,
    turn: Option<AdmissionTurn>,
    handler: impl FnOnce(RunAnswers<'a, M>, M::Params, Option<AdmissionTurn>) -> Fut,
) where
    Fut: std::future::Future<Output = Answer<Last<M::Result>>>,
{
    let (turn, held) = match turn.map(AdmissionTurn::held_until_answered) {
        Some((turn, held)) => (Some(turn), Some(held)),
        None => (None, None),
    };
    let answers = RunAnswers {
        out,
        id: &req.id,
        answered,
        method: PhantomData,
    };
    let serve = async {
        let last = match params::<M>(req).await {
            Ok(p) => handler(answers, p, turn).await,
            Err(e) => {
                drop(turn);
                Err(e)
            }
        };
        answers.last(last).await;
        answered.0.notify_one();
    };
    match held {
        Some(held) => {
            tokio::join!(serve, held.release_after(answered.0.notified()));
        }
        None => serve.await,
    }
}

/// Whether a request that starts a run has been answered yet (see [`serve_run`]); made by
/// its caller, which outlives the handler's borrows.
#[derive(Default)]
pub(super) struct Answered(tokio::sync::Notify);

#[cfg(test)]
mod tests;
