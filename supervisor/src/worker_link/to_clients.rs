//! What a worker's run events become for clients: the agent and chat events published to
//! the hub (the worker's terminal ones held for the control core, which decides the run's
//! terminal), and what `/metrics` counts.

use std::time::Instant;

use super::*;

/// What `/metrics` learns from one run event: time to the first reply text, retries,
/// fallbacks, tool results.
pub(super) fn count(
    metrics: &crate::metrics::Metrics,
    agent_id: &str,
    runs: &HashMap<String, Streaming>,
    ev: &ipc::control::RunEvent,
) {
    match &ev.body {
        EventBody::Assistant { delta } if !delta.is_empty() => {
            if let Some(st) = runs.get(&ev.run_id).filter(|st| st.text.is_empty()) {
                if let Some(start) = st.started_at {
                    metrics.first_token(agent_id, ev.ts.saturating_sub(start));
                }
            }
        }
        EventBody::RunStatus { phase, reason, .. } => match phase {
            RunStatusPhase::Retrying => metrics.retry(agent_id, reason.as_str()),
            RunStatusPhase::Fallback => metrics.fallback(agent_id),
            // A newer worker's phase: nothing this build counts.
            RunStatusPhase::Unknown => {}
        },
        EventBody::Tool {
            phase: ipc::control::ToolPhase::Result,
            name,
            is_error,
            ..
        } => metrics.tool_call(agent_id, name, is_error.unwrap_or(false)),
        _ => {}
    }
}

/// Projects one run event for clients and publishes it through the link's `fence` (the
/// worker's terminal ones are kept in the run's streaming state for the control core). True
/// if it was the run's terminal event.
pub(super) fn publish(
    hub: &EventHub,
    fence: &RunFence,
    agent_id: &str,
    runs: &mut HashMap<String, Streaming>,
    ev: ipc::control::RunEvent,
) -> bool {
    let held = runs.get(&ev.run_id).map(|st| st.terminal.len());
    let mut out = Vec::new();
    project(hub, agent_id, runs, &ev, &mut out);
    let now = runs.get(&ev.run_id).map(|st| st.terminal.len());
    match (&ev.body, held) {
        (EventBody::Lifecycle(l), _) if l.phase == Phase::Start => {
            fence.start(hub, &ev.run_id, ev.seq, l.started_at, &out);
        }
        // Dropped if the core already ended the run (an abort is terminal at once, R-A5).
        (_, Some(_)) => fence.publish(hub, &ev.run_id, ev.seq, &out),
        // A run the link does not stream (it ended here): nothing to tell.
        (_, None) => {}
    }
    matches!((held, now), (Some(held), Some(now)) if now > held)
}

/// What clients get for a `run_status` event: nothing for a phase this build cannot name
/// (a newer worker's, as with a lifecycle phase), else the agent event and the chat status;
/// `thinking` (the run's reasoning told so far) starts over with the next attempt.
pub(super) fn run_status(
    run: &RunRef<'_>,
    ev: &ipc::control::RunEvent,
    thinking: &mut String,
    out: &mut Vec<Deferred>,
) {
    let EventBody::RunStatus {
        phase,
        attempt,
        max_attempts,
        reason,
    } = ev.body
    else {
        return;
    };
    let status = crate::projection::RunStatusEvent {
        phase,
        attempt,
        max_attempts,
        reason,
    };
    if let Some((agent, chat)) = crate::projection::run_status(run, ev.seq, ev.ts, &status) {
        // The attempt is given up before any reply text: its reasoning starts over.
        thinking.clear();
        out.push(Deferred::agent(&agent));
        out.push(Deferred::chat(&chat));
    }
}

/// What clients get for one run event (`out`); the run's terminal events are kept in its
/// state until its outcome is recorded.
pub(super) fn project(
    hub: &EventHub,
    agent_id: &str,
    runs: &mut HashMap<String, Streaming>,
    ev: &ipc::control::RunEvent,
    out: &mut Vec<Deferred>,
) {
    if let EventBody::Lifecycle(l) = &ev.body {
        if l.phase == Phase::Start && started(agent_id, runs, ev, l, out) {
            return;
        }
    }
    let Some(st) = runs.get_mut(&ev.run_id) else {
        return;
    };
    let run = RunRef {
        run_id: &ev.run_id,
        session_key: &st.session_key,
        agent_id,
    };
    // Live text held back goes before any other event of the run (R-D2); a live text delta
    // forces nothing out (it waits with what is held).
    let now = Instant::now();
    if !matches!(
        ev.body,
        EventBody::Assistant { .. } | EventBody::Thinking { .. }
    ) {
        flush(&run, (&st.text, &st.thinking), &mut st.pace, now, out);
    }
    match &ev.body {
        EventBody::Lifecycle(l) => lifecycle(hub, agent_id, st, ev, l, out),
        EventBody::Assistant { delta } if delta.is_empty() => {}
        EventBody::Assistant { delta } => {
            let chat_delta = st.text.push(delta);
            let (text, pace) = (&st.text, &mut st.pace);
            let wait = pace.text_waits();
            let size = text.message().len();
            if let Some(h) = pace.assistant.push(delta, ev.seq, ev.ts, size, now, wait) {
                let agent = crate::projection::assistant(&run, h.seq, h.ts, text, &h.delta);
                out.push(Deferred::agent(&agent));
            }
            let size = text.run().len();
            if let Some(h) = pace.chat.push(&chat_delta, ev.seq, ev.ts, size, now, wait) {
                let chat = crate::projection::chat_delta(&run, h.seq, h.ts, text, &h.delta);
                out.push(Deferred::chat(&chat));
            }
        }
        EventBody::Tool { .. } => {
            // A tool call ends the assistant message it came with.
            st.text.close();
            tool(&run, ev, out);
        }
        EventBody::Compaction { .. } => compaction(&run, ev, out),
        EventBody::Thinking { delta } => {
            st.thinking.push_str(delta);
            let size = st.thinking.len();
            let wait = st.pace.thinking_waits();
            if let Some(h) = st.pace.thinking.push(delta, ev.seq, ev.ts, size, now, wait) {
                let agent = crate::projection::thinking(&run, h.seq, h.ts, &st.thinking, &h.delta);
                out.push(Deferred::agent(&agent));
            }
        }
        EventBody::Block { .. } => block(&run, ev, &st.text, out),
        EventBody::RunStatus { .. } => {
            // The next attempt's text is a message of its own.
            st.text.close();
            run_status(&run, ev, &mut st.thinking, out)
        }
        EventBody::Message(stored) => recorded(hub, agent_id, st, ev, stored, out),
        EventBody::Unknown => {}
    }
}

/// The run's live text held back (R-D2), sent now: its `agent` assistant and thinking
/// events and its chat delta, in `seq` order (an `agent` event before the chat delta of the
/// same `seq`).
fn flush(
    run: &RunRef<'_>,
    (text, thinking): (&crate::projection::ReplyText, &str),
    pace: &mut crate::live_text::RunPace,
    now: Instant,
    out: &mut Vec<Deferred>,
) {
    let mut held: Vec<(u64, u8, Deferred)> = Vec::with_capacity(3);
    if let Some(h) = pace.assistant.take(text.message().len(), now) {
        let agent = crate::projection::assistant(run, h.seq, h.ts, text, &h.delta);
        held.push((h.seq, 0, Deferred::agent(&agent)));
    }
    if let Some(h) = pace.chat.take(text.run().len(), now) {
        let chat = crate::projection::chat_delta(run, h.seq, h.ts, text, &h.delta);
        held.push((h.seq, 1, Deferred::chat(&chat)));
    }
    if let Some(h) = pace.thinking.take(thinking.len(), now) {
        let agent = crate::projection::thinking(run, h.seq, h.ts, thinking, &h.delta);
        held.push((h.seq, 0, Deferred::agent(&agent)));
    }
    held.sort_by_key(|(seq, rank, _)| (*seq, *rank));
    out.extend(held.into_iter().map(|(_, _, d)| d));
}

/// Sends the live text of every run that is due at `now` (R-D2), through the fence.
pub(super) fn flush_due(
    hub: &EventHub,
    fence: &RunFence,
    agent_id: &str,
    runs: &mut HashMap<String, Streaming>,
    now: Instant,
) {
    for (run_id, st) in runs.iter_mut() {
        if st.pace.due().is_none_or(|due| due > now) {
            continue;
        }
        let run = RunRef {
            run_id,
            session_key: &st.session_key,
            agent_id,
        };
        let mut out = Vec::new();
        flush(&run, (&st.text, &st.thinking), &mut st.pace, now, &mut out);
        let seq = out.iter().filter_map(Deferred::run_seq).max().unwrap_or(0);
        fence.publish(hub, run_id, seq, &out);
    }
}

/// A lifecycle event: the reply text as the guards left it, then the agent event; a
/// terminal one (with its chat event) is held until the control actor has recorded the
/// outcome, a `start` also tells session watchers.
fn lifecycle(
    hub: &EventHub,
    agent_id: &str,
    st: &mut Streaming,
    ev: &ipc::control::RunEvent,
    l: &ipc::control::Lifecycle,
    out: &mut Vec<Deferred>,
) {
    use crate::projection as p;
    // Earlier replies as the guards left them (R-H2), then the final one.
    for g in &l.guarded {
        st.text.replace_earlier(&g.streamed, &g.kept);
    }
    if let Some(reply) = &l.reply {
        // The final reply as the `message_sending` guards left it (R-H2).
        st.text.settle(reply);
    }
    let run = RunRef {
        run_id: &ev.run_id,
        session_key: &st.session_key,
        agent_id,
    };
    // What follows the reply (the usage footer, the raw trace) is shown, never recorded.
    // (The footer starts with what parts it from the reply; alone, it starts the text.)
    let shown = match &l.footer {
        Some(footer) => {
            let text = st.text.run();
            let footer = if text.is_empty() {
                footer.trim_start_matches('\n')
            } else {
                footer
            };
            std::borrow::Cow::Owned(format!("{text}{footer}"))
        }
        None => std::borrow::Cow::Borrowed(st.text.run()),
    };
    let projected = p::lifecycle(&run, ev.seq, ev.ts, l, &shown, st.reply_place.as_ref());
    match projected {
        // Terminal: held until the control actor has recorded the outcome.
        Some((agent, Some(chat))) => st
            .terminal
            .extend([Deferred::agent(&agent), Deferred::chat(&chat)]),
        Some((agent, None)) => {
            out.push(Deferred::agent(&agent));
            if l.phase == Phase::Start && hub.sessions_watched() {
                let changed = p::session_run_started(&run, ev.ts);
                out.push(Deferred::sessions_changed(&changed));
            }
        }
        None => {}
    }
}

/// A tool event, for the clients that asked for them (`caps: ["tool-events"]`).
fn tool(run: &RunRef<'_>, ev: &ipc::control::RunEvent, out: &mut Vec<Deferred>) {
    let EventBody::Tool {
        phase,
        tool_call_id,
        name,
        args_json,
        result_json,
        is_error,
    } = &ev.body
    else {
        return;
    };
    let t = crate::projection::ToolEvent {
        phase: *phase,
        tool_call_id,
        name,
        args_json: args_json.as_deref(),
        result_json: result_json.as_deref(),
        is_error: *is_error,
    };
    if let Some(agent) = crate::projection::tool(run, ev.seq, ev.ts, &t) {
        out.push(Deferred::agent(&agent).for_cap(TOOL_EVENTS_CAP));
    }
}

/// A compaction event (nothing for a phase this build cannot name).
fn compaction(run: &RunRef<'_>, ev: &ipc::control::RunEvent, out: &mut Vec<Deferred>) {
    let EventBody::Compaction {
        phase,
        completed,
        will_retry,
        reason,
        messages,
        ..
    } = &ev.body
    else {
        return;
    };
    let c = crate::projection::CompactionEvent {
        phase: *phase,
        completed: *completed,
        will_retry: *will_retry,
        reason: reason.as_deref(),
        messages: *messages,
    };
    if let Some(agent) = crate::projection::compaction(run, ev.seq, ev.ts, &c) {
        out.push(Deferred::agent(&agent));
    }
}

/// A block of the reply (block streaming, R-D5), naming the assistant message it was cut
/// from; a reasoning block belongs to no assistant message.
fn block(
    run: &RunRef<'_>,
    ev: &ipc::control::RunEvent,
    text_so_far: &crate::projection::ReplyText,
    out: &mut Vec<Deferred>,
) {
    let EventBody::Block {
        text,
        index,
        reasoning,
    } = &ev.body
    else {
        return;
    };
    let item = if *reasoning {
        None
    } else {
        text_so_far.item_id(&ev.run_id)
    };
    let agent = crate::projection::block(run, ev.seq, ev.ts, text, *index, *reasoning, item);
    out.push(Deferred::agent(&agent));
}

/// A run's `start`: its streaming state begins. True if that is all its clients hear of
/// it: steered and taken into another run's turn (R-B3), as OpenClaw, one chat `final` with
/// no message and no lifecycle of its own.
fn started(
    agent_id: &str,
    runs: &mut HashMap<String, Streaming>,
    ev: &ipc::control::RunEvent,
    l: &ipc::control::Lifecycle,
    out: &mut Vec<Deferred>,
) -> bool {
    let key = l.session_key.clone().unwrap_or_default();
    let mut st = Streaming::new(key, l.started_at);
    st.carried = l.carried_by.is_some();
    let carried = st.carried;
    if carried {
        let run = RunRef {
            run_id: &ev.run_id,
            session_key: &st.session_key,
            agent_id,
        };
        out.push(Deferred::chat(&crate::projection::taken_in(&run, ev.seq)));
    }
    runs.insert(ev.run_id.clone(), st);
    carried
}

/// A message the run recorded: it closes the assistant message it is; its place is the
/// reply's for the chat `final`; followers of the session get it.
fn recorded(
    hub: &EventHub,
    agent_id: &str,
    st: &mut Streaming,
    ev: &ipc::control::RunEvent,
    stored: &ipc::control::StoredMessage,
    out: &mut Vec<Deferred>,
) {
    use crate::projection as p;
    // Recorded: the assistant message is over; more text is the next one's. So after a
    // steered user message (the reply before it may have been recorded hidden: a guard
    // cancelled it).
    st.text.close();
    let watched = hub.sessions_watched();
    // Unwatched, only an assistant message matters (the reply's place for the chat
    // `final`): the user's and tool results are not parsed for nobody.
    if !watched && stored.role != "assistant" {
        return;
    }
    let Some((message, place)) = p::display_message(stored) else {
        tracing::warn!(
            run_id = ev.run_id.as_str(),
            "A recorded message from the worker is not a JSON object; not told to clients."
        );
        return;
    };
    if p::is_reply(&message) {
        st.reply_place = Some(place.clone());
    }
    if watched {
        out.push(Deferred::session_message(&p::session_message(
            &st.session_key,
            agent_id,
            message,
            &place,
        )));
    }
}

/// The client capability that opts into `tool` stream events.
pub const TOOL_EVENTS_CAP: &str = "tool-events";
