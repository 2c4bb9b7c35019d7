//! Config checks that keep what the model can write away from what loopgate runs or trusts:
//! workspaces never nest and never hold the state directory, hook programs are never
//! relative paths (they would resolve inside the workspace they run in), and `exec`
//! allowlist patterns parse as argv patterns.

use std::path::{Component, Path, PathBuf};

use ipc::control::ExecPolicy;

use crate::config::invalid::Invalid;

/// `path` made absolute against `base`, with `.`/`..` applied and the deepest existing
/// ancestor resolved through symlinks (so a link cannot hide a nesting).
pub fn real(path: &Path, base: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    };
    let mut normal = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    let mut existing = normal.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(r) = std::fs::canonicalize(&existing) {
            let mut out = r;
            out.extend(rest.iter().rev());
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return normal,
        }
    }
}

/// Whether `ws` (real) is a place in the state directory `state` (real) meant for agent
/// `id`'s workspace: `<state>/workspace*` or `<state>/agents/<id>/workspace*`. Anywhere else
/// in the state directory holds the gateway's own files (its config, token, databases, other
/// agents' hooks), which a workspace must never be or contain.
pub fn workspace_place(state: &Path, id: &str, ws: &Path) -> bool {
    let Ok(rel) = ws.strip_prefix(state) else {
        return false;
    };
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let workspace_name = |s: &str| s == "workspace" || s.starts_with("workspace-");
    match parts.as_slice() {
        [first, ..] if workspace_name(first) => true,
        [agents, own, third, ..] => agents == "agents" && own == id && workspace_name(third),
        _ => false,
    }
}

/// Every agent's workspace is its own: no workspace contains another, none contains the
/// state directory (its config, hooks, databases and token), and one inside the state
/// directory is in a workspace place ([`workspace_place`]).
pub fn check_workspaces(state_dir: &Path, agents: &[(&str, &Path)]) -> Result<(), Invalid> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let state = real(state_dir, &cwd);
    let spaces: Vec<(&str, PathBuf)> = agents.iter().map(|(id, w)| (*id, real(w, &cwd))).collect();
    for (id, ws) in &spaces {
        if ws.starts_with(&state) && ws != &state && !workspace_place(&state, id, ws) {
            return Err(Invalid::new(
                format!("agents.{id}.workspace"),
                format!(
                    "{} is inside the state directory {} but not a workspace place (<state>/workspace*, <state>/agents/{id}/workspace*): the agent could rewrite the gateway's own files",
                    ws.display(),
                    state.display()
                ),
            ));
        }
        if state.starts_with(ws) {
            return Err(Invalid::new(
                format!("agents.{id}.workspace"),
                format!(
                    "{} contains the state directory {} (the agent could rewrite the gateway's config, hooks and databases)",
                    ws.display(),
                    state.display()
                ),
            ));
        }
        for (other, ows) in &spaces {
            if id != other && ows.starts_with(ws) {
                return Err(Invalid::new(
                    format!("agents.{id}.workspace"),
                    format!(
                        "{} contains agent {other:?}'s workspace {} (workspaces may not nest)",
                        ws.display(),
                        ows.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A hook program is a bare name (looked up on `PATH`) or an absolute path; a relative
/// path would be resolved in the directory the hook runs in, the agent's workspace.
pub fn check_hook_program(key: &str, program: &str) -> Result<(), Invalid> {
    if program.contains('/') && !program.starts_with('/') {
        return Err(Invalid::new(
            format!("{key}.command"),
            format!("{program:?} is a relative path; use an absolute path or a program name on PATH (hooks run in the agent's workspace)"),
        ));
    }
    Ok(())
}

/// Checks the allowlist patterns; `Ok` carries warnings for programs the model can steer.
pub fn check_exec(key: &str, exec: &ExecPolicy) -> Result<Vec<String>, Invalid> {
    let mut warnings = Vec::new();
    for (i, pattern) in exec.allowlist.iter().enumerate() {
        let words = execpolicy::argv::parse_pattern(pattern)
            .map_err(|e| Invalid::new(format!("{key}.tools.exec.allowlist[{i}]"), e.to_string()))?;
        if matches!(
            exec.security,
            ipc::control::ExecSecurity::Allowlist | ipc::control::ExecSecurity::Ask
        ) {
            if let Err(why) = execpolicy::safe::check_pattern(&words) {
                warnings.push(format!(
                    "{key}.tools.exec.allowlist[{i}]: {pattern:?} may let the model run any command: {why}"
                ));
            }
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_in_the_state_dir_is_only_in_a_workspace_place() {
        let state = Path::new("/state");
        for ok in [
            "/state/workspace",
            "/state/workspace-ops",
            "/state/agents/ops/workspace",
            "/state/workspace-ops/sub",
        ] {
            assert!(workspace_place(state, "ops", Path::new(ok)), "{ok}");
            assert!(
                check_workspaces(state, &[("ops", Path::new(ok))]).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "/state/agents",
            "/state/agents/ops",
            "/state/agents/other/workspace",
            "/state/run",
            "/state/trash",
            "/state/loopgate.toml",
            "/state/gateway.sqlite",
            "/state/mine",
        ] {
            assert!(!workspace_place(state, "ops", Path::new(bad)), "{bad}");
            assert!(
                check_workspaces(state, &[("ops", Path::new(bad))]).is_err(),
                "{bad}"
            );
        }
        // `..` is applied: this one is outside, the operator's.
        assert!(check_workspaces(state, &[("ops", Path::new("/state/../victim"))]).is_ok());
    }

    #[test]
    fn workspaces_never_nest_or_hold_the_state_dir() {
        let s = Path::new("/state");
        let ok = check_workspaces(
            s,
            &[("main", Path::new("/w/main")), ("ops", Path::new("/w/ops"))],
        );
        assert!(ok.is_ok());
        let e = check_workspaces(
            s,
            &[("main", Path::new("/w")), ("ops", Path::new("/w/ops"))],
        )
        .unwrap_err();
        assert!(e.problem.contains("may not nest"), "{e}");
        let e = check_workspaces(s, &[("main", Path::new("/"))]).unwrap_err();
        assert!(e.problem.contains("state directory"), "{e}");
        let e = check_workspaces(s, &[("main", Path::new("/state/../state"))]).unwrap_err();
        assert!(e.problem.contains("state directory"), "{e}");
    }

    #[test]
    fn hook_programs_and_patterns() {
        assert!(check_hook_program("hooks.x[0]", "guard").is_ok());
        assert!(check_hook_program("hooks.x[0]", "/usr/bin/guard").is_ok());
        assert!(check_hook_program("hooks.x[0]", "./guard").is_err());
        assert!(check_hook_program("hooks.x[0]", "hooks/guard").is_err());
        let exec = ExecPolicy {
            security: ipc::control::ExecSecurity::Allowlist,
            allowlist: vec!["git status".into(), "ls *".into()],
            ..ExecPolicy::default()
        };
        let w = check_exec("agents.main", &exec).unwrap();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("\"git\" is not on the exec safe list"),
            "{w:?}"
        );
        let bad = ExecPolicy {
            allowlist: vec!["* x".into()],
            ..exec
        };
        assert!(check_exec("agents.main", &bad).is_err());
    }
}
