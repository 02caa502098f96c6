//! Writes a key table from entries added in internal-key order.
//!
//! Mixed layout (format version 1): data blocks, filter block (optional), index block,
//! properties block, footer. Index-decoupled layout (format version 2): data blocks and handle
//! blocks interleaved as each fills, filter block (optional), data index, handle index,
//! properties, footer. Blocks are written as soon as they fill, so memory stays at one block per
//! part plus the indexes and the filter's key hashes.

use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::key::{
    ParsedKey, SeqNo, TRAILER_LEN, ValueKind, compare_internal, seq_of, user_key,
};

use super::block_builder::{BlockBuilder, DEFAULT_RESTART_INTERVAL};
use super::block_io::write_block;
use super::bloom::{BloomBuilder, DEFAULT_BITS_PER_KEY, MAX_BITS_PER_KEY};
use super::format::{
    BLOCK_TRAILER_LEN, BlockHandle, Compression, FOOTER_LEN, Footer, KeyTableLayout,
    MAX_BLOCK_CONTENTS, MAX_BLOCK_SIZE, MAX_INTERNAL_KEY_LEN, MAX_VALUE_LEN, TablePart,
};
use super::properties::TableProperties;

/// Default target size of a data block before compression (4 KiB).
pub const DEFAULT_BLOCK_SIZE: usize = 4096;

/// How a key table is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableBuilderOptions {
    /// A data (or handle) block is cut once its uncompressed size (restart array included)
    /// reaches this many bytes. Default 4096; must be in `1..=64 MiB`.
    pub block_size: usize,
    /// Entries between restart points in data and handle blocks. Default 16; must be at least 1.
    pub restart_interval: usize,
    /// Bloom filter bits per probe: per user key, plus (index-decoupled layout) per user key
    /// with a data-part entry. Default 10; 0 builds no filter; at most 64.
    pub bloom_bits_per_key: u32,
    /// Block compression. Default [`Compression::Lz4`].
    pub compression: Compression,
    /// Where entries go: [`KeyTableLayout::Mixed`] (the default, format version 1) or
    /// [`KeyTableLayout::IndexDecoupled`] (format version 2: value handles in their own blocks).
    pub layout: KeyTableLayout,
}

impl Default for TableBuilderOptions {
    fn default() -> Self {
        TableBuilderOptions {
            block_size: DEFAULT_BLOCK_SIZE,
            restart_interval: DEFAULT_RESTART_INTERVAL,
            bloom_bits_per_key: DEFAULT_BITS_PER_KEY,
            compression: Compression::Lz4,
            layout: KeyTableLayout::Mixed,
        }
    }
}

impl TableBuilderOptions {
    /// Checks every option against its documented range; `Error::InvalidArgument` naming the
    /// option otherwise.
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_BLOCK_SIZE).contains(&self.block_size) {
            return Err(Error::invalid(format!(
                "block_size {} is outside 1..={MAX_BLOCK_SIZE}",
                self.block_size
            )));
        }
        if self.restart_interval == 0 {
            return Err(Error::invalid("restart_interval must be at least 1"));
        }
        if self.bloom_bits_per_key > MAX_BITS_PER_KEY {
            return Err(Error::invalid(format!(
                "bloom_bits_per_key {} exceeds {MAX_BITS_PER_KEY}",
                self.bloom_bits_per_key
            )));
        }
        Ok(())
    }
}

/// What [`TableBuilder::finish`] produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedTable {
    /// The properties stored in the table.
    pub properties: TableProperties,
    /// Size of the complete file in bytes (the value [`Table::open`](super::Table::open)
    /// expects).
    pub file_size: u64,
}

/// One sorted part of a table under construction: its pending block and its index.
#[derive(Debug)]
struct PartBuilder {
    block: BlockBuilder,
    index: BlockBuilder,
    /// The last key added to this part, the index key of its pending block; empty while the part
    /// has no entry (internal keys are at least 8 bytes).
    last_key: Vec<u8>,
}

impl PartBuilder {
    fn new(restart_interval: usize) -> Self {
        PartBuilder {
            block: BlockBuilder::new(restart_interval),
            // Restart interval 1: every index key is a restart key, so a seek binary-searches
            // straight to its block.
            index: BlockBuilder::new(1),
            last_key: Vec::new(),
        }
    }

    fn pending_bytes(&self) -> u64 {
        if self.block.is_empty() {
            0
        } else {
            self.block.size_estimate() as u64
        }
    }
}

/// Builds one key table. Entries must be added in strictly increasing internal-key order.
///
/// After any error the builder is unusable: every later call returns the same error, and the
/// caller should delete the partial file.
#[derive(Debug)]
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableBuilderOptions,
    /// Bytes written so far; the offset of the next block.
    offset: u64,
    data: PartBuilder,
    /// The handle part; `Some` exactly for the index-decoupled layout.
    handles: Option<PartBuilder>,
    bloom: Option<BloomBuilder>,
    last_key: Vec<u8>,
    props: TableProperties,
    /// Range tombstones, written at `finish` in their own block.
    range_tombstones: Vec<crate::range_del::RangeTombstone>,
    /// Reused compression output.
    scratch: Vec<u8>,
    /// Reused encoded block handle.
    handle_buf: Vec<u8>,
    error: Option<Error>,
}

impl TableBuilder {
    /// Starts a table in `file`, which must be empty. Fails with `Error::InvalidArgument` when
    /// `opts` is out of range (see [`TableBuilderOptions`]).
    pub fn new(file: Box<dyn WritableFile>, opts: TableBuilderOptions) -> Result<TableBuilder> {
        opts.validate()?;
        Ok(TableBuilder {
            offset: file.len(),
            file,
            opts,
            data: PartBuilder::new(opts.restart_interval),
            handles: (opts.layout == KeyTableLayout::IndexDecoupled)
                .then(|| PartBuilder::new(opts.restart_interval)),
            bloom: (opts.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(opts.bloom_bits_per_key)),
            last_key: Vec::new(),
            props: TableProperties::default(),
            range_tombstones: Vec::new(),
            scratch: Vec::new(),
            handle_buf: Vec::with_capacity(BlockHandle::MAX_ENCODED_LEN),
            error: None,
        })
    }

    /// The layout this builder writes.
    pub fn layout(&self) -> KeyTableLayout {
        self.opts.layout
    }

    /// Adds an entry. `ikey` must be a valid internal key (user key of at most 64 KiB, a known
    /// kind) sorting strictly after the previous one, and `value` at most 256 MiB; otherwise
    /// `Error::InvalidArgument` and nothing is added. In the index-decoupled layout an entry of
    /// kind value handle goes to the handle part and every other entry to the data part. I/O
    /// errors are returned as they happen.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if ikey.len() < TRAILER_LEN || ikey.len() > MAX_INTERNAL_KEY_LEN {
            return Err(Error::invalid(format!(
                "internal key of {} bytes is outside {TRAILER_LEN}..={MAX_INTERNAL_KEY_LEN}",
                ikey.len()
            )));
        }
        let Some(parsed) = ParsedKey::parse(ikey) else {
            return Err(Error::invalid("internal key has an unknown kind byte"));
        };
        if value.len() > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "value of {} bytes exceeds the key-table limit of {MAX_VALUE_LEN}",
                value.len()
            )));
        }
        let first = self.props.num_entries == 0;
        if !first && compare_internal(&self.last_key, ikey).is_ge() {
            return Err(Error::invalid(
                "key-table entries must be added in strictly increasing internal-key order",
            ));
        }
        let part = match (&self.handles, parsed.kind) {
            (Some(_), ValueKind::ValueHandle) => TablePart::Handles,
            _ => TablePart::Data,
        };

        if let Some(bloom) = &mut self.bloom {
            // Versions of one user key are adjacent: add each user key once per family.
            if first || user_key(&self.last_key) != parsed.user_key {
                bloom.add_key(parsed.user_key);
            }
            // The data part's last key has this user key only if an earlier version of it went
            // there already.
            if self.handles.is_some()
                && part == TablePart::Data
                && (self.data.last_key.is_empty()
                    || user_key(&self.data.last_key) != parsed.user_key)
            {
                bloom.add_inline_key(parsed.user_key);
            }
        }
        let seq = seq_of(ikey);
        let p = &mut self.props;
        if first {
            p.smallest_key = ikey.to_vec();
            p.smallest_seq = seq;
            p.largest_seq = seq;
        }
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        p.num_entries += 1;
        p.num_deletions += u64::from(parsed.kind == ValueKind::Deletion);
        p.num_handle_entries += u64::from(part == TablePart::Handles);
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;

        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        let block_size = self.opts.block_size;
        let target = self.part_mut(part);
        target.block.add(ikey, value);
        target.last_key.clear();
        target.last_key.extend_from_slice(ikey);
        if target.block.size_estimate() >= block_size {
            let r = self.flush_block(part);
            return self.record(r);
        }
        Ok(())
    }

    /// Adds range tombstone `[start, end)` at `seq`, in any order relative to the entries and
    /// to other tombstones (they are sorted into the table's range-deletion block at
    /// [`finish`](Self::finish)). `start < end`, each a user key of at most 64 KiB, and `seq` at
    /// most 2^56 - 1; otherwise `Error::InvalidArgument` and nothing is added.
    pub fn add_range_tombstone(&mut self, start: &[u8], end: &[u8], seq: SeqNo) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let max = MAX_INTERNAL_KEY_LEN - TRAILER_LEN;
        if start >= end || end.len() > max || seq > crate::key::MAX_SEQUENCE {
            return Err(Error::invalid(format!(
                "range tombstone of keys of {} and {} bytes at sequence {seq}: the start must \
                 sort before the end, keys are at most {max} bytes, sequences at most 2^56 - 1",
                start.len(),
                end.len()
            )));
        }
        self.range_tombstones.push(crate::range_del::RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        Ok(())
    }

    /// Number of entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the uncompressed size of the pending blocks: what the file
    /// would roughly measure if finished now (without indexes, filter and properties).
    pub fn estimated_file_size(&self) -> u64 {
        self.offset
            + self.data.pending_bytes()
            + self.handles.as_ref().map_or(0, PartBuilder::pending_bytes)
    }

    /// Writes the pending data (and handle) blocks, the filter, index(es) and properties blocks
    /// and the footer, then syncs the file. Returns the properties and the file size.
    pub fn finish(mut self) -> Result<FinishedTable> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush_block(TablePart::Data)?;
        self.flush_block(TablePart::Handles)?;
        let file = &mut *self.file;

        let filter = match &self.bloom {
            Some(bloom) => {
                let mut contents = Vec::with_capacity(bloom.num_keys() * 2 + 16);
                bloom.finish(&mut contents);
                // Filter bits are random: compression would not pay, so do not try.
                let h = write_block(
                    file,
                    &mut self.offset,
                    &contents,
                    Compression::None,
                    &mut self.scratch,
                )?;
                self.props.filter_bytes = h.size + BLOCK_TRAILER_LEN as u64;
                Some(h)
            }
            None => None,
        };

        let index = write_block(
            file,
            &mut self.offset,
            self.data.index.finish(),
            self.opts.compression,
            &mut self.scratch,
        )?;
        self.props.index_bytes = index.size + BLOCK_TRAILER_LEN as u64;
        let handle_index = match &mut self.handles {
            Some(part) => {
                let h = write_block(
                    file,
                    &mut self.offset,
                    part.index.finish(),
                    self.opts.compression,
                    &mut self.scratch,
                )?;
                self.props.handle_index_bytes = h.size + BLOCK_TRAILER_LEN as u64;
                Some(h)
            }
            None => None,
        };

        if !self.range_tombstones.is_empty() {
            // By start key, newest first: the block's keys are internal keys in order.
            let mut ts = std::mem::take(&mut self.range_tombstones);
            ts.sort_by(|a, b| a.start.cmp(&b.start).then(b.seq.cmp(&a.seq)));
            ts.dedup_by(|a, b| a.start == b.start && a.seq == b.seq && a.end == b.end);
            let mut block = BlockBuilder::new(self.opts.restart_interval);
            let mut last: Option<(&[u8], SeqNo)> = None;
            for t in &ts {
                if last == Some((t.start.as_slice(), t.seq)) {
                    // Two tombstones at one start and sequence number: a caller's bug.
                    return Err(Error::invalid(format!(
                        "two range tombstones start at the same key at sequence {}",
                        t.seq
                    )));
                }
                last = Some((t.start.as_slice(), t.seq));
                block.add(
                    &crate::key::make_internal_key(&t.start, t.seq, ValueKind::Deletion),
                    &t.end,
                );
                let p = &mut self.props;
                if p.num_entries == 0 && p.range_deletions == 0 {
                    p.smallest_seq = t.seq;
                    p.largest_seq = t.seq;
                }
                p.smallest_seq = p.smallest_seq.min(t.seq);
                p.largest_seq = p.largest_seq.max(t.seq);
                p.range_deletions += 1;
            }
            if block.size_estimate() > MAX_BLOCK_CONTENTS {
                return Err(Error::invalid(format!(
                    "key table too large: its range tombstones would exceed the \
                     {MAX_BLOCK_CONTENTS}-byte block limit"
                )));
            }
            let h = write_block(
                file,
                &mut self.offset,
                block.finish(),
                self.opts.compression,
                &mut self.scratch,
            )?;
            self.props.range_del_block = Some(h);
        }

        // Properties go last so they can record the sizes of every other block.
        let format_version = self.opts.layout.format_version();
        self.props.largest_key = std::mem::take(&mut self.last_key);
        self.props.compression = self.opts.compression.name().to_owned();
        self.props.format_version = format_version;
        let mut props_block = BlockBuilder::new(1);
        self.props.encode_to(&mut props_block);
        let properties = write_block(
            file,
            &mut self.offset,
            props_block.finish(),
            self.opts.compression,
            &mut self.scratch,
        )?;

        let footer = Footer {
            index,
            handle_index,
            filter,
            properties,
            format_version,
        };
        file.append(&footer.encode())?;
        self.offset += FOOTER_LEN as u64;
        file.sync()?;
        Ok(FinishedTable {
            properties: self.props,
            file_size: self.offset,
        })
    }

    /// The builder of `part`; the data part for [`TablePart::Handles`] in a mixed table (the
    /// caller never routes there).
    fn part_mut(&mut self, part: TablePart) -> &mut PartBuilder {
        match (part, &mut self.handles) {
            (TablePart::Handles, Some(h)) => h,
            _ => &mut self.data,
        }
    }

    /// Writes the pending block of `part` (if any) and indexes it under its last key. No-op for
    /// the handle part of a mixed table.
    fn flush_block(&mut self, part: TablePart) -> Result<()> {
        let p = match (part, &mut self.handles) {
            (TablePart::Data, _) => &mut self.data,
            (TablePart::Handles, Some(h)) => h,
            (TablePart::Handles, None) => return Ok(()),
        };
        if p.block.is_empty() {
            return Ok(());
        }
        let handle = write_block(
            &mut *self.file,
            &mut self.offset,
            p.block.finish(),
            self.opts.compression,
            &mut self.scratch,
        )?;
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        p.index.add(&p.last_key, &self.handle_buf);
        p.block.reset();
        let on_disk = handle.size + BLOCK_TRAILER_LEN as u64;
        match part {
            TablePart::Data => {
                self.props.num_data_blocks += 1;
                self.props.data_bytes += on_disk;
            }
            TablePart::Handles => {
                self.props.num_handle_blocks += 1;
                self.props.handle_bytes += on_disk;
            }
        }
        self.check_metadata_size()
    }

    /// Fails once an index or the filter would exceed what one block may hold, so an
    /// oversized table is refused now rather than after all its data is written. Callers cut
    /// tables far below this (it takes millions of entries).
    fn check_metadata_size(&self) -> Result<()> {
        let filter_bytes = self.bloom.as_ref().map_or(0, |b| {
            (b.num_keys() as u64).saturating_mul(u64::from(self.opts.bloom_bits_per_key)) / 8
        });
        let index_bytes = (self.data.index.size_estimate() as u64).max(
            self.handles
                .as_ref()
                .map_or(0, |h| h.index.size_estimate() as u64),
        );
        if index_bytes.max(filter_bytes) > MAX_BLOCK_CONTENTS as u64 {
            return Err(Error::invalid(format!(
                "key table too large: an index ({index_bytes} bytes) or the filter \
                 ({filter_bytes} bytes) would exceed the {MAX_BLOCK_CONTENTS}-byte block limit"
            )));
        }
        Ok(())
    }

    /// Remembers a failure so that later calls report it instead of writing a broken table.
    fn record(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }
}
