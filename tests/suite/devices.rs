//! Device tokens (issue 11, R-D3): a proven device that connects with the gateway token is
//! issued one; later connects present it instead (a Control UI tab opened without
//! `#token=`), for at most its scopes; it is bound to its device, stored only as a digest,
//! replaced on the next gateway-token connect, and revoked or rotated by the operator, which
//! closes that device's connections.

use ed25519_dalek::SigningKey;
use loopgate_tests::{Client, Gateway};
use serde_json::{json, Value};

const TOKEN: &str = "dev1ce-gateway-token";

fn ui_params(auth: Value, scopes: &[&str]) -> Value {
    json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "openclaw-control-ui", "version": "2026.9.6", "platform": "linux", "mode": "webchat"},
        "role": "operator", "scopes": scopes, "caps": [], "auth": auth,
    })
}

const UI_SCOPES: &[&str] = &["operator.read", "operator.write"];

async fn connect(gw: &Gateway, params: Value, key: &SigningKey) -> (Client, Value) {
    let (c, res) = Client::ws_connect(&gw.ws_addr(), params, Some(key)).await;
    (c, res.expect("an answer to connect"))
}

fn code(res: &Value) -> &str {
    res["error"]["details"]["code"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tab_connects_with_its_device_token_r_d3() {
    let gw = Gateway::start_with(&format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n")).await;
    let key = SigningKey::from_bytes(&[21u8; 32]);
    // First tab: `#token=`, a device identity: it is issued a token.
    let (_tab1, hello) = connect(
        &gw,
        ui_params(json!({"token": TOKEN, "password": TOKEN}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(hello["ok"], true, "{hello}");
    let auth = &hello["payload"]["auth"];
    assert_eq!(auth["method"], "token");
    let t1 = auth["deviceToken"]
        .as_str()
        .expect("a device token")
        .to_owned();
    assert_eq!(t1.len(), 43, "{auth}");
    assert!(auth["issuedAtMs"].is_u64(), "{auth}");

    // Second tab: the device token alone.
    let (mut tab2, hello) =
        connect(&gw, ui_params(json!({"deviceToken": t1}), UI_SCOPES), &key).await;
    assert_eq!(hello["ok"], true, "{hello}");
    let auth = &hello["payload"]["auth"];
    assert_eq!(auth["method"], "device-token", "{auth}");
    assert_eq!(auth["scopes"], json!(UI_SCOPES));
    assert!(
        auth.get("deviceToken").is_none(),
        "the tab already holds it: {auth}"
    );
    // The first tab shows in presence with its device (the UI matches it with its pairing).
    let presence = hello["payload"]["snapshot"]["presence"].clone();
    assert!(
        presence
            .as_array()
            .is_some_and(|p| p.iter().any(|e| e["deviceId"].is_string())),
        "{presence}"
    );
    let (_, fin) = tab2
        .turn(json!({"message": "from tab two", "idempotencyKey": "dt-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    // Refused: a wrong token, the token from another device, wider scopes.
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": "x".repeat(43)}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(code(&res), "AUTH_DEVICE_TOKEN_MISMATCH", "{res}");
    let other = SigningKey::from_bytes(&[22u8; 32]);
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": t1}), UI_SCOPES),
        &other,
    )
    .await;
    assert_eq!(
        code(&res),
        "AUTH_DEVICE_TOKEN_MISMATCH",
        "bound to its device: {res}"
    );
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": t1}), &["operator.admin"]),
        &key,
    )
    .await;
    assert_eq!(code(&res), "AUTH_SCOPE_MISMATCH", "{res}");
    // Without the device proof the token is worth nothing.
    let (_, res) = Client::ws_connect(
        &gw.ws_addr(),
        ui_params(json!({"deviceToken": t1}), UI_SCOPES),
        None,
    )
    .await;
    assert_eq!(code(&res.expect("answer")), "DEVICE_IDENTITY_REQUIRED");

    // Only the digest is stored.
    let db = std::fs::read(gw.state().join("gateway.sqlite")).unwrap();
    let wal = std::fs::read(gw.state().join("gateway.sqlite-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(
            !bytes.windows(t1.len()).any(|w| w == t1.as_bytes()),
            "token stored in plaintext"
        );
    }

    // A new gateway-token connect issues another token; the first keeps working (the
    // device's newest few stay valid; revoking ends them all).
    let (_tab3, hello) = connect(&gw, ui_params(json!({"token": TOKEN}), UI_SCOPES), &key).await;
    let t2 = hello["payload"]["auth"]["deviceToken"]
        .as_str()
        .expect("a new token")
        .to_owned();
    assert_ne!(t1, t2);
    let (_, res) = connect(&gw, ui_params(json!({"deviceToken": t1}), UI_SCOPES), &key).await;
    assert_eq!(res["ok"], true, "{res}");
    gw.logs.assert_clean(&["Refused a connect"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_lists_and_revokes_device_tokens_r_d3() {
    let gw = Gateway::start_with(&format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n")).await;
    let key = SigningKey::from_bytes(&[31u8; 32]);
    let (_first, hello) = connect(&gw, ui_params(json!({"token": TOKEN}), UI_SCOPES), &key).await;
    let token = hello["payload"]["auth"]["deviceToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let (mut live, hello) = connect(
        &gw,
        ui_params(json!({"deviceToken": token}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(hello["ok"], true, "{hello}");
    // A local backend client (openclaw-node) keeps the gateway token: no device token.
    let backend = json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "gateway-client", "version": "0.14.0", "platform": "linux", "mode": "backend"},
        "role": "operator", "scopes": ["operator.read", "operator.write"], "caps": [], "auth": {"token": TOKEN},
    });
    let (_node, hello) = connect(&gw, backend, &SigningKey::from_bytes(&[32u8; 32])).await;
    assert_eq!(hello["ok"], true, "{hello}");
    assert!(
        hello["payload"]["auth"].get("deviceToken").is_none(),
        "{hello}"
    );

    let out = gw.cli(&["devices", "list", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let paired = list["paired"].as_array().unwrap();
    assert_eq!(paired.len(), 1, "{list}");
    let device_id = paired[0]["deviceId"].as_str().unwrap().to_owned();
    assert_eq!(paired[0]["connected"], true);
    assert_eq!(paired[0]["clientId"], "openclaw-control-ui");
    assert!(
        !list.to_string().contains(&token),
        "the list never shows a token"
    );
    let text = gw.cli(&["devices", "list"]).await;
    assert!(String::from_utf8_lossy(&text.stdout).contains(&device_id));

    let out = gw.cli(&["devices", "revoke", &device_id]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The device's live connection is closed, and its token no longer opens one.
    live.read_to_end().await;
    assert_eq!(
        live.close.as_ref().map(|c| c.0),
        Some(4001),
        "{:?}",
        live.close
    );
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": token}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(code(&res), "AUTH_DEVICE_TOKEN_MISMATCH", "{res}");
    let out = gw.cli(&["devices", "list", "--json"]).await;
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        list["paired"][0]["tokens"][0]["revokedAtMs"].is_u64(),
        "{list}"
    );
    let out = gw.cli(&["devices", "revoke", "no-such-device"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("revocation denied"));

    // Rotation by the operator: the token is not handed to another caller.
    let (_again, hello) = connect(&gw, ui_params(json!({"token": TOKEN}), UI_SCOPES), &key).await;
    let fresh = hello["payload"]["auth"]["deviceToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut admin = gw.connect().await;
    let r = admin
        .call(
            "device.token.rotate",
            json!({"deviceId": device_id, "role": "operator"}),
        )
        .await;
    assert_eq!(
        r["payload"]["tokenDelivery"], "withheld-cross-device",
        "{r}"
    );
    assert!(r["payload"].get("token").is_none(), "{r}");
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": fresh}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(code(&res), "AUTH_DEVICE_TOKEN_MISMATCH", "{res}");
    gw.logs.assert_clean(&["Refused a connect"]);
}

/// A read-only client of the same device identity (OpenClaw's CLI probe next to its TUI)
/// gets its own token: the first keeps working with its own scopes. A new gateway token
/// ends every device token issued under the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_one_device_coexist_and_die_with_the_gateway_token_r_d3() {
    let mut gw = Gateway::start_with(&format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n")).await;
    let key = SigningKey::from_bytes(&[41u8; 32]);
    let (_tui, hello) = connect(&gw, ui_params(json!({"token": TOKEN}), UI_SCOPES), &key).await;
    let wide = hello["payload"]["auth"]["deviceToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_probe, hello) = connect(
        &gw,
        ui_params(json!({"token": TOKEN}), &["operator.read"]),
        &key,
    )
    .await;
    assert!(
        hello["payload"]["auth"]["deviceToken"].is_string(),
        "{hello}"
    );
    let (_again, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": wide}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(
        res["ok"], true,
        "the first token still works, with its scopes: {res}"
    );

    gw.rewrite_config("", "[gateway.auth]\ntoken = \"a-new-gateway-token\"\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gw.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    gw.logs.wait_for("Config reloaded.").await;
    let (_, res) = connect(
        &gw,
        ui_params(json!({"deviceToken": wide}), UI_SCOPES),
        &key,
    )
    .await;
    assert_eq!(code(&res), "AUTH_DEVICE_TOKEN_MISMATCH", "{res}");
    gw.logs.assert_clean(&["Refused a connect"]);
}
