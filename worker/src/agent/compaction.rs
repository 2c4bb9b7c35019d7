//! When and where a run's context is compacted (R-B7, R-G6; OpenClaw section 6.8): the token
//! budget of the model's context window, the estimate of a request's size, and the cut
//! between the older messages a summary replaces and the recent ones kept verbatim. The core
//! decides with these; the summary itself is a model call (`prompt::compaction_request`).

use std::sync::OnceLock;

use ipc::control::CompactionSpec;

use crate::llm::{ChatMessage, Messages, ModelRequest};
use crate::tools::ToolDef;

/// Context window assumed when the provider's is not configured.
pub use ipc::control::DEFAULT_CONTEXT_WINDOW;
/// Default reply reserve and recent tail, each at most a quarter of the window.
const DEFAULT_RESERVE: u64 = 20_000;
const DEFAULT_KEEP_RECENT: u64 = 20_000;
/// Compactions one run may do (a run that still overflows after them fails clearly).
pub const MAX_COMPACTIONS_PER_RUN: u32 = 2;

/// The limits of one model's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// Estimated prompt tokens above which the context is compacted first
    /// (window minus the reply reserve).
    pub limit: u64,
    /// Tokens of recent messages kept verbatim.
    pub keep_recent: u64,
}

impl ContextBudget {
    /// Config values are clamped so that a compaction always makes room: the reserve to half
    /// the window, the kept tail to half of what is left.
    pub fn new(window: Option<u64>, spec: &CompactionSpec) -> Self {
        let window = window.unwrap_or(DEFAULT_CONTEXT_WINDOW).max(1);
        let reserve = spec
            .reserve_tokens
            .unwrap_or_else(|| DEFAULT_RESERVE.min(window / 4))
            .min(window / 2);
        let limit = window - reserve;
        let keep_recent = spec
            .keep_recent_tokens
            .unwrap_or_else(|| DEFAULT_KEEP_RECENT.min(window / 4))
            .min(limit / 2);
        Self { limit, keep_recent }
    }
}

/// Rough token count of a message: a token per 4 bytes of its text, plus framing.
fn message_tokens(m: &ChatMessage) -> u64 {
    let bytes = m.content.len()
        + m.tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len())
            .sum::<usize>()
        + m.tool_call_id.as_deref().map_or(0, str::len);
    let images = m.images.as_ref().map_or(0, |i| {
        i.images.len() as u64 * crate::llm::media::IMAGE_TOKENS
    });
    (bytes as u64).div_ceil(4) + 4 + images
}

/// Bytes of a tool definition as sent (its schema serialized once per process: the
/// definitions are fixed).
fn tool_bytes(t: &ToolDef) -> usize {
    static SIZES: OnceLock<Vec<(&'static str, usize)>> = OnceLock::new();
    let size = |t: &ToolDef| t.name.len() + t.description.len() + t.schema.get().len();
    SIZES
        .get_or_init(|| {
            crate::tools::offered(None)
                .iter()
                .map(|d| (d.name, size(d)))
                .collect()
        })
        .iter()
        .find(|(name, _)| *name == t.name)
        .map_or_else(|| size(t), |(_, n)| *n)
}

/// Estimated prompt tokens of `req` (messages and tool definitions).
pub fn estimate(req: &ModelRequest) -> u64 {
    let tools: usize = req.tools.iter().map(|t| tool_bytes(t)).sum();
    req.messages.iter().map(message_tokens).sum::<u64>() + (tools as u64).div_ceil(4)
}

/// Where to cut `messages` (index 0 is the system prompt): `messages[1..cut]` is summarized,
/// `messages[cut..]` kept. The kept tail is as long as fits `keep_recent` (at least the last
/// message), never starts with a tool result (a call and its results stay together), and
/// starts at a stored message. `None` when there is nothing worth summarizing.
pub fn cut(messages: &Messages, keep_recent: u64) -> Option<usize> {
    let len = messages.len();
    if len < 3 {
        return None;
    }
    let mut i = len;
    let mut kept = 0;
    while i > 2 {
        let t = message_tokens(&messages[i - 1]);
        if kept + t > keep_recent {
            break;
        }
        kept += t;
        i -= 1;
    }
    if i == len {
        // Even the last message is larger than the tail: keep it (with its tool call, if it
        // is a tool result) and summarize the rest.
        i = len - 1;
        while i > 1 && messages[i].role == "tool" {
            i -= 1;
        }
    } else {
        while i < len && messages[i].role == "tool" {
            i += 1;
        }
        if i == len {
            i = len - 1;
            while i > 1 && messages[i].role == "tool" {
                i -= 1;
            }
        }
    }
    let only_old_summary = i == 2
        && messages[1].seq.is_none()
        && messages[1]
            .content
            .starts_with(super::prompt::SUMMARY_PREFIX);
    if i < 2 || only_old_summary || messages[i].seq.is_none() {
        return None;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolCall;

    fn msg(role: &'static str, bytes: usize, seq: i64) -> ChatMessage {
        ChatMessage {
            seq: Some(seq),
            ..ChatMessage::text(role, "x".repeat(bytes))
        }
    }

    #[test]
    fn budget_defaults_and_clamps() {
        let d = ContextBudget::new(None, &CompactionSpec::default());
        assert_eq!(d.limit, 108_000);
        assert_eq!(d.keep_recent, 20_000);
        let small = ContextBudget::new(Some(8_192), &CompactionSpec::default());
        assert_eq!(small.limit, 8_192 - 2_048);
        assert_eq!(small.keep_recent, 2_048);
        let odd = ContextBudget::new(
            Some(4_000),
            &CompactionSpec {
                reserve_tokens: Some(10_000),
                keep_recent_tokens: Some(10_000),
            },
        );
        assert_eq!(odd.limit, 2_000);
        assert_eq!(odd.keep_recent, 1_000);
    }

    #[test]
    fn cut_keeps_the_recent_tail_and_tool_pairs_r_b7() {
        let sys = ChatMessage::text("system", "s");
        // 396 bytes = 99 + 4 framing = 103 tokens each.
        let m = |role, seq| msg(role, 396, seq);
        let msgs = vec![
            sys.clone(),
            m("user", 1),
            m("assistant", 2),
            m("user", 3),
            m("assistant", 4),
        ];
        assert_eq!(cut(&msgs.clone().into(), 210), Some(3));
        assert_eq!(
            cut(&msgs.clone().into(), 10),
            Some(4),
            "the last message is always kept"
        );
        assert_eq!(
            cut(&msgs.clone().into(), 100_000),
            Some(2),
            "at least the oldest message is summarized"
        );
        // The tail would start at a tool result: its call stays with it.
        let call = ChatMessage {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "read".into(),
                arguments: "{}".into(),
            }],
            ..m("assistant", 2)
        };
        let msgs = vec![sys.clone(), m("user", 1), call, m("tool", 3), m("tool", 4)];
        assert_eq!(
            cut(&msgs.clone().into(), 210),
            Some(2),
            "the call is kept with its results"
        );
        let msgs = vec![
            sys.clone(),
            m("user", 1),
            m("assistant", 2),
            m("user", 3),
            ChatMessage {
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                }],
                ..m("assistant", 4)
            },
            m("tool", 5),
            m("tool", 6),
        ];
        // The two results fit the tail but their call does not: the tail grows to the call.
        assert_eq!(cut(&msgs.clone().into(), 210), Some(4));
        // A tail starting at an unstored message cannot be recorded.
        let msgs = vec![
            sys,
            m("user", 1),
            m("assistant", 2),
            ChatMessage::text("user", "x".repeat(396)),
        ];
        assert_eq!(cut(&msgs.clone().into(), 10), None);
    }

    #[test]
    fn estimate_counts_messages_and_tools() {
        let req = ModelRequest {
            messages: std::sync::Arc::new(vec![ChatMessage::text("user", "x".repeat(400))].into()),
            tools: crate::tools::offered(Some(&["read".to_owned()])),
            choice: None,
            thinking: None,
        };
        let e = estimate(&req);
        assert!(e > 104, "{e}");
        assert!(e < 400, "{e}");
    }
}
