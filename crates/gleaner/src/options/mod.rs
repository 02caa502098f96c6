//! Database options: documented defaults in named constants, validation that names the option,
//! string-based setting (`--option NAME=VALUE`) and persistence in the OPTIONS file.

mod file;
mod value;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::{FileSystem, PosixFs};

pub use file::{parse_options_file, render_options_file};
pub use value::{
    CompactionStyle, Compression, GcPolicyKind, OptionValue, Partitioning, SeparateAt, Switch,
    WalRecoveryMode,
};

/// Longest key accepted by any write: 64 KiB (what a key table can hold).
pub const MAX_KEY_SIZE: usize = crate::table::format::MAX_USER_KEY_LEN;
/// Largest value `max_value_size` may be set to: 256 MiB, the largest value a key table holds
/// inline. (Separated values, stored in value tables, will lift this.)
pub const MAX_VALUE_SIZE_LIMIT: u64 = crate::table::format::MAX_VALUE_LEN as u64;
/// Largest `max_batch_size` may be set to: 2 GiB. WAL readers reject records larger than this.
pub const MAX_BATCH_SIZE_LIMIT: u64 = 2 << 30;

/// Default `memtable_size`: 64 MiB.
pub const DEFAULT_MEMTABLE_SIZE: u64 = 64 << 20;
/// Default `max_immutable_memtables`: 2.
pub const DEFAULT_MAX_IMMUTABLE_MEMTABLES: u32 = 2;
/// Default `key_table_size` (target size of one key table): 64 MiB.
pub const DEFAULT_KEY_TABLE_SIZE: u64 = 64 << 20;
/// Default `level_base_size` (target size of level 1): 256 MiB.
pub const DEFAULT_LEVEL_BASE_SIZE: u64 = 256 << 20;
/// Default `level_multiplier`: 10.
pub const DEFAULT_LEVEL_MULTIPLIER: u32 = 10;
/// Default `num_levels`: 7.
pub const DEFAULT_NUM_LEVELS: u32 = 7;
/// Default `l0_compaction_trigger`: 4 files.
pub const DEFAULT_L0_COMPACTION_TRIGGER: u32 = 4;
/// Default `l0_slowdown_trigger`: 20 files.
pub const DEFAULT_L0_SLOWDOWN_TRIGGER: u32 = 20;
/// Default `l0_stop_trigger`: 36 files.
pub const DEFAULT_L0_STOP_TRIGGER: u32 = 36;
/// Default `compaction_style`: leveled.
pub const DEFAULT_COMPACTION_STYLE: CompactionStyle = CompactionStyle::Leveled;
/// Default `partitioning`: none.
pub const DEFAULT_PARTITIONING: Partitioning = Partitioning::None;
/// Default `dpkv_decay_interval`: 10 seconds between the hotness detector's ticks.
pub const DEFAULT_DPKV_DECAY_INTERVAL: f64 = 10.0;
/// Default `dpkv_hot_density`: a prefix taking 4 times its share of the key space's accesses.
pub const DEFAULT_DPKV_HOT_DENSITY: f64 = 4.0;
/// Default `dpkv_trie_bytes`: 1 MiB of prefix-trie nodes.
pub const DEFAULT_DPKV_TRIE_BYTES: u64 = 1 << 20;
/// Default `tiered_run_trigger`: merging starts at 4 sorted runs (RocksDB's universal
/// compaction starts at its `level0_file_num_compaction_trigger`, 4).
pub const DEFAULT_TIERED_RUN_TRIGGER: u32 = 4;
/// Default `tiered_size_ratio`: a run joins a merge when it is at most 1 % larger than the runs
/// already chosen together (RocksDB's universal `size_ratio`, 1 %).
pub const DEFAULT_TIERED_SIZE_RATIO: f64 = 0.01;
/// Default `tiered_max_space_amplification`: every run is merged into one when the runs newer
/// than the oldest hold twice its bytes (RocksDB's `max_size_amplification_percent`, 200 %).
pub const DEFAULT_TIERED_MAX_SPACE_AMPLIFICATION: f64 = 2.0;
/// Default `block_size`: 4 KiB.
pub const DEFAULT_BLOCK_SIZE: u64 = 4 << 10;
/// Default `block_restart_interval`: 16 keys.
pub const DEFAULT_BLOCK_RESTART_INTERVAL: u32 = 16;
/// Default `bloom_bits_per_key`: 10 (about 1% false positives).
pub const DEFAULT_BLOOM_BITS_PER_KEY: u32 = 10;
/// Default `block_cache_size`: 64 MiB.
pub const DEFAULT_BLOCK_CACHE_SIZE: u64 = 64 << 20;
/// Default `compression` of key-table blocks: lz4.
pub const DEFAULT_COMPRESSION: Compression = Compression::Lz4;
/// Default `flush_threads`: 1.
pub const DEFAULT_FLUSH_THREADS: u32 = 1;
/// Default `compaction_threads`: 1.
pub const DEFAULT_COMPACTION_THREADS: u32 = 1;
/// Default `max_open_files` (files of each kind the table caches keep open): 1000.
pub const DEFAULT_MAX_OPEN_FILES: u32 = 1000;
/// Default `max_value_size`: 256 MiB.
pub const DEFAULT_MAX_VALUE_SIZE: u64 = 256 << 20;
/// Default `max_batch_size`: 512 MiB.
pub const DEFAULT_MAX_BATCH_SIZE: u64 = 512 << 20;
/// Default `max_manifest_size` before the manifest is rewritten: 64 MiB.
pub const DEFAULT_MAX_MANIFEST_SIZE: u64 = 64 << 20;
/// Default `min_separated_value_size`: values of at least 1 KiB go to value tables.
pub const DEFAULT_MIN_SEPARATED_VALUE_SIZE: u64 = 1 << 10;
/// Default `value_table_size` (target size of one value table): 256 MiB.
pub const DEFAULT_VALUE_TABLE_SIZE: u64 = 256 << 20;
/// Default `gc_policy`.
pub const DEFAULT_GC_POLICY: GcPolicyKind = GcPolicyKind::Scavenger;
pub use crate::filename::{MAX_POLICY_NAME, valid_policy_name};
/// Default `stale_handle_share`: a key table is rewritten when half its handles are stale.
pub const DEFAULT_STALE_HANDLE_SHARE: f64 = 0.5;
/// Default `gc_garbage_ratio`: a value table is a GC candidate at 20% garbage.
pub const DEFAULT_GC_GARBAGE_RATIO: f64 = 0.2;
/// Default `titan_discardable_ratio`: Titan's `blob_file_discardable_ratio`, 0.5.
pub const DEFAULT_TITAN_DISCARDABLE_RATIO: f64 = 0.5;
/// Default `blobdb_age_cutoff`: RocksDB's `blob_garbage_collection_age_cutoff`, 0.25.
pub const DEFAULT_BLOBDB_AGE_CUTOFF: f64 = 0.25;
/// Default `blobdb_force_threshold`: RocksDB's `blob_garbage_collection_force_threshold`, 1.0
/// (off).
pub const DEFAULT_BLOBDB_FORCE_THRESHOLD: f64 = 1.0;
/// Default `novkv_valid_threshold`: the NovKV paper's evaluation setting, 0.7.
pub const DEFAULT_NOVKV_VALID_THRESHOLD: f64 = 0.7;
/// Default `dumpkv_time_unit`: the DumpKV paper's 1M writes (2^20), for its 50 million writes
/// of 4 KiB; scale it with the writes a lifetime spans (docs/gc.md, "DumpKV").
pub const DEFAULT_DUMPKV_TIME_UNIT: u64 = 1 << 20;
/// Default `dumpkv_train_samples`: the DumpKV paper's training set, 128 Ki samples.
pub const DEFAULT_DUMPKV_TRAIN_SAMPLES: u64 = 128 << 10;
/// Default `dumpkv_force_ratio`: a value table whose lifetime has not passed is collected
/// anyway once 80 % of its bytes are garbage.
pub const DEFAULT_DUMPKV_FORCE_RATIO: f64 = 0.8;
/// Default `diffkv_small_max`: the DiffKV authors' 128 bytes (values below stay inline).
pub const DEFAULT_DIFFKV_SMALL_MAX: u64 = 128;
/// Default `diffkv_large_min`: the DiffKV authors' 8 KiB (values from it go to vLogs).
pub const DEFAULT_DIFFKV_LARGE_MIN: u64 = 8 << 10;
/// Default `diffkv_max_sorted_runs`: the DiffKV authors' 10.
pub const DEFAULT_DIFFKV_MAX_SORTED_RUNS: u64 = 10;
/// Default `diffkv_merge_levels`: the DiffKV authors' 2 (the last two of seven levels, with
/// RocksDB's dynamic base level at 4: three levels below level 0, the upper one not merged, as
/// in the four-level trees here). At 2 GiB, 3 (merging that level too) measured faster updates,
/// less space and faster scans (docs/benchmarks.md, "DiffKV scans").
pub const DEFAULT_DIFFKV_MERGE_LEVELS: u32 = 2;
/// Default `diffkv_gc_ratio`: the DiffKV authors' 0.3.
pub const DEFAULT_DIFFKV_GC_RATIO: f64 = 0.3;
/// Default `diffkv_vtree_gc_ratio`: 0.7, the DiffKV authors' ratio for the vTables of deep
/// levels (`high_level_blob_discardable_ratio`).
pub const DEFAULT_DIFFKV_VTREE_GC_RATIO: f64 = 0.7;
/// Default `gc_threads`: 1.
pub const DEFAULT_GC_THREADS: u32 = 1;
/// Default `gc_read_gap`: 64 KiB (on the 1.4 GB/s, 33 k reads/s test disk a read costs about as
/// much time as 40 KB more of it).
pub const DEFAULT_GC_READ_GAP: u64 = 64 << 10;
/// Default `drop_cache_bytes`: 16 MiB, about 190 000 keys of 24 bytes. The hot set of a skewed
/// workload is a small fraction of its keys, so a few MiB suffice for the hotness decision
/// (Scavenger §3.4.1).
pub const DEFAULT_DROP_CACHE_BYTES: u64 = 16 << 20;
/// Default `gc_threads_max` (GC threads while space is tight): 2.
pub const DEFAULT_GC_THREADS_MAX: u32 = crate::throttle::DEFAULT_GC_THREADS_MAX;
/// Default `space_stop_timeout_ms`: 10 s.
pub const DEFAULT_SPACE_STOP_TIMEOUT_MS: u64 = 10_000;
/// Default `gc_max_input_size`: one GC job reads at most 512 MiB of victims.
pub const DEFAULT_GC_MAX_INPUT_SIZE: u64 = 512 << 20;
/// Default `compaction_readahead_size`: compactions read each input key table 1 MiB at a time.
pub const DEFAULT_COMPACTION_READAHEAD_SIZE: u64 = 1 << 20;
/// Default `scan_prefetch_depth`: forward scans keep up to 16 value reads in flight (chosen
/// by the run in docs/benchmarks.md, "Scan prefetch depth").
pub const DEFAULT_SCAN_PREFETCH_DEPTH: u32 = 16;
/// Default `gc_io_depth`: a GC job keeps up to 8 validity lookups or record reads in flight.
pub const DEFAULT_GC_IO_DEPTH: u32 = 8;
/// Default `gc_read_yield_rate`: while reads dominate, background GC examines at most 16 MiB
/// of victim records a second (chosen by the runs in docs/benchmarks.md, "GC pacing while reads
/// dominate": reads right after updates +27 %, p99 halved; 4 MiB/s gained no more).
pub const DEFAULT_GC_READ_YIELD_RATE: u64 = 16 << 20;
/// Least nonzero `gc_read_yield_rate`: 64 KiB a second (a job's batch of 256 records of 8 KiB
/// then owes about 32 s, a wait that a write, the reads stopping or shutdown ends at once).
pub const MIN_GC_READ_YIELD_RATE: u64 = 64 << 10;
/// Default `value_cache_share`: half of `block_cache_size` caches values (chosen by the runs in
/// docs/benchmarks.md, "Value cache": point reads +37 % at 0.5, as at 0.75; fewer at 0.9, where
/// index and filter blocks no longer fit).
pub const DEFAULT_VALUE_CACHE_SHARE: f64 = 0.5;
/// Default `value_readahead_size`: scans read up to 1 MiB ahead within a value table.
pub const DEFAULT_VALUE_READAHEAD_SIZE: u64 = 1 << 20;
/// Default `wal_recovery_mode`.
pub const DEFAULT_WAL_RECOVERY_MODE: WalRecoveryMode = WalRecoveryMode::TolerateCorruptedTail;

/// Default of `gc_expiry_wait_ms`: 10 minutes.
pub const DEFAULT_GC_EXPIRY_WAIT_MS: u64 = 600_000;

/// Declares the options table once; generates the fields, getters, builder setters, string
/// setters and the list used for the OPTIONS file, so a new option is one line here.
macro_rules! options_table {
    ($( $(#[doc = $doc:literal])* ($name:ident, $with:ident, $ty:ty, $default:expr, persisted: $persist:literal); )*) => {
        /// Options of one database. Build with [`Options::default`] and the `with_*` setters (or
        /// [`Options::set`] by name); every getter's documentation states the default.
        ///
        /// The database-shape options (all but `create_if_missing`, `error_if_exists` and the
        /// file system) are saved in the database's OPTIONS file at every open and reused by the
        /// next open, except those the caller sets explicitly.
        #[derive(Clone)]
        pub struct Options {
            $( $name: $ty, )*
            fs: Arc<dyn FileSystem>,
            custom_policy: Option<Arc<dyn crate::gc::PolicyFactory>>,
            clock: Arc<dyn crate::expiry::Clock>,
            overridden: BTreeSet<&'static str>,
        }

        impl Default for Options {
            fn default() -> Self {
                Options {
                    $( $name: $default, )*
                    fs: Arc::new(PosixFs::new()),
                    custom_policy: None,
                    clock: Arc::new(crate::expiry::SystemClock),
                    overridden: BTreeSet::new(),
                }
            }
        }

        impl Options {
            $(
                $(#[doc = $doc])*
                pub fn $name(&self) -> $ty {
                    self.$name
                }

                $(#[doc = $doc])*
                ///
                /// Setting it explicitly overrides the value saved in the OPTIONS file.
                #[must_use]
                pub fn $with(mut self, value: $ty) -> Self {
                    self.$name = value;
                    self.overridden.insert(stringify!($name));
                    self
                }
            )*

            /// Sets an option by name from its text form (as in the OPTIONS file and the
            /// command line's `--option NAME=VALUE`). Fails with
            /// [`Error::InvalidArgument`] naming the option for an unknown name or a value
            /// that does not parse; range checks happen at open.
            pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
                match name {
                    $( stringify!($name) => {
                        self.$name = <$ty as OptionValue>::parse_option(value).map_err(|why| {
                            Error::invalid(format!("option `{name}`: cannot use `{value}`: {why}"))
                        })?;
                        self.overridden.insert(stringify!($name));
                        Ok(())
                    } )*
                    _ => Err(Error::invalid(format!(
                        "unknown option `{name}` (known options: {})",
                        Self::NAMES.join(", ")
                    ))),
                }
            }

            /// Sets a default of the caller's own by name, from its text form: unlike
            /// [`Options::set`] it does not count as set explicitly, so a value saved in the
            /// database's OPTIONS file still wins at open, and so does a value set explicitly,
            /// before or after. For a program that embeds the engine and ships other defaults
            /// than the engine's (gleaner-server's `separate_at`). Fails as [`Options::set`]
            /// does.
            pub fn set_default(&mut self, name: &str, value: &str) -> Result<()> {
                if self.overridden.contains(name) {
                    // Checked all the same, so that a bad default is found wherever it is set.
                    return self.clone().set(name, value);
                }
                self.set(name, value)?;
                self.overridden.remove(name);
                Ok(())
            }

            /// Every option name accepted by [`Options::set`].
            pub const NAMES: &'static [&'static str] = &[$( stringify!($name), )*];

            /// `(name, value)` of every option saved in the OPTIONS file, in declaration order.
            pub fn persisted_values(&self) -> Vec<(&'static str, String)> {
                let mut out = Vec::new();
                $( if $persist { out.push((stringify!($name), self.$name.format_option())); } )*
                // A custom policy is saved with its name, so an open without it can say which.
                if let Some(f) = self.custom_policy.as_ref().filter(|_| self.gc_policy == GcPolicyKind::Custom) {
                    for (name, value) in &mut out {
                        if *name == "gc_policy" {
                            *value = format!("custom:{}", f.name());
                        }
                    }
                }
                out
            }

            /// Applies a value read from the OPTIONS file unless the caller set that option
            /// explicitly. Unknown names are an error: the file was written by a newer version.
            pub(crate) fn apply_saved(&mut self, name: &str, value: &str) -> Result<()> {
                match name {
                    $( stringify!($name) if $persist => {
                        if !self.overridden.contains(stringify!($name)) {
                            self.$name = <$ty as OptionValue>::parse_option(value).map_err(|why| {
                                Error::invalid(format!(
                                    "OPTIONS file: option `{name}` has unusable value `{value}`: {why}"
                                ))
                            })?;
                        }
                        Ok(())
                    } )*
                    _ => Err(Error::invalid(format!(
                        "OPTIONS file names option `{name}`, which this version of Gleaner does not know"
                    ))),
                }
            }
        }

        impl fmt::Debug for Options {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut d = f.debug_struct("Options");
                $( d.field(stringify!($name), &self.$name); )*
                d.field("fs", &self.fs);
                d.field("custom_policy", &self.custom_policy);
                d.field("clock", &self.clock);
                d.finish()
            }
        }
    };
}

options_table! {
    /// Create the database when the directory holds none. Default: true.
    (create_if_missing, with_create_if_missing, bool, true, persisted: false);
    /// Fail the open when a database already exists. Default: false.
    (error_if_exists, with_error_if_exists, bool, false, persisted: false);
    /// Bytes a memtable holds before it becomes immutable and is flushed. Default 64 MiB
    /// ([`DEFAULT_MEMTABLE_SIZE`]); at least 1 KiB.
    (memtable_size, with_memtable_size, u64, DEFAULT_MEMTABLE_SIZE, persisted: true);
    /// Immutable memtables waiting for flush at which writes stop until a flush finishes.
    /// Default 2; from 1 to 64.
    (max_immutable_memtables, with_max_immutable_memtables, u32, DEFAULT_MAX_IMMUTABLE_MEMTABLES, persisted: true);
    /// Target size of a key table written by compaction. Default 64 MiB; at least 1 KiB.
    (key_table_size, with_key_table_size, u64, DEFAULT_KEY_TABLE_SIZE, persisted: true);
    /// Target total size of level 1; level n+1 targets `level_multiplier` times level n.
    /// Default 256 MiB; at least 1 KiB.
    (level_base_size, with_level_base_size, u64, DEFAULT_LEVEL_BASE_SIZE, persisted: true);
    /// Size ratio between adjacent levels. Default 10; from 2 to 100.
    (level_multiplier, with_level_multiplier, u32, DEFAULT_LEVEL_MULTIPLIER, persisted: true);
    /// Number of levels of the index tree, L0 included. Default 7; from 2 to 12. Lowering it
    /// below the deepest populated level of an existing database is rejected at open.
    (num_levels, with_num_levels, u32, DEFAULT_NUM_LEVELS, persisted: true);
    /// L0 files that trigger an L0 compaction: into L1, or (leveled) into one L0 table while
    /// they hold under 1/`level_multiplier` of the L1 bytes they overlap (docs/architecture.md,
    /// "Compaction strategies"). Default 4.
    (l0_compaction_trigger, with_l0_compaction_trigger, u32, DEFAULT_L0_COMPACTION_TRIGGER, persisted: true);
    /// L0 files at which each write group is delayed by about 1 ms. Default 20; at least
    /// `l0_compaction_trigger`.
    (l0_slowdown_trigger, with_l0_slowdown_trigger, u32, DEFAULT_L0_SLOWDOWN_TRIGGER, persisted: true);
    /// L0 files at which writes stop until compaction catches up. Default 36; at least
    /// `l0_slowdown_trigger`, at most 1000.
    (l0_stop_trigger, with_l0_stop_trigger, u32, DEFAULT_L0_STOP_TRIGGER, persisted: true);
    /// How the index tree is compacted: `leveled` (the default) or `tiered` (size-tiered, as
    /// RocksDB's universal compaction; docs/architecture.md, "Compaction strategies", compares
    /// them). Saved in OPTIONS like the other shape options; a database may be reopened under
    /// the other style: a level holding several runs is merged into one before leveled
    /// compaction touches it, and tiered compaction takes the leveled runs as they are.
    /// `level_base_size`, `level_multiplier` and `l0_compaction_trigger` are read by leveled
    /// compaction only, but kept under tiered for a switch back.
    (compaction_style, with_compaction_style, CompactionStyle, DEFAULT_COMPACTION_STYLE, persisted: true);
    /// Whether the index tree is split into partitions: `none` (the default), or `dpkv`, DP-KV's
    /// hot and cold partitions (docs/architecture.md, "Partitions"): keys in the hot key ranges
    /// live in a leveled tree, the rest in a size-tiered one (with `tiered_*`'s parameters;
    /// `compaction_style` is then not read), each with `num_levels` levels, over one WAL,
    /// memtable and set of value tables. Being built (issue 29): the tree, its recovery and
    /// the moves of key ranges between the partitions are, the detection of hot key ranges
    /// that sets them is not yet, so every key stays in the cold partition. Saved in OPTIONS;
    /// reopening with `none` is refused while the hot partition holds a table, and exact
    /// otherwise; reopening a `none` database with `dpkv` finds every key cold.
    (partitioning, with_partitioning, Partitioning, DEFAULT_PARTITIONING, persisted: true);
    /// `partitioning=dpkv`: seconds between the hotness detector's ticks (the paper's T): each
    /// halves every access count, judges the prefixes, saves them (files `HOTNESS`,
    /// `HOTNESS.log`) and moves the keys whose partition changed. Default 10; from 0.01 to
    /// 86,400.
    (dpkv_decay_interval, with_dpkv_decay_interval, f64, DEFAULT_DPKV_DECAY_INTERVAL, persisted: true);
    /// `partitioning=dpkv`: when above 0, the detector ticks after every this many recorded
    /// accesses instead of every `dpkv_decay_interval`: a clock of operations, which replays
    /// (with `inline_background_work`, where no thread keeps time, the only clock there is).
    /// Default 0 (by time); at most 2^32.
    (dpkv_tick_accesses, with_dpkv_tick_accesses, u64, 0, persisted: true);
    /// `partitioning=dpkv`: the access density (a prefix's share of the accesses divided by
    /// its share of the key space) at which a prefix whose children are alike is hot. Default
    /// 4; from 1 to 1,000,000.
    (dpkv_hot_density, with_dpkv_hot_density, f64, DEFAULT_DPKV_HOT_DENSITY, persisted: true);
    /// `partitioning=dpkv`: most bytes of the prefix trie's nodes (reported in
    /// `stats().partitions.trie_bytes`). Default 1 MiB; from 4 KiB to 64 MiB.
    (dpkv_trie_bytes, with_dpkv_trie_bytes, u64, DEFAULT_DPKV_TRIE_BYTES, persisted: true);
    /// Tiered compaction: the number of sorted runs in the whole tree (each L0 table counts as
    /// one) at which it starts merging runs of similar size; below it nothing is merged. At
    /// 4 × this many runs (at most `l0_stop_trigger`) the newest runs are merged whatever their
    /// sizes. Default 4; from 2 to 1000, and at most `l0_slowdown_trigger` (writes would be
    /// delayed before any merge started). Only `compaction_style=tiered` reads it.
    (tiered_run_trigger, with_tiered_run_trigger, u32, DEFAULT_TIERED_RUN_TRIGGER, persisted: true);
    /// Tiered compaction: going from the newest run to older ones, a run joins a merge while its
    /// size is at most (1 + this) × the bytes of the runs already chosen. Default 0.01; from 0
    /// to 100. Only `compaction_style=tiered` reads it.
    (tiered_size_ratio, with_tiered_size_ratio, f64, DEFAULT_TIERED_SIZE_RATIO, persisted: true);
    /// Tiered compaction's bound on space amplification: when the runs newer than the oldest
    /// hold more than this many times its bytes, every run is merged into one (the oldest run
    /// stands for the live data). Default 2.0; from 0 (merge everything whenever merging
    /// starts) to 100. Only `compaction_style=tiered` reads it.
    (tiered_max_space_amplification, with_tiered_max_space_amplification, f64, DEFAULT_TIERED_MAX_SPACE_AMPLIFICATION, persisted: true);
    /// Uncompressed size at which a key-table data block is cut. Default 4 KiB; from 64 bytes
    /// to 16 MiB.
    (block_size, with_block_size, u64, DEFAULT_BLOCK_SIZE, persisted: true);
    /// Keys between restart points in a block. Default 16; from 1 to 1024.
    (block_restart_interval, with_block_restart_interval, u32, DEFAULT_BLOCK_RESTART_INTERVAL, persisted: true);
    /// Bloom filter bits per key in key tables; 0 disables filters. Default 10; at most 64.
    (bloom_bits_per_key, with_bloom_bits_per_key, u32, DEFAULT_BLOOM_BITS_PER_KEY, persisted: true);
    /// Bytes of decoded blocks the block cache holds; 0 disables it. Default 64 MiB.
    (block_cache_size, with_block_cache_size, u64, DEFAULT_BLOCK_CACHE_SIZE, persisted: true);
    /// Share of `block_cache_size` that holds separated values of point reads (RocksDB's blob
    /// cache), by the handle that names them; the block cache keeps the rest, so the memory
    /// budget stays `block_cache_size`. Reads with `fill_cache` off and scans never fill it.
    /// Default 0.5; 0 turns the value cache off; at most 0.9.
    (value_cache_share, with_value_cache_share, f64, DEFAULT_VALUE_CACHE_SHARE, persisted: true);
    /// Put every value into the value cache as it is separated: by a flush, or, with
    /// `separate_at=write`, by the write (RocksDB's `prepopulate_blob_cache`). Reads of
    /// recently written values then skip the value table's read while the cache holds them;
    /// writes pay a copy and an insert per separated value, and older values are evicted
    /// sooner. Values GC or compaction moves are not inserted (their entries under the
    /// handles the index holds stay true). Meant for a cache that holds the values read
    /// soon after they are written; no effect when the value cache is off. Default false.
    (prepopulate_value_cache, with_prepopulate_value_cache, bool, false, persisted: true);
    /// Bytes of the row cache: the newest value of recently read keys, by user key, which
    /// answers a point read of the present with one hash lookup (no memtable, filter, index or
    /// value-table read); RocksDB's `row_cache`. Separate from `block_cache_size`. Every write
    /// of a key removes its entry, and a range deletion empties the cache. Reads at a snapshot
    /// and scans neither use nor fill it; reads with `fill_cache` off use it but do not fill
    /// it. Worth its memory when it holds the values read most: it holds whole values (a copy
    /// of each). 0 turns it off. Default 0; at most 1 PiB.
    (row_cache_size, with_row_cache_size, u64, 0, persisted: true);
    /// Put every value a write sets into the row cache as the write becomes visible, in place
    /// of removing the key's entry: reads of recently written keys are then answered from
    /// memory from the first. Writes pay a copy of each value and an insert. No effect when the
    /// row cache is off. Default false.
    (prepopulate_row_cache, with_prepopulate_row_cache, bool, false, persisted: true);
    /// Compression of key-table blocks (`lz4` or `none`). Default lz4.
    (compression, with_compression, Compression, DEFAULT_COMPRESSION, persisted: true);
    /// Background threads that flush memtables. Default 1; from 1 to 64.
    (flush_threads, with_flush_threads, u32, DEFAULT_FLUSH_THREADS, persisted: true);
    /// Background threads that run compactions. Default 1; from 1 to 64.
    (compaction_threads, with_compaction_threads, u32, DEFAULT_COMPACTION_THREADS, persisted: true);
    /// Run flush, compaction and GC on the calling thread at fixed points instead of on
    /// background threads: after every write, in `flush`, at open, and while a write waits at
    /// the space budget; a write that finds the memtables or L0 full runs the flushes and
    /// compactions that make room (no GC: it holds the WAL, and GC may write through it). Each
    /// point runs all pending work to completion, so a seeded single-threaded workload performs
    /// the same file operations in the same order on every run and a crash simulation replays
    /// exactly. Writes wait for that work: meant for tests and simulation, not for production.
    /// Default false; not saved in the OPTIONS file.
    (inline_background_work, with_inline_background_work, bool, false, persisted: false);
    /// Read table files with `O_DIRECT`, bypassing the OS page cache. Default false. Fails at
    /// open when the file system does not support direct I/O. A direct read goes through an
    /// aligned buffer; each thread that reads keeps one of up to 128 KiB for its next read.
    (use_direct_io_for_reads, with_use_direct_io_for_reads, bool, false, persisted: true);
    /// Write flush and compaction outputs with `O_DIRECT`. Default false.
    (use_direct_io_for_background_writes, with_use_direct_io_for_background_writes, bool, false, persisted: true);
    /// Files of each kind (key tables, value tables) the table caches keep open. Default 1000;
    /// from 1 to 1,000,000. A table closed to make room keeps its metadata in memory (up to
    /// 64 MiB a kind), so opening it again reads nothing from the device. Twice this, plus the
    /// logs and the files being written, should fit the process's open-file limit; when it
    /// does not, an open that finds no descriptor left closes idle tables and tries once more
    /// (`cache.table_opens_after_emfile` counts them).
    (max_open_files, with_max_open_files, u32, DEFAULT_MAX_OPEN_FILES, persisted: true);
    /// Longest value accepted by a write. Default 256 MiB; from 1 byte to
    /// [`MAX_VALUE_SIZE_LIMIT`] (256 MiB).
    (max_value_size, with_max_value_size, u64, DEFAULT_MAX_VALUE_SIZE, persisted: true);
    /// Largest encoded write batch accepted. Default 512 MiB; at least `max_value_size` plus
    /// [`MAX_KEY_SIZE`] plus 64 bytes, at most 2 GiB ([`MAX_BATCH_SIZE_LIMIT`]).
    (max_batch_size, with_max_batch_size, u64, DEFAULT_MAX_BATCH_SIZE, persisted: true);
    /// Manifest size at which it is rewritten as a compact snapshot. Default 64 MiB; at least
    /// 4 KiB.
    (max_manifest_size, with_max_manifest_size, u64, DEFAULT_MAX_MANIFEST_SIZE, persisted: true);
    /// Values at least this long are separated into value tables at flush; 0 separates every
    /// value, a size above `max_value_size` none. Default 1 KiB.
    (min_separated_value_size, with_min_separated_value_size, u64, DEFAULT_MIN_SEPARATED_VALUE_SIZE, persisted: true);
    /// When a separated value is first written to a value table: `flush` (the default) copies
    /// it from the memtable at the flush, after the write-ahead log held it whole; `write`
    /// appends it to a value segment as it is written, the log holding only its handle, so it
    /// is written once (docs/architecture.md, "Values written once"): fewer device bytes, more
    /// foreground CPU, and values overwritten before their flush become GC's work
    /// (docs/benchmarks.md, "Values written once against values separated at flush", where
    /// `flush` was as fast or faster). A database may be reopened under either: the segments a
    /// crash left open are sealed at the next open whatever this option says.
    (separate_at, with_separate_at, SeparateAt, SeparateAt::Flush, persisted: true);
    /// Target size of a value table written by a flush or a GC job. Default 256 MiB; at least
    /// 1 KiB.
    (value_table_size, with_value_table_size, u64, DEFAULT_VALUE_TABLE_SIZE, persisted: true);
    /// Writes separated values that expire ([`crate::expiry`]) into value tables apart by their
    /// expiry, one group per window of this many milliseconds (values that never expire apart
    /// again), at flushes and relocating compactions, so that each group's tables expire whole
    /// and are deleted without a GC read (docs/gc.md, "Expiry-grouped value tables"). At most
    /// 16 groups (`compaction::MAX_OPEN_EXPIRY_GROUPS`) per class
    /// have a table open at once. Default 0: off (values are written together, and a table
    /// whose values all expire is still deleted whole once the last has expired).
    (expiry_group_ms, with_expiry_group_ms, u64, 0, persisted: true);
    /// A value table every record of which expires within this many milliseconds is left to
    /// expire whole (free: no GC read, no rewrite) rather than collected by a GC job for its
    /// garbage, unless the space throttle is slowing or stopping writes (docs/gc.md,
    /// "Expiry-grouped value tables"). 0 collects such tables like any other. Default
    /// 600,000 (10 minutes).
    (gc_expiry_wait_ms, with_gc_expiry_wait_ms, u64, DEFAULT_GC_EXPIRY_WAIT_MS, persisted: true);
    /// The garbage-collection policy (`scavenger`, `terarkdb`, `titan`, `blobdb` or `novkv`;
    /// docs/gc.md compares them). Default `scavenger`.
    (gc_policy, with_gc_policy, GcPolicyKind, DEFAULT_GC_POLICY, persisted: true);
    /// Lazy GC read (Scavenger §3.2): a GC job reads the victims' dense indexes, checks every
    /// record from its index entry, and reads only live records' values, adjacent ones in one
    /// read. `auto` (the default) follows `gc_policy`: on for `scavenger`, off for `terarkdb`.
    (gc_lazy_read, with_gc_lazy_read, Switch, Switch::Auto, persisted: true);
    /// Lazy GC read: garbage between two live records of at most this many bytes is read through
    /// (one read) rather than skipped (two reads), because on most devices a short read costs
    /// about as much as a long one. 0 reads only live records. Default 64 KiB; at most 16 MiB.
    (gc_read_gap, with_gc_read_gap, u64, DEFAULT_GC_READ_GAP, persisted: true);
    /// Validity lookups (and, with lazy read, reads of live records) a GC job keeps in flight
    /// at once, on its own thread and the database's pool of GC read threads: each is a small
    /// random read, and the device serves several at once faster than one after another.
    /// Results are used in key order, so the outputs do not depend on the threads. The pool is
    /// started by the first job that reads more than one at a time, with (`gc_io_depth` − 1) ×
    /// the GC workers (1 without workers) threads, at most 63, and stopped at close. Under
    /// `inline_background_work` a job runs them one at a time and no pool is started. Default
    /// 8; 1 = one at a time on the job's thread; at most 64.
    (gc_io_depth, with_gc_io_depth, u32, DEFAULT_GC_IO_DEPTH, persisted: true);
    /// GC pacing while reads dominate (docs/gc.md, "Pacing while reads dominate"): when no write has arrived for
    /// 200 ms while point reads or iterators keep coming, and the space throttle (if on) is
    /// not slowing writes, a background GC job examines at most this many bytes of victim
    /// records a second, leaving the device to the reads; it goes at full speed again at its
    /// next batch after a write arrives or the reads stop. `Db::run_gc` and inline work are
    /// never paced. Bytes a second; 0 turns pacing off. Default 16 MiB; otherwise at least
    /// 64 KiB.
    (gc_read_yield_rate, with_gc_read_yield_rate, u64, DEFAULT_GC_READ_YIELD_RATE, persisted: true);
    /// Hotness-aware writing (Scavenger §3.4): keys whose older versions compaction or flush
    /// dropped are remembered in a DropCache of `drop_cache_bytes`; flush and GC write the values
    /// of such hot keys to hot value tables and the rest to cold ones, and GC collects hot tables
    /// first at equal garbage ratio. `auto` (the default) follows `gc_policy`: on for
    /// `scavenger`, off for `terarkdb`.
    (hotness_aware_writes, with_hotness_aware_writes, Switch, Switch::Auto, persisted: true);
    /// Memory for the DropCache of hotness-aware writing (keys and their newest known sequence
    /// numbers, about 88 bytes per 24-byte key). Default 16 MiB; at most 4 GiB.
    (drop_cache_bytes, with_drop_cache_bytes, u64, DEFAULT_DROP_CACHE_BYTES, persisted: true);
    /// Index-decoupled key tables and GetKey lookups (Scavenger §3.3): new key tables keep
    /// inline values in data blocks and value handles in separate handle blocks, and GC checks
    /// records with lookups that read handle blocks, not data blocks. Tables already written
    /// keep their layout (each records its own), so the option can change between opens.
    /// `auto` (the default) follows `gc_policy`: on for `scavenger`, off for `terarkdb`.
    (index_decoupled_tables, with_index_decoupled_tables, Switch, Switch::Auto, persisted: true);
    /// Rewrite a key table by compaction, when the tree's shape asks for no other, once this
    /// share of its handles name value tables GC collected since the table was written (by
    /// inheritance: policies whose GC commits rewrite no index entries). Each read of such a
    /// handle follows the inheritance record and searches the new table's dense index; a
    /// compaction would rewrite the handle only when the tree is written again, so without
    /// this a database read after its writes stop pays that search on most reads for ever
    /// (docs/gc.md, "Stale handles"). Default 0.5; 0 turns it off; at most 1.
    (stale_handle_share, with_stale_handle_share, f64, DEFAULT_STALE_HANDLE_SHARE, persisted: true);
    /// Garbage ratio (garbage bytes ÷ record bytes) at which a value table becomes a GC victim.
    /// Default 0.2; from 0 to 1.
    (gc_garbage_ratio, with_gc_garbage_ratio, f64, DEFAULT_GC_GARBAGE_RATIO, persisted: true);
    /// Policy `titan`: garbage ratio (Titan's discardable ratio) at which a value table becomes
    /// a victim. Default 0.5; above 0, at most 1.
    (titan_discardable_ratio, with_titan_discardable_ratio, f64, DEFAULT_TITAN_DISCARDABLE_RATIO, persisted: true);
    /// Policy `blobdb`: compactions relocate the values of the entries they keep that live in
    /// the oldest this fraction of the value tables (by file number). Default 0.25; from 0 (no
    /// relocation) to 1.
    (blobdb_age_cutoff, with_blobdb_age_cutoff, f64, DEFAULT_BLOBDB_AGE_CUTOFF, persisted: true);
    /// Policy `blobdb`: when the garbage of the value tables within the age cutoff reaches this
    /// fraction of their bytes, the key tables referencing the oldest value table are compacted
    /// (after every compaction the tree's shape asks for). Default 1.0, which is off; from 0 to
    /// 1.
    (blobdb_force_threshold, with_blobdb_force_threshold, f64, DEFAULT_BLOBDB_FORCE_THRESHOLD, persisted: true);
    /// Policy `novkv`: a value table becomes a victim when its valid rate (records not yet
    /// garbage ÷ records) is below this. Default 0.7 (the NovKV paper's); from 0 to 1.
    (novkv_valid_threshold, with_novkv_valid_threshold, f64, DEFAULT_NOVKV_VALID_THRESHOLD, persisted: true);
    /// Policy `dumpkv`: whether GC jobs ask the learned model for each live record's class
    /// (`true`), or give every live record the long lifetime (`false`: lifetime points and
    /// TTL classes without prediction, the paper's "without model"). Default true.
    (dumpkv_model, with_dumpkv_model, bool, true, persisted: true);
    /// Policy `dumpkv`: writes per time unit of the lifetime features (the paper's 1M): deltas
    /// enter the model as log2 buckets of it, write counter `i` decays over `unit << i`
    /// writes, and the initial lifetimes are 2, 10 and 2 units. Default 2^20; a power of two
    /// from 1 to 2^40.
    (dumpkv_time_unit, with_dumpkv_time_unit, u64, DEFAULT_DUMPKV_TIME_UNIT, persisted: true);
    /// Policy `dumpkv`: samples that arrive between two trainings of the model, and the size
    /// of each training set. Default 131072; from 64 to 4194304.
    (dumpkv_train_samples, with_dumpkv_train_samples, u64, DEFAULT_DUMPKV_TRAIN_SAMPLES, persisted: true);
    /// Policy `dumpkv`: a value table is collected before its lifetime has passed once this
    /// fraction of its bytes is garbage (the safety net of an idle or mispredicting
    /// database). Default 0.8; from 0 to 1.
    (dumpkv_force_ratio, with_dumpkv_force_ratio, f64, DEFAULT_DUMPKV_FORCE_RATIO, persisted: true);
    /// Policy `diffkv`: values shorter than this stay inline in the index tree (replaces
    /// `min_separated_value_size`, which must then be left unset or equal). Default 128; at
    /// most `diffkv_large_min` (0 separates every value).
    (diffkv_small_max, with_diffkv_small_max, u64, DEFAULT_DIFFKV_SMALL_MAX, persisted: true);
    /// Policy `diffkv`: values at least this long go to vLogs; shorter separated ones to the
    /// vTree. Default 8192; from `diffkv_small_max` to the largest `max_value_size` (0 sends
    /// every separated value to vLogs; above `max_value_size`, none).
    (diffkv_large_min, with_diffkv_large_min, u64, DEFAULT_DIFFKV_LARGE_MIN, persisted: true);
    /// Policy `diffkv`: most sorted runs of vTables over one key at a merge level before they
    /// are tagged to join the next merge through their keys (the scan-optimised merge).
    /// Default 10; from 1 to 1000.
    (diffkv_max_sorted_runs, with_diffkv_max_sorted_runs, u64, DEFAULT_DIFFKV_MAX_SORTED_RUNS, persisted: true);
    /// Policy `diffkv`: compactions into this many of the deepest non-empty levels (counting
    /// the output) merge medium values into vTables of their output level; shallower ones move
    /// only the handles (the lazy merge). Default 2 (the authors'); from 1 to `num_levels`.
    (diffkv_merge_levels, with_diffkv_merge_levels, u32, DEFAULT_DIFFKV_MERGE_LEVELS, persisted: true);
    /// Policy `diffkv`: a vLog is a GC victim, and a vTable joins the next merge through its
    /// keys, once this fraction of its bytes is garbage. Default 0.3; above 0, at most 1.
    (diffkv_gc_ratio, with_diffkv_gc_ratio, f64, DEFAULT_DIFFKV_GC_RATIO, persisted: true);
    /// Policy `diffkv`: a vTable is a GC victim once this fraction of its bytes is garbage
    /// (the garbage of key ranges no compaction merges). Default 0.7; above 0, at most 1.
    (diffkv_vtree_gc_ratio, with_diffkv_vtree_gc_ratio, f64, DEFAULT_DIFFKV_VTREE_GC_RATIO, persisted: true);
    /// Background threads that run GC jobs. Default 1; at most 64; 0 runs GC only when asked
    /// (`Db::run_gc`, `gleaner gc`).
    (gc_threads, with_gc_threads, u32, DEFAULT_GC_THREADS, persisted: true);
    /// GC threads while bytes on disk are above `space_budget_low` (or 90 % of
    /// `max_disk_bytes`) and space-aware throttling is on. Default 2; at least `gc_threads`, at
    /// most 64.
    (gc_threads_max, with_gc_threads_max, u32, DEFAULT_GC_THREADS_MAX, persisted: true);
    /// Space-aware throttling (Scavenger §3.5): above `space_budget_low` writes are delayed
    /// more the closer usage gets to `space_budget_high` and GC runs `gc_threads_max` threads;
    /// at `space_budget_high` writes wait while GC takes any table with garbage, and a stopped
    /// writer whose GC finds none compacts the whole tree to surface hidden garbage. `auto` (the default) follows `gc_policy`: on for `scavenger`, off for
    /// `terarkdb`. Without a budget (the default) it does nothing.
    (space_throttling, with_space_throttling, Switch, Switch::Auto, persisted: true);
    /// Space amplification (bytes on disk ÷ the live-data estimate) at which writes start
    /// being delayed. 0 (the default) disables the ratio budget; otherwise above 1, at most
    /// `space_budget_high`, and set together with it.
    (space_budget_low, with_space_budget_low, f64, 0.0, persisted: true);
    /// Space amplification at which writes stop until GC brings usage back below it. 0 (the
    /// default) disables the ratio budget; otherwise above 1 and set with `space_budget_low`.
    (space_budget_high, with_space_budget_high, f64, 0.0, persisted: true);
    /// Absolute budget for bytes on disk: writes are delayed from 90 % of it and stop at it. 0
    /// (the default) means none.
    (max_disk_bytes, with_max_disk_bytes, u64, 0, persisted: true);
    /// How long writes stay stopped at the space budget with GC finding nothing to reclaim
    /// before a write fails with `Error::SpaceBudgetExceeded`. Default 10,000 ms; at most one
    /// hour.
    (space_stop_timeout_ms, with_space_stop_timeout_ms, u64, DEFAULT_SPACE_STOP_TIMEOUT_MS, persisted: true);
    /// Most bytes of victim value tables one GC job reads. Default 512 MiB; at least 1 KiB (a
    /// single victim larger than this is still collected, alone).
    (gc_max_input_size, with_gc_max_input_size, u64, DEFAULT_GC_MAX_INPUT_SIZE, persisted: true);
    /// Bytes a compaction reads at once from each input key table. With direct I/O every
    /// read is a device round trip, so reading 4 KiB blocks one by one held compactions to a
    /// few tens of MB/s (docs/benchmarks.md, "Compaction read-ahead"). Memory: one window per
    /// input table, never more than the table. Default 1 MiB; 0 reads block by block; at most
    /// 64 MiB.
    (compaction_readahead_size, with_compaction_readahead_size, u64, DEFAULT_COMPACTION_READAHEAD_SIZE, persisted: true);
    /// Reads of separated values a forward scan keeps in flight ahead of itself, on a pool of
    /// reader threads shared by the database's iterators (twice this many threads, at most 32,
    /// started by the first scan that needs them). The scan walks ahead of itself (and then
    /// lands on the entries that walk found) in batches of entries of half what it has taken
    /// so far, from 4 (up to 512 where records share reads, else to twice this depth), so a
    /// short scan does not read far past its end;
    /// the records of a batch that lie within 16 KiB of each other in one value table share a
    /// read, and a table read forward again is read ahead (up to `value_readahead_size`); at
    /// most about 8 MiB is held ahead. Off under `inline_background_work` (no threads of the
    /// engine's own). Default 16; 0 reads each value when the scan reaches it; at most 64.
    (scan_prefetch_depth, with_scan_prefetch_depth, u32, DEFAULT_SCAN_PREFETCH_DEPTH, persisted: true);
    /// Bytes scans read ahead within a value table: the largest window of a prefetching scan
    /// (`scan_prefetch_depth`; at most 2 MiB), and of a scan reading its own values when
    /// consecutive records are requested. Default 1 MiB; 0 disables read-ahead (a prefetching
    /// scan then reads only adjacent records together); at most 64 MiB.
    (value_readahead_size, with_value_readahead_size, u64, DEFAULT_VALUE_READAHEAD_SIZE, persisted: true);
    /// What WAL recovery does with a damaged record: `tolerate_corrupted_tail` (default; a
    /// torn tail is cut, damage followed by valid records is an error) or
    /// `skip_any_corrupted_records` (damaged records are skipped and reported in the log).
    (wal_recovery_mode, with_wal_recovery_mode, WalRecoveryMode, DEFAULT_WAL_RECOVERY_MODE, persisted: true);
}

impl Options {
    /// The file system the database uses. Default: the real POSIX file system.
    pub fn file_system(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    /// Uses `fs` for every file access (tests pass a [`FaultFs`](crate::io::FaultFs)).
    #[must_use]
    pub fn with_file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// Runs the GC policy `factory` builds (option `gc_policy` becomes
    /// [`GcPolicyKind::Custom`], saved in OPTIONS as `custom:NAME`). The policy API
    /// ([`crate::gc::PolicyFactory`] and the roles) is unstable: it changes as the schemes
    /// that use it arrive. A database made under a custom policy is refused by a read-write open
    /// that registers no factory of that name (a read-only open needs none).
    ///
    /// The name is checked at open: 1 to [`MAX_POLICY_NAME`] letters, digits, `_` or `-`.
    #[must_use]
    pub fn with_custom_policy(mut self, factory: Arc<dyn crate::gc::PolicyFactory>) -> Self {
        self.custom_policy = Some(factory);
        self.with_gc_policy(GcPolicyKind::Custom)
    }

    /// Reads time from `clock`: what expiring writes are judged by ([`crate::expiry`]).
    /// Default: [`SystemClock`](crate::expiry::SystemClock). Not saved in OPTIONS.
    ///
    /// The database's time never goes back: a clock that once reads far ahead (a test clock
    /// left running, a system clock set wrong) moves it there for good, and an edit that acts on
    /// expired data records it, so a later open starts there too.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn crate::expiry::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The clock set with [`Options::with_clock`].
    pub fn clock(&self) -> &Arc<dyn crate::expiry::Clock> {
        &self.clock
    }

    /// The custom policy registered with [`Options::with_custom_policy`].
    pub fn custom_policy(&self) -> Option<&Arc<dyn crate::gc::PolicyFactory>> {
        self.custom_policy.as_ref()
    }

    /// Whether GC jobs read lazily: `gc_lazy_read` resolved against `gc_policy`.
    pub fn lazy_read_enabled(&self) -> bool {
        self.gc_lazy_read
            .resolve(self.gc_policy.scavenger_techniques())
    }

    /// Whether flush and GC route values by hotness: `hotness_aware_writes` resolved against
    /// `gc_policy`.
    pub fn hotness_enabled(&self) -> bool {
        self.hotness_aware_writes
            .resolve(self.gc_policy.scavenger_techniques())
    }

    /// Whether new key tables are index-decoupled and GC checks records with GetKey:
    /// `index_decoupled_tables` resolved against `gc_policy`.
    pub fn index_decoupled_enabled(&self) -> bool {
        self.index_decoupled_tables
            .resolve(self.gc_policy.scavenger_techniques())
    }

    /// The space budget the throttle enforces: `None` when space-aware throttling is off
    /// (option `space_throttling` resolved against `gc_policy`) or no budget is set.
    pub fn space_budget(&self) -> Option<crate::throttle::SpaceBudget> {
        let on = self
            .space_throttling
            .resolve(self.gc_policy.scavenger_techniques());
        let budget = self.space_budget_config();
        (on && budget.is_enabled()).then_some(budget)
    }

    /// The budget options as the throttle's configuration (whether or not throttling is on).
    fn space_budget_config(&self) -> crate::throttle::SpaceBudget {
        let ratio = |r: f64| (r != 0.0).then_some(r);
        crate::throttle::SpaceBudget {
            space_budget_low: ratio(self.space_budget_low),
            space_budget_high: ratio(self.space_budget_high),
            max_disk_bytes: (self.max_disk_bytes > 0).then_some(self.max_disk_bytes),
            gc_threads: self.gc_threads,
            gc_threads_max: self.gc_threads_max,
            gc_garbage_ratio: self.gc_garbage_ratio,
            // At the high limit writes wait for GC, so GC takes any table with garbage (highest
            // ratio first) rather than leave space it could free: a table below the normal ratio
            // still holds garbage, and writes cannot resume until some is freed.
            gc_garbage_ratio_urgent: Some(0.0),
            stop_timeout: std::time::Duration::from_millis(self.space_stop_timeout_ms),
            ..Default::default()
        }
    }

    /// A custom policy needs its factory, whose name must fit an OPTIONS line.
    fn validate_custom_policy(&self) -> Result<()> {
        if self.gc_policy != GcPolicyKind::Custom {
            return Ok(());
        }
        let Some(f) = &self.custom_policy else {
            return Err(Error::invalid(
                "option `gc_policy` is `custom`, but no policy is registered: use \
                 Options::with_custom_policy",
            ));
        };
        let name = f.name();
        if !valid_policy_name(name) {
            return Err(Error::invalid(format!(
                "custom GC policy name `{name}`: 1 to {MAX_POLICY_NAME} letters, digits, `_` or `-` \
                 (MAX_POLICY_NAME)"
            )));
        }
        Ok(())
    }

    /// True when the caller set option `name` explicitly.
    pub fn is_overridden(&self, name: &str) -> bool {
        self.overridden.contains(name)
    }

    /// Checks every range and every relation between options; the error names the option.
    pub fn validate(&self) -> Result<()> {
        fn range<T: PartialOrd + fmt::Display>(name: &str, v: T, lo: T, hi: T) -> Result<()> {
            // Written so that a NaN, which compares false with everything, is outside.
            let inside = v >= lo && v <= hi;
            if !inside {
                return Err(Error::invalid(format!(
                    "option `{name}` is {v}, but must be between {lo} and {hi}"
                )));
            }
            Ok(())
        }
        range("memtable_size", self.memtable_size, 1 << 10, 64 << 30)?;
        self.validate_custom_policy()?;
        range(
            "max_immutable_memtables",
            self.max_immutable_memtables,
            1,
            64,
        )?;
        range("key_table_size", self.key_table_size, 1 << 10, 64 << 30)?;
        range("level_base_size", self.level_base_size, 1 << 10, 1 << 50)?;
        range("level_multiplier", self.level_multiplier, 2, 100)?;
        range("num_levels", self.num_levels, 2, 12)?;
        range("l0_compaction_trigger", self.l0_compaction_trigger, 1, 1000)?;
        range("l0_slowdown_trigger", self.l0_slowdown_trigger, self.l0_compaction_trigger, 1000)
            .map_err(|_| {
                Error::invalid(format!(
                    "option `l0_slowdown_trigger` ({}) must be at least `l0_compaction_trigger` ({}) and at most 1000",
                    self.l0_slowdown_trigger, self.l0_compaction_trigger
                ))
            })?;
        range("l0_stop_trigger", self.l0_stop_trigger, self.l0_slowdown_trigger, 1000).map_err(
            |_| {
                Error::invalid(format!(
                    "option `l0_stop_trigger` ({}) must be at least `l0_slowdown_trigger` ({}) and at most 1000",
                    self.l0_stop_trigger, self.l0_slowdown_trigger
                ))
            },
        )?;
        range("tiered_run_trigger", self.tiered_run_trigger, 2, 1000)?;
        if (self.compaction_style == CompactionStyle::Tiered || self.partitioning.is_partitioned())
            && self.tiered_run_trigger > self.l0_slowdown_trigger
        {
            return Err(Error::invalid(format!(
                "option `tiered_run_trigger` ({}) must be at most `l0_slowdown_trigger` ({}): \
                 writes would be delayed before tiered compaction started merging",
                self.tiered_run_trigger, self.l0_slowdown_trigger
            )));
        }
        range("tiered_size_ratio", self.tiered_size_ratio, 0.0, 100.0)?;
        range(
            "dpkv_decay_interval",
            self.dpkv_decay_interval,
            0.01,
            86_400.0,
        )?;
        range("dpkv_hot_density", self.dpkv_hot_density, 1.0, 1e6)?;
        range("dpkv_tick_accesses", self.dpkv_tick_accesses, 0, 1 << 32)?;
        range(
            "dpkv_trie_bytes",
            self.dpkv_trie_bytes,
            4 << 10,
            crate::partition::trie::MAX_TRIE_BYTES as u64,
        )?;
        range(
            "tiered_max_space_amplification",
            self.tiered_max_space_amplification,
            0.0,
            100.0,
        )?;
        range("block_size", self.block_size, 64, 16 << 20)?;
        range(
            "block_restart_interval",
            self.block_restart_interval,
            1,
            1024,
        )?;
        range("bloom_bits_per_key", self.bloom_bits_per_key, 0, 64)?;
        range("block_cache_size", self.block_cache_size, 0, 1 << 50)?;
        range("value_cache_share", self.value_cache_share, 0.0, 0.9)?;
        range("row_cache_size", self.row_cache_size, 0, 1 << 50)?;
        range("flush_threads", self.flush_threads, 1, 64)?;
        range("compaction_threads", self.compaction_threads, 1, 64)?;
        range("max_open_files", self.max_open_files, 1, 1_000_000)?;
        range(
            "max_value_size",
            self.max_value_size,
            1,
            MAX_VALUE_SIZE_LIMIT,
        )?;
        let min_batch = self.max_value_size + MAX_KEY_SIZE as u64 + 64;
        if self.max_batch_size < min_batch || self.max_batch_size > MAX_BATCH_SIZE_LIMIT {
            return Err(Error::invalid(format!(
                "option `max_batch_size` is {}, but must be at least `max_value_size` + {} + 64 = {} \
                 and at most {}",
                self.max_batch_size, MAX_KEY_SIZE, min_batch, MAX_BATCH_SIZE_LIMIT
            )));
        }
        range(
            "max_manifest_size",
            self.max_manifest_size,
            4 << 10,
            1 << 40,
        )?;
        range("value_table_size", self.value_table_size, 1 << 10, 64 << 30)?;
        range("gc_garbage_ratio", self.gc_garbage_ratio, 0.0, 1.0)?;
        range("stale_handle_share", self.stale_handle_share, 0.0, 1.0)?;
        range("blobdb_age_cutoff", self.blobdb_age_cutoff, 0.0, 1.0)?;
        range(
            "novkv_valid_threshold",
            self.novkv_valid_threshold,
            0.0,
            1.0,
        )?;
        range("dumpkv_force_ratio", self.dumpkv_force_ratio, 0.0, 1.0)?;
        // Above `max_value_size` it is allowed: no value is then large (no vLogs).
        range(
            "diffkv_large_min",
            self.diffkv_large_min,
            0,
            MAX_VALUE_SIZE_LIMIT,
        )?;
        if self.diffkv_small_max > self.diffkv_large_min {
            return Err(Error::invalid(format!(
                "option `diffkv_small_max` is {}, but must be at most `diffkv_large_min` ({})",
                self.diffkv_small_max, self.diffkv_large_min
            )));
        }
        range(
            "diffkv_max_sorted_runs",
            self.diffkv_max_sorted_runs,
            1,
            1000,
        )?;
        range(
            "diffkv_merge_levels",
            self.diffkv_merge_levels,
            1,
            self.num_levels,
        )?;
        for (name, ratio) in [
            ("diffkv_gc_ratio", self.diffkv_gc_ratio),
            ("diffkv_vtree_gc_ratio", self.diffkv_vtree_gc_ratio),
        ] {
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(Error::invalid(format!(
                    "option `{name}` is {ratio}, but must be above 0 and at most 1"
                )));
            }
        }
        range(
            "dumpkv_train_samples",
            self.dumpkv_train_samples,
            64,
            crate::gc::dumpkv::MAX_TRAIN_SAMPLES,
        )?;
        if !self.dumpkv_time_unit.is_power_of_two() || self.dumpkv_time_unit > 1 << 40 {
            return Err(Error::invalid(format!(
                "option `dumpkv_time_unit` is {}, but must be a power of two from 1 to 2^40",
                self.dumpkv_time_unit
            )));
        }
        range(
            "blobdb_force_threshold",
            self.blobdb_force_threshold,
            0.0,
            1.0,
        )?;
        if !(self.titan_discardable_ratio > 0.0 && self.titan_discardable_ratio <= 1.0) {
            return Err(Error::invalid(format!(
                "option `titan_discardable_ratio` is {}, but must be above 0 and at most 1",
                self.titan_discardable_ratio
            )));
        }
        range("gc_threads", self.gc_threads, 0, 64)?;
        range(
            "gc_max_input_size",
            self.gc_max_input_size,
            1 << 10,
            1 << 50,
        )?;
        range(
            "compaction_readahead_size",
            self.compaction_readahead_size,
            0,
            64 << 20,
        )?;
        range("scan_prefetch_depth", self.scan_prefetch_depth, 0, 64)?;
        range(
            "value_readahead_size",
            self.value_readahead_size,
            0,
            64 << 20,
        )?;
        range("gc_threads_max", self.gc_threads_max, self.gc_threads, 64)?;
        range("drop_cache_bytes", self.drop_cache_bytes, 0, 4 << 30)?;
        range("gc_read_gap", self.gc_read_gap, 0, 16 << 20)?;
        range("gc_io_depth", self.gc_io_depth, 1, 64)?;
        if self.gc_read_yield_rate != 0 && self.gc_read_yield_rate < MIN_GC_READ_YIELD_RATE {
            return Err(Error::invalid(format!(
                "option `gc_read_yield_rate` is {}, but must be 0 (off) or at least \
                 {MIN_GC_READ_YIELD_RATE} bytes a second",
                self.gc_read_yield_rate
            )));
        }
        let max_stop_ms = crate::throttle::STOP_TIMEOUT_LIMIT.as_millis() as u64;
        range(
            "space_stop_timeout_ms",
            self.space_stop_timeout_ms,
            0,
            max_stop_ms,
        )?;
        // The budget is checked whether or not throttling is on, so a bad budget is caught
        // when it is set, not when a policy change turns it on.
        self.space_budget_config().validate()?;
        Ok(())
    }

    /// Target size of level `level` (≥ 1) in bytes.
    pub fn level_target_size(&self, level: usize) -> u64 {
        let mut size = self.level_base_size;
        for _ in 1..level {
            size = size.saturating_mul(u64::from(self.level_multiplier));
        }
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_constants() {
        let o = Options::default();
        o.validate().expect("defaults validate");
        assert_eq!(o.memtable_size(), 64 << 20);
        assert_eq!(o.key_table_size(), 64 << 20);
        assert_eq!(o.level_multiplier(), 10);
        assert_eq!(
            (
                o.l0_compaction_trigger(),
                o.l0_slowdown_trigger(),
                o.l0_stop_trigger()
            ),
            (4, 20, 36)
        );
        assert_eq!(o.block_size(), 4096);
        assert_eq!(o.bloom_bits_per_key(), 10);
        assert_eq!(o.block_cache_size(), 64 << 20);
        assert_eq!(o.compression(), Compression::Lz4);
        assert_eq!((o.flush_threads(), o.compaction_threads()), (1, 1));
        assert_eq!(o.max_value_size(), 256 << 20);
        assert!(!o.use_direct_io_for_reads() && !o.use_direct_io_for_background_writes());
        assert_eq!(o.compaction_style(), CompactionStyle::Leveled);
        assert_eq!(
            (
                o.tiered_run_trigger(),
                o.tiered_size_ratio(),
                o.tiered_max_space_amplification()
            ),
            (4, 0.01, 2.0)
        );
        // Leveled reads no tiered option: a trigger above the slowdown trigger is left alone.
        Options::default()
            .with_l0_slowdown_trigger(4)
            .with_l0_compaction_trigger(2)
            .with_tiered_run_trigger(8)
            .validate()
            .expect("not read under leveled");
    }

    #[test]
    fn invalid_values_name_the_option() {
        let cases: Vec<(Options, &str)> = vec![
            (Options::default().with_memtable_size(10), "memtable_size"),
            (Options::default().with_num_levels(1), "num_levels"),
            (
                Options::default().with_l0_slowdown_trigger(2),
                "l0_slowdown_trigger",
            ),
            (
                Options::default().with_l0_stop_trigger(10),
                "l0_stop_trigger",
            ),
            (Options::default().with_block_size(1), "block_size"),
            (
                Options::default().with_tiered_run_trigger(1),
                "tiered_run_trigger",
            ),
            (
                Options::default()
                    .with_compaction_style(CompactionStyle::Tiered)
                    .with_tiered_run_trigger(21),
                "tiered_run_trigger",
            ),
            (
                Options::default().with_tiered_size_ratio(-0.5),
                "tiered_size_ratio",
            ),
            (
                Options::default().with_tiered_size_ratio(f64::NAN),
                "tiered_size_ratio",
            ),
            (
                Options::default().with_tiered_max_space_amplification(101.0),
                "tiered_max_space_amplification",
            ),
            (Options::default().with_flush_threads(0), "flush_threads"),
            (
                Options::default().with_gc_garbage_ratio(1.5),
                "gc_garbage_ratio",
            ),
            (
                Options::default().with_gc_garbage_ratio(-0.1),
                "gc_garbage_ratio",
            ),
            (
                Options::default().with_gc_garbage_ratio(f64::NAN),
                "gc_garbage_ratio",
            ),
            (
                Options::default().with_value_cache_share(0.95),
                "value_cache_share",
            ),
            (
                Options::default().with_stale_handle_share(1.5),
                "stale_handle_share",
            ),
            (
                Options::default().with_stale_handle_share(f64::NAN),
                "stale_handle_share",
            ),
            (Options::default().with_gc_io_depth(0), "gc_io_depth"),
            (
                Options::default().with_gc_read_yield_rate(MIN_GC_READ_YIELD_RATE - 1),
                "gc_read_yield_rate",
            ),
            (
                Options::default().with_value_table_size(0),
                "value_table_size",
            ),
            (Options::default().with_gc_threads(65), "gc_threads"),
            (
                Options::default().with_max_value_size(MAX_VALUE_SIZE_LIMIT + 1),
                "max_value_size",
            ),
            (
                Options::default().with_max_batch_size(1 << 20),
                "max_batch_size",
            ),
        ];
        for (opts, name) in cases {
            let err = opts.validate().expect_err(name).to_string();
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn set_by_name_parses_and_rejects() {
        let mut o = Options::default();
        o.set("memtable_size", "4096").expect("set");
        assert_eq!(o.memtable_size(), 4096);
        assert!(o.is_overridden("memtable_size"));
        o.set("compression", "none").expect("set");
        assert_eq!(o.compression(), Compression::None);
        o.set("use_direct_io_for_reads", "true").expect("set");
        assert!(o.use_direct_io_for_reads());
        let e = o
            .set("no_such_option", "1")
            .expect_err("unknown")
            .to_string();
        assert!(e.contains("no_such_option"), "{e}");
        let e = o
            .set("block_size", "big")
            .expect_err("bad number")
            .to_string();
        assert!(e.contains("block_size") && e.contains("big"), "{e}");
        let e = o
            .set("compression", "zip")
            .expect_err("bad enum")
            .to_string();
        assert!(e.contains("compression"), "{e}");
        o.set("compaction_style", "tiered").expect("set");
        assert_eq!(o.compaction_style(), CompactionStyle::Tiered);
        let e = o
            .set("compaction_style", "universal")
            .expect_err("bad style")
            .to_string();
        assert!(
            e.contains("compaction_style") && e.contains("universal") && e.contains("tiered"),
            "{e}"
        );
    }

    #[test]
    fn saved_values_apply_only_where_not_overridden() {
        let mut o = Options::default().with_block_size(8192);
        o.apply_saved("block_size", "1024").expect("apply");
        o.apply_saved("memtable_size", "2048").expect("apply");
        assert_eq!(o.block_size(), 8192, "explicit setting wins");
        assert_eq!(o.memtable_size(), 2048, "saved value used");
        assert!(
            o.apply_saved("create_if_missing", "true").is_err(),
            "not a persisted option"
        );
        assert!(o.apply_saved("mystery", "1").is_err());
    }

    #[test]
    fn a_default_of_the_callers_yields_to_the_saved_value_and_to_set() {
        let mut o = Options::default();
        o.set_default("separate_at", "write").expect("default");
        assert_eq!(o.separate_at(), SeparateAt::Write);
        assert!(!o.is_overridden("separate_at"));
        o.apply_saved("separate_at", "flush").expect("apply");
        assert_eq!(o.separate_at(), SeparateAt::Flush, "the saved value wins");

        let mut o = Options::default();
        o.set_default("separate_at", "write").expect("default");
        o.apply_saved("memtable_size", "2048").expect("apply");
        assert_eq!(
            o.separate_at(),
            SeparateAt::Write,
            "nothing saved: the default"
        );

        let mut o = Options::default();
        o.set("separate_at", "flush").expect("set");
        o.set_default("separate_at", "write").expect("default");
        assert!(o.is_overridden("separate_at"), "still explicit");
        assert_eq!(o.separate_at(), SeparateAt::Flush, "an earlier set wins");
        assert!(
            o.set_default("separate_at", "never").is_err(),
            "checked all the same"
        );
        let mut o = Options::default();
        o.set_default("separate_at", "write").expect("default");
        o.set("separate_at", "flush").expect("set");
        o.apply_saved("separate_at", "write").expect("apply");
        assert_eq!(o.separate_at(), SeparateAt::Flush, "set wins over both");
        let e = o
            .set_default("separate_at", "never")
            .expect_err("bad value");
        assert!(e.to_string().contains("separate_at"), "{e}");
    }

    #[test]
    fn level_targets_grow_by_the_multiplier() {
        let o = Options::default()
            .with_level_base_size(1000)
            .with_level_multiplier(10);
        assert_eq!(o.level_target_size(1), 1000);
        assert_eq!(o.level_target_size(3), 100_000);
    }
}
