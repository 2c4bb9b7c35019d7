//! One sample of every message of each protocol version, and how a sample is encoded and
//! decoded: what the compatibility tests round-trip and pin against the fixtures.

use ipc::control::*;
use ipc::frame::{decode_body, encode_body};
use ipc::session_ops::*;
use ipc::{ErrorCode, RpcError};

pub(crate) fn spec() -> AgentSpec {
    AgentSpec {
        agent_id: "main".into(),
        db_path: "/state/agents/main/agent.sqlite".into(),
        workspace: "/state/agents/main/workspace".into(),
        model: ModelSpec {
            provider: "scripted".into(),
            api: ProviderApi::OpenAiCompletions,
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key_env: Some("SCRIPTED_KEY".into()),
            model: "scripted-1".into(),
            request_timeout_ms: 60_000,
            idle_timeout_ms: 120_000,
            temperature: None,
            context_window: None,
            retry_base_ms: None,
            retry_max_ms: None,
            max_output_tokens: None,
            image_models: Vec::new(),
        },
        max_concurrent: 8,
        bootstrap_max_chars: 20_000,
        bootstrap_total_max_chars: 60_000,
        base_prompt: None,
        max_queued: 1024,
        exec: ExecPolicy::default(),
        // Fields added after the v1 fixtures were blessed keep their defaults here, so the
        // fixtures keep describing what a v1 peer sent; they get their own round trip below.
        hooks: vec![],
        tools_allow: None,
        providers: vec![],
        compaction: CompactionSpec::default(),
        hooks_dir: None,
        fallbacks: Vec::new(),
        diagnostics: Default::default(),
        disk: Default::default(),
        journaled: false,
        secrets: Default::default(),
        skills: Vec::new(),
        skill_filter: None,
        web_fetch: Default::default(),
    }
}

/// One sample of every message type, named for its fixture file.
/// A lifecycle `Event` of `run_id` (`seq`, at `ts`).
pub(crate) fn lifecycle_event(run_id: &str, seq: u64, ts: u64, l: Lifecycle) -> Sample {
    Sample::Up(WorkerToControl::Event(RunEvent {
        run_id: run_id.into(),
        seq,
        ts,
        body: EventBody::Lifecycle(l),
    }))
}

/// A lifecycle `phase` of a run started at `started_at`, nothing else said.
pub(crate) fn phase_at(phase: Phase, started_at: u64) -> Lifecycle {
    Lifecycle {
        phase,
        started_at: Some(started_at),
        ended_at: None,
        error: None,
        stop_reason: None,
        aborted: None,
        session_id: None,
        session_key: None,
        carried_by: None,
        reply: None,
        guarded: Vec::new(),
        footer: None,
    }
}

pub(crate) fn samples() -> Vec<(&'static str, Sample)> {
    vec![
        (
            "hello",
            Sample::Hello(Hello {
                protocol: 1,
                min_protocol: 1,
                build: "0.1.0".into(),
                role: Role::Worker {
                    agent_id: "main".into(),
                    token: "t0k3n".into(),
                },
            }),
        ),
        (
            "welcome",
            Sample::Reply(HelloReply::Welcome {
                protocol: 1,
                build: "0.1.0".into(),
                spec: Box::new(spec()),
            }),
        ),
        (
            "rejected",
            Sample::Reply(HelloReply::Rejected {
                reason: "no common protocol version".into(),
                supported: Supported { min: 1, max: 1 },
            }),
        ),
        (
            "submit",
            // The fields added after the v1 fixtures keep their defaults (`plain`'s), and
            // with them the fixture's bytes.
            Sample::Down(ControlToWorker::Submit(SubmitRun {
                extra_system_prompt: Some("be brief".into()),
                timeout_ms: Some(172_800_000),
                ..SubmitRun::plain("run-1", "agent:main:main", "hello", 1_764_480_000_000)
            })),
        ),
        (
            "cancel",
            Sample::Down(ControlToWorker::Cancel {
                run_id: "run-1".into(),
                reason: StopReason::Rpc,
            }),
        ),
        (
            "drain",
            Sample::Down(ControlToWorker::Drain {
                deadline_ms: 30_000,
            }),
        ),
        ("ping", Sample::Down(ControlToWorker::Ping { nonce: 42 })),
        (
            "session_history",
            Sample::Down(ControlToWorker::Session {
                op_id: 7,
                op: SessionOp::History(HistoryOp {
                    session_key: "agent:main:main".into(),
                    limit: 200,
                    // Added in v2: their defaults keep the v1 fixture's bytes.
                    offset: 0,
                    max_bytes: None,
                    input_run_ids: vec![],
                }),
            }),
        ),
        (
            "session_reset",
            Sample::Down(ControlToWorker::Session {
                op_id: 8,
                op: SessionOp::Reset(ResetOp {
                    session_key: "agent:main:main".into(),
                    reason: ResetReason::Reset,
                }),
            }),
        ),
        (
            "session_delete",
            Sample::Down(ControlToWorker::Session {
                op_id: 9,
                op: SessionOp::Delete(DeleteOp {
                    session_key: "agent:main:main".into(),
                    delete_transcript: true,
                }),
            }),
        ),
        (
            "session_result",
            Sample::Up(WorkerToControl::SessionResult {
                op_id: 7,
                result_json: Some("{\"messages\":[]}".into()),
                error: None,
            }),
        ),
        (
            "event_lifecycle",
            lifecycle_event(
                "run-1",
                1,
                1_764_480_000_001,
                Lifecycle {
                    session_id: Some("019a0000-0000-7000-8000-000000000000".into()),
                    session_key: Some("agent:main:main".into()),
                    ..phase_at(Phase::Start, 1_764_480_000_001)
                },
            ),
        ),
        (
            "event_assistant",
            Sample::Up(WorkerToControl::Event(RunEvent {
                run_id: "run-1".into(),
                seq: 2,
                ts: 1_764_480_000_002,
                body: EventBody::Assistant {
                    delta: "Hel".into(),
                },
            })),
        ),
        (
            "finished",
            Sample::Up(WorkerToControl::Finished(RunTerminal {
                run_id: "run-1".into(),
                status: RunStatus::Ok,
                session_id: Some("019a0000-0000-7000-8000-000000000000".into()),
                started_at: Some(1_764_480_000_001),
                ended_at: 1_764_480_000_100,
                error: None,
                stop_reason: Some(RunStopReason::Stop),
                payloads: vec![Payload {
                    text: "Hello".into(),
                    is_error: false,
                }],
                provider: Some("scripted".into()),
                model: Some("scripted-1".into()),
                usage: Some(Usage {
                    input: 10,
                    output: 2,
                    cache_read: 0,
                    cache_write: 0,
                    total: 12,
                }),
                duration_ms: 99,
                source_reply_delivered: false,
                fallbacks: 0,
                carried_by: None,
                session_key: None,
                tool_calls: 0,
            })),
        ),
        (
            "worker_rejected",
            Sample::Up(WorkerToControl::Rejected {
                run_id: "run-2".into(),
                error: RpcError::new(ErrorCode::Overloaded, "queue full"),
            }),
        ),
        ("pong", Sample::Up(WorkerToControl::Pong { nonce: 42 })),
        (
            "drained",
            Sample::Up(WorkerToControl::Drained {
                completed: 3,
                aborted: 1,
            }),
        ),
    ]
}

pub(crate) fn stored(seq: i64, role: &str, run_id: Option<&str>) -> StoredMessage {
    StoredMessage {
        entry_id: format!("e{seq}"),
        seq,
        role: role.into(),
        run_id: run_id.map(Into::into),
        message_json: format!(
            "{{\"role\":\"{role}\",\"content\":[{{\"type\":\"text\",\"text\":\"hi\"}}]}}"
        ),
        omitted_bytes: (seq == 3).then_some(9_000_000),
    }
}

/// A `run_status` event (protocol v2, additive).
pub(crate) fn run_status(phase: RunStatusPhase, reason: RetryReason) -> Sample {
    Sample::Up(WorkerToControl::Event(RunEvent {
        run_id: "run-3".into(),
        seq: 5,
        ts: 1_764_480_000_005,
        body: EventBody::RunStatus {
            phase,
            attempt: 2,
            max_attempts: 10,
            reason,
        },
    }))
}

/// A run's terminal with a stop reason.
pub(crate) fn finished(status: RunStatus, stop_reason: RunStopReason) -> Sample {
    Sample::Up(WorkerToControl::Finished(RunTerminal {
        stop_reason: Some(stop_reason),
        status,
        ..RunTerminal::without_work("run-3", RunStatus::Ok, 1_764_480_000_100, "x".into(), None)
    }))
}

/// Messages added or changed in protocol v2, named for their `fixtures/v2` files.
pub(crate) fn samples_v2() -> Vec<(&'static str, Sample)> {
    let done = |op_id, reply| Sample::Up(WorkerToControl::SessionDone { op_id, reply });
    vec![
        (
            "hello",
            Sample::Hello(Hello {
                protocol: 2,
                min_protocol: 2,
                build: "0.1.0".into(),
                role: Role::Worker {
                    agent_id: "main".into(),
                    token: "t0k3n".into(),
                },
            }),
        ),
        (
            "session_history",
            Sample::Down(ControlToWorker::Session {
                op_id: 7,
                op: SessionOp::History(HistoryOp {
                    session_key: "agent:main:main".into(),
                    limit: 80,
                    offset: 0,
                    max_bytes: Some(262_144),
                    input_run_ids: vec!["run-1".into(), "run-9".into()],
                }),
            }),
        ),
        (
            "session_inject",
            Sample::Down(ControlToWorker::Session {
                op_id: 10,
                op: SessionOp::Inject(InjectOp {
                    session_key: "agent:main:main".into(),
                    text: "[note]\n\nback at 5".into(),
                }),
            }),
        ),
        (
            "done_history",
            done(
                7,
                SessionReply::History(HistoryReply {
                    session_id: Some("s1".into()),
                    messages: vec![
                        stored(1, "user", Some("run-1")),
                        stored(2, "assistant", Some("run-1")),
                    ],
                    next_offset: Some(2),
                    consumed: vec![InputConsumed {
                        run_id: "run-1".into(),
                        entry_id: "e1".into(),
                    }],
                }),
            ),
        ),
        (
            "done_reset",
            done(
                8,
                SessionReply::Reset(ResetReply {
                    session_id: "s1".into(),
                    updated_at: 1_764_480_000_000,
                }),
            ),
        ),
        (
            "done_delete",
            done(9, SessionReply::Delete(DeleteReply { deleted: true })),
        ),
        (
            "done_inject",
            done(
                10,
                SessionReply::Inject(InjectReply {
                    session_id: "s1".into(),
                    message: Some(stored(3, "assistant", None)),
                }),
            ),
        ),
        (
            "session_compact",
            Sample::Down(ControlToWorker::Session {
                op_id: 12,
                op: SessionOp::Compact(CompactOp {
                    session_key: "agent:main:main".into(),
                }),
            }),
        ),
        (
            "done_compact",
            done(
                12,
                SessionReply::Compact(CompactReply {
                    compacted: true,
                    reason: None,
                    messages: 14,
                    tokens_before: 90_000,
                    tokens_after: 12_000,
                }),
            ),
        ),
        (
            "done_failed",
            done(
                11,
                SessionReply::Failed {
                    error: RpcError::new(ErrorCode::SessionBusy, "busy"),
                },
            ),
        ),
        (
            "event_message",
            Sample::Up(WorkerToControl::Event(RunEvent {
                run_id: "run-1".into(),
                seq: 4,
                ts: 1_764_480_000_003,
                body: EventBody::Message(stored(2, "assistant", Some("run-1"))),
            })),
        ),
        (
            "submit_levels",
            Sample::Down(ControlToWorker::Submit(SubmitRun {
                run_id: "run-3".into(),
                session_key: "agent:main:main".into(),
                message: "think".into(),
                extra_system_prompt: None,
                timeout_ms: None,
                accepted_at: 1_764_480_000_000,
                model: None,
                strict_model: false,
                thinking: Some(ipc::thinking::Thinking::XHigh),
                reasoning: Some(ipc::thinking::ReasoningMode::Stream),
                queue: None,
                attachments: Vec::new(),
                verbose: None,
                blocks: None,
                usage_footer: None,
                trace: None,
            })),
        ),
        (
            "submit_attachments",
            Sample::Down(ControlToWorker::Submit(SubmitRun {
                run_id: "run-4".into(),
                session_key: "agent:main:main".into(),
                message: String::new(),
                extra_system_prompt: None,
                timeout_ms: None,
                accepted_at: 1_764_480_000_000,
                model: None,
                strict_model: false,
                thinking: None,
                reasoning: None,
                queue: None,
                attachments: vec![ipc::control::Attachment {
                    kind: ipc::control::AttachmentKind::Image,
                    mime_type: "image/png".into(),
                    file_name: Some("dot.png".into()),
                    digest: "ab".repeat(32),
                    size_bytes: 3,
                    data: "AAEC".into(),
                }],
                verbose: None,
                blocks: None,
                usage_footer: None,
                trace: None,
            })),
        ),
        (
            "submit_verbose_blocks",
            Sample::Down(ControlToWorker::Submit(SubmitRun {
                run_id: "run-5".into(),
                session_key: "agent:main:main".into(),
                message: "hi".into(),
                extra_system_prompt: None,
                timeout_ms: None,
                accepted_at: 1_764_480_000_000,
                model: None,
                strict_model: false,
                thinking: None,
                reasoning: None,
                queue: None,
                attachments: Vec::new(),
                verbose: Some(ipc::thinking::VerboseLevel::Full),
                blocks: Some(ipc::blocks::BlockStreaming {
                    boundary: ipc::blocks::BlockBoundary::MessageEnd,
                    min_chars: 200,
                    max_chars: 900,
                    prefer: ipc::blocks::BreakPreference::Sentence,
                }),
                usage_footer: None,
                trace: None,
            })),
        ),
        (
            "session_command",
            Sample::Down(ControlToWorker::Session {
                op_id: 11,
                op: SessionOp::Command(CommandOp {
                    session_key: "agent:main:main".into(),
                    record: ipc::session_ops::CommandRecord {
                        run_id: "run-6".into(),
                        command: "/status".into(),
                        reply: "🦞 loopgate".into(),
                        timestamp: 1_764_480_000_000,
                        notice: false,
                        context_free: true,
                    },
                }),
            }),
        ),
        (
            "done_command",
            done(
                11,
                SessionReply::Command(CommandReply {
                    session_id: Some("s1".into()),
                    messages: vec![
                        stored(3, "user", Some("run-6")),
                        stored(4, "assistant", Some("run-6")),
                    ],
                }),
            ),
        ),
        (
            "session_lanes",
            Sample::Down(ControlToWorker::Session {
                op_id: 13,
                op: SessionOp::Lanes,
            }),
        ),
        (
            "done_lanes",
            done(
                13,
                SessionReply::Lanes(LanesReply {
                    lanes: vec![ipc::diagnostics::LaneView {
                        session_key: "agent:main:main".into(),
                        run_id: Some("run-7".into()),
                        activity: ipc::diagnostics::Activity::ModelCall,
                        queue_depth: 1,
                        last_progress_ms: 1_764_480_000_000,
                        class: Some(ipc::diagnostics::SessionClass::Stalled),
                        reason: Some(ipc::diagnostics::reasons::MODEL_CALL_WITHOUT_PROGRESS.into()),
                    }],
                    queued: 2,
                    active: 1,
                }),
            ),
        ),
        (
            "session_media",
            Sample::Down(ControlToWorker::Session {
                op_id: 14,
                op: SessionOp::Media(MediaOp {
                    session_key: "agent:main:main".into(),
                    digest: "ab".repeat(32),
                }),
            }),
        ),
        (
            "done_media",
            done(
                14,
                SessionReply::Media(MediaReply {
                    found: Some(MediaBytes {
                        mime_type: "image/png".into(),
                        size_bytes: 3,
                        data: "AAEC".into(),
                    }),
                }),
            ),
        ),
        (
            "done_media_missing",
            done(15, SessionReply::Media(MediaReply { found: None })),
        ),
        (
            "done_command_busy",
            done(
                16,
                SessionReply::Command(CommandReply {
                    session_id: None,
                    messages: Vec::new(),
                }),
            ),
        ),
        (
            "event_lifecycle_end_guarded_earlier",
            lifecycle_event(
                "run-5",
                9,
                1_764_480_000_009,
                Lifecycle {
                    ended_at: Some(1_764_480_000_009),
                    stop_reason: Some(RunStopReason::Stop),
                    reply: Some("[reviewed] ok".into()),
                    guarded: vec![ipc::control::GuardedReply {
                        streamed: "A first answer.".into(),
                        kept: String::new(),
                    }],
                    ..phase_at(Phase::End, 1_764_480_000_001)
                },
            ),
        ),
        (
            "event_block",
            Sample::Up(WorkerToControl::Event(RunEvent {
                run_id: "run-5".into(),
                seq: 3,
                ts: 1_764_480_000_003,
                body: EventBody::Block {
                    text: "First paragraph.".into(),
                    index: 0,
                    reasoning: false,
                },
            })),
        ),
        (
            "event_run_status_retrying",
            run_status(RunStatusPhase::Retrying, RetryReason::RateLimit),
        ),
        (
            "event_run_status_fallback",
            run_status(RunStatusPhase::Fallback, RetryReason::Overloaded),
        ),
        (
            "event_lifecycle_timeout",
            lifecycle_event(
                "run-3",
                6,
                1_764_480_000_006,
                Lifecycle {
                    ended_at: Some(1_764_480_000_006),
                    error: Some("run timed out after 1 s".into()),
                    stop_reason: Some(RunStopReason::Timeout),
                    ..phase_at(Phase::Error, 1_764_480_000_001)
                },
            ),
        ),
        (
            "event_lifecycle_taken_in",
            lifecycle_event(
                "run-4",
                1,
                1_764_480_000_007,
                Lifecycle {
                    session_key: Some("agent:main:main".into()),
                    carried_by: Some("run-3".into()),
                    ..phase_at(Phase::Start, 1_764_480_000_007)
                },
            ),
        ),
        (
            "event_lifecycle_end_guarded",
            lifecycle_event(
                "run-5",
                4,
                1_764_480_000_009,
                Lifecycle {
                    ended_at: Some(1_764_480_000_009),
                    stop_reason: Some(RunStopReason::Stop),
                    reply: Some("[reviewed] ok".into()),
                    ..phase_at(Phase::End, 1_764_480_000_008)
                },
            ),
        ),
        (
            "finished_length",
            finished(RunStatus::Ok, RunStopReason::Length),
        ),
        (
            "finished_interrupt",
            finished(RunStatus::Aborted, RunStopReason::Interrupt),
        ),
    ]
}

#[derive(Debug, PartialEq)]
pub(crate) enum Sample {
    Hello(Hello),
    Reply(HelloReply),
    Down(ControlToWorker),
    Up(WorkerToControl),
}

impl Sample {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Sample::Hello(m) => encode_body(m),
            Sample::Reply(m) => encode_body(m),
            Sample::Down(m) => encode_body(m),
            Sample::Up(m) => encode_body(m),
        }
        .unwrap()
    }

    pub(crate) fn decode_like(&self, bytes: &[u8]) -> Sample {
        match self {
            Sample::Hello(_) => Sample::Hello(decode_body(bytes).unwrap()),
            Sample::Reply(_) => Sample::Reply(decode_body(bytes).unwrap()),
            Sample::Down(_) => Sample::Down(decode_body(bytes).unwrap()),
            Sample::Up(_) => Sample::Up(decode_body(bytes).unwrap()),
        }
    }
}
