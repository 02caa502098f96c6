//! The dense index of a value table: one entry per record, `internal key → (offset, len)`, in
//! prefix-compressed blocks; and the top index, one entry per dense block, `last internal key →
//! block handle`.
//!
//! Index keys are internal keys `user_key | trailer(seq, kind = 1)`, so the dense index sorts
//! exactly like the records and a lookup of `(key, seq)` is an exact internal-key match.

use crate::coding::{Decoder, put_varint64};
use crate::error::{Error, Result};
use crate::expiry::MAX_EXPIRY_MS;
use crate::io::WritableFile;
use crate::key::{MAX_SEQUENCE, ParsedKey, ValueKind, append_internal_key};
use crate::options::MAX_KEY_SIZE;
use crate::table::format::{BLOCK_TRAILER_LEN, MAX_BLOCK_CONTENTS, MAX_VALUE_LEN};
use crate::table::{BlockBuilder, BlockHandle, Compression, block_io::write_block};

use super::record::encoded_record_len;

/// Default size at which a dense index block is cut (4 KiB, uncompressed, restart array
/// included).
pub const DEFAULT_INDEX_BLOCK_SIZE: usize = 4096;

/// Entries between restart points in dense index blocks.
pub const DENSE_RESTART_INTERVAL: usize = 16;

/// Entries between restart points in the top index block (every key is a restart key, so a seek
/// binary-searches straight to its dense block).
pub const TOP_RESTART_INTERVAL: usize = 1;

/// Longest encoded dense-index value: three 10-byte varints (the third, an expiry, only in
/// format 2).
const MAX_INDEX_VALUE_LEN: usize = 30;

/// Largest block-builder growth caused by one entry with a `key_len`-byte key and a
/// `value_len`-byte value: three 5-byte varints, the key, the value and a restart slot.
pub(crate) const fn max_entry_growth(key_len: usize, value_len: usize) -> usize {
    15 + key_len + value_len + 4
}

/// One dense-index entry: where the record `(user_key, seq)` lies in the record region.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexEntry {
    /// The record's user key.
    pub user_key: Vec<u8>,
    /// The record's sequence number.
    pub seq: u64,
    /// Offset of the record's first byte in the file.
    pub offset: u64,
    /// Length of the whole record in bytes.
    pub len: u64,
    /// When the record's version expires, if it does (format 2).
    pub expiry: Option<u64>,
}

/// A decoded, bounds-checked dense-index entry borrowing its user key from the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DenseEntry<'a> {
    pub(crate) user_key: &'a [u8],
    pub(crate) seq: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) expiry: Option<u64>,
}

impl DenseEntry<'_> {
    pub(crate) fn to_owned(self) -> IndexEntry {
        IndexEntry {
            user_key: self.user_key.to_vec(),
            seq: self.seq,
            offset: self.offset,
            len: self.len,
            expiry: self.expiry,
        }
    }
}

/// Decodes a dense-index entry and checks it: the key is an internal key of kind 1 with a user
/// key of at most [`MAX_KEY_SIZE`] bytes, the value is exactly two varints (or, where
/// `expiries` — a format-2 table —, two or three, the third an expiry of at most
/// [`MAX_EXPIRY_MS`]), `len` is a possible record length for that key, and the record ends
/// within `data_end`. The error describes what is wrong; the caller names the file and block.
pub(crate) fn decode_dense_entry<'a>(
    ikey: &'a [u8],
    value: &[u8],
    data_end: u64,
    expiries: bool,
) -> std::result::Result<DenseEntry<'a>, String> {
    let parsed = ParsedKey::parse(ikey).ok_or_else(|| {
        format!(
            "dense index key of {} bytes is not an internal key",
            ikey.len()
        )
    })?;
    if parsed.kind != ValueKind::Value {
        return Err("dense index key has kind 0 (value tables store only kind 1)".into());
    }
    let user_key = parsed.user_key;
    if user_key.len() > MAX_KEY_SIZE {
        return Err(format!(
            "dense index key of {} bytes exceeds the limit of {MAX_KEY_SIZE}",
            user_key.len()
        ));
    }
    let mut d = Decoder::new(value);
    let (Some(offset), Some(len)) = (d.varint64(), d.varint64()) else {
        return Err("dense index value is not two varints (offset, len)".into());
    };
    let expiry = if expiries && !d.is_empty() {
        match d.varint64() {
            Some(e) if e <= MAX_EXPIRY_MS => Some(e),
            _ => return Err("dense index value has a malformed expiry".into()),
        }
    } else {
        None
    };
    if !d.is_empty() {
        return Err(if expiries {
            "dense index value is not two or three varints (offset, len, expiry)".into()
        } else {
            "dense index value is not exactly two varints (offset, len)".into()
        });
    }
    let min = encoded_record_len(user_key.len(), 0);
    let max = encoded_record_len(user_key.len(), MAX_VALUE_LEN);
    if !(min..=max).contains(&len) {
        return Err(format!(
            "dense index entry gives a {len}-byte record for a {}-byte key (possible: {min}..={max})",
            user_key.len()
        ));
    }
    match offset.checked_add(len) {
        Some(end) if end <= data_end => Ok(DenseEntry {
            user_key,
            seq: parsed.seq,
            offset,
            len,
            expiry,
        }),
        _ => Err(format!(
            "dense index entry (offset {offset}, len {len}) extends past the record region ending \
             at {data_end}"
        )),
    }
}

/// Decodes a top-index value: exactly one varint block handle, lying within the index region
/// `[data_end, blocks_end)` and no larger than [`MAX_BLOCK_CONTENTS`].
pub(crate) fn decode_top_value(
    value: &[u8],
    data_end: u64,
    blocks_end: u64,
) -> std::result::Result<BlockHandle, String> {
    let h = BlockHandle::decode(value)
        .ok_or_else(|| "top index value is not a block handle".to_owned())?;
    let within = h.size <= MAX_BLOCK_CONTENTS as u64
        && h.offset >= data_end
        && h.end().is_some_and(|end| end <= blocks_end);
    if !within {
        return Err(format!(
            "top index handle (offset {}, size {}) is outside the index region {data_end}..{blocks_end}",
            h.offset, h.size
        ));
    }
    Ok(h)
}

/// An in-memory [`WritableFile`] collecting the dense index until the records are complete.
#[derive(Debug, Default)]
struct VecSink(Vec<u8>);

impl WritableFile for VecSink {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// Builds the dense and top index while records are being written.
///
/// The dense index follows the records in the file, so its finished (compressed) blocks are
/// kept in memory until [`DenseIndexBuilder::finish`]; their handles are relative to the start
/// of the index region until then.
#[derive(Debug)]
pub(crate) struct DenseIndexBuilder {
    block: BlockBuilder,
    block_size: usize,
    compression: Compression,
    /// Finished dense blocks, trailers included.
    blocks: VecSink,
    /// Length of `blocks`: the relative offset of the next block.
    blocks_len: u64,
    /// Per finished dense block: its last internal key and relative handle.
    top: Vec<(Vec<u8>, BlockHandle)>,
    /// Upper bound on the top index block's size if it were built now.
    top_size_bound: usize,
    key_buf: Vec<u8>,
    value_buf: Vec<u8>,
    scratch: Vec<u8>,
}

impl DenseIndexBuilder {
    pub(crate) fn new(block_size: usize, compression: Compression) -> Self {
        DenseIndexBuilder {
            block: BlockBuilder::new(DENSE_RESTART_INTERVAL),
            block_size,
            compression,
            blocks: VecSink::default(),
            blocks_len: 0,
            top: Vec::new(),
            top_size_bound: 8,
            key_buf: Vec::new(),
            value_buf: Vec::with_capacity(MAX_INDEX_VALUE_LEN),
            scratch: Vec::new(),
        }
    }

    /// Fails with `Error::InvalidArgument`, before anything is written, when adding a record
    /// with a `key_len`-byte key could make the top index exceed the block limit.
    pub(crate) fn check_room(&self, key_len: usize) -> Result<()> {
        let growth = max_entry_growth(key_len + 8, BlockHandle::MAX_ENCODED_LEN);
        if self.top_size_bound + growth > MAX_BLOCK_CONTENTS {
            return Err(Error::invalid(format!(
                "value table too large: its top index would exceed the {MAX_BLOCK_CONTENTS}-byte \
                 block limit (finish the table and start another)"
            )));
        }
        Ok(())
    }

    /// Indexes the record `(user_key, seq)` at `(offset, len)`, with its `expiry` (a format-2
    /// table's). The caller has checked the order, the limits and
    /// [`DenseIndexBuilder::check_room`].
    pub(crate) fn add(
        &mut self,
        user_key: &[u8],
        seq: u64,
        offset: u64,
        len: u64,
        expiry: Option<u64>,
    ) -> Result<()> {
        debug_assert!(seq <= MAX_SEQUENCE && user_key.len() <= MAX_KEY_SIZE);
        self.key_buf.clear();
        append_internal_key(&mut self.key_buf, user_key, seq, ValueKind::Value as u8);
        self.value_buf.clear();
        put_varint64(&mut self.value_buf, offset);
        put_varint64(&mut self.value_buf, len);
        if let Some(e) = expiry {
            put_varint64(&mut self.value_buf, e);
        }
        self.block.add(&self.key_buf, &self.value_buf);
        if self.block.size_estimate() >= self.block_size {
            self.cut()?;
        }
        Ok(())
    }

    /// Bytes of finished dense blocks plus the pending block's uncompressed size.
    pub(crate) fn estimated_size(&self) -> u64 {
        let pending = if self.block.is_empty() {
            0
        } else {
            self.block.size_estimate()
        };
        self.blocks_len + pending as u64
    }

    /// Finishes the pending dense block (if any).
    fn cut(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let handle = write_block(
            &mut self.blocks,
            &mut self.blocks_len,
            self.block.finish(),
            self.compression,
            &mut self.scratch,
        )?;
        let last = self.block.last_key().to_vec();
        self.top_size_bound += max_entry_growth(last.len(), BlockHandle::MAX_ENCODED_LEN);
        self.top.push((last, handle));
        self.block.reset();
        Ok(())
    }

    /// Writes the dense blocks at `*offset` (the end of the record region) and then the top
    /// index block, advancing `*offset`. Returns the top index handle and the bytes of both
    /// (trailers included).
    pub(crate) fn finish(
        mut self,
        file: &mut dyn WritableFile,
        offset: &mut u64,
    ) -> Result<(BlockHandle, u64)> {
        self.cut()?;
        let base = *offset;
        file.append(&self.blocks.0)?;
        *offset += self.blocks_len;
        let mut top = BlockBuilder::new(TOP_RESTART_INTERVAL);
        for (key, rel) in &self.top {
            self.value_buf.clear();
            BlockHandle {
                offset: base + rel.offset,
                size: rel.size,
            }
            .encode_to(&mut self.value_buf);
            top.add(key, &self.value_buf);
        }
        let top_handle = write_block(
            file,
            offset,
            top.finish(),
            self.compression,
            &mut self.scratch,
        )?;
        let index_bytes = self.blocks_len + top_handle.size + BLOCK_TRAILER_LEN as u64;
        Ok((top_handle, index_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    fn value(offset: u64, len: u64) -> Vec<u8> {
        let mut v = Vec::new();
        put_varint64(&mut v, offset);
        put_varint64(&mut v, len);
        v
    }

    #[test]
    fn dense_entries_decode_and_are_bounded() {
        let ikey = make_internal_key(b"abc", 42, ValueKind::Value);
        let min = encoded_record_len(3, 0);
        let e = decode_dense_entry(&ikey, &value(100, min + 10), 1000, false).unwrap();
        assert_eq!(
            (e.user_key, e.seq, e.offset, e.len),
            (&b"abc"[..], 42, 100, min + 10)
        );
        // The record must end within the record region.
        assert!(decode_dense_entry(&ikey, &value(1000 - min, min), 1000, false).is_ok());
        assert!(decode_dense_entry(&ikey, &value(1001 - min, min), 1000, false).is_err());
        assert!(decode_dense_entry(&ikey, &value(u64::MAX, min), u64::MAX, false).is_err());
        // Too short for its key, or longer than any record.
        assert!(decode_dense_entry(&ikey, &value(0, min - 1), 1000, false).is_err());
        let max = encoded_record_len(3, MAX_VALUE_LEN);
        assert!(decode_dense_entry(&ikey, &value(0, max), u64::MAX, false).is_ok());
        assert!(decode_dense_entry(&ikey, &value(0, max + 1), u64::MAX, false).is_err());
        // Malformed values and keys.
        let mut trailing = value(0, min);
        trailing.push(0);
        assert!(decode_dense_entry(&ikey, &trailing, 1000, false).is_err());
        assert!(decode_dense_entry(&ikey, &[0x80], 1000, false).is_err());
        let tombstone = make_internal_key(b"abc", 42, ValueKind::Deletion);
        assert!(decode_dense_entry(&tombstone, &value(0, min), 1000, false).is_err());
        let mut bad_kind = ikey.clone();
        let n = bad_kind.len();
        bad_kind[n - 8] = 7;
        assert!(decode_dense_entry(&bad_kind, &value(0, min), 1000, false).is_err());
        assert!(decode_dense_entry(b"short", &value(0, min), 1000, false).is_err());
        let long = make_internal_key(&vec![0; MAX_KEY_SIZE + 1], 1, ValueKind::Value);
        assert!(decode_dense_entry(&long, &value(0, 100), u64::MAX, false).is_err());
    }

    #[test]
    fn top_values_must_lie_in_the_index_region() {
        let enc = |offset, size| {
            let mut v = Vec::new();
            BlockHandle { offset, size }.encode_to(&mut v);
            v
        };
        assert!(decode_top_value(&enc(100, 50), 100, 155).is_ok());
        assert!(decode_top_value(&enc(99, 50), 100, 155).is_err());
        assert!(decode_top_value(&enc(100, 51), 100, 155).is_err());
        assert!(decode_top_value(&enc(u64::MAX - 1, 1), 0, u64::MAX).is_err());
        let mut trailing = enc(100, 50);
        trailing.push(1);
        assert!(decode_top_value(&trailing, 100, 155).is_err());
    }

    #[test]
    fn blocks_are_cut_at_the_block_size() {
        let mut b = DenseIndexBuilder::new(256, Compression::None);
        for i in 0..100u64 {
            b.add(format!("key{i:04}").as_bytes(), 7, i * 30, 30, None)
                .unwrap();
        }
        assert!(b.top.len() > 5, "{}", b.top.len());
        let mut file = VecSink::default();
        file.0.resize(3000, 0);
        let mut offset = 3000;
        let (top, index_bytes) = b.finish(&mut file, &mut offset).unwrap();
        assert_eq!(offset, file.len());
        assert_eq!(top.end(), Some(offset));
        assert_eq!(index_bytes, offset - 3000);
    }

    #[test]
    fn the_top_index_size_is_bounded() {
        let mut b = DenseIndexBuilder::new(1, Compression::None);
        b.top_size_bound = MAX_BLOCK_CONTENTS - 100;
        assert!(b.check_room(10).is_ok());
        assert!(matches!(b.check_room(100), Err(Error::InvalidArgument(_))));
    }
}
