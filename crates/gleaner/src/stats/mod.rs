//! `stats()`: a serializable snapshot of the engine's shape and activity. Key names are stable:
//! benchmark tooling reads them (see docs/stats.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::io::IoCounters;

/// One level of the index tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelStats {
    /// Level number (0 = L0).
    pub level: usize,
    /// Key tables in the level.
    pub files: usize,
    /// Sorted runs in the level: one per table in L0; under leveled compaction at most one in
    /// every deeper level, under tiered compaction several (docs/architecture.md, "Sorted
    /// runs").
    #[serde(default)]
    pub runs: usize,
    /// Bytes of those tables.
    pub bytes: u64,
    /// Entries of those tables (every version and tombstone they hold, as their properties
    /// count them): with [`DbStats::memtable_entries`], an upper estimate of the number of keys.
    #[serde(default)]
    pub entries: u64,
    /// Compaction score (size ÷ target; L0: tables ÷ trigger). ≥ 1 means due.
    pub score: f64,
}

/// Write stalls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallStats {
    /// Write groups delayed by the L0 slowdown trigger.
    pub slowdown_count: u64,
    /// Microseconds of those delays.
    pub slowdown_micros: u64,
    /// Waits while writes were stopped (immutable memtables or L0 at their limits).
    pub stop_count: u64,
    /// Microseconds writes were stopped.
    pub stop_micros: u64,
    /// Of `stop_micros`, those in which L0 was at `l0_stop_trigger`; the rest waited only for
    /// immutable memtables to be flushed (`max_immutable_memtables`). Tells a compaction
    /// backlog from a flush backlog.
    #[serde(default)]
    pub stop_l0_micros: u64,
    /// Writes delayed by space-aware throttling (usage between the low and high budget).
    #[serde(default)]
    pub space_delays: u64,
    /// Microseconds writers spent delayed or stopped by space-aware throttling.
    #[serde(default)]
    pub space_wait_micros: u64,
    /// Whole-tree compactions stopped writers ran to turn hidden garbage (overwritten versions
    /// still in the index tree) into garbage GC can collect.
    #[serde(default)]
    pub space_compactions: u64,
}

/// Flushes and compactions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionStats {
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Microseconds spent flushing.
    pub flush_micros: u64,
    /// Compactions that rewrote tables (manual ones included).
    pub compactions: u64,
    /// Of those, manual ones.
    pub manual_compactions: u64,
    /// Tables moved down a level without rewriting.
    pub trivial_moves: u64,
    /// Of the compactions, those that rewrote a key table because most of its handles named
    /// value tables GC had collected since it was written (`compaction::stale_handles`).
    #[serde(default)]
    pub stale_handle_compactions: u64,
    /// Bytes read by compactions.
    pub bytes_read: u64,
    /// Bytes written by compactions.
    pub bytes_written: u64,
    /// Microseconds spent compacting.
    pub micros: u64,
    /// Entries dropped because a newer version hides them from every reader.
    pub dropped_shadowed: u64,
    /// Tombstones dropped at the bottom of the tree.
    pub dropped_tombstones: u64,
    /// Entries dropped by flushes and compactions because a range tombstone covers them (and
    /// no snapshot reads them).
    #[serde(default)]
    pub dropped_range_deleted: u64,
    /// Entries dropped by flushes and compactions because they had expired for every reader
    /// that could read them ([`crate::expiry`]): each became a deletion at its sequence number
    /// (or nothing, at the bottom of the tree), its separated value garbage.
    #[serde(default)]
    pub dropped_expired: u64,
    /// Key tables dropped whole, without being read, because range tombstones of the
    /// compaction cover every entry of each (their entries count in `dropped_range_deleted`,
    /// their values' garbage comes from their recorded dependence).
    #[serde(default)]
    pub tables_dropped_whole: u64,
    /// Obsolete key tables deleted from disk.
    pub tables_deleted: u64,
    /// Compactions running now.
    pub running: usize,
    /// The compaction style (option `compaction_style`): `leveled` or `tiered`.
    #[serde(default)]
    pub style: String,
    /// Compactions that failed before their manifest edit (inputs kept, retried later).
    #[serde(default)]
    pub errors: u64,
    /// The most recent such failure.
    #[serde(default)]
    pub last_error: Option<String>,
}

/// The block cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Bytes in use.
    pub usage_bytes: u64,
    /// Lookups that found the block.
    pub hits: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// Of the hits, those in the high-priority pool (handle blocks of index-decoupled key
    /// tables).
    #[serde(default)]
    pub high_priority_hits: u64,
    /// Of the misses, those for high-priority blocks.
    #[serde(default)]
    pub high_priority_misses: u64,
    /// Bytes the high-priority pool holds now.
    #[serde(default)]
    pub high_priority_usage_bytes: u64,
    /// Most bytes the high-priority pool may hold (the low-priority pool gets what it does not
    /// use).
    #[serde(default)]
    pub high_priority_capacity_bytes: u64,
    /// Key tables open in the table cache.
    pub open_tables: usize,
    /// Value tables open in the value-table cache.
    #[serde(default)]
    pub open_value_tables: usize,
    /// Table files (key and value) the two caches opened: each miss, bounded by
    /// `max_open_files` of each kind.
    #[serde(default)]
    pub table_opens: u64,
    /// Of those opens, the ones that read the table's metadata (footer, properties, indexes,
    /// filter) from the device; the others opened it again from the metadata the caches
    /// retained when they closed it.
    #[serde(default)]
    pub table_metadata_reads: u64,
    /// Bytes of metadata the two caches retain for tables they opened (at most 64 MiB each).
    #[serde(default)]
    pub retained_metadata_bytes: u64,
    /// Opens of a table file that found the process out of file descriptors (`EMFILE` or
    /// `ENFILE`) and were tried once more after the cache closed some of its idle tables (up to
    /// a quarter of its open ones): above 0, `max_open_files` is more than the process's
    /// open-file limit allows. Only table opens are retried so; other files' opens fail.
    #[serde(default)]
    pub table_opens_after_emfile: u64,
    /// The value cache's capacity (option `value_cache_share` of `block_cache_size`; the block
    /// cache figures above cover the rest).
    #[serde(default)]
    pub value_capacity_bytes: u64,
    /// Bytes the value cache holds now.
    #[serde(default)]
    pub value_usage_bytes: u64,
    /// Point reads of separated values the value cache answered.
    #[serde(default)]
    pub value_hits: u64,
    /// Point reads of separated values it did not.
    #[serde(default)]
    pub value_misses: u64,
    /// Of those misses, the ones whose value was not put in the value cache because it was
    /// thrashing: full, and answering fewer than one read in 16 (docs/architecture.md, "The
    /// value cache while it thrashes"); then one miss in 8 puts its value in.
    #[serde(default)]
    pub value_skipped_inserts: u64,
    /// Of those misses, reads of a handle naming a table GC collected that went straight to a
    /// place the value cache remembered instead of following table inheritance.
    #[serde(default)]
    pub value_place_hits: u64,
    /// The row cache's capacity (option `row_cache_size`; 0 when it is off).
    #[serde(default)]
    pub row_capacity_bytes: u64,
    /// Bytes the row cache holds now.
    #[serde(default)]
    pub row_usage_bytes: u64,
    /// Point reads of the present the row cache answered.
    #[serde(default)]
    pub row_hits: u64,
    /// Point reads of the present it did not (reads at a snapshot do not ask it).
    #[serde(default)]
    pub row_misses: u64,
    /// Of those misses, the ones whose answer was not kept because a write of a key sharing
    /// the key's slot (or a range deletion) began while the read ran; with
    /// `prepopulate_row_cache`, also writes' own values left out because a later write of
    /// the slot began before they were put in.
    #[serde(default)]
    pub row_raced_fills: u64,
}

/// Writes and reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationStats {
    /// Write batches committed.
    pub batches: u64,
    /// Group commits (one WAL record each).
    pub write_groups: u64,
    /// Group commits that synced the WAL.
    pub wal_syncs: u64,
    /// Bytes of keys and values written by users (the denominator of write amplification).
    pub user_bytes_written: u64,
    /// Point reads (`get`, `get_entry`, `get_expiry`).
    pub gets: u64,
    /// Iterators opened (scans and ranges).
    #[serde(default)]
    pub iterators: u64,
    /// Point reads that found a separated value (a value handle) and read it (`get_expiry`
    /// reads none).
    #[serde(default)]
    pub gets_separated: u64,
    /// Of those, reads whose handle named a table GC had collected, so that the record was
    /// looked up in the table inheritance leads to (an extra dense-index lookup) until a
    /// compaction rewrites the handle.
    #[serde(default)]
    pub gets_via_inheritance: u64,
    /// Expired versions ([`crate::expiry`]) that point reads and iterators found and read as
    /// absent: the newest version of a key they reached had expired at the read's time.
    #[serde(default)]
    pub expired_skipped: u64,
    /// Handle updates on read written (aliases naming the record's current
    /// place, so the key's next read needs no search).
    #[serde(default)]
    pub handle_updates_written: u64,
    /// Handle updates on read skipped because the key's newest version was no
    /// longer the one the read found (a newer write won).
    #[serde(default)]
    pub handle_updates_skipped: u64,
    /// Handle updates on read dropped (the queue was full, or writing would
    /// have had to wait).
    #[serde(default)]
    pub handle_updates_dropped: u64,
    /// Separated values scans found already read by their look-ahead (`scan_prefetch_depth`).
    #[serde(default)]
    pub scan_values_prefetched: u64,
    /// Writes in the write queue now: the group being written and the writes waiting behind it
    /// (the engine's own included: GC write-backs, handle updates). A gauge.
    #[serde(default)]
    pub writes_queued: usize,
    /// Conditional writes ([`Db::write_if_unchanged`](crate::Db::write_if_unchanged)) checked,
    /// whatever the outcome.
    #[serde(default)]
    pub conditional_writes: u64,
    /// Of those, the ones that found a key changed since their snapshot and wrote nothing.
    #[serde(default)]
    pub conditional_write_conflicts: u64,
}

/// Figures from the last open's recovery.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStats {
    /// WAL records replayed.
    pub wal_records: u64,
    /// WAL bytes dropped (torn tail, or damage skipped under `skip_any_corrupted_records`).
    pub wal_dropped_bytes: u64,
    /// WAL records dropped because a value of theirs, or of a record before, was torn in its
    /// value segment (`separate_at=write`).
    pub torn_writes: u64,
    /// WAL records dropped because an earlier log lost writes a power loss took before they
    /// were synced (a memtable switch does not sync the log it closes): everything logged
    /// after such a loss is dropped, so recovery keeps a prefix of the writes.
    pub lost_log_records: u64,
    /// Value segments a crash left open, sealed.
    pub segments_sealed: u64,
}

/// The partitions of the index tree (option `partitioning`; all zero without).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStats {
    /// Whether the index tree is partitioned.
    pub partitioned: bool,
    /// Key ranges routed to the hot partition.
    pub hot_ranges: usize,
    /// Key tables of the cold partition.
    pub cold_tables: usize,
    /// Bytes of those.
    pub cold_bytes: u64,
    /// Key tables of the hot partition.
    pub hot_tables: usize,
    /// Bytes of those.
    pub hot_bytes: u64,
    /// Moves of key ranges between the partitions, since the open.
    pub moves: u64,
    /// Entries (versions and tombstones) moved into the hot partition, since the open.
    pub entries_moved_to_hot: u64,
    /// Entries moved into the cold partition, since the open.
    pub entries_moved_to_cold: u64,
    /// Bytes of key tables the moves wrote, since the open.
    pub move_bytes: u64,
    /// Microseconds the moves spent reading and writing key tables and installing them, since
    /// the open: the time flushes waited for them.
    pub move_micros: u64,
    /// Microseconds the moves waited, before that, for another move or a manual compaction,
    /// for the compactions touching their ranges and for a running flush, since the open.
    pub move_wait_micros: u64,
    /// Point reads of keys of the hot partition, since the open.
    pub hot_gets: u64,
    /// Point reads of keys of the cold partition, since the open.
    pub cold_gets: u64,
    /// Estimated bytes of the hotness detector's prefix trie (at most `dpkv_trie_bytes`).
    pub trie_bytes: u64,
    /// Nodes of the trie.
    pub trie_nodes: u64,
    /// Bytes of the per-key sketch gating it.
    pub sketch_bytes: u64,
    /// Hot prefixes the last tick found.
    pub hot_prefixes: u64,
    /// Accesses recorded since the open (reads, writes and seeks of keys).
    pub accesses: u64,
    /// Of those, the ones that passed the per-key gate into the trie.
    pub trie_accesses: u64,
    /// Accesses not recorded because another thread held the statistics.
    pub accesses_skipped: u64,
    /// Detector ticks since the open.
    pub ticks: u64,
    /// Ticks whose statistics could not be saved.
    pub save_errors: u64,
    /// Whether the open restored the statistics' snapshot.
    pub restored_snapshot: bool,
    /// Incremental log records the open replayed.
    pub restored_records: u64,
    /// Hotness files the open found damaged (their statistics are learned again).
    pub damaged_files: u64,
}

/// One value table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueTableStats {
    /// File number (`NNNNNN.vst`).
    pub number: u64,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Records in the table.
    pub records: u64,
    /// Bytes of those records.
    pub record_bytes: u64,
    /// Records no key-table entry references any more.
    pub garbage_records: u64,
    /// Bytes of those records.
    pub garbage_bytes: u64,
    /// Class tag.
    pub class: u32,
    /// Drop keys in the drop blocks attached to it.
    #[serde(default)]
    pub drop_keys: u64,
}

/// Value tables in total, and what space they hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ValueStats {
    /// Live value tables.
    pub tables: usize,
    /// Bytes of their files.
    pub file_bytes: u64,
    /// Bytes of their records.
    pub record_bytes: u64,
    /// Bytes of their garbage records.
    pub garbage_bytes: u64,
    /// Records in them.
    pub records: u64,
    /// Garbage records in them.
    pub garbage_records: u64,
    /// Inheritance records still needed (collected tables some key table still names).
    pub inheritance_records: usize,
    /// Handles compactions pointed at the table now holding their record.
    pub handles_rewritten: u64,
    /// Tables deleted because every record became garbage, without a GC job.
    pub tables_freed_without_gc: u64,
    /// Dropped handles whose record could not be placed (0 unless something is wrong).
    pub unresolved_drops: u64,
    /// Dropped handles of shadowed versions whose record a GC job had already reclaimed, so
    /// there was no garbage left to count.
    #[serde(default)]
    pub drops_reclaimed_early: u64,
    /// Dropped handles whose record was in a retired table (a write-back commit's; nothing to count).
    #[serde(default)]
    pub drops_into_retired: u64,
    /// Retired value tables (write-back commits): collected, still on disk for the older versions
    /// that name them.
    #[serde(default)]
    pub retired_tables: usize,
    /// Bytes of those.
    #[serde(default)]
    pub retired_bytes: u64,
    /// Retired tables released since open.
    #[serde(default)]
    pub tables_released: u64,
    /// Active memtables a GC worker sealed (and so flushed) early since open, because the
    /// write-backs in them were all that kept a retired table from release and no write had
    /// sealed them within 200 ms.
    #[serde(default)]
    pub memtables_sealed_for_release: u64,
    /// Value tables deleted whole, without a GC read, because every record's version had
    /// expired for every reader that could read it ([`crate::expiry`]; option
    /// `expiry_group_ms` groups values so that tables do).
    #[serde(default)]
    pub tables_expired: u64,
    /// Drop keys (identities of garbage records) flushes and compactions wrote to drop files
    /// (where the policy asks for them, `CompactionHooks::records_drop_keys`).
    #[serde(default)]
    pub drop_keys_written: u64,
    /// Bytes of those drop files.
    #[serde(default)]
    pub drop_key_bytes_written: u64,
    /// Drop files live value tables list blocks of.
    #[serde(default)]
    pub drop_files: usize,
    /// Per table.
    pub per_table: Vec<ValueTableStats>,
}

/// Garbage collection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcStats {
    /// The policy (option `gc_policy`; a custom policy's own name).
    pub policy: String,
    /// The policy's own files read as absent because they were damaged or unreadable (each
    /// costs the policy what it had learned; docs/format.md, "Policy file").
    pub policy_files_damaged: u64,
    /// What the policy reports of itself, by its names (`CompactionHooks::stats`): the
    /// figures only one scheme has. Empty for a policy that reports nothing.
    #[serde(default)]
    pub policy_stats: BTreeMap<String, u64>,
    /// Jobs committed.
    pub jobs: u64,
    /// Jobs that failed (their victims were left as they were).
    pub errors: u64,
    /// The most recent failure.
    pub last_error: Option<String>,
    /// Value tables collected.
    pub victims: u64,
    /// Records read from victims.
    pub records_read: u64,
    /// Records dropped as garbage.
    pub records_dropped: u64,
    /// Of those, records a key still named whose version had expired for every reader that
    /// could read it ([`crate::expiry`]): dead under every policy's oracle.
    #[serde(default)]
    pub records_expired: u64,
    /// Records copied to new tables.
    pub records_written: u64,
    /// Whether jobs read lazily (option `gc_lazy_read` resolved against the policy).
    pub lazy_read: bool,
    /// Whether new key tables are index-decoupled and validity checks use GetKey (option
    /// `index_decoupled_tables` resolved against the policy).
    pub index_decoupled: bool,
    /// Bytes of records read from victims (value reads, from the I/O counters).
    pub value_bytes_read: u64,
    /// Bytes of victims' dense indexes read from the device (from the I/O counters).
    pub index_bytes_read: u64,
    /// Jobs of several victims that met two copies of one record (a relocation's old copy and
    /// its new one, an interrupted write-back job's victim and output) with checks that could
    /// not tell them apart (drop keys name records, not places), and ran again one victim at a
    /// time.
    #[serde(default)]
    pub twin_restarts: u64,
    /// Bytes of value tables GC wrote, per value class by the policy's names for them (`hot`
    /// and `cold` with hotness-aware writing, `default` otherwise); classes without bytes are
    /// left out.
    #[serde(default)]
    pub bytes_written_by_class: std::collections::BTreeMap<String, u64>,
    /// Bytes the validity checks read from the index tree (lookup reads).
    pub lookup_bytes_read: u64,
    /// Bytes of value tables written.
    pub bytes_written: u64,
    /// Microseconds reading victims.
    pub read_micros: u64,
    /// Microseconds checking validity.
    pub lookup_micros: u64,
    /// Microseconds writing outputs.
    pub write_micros: u64,
    /// Microseconds background GC jobs waited because reads dominated (no write for 200 ms,
    /// reads coming, no space pressure): pacing by `gc_read_yield_rate`.
    #[serde(default)]
    pub paced_micros: u64,
    /// Microseconds GC jobs ran, wall clock, from their claim to their commit: reading,
    /// checking, writing, waiting and committing. Beside the time elapsed, it says how much of
    /// it GC was at work.
    #[serde(default)]
    pub job_micros: u64,
    /// Of `job_micros`, microseconds jobs waited, before reading, for compactions that were
    /// running when they claimed their victims (those may still drop handles into them).
    #[serde(default)]
    pub compaction_wait_micros: u64,
    /// Victims being collected now.
    pub claimed: usize,
    /// Threads of the pool GC jobs' reads in flight run on: 0 until the first job that reads
    /// more than one at a time starts it, and after close; then
    /// (`gc_io_depth` − 1) × the GC workers (1 without workers), at most 63.
    #[serde(default)]
    pub io_threads: usize,
    /// Live value tables whose most recent GC jobs failed (not for damage: a damaged table is
    /// left alone until the database is reopened). Background workers pick each again only
    /// after a wait of 0.1 s doubling with its failures in a row, up to 30 s; a job that
    /// collects it, or the table leaving the database, forgets it.
    #[serde(default)]
    pub backoff_tables: usize,
    /// Of those, the tables whose wait has not ended yet.
    #[serde(default)]
    pub backoff_waiting: usize,
    /// Milliseconds until the soonest of those waits ends (`None` when none is waiting).
    #[serde(default)]
    pub backoff_next_retry_ms: Option<u64>,
    /// The most failed jobs in a row of any of those tables (0 when there are none).
    #[serde(default)]
    pub backoff_failures: u32,
    /// Values compactions relocated out of the oldest value tables (the kept-entry hook's `Relocate`; inlined
    /// ones included).
    #[serde(default)]
    pub relocated_values: u64,
    /// Bytes of the old records of those (now garbage of their tables).
    #[serde(default)]
    pub relocated_bytes: u64,
    /// Values relocation left in place because an alias in a key table outside the compaction
    /// names their record (a database switched from a policy that writes them; docs/gc.md,
    /// "Switching policies").
    #[serde(default)]
    pub relocations_kept_for_aliases: u64,
    /// Values relocation left in place because a GC job held their table when the compaction
    /// started (the job may be copying the record; policies that both relocate and run GC
    /// jobs).
    #[serde(default)]
    pub relocations_kept_for_gc: u64,
    /// Aliases compactions and flushes dropped because the policy writes none (a database
    /// switched from a policy that writes them): readers find their owners instead.
    #[serde(default)]
    pub aliases_dropped: u64,
    /// Compactions a policy marked for compaction (`CompactionHooks::marked_for_compaction`).
    #[serde(default)]
    pub forced_compactions: u64,
    /// Handles written back into the index tree (write-back commits).
    #[serde(default)]
    pub written_back: u64,
    /// Write-backs skipped because a user write to the key got there first (the copy is
    /// garbage at once).
    #[serde(default)]
    pub write_back_conflicts: u64,
    /// Late drops held now: handles into tables GC jobs have claimed that flushes and
    /// compactions dropped meanwhile, kept for the jobs until their claims end (0 when no job
    /// runs).
    #[serde(default)]
    pub late_drops: usize,
}

/// Space: what is on disk against what is live.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpaceStats {
    /// Bytes of every file in the database directory: tables of the current version and of
    /// older versions iterators or jobs still pin, tables waiting for deletion, WALs, the
    /// manifest and OPTIONS.
    pub disk_bytes: u64,
    /// Estimate of live data: key-table bytes plus value-table record bytes that are not
    /// garbage (hidden garbage, not yet found by compaction, counts as live).
    pub live_data_estimate: u64,
    /// `disk_bytes ÷ live_data_estimate` (1 for an empty database).
    pub space_amplification: f64,
}

/// Everything `stats()` reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DbStats {
    /// Space-aware throttling (`None` when it is off or no budget is set): the band, seconds
    /// throttled and stopped, delays, failures, and the last observation with its limits.
    #[serde(default)]
    pub throttle: Option<crate::throttle::ThrottleStats>,
    /// Per level of the index tree.
    pub levels: Vec<LevelStats>,
    /// Bytes of all live key tables.
    pub total_table_bytes: u64,
    /// Bytes in the active memtable (with overhead).
    pub memtable_bytes: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Bytes in immutable memtables.
    pub immutable_memtable_bytes: u64,
    /// Entries in the active and immutable memtables (every version and tombstone).
    #[serde(default)]
    pub memtable_entries: u64,
    /// Range tombstones live: in the memtables, and in the key tables (a tombstone split
    /// between tables by compaction counts once per table). Compactions drop them at the
    /// bottom of the tree once no snapshot needs them.
    #[serde(default)]
    pub range_tombstones: u64,
    /// Last sequence number visible to reads.
    pub last_sequence: u64,
    /// Live snapshots.
    pub snapshots: usize,
    /// Bytes read and written per I/O class (`wal`, `flush`, `compaction_read`,
    /// `compaction_write`, `user_read`, `manifest`, `gc_read`, `gc_index_read`, `gc_lookup`,
    /// `gc_write`, `segment`, `other`).
    pub io: BTreeMap<String, IoCounters>,
    /// Writes and reads.
    pub operations: OperationStats,
    /// Flushes and compactions.
    pub compaction: CompactionStats,
    /// Write stalls.
    pub stalls: StallStats,
    /// Block and table caches.
    pub cache: CacheStats,
    /// Recovery at the last open.
    pub recovery: RecoveryStats,
    /// Value tables.
    pub values: ValueStats,
    /// Garbage collection.
    pub gc: GcStats,
    /// Space on disk and live data.
    pub space: SpaceStats,
    /// The partitions of the index tree.
    #[serde(default)]
    pub partitions: PartitionStats,
    /// The failure that made the database read-only, if any.
    pub background_error: Option<String>,
}
