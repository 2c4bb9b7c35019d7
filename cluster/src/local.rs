//! Real NATS servers on loopback, clustered with JetStream, for tests and demos: the
//! `nats-server` that `scripts/install-nats` installs (or `$LOOPGATE_NATS_SERVER`).
//! Ports are picked free at start; readiness is each server's `/healthz` (JetStream up and
//! in contact with a meta leader), never a sleep.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to become healthy.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The `nats-server` binary: `$LOOPGATE_NATS_SERVER`, else the one `scripts/install-nats`
/// put under the workspace's `target/tools`, else `nats-server` on `PATH`.
pub fn server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("LOOPGATE_NATS_SERVER") {
        return PathBuf::from(p);
    }
    let installed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/nats/bin/nats-server");
    if installed.exists() {
        return installed;
    }
    PathBuf::from("nats-server")
}

/// One server of a [`LocalCluster`].
pub struct Server {
    pub name: String,
    pub client_port: u16,
    pub cluster_port: u16,
    pub monitor_port: u16,
    child: Option<Child>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.client_port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// `n` NATS servers in one JetStream cluster, stopped when dropped.
pub struct LocalCluster {
    dir: PathBuf,
    /// Clients must present this token (`--auth`), if set.
    token: Option<String>,
    pub servers: Vec<Server>,
}

impl LocalCluster {
    /// Starts `n` servers keeping their data under `dir` and waits until all are healthy.
    pub fn start(n: usize, dir: &Path) -> Result<LocalCluster, String> {
        Self::start_with(n, dir, None)
    }

    /// Like [`LocalCluster::start`]; with `token`, clients must present it.
    pub fn start_with(n: usize, dir: &Path, token: Option<&str>) -> Result<LocalCluster, String> {
        let mut last = String::new();
        // A picked port can be taken by someone else before the server binds it: start
        // again with other ports.
        for _ in 0..3 {
            let ports = free_ports(3 * n)?;
            let servers = (0..n)
                .map(|i| Server {
                    name: format!("n{}", i + 1),
                    client_port: ports[3 * i],
                    cluster_port: ports[3 * i + 1],
                    monitor_port: ports[3 * i + 2],
                    child: None,
                })
                .collect();
            let mut c = LocalCluster {
                dir: dir.to_owned(),
                token: token.map(str::to_owned),
                servers,
            };
            for i in 0..n {
                c.spawn(i)?;
            }
            match c.wait_ready() {
                Ok(()) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(Server::url).collect()
    }

    /// The client URLs as the items of a TOML array (`cluster.nats = [..]` of a gateway).
    pub fn urls_toml(&self) -> String {
        self.urls()
            .iter()
            .map(|u| format!("{u:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let routes = self
            .servers
            .iter()
            .map(|s| format!("nats://127.0.0.1:{}", s.cluster_port))
            .collect::<Vec<_>>()
            .join(",");
        let s = &mut self.servers[i];
        let store = self.dir.join(&s.name);
        std::fs::create_dir_all(&store).map_err(|e| format!("{}: {e}", store.display()))?;
        let log = std::fs::File::create(self.dir.join(format!("{}.log", s.name)))
            .map_err(|e| format!("log of {}: {e}", s.name))?;
        let bin = server_binary();
        let mut cmd = Command::new(&bin);
        if let Some(token) = &self.token {
            cmd.args(["--auth", token]);
        }
        let ports = (s.client_port, s.monitor_port, s.cluster_port);
        let args = server_args(&s.name, "127.0.0.1", ports, &store, &routes)
            .map_err(|e| format!("config of {}: {e}", s.name))?;
        let child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} ({e}); install it with scripts/install-nats or set LOOPGATE_NATS_SERVER",
                    bin.display()
                )
            })?;
        s.child = Some(child);
        Ok(())
    }

    /// Waits until every running server says it is healthy.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_WITHIN;
        for s in &mut self.servers {
            let Some(child) = s.child.as_mut() else {
                continue;
            };
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("nats server {} exited: {status}", s.name));
                }
                if healthy(s.monitor_port) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "nats server {} not healthy within {READY_WITHIN:?}",
                        s.name
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// SIGKILLs server `i` (its data stays for [`LocalCluster::restart`]).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers.get_mut(i).and_then(|s| s.child.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts server `i` again on its ports and data and waits until it is healthy.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.kill(i);
        self.spawn(i)?;
        self.wait_ready()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
    }
}

/// The arguments of one JetStream server of the `loopgate` cluster: `name` listening on
/// `host` at `(client, monitor, cluster)` ports, its data under `store`, `routes` the
/// comma-separated cluster URLs of every server. Writes [`FAILURE_DETECTION`] as a config
/// file under `store`, which the arguments name.
pub fn server_args(
    name: &str,
    host: &str,
    (client, monitor, cluster): (u16, u16, u16),
    store: &Path,
    routes: &str,
) -> std::io::Result<Vec<std::ffi::OsString>> {
    // The failure detection every server of a loopgate cluster should have, as a config
    // file beside the server's data (flags given after it add to it).
    let conf = store.join("failure-detection.conf");
    std::fs::write(&conf, FAILURE_DETECTION)?;
    let mut args: Vec<std::ffi::OsString> = vec!["-c".into(), conf.into_os_string()];
    for a in [
        "-a",
        host,
        "-p",
        &client.to_string(),
        "-m",
        &monitor.to_string(),
    ] {
        args.push(a.into());
    }
    args.extend(["-js".into(), "-sd".into(), store.as_os_str().to_owned()]);
    for a in ["-n", name, "--cluster_name", "loopgate", "--cluster"] {
        args.push(a.into());
    }
    args.push(format!("nats://{host}:{cluster}").into());
    args.extend(["--routes".into(), routes.into()]);
    Ok(args)
}

/// The NATS server settings a loopgate cluster needs to notice a dead or cut-off peer in
/// seconds (`deploy/nats-failure-detection.conf`, shipped for operators too).
pub const FAILURE_DETECTION: &str = include_str!("../../deploy/nats-failure-detection.conf");

/// Ports free on loopback now (held together while picked so they differ).
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free port: {e}"))?;
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free port: {e}"))
}

/// `GET /healthz` answers 200.
fn healthy(port: u16) -> bool {
    healthy_at("127.0.0.1", port)
}

/// Whether the server monitored at `host:port` says it is healthy (JetStream in contact
/// with a meta leader).
pub fn healthy_at(host: &str, port: u16) -> bool {
    monitor_get(host, port, "/healthz").is_some_and(|(status, _)| status == 200)
}

/// `GET path` of the monitoring endpoint at `host:port` parsed as JSON (`/jsz`, `/varz`).
pub fn monitor_json(host: &str, port: u16, path: &str) -> Option<serde_json::Value> {
    let (status, body) = monitor_get(host, port, path)?;
    (status == 200).then(|| serde_json::from_slice(&body).ok())?
}

/// The status and body of `GET path` on a monitoring endpoint.
fn monitor_get(host: &str, port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect((host, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let status = std::str::from_utf8(out.get(9..12)?).ok()?.parse().ok()?;
    let body = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(Vec::new(), |at| out[at + 4..].to_vec());
    Some((status, body))
}
