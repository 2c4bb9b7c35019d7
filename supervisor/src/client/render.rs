//! Human-readable rendering of CLI replies.

use ipc::gateway::{DiagnosticsLanes, StatusResult};
use ipc::text::{printable, printable_lines};
use serde_json::Value;

fn dur(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{:.1} MiB", b as f64 / 1048576.0))
        .unwrap_or_else(|| "-".into())
}

/// Sessions that are long-running, stalled or stuck (R-I1), one line each.
pub fn flagged_sessions(d: &DiagnosticsLanes) -> String {
    let flagged: Vec<_> = d.sessions.iter().filter(|s| s.state.is_some()).collect();
    if flagged.is_empty() {
        return format!(
            "\nsessions    {} busy, none long-running, stalled or stuck\n",
            d.sessions.len()
        );
    }
    let mut out = format!("\nsessions needing attention ({}):\n", flagged.len());
    for s in flagged {
        out.push_str(&format!(
            "  {}  {}  {}  {} ({}), no progress for {}, {} queued{}\n",
            printable(&s.agent_id),
            printable(&s.session_key),
            printable(s.state.as_deref().unwrap_or("")),
            printable(s.reason.as_deref().unwrap_or("")),
            printable(&s.active_work_kind),
            dur(s.last_progress_age_ms),
            s.queue_depth,
            s.run_id
                .as_deref()
                .map(|r| format!(", run {}", printable(r)))
                .unwrap_or_default(),
        ));
    }
    out
}

pub fn status(s: &StatusResult) -> String {
    let sup = &s.supervisor;
    let mut out = format!(
        "supervisor  pid {}  version {}  up {}  rss {}  connections {}{}\nstate dir   {}\n\n",
        sup.pid,
        sup.version,
        dur(sup.uptime_ms),
        mib(sup.rss_bytes),
        sup.connections,
        if sup.draining { "  DRAINING" } else { "" },
        sup.state_dir
    );
    out.push_str(&format!(
        "{:<16} {:>8} {:<9} {:>8} {:>9} {:>8} {:>9}  {}\n",
        "AGENT", "PID", "STATE", "UPTIME", "RSS", "RESTARTS", "IN FLIGHT", "LAST EXIT"
    ));
    for w in &s.workers {
        out.push_str(&format!(
            "{:<16} {:>8} {:<9} {:>8} {:>9} {:>8} {:>9}  {}\n",
            printable(&w.agent_id),
            w.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            w.state,
            w.uptime_ms.map(dur).unwrap_or_else(|| "-".into()),
            mib(w.rss_bytes),
            w.restarts,
            w.runs_in_flight,
            printable(w.last_exit.as_deref().unwrap_or("-"))
        ));
        if let Some(reason) = &w.failed_reason {
            out.push_str(&format!("    failed: {}\n", printable(reason)));
        }
    }
    if let Some(c) = &s.cluster {
        out.push_str(&format!(
            "\ncluster     node {}  engine {}\nmembers     {}\n{:<16} {:<16} {:>8}  {}\n",
            printable(&c.node),
            printable(&c.engine),
            printable(&c.members.join(", ")),
            "AGENT",
            "OWNER",
            "EPOCH",
            "WORKSPACE"
        ));
        for a in &c.agents {
            let workspace = match (&a.pinned_to, a.workspace_bytes) {
                (Some(node), _) => format!("pinned to {} (over the cap)", printable(node)),
                (None, Some(bytes)) => format!("{bytes} bytes"),
                (None, None) => "-".into(),
            };
            out.push_str(&format!(
                "{:<16} {:<16} {:>8}  {}\n",
                printable(&a.agent_id),
                printable(a.owner.as_deref().unwrap_or("-")),
                a.epoch.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                workspace
            ));
        }
    }
    out
}

pub fn sessions(page: &ipc::gateway::SessionsListResult) -> String {
    let mut out = format!(
        "{:<40} {:<10} {:<8} {:>10}  {}\n",
        "SESSION", "AGENT", "STATUS", "TOKENS", "LAST RUN"
    );
    for s in &page.sessions {
        out.push_str(&format!(
            "{:<40} {:<10} {:<8} {:>10}  {}\n",
            printable(&s.key),
            printable(&s.agent_id),
            printable(&s.status),
            s.total_tokens.unwrap_or(0),
            printable(s.last_run_id.as_deref().unwrap_or("-"))
        ));
    }
    out.push_str(&format!(
        "\n{} of {} session(s){}\n",
        page.count,
        page.total_count,
        if page.has_more {
            " (more: raise --limit)"
        } else {
            ""
        }
    ));
    out
}

/// Commands waiting for an operator, one row each: every cell through [`printable`] (the
/// session key and the command are the client's and the model's).
pub fn approvals(pending: &[ipc::gateway::ExecApproval]) -> String {
    let mut out = format!(
        "{:<36} {:<10} {:<28} {:<14} {}\n",
        "ID", "AGENT", "SESSION", "EXPIRES_MS", "COMMAND"
    );
    for a in pending {
        out.push_str(&format!(
            "{:<36} {:<10} {:<28} {:<14} {}\n",
            printable(&a.id),
            printable(&a.request.agent_id),
            printable(&a.request.session_key),
            a.expires_at_ms,
            printable(&a.request.command)
        ));
    }
    out
}

pub fn history(v: &serde_json::Value) -> String {
    let mut out = String::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("?");
        out.push_str(&format!(
            "[{}]\n{}\n\n",
            printable(role),
            printable_lines(&text_of(m))
        ));
    }
    if out.is_empty() {
        out.push_str("(no messages)\n");
    }
    out
}

/// The text of a transcript message's content blocks.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().map(str::to_owned),
                Some("toolCall") => {
                    Some(format!("[tool call {}]", b["name"].as_str().unwrap_or("?")))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::gateway::{ExecApproval, ExecApprovalRequestView};

    /// Issue 23 item 1: a key or command with escapes cannot clear the screen or fake a row
    /// beside a real approval id in `loopgate approvals list`.
    #[test]
    fn approval_rows_print_client_strings_escaped_issue_23() {
        let a = ExecApproval {
            approval_kind: "exec".into(),
            id: "0b1c".into(),
            request: ExecApprovalRequestView {
                command: "ls\u{1b}[2J".into(),
                command_argv: vec!["ls".into()],
                cwd: "/w".into(),
                host: "gateway".into(),
                security: "allowlist".into(),
                ask: "on-miss".into(),
                agent_id: "main".into(),
                session_key: "agent:main:x\n0b1d       main  fake\u{202E}".into(),
                run_id: "r".into(),
                allowed_decisions: vec!["deny".into()],
            },
            created_at_ms: 1,
            expires_at_ms: 2,
        };
        let out = approvals(&[a]);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(!out
            .chars()
            .any(|c| c != '\n' && ipc::text::is_unshowable(c)));
        assert!(out.contains("agent:main:x\\u000a0b1d"), "{out}");
        assert!(out.contains("ls\\u001b[2J"), "{out}");
    }
}
