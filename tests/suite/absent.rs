//! Methods for features loopgate does not have answer as a gateway with nothing of that kind
//! configured (issue 11), and `sessions.create` (TUI `/new`, the Control UI's New session).

use loopgate_tests::Gateway;
use serde_json::{json, Value};

/// Each method's answer, exactly (these are the shapes the Control UI, TUI and CLI check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_features_answer_empty_in_openclaws_shapes_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let ok = |r: &Value| {
        assert_eq!(r["ok"], true, "{r}");
        r["payload"].clone()
    };
    let cron = ok(&c
        .call("cron.list", json!({"includeDisabled": true, "compact": true, "limit": 50, "offset": 0, "enabled": "all", "sortBy": "nextRunAtMs", "sortDir": "asc"}))
        .await);
    assert_eq!(cron["jobs"], json!([]));
    assert_eq!(
        (
            &cron["total"],
            &cron["offset"],
            &cron["limit"],
            &cron["hasMore"],
            &cron["nextOffset"]
        ),
        (
            &json!(0),
            &json!(0),
            &json!(50),
            &json!(false),
            &Value::Null
        ),
        "{cron}"
    );
    assert!(cron["snapshotRevision"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(cron.get("deliveryPreviews").is_none(), "compact: {cron}");
    let full = ok(&c.call("cron.list", json!({})).await);
    assert_eq!(full["deliveryPreviews"], json!({}));
    let status = ok(&c.call("cron.status", json!({})).await);
    assert_eq!(
        (
            &status["enabled"],
            &status["storage"],
            &status["jobs"],
            &status["nextWakeAtMs"]
        ),
        (&json!(true), &json!("sqlite"), &json!(0), &Value::Null),
        "{status}"
    );
    assert_eq!(
        ok(&c
            .call(
                "tasks.list",
                json!({"sessionKey": "main", "status": ["queued", "running"], "limit": 200})
            )
            .await),
        json!({"tasks": []}),
        "exactly this key: the Control UI checks it against a closed schema"
    );
    let talk = ok(&c.call("talk.catalog", json!({})).await);
    assert_eq!(
        (&talk["realtime"]["ready"], &talk["transcription"]["ready"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(
        ok(&c.call("update.status", json!({})).await),
        json!({"sentinel": null, "updateAvailable": null})
    );
    assert_eq!(
        ok(&c
            .call("progressCard.get", json!({"sessionKey": "main"}))
            .await),
        json!({"card": null})
    );
    assert_eq!(
        ok(&c
            .call("sessions.branches.list", json!({"sessionKey": "main"}))
            .await),
        json!({"branches": []})
    );
    let ch = ok(&c
        .call(
            "channels.status",
            json!({"probe": false, "timeoutMs": 8000}),
        )
        .await);
    assert_eq!(
        (&ch["channelOrder"], &ch["channels"], &ch["statusIssues"]),
        (&json!([]), &json!({}), &json!([]))
    );
    assert!(ch["ts"].is_u64());
    assert_eq!(ok(&c.call("last-heartbeat", json!({})).await), Value::Null);
    assert_eq!(
        ok(&c.call("node.list", json!({})).await)["nodes"],
        json!([])
    );
    assert_eq!(
        ok(&c.call("node.pair.list", json!({})).await),
        json!({"pending": [], "paired": []})
    );
    for m in [
        "exec.approval.list",
        "plugin.approval.list",
        "openclaw.approval.list",
    ] {
        assert_eq!(
            ok(&c.call(m, json!({})).await),
            json!([]),
            "{m}: a bare array"
        );
    }
    assert_eq!(
        ok(&c.call("approval.history", json!({})).await),
        json!({"items": []})
    );
    // No side chat and no observer: OpenClaw's own answers when there is none.
    for (m, params, msg) in [
        (
            "sessions.companion.state",
            json!({"sessionKey": "main"}),
            "Side chat is unavailable.",
        ),
        (
            "sessions.observer.visibility",
            json!({"visible": true}),
            "Session observer is unavailable.",
        ),
    ] {
        let r = c.call(m, params).await;
        assert_eq!(
            (&r["error"]["code"], &r["error"]["message"]),
            (&json!("UNAVAILABLE"), &json!(msg)),
            "{r}"
        );
    }
    // Closed params are checked, and the connection keeps serving.
    let bad = c.call("cron.list", json!({"bogus": 1})).await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");
    let bad = c.call("tasks.list", json!({"limit": "x"})).await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");
    let unknown = c.call("voicewake.get", json!({})).await;
    assert_eq!(unknown["error"]["message"], "unknown method: voicewake.get");
    gw.logs.assert_clean(&[]);
}

/// The TUI's `/new` creates a session by key; the Control UI's creates one with its first
/// message, which runs at once. Subscribers hear `create`. Options loopgate does not have
/// are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_create_makes_a_session_and_runs_its_first_turn_r_d3() {
    let gw = Gateway::start().await;
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "sessions.create",
            json!({"key": "tui-0f3a", "agentId": "main", "parentSessionKey": "agent:main:main",
                   "succeedsParent": true, "emitCommandHooks": true}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let p = &r["payload"];
    assert_eq!(p["key"], "agent:main:tui-0f3a");
    assert_eq!(
        (&p["runStarted"], &p["entry"]["key"]),
        (&json!(false), &json!("agent:main:tui-0f3a")),
        "{r}"
    );
    assert!(p["resolved"]["model"].is_string(), "{r}");
    sub.wait_for(|f| {
        f["event"] == "sessions.changed"
            && f["payload"]["reason"] == "create"
            && f["payload"]["sessionKey"] == "agent:main:tui-0f3a"
    })
    .await;
    let list = c.call("sessions.list", json!({})).await;
    assert!(
        list["payload"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["key"] == "agent:main:tui-0f3a"),
        "{list}"
    );

    // With a first message (and no key): a new key, the turn started, its reply arrives.
    let r = c
        .call(
            "sessions.create",
            json!({"agentId": "main", "message": "first words", "displayName": "Fresh"}),
        )
        .await;
    let p = r["payload"].clone();
    assert_eq!(
        (&p["runStarted"], &p["status"]),
        (&json!(true), &json!("started")),
        "{r}"
    );
    let run_id = p["runId"].as_str().unwrap().to_owned();
    let key = p["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("agent:main:"), "{key}");
    assert_eq!(p["entry"]["label"], "Fresh");
    let fin = c
        .wait_for(|f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run_id.as_str()
                && f["payload"]["state"] == "final"
        })
        .await;
    assert_eq!(fin["payload"]["sessionKey"], key.as_str(), "{fin}");
    let h = c.call("chat.history", json!({"sessionKey": key})).await;
    assert_eq!(
        h["payload"]["messages"][0]["content"][0]["text"], "first words",
        "{h}"
    );

    let r = c
        .call(
            "sessions.create",
            json!({"agentId": "main", "incognito": true, "worktree": {"x": 1}}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("incognito") && msg.contains("worktree"),
        "{msg}"
    );
    // Defaults of options it lacks are fine.
    let r = c
        .call(
            "sessions.create",
            json!({"agentId": "main", "incognito": false, "visibility": "shared"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    gw.logs.assert_clean(&[]);
}
