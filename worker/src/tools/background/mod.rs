//! Background `exec` sessions (`background`, `yieldMs`) and the `process` tool that follows
//! them up, as OpenClaw 2026.9.6 does (`tools-cron-2026.9.6.md` section 2).
//!
//! A session is a command run under the reaper like any `exec` (same policy, approvals and
//! environment), whose output a task of the worker keeps (the last [`KEPT_OUTPUT`] bytes)
//! while the run that started it goes on. Sessions belong to the agent's worker and are
//! bounded: [`MAX_RUNNING`] at once, [`MAX_KEPT`] remembered, each with a lifetime after
//! which it is stopped. When the worker ends, every command dies with its reaper; the
//! sessions that were running are in the agent's ledger (`exec-sessions.json`), so the next
//! worker reports them as stopped, never forgets them silently.

pub mod exec;
mod ledger;
pub mod process;
mod slug;
mod sweep;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::Notify;

/// Most sessions running at once in one worker.
pub const MAX_RUNNING: usize = 16;
/// Most sessions remembered (finished ones beyond it are forgotten, oldest first).
pub const MAX_KEPT: usize = 64;
/// Output kept per session: the latest bytes.
pub const KEPT_OUTPUT: usize = 256 * 1024;
/// Lifetime of a background command when the call names none.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The longest lifetime a call may ask for (also what `timeoutSeconds: 0` means).
pub const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long the reaper gets to stop a command before its group is SIGKILLed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long output is still read once the reaper has ended (a process that escaped it may
/// hold the pipes open for good).
const READ_GRACE: Duration = Duration::from_secs(2);
/// Most bytes one `process` call writes to a command's stdin.
pub const MAX_WRITE: usize = 64 * 1024;
/// How long a write to a command's stdin may wait for the command to read.
const WRITE_WAIT: Duration = Duration::from_secs(5);

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct End {
    pub code: Option<i32>,
    /// `SIGTERM`, …
    pub signal: Option<String>,
    /// `exit`, `signal`, `manual-cancel`, `timeout` or `worker-restart`.
    pub reason: String,
    pub ended_ms: u64,
}

impl End {
    /// OpenClaw's session status: `completed` for a clean exit, else `failed`.
    pub fn status(&self) -> &'static str {
        if self.reason == "exit" && self.code == Some(0) {
            "completed"
        } else {
            "failed"
        }
    }
}

/// What a session has produced so far.
#[derive(Debug, Default)]
struct Output {
    /// The latest bytes (at most [`KEPT_OUTPUT`]).
    kept: Vec<u8>,
    /// Bytes received in all.
    total: u64,
    /// Where the last `poll` stopped, as an offset into everything received.
    polled: u64,
    last_output_ms: Option<u64>,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) {
        self.kept.extend_from_slice(bytes);
        if self.kept.len() > KEPT_OUTPUT {
            let cut = self.kept.len() - KEPT_OUTPUT;
            self.kept.drain(..cut);
        }
        self.total += bytes.len() as u64;
        self.last_output_ms = Some(crate::now_ms());
    }

    /// Offset of `kept[0]` in everything received.
    fn first(&self) -> u64 {
        self.total - self.kept.len() as u64
    }

    /// What came since `from` (as far as it is kept), and how much of it was dropped.
    fn since(&self, from: u64) -> (&[u8], u64) {
        let first = self.first();
        let lost = first.saturating_sub(from);
        let start = usize::try_from(from.max(first) - first).unwrap_or(self.kept.len());
        (&self.kept[start.min(self.kept.len())..], lost)
    }
}

/// One background command.
pub struct Session {
    pub id: String,
    /// The reaper's pid, the leader of the command's process group.
    pub pid: u32,
    pub command: String,
    /// The command's first words, as lists show it.
    pub name: String,
    pub cwd: String,
    pub started_ms: u64,
    /// The chat session whose run started it.
    pub owner: String,
    output: Mutex<Output>,
    end: Mutex<Option<End>>,
    /// A `kill` asked for, so the end is `manual-cancel`.
    stop_asked: std::sync::atomic::AtomicBool,
    changed: Notify,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
}

impl Session {
    pub fn end(&self) -> Option<End> {
        self.end.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn status(&self) -> &'static str {
        self.end().map_or("running", |e| e.status())
    }

    pub fn has_stdin(&self) -> bool {
        self.end().is_none() && self.stdin.try_lock().map_or(true, |s| s.is_some())
    }

    fn output(&self) -> std::sync::MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Everything kept, as text, and whether older output was dropped.
    pub fn log(&self) -> (String, bool) {
        let out = self.output();
        (
            String::from_utf8_lossy(&out.kept).into_owned(),
            out.first() > 0,
        )
    }

    /// The last line of output.
    pub fn tail(&self) -> String {
        let (log, _) = self.log();
        log.trim_end()
            .lines()
            .last()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect()
    }

    pub fn last_output_ms(&self) -> Option<u64> {
        self.output().last_output_ms
    }

    /// What came since the last poll (at most `max` bytes, cut at a character), and how
    /// many bytes in between were no longer kept; the poll cursor moves past what is
    /// returned.
    pub fn take_new(&self, max: usize) -> (String, u64) {
        let mut out = self.output();
        let polled = out.polled;
        let (bytes, lost) = out.since(polled);
        let mut n = bytes.len().min(max);
        // Back to a character's start, at most 3 bytes: binary output still moves on.
        let floor = n.saturating_sub(3);
        while n < bytes.len() && n > floor && (bytes[n] & 0xC0) == 0x80 {
            n -= 1;
        }
        if n == floor && n < bytes.len() && (bytes[n] & 0xC0) == 0x80 {
            n = bytes.len().min(max);
        }
        let text = String::from_utf8_lossy(&bytes[..n]).into_owned();
        out.polled = polled + lost + n as u64;
        (text, lost)
    }

    /// Whether output came since the last poll.
    fn has_new(&self) -> bool {
        let out = self.output();
        out.total > out.polled
    }

    /// Waits until there is new output or the session ends, at most `wait`.
    pub async fn wait_for_news(&self, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.changed.notified();
            if self.has_new() || self.end().is_some() {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Waits until the session ends, at most `wait`; whether it did.
    pub async fn wait_for_end(&self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.changed.notified();
            if self.end().is_some() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.end().is_some();
            }
        }
    }

    /// Writes `bytes` to the command's stdin (and closes it after when `eof`).
    pub async fn write(&self, bytes: &[u8], eof: bool) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(format!(
                "Session {} has no writable stdin (start it with pty:true to write to it)",
                self.id
            ));
        };
        let written = async { pipe.write_all(bytes).await.and(pipe.flush().await) };
        match tokio::time::timeout(WRITE_WAIT, written).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                *stdin = None;
                return Err(format!("Cannot write to session {}: {e}", self.id));
            }
            Err(_) => {
                return Err(format!(
                "Session {} did not read its input within {} s; some of it may have been written",
                self.id,
                WRITE_WAIT.as_secs()
            ))
            }
        }
        if eof {
            *stdin = None;
        }
        Ok(())
    }

    /// Stops the command and everything it started, and waits until it is gone: SIGTERM
    /// to the reaper (which kills what is below it), then, past the grace, every process
    /// below the reaper and its group SIGKILLed ([`sweep`]). Whether it ended.
    pub async fn stop(&self) -> bool {
        if self.end().is_some() {
            return true;
        }
        self.stop_asked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        signal(self.pid, nix::sys::signal::Signal::SIGTERM);
        if self.wait_for_end(STOP_GRACE).await {
            return true;
        }
        let pid = self.pid;
        let _ = tokio::task::spawn_blocking(move || sweep::kill_below(pid)).await;
        self.wait_for_end(STOP_GRACE + READ_GRACE).await
    }

    fn finish(&self, end: End) {
        *self.end.lock().unwrap_or_else(|p| p.into_inner()) = Some(end);
        self.changed.notify_waiters();
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// The command's first two words, as OpenClaw names a session (`for i`, `sleep 317`).
fn name_of(command: &str) -> String {
    let name = command
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    name.chars().take(40).collect()
}

/// What a new session is.
pub struct Spawned {
    pub child: Child,
    pub command: String,
    pub cwd: String,
    pub owner: String,
    pub lifetime: Duration,
}

/// One worker's background sessions.
pub struct Registry {
    sessions: Mutex<Vec<Arc<Session>>>,
    /// Places reserved by starts under way.
    pending: std::sync::atomic::AtomicUsize,
    ledger: PathBuf,
}

/// A reserved place ([`Registry::reserve`]), given back when dropped.
pub struct Reserved(Arc<Registry>);

impl Drop for Reserved {
    fn drop(&mut self) {
        self.0
            .pending
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Registry {
    /// The registry whose ledger is `ledger`: sessions a previous worker left running are
    /// stopped if any process of theirs is left, and remembered as lost.
    pub fn new(ledger: PathBuf) -> Registry {
        let lost = ledger::recover(&ledger);
        let sessions = lost
            .into_iter()
            .map(|l| {
                let s = Arc::new(Session {
                    id: l.id,
                    pid: l.pid,
                    name: name_of(&l.command),
                    command: l.command,
                    cwd: l.cwd,
                    started_ms: l.started_ms,
                    owner: l.owner,
                    output: Mutex::new(Output::default()),
                    end: Mutex::new(None),
                    stop_asked: Default::default(),
                    changed: Notify::new(),
                    stdin: tokio::sync::Mutex::new(None),
                });
                s.finish(End {
                    code: None,
                    signal: None,
                    reason: "worker-restart".into(),
                    ended_ms: crate::now_ms(),
                });
                s
            })
            .collect();
        let r = Registry {
            sessions: Mutex::new(sessions),
            pending: Default::default(),
            ledger,
        };
        r.save();
        r
    }

    fn all(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.all().clone()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.all().iter().find(|s| s.id == id).cloned()
    }

    /// Forgets `id`.
    pub fn forget(&self, id: &str) {
        self.all().retain(|s| s.id != id);
        self.save();
    }

    /// A place for a session about to start, if one is free: held until the session is
    /// registered (or the start fails), so starts that overlap cannot pass the bound.
    pub fn reserve(self: &Arc<Registry>) -> Option<Reserved> {
        let all = self.all();
        let running = all.iter().filter(|s| s.end().is_none()).count();
        let pending = self.pending.load(std::sync::atomic::Ordering::SeqCst);
        if running + pending >= MAX_RUNNING {
            return None;
        }
        self.pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(all);
        Some(Reserved(self.clone()))
    }

    /// Registers a started command (in the place `_place` reserved) and has a task keep its
    /// output until it ends (or its lifetime does).
    pub fn start(self: &Arc<Registry>, _place: Reserved, mut spawned: Spawned) -> Arc<Session> {
        let pid = spawned.child.id().unwrap_or(0);
        let stdin = spawned.child.stdin.take();
        let session = {
            let mut all = self.all();
            let id = slug::fresh(|t| all.iter().any(|s| s.id == t));
            let s = Arc::new(Session {
                id,
                pid,
                name: name_of(&spawned.command),
                command: spawned.command,
                cwd: spawned.cwd,
                started_ms: crate::now_ms(),
                owner: spawned.owner,
                output: Mutex::new(Output::default()),
                end: Mutex::new(None),
                stop_asked: Default::default(),
                changed: Notify::new(),
                stdin: tokio::sync::Mutex::new(stdin),
            });
            all.push(s.clone());
            // Forget the oldest finished sessions past the bound.
            while all.len() > MAX_KEPT {
                match all.iter().position(|s| s.end().is_some()) {
                    Some(i) => drop(all.remove(i)),
                    None => break,
                }
            }
            s
        };
        self.save();
        let (registry, s) = (self.clone(), session.clone());
        tokio::spawn(async move {
            watch(&s, spawned.child, spawned.lifetime).await;
            registry.save();
        });
        session
    }

    /// Stops every running session (the agent is being deleted or the worker stops).
    pub async fn stop_all(&self) {
        let running: Vec<_> = self
            .all()
            .iter()
            .filter(|s| s.end().is_none())
            .cloned()
            .collect();
        futures_util::future::join_all(running.iter().map(|s| s.stop())).await;
    }

    /// The lines that tell the model of its sessions at the start of a turn (none: `None`).
    pub fn context(&self) -> Option<String> {
        let all = self.all();
        let lines: Vec<String> = all
            .iter()
            .filter(|s| s.end().is_none_or(|e| e.reason == "worker-restart"))
            .map(|s| match s.end() {
                None => format!(
                    "- {} running pid={} cwd={} :: {}",
                    s.id, s.pid, s.cwd, s.name
                ),
                Some(_) => format!(
                    "- {} stopped when the agent's worker restarted (not running) :: {}",
                    s.id, s.name
                ),
            })
            .collect();
        (!lines.is_empty()).then(|| format!("Active exec sessions:\n{}", lines.join("\n")))
    }

    /// Writes the running sessions to the ledger.
    fn save(&self) {
        let running: Vec<ledger::Entry> = self
            .all()
            .iter()
            .filter(|s| s.end().is_none())
            .map(|s| ledger::Entry {
                id: s.id.clone(),
                pid: s.pid,
                command: s.command.clone(),
                cwd: s.cwd.clone(),
                started_ms: s.started_ms,
                owner: s.owner.clone(),
            })
            .collect();
        ledger::save(&self.ledger, &running);
    }
}

/// Keeps a session's output until the command ends or its lifetime does, then records how
/// it ended.
async fn watch(s: &Arc<Session>, mut child: Child, lifetime: Duration) {
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let readers = tokio::spawn({
        let s = s.clone();
        async move {
            tokio::join!(pump(out, &s), pump(err, &s));
        }
    });
    // The reaper's end is the command's: output still in the pipes is read for a moment
    // after, but a process that escaped and holds them cannot keep the session running.
    let reading = async {
        let status = child.wait().await;
        let mut readers = readers;
        if tokio::time::timeout(READ_GRACE, &mut readers)
            .await
            .is_err()
        {
            readers.abort();
        }
        status
    };
    tokio::pin!(reading);
    let mut timed_out = false;
    let status = match tokio::time::timeout(lifetime, &mut reading).await {
        Ok(status) => status,
        Err(_) => {
            timed_out = true;
            signal(s.pid, nix::sys::signal::Signal::SIGTERM);
            match tokio::time::timeout(STOP_GRACE, &mut reading).await {
                Ok(status) => status,
                Err(_) => {
                    let pid = s.pid;
                    let _ = tokio::task::spawn_blocking(move || sweep::kill_below(pid)).await;
                    reading.await
                }
            }
        }
    };
    let code = status.ok().and_then(|st| st.code());
    let stopped = s.stop_asked.load(std::sync::atomic::Ordering::SeqCst);
    let by_signal = code.filter(|c| *c > 128).map(|c| c - 128);
    let signal_name = |n: i32| {
        nix::sys::signal::Signal::try_from(n)
            .map(|s| s.as_str().to_owned())
            .unwrap_or_else(|_| format!("signal {n}"))
    };
    let (code, signal, reason) = if timed_out {
        (None, Some("SIGTERM".to_owned()), "timeout")
    } else if stopped {
        (None, Some("SIGTERM".to_owned()), "manual-cancel")
    } else if let Some(n) = by_signal {
        (None, Some(signal_name(n)), "signal")
    } else {
        (code, None, "exit")
    };
    *s.stdin.lock().await = None;
    s.finish(End {
        code,
        signal,
        reason: reason.into(),
        ended_ms: crate::now_ms(),
    });
}

/// Reads `stream` to its end into the session's output.
async fn pump<R: AsyncRead + Unpin>(stream: Option<R>, s: &Session) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        s.output().push(&buf[..n]);
        s.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_the_latest_bytes_and_polls_move_on() {
        let mut o = Output::default();
        o.push(b"tick 1\n");
        assert_eq!(o.since(0), (&b"tick 1\n"[..], 0));
        o.push(&vec![b'x'; KEPT_OUTPUT]);
        let (rest, lost) = o.since(0);
        assert_eq!((rest.len(), lost), (KEPT_OUTPUT, 7));
        assert_eq!(o.since(o.total).0.len(), 0);
        assert_eq!(name_of("for i in 1 2 3; do echo $i; done"), "for i");
        assert_eq!(name_of("sleep 317"), "sleep 317");
    }
}
