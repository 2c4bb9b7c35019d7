//! The one module of the supervisor allowed to use `unsafe`: code that runs in a spawned
//! child between `fork` and `exec`.
#![allow(unsafe_code)]

use nix::sys::signal::Signal;

/// Makes `cmd`'s child get SIGKILL when the supervisor thread that spawned it dies (no
/// orphaned workers, R-J3). If the supervisor is already gone by the time the child runs this,
/// the child exits at once instead of running unsupervised.
pub fn kill_child_with_parent(cmd: &mut tokio::process::Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It only calls
    // async-signal-safe functions (prctl, getppid) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other(
                    "supervisor exited before the worker started",
                ));
            }
            Ok(())
        });
    }
}
