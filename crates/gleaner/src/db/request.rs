//! Per-call options of reads and writes.

use super::snapshot::Snapshot;

/// Options of one write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Wait until the write is durable (the WAL is fsynced) before returning. Default false:
    /// the write survives a process crash but may be lost in a power failure, together with
    /// every later write (recovery always yields a prefix of the acknowledged writes).
    pub sync: bool,
}

impl WriteOptions {
    /// Options with `sync` set.
    pub fn sync() -> Self {
        WriteOptions { sync: true }
    }
}

/// Options of one read or iterator.
#[derive(Debug, Clone)]
pub struct ReadOptions<'a> {
    /// Read at this snapshot instead of the latest state. Default: latest.
    pub snapshot: Option<&'a Snapshot>,
    /// Keep blocks read from disk in the block cache. Default true; long scans may turn it off
    /// so they do not evict hot blocks.
    pub fill_cache: bool,
    /// Iterators only: the smallest key (inclusive) they visit. Default: unbounded.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators only: the key (exclusive) at which they stop. Default: unbounded.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators only: read separated values only when
    /// [`DbIterator::fetch_value`](super::DbIterator::fetch_value) asks (for key-only scans).
    /// Default false: values are read as the iterator lands on them.
    pub lazy_values: bool,
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            lower_bound: None,
            upper_bound: None,
            lazy_values: false,
        }
    }
}

impl<'a> ReadOptions<'a> {
    /// Reads at `snapshot`.
    #[must_use]
    pub fn at(mut self, snapshot: &'a Snapshot) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Iterates over keys in `[lower, upper)`.
    #[must_use]
    pub fn bounds(mut self, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Self {
        self.lower_bound = lower;
        self.upper_bound = upper;
        self
    }
}
