//! The local unix socket listener (`<state>/gateway.sock`, mode 0600): newline-delimited JSON
//! frames of Gateway protocol v4. Peers are trusted by the socket's file mode and must run as
//! this process's uid; others are refused on accept.

use std::path::Path;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use ipc::gateway::MAX_PREAUTH_PAYLOAD_BYTES;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec, LinesCodecError};

use crate::connection::out::{render, Out, Outbound};
use crate::connection::peer::Transport;
use crate::connection::{serve_connection, FrameSource, Inbound};
use crate::gateway::Gateway;

/// Binds the socket (removing a stale one: only call with the state lock held) with mode 0600.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // Create it private from the start: no window in which others could connect.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let listener = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = listener?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub async fn serve(listener: UnixListener, gw: Arc<Gateway>) {
    let my_uid = nix::unistd::geteuid().as_raw();
    let slots = Arc::new(tokio::sync::Semaphore::new(
        crate::door::MAX_UNIX_CONNECTIONS,
    ));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = gw.stopping.cancelled() => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "Accepting on the unix socket failed.");
                // Typically EMFILE: back off briefly instead of spinning.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == my_uid => {
                tracing::debug!(uid = cred.uid(), pid = cred.pid(), "Unix client accepted.");
            }
            Ok(cred) => {
                tracing::warn!(
                    uid = cred.uid(),
                    pid = cred.pid(),
                    "Refused unix client with another uid."
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "Cannot read unix peer credentials; refusing.");
                continue;
            }
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!("Unix socket connection cap reached; closed a new connection.");
            continue;
        };
        let gw2 = gw.clone();
        gw.connection_tasks.spawn(async move {
            connection(stream, gw2).await;
            drop(slot);
        });
    }
}

struct LineSource {
    inner: FramedRead<tokio::net::unix::OwnedReadHalf, LinesCodec>,
}

impl FrameSource for LineSource {
    async fn next(&mut self) -> Inbound {
        match self.inner.next().await {
            Some(Ok(line)) => Inbound::Text(line),
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => Inbound::TooLarge,
            Some(Err(LinesCodecError::Io(_))) | None => Inbound::Closed,
        }
    }

    fn set_max_frame(&mut self, max: usize) {
        *self.inner.decoder_mut() = LinesCodec::new_with_max_length(max);
    }
}

async fn connection(stream: UnixStream, gw: Arc<Gateway>) {
    let (rd, wr) = stream.into_split();
    let source = LineSource {
        inner: FramedRead::new(
            rd,
            LinesCodec::new_with_max_length(MAX_PREAUTH_PAYLOAD_BYTES),
        ),
    };
    let (out, mut rx, queued) = Out::new();
    let closed = out.closed.clone();
    let kill = out.kill.clone();
    let writer = tokio::spawn(async move {
        let mut sink = FramedWrite::new(wr, LinesCodec::new());
        'outer: loop {
            let item = tokio::select! {
                biased;
                _ = kill.cancelled() => break,
                item = rx.recv() => match item { Some(i) => i, None => break },
            };
            // Frames already queued go out in one write (an event and its chat mirror, a
            // burst of deltas).
            let mut next = Some(item);
            let mut closing = false;
            while let Some(item) = next.take() {
                if let Outbound::Close { .. } = item {
                    closing = true;
                    break;
                }
                if let Some(text) = render(&item, &queued) {
                    let fed = tokio::select! {
                        biased;
                        _ = kill.cancelled() => break 'outer,
                        r = sink.feed(text) => r,
                    };
                    if fed.is_err() {
                        break 'outer;
                    }
                }
                next = rx.try_recv().ok();
            }
            let flushed = tokio::select! {
                biased;
                _ = kill.cancelled() => break,
                r = SinkExt::<String>::flush(&mut sink) => r,
            };
            if flushed.is_err() || closing {
                break;
            }
        }
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            SinkExt::<String>::close(&mut sink),
        )
        .await;
        closed.cancel();
    });
    serve_connection(gw, Transport::Unix, source, out).await;
    // The writer ends when every sender is gone (the connection and its request tasks) or a
    // close was queued; a request still running keeps it alive to deliver its answer.
    let _ = writer.await;
}
