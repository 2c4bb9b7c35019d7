//! `skills.status` (issue 39), as OpenClaw 2026.9.6 answers it
//! (`openclaw-observed/operator-surface-2026.9.6.md` section 12): the agent's workspace skills,
//! each with what it requires, what the worker's host lacks, and whether it is offered.

use loopgate_tests::{Client, Gateway};
use serde_json::{json, Value};

fn skill<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["payload"]["skills"]
        .as_array()
        .and_then(|s| s.iter().find(|k| k["name"] == name))
        .unwrap_or_else(|| panic!("no skill {name}: {r}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_status_says_which_skills_the_host_can_offer_issue_39() {
    let gw = Gateway::start_with("[agents.list.ops]\n").await;
    let ws = gw.workspace("main");
    for (dir, text) in [
        ("skills/deploy", "---\nname: deploy\ndescription: Ship a release\nmetadata: {\"openclaw\": {\"emoji\": \"🚀\", \"requires\": {\"bins\": [\"sh\"]}}}\n---\n"),
        ("skills/gh", "---\nname: gh\ndescription: GitHub\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"no-such-program-39\"], \"anyBins\": [\"sh\", \"nope\"], \"env\": [\"NO_SUCH_VAR_39\"]}}}\n---\n"),
        ("skills/mac", "---\nname: mac\nmetadata: {\"openclaw\": {\"os\": [\"darwin\"]}}\n---\n"),
        ("skills/hidden", "---\nname: hidden\ndisable-model-invocation: true\n---\n"),
    ] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
        std::fs::write(ws.join(dir).join("SKILL.md"), text).unwrap();
    }
    let mut c = gw.connect().await;
    let r = c.call("skills.status", json!({})).await;
    assert_eq!(r["payload"]["agentId"], "main", "{r}");
    assert_eq!(
        r["payload"]["workspaceDir"],
        ws.display().to_string().as_str(),
        "{r}"
    );
    let deploy = skill(&r, "deploy");
    assert_eq!(deploy["eligible"], true, "{r}");
    assert_eq!(deploy["modelVisible"], true, "{r}");
    assert_eq!(deploy["emoji"], "🚀", "{r}");
    assert_eq!(deploy["requirements"]["bins"], json!(["sh"]), "{r}");
    assert_eq!(deploy["missing"]["bins"], json!([]), "{r}");
    assert_eq!(
        deploy["filePath"],
        ws.join("skills/deploy/SKILL.md")
            .display()
            .to_string()
            .as_str()
    );
    let gh = skill(&r, "gh");
    assert_eq!(gh["eligible"], false, "{r}");
    assert_eq!(gh["missing"]["bins"], json!(["no-such-program-39"]), "{r}");
    assert_eq!(gh["missing"]["anyBins"], json!([]), "sh is there: {r}");
    assert_eq!(gh["missing"]["env"], json!(["NO_SUCH_VAR_39"]), "{r}");
    let mac = skill(&r, "mac");
    assert_eq!(
        (mac["eligible"].clone(), mac["platformIncompatible"].clone()),
        (json!(false), json!(true)),
        "{r}"
    );
    let hidden = skill(&r, "hidden");
    assert_eq!(
        (hidden["eligible"].clone(), hidden["modelVisible"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );

    // Another agent's workspace has none; an unknown agent and unknown params are refused.
    let r = c.call("skills.status", json!({"agentId": "ops"})).await;
    assert_eq!(r["payload"]["skills"], json!([]), "{r}");
    let r = c.call("skills.status", json!({"agentId": "nobody"})).await;
    assert_eq!(r["error"]["message"], "unknown agent id \"nobody\"", "{r}");
    let r = c.call("skills.status", json!({"bogus": 1})).await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    // Read scope is enough.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read"]);
    let mut reader = Client::connect_with(&gw.socket(), params).await;
    assert_eq!(reader.call("skills.status", json!({})).await["ok"], true);
}

const SETTINGS: &str = "[agents.defaults.tools.exec]\nsecurity = \"full\"\n\
    [agents.list.ops]\nskills = [\"deploy\"]\n\
    [skills.entries.gh]\nenv = { GH_HOST = \"ghe.example\" }\napi_key_env = \"LG_SKILL_KEY_39\"\n\
    [skills.entries.off]\nenabled = false\n";

/// R-B6: a skill's settings (`[skills.entries.<name>]`) give its commands their variables
/// and its key (from the gateway's environment, as the skill's `primaryEnv`) while it is
/// offered, meet its `requires.env`, and `enabled = false` keeps it from the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skills_settings_give_its_commands_their_variables_and_key_r_b6() {
    let mut gw = Gateway::start_with(SETTINGS).await;
    gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    gw.spawn_with_env(&[("LG_SKILL_KEY_39", "sekrit-39")]).await;
    let ws = gw.workspace("main");
    for (dir, text) in [
        ("skills/gh", "---\nname: gh\ndescription: GitHub CLI\nmetadata: {\"openclaw\": {\"primaryEnv\": \"GH_TOKEN\", \"requires\": {\"env\": [\"GH_TOKEN\", \"GH_HOST\"]}}}\n---\n"),
        ("skills/off", "---\nname: off\ndescription: Switched off\n---\n"),
    ] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
        std::fs::write(ws.join(dir).join("SKILL.md"), text).unwrap();
    }
    let mut c = gw.connect().await;
    let r = c.call("skills.status", json!({})).await;
    let gh = skill(&r, "gh");
    assert_eq!(gh["eligible"], true, "its settings meet requires.env: {r}");
    assert_eq!(gh["missing"]["env"], json!([]), "{r}");
    let off = skill(&r, "off");
    assert_eq!(
        (off["disabled"].clone(), off["eligible"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );

    gw.model.push(loopgate_tests::tool_call(
        "x1",
        "exec",
        &json!({"command": "echo \"token=$GH_TOKEN host=$GH_HOST\""}).to_string(),
    ));
    gw.model.push(loopgate_tests::reply("done"));
    let (_, fin) = c
        .turn(json!({"message": "use gh", "idempotencyKey": "b6-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let requests = gw.model.requests();
    let system = requests[0].body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("<name>gh</name>"), "{system}");
    assert!(!system.contains("<name>off</name>"), "disabled: {system}");
    let sent = requests[1].body.to_string();
    assert!(
        sent.contains("token=sekrit-39 host=ghe.example"),
        "the command got the skill's variables: {sent}"
    );
    // A workspace file (the model can write it) cannot move the key into a variable that
    // changes how commands run: `primaryEnv` LD_PRELOAD is ignored.
    std::fs::write(
        ws.join("skills/gh/SKILL.md"),
        "---\nname: gh\ndescription: GitHub CLI\nmetadata: {\"openclaw\": {\"primaryEnv\": \"LD_PRELOAD\"}}\n---\n",
    )
    .unwrap();
    gw.model.push(loopgate_tests::tool_call(
        "x2",
        "exec",
        &json!({"command": "echo \"preload=[$LD_PRELOAD] host=$GH_HOST\""}).to_string(),
    ));
    gw.model.push(loopgate_tests::reply("done"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "b6-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let sent = gw.model.requests().last().unwrap().body.to_string();
    assert!(sent.contains("preload=[] host=ghe.example"), "{sent}");

    // An agent whose `skills` leave gh out is not offered it, nor given its settings.
    let ops = gw.workspace("ops");
    std::fs::create_dir_all(ops.join("skills/gh")).unwrap();
    std::fs::write(
        ops.join("skills/gh/SKILL.md"),
        "---\nname: gh\nmetadata: {\"openclaw\": {\"primaryEnv\": \"GH_TOKEN\"}}\n---\n",
    )
    .unwrap();
    let r = c.call("skills.status", json!({"agentId": "ops"})).await;
    let gh = skill(&r, "gh");
    assert_eq!(
        (gh["blockedByAgentFilter"].clone(), gh["eligible"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );

    // The key is never in an answer, nor are the skill's variables (often tokens).
    let r = c.call("config.get", json!({})).await;
    assert!(!r.to_string().contains("sekrit-39"), "{r}");
    assert!(!r.to_string().contains("ghe.example"), "{r}");
    assert_eq!(
        r["payload"]["parsed"]["skills"]["entries"]["gh"]["env"]["GH_HOST"],
        "__OPENCLAW_REDACTED__",
        "{r}"
    );
}
