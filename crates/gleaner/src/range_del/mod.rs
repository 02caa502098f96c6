//! Range deletion (issue 25): a *range tombstone* deletes every version of every key in
//! `[start, end)` older than its sequence number. Tombstones are fragmented for reads and
//! compaction (`FragmentedTombstones`).
//!
//! Built so far: the fragments, the write-batch op (crate-private), WAL replay, and reads of
//! the memtables' tombstones: point reads, and iterators (a key's newest visible version that a
//! tombstone covers is skipped, per key). Flushes, key tables, compaction, GC, and iterators
//! that seek past a covered range instead of visiting its keys come next; until they do,
//! nothing outside the crate can write a range tombstone (a flush would drop it).

// Iterators and compaction will use what point reads do not yet (issue 25).
#![cfg_attr(not(test), allow(dead_code))]

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
