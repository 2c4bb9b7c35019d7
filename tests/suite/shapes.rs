//! Shape tests (issue 11): loopgate's answers to the methods the Control UI calls at startup
//! have, at every place a client reads, a value of the same JSON type as OpenClaw
//! 2026.9.6's recorded answers (`tests/fixtures/openclaw-observed/`, from a real OpenClaw
//! gateway).

use loopgate_tests::Gateway;
use serde_json::{json, Value};

const OBSERVED: &str =
    include_str!("../fixtures/openclaw-observed/control-ui-responses-2026.9.6.json");

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The places clients read (JSON pointers) of each recorded method's answer.
const READ: &[(&str, &[&str])] = &[
    ("sessions.subscribe", &["/subscribed"]),
    (
        "agent.identity.get",
        &["/agentId", "/name", "/nameSource", "/avatar"],
    ),
    (
        "models.authStatus",
        &[
            "/ts",
            "/providers",
            "/providers/0/provider",
            "/providers/0/status",
            "/providers/0/profiles",
            "/providerCapabilities",
        ],
    ),
    (
        "chat.startup",
        &[
            "/sessionKey",
            "/sessionId",
            "/messages",
            "/messages/0/role",
            "/messages/0/timestamp",
            "/messages/0/idempotencyKey",
            "/messages/0/__openclaw/id",
            "/messages/0/__openclaw/seq",
            "/pendingInputs/items",
            "/pendingInputs/total",
            "/defaults/model",
            "/defaults/modelProvider",
            "/defaults/contextTokens",
            "/sessionInfo/key",
            "/sessionInfo/sessionId",
            "/sessionInfo/status",
            "/sessionInfo/lastRunId",
            "/sessionInfo/visibility",
            "/sessionInfo/sharingRole",
            "/sessionInfo/effectiveQueueMode",
            "/sessionInfo/isMain",
            "/sessionInfo/chatType",
            "/sessionInfo/kind",
            "/sessionInfo/updatedAt",
            "/sessionInfo/agentId",
        ],
    ),
    (
        "sessions.messages.subscribe",
        &[
            "/subscribed",
            "/key",
            "/approvalReplay/sessionKey",
            "/approvalReplay/approvals",
            "/approvalReplay/truncated",
        ],
    ),
    (
        "sessions.describe",
        &[
            "/session/key",
            "/session/visibility",
            "/session/kind",
            "/session/agentId",
            "/session/isMain",
            "/session/chatType",
            "/session/archived",
            "/session/pinned",
            "/session/sessionId",
            "/session/status",
            "/session/lastRunId",
            "/session/effectiveQueueMode",
            "/session/modelProvider",
            "/session/model",
            "/session/contextTokens",
            "/session/sharingRole",
            "/session/inputTokens",
            "/session/outputTokens",
            "/session/totalTokens",
            "/session/updatedAt",
            "/session/createdAt",
        ],
    ),
    (
        "chat.metadata",
        &[
            "/models",
            "/models/0/id",
            "/models/0/name",
            "/models/0/provider",
            "/models/0/reasoning",
            "/models/0/thinkingLevels",
            "/models/0/thinkingDefault",
            "/models/0/available",
            "/commands",
            "/accountSelection/kind",
            "/accountSelection/label",
            "/runtimeSelectionLocked",
        ],
    ),
    (
        "models.list",
        &[
            "/models",
            "/models/0/id",
            "/models/0/name",
            "/models/0/provider",
            "/models/0/reasoning",
            "/models/0/thinkingLevels/0/id",
            "/models/0/thinkingDefault",
            "/models/0/available",
            "/accountSelection/kind",
        ],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_answers_match_openclaws_recorded_shapes_r_d3() {
    let observed: Value = serde_json::from_str(OBSERVED).expect("fixture is JSON");
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi from loopgate", "idempotencyKey": "shape-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let params = |method: &str| match method {
        "chat.startup" => json!({"sessionKey": "main", "limit": 80, "maxBytes": 262144}),
        "sessions.messages.subscribe" => json!({"key": "main", "includeApprovals": true}),
        "sessions.describe" => json!({"key": "main"}),
        "chat.metadata" | "agent.identity.get" | "models.list" => json!({"agentId": "main"}),
        _ => json!({}),
    };
    let mut mismatches = Vec::new();
    for (method, places) in READ {
        let theirs = &observed[*method];
        assert!(!theirs.is_null(), "fixture has {method}");
        let r = c.call(method, params(method)).await;
        assert_eq!(r["ok"], true, "{method}: {r}");
        let ours = &r["payload"];
        for place in *places {
            let (Some(t), o) = (theirs.pointer(place), ours.pointer(place)) else {
                panic!("the fixture has no {method} {place}: fix the test's list");
            };
            match o {
                None => {
                    mismatches.push(format!("{method} {place}: missing (OpenClaw: {})", kind(t)))
                }
                Some(o) if kind(o) != kind(t) => mismatches.push(format!(
                    "{method} {place}: {} (OpenClaw: {})",
                    kind(o),
                    kind(t)
                )),
                Some(_) => {}
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    gw.logs.assert_clean(&[]);
}
