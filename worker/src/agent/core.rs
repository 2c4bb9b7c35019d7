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
//!
//! Layout: `step` dispatches on the phase only, and each phase's handler decides every
//! [`Input`] by name (no catch-all), so a new input does not compile until each phase says
//! what it does with it; `Done` alone takes nothing, whatever the input (R-D3). Here: the types, the start of a run and the helpers the phases
//! share. `core/model.rs`: streaming a response and waiting to retry one (`Streaming`,
//! `Backoff`). `core/batch.rs`: a response's tool calls (`Tools`). `core/compact.rs`:
//! compaction (`Compacting`, `CompactSaving`). `core/steer.rs`: steered messages
//! (`Steering`). `core/approval.rs`: exec approvals (`Approval`). `core/outcome.rs`: the
//! outcome and the terminal (`Persisting`).

use std::time::{Duration, Instant};

use ipc::control::{
    EventBody, Lifecycle, Phase as LPhase, RunStatus, RunStopReason, RunTerminal, StopReason, Usage,
};

use std::collections::VecDeque;

use super::blocks;
use super::compaction::{self, ContextBudget};
use super::reply;
use super::retry::Retries;
use super::xml::XmlFilter;
use crate::llm::{LlmError, LlmEvent, ModelRequest};
use crate::store::{Compaction, FinishRun, NewMessage, StoreError};
use crate::tools::{ToolCall, ToolOutcome};

mod approval;
mod batch;
mod compact;
mod model;
mod outcome;
mod spoken;
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
    /// How much of its tool work the reply tells (R-B1).
    pub verbose: ipc::thinking::VerboseLevel,
    /// Block streaming of the reply (R-D5); `None`: off.
    pub blocks: Option<ipc::blocks::BlockStreaming>,
    /// What the reply carries after its text (the usage footer, the raw trace).
    pub notes: super::notes::NotesSpec,
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
    /// An `exec` waits for an operator.
    Approval(ApprovalWait),
    Persisting {
        terminal: Box<RunTerminal>,
    },
    Done,
}

/// `call` waits for an operator (approval `id`) until `until`; the run's deadline is paused
/// with `run_left` to go.
#[derive(Debug)]
struct ApprovalWait {
    run_left: Option<Duration>,
    until: Instant,
    id: String,
    queue: VecDeque<ToolCall>,
    call: ToolCall,
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
    /// A compaction ran past the execution deadline once and got its grace (R-B5).
    compaction_grace_used: bool,
    /// Model calls repeated because the reply was empty (R-F3).
    empty_retries: u32,
    /// Texts delivered with the `message` tool (R-E3).
    sent: Vec<String>,
    /// A `message` send in the latest tool batch: the turn's answer when the model then has
    /// nothing more to say. One sent in an earlier batch is progress, not the answer (R-E3,
    /// the seed's rule: a progress message counts only from the settled turn's last batch).
    answered_by_send: bool,
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
    /// Verbose runs: a summary of each tool call (and, `full`, its output), in order; the
    /// reply's first payloads (R-B1).
    tool_notes: Vec<String>,
    /// Block streaming (R-D5): the current response's text not sent as a block yet.
    chunker: Option<blocks::Chunker>,
    /// Blocks sent so far (the next one's `index`).
    blocks_sent: u32,
    /// What follows the reply (the usage footer, the raw trace), once the outcome is
    /// recorded.
    notes: super::notes::Notes,
    /// The final reply as the `message_sending` guards left it, when they changed it (the
    /// raw trace shows that, never what they cancelled).
    guarded_output: Option<String>,
    /// How much of the current response's reasoning went out as a block (reasoning `on`).
    reasoning_blocked: usize,
}

impl Turn {
    pub fn new(spec: TurnSpec, now: Instant, wall_ms: u64) -> Self {
        let retries = Retries::new(spec.retry_base, spec.retry_max, seed_of(&spec.run_id));
        let chunker = spec.blocks.map(blocks::Chunker::new);
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
            compaction_grace_used: false,
            empty_retries: 0,
            sent: Vec::new(),
            answered_by_send: false,
            compactions: 0,
            steering: VecDeque::new(),
            steered: Vec::new(),
            denied: None,
            tool_notes: Vec::new(),
            chunker,
            blocks_sent: 0,
            notes: Default::default(),
            guarded_output: None,
            reasoning_blocked: 0,
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
            Phase::Approval(wait) => Some(wait.until),
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
            Phase::Approval(_) => Activity::Approval,
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

    /// What follows the reply (set once the outcome is recorded).
    pub fn notes(&self) -> &super::notes::Notes {
        &self.notes
    }

    /// The `message_sending` guards changed the final reply before it was recorded: `kept`
    /// is what they left (`None`: cancelled).
    pub fn reply_guarded(&mut self, kept: Option<&str>) {
        self.guarded_output = Some(kept.unwrap_or_default().to_owned());
    }

    /// Messages the `message` tool delivered in this run.
    pub fn sent_count(&self) -> usize {
        self.sent.len()
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
            carried_by: None,
            reply: None,
            guarded: Vec::new(),
            footer: None,
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

    /// One input in one phase, dispatched on the phase. Late or irrelevant inputs (model
    /// data after the turn left streaming, ticks before a deadline, a second cancel) change
    /// nothing (R-D3); each handler lists the ones it ignores. `Input::Steer` never gets
    /// here: `handle` takes it in any phase.
    fn step(
        &mut self,
        phase: Phase,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match phase {
            Phase::Starting { cancel } => self.on_starting(cancel, input, now, wall_ms),
            Phase::Streaming {
                run_deadline,
                idle_deadline,
            } => self.on_streaming(run_deadline, idle_deadline, input, now, wall_ms),
            Phase::Compacting {
                run_deadline,
                idle_deadline,
                job,
            } => self.on_compacting(run_deadline, idle_deadline, job, input, now, wall_ms),
            Phase::CompactSaving { run_deadline, job } => {
                self.on_compact_saving(run_deadline, job, input, now, wall_ms)
            }
            Phase::Backoff {
                run_deadline,
                until,
            } => self.on_backoff(run_deadline, until, input, now, wall_ms),
            Phase::Tools {
                run_deadline,
                queue,
                running,
            } => self.on_tools(run_deadline, queue, running, input, now, wall_ms),
            Phase::Steering { run_deadline } => self.on_steering(run_deadline, input, now, wall_ms),
            Phase::Approval(wait) => self.on_approval(wait, input, now, wall_ms),
            Phase::Persisting { terminal } => self.on_persisting(terminal, input),
            // The terminal is out: nothing follows it, whatever the input (R-D3).
            Phase::Done => (Phase::Done, Vec::new()),
        }
    }

    /// `Starting`: the run is being claimed and recorded. A cancel now is kept and applied
    /// once it is begun (its lifecycle start comes first).
    fn on_starting(
        &mut self,
        cancel: Option<StopReason>,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Begun {
                session_id,
                request,
            } => self.begun(cancel, session_id, request, now, wall_ms),
            Input::BeginFailed(e) => {
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
            Input::Cancel(reason) => (
                Phase::Starting {
                    cancel: Some(reason),
                },
                vec![],
            ),
            // Nothing is in flight yet: no model, tool or record to answer, no deadline.
            Input::Model(_)
            | Input::ModelFailed(_)
            | Input::Tick
            | Input::Appended(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Persisted(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. }
            | Input::ApprovalDecided { .. } => (Phase::Starting { cancel }, Vec::new()),
        }
    }

    /// The run is begun: the lifecycle start, then the model call (or the claimed reply, or
    /// the failure to prepare it, or the cancel that came first).
    fn begun(
        &mut self,
        cancel: Option<StopReason>,
        session_id: String,
        request: Result<Prepared, String>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        self.session_id = Some(session_id);
        let start = self.start_event();
        if let Some(reason) = cancel {
            let (p, mut a) = self.end(
                RunStatus::Aborted,
                Some(abort_text(reason)),
                Some(reason.into()),
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
                    self.spec.context = ContextBudget::new(c.context_window, &self.spec.compaction);
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
                a.extend(self.text_ended());
                let (p, rest) = self.end(RunStatus::Ok, None, Some(RunStopReason::Stop), wall_ms);
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

    /// Ends the run after stopping what is in progress (`stop`: abort the model or the tool).
    fn end_stopping(
        &mut self,
        stop: Action,
        status: RunStatus,
        error: String,
        stop_reason: RunStopReason,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let (p, mut a) = self.end(status, Some(error), Some(stop_reason), wall_ms);
        a.insert(0, stop);
        (p, a)
    }

    /// The run deadline passed (R-B4).
    fn time_out(&mut self, stop: Action, wall_ms: u64) -> (Phase, Vec<Action>) {
        let secs = self.spec.timeout.map_or(0, |t| t.as_secs());
        let error = format!("run timed out after {secs} s");
        self.end_stopping(
            stop,
            RunStatus::Timeout,
            error,
            RunStopReason::Timeout,
            wall_ms,
        )
    }

    /// Cancelled (RPC, drain, restart, stuck-session recovery).
    fn abort(&mut self, stop: Action, reason: StopReason, wall_ms: u64) -> (Phase, Vec<Action>) {
        let error = abort_text(reason);
        self.end_stopping(stop, RunStatus::Aborted, error, reason.into(), wall_ms)
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
        self.reasoning_blocked = 0;
        if let Some(c) = self.chunker.as_mut() {
            c.clear();
        }
        self.diagnostic = None;
        self.calls.clear();
        self.request = Some(req.clone());
        let phase = Phase::Streaming {
            run_deadline,
            idle_deadline: now + self.spec.idle_timeout,
        };
        (phase, Action::CallModel(req))
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
