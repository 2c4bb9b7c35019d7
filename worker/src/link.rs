//! The worker's side of the control link: connect to the socket the supervisor named, send
//! `Hello`, receive `Welcome` (with the agent's spec) or `Rejected`.

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use interprocess::local_socket::tokio::{prelude::*, Stream as LocalStream};
use interprocess::local_socket::{GenericFilePath, ToFsName};
use ipc::control::{AgentSpec, ControlToWorker, Hello, HelloReply, Role, WorkerToControl};
use ipc::frame::{Codec, MAX_FRAME};
use tokio_util::codec::{FramedRead, FramedWrite};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub type LinkReader =
    FramedRead<tokio::io::ReadHalf<LocalStream>, Codec<ControlToWorker, WorkerToControl>>;
pub type LinkWriter =
    FramedWrite<tokio::io::WriteHalf<LocalStream>, Codec<ControlToWorker, WorkerToControl>>;

pub async fn connect(
    path: &Path,
    agent_id: &str,
) -> anyhow::Result<(AgentSpec, LinkReader, LinkWriter)> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, LocalStream::connect(name)).await??;
    let (rd, wr) = tokio::io::split(stream);
    let mut hello_writer = FramedWrite::new(wr, Codec::<HelloReply, Hello>::new());
    hello_writer
        .send(Hello {
            protocol: ipc::version::PROTOCOL_VERSION,
            min_protocol: ipc::version::MIN_PROTOCOL_VERSION,
            build: ipc::version::BUILD.into(),
            // The supervisor knows its child by the socket's peer credentials: no token.
            role: Role::Worker {
                agent_id: agent_id.to_owned(),
                token: String::new(),
            },
        })
        .await?;
    let mut hello_reader =
        FramedRead::new(rd, Codec::<HelloReply, Hello>::with_max_frame(MAX_FRAME));
    let reply = tokio::time::timeout(HANDSHAKE_TIMEOUT, hello_reader.next())
        .await
        .map_err(|_| {
            anyhow::anyhow!("supervisor did not answer Hello within {HANDSHAKE_TIMEOUT:?}")
        })?;
    let spec = match reply {
        Some(Ok(HelloReply::Welcome { spec, protocol, .. })) => {
            tracing::debug!(protocol, "Handshake done.");
            *spec
        }
        Some(Ok(HelloReply::Rejected { reason, supported })) => {
            anyhow::bail!(
                "supervisor rejected this worker: {reason} (supports {}..={})",
                supported.min,
                supported.max
            )
        }
        Some(Ok(HelloReply::Unknown)) => {
            anyhow::bail!("supervisor sent an unknown handshake reply")
        }
        Some(Err(e)) => anyhow::bail!("bad handshake reply: {e}"),
        None => anyhow::bail!("supervisor closed the link during the handshake"),
    };
    // Switch codecs in place: frames the supervisor sent right after Welcome may already sit
    // in the read buffer.
    let reader = hello_reader
        .map_decoder(|_| Codec::<ControlToWorker, WorkerToControl>::with_max_frame(MAX_FRAME));
    let writer = hello_writer
        .map_encoder(|_| Codec::<ControlToWorker, WorkerToControl>::with_max_frame(MAX_FRAME));
    Ok((spec, reader, writer))
}

/// What the main loop reads from the supervisor.
pub type Frames =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<ControlToWorker, ipc::Error>> + Send>>;

/// The link's frames as they arrive.
pub fn frames(reader: LinkReader) -> Frames {
    Box::pin(reader)
}
