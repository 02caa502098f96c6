//! The answer of a point lookup in a memtable or the index tree.

use crate::key::SeqNo;
use crate::value::ValueHandle;

/// What a memtable or the index tree holds for a key at a sequence number: the newest version
/// at or below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The value, stored inline.
    Value(Vec<u8>),
    /// The value is separated: its record is at `handle` (possibly moved by GC), written at
    /// sequence number `seq`.
    Handle {
        /// Where the record was written.
        handle: ValueHandle,
        /// Sequence number of the version (identifies the record when it has moved).
        seq: SeqNo,
    },
    /// The newest version is a deletion.
    Deleted,
}
