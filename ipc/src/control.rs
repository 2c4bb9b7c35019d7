//! The supervisor <-> worker link: one message table per direction.
//!
//! The worker connects to the supervisor's per-spawn local socket and opens with [`Hello`]; the
//! supervisor answers [`HelloReply::Welcome`] (carrying the resolved [`AgentSpec`]) or
//! [`HelloReply::Rejected`]. Only then may [`ControlToWorker`] / [`WorkerToControl`] frames
//! flow. The handshake's shape is frozen forever; everything after it is versioned by
//! [`crate::version::PROTOCOL_VERSION`].
//!
//! Every enum is internally tagged (`type`) and has a `#[serde(other)] Unknown` variant, so a
//! newer peer's additions decode instead of failing. New fields are `Option` or defaulted.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::RpcError;
pub use crate::session_ops::{
    InputConsumed, MediaBytes, ResetReason, SessionOp, SessionReply, StoredMessage,
    MAX_INPUT_RUN_IDS,
};

/// First frame on every control connection, sent by the connecting side.
///
/// Since: protocol v1. Frozen: never change this shape.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub min_protocol: u32,
    pub build: String,
    pub role: Role,
}

impl fmt::Debug for Hello {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hello")
            .field("protocol", &self.protocol)
            .field("min_protocol", &self.min_protocol)
            .field("build", &self.build)
            .field("role", &self.role)
            .finish()
    }
}

/// Who is connecting.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Role {
    /// Since: protocol v1. A worker for `agent_id`. `token` was a one-time secret from the
    /// worker's environment until the supervisor checked the connecting process instead (its
    /// pid, from the socket); workers now send it empty.
    Worker { agent_id: String, token: String },
    #[serde(other)]
    Unknown,
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Worker { agent_id, .. } => f
                .debug_struct("Worker")
                .field("agent_id", agent_id)
                .field("token", &"<redacted>")
                .finish(),
            Role::Unknown => f.write_str("Unknown"),
        }
    }
}

/// The supervisor's answer to [`Hello`].
///
/// Since: protocol v1. Frozen: never change this shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HelloReply {
    /// Since: protocol v1.
    Welcome {
        protocol: u32,
        build: String,
        spec: Box<AgentSpec>,
    },
    /// Since: protocol v1.
    Rejected {
        reason: String,
        supported: Supported,
    },
    #[serde(other)]
    Unknown,
}

/// The protocol range a peer supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supported {
    pub min: u32,
    pub max: u32,
}

/// Everything a worker needs to run its agent, resolved from config by the supervisor.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub agent_id: String,
    /// The agent's SQLite database file.
    pub db_path: String,
    /// The agent's workspace directory (created on first use).
    pub workspace: String,
    pub model: ModelSpec,
    /// Most runs that may execute at once in this worker (across sessions).
    pub max_concurrent: u32,
    /// Per-file cap on bootstrap files injected into the system prompt, in characters.
    pub bootstrap_max_chars: u32,
    /// Cap on all bootstrap files together, in characters.
    pub bootstrap_total_max_chars: u32,
    /// Base system prompt (before bootstrap context and per-run additions).
    #[serde(default)]
    pub base_prompt: Option<String>,
    /// Most runs queued in the worker (all sessions) before new submissions are refused.
    pub max_queued: u32,
    /// Since: protocol v1. Policy of the `exec` tool.
    #[serde(default)]
    pub exec: ExecPolicy,
    /// Since: protocol v1. Plugin hooks (external commands), in no particular order.
    #[serde(default)]
    pub hooks: Vec<HookSpec>,
    /// Since: protocol v1. Tools offered to the model; `None`: all of [`TOOL_NAMES`].
    #[serde(default)]
    pub tools_allow: Option<Vec<String>>,
    /// Since: protocol v1. Auto-compaction settings.
    #[serde(default)]
    pub compaction: CompactionSpec,
    /// Since: protocol v1. Every configured provider, for a run whose `before_model_resolve`
    /// hook picks another provider or model. `model` is empty here: the hook names it.
    #[serde(default)]
    pub providers: Vec<ModelSpec>,
    /// Since: protocol v1. The operator's internal (`HOOK.md`) hooks for this agent:
    /// `<state>/agents/<id>/hooks`, outside every workspace (`None`: none).
    #[serde(default)]
    pub hooks_dir: Option<String>,
    /// Since: protocol v2 (additive). Models tried in order when the agent's model fails
    /// for good (its retries spent, or an attempt past its deadline); each is in `providers`.
    #[serde(default)]
    pub fallbacks: Vec<RunModel>,
    /// Since: protocol v2 (additive). Stuck-session diagnostics (R-I1..R-I3).
    #[serde(default)]
    pub diagnostics: crate::diagnostics::DiagnosticsPolicy,
    /// Since: protocol v2 (additive). The agent's disk budget (`[disk]`).
    #[serde(default)]
    pub disk: crate::disk::DiskPolicy,
    /// Since: protocol v2 (additive). Cluster mode: the agent's database is a cache of its
    /// journal in the cluster. The worker asks for the records it lacks (`JournalSync`)
    /// before it takes any run or session op, and records every transaction there
    /// (`Journal`) before committing it.
    #[serde(default)]
    pub journaled: bool,
    /// Since: protocol v2 (additive). The provider keys this worker may use, by the name of
    /// their variable (`api_key_env`): its agent's model and fallbacks (every configured
    /// provider's when a `before_model_resolve` hook may pick one). Sent in `Welcome`, after
    /// the worker has made itself non-dumpable: no key is ever in a worker's environment.
    #[serde(default, skip_serializing_if = "Secrets::is_empty")]
    pub secrets: Secrets,
    /// Since: protocol v2 (additive). The operator's settings of skills, by name
    /// (`[skills.entries.<name>]`, R-B6); a skill without any is offered as its workspace
    /// and host allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillSettings>,
    /// Since: protocol v2 (additive). The skills this agent may be offered, by name
    /// (`None`: every skill of its workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_filter: Option<Vec<String>>,
    /// Since: protocol v2 (additive). What `web_fetch` may reach (`tools.web_fetch`).
    #[serde(
        default,
        skip_serializing_if = "crate::web::WebFetchPolicy::is_default"
    )]
    pub web_fetch: crate::web::WebFetchPolicy,
}

/// Since: protocol v2 (additive). What the operator says of one skill (R-B6): whether it
/// may be offered, the variables its commands get while it is, and the variable its key is
/// in (`secrets`, by that name), given to its commands as the skill's `primaryEnv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillSettings {
    pub name: String,
    pub enabled: bool,
    /// Never printed (values may be tokens).
    #[serde(default, skip_serializing_if = "Secrets::is_empty")]
    pub env: Secrets,
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// Since: protocol v2 (additive). Secret values by name (provider keys by the name of their
/// variable). Never printed: `Debug` shows the names only.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secrets(pub std::collections::BTreeMap<String, String>);

impl Secrets {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Since: protocol v2 (additive). One transaction of an agent's journal, replayed into its
/// database: `changes` as `dbwriter::journal` wrote them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalChanges {
    pub seq: u64,
    pub changes: String,
}

/// Since: protocol v2 (additive). What became of a `Journal` write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JournalAck {
    /// Stored as record `seq`: the transaction may commit.
    Stored { seq: u64 },
    /// Refused: another record is last (a newer owner took the agent over, or this worker
    /// missed a record). Nothing was stored.
    Refused { reason: String },
    /// Not known to be stored (the engine did not answer, this gateway does not own the
    /// agent): the transaction must not commit, and the worker's copy may be behind.
    Failed { error: String },
    #[serde(other)]
    Unknown,
}

/// When and how much of a session's context is summarized (R-B7, OpenClaw section 6.8).
///
/// Since: protocol v1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionSpec {
    /// Tokens kept free for the reply: compaction starts when the estimated prompt exceeds
    /// the context window minus this (`None`: 20 000, at most a quarter of the window).
    #[serde(default)]
    pub reserve_tokens: Option<u64>,
    /// Recent context kept verbatim (`None`: 20 000, at most a quarter of the window).
    #[serde(default)]
    pub keep_recent_tokens: Option<u64>,
}

/// The built-in tools, in the order they are offered.
/// The exit status of a worker that stopped because its agent's journal (cluster mode) did
/// not take it: it could not sync (this gateway does not own the agent, or the engine did
/// not answer) or a write was refused or unconfirmed. Not a crash: the supervisor starts
/// the next worker only when there is work for it, and never counts it toward a crash loop.
/// Since: protocol v2 (additive).
pub const EXIT_JOURNAL_STOPPED: u8 = 75;

/// The built-in tools' names (the table is `crate::tools`).
pub use crate::tools::TOOL_NAMES;

/// A plugin hook: an external command run for one event.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookSpec {
    /// The event, as configured under `[[hooks.<event>]]` (`gateway_*` events stay in the
    /// supervisor).
    pub event: HookEvent,
    /// Program and arguments (no shell).
    pub command: Vec<String>,
    /// Higher runs first.
    #[serde(default)]
    pub priority: i32,
    pub timeout_ms: u64,
}

/// Plugin hook events this build fires. Cross the link as their names (strings in v1, the
/// same bytes); a name this build does not know is `Unknown` and never fires.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    BeforeModelResolve,
    BeforeAgentReply,
    GatewayStart,
    GatewayStop,
    BeforeToolCall,
    AfterToolCall,
    ToolResultPersist,
    BeforePromptBuild,
    BeforeAgentStart,
    MessageSending,
    MessageReceived,
    MessageSent,
    SessionStart,
    SessionEnd,
    AgentEnd,
    BeforeCompaction,
    AfterCompaction,
    #[serde(other)]
    Unknown,
}

impl HookEvent {
    /// Every event that fires (not `Unknown`).
    pub const ALL: [HookEvent; 17] = [
        HookEvent::BeforeModelResolve,
        HookEvent::BeforeAgentReply,
        HookEvent::GatewayStart,
        HookEvent::GatewayStop,
        HookEvent::BeforeToolCall,
        HookEvent::AfterToolCall,
        HookEvent::ToolResultPersist,
        HookEvent::BeforePromptBuild,
        HookEvent::BeforeAgentStart,
        HookEvent::MessageSending,
        HookEvent::MessageReceived,
        HookEvent::MessageSent,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::AgentEnd,
        HookEvent::BeforeCompaction,
        HookEvent::AfterCompaction,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::BeforeModelResolve => "before_model_resolve",
            HookEvent::BeforeAgentReply => "before_agent_reply",
            HookEvent::GatewayStart => "gateway_start",
            HookEvent::GatewayStop => "gateway_stop",
            HookEvent::BeforeToolCall => "before_tool_call",
            HookEvent::AfterToolCall => "after_tool_call",
            HookEvent::ToolResultPersist => "tool_result_persist",
            HookEvent::BeforePromptBuild => "before_prompt_build",
            HookEvent::BeforeAgentStart => "before_agent_start",
            HookEvent::MessageSending => "message_sending",
            HookEvent::MessageReceived => "message_received",
            HookEvent::MessageSent => "message_sent",
            HookEvent::SessionStart => "session_start",
            HookEvent::SessionEnd => "session_end",
            HookEvent::AgentEnd => "agent_end",
            HookEvent::BeforeCompaction => "before_compaction",
            HookEvent::AfterCompaction => "after_compaction",
            HookEvent::Unknown => "unknown",
        }
    }

    /// The event named `name`, if this build fires it.
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Run by the supervisor, not sent to workers.
    pub fn is_gateway(self) -> bool {
        matches!(self, HookEvent::GatewayStart | HookEvent::GatewayStop)
    }
}

/// A model's context window in tokens when its provider sets none.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Who may run `exec`. Crosses the link as its lowercase name (as the string it was in v1);
/// a name this build does not know is `Unknown`, treated as `Deny`.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecSecurity {
    #[default]
    Deny,
    Allowlist,
    Full,
    /// Since: protocol v2 (additive). Allowlisted commands run; others wait for an
    /// operator's approval.
    Ask,
    #[serde(other)]
    Unknown,
}

impl ExecSecurity {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecSecurity::Deny => "deny",
            ExecSecurity::Allowlist => "allowlist",
            ExecSecurity::Full => "full",
            ExecSecurity::Ask => "ask",
            ExecSecurity::Unknown => "unknown",
        }
    }
}

/// A provider's wire API, by its config name (a string in v1; same bytes). A name this build
/// does not know is `Unknown`.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderApi {
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "ollama")]
    Ollama,
    #[serde(other)]
    Unknown,
}

impl ProviderApi {
    /// The APIs a config may name.
    pub const KNOWN: [ProviderApi; 4] = [
        ProviderApi::OpenAiCompletions,
        ProviderApi::OpenAiResponses,
        ProviderApi::AnthropicMessages,
        ProviderApi::Ollama,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderApi::OpenAiCompletions => "openai-completions",
            ProviderApi::OpenAiResponses => "openai-responses",
            ProviderApi::AnthropicMessages => "anthropic-messages",
            ProviderApi::Ollama => "ollama",
            ProviderApi::Unknown => "unknown",
        }
    }

    /// Whether this build's worker can call this API.
    pub fn implemented(self) -> bool {
        !matches!(self, ProviderApi::Unknown)
    }
}

/// A `tool` event's phase (a string in v1; same bytes).
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolPhase {
    Start,
    Update,
    Result,
    #[serde(other)]
    Unknown,
}

/// A `compaction` event's phase (a string in v1; same bytes).
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionPhase {
    Start,
    End,
    #[serde(other)]
    Unknown,
}

/// Who may run shell commands through the `exec` tool.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecPolicy {
    /// `deny` (default), `allowlist`, `ask` or `full`.
    #[serde(default)]
    pub security: ExecSecurity,
    /// Command patterns for `allowlist` (`*` matches any run of characters).
    #[serde(default)]
    pub allowlist: Vec<String>,
    /// Per-command timeout.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Since: protocol v2 (additive). `ask`: how long a command waits for an operator
    /// before it is denied.
    #[serde(default)]
    pub approval_timeout_ms: Option<u64>,
}

impl Default for ExecPolicy {
    fn default() -> Self {
        Self {
            security: ExecSecurity::Deny,
            allowlist: Vec::new(),
            timeout_ms: None,
            approval_timeout_ms: None,
        }
    }
}

/// The model an agent calls and how to reach it.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Provider id from config (`models.providers.<id>`).
    pub provider: String,
    /// Wire API: `openai-completions`, `openai-responses`, `anthropic-messages`, `ollama`.
    pub api: ProviderApi,
    pub base_url: String,
    /// Name of the environment variable holding the API key, if any. The worker reads the
    /// variable itself; the key never crosses the link.
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub model: String,
    /// HTTP timeout for connecting and receiving response headers, in ms.
    pub request_timeout_ms: u64,
    /// Model idle timeout: the attempt is aborted when no stream data arrives for this long.
    pub idle_timeout_ms: u64,
    /// Since: protocol v1. Sampling temperature sent with each request (`None`: the
    /// provider's default).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Since: protocol v1. The model's context window in tokens (`None`: the worker's
    /// default).
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Since: protocol v2 (additive). First retry delay of a transient model failure, in ms
    /// (`None`: 1000); it doubles per retry up to `retry_max_ms` (`None`: 30 000).
    #[serde(default)]
    pub retry_base_ms: Option<u64>,
    #[serde(default)]
    pub retry_max_ms: Option<u64>,
    /// Since: protocol v2 (additive). Most tokens one response may generate (`None`: the
    /// provider's default; Anthropic's, which requires one, 8192).
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Since: protocol v2 (additive). The models of this provider that take image inputs
    /// (`input = ["text", "image"]` in their config); any other gets images as a note.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_models: Vec<String>,
}

impl fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelSpec")
            .field("provider", &self.provider)
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("model", &self.model)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("temperature", &self.temperature)
            .field("context_window", &self.context_window)
            .field("retry_base_ms", &self.retry_base_ms)
            .field("retry_max_ms", &self.retry_max_ms)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("image_models", &self.image_models)
            .finish()
    }
}

impl ModelSpec {
    /// Whether `model` of this provider takes image inputs.
    pub fn takes_images(&self, model: &str) -> bool {
        self.image_models.iter().any(|m| m == model)
    }
}

/// Why a run was stopped from outside.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A client asked (`chat.abort`, CLI interrupt).
    Rpc,
    /// The gateway or worker is restarting or draining.
    Restart,
    /// The run's own deadline passed.
    Timeout,
    /// Since: protocol v2 (additive). A message sent in `interrupt` mode replaced the run.
    Interrupt,
    /// Since: protocol v2 (additive). Stuck-session recovery abort-drained the run: no
    /// observed progress past the abort threshold (R-I2).
    Stalled,
    /// Since: protocol v2 (additive). The user's `/stop` command (clients see stop reason
    /// `stop`, as OpenClaw's).
    Command,
    #[serde(other)]
    Unknown,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Rpc => "rpc",
            StopReason::Restart => "restart",
            StopReason::Timeout => "timeout",
            StopReason::Interrupt => "interrupt",
            StopReason::Stalled => "stalled",
            StopReason::Command => "stop",
            StopReason::Unknown => "unknown",
        }
    }
}

/// Supervisor -> worker.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlToWorker {
    /// Since: protocol v1. Run this turn (queued behind earlier runs of the same session).
    Submit(SubmitRun),
    /// Since: protocol v1. Stop a queued or running run.
    Cancel { run_id: String, reason: StopReason },
    /// Since: protocol v1. Stop taking runs, finish in-flight ones within `deadline_ms`, abort
    /// the rest with [`StopReason::Restart`], flush storage, answer `Drained` and exit.
    Drain { deadline_ms: u64 },
    /// Since: protocol v1. Heartbeat; answered by `Pong` with the same nonce.
    Ping { nonce: u64 },
    /// Since: protocol v1. Read or change a session; answered by `SessionResult` with the
    /// same `op_id`.
    Session { op_id: u64, op: SessionOp },
    /// Since: protocol v2 (additive). An operator decided approval `id` of run `run_id`;
    /// `pattern` (with `allow-always`) joins the agent's allowlist from now on.
    ApprovalResolved {
        run_id: String,
        id: String,
        decision: crate::approval::ApprovalDecision,
        #[serde(default)]
        pattern: Option<String>,
    },
    /// Since: protocol v2 (additive). Records of the agent's journal the worker lacks, in
    /// order, answering `JournalSync`; the last frame has `last` (the journal's last
    /// sequence: the worker's next write follows it) or `error` (the worker cannot serve).
    JournalReplay {
        records: Vec<JournalChanges>,
        #[serde(default)]
        last: Option<u64>,
        #[serde(default)]
        error: Option<String>,
    },
    /// Since: protocol v2 (additive). Answer to `Journal` with the same `id`.
    Journaled { id: u64, ack: JournalAck },
    /// Since: protocol v2 (additive). More provider keys, sent before a run whose model is on
    /// a provider the worker was not given (a per-run or per-session model override).
    Keys(Secrets),
    #[serde(other)]
    Unknown,
}

/// Worker -> supervisor.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerToControl {
    /// Since: protocol v1. One event of a run, in per-run `seq` order.
    Event(RunEvent),
    /// Since: protocol v1. The run's one terminal outcome (already durable in the agent db).
    Finished(RunTerminal),
    /// Since: protocol v1. The worker refused a submission (e.g. its queue is full).
    Rejected { run_id: String, error: RpcError },
    /// Since: protocol v1. Answer to `Ping`.
    Pong { nonce: u64 },
    /// Since: protocol v1. Answer to `Drain`; the worker exits right after sending it.
    Drained { completed: u32, aborted: u32 },
    /// Since: protocol v2. Answer to `Session`, typed.
    SessionDone { op_id: u64, reply: SessionReply },
    /// Since: protocol v2 (additive). A run's `exec` waits for an operator's decision.
    ApprovalRequested(crate::approval::ApprovalRequest),
    /// Since: protocol v2 (additive). A pending approval ended without a decision.
    ApprovalClosed {
        id: String,
        why: crate::approval::ApprovalClosed,
    },
    /// Since: protocol v2 (additive). A session lane was classified (R-I1).
    Diagnostic(crate::diagnostics::LaneReport),
    /// Since: protocol v2 (additive). A stuck-session recovery step (R-I2).
    Recovery(crate::diagnostics::RecoveryReport),
    /// Since: protocol v2 (additive). The worker's counters (after each run's end and each
    /// heartbeat), for `/metrics`.
    Counters(crate::metrics::WorkerCounters),
    /// Since: protocol v2 (additive). A journaled worker's first frame: send the journal's
    /// records after `after` (the last one its database holds).
    JournalSync { after: u64 },
    /// Since: protocol v2 (additive). Record one transaction in the agent's journal after
    /// record `after`; answered by `Journaled` with the same `id`.
    Journal {
        id: u64,
        after: u64,
        changes: String,
    },
    /// Since: protocol v1; v1 only (a v2 worker answers with `SessionDone`). Answer to
    /// `Session`: the result as JSON text, or a typed error.
    SessionResult {
        op_id: u64,
        #[serde(default)]
        result_json: Option<String>,
        #[serde(default)]
        error: Option<RpcError>,
    },
    #[serde(other)]
    Unknown,
}

mod attachment;
mod run;
mod submit;
pub use attachment::*;
pub use run::*;
pub use submit::*;
