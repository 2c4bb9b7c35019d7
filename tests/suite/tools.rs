//! The tool loop end to end: the model asks for tools, the worker runs them in the agent's
//! workspace, results go back to the model and into the transcript, and tool events reach
//! only clients that asked for them.

use loopgate_tests::{client::connect_params, Client, Gateway};
use scripted_model::{ScriptedCall, Step};
use serde_json::{json, Value};
pub(super) fn call(id: &str, name: &str, arguments: &str) -> Step {
    loopgate_tests::tool_call(id, name, arguments)
}

pub(super) fn text(t: &str) -> Step {
    Step::Text {
        text: t.into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    }
}

async fn tool_client(gw: &Gateway) -> Client {
    let mut params = connect_params();
    params["caps"] = json!(["tool-events"]);
    Client::connect_with(&gw.socket(), params).await
}

/// The `tool` messages of a recorded model request, as (tool_call_id, content).
pub(super) fn tool_messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// R-E4: a read tool round trip; tool events only for `tool-events` clients; the transcript
/// keeps the call and its result (and the next turn's context carries them, paired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_round_trip_events_and_transcript_r_e4() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("notes.txt"), "the secret word is plum\n").unwrap();
    gw.model.push(Step::ToolCalls {
        text: "Let me look.".into(),
        calls: vec![ScriptedCall {
            id: "call_1".into(),
            name: "read".into(),
            arguments: r#"{"path": "notes.txt"}"#.into(),
        }],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(text("The word is plum."));

    let mut watcher = tool_client(&gw).await;
    let mut plain = gw.connect().await;
    let (_, fin) = plain
        .turn(json!({"message": "what is the word?", "idempotencyKey": "tool-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "The word is plum."
    );

    let start = watcher
        .agent_event("tool-1", |p| {
            p["stream"] == "tool" && p["data"]["phase"] == "start"
        })
        .await;
    assert_eq!(start["payload"]["data"]["name"], "read", "{start}");
    assert_eq!(start["payload"]["data"]["toolCallId"], "call_1");
    assert_eq!(start["payload"]["data"]["args"]["path"], "notes.txt");
    let result = watcher
        .agent_event("tool-1", |p| {
            p["stream"] == "tool" && p["data"]["phase"] == "result"
        })
        .await;
    assert_eq!(result["payload"]["data"]["isError"], false);
    assert!(result["payload"]["data"]["result"]
        .as_str()
        .unwrap()
        .contains("plum"));
    watcher
        .agent_event("tool-1", |p| p["data"]["phase"] == "end")
        .await;
    // The plain client saw the whole run but no tool event.
    plain
        .agent_event("tool-1", |p| p["data"]["phase"] == "end")
        .await;
    assert!(
        !plain
            .seen
            .iter()
            .any(|f| f["event"] == "agent" && f["payload"]["stream"] == "tool"),
        "tool events leaked to a client without the tool-events cap"
    );

    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 2);
    let names: Vec<_> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "write",
            "edit",
            "apply_patch",
            "ls",
            "message",
            "exec",
            "process",
            "web_fetch",
            "memory_search",
            "memory_get"
        ]
    );
    let second = &reqs[1].body["messages"];
    let assistant = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .expect("assistant tool call message");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["content"], "Let me look.");
    let tools = tool_messages(&reqs[1].body);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].0, "call_1");
    assert!(tools[0].1.contains("the secret word is plum"), "{tools:?}");

    // Transcript: user, assistant (toolCall), toolResult, assistant.
    let h = plain
        .call("chat.history", json!({"sessionKey": "main"}))
        .await;
    assert_eq!(h["ok"], true, "{h}");
    let msgs = h["payload"]["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    assert_eq!(msgs[1]["content"][1]["type"], "toolCall");
    assert_eq!(msgs[1]["content"][1]["arguments"]["path"], "notes.txt");
    assert_eq!(msgs[2]["toolCallId"], "call_1");
    assert_eq!(msgs[2]["toolName"], "read");

    // The next turn's context carries the earlier call and its result, paired.
    gw.model.push(text("Still plum."));
    let (_, fin) = plain
        .turn(json!({"message": "again?", "idempotencyKey": "tool-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let reqs = gw.model.requests();
    let third = reqs.last().unwrap();
    assert_eq!(tool_messages(&third.body).len(), 1);
    gw.logs.assert_clean(&[]);
}

/// R-E1: bad calls come back to the model as error results and the run goes on: a path
/// outside the workspace, exec under the default deny policy, malformed and schema-invalid
/// arguments, an unknown tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_and_invalid_calls_become_error_results_r_e1() {
    let gw = Gateway::start().await;
    let calls = [
        ("c1", "read", r#"{"path": "../../../../etc/passwd"}"#),
        ("c2", "read", r#"{"path": "/etc/passwd"}"#),
        ("c3", "exec", r#"{"command": "echo hi"}"#),
        ("c4", "read", r#"{"path": "#),
        ("c5", "read", r#"{"offset": 1}"#),
        ("c6", "teleport", r#"{}"#),
    ];
    gw.model.push(Step::ToolCalls {
        text: String::new(),
        calls: calls
            .iter()
            .map(|(id, name, args)| ScriptedCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(text("I could not do that."));
    let mut c = tool_client(&gw).await;
    let (_, fin) = c
        .turn(json!({"message": "try things", "idempotencyKey": "bad-tools"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let reqs = gw.model.requests();
    let results = tool_messages(&reqs[1].body);
    let ids: Vec<_> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6"]);
    let expected = [
        "outside the workspace",
        "outside the workspace",
        "exec refused",
        "invalid arguments for read",
        "invalid arguments for read",
        "unknown tool",
    ];
    for ((id, content), want) in results.iter().zip(expected) {
        assert!(content.contains(want), "{id}: {content}");
    }
    for id in ids {
        let r = c
            .agent_event("bad-tools", |p| {
                p["stream"] == "tool"
                    && p["data"]["phase"] == "result"
                    && p["data"]["toolCallId"] == id
            })
            .await;
        assert_eq!(r["payload"]["data"]["isError"], true, "{r}");
    }
    gw.logs.assert_clean(&[]);
}

/// Exec runs when the allowlist permits it; write and edit change files in the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlisted_exec_and_file_edits_r_e1() {
    let gw = Gateway::start_with(
        "[agents.defaults.tools.exec]\nsecurity = \"allowlist\"\nallowlist = [\"echo *\"]\n",
    )
    .await;
    gw.model.push(call(
        "w1",
        "write",
        r#"{"path": "dir/out.txt", "content": "alpha beta"}"#,
    ));
    gw.model.push(call(
        "e1",
        "edit",
        r#"{"path": "dir/out.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}"#,
    ));
    gw.model
        .push(call("x1", "exec", r#"{"command": "echo loopgate-42"}"#));
    gw.model
        .push(call("x2", "exec", r#"{"command": "rm -rf dir"}"#));
    gw.model.push(text("Done."));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "work", "idempotencyKey": "exec-ok"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let ws = gw.workspace("main");
    assert_eq!(
        std::fs::read_to_string(ws.join("dir/out.txt")).unwrap(),
        "alpha gamma"
    );
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 5);
    let exec_ok = tool_messages(&reqs[3].body);
    let (_, out) = exec_ok.iter().find(|(id, _)| id == "x1").unwrap();
    assert!(out.contains("loopgate-42"), "{out}");
    let refused = tool_messages(&reqs[4].body);
    let (_, out) = refused.iter().find(|(id, _)| id == "x2").unwrap();
    assert!(out.contains("exec refused"), "{out}");
    gw.logs.assert_clean(&[]);
}

/// A model that never stops asking for tools is cut off with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_tool_loop_is_stopped() {
    let gw = Gateway::start().await;
    for i in 0..20 {
        gw.model.push(call(&format!("l{i}"), "ls", "{}"));
    }
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "loop", "idempotencyKey": "loop"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["error"].as_str().unwrap();
    assert!(err.contains("tool loop stopped"), "{err}");
    assert_eq!(gw.model.requests().len(), 16);
    gw.logs.assert_clean(&[]);
}

/// R-F1, R-F3: a silent reply streams nothing and delivers no payload, and it does not waive
/// the reply a direct request needs: the model is asked again (text that only starts like
/// the token is delivered whole); silent again, the run fails with the try-again notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_reply_has_no_payload_and_no_stream_r_f1() {
    let gw = Gateway::start().await;
    let silent = || Step::Text {
        text: "NO_REPLY".into(),
        chunks: 4,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    };
    // A direct request needs an answer: the silent reply is empty output, so the model is
    // asked again, and only its real answer is delivered.
    gw.model.push(silent());
    gw.model.push(Step::Text {
        text: "No, that is fine.".into(),
        chunks: 6,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "ok", "idempotencyKey": "silent"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"],
        json!([{"text": "No, that is fine."}]),
        "{fin}"
    );
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["messages"], reqs[1].body["messages"]);
    c.agent_event("silent", |p| p["data"]["phase"] == "end")
        .await;
    assert_eq!(
        c.assistant_text("silent"),
        "No, that is fine.",
        "a prefix of the silent token leaked"
    );

    // Silent twice: no payload of it; the run fails clearly and leaves the try-again notice.
    gw.model.push(silent());
    gw.model.push(silent());
    let (_, fin) = c
        .turn(json!({"message": "and now?", "idempotencyKey": "still-silent"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("no visible reply"),
        "{fin}"
    );
    assert!(!fin.to_string().contains("NO_REPLY"), "{fin}");
    c.agent_event("still-silent", |p| p["data"]["phase"] == "error")
        .await;
    assert_eq!(c.assistant_text("still-silent"), "");
    assert!(!c.seen.iter().any(|f| f["event"] == "chat"
        && f["payload"]["runId"] == "still-silent"
        && f["payload"]["state"] == "delta"));
    // History: the answer and the notice, never the silent token.
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    let texts: Vec<String> = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "No, that is fine.");
    assert!(texts[1].contains("try again"), "{texts:?}");
    gw.logs.assert_clean(&[]);
}

/// R-F2, R-F4: a failed tool followed by an empty reply gets one tool-free finalization
/// pass, then (still nothing) the fallback warning; a failed tool followed by a real answer
/// gets no warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_warning_only_when_nothing_else_was_said_r_f2_r_f4() {
    let gw = Gateway::start().await;
    gw.model.push(call("x", "exec", r#"{"command": "make"}"#));
    for _ in 0..2 {
        gw.model.push(Step::Text {
            text: " \u{200B} ".into(),
            chunks: 1,
            delay_ms: 0,
            finish_reason: None,
            reasoning: String::new(),
            keepalive_ms: 0,
            end_turn: None,
        });
    }
    gw.model.push(call("y", "exec", r#"{"command": "make"}"#));
    gw.model
        .push(text("I am not allowed to run commands here."));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "build", "idempotencyKey": "warn"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let p = &fin["payload"]["result"]["payloads"];
    assert_eq!(p.as_array().unwrap().len(), 1, "{fin}");
    assert_eq!(p[0]["isError"], true, "{fin}");
    let w = p[0]["text"].as_str().unwrap();
    assert!(
        w.contains("exec tool failed") && w.contains("exec refused"),
        "{w}"
    );
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 3, "call, answer, one finalization pass");
    assert!(reqs[1].body["tools"].is_array());
    assert!(
        reqs[2].body.get("tools").is_none(),
        "the finalization pass offers no tools"
    );
    assert_eq!(
        tool_messages(&reqs[2].body).len(),
        1,
        "it sees the settled results"
    );
    let (_, fin) = c
        .turn(json!({"message": "build again", "idempotencyKey": "no-warn"}))
        .await;
    let p = &fin["payload"]["result"]["payloads"];
    assert_eq!(p.as_array().unwrap().len(), 1, "{fin}");
    assert_eq!(p[0]["text"], "I am not allowed to run commands here.");
    gw.logs.assert_clean(&[]);
}

/// R-D6: the audit ledger records lifecycle and tool start/terminal events with result codes
/// and timings, and no content: no prompt, reply, tool arguments, results or error text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_ledger_holds_metadata_only_r_d6() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("s.txt"), "file-secret-77\n").unwrap();
    gw.model.push(Step::ToolCalls {
        text: String::new(),
        calls: vec![
            ScriptedCall {
                id: "a1".into(),
                name: "read".into(),
                arguments: r#"{"path": "s.txt"}"#.into(),
            },
            ScriptedCall {
                id: "a2".into(),
                name: "exec".into(),
                arguments: r#"{"command": "echo args-secret-55"}"#.into(),
            },
        ],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(text("reply-secret-33"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "prompt-secret-11", "idempotencyKey": "audited"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    // The ledger is written behind the run, in the agent db's queue order: once a later
    // run has begun (its user message is committed), the first run's records are too.
    gw.model.push(text("later"));
    let (_, fin) = c
        .turn(json!({"message": "next", "idempotencyKey": "audited-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    let out = gw.cli(&["audit", "--json", "--limit", "100"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text_out = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows: Vec<Value> = text_out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["runId"] == "audited")
        .collect();
    let summary: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r["kind"].as_str().unwrap(),
                r["phase"].as_str().unwrap(),
                r["tool"].as_str().unwrap_or("-"),
                r["result"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            "lifecycle start - -",
            "tool start read -",
            "tool result read ok",
            "tool start exec -",
            "tool result exec error",
            "lifecycle end - ok",
        ]
    );
    assert_eq!(rows[0]["agentId"], "main");
    assert_eq!(rows[0]["sessionKey"], "agent:main:main");
    assert!(rows[5]["durationMs"].is_u64());
    let db = gw.agent_db("main");
    let dump: Vec<String> = db
        .prepare("SELECT * FROM audit")
        .unwrap()
        .query_map([], |r| {
            Ok((0..10)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join("|"))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let dump = dump.join("\n");
    for secret in [
        "prompt-secret-11",
        "file-secret-77",
        "args-secret-55",
        "reply-secret-33",
        "exec refused",
    ] {
        assert!(
            !dump.contains(secret),
            "{secret} leaked into the ledger:\n{dump}"
        );
        assert!(
            !text_out.contains(secret),
            "{secret} leaked into audit output"
        );
    }

    // Human output and errors.
    let out = gw.cli(&["audit", "--agent", "main", "--limit", "3"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
    let out = gw.cli(&["audit", "--agent", "nobody"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nobody"));
    gw.logs.assert_clean(&[]);
}

/// R-D4: a tool call the model serialized into its text is hidden from the stream, the
/// final reply and the transcript, and is not executed; code examples stay visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serialized_xml_tool_calls_are_hidden_r_d4() {
    let gw = Gateway::start().await;
    let raw = "Let me check.<tool_call>{\"name\": \"exec\", \"arguments\": {\"command\": \"touch pwned\"}}</tool_call> \
               Also <function_calls><invoke name=\"ls\"><parameter name=\"path\">.</parameter></invoke></function_calls>done. \
               Syntax: `<tool_call>`.";
    let want = "Let me check. Also done. Syntax: `<tool_call>`.";
    gw.model.push(Step::Text {
        text: raw.into(),
        chunks: 37,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "xml"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(fin["payload"]["result"]["payloads"][0]["text"], want);
    c.agent_event("xml", |p| p["data"]["phase"] == "end").await;
    let streamed = c.assistant_text("xml");
    assert_eq!(streamed, want);
    assert_eq!(
        gw.model.requests().len(),
        1,
        "a hidden call is not executed"
    );
    assert!(!gw.state().join("agents/main/workspace/pwned").exists());
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    let last = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["text"], want, "{last}");
    gw.logs.assert_clean(&[]);
}

/// R-B6: workspace context: MEMORY.md and HEARTBEAT.md are injected with the other bootstrap
/// files, and skills from `<workspace>/skills/*/SKILL.md` are listed for the model (hidden
/// ones left out); a changed skill shows up in the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_heartbeat_and_skills_in_the_system_prompt_r_b6() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::create_dir_all(ws.join("skills/deploy")).unwrap();
    std::fs::create_dir_all(ws.join("skills/secret")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "remember the plums").unwrap();
    std::fs::write(ws.join("HEARTBEAT.md"), "check the queue").unwrap();
    std::fs::write(
        ws.join("skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship a release safely\n---\nSteps...",
    )
    .unwrap();
    std::fs::write(
        ws.join("skills/secret/SKILL.md"),
        "---\nname: secret\ndescription: hidden\ndisable-model-invocation: true\n---\n",
    )
    .unwrap();
    let mut c = gw.connect().await;
    c.turn(json!({"message": "hi", "idempotencyKey": "ctx-1"}))
        .await;
    let system = |i: usize| {
        gw.model.requests()[i].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let s = system(0);
    assert!(
        s.contains("## MEMORY.md") && s.contains("remember the plums"),
        "{s}"
    );
    assert!(s.contains("## HEARTBEAT.md") && s.contains("check the queue"));
    assert!(s.contains(
        "<skill><name>deploy</name><description>Ship a release safely</description><location>skills/deploy/SKILL.md</location></skill>"
    ), "{s}");
    assert!(!s.contains("<name>secret</name>"));
    std::fs::write(
        ws.join("skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship a release, now with canaries\n---\n",
    )
    .unwrap();
    c.turn(json!({"message": "again", "idempotencyKey": "ctx-2"}))
        .await;
    assert!(system(1).contains("now with canaries"));

    // The second root, nested folders, and the host gate: `sh` is on the worker's PATH, a
    // program that does not exist is not.
    for (dir, needs) in [
        ("ops/runbook", "sh"),
        ("needs-nothing-here", "no-such-program-x"),
    ] {
        let folder = ws.join(".agents/skills").join(dir);
        std::fs::create_dir_all(&folder).unwrap();
        let name = dir.rsplit('/').next().unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: d\nmetadata: {{\"openclaw\": {{\"requires\": {{\"bins\": [\"{needs}\"]}}}}}}\n---\n"
            ),
        )
        .unwrap();
    }
    c.turn(json!({"message": "third", "idempotencyKey": "ctx-3"}))
        .await;
    let s = system(2);
    assert!(
        s.contains("<location>.agents/skills/ops/runbook/SKILL.md</location>"),
        "{s}"
    );
    assert!(!s.contains("needs-nothing-here"), "{s}");
    gw.logs.assert_clean(&[]);
}

/// R-F3: an empty (whitespace / zero-width) reply is retried; when the retry is empty too
/// the run fails and a try-again notice is left in history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_replies_are_retried_then_reported_r_f3() {
    let gw = Gateway::start().await;
    let empty = |t: &str| Step::Text {
        text: t.into(),
        chunks: 1,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    };
    gw.model.push(empty("  "));
    gw.model.push(text("Second time lucky."));
    gw.model.push(empty("\u{200B}"));
    gw.model.push(empty("\n"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hello", "idempotencyKey": "retry-ok"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "Second time lucky.",
        "{fin}"
    );
    let (_, fin) = c
        .turn(json!({"message": "hello?", "idempotencyKey": "retry-out"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("no visible reply (2 attempts)"),
        "{fin}"
    );
    assert_eq!(gw.model.requests().len(), 4);
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    let last = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Please try again"),
        "{last}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-E4: a running exec streams `update` events (partial output) between `start` and
/// `result`; aborting the run kills the command's whole process group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_streams_updates_and_abort_kills_the_group_r_e4() {
    let gw = Gateway::start_with("[agents.defaults.tools.exec]\nsecurity = \"full\"\n").await;
    gw.model.push(call(
        "u1",
        "exec",
        r#"{"command": "echo part1; echo part2"}"#,
    ));
    gw.model.push(text("Done."));
    let mut c = tool_client(&gw).await;
    let (_, fin) = c
        .turn(json!({"message": "run it", "idempotencyKey": "updates"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    c.agent_event("updates", |p| p["data"]["phase"] == "end")
        .await;
    let phases: Vec<(String, String)> = c
        .seen
        .iter()
        .filter(|f| f["payload"]["runId"] == "updates" && f["payload"]["stream"] == "tool")
        .map(|f| {
            let d = &f["payload"]["data"];
            (
                d["phase"].as_str().unwrap().to_owned(),
                d["partialResult"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(phases.first().unwrap().0, "start", "{phases:?}");
    assert_eq!(phases.last().unwrap().0, "result", "{phases:?}");
    let updates: String = phases
        .iter()
        .filter(|(p, _)| p == "update")
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(updates, "part1\npart2\n", "{phases:?}");

    // Abort while a command (and a child of it) runs.
    gw.model.push(call(
        "u2",
        "exec",
        r#"{"command": "sleep 300 & echo $! > sleeper.pid; echo started; wait"}"#,
    ));
    let id = c
        .send(
            "agent",
            json!({"message": "hang", "idempotencyKey": "hang"}),
        )
        .await;
    c.agent_event("hang", |p| {
        p["stream"] == "tool" && p["data"]["phase"] == "update"
    })
    .await;
    let pid: u32 = std::fs::read_to_string(gw.state().join("agents/main/workspace/sleeper.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(loopgate_tests::alive(pid));
    let r = c
        .call("chat.abort", json!({"sessionKey": "main", "runId": "hang"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let mut fin = c.res(&id).await;
    if fin["payload"]["status"] == "accepted" {
        fin = c.res(&id).await;
    }
    assert_eq!(
        fin["payload"]["status"], "timeout",
        "aborted runs report timeout: {fin}"
    );
    assert!(
        loopgate_tests::gone_within(pid, loopgate_tests::WAIT)
            .await
            .is_some(),
        "the command's child survived the abort"
    );
    gw.logs.assert_clean(&[]);
}

/// R-E3: `message` delivers text to the conversation now (streamed), the final payloads carry
/// it, a final reply that only repeats it is dropped, and the run's receipt says a reply was
/// delivered (final response and `agent.wait`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_tool_delivers_dedups_and_records_a_receipt_r_e3() {
    let mut gw = Gateway::start().await;
    gw.model.push(Step::ToolCalls {
        text: String::new(),
        calls: vec![
            ScriptedCall {
                id: "m1".into(),
                name: "message".into(),
                arguments: r#"{"text": "Build started."}"#.into(),
            },
            ScriptedCall {
                id: "m2".into(),
                name: "message".into(),
                arguments: r#"{"text": "The build is green."}"#.into(),
            },
        ],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(text("the build is green"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "build it", "idempotencyKey": "msg"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let texts: Vec<&str> = fin["payload"]["result"]["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Build started.", "The build is green."], "{fin}");
    assert_eq!(
        fin["payload"]["result"]["meta"]["terminalReceipt"]["sourceReplyDelivered"], true,
        "{fin}"
    );
    let w = c.call("agent.wait", json!({"runId": "msg"})).await;
    assert_eq!(
        w["payload"]["terminalReceipt"]["sourceReplyDelivered"], true,
        "{w}"
    );
    c.agent_event("msg", |p| p["data"]["phase"] == "end").await;
    let streamed = c.assistant_text("msg");
    assert!(
        streamed.starts_with("Build started.\n\nThe build is green.\n\n"),
        "{streamed:?}"
    );

    gw.model.push(text("plain"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "no-msg"}))
        .await;
    assert!(
        fin["payload"]["result"]["meta"]
            .get("terminalReceipt")
            .is_none(),
        "{fin}"
    );
    let w = c.call("agent.wait", json!({"runId": "no-msg"})).await;
    assert!(w["payload"].get("terminalReceipt").is_none(), "{w}");
    assert_eq!(
        w["payload"]["terminalReply"],
        json!({"disposition": "visible", "text": "plain"}),
        "{w}"
    );

    // After a restart the wait result comes from the gateway db, with the same receipt and
    // reply.
    let live = c.call("agent.wait", json!({"runId": "msg"})).await;
    assert_eq!(
        live["payload"]["terminalReply"],
        json!({"disposition": "visible", "text": "Build started.\n\nThe build is green."}),
        "{live}"
    );
    drop(c);
    assert!(gw.stop(nix::sys::signal::Signal::SIGTERM).await.success());
    gw.spawn().await;
    let mut c = gw.connect().await;
    let stored = c.call("agent.wait", json!({"runId": "msg"})).await;
    assert_eq!(stored["payload"], live["payload"], "{stored}");
    gw.logs.assert_clean(&[]);
}

/// `tools.allow` limits what the model is offered and what runs; unknown names are refused
/// at config load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_allow_limits_offer_and_execution() {
    let gw = Gateway::start_with(
        "[agents.defaults.tools]\nallow = [\"read\", \"ls\"]\n[agents.defaults.tools.exec]\nsecurity = \"full\"\n",
    )
    .await;
    gw.model
        .push(call("e", "exec", r#"{"command": "touch made"}"#));
    gw.model.push(text("ok"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "x", "idempotencyKey": "allow"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let reqs = gw.model.requests();
    let names: Vec<_> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["read", "ls"]);
    let results = tool_messages(&reqs[1].body);
    assert!(results[0].1.contains("not enabled"), "{results:?}");
    assert!(!gw.state().join("agents/main/workspace/made").exists());

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("loopgate.toml"),
        "[agents.defaults.tools]\nallow = [\"teleport\"]\n",
    )
    .unwrap();
    let (code, stderr) = loopgate_tests::serve_refusal(dir.path()).await;
    assert_eq!(code, Some(78));
    assert!(
        stderr.contains("tools.allow") && stderr.contains("teleport"),
        "{stderr}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-E1 recovery end to end: `"offset": "2"` (a string where the schema wants an integer) is
/// converted and the call runs; the model gets lines from 2 on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recoverable_arguments_are_converted_r_e1() {
    let gw = Gateway::start().await;
    let ws = gw.workspace("main");
    std::fs::write(ws.join("lines.txt"), "one\ntwo\nthree\n").unwrap();
    gw.model.push(call(
        "r",
        "read",
        r#"{"path": "lines.txt", "offset": "2", "limit": "1"}"#,
    ));
    gw.model.push(text("ok"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "x", "idempotencyKey": "recover"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let results = tool_messages(&gw.model.requests()[1].body);
    assert!(
        results[0].1.contains("two")
            && !results[0].1.contains("one")
            && !results[0].1.contains("three"),
        "{results:?}"
    );
    gw.logs.assert_clean(&[]);
}

/// Writes an executable hook script into the agent's workspace (hooks run there).
pub(super) fn hook_script(ws: &std::path::Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = ws.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
