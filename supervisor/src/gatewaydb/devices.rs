//! Device tokens (Gateway protocol v4 section 1.4): a local device that proved its Ed25519
//! identity and connected with the gateway token receives `hello-ok.auth.deviceToken`; later
//! connects from that device may present the token instead of the gateway token, for at most
//! the scopes it was issued with. A Control UI tab opened without `#token=` connects this way.
//!
//! Tokens are 32 random bytes (base64url, 43 characters). Only their SHA-256 is stored (the
//! `device_token_digests` table of the gateway db, under the device's `device_tokens` row),
//! so a token is shown once, when issued. Each connect that proves itself with the gateway
//! token gets a fresh one, each with the scopes it was issued for; the device's
//! [`LIVE_TOKENS`] newest stay valid, so clients sharing one device identity (OpenClaw's CLI
//! probe and its TUI) do not void each other's. They can be revoked and rotated
//! (`device.token.revoke`/`rotate`, `loopgate devices`), which ends all of the device's
//! tokens for that role and closes its live connections (4001 `device removed`).

use base64::Engine;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::DbError;

/// Tokens of one device and role that stay valid at once (the newest).
pub const LIVE_TOKENS: i64 = 8;

/// Device rows (device and role) kept at most. Every gateway-token connect with a new device
/// key adds one (a browser that loses its key store comes back as a new device), so past this
/// the revoked rows go first, then the longest unused, with their tokens.
pub const DEVICE_ROWS_MAX: i64 = 1000;

/// The `device_tokens` and `device_token_digests` tables (gateway db schema v5).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS device_token_digests(
    token_sha256 TEXT PRIMARY KEY,
    device_id TEXT NOT NULL,
    role TEXT NOT NULL,
    scopes_json TEXT NOT NULL,
    generation TEXT NOT NULL,
    issued_at INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS device_token_digests_of ON device_token_digests(device_id, role);
CREATE TABLE IF NOT EXISTS device_tokens(
    device_id TEXT NOT NULL,
    role TEXT NOT NULL,
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

/// Which gateway token a device token was issued under (a digest of it): a device token
/// is good only while the gateway token it was earned with is, so changing the gateway
/// token ends every device token.
pub fn generation(config: &crate::config::Config) -> String {
    let token = config.gateway.token.as_deref().unwrap_or("");
    digest(&format!("loopgate-device-generation\0{token}"))[..32].to_owned()
}

/// A new token: 32 bytes from the OS generator (each UUID v4 carries 122 random bits, so
/// 244 in all), base64url without padding.
pub fn mint() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(token: &str) -> String {
    crate::secrets::sha256_hex(token.as_bytes())
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
        generation: String,
        now: u64,
        reply: oneshot::Sender<Result<(String, u64), DbError>>,
    },
    /// Whether `token` is any device's valid token (a bearer on the Control UI's routes).
    /// Whether `token` is an unrevoked token of this generation whose scopes cover `scope`
    /// (the HTTP routes' check: a token issued for approvals alone reads no attachment).
    AnyValid {
        token: String,
        generation: String,
        scope: ipc::gateway::Scope,
        reply: oneshot::Sender<Result<bool, DbError>>,
    },
    /// Checks a presented token (and marks it used when valid).
    Check {
        device_id: String,
        role: String,
        token: String,
        generation: String,
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
        generation: String,
        now: u64,
        reply: oneshot::Sender<Result<Option<Rotated>, DbError>>,
    },
}

/// Carries out one device command on the gateway db's writer thread.
pub fn apply(conn: &Connection, cmd: DeviceCmd, sp: &dbwriter::Savepoint) -> dbwriter::Held {
    use super::answer;
    match cmd {
        DeviceCmd::Issue {
            holder,
            scopes,
            generation,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| issue(c, &holder, &scopes, &generation, now)),
        ),
        DeviceCmd::Check {
            device_id,
            role,
            token,
            generation,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                check(c, &device_id, &role, &token, &generation, now)
            }),
        ),
        DeviceCmd::List { reply } => answer(reply, sp.run(conn, list)),
        DeviceCmd::AnyValid {
            token,
            generation,
            scope,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                let scopes: Option<String> = c
                    .prepare_cached(
                        // The presented token's own scopes (the device's row holds its
                        // latest token's, which may be wider or narrower).
                        "SELECT d.scopes_json FROM device_token_digests d JOIN device_tokens t
                           ON t.device_id = d.device_id AND t.role = d.role
                         WHERE d.token_sha256 = ?1 AND d.generation = ?2 AND t.revoked_at IS NULL",
                    )?
                    .query_row(params![digest(&token), generation], |r| r.get(0))
                    .optional()?;
                let granted: Vec<String> = scopes
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or_default();
                Ok(scope.held_in(&granted))
            }),
        ),
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
                c.prepare_cached(
                    "DELETE FROM device_token_digests WHERE device_id = ?1 AND role = ?2",
                )?
                .execute(params![device_id, role])?;
                let exists = n > 0 || find(c, &device_id, &role)?.is_some();
                Ok(exists.then_some(now))
            }),
        ),
        DeviceCmd::Rotate {
            device_id,
            role,
            scopes,
            generation,
            now,
            reply,
        } => answer(
            reply,
            sp.run(conn, |c| {
                rotate(c, &device_id, &role, scopes, &generation, now)
            }),
        ),
    }
}

fn issue(
    c: &Connection,
    h: &Holder,
    scopes: &[String],
    generation: &str,
    now: u64,
) -> Result<(String, u64), DbError> {
    let token = mint();
    let scopes_json = serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into());
    // A revoked device starts over: none of its older tokens come back.
    c.prepare_cached(
        "DELETE FROM device_token_digests WHERE device_id = ?1 AND role = ?2
           AND EXISTS (SELECT 1 FROM device_tokens
                       WHERE device_id = ?1 AND role = ?2 AND revoked_at IS NOT NULL)",
    )?
    .execute(params![h.device_id, h.role])?;
    c.prepare_cached(
        "INSERT INTO device_tokens(device_id, role, scopes_json, client_id, client_mode,
                                   platform, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(device_id, role) DO UPDATE SET
             scopes_json = excluded.scopes_json, client_id = excluded.client_id,
             client_mode = excluded.client_mode, platform = excluded.platform,
             rotated_at = excluded.created_at, revoked_at = NULL",
    )?
    .execute(params![
        h.device_id,
        h.role,
        scopes_json,
        h.client_id,
        h.client_mode,
        h.platform,
        now as i64
    ])?;
    c.prepare_cached(
        "INSERT INTO device_token_digests(token_sha256, device_id, role, scopes_json, generation,
                                          issued_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        digest(&token),
        h.device_id,
        h.role,
        scopes_json,
        generation,
        now as i64
    ])?;
    // Only the newest stay valid.
    c.prepare_cached(
        "DELETE FROM device_token_digests WHERE device_id = ?1 AND role = ?2 AND token_sha256 NOT IN
           (SELECT token_sha256 FROM device_token_digests WHERE device_id = ?1 AND role = ?2
            ORDER BY issued_at DESC, rowid DESC LIMIT ?3)",
    )?
    .execute(params![h.device_id, h.role, LIVE_TOKENS])?;
    evict_beyond_cap(c, h, DEVICE_ROWS_MAX)?;
    Ok((token, now))
}

/// Keeps at most `cap` device rows, sparing the one just issued: revoked rows first, then
/// those unused longest. An evicted device's tokens end with it.
fn evict_beyond_cap(c: &Connection, kept: &Holder, cap: i64) -> Result<(), DbError> {
    let rows: i64 = c
        .prepare_cached("SELECT COUNT(*) FROM device_tokens")?
        .query_row([], |r| r.get(0))?;
    if rows <= cap {
        return Ok(());
    }
    let victims: Vec<(String, String)> = c
        .prepare_cached(
            "SELECT device_id, role FROM device_tokens
             WHERE NOT (device_id = ?1 AND role = ?2)
             ORDER BY revoked_at IS NULL, COALESCE(last_used_at, rotated_at, created_at), rowid
             LIMIT ?3",
        )?
        .query_map(params![kept.device_id, kept.role, rows - cap], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<_, _>>()?;
    for (device_id, role) in &victims {
        c.prepare_cached("DELETE FROM device_token_digests WHERE device_id = ?1 AND role = ?2")?
            .execute(params![device_id, role])?;
        c.prepare_cached("DELETE FROM device_tokens WHERE device_id = ?1 AND role = ?2")?
            .execute(params![device_id, role])?;
    }
    tracing::info!(
        evicted = victims.len(),
        cap,
        "Device rows over the cap: removed the revoked and longest-unused ones."
    );
    Ok(())
}

fn find(c: &Connection, device_id: &str, role: &str) -> Result<Option<DeviceToken>, DbError> {
    Ok(c.prepare_cached(
        "SELECT scopes_json, client_id, client_mode, platform, created_at,
                rotated_at, revoked_at, last_used_at
         FROM device_tokens WHERE device_id = ?1 AND role = ?2",
    )?
    .query_row(params![device_id, role], |r| {
        row(device_id.to_owned(), role.to_owned(), r, 0)
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
    generation: &str,
    now: u64,
) -> Result<Presented, DbError> {
    let Some(stored) = find(c, device_id, role)? else {
        return Ok(Presented::Mismatch);
    };
    // Looked up by digest: what the lookup's timing could tell is about a hash the caller
    // cannot choose.
    let scopes: Option<String> = c
        .prepare_cached(
            "SELECT scopes_json FROM device_token_digests
             WHERE token_sha256 = ?1 AND device_id = ?2 AND role = ?3 AND generation = ?4",
        )?
        .query_row(params![digest(token), device_id, role, generation], |r| {
            r.get(0)
        })
        .optional()?;
    let (Some(scopes), None) = (scopes, stored.revoked_at) else {
        return Ok(Presented::Mismatch);
    };
    c.prepare_cached(
        "UPDATE device_tokens SET last_used_at = ?3 WHERE device_id = ?1 AND role = ?2",
    )?
    .execute(params![device_id, role, now as i64])?;
    Ok(Presented::Valid(
        serde_json::from_str(&scopes).unwrap_or_default(),
    ))
}

fn list(c: &Connection) -> Result<Vec<DeviceToken>, DbError> {
    let mut stmt = c.prepare_cached(
        "SELECT device_id, role, scopes_json, client_id, client_mode, platform, created_at,
                rotated_at, revoked_at, last_used_at
         FROM device_tokens ORDER BY created_at, device_id, role",
    )?;
    let rows = stmt.query_map([], |r| row(r.get(0)?, r.get(1)?, r, 2))?;
    let mut tokens: Vec<DeviceToken> = rows.collect::<Result<_, _>>()?;
    // What the device can do: every scope one of its live tokens grants.
    let mut live = c.prepare_cached(
        "SELECT scopes_json FROM device_token_digests WHERE device_id = ?1 AND role = ?2",
    )?;
    for t in &mut tokens {
        let grants = live.query_map(params![t.device_id, t.role], |r| r.get::<_, String>(0))?;
        let mut all: Vec<String> = Vec::new();
        for g in grants {
            for s in serde_json::from_str::<Vec<String>>(&g?).unwrap_or_default() {
                if !all.contains(&s) {
                    all.push(s);
                }
            }
        }
        if t.revoked_at.is_none() {
            all.sort();
            t.scopes = all;
        }
    }
    Ok(tokens)
}

fn rotate(
    c: &Connection,
    device_id: &str,
    role: &str,
    scopes: Option<Vec<String>>,
    generation: &str,
    now: u64,
) -> Result<Option<Rotated>, DbError> {
    // A revoked token stays revoked: only a gateway-token connect issues a new one.
    let Some(stored) = find(c, device_id, role)?.filter(|s| s.revoked_at.is_none()) else {
        return Ok(None);
    };
    // The old tokens end here.
    c.prepare_cached("DELETE FROM device_token_digests WHERE device_id = ?1 AND role = ?2")?
        .execute(params![device_id, role])?;
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
    let (token, at) = issue(c, &holder, &scopes, generation, now)?;
    Ok(Some((token, scopes, at)))
}

/// Whether `granted` covers every scope in `wanted` (admin covers all, write covers read).
pub fn covers(granted: &[String], wanted: &[String]) -> bool {
    ipc::gateway::covers(granted, wanted)
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
        let (t, _) = issue(&c, &holder(), &["operator.read".into()], "g", 5).unwrap();
        let stored: String = c
            .query_row(
                "SELECT group_concat(token_sha256 || scopes_json, '') FROM device_token_digests",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!stored.contains(&t), "the token itself is never stored");
    }

    #[test]
    fn rows_beyond_the_cap_go_revoked_first_then_longest_unused() {
        let c = db();
        let h = |id: &str| Holder {
            device_id: id.into(),
            ..holder()
        };
        let read = vec!["operator.read".to_owned()];
        let mut tokens = Vec::new();
        for (i, id) in ["d1", "d2", "d3", "d4"].iter().enumerate() {
            tokens.push(issue(&c, &h(id), &read, "g", i as u64 + 1).unwrap().0);
        }
        c.execute(
            "UPDATE device_tokens SET revoked_at = 9 WHERE device_id = 'd2'",
            [],
        )
        .unwrap();
        // d1 is the oldest but was used last.
        assert!(matches!(
            check(&c, "d1", "operator", &tokens[0], "g", 10).unwrap(),
            Presented::Valid(_)
        ));
        evict_beyond_cap(&c, &h("d4"), 2).unwrap();
        let left: Vec<String> = c
            .prepare("SELECT device_id FROM device_tokens ORDER BY device_id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(left, ["d1", "d4"]);
        // The evicted device's token ends with its row; a kept one still works.
        assert!(matches!(
            check(&c, "d3", "operator", &tokens[2], "g", 11).unwrap(),
            Presented::Mismatch
        ));
        assert!(matches!(
            check(&c, "d4", "operator", &tokens[3], "g", 11).unwrap(),
            Presented::Valid(_)
        ));
        // Under the cap, nothing goes.
        evict_beyond_cap(&c, &h("d4"), 2).unwrap();
        assert_eq!(list(&c).unwrap().len(), 2);
    }

    #[test]
    fn tokens_stay_valid_until_pushed_out_or_revoked() {
        let c = db();
        let rw = vec!["operator.read".to_owned(), "operator.write".to_owned()];
        let read = vec!["operator.read".to_owned()];
        let (t1, _) = issue(&c, &holder(), &rw, "g", 5).unwrap();
        assert_eq!(
            check(&c, "d1", "operator", &t1, "g", 6).unwrap(),
            Presented::Valid(rw.clone())
        );
        assert_eq!(
            check(&c, "d2", "operator", &t1, "g", 6).unwrap(),
            Presented::Mismatch,
            "bound to its device"
        );
        assert_eq!(
            check(&c, "d1", "node", &t1, "g", 6).unwrap(),
            Presented::Mismatch,
            "and its role"
        );
        assert_eq!(
            check(&c, "d1", "operator", "guess", "g", 6).unwrap(),
            Presented::Mismatch
        );
        assert_eq!(
            check(&c, "d1", "operator", &t1, "another gateway token", 6).unwrap(),
            Presented::Mismatch,
            "a new gateway token ends the old device tokens"
        );
        // Another client of the same device (a read-only probe) gets its own token; the
        // first keeps working with its own scopes.
        let (t2, _) = issue(&c, &holder(), &read, "g", 7).unwrap();
        assert_eq!(
            check(&c, "d1", "operator", &t1, "g", 8).unwrap(),
            Presented::Valid(rw.clone())
        );
        assert_eq!(
            check(&c, "d1", "operator", &t2, "g", 8).unwrap(),
            Presented::Valid(read.clone())
        );
        assert_eq!(
            list(&c).unwrap()[0].scopes,
            rw,
            "the list shows what any live token grants"
        );
        let any = |t: &str| {
            c.prepare_cached(
                "SELECT count(*) FROM device_token_digests d JOIN device_tokens t
                   ON t.device_id = d.device_id AND t.role = d.role
                 WHERE d.token_sha256 = ?1 AND t.revoked_at IS NULL",
            )
            .unwrap()
            .query_row(params![digest(t)], |r| r.get::<_, i64>(0))
            .unwrap()
        };
        assert_eq!((any(&t1), any("nope")), (1, 0));
        // The newest LIVE_TOKENS stay: t1 is pushed out.
        for i in 0..LIVE_TOKENS {
            issue(&c, &holder(), &read, "g", 10 + i as u64).unwrap();
        }
        assert_eq!(
            check(&c, "d1", "operator", &t1, "g", 30).unwrap(),
            Presented::Mismatch,
            "pushed out"
        );
        let listed = list(&c).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].last_used_at, Some(8));
        // Revoked: every token of the device ends.
        let (t3, _) = issue(&c, &holder(), &rw, "g", 40).unwrap();
        c.execute("UPDATE device_tokens SET revoked_at = 41", [])
            .unwrap();
        assert_eq!(
            check(&c, "d1", "operator", &t3, "g", 42).unwrap(),
            Presented::Mismatch,
            "revoked"
        );
        assert!(
            rotate(&c, "d1", "operator", None, "g", 42)
                .unwrap()
                .is_none(),
            "a rotation does not undo a revocation"
        );
        // A rotation never widens the grant and ends the older tokens.
        c.execute("UPDATE device_tokens SET revoked_at = NULL", [])
            .unwrap();
        let (t4, s, _) = rotate(
            &c,
            "d1",
            "operator",
            Some(vec!["operator.admin".into(), "operator.write".into()]),
            "g",
            43,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s, vec!["operator.write".to_owned()]);
        assert_eq!(
            check(&c, "d1", "operator", &t4, "g", 44).unwrap(),
            Presented::Valid(s)
        );
        assert_eq!(
            check(&c, "d1", "operator", &t3, "g", 44).unwrap(),
            Presented::Mismatch
        );
        assert!(rotate(&c, "nobody", "operator", None, "g", 45)
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
