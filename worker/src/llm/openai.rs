//! OpenAI Chat Completions (`api = "openai-completions"`), streamed over SSE.
//!
//! `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage: true`; chunks carry `choices[0].delta.content`, the last
//! choice a `finish_reason`, a final chunk the `usage`, then `data: [DONE]`. A stream that ends
//! without `[DONE]` or a finish reason is an error (the provider dropped the connection).

use std::time::Duration;

use super::limits::{capped, Limits};
use futures_util::StreamExt;
use ipc::control::{ModelSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{LlmError, LlmEvent, ModelRequest};
use crate::tools::ToolCall;

/// `POST /chat/completions` body.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Msg<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'a str,
    content: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FnCall<'a>,
}

#[derive(Serialize)]
struct FnCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct ToolOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFn<'a>,
}

#[derive(Serialize)]
struct ToolFn<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Most bytes of an error body kept for the error message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A client for one provider; holds the connection pool.
#[derive(Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    spec: ModelSpec,
    api_key: Option<String>,
}

impl OpenAiClient {
    pub fn new(spec: ModelSpec, api_key: Option<String>) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(spec.request_timeout_ms))
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .user_agent(concat!("loopgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            spec,
            api_key,
        })
    }

    pub fn provider(&self) -> &str {
        &self.spec.provider
    }

    pub fn model(&self) -> &str {
        &self.spec.model
    }

    /// The request body, serialized straight from the request (no intermediate JSON tree:
    /// a turn's history can be hundreds of messages).
    fn body<'a>(&'a self, req: &'a ModelRequest) -> Body<'a> {
        Body {
            model: req.choice.as_ref().map_or(&self.spec.model, |c| &c.model),
            messages: req
                .messages
                .iter()
                .map(|m| Msg {
                    role: m.role,
                    content: &m.content,
                    tool_calls: m
                        .tool_calls
                        .iter()
                        .map(|c| CallOut {
                            id: &c.id,
                            kind: "function",
                            function: FnCall {
                                name: &c.name,
                                arguments: &c.arguments,
                            },
                        })
                        .collect(),
                    tool_call_id: m.tool_call_id.as_deref(),
                })
                .collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            temperature: self.spec.temperature,
            tools: req
                .tools
                .iter()
                .map(|t| ToolOut {
                    kind: "function",
                    function: ToolFn {
                        name: t.name,
                        description: t.description,
                        parameters: &t.parameters,
                    },
                })
                .collect(),
        }
    }

    /// Streams one response into `tx`. Returns when the response is complete or failed; the
    /// caller aborts the task to cancel (dropping the connection).
    pub async fn stream(&self, req: &ModelRequest, tx: &mpsc::Sender<Result<LlmEvent, LlmError>>) {
        if let Err(e) = self.stream_inner(req, tx).await {
            let _ = tx.send(Err(e)).await;
        }
    }

    async fn stream_inner(
        &self,
        req: &ModelRequest,
        tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    ) -> Result<(), LlmError> {
        let url = format!("{}/chat/completions", self.spec.base_url);
        let mut builder = self.http.post(&url).json(&self.body(req));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let timeout_ms = self.spec.request_timeout_ms;
        let resp =
            match tokio::time::timeout(Duration::from_millis(timeout_ms), builder.send()).await {
                Err(_) => return Err(LlmError::Timeout(timeout_ms)),
                Ok(Err(e)) => return Err(LlmError::Transport(describe(&e))),
                Ok(Ok(r)) => r,
            };
        let status = resp.status();
        if !status.is_success() {
            let retry_after_ms = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(|s| s * 1000);
            let message = error_message(resp).await;
            if status.as_u16() == 429 {
                return Err(LlmError::RateLimited {
                    retry_after_ms,
                    message,
                });
            }
            return Err(LlmError::Http {
                status: status.as_u16(),
                message,
            });
        }
        pump(resp.bytes_stream(), tx).await
    }
}

/// Reads a Chat Completions SSE body (`bytes`, as it arrives) and sends what it says to `tx`:
/// text deltas, usage, assembled tool calls, then `Done`. Any byte sequence is handled: what
/// is not the protocol is an [`LlmError`], never a panic.
pub async fn pump<S, B, E>(
    bytes: S,
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
) -> Result<(), LlmError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    pump_within(bytes, tx, Limits::DEFAULT).await
}

/// [`pump`] within `limits` (a response past one is an error; nothing past it is buffered).
pub async fn pump_within<S, B, E>(
    bytes: S,
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    limits: Limits,
) -> Result<(), LlmError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut events = super::sse::events(capped(bytes, limits.body_bytes), limits.line_bytes);
    let mut finished: Option<String> = None;
    // Tool calls arrive in pieces, keyed by index: (id, name, arguments).
    let mut calls: Vec<(String, String, String)> = Vec::new();
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(|e| LlmError::Transport(format!("stream broke: {e}")))?;
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            complete(tx, calls, finished).await;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Protocol(format!("chunk is not JSON: {e}")))?;
        if let Some(err) = chunk.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(LlmError::Protocol(format!(
                "provider reported an error mid-stream: {msg}"
            )));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            if tx.send(Ok(LlmEvent::Usage(parse_usage(u)))).await.is_err() {
                return Ok(());
            }
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            continue;
        };
        if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) {
            if !text.is_empty() && tx.send(Ok(LlmEvent::Delta(text.to_owned()))).await.is_err() {
                return Ok(());
            }
        }
        if let Some(deltas) = choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
        {
            for d in deltas {
                let index = d
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(calls.len() as u64) as usize;
                if index > 128 {
                    return Err(LlmError::Protocol(format!(
                        "tool call index {index} out of range"
                    )));
                }
                while calls.len() <= index {
                    calls.push((String::new(), String::new(), String::new()));
                }
                let slot = &mut calls[index];
                if let Some(id) = d.get("id").and_then(Value::as_str) {
                    slot.0 = id.to_owned();
                }
                if let Some(name) = d.pointer("/function/name").and_then(Value::as_str) {
                    slot.1.push_str(name);
                }
                if let Some(args) = d.pointer("/function/arguments").and_then(Value::as_str) {
                    if slot.2.len() + args.len() > limits.tool_args_bytes {
                        return Err(LlmError::Protocol(format!(
                            "tool call {index} has arguments longer than {} bytes",
                            limits.tool_args_bytes
                        )));
                    }
                    slot.2.push_str(args);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            // The usage chunk follows the finish chunk; `Done` waits for `[DONE]`.
            finished = Some(reason.to_owned());
        }
    }
    if finished.is_some() {
        // Some servers close without `[DONE]` after the finish chunk; that is complete.
        complete(tx, calls, finished).await;
        return Ok(());
    }
    Err(LlmError::Transport(
        "the provider closed the stream before the response was complete".into(),
    ))
}

/// The response is complete: its tool calls (unnamed ones dropped, missing ids filled in),
/// then `Done`.
async fn complete(
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    calls: Vec<(String, String, String)>,
    finish_reason: Option<String>,
) {
    let calls: Vec<ToolCall> = calls
        .into_iter()
        .enumerate()
        .filter(|(_, (_, name, _))| !name.is_empty())
        .map(|(i, (id, name, arguments))| ToolCall {
            id: if id.is_empty() {
                format!("call_{i}")
            } else {
                id
            },
            name,
            arguments,
        })
        .collect();
    if !calls.is_empty() {
        let _ = tx.send(Ok(LlmEvent::ToolCalls(calls))).await;
    }
    let _ = tx.send(Ok(LlmEvent::Done { finish_reason })).await;
}

fn describe(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

async fn error_message(mut resp: reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| v.get("error").and_then(Value::as_str).map(str::to_owned))
        })
        .unwrap_or_else(|| {
            let t = text.trim();
            if t.is_empty() {
                "(empty body)".into()
            } else {
                t.chars().take(300).collect()
            }
        })
}

fn parse_usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = n("prompt_tokens");
    let output = n("completion_tokens");
    let total = u
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(input + output);
    let cache_read = u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Usage {
        input,
        output,
        cache_read,
        cache_write: 0,
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        line_bytes: 4096,
        body_bytes: 1 << 20,
        tool_args_bytes: 2048,
    };

    async fn pump_all(chunks: Vec<Vec<u8>>) -> (Result<(), LlmError>, Vec<LlmEvent>) {
        let (tx, mut rx) = mpsc::channel(1024);
        let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, String>));
        let r = pump_within(stream, &tx, SMALL).await;
        drop(tx);
        let mut events = Vec::new();
        while let Some(ev) = rx.recv().await {
            events.extend(ev.ok());
        }
        (r, events)
    }

    /// A provider that never sends a line break is cut off at the line cap instead of
    /// growing the parser's buffer without limit.
    #[tokio::test]
    async fn a_stream_without_line_breaks_is_refused_at_the_cap() {
        let chunks = vec![vec![b'x'; 1000]; 5];
        let (r, _) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("line longer than"), "{err}");
    }

    /// Tool call arguments streamed without end are refused at their cap.
    #[tokio::test]
    async fn endless_tool_call_arguments_are_refused() {
        let piece = "a".repeat(1000);
        let mut chunks = vec![
            br#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"read","arguments":""}}]}}]}"#
                .to_vec(),
            b"\n\n".to_vec(),
        ];
        for _ in 0..3 {
            let ev = serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments": piece}}]}}]});
            chunks.push(format!("data: {ev}\n\n").into_bytes());
        }
        let (r, events) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("arguments longer than"), "{err}");
        assert!(
            !events.iter().any(|e| matches!(e, LlmEvent::ToolCalls(_))),
            "the cut call never executes"
        );
    }

    /// A well-formed response of many short lines stops at the body cap.
    #[tokio::test]
    async fn an_endless_response_is_refused_at_the_body_cap() {
        let ev = serde_json::json!({"choices":[{"delta":{"content": "x".repeat(1000)}}]});
        let chunks = vec![format!("data: {ev}\n\n").into_bytes(); 2000];
        let (r, events) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
        assert!(events.len() < 1100, "{}", events.len());
    }
}
