//! The four model APIs end to end (R-G1): the worker speaks each one's wire format to the
//! scripted model, which answers as that provider streams. Per API: a text turn, a tool round
//! trip whose result goes back in that API's own shape, reasoning saved and never in the
//! reply, and the idle timer that reasoning resets and keep-alives do not (R-B4, R-G5).

use loopgate_tests::Gateway;
use scripted_model::wire::Api;
use scripted_model::{ScriptedCall, Step};
use serde_json::{json, Value};

async fn gateway(api: Api, idle_seconds: f64) -> Gateway {
    Gateway::start_api(api, "", "", idle_seconds).await
}

fn reply_text(fin: &Value) -> &str {
    fin["payload"]["result"]["payloads"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The tool result the second request carried, found in that API's shape.
fn tool_result_in(api: Api, body: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match api {
        Api::Completions | Api::Ollama => {
            let m = body["messages"]
                .as_array()
                .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
                .unwrap_or_else(|| panic!("no tool message: {body}"));
            // Ollama has no call ids: the result follows its call.
            (s(&m["tool_call_id"]), s(&m["content"]))
        }
        Api::Responses => {
            let item = body["input"]
                .as_array()
                .and_then(|i| i.iter().find(|i| i["type"] == "function_call_output"))
                .unwrap_or_else(|| panic!("no function_call_output: {body}"));
            (s(&item["call_id"]), s(&item["output"]))
        }
        Api::Anthropic => {
            let block = body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "user")
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .find(|b| b["type"] == "tool_result")
                .unwrap_or_else(|| panic!("no tool_result block: {body}"));
            (s(&block["tool_use_id"]), s(&block["content"]))
        }
    }
}

#[tokio::test]
async fn every_api_answers_a_turn_and_a_tool_round_trip_r_g1() {
    for api in Api::ALL {
        let gw = gateway(api, 30.0).await;
        let mut c = gw.connect().await;
        let (_, fin) = c
            .turn(json!({"message": "hello there", "idempotencyKey": "t1"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        assert_eq!(reply_text(&fin), "Echo: hello there", "{api:?}");
        let first = &gw.model.requests()[0].body;
        match api {
            Api::Responses => {
                assert_eq!(first["store"], false, "{first}");
                assert!(first["instructions"].is_string(), "{first}");
            }
            Api::Anthropic => {
                assert!(first["max_tokens"].as_u64().is_some(), "{first}");
                assert!(first["system"].is_string(), "{first}");
            }
            _ => {}
        }

        std::fs::write(gw.workspace("main").join("notes.txt"), "the word is plum\n").unwrap();
        gw.model.push(Step::ToolCalls {
            text: "Looking.".into(),
            calls: vec![ScriptedCall {
                id: "call_7".into(),
                name: "read".into(),
                arguments: r#"{"path": "notes.txt"}"#.into(),
            }],
            cut: false,
            delay_ms: 0,
            reasoning: String::new(),
        });
        gw.model.push(Step::Text {
            text: "It is plum.".into(),
            chunks: 2,
            delay_ms: 0,
            finish_reason: None,
            reasoning: String::new(),
            keepalive_ms: 0,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "what word?", "idempotencyKey": "t2"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        assert_eq!(reply_text(&fin), "It is plum.", "{api:?}");
        let reqs = gw.model.requests();
        assert_eq!(reqs.len(), 3, "{api:?}");
        let (id, content) = tool_result_in(api, &reqs[2].body);
        assert!(content.contains("plum"), "{api:?}: {content}");
        if api != Api::Ollama {
            assert_eq!(id, "call_7", "{api:?}");
        }
        let hist = c
            .call(
                "chat.history",
                json!({"sessionKey": "agent:main:main", "limit": 20}),
            )
            .await;
        let msgs = hist["payload"]["messages"].as_array().unwrap();
        // Ollama's calls carry no id: loopgate names them by position.
        let want = if api == Api::Ollama {
            "call_0"
        } else {
            "call_7"
        };
        assert!(
            msgs.iter()
                .any(|m| m["role"] == "toolResult" && m["toolCallId"] == want),
            "{api:?}: {hist}"
        );
    }
}

#[tokio::test]
async fn reasoning_is_saved_and_never_the_reply_r_d5_r_f3() {
    for api in Api::ALL {
        let gw = gateway(api, 30.0).await;
        let mut c = gw.connect().await;
        gw.model.push(Step::Text {
            text: "Forty-two.".into(),
            chunks: 2,
            delay_ms: 0,
            finish_reason: None,
            reasoning: "Let me think about the question.".into(),
            keepalive_ms: 0,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "the answer?", "idempotencyKey": "r1"}))
            .await;
        assert_eq!(reply_text(&fin), "Forty-two.", "{api:?}: {fin}");
        assert!(
            !c.assistant_text("r1").contains("think"),
            "{api:?}: reasoning leaked into the reply stream"
        );
        let hist = c
            .call("chat.history", json!({"sessionKey": "agent:main:main"}))
            .await;
        let last = hist["payload"]["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or_default();
        let blocks = last["content"].as_array().cloned().unwrap_or_default();
        assert!(
            blocks
                .iter()
                .any(|b| b["type"] == "thinking"
                    && b["thinking"] == "Let me think about the question."),
            "{api:?}: {last}"
        );
        assert!(
            blocks
                .iter()
                .any(|b| b["type"] == "text" && b["text"] == "Forty-two."),
            "{api:?}: {last}"
        );

        // Reasoning and nothing else is an empty reply: retried, then reported (R-F3).
        for _ in 0..2 {
            gw.model.push(Step::Text {
                text: String::new(),
                chunks: 1,
                delay_ms: 0,
                finish_reason: None,
                reasoning: "only thoughts".into(),
                keepalive_ms: 0,
                end_turn: None,
            });
        }
        let (_, fin) = c
            .turn(json!({"message": "again?", "idempotencyKey": "r2"}))
            .await;
        assert_eq!(fin["payload"]["status"], "error", "{api:?}: {fin}");
        assert!(
            fin["payload"]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("no visible reply"),
            "{api:?}: {fin}"
        );
    }
}

#[tokio::test]
async fn reasoning_keeps_an_attempt_alive_and_keepalives_do_not_r_b4_r_g5() {
    for api in Api::ALL {
        // An idle window of 0.4 s; reasoning arrives for 1.2 s, 0.2 s apart.
        let gw = gateway(api, 0.4).await;
        let mut c = gw.connect().await;
        gw.model.push(Step::Text {
            text: "Done thinking.".into(),
            chunks: 6,
            delay_ms: 200,
            finish_reason: None,
            reasoning: "step one, step two, step three".into(),
            keepalive_ms: 0,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "think long", "idempotencyKey": "k1"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        assert_eq!(reply_text(&fin), "Done thinking.", "{api:?}");

        // So does a tool call whose arguments stream for longer than the window (Ollama
        // sends each call whole, so it has no such stream).
        if api != Api::Ollama {
            std::fs::write(gw.workspace("main").join("slow.txt"), "slowly\n").unwrap();
            gw.model.push(Step::ToolCalls {
                text: String::new(),
                calls: vec![ScriptedCall {
                    id: "slow_1".into(),
                    name: "read".into(),
                    arguments: r#"{"path": "slow.txt"}"#.into(),
                }],
                cut: false,
                delay_ms: 250,
                reasoning: String::new(),
            });
            gw.model.push(text_step("Read slowly.", None));
            let (_, fin) = c
                .turn(json!({"message": "long call", "idempotencyKey": "k-args"}))
                .await;
            assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
            assert_eq!(reply_text(&fin), "Read slowly.", "{api:?}");
        }

        // Keep-alives alone for as long are no progress: the attempt ends at the idle window.
        gw.model.push(Step::Text {
            text: "too late".into(),
            chunks: 1,
            delay_ms: 0,
            finish_reason: None,
            reasoning: String::new(),
            keepalive_ms: 1500,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "ping only", "idempotencyKey": "k2"}))
            .await;
        assert_eq!(fin["payload"]["status"], "error", "{api:?}: {fin}");
        assert!(
            fin["payload"]["error"]
                .as_str()
                .unwrap_or_default()
                .contains("idle timeout"),
            "{api:?}: {fin}"
        );
    }
}

#[tokio::test]
async fn provider_errors_arrive_typed_in_each_apis_shape_r_b4() {
    for api in [Api::Responses, Api::Anthropic, Api::Ollama] {
        let gw = gateway(api, 30.0).await;
        let mut c = gw.connect().await;
        gw.model.push(Step::HttpError {
            status: 400,
            message: "the scripted provider refuses".into(),
            retry_after_s: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "x", "idempotencyKey": "e1"}))
            .await;
        assert_eq!(fin["payload"]["status"], "error", "{api:?}: {fin}");
        let err = fin["payload"]["error"].as_str().unwrap_or_default();
        assert!(
            err.contains("HTTP 400") && err.contains("the scripted provider refuses"),
            "{api:?}: {err}"
        );
        // The next turn works.
        let (_, fin) = c
            .turn(json!({"message": "y", "idempotencyKey": "e2"}))
            .await;
        assert_eq!(reply_text(&fin), "Echo: y", "{api:?}: {fin}");
    }
}

fn text_step(text: &str, end_turn: Option<Value>) -> Step {
    Step::Text {
        text: text.into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn,
    }
}

/// The `openai_responses_terminal` diagnostic of each assistant message in history.
fn terminals(hist: &Value) -> Vec<(String, Value)> {
    hist["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .map(|m| {
            let text = m["content"]
                .as_array()
                .and_then(|b| b.iter().find(|b| b["type"] == "text"))
                .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default();
            let d = m["diagnostics"]
                .as_array()
                .and_then(|d| d.iter().find(|d| d["type"] == "openai_responses_terminal"))
                .map(|d| d["details"].clone())
                .unwrap_or(Value::Null);
            (text, d)
        })
        .collect()
}

#[tokio::test]
async fn responses_end_turn_false_asks_for_the_next_response_r_g2() {
    let gw = gateway(Api::Responses, 30.0).await;
    let mut c = gw.connect().await;
    gw.model.push(text_step("Part one.", Some(json!(false))));
    gw.model.push(text_step("Part two.", Some(json!(true))));
    let (_, fin) = c
        .turn(json!({"message": "go on", "idempotencyKey": "g2-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let payloads: Vec<&str> = fin["payload"]["result"]["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(payloads, ["Part one.", "Part two."]);
    let reqs = gw.model.requests();
    assert_eq!(
        reqs.len(),
        2,
        "a text-only response with end_turn false was continued"
    );
    let input = reqs[1].body["input"].as_array().unwrap();
    assert_eq!(
        input.last().unwrap(),
        &json!({"role": "assistant", "content": "Part one."}),
        "the continued response is in the next request"
    );

    // Absent and malformed signals end the turn; each response keeps its own diagnostic.
    gw.model.push(text_step("Plain.", None));
    c.turn(json!({"message": "a", "idempotencyKey": "g2-2"}))
        .await;
    gw.model.push(text_step("Odd.", Some(json!("yes"))));
    c.turn(json!({"message": "b", "idempotencyKey": "g2-3"}))
        .await;
    assert_eq!(gw.model.requests().len(), 4);
    let hist = c
        .call("chat.history", json!({"sessionKey": "agent:main:main"}))
        .await;
    let d = terminals(&hist);
    let want = |text: &str, end: Value| {
        (
            text.to_owned(),
            json!({"eventType": "response.completed", "endTurn": end, "stopReason": "stop"}),
        )
    };
    assert_eq!(
        d,
        vec![
            want("Part one.", json!(false)),
            want("Part two.", json!(true)),
            want("Plain.", json!("absent")),
            want("Odd.", json!("invalid")),
        ],
        "{hist}"
    );
}

#[tokio::test]
async fn an_output_limit_inside_a_tool_call_runs_only_the_whole_calls_r_g3_r_g4() {
    for api in Api::ALL {
        let gw = gateway(api, 30.0).await;
        std::fs::write(gw.workspace("main").join("a.txt"), "alpha\n").unwrap();
        std::fs::write(gw.workspace("main").join("b.txt"), "beta\n").unwrap();
        let mut c = gw.connect().await;
        let call = |id: &str, path: &str| ScriptedCall {
            id: id.into(),
            name: "read".into(),
            arguments: format!(r#"{{"path": "{path}"}}"#),
        };
        // The limit strikes halfway through the second call's arguments.
        gw.model.push(Step::ToolCalls {
            text: String::new(),
            calls: vec![call("c_a", "a.txt"), call("c_b", "b.txt")],
            cut: true,
            delay_ms: 0,
            reasoning: String::new(),
        });
        gw.model.push(text_step("Read a.", None));
        let (_, fin) = c
            .turn(json!({"message": "read both", "idempotencyKey": "g3"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        assert_eq!(reply_text(&fin), "Read a.", "{api:?}");
        let reqs = gw.model.requests();
        assert_eq!(reqs.len(), 2, "{api:?}");
        let (_, content) = tool_result_in(api, &reqs[1].body);
        assert!(content.contains("alpha"), "{api:?}: {content}");
        let second = reqs[1].body.to_string();
        assert!(
            !second.contains("beta"),
            "{api:?}: the cut call ran: {second}"
        );
        let hist = c
            .call("chat.history", json!({"sessionKey": "agent:main:main"}))
            .await;
        let results = hist["payload"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "toolResult")
            .count();
        assert_eq!(results, 1, "{api:?}: {hist}");

        // An empty response cut by the limit: the transcript goes again, tools and all (G4).
        gw.model.push(Step::Text {
            text: String::new(),
            chunks: 1,
            delay_ms: 0,
            finish_reason: Some("length".into()),
            reasoning: String::new(),
            keepalive_ms: 0,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": "again", "idempotencyKey": "g4"}))
            .await;
        assert_eq!(reply_text(&fin), "Echo: again", "{api:?}: {fin}");
        let reqs = gw.model.requests();
        assert_eq!(reqs.len(), 4, "{api:?}");
        assert_eq!(
            reqs[2].body["tools"], reqs[3].body["tools"],
            "{api:?}: the retry offers the same tools"
        );
        assert!(reqs[3].body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()));
    }
}

const REASONING_MODEL: &str =
    "[models.providers.scripted.models.\"scripted-1\"]\nreasoning = true\n";

/// Where each API carries the thinking level in its request.
fn level_in(api: Api, body: &Value) -> Value {
    match api {
        Api::Completions => body["reasoning_effort"].clone(),
        Api::Responses => body["reasoning"].clone(),
        Api::Anthropic => json!({"thinking": body["thinking"], "max_tokens": body["max_tokens"]}),
        Api::Ollama => body["think"].clone(),
    }
}

#[tokio::test]
async fn a_thinking_level_maps_onto_each_apis_knob_r_d5() {
    for api in Api::ALL {
        let gw = Gateway::start_api(api, "", REASONING_MODEL, 30.0).await;
        let mut c = gw.connect().await;
        let (_, fin) = c
            .turn(json!({"message": "think", "idempotencyKey": "th-1", "thinking": "high"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{api:?}: {fin}");
        let want = match api {
            Api::Completions => json!("high"),
            Api::Responses => json!({"effort": "high", "summary": "auto"}),
            Api::Anthropic => json!({
                "thinking": {"type": "enabled", "budget_tokens": 16384},
                "max_tokens": 8192 + 16384
            }),
            Api::Ollama => json!("high"),
        };
        assert_eq!(level_in(api, &gw.model.requests()[0].body), want, "{api:?}");

        // A session's own level applies to its runs; the request's wins over it.
        let r = c
            .call(
                "sessions.patch",
                json!({"key": "agent:main:main", "thinkingLevel": "minimal"}),
            )
            .await;
        assert_eq!(r["ok"], true, "{api:?}: {r}");
        c.turn(json!({"message": "a", "idempotencyKey": "th-2"}))
            .await;
        c.turn(json!({"message": "b", "idempotencyKey": "th-3", "thinking": "off"}))
            .await;
        let reqs = gw.model.requests();
        let minimal = match api {
            Api::Completions => json!("minimal"),
            Api::Responses => json!({"effort": "minimal", "summary": "auto"}),
            Api::Anthropic => json!({
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "max_tokens": 8192 + 1024
            }),
            Api::Ollama => json!(true),
        };
        assert_eq!(level_in(api, &reqs[1].body), minimal, "{api:?}");
        let off = match api {
            Api::Anthropic => json!({"thinking": null, "max_tokens": 8192}),
            Api::Ollama => json!(false),
            _ => Value::Null,
        };
        assert_eq!(level_in(api, &reqs[2].body), off, "{api:?}");
        let list = c.call("sessions.list", json!({})).await;
        assert_eq!(
            list["payload"]["sessions"][0]["thinkingLevel"], "minimal",
            "{list}"
        );
    }
}

#[tokio::test]
async fn a_level_on_a_model_that_cannot_think_is_refused_r_d5() {
    let gw = gateway(Api::Completions, 30.0).await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "agent",
            json!({"message": "x", "idempotencyKey": "no-1", "thinking": "high"}),
        )
        .await;
    assert_eq!(r["ok"], false, "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("not a reasoning model") && msg.contains("scripted/scripted-1"),
        "{msg}"
    );
    let r = c
        .call(
            "sessions.patch",
            json!({"key": "agent:main:main", "thinkingLevel": "high"}),
        )
        .await;
    assert_eq!(r["ok"], false, "{r}");
    let r = c
        .call(
            "agent",
            json!({"message": "x", "idempotencyKey": "no-2", "thinking": "loud"}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not one of"),
        "{r}"
    );
    // `off` is always fine, and nothing is sent for it.
    let (_, fin) = c
        .turn(json!({"message": "x", "idempotencyKey": "no-3", "thinking": "off"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(gw.model.requests()[0]
        .body
        .get("reasoning_effort")
        .is_none());
    assert_eq!(gw.model.requests().len(), 1, "refused runs asked nothing");
}

#[tokio::test]
async fn reasoning_reaches_clients_only_when_the_session_shows_it_r_d5() {
    for api in Api::ALL {
        reasoning_shown_on(api).await;
    }
}

async fn reasoning_shown_on(api: Api) {
    let gw = gateway(api, 30.0).await;
    let mut c = gw.connect().await;
    let thinker = || Step::Text {
        text: "Answer.".into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: "first this, then that".into(),
        keepalive_ms: 0,
        end_turn: None,
    };
    let thinking_events = |c: &loopgate_tests::Client, run: &str| -> Vec<Value> {
        c.seen
            .iter()
            .filter(|f| f["payload"]["runId"] == run && f["payload"]["stream"] == "thinking")
            .map(|f| f["payload"]["data"].clone())
            .collect()
    };
    // Default (off): saved, never told.
    gw.model.push(thinker());
    c.turn(json!({"message": "q", "idempotencyKey": "rs-off"}))
        .await;
    c.agent_event("rs-off", |p| p["data"]["phase"] == "end")
        .await;
    assert!(thinking_events(&c, "rs-off").is_empty());

    for (mode, run) in [("stream", "rs-stream"), ("on", "rs-on")] {
        let r = c
            .call(
                "sessions.patch",
                json!({"key": "agent:main:main", "reasoningLevel": mode}),
            )
            .await;
        assert_eq!(r["ok"], true, "{r}");
        gw.model.push(thinker());
        let (_, fin) = c.turn(json!({"message": "q", "idempotencyKey": run})).await;
        assert_eq!(reply_text(&fin), "Answer.", "{fin}");
        c.agent_event(run, |p| p["data"]["phase"] == "end").await;
        let events = thinking_events(&c, run);
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(
            last["text"], "first this, then that",
            "{api:?} {mode}: {events:?}"
        );
        if mode == "stream" {
            assert!(events.len() > 1, "streamed in pieces: {events:?}");
        } else {
            assert_eq!(events.len(), 1, "once, whole: {events:?}");
        }
        assert!(!c.assistant_text(run).contains("first this"));
    }
    let r = c
        .call(
            "sessions.patch",
            json!({"key": "agent:main:main", "reasoningLevel": "loud"}),
        )
        .await;
    assert_eq!(r["ok"], false, "{r}");
}

/// Anthropic: a turn that called tools while thinking sends its signed thinking back first
/// on that assistant turn, as the API requires (it refuses the tool result otherwise).
#[tokio::test]
async fn anthropic_gets_its_signed_thinking_back_with_the_tool_round_r_g1() {
    let gw = Gateway::start_api(Api::Anthropic, "", REASONING_MODEL, 30.0).await;
    std::fs::write(gw.workspace("main").join("n.txt"), "nine\n").unwrap();
    let mut c = gw.connect().await;
    gw.model.push(Step::ToolCalls {
        text: String::new(),
        calls: vec![ScriptedCall {
            id: "tu_1".into(),
            name: "read".into(),
            arguments: r#"{"path": "n.txt"}"#.into(),
        }],
        cut: false,
        delay_ms: 0,
        reasoning: "I should read the file.".into(),
    });
    gw.model.push(text_step("Nine.", None));
    let (_, fin) = c
        .turn(json!({"message": "read n", "idempotencyKey": "sig-1", "thinking": "low"}))
        .await;
    assert_eq!(reply_text(&fin), "Nine.", "{fin}");
    let second = &gw.model.requests()[1].body;
    let turn = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(
        turn["content"][0],
        json!({"type": "thinking", "thinking": "I should read the file.", "signature": "scripted-sig-0"}),
        "{turn}"
    );
    assert_eq!(turn["content"][1]["type"], "tool_use", "{turn}");
}
