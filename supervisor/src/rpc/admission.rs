//! Run admission, shared by `agent`, `chat.send` and `sessions.create`: routing a message to
//! an agent and session (R-A1), the run's model, thinking and queue mode (request > session >
//! config), the gateway's refusals (draining, a failed agent), the durable record before the
//! ack (idempotency, R-A3), and the hand-over to the control actor; and the order in which
//! one connection's turn requests are admitted ([`AdmissionTurn`]).

use super::*;
use crate::backend::local::{self, RunStart, StartRefused, Started};

/// A turn request's place in its connection's order of admission: it is admitted after
/// the one read before it (`previous` resolves when that one is dispatched or refused) and
/// lets the next one go when dropped. So messages sent back to back on one connection run
/// and are recorded in the order they were sent, though each is handled concurrently.
pub struct AdmissionTurn {
    previous: Option<tokio::sync::oneshot::Receiver<()>>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

impl AdmissionTurn {
    /// The next turn after `previous` (the receiver of the turn before, if any); returns it
    /// and the receiver the next turn waits on.
    pub fn after(
        previous: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> (AdmissionTurn, tokio::sync::oneshot::Receiver<()>) {
        let (done, next) = tokio::sync::oneshot::channel();
        (
            AdmissionTurn {
                previous,
                done: Some(done),
            },
            next,
        )
    }

    /// This turn split in two, for a request whose handler may let its turn go before the
    /// request is answered (an early refusal): the handler gets the first half; the next
    /// request goes only once that half is released *and* [`Held::release_after`]'s
    /// `answered` has come, so it is admitted after this request's answer is queued.
    pub(super) fn held_until_answered(mut self) -> (AdmissionTurn, Held) {
        let (done, released) = tokio::sync::oneshot::channel();
        let handed = AdmissionTurn {
            previous: self.previous.take(),
            done: Some(done),
        };
        (
            handed,
            Held {
                released,
                rest: self,
            },
        )
    }

    pub(super) async fn wait_previous(&mut self) {
        if let Some(p) = self.previous.take() {
            let _ = p.await;
        }
    }
}

/// The half of a turn [`AdmissionTurn::held_until_answered`] keeps back.
pub(super) struct Held {
    released: tokio::sync::oneshot::Receiver<()>,
    rest: AdmissionTurn,
}

impl Held {
    /// Lets the next request go once the handler released its half and `answered` came.
    pub(super) async fn release_after(self, answered: impl std::future::Future<Output = ()>) {
        let _ = self.released.await;
        answered.await;
        drop(self.rest);
    }
}

impl Drop for AdmissionTurn {
    /// A turn refused before its turn came (bad params, unknown agent, draining) still lets
    /// the next one go only after the one before it: order holds past a refusal.
    fn drop(&mut self) {
        if let (Some(previous), Some(done)) = (self.previous.take(), self.done.take()) {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        let _ = previous.await;
                        drop(done);
                    });
                }
                // No runtime (cannot happen in the gateway): releasing at once is the only
                // choice left.
                Err(_) => drop(done),
            }
        }
    }
}

/// Whether `method` is admitted in its connection's order (see [`AdmissionTurn`]).
pub fn is_ordered(method: &str) -> bool {
    matches!(
        Method::parse(method),
        Some(Method::Agent | Method::ChatSend | Method::SessionsCreate)
    )
}

/// Where a run goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub agent_id: String,
    pub session_key: String,
}

/// Why a message cannot be routed to an agent and session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown agent id {0:?}")]
    UnknownAgent(String),
    #[error("sessionKey must be 1-512 characters")]
    KeyLength,
    #[error(
        "sessionKey must not contain control or bidirectional-text characters (found U+{0:04X})"
    )]
    KeyUnshowable(u32),
    #[error("invalid sessionKey {0:?}: expected agent:<agentId>:<key>")]
    KeyShape(String),
    #[error("sessionKey {key:?} belongs to agent {owner:?}, not {asked:?}")]
    KeyOfAnotherAgent {
        key: String,
        owner: String,
        asked: String,
    },
    #[error("sessionId must be resolved to its session first")]
    IdUnresolved,
    #[error("sessionId must be 1-512 characters")]
    IdLength,
    #[error("cannot look the sessionId up: {0}")]
    IdLookup(String),
    #[error("unknown sessionId {0:?}: no session on this gateway has it (pass sessionKey)")]
    UnknownId(String),
    #[error("sessionId {id:?} belongs to agent {agent:?}, which is not configured")]
    IdOfUnconfiguredAgent { id: String, agent: String },
    #[error("sessionId {id:?} belongs to agent {agent:?}, not {asked:?}")]
    IdOfAnotherAgent {
        id: String,
        agent: String,
        asked: String,
    },
}

/// Resolves agent and session key (R-A1): `sessionKey` (or an `agent:` key in `to`) wins,
/// then `agentId`'s main key `agent:<id>:main`, then `agent:main:main`. Bare keys are scoped
/// to the agent. Only configured agents are accepted.
pub fn route(p: &AgentParams, is_configured: impl Fn(&str) -> bool) -> Result<Route, RouteError> {
    let unknown = |raw: &str| RouteError::UnknownAgent(raw.to_owned());
    let explicit = match &p.agent_id {
        Some(raw) => {
            let id = AgentId::parse(raw).map_err(|_| unknown(raw))?;
            if !is_configured(id.as_str()) {
                return Err(unknown(raw));
            }
            Some(id.as_str().to_owned())
        }
        None => None,
    };
    let key = p
        .session_key
        .clone()
        .or_else(|| p.to.clone().filter(|t| t.starts_with("agent:")));
    if let Some(key) = key {
        let key = key.trim().to_owned();
        if key.is_empty() || key.len() > 512 {
            return Err(RouteError::KeyLength);
        }
        // Keys are printed to operators (CLI tables, logs, the Control UI): one that could
        // move a cursor, clear a screen or reorder text is refused here, the one place every
        // method that takes a client-chosen key routes it.
        if let Some(c) = key.chars().find(|&c| ipc::text::is_unshowable(c)) {
            return Err(RouteError::KeyUnshowable(c as u32));
        }
        if let Some(rest) = key.strip_prefix("agent:") {
            let (agent_raw, tail) = rest
                .split_once(':')
                .filter(|(_, tail)| !tail.is_empty())
                .ok_or_else(|| RouteError::KeyShape(key.clone()))?;
            let id = AgentId::parse(agent_raw).map_err(|_| unknown(agent_raw))?;
            if !is_configured(id.as_str()) {
                return Err(unknown(agent_raw));
            }
            if let Some(e) = &explicit {
                if e != id.as_str() {
                    return Err(RouteError::KeyOfAnotherAgent {
                        key: key.clone(),
                        owner: id.as_str().to_owned(),
                        asked: e.clone(),
                    });
                }
            }
            return Ok(Route {
                agent_id: id.as_str().to_owned(),
                session_key: format!("agent:{}:{tail}", id.as_str()),
            });
        }
        let agent_id = explicit.unwrap_or_else(|| "main".into());
        return Ok(Route {
            session_key: format!("agent:{agent_id}:{key}"),
            agent_id,
        });
    }
    if p.session_id.is_some() {
        // Callers resolve a `sessionId` first (`session_id_only`, `resolve_session_id`).
        return Err(RouteError::IdUnresolved);
    }
    let agent_id = explicit.unwrap_or_else(|| "main".into());
    Ok(Route {
        session_key: format!("agent:{agent_id}:main"),
        agent_id,
    })
}

/// The `sessionId` a run is addressed by alone (R-A1): no `sessionKey` and no `agent:` key
/// in `to`, which win over it.
pub fn session_id_only(p: &AgentParams) -> Option<&str> {
    let keyed = p.session_key.is_some() || p.to.as_ref().is_some_and(|t| t.starts_with("agent:"));
    (!keyed).then_some(p.session_id.as_deref()).flatten()
}

/// The session a `sessionId` names (R-A1): the session this gateway's index knows it for,
/// checked against an explicit `agentId`. An id this gateway has not seen is refused
/// (OpenClaw resolves an id only to an existing session; a new one needs a key).
pub(super) async fn resolve_session_id(
    gw: &Gateway,
    id: &str,
    agent_id: Option<&str>,
) -> Result<Route, RouteError> {
    let id = id.trim();
    if id.is_empty() || id.len() > 512 {
        return Err(RouteError::IdLength);
    }
    let found = gw
        .db
        .session_by_id(id.to_owned())
        .await
        .map_err(|e| RouteError::IdLookup(e.to_string()))?;
    let Some((session_key, agent)) = found else {
        return Err(RouteError::UnknownId(id.to_owned()));
    };
    if gw.config().agent(&agent).is_none() {
        return Err(RouteError::IdOfUnconfiguredAgent {
            id: id.to_owned(),
            agent,
        });
    }
    if let Some(explicit) = agent_id {
        let explicit =
            AgentId::parse(explicit).map_err(|_| RouteError::UnknownAgent(explicit.to_owned()))?;
        if explicit.as_str() != agent {
            return Err(RouteError::IdOfAnotherAgent {
                id: id.to_owned(),
                agent,
                asked: explicit.as_str().to_owned(),
            });
        }
    }
    Ok(Route {
        agent_id: agent,
        session_key,
    })
}

/// What to admit: a routed message with its run settings.
pub(super) struct Admission {
    /// Its place in the connection's order (`None`: not ordered).
    pub(super) turn: Option<AdmissionTurn>,
    pub(super) run_id: String,
    pub(super) route: Route,
    pub(super) message: String,
    pub(super) extra_system_prompt: Option<String>,
    /// Explicit run timeout in ms (`Some(0)` = none); `None` = the agent's default.
    pub(super) timeout_ms: Option<u64>,
    /// `agent` params `provider` / `model`, as sent.
    pub(super) provider: Option<String>,
    pub(super) model: Option<String>,
    /// `thinking` (a level name), as sent.
    pub(super) thinking: Option<String>,
    /// `queueMode`, as sent.
    pub(super) queue_mode: Option<String>,
    /// `verbose` (a level name), as sent (`agent`) or as an inline directive said.
    pub(super) verbose: Option<String>,
    /// `blockStreaming`, as sent (`agent` only; a `chat.send` run never streams blocks: as
    /// on OpenClaw, its reply is one final message).
    pub(super) block_streaming: Option<bool>,
    /// The message's attachments, checked ([`super::attachments::normalize`]).
    pub(super) attachments: Vec<ipc::control::Attachment>,
    /// Images need a model that takes them (`agent`, as OpenClaw refuses); otherwise a
    /// text-only model gets a note for each (`chat.send`).
    pub(super) images_need_model: bool,
}

impl Admission {
    /// What identifies the request besides its route.
    fn request_hash(&self) -> String {
        request_hash(
            &self.message,
            self.extra_system_prompt.as_deref(),
            &self.attachments,
        )
    }
}

/// Why a run's `provider` / `model` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ModelChoiceError {
    #[error("provider {0:?} needs a model too (model: \"<model>\" or \"{0}/<model>\")")]
    ProviderWithoutModel(String),
    #[error("model must be a non-empty model name")]
    EmptyModel,
    /// The provider asked for, and the configured ones, joined.
    #[error("unknown provider {0:?} (configured: {1})")]
    UnknownProvider(String, String),
    #[error("provider {provider:?} uses api {api:?}, which this loopgate build cannot call (supported: openai-completions, openai-responses, anthropic-messages, ollama)")]
    NotCallable { provider: String, api: &'static str },
}

/// The provider and model a run asked for, checked against the config: `model` may be
/// `"<provider>/<model>"` (the provider must be configured) or a bare model name on
/// `provider` (default: the agent's). `None` when it is the agent's own model.
pub(super) fn run_model(
    agent: &crate::config::AgentConfig,
    own: &crate::config::ResolvedModel,
    provider: Option<String>,
    model: Option<String>,
) -> Result<Option<ipc::control::RunModel>, ModelChoiceError> {
    let known = |p: &str| agent.providers.iter().find(|r| r.provider == p);
    let (provider, model) = match (provider, model) {
        (None, None) => return Ok(None),
        (Some(p), None) => return Err(ModelChoiceError::ProviderWithoutModel(p)),
        (Some(p), Some(m)) => {
            let m = m
                .strip_prefix(&format!("{p}/"))
                .map(str::to_owned)
                .unwrap_or(m);
            (p, m)
        }
        // As OpenClaw reads a model ref: what comes before the first `/` is the provider, so
        // an unknown one is refused rather than sent to the agent's provider as a model name.
        (None, Some(m)) => match m.split_once('/') {
            Some((p, rest)) => (p.to_owned(), rest.to_owned()),
            None => (own.provider.clone(), m),
        },
    };
    if model.trim().is_empty() {
        return Err(ModelChoiceError::EmptyModel);
    }
    let Some(p) = known(&provider) else {
        let configured: Vec<&str> = agent
            .providers
            .iter()
            .map(|r| r.provider.as_str())
            .collect();
        return Err(ModelChoiceError::UnknownProvider(
            provider,
            configured.join(", "),
        ));
    };
    if !p.api.implemented() {
        return Err(ModelChoiceError::NotCallable {
            provider,
            api: p.api.as_str(),
        });
    }
    if provider == own.provider && model == own.model {
        return Ok(None);
    }
    Ok(Some(ipc::control::RunModel { provider, model }))
}

/// How admission went. The acknowledgement of a new run was already sent.
pub(super) enum Admitted {
    Started(oneshot::Receiver<Arc<Outcome>>),
    InFlight {
        agent_id: String,
        session_key: String,
    },
    Finished(crate::outcome::StoredTerminal),
    /// Cluster mode: accepted here, run by the agent's owner; its outcome when recorded.
    Elsewhere(
        tokio::task::JoinHandle<
            Result<crate::outcome::StoredTerminal, crate::backend::ClusterRunError>,
        >,
    ),
    Refused(ErrorShape),
}

/// How a run will execute, decided before it is recorded: the agent's timeout, the model
/// (`None`: the agent's own), whether it is strict, thinking and reasoning, queue policy.
pub(super) struct Plan {
    agent_timeout_ms: Option<u64>,
    run_model: Option<ipc::control::RunModel>,
    strict_model: bool,
    levels: thinking::RunThinking,
    queue: ipc::queue::QueuePolicy,
    verbose: ipc::thinking::VerboseLevel,
    blocks: Option<ipc::blocks::BlockStreaming>,
}

/// Checks the agent can run, records the run durably, sends `ack(acceptedAt)` as the
/// request's first answer and hands the run to the control actor. Shared by `agent`,
/// `chat.send` and `sessions.create`.
pub(super) async fn admit<M: MethodSpec>(
    gw: &Arc<Gateway>,
    first: RunAnswers<'_, M>,
    mut a: Admission,
    ack: impl FnOnce(u64) -> M::Result,
) -> Admitted {
    // Admitted after the request read before it on this connection; the next one goes when
    // this returns (dispatched, refused or answered). Planned only then: a session setting
    // the previous message changed (`/think high`, then a question) applies to this one.
    let mut turn = a.turn.take();
    if let Some(t) = &mut turn {
        t.wait_previous().await;
    }
    let plan = match plan(gw, &mut a) {
        Ok(plan) => plan,
        Err(refused) => return Admitted::Refused(refused),
    };
    if let Some(refused) = gateway_refusal(gw, &a.route.agent_id) {
        return Admitted::Refused(refused);
    }
    let accepted_at = now_ms();
    let run = RunStart {
        agent_id: a.route.agent_id.clone(),
        request_hash: a.request_hash(),
        run: submit_run(&mut a, plan, accepted_at),
    };
    if let Some(c) = gw.backend.elsewhere() {
        return admit_in_cluster(gw, c, first, run, ack).await;
    }
    let acked = async |at| first.ack(ack(at)).await;
    match local::start(&gw.db, &gw.control, run, local::Entry::Admitted, acked).await {
        Ok(Started::New(rx)) => Admitted::Started(rx),
        Ok(Started::InFlight {
            agent_id,
            session_key,
        }) => Admitted::InFlight {
            agent_id,
            session_key,
        },
        Ok(Started::Finished(t)) => Admitted::Finished(t),
        Err(refused) => Admitted::Refused(start_refusal(refused)),
    }
}

/// The answer to a run that could not start: the queues full and the actor busy or gone
/// are retryable (`UNAVAILABLE`), a key reused for another request is not.
fn start_refusal(refused: StartRefused) -> ErrorShape {
    match refused {
        StartRefused::QueueFull(full) => ErrorShape::unavailable(full.0, Some(1000))
            .with_details(json!({"reason": "queue-full"})),
        StartRefused::Control(e) => control_error(e),
        StartRefused::Record(_) => ErrorShape::unavailable(refused.to_string(), Some(500)),
        StartRefused::Conflict { .. } => ErrorShape::invalid(refused.to_string()),
    }
}

/// What the run will be, from the request, the session's own settings and the config; or
/// why it cannot run.
fn plan(gw: &Gateway, a: &mut Admission) -> Result<Plan, ErrorShape> {
    let config = gw.config();
    let Some(agent) = config.agent(&a.route.agent_id) else {
        return Err(ErrorShape::invalid(format!(
            "unknown agent id {:?}",
            a.route.agent_id
        )));
    };
    let Some(model) = &agent.model else {
        return Err(ErrorShape::invalid(format!(
            "agent {:?} has no model configured: set agents.defaults.model (\"<provider>/<model>\") in {}",
            a.route.agent_id,
            config.path.display()
        )));
    };
    if !model.api.implemented() {
        return Err(ErrorShape::invalid(format!(
            "provider {:?} uses api {:?}, which this loopgate build cannot call (supported: openai-completions, openai-responses, anthropic-messages, ollama)",
            model.provider,
            model.api.as_str()
        )));
    }
    // A model the request names is strict (no fallback); a session's own model
    // (`sessions.patch {model}`) applies unless the request names one.
    let strict_model = a.provider.is_some() || a.model.is_some();
    let session = gw.session_overrides(&a.route.session_key);
    if !strict_model {
        a.model = session.model.clone();
    }
    let invalid =
        |e: &dyn std::fmt::Display| ErrorShape::invalid(format!("invalid agent params: {e}"));
    let run_model =
        run_model(agent, model, a.provider.take(), a.model.take()).map_err(|e| invalid(&e))?;
    let levels = thinking::resolve(
        agent,
        model,
        run_model.as_ref(),
        a.thinking.as_deref(),
        &session,
    )
    .map_err(|e| invalid(&e))?;
    if a.images_need_model {
        check_images(agent, model, run_model.as_ref(), &a.attachments)?;
    }
    // Request > session > config (R-B3).
    let mut queue = config.queue;
    match a
        .queue_mode
        .as_deref()
        .map(|m| (m, ipc::queue::QueueMode::parse(m)))
    {
        Some((_, Some(mode))) => queue.mode = mode,
        Some((m, None)) => {
            return Err(ErrorShape::invalid(format!(
                "invalid queueMode {m:?}: use steer, followup, collect or interrupt"
            )))
        }
        None => {
            if let Some(mode) = session.queue_mode {
                queue.mode = mode;
            }
        }
    }
    // Request > session > agent (R-B1).
    let verbose = match a.verbose.as_deref() {
        Some(v) => ipc::thinking::VerboseLevel::parse(v)
            .ok_or_else(|| invalid(&format!("verbose level {v:?} must be off, on or full")))?,
        None => session.verbose.unwrap_or(agent.verbose_default),
    };
    // Request > agent (R-D5).
    let blocks = a
        .block_streaming
        .unwrap_or(agent.block_streaming.enabled)
        .then_some(agent.block_streaming.spec);
    Ok(Plan {
        blocks,
        agent_timeout_ms: agent.timeout_ms,
        run_model,
        strict_model,
        levels,
        queue,
        verbose,
    })
}

/// An `agent` run's images need a model that takes them: refused as OpenClaw refuses
/// (`UnsupportedAttachmentError`), naming the first image.
fn check_images(
    agent: &crate::config::AgentConfig,
    own: &crate::config::ResolvedModel,
    run_model: Option<&ipc::control::RunModel>,
    attachments: &[ipc::control::Attachment],
) -> Result<(), ErrorShape> {
    let Some(image) = attachments
        .iter()
        .find(|a| a.kind == ipc::control::AttachmentKind::Image)
    else {
        return Ok(());
    };
    if thinking::run_caps(agent, own, run_model).images {
        return Ok(());
    }
    let name = image.file_name.as_deref().unwrap_or("(unnamed)");
    Err(ErrorShape::invalid(format!(
        "UnsupportedAttachmentError: attachment {name}: active model does not accept image inputs"
    )))
}

/// Why the gateway takes no run for `agent_id` now: it is draining, or the agent's
/// crash-loop breaker is open.
fn gateway_refusal(gw: &Gateway, agent_id: &str) -> Option<ErrorShape> {
    if gw.draining.load(Ordering::Relaxed) || gw.stopping.is_cancelled() {
        return Some(
            ErrorShape::unavailable(
                "gateway is draining; retry on the restarted gateway",
                Some(1000),
            )
            .with_details(json!({"reason": "draining"})),
        );
    }
    let failed = gw.failed.borrow();
    let reason = failed.get(agent_id)?;
    Some(
        ErrorShape::unavailable(
            crate::control::failed_agent_message(agent_id, reason),
            Some(5000),
        )
        .with_details(json!({"reason": "agent-failed"})),
    )
}

/// The run as a worker gets it.
fn submit_run(a: &mut Admission, plan: Plan, accepted_at: u64) -> SubmitRun {
    let timeout_ms = match a.timeout_ms {
        Some(0) => None,
        Some(ms) => Some(ms),
        None => plan.agent_timeout_ms,
    };
    SubmitRun {
        run_id: a.run_id.clone(),
        session_key: a.route.session_key.clone(),
        message: std::mem::take(&mut a.message),
        extra_system_prompt: a.extra_system_prompt.take(),
        timeout_ms,
        accepted_at,
        model: plan.run_model,
        strict_model: plan.strict_model,
        thinking: plan.levels.thinking,
        reasoning: plan.levels.reasoning,
        queue: Some(plan.queue),
        attachments: std::mem::take(&mut a.attachments),
        verbose: (plan.verbose != ipc::thinking::VerboseLevel::Off).then_some(plan.verbose),
        blocks: plan.blocks,
    }
}

/// Cluster mode's admission (`[cluster]`): the key is claimed cluster-wide and the run
/// queued for its agent's owner, which may be this gateway or another; the answer comes
/// from the cluster's outcome record. This gateway holds the run's room in its queues until
/// then, and the owner charges it again as it starts it (`backend::local::start`).
async fn admit_in_cluster<M: MethodSpec>(
    gw: &Gateway,
    c: &Arc<dyn crate::backend::ClusterBackend>,
    first: RunAnswers<'_, M>,
    run: RunStart,
    ack: impl FnOnce(u64) -> M::Result,
) -> Admitted {
    use crate::backend::Submitted;
    // A run crosses the cluster as one NATS message: attachments past what it carries are
    // refused here, as hello-ok's `policy.attachments` says, not failed as unavailable.
    let policy = c.attachment_policy();
    let total: u64 = run.run.attachments.iter().map(|x| x.size_bytes).sum();
    if total > policy.max_bytes {
        return Admitted::Refused(ErrorShape::invalid(format!(
            "attachments exceed size limit ({total} > {} bytes in cluster mode: one run must fit the NATS servers' max_payload)",
            policy.max_bytes
        )));
    }
    let ask = local::room_for(&run, crate::control::Hold::Outcome);
    let room = match local::Room::reserve(&gw.control, ask).await {
        Ok(room) => room,
        Err(refused) => return Admitted::Refused(start_refusal(refused)),
    };
    let (run_id, accepted_at) = (run.run.run_id.clone(), run.run.accepted_at);
    match c.submit(run).await {
        Err(e) => {
            tracing::warn!(error = %e, "Cannot record an accepted run in the cluster.");
            Admitted::Refused(ErrorShape::unavailable(
                format!("cannot accept the run: {e}"),
                Some(1000),
            ))
        }
        Ok(Submitted::Conflict(why)) => Admitted::Refused(ErrorShape::invalid(format!(
            "idempotencyKey {run_id:?} was already used for a different request ({why}); use a new key for a new request"
        ))),
        Ok(Submitted::InFlight {
            agent_id,
            session_key,
        }) => Admitted::InFlight {
            agent_id,
            session_key,
        },
        Ok(Submitted::Finished(t)) => Admitted::Finished(t),
        Ok(Submitted::New) => {
            first.ack(ack(accepted_at)).await;
            let outcome = c.clone().outcome(run_id);
            Admitted::Elsewhere(tokio::spawn(async move {
                let done = outcome.await;
                // The run's room here is given back with its outcome.
                drop(room);
                done
            }))
        }
    }
}

/// What identifies a request besides its route: hex SHA-256 over the message, the extra
/// system prompt and the attachments' digests (none: as before attachments were taken).
pub(super) fn request_hash(
    message: &str,
    extra: Option<&str>,
    attachments: &[ipc::control::Attachment],
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(message.as_bytes());
    h.update([0u8]);
    if let Some(e) = extra {
        h.update(e.as_bytes());
    }
    for a in attachments {
        h.update([0u8]);
        h.update(a.digest.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The checks `agent` and `chat.send` share: a message with text, unless it has
/// attachments (`empty` says what is wrong otherwise), and an idempotency key.
pub(super) fn turn_params_error(
    message: &str,
    idempotency_key: &str,
    empty: &str,
    attached: bool,
) -> Option<String> {
    use ipc::gateway::{MAX_IDEMPOTENCY_KEY_BYTES, MAX_MESSAGE_BYTES};
    if message.trim().is_empty() && !attached {
        Some(empty.to_owned())
    } else if message.len() > MAX_MESSAGE_BYTES {
        Some(format!(
            "message is {} bytes; the limit is {MAX_MESSAGE_BYTES} bytes (put large content in a workspace file)",
            message.len()
        ))
    } else if idempotency_key.is_empty() {
        Some("idempotencyKey must be a non-empty string".to_owned())
    } else if idempotency_key.len() > MAX_IDEMPOTENCY_KEY_BYTES {
        Some(format!(
            "idempotencyKey is {} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}",
            idempotency_key.len()
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
