//! Human-readable rendering of CLI replies.

use ipc::gateway::StatusResult;

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
        "{:<16} {:>8} {:<9} {:>8} {:>9} {:>8} {:>7}  {}\n",
        "AGENT", "PID", "STATE", "UPTIME", "RSS", "RESTARTS", "RUNS", "LAST EXIT"
    ));
    for w in &s.workers {
        out.push_str(&format!(
            "{:<16} {:>8} {:<9} {:>8} {:>9} {:>8} {:>7}  {}\n",
            w.agent_id,
            w.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            w.state,
            w.uptime_ms.map(dur).unwrap_or_else(|| "-".into()),
            mib(w.rss_bytes),
            w.restarts,
            w.runs_in_flight,
            w.last_exit.as_deref().unwrap_or("-")
        ));
        if let Some(reason) = &w.failed_reason {
            out.push_str(&format!("    failed: {reason}\n"));
        }
    }
    out
}
