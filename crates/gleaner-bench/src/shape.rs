//! The shape of the engines' LSM trees: the sizes the harness gives every engine for a dataset
//! (`--shape`), and what each engine's own options become (recorded in `results.json`).
//!
//! The Scavenger paper loads 100 GB into engines with 64 MiB memtables, a 256 MiB level base
//! (RocksDB's `max_bytes_for_level_base`), 64 MiB SSTs, 256 MiB blob files and a 1 GB (1 %)
//! block cache, so RocksDB's tree has four or five levels. A 4 GiB run with the same absolute
//! sizes has two. [`Shape::Paper`] multiplies every size that sets a tree's depth or file count
//! by f = dataset ÷ 100 GB (10¹¹ bytes), for every engine alike, so a small run has the paper's
//! tree shape: as many files and levels as the paper's engines had. [`Shape::Absolute`] keeps
//! the harness's earlier sizes (the papers' absolute ones from 4 GiB up). Counts — the level
//! multiplier (10), the L0 triggers, immutable-memtable limits — are not sizes and stay as they
//! are. docs/benchmarks.md ("Shape") tabulates the mapping.

use std::collections::BTreeMap;

use clap::ValueEnum;

use crate::engine::{CommonConfig, Compression, EngineKind};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The dataset the paper's sizes belong to: 100 GB, 10¹¹ bytes (Scavenger §4.2 loads 100 GB).
pub const PAPER_DATASET_BYTES: u64 = 100_000_000_000;

/// The paper's memtable (RocksDB `write_buffer_size`): 64 MiB.
pub const PAPER_MEMTABLE_BYTES: u64 = 64 * MIB;
/// The paper's level base (RocksDB `max_bytes_for_level_base`): 256 MiB.
pub const PAPER_LEVEL_BASE_BYTES: u64 = 256 * MIB;
/// The paper's SST target size (RocksDB `target_file_size_base`): 64 MiB.
pub const PAPER_TABLE_BYTES: u64 = 64 * MIB;
/// The paper's blob-file size: 256 MiB.
pub const PAPER_VALUE_FILE_BYTES: u64 = 256 * MIB;
/// Gleaner's GC job input bound at the paper's sizes: its default, 512 MiB, two value tables.
pub const PAPER_GC_INPUT_BYTES: u64 = gleaner::options::DEFAULT_GC_MAX_INPUT_SIZE;

/// Smallest memtable and table size under `paper`: 512 KiB. Two memtables are then fjall's
/// minimum write-buffer budget (1 MiB), a file still holds 32 of the largest (16 KiB) values,
/// and the floor binds only below 781 MB (where 64 MiB × f = 512 KiB), so every run from 1 GiB
/// up has exactly the paper's proportions. The engines' own minimums are lower (RocksDB's write
/// buffer 64 KiB, Gleaner's sizes 1 KiB).
pub const PAPER_MEMTABLE_MIN: u64 = 512 * KIB;
/// Smallest key-table / SST / segment target under `paper`: 512 KiB (as the memtable).
pub const PAPER_TABLE_MIN: u64 = 512 * KIB;
/// Smallest level base under `paper`: 2 MiB, four smallest tables (the paper's ratio).
pub const PAPER_LEVEL_BASE_MIN: u64 = 2 * MIB;
/// Smallest value-file target under `paper`: 2 MiB (the paper's 4:1 to tables).
pub const PAPER_VALUE_FILE_MIN: u64 = 2 * MIB;
/// Smallest GC job input bound under `paper`: 4 MiB, two smallest value files.
pub const PAPER_GC_INPUT_MIN: u64 = 4 * MIB;

/// Memtable ceiling under `absolute` (the papers' 64 MiB).
const ABSOLUTE_MEMTABLE_MAX: u64 = 64 * MIB;
/// Smallest memtable under `absolute`.
const ABSOLUTE_MEMTABLE_MIN: u64 = MIB;
/// Largest key-table target under `absolute` (the papers' 64 MiB).
const ABSOLUTE_TABLE_MAX: u64 = 64 * MIB;
/// Smallest key-table target under `absolute`.
const ABSOLUTE_TABLE_MIN: u64 = 2 * MIB;
/// Largest value-file target under `absolute` (the papers' 256 MiB).
const ABSOLUTE_VALUE_FILE_MAX: u64 = 256 * MIB;
/// Smallest value-file target under `absolute`.
const ABSOLUTE_VALUE_FILE_MIN: u64 = 8 * MIB;

/// RocksDB's default `max_bytes_for_level_base` (256 MiB), used under `absolute`.
pub const ROCKSDB_DEFAULT_LEVEL_BASE: u64 = 256 * MIB;
/// RocksDB's `write_buffer_size` minimum (it clips smaller values up to this).
pub const ROCKSDB_WRITE_BUFFER_MIN: u64 = 64 * KIB;
/// RocksDB's default `max_write_buffer_number`: with `max_total_wal_size` at its default 0,
/// RocksDB caps the WALs at 4 × this × `write_buffer_size`.
const ROCKSDB_MAX_WRITE_BUFFER_NUMBER: u64 = 2;
/// fjall's Leveled `l0_threshold` (its default, 4): its level base is `target_size` × this.
pub const FJALL_L0_THRESHOLD: u8 = 4;
/// fjall's smallest `max_write_buffer_size` (it panics below).
const FJALL_WRITE_BUFFER_MIN: u64 = MIB;
/// fjall's smallest `max_journaling_size` (it panics below).
const FJALL_JOURNAL_MIN: u64 = 24 * MIB;

/// How the harness sizes the engines' memtables, files and levels for a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Shape {
    /// The harness's sizes before `--shape` existed: memtable dataset ÷ 32 (1–64 MiB), tables
    /// dataset ÷ 64 (2–64 MiB), value files dataset ÷ 16 (8–256 MiB), every other size the
    /// engine's default (level base 256 MiB for Gleaner and RocksDB): the papers' absolute
    /// sizes from 4 GiB up. The default of `run` and `quick`.
    #[default]
    Absolute,
    /// The paper's sizes × dataset ÷ 100 GB, floored (see the `PAPER_*_MIN` constants): the
    /// tree of a small run has the depth and file counts of the paper's 100 GB one. The
    /// default of `paper`.
    Paper,
}

impl Shape {
    /// The name used on the command line and in results (`absolute`, `paper`).
    pub fn name(self) -> &'static str {
        match self {
            Shape::Absolute => "absolute",
            Shape::Paper => "paper",
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The sizes the harness sets for every engine (each engine maps them onto its own options:
/// [`engine_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Memtable / write buffer.
    pub memtable_bytes: u64,
    /// Target size of a key table / SST / segment.
    pub table_bytes: u64,
    /// Target size of a value table / blob file.
    pub value_file_bytes: u64,
    /// Target size of level 1 (Gleaner's `level_base_size`, RocksDB's
    /// `max_bytes_for_level_base`); `None`: each engine's default (`absolute`).
    pub level_base_bytes: Option<u64>,
    /// Gleaner's `gc_max_input_size`; `None`: its default, 512 MiB (`absolute`).
    pub gc_max_input_bytes: Option<u64>,
}

impl Sizes {
    /// The harness's settings for every engine: these sizes, with `cache_bytes` of block cache
    /// and direct I/O as asked, and the default compression (LZ4).
    pub fn common(self, cache_bytes: u64, direct_io: bool) -> CommonConfig {
        CommonConfig {
            cache_bytes,
            direct_io,
            memtable_bytes: self.memtable_bytes,
            table_bytes: self.table_bytes,
            value_file_bytes: self.value_file_bytes,
            level_base_bytes: self.level_base_bytes,
            gc_max_input_bytes: self.gc_max_input_bytes,
            background_threads: 2,
            compression: Compression::default(),
        }
    }
}

/// `paper_bytes` × `dataset` ÷ 100 GB, rounded to a byte, at least `floor`.
fn scaled(paper_bytes: u64, dataset: u64, floor: u64) -> u64 {
    let f = dataset as f64 / PAPER_DATASET_BYTES as f64;
    ((paper_bytes as f64 * f).round() as u64).max(floor)
}

/// The sizes of `shape` for a dataset of `dataset` bytes (keys and values loaded).
pub fn sizes(shape: Shape, dataset: u64) -> Sizes {
    match shape {
        // Unchanged from before `--shape`: results stay comparable with earlier runs.
        Shape::Absolute => Sizes {
            memtable_bytes: (dataset / 32).clamp(ABSOLUTE_MEMTABLE_MIN, ABSOLUTE_MEMTABLE_MAX),
            table_bytes: (dataset / 64).clamp(ABSOLUTE_TABLE_MIN, ABSOLUTE_TABLE_MAX),
            value_file_bytes: (dataset / 16)
                .clamp(ABSOLUTE_VALUE_FILE_MIN, ABSOLUTE_VALUE_FILE_MAX),
            level_base_bytes: None,
            gc_max_input_bytes: None,
        },
        Shape::Paper => Sizes {
            memtable_bytes: scaled(PAPER_MEMTABLE_BYTES, dataset, PAPER_MEMTABLE_MIN),
            table_bytes: scaled(PAPER_TABLE_BYTES, dataset, PAPER_TABLE_MIN),
            value_file_bytes: scaled(PAPER_VALUE_FILE_BYTES, dataset, PAPER_VALUE_FILE_MIN),
            level_base_bytes: Some(scaled(
                PAPER_LEVEL_BASE_BYTES,
                dataset,
                PAPER_LEVEL_BASE_MIN,
            )),
            // A GC job reads at most two value tables' worth, as at the paper's sizes; left at
            // 512 MiB, one job would take a tenth of a 4 GiB database at once.
            gc_max_input_bytes: Some(scaled(PAPER_GC_INPUT_BYTES, dataset, PAPER_GC_INPUT_MIN)),
        },
    }
}

/// fjall's `max_write_buffer_size` (all memtables of the keyspace): two memtables, at least
/// fjall's minimum of 1 MiB.
pub fn fjall_write_buffer_bytes(memtable_bytes: u64) -> u64 {
    memtable_bytes.saturating_mul(2).max(FJALL_WRITE_BUFFER_MIN)
}

/// fjall's `max_journaling_size`: four memtables, as RocksDB's default `max_total_wal_size`
/// allows (fjall's own default, 512 MiB, would count against small datasets' space budget), at
/// least fjall's minimum of 24 MiB.
pub fn fjall_journal_bytes(memtable_bytes: u64) -> u64 {
    memtable_bytes.saturating_mul(4).max(FJALL_JOURNAL_MIN)
}

/// fjall's Leveled `target_size` (a `u32`): the table size, at most `u32::MAX`.
pub fn fjall_target_size(table_bytes: u64) -> u32 {
    u32::try_from(table_bytes).unwrap_or(u32::MAX)
}

/// The engine family an engine kind's sizes are recorded under (`None` for `null`).
pub fn family(kind: EngineKind) -> Option<&'static str> {
    match kind {
        EngineKind::Gleaner => Some("gleaner"),
        EngineKind::Rocksdb | EngineKind::RocksdbBlob => Some("rocksdb"),
        EngineKind::Fjall | EngineKind::FjallBlob => Some("fjall"),
        EngineKind::Null => None,
    }
}

/// What the harness's sizes in `common` become in the options of engine family `family`
/// (`gleaner`, `rocksdb`, `fjall`), by each engine's own option name, in bytes: the values the
/// engines are opened with, before an engine spec's own options (which win, and show in the
/// engine's name). Values the harness leaves to the engine are the engine's default or its own
/// derivation, as noted. `None` for an unknown family.
pub fn engine_sizes(family: &str, common: &CommonConfig) -> Option<BTreeMap<String, u64>> {
    let c = common;
    let rows: Vec<(&str, u64)> = match family {
        "gleaner" => vec![
            ("memtable_size", c.memtable_bytes),
            ("key_table_size", c.table_bytes),
            (
                "level_base_size",
                c.level_base_bytes
                    .unwrap_or(gleaner::options::DEFAULT_LEVEL_BASE_SIZE),
            ),
            ("value_table_size", c.value_file_bytes),
            (
                "gc_max_input_size",
                c.gc_max_input_bytes
                    .unwrap_or(gleaner::options::DEFAULT_GC_MAX_INPUT_SIZE),
            ),
            ("block_cache_size", c.cache_bytes),
        ],
        "rocksdb" => {
            let write_buffer = c.memtable_bytes.max(ROCKSDB_WRITE_BUFFER_MIN);
            vec![
                ("write_buffer_size", write_buffer),
                ("target_file_size_base", c.table_bytes),
                (
                    "max_bytes_for_level_base",
                    c.level_base_bytes.unwrap_or(ROCKSDB_DEFAULT_LEVEL_BASE),
                ),
                ("blob_file_size", c.value_file_bytes),
                // Left at 0: RocksDB then caps the WALs at 4 × the write buffers it may hold.
                (
                    "max_total_wal_size",
                    4 * ROCKSDB_MAX_WRITE_BUFFER_NUMBER * write_buffer,
                ),
                ("block_cache", c.cache_bytes),
            ]
        }
        "fjall" => {
            let target = u64::from(fjall_target_size(c.table_bytes));
            vec![
                (
                    "max_memtable_size",
                    c.memtable_bytes.min(u64::from(u32::MAX)),
                ),
                ("target_size", target),
                // fjall 2.11's Leveled strategy has no level-base option: its level 1 targets
                // `target_size × l0_threshold`.
                ("level_base_size", target * u64::from(FJALL_L0_THRESHOLD)),
                ("blob_file_target_size", c.value_file_bytes),
                (
                    "max_write_buffer_size",
                    fjall_write_buffer_bytes(c.memtable_bytes),
                ),
                ("max_journaling_size", fjall_journal_bytes(c.memtable_bytes)),
                ("cache_size", c.cache_bytes),
            ]
        }
        _ => return None,
    };
    Some(
        rows.into_iter()
            .map(|(name, bytes)| (name.to_string(), bytes))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn common(shape: Shape, dataset: u64) -> CommonConfig {
        sizes(shape, dataset).common(dataset / 100, true)
    }

    #[test]
    fn absolute_keeps_the_sizes_from_before_the_shape_option() {
        // The rule cli.rs applied before `--shape`: memtable ÷ 32 (1–64 MiB), tables ÷ 64
        // (2–64 MiB), value files ÷ 16 (8–256 MiB), nothing else set.
        for (dataset, memtable, table, value) in [
            (8 * MIB, MIB, 2 * MIB, 8 * MIB),
            (128 * MIB, 4 * MIB, 2 * MIB, 8 * MIB),
            (GIB, 32 * MIB, 16 * MIB, 64 * MIB),
            (4 * GIB, 64 * MIB, 64 * MIB, 256 * MIB),
            (32 * GIB, 64 * MIB, 64 * MIB, 256 * MIB),
        ] {
            assert_eq!(
                sizes(Shape::Absolute, dataset),
                Sizes {
                    memtable_bytes: memtable,
                    table_bytes: table,
                    value_file_bytes: value,
                    level_base_bytes: None,
                    gc_max_input_bytes: None,
                },
                "dataset {dataset}"
            );
        }
        // Engines then use their defaults: Gleaner and RocksDB a 256 MiB level base, fjall
        // four tables, Gleaner 512 MiB GC jobs.
        let c = common(Shape::Absolute, 4 * GIB);
        let g = engine_sizes("gleaner", &c).unwrap();
        assert_eq!(g["level_base_size"], 256 * MIB);
        assert_eq!(g["gc_max_input_size"], 512 * MIB);
        assert_eq!(
            engine_sizes("rocksdb", &c).unwrap()["max_bytes_for_level_base"],
            256 * MIB
        );
        assert_eq!(
            engine_sizes("fjall", &c).unwrap()["level_base_size"],
            256 * MIB
        );
        let c1 = common(Shape::Absolute, GIB);
        assert_eq!(
            engine_sizes("fjall", &c1).unwrap()["level_base_size"],
            64 * MIB
        );
    }

    #[test]
    fn paper_scales_every_size_by_the_dataset_over_100_gb() {
        // At 100 GB exactly the paper's sizes.
        let s = sizes(Shape::Paper, PAPER_DATASET_BYTES);
        assert_eq!(s.memtable_bytes, 64 * MIB);
        assert_eq!(s.table_bytes, 64 * MIB);
        assert_eq!(s.value_file_bytes, 256 * MIB);
        assert_eq!(s.level_base_bytes, Some(256 * MIB));
        assert_eq!(s.gc_max_input_bytes, Some(512 * MIB));
        // 4 GiB: f = 4·2³⁰ ÷ 10¹¹ = 0.04294967296.
        let s = sizes(Shape::Paper, 4 * GIB);
        assert_eq!(s.memtable_bytes, 2_882_304); // 64 MiB × f = 2,882,303.76
        assert_eq!(s.table_bytes, 2_882_304);
        assert_eq!(s.value_file_bytes, 11_529_215); // 256 MiB × f = 11,529,215.05
        assert_eq!(s.level_base_bytes, Some(11_529_215));
        assert_eq!(s.gc_max_input_bytes, Some(23_058_430));
        // 32 GiB: eight times the 4 GiB sizes (up to rounding).
        let s = sizes(Shape::Paper, 32 * GIB);
        assert_eq!(s.memtable_bytes, 23_058_430);
        assert_eq!(s.level_base_bytes, Some(92_233_720));
        // 1 GiB: above every floor.
        let s = sizes(Shape::Paper, GIB);
        assert_eq!(s.memtable_bytes, 720_576);
        assert_eq!(s.value_file_bytes, 2_882_304);
    }

    #[test]
    fn paper_floors_bind_on_small_datasets() {
        let s = sizes(Shape::Paper, 8 * MIB);
        assert_eq!(
            s,
            Sizes {
                memtable_bytes: PAPER_MEMTABLE_MIN,
                table_bytes: PAPER_TABLE_MIN,
                value_file_bytes: PAPER_VALUE_FILE_MIN,
                level_base_bytes: Some(PAPER_LEVEL_BASE_MIN),
                gc_max_input_bytes: Some(PAPER_GC_INPUT_MIN),
            }
        );
        // The floors keep the paper's ratios: level base and value file 4 tables, GC 2 files.
        assert_eq!(PAPER_LEVEL_BASE_MIN, 4 * PAPER_TABLE_MIN);
        assert_eq!(PAPER_VALUE_FILE_MIN, 4 * PAPER_TABLE_MIN);
        assert_eq!(PAPER_GC_INPUT_MIN, 2 * PAPER_VALUE_FILE_MIN);
        // Just above 781 MB nothing is floored any more.
        let s = sizes(Shape::Paper, 782_000_000);
        assert!(s.memtable_bytes > PAPER_MEMTABLE_MIN, "{s:?}");
        assert!(s.level_base_bytes.unwrap() > PAPER_LEVEL_BASE_MIN, "{s:?}");
    }

    #[test]
    fn paper_gives_every_engine_the_same_shape() {
        let c = common(Shape::Paper, 4 * GIB);
        let g = engine_sizes("gleaner", &c).unwrap();
        let r = engine_sizes("rocksdb", &c).unwrap();
        let f = engine_sizes("fjall", &c).unwrap();
        assert_eq!(g["memtable_size"], 2_882_304);
        assert_eq!(r["write_buffer_size"], 2_882_304);
        assert_eq!(f["max_memtable_size"], 2_882_304);
        assert_eq!(g["key_table_size"], r["target_file_size_base"]);
        assert_eq!(g["key_table_size"], f["target_size"]);
        assert_eq!(g["level_base_size"], 11_529_215);
        assert_eq!(r["max_bytes_for_level_base"], 11_529_215);
        // fjall's level base is 4 tables: 4 × 2,882,304, one rounding away from the others'.
        assert_eq!(f["level_base_size"], 11_529_216);
        assert_eq!(g["value_table_size"], r["blob_file_size"]);
        assert_eq!(g["value_table_size"], f["blob_file_target_size"]);
        assert_eq!(g["gc_max_input_size"], 23_058_430);
        // WAL and journal caps follow the memtable; fjall's journal has its 24 MiB minimum.
        assert_eq!(r["max_total_wal_size"], 8 * 2_882_304);
        assert_eq!(f["max_journaling_size"], 24 * MIB);
        assert_eq!(f["max_write_buffer_size"], 2 * 2_882_304);
        // The floors are above every engine's own minimum.
        let tiny = common(Shape::Paper, 8 * MIB);
        let f = engine_sizes("fjall", &tiny).unwrap();
        assert_eq!(f["max_write_buffer_size"], MIB);
        assert!(engine_sizes("rocksdb", &tiny).unwrap()["write_buffer_size"] >= 64 * KIB);
        assert_eq!(engine_sizes("null", &tiny), None);
    }

    #[test]
    fn shape_names() {
        assert_eq!(Shape::default(), Shape::Absolute);
        assert_eq!(Shape::Paper.to_string(), "paper");
        assert_eq!(Shape::from_str("absolute", false), Ok(Shape::Absolute));
        assert!(Shape::from_str("scaled", false).is_err());
    }
}
