//! `[cluster]`: the raw section as the config file has it, and its validated form.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Default placement lease: an agent whose owner stops renewing moves after this long.
pub const DEFAULT_LEASE_TTL_SECONDS: u64 = 5;
/// Default cap on a workspace that moves with its agent, in MiB.
pub const DEFAULT_WORKSPACE_MAX_MIB: u64 = 64;
/// Default copies of every stream and bucket (RAFT replicas): three survive one lost server.
pub const DEFAULT_REPLICAS: usize = 3;

/// `[cluster]` as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
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
    /// The largest workspace (MiB of files) snapshotted to move with its agent.
    pub workspace_max_mib: Option<u64>,
    /// The environment variable holding the NATS servers' token (`--auth`).
    pub token_env: Option<String>,
    /// A NATS credentials file (user JWT and NKEY seed).
    pub credentials_file: Option<PathBuf>,
    /// The CA that signs the servers' certificates (`tls://` URLs).
    pub tls_ca_file: Option<PathBuf>,
}

/// `[cluster]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub nats: Vec<String>,
    pub node: String,
    pub lease_ttl: Duration,
    pub replicas: usize,
    pub workspace_max_bytes: u64,
    pub auth: Auth,
}

/// How a gateway proves itself to the NATS servers.
#[derive(Clone, Default, PartialEq)]
pub struct Auth {
    /// The name of the environment variable with the token (its value is read at connect).
    pub token_env: Option<String>,
    pub credentials_file: Option<PathBuf>,
    pub tls_ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names and paths only: the token itself is never here.
        f.debug_struct("Auth")
            .field("token_env", &self.token_env)
            .field("credentials_file", &self.credentials_file)
            .field("tls_ca_file", &self.tls_ca_file)
            .finish()
    }
}

/// What `[cluster]` refuses: the key and what is wrong with its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct SettingsError {
    pub key: &'static str,
    pub problem: String,
}

impl SettingsError {
    fn new(key: &'static str, problem: String) -> SettingsError {
        SettingsError { key, problem }
    }
}

impl RawSettings {
    /// The section as a gateway can use it, or what is wrong with it (naming the key).
    pub fn validate(&self) -> Result<Settings, SettingsError> {
        let refuse = SettingsError::new;
        if self.nats.is_empty() {
            return Err(refuse(
                "cluster.nats",
                "list at least one NATS server URL".into(),
            ));
        }
        for url in &self.nats {
            check_url(url).map_err(|why| refuse("cluster.nats", format!("{url:?}: {why}")))?;
        }
        crate::names::check_name(&self.node).map_err(|why| refuse("cluster.node", why))?;
        let ttl = self.lease_ttl_seconds.unwrap_or(DEFAULT_LEASE_TTL_SECONDS);
        if !(2..=300).contains(&ttl) {
            return Err(refuse(
                "cluster.lease_ttl_seconds",
                format!("{ttl} is outside 2..=300 (an owner renews three times per lease)"),
            ));
        }
        let replicas = self.replicas.unwrap_or(DEFAULT_REPLICAS);
        if !(1..=5).contains(&replicas) {
            return Err(refuse(
                "cluster.replicas",
                format!("{replicas} is outside 1..=5 (JetStream keeps at most 5 copies)"),
            ));
        }
        let workspace_mib = self.workspace_max_mib.unwrap_or(DEFAULT_WORKSPACE_MAX_MIB);
        if !(1..=4096).contains(&workspace_mib) {
            return Err(refuse(
                "cluster.workspace_max_mib",
                format!("{workspace_mib} is outside 1..=4096"),
            ));
        }
        if let Some(name) = &self.token_env {
            let ok =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(refuse(
                    "cluster.token_env",
                    format!("{name:?} is not an environment variable name"),
                ));
            }
        }
        for (key, path) in [
            ("cluster.credentials_file", &self.credentials_file),
            ("cluster.tls_ca_file", &self.tls_ca_file),
        ] {
            if let Some(p) = path.as_ref().filter(|p| !p.is_absolute()) {
                return Err(refuse(
                    key,
                    format!("{} is not an absolute path", p.display()),
                ));
            }
        }
        Ok(Settings {
            nats: self.nats.clone(),
            node: self.node.clone(),
            lease_ttl: Duration::from_secs(ttl),
            replicas,
            workspace_max_bytes: workspace_mib * 1024 * 1024,
            auth: Auth {
                token_env: self.token_env.clone(),
                credentials_file: self.credentials_file.clone(),
                tls_ca_file: self.tls_ca_file.clone(),
            },
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
        assert_eq!(s.workspace_max_bytes, 64 << 20);
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
                    token_env: Some("A-B".into()),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.token_env",
            ),
            (
                RawSettings {
                    credentials_file: Some("rel.creds".into()),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.credentials_file",
            ),
            (
                RawSettings {
                    lease_ttl_seconds: Some(1),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.lease_ttl_seconds",
            ),
            (
                RawSettings {
                    workspace_max_mib: Some(0),
                    ..raw(&["nats://x:1"], "h1")
                },
                "cluster.workspace_max_mib",
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
            assert_eq!(err.key, key, "{err}");
        }
    }
}
