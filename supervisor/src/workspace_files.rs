//! An agent's bootstrap files (`AGENTS.md`, `SOUL.md`, ...) read and written for operators
//! (`agents.files.*`). A workspace is a place the model writes: a file there may be a
//! symlink, a FIFO, a hard link to another file or huge. So each file is opened relative to
//! the workspace directory, never following a symlink and without blocking, taken only if it
//! is a regular file with one link, and replaced by a new file renamed over its name (a link
//! named `AGENTS.md` is replaced, never followed). The workspace directory itself is the
//! operator's (configured, possibly a link they made; its parent is not the model's to
//! change). The worker reads the files again for each turn's prompt.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{fstat, openat, renameat, unlinkat, AtFlags, FileType, Mode, OFlags, CWD};

/// The files operators may read and write (OpenClaw's `WORKSPACE_BOOTSTRAP_FILENAMES`).
pub const NAMES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
];

/// The largest file read or written (the prompt takes far less of it).
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// One file as `agents.files.*` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub path: PathBuf,
    /// `None`: the file is not there.
    pub present: Option<Present>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Present {
    pub size: u64,
    pub updated_at_ms: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub hash: String,
    /// The text (`None` when not asked for).
    pub content: Option<String>,
}

/// Why a file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("unsupported file {0:?}")]
    Unsupported(String),
    #[error("agent file {0:?} is not a regular file the gateway may read")]
    NotRegular(String),
    #[error("agent file {name:?} is larger than {max} bytes")]
    TooLarge { name: String, max: usize },
    #[error("agent file {0:?} is not UTF-8 text")]
    NotText(String),
    #[error("agent file {name:?} changed since it was read")]
    Changed {
        name: String,
        current: Option<String>,
    },
    #[error("cannot use the workspace: {0}")]
    Io(#[from] std::io::Error),
}

fn checked(name: &str) -> Result<(), FileError> {
    match NAMES.contains(&name) {
        true => Ok(()),
        false => Err(FileError::Unsupported(name.to_owned())),
    }
}

/// The workspace directory, as configured.
fn open_dir(workspace: &Path) -> std::io::Result<rustix::fd::OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(openat(CWD, workspace, flags, Mode::empty())?)
}

/// `name` in `workspace` (`content`: with its text).
pub fn read(workspace: &Path, name: &str, content: bool) -> Result<FileState, FileError> {
    checked(name)?;
    let path = workspace.join(name);
    let dir = match open_dir(workspace) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(FileState {
                path,
                present: None,
            })
        }
        Err(e) => return Err(e.into()),
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match openat(&dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            return Ok(FileState {
                path,
                present: None,
            })
        }
        Err(rustix::io::Errno::LOOP) => return Err(FileError::NotRegular(name.to_owned())),
        Err(e) => return Err(std::io::Error::from(e).into()),
    };
    let st = fstat(&fd).map_err(std::io::Error::from)?;
    // A hard link would show (or let an operator's write replace the name of) a file from
    // elsewhere, such as the gateway's own.
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_nlink != 1 {
        return Err(FileError::NotRegular(name.to_owned()));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            name: name.to_owned(),
            max: MAX_FILE_BYTES,
        });
    }
    let text = content
        .then(|| String::from_utf8(bytes.clone()).map_err(|_| FileError::NotText(name.to_owned())))
        .transpose()?;
    let updated_at_ms = (st.st_mtime.max(0) as u64) * 1000 + (st.st_mtime_nsec as u64) / 1_000_000;
    Ok(FileState {
        path,
        present: Some(Present {
            size: bytes.len() as u64,
            updated_at_ms,
            hash: crate::secrets::sha256_hex(&bytes),
            content: text,
        }),
    })
}

/// Writes `content` as `name` in `workspace` (created if needed), unless `expected` names a
/// hash the file no longer has. The file is replaced whole: a new file renamed over it.
pub fn write(
    workspace: &Path,
    name: &str,
    content: &str,
    expected: Option<&str>,
) -> Result<FileState, FileError> {
    checked(name)?;
    if content.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            name: name.to_owned(),
            max: MAX_FILE_BYTES,
        });
    }
    if let Some(want) = expected {
        let current = read(workspace, name, false)?.present.map(|p| p.hash);
        if !current
            .as_deref()
            .is_some_and(|h| h.eq_ignore_ascii_case(want))
        {
            return Err(FileError::Changed {
                name: name.to_owned(),
                current,
            });
        }
    }
    std::fs::create_dir_all(workspace)?;
    let dir = open_dir(workspace)?;
    let tmp = format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o644))
        .map_err(std::io::Error::from)?;
    let mut f = std::fs::File::from(fd);
    let done = f
        .write_all(content.as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| Ok(renameat(&dir, tmp.as_str(), &dir, name)?));
    if let Err(e) = done {
        let _ = unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        return Err(e.into());
    }
    read(workspace, name, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_and_written_only_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        assert_eq!(
            read(&ws, "AGENTS.md", true).unwrap().present,
            None,
            "no workspace yet"
        );
        let w = write(&ws, "AGENTS.md", "# hi\n", None).unwrap();
        let p = w.present.unwrap();
        assert_eq!((p.size, p.content.as_deref()), (5, Some("# hi\n")));
        assert!(matches!(
            write(&ws, "AGENTS.md", "x", Some(&"0".repeat(64))),
            Err(FileError::Changed { current: Some(ref h), .. }) if *h == p.hash
        ));
        write(&ws, "AGENTS.md", "# two\n", Some(&p.hash)).unwrap();
        assert!(matches!(
            read(&ws, "TOOLS.md", true),
            Err(FileError::Unsupported(_))
        ));
        assert!(matches!(
            read(&ws, "../x", true),
            Err(FileError::Unsupported(_))
        ));
        // A link the model made is neither read through nor written through.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "do not show").unwrap();
        std::os::unix::fs::symlink(&secret, ws.join("SOUL.md")).unwrap();
        assert!(matches!(
            read(&ws, "SOUL.md", true),
            Err(FileError::NotRegular(_))
        ));
        write(&ws, "SOUL.md", "mine\n", None).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "do not show");
        assert!(!std::fs::symlink_metadata(ws.join("SOUL.md"))
            .unwrap()
            .file_type()
            .is_symlink());
        // A hard link to a file elsewhere is not read.
        let other = dir.path().join("gateway.token");
        std::fs::write(&other, "token").unwrap();
        std::fs::hard_link(&other, ws.join("IDENTITY.md")).unwrap();
        assert!(matches!(
            read(&ws, "IDENTITY.md", true),
            Err(FileError::NotRegular(_))
        ));
        // A FIFO does not block the read.
        nix::unistd::mkfifo(&ws.join("USER.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            read(&ws, "USER.md", true),
            Err(FileError::NotRegular(_))
        ));
        // Too large to take.
        std::fs::write(ws.join("MEMORY.md"), vec![b'a'; MAX_FILE_BYTES + 1]).unwrap();
        assert!(matches!(
            read(&ws, "MEMORY.md", false),
            Err(FileError::TooLarge { .. })
        ));
    }
}
