//! What the commands other than `/stop` do to the session: show or change a setting
//! (`/think`, `/model`, `/queue`, `/reasoning`, `/verbose`), start afresh (`/new`,
//! `/reset`), compact (`/compact`), report (`/status`). Each change is decided by a pure
//! function (the patch to apply and its confirmation, or the refusal to say), then applied
//! as `sessions.patch` applies it; what went wrong is said in the reply.

use ipc::gateway::{SessionsCompactResult, SessionsPatchParams};
use ipc::session_ops::ResetReason;
use ipc::thinking::Thinking;

use super::super::commands::{says, Command};
use super::super::compact::compact_session;
use super::super::patch::{patch_session, patch_session_with};
use super::super::sessions::{reset_session, session_info};
use super::super::thinking::{model_reasons, parse_level, parse_reasoning};
use super::super::{Answer, Gateway, Out, Route};
use super::Said;
use crate::config::{Config, MAX_DEBOUNCE_MS, MAX_QUEUE_CAP};
use crate::session_settings::{QueueOptions, SessionSettings};
use ipc::queue::{QueueDrop, QueueMode};
use std::sync::Arc;

/// A setting a command changes: the patch to apply, and what to say once it is applied.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SettingChange {
    pub(super) patch: SessionsPatchParams,
    /// The session's own queue options (`/queue` only): `Some(None)` clears them.
    pub(super) queue_options: Option<Option<QueueOptions>>,
    pub(super) done: String,
}

impl SettingChange {
    fn of(patch: SessionsPatchParams, done: String) -> SettingChange {
        SettingChange {
            patch,
            queue_options: None,
            done,
        }
    }
}

/// Why a command does not change a setting: its reply, in OpenClaw's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SettingRefused {
    #[error("Unknown thinking level \"{level}\". Use one of: {}.", .levels.join(", "))]
    UnknownThinking {
        level: String,
        /// The levels the session's model takes.
        levels: Vec<&'static str>,
    },
    #[error("{}", says::think_unsupported(.level, .model, &["off"]))]
    NotReasoning { level: String, model: String },
    /// What is wrong with a `/queue`'s arguments, each in OpenClaw's words.
    #[error("{}", .0.join(" "))]
    Queue(Vec<String>),
    #[error("Unknown reasoning mode \"{0}\". Use one of: on, off, stream.")]
    UnknownReasoning(String),
    #[error("Unrecognized verbose level \"{0}\". Valid levels: off, on, full.")]
    UnknownVerbose(String),
    #[error("⚙️ Usage: /usage off|tokens|full|reset|cost")]
    UnknownUsage,
    #[error("Unrecognized trace level \"{0}\". Valid levels: off, on, raw.")]
    UnknownTrace(String),
}

/// The reply to `/compact <instructions>`.
pub(super) const COMPACT_TAKES_NO_INSTRUCTIONS: &str =
    "⚠️ /compact takes no instructions here; send /compact alone to compact the session.";

/// A patch of the session `key` with one setting `set`.
fn patch_of(key: &str, set: impl FnOnce(&mut SessionsPatchParams)) -> SessionsPatchParams {
    let mut p = SessionsPatchParams {
        key: key.to_owned(),
        ..Default::default()
    };
    set(&mut p);
    p
}

/// The thinking levels a model takes: all of them if it reasons, else `off`.
pub(super) fn levels_for(reasons: bool) -> Vec<&'static str> {
    if reasons {
        Thinking::ALL.iter().map(|t| t.as_str()).collect()
    } else {
        vec!["off"]
    }
}

/// `/think <level>` on the session `key`, whose model (`model`) `reasons` or not.
pub(super) fn think_change(
    key: &str,
    level: &str,
    reasons: bool,
    model: &str,
) -> Result<SettingChange, SettingRefused> {
    let Ok(parsed) = parse_level(level) else {
        return Err(SettingRefused::UnknownThinking {
            level: level.to_owned(),
            levels: levels_for(reasons),
        });
    };
    if parsed != Thinking::Off && !reasons {
        return Err(SettingRefused::NotReasoning {
            level: level.to_owned(),
            model: model.to_owned(),
        });
    }
    Ok(SettingChange::of(
        patch_of(key, |p| {
            p.thinking_level = Some(Some(parsed.as_str().into()))
        }),
        says::think_set(parsed.as_str()),
    ))
}

/// What a `/queue`'s arguments say, read as OpenClaw reads them: a mode, `debounce:<ms|s|m>`,
/// `cap:<n>`, `drop:old|new|summarize` (each also with `=`), or `reset` (`default`,
/// `clear`), which drops the session's own queue settings. Reading stops at the first word
/// that is none of these.
#[derive(Debug, Default, PartialEq)]
struct QueueArgs<'a> {
    mode: Option<QueueMode>,
    reset: bool,
    /// A first word that is no mode.
    unknown: Option<&'a str>,
    debounce: Option<(&'a str, Option<u64>)>,
    cap: Option<(&'a str, Option<u32>)>,
    drop: Option<(&'a str, Option<QueueDrop>)>,
}

fn queue_args(arg: &str) -> QueueArgs<'_> {
    let mut q = QueueArgs::default();
    for (i, word) in arg.split_whitespace().enumerate() {
        let lower = word.to_ascii_lowercase();
        let value = || word.split_once([':', '=']).map_or("", |(_, v)| v);
        if matches!(lower.as_str(), "default" | "reset" | "clear") {
            q.reset = true;
            break;
        } else if lower.starts_with("debounce:") || lower.starts_with("debounce=") {
            q.debounce = Some((value(), duration_ms(value())));
        } else if lower.starts_with("cap:") || lower.starts_with("cap=") {
            let cap = value().parse().ok();
            q.cap = Some((
                value(),
                cap.filter(|c: &u32| (1..=MAX_QUEUE_CAP).contains(c)),
            ));
        } else if lower.starts_with("drop:") || lower.starts_with("drop=") {
            q.drop = Some((value(), QueueDrop::parse(value())));
        } else if let Some(mode) = QueueMode::parse(word) {
            q.mode = Some(mode);
        } else {
            if i == 0 {
                q.unknown = Some(word);
            }
            break;
        }
    }
    q
}

/// A duration as OpenClaw's `/queue debounce:` takes it: a number with `ms` (the default),
/// `s` or `m`; `None` for anything else, zero and more than the config allows
/// (`messages.queue.debounce_ms`, a minute) included.
fn duration_ms(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "" | "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        _ => return None,
    };
    let ms = (n * scale).round();
    (ms.is_finite() && (1.0..=MAX_DEBOUNCE_MS as f64).contains(&ms)).then_some(ms as u64)
}

/// `/queue <args>`: the session's own queue mode and options, or their reset.
pub(super) fn queue_change(key: &str, arg: &str) -> Result<SettingChange, SettingRefused> {
    let q = queue_args(arg);
    let mut errors = Vec::new();
    if let (None, false, Some(word)) = (q.mode, q.reset, q.unknown) {
        errors.push(format!(
            "Unrecognized queue mode \"{word}\". Valid modes: steer, followup, collect, interrupt."
        ));
    }
    if let Some((raw, None)) = q.debounce {
        errors.push(format!(
            "Invalid debounce \"{raw}\". Use ms/s/m (e.g. debounce:1500ms, debounce:2s), at most {}s.",
            MAX_DEBOUNCE_MS / 1000
        ));
    }
    if let Some((raw, None)) = q.cap {
        errors.push(format!(
            "Invalid cap \"{raw}\". Use a positive integer (e.g. cap:10), at most {MAX_QUEUE_CAP}."
        ));
    }
    if let Some((raw, None)) = q.drop {
        errors.push(format!(
            "Invalid drop policy \"{raw}\". Use drop:old, drop:new, or drop:summarize."
        ));
    }
    if !errors.is_empty() {
        return Err(SettingRefused::Queue(errors));
    }
    let options = QueueOptions {
        debounce_ms: q.debounce.and_then(|d| d.1),
        cap: q.cap.and_then(|c| c.1),
        drop: q.drop.and_then(|d| d.1),
    };
    let mut said = Vec::new();
    let patch = if q.reset {
        said.push(says::QUEUE_RESET.to_owned());
        patch_of(key, |p| p.queue_mode = Some(None))
    } else {
        if let Some(m) = q.mode {
            said.push(says::queue_set(m.as_str()));
        }
        patch_of(key, |p| {
            p.queue_mode = q.mode.map(|m| Some(m.as_str().into()));
        })
    };
    if !q.reset {
        said.extend(options.debounce_ms.map(says::queue_debounce_set));
        said.extend(options.cap.map(says::queue_cap_set));
        said.extend(options.drop.map(|d| says::queue_drop_set(d.as_str())));
    }
    Ok(SettingChange {
        patch,
        queue_options: if q.reset {
            Some(None)
        } else {
            (options != QueueOptions::default()).then_some(Some(options))
        },
        done: if said.is_empty() {
            "OK.".into()
        } else {
            said.join(" ")
        },
    })
}

/// `/queue` alone: the session's queue settings, its own over the config's.
fn queue_settings(config: &Config, sessions: &SessionSettings, key: &str) -> String {
    let own = sessions.of(key);
    let policy = own.queue_options.over(config.queue);
    let mode = own.queue_mode.unwrap_or(policy.mode);
    says::queue_settings(
        mode.as_str(),
        policy.debounce_ms,
        policy.cap,
        policy.drop.as_str(),
    )
}

/// `/reasoning <mode>`.
pub(super) fn reasoning_change(key: &str, mode: &str) -> Result<SettingChange, SettingRefused> {
    let r = parse_reasoning(mode).map_err(|_| SettingRefused::UnknownReasoning(mode.to_owned()))?;
    Ok(SettingChange::of(
        patch_of(key, |p| p.reasoning_level = Some(Some(r.as_str().into()))),
        says::reasoning_set(r.as_str()),
    ))
}

/// `/verbose <level>`.
pub(super) fn verbose_change(key: &str, level: &str) -> Result<SettingChange, SettingRefused> {
    let v = ipc::thinking::VerboseLevel::parse(level)
        .ok_or_else(|| SettingRefused::UnknownVerbose(level.to_owned()))?;
    Ok(SettingChange::of(
        patch_of(key, |p| p.verbose_level = Some(Some(v.as_str().into()))),
        says::verbose_set(v.as_str()),
    ))
}

/// `/usage [mode]` on a session whose footer is `now`: a mode sets it, `reset` (or
/// `default`, `inherit`, `clear`, `unpin`) clears it, none steps off → tokens → full → off.
pub(super) fn usage_change(
    key: &str,
    arg: Option<&str>,
    now: Option<ipc::footer::ResponseUsage>,
) -> Result<SettingChange, SettingRefused> {
    use ipc::footer::ResponseUsage;
    let reset = arg.is_some_and(|a| {
        matches!(
            a.trim().to_ascii_lowercase().as_str(),
            "default" | "inherit" | "inherited" | "clear" | "reset" | "unpin"
        )
    });
    if reset {
        return Ok(SettingChange::of(
            patch_of(key, |p| p.response_usage = Some(None)),
            says::USAGE_FOOTER_RESET.into(),
        ));
    }
    let next = match arg {
        Some(a) => ResponseUsage::parse(a).ok_or(SettingRefused::UnknownUsage)?,
        None => match now.unwrap_or(ResponseUsage::Off) {
            ResponseUsage::Off | ResponseUsage::Unknown => ResponseUsage::Tokens,
            ResponseUsage::Tokens => ResponseUsage::Full,
            ResponseUsage::Full => ResponseUsage::Off,
        },
    };
    Ok(SettingChange::of(
        patch_of(key, |p| p.response_usage = Some(Some(next.as_str().into()))),
        format!("⚙️ Usage footer: {}.", next.as_str()),
    ))
}

/// `/trace <level>` (by an admin).
pub(super) fn trace_change(key: &str, level: &str) -> Result<SettingChange, SettingRefused> {
    use ipc::footer::TraceLevel;
    let t =
        TraceLevel::parse(level).ok_or_else(|| SettingRefused::UnknownTrace(level.to_owned()))?;
    let done = match t {
        TraceLevel::On => {
            "⚙️ Trace enabled. Warning: trace output may contain sensitive information."
        }
        TraceLevel::Raw => {
            "⚙️ Trace set to raw. Warning: trace output may contain sensitive information."
        }
        TraceLevel::Off | TraceLevel::Unknown => "⚙️ Trace disabled.",
    };
    Ok(SettingChange::of(
        patch_of(key, |p| p.trace_level = Some(Some(t.as_str().into()))),
        done.into(),
    ))
}

/// The reply to `/compact`: what the compaction did, as a status notice.
pub(super) fn compacted(answer: Answer<SessionsCompactResult>) -> Said {
    match answer {
        Ok(r) => match r.result {
            Some(done) => Said::notice(format!(
                "⚙️ Compacted {} messages: ~{} → ~{} tokens.",
                done.messages_summarized, done.tokens_before, done.tokens_after
            )),
            None => Said::notice(format!(
                "⚙️ Nothing compacted: {}.",
                r.reason.as_deref().unwrap_or("nothing to compact")
            )),
        },
        Err(e) => Said::notice(format!("⚙️ Compaction failed: {}", e.message)),
    }
}

/// What `/status` reports.
pub(super) struct StatusFacts<'a> {
    pub(super) uptime_secs: u64,
    /// `<provider>/<model>`, or `none configured`.
    pub(super) model: String,
    /// Input and output tokens of the session.
    pub(super) tokens: (u64, u64),
    pub(super) session_key: &'a str,
    /// The transcript's id, or `none yet`.
    pub(super) session_id: String,
    pub(super) own: &'a crate::session_settings::SessionOverrides,
    /// The session's queue mode, else the config's.
    pub(super) queue: ipc::queue::QueueMode,
}

/// `/status`'s reply.
pub(super) fn status_text(f: &StatusFacts<'_>) -> String {
    format!(
        "🦞 loopgate {}\n⏱️ Uptime: gateway {}m {}s\n\n🧠 Model: {}\n🧮 Tokens: {} in / {} out\n\n🧵 Session: {} • id {}\n🎛️ Modes: think {} · reasoning {}\n🪢 Queue: {}",
        env!("CARGO_PKG_VERSION"),
        f.uptime_secs / 60,
        f.uptime_secs % 60,
        f.model,
        f.tokens.0,
        f.tokens.1,
        f.session_key,
        f.session_id,
        f.own.thinking.as_deref().unwrap_or("default"),
        f.own.reasoning.as_deref().unwrap_or("off"),
        f.queue.as_str(),
    )
}

/// Does what `command` asks of the session; what went wrong is said in the reply.
pub(super) async fn perform(
    gw: &Arc<Gateway>,
    out: &Out,
    route: &Route,
    command: Command,
    admin: bool,
) -> Said {
    let key = route.session_key.as_str();
    match command {
        Command::New(model) => renew(gw, out, route, ResetReason::New, model).await,
        Command::Reset(model) => renew(gw, out, route, ResetReason::Reset, model).await,
        Command::Think(None) => Said::plain(format!(
            "Current thinking level: {}. Use one of: {}.",
            gw.sessions.of(key).thinking.as_deref().unwrap_or("default"),
            levels_for(reasoning_of(&gw.config(), &gw.sessions, route).0).join(", ")
        )),
        Command::Think(Some(level)) => {
            let (reasons, model) = reasoning_of(&gw.config(), &gw.sessions, route);
            apply(gw, route, think_change(key, &level, reasons, &model)).await
        }
        Command::Model(None) => Said::plain(format!(
            "Current model: {}.",
            model_of(&gw.config(), &gw.sessions, route)
        )),
        Command::Model(Some(m)) => set_model(gw, route, m).await,
        Command::Queue(None) => Said::plain(queue_settings(&gw.config(), &gw.sessions, key)),
        Command::Queue(Some(arg)) => apply(gw, route, queue_change(key, &arg)).await,
        Command::Reasoning(None) => Said::plain(format!(
            "Current reasoning visibility: {}. Use one of: on, off, stream.",
            gw.sessions.of(key).reasoning.as_deref().unwrap_or("off")
        )),
        Command::Reasoning(Some(mode)) => apply(gw, route, reasoning_change(key, &mode)).await,
        Command::Verbose(None) => Said::plain(format!(
            "Current verbose level: {}.\nOptions: on, full, off.",
            verbose_of(&gw.config(), &gw.sessions, route).as_str()
        )),
        Command::Verbose(Some(level)) => apply(gw, route, verbose_change(key, &level)).await,
        Command::Compact(Some(_)) => Said::plain(COMPACT_TAKES_NO_INSTRUCTIONS),
        Command::Compact(None) => compacted(compact_session(gw, out, route.clone()).await),
        Command::Status => status(gw, route).await,
        Command::Help => Said::plain(super::super::commands::HELP),
        Command::Commands => Said::plain(super::super::commands::commands_text()),
        Command::Usage(Some(arg)) if super::usage_cost::is_cost(&arg) => {
            super::usage_cost::usage_cost(gw, route).await
        }
        Command::Usage(arg) => {
            let now = gw.sessions.of(key).response_usage;
            apply(gw, route, usage_change(key, arg.as_deref(), now)).await
        }
        Command::Trace(_) if !admin => Said::plain(says::TRACE_ADMIN_ONLY),
        Command::Trace(None) => Said::plain(format!(
            "Current trace level: {}.\nOptions: on, off, raw.",
            gw.sessions
                .of(key)
                .trace
                .unwrap_or(ipc::footer::TraceLevel::Off)
                .as_str()
        )),
        Command::Trace(Some(level)) => apply(gw, route, trace_change(key, &level)).await,
        // Answered by the caller (`stop`, or the `agent` path in `run_command`).
        Command::Stop => Said::plain(""),
    }
}

/// Applies a setting change as `sessions.patch` does; says what was done, or why not.
async fn apply(
    gw: &Arc<Gateway>,
    route: &Route,
    change: Result<SettingChange, SettingRefused>,
) -> Said {
    let change = match change {
        Ok(change) => change,
        Err(refused) => return Said::plain(refused.to_string()),
    };
    match patch_session_with(gw, route, &change.patch, change.queue_options).await {
        Ok(_) => Said::plain(change.done),
        Err(e) => Said::plain(format!("⚠️ {}", e.message)),
    }
}

/// `/new`, `/reset`: the transcript starts afresh (same session id) and the session's own
/// queue mode is dropped, as OpenClaw does; its other settings stay. With a model, the
/// session then runs on it.
async fn renew(
    gw: &Arc<Gateway>,
    out: &Out,
    route: &Route,
    reason: ResetReason,
    model: Option<String>,
) -> Said {
    if let Err(e) = reset_session(gw, out, route.clone(), reason).await {
        return Said::plain(format!("⚠️ The session was not reset: {}", e.message));
    }
    let clear = patch_of(&route.session_key, |p| p.queue_mode = Some(None));
    if let Err(e) = patch_session_with(gw, route, &clear, Some(None)).await {
        tracing::warn!(error = %e.message, "Cannot clear a reset session's queue settings.");
    }
    let done = match reason {
        ResetReason::New => says::NEW,
        _ => says::RESET,
    };
    match model {
        None => Said::notice(done),
        Some(m) => {
            let set = set_model(gw, route, m).await;
            Said::notice(format!("{done}\n{}", set.text))
        }
    }
}

/// `/model <model>`: the session's own model, checked as `sessions.patch` checks it.
async fn set_model(gw: &Arc<Gateway>, route: &Route, model: String) -> Said {
    let p = patch_of(&route.session_key, |p| p.model = Some(Some(model)));
    match patch_session(gw, route, &p).await {
        Ok(_) => match gw.sessions.model(&route.session_key) {
            Some(own) => Said::plain(says::model_set(&own)),
            None => Said::plain(says::model_default(&model_of(
                &gw.config(),
                &gw.sessions,
                route,
            ))),
        },
        Err(e) => Said::plain(format!("⚠️ {}", e.message)),
    }
}

/// The model the session's runs use: its own, else its agent's.
fn model_of(config: &Config, sessions: &SessionSettings, route: &Route) -> String {
    if let Some(own) = sessions.model(&route.session_key) {
        return own;
    }
    match config.agent(&route.agent_id).and_then(|a| a.model.as_ref()) {
        Some(m) => format!("{}/{}", m.provider, m.model),
        None => "none configured".into(),
    }
}

/// Whether the session's model reasons, and its name.
fn reasoning_of(config: &Config, sessions: &SessionSettings, route: &Route) -> (bool, String) {
    let Some((agent, own)) = config
        .agent(&route.agent_id)
        .and_then(|a| a.model.as_ref().map(|m| (a, m)))
    else {
        return (false, model_of(config, sessions, route));
    };
    let run_model = sessions.model(&route.session_key).and_then(|m| {
        let (provider, model) = m.split_once('/')?;
        Some(ipc::control::RunModel {
            provider: provider.to_owned(),
            model: model.to_owned(),
        })
    });
    model_reasons(agent, own, run_model.as_ref())
}

/// The session's verbose level: its own, else its agent's default.
fn verbose_of(
    config: &Config,
    sessions: &SessionSettings,
    route: &Route,
) -> ipc::thinking::VerboseLevel {
    let own = sessions.of(&route.session_key).verbose;
    let default = config
        .agent(&route.agent_id)
        .map_or(ipc::thinking::VerboseLevel::Off, |a| a.verbose_default);
    own.unwrap_or(default)
}

/// `/status`: the gateway, the session's model and settings, its tokens.
async fn status(gw: &Arc<Gateway>, route: &Route) -> Said {
    let own = gw.sessions.of(&route.session_key);
    let row = session_info(gw, route).await.ok();
    let facts = StatusFacts {
        uptime_secs: gw.started.elapsed().as_secs(),
        model: model_of(&gw.config(), &gw.sessions, route),
        tokens: row.as_ref().map_or((0, 0), |r| {
            (r.input_tokens.unwrap_or(0), r.output_tokens.unwrap_or(0))
        }),
        session_key: &route.session_key,
        session_id: row
            .as_ref()
            .and_then(|r| r.session_id.clone())
            .unwrap_or_else(|| "none yet".into()),
        own: &own,
        queue: own.queue_mode.unwrap_or_else(|| gw.config().queue.mode),
    };
    Said::plain(status_text(&facts))
}
