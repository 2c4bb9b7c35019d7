//! The last resort of a stop: every process below a reaper, found by walking `/proc` from
//! its pid, stopped and then killed. A reaper that the command itself stopped (`kill -STOP
//! $PPID`) cannot run its own kill round, and a child that left the process group
//! (`setsid`) is not reached by a group kill; both are still the reaper's descendants.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Rounds of look-and-stop: a process forked during one is found by the next.
const ROUNDS: usize = 8;

/// Stops, then kills, every process below `reaper`, then the reaper's group.
pub fn kill_below(reaper: u32) {
    let Ok(root) = i32::try_from(reaper) else {
        return;
    };
    let mut found: Vec<i32> = Vec::new();
    for _ in 0..ROUNDS {
        let now = execpolicy::reaper::descendants(Pid::from_raw(root));
        let fresh: Vec<i32> = now
            .into_iter()
            .map(Pid::as_raw)
            .filter(|p| !found.contains(p))
            .collect();
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
