//! The answer of a point lookup in a memtable or the index tree.

use std::sync::Arc;

use bytes::Bytes;

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

/// [`newest_version`] without the value: the newest version of `user_key` at or below `seq`
/// in `memtables` (newest first), else in `version`'s key tables, as a [`KeyLookup`]. Reads no
/// value table and copies no value.
///
/// Errors: reading a key table fails, or an entry there is damaged.
pub fn newest_key<'m>(
    memtables: impl IntoIterator<Item = &'m Arc<MemTable>>,
    version: &Version,
    tables: &TableCache,
    user_key: &[u8],
    seq: SeqNo,
    ctx: ReadCtx,
) -> Result<Option<KeyLookup>> {
    for m in memtables {
        if let Some(found) = m.get_key(user_key, seq)? {
            return Ok(Some(found));
        }
    }
    version.get_key(tables, &make_lookup_key(user_key, seq), ctx)
}

/// What a memtable or the index tree holds for a key at a sequence number: the newest version
/// at or below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The value, stored inline.
    Value {
        /// The value: from a memtable, a view of the entry's own buffer (no copy).
        value: Bytes,
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
    pub fn value(value: impl Into<Bytes>) -> Lookup {
        Lookup::Value {
            value: value.into(),
            expiry: None,
        }
    }
}

/// The answer of a key-only lookup ([`Version::get_key`](crate::version::Version::get_key),
/// [`MemTable::get_key`], [`newest_key`]): the kind, sequence number and expiry of the newest
/// version at or below the lookup's sequence number, without its value. What GC's validity
/// checks and the conditional write's checks read: never a separated value, never a copy of an
/// inline one.
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
        /// When the version expires, if it does ([`crate::expiry`]).
        expiry: Option<u64>,
    },
    /// A point deletion written at `seq`.
    Deleted {
        /// The version's sequence number.
        seq: SeqNo,
    },
    /// A range tombstone written at `seq` covers the key and is newer than every version of it
    /// at or below the lookup's sequence number (or covers a key without one).
    RangeDeleted {
        /// The tombstone's sequence number.
        seq: SeqNo,
    },
}

impl KeyLookup {
    /// The version's sequence number (the tombstone's for [`KeyLookup::RangeDeleted`]).
    pub fn seq(&self) -> SeqNo {
        match *self {
            KeyLookup::Handle { seq, .. }
            | KeyLookup::Inline { seq, .. }
            | KeyLookup::Deleted { seq }
            | KeyLookup::RangeDeleted { seq } => seq,
        }
    }

    /// The sequence number of the user's write the version carries: the version's own, but for
    /// a handle the engine wrote when the record moved (a GC write-back, a handle update on
    /// read), the record's, which names the write that put the value there.
    pub fn write_seq(&self) -> SeqNo {
        match *self {
            KeyLookup::Handle { record_seq, .. } => record_seq,
            other => other.seq(),
        }
    }

    /// When the version expires, if it is a value that does.
    pub fn expiry(&self) -> Option<u64> {
        match *self {
            KeyLookup::Handle { expiry, .. } | KeyLookup::Inline { expiry, .. } => expiry,
            KeyLookup::Deleted { .. } | KeyLookup::RangeDeleted { .. } => None,
        }
    }

    /// True when the version is a value (inline or separated), expired or not.
    pub fn is_value(&self) -> bool {
        matches!(self, KeyLookup::Handle { .. } | KeyLookup::Inline { .. })
    }
}
