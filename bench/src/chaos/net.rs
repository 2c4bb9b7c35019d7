//! The hosts' network: one network namespace per host on a bridge in this one, so that a
//! host can be cut off (its bridge port down) or made lossy (`tc netem` on both ends of its
//! link, or, on a kernel without `sch_netem`, iptables' `statistic` match dropping packets at
//! random on the host's link) while its processes keep running. Needs root (`ip`, `tc`, and
//! `iptables` where there is no netem); removed when dropped.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

/// The bridge, the namespaces and their links, named after this process so runs side by
/// side do not collide (interface names stay within Linux's 15 bytes).
pub struct Net {
    tag: String,
    subnet: String,
    hosts: usize,
    /// Links flapping in place of `netem` loss, with their stop flags.
    flapping: Vec<(usize, Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
}

/// A flapping link's rhythm: down, then up.
const FLAP: (Duration, Duration) = (Duration::from_millis(400), Duration::from_millis(300));

/// The iptables tried for random loss, in order (the legacy one needs no nf_tables).
const IPTABLES: [&str; 2] = ["iptables-legacy", "iptables"];

fn ip(args: &[&str]) -> anyhow::Result<()> {
    run("ip", args)
}

fn run(cmd: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {cmd} (the chaos run needs iproute2 and root)"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Net {
    /// `hosts` namespaces, each with `lo` and `eth0` up on the bridge.
    pub fn create(hosts: usize) -> anyhow::Result<Net> {
        let id = std::process::id();
        let net = Net {
            tag: format!("lgc{}", id % 100_000),
            subnet: format!("10.77.{}", 20 + id % 200),
            hosts: 0,
            flapping: Vec::new(),
        };
        let br = net.bridge();
        ip(&["link", "add", &br, "type", "bridge"])?;
        let mut net = net;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", net.gateway_ip()),
            "dev",
            &br,
        ])?;
        ip(&["link", "set", &br, "up"])?;
        for i in 0..hosts {
            let (ns, port) = (net.ns(i), net.port(i));
            ip(&["netns", "add", &ns])?;
            net.hosts = i + 1;
            ip(&[
                "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &port, "master", &br, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let addr = format!("{}/24", net.host_ip(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(net)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    fn port(&self, i: usize) -> String {
        format!("{}v{}", self.tag, i + 1)
    }

    /// The namespace of host `i`.
    pub fn ns(&self, i: usize) -> String {
        format!("{}-h{}", self.tag, i + 1)
    }

    /// This namespace's address on the bridge (the model and the driver live here).
    pub fn gateway_ip(&self) -> String {
        format!("{}.1", self.subnet)
    }

    pub fn host_ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 11 + i)
    }

    /// Cuts host `i` off: its bridge port goes down, so nothing reaches it or leaves it
    /// (open connections hang, as across a real partition).
    pub fn cut(&self, i: usize) -> anyhow::Result<()> {
        ip(&["link", "set", &self.port(i), "down"])
    }

    /// Makes host `i`'s link lossy: `netem` loss of `percent` in both directions; where the
    /// kernel has no `netem` (no `sch_netem`), the same random loss by iptables; where
    /// neither exists, the link flapping down and up. Returns what it did.
    pub fn lossy(&mut self, i: usize, percent: u32) -> anyhow::Result<&'static str> {
        if self.netem(i, percent).is_ok() {
            return Ok("netem");
        }
        if let Some(iptables) = self.random_drop(i, percent) {
            return Ok(iptables);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (port, flag) = (self.port(i), stop.clone());
        let flapper = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                let _ = ip(&["link", "set", &port, "down"]);
                std::thread::sleep(FLAP.0);
                let _ = ip(&["link", "set", &port, "up"]);
                std::thread::sleep(FLAP.1);
            }
        });
        self.flapping.push((i, stop, flapper));
        Ok("flapping")
    }

    fn netem(&self, i: usize, percent: u32) -> anyhow::Result<()> {
        let loss = format!("{percent}%");
        let netem = ["root", "netem", "loss", &loss, "delay", "20ms", "10ms"];
        let port = self.port(i);
        let mut outer = vec!["qdisc", "add", "dev", &port];
        outer.extend(netem);
        run("tc", &outer)?;
        let ns = self.ns(i);
        let mut inner = vec!["-n", &ns, "qdisc", "add", "dev", "eth0"];
        inner.extend(netem);
        run("tc", &inner)
    }

    /// Drops `percent` of the packets in and out of host `i`'s link (not its loopback, as
    /// netem on the link would), by iptables' `statistic` match in the host's namespace.
    /// Returns the iptables used, or `None` when none works here.
    fn random_drop(&self, i: usize, percent: u32) -> Option<&'static str> {
        let ns = self.ns(i);
        let p = format!("{:.2}", f64::from(percent) / 100.0);
        for iptables in IPTABLES {
            let rule = |chain: &str, dir: &str| {
                run(
                    "ip",
                    &[
                        "netns",
                        "exec",
                        &ns,
                        iptables,
                        "-A",
                        chain,
                        dir,
                        "eth0",
                        "-m",
                        "statistic",
                        "--mode",
                        "random",
                        "--probability",
                        &p,
                        "-j",
                        "DROP",
                    ],
                )
            };
            if rule("INPUT", "-i").is_ok() {
                if rule("OUTPUT", "-o").is_ok() {
                    return Some(iptables);
                }
                let _ = run("ip", &["netns", "exec", &ns, iptables, "-F"]);
            }
        }
        None
    }

    /// Undoes [`Net::cut`] and [`Net::lossy`] on host `i`.
    pub fn heal(&mut self, i: usize) -> anyhow::Result<()> {
        let (flapping, others) = std::mem::take(&mut self.flapping)
            .into_iter()
            .partition(|(host, _, _)| *host == i);
        self.flapping = others;
        for (_, stop, flapper) in flapping {
            stop.store(true, Ordering::SeqCst);
            let _ = flapper.join();
        }
        let (port, ns) = (self.port(i), self.ns(i));
        // Absent qdiscs are fine: only one of the two faults was applied.
        let _ = run("tc", &["qdisc", "del", "dev", &port, "root"]);
        let _ = run("tc", &["-n", &ns, "qdisc", "del", "dev", "eth0", "root"]);
        for iptables in IPTABLES {
            let _ = run("ip", &["netns", "exec", &ns, iptables, "-F"]);
        }
        ip(&["link", "set", &port, "up"])
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (_, stop, flapper) in std::mem::take(&mut self.flapping) {
            stop.store(true, Ordering::SeqCst);
            let _ = flapper.join();
        }
        for i in 0..self.hosts {
            let _ = ip(&["netns", "del", &self.ns(i)]);
            // Deleting one end deletes the pair (already gone with a freed namespace).
            let _ = ip(&["link", "del", &self.port(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}
