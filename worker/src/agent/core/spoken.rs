//! What the reply says as it streams: visible text (held while it may still be a silent
//! reply, R-F1), its `assistant` events and the blocks block streaming cuts from it (R-D5).

use super::*;

impl Turn {
    /// Adds visible text of the current response; returns the event to stream, if any. A
    /// possible silent reply is held back until it is decided (R-F1).
    pub(super) fn accept_text(&mut self, d: String) -> Vec<Action> {
        if d.is_empty() {
            return vec![];
        }
        self.text.push_str(&d);
        if self.released {
            self.spoken(d)
        } else if !reply::has_visible_text(&self.text) || reply::may_become_silent(&self.text) {
            vec![]
        } else {
            self.released = true;
            self.spoken(self.text.clone())
        }
    }

    /// Reply text for clients: its `assistant` event, then the blocks it completes.
    pub(super) fn spoken(&mut self, delta: String) -> Vec<Action> {
        let mut out = Vec::with_capacity(1);
        let blocks = match self.chunker.as_mut() {
            Some(c) => c.push(&delta),
            None => Vec::new(),
        };
        out.push(Action::Emit(EventBody::Assistant { delta }));
        // `text_end`: the reasoning goes out before the first block; `message_end`: with
        // the message's blocks.
        if self
            .chunker
            .as_ref()
            .is_some_and(blocks::Chunker::streams_text)
        {
            out.extend(self.reasoning_block());
        }
        out.extend(self.blocks(blocks, false));
        out
    }

    /// The current response's text ended (a tool call began, or the response is
    /// complete): the blocks still buffered, after its reasoning's.
    pub(super) fn text_ended(&mut self) -> Vec<Action> {
        let Some(c) = self.chunker.as_mut() else {
            return Vec::new();
        };
        let blocks = c.flush();
        let mut out = self.reasoning_block();
        out.extend(self.blocks(blocks, false));
        out
    }

    /// Reasoning `on` with block streaming: the response's reasoning not sent yet, as a
    /// block of its own, before the text it led to.
    pub(super) fn reasoning_block(&mut self) -> Vec<Action> {
        if self.spec.reasoning != ipc::thinking::ReasoningMode::On {
            return Vec::new();
        }
        let Some(unsent) = self.reasoning.get(self.reasoning_blocked..) else {
            return Vec::new();
        };
        let text = unsent.trim();
        if text.is_empty() {
            return Vec::new();
        }
        let text = text.to_owned();
        self.reasoning_blocked = self.reasoning.len();
        self.blocks(vec![text], true)
    }

    pub(super) fn blocks(&mut self, texts: Vec<String>, reasoning: bool) -> Vec<Action> {
        texts
            .into_iter()
            .map(|text| {
                let index = self.blocks_sent;
                self.blocks_sent += 1;
                Action::Emit(EventBody::Block {
                    text,
                    index,
                    reasoning,
                })
            })
            .collect()
    }
}
