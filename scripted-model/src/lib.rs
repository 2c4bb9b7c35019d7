//! A scripted model server that speaks four model APIs as the real providers stream them
//! ([`wire`]): OpenAI Chat Completions (`POST /v1/chat/completions`: `chat.completion.chunk`
//! SSE, a usage chunk when `stream_options.include_usage` is set, `data: [DONE]`; without
//! `stream`, one `chat.completion` object), OpenAI Responses (`POST /v1/responses`), Anthropic
//! Messages (`POST /v1/messages`) and Ollama (`POST /api/chat`, NDJSON).
//!
//! What it answers is scripted: [`Step`]s are queued (in-process through
//! [`ScriptedModel::push`], or over HTTP with `POST /_script`) and each request takes the next
//! one, whichever API it came in on; with the queue empty it answers the default reply (an
//! echo of the last user message, or a fixed text). Steps can stream slowly, reason first,
//! send only keep-alives for a while, stall, hold until released, fail with an HTTP error
//! (with `Retry-After`), stop at an output limit (inside a tool call, too) or drop the
//! connection mid-stream. Every request body is recorded for assertions (`GET /_requests`).
//!
//! Tests run it in-process on `127.0.0.1:0`; the quickstart and benchmarks run the
//! `loopgate-scripted-model` binary.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

mod reply;
pub mod wire;

pub use reply::split_chunks;
use reply::Reply;
use wire::{Api, Encoder};

/// Most recorded requests kept (oldest dropped first).
const MAX_RECORDED: usize = 1000;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// Stream `text` in `chunks` pieces with `delay_ms` between them.
    Text {
        text: String,
        #[serde(default = "default_chunks")]
        chunks: usize,
        #[serde(default)]
        delay_ms: u64,
        /// `finish_reason` of the last chunk (default `stop`; `length` is an output limit).
        #[serde(default)]
        finish_reason: Option<String>,
        /// Reasoning streamed before the text, in `chunks` pieces `delay_ms` apart.
        #[serde(default)]
        reasoning: String,
        /// Before anything else, only keep-alives for this long (every 50 ms).
        #[serde(default)]
        keepalive_ms: u64,
        /// Responses: the terminal's `end_turn`, sent as given (e.g. `false`, or `"yes"`).
        #[serde(default)]
        end_turn: Option<Value>,
    },
    /// Stream the first `after_chunks` of `chunks` pieces of `text`, then send nothing more
    /// (the connection stays open until the client gives up).
    Stall {
        text: String,
        #[serde(default = "default_chunks")]
        chunks: usize,
        after_chunks: usize,
    },
    /// Like `Stall`, but continue once [`ScriptedModel::release`] (or `POST /_release`) is
    /// called.
    Hold {
        text: String,
        #[serde(default = "default_chunks")]
        chunks: usize,
        after_chunks: usize,
    },
    /// Answer with an HTTP error status and the API's error body (`Retry-After` when set).
    HttpError {
        status: u16,
        message: String,
        #[serde(default)]
        retry_after_s: Option<u64>,
    },
    /// Optional `text`, then tool calls streamed the way the API does: the id and name first,
    /// the arguments in pieces, keyed by index; `finish_reason` is `tool_calls`. With `cut`,
    /// the output limit strikes halfway through the last call's arguments (`length`).
    /// `delay_ms` apart, the argument pieces arrive slowly (a long streamed call).
    ToolCalls {
        #[serde(default)]
        text: String,
        calls: Vec<ScriptedCall>,
        #[serde(default)]
        cut: bool,
        #[serde(default)]
        delay_ms: u64,
        /// Reasoning streamed first (Anthropic signs it).
        #[serde(default)]
        reasoning: String,
    },
    /// `chunks` chunks stamped with their send time (`⟦µs⟧`), `delay_ms` apart.
    Stamped {
        #[serde(default = "default_chunks")]
        chunks: usize,
        #[serde(default)]
        delay_ms: u64,
    },
    /// A hostile or broken provider: `bytes` bytes of `data: xxx…` with no line break, sent
    /// as fast as the client reads, then the connection closes.
    Flood { bytes: u64 },
    /// Stream the first `after_chunks` pieces, then drop the connection without `[DONE]`.
    /// With `after_release`, the drop waits for [`ScriptedModel::release`]: a test can see
    /// the pieces arrive first (a reset may otherwise overtake data still in flight).
    Disconnect {
        text: String,
        #[serde(default = "default_chunks")]
        chunks: usize,
        after_chunks: usize,
        #[serde(default)]
        after_release: bool,
    },
}

/// One scripted tool call. `arguments` is sent verbatim (it may be malformed on purpose).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

fn default_chunks() -> usize {
    4
}

/// What to answer when no step is queued.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultReply {
    /// `"<prefix><last user message>"`.
    Echo {
        prefix: String,
        chunks: usize,
        delay_ms: u64,
    },
    /// A fixed text.
    Fixed {
        text: String,
        chunks: usize,
        delay_ms: u64,
    },
    /// `chunks` chunks whose text is the send time, `⟦<µs since the epoch>⟧`, so a client can
    /// measure delivery latency per chunk (benchmark `stream` scenario).
    Stamped { chunks: usize, delay_ms: u64 },
}

impl Default for DefaultReply {
    fn default() -> Self {
        DefaultReply::Echo {
            prefix: "Echo: ".into(),
            chunks: 4,
            delay_ms: 0,
        }
    }
}

/// A recorded request.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    pub body: Value,
    pub authorization: Option<String>,
}

/// A request as kept: its bytes, parsed only when asked for (a benchmark's thousand long
/// contexts as JSON trees cost more than the gateway it measures).
struct Stored {
    body: Bytes,
    authorization: Option<String>,
}

impl Stored {
    fn recorded(&self) -> Recorded {
        Recorded {
            // Checked as JSON before it was stored.
            body: serde_json::from_slice(&self.body).unwrap_or(Value::Null),
            authorization: self.authorization.clone(),
        }
    }
}

struct Shared {
    queue: Mutex<VecDeque<Step>>,
    requests: Mutex<VecDeque<Stored>>,
    default: Mutex<DefaultReply>,
    gate: Semaphore,
    model: String,
}

/// A running scripted model server. Dropping the handle does not stop the server task; it
/// ends with the runtime.
#[derive(Clone)]
pub struct ScriptedModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl ScriptedModel {
    /// Binds `127.0.0.1:0` and serves in the background of the current runtime.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::serve(listener, DefaultReply::default(), "scripted-1".into())
    }

    /// Serves on `listener` in the background of the current runtime.
    pub fn serve(
        listener: TcpListener,
        default: DefaultReply,
        model: String,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            requests: Mutex::new(VecDeque::new()),
            default: Mutex::new(default),
            gate: Semaphore::new(0),
            model,
        });
        let app = router(shared.clone());
        // Stream chunks must leave at once: without TCP_NODELAY, Nagle plus delayed ACKs add
        // ~40 ms to small SSE writes.
        let listener =
            axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
                let _ = tcp.set_nodelay(true);
            });
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "Scripted model server stopped.");
            }
        });
        Ok(Self { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL for an `openai-completions` provider (`http://127.0.0.1:<port>/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a step for the next request.
    pub fn push(&self, step: Step) {
        lock(&self.shared.queue).push_back(step);
    }

    /// Lets one held (`Hold`) stream continue.
    pub fn release(&self) {
        self.shared.gate.add_permits(1);
    }

    pub fn set_default(&self, reply: DefaultReply) {
        *lock(&self.shared.default) = reply;
    }

    /// Requests received so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests)
            .iter()
            .map(Stored::recorded)
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these short critical sections cannot leave them inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn router(shared: Arc<Shared>) -> Router {
    let on = |api: Api| {
        move |state: State<Arc<Shared>>, headers: HeaderMap, body: Bytes| {
            answer(api, state, headers, body)
        }
    };
    Router::new()
        .route("/v1/chat/completions", post(on(Api::Completions)))
        .route("/v1/responses", post(on(Api::Responses)))
        .route("/v1/messages", post(on(Api::Anthropic)))
        .route("/api/chat", post(on(Api::Ollama)))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/_script", post(push_script))
        .route("/_release", post(release))
        .route("/_requests", get(requests))
        // Real providers take prompts of many megabytes (long contexts); axum's 2 MB default
        // would make the fake refuse what they accept.
        .layer(axum::extract::DefaultBodyLimit::max(256 * 1024 * 1024))
        .with_state(shared)
}

async fn models(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(
        json!({"object": "list", "data": [{"id": s.model, "object": "model", "owned_by": "loopgate"}]}),
    )
}

async fn push_script(State(s): State<Arc<Shared>>, Json(steps): Json<Vec<Step>>) -> StatusCode {
    lock(&s.queue).extend(steps);
    StatusCode::NO_CONTENT
}

async fn release(State(s): State<Arc<Shared>>) -> StatusCode {
    s.gate.add_permits(1);
    StatusCode::NO_CONTENT
}

async fn requests(State(s): State<Arc<Shared>>) -> Json<Vec<Recorded>> {
    Json(lock(&s.requests).iter().map(Stored::recorded).collect())
}

fn api_error(api: Api, status: StatusCode, message: &str, retry_after_s: Option<u64>) -> Response {
    let mut resp = (status, Json(api.error_body(status.as_u16(), message))).into_response();
    if let Some(s) = retry_after_s {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(s));
    }
    resp
}

async fn answer(
    api: Api,
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bad = |m: &str| api_error(api, StatusCode::BAD_REQUEST, m, None);
    let asked = match api.asked(&body) {
        Ok(a) => a,
        Err(e) => return bad(&e),
    };
    if !asked.stream && api != Api::Completions {
        return bad("the scripted model answers this API streamed only");
    }
    let last_user = asked.last_user.clone();
    {
        let mut rec = lock(&s.requests);
        if rec.len() >= MAX_RECORDED {
            rec.pop_front();
        }
        let authorization = headers
            .get(header::AUTHORIZATION)
            .or_else(|| headers.get("x-api-key"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        rec.push_back(Stored {
            body,
            authorization,
        });
    }
    let step = lock(&s.queue)
        .pop_front()
        .unwrap_or_else(|| match lock(&s.default).clone() {
            DefaultReply::Echo {
                prefix,
                chunks,
                delay_ms,
            } => Step::Text {
                text: format!("{prefix}{last_user}"),
                chunks,
                delay_ms,
                finish_reason: None,
                reasoning: String::new(),
                keepalive_ms: 0,
                end_turn: None,
            },
            DefaultReply::Fixed {
                text,
                chunks,
                delay_ms,
            } => Step::Text {
                text,
                chunks,
                delay_ms,
                finish_reason: None,
                reasoning: String::new(),
                keepalive_ms: 0,
                end_turn: None,
            },
            DefaultReply::Stamped { chunks, delay_ms } => Step::Stamped { chunks, delay_ms },
        });
    if let Step::HttpError {
        status,
        message,
        retry_after_s,
    } = &step
    {
        let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return api_error(api, status, message, *retry_after_s);
    }
    if let Step::Flood { bytes } = step {
        let piece = Bytes::from(vec![b'x'; 64 * 1024]);
        let first = Bytes::from_static(b"data: ");
        let chunks = (0..bytes.div_ceil(piece.len() as u64)).map(move |_| piece.clone());
        let body = futures_util::stream::iter(
            std::iter::once(first)
                .chain(chunks)
                .map(Ok::<_, std::io::Error>),
        );
        return Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let reply = Reply::from_step(step);
    if !asked.stream {
        return Json(reply.completion(&s.model, asked.prompt_tokens)).into_response();
    }
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let encoder = Encoder::new(api, &s.model, now_secs(), &asked);
    tokio::spawn(reply.stream(s.clone(), tx, encoder));
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, api.content_type())
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Microseconds since the Unix epoch.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_all_text() {
        assert_eq!(split_chunks("hello world", 3).concat(), "hello world");
        assert_eq!(split_chunks("hi", 10).len(), 2);
        assert_eq!(split_chunks("", 3), vec![String::new()]);
        assert_eq!(split_chunks("héllo", 5).concat(), "héllo");
    }

    #[test]
    fn steps_parse_from_json() {
        let s: Vec<Step> = serde_json::from_value(json!([
            {"kind": "text", "text": "hi"},
            {"kind": "http_error", "status": 500, "message": "boom"},
            {"kind": "stall", "text": "abc", "after_chunks": 1},
            {"kind": "tool_calls", "calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]}
        ]))
        .unwrap();
        assert_eq!(s.len(), 4);
    }
}
