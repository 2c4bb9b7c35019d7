//! `loopgate serve`, one function per phase in `serve`'s order: prepare the state dir and
//! read the config (`reload::ConfigSource`), take the state-dir lock, open the gateway db
//! (recovering runs a crash left open), start the control actor and the gateway state
//! (`start_core`); then `running::Serving`: both listeners, readiness for systemd, signals
//! and operator requests (SIGHUP reloads, SIGTERM / `loopgate drain` drain, SIGINT stops
//! fast) and the two-phase stop: `draining` (admit no runs, let in-flight ones finish within
//! the deadline) then `stopping` (close listeners, cut waits).

mod config_write;
mod listener;
mod reload;
mod restart;
mod running;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::config::{Config, Overrides};
use crate::control::{self, ControlDeps};
use crate::events::{now_ms, EventHub};
use crate::gateway::Gateway;
use crate::gatewaydb::GatewayDb;
use crate::session_settings::SessionSettings;
use crate::systemd::Notifier;
use crate::{lock, paths};
use reload::{warn_unsupported, ConfigSource};
use running::{Core, Drained, Serving, Signals};

/// Exit code for bad config or a state dir held by another live gateway (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;

/// Everything `serve` takes from the command line and the environment (read once in `main`).
pub struct ServeOptions {
    pub state_dir: PathBuf,
    pub config_path: PathBuf,
    /// The config path was given explicitly, so it must exist.
    pub config_explicit: bool,
    pub overrides: Overrides,
    pub worker_bin: PathBuf,
    /// This program, as found when it started (a restart `exec`s it; found later, a
    /// replaced binary would be gone).
    pub program: PathBuf,
    /// The supervisor's environment; workers get an allow-listed subset of it.
    pub env: HashMap<String, String>,
    pub notifier: Notifier,
}

/// Serves until stopped: `SUCCESS` after a stop, `EXIT_CONFIG` for a bad config or a state
/// dir another gateway holds, 1 for any other failure to start. A config write that needs a
/// restart drains, stops and starts this same program again in this process (same pid,
/// arguments and environment); this returns only if that `exec` fails (1).
pub async fn run(opts: ServeOptions) -> ExitCode {
    let (program, state_dir, config_path) = (
        opts.program.clone(),
        opts.state_dir.clone(),
        opts.config_path.clone(),
    );
    let mut locked = false;
    match serve(opts, &mut locked).await {
        Ok(Ended::Stopped) => ExitCode::SUCCESS,
        Ok(Ended::Restart { prior }) => restart::restart(&program, &state_dir, prior.as_deref()),
        Ok(Ended::Failed) => ExitCode::from(1),
        // A start that fails once it holds the state dir may follow a restart for a write
        // it cannot start with: the previous config comes back.
        Err(code) if locked => restart::recover(&program, &state_dir, &config_path).unwrap_or(code),
        Err(code) => code,
    }
}

/// How serving ended.
enum Ended {
    Stopped,
    /// Start again; `prior` is the config file's text before the write that asked for it.
    Restart {
        prior: Option<Vec<u8>>,
    },
    /// A restart that could not be carried out cleanly.
    Failed,
}

/// The phases in order. An `Err` is the exit code of a start that failed, already said on
/// stderr.
async fn serve(opts: ServeOptions, locked: &mut bool) -> Result<Ended, ExitCode> {
    let started = Instant::now();
    // Before anything can announce readiness: a SIGTERM that comes right after READY must
    // drain, not kill the process with the default action.
    let signals = Signals::install()?;
    let source = prepare_state_dir(&opts)?;
    let config = first_config(&source)?;
    // Held until everything below is dropped.
    let _lock = acquire_lock(&opts.state_dir)?;
    *locked = true;
    warn_unsupported(&config);
    warn_start_window();
    let db = open_gateway_db(&opts.state_dir, config.disk_reserve_bytes)?;
    let cluster = config.cluster.clone();
    let core = start_core(&opts, config, db, started).await;
    let gw = core.gw.clone();
    let joined = match cluster {
        Some(settings) => Some(join_cluster(&gw, &core.journal, &settings, &opts.env).await?),
        None => None,
    };
    let mut serving = Serving::start(
        core,
        signals,
        &opts.state_dir,
        opts.notifier.clone(),
        started,
    )
    .await?;
    restart::served(&opts.state_dir);
    let stop = serving.until_stop(&source).await;
    let (stop_hooks, drained) = serving.drain(&stop).await;
    // Drained: the agents this gateway owned go to the others at once.
    if let Some(c) = joined {
        c.release_all(&gw).await;
    }
    let prior = serving.restart_prior();
    serving.stop(stop_hooks).await;
    Ok(match (stop.restarts(), drained) {
        (false, _) | (true, Drained::Stopped) => Ended::Stopped,
        (true, Drained::Complete) => Ended::Restart { prior },
        // Workers still running would be orphaned by an `exec` (their links closed, no one
        // to reap them): the process exits instead, and its workers with it.
        (true, Drained::Cut) => {
            tracing::error!("The restart's drain did not finish; exiting instead of restarting (a service manager starts the gateway again).");
            Ended::Failed
        }
    })
}

/// Says when code of this gateway's user (an agent's `exec`) can attach to a worker in the
/// instant between its start and its `prctl`, and read the provider keys it is then given:
/// a non-root gateway on a kernel whose Yama `ptrace_scope` is absent or 0.
fn warn_start_window() {
    if nix::unistd::geteuid().is_root() {
        return;
    }
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    if scope.is_some_and(|s| s >= 1) {
        return;
    }
    tracing::warn!(
        ptrace_scope = ?scope,
        "A process of this gateway's user (an agent's exec under security = \"full\") can attach to a worker as it starts and read the provider keys it is given: set kernel.yama.ptrace_scope to 1 or more, or give agents that may exec a user of their own (docs/operations.md, Security)."
    );
}

/// Cluster mode: connects to the cluster before this gateway serves anyone, and starts
/// taking its share of the agents. A cluster it cannot reach is a failed start.
async fn join_cluster(
    gw: &Arc<Gateway>,
    journal: &crate::worker_link::JournalCell,
    settings: &cluster::Settings,
    env: &HashMap<String, String>,
) -> Result<Arc<crate::clustered::Clustered>, ExitCode> {
    match crate::clustered::Clustered::connect(settings, env).await {
        Ok(c) => {
            tracing::info!(
                node = settings.node.as_str(),
                servers = settings.nats.join(", ").as_str(),
                "Joined the cluster."
            );
            gw.backend.join(c.clone());
            let _ = journal.set(c.clone());
            // Runs until the gateway stops.
            drop(c.start(gw.clone()).await);
            Ok(c)
        }
        Err(e) => {
            eprintln!("loopgate: cannot join the cluster: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// The state dir before the config is read: socket paths that fit, a private directory
/// (and umask), the gateway token.
fn prepare_state_dir(opts: &ServeOptions) -> Result<ConfigSource, ExitCode> {
    if let Err(e) = paths::check_socket_paths(&opts.state_dir) {
        eprintln!("loopgate: {e}");
        return Err(ExitCode::from(EXIT_CONFIG));
    }
    // Everything the gateway and its workers create is private to this user: transcripts,
    // databases, sockets, the token.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    if let Err(e) = std::fs::create_dir_all(&opts.state_dir) {
        eprintln!(
            "loopgate: cannot create state directory {}: {e}",
            opts.state_dir.display()
        );
        return Err(ExitCode::from(1));
    }
    // Before anything in it is read or made private: a directory someone else owns or can
    // write is refused, not adopted (issue 23 item 2).
    let euid = crate::ownership::euid();
    if let Err(e) = crate::ownership::check_state_dir(&opts.state_dir, euid)
        .and_then(|()| crate::ownership::check_inside(&opts.state_dir, &[], euid))
    {
        eprintln!("loopgate: refusing the state directory: {e}");
        return Err(ExitCode::from(EXIT_CONFIG));
    }
    if let Err(e) = crate::secrets::private_dir(&opts.state_dir) {
        eprintln!(
            "loopgate: cannot make state directory {} private: {e}",
            opts.state_dir.display()
        );
        return Err(ExitCode::from(1));
    }
    let mut overrides = opts.overrides.clone();
    match crate::secrets::state_token(&opts.state_dir) {
        Ok(t) => overrides.state_token = Some(t),
        Err(e) => {
            eprintln!(
                "loopgate: cannot read or create {}: {e}",
                crate::secrets::token_path(&opts.state_dir).display()
            );
            return Err(ExitCode::from(1));
        }
    }
    Ok(ConfigSource {
        path: opts.config_path.clone(),
        state_dir: opts.state_dir.clone(),
        overrides,
        explicit: opts.config_explicit,
    })
}

/// The config as first read; a bad one is a config error.
fn first_config(source: &ConfigSource) -> Result<Arc<Config>, ExitCode> {
    match source.load() {
        Ok(c) => Ok(Arc::new(c)),
        Err(e) => {
            eprintln!("loopgate: {e}");
            Err(ExitCode::from(EXIT_CONFIG))
        }
    }
}

/// The state-dir lock; another live gateway holding it is a config error.
fn acquire_lock(state_dir: &Path) -> Result<lock::StateLock, ExitCode> {
    match lock::acquire(state_dir) {
        Ok(l) => Ok(l),
        Err(e @ lock::LockError::Held { .. }) => {
            eprintln!("loopgate: {e}");
            Err(ExitCode::from(EXIT_CONFIG))
        }
        Err(e) => {
            eprintln!("loopgate: {e}");
            Err(ExitCode::from(1))
        }
    }
}

/// Opens the gateway db, ending the runs a previous gateway left open, with its reserve of
/// disk space (`[disk] reserve_mb`) held beside it.
fn open_gateway_db(state_dir: &Path, reserve_bytes: u64) -> Result<GatewayDb, ExitCode> {
    let reserve = (reserve_bytes > 0)
        .then(|| {
            let path = paths::gateway_reserve(state_dir);
            dbwriter::Reserve::hold(&path, reserve_bytes)
                .inspect_err(|e| {
                    tracing::warn!(
                        path = %path.display(),
                        error = %e,
                        "Cannot hold the gateway database's disk reserve; it runs without one."
                    );
                })
                .ok()
        })
        .flatten()
        .map(Arc::new);
    let opened = GatewayDb::open_reserved(&paths::gateway_db(state_dir), now_ms(), reserve);
    let (db, recovered) = match opened {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "loopgate: cannot open {}: {e}",
                paths::gateway_db(state_dir).display()
            );
            return Err(ExitCode::from(1));
        }
    };
    if recovered > 0 {
        tracing::warn!(
            runs = recovered,
            "Ended runs left open by a previous gateway as errors."
        );
    }
    Ok(db)
}

/// Starts the control actor and builds the gateway state: the operators' allow-always
/// patterns go to the actor before any worker starts, the sessions' own settings to the
/// gateway before any client can start a run.
async fn start_core(
    opts: &ServeOptions,
    config: Arc<Config>,
    db: GatewayDb,
    started: Instant,
) -> Core {
    let hub = EventHub::new();
    let cluster = crate::backend::Backend::default();
    let journal = crate::worker_link::JournalCell::default();
    let allowed_exec = allowed_exec(&db).await;
    let metrics = crate::metrics::Metrics::new();
    metrics.gateway_commits(db.commits.clone());
    let (control, failed, control_task) = control::start(ControlDeps {
        metrics: metrics.clone(),
        config: config.clone(),
        db: db.clone(),
        hub: hub.clone(),
        worker_bin: opts.worker_bin.clone(),
        env: opts.env.clone(),
        started,
        notifier: opts.notifier.clone(),
        allowed_exec,
        cluster: journal.clone(),
    });
    let (drain_tx, drain_rx) = mpsc::channel::<Duration>(4);
    let gw = Arc::new(
        Gateway::new(config, control, db.clone(), hub, started, failed, drain_tx)
            .with_env(&opts.env)
            .with_metrics(metrics)
            .with_backend(cluster),
    );
    let (reload_tx, reload_rx) = mpsc::channel::<crate::gateway::ConfigRequest>(1);
    let _ = gw.reload_requests.set(reload_tx);
    restore_session_overrides(&gw.sessions, &db).await;
    Core {
        gw,
        journal,
        control_task,
        drain_rx,
        reload_rx,
    }
}

/// Commands operators allowed for good, by agent.
async fn allowed_exec(db: &GatewayDb) -> HashMap<String, Vec<String>> {
    match db.exec_allowlist().await {
        Ok(rows) => control::approvals::by_agent(rows),
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read the allow-always exec patterns; workers start with their config's allowlists.");
            Default::default()
        }
    }
}

/// Sessions' own settings (model, thinking, reasoning, queue mode and options, verbose level,
/// usage footer, trace level), kept in the
/// gateway db, restored into `sessions`.
async fn restore_session_overrides(sessions: &SessionSettings, db: &GatewayDb) {
    match db.session_overrides().await {
        Ok(rows) => {
            for row in rows {
                sessions.update(&row.session_key, |o| {
                    *o = crate::session_settings::SessionOverrides {
                        model: row.model,
                        thinking: row.thinking,
                        reasoning: row.reasoning,
                        queue_mode: row
                            .queue_mode
                            .as_deref()
                            .and_then(ipc::queue::QueueMode::parse),
                        verbose: row
                            .verbose
                            .as_deref()
                            .and_then(ipc::thinking::VerboseLevel::parse),
                        queue_options: crate::session_settings::QueueOptions {
                            debounce_ms: row.queue_options.debounce_ms,
                            cap: row.queue_options.cap,
                            drop: row
                                .queue_options
                                .drop
                                .as_deref()
                                .and_then(ipc::queue::QueueDrop::parse),
                        },
                        response_usage: row
                            .response_usage
                            .as_deref()
                            .and_then(ipc::footer::ResponseUsage::parse),
                        trace: row
                            .trace_level
                            .as_deref()
                            .and_then(ipc::footer::TraceLevel::parse),
                    }
                });
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read the sessions' own settings; runs use their agents' models and defaults.")
        }
    }
}
