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
            session_key: None,
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
mod tests;
