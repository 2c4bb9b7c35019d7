//! The sans-IO core of one turn: `Turn::handle(input, now, wall_ms) -> Vec<Action>`.
//!
//! It owns the turn's state machine and deadlines and never touches a socket, a file or the
//! clock: the driver feeds it inputs (the run was begun, model stream events, cancel, ticks,
//! persistence results) with the current time and carries out the actions it returns (emit an
//! event, call or abort the model, append a transcript message, run a tool, persist the
//! outcome, finish).
//!
//! Tool loop: a model response that ends with tool calls is appended (fenced) as an assistant
//! message; the calls then run one at a time, each result appended as a `toolResult` message
//! and sent back to the model, until a response has no tool calls or the model-call cap is
//! reached.
//!
//! Rules kept here: the terminal lifecycle event is emitted only after the outcome is durable
//! (R-A5), exactly one terminal per run and nothing after it (R-D3), a run deadline
//! (`timeout`, R-B4) and a model idle deadline that only advancing usage or data resets
//! (R-B4, R-G5).

use std::time::{Duration, Instant};

use ipc::control::{
    EventBody, Lifecycle, Payload, Phase as LPhase, RunStatus, RunTerminal, StopReason, Usage,
};

use std::collections::VecDeque;

use super::compaction::{self, ContextBudget, MAX_COMPACTIONS_PER_RUN};
use super::prompt;
use super::reply;
use super::retry::Retries;
use super::xml::XmlFilter;
use crate::llm::{ChatMessage, LlmError, LlmEvent, ModelRequest, Terminal};
use crate::store::{Compaction, FinishRun, NewMessage, Role, StoreError};
use crate::tools::{ToolCall, ToolOutcome};
use ipc::thinking::ReasoningMode;

mod approval;
mod steer;
pub use approval::denied;
pub use steer::{SteerMsg, Steered, SKIPPED};

/// Most model calls in one run (each tool round costs one).
pub const MAX_MODEL_CALLS: u32 = 16;
/// Most tool calls in one run.
pub const MAX_TOOL_CALLS: usize = 64;
/// Extra model calls for a reply that came back empty (R-F3).
pub const MAX_EMPTY_RETRIES: u32 = 1;
/// Recoveries of a run from responses cut by the model's output limit (R-G3, R-G4).
pub const MAX_LENGTH_RECOVERIES: u32 = 2;
/// Tool arguments and results carried in events are capped to this many characters.
const EVENT_JSON_MAX: usize = 4096;

/// Fixed facts of a turn.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    pub run_id: String,
    pub session_key: String,
    pub provider: String,
    pub model: String,
    /// Run deadline from start; `None` arms no execution timer.
    pub timeout: Option<Duration>,
    pub idle_timeout: Duration,
    /// The model's context limits (for another model picked per run: recomputed from its
    /// window with `compaction`).
    pub context: ContextBudget,
    pub compaction: ipc::control::CompactionSpec,
    /// First and largest delay between retries of a transient model failure.
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// Models tried in order when the current one fails for good (empty for a run that
    /// named its model: strict).
    pub fallbacks: Vec<crate::llm::ModelChoice>,
    /// Whether clients hear the run's reasoning (as it streams, or once per response).
    pub reasoning: ipc::thinking::ReasoningMode,
    /// How long an `exec` waits for an operator's approval before it is denied.
    pub approval_timeout: Duration,
}

#[derive(Debug)]
pub enum Input {
    /// The run is claimed and recorded; `request` is the model request, or why it could not
    /// be built.
    Begun {
        session_id: String,
        request: Result<Prepared, String>,
    },
    /// Claiming the session or recording the run failed; nothing is persisted.
    BeginFailed(String),
    Model(LlmEvent),
    ModelFailed(LlmError),
    Cancel(StopReason),
    Tick,
    /// A transcript message from `Action::Append` (or the compaction from `Action::Compact`)
    /// was written at this position (or not).
    Appended(Result<i64, StoreError>),
    /// Partial output of the running tool.
    ToolUpdate(String),
    /// The tool from `Action::RunTool` finished.
    ToolDone(ToolOutcome),
    Persisted(Result<(), StoreError>),
    /// A message steered into the turn (R-B3): recorded and sent before the next model call.
    Steer(Steered),
    /// The running call (`exec`) needs an operator's approval `id` first.
    ApprovalPending {
        id: String,
    },
    /// Approval `id` was decided.
    ApprovalDecided {
        id: String,
        allow: bool,
    },
}

/// How a prepared run begins.
#[derive(Debug)]
pub enum Prepared {
    /// Call the model with this request.
    Call(ModelRequest),
    /// A `before_agent_reply` hook answered instead of the model; `None`: silence.
    Claimed(Option<String>),
}

#[derive(Debug, PartialEq)]
pub enum Action {
    Emit(EventBody),
    CallModel(ModelRequest),
    AbortModel,
    /// Append a message to the run's session (fenced by the run's writer claim).
    Append(Box<NewMessage>),
    RunTool(ToolCall),
    /// Run the call an operator approved (its command may run though no pattern allows it).
    RunApproved(ToolCall),
    /// Approval `id` was not decided in time: the call was denied.
    ApprovalExpired {
        id: String,
    },
    /// Stop the running tool, if any.
    AbortTool,
    /// Record a compaction (fenced); answered with `Input::Appended`.
    Compact(Box<Compaction>),
    Persist(Box<FinishRun>),
    Finish(Box<RunTerminal>),
}

#[derive(Debug)]
enum Phase {
    Starting {
        cancel: Option<StopReason>,
    },
    Streaming {
        run_deadline: Option<Instant>,
        idle_deadline: Instant,
    },
    /// Streaming the summary of the older context (not shown to anyone).
    Compacting {
        run_deadline: Option<Instant>,
        idle_deadline: Instant,
        job: Box<CompactJob>,
    },
    /// Recording the compaction; then the model is called with the compacted request.
    CompactSaving {
        run_deadline: Option<Instant>,
        job: Box<CompactJob>,
    },
    /// A model attempt failed in a way worth retrying: the same request goes again at
    /// `until` (the run stays open; clients were told `run_status retrying`).
    Backoff {
        run_deadline: Option<Instant>,
        until: Instant,
    },
    /// Running a response's tool calls; `queue` holds those not started yet.
    Tools {
        run_deadline: Option<Instant>,
        queue: VecDeque<ToolCall>,
        running: Option<ToolCall>,
    },
    /// Recording a steered message; then the next one, then the model call.
    Steering {
        run_deadline: Option<Instant>,
    },
    /// `call` waits for an operator (approval `id`) until `until`; the run's deadline is
    /// paused with `run_left` to go.
    Approval {
        run_left: Option<Duration>,
        until: Instant,
        id: String,
        queue: VecDeque<ToolCall>,
        call: ToolCall,
    },
    Persisting {
        terminal: Box<RunTerminal>,
    },
    Done,
}

/// A compaction in progress.
#[derive(Debug)]
pub struct CompactJob {
    /// The request that was too large; `pending.messages[cut..]` is kept.
    pending: ModelRequest,
    cut: usize,
    summary: String,
    usage: Option<Usage>,
    reason: &'static str,
    /// The model call overflowed the context (this error) and is retried after compaction.
    overflow: Option<String>,
    tokens_before: u64,
    /// The compacted request, once the summary is in.
    next: Option<ModelRequest>,
    /// The call it precedes follows a tool batch.
    after_tools: bool,
}

pub struct Turn {
    spec: TurnSpec,
    phase: Phase,
    started_at: u64,
    started: Instant,
    session_id: Option<String>,
    /// Text of the current model response.
    text: String,
    /// Reasoning of the current model response (saved with it, never shown as reply).
    reasoning: String,
    /// The provider's signature over it (Anthropic), sent back with a tool round.
    reasoning_signature: String,
    /// The current response's provider diagnostic (Responses' terminal, R-G2).
    diagnostic: Option<serde_json::Value>,
    usage: Option<Usage>,
    /// The conversation sent to the model, extended by each tool round.
    request: Option<ModelRequest>,
    /// Usage of the finished model calls of this run.
    prior_usage: Option<Usage>,
    /// Tool calls of the current model response.
    calls: Vec<ToolCall>,
    model_calls: u32,
    tool_calls: usize,
    /// The current response's text has been streamed (it is not a possible silent reply).
    released: bool,
    /// The last tool batch's failure, `(tool, error)`, for the fallback warning (R-F2).
    tool_error: Option<(String, String)>,
    /// Hides serialized tool calls in the current response's text (R-D4).
    xml: XmlFilter,
    /// The current response was asked for right after a tool batch.
    after_tools: bool,
    /// The tool-free finalization pass was used (R-F4).
    finalized: bool,
    /// Model calls repeated because the reply was empty (R-F3).
    empty_retries: u32,
    /// Texts delivered with the `message` tool (R-E3).
    sent: Vec<String>,
    /// Compactions done in this run.
    compactions: u32,
    /// Retries of the current model call (R-B4).
    retries: Retries,
    /// Fallback models run so far (R-B5).
    fallbacks_used: u32,
    /// Visible texts of earlier responses continued after `end_turn: false` (R-G2): part
    /// of the reply.
    continued: Vec<String>,
    /// The recording of such a response is pending; the model is asked again after it.
    continuing: bool,
    /// Responses cut by the output limit recovered from so far (R-G3, R-G4).
    length_recoveries: u32,
    /// Steered messages not recorded yet, and all those taken (R-B3).
    steering: VecDeque<Steered>,
    steered: Vec<String>,
    /// An `exec` of this run was denied (R-F4): the reply says so.
    denied: Option<String>,
}

impl Turn {
    pub fn new(spec: TurnSpec, now: Instant, wall_ms: u64) -> Self {
        let retries = Retries::new(spec.retry_base, spec.retry_max, seed_of(&spec.run_id));
        Self {
            spec,
            phase: Phase::Starting { cancel: None },
            started_at: wall_ms,
            started: now,
            session_id: None,
            text: String::new(),
            reasoning: String::new(),
            reasoning_signature: String::new(),
            diagnostic: None,
            retries,
            fallbacks_used: 0,
            continued: Vec::new(),
            continuing: false,
            length_recoveries: 0,
            usage: None,
            request: None,
            prior_usage: None,
            calls: Vec::new(),
            model_calls: 0,
            tool_calls: 0,
            released: false,
            tool_error: None,
            xml: XmlFilter::default(),
            after_tools: false,
            finalized: false,
            empty_retries: 0,
            sent: Vec::new(),
            compactions: 0,
            steering: VecDeque::new(),
            steered: Vec::new(),
            denied: None,
        }
    }

    pub fn started_at(&self) -> u64 {
        self.started_at
    }

    /// When the driver must feed `Tick` next, if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Streaming {
                run_deadline,
                idle_deadline,
            } => Some(run_deadline.map_or(*idle_deadline, |r| r.min(*idle_deadline))),
            Phase::Compacting {
                run_deadline,
                idle_deadline,
                ..
            } => Some(run_deadline.map_or(*idle_deadline, |r| r.min(*idle_deadline))),
            Phase::Tools { run_deadline, .. }
            | Phase::CompactSaving { run_deadline, .. }
            | Phase::Steering { run_deadline, .. } => *run_deadline,
            // The run's deadline is paused while an operator decides.
            Phase::Approval { until, .. } => Some(*until),
            Phase::Backoff {
                run_deadline,
                until,
            } => Some(run_deadline.map_or(*until, |r| r.min(*until))),
            Phase::Starting { .. } | Phase::Persisting { .. } | Phase::Done => None,
        }
    }

    /// What the turn is doing, for stuck-session diagnostics (R-I1).
    pub fn activity(&self) -> ipc::diagnostics::Activity {
        use ipc::diagnostics::Activity;
        match &self.phase {
            Phase::Streaming { .. } | Phase::Compacting { .. } => Activity::ModelCall,
            Phase::Tools { .. } => Activity::ToolCall,
            Phase::Approval { .. } => Activity::Approval,
            Phase::Backoff { .. } => Activity::Backoff,
            Phase::Persisting { .. } | Phase::Done => Activity::Finishing,
            Phase::Starting { .. } | Phase::CompactSaving { .. } | Phase::Steering { .. } => {
                Activity::Run
            }
        }
    }

    /// The lifecycle `finishing` event: model work is over, the outcome is being recorded.
    pub fn finishing(&self) -> EventBody {
        EventBody::Lifecycle(self.lifecycle(LPhase::Finishing))
    }

    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    fn lifecycle(&self, phase: LPhase) -> Lifecycle {
        Lifecycle {
            phase,
            started_at: Some(self.started_at),
            ended_at: None,
            error: None,
            stop_reason: None,
            aborted: None,
            session_id: None,
            session_key: None,
        }
    }

    fn start_event(&self) -> Action {
        Action::Emit(EventBody::Lifecycle(Lifecycle {
            session_id: self.session_id.clone(),
            session_key: Some(self.spec.session_key.clone()),
            ..self.lifecycle(LPhase::Start)
        }))
    }

    pub fn handle(&mut self, input: Input, now: Instant, wall_ms: u64) -> Vec<Action> {
        if let Input::Steer(s) = input {
            // Recorded at the next boundary (R-B3).
            self.take_steered(s);
            return Vec::new();
        }
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        let (next, actions) = self.step(phase, input, now, wall_ms);
        self.phase = next;
        actions
    }

    fn step(
        &mut self,
        phase: Phase,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match (phase, input) {
            (
                Phase::Starting { cancel },
                Input::Begun {
                    session_id,
                    request,
                },
            ) => {
                self.session_id = Some(session_id);
                let start = self.start_event();
                if let Some(reason) = cancel {
                    let (p, mut a) = self.end(
                        RunStatus::Aborted,
                        Some(abort_text(reason)),
                        Some(reason.as_str().into()),
                        wall_ms,
                    );
                    a.insert(0, start);
                    return (p, a);
                }
                match request {
                    Ok(Prepared::Call(req)) => {
                        if let Some(c) = &req.choice {
                            self.spec.provider.clone_from(&c.provider);
                            self.spec.model.clone_from(&c.model);
                            self.spec.context =
                                ContextBudget::new(c.context_window, &self.spec.compaction);
                        }
                        let run_deadline = self.spec.timeout.map(|t| self.started + t);
                        let (phase, mut a) = self.next_call(req, run_deadline, now, false);
                        a.insert(0, start);
                        (phase, a)
                    }
                    Ok(Prepared::Claimed(reply)) => {
                        // Streamed and shaped like a model's reply (a claimed `NO_REPLY`
                        // stays silent), without a model call.
                        let mut a = vec![start];
                        a.extend(self.accept_text(reply.unwrap_or_default()));
                        a.extend(self.flush_held());
                        let (p, rest) = self.end(RunStatus::Ok, None, Some("stop".into()), wall_ms);
                        a.extend(rest);
                        (p, a)
                    }
                    Err(e) => {
                        let (p, mut a) = self.end(
                            RunStatus::Error,
                            Some(format!("cannot prepare the run: {e}")),
                            None,
                            wall_ms,
                        );
                        a.insert(0, start);
                        (p, a)
                    }
                }
            }
            (Phase::Starting { .. }, Input::BeginFailed(e)) => {
                // Nothing was recorded in the agent db; report and finish.
                let error = format!("cannot start the run: {e}");
                let terminal = self.terminal(RunStatus::Error, Some(error.clone()), None, wall_ms);
                let actions = vec![
                    self.start_event(),
                    Action::Emit(EventBody::Lifecycle(Lifecycle {
                        ended_at: Some(wall_ms),
                        error: Some(error),
                        ..self.lifecycle(LPhase::Error)
                    })),
                    Action::Finish(Box::new(terminal)),
                ];
                (Phase::Done, actions)
            }
            (Phase::Starting { .. }, Input::Cancel(reason)) => (
                Phase::Starting {
                    cancel: Some(reason),
                },
                vec![],
            ),
            (
                Phase::Streaming {
                    run_deadline,
                    idle_deadline,
                },
                Input::Model(ev),
            ) => match ev {
                LlmEvent::Delta(d) => {
                    if d.is_empty() {
                        return (
                            Phase::Streaming {
                                run_deadline,
                                idle_deadline,
                            },
                            vec![],
                        );
                    }
                    let phase = Phase::Streaming {
                        run_deadline,
                        idle_deadline: now + self.spec.idle_timeout,
                    };
                    // Serialized tool calls never reach the reply (R-D4).
                    let visible = self.xml.push(&d);
                    (phase, self.accept_text(visible))
                }
                LlmEvent::Usage(u) => {
                    // Only advancing counts are progress (R-G5).
                    let advanced = self.usage.is_none_or(|old| {
                        u.input > old.input || u.output > old.output || u.total > old.total
                    });
                    self.usage = Some(u);
                    let idle = if advanced {
                        now + self.spec.idle_timeout
                    } else {
                        idle_deadline
                    };
                    (
                        Phase::Streaming {
                            run_deadline,
                            idle_deadline: idle,
                        },
                        vec![],
                    )
                }
                // Reasoning and a tool call's arguments streaming are output too: they keep
                // the attempt alive (R-B4, R-G5), though nothing of them is shown as reply.
                LlmEvent::Reasoning(r) => {
                    self.reasoning.push_str(&r);
                    let shown = (self.spec.reasoning == ReasoningMode::Stream && !r.is_empty())
                        .then_some(Action::Emit(EventBody::Thinking { delta: r }));
                    (
                        Phase::Streaming {
                            run_deadline,
                            idle_deadline: now + self.spec.idle_timeout,
                        },
                        shown.into_iter().collect(),
                    )
                }
                LlmEvent::ReasoningSignature(sig) => {
                    self.reasoning_signature.push_str(&sig);
                    (
                        Phase::Streaming {
                            run_deadline,
                            idle_deadline,
                        },
                        vec![],
                    )
                }
                LlmEvent::ToolCallStart { .. } | LlmEvent::ToolCallDelta { .. } => (
                    Phase::Streaming {
                        run_deadline,
                        idle_deadline: now + self.spec.idle_timeout,
                    },
                    vec![],
                ),
                LlmEvent::ToolCalls(calls) => {
                    self.calls.extend(calls);
                    (
                        Phase::Streaming {
                            run_deadline,
                            idle_deadline: now + self.spec.idle_timeout,
                        },
                        vec![],
                    )
                }
                LlmEvent::Done(Terminal {
                    finish_reason,
                    responses,
                }) => {
                    self.retries.succeeded();
                    // Responses `end_turn: false`: the provider wants another response, even
                    // after one of text only (R-G2). Not after an output limit or a refusal.
                    let more = responses
                        .as_ref()
                        .is_some_and(|r| r.end_turn == crate::llm::EndTurn::No)
                        && !matches!(finish_reason.as_deref(), Some("length" | "content_filter"));
                    self.diagnostic = responses.map(|r| r.diagnostic(finish_reason.as_deref()));
                    let tail = self.xml.finish();
                    // `reasoning: on`: the response's reasoning, whole, once it is complete.
                    let mut shown = Vec::new();
                    if self.spec.reasoning == ReasoningMode::On && !self.reasoning.is_empty() {
                        shown.push(Action::Emit(EventBody::Thinking {
                            delta: self.reasoning.clone(),
                        }));
                    }
                    let mut held = shown;
                    held.extend(self.accept_text(tail));
                    held.extend(self.flush_held());
                    if finish_reason.as_deref() == Some("length") {
                        if let Some(next) = self.after_length_cut(run_deadline, now, wall_ms) {
                            let (p, mut a) = next;
                            a.splice(0..0, held);
                            return (p, a);
                        }
                    }
                    if self.calls.is_empty() {
                        // A steered message waits: this response is recorded and the model
                        // answers the message in the same run (R-B3).
                        if (more || self.is_steered()) && self.model_calls < MAX_MODEL_CALLS {
                            let (p, mut a) = self.continue_response(run_deadline, wall_ms);
                            a.splice(0..0, held);
                            return (p, a);
                        }
                        if let Some(again) = self.retry_for_reply(run_deadline, now) {
                            return again;
                        }
                        if !self.visible()
                            && self.tool_error.is_none()
                            && self.sent.is_empty()
                            && self.continued.is_empty()
                        {
                            // Retries exhausted: report it, and leave a notice in history (R-F3).
                            self.text = reply::TRY_AGAIN_NOTICE.into();
                            return self.end(
                                RunStatus::Error,
                                Some(format!(
                                    "the model returned no visible reply ({} attempts)",
                                    self.empty_retries + 1
                                )),
                                Some("error".into()),
                                wall_ms,
                            );
                        }
                        if let Some(warning) = self.warning() {
                            // After a visible answer (a denied exec, R-F4), on its own line.
                            let delta = if self.visible() {
                                format!("\n\n{warning}")
                            } else {
                                warning
                            };
                            held.push(Action::Emit(EventBody::Assistant { delta }));
                        }
                        let stop = finish_reason.unwrap_or_else(|| "stop".into());
                        let (p, mut a) = self.end(RunStatus::Ok, None, Some(stop), wall_ms);
                        a.splice(0..0, held);
                        return (p, a);
                    }
                    if self.tool_calls + self.calls.len() > MAX_TOOL_CALLS {
                        return self.end(
                            RunStatus::Error,
                            Some(format!(
                                "tool loop stopped: the run would exceed {MAX_TOOL_CALLS} tool calls"
                            )),
                            Some("error".into()),
                            wall_ms,
                        );
                    }
                    if self.model_calls >= MAX_MODEL_CALLS {
                        return self.end(
                            RunStatus::Error,
                            Some(format!(
                                "tool loop stopped: the model still wanted tools after {MAX_MODEL_CALLS} model calls"
                            )),
                            Some("error".into()),
                            wall_ms,
                        );
                    }
                    let (p, mut a) = self.start_tools(run_deadline, wall_ms);
                    a.splice(0..0, held);
                    (p, a)
                }
            },
            (Phase::Streaming { run_deadline, .. }, Input::ModelFailed(e)) => {
                // A rate limit or a transient failure before any visible output: the same
                // request again after a backoff, the lifecycle left open (R-B4).
                let produced = !self.text.is_empty() || !self.calls.is_empty();
                if let Some(r) = self.retries.next(&e, produced, now) {
                    let until = now + r.delay;
                    if run_deadline.is_none_or(|d| until < d) {
                        self.reasoning.clear();
                        self.xml = XmlFilter::default();
                        let status = EventBody::RunStatus {
                            phase: "retrying".into(),
                            attempt: r.attempt,
                            max_attempts: r.max_attempts,
                            reason: r.reason.into(),
                        };
                        return (
                            Phase::Backoff {
                                run_deadline,
                                until,
                            },
                            vec![Action::AbortModel, Action::Emit(status)],
                        );
                    }
                }
                // Retries spent on a failure worth them: the next model, if there is one.
                if let Some(why) = super::retry::reason(&e, produced) {
                    if let Some(next) = self.fall_back(run_deadline, now, why) {
                        return next;
                    }
                }
                // The prompt did not fit the model's context: compact, then retry (R-G6).
                if e.is_context_overflow() && self.text.is_empty() && self.calls.is_empty() {
                    if let Some(req) = self.request.take() {
                        let after_tools = self.after_tools;
                        // Not a new attempt: the retry below takes this call's place.
                        self.model_calls = self.model_calls.saturating_sub(1);
                        match self.compact_first(
                            req,
                            run_deadline,
                            now,
                            Some(e.to_string()),
                            after_tools,
                        ) {
                            Ok(next) => return next,
                            Err(req) => self.request = Some(req),
                        }
                    }
                }
                self.end_stopping(
                    Action::AbortModel,
                    RunStatus::Error,
                    format!("model request failed: {e}"),
                    "error",
                    wall_ms,
                )
            }
            // A model call (answer or summary) past the run deadline, or cancelled.
            (
                Phase::Streaming { run_deadline, .. } | Phase::Compacting { run_deadline, .. },
                Input::Tick,
            ) if run_deadline.is_some_and(|d| now >= d) => {
                self.time_out(Action::AbortModel, wall_ms)
            }
            (Phase::Streaming { .. } | Phase::Compacting { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortModel, reason, wall_ms)
            }
            (Phase::Backoff { run_deadline, .. }, Input::Tick)
                if run_deadline.is_some_and(|d| now >= d) =>
            {
                self.time_out(Action::AbortModel, wall_ms)
            }
            (
                Phase::Backoff {
                    run_deadline,
                    until,
                },
                Input::Tick,
            ) if now >= until => match self.request.take() {
                Some(req) => {
                    // The same call again: not one more of the run's model calls.
                    self.model_calls = self.model_calls.saturating_sub(1);
                    let after_tools = self.after_tools;
                    let (phase, call) = self.call_model(req, run_deadline, now);
                    self.after_tools = after_tools;
                    (phase, vec![call])
                }
                None => self.end(
                    RunStatus::Error,
                    Some("the model request to retry was lost".into()),
                    Some("error".into()),
                    wall_ms,
                ),
            },
            (Phase::Backoff { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortModel, reason, wall_ms)
            }
            (
                Phase::Streaming {
                    idle_deadline,
                    run_deadline,
                },
                Input::Tick,
            ) if now >= idle_deadline => {
                // The attempt passed its deadline: the next model, with a fresh budget.
                if let Some(next) = self.fall_back(run_deadline, now, "timeout") {
                    return next;
                }
                let ms = self.spec.idle_timeout.as_millis();
                self.end_stopping(
                    Action::AbortModel,
                    RunStatus::Error,
                    format!("model idle timeout: the provider sent nothing for {ms} ms"),
                    "error",
                    wall_ms,
                )
            }
            (
                Phase::Tools {
                    run_deadline,
                    mut queue,
                    running: None,
                },
                Input::Appended(Ok(seq)),
            ) => {
                // Tag the message just recorded with its transcript position.
                if let Some(m) = self.request.as_mut().and_then(|r| r.messages.last_mut()) {
                    m.seq.get_or_insert(seq);
                }
                match queue.pop_front() {
                    Some(call) if self.is_steered() => {
                        self.skip_call(call, queue, run_deadline, wall_ms)
                    }
                    Some(call) => {
                        let start = Action::Emit(EventBody::Tool {
                            phase: ipc::control::ToolPhase::Start,
                            tool_call_id: call.id.clone(),
                            name: call.name.clone(),
                            args_json: Some(clip(&call.arguments)),
                            result_json: None,
                            is_error: None,
                        });
                        let run = Action::RunTool(call.clone());
                        (
                            Phase::Tools {
                                run_deadline,
                                queue,
                                running: Some(call),
                            },
                            vec![start, run],
                        )
                    }
                    None => {
                        let Some(req) = self.request.take() else {
                            return self.end(
                                RunStatus::Error,
                                Some("internal error: the tool round lost its request".into()),
                                Some("error".into()),
                                wall_ms,
                            );
                        };
                        // After a continued response, not a tool batch: no finalization pass.
                        let after_tools = !std::mem::take(&mut self.continuing);
                        if self.is_steered() {
                            self.request = Some(req);
                            return self.steer_next(run_deadline, now, wall_ms);
                        }
                        self.next_call(req, run_deadline, now, after_tools)
                    }
                }
            }
            (Phase::Tools { .. }, Input::Appended(Err(e))) => {
                let error = match e {
                    StoreError::Fenced { .. } => format!("run superseded: {e}"),
                    other => format!("cannot record the tool call: {other}"),
                };
                self.end(RunStatus::Error, Some(error), Some("error".into()), wall_ms)
            }
            (
                Phase::Tools {
                    run_deadline,
                    queue,
                    running: Some(call),
                },
                Input::ToolDone(outcome),
            ) => {
                let result = Action::Emit(EventBody::Tool {
                    phase: ipc::control::ToolPhase::Result,
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    args_json: None,
                    result_json: Some(
                        serde_json::Value::String(clip(&outcome.content)).to_string(),
                    ),
                    is_error: Some(outcome.is_error),
                });
                if outcome.is_error {
                    self.tool_error = Some((call.name.clone(), outcome.content.clone()));
                }
                // A sent message reaches the user now, on the assistant stream.
                let mut delivered = Vec::new();
                if call.name == crate::tools::MESSAGE_TOOL && !outcome.is_error {
                    if let Some(text) = crate::tools::message_text(&call.arguments) {
                        delivered.push(Action::Emit(EventBody::Assistant {
                            delta: format!("{text}\n\n"),
                        }));
                        self.sent.push(text);
                    }
                }
                if let Some(req) = self.request.as_mut() {
                    req.messages.push(ChatMessage {
                        tool_call_id: Some(call.id.clone()),
                        ..ChatMessage::text("tool", outcome.content.clone())
                    });
                }
                let message = NewMessage {
                    tool_result: Some((call.id, call.name, outcome.is_error)),
                    ..NewMessage::text(Role::ToolResult, outcome.content, wall_ms)
                };
                delivered.push(result);
                delivered.push(Action::Append(Box::new(message)));
                (
                    Phase::Tools {
                        run_deadline,
                        queue,
                        running: None,
                    },
                    delivered,
                )
            }
            (
                Phase::Tools {
                    run_deadline,
                    queue,
                    running: Some(call),
                },
                Input::ToolUpdate(text),
            ) => {
                let update = Action::Emit(EventBody::Tool {
                    phase: ipc::control::ToolPhase::Update,
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    args_json: None,
                    result_json: Some(serde_json::Value::String(clip(&text)).to_string()),
                    is_error: None,
                });
                (
                    Phase::Tools {
                        run_deadline,
                        queue,
                        running: Some(call),
                    },
                    vec![update],
                )
            }
            (Phase::Tools { run_deadline, .. }, Input::Tick)
                if run_deadline.is_some_and(|d| now >= d) =>
            {
                self.time_out(Action::AbortTool, wall_ms)
            }
            (Phase::Tools { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortTool, reason, wall_ms)
            }
            (Phase::Persisting { mut terminal }, Input::Persisted(res)) => {
                if let Err(e) = res {
                    terminal.status = RunStatus::Error;
                    terminal.error = Some(match e {
                        StoreError::Fenced { .. } => format!("run superseded: {e}"),
                        other => format!("cannot record the run: {other}"),
                    });
                    terminal.payloads.clear();
                }
                let lifecycle = match terminal.status {
                    RunStatus::Ok => Lifecycle {
                        ended_at: Some(terminal.ended_at),
                        stop_reason: terminal.stop_reason.clone(),
                        ..self.lifecycle(LPhase::End)
                    },
                    RunStatus::Error
                    | RunStatus::Timeout
                    | RunStatus::Aborted
                    | RunStatus::Unknown => Lifecycle {
                        ended_at: Some(terminal.ended_at),
                        error: terminal.error.clone(),
                        stop_reason: terminal.stop_reason.clone(),
                        aborted: matches!(terminal.status, RunStatus::Aborted).then_some(true),
                        ..self.lifecycle(LPhase::Error)
                    },
                };
                (
                    Phase::Done,
                    vec![
                        Action::Emit(EventBody::Lifecycle(lifecycle)),
                        Action::Finish(terminal),
                    ],
                )
            }
            // Late or irrelevant inputs: model data after the turn left streaming, ticks while
            // not streaming, a second cancel. They change nothing (R-D3).
            (
                Phase::Compacting {
                    run_deadline,
                    mut job,
                    ..
                },
                Input::Model(ev),
            ) => {
                match ev {
                    LlmEvent::Delta(d) => job.summary.push_str(&d),
                    LlmEvent::Usage(u) => job.usage = Some(u),
                    LlmEvent::ToolCalls(_)
                    | LlmEvent::Reasoning(_)
                    | LlmEvent::ReasoningSignature(_)
                    | LlmEvent::ToolCallStart { .. }
                    | LlmEvent::ToolCallDelta { .. } => {}
                    LlmEvent::Done(_) => return self.summarized(job, run_deadline, now, wall_ms),
                }
                let idle_deadline = now + self.spec.idle_timeout;
                (
                    Phase::Compacting {
                        run_deadline,
                        idle_deadline,
                        job,
                    },
                    vec![],
                )
            }
            (
                Phase::Compacting {
                    run_deadline, job, ..
                },
                Input::ModelFailed(e),
            ) => self.compaction_failed(job, run_deadline, now, e.to_string(), wall_ms),
            (
                Phase::Compacting {
                    run_deadline,
                    idle_deadline,
                    job,
                },
                Input::Tick,
            ) if now >= idle_deadline => {
                let ms = self.spec.idle_timeout.as_millis();
                let (p, mut a) = self.compaction_failed(
                    job,
                    run_deadline,
                    now,
                    format!("the provider sent nothing for {ms} ms"),
                    wall_ms,
                );
                a.insert(0, Action::AbortModel);
                (p, a)
            }
            (
                Phase::CompactSaving {
                    run_deadline,
                    mut job,
                },
                Input::Appended(Ok(_)),
            ) => {
                let Some(next) = job.next.take() else {
                    return self.end(
                        RunStatus::Error,
                        Some("internal error: the compaction lost its request".into()),
                        Some("error".into()),
                        wall_ms,
                    );
                };
                let end = Action::Emit(EventBody::Compaction {
                    phase: ipc::control::CompactionPhase::End,
                    completed: Some(true),
                    will_retry: job.overflow.as_ref().map(|_| true),
                    reason: None,
                    messages: Some(job.cut as u64 - 1),
                    tokens_before: Some(job.tokens_before),
                    tokens_after: Some(compaction::estimate(&next)),
                });
                let (phase, call) = self.call_model(next, run_deadline, now);
                self.after_tools = job.after_tools;
                (phase, vec![end, call])
            }
            (Phase::CompactSaving { .. }, Input::Appended(Err(e))) => {
                let error = match e {
                    StoreError::Fenced { .. } => format!("run superseded: {e}"),
                    other => format!("cannot record the compaction: {other}"),
                };
                self.end(RunStatus::Error, Some(error), Some("error".into()), wall_ms)
            }
            (Phase::CompactSaving { run_deadline, .. }, Input::Tick)
                if run_deadline.is_some_and(|d| now >= d) =>
            {
                self.time_out(Action::AbortModel, wall_ms)
            }
            (Phase::CompactSaving { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortModel, reason, wall_ms)
            }
            (Phase::Steering { run_deadline }, Input::Appended(Ok(seq))) => {
                if let Some(m) = self.request.as_mut().and_then(|r| r.messages.last_mut()) {
                    m.seq.get_or_insert(seq);
                }
                self.steer_next(run_deadline, now, wall_ms)
            }
            (Phase::Steering { .. }, Input::Appended(Err(e))) => {
                let error = match e {
                    StoreError::Fenced { .. } => format!("run superseded: {e}"),
                    other => format!("cannot record the steered message: {other}"),
                };
                self.end(RunStatus::Error, Some(error), Some("error".into()), wall_ms)
            }
            (Phase::Steering { run_deadline, .. }, Input::Tick)
                if run_deadline.is_some_and(|d| now >= d) =>
            {
                self.time_out(Action::AbortTool, wall_ms)
            }
            (Phase::Steering { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortTool, reason, wall_ms)
            }
            (
                Phase::Tools {
                    run_deadline,
                    queue,
                    running: Some(call),
                },
                Input::ApprovalPending { id },
            ) => self.await_approval(run_deadline, queue, call, id, now),
            (
                Phase::Approval {
                    run_left,
                    id,
                    queue,
                    call,
                    ..
                },
                Input::ApprovalDecided { id: decided, allow },
            ) if decided == id => {
                let verdict = (id.as_str(), allow, "user-denied");
                self.decided(run_left, queue, call, verdict, now, wall_ms)
            }
            (
                Phase::Approval {
                    run_left,
                    until,
                    id,
                    queue,
                    call,
                },
                Input::Tick,
            ) if now >= until => {
                let verdict = (id.as_str(), false, "approval-timeout");
                let (p, mut a) = self.decided(run_left, queue, call, verdict, now, wall_ms);
                a.insert(0, Action::ApprovalExpired { id });
                (p, a)
            }
            (Phase::Approval { .. }, Input::Cancel(reason)) => {
                self.abort(Action::AbortTool, reason, wall_ms)
            }
            (phase, _) => (phase, vec![]),
        }
    }

    /// Ends the run after stopping what is in progress (`stop`: abort the model or the tool).
    fn end_stopping(
        &mut self,
        stop: Action,
        status: RunStatus,
        error: String,
        stop_reason: &str,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let (p, mut a) = self.end(status, Some(error), Some(stop_reason.into()), wall_ms);
        a.insert(0, stop);
        (p, a)
    }

    /// The run deadline passed (R-B4).
    fn time_out(&mut self, stop: Action, wall_ms: u64) -> (Phase, Vec<Action>) {
        let secs = self.spec.timeout.map_or(0, |t| t.as_secs());
        let error = format!("run timed out after {secs} s");
        self.end_stopping(stop, RunStatus::Timeout, error, "timeout", wall_ms)
    }

    /// Cancelled (RPC, drain, restart, stuck-session recovery).
    fn abort(&mut self, stop: Action, reason: StopReason, wall_ms: u64) -> (Phase, Vec<Action>) {
        let error = abort_text(reason);
        self.end_stopping(stop, RunStatus::Aborted, error, reason.as_str(), wall_ms)
    }

    /// The current model failed for good: runs the same request on the next fallback model
    /// (R-B5) with a fresh retry budget, once the failed attempt is dropped. `None` when
    /// there is none left, or the attempt already showed output (it cannot be taken back).
    fn fall_back(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        why: &str,
    ) -> Option<(Phase, Vec<Action>)> {
        if !self.text.is_empty() || !self.calls.is_empty() {
            return None;
        }
        let next = self
            .spec
            .fallbacks
            .get(self.fallbacks_used as usize)?
            .clone();
        let mut req = self.request.take()?;
        self.fallbacks_used += 1;
        self.spec.provider.clone_from(&next.provider);
        self.spec.model.clone_from(&next.model);
        self.spec.context = ContextBudget::new(next.context_window, &self.spec.compaction);
        req.choice = Some(next);
        self.retries = Retries::new(
            self.spec.retry_base,
            self.spec.retry_max,
            seed_of(&self.spec.run_id) ^ u64::from(self.fallbacks_used),
        );
        self.model_calls = self.model_calls.saturating_sub(1);
        let after_tools = self.after_tools;
        let (phase, call) = self.call_model(req, run_deadline, now);
        self.after_tools = after_tools;
        let status = EventBody::RunStatus {
            phase: "fallback".into(),
            attempt: self.fallbacks_used + 1,
            max_attempts: self.spec.fallbacks.len() as u32 + 1,
            reason: why.into(),
        };
        Some((phase, vec![Action::AbortModel, Action::Emit(status), call]))
    }

    /// Starts a model call on `req`.
    fn call_model(
        &mut self,
        req: ModelRequest,
        run_deadline: Option<Instant>,
        now: Instant,
    ) -> (Phase, Action) {
        self.model_calls += 1;
        // Set again by the caller when this call follows a tool batch.
        self.after_tools = false;
        self.prior_usage = self.total_usage();
        self.usage = None;
        self.released = false;
        self.xml = XmlFilter::default();
        self.text.clear();
        self.reasoning.clear();
        self.reasoning_signature.clear();
        self.diagnostic = None;
        self.calls.clear();
        self.request = Some(req.clone());
        let phase = Phase::Streaming {
            run_deadline,
            idle_deadline: now + self.spec.idle_timeout,
        };
        (phase, Action::CallModel(req))
    }

    /// Adds visible text of the current response; returns the event to stream, if any. A
    /// possible silent reply is held back until it is decided (R-F1).
    fn accept_text(&mut self, d: String) -> Vec<Action> {
        if d.is_empty() {
            return vec![];
        }
        self.text.push_str(&d);
        if self.released {
            vec![Action::Emit(EventBody::Assistant { delta: d })]
        } else if !reply::has_visible_text(&self.text) || reply::may_become_silent(&self.text) {
            vec![]
        } else {
            self.released = true;
            vec![Action::Emit(EventBody::Assistant {
                delta: self.text.clone(),
            })]
        }
    }

    /// Calls the model with `req`, compacting the context first when it is over the model's
    /// budget (R-B7).
    fn next_call(
        &mut self,
        req: ModelRequest,
        run_deadline: Option<Instant>,
        now: Instant,
        after_tools: bool,
    ) -> (Phase, Vec<Action>) {
        let req = if compaction::estimate(&req) > self.spec.context.limit {
            match self.compact_first(req, run_deadline, now, None, after_tools) {
                Ok(next) => return next,
                Err(req) => req,
            }
        } else {
            req
        };
        let (phase, call) = self.call_model(req, run_deadline, now);
        self.after_tools = after_tools;
        (phase, vec![call])
    }

    /// Starts a compaction of `req`: the older messages go to the model for a summary. `Err`
    /// gives the request back when there is nothing to compact (or this run already did
    /// [`MAX_COMPACTIONS_PER_RUN`]). `overflow`: the provider refused `req` as too large.
    fn compact_first(
        &mut self,
        req: ModelRequest,
        run_deadline: Option<Instant>,
        now: Instant,
        overflow: Option<String>,
        after_tools: bool,
    ) -> Result<(Phase, Vec<Action>), ModelRequest> {
        if self.compactions >= MAX_COMPACTIONS_PER_RUN {
            return Err(req);
        }
        let Some(cut) = compaction::cut(&req.messages, self.spec.context.keep_recent) else {
            return Err(req);
        };
        self.compactions += 1;
        let tokens_before = compaction::estimate(&req);
        let max_chars = (self.spec.context.limit as usize)
            .saturating_mul(4)
            .saturating_sub(2_000)
            .max(4_000);
        let mut summarize = prompt::compaction_request(&req.messages[1..cut], max_chars);
        summarize.choice.clone_from(&req.choice);
        let start = Action::Emit(EventBody::Compaction {
            phase: ipc::control::CompactionPhase::Start,
            completed: None,
            will_retry: overflow.as_ref().map(|_| true),
            reason: Some(
                if overflow.is_some() {
                    "overflow"
                } else {
                    "threshold"
                }
                .into(),
            ),
            messages: Some(cut as u64 - 1),
            tokens_before: Some(tokens_before),
            tokens_after: None,
        });
        let job = Box::new(CompactJob {
            pending: req,
            cut,
            summary: String::new(),
            usage: None,
            reason: if overflow.is_some() {
                "overflow"
            } else {
                "threshold"
            },
            overflow,
            tokens_before,
            next: None,
            after_tools,
        });
        Ok((
            Phase::Compacting {
                run_deadline,
                idle_deadline: now + self.spec.idle_timeout,
                job,
            },
            vec![start, Action::CallModel(summarize)],
        ))
    }

    /// The summary is in: record it (fenced), then continue with the compacted request.
    fn summarized(
        &mut self,
        mut job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // The summary call's usage counts towards the run's.
        if let Some(u) = job.usage.take() {
            let usage = self.usage.take();
            self.usage = Some(u);
            self.prior_usage = self.total_usage();
            self.usage = usage;
        }
        let summary = job.summary.trim().to_owned();
        if !reply::has_visible_text(&summary) {
            return self.compaction_failed(
                job,
                run_deadline,
                now,
                "the model returned an empty summary".into(),
                wall_ms,
            );
        }
        let Some(kept_from_seq) = job.pending.messages.get(job.cut).and_then(|m| m.seq) else {
            return self.compaction_failed(
                job,
                run_deadline,
                now,
                "internal error: the kept messages are not recorded".into(),
                wall_ms,
            );
        };
        let mut messages = Vec::with_capacity(job.pending.messages.len() - job.cut + 2);
        messages.push(job.pending.messages[0].clone());
        messages.push(prompt::summary_message(&summary));
        messages.extend(job.pending.messages[job.cut..].iter().cloned());
        let next = ModelRequest {
            messages,
            tools: job.pending.tools.clone(),
            choice: job.pending.choice.clone(),
            thinking: job.pending.thinking,
        };
        let record = Compaction {
            summary,
            kept_from_seq,
            tokens_before: job.tokens_before,
            tokens_after: compaction::estimate(&next),
            messages: job.cut as u64 - 1,
            created_at: wall_ms,
        };
        job.next = Some(next);
        (
            Phase::CompactSaving { run_deadline, job },
            vec![Action::Compact(Box::new(record))],
        )
    }

    /// The compaction did not happen: say so, then go on with the full request, unless the
    /// provider already refused it as too large (then the run fails with both reasons).
    fn compaction_failed(
        &mut self,
        job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        why: String,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let end = Action::Emit(EventBody::Compaction {
            phase: ipc::control::CompactionPhase::End,
            completed: Some(false),
            will_retry: Some(false),
            reason: Some(clip(&why)),
            messages: None,
            tokens_before: Some(job.tokens_before),
            tokens_after: None,
        });
        if let Some(overflow) = job.overflow {
            let (p, mut a) = self.end(
                RunStatus::Error,
                Some(format!(
                    "model request failed: {overflow}; compacting the context failed: {why}"
                )),
                Some("error".into()),
                wall_ms,
            );
            a.insert(0, end);
            return (p, a);
        }
        tracing::warn!(reason = job.reason, error = %why, "Compaction failed; calling the model with the full context.");
        let (phase, call) = self.call_model(job.pending, run_deadline, now);
        self.after_tools = job.after_tools;
        (phase, vec![end, call])
    }

    /// Text held back as a possible silent reply that turned out not to be one, as an
    /// event (the response is complete, so nothing more can make it silent).
    fn flush_held(&mut self) -> Vec<Action> {
        if self.released || !reply::has_visible_text(&self.text) || reply::is_silent(&self.text) {
            return vec![];
        }
        self.released = true;
        vec![Action::Emit(EventBody::Assistant {
            delta: self.text.clone(),
        })]
    }

    /// Whether the current response says something a user can see (not only whitespace or
    /// zero-width characters).
    fn visible(&self) -> bool {
        reply::has_visible_text(&self.text) && !reply::is_silent(&self.text)
    }

    /// A required reply that came back empty gets another model call (R-F3, R-F4): after a
    /// settled tool batch, one tool-free finalization pass over the results; otherwise a
    /// plain retry, up to [`MAX_EMPTY_RETRIES`]. A model's `NO_REPLY` is empty output, not a
    /// waiver of the reply (R-F1): every `agent` / `chat.send` run is a direct request.
    fn retry_for_reply(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
    ) -> Option<(Phase, Vec<Action>)> {
        if self.visible()
            || !self.sent.is_empty()
            || !self.continued.is_empty()
            || self.model_calls >= MAX_MODEL_CALLS
        {
            return None;
        }
        let mut req = self.request.take()?;
        if self.after_tools && !self.finalized {
            self.finalized = true;
            req.tools.clear();
        } else if self.empty_retries < MAX_EMPTY_RETRIES && self.tool_error.is_none() {
            self.empty_retries += 1;
        } else {
            self.request = Some(req);
            return None;
        }
        let (phase, call) = self.call_model(req, run_deadline, now);
        Some((phase, vec![call]))
    }

    /// The fallback tool-error warning, when the last tool batch failed and the final
    /// response says nothing visible (R-F2).
    fn warning(&self) -> Option<String> {
        if !self.sent.is_empty() {
            // A reply was delivered by the `message` tool.
            return None;
        }
        // A denied exec fails the automation even when the model then answers (R-F4).
        if let Some(why) = &self.denied {
            return Some(reply::tool_error_warning("exec", why));
        }
        match &self.tool_error {
            Some((tool, error)) if !self.visible() => Some(reply::tool_error_warning(tool, error)),
            _ => None,
        }
    }

    /// Usage summed over the run's model calls.
    fn total_usage(&self) -> Option<Usage> {
        match (self.prior_usage, self.usage) {
            (Some(a), Some(b)) => Some(Usage {
                input: a.input + b.input,
                output: a.output + b.output,
                cache_read: a.cache_read + b.cache_read,
                cache_write: a.cache_write + b.cache_write,
                total: a.total + b.total,
            }),
            (a, b) => a.or(b),
        }
    }

    /// The response hit the model's output limit. Inside a tool call (R-G3): the calls that
    /// were complete run, and the model goes on from their recorded results; the call that
    /// was cut (its arguments not whole JSON) never runs. With nothing at all (R-G4): the
    /// same transcript goes again, tools and all. Both within [`MAX_LENGTH_RECOVERIES`] per
    /// run; `None` leaves the response to end as it is (a cut but visible reply).
    fn after_length_cut(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> Option<(Phase, Vec<Action>)> {
        let whole = |c: &ToolCall| {
            serde_json::from_str::<serde_json::Value>(&c.arguments).is_ok_and(|v| v.is_object())
        };
        let cut = self.calls.iter().any(|c| !whole(c));
        let empty = self.calls.is_empty() && !self.visible() && self.sent.is_empty();
        if !cut && !empty {
            return None;
        }
        if self.length_recoveries >= MAX_LENGTH_RECOVERIES || self.model_calls >= MAX_MODEL_CALLS {
            return Some(self.end(
                RunStatus::Error,
                Some(format!(
                    "the model kept hitting its output limit ({} recoveries)",
                    self.length_recoveries
                )),
                Some("length".into()),
                wall_ms,
            ));
        }
        self.length_recoveries += 1;
        self.calls.retain(whole);
        if !self.calls.is_empty() {
            return Some(self.start_tools(run_deadline, wall_ms));
        }
        // Text before the cut call was shown: it is recorded, and the model goes on after it.
        if self.visible() {
            return Some(self.continue_response(run_deadline, wall_ms));
        }
        let req = self.request.take()?;
        let after_tools = self.after_tools;
        let (phase, call) = self.call_model(req, run_deadline, now);
        self.after_tools = after_tools;
        Some((phase, vec![call]))
    }

    /// The response ended with `end_turn: false` (R-G2): record it (with its diagnostic),
    /// then ask the model for the next response of the same turn.
    fn continue_response(
        &mut self,
        run_deadline: Option<Instant>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let text = std::mem::take(&mut self.text);
        if let Some(req) = self.request.as_mut() {
            req.messages
                .push(ChatMessage::text("assistant", text.clone()));
        }
        if reply::has_visible_text(&text) && !reply::is_silent(&text) {
            self.continued.push(text.clone());
        }
        self.continuing = true;
        let message = NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.usage,
            stop_reason: Some("stop".into()),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            diagnostics: self.diagnostic.take().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, text, wall_ms)
        };
        (
            Phase::Tools {
                run_deadline,
                queue: VecDeque::new(),
                running: None,
            },
            vec![Action::Append(Box::new(message))],
        )
    }

    /// The response asked for tools: record it, then run the calls in order.
    fn start_tools(&mut self, run_deadline: Option<Instant>, wall_ms: u64) -> (Phase, Vec<Action>) {
        let calls = std::mem::take(&mut self.calls);
        let text = std::mem::take(&mut self.text);
        self.tool_calls += calls.len();
        self.tool_error = None;
        let signed = (!self.reasoning_signature.is_empty()).then(|| crate::llm::SignedThinking {
            text: self.reasoning.clone(),
            signature: std::mem::take(&mut self.reasoning_signature),
        });
        if let Some(req) = self.request.as_mut() {
            req.messages.push(ChatMessage {
                tool_calls: calls.clone(),
                thinking: signed,
                ..ChatMessage::text("assistant", text.clone())
            });
        }
        let message = NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.usage,
            stop_reason: Some("toolUse".into()),
            tool_calls: calls.clone(),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            diagnostics: self.diagnostic.take().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, text, wall_ms)
        };
        (
            Phase::Tools {
                run_deadline,
                queue: calls.into(),
                running: None,
            },
            vec![Action::Append(Box::new(message))],
        )
    }

    fn terminal(
        &self,
        status: RunStatus,
        error: Option<String>,
        stop_reason: Option<String>,
        wall_ms: u64,
    ) -> RunTerminal {
        let visible = self.visible();
        // Messages sent with the `message` tool are delivered replies; a final text that only
        // repeats one of them is a duplicate confirmation and is dropped (R-E3).
        let mut payloads: Vec<Payload> = if status == RunStatus::Ok {
            self.sent
                .iter()
                .chain(&self.continued)
                .map(|t| Payload {
                    text: t.clone(),
                    is_error: false,
                })
                .collect()
        } else {
            vec![]
        };
        match (self.warning(), status) {
            (warning, RunStatus::Ok)
                if visible && !reply::duplicates_sent(&self.text, &self.sent) =>
            {
                payloads.push(Payload {
                    text: self.text.clone(),
                    is_error: false,
                });
                // A denied exec stays a failure of the run's work, whatever the model then
                // said (R-F4).
                if let Some(text) = warning.filter(|_| self.denied.is_some()) {
                    payloads.push(Payload {
                        text,
                        is_error: true,
                    });
                }
            }
            // A failed tool and nothing else to say: tell the user (R-F2).
            (Some(text), RunStatus::Ok) => payloads.push(Payload {
                text,
                is_error: true,
            }),
            _ => {}
        }
        RunTerminal {
            run_id: self.spec.run_id.clone(),
            status,
            session_id: self.session_id.clone(),
            started_at: Some(self.started_at),
            ended_at: wall_ms,
            error,
            stop_reason,
            payloads,
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            duration_ms: wall_ms.saturating_sub(self.started_at),
            source_reply_delivered: !self.sent.is_empty(),
            fallbacks: self.fallbacks_used,
            carried_by: None,
        }
    }

    /// Moves to `Persisting` with the outcome to record.
    fn end(
        &mut self,
        status: RunStatus,
        error: Option<String>,
        stop_reason: Option<String>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let terminal = self.terminal(status, error.clone(), stop_reason.clone(), wall_ms);
        // A failed run leaves its failure in history even with no text (R-B1): an assistant
        // message with the error, written before the terminal is published.
        let failed = status == RunStatus::Error && error.is_some();
        let assistant = (!self.text.is_empty() || failed).then(|| NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            stop_reason: stop_reason.clone(),
            error: error.clone(),
            reasoning: (!self.reasoning.is_empty()).then(|| self.reasoning.clone()),
            diagnostics: self.diagnostic.clone().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, self.text.clone(), wall_ms)
        });
        let finish = FinishRun {
            run_id: self.spec.run_id.clone(),
            session_key: self.spec.session_key.clone(),
            status,
            ended_at: wall_ms,
            error,
            stop_reason,
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            assistant,
        };
        (
            Phase::Persisting {
                terminal: Box::new(terminal),
            },
            vec![Action::Persist(Box::new(finish))],
        )
    }
}

/// A per-run seed for retry jitter.
fn seed_of(run_id: &str) -> u64 {
    run_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Caps event JSON text on a char boundary.
fn clip(s: &str) -> String {
    match s.char_indices().nth(EVENT_JSON_MAX) {
        Some((idx, _)) => format!("{}…", &s[..idx]),
        None => s.to_owned(),
    }
}

/// A cancelled run's error text; a stalled run's says what happened, as OpenClaw's notice.
fn abort_text(reason: StopReason) -> String {
    match reason {
        StopReason::Stalled => "run aborted (stalled): this turn was interrupted because it stopped making progress; please try again".to_owned(),
        other => format!("run aborted ({})", other.as_str()),
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;

    fn spec(timeout: Option<u64>) -> TurnSpec {
        TurnSpec {
            run_id: "r".into(),
            session_key: "agent:main:main".into(),
            provider: "p".into(),
            model: "m".into(),
            timeout: timeout.map(Duration::from_secs),
            idle_timeout: Duration::from_secs(10),
            context: ContextBudget::new(None, &Default::default()),
            compaction: Default::default(),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(30),
            fallbacks: Vec::new(),
            reasoning: ReasoningMode::Off,
            approval_timeout: Duration::from_secs(30),
        }
    }

    fn req() -> ModelRequest {
        ModelRequest {
            messages: vec![ChatMessage::text("user", "hi")],
            tools: vec![],
            choice: None,
            thinking: None,
        }
    }

    fn begun(t: &mut Turn, now: Instant) -> Vec<Action> {
        t.handle(
            Input::Begun {
                session_id: "s".into(),
                request: Ok(Prepared::Call(req())),
            },
            now,
            1000,
        )
    }

    fn lifecycle_phase(a: &Action) -> Option<LPhase> {
        match a {
            Action::Emit(EventBody::Lifecycle(l)) => Some(l.phase),
            _ => None,
        }
    }

    #[test]
    fn happy_path_persists_before_the_terminal_event_r_a5() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 1000);
        let a = begun(&mut t, t0);
        assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Start));
        assert!(matches!(a[1], Action::CallModel(_)));
        let a = t.handle(Input::Model(LlmEvent::Delta("Hel".into())), t0, 1001);
        assert_eq!(
            a,
            vec![Action::Emit(EventBody::Assistant {
                delta: "Hel".into()
            })]
        );
        t.handle(Input::Model(LlmEvent::Delta("lo".into())), t0, 1002);
        t.handle(
            Input::Model(LlmEvent::Usage(Usage {
                input: 3,
                output: 2,
                cache_read: 0,
                cache_write: 0,
                total: 5,
            })),
            t0,
            1003,
        );
        let a = t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            t0,
            1004,
        );
        // Only a persist: no terminal event before the outcome is durable.
        assert_eq!(a.len(), 1);
        let Action::Persist(f) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(f.assistant.as_ref().unwrap().text, "Hello");
        let a = t.handle(Input::Persisted(Ok(())), t0, 1005);
        assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::End));
        let Action::Finish(term) = &a[1] else {
            panic!()
        };
        assert_eq!(term.status, RunStatus::Ok);
        assert_eq!(term.payloads[0].text, "Hello");
        assert_eq!(term.usage.unwrap().total, 5);
        assert!(t.is_done());
        // Nothing after the terminal (R-D3).
        assert!(t
            .handle(Input::Model(LlmEvent::Delta("late".into())), t0, 1006)
            .is_empty());
        assert!(t
            .handle(Input::Cancel(StopReason::Rpc), t0, 1006)
            .is_empty());
    }

    #[test]
    fn idle_timeout_aborts_the_attempt_r_b4() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(10)));
        assert!(t
            .handle(Input::Tick, t0 + Duration::from_secs(9), 9)
            .is_empty());
        // Data resets the idle deadline.
        t.handle(
            Input::Model(LlmEvent::Delta("x".into())),
            t0 + Duration::from_secs(9),
            9,
        );
        assert!(t
            .handle(Input::Tick, t0 + Duration::from_secs(18), 18)
            .is_empty());
        let a = t.handle(Input::Tick, t0 + Duration::from_secs(19), 19);
        assert_eq!(a[0], Action::AbortModel);
        let Action::Persist(f) = &a[1] else { panic!() };
        assert!(f.error.as_ref().unwrap().contains("idle timeout"));
        let a = t.handle(Input::Persisted(Ok(())), t0, 20);
        assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Error));
    }

    #[test]
    fn reasoning_and_tool_arguments_are_progress_and_reasoning_is_saved_not_shown_r_b4() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        // Reasoning for longer than the idle window keeps the attempt alive.
        for s in [8, 16, 24] {
            let a = t.handle(Input::Model(LlmEvent::Reasoning("hmm ".into())), at(s), s);
            assert!(a.is_empty(), "reasoning is never reply text: {a:?}");
        }
        assert_eq!(t.next_deadline(), Some(at(34)));
        // So does a tool call whose arguments are still streaming.
        t.handle(
            Input::Model(LlmEvent::ToolCallStart {
                index: 0,
                name: "read".into(),
            }),
            at(30),
            30,
        );
        t.handle(
            Input::Model(LlmEvent::ToolCallDelta { index: 0, bytes: 3 }),
            at(38),
            38,
        );
        assert_eq!(t.next_deadline(), Some(at(48)));
        t.handle(Input::Model(LlmEvent::Delta("Answer".into())), at(40), 40);
        let mut done = Terminal::reason("stop");
        done.responses = Some(crate::llm::ResponsesTerminal {
            event_type: "response.completed".into(),
            end_turn: crate::llm::EndTurn::Absent,
        });
        let a = t.handle(Input::Model(LlmEvent::Done(done)), at(41), 41);
        let persist = a.iter().find_map(|a| match a {
            Action::Persist(f) => Some(f),
            _ => None,
        });
        let m = persist.unwrap().assistant.as_ref().unwrap();
        assert_eq!(m.text, "Answer");
        assert_eq!(m.reasoning.as_deref(), Some("hmm hmm hmm "));
        assert_eq!(m.diagnostics[0]["type"], "openai_responses_terminal");
        assert_eq!(m.diagnostics[0]["details"]["endTurn"], "absent");
    }

    #[test]
    fn a_rate_limit_waits_retrying_then_the_same_request_goes_again_r_b4() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        let limited = LlmError::RateLimited {
            retry_after_ms: Some(2000),
            message: "slow down".into(),
        };
        let a = t.handle(Input::ModelFailed(limited), at(100), 1);
        assert_eq!(a[0], Action::AbortModel);
        assert_eq!(
            a[1],
            Action::Emit(EventBody::RunStatus {
                phase: "retrying".into(),
                attempt: 2,
                max_attempts: 10,
                reason: "rate_limit".into(),
            })
        );
        assert!(
            !a.iter().any(|a| lifecycle_phase(a).is_some()),
            "no terminal while retrying: {a:?}"
        );
        assert_eq!(t.next_deadline(), Some(at(2100)));
        assert!(t.handle(Input::Tick, at(2000), 2).is_empty());
        let a = t.handle(Input::Tick, at(2100), 3);
        assert_eq!(a, vec![Action::CallModel(req())]);
        t.handle(Input::Model(LlmEvent::Delta("ok".into())), at(2200), 4);
        let a = t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            at(2300),
            5,
        );
        assert!(a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");

        // A cancel during the wait ends the run at once, with no further request.
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        t.handle(
            Input::ModelFailed(LlmError::Http {
                status: 503,
                message: "down".into(),
            }),
            at(10),
            1,
        );
        let a = t.handle(Input::Cancel(StopReason::Rpc), at(20), 2);
        assert!(
            !a.iter().any(|a| matches!(a, Action::CallModel(_))),
            "{a:?}"
        );
        assert!(a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");
    }

    #[test]
    fn repeated_usage_is_not_progress_r_g5() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        let u = Usage {
            input: 1,
            output: 1,
            cache_read: 0,
            cache_write: 0,
            total: 2,
        };
        t.handle(
            Input::Model(LlmEvent::Usage(u)),
            t0 + Duration::from_secs(5),
            5,
        );
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(15)));
        t.handle(
            Input::Model(LlmEvent::Usage(u)),
            t0 + Duration::from_secs(12),
            12,
        );
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(15)));
    }

    #[test]
    fn run_timeout_ends_with_timeout_status() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(Some(5)), t0, 0);
        begun(&mut t, t0);
        t.handle(
            Input::Model(LlmEvent::Delta("partial".into())),
            t0 + Duration::from_secs(4),
            4,
        );
        let a = t.handle(Input::Tick, t0 + Duration::from_secs(5), 5);
        assert_eq!(a[0], Action::AbortModel);
        let Action::Persist(f) = &a[1] else { panic!() };
        assert_eq!(f.status, RunStatus::Timeout);
        // The partial answer is kept in the transcript, marked with its stop reason.
        assert_eq!(
            f.assistant.as_ref().unwrap().stop_reason.as_deref(),
            Some("timeout")
        );
        let a = t.handle(Input::Persisted(Ok(())), t0, 6);
        let Action::Finish(term) = &a[1] else {
            panic!()
        };
        assert_eq!(term.status, RunStatus::Timeout);
        assert!(term.payloads.is_empty());
    }

    #[test]
    fn provider_error_and_fenced_persist_end_in_error() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        let a = t.handle(
            Input::ModelFailed(LlmError::Http {
                status: 400,
                message: "boom".into(),
            }),
            t0,
            1,
        );
        let Action::Persist(f) = &a[1] else { panic!() };
        assert!(f.error.as_ref().unwrap().contains("HTTP 400: boom"));
        let a = t.handle(
            Input::Persisted(Err(StoreError::Fenced {
                expected: "r".into(),
                actual: Some("other".into()),
            })),
            t0,
            2,
        );
        let Action::Finish(term) = &a[1] else {
            panic!()
        };
        assert!(term.error.as_ref().unwrap().starts_with("run superseded"));
    }

    #[test]
    fn cancel_before_begin_is_applied_once_begun() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        assert!(t
            .handle(Input::Cancel(StopReason::Restart), t0, 0)
            .is_empty());
        let a = begun(&mut t, t0);
        assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Start));
        let Action::Persist(f) = &a[1] else {
            panic!("{a:?}")
        };
        assert_eq!(f.status, RunStatus::Aborted);
        assert_eq!(f.stop_reason.as_deref(), Some("restart"));
    }

    fn tool_call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "ls".into(),
            arguments: "{}".into(),
        }
    }

    /// The model's response ends by asking for `calls`; the core's answer to its `Done`.
    fn ask_for(t: &mut Turn, calls: Vec<ToolCall>, now: Instant) -> Vec<Action> {
        t.handle(Input::Model(LlmEvent::ToolCalls(calls)), now, 1);
        t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("tool_calls"))),
            now,
            2,
        )
    }

    fn usage(n: u64) -> Usage {
        Usage {
            input: n,
            output: n,
            cache_read: 0,
            cache_write: 0,
            total: 2 * n,
        }
    }

    fn steer(id: &str, text: &str) -> Input {
        Input::Steer(Steered {
            run_id: id.into(),
            text: text.into(),
        })
    }

    fn appended(a: &[Action]) -> Vec<&NewMessage> {
        a.iter()
            .filter_map(|a| match a {
                Action::Append(m) => Some(&**m),
                _ => None,
            })
            .collect()
    }

    /// R-B3 steer: the running tool finishes, the unstarted call of the batch is skipped
    /// with an error result, the message is recorded under its own run id and is the last
    /// message of the next model request, in the same run.
    #[test]
    fn a_steered_message_skips_unstarted_calls_and_joins_the_next_request_r_b3() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        ask_for(&mut t, vec![tool_call("a"), tool_call("b")], t0);
        let a = t.handle(Input::Appended(Ok(2)), t0, 3);
        assert!(a
            .iter()
            .any(|a| matches!(a, Action::RunTool(c) if c.id == "a")));
        assert!(t.handle(steer("r2", "stop, do X"), t0, 4).is_empty());
        let a = t.handle(
            Input::ToolDone(ToolOutcome {
                content: "listing".into(),
                is_error: false,
            }),
            t0,
            5,
        );
        assert_eq!(appended(&a)[0].text, "listing", "the running tool finished");
        let a = t.handle(Input::Appended(Ok(3)), t0, 6);
        assert!(!a.iter().any(|a| matches!(a, Action::RunTool(_))), "{a:?}");
        let skipped = appended(&a);
        assert_eq!(skipped[0].text, SKIPPED);
        assert_eq!(
            skipped[0].tool_result,
            Some(("b".into(), "ls".into(), true))
        );
        let a = t.handle(Input::Appended(Ok(4)), t0, 7);
        let user = appended(&a);
        assert_eq!(user[0].role, Role::User);
        assert_eq!(user[0].text, "stop, do X");
        assert_eq!(user[0].input_run_id.as_deref(), Some("r2"));
        let a = t.handle(Input::Appended(Ok(5)), t0, 8);
        let Some(Action::CallModel(next)) = a.last() else {
            panic!("{a:?}")
        };
        let last = next.messages.last().unwrap();
        assert_eq!((last.role, last.content.as_str()), ("user", "stop, do X"));
        assert_eq!(t.steered(), ["r2".to_owned()]);
    }

    /// A cancelled steered message leaves the turn before it is recorded; a taken one the
    /// turn could not record (its model calls used up) is not reported as carried.
    #[test]
    fn an_unrecorded_steered_message_is_dropped_or_given_back_r_b3() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        t.handle(steer("r2", "two"), t0, 1);
        t.handle(steer("r3", "three"), t0, 2);
        t.unsteer("r2");
        assert_eq!(t.steered(), Vec::<String>::new(), "none recorded yet");
        t.handle(Input::Model(LlmEvent::Delta("A.".into())), t0, 3);
        let a = t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            t0,
            4,
        );
        assert_eq!(appended(&a)[0].text, "A.");
        let a = t.handle(Input::Appended(Ok(2)), t0, 5);
        assert_eq!(appended(&a)[0].text, "three", "r2 was dropped");
        t.handle(Input::Appended(Ok(3)), t0, 6);
        assert_eq!(t.steered(), ["r3".to_owned()]);
    }

    /// R-B3 steer: a message that arrives while the final answer streams is answered in the
    /// same run; the first answer stays part of the reply.
    #[test]
    fn a_message_steered_during_the_final_answer_gets_its_own_answer_r_b3() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        t.handle(Input::Model(LlmEvent::Delta("First.".into())), t0, 1);
        t.handle(steer("r2", "and then?"), t0, 2);
        let a = t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            t0,
            3,
        );
        assert!(!a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");
        assert_eq!(appended(&a)[0].text, "First.");
        let a = t.handle(Input::Appended(Ok(2)), t0, 4);
        assert_eq!(appended(&a)[0].text, "and then?");
        let a = t.handle(Input::Appended(Ok(3)), t0, 5);
        assert!(matches!(a.last(), Some(Action::CallModel(_))), "{a:?}");
        t.handle(Input::Model(LlmEvent::Delta("Then Y.".into())), t0, 6);
        t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            t0,
            7,
        );
        let a = t.handle(Input::Persisted(Ok(())), t0, 8);
        let Some(Action::Finish(term)) = a.last() else {
            panic!("{a:?}")
        };
        assert_eq!(term.status, RunStatus::Ok);
        let texts: Vec<&str> = term.payloads.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["First.", "Then Y."]);
        assert_eq!(t.steered(), ["r2".to_owned()]);
    }

    /// A turn recording its outcome takes no steered message: the driver hands it back to
    /// run after (R-B3).
    #[test]
    fn a_message_steered_too_late_is_not_recorded_r_b3() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        t.handle(Input::Model(LlmEvent::Delta("Done.".into())), t0, 1);
        t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            t0,
            2,
        );
        assert!(!t.accepts_steering());
        assert!(t.handle(steer("r2", "late"), t0, 3).is_empty());
        let a = t.handle(Input::Persisted(Ok(())), t0, 4);
        assert!(matches!(a.last(), Some(Action::Finish(_))));
        assert!(t.steered().is_empty());
    }

    fn exec_call(command: &str) -> ToolCall {
        ToolCall {
            id: "x1".into(),
            name: "exec".into(),
            arguments: serde_json::json!({ "command": command }).to_string(),
        }
    }

    /// R-B5: an approval wait does not consume the run's budget: a 2 s run that waits 5 s
    /// for an operator still has its 1 s left after the decision.
    #[test]
    fn an_approval_wait_pauses_the_run_budget_r_b5() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut t = Turn::new(spec(Some(2)), t0, 0);
        begun(&mut t, t0);
        ask_for(&mut t, vec![exec_call("rm x")], at(500));
        let a = t.handle(Input::Appended(Ok(2)), at(1000), 3);
        assert!(a.iter().any(|a| matches!(a, Action::RunTool(_))), "{a:?}");
        let a = t.handle(Input::ApprovalPending { id: "a1".into() }, at(1000), 4);
        assert!(a.is_empty());
        assert_eq!(
            t.next_deadline(),
            Some(at(31_000)),
            "the approval's deadline only"
        );
        assert!(
            t.handle(Input::Tick, at(6000), 5).is_empty(),
            "no run timeout"
        );
        let a = t.handle(
            Input::ApprovalDecided {
                id: "a1".into(),
                allow: true,
            },
            at(6000),
            6,
        );
        assert!(
            matches!(&a[..], [Action::RunApproved(c)] if c.id == "x1"),
            "{a:?}"
        );
        assert_eq!(t.next_deadline(), Some(at(7000)), "the 1 s it had left");
    }

    /// A denial, and an approval nobody gives in time, are tool errors the model sees; the
    /// reply then carries the failure though the model answers (R-F4).
    #[test]
    fn a_denied_or_expired_exec_is_an_error_the_reply_keeps_r_f4() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for expire in [false, true] {
            let mut t = Turn::new(spec(None), t0, 0);
            begun(&mut t, t0);
            ask_for(&mut t, vec![exec_call("rm x")], t0);
            t.handle(Input::Appended(Ok(2)), t0, 3);
            t.handle(Input::ApprovalPending { id: "a1".into() }, t0, 4);
            let a = if expire {
                t.handle(Input::Tick, at(30_000), 5)
            } else {
                t.handle(
                    Input::ApprovalDecided {
                        id: "a1".into(),
                        allow: false,
                    },
                    at(10),
                    5,
                )
            };
            assert_eq!(
                matches!(a.first(), Some(Action::ApprovalExpired { id }) if id == "a1"),
                expire
            );
            let result = appended(&a)[0].text.clone();
            let reason = if expire {
                "approval-timeout"
            } else {
                "user-denied"
            };
            assert_eq!(
                result,
                format!("Exec denied (gateway id=a1, {reason}): rm x")
            );
            t.handle(Input::Appended(Ok(3)), at(30_001), 6);
            t.handle(
                Input::Model(LlmEvent::Delta("I could not.".into())),
                at(30_002),
                7,
            );
            t.handle(
                Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
                at(30_003),
                8,
            );
            let a = t.handle(Input::Persisted(Ok(())), at(30_004), 9);
            let Some(Action::Finish(term)) = a.last() else {
                panic!("{a:?}")
            };
            let texts: Vec<&str> = term.payloads.iter().map(|p| p.text.as_str()).collect();
            assert_eq!(texts.len(), 2, "{texts:?}");
            assert!(
                texts[1].contains("The exec tool failed: Exec denied"),
                "{texts:?}"
            );
        }
    }

    /// R-E4: a tool round appends the call, runs each tool with start/result events, appends
    /// each result and calls the model again with the results; usage sums over calls.
    #[test]
    fn tool_round_appends_runs_and_calls_the_model_again_r_e4() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        t.handle(Input::Model(LlmEvent::Delta("Looking.".into())), t0, 1);
        t.handle(Input::Model(LlmEvent::Usage(usage(1))), t0, 1);
        let a = ask_for(&mut t, vec![tool_call("a"), tool_call("b")], t0);
        let [Action::Append(m)] = a.as_slice() else {
            panic!("{a:?}")
        };
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(m.text, "Looking.");
        assert_eq!(m.tool_calls.len(), 2);
        for id in ["a", "b"] {
            let a = t.handle(Input::Appended(Ok(7)), t0, 3);
            assert!(
                matches!(&a[0], Action::Emit(EventBody::Tool { phase, tool_call_id, .. }) if *phase == ipc::control::ToolPhase::Start && tool_call_id == id),
                "{a:?}"
            );
            assert_eq!(a[1], Action::RunTool(tool_call(id)));
            let a = t.handle(
                Input::ToolDone(ToolOutcome {
                    content: format!("out-{id}"),
                    is_error: false,
                }),
                t0,
                4,
            );
            assert!(
                matches!(&a[0], Action::Emit(EventBody::Tool { phase, .. }) if *phase == ipc::control::ToolPhase::Result)
            );
            let Action::Append(m) = &a[1] else {
                panic!("{a:?}")
            };
            assert_eq!(m.role, Role::ToolResult);
            assert_eq!(m.tool_result.as_ref().unwrap().0, id);
        }
        let a = t.handle(Input::Appended(Ok(7)), t0, 5);
        let [Action::CallModel(req)] = a.as_slice() else {
            panic!("{a:?}")
        };
        let roles: Vec<_> = req.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
        assert_eq!(req.messages[3].content, "out-b");
        t.handle(Input::Model(LlmEvent::Delta("Done.".into())), t0, 6);
        t.handle(Input::Model(LlmEvent::Usage(usage(2))), t0, 6);
        let a = t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 7);
        let Action::Persist(f) = &a[0] else { panic!() };
        assert_eq!(f.assistant.as_ref().unwrap().text, "Done.");
        assert_eq!(f.usage.unwrap().total, 6);
    }

    /// R-B7 / R-C5: a tool round that takes the request over the context budget compacts
    /// before the next model call: summary call, fenced `Compact` keeping the call with its
    /// result, then the call with the compacted request (still marked as after tools). A
    /// compaction refused by the fence ends the run.
    #[test]
    fn tool_round_over_budget_compacts_first_r_b7() {
        let t0 = Instant::now();
        let small = || TurnSpec {
            context: ContextBudget::new(
                Some(1024),
                &ipc::control::CompactionSpec {
                    reserve_tokens: Some(256),
                    keep_recent_tokens: Some(100),
                },
            ),
            ..spec(None)
        };
        let start = |t: &mut Turn| {
            t.handle(
                Input::Begun {
                    session_id: "s".into(),
                    request: Ok(Prepared::Call(ModelRequest {
                        messages: vec![
                            ChatMessage::text("system", "sys"),
                            ChatMessage {
                                seq: Some(1),
                                ..ChatMessage::text("user", "q".repeat(2000))
                            },
                        ],
                        tools: vec![],
                        choice: None,
                        thinking: None,
                    })),
                },
                t0,
                0,
            );
            ask_for(t, vec![tool_call("a")], t0);
            t.handle(Input::Appended(Ok(2)), t0, 2);
            t.handle(
                Input::ToolDone(ToolOutcome {
                    content: "r".repeat(1200),
                    is_error: false,
                }),
                t0,
                3,
            );
            t.handle(Input::Appended(Ok(3)), t0, 4)
        };
        let mut t = Turn::new(small(), t0, 0);
        let a = start(&mut t);
        let [Action::Emit(EventBody::Compaction {
            phase,
            reason,
            messages,
            ..
        }), Action::CallModel(summarize)] = a.as_slice()
        else {
            panic!("{a:?}")
        };
        assert_eq!(
            (*phase, reason.as_deref(), *messages),
            (
                ipc::control::CompactionPhase::Start,
                Some("threshold"),
                Some(1)
            )
        );
        assert!(summarize.tools.is_empty());
        assert!(summarize.messages[1].content.contains("qqqq"));
        assert!(
            !summarize.messages[1].content.contains("rrrr"),
            "the kept result was summarized"
        );
        t.handle(
            Input::Model(LlmEvent::Delta("the user asked q".into())),
            t0,
            5,
        );
        let a = t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 6);
        let [Action::Compact(record)] = a.as_slice() else {
            panic!("{a:?}")
        };
        assert_eq!(record.kept_from_seq, 2);
        assert_eq!(record.summary, "the user asked q");
        assert!(record.tokens_after < record.tokens_before);
        let a = t.handle(Input::Appended(Ok(4)), t0, 7);
        let [Action::Emit(EventBody::Compaction { completed, .. }), Action::CallModel(next)] =
            a.as_slice()
        else {
            panic!("{a:?}")
        };
        assert_eq!(*completed, Some(true));
        let roles: Vec<_> = next.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert!(next.messages[1].content.starts_with(prompt::SUMMARY_PREFIX));
        assert!(
            t.after_tools,
            "the call after compaction is still the post-tool call"
        );

        let mut t = Turn::new(small(), t0, 0);
        start(&mut t);
        t.handle(Input::Model(LlmEvent::Delta("sum".into())), t0, 5);
        t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 6);
        let a = t.handle(
            Input::Appended(Err(StoreError::Fenced {
                expected: "r".into(),
                actual: Some("other".into()),
            })),
            t0,
            7,
        );
        let [Action::Persist(f)] = a.as_slice() else {
            panic!("{a:?}")
        };
        assert_eq!(f.status, RunStatus::Error);
        assert!(f.error.as_deref().unwrap().contains("superseded"));
    }

    #[test]
    fn cancel_during_a_tool_aborts_it_and_failed_append_ends_the_run() {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        ask_for(&mut t, vec![tool_call("a")], t0);
        t.handle(Input::Appended(Ok(7)), t0, 2);
        let a = t.handle(Input::Cancel(StopReason::Rpc), t0, 3);
        assert_eq!(a[0], Action::AbortTool);
        let Action::Persist(f) = &a[1] else { panic!() };
        assert_eq!(f.status, RunStatus::Aborted);
        // A result arriving after the abort changes nothing.
        assert!(t
            .handle(
                Input::ToolDone(ToolOutcome {
                    content: "late".into(),
                    is_error: false
                }),
                t0,
                4
            )
            .is_empty());

        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        ask_for(&mut t, vec![tool_call("a")], t0);
        let a = t.handle(
            Input::Appended(Err(StoreError::Fenced {
                expected: "r".into(),
                actual: None,
            })),
            t0,
            2,
        );
        let Action::Persist(f) = &a[0] else { panic!() };
        assert_eq!(f.status, RunStatus::Error);
        assert!(f.error.as_ref().unwrap().starts_with("run superseded"));
    }
}
