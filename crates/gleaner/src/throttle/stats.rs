//! Accounting of the throttle's activity and its serializable snapshot. Every counter is a fixed
//! number of sums: no history is kept, so memory is constant however long the database runs.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::band::Band;

/// A snapshot of the throttle for `stats()`. Key names are stable: benchmark tooling reads them.
///
/// Time in a band is measured between evaluations and attributed to the band the earlier
/// evaluation observed (usage is assumed unchanged between observations); a snapshot includes
/// the open interval since the last evaluation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleStats {
    /// True when a space budget is configured.
    pub enabled: bool,
    /// The band at the last evaluation.
    pub band: Band,
    /// Band changes observed (each step counts, so Normal → Stopped is one).
    pub transitions: u64,
    /// Seconds spent in the `throttled` band.
    pub throttled_seconds: f64,
    /// Seconds spent in the `stopped` band, whether or not a write was waiting.
    pub stopped_seconds: f64,
    /// Sum of the delays handed to writes, in seconds: the time writers were asked to sleep.
    pub write_delay_seconds: f64,
    /// Writes handed a non-zero delay.
    pub delayed_writes: u64,
    /// `Wait` answers: bounded wait slices of stopped writes.
    pub stop_waits: u64,
    /// Writes failed because the budget stayed exceeded with nothing reclaimable.
    pub failed_writes: u64,
    /// Delete-only batches let through while writes were stopped.
    pub deletes_while_stopped: u64,
    /// Disk bytes at the last evaluation.
    pub disk_bytes: u64,
    /// Live-data estimate at the last evaluation.
    pub live_bytes: u64,
    /// Low limit in bytes at the last evaluation; none when no limit applied.
    pub low_limit_bytes: Option<u64>,
    /// High limit in bytes at the last evaluation; none when no limit applied.
    pub high_limit_bytes: Option<u64>,
}

/// Running sums behind [`ThrottleStats`]. Durations are summed exactly (as `Duration`) and
/// converted to seconds only in the snapshot, so a manual clock gives exact totals.
#[derive(Debug, Clone, Default)]
pub(super) struct Accounting {
    pub(super) throttled: Duration,
    pub(super) stopped: Duration,
    pub(super) write_delay: Duration,
    pub(super) transitions: u64,
    pub(super) delayed_writes: u64,
    pub(super) stop_waits: u64,
    pub(super) failed_writes: u64,
    pub(super) deletes_while_stopped: u64,
}

impl Accounting {
    /// Adds `elapsed` to the time of `band` (Normal time is not kept: it is the remainder).
    /// Saturating so that a clock at its limit cannot panic the write path.
    pub(super) fn add_band_time(&mut self, band: Band, elapsed: Duration) {
        match band {
            Band::Normal => {}
            Band::Throttled => self.throttled = self.throttled.saturating_add(elapsed),
            Band::Stopped => self.stopped = self.stopped.saturating_add(elapsed),
        }
    }

    /// Records a delay handed to a write.
    pub(super) fn add_delay(&mut self, delay: Duration) {
        self.write_delay = self.write_delay.saturating_add(delay);
        self.delayed_writes = self.delayed_writes.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_time_goes_to_the_right_sum() {
        let mut a = Accounting::default();
        a.add_band_time(Band::Normal, Duration::from_secs(7));
        a.add_band_time(Band::Throttled, Duration::from_millis(1500));
        a.add_band_time(Band::Stopped, Duration::from_millis(250));
        a.add_band_time(Band::Throttled, Duration::from_millis(500));
        assert_eq!(a.throttled, Duration::from_secs(2));
        assert_eq!(a.stopped, Duration::from_millis(250));
        a.add_band_time(Band::Stopped, Duration::MAX);
        assert_eq!(a.stopped, Duration::MAX, "saturates instead of panicking");
    }

    #[test]
    fn snapshot_serializes_with_stable_names() {
        let s = ThrottleStats {
            enabled: true,
            band: Band::Throttled,
            throttled_seconds: 1.5,
            low_limit_bytes: Some(1300),
            ..ThrottleStats::default()
        };
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["band"], "throttled");
        assert_eq!(json["throttled_seconds"], 1.5);
        assert_eq!(json["low_limit_bytes"], 1300);
        assert!(json["high_limit_bytes"].is_null());
        let back: ThrottleStats = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, s);
    }
}
