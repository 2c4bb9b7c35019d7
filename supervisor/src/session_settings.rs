//! Sessions' own settings (from `sessions.patch` and the settings slash commands), by
//! session key: the gateway db's, loaded at start and kept in step by every change. One part
//! of the gateway's shared state, handed to what reads or changes a session's settings.

use std::collections::HashMap;
use std::sync::Mutex;

/// A session's own settings from `sessions.patch`: its model (`<provider>/<model>`),
/// thinking level, reasoning visibility (canonical names) and queue mode. `None`: the
/// agent's (the config's queue mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOverrides {
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub reasoning: Option<String>,
    /// What the session's messages do while it is busy (R-B3).
    pub queue_mode: Option<ipc::queue::QueueMode>,
    /// How much of their tool work its runs' replies tell (R-B1).
    pub verbose: Option<ipc::thinking::VerboseLevel>,
    /// Its own queue debounce, cap and drop policy (`/queue debounce:2s cap:5 drop:old`).
    pub queue_options: QueueOptions,
    /// The usage footer on its replies (`/usage tokens|full`).
    pub response_usage: Option<ipc::footer::ResponseUsage>,
    /// Its trace level (`/trace on|raw`), for senders allowed to see traces.
    pub trace: Option<ipc::footer::TraceLevel>,
}

/// A session's own queue options; each `None` is the config's (`messages.queue`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueOptions {
    pub debounce_ms: Option<u64>,
    pub cap: Option<u32>,
    pub drop: Option<ipc::queue::QueueDrop>,
}

impl QueueOptions {
    /// `policy` with these options over it, within the config's limits (whatever a
    /// database from an older build holds).
    pub fn over(self, mut policy: ipc::queue::QueuePolicy) -> ipc::queue::QueuePolicy {
        if let Some(d) = self.debounce_ms {
            policy.debounce_ms = d.clamp(1, crate::config::MAX_DEBOUNCE_MS);
        }
        if let Some(c) = self.cap {
            policy.cap = c.clamp(1, crate::config::MAX_QUEUE_CAP);
        }
        if let Some(d) = self.drop {
            policy.drop = d;
        }
        policy
    }

    /// These options with `newer`'s given ones over them.
    pub fn with(self, newer: QueueOptions) -> QueueOptions {
        QueueOptions {
            debounce_ms: newer.debounce_ms.or(self.debounce_ms),
            cap: newer.cap.or(self.cap),
            drop: newer.drop.or(self.drop),
        }
    }
}

/// Every session's own settings (sessions with none have no entry).
#[derive(Debug, Default)]
pub struct SessionSettings(Mutex<HashMap<String, SessionOverrides>>);

impl SessionSettings {
    fn all(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionOverrides>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's own settings (all `None`: it has none).
    pub fn of(&self, session_key: &str) -> SessionOverrides {
        self.all().get(session_key).cloned().unwrap_or_default()
    }

    /// The session's own model, if it has one.
    pub fn model(&self, session_key: &str) -> Option<String> {
        self.all().get(session_key).and_then(|o| o.model.clone())
    }

    /// Changes the session's own settings with `f` (an entry left empty is dropped).
    pub fn update(&self, session_key: &str, f: impl FnOnce(&mut SessionOverrides)) {
        let mut all = self.all();
        let entry = all.entry(session_key.to_owned()).or_default();
        f(entry);
        if *entry == SessionOverrides::default() {
            all.remove(session_key);
        }
    }

    /// Sets (`Some`) or clears the session's own model.
    pub fn set_model(&self, session_key: &str, model: Option<String>) {
        self.update(session_key, |o| o.model = model);
    }

    /// Forgets every setting of a deleted session.
    pub fn clear(&self, session_key: &str) {
        self.all().remove(session_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_left_with_no_setting_has_no_entry() {
        let s = SessionSettings::default();
        s.set_model("k", Some("p/m".into()));
        s.update("k", |o| o.verbose = Some(ipc::thinking::VerboseLevel::Full));
        assert_eq!(s.model("k").as_deref(), Some("p/m"));
        s.set_model("k", None);
        assert!(s.of("k").verbose.is_some());
        s.update("k", |o| o.verbose = None);
        assert!(s.all().is_empty(), "emptied, forgotten");
        s.set_model("k", Some("p/m".into()));
        s.clear("k");
        assert_eq!(s.of("k"), SessionOverrides::default());
    }
}
