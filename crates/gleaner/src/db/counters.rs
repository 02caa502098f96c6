//! Running counters of engine activity, reported by `stats()`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters, updated with relaxed atomics (they are statistics, not synchronization).
#[derive(Debug, Default)]
pub struct Counters {
    /// Write batches committed.
    pub batches: AtomicU64,
    /// Group commits (WAL records written by a leader).
    pub write_groups: AtomicU64,
    /// Synced group commits.
    pub wal_syncs: AtomicU64,
    /// Bytes of keys and values in committed batches.
    pub user_bytes_written: AtomicU64,
    /// Point reads served.
    pub gets: AtomicU64,
    /// Memtable flushes.
    pub flushes: AtomicU64,
    /// Bytes written by flushes.
    pub flush_bytes: AtomicU64,
    /// Compactions that rewrote tables.
    pub compactions: AtomicU64,
    /// Compactions that moved a table without rewriting it.
    pub trivial_moves: AtomicU64,
    /// Manual compactions (from `compact_range`).
    pub manual_compactions: AtomicU64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: AtomicU64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: AtomicU64,
    /// Entries dropped as shadowed by flushes and compactions.
    pub dropped_shadowed: AtomicU64,
    /// Tombstones dropped by compactions.
    pub dropped_tombstones: AtomicU64,
    /// Microseconds spent in flushes.
    pub flush_micros: AtomicU64,
    /// Microseconds spent in compactions.
    pub compaction_micros: AtomicU64,
    /// Write groups delayed by the L0 slowdown trigger.
    pub slowdown_count: AtomicU64,
    /// Microseconds of those delays.
    pub slowdown_micros: AtomicU64,
    /// Times writes stopped (immutable memtables or L0 at their stop limits).
    pub stop_count: AtomicU64,
    /// Microseconds writes were stopped.
    pub stop_micros: AtomicU64,
    /// Obsolete key tables deleted.
    pub tables_deleted: AtomicU64,
    /// WAL records replayed at open.
    pub recovered_records: AtomicU64,
    /// WAL bytes dropped at open (torn tail or skipped damage).
    pub recovered_dropped_bytes: AtomicU64,
}

impl Counters {
    /// Adds `n` to a counter.
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
