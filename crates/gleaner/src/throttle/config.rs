//! The space budget: which limits apply, how hard writes are throttled inside them, and what GC
//! is told to do. Defaults are named constants; [`SpaceBudget::validate`] names the bad option.

use std::time::Duration;

use crate::error::{Error, Result};

/// Fraction of `max_disk_bytes` at which the throttled band starts when the absolute cap is the
/// binding limit: 0.9. A cap has no ratio of its own to start slowing down at, and starting 10%
/// below it gives GC room to catch up before writes have to stop.
pub const MAX_DISK_LOW_FRACTION: f64 = 0.9;
/// Default `gc_threads` (GC threads below the low limit): 1, as the engine's default.
pub const DEFAULT_GC_THREADS: u32 = 1;
/// Default `gc_threads_max` (GC threads at or above the low limit): 2, one per core of the
/// machine the defaults are sized for.
pub const DEFAULT_GC_THREADS_MAX: u32 = 2;
/// Largest `gc_threads` and `gc_threads_max`: 64, the engine's limit on GC threads.
pub const MAX_GC_THREADS: u32 = 64;
/// Default `gc_garbage_ratio`: 0.2, the engine's default victim threshold.
pub const DEFAULT_GC_GARBAGE_RATIO: f64 = 0.2;
/// Default `throttle_write_rate`: 64 MiB/s permitted at the low limit. It is a starting point,
/// roughly what one GC thread reclaims on a commodity SSD; tune it to the measured GC rate.
pub const DEFAULT_THROTTLE_WRITE_RATE: u64 = 64 << 20;
/// Default `max_write_delay`: 100 ms, the same slice the write path waits for background work,
/// so a group-commit leader never sleeps longer than one stall slice.
pub const DEFAULT_MAX_WRITE_DELAY: Duration = Duration::from_millis(100);
/// Largest `max_write_delay`: 1 s. The delay is slept by the group-commit leader while it holds
/// the WAL, so every queued writer waits with it.
pub const MAX_WRITE_DELAY_LIMIT: Duration = Duration::from_secs(1);
/// Default `stop_timeout`: 10 s of stopped writes with nothing reclaimable before a write fails.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest `stop_timeout`: 1 hour. Writes must never wait without bound.
pub const STOP_TIMEOUT_LIMIT: Duration = Duration::from_secs(3600);

/// Configuration of the space-aware throttle (Scavenger §3.5).
///
/// The throttle is off unless at least one limit is set: the ratio pair
/// `space_budget_low`/`space_budget_high` (bytes on disk ÷ the engine's live-data estimate), the
/// absolute cap `max_disk_bytes`, or both (then the smaller limit wins; see the module
/// documentation for the exact rules).
#[derive(Debug, Clone, PartialEq)]
pub struct SpaceBudget {
    /// Space amplification at which writes start being throttled and GC gets
    /// `gc_threads_max` threads. Default: none. When set, it must be finite, greater than 1.0
    /// and at most `space_budget_high`, and `space_budget_high` must be set too.
    pub space_budget_low: Option<f64>,
    /// Space amplification at which writes stop and GC also uses the urgent garbage ratio.
    /// Default: none. When set, it must be finite and greater than 1.0, and `space_budget_low`
    /// must be set too (set both equal for a hard limit without a throttled band).
    pub space_budget_high: Option<f64>,
    /// Absolute cap on bytes on disk: writes stop at it and are throttled from
    /// [`MAX_DISK_LOW_FRACTION`] of it. Default: none. When set, it must be greater than 0.
    pub max_disk_bytes: Option<u64>,
    /// GC threads below the low limit. Default 1 ([`DEFAULT_GC_THREADS`]); at most 64; 0 means GC
    /// runs only when asked.
    pub gc_threads: u32,
    /// GC threads at or above the low limit. Default 2 ([`DEFAULT_GC_THREADS_MAX`]); at least
    /// `gc_threads`, at most 64, and at least 1 when any limit is set (otherwise nothing would
    /// reclaim space while writes are stopped).
    pub gc_threads_max: u32,
    /// Garbage ratio at which a value table becomes a GC victim below the high limit. Default 0.2
    /// ([`DEFAULT_GC_GARBAGE_RATIO`]); from 0 to 1.
    pub gc_garbage_ratio: f64,
    /// Garbage ratio used at or above the high limit, so GC also takes tables it would normally
    /// leave for later. Default: none, meaning half of `gc_garbage_ratio`. When set, from 0 to
    /// `gc_garbage_ratio`.
    pub gc_garbage_ratio_urgent: Option<f64>,
    /// Write rate in bytes per second permitted at the low limit; it shrinks linearly to 0 at
    /// the high limit. Default 64 MiB/s ([`DEFAULT_THROTTLE_WRITE_RATE`]); at least 1.
    pub throttle_write_rate: u64,
    /// Longest delay handed to one write in the throttled band. Default 100 ms
    /// ([`DEFAULT_MAX_WRITE_DELAY`]); at most 1 s; 0 disables delays (GC is still sped up).
    pub max_write_delay: Duration,
    /// How long writes stay stopped with nothing reclaimable before a write fails with a
    /// space-budget error. Default 10 s ([`DEFAULT_STOP_TIMEOUT`]); at most 1 hour; 0 fails as
    /// soon as a stopped write finds nothing reclaimable.
    pub stop_timeout: Duration,
}

impl Default for SpaceBudget {
    fn default() -> Self {
        SpaceBudget {
            space_budget_low: None,
            space_budget_high: None,
            max_disk_bytes: None,
            gc_threads: DEFAULT_GC_THREADS,
            gc_threads_max: DEFAULT_GC_THREADS_MAX,
            gc_garbage_ratio: DEFAULT_GC_GARBAGE_RATIO,
            gc_garbage_ratio_urgent: None,
            throttle_write_rate: DEFAULT_THROTTLE_WRITE_RATE,
            max_write_delay: DEFAULT_MAX_WRITE_DELAY,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
        }
    }
}

impl SpaceBudget {
    /// True when any limit is set; otherwise the throttle always answers `Normal`.
    pub fn is_enabled(&self) -> bool {
        self.space_budget_high.is_some() || self.max_disk_bytes.is_some()
    }

    /// The garbage ratio GC uses at or above the high limit: `gc_garbage_ratio_urgent`, or half
    /// of `gc_garbage_ratio` when that is not set.
    pub fn urgent_garbage_ratio(&self) -> f64 {
        self.gc_garbage_ratio_urgent
            .unwrap_or(self.gc_garbage_ratio / 2.0)
    }

    /// Checks every range and every relation between the fields.
    ///
    /// Errors: [`Error::InvalidArgument`] whose message names the offending option and the
    /// value it had.
    pub fn validate(&self) -> Result<()> {
        match (self.space_budget_low, self.space_budget_high) {
            (None, None) => {}
            (Some(low), None) => {
                return Err(Error::invalid(format!(
                    "option `space_budget_low` is {low}, but `space_budget_high` is not set; \
                     set both (equal for a hard limit without a throttled band)"
                )));
            }
            (None, Some(high)) => {
                return Err(Error::invalid(format!(
                    "option `space_budget_high` is {high}, but `space_budget_low` is not set; \
                     set both (equal for a hard limit without a throttled band)"
                )));
            }
            (Some(low), Some(high)) => {
                ratio_above_one("space_budget_low", low)?;
                ratio_above_one("space_budget_high", high)?;
                if low > high {
                    return Err(Error::invalid(format!(
                        "option `space_budget_low` ({low}) must not exceed \
                         `space_budget_high` ({high})"
                    )));
                }
            }
        }
        if self.max_disk_bytes == Some(0) {
            return Err(Error::invalid(
                "option `max_disk_bytes` is 0, but must be greater than 0 when set",
            ));
        }
        if self.gc_threads > MAX_GC_THREADS {
            return Err(Error::invalid(format!(
                "option `gc_threads` is {}, but must be at most {MAX_GC_THREADS}",
                self.gc_threads
            )));
        }
        if self.gc_threads_max < self.gc_threads || self.gc_threads_max > MAX_GC_THREADS {
            return Err(Error::invalid(format!(
                "option `gc_threads_max` ({}) must be at least `gc_threads` ({}) and at most \
                 {MAX_GC_THREADS}",
                self.gc_threads_max, self.gc_threads
            )));
        }
        if self.is_enabled() && self.gc_threads_max == 0 {
            return Err(Error::invalid(
                "option `gc_threads_max` is 0, but must be at least 1 when a space budget is \
                 set: stopped writes wait for GC to reclaim space",
            ));
        }
        // `contains` is false for NaN, so a NaN ratio is rejected rather than slipping through.
        let ratio = self.gc_garbage_ratio;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(Error::invalid(format!(
                "option `gc_garbage_ratio` is {ratio}, but must be between 0 and 1"
            )));
        }
        if let Some(urgent) = self.gc_garbage_ratio_urgent
            && !(0.0..=ratio).contains(&urgent)
        {
            return Err(Error::invalid(format!(
                "option `gc_garbage_ratio_urgent` is {urgent}, but must be between 0 and \
                 `gc_garbage_ratio` ({ratio})"
            )));
        }
        if self.throttle_write_rate == 0 {
            return Err(Error::invalid(
                "option `throttle_write_rate` is 0, but must be at least 1 byte per second",
            ));
        }
        if self.max_write_delay > MAX_WRITE_DELAY_LIMIT {
            return Err(Error::invalid(format!(
                "option `max_write_delay` is {:?}, but must be at most {:?}",
                self.max_write_delay, MAX_WRITE_DELAY_LIMIT
            )));
        }
        if self.stop_timeout > STOP_TIMEOUT_LIMIT {
            return Err(Error::invalid(format!(
                "option `stop_timeout` is {:?}, but must be at most {:?}",
                self.stop_timeout, STOP_TIMEOUT_LIMIT
            )));
        }
        Ok(())
    }
}

/// A space-amplification ratio must be finite and above 1.0: disk usage can never be below the
/// live data it holds, so a limit at or below 1.0 would stop writes forever.
fn ratio_above_one(name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 1.0 {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "option `{name}` is {v}, but must be > 1.0 and finite"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratios(low: f64, high: f64) -> SpaceBudget {
        SpaceBudget {
            space_budget_low: Some(low),
            space_budget_high: Some(high),
            ..SpaceBudget::default()
        }
    }

    #[test]
    fn defaults_are_valid_and_disabled() {
        let b = SpaceBudget::default();
        b.validate().expect("defaults validate");
        assert!(!b.is_enabled());
        assert_eq!((b.gc_threads, b.gc_threads_max), (1, 2));
        assert_eq!(b.urgent_garbage_ratio(), 0.1);
        assert_eq!(b.stop_timeout, Duration::from_secs(10));
        assert_eq!(b.max_write_delay, Duration::from_millis(100));
    }

    #[test]
    fn valid_limits_enable_the_throttle() {
        ratios(1.3, 1.5).validate().expect("1.3/1.5");
        ratios(1.5, 1.5).validate().expect("equal limits");
        assert!(ratios(1.3, 1.5).is_enabled());
        let cap = SpaceBudget {
            max_disk_bytes: Some(1 << 30),
            ..SpaceBudget::default()
        };
        cap.validate().expect("cap alone");
        assert!(cap.is_enabled());
        let urgent = SpaceBudget {
            gc_garbage_ratio_urgent: Some(0.05),
            ..SpaceBudget::default()
        };
        assert_eq!(urgent.urgent_garbage_ratio(), 0.05);
    }

    #[test]
    fn validate_names_the_offending_option() {
        let cases: Vec<(SpaceBudget, &str)> = vec![
            (
                ratios(1.6, 1.5),
                "option `space_budget_low` (1.6) must not exceed `space_budget_high` (1.5)",
            ),
            (
                ratios(1.0, 1.5),
                "option `space_budget_low` is 1, but must be > 1.0",
            ),
            (
                ratios(1.2, 0.9),
                "option `space_budget_high` is 0.9, but must be > 1.0",
            ),
            (
                ratios(f64::NAN, 1.5),
                "option `space_budget_low` is NaN, but must be > 1.0",
            ),
            (
                ratios(1.2, f64::INFINITY),
                "option `space_budget_high` is inf, but must be > 1.0",
            ),
            (
                SpaceBudget {
                    space_budget_low: Some(1.3),
                    ..SpaceBudget::default()
                },
                "option `space_budget_low` is 1.3, but `space_budget_high` is not set",
            ),
            (
                SpaceBudget {
                    space_budget_high: Some(1.5),
                    ..SpaceBudget::default()
                },
                "option `space_budget_high` is 1.5, but `space_budget_low` is not set",
            ),
            (
                SpaceBudget {
                    max_disk_bytes: Some(0),
                    ..SpaceBudget::default()
                },
                "option `max_disk_bytes` is 0",
            ),
            (
                SpaceBudget {
                    gc_threads: 65,
                    gc_threads_max: 65,
                    ..SpaceBudget::default()
                },
                "option `gc_threads` is 65",
            ),
            (
                SpaceBudget {
                    gc_threads: 3,
                    gc_threads_max: 2,
                    ..SpaceBudget::default()
                },
                "option `gc_threads_max` (2) must be at least `gc_threads` (3)",
            ),
            (
                SpaceBudget {
                    gc_threads: 0,
                    gc_threads_max: 0,
                    ..ratios(1.3, 1.5)
                },
                "option `gc_threads_max` is 0, but must be at least 1 when a space budget",
            ),
            (
                SpaceBudget {
                    gc_garbage_ratio: 1.5,
                    ..SpaceBudget::default()
                },
                "option `gc_garbage_ratio` is 1.5",
            ),
            (
                SpaceBudget {
                    gc_garbage_ratio: f64::NAN,
                    ..SpaceBudget::default()
                },
                "option `gc_garbage_ratio` is NaN",
            ),
            (
                SpaceBudget {
                    gc_garbage_ratio_urgent: Some(0.3),
                    ..SpaceBudget::default()
                },
                "option `gc_garbage_ratio_urgent` is 0.3, but must be between 0 and \
                 `gc_garbage_ratio` (0.2)",
            ),
            (
                SpaceBudget {
                    throttle_write_rate: 0,
                    ..SpaceBudget::default()
                },
                "option `throttle_write_rate` is 0",
            ),
            (
                SpaceBudget {
                    max_write_delay: Duration::from_secs(2),
                    ..SpaceBudget::default()
                },
                "option `max_write_delay` is 2s, but must be at most 1s",
            ),
            (
                SpaceBudget {
                    stop_timeout: Duration::from_secs(7200),
                    ..SpaceBudget::default()
                },
                "option `stop_timeout` is 7200s, but must be at most 3600s",
            ),
        ];
        for (budget, expected) in cases {
            let err = budget.validate().expect_err(expected);
            assert!(
                matches!(err, Error::InvalidArgument(_)),
                "{err:?} should be InvalidArgument"
            );
            let msg = err.to_string();
            assert!(
                msg.contains(expected),
                "`{msg}` should contain `{expected}`"
            );
        }
    }
}
