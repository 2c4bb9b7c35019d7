//! The reaper: a small process between the worker and an `exec` command that makes sure
//! every process the command starts dies with it. A process group is not enough (`setsid`
//! leaves it, `cmd &` outlives its shell), so the reaper uses the kernel's child subreaper:
//! every descendant that is orphaned is re-parented to the reaper, never to init.
//!
//! - It is a subreaper, and it gets SIGTERM when the worker thread that started it dies
//!   (parent-death signal), so a SIGKILLed worker still takes its commands with it.
//! - When the command exits, or on SIGTERM / SIGINT / SIGHUP, it stops (SIGSTOP, so nothing
//!   can fork meanwhile) and then kills every process below it, repeating until it has no
//!   child left, and exits with the command's status (128 + signal for a signal).
//!
//! The worker runs it as `loopgate-worker --exec-reaper <worker pid> -- <program> <args...>`.

use std::collections::HashMap;
use std::ffi::OsString;

use nix::errno::Errno;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The first argument that selects reaper mode in the worker binary.
pub const FLAG: &str = "--exec-reaper";

/// Exit code when the command cannot be started (as a shell's "not found").
const CANNOT_START: i32 = 127;
/// Most rounds of stop-and-kill before giving up on a process tree that keeps growing.
const MAX_ROUNDS: usize = 1000;

/// Runs the reaper; `args` are what follows [`FLAG`]: the parent pid, `--`, the command.
pub fn main(args: &[OsString]) -> i32 {
    let (parent, command) = match args {
        [pid, sep, command @ ..] if sep == "--" && !command.is_empty() => {
            match pid.to_str().and_then(|p| p.parse::<i32>().ok()) {
                Some(p) => (p, command),
                None => return usage(),
            }
        }
        _ => return usage(),
    };
    if nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).is_err()
        || nix::unistd::getppid().as_raw() != parent
    {
        // The worker is already gone: run nothing.
        return 125;
    }
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("loopgate exec: cannot become a subreaper: {e}");
        return 125;
    }
    let mut signals = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        signals.add(s);
    }
    // Blocked before the command starts, so none is lost; the standard library gives the
    // command an empty signal mask.
    if signals.thread_block().is_err() {
        return 125;
    }
    let child = match std::process::Command::new(&command[0])
        .args(&command[1..])
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "loopgate exec: cannot run {}: {e}",
                command[0].to_string_lossy()
            );
            return CANNOT_START;
        }
    };
    let main = Pid::from_raw(child.id() as i32);
    loop {
        let Ok(sig) = signals.wait() else {
            kill_all();
            return 125;
        };
        if sig != Signal::SIGCHLD {
            kill_all();
            return 128 + sig as i32;
        }
        if let Some(code) = reap_until(main) {
            kill_all();
            return code;
        }
    }
}

fn usage() -> i32 {
    eprintln!("usage: loopgate-worker {FLAG} <parent pid> -- <program> [args...]");
    2
}

/// Reaps every child that has exited; the exit code of `main` if it was among them.
fn reap_until(main: Pid) -> Option<i32> {
    let mut code = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, c)) if pid == main => code = Some(c),
            Ok(WaitStatus::Signaled(pid, s, _)) if pid == main => code = Some(128 + s as i32),
            Ok(WaitStatus::StillAlive) | Err(_) => return code,
            Ok(_) => {}
        }
    }
}

/// Stops, then kills, every process below this one, until none is left.
fn kill_all() {
    let me = nix::unistd::getpid();
    for _ in 0..MAX_ROUNDS {
        let below = descendants(me);
        if below.is_empty() {
            // Reap what is left; a live child not in /proc yet is found by the next scan.
            if waitpid(None, Some(WaitPidFlag::WNOHANG)) == Err(Errno::ECHILD) {
                return;
            }
            continue;
        }
        for &p in &below {
            let _ = kill(p, Signal::SIGSTOP);
        }
        for &p in &below {
            let _ = kill(p, Signal::SIGKILL);
        }
        // Every direct child was killed, so this returns; orphaned grandchildren come to
        // this process and are found by the next scan.
        let _ = waitpid(None, None);
        while matches!(
            waitpid(None, Some(WaitPidFlag::WNOHANG)),
            Ok(s) if s != WaitStatus::StillAlive
        ) {}
    }
}

/// Every live process whose ancestry leads to `root`, from `/proc`.
pub fn descendants(root: Pid) -> Vec<Pid> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, ppid)) = parse_stat(&stat) {
            if state != 'Z' && state != 'X' {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root.as_raw()];
    while let Some(p) = todo.pop() {
        if let Some(kids) = children.remove(&p) {
            out.extend(kids.iter().map(|&k| Pid::from_raw(k)));
            todo.extend(kids);
        }
    }
    out
}

/// State and parent pid from a `/proc/<pid>/stat` line (the command name may hold spaces and
/// parentheses, so fields are counted after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines() {
        assert_eq!(parse_stat("42 (a) b) c) S 7 42 42 0 -1"), Some(('S', 7)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_its_children_as_descendants() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let below = descendants(nix::unistd::getpid());
        assert!(below.contains(&Pid::from_raw(child.id() as i32)));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
