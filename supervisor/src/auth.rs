//! Connect-time authentication for network clients (Gateway protocol v4 section 1.4): the
//! shared token, Ed25519 device identity and the resulting scopes.
//!
//! - Token: `auth.token` (or `auth.password`) compared with `gateway.auth.token` in constant
//!   time (both are hashed first, so lengths do not leak either).
//! - Device: `id` must be the hex SHA-256 of the raw 32-byte Ed25519 public key
//!   (base64url, or a PEM SPKI block), `signedAt` within 120 s of now, `nonce` equal to the
//!   challenge nonce, and the signature valid over the v3 payload, else the v2 payload.
//!   Local devices are paired silently; remote ones get `PAIRING_REQUIRED` (loopgate has no
//!   pairing flow yet). A proven device that connected with the gateway token is issued a
//!   device token (`crate::gatewaydb::devices`), which it may present later instead of the gateway
//!   token, for at most the scopes it was issued with.
//! - Scopes: kept when a device proved itself, or for the local `cli`/`cli` and local
//!   origin-less `gateway-client`/`backend` clients; otherwise cleared.

use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePublicKey, PublicKeyBytes};
use ed25519_dalek::{Signature, VerifyingKey};
use ipc::gateway::{ConnectParams, ErrorShape};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Largest accepted distance between a device's `signedAt` and now.
pub const MAX_SIGNATURE_SKEW_MS: i64 = 120_000;

/// A refused connect: the error to answer and the close code and reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub error: ErrorShape,
    pub close_code: u16,
    pub close_reason: String,
}

impl Refusal {
    fn new(error: ErrorShape, close_reason: impl Into<String>) -> Box<Self> {
        Box::new(Self {
            error,
            close_code: 1008,
            close_reason: close_reason.into(),
        })
    }
}

/// Where a network client connects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Loopback peer, local Host header, no proxy headers.
    pub local: bool,
    /// The upgrade request carried an `Origin` header (a browser).
    pub has_origin: bool,
}

/// What authentication established.
#[derive(Debug, Clone, PartialEq)]
pub struct Granted {
    pub scopes: Vec<String>,
    /// `token`, `device-token` or `none`.
    pub method: &'static str,
    pub device_id: Option<String>,
    /// A device proved itself with the gateway token: issue it a device token.
    pub issue_device_token: bool,
}

/// The outcome of checking a `connect`'s credentials.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Granted(Granted),
    /// The connect presents a device token for a proven device: look it up, then
    /// [`device_token_grant`].
    CheckDeviceToken(DeviceTokenClaim),
}

/// A device token presented by a device that proved its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTokenClaim {
    pub device_id: String,
    pub role: String,
    pub token: String,
    pub requested: Vec<String>,
    /// It came in `auth.token` (openclaw-node's way), not `auth.deviceToken`.
    pub in_token_field: bool,
}

/// Equal in constant time (over SHA-256 digests, so the length does not leak).
pub fn token_matches(provided: &str, expected: &str) -> bool {
    let a = Sha256::digest(provided.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.ct_eq(&b).into()
}

fn device_error(code: &str, message: &str) -> Box<Refusal> {
    Refusal::new(
        ErrorShape::invalid(message).with_details(json!({"code": code, "reason": message})),
        message,
    )
}

fn auth_error(
    code: &str,
    reason: &str,
    retry_with_device_token: bool,
    next: &str,
    msg: &str,
) -> Box<Refusal> {
    Refusal::new(
        ErrorShape::invalid(msg).with_details(json!({
            "code": code,
            "authReason": reason,
            "canRetryWithDeviceToken": retry_with_device_token,
            "recommendedNextStep": next,
        })),
        msg,
    )
}

const TOKEN_MISMATCH: &str = "unauthorized: gateway token mismatch (set gateway.auth.token on the client to the gateway's token)";

/// The verified id of a local device, or why not.
fn local_device(
    params: &ConnectParams,
    role: &str,
    requested: &[String],
    challenge_nonce: &str,
    peer: Peer,
    now_ms: i64,
) -> Result<Option<String>, Box<Refusal>> {
    let Some(device) = &params.device else {
        return Ok(None);
    };
    let id = verify_device(device, params, role, requested, challenge_nonce, now_ms)?;
    if !peer.local {
        let msg = "pairing required: this device is not paired with the gateway";
        return Err(Refusal::new(
            ErrorShape::new(ipc::gateway::codes::NOT_PAIRED, msg)
                .with_details(json!({"code": "PAIRING_REQUIRED", "reason": "not-paired"})),
            msg,
        ));
    }
    Ok(Some(id))
}

/// Authenticates a `connect` from a network client. `token` is the configured gateway token
/// (`None`: auth mode `none`, only allowed on loopback binds).
///
/// The gateway token (in `auth.token` or `auth.password`) wins; otherwise a device token
/// (`auth.deviceToken`, or `auth.token` when it is not the gateway token) is accepted from
/// a device that proves its identity, after the store is asked ([`Verdict::CheckDeviceToken`]).
pub fn authenticate(
    params: &ConnectParams,
    token: Option<&str>,
    challenge_nonce: &str,
    peer: Peer,
    now_ms: i64,
) -> Result<Verdict, Box<Refusal>> {
    let credentials = Credentials::of(params);
    let requested = params.scopes.clone().unwrap_or_default();
    let role = params.role.as_deref().unwrap_or("operator");
    let has_device = params.device.is_some();
    let method = match token {
        None => "none",
        Some(expected) if credentials.shared_token(expected) => "token",
        Some(_) => {
            let Some((presented, in_token_field)) = credentials.device_token_claim(has_device)
            else {
                return Err(credentials.refusal(has_device));
            };
            let Some(device_id) =
                local_device(params, role, &requested, challenge_nonce, peer, now_ms)?
            else {
                return Err(device_identity_required());
            };
            return Ok(Verdict::CheckDeviceToken(DeviceTokenClaim {
                device_id,
                role: role.to_owned(),
                token: presented,
                requested,
                in_token_field,
            }));
        }
    };
    let device_id = local_device(params, role, &requested, challenge_nonce, peer, now_ms)?;
    let client = (params.client.id.as_str(), params.client.mode.as_str());
    Ok(Verdict::Granted(grant(
        client, peer, method, device_id, requested,
    )))
}

/// The credentials a `connect` presents in `auth` (an empty one counts as absent).
#[derive(Debug, Default)]
struct Credentials {
    token: Option<String>,
    password: Option<String>,
    device_token: Option<String>,
    bootstrap: Option<String>,
}

impl Credentials {
    /// The credentials of `params`.
    fn of(params: &ConnectParams) -> Credentials {
        let auth = params.auth.clone().unwrap_or_default();
        let non_empty = |t: Option<String>| t.filter(|t| !t.is_empty());
        Credentials {
            token: non_empty(auth.token),
            password: non_empty(auth.password),
            device_token: non_empty(auth.device_token),
            bootstrap: non_empty(auth.bootstrap_token),
        }
    }

    /// The gateway token `expected` is presented, in `auth.token` or `auth.password`.
    fn shared_token(&self, expected: &str) -> bool {
        [&self.token, &self.password]
            .into_iter()
            .flatten()
            .any(|p| token_matches(p, expected))
    }

    /// The device token claimed, and whether it came in `auth.token`: `auth.deviceToken`,
    /// else `auth.token` (not the gateway token) from a connect with a device proof.
    fn device_token_claim(&self, has_device: bool) -> Option<(String, bool)> {
        match (&self.device_token, &self.token) {
            (Some(t), _) => Some((t.clone(), false)),
            (None, Some(t)) if has_device => Some((t.clone(), true)),
            _ => None,
        }
    }

    /// Why a connect with neither the gateway token nor a device token is refused, most
    /// telling reason first: a wrong token, a bootstrap token (meaningless here), no device
    /// identity, or no token at all.
    fn refusal(&self, has_device: bool) -> Box<Refusal> {
        if self.token.is_some() || self.password.is_some() {
            auth_error(
                "AUTH_TOKEN_MISMATCH",
                "token_mismatch",
                false,
                "update_auth_credentials",
                TOKEN_MISMATCH,
            )
        } else if self.bootstrap.is_some() {
            // One-time tokens minted by another gateway's CLI (`openclaw dashboard`) mean
            // nothing here: the page falls back to asking for the token.
            auth_error(
                "AUTH_BOOTSTRAP_TOKEN_INVALID",
                "bootstrap_token_invalid",
                false,
                "update_auth_credentials",
                "unauthorized: bootstrap token invalid or expired (loopgate issues none; open the page with #token=<gateway token>)",
            )
        } else if !has_device {
            device_identity_required()
        } else {
            auth_error(
                "AUTH_TOKEN_MISSING",
                "token_missing",
                false,
                "update_auth_configuration",
                "unauthorized: gateway token missing (send the gateway token, or the device token this gateway issued to this device)",
            )
        }
    }
}

/// A device token presented, or no credentials at all, without a device proof.
fn device_identity_required() -> Box<Refusal> {
    Refusal::new(
        ErrorShape::new(ipc::gateway::codes::NOT_PAIRED, "device identity required").with_details(
            json!({"code": "DEVICE_IDENTITY_REQUIRED", "reason": "device identity required"}),
        ),
        "device identity required",
    )
}

/// What a connect that passed the token check (`method`) is granted. Its scopes are kept
/// when a device proved itself, or for the local CLI and a local origin-less backend
/// client, else cleared; a proven device that used the gateway token is issued a device
/// token, except a backend client (as OpenClaw: openclaw-node keeps using the gateway
/// token).
fn grant(
    client: (&str, &str),
    peer: Peer,
    method: &'static str,
    device_id: Option<String>,
    requested: Vec<String>,
) -> Granted {
    let keep = device_id.is_some()
        || (peer.local && client == ("cli", "cli"))
        || (peer.local && !peer.has_origin && client == ("gateway-client", "backend"));
    let issue_device_token =
        method == "token" && device_id.is_some() && client != ("gateway-client", "backend");
    Granted {
        scopes: if keep { requested } else { Vec::new() },
        method,
        device_id,
        issue_device_token,
    }
}

/// Finishes a device-token connect with what the store said of the token.
pub fn device_token_grant(
    claim: &DeviceTokenClaim,
    presented: &crate::gatewaydb::devices::Presented,
) -> Result<Granted, Box<Refusal>> {
    match presented {
        crate::gatewaydb::devices::Presented::Mismatch if claim.in_token_field => Err(auth_error(
            "AUTH_TOKEN_MISMATCH",
            "token_mismatch",
            true,
            "retry_with_device_token",
            TOKEN_MISMATCH,
        )),
        crate::gatewaydb::devices::Presented::Mismatch => Err(auth_error(
            "AUTH_DEVICE_TOKEN_MISMATCH",
            "device_token_mismatch",
            false,
            "update_auth_credentials",
            "unauthorized: device token mismatch (rotate/reissue device token)",
        )),
        crate::gatewaydb::devices::Presented::Valid(granted)
            if !crate::gatewaydb::devices::covers(granted, &claim.requested) =>
        {
            Err(auth_error(
                "AUTH_SCOPE_MISMATCH",
                "scope_mismatch",
                false,
                "review_auth_configuration",
                "unauthorized: device token scope mismatch (connect with the gateway token to be issued a wider one)",
            ))
        }
        crate::gatewaydb::devices::Presented::Valid(_) => Ok(Granted {
            scopes: claim.requested.clone(),
            method: "device-token",
            device_id: Some(claim.device_id.clone()),
            issue_device_token: false,
        }),
    }
}

fn decode_b64(s: &str) -> Option<Vec<u8>> {
    let t = s.trim();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t.trim_end_matches('='))
        .ok()
        .or_else(|| base64::engine::general_purpose::STANDARD.decode(t).ok())
}

/// The raw 32-byte key from base64url or a PEM SPKI block. The SPKI is read by the crypto
/// crate (Ed25519 OID, no parameters, a 32-byte key, nothing after it); the point itself is
/// checked later, where it always was. The PEM armor is read leniently, as it always was
/// (any label, any line width); RFC 7468's strict grammar would refuse some of those.
fn raw_public_key(text: &str) -> Option<[u8; 32]> {
    if text.contains("-----BEGIN") {
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.trim())
            .ok()?;
        return PublicKeyBytes::from_public_key_der(&der).ok().map(|k| k.0);
    }
    decode_b64(text)?.try_into().ok()
}

/// Verifies a device proof; returns the device id.
pub fn verify_device(
    device: &Value,
    params: &ConnectParams,
    role: &str,
    scopes: &[String],
    challenge_nonce: &str,
    now_ms: i64,
) -> Result<String, Box<Refusal>> {
    let field = |k: &str| device.get(k).and_then(Value::as_str).unwrap_or("");
    let (id, public_key, signature, nonce) = (
        field("id"),
        field("publicKey"),
        field("signature"),
        field("nonce"),
    );
    let Some(signed_at) = device.get("signedAt").and_then(Value::as_i64) else {
        let msg = "invalid connect params: device.signedAt must be an integer (ms)";
        return Err(Refusal::new(ErrorShape::invalid(msg), msg));
    };
    let Some(raw) = raw_public_key(public_key) else {
        return Err(device_error(
            "DEVICE_AUTH_PUBLIC_KEY_INVALID",
            "device public key invalid",
        ));
    };
    let derived = crate::secrets::sha256_hex(&raw);
    if !derived.eq_ignore_ascii_case(id) {
        return Err(device_error(
            "DEVICE_AUTH_DEVICE_ID_MISMATCH",
            "device identity mismatch",
        ));
    }
    if (now_ms - signed_at).abs() > MAX_SIGNATURE_SKEW_MS {
        return Err(device_error(
            "DEVICE_AUTH_SIGNATURE_EXPIRED",
            "device signature expired",
        ));
    }
    if nonce.is_empty() {
        return Err(device_error(
            "DEVICE_AUTH_NONCE_REQUIRED",
            "device nonce required",
        ));
    }
    if nonce != challenge_nonce {
        return Err(device_error(
            "DEVICE_AUTH_NONCE_MISMATCH",
            "device nonce mismatch",
        ));
    }
    let Ok(key) = VerifyingKey::from_bytes(&raw) else {
        return Err(device_error(
            "DEVICE_AUTH_PUBLIC_KEY_INVALID",
            "device public key invalid",
        ));
    };
    if key.is_weak() {
        return Err(device_error(
            "DEVICE_AUTH_PUBLIC_KEY_INVALID",
            "device public key invalid",
        ));
    }
    let Some(sig) = decode_b64(signature).and_then(|b| Signature::from_slice(&b).ok()) else {
        return Err(device_error(
            "DEVICE_AUTH_SIGNATURE_INVALID",
            "device signature invalid",
        ));
    };
    let auth = params.auth.clone().unwrap_or_default();
    let token = [&auth.token, &auth.device_token, &auth.bootstrap_token]
        .into_iter()
        .find_map(|t| t.as_deref().filter(|t| !t.is_empty()))
        .unwrap_or("");
    let c = &params.client;
    let csv = scopes.join(",");
    let v3 = format!(
        "v3|{id}|{}|{}|{role}|{csv}|{signed_at}|{token}|{nonce}|{}|{}",
        c.id,
        c.mode,
        c.platform.to_lowercase(),
        c.device_family.as_deref().unwrap_or("").to_lowercase()
    );
    let v2 = format!(
        "v2|{id}|{}|{}|{role}|{csv}|{signed_at}|{token}|{nonce}",
        c.id, c.mode
    );
    let ok = key.verify_strict(v3.as_bytes(), &sig).is_ok()
        || key.verify_strict(v2.as_bytes(), &sig).is_ok();
    if !ok {
        return Err(device_error(
            "DEVICE_AUTH_SIGNATURE_INVALID",
            "device signature invalid",
        ));
    }
    Ok(derived)
}

#[cfg(test)]
mod tests;
