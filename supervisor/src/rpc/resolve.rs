//! `sessions.resolve` and `sessions.abort`, as OpenClaw answers them: the Control UI resolves
//! the session its URL names (`/chat/<agent>/<shortId>`, the end of a session key's UUID
//! without dashes) and stops a session with `sessions.abort`.

use ipc::gateway::{
    ResolvedSession, SessionsAbortParams, SessionsAbortResult, SessionsResolveParams,
    SessionsResolveResult,
};

use super::*;

/// Most candidates an ambiguous short id lists.
const MAX_CANDIDATES: usize = 10;
/// Most session rows a label or short id is looked for in.
const MAX_SCANNED: u32 = 100_000;

/// Why `sessions.resolve` refuses its params (OpenClaw's texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum ResolveRefused {
    #[error("Provide either key, sessionId, label, shortId, or reference (not multiple)")]
    Several,
    #[error("Either key, sessionId, label, shortId, or reference is required")]
    NoneGiven,
    #[error("slugHint requires shortId")]
    SlugHintAlone,
}

/// Checks that a `sessions.resolve` names its session exactly one way.
fn resolve_refusal(p: &SessionsResolveParams) -> Option<ResolveRefused> {
    let given = [
        p.key.is_some(),
        p.session_id.is_some(),
        p.label.is_some(),
        p.short_id.is_some(),
        p.reference.is_some(),
    ]
    .iter()
    .filter(|g| **g)
    .count();
    if given > 1 {
        return Some(ResolveRefused::Several);
    }
    if given == 0 {
        return Some(ResolveRefused::NoneGiven);
    }
    if p.slug_hint.is_some() && p.short_id.is_none() {
        return Some(ResolveRefused::SlugHintAlone);
    }
    None
}

/// `sessions.resolve`: the session a key, id, label, short id or reference names, found in
/// the gateway db (a key routed against the configured agents).
pub(super) async fn sessions_resolve(
    config: &Config,
    db: &GatewayDb,
    p: SessionsResolveParams,
) -> Answer<SessionsResolveResult> {
    if let Some(refused) = resolve_refusal(&p) {
        return Err(ErrorShape::invalid(refused.to_string()));
    }
    let found = lookup(config, db, &p).await?;
    answer_of(found, p.allow_missing == Some(true))
}

/// The answer to a lookup: the one session, the candidates, or nothing (an error unless
/// `allow_missing`).
fn answer_of(found: Found, allow_missing: bool) -> Answer<SessionsResolveResult> {
    Ok(match found {
        Found::One(s) => SessionsResolveResult {
            ok: true,
            found: Some(s),
            candidates: None,
        },
        Found::Several(c) => SessionsResolveResult {
            ok: false,
            found: None,
            candidates: Some(c),
        },
        Found::None(_) if allow_missing => SessionsResolveResult {
            ok: false,
            found: None,
            candidates: None,
        },
        Found::None(what) => return Err(ErrorShape::invalid(what)),
    })
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    One(ResolvedSession),
    Several(Vec<ResolvedSession>),
    /// Nothing: what OpenClaw says then.
    None(String),
}

/// A found session as `sessions.resolve` names it.
fn resolved(key: String, agent_id: String, label: Option<String>) -> ResolvedSession {
    ResolvedSession {
        key,
        agent_id,
        display_name: label,
    }
}

/// Finds the session in the gateway db by the one name the params give.
async fn lookup(
    config: &Config,
    db: &GatewayDb,
    p: &SessionsResolveParams,
) -> Result<Found, ErrorShape> {
    let db_error = |e: crate::gatewaydb::DbError| {
        ErrorShape::unavailable(format!("cannot read the session index: {e}"), Some(500))
    };
    if let Some(key) = p.key.as_ref().or(p.reference.as_ref().map(|r| &r.key)) {
        let params = AgentParams {
            session_key: Some(key.clone()),
            agent_id: p.agent_id.clone(),
            ..Default::default()
        };
        let missing = || Found::None(format!("No session found: {key}"));
        let Ok(route) = route(&params, |id| config.agent(id).is_some()) else {
            return Ok(missing());
        };
        let q = SessionQuery {
            key: Some(route.session_key.clone()),
            limit: 1,
            ..SessionQuery::default()
        };
        let (rows, _) = db.sessions(q).await.map_err(db_error)?;
        return Ok(match rows.into_iter().next() {
            Some(r) => Found::One(resolved(r.session_key, r.agent_id, None)),
            None => missing(),
        });
    }
    if let Some(id) = &p.session_id {
        return Ok(
            match db.session_by_id(id.clone()).await.map_err(db_error)? {
                Some((key, agent_id)) if p.agent_id.as_deref().is_none_or(|a| a == agent_id) => {
                    Found::One(resolved(key, agent_id, None))
                }
                _ => Found::None(format!("No session found: {id}")),
            },
        );
    }
    let q = SessionQuery {
        agent_id: p.agent_id.clone(),
        limit: MAX_SCANNED,
        ..SessionQuery::default()
    };
    let (rows, _) = db.sessions(q).await.map_err(db_error)?;
    if let Some(label) = &p.label {
        return by_label(rows, label);
    }
    let Some(short) = &p.short_id else {
        return Ok(Found::None("No session found".into()));
    };
    by_short_id(rows, short)
}

/// The one session whose label is `label` (trimmed); several are refused, naming them.
fn by_label(rows: Vec<crate::gatewaydb::SessionRow>, label: &str) -> Result<Found, ErrorShape> {
    let label = label.trim();
    let matching: Vec<_> = rows
        .into_iter()
        .filter(|r| r.label.as_deref() == Some(label))
        .collect();
    Ok(match matching.as_slice() {
        [] => Found::None(format!("No session found with label: {label}")),
        [one] => Found::One(resolved(
            one.session_key.clone(),
            one.agent_id.clone(),
            one.label.clone(),
        )),
        several => {
            let keys: Vec<&str> = several.iter().map(|r| r.session_key.as_str()).collect();
            return Err(ErrorShape::invalid(format!(
                "Multiple sessions found with label: {label} ({})",
                keys.join(", ")
            )));
        }
    })
}

/// The sessions whose short id starts with `short` (8-32 hex digits, any case): one, or
/// at most [`MAX_CANDIDATES`] candidates.
fn by_short_id(rows: Vec<crate::gatewaydb::SessionRow>, short: &str) -> Result<Found, ErrorShape> {
    let short = short.to_ascii_lowercase();
    if !(8..=32).contains(&short.len()) || !short.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ErrorShape::invalid(
            "shortId must be 8-32 hexadecimal characters",
        ));
    }
    let mut matching: Vec<ResolvedSession> = rows
        .into_iter()
        .filter(|r| short_id_of(&r.session_key).starts_with(&short))
        .map(|r| resolved(r.session_key, r.agent_id, r.label))
        .collect();
    Ok(match matching.len() {
        0 => Found::None(format!("No session found: {short}")),
        1 => Found::One(matching.remove(0)),
        _ => {
            matching.truncate(MAX_CANDIDATES);
            Found::Several(matching)
        }
    })
}

/// The digits a short id is matched against: the key's last part, lowercase, no dashes.
fn short_id_of(key: &str) -> String {
    key.rsplit(':')
        .next()
        .unwrap_or(key)
        .chars()
        .filter(|c| *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

pub(super) async fn sessions_abort(
    gw: &Gateway,
    p: SessionsAbortParams,
) -> Answer<SessionsAbortResult> {
    let none = SessionsAbortResult {
        ok: true,
        aborted_run_id: None,
        status: "no-active-run".into(),
    };
    let session_key = match (&p.key, &p.run_id) {
        (Some(key), _) => {
            routed(
                &gw.config(),
                Method::SessionsAbort,
                key,
                p.agent_id.as_deref(),
            )?
            .session_key
        }
        // A run alone: its session, if the run is still going.
        (None, Some(run_id)) => match gw.db.lookup(run_id.clone()).await {
            Ok(Some(StoredRun::Active { session_key, .. })) => session_key,
            Ok(_) => return Ok(none),
            Err(e) => {
                let why = format!("cannot look up the run: {e}");
                return Err(ErrorShape::unavailable(why, Some(500)));
            }
        },
        (None, None) => return Err(ErrorShape::invalid("key required")),
    };
    let ids = gw
        .control
        .abort(session_key, p.run_id.clone(), StopReason::Rpc)
        .await
        .map_err(control_error)?
        .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    Ok(match ids.into_iter().next() {
        Some(id) => SessionsAbortResult {
            ok: true,
            aborted_run_id: Some(id),
            status: "aborted".into(),
        },
        None => none,
    })
}

#[cfg(test)]
mod tests;
