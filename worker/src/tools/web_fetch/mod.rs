//! `web_fetch`: one http(s) page as readable markdown or text, wrapped as untrusted
//! external content, in OpenClaw's result shape. Every hop (the URL and each redirect) is
//! checked by [`guard`] before it is requested and every address dialled is checked by the
//! client's resolver; the body is read to the policy's byte cap and the whole fetch is
//! bounded in time. The model's text never reaches a shell: this tool only reads the page.

mod extract;
mod guard;
pub mod isolate;
mod untrusted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::web::WebFetchPolicy;
use reqwest::{header, StatusCode, Url};
use serde::Serialize;
use serde_json::Value;

use super::{ToolOutcome, MAX_RESULT_CHARS};
use extract::Mode;
use guard::{GuardedResolver, Refused};
use untrusted::Source;

/// `maxChars` when the call names none (OpenClaw's 20 000).
const DEFAULT_MAX_CHARS: usize = 20_000;
/// Most characters of an error page quoted in a failure.
const ERROR_PAGE_CHARS: usize = 4_000;
const USER_AGENT: &str = "Mozilla/5.0 (compatible; loopgate web_fetch)";
const ACCEPT: &str = "text/markdown, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1";

/// The result the model sees (OpenClaw's fields).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Fetched<'a> {
    url: &'a str,
    final_url: &'a str,
    content_type: &'a str,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    extract_mode: Mode,
    extractor: &'static str,
    external_content: ExternalContent,
    truncated: bool,
    length: usize,
    raw_length: usize,
    fetched_at: String,
    took_ms: u64,
    text: String,
}

#[derive(Debug, Serialize)]
struct ExternalContent {
    untrusted: bool,
    source: &'static str,
    wrapped: bool,
}

/// A failure as the model sees it.
#[derive(Debug, Serialize)]
struct Failed {
    status: &'static str,
    tool: &'static str,
    error: String,
}

/// Why a fetch failed (its text goes to the model, wrapped).
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("fetch failed | {0}")]
    Transport(String),
    #[error("fetch failed | timed out after {0} ms")]
    TimedOut(u64),
    #[error("Too many redirects (limit {0})")]
    Redirects(u32),
    #[error("Web fetch failed ({code}): {page}")]
    Status { code: u16, page: String },
    #[error("Unsupported content type: {0}")]
    Binary(String),
    #[error("The page does not fit a tool result; try extractMode text or a smaller maxChars")]
    TooLarge,
}

/// A response that is not a redirect, and where it came from.
struct Landed {
    url: Url,
    status: StatusCode,
    content_type: String,
    body: Vec<u8>,
    truncated: bool,
}

/// Runs one `web_fetch` call.
pub async fn web_fetch(policy: &Arc<WebFetchPolicy>, args: &Value) -> ToolOutcome {
    let asked = args.get("url").and_then(Value::as_str).unwrap_or("").trim();
    let mode = match args.get("extractMode").and_then(Value::as_str) {
        Some("text") => Mode::Text,
        _ => Mode::Markdown,
    };
    let max_chars = args
        .get("maxChars")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_CHARS, |n| {
            usize::try_from(n).unwrap_or(usize::MAX).max(100)
        });
    let started = Instant::now();
    let fetched_at = ipc::calendar::iso_millis(crate::now_ms());
    let landed = match Url::parse(asked) {
        Err(e) => Err(FetchError::Refused(Refused::Malformed(e.to_string()))),
        Ok(url) => {
            let limit = Duration::from_millis(policy.timeout_ms);
            match tokio::time::timeout(limit, fetch(policy, url)).await {
                Ok(r) => r,
                Err(_) => Err(FetchError::TimedOut(policy.timeout_ms)),
            }
        }
    };
    let landed = match landed {
        Ok(l) => l,
        Err(e) => return failed(&e),
    };
    let body = String::from_utf8_lossy(&landed.body).into_owned();
    let extracted = match extract::plain(body, &landed.content_type) {
        Ok(text) => text,
        Err(html) => isolate::convert(html, mode).await,
    };
    let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !landed.status.is_success() {
        let page = clip(&untrusted::sanitize(&extracted.text), ERROR_PAGE_CHARS);
        return failed(&FetchError::Status {
            code: landed.status.as_u16(),
            page,
        });
    }
    let raw_length = extracted.text.chars().count();
    let title = extracted
        .title
        .as_deref()
        .map(|t| untrusted::wrap(&clip(t, MAX_FIELD), Source::WebFetch, false));
    // What the server or a redirect chose, kept short and without parameters (a header is
    // the page's text too).
    let media_type = clip(
        &untrusted::sanitize(landed.content_type.split(';').next().unwrap_or("").trim()),
        MAX_FIELD,
    );
    let (asked, final_url) = (clip(asked, MAX_URL), clip(landed.url.as_str(), MAX_URL));
    // The text as asked, then less until the whole result fits what a tool may return.
    let mut budget = max_chars;
    loop {
        let kept: String = extracted.text.chars().take(budget).collect();
        let cut = landed.truncated || budget < raw_length;
        let text = untrusted::wrap(&kept, Source::WebFetch, true);
        let result = Fetched {
            url: &asked,
            final_url: &final_url,
            content_type: &media_type,
            status: landed.status.as_u16(),
            title: title.clone(),
            extract_mode: mode,
            extractor: extracted.extractor,
            external_content: ExternalContent {
                untrusted: true,
                source: "web_fetch",
                wrapped: true,
            },
            truncated: cut,
            length: text.chars().count(),
            raw_length,
            fetched_at: fetched_at.clone(),
            took_ms,
            text,
        };
        let json = serde_json::to_string_pretty(&result).unwrap_or_default();
        let size = json.chars().count();
        if size <= MAX_RESULT_CHARS {
            return ToolOutcome::ok(json);
        }
        if budget == 0 {
            return failed(&FetchError::TooLarge);
        }
        // Escapes make the JSON longer than the text: shrink in proportion, and some.
        let kept_now = budget.min(raw_length);
        budget = (kept_now * MAX_RESULT_CHARS / size)
            .saturating_sub(64)
            .min(kept_now - 1);
    }
}

/// Longest title or content type given back.
const MAX_FIELD: usize = 300;
/// Longest URL given back.
const MAX_URL: usize = 2048;

/// `text`, at most `max` characters (`…` marks a cut).
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn failed(e: &FetchError) -> ToolOutcome {
    let f = Failed {
        status: "error",
        tool: "web_fetch",
        error: untrusted::wrap(&e.to_string(), Source::Api, true),
    };
    ToolOutcome::err(serde_json::to_string_pretty(&f).unwrap_or_default())
}

/// Follows redirects (each one checked) to a response, and reads its body to the cap.
async fn fetch(policy: &Arc<WebFetchPolicy>, mut url: Url) -> Result<Landed, FetchError> {
    let client = reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver {
            policy: policy.clone(),
        }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| FetchError::Transport(e.to_string()))?;
    let mut hops = 0;
    let mut response = loop {
        guard::check_url(&url, policy)?;
        let response = client
            .get(url.clone())
            .header(header::ACCEPT, ACCEPT)
            .send()
            .await
            .map_err(transport)?;
        let location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok());
        match location {
            Some(to) if response.status().is_redirection() => {
                if hops == policy.max_redirects {
                    return Err(FetchError::Redirects(policy.max_redirects));
                }
                hops += 1;
                url = url.join(to).map_err(|e| {
                    Refused::Malformed(format!("redirect to {:?}: {e}", clip(to, 200)))
                })?;
            }
            _ => break response,
        }
    };
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if is_binary(&content_type) {
        return Err(FetchError::Binary(clip(&content_type, MAX_FIELD)));
    }
    let cap = usize::try_from(policy.max_response_bytes).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Landed {
        url: response.url().clone(),
        status: response.status(),
        content_type,
        body,
        truncated,
    })
}

/// Content the tool does not read as text.
fn is_binary(content_type: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    let textual = ct.is_empty()
        || ct.starts_with("text/")
        || [
            "json",
            "xml",
            "html",
            "javascript",
            "markdown",
            "yaml",
            "csv",
        ]
        .iter()
        .any(|t| ct.contains(t));
    !textual
}

/// A client error as the model is told it: the policy's refusal, else its deepest cause.
fn transport(e: reqwest::Error) -> FetchError {
    if let Some(r) = guard::refused_in(&e) {
        return FetchError::Refused(r);
    }
    let mut cause: &dyn std::error::Error = &e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    FetchError::Transport(cause.to_string())
}
