//! What a reload changes (`loopgate reload`, SIGHUP): one line per change, in the words of
//! the config file. Pure.

use crate::config::{Config, GatewayConfig};

/// The changes from `old` to `new`, each a line an operator reads; empty: nothing changed.
pub fn describe(old: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    agents(old, new, &mut out);
    gateway(&old.gateway, &new.gateway, &mut out);
    diagnostics(old, new, &mut out);
    queue(old, new, &mut out);
    process(old, new, &mut out);
    out
}

/// Agents added and changed (in `new`'s order), then removed (in `old`'s), with what
/// becomes of their workers.
fn agents(old: &Config, new: &Config, out: &mut Vec<String>) {
    for a in &new.agents {
        match old.agent(a.id.as_str()) {
            None => out.push(format!(
                "agent {} added: its worker starts on first use",
                a.id.as_str()
            )),
            Some(before) if before != a => out.push(format!(
                "agent {} changed: its worker restarts gracefully",
                a.id.as_str()
            )),
            Some(_) => {}
        }
    }
    for a in &old.agents {
        if new.agent(a.id.as_str()).is_none() {
            out.push(format!(
                "agent {} removed: its worker drains and stops",
                a.id.as_str()
            ));
        }
    }
}

/// The `gateway` table: address, drain timeout, client buffers, metrics, allowed hosts.
fn gateway(o: &GatewayConfig, n: &GatewayConfig, out: &mut Vec<String>) {
    if (o.port, o.bind) != (n.port, n.bind) {
        out.push(format!(
            "gateway.port / gateway.bind {}:{} -> {}:{}: the WebSocket listener moves",
            o.bind, o.port, n.bind, n.port
        ));
    }
    if o.drain_timeout_seconds != n.drain_timeout_seconds {
        out.push(format!(
            "gateway.drain_timeout_seconds {} -> {}",
            o.drain_timeout_seconds, n.drain_timeout_seconds
        ));
    }
    if o.max_buffered_bytes != n.max_buffered_bytes {
        out.push(format!(
            "gateway.max_buffered_bytes {} -> {}",
            o.max_buffered_bytes, n.max_buffered_bytes
        ));
    }
    if o.metrics != n.metrics {
        out.push(format!(
            "gateway.metrics.enabled {} -> {} (GET /metrics)",
            o.metrics, n.metrics
        ));
    }
    if o.allowed_hosts != n.allowed_hosts {
        out.push(format!(
            "gateway.allowed_hosts {:?} -> {:?}",
            o.allowed_hosts, n.allowed_hosts
        ));
    }
}

/// Stuck-session diagnostics (the same for every agent: the first one's stand for all).
fn diagnostics(old: &Config, new: &Config, out: &mut Vec<String>) {
    let diag = |c: &Config| c.agents.first().map(|a| a.diagnostics);
    if let (Some(d0), Some(d1)) = (diag(old), diag(new)) {
        if d0 != d1 {
            out.push(format!(
                "diagnostics: enabled {} -> {}, stuck_session_warn_ms {} -> {}, stuck_session_abort_min_ms {} -> {} (workers restart with it)",
                d0.enabled, d1.enabled, d0.warn_ms, d1.warn_ms, d0.abort_min_ms, d1.abort_min_ms
            ));
        }
    }
}

/// `messages.queue`: the limits on what may wait, and how a session's queue behaves.
fn queue(old: &Config, new: &Config, out: &mut Vec<String>) {
    if old.queue_limits != new.queue_limits {
        let (o, n) = (old.queue_limits, new.queue_limits);
        out.push(format!(
            "messages.queue.max_queued_*: per agent {} / {} bytes -> {} / {} bytes, in all {} / {} bytes -> {} / {} bytes",
            o.per_agent, o.per_agent_bytes, n.per_agent, n.per_agent_bytes, o.total, o.total_bytes, n.total, n.total_bytes
        ));
    }
    if old.queue != new.queue {
        out.push(format!(
            "messages.queue: mode {} -> {}, debounce_ms {} -> {}, cap {} -> {}, drop {} -> {}",
            old.queue.mode.as_str(),
            new.queue.mode.as_str(),
            old.queue.debounce_ms,
            new.queue.debounce_ms,
            old.queue.cap,
            new.queue.cap,
            old.queue.drop.as_str(),
            new.queue.drop.as_str()
        ));
    }
}

/// The gateway process itself: worker supervision, the disk reserve, gateway hooks, cluster
/// mode.
fn process(old: &Config, new: &Config, out: &mut Vec<String>) {
    if old.workers != new.workers {
        out.push("workers: supervision settings changed".into());
    }
    if old.disk_reserve_bytes != new.disk_reserve_bytes {
        out.push(format!(
            "disk.reserve_mb {} -> {}: applies after a restart",
            old.disk_reserve_bytes / ipc::disk::MIB,
            new.disk_reserve_bytes / ipc::disk::MIB
        ));
    }
    if old.gateway_hooks != new.gateway_hooks {
        out.push("hooks: gateway_start / gateway_stop hooks changed".into());
    }
    if old.cron.enabled != new.cron.enabled {
        out.push(format!(
            "cron.enabled {} -> {}: applies after a restart",
            old.cron.enabled, new.cron.enabled
        ));
    }
    if old.cron.skip_missed != new.cron.skip_missed {
        out.push(format!(
            "cron.skip_missed {} -> {}: applies at the next start",
            old.cron.skip_missed, new.cron.skip_missed
        ));
    }
    if old.cron.session_retention_seconds != new.cron.session_retention_seconds {
        out.push(format!(
            "cron.session_retention_seconds {} -> {}",
            old.cron.session_retention_seconds, new.cron.session_retention_seconds
        ));
    }
    if old.cluster != new.cluster {
        out.push("cluster: changed; applies after a restart (this gateway keeps its place in the cluster until then)".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, RawConfig};
    use std::path::Path;

    fn load(text: &str) -> Config {
        let raw: RawConfig = toml::from_str(text).unwrap();
        let o = Overrides {
            state_token: Some("t".into()),
            ..Overrides::default()
        };
        Config::from_raw(raw, Path::new("t.toml"), Path::new("/state"), &o).unwrap()
    }

    #[test]
    fn reload_names_added_changed_and_removed_agents() {
        let old = load("[agents.list.ops]\n[agents.list.old]\n");
        let new = load(
            "[agents.list.ops]\nname = \"Ops\"\n[agents.list.new]\n[messages.queue]\nmode = \"collect\"\n",
        );
        let d = describe(&old, &new);
        assert!(
            d.contains(&"agent new added: its worker starts on first use".to_owned()),
            "{d:?}"
        );
        assert!(
            d.contains(&"agent ops changed: its worker restarts gracefully".to_owned()),
            "{d:?}"
        );
        assert!(
            d.contains(&"agent old removed: its worker drains and stops".to_owned()),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|l| l.starts_with("messages.queue: mode steer -> collect")),
            "{d:?}"
        );
        assert!(describe(&new, &new).is_empty());
    }

    #[test]
    fn reload_says_the_disk_reserve_waits_for_a_restart_and_a_budget_restarts_the_worker() {
        let old = load("");
        let new = load("[disk]\nreserve_mb = 0\n[agents.defaults.disk]\nworkspace_max_mb = 5\n");
        let d = describe(&old, &new);
        assert!(
            d.contains(&"disk.reserve_mb 16 -> 0: applies after a restart".to_owned()),
            "{d:?}"
        );
        assert!(
            d.contains(&"agent main changed: its worker restarts gracefully".to_owned()),
            "{d:?}"
        );
    }

    /// Each section's lines come in the file's order: agents, gateway, queue, the process.
    #[test]
    fn reload_lists_gateway_queue_and_process_changes_in_order() {
        let old = load("");
        let new = load(
            "[gateway]\nport = 19999\ndrain_timeout_seconds = 7\n[gateway.metrics]\nenabled = true\n\
             [messages.queue]\nmode = \"collect\"\n[workers]\nmax_live = 3\n",
        );
        let d = describe(&old, &new);
        let port = d
            .iter()
            .position(|l| l.starts_with("gateway.port / gateway.bind "));
        let drain = d
            .iter()
            .position(|l| l.starts_with("gateway.drain_timeout_seconds "));
        let metrics = d
            .iter()
            .position(|l| l.starts_with("gateway.metrics.enabled false -> true"));
        let queue = d
            .iter()
            .position(|l| l.starts_with("messages.queue: mode "));
        let workers = d
            .iter()
            .position(|l| l == "workers: supervision settings changed");
        let order = [port, drain, metrics, queue, workers];
        assert!(order.iter().all(Option::is_some), "{d:?}");
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{d:?}");
        assert_eq!(d.len(), 5, "{d:?}");
        assert!(
            d[0].ends_with(":19999: the WebSocket listener moves"),
            "{d:?}"
        );
    }
}
