//! CPU time and RSS of the gateway's processes, from `/proc`.

use std::collections::HashMap;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)` is 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// (utime + stime) in seconds, and RSS in bytes, of `pid`.
pub fn sample(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state is index 0, utime 11, stime 12, rss (pages) 21.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let rss_pages: u64 = fields.get(21)?.parse().ok()?;
    Some(((utime + stime) / TICKS_PER_SEC, rss_pages * 4096))
}

/// All processes of a gateway: the supervisor and its children (workers).
pub fn family(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(root) {
                out.push(pid);
            }
        }
    }
    out
}

/// CPU seconds and RSS per pid for the family of `root`.
pub fn snapshot(root: u32) -> HashMap<u32, (f64, u64)> {
    family(root)
        .into_iter()
        .filter_map(|p| sample(p).map(|s| (p, s)))
        .collect()
}

/// Total CPU seconds used between two snapshots (processes that appeared count from 0).
pub fn cpu_between(before: &HashMap<u32, (f64, u64)>, after: &HashMap<u32, (f64, u64)>) -> f64 {
    after
        .iter()
        .map(|(pid, (cpu, _))| cpu - before.get(pid).map(|b| b.0).unwrap_or(0.0))
        .sum()
}

pub fn total_rss(s: &HashMap<u32, (f64, u64)>) -> u64 {
    s.values().map(|(_, rss)| rss).sum()
}
