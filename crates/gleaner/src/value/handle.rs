//! Value handles: what the index tree stores in place of a separated value.

use std::sync::Arc;

use crate::coding::{Decoder, put_varint64};
use crate::error::{Error, Result};
use crate::expiry::MAX_EXPIRY_MS;
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

/// Most bytes of a [`HandlePayload`]: bounds what a policy may keep beside every handle, and
/// what a reader allocates for one it decodes.
pub const MAX_HANDLE_PAYLOAD: usize = 512;

/// Longest encoding of a handle as an index-tree entry stores it ([`StoredHandle`]): four
/// ten-byte varints, the one-byte flags, the longest payload with its two-byte length, and the
/// latest expiry ([`MAX_EXPIRY_MS`], a nine-byte varint).
pub const MAX_HANDLE_LEN: usize = 41 + 2 + MAX_HANDLE_PAYLOAD + 9;

/// Flag of a [`StoredHandle`] (its fifth varint): the entry is an alias.
const FLAG_ALIAS: u64 = 1;
/// Flag: a length-prefixed payload follows the flags.
const FLAG_PAYLOAD: u64 = 2;
/// Flag: the fourth varint is a placeholder (0); the record is the entry's own. Lets a payload
/// follow a handle that has no record sequence number of its own.
const FLAG_OWN_RECORD: u64 = 4;
/// Flag: the version expires; a varint64 expiry (milliseconds since the Unix epoch, at most
/// [`MAX_EXPIRY_MS`]) follows the flags and the payload.
const FLAG_EXPIRY: u64 = 8;
/// Every flag this build knows: another bit is a handle of a newer format.
const KNOWN_FLAGS: u64 = FLAG_ALIAS | FLAG_PAYLOAD | FLAG_OWN_RECORD | FLAG_EXPIRY;

/// Bytes a GC policy keeps with a handle (issue 24: DumpKV keeps per-key features there):
/// opaque to the engine, from 1 to [`MAX_HANDLE_PAYLOAD`] bytes, carried by compaction, GC
/// write-backs and aliases unless the policy's hooks rewrite it, shown by `gleaner dump`.
/// Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HandlePayload(Arc<[u8]>);

impl HandlePayload {
    /// A payload holding `bytes`.
    ///
    /// Errors: [`Error::InvalidArgument`] when `bytes` is empty (a handle without a payload
    /// has `None`) or longer than [`MAX_HANDLE_PAYLOAD`].
    pub fn new(bytes: &[u8]) -> Result<HandlePayload> {
        if bytes.is_empty() || bytes.len() > MAX_HANDLE_PAYLOAD {
            return Err(Error::invalid(format!(
                "a handle payload holds 1 to {MAX_HANDLE_PAYLOAD} bytes (MAX_HANDLE_PAYLOAD), \
                 not {}",
                bytes.len()
            )));
        }
        Ok(HandlePayload(Arc::from(bytes)))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for HandlePayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HandlePayload(")?;
        for b in self.0.iter() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

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
/// path after the record moved (a write-back commit) has a newer sequence number of its own
/// and names the record by `record_seq`. Readers check the record they read against
/// `(user key, record_seq)`.
///
/// An *alias* (a handle update on read, docs/gc.md) is a second entry naming a
/// record that an older entry of the key (its *owner*) already names: it only tells reads where
/// the record is now. It never makes its record garbage: compaction drops it without counting
/// anything, and keeps the owner while the alias is the newest version of their snapshot
/// stripe; the garbage recount counts owners only.
///
/// A handle may carry a policy's [`HandlePayload`], and the version's expiry
/// ([`crate::expiry`]).
///
/// Encoded as the three varints of the [`ValueHandle`], then, only when `record_seq` is set or
/// a flag is, a fourth (the record sequence number, or 0 with flag 4), then, only when a flag
/// is set, a fifth: the flags (1 alias, 2 payload, 4 own record, 8 expiry), then, with flag 2,
/// the payload, length-prefixed, then, with flag 8, the expiry (docs/format.md, "Value
/// handle"). A handle with no alias, payload or expiry encodes as format 2 did.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredHandle {
    /// Where the record is.
    pub location: ValueHandle,
    /// The record's sequence number, when it differs from the entry's.
    pub record_seq: Option<SeqNo>,
    /// An alias: the record's owner is an older entry of the key. Only with `record_seq`.
    pub alias: bool,
    /// The policy's bytes kept with the handle.
    pub payload: Option<HandlePayload>,
    /// When the version expires (milliseconds since the Unix epoch), if it does. Carried with
    /// the handle wherever the record moves, as the payload is.
    pub expiry: Option<u64>,
}

impl StoredHandle {
    /// A handle naming the record written at the entry's own sequence number.
    pub fn new(location: ValueHandle) -> Self {
        StoredHandle {
            location,
            record_seq: None,
            alias: false,
            payload: None,
            expiry: None,
        }
    }

    /// An alias naming record `record_seq` at `location` (see the type's documentation).
    pub fn alias(location: ValueHandle, record_seq: SeqNo) -> Self {
        StoredHandle {
            location,
            record_seq: Some(record_seq),
            alias: true,
            payload: None,
            expiry: None,
        }
    }

    /// This handle with `payload` in place of its own.
    pub fn with_payload(mut self, payload: Option<HandlePayload>) -> Self {
        self.payload = payload;
        self
    }

    /// The expiry of the stored handle `bytes`, read without decoding the rest (no payload is
    /// copied): what iterators ask of every handle they pass.
    ///
    /// Errors: as [`StoredHandle::decode`], for the part it reads.
    pub fn expiry_of(bytes: &[u8], file: &str) -> Result<Option<u64>> {
        let mut d = Decoder::new(bytes);
        let bad = || Error::corruption(file, 0, "malformed value handle: truncated");
        for _ in 0..4 {
            if d.is_empty() {
                return Ok(None);
            }
            d.varint64().ok_or_else(bad)?;
        }
        if d.is_empty() {
            return Ok(None);
        }
        let flags = d.varint64().ok_or_else(bad)?;
        if flags & FLAG_EXPIRY == 0 {
            return Ok(None);
        }
        if flags & FLAG_PAYLOAD != 0 {
            let len = d.varint64().ok_or_else(bad)?;
            if len > MAX_HANDLE_PAYLOAD as u64 {
                return Err(bad());
            }
            d.bytes(len as usize).ok_or_else(bad)?;
        }
        match d.varint64() {
            Some(e) if e <= MAX_EXPIRY_MS => Ok(Some(e)),
            _ => Err(Error::corruption(
                file,
                0,
                "malformed value handle: expiry truncated or beyond the latest",
            )),
        }
    }

    /// This handle with `expiry` in place of its own.
    pub fn with_expiry(mut self, expiry: Option<u64>) -> Self {
        self.expiry = expiry;
        self
    }

    /// The sequence number of the record an entry at `entry_seq` names.
    pub fn record_seq(&self, entry_seq: SeqNo) -> SeqNo {
        self.record_seq.unwrap_or(entry_seq)
    }

    /// Appends the encoding to `dst`. An alias without a record sequence number cannot be
    /// built through [`StoredHandle::alias`]; one built by hand is encoded without the alias
    /// flag.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        self.location.encode_to(dst);
        let alias = self.alias && self.record_seq.is_some();
        let mut flags = 0;
        if alias {
            flags |= FLAG_ALIAS;
        }
        if self.payload.is_some() {
            flags |= FLAG_PAYLOAD;
        }
        if self.expiry.is_some() {
            flags |= FLAG_EXPIRY;
        }
        if flags & (FLAG_PAYLOAD | FLAG_EXPIRY) != 0 && self.record_seq.is_none() {
            flags |= FLAG_OWN_RECORD;
        }
        if self.record_seq.is_some() || flags != 0 {
            put_varint64(dst, self.record_seq.unwrap_or(0));
        }
        if flags != 0 {
            put_varint64(dst, flags);
        }
        if let Some(p) = &self.payload {
            put_varint64(dst, p.0.len() as u64);
            dst.extend_from_slice(&p.0);
        }
        if let Some(e) = self.expiry {
            put_varint64(dst, e);
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a stored handle that must span all of `bytes`; `file` and `offset` locate it for
    /// errors. A record sequence number above the largest one a write can have, flags of zero
    /// or with a bit this build does not know, an alias without a record sequence number, a
    /// payload empty or longer than [`MAX_HANDLE_PAYLOAD`], an expiry after [`MAX_EXPIRY_MS`],
    /// or a byte after the handle, are damage (the encoding is canonical: each handle has one).
    pub fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<StoredHandle> {
        let mut d = Decoder::new(bytes);
        let bad =
            |what: &str| Error::corruption(file, offset, format!("malformed value handle: {what}"));
        let truncated = || bad("truncated");
        let location = ValueHandle {
            file_number: d.varint64().ok_or_else(truncated)?,
            offset: d.varint64().ok_or_else(truncated)?,
            len: d.varint64().ok_or_else(truncated)?,
        };
        if location.len == 0 {
            return Err(bad("record length 0"));
        }
        let mut record_seq = if d.is_empty() {
            None
        } else {
            Some(d.varint64().ok_or_else(truncated)?)
        };
        let flags = if d.is_empty() {
            0
        } else {
            match d.varint64().ok_or_else(truncated)? {
                0 => return Err(bad("flags 0")),
                f if f & !KNOWN_FLAGS != 0 => {
                    return Err(bad(&format!(
                        "flags {f:#x}: unknown to this build (a newer format?)"
                    )));
                }
                f => f,
            }
        };
        if flags & FLAG_OWN_RECORD != 0 {
            if flags & (FLAG_PAYLOAD | FLAG_EXPIRY) == 0
                || flags & FLAG_ALIAS != 0
                || record_seq != Some(0)
            {
                return Err(bad(
                    "own-record flag without a payload or an expiry, or with an alias",
                ));
            }
            record_seq = None;
        }
        let payload = if flags & FLAG_PAYLOAD != 0 {
            let len = d.varint64().ok_or_else(truncated)?;
            if len == 0 || len > MAX_HANDLE_PAYLOAD as u64 {
                return Err(bad(&format!(
                    "payload of {len} bytes; payloads hold 1 to {MAX_HANDLE_PAYLOAD}"
                )));
            }
            Some(HandlePayload(Arc::from(
                d.bytes(len as usize).ok_or_else(truncated)?,
            )))
        } else {
            None
        };
        let expiry = if flags & FLAG_EXPIRY != 0 {
            match d.varint64().ok_or_else(truncated)? {
                e if e > MAX_EXPIRY_MS => return Err(bad("expiry beyond the latest")),
                e => Some(e),
            }
        } else {
            None
        };
        if !d.is_empty() {
            return Err(bad("bytes after the handle"));
        }
        if record_seq.is_some_and(|s| s > MAX_SEQUENCE) {
            return Err(bad("record sequence number beyond the largest"));
        }
        Ok(StoredHandle {
            location,
            record_seq,
            alias: flags & FLAG_ALIAS != 0,
            payload,
            expiry,
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
                payload: None,
                expiry: None,
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
        assert_eq!(widest.encode().len(), 41);
        let payload = HandlePayload::new(&[0xab; MAX_HANDLE_PAYLOAD]).expect("longest");
        assert_eq!(
            widest
                .clone()
                .with_payload(Some(payload))
                .with_expiry(Some(MAX_EXPIRY_MS))
                .encode()
                .len(),
            MAX_HANDLE_LEN
        );
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

    #[test]
    fn payloads_round_trip_and_leave_handles_without_one_unchanged() {
        let location = ValueHandle {
            file_number: 9,
            offset: 300,
            len: 4000,
        };
        // Without a payload, the bytes of format 2: three, four or five varints.
        assert_eq!(StoredHandle::new(location).encode(), [9, 172, 2, 160, 31]);
        let mut four = StoredHandle::new(location);
        four.record_seq = Some(5);
        assert_eq!(four.encode(), [9, 172, 2, 160, 31, 5]);
        assert_eq!(
            StoredHandle::alias(location, 5).encode(),
            [9, 172, 2, 160, 31, 5, 1]
        );
        let p = HandlePayload::new(b"feat").expect("payload");
        let cases = [
            (StoredHandle::new(location), vec![0u8, 2 | 4]),
            (four.clone(), vec![5, 2]),
            (StoredHandle::alias(location, 5), vec![5, 1 | 2]),
        ];
        for (h, middle) in cases {
            let with = h.clone().with_payload(Some(p.clone()));
            let e = with.encode();
            let mut expect = vec![9, 172, 2, 160, 31];
            expect.extend_from_slice(&middle);
            expect.push(4);
            expect.extend_from_slice(b"feat");
            assert_eq!(e, expect, "{h:?}");
            let back = StoredHandle::decode(&e, "t.sst", 0).expect("decode");
            assert_eq!(back, with);
            assert_eq!(
                back.payload.as_ref().map(HandlePayload::as_bytes),
                Some(&b"feat"[..])
            );
            // A cut before the flags is a shorter handle of format 2 (the key table's block
            // checksum guards against that); after them, the payload is missing.
            for cut in 7..e.len() {
                assert!(
                    StoredHandle::decode(&e[..cut], "t.sst", 0).is_err(),
                    "cut {cut}"
                );
            }
            let mut longer = e.clone();
            longer.push(0);
            assert!(StoredHandle::decode(&longer, "t.sst", 0).is_err());
        }
        let damaged = |bytes: &[u8]| {
            let err = StoredHandle::decode(bytes, "t.sst", 3).expect_err("damage");
            assert!(err.is_corruption(), "{err}");
            err.to_string()
        };
        // A payload of 0 or of more than the limit.
        damaged(&[9, 172, 2, 160, 31, 0, 6, 0]);
        let mut long = vec![9, 172, 2, 160, 31, 0, 6];
        put_varint64(&mut long, MAX_HANDLE_PAYLOAD as u64 + 1);
        long.extend(std::iter::repeat_n(7, MAX_HANDLE_PAYLOAD + 1));
        assert!(damaged(&long).contains("payloads hold 1 to 512"));
        // The own-record flag without a payload, with an alias, or over a record sequence.
        damaged(&[9, 172, 2, 160, 31, 0, 4]);
        damaged(&[9, 172, 2, 160, 31, 0, 7, 1, 1]);
        damaged(&[9, 172, 2, 160, 31, 5, 6, 1, 1]);
        // A flag of a newer format is named as such.
        assert!(damaged(&[9, 172, 2, 160, 31, 5, 16]).contains("unknown to this build"));
        // Payloads are bounded when made.
        assert!(HandlePayload::new(b"").is_err());
        assert!(HandlePayload::new(&[0; MAX_HANDLE_PAYLOAD + 1]).is_err());
        assert_eq!(format!("{p:?}"), "HandlePayload(66656174)");
    }

    #[test]
    fn expiries_round_trip_and_are_read_alone() {
        let location = ValueHandle {
            file_number: 9,
            offset: 300,
            len: 4000,
        };
        let p = HandlePayload::new(b"feat").expect("payload");
        // An expiry needs the fourth varint: 0 and the own-record flag when the record is the
        // entry's own.
        assert_eq!(
            StoredHandle::new(location).with_expiry(Some(5)).encode(),
            [9, 172, 2, 160, 31, 0, 8 | 4, 5]
        );
        let cases = [
            StoredHandle::new(location),
            StoredHandle::new(location).with_payload(Some(p.clone())),
            StoredHandle::alias(location, 77),
            StoredHandle::alias(location, 77).with_payload(Some(p)),
        ];
        for base in cases {
            for expiry in [None, Some(0), Some(1_700_000_000_000), Some(MAX_EXPIRY_MS)] {
                let h = base.clone().with_expiry(expiry);
                let e = h.encode();
                assert!(e.len() <= MAX_HANDLE_LEN);
                assert_eq!(StoredHandle::decode(&e, "t.sst", 0).expect("decode"), h);
                assert_eq!(StoredHandle::expiry_of(&e, "t.sst").expect("expiry"), expiry);
                if expiry.is_some() {
                    for cut in base.encode().len().max(7)..e.len() {
                        assert!(StoredHandle::decode(&e[..cut], "t.sst", 0).is_err());
                        assert!(
                            StoredHandle::expiry_of(&e[..cut], "t.sst").is_err(),
                            "cut {cut} of {h:?}"
                        );
                    }
                }
            }
        }
        // An expiry past the latest is damage.
        let mut late = vec![9, 172, 2, 160, 31, 0, 12];
        put_varint64(&mut late, MAX_EXPIRY_MS + 1);
        assert!(StoredHandle::decode(&late, "t.sst", 0).is_err());
        assert!(StoredHandle::expiry_of(&late, "t.sst").is_err());
    }
}
