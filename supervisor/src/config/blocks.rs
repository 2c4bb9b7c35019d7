//! `block_streaming`: an agent's block streaming (R-D5), OpenClaw's `blockStreamingDefault`,
//! `blockStreamingBreak` and `blockStreamingChunk` in one table. Each key falls back from
//! `agents.list.<id>` to `agents.defaults`, then to OpenClaw's defaults.

use ipc::blocks::{BlockBoundary, BlockStreaming, BreakPreference, MAX_CHARS_LIMIT};
use serde::Deserialize;

use super::invalid::Invalid;

#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBlockStreaming {
    /// Whether `agent` runs stream blocks when the request does not say (default false).
    pub enabled: Option<bool>,
    /// `text_end` (default) or `message_end`.
    #[serde(rename = "break")]
    pub boundary: Option<String>,
    pub min_chars: Option<u32>,
    pub max_chars: Option<u32>,
    /// `paragraph` (default), `newline` or `sentence`.
    pub break_preference: Option<String>,
}

/// An agent's resolved block streaming: on by default or not, and how blocks are cut.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BlockSettings {
    pub enabled: bool,
    pub spec: BlockStreaming,
}

pub(super) fn resolve(
    own: Option<&RawBlockStreaming>,
    defaults: Option<&RawBlockStreaming>,
    key: &str,
) -> Result<BlockSettings, Invalid> {
    let (own, defaults) = (
        own.cloned().unwrap_or_default(),
        defaults.cloned().unwrap_or_default(),
    );
    let key = format!("{key}.block_streaming");
    let boundary = match own.boundary.or(defaults.boundary) {
        None => BlockBoundary::TextEnd,
        Some(b) => BlockBoundary::parse(&b).ok_or_else(|| {
            Invalid::new(
                format!("{key}.break"),
                format!("{b:?} must be text_end or message_end"),
            )
        })?,
    };
    let prefer = match own.break_preference.or(defaults.break_preference) {
        None => BreakPreference::Paragraph,
        Some(p) => BreakPreference::parse(&p).ok_or_else(|| {
            Invalid::new(
                format!("{key}.break_preference"),
                format!("{p:?} must be paragraph, newline or sentence"),
            )
        })?,
    };
    let min_chars = own
        .min_chars
        .or(defaults.min_chars)
        .unwrap_or(ipc::blocks::DEFAULT_MIN_CHARS);
    let max_chars = own
        .max_chars
        .or(defaults.max_chars)
        .unwrap_or(ipc::blocks::DEFAULT_MAX_CHARS.max(min_chars));
    if min_chars == 0 || max_chars < min_chars || max_chars > MAX_CHARS_LIMIT {
        return Err(Invalid::new(
            key,
            format!(
                "need 1 <= min_chars ({min_chars}) <= max_chars ({max_chars}) <= {MAX_CHARS_LIMIT}"
            ),
        ));
    }
    Ok(BlockSettings {
        enabled: own.enabled.or(defaults.enabled).unwrap_or(false),
        spec: BlockStreaming {
            boundary,
            min_chars,
            max_chars,
            prefer,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(toml_text: &str) -> RawBlockStreaming {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn keys_fall_back_to_defaults_then_openclaws() {
        let own = raw("break = \"message_end\"");
        let defaults = raw("enabled = true\nmin_chars = 100\nbreak_preference = \"newline\"");
        let s = resolve(Some(&own), Some(&defaults), "agents.list.main").unwrap();
        assert!(s.enabled);
        assert_eq!(s.spec.boundary, BlockBoundary::MessageEnd);
        assert_eq!(s.spec.prefer, BreakPreference::Newline);
        assert_eq!((s.spec.min_chars, s.spec.max_chars), (100, 1200));
        let none = resolve(None, None, "agents.list.main").unwrap();
        assert_eq!(none, BlockSettings::default());
        // A low bound past the default high bound raises it.
        let s = resolve(Some(&raw("min_chars = 2000")), None, "k").unwrap();
        assert_eq!((s.spec.min_chars, s.spec.max_chars), (2000, 2000));
    }

    #[test]
    fn bad_settings_are_named() {
        let e = resolve(Some(&raw("break = \"never\"")), None, "agents.list.main").unwrap_err();
        assert_eq!(e.key, "agents.list.main.block_streaming.break", "{e}");
        let e = resolve(Some(&raw("min_chars = 10\nmax_chars = 5")), None, "k").unwrap_err();
        assert!(e.problem.contains("min_chars (10) <= max_chars (5)"), "{e}");
        assert!(resolve(Some(&raw("max_chars = 100000")), None, "k").is_err());
        assert!(resolve(Some(&raw("min_chars = 0")), None, "k").is_err());
        assert!(toml::from_str::<RawBlockStreaming>("chunk = 1").is_err());
    }
}
