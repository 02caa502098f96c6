//! Backing off from value tables whose GC jobs failed: a background worker does not pick such
//! a table again before a wait that doubles with each failure of it in a row (issue 23: a job
//! that failed every time was retried at once, for minutes, at 100 % CPU).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::DbState;
use crate::error::{Error, Result};

/// Wait before a background worker picks the victims of a failed GC job again; it doubles with
/// each further failure of the same table. As for compactions: a transient fault (a full disk
/// that was cleared) is retried at once, while a table that fails every time costs a few
/// jobs in the first seconds and then one job per [`GC_RETRY_MAX`].
const GC_RETRY_FIRST: Duration = Duration::from_millis(100);

/// Longest wait between GC retries of one table (reached after 10 failures in a row): a fault
/// that went away is noticed within half a minute, and one that stays costs a job per half
/// minute, not a core.
const GC_RETRY_MAX: Duration = Duration::from_secs(30);

/// The wait after a table's `failures`-th consecutive failed GC job.
fn gc_retry_wait(failures: u32) -> Duration {
    GC_RETRY_FIRST
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(GC_RETRY_MAX)
}

/// A live value table whose most recent GC jobs failed (for other reasons than damage, which
/// parks it in `gc_failed`): background workers do not pick it before `retry_at`.
#[derive(Debug, Clone, Copy)]
pub(super) struct GcBackoff {
    /// Jobs that included it and failed, in a row.
    pub(super) failures: u32,
    /// When a background worker may pick it again.
    pub(super) retry_at: Instant,
}

/// What `stats()` shows of the tables GC backs off from, at `now`, counting only `live` ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct GcBackoffSummary {
    pub(super) failing: usize,
    pub(super) waiting: usize,
    pub(super) next_retry: Option<Duration>,
    pub(super) most_failures: u32,
}

impl GcBackoffSummary {
    pub(super) fn of(
        backoff: &BTreeMap<u64, GcBackoff>,
        live: impl Fn(u64) -> bool,
        now: Instant,
    ) -> GcBackoffSummary {
        let mut s = GcBackoffSummary::default();
        for (_, b) in backoff.iter().filter(|(n, _)| live(**n)) {
            s.failing += 1;
            s.most_failures = s.most_failures.max(b.failures);
            if b.retry_at > now {
                s.waiting += 1;
                let wait = b.retry_at - now;
                s.next_retry = Some(s.next_retry.map_or(wait, |w| w.min(wait)));
            }
        }
        s
    }
}

impl DbState {
    /// Updates the backoff of a job's `victims` after the job ended with `result` (under the
    /// state lock; see [`record_outcome`]).
    pub(super) fn record_gc_outcome<T>(
        &mut self,
        victims: &[u64],
        result: &Result<T>,
        now: Instant,
    ) {
        record_outcome(&mut self.gc_backoff, victims, result, now);
    }
}

/// A failure backs off from each of `victims` for a wait that doubles with its failures in a
/// row; a success forgets them, and so do damage (`gc_failed` keeps them out until the
/// database is reopened) and a job cancelled by `close`.
fn record_outcome<T>(
    backoff: &mut BTreeMap<u64, GcBackoff>,
    victims: &[u64],
    result: &Result<T>,
    now: Instant,
) {
    match result {
        Err(e) if !matches!(e, Error::Closed) && !e.is_corruption() => {
            for v in victims {
                let b = backoff.entry(*v).or_insert(GcBackoff {
                    failures: 0,
                    retry_at: now,
                });
                b.failures = b.failures.saturating_add(1);
                b.retry_at = now + gc_retry_wait(b.failures);
            }
        }
        _ => {
            for v in victims {
                backoff.remove(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn waits_double_from_a_tenth_of_a_second_up_to_thirty_seconds() {
        let waits: Vec<Duration> = (1..=12).map(gc_retry_wait).collect();
        assert_eq!(
            waits,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(6400),
                ms(12_800),
                ms(25_600),
                ms(30_000),
                ms(30_000),
                ms(30_000)
            ]
        );
        assert_eq!(gc_retry_wait(u32::MAX), GC_RETRY_MAX);
    }

    #[test]
    fn failures_back_off_successes_and_damage_forget() {
        let t0 = Instant::now();
        let mut map = BTreeMap::new();
        let io: Result<()> = Err(Error::io("reading", std::io::Error::other("EIO")));
        record_outcome(&mut map, &[7, 9], &io, t0);
        record_outcome(&mut map, &[7], &io, t0 + ms(100));
        assert_eq!(map[&7].failures, 2);
        assert_eq!(map[&7].retry_at, t0 + ms(300));
        assert_eq!(map[&9].failures, 1);
        assert_eq!(map[&9].retry_at, t0 + ms(100));

        let s = GcBackoffSummary::of(&map, |_| true, t0 + ms(150));
        assert_eq!(
            s,
            GcBackoffSummary {
                failing: 2,
                waiting: 1,
                next_retry: Some(ms(150)),
                most_failures: 2,
            }
        );
        // Tables that left the version are not shown.
        assert_eq!(GcBackoffSummary::of(&map, |n| n != 7, t0).failing, 1);

        record_outcome(&mut map, &[9], &Ok(()), t0);
        assert!(!map.contains_key(&9));
        let damaged: Result<()> = Err(Error::corruption("000007.vst", 0, "bad"));
        record_outcome(&mut map, &[7], &damaged, t0);
        assert!(map.is_empty());
        record_outcome(&mut map, &[7], &Err::<(), _>(Error::Closed), t0);
        assert!(map.is_empty());
    }
}
