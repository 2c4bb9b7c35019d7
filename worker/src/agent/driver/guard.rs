//! The `message_sending` guards (R-H2) over what a run delivers: the final reply before it
//! is recorded (so history and the chat `final` show what they left), and the final
//! payloads not guarded yet. A `message` tool send is guarded when it is sent (`tool.rs`).

use ipc::control::{Payload, RunStatus, RunTerminal};

use super::Driver;
use crate::agent::reply;
use crate::store::FinishRun;

impl Driver {
    /// The final reply through the `message_sending` guards before it is recorded (R-H2):
    /// history and the chat `final` show what they left; a cancelled reply is recorded
    /// silent (`NO_REPLY`: hidden from history).
    pub(super) async fn guard_reply(&mut self, f: &mut FinishRun) {
        if f.status != RunStatus::Ok || !self.ctx.hooks.has("message_sending") {
            return;
        }
        let Some(a) = f.assistant.as_mut() else {
            return;
        };
        if !reply::has_visible_text(&a.text) || reply::is_silent(&a.text) {
            return;
        }
        let original = a.text.clone();
        let kept = self
            .ctx
            .hooks
            .message_sending(&self.hook_ctx, &original)
            .await;
        a.text = kept.clone().unwrap_or_else(|| reply::SILENT_TOKEN.into());
        self.guarded = Some((original, kept));
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
            let text = match &self.guarded {
                Some((original, guarded)) if !p.is_error && p.text == *original => guarded.clone(),
                _ => ctx.hooks.message_sending(hook_ctx, &p.text).await,
            };
            if let Some(text) = text {
                kept.push(Payload { text, ..p });
            }
        }
        t.payloads = kept;
    }
}
