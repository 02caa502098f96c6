//! Gleaner under test: `gleaner[:POLICY][,option=value...]`, where options are any
//! `gleaner::Options` names (as for `gleaner --option`). Besides the engine's policy names,
//! POLICY may be one of the Scavenger paper's ablation variants (§4.4): `tdb` (= `terarkdb`)
//! and `tdb-` followed by the letters of the techniques switched on, `r` (lazy read,
//! `gc_lazy_read`), `l` (index-decoupled lookups, `index_decoupled_tables`), `w` (hotness-aware
//! writing, `hotness_aware_writes`): `tdb-r`, `tdb-l`, `tdb-w`, `tdb-rw`, `tdb-rwl`.

use std::path::Path;

use gleaner::{Db, Options, ReadOptions};

use super::{CommonConfig, Compression, Engine, EngineResult, EngineSpec, Found, GcCounters};
use crate::results::{LevelShape, TreeShape};

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
        // Set only under `--shape paper`; otherwise Gleaner's defaults, as before the option.
        if let Some(bytes) = c.level_base_bytes {
            o = o.with_level_base_size(bytes);
        }
        if let Some(bytes) = c.gc_max_input_bytes {
            o = o.with_gc_max_input_size(bytes);
        }
        // The spec's own `compression` option, applied below, wins over the harness's.
        o = o.with_compression(compression(c.compression));
    }
    if let Some(policy) = &spec.policy {
        for (name, value) in policy_options(policy)? {
            o.set(name, value)
                .map_err(|e| format!("engine `{spec}`: {e}"))?;
        }
    }
    for (name, value) in &spec.options {
        o.set(name, value)
            .map_err(|e| format!("engine `{spec}`: {e}"))?;
    }
    o.validate().map_err(|e| format!("engine `{spec}`: {e}"))?;
    Ok(o)
}

/// Gleaner's `compression` for the harness's `--compression`.
fn compression(c: Compression) -> gleaner::Compression {
    match c {
        Compression::None => gleaner::Compression::None,
        Compression::Lz4 => gleaner::Compression::Lz4,
    }
}

/// The options a policy name stands for: `dpkv` is DP-KV's partitioned index tree under the
/// default GC policy (`gc_policy=scavenger,partitioning=dpkv`: the paper is no GC scheme, so
/// it composes with one); an ablation variant (`tdb`, `tdb-rw`, ...) becomes
/// `gc_policy=terarkdb` plus one switch per letter; any other name is passed as `gc_policy`.
fn policy_options(policy: &str) -> Result<Vec<(&'static str, &str)>, String> {
    if policy == "dpkv" {
        return Ok(vec![("gc_policy", "scavenger"), ("partitioning", "dpkv")]);
    }
    let letters = match policy.strip_prefix("tdb") {
        Some("") => "",
        Some(rest) => match rest.strip_prefix('-') {
            Some(l) if !l.is_empty() => l,
            _ => {
                return Err(format!(
                    "policy `{policy}`: expected `tdb` or `tdb-` and letters r, l, w"
                ));
            }
        },
        None => return Ok(vec![("gc_policy", policy)]),
    };
    let mut out = vec![("gc_policy", "terarkdb")];
    for (i, c) in letters.char_indices() {
        let switch = match c {
            'r' => "gc_lazy_read",
            'l' => "index_decoupled_tables",
            'w' => "hotness_aware_writes",
            _ => {
                return Err(format!(
                    "policy `{policy}`: unknown technique `{c}` (r = lazy read, l = index-decoupled lookups, w = hotness-aware writing)"
                ));
            }
        };
        if letters[..i].contains(c) {
            return Err(format!("policy `{policy}`: technique `{c}` named twice"));
        }
        out.push((switch, "on"));
    }
    Ok(out)
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

    fn delete_range(&self, start: &[u8], end: &[u8]) -> EngineResult<()> {
        Ok(self.db.delete_range(start, end)?)
    }

    fn put_with_ttl(&self, key: &[u8], value: &[u8], ttl_ms: u64) -> EngineResult<()> {
        Ok(self.db.put_with_ttl(key, value, ttl_ms)?)
    }

    fn supports_ttl(&self) -> bool {
        true
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
        let stats = self.db.stats();
        let g = stats.gc;
        let mut policy = g.policy_stats.clone();
        // A partitioned tree's figures ride along (they are the partitioning's, not the GC
        // policy's): the moves' volume, the detector's memory, and where reads were served.
        let p = stats.partitions;
        if p.partitioned {
            for (name, value) in [
                ("partition_moves", p.moves),
                ("partition_entries_to_hot", p.entries_moved_to_hot),
                ("partition_entries_to_cold", p.entries_moved_to_cold),
                ("partition_move_bytes", p.move_bytes),
                ("partition_move_micros", p.move_micros),
                ("partition_move_wait_micros", p.move_wait_micros),
                ("partition_hot_gets", p.hot_gets),
                ("partition_cold_gets", p.cold_gets),
                ("partition_hot_bytes", p.hot_bytes),
                ("partition_trie_bytes", p.trie_bytes),
                ("partition_hot_prefixes", p.hot_prefixes),
            ] {
                policy.insert(name.to_string(), value);
            }
        }
        Some(GcCounters {
            jobs: g.jobs,
            value_bytes_read: g.value_bytes_read,
            index_bytes_read: g.index_bytes_read,
            lookup_bytes_read: g.lookup_bytes_read,
            // Scavenger reports it itself (absent under other policies).
            drop_cache_answers: g
                .policy_stats
                .get("drop_cache_answers")
                .copied()
                .unwrap_or(0),
            bytes_written: g.bytes_written,
            bytes_written_by_class: g.bytes_written_by_class,
            relocated_bytes: g.relocated_bytes,
            written_back: g.written_back,
            read_micros: g.read_micros,
            lookup_micros: g.lookup_micros,
            paced_micros: g.paced_micros,
            job_micros: g.job_micros,
            compaction_wait_micros: g.compaction_wait_micros,
            write_micros: g.write_micros,
            policy,
        })
    }

    fn stall_seconds(&self) -> Option<f64> {
        let s = self.db.stats().stalls;
        Some((s.slowdown_micros + s.stop_micros + s.space_wait_micros) as f64 / 1e6)
    }

    fn io_counters(&self) -> Option<serde_json::Value> {
        let s = self.db.stats();
        let mut v = serde_json::to_value(s.io).ok()?;
        // How point reads found their values: with these, device bytes per read can be told
        // apart by cause (a lookup through inheritance reads a dense-index block as well).
        if let Some(map) = v.as_object_mut() {
            map.insert("gets".into(), s.operations.gets.into());
            map.insert("gets_separated".into(), s.operations.gets_separated.into());
            map.insert(
                "gets_via_inheritance".into(),
                s.operations.gets_via_inheritance.into(),
            );
            // `novkv`: aliases reads wrote, so the key's next read needs no search; those a
            // newer write made moot; those dropped for want of room or queue space.
            map.insert(
                "handle_updates_written".into(),
                s.operations.handle_updates_written.into(),
            );
            map.insert(
                "handle_updates_skipped".into(),
                s.operations.handle_updates_skipped.into(),
            );
            map.insert(
                "handle_updates_dropped".into(),
                s.operations.handle_updates_dropped.into(),
            );
            // Which trigger stopped writers (L0 or the immutable memtables) and what flushes
            // and compactions cost, per phase: the engine's own stalls are otherwise one figure.
            if let Ok(stalls) = serde_json::to_value(&s.stalls) {
                map.insert("stalls".into(), stalls);
            }
            if let Ok(compaction) = serde_json::to_value(&s.compaction) {
                map.insert("compaction".into(), compaction);
            }
            // What the engine believes is garbage against what is on disk: with the harness's
            // exact live bytes beside them, the hidden garbage (obsolete handles compaction has
            // not yet dropped) is `live_data_estimate − live_bytes`.
            map.insert(
                crate::runner::AT_END.into(),
                serde_json::json!({
                    "tables": s.values.tables,
                    "records": s.values.records,
                    "record_bytes": s.values.record_bytes,
                    "garbage_records": s.values.garbage_records,
                    "garbage_bytes": s.values.garbage_bytes,
                    "drops_reclaimed_early": s.values.drops_reclaimed_early,
                    "live_data_estimate": s.space.live_data_estimate,
                    "gc_records_read": s.gc.records_read,
                    "gc_records_dropped": s.gc.records_dropped,
                }),
            );
        }
        Some(v)
    }

    fn tree_shape(&self) -> Option<TreeShape> {
        let s = self.db.stats();
        let levels = s
            .levels
            .iter()
            .map(|l| LevelShape {
                files: l.files as u64,
                bytes: l.bytes,
            })
            .collect();
        // Retired tables (policy `titan`) are files on disk too, named by older versions.
        let value_files = (s.values.tables + s.values.retired_tables) as u64;
        Some(TreeShape::new(levels, Some(value_files)))
    }

    fn close(&self) -> EngineResult<()> {
        Ok(self.db.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(shape: crate::shape::Shape, dataset: u64) -> CommonConfig {
        crate::shape::sizes(shape, dataset).common(1 << 20, false)
    }

    #[test]
    fn dpkv_is_the_partitioned_tree_under_the_default_policy() {
        let spec: EngineSpec = "gleaner:dpkv".parse().expect("spec");
        let o = options(&spec, None).expect("options");
        assert_eq!(o.partitioning(), gleaner::Partitioning::Dpkv);
        assert_eq!(o.gc_policy(), gleaner::GcPolicyKind::Scavenger);
        // Its options compose, and another policy may be asked for after it.
        let tuned: EngineSpec = "gleaner:dpkv,dpkv_hot_density=8,gc_policy=titan"
            .parse()
            .expect("spec");
        let o = options(&tuned, None).expect("options");
        assert_eq!(o.dpkv_hot_density(), 8.0);
        assert_eq!(o.gc_policy(), gleaner::GcPolicyKind::Titan);
        assert_eq!(o.partitioning(), gleaner::Partitioning::Dpkv);
    }

    #[test]
    fn the_shape_reaches_gleaners_options() {
        use crate::shape::Shape;
        let spec: EngineSpec = "gleaner:scavenger".parse().expect("spec");
        let paper = options(&spec, Some(&common(Shape::Paper, 4 << 30))).expect("options");
        assert_eq!(paper.memtable_size(), 2_882_304);
        assert_eq!(paper.key_table_size(), 2_882_304);
        assert_eq!(paper.level_base_size(), 11_529_215);
        assert_eq!(paper.value_table_size(), 11_529_215);
        assert_eq!(paper.gc_max_input_size(), 23_058_430);
        // `absolute` leaves level base and GC job size to Gleaner, as before `--shape`.
        let absolute = options(&spec, Some(&common(Shape::Absolute, 4 << 30))).expect("options");
        assert_eq!(absolute.memtable_size(), 64 << 20);
        assert!(!absolute.is_overridden("level_base_size"));
        assert!(!absolute.is_overridden("gc_max_input_size"));
        assert_eq!(absolute.level_base_size(), 256 << 20);
        // An engine spec's own option still wins.
        let own: EngineSpec = "gleaner:scavenger,level_base_size=1048576"
            .parse()
            .expect("spec");
        let own = options(&own, Some(&common(Shape::Paper, 4 << 30))).expect("options");
        assert_eq!(own.level_base_size(), 1 << 20);
    }

    #[test]
    fn the_compression_flag_reaches_gleaners_options() {
        use crate::shape::Shape;
        let spec: EngineSpec = "gleaner:scavenger".parse().expect("spec");
        let with = |compression| CommonConfig {
            compression,
            ..common(Shape::Absolute, 64 << 20)
        };
        // The default is what Gleaner always had.
        let default = options(&spec, Some(&common(Shape::Absolute, 64 << 20))).expect("options");
        assert_eq!(default.compression(), gleaner::Compression::Lz4);
        let none = options(&spec, Some(&with(Compression::None))).expect("options");
        assert_eq!(none.compression(), gleaner::Compression::None);
        assert!(none.is_overridden("compression"));
        let lz4 = options(&spec, Some(&with(Compression::Lz4))).expect("options");
        assert_eq!(lz4.compression(), gleaner::Compression::Lz4);
        // An engine spec's own option wins, as for the sizes.
        let own: EngineSpec = "gleaner:scavenger,compression=lz4".parse().expect("spec");
        let own_none = options(&own, Some(&with(Compression::None))).expect("options");
        assert_eq!(own_none.compression(), gleaner::Compression::Lz4);
    }

    #[test]
    fn every_policy_name_is_an_engine() {
        for (name, threshold) in [
            ("novkv", None),
            ("novkv,novkv_valid_threshold=0.5", Some(0.5)),
        ] {
            let spec: EngineSpec = format!("gleaner:{name}").parse().expect("spec");
            let o = options(&spec, None).expect("options");
            assert_eq!(o.gc_policy(), gleaner::GcPolicyKind::Novkv, "{name}");
            assert_eq!(
                o.novkv_valid_threshold(),
                threshold.unwrap_or(0.7),
                "{name}"
            );
        }
        for p in gleaner::GcPolicyKind::ALL {
            let spec: EngineSpec = format!("gleaner:{}", p.name()).parse().expect("spec");
            assert_eq!(options(&spec, None).expect("options").gc_policy(), p);
        }
    }

    #[test]
    fn gleaner_reports_files_per_level_and_value_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec: EngineSpec = "gleaner:terarkdb,inline_background_work=true"
            .parse()
            .expect("spec");
        let engine = GleanerEngine::open(
            &spec,
            dir.path(),
            &common(crate::shape::Shape::Paper, 8 << 20),
        )
        .expect("open");
        let empty = engine.tree_shape().expect("tree");
        assert_eq!(empty.levels_in_use, 0);
        assert_eq!(empty.levels.len(), 7, "Gleaner's seven levels");
        assert_eq!(empty.value_files, Some(0));
        // 40 values of 4 KiB (separated) in one flush: one L0 table, one value table.
        let flush_40 = |round: u32| {
            for i in 0..40u32 {
                engine
                    .put(format!("key{round}-{i:04}").as_bytes(), &[7u8; 4096])
                    .expect("put");
            }
            engine.flush().expect("flush");
        };
        flush_40(0);
        let one = engine.tree_shape().expect("tree");
        assert_eq!(one.levels_in_use, 1);
        assert_eq!(one.levels[0].files, 1);
        assert!(one.levels[0].bytes > 0);
        assert_eq!(one.value_files, Some(1));
        // The fourth L0 table triggers a compaction (run inline): the tables move below L0.
        (1..4).for_each(flush_40);
        let moved = engine.tree_shape().expect("tree");
        assert_eq!(moved.levels[0].files, 0, "{moved:?}");
        assert_eq!(moved.levels_in_use, 1, "{moved:?}");
        let below: u64 = moved.levels[1..].iter().map(|l| l.files).sum();
        assert!(below >= 1, "{moved:?}");
        assert_eq!(
            moved.value_files,
            Some(4),
            "compaction keeps the value tables"
        );
        engine.close().expect("close");
    }

    #[test]
    fn delete_range_removes_exactly_the_range() {
        use crate::workload::KeyFormat;
        use crate::workload::delete_range::{key_range, write_bounds};
        let dir = tempfile::tempdir().expect("tempdir");
        let spec: EngineSpec = "gleaner".parse().expect("spec");
        let engine = GleanerEngine::open(
            &spec,
            dir.path(),
            &common(crate::shape::Shape::Absolute, 1 << 20),
        )
        .expect("open");
        assert!(engine.supports_delete_range());
        let keys = KeyFormat::default();
        for n in 0..300 {
            engine.put(&keys.key(n), &[n as u8; 100]).expect("put");
        }
        // Half the keys in a table, half in the memtable: the range spans both.
        engine.flush().expect("flush");
        for n in 300..600 {
            engine.put(&keys.key(n), &[n as u8; 100]).expect("put");
        }
        let numbers = key_range(250, 600, 100);
        let (mut start, mut end) = (Vec::new(), Vec::new());
        write_bounds(&keys, &numbers, &mut start, &mut end);
        engine.delete_range(&start, &end).expect("delete_range");
        for n in 0..600 {
            let found = engine.get(&keys.key(n)).expect("get");
            assert_eq!(found.is_none(), numbers.contains(&n), "key #{n}");
        }
        assert_eq!(engine.scan(b"", 1_000).expect("scan").0, 500);
        // The engine refuses an empty range rather than deleting nothing silently.
        assert!(engine.delete_range(&end, &start).is_err());
        engine.close().expect("close");
    }

    #[test]
    fn ablation_names_become_a_policy_and_switches() {
        assert_eq!(
            policy_options("tdb").unwrap(),
            vec![("gc_policy", "terarkdb")]
        );
        assert_eq!(
            policy_options("tdb-r").unwrap(),
            vec![("gc_policy", "terarkdb"), ("gc_lazy_read", "on")]
        );
        assert_eq!(
            policy_options("tdb-rwl").unwrap(),
            vec![
                ("gc_policy", "terarkdb"),
                ("gc_lazy_read", "on"),
                ("hotness_aware_writes", "on"),
                ("index_decoupled_tables", "on"),
            ]
        );
        assert_eq!(
            policy_options("scavenger").unwrap(),
            vec![("gc_policy", "scavenger")]
        );
        for bad in ["tdb-", "tdb-x", "tdb-rr", "tdbr"] {
            assert!(policy_options(bad).is_err(), "{bad}");
        }
    }
}
