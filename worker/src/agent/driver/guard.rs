//! The `message_sending` guards (R-H2) over what a run delivers: its replies before they
//! are recorded (the final one, and earlier ones the turn went on after: so history and the
//! chat `final` show what they left), and the final payloads not guarded yet. A `message`
//! tool send is guarded when it is sent (`tool.rs`); a block as it is sent (`driver.rs`).

use ipc::control::{GuardedReply, Payload, RunStatus, RunTerminal};

use super::Driver;
use crate::agent::reply;
use crate::store::{FinishRun, NewMessage};

impl Driver {
    /// The final reply through the `message_sending` guards before it is recorded (R-H2):
    /// history and the chat `final` show what they left; a cancelled reply is recorded
    /// silent (`NO_REPLY`: hidden from history).
    pub(super) async fn guard_reply(&mut self, f: &mut FinishRun) {
        if f.status != RunStatus::Ok {
            return;
        }
        let Some(a) = f.assistant.as_mut() else {
            return;
        };
        if let Some(guarded) = self.guard_text(&mut a.text).await {
            if guarded.1.as_ref() != Some(&guarded.0) {
                self.turn.reply_guarded(guarded.1.as_deref());
            }
            self.guarded = Some(guarded);
        }
    }

    /// A reply's `text` through the guards before it is recorded, if they see it (it says
    /// something, and not only the silent token): it becomes what they left (silent when
    /// cancelled); returns it as it was and as they kept it.
    async fn guard_text(&self, text: &mut String) -> Option<(String, Option<String>)> {
        if !self.ctx.hooks.has("message_sending")
            || !reply::has_visible_text(text)
            || reply::is_silent(text)
        {
            return None;
        }
        let kept = self.ctx.hooks.message_sending(&self.hook_ctx, text).await;
        let original = std::mem::replace(
            text,
            kept.clone().unwrap_or_else(|| reply::SILENT_TOKEN.into()),
        );
        Some((original, kept))
    }

    /// An earlier reply of the run (a response without tool calls that the turn went on
    /// after) through the guards before it is recorded: history shows what they left (a
    /// cancelled one is recorded silent, hidden), and so do the payloads and the chat
    /// `final` ([`changed`]).
    pub(super) async fn guard_earlier(&mut self, m: &mut NewMessage) {
        let reply = m.role == crate::store::Role::Assistant
            && m.tool_calls.is_empty()
            && m.command.is_none();
        if !reply {
            return;
        }
        if let Some(guarded) = self.guard_text(&mut m.text).await {
            self.guarded_earlier.push(guarded);
        }
    }

    /// The final payloads through the guards, but for what they saw already: the `message`
    /// sends (guarded when sent; they lead an `ok` run's payloads) and the final reply
    /// (guarded before it was recorded).
    pub(super) async fn guard_payloads(&self, t: &mut RunTerminal) {
        let (ctx, hook_ctx) = (&self.ctx, &self.hook_ctx);
        if !ctx.hooks.has("message_sending") || t.payloads.is_empty() {
            return;
        }
        let sent = if t.status == RunStatus::Ok {
            self.turn.sent_count().min(t.payloads.len())
        } else {
            0
        };
        let mut payloads = std::mem::take(&mut t.payloads);
        let mut kept: Vec<Payload> = payloads.drain(..sent).collect();
        for p in payloads {
            let seen = self
                .guarded
                .iter()
                .chain(&self.guarded_earlier)
                .find(|(original, _)| !p.is_error && p.text == *original);
            let text = match seen {
                Some((_, guarded)) => guarded.clone(),
                None => ctx.hooks.message_sending(hook_ctx, &p.text).await,
            };
            if let Some(text) = text {
                kept.push(Payload { text, ..p });
            }
        }
        t.payloads = kept;
    }
}

/// The guarded replies the guards changed, as the run's `end` tells them.
pub(super) fn changed(guarded: &[(String, Option<String>)]) -> Vec<GuardedReply> {
    guarded
        .iter()
        .filter(|(original, kept)| kept.as_ref() != Some(original))
        .map(|(original, kept)| GuardedReply {
            streamed: original.clone(),
            kept: kept.clone().unwrap_or_default(),
        })
        .collect()
}
