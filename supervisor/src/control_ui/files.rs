//! Opening a file below the UI root without a race: each path component is opened relative
//! to the directory opened before it, never following a symlink (a directory swapped for a
//! link between a check and a read cannot redirect the read), and every directory and the
//! file must be owned by root or the gateway's user, not writable by group or others, and
//! the file a regular file with one link (a hard link could share it with a writable
//! place). Contents are kept in a small cache keyed by inode, size and mtime, so many
//! requests for one large asset share one copy.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use hyper::body::Bytes;
use rustix::fs::{fstat, openat, FileType, Mode, OFlags, Stat, CWD};

/// Largest file served (the UI's largest bundle is a few MiB).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Most bytes the cache holds (past it, it starts over).
const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// A file as served: its bytes and when it changed.
#[derive(Clone)]
pub struct Served {
    pub bytes: Bytes,
    pub modified: SystemTime,
}

struct Entry {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    bytes: Bytes,
}

static CACHE: Mutex<Option<(usize, HashMap<PathBuf, Entry>)>> = Mutex::new(None);

/// Owned by root or by us, and not writable by group or others.
fn trusted(st: &Stat) -> bool {
    let euid = nix::unistd::geteuid().as_raw();
    (st.st_uid == 0 || st.st_uid == euid) && st.st_mode & 0o022 == 0
}

/// Reads `rel` (plain components only) below `root`, or `None` if it is not there or not
/// a file this gateway may serve.
pub fn read_beneath(root: &Path, rel: &Path) -> Option<Served> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = openat(CWD, root, dir_flags, Mode::empty()).ok()?;
    if !trusted(&fstat(&dir).ok()?) {
        return None;
    }
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(p) => Some(p),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (last, dirs) = parts.split_last()?;
    for part in dirs {
        let next = openat(&dir, *part, dir_flags, Mode::empty()).ok()?;
        if !trusted(&fstat(&next).ok()?) {
            return None;
        }
        dir = next;
    }
    let file_flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = openat(&dir, *last, file_flags, Mode::empty()).ok()?;
    let st = fstat(&fd).ok()?;
    let regular = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
    let size = st.st_size as u64;
    if !regular || st.st_nlink != 1 || !trusted(&st) || size > MAX_FILE_BYTES {
        return None;
    }
    let mtime = (st.st_mtime, st.st_mtime_nsec as i64);
    let modified = SystemTime::UNIX_EPOCH
        + std::time::Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
    let key = rel.to_owned();
    {
        let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, map)) = cache.as_ref() {
            if let Some(e) = map.get(&key) {
                if e.ino == st.st_ino as u64 && e.size == size && e.mtime == mtime {
                    return Some(Served {
                        bytes: e.bytes.clone(),
                        modified,
                    });
                }
            }
        }
    }
    let mut buf = Vec::with_capacity(size as usize);
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .ok()?;
    if buf.len() as u64 != size {
        // Changed while read: not served half-made.
        return None;
    }
    let bytes = Bytes::from(buf);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let (total, map) = cache.get_or_insert_with(|| (0, HashMap::new()));
    if *total + bytes.len() > CACHE_BYTES {
        map.clear();
        *total = 0;
    }
    if let Some(old) = map.insert(
        key,
        Entry {
            ino: st.st_ino as u64,
            size,
            mtime,
            bytes: bytes.clone(),
        },
    ) {
        *total = total.saturating_sub(old.bytes.len());
    }
    *total += bytes.len();
    Some(Served { bytes, modified })
}
