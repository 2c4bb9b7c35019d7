//! Who is connected (`system-presence`, the `presence` event): the gateway's own entry and
//! one per live authenticated connection. One part of the gateway's shared state, handed to
//! the connection loop (which sets it) and to what lists it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use ipc::gateway::{PresenceEntry, PresenceEvent};

use crate::events::{now_ms, Deferred, EventHub};

/// Most entries a `presence` event carries (the newest connections).
pub const PRESENCE_EVENT_MAX: usize = 64;

/// The live connections' entries, and the hub every change is told on.
pub struct Presence {
    hub: EventHub,
    /// By connection id.
    present: Mutex<BTreeMap<String, PresenceEntry>>,
    /// The gateway's own entry (first in every list).
    own: PresenceEntry,
}

impl Presence {
    pub fn new(hub: EventHub) -> Self {
        Self {
            hub,
            present: Mutex::new(BTreeMap::new()),
            own: own_entry(),
        }
    }

    /// The gateway's own entry, then the live connections, oldest first.
    pub fn list(&self) -> Vec<PresenceEntry> {
        let present = self.present.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<_> = Vec::with_capacity(present.len() + 1);
        // The gateway's own entry is as of now, as OpenClaw's (clients show its age).
        list.push(PresenceEntry {
            ts: now_ms(),
            ..self.own.clone()
        });
        let mut clients: Vec<_> = present.values().cloned().collect();
        clients.sort_by_key(|e| e.online_since);
        list.extend(clients);
        list
    }

    /// A connection arrived (`Some`) or left (`None`); every client hears the new list (its
    /// newest [`PRESENCE_EVENT_MAX`] entries).
    pub fn set(&self, conn_id: &str, entry: Option<PresenceEntry>) {
        {
            let mut present = self.present.lock().unwrap_or_else(|p| p.into_inner());
            match entry {
                Some(e) => present.insert(conn_id.to_owned(), e),
                None => present.remove(conn_id),
            };
        }
        // Every client hears every change, so the event is bounded: with many connections a
        // connect would otherwise queue the whole list on each of them (`system-presence`
        // still answers all of it).
        let mut presence = self.list();
        // The gateway's own entry stays first; the oldest clients go.
        let excess = presence.len().saturating_sub(PRESENCE_EVENT_MAX);
        presence.drain(1..1 + excess);
        self.hub
            .publish_deferred(&Deferred::presence(&PresenceEvent { presence }));
    }
}

/// The gateway's presence entry, as OpenClaw's: host, version, platform, `mode: "gateway"`,
/// `reason: "self"` and a per-process instance id.
fn own_entry() -> PresenceEntry {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let version = env!("CARGO_PKG_VERSION");
    PresenceEntry {
        ts: now_ms(),
        text: Some(format!(
            "Gateway: {host} · app {version} · mode gateway · reason self"
        )),
        host: Some(host),
        client_id: None,
        mode: "gateway".into(),
        version: version.into(),
        platform: std::env::consts::OS.into(),
        instance_id: Some(uuid::Uuid::new_v4().to_string()),
        device_family: None,
        roles: Vec::new(),
        scopes: Vec::new(),
        reason: "self".into(),
        online_since: None,
        device_id: None,
    }
}
