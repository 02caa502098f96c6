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

/// The answer of a GC validity lookup ([`Version::get_key`](crate::version::Version::get_key)):
/// the kind and sequence number of the newest version at or below the lookup's sequence
/// number, without its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLookup {
    /// A separated value written at `seq`.
    Handle {
        /// The version's sequence number.
        seq: SeqNo,
    },
    /// An inline value written at `seq`.
    Inline {
        /// The version's sequence number.
        seq: SeqNo,
    },
    /// A deletion written at `seq`.
    Deleted {
        /// The version's sequence number.
        seq: SeqNo,
    },
}

impl KeyLookup {
    /// The version's sequence number.
    pub fn seq(&self) -> SeqNo {
        match *self {
            KeyLookup::Handle { seq } | KeyLookup::Inline { seq } | KeyLookup::Deleted { seq } => {
                seq
            }
        }
    }
}
