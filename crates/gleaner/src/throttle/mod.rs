//! Space-aware throttling (Scavenger §3.5): keeps bytes on disk within a budget by slowing and
//! then stopping writes while GC is given more threads and a lower victim threshold.
//!
//! This module is the decision logic only: a small state machine, [`SpaceThrottle`], fed with
//! observations ([`SpaceInputs`]) and a time from a [`Clock`]. It does no I/O and sleeps
//! nowhere; the engine measures disk usage and its live-data estimate, holds the throttle under
//! a mutex, and carries out each [`Decision`] (sleeping, waiting on a condition variable in
//! bounded slices, failing the write, resizing the GC pool).
//!
//! # Limits
//!
//! `live` is the engine's live-data estimate, `cap` is `max_disk_bytes`. Ratio limits are
//! rounded to the nearest byte.
//!
//! | configured                  | low limit                        | high limit                |
//! |-----------------------------|----------------------------------|---------------------------|
//! | nothing                     | none: always `Normal`            | none                      |
//! | ratios, `live > 0`          | `low × live`                     | `high × live`             |
//! | ratios, `live == 0`         | none: always `Normal` (no ÷ 0)   | none                      |
//! | cap only (any `live`)       | `0.9 × cap`                      | `cap`                     |
//! | ratios and cap              | smaller of the two lows          | smaller of the two highs  |
//!
//! With ratios and a cap and `live == 0`, only the cap's limits apply.
//!
//! # Bands and what they decide
//!
//! | band        | disk usage `d`     | write of `n` bytes        | delete-only | GC threads       | GC ratio |
//! |-------------|--------------------|---------------------------|-------------|------------------|----------|
//! | `Normal`    | `d < low`          | proceed                   | proceed     | `gc_threads`     | normal   |
//! | `Throttled` | `low ≤ d < high`   | delay (below)             | proceed     | `gc_threads_max` | falling  |
//! | `Stopped`   | `high ≤ d`         | wait or fail (stop timer) | proceed     | `gc_threads_max` | urgent   |
//!
//! The normal ratio is `gc_garbage_ratio`; the urgent one is `gc_garbage_ratio_urgent`, by
//! default half of `gc_garbage_ratio`. Through the throttled band the ratio falls linearly
//! from the normal one at `low` to the urgent one at `high` (`normal − f × (normal − urgent)`,
//! `f` as below): delaying writes helps only while GC can bring usage back, and with the normal
//! ratio held through the band GC could find no victim while writes crawled.
//!
//! The delay is `min(max_write_delay, n ÷ (throttle_write_rate × (1 − f)))` with
//! `f = (d − low) ÷ (high − low)`: the permitted rate falls linearly from `throttle_write_rate`
//! at `low` to 0 at `high`, so the delay is non-decreasing in usage and in `n`. A zero delay is
//! answered as `Proceed`. Bands are a pure function of the current observation, without
//! hysteresis: any drop below `high` resumes writes at once, and the delay near `low` is small,
//! so flapping across `low` costs little.
//!
//! # The stop timer
//!
//! `t0` is the start of the current stretch of stopped writes with nothing reclaimable.
//! Evaluations are samples; between two, the state is taken to be what the earlier one saw.
//!
//! | evaluation sees                          | `t0` becomes | a write is answered                              |
//! |------------------------------------------|--------------|--------------------------------------------------|
//! | a band below `Stopped`                   | cleared      | per band, above                                  |
//! | `Stopped`, entering it or `reclaimable`  | `now`        | `Wait` (`Fail` if `stop_timeout` is 0 and not `reclaimable`) |
//! | `Stopped` again, not `reclaimable`       | unchanged    | `Fail` if `now − t0 ≥ stop_timeout`, else `Wait` |
//!
//! So a write fails only after writes have been stopped continuously for `stop_timeout` with
//! GC reporting nothing to reclaim throughout. The timer belongs to the database, not to one
//! writer: every evaluation (ticks included) observes `reclaimable`, and a writer arriving
//! after the timeout has run out fails at once, as with a full disk. Failing repeats until
//! usage drops below `high` or GC reports something reclaimable again.
//!
//! # Accounting
//!
//! [`ThrottleStats`]: time in `throttled` and `stopped` (band time between evaluations, from
//! the first evaluation on), the sum of delays handed out, counts of delays, wait slices,
//! failures, delete-only batches passed while stopped, band transitions, and the last
//! observation with its limits. All of it is a fixed set of sums.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use gleaner::throttle::{
//!     Band, Clock, ManualClock, SpaceBudget, SpaceInputs, SpaceThrottle, WriteKind, WriteVerdict,
//! };
//!
//! let budget = SpaceBudget {
//!     space_budget_low: Some(1.3),
//!     space_budget_high: Some(1.5),
//!     ..SpaceBudget::default()
//! };
//! let clock = ManualClock::new(Duration::ZERO);
//! let mut throttle = SpaceThrottle::new(budget).unwrap();
//! let observe = |disk_bytes| SpaceInputs {
//!     disk_bytes,
//!     live_bytes: 1 << 30,
//!     reclaimable: true,
//!     write: WriteKind::Write { bytes: 1 << 20 },
//! };
//! let d = throttle.evaluate(observe(3 << 30), clock.now());
//! assert_eq!(d.band, Band::Stopped);
//! assert_eq!(d.write, WriteVerdict::Wait);
//! assert_eq!(d.gc.threads, 2);
//! ```

mod band;
mod clock;
mod config;
mod decision;
mod machine;
mod stats;

#[cfg(test)]
mod tests;

pub use band::{Band, Limits, write_delay};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use config::{
    DEFAULT_GC_GARBAGE_RATIO, DEFAULT_GC_THREADS, DEFAULT_GC_THREADS_MAX, DEFAULT_MAX_WRITE_DELAY,
    DEFAULT_STOP_TIMEOUT, DEFAULT_THROTTLE_WRITE_RATE, MAX_DISK_LOW_FRACTION, MAX_GC_THREADS,
    MAX_WRITE_DELAY_LIMIT, STOP_TIMEOUT_LIMIT, SpaceBudget,
};
pub use decision::{Decision, GcDirective, SpaceInputs, StopFailure, WriteKind, WriteVerdict};
pub use machine::SpaceThrottle;
pub use stats::ThrottleStats;
