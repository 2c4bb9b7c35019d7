//! Child processes the worker runs (the `exec` tool, hooks): they get their own process
//! group, and the whole group is killed when they time out or their caller goes away.

/// Kills a command's process group when dropped, unless disarmed (`.0 = None`) after the
/// command finished.
pub struct GroupKill(pub Option<u32>);

impl GroupKill {
    pub fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}
