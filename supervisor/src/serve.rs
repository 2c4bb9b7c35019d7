//! `loopgate serve`: take the state-dir lock, load config, open the gateway db (recovering runs
//! a crash left open), start the control actor and both listeners, tell systemd we are ready,
//! then handle signals and operator requests: SIGHUP reloads, SIGTERM / `loopgate drain`
//! drain, SIGINT stops fast. Stopping has two phases: `draining` (admit no runs, let
//! in-flight ones finish within the deadline) then `stopping` (close listeners, cut waits).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::config::{Config, Overrides};
use crate::control::{self, ControlDeps};
use crate::events::{now_ms, EventHub};
use crate::gateway::Gateway;
use crate::gatewaydb::{GatewayDb, RETENTION_MS};
use crate::systemd::Notifier;
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
    pub notifier: Notifier,
}

/// Why the serve loop is stopping.
enum Stop {
    Drain(Duration),
    Fast,
}

pub async fn run(opts: ServeOptions) -> ExitCode {
    let started = Instant::now();
    // Before anything can announce readiness: a SIGTERM that comes right after READY must
    // drain, not kill the process with the default action.
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
    if let Err(e) = paths::check_socket_paths(&opts.state_dir) {
        eprintln!("loopgate: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    // Everything the gateway and its workers create is private to this user: transcripts,
    // databases, sockets, the token.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    if let Err(e) = crate::secrets::private_dir(&opts.state_dir) {
        eprintln!(
            "loopgate: cannot create state directory {}: {e}",
            opts.state_dir.display()
        );
        return ExitCode::from(1);
    }
    let mut overrides = opts.overrides.clone();
    match crate::secrets::state_token(&opts.state_dir) {
        Ok(t) => overrides.state_token = Some(t),
        Err(e) => {
            eprintln!(
                "loopgate: cannot read or create {}: {e}",
                crate::secrets::token_path(&opts.state_dir).display()
            );
            return ExitCode::from(1);
        }
    }
    let load = || {
        Config::load(
            &opts.config_path,
            &opts.state_dir,
            &overrides,
            opts.config_explicit,
        )
    };
    let config = match load() {
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
    warn_unsupported(&config);
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
    let notifier = opts.notifier.clone();
    // Commands operators allowed for good, before any worker starts.
    let allowed_exec = match db.exec_allowlist().await {
        Ok(rows) => control::approvals::by_agent(rows),
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read the allow-always exec patterns; workers start with their config's allowlists.");
            Default::default()
        }
    };
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
        notifier: notifier.clone(),
        allowed_exec,
    });
    let (drain_tx, mut drain_rx) = mpsc::channel::<Duration>(4);
    let gw = Arc::new(
        Gateway::new(
            config.clone(),
            control.clone(),
            db.clone(),
            hub.clone(),
            started,
            failed,
            drain_tx,
        )
        .with_env(&opts.env)
        .with_metrics(metrics),
    );
    // `loopgate reload` requests, answered by the loop below (one at a time).
    let (reload_tx, mut reload_rx) =
        mpsc::channel::<tokio::sync::oneshot::Sender<ipc::gateway::ReloadResult>>(1);
    let _ = gw.reload_requests.set(reload_tx);
    // Sessions' own settings, before any client can start a run.
    match db.session_overrides().await {
        Ok(rows) => {
            for row in rows {
                gw.update_session_overrides(&row.session_key, |o| {
                    *o = crate::gateway::SessionOverrides {
                        model: row.model,
                        thinking: row.thinking,
                        reasoning: row.reasoning,
                        queue_mode: row
                            .queue_mode
                            .as_deref()
                            .and_then(ipc::queue::QueueMode::parse),
                    }
                });
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read the sessions' own settings; runs use their agents' models and defaults.")
        }
    }

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
    notifier.ready(&format!(
        "serving on ws://{ws_local} and {}",
        sock.display()
    ));
    let hook_fields = json!({
        "wsUrl": format!("ws://{ws_local}"),
        "socket": sock.display().to_string(),
        "stateDir": opts.state_dir.display().to_string(),
        "pid": std::process::id(),
    });
    {
        let (hooks, dir, fields) = (
            gw.config().gateway_hooks.clone(),
            opts.state_dir.clone(),
            hook_fields.clone(),
        );
        tokio::spawn(async move {
            crate::gateway_hooks::observe(
                &hooks,
                ipc::control::HookEvent::GatewayStart,
                &dir,
                fields,
            )
            .await;
        });
    }

    let stop = loop {
        tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM: draining.");
                break Stop::Drain(Duration::from_secs(gw.config().gateway.drain_timeout_seconds));
            }
            _ = int.recv() => {
                tracing::info!("SIGINT: stopping now.");
                break Stop::Fast;
            }
            Some(deadline) = drain_rx.recv() => {
                tracing::info!(deadline_ms = deadline.as_millis() as u64, "Drain requested by an operator.");
                break Stop::Drain(deadline);
            }
            _ = hup.recv() => {
                reload(&gw, &load).await;
            }
            Some(reply) = reload_rx.recv() => {
                let _ = reply.send(reload(&gw, &load).await);
            }
        }
    };
    let deadline = match stop {
        Stop::Drain(d) => d,
        Stop::Fast => Duration::ZERO,
    };
    // Phase one: admit nothing new, let in-flight runs finish (or abort them at the deadline).
    gw.draining.store(true, Ordering::Relaxed);
    notifier.stopping(&format!("draining (deadline {} s)", deadline.as_secs()));
    hub.publish(
        ipc::gateway::events::SHUTDOWN,
        &json!({"reason": if deadline.is_zero() { "stop" } else { "drain" }}),
    );
    // `gateway_stop` hooks run alongside the drain; the gateway waits for them before exiting.
    let stop_hooks = {
        let (hooks, dir) = (gw.config().gateway_hooks.clone(), opts.state_dir.clone());
        let mut fields = hook_fields;
        fields["reason"] = json!(if deadline.is_zero() { "stop" } else { "drain" });
        tokio::spawn(async move {
            crate::gateway_hooks::observe(
                &hooks,
                ipc::control::HookEvent::GatewayStop,
                &dir,
                fields,
            )
            .await;
        })
    };
    let drained = control.shutdown(deadline);
    tokio::pin!(drained);
    let hard_stop = tokio::time::sleep(deadline + Duration::from_secs(10));
    tokio::pin!(hard_stop);
    let mut extend = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = &mut drained => break,
            _ = &mut hard_stop => {
                tracing::warn!("Workers did not finish in time; stopping anyway (open runs are ended on the next start).");
                break;
            }
            _ = extend.tick() => notifier.extend_timeout(Duration::from_secs(15)),
            _ = int.recv() => {
                tracing::warn!("SIGINT during drain: stopping now; open runs are ended on the next start.");
                break;
            }
        }
    }
    // Phase two: close listeners and cut remaining waits short.
    gw.stopping.cancel();
    let _ = stop_hooks.await;
    let _ = unix_task.await;
    let _ = ws_task.await;
    // Connections deliver their last answers (waits cut short by the stop) and close.
    gw.connection_tasks.close();
    if tokio::time::timeout(Duration::from_secs(3), gw.connection_tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("Some client connections did not close in time; dropping them.");
    }
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(&addr_file);
    maintenance.abort();
    control_task.abort();
    // A clean stop leaves the whole gateway db in its file, the WAL empty.
    let gdb = paths::gateway_db(&opts.state_dir);
    match tokio::task::spawn_blocking(move || dbwriter::checkpoint(&gdb)).await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => tracing::warn!(
            "The final gateway db checkpoint could not finish; the WAL keeps the rest."
        ),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "The final gateway db checkpoint failed; the WAL keeps the rest.")
        }
        Err(e) => tracing::warn!(error = %e, "The final gateway db checkpoint did not run."),
    }
    tracing::info!("Gateway stopped.");
    ExitCode::SUCCESS
}

fn warn_unsupported(config: &Config) {
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    if config.gateway.token_from_state {
        tracing::info!(
            path = %crate::secrets::token_path(&config.state_dir).display(),
            "WebSocket clients authenticate with the gateway token in this file (OpenClaw clients: OPENCLAW_GATEWAY_TOKEN); the loopgate CLI uses the unix socket and needs none."
        );
    }
    for a in &config.agents {
        if let Some(m) = &a.model {
            if !m.api.implemented() {
                tracing::warn!(agent = a.id.as_str(), api = m.api.as_str(), "This build cannot call this provider api yet; the agent's runs will be refused.");
            }
        }
    }
}

/// SIGHUP and `loopgate reload`: load the config again; on success apply it (one reconcile
/// path), on failure keep the running config. Says what changed.
async fn reload(
    gw: &Arc<Gateway>,
    load: &impl Fn() -> Result<Config, crate::config::ConfigError>,
) -> ipc::gateway::ReloadResult {
    match load() {
        Err(e) => {
            tracing::error!(error = %e, "The config reload failed; keeping the running config.");
            ipc::gateway::ReloadResult {
                ok: false,
                error: Some(e.to_string()),
                ..Default::default()
            }
        }
        Ok(new) => {
            let old = gw.config();
            if (new.gateway.port, new.gateway.bind) != (old.gateway.port, old.gateway.bind) {
                tracing::warn!("gateway.port / gateway.bind changes apply after a restart.");
            }
            let changed = crate::config_diff::describe(&old, &new);
            for c in &changed {
                tracing::info!(change = c.as_str(), "Config reload.");
            }
            warn_unsupported(&new);
            let warnings = new.warnings.clone();
            let new = Arc::new(new);
            gw.set_config(new.clone());
            if gw.control.reload(new.clone()).await.is_ok() {
                tracing::info!(agents = new.agents.len(), "SIGHUP: config reloaded.");
            }
            ipc::gateway::ReloadResult {
                ok: true,
                changed,
                error: None,
                warnings,
            }
        }
    }
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
