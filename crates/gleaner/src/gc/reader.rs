//! Reading victims for a full-read GC job: every record of a value table in key order, in
//! chunks of consecutive records (the dense index says where records start and end, so each
//! chunk is one read of whole records). A value segment's records lie in write order: a chunk
//! of its index entries is read in file order, a read per stretch of consecutive records.

use std::collections::VecDeque;
use std::sync::Arc;

use super::job::adjacent_runs;
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

    /// Reads the next chunk of records into `ready`.
    fn fill(&mut self) -> Result<()> {
        if self.table.in_write_order() {
            return self.fill_scattered();
        }
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
            let r = next_named(&mut records, &e, self.table.file_name())?;
            self.ready.push_back(VictimRecord {
                offset: e.offset,
                len: e.len,
                record: r,
                expiry: e.expiry,
            });
        }
        Ok(())
    }

    /// Reads the next records of a value segment (records in write order) into `ready`, in key
    /// order: index entries worth up to a chunk of bytes, read in file order with one read per
    /// stretch of records that follow each other in the file.
    fn fill_scattered(&mut self) -> Result<()> {
        let mut entries = Vec::new();
        let mut bytes = 0;
        while bytes < GC_READ_CHUNK {
            let Some(e) = self.next_entry()? else { break };
            bytes += e.len;
            entries.push(e);
        }
        let mut by_offset: Vec<usize> = (0..entries.len()).collect();
        by_offset.sort_unstable_by_key(|&i| entries[i].offset);
        let mut records: Vec<Option<OwnedRecord>> = vec![None; entries.len()];
        // Stretches of records that follow each other exactly (a full read skips nothing).
        for stretch in adjacent_runs(&by_offset, 0, |i| &entries[i]) {
            let first = &entries[stretch[0]];
            let last = &entries[stretch[stretch.len() - 1]];
            let len = last.offset + last.len - first.offset;
            let buf = self.table.read_range(first.offset, len, IoClass::GcRead)?;
            self.bytes_read += len;
            let mut walk = RecordIter::new(&buf, first.offset, self.table.file_name());
            for &i in stretch {
                records[i] = Some(next_named(&mut walk, &entries[i], self.table.file_name())?);
            }
        }
        for (e, r) in entries.into_iter().zip(records) {
            self.ready.push_back(VictimRecord {
                offset: e.offset,
                len: e.len,
                record: r.expect("every entry's record was read"),
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

/// The next record of `walk`, which must be the one index entry `e` names, where it says.
fn next_named(walk: &mut RecordIter<'_>, e: &IndexEntry, file: &str) -> Result<OwnedRecord> {
    let (offset, r) = walk
        .next()
        .ok_or_else(|| Error::corruption(file, e.offset, "record missing from its read"))??;
    if offset != e.offset || r.key != e.user_key.as_slice() || r.seq != e.seq {
        return Err(Error::corruption(
            file,
            offset,
            "record does not match its dense-index entry",
        ));
    }
    Ok(r.into())
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::table::test_util::MemFile;
    use crate::value::ValueTableBuilderOptions;
    use crate::value::segment::SegmentWriter;

    #[test]
    fn a_segment_is_read_in_key_order_over_several_chunks() {
        let mut rng = StdRng::seed_from_u64(5);
        let file = MemFile::default();
        let mut w = SegmentWriter::new(Box::new(file.writer())).unwrap();
        let mut want = Vec::new();
        for seq in 1..=700u64 {
            let key = format!("k{:04}", rng.random_range(0..300)).into_bytes();
            let value = vec![seq as u8; rng.random_range(0..12_000)];
            let (offset, len) = w.append(&key, seq, &value, None).unwrap();
            want.push((key, seq, value, offset, len));
        }
        let region = w.len();
        assert!(region > 3 * GC_READ_CHUNK, "several chunks");
        let done = w.seal(&ValueTableBuilderOptions::default()).unwrap();
        let table = Arc::new(
            ValueTable::open(file.reader(), "9.vst".into(), 9, done.file_size, None, IoClass::Other)
                .unwrap(),
        );
        want.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut reader = VictimReader::new(table);
        let mut got = Vec::new();
        while let Some(r) = reader.next_record_at().unwrap() {
            got.push((r.record.key, r.record.seq, r.record.value.to_vec(), r.offset, r.len));
        }
        assert!(got == want, "every record once, in internal-key order");
        assert_eq!(reader.bytes_read, region, "each record read once");
    }
}
