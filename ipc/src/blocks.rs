//! Block streaming (R-D5): how a run's reply is cut into ready-to-deliver blocks while it is
//! written, as OpenClaw's `blockStreamingBreak` and `blockStreamingChunk` say. The worker
//! cuts; the supervisor resolves the settings from the agent's config and the request.

use serde::{Deserialize, Serialize};

/// OpenClaw's defaults (`DEFAULT_BLOCK_STREAM_MIN`, `DEFAULT_BLOCK_STREAM_MAX`).
pub const DEFAULT_MIN_CHARS: u32 = 800;
pub const DEFAULT_MAX_CHARS: u32 = 1200;
/// The largest block any setting may ask for (a block is one client event).
pub const MAX_CHARS_LIMIT: u32 = 64_000;

/// A run's block streaming settings.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockStreaming {
    /// When buffered text goes out.
    pub boundary: BlockBoundary,
    /// A block is not cut shorter than this, unless the text ends (characters).
    pub min_chars: u32,
    /// Nor longer than this (characters).
    pub max_chars: u32,
    /// The first kind of break looked for; then the finer ones.
    pub prefer: BreakPreference,
}

impl Default for BlockStreaming {
    fn default() -> Self {
        BlockStreaming {
            boundary: BlockBoundary::TextEnd,
            min_chars: DEFAULT_MIN_CHARS,
            max_chars: DEFAULT_MAX_CHARS,
            prefer: BreakPreference::Paragraph,
        }
    }
}

/// OpenClaw's `blockStreamingBreak`.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockBoundary {
    /// A block goes out as soon as one is complete; the rest when the response's text ends.
    TextEnd,
    /// Blocks go out when the assistant message is complete.
    MessageEnd,
    #[serde(other)]
    Unknown,
}

impl BlockBoundary {
    pub fn parse(s: &str) -> Option<BlockBoundary> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text_end" => Some(BlockBoundary::TextEnd),
            "message_end" => Some(BlockBoundary::MessageEnd),
            _ => None,
        }
    }
}

/// OpenClaw's `blockStreamingChunk.breakPreference`.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakPreference {
    /// A blank line, else a line end, else a sentence end, else a space.
    Paragraph,
    /// A line end, else a sentence end, else a space.
    Newline,
    /// A sentence end, else a space.
    Sentence,
    #[serde(other)]
    Unknown,
}

impl BreakPreference {
    pub fn parse(s: &str) -> Option<BreakPreference> {
        match s.trim().to_ascii_lowercase().as_str() {
            "paragraph" => Some(BreakPreference::Paragraph),
            "newline" => Some(BreakPreference::Newline),
            "sentence" => Some(BreakPreference::Sentence),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_defaults_are_openclaws() {
        assert_eq!(
            BlockBoundary::parse(" Message_End"),
            Some(BlockBoundary::MessageEnd)
        );
        assert_eq!(BlockBoundary::parse("word"), None);
        assert_eq!(
            BreakPreference::parse("newline"),
            Some(BreakPreference::Newline)
        );
        assert_eq!(BreakPreference::parse("unknown"), None);
        let d = BlockStreaming::default();
        assert_eq!((d.min_chars, d.max_chars), (800, 1200));
        assert_eq!(
            (d.boundary, d.prefer),
            (BlockBoundary::TextEnd, BreakPreference::Paragraph)
        );
    }
}
