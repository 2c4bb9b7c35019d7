//! The gateway token the state directory keeps for itself: when the config names no token,
//! `serve` uses `<state>/gateway.token` (created on first start, 0600), so the loopback
//! WebSocket is never open to every local user. The loopgate CLI does not need it (it uses
//! the unix socket, which checks the peer's uid); OpenClaw's clients do.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Creates `dir` (0700 under the umask `serve` sets) and takes group and other access away
/// from an existing one.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

pub fn token_path(state: &Path) -> PathBuf {
    state.join("gateway.token")
}

/// Reads `<state>/gateway.token`, creating it with a fresh 256-bit random token when it is
/// missing; a file others can read is made private first.
pub fn state_token(state: &Path) -> std::io::Result<String> {
    let path = token_path(state);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => {
            let token = format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            f.write_all(format!("{token}\n").as_bytes())?;
            f.sync_all()?;
            return Ok(token);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)?;
    let meta = f.metadata()?;
    if meta.permissions().mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let mut text = String::new();
    f.take(4096).read_to_string(&mut text)?;
    let token = text.trim().to_owned();
    if token.is_empty() {
        return Err(std::io::Error::other(format!(
            "{} is empty: delete it to have a new token made, or put one in it",
            path.display()
        )));
    }
    Ok(token)
}

/// 32 random bytes (two v4 UUIDs' randomness, from the OS): a per-process key.
pub fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

/// HMAC-SHA-256 (RFC 2104) of `message` under a 32-byte `key`.
pub fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let pad = |byte: u8| {
        let mut p = [byte; 64];
        for (p, k) in p.iter_mut().zip(key) {
            *p ^= k;
        }
        p
    };
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Bytes as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = state_token(dir.path()).unwrap();
        assert_eq!(a.len(), 64);
        let mode = std::fs::metadata(token_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(
            token_path(dir.path()),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert_eq!(state_token(dir.path()).unwrap(), a);
        let mode = std::fs::metadata(token_path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(token_path(dir.path()), "\n").unwrap();
        assert!(state_token(dir.path()).is_err());
    }
}
