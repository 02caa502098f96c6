//! Write batches: an ordered group of puts and deletes applied atomically.
//!
//! The encoded form is also the WAL record payload (docs/format.md, "Write batch"):
//! `sequence: u64 LE | count: u32 LE | op*`, where an op is `kind: u8 | varint key_len | key`
//! followed, for puts, by `varint value_len | value`, and for handle puts (kind 2, written only
//! by the engine: a GC write-back) by `varint handle_len | stored value handle`; a range delete
//! (op kind 3) is `3 | varint start_len | start | varint end_len | end`; a put with an expiry
//! (op kind 4) is `4 | varint key_len | key | varint value_len | value | expiry: u64 LE`.

use crate::coding::{Decoder, decode_fixed32, decode_fixed64, put_length_prefixed};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};

/// Bytes of the batch header (sequence number and count).
pub const BATCH_HEADER_LEN: usize = 12;

/// The op kind of a range delete. Not an entry kind: range tombstones are kept apart from point
/// entries in memtables and key tables.
const OP_RANGE_DELETE: u8 = 3;

/// The op kind of a put with an expiry (its entry is of kind
/// [`ValueKind::ValueWithExpiry`], or a handle with an expiry once separated).
const OP_PUT_WITH_EXPIRY: u8 = 4;

/// How many range tombstones some writes hold, and the bytes of their keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RangeTombstoneLoad {
    /// Range tombstones.
    pub count: u64,
    /// Bytes of their start and end keys.
    pub bytes: u64,
}

impl RangeTombstoneLoad {
    /// One range tombstone `[start, end)`.
    pub(crate) fn of(start: &[u8], end: &[u8]) -> Self {
        RangeTombstoneLoad {
            count: 1,
            bytes: (start.len() + end.len()) as u64,
        }
    }
}

impl std::ops::Add for RangeTombstoneLoad {
    type Output = RangeTombstoneLoad;

    fn add(self, o: RangeTombstoneLoad) -> RangeTombstoneLoad {
        RangeTombstoneLoad {
            count: self.count + o.count,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// An atomic group of writes. Later operations on the same key win over earlier ones.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// Its range deletes, kept as they are added (the write path asks for them once per batch
    /// and group, and must not decode every batch to learn that most hold none).
    range_load: RangeTombstoneLoad,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.count())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

/// One operation of a batch, borrowed from its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// When the version expires (milliseconds since the Unix epoch), if it does.
        expiry: Option<u64>,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Set `key` to the separated value whose record the encoded
    /// [`StoredHandle`](crate::value::StoredHandle) `handle` names. Only the engine writes these
    /// (a GC that writes the new places of moved records back into the index tree).
    PutHandle {
        /// The key.
        key: &'a [u8],
        /// The encoded stored handle (validated when the batch is decoded).
        handle: &'a [u8],
    },
    /// Remove every key in `[start, end)`.
    DeleteRange {
        /// First key removed.
        start: &'a [u8],
        /// First key after the range (exclusive).
        end: &'a [u8],
    },
}

impl<'a> BatchOp<'a> {
    /// The key the operation writes (a range delete's first key).
    pub fn key(&self) -> &'a [u8] {
        match *self {
            BatchOp::Put { key, .. }
            | BatchOp::Delete { key }
            | BatchOp::PutHandle { key, .. }
            | BatchOp::DeleteRange { start: key, .. } => key,
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_LEN],
            range_load: RangeTombstoneLoad::default(),
        }
    }

    /// Adds a put. Limits are checked when the batch is written.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        put_length_prefixed(&mut self.rep, value.as_ref());
        self.set_count(self.count() + 1);
    }

    /// Adds a put of `key` → `value` that expires at `expiry_ms`, milliseconds since the Unix
    /// epoch: reads at or after that time (by the database's [`Clock`](crate::expiry::Clock))
    /// find the key absent, as if deleted then; snapshots taken before still read it (module
    /// [`crate::expiry`]). An expiry already past writes a version that reads as a deletion.
    ///
    /// Limits are checked when the batch is written: besides those of [`WriteBatch::put`], an
    /// expiry later than [`MAX_EXPIRY_MS`](crate::expiry::MAX_EXPIRY_MS) is
    /// `Error::InvalidArgument`, and nothing of the batch is written.
    pub fn put_with_expiry(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry_ms: u64,
    ) {
        self.rep.push(OP_PUT_WITH_EXPIRY);
        put_length_prefixed(&mut self.rep, key.as_ref());
        put_length_prefixed(&mut self.rep, value.as_ref());
        self.rep.extend_from_slice(&expiry_ms.to_le_bytes());
        self.set_count(self.count() + 1);
    }

    /// Adds a put of a separated value by its handle (engine-internal: the user-facing API has
    /// no way to name a value table).
    pub(crate) fn put_handle(&mut self, key: &[u8], handle: &crate::value::StoredHandle) {
        self.push_op(&BatchOp::PutHandle {
            key,
            handle: &handle.encode(),
        });
    }

    /// Adds `op` as it is (what a batch's iterator yields).
    pub(crate) fn push_op(&mut self, op: &BatchOp<'_>) {
        match *op {
            BatchOp::Put {
                key,
                value,
                expiry: None,
            } => self.put(key, value),
            BatchOp::Put {
                key,
                value,
                expiry: Some(e),
            } => self.put_with_expiry(key, value, e),
            BatchOp::Delete { key } => self.delete(key),
            BatchOp::PutHandle { key, handle } => {
                self.rep.push(ValueKind::ValueHandle as u8);
                put_length_prefixed(&mut self.rep, key);
                put_length_prefixed(&mut self.rep, handle);
                self.set_count(self.count() + 1);
            }
            BatchOp::DeleteRange { start, end } => self.delete_range(start, end),
        }
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        self.set_count(self.count() + 1);
    }

    /// Adds a delete of every key in `[start, end)` (bytewise order; `end` excluded): a range
    /// tombstone, atomic with the batch's other operations. Reads at a sequence number at or
    /// after the batch's no longer see any version of those keys written before it; snapshots
    /// taken before it still do. Later writes to the range are visible as usual.
    ///
    /// Limits are checked when the batch is written: `start` must sort strictly before `end`,
    /// and both are keys of at most [`MAX_KEY_SIZE`](crate::options::MAX_KEY_SIZE) bytes;
    /// otherwise [`Db::write`](crate::Db::write) returns `Error::InvalidArgument` and writes
    /// nothing of the batch.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        let (start, end) = (start.as_ref(), end.as_ref());
        self.rep.push(OP_RANGE_DELETE);
        put_length_prefixed(&mut self.rep, start);
        put_length_prefixed(&mut self.rep, end);
        self.set_count(self.count() + 1);
        self.range_load = self.range_load + RangeTombstoneLoad::of(start, end);
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.range_load = RangeTombstoneLoad::default();
    }

    /// Number of operations.
    pub fn count(&self) -> u32 {
        decode_fixed32(&self.rep[8..12])
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// True when every operation is a deletion (such a batch can only shrink what is live, so
    /// the space budget lets it through while other writes are stopped).
    pub fn only_deletions(&self) -> bool {
        self.iter().all(|op| {
            matches!(
                op,
                Ok(BatchOp::Delete { .. } | BatchOp::DeleteRange { .. })
            )
        })
    }

    /// Range deletes in the batch, and the bytes of their start and end keys: what the
    /// memtable's bounds on range tombstones count (`memtable::MAX_RANGE_TOMBSTONES`,
    /// `MAX_RANGE_TOMBSTONE_BYTES`).
    pub(crate) fn range_tombstones(&self) -> RangeTombstoneLoad {
        self.range_load
    }

    /// Encoded size in bytes (what the WAL stores and what `max_batch_size` limits).
    pub fn encoded_size(&self) -> usize {
        self.rep.len()
    }

    /// Iterates over the operations in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            dec: Decoder::new(&self.rep[BATCH_HEADER_LEN..]),
            remaining: self.count(),
        }
    }

    /// Appends every operation of `other`.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_LEN..]);
        self.set_count(self.count() + other.count());
        self.range_load = self.range_load + other.range_load;
    }

    fn set_count(&mut self, n: u32) {
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
    }

    pub(crate) fn sequence(&self) -> SeqNo {
        decode_fixed64(&self.rep[..8])
    }

    #[cfg(test)]
    pub(crate) fn set_sequence(&mut self, seq: SeqNo) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoded form (WAL payload).
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes and fully validates a batch read from the WAL. `file` and `offset` locate the
    /// record for errors.
    pub(crate) fn decode(bytes: Vec<u8>, file: &str, offset: u64) -> Result<WriteBatch> {
        if bytes.len() < BATCH_HEADER_LEN {
            return Err(Error::corruption(
                file,
                offset,
                "write batch shorter than its header",
            ));
        }
        let mut batch = WriteBatch {
            rep: bytes,
            range_load: RangeTombstoneLoad::default(),
        };
        let mut load = RangeTombstoneLoad::default();
        let mut ops = batch.iter();
        for op in ops.by_ref() {
            let op = op.map_err(|detail| Error::corruption(file, offset, detail))?;
            match op {
                BatchOp::DeleteRange { start, end } => {
                    load = load + RangeTombstoneLoad::of(start, end);
                }
                BatchOp::Put {
                    expiry: Some(e), ..
                } if e > crate::expiry::MAX_EXPIRY_MS => {
                    return Err(Error::corruption(
                        file,
                        offset,
                        "write batch holds an expiry beyond the latest",
                    ));
                }
                _ => {}
            }
        }
        if !ops.dec.is_empty() {
            return Err(Error::corruption(
                file,
                offset,
                "write batch has bytes after its last op",
            ));
        }
        batch.range_load = load;
        Ok(batch)
    }
}

/// Iterator over the operations of a batch; yields an error text for a malformed encoding
/// (only possible for batches decoded from storage).
#[derive(Debug, Clone)]
pub struct BatchIter<'a> {
    dec: Decoder<'a>,
    remaining: u32,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchOp<'a>, &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let op = (|| {
            let kind = self.dec.u8().ok_or("truncated op kind")?;
            let key = self.dec.length_prefixed().ok_or("truncated key")?;
            if kind == OP_RANGE_DELETE {
                let end = self.dec.length_prefixed().ok_or("truncated range end")?;
                return Ok(BatchOp::DeleteRange { start: key, end });
            }
            if kind == OP_PUT_WITH_EXPIRY {
                let value = self.dec.length_prefixed().ok_or("truncated value")?;
                let expiry = self.dec.fixed64().ok_or("truncated expiry")?;
                return Ok(BatchOp::Put {
                    key,
                    value,
                    expiry: Some(expiry),
                });
            }
            match ValueKind::from_byte(kind) {
                Some(ValueKind::Value) => {
                    let value = self.dec.length_prefixed().ok_or("truncated value")?;
                    Ok(BatchOp::Put {
                        key,
                        value,
                        expiry: None,
                    })
                }
                Some(ValueKind::Deletion) => Ok(BatchOp::Delete { key }),
                Some(ValueKind::ValueHandle) => {
                    let handle = self.dec.length_prefixed().ok_or("truncated handle")?;
                    crate::value::StoredHandle::decode(handle, "write batch", 0)
                        .map_err(|_| "malformed value handle")?;
                    Ok(BatchOp::PutHandle { key, handle })
                }
                // Entry kind 3 is not an op kind: a put with an expiry is op kind 4.
                Some(ValueKind::ValueWithExpiry) | None => Err("unknown op kind"),
            }
        })();
        if op.is_err() {
            self.remaining = 0;
        }
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_come_back_in_order() {
        let mut b = WriteBatch::new();
        b.put("a", "1");
        b.delete("b");
        b.put("", "");
        assert_eq!(b.count(), 3);
        let ops: Vec<_> = b.iter().map(|r| r.expect("valid")).collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put {
                    key: b"a",
                    value: b"1",
                    expiry: None
                },
                BatchOp::Delete { key: b"b" },
                BatchOp::Put {
                    key: b"",
                    value: b"",
                    expiry: None
                },
            ]
        );
        let mut c = WriteBatch::new();
        c.put("z", "9");
        c.append(&b);
        assert_eq!(c.count(), 4);
        c.set_sequence(77);
        let d = WriteBatch::decode(c.encoded().to_vec(), "x.log", 0).expect("decode");
        assert_eq!(d.sequence(), 77);
        assert_eq!(d, c);
        c.clear();
        assert!(c.is_empty());
        assert_eq!(c.encoded_size(), BATCH_HEADER_LEN);
    }

    #[test]
    fn handle_puts_round_trip_and_are_validated() {
        let stored = crate::value::StoredHandle {
            location: crate::value::ValueHandle {
                file_number: 12,
                offset: 34,
                len: 56,
            },
            record_seq: Some(7),
            alias: false,
            payload: None,
            expiry: None,
        };
        let mut b = WriteBatch::new();
        b.put_handle(b"k", &stored);
        let encoded = stored.encode();
        assert_eq!(
            b.iter().map(|r| r.expect("valid")).collect::<Vec<_>>(),
            vec![BatchOp::PutHandle {
                key: b"k",
                handle: &encoded
            }]
        );
        assert!(!b.only_deletions());
        let good = b.encoded().to_vec();
        WriteBatch::decode(good.clone(), "x.log", 0).expect("decode");
        // A handle of length 0 (its length prefix, last-but-handle byte) is damage.
        let mut bad = good[..good.len() - encoded.len() - 1].to_vec();
        bad.push(0);
        assert!(WriteBatch::decode(bad, "x.log", 0).is_err());
    }

    #[test]
    fn range_deletes_round_trip_and_count_as_deletions() {
        let mut b = WriteBatch::new();
        b.delete("a");
        b.delete_range("b", "d");
        assert!(b.only_deletions(), "a range delete only shrinks what is live");
        assert_eq!(
            b.iter().map(|r| r.expect("valid")).collect::<Vec<_>>(),
            vec![
                BatchOp::Delete { key: b"a" },
                BatchOp::DeleteRange {
                    start: b"b",
                    end: b"d"
                }
            ]
        );
        assert_eq!(b.iter().nth(1).unwrap().unwrap().key(), b"b");
        let good = b.encoded().to_vec();
        assert_eq!(WriteBatch::decode(good.clone(), "x.log", 0).unwrap(), b);
        // A range delete cut before its end key is damage.
        for cut in good.len() - 3..good.len() {
            assert!(WriteBatch::decode(good[..cut].to_vec(), "x.log", 0).is_err());
        }
        b.put("e", "1");
        assert!(!b.only_deletions());
        // The range deletes a batch holds, as built, decoded, appended and cleared.
        let one = RangeTombstoneLoad { count: 1, bytes: 2 };
        assert_eq!(b.range_tombstones(), one);
        let decoded = WriteBatch::decode(b.encoded().to_vec(), "x.log", 0).unwrap();
        assert_eq!(decoded.range_tombstones(), one);
        let mut both = decoded.clone();
        both.append(&b);
        assert_eq!(both.range_tombstones(), RangeTombstoneLoad { count: 2, bytes: 4 });
        both.clear();
        assert_eq!(both.range_tombstones(), RangeTombstoneLoad::default());
    }

    #[test]
    fn puts_with_an_expiry_round_trip() {
        let mut b = WriteBatch::new();
        b.put_with_expiry("k", "v", 1_234);
        b.put("p", "q");
        let ops: Vec<_> = b.iter().map(|r| r.expect("valid")).collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put {
                    key: b"k",
                    value: b"v",
                    expiry: Some(1_234)
                },
                BatchOp::Put {
                    key: b"p",
                    value: b"q",
                    expiry: None
                },
            ]
        );
        let good = b.encoded().to_vec();
        assert_eq!(WriteBatch::decode(good.clone(), "x.log", 0).unwrap(), b);
        // Every cut inside the first op (its expiry included) is damage.
        let first_op = BATCH_HEADER_LEN + 1 + 2 + 2 + 8;
        for cut in BATCH_HEADER_LEN..first_op {
            let mut bad = good[..cut].to_vec();
            bad[8] = 1;
            assert!(WriteBatch::decode(bad, "x.log", 0).is_err(), "cut {cut}");
        }
        // An expiry past the latest one a write may carry is damage in a WAL.
        let mut late = WriteBatch::new();
        late.put_with_expiry("k", "v", crate::expiry::MAX_EXPIRY_MS + 1);
        let err = WriteBatch::decode(late.encoded().to_vec(), "x.log", 0).unwrap_err();
        assert!(err.is_corruption());
    }

    #[test]
    fn malformed_encodings_are_corruption() {
        let mut b = WriteBatch::new();
        b.put("key", "value");
        let good = b.encoded().to_vec();
        for cut in 0..good.len() {
            assert!(
                WriteBatch::decode(good[..cut].to_vec(), "x.log", 9).is_err(),
                "cut {cut}"
            );
        }
        let mut extra = good.clone();
        extra.push(0);
        assert!(WriteBatch::decode(extra, "x.log", 9).is_err());
        let mut bad_kind = good.clone();
        bad_kind[BATCH_HEADER_LEN] = 7;
        assert!(WriteBatch::decode(bad_kind, "x.log", 9).is_err());
        let mut wrong_count = good;
        wrong_count[8] = 2;
        let err = WriteBatch::decode(wrong_count, "x.log", 9).expect_err("count");
        assert!(err.is_corruption());
    }
}
