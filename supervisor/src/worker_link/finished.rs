//! A run's end on the link. The link decides none: a worker's `Finished` goes to the control
//! core with what clients saw of the run and its session's gate; an end the core decided
//! while the run streams is told here, numbered after what clients saw.

use super::*;

impl Relay {
    /// The run `t` ended in its worker: what the link saw of it, for the control core, with
    /// `session`'s gate (the session's later frames wait until the core has published the
    /// run's terminal, or dropped the gate with nothing to publish).
    pub(super) fn finished(
        &mut self,
        t: ipc::control::RunTerminal,
        session: Option<&(String, String)>,
    ) -> LinkEvent {
        let seen = self.runs.remove(&t.run_id).map(Streaming::seen);
        if self.handed.len() == HANDED {
            self.handed.pop_front();
        }
        self.handed.push_back(t.run_id.clone());
        let gate = session.map(|(key, run)| self.gates.hand_over(key, run));
        LinkEvent::Finished {
            agent_id: self.agent_id.clone(),
            generation: self.generation,
            terminal: Box::new(t),
            seen,
            gate,
        }
    }

    /// The control core ended a run: clients get its terminal now, numbered after what they
    /// saw, and nothing of the run after it. A run whose `Finished` already went to the core
    /// is left to the core (it tells the end with what that `Finished` says clients saw).
    pub(super) fn end_now(&mut self, e: EndNow) {
        if self.handed.contains(&e.run_id) {
            return;
        }
        let st = self
            .runs
            .entry(e.run_id.clone())
            .or_insert_with(|| Streaming::new(e.session_key, 0, None));
        if st.ended {
            return;
        }
        st.ended = true;
        st.terminal.clear();
        let run = RunRef {
            run_id: &e.run_id,
            session_key: &st.session_key,
            agent_id: &self.agent_id,
        };
        let events = e
            .end
            .events(&run, st.last_seq + 1, st.started_at, st.text.run());
        self.hub.publish_all(&events);
    }
}
