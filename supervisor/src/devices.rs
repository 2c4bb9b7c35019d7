//! Device tokens (Gateway protocol v4 section 1.4): a local device that proved its Ed25519
//! identity and connected with the gateway token receives `hello-ok.auth.deviceToken`; later
//! connects from that device may present the token instead of the gateway token, for at most
//! the scopes it was issued with. A Control UI tab opened without `#token=` connects this way.
//!
//! Tokens are 32 random bytes (base64url, 43 characters). Only their SHA-256 is stored (the
//! `device_tokens` table of the gateway db), so a token is shown once, when issued; each
//! connect that proves itself with the gateway token again gets a fresh one (the old one
//! stops working). They can be revoked and rotated (`device.token.revoke`/`rotate`,
//! `loopgate devices`); both close that device's live connections (4001 `device removed`).

use base64::Engine;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;

use crate::gatewaydb::DbError;

/// The `device_tokens` table (gateway db schema v5).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS device_tokens(
    device_id TEXT NOT NULL,
    role TEXT NOT NULL,
    token_sha256 TEXT NOT NULL,
    scopes_json TEXT NOT NULL,
    client_id TEXT NOT NULL,
    client_mode TEXT NOT NULL,
    platform TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    rotated_at INTEGER,
    revoked_at INTEGER,
    last_used_at INTEGER,
    PRIMARY KEY(device_id, role)
) STRICT;";

/// A new token: 32 bytes from the OS generator, base64url without padding.
pub fn mint() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Who a token is issued to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub device_id: String,
    pub role: String,
    pub client_id: String,
    pub client_mode: String,
    pub platform: String,
}

/// A device's token as stored (never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceToken {
    pub device_id: String,
    pub role: String,
    pub scopes: Vec<String>,
    pub client_id: String,
    pub client_mode: String,
    pub platform: String,
    pub created_at: u64,
    pub rotated_at: Option<u64>,
    pub revoked_at: Option<u64>,
    pub last_used_at: Option<u64>,
}

/// What a presented token turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    /// The device's current, unrevoked token: its scopes.
    Valid(Vec<String>),
    /// Unknown, replaced or revoked.
    Mismatch,
}

/// A rotated token: the token, its scopes, when.
pub type Rotated = (String, Vec<String>, u64);

pub enum DeviceCmd {
    /// Mints a token for `holder` with `scopes` (replacing any earlier one); answers it and
    /// its issue time.
    Issue {
        holder: Holder,
        scopes: Vec<String>,
        now: u64,
        reply: oneshot::Sender<Result<(String, u64), DbError>>,
    },
    /// Checks a presented token (and marks it used when valid).
    Check {
        device_id: String,
        role: String,
        token: String,
        now: u64,
        reply: oneshot::Sender<Result<Presented, DbError>>,
    },
    List {
        reply: oneshot::Sender<Result<Vec<DeviceToken>, DbError>>,
    },
    /// Revokes; answers the revocation time, `None` if there is no such token.
    Revoke {
        device_id: String,
        role: String,
        now: u64,
        reply: oneshot::Sender<Result<Option<u64>, DbError>>,
    },
    /// Replaces the token (with `scopes`, else the old ones, narrowed to them); answers the
    /// new token, its scopes and time, `None` if the device has no token for `role`.
    Rotate {
        device_id: String,
        role: String,
        scopes: Option<Vec<String>>,
        now: u64,
        reply: oneshot::Sender<Result<Option<Rotated>, DbError>>,
    },
}

/// Carries out one device command on the gateway db's writer thread.
pub fn apply(conn: &Connection, cmd: DeviceCmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    fn answer<T: Send + 'static>(
        tx: oneshot::Sender<Result<T, DbError>>,
        result: Result<T, DbError>,
    ) -> dbwriter::Held {
        dbwriter::Held::to(tx, result, |e| DbError::Commit(e.to_string()))
    }
    match cmd {
        DeviceCmd::Issue {
            holder,
            scopes,
            now,
            reply,
        } => answer(reply, sp.run(conn, |c| issue(c, &holder, &scopes, now))),
        DeviceCmd::Check {
            device_id,
            role,
            token,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| check(c, &device_id, &role, &token, now)),
        ),
        DeviceCmd::List { reply } => answer(reply, sp.run(conn, list)),
        DeviceCmd::Revoke {
            device_id,
            role,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                let n = c
                    .prepare_cached(
                        "UPDATE device_tokens SET revoked_at = ?3
                         WHERE device_id = ?1 AND role = ?2 AND revoked_at IS NULL",
                    )?
                    .execute(params![device_id, role, now as i64])?;
                let exists = n > 0 || find(c, &device_id, &role)?.is_some();
                Ok(exists.then_some(now))
            }),
        ),
        DeviceCmd::Rotate {
            device_id,
            role,
            scopes,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| rotate(c, &device_id, &role, scopes, now)),
        ),
    }
}

fn issue(
    c: &Connection,
    h: &Holder,
    scopes: &[String],
    now: u64,
) -> Result<(String, u64), DbError> {
    let token = mint();
    let scopes_json = serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into());
    c.prepare_cached(
        "INSERT INTO device_tokens(device_id, role, token_sha256, scopes_json, client_id,
                                   client_mode, platform, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(device_id, role) DO UPDATE SET token_sha256 = excluded.token_sha256,
             scopes_json = excluded.scopes_json, client_id = excluded.client_id,
             client_mode = excluded.client_mode, platform = excluded.platform,
             rotated_at = excluded.created_at, revoked_at = NULL",
    )?
    .execute(params![
        h.device_id,
        h.role,
        digest(&token),
        scopes_json,
        h.client_id,
        h.client_mode,
        h.platform,
        now as i64
    ])?;
    Ok((token, now))
}

fn find(
    c: &Connection,
    device_id: &str,
    role: &str,
) -> Result<Option<(String, DeviceToken)>, DbError> {
    Ok(c.prepare_cached(
        "SELECT token_sha256, scopes_json, client_id, client_mode, platform, created_at,
                rotated_at, revoked_at, last_used_at
         FROM device_tokens WHERE device_id = ?1 AND role = ?2",
    )?
    .query_row(params![device_id, role], |r| {
        Ok((
            r.get::<_, String>(0)?,
            row(device_id.to_owned(), role.to_owned(), r, 1)?,
        ))
    })
    .optional()?)
}

/// A `DeviceToken` from columns starting at `at` (scopes, client id, mode, platform,
/// created, rotated, revoked, last used).
fn row(
    device_id: String,
    role: String,
    r: &rusqlite::Row<'_>,
    at: usize,
) -> rusqlite::Result<DeviceToken> {
    let scopes: String = r.get(at)?;
    let opt = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(at + i)?.map(|v| v as u64))
    };
    Ok(DeviceToken {
        device_id,
        role,
        scopes: serde_json::from_str(&scopes).unwrap_or_default(),
        client_id: r.get(at + 1)?,
        client_mode: r.get(at + 2)?,
        platform: r.get(at + 3)?,
        created_at: r.get::<_, i64>(at + 4)? as u64,
        rotated_at: opt(5)?,
        revoked_at: opt(6)?,
        last_used_at: opt(7)?,
    })
}

fn check(
    c: &Connection,
    device_id: &str,
    role: &str,
    token: &str,
    now: u64,
) -> Result<Presented, DbError> {
    let Some((hash, stored)) = find(c, device_id, role)? else {
        return Ok(Presented::Mismatch);
    };
    let same: bool = digest(token).as_bytes().ct_eq(hash.as_bytes()).into();
    if !same || stored.revoked_at.is_some() {
        return Ok(Presented::Mismatch);
    }
    c.prepare_cached(
        "UPDATE device_tokens SET last_used_at = ?3 WHERE device_id = ?1 AND role = ?2",
    )?
    .execute(params![device_id, role, now as i64])?;
    Ok(Presented::Valid(stored.scopes))
}

fn list(c: &Connection) -> Result<Vec<DeviceToken>, DbError> {
    let mut stmt = c.prepare_cached(
        "SELECT device_id, role, scopes_json, client_id, client_mode, platform, created_at,
                rotated_at, revoked_at, last_used_at
         FROM device_tokens ORDER BY created_at, device_id, role",
    )?;
    let rows = stmt.query_map([], |r| row(r.get(0)?, r.get(1)?, r, 2))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn rotate(
    c: &Connection,
    device_id: &str,
    role: &str,
    scopes: Option<Vec<String>>,
    now: u64,
) -> Result<Option<Rotated>, DbError> {
    let Some((_, stored)) = find(c, device_id, role)? else {
        return Ok(None);
    };
    // A rotation never widens what the device was granted.
    let scopes = match scopes {
        Some(s) => s
            .into_iter()
            .filter(|s| covers(&stored.scopes, std::slice::from_ref(s)))
            .collect(),
        None => stored.scopes.clone(),
    };
    let holder = Holder {
        device_id: device_id.to_owned(),
        role: role.to_owned(),
        client_id: stored.client_id,
        client_mode: stored.client_mode,
        platform: stored.platform,
    };
    let (token, at) = issue(c, &holder, &scopes, now)?;
    Ok(Some((token, scopes, at)))
}

/// Whether `granted` covers every scope in `wanted` (admin covers all, write covers read).
pub fn covers(granted: &[String], wanted: &[String]) -> bool {
    use crate::gateway::scopes;
    wanted.iter().all(|w| {
        granted
            .iter()
            .any(|g| g == w || g == scopes::ADMIN || (g == scopes::WRITE && w == scopes::READ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(SCHEMA).unwrap();
        c
    }

    fn holder() -> Holder {
        Holder {
            device_id: "d1".into(),
            role: "operator".into(),
            client_id: "openclaw-control-ui".into(),
            client_mode: "webchat".into(),
            platform: "linux".into(),
        }
    }

    #[test]
    fn tokens_are_long_random_and_stored_only_as_digests() {
        let (a, b) = (mint(), mint());
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        let c = db();
        let (t, _) = issue(&c, &holder(), &["operator.read".into()], 5).unwrap();
        let stored: String = c
            .query_row(
                "SELECT token_sha256 || scopes_json || client_id FROM device_tokens",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!stored.contains(&t), "the token itself is never stored");
    }

    #[test]
    fn a_token_is_valid_until_replaced_or_revoked() {
        let c = db();
        let scopes = vec!["operator.read".to_owned(), "operator.write".to_owned()];
        let (t1, _) = issue(&c, &holder(), &scopes, 5).unwrap();
        assert_eq!(
            check(&c, "d1", "operator", &t1, 6).unwrap(),
            Presented::Valid(scopes.clone())
        );
        assert_eq!(
            check(&c, "d2", "operator", &t1, 6).unwrap(),
            Presented::Mismatch,
            "bound to its device"
        );
        assert_eq!(
            check(&c, "d1", "node", &t1, 6).unwrap(),
            Presented::Mismatch,
            "and its role"
        );
        assert_eq!(
            check(&c, "d1", "operator", "guess", 6).unwrap(),
            Presented::Mismatch
        );
        let (t2, _) = issue(&c, &holder(), &scopes, 7).unwrap();
        assert_eq!(
            check(&c, "d1", "operator", &t1, 8).unwrap(),
            Presented::Mismatch,
            "replaced"
        );
        assert!(matches!(
            check(&c, "d1", "operator", &t2, 8).unwrap(),
            Presented::Valid(_)
        ));
        let listed = list(&c).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].rotated_at, listed[0].last_used_at),
            (Some(7), Some(8))
        );
        let revoke = |c: &Connection| {
            c.execute("UPDATE device_tokens SET revoked_at = 9", [])
                .unwrap();
        };
        revoke(&c);
        assert_eq!(
            check(&c, "d1", "operator", &t2, 10).unwrap(),
            Presented::Mismatch,
            "revoked"
        );
        // A rotation never widens the grant.
        let (t3, s, _) = rotate(
            &c,
            "d1",
            "operator",
            Some(vec!["operator.admin".into(), "operator.read".into()]),
            11,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s, vec!["operator.read".to_owned()]);
        assert_eq!(
            check(&c, "d1", "operator", &t3, 12).unwrap(),
            Presented::Valid(s)
        );
        assert!(rotate(&c, "nobody", "operator", None, 13)
            .unwrap()
            .is_none());
    }

    #[test]
    fn scope_coverage() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(covers(
            &s(&["operator.admin"]),
            &s(&["operator.read", "operator.pairing"])
        ));
        assert!(covers(&s(&["operator.write"]), &s(&["operator.read"])));
        assert!(!covers(&s(&["operator.read"]), &s(&["operator.write"])));
        assert!(covers(&s(&["operator.read"]), &[]));
    }
}
