//! Reading victims for a full-read GC job: every record of a value table in key order, in
//! chunks of consecutive records (the dense index says where records start and end, so each
//! chunk is one read of whole records).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::IoClass;
use crate::value::{IndexEntry, OwnedRecord, RecordIter, ValueIndexIter, ValueTable};

/// Bytes of records one read fetches (a single larger record is read alone).
pub const GC_READ_CHUNK: u64 = 1 << 20;

/// Streams the records of one victim in internal-key order.
/// A record of a victim as [`VictimReader::next_record_at`] returns it.
#[derive(Debug)]
pub struct VictimRecord {
    /// Where the record starts in its table.
    pub offset: u64,
    /// The record's whole length.
    pub len: u64,
    /// The record.
    pub record: OwnedRecord,
    /// Its version's expiry (from the dense index), if it has one.
    pub expiry: Option<u64>,
}

pub struct VictimReader {
    table: Arc<ValueTable>,
    index: ValueIndexIter,
    peeked: Option<IndexEntry>,
    /// Records read but not yet returned.
    ready: VecDeque<VictimRecord>,
    /// Bytes of records read so far.
    pub bytes_read: u64,
}

impl VictimReader {
    /// A reader over `table` (records counted as GC reads, the dense index as GC index
    /// reads).
    pub fn new(table: Arc<ValueTable>) -> Self {
        let index = table.index_iter(IoClass::GcIndexRead);
        VictimReader {
            table,
            index,
            peeked: None,
            ready: VecDeque::new(),
            bytes_read: 0,
        }
    }

    /// Stored bytes of the dense index blocks walked so far.
    pub fn index_bytes_read(&self) -> u64 {
        self.index.block_bytes()
    }

    /// The table being read.
    pub fn table(&self) -> &Arc<ValueTable> {
        &self.table
    }

    fn next_entry(&mut self) -> Result<Option<IndexEntry>> {
        if let Some(e) = self.peeked.take() {
            return Ok(Some(e));
        }
        self.index.next().transpose()
    }

    /// Reads the next chunk of consecutive records into `ready`.
    fn fill(&mut self) -> Result<()> {
        let Some(first) = self.next_entry()? else {
            return Ok(());
        };
        let start = first.offset;
        let mut end = first.offset + first.len;
        let mut entries = vec![first];
        while end - start < GC_READ_CHUNK {
            match self.next_entry()? {
                Some(e) if e.offset == end => {
                    end += e.len;
                    entries.push(e);
                }
                Some(e) => {
                    return Err(Error::corruption(
                        self.table.file_name(),
                        e.offset,
                        format!("records are not contiguous: expected one at offset {end}"),
                    ));
                }
                None => break,
            }
        }
        let buf = self.table.read_range(start, end - start, IoClass::GcRead)?;
        self.bytes_read += end - start;
        let mut records = RecordIter::new(&buf, start, self.table.file_name());
        for e in entries {
            let (offset, r) = records.next().ok_or_else(|| {
                Error::corruption(
                    self.table.file_name(),
                    e.offset,
                    "record missing from its chunk",
                )
            })??;
            if offset != e.offset || r.key != e.user_key.as_slice() || r.seq != e.seq {
                return Err(Error::corruption(
                    self.table.file_name(),
                    offset,
                    "record does not match its dense-index entry",
                ));
            }
            self.ready.push_back(VictimRecord {
                offset: e.offset,
                len: e.len,
                record: r.into(),
                expiry: e.expiry,
            });
        }
        Ok(())
    }

    /// The next record, or `None` after the last.
    pub fn next_record(&mut self) -> Result<Option<OwnedRecord>> {
        Ok(self.next_record_at()?.map(|r| r.record))
    }

    /// The next record with its offset and length in the table and its version's expiry (from
    /// the dense index), or `None` after the last.
    pub fn next_record_at(&mut self) -> Result<Option<VictimRecord>> {
        if self.ready.is_empty() {
            self.fill()?;
        }
        Ok(self.ready.pop_front())
    }
}
