//! fjall under test (`fjall` and `fjall-blob` with key-value separation). Options, all of
//! fjall-blob: `separation_threshold=BYTES` (1024), `blob_file_size=BYTES` (the harness's value
//! file size), `gc_staleness=F` (0.5) and `gc_interval_ms=N` (1000).
//!
//! Segment blocks are compressed as `--compression` says ([`block_compression`]). fjall 2.11
//! copies a partition's compression to its blob files, so fjall-blob's blobs follow it too
//! (LZ4 under the default, as before the flag; RocksDB's and Gleaner's values are never
//! compressed).
//!
//! fjall has no direct I/O, so `--direct-io` does not apply to it: its reads are served from
//! the operating system's page cache, which the other engines bypass.
//!
//! fjall leaves blob GC to the application; fjall-blob here does what its documentation asks
//! of one: a background thread that every `gc_interval_ms` scans the blob files and rewrites
//! those at least `gc_staleness` stale, then drops fully stale ones.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use fjall::{
    CompressionType, Config, GarbageCollection, Keyspace, KvSeparationOptions,
    PartitionCreateOptions, PartitionHandle, PersistMode,
};

use super::{
    CommonConfig, Compression, Engine, EngineKind, EngineResult, EngineSpec, Found, check_names,
    option,
};
use crate::results::{LevelShape, TreeShape};
use crate::shape;

const KNOWN: [&str; 4] = [
    "separation_threshold",
    "blob_file_size",
    "gc_staleness",
    "gc_interval_ms",
];

/// fjall's block compression for the harness's `--compression` (fjall 2.11: LZ4, its default
/// `lz4` feature).
fn block_compression(c: Compression) -> CompressionType {
    match c {
        Compression::None => CompressionType::None,
        Compression::Lz4 => CompressionType::Lz4,
    }
}

/// Checks the spec's options without opening anything.
pub(super) fn check_options(spec: &EngineSpec) -> Result<(), String> {
    check_names(spec, &KNOWN, EngineKind::Fjall, &[])?;
    option::<u32>(spec, "separation_threshold", 1024)?;
    option::<u64>(spec, "blob_file_size", 256 << 20)?;
    gc_settings(spec)?;
    Ok(())
}

/// The background GC's staleness threshold and interval.
fn gc_settings(spec: &EngineSpec) -> Result<(f32, Duration), String> {
    let staleness = option::<f32>(spec, "gc_staleness", 0.5)?;
    if !(staleness > 0.0 && staleness <= 1.0) {
        return Err(format!("engine `{spec}`: `gc_staleness` must be in (0, 1]"));
    }
    let interval = option::<u64>(spec, "gc_interval_ms", 1000)?;
    if !(10..=3_600_000).contains(&interval) {
        return Err(format!(
            "engine `{spec}`: `gc_interval_ms` must be from 10 to 3600000"
        ));
    }
    Ok((staleness, Duration::from_millis(interval)))
}

/// Staleness threshold of the harness's reclaim request: rewrite every blob file with garbage.
const RECLAIM_STALENESS: f32 = 0.01;

/// One blob-GC pass: scan, rewrite stale files, drop fully stale ones. A pass holds `gate`
/// exclusively: passes must not interleave (the background thread and reclaim requests), and a
/// pass must not run alongside inserts. fjall 2.11's `gc_scan` walks the tree holding read
/// guards on the memtables and takes more of them as it goes; an insert that rotates the
/// memtable meanwhile queues for the write lock, which blocks the scan's next read guard, and
/// both wait forever (seen in the paper run: every thread parked, no I/O; the same lock pattern
/// as fjall issue #74). Inserts therefore hold `gate` shared.
fn blob_gc(partition: &PartitionHandle, gate: &RwLock<()>, staleness: f32) -> fjall::Result<()> {
    let _pass = gate.write();
    partition.gc_scan()?;
    partition.gc_with_staleness_threshold(staleness)?;
    partition.gc_drop_stale_segments()?;
    Ok(())
}

/// The fjall-blob GC thread and how to stop it.
struct GcThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    /// The first error a pass returned (reported on close).
    error: Arc<Mutex<Option<String>>>,
}

impl GcThread {
    fn start(
        partition: PartitionHandle,
        lock: Arc<RwLock<()>>,
        staleness: f32,
        interval: Duration,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let (s, e) = (Arc::clone(&stop), Arc::clone(&error));
        let handle = std::thread::Builder::new()
            .name("fjall-blob-gc".into())
            .spawn(move || {
                let mut next = Instant::now() + interval;
                while !s.load(Ordering::Relaxed) {
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    if let Err(err) = blob_gc(&partition, &lock, staleness) {
                        e.lock().get_or_insert(err.to_string());
                        return;
                    }
                    next = Instant::now() + interval;
                }
            })?;
        Ok(GcThread {
            stop,
            handle,
            error,
        })
    }

    fn stop(self) -> EngineResult<()> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
        match self.error.lock().take() {
            Some(e) => Err(format!("fjall blob GC failed: {e}").into()),
            None => Ok(()),
        }
    }
}

/// A fjall keyspace with one partition.
pub struct FjallEngine {
    keyspace: Keyspace,
    partition: PartitionHandle,
    blob: bool,
    /// Held shared by inserts and exclusively by blob-GC passes (see [`blob_gc`]).
    gc_lock: Arc<RwLock<()>>,
    gc: Mutex<Option<GcThread>>,
}

impl FjallEngine {
    /// Opens a new keyspace in `dir`.
    pub fn open(spec: &EngineSpec, dir: &Path, common: &CommonConfig) -> EngineResult<Self> {
        let blob = spec.kind == EngineKind::FjallBlob;
        // Journals are kept until the memtables they cover are flushed: allow four memtables'
        // worth, as RocksDB's default `max_total_wal_size` does (see `shape`).
        let keyspace = Config::new(dir)
            .cache_size(common.cache_bytes)
            .max_write_buffer_size(shape::fjall_write_buffer_bytes(common.memtable_bytes))
            .max_journaling_size(shape::fjall_journal_bytes(common.memtable_bytes))
            .open()?;
        let memtable = u32::try_from(common.memtable_bytes).unwrap_or(u32::MAX);
        // fjall 2.11's Leveled strategy has no level-base option: level 1 targets
        // `target_size × l0_threshold`, so with the default threshold of 4 it is four tables,
        // the paper's 256 MiB to 64 MiB; `common.level_base_bytes` is met that way.
        let leveled = fjall::compaction::Leveled {
            target_size: shape::fjall_target_size(common.table_bytes),
            l0_threshold: shape::FJALL_L0_THRESHOLD,
            ..fjall::compaction::Leveled::default()
        };
        // Set before the key-value separation below, which copies it to the blob files.
        let mut opts = PartitionCreateOptions::default()
            .compression(block_compression(common.compression))
            .max_memtable_size(memtable)
            .compaction_strategy(fjall::compaction::Strategy::Leveled(leveled));
        if blob {
            opts = opts.with_kv_separation(
                KvSeparationOptions::default()
                    .separation_threshold(option(spec, "separation_threshold", 1024)?)
                    .file_target_size(option(spec, "blob_file_size", common.value_file_bytes)?),
            );
        }
        let partition = keyspace.open_partition("bench", opts)?;
        let (staleness, interval) = gc_settings(spec)?;
        let gc_lock = Arc::new(RwLock::new(()));
        let gc = if blob {
            Some(GcThread::start(
                partition.clone(),
                Arc::clone(&gc_lock),
                staleness,
                interval,
            )?)
        } else {
            None
        };
        Ok(FjallEngine {
            keyspace,
            partition,
            blob,
            gc_lock,
            gc: Mutex::new(gc),
        })
    }
}

impl Engine for FjallEngine {
    fn kind(&self) -> &'static str {
        if self.blob { "fjall-blob" } else { "fjall" }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let _gate = self.blob.then(|| self.gc_lock.read());
        Ok(self.partition.insert(key, value)?)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Found>> {
        Ok(self.partition.get(key)?.map(|v| Found::of(&v)))
    }

    fn scan(&self, start: &[u8], count: usize) -> EngineResult<(usize, u64)> {
        let (mut n, mut bytes) = (0, 0u64);
        for item in self.partition.range(start.to_vec()..).take(count) {
            let (k, v) = item?;
            bytes += (k.len() + v.len()) as u64;
            n += 1;
        }
        Ok((n, bytes))
    }

    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> EngineResult<()> {
        // fjall 2.11 (and lsm-tree 2.10 below it) has no range delete: a partition removes one
        // key at a time (`remove`, `Batch::remove`), and lsm-tree's range tombstones are only
        // reserved fields of its segment format. The runner skips `delete-range` phases for
        // this engine (`supports_delete_range`); a delete per key would measure something else.
        Err(format!("{} has no range delete (fjall 2.11)", self.kind()).into())
    }

    fn supports_delete_range(&self) -> bool {
        false
    }

    fn flush(&self) -> EngineResult<()> {
        // Like the other engines' flush: the memtable goes to a segment (fjall's `persist`
        // only syncs the journal).
        self.partition.rotate_memtable_and_wait()?;
        Ok(self.keyspace.persist(PersistMode::SyncAll)?)
    }

    fn reclaim(&self) -> EngineResult<()> {
        self.partition.major_compact()?;
        if self.blob {
            blob_gc(&self.partition, &self.gc_lock, RECLAIM_STALENESS)?;
        }
        Ok(())
    }

    fn tree_shape(&self) -> Option<TreeShape> {
        // fjall documents no per-level figures; its tree's level manifest is public but
        // `#[doc(hidden)]` (fjall 2.11 / lsm-tree 2.10, pinned by Cargo.lock).
        let tree = match &self.partition.tree {
            fjall::AnyTree::Standard(t) => t,
            fjall::AnyTree::Blob(b) => &b.index.0,
        };
        let manifest = tree.levels.read().ok()?;
        let levels = manifest
            .levels
            .iter()
            .map(|level| LevelShape {
                files: level.segments.len() as u64,
                bytes: level.segments.iter().map(|s| s.metadata.file_size).sum(),
            })
            .collect();
        drop(manifest);
        let value_files = self.blob.then(|| self.partition.blob_file_count() as u64);
        Some(TreeShape::new(levels, value_files))
    }

    fn close(&self) -> EngineResult<()> {
        if let Some(gc) = self.gc.lock().take() {
            gc.stop()?;
        }
        Ok(self.keyspace.persist(PersistMode::SyncAll)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::tests::common;

    #[test]
    fn the_compression_flag_reaches_fjalls_trees() {
        for (compression, expected) in [
            (Compression::None, CompressionType::None),
            (Compression::Lz4, CompressionType::Lz4),
        ] {
            assert_eq!(block_compression(compression), expected);
            for kind in ["fjall", "fjall-blob"] {
                let dir = tempfile::tempdir().expect("tempdir");
                let spec: EngineSpec = kind.parse().expect("spec");
                let engine =
                    FjallEngine::open(&spec, dir.path(), &common(compression)).expect("open");
                let (blocks, blobs) = match &engine.partition.tree {
                    fjall::AnyTree::Standard(t) => (t.config.compression, None),
                    fjall::AnyTree::Blob(b) => (
                        b.index.0.config.compression,
                        Some(b.index.0.config.blob_compression),
                    ),
                };
                assert_eq!(blocks, expected, "{kind} with --compression {compression}");
                let blob_expected = (kind == "fjall-blob").then_some(expected);
                assert_eq!(blobs, blob_expected, "{kind}: blobs follow the blocks");
                engine.close().expect("close");
            }
        }
    }
}
