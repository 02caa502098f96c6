//! Walking a value table's whole dense index without touching a record: GC's lazy read.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::table::format::BLOCK_TRAILER_LEN;
use crate::table::{BlockHandle, BlockIter};

use super::index::IndexEntry;
use super::reader::ValueTable;

/// An iterator over every dense-index entry of one value table in internal-key order, as
/// [`IndexEntry`] values `(user_key, seq, offset, len)`. Holds its table alive. Created by
/// [`ValueTable::index_iter`].
///
/// It is a plain `Iterator<Item = Result<IndexEntry>>`: after the first error (or the end) it
/// yields `None`. Besides the checks of every block and entry (checksums, entry bounds), it
/// verifies what a walk of the whole index can: keys strictly increase; every dense block is
/// non-empty and ends with its top index key; the records are contiguous (the first starts at
/// offset 0, each next one where the previous ended, the last ends at `data_end`); and the
/// number of entries equals `num_records`. A violation is `Error::Corruption` naming the file
/// and the offending block. In a value segment (records in write order) the records are
/// contiguous in file order instead: the walk keeps every record's place (16 bytes a record)
/// and checks at its end that they tile the record region exactly.
#[derive(Debug)]
pub struct ValueIndexIter {
    table: Arc<ValueTable>,
    class: IoClass,
    top: BlockIter,
    /// The dense block under the top cursor, and its handle.
    dense: Option<(BlockHandle, BlockIter)>,
    started: bool,
    done: bool,
    /// The last internal key yielded.
    prev_key: Vec<u8>,
    /// Where the next record must start (records in key order; records in write order are
    /// checked from `spans` at the end).
    next_offset: u64,
    /// Records in write order: each record's `(offset, len)`, checked to tile the record
    /// region at the end of the walk.
    spans: Option<Vec<(u64, u64)>>,
    count: u64,
    block_bytes: u64,
}

impl ValueIndexIter {
    pub(crate) fn new(table: Arc<ValueTable>, top: BlockIter, class: IoClass) -> Self {
        let spans = table.in_write_order().then(Vec::new);
        ValueIndexIter {
            table,
            class,
            top,
            dense: None,
            started: false,
            done: false,
            prev_key: Vec::new(),
            next_offset: 0,
            spans,
            count: 0,
            block_bytes: 0,
        }
    }

    /// Stored bytes of the dense index blocks walked so far (each block's contents and
    /// trailer, whether it came from disk or from the block cache): what a GC job's first pass
    /// costs in index bytes.
    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    fn corruption(&self, offset: u64, detail: impl std::fmt::Display) -> Error {
        Error::corruption(self.table.file_name(), offset, detail)
    }

    /// The next entry, or `None` at the end after the whole-index checks.
    fn advance(&mut self) -> Result<Option<IndexEntry>> {
        loop {
            if let Some((handle, dense)) = &mut self.dense {
                let handle = *handle;
                if dense.valid() {
                    let entry = self
                        .table
                        .decode_dense_entry(dense.key(), dense.value(), handle.offset)?
                        .to_owned();
                    if self.count > 0 && compare_internal(&self.prev_key, dense.key()).is_ge() {
                        return Err(self.corruption(handle.offset, "dense index keys out of order"));
                    }
                    if let Some(spans) = &mut self.spans {
                        spans.push((entry.offset, entry.len));
                    } else if entry.offset != self.next_offset {
                        return Err(self.corruption(
                            handle.offset,
                            format!(
                                "dense index entry places a record at {}, but the previous \
                                 record ends at {}",
                                entry.offset, self.next_offset
                            ),
                        ));
                    }
                    self.prev_key.clear();
                    self.prev_key.extend_from_slice(dense.key());
                    dense.next()?;
                    self.next_offset = entry.offset + entry.len;
                    self.count += 1;
                    return Ok(Some(entry));
                }
                // The block is exhausted: its last key must be the key the top index holds.
                if self.prev_key.as_slice() != self.top.key() {
                    return Err(self.corruption(
                        handle.offset,
                        "dense index block does not end with its top index key",
                    ));
                }
                self.dense = None;
                self.top.next()?;
            } else if !self.started {
                self.started = true;
                self.top.seek_to_first()?;
            }
            if !self.top.valid() {
                return self.finish().map(|()| None);
            }
            let handle = self.table.decode_top_value(self.top.value())?;
            let block = self.table.dense_block(handle, self.class, false)?;
            self.block_bytes += handle.size + BLOCK_TRAILER_LEN as u64;
            let mut dense = BlockIter::internal(block);
            dense.seek_to_first()?;
            if !dense.valid() {
                return Err(self.corruption(handle.offset, "dense index block is empty"));
            }
            self.dense = Some((handle, dense));
        }
    }

    /// The whole-index checks at the end of the walk.
    fn finish(&mut self) -> Result<()> {
        let p = self.table.properties();
        // Where the records end in the file: the last one walked, or the last one by offset.
        let mut end = self.next_offset;
        if let Some(spans) = &mut self.spans {
            spans.sort_unstable();
            end = 0;
            for &(offset, len) in spans.iter() {
                if offset != end {
                    return Err(Error::corruption(
                        self.table.file_name(),
                        offset.min(end),
                        format!(
                            "dense index places a record at {offset}, but the records before \
                             it in the file end at {end}"
                        ),
                    ));
                }
                end = offset + len;
            }
        }
        if self.count != p.num_records || end != p.data_end {
            return Err(self.corruption(
                self.table.data_end(),
                format!(
                    "dense index covers {} records ending at {}, properties say {} records ending \
                     at {}",
                    self.count, end, p.num_records, p.data_end
                ),
            ));
        }
        Ok(())
    }
}

impl Iterator for ValueIndexIter {
    type Item = Result<IndexEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.advance() {
            Ok(Some(entry)) => Some(Ok(entry)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                self.dense = None;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for ValueIndexIter {}
