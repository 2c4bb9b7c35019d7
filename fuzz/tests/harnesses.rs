//! The fuzz harnesses (issue 10): each feeds mutated inputs to one parser of hostile input
//! and fails on any panic. Quick in the test suite; `scripts/fuzz` runs them for longer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use bytes::BytesMut;
use ipc::control::{ControlToWorker, Hello, HelloReply, WorkerToControl};
use ipc::frame::Codec;
use loopgate_fuzz::{run, Budget};
use tokio_util::codec::Decoder;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Client frames: the Gateway v4 request parser and the params types it dispatches to.
#[test]
fn gateway_frames() {
    let seeds: Vec<Vec<u8>> = [
        r#"{"type":"req","id":"1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"cli","mode":"cli","version":"1","platform":"linux"},"role":"operator","scopes":["operator.admin"],"caps":["tool-events"],"auth":{"token":"t"},"device":{"id":"ab","publicKey":"cd","signature":"ef","signedAt":1,"nonce":"n"}}}"#,
        r#"{"type":"req","id":"2","method":"agent","params":{"message":"hi","idempotencyKey":"k","agentId":"main","sessionKey":"agent:main:x","timeout":30,"extraSystemPrompt":"be brief","provider":"p","model":"m"}}"#,
        r#"{"type":"req","id":"3","method":"agent.wait","params":{"runId":"k","timeoutMs":1000}}"#,
        r#"{"type":"req","id":"4","method":"chat.send","params":{"sessionKey":"main","message":"yo","idempotencyKey":"c1"}}"#,
        r#"{"type":"req","id":"5","method":"chat.history","params":{"sessionKey":"main","limit":5}}"#,
        r#"{"type":"req","id":"6","method":"sessions.list","params":{}}"#,
        r#"{"type":"event","event":"x"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run("gateway_frames", &seeds, Budget::from_env(), |input| {
        let text = String::from_utf8_lossy(input);
        let _ = ipc::gateway::parse_request_within(&text, ipc::gateway::Limits::PREAUTH);
        if let Ok(Some(req)) = ipc::gateway::parse_request(&text) {
            let _ = req.params_as::<ipc::gateway::ConnectParams>();
            let _ = req.params_as::<ipc::gateway::AgentParams>();
            let _ = req.params_as::<ipc::gateway::AgentWaitParams>();
            let _ = req.params_as::<ipc::gateway::ChatSendParams>();
            let _ = req.params_as::<ipc::gateway::SessionsListParams>();
            let _ = req.params_as::<ipc::gateway::AnyParams>();
        }
    });
}

/// A frame's structure measured before it is parsed (`ipc::gateway::shape`), against the
/// tree serde builds from the same text: whenever the text is JSON, the measure refuses it
/// exactly when the tree is past the limits. Seeds for depth, width, numbers and surrogates.
#[test]
fn frame_shape() {
    use ipc::gateway::{shape, Limits};
    use serde_json::Value;
    const SMALL: Limits = Limits {
        depth: 4,
        containers: 8,
        members: 16,
    };
    /// Depth, containers and members of a tree, as `shape` counts them.
    fn measure(v: &Value, level: u32, m: &mut (u32, u32, u32)) {
        let children: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            Value::Object(o) => o.values().collect(),
            _ => return,
        };
        m.0 = m.0.max(level + 1);
        m.1 += 1;
        m.2 += children.len() as u32;
        for c in children {
            measure(c, level + 1, m);
        }
    }
    let seeds: Vec<Vec<u8>> = [
        r#"{"type":"req","id":"1","method":"health","params":{"x":[{"":0},{"":0},{"":0}]}}"#,
        r#"[[[[[1]]]],[],{},{"a":{"b":{"c":[]}}}]"#,
        r#"{"a":"]}\"[{,","b":["\\",1e308,-0,12345678901234567890123,0.5e-400]}"#,
        r#"{"s":"\ud800","t":"\ud83d\ude00","u":"\udfff\ud800","v":[true,false,null]}"#,
        r#"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]"#,
        r#"{"type":"req","id":"\ud800","method":"agent","params":{"message":"a\udfffb"}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run("frame_shape", &seeds, Budget::from_env(), |input| {
        let text = String::from_utf8_lossy(input);
        let verdict = shape::check(text.as_bytes(), SMALL);
        let _ = ipc::gateway::parse_request(&text);
        let _ = ipc::gateway::parse_request_within(&text, SMALL);
        // Object keys are unique in a tree: only texts whose entries all made it into the
        // tree compare (a colon inside a string skips the case too).
        let Ok(tree) = serde_json::from_str::<Value>(&text) else {
            return;
        };
        let mut m = (0, 0, 0);
        measure(&tree, 0, &mut m);
        let keys_repeat = {
            fn entries(v: &Value) -> usize {
                match v {
                    Value::Array(a) => a.iter().map(entries).sum(),
                    Value::Object(o) => o.len() + o.values().map(entries).sum::<usize>(),
                    _ => 0,
                }
            }
            let raw_entries = text.matches(':').count();
            raw_entries != entries(&tree)
        };
        if keys_repeat {
            return;
        }
        let within = m.0 <= SMALL.depth && m.1 <= SMALL.containers && m.2 <= SMALL.members;
        assert_eq!(
            verdict.is_ok(),
            within,
            "{text}: measured {verdict:?}, tree (depth, containers, members) = {m:?}"
        );
    });
}

/// The control link: length-prefixed MessagePack frames, both directions and the handshake.
#[test]
fn control_link_codec() {
    let mut seeds = Vec::new();
    for entry in std::fs::read_dir(repo().join("ipc/tests/fixtures/v1")).unwrap() {
        let body = std::fs::read(entry.unwrap().path()).unwrap();
        let mut framed = (body.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&body);
        seeds.push(framed.clone());
        // Two frames back to back.
        framed.extend_from_within(..);
        seeds.push(framed);
    }
    run("control_link_codec", &seeds, Budget::from_env(), |input| {
        fn drain<In: serde::de::DeserializeOwned, Out>(mut codec: Codec<In, Out>, input: &[u8]) {
            let mut buf = BytesMut::from(input);
            for _ in 0..1024 {
                match codec.decode(&mut buf) {
                    Ok(Some(_)) => continue,
                    Ok(None) => {
                        let _ = codec.decode_eof(&mut buf);
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        drain(
            Codec::<ControlToWorker, WorkerToControl>::with_max_frame(ipc::frame::MAX_FRAME),
            input,
        );
        drain(
            Codec::<WorkerToControl, ControlToWorker>::with_max_frame(ipc::frame::MAX_FRAME),
            input,
        );
        drain(Codec::<Hello, HelloReply>::new(), input);
        drain(Codec::<HelloReply, Hello>::new(), input);
    });
}

/// A provider's streamed response (OpenAI Chat Completions SSE), split into chunks at
/// arbitrary points.
#[test]
fn openai_stream() {
    let seeds: Vec<Vec<u8>> = [
        concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n",
            "data: [DONE]\n\n"
        ),
        concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        ),
        "event: error\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\n",
        ": comment\nretry: 10\nid: 5\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    run("openai_stream", &seeds, Budget::from_env(), |input| {
        // The first byte picks where the body is cut into network chunks.
        let step = 1 + input.first().copied().unwrap_or(7) as usize;
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            input.chunks(step).map(|c| Ok(c.to_vec())).collect();
        rt.block_on(async move {
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let pumped = async move {
                let r =
                    worker::llm::completions::pump(futures_util::stream::iter(chunks), &tx).await;
                drop(tx);
                r
            };
            let drained = async { while rx.recv().await.is_some() {} };
            let _ = tokio::join!(pumped, drained);
        });
    });
}

/// Feeds `input` to a provider stream parser, cut into network chunks at a step its first
/// byte picks, draining what it sends.
fn pump_chunks<F, Fut>(rt: &tokio::runtime::Runtime, input: &[u8], pump: F)
where
    F: FnOnce(
        futures_util::stream::Iter<std::vec::IntoIter<Result<Vec<u8>, std::io::Error>>>,
        tokio::sync::mpsc::Sender<Result<worker::llm::LlmEvent, worker::llm::LlmError>>,
    ) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let step = 1 + input.first().copied().unwrap_or(7) as usize;
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        input.chunks(step).map(|c| Ok(c.to_vec())).collect();
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let pumped = pump(futures_util::stream::iter(chunks), tx);
        let drained = async { while rx.recv().await.is_some() {} };
        tokio::join!(pumped, drained);
    });
}

/// The other three wire APIs' stream parsers: OpenAI Responses and Anthropic Messages SSE,
/// Ollama NDJSON.
#[test]
fn responses_anthropic_and_ollama_streams() {
    use worker::llm::limits::Limits;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let responses: Vec<Vec<u8>> = [
        concat!(
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"read\",\"arguments\":\"\"}}\n\n",
            "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,\"delta\":\"{}\"}\n\n",
            "data: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"hm\"}\n\n",
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n",
            "data: {\"type\":\"response.completed\",\"response\":{\"end_turn\":false,\"usage\":{\"input_tokens\":1,\"output_tokens\":2}}}\n\n",
        ),
        "data: {\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run(
        "responses_stream",
        &responses,
        Budget::from_env(),
        |input| {
            pump_chunks(&rt, input, |body, tx| async move {
                let _ = worker::llm::responses::pump(body, &tx, Limits::DEFAULT).await;
            })
        },
    );
    let anthropic: Vec<Vec<u8>> = [concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"ls\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"x\"}}\n\n",
        "data: {\"type\":\"ping\"}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    )]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run(
        "anthropic_stream",
        &anthropic,
        Budget::from_env(),
        |input| {
            pump_chunks(&rt, input, |body, tx| async move {
                let _ = worker::llm::anthropic::pump(body, &tx, Limits::DEFAULT).await;
            })
        },
    );
    let ollama: Vec<Vec<u8>> = [concat!(
        "{\"message\":{\"content\":\"a\",\"thinking\":\"b\"},\"done\":false}\n",
        "{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"ls\",\"arguments\":{\"p\":1}}}]},\"done\":false}\n",
        "{\"done\":true,\"done_reason\":\"length\",\"prompt_eval_count\":1,\"eval_count\":2}\n",
    )]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run("ollama_stream", &ollama, Budget::from_env(), |input| {
        pump_chunks(&rt, input, |body, tx| async move {
            let _ = worker::llm::ollama::pump(body, &tx, Limits::DEFAULT).await;
        })
    });
}

/// The config loader: TOML parsing, then every semantic check.
#[test]
fn config_loader() {
    let example = std::fs::read(repo().join("deploy/loopgate.toml.example")).unwrap();
    let seeds = vec![
        example.clone(),
        String::from_utf8_lossy(&example)
            .replace("# [[hooks.", "[[hooks.")
            .replace("# command", "command")
            .into_bytes(),
        br#"
[gateway]
port = 0
bind = "loopback"
max_connections = 10
[gateway.auth]
token = "x"
[agents.defaults]
model = "local/m"
workspace = "/tmp/ws"
[agents.defaults.tools.exec]
security = "allowlist"
allowlist = ["ls *", "cat *.md"]
[agents.list.ops]
workspace = "/tmp/ops"
[models.providers.local]
api = "openai-completions"
base_url = "http://127.0.0.1:1/v1"
[[hooks.before_tool_call]]
command = ["/bin/true"]
[workers]
crash_loop_max = 3
"#
        .to_vec(),
    ];
    let state = std::env::temp_dir().join("loopgate-fuzz-state");
    run("config_loader", &seeds, Budget::from_env(), |input| {
        let text = String::from_utf8_lossy(input);
        if let Ok(raw) = toml::from_str::<supervisor::config::RawConfig>(&text) {
            let _ = supervisor::config::Config::from_raw(
                raw,
                Path::new("fuzz.toml"),
                &state,
                &supervisor::config::Overrides::default(),
            );
        }
    });
}
