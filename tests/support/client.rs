//! A Gateway protocol v4 test client over the unix socket: raw frames in and out, with helpers
//! that wait for a given response or event.

use std::collections::VecDeque;
use std::path::Path;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use crate::WAIT;

pub struct Client {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// Frames read but not yet consumed, in arrival order.
    pub backlog: VecDeque<Value>,
    /// Every frame received, in order.
    pub seen: Vec<Value>,
    next: u64,
}

impl Client {
    /// Connects and completes the handshake.
    pub async fn connect(path: &Path) -> Client {
        let mut c = Self::raw(path).await;
        let challenge = c.read().await.expect("challenge");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let hello = c.call("connect", connect_params()).await;
        assert_eq!(hello["ok"], true, "{hello}");
        assert_eq!(hello["payload"]["type"], "hello-ok");
        c
    }

    /// Connects without any handshake.
    pub async fn raw(path: &Path) -> Client {
        let stream = UnixStream::connect(path)
            .await
            .expect("connect to gateway.sock");
        let (rd, wr) = stream.into_split();
        Client {
            reader: BufReader::new(rd),
            writer: wr,
            backlog: VecDeque::new(),
            seen: Vec::new(),
            next: 0,
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        self.try_send_line(line).await.expect("write");
    }

    /// Like `send_line`, but a peer that closes mid-write is not a test failure.
    pub async fn try_send_line(&mut self, line: &str) -> std::io::Result<()> {
        self.writer.write_all(line.as_bytes()).await?;
        self.writer.write_all(b"\n").await
    }

    /// Sends a request and returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> String {
        self.next += 1;
        let id = format!("t{}", self.next);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.send_line(&frame.to_string()).await;
        id
    }

    /// Reads the next frame from the socket; `None` at EOF.
    pub async fn read(&mut self) -> Option<Value> {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, self.reader.read_line(&mut line))
            .await
            .expect("a frame within the wait bound")
            .ok()?;
        if n == 0 {
            return None;
        }
        let v: Value = serde_json::from_str(&line).expect("server frames are JSON");
        self.seen.push(v.clone());
        Some(v)
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
        let run_id = run_id.to_owned();
        self.wait_for(move |f| {
            f["type"] == "event"
                && f["event"] == "agent"
                && f["payload"]["runId"] == run_id.as_str()
                && pred(&f["payload"])
        })
        .await
    }

    /// Runs an `agent` request to its final response; returns (accepted, final).
    pub async fn turn(&mut self, params: Value) -> (Value, Value) {
        let id = self.send("agent", params).await;
        let accepted = self.res(&id).await;
        assert_eq!(accepted["ok"], true, "{accepted}");
        assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
        let fin = self.res(&id).await;
        (accepted, fin)
    }
}

pub fn connect_params() -> Value {
    json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "test", "version": "1", "platform": "linux", "mode": "test"},
        "role": "operator", "scopes": ["operator.admin"], "caps": []
    })
}
