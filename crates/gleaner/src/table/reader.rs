//! An open key table: footer, index, filter and properties pinned in memory; data blocks read
//! on demand, through the block cache when there is one.

use std::sync::Arc;

use crate::cache::{BlockCache, CachePriority};
use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::io::accounting::CountedReader;
use crate::iter::InternalIterator;
use crate::key::{TRAILER_LEN, user_key};

use super::block::{Block, BlockIter};
use super::block_io::read_block;
use super::bloom::BloomFilter;
use super::format::{BlockHandle, FOOTER_LEN, Footer};
use super::iter::TableIter;
use super::properties::TableProperties;

/// Per-read options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCtx {
    /// The class the read's bytes are counted under.
    pub class: IoClass,
    /// Whether data blocks read from disk are inserted into the block cache (scans and
    /// compaction inputs usually should not evict hot blocks).
    pub fill_cache: bool,
}

impl ReadCtx {
    /// A context counting under `class` and filling the cache.
    pub fn new(class: IoClass) -> Self {
        ReadCtx {
            class,
            fill_cache: true,
        }
    }
}

impl Default for ReadCtx {
    /// [`IoClass::UserRead`], filling the cache.
    fn default() -> Self {
        ReadCtx::new(IoClass::UserRead)
    }
}

/// An open, immutable key table, shared as `Arc<Table>`.
#[derive(Debug)]
pub struct Table {
    file: CountedReader,
    file_name: Arc<str>,
    file_number: u64,
    /// Where the footer starts; every block must end at or before it.
    data_end: u64,
    cache: Option<Arc<BlockCache>>,
    index: Arc<Block>,
    filter: Option<BloomFilter>,
    properties: TableProperties,
}

impl Table {
    /// Opens the table in `file`, whose size the caller recorded as `file_size` (from the
    /// manifest, or from the builder). Reads and verifies the footer, the index, filter and
    /// properties blocks (counting the reads under `class`) and keeps them for the table's
    /// lifetime. `file_name` names the file in errors; `file_number` keys the block cache.
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
        let actual = file.size()?;
        if actual != file_size {
            return Err(Error::corruption(
                &*name,
                actual.min(file_size),
                format!("file is {actual} bytes, expected {file_size} (truncated or replaced)"),
            ));
        }
        let data_end = file_size - FOOTER_LEN as u64;
        let footer_bytes = file.read_vec(data_end, FOOTER_LEN, class)?;
        let footer = Footer::decode(&footer_bytes, &name, data_end)?;

        let read = |h: BlockHandle, what: &str| read_block(&file, &name, h, data_end, class, what);
        let index = Arc::new(Block::new(
            read(footer.index, "index")?,
            name.clone(),
            footer.index.offset,
        )?);
        let filter = match footer.filter {
            Some(h) => Some(BloomFilter::parse(read(h, "filter")?, &name, h.offset)?),
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
        Ok(Table {
            file,
            file_name: name,
            file_number,
            data_end,
            cache,
            index,
            filter,
            properties,
        })
    }

    /// Finds the first entry at or after `lookup_ikey` (an internal key, usually a lookup key
    /// `(user_key, seq, KIND_FOR_SEEK)`) with the same user key, and returns its internal key
    /// and value: the newest version visible at the lookup's sequence number, whatever its kind.
    /// `None` when the table holds no such entry. Consults the bloom filter first and does no
    /// I/O when it rules the key out.
    ///
    /// A lookup key shorter than 8 bytes is `Error::InvalidArgument`; damaged blocks are
    /// `Error::Corruption`.
    pub fn get(&self, lookup_ikey: &[u8], ctx: ReadCtx) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
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
        let mut index = BlockIter::internal(self.index.clone());
        index.seek(lookup_ikey)?;
        if !index.valid() {
            return Ok(None);
        }
        let handle = self.decode_index_value(index.value())?;
        let mut data = BlockIter::internal(self.data_block(handle, ctx)?);
        data.seek(lookup_ikey)?;
        if !data.valid() {
            // The index key is the block's last key and it is >= the lookup key, so the block
            // must hold an entry at or after it.
            return Err(Error::corruption(
                &*self.file_name,
                handle.offset,
                "data block ends before its index key",
            ));
        }
        Ok((user_key(data.key()) == ukey).then(|| (data.key().to_vec(), data.value().to_vec())))
    }

    /// A two-level iterator over every entry of the table. Data blocks are loaded lazily with
    /// `ctx`.
    pub fn iter(self: &Arc<Self>, ctx: ReadCtx) -> TableIter {
        TableIter::new(self.clone(), BlockIter::internal(self.index.clone()), ctx)
    }

    /// False when the bloom filter rules `user_key` out; true when the table may hold it (or
    /// has no filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The properties recorded when the table was built.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The name used in errors.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// Bytes of metadata pinned in memory (index and filter blocks).
    pub fn pinned_bytes(&self) -> usize {
        self.index.size() + self.filter.as_ref().map_or(0, BloomFilter::size)
    }

    /// The pinned index block (tests inspect handles through it).
    #[cfg(test)]
    pub(crate) fn index_block(&self) -> Arc<Block> {
        self.index.clone()
    }

    /// Decodes an index entry's value; anything but exactly one handle is corruption.
    pub(crate) fn decode_index_value(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value).ok_or_else(|| {
            Error::corruption(
                &*self.file_name,
                self.index.offset(),
                "index entry value is not a block handle",
            )
        })
    }

    /// The data block at `handle`: from the cache when present, else read, verified and (when
    /// `ctx.fill_cache`) cached.
    pub(crate) fn data_block(&self, handle: BlockHandle, ctx: ReadCtx) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.file_number, handle.offset, CachePriority::Low)
        {
            return Ok(block);
        }
        let contents = read_block(
            &self.file,
            &self.file_name,
            handle,
            self.data_end,
            ctx.class,
            "data",
        )?;
        let block = Arc::new(Block::new(contents, self.file_name.clone(), handle.offset)?);
        if ctx.fill_cache
            && let Some(cache) = &self.cache
        {
            cache.insert(
                self.file_number,
                handle.offset,
                block.clone(),
                CachePriority::Low,
            );
        }
        Ok(block)
    }
}
