//! Running counters of engine activity, reported by `stats()`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters, updated with relaxed atomics (they are statistics, not synchronization).
#[derive(Debug, Default)]
pub struct Counters {
    /// Write batches committed.
    pub batches: AtomicU64,
    /// Group commits (WAL records written by a leader).
    pub write_groups: AtomicU64,
    /// Group commits of user batches: not the engine's own conditional writes (GC write-backs,
    /// handle updates on read). GC pacing watches these; not reported.
    pub user_write_groups: AtomicU64,
    /// Synced group commits.
    pub wal_syncs: AtomicU64,
    /// Bytes of keys and values in committed batches.
    pub user_bytes_written: AtomicU64,
    /// Point reads served.
    pub gets: AtomicU64,
    /// Conditional writes (`Db::write_if_unchanged`) checked.
    pub conditional_writes: AtomicU64,
    /// Of those, the ones that found a key changed and wrote nothing.
    pub conditional_write_conflicts: AtomicU64,
    /// Iterators opened.
    pub iterators: AtomicU64,
    /// Point reads that found a value handle.
    pub gets_separated: AtomicU64,
    /// Of those, reads whose handle named a collected table.
    pub gets_via_inheritance: AtomicU64,
    /// Expired versions point reads and iterators found and skipped.
    /// Shared with the iterators, which count as they go.
    pub expired_skipped: std::sync::Arc<AtomicU64>,
    /// Handle updates on read (aliases) written.
    pub handle_updates_written: AtomicU64,
    /// Handle updates on read skipped: the key's newest version was no longer the one read.
    pub handle_updates_skipped: AtomicU64,
    /// Handle updates on read dropped: the queue was full, or there was no room to write.
    pub handle_updates_dropped: AtomicU64,
    /// Memtable flushes.
    pub flushes: AtomicU64,
    /// Bytes written by flushes.
    pub flush_bytes: AtomicU64,
    /// Compactions that rewrote tables.
    pub compactions: AtomicU64,
    /// Compactions that moved a table without rewriting it.
    pub trivial_moves: AtomicU64,
    /// Compactions that rewrote a key table for its stale handles.
    pub stale_handle_compactions: AtomicU64,
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
    /// Entries dropped by flushes and compactions because a range tombstone covers them.
    pub dropped_range_deleted: AtomicU64,
    /// Entries dropped by flushes and compactions because they had expired for every reader.
    pub dropped_expired: AtomicU64,
    /// Key tables compactions dropped whole, without reading them, under range tombstones.
    pub tables_dropped_whole: AtomicU64,
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
    /// Of `stop_micros`, those in which L0 was at `l0_stop_trigger` (whether or not the
    /// immutable memtables were also at their limit).
    pub stop_l0_micros: AtomicU64,
    /// Obsolete key tables deleted.
    pub tables_deleted: AtomicU64,
    /// Dropped value handles whose record could not be placed (should stay 0).
    pub unresolved_drops: AtomicU64,
    /// Dropped value handles whose record a GC job had already reclaimed.
    pub drops_reclaimed_early: AtomicU64,
    /// Dropped handles whose record was in a retired table.
    pub drops_into_retired: AtomicU64,
    /// Stale value handles compactions pointed at the table now holding their record.
    pub handles_rewritten: AtomicU64,
    /// Drop keys flushes and compactions wrote to drop files.
    pub drop_keys_written: AtomicU64,
    /// Bytes of those drop files.
    pub drop_key_bytes_written: AtomicU64,
    /// Drop blocks that found no live table (every record of theirs already gone).
    pub drop_blocks_unplaced: AtomicU64,
    /// Value tables deleted because every record became garbage (no GC job needed).
    pub value_tables_freed: AtomicU64,
    /// GC jobs that failed (their victims stay as they were).
    pub gc_errors: AtomicU64,
    /// Compactions that failed before their manifest edit.
    pub compaction_errors: AtomicU64,
    /// GC jobs committed.
    pub gc_jobs: AtomicU64,
    /// Value tables collected.
    pub gc_victims: AtomicU64,
    /// Records GC read.
    pub gc_records_read: AtomicU64,
    /// Records GC found to be garbage.
    pub gc_records_dropped: AtomicU64,
    /// Of those, records of versions expired for every reader.
    pub gc_records_expired: AtomicU64,
    /// Records GC copied to new tables.
    pub gc_records_written: AtomicU64,
    /// Bytes of records GC read.
    pub gc_bytes_read: AtomicU64,
    /// Writes delayed by space-aware throttling.
    pub space_delays: AtomicU64,
    /// Microseconds writers spent delayed or stopped by space-aware throttling.
    pub space_wait_micros: AtomicU64,
    /// Whole-tree compactions run by stopped writers to surface hidden garbage.
    pub space_compactions: AtomicU64,
    /// Compactions the GC policy forced (`marked_for_compaction`).
    pub forced_compactions: AtomicU64,
    /// Values compactions relocated out of old value tables (the kept-entry hook's `Relocate`).
    pub relocated_values: AtomicU64,
    /// Values relocation left in place for aliases naming their records.
    pub relocations_kept_for_aliases: AtomicU64,
    /// Values relocation left in place because a GC job held their table.
    pub relocations_kept_for_gc: AtomicU64,
    /// Aliases flushes and compactions dropped (a policy that writes none).
    pub aliases_dropped: AtomicU64,
    /// Bytes of the old records of those.
    pub relocated_bytes: AtomicU64,
    /// Handles a write-back GC job wrote back into the index tree.
    pub gc_written_back: AtomicU64,
    /// Retired value tables released (deleted once unreferenced).
    pub value_tables_released: AtomicU64,
    /// Memtables sealed early so the retired tables their write-backs held could be released.
    pub memtables_sealed_for_release: AtomicU64,
    /// Value tables deleted because every record had expired for every reader.
    pub value_tables_expired: AtomicU64,
    /// Write-backs skipped because a user write to the key got there first.
    pub gc_write_back_conflicts: AtomicU64,
    /// GC jobs run again because they met two copies of one record their check could not tell
    /// apart.
    pub gc_twin_restarts: AtomicU64,
    /// Bytes of value tables GC wrote, per value class (the router's numbering).
    pub gc_bytes_by_class: [AtomicU64; crate::gc::MAX_VALUE_CLASSES],
    /// Bytes of value tables GC wrote.
    pub gc_bytes_written: AtomicU64,
    /// Microseconds GC spent reading victims.
    pub gc_read_micros: AtomicU64,
    /// Microseconds GC spent checking validity.
    pub gc_lookup_micros: AtomicU64,
    /// Microseconds background GC jobs waited, yielding to reads (`gc_read_yield_rate`).
    pub gc_paced_micros: AtomicU64,
    /// Microseconds GC spent writing outputs.
    pub gc_write_micros: AtomicU64,
    /// Microseconds GC jobs ran, from their claim to their commit (wall clock, every part).
    pub gc_job_micros: AtomicU64,
    /// Of those, microseconds jobs waited for compactions running at their claim to end.
    pub gc_compaction_wait_micros: AtomicU64,
    /// Point reads of keys the hot partition holds (partitioned trees).
    pub hot_gets: AtomicU64,
    /// Point reads of keys the cold partition holds.
    pub cold_gets: AtomicU64,
    /// Moves of key ranges between the partitions of the index tree.
    pub partition_moves: AtomicU64,
    /// Entries (versions and tombstones) those moved into the hot partition.
    pub entries_moved_to_hot: AtomicU64,
    /// Entries those moved into the cold partition.
    pub entries_moved_to_cold: AtomicU64,
    /// Bytes of key tables those wrote.
    pub partition_move_bytes: AtomicU64,
    /// Microseconds moves spent writing, flushes paused.
    pub partition_move_micros: AtomicU64,
    /// Microseconds moves waited for compactions and a flush to drain.
    pub partition_move_wait_micros: AtomicU64,
    /// WAL records replayed at open.
    pub recovered_records: AtomicU64,
    /// WAL bytes dropped at open (torn tail or skipped damage).
    pub recovered_dropped_bytes: AtomicU64,
    /// WAL records dropped at open because a value of theirs, or of one logged before, was
    /// torn in its value segment.
    pub recovered_torn_writes: AtomicU64,
    /// WAL records dropped at open because an earlier log lost writes at its unsynced tail.
    pub recovered_lost_log_records: AtomicU64,
    /// Value segments a crash left open, sealed at open.
    pub recovered_segments: AtomicU64,
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
