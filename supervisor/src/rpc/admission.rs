//! Run admission, shared by `agent`, `chat.send` and `sessions.create`: the run's model,
//! thinking and queue mode (request > session > config), the gateway's refusals (draining,
//! a failed agent), and the start (`backend::local::start`: the durable record before the
//! ack, R-A3, and the hand-over to the control actor), or in cluster mode the run queued for
//! its agent's owner. Routing a message to an agent and session (R-A1) is `routing`; the
//! order in which one connection's turn requests are admitted ([`AdmissionTurn`]) is `order`.

use super::*;
use crate::backend::local::{self, RunStart, StartRefused, Started};

mod order;
mod routing;

pub use order::{is_ordered, AdmissionTurn};
pub(super) use routing::resolve_session_id;
pub use routing::{route, session_id_only, Route, RouteError};

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
    /// The sender may see traces (an admin, as OpenClaw's `traceAuthorized`): only then does
    /// the session's trace level apply to the run.
    pub(super) trace_allowed: bool,
}

impl Admission {
    /// `message` on `route` with nothing else asked: no settings of its own, no attachments,
    /// not ordered, not an admin's.
    pub(super) fn bare(
        run_id: String,
        route: Route,
        message: String,
        timeout_ms: Option<u64>,
    ) -> Admission {
        Admission {
            turn: None,
            run_id,
            route,
            message,
            extra_system_prompt: None,
            timeout_ms,
            provider: None,
            model: None,
            thinking: None,
            queue_mode: None,
            verbose: None,
            block_streaming: None,
            attachments: Vec::new(),
            images_need_model: false,
            trace_allowed: false,
        }
    }

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
    usage_footer: Option<ipc::footer::UsageFooter>,
    trace: Option<ipc::footer::TraceLevel>,
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
    let plan = match plan(&gw.config(), &gw.sessions, &mut a) {
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

/// How a run the gateway starts itself went.
pub enum SelfStart {
    Started(Started),
    /// Its key was recorded before for another request (the job changed since it fired).
    KeyUsed,
    /// It cannot run as asked (no model, a bad setting); the text says why.
    Refused(String),
    /// It cannot run now (draining, the agent's breaker open, the queues full): later.
    Unavailable(String),
}

/// A run the gateway starts itself (a scheduled job's): planned as a client's run on the
/// same route would be, recorded under `run_id` before it is handed over, with no client
/// to acknowledge. The same `run_id` again starts nothing: its record answers.
pub async fn admit_self(
    gw: &Arc<Gateway>,
    route: Route,
    run_id: String,
    message: String,
    timeout_ms: Option<u64>,
    model: Option<String>,
    thinking: Option<String>,
) -> SelfStart {
    let mut a = Admission {
        model,
        thinking,
        ..Admission::bare(run_id, route, message, timeout_ms)
    };
    let plan = match plan(&gw.config(), &gw.sessions, &mut a) {
        Ok(plan) => plan,
        Err(refused) => return SelfStart::Refused(refused.message),
    };
    if let Some(refused) = gateway_refusal(gw, &a.route.agent_id) {
        return SelfStart::Unavailable(refused.message);
    }
    if gw.backend.elsewhere().is_some() {
        return SelfStart::Refused("scheduled runs are not fired in cluster mode yet".into());
    }
    let accepted_at = now_ms();
    let run = RunStart {
        agent_id: a.route.agent_id.clone(),
        request_hash: a.request_hash(),
        run: submit_run(&mut a, plan, accepted_at),
    };
    match local::start(
        &gw.db,
        &gw.control,
        run,
        local::Entry::Admitted,
        async |_| {},
    )
    .await
    {
        Ok(started) => SelfStart::Started(started),
        Err(StartRefused::Conflict { .. }) => SelfStart::KeyUsed,
        Err(refused) => SelfStart::Unavailable(refused.to_string()),
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

/// What the run will be, from the request, the session's own settings (`sessions`) and the
/// config; or why it cannot run.
fn plan(
    config: &Config,
    sessions: &SessionSettings,
    a: &mut Admission,
) -> Result<Plan, ErrorShape> {
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
    let session = sessions.of(&a.route.session_key);
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
    // The session's own debounce, cap and drop over the config's.
    let queue = session.queue_options.over(queue);
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
    let usage_footer = usage_footer(config, agent, model, run_model.as_ref(), &session);
    let trace = session
        .trace
        .filter(|t| a.trace_allowed && *t != ipc::footer::TraceLevel::Off);
    Ok(Plan {
        blocks,
        usage_footer,
        trace,
        agent_timeout_ms: agent.timeout_ms,
        run_model,
        strict_model,
        levels,
        queue,
        verbose,
    })
}

/// The usage footer of a session's runs (`/usage tokens|full`), with the prices of the
/// models the run may use (its own and the agent's fallbacks).
fn usage_footer(
    config: &Config,
    agent: &crate::config::AgentConfig,
    own: &crate::config::ResolvedModel,
    run_model: Option<&ipc::control::RunModel>,
    session: &crate::session_settings::SessionOverrides,
) -> Option<ipc::footer::UsageFooter> {
    use ipc::footer::ResponseUsage;
    let cost = match session.response_usage? {
        ResponseUsage::Tokens => false,
        ResponseUsage::Full => true,
        ResponseUsage::Off | ResponseUsage::Unknown => return None,
    };
    let first = match run_model {
        Some(m) => (m.provider.as_str(), m.model.as_str()),
        None => (own.provider.as_str(), own.model.as_str()),
    };
    let prices = std::iter::once(first)
        .chain(
            agent
                .fallbacks
                .iter()
                .map(|f| (f.provider.as_str(), f.model.as_str())),
        )
        .filter_map(|(provider, model)| {
            let p = config
                .prices
                .get(&(provider.to_owned(), model.to_owned()))?;
            Some(ipc::footer::ModelPrice {
                provider: provider.to_owned(),
                model: model.to_owned(),
                input: p.input,
                output: p.output,
                cache_read: p.cache_read,
                cache_write: p.cache_write,
            })
        })
        .filter(|_| cost)
        .collect();
    Some(ipc::footer::UsageFooter { cost, prices })
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
        usage_footer: plan.usage_footer,
        trace: plan.trace,
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
        Ok(Submitted::Conflict(why)) => {
            Admitted::Refused(start_refusal(StartRefused::Conflict { run_id, why }))
        }
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
    crate::secrets::hex(&h.finalize())
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
