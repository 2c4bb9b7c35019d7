//! `agents.files.list|get|set` (issue 39), as OpenClaw 2026.9.6 answers them
//! (`openclaw-observed/operator-surface-2026.9.6.md` §9): an agent's bootstrap files for the
//! Control UI's editor; the next turn's system prompt carries what was written (R-B6).

use loopgate_tests::{reply, Client, Gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_set_over_the_gateway_is_in_the_next_turns_prompt_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c
        .call("agents.files.list", json!({"agentId": "main"}))
        .await;
    let files = r["payload"]["files"].as_array().unwrap().clone();
    let names: Vec<&str> = files.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(
        names,
        ["AGENTS.md", "SOUL.md", "USER.md", "MEMORY.md"],
        "{r}"
    );
    assert!(files.iter().all(|f| f["missing"] == true), "{r}");
    assert_eq!(files[1]["expectedAbsent"], true, "{r}");
    assert_eq!(files[0]["expectedAbsent"], false, "{r}");
    let r = c
        .call(
            "agents.files.get",
            json!({"agentId": "main", "name": "AGENTS.md"}),
        )
        .await;
    assert_eq!(
        r["payload"]["file"]["missing"], true,
        "a missing file is no error: {r}"
    );
    let text = "# AGENTS.md\n\nAlways greet as OPS-MARKER-39.\n";
    let r = c
        .call(
            "agents.files.set",
            json!({"agentId": "main", "name": "AGENTS.md", "content": text}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let hash = r["payload"]["file"]["hash"].as_str().unwrap().to_owned();
    assert_eq!(r["payload"]["file"]["content"], text, "{r}");
    assert_eq!(r["payload"]["file"]["size"], text.len(), "{r}");
    // A stale hash: refused, nothing written, the current hash in the details.
    let r = c
        .call(
            "agents.files.set",
            json!({"agentId": "main", "name": "AGENTS.md", "content": "other", "expectedHash": "0".repeat(64)}),
        )
        .await;
    assert_eq!(
        r["error"]["message"], "agent file \"AGENTS.md\" changed since it was read",
        "{r}"
    );
    assert_eq!(r["error"]["details"]["type"], "agent_file_conflict", "{r}");
    assert_eq!(r["error"]["details"]["currentHash"], hash.as_str(), "{r}");
    let r = c
        .call(
            "agents.files.set",
            json!({"agentId": "main", "name": "AGENTS.md", "content": "x", "expectedHash": "zz"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    for (method, params, text) in [
        (
            "agents.files.get",
            json!({"agentId": "main", "name": "TOOLS.md"}),
            "unsupported file \"TOOLS.md\"",
        ),
        (
            "agents.files.get",
            json!({"agentId": "main", "name": "../loopgate.toml"}),
            "unsupported file",
        ),
        (
            "agents.files.list",
            json!({"agentId": "nobody"}),
            "agent \"nobody\" not found",
        ),
    ] {
        let r = c.call(method, params).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(text), "{r}");
    }
    // The next turn's system prompt has the new text.
    gw.model.push(reply("hello"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "af-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let requests = gw.model.requests();
    let body = requests.last().unwrap().body.to_string();
    assert!(body.contains("OPS-MARKER-39"), "the prompt: {body}");
    let r = c
        .call("agents.files.list", json!({"agentId": "main"}))
        .await;
    assert_eq!(r["payload"]["files"][0]["missing"], false, "{r}");
    assert_eq!(r["payload"]["files"][0]["hash"], hash.as_str(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_writes_an_agents_files_issue_39() {
    let gw = Gateway::start().await;
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read", "operator.write"]);
    let mut w = Client::connect_with(&gw.socket(), params).await;
    let r = w
        .call(
            "agents.files.set",
            json!({"agentId": "main", "name": "AGENTS.md", "content": "x"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "FORBIDDEN", "{r}");
    let r = w
        .call("agents.files.list", json!({"agentId": "main"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
}

/// `agents.create` puts the agent in the config, applies it and seeds its workspace before it
/// answers, so a turn on it works at once with the templates in its prompt; `agents.update`
/// renames it (and its `IDENTITY.md`); the refusals are OpenClaw's (operator-surface §6, §7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_created_over_the_gateway_answers_a_turn_at_once_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c
        .call("agents.create", json!({"name": "Ops Probe", "emoji": "🤖"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["payload"]["agentId"], "ops-probe", "{r}");
    let workspace = std::path::PathBuf::from(r["payload"]["workspace"].as_str().unwrap());
    for name in [
        "AGENTS.md",
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
        "BOOTSTRAP.md",
    ] {
        assert!(workspace.join(name).is_file(), "{name} seeded");
    }
    let identity = std::fs::read_to_string(workspace.join("IDENTITY.md")).unwrap();
    assert!(
        identity.contains("- Name: Ops Probe") && identity.contains("🤖"),
        "{identity}"
    );
    let list = c.call("agents.list", json!({})).await;
    assert!(list.to_string().contains("ops-probe"), "{list}");
    gw.model.push(reply("at your service"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "ac-1", "agentId": "ops-probe"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let body = gw.model.requests().last().unwrap().body.to_string();
    assert!(
        body.contains("how this agent works"),
        "the seeded AGENTS.md: {body}"
    );
    for (params, text) in [
        (
            json!({"name": "Ops Probe"}),
            "agent \"ops-probe\" already exists",
        ),
        (json!({"name": "main"}), "agent \"main\" already exists"),
        (
            json!({"name": "!!!"}),
            "Agent name \"!!!\" has no valid id characters. Use at least one letter a-z or digit.",
        ),
        (
            json!({"name": ""}),
            "invalid agents.create params: at /name: must not have fewer than 1 characters",
        ),
    ] {
        let r = c.call("agents.create", params).await;
        assert_eq!(r["error"]["message"], text, "{r}");
    }
    let r = c
        .call(
            "agents.update",
            json!({"agentId": "ops-probe", "name": "Ops Renamed"}),
        )
        .await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "agentId": "ops-probe"}),
        "{r}"
    );
    let list = c.call("agents.list", json!({})).await;
    assert!(list.to_string().contains("Ops Renamed"), "{list}");
    let identity = std::fs::read_to_string(workspace.join("IDENTITY.md")).unwrap();
    assert!(identity.contains("- Name: Ops Renamed"), "{identity}");
    let r = c.call("agents.update", json!({"agentId": "nobody"})).await;
    assert_eq!(r["error"]["message"], "agent \"nobody\" not found", "{r}");
    assert!(std::fs::read_to_string(gw.state().join("loopgate.toml"))
        .unwrap()
        .contains("[agents.list.ops-probe]"));
}

/// `agents.delete` takes the agent out of the config (a run to it is refused), moves its
/// files to the state directory's trash once its worker is gone, and keeps `main`; the same
/// name can be created again with a fresh workspace (operator-surface §8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_agent_is_gone_and_its_files_are_in_the_trash_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c.call("agents.create", json!({"name": "Third"})).await;
    assert_eq!(r["ok"], true, "{r}");
    gw.model.push(reply("here"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "ad-1", "agentId": "third"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(gw.worker_pid("third").await.is_some());
    let r = c.call("agents.delete", json!({"agentId": "third"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let removed = r["payload"]["removed"].as_array().unwrap();
    assert!(removed.iter().any(|p| p["method"] == "trash"), "{r}");
    assert_eq!(r["payload"]["failed"], json!([]), "{r}");
    assert!(!gw.state().join("agents").join("third").exists());
    assert!(gw.state().join("trash").read_dir().unwrap().count() == 1);
    let list = c.call("agents.list", json!({})).await;
    assert!(!list.to_string().contains("\"third\""), "{list}");
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "ad-2", "agentId": "third"}),
        )
        .await;
    assert_eq!(r["ok"], false, "{r}");
    for (params, text) in [
        (json!({"agentId": "third"}), "agent \"third\" not found"),
        (
            json!({"agentId": "main"}),
            "Agent \"main\" is loopgate's default agent and cannot be deleted.",
        ),
    ] {
        let r = c.call("agents.delete", params).await;
        assert_eq!(r["error"]["message"], text, "{r}");
    }
    let r = c.call("agents.create", json!({"name": "Third"})).await;
    assert_eq!(r["ok"], true, "created again: {r}");
}

/// Review of cc26e8f: a workspace among the gateway's own files is refused when the agent is
/// created, and deleting an agent whose workspace lies outside the state directory (however
/// its path is spelled) keeps that workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_agent_moves_only_its_own_files_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    for ws in ["agents", "run", "loopgate.toml", "agents/main"] {
        let r = c
            .call(
                "agents.create",
                json!({"name": "Intruder", "workspace": ws}),
            )
            .await;
        assert_eq!(r["ok"], false, "{ws}: {r}");
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("not a workspace place") || message.contains("contains"),
            "{r}"
        );
    }
    let victim = gw.state().parent().unwrap().join(format!(
        "victim-{}",
        gw.state().file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "mine").unwrap();
    let spelled = format!("../{}", victim.file_name().unwrap().to_string_lossy());
    let r = c
        .call(
            "agents.create",
            json!({"name": "Outside", "workspace": spelled}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let r = c.call("agents.delete", json!({"agentId": "outside"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let kept = r["payload"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["method"] == "kept");
    assert!(kept, "{r}");
    assert_eq!(
        std::fs::read_to_string(victim.join("keep.txt")).unwrap(),
        "mine"
    );
    assert!(gw.state().join("loopgate.toml").exists() && gw.state().join("gateway.token").exists());
    std::fs::remove_dir_all(&victim).unwrap();
}

/// An agent written into the config by hand starts, as on OpenClaw, with the bootstrap files
/// in a brand-new workspace when its worker first starts: its first turn's prompt carries
/// them (issue 39). A workspace that already exists is the operator's and stays as it is;
/// `skip_bootstrap` leaves a new one empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_agents_new_workspace_starts_with_the_bootstrap_files_issue_39() {
    let gw = Gateway::start_with(
        "[agents.list.fresh]\nname = \"Fresh One\"\nskip_bootstrap = false\n\
         [agents.list.kept]\nskip_bootstrap = false\n\
         [agents.list.bare]\n",
    )
    .await;
    // `kept` has a workspace already (empty): nothing is written into it.
    let kept = gw.workspace("kept");
    let mut c = gw.connect().await;
    for (agent, key) in [("fresh", "bs-1"), ("kept", "bs-2"), ("bare", "bs-3")] {
        gw.model.push(reply("hello"));
        let (_, fin) = c
            .turn(json!({"message": "hi", "idempotencyKey": key, "agentId": agent}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    let requests = gw.model.requests();
    let prompt = |i: usize| requests[i].body.to_string();
    assert!(
        prompt(0).contains("AGENTS.md: how this agent works") && prompt(0).contains("Fresh One"),
        "the first turn's prompt carries the templates: {}",
        prompt(0)
    );
    assert!(!prompt(1).contains("AGENTS.md: how this agent works"));
    assert!(!prompt(2).contains("AGENTS.md: how this agent works"));
    let fresh = gw.state().join("agents").join("fresh").join("workspace");
    for file in [
        "AGENTS.md",
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
        "BOOTSTRAP.md",
    ] {
        assert!(fresh.join(file).is_file(), "{file} in the new workspace");
    }
    assert_eq!(
        std::fs::read_dir(&kept).unwrap().count(),
        0,
        "kept as it was"
    );
    gw.logs.assert_clean(&[]);
}
