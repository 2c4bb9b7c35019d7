//! The messages of a model request, and how a session's transcript becomes them.
//!
//! A request carries the whole history, which grows by a few messages per turn. Building a
//! fresh list per turn (and dropping it) made every turn cost more than the last (issue 24):
//! so the reader's cache converts each transcript row once, appending to a list it shares
//! ([`History`]), and a request ([`Messages`]) is that shared list plus what is its own: the
//! system prompt before it, and this turn's tool rounds and steered messages after it. A
//! turn never copies the history; changing a shared message (steering edits the last user
//! message) moves only that message into the turn's own part.

use std::sync::Arc;

use super::ChatMessage;
use crate::tools::ToolCall;

/// A session's history as the model sees it, oldest first (the compaction summary first
/// when the session was compacted). Shared by the reader's cache and every request built
/// from it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub messages: Arc<Vec<ChatMessage>>,
    /// Transcript rows in the window, including those that give no message.
    pub rows: usize,
}

/// Opens the message that carries a compaction summary.
pub const SUMMARY_PREFIX: &str =
    "[The earlier part of this conversation was compacted. Summary of it:]";

/// The user message that stands for the compacted part of a conversation.
pub fn summary_message(summary: &str) -> ChatMessage {
    ChatMessage::text("user", format!("{SUMMARY_PREFIX}\n\n{summary}"))
}

/// A transcript row, as the model sees it (the reader parses rows into these).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The transcript role (`user`, `assistant`, `toolResult`, or the summary's).
    pub role: Arc<str>,
    pub text: super::Text,
    /// Assistant: the tool calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Tool result: the call it answers.
    pub tool_call_id: Option<String>,
    /// Transcript position (`None` for the compaction summary, which stands for many).
    pub seq: Option<i64>,
    /// User: the message's attachments, with their bytes.
    pub media: Vec<super::media::Media>,
}

/// The transcript role of the row that carries the latest compaction summary (first, when
/// the session was compacted).
pub const SUMMARY_ROLE: &str = "compactionSummary";

/// Turns transcript rows, in order, into the messages a provider accepts: assistant tool
/// calls and their results keep their pairing; a result whose call is not the message just
/// before (cut by the window) is dropped, as is an assistant message with neither text nor
/// calls, since providers reject both. Appending rows one by one gives the same list as
/// converting them all at once.
#[derive(Debug, Clone, Default)]
pub struct Conversion {
    /// The calls of the last assistant message, while its results may follow.
    open_calls: Vec<String>,
}

impl Conversion {
    pub fn push(&mut self, out: &mut Vec<ChatMessage>, row: Row) {
        match &*row.role {
            "assistant" => {
                if row.text.is_empty() && row.tool_calls.is_empty() {
                    return;
                }
                self.open_calls = row.tool_calls.iter().map(|c| c.id.clone()).collect();
                out.push(ChatMessage {
                    tool_calls: row.tool_calls,
                    seq: row.seq,
                    ..ChatMessage::text("assistant", row.text)
                });
            }
            SUMMARY_ROLE => {
                self.open_calls.clear();
                out.push(summary_message(&row.text));
            }
            "toolResult" => {
                let Some(id) = row.tool_call_id else {
                    return;
                };
                if !self.open_calls.contains(&id) {
                    return;
                }
                out.push(ChatMessage {
                    tool_call_id: Some(id),
                    seq: row.seq,
                    ..ChatMessage::text("tool", row.text)
                });
            }
            _ => {
                self.open_calls.clear();
                let message = if row.media.is_empty() {
                    ChatMessage::text("user", row.text)
                } else {
                    super::media::user_message(&row.text, &row.media)
                };
                out.push(ChatMessage {
                    seq: row.seq,
                    ..message
                });
            }
        }
    }
}

/// The messages of one request: its own leading messages (the system prompt), a prefix of
/// a shared history, then its own trailing messages. Indexing, iteration and length see
/// the three as one list.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    head: Vec<ChatMessage>,
    shared: Arc<Vec<ChatMessage>>,
    /// How much of `shared` belongs to this request (less than all once its last message
    /// was changed and moved to `tail`).
    shared_len: usize,
    tail: Vec<ChatMessage>,
}

impl Messages {
    /// `head`, then all of `shared`.
    pub fn new(head: Vec<ChatMessage>, shared: Arc<Vec<ChatMessage>>) -> Messages {
        Messages {
            head,
            shared_len: shared.len(),
            shared,
            tail: Vec::new(),
        }
    }

    fn shared(&self) -> &[ChatMessage] {
        self.shared.get(..self.shared_len).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.shared_len + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &ChatMessage> + Clone + '_ {
        self.head
            .iter()
            .chain(self.shared().iter())
            .chain(self.tail.iter())
    }

    pub fn get(&self, i: usize) -> Option<&ChatMessage> {
        let shared = self.shared();
        if i < self.head.len() {
            self.head.get(i)
        } else if i - self.head.len() < shared.len() {
            shared.get(i - self.head.len())
        } else {
            self.tail.get(i - self.head.len() - shared.len())
        }
    }

    pub fn first(&self) -> Option<&ChatMessage> {
        self.get(0)
    }

    pub fn last(&self) -> Option<&ChatMessage> {
        self.iter().next_back()
    }

    /// Copies of the messages in `range` (compaction's rare path).
    pub fn cloned(&self, range: std::ops::Range<usize>) -> Vec<ChatMessage> {
        self.iter()
            .skip(range.start)
            .take(range.end.saturating_sub(range.start))
            .cloned()
            .collect()
    }

    pub fn push(&mut self, m: ChatMessage) {
        self.tail.push(m);
    }

    /// The last message, to change: a shared one is copied into this request's own part
    /// first (the history others share stays as recorded).
    pub fn last_mut(&mut self) -> Option<&mut ChatMessage> {
        if self.tail.is_empty() && self.shared_len > 0 {
            self.shared_len -= 1;
            let m = self.shared.get(self.shared_len).cloned()?;
            self.tail.push(m);
        }
        if self.tail.is_empty() {
            self.head.last_mut()
        } else {
            self.tail.last_mut()
        }
    }
}

impl From<Vec<ChatMessage>> for Messages {
    fn from(head: Vec<ChatMessage>) -> Messages {
        Messages::new(head, Arc::default())
    }
}

impl std::ops::Index<usize> for Messages {
    type Output = ChatMessage;
    /// Panics past the end, as a slice does (callers index below `len()`).
    fn index(&self, i: usize) -> &ChatMessage {
        match self.get(i) {
            Some(m) => m,
            None => panic!("message {i} of {}", self.len()),
        }
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Messages) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(role: &str, text: &str, call_id: Option<&str>, calls: &[&str]) -> Row {
        Row {
            role: role.into(),
            text: text.into(),
            tool_calls: calls
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            tool_call_id: call_id.map(str::to_owned),
            seq: Some(1),
            media: Vec::new(),
        }
    }

    fn texts(m: &Messages) -> Vec<String> {
        m.iter()
            .map(|m| format!("{}:{}", m.role, &*m.content))
            .collect()
    }

    #[test]
    fn conversion_keeps_pairs_and_drops_what_providers_refuse() {
        let rows = [
            row("toolResult", "orphan", Some("c0"), &[]),
            row("user", "q", None, &[]),
            row("assistant", "", None, &[]),
            row("assistant", "", None, &["c1"]),
            row("toolResult", "r1", Some("c1"), &[]),
            row("toolResult", "r9", Some("c9"), &[]),
            row("user", "q2", None, &[]),
            row("toolResult", "late", Some("c1"), &[]),
            row(SUMMARY_ROLE, "s", None, &[]),
        ];
        let mut c = Conversion::default();
        let mut out = Vec::new();
        for r in rows {
            c.push(&mut out, r);
        }
        let roles: Vec<_> = out.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "user", "user"]);
        assert_eq!(out[2].tool_call_id.as_deref(), Some("c1"));
        assert!(out[4].content.starts_with(SUMMARY_PREFIX));
    }

    #[test]
    fn messages_read_as_one_list_and_changes_never_reach_the_shared_history() {
        let shared = Arc::new(vec![
            ChatMessage::text("user", "a"),
            ChatMessage::text("user", "b"),
        ]);
        let mut m = Messages::new(vec![ChatMessage::text("system", "s")], shared.clone());
        assert_eq!(m.len(), 3);
        assert_eq!(&*m[1].content, "a");
        assert_eq!(m.get(3), None);
        if let Some(last) = m.last_mut() {
            last.content = "b+".into();
        }
        m.push(ChatMessage::text("assistant", "c"));
        assert_eq!(texts(&m), ["system:s", "user:a", "user:b+", "assistant:c"]);
        assert_eq!(
            &*shared[1].content, "b",
            "the shared history is as recorded"
        );
        assert_eq!(m.cloned(1..3).len(), 2);
        assert_eq!(m.last().map(|l| &*l.content), Some("c"));
        let plain = Messages::from(m.iter().cloned().collect::<Vec<_>>());
        assert_eq!(plain, m);
        let mut only_head = Messages::from(vec![ChatMessage::text("user", "x")]);
        if let Some(l) = only_head.last_mut() {
            l.content = "y".into();
        }
        assert_eq!(texts(&only_head), ["user:y"]);
    }
}
