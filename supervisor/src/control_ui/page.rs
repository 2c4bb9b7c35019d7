//! The UI's page (`index.html`) as served: told its base path and that no terminal exists,
//! its asset links made absolute (deep links load them from the base, not from where they
//! are), and a Content-Security-Policy that allows exactly the page's own inline scripts.

use base64::Engine;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::Response;
use sha2::{Digest, Sha256};

use super::{Body, ControlUi, ROOT_ASSETS};

/// The policy: same-origin scripts (plus the hashed inline ones), connections only to this
/// origin (its WebSocket included), no frames of it elsewhere, no plugins.
pub fn csp(script_hashes: &[String]) -> String {
    let mut script = String::from("'self'");
    for h in script_hashes {
        script.push_str(&format!(" 'sha256-{h}'"));
    }
    [
        "default-src 'self'".to_owned(),
        "base-uri 'none'".to_owned(),
        "object-src 'none'".to_owned(),
        "frame-ancestors 'none'".to_owned(),
        "form-action 'self'".to_owned(),
        format!("script-src {script}"),
        "style-src 'self' 'unsafe-inline' https://fonts.googleapis.com".to_owned(),
        "img-src 'self' data: blob:".to_owned(),
        "media-src 'self' data: blob:".to_owned(),
        "font-src 'self' https://fonts.gstatic.com".to_owned(),
        "worker-src 'self'".to_owned(),
        // The UI fetches its built-in icons as `data:` URLs.
        "connect-src 'self' data: blob:".to_owned(),
    ]
    .join("; ")
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `html` with the `<html>` tag told the base path and no terminal (any build-id attribute
/// removed: this is not the UI's bundled copy), and `./assets/` and root-asset links
/// pointing at the base.
pub fn rewrite(html: &str, base: &str) -> String {
    let mut out = html.to_owned();
    let lower = out.to_ascii_lowercase();
    if let Some(start) = lower.find("<html") {
        if let Some(len) = lower[start..].find('>') {
            let end = start + len;
            let mut tag = out[start..end].to_owned();
            const BUILD_ID: &str = " data-openclaw-control-ui-build-id=\"";
            if let Some(i) = tag.find(BUILD_ID) {
                let rest = &tag[i + BUILD_ID.len()..];
                if let Some(close) = rest.find('"') {
                    tag = format!("{}{}", &tag[..i], &rest[close + 1..]);
                }
            }
            let tag = format!(
                "{tag} data-openclaw-control-ui-base-path=\"{}\" data-openclaw-terminal-enabled=\"false\"",
                escape_attr(base)
            );
            out.replace_range(start..end, &tag);
        }
    }
    let mut out = out
        .replace("src=\"./assets/", &format!("src=\"{base}/assets/"))
        .replace("href=\"./assets/", &format!("href=\"{base}/assets/"));
    for asset in ROOT_ASSETS {
        for from in [format!("href=\"./{asset}"), format!("href=\"/{asset}")] {
            out = out.replace(&from, &format!("href=\"{base}/{asset}"));
        }
    }
    out
}

/// Base64 SHA-256 of each inline `<script>` (no `src`, some content), for the policy.
pub fn inline_script_hashes(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut hashes = Vec::new();
    let mut at = 0;
    while let Some(i) = lower[at..].find("<script") {
        let open = at + i;
        let Some(gt) = lower[open..].find('>') else {
            break;
        };
        let body_start = open + gt + 1;
        let Some(close) = lower[body_start..].find("</script") else {
            break;
        };
        let tag = &lower[open..body_start];
        let body = &html[body_start..body_start + close];
        if !tag.contains(" src=") && !body.trim().is_empty() {
            let digest = Sha256::digest(body.as_bytes());
            hashes.push(base64::engine::general_purpose::STANDARD.encode(digest));
        }
        at = body_start + close;
    }
    hashes
}

/// The page, rewritten, never cached without revalidation.
pub fn index(ui: &ControlUi, bytes: &[u8], _modified: std::time::SystemTime) -> Response<Body> {
    let html = rewrite(&String::from_utf8_lossy(bytes), &ui.base_path);
    let policy = csp(&inline_script_hashes(&html));
    let mut r = Response::new(Full::new(Bytes::from(html)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&policy) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}
