//! The gateway once it is up: both listeners bound and served, readiness reported, the
//! serve loop (signals, `loopgate drain` / `loopgate reload` requests), then the two-phase
//! stop: `drain` (admit no runs, let in-flight ones finish within the deadline) then `stop`
//! (close listeners, cut waits, checkpoint the gateway db).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::HookEvent;
use serde_json::{json, Value};
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::listener::WsListener;
use super::reload::{reload, ConfigSource};
use crate::config::Config;
use crate::events::{now_ms, EventHub};
use crate::gateway::{ConfigRequest, Gateway};
use crate::gatewaydb::{GatewayDb, RETENTION_MS};
use crate::systemd::Notifier;
use crate::{listen_unix, paths};

/// SIGTERM, SIGINT and SIGHUP, installed before anything else.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// From here on SIGTERM and SIGINT no longer end the process by their default action.
    pub(super) fn install() -> Result<Self, ExitCode> {
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(term), Ok(int), Ok(hup)) => Ok(Self { term, int, hup }),
            _ => {
                eprintln!("loopgate: cannot install signal handlers");
                Err(ExitCode::from(1))
            }
        }
    }
}

/// The control actor and the gateway's shared state, before any listener.
pub(super) struct Core {
    pub(super) gw: Arc<Gateway>,
    /// Cluster mode: where the control actor finds the journal for its workers.
    pub(super) journal: crate::worker_link::JournalCell,
    pub(super) control_task: JoinHandle<()>,
    /// `loopgate drain` requests: a deadline each.
    pub(super) drain_rx: mpsc::Receiver<Duration>,
    /// `loopgate reload` requests, answered by the serve loop (one at a time).
    pub(super) reload_rx: mpsc::Receiver<crate::gateway::ConfigRequest>,
}

/// Both listeners, bound.
struct Listeners {
    sock: PathBuf,
    unix: UnixListener,
    ws: TcpListener,
    ws_local: SocketAddr,
}

/// Binds the unix socket (replacing a stale one: the lock is held) and the WebSocket port,
/// which may be 0 for a free one.
async fn bind_listeners(state_dir: &Path, config: &Config) -> Result<Listeners, ExitCode> {
    let sock = paths::socket(state_dir);
    let unix = match listen_unix::bind(&sock) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("loopgate: cannot listen on {}: {e}", sock.display());
            return Err(ExitCode::from(1));
        }
    };
    let ws_addr = SocketAddr::new(config.gateway.bind, config.gateway.port);
    let ws = match TcpListener::bind(ws_addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("loopgate: cannot listen on ws://{ws_addr}: {e} (set gateway.port, or --port 0 for a free port)");
            return Err(ExitCode::from(1));
        }
    };
    let ws_local = match ws.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loopgate: cannot read the WebSocket listener address: {e}");
            return Err(ExitCode::from(1));
        }
    };
    Ok(Listeners {
        sock,
        unix,
        ws,
        ws_local,
    })
}

/// What a restart's clients are told to expect beyond the drain: a start takes well under
/// this.
const RESTART_TIME: Duration = Duration::from_secs(5);

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drained {
    /// Every worker finished.
    Complete,
    /// The deadline passed with workers still running.
    Cut,
    /// An operator asked for a stop (SIGINT; during a restart's drain also SIGTERM or
    /// `loopgate drain`): no restart follows.
    Stopped,
}

/// Why the serve loop is stopping.
pub(super) enum Stop {
    Drain(Duration),
    Fast,
    /// A config write needs a restart: drain, then start again in this process (`exec`).
    Restart(Duration),
}

impl Stop {
    /// The gateway starts again once stopped.
    pub(super) fn restarts(&self) -> bool {
        matches!(self, Stop::Restart(_))
    }
}

/// The gateway from its listeners' start to its stop.
pub(super) struct Serving {
    core: Core,
    signals: Signals,
    notifier: Notifier,
    state_dir: PathBuf,
    sock: PathBuf,
    /// `gateway.addr`: the WebSocket listener's address, for clients and tests.
    addr_file: PathBuf,
    unix_task: JoinHandle<()>,
    ws: WsListener,
    maintenance: JoinHandle<()>,
    /// What the `gateway_start` hooks heard; the `gateway_stop` hooks hear it with a reason.
    hook_fields: Value,
    /// An operator asked for a stop while a restart drained.
    stop_asked: bool,
    /// The config file's text before the write that asked for a restart.
    restart_prior: Option<Vec<u8>>,
}

impl Serving {
    /// Binds both listeners, serves them, writes the address file, reports readiness (log,
    /// sd_notify) and runs the `gateway_start` hooks.
    pub(super) async fn start(
        core: Core,
        signals: Signals,
        state_dir: &Path,
        notifier: Notifier,
        started: Instant,
    ) -> Result<Self, ExitCode> {
        let gw = core.gw.clone();
        let config = gw.config();
        let Listeners {
            sock,
            unix,
            ws,
            ws_local,
        } = bind_listeners(state_dir, &config).await?;
        let addr_file = state_dir.join("gateway.addr");
        crate::rpc::cron::start(&gw).await;
        let unix_task = tokio::spawn(listen_unix::serve(unix, gw.clone()));
        let ws = WsListener::start(
            &gw,
            ws,
            SocketAddr::new(config.gateway.bind, config.gateway.port),
            addr_file.clone(),
        );
        let maintenance = tokio::spawn(maintenance(gw.hub.clone(), gw.db.clone()));
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
            "stateDir": state_dir.display().to_string(),
            "pid": std::process::id(),
        });
        spawn_hooks(
            &gw.config(),
            state_dir,
            HookEvent::GatewayStart,
            hook_fields.clone(),
        );
        Ok(Self {
            core,
            signals,
            notifier,
            state_dir: state_dir.to_owned(),
            sock,
            addr_file,
            unix_task,
            ws,
            maintenance,
            hook_fields,
            stop_asked: false,
            restart_prior: None,
        })
    }

    /// Serves until a signal or an operator says to stop: SIGHUP and `loopgate reload`
    /// reload, SIGTERM and `loopgate drain` drain, SIGINT stops now.
    pub(super) async fn until_stop(&mut self, source: &ConfigSource) -> Stop {
        let Self {
            core,
            signals,
            ws,
            restart_prior,
            ..
        } = self;
        let gw = &core.gw;
        // A written config that needs a restart: when it begins.
        let mut restart_at: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(restart_at.unwrap_or_else(tokio::time::Instant::now)), if restart_at.is_some() => {
                    tracing::info!("Restarting for a config change that needs it.");
                    break Stop::Restart(Duration::from_secs(gw.config().gateway.drain_timeout_seconds));
                }
                _ = signals.term.recv() => {
                    tracing::info!("SIGTERM: draining.");
                    break Stop::Drain(Duration::from_secs(gw.config().gateway.drain_timeout_seconds));
                }
                _ = signals.int.recv() => {
                    tracing::info!("SIGINT: stopping now.");
                    break Stop::Fast;
                }
                Some(deadline) = core.drain_rx.recv() => {
                    tracing::info!(deadline_ms = deadline.as_millis() as u64, "Drain requested by an operator.");
                    break Stop::Drain(deadline);
                }
                _ = signals.hup.recv() => {
                    reload(gw, source, ws).await;
                }
                Some(request) = core.reload_rx.recv() => match request {
                    ConfigRequest::Reload(reply) => {
                        let _ = reply.send(reload(gw, source, ws).await);
                    }
                    ConfigRequest::Write(w, reply) => {
                        let delay = w.restart_delay();
                        // The text a failed start after a restart goes back to.
                        let before = std::fs::read(&gw.config().path).ok();
                        let written = super::config_write::write(gw, source, ws, w).await;
                        let restart = written.as_ref().is_ok_and(|r| {
                            r.sentinel.as_ref().is_some_and(|s| s.payload.stats.requires_restart)
                        });
                        if restart && restart_at.is_none() {
                            restart_at = Some(tokio::time::Instant::now() + delay);
                            *restart_prior = before;
                        }
                        let _ = reply.send(written);
                    }
                },
            }
        }
    }

    /// Phase one: admit nothing new, let in-flight runs finish (or abort them at the
    /// deadline; at once for a fast stop). The `gateway_stop` hooks run alongside; their
    /// task is returned for phase two to wait on.
    pub(super) async fn drain(&mut self, stop: &Stop) -> (JoinHandle<()>, Drained) {
        let deadline = match *stop {
            Stop::Drain(d) | Stop::Restart(d) => d,
            Stop::Fast => Duration::ZERO,
        };
        let reason = match stop {
            Stop::Restart(_) => "restart",
            _ if deadline.is_zero() => "stop",
            _ => "drain",
        };
        let gw = self.core.gw.clone();
        gw.draining.store(true, Ordering::Relaxed);
        let status = format!("draining (deadline {} s)", deadline.as_secs());
        if stop.restarts() {
            // systemd sees a reload: the same process is ready again after it.
            self.notifier.reloading(&status);
        } else {
            self.notifier.stopping(&status);
        }
        let shutdown = ipc::gateway::ShutdownEvent {
            reason: reason.into(),
            restart_expected_ms: stop
                .restarts()
                .then(|| (deadline + RESTART_TIME).as_millis() as u64),
        };
        gw.hub.publish_deferred(&crate::events::Deferred::event(
            ipc::gateway::events::SHUTDOWN,
            &shutdown,
        ));
        // The gateway waits for the `gateway_stop` hooks before exiting.
        let mut fields = self.hook_fields.take();
        fields["reason"] = json!(reason);
        let stop_hooks = spawn_hooks(
            &gw.config(),
            &self.state_dir,
            HookEvent::GatewayStop,
            fields,
        );
        let drained = gw.control.shutdown(deadline);
        tokio::pin!(drained);
        let hard_stop = tokio::time::sleep(deadline + Duration::from_secs(10));
        tokio::pin!(hard_stop);
        let mut extend = tokio::time::interval(Duration::from_secs(5));
        let restarting = stop.restarts();
        let how = loop {
            tokio::select! {
                _ = &mut drained => break Drained::Complete,
                _ = &mut hard_stop => {
                    tracing::warn!("Workers did not finish in time; stopping anyway (open runs are ended on the next start).");
                    break Drained::Cut;
                }
                _ = extend.tick() => self.notifier.extend_timeout(Duration::from_secs(15)),
                _ = self.signals.int.recv() => {
                    tracing::warn!("SIGINT during drain: stopping now; open runs are ended on the next start.");
                    break Drained::Stopped;
                }
                // A restart's drain is a stop once an operator asks for one.
                _ = self.signals.term.recv(), if restarting => {
                    tracing::info!("SIGTERM during a restart's drain: the gateway stops instead of restarting.");
                    self.notifier.stopping("stopping");
                    self.stop_asked = true;
                }
                Some(_) = self.core.drain_rx.recv(), if restarting => {
                    tracing::info!("Drain requested during a restart's drain: the gateway stops instead of restarting.");
                    self.notifier.stopping("stopping");
                    self.stop_asked = true;
                }
            }
        };
        let how = match how {
            Drained::Complete if self.stop_asked => Drained::Stopped,
            other => other,
        };
        (stop_hooks, how)
    }

    /// The config file's text before the write that asked for a restart, if one did.
    pub(super) fn restart_prior(&mut self) -> Option<Vec<u8>> {
        self.restart_prior.take()
    }

    /// Phase two: close listeners and cut remaining waits short, let connections deliver
    /// their last answers, remove the socket and address file, stop the background tasks,
    /// checkpoint the gateway db.
    pub(super) async fn stop(mut self, stop_hooks: JoinHandle<()>) {
        let gw = &self.core.gw;
        gw.stopping.cancel();
        let _ = stop_hooks.await;
        let _ = self.unix_task.await;
        self.ws.stopped().await;
        // Connections deliver their last answers (waits cut short by the stop) and close.
        gw.connection_tasks.close();
        if tokio::time::timeout(Duration::from_secs(3), gw.connection_tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("Some client connections did not close in time; dropping them.");
        }
        let _ = std::fs::remove_file(&self.sock);
        let _ = std::fs::remove_file(&self.addr_file);
        self.maintenance.abort();
        self.core.control_task.abort();
        checkpoint_gateway_db(&self.state_dir).await;
        tracing::info!("Gateway stopped.");
    }
}

/// Runs the config's `gateway_start` / `gateway_stop` hooks in the state dir, in their own
/// task.
fn spawn_hooks(
    config: &Config,
    state_dir: &Path,
    event: HookEvent,
    fields: Value,
) -> JoinHandle<()> {
    let (hooks, dir) = (config.gateway_hooks.clone(), state_dir.to_owned());
    tokio::spawn(async move {
        crate::gateway_hooks::observe(&hooks, event, &dir, fields).await;
    })
}

/// A clean stop leaves the whole gateway db in its file, the WAL empty.
async fn checkpoint_gateway_db(state_dir: &Path) {
    let gdb = paths::gateway_db(state_dir);
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
}

/// Periodic work: `tick` events on the hub and pruning of old run records in the gateway db.
async fn maintenance(hub: EventHub, db: GatewayDb) {
    let mut tick = tokio::time::interval(Duration::from_millis(ipc::gateway::TICK_INTERVAL_MS));
    tick.tick().await;
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        hub.publish(ipc::gateway::events::TICK, &json!({"ts": now_ms()}));
        n += 1;
        if n % 120 == 1 {
            match db.prune(now_ms().saturating_sub(RETENTION_MS)).await {
                Ok(0) => {}
                Ok(k) => tracing::info!(runs = k, "Pruned old run records."),
                Err(e) => tracing::warn!(error = %e, "Pruning run records failed."),
            }
        }
    }
}
