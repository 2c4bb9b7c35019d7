//! `[cluster]`: the raw section as the config file has it, and its validated form.

use std::time::Duration;

use serde::Deserialize;

/// Default placement lease: an agent whose owner stops renewing moves after this long.
pub const DEFAULT_LEASE_TTL_SECONDS: u64 = 5;
/// Default copies of every stream and bucket (RAFT replicas): three survive one lost server.
pub const DEFAULT_REPLICAS: usize = 3;

/// `[cluster]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {
    /// NATS servers to connect to (any members; the client learns the rest).
    pub nats: Vec<String>,
    /// This gateway's name in the cluster: unique and stable across restarts.
    pub node: String,
    /// How long an agent's placement lease lasts without renewal.
    pub lease_ttl_seconds: Option<u64>,
    /// Copies of each stream and bucket (1 for a one-server test cluster).
    pub replicas: Option<usize>,
}

/// `[cluster]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub nats: Vec<String>,
    pub node: String,
    pub lease_ttl: Duration,
    pub replicas: usize,
}

impl RawSettings {
    /// The section as a gateway can use it, or what is wrong with it (naming the key).
    pub fn validate(&self) -> Result<Settings, String> {
        if self.nats.is_empty() {
            return Err("cluster.nats: list at least one NATS server URL".into());
        }
        for url in &self.nats {
            check_url(url).map_err(|why| format!("cluster.nats: {url:?}: {why}"))?;
        }
        crate::names::check_name(&self.node).map_err(|why| format!("cluster.node: {why}"))?;
        let ttl = self.lease_ttl_seconds.unwrap_or(DEFAULT_LEASE_TTL_SECONDS);
        if !(2..=300).contains(&ttl) {
            return Err(format!(
                "cluster.lease_ttl_seconds: {ttl} is outside 2..=300 (an owner renews three times per lease)"
            ));
        }
        let replicas = self.replicas.unwrap_or(DEFAULT_REPLICAS);
        if !(1..=5).contains(&replicas) {
            return Err(format!(
                "cluster.replicas: {replicas} is outside 1..=5 (JetStream keeps at most 5 copies)"
            ));
        }
        Ok(Settings {
            nats: self.nats.clone(),
            node: self.node.clone(),
            lease_ttl: Duration::from_secs(ttl),
            replicas,
        })
    }
}

/// A NATS server URL the client can dial: `nats://` or `tls://` (or a bare `host:port`),
/// with a host and a port.
fn check_url(url: &str) -> Result<(), String> {
    let rest = match url.split_once("://") {
        Some(("nats" | "tls", rest)) => rest,
        Some((scheme, _)) => return Err(format!("scheme {scheme:?} is not nats or tls")),
        None => url,
    };
    let host_port = rest.rsplit_once('@').map_or(rest, |(_, hp)| hp);
    let Some((host, port)) = host_port.rsplit_once(':') else {
        return Err("expected host:port".into());
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(format!("port {port:?} is not a port number")),
    }
    url.parse::<async_nats::ServerAddr>()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(nats: &[&str], node: &str) -> RawSettings {
        RawSettings {
            nats: nats.iter().map(|s| (*s).to_owned()).collect(),
            node: node.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_usable_section_gets_its_defaults() {
        let s = raw(&["nats://127.0.0.1:4222", "127.0.0.1:4223"], "h1")
            .validate()
            .unwrap();
        assert_eq!(s.lease_ttl, Duration::from_secs(5));
        assert_eq!(s.replicas, 3);
    }

    #[test]
    fn an_unusable_section_is_refused_naming_the_key() {
        let cases = [
            (raw(&[], "h1"), "cluster.nats"),
            (raw(&["http://x:1"], "h1"), "cluster.nats"),
            (raw(&["nats://x"], "h1"), "cluster.nats"),
            (raw(&["nats://x:0"], "h1"), "cluster.nats"),
            (raw(&["nats://x:1"], ""), "cluster.node"),
            (raw(&["nats://x:1"], "h.1"), "cluster.node"),
            (raw(&["nats://x:1"], "h 1"), "cluster.node"),
            (
                RawSettings {
                    lease_ttl_seconds: Some(1),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.lease_ttl_seconds",
            ),
            (
                RawSettings {
                    replicas: Some(0),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.replicas",
            ),
        ];
        for (section, key) in cases {
            let err = section.validate().unwrap_err();
            assert!(err.starts_with(key), "{err}");
        }
    }
}
