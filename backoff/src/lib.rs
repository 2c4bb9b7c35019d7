//! Doubling delays with jitter, the one formula behind the supervisor's worker restarts
//! (`control::workers`) and the worker's model retries (`agent::retry`). Pure: the random
//! draw is the caller's (each derives it from its own seed, with no RNG state), so every
//! delay can be tested exactly.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![forbid(unsafe_code)]

use std::time::Duration;

/// Doublings counted at most: past 16, `base · 2^16` (the cap is usually reached long
/// before).
pub const MAX_DOUBLINGS: u32 = 16;

/// `base` doubled `doublings` times (at most [`MAX_DOUBLINGS`]), capped at `cap`, then
/// scaled by a factor from `1 − jitter` to `1 + jitter` picked by `unit`: 0 gives the low
/// end, 1 the high end. `jitter` and `unit` are clamped to `[0, 1]`; the jittered delay may
/// exceed `cap` by up to `jitter`. Never panics: a delay too large for a `Duration` stays the
/// capped one.
pub fn delay(base: Duration, cap: Duration, doublings: u32, jitter: f64, unit: f64) -> Duration {
    let capped = base
        .saturating_mul(1u32 << doublings.min(MAX_DOUBLINGS))
        .min(cap);
    let jitter = jitter.clamp(0.0, 1.0);
    let factor = 1.0 - jitter + 2.0 * jitter * unit.clamp(0.0, 1.0);
    Duration::try_from_secs_f64(factor * capped.as_secs_f64()).unwrap_or(capped)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_from_base_and_caps_before_jitter() {
        let d = |n| delay(100 * MS, 5_000 * MS, n, 0.0, 0.5);
        assert_eq!(d(0), 100 * MS);
        assert_eq!(d(1), 200 * MS);
        assert_eq!(d(5), 3_200 * MS);
        assert_eq!(d(6), 5_000 * MS, "capped");
        assert_eq!(d(u32::MAX), 5_000 * MS);
        // Doublings stop at 16 even without a cap in reach.
        assert_eq!(
            delay(MS, Duration::MAX, 40, 0.0, 0.0),
            MS * (1 << MAX_DOUBLINGS)
        );
    }

    #[test]
    fn the_draw_spans_the_jitter_band() {
        let d = |unit| delay(1_000 * MS, 1_000 * MS, 0, 0.25, unit);
        assert_eq!(d(0.0), 750 * MS);
        assert_eq!(d(0.5), 1_000 * MS);
        assert_eq!(d(1.0), 1_250 * MS, "the cap is exceeded by the jitter");
        assert_eq!(d(-3.0), 750 * MS, "a draw is clamped");
        assert_eq!(d(7.0), 1_250 * MS);
        let tenth = |unit| delay(100 * MS, 2_000 * MS, 0, 0.1, unit);
        assert_eq!(tenth(0.0), 90 * MS);
        assert_eq!(tenth(1.0), 110 * MS);
        // Monotone in the draw.
        let mut last = Duration::ZERO;
        for k in 0..=100 {
            let now = d(f64::from(k) / 100.0);
            assert!(now >= last, "{now:?} after {last:?}");
            last = now;
        }
    }

    #[test]
    fn odd_inputs_never_panic() {
        assert_eq!(delay(MS, MS, 0, f64::NAN, 0.5), MS);
        assert_eq!(delay(MS, MS, 0, 0.5, f64::NAN), MS);
        assert_eq!(
            delay(MS, MS, 0, 9.0, 0.0),
            Duration::ZERO,
            "jitter clamped to 1"
        );
        assert_eq!(
            delay(Duration::MAX, Duration::MAX, 3, 0.5, 1.0),
            Duration::MAX,
            "too large: the capped delay"
        );
        assert_eq!(delay(Duration::ZERO, MS, 9, 0.25, 1.0), Duration::ZERO);
    }
}
