//! The state-directory lock (R-C3): an OS file lock on `<state>/supervisor.lock`, held for the
//! whole life of `loopgate serve`. The kernel drops it when the process dies, so a lock left
//! by a dead process never blocks a start. After locking we write our pid and version (and
//! fsync) so a second gateway can name the live holder. The state directory itself is locked
//! too (a directory can be `flock`ed), so deleting or replacing the lock file does not let a
//! second gateway in.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    _dir: File,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("state directory {dir} is already in use by a running loopgate gateway (pid {pid})")]
    Held { dir: PathBuf, pid: String },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub fn acquire(state_dir: &Path) -> Result<StateLock, LockError> {
    let path = state_dir.join("supervisor.lock");
    let io = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    let dir = File::open(state_dir).map_err(|source| LockError::Io {
        path: state_dir.to_owned(),
        source,
    })?;
    let dir_held = match dir.try_lock() {
        Ok(()) => false,
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(source)) => {
            return Err(LockError::Io {
                path: state_dir.to_owned(),
                source,
            })
        }
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    let file_lock = if dir_held {
        Err(TryLockError::WouldBlock)
    } else {
        file.try_lock()
    };
    match file_lock {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let pid = holder
                .lines()
                .find_map(|l| l.strip_prefix("pid="))
                .unwrap_or("unknown")
                .trim()
                .to_owned();
            return Err(LockError::Held {
                dir: state_dir.to_owned(),
                pid,
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    write!(
        file,
        "pid={}\nversion={}\n",
        std::process::id(),
        env!("CARGO_PKG_VERSION")
    )
    .map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(StateLock {
        _file: file,
        _dir: dir,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_holder_and_release_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path()).unwrap();
        match acquire(dir.path()) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, std::process::id().to_string()),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        let again = acquire(dir.path()).unwrap();
        // Deleting the lock file does not free the state dir.
        std::fs::remove_file(&again.path).unwrap();
        assert!(matches!(acquire(dir.path()), Err(LockError::Held { .. })));
    }
}
