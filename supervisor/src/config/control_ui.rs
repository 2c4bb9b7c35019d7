//! `[gateway.control_ui]`: serving an installed Control UI; its raw form, its checked form
//! (the root's real path and where it is served) and the checks between them (the root is
//! never inside or around the state directory or a workspace, nor writable by others).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::invalid::Invalid;

/// `[gateway.control_ui]` as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawControlUi {
    /// The built UI directory (holding `index.html`). Absolute.
    pub root: String,
    /// Where it is served: `/` (default) or a prefix such as `/ui`.
    pub base_path: Option<String>,
}

/// A checked `[gateway.control_ui]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlUi {
    /// The root's real path.
    pub root: PathBuf,
    /// `""` (served at `/`) or `/x` (no trailing slash).
    pub base_path: String,
}

/// `""` for `/`; otherwise one leading `/`, no trailing `/`, plain URL path characters.
pub fn normalize_base_path(raw: &str) -> Result<String, Invalid> {
    let t = raw.trim().trim_end_matches('/');
    if t.is_empty() {
        return Ok(String::new());
    }
    let t = if t.starts_with('/') {
        t.to_owned()
    } else {
        format!("/{t}")
    };
    let plain = t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b));
    let bad_segment = t[1..]
        .split('/')
        .any(|s| s.is_empty() || s.starts_with('.'));
    if !plain || bad_segment {
        return Err(Invalid::new(
            "gateway.control_ui.base_path",
            format!("{raw:?} must be a path like \"/ui\" (letters, digits, '-', '_', '~', '.'; no empty or dot segments)"),
        ));
    }
    Ok(t)
}

/// Checks `[gateway.control_ui]` against the state directory and the agents' workspaces.
pub fn resolve(
    raw: &RawControlUi,
    state_dir: &Path,
    workspaces: &[(&str, &Path)],
) -> Result<ControlUi, Invalid> {
    let key = "gateway.control_ui.root";
    let given = Path::new(&raw.root);
    if !given.is_absolute() {
        return Err(Invalid::new(
            key,
            format!("{:?} must be an absolute path", raw.root),
        ));
    }
    let root = std::fs::canonicalize(given)
        .map_err(|e| Invalid::new(key, format!("cannot open {}: {e}", given.display())))?;
    let meta = std::fs::metadata(&root)
        .map_err(|e| Invalid::new(key, format!("cannot read {}: {e}", root.display())))?;
    if !meta.is_dir() || !root.join("index.html").is_file() {
        return Err(Invalid::new(key, format!(
            "{} is not a built UI directory (no index.html); point it at e.g. <node_modules>/openclaw/dist/control-ui",
            root.display()
        )));
    }
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o022 != 0 {
            return Err(Invalid::new(key, format!(
                "{} is writable by group or others: whoever can write there could run script on the gateway's origin (chmod go-w)",
                root.display()
            )));
        }
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let state = crate::confine::real(state_dir, &cwd);
    if state.starts_with(&root) {
        return Err(Invalid::new(
            key,
            format!(
                "{} contains the state directory {} (its token and databases would be served)",
                root.display(),
                state.display()
            ),
        ));
    }
    if root.starts_with(&state) {
        return Err(Invalid::new(
            key,
            format!(
            "{} is inside the state directory {} (its databases and agents' files would be served)",
            root.display(),
            state.display()
        ),
        ));
    }
    for (id, ws) in workspaces {
        let ws = crate::confine::real(ws, &cwd);
        if ws.starts_with(&root) || root.starts_with(&ws) {
            return Err(Invalid::new(key, format!(
                "{} overlaps agent {id:?}'s workspace {} (the model could write pages served on the gateway's origin)",
                root.display(),
                ws.display()
            )));
        }
    }
    Ok(ControlUi {
        root,
        base_path: normalize_base_path(raw.base_path.as_deref().unwrap_or("/"))?,
    })
}
