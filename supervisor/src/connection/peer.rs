//! Who is on a connection, as its handshake established it: the transport it came by, its
//! scopes and capabilities, its device and presence.

use ipc::gateway::Scope;

/// Which transport a connection arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The local unix socket: the peer is trusted by file mode and uid; errors on garbage
    /// input are always answered (there is no close code to carry them).
    Unix,
    /// WebSocket: token / device authentication; refusals follow OpenClaw's close codes.
    WebSocket(crate::auth::Peer),
}

/// What the handshake established.
#[derive(Debug, Clone)]
pub struct Session {
    pub conn_id: String,
    pub scopes: Vec<String>,
    pub caps: Vec<String>,
    pub transport: Transport,
    /// The device that proved its identity, if any.
    pub device_id: Option<String>,
    /// How it shows in `system-presence`.
    pub presence: ipc::gateway::PresenceEntry,
}

impl Session {
    pub fn has_scope(&self, needed: Scope) -> bool {
        needed.held_in(&self.scopes)
    }
}

/// A connection's scopes, for the event forwarder.
pub(super) struct ScopeSet(pub Vec<String>);

impl ScopeSet {
    pub fn has_scope(&self, needed: Scope) -> bool {
        needed.held_in(&self.0)
    }
}
