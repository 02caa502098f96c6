//! Snapshots: a sequence number and a time that reads can be pinned to, registered so that
//! compaction keeps every version a snapshot can see (and judges expiry at the snapshot's time,
//! [`crate::expiry`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::expiry::{DbTime, ReaderTimes};
use crate::key::SeqNo;

/// The live snapshots of a database, counted per sequence number and time.
#[derive(Debug, Default)]
pub struct SnapshotList {
    /// `(sequence, time)` → live snapshots. Both grow with every snapshot taken (they are read
    /// under the lock, and the database's time never goes back), so the map's order is both.
    live: Mutex<BTreeMap<(SeqNo, u64), usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the database's current visible sequence number. Reading the
    /// sequence inside the list's lock orders snapshot creation against compactions reading
    /// the list, so a compaction never misses a snapshot older than its inputs.
    pub(crate) fn acquire(self: &Arc<Self>, visible: &AtomicU64, time: &DbTime) -> Snapshot {
        let mut live = self.live.lock();
        let seq = visible.load(Ordering::Acquire);
        let time = time.now();
        *live.entry((seq, time)).or_insert(0) += 1;
        Snapshot {
            seq,
            time,
            list: Arc::clone(self),
        }
    }

    fn release(&self, seq: SeqNo, time: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&(seq, time)) {
            *n -= 1;
            if *n == 0 {
                live.remove(&(seq, time));
            }
        }
    }

    /// The live snapshots' sequence numbers and times, with the present's time: what
    /// compaction keeps versions for and judges expiry against. The time is read first: a
    /// snapshot missing from the list, taken later, is no older than it (and reads at or
    /// above every sequence number written before), so the present stands for it.
    pub(crate) fn reader_times(&self, time: &DbTime) -> ReaderTimes {
        let now = time.now();
        let snapshots = self.live.lock().keys().copied().collect();
        ReaderTimes::new(snapshots, now)
    }

    /// The sequence number of the oldest live snapshot, if any.
    pub fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().map(|(s, _)| *s)
    }

    /// Number of live snapshots.
    pub fn count(&self) -> usize {
        self.live.lock().values().sum()
    }
}

/// A consistent point-in-time view of the database. Reads given this snapshot see exactly the
/// writes acknowledged before it was taken. Dropping it releases the versions it kept alive.
#[derive(Debug)]
pub struct Snapshot {
    seq: SeqNo,
    time: u64,
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }

    /// The database's time when the snapshot was taken (milliseconds since the Unix epoch):
    /// its reads judge expiry at it, so they repeat.
    pub fn time_ms(&self) -> u64 {
        self.time
    }

    /// True when the snapshot was taken of the database whose snapshot list is `list`.
    pub(crate) fn is_of(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.list, list)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seq, self.time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_counted_per_sequence_and_time() {
        let list = Arc::new(SnapshotList::default());
        let clock = Arc::new(crate::expiry::ManualClock::new(100));
        let time = DbTime::new(clock.clone(), 0);
        let seq = AtomicU64::new(5);
        let a = list.acquire(&seq, &time);
        clock.advance(10);
        let b = list.acquire(&seq, &time);
        seq.store(9, Ordering::Release);
        let c = list.acquire(&seq, &time);
        assert_eq!((a.sequence(), c.sequence()), (5, 9));
        assert_eq!((a.time_ms(), b.time_ms()), (100, 110));
        assert_eq!(list.reader_times(&time).sequences(), vec![5, 9]);
        assert_eq!(list.count(), 3);
        clock.advance(10);
        let times = list.reader_times(&time);
        assert_eq!(
            (times.horizon(5), times.horizon(6), times.horizon(10)),
            (100, 110, 120),
            "the oldest snapshot at or above a write judges its expiry"
        );
        drop(a);
        assert_eq!(list.reader_times(&time).sequences(), vec![5, 9]);
        assert_eq!(list.reader_times(&time).horizon(5), 110);
        drop(b);
        assert_eq!(list.reader_times(&time).sequences(), vec![9]);
        drop(c);
        assert!(list.reader_times(&time).sequences().is_empty());
    }
}
