//! How a method's answer reaches its connection, in one place. A handler reads its params
//! and gives its result (or the error to answer) as the method table types them; what must
//! happen around the answer (wait for the events before it, close connections after it) it
//! declares in a [`Reply`], and the entry points here carry it out. Handlers never write to
//! the connection themselves.
//!
//! Methods that answer once go through [`serve`] / [`serve_reply`].

use ipc::gateway::{ErrorShape, MethodSpec, Never};

use super::request::{self, Request};
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
}

impl<T> Reply<T> {
    /// `result`, answered at once.
    pub(super) fn now(result: T) -> Self {
        Reply {
            result,
            after_hub: None,
            closing: Vec::new(),
        }
    }

    /// `result`, answered once the connection has passed hub position `hub_seq`.
    pub(super) fn after_events(result: T, hub_seq: u64) -> Self {
        Reply {
            after_hub: Some(hub_seq),
            ..Reply::now(result)
        }
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
pub(super) async fn read_params<M: MethodSpec>(req: &Request) -> Answer<M::Params> {
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
    let answer = match read_params::<M>(&req).await {
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
        }
        Err(error) => out.err(id, error).await,
    }
}

/// Answers request `id` with `error`, for a request no handler takes (a method this
/// connection may not call, or one routed wrongly).
pub(super) async fn refuse(out: &Out, id: &str, error: ErrorShape) {
    respond::<Never>(out, id, Err(error)).await
}

#[cfg(test)]
mod tests;
