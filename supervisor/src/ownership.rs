//! The state directory is the operator's (issue 23 item 2): `serve` refuses a state
//! directory, config file or hook it would trust when someone else could have written it, in
//! the manner of OpenSSH's `StrictModes`.
//!
//! The rules, for the uid `serve` runs as (its effective uid):
//! - the state directory is owned by that uid and not writable by group or others;
//! - the config file, and whatever `serve` and its workers read as code or trust inside the
//!   state directory (`gateway.token`, `gateway.sqlite` with its allow-always patterns, each
//!   agent's `hooks` tree and the directories above it), are owned by that uid or by root and
//!   not writable by group or others;
//! - every directory above the state directory and the config file, up to `/`, is owned by
//!   root or that uid and not writable by group or others unless it has the sticky bit (as
//!   `/tmp`);
//! - a symlink (the state directory or the config file) is followed: its target obeys the
//!   rules, the link is owned by root or that uid, and so are the directories above the link.
//!
//! Checked by path at start (and for the config file, on every reload); the directories
//! above make the answer hold afterwards, since nobody else can replace what they hold.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::config::AgentConfig;

/// Why a path is not safe to trust.
#[derive(Debug, thiserror::Error)]
pub enum UnsafePath {
    #[error("{} is owned by uid {owner}, not by uid {euid} that runs the gateway (chown it, or run the gateway as its owner)", path.display())]
    NotOwned {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error("{} is writable by {who} (mode {mode:04o}, owner uid {owner}): anyone there could change what the gateway runs (chmod go-w it)", path.display())]
    Writable {
        path: PathBuf,
        owner: u32,
        mode: u32,
        who: &'static str,
    },
    #[error("{}, above {}, is writable by {who} without the sticky bit (mode {mode:04o}, owner uid {owner}): anyone there could replace it", path.display(), of.display())]
    OpenParent {
        path: PathBuf,
        of: PathBuf,
        owner: u32,
        mode: u32,
        who: &'static str,
    },
    #[error("{}, above {}, is owned by uid {owner} (only root or uid {euid} may own it): its owner could replace it", path.display(), of.display())]
    ParentNotOwned {
        path: PathBuf,
        of: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error("cannot check {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Who may own a path: the state directory only the gateway's uid; other trusted paths
/// also root (root can change anything anyway; `/etc/loopgate/loopgate.toml` is common).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owners {
    Euid,
    EuidOrRoot,
}

/// The gateway's own uid.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The state directory (which exists): owned by `euid`, not writable by group or others,
/// under safe parents.
pub fn check_state_dir(dir: &Path, euid: u32) -> Result<(), UnsafePath> {
    check_entry(dir, euid, Owners::Euid)
}

/// The config file, if it exists (a missing one is the config loader's to report).
pub fn check_config_file(path: &Path, euid: u32) -> Result<(), UnsafePath> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(UnsafePath::Io {
            path: path.to_owned(),
            source,
        }),
        Ok(_) => check_entry(path, euid, Owners::EuidOrRoot),
    }
}

/// What the gateway and its workers trust inside the state directory (checked after the
/// state directory itself): the gateway token and db (allow-always patterns), and the
/// `trusted` paths ([`agent_paths`]) with everything under them and the directories between
/// them and `state`.
pub fn check_inside(state: &Path, trusted: &[PathBuf], euid: u32) -> Result<(), UnsafePath> {
    let state_real = std::fs::canonicalize(state).map_err(|source| UnsafePath::Io {
        path: state.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = [
        "gateway.token",
        "gateway.sqlite",
        "gateway.sqlite-wal",
        "gateway.sqlite-shm",
    ]
    .iter()
    .map(|n| state.join(n))
    .collect();
    for path in trusted {
        // The directories between the state directory and the path (`agents/<id>`).
        if let Ok(rel) = path.strip_prefix(state) {
            let mut at = state.to_owned();
            for c in rel.parent().into_iter().flat_map(|p| p.components()) {
                at.push(c);
                paths.push(at.clone());
            }
        }
        paths.push(path.clone());
        collect_tree(path, &mut paths, 0)?;
    }
    for p in paths {
        let meta = match std::fs::metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(UnsafePath::Io { path: p, source }),
        };
        check_meta(&p, &meta, euid, Owners::EuidOrRoot)?;
        // A symlink out of the state directory leads to a place the checks above do not
        // cover: its target's directories must be safe too.
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            let real = real_path(&p)?;
            if !real.starts_with(&state_real) {
                check_parents(&real, &p, euid)?;
            }
        }
    }
    Ok(())
}

/// What each agent's worker reads as code or history: its hooks tree and its database.
pub fn agent_paths(agents: &[AgentConfig]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in agents {
        out.push(a.hooks_dir.clone());
        for suffix in ["", "-wal", "-shm"] {
            let mut db = a.db_path.clone().into_os_string();
            db.push(suffix);
            out.push(PathBuf::from(db));
        }
    }
    out
}

/// Hook trees are a handful of small directories; deeper than this is not a hook layout.
const MAX_DEPTH: usize = 8;

fn collect_tree(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) -> Result<(), UnsafePath> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(())
        }
        Err(source) => {
            return Err(UnsafePath::Io {
                path: dir.to_owned(),
                source,
            })
        }
    };
    for entry in entries {
        let entry = entry.map_err(|source| UnsafePath::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        // Followed through symlinks (a hook linked from elsewhere is checked whole); the
        // depth bound ends a loop of links.
        let is_dir = path.is_dir();
        out.push(path.clone());
        if is_dir && depth < MAX_DEPTH {
            collect_tree(&path, out, depth + 1)?;
        }
    }
    Ok(())
}

/// One path named by the operator (state dir or config file): the link if it is one, the
/// target, and the directories above both.
fn check_entry(path: &Path, euid: u32, owners: Owners) -> Result<(), UnsafePath> {
    let io = |source| UnsafePath::Io {
        path: path.to_owned(),
        source,
    };
    let link = std::fs::symlink_metadata(path).map_err(io)?;
    if link.file_type().is_symlink() {
        if link.uid() != 0 && link.uid() != euid {
            return Err(UnsafePath::NotOwned {
                path: path.to_owned(),
                owner: link.uid(),
                euid,
            });
        }
        // Whoever can write the directory holding the link can point it elsewhere.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            let parent_real = real_path(parent)?;
            check_dir_above(&parent_real, path, euid)?;
            check_parents(&parent_real, path, euid)?;
        }
    }
    let real = real_path(path)?;
    let meta = std::fs::metadata(&real).map_err(io)?;
    check_meta(&real, &meta, euid, owners)?;
    check_parents(&real, path, euid)
}

fn real_path(path: &Path) -> Result<PathBuf, UnsafePath> {
    std::fs::canonicalize(path).map_err(|source| UnsafePath::Io {
        path: path.to_owned(),
        source,
    })
}

fn check_meta(
    path: &Path,
    meta: &std::fs::Metadata,
    euid: u32,
    owners: Owners,
) -> Result<(), UnsafePath> {
    let owner = meta.uid();
    let owned = owner == euid || (owners == Owners::EuidOrRoot && owner == 0);
    if !owned {
        return Err(UnsafePath::NotOwned {
            path: path.to_owned(),
            owner,
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if let Some(who) = writers(mode) {
        return Err(UnsafePath::Writable {
            path: path.to_owned(),
            owner,
            mode,
            who,
        });
    }
    Ok(())
}

/// Who besides the owner may write a file of `mode`.
fn writers(mode: u32) -> Option<&'static str> {
    match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => Some("group and others"),
        (true, false) => Some("its group"),
        (false, true) => Some("others"),
        (false, false) => None,
    }
}

/// Every directory above `real` (a resolved path), up to `/`.
fn check_parents(real: &Path, of: &Path, euid: u32) -> Result<(), UnsafePath> {
    for dir in real.ancestors().skip(1) {
        check_dir_above(dir, of, euid)?;
    }
    Ok(())
}

/// One directory above a trusted path: owned by root or `euid`; writable by group or others
/// only with the sticky bit (then nobody else can rename or remove what it holds).
fn check_dir_above(dir: &Path, of: &Path, euid: u32) -> Result<(), UnsafePath> {
    let meta = std::fs::metadata(dir).map_err(|source| UnsafePath::Io {
        path: dir.to_owned(),
        source,
    })?;
    let owner = meta.uid();
    if owner != 0 && owner != euid {
        return Err(UnsafePath::ParentNotOwned {
            path: dir.to_owned(),
            of: of.to_owned(),
            owner,
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    match writers(mode) {
        Some(who) if !sticky => Err(UnsafePath::OpenParent {
            path: dir.to_owned(),
            of: of.to_owned(),
            owner,
            mode,
            who,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn private_dir_in_tmp_is_fine_and_modes_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let me = euid();
        check_state_dir(d.path(), me).unwrap();
        chmod(d.path(), 0o770);
        let e = check_state_dir(d.path(), me).unwrap_err();
        assert!(matches!(e, UnsafePath::Writable { .. }), "{e}");
        chmod(d.path(), 0o755);
        check_state_dir(d.path(), me).unwrap();
        // Another uid is never the owner.
        let e = check_state_dir(d.path(), me.wrapping_add(1)).unwrap_err();
        assert!(e.to_string().contains(&format!("uid {me}")), "{e}");
    }

    #[test]
    fn parents_need_the_sticky_bit_to_be_open() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        let state = open.join("state");
        std::fs::create_dir_all(&state).unwrap();
        chmod(&state, 0o700);
        chmod(&open, 0o777);
        let e = check_state_dir(&state, euid()).unwrap_err();
        assert!(matches!(e, UnsafePath::OpenParent { .. }), "{e}");
        chmod(&open, 0o1777);
        check_state_dir(&state, euid()).unwrap();
        // Through a symlink in an open directory: the link can be repointed.
        chmod(&open, 0o777);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        assert!(check_state_dir(&link, euid()).is_err());
    }

    #[test]
    fn a_state_dir_link_another_user_owns_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        std::fs::create_dir(&state).unwrap();
        chmod(&state, 0o700);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        check_state_dir(&link, euid()).unwrap();
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED the foreign link half: it needs root to chown the link");
            return;
        }
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::fchownat(
            None,
            &link,
            Some(nobody),
            None,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
        let e = check_state_dir(&link, euid()).unwrap_err();
        assert!(
            matches!(e, UnsafePath::NotOwned { owner: 65534, .. }),
            "{e}"
        );
    }

    #[test]
    fn config_file_missing_is_fine_group_writable_is_not() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("loopgate.toml");
        check_config_file(&f, euid()).unwrap();
        std::fs::write(&f, "").unwrap();
        chmod(&f, 0o600);
        check_config_file(&f, euid()).unwrap();
        chmod(&f, 0o620);
        let e = check_config_file(&f, euid()).unwrap_err();
        assert!(e.to_string().contains("its group"), "{e}");
    }

    #[test]
    fn hooks_trees_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let hooks = d.path().join("agents/main/hooks");
        std::fs::create_dir_all(hooks.join("boot")).unwrap();
        std::fs::write(hooks.join("boot/handler"), "").unwrap();
        chmod(&hooks.join("boot/handler"), 0o755);
        check_inside(d.path(), std::slice::from_ref(&hooks), euid()).unwrap();
        chmod(&hooks.join("boot/handler"), 0o757);
        let e = check_inside(d.path(), std::slice::from_ref(&hooks), euid()).unwrap_err();
        assert!(e.to_string().contains("handler"), "{e}");
        chmod(&hooks.join("boot/handler"), 0o755);
        chmod(&d.path().join("agents"), 0o777);
        assert!(check_inside(d.path(), std::slice::from_ref(&hooks), euid()).is_err());
    }
}
