//! `agent.events {runId, afterSeq}` (a loopgate extension): a client whose connection
//! dropped mid-run reconnects and gets the run's events after the last `seq` it saw, from the
//! hub's per-run buffer ([`crate::run_log`]), up to where this connection's live stream
//! starts: every later event comes live, so nothing is missing twice or given twice. Past the
//! buffer the answer says `truncated` (and `chat.history` has what the run recorded).

use super::*;
use ipc::gateway::{AgentEventsParams, AgentEventsResult, ReplayedEvent};

/// Whether this connection would have got an event live: the capability it needs, if
/// any, is among `caps`, and a session-scoped connection follows its run's session.
fn would_have_got(
    cap: Option<&str>,
    run_session: Option<&str>,
    caps: &[String],
    scoped: bool,
    follows: impl Fn(&str) -> bool,
) -> bool {
    cap.is_none_or(|c| caps.iter().any(|have| have == c))
        && (!scoped || run_session.is_none_or(follows))
}

/// `(truncated, ended)` for a run the buffer does not hold: one still queued has lost
/// nothing (its events will all come live); one that ended is past the buffer.
fn unbuffered(stored: &StoredRun) -> (bool, bool) {
    match stored {
        StoredRun::Active { .. } => (false, false),
        StoredRun::Terminal { .. } => (true, true),
    }
}

/// `agent.events`: a run's buffered events (the hub's) after `afterSeq`, up to where this
/// connection's live stream starts, as this connection would have got them live; a run the
/// buffer lacks is looked up in the gateway db.
pub(super) async fn agent_events(
    hub: &EventHub,
    db: &GatewayDb,
    session: &Session,
    following: Following<'_>,
    p: AgentEventsParams,
) -> Answer<AgentEventsResult> {
    if p.run_id.is_empty() {
        return Err(ErrorShape::invalid(
            "invalid agent.events params: runId must be a non-empty string",
        ));
    }
    let after = p.after_seq.unwrap_or(0);
    let replay = hub.replay(&p.run_id, after, following.live_from());
    let scoped = session
        .caps
        .iter()
        .any(|c| c == ipc::gateway::SESSION_SCOPED_EVENTS_CAP);
    // What this connection would have got live (tool events need their capability).
    let events: Vec<ReplayedEvent> = replay
        .events
        .iter()
        .filter(|ev| {
            would_have_got(
                ev.cap,
                ev.run_session.as_deref(),
                &session.caps,
                scoped,
                |key| following.follows(key),
            )
        })
        .filter_map(|ev| {
            let payload = serde_json::value::RawValue::from_string(ev.payload.to_string()).ok()?;
            Some(ReplayedEvent {
                event: ev.event.to_owned(),
                payload,
            })
        })
        .collect();
    let (truncated, ended) = if replay.known {
        (replay.truncated, replay.ended)
    } else {
        // Nothing buffered: still queued (its events will all come live), or past the
        // buffer (ended more than its keep time ago), or unknown.
        match db.lookup(p.run_id.clone()).await {
            Ok(Some(stored)) => unbuffered(&stored),
            Ok(None) => {
                let e = format!("unknown run id {:?}", p.run_id);
                return Err(ErrorShape::invalid(e));
            }
            Err(e) => {
                let e = format!("cannot look up the run: {e}");
                return Err(ErrorShape::unavailable(e, Some(500)));
            }
        }
    };
    Ok(AgentEventsResult {
        run_id: p.run_id,
        events,
        truncated,
        first_seq: replay.first_seq,
        ended,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R-D1: a replay gives what the connection would have got live: tool events only with
    /// their capability, and a session-scoped connection only its followed sessions'.
    #[test]
    fn a_replay_gives_what_the_connection_would_have_got_live() {
        let caps = vec!["tool-events".to_owned()];
        let none: Vec<String> = Vec::new();
        let follows = |key: &str| key == "agent:main:a";
        assert!(would_have_got(
            None,
            Some("agent:main:b"),
            &none,
            false,
            follows
        ));
        assert!(would_have_got(
            Some("tool-events"),
            None,
            &caps,
            false,
            follows
        ));
        assert!(!would_have_got(
            Some("tool-events"),
            None,
            &none,
            false,
            follows
        ));
        assert!(would_have_got(
            None,
            Some("agent:main:a"),
            &none,
            true,
            follows
        ));
        assert!(!would_have_got(
            None,
            Some("agent:main:b"),
            &none,
            true,
            follows
        ));
        // An event of no session's run reaches a scoped connection too.
        assert!(would_have_got(None, None, &none, true, follows));
        assert!(!would_have_got(
            Some("tool-events"),
            Some("agent:main:a"),
            &none,
            true,
            follows
        ));
    }

    #[test]
    fn an_unbuffered_run_is_whole_while_queued_and_truncated_once_ended() {
        let active = StoredRun::Active {
            agent_id: "main".into(),
            session_key: "agent:main:main".into(),
        };
        assert_eq!(unbuffered(&active), (false, false));
        let ended = StoredRun::Terminal {
            agent_id: "main".into(),
            session_key: "agent:main:main".into(),
            terminal: crate::outcome::command_terminal(
                "r1",
                ("agent:main:main", "main"),
                1,
                2,
                "x",
            ),
        };
        assert_eq!(unbuffered(&ended), (true, true));
    }
}
