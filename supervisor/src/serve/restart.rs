//! A gateway that restarts itself (a config write that needs a restart, issue 39): drained
//! and stopped, it `exec`s the program it started as, in the same process (same pid,
//! arguments and environment). The config file as it was before that write is kept in the
//! state dir (`restart-fallback.toml`) until the new start serves: a start that fails once it
//! holds the state dir puts that text back and starts once more with it, so a write the
//! gateway cannot start with (an unreachable `[cluster]`) never leaves it down for good.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the config's previous text waits for the start after a restart.
fn fallback_path(state_dir: &Path) -> PathBuf {
    state_dir.join("restart-fallback.toml")
}

/// Keeps `prior` (the config file before the write) for the next start, then starts
/// `program` again in this process. Returns only if that fails.
pub(super) fn restart(program: &Path, state_dir: &Path, prior: Option<&[u8]>) -> ExitCode {
    if let Some(bytes) = prior {
        let kept = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(fallback_path(state_dir))
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes));
        if let Err(e) = kept {
            tracing::warn!(error = %e, "Cannot keep the config's previous text for the restart; restarting without a way back.");
        }
    }
    exec(program)
}

/// The start serves: the previous text is not needed any more.
pub(super) fn served(state_dir: &Path) {
    let _ = std::fs::remove_file(fallback_path(state_dir));
}

/// A start that failed after it took the state dir: if a restart left the config's previous
/// text, it is put back in `config_path` and the gateway starts again with it (once: the
/// text is gone after). `None`: nothing to go back to.
pub(super) fn recover(program: &Path, state_dir: &Path, config_path: &Path) -> Option<ExitCode> {
    let path = fallback_path(state_dir);
    let bytes = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    if let Err(e) = std::fs::write(config_path, &bytes) {
        tracing::error!(error = %e, config = %config_path.display(), "Cannot put the config's previous text back.");
        return None;
    }
    tracing::error!(
        config = %config_path.display(),
        "The gateway could not start with the config written over the Gateway; its previous text is put back and the gateway starts with it."
    );
    Some(exec(program))
}

/// Replaces this process with `program`, given this process's arguments. Returns only if
/// that fails (exit status 1).
fn exec(program: &Path) -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args
        .next()
        .unwrap_or_else(|| program.as_os_str().to_owned());
    tracing::info!(program = %program.display(), "Gateway restarting.");
    let e = std::process::Command::new(program)
        .arg0(argv0)
        .args(args)
        .exec();
    tracing::error!(error = %e, program = %program.display(), "Cannot restart the gateway; exiting.");
    ExitCode::from(1)
}
