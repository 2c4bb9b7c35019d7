//! Hook commands and the process groups they run in, shared by the supervisor
//! (`gateway_start` / `gateway_stop` hooks) and the worker (run hooks; the `exec` tool kills
//! its reaper's group with [`GroupKill`]). A hook gets the event as one JSON object on
//! stdin and may answer one JSON object on stdout; it runs in its own process group, and the
//! whole group is killed when it times out or its caller goes away. The `exec` tool's
//! allowlists and reaper are in `execpolicy`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest hook answer read from stdout.
const MAX_OUTPUT: u64 = 256 * 1024;

/// Kills a command's process group when dropped, unless disarmed (`.0 = None`) after the
/// command finished.
pub struct GroupKill(pub Option<u32>);

impl GroupKill {
    pub fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs one hook command: `input` as one JSON object on stdin, then `Ok(None)` for empty
/// output or `Ok(Some(object))` for a JSON object on stdout. The command runs in its own
/// process group in `cwd` (when it exists); the group is killed on timeout and when this
/// future is dropped. `Err` says why it failed (start, exit status with the first stderr
/// line, timeout, an answer that is not a JSON object).
pub async fn run(
    command: &[String],
    timeout_ms: u64,
    cwd: &Path,
    input: &Value,
) -> Result<Option<Value>, String> {
    let Some((program, args)) = command.split_first() else {
        return Err("empty command".into());
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if cwd.is_dir() {
        cmd.current_dir(cwd);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    // Dropped with this future (the run was aborted) or on timeout: the whole group dies.
    let mut group = GroupKill(child.id());
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let body = input.to_string();
    let work = async {
        if let Some(mut w) = stdin {
            // A hook that does not read its input is fine.
            let _ = w.write_all(body.as_bytes()).await;
            let _ = w.shutdown().await;
        }
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout {
                let _ = s.take(MAX_OUTPUT).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr {
                let _ = s.take(4096).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, out, err)
    };
    let (status, out, err) =
        match tokio::time::timeout(Duration::from_millis(timeout_ms), work).await {
            Ok(r) => r,
            Err(_) => {
                group.kill();
                return Err(format!("timed out after {} ms", timeout_ms));
            }
        };
    group.0 = None;
    let status = status.map_err(|e| format!("cannot wait for it: {e}"))?;
    if !status.success() {
        let first = String::from_utf8_lossy(&err);
        let first = first.lines().next().unwrap_or("").trim();
        return Err(format!(
            "{status}{}",
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        ));
    }
    let text = String::from_utf8_lossy(&out);
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(Some(v)),
        Ok(_) => Err("answered JSON that is not an object".into()),
        Err(e) => Err(format!("answered something that is not JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[tokio::test]
    async fn answers_failures_and_timeouts() {
        let cwd = std::env::temp_dir();
        let input = serde_json::json!({"event": "x", "n": 1});
        let echoed = run(&sh("cat"), 5_000, &cwd, &input).await.unwrap();
        assert_eq!(echoed, Some(input.clone()));
        assert_eq!(run(&sh("true"), 5_000, &cwd, &input).await.unwrap(), None);
        let e = run(&sh("echo nope >&2; exit 3"), 5_000, &cwd, &input)
            .await
            .unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let e = run(&sh("echo '[1]'"), 5_000, &cwd, &input)
            .await
            .unwrap_err();
        assert!(e.contains("not an object"), "{e}");
        let e = run(&sh("echo {"), 5_000, &cwd, &input).await.unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
        let e = run(&sh("sleep 5"), 100, &cwd, &input).await.unwrap_err();
        assert!(e.contains("timed out"), "{e}");
        let e = run(&["/nonexistent/hook".into()], 100, &cwd, &input)
            .await
            .unwrap_err();
        assert!(e.contains("cannot start"), "{e}");
    }
}
