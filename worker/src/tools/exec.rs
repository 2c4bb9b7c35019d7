//! The `exec` tool. Under `allowlist` the command is split into words with no shell (shell
//! syntax is refused, see `execpolicy::argv`) and must match a pattern; under `full` it runs with
//! `sh -c`. Either way it runs:
//! - under the reaper (`execpolicy::reaper`), so every process it starts dies when it ends, is
//!   aborted or times out, and when the worker dies;
//! - with a minimal environment: no provider keys, no worker token;
//! - with its output drained to the end: past the cap it is discarded, never left unread
//!   (a writer would die of SIGPIPE or block).

use std::collections::HashMap;
use std::time::Duration;

use ipc::control::ExecPolicy;
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::spawn::spawn;
pub use super::spawn::Invocation;
use super::{ToolCtx, ToolOutcome, DEFAULT_EXEC_TIMEOUT};

/// Most output bytes kept from each of stdout and stderr.
const EXEC_MAX_OUTPUT: usize = 50 * 1024;
/// How long the reaper gets to kill a command's processes before its group is SIGKILLed.
const REAP_GRACE: Duration = Duration::from_secs(5);
/// `PATH` when the worker has none with absolute entries.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `command` may run under `policy`, and how; `Err` says why not. `approved`: the
/// command an operator approved for this call (`ask`).
pub fn plan(
    policy: &ExecPolicy,
    command: &str,
    approved: Option<&str>,
) -> Result<Invocation, String> {
    use ipc::control::ExecSecurity;
    match policy.security {
        ExecSecurity::Full => Ok(Invocation::Shell(command.to_owned())),
        ExecSecurity::Allowlist | ExecSecurity::Ask => {
            let argv =
                execpolicy::argv::split(command).map_err(|e| format!("exec refused: {e}"))?;
            if argv.is_empty() {
                return Err("exec refused: empty command".into());
            }
            if allowlisted(policy, &argv) {
                return Ok(Invocation::Argv(argv));
            }
            if policy.security == ExecSecurity::Ask && approved == Some(command) {
                return Ok(Invocation::Argv(argv));
            }
            if policy.security == ExecSecurity::Ask && unshowable(command) {
                return Err(
                    "exec refused: the command has control or bidirectional-text characters, so an operator could not review it as it would run".into(),
                );
            }
            if policy.security == ExecSecurity::Ask && command.len() > MAX_REVIEWED_COMMAND {
                return Err(format!(
                    "exec refused: the command is longer than {} KiB, more than an operator can review",
                    MAX_REVIEWED_COMMAND >> 10
                ));
            }
            Err(format!(
                "exec refused: {command:?} matches no pattern in tools.exec.allowlist"
            ))
        }
        ExecSecurity::Deny => {
            Err("exec refused: tools.exec.security is \"deny\" for this agent".into())
        }
        // A policy this worker does not know grants nothing.
        ExecSecurity::Unknown => {
            Err("exec refused: this worker does not know the agent's tools.exec.security".into())
        }
    }
}

/// The longest command an operator is asked to approve (longer ones are refused under `ask`).
const MAX_REVIEWED_COMMAND: usize = 64 << 10;

/// Characters that would make a command look different to the operator asked to approve it
/// (terminal escapes, line breaks, bidirectional overrides).
fn unshowable(command: &str) -> bool {
    command.chars().any(ipc::text::is_unshowable)
}

fn allowlisted(policy: &ExecPolicy, argv: &[String]) -> bool {
    policy.allowlist.iter().any(|p| {
        execpolicy::argv::parse_pattern(p).is_ok_and(|p| execpolicy::argv::matches(&p, argv))
    })
}

/// Under `ask`: the words of a call's command when it must wait for an operator (it runs
/// without a shell and no pattern allows it). `None`: no approval needed, or the command
/// is refused anyway (the tool says why).
pub fn needs_approval(policy: &ExecPolicy, arguments: &str) -> Option<(String, Vec<String>)> {
    if policy.security != ipc::control::ExecSecurity::Ask {
        return None;
    }
    let args: Value = serde_json::from_str(arguments).ok()?;
    let command = args.get("command")?.as_str()?.to_owned();
    if unshowable(&command) || command.len() > MAX_REVIEWED_COMMAND {
        return None;
    }
    let argv = execpolicy::argv::split(&command).ok()?;
    (!argv.is_empty() && !allowlisted(policy, &argv)).then_some((command, argv))
}

/// The `command` argument of an `exec` call.
pub fn command_of(arguments: &str) -> Option<String> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    args.get("command")?.as_str().map(str::to_owned)
}

/// The environment a command gets: `PATH` (absolute entries only), `HOME`, locale and
/// time zone, `TMPDIR`; nothing else of the worker's (no API keys, no worker token).
pub fn environment(worker_env: &HashMap<String, String>) -> Vec<(String, String)> {
    let path = worker_env
        .get("PATH")
        .map(|p| {
            p.split(':')
                .filter(|e| e.starts_with('/'))
                .collect::<Vec<_>>()
                .join(":")
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_PATH.to_owned());
    let mut env = vec![("PATH".to_owned(), path)];
    for (k, v) in worker_env {
        let keep = matches!(
            k.as_str(),
            "HOME" | "LANG" | "TZ" | "TMPDIR" | "USER" | "LOGNAME"
        ) || k.starts_with("LC_");
        if keep {
            env.push((k.clone(), v.clone()));
        }
    }
    env.sort();
    env
}

/// `base` (an `exec` environment) with the variables offered skills' settings give (R-B6):
/// none replaces one `base` has.
pub fn with_skill_env(
    base: &[(String, String)],
    skill: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    for (k, v) in skill {
        if !env.iter().any(|(e, _)| *e == k) {
            env.push((k, v));
        }
    }
    env.sort();
    env
}

/// Sends SIGTERM to the reaper when dropped (an aborted run), unless disarmed after the
/// command finished; the reaper then kills everything the command started.
struct ReaperGuard(Option<u32>);

impl ReaperGuard {
    fn terminate(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

impl Drop for ReaperGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Reads `stream` to its end, keeping the first [`EXEC_MAX_OUTPUT`] bytes and how many more
/// were discarded; `progress` gets what is kept, best effort.
async fn drain<R: tokio::io::AsyncRead + Unpin>(
    stream: Option<R>,
    progress: Option<tokio::sync::mpsc::Sender<String>>,
) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let Some(mut s) = stream else {
        return (kept, dropped);
    };
    let mut chunk = vec![0u8; 8192];
    loop {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = EXEC_MAX_OUTPUT - kept.len();
                let take = n.min(room);
                kept.extend_from_slice(&chunk[..take]);
                dropped += (n - take) as u64;
                if take > 0 {
                    // A full queue drops an update, never blocks the command.
                    if let Some(tx) = &progress {
                        let _ = tx.try_send(String::from_utf8_lossy(&chunk[..take]).into_owned());
                    }
                }
            }
        }
    }
    (kept, dropped)
}

fn render(out: (Vec<u8>, u64), err: (Vec<u8>, u64)) -> String {
    let mut text = String::from_utf8_lossy(&out.0).into_owned();
    if out.1 > 0 {
        text.push_str(&format!("\n[... {} more bytes of output discarded]", out.1));
    }
    if !err.0.is_empty() || err.1 > 0 {
        text.push_str("\n[stderr]\n");
        text.push_str(&String::from_utf8_lossy(&err.0));
        if err.1 > 0 {
            text.push_str(&format!("\n[... {} more bytes of stderr discarded]", err.1));
        }
    }
    text
}

pub async fn exec(ctx: &ToolCtx, args: &Value) -> ToolOutcome {
    let command = args
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let invocation = match plan(&ctx.exec, &command, ctx.approved.as_deref()) {
        Ok(i) => i,
        Err(why) => return ToolOutcome::err(why),
    };
    // The operator's limit caps whatever the model asks for.
    let limit = ctx
        .exec
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_EXEC_TIMEOUT);
    let timeout = args
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        .map_or(limit, |s| Duration::from_secs(s).min(limit));
    if let Err(e) = std::fs::create_dir_all(&ctx.workspace) {
        return ToolOutcome::err(format!("cannot create the workspace: {e}"));
    }
    let background = args.get("background").and_then(Value::as_bool) == Some(true);
    let yield_ms = args.get("yieldMs").and_then(Value::as_u64);
    if background || yield_ms.is_some() {
        let wait = (!background).then(|| Duration::from_millis(yield_ms.unwrap_or(0)));
        return super::background::exec::start(ctx, &command, &invocation, args, wait).await;
    }
    let mut child = match spawn(ctx, &invocation, false) {
        Ok(c) => c,
        Err(e) => return ToolOutcome::err(format!("cannot run the command: {e}")),
    };
    let pid = child.id();
    // Dropped with this future (the run was aborted): the reaper kills what the command
    // started, then exits; tokio reaps it.
    let mut reaper = ReaperGuard(pid);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let progress = ctx.progress.clone();
    let run = async {
        let (out, err) = tokio::join!(drain(stdout, progress), drain(stderr, None));
        let status = child.wait().await;
        (out, err, status)
    };
    tokio::pin!(run);
    match tokio::time::timeout(timeout, &mut run).await {
        Ok((out, err, status)) => {
            reaper.0 = None;
            let text = render(out, err);
            match status.ok().and_then(|s| s.code()) {
                Some(0) => ToolOutcome::ok(text),
                Some(c) if c > 128 => {
                    ToolOutcome::err(format!("killed by signal {}\n{text}", c - 128))
                }
                Some(c) => ToolOutcome::err(format!("exit status {c}\n{text}")),
                None => ToolOutcome::err(format!("killed by a signal\n{text}")),
            }
        }
        Err(_) => {
            reaper.terminate();
            if tokio::time::timeout(REAP_GRACE, &mut run).await.is_err() {
                // The reaper itself is stuck: at least its own group goes.
                if let Some(pid) = pid {
                    hookcmd::GroupKill(Some(pid)).kill();
                }
            }
            ToolOutcome::err(format!(
                "command timed out after {} s and was killed",
                timeout.as_secs()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_policy_runs_allowlisted_argv_without_a_shell_r_e2() {
        let deny = ExecPolicy::default();
        assert!(plan(&deny, "ls", None).is_err());
        let allow = ExecPolicy {
            security: ipc::control::ExecSecurity::Allowlist,
            allowlist: vec!["echo *".into(), "ls".into()],
            ..ExecPolicy::default()
        };
        assert_eq!(
            plan(&allow, "echo hi", None).unwrap(),
            Invocation::Argv(vec!["echo".into(), "hi".into()])
        );
        assert!(plan(&allow, "ls", None).is_ok());
        assert!(plan(&allow, "rm -rf /", None).is_err());
        let e = plan(&allow, "echo hi; id > f", None).unwrap_err();
        assert!(e.contains("shell syntax"), "{e}");
        assert!(plan(&allow, "echo $(id)", None).is_err());
        let full = ExecPolicy {
            security: ipc::control::ExecSecurity::Full,
            ..ExecPolicy::default()
        };
        assert_eq!(
            plan(&full, "a; b", None).unwrap(),
            Invocation::Shell("a; b".into())
        );
    }

    /// `ask`: allowlisted commands run; others need an operator, and run (without a shell)
    /// only as the very command approved.
    #[test]
    fn ask_runs_allowlisted_and_approved_commands_only() {
        let ask = ExecPolicy {
            security: ipc::control::ExecSecurity::Ask,
            allowlist: vec!["ls".into()],
            ..ExecPolicy::default()
        };
        let args = |c: &str| serde_json::json!({ "command": c }).to_string();
        assert_eq!(needs_approval(&ask, &args("ls")), None);
        assert_eq!(
            needs_approval(&ask, &args("rm x")),
            Some(("rm x".into(), vec!["rm".into(), "x".into()]))
        );
        assert_eq!(
            needs_approval(&ask, &args("rm x; id")),
            None,
            "refused anyway"
        );
        for spoof in [
            "rm -rf / '\u{1b}[2K' ls",
            "rm 'a\nls'",
            "echo \u{202e}txt.exe",
        ] {
            assert_eq!(needs_approval(&ask, &args(spoof)), None, "{spoof:?}");
            let e = plan(&ask, spoof, None).unwrap_err();
            assert!(e.contains("control or bidirectional"), "{spoof:?}: {e}");
        }
        assert!(plan(&ask, "rm x", None).is_err());
        assert!(plan(&ask, "rm y", Some("rm x")).is_err(), "another command");
        assert_eq!(
            plan(&ask, "rm x", Some("rm x")).unwrap(),
            Invocation::Argv(vec!["rm".into(), "x".into()])
        );
        let allow = ExecPolicy {
            security: ipc::control::ExecSecurity::Allowlist,
            ..ask.clone()
        };
        assert_eq!(needs_approval(&allow, &args("rm x")), None);
        assert!(
            plan(&allow, "rm x", Some("rm x")).is_err(),
            "allowlist never asks"
        );
    }

    #[test]
    fn environment_is_minimal() {
        let worker: HashMap<String, String> = [
            ("PATH", "relative:/usr/bin::/bin"),
            ("HOME", "/root"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("LOOPGATE_WORKER_TOKEN", "t"),
            ("LC_ALL", "C"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let env = environment(&worker);
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["HOME", "LC_ALL", "PATH"]);
        assert!(env.contains(&("PATH".into(), "/usr/bin:/bin".into())));
        assert_eq!(environment(&HashMap::new())[0].1, DEFAULT_PATH);
    }
}
