//! What the Control UI asks about models, keys, identities and the config (issue 11), on the
//! real binaries. Keys and the gateway token never appear in an answer.

use loopgate_tests::Gateway;
use nix::sys::signal::Signal;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_keys_identity_and_config_answer_without_secrets_r_j2() {
    let mut gw = Gateway::start_opts("", 30.0).await;
    gw.stop(Signal::SIGTERM).await;
    let cfg = gw.config_text().replace(
        "idle_timeout_seconds",
        "api_key_env = \"CATALOG_TEST_KEY\"\nidle_timeout_seconds",
    ) + "\n[agents.list.ops]\nname = \"Ops\"\n";
    std::fs::write(gw.state().join("loopgate.toml"), cfg).unwrap();
    gw.spawn_with_env(&[("CATALOG_TEST_KEY", "sk-never-shown")])
        .await;
    let mut c = gw.connect().await;

    let m = c.call("models.list", json!({"view": "configured"})).await;
    let model = &m["payload"]["models"][0];
    assert_eq!(
        (&model["id"], &model["provider"], &model["available"]),
        (&json!("scripted-1"), &json!("scripted"), &json!(true)),
        "{m}"
    );
    assert_eq!(
        m["payload"]["models"].as_array().map(Vec::len),
        Some(1),
        "{m}"
    );

    let a = c.call("models.authStatus", json!({})).await;
    let p = &a["payload"]["providers"][0];
    assert_eq!(
        (&p["provider"], &p["status"], &p["apiKey"]["source"]),
        (&json!("scripted"), &json!("static"), &json!("env")),
        "{a}"
    );

    let md = c.call("chat.metadata", json!({"agentId": "ops"})).await;
    assert_eq!(md["payload"]["models"][0]["id"], "scripted-1", "{md}");
    // The slash commands interpreted (as `commands.list`, see slash_commands.rs).
    let listed = md["payload"]["commands"].as_array().expect("commands");
    assert!(listed.iter().any(|e| e["name"] == "new"), "{md}");

    let id = c
        .call(
            "agent.identity.get",
            json!({"sessionKey": "agent:ops:main"}),
        )
        .await;
    assert_eq!(
        id["payload"],
        json!({"agentId": "ops", "name": "Ops", "nameSource": "config", "avatar": "O"}),
        "{id}"
    );
    let bad = c
        .call("agent.identity.get", json!({"agentId": "nobody"}))
        .await;
    assert_eq!(bad["ok"], false, "{bad}");

    let conf = c.call("config.get", json!({})).await;
    let p = &conf["payload"];
    assert_eq!(p["exists"], true, "{conf}");
    assert!(p["runtimeConfig"]["gateway"].is_object(), "{conf}");
    assert_eq!(p["resolved"]["gateway"]["authMode"], "token", "{conf}");
    // `resolved.agents` in OpenClaw's shape: defaults and entries by id.
    let agents = &p["resolved"]["agents"];
    assert_eq!(
        agents["defaults"]["model"]["primary"], "scripted/scripted-1",
        "{agents}"
    );
    assert_eq!(
        agents["entries"]["main"]["model"]["primary"], "scripted/scripted-1",
        "{agents}"
    );
    assert!(
        p["hash"]
            .as_str()
            .is_some_and(|h| h.starts_with("hmac-sha256:") && h.len() == 76),
        "{conf}"
    );

    let all = serde_json::to_string(&c.seen).unwrap();
    assert!(!all.contains("sk-never-shown"), "a key was shown");
    assert!(!all.contains(&gw.token()), "the gateway token was shown");
    gw.logs.assert_clean(&[]);
}

/// `health` and `status` have the fields `openclaw health` and `openclaw status --json`
/// dereference (they crashed on loopgate's old answers: `reading 'path'`, `reading
/// 'byAgent'`); loopgate's own view is `loopgate.status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_status_have_openclaws_shapes_r_j4() {
    let gw = Gateway::start_with("[agents.list.ops]\n").await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "shape-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    let h = c.call("health", json!({"probe": true})).await;
    let p = &h["payload"];
    assert_eq!(
        (&p["ok"], &p["defaultAgentId"]),
        (&json!(true), &json!("main")),
        "{h}"
    );
    let agents = p["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{h}");
    let main = &agents[0];
    assert_eq!(
        (&main["agentId"], &main["isDefault"]),
        (&json!("main"), &json!(true))
    );
    assert!(main["sessions"]["path"].is_string(), "{h}");
    assert_eq!(main["sessions"]["count"], 1, "{h}");
    assert_eq!(
        main["sessions"]["recent"][0]["key"], "agent:main:main",
        "{h}"
    );
    assert!(main["sessions"]["recent"][0]["age"].is_u64(), "{h}");
    assert_eq!(agents[1]["sessions"]["count"], 0, "{h}");
    assert_eq!(main["heartbeat"]["enabled"], false);
    assert!(
        p["channels"].is_object() && p["channelOrder"].is_array(),
        "{h}"
    );

    let s = c
        .call(
            "status",
            json!({"includeChannelSummary": false, "includeCliProjection": true}),
        )
        .await;
    let p = &s["payload"];
    assert!(p["channelSummary"].is_array(), "{s}");
    assert_eq!(p["taskAudit"]["errors"], 0, "{s}");
    assert_eq!(p["sessions"]["count"], 1, "{s}");
    let by: Vec<(&str, u64)> = p["sessions"]["byAgent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["agentId"].as_str().unwrap(), a["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(by, [("main", 1), ("ops", 0)], "{s}");
    assert!(p["sessions"]["byAgent"][0]["path"].is_string(), "{s}");
    assert!(p["heartbeat"]["agents"].is_array(), "{s}");
    assert_eq!(p["cliProjection"]["agents"]["defaultId"], "main", "{s}");
    assert_eq!(p["cliProjection"]["agents"]["rows"][1]["id"], "ops", "{s}");
    let plain = c.call("status", json!({})).await;
    assert!(plain["payload"].get("cliProjection").is_none(), "{plain}");

    let own = c.call("loopgate.status", json!({})).await;
    assert!(own["payload"]["workers"].is_array(), "{own}");
    assert!(own["payload"]["supervisor"]["pid"].is_u64(), "{own}");
    gw.logs.assert_clean(&[]);
}

/// `logs.tail` reads the gateway's log lines (its workers' too) by byte cursor; the CLI's
/// `sessions`, `history` and `logs` print what those methods answer (issue 11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_tail_and_the_cli_views_r_j4() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "QUESTION-LOGS", "idempotencyKey": "logs-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    let t = c.call("logs.tail", json!({})).await;
    let p = &t["payload"];
    assert!(p["file"].as_str().is_some_and(|f| !f.is_empty()), "{t}");
    let lines: Vec<&str> = p["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(lines.iter().any(|l| l.contains("Worker ready")), "{t}");
    assert!(
        lines.iter().any(|l| l.contains("Worker started")),
        "a worker's own line: {t}"
    );
    let cursor = p["cursor"].as_u64().unwrap();
    assert_eq!(p["size"].as_u64(), Some(cursor));
    // From the cursor: only what was logged since.
    let again = c.call("logs.tail", json!({"cursor": cursor})).await;
    assert!(
        again["payload"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| !l.as_str().unwrap_or("").contains("Worker ready")),
        "{again}"
    );
    let bad = c.call("logs.tail", json!({"limit": 0})).await;
    assert_eq!(bad["ok"], false, "{bad}");

    let out = gw.cli(&["sessions"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("agent:main:main"),
        "{text}"
    );
    let out = gw.cli(&["history", "main"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("QUESTION-LOGS") && text.contains("[assistant]"),
        "{text}"
    );
    let out = gw.cli(&["logs", "--limit", "50"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("Worker ready"),
        "{text}"
    );
    gw.logs.assert_clean(&[]);
}

/// `tools.catalog` lists the built-in tools by group from the tool table; `tools.effective`
/// what a session's agent is offered (`tools.allow`); the refusals are OpenClaw's
/// (operator-surface §13, issue 39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_catalog_and_effective_follow_the_tool_table_issue_39() {
    let gw = Gateway::start_with("[agents.list.ops]\ntools.allow = [\"read\", \"ls\"]\n").await;
    let mut c = gw.connect().await;
    let r = c.call("tools.catalog", json!({})).await;
    let p = &r["payload"];
    assert_eq!(p["agentId"], "main", "{r}");
    let groups: Vec<&str> = p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["id"].as_str())
        .collect();
    assert_eq!(
        groups,
        ["fs", "messaging", "runtime", "web", "memory"],
        "{r}"
    );
    assert_eq!(p["groups"][0]["tools"][0]["id"], "read", "{r}");
    assert_eq!(
        p["groups"][0]["tools"][0]["defaultProfiles"],
        json!(["coding"]),
        "{r}"
    );
    let r = c.call("tools.catalog", json!({"agentId": "nobody"})).await;
    assert_eq!(r["error"]["message"], "unknown agent id \"nobody\"", "{r}");
    // OpenClaw's Control UI asks with `includePlugins`.
    let r = c
        .call(
            "tools.catalog",
            json!({"agentId": "ops", "includePlugins": true}),
        )
        .await;
    assert_eq!(r["payload"]["agentId"], "ops", "{r}");
    // Before the session's first run: what that run would be offered.
    let r = c
        .call("tools.effective", json!({"sessionKey": "agent:ops:main"}))
        .await;
    let offered = r["payload"]["groups"][0]["tools"].as_array().map(Vec::len);
    assert_eq!(offered, Some(2), "{r}");
    gw.model.push(loopgate_tests::reply("ok"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "te-1", "agentId": "ops"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let r = c
        .call("tools.effective", json!({"sessionKey": "agent:ops:main"}))
        .await;
    let tools: Vec<&str> = r["payload"]["groups"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(tools, ["read", "ls"], "{r}");
    assert_eq!(r["payload"]["profile"], "custom", "{r}");
    let r = c
        .call(
            "tools.effective",
            json!({"sessionKey": "agent:ops:main", "agentId": "main"}),
        )
        .await;
    assert_eq!(
        r["error"]["message"], "agent \"main\" does not match session key agent \"ops\"",
        "{r}"
    );
    let r = c.call("tools.effective", json!({})).await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
}

/// `usage.status`: no provider quota windows (loopgate keeps no provider accounts), as
/// OpenClaw answers for a provider of one's own; unknown params are ignored, as OpenClaw's
/// (operator-surface §10, issue 39).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_status_has_no_provider_windows_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c.call("usage.status", json!({"whatever": 1})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["payload"]["providers"], json!([]), "{r}");
    assert!(r["payload"]["updatedAt"].as_u64().is_some(), "{r}");
}
