//! Where things live: the state directory and the files inside it.
//!
//! State dir: `--state-dir`, else `$LOOPGATE_STATE_DIR`, else `~/.loopgate`. Config:
//! `--config`, else `$LOOPGATE_CONFIG`, else `<state>/loopgate.toml`.

use std::path::{Path, PathBuf};

/// Resolves the state directory from the flag, the environment and `$HOME` (all read by the
/// caller in `main`).
pub fn state_dir(
    flag: Option<PathBuf>,
    env: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<PathBuf, String> {
    if let Some(p) = flag.or(env) {
        return Ok(p);
    }
    home.map(|h| h.join(".loopgate"))
        .ok_or_else(|| "cannot find a state directory: pass --state-dir or set LOOPGATE_STATE_DIR (HOME is not set)".to_owned())
}

pub fn socket(state: &Path) -> PathBuf {
    state.join("gateway.sock")
}

pub fn gateway_db(state: &Path) -> PathBuf {
    state.join("gateway.sqlite")
}

pub fn default_config(state: &Path) -> PathBuf {
    state.join("loopgate.toml")
}

/// Private directory for per-spawn worker sockets.
pub fn run_dir(state: &Path) -> PathBuf {
    state.join("run")
}
