//! What reading a request may cost: the budgets of bytes being parsed, and where a frame is
//! parsed.
//!
//! A frame is charged to two budgets of bytes being parsed from the moment it is read until
//! its handler has read its params: its connection's (one frame of the largest size at a
//! time, so a client that sends faster than its frames are read waits on its own socket) and,
//! for a frame past [`INLINE_PARSE_BYTES`], the gateway's (so the clients together cannot hold
//! more than [`GLOBAL_PARSE_BYTES`] in parsing). Past that size a frame is parsed on the
//! blocking pool, at most one fewer at once than the host has cores ([`off_thread`]): the
//! runtime threads serving other connections and the workers' heartbeats never wait for it,
//! nor starve behind a crowd of parses. What a frame's parse may build is bounded before it
//! starts (`ipc::gateway::shape`) and by the params types (nothing kept that is not used).

use std::sync::Arc;

use ipc::gateway::{FrameError, RequestFrame, MAX_PAYLOAD_BYTES};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Frames up to this size are parsed where they are read.
pub const INLINE_PARSE_BYTES: usize = 64 * 1024;
/// The most bytes of large frames the gateway parses at once, over all connections.
pub const GLOBAL_PARSE_BYTES: usize = 64 * 1024 * 1024;
/// The budgets count in KiB (a semaphore holds at most `u32::MAX >> 3` permits).
const UNIT: usize = 1024;

fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX)
}

/// A budget of bytes being parsed: one per connection, one for the gateway.
#[derive(Clone)]
pub struct ParseBudget(Arc<Semaphore>);

impl ParseBudget {
    pub fn new(bytes: usize) -> Self {
        Self(Arc::new(Semaphore::new(units(bytes) as usize)))
    }

    /// A connection's: one frame of the largest size.
    pub fn per_connection() -> Self {
        Self::new(MAX_PAYLOAD_BYTES)
    }

    /// The gateway's.
    pub fn global() -> Self {
        Self::new(GLOBAL_PARSE_BYTES)
    }

    /// Waits for room for `bytes` (never more than the whole budget).
    async fn charge(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let n = units(bytes).min(units(MAX_PAYLOAD_BYTES)).max(1);
        self.0.clone().acquire_many_owned(n).await.ok()
    }
}

/// What a frame holds of the budgets until its params are read.
pub struct Charge {
    _connection: Option<OwnedSemaphorePermit>,
    _gateway: Option<OwnedSemaphorePermit>,
}

/// Charges a frame of `bytes` to its connection's budget and, when large, to the gateway's.
/// `None` only if a budget was closed (never, while the gateway runs).
pub async fn charge(
    connection: &ParseBudget,
    gateway: &ParseBudget,
    bytes: usize,
) -> Option<Charge> {
    let connection = connection.charge(bytes).await?;
    let gateway = if bytes > INLINE_PARSE_BYTES {
        Some(gateway.charge(bytes).await?)
    } else {
        None
    };
    Some(Charge {
        _connection: Some(connection),
        _gateway: gateway,
    })
}

/// Reads a request frame (its envelope only: params stay text); a large one off the
/// runtime threads.
pub async fn parse(text: String) -> Result<Option<RequestFrame>, FrameError> {
    if text.len() <= INLINE_PARSE_BYTES {
        return ipc::gateway::parse_request(&text);
    }
    off_thread(move || ipc::gateway::parse_request(&text))
        .await
        .unwrap_or_else(|why| {
            Err(FrameError::Invalid {
                id: None,
                reason: format!("the frame's parse did not finish: {why}"),
            })
        })
}

/// Parses of large frames running at once: one fewer than the host's cores (at least one),
/// so a crowd of them leaves a core to the runtime threads.
static PARSE_SLOTS: std::sync::LazyLock<Semaphore> = std::sync::LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Semaphore::new(cores.saturating_sub(1).max(1))
});

/// Why a parse sent off the runtime threads gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum Unparsed {
    #[error(transparent)]
    NoSlot(#[from] tokio::sync::AcquireError),
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Runs the parse `f` on the blocking pool once a parse slot is free.
pub async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unparsed> {
    let _slot = PARSE_SLOTS.acquire().await?;
    Ok(tokio::task::spawn_blocking(f).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn a_connection_holds_one_largest_frame_at_a_time() {
        let conn = ParseBudget::per_connection();
        let global = ParseBudget::global();
        let first = charge(&conn, &global, MAX_PAYLOAD_BYTES).await;
        assert!(first.is_some());
        // The next frame waits until the first one's params are read.
        let next = charge(&conn, &global, 10).now_or_never();
        assert!(next.is_none(), "charged past the connection's budget");
        drop(first);
        assert!(charge(&conn, &global, 10)
            .now_or_never()
            .flatten()
            .is_some());
    }

    #[tokio::test]
    async fn small_frames_do_not_wait_for_the_gateway() {
        let global = ParseBudget::new(INLINE_PARSE_BYTES * 2);
        let big = charge(
            &ParseBudget::per_connection(),
            &global,
            INLINE_PARSE_BYTES * 2,
        )
        .await;
        assert!(big.is_some());
        // The gateway's budget is spent; a small frame of another connection still goes.
        let small = charge(&ParseBudget::per_connection(), &global, 512).now_or_never();
        assert!(small.flatten().is_some());
        drop(big);
        assert!(
            charge(
                &ParseBudget::per_connection(),
                &global,
                INLINE_PARSE_BYTES * 2
            )
            .now_or_never()
            .flatten()
            .is_some(),
            "the charge was given back"
        );
    }
}
