//! What an agent's `web_fetch` may reach and how much it may bring back. Since: protocol v2
//! (additive).

use serde::{Deserialize, Serialize};

/// Default cap on a response body read (OpenClaw's 750 000 bytes).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 750_000;
/// Default time for a whole fetch, redirects included.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Redirects followed before a fetch fails (OpenClaw's 3).
pub const DEFAULT_MAX_REDIRECTS: u32 = 3;

/// One agent's `web_fetch` policy as its worker applies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebFetchPolicy {
    /// Host names (exact, case-insensitive) fetched even when they are, or resolve to,
    /// private, loopback or special-use addresses (OpenClaw's `ssrfPolicy.allowedHostnames`).
    #[serde(default)]
    pub allowed_hostnames: Vec<String>,
    /// Every address may be fetched (OpenClaw's `dangerouslyAllowPrivateNetwork`).
    #[serde(default)]
    pub allow_private_network: bool,
    /// Most bytes of a response body read; the rest is cut (`truncated`).
    pub max_response_bytes: u64,
    /// Most time for a whole fetch, redirects included.
    pub timeout_ms: u64,
    pub max_redirects: u32,
}

impl Default for WebFetchPolicy {
    fn default() -> Self {
        WebFetchPolicy {
            allowed_hostnames: Vec::new(),
            allow_private_network: false,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_redirects: DEFAULT_MAX_REDIRECTS,
        }
    }
}

impl WebFetchPolicy {
    pub fn is_default(&self) -> bool {
        *self == WebFetchPolicy::default()
    }

    /// Whether `host` (as a URL writes it: `[::1]` for IPv6) is one the operator allowed
    /// by name.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = bare(host);
        self.allowed_hostnames
            .iter()
            .any(|h| bare(h).eq_ignore_ascii_case(host))
    }
}

/// A host without IPv6 brackets or the root's trailing dot.
fn bare(host: &str) -> &str {
    let host = host.trim_end_matches('.');
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Whether `host` can be an entry of `allowed_hostnames`: a host name or an address, with
/// no scheme, port, path or wildcard.
pub fn is_host_name(host: &str) -> bool {
    let h = bare(host);
    if h.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_without_case_brackets_or_root_dot() {
        let p = WebFetchPolicy {
            allowed_hostnames: vec!["127.0.0.1".into(), "Intranet.Example.".into(), "::1".into()],
            ..WebFetchPolicy::default()
        };
        assert!(p.host_allowed("127.0.0.1"));
        assert!(p.host_allowed("intranet.example"));
        assert!(p.host_allowed("[::1]"));
        assert!(!p.host_allowed("localhost"));
        assert!(!p.host_allowed("a.intranet.example"));
        assert!(is_host_name("[fd00::1]") && is_host_name("my-host.lan"));
        for bad in ["", "http://x", "x:80", "*.example", "a b", "x/y"] {
            assert!(!is_host_name(bad), "{bad}");
        }
    }
}
