//! The one module of the supervisor allowed to use `unsafe`: code that runs in a spawned
//! child between `fork` and `exec`, and the allocator's trim.
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

/// Gives the heap's free pages back to the system (glibc keeps them in its arenas after the
/// state of retired workers is dropped: about 6.5 MB after 300 agents retired, measured).
pub fn trim_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks; it
    // takes no pointer from us and is safe to call from any thread at any time.
    let released = unsafe { nix::libc::malloc_trim(0) };
    tracing::debug!(
        released = released != 0,
        "Trimmed the heap after retirements."
    );
}
