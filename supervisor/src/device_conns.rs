//! The live connections of proven devices, so that a revoked or rotated device token closes
//! them. A revoke commits to the gateway db and then sweeps this registry; a connect checks
//! its token in the db and then registers here. The sweep bumps an epoch under the same lock
//! as registration, and a device-token connect registers only if no sweep ran since before
//! its db check: whichever order the two take, the connection is either swept or refused.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::connection::out::Out;

#[derive(Default)]
pub struct DeviceConns {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Sweeps so far.
    epoch: u64,
    /// By connection id: the device and the connection's outbox.
    conns: HashMap<String, (String, Out)>,
}

impl DeviceConns {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sweep count now; a connect reads it before checking its token.
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Registers a connection of `device`. With `checked_at` (the epoch read before a
    /// device-token check), refuses (`false`) if a sweep ran since: that token may be the
    /// one just revoked, and the client should connect again.
    pub fn register(
        &self,
        conn_id: &str,
        device: &str,
        out: &Out,
        checked_at: Option<u64>,
    ) -> bool {
        let mut inner = self.lock();
        if checked_at.is_some_and(|e| e != inner.epoch) {
            return false;
        }
        inner
            .conns
            .insert(conn_id.to_owned(), (device.to_owned(), out.clone()));
        true
    }

    pub fn remove(&self, conn_id: &str) {
        self.lock().conns.remove(conn_id);
    }

    /// Devices with a connection open now.
    pub fn devices(&self) -> HashSet<String> {
        self.lock().conns.values().map(|(d, _)| d.clone()).collect()
    }

    /// Starts a sweep of `device`: bumps the epoch and returns its connections' outboxes.
    pub fn sweep(&self, device: &str) -> Vec<Out> {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner
            .conns
            .values()
            .filter(|(d, _)| d == device)
            .map(|(_, o)| o.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceConns;
    use crate::connection::out::Out;

    #[test]
    fn a_connect_checked_before_a_sweep_is_refused_after_it() {
        let reg = DeviceConns::default();
        let (out, _rx, _) = Out::new();
        // The connect reads the epoch, then checks its token (still valid in the db)...
        let checked_at = reg.epoch();
        // ...the revoke commits and sweeps before the connect registers...
        assert!(reg.sweep("dev1").is_empty());
        // ...so the registration is refused instead of leaving a revoked token connected.
        assert!(!reg.register("c1", "dev1", &out, Some(checked_at)));
        assert!(reg.devices().is_empty());
        // A connect that checks after the sweep registers and is swept by the next one.
        assert!(reg.register("c2", "dev1", &out, Some(reg.epoch())));
        assert_eq!(reg.sweep("dev1").len(), 1);
    }

    #[test]
    fn a_registered_connection_is_in_every_later_sweep_of_its_device_only() {
        let reg = DeviceConns::default();
        let (out, _rx, _) = Out::new();
        assert!(reg.register("c1", "dev1", &out, Some(reg.epoch())));
        // A gateway-token connection of a device has no token check to race.
        assert!(reg.register("c2", "dev2", &out, None));
        assert_eq!(reg.sweep("dev2").len(), 1);
        assert!(reg.register("c3", "dev2", &out, None));
        assert_eq!(reg.sweep("dev1").len(), 1);
        reg.remove("c1");
        assert!(reg.sweep("dev1").is_empty());
        assert_eq!(reg.devices().len(), 1);
    }
}
