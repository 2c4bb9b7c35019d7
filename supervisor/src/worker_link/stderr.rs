//! A worker's stderr: its JSON log lines re-emitted under the supervisor's subscriber with
//! the agent and pid, and the text of its last ERROR line kept for the exit cause.

use super::*;

/// Re-emits the worker's stderr under this supervisor's logging. The worker writes one JSON
/// object per line (tracing's JSON format); anything else (e.g. a panic message) is relayed
/// as a warning.
pub(super) async fn relay_stderr(
    stderr: tokio::process::ChildStderr,
    agent: String,
    pid: u32,
    last_error: LastError,
) {
    let mut lines = BufReader::with_capacity(LINK_BUFFER, stderr).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                if let Some(e) = relay_line(&agent, pid, &line) {
                    if let Ok(mut l) = last_error.lock() {
                        *l = Some(e);
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(agent = agent.as_str(), pid, error = %e, "Reading worker stderr failed.");
                break;
            }
        }
    }
}

/// Re-emits one worker log line; an ERROR line's text comes back (for the exit cause).
pub(super) fn relay_line(agent: &str, pid: u32, line: &str) -> Option<String> {
    let parsed: Option<serde_json::Value> = serde_json::from_str(line).ok();
    let Some(v) = parsed.filter(|v| v.is_object()) else {
        tracing::warn!(target: "worker", agent, pid, "{line}");
        return None;
    };
    let level = v.get("level").and_then(|l| l.as_str()).unwrap_or("INFO");
    let fields = v.get("fields");
    let message = fields
        .and_then(|f| f.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or("");
    let extra = fields
        .and_then(|f| f.as_object())
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != "message")
                .map(|(k, v)| match v.as_str() {
                    Some(s) => format!("{k}={s}"),
                    None => format!("{k}={v}"),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    match level {
        "ERROR" => {
            tracing::error!(target: "worker", agent, pid, "{message} {extra}");
            let text: String = format!("{message} {extra}").chars().take(500).collect();
            return Some(text.trim().to_owned());
        }
        "WARN" => tracing::warn!(target: "worker", agent, pid, "{message} {extra}"),
        "DEBUG" => tracing::debug!(target: "worker", agent, pid, "{message} {extra}"),
        "TRACE" => tracing::trace!(target: "worker", agent, pid, "{message} {extra}"),
        _ => tracing::info!(target: "worker", agent, pid, "{message} {extra}"),
    }
    None
}
