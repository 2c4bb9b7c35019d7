//! A run's end on the link: the terminal events its `Finished` frame leaves for clients
//! (those the run's events already gave, a fallback, or none), and what becomes of its
//! session's gate.

use super::*;

impl Relay {
    /// The run `t` ended: its terminal events, handed to the control actor with `session`'s
    /// gate (opened once they are published), or the gate released if there are none.
    pub(super) fn finished(
        &mut self,
        t: &ipc::control::RunTerminal,
        session: Option<&(String, String)>,
    ) -> TerminalEvents {
        // Ended by the gateway already (an abort): its terminal went out then. The control
        // actor settles the run in the hub once it has handled this terminal (an abort it
        // handles first still numbers its terminal after what was seen).
        let ended = self.hub.is_ended(&t.run_id);
        let st = self.runs.remove(&t.run_id);
        let (events, told) = terminal_events(&self.agent_id, ended, st, t);
        let gate = match session {
            Some((key, run)) if !events.is_empty() => Some(self.gates.hand_over(key, run)),
            Some((key, run)) => {
                self.gates.release(key, run);
                None
            }
            None => None,
        };
        TerminalEvents { events, gate, told }
    }
}

/// The terminal events clients get for the run `t` of `agent_id` (`st`: what the link kept
/// of it; `ended`: the gateway ended it already), and whether its clients were told all
/// there is already.
pub(super) fn terminal_events(
    agent_id: &str,
    ended: bool,
    st: Option<Streaming>,
    t: &ipc::control::RunTerminal,
) -> (Vec<Deferred>, bool) {
    match st {
        _ if ended => (Vec::new(), false),
        // Taken into another run's turn: its clients heard that, and nothing more (its
        // outcome, the carrier's, is for `agent.wait`).
        Some(st) if st.carried => (Vec::new(), true),
        // Carried without being told (an older worker): that turn's outcome.
        Some(st) if t.carried_by.is_some() => {
            let run = RunRef {
                run_id: &t.run_id,
                session_key: &st.session_key,
                agent_id,
            };
            let events = Deferred::terminal(crate::projection::carried_terminal(
                &run,
                st.last_seq + 1,
                t,
            ));
            (events, false)
        }
        // Started but ended with no terminal event (the worker's loop task failed): the
        // fallback terminal, numbered after what clients saw.
        Some(st) if st.deferred.is_empty() => {
            let run = RunRef {
                run_id: &t.run_id,
                session_key: &st.session_key,
                agent_id,
            };
            let error = t
                .error
                .as_deref()
                .unwrap_or("the run ended without a result");
            let aborted = (t.status == ipc::control::RunStatus::Aborted)
                .then(|| t.stop_reason.unwrap_or(ipc::control::RunStopReason::Rpc));
            let events = Deferred::terminal(crate::projection::ended_by_gateway(
                &run,
                st.last_seq + 1,
                t.ended_at,
                st.started_at,
                error,
                aborted,
            ));
            (events, false)
        }
        Some(st) => (st.deferred, false),
        // Never started (aborted while queued, refused): the control actor builds its
        // terminal events.
        None => (Vec::new(), false),
    }
}
