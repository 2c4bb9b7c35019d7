//! The hosts: in each namespace a `nats-server` (one JetStream cluster over the bridge) and
//! a `loopgate serve` in cluster mode, each with its own data that outlives a kill, so a
//! killed host comes back as a rebooted one would.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::net::Net;

const NATS_CLIENT: u16 = 4222;
const NATS_ROUTE: u16 = 6222;
const NATS_MONITOR: u16 = 8222;
const GATEWAY_PORT: u16 = 18789;
/// Longest wait for a server or a gateway to come up.
const UP_WITHIN: Duration = Duration::from_secs(60);

/// What every host runs with.
pub struct Setup {
    pub loopgate: PathBuf,
    pub nats_server: PathBuf,
    pub dir: PathBuf,
    pub model_url: String,
    pub agents: Vec<String>,
    pub token: String,
    pub lease_ttl: u64,
}

pub struct Host {
    pub index: usize,
    pub ip: String,
    state: PathBuf,
    nats: Option<Child>,
    gateway: Option<Child>,
}

impl Host {
    pub fn node(&self) -> String {
        format!("h{}", self.index + 1)
    }

    /// The gateway's local socket: the clients are on the host (over the bridge a client
    /// without a paired device would have no scopes), so a cut host keeps its clients and
    /// a killed one refuses them.
    pub fn url(&self) -> String {
        format!("unix:{}", self.state.join("gateway.sock").display())
    }

    pub fn nats_url(&self) -> String {
        format!("nats://{}:{NATS_CLIENT}", self.ip)
    }

    /// Starts this host's NATS server (a lone server is healthy only once a quorum of the
    /// cluster is up: see [`Host::wait_nats`]).
    pub fn start_nats(&mut self, net: &Net, setup: &Setup, all: &[String]) -> anyhow::Result<()> {
        let ns = net.ns(self.index);
        let store = setup.dir.join(format!("nats{}", self.index + 1));
        std::fs::create_dir_all(&store)?;
        let routes = all
            .iter()
            .map(|ip| format!("nats://{ip}:{NATS_ROUTE}"))
            .collect::<Vec<_>>()
            .join(",");
        // Appended: a restarted host's earlier lives stay readable after the run.
        let log = append(&setup.dir.join(format!("{}-nats.log", self.node())))?;
        let name = format!("n{}", self.index + 1);
        let ports = (NATS_CLIENT, NATS_MONITOR, NATS_ROUTE);
        let nats = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(&setup.nats_server)
            .args(cluster::local::server_args(
                &name, &self.ip, ports, &store, &routes,
            )?)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start nats-server")?;
        self.nats = Some(nats);
        Ok(())
    }

    /// Waits until this host's NATS server is healthy.
    pub fn wait_nats(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + UP_WITHIN;
        while !cluster::local::healthy_at(&self.ip, NATS_MONITOR) {
            if let Some(n) = self.nats.as_mut() {
                if let Ok(Some(status)) = n.try_wait() {
                    bail!("nats server of {} exited ({status})", self.node());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "nats server of {} not healthy within {UP_WITHIN:?}",
                    self.node()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Starts this host's gateway and waits until it serves.
    pub fn start_gateway(
        &mut self,
        net: &Net,
        setup: &Setup,
        all: &[String],
    ) -> anyhow::Result<()> {
        let ns = net.ns(self.index);
        let state = self.state.clone();
        std::fs::create_dir_all(&state)?;
        set_private(&state)?;
        std::fs::write(state.join("loopgate.toml"), self.config(setup, all))?;
        let log_path = setup.dir.join(format!("{}-gateway.log", self.node()));
        let log = append(&log_path)?;
        let gateway = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(&setup.loopgate)
            .arg("serve")
            .arg("--state-dir")
            .arg(&state)
            .env("LOOPGATE_CHAOS_KEY", self.node())
            .env("LOOPGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start loopgate serve")?;
        self.gateway = Some(gateway);
        self.wait_ready(&log_path)
    }

    fn config(&self, setup: &Setup, all: &[String]) -> String {
        let nats = all
            .iter()
            .map(|ip| format!("\"nats://{ip}:{NATS_CLIENT}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let mut c = format!(
            "[gateway]\nbind = \"{ip}\"\nport = {GATEWAY_PORT}\n\n[gateway.auth]\ntoken = \"{token}\"\n\n\
             [agents.defaults]\nmodel = \"scripted/scripted-1\"\nskip_bootstrap = true\n\n\
             [models.providers.scripted]\napi = \"openai-completions\"\nbase_url = \"{model}\"\n\
             # The key names the host: the model sees which host made each request.\n\
             api_key_env = \"LOOPGATE_CHAOS_KEY\"\n\n\
             [cluster]\nnats = [{nats}]\nnode = \"{node}\"\nlease_ttl_seconds = {ttl}\n",
            ip = self.ip,
            token = setup.token,
            model = setup.model_url,
            node = self.node(),
            ttl = setup.lease_ttl,
        );
        for a in setup.agents.iter().filter(|a| a.as_str() != "main") {
            c.push_str(&format!("\n[agents.list.{a}]\n"));
        }
        c
    }

    fn wait_ready(&mut self, log: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + UP_WITHIN;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("Gateway ready.") {
                return Ok(());
            }
            if let Some(g) = self.gateway.as_mut() {
                if let Ok(Some(status)) = g.try_wait() {
                    bail!("{} exited ({status}); see {}", self.node(), log.display());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not ready within {UP_WITHIN:?}; see {}",
                    self.node(),
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILLs the host's processes: the gateway with its workers, and its NATS server.
    pub fn kill(&mut self) {
        if let Some(mut g) = self.gateway.take() {
            for pid in crate::procs::family(g.id()) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            let _ = g.wait();
        }
        if let Some(mut n) = self.nats.take() {
            let _ = n.kill();
            let _ = n.wait();
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn hosts(net: &Net, setup: &Setup, n: usize) -> Vec<Host> {
    (0..n)
        .map(|index| Host {
            index,
            ip: net.host_ip(index),
            state: setup.dir.join(format!("h{}", index + 1)),
            nats: None,
            gateway: None,
        })
        .collect()
}

fn set_private(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// `path` opened to append to (made if missing).
fn append(path: &std::path::Path) -> std::io::Result<File> {
    File::options().create(true).append(true).open(path)
}
