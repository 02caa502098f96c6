//! The results of a run: what `results.json` holds (schema documented in docs/benchmarks.md).
//! The runner fills it; the report builder reads it back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Everything one `gleaner-bench` invocation measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Schema version of this file (1).
    pub schema_version: u32,
    /// The command line that produced the results.
    pub command: String,
    /// The machine the run happened on.
    pub machine: Machine,
    /// The workload.
    pub workload: WorkloadInfo,
    /// One entry per engine, in the order given on the command line.
    pub engines: Vec<EngineResult>,
}

/// The machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Kernel (`uname -r`).
    pub kernel: String,
    /// Start time of the run, seconds since the Unix epoch.
    pub started_unix: u64,
}

/// The shape recorded for results written before `--shape` existed.
fn absolute() -> String {
    crate::shape::Shape::Absolute.to_string()
}

/// The compression recorded for results written before `--compression` existed: every engine
/// compressed its index tree's blocks with LZ4 then.
fn lz4() -> String {
    crate::engine::Compression::Lz4.to_string()
}

/// The workload, as run (identical for every engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadInfo {
    /// Key length in bytes.
    pub key_size: usize,
    /// Value-size spec (e.g. `mixed8k`).
    pub value_size: String,
    /// Key-choice spec (e.g. `zipf:0.99`).
    pub dist: String,
    /// Number of keys loaded.
    pub keys: u64,
    /// Bytes of keys and values loaded (the dataset size).
    pub load_bytes: u64,
    /// Bytes the update phase writes.
    pub update_bytes: u64,
    /// Phases, in order.
    pub phases: Vec<String>,
    /// Client threads.
    pub threads: usize,
    /// Block-cache bytes given to every engine.
    pub cache_bytes: u64,
    /// Memtable bytes given to every engine (0 in results from before it was recorded).
    #[serde(default)]
    pub memtable_bytes: u64,
    /// Key-table / SST target size given to every engine (0: not recorded).
    #[serde(default)]
    pub table_bytes: u64,
    /// Value-table / blob-file target size given to every engine (0: not recorded).
    #[serde(default)]
    pub value_file_bytes: u64,
    /// How the sizes follow the dataset (`--shape`): `absolute` or `paper`. Results from
    /// before the option read as `absolute`, the only rule there was.
    #[serde(default = "absolute")]
    pub shape: String,
    /// Per engine family in the run (`gleaner`, `rocksdb`, `fjall`), each size the harness
    /// gave it by the engine's own option name, in bytes (see `shape::engine_sizes`); empty in
    /// older results.
    #[serde(default)]
    pub engine_sizes: BTreeMap<String, BTreeMap<String, u64>>,
    /// Direct I/O requested for every engine that supports it.
    pub direct_io: bool,
    /// Block compression asked of every engine (`--compression`): `none` or `lz4`.
    /// Results from before the option read as `lz4`, what every engine used then.
    #[serde(default = "lz4")]
    pub compression: String,
    /// Space budget as a multiple of the dataset (`None`: no budget).
    pub space_budget: Option<f64>,
    /// Ratio of compressible bytes in values (0 = incompressible).
    pub compressible: f64,
    /// Random seed.
    pub seed: u64,
    /// Every write's TTL range in milliseconds (`--ttl-ms`), if writes expire.
    #[serde(default)]
    pub ttl_ms: Option<(u64, u64)>,
    /// The parameters of the `mixgraph` phases (`--mixgraph`, every one by db_bench's name),
    /// when the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixgraph: Option<String>,
}

/// One engine's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineResult {
    /// Display name (the engine spec, e.g. `gleaner:terarkdb,gc_garbage_ratio=0.3`).
    pub name: String,
    /// Engine kind (`gleaner`, `rocksdb`, `rocksdb-blob`, `fjall`, `fjall-blob`, `null`).
    pub kind: String,
    /// Per phase, in order.
    pub phases: Vec<PhaseResult>,
    /// One sample per second over the whole run.
    pub timeseries: Vec<Sample>,
    /// Set when the engine failed; the phases before the failure are still reported.
    pub error: Option<String>,
}

/// One phase of one engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Phase name (`load`, `update`, `read`, `scan`, `readwhilewriting`, `delete-range`,
    /// `ycsb-a`..`ycsb-f`).
    pub name: String,
    /// Set when the phase did not run for this engine, and why (`not supported`: a
    /// `delete-range` phase on an engine without a range delete); its figures are then all
    /// zero and mean nothing. Absent when the phase ran, and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// When the phase began, in seconds on the clock of the engine's time series
    /// ([`Sample::t`]): where the plots mark its start. Absent for a skipped phase and in
    /// older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    /// Operations completed.
    pub ops: u64,
    /// Wall-clock seconds, budget pauses included.
    pub seconds: f64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// Megabytes (10^6) of user keys and values written or read per second.
    pub mb_per_sec: f64,
    /// Latency of one operation in microseconds.
    pub latency_us: Latency,
    /// Bytes the process read from the device during the phase (`/proc/self/io` read_bytes).
    pub device_bytes_read: u64,
    /// Bytes the process wrote to the device during the phase (`/proc/self/io` write_bytes).
    pub device_bytes_written: u64,
    /// Bytes of user keys and values the phase wrote.
    pub user_bytes_written: u64,
    /// `device_bytes_written ÷ user_bytes_written` (0 for read-only phases).
    pub write_amp: f64,
    /// Space at the end of the phase and at its peak.
    pub space: Space,
    /// Seconds the harness paused the workload because the engine was over its space budget.
    pub stall_seconds: f64,
    /// Times the engine's disk usage exceeded the budget for 10 s without progress.
    pub budget_violations: u64,
    /// Seconds the engine itself throttled writes (Gleaner's stall counters), when known.
    pub engine_stall_seconds: Option<f64>,
    /// Garbage collection during the phase (Gleaner only).
    pub gc: Option<GcFigures>,
    /// The engine's own I/O counters for the phase, when it has them (free-form per engine).
    pub engine_io: Option<serde_json::Value>,
    /// The engine's index tree at the end of the phase, when it reports it (absent in older
    /// results).
    #[serde(default)]
    pub tree: Option<TreeShape>,
    /// The range deletes of a `delete-range` phase on their own (the figures above cover all
    /// of its operations); absent for other phases and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_range: Option<DeleteRangeFigures>,
    /// Per kind of operation (`get`, `put`, `seek`, `read-modify-write`, `range-delete`), in
    /// phases that mix several (the figures above cover all of them); empty otherwise and in
    /// older results.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_op: BTreeMap<String, OpFigures>,
    /// CPU seconds the process spent in the phase, by thread role: `clients` (the workload's
    /// threads, which also write the engine's WAL and lead its write groups), `flush`,
    /// `compaction`, `gc` (jobs and their I/O helpers), `purge`, `read-ahead`, `hotness`,
    /// `harness` (the monitor; the main thread's end-of-phase flush wait), `other` (threads
    /// of no known name), `exited` (threads that ended during the phase, clients aside).
    /// Roles with no CPU are left out; empty where `/proc` is absent and in older results.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_seconds: BTreeMap<String, f64>,
}

/// One kind of operation of a phase that mixes several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OpFigures {
    /// Operations of the kind completed.
    pub ops: u64,
    /// Their latencies.
    pub latency_us: Latency,
}

/// The range deletes of one `delete-range` phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeleteRangeFigures {
    /// Range deletes completed.
    pub ops: u64,
    /// Consecutive keys each range spans (`--delete-range-keys`).
    pub keys_per_range: u64,
    /// Keys that held a value when a range delete removed them (ranges may overlap earlier
    /// ones; the updates between them write some keys back).
    pub keys_removed: u64,
    /// Latency of one range delete in microseconds.
    pub latency_us: Latency,
}

/// The files of an engine's index tree (key tables / SSTs / segments) per level, and its value
/// files, at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeShape {
    /// Levels holding at least one file, L0 included (RocksDB fills its levels from the last
    /// one up, so the deepest level's number says nothing about depth; this count does).
    pub levels_in_use: usize,
    /// Per level, L0 first, through the engine's last level.
    pub levels: Vec<LevelShape>,
    /// Value tables / blob files (Gleaner: live and retired; RocksDB: `rocksdb.num-blob-files`;
    /// fjall: its blob files); `None` for engines without key-value separation.
    pub value_files: Option<u64>,
}

impl TreeShape {
    /// A tree of `levels` (L0 first) and `value_files`, counting the levels in use.
    pub fn new(levels: Vec<LevelShape>, value_files: Option<u64>) -> TreeShape {
        TreeShape {
            levels_in_use: levels.iter().filter(|l| l.files > 0).count(),
            levels,
            value_files,
        }
    }
}

/// One level of an index tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelShape {
    /// Files in the level.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// Space of one engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Space {
    /// Bytes of live user data at the end (keys and values of the newest versions).
    pub live_bytes: u64,
    /// Bytes of the engine's directory at the end of the phase.
    pub disk_bytes_end: u64,
    /// Largest directory size sampled during the phase.
    pub disk_bytes_peak: u64,
    /// `disk_bytes_end ÷ live_bytes`.
    pub space_amp_end: f64,
    /// `disk_bytes_peak ÷ live_bytes`.
    pub space_amp_peak: f64,
}

/// Garbage collection during one phase (differences of Gleaner's counters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GcFigures {
    /// GC jobs committed.
    pub jobs: u64,
    /// Bytes GC read from value tables.
    pub value_bytes_read: u64,
    /// Bytes of value-table indexes GC read (a lazy read's first pass).
    #[serde(default)]
    pub index_bytes_read: u64,
    /// Bytes GC's validity checks read from the index tree.
    pub lookup_bytes_read: u64,
    /// Validity checks the DropCache answered without an index-tree lookup.
    #[serde(default)]
    pub drop_cache_answers: u64,
    /// Bytes of value tables GC wrote.
    pub bytes_written: u64,
    /// Of those, bytes per value class, by the policy's names for the classes (`hot` and
    /// `cold` with hotness-aware writing, `default` otherwise; empty in older results).
    #[serde(default)]
    pub bytes_written_by_class: std::collections::BTreeMap<String, u64>,
    /// Bytes of old records compactions relocated (Gleaner's `blobdb` policy; 0 in older
    /// results).
    #[serde(default)]
    pub relocated_bytes: u64,
    /// Handles written back into the index tree (Gleaner's `titan` policy; 0 in older results).
    #[serde(default)]
    pub written_back: u64,
    /// Seconds reading victims.
    pub read_seconds: f64,
    /// Seconds checking validity.
    pub lookup_seconds: f64,
    /// Seconds writing outputs.
    pub write_seconds: f64,
    /// Seconds background GC waited, yielding to reads (0 in older results).
    #[serde(default)]
    pub paced_seconds: f64,
    /// Seconds GC jobs ran, wall clock, from claim to commit (Gleaner; 0 for peers and in older
    /// results): beside the phase's seconds, how much of it GC was at work.
    #[serde(default)]
    pub job_seconds: f64,
    /// Of those, seconds jobs waited for compactions running at their claim (Gleaner).
    #[serde(default)]
    pub compaction_wait_seconds: f64,
    /// The policy's own figures at the end of the phase, cumulative since the open (not a
    /// difference: some are levels, as DumpKV's lifetime points); empty for peers and in older
    /// results.
    #[serde(default)]
    pub policy: std::collections::BTreeMap<String, u64>,
}

/// One sample of one engine's time series, covering the interval since the previous sample of
/// its phase (one second in a long phase, down to 50 ms in a short one:
/// [`crate::runner::series`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the engine's monitor started, at the end of the interval.
    pub t: f64,
    /// The phase running.
    pub phase: String,
    /// Operations completed per second over the interval.
    pub ops_per_sec: f64,
    /// Bytes of the engine's directory.
    pub disk_bytes: u64,
    /// Device megabytes (10^6) read per second over the interval.
    pub device_read_mb_s: f64,
    /// Device megabytes (10^6) written per second over the interval.
    pub device_write_mb_s: f64,
}
