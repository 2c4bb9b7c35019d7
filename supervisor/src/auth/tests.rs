use super::*;
use crate::secrets::hex;
use ed25519_dalek::{Signer, SigningKey};
use ipc::gateway::{ClientInfo, ConnectAuth};

/// The checks without a device-token store: a claim is a test failure here.
fn authenticate(
    params: &ConnectParams,
    token: Option<&str>,
    nonce: &str,
    peer: Peer,
    now_ms: i64,
) -> Result<Granted, Box<Refusal>> {
    match super::authenticate(params, token, nonce, peer, now_ms)? {
        Verdict::Granted(g) => Ok(g),
        Verdict::CheckDeviceToken(c) => panic!("unexpected device-token claim {c:?}"),
    }
}

fn params(token: Option<&str>, id: &str, mode: &str) -> ConnectParams {
    ConnectParams {
        min_protocol: 4,
        max_protocol: 4,
        client: ClientInfo::new(id, "1", "Linux", mode),
        caps: vec![],
        role: Some("operator".into()),
        scopes: Some(vec!["operator.read".into(), "operator.write".into()]),
        auth: token.map(|t| ConnectAuth {
            token: Some(t.into()),
            ..Default::default()
        }),
        device: None,
    }
}

const LOCAL: Peer = Peer {
    local: true,
    has_origin: false,
};

fn sign(p: &mut ConnectParams, key: &SigningKey, nonce: &str, signed_at: i64, v3: bool) {
    let raw = key.verifying_key().to_bytes();
    let id = hex(&Sha256::digest(raw));
    let token = p
        .auth
        .as_ref()
        .and_then(|a| a.token.clone())
        .unwrap_or_default();
    let scopes = p.scopes.clone().unwrap_or_default().join(",");
    let c = &p.client;
    let payload = if v3 {
        format!(
            "v3|{id}|{}|{}|operator|{scopes}|{signed_at}|{token}|{nonce}|linux|",
            c.id, c.mode
        )
    } else {
        format!(
            "v2|{id}|{}|{}|operator|{scopes}|{signed_at}|{token}|{nonce}",
            c.id, c.mode
        )
    };
    let sig = key.sign(payload.as_bytes());
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    p.device = Some(json!({
        "id": id, "publicKey": b64.encode(raw), "signature": b64.encode(sig.to_bytes()),
        "signedAt": signed_at, "nonce": nonce
    }));
}

#[test]
fn token_rules() {
    assert!(token_matches("abc", "abc"));
    assert!(!token_matches("abc", "abd"));
    let e = authenticate(
        &params(Some("bad"), "cli", "cli"),
        Some("good"),
        "n",
        LOCAL,
        0,
    )
    .unwrap_err();
    assert_eq!(e.error.details.unwrap()["code"], "AUTH_TOKEN_MISMATCH");
    assert_eq!(e.close_code, 1008);
    let e = authenticate(&params(None, "cli", "cli"), Some("good"), "n", LOCAL, 0).unwrap_err();
    assert_eq!(e.error.code, "NOT_PAIRED");
    assert_eq!(e.error.details.unwrap()["code"], "DEVICE_IDENTITY_REQUIRED");
    let g = authenticate(
        &params(Some("good"), "cli", "cli"),
        Some("good"),
        "n",
        LOCAL,
        0,
    )
    .unwrap();
    assert_eq!(g.scopes.len(), 2, "local cli keeps its scopes");
    let g = authenticate(
        &params(Some("good"), "test", "test"),
        Some("good"),
        "n",
        LOCAL,
        0,
    )
    .unwrap();
    assert!(
        g.scopes.is_empty(),
        "other clients without a device get no scopes"
    );
    let remote = Peer {
        local: false,
        has_origin: false,
    };
    let g = authenticate(
        &params(Some("good"), "cli", "cli"),
        Some("good"),
        "n",
        remote,
        0,
    )
    .unwrap();
    assert!(g.scopes.is_empty());
    let browser = Peer {
        local: true,
        has_origin: true,
    };
    let g = authenticate(
        &params(Some("good"), "gateway-client", "backend"),
        Some("good"),
        "n",
        browser,
        0,
    )
    .unwrap();
    assert!(g.scopes.is_empty());
}

#[test]
fn device_proofs_v3_v2_and_each_failure() {
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let now = 1_000_000;
    for v3 in [true, false] {
        let mut p = params(Some("t"), "test", "test");
        sign(&mut p, &key, "nonce-1", now, v3);
        let g = authenticate(&p, Some("t"), "nonce-1", LOCAL, now + 1000).unwrap();
        assert_eq!(g.scopes.len(), 2, "a proven device keeps its scopes");
        assert!(g.device_id.is_some());
    }
    let code = |p: &ConnectParams, nonce: &str, now: i64| {
        authenticate(p, Some("t"), nonce, LOCAL, now)
            .unwrap_err()
            .error
            .details
            .unwrap()["code"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mut p = params(Some("t"), "test", "test");
    sign(&mut p, &key, "nonce-1", now, true);
    assert_eq!(
        code(&p, "nonce-1", now + 200_000),
        "DEVICE_AUTH_SIGNATURE_EXPIRED"
    );
    assert_eq!(code(&p, "other", now), "DEVICE_AUTH_NONCE_MISMATCH");
    let mut bad_id = p.clone();
    bad_id.device.as_mut().unwrap()["id"] = json!("00");
    assert_eq!(
        code(&bad_id, "nonce-1", now),
        "DEVICE_AUTH_DEVICE_ID_MISMATCH"
    );
    let mut tampered = p.clone();
    tampered.scopes = Some(vec!["operator.admin".into()]);
    assert_eq!(
        code(&tampered, "nonce-1", now),
        "DEVICE_AUTH_SIGNATURE_INVALID"
    );
    let mut bad_key = p.clone();
    bad_key.device.as_mut().unwrap()["publicKey"] = json!("not a key");
    assert_eq!(
        code(&bad_key, "nonce-1", now),
        "DEVICE_AUTH_PUBLIC_KEY_INVALID"
    );
    let mut no_nonce = p.clone();
    no_nonce.device.as_mut().unwrap()["nonce"] = json!("");
    assert_eq!(
        code(&no_nonce, "nonce-1", now),
        "DEVICE_AUTH_NONCE_REQUIRED"
    );
    let remote = Peer {
        local: false,
        has_origin: false,
    };
    let e = authenticate(&p, Some("t"), "nonce-1", remote, now).unwrap_err();
    assert_eq!(e.error.details.unwrap()["code"], "PAIRING_REQUIRED");
}

#[test]
fn pem_public_keys_are_accepted() {
    let key = SigningKey::from_bytes(&[9u8; 32]);
    let raw = key.verifying_key().to_bytes();
    let mut der = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    der.extend_from_slice(&raw);
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der)
    );
    assert_eq!(raw_public_key(&pem), Some(raw));
}

/// The key forms read before the SPKI went through the crypto crate still read, and the
/// malformed ones are still refused: raw keys in base64url (padded or not) or standard
/// base64; PEM with any label, any line width, CRLF, no END line; an SPKI only if it is
/// exactly an Ed25519 key with no parameters and nothing after it. The point is not checked
/// here (a key off the curve fails later, after the id and nonce checks).
#[test]
fn public_key_forms_read_and_refused() {
    let raw = SigningKey::from_bytes(&[9u8; 32])
        .verifying_key()
        .to_bytes();
    let std64 = base64::engine::general_purpose::STANDARD;
    let url64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    assert_eq!(raw_public_key(&url64.encode(raw)), Some(raw));
    assert_eq!(
        raw_public_key(&format!(" {}= ", url64.encode(raw))),
        Some(raw)
    );
    assert_eq!(raw_public_key(&std64.encode(raw)), Some(raw));
    assert_eq!(raw_public_key(&url64.encode(&raw[..31])), None);
    assert_eq!(raw_public_key("not base64!"), None);
    let spki = |prefix: &[u8], key: &[u8], suffix: &[u8]| {
        let mut der = prefix.to_vec();
        der.extend_from_slice(key);
        der.extend_from_slice(suffix);
        std64.encode(der)
    };
    let prefix = [
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    let body = spki(&prefix, &raw, &[]);
    let pem = |text: String| raw_public_key(&text);
    assert_eq!(
        pem(format!(
            "-----BEGIN PUBLIC KEY-----\r\n{body}\r\n-----END PUBLIC KEY-----\r\n"
        )),
        Some(raw)
    );
    assert_eq!(
        pem(format!(
            "-----BEGIN ED25519 KEY-----\n{}\n{}\n",
            &body[..20],
            &body[20..]
        )),
        Some(raw),
        "any label, any width, no END line"
    );
    // Not Ed25519 (X25519's OID 1.3.101.110), a parameter, a short key, bytes after it.
    let x25519 = [
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00,
    ];
    let with_null = [
        0x30, 0x2c, 0x30, 0x07, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x05, 0x00, 0x03, 0x21, 0x00,
    ];
    let short = [
        0x30, 0x29, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x20, 0x00,
    ];
    for bad in [
        spki(&x25519, &raw, &[]),
        spki(&with_null, &raw, &[]),
        spki(&short, &raw[..31], &[]),
        spki(&prefix, &raw, &[0]),
        spki(&prefix[..11], &raw, &[]),
        url64.encode(raw),
    ] {
        assert_eq!(
            pem(format!(
                "-----BEGIN PUBLIC KEY-----\n{bad}\n-----END PUBLIC KEY-----\n"
            )),
            None,
            "{bad}"
        );
    }
    // A point off the curve still reads here (its id is checked first).
    let off_curve = [0xffu8; 32];
    assert_eq!(
        pem(format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n",
            spki(&prefix, &off_curve, &[])
        )),
        Some(off_curve)
    );
}

#[test]
fn device_tokens_claims_and_grants() {
    let key = SigningKey::from_bytes(&[5u8; 32]);
    let now = 2_000_000;
    let mut p = params(None, "openclaw-control-ui", "webchat");
    p.auth = Some(ConnectAuth {
        device_token: Some("dt".into()),
        ..Default::default()
    });
    // The signature's token slot holds the device token when no gateway token is sent.
    let raw = key.verifying_key().to_bytes();
    let id = hex(&Sha256::digest(raw));
    let scopes = p.scopes.clone().unwrap().join(",");
    let payload = format!("v2|{id}|openclaw-control-ui|webchat|operator|{scopes}|{now}|dt|n1");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    p.device = Some(json!({"id": id, "publicKey": b64.encode(raw),
            "signature": b64.encode(key.sign(payload.as_bytes()).to_bytes()), "signedAt": now, "nonce": "n1"}));
    let claim = match super::authenticate(&p, Some("shared"), "n1", LOCAL, now).unwrap() {
        Verdict::CheckDeviceToken(c) => c,
        other => panic!("{other:?}"),
    };
    assert_eq!((claim.token.as_str(), claim.in_token_field), ("dt", false));
    let read = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ok = device_token_grant(
        &claim,
        &crate::gatewaydb::devices::Presented::Valid(read(&["operator.admin"])),
    )
    .unwrap();
    assert_eq!(ok.method, "device-token");
    assert!(!ok.issue_device_token);
    let code = |r: Result<Granted, Box<Refusal>>| {
        r.unwrap_err().error.details.unwrap()["code"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        code(device_token_grant(
            &claim,
            &crate::gatewaydb::devices::Presented::Valid(read(&["operator.read"]))
        )),
        "AUTH_SCOPE_MISMATCH"
    );
    assert_eq!(
        code(device_token_grant(
            &claim,
            &crate::gatewaydb::devices::Presented::Mismatch
        )),
        "AUTH_DEVICE_TOKEN_MISMATCH"
    );
    let fallback = DeviceTokenClaim {
        in_token_field: true,
        ..claim.clone()
    };
    let e =
        device_token_grant(&fallback, &crate::gatewaydb::devices::Presented::Mismatch).unwrap_err();
    let d = e.error.details.unwrap();
    assert_eq!(
        (d["code"].as_str(), d["canRetryWithDeviceToken"].as_bool()),
        (Some("AUTH_TOKEN_MISMATCH"), Some(true))
    );
    // A device token without a device is refused before any lookup.
    let mut bare = p.clone();
    bare.device = None;
    let e = super::authenticate(&bare, Some("shared"), "n1", LOCAL, now).unwrap_err();
    assert_eq!(e.error.details.unwrap()["code"], "DEVICE_IDENTITY_REQUIRED");
    // A forged proof never reaches the store.
    let mut forged = p.clone();
    forged.device.as_mut().unwrap()["nonce"] = json!("other");
    assert!(super::authenticate(&forged, Some("shared"), "n1", LOCAL, now).is_err());
}

#[test]
fn who_is_issued_a_device_token() {
    let key = SigningKey::from_bytes(&[6u8; 32]);
    let now = 3_000_000;
    let mut ui = params(Some("t"), "test", "test");
    sign(&mut ui, &key, "n", now, true);
    let g = authenticate(&ui, Some("t"), "n", LOCAL, now).unwrap();
    assert!(g.issue_device_token && g.method == "token");
    let mut backend = params(Some("t"), "gateway-client", "backend");
    sign(&mut backend, &key, "n", now, true);
    assert!(
        !authenticate(&backend, Some("t"), "n", LOCAL, now)
            .unwrap()
            .issue_device_token
    );
    let plain = params(Some("t"), "cli", "cli");
    assert!(
        !authenticate(&plain, Some("t"), "n", LOCAL, now)
            .unwrap()
            .issue_device_token
    );
    assert!(
        !authenticate(&ui, None, "n", LOCAL, now)
            .unwrap()
            .issue_device_token,
        "auth mode none"
    );
    let mut boot = params(None, "openclaw-control-ui", "webchat");
    boot.auth = Some(ConnectAuth {
        bootstrap_token: Some("b".into()),
        ..Default::default()
    });
    let e = authenticate(&boot, Some("t"), "n", LOCAL, now).unwrap_err();
    assert_eq!(
        e.error.details.unwrap()["code"],
        "AUTH_BOOTSTRAP_TOKEN_INVALID"
    );
}

/// Credentials { token, password, device token, bootstrap token }, `None` for absent.
fn credentials(
    token: Option<&str>,
    password: Option<&str>,
    device_token: Option<&str>,
    bootstrap: Option<&str>,
) -> Credentials {
    Credentials {
        token: token.map(Into::into),
        password: password.map(Into::into),
        device_token: device_token.map(Into::into),
        bootstrap: bootstrap.map(Into::into),
    }
}

/// The refusal's `details.code`.
fn code(r: &Refusal) -> String {
    r.error.details.as_ref().unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn empty_credentials_count_as_absent_and_either_field_carries_the_gateway_token() {
    let mut p = params(Some(""), "cli", "cli");
    p.auth.as_mut().unwrap().password = Some("good".into());
    let c = Credentials::of(&p);
    assert!(c.token.is_none() && c.device_token.is_none() && c.bootstrap.is_none());
    assert!(c.shared_token("good"));
    assert!(!c.shared_token("other"));
    assert!(!Credentials::default().shared_token(""));
}

#[test]
fn a_device_token_is_claimed_from_its_field_or_from_a_devices_token_field() {
    let both = credentials(Some("t"), None, Some("d"), None);
    assert_eq!(both.device_token_claim(false), Some(("d".into(), false)));
    let token = credentials(Some("t"), None, None, None);
    assert_eq!(token.device_token_claim(true), Some(("t".into(), true)));
    assert_eq!(token.device_token_claim(false), None);
    assert_eq!(Credentials::default().device_token_claim(true), None);
}

#[test]
fn a_connect_without_a_usable_token_is_told_the_most_telling_reason() {
    let wrong = credentials(None, Some("p"), None, Some("b"));
    assert_eq!(code(&wrong.refusal(false)), "AUTH_TOKEN_MISMATCH");
    assert_eq!(wrong.refusal(false).close_reason, TOKEN_MISMATCH);
    let boot = credentials(None, None, None, Some("b"));
    assert_eq!(code(&boot.refusal(true)), "AUTH_BOOTSTRAP_TOKEN_INVALID");
    let none = Credentials::default();
    let r = none.refusal(false);
    assert_eq!(
        (r.error.code.as_str(), code(&r).as_str()),
        ("NOT_PAIRED", "DEVICE_IDENTITY_REQUIRED")
    );
    assert_eq!(code(&none.refusal(true)), "AUTH_TOKEN_MISSING");
}

#[test]
fn grants_keep_scopes_for_proven_devices_and_local_tools_only() {
    let scopes = || vec!["operator.read".to_owned()];
    let remote = Peer {
        local: false,
        has_origin: false,
    };
    let browser = Peer {
        local: true,
        has_origin: true,
    };
    let backend = ("gateway-client", "backend");
    let g = grant(
        ("test", "test"),
        remote,
        "token",
        Some("dev".into()),
        scopes(),
    );
    assert_eq!(g.scopes, scopes());
    assert!(g.issue_device_token);
    let g = grant(backend, LOCAL, "token", Some("dev".into()), scopes());
    assert_eq!(g.scopes, scopes());
    assert!(!g.issue_device_token, "a backend keeps the gateway token");
    assert_eq!(
        grant(("cli", "cli"), LOCAL, "none", None, scopes()).scopes,
        scopes()
    );
    assert!(grant(("cli", "cli"), remote, "token", None, scopes())
        .scopes
        .is_empty());
    assert!(grant(backend, browser, "token", None, scopes())
        .scopes
        .is_empty());
    assert_eq!(
        grant(backend, LOCAL, "token", None, scopes()).scopes,
        scopes()
    );
    let g = grant(
        ("test", "test"),
        LOCAL,
        "none",
        Some("dev".into()),
        scopes(),
    );
    assert!(!g.issue_device_token, "only the gateway token earns one");
}
