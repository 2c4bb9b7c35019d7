//! Which addresses `web_fetch` may reach: public unicast ones, unless the operator allowed a
//! host by name or the private network as a whole. Checked on the URL before any connection
//! (names like `localhost` and address literals) and again on every address a name resolves
//! to, by the resolver the HTTP client connects through: what is checked is what is dialled,
//! so a name that resolves to a public address once and a private one the next time (DNS
//! rebinding) cannot slip through, and every redirect goes through the same two checks.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipc::web::WebFetchPolicy;
use url::{Host, Url};

/// OpenClaw's text for a refused address.
pub const BLOCKED: &str = "Blocked hostname or private/internal/special-use IP address";

/// A URL or address the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("Invalid URL: must be http or https")]
    Scheme,
    #[error("Invalid URL: {0}")]
    Malformed(String),
    #[error("{BLOCKED}")]
    Blocked,
}

/// Whether `ip` is an ordinary public unicast address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                       // "this" network
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))   // shared address space (CGNAT)
        || (a == 169 && b == 254)                  // link local, cloud metadata
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)          // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)          // documentation
        || (a == 192 && b == 88 && c == 99)        // 6to4 relay
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))      // benchmarking
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00               // unique local
        || (s[0] & 0xffc0) == 0xfe80               // link local
        || (s[0] & 0xffc0) == 0xfec0               // site local (deprecated)
        || (s[0] & 0xff00) == 0xff00               // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8)      // documentation
        || (s[0] == 0x2001 && s[1] < 0x0200)       // Teredo, benchmarking, ORCHID
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard
        || (s[0] & 0xfff0) == 0x3ff0               // documentation (3fff::/20)
        || s[0] == 0x5f00                          // segment routing (5f00::/16)
        || s[0] == 0) // IPv4-compatible and the rest of ::/16
}

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let from = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(from(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(from(hi, lo)),
        // Local-use NAT64 (RFC 8215): the address sits in the last 32 bits.
        [0x64, 0xff9b, 1, _, _, _, hi, lo] => Some(from(hi, lo)),
        [0x2002, hi, lo, ..] => Some(from(hi, lo)),
        _ => None,
    }
}

/// Names that are this host or a private network's whatever they resolve to.
fn is_private_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    let under = |zone: &str| h == zone || h.ends_with(&format!(".{zone}"));
    under("localhost")
        || under("local")
        || under("internal")
        || under("home.arpa")
        || under("localdomain")
        || h == "metadata.google.internal"
}

/// Whether the policy lets `url` be fetched, before any connection: http(s) only; an
/// address literal must be public and a name must not be a private one, unless allowed.
pub fn check_url(url: &Url, policy: &WebFetchPolicy) -> Result<(), Refused> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused::Scheme);
    }
    let host = url
        .host()
        .ok_or_else(|| Refused::Malformed("no host".into()))?;
    if policy.allow_private_network || url.host_str().is_some_and(|h| policy.host_allowed(h)) {
        return Ok(());
    }
    let open = match host {
        Host::Ipv4(v4) => is_public_v4(v4),
        Host::Ipv6(v6) => is_public_v6(v6),
        Host::Domain(name) => !is_private_name(name),
    };
    open.then_some(()).ok_or(Refused::Blocked)
}

/// The resolver every `web_fetch` connection goes through: a name's addresses, all of them
/// public, or [`Refused::Blocked`].
pub struct GuardedResolver {
    pub policy: Arc<WebFetchPolicy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let open = policy.allow_private_network || policy.host_allowed(&host);
            if !open && addrs.iter().any(|a| !is_public(a.ip())) {
                return Err(Box::new(Refused::Blocked) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether `err` (a client error and its causes) is the policy's refusal.
pub fn refused_in(err: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut at = Some(err);
    while let Some(e) = at {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        at = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn private_loopback_and_special_use_addresses_are_refused() {
        let p = WebFetchPolicy::default();
        for bad in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0.0.0.0/",
            "http://10.1.2.3/",
            "http://172.31.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://100.64.0.1/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[64:ff9b::a00:1]/",
            "http://[64:ff9b:1::7f00:1]/",
            "http://[3fff::1]/",
            "http://[2002:c0a8:101::]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[ff02::1]/",
            "http://localhost:8080/",
            "http://LOCALHOST./",
            "http://a.localhost/",
            "http://printer.local/",
            "http://metadata.google.internal/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
        ] {
            assert_eq!(check_url(&url(bad), &p), Err(Refused::Blocked), "{bad}");
        }
        for good in [
            "https://example.com/",
            "http://93.184.216.34/",
            "http://[2606:2800:220:1:248:1893:25c8:1946]/",
            "http://[2002:5db8:d822::]/",
        ] {
            assert_eq!(check_url(&url(good), &p), Ok(()), "{good}");
        }
        for scheme in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/"] {
            assert_eq!(
                check_url(&url(scheme), &p),
                Err(Refused::Scheme),
                "{scheme}"
            );
        }
    }

    #[test]
    fn the_operator_allows_exact_hosts_or_the_whole_private_network() {
        let p = WebFetchPolicy {
            allowed_hostnames: vec!["127.0.0.1".into()],
            ..WebFetchPolicy::default()
        };
        assert_eq!(check_url(&url("http://127.0.0.1:9/"), &p), Ok(()));
        assert_eq!(
            check_url(&url("http://localhost:9/"), &p),
            Err(Refused::Blocked)
        );
        let all = WebFetchPolicy {
            allow_private_network: true,
            ..WebFetchPolicy::default()
        };
        assert_eq!(check_url(&url("http://localhost:9/"), &all), Ok(()));
        assert_eq!(check_url(&url("file:///x"), &all), Err(Refused::Scheme));
    }
}
