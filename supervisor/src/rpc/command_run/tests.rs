//! A slash command's decisions: the scope it needs, how its send replays, what it changes
//! and what it says.

use super::settings::*;
use super::*;
use crate::session_settings::{QueueOptions, SessionOverrides};
use ipc::gateway::{CompactionDone, SessionsCompactResult};
use ipc::queue::QueueDrop;

const KEY: &str = "agent:main:main";

fn route() -> Route {
    Route {
        agent_id: "main".into(),
        session_key: KEY.into(),
    }
}

fn cmd(text: &str) -> Command {
    super::super::commands::parse(text).unwrap()
}

#[test]
fn a_command_needs_its_methods_scope_and_a_model_change_needs_admin() {
    assert_eq!(scope_of(&cmd("/status")), Scope::Read);
    assert_eq!(scope_of(&cmd("/stop")), Scope::Write);
    assert_eq!(scope_of(&cmd("/think high")), Scope::Write);
    assert_eq!(scope_of(&cmd("/model")), Scope::Write);
    assert_eq!(scope_of(&cmd("/new")), Scope::Admin);
    assert_eq!(scope_of(&cmd("/compact")), Scope::Admin);
    // Choosing the model is an admin's call on every path.
    assert_eq!(scope_of(&cmd("/model p/m")), ipc::gateway::MODEL_CHANGE);
    assert_eq!(scope_of(&cmd("/reset p/m")), ipc::gateway::MODEL_CHANGE);
}

fn terminal(final_json: &str) -> StoredRun {
    let mut terminal = crate::outcome::command_terminal("r1", (KEY, "main"), 1, 2, "done");
    terminal.final_json = final_json.to_owned();
    StoredRun::Terminal {
        agent_id: "main".into(),
        session_key: KEY.into(),
        terminal,
    }
}

/// R-A3: a key used before replays its run as it stands, in the shape of its method.
#[test]
fn a_repeated_send_replays_its_run_in_its_methods_shape() {
    let active = StoredRun::Active {
        agent_id: "main".into(),
        session_key: KEY.into(),
    };
    let done = terminal(r#"{"ok":true}"#);
    assert_eq!(replay(&active, Door::Chat), Replay::Ack("in_flight"));
    assert_eq!(replay(&done, Door::Chat), Replay::Ack("ok"));
    assert_eq!(replay(&active, Door::Agent), Replay::Ack("in_flight"));
    assert_eq!(replay(&done, Door::Agent), Replay::Final(r#"{"ok":true}"#));
    // Each in its method's shape.
    let chat = <m::ChatSend as CommandDoor>::replayed(&route(), "r1", "ok");
    assert_eq!(chat, chat_ack("r1", "ok"));
    let agent = <m::Agent as CommandDoor>::replayed(&route(), "r1", "in_flight");
    assert_eq!(
        (agent.status.as_str(), agent.accepted_at),
        ("in_flight", None)
    );
    assert_eq!(agent.session_key, KEY);
    let agent = <m::Agent as CommandDoor>::accepted(&route(), "r1", 7);
    assert_eq!(
        (agent.status.as_str(), agent.accepted_at),
        ("accepted", Some(7))
    );
    assert_eq!(
        <m::ChatSend as CommandDoor>::accepted(&route(), "r1", 7),
        chat_ack("r1", "started")
    );
    let e = conflict("k1", "another session");
    assert_eq!(e.code, ipc::gateway::codes::INVALID_REQUEST);
    assert_eq!(
        e.message,
        "idempotencyKey \"k1\" was already used for a different request (another session); use a new key for a new request"
    );
}

#[test]
fn every_command_but_stop_is_recorded_and_status_is_context_free() {
    assert_eq!(recorded_as(&Command::Stop), None);
    assert_eq!(recorded_as(&Command::Status), Some(true));
    assert_eq!(recorded_as(&cmd("/think high")), Some(false));
    assert_eq!(recorded_as(&cmd("/new")), Some(false));
}

/// R-A5: `/stop` by `agent` says whether a run was aborted.
#[test]
fn stop_by_agent_says_what_the_abort_did() {
    let said = |a: Result<Result<Vec<String>, &str>, ControlError>| aborted(a).text;
    assert_eq!(said(Ok(Ok(vec!["r1".into()]))), "⚙️ Agent was aborted.");
    assert_eq!(said(Ok(Ok(Vec::new()))), "⚙️ Nothing to stop.");
    assert_eq!(
        said(Ok(Err("runId does not match sessionKey"))),
        "⚠️ runId does not match sessionKey"
    );
    assert_eq!(
        said(Err(ControlError::Overloaded)),
        "⚠️ the gateway is overloaded; retry shortly"
    );
    assert!(!aborted::<&str>(Ok(Ok(Vec::new()))).notice);
}

#[test]
fn think_sets_a_level_the_model_takes_and_names_the_ones_it_does() {
    let c = think_change(KEY, "HIGHEST", true, "p/m").unwrap();
    assert_eq!(c.patch.key, KEY);
    assert_eq!(c.patch.thinking_level, Some(Some("high".into())));
    assert_eq!(c.done, "⚙️ Thinking level set to high.");
    // `off` needs no reasoning model.
    let off = think_change(KEY, "off", false, "p/m").unwrap();
    assert_eq!(off.patch.thinking_level, Some(Some("off".into())));

    let e = think_change(KEY, "high", false, "p/m").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Thinking level \"high\" is not supported for p/m. Use one of: off."
    );
    let e = think_change(KEY, "loud", false, "p/m").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Unknown thinking level \"loud\". Use one of: off."
    );
    let e = think_change(KEY, "loud", true, "p/m").unwrap_err();
    assert_eq!(
        e.to_string(),
        "Unknown thinking level \"loud\". Use one of: off, minimal, low, medium, high, xhigh, adaptive, max, ultra."
    );
}

/// R-B3: `/queue` sets the session's own queue mode, debounce, cap and drop policy, or
/// resets them, with OpenClaw's texts (its `/queue` directive).
#[test]
fn queue_sets_mode_and_options_or_resets_them_as_openclaw_does() {
    let c = queue_change(KEY, "followup").unwrap();
    assert_eq!(c.patch.queue_mode, Some(Some("followup".into())));
    assert_eq!(c.patch.thinking_level, None);
    assert_eq!(c.queue_options, None);
    assert_eq!(c.done, "⚙️ Queue mode set to followup.");
    let c = queue_change(KEY, "collect debounce:2s cap:5 drop:old").unwrap();
    assert_eq!(c.patch.queue_mode, Some(Some("collect".into())));
    let o = QueueOptions {
        debounce_ms: Some(2000),
        cap: Some(5),
        drop: Some(QueueDrop::Old),
    };
    assert_eq!(c.queue_options, Some(Some(o)));
    assert_eq!(
        c.done,
        "⚙️ Queue mode set to collect. ⚙️ Queue debounce set to 2000ms. ⚙️ Queue cap set to 5. ⚙️ Queue drop set to old."
    );
    // Options alone keep the mode; `=` works as `:`; a bare number is milliseconds.
    let c = queue_change(KEY, "debounce=1500 cap=3").unwrap();
    assert_eq!(c.patch.queue_mode, None);
    assert_eq!(
        c.done,
        "⚙️ Queue debounce set to 1500ms. ⚙️ Queue cap set to 3."
    );
    let c = queue_change(KEY, "reset").unwrap();
    assert_eq!(c.patch.queue_mode, Some(None));
    assert_eq!(c.queue_options, Some(None));
    assert_eq!(c.done, "⚙️ Queue mode reset to default.");
    assert_eq!(
        queue_change(KEY, "later").unwrap_err().to_string(),
        "Unrecognized queue mode \"later\". Valid modes: steer, followup, collect, interrupt."
    );
    assert_eq!(
        queue_change(KEY, "collect debounce:soon cap:0 drop:random")
            .unwrap_err()
            .to_string(),
        "Invalid debounce \"soon\". Use ms/s/m (e.g. debounce:1500ms, debounce:2s), at most 60s. \
         Invalid cap \"0\". Use a positive integer (e.g. cap:10), at most 1000. \
         Invalid drop policy \"random\". Use drop:old, drop:new, or drop:summarize."
    );
    assert!(
        queue_change(KEY, "debounce:0").is_err(),
        "zero is no debounce"
    );
    // No more than the config may say: a session cannot hold its queue room for a day.
    for over in [
        "debounce:24h",
        "debounce:61s",
        "cap:1001",
        "cap:4294967295",
        "debounce:1e308s",
    ] {
        assert!(queue_change(KEY, over).is_err(), "{over}");
    }
    assert!(queue_change(KEY, "debounce:1m cap:1000").is_ok());
    assert!(queue_change(KEY, "debounce:1.5s").is_ok_and(|c| c.done.contains("1500ms")));
}

#[test]
fn reasoning_and_verbose_take_their_levels_and_say_so() {
    let r = reasoning_change(KEY, "Stream").unwrap();
    assert_eq!(r.patch.reasoning_level, Some(Some("stream".into())));
    assert_eq!(r.done, "⚙️ Reasoning stream enabled.");
    assert_eq!(
        reasoning_change(KEY, "loud").unwrap_err().to_string(),
        "Unknown reasoning mode \"loud\". Use one of: on, off, stream."
    );
    // A verbose alias is taken by its level's name.
    let v = verbose_change(KEY, "yes").unwrap();
    assert_eq!(v.patch.verbose_level, Some(Some("on".into())));
    assert_eq!(v.done, "⚙️ Verbose logging enabled.");
    assert_eq!(
        verbose_change(KEY, "loud").unwrap_err().to_string(),
        "Unrecognized verbose level \"loud\". Valid levels: off, on, full."
    );
}

/// `/compact` reports what the compaction did, as a status notice.
#[test]
fn compact_reports_its_outcome_as_a_notice() {
    let result = |done: Option<CompactionDone>, reason: Option<&str>| SessionsCompactResult {
        ok: done.is_some(),
        key: KEY.into(),
        compacted: done.is_some(),
        reason: reason.map(str::to_owned),
        result: done,
    };
    let done = CompactionDone {
        messages_summarized: 12,
        tokens_before: 9000,
        tokens_after: 800,
    };
    assert_eq!(
        compacted(Ok(result(Some(done), None))),
        Said::notice("⚙️ Compacted 12 messages: ~9000 → ~800 tokens.")
    );
    assert_eq!(
        compacted(Ok(result(None, Some("no transcript")))),
        Said::notice("⚙️ Nothing compacted: no transcript.")
    );
    assert_eq!(
        compacted(Ok(result(None, None))).text,
        "⚙️ Nothing compacted: nothing to compact."
    );
    let busy =
        ErrorShape::invalid("Session agent:main:main has an active run; retry after it finishes.");
    assert_eq!(
        compacted(Err(busy)),
        Said::notice("⚙️ Compaction failed: Session agent:main:main has an active run; retry after it finishes.")
    );
}

#[test]
fn status_reports_the_sessions_model_settings_and_tokens() {
    let own = SessionOverrides {
        thinking: Some("high".into()),
        ..Default::default()
    };
    let facts = StatusFacts {
        uptime_secs: 125,
        model: "p/m".into(),
        tokens: (1200, 34),
        session_key: KEY,
        session_id: "none yet".into(),
        own: &own,
        queue: ipc::queue::QueueMode::Collect,
    };
    assert_eq!(
        status_text(&facts),
        format!(
            "🦞 loopgate {}\n⏱️ Uptime: gateway 2m 5s\n\n🧠 Model: p/m\n🧮 Tokens: 1200 in / 34 out\n\n🧵 Session: agent:main:main • id none yet\n🎛️ Modes: think high · reasoning off\n🪢 Queue: collect",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// R-A5: a command's reply is its send's one chat `final`, matched to its transcript row.
#[test]
fn the_reply_is_one_final_at_its_recorded_place() {
    let place = MessagePlace {
        id: "e7".into(),
        seq: 7,
        run_id: Some("r1".into()),
        media: Vec::new(),
        media_image_layout: None,
        context_free_command: false,
    };
    let said = Said::notice("✅ Session reset.");
    let ev = reply_event(&route(), "r1", &said, 42, Some(&place));
    assert_eq!((ev.run_id.as_str(), ev.seq), ("r1", 1));
    let ChatState::Final {
        message: Some(message),
        stop_reason,
        message_id,
        message_seq,
    } = ev.state
    else {
        panic!("not a final with a message");
    };
    assert_eq!(stop_reason.as_deref(), Some("stop"));
    assert_eq!((message_id.as_deref(), message_seq), (Some("e7"), Some(7)));
    assert_eq!(message.recorded, Some(place));
    assert_eq!(message.role, "assistant");
    assert_eq!(message.timestamp, 42);
    assert!(message.content[0].status_notice);
    assert_eq!(message.content[0].text, "✅ Session reset.");

    // Not recorded: no place to match.
    let ev = reply_event(&route(), "r1", &Said::plain("x"), 42, None);
    let ChatState::Final {
        message: Some(message),
        message_id,
        ..
    } = ev.state
    else {
        panic!("not a final with a message");
    };
    assert_eq!((message_id, message.recorded), (None, None));
    assert!(!message.content[0].status_notice);
}
