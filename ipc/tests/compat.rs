//! Compatibility tests for the control-link protocol (house-style rule 12): every message
//! round-trips, golden fixtures of each released protocol version keep decoding to the same
//! values, unknown variants decode to `Unknown`, and named (map) encoding is used.
//!
//! Regenerate fixtures for the *current* version only with `LOOPGATE_BLESS=1 cargo test -p ipc`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use ipc::control::*;
use ipc::frame::{decode_body, encode_body};
use ipc::session_ops::*;

#[path = "compat/samples.rs"]
mod samples;
use samples::*;

fn fixture_dir(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}"))
}

#[test]
fn every_message_round_trips() {
    for (name, sample) in samples().into_iter().chain(samples_v2()) {
        let bytes = sample.encode();
        assert_eq!(sample.decode_like(&bytes), sample, "{name}");
    }
}

#[test]
fn golden_fixtures_of_v1_still_decode() {
    let dir = fixture_dir(1);
    let bless = std::env::var_os("LOOPGATE_BLESS").is_some() && ipc::version::PROTOCOL_VERSION == 1;
    for (name, sample) in samples() {
        let path = dir.join(format!("{name}.msgpack"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, sample.encode()).unwrap();
        }
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
        assert_eq!(
            sample.decode_like(&bytes),
            sample,
            "fixture {name} changed meaning"
        );
        // Additive changes (new optional fields) may change today's bytes, but what a v1 peer
        // sent must keep decoding to the same value (above) and survive a round trip.
        let again = sample.decode_like(&bytes).encode();
        assert_eq!(
            sample.decode_like(&again),
            sample,
            "{name} does not round-trip"
        );
    }
}

#[test]
fn golden_fixtures_of_v2_still_decode() {
    let dir = fixture_dir(2);
    let bless = std::env::var_os("LOOPGATE_BLESS").is_some() && ipc::version::PROTOCOL_VERSION == 2;
    for (name, sample) in samples_v2() {
        let path = dir.join(format!("{name}.msgpack"));
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, sample.encode()).unwrap();
        }
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
        assert_eq!(
            sample.decode_like(&bytes),
            sample,
            "fixture {name} changed meaning"
        );
        assert_eq!(
            sample.decode_like(&sample.encode()),
            sample,
            "{name} does not round-trip"
        );
    }
}

#[test]
fn hook_event_and_reset_reason_names() {
    for e in HookEvent::ALL {
        assert_eq!(HookEvent::parse(e.as_str()), Some(e));
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct W {
            e: HookEvent,
        }
        let back: W = decode_body(&encode_body(&W { e }).unwrap()).unwrap();
        assert_eq!(back.e, e);
    }
    assert_eq!(HookEvent::parse("teleport"), None);
    #[derive(serde::Serialize)]
    struct Named {
        e: &'static str,
        r: &'static str,
    }
    #[derive(serde::Deserialize)]
    struct Typed {
        e: HookEvent,
        r: ResetReason,
    }
    let t: Typed = decode_body(
        &encode_body(&Named {
            e: "before_teleport",
            r: "rewind",
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!((t.e, t.r), (HookEvent::Unknown, ResetReason::Unknown));
    let t: Typed = decode_body(
        &encode_body(&Named {
            e: "agent_end",
            r: "new",
        })
        .unwrap(),
    )
    .unwrap();
    assert_eq!((t.e, t.r), (HookEvent::AgentEnd, ResetReason::New));
}

/// Fields and variants added after the v1 fixtures round-trip (and the fixtures above keep
/// decoding without them).
#[test]
fn additive_run_fields_and_events_round_trip() {
    let submit = SubmitRun {
        run_id: "r".into(),
        session_key: "agent:main:main".into(),
        message: "hi".into(),
        extra_system_prompt: None,
        timeout_ms: None,
        accepted_at: 1,
        strict_model: false,
        thinking: None,
        reasoning: None,
        queue: None,
        model: Some(RunModel {
            provider: "second".into(),
            model: "big-2".into(),
        }),
        attachments: Vec::new(),
        verbose: Some(ipc::thinking::VerboseLevel::Full),
        blocks: Some(ipc::blocks::BlockStreaming::default()),
        usage_footer: Some(ipc::footer::UsageFooter {
            cost: true,
            prices: vec![ipc::footer::ModelPrice {
                provider: "second".into(),
                model: "big-2".into(),
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75,
            }],
        }),
        trace: Some(ipc::footer::TraceLevel::Raw),
    };
    let back: SubmitRun = decode_body(&encode_body(&submit).unwrap()).unwrap();
    assert_eq!(back, submit);
    let mut model = spec().model;
    model.image_models = vec!["scripted-1".into()];
    let back: ModelSpec = decode_body(&encode_body(&model).unwrap()).unwrap();
    assert!(back.takes_images("scripted-1") && !back.takes_images("other"));
    let ev = RunEvent {
        run_id: "r".into(),
        seq: 3,
        ts: 4,
        body: EventBody::Compaction {
            phase: CompactionPhase::End,
            completed: Some(true),
            will_retry: None,
            reason: None,
            messages: Some(12),
            tokens_before: Some(9_000),
            tokens_after: Some(2_000),
        },
    };
    let back: RunEvent = decode_body(&encode_body(&ev).unwrap()).unwrap();
    assert_eq!(back, ev);
}

#[test]
fn additive_agent_spec_fields_round_trip() {
    let spec = AgentSpec {
        exec: ExecPolicy {
            security: ExecSecurity::Allowlist,
            allowlist: vec!["git *".into()],
            timeout_ms: Some(5_000),
            approval_timeout_ms: Some(60_000),
        },
        hooks: vec![HookSpec {
            event: HookEvent::BeforeToolCall,
            command: vec!["/usr/local/bin/guard".into()],
            priority: 10,
            timeout_ms: 5_000,
        }],
        providers: vec![ModelSpec {
            provider: "other".into(),
            model: String::new(),
            context_window: Some(32_768),
            retry_base_ms: None,
            retry_max_ms: None,
            max_output_tokens: None,
            ..spec().model
        }],
        compaction: CompactionSpec {
            reserve_tokens: Some(4_000),
            keep_recent_tokens: None,
        },
        hooks_dir: Some("/state/agents/main/hooks".into()),
        fallbacks: Vec::new(),
        diagnostics: ipc::diagnostics::DiagnosticsPolicy {
            enabled: false,
            warn_ms: 1_000,
            abort_min_ms: 3_000,
        },
        journaled: true,
        secrets: ipc::control::Secrets([("OPENAI_API_KEY".into(), "sk-secret".into())].into()),
        ..spec()
    };
    let bytes = encode_body(&spec).unwrap();
    let back: AgentSpec = decode_body(&bytes).unwrap();
    assert_eq!(back, spec);
    // Keys are never printed: `Debug` names them only.
    let shown = format!("{spec:?}");
    assert!(
        shown.contains("OPENAI_API_KEY") && !shown.contains("sk-secret"),
        "{shown}"
    );
    let keys = ControlToWorker::Keys(spec.secrets.clone());
    let back: ControlToWorker = decode_body(&encode_body(&keys).unwrap()).unwrap();
    assert_eq!(back, keys);
    assert!(!format!("{keys:?}").contains("sk-secret"));
}

/// Cluster mode's journal frames (additive in v2) round-trip.
#[test]
fn journal_frames_round_trip() {
    for up in [
        WorkerToControl::JournalSync { after: 7 },
        WorkerToControl::Journal {
            id: 3,
            after: 9,
            changes: r#"[{"t":"runs","op":"upsert","row":{"run_id":"r"}}]"#.into(),
        },
    ] {
        let back: WorkerToControl = decode_body(&encode_body(&up).unwrap()).unwrap();
        assert_eq!(back, up);
    }
    for down in [
        ControlToWorker::JournalReplay {
            records: vec![JournalChanges {
                seq: 4,
                changes: "[]".into(),
            }],
            last: Some(5),
            error: None,
        },
        ControlToWorker::Journaled {
            id: 3,
            ack: JournalAck::Stored { seq: 10 },
        },
        ControlToWorker::Journaled {
            id: 4,
            ack: JournalAck::Refused {
                reason: "a newer owner".into(),
            },
        },
    ] {
        let back: ControlToWorker = decode_body(&encode_body(&down).unwrap()).unwrap();
        assert_eq!(back, down);
    }
}

#[test]
fn unknown_variants_decode_to_unknown() {
    #[derive(serde::Serialize)]
    struct Future {
        #[serde(rename = "type")]
        kind: &'static str,
        whatever: u32,
    }
    let bytes = encode_body(&Future {
        kind: "teleport",
        whatever: 1,
    })
    .unwrap();
    assert_eq!(
        decode_body::<ControlToWorker>(&bytes).unwrap(),
        ControlToWorker::Unknown
    );
    assert_eq!(
        decode_body::<WorkerToControl>(&bytes).unwrap(),
        WorkerToControl::Unknown
    );
    assert_eq!(
        decode_body::<HelloReply>(&bytes).unwrap(),
        HelloReply::Unknown
    );
}

#[test]
fn encoding_uses_named_fields() {
    let bytes = encode_body(&ControlToWorker::Ping { nonce: 5 }).unwrap();
    // A map with keys "type" and "nonce", not a positional array.
    assert_eq!(
        bytes[0] & 0xf0,
        0x80,
        "expected a fixmap, got {:#x}",
        bytes[0]
    );
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("type") && text.contains("nonce"));
}

#[test]
fn extra_fields_from_a_newer_peer_are_ignored() {
    #[derive(serde::Serialize)]
    struct NewerPing {
        #[serde(rename = "type")]
        kind: &'static str,
        nonce: u64,
        added_in_v2: bool,
    }
    let bytes = encode_body(&NewerPing {
        kind: "ping",
        nonce: 9,
        added_in_v2: true,
    })
    .unwrap();
    assert_eq!(
        decode_body::<ControlToWorker>(&bytes).unwrap(),
        ControlToWorker::Ping { nonce: 9 }
    );
}

#[test]
fn debug_output_redacts_secrets_and_content() {
    let hello = Hello {
        protocol: 1,
        min_protocol: 1,
        build: "x".into(),
        role: Role::Worker {
            agent_id: "main".into(),
            token: "supersecret".into(),
        },
    };
    assert!(!format!("{hello:?}").contains("supersecret"));
    let submit = SubmitRun {
        run_id: "r".into(),
        session_key: "k".into(),
        message: "private words".into(),
        extra_system_prompt: None,
        timeout_ms: None,
        accepted_at: 0,
        model: None,
        strict_model: false,
        thinking: None,
        reasoning: None,
        queue: None,
        attachments: vec![ipc::control::Attachment {
            kind: ipc::control::AttachmentKind::Text,
            mime_type: "text/plain".into(),
            file_name: None,
            digest: "d".into(),
            size_bytes: 9,
            data: "cHJpdmF0ZSBmaWxl".into(),
        }],
        verbose: None,
        blocks: None,
        usage_footer: None,
        trace: Some(ipc::footer::TraceLevel::Raw),
    };
    assert!(!format!("{submit:?}").contains("private"));
    let block = EventBody::Block {
        text: "private words".into(),
        index: 0,
        reasoning: false,
    };
    assert!(!format!("{block:?}").contains("private"));
    let mut end = phase_at(Phase::End, 1);
    end.reply = Some("private words".into());
    end.footer = Some("🔎 Model Input (User Role): private words".into());
    assert!(!format!("{end:?}").contains("private"));
    assert!(!format!("{submit:?}").contains("cHJpdmF0ZSBmaWxl"));
}

/// Closed sets that cross the link as names decode a name from a newer peer as `Unknown`
/// instead of failing the frame (issue 11).
#[test]
fn names_from_a_newer_peer_decode_as_unknown() {
    #[derive(serde::Serialize)]
    struct NewerPolicy {
        security: &'static str,
        allowlist: Vec<String>,
        timeout_ms: Option<u64>,
    }
    let bytes = encode_body(&NewerPolicy {
        security: "approve",
        allowlist: vec![],
        timeout_ms: None,
    })
    .unwrap();
    let p: ExecPolicy = decode_body(&bytes).unwrap();
    assert_eq!(p.security, ExecSecurity::Unknown);
    let api: ProviderApi = decode_body(&encode_body(&"gemini-live").unwrap()).unwrap();
    assert_eq!(api, ProviderApi::Unknown);
    let phase: ToolPhase = decode_body(&encode_body(&"progress").unwrap()).unwrap();
    assert_eq!(phase, ToolPhase::Unknown);
    let phase: CompactionPhase = decode_body(&encode_body(&"middle").unwrap()).unwrap();
    assert_eq!(phase, CompactionPhase::Unknown);
    // Issue 22 item 5: the sets that were free strings until then.
    let t: ipc::thinking::Thinking = decode_body(&encode_body(&"galaxy").unwrap()).unwrap();
    assert_eq!(t, ipc::thinking::Thinking::Unknown);
    let r: ipc::thinking::ReasoningMode = decode_body(&encode_body(&"summary").unwrap()).unwrap();
    assert_eq!(r, ipc::thinking::ReasoningMode::Unknown);
    let p: RunStatusPhase = decode_body(&encode_body(&"queued").unwrap()).unwrap();
    assert_eq!(p, RunStatusPhase::Unknown);
    let why: RetryReason = decode_body(&encode_body(&"quota").unwrap()).unwrap();
    assert_eq!(why, RetryReason::Unknown);
    let stop: RunStopReason = decode_body(&encode_body(&"pause_turn").unwrap()).unwrap();
    assert_eq!(stop, RunStopReason::Unknown);
    // And inside a whole message: an event with both names unknown still decodes.
    #[derive(serde::Serialize)]
    struct NewerStatus {
        #[serde(rename = "type")]
        kind: &'static str,
        run_id: &'static str,
        seq: u64,
        ts: u64,
        body: NewerBody,
    }
    #[derive(serde::Serialize)]
    struct NewerBody {
        stream: &'static str,
        phase: &'static str,
        attempt: u32,
        max_attempts: u32,
        reason: &'static str,
    }
    let bytes = encode_body(&NewerStatus {
        kind: "event",
        run_id: "r",
        seq: 1,
        ts: 2,
        body: NewerBody {
            stream: "run_status",
            phase: "queued",
            attempt: 1,
            max_attempts: 1,
            reason: "quota",
        },
    })
    .unwrap();
    let WorkerToControl::Event(ev) = decode_body::<WorkerToControl>(&bytes).unwrap() else {
        panic!("not an event");
    };
    assert_eq!(
        ev.body,
        EventBody::RunStatus {
            phase: RunStatusPhase::Unknown,
            attempt: 1,
            max_attempts: 1,
            reason: RetryReason::Unknown,
        }
    );
}

/// Issue 22 item 5: every name of the sets that were strings encodes to the very string it
/// was sent as before (so peers of either build read each other).
#[test]
fn closed_set_names_encode_as_the_strings_they_replaced() {
    use ipc::thinking::{ReasoningMode, Thinking};
    fn same<T: serde::Serialize>(typed: T, name: &str) {
        assert_eq!(
            encode_body(&typed).unwrap(),
            encode_body(&name).unwrap(),
            "{name}"
        );
    }
    for t in Thinking::ALL {
        same(t, t.as_str());
    }
    same(ReasoningMode::On, "on");
    same(ReasoningMode::Stream, "stream");
    same(RunStatusPhase::Retrying, "retrying");
    same(RunStatusPhase::Fallback, "fallback");
    for (r, name) in [
        (RetryReason::RateLimit, "rate_limit"),
        (RetryReason::ServerError, "server_error"),
        (RetryReason::Overloaded, "overloaded"),
        (RetryReason::Network, "network"),
        (RetryReason::Timeout, "timeout"),
    ] {
        same(r, name);
        assert_eq!(r.as_str(), name);
    }
    for (r, name) in [
        (RunStopReason::Stop, "stop"),
        (RunStopReason::Length, "length"),
        (RunStopReason::ToolCalls, "tool_calls"),
        (RunStopReason::ContentFilter, "content_filter"),
        (RunStopReason::Error, "error"),
        (RunStopReason::Timeout, "timeout"),
        (RunStopReason::Rpc, "rpc"),
        (RunStopReason::Restart, "restart"),
        (RunStopReason::Interrupt, "interrupt"),
        (RunStopReason::Stalled, "stalled"),
        (RunStopReason::Unknown, "unknown"),
    ] {
        same(r, name);
        assert_eq!(r.as_str(), name);
    }
    for r in [
        StopReason::Rpc,
        StopReason::Restart,
        StopReason::Timeout,
        StopReason::Interrupt,
        StopReason::Stalled,
        StopReason::Unknown,
    ] {
        assert_eq!(RunStopReason::from(r).as_str(), r.as_str());
    }
}

/// Issue 22 item 5: thinking, reasoning, `run_status` phase and reason, and stop reasons
/// crossed the link as free strings and are closed sets now; the bytes they encode to are
/// the ones blessed while they were strings, so no protocol version bump.
#[test]
fn closed_set_fields_keep_their_bytes() {
    let typed = [
        "submit_levels",
        "event_run_status_retrying",
        "event_run_status_fallback",
        "event_lifecycle_timeout",
        "finished_length",
        "finished_interrupt",
    ];
    let dir = fixture_dir(2);
    for (name, sample) in samples_v2() {
        if !typed.contains(&name) {
            continue;
        }
        let path = dir.join(format!("{name}.msgpack"));
        let golden = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
        assert_eq!(sample.encode(), golden, "{name} changed its bytes");
    }
}

/// Session operations and their replies encode to the very bytes blessed for them, so a
/// change to how these types are declared in Rust (a struct variant made a newtype variant
/// holding a struct, say) cannot change what crosses the link unnoticed. The v1 history
/// fixture predates fields added in v2 and is only required to decode (above).
#[test]
fn session_ops_and_replies_keep_their_bytes() {
    let pinned = |version, samples: Vec<(&'static str, Sample)>| {
        let dir = fixture_dir(version);
        let mut seen = 0;
        for (name, sample) in samples {
            let kind = name.starts_with("session_") || name.starts_with("done_");
            if !kind || (version == 1 && name == "session_history") || name == "session_result" {
                continue;
            }
            let path = dir.join(format!("{name}.msgpack"));
            let golden = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("missing fixture {}: {e}", path.display()));
            assert_eq!(
                sample.encode(),
                golden,
                "v{version} {name} changed its bytes"
            );
            seen += 1;
        }
        seen
    };
    // v1: reset, delete. v2: every op kind and every reply kind, `Failed` included.
    assert_eq!(pinned(1, samples()), 2);
    assert_eq!(pinned(2, samples_v2()), 17);
}

/// The kind a message carries on the link (its `kind` tag).
fn kind_of<T: serde::Serialize>(message: &T) -> String {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: String,
    }
    decode_body::<Kind>(&encode_body(message).unwrap())
        .unwrap()
        .kind
}

/// `O` crosses the link as `op`'s kind and takes a reply of that kind only: every other
/// reply (`failed` included) is handed back as it came.
fn pairs<O: Op>(op: O, replies: &[SessionReply]) -> usize
where
    O::Reply: std::fmt::Debug + PartialEq + Into<SessionReply>,
{
    let kind = kind_of(&op.into());
    let mut taken = 0;
    for reply in replies {
        match O::reply(reply.clone()) {
            Ok(r) => {
                assert_eq!(kind_of(reply), kind, "{kind} took another kind's reply");
                assert_eq!(&r.into(), reply, "{kind} changed its reply");
                taken += 1;
            }
            Err(back) => {
                assert_ne!(kind_of(reply), kind, "{kind} refused its own reply");
                assert_eq!(&back, reply, "{kind} changed a reply it refused");
            }
        }
    }
    taken
}

/// Each typed operation is paired with the reply of its own kind (as the link names
/// them), so the supervisor can ask for one and be handed that one.
#[test]
fn each_op_takes_the_reply_of_its_kind() {
    let replies: Vec<SessionReply> = samples_v2()
        .into_iter()
        .filter_map(|(_, s)| match s {
            Sample::Up(WorkerToControl::SessionDone { reply, .. }) => Some(reply),
            _ => None,
        })
        .collect();
    let key = || "agent:main:main".to_owned();
    let history = HistoryOp {
        session_key: key(),
        limit: 1,
        offset: 0,
        max_bytes: None,
        input_run_ids: Vec::new(),
    };
    let reset = ResetOp {
        session_key: key(),
        reason: ResetReason::New,
    };
    let delete = DeleteOp {
        session_key: key(),
        delete_transcript: false,
    };
    let inject = InjectOp {
        session_key: key(),
        text: "x".into(),
    };
    let media = MediaOp {
        session_key: key(),
        digest: "ab".into(),
    };
    let command = CommandOp {
        session_key: key(),
        record: CommandRecord {
            run_id: "r".into(),
            command: "/status".into(),
            reply: "ok".into(),
            timestamp: 1,
            notice: false,
            context_free: true,
        },
    };
    assert_eq!(pairs(history, &replies), 1);
    assert_eq!(pairs(reset, &replies), 1);
    assert_eq!(pairs(delete, &replies), 1);
    assert_eq!(pairs(inject, &replies), 1);
    assert_eq!(pairs(CompactOp { session_key: key() }, &replies), 1);
    assert_eq!(pairs(LanesOp, &replies), 1);
    assert_eq!(pairs(media, &replies), 2);
    assert_eq!(pairs(command, &replies), 2);
    assert_eq!(SessionOp::from(LanesOp), SessionOp::Lanes);
}
