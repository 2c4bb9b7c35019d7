//! The order in which one connection's turn requests are admitted: each after the one read
//! before it, whatever becomes of either.

use super::super::*;

/// A turn request's place in its connection's order of admission: it is admitted after
/// the one read before it (`previous` resolves when that one is dispatched or refused) and
/// lets the next one go when dropped. So messages sent back to back on one connection run
/// and are recorded in the order they were sent, though each is handled concurrently.
pub struct AdmissionTurn {
    previous: Option<tokio::sync::oneshot::Receiver<()>>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl AdmissionTurn {
    /// The next turn after `previous` (the receiver of the turn before, if any); returns it
    /// and the receiver the next turn waits on.
    pub fn after(
        previous: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> (AdmissionTurn, tokio::sync::oneshot::Receiver<()>) {
        let (done, next) = tokio::sync::oneshot::channel();
        (
            AdmissionTurn {
                previous,
                done: Some(done),
            },
            next,
        )
    }

    /// This turn split in two, for a request whose handler may let its turn go before the
    /// request is answered (an early refusal): the handler gets the first half; the next
    /// request goes only once that half is released *and* [`Held::release_after`]'s
    /// `answered` has come, so it is admitted after this request's answer is queued.
    pub(in crate::rpc) fn held_until_answered(mut self) -> (AdmissionTurn, Held) {
        let (done, released) = tokio::sync::oneshot::channel();
        let handed = AdmissionTurn {
            previous: self.previous.take(),
            done: Some(done),
        };
        (
            handed,
            Held {
                released,
                rest: self,
            },
        )
    }

    pub(in crate::rpc) async fn wait_previous(&mut self) {
        if let Some(p) = self.previous.take() {
            let _ = p.await;
        }
    }
}

/// The half of a turn [`AdmissionTurn::held_until_answered`] keeps back.
pub(in crate::rpc) struct Held {
    released: tokio::sync::oneshot::Receiver<()>,
    rest: AdmissionTurn,
}

impl Held {
    /// Lets the next request go once the handler released its half and `answered` came.
    pub(in crate::rpc) async fn release_after(
        self,
        answered: impl std::future::Future<Output = ()>,
    ) {
        let _ = self.released.await;
        answered.await;
        drop(self.rest);
    }
}

impl Drop for AdmissionTurn {
    /// A turn refused before its turn came (bad params, unknown agent, draining) still lets
    /// the next one go only after the one before it: order holds past a refusal.
    fn drop(&mut self) {
        if let (Some(previous), Some(done)) = (self.previous.take(), self.done.take()) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        let _ = previous.await;
                        drop(done);
                    });
                }
                // No runtime (cannot happen in the gateway): releasing at once is the only
                // choice left.
                Err(_) => drop(done),
            }
        }
    }
}

/// Whether `method` is admitted in its connection's order (see [`AdmissionTurn`]).
pub fn is_ordered(method: &str) -> bool {
    matches!(
        Method::parse(method),
        Some(Method::Agent | Method::ChatSend | Method::SessionsCreate)
    )
}
