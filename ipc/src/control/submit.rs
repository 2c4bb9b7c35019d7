//! A run handed to a worker (`ControlToWorker::Submit`): its message and everything the
//! supervisor decided for it at admission.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Attachment;

/// A run handed to a worker.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitRun {
    pub run_id: String,
    pub session_key: String,
    pub message: String,
    #[serde(default)]
    pub extra_system_prompt: Option<String>,
    /// Run deadline in ms from start; `None` arms no execution timer.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// When the supervisor accepted the run (ms since the epoch).
    pub accepted_at: u64,
    /// Since: protocol v1. The provider and model this run asked for (`agent` params
    /// `provider` / `model`), already checked against the config; `None`: the agent's.
    #[serde(default)]
    pub model: Option<RunModel>,
    /// Since: protocol v2 (additive). The request named `model` itself: it is strict (no
    /// fallback), as in OpenClaw.
    #[serde(default)]
    pub strict_model: bool,
    /// Since: protocol v2 (additive). The run's thinking level (its canonical name), already
    /// checked against the model; `None`: the provider's default.
    #[serde(default)]
    pub thinking: Option<crate::thinking::Thinking>,
    /// Since: protocol v2 (additive). Whether clients hear the run's reasoning: `on` (once
    /// a response is complete) or `stream`; `None`: not at all.
    #[serde(default)]
    pub reasoning: Option<crate::thinking::ReasoningMode>,
    /// Since: protocol v2 (additive). What the run does if its session is busy when it
    /// arrives; `None`: it waits as a followup (no cap).
    #[serde(default)]
    pub queue: Option<crate::queue::QueuePolicy>,
    /// Since: protocol v2 (additive). The message's attachments, checked and decoded by the
    /// supervisor (images and text files), in the order sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Since: protocol v2 (additive). How much of its tool work the reply tells; `None`:
    /// nothing (`off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbose: Option<crate::thinking::VerboseLevel>,
    /// Since: protocol v2 (additive). Block streaming of the reply (R-D5); `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<crate::blocks::BlockStreaming>,
    /// Since: protocol v2 (additive). The usage footer the reply carries (the session's
    /// `/usage tokens|full`); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_footer: Option<crate::footer::UsageFooter>,
    /// Since: protocol v2 (additive). The session's trace level, for a sender allowed to
    /// see traces; `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::footer::TraceLevel>,
}

/// A provider and model picked for one run.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunModel {
    pub provider: String,
    pub model: String,
}

impl SubmitRun {
    /// A run of `message` with the agent's own settings and nothing else (no deadline,
    /// attachments or per-run choices): set the rest with struct update syntax.
    pub fn plain(run_id: &str, session_key: &str, message: &str, accepted_at: u64) -> Self {
        Self {
            run_id: run_id.to_owned(),
            session_key: session_key.to_owned(),
            message: message.to_owned(),
            extra_system_prompt: None,
            timeout_ms: None,
            accepted_at,
            model: None,
            strict_model: false,
            thinking: None,
            reasoning: None,
            queue: None,
            attachments: Vec::new(),
            verbose: None,
            blocks: None,
            usage_footer: None,
            trace: None,
        }
    }
}

impl fmt::Debug for SubmitRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Message content is user data: keep it out of logs.
        f.debug_struct("SubmitRun")
            .field("run_id", &self.run_id)
            .field("session_key", &self.session_key)
            .field("message_len", &self.message.len())
            .field("timeout_ms", &self.timeout_ms)
            .field("model", &self.model)
            .field("attachments", &self.attachments)
            .finish()
    }
}
