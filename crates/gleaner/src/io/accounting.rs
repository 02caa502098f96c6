//! Byte accounting per I/O class: every read and write Gleaner issues is counted here, so the
//! harness can report what the papers report (GC read bytes, compaction write bytes, ...).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::{RandomAccessFile, WritableFile};
use crate::error::Result;

/// Why an I/O happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoClass {
    /// Write-ahead log appends and recovery reads.
    Wal,
    /// Key tables written by memtable flushes.
    Flush,
    /// Reads of compaction inputs.
    CompactionRead,
    /// Key tables written by compaction.
    CompactionWrite,
    /// Reads serving `get` and iterators.
    UserRead,
    /// Manifest, CURRENT and OPTIONS reads and writes.
    Manifest,
    /// Reads of value-table records (values) by garbage collection.
    GcRead,
    /// Reads of value-table dense indexes by garbage collection (a lazy read's first pass).
    GcIndexRead,
    /// Index-tree reads by garbage collection's validity checks.
    GcLookup,
    /// Value tables written by garbage collection.
    GcWrite,
    /// Value segments: values appended as they are written (`separate_at=write`), and the
    /// indexes their flush appends when it seals them.
    Segment,
    /// Anything else (verification by `gleaner check`, table dumps).
    Other,
}

impl IoClass {
    /// Every class, in the order the counters are reported.
    pub const ALL: [IoClass; 12] = [
        IoClass::Wal,
        IoClass::Flush,
        IoClass::CompactionRead,
        IoClass::CompactionWrite,
        IoClass::UserRead,
        IoClass::Manifest,
        IoClass::GcRead,
        IoClass::GcIndexRead,
        IoClass::GcLookup,
        IoClass::GcWrite,
        IoClass::Segment,
        IoClass::Other,
    ];

    /// Stable name used in stats output.
    pub fn name(self) -> &'static str {
        match self {
            IoClass::Wal => "wal",
            IoClass::Flush => "flush",
            IoClass::CompactionRead => "compaction_read",
            IoClass::CompactionWrite => "compaction_write",
            IoClass::UserRead => "user_read",
            IoClass::Manifest => "manifest",
            IoClass::GcRead => "gc_read",
            IoClass::GcIndexRead => "gc_index_read",
            IoClass::GcLookup => "gc_lookup",
            IoClass::GcWrite => "gc_write",
            IoClass::Segment => "segment",
            IoClass::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Live counters shared by every file of one database.
#[derive(Debug, Default)]
pub struct IoStats {
    read_bytes: [AtomicU64; IoClass::ALL.len()],
    write_bytes: [AtomicU64; IoClass::ALL.len()],
    read_ops: [AtomicU64; IoClass::ALL.len()],
    write_ops: [AtomicU64; IoClass::ALL.len()],
}

/// A snapshot of the counters of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounters {
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written (appended).
    pub write_bytes: u64,
    /// Read calls.
    pub read_ops: u64,
    /// Append calls.
    pub write_ops: u64,
}

impl IoStats {
    /// Counts a read of `n` bytes.
    pub fn record_read(&self, class: IoClass, n: u64) {
        self.read_bytes[class.index()].fetch_add(n, Ordering::Relaxed);
        self.read_ops[class.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a write of `n` bytes.
    pub fn record_write(&self, class: IoClass, n: u64) {
        self.write_bytes[class.index()].fetch_add(n, Ordering::Relaxed);
        self.write_ops[class.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counters of one class.
    pub fn get(&self, class: IoClass) -> IoCounters {
        let i = class.index();
        IoCounters {
            read_bytes: self.read_bytes[i].load(Ordering::Relaxed),
            write_bytes: self.write_bytes[i].load(Ordering::Relaxed),
            read_ops: self.read_ops[i].load(Ordering::Relaxed),
            write_ops: self.write_ops[i].load(Ordering::Relaxed),
        }
    }
}

/// A readable file whose reads are counted; the class is chosen per read because one key table
/// serves user reads and compaction reads alike.
#[derive(Debug, Clone)]
pub struct CountedReader {
    file: Arc<dyn RandomAccessFile>,
    stats: Arc<IoStats>,
}

impl CountedReader {
    /// Wraps `file`.
    pub fn new(file: Arc<dyn RandomAccessFile>, stats: Arc<IoStats>) -> Self {
        CountedReader { file, stats }
    }

    /// Reads exactly `buf.len()` bytes at `offset`, counted under `class`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64, class: IoClass) -> Result<()> {
        self.file.read_exact_at(buf, offset)?;
        self.stats.record_read(class, buf.len() as u64);
        Ok(())
    }

    /// Reads `len` bytes at `offset` into a new buffer.
    pub fn read_vec(&self, offset: u64, len: usize, class: IoClass) -> Result<Vec<u8>> {
        let buf = self.file.read_vec_at(offset, len)?;
        self.stats.record_read(class, len as u64);
        Ok(buf)
    }

    /// Size of the file.
    pub fn size(&self) -> Result<u64> {
        self.file.size()
    }
}

/// A writable file whose appends are counted under a fixed class.
#[derive(Debug)]
pub struct CountedWriter {
    file: Box<dyn WritableFile>,
    class: IoClass,
    stats: Arc<IoStats>,
}

impl CountedWriter {
    /// Wraps `file`; every append counts under `class`.
    pub fn new(file: Box<dyn WritableFile>, class: IoClass, stats: Arc<IoStats>) -> Self {
        CountedWriter { file, class, stats }
    }
}

impl WritableFile for CountedWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.append(data)?;
        self.stats.record_write(self.class, data.len() as u64);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    fn len(&self) -> u64 {
        self.file.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_counted_separately() {
        let stats = IoStats::default();
        stats.record_read(IoClass::UserRead, 100);
        stats.record_read(IoClass::UserRead, 50);
        stats.record_write(IoClass::Wal, 7);
        assert_eq!(stats.get(IoClass::UserRead).read_bytes, 150);
        assert_eq!(stats.get(IoClass::UserRead).read_ops, 2);
        assert_eq!(stats.get(IoClass::Wal).write_bytes, 7);
        assert_eq!(stats.get(IoClass::CompactionRead), IoCounters::default());
        for (i, c) in IoClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
    }
}
