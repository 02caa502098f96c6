//! The answer of a point lookup in a memtable or the index tree.

use std::sync::Arc;

use crate::cache::TableCache;
use crate::error::Result;
use crate::key::{SeqNo, make_lookup_key};
use crate::memtable::MemTable;
use crate::table::ReadCtx;
use crate::value::{HandlePayload, ValueHandle};
use crate::version::Version;

/// The newest version of `user_key` at or below `seq`: in `memtables` (newest first), else in
/// `version`'s key tables (read through `tables` as `ctx` says). What a point read finds.
///
/// Errors: reading a key table fails, or an entry there is damaged.
pub fn newest_version<'m>(
    memtables: impl IntoIterator<Item = &'m Arc<MemTable>>,
    version: &Version,
    tables: &TableCache,
    user_key: &[u8],
    seq: SeqNo,
    ctx: ReadCtx,
) -> Result<Option<Lookup>> {
    for m in memtables {
        if let Some(found) = m.get(user_key, seq)? {
            return Ok(Some(found));
        }
    }
    version.get(tables, &make_lookup_key(user_key, seq), ctx)
}

/// What a memtable or the index tree holds for a key at a sequence number: the newest version
/// at or below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The value, stored inline.
    Value {
        /// The value.
        value: Vec<u8>,
        /// When the version expires, if it does ([`crate::expiry`]).
        expiry: Option<u64>,
    },
    /// The value is separated: its record is at `handle` (possibly moved by GC since).
    Handle {
        /// Where the record was written.
        handle: ValueHandle,
        /// Sequence number of the version.
        seq: SeqNo,
        /// Sequence number of the record, which identifies it wherever it has moved: the
        /// version's own, or for a handle written back after the record moved, the record's
        /// ([`StoredHandle`](crate::value::StoredHandle)).
        record_seq: SeqNo,
        /// The policy's payload kept with the handle.
        payload: Option<HandlePayload>,
        /// When the version expires, if it does ([`crate::expiry`]).
        expiry: Option<u64>,
    },
    /// The newest version is a deletion.
    Deleted,
}

impl Lookup {
    /// When the version found expires, if it does.
    pub fn expiry(&self) -> Option<u64> {
        match self {
            Lookup::Value { expiry, .. } | Lookup::Handle { expiry, .. } => *expiry,
            Lookup::Deleted => None,
        }
    }

    /// An inline value that does not expire.
    pub fn value(value: Vec<u8>) -> Lookup {
        Lookup::Value {
            value,
            expiry: None,
        }
    }
}

/// The answer of a GC validity lookup ([`Version::get_key`](crate::version::Version::get_key)):
/// the kind and sequence number of the newest version at or below the lookup's sequence
/// number, without its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLookup {
    /// A separated value: the version at `seq` names the record written at `record_seq`.
    Handle {
        /// Where the version's handle says the record is (possibly a table GC collected since).
        handle: crate::value::ValueHandle,
        /// The version's sequence number.
        seq: SeqNo,
        /// The record's sequence number (the version's own unless the handle was written back
        /// after the record moved).
        record_seq: SeqNo,
        /// When the version expires, if it does ([`crate::expiry`]).
        expiry: Option<u64>,
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
            KeyLookup::Handle { seq, .. }
            | KeyLookup::Inline { seq }
            | KeyLookup::Deleted { seq } => seq,
        }
    }
}
