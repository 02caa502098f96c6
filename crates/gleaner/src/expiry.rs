//! Expiring keys: an absolute expiry time per entry, and the clock reads judge it by.
//!
//! A write may carry an *expiry* ([`Db::put_with_expiry`](crate::Db::put_with_expiry),
//! [`WriteBatch::put_with_expiry`](crate::WriteBatch::put_with_expiry)): milliseconds since the
//! Unix epoch at which the version stops being readable. A version whose expiry is at or before
//! a reader's time reads as a deletion: the key is absent (an older version does not come
//! back). The reader's time is the database's clock when the read (or iterator) starts, or, for
//! a [`Snapshot`](crate::Snapshot), the time the snapshot was taken, so a snapshot's reads
//! repeat.
//!
//! The database's time never goes back: it is the largest time its [`Clock`] has shown since the
//! open (a clock set back is ignored until it catches up), so what expired once stays expired,
//! and a snapshot taken later never reads a version an earlier one judged expired.
//!
//! Compaction rewrites a version that has expired for every reader that could read it as a
//! deletion at its sequence number (its separated value becomes garbage), see docs/gc.md.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};

/// Latest expiry a write may carry, in milliseconds since the Unix epoch: `i64::MAX`, so a time
/// fits the signed millisecond types of other systems (Redis's `PEXPIREAT`).
pub const MAX_EXPIRY_MS: u64 = i64::MAX as u64;

/// Bytes of the expiry in front of an inline value of kind
/// [`ValueWithExpiry`](crate::key::ValueKind::ValueWithExpiry).
pub(crate) const INLINE_EXPIRY_LEN: usize = 8;

/// A source of wall-clock time, in milliseconds since the Unix epoch. (Not the throttle's
/// monotonic clock, which measures intervals: an expiry is a point in calendar time, shared with
/// the application and other systems.)
///
/// The database reads it when a read, an iterator, a snapshot or a compaction starts, and when a
/// TTL is turned into an expiry ([`Db::put_with_ttl`](crate::Db::put_with_ttl)). It need not be
/// monotonic: the database never lets its own time go back. Default: [`SystemClock`]; tests use
/// a [`ManualClock`] ([`Options::with_clock`](crate::Options::with_clock)).
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's real-time clock (the default [`Clock`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before the epoch reads as the epoch.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to: for tests, simulations and replays.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    /// A clock showing `ms`.
    pub fn new(ms: u64) -> Self {
        ManualClock {
            ms: AtomicU64::new(ms),
        }
    }

    /// Shows `ms` from now on (it may go back; the database ignores that until it catches up).
    pub fn set(&self, ms: u64) {
        self.ms.store(ms, Ordering::Release);
    }

    /// Moves the clock forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        let _ = self
            .ms
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(ms))
            });
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::Acquire)
    }
}

/// The database's time: the largest time its clock has shown (see the module documentation).
#[derive(Debug)]
pub(crate) struct DbTime {
    clock: std::sync::Arc<dyn Clock>,
    floor: AtomicU64,
}

impl DbTime {
    /// Time read from `clock`, never earlier than `floor`.
    pub(crate) fn new(clock: std::sync::Arc<dyn Clock>, floor: u64) -> Self {
        DbTime {
            clock,
            floor: AtomicU64::new(floor),
        }
    }

    /// The current time: the clock's, or the latest time shown before if the clock went back.
    pub(crate) fn now(&self) -> u64 {
        let t = self.clock.now_ms();
        // Read first: readers of one millisecond then share the cache line instead of all
        // writing it.
        let before = self.floor.load(Ordering::Acquire);
        if t <= before {
            return before;
        }
        self.floor.fetch_max(t, Ordering::AcqRel).max(t)
    }
}

/// True when a version with `expiry` is expired for a reader at time `at`.
pub(crate) fn expired(expiry: Option<u64>, at: u64) -> bool {
    expiry.is_some_and(|e| e <= at)
}

/// The expiry of a write `ttl_ms` milliseconds after `now` (a database's time,
/// [`Db::time_ms`](crate::Db::time_ms)).
///
/// Errors: [`Error::InvalidArgument`] when it would be later than [`MAX_EXPIRY_MS`].
pub fn expiry_after(now: u64, ttl_ms: u64) -> Result<u64> {
    now.checked_add(ttl_ms)
        .filter(|e| *e <= MAX_EXPIRY_MS)
        .ok_or_else(|| {
            Error::invalid(format!(
                "a TTL of {ttl_ms} ms from {now} ms overflows the latest expiry, \
                 {MAX_EXPIRY_MS} ms since the epoch (`expiry::MAX_EXPIRY_MS`)"
            ))
        })
}

/// Checks an expiry given by a caller.
///
/// Errors: [`Error::InvalidArgument`] naming the limit when it is later than [`MAX_EXPIRY_MS`].
pub(crate) fn check_expiry(expiry: u64) -> Result<()> {
    if expiry > MAX_EXPIRY_MS {
        return Err(Error::invalid(format!(
            "expiry {expiry} ms is later than the latest expiry a write may carry, \
             {MAX_EXPIRY_MS} ms since the epoch (`expiry::MAX_EXPIRY_MS`)"
        )));
    }
    Ok(())
}

/// Appends the stored form of an inline value with an expiry: `expiry: u64 LE || value`.
pub(crate) fn encode_inline(dst: &mut Vec<u8>, expiry: u64, value: &[u8]) {
    dst.extend_from_slice(&expiry.to_le_bytes());
    dst.extend_from_slice(value);
}

/// Splits the stored form of an inline value with an expiry into the expiry and the value;
/// `None` when it is shorter than the expiry or the expiry is later than [`MAX_EXPIRY_MS`]
/// (callers report corruption).
pub(crate) fn split_inline(stored: &[u8]) -> Option<(u64, &[u8])> {
    let (e, value) = stored.split_first_chunk::<INLINE_EXPIRY_LEN>()?;
    let expiry = u64::from_le_bytes(*e);
    (expiry <= MAX_EXPIRY_MS).then_some((expiry, value))
}

/// The corruption detail of an inline value [`split_inline`] refuses.
pub(crate) const BAD_INLINE_EXPIRY: &str =
    "inline value with a malformed expiry (shorter than 8 bytes, or beyond the latest)";

/// The expiry of an entry of `kind` whose stored value is `stored` (an inline value with its
/// expiry, or an encoded handle), if it has one.
///
/// Errors: [`Error::Corruption`] (located at `file`) when the value does not decode.
pub(crate) fn entry_expiry(kind: ValueKind, stored: &[u8], file: &str) -> Result<Option<u64>> {
    match kind {
        ValueKind::ValueWithExpiry => split_inline(stored)
            .map(|(e, _)| Some(e))
            .ok_or_else(|| Error::corruption(file, 0, BAD_INLINE_EXPIRY)),
        ValueKind::ValueHandle => crate::value::StoredHandle::expiry_of(stored, file),
        ValueKind::Value | ValueKind::Deletion => Ok(None),
    }
}

/// When each reader of the database started, as far as expiry goes: the times of the live
/// snapshots (ascending by sequence number, and so by time, since both only grow) and the
/// present. A version written at `seq` with an expiry can be read only by the snapshots at or
/// above `seq` and by the present; it is *expired for every reader* when its expiry is at or
/// before the earliest of their times ([`ReaderTimes::horizon`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReaderTimes {
    /// `(sequence, time)` of each live snapshot, ascending.
    snapshots: Vec<(SeqNo, u64)>,
    /// The present's time.
    now: u64,
}

impl ReaderTimes {
    /// Reader times from the live snapshots' `(sequence, time)` pairs (ascending) and `now`.
    pub(crate) fn new(snapshots: Vec<(SeqNo, u64)>, now: u64) -> Self {
        debug_assert!(snapshots.windows(2).all(|w| w[0] <= w[1]));
        ReaderTimes { snapshots, now }
    }

    /// The distinct sequence numbers of the live snapshots, ascending.
    pub(crate) fn sequences(&self) -> Vec<SeqNo> {
        let mut seqs: Vec<SeqNo> = self.snapshots.iter().map(|(s, _)| *s).collect();
        seqs.dedup();
        seqs
    }

    /// Reader times with no snapshot (what an offline tool sees).
    pub(crate) fn at(now: u64) -> Self {
        ReaderTimes::new(Vec::new(), now)
    }

    /// The earliest time of a reader that can read a version written at `seq`: the oldest
    /// snapshot at or above `seq`, or the present.
    pub fn horizon(&self, seq: SeqNo) -> u64 {
        let i = self.snapshots.partition_point(|(s, _)| *s < seq);
        self.snapshots
            .get(i)
            .map_or(self.now, |(_, t)| (*t).min(self.now))
    }

    /// True when a version written at `seq` with `expiry` is expired for every reader that can
    /// read it.
    pub fn expired_for_all(&self, seq: SeqNo, expiry: Option<u64>) -> bool {
        expired(expiry, self.horizon(seq))
    }

    /// The present's time.
    pub fn now(&self) -> u64 {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn database_time_never_goes_back() {
        let clock = Arc::new(ManualClock::new(100));
        let t = DbTime::new(clock.clone(), 0);
        assert_eq!(t.now(), 100);
        clock.set(50);
        assert_eq!(t.now(), 100, "a clock set back is ignored");
        clock.advance(80);
        assert_eq!(t.now(), 130);
        assert_eq!(DbTime::new(clock, 500).now(), 500, "the floor holds");
    }

    #[test]
    fn expiry_is_at_or_before_the_reader_time() {
        assert!(!expired(None, u64::MAX));
        assert!(expired(Some(10), 10));
        assert!(!expired(Some(11), 10));
    }

    #[test]
    fn ttls_past_the_latest_expiry_are_refused() {
        assert_eq!(expiry_after(1_000, 500).unwrap(), 1_500);
        assert!(matches!(
            expiry_after(u64::MAX - 1, 5),
            Err(Error::InvalidArgument(_))
        ));
        assert!(expiry_after(MAX_EXPIRY_MS, 1).is_err());
        assert!(check_expiry(MAX_EXPIRY_MS).is_ok());
        assert!(check_expiry(MAX_EXPIRY_MS + 1).is_err());
    }

    #[test]
    fn inline_values_split_back() {
        let mut v = Vec::new();
        encode_inline(&mut v, 77, b"abc");
        assert_eq!(split_inline(&v), Some((77, &b"abc"[..])));
        assert_eq!(split_inline(&v[..7]), None);
        assert_eq!(split_inline(&v[..8]), Some((77, &b""[..])));
        let mut late = Vec::new();
        encode_inline(&mut late, MAX_EXPIRY_MS + 1, b"abc");
        assert_eq!(
            split_inline(&late),
            None,
            "an expiry beyond the latest is damage"
        );
    }

    #[test]
    fn the_horizon_is_the_oldest_reader_that_sees_the_write() {
        let r = ReaderTimes::new(vec![(5, 100), (9, 200)], 300);
        assert_eq!(r.horizon(1), 100);
        assert_eq!(r.horizon(5), 100);
        assert_eq!(r.horizon(6), 200);
        assert_eq!(r.horizon(10), 300);
        assert!(r.expired_for_all(6, Some(200)));
        assert!(
            !r.expired_for_all(5, Some(200)),
            "the snapshot at 5 reads it unexpired"
        );
        assert!(!r.expired_for_all(10, None));
    }
}
