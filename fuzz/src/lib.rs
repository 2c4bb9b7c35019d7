//! A mutation fuzzer that runs on the stable toolchain (coverage-guided fuzzers need a
//! nightly, which a fresh machine cannot install). Each harness gives seed inputs (valid
//! frames, configs, streams) and a target; the driver feeds the target seeds mutated the way
//! fuzzers do (bit flips, byte and chunk inserts, deletions, duplications, splices of two
//! seeds, interesting values, random bytes), catching every panic.
//!
//! Budget: `LOOPGATE_FUZZ_SECONDS` per harness (`scripts/fuzz` sets it), else
//! `LOOPGATE_FUZZ_CASES`, else a quick run of [`QUICK_CASES`] (the test suite). The seed is
//! `LOOPGATE_FUZZ_SEED` (else the time), printed so a failure can be replayed; a panicking
//! input is written to `target/fuzz-failures/<harness>-<n>.bin` and fails the test.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

/// Cases per harness in the test suite.
pub const QUICK_CASES: u64 = 3_000;
/// Largest input a mutation grows to.
const MAX_LEN: usize = 64 * 1024;

/// xorshift64*: small, fast, reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xff\xff\xff\xff",
    b"\x00\x00\x00\x00",
    b"\xc0",
    b"\xed\xa0\x80",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"null",
    b"true",
    b"\n",
    b"\r\n",
    b"data: ",
    b"[DONE]",
    b"=",
    b"[[",
    b"]]",
    b"'''",
];

/// One mutation of `input` (sometimes spliced with `other`).
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let len = v.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = rng.next_u64() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                v.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                v.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(256));
                let chunk = v[i..i + n].to_vec();
                let at = rng.below(v.len() + 1);
                v.splice(at..at, chunk);
            }
            5 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            6 => {
                let s = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(len + 1);
                v.splice(i..i, s.iter().copied());
            }
            7 if len > 0 => {
                v.truncate(rng.below(len));
            }
            8 if len > 0 => {
                // Replace a run of digits-like bytes with a big number.
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(8));
                v.splice(i..i + n, b"99999999999999999999".iter().copied());
            }
            _ => {
                let n = rng.below(32);
                let at = rng.below(len + 1);
                let bytes: Vec<u8> = (0..n).map(|_| b" {}[]\":,\n"[rng.below(9)]).collect();
                v.splice(at..at, bytes);
            }
        }
        v.truncate(MAX_LEN);
    }
    v
}

/// How long, or how many cases, a harness runs.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    Cases(u64),
    Time(Duration),
}

impl Budget {
    pub fn from_env() -> Self {
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        if let Some(s) = num("LOOPGATE_FUZZ_SECONDS") {
            return Budget::Time(Duration::from_secs(s));
        }
        Budget::Cases(num("LOOPGATE_FUZZ_CASES").unwrap_or(QUICK_CASES))
    }
}

/// What a harness run did.
#[derive(Debug)]
pub struct Report {
    pub cases: u64,
    pub elapsed: Duration,
    pub failures: Vec<String>,
}

/// Runs `target` on the seeds, then on mutations of them, for `budget`; panics at the end
/// naming every failing input saved.
pub fn run(name: &str, seeds: &[Vec<u8>], budget: Budget, mut target: impl FnMut(&[u8])) {
    let seed = std::env::var("LOOPGATE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut report = Report {
        cases: 0,
        elapsed: Duration::ZERO,
        failures: Vec::new(),
    };
    // Silence the default hook's backtrace per caught panic; failures are reported below.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut corpus: Vec<Vec<u8>> = seeds.to_vec();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut i = 0usize;
    loop {
        let done = match budget {
            Budget::Cases(n) => report.cases >= n,
            Budget::Time(t) => started.elapsed() >= t,
        };
        if done || report.failures.len() >= 10 {
            break;
        }
        let input = if i < corpus.len() {
            corpus[i].clone()
        } else {
            let a = rng.below(corpus.len());
            let b = rng.below(corpus.len());
            mutate(&mut rng, &corpus[a], &corpus[b])
        };
        i += 1;
        report.cases += 1;
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| target(&input)));
        if outcome.is_err() {
            report
                .failures
                .push(save(name, report.failures.len(), &input));
        }
        // Keep some mutants as seeds for later mutations (no coverage signal: a bounded
        // random sample keeps the corpus varied).
        if i > seeds.len() && rng.below(64) == 0 && corpus.len() < 4096 {
            corpus.push(input);
        }
    }
    std::panic::set_hook(hook);
    report.elapsed = started.elapsed();
    println!(
        "fuzz {name}: {} cases in {:.1} s (seed {seed}), {} failures",
        report.cases,
        report.elapsed.as_secs_f64(),
        report.failures.len()
    );
    assert!(
        report.failures.is_empty(),
        "fuzz {name} (seed {seed}) found inputs that panic: {:?}",
        report.failures
    );
}

fn save(name: &str, n: usize, input: &[u8]) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-failures");
    let path = dir.join(format!("{name}-{n}.bin"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, input);
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_bounded_and_vary() {
        let mut rng = Rng::new(7);
        let seed = b"{\"type\":\"req\",\"id\":\"1\"}".to_vec();
        let mut distinct = std::collections::HashSet::new();
        for _ in 0..500 {
            let m = mutate(&mut rng, &seed, b"other");
            assert!(m.len() <= MAX_LEN);
            distinct.insert(m);
        }
        assert!(distinct.len() > 400);
    }

    #[test]
    fn a_panicking_target_is_reported() {
        let r = std::panic::catch_unwind(|| {
            run("selftest", &[b"ab".to_vec()], Budget::Cases(50), |i| {
                if i.first() == Some(&b'a') {
                    panic!("boom");
                }
            })
        });
        assert!(r.is_err(), "a panic in the target must fail the run");
    }
}
