//! A minimal Gateway protocol v4 client over WebSocket with token auth, as any client would
//! connect (`cli`/`cli` identity, so a loopback connection keeps its scopes).

use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct Client {
    ws: Ws,
    next: u64,
}

/// One frame as received.
pub struct Frame {
    pub value: Value,
}

impl Client {
    pub async fn connect(url: &str, token: Option<&str>) -> anyhow::Result<Client> {
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .with_context(|| format!("connect {url}"))?;
        let mut c = Client { ws, next: 0 };
        let challenge = c.read().await?;
        if challenge.value["event"] != "connect.challenge" {
            bail!("expected connect.challenge, got {}", challenge.value);
        }
        let mut params = json!({
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "version": "loopgate-bench", "platform": "linux", "mode": "cli"},
            "role": "operator", "scopes": ["operator.admin", "operator.read", "operator.write"], "caps": []
        });
        if let Some(t) = token {
            params["auth"] = json!({"token": t});
        }
        let id = c.send("connect", params).await?;
        let hello = c.response(&id).await?;
        if hello["ok"] != true {
            bail!("connect refused: {}", hello["error"]);
        }
        Ok(c)
    }

    pub async fn send(&mut self, method: &str, params: Value) -> anyhow::Result<String> {
        self.next += 1;
        let id = format!("b{}", self.next);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.ws.send(Message::text(frame.to_string())).await?;
        Ok(id)
    }

    pub async fn read(&mut self) -> anyhow::Result<Frame> {
        loop {
            match self.ws.next().await {
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

    pub async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.send(method, params).await?;
        let r = self.response(&id).await?;
        if r["ok"] != true {
            return Err(anyhow!("{method} failed: {}", r["error"]));
        }
        Ok(r["payload"].clone())
    }

    /// Runs one `agent` turn to its final response; calls `on_event` for every event frame.
    pub async fn turn(
        &mut self,
        params: Value,
        mut on_event: impl FnMut(&Frame),
    ) -> anyhow::Result<Value> {
        let id = self.send("agent", params).await?;
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
