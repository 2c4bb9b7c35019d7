//! A run's end on the link. The link decides none: a worker's `Finished` goes to the control
//! core with what clients saw of the run, and its session's gate.

use super::*;

impl Relay {
    /// The run `t` ended in its worker: what the link saw of it, for the control core, with
    /// `session`'s gate (the session's later frames wait until the core has published the
    /// run's terminal, or dropped the gate with nothing to publish). A run taken into another
    /// one's turn has nothing more to tell: its gate opens at once.
    pub(super) fn finished(
        &mut self,
        t: ipc::control::RunTerminal,
        session: Option<&(String, String)>,
    ) -> LinkEvent {
        let told = self.fence.told(&t.run_id);
        let seen = self.runs.remove(&t.run_id).map(|st| st.seen(told));
        let gate = match session {
            Some((key, run)) if seen.as_ref().is_some_and(|s| s.taken_in) => {
                self.gates.release(key, run);
                None
            }
            Some((key, run)) => Some(self.gates.hand_over(key, run)),
            None => None,
        };
        LinkEvent::Finished {
            agent_id: self.agent_id.clone(),
            generation: self.generation,
            terminal: Box::new(t),
            seen,
            gate,
        }
    }
}
