//! Where `serve` reads its config from, and a reload (SIGHUP or `loopgate reload`): load
//! again, apply through the control actor's one reconcile path, say what changed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ipc::gateway::ReloadResult;

use super::listener::WsListener;
use crate::config::{Config, ConfigError, Overrides};
use crate::gateway::Gateway;

/// Where the config comes from, at start and on every reload.
pub(super) struct ConfigSource {
    pub(super) path: PathBuf,
    pub(super) state_dir: PathBuf,
    /// The command line's overrides, with the state dir's own gateway token.
    pub(super) overrides: Overrides,
    pub(super) explicit: bool,
}

impl ConfigSource {
    /// Loads the config after checking that only the operator could have written it, and
    /// then what its agents will run or read (issue 23 item 2; at start and on every reload).
    pub(super) fn load(&self) -> Result<Config, ConfigError> {
        let euid = crate::ownership::euid();
        let refused = |e: crate::ownership::UnsafePath| ConfigError {
            file: self.path.clone(),
            line: None,
            problem: crate::config::ConfigProblem::Unsafe(Box::new(e)),
        };
        crate::ownership::check_config_file(&self.path, euid).map_err(refused)?;
        let config = Config::load(&self.path, &self.state_dir, &self.overrides, self.explicit)?;
        let trusted = crate::ownership::agent_paths(&config.agents);
        crate::ownership::check_inside(&self.state_dir, &trusted, euid).map_err(refused)?;
        Ok(config)
    }
}

/// Says at start and after each reload what the config cannot do in this build.
pub(super) fn warn_unsupported(config: &Config) {
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
pub(super) async fn reload(
    gw: &Arc<Gateway>,
    source: &ConfigSource,
    ws: &mut WsListener,
) -> ReloadResult {
    match source.load() {
        Err(e) => {
            tracing::error!(error = %e, "The config reload failed; keeping the running config.");
            ReloadResult {
                ok: false,
                error: Some(e.to_string()),
                ..Default::default()
            }
        }
        Ok(new) => {
            // A new listener address is bound first: one that cannot be refuses the reload.
            let wanted = SocketAddr::new(new.gateway.bind, new.gateway.port);
            let moved = match ws.prepare(gw, wanted).await {
                Ok(moved) => moved,
                Err(e) => {
                    tracing::error!(error = %e, "The config reload failed; keeping the running config.");
                    return ReloadResult {
                        ok: false,
                        error: Some(e),
                        ..Default::default()
                    };
                }
            };
            ws.before_apply(moved.as_ref()).await;
            let old = gw.config();
            let changed = crate::config_diff::describe(&old, &new);
            for c in &changed {
                tracing::info!(change = c.as_str(), "Config reload.");
            }
            warn_unsupported(&new);
            let warnings = new.warnings.clone();
            let new = Arc::new(new);
            gw.set_config(new.clone());
            if let Some(m) = moved {
                ws.finish(gw, m).await;
            }
            if gw.control.reload(new.clone()).await.is_ok() {
                tracing::info!(agents = new.agents.len(), "Config reloaded.");
            }
            ReloadResult {
                ok: true,
                changed,
                error: None,
                warnings,
            }
        }
    }
}
