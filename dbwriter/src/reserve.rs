//! Room held back on the disk for a database (issue 23 item 3): a file of real blocks beside
//! it, removed the first time a commit finds the disk full, so the commit can be retried and
//! the database keeps recording while an operator frees space. One agent filling the disk
//! must not stop the gateway database from recording the other agents' outcomes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Free space under which a held reserve is given back before the next commit.
pub const LOW_WATER: u64 = 1 << 20;

/// A reserve file and whether it still holds its room.
#[derive(Debug)]
pub struct Reserve {
    path: PathBuf,
    bytes: u64,
    held: AtomicBool,
}

impl Reserve {
    /// Makes sure `path` holds `bytes` of written blocks (creating or growing it). A disk
    /// too full for it is an error the caller logs; the database works without a reserve.
    pub fn hold(path: &Path, bytes: u64) -> std::io::Result<Reserve> {
        let have = std::fs::metadata(path).map_or(0, |m| m.len());
        if have < bytes {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            // Allocated blocks at once where the filesystem can; written zeros where not.
            let grown =
                match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, bytes) {
                    Ok(()) => f.sync_all(),
                    Err(_) => write_zeros(&mut f, bytes - have).and_then(|()| f.sync_all()),
                };
            if let Err(e) = grown {
                // Half a reserve would give back less than it promises: none at all.
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        }
        Ok(Reserve {
            path: path.to_owned(),
            bytes,
            held: AtomicBool::new(true),
        })
    }

    /// Gives the room back to the disk; `true` the first time (there was room to give).
    pub fn release(&self) -> bool {
        if !self.held.swap(false, Ordering::SeqCst) {
            return false;
        }
        std::fs::remove_file(&self.path).is_ok()
    }

    /// Releases the reserve once the disk is all but full (under [`LOW_WATER`] free), before
    /// a commit can fail for it: `true` if it did so now.
    pub fn release_if_low(&self) -> bool {
        if !self.held() {
            return false;
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let free = rustix::fs::statvfs(dir)
            .map(|st| st.f_bavail.saturating_mul(st.f_frsize))
            .unwrap_or(u64::MAX);
        free < LOW_WATER && self.release()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn held(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }
}

fn write_zeros(f: &mut std::fs::File, mut left: u64) -> std::io::Result<()> {
    let chunk = vec![0u8; 1 << 20];
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_is_held_once_and_released_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("reserve");
        let r = Reserve::hold(&p, 3 << 20).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 3 << 20);
        assert!(r.held());
        assert!(r.release());
        assert!(!p.exists());
        assert!(!r.release());
        // Holding again (the next start) makes it whole.
        let again = Reserve::hold(&p, 1 << 20).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1 << 20);
        assert!(again.held());
    }
}
