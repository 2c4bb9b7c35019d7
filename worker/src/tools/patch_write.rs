//! Writing a planned patch as one change (`apply_patch`): every new file's bytes go to a
//! temporary file beside it first (a full disk fails here, before any file is touched);
//! then each file is renamed into place or removed, its old version kept under a hard link
//! until the end (no copy, no room needed); if a step fails, every file done is put back
//! from its link and the directories the patch made are removed. A crash in the middle can
//! leave `.apply_patch.*` files beside the ones it touched; nothing is lost.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::fs::store;

/// One file's change: its new bytes (`None`: removed).
pub(super) struct Write<'a> {
    pub path: &'a Path,
    pub shown: &'a str,
    pub after: Option<&'a [u8]>,
}

/// Names the temporary and kept files apart.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A name beside `p`: `.<name>.apply_patch.<pid>.<n>.<what>`.
fn beside(p: &Path, what: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    p.with_file_name(format!(
        ".{name}.apply_patch.{}.{n}.{what}",
        std::process::id()
    ))
}

/// Makes `p`'s missing directories; the ones made, outermost first.
fn make_dirs(p: &Path) -> Result<Vec<PathBuf>, String> {
    let mut missing = Vec::new();
    let mut at = p.parent();
    while let Some(dir) = at {
        if dir.symlink_metadata().is_ok() {
            break;
        }
        missing.push(dir.to_owned());
        at = dir.parent();
    }
    missing.reverse();
    for dir in &missing {
        std::fs::create_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    Ok(missing)
}

/// What was done, to undo.
#[derive(Default)]
struct Undo {
    dirs: Vec<PathBuf>,
    temps: Vec<PathBuf>,
    /// Each file replaced or removed, and where its old version is kept (`None`: it was
    /// not there).
    done: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Undo {
    fn roll_back(self) {
        for (path, kept) in self.done.into_iter().rev() {
            let back = match kept {
                Some(kept) => std::fs::rename(&kept, &path),
                None => std::fs::remove_file(&path),
            };
            if let Err(e) = back {
                tracing::warn!(file = %path.display(), error = %e, "apply_patch could not put a file back after a failed step.");
            }
        }
        for t in self.temps {
            let _ = std::fs::remove_file(t);
        }
        for d in self.dirs.into_iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Carries out `writes` (files written, then files removed) as one change.
pub(super) fn write_all(writes: &[Write<'_>]) -> Result<(), String> {
    let mut undo = Undo::default();
    match steps(writes, &mut undo) {
        Ok(kept) => {
            for k in kept {
                let _ = std::fs::remove_file(k);
            }
            Ok(())
        }
        Err(e) => {
            undo.roll_back();
            Err(e)
        }
    }
}

/// The steps; the kept old versions to remove once all succeeded.
fn steps(writes: &[Write<'_>], undo: &mut Undo) -> Result<Vec<PathBuf>, String> {
    // 1. New bytes beside their files: nothing the model sees changes yet.
    let mut staged = Vec::new();
    for w in writes {
        let Some(bytes) = w.after else { continue };
        undo.dirs.extend(make_dirs(w.path)?);
        let temp = beside(w.path, "new");
        undo.temps.push(temp.clone());
        store(&temp, bytes, w.shown)?;
        staged.push((w, temp));
    }
    // 2. Each file into place (or away), its old version kept under a link.
    let mut kept = Vec::new();
    let removed = writes.iter().filter(|w| w.after.is_none());
    let placed = staged.iter().map(|(w, t)| (*w, Some(t)));
    for (w, temp) in placed.chain(removed.map(|w| (w, None))) {
        let old = match w.path.symlink_metadata() {
            Ok(_) => {
                let k = beside(w.path, "old");
                std::fs::hard_link(w.path, &k)
                    .map_err(|e| format!("cannot write {}: {e}", w.shown))?;
                Some(k)
            }
            Err(_) => None,
        };
        let step = match temp {
            Some(t) => std::fs::rename(t, w.path),
            None => std::fs::remove_file(w.path),
        };
        if let Err(e) = step {
            if let Some(k) = old {
                let _ = std::fs::remove_file(k);
            }
            let verb = if temp.is_some() { "write" } else { "delete" };
            return Err(format!("cannot {verb} {}: {e}", w.shown));
        }
        undo.temps.retain(|t| Some(t) != temp);
        kept.extend(old.clone());
        undo.done.push((w.path.to_owned(), old));
    }
    Ok(kept)
}
