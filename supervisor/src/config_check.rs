//! `loopgate config check [FILE]`: validates a config file as `serve` would, without
//! starting anything: the same messages and exit code (78).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::config::{Config, Overrides};
use crate::serve::EXIT_CONFIG;

/// Validates `path` as `serve` would (`explicit`: it must exist), touching nothing.
pub fn check(path: &Path, state_dir: &Path, explicit: bool, env_token: Option<String>) -> ExitCode {
    let overrides = Overrides {
        token: env_token,
        // `serve` always has the state dir's own token (it makes one if need be).
        state_token: Some("state-token".into()),
        ..Overrides::default()
    };
    match Config::load(path, state_dir, &overrides, explicit) {
        Err(e) => {
            eprintln!("loopgate: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
        Ok(c) => {
            let ids: Vec<&str> = c.agents.iter().map(|a| a.id.as_str()).collect();
            let mut out = format!(
                "{}: valid ({} agent{}: {})\n",
                path.display(),
                ids.len(),
                if ids.len() == 1 { "" } else { "s" },
                ids.join(", ")
            );
            for w in &c.warnings {
                out.push_str(&format!("warning: {w}\n"));
            }
            // A warning, not a failure: the check may be run by another user than `serve`.
            if let Err(e) = ownership(path, state_dir, &c) {
                let uid = crate::ownership::euid();
                out.push_str(&format!(
                    "warning: `loopgate serve` as uid {uid} would refuse to start: {e}\n"
                ));
            }
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
    }
}

/// `serve`'s ownership checks for this user (issue 23 item 2), on what exists.
fn ownership(
    path: &Path,
    state_dir: &Path,
    c: &Config,
) -> Result<(), crate::ownership::UnsafePath> {
    let euid = crate::ownership::euid();
    crate::ownership::check_config_file(path, euid)?;
    if state_dir.is_dir() {
        crate::ownership::check_state_dir(state_dir, euid)?;
        let trusted = crate::ownership::agent_paths(&c.agents);
        crate::ownership::check_inside(state_dir, &trusted, euid)?;
    }
    Ok(())
}
