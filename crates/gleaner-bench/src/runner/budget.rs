//! The space budget: while an engine's directory is larger than the budget the workload pauses
//! (stall time); every 10 s it stays over the budget without the engine making room, the
//! harness records a violation and asks the engine for its strongest reclaim action. After
//! [`MAX_PAUSED_VIOLATIONS`] violations in a row the workload resumes (violations keep being
//! counted) until the engine is back within budget: an engine that cannot get under the budget
//! must not hang the run.
//!
//! A pure state machine over samples, so it is tested without an engine.

use std::time::Duration;

/// How long an engine may stay over budget without making room before a violation is recorded
/// and reclaim is asked.
pub const VIOLATION_AFTER: Duration = Duration::from_secs(10);

/// Consecutive violations after which the workload stops being paused for this excursion.
pub const MAX_PAUSED_VIOLATIONS: u64 = 3;

/// What the harness should do after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetDecision {
    /// Keep the workload paused.
    pub pause: bool,
    /// Record a violation and ask the engine to reclaim space.
    pub violation: bool,
}

impl BudgetDecision {
    const RUN: BudgetDecision = BudgetDecision {
        pause: false,
        violation: false,
    };
}

/// Tracks one engine against its budget.
#[derive(Debug, Clone)]
pub struct Budget {
    limit: Option<u64>,
    patience: Duration,
    over_since: Option<Duration>,
    /// Disk bytes when the engine was last seen making room (or when it went over).
    best: u64,
    /// Violations during the current excursion over the budget.
    consecutive: u64,
    /// Violations recorded.
    pub violations: u64,
}

impl Budget {
    /// A budget of `limit` bytes (`None`: unlimited) with the standard patience
    /// ([`VIOLATION_AFTER`]).
    pub fn new(limit: Option<u64>) -> Self {
        Self::with_patience(limit, VIOLATION_AFTER)
    }

    /// A budget that records a violation after `patience` over the limit without progress.
    pub fn with_patience(limit: Option<u64>, patience: Duration) -> Self {
        Budget {
            limit,
            patience,
            over_since: None,
            best: u64::MAX,
            consecutive: 0,
            violations: 0,
        }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Feeds a sample taken at `now` (on any monotonic clock).
    pub fn sample(&mut self, now: Duration, disk_bytes: u64) -> BudgetDecision {
        let Some(limit) = self.limit else {
            return BudgetDecision::RUN;
        };
        if disk_bytes <= limit {
            self.over_since = None;
            self.best = u64::MAX;
            self.consecutive = 0;
            return BudgetDecision::RUN;
        }
        let mut violation = false;
        match self.over_since {
            None => {
                self.over_since = Some(now);
                self.best = disk_bytes;
            }
            Some(since) => {
                if disk_bytes < self.best {
                    // The engine is making room on its own: restart the clock.
                    self.best = disk_bytes;
                    self.over_since = Some(now);
                } else if now.saturating_sub(since) >= self.patience {
                    self.violations += 1;
                    self.consecutive += 1;
                    self.over_since = Some(now);
                    violation = true;
                }
            }
        }
        BudgetDecision {
            pause: self.consecutive < MAX_PAUSED_VIOLATIONS,
            violation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    const RUN: BudgetDecision = BudgetDecision::RUN;
    const PAUSE: BudgetDecision = BudgetDecision {
        pause: true,
        violation: false,
    };
    const VIOLATE: BudgetDecision = BudgetDecision {
        pause: true,
        violation: true,
    };

    #[test]
    fn no_budget_never_pauses() {
        let mut b = Budget::new(None);
        assert_eq!(b.sample(s(0.0), u64::MAX), RUN);
    }

    #[test]
    fn over_budget_pauses_and_violates_after_ten_seconds_without_progress() {
        let mut b = Budget::new(Some(1000));
        assert_eq!(b.sample(s(0.0), 900), RUN);
        assert_eq!(b.sample(s(1.0), 1500), PAUSE);
        assert_eq!(b.sample(s(5.0), 1500), PAUSE);
        assert_eq!(b.sample(s(10.9), 1600), PAUSE, "growing is no progress");
        assert_eq!(b.sample(s(11.0), 1600), VIOLATE);
        assert_eq!(b.violations, 1);
        // The clock restarts after a violation.
        assert_eq!(b.sample(s(12.0), 1600), PAUSE);
        assert_eq!(b.sample(s(21.0), 1600), VIOLATE);
        assert_eq!(b.violations, 2);
        assert_eq!(b.sample(s(22.0), 1000), RUN, "at the limit is within");
    }

    #[test]
    fn shrinking_over_budget_restarts_the_clock() {
        let mut b = Budget::new(Some(1000));
        assert_eq!(b.sample(s(0.0), 2000), PAUSE);
        assert_eq!(b.sample(s(9.0), 1800), PAUSE);
        assert_eq!(b.sample(s(18.0), 1700), PAUSE);
        assert_eq!(b.sample(s(27.0), 1700), PAUSE);
        assert_eq!(b.sample(s(28.0), 1700), VIOLATE);
        assert_eq!(b.violations, 1);
    }

    #[test]
    fn a_stuck_engine_is_resumed_after_repeated_violations_but_still_counted() {
        let mut b = Budget::new(Some(1000));
        assert_eq!(b.sample(s(0.0), 2000), PAUSE);
        assert_eq!(b.sample(s(10.0), 2000), VIOLATE);
        assert_eq!(b.sample(s(20.0), 2000), VIOLATE);
        let third = b.sample(s(30.0), 2000);
        assert_eq!(
            third,
            BudgetDecision {
                pause: false,
                violation: true
            }
        );
        assert_eq!(b.sample(s(35.0), 2500), RUN, "the workload runs on");
        assert!(
            b.sample(s(40.0), 2500).violation,
            "and violations keep being recorded"
        );
        assert_eq!(b.violations, 4);
        assert_eq!(b.sample(s(41.0), 900), RUN);
        assert_eq!(
            b.sample(s(42.0), 1100),
            PAUSE,
            "a new excursion pauses again"
        );
    }
}
