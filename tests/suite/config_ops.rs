//! The config over the Gateway (issue 39), as OpenClaw 2026.9.6 answers it
//! (`openclaw-observed/operator-surface-2026.9.6.md` §1, §3, §4) on loopgate's own TOML file:
//! `config.get` shows the file with its secrets redacted and a content hash; `config.patch`
//! and `config.apply` write only with that hash, validate the whole file first, keep the
//! operator's comments, and are in effect when they answer (R-J4: a reload's path); a refused
//! write changes nothing.

use loopgate_tests::{hold, reply, Client, Gateway, WAIT};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

const SECRET: &str = "cfg-secret-token-39";

/// A config file with comments, a token and a second agent, over 512 bytes.
fn extra() -> String {
    let mut text = String::from("# Operators' notes: keep these lines.\n");
    for i in 0..8 {
        text.push_str(&format!(
            "# note {i}: the agents below serve the on-call rota.\n"
        ));
    }
    text.push_str("[agents.list.ops]\nname = \"Ops\" # the operators' agent\n");
    text
}

async fn start() -> Gateway {
    Gateway::start_gateway_keys(&format!("[gateway.auth]\ntoken = \"{SECRET}\"\n"), &extra()).await
}

fn file(gw: &Gateway) -> String {
    std::fs::read_to_string(gw.state().join("loopgate.toml")).unwrap()
}

async fn current_hash(c: &mut Client) -> String {
    let r = c.call("config.get", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    r["payload"]["hash"].as_str().unwrap_or_default().to_owned()
}

/// `config.patch` of `raw` over the file as it is now (its current hash as `baseHash`).
async fn patched(c: &mut Client, raw: &str) -> Value {
    let h = current_hash(c).await;
    c.call("config.patch", json!({"raw": raw, "baseHash": h}))
        .await
}

/// A run held in flight by the scripted model (released with `gw.model.release()`), on a
/// connection of its own; that client and the request's id.
async fn held_run(gw: &Gateway, text: &str, key: &str) -> (Client, String) {
    gw.model.push(hold(text));
    let mut m = gw.connect().await;
    let run = m
        .start_streaming(json!({"message": "long", "idempotencyKey": key}))
        .await;
    (m, run)
}

fn refused(r: &Value, code: &str, text: &str) {
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["code"], code, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(text), "{text:?} in {r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_get_shows_the_file_with_secrets_redacted_and_apply_keeps_them_issue_39() {
    let gw = start().await;
    let mut c = gw.connect().await;
    let r = c.call("config.get", json!({})).await;
    let p = &r["payload"];
    let raw = p["raw"].as_str().unwrap();
    assert!(!r.to_string().contains(SECRET), "{r}");
    assert!(raw.contains("__OPENCLAW_REDACTED__") && raw.contains("# the operators' agent"));
    assert_eq!(
        p["parsed"]["gateway"]["auth"]["token"],
        "__OPENCLAW_REDACTED__"
    );
    assert_eq!(p["parsed"]["agents"]["list"]["ops"]["name"], "Ops");
    let hash = p["hash"].as_str().unwrap().to_owned();
    assert_eq!(
        p["appliedConfigHash"],
        hash.as_str(),
        "the file is the one applied"
    );
    assert_eq!(p["configRevisionHash"], hash.as_str());
    // config.get's own raw, edited and sent back: the redacted token is kept.
    let edited = raw.replace("name = \"Ops\"", "name = \"Operations\"");
    let r = c
        .call(
            "config.apply",
            json!({"raw": edited, "baseHash": hash, "note": "rename"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let new_hash = r["payload"]["hash"].as_str().unwrap().to_owned();
    assert_ne!(new_hash, hash);
    assert_eq!(r["payload"]["sentinel"]["payload"]["kind"], "config-apply");
    assert_eq!(r["payload"]["sentinel"]["payload"]["message"], "rename");
    let text = file(&gw);
    assert!(
        text.contains(SECRET) && text.contains("name = \"Operations\""),
        "{text}"
    );
    assert_eq!(
        current_hash(&mut c).await,
        new_hash,
        "the answer's hash is config.get's"
    );
    let r = c.call("agents.list", json!({})).await;
    assert!(
        r.to_string().contains("Operations"),
        "in effect at once: {r}"
    );
    // The same text again: ok, the same hash.
    let r = c
        .call("config.apply", json!({"raw": edited, "baseHash": new_hash}))
        .await;
    assert_eq!(
        (r["ok"].clone(), r["payload"]["hash"].clone()),
        (json!(true), json!(new_hash))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_changes_neither_the_file_nor_its_hash_issue_39() {
    let gw = start().await;
    let mut c = gw.connect().await;
    let h = current_hash(&mut c).await;
    let before = file(&gw);
    let cases = [
        (
            "config.patch",
            json!({"raw": "{agents: {defaults: {timeout_seconds: 900}}}"}),
            "INVALID_REQUEST",
            "config base hash required for agents.defaults.timeout_seconds; re-run config.get and retry with baseHash",
        ),
        (
            "config.patch",
            json!({"raw": "{agents: {defaults: {timeout_seconds: 900}}}", "baseHash": "made-up"}),
            "INVALID_REQUEST",
            "config changed since last load; re-run config.get and retry",
        ),
        (
            "config.patch",
            json!({"raw": "{workers: {crash_loop_max: -5}}", "baseHash": h}),
            "INVALID_REQUEST",
            "invalid config: workers",
        ),
        (
            "config.patch",
            json!({"raw": "{agents: {defaults: {no_such_key: 1}}}", "baseHash": h}),
            "INVALID_REQUEST",
            "invalid config: agents.defaults",
        ),
        (
            "config.patch",
            json!({"raw": "{agents:", "baseHash": h}),
            "INVALID_REQUEST",
            "SyntaxError: JSON5: ",
        ),
        (
            "config.patch",
            json!({"raw": "[1]", "baseHash": h}),
            "INVALID_REQUEST",
            "config.patch raw must be an object",
        ),
        (
            "config.patch",
            json!({"raw": "{}", "bogus": 1}),
            "INVALID_REQUEST",
            "bogus",
        ),
        (
            "config.apply",
            json!({"raw": "[gateway]\nport = 0\n"}),
            "INVALID_REQUEST",
            "config base hash required; re-run config.get and retry",
        ),
        (
            "config.apply",
            json!({"raw": "[gateway]\nport = 0\n", "baseHash": h}),
            "UNAVAILABLE",
            "Config write rejected",
        ),
        (
            "config.apply",
            json!({"raw": "[gateway\n", "baseHash": h}),
            "INVALID_REQUEST",
            "invalid config",
        ),
    ];
    for (method, params, code, text) in cases {
        let r = c.call(method, params.clone()).await;
        refused(&r, code, text);
        assert_eq!(
            file(&gw),
            before,
            "{method} {params}: the file is as it was"
        );
        assert_eq!(
            current_hash(&mut c).await,
            h,
            "{method} {params}: the hash is as it was"
        );
    }
    // An invalid value names its key, in `details.issues` too.
    let r = c
        .call(
            "config.patch",
            json!({"raw": "{messages: {queue: {mode: 'later'}}}", "baseHash": h}),
        )
        .await;
    refused(&r, "INVALID_REQUEST", "invalid config: messages.queue.mode");
    assert_eq!(
        r["error"]["details"]["issues"][0]["path"], "messages.queue.mode",
        "{r}"
    );
    // The same patch twice: the second is a no-op, nothing written.
    let patch = json!({"raw": "{agents: {list: {ops: {name: 'Ops'}}}}", "baseHash": h});
    let r = c.call("config.patch", patch).await;
    assert_eq!(r["payload"]["noop"], true, "{r}");
    assert_eq!(r["payload"]["changedPaths"], json!([]), "{r}");
    assert_eq!(file(&gw), before);
}

/// A patch of one agent's settings restarts that agent's worker only, between runs: the
/// other agent's worker keeps its pid and its run in flight completes; subscribers hear
/// `config.changed` with the new hash; the file keeps the operator's comments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_of_one_agent_restarts_only_its_worker_issue_39() {
    let gw = start().await;
    let mut c = gw.connect().await;
    for (agent, key) in [("main", "cp-1"), ("ops", "cp-2")] {
        gw.model.push(reply("ready"));
        let (_, fin) = c
            .turn(json!({"message": "hi", "idempotencyKey": key, "agentId": agent}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    let (main_pid, ops_pid) = (gw.worker_pid("main").await, gw.worker_pid("ops").await);
    assert!(main_pid.is_some() && ops_pid.is_some());
    gw.model.push(hold("a long answer"));
    let mut m = gw.connect().await;
    let run = m
        .start_streaming(json!({"message": "long", "idempotencyKey": "cp-3"}))
        .await;
    let h = current_hash(&mut c).await;
    let r = c
        .call(
            "config.patch",
            json!({"raw": "{agents: {list: {ops: {timeout_seconds: 99}}}}", "baseHash": h, "note": "ops only"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let p = &r["payload"];
    assert_eq!(
        p["changedPaths"],
        json!(["agents.list.ops.timeout_seconds"]),
        "{r}"
    );
    assert_eq!(
        p["sentinel"]["payload"]["stats"]["requiresRestart"], false,
        "{r}"
    );
    let new_hash = p["hash"].as_str().unwrap().to_owned();
    let ev = c.wait_for(|f| f["event"] == "config.changed").await;
    assert_eq!(ev["payload"]["hash"], new_hash.as_str(), "{ev}");
    let text = file(&gw);
    assert!(text.contains("timeout_seconds = 99") && text.contains("# the operators' agent"));
    assert!(
        text.contains("# note 7: the agents below serve the on-call rota."),
        "{text}"
    );
    // Applied: config.get says so at once.
    let r = c.call("config.get", json!({})).await;
    assert_eq!(r["payload"]["appliedConfigHash"], new_hash.as_str(), "{r}");
    // ops runs on a new worker; main's worker and its run in flight are untouched.
    gw.model.push(reply("ops again"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "cp-4", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_ne!(gw.worker_pid("ops").await, ops_pid, "ops restarted");
    assert_eq!(gw.worker_pid("main").await, main_pid, "main did not");
    gw.model.release();
    let fin = m.res(&run).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
}

/// Writing the config is an admin's: a write-scope client is refused before anything is
/// read (OpenClaw's refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_writes_the_config_issue_39() {
    let gw = start().await;
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read", "operator.write"]);
    let mut w = Client::connect_with(&gw.socket(), params).await;
    for method in ["config.patch", "config.apply"] {
        let r = w.call(method, json!({"raw": "{}", "baseHash": "x"})).await;
        refused(&r, "FORBIDDEN", "missing scope: operator.admin");
    }
    let r = w.call("config.get", json!({})).await;
    assert_eq!(r["ok"], true, "reading is a reader's: {r}");
}

/// `config.schema` describes the keys `config.get` shows and `config.patch` takes, generated
/// from the config's types; `config.schema.lookup` says how a change of each applies
/// (operator-surface §2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_describes_the_keys_a_patch_takes_issue_39() {
    let gw = start().await;
    let mut c = gw.connect().await;
    let r = c.call("config.schema", json!({})).await;
    let p = &r["payload"];
    assert_eq!(
        p["schema"]["$schema"], "http://json-schema.org/draft-07/schema#",
        "{r}"
    );
    assert!(p["schema"]["properties"]["agents"].is_object(), "{r}");
    assert!(
        p["version"].is_string() && p["generatedAt"].is_string(),
        "{r}"
    );
    let r = c
        .call("config.schema.lookup", json!({"path": "cluster"}))
        .await;
    assert_eq!(r["payload"]["reloadKind"], "restart", "{r}");
    let r = c
        .call("config.schema.lookup", json!({"path": "gateway.port"}))
        .await;
    assert_eq!(r["payload"]["reloadKind"], "hot", "the listener moves: {r}");
    let r = c
        .call("config.schema.lookup", json!({"path": "agents.list.ops"}))
        .await;
    assert_eq!(r["payload"]["reloadKind"], "hot", "{r}");
    let children = r["payload"]["children"].as_array().unwrap();
    assert!(
        children
            .iter()
            .any(|ch| ch["path"] == "agents.list.ops.timeout_seconds"),
        "{r}"
    );
    let r = c
        .call("config.schema.lookup", json!({"path": "gateway.nonsense"}))
        .await;
    refused(&r, "INVALID_REQUEST", "config schema path not found");
    let r = c.call("config.schema", json!({"bogus": 1})).await;
    refused(&r, "INVALID_REQUEST", "bogus");
}

/// Review of d6c4e0d: a write keeps the file's mode, writes through a symlinked config file
/// (it stays a link), and a gateway with no config file at all can write its first one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_keeps_the_files_mode_its_link_and_works_without_a_file_issue_39() {
    use std::os::unix::fs::PermissionsExt;
    let gw = start().await;
    let mut c = gw.connect().await;
    let link = gw.state().join("loopgate.toml");
    let target = gw.state().join("real.toml");
    std::fs::rename(&link, &target).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
    let h = current_hash(&mut c).await;
    let r = c
        .call(
            "config.patch",
            json!({"raw": "{agents: {list: {ops: {name: 'Ops Two'}}}}", "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("Ops Two") && text.contains(SECRET), "{text}");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    // No file: config.get names the hash of no bytes, and a write with it creates the file.
    std::fs::remove_file(&link).unwrap();
    let r = c.call("config.get", json!({})).await;
    assert_eq!(r["payload"]["exists"], false, "{r}");
    let h = r["payload"]["hash"].as_str().unwrap().to_owned();
    let r = c
        .call(
            "config.patch",
            json!({"raw": "{agents: {list: {ops: {name: 'Ops'}}}}", "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let made = std::fs::metadata(&link).unwrap();
    assert_eq!(
        made.permissions().mode() & 0o777,
        0o600,
        "the operator's only"
    );
}

/// A new `gateway.port` by `config.patch` (issue 39: what needs a restart on OpenClaw) is in
/// effect when answered, without one: the listener moves (`gateway.addr` says where), a new
/// WebSocket connects there, the unix-socket connection that asked keeps working, and
/// `requiresRestart` is false. A port that cannot be bound refuses the write, file and hash
/// unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_change_applies_live_and_an_unbindable_port_is_refused_issue_39() {
    let mut gw = Gateway::start_with("[gateway.auth]\ntoken = \"lt\"\n").await;
    let mut c = gw.connect().await;
    let old = gw.ws_addr();
    // A port some other program holds: refused before anything is written.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let before = file(&gw);
    let h = current_hash(&mut c).await;
    let r = c
        .call(
            "config.patch",
            json!({"raw": format!("{{gateway: {{port: {taken_port}}}}}"), "baseHash": h}),
        )
        .await;
    refused(&r, "INVALID_REQUEST", "cannot listen on");
    assert_eq!(file(&gw), before);
    assert_eq!(current_hash(&mut c).await, h);
    drop(taken);

    // A free port (the OS picks one and lets it go).
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let r = c
        .call(
            "config.patch",
            json!({"raw": format!("{{gateway: {{port: {port}}}}}"), "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        r["payload"]["sentinel"]["payload"]["stats"]["requiresRestart"], false,
        "{r}"
    );
    let addr = gw.ws_addr();
    assert_eq!(addr.trim(), format!("127.0.0.1:{port}"));
    assert_ne!(addr, old);
    let (mut ws, hello) = Client::ws_connect(
        addr.trim(),
        loopgate_tests::client::cli_params(Some("lt")),
        None,
    )
    .await;
    let hello = hello.expect("hello");
    assert_eq!(hello["ok"], true, "{hello}");
    assert_eq!(ws.call("health", json!({})).await["ok"], true);
    assert!(
        tokio_tungstenite::connect_async(format!("ws://{}/", old.trim()))
            .await
            .is_err(),
        "the old port is closed"
    );
    assert_eq!(c.call("health", json!({})).await["ok"], true);

    // An address this host does not have (TEST-NET-1): refused, twice, and the listener
    // stays where it is, under the rules it was bound with.
    for _ in 0..2 {
        let h = current_hash(&mut c).await;
        let before = file(&gw);
        let r = c
            .call(
                "config.patch",
                json!({"raw": "{gateway: {bind: \"192.0.2.1\"}}", "baseHash": h}),
            )
            .await;
        refused(&r, "INVALID_REQUEST", "cannot listen on ws://192.0.2.1");
        assert_eq!(file(&gw), before);
        assert_eq!(gw.ws_addr(), addr);
        assert_eq!(ws.call("health", json!({})).await["ok"], true);
    }
    let (mut again, hello) = Client::ws_connect(
        addr.trim(),
        loopgate_tests::client::cli_params(Some("lt")),
        None,
    )
    .await;
    assert_eq!(hello.expect("hello")["ok"], true);
    assert_eq!(again.call("health", json!({})).await["ok"], true);
    // And it still stops cleanly.
    let status = gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    assert!(status.success(), "{status:?}");
}

/// `config.set` (what the Control UI's config pages save with; admin, with `baseHash`): the
/// raw view's TOML text replaces the file; the form view's whole object replaces its values,
/// the untouched ones keeping their comments and place, redacted secrets kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_set_takes_the_text_or_the_forms_object_issue_39() {
    let gw = start().await;
    let mut c = gw.connect().await;
    let r = c.call("config.get", json!({})).await;
    let h = r["payload"]["hash"].as_str().unwrap().to_owned();
    let mut parsed = r["payload"]["parsed"].clone();
    assert_eq!(
        parsed["gateway"]["auth"]["token"], "__OPENCLAW_REDACTED__",
        "{r}"
    );
    // No hash, a stale one: refused, nothing written.
    let before = file(&gw);
    let r = c.call("config.set", json!({"raw": "{}"})).await;
    refused(&r, "INVALID_REQUEST", "config base hash required");
    let r = c
        .call(
            "config.set",
            json!({"raw": "{}", "baseHash": "0".repeat(64)}),
        )
        .await;
    refused(&r, "INVALID_REQUEST", "config changed since last load");
    assert_eq!(file(&gw), before);

    // The form's object, one value changed.
    parsed["agents"]["list"]["ops"]["timeout_seconds"] = json!(77);
    let r = c
        .call(
            "config.set",
            json!({"raw": parsed.to_string(), "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let text = file(&gw);
    assert!(text.contains("timeout_seconds = 77"), "{text}");
    assert!(
        text.contains("# the operators' agent"),
        "comments kept: {text}"
    );
    assert!(text.contains(SECRET), "the token kept: {text}");
    let h = r["payload"]["hash"].as_str().unwrap().to_owned();
    assert_eq!(current_hash(&mut c).await, h);

    // The raw view's text.
    let raw = c.call("config.get", json!({})).await["payload"]["raw"]
        .as_str()
        .unwrap()
        .replace("timeout_seconds = 77", "timeout_seconds = 78");
    let r = c
        .call("config.set", json!({"raw": raw, "baseHash": h}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let text = file(&gw);
    assert!(
        text.contains("timeout_seconds = 78") && text.contains(SECRET),
        "{text}"
    );

    // What the UI's agent pages write (OpenClaw's `agents.entries.<id>`), in the form's
    // whole object (`sourceConfig`): kept under `agents.list.<id>`.
    let r = c.call("config.get", json!({})).await;
    let h = r["payload"]["hash"].as_str().unwrap().to_owned();
    let mut form = r["payload"]["sourceConfig"].clone();
    assert_eq!(
        form["agents"]["entries"]["ops"]["name"], "Ops",
        "the form starts from the file, agents as OpenClaw's UI reads them: {r}"
    );
    form["agents"]["entries"]["ops"]["model"] = json!("scripted/scripted-1");
    form["agents"]["entries"]["ops"]["tools"] = json!({"profile": "coding"});
    form["agents"]["entries"]["main"] = json!({"skills": ["deploy"]});
    let r = c
        .call(
            "config.set",
            json!({"raw": form.to_string(), "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let parsed = &c.call("config.get", json!({})).await["payload"]["parsed"];
    let ops = &parsed["agents"]["list"]["ops"];
    assert_eq!(ops["model"], "scripted/scripted-1", "{parsed}");
    assert_eq!(
        ops["tools"]["allow"],
        json!(["read", "write", "edit", "apply_patch", "ls", "exec"]),
        "{parsed}"
    );
    assert_eq!(
        parsed["agents"]["list"]["main"]["skills"],
        json!(["deploy"])
    );
    assert!(parsed["agents"].get("entries").is_none(), "{parsed}");
    // The UI shows what was saved, and "Inherit default" (the model left out) removes it.
    let r = c.call("config.get", json!({})).await;
    let mut form = r["payload"]["sourceConfig"].clone();
    assert_eq!(
        form["agents"]["entries"]["ops"]["tools"],
        json!({"profile": "coding"})
    );
    assert_eq!(
        form["agents"]["entries"]["ops"]["model"],
        "scripted/scripted-1"
    );
    if let Some(ops) = form["agents"]["entries"]["ops"].as_object_mut() {
        ops.remove("model");
    }
    let h = r["payload"]["hash"].as_str().unwrap().to_owned();
    let r = c
        .call(
            "config.set",
            json!({"raw": form.to_string(), "baseHash": h}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let parsed = &c.call("config.get", json!({})).await["payload"]["parsed"];
    assert!(
        parsed["agents"]["list"]["ops"].get("model").is_none(),
        "{parsed}"
    );
    let h = c.call("config.get", json!({})).await["payload"]["hash"]
        .as_str()
        .unwrap()
        .to_owned();

    // Admin only, as OpenClaw's.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.write"]);
    let mut writer = Client::connect_with(&gw.socket(), params).await;
    let r = writer
        .call("config.set", json!({"raw": "{}", "baseHash": h}))
        .await;
    assert_eq!(r["error"]["code"], "FORBIDDEN", "{r}");
}

/// A change the running gateway cannot take live (`gateway.max_connections`) answers
/// `requiresRestart:true`, and then the gateway restarts itself cleanly (issue 39): clients
/// get `shutdown` `{reason:"restart", restartExpectedMs}`, the run in flight finishes (a
/// drain), and the same process (same pid) serves again with the new value in effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_needs_a_restart_drains_and_restarts_the_gateway_issue_39() {
    let gw = start().await;
    let pid = gw.pid();
    let mut c = gw.connect().await;
    let (mut m, run) = held_run(&gw, "finished before the restart", "rs-1").await;
    let r = patched(&mut c, "{gateway: {max_connections: 2}}").await;
    assert_eq!(r["ok"], true, "{r}");
    let stats = &r["payload"]["sentinel"]["payload"]["stats"];
    assert_eq!(stats["requiresRestart"], true, "{r}");
    let ev = c.wait_for(|f| f["event"] == "shutdown").await;
    assert_eq!(ev["payload"]["reason"], "restart", "{ev}");
    assert!(
        ev["payload"]["restartExpectedMs"].as_u64().is_some(),
        "{ev}"
    );
    // Draining: the run in flight completes.
    gw.model.release();
    let fin = m.res(&run).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.wait_for_count("Gateway ready.", 2).await;
    assert_eq!(gw.pid(), pid, "restarted in the same process");
    let mut c = gw.connect().await;
    let r = c.call("config.get", json!({})).await;
    assert_eq!(
        r["payload"]["config"]["gateway"]["max_connections"], 2,
        "{r}"
    );
    // The new connection cap is in effect: a third network connection is closed at once.
    let addr = gw.ws_addr();
    let held: Vec<_> = [
        tokio::net::TcpStream::connect(&addr).await.unwrap(),
        tokio::net::TcpStream::connect(&addr).await.unwrap(),
    ]
    .into();
    let mut extra = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(WAIT, extra.read(&mut buf))
        .await
        .expect("a connection over the new cap is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    drop(held);
    gw.model.push(reply("after the restart"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "rs-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[]);
}

/// Found by the hostile review: a SIGTERM (`systemctl stop`) while a restart drained was not
/// heard, and the gateway restarted anyway. It now stops: the run in flight still finishes,
/// the process exits 0 and never serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_asked_during_a_restarts_drain_stops_the_gateway_issue_39() {
    let mut gw = start().await;
    let mut c = gw.connect().await;
    let (mut m, run) = held_run(&gw, "finished while stopping", "rs-stop").await;
    let r = patched(&mut c, "{gateway: {max_connections: 7}}").await;
    assert_eq!(r["ok"], true, "{r}");
    c.wait_for(|f| f["event"] == "shutdown").await;
    let pid = nix::unistd::Pid::from_raw(gw.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    gw.logs
        .wait_for("the gateway stops instead of restarting")
        .await;
    gw.model.release();
    let fin = m.res(&run).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let mut child = gw.child.take().expect("running");
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the gateway exits")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        gw.logs
            .all()
            .iter()
            .filter(|l| l.contains("Gateway ready."))
            .count(),
        1,
        "no second start"
    );
}

/// Found by the hostile review: a `[cluster]` the gateway cannot join, written over the
/// Gateway, took it down for good (each start after the self-restart failed the same way).
/// The start that fails now puts the file's previous text back and starts with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_into_a_config_that_cannot_start_goes_back_to_the_previous_one_issue_39() {
    let gw = start().await;
    let pid = gw.pid();
    let before = file(&gw);
    let mut c = gw.connect().await;
    let r = patched(
        &mut c,
        "{cluster: {nats: ['nats://127.0.0.1:1'], node: 'n1'}}",
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        r["payload"]["sentinel"]["payload"]["stats"]["requiresRestart"], true,
        "{r}"
    );
    gw.logs.wait_for("its previous text is put back").await;
    gw.logs.wait_for_count("Gateway ready.", 2).await;
    assert_eq!(gw.pid(), pid, "the same process");
    assert_eq!(file(&gw), before, "the previous text is back");
    assert!(
        !gw.state().join("restart-fallback.toml").exists(),
        "nothing left to go back to"
    );
    let mut c = gw.connect().await;
    gw.model.push(reply("still serving"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "rs-back"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[
        "cannot join the cluster",
        "could not start with the config written over the Gateway",
    ]);
}
