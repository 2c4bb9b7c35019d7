//! What a connection follows: the sessions whose `session.message` events it gets, whether
//! it gets `sessions.changed`, and where its live events start. The methods that read or
//! change it (`sessions.subscribe`, `sessions.messages.subscribe|unsubscribe`,
//! `agent.events`) get it as an explicit argument, a [`Following`], instead of the
//! connection: they change what it follows, never what it is sent.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use crate::connection::out::Out;
use crate::events::EventHub;

/// Sessions one connection may follow with `sessions.messages.subscribe`.
pub(super) const MAX_MESSAGE_SUBSCRIPTIONS: usize = 1024;

/// A connection following as many sessions as it may refused one more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a connection may follow at most {MAX_MESSAGE_SUBSCRIPTIONS} sessions")]
pub(super) struct TooManyFollowed;

/// One connection's subscriptions, as its handlers see them.
#[derive(Clone, Copy)]
pub(super) struct Following<'a>(&'a Out);

impl<'a> Following<'a> {
    pub(super) fn of(out: &'a Out) -> Self {
        Following(out)
    }

    /// The hub position before this connection's first event: it gets every later one
    /// live (what `agent.events` replays ends here).
    pub(super) fn live_from(self) -> u64 {
        self.0.hub_start.load(Ordering::Relaxed)
    }

    /// Whether this connection follows the messages of `session_key`.
    pub(super) fn follows(self, session_key: &str) -> bool {
        self.0
            .message_keys
            .lock()
            .map(|k| k.contains(session_key))
            .unwrap_or(false)
    }

    /// Follows (`subscribe`) or stops following the messages of `session_key`; a follower
    /// watches the hub's session events from then on.
    pub(super) fn set_messages(
        self,
        hub: &EventHub,
        session_key: &str,
        subscribe: bool,
    ) -> Result<(), TooManyFollowed> {
        {
            let mut keys = self
                .0
                .message_keys
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            follow(&mut keys, session_key, subscribe, MAX_MESSAGE_SUBSCRIPTIONS)?;
        }
        if subscribe {
            self.0.watch_sessions(hub);
        }
        Ok(())
    }

    /// This connection gets `sessions.changed` from now until it closes (as OpenClaw's
    /// subscriptions).
    pub(super) fn subscribe_sessions(self, hub: &EventHub) {
        self.0.sessions_subscribed.store(true, Ordering::Relaxed);
        self.0.watch_sessions(hub);
    }
}

/// Adds `key` to the followed `keys` (`subscribe`) or removes it. A key already followed
/// is followed again even when the set is full; a new one past `max` is refused.
fn follow(
    keys: &mut BTreeSet<String>,
    key: &str,
    subscribe: bool,
    max: usize,
) -> Result<(), TooManyFollowed> {
    if !subscribe {
        keys.remove(key);
    } else if keys.len() >= max && !keys.contains(key) {
        return Err(TooManyFollowed);
    } else {
        keys.insert(key.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_follows_up_to_its_cap_and_may_always_unfollow() {
        let mut keys = BTreeSet::new();
        assert_eq!(follow(&mut keys, "a", true, 2), Ok(()));
        assert_eq!(follow(&mut keys, "b", true, 2), Ok(()));
        assert_eq!(follow(&mut keys, "c", true, 2), Err(TooManyFollowed));
        // Following again what it follows is no new subscription.
        assert_eq!(follow(&mut keys, "a", true, 2), Ok(()));
        assert_eq!(follow(&mut keys, "a", false, 2), Ok(()));
        assert_eq!(
            follow(&mut keys, "x", false, 2),
            Ok(()),
            "not followed: fine"
        );
        assert_eq!(follow(&mut keys, "c", true, 2), Ok(()));
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(
            TooManyFollowed.to_string(),
            "a connection may follow at most 1024 sessions"
        );
    }
}
