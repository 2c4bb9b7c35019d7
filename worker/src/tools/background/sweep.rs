//! The last resort of a stop: every process below a reaper, found by walking `/proc` from
//! its pid, stopped and then killed. A reaper that the command itself stopped (`kill -STOP
//! $PPID`) cannot run its own kill round, and a child that left the process group
//! (`setsid`) is not reached by a group kill; both are still the reaper's descendants.

use std::collections::HashMap;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Rounds of look-and-stop: a process forked during one is found by the next.
const ROUNDS: usize = 8;

/// `pid → parent pid` of every process now.
fn parents() -> HashMap<i32, i32> {
    let mut map = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // `pid (comm) state ppid ...`: the command name may hold anything but ends at the
        // last `)`.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(ppid) = ppid {
            map.insert(pid, ppid);
        }
    }
    map
}

/// The processes below `root` now.
fn descendants(root: i32) -> Vec<i32> {
    let map = parents();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (&child, &parent) in &map {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Stops, then kills, every process below `reaper`, then the reaper's group.
pub fn kill_below(reaper: u32) {
    let Ok(root) = i32::try_from(reaper) else {
        return;
    };
    let mut found: Vec<i32> = Vec::new();
    for _ in 0..ROUNDS {
        let now = descendants(root);
        let fresh: Vec<i32> = now.into_iter().filter(|p| !found.contains(p)).collect();
        if fresh.is_empty() {
            break;
        }
        for p in &fresh {
            let _ = kill(Pid::from_raw(*p), Signal::SIGSTOP);
        }
        found.extend(fresh);
    }
    for p in &found {
        let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
    }
    hookcmd::GroupKill(Some(reaper)).kill();
}
