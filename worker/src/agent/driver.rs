//! The thin async driver of one turn: carries out the core's actions (events to the
//! supervisor, model streaming, persistence) and feeds it inputs (model stream, cancel,
//! deadlines). Adjacent text deltas already queued are merged before the core sees them,
//! adding no delay (R-D2).
//!
//! A `Driver` holds one run's state: the turn, the model call and the tool in flight, the
//! approval it waits for, and its input sources. `run` feeds the turn its queued inputs,
//! carries out each action in order (one method per kind), then waits for the next input
//! (one method per source). Frames go out through the one ordered outbox and are awaited in
//! that order. `driver/model.rs`: the model call's task and the pacing of its text;
//! `driver/tool.rs`: the tool's task with its hooks; `driver/prepare.rs`: the model request;
//! `driver/records.rs`: what is told and recorded beside the turn (carried runs, the audit
//! ledger, compaction hooks).

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use ipc::control::{
    EventBody, RunEvent, RunTerminal, StopReason, StoredMessage, SubmitRun, WorkerToControl,
};
use ipc::thinking::ReasoningMode;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::compaction::ContextBudget;
use super::core::{Action, Input, SteerMsg, Turn, TurnSpec};
use crate::diagnostics::Probe;
use crate::hooks::{self, HookCtx};
use crate::llm::{LlmError, LlmEvent, ModelChoice, ModelRequest};
use crate::store::{BeginRun, Compaction, FinishRun, NewMessage};
use crate::tools::{self, ToolCall, ToolCtx};
use crate::{now_ms, Ctx};

mod guard;
mod model;
mod prepare;
mod records;
mod tool;

use model::{failure_class, next_model, start_model, ModelCall, ModelItem};
use prepare::prepare;
use records::{audit_record, compaction_hooks, taken_in, told};
use tool::{next_tool, start_tool, ToolItem, ToolRun};

/// How long an `exec` waits for an operator by default (`tools.exec.approval_timeout_seconds`;
/// OpenClaw's 30 minutes).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 1_800_000;

/// An operator's decision on one of the run's approvals.
#[derive(Debug)]
pub struct Decided {
    pub id: String,
    pub decision: ipc::approval::ApprovalDecision,
}

/// How a turn ended.
pub struct Driven {
    pub terminal: RunTerminal,
    /// Runs whose steered messages the turn took (they end with its outcome); the other
    /// messages steered into it were declined and run after it.
    pub steered: Vec<String>,
}

/// Runs one turn to its terminal outcome (already persisted when this returns, unless
/// persistence itself failed, which the outcome then says). `steer` brings messages sent
/// to the session meanwhile (queue mode `steer`, R-B3).
pub async fn drive(
    ctx: Arc<Ctx>,
    run: SubmitRun,
    cancel: watch::Receiver<Option<StopReason>>,
    steer: mpsc::Receiver<SteerMsg>,
    decisions: mpsc::Receiver<Decided>,
    probe: Arc<Probe>,
    carried: Vec<String>,
) -> Driven {
    let mut driver = Driver::new(ctx, run, cancel, steer, decisions, probe);
    let first = driver.begin(carried).await;
    driver.pending.push_back(first);
    driver.run().await
}

/// One run's turn and everything that carries out its actions.
struct Driver {
    ctx: Arc<Ctx>,
    run: SubmitRun,
    turn: Turn,
    hook_ctx: HookCtx,
    tool_ctx: ToolCtx,
    probe: Arc<Probe>,
    /// How long an `exec` waits for an operator.
    approval_ms: u64,
    /// Inputs for the turn, in order.
    pending: VecDeque<Input>,
    /// The user message, told to clients once the run has started.
    user_message: Option<StoredMessage>,
    /// The run's last event's sequence number.
    seq: u64,
    call: Option<ModelCall>,
    held: Option<ModelItem>,
    /// The provider of the model request in flight (counted once it ends, for `/metrics`).
    calling: Option<String>,
    tool: Option<ToolRun>,
    tool_started: Option<Instant>,
    /// The approval this run waits for, if any (closed if the run ends first).
    pending_approval: Option<String>,
    /// The final reply and what the `message_sending` guards left of it (`None`:
    /// cancelled), once they ran over it before it was recorded (R-H2).
    guarded: Option<(String, Option<String>)>,
    /// The run's earlier replies (responses the turn went on after) through the guards
    /// before they were recorded: each as streamed and what the guards left of it.
    guarded_earlier: Vec<(String, Option<String>)>,
    cancel: watch::Receiver<Option<StopReason>>,
    cancel_open: bool,
    steer: mpsc::Receiver<SteerMsg>,
    steer_open: bool,
    decisions: mpsc::Receiver<Decided>,
    decisions_open: bool,
}

/// What woke the driver: one of its sources had something.
enum Event {
    Model(Option<ModelItem>),
    Tool(ToolItem),
    Cancel(Result<(), watch::error::RecvError>),
    Steer(Option<SteerMsg>),
    Decision(Option<Decided>),
    Tick,
}

impl Driver {
    fn new(
        ctx: Arc<Ctx>,
        run: SubmitRun,
        cancel: watch::Receiver<Option<StopReason>>,
        steer: mpsc::Receiver<SteerMsg>,
        decisions: mpsc::Receiver<Decided>,
        probe: Arc<Probe>,
    ) -> Self {
        let approval_ms = ctx
            .spec
            .exec
            .approval_timeout_ms
            .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_MS);
        let turn = Turn::new(turn_spec(&ctx, &run, approval_ms), Instant::now(), now_ms());
        let hook_ctx = ctx.hook_ctx(&run.session_key, &run.run_id);
        let tool_ctx = ToolCtx {
            workspace: std::path::PathBuf::from(&ctx.spec.workspace),
            exec: ctx.spec.exec.clone(),
            allow: ctx.spec.tools_allow.clone(),
            progress: None,
            // This very binary, in reaper mode (`execpolicy::reaper`).
            reaper: std::path::PathBuf::from("/proc/self/exe"),
            exec_env: ctx.exec_env.clone(),
            approved: None,
            disk: ctx.disk.clone(),
            web: ctx.web.clone(),
            memory: ctx.memory.clone(),
            background: ctx.background.clone(),
            session_key: run.session_key.clone(),
        };
        Self {
            ctx,
            run,
            turn,
            hook_ctx,
            tool_ctx,
            probe,
            approval_ms,
            pending: VecDeque::new(),
            user_message: None,
            seq: 0,
            call: None,
            held: None,
            calling: None,
            tool: None,
            tool_started: None,
            pending_approval: None,
            guarded: None,
            guarded_earlier: Vec::new(),
            cancel,
            cancel_open: true,
            steer,
            steer_open: true,
            decisions,
            decisions_open: true,
        }
    }

    /// Claims the session and records the run, then prepares its model request: the turn's
    /// first input.
    async fn begin(&mut self, carried: Vec<String>) -> Input {
        // Recorded with the message; the model reads them from the transcript.
        let attachments = std::mem::take(&mut self.run.attachments);
        let (ctx, run, hook_ctx) = (&self.ctx, &self.run, &self.hook_ctx);
        // Over its disk budget, the agent records nothing more (issue 23 item 3).
        let db = std::path::Path::new(&ctx.spec.db_path);
        if let Some(why) = ctx.disk.run_refusal(crate::store::db_bytes(db)) {
            return Input::BeginFailed(why);
        }
        ctx.observe_later(hook_ctx, "message_received", || {
            vec![json!({"content": run.message})]
        });
        let begun = ctx
            .writer
            .begin_run(BeginRun {
                run_id: run.run_id.clone(),
                session_key: run.session_key.clone(),
                accepted_at: run.accepted_at,
                started_at: self.turn.started_at(),
                user_text: run.message.clone(),
                attachments,
                carried,
            })
            .await;
        match begun {
            Ok((session_id, created, user)) => {
                self.user_message = user.display;
                if created {
                    ctx.observe_later(hook_ctx, "session_start", || {
                        vec![json!({"sessionId": session_id})]
                    });
                }
                let request = match prepare(ctx, run, hook_ctx).await {
                    Ok((request, skill_env)) => {
                        if !skill_env.is_empty() {
                            self.tool_ctx.exec_env =
                                Arc::new(crate::tools::with_skill_env(&ctx.exec_env, skill_env));
                        }
                        Ok(request)
                    }
                    Err(e) => Err(e),
                };
                Input::Begun {
                    request,
                    session_id,
                }
            }
            Err(e) => Input::BeginFailed(e.to_string()),
        }
    }

    /// Feeds the turn until it finishes (its outcome persisted): the queued inputs first,
    /// each action carried out in order, then the next input from whichever source has one.
    async fn run(mut self) -> Driven {
        loop {
            while let Some(input) = self.pending.pop_front() {
                for action in self.feed(input) {
                    if let ControlFlow::Break(driven) = self.act(action).await {
                        return driven;
                    }
                }
            }
            let event = self.next_event().await;
            if let Some(input) = self.on_event(event).await {
                self.pending.push_back(input);
            }
        }
    }

    /// One input to the turn; the stuck-session probe sees what it does now.
    fn feed(&mut self, input: Input) -> Vec<Action> {
        let progressed = matches!(input, Input::Model(_) | Input::ToolUpdate(_));
        let actions = self.turn.handle(input, Instant::now(), now_ms());
        self.probe.set_activity(self.turn.activity());
        if progressed {
            self.probe.progressed();
        }
        actions
    }

    /// Carries out one action; `Break` with the outcome once the run is finished.
    async fn act(&mut self, action: Action) -> ControlFlow<Driven> {
        match action {
            Action::Emit(body) => self.emit(body).await,
            Action::CallModel(req) => self.call_model(req),
            Action::AbortModel => self.abort_model(),
            Action::Append(m) => self.append(m).await,
            Action::Compact(k) => self.compact(k).await,
            Action::RunTool(c) => self.run_tool(c).await,
            Action::RunApproved(c) => self.run_approved(c),
            Action::ApprovalExpired { id } => self.approval_expired(id).await,
            Action::AbortTool => self.tool = None,
            Action::Persist(f) => self.persist(f).await,
            Action::Finish(t) => return ControlFlow::Break(self.finish(t).await),
        }
        ControlFlow::Continue(())
    }

    /// A run event to the supervisor (seen by the audit ledger and the compaction hooks);
    /// the user message follows the lifecycle start.
    async fn emit(&mut self, mut body: EventBody) {
        // Observed progress: a reply delta, a tool step, a status (R-I1).
        self.probe.progressed();
        // A block is delivered as it is: through the `message_sending` guards first (R-H2).
        // A cancelled one is not sent (its `index` is skipped).
        if let EventBody::Block { text, .. } = &mut body {
            if self.ctx.hooks.has("message_sending") {
                match self.ctx.hooks.message_sending(&self.hook_ctx, text).await {
                    Some(kept) => *text = kept,
                    None => return,
                }
            }
        }
        // The chat `final` shows the reply as the guards left it, when they changed it.
        if let (EventBody::Lifecycle(l), Some((original, kept))) = (&mut body, &self.guarded) {
            if l.phase == ipc::control::Phase::End && kept.as_ref() != Some(original) {
                l.reply = Some(kept.clone().unwrap_or_default());
            }
        }
        // And the earlier replies the guards changed.
        if let EventBody::Lifecycle(l) = &mut body {
            if l.phase == ipc::control::Phase::End {
                l.guarded = guard::changed(&self.guarded_earlier);
            }
        }
        if let Some(rec) = audit_record(&self.run, &body, &mut self.tool_started) {
            self.ctx.writer.audit(rec);
        }
        if let EventBody::Compaction { .. } = &body {
            compaction_hooks(&self.ctx, &self.hook_ctx, &body);
        }
        self.seq += 1;
        let started =
            matches!(&body, EventBody::Lifecycle(l) if l.phase == ipc::control::Phase::Start);
        let ev = RunEvent {
            run_id: self.run.run_id.clone(),
            seq: self.seq,
            ts: now_ms(),
            body,
        };
        // If the supervisor is gone, the run still finishes and persists.
        let _ = self.ctx.out.send(WorkerToControl::Event(ev)).await;
        if started {
            if let Some(m) = self.user_message.take() {
                told(&self.ctx, &self.run.run_id, self.seq, m).await;
            }
        }
    }

    fn call_model(&mut self, req: ModelRequest) {
        self.calling = Some(
            req.choice
                .as_ref()
                .map_or(self.ctx.spec.model.provider.clone(), |c| c.provider.clone()),
        );
        self.call = Some(start_model(&self.ctx, req));
    }

    fn abort_model(&mut self) {
        if let Some(p) = self.calling.take() {
            self.ctx.model_request(&p, "aborted");
        }
        self.call = None;
        self.held = None;
    }

    /// Records a transcript message (told to clients); the turn hears where it went.
    async fn append(&mut self, mut m: Box<NewMessage>) {
        self.guard_earlier(&mut m).await;
        // A steered message: its own run is taken into this turn once it is recorded.
        let steered = m.input_run_id.clone().filter(|id| *id != self.run.run_id);
        let res = self
            .ctx
            .writer
            .append(self.run.session_key.clone(), self.run.run_id.clone(), *m)
            .await;
        if let Ok(a) = &res {
            if let Some(m) = a.display.clone() {
                told(&self.ctx, &self.run.run_id, self.seq, m).await;
            }
            if let Some(id) = steered {
                taken_in(&self.ctx, &self.run.session_key, id, &self.run.run_id).await;
            }
        }
        self.pending.push_back(Input::Appended(res.map(|a| a.seq)));
    }

    /// Records a compaction; the turn hears where it went.
    async fn compact(&mut self, k: Box<Compaction>) {
        let res = self
            .ctx
            .writer
            .compact(self.run.session_key.clone(), self.run.run_id.clone(), *k)
            .await;
        self.pending.push_back(Input::Appended(res));
    }

    /// Starts a call, unless an operator must approve it first.
    async fn run_tool(&mut self, c: ToolCall) {
        let tc = ToolCtx {
            exec: self.ctx.exec_policy(),
            ..self.tool_ctx.clone()
        };
        // An operator is asked only for an exec that may run at all: one
        // `tools.allow` leaves out is refused as such, without asking.
        let offered = tc
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|t| t == "exec"));
        let ask = (c.name == "exec" && offered)
            .then(|| tools::exec::needs_approval(&tc.exec, &c.arguments))
            .flatten();
        match ask {
            // An operator decides first (`tools.exec.security = "ask"`).
            Some((command, argv)) => self.ask_approval(command, argv).await,
            None => self.tool = Some(start_tool(&self.ctx, &tc, &self.hook_ctx, c)),
        }
    }

    /// Asks the supervisor for an operator's approval; the turn waits for the decision.
    async fn ask_approval(&mut self, command: String, argv: Vec<String>) {
        let id = uuid::Uuid::new_v4().to_string();
        let at = now_ms();
        let req = ipc::approval::ApprovalRequest {
            id: id.clone(),
            run_id: self.run.run_id.clone(),
            session_key: self.run.session_key.clone(),
            command,
            argv,
            cwd: self.ctx.spec.workspace.clone(),
            created_at_ms: at,
            expires_at_ms: at + self.approval_ms,
        };
        let _ = self
            .ctx
            .out
            .send(WorkerToControl::ApprovalRequested(req))
            .await;
        self.pending_approval = Some(id.clone());
        self.pending.push_back(Input::ApprovalPending { id });
    }

    /// Starts a call an operator approved (its command may run though no pattern allows it).
    fn run_approved(&mut self, c: ToolCall) {
        let tc = ToolCtx {
            exec: self.ctx.exec_policy(),
            approved: tools::exec::command_of(&c.arguments),
            ..self.tool_ctx.clone()
        };
        self.tool = Some(start_tool(&self.ctx, &tc, &self.hook_ctx, c));
    }

    /// The approval was not decided in time: the supervisor closes it.
    async fn approval_expired(&mut self, id: String) {
        self.pending_approval = None;
        let why = ipc::approval::ApprovalClosed::Expired;
        let _ = self
            .ctx
            .out
            .send(WorkerToControl::ApprovalClosed { id, why })
            .await;
    }

    /// Records the outcome; the turn hears whether it was.
    async fn persist(&mut self, mut f: Box<FinishRun>) {
        self.guard_reply(&mut f).await;
        // Model work is over: clients hear `finishing` while the outcome is
        // recorded (the terminal event follows the write).
        self.seq += 1;
        let finishing = RunEvent {
            run_id: self.run.run_id.clone(),
            seq: self.seq,
            ts: now_ms(),
            body: self.turn.finishing(),
        };
        let _ = self.ctx.out.send(WorkerToControl::Event(finishing)).await;
        let res = self.ctx.writer.finish(*f).await;
        // The reply is told before the lifecycle end that follows it.
        if let Ok(Some(a)) = &res {
            if let Some(m) = a.display.clone() {
                told(&self.ctx, &self.run.run_id, self.seq, m).await;
            }
        }
        self.pending.push_back(Input::Persisted(res.map(|_| ())));
    }

    /// The run is finished: its reply through the `message_sending` hooks, the observers
    /// told, the approval it waited for closed.
    async fn finish(&mut self, mut t: Box<RunTerminal>) -> Driven {
        self.guard_payloads(&mut t).await;
        // After the guards: the footer and the trace are the gateway's, not the reply's.
        self.turn.notes().apply(&mut t.payloads);
        let (ctx, hook_ctx) = (&self.ctx, &self.hook_ctx);
        ctx.observe_later(hook_ctx, "message_sent", || {
            t.payloads
                .iter()
                .map(|p| json!({"content": p.text, "success": true}))
                .collect()
        });
        ctx.observe_later(hook_ctx, "agent_end", || {
            vec![json!({
                "status": t.status, "error": t.error,
                "durationMs": t.duration_ms, "stopReason": t.stop_reason,
            })]
        });
        if let Some(id) = self.pending_approval.take() {
            let why = ipc::approval::ApprovalClosed::RunEnded;
            let _ = ctx
                .out
                .send(WorkerToControl::ApprovalClosed { id, why })
                .await;
        }
        Driven {
            terminal: *t,
            steered: self.turn.steered(),
        }
    }

    /// Waits for the next input: from the model stream, the tool, a cancel, a steered
    /// message, an operator's decision or the turn's deadline, whichever comes first.
    async fn next_event(&mut self) -> Event {
        let deadline = self.turn.next_deadline();
        tokio::select! {
            item = next_model(&mut self.call, &mut self.held), if self.call.is_some() || self.held.is_some() => Event::Model(item),
            item = next_tool(&mut self.tool), if self.tool.is_some() => Event::Tool(item),
            changed = self.cancel.changed(), if self.cancel_open => Event::Cancel(changed),
            s = self.steer.recv(), if self.steer_open => Event::Steer(s),
            d = self.decisions.recv(), if self.decisions_open => Event::Decision(d),
            _ = sleep_until(deadline), if deadline.is_some() => Event::Tick,
        }
    }

    /// The turn's input for what woke the driver, if it is one.
    async fn on_event(&mut self, event: Event) -> Option<Input> {
        match event {
            Event::Model(item) => Some(self.on_model(item).await),
            Event::Tool(item) => Some(self.on_tool(item)),
            Event::Cancel(changed) => self.on_cancel(changed),
            Event::Steer(msg) => self.on_steer(msg).await,
            Event::Decision(d) => self.on_decision(d),
            Event::Tick => Some(Input::Tick),
        }
    }

    /// The model stream's next item, or its end without one; the request is counted for
    /// `/metrics` once it is over.
    async fn on_model(&mut self, item: Option<ModelItem>) -> Input {
        match item {
            Some(Ok(ev)) => {
                if matches!(ev, LlmEvent::Done(_)) {
                    if let Some(p) = self.calling.take() {
                        self.ctx.model_request(&p, "ok");
                    }
                    // The response is over: steered messages already sent (and ones
                    // taken back by an abort) count before the turn moves on, whichever
                    // channel was read first.
                    while let Ok(m) = self.steer.try_recv() {
                        match m {
                            SteerMsg::Add(s) if self.turn.accepts_steering() => {
                                self.pending.push_back(Input::Steer(s));
                            }
                            SteerMsg::Add(_) => {}
                            SteerMsg::Drop(id) => self.turn.unsteer(&id),
                        }
                    }
                }
                Input::Model(ev)
            }
            Some(Err(e)) => {
                if let Some(p) = self.calling.take() {
                    self.ctx.model_request(&p, failure_class(&e));
                }
                Input::ModelFailed(e)
            }
            None => {
                if let Some(p) = self.calling.take() {
                    self.ctx.model_request(&p, "network");
                }
                self.call = None;
                Input::ModelFailed(LlmError::Transport(
                    "the model stream ended without a result".into(),
                ))
            }
        }
    }

    fn on_tool(&mut self, item: ToolItem) -> Input {
        match item {
            ToolItem::Update(text) => Input::ToolUpdate(text),
            ToolItem::Done(outcome) => {
                self.tool = None;
                Input::ToolDone(outcome)
            }
        }
    }

    /// The cancel channel changed: a cancel, unless it was cleared or closed.
    fn on_cancel(&mut self, changed: Result<(), watch::error::RecvError>) -> Option<Input> {
        match changed {
            Ok(()) => match *self.cancel.borrow_and_update() {
                Some(reason) => {
                    if reason == StopReason::Rpc {
                        // A user stop is the `command:stop` internal hook event (R-H1).
                        let hook_ctx = self.hook_ctx.clone();
                        tokio::spawn(async move {
                            hooks::run_internal(&hook_ctx, "command:stop", serde_json::json!({}))
                                .await;
                        });
                    }
                    Some(Input::Cancel(reason))
                }
                None => None,
            },
            Err(_) => {
                self.cancel_open = false;
                None
            }
        }
    }

    /// A message steered into the session, or one taken back.
    async fn on_steer(&mut self, msg: Option<SteerMsg>) -> Option<Input> {
        match msg {
            // Taken: its message goes into this turn's next model request (R-B3), and its
            // run is told so once it is recorded (`append`). Declined ones (the outcome is
            // being recorded) are handed back to run after.
            Some(SteerMsg::Add(s)) if self.turn.accepts_steering() => Some(Input::Steer(s)),
            Some(SteerMsg::Add(_)) => None,
            Some(SteerMsg::Drop(id)) => {
                self.turn.unsteer(&id);
                None
            }
            None => {
                self.steer_open = false;
                None
            }
        }
    }

    /// An operator's decision on one of the run's approvals.
    fn on_decision(&mut self, d: Option<Decided>) -> Option<Input> {
        match d {
            Some(d) => {
                if self.pending_approval.as_deref() == Some(d.id.as_str()) {
                    self.pending_approval = None;
                }
                Some(Input::ApprovalDecided {
                    id: d.id,
                    allow: d.decision.allows(),
                })
            }
            None => {
                self.decisions_open = false;
                None
            }
        }
    }
}

/// The turn's fixed facts, from the agent's spec and the run's request.
/// What clients see of the run's reasoning. A mode from a newer supervisor this build does
/// not know shows nothing: reasoning reaches clients only when asked for in words it knows.
fn shown_reasoning(asked: Option<ReasoningMode>) -> ReasoningMode {
    match asked {
        None | Some(ReasoningMode::Off | ReasoningMode::Unknown) => ReasoningMode::Off,
        Some(ReasoningMode::On) => ReasoningMode::On,
        Some(ReasoningMode::Stream) => ReasoningMode::Stream,
    }
}

fn turn_spec(ctx: &Ctx, run: &SubmitRun, approval_ms: u64) -> TurnSpec {
    let model = &ctx.spec.model;
    TurnSpec {
        run_id: run.run_id.clone(),
        session_key: run.session_key.clone(),
        provider: model.provider.clone(),
        model: model.model.clone(),
        timeout: run.timeout_ms.map(std::time::Duration::from_millis),
        idle_timeout: std::time::Duration::from_millis(model.idle_timeout_ms),
        context: ContextBudget::new(model.context_window, &ctx.spec.compaction),
        compaction: ctx.spec.compaction.clone(),
        retry_base: std::time::Duration::from_millis(model.retry_base_ms.unwrap_or(1000)),
        retry_max: std::time::Duration::from_millis(model.retry_max_ms.unwrap_or(30_000)),
        approval_timeout: std::time::Duration::from_millis(approval_ms),
        reasoning: shown_reasoning(run.reasoning),
        verbose: run.verbose.unwrap_or_default(),
        blocks: run.blocks,
        notes: crate::agent::notes::NotesSpec {
            usage_footer: run.usage_footer.clone(),
            raw_trace: (run.trace == Some(ipc::footer::TraceLevel::Raw)).then(|| {
                crate::agent::notes::RawTraceSpec {
                    message: run.message.clone(),
                    thinking: run.thinking.map(|t| t.as_str().to_owned()),
                    reasoning: shown_reasoning(run.reasoning),
                    verbose: run.verbose.unwrap_or_default(),
                    blocks: run.blocks.map(|b| b.boundary),
                }
            }),
        },
        // A model the request named is strict: no fallback, as in OpenClaw.
        fallbacks: if run.strict_model {
            Vec::new()
        } else {
            ctx.spec
                .fallbacks
                .iter()
                .map(|f| ModelChoice {
                    provider: f.provider.clone(),
                    model: f.model.clone(),
                    context_window: ctx
                        .spec
                        .providers
                        .iter()
                        .find(|p| p.provider == f.provider)
                        .and_then(|p| p.context_window),
                })
                .collect()
        },
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 22 item 5: a reasoning mode from a newer supervisor that this build does not
    /// know shows nothing (as before, when an unparsed name fell back to `off`).
    #[test]
    fn reasoning_is_shown_only_in_a_mode_this_build_knows() {
        assert_eq!(shown_reasoning(None), ReasoningMode::Off);
        assert_eq!(
            shown_reasoning(Some(ReasoningMode::Unknown)),
            ReasoningMode::Off
        );
        assert_eq!(shown_reasoning(Some(ReasoningMode::On)), ReasoningMode::On);
        assert_eq!(
            shown_reasoning(Some(ReasoningMode::Stream)),
            ReasoningMode::Stream
        );
    }
}
