//! fjall under test (`fjall` and `fjall-blob` with key-value separation). Options:
//! `separation_threshold=BYTES` (fjall-blob, default 1024), `blob_file_size=BYTES` (256 MiB).
//! fjall has no direct I/O, so `--direct-io` does not apply to it.

use std::path::Path;

use fjall::{
    Config, GarbageCollection, Keyspace, KvSeparationOptions, PartitionCreateOptions,
    PartitionHandle, PersistMode,
};

use super::{
    CommonConfig, Engine, EngineKind, EngineResult, EngineSpec, Found, check_names, option,
};

const KNOWN: [&str; 2] = ["separation_threshold", "blob_file_size"];

/// Checks the spec's options without opening anything.
pub(super) fn check_options(spec: &EngineSpec) -> Result<(), String> {
    check_names(spec, &KNOWN, EngineKind::Fjall, &["blob_file_size"])?;
    option::<u32>(spec, "separation_threshold", 1024)?;
    option::<u64>(spec, "blob_file_size", 256 << 20)?;
    Ok(())
}

/// A fjall keyspace with one partition.
pub struct FjallEngine {
    keyspace: Keyspace,
    partition: PartitionHandle,
    blob: bool,
}

impl FjallEngine {
    /// Opens a new keyspace in `dir`.
    pub fn open(spec: &EngineSpec, dir: &Path, common: &CommonConfig) -> EngineResult<Self> {
        let blob = spec.kind == EngineKind::FjallBlob;
        let keyspace = Config::new(dir)
            .cache_size(common.cache_bytes)
            .max_write_buffer_size(common.memtable_bytes.saturating_mul(2))
            .open()?;
        let memtable = u32::try_from(common.memtable_bytes).unwrap_or(u32::MAX);
        let mut opts = PartitionCreateOptions::default().max_memtable_size(memtable);
        if blob {
            opts = opts.with_kv_separation(
                KvSeparationOptions::default()
                    .separation_threshold(option(spec, "separation_threshold", 1024)?)
                    .file_target_size(option(spec, "blob_file_size", 256 << 20)?),
            );
        }
        let partition = keyspace.open_partition("bench", opts)?;
        Ok(FjallEngine {
            keyspace,
            partition,
            blob,
        })
    }
}

impl Engine for FjallEngine {
    fn kind(&self) -> &'static str {
        if self.blob { "fjall-blob" } else { "fjall" }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
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

    fn flush(&self) -> EngineResult<()> {
        Ok(self.keyspace.persist(PersistMode::SyncAll)?)
    }

    fn reclaim(&self) -> EngineResult<()> {
        self.partition.major_compact()?;
        if self.blob {
            self.partition.gc_scan()?;
            self.partition.gc_with_space_amp_target(1.0)?;
            self.partition.gc_drop_stale_segments()?;
        }
        Ok(())
    }

    fn close(&self) -> EngineResult<()> {
        Ok(self.keyspace.persist(PersistMode::SyncAll)?)
    }
}
