//! How a command the exec policy allowed is started: under the reaper (this binary in
//! reaper mode, `execpolicy::reaper`), in the workspace, in a process group of its own, with
//! the minimal environment. Shared by foreground `exec` and background sessions.

use std::process::Stdio;

use super::ToolCtx;

/// How an allowed command runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    /// `sh -c <command>` (`full`).
    Shell(String),
    /// Program and arguments, no shell (`allowlist`).
    Argv(Vec<String>),
}

impl Invocation {
    pub fn argv(&self) -> Vec<String> {
        match self {
            Self::Shell(c) => vec!["sh".into(), "-c".into(), c.clone()],
            Self::Argv(a) => a.clone(),
        }
    }
}

/// Starts `invocation` under the reaper in the workspace, in a process group of its own,
/// with the minimal environment; stdin is a pipe when `stdin`, else empty.
pub fn spawn(
    ctx: &ToolCtx,
    invocation: &Invocation,
    stdin: bool,
) -> std::io::Result<tokio::process::Child> {
    tokio::process::Command::new(&ctx.reaper)
        .arg(execpolicy::reaper::FLAG)
        .arg(std::process::id().to_string())
        .arg("--")
        .args(invocation.argv())
        .env_clear()
        .envs(ctx.exec_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&ctx.workspace)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
}
