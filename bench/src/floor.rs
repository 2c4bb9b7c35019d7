//! Physical floors on this machine, to compare loopgate's numbers with: a bare WebSocket echo
//! round trip over loopback, a bare SQLite WAL commit (synchronous=NORMAL, as loopgate uses),
//! and a bare unix-socket MessagePack round trip.

use std::time::Instant;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use crate::stats::summarize;

pub async fn run(iterations: usize) -> anyhow::Result<Value> {
    Ok(json!({
        "scenario": "floor",
        "iterations": iterations,
        "websocket_echo_round_trip": summarize(&ws_echo(iterations).await?),
        "sqlite_wal_commit": summarize(&sqlite_commit(iterations)?),
        "unix_msgpack_round_trip": summarize(&unix_msgpack(iterations).await?),
    }))
}

async fn ws_echo(n: usize) -> anyhow::Result<Vec<f64>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Ok((s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            if let Ok(mut ws) = tokio_tungstenite::accept_async(s).await {
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_text() && ws.send(m).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await?;
    let frame = serde_json::to_string(&ipc::gateway::RequestFrame::new(
        "1",
        ipc::gateway::Method::Health,
        json!({}),
    ))?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        ws.send(Message::text(frame.clone())).await?;
        let _ = ws.next().await;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}

fn sqlite_commit(n: usize) -> anyhow::Result<Vec<f64>> {
    let dir = tempfile::tempdir()?;
    let conn = rusqlite::Connection::open(dir.path().join("floor.sqlite"))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        conn.execute(
            "INSERT INTO t(v) VALUES (?1)",
            [format!("row {i} with some transcript-sized text")],
        )?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Ping {
    run_id: String,
    seq: u64,
    delta: String,
}

async fn unix_msgpack(n: usize) -> anyhow::Result<Vec<f64>> {
    let (mut a, mut b) = tokio::net::UnixStream::pair()?;
    tokio::spawn(async move {
        let mut len = [0u8; 4];
        let mut buf = Vec::new();
        loop {
            if b.read_exact(&mut len).await.is_err() {
                break;
            }
            buf.resize(u32::from_be_bytes(len) as usize, 0);
            if b.read_exact(&mut buf).await.is_err() {
                break;
            }
            let Ok(p) = rmp_serde::from_slice::<Ping>(&buf) else {
                break;
            };
            let Ok(reply) = rmp_serde::to_vec_named(&p) else {
                break;
            };
            if b.write_all(&(reply.len() as u32).to_be_bytes())
                .await
                .is_err()
                || b.write_all(&reply).await.is_err()
            {
                break;
            }
        }
    });
    let mut out = Vec::with_capacity(n);
    let mut len = [0u8; 4];
    let mut buf = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let body = rmp_serde::to_vec_named(&Ping {
            run_id: "run".into(),
            seq: i as u64,
            delta: "hello".into(),
        })?;
        a.write_all(&(body.len() as u32).to_be_bytes()).await?;
        a.write_all(&body).await?;
        a.read_exact(&mut len).await?;
        buf.resize(u32::from_be_bytes(len) as usize, 0);
        a.read_exact(&mut buf).await?;
        let _: Ping = rmp_serde::from_slice(&buf)?;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(out)
}
