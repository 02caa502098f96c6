//! Gleaner under test: `gleaner[:POLICY][,option=value...]`, where options are any
//! `gleaner::Options` names (as for `gleaner --option`).

use std::path::Path;

use gleaner::{Db, Options, ReadOptions};

use super::{CommonConfig, Engine, EngineResult, EngineSpec, Found, GcCounters};

/// Builds the options for `spec` on top of the harness's common knobs; the spec's options win.
fn options(spec: &EngineSpec, common: Option<&CommonConfig>) -> Result<Options, String> {
    let mut o = Options::default();
    if let Some(c) = common {
        o = o
            .with_block_cache_size(c.cache_bytes)
            .with_use_direct_io_for_reads(c.direct_io)
            .with_use_direct_io_for_background_writes(c.direct_io)
            .with_memtable_size(c.memtable_bytes)
            .with_key_table_size(c.table_bytes)
            .with_value_table_size(c.value_file_bytes);
    }
    if let Some(policy) = &spec.policy {
        o.set("gc_policy", policy)
            .map_err(|e| format!("engine `{spec}`: {e}"))?;
    }
    for (name, value) in &spec.options {
        o.set(name, value)
            .map_err(|e| format!("engine `{spec}`: {e}"))?;
    }
    o.validate().map_err(|e| format!("engine `{spec}`: {e}"))?;
    Ok(o)
}

/// Checks the spec's policy and options (with the harness's knobs when given) without opening
/// anything.
pub(super) fn check_options(
    spec: &EngineSpec,
    common: Option<&CommonConfig>,
) -> Result<(), String> {
    options(spec, common).map(|_| ())
}

/// A Gleaner database.
pub struct GleanerEngine {
    db: Db,
}

impl GleanerEngine {
    /// Opens a new database in `dir`.
    pub fn open(spec: &EngineSpec, dir: &Path, common: &CommonConfig) -> EngineResult<Self> {
        let opts = options(spec, Some(common))?;
        Ok(GleanerEngine {
            db: Db::open(dir, opts)?,
        })
    }

    /// The database (for figures beyond the trait).
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for GleanerEngine {
    fn kind(&self) -> &'static str {
        "gleaner"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db.put(key, value)?)
    }

    fn get(&self, key: &[u8]) -> EngineResult<Option<Found>> {
        Ok(self.db.get(key)?.map(|v| Found::of(&v)))
    }

    fn scan(&self, start: &[u8], count: usize) -> EngineResult<(usize, u64)> {
        let mut it = self.db.iter(&ReadOptions::default())?;
        it.seek(start)?;
        let (mut n, mut bytes) = (0, 0u64);
        while it.valid() && n < count {
            bytes += (it.key().len() + it.value().len()) as u64;
            n += 1;
            it.next()?;
        }
        Ok((n, bytes))
    }

    fn flush(&self) -> EngineResult<()> {
        Ok(self.db.flush()?)
    }

    fn reclaim(&self) -> EngineResult<()> {
        // Dropped handles become garbage only when compaction finds them; then GC reclaims it.
        self.db.compact_range(None, None)?;
        self.db.run_gc()?;
        Ok(())
    }

    fn gc_counters(&self) -> Option<GcCounters> {
        let g = self.db.stats().gc;
        Some(GcCounters {
            jobs: g.jobs,
            value_bytes_read: g.value_bytes_read,
            lookup_bytes_read: g.lookup_bytes_read,
            bytes_written: g.bytes_written,
            read_micros: g.read_micros,
            lookup_micros: g.lookup_micros,
            write_micros: g.write_micros,
        })
    }

    fn stall_seconds(&self) -> Option<f64> {
        let s = self.db.stats().stalls;
        Some((s.slowdown_micros + s.stop_micros) as f64 / 1e6)
    }

    fn io_counters(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self.db.stats().io).ok()
    }

    fn close(&self) -> EngineResult<()> {
        Ok(self.db.close()?)
    }
}
