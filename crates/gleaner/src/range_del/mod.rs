//! Range deletion (issue 25): a *range tombstone* deletes every version of every key in
//! `[start, end)` older than its sequence number. Tombstones are fragmented for reads and
//! compaction (`FragmentedTombstones`).
//!
//! Built so far: the fragments, the write-batch op (crate-private), WAL replay, reads of the
//! memtables' tombstones (point reads, and iterators: a key's newest visible version that a
//! tombstone covers is skipped, per key), and the key tables' range-deletion block (written by
//! the table builder, read at open). Flushes, compaction, GC, reads of the tables' tombstones,
//! and iterators that seek past a covered range come next; until they do, nothing outside the
//! crate can write a range tombstone (a flush would drop it).

mod fragments;

pub(crate) use fragments::FragmentedTombstones;

use crate::key::SeqNo;

/// A range tombstone: every version of a key in `[start, end)` (bytewise) with a sequence
/// number below `seq` is deleted, for readers at or above `seq`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RangeTombstone {
    /// First key deleted.
    pub start: Vec<u8>,
    /// First key after the range (exclusive).
    pub end: Vec<u8>,
    /// The tombstone's sequence number.
    pub seq: SeqNo,
}
