//! Prometheus metrics (`GET /metrics`, `gateway.metrics.enabled`), in the OpenMetrics text
//! format of the `prometheus-client` crate. Labels are bounded sets only (agent ids from the
//! config, statuses, tool names from the built-in list, provider names from the config):
//! never a session, run or anything a model or client wrote.
//!
//! The supervisor counts what it sees itself (runs, events it relays, workers, connections,
//! its gateway db); each worker reports its own counters over the control link
//! ([`ipc::metrics::WorkerCounters`], cumulative since the worker started), kept per agent
//! with the totals of the agent's earlier workers. Gauges of the moment (workers up, queue
//! depth, sessions) are read at scrape time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use ipc::diagnostics::{RecoveryAction, SessionClass};
use ipc::metrics::WorkerCounters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

mod series;
use series::{ClusterSeries, HealthSeries, RunSeries, ScrapeGauges, L};

/// Client connections closed as slow consumers (counted where they are closed).
pub static SLOW_CONSUMERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The content type of a scrape.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric; cheap to clone (one shared registry).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Registry,
    started: Instant,
    runs: RunSeries,
    health: HealthSeries,
    gauges: ScrapeGauges,
    cluster: ClusterSeries,
    reported: Arc<Reported>,
}

/// Counters workers reported, per agent.
#[derive(Debug, Default)]
struct Reported {
    agents: Mutex<HashMap<String, AgentReported>>,
    gateway_commits: Mutex<Option<Arc<dbwriter::CommitStats>>>,
}

#[derive(Debug, Default)]
struct AgentReported {
    /// The worker generation `current` came from.
    generation: u64,
    current: WorkerCounters,
    /// Everything earlier workers of the agent reported.
    retired: WorkerCounters,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every series, registered in the order a scrape lists them.
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("loopgate");
        let runs = RunSeries::register(&mut r);
        let health = HealthSeries::register(&mut r);
        let gauges = ScrapeGauges::register(&mut r);
        let cluster = ClusterSeries::register(&mut r);
        let reported = Arc::new(Reported::default());
        r.register_collector(Box::new(reported.clone()));
        Metrics(Arc::new(Inner {
            registry: r,
            started: Instant::now(),
            runs,
            health,
            gauges,
            cluster,
            reported,
        }))
    }

    /// Cluster mode: this gateway took `agent`'s lease.
    pub fn cluster_took(&self, agent: &str) {
        self.0.cluster.leases.inc();
        self.0
            .cluster
            .takeovers
            .get_or_create(&agent_l(agent))
            .inc();
    }

    /// Cluster mode: this gateway no longer holds `agent` (`lost`: without giving it up).
    pub fn cluster_let_go(&self, agent: &str, lost: bool) {
        self.0.cluster.leases.dec();
        // Pinned here means while here.
        self.0.cluster.pinned.get_or_create(&agent_l(agent)).set(0);
        if lost {
            self.0.cluster.lost.get_or_create(&agent_l(agent)).inc();
        }
    }

    /// Cluster mode: a run a lost owner started was ended here.
    pub fn cluster_orphan(&self, agent: &str) {
        self.0.cluster.orphans.get_or_create(&agent_l(agent)).inc();
    }

    /// Cluster mode: `agent`'s journal refused a write of this gateway's worker.
    pub fn cluster_refused(&self, agent: &str) {
        self.0.cluster.refused.get_or_create(&agent_l(agent)).inc();
    }

    /// Cluster mode: `agent`'s workspace was snapshotted (`pinned`: it was too large, and
    /// stays here instead).
    pub fn cluster_workspace_snapshot(&self, agent: &str, pinned: bool) {
        let l = agent_l(agent);
        if !pinned {
            self.0.cluster.snapshots.get_or_create(&l).inc();
        }
        self.0
            .cluster
            .pinned
            .get_or_create(&l)
            .set(i64::from(pinned));
    }

    /// Cluster mode: `agent`'s workspace was restored from the cluster's snapshot.
    pub fn cluster_workspace_restored(&self, agent: &str) {
        self.0.cluster.restores.get_or_create(&agent_l(agent)).inc();
    }

    pub fn run_accepted(&self, agent: &str) {
        self.0.runs.accepted.get_or_create(&agent_l(agent)).inc();
    }

    pub fn run_ended(&self, agent: &str, status: &str, duration_ms: u64) {
        let mut l = agent_l(agent);
        self.0
            .runs
            .duration
            .get_or_create(&l)
            .observe(duration_ms as f64 / 1000.0);
        l.push(("status", status.to_owned()));
        self.0.runs.ended.get_or_create(&l).inc();
    }

    pub fn first_token(&self, agent: &str, after_ms: u64) {
        self.0
            .runs
            .first_token
            .get_or_create(&agent_l(agent))
            .observe(after_ms as f64 / 1000.0);
    }

    pub fn retry(&self, agent: &str, reason: &str) {
        let mut l = agent_l(agent);
        l.push(("reason", bounded(reason, RETRY_REASONS).to_owned()));
        self.0.runs.retries.get_or_create(&l).inc();
    }

    pub fn fallback(&self, agent: &str) {
        self.0.runs.fallbacks.get_or_create(&agent_l(agent)).inc();
    }

    pub fn tool_call(&self, agent: &str, tool: &str, error: bool) {
        let mut l = agent_l(agent);
        l.push(("tool", bounded(tool, &ipc::tools::TOOL_NAMES).to_owned()));
        l.push(("result", if error { "error" } else { "ok" }.to_owned()));
        self.0.runs.tool_calls.get_or_create(&l).inc();
    }

    pub fn worker_restarted(&self, agent: &str) {
        self.0
            .health
            .worker_restarts
            .get_or_create(&agent_l(agent))
            .inc();
    }

    pub fn worker_exited(&self, agent: &str, crash: bool) {
        let mut l = agent_l(agent);
        l.push(("cause", if crash { "crash" } else { "clean" }.to_owned()));
        self.0.health.worker_exits.get_or_create(&l).inc();
    }

    pub fn classified(&self, agent: &str, class: SessionClass, reason: &str) {
        let mut l = agent_l(agent);
        l.push(("state", class.short().to_owned()));
        l.push((
            "reason",
            bounded(reason, ipc::diagnostics::reasons::ALL).to_owned(),
        ));
        self.0.health.diagnostics.get_or_create(&l).inc();
    }

    pub fn recovered(&self, agent: &str, action: RecoveryAction, status: &str) {
        let mut l = agent_l(agent);
        l.push(("action", action.as_str().to_owned()));
        // `failed: <why>` counts as `failed`.
        let status = status.split(':').next().unwrap_or("");
        l.push(("status", bounded(status, RECOVERY_STATUSES).to_owned()));
        self.0.health.recoveries.get_or_create(&l).inc();
    }

    /// The agent's worker exited: what it reported is kept with the agent's earlier workers'.
    pub fn worker_retired(&self, agent: &str) {
        let mut all = self
            .0
            .reported
            .agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(a) = all.get_mut(agent) {
            let done = std::mem::take(&mut a.current);
            a.retired = add(&a.retired, &done);
            // No worker has this generation: the next report starts afresh.
            a.generation = u64::MAX;
        }
    }

    /// A worker's cumulative counters (`generation` tells one worker from the next).
    pub fn worker_counters(&self, agent: &str, generation: u64, c: WorkerCounters) {
        let mut all = self
            .0
            .reported
            .agents
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let a = all.entry(agent.to_owned()).or_default();
        if a.generation != generation {
            let done = std::mem::take(&mut a.current);
            a.retired = add(&a.retired, &done);
            a.generation = generation;
        }
        a.current = c;
    }

    pub fn gateway_commits(&self, stats: Arc<dbwriter::CommitStats>) {
        *self
            .0
            .reported
            .gateway_commits
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(stats);
    }

    /// The scrape body, with the gauges of the moment set from `now`.
    pub fn encode(&self, now: &Scrape) -> String {
        let m = &self.0;
        m.gauges.uptime.set(m.started.elapsed().as_secs_f64());
        set_gauges(&m.gauges, now);
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &m.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Sets the gauges of the moment from `now`; agents that are gone leave no stale series
/// behind.
fn set_gauges(g: &ScrapeGauges, now: &Scrape) {
    g.connections.set(now.connections as i64);
    for f in [
        &g.worker_up,
        &g.breaker_open,
        &g.queue_depth,
        &g.active_runs,
        &g.sessions,
    ] {
        f.clear();
    }
    for w in &now.workers {
        let l = agent_l(&w.agent);
        g.worker_up.get_or_create(&l).set(i64::from(w.up));
        g.breaker_open
            .get_or_create(&l)
            .set(i64::from(w.breaker_open));
        g.queue_depth.get_or_create(&l).set(i64::from(w.queued));
        g.active_runs.get_or_create(&l).set(i64::from(w.active));
        g.sessions.get_or_create(&l).set(i64::from(w.sessions));
    }
}

/// What a scrape reads of the moment.
#[derive(Debug, Default)]
pub struct Scrape {
    pub connections: u64,
    pub workers: Vec<WorkerNow>,
}

#[derive(Debug, Default)]
pub struct WorkerNow {
    pub agent: String,
    pub up: bool,
    pub breaker_open: bool,
    pub queued: u32,
    pub active: u32,
    pub sessions: u32,
}

const RETRY_REASONS: &[&str] = &[
    "rate_limit",
    "server_error",
    "overloaded",
    "network",
    "timeout",
];
const RECOVERY_STATUSES: &[&str] = &[
    "aborted",
    "force_cleared",
    "released",
    "rescheduled",
    "resumed",
    "replaced",
    "protected",
    "failed",
];

const APIS: &[&str] = &[
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
    "ollama",
    "unknown",
];
const OUTCOMES: &[&str] = &[
    "ok",
    "aborted",
    "rate_limit",
    "http_4xx",
    "http_5xx",
    "network",
    "timeout",
    "protocol",
    "config",
];

/// A label value from configuration (provider ids are TOML keys): the encoder writes values
/// as they are, so quotes, backslashes and line breaks must not reach it.
fn label_safe(v: &str) -> String {
    v.chars()
        .map(|c| {
            if c == '"' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// `v` if it is one of `known`, else `other` (label values stay a bounded set).
fn bounded<'a>(v: &'a str, known: &[&str]) -> &'a str {
    if known.contains(&v) {
        v
    } else {
        "other"
    }
}

fn agent_l(agent: &str) -> L {
    vec![("agent", agent.to_owned())]
}

/// `a + b`, counter by counter.
fn add(a: &WorkerCounters, b: &WorkerCounters) -> WorkerCounters {
    let mut requests: HashMap<(String, String, String), u64> = HashMap::new();
    for r in a.model_requests.iter().chain(&b.model_requests) {
        *requests
            .entry((r.provider.clone(), r.api.clone(), r.outcome.clone()))
            .or_default() += r.count;
    }
    let commits = if a.commits.count == 0 {
        b.commits.clone()
    } else if b.commits.count == 0 || a.commits.bounds != b.commits.bounds {
        a.commits.clone()
    } else {
        ipc::metrics::Histogram {
            bounds: a.commits.bounds.clone(),
            cumulative: a
                .commits
                .cumulative
                .iter()
                .zip(&b.commits.cumulative)
                .map(|(x, y)| x + y)
                .collect(),
            sum: a.commits.sum + b.commits.sum,
            count: a.commits.count + b.commits.count,
        }
    };
    WorkerCounters {
        model_requests: requests
            .into_iter()
            .map(
                |((provider, api, outcome), count)| ipc::metrics::ModelRequests {
                    provider,
                    api,
                    outcome,
                    count,
                },
            )
            .collect(),
        commits,
    }
}

impl Collector for Reported {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let slow = ConstCounter::new(SLOW_CONSUMERS.load(std::sync::atomic::Ordering::Relaxed));
        slow.encode(encoder.encode_descriptor(
            "slow_consumer_drops",
            "Client connections closed because they did not read their events.",
            None,
            slow.metric_type(),
        )?)?;
        let agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let mut totals: Vec<(&String, WorkerCounters)> = agents
            .iter()
            .map(|(id, a)| (id, add(&a.retired, &a.current)))
            .collect();
        totals.sort_by(|x, y| x.0.cmp(y.0));
        {
            let mut fam = encoder.encode_descriptor(
                "model_requests",
                "Model requests, by agent, provider, API and outcome.",
                None,
                MetricType::Counter,
            )?;
            for (agent, t) in &totals {
                let mut reqs = t.model_requests.clone();
                reqs.sort_by(|a, b| {
                    (&a.provider, &a.api, &a.outcome).cmp(&(&b.provider, &b.api, &b.outcome))
                });
                for r in reqs {
                    // What a worker sends is bounded again here.
                    let l: L = vec![
                        ("agent", label_safe(agent)),
                        ("provider", label_safe(&r.provider)),
                        ("api", bounded(&r.api, APIS).to_owned()),
                        ("outcome", bounded(&r.outcome, OUTCOMES).to_owned()),
                    ];
                    ConstCounter::new(r.count).encode(fam.encode_family(&l)?)?;
                }
            }
        }
        let mut fam = encoder.encode_descriptor(
            "sqlite_commit_seconds",
            "SQLite commit latency, by database (gateway, or agent with its id).",
            None,
            MetricType::Histogram,
        )?;
        let gateway = self
            .gateway_commits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|s| s.snapshot());
        if let Some(g) = gateway {
            let l: L = vec![("db", "gateway".to_owned())];
            let buckets = with_bounds(&dbwriter::COMMIT_BUCKETS, &g.cumulative);
            fam.encode_family(&l)?
                .encode_histogram::<L>(g.sum_seconds, g.count, &buckets, None)?;
        }
        for (agent, t) in &totals {
            if t.commits.bounds.is_empty() {
                continue;
            }
            let l: L = vec![("db", "agent".to_owned()), ("agent", label_safe(agent))];
            let buckets = with_bounds(&t.commits.bounds, &t.commits.cumulative);
            fam.encode_family(&l)?.encode_histogram::<L>(
                t.commits.sum,
                t.commits.count,
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

/// Histogram buckets as the encoder wants them: (upper bound, count in that bucket alone),
/// `+Inf` last.
fn with_bounds(bounds: &[f64], cumulative: &[u64]) -> Vec<(f64, u64)> {
    let mut prev = 0;
    bounds
        .iter()
        .copied()
        .chain(std::iter::once(f64::MAX))
        .zip(cumulative)
        .map(|(b, c)| {
            let n = c.saturating_sub(prev);
            prev = *c;
            (b, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metric families of a scrape, in the order it lists them.
    fn families(text: &str) -> Vec<&str> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .filter_map(|l| l.split(' ').next())
            .collect()
    }

    #[test]
    fn a_scrape_lists_the_families_in_registration_order() {
        // A family is listed once it has a series: one of each.
        let m = Metrics::new();
        m.run_accepted("a");
        m.run_ended("a", "ok", 10);
        m.first_token("a", 5);
        m.retry("a", "timeout");
        m.fallback("a");
        m.tool_call("a", "read", false);
        m.worker_restarted("a");
        m.worker_exited("a", true);
        m.classified("a", SessionClass::LongRunning, "x");
        m.recovered("a", RecoveryAction::AbortRun, "aborted");
        m.cluster_took("a");
        m.cluster_let_go("a", true);
        m.cluster_orphan("a");
        m.cluster_refused("a");
        m.cluster_workspace_snapshot("a", false);
        m.cluster_workspace_restored("a");
        let now = Scrape {
            connections: 0,
            workers: vec![WorkerNow {
                agent: "a".into(),
                ..WorkerNow::default()
            }],
        };
        let text = m.encode(&now);
        assert_eq!(
            families(&text),
            [
                "loopgate_runs_accepted",
                "loopgate_runs_ended",
                "loopgate_run_duration_seconds",
                "loopgate_time_to_first_token_seconds",
                "loopgate_model_retries",
                "loopgate_model_fallbacks",
                "loopgate_tool_calls",
                "loopgate_worker_restarts",
                "loopgate_worker_exits",
                "loopgate_session_diagnostics",
                "loopgate_session_recoveries",
                "loopgate_uptime_seconds",
                "loopgate_connections",
                "loopgate_worker_up",
                "loopgate_worker_breaker_open",
                "loopgate_queue_depth",
                "loopgate_active_runs",
                "loopgate_active_sessions",
                "loopgate_cluster_leases_held",
                "loopgate_cluster_leases_taken",
                "loopgate_cluster_leases_lost",
                "loopgate_cluster_runs_of_lost_owners",
                "loopgate_cluster_journal_writes_refused",
                "loopgate_cluster_workspace_snapshots",
                "loopgate_cluster_workspace_restores",
                "loopgate_cluster_workspace_pinned",
                "loopgate_slow_consumer_drops",
                "loopgate_model_requests",
                "loopgate_sqlite_commit_seconds",
            ]
        );
    }

    #[test]
    fn the_gauges_of_an_agent_that_is_gone_leave_the_next_scrape() {
        let m = Metrics::new();
        let with = |agent: &str| Scrape {
            connections: 2,
            workers: vec![WorkerNow {
                agent: agent.into(),
                up: true,
                queued: 3,
                ..WorkerNow::default()
            }],
        };
        let first = m.encode(&with("ops"));
        assert!(
            first.contains("loopgate_worker_up{agent=\"ops\"} 1"),
            "{first}"
        );
        assert!(
            first.contains("loopgate_queue_depth{agent=\"ops\"} 3"),
            "{first}"
        );
        assert!(first.contains("loopgate_connections 2"), "{first}");
        let second = m.encode(&with("main"));
        assert!(!second.contains("agent=\"ops\""), "{second}");
        assert!(
            second.contains("loopgate_worker_up{agent=\"main\"} 1"),
            "{second}"
        );
    }
}
