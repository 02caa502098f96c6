//! Snapshots: a sequence number that reads can be pinned to, registered so that compaction
//! keeps every version a snapshot can see.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::key::SeqNo;

/// The live snapshots of a database, counted per sequence number.
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the database's current visible sequence number. Reading the
    /// sequence inside the list's lock orders snapshot creation against compactions reading
    /// the list, so a compaction never misses a snapshot older than its inputs.
    pub(crate) fn acquire(self: &Arc<Self>, visible: &AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let seq = visible.load(Ordering::Acquire);
        *live.entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: Arc::clone(self),
        }
    }

    fn release(&self, seq: SeqNo) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
    }

    /// Distinct sequence numbers of live snapshots, ascending.
    pub fn sequences(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }

    /// The sequence number of the oldest live snapshot, if any.
    pub fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().copied()
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
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_counted_per_sequence() {
        let list = Arc::new(SnapshotList::default());
        let seq = AtomicU64::new(5);
        let a = list.acquire(&seq);
        let b = list.acquire(&seq);
        seq.store(9, Ordering::Release);
        let c = list.acquire(&seq);
        assert_eq!((a.sequence(), c.sequence()), (5, 9));
        assert_eq!(list.sequences(), vec![5, 9]);
        assert_eq!(list.count(), 3);
        drop(a);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(b);
        assert_eq!(list.sequences(), vec![9]);
        drop(c);
        assert!(list.sequences().is_empty());
    }
}
