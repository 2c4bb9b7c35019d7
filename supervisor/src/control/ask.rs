//! Asking a worker for one kind of session operation and being handed that kind's reply.
//! The link (and cluster mode's hop between gateways) carries [`ipc::session_ops::SessionOp`]
//! and [`SessionReply`]; a caller asks with an [`Op`] and gets its `Op::Reply`, or an
//! [`AskError`]. A reply of another kind is a bug, not input: it is logged here, once, and
//! becomes [`AskError::Unexpected`].

use ipc::session_ops::{Op, SessionReply};
use ipc::{ErrorCode, RpcError};

use super::OpResult;

/// Why a session operation has no reply of its kind.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    /// The worker could not do it (`SessionReply::Failed`), or could not be asked (not
    /// running, overloaded, no answer in time, another gateway unreachable): what it or the
    /// gateway said.
    #[error("{}", .0.message)]
    Failed(RpcError),
    /// The worker answered with a reply of another kind (logged where it was found).
    #[error("the agent's worker gave an unexpected answer")]
    Unexpected,
}

/// A worker's reply as an operation's result: `Failed` and a reply this build does not know
/// are errors, any other reply is the answer (of whichever kind; [`reply_of`] checks that).
pub(super) fn settled(reply: SessionReply) -> OpResult {
    match reply {
        SessionReply::Failed { error } => Err(error),
        SessionReply::Unknown => Err(unknown_reply()),
        done => Ok(done),
    }
}

/// The answer to `O`, out of what asking for it produced.
pub fn reply_of<O: Op>(result: OpResult) -> Result<O::Reply, AskError> {
    let reply = result.map_err(AskError::Failed)?;
    O::reply(reply).map_err(|other| match settled(other) {
        Err(error) => AskError::Failed(error),
        Ok(other) => unexpected_reply(&other),
    })
}

/// A reply newer than this build (its kind unknown here); also what an answer relayed from
/// a newer gateway in cluster mode decodes to.
fn unknown_reply() -> RpcError {
    RpcError::new(
        ErrorCode::Internal,
        "the worker answered with a reply this build does not know",
    )
}

/// A worker answered a session operation with a reply of another kind (a bug, not input).
fn unexpected_reply(reply: &SessionReply) -> AskError {
    tracing::error!(
        ?reply,
        "The worker answered a session operation with the wrong kind of reply."
    );
    AskError::Unexpected
}

#[cfg(test)]
mod tests {
    use ipc::session_ops::{DeleteOp, DeleteReply, LanesOp, LanesReply};

    use super::*;

    fn lanes() -> SessionReply {
        LanesReply {
            lanes: Vec::new(),
            queued: 1,
            active: 0,
        }
        .into()
    }

    #[test]
    fn the_reply_of_the_asked_kind_is_the_answer() {
        let deleted = reply_of::<DeleteOp>(Ok(DeleteReply { deleted: true }.into()));
        assert_eq!(deleted, Ok(DeleteReply { deleted: true }));
        let seen = reply_of::<LanesOp>(Ok(lanes())).map(|l| l.queued);
        assert_eq!(seen, Ok(1));
    }

    #[test]
    fn a_reply_of_another_kind_is_one_error_with_todays_text() {
        let e = reply_of::<DeleteOp>(Ok(lanes())).unwrap_err();
        assert_eq!(e, AskError::Unexpected);
        assert_eq!(
            e.to_string(),
            "the agent's worker gave an unexpected answer"
        );
    }

    #[test]
    fn failures_keep_what_the_worker_or_the_gateway_said() {
        let busy = RpcError::new(ErrorCode::SessionBusy, "busy");
        let failed = SessionReply::Failed {
            error: busy.clone(),
        };
        assert_eq!(
            reply_of::<DeleteOp>(Ok(failed)),
            Err(AskError::Failed(busy.clone()))
        );
        assert_eq!(
            reply_of::<DeleteOp>(Err(busy.clone())),
            Err(AskError::Failed(busy))
        );
        let newer = reply_of::<LanesOp>(Ok(SessionReply::Unknown)).unwrap_err();
        assert_eq!(newer, AskError::Failed(unknown_reply()));
        assert_eq!(
            newer.to_string(),
            "the worker answered with a reply this build does not know"
        );
    }
}
