//! A workspace as one archive, for the object store (an agent's files move with it): what a
//! directory holds ([`manifest`]), the directory packed ([`pack`]) and put back ([`restore`]).
//!
//! Only directories and regular files travel, with their permission bits and modification
//! times; symlinks and special files are left out (counted as skipped), so an archive can
//! never point a restored path outside its workspace. An archive is hostile input on the way
//! back: every path is checked to be relative and plain (no `..`, no `.`, no empty or NUL
//! component), sizes are checked against what is left and the cap, and it is unpacked into
//! a fresh sibling directory that then replaces the workspace in one rename.
//!
//! Format: `LGWS1`, then entries (`d` or `f`, mode u32, mtime seconds i64 and nanoseconds
//! u32, path length u32 and path bytes; a file then its length u64 and bytes), then `e`.

use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

const MAGIC: &[u8] = b"LGWS1";
/// Most entries one workspace may have to travel.
pub const MAX_ENTRIES: usize = 200_000;

/// What a workspace holds, by metadata (no file is read): equal manifests, equal contents
/// as far as sizes and modification times tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Hex SHA-256 over every entry's kind, path, mode, size and modification time.
    pub digest: String,
    /// Bytes of the regular files.
    pub bytes: u64,
    pub files: u64,
    /// Symlinks and special files, which do not travel.
    pub skipped: u64,
}

/// A workspace packed, with the manifest of what went in.
pub struct Packed {
    pub archive: Vec<u8>,
    pub manifest: Manifest,
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("the workspace holds {bytes} bytes, over the snapshot cap of {cap}")]
    TooLarge { bytes: u64, cap: u64 },
    #[error("the workspace has more than {MAX_ENTRIES} entries")]
    TooMany,
    #[error("not a workspace archive: {0}")]
    Corrupt(String),
}

/// One entry, as walked.
struct Entry {
    rel: Vec<u8>,
    dir: bool,
    mode: u32,
    size: u64,
    mtime: (i64, u32),
}

/// The manifest of `root` (an absent root is an empty workspace).
pub fn manifest(root: &Path) -> Result<Manifest, ArchiveError> {
    let (entries, skipped) = walk(root)?;
    Ok(summarize(&entries, skipped))
}

/// Packs `root`, refusing past `cap` bytes of files.
pub fn pack(root: &Path, cap: u64) -> Result<Packed, ArchiveError> {
    let (entries, skipped) = walk(root)?;
    let bytes: u64 = entries.iter().map(|e| e.size).sum();
    if bytes > cap {
        return Err(ArchiveError::TooLarge { bytes, cap });
    }
    let mut archive = Vec::with_capacity(bytes as usize + entries.len() * 64 + 16);
    archive.extend_from_slice(MAGIC);
    let mut kept = Vec::with_capacity(entries.len());
    let mut read = 0u64;
    for mut e in entries {
        let mut data = Vec::new();
        if !e.dir {
            let path = root.join(std::ffi::OsStr::from_bytes(&e.rel));
            match fs::File::open(&path) {
                // Never past the cap in all: a file that grew since the walk may be cut
                // (its new size shows in the next manifest, and the next snapshot).
                Ok(f) => {
                    f.take(cap - read).read_to_end(&mut data)?;
                    read += data.len() as u64;
                }
                // Removed since the walk: it does not travel.
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err.into()),
            }
            e.size = data.len() as u64;
        }
        archive.push(if e.dir { b'd' } else { b'f' });
        archive.extend_from_slice(&e.mode.to_le_bytes());
        archive.extend_from_slice(&e.mtime.0.to_le_bytes());
        archive.extend_from_slice(&e.mtime.1.to_le_bytes());
        archive.extend_from_slice(&(e.rel.len() as u32).to_le_bytes());
        archive.extend_from_slice(&e.rel);
        if !e.dir {
            archive.extend_from_slice(&e.size.to_le_bytes());
            archive.extend_from_slice(&data);
        }
        kept.push(e);
    }
    archive.push(b'e');
    Ok(Packed {
        manifest: summarize(&kept, skipped),
        archive,
    })
}

/// Replaces the workspace at `root` with what `archive` holds (at most `cap` bytes of
/// files). Unpacked beside it first: on any error `root` is left as it was.
pub fn restore(root: &Path, archive: &[u8], cap: u64) -> Result<Manifest, ArchiveError> {
    let parent = root
        .parent()
        .ok_or_else(|| ArchiveError::Corrupt("a workspace needs a parent directory".into()))?;
    fs::create_dir_all(parent)?;
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "workspace".into());
    let stamp = format!(
        "{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let fresh = parent.join(format!(".{name}.restore-{stamp}"));
    fs::DirBuilder::new().mode(0o700).create(&fresh)?;
    if let Err(e) = unpack(archive, &fresh, cap) {
        let _ = fs::remove_dir_all(&fresh);
        return Err(e);
    }
    let old = parent.join(format!(".{name}.old-{stamp}"));
    let had = match fs::rename(root, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => {
            let _ = fs::remove_dir_all(&fresh);
            return Err(e.into());
        }
    };
    if let Err(e) = fs::rename(&fresh, root) {
        if had {
            let _ = fs::rename(&old, root);
        }
        let _ = fs::remove_dir_all(&fresh);
        return Err(e.into());
    }
    if had {
        // The restore is done; an old copy that cannot be removed is only litter.
        let _ = fs::remove_dir_all(&old);
    }
    manifest(root)
}

/// Writes the entries of `archive` under the empty directory `into`.
fn unpack(archive: &[u8], into: &Path, cap: u64) -> Result<(), ArchiveError> {
    let mut r = Reader(archive);
    if r.take(MAGIC.len())? != MAGIC {
        return Err(ArchiveError::Corrupt("bad magic".into()));
    }
    let (mut bytes, mut entries) = (0u64, 0usize);
    let mut dirs = Vec::new();
    loop {
        let kind = r.take(1)?[0];
        if kind == b'e' {
            break;
        }
        entries += 1;
        if entries > MAX_ENTRIES {
            return Err(ArchiveError::TooMany);
        }
        let mode = r.u32()? & 0o777;
        let mtime = (r.i64()?, r.u32()?);
        let len = r.u32()? as usize;
        let rel = checked_path(r.take(len)?)?;
        let path = into.join(&rel);
        match kind {
            b'd' => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&path)?;
                dirs.push((path, mode));
            }
            b'f' => {
                let size = r.u64()?;
                bytes = bytes.saturating_add(size);
                if bytes > cap {
                    return Err(ArchiveError::TooLarge { bytes, cap });
                }
                let data = r.take(usize::try_from(size).map_err(|_| corrupt("file size"))?)?;
                if let Some(p) = path.parent() {
                    fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(p)?;
                }
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
                io::Write::write_all(&mut f, data)?;
                f.set_permissions(fs::Permissions::from_mode(mode))?;
                f.set_modified(to_time(mtime))?;
            }
            other => return Err(corrupt(&format!("entry kind {other}"))),
        }
    }
    if !r.0.is_empty() {
        return Err(corrupt("bytes after the end"));
    }
    // Last, so that a directory without write permission still received its files.
    for (path, mode) in dirs.into_iter().rev() {
        fs::set_permissions(&path, fs::Permissions::from_mode(mode | 0o700))?;
    }
    Ok(())
}

fn corrupt(what: &str) -> ArchiveError {
    ArchiveError::Corrupt(what.to_owned())
}

/// An archive path as a relative path of plain components, or why not.
fn checked_path(raw: &[u8]) -> Result<PathBuf, ArchiveError> {
    let plain = |c: &[u8]| !c.is_empty() && c != b"." && c != b".." && !c.contains(&0);
    if raw.is_empty() || !raw.split(|b| *b == b'/').all(plain) {
        return Err(corrupt(&format!(
            "path {:?} is not a plain relative path",
            String::from_utf8_lossy(raw)
        )));
    }
    Ok(PathBuf::from(std::ffi::OsString::from_vec(raw.to_vec())))
}

fn to_time((secs, nanos): (i64, u32)) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(nanos.min(999_999_999)));
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ArchiveError> {
        if self.0.len() < n {
            return Err(corrupt("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ArchiveError> {
        self.take(N)?
            .try_into()
            .map_err(|_| corrupt("truncated number"))
    }

    fn u32(&mut self) -> Result<u32, ArchiveError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, ArchiveError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, ArchiveError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
}

/// Every directory and regular file under `root`, sorted by path, and how many other
/// entries (symlinks, sockets, devices) were left out. Symlinks are never followed.
fn walk(root: &Path) -> Result<(Vec<Entry>, u64), ArchiveError> {
    let mut out = Vec::new();
    let mut skipped = 0u64;
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            root.to_owned()
        } else {
            root.join(std::ffi::OsStr::from_bytes(&rel))
        };
        let listing = match fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        for item in listing {
            let item = item?;
            let meta = match item.path().symlink_metadata() {
                Ok(m) => m,
                // Removed since listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let mut path = rel.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(item.file_name().as_bytes());
            let kind = meta.file_type();
            if !(kind.is_dir() || kind.is_file()) {
                skipped += 1;
                continue;
            }
            if out.len() >= MAX_ENTRIES {
                return Err(ArchiveError::TooMany);
            }
            if kind.is_dir() {
                stack.push(path.clone());
            }
            out.push(Entry {
                rel: path,
                dir: kind.is_dir(),
                mode: meta.mode() & 0o777,
                size: if kind.is_file() { meta.len() } else { 0 },
                mtime: (meta.mtime(), meta.mtime_nsec().clamp(0, 999_999_999) as u32),
            });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((out, skipped))
}

fn summarize(entries: &[Entry], skipped: u64) -> Manifest {
    let mut h = Sha256::new();
    let (mut bytes, mut files) = (0u64, 0u64);
    for e in entries {
        h.update(if e.dir { b"d\0" } else { b"f\0" });
        h.update(&e.rel);
        if e.dir {
            // A directory's own time changes as entries come and go: its entries tell.
            h.update(format!("\0{:o}\n", e.mode));
        } else {
            bytes += e.size;
            files += 1;
            h.update(format!(
                "\0{:o}\0{}\0{}.{}\n",
                e.mode, e.size, e.mtime.0, e.mtime.1
            ));
        }
    }
    Manifest {
        digest: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        bytes,
        files,
        skipped,
    }
}

#[cfg(test)]
mod tests;
