//! One provider's client: its HTTP connection pool, spec and key. It sends a request in the
//! provider's wire API, maps HTTP failures to typed errors, and hands the streamed body to
//! that API's parser.

use std::time::Duration;

use ipc::control::{ModelSpec, ProviderApi};
use serde_json::Value;
use tokio::sync::mpsc;

use super::limits::Limits;
use super::{anthropic, completions, ollama, responses, LlmError, LlmEvent, ModelRequest};

/// Most bytes of an error body kept for the error message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A client for one provider.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    spec: ModelSpec,
    api_key: Option<String>,
}

impl LlmClient {
    pub fn new(spec: ModelSpec, api_key: Option<String>) -> Result<Self, LlmError> {
        if spec.api == ProviderApi::Unknown {
            return Err(LlmError::Unsupported(spec.api.as_str().to_owned()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(spec.request_timeout_ms))
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .user_agent(concat!("loopgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot set up the HTTP client: {e}")))?;
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

    pub fn api(&self) -> ProviderApi {
        self.spec.api
    }

    /// Streams one response into `tx`. Returns when the response is complete or failed; the
    /// caller aborts the task to cancel (dropping the connection).
    /// Sends `req` and streams the answer to `tx`. The request is dropped as soon as its body
    /// is written, so the turn that keeps it can append to it without a copy.
    pub async fn stream(&self, req: ModelRequest, tx: &mpsc::Sender<Result<LlmEvent, LlmError>>) {
        let request = self.build(&req);
        drop(req);
        if let Err(e) = self.stream_inner(request, tx).await {
            let _ = tx.send(Err(e)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.spec.base_url.trim_end_matches('/'))
    }

    /// The HTTP request for `req` in this provider's API. Bodies are serialized straight from
    /// the request (no intermediate JSON tree: a turn's history can be hundreds of messages)
    /// into a buffer sized for it.
    fn build(&self, req: &ModelRequest) -> reqwest::RequestBuilder {
        let model = req.choice.as_ref().map_or(&self.spec.model, |c| &c.model);
        let key = self.api_key.as_deref();
        match self.spec.api {
            ProviderApi::OpenAiResponses => {
                let b = self.http.post(self.url("/responses"));
                bearer(json(b, &responses::body(model, &self.spec, req), req), key)
            }
            ProviderApi::AnthropicMessages => {
                let b = self
                    .http
                    .post(self.url("/v1/messages"))
                    .header("anthropic-version", anthropic::VERSION);
                let b = json(b, &anthropic::body(model, &self.spec, req), req);
                match key {
                    Some(k) => b.header("x-api-key", k),
                    None => b,
                }
            }
            ProviderApi::Ollama => {
                let b = self.http.post(self.url("/api/chat"));
                bearer(json(b, &ollama::body(model, &self.spec, req), req), key)
            }
            ProviderApi::OpenAiCompletions | ProviderApi::Unknown => {
                let b = self.http.post(self.url("/chat/completions"));
                bearer(
                    json(b, &completions::body(model, &self.spec, req), req),
                    key,
                )
            }
        }
    }

    async fn stream_inner(
        &self,
        request: reqwest::RequestBuilder,
        tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    ) -> Result<(), LlmError> {
        let timeout_ms = self.spec.request_timeout_ms;
        let sent = tokio::time::timeout(Duration::from_millis(timeout_ms), request.send());
        let resp = match sent.await {
            Err(_) => return Err(LlmError::Timeout(timeout_ms)),
            Ok(Err(e)) => return Err(LlmError::Transport(describe(&e))),
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        if !status.is_success() {
            let retry_after_ms = retry_after_ms(resp.headers());
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
        let body = resp.bytes_stream();
        let limits = Limits::DEFAULT;
        match self.spec.api {
            ProviderApi::OpenAiResponses => responses::pump(body, tx, limits).await,
            ProviderApi::AnthropicMessages => anthropic::pump(body, tx, limits).await,
            ProviderApi::Ollama => ollama::pump(body, tx, limits).await,
            ProviderApi::OpenAiCompletions | ProviderApi::Unknown => {
                completions::pump_within(body, tx, limits).await
            }
        }
    }
}

/// `body` as the JSON body of `b`, written into one buffer of about its size (growing it
/// from nothing copied a long context's body a dozen times).
fn json(
    b: reqwest::RequestBuilder,
    body: &impl serde::Serialize,
    req: &ModelRequest,
) -> reqwest::RequestBuilder {
    let mut buf = Vec::with_capacity(req.body_size_hint());
    match serde_json::to_writer(&mut buf, body) {
        Ok(()) => b
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(buf),
        // reqwest keeps the error for `send` to report.
        Err(_) => b.json(body),
    }
}

fn bearer(b: reqwest::RequestBuilder, key: Option<&str>) -> reqwest::RequestBuilder {
    match key {
        Some(k) => b.bearer_auth(k),
        None => b,
    }
}

/// `retry-after-ms` (OpenAI), else `Retry-After` in seconds.
pub fn retry_after_ms(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|s| s.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(ms as u64);
        }
    }
    header("retry-after")
        .and_then(|s| s.parse::<u64>().ok())
        .map(|s| s.saturating_mul(1000))
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

/// The error body's message: `error.message` (OpenAI, Anthropic), `error` as a string
/// (Ollama), else the start of the body.
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
