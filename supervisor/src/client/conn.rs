//! A minimal Gateway protocol v4 client over the unix socket (newline-delimited JSON).

use std::path::{Path, PathBuf};

use futures_util::{SinkExt, StreamExt};
use ipc::gateway::{
    parse_server_frame, ClientInfo, ConnectParams, ErrorShape, Method, RequestFrame, ServerFrame,
    GATEWAY_PROTOCOL, MAX_PAYLOAD_BYTES,
};
use serde_json::Value;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot connect to {path}: {source} (is `loopgate serve` running with this --state-dir?)"
    )]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("connection to the gateway failed: {0}")]
    Io(String),
    #[error("the gateway closed the connection")]
    Closed,
    #[error("unexpected reply from the gateway: {0}")]
    Protocol(String),
    #[error("{}", .0.message)]
    Server(ErrorShape),
    /// The gateway answered `method` with a result this client cannot read.
    #[error("unexpected {method} reply: {why}")]
    Reply {
        method: &'static str,
        why: serde_json::Error,
    },
    #[error("cannot encode the request: {0}")]
    Encode(serde_json::Error),
}

pub struct Client {
    reader: FramedRead<OwnedReadHalf, LinesCodec>,
    writer: FramedWrite<OwnedWriteHalf, LinesCodec>,
    next_id: u64,
}

impl Client {
    /// Connects and completes the `connect` handshake.
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.to_owned(),
                source,
            })?;
        let (rd, wr) = stream.into_split();
        let mut c = Client {
            reader: FramedRead::new(rd, LinesCodec::new_with_max_length(MAX_PAYLOAD_BYTES)),
            writer: FramedWrite::new(wr, LinesCodec::new()),
            next_id: 0,
        };
        match c.next_frame().await? {
            ServerFrame::Event(e) if e.event == ipc::gateway::events::CONNECT_CHALLENGE => {}
            other => {
                return Err(ClientError::Protocol(format!(
                    "expected connect.challenge, got {other:?}"
                )))
            }
        }
        let params = ConnectParams {
            min_protocol: GATEWAY_PROTOCOL,
            max_protocol: GATEWAY_PROTOCOL,
            client: ClientInfo {
                display_name: Some("loopgate".into()),
                ..ClientInfo::new(
                    "cli",
                    env!("CARGO_PKG_VERSION"),
                    std::env::consts::OS,
                    "cli",
                )
            },
            caps: vec![],
            role: Some("operator".into()),
            scopes: Some(vec!["operator.admin".into()]),
            auth: None,
            device: None,
        };
        let hello = c
            .call(
                Method::Connect,
                serde_json::to_value(&params).unwrap_or_default(),
            )
            .await?;
        if hello.get("type").and_then(Value::as_str) != Some("hello-ok") {
            return Err(ClientError::Protocol(format!(
                "expected hello-ok, got {hello}"
            )));
        }
        Ok(c)
    }

    /// Sends a request; returns its id.
    pub async fn send(&mut self, method: Method, params: Value) -> Result<String, ClientError> {
        self.next_id += 1;
        let id = self.next_id.to_string();
        let frame = RequestFrame::new(id.clone(), method, params);
        let text =
            serde_json::to_string(&frame).map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.writer
            .send(text)
            .await
            .map_err(|e| ClientError::Io(e.to_string()))?;
        Ok(id)
    }

    pub async fn next_frame(&mut self) -> Result<ServerFrame, ClientError> {
        match self.reader.next().await {
            None => Err(ClientError::Closed),
            Some(Err(e)) => Err(ClientError::Io(e.to_string())),
            Some(Ok(line)) => {
                parse_server_frame(&line).map_err(|e| ClientError::Protocol(e.to_string()))
            }
        }
    }

    /// Sends a request and waits for its (first) response, skipping events.
    /// Calls `method` with typed params and reads the typed result.
    pub async fn ask<P: serde::Serialize, R: serde::de::DeserializeOwned>(
        &mut self,
        method: Method,
        params: &P,
    ) -> Result<R, ClientError> {
        let params =
            serde_json::to_value(params).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let v = self.call(method, params).await?;
        serde_json::from_value(v)
            .map_err(|e| ClientError::Protocol(format!("{} answer: {e}", method.as_str())))
    }

    pub async fn call(&mut self, method: Method, params: Value) -> Result<Value, ClientError> {
        let id = self.send(method, params).await?;
        loop {
            if let ServerFrame::Res(res) = self.next_frame().await? {
                if res.id != id {
                    continue;
                }
                if res.ok {
                    return Ok(res.payload.unwrap_or(Value::Null));
                }
                return Err(ClientError::Server(res.error.unwrap_or_else(|| {
                    ErrorShape::invalid("request failed without an error")
                })));
            }
        }
    }
}
