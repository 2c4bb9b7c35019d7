//! Plugin hooks around the tool loop (R-H1, R-H2): guards that block or rewrite a tool call
//! or a message, context added to the prompt, observers, the internal (`HOOK.md`) hooks,
//! `before_model_resolve` and `before_agent_reply`, on the real binaries.

use loopgate_tests::{Gateway, HookFifo};
use scripted_model::{ScriptedCall, Step};
use serde_json::json;

use super::tools::{hook_script, text, tool_messages};

/// R-H2: a `before_tool_call` hook blocks a tool the exec policy would allow (the model sees
/// the reason, other tools still run); `tool_result_persist` rewrites what is recorded;
/// `before_prompt_build` adds system context; a broken config hook is refused at load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_block_rewrite_and_add_context_r_h2() {
    let gw = Gateway::start_with(concat!(
        "[agents.defaults.tools.exec]\nsecurity = \"full\"\n\n",
        "[[hooks.before_tool_call]]\n",
        "command = [\"sh\", \"-c\", \"grep -q '\\\"toolName\\\":\\\"exec\\\"' && echo '{\\\"block\\\": true, \\\"blockReason\\\": \\\"exec is switched off\\\"}' || true\"]\n",
        "priority = 10\n\n",
        "[[hooks.tool_result_persist]]\n",
        "command = [\"sed\", \"s/hunter2/[redacted]/\"]\n\n",
        "[[hooks.before_agent_start]]\n",
        "command = [\"sh\", \"-c\", \"cat >/dev/null; echo '{\\\"prependSystemContext\\\": \\\"Start hook context.\\\"}'\"]\n\n",
        "[[hooks.before_prompt_build]]\n",
        "command = [\"sh\", \"-c\", \"cat >/dev/null; echo '{\\\"appendSystemContext\\\": \\\"Hook says: be brief.\\\"}'\"]\n",
    ))
    .await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("pw.txt"), "password hunter2\n").unwrap();
    gw.model.push(Step::ToolCalls {
        text: String::new(),
        calls: vec![
            ScriptedCall {
                id: "x".into(),
                name: "exec".into(),
                arguments: r#"{"command": "touch hooked"}"#.into(),
            },
            ScriptedCall {
                id: "r".into(),
                name: "read".into(),
                arguments: r#"{"path": "pw.txt"}"#.into(),
            },
        ],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(text("ok"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": "hooked"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(!ws.join("hooked").exists(), "the blocked command ran");
    let reqs = gw.model.requests();
    let system = reqs[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.ends_with("Start hook context.\n\nHook says: be brief."),
        "{system}"
    );
    let results = tool_messages(&reqs[1].body);
    assert!(results[0].1.contains("exec is switched off"), "{results:?}");
    assert!(
        results[1].1.contains("[redacted]") && !results[1].1.contains("hunter2"),
        "{results:?}"
    );
    let db = gw.agent_db("main");
    let stored: Vec<String> = db
        .prepare("SELECT entry_json FROM transcript WHERE role = 'toolResult' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(stored.iter().all(|e| !e.contains("hunter2")), "{stored:?}");
    gw.logs.assert_clean(&[]);
}

/// R-H2: a `message_sending` hook cancels a reply (no payload) or rewrites it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_sending_hook_cancels_or_rewrites_r_h2() {
    let gw = Gateway::start_with(loopgate_tests::REVIEW_HOOK).await;
    gw.model.push(text("this is forbidden"));
    gw.model.push(text("this is fine"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "a", "idempotencyKey": "ms-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(fin["payload"]["result"]["payloads"], json!([]), "{fin}");
    let (_, fin) = c
        .turn(json!({"message": "b", "idempotencyKey": "ms-2"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "[reviewed] ok",
        "{fin}"
    );
    gw.logs.assert_clean(&[]);
}

/// Installs an internal hook `<hooks dir>/<name>/` listening for `events`.
pub fn internal_hook(hooks: &std::path::Path, name: &str, events: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = hooks.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("HOOK.md"),
        format!("---\nname: {name}\nevents: [{events}]\n---\nA test hook.\n"),
    )
    .unwrap();
    let handler = dir.join("handler.sh");
    std::fs::write(&handler, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// R-H1: internal hooks from `<state>/agents/<id>/hooks/*/HOOK.md`: `agent:bootstrap` edits the
/// bootstrap files before the system prompt is final; `command:new` / `command:reset` fire
/// on `sessions.reset`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_hooks_bootstrap_and_commands_r_h1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("AGENTS.md"), "original agents file").unwrap();
    let hooks_dir = gw.hooks_dir("main");
    internal_hook(
        &hooks_dir,
        "inject",
        "\"agent:bootstrap\"",
        r#"cat >/dev/null; echo '{"bootstrapFiles": [{"name": "EXTRA.md", "content": "injected by a hook"}]}'"#,
    );
    // The command hook reports the event it got through a FIFO the test reads: no polling.
    let mut hooks = HookFifo::create(&ws.join("hook.fifo"));
    internal_hook(
        &hooks_dir,
        "notify",
        "\"command:new\", \"command:reset\"",
        "{ cat; echo; } > hook.fifo",
    );

    let mut c = gw.connect().await;
    c.turn(json!({"message": "hi", "idempotencyKey": "boot"}))
        .await;
    let system = gw.model.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("## EXTRA.md") && system.contains("injected by a hook"),
        "{system}"
    );
    assert!(!system.contains("original agents file"), "{system}");

    for (reason, event) in [("new", "command:new"), ("reset", "command:reset")] {
        let r = c
            .call("sessions.reset", json!({"key": "main", "reason": reason}))
            .await;
        assert_eq!(r["ok"], true, "{r}");
        let ev = hooks.next().await;
        assert_eq!(ev["event"], event, "{ev}");
        assert_eq!(ev["sessionKey"], "agent:main:main");
        assert_eq!(ev["agentId"], "main");
    }
    gw.logs.assert_clean(&[]);
}

/// R-H2 observers: `session_start`, `message_received`, `message_sent`, `agent_end` and
/// `session_end` get their events (read through a FIFO the hook writes to: no polling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_hooks_get_their_events_r_h2() {
    let mut extra = String::new();
    for event in [
        "session_start",
        "message_received",
        "message_sent",
        "agent_end",
        "session_end",
    ] {
        extra.push_str(&format!(
            // One write per event (hooks run concurrently; a pipe write under 4 KiB is atomic).
            "[[hooks.{event}]]\ncommand = [\"sh\", \"-c\", \"e=$(cat); printf '%s\\\\n' \\\"$e\\\" > hook.fifo\"]\n\n"
        ));
    }
    let gw = Gateway::start_with(&extra).await;
    let ws = gw.workspace("main");
    let mut hooks = HookFifo::create(&ws.join("hook.fifo"));
    gw.model.push(text("Hello there."));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi hooks", "idempotencyKey": "observed"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let got = hooks.next_by_event(4).await;
    assert!(got.values().all(|ev| ev["runId"] == "observed"), "{got:?}");
    assert!(got["session_start"]["sessionId"].is_string());
    assert_eq!(got["message_received"]["content"], "hi hooks");
    assert_eq!(got["message_sent"]["content"], "Hello there.");
    assert_eq!(got["agent_end"]["status"], "ok");
    let r = c
        .call("sessions.reset", json!({"key": "main", "reason": "reset"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let ev = hooks.next().await;
    assert_eq!(ev["event"], "session_end", "{ev}");
    assert_eq!(ev["reason"], "reset");
    gw.logs.assert_clean(&[]);
}

/// R-H2 `before_model_resolve`: a hook moves a run to another configured provider and model
/// (the request goes there, the run's meta and transcript say so); runs it leaves alone use
/// the agent's model; a pick of an unconfigured provider fails the run with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_model_resolve_picks_provider_and_model_r_h2() {
    let second = scripted_model::ScriptedModel::start().await.unwrap();
    // Hook programs are the operator's: outside the workspace, named by absolute path.
    let scripts = tempfile::tempdir().unwrap();
    let ws = scripts.path();
    let gw = Gateway::start_with(&format!(
        "[models.providers.second]\napi = \"openai-completions\"\nbase_url = \"{}\"\n\n\
         [[hooks.before_model_resolve]]\ncommand = [\"{dir}/pick.sh\"]\npriority = 5\n\n\
         [[hooks.before_model_resolve]]\ncommand = [\"{dir}/late.sh\"]\n",
        second.base_url(),
        dir = ws.display()
    ))
    .await;
    hook_script(
        ws,
        "pick.sh",
        r#"e=$(cat)
case "$e" in
  *switch*) echo '{"providerOverride": "second", "modelOverride": "big-1"}' ;;
  *nowhere*) echo '{"providerOverride": "nowhere", "modelOverride": "m"}' ;;
esac"#,
    );
    // Lower priority: its pick loses to pick.sh's, and alone it changes nothing.
    hook_script(
        ws,
        "late.sh",
        r#"cat >/dev/null; echo '{"modelOverride": "ignored"}'"#,
    );
    second.push(text("from the second provider"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "please switch", "idempotencyKey": "mr-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let meta = &fin["payload"]["result"]["meta"]["agentMeta"];
    assert_eq!(meta["provider"], "second", "{fin}");
    assert_eq!(meta["model"], "big-1", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "from the second provider"
    );
    let reqs = second.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].body["model"], "big-1");
    assert!(
        gw.model.requests().is_empty(),
        "the agent's provider was called"
    );

    // late.sh alone: only a model on the agent's own provider.
    let (_, fin) = c
        .turn(json!({"message": "stay", "idempotencyKey": "mr-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(gw.model.requests()[0].body["model"], "ignored");
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"],
        "scripted"
    );

    let (_, fin) = c
        .turn(json!({"message": "go nowhere", "idempotencyKey": "mr-3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["summary"].to_string() + &fin["payload"]["error"].to_string();
    assert!(err.contains("nowhere"), "{fin}");
    assert_eq!(gw.model.requests().len(), 1);
    gw.logs.assert_clean(&["cannot prepare the run"]);
}

/// R-H2 `before_agent_reply`: the first hook answering `{handled: true}` answers instead of
/// the model (streamed, persisted, a payload); `handled` without a reply is silence; an
/// unclaimed turn goes to the model. A failing hook claims nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_agent_reply_claims_the_turn_r_h2() {
    let scripts = tempfile::tempdir().unwrap();
    let dir = scripts.path();
    let gw = Gateway::start_with(&format!(
        "[[hooks.before_agent_reply]]\ncommand = [\"{d}/broken.sh\"]\npriority = 9\n\n\
         [[hooks.before_agent_reply]]\ncommand = [\"{d}/claim.sh\"]\npriority = 5\n\n\
         [[hooks.before_agent_reply]]\ncommand = [\"{d}/never.sh\"]\n",
        d = dir.display()
    ))
    .await;
    let ws = gw.workspace("main");
    hook_script(dir, "broken.sh", "exit 4");
    hook_script(
        dir,
        "claim.sh",
        r#"e=$(cat)
case "$e" in
  *ping*) echo '{"handled": true, "reply": "pong from a hook"}' ;;
  *hush*) echo '{"handled": true}' ;;
  *) echo '{"handled": false}' ;;
esac"#,
    );
    // Runs only when claim.sh did not claim; it leaves a mark.
    hook_script(dir, "never.sh", "cat >/dev/null; touch never-ran-$$");
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "ping", "idempotencyKey": "ar-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "pong from a hook"
    );
    c.agent_event("ar-1", |p| p["data"]["phase"] == "end").await;
    assert_eq!(c.assistant_text("ar-1"), "pong from a hook");
    let (_, fin) = c
        .turn(json!({"message": "hush", "idempotencyKey": "ar-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(fin["payload"]["result"]["payloads"], json!([]), "{fin}");
    assert!(
        gw.model.requests().is_empty(),
        "a claimed turn called the model"
    );
    let marks = || {
        std::fs::read_dir(&ws)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("never-ran")
            })
            .count()
    };
    assert_eq!(marks(), 0, "a hook ran after the turn was claimed");

    gw.model.push(text("the model answers"));
    let (_, fin) = c
        .turn(json!({"message": "something else", "idempotencyKey": "ar-3"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "the model answers"
    );
    assert_eq!(marks(), 1);
    // The claimed reply is in the history the model sees next.
    let reqs = gw.model.requests();
    let history: Vec<&str> = reqs[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(history.contains(&"pong from a hook"), "{history:?}");
    gw.logs.assert_clean(&["before_agent_reply hook failed"]);
}
