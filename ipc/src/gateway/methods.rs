//! The one table of Gateway methods: each method's wire name, the scope it needs, its params
//! type and its result type, written once (in the style of codex's app-server protocol). The
//! macro makes [`Method`] (name, parse, scope) and one marker type per method in [`m`]
//! (`m::ChatSend: MethodSpec<Params = ChatSendParams, Result = ChatSendResult>`), so a handler
//! that reads `m::X::Params` and answers `m::X::Result` is checked against its entry.
//!
//! Adding a method: one entry here, then its handler and its arm in the supervisor's
//! dispatch (`rpc::handle`, which the compiler makes exhaustive).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::*;

/// A Gateway method's types, from the table.
pub trait MethodSpec {
    const METHOD: Method;
    type Params: DeserializeOwned + Send + 'static;
    type Result: Serialize;
}

/// The answer of a method that is always refused (a feature loopgate does not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Never {}

/// `{"ok": true}`: an action done, nothing to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    pub ok: bool,
}

/// `chat.history` / `chat.startup`: a page, or the fresh start of a session that was reset
/// or never had a transcript.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ChatHistoryResult {
    Page(Box<HistoryPage>),
    Reset(HistoryReset),
}

macro_rules! gateway_methods {
    ($( $(#[$meta:meta])* $variant:ident = $wire:literal, $scope:ident, $params:ty => $result:ty; )*) => {
        /// Every method loopgate implements. The wire name lives here and nowhere else.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method {
            $( $(#[$meta])* $variant, )*
        }

        impl Method {
            /// Every method, `connect` first.
            pub const ALL: &'static [Method] = &[ $( Method::$variant, )* ];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Method::$variant => $wire, )*
                }
            }

            pub fn parse(name: &str) -> Option<Method> {
                match name {
                    $( $wire => Some(Method::$variant), )*
                    _ => None,
                }
            }

            /// The scope a connection needs to call it.
            pub const fn scope(self) -> Scope {
                match self {
                    $( Method::$variant => Scope::$scope, )*
                }
            }
        }

        /// One marker type per method, carrying its params and result types.
        pub mod m {
            $(
                $(#[$meta])*
                pub struct $variant;
            )*
        }

        $(
            impl MethodSpec for m::$variant {
                const METHOD: Method = Method::$variant;
                type Params = $params;
                type Result = $result;
            }
        )*
    };
}

gateway_methods! {
    /// The handshake (the first frame only; answered by `hello-ok`).
    Connect = "connect", Read, ConnectParams => HelloOk;
    Health = "health", Read, HealthParams => HealthResult;
    /// OpenClaw's status summary.
    Status = "status", Read, StatusParams => StatusSummary;
    /// Answered twice: the `accepted` ack, then the final `AgentResult` (stored as sent and
    /// replayed byte for byte).
    Agent = "agent", Write, AgentParams => AgentAck;
    AgentWait = "agent.wait", Write, AgentWaitParams => AgentWaitResult;
    /// loopgate extension: a run's events after a `seq`, to resume after a disconnect.
    AgentEvents = "agent.events", Read, AgentEventsParams => AgentEventsResult;
    DiagnosticsLanes = "diagnostics.lanes", Read, AnyParams => DiagnosticsLanes;
    /// loopgate: the kept `allow-always` exec patterns, and removing one.
    ExecAllowlistGet = "loopgate.exec.allowlist", Approvals, AnyParams => ExecAllowlistResult;
    ExecAllowlistRemove = "loopgate.exec.allowlist.remove", Admin,
        ExecAllowlistRemoveParams => ExecAllowlistRemoveResult;
    ChatSend = "chat.send", Write, ChatSendParams => ChatSendResult;
    ChatHistory = "chat.history", Read, ChatHistoryParams => ChatHistoryResult;
    /// The first page a client loads (the same handler as `chat.history`).
    ChatStartup = "chat.startup", Read, ChatHistoryParams => ChatHistoryResult;
    ChatAbort = "chat.abort", Write, ChatAbortParams => ChatAbortResult;
    /// Admin, as OpenClaw's: the message is recorded as the assistant's.
    ChatInject = "chat.inject", Admin, ChatInjectParams => ChatInjectResult;
    SessionsList = "sessions.list", Read, SessionsListParams => SessionsListResult;
    SessionsSubscribe = "sessions.subscribe", Read, SessionsListParams => SessionsSubscribeResult;
    SessionsDescribe = "sessions.describe", Read, SessionsDescribeParams => SessionsDescribeResult;
    SessionsPreview = "sessions.preview", Read, SessionsPreviewParams => SessionsPreviewResult;
    SessionsPatch = "sessions.patch", Write, SessionsPatchParams => SessionsPatchResult;
    SessionsMessagesSubscribe = "sessions.messages.subscribe", Read,
        SessionMessagesParams => SessionMessagesResult;
    SessionsMessagesUnsubscribe = "sessions.messages.unsubscribe", Read,
        SessionMessagesParams => SessionMessagesResult;
    QuestionList = "question.list", Read, AnyParams => QuestionListResult;
    SessionsReset = "sessions.reset", Admin, SessionsResetParams => SessionsResetResult;
    SessionsDelete = "sessions.delete", Admin, SessionsDeleteParams => SessionsDeleteResult;
    /// Which session a key, id, label or short id names (the Control UI's session URLs).
    SessionsResolve = "sessions.resolve", Read, SessionsResolveParams => SessionsResolveResult;
    /// Stops the session's running run (the Control UI's Stop).
    SessionsAbort = "sessions.abort", Write, SessionsAbortParams => SessionsAbortResult;
    AgentsList = "agents.list", Read, AgentsListParams => AgentsListResult;
    /// Admin, as OpenClaw's: writes the config.
    AgentsCreate = "agents.create", Admin, AgentsCreateParams => AgentsCreateResult;
    AgentsUpdate = "agents.update", Admin, AgentsUpdateParams => AgentsUpdateResult;
    AgentsDelete = "agents.delete", Admin, AgentsDeleteParams => AgentsDeleteResult;
    AgentsFilesList = "agents.files.list", Read, AgentFilesListParams => AgentFilesListResult;
    AgentsFilesGet = "agents.files.get", Read, AgentFilesGetParams => AgentFileResult;
    /// Admin, as OpenClaw's.
    AgentsFilesSet = "agents.files.set", Admin, AgentFilesSetParams => AgentFileResult;
    ToolsCatalog = "tools.catalog", Read, ToolsCatalogParams => ToolsCatalogResult;
    ToolsEffective = "tools.effective", Read, ToolsEffectiveParams => ToolsEffectiveResult;
    /// Unknown params are ignored, as OpenClaw's.
    UsageStatus = "usage.status", Read, AnyParams => UsageStatusResult;
    /// Unknown params are ignored, as OpenClaw's.
    UsageCost = "usage.cost", Read, UsageCostParams => UsageCostResult;
    SessionsUsage = "sessions.usage", Read, SessionsUsageParams => SessionsUsageResult;
    SkillsStatus = "skills.status", Read, SkillsStatusParams => SkillsStatusResult;
    AgentIdentityGet = "agent.identity.get", Read, AgentScopeParams => AgentIdentity;
    ChatMetadata = "chat.metadata", Read, AgentScopeParams => ChatMetadataResult;
    ModelsList = "models.list", Read, AnyParams => ModelsListResult;
    ModelsAuthStatus = "models.authStatus", Read, AnyParams => ModelsAuthStatusResult;
    ConfigGet = "config.get", Read, AnyParams => ConfigGetResult;
    ConfigSchema = "config.schema", Read, NoParams => ConfigSchemaResult;
    ConfigSchemaLookup = "config.schema.lookup", Read, ConfigSchemaLookupParams => ConfigSchemaLookupResult;
    /// Admin, as OpenClaw's: a JSON5 merge patch over the file's parse, with `baseHash`.
    ConfigPatch = "config.patch", Admin, ConfigPatchParams => ConfigWriteResult;
    /// Admin, as OpenClaw's: the whole file (TOML here), with `baseHash`.
    ConfigApply = "config.apply", Admin, ConfigApplyParams => ConfigWriteResult;
    /// Admin, as OpenClaw's: the whole config (TOML text, or the form's JSON5 object), with
    /// `baseHash`. The Control UI's config pages save with it.
    ConfigSet = "config.set", Admin, ConfigSetParams => ConfigWriteResult;
    /// Read, as OpenClaw 2026.9.6 has it (`openclaw logs` asks with read scope).
    LogsTail = "logs.tail", Read, LogsTailParams => LogsTailResult;
    /// A bare array, as OpenClaw answers it.
    SystemPresence = "system-presence", Read, AnyParams => Vec<PresenceEntry>;
    CronList = "cron.list", Read, CronListParams => CronListResult;
    CronStatus = "cron.status", Read, NoParams => CronStatusResult;
    CronGet = "cron.get", Read, CronIdParams => CronJob;
    /// Admin, as OpenClaw's.
    CronAdd = "cron.add", Admin, CronAddParams => CronJob;
    CronUpdate = "cron.update", Admin, CronUpdateParams => CronJob;
    CronRemove = "cron.remove", Admin, CronIdParams => CronRemoveResult;
    CronRun = "cron.run", Admin, CronRunParams => CronRunResult;
    CronRuns = "cron.runs", Read, CronRunsParams => CronRunsResult;
    /// A system event for an agent's main session, now.
    Wake = "wake", Write, WakeParams => Done;
    TasksList = "tasks.list", Read, TasksListParams => TasksListResult;
    TalkCatalog = "talk.catalog", Read, TalkCatalogParams => TalkCatalogResult;
    UpdateStatus = "update.status", Admin, UpdateStatusParams => UpdateStatusResult;
    ProgressCardGet = "progressCard.get", Read, SessionRefParams => ProgressCardResult;
    SessionsBranchesList = "sessions.branches.list", Read, SessionRefParams => BranchesResult;
    /// Refused: no side chat.
    SessionsCompanionState = "sessions.companion.state", Read, SessionRefParams => Never;
    /// Refused: no session observer.
    SessionsObserverVisibility = "sessions.observer.visibility", Read, AnyParams => Never;
    CommandsList = "commands.list", Read, CommandsListParams => CommandsListResult;
    ChannelsStatus = "channels.status", Read, ChannelsStatusParams => ChannelsStatusResult;
    /// No heartbeats run: there is no last one (`null`).
    LastHeartbeat = "last-heartbeat", Read, AnyParams => Option<Never>;
    NodeList = "node.list", Read, NoParams => NodeListResult;
    NodePairList = "node.pair.list", Pairing, NoParams => NodePairListResult;
    ExecApprovalList = "exec.approval.list", Approvals, AnyParams => Vec<ExecApproval>;
    ExecApprovalResolve = "exec.approval.resolve", Approvals, ExecApprovalResolveParams => Done;
    /// Bare arrays, as OpenClaw answers them: nothing waits for a decision here.
    PluginApprovalList = "plugin.approval.list", Approvals, AnyParams => Vec<Never>;
    OpenclawApprovalList = "openclaw.approval.list", Approvals, AnyParams => Vec<Never>;
    ApprovalHistory = "approval.history", Approvals, ApprovalHistoryParams => ApprovalHistoryResult;
    SessionsCreate = "sessions.create", Write, SessionsCreateParams => SessionsCreateResult;
    SessionsCompact = "sessions.compact", Admin, SessionsCompactParams => SessionsCompactResult;
    DevicePairList = "device.pair.list", Pairing, DevicePairListParams => DevicePairListResult;
    DeviceTokenRotate = "device.token.rotate", Pairing,
        DeviceTokenRotateParams => DeviceTokenRotateResult;
    DeviceTokenRevoke = "device.token.revoke", Pairing,
        DeviceTokenRevokeParams => DeviceTokenRevokeResult;
    GatewayDrain = "gateway.drain", Admin, GatewayDrainParams => DrainResult;
    /// loopgate extension: load the config again (as SIGHUP) and say what changed.
    GatewayReload = "loopgate.reload", Admin, NoParams => ReloadResult;
    WorkerRestart = "worker.restart", Admin, WorkerRestartParams => WorkerRestartResult;
    /// loopgate's own process view (`status` is OpenClaw's summary).
    GatewayStatus = "loopgate.status", Read, AnyParams => StatusResult;
}

impl Method {
    /// Methods advertised in `hello-ok.features.methods` (`connect` is not listed).
    pub fn advertised() -> impl Iterator<Item = Method> {
        Self::ALL.iter().copied().filter(|m| *m != Method::Connect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_is_unique() {
        let mut seen = std::collections::HashSet::new();
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(*m));
            assert!(seen.insert(m.as_str()), "{} twice", m.as_str());
        }
        assert_eq!(Method::ALL[0], Method::Connect);
        assert_eq!(Method::parse("nope"), None);
        assert_eq!(Method::SessionsDelete.scope(), Scope::Admin);
    }
}
