//! A Gateway protocol v4 test client over the unix socket (NDJSON) or a real WebSocket: raw
//! frames in and out, with helpers that wait for a given response or event.

use std::collections::VecDeque;
use std::path::Path;

use ed25519_dalek::{Signer, SigningKey};
use futures_util::{SinkExt, StreamExt};
use ipc::gateway::{ClientInfo, ConnectAuth, ConnectParams, DeviceProof, RequestFrame};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_tungstenite::tungstenite::Message;

use crate::{typed, WAIT};

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

enum Conn {
    Unix {
        reader: BufReader<OwnedReadHalf>,
        writer: OwnedWriteHalf,
    },
    Ws(Box<WsStream>),
}

pub struct Client {
    conn: Conn,
    /// Frames read but not yet consumed, in arrival order.
    pub backlog: VecDeque<Value>,
    /// Every frame received, in order.
    pub seen: Vec<Value>,
    /// The close frame (code, reason) a WebSocket peer sent, if any.
    pub close: Option<(u16, String)>,
    next: u64,
}

impl Client {
    /// Connects over the unix socket and completes the handshake.
    pub async fn connect(path: &Path) -> Client {
        let mut c = Self::raw(path).await;
        let challenge = c.read().await.expect("challenge");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let hello = c.call("connect", connect_params()).await;
        assert_eq!(hello["ok"], true, "{hello}");
        assert_eq!(typed::hello(&hello).kind, "hello-ok");
        c
    }

    /// Connects over the unix socket with `params` as the `connect` request.
    pub async fn connect_with(path: &Path, params: Value) -> Client {
        let mut c = Self::raw(path).await;
        let challenge = c.read().await.expect("challenge");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let hello = c.call("connect", params).await;
        assert_eq!(hello["ok"], true, "{hello}");
        typed::hello(&hello);
        c
    }

    /// Connects over the unix socket without any handshake.
    pub async fn raw(path: &Path) -> Client {
        let stream = UnixStream::connect(path)
            .await
            .expect("connect to gateway.sock");
        let (rd, wr) = stream.into_split();
        Self::new(Conn::Unix {
            reader: BufReader::new(rd),
            writer: wr,
        })
    }

    /// Opens a WebSocket to `ws://<addr>/` without any handshake.
    pub async fn ws_raw(addr: &str) -> Client {
        let (ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/"))
            .await
            .expect("websocket connect");
        Self::new(Conn::Ws(Box::new(ws)))
    }

    /// Opens a WebSocket to `ws://<addr><path>` as a browser page of `origin` would, without
    /// any handshake; `Err` carries the refused upgrade.
    pub async fn ws_raw_from(
        addr: &str,
        path: &str,
        origin: &str,
    ) -> Result<Client, tokio_tungstenite::tungstenite::Error> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = format!("ws://{addr}{path}").into_client_request()?;
        if let Ok(v) = origin.parse() {
            req.headers_mut().insert("origin", v);
        }
        let (ws, _) = tokio_tungstenite::connect_async(req).await?;
        Ok(Self::new(Conn::Ws(Box::new(ws))))
    }

    /// Opens a WebSocket, reads the challenge and sends `connect` with `params` (the device
    /// proof, if wanted, is built by `sign` from the challenge nonce). Returns the client and
    /// the connect response (or `None` if the server closed without one).
    pub async fn ws_connect(
        addr: &str,
        params: Value,
        sign: Option<&SigningKey>,
    ) -> (Client, Option<Value>) {
        let c = Self::ws_raw(addr).await;
        Self::ws_handshake(c, params, sign).await
    }

    /// The challenge/`connect` exchange of [`Client::ws_connect`] on an open WebSocket.
    pub async fn ws_handshake(
        mut c: Client,
        params: Value,
        sign: Option<&SigningKey>,
    ) -> (Client, Option<Value>) {
        let challenge = c.read().await.expect("challenge");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let mut params = params;
        if let Some(key) = sign {
            let nonce = challenge["payload"]["nonce"].as_str().unwrap().to_owned();
            let ts = challenge["payload"]["ts"].as_i64().unwrap();
            params["device"] = device_proof(&params, key, &nonce, ts);
        }
        let id = c.send("connect", params).await;
        let res = loop {
            match c.read().await {
                None => break None,
                Some(f) if f["type"] == "res" && f["id"] == id.as_str() => break Some(f),
                Some(f) => c.backlog.push_back(f),
            }
        };
        (c, res)
    }

    fn new(conn: Conn) -> Client {
        Client {
            conn,
            backlog: VecDeque::new(),
            seen: Vec::new(),
            close: None,
            next: 0,
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        self.try_send_line(line).await.expect("write");
    }

    /// Like `send_line`, but a peer that closes mid-write is not a test failure.
    pub async fn try_send_line(&mut self, line: &str) -> std::io::Result<()> {
        match &mut self.conn {
            Conn::Unix { writer, .. } => {
                writer.write_all(line.as_bytes()).await?;
                writer.write_all(b"\n").await
            }
            Conn::Ws(ws) => ws
                .send(Message::text(line.to_owned()))
                .await
                .map_err(std::io::Error::other),
        }
    }

    /// Sends a request and returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> String {
        self.next += 1;
        let id = format!("t{}", self.next);
        let frame = RequestFrame {
            kind: "req".into(),
            id: id.clone(),
            method: method.to_owned(),
            params: Some(serde_json::value::to_raw_value(&params).expect("params serialize")),
            traceparent: None,
            expected_profile_id: None,
        };
        let line = serde_json::to_string(&frame).expect("a request frame serializes");
        self.send_line(&line).await;
        id
    }

    /// Reads the next frame; `None` at EOF or close (the close frame is kept in `close`).
    pub async fn read(&mut self) -> Option<Value> {
        let text = match &mut self.conn {
            Conn::Unix { reader, .. } => {
                let mut line = String::new();
                let n = tokio::time::timeout(WAIT, reader.read_line(&mut line))
                    .await
                    .expect("a frame within the wait bound")
                    .ok()?;
                if n == 0 {
                    return None;
                }
                line
            }
            Conn::Ws(ws) => loop {
                let msg = tokio::time::timeout(WAIT, ws.next())
                    .await
                    .expect("a frame within the wait bound");
                match msg {
                    Some(Ok(Message::Text(t))) => break t.as_str().to_owned(),
                    Some(Ok(Message::Close(frame))) => {
                        self.close =
                            frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned()));
                        return None;
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => return None,
                }
            },
        };
        let v = typed::check_frame(&text);
        self.seen.push(v.clone());
        Some(v)
    }

    /// Reads until the connection ends.
    pub async fn read_to_end(&mut self) {
        while self.read().await.is_some() {}
    }

    /// Waits for a frame matching `pred`, keeping others in the backlog.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(pos).expect("present");
        }
        loop {
            let f = self.read().await.expect("connection open");
            if pred(&f) {
                return f;
            }
            self.backlog.push_back(f);
        }
    }

    /// Waits for a response to `id`.
    pub async fn res(&mut self, id: &str) -> Value {
        let id = id.to_owned();
        self.wait_for(move |f| f["type"] == "res" && f["id"] == id.as_str())
            .await
    }

    /// Sends a request and waits for its first response.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.res(&id).await
    }

    /// Waits for an `agent` event of `run_id` matching `pred`.
    pub async fn agent_event(&mut self, run_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.event("agent", run_id, pred).await
    }

    /// Waits for a `chat` event of `run_id` matching `pred`.
    pub async fn chat_event(&mut self, run_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.event("chat", run_id, pred).await
    }

    async fn event(&mut self, name: &str, run_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let (name, run_id) = (name.to_owned(), run_id.to_owned());
        self.wait_for(move |f| {
            f["type"] == "event"
                && f["event"] == name.as_str()
                && f["payload"]["runId"] == run_id.as_str()
                && pred(&f["payload"])
        })
        .await
    }

    /// The `assistant` stream text of `run_id` seen so far, concatenated.
    pub fn assistant_text(&self, run_id: &str) -> String {
        self.seen
            .iter()
            .filter(|f| {
                f["event"] == "agent"
                    && f["payload"]["runId"] == run_id
                    && f["payload"]["stream"] == "assistant"
            })
            .filter_map(|f| f["payload"]["data"]["delta"].as_str())
            .collect()
    }

    /// Runs an `agent` request to its final response; returns (accepted, final).
    pub async fn turn(&mut self, params: Value) -> (Value, Value) {
        let id = self.send("agent", params).await;
        let accepted = self.res(&id).await;
        assert_eq!(accepted["ok"], true, "{accepted}");
        assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
        let fin = self.res(&id).await;
        typed::agent_result(&fin);
        (accepted, fin)
    }

    /// Starts an `agent` request and waits until its run is accepted and has streamed
    /// assistant text; returns the request id (the final response is still to come).
    pub async fn start_streaming(&mut self, params: Value) -> String {
        let run_id = params["idempotencyKey"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let id = self.send("agent", params).await;
        let accepted = self.res(&id).await;
        assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
        self.agent_event(&run_id, |p| p["stream"] == "assistant")
            .await;
        id
    }
}

/// Admin `connect` params of a `test` client, as JSON so tests can alter them.
pub fn connect_params() -> Value {
    to_json(operator(
        ClientInfo::new("test", "1", "linux", "test"),
        None,
    ))
}

/// Connect params as OpenClaw's CLI sends them (`cli`/`cli`), with a token.
pub fn cli_params(token: Option<&str>) -> Value {
    let auth = token.map(|t| ConnectAuth {
        token: Some(t.to_owned()),
        ..ConnectAuth::default()
    });
    to_json(operator(
        ClientInfo::new("cli", "2026.9.6", "linux", "cli"),
        auth,
    ))
}

fn operator(client: ClientInfo, auth: Option<ConnectAuth>) -> ConnectParams {
    ConnectParams {
        min_protocol: 4,
        max_protocol: 4,
        client,
        caps: Vec::new(),
        role: Some("operator".into()),
        scopes: Some(vec!["operator.admin".into()]),
        auth,
        device: None,
    }
}

fn to_json(params: ConnectParams) -> Value {
    serde_json::to_value(params).expect("connect params serialize")
}

/// A v3 device proof over `params` for the challenge `nonce`.
pub fn device_proof(params: &Value, key: &SigningKey, nonce: &str, signed_at: i64) -> Value {
    use base64::Engine;
    let raw = key.verifying_key().to_bytes();
    let id: String = Sha256::digest(raw)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let s = |p: &str| {
        params
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let scopes: Vec<String> = params["scopes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let payload = format!(
        "v3|{id}|{}|{}|{}|{}|{signed_at}|{}|{nonce}|{}|{}",
        s("/client/id"),
        s("/client/mode"),
        params["role"].as_str().unwrap_or("operator"),
        scopes.join(","),
        ["/auth/token", "/auth/deviceToken", "/auth/bootstrapToken"]
            .iter()
            .map(|p| s(p))
            .find(|t| !t.is_empty())
            .unwrap_or_default(),
        s("/client/platform").to_lowercase(),
        s("/client/deviceFamily").to_lowercase()
    );
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let proof = DeviceProof {
        id,
        public_key: b64.encode(raw),
        signature: b64.encode(key.sign(payload.as_bytes()).to_bytes()),
        signed_at,
        nonce: nonce.to_owned(),
    };
    serde_json::to_value(proof).expect("a device proof serializes")
}
