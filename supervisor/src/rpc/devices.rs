//! `device.pair.list`, `device.token.rotate`, `device.token.revoke` (see `crate::gatewaydb::devices`).

use super::*;
use crate::device_conns::DeviceConns;
use crate::gatewaydb::devices::{DeviceCmd, DeviceToken};
use ipc::gateway::{
    DevicePairListResult, DeviceTokenRevokeParams, DeviceTokenRevokeResult,
    DeviceTokenRotateParams, DeviceTokenRotateResult, PairedDevice, TokenSummary,
};

/// A device token operation denied, with OpenClaw's reason.
fn denied(what: &str, reason: &str) -> ErrorShape {
    ErrorShape::invalid(format!("device token {what} denied"))
        .with_details(json!({"reason": reason}))
}

/// The gateway db could not be asked.
fn db_error(e: crate::gatewaydb::DbError) -> ErrorShape {
    ErrorShape::unavailable(e.to_string(), Some(500))
}

/// `device.pair.list`: the devices the gateway db issued tokens, each with its tokens
/// (never the tokens themselves) and whether it is connected now (`conns`); nothing is ever
/// pending (local devices are paired silently).
pub(super) async fn device_pair_list(
    db: &GatewayDb,
    conns: &DeviceConns,
) -> Answer<DevicePairListResult> {
    let rows = db
        .devices(|reply| DeviceCmd::List { reply })
        .await
        .map_err(db_error)?;
    Ok(DevicePairListResult {
        pending: Vec::new(),
        paired: paired(rows, &conns.devices()),
    })
}

/// Token rows grouped by device, in the order the devices first appear.
fn paired(
    rows: Vec<DeviceToken>,
    connected: &std::collections::HashSet<String>,
) -> Vec<PairedDevice> {
    let mut paired: Vec<PairedDevice> = Vec::new();
    // Where each device's entry is (rows come grouped by nothing but creation time).
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for t in rows {
        let summary = TokenSummary {
            role: t.role.clone(),
            scopes: t.scopes.clone(),
            created_at_ms: t.created_at,
            rotated_at_ms: t.rotated_at,
            revoked_at_ms: t.revoked_at,
            last_used_at_ms: t.last_used_at,
        };
        match at.get(&t.device_id).and_then(|&i| paired.get_mut(i)) {
            Some(d) => {
                d.roles.push(t.role);
                d.tokens.push(summary);
            }
            None => {
                at.insert(t.device_id.clone(), paired.len());
                paired.push(PairedDevice {
                    connected: connected.contains(&t.device_id),
                    device_id: t.device_id,
                    client_id: t.client_id,
                    client_mode: t.client_mode,
                    platform: t.platform,
                    roles: vec![t.role],
                    scopes: t.scopes,
                    created_at_ms: t.created_at,
                    approved_via: "silent".into(),
                    tokens: vec![summary],
                })
            }
        }
    }
    paired
}

/// A rotation is never wider than what the caller itself holds (`granted`): asking for
/// scopes it lacks is denied.
fn rotation_refusal(granted: &[String], wanted: Option<&[String]>) -> Option<ErrorShape> {
    let wanted = wanted?;
    (!crate::gatewaydb::devices::covers(granted, wanted))
        .then(|| denied("rotation", "caller-missing-scope"))
}

/// The answer to a rotation: the new token only to the device it belongs to (`own`); to
/// any other caller it is withheld.
fn rotation_answer(
    p: &DeviceTokenRotateParams,
    own: bool,
    token: String,
    scopes: Vec<String>,
    at: u64,
) -> DeviceTokenRotateResult {
    DeviceTokenRotateResult {
        device_id: p.device_id.clone(),
        role: p.role.clone(),
        token: own.then_some(token),
        scopes,
        rotated_at_ms: at,
        token_delivery: if own {
            "in-band"
        } else {
            "withheld-cross-device"
        }
        .into(),
    }
}

/// `device.token.revoke`: the device's token of a role stops working in the gateway db, and
/// its connections (`conns`) close after the answer (the caller may be that device).
pub(super) async fn device_token_revoke(
    db: &GatewayDb,
    conns: &DeviceConns,
    p: DeviceTokenRevokeParams,
) -> Answer<Reply<DeviceTokenRevokeResult>> {
    let (device_id, role) = (p.device_id.clone(), p.role.clone());
    let revoked = db
        .devices(|reply| DeviceCmd::Revoke {
            device_id,
            role,
            now: now_ms(),
            reply,
        })
        .await
        .map_err(db_error)?;
    let Some(at) = revoked else {
        return Err(denied("revocation", "unknown-device-or-role"));
    };
    tracing::info!(
        device = p.device_id.as_str(),
        role = p.role.as_str(),
        "Device token revoked."
    );
    // Swept once the revoke is committed (see `crate::device_conns`).
    let closing = conns.sweep(&p.device_id);
    let result = DeviceTokenRevokeResult {
        device_id: p.device_id,
        role: p.role,
        revoked_at_ms: at,
    };
    Ok(Reply::now(result).then_close_device(closing))
}

/// `device.token.rotate`: a new token for a device's role (the old one stops working),
/// and the device's connections close after the answer.
pub(super) async fn device_token_rotate(
    gw: &Arc<Gateway>,
    session: &Session,
    p: DeviceTokenRotateParams,
) -> Answer<Reply<DeviceTokenRotateResult>> {
    if let Some(refused) = rotation_refusal(&session.scopes, p.scopes.as_deref()) {
        return Err(refused);
    }
    let (device_id, role, scopes) = (p.device_id.clone(), p.role.clone(), p.scopes.clone());
    let generation = crate::gatewaydb::devices::generation(&gw.config());
    let rotated = gw
        .db
        .devices(|reply| DeviceCmd::Rotate {
            device_id,
            role,
            scopes,
            generation,
            now: now_ms(),
            reply,
        })
        .await
        .map_err(db_error)?;
    let Some((token, scopes, at)) = rotated else {
        return Err(denied("rotation", "unknown-device-or-role"));
    };
    tracing::info!(
        device = p.device_id.as_str(),
        role = p.role.as_str(),
        "Device token rotated."
    );
    let own = session.device_id.as_deref() == Some(p.device_id.as_str());
    let result = rotation_answer(&p, own, token, scopes, at);
    let closing = gw.device_conns.sweep(&p.device_id);
    Ok(Reply::now(result).then_close_device(closing))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(device: &str, role: &str, at: u64) -> DeviceToken {
        DeviceToken {
            device_id: device.into(),
            role: role.into(),
            scopes: vec!["operator.read".into()],
            client_id: "openclaw-control-ui".into(),
            client_mode: "webchat".into(),
            platform: "linux".into(),
            created_at: at,
            rotated_at: None,
            revoked_at: None,
            last_used_at: None,
        }
    }

    #[test]
    fn devices_group_their_tokens_in_first_seen_order() {
        let rows = vec![
            row("d1", "operator", 1),
            row("d2", "operator", 2),
            row("d1", "node", 3),
        ];
        let connected = ["d2".to_owned()].into();
        let p = paired(rows, &connected);
        let ids: Vec<_> = p.iter().map(|d| d.device_id.as_str()).collect();
        assert_eq!(ids, ["d1", "d2"]);
        assert_eq!(p[0].roles, ["operator", "node"]);
        assert_eq!(p[0].tokens.len(), 2);
        assert!(!p[0].connected && p[1].connected);
        assert_eq!(p[1].approved_via, "silent");
    }

    fn scopes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_rotation_is_never_wider_than_the_callers_own_scopes() {
        let write = scopes(&["operator.write"]);
        assert!(rotation_refusal(&write, None).is_none());
        assert!(rotation_refusal(&write, Some(&scopes(&["operator.read"]))).is_none());
        let e = rotation_refusal(&write, Some(&scopes(&["operator.admin"]))).unwrap();
        assert_eq!(e.code, ipc::gateway::codes::INVALID_REQUEST);
        assert_eq!(e.message, "device token rotation denied");
        assert_eq!(e.details, Some(json!({"reason": "caller-missing-scope"})));
        // A scope the gateway does not check is covered only by itself or admin.
        let custom = scopes(&["team.deploy"]);
        assert!(rotation_refusal(&write, Some(&custom)).is_some());
        assert!(rotation_refusal(&scopes(&["operator.admin"]), Some(&custom)).is_none());
    }

    #[test]
    fn a_rotated_token_goes_only_to_its_own_device() {
        let p = DeviceTokenRotateParams {
            device_id: "d1".into(),
            role: "operator".into(),
            scopes: None,
        };
        let own = rotation_answer(&p, true, "tok".into(), scopes(&["operator.read"]), 9);
        assert_eq!(own.token.as_deref(), Some("tok"));
        assert_eq!(own.token_delivery, "in-band");
        assert_eq!((own.device_id.as_str(), own.rotated_at_ms), ("d1", 9));
        let other = rotation_answer(&p, false, "tok".into(), scopes(&["operator.read"]), 9);
        assert_eq!(other.token, None);
        assert_eq!(other.token_delivery, "withheld-cross-device");
    }
}
