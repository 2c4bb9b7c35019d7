//! Serving an operator-installed Control UI (`[gateway.control_ui]`) on the WebSocket port:
//! the built directory of a web UI (for example an installed `openclaw` package's
//! `dist/control-ui`), same origin as the Gateway, so the page's WebSocket passes the
//! origin check. loopgate ships no UI code; it serves files from the configured root.
//!
//! What the model can write never reaches this origin: the root may not be inside or
//! contain an agent's workspace, may not be inside or contain the state directory (the
//! gateway token, the databases),
//! and may not be writable by group or others. Paths are decoded once, dot segments and
//! dotfiles are refused, and the resolved file must stay inside the root's real path.
//!
//! Routes under `base_path` (`B`): `B` → 302 `B/`; `B/control-ui-config.json` (and
//! `B/__openclaw/control-ui-config.json`) → the boot document, behind the gateway token;
//! existing files → served with their type; a missing file with a static extension → 404;
//! any other path a browser navigates to → `index.html` (the UI routes it). GET and HEAD
//! only.

mod files;
pub mod media;
mod page;

use std::path::{Path, PathBuf};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Response, StatusCode};

type Body = Full<Bytes>;

pub use crate::config::control_ui::ControlUi;

/// What a request asks of the UI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Not under the base path: not the UI's.
    NotMine,
    /// The base path without its slash: redirect to `B/` (`Location`).
    Redirect(String),
    /// The boot document.
    Config,
    /// A session's attachment (`__openclaw__/assistant-media`).
    Media,
    /// A file below the root (decoded, checked segments), and whether a missing one falls
    /// back to the page.
    File { rel: PathBuf, fallback: bool },
    /// A path no file can have (bad encoding, dot segments): 404.
    Refused,
}

/// Extensions of static files: a missing one is a 404, never the page.
const STATIC_EXTENSIONS: &[&str] = &[
    "js",
    "css",
    "json",
    "map",
    "svg",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "webp",
    "ico",
    "txt",
    "wasm",
    "webmanifest",
    "woff2",
    "woff",
    "ttf",
];

/// Files at the UI's root that the page also asks for under `/__openclaw__/`.
const ROOT_ASSETS: &[&str] = &[
    "apple-touch-icon.png",
    "favicon-32.png",
    "favicon.ico",
    "favicon.svg",
    "manifest.webmanifest",
    "sw.js",
];

/// Where `path` (the raw, still percent-encoded request path) goes.
pub fn route(base: &str, path: &str, query: Option<&str>) -> Route {
    // An authority-form (`CONNECT a:1`) or empty target names no file.
    if !path.starts_with('/') {
        return Route::NotMine;
    }
    let rel = if base.is_empty() {
        path
    } else if path == base {
        let q = query.map(|q| format!("?{q}")).unwrap_or_default();
        return Route::Redirect(format!("{base}/{q}"));
    } else {
        match path.strip_prefix(base) {
            Some(r) if r.starts_with('/') => r,
            _ => return Route::NotMine,
        }
    };
    let is_config = rel == "/control-ui-config.json"
        || rel == "/__openclaw/control-ui-config.json"
        || (base.is_empty() && rel == "/__openclaw__/control-ui-config.json");
    if is_config {
        return Route::Config;
    }
    if rel == "/__openclaw__/assistant-media" {
        return Route::Media;
    }
    let mapped = if let Some(i) = rel.find("/assets/") {
        // Deep links load `./assets/...` relative to themselves.
        rel[i + 1..].to_owned()
    } else if let Some(asset) = rel
        .strip_prefix("/__openclaw__/")
        .filter(|a| ROOT_ASSETS.contains(a))
    {
        asset.to_owned()
    } else if rel.ends_with('/') {
        format!("{}index.html", &rel[1..])
    } else {
        rel[1..].to_owned()
    };
    let Some(segments) = decode_segments(&mapped) else {
        return Route::Refused;
    };
    let rel: PathBuf = segments.iter().collect();
    let ext = rel
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let fallback = !ext.is_some_and(|e| STATIC_EXTENSIONS.contains(&e.as_str()));
    Route::File { rel, fallback }
}

/// Percent-decodes each `/`-separated segment; `None` if one is empty, `.`/`..`, a dotfile,
/// not UTF-8, or holds a separator or NUL once decoded.
fn decode_segments(path: &str) -> Option<Vec<String>> {
    path.split('/')
        .map(|s| {
            let d = percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()?
                .into_owned();
            let bad = d.is_empty() || d.starts_with('.') || d.contains(['/', '\\', '\0']);
            (!bad).then_some(d)
        })
        .collect()
}

/// Whether the request's `Accept` admits an HTML answer (no header counts).
fn accepts_html(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|part| {
        let mut it = part.split(';');
        let media = it.next().unwrap_or("").trim().to_ascii_lowercase();
        let zero = it.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !zero
            && matches!(
                media.as_str(),
                "text/html" | "text/*" | "*/*" | "application/xhtml+xml"
            )
    })
}

/// The type a file is served as, by its extension.
pub fn content_type(rel: &Path) -> &'static str {
    let ext = rel
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "application/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        "webmanifest" => "application/manifest+json; charset=utf-8",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        _ => "application/octet-stream",
    }
}

/// What serving needs from the gateway: its token check and the boot document.
pub trait Site {
    /// `Authorization: Bearer <x>` is accepted (always, when auth is off): the gateway token,
    /// or a device token it issued.
    fn bearer_ok(&self, token: Option<&str>) -> impl std::future::Future<Output = bool> + Send;
    fn boot_document(&self) -> ipc::gateway::ControlUiConfig;
    /// The key the gateway signs media tickets with (random per process).
    fn media_key(&self) -> &[u8; 32];
    /// An attachment some message of the session carries, by its digest's leading digits.
    fn media(
        &self,
        agent_id: Option<&str>,
        session_key: &str,
        digits: &str,
    ) -> impl std::future::Future<Output = Result<Option<ipc::control::MediaBytes>, Self::MediaError>>
           + Send;
    /// Why [`Site::media`] could not read an attachment (said to the page and the log).
    type MediaError: std::fmt::Display;
}

/// Answers a request for the UI, or `None` when the path is not under the base path.
pub async fn serve(
    ui: &ControlUi,
    site: &impl Site,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Option<Response<Body>> {
    let route = route(&ui.base_path, path, query);
    if route == Route::NotMine {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    let head = method == Method::HEAD;
    let response = match route {
        Route::NotMine => return None,
        Route::Refused => plain(StatusCode::NOT_FOUND, "Not Found\n"),
        Route::Redirect(to) => {
            let mut r = plain(StatusCode::FOUND, "");
            if let Ok(v) = HeaderValue::from_str(&to) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        Route::Config => config_document(site, headers).await,
        Route::Media => media::answer(site, query, headers).await,
        Route::File { rel, fallback } => {
            file_or_page(ui, &rel, fallback && accepts_html(headers), headers).await
        }
    };
    Some(finish(response, head))
}

fn plain(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The security headers every UI answer carries; HEAD answers lose their body.
fn finish(mut r: Response<Body>, head: bool) -> Response<Body> {
    let h = r.headers_mut();
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(self), geolocation=()"),
    );
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        if let Ok(v) = HeaderValue::from_str(&page::csp(&[])) {
            h.insert(header::CONTENT_SECURITY_POLICY, v);
        }
    }
    if head {
        *r.body_mut() = Full::new(Bytes::new());
    }
    r
}

async fn config_document(site: &impl Site, headers: &HeaderMap) -> Response<Body> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if !site.bearer_ok(bearer).await {
        if bearer.is_some() {
            // A guess costs the guesser what a refused `connect` does.
            tokio::time::sleep(crate::door::FAILED_AUTH_DELAY).await;
        }
        let body = serde_json::to_vec(&ipc::gateway::HttpError::unauthorized()).unwrap_or_default();
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return r;
    }
    let body = serde_json::to_vec(&site.boot_document()).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The file at `rel` below the root if it is a regular file inside the root's real path;
/// else the page (when `fallback`) or 404.
async fn file_or_page(
    ui: &ControlUi,
    rel: &Path,
    fallback: bool,
    headers: &HeaderMap,
) -> Response<Body> {
    let is_index = rel == Path::new("index.html");
    match open_inside(&ui.root, rel).await {
        Some(f) if is_index => page::index(ui, &f.bytes, f.modified),
        Some(f) => static_file(rel, f.bytes, f.modified, headers),
        None if fallback || is_index => {
            match open_inside(&ui.root, Path::new("index.html")).await {
                Some(f) => page::index(ui, &f.bytes, f.modified),
                None => unavailable(ui),
            }
        }
        None => plain(StatusCode::NOT_FOUND, "Not Found\n"),
    }
}

/// The root went away after the config was loaded.
fn unavailable(ui: &ControlUi) -> Response<Body> {
    tracing::warn!(root = %ui.root.display(), "The Control UI root has no index.html; answering 503.");
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "Control UI files not found at gateway.control_ui.root\n",
    )
}

/// Reads `rel` below `root` (see [`files::read_beneath`]), off the async threads.
async fn open_inside(root: &Path, rel: &Path) -> Option<files::Served> {
    let (root, rel) = (root.to_owned(), rel.to_owned());
    tokio::task::spawn_blocking(move || files::read_beneath(&root, &rel))
        .await
        .ok()
        .flatten()
}

fn static_file(
    rel: &Path,
    bytes: Bytes,
    modified: std::time::SystemTime,
    headers: &HeaderMap,
) -> Response<Body> {
    let last_modified = httpdate::fmt_http_date(modified);
    let since = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok());
    // HTTP dates have whole seconds: compare at that precision.
    let unchanged = since.is_some_and(|s| {
        let secs = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        };
        secs(modified) <= secs(s)
    });
    let mut r = if unchanged {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Full::new(bytes));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(rel)),
        );
        r
    };
    let h = r.headers_mut();
    // The operator may replace the files at any time (an upgrade): revalidate each use.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    r
}

#[cfg(test)]
mod tests;
