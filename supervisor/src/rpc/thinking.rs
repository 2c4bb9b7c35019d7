//! A run's thinking level and reasoning visibility (R-D5, OpenClaw's resolution order in
//! `openclaw-protocol.md` 6.3): the request's `thinking` > the session's `thinkingLevel` >
//! the agent's `thinking_default` > the provider's own default (nothing sent). A level other
//! than `off` needs a model the config marks as reasoning; otherwise it is refused, naming
//! the model and the key that would mark it.

use ipc::control::RunModel;
use ipc::thinking::{ReasoningMode, Thinking};

use crate::config::{AgentConfig, ModelCaps, ResolvedModel};
use crate::session_settings::SessionOverrides;

/// What a run gets: `None` for the defaults (reasoning: `None` is off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RunThinking {
    pub thinking: Option<Thinking>,
    pub reasoning: Option<ReasoningMode>,
}

/// Why a thinking or reasoning level is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum LevelError {
    #[error("thinking level {0:?} is not one of {names}", names = level_names())]
    UnknownThinking(String),
    #[error("reasoning level {0:?} must be off, on or stream")]
    UnknownReasoning(String),
    /// `model` is `<provider>/<name>`.
    #[error("thinking level {level:?} is not supported by {model}: it is not a reasoning model (mark it with models.providers.{provider}.models.{name:?}.reasoning = true)")]
    NotReasoning {
        level: &'static str,
        model: String,
        provider: String,
        name: String,
    },
}

fn level_names() -> String {
    let names: Vec<&str> = Thinking::ALL.iter().map(|t| t.as_str()).collect();
    names.join(", ")
}

/// A level by name, or why not.
pub(super) fn parse_level(s: &str) -> Result<Thinking, LevelError> {
    Thinking::parse(s).ok_or_else(|| LevelError::UnknownThinking(s.to_owned()))
}

pub(super) fn parse_reasoning(s: &str) -> Result<ReasoningMode, LevelError> {
    ReasoningMode::parse(s).ok_or_else(|| LevelError::UnknownReasoning(s.to_owned()))
}

/// What the config says of the model a run uses (its own pick, else the agent's): whether
/// it thinks and takes images (an unconfigured provider's model does neither).
pub(super) fn run_caps(
    agent: &AgentConfig,
    own: &ResolvedModel,
    run_model: Option<&RunModel>,
) -> ModelCaps {
    match run_model {
        None => ModelCaps {
            reasoning: own.reasoning,
            context_window: own.context_window,
            images: own.images,
        },
        Some(m) => agent
            .providers
            .iter()
            .find(|p| p.provider == m.provider)
            .map(|p| p.caps(&m.model))
            .unwrap_or_default(),
    }
}

/// Whether the model a run uses (its own pick, else the agent's) can think, and its name.
pub(super) fn model_reasons(
    agent: &AgentConfig,
    own: &ResolvedModel,
    run_model: Option<&RunModel>,
) -> (bool, String) {
    let name = match run_model {
        None => format!("{}/{}", own.provider, own.model),
        Some(m) => format!("{}/{}", m.provider, m.model),
    };
    (run_caps(agent, own, run_model).reasoning, name)
}

/// Checks `level` against the model: only a reasoning model thinks.
pub(super) fn check_level(level: Thinking, reasons: bool, model: &str) -> Result<(), LevelError> {
    if level == Thinking::Off || reasons {
        return Ok(());
    }
    let (provider, name) = model.split_once('/').unwrap_or((model, ""));
    Err(LevelError::NotReasoning {
        level: level.as_str(),
        model: model.to_owned(),
        provider: provider.to_owned(),
        name: name.to_owned(),
    })
}

/// The run's thinking and reasoning, resolved and checked.
pub(super) fn resolve(
    agent: &AgentConfig,
    own: &ResolvedModel,
    run_model: Option<&RunModel>,
    requested: Option<&str>,
    session: &SessionOverrides,
) -> Result<RunThinking, LevelError> {
    let level = match requested.or(session.thinking.as_deref()) {
        Some(s) => Some(parse_level(s)?),
        None => agent.thinking_default,
    };
    if let Some(level) = level {
        let (reasons, model) = model_reasons(agent, own, run_model);
        check_level(level, reasons, &model)?;
    }
    let reasoning = match session.reasoning.as_deref() {
        Some(s) => parse_reasoning(s)?,
        None => agent.reasoning_default,
    };
    Ok(RunThinking {
        thinking: level,
        reasoning: (reasoning != ReasoningMode::Off).then_some(reasoning),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reasoning_models_take_a_level() {
        assert!(check_level(Thinking::Off, false, "p/m").is_ok());
        assert!(check_level(Thinking::High, true, "p/m").is_ok());
        let e = check_level(Thinking::High, false, "p/m")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"high\"") && e.contains("models.providers.p.models.\"m\".reasoning"),
            "{e}"
        );
        assert!(parse_level("loud")
            .unwrap_err()
            .to_string()
            .contains("xhigh"));
    }
}
