//! Bounds on what a provider may send: a provider is as hostile as any other input.
//!
//! A body that never ends grows everything behind it, so [`capped`] ends the stream with an
//! error past [`Limits::body_bytes`]; [`super::sse::Lines`] refuses a line past
//! [`Limits::line_bytes`] while it is still arriving.

use futures_util::{Stream, StreamExt};

/// What one model response may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest run of bytes without a line break (one SSE or NDJSON line), and largest SSE
    /// event (its `data:` lines joined). A JSON value parsed from it may take several times
    /// its size in memory, so this stays well below the body cap.
    pub line_bytes: usize,
    /// Largest response body.
    pub body_bytes: u64,
    /// Largest arguments of one streamed tool call.
    pub tool_args_bytes: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        line_bytes: 8 << 20,
        body_bytes: 256 << 20,
        tool_args_bytes: 8 << 20,
    };
}

pub(crate) const TOO_LARGE: &str = "the provider's response is larger than";

/// `bytes` as they arrive, ending with an error once the body grows past `max_body`;
/// transport errors become their description.
pub fn capped<S, B, E>(bytes: S, max_body: u64) -> impl Stream<Item = Result<B, String>> + Unpin
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut total = 0u64;
    bytes.map(move |chunk| {
        let chunk = chunk.map_err(|e| e.to_string())?;
        total = total.saturating_add(chunk.as_ref().len() as u64);
        if total > max_body {
            return Err(format!("{TOO_LARGE} {max_body} bytes"));
        }
        Ok(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Stream<Item = Result<&'static str, String>> + Unpin {
        futures_util::stream::iter(
            parts
                .iter()
                .map(|p| Ok::<_, String>(*p))
                .collect::<Vec<_>>(),
        )
    }

    async fn run(parts: &[&'static str], body: u64) -> Vec<Result<String, String>> {
        capped(chunks(parts), body)
            .map(|r| r.map(str::to_owned))
            .collect()
            .await
    }

    #[tokio::test]
    async fn the_body_is_bounded() {
        let out = run(&["a\n", "b\n", "c\n"], 5).await;
        assert!(out[1].is_ok());
        assert!(out[2].as_ref().unwrap_err().contains("larger than 5"));
    }
}
