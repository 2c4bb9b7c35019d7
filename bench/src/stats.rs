//! Summary statistics.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub count: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// Summarizes samples given in microseconds.
pub fn summarize(samples_us: &[f64]) -> Summary {
    let mut v: Vec<f64> = samples_us
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        let idx = ((v.len() as f64 - 1.0) * q).round() as usize;
        v[idx.min(v.len() - 1)] / 1000.0
    };
    let mean = if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64 / 1000.0
    };
    Summary {
        count: v.len(),
        min_ms: pick(0.0),
        median_ms: pick(0.5),
        p95_ms: pick(0.95),
        p99_ms: pick(0.99),
        max_ms: pick(1.0),
        mean_ms: mean,
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={:<6} min {:>8.3}  median {:>8.3}  p95 {:>8.3}  p99 {:>8.3}  max {:>8.3} ms",
            self.count, self.min_ms, self.median_ms, self.p95_ms, self.p99_ms, self.max_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let s = summarize(&(1..=100).map(|x| x as f64 * 1000.0).collect::<Vec<_>>());
        assert_eq!(s.count, 100);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 100.0);
        assert!((s.median_ms - 50.0).abs() <= 1.0);
        assert!((s.p99_ms - 99.0).abs() <= 1.0);
    }
}
