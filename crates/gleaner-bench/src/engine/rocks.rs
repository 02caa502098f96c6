//! RocksDB under test (`rocksdb`, and `rocksdb-blob` with integrated BlobDB). Options:
//! `min_blob_size=BYTES` (1024), `blob_file_size=BYTES` (256 MiB), `blob_gc_age_cutoff=F` (0.25),
//! `blob_gc_force_threshold=F` (1.0), `bloom_bits=N` (10).
//!
//! SST blocks are compressed as `--compression` says ([`sst_compression`]); blob files are
//! never compressed (`blob_compression_type` none, as before the flag).

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, CompactOptions, DB, DBCompressionType,
    Direction, IteratorMode, Options, WriteBatch, WriteOptions,
};

use super::{
    CommonConfig, Compression, Engine, EngineKind, EngineResult, EngineSpec, Found, check_names,
    option,
};
use crate::results::{LevelShape, TreeShape};

/// Most levels asked of RocksDB's properties (it allows up to 127 but defaults to 7).
const MAX_LEVELS: usize = 128;

const KNOWN: [&str; 6] = [
    "min_blob_size",
    "blob_cache",
    "blob_file_size",
    "blob_gc_age_cutoff",
    "blob_gc_force_threshold",
    "bloom_bits",
];

/// RocksDB's SST block compression for the harness's `--compression` (this build links LZ4
/// only: the `rocksdb` crate's `lz4` feature).
pub(super) fn sst_compression(c: Compression) -> DBCompressionType {
    match c {
        Compression::None => DBCompressionType::None,
        Compression::Lz4 => DBCompressionType::Lz4,
    }
}

/// Checks the spec's options without opening anything.
pub(super) fn check_options(spec: &EngineSpec) -> Result<(), String> {
    check_names(spec, &KNOWN, EngineKind::Rocksdb, &["bloom_bits"])?;
    option::<u64>(spec, "min_blob_size", 1024)?;
    option::<u64>(spec, "blob_file_size", 256 << 20)?;
    for name in ["blob_gc_age_cutoff", "blob_gc_force_threshold"] {
        let v = option::<f64>(spec, name, 0.5)?;
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("engine `{spec}`: `{name}` must be between 0 and 1"));
        }
    }
    option::<f64>(spec, "bloom_bits", 10.0)?;
    option::<bool>(spec, "blob_cache", true)?;
    Ok(())
}

/// A RocksDB database.
pub struct RocksEngine {
    db: DB,
    opts: Options,
    blob: bool,
    age_cutoff: f64,
    force_threshold: f64,
    write: WriteOptions,
}

impl RocksEngine {
    /// Opens a new database in `dir`.
    pub fn open(spec: &EngineSpec, dir: &Path, common: &CommonConfig) -> EngineResult<Self> {
        let blob = spec.kind == EngineKind::RocksdbBlob;
        let mut o = Options::default();
        o.create_if_missing(true);
        o.increase_parallelism(common.background_threads.max(1) as i32);
        o.set_max_background_jobs(common.background_threads.max(2) as i32);
        o.set_write_buffer_size(common.memtable_bytes as usize);
        o.set_target_file_size_base(common.table_bytes);
        // Set only under `--shape paper`; otherwise RocksDB's default (256 MiB), as before.
        // `max_total_wal_size` stays 0 (4 × the write buffers) and `max_compaction_bytes` at
        // 25 × the target file size: both follow the sizes above by themselves.
        if let Some(bytes) = common.level_base_bytes {
            o.set_max_bytes_for_level_base(bytes);
        }
        o.set_compression_type(sst_compression(common.compression));
        o.set_use_direct_reads(common.direct_io);
        o.set_use_direct_io_for_flush_and_compaction(common.direct_io);
        o.enable_statistics();
        let mut table = BlockBasedOptions::default();
        let cache = Cache::new_lru_cache(common.cache_bytes as usize);
        table.set_block_cache(&cache);
        table.set_bloom_filter(option(spec, "bloom_bits", 10.0)?, false);
        table.set_cache_index_and_filter_blocks(true);
        o.set_block_based_table_factory(&table);
        let age_cutoff = option(spec, "blob_gc_age_cutoff", 0.25)?;
        let force_threshold = option(spec, "blob_gc_force_threshold", 1.0)?;
        if blob {
            o.set_enable_blob_files(true);
            o.set_min_blob_size(option(spec, "min_blob_size", 1024)?);
            o.set_blob_file_size(option(spec, "blob_file_size", common.value_file_bytes)?);
            // Blob files stay uncompressed whatever `--compression` says, as before the flag.
            o.set_blob_compression_type(DBCompressionType::None);
            o.set_enable_blob_gc(true);
            o.set_blob_gc_age_cutoff(age_cutoff);
            o.set_blob_gc_force_threshold(force_threshold);
            // Hot blobs share the block cache's budget (RocksDB's documented setup for a blob
            // cache), as Gleaner's value cache shares its block cache's.
            if option(spec, "blob_cache", true)? {
                o.set_blob_cache(&cache);
            }
        }
        let db = DB::open(&o, dir)?;
        let mut write = WriteOptions::default();
        write.set_sync(false);
        Ok(RocksEngine {
            db,
            opts: o,
            blob,
            age_cutoff,
            force_threshold,
            write,
        })
    }

    /// The value of ticker `name` in RocksDB's statistics text.
    fn ticker(stats: &str, name: &str) -> Option<u64> {
        stats.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.trim_start();
            rest.strip_prefix("COUNT :")?.trim().parse().ok()
        })
    }
}

impl Engine for RocksEngine {
    fn kind(&self) -> &'static str {
        if self.blob { "rocksdb-blob" } else { "rocksdb" }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Found>> {
        Ok(self.db.get_pinned(key)?.map(|v| Found::of(&v)))
    }

    fn scan(&self, start: &[u8], count: usize) -> EngineResult<(usize, u64)> {
        let (mut n, mut bytes) = (0, 0u64);
        for item in self
            .db
            .iterator(IteratorMode::From(start, Direction::Forward))
            .take(count)
        {
            let (k, v) = item?;
            bytes += (k.len() + v.len()) as u64;
            n += 1;
        }
        Ok((n, bytes))
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> EngineResult<()> {
        // One range tombstone in the default column family, written with the harness's write
        // options (not synced). The crate (0.24) offers `DB::delete_range_cf_opt`, which needs a
        // column-family handle, or a batch holding `WriteBatch::delete_range`, which targets
        // the default family; RocksDB's own `DB::DeleteRange` is that same one-entry batch.
        let mut batch = WriteBatch::default();
        batch.delete_range(start, end);
        Ok(self.db.write_opt(batch, &self.write)?)
    }

    fn flush(&self) -> EngineResult<()> {
        Ok(self.db.flush()?)
    }

    fn reclaim(&self) -> EngineResult<()> {
        // A full compaction that rewrites the bottommost level too; for BlobDB, with blob GC
        // forced over every blob file for its duration.
        if self.blob {
            self.db.set_options(&[
                ("blob_garbage_collection_age_cutoff", "1.0"),
                ("blob_garbage_collection_force_threshold", "0.0"),
            ])?;
        }
        let mut c = CompactOptions::default();
        c.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        self.db.compact_range_opt::<&[u8], &[u8]>(None, None, &c);
        if self.blob {
            let age = self.age_cutoff.to_string();
            let force = self.force_threshold.to_string();
            self.db.set_options(&[
                ("blob_garbage_collection_age_cutoff", age.as_str()),
                ("blob_garbage_collection_force_threshold", force.as_str()),
            ])?;
        }
        Ok(())
    }

    fn stall_seconds(&self) -> Option<f64> {
        let stats = self.opts.get_statistics()?;
        Self::ticker(&stats, "rocksdb.stall.micros").map(|m| m as f64 / 1e6)
    }

    fn io_counters(&self) -> Option<serde_json::Value> {
        let stats = self.opts.get_statistics()?;
        let names = [
            "rocksdb.bytes.written",
            "rocksdb.bytes.read",
            "rocksdb.flush.write.bytes",
            "rocksdb.compact.read.bytes",
            "rocksdb.compact.write.bytes",
            "rocksdb.wal.bytes",
            "rocksdb.blobdb.blob.file.bytes.written",
            "rocksdb.blobdb.blob.file.bytes.read",
            "rocksdb.blobdb.gc.num.files",
            "rocksdb.blobdb.gc.bytes.relocated",
            "rocksdb.stall.micros",
        ];
        let map: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .filter_map(|n| Self::ticker(&stats, n).map(|v| (n.to_string(), v.into())))
            .collect();
        Some(serde_json::Value::Object(map))
    }

    fn tree_shape(&self) -> Option<TreeShape> {
        // One call gives files and bytes per level from one version (`GetLiveFilesMetaData`);
        // the `rocksdb.num-files-at-level{N}` properties would give counts only, each from its
        // own moment. Levels up to the configured number (7 by default; with
        // `level_compaction_dynamic_level_bytes`, the default, data settles in the last ones).
        let files = self.db.live_files().ok()?;
        let num_levels = (0..)
            .take_while(|n| {
                self.db
                    .property_int_value(format!("rocksdb.num-files-at-level{n}").as_str())
                    .is_ok_and(|v| v.is_some())
            })
            .count()
            .min(MAX_LEVELS);
        let deepest = files.iter().map(|f| f.level.max(0) as usize + 1).max();
        let mut levels = vec![LevelShape::default(); num_levels.max(deepest.unwrap_or(0))];
        for f in &files {
            let level = &mut levels[f.level.max(0) as usize];
            level.files += 1;
            level.bytes += f.size as u64;
        }
        let value_files = if self.blob {
            self.db
                .property_int_value("rocksdb.num-blob-files")
                .ok()
                .flatten()
        } else {
            None
        };
        Some(TreeShape::new(levels, value_files))
    }

    fn close(&self) -> EngineResult<()> {
        self.db.flush()?;
        self.db.cancel_all_background_work(true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::tests::common;

    #[test]
    fn the_compression_flag_maps_to_rocksdb_types() {
        assert!(matches!(
            sst_compression(Compression::None),
            DBCompressionType::None
        ));
        assert!(matches!(
            sst_compression(Compression::Lz4),
            DBCompressionType::Lz4
        ));
    }

    /// The `compression` and `blob_compression_type` lines of the OPTIONS file RocksDB wrote
    /// into `dir`.
    fn written_compression(dir: &Path) -> (String, String) {
        let file = std::fs::read_dir(dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("OPTIONS-"))
            })
            .max()
            .expect("an OPTIONS file");
        let text = std::fs::read_to_string(file).expect("OPTIONS");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .to_string()
        };
        (value("compression"), value("blob_compression_type"))
    }

    #[test]
    fn the_compression_flag_reaches_rocksdbs_options() {
        for (compression, sst) in [
            (Compression::None, "kNoCompression"),
            (Compression::Lz4, "kLZ4Compression"),
        ] {
            for kind in ["rocksdb", "rocksdb-blob"] {
                let dir = tempfile::tempdir().expect("tempdir");
                let spec: EngineSpec = kind.parse().expect("spec");
                let engine =
                    RocksEngine::open(&spec, dir.path(), &common(compression)).expect("open");
                engine.close().expect("close");
                drop(engine);
                assert_eq!(
                    written_compression(dir.path()),
                    (sst.to_string(), "kNoCompression".to_string()),
                    "{kind} with --compression {compression}"
                );
            }
        }
    }
}
