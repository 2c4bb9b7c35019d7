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
) -> Result<PathBuf, PathError> {
    if let Some(p) = flag.or(env) {
        // A relative one is taken from where the command runs, once: every path made from
        // it (workspaces, the socket) is then absolute (a relative one was read from the
        // state directory again: `state/state/...`).
        return Ok(std::path::absolute(&p).unwrap_or(p));
    }
    home.map(|h| h.join(".loopgate"))
        .ok_or(PathError::NoStateDir)
}

/// Why the state directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("cannot find a state directory: pass --state-dir or set LOOPGATE_STATE_DIR (HOME is not set)")]
    NoStateDir,
    /// The longest socket path and its length.
    #[error("state directory {} is too long for its unix sockets ({} is {len} bytes; the limit is {MAX_SOCKET_PATH}): use a shorter --state-dir", state.display(), socket.display())]
    TooLong {
        state: PathBuf,
        socket: PathBuf,
        len: usize,
    },
}

pub fn socket(state: &Path) -> PathBuf {
    state.join("gateway.sock")
}

pub fn gateway_db(state: &Path) -> PathBuf {
    state.join("gateway.sqlite")
}

/// Disk space held back for the gateway db (`[disk] reserve_mb`).
pub fn gateway_reserve(state: &Path) -> PathBuf {
    state.join("gateway.reserve")
}

pub fn default_config(state: &Path) -> PathBuf {
    state.join("loopgate.toml")
}

/// Private directory for per-spawn worker sockets.
pub fn run_dir(state: &Path) -> PathBuf {
    state.join("run")
}

/// Longest path a unix socket can bind (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The state dir's sockets (`gateway.sock`, `run/w-<12 hex>.sock`) must fit in `sun_path`;
/// a longer state-dir path is refused at start instead of starting workers that cannot bind.
pub fn check_socket_paths(state: &Path) -> Result<(), PathError> {
    let worker = run_dir(state).join("w-000000000000.sock");
    for p in [socket(state), worker] {
        let len = p.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(PathError::TooLong {
                state: state.to_owned(),
                socket: p,
                len,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_must_fit() {
        assert!(check_socket_paths(Path::new("/var/lib/loopgate")).is_ok());
        let long = format!("/tmp/{}", "d".repeat(85));
        let e = check_socket_paths(Path::new(&long)).unwrap_err();
        assert!(matches!(e, PathError::TooLong { len: 114, .. }), "{e}");
    }
}
