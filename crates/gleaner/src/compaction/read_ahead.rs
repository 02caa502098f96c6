//! Reading the records a compaction relocates, with read-ahead per value table: a compaction
//! reads its entries in key order, so when it relocates many values of key-sorted value
//! tables, the records it asks for of one table come in file order, with gaps where records
//! died. One read per record costs a device round trip each (and, with direct I/O, a whole
//! aligned block for a short record); a window that grows while the reads of a table go
//! forward turns them into a few large sequential reads.

use crate::error::Result;
use crate::io::IoClass;
use crate::value::{OwnedRecord, ValueHandle, decode_record};
use crate::value::reader::ValueTable;

/// The first window of a table; it doubles up to [`MAX_WINDOW`] while reads go forward.
const FIRST_WINDOW: u64 = 32 << 10;
/// The largest window.
pub const MAX_WINDOW: u64 = 256 << 10;
/// Most tables read ahead at once (the least recently used window goes): a compaction's key
/// range may interleave the runs of dozens of value tables. At most `MAX_TABLES × MAX_WINDOW` (16 MiB) per
/// compaction.
pub const MAX_TABLES: usize = 64;

/// One table's window: the bytes read ahead, and where the last record read ended.
#[derive(Debug)]
struct Window {
    table: u64,
    start: u64,
    buf: Vec<u8>,
    last_end: u64,
    size: u64,
    used: u64,
}

/// Read-ahead windows over the value tables one compaction relocates from.
#[derive(Debug, Default)]
pub struct RecordReadAhead {
    windows: Vec<Window>,
    clock: u64,
    /// Reads made (windows and single records).
    pub reads: u64,
}

impl RecordReadAhead {
    /// The record at `at` in `table` (file `number`), verified as
    /// [`ValueTable::read_record`] verifies it.
    ///
    /// Errors: as [`ValueTable::read_record`].
    pub fn read(&mut self, table: &ValueTable, number: u64, at: ValueHandle) -> Result<OwnedRecord> {
        self.clock += 1;
        let class = IoClass::CompactionRead;
        let end = at.offset.saturating_add(at.len);
        let i = match self.windows.iter().position(|w| w.table == number) {
            Some(i) => i,
            None => {
                if self.windows.len() >= MAX_TABLES {
                    let lru = (0..self.windows.len())
                        .min_by_key(|&i| self.windows[i].used)
                        .expect("a window");
                    self.windows.swap_remove(lru);
                }
                self.windows.push(Window {
                    table: number,
                    start: 0,
                    buf: Vec::new(),
                    last_end: u64::MAX,
                    size: 0,
                    used: 0,
                });
                self.windows.len() - 1
            }
        };
        let w = &mut self.windows[i];
        w.used = self.clock;
        let inside = at.offset >= w.start && end <= w.start + w.buf.len() as u64;
        if !inside {
            // The first read of a table, or forward from the last record within a window's
            // reach: read ahead (a relocating compaction asks for many records of a table).
            // Otherwise (a jump back or far ahead) one record, exactly as `read_record` reads
            // it; its checks apply to every location read on its own.
            let forward = w.last_end == u64::MAX
                || (at.offset >= w.last_end
                    && at.offset - w.last_end <= w.size.max(FIRST_WINDOW));
            if !forward || end > table.data_end() {
                w.last_end = end;
                w.size = 0;
                w.buf.clear();
                self.reads += 1;
                return table.read_record(at.offset, at.len, class);
            }
            w.size = (w.size * 2).clamp(FIRST_WINDOW, MAX_WINDOW);
            let n = w.size.min(table.data_end() - at.offset).max(at.len);
            w.buf = table.read_range(at.offset, n, class)?;
            w.start = at.offset;
            self.reads += 1;
        }
        w.last_end = end;
        let from = (at.offset - w.start) as usize;
        let bytes = &w.buf[from..from + at.len as usize];
        Ok(decode_record(bytes, table.file_name(), at.offset)?.into())
    }
}
