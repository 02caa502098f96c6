//! An open key table: footer, index(es), filter and properties pinned in memory; data and handle
//! blocks read on demand, through the block cache when there is one (data blocks at low
//! priority, handle blocks at high priority).

use std::sync::Arc;

use crate::cache::{BlockCache, CachePriority};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::io::accounting::CountedReader;
use crate::iter::InternalIterator;
use crate::key::{ParsedKey, TRAILER_LEN, ValueKind, compare_internal, user_key};
use crate::range_del::{FragmentedTombstones, RangeTombstone};

use super::block::{Block, BlockIter};
use super::block_io::{check_file_size, decode_block, read_block};
use super::bloom::BloomFilter;
use super::format::{
    BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer, KeyTableLayout, MAX_INTERNAL_KEY_LEN,
    TablePart,
};
use super::iter::TableIter;
use super::properties::TableProperties;

/// Data blocks are cached at low priority, handle blocks at high priority so GC lookups keep
/// finding them.
fn cache_priority(part: TablePart) -> CachePriority {
    match part {
        TablePart::Data => CachePriority::Low,
        TablePart::Handles => CachePriority::High,
    }
}

/// The bytes an iterator read ahead of the block it needed (see [`ReadCtx::readahead`]).
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// File offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
    /// The last window's size asked for (with `readahead_ramp`).
    size: u64,
}

impl Readahead {
    /// Whether the window holds `len` bytes at `offset`.
    fn holds(&self, offset: u64, len: u64) -> bool {
        offset >= self.start && offset + len <= self.start + self.buf.len() as u64
    }
}

/// Per-read options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCtx {
    /// The class the read's bytes are counted under.
    pub class: IoClass,
    /// Whether data and handle blocks read from disk are inserted into the block cache (scans
    /// and compaction inputs usually should not evict hot blocks).
    pub fill_cache: bool,
    /// Bytes an iterator reads at once when a block it needs is not cached: the block and
    /// what follows it, so a sequential pass (a compaction's inputs) makes one read per window
    /// instead of one per block, which with direct I/O is one device round trip per block.
    /// 0 reads block by block. Point lookups ignore it.
    pub readahead: u64,
    /// Whether the window starts at the block alone and doubles, from [`FIRST_RAMP_WINDOW`] up
    /// to `readahead`, while the iterator reads on (a scan, which may stop after any entry),
    /// instead of holding `readahead` bytes from the first read (a compaction, which reads its
    /// tables whole).
    pub readahead_ramp: bool,
}

/// The first window of a ramping read-ahead (see [`ReadCtx::readahead_ramp`]), after a read of
/// one block is followed by a read of the next.
pub const FIRST_RAMP_WINDOW: u64 = 16 << 10;

impl ReadCtx {
    /// A context counting under `class` and filling the cache.
    pub fn new(class: IoClass) -> Self {
        ReadCtx {
            class,
            fill_cache: true,
            readahead: 0,
            readahead_ramp: false,
        }
    }
}

impl Default for ReadCtx {
    /// [`IoClass::UserRead`], filling the cache.
    fn default() -> Self {
        ReadCtx::new(IoClass::UserRead)
    }
}

/// What a key table holds for a key, as [`Table::get_key`] reports it: enough for a validity
/// check, without the inline value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyEntry {
    /// A value handle (kind 2); the encoded [`StoredHandle`](crate::value::StoredHandle).
    Handle(Vec<u8>),
    /// An inline value (kind 1, or 3 with an expiry); the value itself is not returned, its
    /// expiry is.
    Inline {
        /// When the version expires, if it does ([`crate::expiry`]).
        expiry: Option<u64>,
    },
    /// A tombstone (kind 0).
    Deletion,
}

/// What an open key table keeps in memory besides its file handle, once its metadata was read
/// and verified: enough to open the table again without reading it ([`Table::reopen`]). The
/// blocks are shared with the open table, not copied.
#[derive(Debug, Clone)]
pub struct TableMeta {
    file_name: Arc<str>,
    file_number: u64,
    /// Where the footer starts; every block must end at or before it.
    data_end: u64,
    layout: KeyTableLayout,
    /// The (data) index: one entry per data block.
    index: Arc<Block>,
    /// The handle index (one entry per handle block); `Some` exactly for the index-decoupled
    /// layout.
    handle_index: Option<Arc<Block>>,
    filter: Option<Arc<BloomFilter>>,
    properties: TableProperties,
    /// The range tombstones of the range-deletion block, fragmented at open.
    range_tombstones: Option<Arc<FragmentedTombstones>>,
}

impl TableMeta {
    /// The file's size: where the footer ends.
    pub(crate) fn file_size(&self) -> u64 {
        self.data_end.saturating_add(FOOTER_LEN as u64)
    }

    /// Bytes it holds, about: the pinned blocks (index(es), filter), the tombstones, the keys
    /// of the properties and a fixed share for the rest.
    pub(crate) fn memory_bytes(&self) -> u64 {
        let tombstones = self
            .range_tombstones
            .as_ref()
            .map_or(0, |t| t.memory_bytes());
        (self.index.charge()
            + self.handle_index.as_ref().map_or(0, |b| b.charge())
            + self.filter.as_ref().map_or(0, |f| f.size())
            + tombstones
            + self.properties.smallest_key.len()
            + self.properties.largest_key.len()
            + self.file_name.len()
            + std::mem::size_of::<Self>()) as u64
    }
}

/// An open, immutable key table, shared as `Arc<Table>`.
#[derive(Debug)]
pub struct Table {
    file: CountedReader,
    cache: Option<Arc<BlockCache>>,
    /// Everything read and verified at open, kept for the table's lifetime.
    meta: TableMeta,
}

/// Reads the range-deletion block `contents` of table `name` (at `offset`), which the
/// properties say holds `count` tombstones: entries `internal key (start, seq, kind 0) → end`,
/// in strictly increasing internal-key order, each with `start < end` and an end key of at most
/// 64 KiB.
///
/// Errors: anything else, or a count other than the properties', is `Error::Corruption`.
fn read_range_tombstones(
    contents: Vec<u8>,
    name: &Arc<str>,
    offset: u64,
    count: u64,
) -> Result<FragmentedTombstones> {
    let bad = |what: String| {
        Error::corruption(&**name, offset, format!("range-deletion block: {what}"))
    };
    let block = Arc::new(Block::new(contents, name.clone(), offset)?);
    let mut it = BlockIter::new(block, compare_internal, TRAILER_LEN);
    it.seek_to_first()?;
    let mut tombstones = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        let key = it.key();
        let Some(p) = ParsedKey::parse(key).filter(|p| p.kind == ValueKind::Deletion) else {
            return Err(bad("an entry's key is not a tombstone's internal key".into()));
        };
        if last
            .as_deref()
            .is_some_and(|l| compare_internal(l, key).is_ge())
        {
            return Err(bad("entries out of order".into()));
        }
        let end = it.value();
        if end.len() > MAX_INTERNAL_KEY_LEN - TRAILER_LEN || p.user_key >= end {
            return Err(bad(format!(
                "a tombstone at sequence {} whose end does not follow its start or is too long",
                p.seq
            )));
        }
        if tombstones.len() as u64 >= count {
            return Err(bad(format!(
                "more tombstones than the {count} the properties say"
            )));
        }
        tombstones.push(RangeTombstone {
            start: p.user_key.to_vec(),
            end: end.to_vec(),
            seq: p.seq,
        });
        last = Some(key.to_vec());
        it.next()?;
    }
    if tombstones.len() as u64 != count {
        return Err(bad(format!(
            "{} tombstones, the properties say {count}",
            tombstones.len()
        )));
    }
    Ok(FragmentedTombstones::new(tombstones))
}

impl Table {
    /// What this table keeps in memory besides its file, to open it again with
    /// [`Table::reopen`].
    pub(crate) fn meta(&self) -> TableMeta {
        self.meta.clone()
    }

    /// Opens the table in `file` again from what an earlier [`Table::open`] of the same file
    /// read and verified (`meta`), reading nothing: table files are immutable and their numbers
    /// never reused, so only the file's size is checked again.
    ///
    /// `Error::Corruption` when the file is no longer `meta`'s size; a failed `stat` is
    /// `Error::Io`.
    pub(crate) fn reopen(
        file: CountedReader,
        meta: &TableMeta,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Table> {
        check_file_size(&file, &meta.file_name, meta.file_size())?;
        Ok(Table {
            file,
            cache,
            meta: meta.clone(),
        })
    }

    /// Opens the table in `file`, whose size the caller recorded as `file_size` (from the
    /// manifest, or from the builder). Reads and verifies the footer, the index(es), filter and
    /// properties blocks (counting the reads under `class`) and keeps them for the table's
    /// lifetime. Both layouts (format versions 1 and 2) are accepted. `file_name` names the file
    /// in errors; `file_number` keys the block cache.
    ///
    /// A file whose actual size differs from `file_size`, a bad footer (magic, unknown version,
    /// checksum), a handle outside the file, or a damaged metadata block is
    /// `Error::Corruption`; failed reads are `Error::Io`.
    pub fn open(
        file: CountedReader,
        file_name: String,
        file_number: u64,
        file_size: u64,
        cache: Option<Arc<BlockCache>>,
        class: IoClass,
    ) -> Result<Table> {
        let name: Arc<str> = file_name.into();
        if file_size < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                &*name,
                0,
                format!("file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        }
        check_file_size(&file, &name, file_size)?;
        let data_end = file_size - FOOTER_LEN as u64;
        let footer_bytes = file.read_vec(data_end, FOOTER_LEN, class)?;
        let footer = Footer::decode(&footer_bytes, &name, data_end)?;

        let read = |h: BlockHandle, what: &str| read_block(&file, &name, h, data_end, class, what);
        let index = Arc::new(Block::new(
            read(footer.index, "index")?,
            name.clone(),
            footer.index.offset,
        )?);
        let handle_index = match footer.handle_index {
            Some(h) => Some(Arc::new(Block::new(
                read(h, "handle index")?,
                name.clone(),
                h.offset,
            )?)),
            None => None,
        };
        let filter = match footer.filter {
            Some(h) => Some(Arc::new(BloomFilter::parse(
                read(h, "filter")?,
                &name,
                h.offset,
            )?)),
            None => None,
        };
        let props_block = Block::new(
            read(footer.properties, "properties")?,
            name.clone(),
            footer.properties.offset,
        )?;
        let properties = TableProperties::decode(Arc::new(props_block))?;
        if properties.format_version != footer.format_version {
            return Err(Error::corruption(
                &*name,
                footer.properties.offset,
                format!(
                    "properties say format version {}, footer says {}",
                    properties.format_version, footer.format_version
                ),
            ));
        }
        let range_tombstones = match properties.range_del_block {
            Some(h) => Some(Arc::new(read_range_tombstones(
                read(h, "range deletion")?,
                &name,
                h.offset,
                properties.range_deletions,
            )?)),
            None => None,
        };
        Ok(Table {
            file,
            cache,
            meta: TableMeta {
                file_name: name,
                file_number,
                data_end,
                layout: footer.layout(),
                index,
                handle_index,
                filter,
                properties,
                range_tombstones,
            },
        })
    }

    /// Finds the first entry at or after `lookup_ikey` (an internal key, usually a lookup key
    /// `(user_key, seq, KIND_FOR_SEEK)`) with the same user key, and returns its internal key
    /// and value: the newest version visible at the lookup's sequence number, whatever its kind.
    /// `None` when the table holds no such entry. Consults the bloom filter first and does no
    /// I/O when it rules the key out. In an index-decoupled table both parts are searched and the
    /// newer candidate wins; the data part only when the filter's inline probe admits the key.
    ///
    /// A lookup key shorter than 8 bytes is `Error::InvalidArgument`; damaged blocks are
    /// `Error::Corruption`.
    pub fn get(&self, lookup_ikey: &[u8], ctx: ReadCtx) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .find(lookup_ikey, ctx)?
            .map(|it| (it.key().to_vec(), it.value().to_vec())))
    }

    /// The GC validity lookup ("GetKey"): the same entry as [`Table::get`] — the newest version
    /// of the lookup's user key at or below its sequence number — reported as its internal key
    /// and a [`KeyEntry`], never with an inline value (only its expiry, if it has one).
    ///
    /// In an index-decoupled table this reads no data block unless the filter's inline probe
    /// says the key may have an inline entry (or the table has no filter), and a handle block
    /// (through the block cache at high priority) only when the handle index places the key
    /// within a handle block's range; a key whose only versions here are handles costs one
    /// handle-block read, or none when that block is cached. In a mixed table it reads the data
    /// block as `get` does.
    ///
    /// A lookup key shorter than 8 bytes is `Error::InvalidArgument`; damaged blocks, and an
    /// entry whose kind does not belong to the part holding it, are `Error::Corruption`.
    pub fn get_key(&self, lookup_ikey: &[u8], ctx: ReadCtx) -> Result<Option<(Vec<u8>, KeyEntry)>> {
        let Some(it) = self.find(lookup_ikey, ctx)? else {
            return Ok(None);
        };
        let kind = self.entry_kind(it.key(), it.block())?;
        let entry = match kind {
            ValueKind::ValueHandle => KeyEntry::Handle(it.value().to_vec()),
            ValueKind::Value => KeyEntry::Inline { expiry: None },
            ValueKind::ValueWithExpiry => KeyEntry::Inline {
                expiry: crate::expiry::entry_expiry(kind, it.value(), &self.meta.file_name)?,
            },
            ValueKind::Deletion => KeyEntry::Deletion,
        };
        Ok(Some((it.key().to_vec(), entry)))
    }

    /// The block iterator positioned at the answer of a point lookup (see [`Table::get`]), or
    /// `None`: the entry read in place, for a caller that would otherwise copy it only to parse
    /// it.
    pub(crate) fn find(&self, lookup_ikey: &[u8], ctx: ReadCtx) -> Result<Option<BlockIter>> {
        if lookup_ikey.len() < TRAILER_LEN {
            return Err(Error::invalid(format!(
                "lookup key of {} bytes has no trailer",
                lookup_ikey.len()
            )));
        }
        let ukey = user_key(lookup_ikey);
        if !self.may_contain(ukey) {
            return Ok(None);
        }
        if self.meta.handle_index.is_none() {
            return self.find_in_part(TablePart::Data, lookup_ikey, ctx);
        }
        let handle = self.find_in_part(TablePart::Handles, lookup_ikey, ctx)?;
        if let Some(it) = &handle {
            self.check_part_kind(TablePart::Handles, it)?;
        }
        let data = if self.may_contain_inline(ukey) {
            self.find_in_part(TablePart::Data, lookup_ikey, ctx)?
        } else {
            None
        };
        if let Some(it) = &data {
            self.check_part_kind(TablePart::Data, it)?;
        }
        // Internal keys order newer versions first: the smaller key is the answer.
        Ok(match (data, handle) {
            (Some(d), Some(h)) => Some(if compare_internal(d.key(), h.key()).is_lt() {
                d
            } else {
                h
            }),
            (d, h) => d.or(h),
        })
    }

    /// Seeks `part` for the first entry at or after `lookup_ikey`; the block iterator positioned
    /// there when it has the lookup's user key.
    fn find_in_part(
        &self,
        part: TablePart,
        lookup_ikey: &[u8],
        ctx: ReadCtx,
    ) -> Result<Option<BlockIter>> {
        let Some(index) = self.part_index(part) else {
            return Ok(None);
        };
        let mut index = BlockIter::internal(index.clone());
        index.seek(lookup_ikey)?;
        if !index.valid() {
            return Ok(None);
        }
        let handle = self.decode_index_value(part, index.value())?;
        let mut block = BlockIter::internal(self.part_block(part, handle, ctx)?);
        block.seek(lookup_ikey)?;
        if !block.valid() {
            // The index key is the block's last key and it is >= the lookup key, so the block
            // must hold an entry at or after it.
            return Err(Error::corruption(
                &*self.meta.file_name,
                handle.offset,
                format!("{} block ends before its index key", part.name()),
            ));
        }
        Ok((user_key(block.key()) == user_key(lookup_ikey)).then_some(block))
    }

    /// The kind of a stored entry's key; an unparseable key is corruption of `block`.
    fn entry_kind(&self, ikey: &[u8], block: &Block) -> Result<ValueKind> {
        ParsedKey::parse(ikey).map(|p| p.kind).ok_or_else(|| {
            Error::corruption(
                &*self.meta.file_name,
                block.offset(),
                "entry has an unknown kind byte",
            )
        })
    }

    /// In an index-decoupled table, handle blocks hold only value handles and data blocks
    /// everything else; an entry in the wrong part means the table is not what its writer wrote.
    fn check_part_kind(&self, part: TablePart, it: &BlockIter) -> Result<()> {
        let kind = self.entry_kind(it.key(), it.block())?;
        if (kind == ValueKind::ValueHandle) != (part == TablePart::Handles) {
            return Err(Error::corruption(
                &*self.meta.file_name,
                it.block().offset(),
                format!("{} block holds an entry of kind {kind:?}", part.name()),
            ));
        }
        Ok(())
    }

    /// A two-level iterator over every entry of the table in internal-key order: in an
    /// index-decoupled table, a merge of the data part and the handle part. Blocks are loaded
    /// lazily with `ctx`.
    pub fn iter(self: &Arc<Self>, ctx: ReadCtx) -> TableIter {
        let mut parts = vec![TablePart::Data];
        if self.meta.handle_index.is_some() {
            parts.push(TablePart::Handles);
        }
        TableIter::new(self.clone(), &parts, ctx)
    }

    /// An iterator over one part only (for tools that show the parts separately): the data
    /// part of either layout (all entries of a mixed table), or the handle part of an
    /// index-decoupled table. `None` for the handle part of a mixed table, which has none.
    pub fn part_iter(self: &Arc<Self>, part: TablePart, ctx: ReadCtx) -> Option<TableIter> {
        self.part_index(part)?;
        Some(TableIter::new(self.clone(), &[part], ctx))
    }

    /// False when the bloom filter rules `user_key` out; true when the table may hold it (or
    /// has no filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.meta.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// False when the table certainly holds no data-part entry (inline value or tombstone) for
    /// `user_key`: the filter's inline probe rules it out in an index-decoupled table. Always
    /// true for a mixed table (its data part holds everything) and for a table without a filter.
    pub fn may_contain_inline(&self, user_key: &[u8]) -> bool {
        match (&self.meta.filter, self.meta.layout) {
            (Some(f), KeyTableLayout::IndexDecoupled) => f.may_contain_inline(user_key),
            _ => true,
        }
    }

    /// The table's range tombstones, fragmented; `None` when it holds none.
    pub(crate) fn range_tombstones(&self) -> Option<&Arc<FragmentedTombstones>> {
        self.meta.range_tombstones.as_ref()
    }

    /// The layout the table was written in.
    pub fn layout(&self) -> KeyTableLayout {
        self.meta.layout
    }

    /// The properties recorded when the table was built.
    pub fn properties(&self) -> &TableProperties {
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

    /// Bytes of metadata pinned in memory (index(es), with the restart heads their seeks build,
    /// and filter blocks).
    pub fn pinned_bytes(&self) -> usize {
        self.meta.index.charge()
            + self.meta.handle_index.as_ref().map_or(0, |b| b.charge())
            + self.meta.filter.as_ref().map_or(0, |f| f.size())
    }

    /// The pinned index of `part`: the data index, or the handle index (`None` in a mixed
    /// table). Tools walk it to verify every block of a part.
    pub fn part_index(&self, part: TablePart) -> Option<&Arc<Block>> {
        match part {
            TablePart::Data => Some(&self.meta.index),
            TablePart::Handles => self.meta.handle_index.as_ref(),
        }
    }

    /// Decodes an index entry's value of `part`; anything but exactly one handle is corruption.
    pub fn decode_index_value(&self, part: TablePart, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value).ok_or_else(|| {
            let offset = self.part_index(part).map_or(0, |b| b.offset());
            Error::corruption(
                &*self.meta.file_name,
                offset,
                format!("{} index entry value is not a block handle", part.name()),
            )
        })
    }

    /// The block of `part` at `handle`: from the block cache when present, else read (counted
    /// under `ctx.class`), verified and, when `ctx.fill_cache`, cached — data blocks at low
    /// priority, handle blocks at high priority so GC lookups keep finding them.
    pub fn part_block(
        &self,
        part: TablePart,
        handle: BlockHandle,
        ctx: ReadCtx,
    ) -> Result<Arc<Block>> {
        self.part_block_with(part, handle, ctx, None)
    }

    /// As [`part_block`](Self::part_block); with a `window` (forward iterators with
    /// `ctx.readahead`), a block that is not cached is cut from the window when the window holds
    /// it, else read together with the `ctx.readahead` bytes that follow it into the window
    /// (never past the table's data end).
    pub(crate) fn part_block_with(
        &self,
        part: TablePart,
        handle: BlockHandle,
        ctx: ReadCtx,
        window: Option<&mut Readahead>,
    ) -> Result<Arc<Block>> {
        let priority = cache_priority(part);
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.meta.file_number, handle.offset, priority)
        {
            return Ok(block);
        }
        let contents = match window {
            Some(window) => self.read_through(part, handle, ctx, window)?,
            None => self.read_alone(part, handle, ctx)?,
        };
        let block = Arc::new(Block::new(contents, self.meta.file_name.clone(), handle.offset)?);
        if ctx.fill_cache
            && let Some(cache) = &self.cache
        {
            cache.insert(self.meta.file_number, handle.offset, block.clone(), priority);
        }
        Ok(block)
    }

    /// Reads and verifies one block with one read.
    fn read_alone(&self, part: TablePart, handle: BlockHandle, ctx: ReadCtx) -> Result<Vec<u8>> {
        read_block(
            &self.file,
            &self.meta.file_name,
            handle,
            self.meta.data_end,
            ctx.class,
            part.name(),
        )
    }

    /// Reads and verifies one block through `window` (see
    /// [`part_block_with`](Self::part_block_with)).
    fn read_through(
        &self,
        part: TablePart,
        handle: BlockHandle,
        ctx: ReadCtx,
        window: &mut Readahead,
    ) -> Result<Vec<u8>> {
        handle.check_within(self.meta.data_end, &self.meta.file_name, part.name())?;
        let len = handle.size + BLOCK_TRAILER_LEN as u64;
        if !window.holds(handle.offset, len) {
            if handle.offset < window.start {
                // Behind the window (the other part of an index-decoupled table lagging): read
                // the block alone, so the window only ever moves forward and the parts cannot
                // make it jump back and forth.
                return self.read_alone(part, handle, ctx);
            }
            let size = if !ctx.readahead_ramp {
                ctx.readahead
            } else if !window.buf.is_empty()
                && handle.offset == window.start + window.buf.len() as u64
            {
                // The block right after the window: the pass goes on.
                (window.size * 2).clamp(FIRST_RAMP_WINDOW.min(ctx.readahead), ctx.readahead)
            } else {
                0
            };
            window.size = size;
            // check_within bounded the block by the data end, so the window covers it.
            let end = self
                .meta
                .data_end
                .min(handle.offset.saturating_add(size.max(len)));
            window.start = handle.offset;
            window.buf.resize((end - handle.offset) as usize, 0);
            if let Err(e) = self
                .file
                .read_exact_at(&mut window.buf, handle.offset, ctx.class)
            {
                // Nothing of a failed read may be served later as if it had been read.
                window.buf.clear();
                return Err(e);
            }
        }
        let at = (handle.offset - window.start) as usize;
        decode_block(
            window.buf[at..at + len as usize].to_vec(),
            &self.meta.file_name,
            handle,
            part.name(),
        )
    }
}
