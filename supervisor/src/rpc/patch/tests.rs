//! `sessions.patch`'s checks, each as an `agent` run's would be, and what is stored.

use super::super::tests::{config, ONE_PROVIDER};
use super::*;
use crate::session_settings::SessionOverrides;
use ipc::queue::QueueMode;
use ipc::thinking::VerboseLevel;

fn check(session_model: Option<&str>, p: SessionsPatchParams) -> Result<Settings, PatchRefused> {
    let c = config(ONE_PROVIDER);
    let ctx = PatchContext {
        agent: c.agent("main"),
        session_model: session_model.map(str::to_owned),
    };
    checked_patch(&ctx, &p)
}

fn patch(f: fn(&mut SessionsPatchParams)) -> SessionsPatchParams {
    let mut p = SessionsPatchParams {
        key: "agent:main:main".into(),
        ..Default::default()
    };
    f(&mut p);
    p
}

/// R-B1: a session's own model is checked as a run's; the agent's own model clears it.
#[test]
fn a_model_is_kept_as_provider_and_name_and_the_agents_own_clears_it() {
    let s = check(None, patch(|p| p.model = Some(Some("p/think".into())))).unwrap();
    assert_eq!(s.model, Some(Some("p/think".into())));
    let s = check(None, patch(|p| p.model = Some(Some("p/m".into())))).unwrap();
    assert_eq!(s.model, Some(None));
    let s = check(None, patch(|p| p.model = Some(None))).unwrap();
    assert_eq!(s.model, Some(None));
    let e = check(None, patch(|p| p.model = Some(Some("q/x".into())))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model: unknown provider \"q\" (configured: p)"
    );
    let no_agent = PatchContext {
        agent: None,
        session_model: None,
    };
    let p = patch(|p| p.model = Some(Some("p/m".into())));
    assert_eq!(checked_patch(&no_agent, &p), Err(PatchRefused::NoModel));
}

/// R-B1: a thinking level needs a reasoning model: the one this patch sets, else the
/// session's own, else the agent's.
#[test]
fn a_thinking_level_is_checked_against_the_model_the_runs_will_use() {
    let high = |p: &mut SessionsPatchParams| p.thinking_level = Some(Some("HIGH".into()));
    let e = check(None, patch(high)).unwrap_err();
    assert!(matches!(
        e,
        PatchRefused::Thinking(super::super::thinking::LevelError::NotReasoning { .. })
    ));
    assert!(e
        .to_string()
        .starts_with("thinkingLevel: thinking level \"high\" is not supported by p/m"));
    // The session's own model reasons.
    let s = check(Some("p/think"), patch(high)).unwrap();
    assert_eq!(s.thinking, Some(Some("high".into())));
    // This patch moves the session to a reasoning model, and back.
    let both = patch(|p| {
        p.model = Some(Some("p/think".into()));
        p.thinking_level = Some(Some("low".into()));
    });
    assert_eq!(
        check(None, both).unwrap().thinking,
        Some(Some("low".into()))
    );
    let back = patch(|p| {
        p.model = Some(None);
        p.thinking_level = Some(Some("low".into()));
    });
    assert!(check(Some("p/think"), back).is_err());
    // `off` is always taken.
    let off = patch(|p| p.thinking_level = Some(Some("off".into())));
    assert_eq!(check(None, off).unwrap().thinking, Some(Some("off".into())));
}

/// R-B3: the queue mode, reasoning and verbose levels are checked by name; each refusal
/// names its key.
#[test]
fn each_refused_setting_names_its_key() {
    let e = check(None, patch(|p| p.queue_mode = Some(Some("later".into())))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "queueMode: \"later\" is not one of steer, followup, collect, interrupt"
    );
    let e = check(
        None,
        patch(|p| p.reasoning_level = Some(Some("loud".into()))),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "reasoningLevel: reasoning level \"loud\" must be off, on or stream"
    );
    let e = check(None, patch(|p| p.verbose_level = Some(Some("loud".into())))).unwrap_err();
    assert_eq!(e, PatchRefused::Verbose);
    let e = check(None, patch(|p| p.label = Some(Some("x".repeat(201))))).unwrap_err();
    assert_eq!(e.to_string(), "label is longer than 200 characters");

    let s = check(
        None,
        patch(|p| {
            p.queue_mode = Some(Some("Collect".into()));
            p.verbose_level = Some(Some("yes".into()));
            p.reasoning_level = Some(None);
        }),
    )
    .unwrap();
    assert_eq!(s.queue_mode, Some(Some(QueueMode::Collect)));
    assert_eq!(s.verbose, Some(Some(VerboseLevel::On)));
    assert_eq!((s.reasoning, s.thinking, s.model), (Some(None), None, None));
}

#[test]
fn the_stored_patch_trims_the_label_and_sets_or_clears_the_read_mark() {
    let p = patch(|p| {
        p.label = Some(Some("  Plans  ".into()));
        p.unread = Some(false);
    });
    let s = check(None, p.clone()).unwrap();
    let stored = stored_patch(&p, &s, 77);
    assert_eq!(stored.label, Some(Some("Plans".into())));
    assert_eq!(stored.last_read_at, Some(Some(77)));
    assert_eq!(stored.queue_mode, None);

    let p = patch(|p| {
        p.label = Some(Some("   ".into()));
        p.unread = Some(true);
        p.queue_mode = Some(Some("steer".into()));
    });
    let s = check(None, p.clone()).unwrap();
    let stored = stored_patch(&p, &s, 77);
    assert_eq!(stored.label, Some(None));
    assert_eq!(stored.last_read_at, Some(None));
    assert_eq!(stored.queue_mode, Some(Some("steer".into())));
}

#[test]
fn applied_settings_change_only_what_the_patch_names() {
    let mut own = SessionOverrides {
        model: Some("p/think".into()),
        thinking: Some("high".into()),
        queue_mode: Some(QueueMode::Steer),
        ..Default::default()
    };
    let s = check(
        Some("p/think"),
        patch(|p| {
            p.thinking_level = Some(None);
            p.verbose_level = Some(Some("full".into()));
        }),
    )
    .unwrap();
    s.apply(&mut own);
    assert_eq!(
        own,
        SessionOverrides {
            model: Some("p/think".into()),
            thinking: None,
            reasoning: None,
            queue_mode: Some(QueueMode::Steer),
            verbose: Some(VerboseLevel::Full),
            queue_options: Default::default(),
            response_usage: None,
            trace: None,
        }
    );
}
