//! A scripted step as the streamed body the model sends: its pieces (text, reasoning, tool
//! calls) at their pace, then what ends it (the finish, a stall, a hold until released, a
//! dropped connection), in any API's format through [`crate::wire::Encoder`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::wire::{Encoder, Out};
use super::{now_micros, now_secs, ScriptedCall, Shared, Step};

/// What happens after the first `stop_after` chunks.
pub(crate) enum Tail {
    Finish,
    Stall,
    Hold,
    Disconnect,
    DisconnectAfterRelease,
}

pub(crate) struct Reply {
    /// Replace each piece's text with its send time (`⟦µs⟧`).
    stamped: bool,
    pieces: Vec<String>,
    delay: Duration,
    stop_after: usize,
    tail: Tail,
    finish_reason: String,
    tool_calls: Vec<ScriptedCall>,
    reasoning: Vec<String>,
    keepalive: Duration,
    end_turn: Option<Value>,
    /// The output limit strikes inside the last tool call.
    cut: bool,
}

/// Splits `text` into `n` pieces on char boundaries (at least one piece).
pub fn split_chunks(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.clamp(1, chars.len().max(1));
    let per = chars.len().div_ceil(n).max(1);
    let mut out: Vec<String> = chars.chunks(per).map(|c| c.iter().collect()).collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

impl Reply {
    /// `pieces` at once, then `tail`; no reasoning, no tool call, finish `stop`.
    fn plain(pieces: Vec<String>, tail: Tail) -> Self {
        Reply {
            stamped: false,
            stop_after: pieces.len(),
            pieces,
            delay: Duration::ZERO,
            tail,
            finish_reason: "stop".into(),
            tool_calls: vec![],
            reasoning: vec![],
            keepalive: Duration::ZERO,
            end_turn: None,
            cut: false,
        }
    }

    fn cut(text: &str, chunks: usize, after_chunks: usize, tail: Tail) -> Self {
        Reply {
            stop_after: after_chunks,
            ..Reply::plain(split_chunks(text, chunks), tail)
        }
    }

    pub(crate) fn from_step(step: Step) -> Self {
        let make = |text: &str, chunks: usize| split_chunks(text, chunks);
        match step {
            Step::Text {
                text,
                chunks,
                delay_ms,
                finish_reason,
                reasoning,
                keepalive_ms,
                end_turn,
            } => {
                let pieces = if text.is_empty() {
                    vec![]
                } else {
                    make(&text, chunks)
                };
                Reply {
                    delay: Duration::from_millis(delay_ms),
                    finish_reason: finish_reason.unwrap_or_else(|| "stop".into()),
                    reasoning: if reasoning.is_empty() {
                        vec![]
                    } else {
                        make(&reasoning, chunks)
                    },
                    keepalive: Duration::from_millis(keepalive_ms),
                    end_turn,
                    ..Reply::plain(pieces, Tail::Finish)
                }
            }
            // A response cut short after `after_chunks`: it stalls, holds until released,
            // or drops the connection.
            Step::Stall {
                text,
                chunks,
                after_chunks,
            } => Reply::cut(&text, chunks, after_chunks, Tail::Stall),
            Step::Hold {
                text,
                chunks,
                after_chunks,
            } => Reply::cut(&text, chunks, after_chunks, Tail::Hold),
            Step::Disconnect {
                text,
                chunks,
                after_chunks,
                after_release,
            } => Reply::cut(
                &text,
                chunks,
                after_chunks,
                if after_release {
                    Tail::DisconnectAfterRelease
                } else {
                    Tail::Disconnect
                },
            ),
            Step::Stamped { chunks, delay_ms } => Reply {
                stamped: true,
                delay: Duration::from_millis(delay_ms),
                ..Reply::plain(vec![String::new(); chunks.max(1)], Tail::Finish)
            },
            Step::ToolCalls {
                text,
                calls,
                cut,
                delay_ms,
                reasoning,
            } => {
                let pieces = if text.is_empty() {
                    vec![]
                } else {
                    make(&text, 2)
                };
                Reply {
                    delay: Duration::from_millis(delay_ms),
                    finish_reason: if cut { "length" } else { "tool_calls" }.into(),
                    tool_calls: calls,
                    reasoning: if reasoning.is_empty() {
                        vec![]
                    } else {
                        make(&reasoning, 2)
                    },
                    cut,
                    ..Reply::plain(pieces, Tail::Finish)
                }
            }
            Step::HttpError { .. } | Step::Flood { .. } => Reply::plain(vec![], Tail::Disconnect),
        }
    }

    fn text(&self) -> String {
        self.pieces.concat()
    }

    fn message(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.text()});
        if !self.tool_calls.is_empty() {
            m["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
        }
        m
    }

    pub(crate) fn completion(&self, model: &str, prompt_tokens: u64) -> Value {
        let completion_tokens = self.pieces.len() as u64;
        json!({
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": now_secs(),
            "model": model,
            "choices": [{"index": 0, "message": self.message(),
                         "finish_reason": self.finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}
        })
    }

    /// What happens after the first `stop_after` pieces; `false` ends the response here.
    async fn tail(
        &self,
        shared: &Shared,
        tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    ) -> bool {
        match self.tail {
            Tail::Finish => true,
            Tail::Stall => {
                tx.closed().await;
                false
            }
            Tail::Hold => tokio::select! {
                permit = shared.gate.acquire() => match permit {
                    Ok(p) => {
                        p.forget();
                        true
                    }
                    Err(_) => false,
                },
                _ = tx.closed() => false,
            },
            Tail::Disconnect | Tail::DisconnectAfterRelease => {
                if matches!(self.tail, Tail::DisconnectAfterRelease) {
                    tokio::select! {
                        permit = shared.gate.acquire() => if let Ok(p) = permit { p.forget() },
                        _ = tx.closed() => return false,
                    }
                }
                let _ = tx
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "scripted disconnect",
                    )))
                    .await;
                false
            }
        }
    }

    pub(crate) async fn stream(
        self,
        shared: Arc<Shared>,
        tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
        mut enc: Encoder,
    ) {
        let send = |enc: &mut Encoder, out: Out| {
            let bytes = enc.encode(out);
            let tx = tx.clone();
            async move { bytes.is_empty() || tx.send(Ok(Bytes::from(bytes))).await.is_ok() }
        };
        if !send(&mut enc, Out::Start).await {
            return;
        }
        // Only keep-alives for a while: the connection is open, nothing advances.
        let quiet_until = tokio::time::Instant::now() + self.keepalive;
        while tokio::time::Instant::now() < quiet_until {
            tokio::time::sleep(KEEPALIVE_EVERY.min(self.keepalive)).await;
            if !send(&mut enc, Out::KeepAlive).await {
                return;
            }
        }
        for (i, piece) in self.reasoning.iter().enumerate() {
            if i > 0 && !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            if !send(&mut enc, Out::Reasoning(piece.clone())).await {
                return;
            }
        }
        let mut sent = self.reasoning.len();
        for (i, piece) in self.pieces.iter().enumerate() {
            if i == self.stop_after && !self.tail(&shared, &tx).await {
                return;
            }
            if (i > 0 || !self.reasoning.is_empty()) && !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            let content = if self.stamped {
                format!("⟦{}⟧", now_micros())
            } else {
                piece.clone()
            };
            if !send(&mut enc, Out::Text(content)).await {
                return;
            }
            sent += 1;
        }
        if self.stop_after >= self.pieces.len() && !self.tail(&shared, &tx).await {
            return;
        }
        let last = self.tool_calls.len().saturating_sub(1);
        for (index, call) in self.tool_calls.iter().enumerate() {
            let head = Out::CallStart {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            };
            if !send(&mut enc, head).await {
                return;
            }
            let mut pieces = split_chunks(&call.arguments, 3);
            if self.cut && index == last {
                // The output limit strikes halfway through this call's arguments.
                pieces.truncate((pieces.len() / 2).max(1));
            }
            for piece in pieces {
                if !self.delay.is_zero() {
                    tokio::time::sleep(self.delay).await;
                }
                if !send(&mut enc, Out::CallArgs { index, piece }).await {
                    return;
                }
            }
            sent += 1;
        }
        let finish = Out::Finish {
            reason: self.finish_reason.clone(),
            completion_tokens: sent as u64,
            end_turn: self.end_turn.clone(),
        };
        send(&mut enc, finish).await;
    }
}

/// How often a keep-alive-only stretch sends one.
const KEEPALIVE_EVERY: Duration = Duration::from_millis(50);
