//! A minimal Gateway protocol v4 client over WebSocket with token auth, as any client would
//! connect (`cli`/`cli` identity, so a loopback connection keeps its scopes).

use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use ipc::gateway::{AgentParams, ClientInfo, ConnectAuth, ConnectParams, Method, RequestFrame};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

enum Conn {
    Ws(Box<Ws>),
    /// The gateway's local socket: one JSON frame per line.
    Unix(BufReader<UnixStream>),
}

pub struct Client {
    conn: Conn,
    next: u64,
}

/// One frame as received.
pub struct Frame {
    pub value: Value,
}

impl Client {
    /// Connects to `url`: `ws://...`, or `unix:<path>` for a gateway's local socket (a
    /// local client: no token needed).
    pub async fn connect(url: &str, token: Option<&str>) -> anyhow::Result<Client> {
        let conn = match url.strip_prefix("unix:") {
            Some(path) => Conn::Unix(BufReader::new(
                UnixStream::connect(path)
                    .await
                    .with_context(|| format!("connect {path}"))?,
            )),
            None => {
                let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
                    .await
                    .with_context(|| format!("connect {url}"))?;
                Conn::Ws(Box::new(ws))
            }
        };
        let mut c = Client { conn, next: 0 };
        let challenge = c.read().await?;
        if challenge.value["event"] != "connect.challenge" {
            bail!("expected connect.challenge, got {}", challenge.value);
        }
        let params = ConnectParams {
            min_protocol: ipc::gateway::GATEWAY_PROTOCOL,
            max_protocol: ipc::gateway::GATEWAY_PROTOCOL,
            client: ClientInfo::new("cli", "loopgate-bench", "linux", "cli"),
            caps: Vec::new(),
            role: Some("operator".into()),
            scopes: Some(
                ["operator.admin", "operator.read", "operator.write"]
                    .map(String::from)
                    .to_vec(),
            ),
            auth: token.map(|t| ConnectAuth {
                token: Some(t.to_owned()),
                ..Default::default()
            }),
            device: None,
        };
        let id = c.send(Method::Connect, &params).await?;
        let hello = c.response(&id).await?;
        if hello["ok"] != true {
            bail!("connect refused: {}", hello["error"]);
        }
        Ok(c)
    }

    pub async fn send(
        &mut self,
        method: Method,
        params: &impl serde::Serialize,
    ) -> anyhow::Result<String> {
        self.next += 1;
        let id = format!("b{}", self.next);
        let frame = RequestFrame::new(id.clone(), method, serde_json::to_value(params)?);
        let text = serde_json::to_string(&frame)?;
        match &mut self.conn {
            Conn::Ws(ws) => ws.send(Message::text(text)).await?,
            Conn::Unix(s) => {
                s.get_mut()
                    .write_all(format!("{text}\n").as_bytes())
                    .await?;
            }
        }
        Ok(id)
    }

    pub async fn read(&mut self) -> anyhow::Result<Frame> {
        let ws = match &mut self.conn {
            Conn::Ws(ws) => ws,
            Conn::Unix(s) => {
                let mut line = String::new();
                if s.read_line(&mut line).await? == 0 {
                    bail!("connection ended");
                }
                return Ok(Frame {
                    value: serde_json::from_str(&line)?,
                });
            }
        };
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    return Ok(Frame {
                        value: serde_json::from_str(t.as_str())?,
                    });
                }
                Some(Ok(Message::Close(f))) => bail!("closed by the gateway: {f:?}"),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => bail!("connection ended"),
            }
        }
    }

    /// The next response to `id` (events are skipped).
    pub async fn response(&mut self, id: &str) -> anyhow::Result<Value> {
        loop {
            let f = self.read().await?;
            if f.value["type"] == "res" && f.value["id"] == id {
                return Ok(f.value);
            }
        }
    }

    pub async fn call(
        &mut self,
        method: Method,
        params: &impl serde::Serialize,
    ) -> anyhow::Result<Value> {
        let id = self.send(method, params).await?;
        let r = self.response(&id).await?;
        if r["ok"] != true {
            return Err(anyhow!("{} failed: {}", method.as_str(), r["error"]));
        }
        Ok(r["payload"].clone())
    }

    /// Runs one `agent` turn to its final response; calls `on_event` for every event frame.
    pub async fn turn(
        &mut self,
        params: AgentParams,
        mut on_event: impl FnMut(&Frame),
    ) -> anyhow::Result<Value> {
        let id = self.send(Method::Agent, &params).await?;
        let mut accepted = false;
        loop {
            let f = self.read().await?;
            if f.value["type"] == "event" {
                on_event(&f);
                continue;
            }
            if f.value["type"] != "res" || f.value["id"] != id.as_str() {
                continue;
            }
            if f.value["ok"] != true {
                bail!("agent refused: {}", f.value["error"]);
            }
            let status = f.value["payload"]["status"].as_str().unwrap_or("");
            if status == "accepted" && !accepted {
                accepted = true;
                continue;
            }
            return Ok(f.value["payload"].clone());
        }
    }
}
