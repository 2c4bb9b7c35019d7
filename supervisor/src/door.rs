//! Limits at the front door, before a client has proved anything: how many connections, how
//! long headers and the upgrade may take, how many bytes an unauthenticated WebSocket may
//! make the gateway read, which browser origins may connect, which `Host` a loopback bind
//! answers, and how slowly a failed `connect` is answered.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A request's headers must arrive within this.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A TCP connection must finish its one plain request, or its upgrade, within this.
pub const PRE_UPGRADE_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest request head read (hyper's read buffer).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Bytes an unauthenticated WebSocket may make the gateway read in all (the `connect`
/// frame is at most [`ipc::gateway::MAX_PREAUTH_PAYLOAD_BYTES`]; framing and a pipelined
/// frame fit in the rest).
pub const PREAUTH_READ_BUDGET: usize = 2 * ipc::gateway::MAX_PREAUTH_PAYLOAD_BYTES;
/// How long a refused `connect` waits before its answer (slows token guessing).
pub const FAILED_AUTH_DELAY: Duration = Duration::from_millis(500);
/// Unix-socket connections at once (the operator's CLI; a separate pool from the network).
pub const MAX_UNIX_CONNECTIONS: usize = 256;
/// File descriptors kept free beyond every connection cap: workers' links and pipes, the
/// databases, hook commands, the unix socket's connections.
const RESERVED_FDS: u64 = 256 + MAX_UNIX_CONNECTIONS as u64;

/// The network connection cap: `configured`, lowered so that [`RESERVED_FDS`] stay free
/// under the file-descriptor limit (raised to its hard limit first).
pub fn connection_cap(configured: usize) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return configured;
    };
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let room = soft.saturating_sub(RESERVED_FDS).max(16);
    let cap = configured.min(usize::try_from(room).unwrap_or(usize::MAX));
    if cap < configured {
        tracing::warn!(
            configured,
            cap,
            nofile = soft,
            "gateway.max_connections lowered to fit the file-descriptor limit (raise LimitNOFILE)."
        );
    }
    cap
}

/// Scheme, host and port of an origin URL or a `Host` header (`default_scheme` for a
/// header, which has none); the port defaults by scheme.
fn authority(value: &str, default_scheme: &str) -> Option<(String, String, u16)> {
    let (scheme, rest) = value.split_once("://").unwrap_or((default_scheme, value));
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return None,
    };
    let auth = rest.split('/').next().unwrap_or("");
    if auth.is_empty() || auth.contains('@') {
        return None;
    }
    let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
        let (h, tail) = v6.split_once(']')?;
        (h, tail.strip_prefix(':'))
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (auth, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default_port,
    };
    Some((scheme, host.to_ascii_lowercase(), port))
}

/// Whether a browser `Origin` is the gateway's own: same host and port as the `Host` the
/// request was sent to, over http(s). Another port on localhost is another origin.
pub fn same_origin(origin: &str, host_header: &str) -> bool {
    let (Some((scheme, oh, op)), Some((_, hh, hp))) =
        (authority(origin, ""), authority(host_header, "http"))
    else {
        return false;
    };
    matches!(scheme.as_str(), "http" | "https") && oh == hh && op == hp
}

/// Whether a request's `Host` header names this gateway on a loopback bind: `localhost`, a
/// loopback address (`127.0.0.1`, `[::1]`), or one of `allowed` (`gateway.allowed_hosts`),
/// with any port. A page on another site whose name was re-pointed at 127.0.0.1 (DNS
/// rebinding) sends its own name and is refused. A request without `Host` (HTTP/1.0 tools)
/// is no browser's and passes.
pub fn host_allowed(host_header: Option<&str>, allowed: &[String]) -> bool {
    let Some(value) = host_header else {
        return true;
    };
    let Some((_, host, _)) = authority(value, "http") else {
        return false;
    };
    let host = host.strip_suffix('.').unwrap_or(&host);
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(host))
}

/// The read budget of one connection: shrinks as bytes are read until lifted.
#[derive(Clone, Debug)]
pub struct Budget(Arc<AtomicUsize>);

impl Budget {
    /// No more limit (the client authenticated).
    pub fn lift(&self) {
        self.0.store(usize::MAX, Ordering::Relaxed);
    }
}

/// An IO stream that reads at most its [`Budget`], then fails the read.
pub struct Budgeted<S> {
    inner: S,
    left: Arc<AtomicUsize>,
}

impl<S> Budgeted<S> {
    pub fn new(inner: S, budget: usize) -> (Self, Budget) {
        let left = Arc::new(AtomicUsize::new(budget));
        (
            Self {
                inner,
                left: left.clone(),
            },
            Budget(left),
        )
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Budgeted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let left = self.left.load(Ordering::Relaxed);
        if left == usize::MAX {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        if left == 0 {
            return Poll::Ready(Err(std::io::Error::other("pre-auth read budget exhausted")));
        }
        let mut tmp = vec![0u8; left.min(buf.remaining()).min(16 * 1024)];
        let mut limited = ReadBuf::new(&mut tmp);
        match Pin::new(&mut self.inner).poll_read(cx, &mut limited) {
            Poll::Ready(Ok(())) => {
                let n = limited.filled().len();
                buf.put_slice(limited.filled());
                let _ = self
                    .left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                        Some(if l == usize::MAX {
                            l
                        } else {
                            l.saturating_sub(n)
                        })
                    });
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Budgeted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_loopback_or_allowed_hosts_pass_issue_23() {
        let allowed = vec!["gw.internal".to_owned()];
        for ok in [
            "localhost",
            "localhost:18789",
            "LOCALHOST.:1",
            "127.0.0.1:18789",
            "127.8.9.10",
            "[::1]:18789",
            "gw.internal:443",
            "GW.Internal",
        ] {
            assert!(host_allowed(Some(ok), &allowed), "{ok}");
        }
        for bad in [
            "evil.example:18789",
            "localhost.evil.example",
            "10.0.0.1",
            "[::2]:1",
            "127.0.0.1.nip.io",
            "",
            "user@localhost",
            "localhost:notaport",
        ] {
            assert!(!host_allowed(Some(bad), &allowed), "{bad}");
        }
        assert!(host_allowed(None, &[]));
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert!(same_origin("http://127.0.0.1:18789", "127.0.0.1:18789"));
        assert!(same_origin("http://LOCALHOST:80", "localhost"));
        assert!(same_origin("http://[::1]:5000", "[::1]:5000"));
        assert!(!same_origin("http://localhost:3000", "localhost:18789"));
        assert!(!same_origin("http://127.0.0.1:3000", "127.0.0.1:18789"));
        assert!(!same_origin("https://evil.example", "127.0.0.1:18789"));
        assert!(!same_origin("null", "127.0.0.1:18789"));
        assert!(!same_origin("file://", "127.0.0.1:18789"));
        assert!(!same_origin("chrome-extension://abc", "abc"));
        assert!(!same_origin("http://a@127.0.0.1:1", "127.0.0.1:1"));
    }

    #[tokio::test]
    async fn the_budget_stops_reads_until_lifted() {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let (mut io, budget) = Budgeted::new(b, 10);
        a.write_all(&[7u8; 100]).await.unwrap();
        let mut got = vec![0u8; 100];
        let n = io.read(&mut got).await.unwrap();
        assert_eq!(n, 10);
        assert!(io.read(&mut got).await.is_err());
        budget.lift();
        let n = io.read(&mut got).await.unwrap();
        assert_eq!(n, 90);
    }
}
