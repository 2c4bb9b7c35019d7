//! Room for queued messages: a run admitted while its session already has one unsettled
//! (running, queued, or its outcome being written) waits in memory, here and in the worker,
//! until the session is free. Each session's queue has its own cap (`messages.queue.cap`);
//! this bounds them all, per agent and in all, in messages and bytes
//! (`messages.queue.max_queued_*`).
//!
//! A run asks for room (`Command::Reserve`) before it is recorded; the charge then follows
//! the run until it settles. A reservation whose run never came (a duplicate, a refusal
//! after it) is given back (`Command::Unreserve`), or lapses after [`RESERVATION_TTL`]. In
//! cluster mode the gateway a run was sent to holds its charge until the run's outcome
//! comes back from its agent's owner ([`Hold::Outcome`]), and the owner charges it again
//! when it starts it, so each front door bounds what it sent and each owner what its
//! agents hold, whichever door it came through.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::config::QueueLimits;

/// How long a reservation whose run was not handed over counts.
pub(super) const RESERVATION_TTL: Duration = Duration::from_secs(60);

/// How long a front door's charge for a run elsewhere counts at most, if its give-back
/// never came (its outcome never did): the owner's own charge is what bounds memory, the
/// front door's only refuses early, so a lapse here under-counts at worst.
pub(super) const ELSEWHERE_TTL: Duration = Duration::from_secs(3600);

/// What one run holds.
pub(super) struct Charge {
    agent_id: String,
    session_key: String,
    bytes: u64,
    /// It waits for its busy session (only these count against the limits).
    queued: bool,
    since: Instant,
    hold: Hold,
}

/// How long a reservation whose run this gateway does not dispatch holds its room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The run is handed over here: until then, at most [`RESERVATION_TTL`].
    Dispatch,
    /// The run runs on another cluster member: until it is given back, when the run's
    /// outcome arrives (at most [`ELSEWHERE_TTL`]). Such charges hold no message here: they
    /// count against what this gateway sends on, not against what it holds as an owner.
    Outcome,
}

/// A request for room: `bytes` of message for `session_key` of `agent_id`.
#[derive(Debug)]
pub struct Reserve {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    pub bytes: u64,
    pub hold: Hold,
}

/// Why there is no room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFull(pub String);

/// Queued messages and their bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub messages: usize,
    pub bytes: u64,
}

/// The charges of the runs that hold room, by run id. The control core owns one and asks it
/// with what only the core knows (whether a run is known, a session busy, a run settled):
/// the room itself decides nothing else.
#[derive(Default)]
pub(super) struct QueueRoom {
    charges: HashMap<String, Charge>,
}

impl QueueRoom {
    /// Room for the run, or why not. `Ok(true)`: charged (give it back if the run does not
    /// come); `Ok(false)`: the run is already known (`known`: a retry), nothing new is
    /// charged. `busy`: its session has a run unsettled (then it queues, and counts).
    pub(super) fn reserve(
        &mut self,
        r: Reserve,
        known: bool,
        busy: bool,
        limits: &QueueLimits,
        now: Instant,
    ) -> Result<bool, QueueFull> {
        if let Some(c) = self.charges.get_mut(&r.run_id) {
            // Sent here and run here after all: it holds its message here now.
            if r.hold == Hold::Dispatch {
                c.hold = Hold::Dispatch;
            }
            return Ok(false);
        }
        if known {
            return Ok(false);
        }
        let busy = busy
            || self
                .charges
                .values()
                .any(|c| c.session_key == r.session_key);
        if busy {
            // A run held here counts what is held here; one sent on, everything waiting.
            let counts = |c: &Charge| r.hold == Hold::Outcome || c.hold == Hold::Dispatch;
            check(
                self.usage(Some(&r.agent_id), counts),
                self.usage(None, counts),
                r.bytes,
                &r.agent_id,
                limits,
            )?;
        }
        self.charges.insert(
            r.run_id,
            Charge {
                agent_id: r.agent_id,
                session_key: r.session_key,
                bytes: r.bytes,
                queued: busy,
                since: now,
                hold: r.hold,
            },
        );
        Ok(true)
    }

    /// A reservation whose run will not come (`dispatched`: it came after all; its charge
    /// stays until it settles).
    pub(super) fn unreserve(&mut self, run_id: &str, dispatched: bool) {
        if !dispatched {
            self.charges.remove(run_id);
        }
    }

    /// Queued messages of `agent_id` (`None`: of all agents).
    #[cfg(test)]
    pub(super) fn queued_usage(&self, agent_id: Option<&str>) -> Usage {
        self.usage(agent_id, |_| true)
    }

    /// Like [`QueueRoom::queued_usage`], of the charges `counts` keeps.
    fn usage(&self, agent_id: Option<&str>, counts: impl Fn(&Charge) -> bool) -> Usage {
        self.charges
            .values()
            .filter(|c| c.queued && agent_id.is_none_or(|a| a == c.agent_id) && counts(c))
            .fold(Usage::default(), |u, c| Usage {
                messages: u.messages + 1,
                bytes: u.bytes + c.bytes,
            })
    }

    /// Drops the charges of settled runs and of reservations that lapsed. `unsettled`:
    /// `Some(whether the run is unsettled)` for a run the core knows, `None` for one it
    /// does not (a reservation whose run has not come, or runs on another member).
    pub(super) fn prune(&mut self, now: Instant, unsettled: impl Fn(&str) -> Option<bool>) {
        self.charges.retain(|id, c| match (unsettled(id), c.hold) {
            (Some(open), _) => open,
            (None, Hold::Outcome) => now.saturating_duration_since(c.since) < ELSEWHERE_TTL,
            (None, Hold::Dispatch) => now.saturating_duration_since(c.since) < RESERVATION_TTL,
        });
    }

    /// Whether run `run_id` holds a charge.
    #[cfg(test)]
    pub(super) fn holds(&self, run_id: &str) -> bool {
        self.charges.contains_key(run_id)
    }

    /// Whether no run holds room.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.charges.is_empty()
    }
}

/// Whether one more queued message of `bytes` fits beside `agent` and `total`.
fn check(
    agent: Usage,
    total: Usage,
    bytes: u64,
    agent_id: &str,
    l: &QueueLimits,
) -> Result<(), QueueFull> {
    let full = |what: String| {
        Err(QueueFull(format!(
            "too many messages are queued for busy sessions ({what}); retry when runs finish"
        )))
    };
    if agent.messages >= l.per_agent {
        return full(format!(
            "agent {agent_id:?} has {} waiting; messages.queue.max_queued_per_agent is {}",
            agent.messages, l.per_agent
        ));
    }
    if agent.bytes + bytes > l.per_agent_bytes {
        return full(format!(
            "agent {agent_id:?} has {} bytes waiting; messages.queue.max_queued_bytes_per_agent is {}",
            agent.bytes, l.per_agent_bytes
        ));
    }
    if total.messages >= l.total {
        return full(format!(
            "{} waiting in all; messages.queue.max_queued_total is {}",
            total.messages, l.total
        ));
    }
    if total.bytes + bytes > l.total_bytes {
        return full(format!(
            "{} bytes waiting in all; messages.queue.max_queued_bytes_total is {}",
            total.bytes, l.total_bytes
        ));
    }
    Ok(())
}
