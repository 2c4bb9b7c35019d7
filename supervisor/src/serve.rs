//! `loopgate serve`: take the state-dir lock, load config, open the gateway db (recovering runs
//! a crash left open), start the control actor and the listeners, then wait for a signal and
//! stop in two phases (announce with the `stopping` token, then wait for workers to drain).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};

use crate::config::{Config, Overrides};
use crate::control::{self, ControlDeps};
use crate::events::{now_ms, EventHub};
use crate::gateway::Gateway;
use crate::gatewaydb::{GatewayDb, RETENTION_MS};
use crate::{listen_unix, listen_ws, lock, paths};

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
    /// The supervisor's environment; workers get an allow-listed subset of it.
    pub env: HashMap<String, String>,
}

/// Environment variables every worker inherits (plus each provider's `api_key_env`).
const WORKER_ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "LOOPGATE_LOG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

fn worker_env(config: &Config, env: &HashMap<String, String>) -> Vec<(String, String)> {
    let mut names: Vec<&str> = WORKER_ENV_ALLOW.to_vec();
    for a in &config.agents {
        if let Some(k) = a.model.as_ref().and_then(|m| m.api_key_env.as_deref()) {
            names.push(k);
        }
    }
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|k| env.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect()
}

pub async fn run(opts: ServeOptions) -> ExitCode {
    let started = Instant::now();
    if let Err(e) = std::fs::create_dir_all(&opts.state_dir) {
        eprintln!(
            "loopgate: cannot create state directory {}: {e}",
            opts.state_dir.display()
        );
        return ExitCode::from(1);
    }
    let config = match Config::load(
        &opts.config_path,
        &opts.state_dir,
        &opts.overrides,
        opts.config_explicit,
    ) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("loopgate: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let _lock = match lock::acquire(&opts.state_dir) {
        Ok(l) => l,
        Err(e @ lock::LockError::Held { .. }) => {
            eprintln!("loopgate: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(e) => {
            eprintln!("loopgate: {e}");
            return ExitCode::from(1);
        }
    };
    for a in &config.agents {
        if let Some(m) = &a.model {
            if !m.api.implemented() {
                tracing::warn!(agent = a.id.as_str(), api = m.api.as_str(), "This build cannot call this provider api yet; the agent's runs will be refused.");
            }
        }
    }
    let (db, recovered) = match GatewayDb::open(&paths::gateway_db(&opts.state_dir), now_ms()) {
        Ok(x) => x,
        Err(e) => {
            eprintln!(
                "loopgate: cannot open {}: {e}",
                paths::gateway_db(&opts.state_dir).display()
            );
            return ExitCode::from(1);
        }
    };
    if recovered > 0 {
        tracing::warn!(
            runs = recovered,
            "Ended runs left open by a previous gateway as errors."
        );
    }
    let hub = EventHub::new();
    let (control, control_task) = control::start(ControlDeps {
        config: config.clone(),
        db: db.clone(),
        hub: hub.clone(),
        worker_bin: opts.worker_bin.clone(),
        worker_env: worker_env(&config, &opts.env),
        started,
    });
    let gw = Arc::new(Gateway::new(
        config.clone(),
        control.clone(),
        db.clone(),
        hub.clone(),
        started,
    ));

    let sock = paths::socket(&opts.state_dir);
    let listener = match listen_unix::bind(&sock) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("loopgate: cannot listen on {}: {e}", sock.display());
            return ExitCode::from(1);
        }
    };
    let ws_addr = std::net::SocketAddr::new(config.gateway.bind, config.gateway.port);
    let ws_listener = match tokio::net::TcpListener::bind(ws_addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("loopgate: cannot listen on ws://{ws_addr}: {e} (set gateway.port, or --port 0 for a free port)");
            return ExitCode::from(1);
        }
    };
    let ws_local = match ws_listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loopgate: cannot read the WebSocket listener address: {e}");
            return ExitCode::from(1);
        }
    };
    let addr_file = opts.state_dir.join("gateway.addr");
    if let Err(e) = std::fs::write(&addr_file, format!("{ws_local}\n")) {
        tracing::warn!(file = %addr_file.display(), error = %e, "Cannot write the gateway address file.");
    }
    let unix_task = tokio::spawn(listen_unix::serve(listener, gw.clone()));
    let ws_task = tokio::spawn(listen_ws::serve(ws_listener, gw.clone()));
    let maintenance = tokio::spawn(maintenance(gw.clone()));
    tracing::info!(
        pid = std::process::id(),
        socket = %sock.display(),
        ws = %format!("ws://{ws_local}"),
        config = %config.path.display(),
        agents = config.agents.len(),
        startup_ms = started.elapsed().as_millis() as u64,
        "Gateway ready."
    );

    let (mut term, mut int, mut hup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(t), Ok(i), Ok(h)) => (t, i, h),
        _ => {
            eprintln!("loopgate: cannot install signal handlers");
            return ExitCode::from(1);
        }
    };
    let deadline = loop {
        tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM: draining.");
                break Duration::from_secs(config.gateway.drain_timeout_seconds);
            }
            _ = int.recv() => {
                tracing::info!("SIGINT: stopping.");
                break Duration::ZERO;
            }
            _ = hup.recv() => {
                tracing::warn!("SIGHUP: config reload is not supported by this build yet; restart to apply changes.");
            }
        }
    };
    gw.draining.store(true, Ordering::Relaxed);
    hub.publish(
        ipc::gateway::events::SHUTDOWN,
        &json!({"reason": if deadline.is_zero() { "stop" } else { "drain" }}),
    );
    gw.stopping.cancel();
    let _ = unix_task.await;
    let _ = ws_task.await;
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(&addr_file);
    if tokio::time::timeout(
        deadline + Duration::from_secs(10),
        control.shutdown(deadline),
    )
    .await
    .is_err()
    {
        tracing::warn!("Workers did not finish in time; stopping anyway (open runs are ended on the next start).");
    }
    maintenance.abort();
    drop(control);
    control_task.abort();
    tracing::info!("Gateway stopped.");
    ExitCode::SUCCESS
}

/// Periodic work: `tick` events and pruning of old run records.
async fn maintenance(gw: Arc<Gateway>) {
    let mut tick = tokio::time::interval(Duration::from_millis(ipc::gateway::TICK_INTERVAL_MS));
    tick.tick().await;
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        gw.hub
            .publish(ipc::gateway::events::TICK, &json!({"ts": now_ms()}));
        n += 1;
        if n % 120 == 1 {
            match gw.db.prune(now_ms().saturating_sub(RETENTION_MS)).await {
                Ok(0) => {}
                Ok(k) => tracing::info!(runs = k, "Pruned old run records."),
                Err(e) => tracing::warn!(error = %e, "Pruning run records failed."),
            }
        }
    }
}
