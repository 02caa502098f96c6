//! Operation latencies: one HDR histogram per client thread (no sharing on the hot path),
//! merged at the end of a phase.

use hdrhistogram::Histogram;

use crate::results::Latency;

/// Longest latency recorded exactly (60 s, in nanoseconds); longer ones are clamped to it.
const MAX_NANOS: u64 = 60_000_000_000;

/// A latency histogram in nanoseconds with three significant digits.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty histogram.
    pub fn new() -> Self {
        LatencyRecorder {
            hist: Histogram::new_with_bounds(1, MAX_NANOS, 3)
                .expect("static histogram bounds are valid"),
        }
    }

    /// Records one operation of `nanos` nanoseconds.
    pub fn record(&mut self, nanos: u64) {
        self.hist.saturating_record(nanos.clamp(1, MAX_NANOS));
    }

    /// Adds another thread's histogram.
    pub fn merge(&mut self, other: &LatencyRecorder) {
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds merge");
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The percentiles in microseconds (all zero when nothing was recorded).
    pub fn summary(&self) -> Latency {
        if self.hist.is_empty() {
            return Latency::default();
        }
        let us = |nanos: u64| nanos as f64 / 1000.0;
        Latency {
            p50: us(self.hist.value_at_quantile(0.50)),
            p99: us(self.hist.value_at_quantile(0.99)),
            p999: us(self.hist.value_at_quantile(0.999)),
            max: us(self.hist.max()),
            mean: self.hist.mean() / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_merged_threads() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        for i in 1..=900u64 {
            a.record(i * 1000);
        }
        for i in 901..=1000u64 {
            b.record(i * 1000);
        }
        a.merge(&b);
        assert_eq!(a.count(), 1000);
        let s = a.summary();
        assert!((s.p50 - 500.0).abs() <= 1.0, "{s:?}");
        assert!((s.p99 - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.max - 1000.0).abs() <= 1.0, "{s:?}");
        assert!((s.mean - 500.5).abs() <= 1.0, "{s:?}");
        assert_eq!(LatencyRecorder::new().summary(), Latency::default());
        let mut c = LatencyRecorder::new();
        c.record(u64::MAX);
        assert!(c.summary().max >= 59_000_000.0, "clamped, not dropped");
    }
}
