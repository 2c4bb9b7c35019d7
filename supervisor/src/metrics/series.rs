//! The metric families the supervisor keeps itself, grouped by concern, each registered
//! with its name and help text. Registration order is the order a scrape lists them in.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

/// A label set.
pub(super) type L = Vec<(&'static str, String)>;

/// Registers `metric` under `name` and gives back its handle (the registry keeps a clone).
fn registered<M: Metric + Clone>(r: &mut Registry, name: &str, help: &str, metric: M) -> M {
    r.register(name, help, metric.clone());
    metric
}

/// Runs as the supervisor sees them: accepted and ended, how long they took, and what
/// happened on the way (retries, fallbacks, tool calls).
pub(super) struct RunSeries {
    pub(super) accepted: Family<L, Counter>,
    pub(super) ended: Family<L, Counter>,
    pub(super) duration: Family<L, Histogram>,
    pub(super) first_token: Family<L, Histogram>,
    pub(super) retries: Family<L, Counter>,
    pub(super) fallbacks: Family<L, Counter>,
    pub(super) tool_calls: Family<L, Counter>,
}

impl RunSeries {
    /// Registers the run families with `r`, in scrape order.
    pub(super) fn register(r: &mut Registry) -> RunSeries {
        RunSeries {
            accepted: registered(
                r,
                "runs_accepted",
                "Runs accepted, by agent",
                Family::default(),
            ),
            ended: registered(
                r,
                "runs_ended",
                "Runs ended, by agent and status (ok, error, aborted, timeout)",
                Family::default(),
            ),
            duration: registered(
                r,
                "run_duration_seconds",
                "Run duration from start to outcome, by agent",
                Family::new_with_constructor(run_buckets as fn() -> _),
            ),
            first_token: registered(
                r,
                "time_to_first_token_seconds",
                "Time from a run's start to its first reply text, by agent",
                Family::new_with_constructor(token_buckets as fn() -> _),
            ),
            retries: registered(
                r,
                "model_retries",
                "Model attempts retried after a failure, by agent and reason",
                Family::default(),
            ),
            fallbacks: registered(
                r,
                "model_fallbacks",
                "Runs that moved on to a fallback model, by agent",
                Family::default(),
            ),
            tool_calls: registered(
                r,
                "tool_calls",
                "Tool calls finished, by agent, tool and result (ok, error)",
                Family::default(),
            ),
        }
    }
}

/// Workers that exited and were started again, and stuck sessions reported and recovered.
pub(super) struct HealthSeries {
    pub(super) worker_restarts: Family<L, Counter>,
    pub(super) worker_exits: Family<L, Counter>,
    pub(super) diagnostics: Family<L, Counter>,
    pub(super) recoveries: Family<L, Counter>,
}

impl HealthSeries {
    /// Registers the worker and session health families with `r`, in scrape order.
    pub(super) fn register(r: &mut Registry) -> HealthSeries {
        HealthSeries {
            worker_restarts: registered(
                r,
                "worker_restarts",
                "Worker processes started again after one exited, by agent",
                Family::default(),
            ),
            worker_exits: registered(
                r,
                "worker_exits",
                "Worker processes that exited, by agent and cause (clean, crash)",
                Family::default(),
            ),
            diagnostics: registered(
                r,
                "session_diagnostics",
                "Stuck-session reports, by agent, state (long_running, stalled, stuck) and reason",
                Family::default(),
            ),
            recoveries: registered(
                r,
                "session_recoveries",
                "Stuck-session recoveries completed, by agent, action and status",
                Family::default(),
            ),
        }
    }
}

/// Gauges of the moment, set at scrape time (`Metrics::encode`).
pub(super) struct ScrapeGauges {
    pub(super) uptime: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub(super) connections: Gauge,
    pub(super) worker_up: Family<L, Gauge>,
    pub(super) breaker_open: Family<L, Gauge>,
    pub(super) queue_depth: Family<L, Gauge>,
    pub(super) active_runs: Family<L, Gauge>,
    pub(super) sessions: Family<L, Gauge>,
}

impl ScrapeGauges {
    /// Registers the gauges of the moment with `r`, in scrape order.
    pub(super) fn register(r: &mut Registry) -> ScrapeGauges {
        ScrapeGauges {
            uptime: registered(
                r,
                "uptime_seconds",
                "Seconds since the gateway started",
                Gauge::default(),
            ),
            connections: registered(
                r,
                "connections",
                "Client connections open now",
                Gauge::default(),
            ),
            worker_up: registered(
                r,
                "worker_up",
                "1 when the agent's worker is ready, by agent",
                Family::default(),
            ),
            breaker_open: registered(
                r,
                "worker_breaker_open",
                "1 when the agent's crash-loop breaker has tripped, by agent",
                Family::default(),
            ),
            queue_depth: registered(
                r,
                "queue_depth",
                "Messages waiting in the agent's session lanes",
                Family::default(),
            ),
            active_runs: registered(
                r,
                "active_runs",
                "Runs executing in the agent's worker now",
                Family::default(),
            ),
            sessions: registered(
                r,
                "active_sessions",
                "Sessions with a run running or queued, by agent",
                Family::default(),
            ),
        }
    }
}

/// Cluster mode: leases held now, taken, lost; runs of lost owners ended here; journal
/// writes the engine refused.
pub(super) struct ClusterSeries {
    pub(super) leases: Gauge,
    pub(super) takeovers: Family<L, Counter>,
    pub(super) lost: Family<L, Counter>,
    pub(super) orphans: Family<L, Counter>,
    pub(super) refused: Family<L, Counter>,
    pub(super) snapshots: Family<L, Counter>,
    pub(super) restores: Family<L, Counter>,
    pub(super) pinned: Family<L, Gauge>,
}

impl ClusterSeries {
    /// Registers the cluster-mode families with `r`, in scrape order.
    pub(super) fn register(r: &mut Registry) -> ClusterSeries {
        let leases = Gauge::default();
        r.register(
            "cluster_leases_held",
            "Cluster mode: agents this gateway owns now",
            leases.clone(),
        );
        let takeovers = Family::<L, Counter>::default();
        r.register(
            "cluster_leases_taken",
            "Cluster mode: agent leases this gateway took, by agent",
            takeovers.clone(),
        );
        let lost = Family::<L, Counter>::default();
        r.register(
            "cluster_leases_lost",
            "Cluster mode: agent leases this gateway lost without giving them up, by agent",
            lost.clone(),
        );
        let orphans = Family::<L, Counter>::default();
        r.register(
            "cluster_runs_of_lost_owners",
            "Cluster mode: runs a lost owner had started, ended error here, by agent",
            orphans.clone(),
        );
        let refused = Family::<L, Counter>::default();
        r.register(
            "cluster_journal_writes_refused",
            "Cluster mode: transactions of this gateway's workers the agent's journal refused (fenced: another record came first), by agent",
            refused.clone(),
        );
        let snapshots = Family::<L, Counter>::default();
        r.register(
            "cluster_workspace_snapshots",
            "Cluster mode: workspace snapshots this gateway stored, by agent",
            snapshots.clone(),
        );
        let restores = Family::<L, Counter>::default();
        r.register(
            "cluster_workspace_restores",
            "Cluster mode: workspaces this gateway restored from a snapshot on taking their agent, by agent",
            restores.clone(),
        );
        let pinned = Family::<L, Gauge>::default();
        r.register(
            "cluster_workspace_pinned",
            "Cluster mode: 1 while the agent's workspace is over cluster.workspace_max_mib here (not snapshotted; the agent stays on this gateway), by agent",
            pinned.clone(),
        );
        ClusterSeries {
            leases,
            takeovers,
            lost,
            orphans,
            refused,
            snapshots,
            restores,
            pinned,
        }
    }
}

fn run_buckets() -> Histogram {
    // 50 ms .. ~27 min.
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

fn token_buckets() -> Histogram {
    // 10 ms .. ~5.5 min.
    Histogram::new(exponential_buckets(0.01, 2.0, 16))
}
