//! GC pacing while reads dominate: a background GC job that no writer is waiting for gives the
//! device to point reads and scans.
//!
//! Background GC reclaims space so that writes stay within their budget. When no write has
//! arrived for [`WRITES_IDLE`] while reads keep coming (and the space throttle, if any, is in its
//! normal band), nothing waits on GC: its random lookups and record reads only lengthen the
//! reads' queue. Then a job examines victim records at no more than `gc_read_yield_rate` bytes a
//! second (a token bucket charged with the value bytes of each batch of records it checks), and
//! goes at full speed again at its next batch after a write arrives or the reads stop. RocksDB's
//! BlobDB and Titan collect only in compactions, which stop with the writes; Gleaner keeps
//! collecting, slowly.
//!
//! This is the decision only, pure over a time and counter samples, so it is tested without a
//! clock or an engine; `DbInner` samples its counters, sleeps, and checks for shutdown.

use std::time::Duration;

/// How long without a write before GC may yield to reads: 200 ms. Long enough that the gaps
/// of a steady stream of writes do not count (a writer pausing this long writes little, and
/// makes little garbage meanwhile); short, so that reads following a burst of writes get the
/// machine soon (at a second, GC finishing the writes' garbage took a tenth of the server's
/// CPU in the first second of gleaner-server's GETs: docs/benchmarks.md).
pub const WRITES_IDLE: Duration = Duration::from_millis(200);

/// How recent the last read must be for GC to yield to reads.
pub const READS_RECENT: Duration = Duration::from_secs(1);

/// Most bytes the bucket holds: a job that starts yielding may examine this many seconds' worth
/// at once before it waits.
const BURST: Duration = Duration::from_millis(100);

/// What the pacer sees at one checkpoint of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// Time since some fixed origin (monotonic).
    pub now: Duration,
    /// Running count of user writes (group commits of user batches; the engine's own
    /// conditional writes do not count).
    pub writes: u64,
    /// Running count of user reads (point reads and iterators).
    pub reads: u64,
    /// The space throttle is slowing or stopping writes: GC must not yield.
    pub space_pressed: bool,
}

/// Pacing state shared by the background GC jobs of one database.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Bytes a second while yielding (> 0).
    rate: u64,
    /// Last counter values seen, and when each last changed (both 0 at time 0, when the
    /// database opened).
    writes: u64,
    write_changed: Duration,
    reads: u64,
    read_changed: Duration,
    /// Token bucket in bytes (negative: debt to wait out), and when it was last refilled.
    tokens: f64,
    refilled: Duration,
    /// Whether the last checkpoint was yielding (the bucket starts full on entering).
    yielding: bool,
}

impl Pacer {
    /// A pacer allowing `rate` bytes a second while reads dominate, for counters that were 0
    /// at time 0; `None` for a rate of 0 (pacing off).
    pub fn new(rate: u64) -> Option<Pacer> {
        (rate > 0).then_some(Pacer {
            rate,
            writes: 0,
            write_changed: Duration::ZERO,
            reads: 0,
            read_changed: Duration::ZERO,
            tokens: 0.0,
            refilled: Duration::ZERO,
            yielding: false,
        })
    }

    fn burst(&self) -> f64 {
        self.rate as f64 * BURST.as_secs_f64()
    }

    /// Takes a sample of activity. A counter that moved since the last sample moved now: the
    /// pacer may learn of a write late (by one sample), never early.
    fn observe(&mut self, a: &Activity) {
        if a.writes != self.writes {
            self.writes = a.writes;
            self.write_changed = a.now;
        }
        if a.reads != self.reads {
            self.reads = a.reads;
            self.read_changed = a.now;
        }
    }

    /// Whether GC yields to reads now: no write for [`WRITES_IDLE`], a read within
    /// [`READS_RECENT`], and no space pressure.
    pub fn yielding(&mut self, a: &Activity) -> bool {
        self.observe(a);
        !a.space_pressed
            && a.now.saturating_sub(self.write_changed) >= WRITES_IDLE
            && a.now.saturating_sub(self.read_changed) < READS_RECENT
    }

    /// Charges `bytes` a job is about to examine and returns how long it should wait first
    /// (zero when it need not yield). Call again with 0 bytes after part of a wait to learn
    /// whether the rest is still due: a write arriving, or the reads stopping, forgives it.
    pub fn charge(&mut self, a: &Activity, bytes: u64) -> Duration {
        let yielding = self.yielding(a);
        if !yielding {
            self.yielding = false;
            return Duration::ZERO;
        }
        if !self.yielding {
            // Entering: a full bucket, so a short read burst does not stall a job at once.
            self.yielding = true;
            self.tokens = self.burst();
            self.refilled = a.now;
        }
        let elapsed = a.now.saturating_sub(self.refilled).as_secs_f64();
        self.refilled = a.now;
        self.tokens = (self.tokens + elapsed * self.rate as f64).min(self.burst());
        self.tokens -= bytes as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn at(ms: u64, writes: u64, reads: u64) -> Activity {
        Activity {
            now: Duration::from_millis(ms),
            writes,
            reads,
            space_pressed: false,
        }
    }

    #[test]
    fn rate_zero_is_off() {
        assert!(Pacer::new(0).is_none());
        assert!(Pacer::new(1).is_some());
    }

    /// `WRITES_IDLE` in milliseconds.
    const IDLE: u64 = WRITES_IDLE.as_millis() as u64;

    #[test]
    fn yields_only_after_writes_stopped_while_reads_come() {
        let mut p = Pacer::new(MIB).unwrap();
        // Writes moved the counter: no yielding for WRITES_IDLE.
        assert!(!p.yielding(&at(0, 10, 0)));
        assert!(!p.yielding(&at(IDLE - 1, 10, 1)));
        assert!(p.yielding(&at(IDLE, 10, 2)));
        // A write ends it at once.
        assert!(!p.yielding(&at(IDLE + 100, 11, 3)));
        assert!(!p.yielding(&at(2 * IDLE + 99, 11, 4)));
        assert!(p.yielding(&at(2 * IDLE + 100, 11, 5)));
    }

    #[test]
    fn counters_start_at_zero_when_the_database_opens() {
        // A database that has seen no write since it opened yields as soon as reads come,
        // once WRITES_IDLE has gone by since the open.
        let mut p = Pacer::new(MIB).unwrap();
        assert!(!p.yielding(&at(IDLE - 1, 0, 1)));
        assert!(p.yielding(&at(IDLE, 0, 2)));
        // Writes between two samples are seen at the later one.
        let mut p = Pacer::new(MIB).unwrap();
        assert!(!p.yielding(&at(5000, 3, 1)));
    }

    #[test]
    fn no_reads_means_the_device_is_idle_and_gc_goes_full_speed() {
        let mut p = Pacer::new(MIB).unwrap();
        assert!(!p.yielding(&at(0, 0, 7)));
        assert!(p.yielding(&at(1500, 0, 8)));
        // Reads stop: a second later GC no longer yields.
        assert!(p.yielding(&at(2499, 0, 8)));
        assert!(!p.yielding(&at(2500, 0, 8)));
    }

    #[test]
    fn space_pressure_overrides_yielding() {
        let mut p = Pacer::new(MIB).unwrap();
        assert!(!p.yielding(&at(0, 0, 0)));
        let mut a = at(2000, 0, 1);
        assert!(p.yielding(&a));
        a.space_pressed = true;
        assert!(!p.yielding(&a));
        assert_eq!(p.charge(&a, 100 * MIB), Duration::ZERO);
    }

    #[test]
    fn charges_wait_out_the_rate_after_the_burst() {
        let mut p = Pacer::new(10 * MIB).unwrap();
        assert_eq!(p.charge(&at(0, 0, 0), 50 * MIB), Duration::ZERO);
        // Yielding from 1 s on: the burst (0.1 s = 1 MiB) passes, the rest waits at 10 MiB/s.
        assert_eq!(p.charge(&at(1000, 0, 1), MIB), Duration::ZERO);
        let wait = p.charge(&at(1000, 0, 2), 2 * MIB);
        assert_eq!(wait, Duration::from_millis(200));
        // Half the wait later the other half is still due...
        let rest = p.charge(&at(1100, 0, 3), 0);
        assert_eq!(rest, Duration::from_millis(100));
        // ...and after it, nothing; the bucket refills to at most the burst.
        assert_eq!(p.charge(&at(1200, 0, 4), 0), Duration::ZERO);
        assert_eq!(p.charge(&at(5000, 0, 5), MIB), Duration::ZERO);
        assert_eq!(p.charge(&at(5000, 0, 6), MIB), Duration::from_millis(100));
    }

    #[test]
    fn a_write_forgives_the_debt() {
        let mut p = Pacer::new(MIB).unwrap();
        p.charge(&at(0, 0, 0), 0);
        let wait = p.charge(&at(1000, 0, 1), 10 * MIB);
        assert!(wait > Duration::from_secs(9));
        assert_eq!(p.charge(&at(1050, 1, 2), 0), Duration::ZERO);
        // Yielding again later starts from a full bucket, not the old debt.
        assert_eq!(p.charge(&at(2050, 1, 3), MIB / 10), Duration::ZERO);
    }

    #[test]
    fn long_run_rate_is_the_configured_one() {
        // A job charging 256 KiB batches, sleeping what it is told: 64 MiB take about 4 s at
        // 16 MiB/s (the burst is a tenth of a second's worth).
        let mut p = Pacer::new(16 * MIB).unwrap();
        p.charge(&at(0, 0, 0), 0);
        let mut now = Duration::from_secs(1);
        for reads in 1..=256 {
            let a = Activity {
                now,
                writes: 0,
                reads,
                space_pressed: false,
            };
            now += p.charge(&a, 256 << 10);
        }
        let took = (now - Duration::from_secs(1)).as_secs_f64();
        assert!((3.8..=4.0).contains(&took), "{took}");
    }
}
