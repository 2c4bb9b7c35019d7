//! Whether a failed model attempt is tried again, and after how long (OpenClaw's budgets,
//! `../shared/spec/openclaw-protocol.md` 6.9): a rate limit (429) up to 10 attempts in all;
//! other transient failures (5xx, overload, a connection refused or reset, a stream cut before
//! any output, no response headers in time) 8 retries within a 90 s outage window. A successful
//! response resets both. `Retry-After` is honoured up to 60 s; a provider that asks for longer
//! is not waited for (the run fails over or fails). Otherwise the delay doubles from the
//! provider's base, capped, with ±10 % jitter so agents that failed together do not retry in
//! step. Pure: the core asks, the driver sleeps.

use std::time::{Duration, Instant};

use ipc::control::RetryReason;

use crate::llm::LlmError;

/// Attempts in all for one model call when the provider rate-limits it.
pub const RATE_LIMIT_ATTEMPTS: u32 = 10;
/// Retries of one model call after other transient failures.
pub const TRANSIENT_RETRIES: u32 = 8;
/// Transient retries stop once the outage has lasted this long.
pub const OUTAGE_WINDOW: Duration = Duration::from_secs(90);
/// The longest `Retry-After` waited for.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// One retry to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub delay: Duration,
    /// The attempt it will be (the first retry is attempt 2).
    pub attempt: u32,
    pub max_attempts: u32,
    pub reason: RetryReason,
}

/// The retry state of a run's current model call.
#[derive(Debug, Clone)]
pub struct Retries {
    base: Duration,
    max: Duration,
    /// Attempts of the current call so far (1 while the first runs).
    attempts: u32,
    transient: u32,
    outage_since: Option<Instant>,
    /// Varies the jitter between runs.
    seed: u64,
}

/// Why `e` is worth another attempt, if it is. `produced` says the attempt already gave
/// visible output (text or tool calls): a stream cut after that is not retried, since what
/// was shown cannot be taken back.
pub fn reason(e: &LlmError, produced: bool) -> Option<RetryReason> {
    match e {
        LlmError::RateLimited { .. } => Some(RetryReason::RateLimit),
        LlmError::Http { status: 529, .. } => Some(RetryReason::Overloaded),
        LlmError::Http {
            status: 408 | 500..=599,
            ..
        } => Some(RetryReason::ServerError),
        LlmError::Transport(_) if !produced => Some(RetryReason::Network),
        LlmError::Timeout(_) => Some(RetryReason::Timeout),
        _ => None,
    }
}

impl Retries {
    pub fn new(base: Duration, max: Duration, seed: u64) -> Self {
        Self {
            base,
            max,
            attempts: 1,
            transient: 0,
            outage_since: None,
            seed,
        }
    }

    /// A response completed: the budgets start over.
    pub fn succeeded(&mut self) {
        self.attempts = 1;
        self.transient = 0;
        self.outage_since = None;
    }

    /// The attempt failed with `e` at `now`: the retry to make, or `None` (give up).
    pub fn next(&mut self, e: &LlmError, produced: bool, now: Instant) -> Option<Retry> {
        let why = reason(e, produced)?;
        let (delay, max_attempts) = if let LlmError::RateLimited { retry_after_ms, .. } = e {
            if self.attempts >= RATE_LIMIT_ATTEMPTS {
                return None;
            }
            let delay = match retry_after_ms.map(Duration::from_millis) {
                Some(d) if d > MAX_RETRY_AFTER => return None,
                Some(d) => d,
                None => self.backoff(self.attempts),
            };
            (delay, RATE_LIMIT_ATTEMPTS)
        } else {
            let since = *self.outage_since.get_or_insert(now);
            if self.transient >= TRANSIENT_RETRIES || now.duration_since(since) >= OUTAGE_WINDOW {
                return None;
            }
            self.transient += 1;
            (self.backoff(self.transient), TRANSIENT_RETRIES + 1)
        };
        self.attempts += 1;
        Some(Retry {
            delay,
            attempt: self.attempts,
            max_attempts,
            reason: why,
        })
    }

    /// `base · 2^(n-1)`, capped, ±10 % jitter.
    fn backoff(&self, n: u32) -> Duration {
        // A small deterministic hash of (seed, n): no RNG state in the pure core.
        let mut x = self.seed ^ u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        let unit = (x % 2001) as f64 / 2000.0; // 0 ..= 1
        backoff::delay(self.base, self.max, n.saturating_sub(1), 0.1, unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rl(after: Option<u64>) -> LlmError {
        LlmError::RateLimited {
            retry_after_ms: after,
            message: "slow down".into(),
        }
    }

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            status,
            message: "x".into(),
        }
    }

    #[test]
    fn rate_limits_get_ten_attempts_and_retry_after_up_to_a_minute() {
        let t0 = Instant::now();
        let mut r = Retries::new(Duration::from_millis(100), Duration::from_secs(5), 1);
        let first = r.next(&rl(Some(1500)), false, t0).unwrap();
        assert_eq!(first.delay, Duration::from_millis(1500));
        assert_eq!(
            (first.attempt, first.max_attempts, first.reason),
            (2, 10, RetryReason::RateLimit)
        );
        for n in 3..=10 {
            assert_eq!(r.next(&rl(None), false, t0).unwrap().attempt, n);
        }
        assert!(
            r.next(&rl(None), false, t0).is_none(),
            "ten attempts in all"
        );
        // A provider asking for more than a minute is not waited for.
        let mut r = Retries::new(Duration::from_millis(100), Duration::from_secs(5), 1);
        assert!(r.next(&rl(Some(61_000)), false, t0).is_none());
    }

    #[test]
    fn transient_failures_get_eight_retries_within_the_outage_window() {
        let t0 = Instant::now();
        let mut r = Retries::new(Duration::from_millis(100), Duration::from_secs(2), 7);
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(r.next(&http(503), false, t0).unwrap().delay);
        }
        assert!(r.next(&http(503), false, t0).is_none());
        // Doubling, capped, jittered by at most 10 %.
        assert!(delays[0] >= Duration::from_millis(90) && delays[0] <= Duration::from_millis(110));
        assert!(delays[1] >= Duration::from_millis(180), "{delays:?}");
        assert!(delays[7] <= Duration::from_millis(2200), "{delays:?}");
        // The window: past 90 s of outage, no more retries however few were made.
        let mut r = Retries::new(Duration::from_millis(100), Duration::from_secs(2), 7);
        assert!(r.next(&http(502), false, t0).is_some());
        assert!(r.next(&http(502), false, t0 + OUTAGE_WINDOW).is_none());
        // A success starts over.
        let mut r = Retries::new(Duration::from_millis(100), Duration::from_secs(2), 7);
        for _ in 0..8 {
            r.next(&http(500), false, t0);
        }
        r.succeeded();
        assert_eq!(r.next(&http(500), false, t0).unwrap().attempt, 2);
    }

    #[test]
    fn what_is_not_transient_is_not_retried() {
        let t0 = Instant::now();
        let mut r = Retries::new(Duration::from_millis(1), Duration::from_millis(1), 0);
        assert!(r.next(&http(400), false, t0).is_none());
        assert!(r.next(&http(401), false, t0).is_none());
        assert!(r
            .next(&LlmError::Protocol("bad".into()), false, t0)
            .is_none());
        // A cut after visible output cannot be retried without showing it twice.
        let cut = LlmError::Transport("reset".into());
        assert!(r.next(&cut, true, t0).is_none());
        assert_eq!(
            r.next(&cut, false, t0).unwrap().reason,
            RetryReason::Network
        );
        assert_eq!(
            r.next(&http(529), false, t0).unwrap().reason,
            RetryReason::Overloaded
        );
    }
}
