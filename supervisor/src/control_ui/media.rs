//! `B/__openclaw__/assistant-media`: the attachments a session's messages carry, as the
//! Control UI fetches them (OpenClaw's route): first `?meta=1` with the gateway token as
//! `Authorization: Bearer`, answered with the type, the size and a short-lived ticket; then
//! the bytes, with that ticket in the URL (an `<img>` sends no header).
//!
//! Query: `source` (`media://inbound/<name>`, naming the content by its digest), `sessionKey`,
//! `agentId`, `meta`, `mediaTicket`. Only a content some message of that session carries is
//! found. What a client uploaded is served so that it can never run on the gateway's
//! origin: images (known by their bytes when they were taken) as themselves, text as
//! `text/plain`, anything else as a download; always `nosniff` and a sandboxing CSP.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use ipc::gateway::{MediaMeta, MediaUnavailable};

use super::{Body, Site};
use crate::secrets::{hex, hmac_sha256};

/// How long a ticket lets its URL fetch the bytes.
pub const TICKET_TTL_MS: u64 = 10 * 60 * 1000;

/// The route's query, decoded.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MediaQuery {
    pub source: String,
    pub session_key: String,
    pub agent_id: Option<String>,
    pub meta: bool,
    pub ticket: Option<String>,
}

impl MediaQuery {
    pub fn parse(query: Option<&str>) -> MediaQuery {
        let mut q = MediaQuery::default();
        for pair in query.unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = v.replace('+', " ");
            let v = percent_encoding::percent_decode_str(&v)
                .decode_utf8_lossy()
                .into_owned();
            match k {
                "source" => q.source = v,
                "sessionKey" => q.session_key = v,
                "agentId" => q.agent_id = Some(v).filter(|a| !a.is_empty()),
                "meta" => q.meta = v == "1" || v == "true",
                "mediaTicket" => q.ticket = Some(v).filter(|t| !t.is_empty()),
                _ => {}
            }
        }
        q
    }
}

/// Answers the route.
pub async fn answer(site: &impl Site, query: Option<&str>, headers: &HeaderMap) -> Response<Body> {
    let q = MediaQuery::parse(query);
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(digits) = ipc::control::url_digest(&q.source).map(str::to_owned) else {
        return unavailable(q.meta, "file-not-found", "File not found");
    };
    let now = crate::events::now_ms();
    // A ticket fetches the bytes it was made for, never a new ticket: `meta=1` (which mints
    // one) needs the token, so a URL lives its ten minutes and no longer, and a revoked
    // device's tickets end with them.
    let ticket_ok = !q.meta
        && q.ticket
            .as_deref()
            .is_some_and(|t| check_ticket(site.media_key(), t, &q, &digits, now));
    if !ticket_ok && !site.bearer_ok(bearer).await {
        if bearer.is_some() || q.ticket.is_some() {
            tokio::time::sleep(crate::door::FAILED_AUTH_DELAY).await;
        }
        return json(
            StatusCode::UNAUTHORIZED,
            &ipc::gateway::HttpError::unauthorized(),
        );
    }
    let found = match site
        .media(q.agent_id.as_deref(), &q.session_key, &digits)
        .await
    {
        Ok(Some(found)) => found,
        Ok(None) => return unavailable(q.meta, "file-not-found", "File not found"),
        Err(why) => {
            let why = why.to_string();
            tracing::warn!(
                error = why.as_str(),
                "Cannot read an attachment for the Control UI."
            );
            return unavailable(q.meta, "attachment-unavailable", &why);
        }
    };
    if q.meta {
        let expires = now + TICKET_TTL_MS;
        let meta = MediaMeta {
            available: true,
            mime_type: found.mime_type.clone(),
            size_bytes: found.size_bytes,
            media_ticket: ticket(site.media_key(), &q, &digits, expires),
            media_ticket_expires_at: iso_ms(expires),
        };
        return json(StatusCode::OK, &meta);
    }
    use base64::Engine;
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(found.data.as_bytes()) else {
        return unavailable(false, "invalid-file", "The stored attachment is damaged");
    };
    let mut r = Response::new(Full::new(Bytes::from(bytes)));
    let h = r.headers_mut();
    let (kind, download) = served_as(&found.mime_type);
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    if download {
        h.insert(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment"),
        );
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=600"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    r
}

/// The type an attachment is served as, and whether only as a download.
pub fn served_as(mime: &str) -> (&'static str, bool) {
    match mime {
        "image/png" => ("image/png", false),
        "image/jpeg" => ("image/jpeg", false),
        "image/gif" => ("image/gif", false),
        "image/webp" => ("image/webp", false),
        m if m.starts_with("text/") || m.ends_with("json") => ("text/plain; charset=utf-8", false),
        _ => ("application/octet-stream", true),
    }
}

fn unavailable(meta: bool, code: &str, reason: &str) -> Response<Body> {
    let body = MediaUnavailable {
        available: false,
        code: code.to_owned(),
        reason: reason.to_owned(),
        retryable: code == "attachment-unavailable",
        can_allow: false,
    };
    // The check answers in its own shape; a fetch of the bytes is simply not there.
    let status = if meta {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    json(status, &body)
}

fn json(status: StatusCode, body: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(bytes)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// What a ticket vouches for: this content of this session, until `expires`.
fn claim(q: &MediaQuery, digits: &str, expires: u64) -> String {
    format!(
        "{expires}\n{digits}\n{}\n{}",
        q.agent_id.as_deref().unwrap_or(""),
        q.session_key
    )
}

/// `v1.<expiry ms>.<hex HMAC-SHA256 of the claim>`.
fn ticket(key: &[u8; 32], q: &MediaQuery, digits: &str, expires: u64) -> String {
    let mac = hmac_sha256(key, claim(q, digits, expires).as_bytes());
    format!("v1.{expires}.{}", hex(&mac))
}

fn check_ticket(key: &[u8; 32], t: &str, q: &MediaQuery, digits: &str, now: u64) -> bool {
    let mut parts = t.split('.');
    let (Some("v1"), Some(expires), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Ok(expires) = expires.parse::<u64>() else {
        return false;
    };
    if expires < now {
        return false;
    }
    let want = hex(&hmac_sha256(key, claim(q, digits, expires).as_bytes()));
    crate::auth::token_matches(sig, &want)
}

/// `ms` since the epoch as ISO 8601 UTC (`2026-12-03T12:00:00.000Z`).
pub fn iso_ms(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        crate::calendar::date(days),
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1_000 % 60,
        rest % 1_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_tickets_bind_content_session_and_time() {
        let q = MediaQuery::parse(Some(
            "source=media%3A%2F%2Finbound%2Fdot---ab.png&sessionKey=agent%3Amain%3Aa+b&agentId=main&meta=1",
        ));
        assert_eq!(q.source, "media://inbound/dot---ab.png");
        assert_eq!(q.session_key, "agent:main:a b");
        assert!(q.meta);
        let key = [7u8; 32];
        let t = ticket(&key, &q, "ab", 2_000);
        assert!(check_ticket(&key, &t, &q, "ab", 1_000));
        assert!(!check_ticket(&key, &t, &q, "ab", 2_001), "expired");
        assert!(!check_ticket(&key, &t, &q, "cd", 1_000), "another content");
        let other = MediaQuery {
            session_key: "agent:main:other".into(),
            ..MediaQuery::parse(None)
        };
        assert!(
            !check_ticket(&key, &t, &other, "ab", 1_000),
            "another session"
        );
        assert!(
            !check_ticket(&[8u8; 32], &t, &q, "ab", 1_000),
            "another gateway"
        );
        let forged = t.replace("v1.2000.", "v1.9999999999999.");
        assert!(!check_ticket(&key, &forged, &q, "ab", 1_000));
    }

    #[test]
    fn hmac_matches_rfc_4231_and_dates_read_as_iso() {
        // RFC 4231 test case 2 uses a 4-byte key; a 32-byte key padded with zeros is the
        // same HMAC, so the vector applies.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(&hmac_sha256(&key, b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_ms(1_796_183_740_026), "2026-12-02T03:55:40.026Z");
        assert_eq!(served_as("text/html").0, "text/plain; charset=utf-8");
        assert_eq!(
            served_as("image/svg+xml"),
            ("application/octet-stream", true)
        );
    }
}
