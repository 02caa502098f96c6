//! An open value table: footer, properties and top index pinned in memory; dense index blocks
//! read on demand through the block cache; records read with one positional read each.

use std::sync::Arc;

use crate::cache::{BlockCache, CachePriority};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::io::accounting::CountedReader;
use crate::iter::InternalIterator;
use crate::key::{MAX_SEQUENCE, ValueKind, append_internal_key, compare_internal, user_key};
use crate::options::MAX_KEY_SIZE;
use crate::table::block_io::{check_file_size, read_block};
use crate::table::{Block, BlockHandle, BlockIter};

use super::format::{FOOTER_LEN, FORMAT_VERSION_EXPIRY, FORMAT_VERSION_WRITE_ORDER, Footer};
use crate::expiry::MAX_EXPIRY_MS;
use super::index::{DenseEntry, decode_dense_entry, decode_top_value};
use super::iter::ValueIndexIter;
use super::properties::ValueTableProperties;
use super::record::{MAX_RECORD_LEN, MIN_RECORD_LEN, OwnedRecord, record_header_len};
use crate::table::format::MAX_VALUE_LEN;

/// What an open value table keeps in memory besides its file handle, once its metadata was
/// read and verified: enough to open the table again without reading it
/// ([`ValueTable::reopen`]).
#[derive(Debug, Clone)]
pub struct ValueTableMeta {
    file_name: Arc<str>,
    file_number: u64,
    /// End of the record region (`properties.data_end`).
    data_end: u64,
    /// Where the footer starts; every block must end at or before it.
    blocks_end: u64,
    top_index: Arc<Block>,
    properties: ValueTableProperties,
}

impl ValueTableMeta {
    /// The file's size: where the footer ends.
    pub(crate) fn file_size(&self) -> u64 {
        // Saturating: an open segment's view has no footer (its bounds are u64::MAX).
        self.blocks_end.saturating_add(FOOTER_LEN as u64)
    }

    /// Bytes it holds, about: the top index, the keys of the properties and a fixed share for
    /// the rest.
    pub(crate) fn memory_bytes(&self) -> u64 {
        (self.top_index.charge()
            + self.properties.smallest_key.len()
            + self.properties.largest_key.len()
            + self.file_name.len()
            + std::mem::size_of::<Self>()) as u64
    }
}

/// An open, immutable value table, shared as `Arc<ValueTable>` (it is `Send + Sync`; every read
/// is positional).
#[derive(Debug)]
pub struct ValueTable {
    file: CountedReader,
    cache: Option<Arc<BlockCache>>,
    /// Everything read and verified at open, kept for the table's lifetime.
    meta: ValueTableMeta,
}

impl ValueTable {
    /// What this table keeps in memory besides its file, to open it again with
    /// [`ValueTable::reopen`].
    pub(crate) fn meta(&self) -> ValueTableMeta {
        self.meta.clone()
    }

    /// Opens the value table in `file` again from what an earlier [`ValueTable::open`] of the
    /// same file read and verified (`meta`), reading nothing: value tables are immutable and
    /// their numbers never reused, so only the file's size is checked again.
    ///
    /// `Error::Corruption` when the file is no longer `meta`'s size; a failed `stat` is
    /// `Error::Io`.
    pub(crate) fn reopen(
        file: CountedReader,
        meta: &ValueTableMeta,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<ValueTable> {
        check_file_size(&file, &meta.file_name, meta.file_size())?;
        Ok(ValueTable {
            file,
            cache,
            meta: meta.clone(),
        })
    }

    /// Opens the value table in `file`, whose size the caller recorded as `file_size` (from the
    /// manifest, or from the builder). Reads and verifies the footer, the properties block and
    /// the top index block (counting the reads under `class`) and keeps them for the table's
    /// lifetime. `file_name` names the file in errors; `file_number` keys the block cache, which
    /// holds dense index blocks when given.
    ///
    /// `Error::Corruption` when the file's actual size differs from `file_size` or is below 64
    /// bytes, the footer is bad (magic, unknown version, checksum, reserved bytes), a handle
    /// lies outside the file, a metadata block fails its checksum or does not parse, the
    /// properties contradict each other or the layout, or a top index entry is malformed, out
    /// of order or points outside the index region. Failed reads are `Error::Io`.
    pub fn open(
        file: CountedReader,
        file_name: String,
        file_number: u64,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
        class: IoClass,
    ) -> Result<ValueTable> {
        let name: Arc<str> = file_name.into();
        if file_size < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                &*name,
                0,
                format!("file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        }
        check_file_size(&file, &name, file_size)?;
        let blocks_end = file_size - FOOTER_LEN as u64;
        let footer_bytes = file.read_vec(blocks_end, FOOTER_LEN, class)?;
        let footer = Footer::decode(&footer_bytes, &name, blocks_end)?;

        let read = |h: BlockHandle, what: &str| -> Result<Arc<Block>> {
            let contents = read_block(&file, &name, h, blocks_end, class, what)?;
            Ok(Arc::new(Block::new(contents, name.clone(), h.offset)?))
        };
        let properties = ValueTableProperties::decode(read(footer.properties, "properties")?)?;
        check_properties(&properties, &footer, blocks_end, &name)?;
        let top_index = read(footer.top_index, "top index")?;
        let table = ValueTable {
            file,
            cache,
            meta: ValueTableMeta {
                data_end: properties.data_end,
                file_name: name,
                file_number,
                blocks_end,
                top_index,
                properties,
            },
        };
        table.check_top_index()?;
        Ok(table)
    }

    /// A view of an *open* value segment (`value/segment.rs`): a file still being appended to,
    /// without an index or a footer, whose records are read at the handles the write path
    /// gave out. Only [`ValueTable::read_record`] is meaningful: the view has no index
    /// ([`ValueTable::find`] finds nothing, [`ValueTable::index_iter`] yields nothing) and
    /// its record region is unbounded (a handle past the file's end fails its read). Reads no
    /// byte; the file may grow under it.
    pub(crate) fn open_segment(file: CountedReader, file_name: String, file_number: u64) -> Self {
        let empty = crate::table::BlockBuilder::new(1).finish().to_vec();
        let name: Arc<str> = file_name.into();
        let top_index =
            Arc::new(Block::new(empty, name.clone(), 0).expect("an empty block is well formed"));
        ValueTable {
            file,
            cache: None,
            meta: ValueTableMeta {
                file_name: name,
                file_number,
                data_end: u64::MAX,
                blocks_end: u64::MAX,
                top_index,
                properties: ValueTableProperties {
                    format_version: FORMAT_VERSION_WRITE_ORDER,
                    ..ValueTableProperties::default()
                },
            },
        }
    }

    /// Reads the record at `(offset, len)` (a value handle's location) with one read of exactly
    /// `len` bytes counted under `class`, and verifies it.
    ///
    /// `Error::Corruption` at `offset` when the location lies outside the record region or
    /// `len` is not a possible record length (checked before any read), or when the bytes are
    /// not exactly one intact record (wrong `len`, an offset not at a record start, a failed
    /// CRC; see [`decode_record`](super::decode_record)). Failed reads are `Error::Io`.
    pub fn read_record(&self, offset: u64, len: u64, class: IoClass) -> Result<OwnedRecord> {
        if !(MIN_RECORD_LEN..=MAX_RECORD_LEN).contains(&len) {
            return Err(Error::corruption(
                &*self.meta.file_name,
                offset,
                format!(
                    "value handle length {len} is not a possible record length \
                     ({MIN_RECORD_LEN}..={MAX_RECORD_LEN})"
                ),
            ));
        }
        self.check_in_records(offset, len, "value handle")?;
        // Bounded by MAX_RECORD_LEN (and by the verified file size) above.
        let buf = self.file.read_vec(offset, len as usize, class)?;
        OwnedRecord::from_buffer(buf, &self.meta.file_name, offset)
    }

    /// Reads the raw bytes `offset..offset + len` of the record region with one read counted
    /// under `class`: a run of consecutive records for a coalesced GC read or a scan's
    /// read-ahead, to be parsed with [`RecordIter`](super::RecordIter) (with `offset` as its base
    /// offset) or sliced and checked with [`decode_record`](super::decode_record).
    ///
    /// `Error::Corruption` when the range extends past the record region (`data_end`); the
    /// range is otherwise not checked to start or end at record boundaries. Failed reads are
    /// `Error::Io`.
    pub fn read_range(&self, offset: u64, len: u64, class: IoClass) -> Result<Vec<u8>> {
        self.check_in_records(offset, len, "record range")?;
        // Bounded by data_end, which lies inside the verified file.
        self.file.read_vec(offset, len as usize, class)
    }

    /// Finds the record `(user_key, seq)` through the dense index and returns its location
    /// `(offset, len)`, or `None` when the table holds no record with exactly that key and
    /// sequence number. Reads no record: the top index is in memory, and the one dense index
    /// block needed comes from the block cache or is read (counted under `class`) and, when
    /// `fill_cache`, cached under `(file_number, block offset)`.
    ///
    /// `Error::InvalidArgument` when `user_key` exceeds 64 KiB or `seq` exceeds
    /// [`MAX_SEQUENCE`]; `Error::Corruption` for a damaged or inconsistent index block or entry.
    pub fn find(
        &self,
        user_key: &[u8],
        seq: u64,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Option<(u64, u64)>> {
        if user_key.len() > MAX_KEY_SIZE || seq > MAX_SEQUENCE {
            return Err(Error::invalid(format!(
                "value-table lookup of a {}-byte key at sequence {seq} is outside the key \
                 ({MAX_KEY_SIZE} bytes) or sequence ({MAX_SEQUENCE}) limits",
                user_key.len()
            )));
        }
        let mut target = Vec::with_capacity(user_key.len() + 8);
        append_internal_key(&mut target, user_key, seq, ValueKind::Value as u8);
        let mut top = BlockIter::internal(self.meta.top_index.clone());
        top.seek(&target)?;
        if !top.valid() {
            return Ok(None);
        }
        let handle = self.decode_top_value(top.value())?;
        let mut dense = BlockIter::internal(self.dense_block(handle, class, fill_cache)?);
        dense.seek(&target)?;
        if !dense.valid() {
            // The top index key is the block's last key and it is >= the target, so the block
            // must hold an entry at or after the target.
            return Err(Error::corruption(
                &*self.meta.file_name,
                handle.offset,
                "dense index block ends before its top index key",
            ));
        }
        if dense.key() != target.as_slice() {
            return Ok(None);
        }
        let entry = self.decode_dense_entry(dense.key(), dense.value(), handle.offset)?;
        Ok(Some((entry.offset, entry.len)))
    }

    /// An iterator over the whole dense index in order, yielding each record's
    /// [`IndexEntry`](super::IndexEntry) `(user_key, seq, offset, len)` without reading any
    /// record: the input of GC's lazy read. Dense blocks are taken from the block cache when
    /// present, otherwise read (counted under `class`) without filling the cache, so a
    /// whole-table walk does not evict hot blocks. See [`ValueIndexIter`] for the checks it
    /// makes.
    pub fn index_iter(self: &Arc<Self>, class: IoClass) -> ValueIndexIter {
        ValueIndexIter::new(
            self.clone(),
            BlockIter::internal(self.meta.top_index.clone()),
            class,
        )
    }

    /// The properties recorded when the table was built.
    pub fn properties(&self) -> &ValueTableProperties {
        &self.meta.properties
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.meta.file_number
    }

    /// The name used in errors.
    pub fn file_name(&self) -> &str {
        &self.meta.file_name
    }

    /// Whether the table is a value segment: its records lie in the order they were written,
    /// so offsets along the (key-ordered) dense index do not increase (docs/format.md, format
    /// version 3).
    pub fn in_write_order(&self) -> bool {
        self.meta.properties.format_version == FORMAT_VERSION_WRITE_ORDER
    }

    /// End of the record region: every record lies in `0..data_end`. For a view of an open
    /// segment ([`ValueTable::open_segment`]), the file's size now (0 if it cannot be read):
    /// what a read-ahead may read.
    pub fn data_end(&self) -> u64 {
        if self.meta.data_end == u64::MAX {
            return self.file.size().unwrap_or(0);
        }
        self.meta.data_end
    }

    /// Bytes of metadata pinned in memory (the top index block, with its restart heads).
    pub fn pinned_bytes(&self) -> usize {
        self.meta.top_index.charge()
    }

    /// Checks that `offset..offset + len` lies within the record region.
    fn check_in_records(&self, offset: u64, len: u64, what: &str) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.meta.data_end => Ok(()),
            _ => Err(Error::corruption(
                &*self.meta.file_name,
                offset,
                format!(
                    "{what} (offset {offset}, len {len}) extends past the record region ending at \
                     {}",
                    self.meta.data_end
                ),
            )),
        }
    }

    /// Decodes a top index value (a dense block handle within the index region).
    pub(crate) fn decode_top_value(&self, value: &[u8]) -> Result<BlockHandle> {
        decode_top_value(value, self.meta.data_end, self.meta.blocks_end)
            .map_err(|d| Error::corruption(&*self.meta.file_name, self.meta.top_index.offset(), d))
    }

    /// Decodes and bounds-checks an entry of the dense block at `block_offset`.
    pub(crate) fn decode_dense_entry<'a>(
        &self,
        ikey: &'a [u8],
        value: &[u8],
        block_offset: u64,
    ) -> Result<DenseEntry<'a>> {
        let expiries = self.meta.properties.format_version >= FORMAT_VERSION_EXPIRY;
        decode_dense_entry(ikey, value, self.meta.data_end, expiries)
            .map_err(|d| Error::corruption(&*self.meta.file_name, block_offset, d))
    }

    /// The dense index block at `handle`: from the cache when present, else read, verified and
    /// (when `fill_cache`) cached.
    pub(crate) fn dense_block(
        &self,
        handle: BlockHandle,
        class: IoClass,
        fill_cache: bool,
    ) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.meta.file_number, handle.offset, CachePriority::Low)
        {
            return Ok(block);
        }
        let contents = read_block(
            &self.file,
            &self.meta.file_name,
            handle,
            self.meta.blocks_end,
            class,
            "dense index",
        )?;
        let block = Arc::new(Block::new(contents, self.meta.file_name.clone(), handle.offset)?);
        if fill_cache && let Some(cache) = &self.cache {
            cache.insert(
                self.meta.file_number,
                handle.offset,
                block.clone(),
                CachePriority::Low,
            );
        }
        Ok(block)
    }

    /// Walks the pinned top index once: every value is a handle inside the index region, keys
    /// strictly increase, and the number of dense blocks fits the number of records; the last
    /// key's user key is the table's largest key.
    fn check_top_index(&self) -> Result<()> {
        let corrupt =
            |detail: String| Error::corruption(&*self.meta.file_name, self.meta.top_index.offset(), detail);
        let mut it = BlockIter::internal(self.meta.top_index.clone());
        it.seek_to_first()?;
        let mut prev: Option<Vec<u8>> = None;
        let mut blocks = 0u64;
        while it.valid() {
            self.decode_top_value(it.value())?;
            if let Some(p) = &prev
                && compare_internal(p, it.key()).is_ge()
            {
                return Err(corrupt(format!(
                    "top index keys out of order at entry {blocks}"
                )));
            }
            prev = Some(it.key().to_vec());
            blocks += 1;
            it.next()?;
        }
        let n = self.meta.properties.num_records;
        if blocks > n || (n > 0) != (blocks > 0) {
            return Err(corrupt(format!(
                "top index has {blocks} dense blocks for {n} records"
            )));
        }
        if let Some(last) = prev
            && user_key(&last) != self.meta.properties.largest_key.as_slice()
        {
            return Err(corrupt(
                "the last top index key is not the table's largest key".into(),
            ));
        }
        Ok(())
    }
}

/// Checks the properties against each other, the footer and the file layout.
fn check_properties(
    p: &ValueTableProperties,
    footer: &Footer,
    blocks_end: u64,
    file: &str,
) -> Result<()> {
    let fail = |detail: String| Err(Error::corruption(file, footer.properties.offset, detail));
    if p.format_version != footer.format_version {
        return fail(format!(
            "properties say format version {}, footer says {}",
            p.format_version, footer.format_version
        ));
    }
    if p.record_bytes != p.data_end {
        return fail(format!(
            "record_bytes {} differs from data_end {}",
            p.record_bytes, p.data_end
        ));
    }
    let first_block = footer.top_index.offset.min(footer.properties.offset);
    if p.data_end > first_block {
        return fail(format!(
            "record region ending at {} overlaps a metadata block at {first_block}",
            p.data_end
        ));
    }
    if p.index_bytes > blocks_end - p.data_end {
        return fail(format!(
            "index_bytes {} exceeds the {} bytes between the records and the footer",
            p.index_bytes,
            blocks_end - p.data_end
        ));
    }
    let n = p.num_records;
    if p.expiring_records > n || p.max_expiry > MAX_EXPIRY_MS {
        return fail(format!(
            "{} expiring records of {n}, the latest at {} ms, are impossible",
            p.expiring_records, p.max_expiry
        ));
    }
    if p.expiring_records == 0 && p.max_expiry != 0 {
        return fail("a latest expiry with no expiring record".into());
    }
    if p.format_version == FORMAT_VERSION_EXPIRY && p.expiring_records == 0 {
        return fail(format!(
            "format {} without an expiring record (format 1 holds such a table)",
            p.format_version
        ));
    }
    if n == 0 {
        if p.data_end != 0 || p.key_bytes != 0 || p.value_bytes != 0 {
            return fail("an empty table has record bytes".into());
        }
        return Ok(());
    }
    // Every record is `header + key + value` with a header of 14..=20 bytes.
    let payload = p.key_bytes.checked_add(p.value_bytes);
    let min_header = MIN_RECORD_LEN;
    let max_header = record_header_len(MAX_KEY_SIZE, MAX_VALUE_LEN) as u64;
    let bounds = payload.and_then(|b| {
        Some((
            b.checked_add(n.checked_mul(min_header)?)?,
            b.checked_add(n.checked_mul(max_header)?)?,
        ))
    });
    match bounds {
        Some((lo, hi)) if (lo..=hi).contains(&p.record_bytes) => {}
        _ => {
            return fail(format!(
                "{n} records with {} key bytes and {} value bytes cannot take {} bytes",
                p.key_bytes, p.value_bytes, p.record_bytes
            ));
        }
    }
    if p.smallest_seq > p.largest_seq || p.largest_seq > MAX_SEQUENCE {
        return fail(format!(
            "sequence range {}..={} is invalid",
            p.smallest_seq, p.largest_seq
        ));
    }
    if p.smallest_key.len() > MAX_KEY_SIZE
        || p.largest_key.len() > MAX_KEY_SIZE
        || p.smallest_key > p.largest_key
    {
        return fail("smallest_key and largest_key are not a valid key range".into());
    }
    Ok(())
}
