//! Pure functions of one observation: the byte limits a budget implies for a live-data
//! estimate, the band the disk usage falls in, and the delay of a throttled write.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::config::{MAX_DISK_LOW_FRACTION, SpaceBudget};

/// Where disk usage stands relative to the space budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Band {
    /// Below the low limit (or no limit applies): writes run freely, GC uses `gc_threads`.
    #[default]
    Normal,
    /// At or above the low limit and below the high limit: writes are delayed, GC uses
    /// `gc_threads_max`.
    Throttled,
    /// At or above the high limit: puts wait, GC uses `gc_threads_max` and the urgent ratio.
    Stopped,
}

impl Band {
    /// Stable lower-case name for stats and logs: `normal`, `throttled` or `stopped` (the same
    /// string serde writes).
    pub fn as_str(self) -> &'static str {
        match self {
            Band::Normal => "normal",
            Band::Throttled => "throttled",
            Band::Stopped => "stopped",
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The byte limits in force for one observation. Invariant: `low <= high`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Disk bytes at which the throttled band starts.
    pub low: u64,
    /// Disk bytes at which writes stop.
    pub high: u64,
}

impl Limits {
    /// The limits `budget` implies when the engine estimates `live_bytes` of live data, or
    /// `None` when no limit applies (no limit configured, or only ratio limits and
    /// `live_bytes == 0`: an empty database has no meaningful amplification, and dividing by
    /// zero must not stop it).
    ///
    /// Ratio limits are `round(ratio × live_bytes)`, rounded to the nearest byte so that a
    /// usage of exactly `1.5 × live` compares equal to the limit despite floating-point error.
    /// The cap contributes `high = max_disk_bytes` and `low = round(0.9 × max_disk_bytes)`.
    /// When both apply, each limit is the smaller of the two candidates; since each candidate
    /// pair is ordered, so is the result.
    pub fn for_budget(budget: &SpaceBudget, live_bytes: u64) -> Option<Limits> {
        let ratio = match (budget.space_budget_low, budget.space_budget_high) {
            (Some(low), Some(high)) if live_bytes > 0 => Some(Limits {
                low: scale(live_bytes, low),
                high: scale(live_bytes, high),
            }),
            _ => None,
        };
        let cap = budget.max_disk_bytes.map(|cap| Limits {
            low: scale(cap, MAX_DISK_LOW_FRACTION),
            high: cap,
        });
        match (ratio, cap) {
            (Some(r), Some(c)) => Some(Limits {
                low: r.low.min(c.low),
                high: r.high.min(c.high),
            }),
            (r, c) => r.or(c),
        }
    }

    /// The band `disk_bytes` falls in. Both boundaries belong to the upper band: usage that
    /// *reaches* a limit has crossed it.
    pub fn band(&self, disk_bytes: u64) -> Band {
        if disk_bytes >= self.high {
            Band::Stopped
        } else if disk_bytes >= self.low {
            Band::Throttled
        } else {
            Band::Normal
        }
    }

    /// How far `disk_bytes` is into the throttled band: 0.0 at `low`, approaching 1.0 towards
    /// `high`; clamped to `[0, 1]` outside the band.
    pub fn fraction(&self, disk_bytes: u64) -> f64 {
        if disk_bytes <= self.low {
            return 0.0;
        }
        if disk_bytes >= self.high {
            return 1.0;
        }
        (disk_bytes - self.low) as f64 / (self.high - self.low) as f64
    }
}

/// Delay for a write of `bytes` at `fraction` (see [`Limits::fraction`]) into the throttled
/// band: `bytes ÷ (throttle_write_rate × (1 − fraction))`, capped at `max_write_delay`.
///
/// The permitted rate shrinks linearly from `throttle_write_rate` at the low limit to zero at the
/// high limit, so the delay is non-decreasing in both `fraction` and `bytes`. A rate rather than
/// a fixed delay per write because a fixed delay barely slows large groups and over-penalizes
/// small ones; the engine applies the delay in the group-commit leader, so delays of successive
/// groups add up to an aggregate rate limit.
pub fn write_delay(budget: &SpaceBudget, fraction: f64, bytes: u64) -> Duration {
    let cap = budget.max_write_delay;
    if bytes == 0 || cap.is_zero() {
        return Duration::ZERO;
    }
    let rate = budget.throttle_write_rate as f64 * (1.0 - fraction.clamp(0.0, 1.0));
    let secs = bytes as f64 / rate;
    // A rate of 0 (at the high limit) gives +inf and a NaN fraction survives `clamp` as NaN;
    // both end at the cap rather than in a panicking `from_secs_f64`.
    if secs.is_finite() && secs < cap.as_secs_f64() {
        Duration::from_secs_f64(secs).min(cap)
    } else {
        cap
    }
}

/// `round(base × ratio)` in bytes; `as` saturates at `u64::MAX` for products beyond it.
fn scale(base: u64, ratio: f64) -> u64 {
    (base as f64 * ratio).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(low: Option<f64>, high: Option<f64>, cap: Option<u64>) -> SpaceBudget {
        SpaceBudget {
            space_budget_low: low,
            space_budget_high: high,
            max_disk_bytes: cap,
            ..SpaceBudget::default()
        }
    }

    #[test]
    fn band_names_are_stable() {
        assert_eq!(Band::Normal.as_str(), "normal");
        assert_eq!(Band::Throttled.to_string(), "throttled");
        assert_eq!(
            serde_json::to_string(&Band::Stopped).expect("json"),
            "\"stopped\""
        );
    }

    #[test]
    fn ratio_limits_round_to_the_nearest_byte() {
        let b = budget(Some(1.3), Some(1.5), None);
        let l = Limits::for_budget(&b, 1000).expect("limits");
        assert_eq!(
            l,
            Limits {
                low: 1300,
                high: 1500
            }
        );
        // In binary floating point 1.1 × 50 is 55.00000000000001 and 1.4 × 45 is
        // 62.99999999999999; rounding gives the exact limits where a ceiling or a truncation
        // would be one byte off.
        let b = budget(Some(1.1), Some(1.4), None);
        assert_eq!(Limits::for_budget(&b, 50).expect("limits").low, 55);
        assert_eq!(Limits::for_budget(&b, 45).expect("limits").high, 63);
    }

    #[test]
    fn boundaries_belong_to_the_upper_band() {
        let l = Limits {
            low: 1300,
            high: 1500,
        };
        assert_eq!(l.band(0), Band::Normal);
        assert_eq!(l.band(1299), Band::Normal);
        assert_eq!(l.band(1300), Band::Throttled);
        assert_eq!(l.band(1499), Band::Throttled);
        assert_eq!(l.band(1500), Band::Stopped);
        assert_eq!(l.band(u64::MAX), Band::Stopped);
        let hard = Limits {
            low: 1500,
            high: 1500,
        };
        assert_eq!(
            hard.band(1499),
            Band::Normal,
            "equal limits: no throttled band"
        );
        assert_eq!(hard.band(1500), Band::Stopped);
    }

    #[test]
    fn cap_alone_throttles_from_ninety_percent() {
        let b = budget(None, None, Some(1000));
        let l = Limits::for_budget(&b, 0).expect("cap applies to an empty database");
        assert_eq!(
            l,
            Limits {
                low: 900,
                high: 1000
            }
        );
        assert_eq!(
            Limits::for_budget(&b, 1 << 40),
            Some(l),
            "independent of live data"
        );
    }

    #[test]
    fn smaller_limit_wins_when_both_are_set() {
        let b = budget(Some(1.3), Some(1.5), Some(1400));
        // Ratio: 1300/1500; cap: 1260/1400.
        assert_eq!(
            Limits::for_budget(&b, 1000),
            Some(Limits {
                low: 1260,
                high: 1400
            })
        );
        // Ratio: 130/150; the cap is far away.
        assert_eq!(
            Limits::for_budget(&b, 100),
            Some(Limits {
                low: 130,
                high: 150
            })
        );
        // Ratio low 1300 but cap high 1250: low follows the cap's 1125, staying below high.
        let b = budget(Some(1.3), Some(1.5), Some(1250));
        assert_eq!(
            Limits::for_budget(&b, 1000),
            Some(Limits {
                low: 1125,
                high: 1250
            })
        );
    }

    #[test]
    fn no_limit_without_configuration_or_live_data() {
        assert_eq!(Limits::for_budget(&budget(None, None, None), 1000), None);
        let b = budget(Some(1.3), Some(1.5), None);
        assert_eq!(Limits::for_budget(&b, 0), None, "live = 0 must not divide");
    }

    #[test]
    fn huge_products_saturate() {
        let b = budget(Some(2.0), Some(3.0), None);
        let l = Limits::for_budget(&b, u64::MAX).expect("limits");
        assert_eq!((l.low, l.high), (u64::MAX, u64::MAX));
    }

    #[test]
    fn fraction_is_linear_and_clamped() {
        let l = Limits {
            low: 1000,
            high: 2000,
        };
        assert_eq!(l.fraction(500), 0.0);
        assert_eq!(l.fraction(1000), 0.0);
        assert_eq!(l.fraction(1500), 0.5);
        assert_eq!(l.fraction(1750), 0.75);
        assert_eq!(l.fraction(2000), 1.0);
        assert_eq!(l.fraction(9000), 1.0);
    }

    #[test]
    fn delay_is_bytes_over_a_linearly_shrinking_rate() {
        let b = SpaceBudget {
            throttle_write_rate: 1_000_000,
            max_write_delay: Duration::from_secs(1),
            ..SpaceBudget::default()
        };
        assert_eq!(write_delay(&b, 0.0, 250_000), Duration::from_millis(250));
        assert_eq!(write_delay(&b, 0.5, 250_000), Duration::from_millis(500));
        assert_eq!(write_delay(&b, 0.75, 125_000), Duration::from_millis(500));
        assert_eq!(write_delay(&b, 0.5, 0), Duration::ZERO);
        assert_eq!(
            write_delay(&b, 1.0, 1),
            Duration::from_secs(1),
            "rate 0: cap"
        );
        assert_eq!(
            write_delay(&b, f64::NAN, 1),
            Duration::from_secs(1),
            "NaN: cap"
        );
        let off = SpaceBudget {
            max_write_delay: Duration::ZERO,
            ..b
        };
        assert_eq!(write_delay(&off, 0.9, 1 << 30), Duration::ZERO);
    }

    #[test]
    fn delay_is_monotonic_in_usage_and_size_and_capped() {
        let b = SpaceBudget {
            space_budget_low: Some(1.3),
            space_budget_high: Some(1.5),
            throttle_write_rate: 10 << 20,
            max_write_delay: Duration::from_millis(100),
            ..SpaceBudget::default()
        };
        let l = Limits::for_budget(&b, 1 << 30).expect("limits");
        for bytes in [1u64, 4 << 10, 64 << 10, 1 << 20, 16 << 20] {
            let mut prev = Duration::ZERO;
            for disk in (l.low..l.high).step_by(((l.high - l.low) / 997) as usize) {
                let d = write_delay(&b, l.fraction(disk), bytes);
                assert!(d >= prev, "delay fell from {prev:?} to {d:?} at {disk}");
                assert!(d <= b.max_write_delay);
                prev = d;
            }
            let last = write_delay(&b, l.fraction(l.high - 1), bytes);
            assert!(last >= prev);
        }
        let mut prev = Duration::ZERO;
        for bytes in (0..(4u64 << 20)).step_by(4099) {
            let d = write_delay(&b, 0.3, bytes);
            assert!(d >= prev && d <= b.max_write_delay);
            prev = d;
        }
        assert_eq!(prev, b.max_write_delay, "large writes reach the cap");
    }
}
