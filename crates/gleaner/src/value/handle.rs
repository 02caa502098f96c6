//! Value handles: what the index tree stores in place of a separated value.

use crate::coding::{Decoder, put_varint64};
use crate::error::{Error, Result};
use crate::key::{MAX_SEQUENCE, SeqNo};

/// Where a separated value's record lives: `{file_number, offset, len}` of a record in a value
/// table. Encoded as three varints (docs/format.md, "Value handle").
///
/// After garbage collection rewrites the table, `file_number` may name a table that no longer
/// exists; the read path then follows the version's inheritance records to the table that now
/// holds the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueHandle {
    /// Number of the value table (`NNNNNN.vst`) the record was written to.
    pub file_number: u64,
    /// Offset of the record's first byte in that table.
    pub offset: u64,
    /// Length of the whole record (header, key and value).
    pub len: u64,
}

/// Longest encoding of a handle as an index-tree entry stores it ([`StoredHandle`]): four
/// ten-byte varints and the one-byte flags.
pub const MAX_HANDLE_LEN: usize = 41;

/// Flag of a [`StoredHandle`] (its fifth varint): the entry is an alias.
const FLAG_ALIAS: u64 = 1;

impl ValueHandle {
    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file_number);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.len);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a handle that must span all of `bytes`; `file` and `offset` locate it for errors.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<ValueHandle> {
        let mut d = Decoder::new(bytes);
        let bad = || Error::corruption(file, offset, "malformed value handle");
        let handle = ValueHandle {
            file_number: d.varint64().ok_or_else(bad)?,
            offset: d.varint64().ok_or_else(bad)?,
            len: d.varint64().ok_or_else(bad)?,
        };
        if !d.is_empty() || handle.len == 0 {
            return Err(bad());
        }
        Ok(handle)
    }
}

/// A value handle as an index-tree entry stores it: where the record is, and the record's
/// sequence number when it is not the entry's own. An entry written by a flush or compaction
/// names the record written at its own sequence number; an entry written back through the write
/// path after the record moved (Titan's GC write-back) has a newer sequence number of its own
/// and names the record by `record_seq`. Readers check the record they read against
/// `(user key, record_seq)`.
///
/// An *alias* (policy `novkv`'s handle update on read, docs/gc.md) is a second entry naming a
/// record that an older entry of the key (its *owner*) already names: it only tells reads where
/// the record is now. It never makes its record garbage: compaction drops it without counting
/// anything, and keeps the owner while the alias is the newest version of their snapshot
/// stripe; the garbage recount counts owners only.
///
/// Encoded as the three varints of the [`ValueHandle`], then, only when `record_seq` is set, a
/// fourth, then, only for an alias, a fifth: the flags, 1 (docs/format.md, "Value handle").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredHandle {
    /// Where the record is.
    pub location: ValueHandle,
    /// The record's sequence number, when it differs from the entry's.
    pub record_seq: Option<SeqNo>,
    /// An alias: the record's owner is an older entry of the key. Only with `record_seq`.
    pub alias: bool,
}

impl StoredHandle {
    /// A handle naming the record written at the entry's own sequence number.
    pub fn new(location: ValueHandle) -> Self {
        StoredHandle {
            location,
            record_seq: None,
            alias: false,
        }
    }

    /// An alias naming record `record_seq` at `location` (see the type's documentation).
    pub fn alias(location: ValueHandle, record_seq: SeqNo) -> Self {
        StoredHandle {
            location,
            record_seq: Some(record_seq),
            alias: true,
        }
    }

    /// The sequence number of the record an entry at `entry_seq` names.
    pub fn record_seq(&self, entry_seq: SeqNo) -> SeqNo {
        self.record_seq.unwrap_or(entry_seq)
    }

    /// Appends the encoding to `dst`. An alias without a record sequence number cannot be
    /// built through [`StoredHandle::alias`]; one built by hand is encoded as a plain handle.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        self.location.encode_to(dst);
        if let Some(seq) = self.record_seq {
            put_varint64(dst, seq);
            if self.alias {
                put_varint64(dst, FLAG_ALIAS);
            }
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a stored handle that must span all of `bytes`; `file` and `offset` locate it for
    /// errors. A record sequence number above the largest one a write can have, or flags other
    /// than the alias flag, are damage.
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<StoredHandle> {
        let mut d = Decoder::new(bytes);
        let bad = || Error::corruption(file, offset, "malformed value handle");
        let location = ValueHandle {
            file_number: d.varint64().ok_or_else(bad)?,
            offset: d.varint64().ok_or_else(bad)?,
            len: d.varint64().ok_or_else(bad)?,
        };
        let record_seq = if d.is_empty() {
            None
        } else {
            Some(d.varint64().ok_or_else(bad)?)
        };
        let alias = if d.is_empty() {
            false
        } else if d.varint64().ok_or_else(bad)? == FLAG_ALIAS {
            true
        } else {
            return Err(bad());
        };
        if !d.is_empty() || location.len == 0 || record_seq.is_some_and(|s| s > MAX_SEQUENCE) {
            return Err(bad());
        }
        Ok(StoredHandle {
            location,
            record_seq,
            alias,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_handles_round_trip_with_and_without_a_record_sequence() {
        let location = ValueHandle {
            file_number: 9,
            offset: 300,
            len: 4000,
        };
        for record_seq in [None, Some(0), Some(77), Some(MAX_SEQUENCE)] {
            let h = StoredHandle {
                location,
                record_seq,
                alias: false,
            };
            let e = h.encode();
            assert!(e.len() <= MAX_HANDLE_LEN);
            assert_eq!(StoredHandle::decode(&e, "t.sst", 0).expect("decode"), h);
            assert_eq!(h.record_seq(5), record_seq.unwrap_or(5));
            for cut in 1..e.len() {
                let r = StoredHandle::decode(&e[..cut], "t.sst", 0);
                // A cut after the third varint is a handle without a record sequence.
                if cut == location.encode().len() {
                    assert_eq!(r.expect("three varints").record_seq, None);
                } else {
                    assert!(r.is_err(), "cut at {cut}");
                }
            }
            // Past the flags (the fourth and fifth varints of a plain handle, then more).
            let mut longer = e.clone();
            longer.extend_from_slice(&[1, 1, 1]);
            assert!(StoredHandle::decode(&longer, "t.sst", 0).is_err());
        }
        let mut too_new = location.encode();
        put_varint64(&mut too_new, MAX_SEQUENCE + 1);
        assert!(StoredHandle::decode(&too_new, "t.sst", 0).is_err());
        // An alias: a fifth varint, the flags; format-1 handles decode as before.
        for record_seq in [0, 77, MAX_SEQUENCE] {
            let h = StoredHandle::alias(location, record_seq);
            let e = h.encode();
            assert!(e.len() <= MAX_HANDLE_LEN);
            let back = StoredHandle::decode(&e, "t.sst", 0).expect("decode");
            assert_eq!(back, h);
            assert!(back.alias);
            // Without its flags it is a plain written-back handle of the same record.
            let plain = StoredHandle::decode(&e[..e.len() - 1], "t.sst", 0).expect("four");
            assert_eq!((plain.record_seq, plain.alias), (Some(record_seq), false));
            // Unknown flags, and anything after the flags, are damage.
            for flags in [0u64, 2, 3, 1 << 20] {
                let mut other = e[..e.len() - 1].to_vec();
                put_varint64(&mut other, flags);
                assert!(StoredHandle::decode(&other, "t.sst", 0).is_err(), "{flags}");
            }
            let mut longer = e.clone();
            longer.push(1);
            assert!(StoredHandle::decode(&longer, "t.sst", 0).is_err());
        }
        // Encoding an alias with the longest varints stays within the bound.
        let widest = StoredHandle::alias(
            ValueHandle {
                file_number: u64::MAX,
                offset: u64::MAX,
                len: u64::MAX,
            },
            u64::MAX,
        );
        assert_eq!(widest.encode().len(), MAX_HANDLE_LEN);
        // A plain handle is a stored handle of the entry's own record.
        assert_eq!(
            StoredHandle::decode(&location.encode(), "t.sst", 0).expect("decode"),
            StoredHandle::new(location)
        );
    }

    #[test]
    fn round_trip_and_strict_decoding() {
        for h in [
            ValueHandle {
                file_number: 7,
                offset: 0,
                len: 1,
            },
            ValueHandle {
                file_number: u64::MAX,
                offset: u64::MAX,
                len: u64::MAX,
            },
        ] {
            let e = h.encode();
            assert!(e.len() <= MAX_HANDLE_LEN);
            assert_eq!(ValueHandle::decode(&e, "t.sst", 0).expect("decode"), h);
            for cut in 0..e.len() {
                assert!(ValueHandle::decode(&e[..cut], "t.sst", 0).is_err());
            }
            let mut longer = e.clone();
            longer.push(0);
            assert!(ValueHandle::decode(&longer, "t.sst", 0).is_err());
        }
        let zero_len = ValueHandle {
            file_number: 1,
            offset: 2,
            len: 0,
        }
        .encode();
        assert!(
            ValueHandle::decode(&zero_len, "t.sst", 9)
                .expect_err("len 0")
                .is_corruption()
        );
    }
}
