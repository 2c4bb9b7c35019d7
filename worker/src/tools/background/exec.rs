//! `exec` with `background` or `yieldMs`: the command becomes a session of the registry,
//! returned at once (`background`) or after `yieldMs` if it is still running then; one that
//! ends within `yieldMs` answers as a foreground `exec` does.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Session, Spawned, DEFAULT_LIFETIME, MAX_LIFETIME, MAX_RUNNING};
use crate::tools::spawn::{spawn, Invocation};
use crate::tools::{ToolCtx, ToolOutcome};

/// Stops the session if the run is aborted while it waits on it (the call never told the
/// model the session exists).
struct StopUnlessTold(Option<Arc<Session>>);

impl Drop for StopUnlessTold {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            tokio::spawn(async move { s.stop().await });
        }
    }
}

/// The text a call that left its command running gets.
fn still_running(s: &Session) -> String {
    format!(
        "Command still running (session {}, pid {}). Use process (list/poll/log/write/send-keys/submit/paste/kill/clear/remove) for follow-up.",
        s.id, s.pid
    )
}

/// Runs `command` as a background session; `wait`: how long to wait before leaving it
/// running (`None`: not at all).
pub async fn start(
    ctx: &ToolCtx,
    command: &str,
    invocation: &Invocation,
    args: &Value,
    wait: Option<Duration>,
) -> ToolOutcome {
    let Some(place) = ctx.background.reserve() else {
        return ToolOutcome::err(format!(
            "Too many background sessions ({MAX_RUNNING} running); kill or wait for one first."
        ));
    };
    // The call's lifetime, within the operator's per-command limit when one is set.
    let asked = match args.get("timeoutSeconds").and_then(Value::as_u64) {
        Some(0) => MAX_LIFETIME,
        Some(s) => Duration::from_secs(s).min(MAX_LIFETIME),
        None => DEFAULT_LIFETIME,
    };
    let lifetime = ctx
        .exec
        .timeout_ms
        .map_or(asked, |ms| asked.min(Duration::from_millis(ms)));
    let stdin = args.get("pty").and_then(Value::as_bool) == Some(true);
    let child = match spawn(ctx, invocation, stdin) {
        Ok(c) => c,
        Err(e) => return ToolOutcome::err(format!("cannot run the command: {e}")),
    };
    let session = ctx.background.start(
        place,
        Spawned {
            child,
            command: command.to_owned(),
            cwd: ctx.workspace.display().to_string(),
            owner: ctx.session_key.clone(),
            lifetime,
        },
    );
    let Some(wait) = wait else {
        return ToolOutcome::ok(still_running(&session));
    };
    let mut guard = StopUnlessTold(Some(session.clone()));
    let ended = session.wait_for_end(wait).await;
    guard.0 = None;
    if !ended {
        return ToolOutcome::ok(still_running(&session));
    }
    ctx.background.forget(&session.id);
    let (log, cut) = session.log();
    let text = if cut {
        format!("[older output was not kept]\n{log}")
    } else {
        log
    };
    match session.end() {
        Some(e) if e.reason == "exit" && e.code == Some(0) => ToolOutcome::ok(text),
        Some(e) if e.reason == "exit" => {
            ToolOutcome::err(format!("exit status {}\n{text}", e.code.unwrap_or(-1)))
        }
        Some(e) => ToolOutcome::err(format!(
            "killed by signal {}\n{text}",
            e.signal.as_deref().unwrap_or("unknown")
        )),
        None => ToolOutcome::ok(still_running(&session)),
    }
}
