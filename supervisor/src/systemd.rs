//! systemd integration: `sd_notify` messages over `$NOTIFY_SOCKET` (READY, STATUS, WATCHDOG,
//! STOPPING, EXTEND_TIMEOUT_USEC).
//!
//! Written by hand (a datagram per message, about 40 lines) rather than with a crate, because
//! the crates read `$NOTIFY_SOCKET` from the environment at each call while this project reads
//! the environment once, in `main`, and passes it down.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::Duration;

/// Sends notifications to the service manager, or does nothing when not under systemd.
#[derive(Clone, Default)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    socket: UnixDatagram,
    addr: SocketAddr,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// `notify_socket`: the value of `$NOTIFY_SOCKET` (a path, or `@name` for the abstract
    /// namespace); `watchdog_usec`: `$WATCHDOG_USEC` when `$WATCHDOG_PID` is unset or ours.
    pub fn new(notify_socket: Option<&str>, watchdog_usec: Option<u64>) -> Notifier {
        let Some(path) = notify_socket.filter(|p| !p.is_empty()) else {
            return Notifier::default();
        };
        let addr = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())
        } else {
            SocketAddr::from_pathname(path)
        };
        let (Ok(addr), Ok(socket)) = (addr, UnixDatagram::unbound()) else {
            tracing::warn!(
                socket = path,
                "Cannot use NOTIFY_SOCKET; systemd notifications are off."
            );
            return Notifier::default();
        };
        Notifier {
            inner: Some(Arc::new(Inner {
                socket,
                addr,
                watchdog: watchdog_usec.map(Duration::from_micros),
            })),
        }
    }

    fn send(&self, msg: &str) {
        if let Some(i) = &self.inner {
            if let Err(e) = i.socket.send_to_addr(msg.as_bytes(), &i.addr) {
                tracing::debug!(error = %e, "sd_notify failed.");
            }
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!(
            "READY=1\nSTATUS={status}\nMAINPID={}",
            std::process::id()
        ));
    }

    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={status}"));
    }

    /// The service reloads (a restart in the same process): `READY=1` follows.
    pub fn reloading(&self, status: &str) {
        let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1_000)
            .unwrap_or(0);
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={now}\nSTATUS={status}"
        ));
    }

    pub fn stopping(&self, status: &str) {
        self.send(&format!("STOPPING=1\nSTATUS={status}"));
    }

    /// Asks for more time to stop (during long drains).
    pub fn extend_timeout(&self, by: Duration) {
        self.send(&format!("EXTEND_TIMEOUT_USEC={}", by.as_micros()));
    }

    /// Pets the watchdog (only when systemd asked for one).
    pub fn watchdog(&self) {
        if self.inner.as_ref().is_some_and(|i| i.watchdog.is_some()) {
            self.send("WATCHDOG=1");
        }
    }

    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.inner.as_ref().and_then(|i| i.watchdog)
    }
}
